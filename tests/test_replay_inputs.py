"""The SEIKO replay graph reproduces its recording's inputs, or refuses to run (issue 16).

Before: the replay graph's operator played a scenario *file* again (the one named in the recorded
manifest, or whatever ``CONTACTFLOW_SCENARIO`` said in the replaying shell), so a replay could feed
the SEIKO stages other commands than the recorded run had (a contact switch lost: 330 N of
force-tracking error against the recorded 54 N) and still end with exit 0. Now the graph replays
the recorded ``operator.command`` stream itself (twists, contact requests, pushing mode) beside the
sensors, both replay nodes pick the same run, and a run without one of these streams is refused
before anything runs: one line naming the run and the missing stream, exit 2.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from contactflow.errors import ContactflowError
from contactflow.recording.replay import check_replay_inputs
from contactflow.recording.store import RecordingWriter, read_recording, resolve_run

ROOT = Path(__file__).resolve().parent.parent
DORA = shutil.which("dora") or str(Path(sys.executable).parent / "dora")
GRAPH = ROOT / "dataflows" / "seiko_talos_replay.yml"
REPLAYED = {"mujoco_driver.sensors", "operator.command"}

#: released right foot at 2.0 s (the Retargeting unloads it at its rate limits), 3 s in all
SWITCH_SCENARIO = """description: contact switch for the replay test (tests/test_replay_inputs.py)
contacts:
  - {t_s: 2.0, effector: right_foot, enable: false}
duration_s: 3.0
"""


def _replay_nodes() -> dict[str, dict]:
    flow = yaml.safe_load(GRAPH.read_text())
    return {n["id"]: n for n in flow["nodes"] if str(n["path"]).endswith("replay")}


def test_the_replay_graph_replays_sensors_and_operator_commands_of_one_run():
    nodes = _replay_nodes()
    assert set(nodes) == {"mujoco_driver", "operator"}
    assert "--streams operator.command" in nodes["operator"]["args"]
    for n in nodes.values():  # every replay node requires both streams: the same run is `latest` for both
        req = n["args"].split("--require-streams ")[1].split()[0]
        assert set(req.split(",")) == REPLAYED
    flow = yaml.safe_load(GRAPH.read_text())
    live = {n["id"]: n for n in flow["nodes"]}
    assert live["seiko_retargeting"]["inputs"]["command"]["source"] == "operator/command"
    assert live["input_filter"]["inputs"]["command"]["source"] == "operator/command"


def _sensors_only_run(root: Path) -> Path:
    w = RecordingWriter(root / "seiko_talos-20261201T000000", {"robot": "talos", "dataflow": "seiko_talos.yml"})
    w.stream("mujoco_driver.sensors", 117, {"source": "mujoco_driver/sensors", "contract": "sensors"}).append(
        0, 0.0, np.zeros(117), True)
    w.close()
    return w.run_dir


def test_a_run_without_the_operator_commands_is_refused(tmp_path):
    run = _sensors_only_run(tmp_path)
    with pytest.raises(ContactflowError, match="cannot reproduce this run's inputs.*'operator.command'"):
        check_replay_inputs(run, sorted(REPLAYED))
    check_replay_inputs(run, ["mujoco_driver.sensors"])  # what it holds passes
    # the replay node, as the graph starts it, refuses before connecting: one line, exit 2
    args = _replay_nodes()["operator"]["args"].replace("--recording latest", f"--recording {run}")
    proc = subprocess.run([sys.executable, str(ROOT / "nodes" / "replay.py"), *args.split()],
                          capture_output=True, text=True, timeout=60)
    err = proc.stdout + proc.stderr
    assert proc.returncode == 2, err
    assert "Traceback" not in err
    (line,) = [ln for ln in err.splitlines() if "node 'replay' failed" in ln]
    assert "cannot reproduce this run's inputs" in line and "'operator.command'" in line


def test_latest_skips_a_run_without_the_operator_commands(tmp_path):
    good = RecordingWriter(tmp_path / "seiko_talos-20261130T000000", {"robot": "talos", "dataflow": "seiko_talos.yml"})
    for name, size in (("mujoco_driver.sensors", 117), ("operator.command", 36)):
        good.stream(name, size, {"source": name.replace(".", "/")}).append(0, 0.0, np.zeros(size), True)
    good.close()
    _sensors_only_run(tmp_path)  # newer, but without operator.command
    assert resolve_run("latest", tmp_path, require_streams=sorted(REPLAYED), robot="talos") == good.run_dir


def _run(graph: Path, env: dict, timeout: float = 300.0):
    proc = subprocess.run([DORA, "run", str(graph)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)
    return proc, proc.stdout + proc.stderr


@pytest.mark.dora
@pytest.mark.slow  # two 3 s SEIKO runs: ~40-60 s on 2 cores
def test_replay_of_a_contact_switch_reproduces_the_recorded_force_tracking(tmp_path):
    scenario = tmp_path / "switch.yaml"
    scenario.write_text(SWITCH_SCENARIO)
    root = tmp_path / "recordings"
    env = dict(os.environ, CONTACTFLOW_RECORDINGS=str(root), CONTACTFLOW_SCENARIO=str(scenario))
    env.pop("CONTACTFLOW_RECORDING", None)
    proc, out = _run(ROOT / "dataflows" / "seiko_talos.yml", env)
    assert proc.returncode == 0, out[-4000:]
    run = resolve_run("latest", root, require_streams=sorted(REPLAYED))
    # the replaying shell still names another scenario: the recorded commands are replayed regardless
    env["CONTACTFLOW_SCENARIO"] = str(ROOT / "robots/talos/scenarios/smoke_2s.yaml")
    proc, out = _run(GRAPH, env)
    assert proc.returncode == 0, out[-4000:]
    assert f"ticks of operator.command->command from {run}" in out
    assert "contact right_foot disabling" in out  # the switch reached the live Retargeting
    reps = [p for p in root.iterdir() if p.name.startswith("seiko_talos_replay-")]
    assert len(reps) == 1
    orig, rep = read_recording(run), read_recording(reps[0])
    s_orig = json.loads((run / "summary.json").read_text())
    s_rep = json.loads((reps[0] / "summary.json").read_text())
    # a faithful replay is deterministic (lockstep): the recorded force tracking within floating-point noise
    assert abs(s_rep["foot_fz_tracking_rmse_n"] - s_orig["foot_fz_tracking_rmse_n"]) < 1e-6
    for s in ("operator.command", "seiko_retargeting.desired", "seiko_controller.command"):
        x, y = orig.stream(s), rep.stream(s)
        np.testing.assert_array_equal(y.seq, x.seq)
        assert np.abs(y.values - x.values).max() == 0.0, s
