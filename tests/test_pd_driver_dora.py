"""Real `dora run` of a two-node graph: mujoco_driver --robot g1 and a PD commander fixture, in
lockstep (the optional wrench input not wired: the driver must not wait for it) and in realtime."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from contactflow.robot import load_robot

ROOT = Path(__file__).resolve().parent.parent
DORA = shutil.which("dora") or str(Path(sys.executable).parent / "dora")
pytestmark = pytest.mark.dora


def _graph(tmp_path: Path, realtime: bool, ticks: int) -> Path:
    rt = " --realtime" if realtime else ""
    q = {"queue_size": 100, "queue_policy": "backpressure"} if not realtime else {"queue_size": 1}
    flow = {"nodes": [
        {"id": "mujoco_driver", "path": str(ROOT / "nodes" / "mujoco_driver.py"), "args": f"--robot g1{rt}",
         "inputs": {"command": {"source": "commander/command", **q}}, "outputs": ["sensors"]},
        {"id": "commander", "path": str(ROOT / "tests" / "fixtures" / "pd_commander.py"),
         "args": f"--ticks {ticks} --bad-tick 5 --out {tmp_path / 'seen.json'}{rt}",
         "inputs": {"tick": {"source": "mujoco_driver/sensors", **q}}, "outputs": ["command"]},
    ]}
    path = tmp_path / "pd_graph.yml"
    path.write_text(yaml.safe_dump(flow))
    return path


@pytest.mark.parametrize("realtime", [False, True], ids=["lockstep", "realtime"])
def test_g1_driver_in_a_graph_holds_the_last_safe_command(tmp_path, realtime):
    ticks = 50  # 1 s of simulated time
    proc = subprocess.run([DORA, "run", str(_graph(tmp_path, realtime, ticks))], cwd=ROOT, env=dict(os.environ),
                          capture_output=True, text=True, timeout=180)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    seen = json.loads((tmp_path / "seen.json").read_text())
    g1 = load_robot("g1")
    if not realtime:
        assert seen["k"] == list(range(ticks))
        assert seen["t"][-1] == pytest.approx(0.02 * (ticks - 1))  # one sensors message per 20 ms
        assert "2 commands were not applied" in out, out[-3000:]
        assert "non-finite value(s) in field(s) ['q_target']" in out, out[-3000:]  # refused by the contract
        assert "q_target: outside the joint limits at joint index [3]" in out, out[-3000:]  # by the hold
    else:  # wall-clock paced, small queues: ticks may be skipped, so the bad ticks may never be sent
        assert seen["k"][-1] == ticks - 1 and "simulation ended at t = 1.000 s after 50 ticks" in out
    assert min(seen["h"]) > g1.fall_height_m and seen["q_final"][2] > 0.7  # still standing
