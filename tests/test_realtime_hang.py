"""Run-ending rules of ``mujoco_driver`` in a real `dora run` (nodes/mujoco_driver.py docstring):

* real time: a controller that stays alive but stops sending (a hang) ends the run after
  ``--command-lost-s`` of wall time with exit != 0 and one line naming the input and the seconds,
  where it used to hold the last safe command until ``--max-sim-time-s`` (600 s);
* a robot that fell ends the run with exit != 0 and one line "the robot fell at t = X s (base
  height Y m < Z m)", after its recording and summary (``fell: true``) were completed;
  ``--fall-is-ok`` makes it a normal end.

The graphs are two or three nodes: the G1 driver (50 Hz, the fastest to start), the PD commander
fixture (``tests/fixtures/pd_commander.py``) and, for the fall, the recorder with the G1 summary.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DORA = shutil.which("dora") or str(Path(sys.executable).parent / "dora")
pytestmark = pytest.mark.dora

_LOST = re.compile(r"command lost: no valid command for (?P<s>[\d.]+) s \(timeout 1\.000 s\) on input 'command' "
                   r"from commander/command; the last safe command was held; ending the run")
_FELL = re.compile(r"node 'mujoco_driver' failed: the robot fell at t = (?P<t>[\d.]+) s "
                   r"\(base height (?P<h>[\d.]+) m < 0\.35 m\)")


def _flow(tmp_path: Path, driver_args: str, commander_args: str, realtime: bool, record: bool = False) -> Path:
    q = {"queue_size": 1} if realtime else {"queue_size": 100, "queue_policy": "backpressure"}
    rt = " --realtime" if realtime else ""
    nodes = [
        {"id": "mujoco_driver", "path": str(ROOT / "nodes" / "mujoco_driver.py"), "args": f"--robot g1{rt} {driver_args}",
         "inputs": {"command": {"source": "commander/command", **q}}, "outputs": ["sensors"]},
        {"id": "commander", "path": str(ROOT / "tests" / "fixtures" / "pd_commander.py"),
         "args": f"--out {tmp_path / 'seen.json'}{rt} {commander_args}",
         "inputs": {"tick": {"source": "mujoco_driver/sensors", **q}}, "outputs": ["command"]},
    ]
    if record:
        nodes.append({"id": "recorder", "path": str(ROOT / "nodes" / "recorder.py"),
                      "args": f"--robot g1 --name fall --summary g1 --out {tmp_path / 'rec'}",
                      "inputs": {"sensors": {"source": "mujoco_driver/sensors", "queue_size": 100,
                                             "queue_policy": "backpressure"}}})
    path = tmp_path / "graph.yml"
    path.write_text(yaml.safe_dump({"nodes": nodes}))
    return path


def _run(flow: Path, timeout: float = 180) -> tuple[int, str, float]:
    t0 = time.monotonic()
    proc = subprocess.run([DORA, "run", str(flow)], cwd=ROOT, env=dict(os.environ), capture_output=True, text=True,
                          timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - t0


def test_realtime_driver_ends_the_run_when_the_controller_goes_silent(tmp_path):
    """The commander answers ticks 0-14, then sleeps 3 s of wall time at tick 15 (alive, silent) and
    would run to tick 249 (5 s) afterwards. With --command-lost-s 1 the driver holds the last safe
    command (--command-timeout-s 10: the stiff command, not damping mode, in which the G1 falls in
    ~1 s and the fall would end the run first), then ends the run ~1 s after the last command: exit
    != 0, the line names the input, its source and the seconds; the simulated time stops near
    15 x 20 ms + 1 s, far before the scenario's end."""
    flow = _flow(tmp_path, "--command-lost-s 1 --command-timeout-s 10",
                 "--ticks 250 --bad-tick -100 --silent-at 15 --silent-s 3", True)
    rc, out, wall = _run(flow)
    assert rc != 0, out[-4000:]
    m = _LOST.search(out)
    assert m, out[-4000:]
    # detected within a few periods (20 ms each) of the timeout; a loaded machine delays the periods
    # (measured 1.002-1.152 s with another dora graph running)
    assert 1.0 <= float(m["s"]) < 2.5, m[0]
    assert "node 'mujoco_driver' stopping: command lost" in out, out[-4000:]
    t_end = float(re.search(r"simulation ended at t = ([\d.]+) s", out)[1])
    # after the silence began (tick 15, t = 0.3 s) and far before the scenario's end (5 s): ~1 s of wall time
    # (fewer simulated seconds on a loaded machine, where late periods are lost: measured 0.94-1.32 s)
    assert 0.3 < t_end <= 0.3 + 2.0, t_end
    print(f"run wall time {wall:.1f} s; {m[0]}; simulation ended at t = {t_end:.3f} s")


@pytest.mark.slow  # ~15-40 s of dora run
def test_realtime_driver_ends_the_run_when_every_command_is_refused(tmp_path):
    """From tick 15 on the commander keeps answering, but with a NaN in q_target (refused by the
    contract): no VALID command, so the same rule ends the run, naming the input."""
    flow = _flow(tmp_path, "--command-lost-s 1 --command-timeout-s 10", "--ticks 250 --bad-tick -100 --bad-from 15",
                 True)
    rc, out, _ = _run(flow)
    assert rc != 0, out[-4000:]
    m = _LOST.search(out)
    assert m and 1.0 <= float(m["s"]) < 2.5, out[-4000:]
    assert "commands were not applied (malformed, non-finite or out of limits)" in out, out[-4000:]


@pytest.mark.slow  # ~15-40 s of dora run; the rule itself is checked by the test above
def test_a_short_silence_does_not_end_the_run(tmp_path):
    """0.4 s of silence (damping, then the ramp back) is below --command-lost-s 1: the run ends at
    its scenario's end, exit 0 (the rule must not fire on a hiccup)."""
    flow = _flow(tmp_path, "--command-lost-s 1", "--ticks 50 --bad-tick -100 --silent-at 10 --silent-s 0.4", True)
    rc, out, _ = _run(flow)
    assert rc == 0, out[-4000:]
    assert "command lost" not in out and "simulation ended at t = 1.000 s after 50 ticks" in out, out[-3000:]


@pytest.mark.parametrize("fall_is_ok", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["fails", "fall_is_ok"])
def test_a_run_whose_robot_fell_fails_after_its_recording_completes(tmp_path, fall_is_ok):
    """A 150 kg unmodelled mass on the G1's pelvis (``--payload``) brings the robot down in lockstep
    (the commander holds the default posture; measured: below 0.35 m at ~0.5 s). The run ends with
    exit 2 and the line naming t and the base height; the recorder still wrote the summary with
    ``fell: true``. With ``--fall-is-ok`` the same run exits 0."""
    flow = _flow(tmp_path, "--payload pelvis:150" + (" --fall-is-ok" if fall_is_ok else ""),
                 "--ticks 150 --bad-tick -100", False, record=True)
    rc, out, _ = _run(flow)
    (run,) = [p for p in (tmp_path / "rec").iterdir() if p.is_dir() and not p.is_symlink()]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["fell"] is True, summary
    m = _FELL.search(out)
    if fall_is_ok:
        assert rc == 0 and m is None, out[-4000:]
        assert re.search(r"the robot fell at t = [\d.]+ s \(base height [\d.]+ m < 0\.35 m\); ending the run", out)
    else:
        assert rc != 0 and m, out[-4000:]
        assert 0.0 < float(m["t"]) < 3.0 and float(m["h"]) < 0.35
        assert summary["base_height_min_m"] < 0.35
