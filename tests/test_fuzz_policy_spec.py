"""Fuzzing (Hypothesis) of policy specs: :func:`contactflow.policy.load_policy_spec` on mutated copies
of the shipped specs (``robots/g1/policies/{lac,holosoma_g1_29dof_loco,reference}.yaml``).

The ONNX models are built here with each spec's I/O (:mod:`contactflow.policy.testing`, no
third-party weights; the holosoma one carries ``dof_names``/``kp``/``kd`` metadata) and given with
``model=``, so the spec is checked against a real model and the robot. Mutations: keys removed,
retyped, out of range, non-finite, lists cut or grown (joint orders, observation terms, shapes),
unknown keys. Outcome: a spec whose arrays are finite and whose frame fills the model input, or a
ConfigError / ModelError naming the spec file; never another exception type, never a hang.
More examples: ``CONTACTFLOW_FUZZ_EXAMPLES=2000``.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from contactflow.errors import ContactflowError
from contactflow.policy import load_policy_spec
from contactflow.robot import load_robot, robots_dir
from fuzz_support import fuzz_settings, mutate, outcome, yaml_values

pytest.importorskip("onnx")

POLICIES = robots_dir() / "g1" / "policies"
#: spec -> (robot, model input name, input shape, outputs, metadata)
SPECS = {
    "lac": ("g1", "frames", (1, 64, 95), 23, None),
    "reference": ("g1", "obs", (1, 154), 23, None),
    "holosoma_g1_29dof_loco": ("g1_29dof", "actor_obs", (1, 100), 29, "holosoma"),
}
DOCS = {name: yaml.safe_load((POLICIES / f"{name}.yaml").read_text()) for name in SPECS}


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    from contactflow.policy.testing import mlp_model

    d = tmp_path_factory.mktemp("policy_models")
    robots = {r: load_robot(r) for r in ("g1", "g1_29dof")}
    models = {}
    for name, (robot, inp, shape, n_out, meta) in SPECS.items():
        metadata = None
        if meta == "holosoma":
            names = list(DOCS[name]["joint_orders"]["policy"]) if isinstance(DOCS[name]["joint_orders"]["policy"], list) \
                else list(robots[robot].joint_names)
            metadata = {"dof_names": names, "kp": [40.0] * n_out, "kd": [1.0] * n_out}
        models[name], _ = mlp_model(d / f"{name}.onnx", input_name=inp, input_shape=shape, n_out=n_out, metadata=metadata)
    return robots, models


def test_the_shipped_specs_load_with_their_models(env):
    robots, models = env
    for name, (robot, *_rest) in SPECS.items():
        spec = load_policy_spec(POLICIES / f"{name}.yaml", robots[robot], model=models[name])
        assert spec.frame_dim * spec.cfg.history.length == int(np.prod(SPECS[name][2]))


@fuzz_settings(30)
@given(data=st.data())
def test_a_policy_spec_loads_or_is_refused_naming_the_file(env, tmp_path_factory, data):
    robots, models = env
    name = data.draw(st.sampled_from(sorted(SPECS)), label="spec")
    how = data.draw(st.sampled_from(["mutated"] * 5 + ["garbage"]), label="how")
    doc = mutate(data, DOCS[name]) if how == "mutated" else data.draw(yaml_values, label="document")
    path = tmp_path_factory.mktemp("spec") / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    robot = robots[SPECS[name][0]]
    got = outcome(lambda: load_policy_spec(path, robot, model=models[name]), str(path), what=f"policy spec {name}")
    if isinstance(got, ContactflowError):
        return
    for attr in ("default_policy", "default_robot", "scale", "kp", "kd", "q_min", "q_max"):
        assert np.all(np.isfinite(getattr(got, attr))), f"{attr}: {getattr(got, attr)}"
    assert got.frame_dim * got.cfg.history.length == int(np.prod(SPECS[name][2]))
    assert sorted(got.joint_names) == sorted(robot.joint_names)
