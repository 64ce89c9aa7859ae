"""Learned joint-position policies (ONNX) under a YAML I/O spec: the library side of ``lac_policy``.

* :func:`load_policy_spec` -- read a spec, open its ONNX model, check both against a robot.
* :class:`PolicyRunner` -- observation terms -> history -> onnxruntime -> PD joint command, with
  the output safety check and decimation.
* :data:`OBS_TERMS` -- the registry of observation terms.
* :func:`fetch_holosoma` -- holosoma's G1 locomotion models from the PyPI wheel, at run time.
* :func:`run_policy_loop` -- an in-process closed loop (policy + G1 PD simulator).
"""

from contactflow.policy.holosoma import ModelFetchError, fetch_holosoma
from contactflow.policy.loop import run_policy_loop
from contactflow.policy.onnx_model import OnnxModel
from contactflow.policy.runner import PolicyOutput, PolicyRunner
from contactflow.policy.spec import PolicySpec, load_policy_spec, policies_dir
from contactflow.policy.terms import OBS_TERMS, projected_gravity

__all__ = [
    "OBS_TERMS", "ModelFetchError", "OnnxModel", "PolicyOutput", "PolicyRunner", "PolicySpec", "fetch_holosoma",
    "load_policy_spec", "policies_dir", "projected_gravity", "run_policy_loop",
]
