"""Real `dora run` of a two-node graph: mujoco_driver --robot g1 and a PD commander fixture, in
lockstep (the optional wrench input not wired: the driver must not wait for it; a recorder keeps
the driver's configuration) and in realtime (also with a commander that goes silent: damping
mode, then the gain ramp)."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from contactflow.recording.store import read_recording
from contactflow.robot import load_robot

ROOT = Path(__file__).resolve().parent.parent
DORA = shutil.which("dora") or str(Path(sys.executable).parent / "dora")
pytestmark = pytest.mark.dora


def _graph(tmp_path: Path, realtime: bool, ticks: int, commander_args: str = "") -> Path:
    rt = " --realtime" if realtime else ""
    q = {"queue_size": 100, "queue_policy": "backpressure"} if not realtime else {"queue_size": 1}
    flow = {"nodes": [
        {"id": "mujoco_driver", "path": str(ROOT / "nodes" / "mujoco_driver.py"), "args": f"--robot g1{rt}",
         "inputs": {"command": {"source": "commander/command", **q}}, "outputs": ["sensors"]},
        {"id": "commander", "path": str(ROOT / "tests" / "fixtures" / "pd_commander.py"),
         "args": f"--ticks {ticks} --bad-tick 5 --out {tmp_path / 'seen.json'}{rt}{commander_args}",
         "inputs": {"tick": {"source": "mujoco_driver/sensors", **q}}, "outputs": ["command"]},
    ]}
    if not realtime:
        flow["nodes"].append({"id": "recorder", "path": str(ROOT / "nodes" / "recorder.py"),
                              "args": f"--robot g1 --name pd --out {tmp_path / 'rec'}",
                              "inputs": {"sensors": {"source": "mujoco_driver/sensors", **q}}})
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
        assert "damping mode" not in out  # two single bad ticks: the last safe command is held
        (run,) = [p for p in (tmp_path / "rec").iterdir() if p.is_dir() and not p.is_symlink()]
        cfg = read_recording(run).manifest["configs"]["mujoco_driver"]
        assert cfg["base_state"] == "simulation_truth" and cfg["actuation"] == "pd"
        assert len(cfg["damping_mode_kd_nms_per_rad"]) == g1.n and cfg["command_timeout_s"] == 0.1
    else:  # wall-clock paced, small queues: ticks may be skipped, so the bad ticks may never be sent
        assert seen["k"][-1] == ticks - 1 and "simulation ended at t = 1.000 s after 50 ticks" in out
    assert min(seen["h"]) > g1.fall_height_m and seen["q_final"][2] > 0.7  # still standing


def test_g1_driver_in_realtime_enters_damping_mode_when_the_commander_goes_silent(tmp_path):
    """The commander stops answering for 0.3 s of wall time at tick 10: the driver (timeout 0.1 s)
    switches to damping mode once, logs why, ramps the gains back when commands resume; the robot
    sags but does not fall."""
    ticks = 50
    flow = _graph(tmp_path, True, ticks, " --silent-at 10 --silent-s 0.3")
    proc = subprocess.run([DORA, "run", str(flow)], cwd=ROOT, env=dict(os.environ), capture_output=True, text=True,
                          timeout=180)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "damping mode (kp = 0, kd = damping, tau_ff = 0): no valid command for" in out, out[-3000:]
    assert "commands resumed after damping mode" in out, out[-3000:]
    assert re.search(r"damping mode entered \d+ time\(s\), \d+ ticks in damping mode", out), out[-3000:]
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert min(seen["h"]) > load_robot("g1").fall_height_m
