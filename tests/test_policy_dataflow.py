"""lac_policy in a real dora graph: LAC's spec with a fixture model that outputs NaN after N ticks.

The LAC teleop graph with ``lac_expert`` swapped for ``lac_policy`` (the one node that changes):
the NaN actions are never sent; the recorded joint command holds the last safe target with
``ok = 0`` from tick N on, and the driver keeps running on it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from contactflow.recording.store import read_recording
from contactflow.robot import load_robot

pytest.importorskip("onnx")
pytestmark = pytest.mark.dora

ROOT = Path(__file__).resolve().parent.parent
DORA = shutil.which("dora") or str(Path(sys.executable).parent / "dora")
N_GOOD = 25  # ticks before the fixture model outputs NaN (0.5 s at 50 Hz)


def _policy_graph(tmp_path: Path, model: Path) -> Path:
    graph = yaml.safe_load((ROOT / "dataflows" / "lac_g1_teleop.yml").read_text())
    for node in graph["nodes"]:
        if node["path"].endswith(".py"):  # a script path (installed executables are found on PATH)
            node["path"] = str((ROOT / "dataflows" / node["path"]).resolve())
        if node["id"] == "lac_expert":
            node["id"] = "lac_policy"
            node["path"] = str(ROOT / "nodes" / "lac_policy.py")
            node["args"] = f"--robot g1 --spec {ROOT / 'robots/g1/policies/lac.yaml'} --model {model}"
        for inp in (node.get("inputs") or {}).values():
            if isinstance(inp, dict) and inp["source"].startswith("lac_expert/"):
                inp["source"] = inp["source"].replace("lac_expert/", "lac_policy/")
    out = tmp_path / "lac_g1_policy.yml"
    out.write_text(yaml.safe_dump(graph, sort_keys=False))
    return out


def test_nan_policy_output_is_never_sent_and_the_last_safe_target_is_held(tmp_path):
    from contactflow.policy.testing import counter_model

    model = counter_model(tmp_path / "nan_after.onnx", input_name="frames", input_shape=(1, 64, 95),
                          last_action_flat=slice(63 * 95 + 67, 63 * 95 + 90), nan_after=N_GOOD)
    env = dict(os.environ, CONTACTFLOW_RECORDINGS=str(tmp_path / "recordings"),
               CONTACTFLOW_SCENARIO=str(ROOT / "robots/g1/scenarios/smoke_4s.yaml"))
    proc = subprocess.run([DORA, "run", str(_policy_graph(tmp_path, model))], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    runs = sorted(p for p in (tmp_path / "recordings").iterdir() if p.is_dir() and not p.is_symlink())
    assert runs, out[-3000:]
    rec = read_recording(runs[0])
    jc = rec.stream("lac_policy.command")
    ok, q = jc.field("ok")[:, 0], jc.field("q_target")
    assert len(jc) > N_GOOD + 20, out[-3000:]  # the run went on well past the first NaN
    assert np.isfinite(q).all()
    g1 = load_robot("g1")
    scale = 0.25 * g1.tau_max / g1.K
    for k in range(N_GOOD):
        assert ok[k] == 1.0
        np.testing.assert_allclose(q[k], g1.theta_default + scale * 1e-3 * (k + 1), atol=1e-6)
    assert np.all(ok[N_GOOD:] == 0.0)
    np.testing.assert_array_equal(q[N_GOOD:], np.broadcast_to(q[N_GOOD - 1], q[N_GOOD:].shape))
    sensors = rec.stream("mujoco_driver.sensors")
    assert len(sensors) >= len(jc) and np.isfinite(sensors.field("q")).all()
    assert "output refused (non-finite action" in out
