"""A replay of another robot's run: never picked as ``latest``, refused when named (one line, non-zero exit).

Two fixture runs under a temporary recordings folder, both holding ``mujoco_driver.sensors``: a
Talos run and, newer, a G1 run (the sensors of a G1 walk are 123 values, Talos' 117).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from contactflow.recording.store import RecordingError, RecordingWriter, resolve_run
from contactflow.recording.replay import parse_stream_map, plan_replay

ROOT = Path(__file__).resolve().parent.parent
STREAM = "mujoco_driver.sensors"


def _run(root: Path, name: str, robot: str, size: int, start: str) -> Path:
    w = RecordingWriter(root / name, {"dataflow": f"{name}.yml", "robot": robot, "start_time_utc": start})
    s = w.stream(STREAM, size, {"source": "mujoco_driver/sensors", "contract": "sensors"})
    for i in range(3):
        s.append(i, i * 0.002, np.full(size, float(i)))
    w.close()
    return root / name


@pytest.fixture
def runs(tmp_path):
    talos = _run(tmp_path, "seiko_talos-20261201T100000", "talos", 117, "2026-12-01T10:00:00+00:00")
    g1 = _run(tmp_path, "g1_walk_holosoma-20261201T110000", "g1_29dof", 123, "2026-12-01T11:00:00+00:00")
    return tmp_path, talos, g1


def test_latest_is_the_newest_run_of_the_robot(runs):
    root, talos, g1 = runs
    assert resolve_run("latest", root, require_streams=[STREAM]) == g1  # without a robot: the newest run
    assert resolve_run("latest", root, require_streams=[STREAM], robot="talos") == talos
    assert resolve_run("latest", root, require_streams=[STREAM], robot="g1_29dof") == g1
    with pytest.raises(RecordingError, match=f"no complete recording holding \\['{STREAM}'\\] of robot 'go2'"):
        resolve_run("latest", root, require_streams=[STREAM], robot="go2")


def test_a_relative_run_path_is_also_found_from_the_checkout(runs, monkeypatch, tmp_path_factory):
    """A node runs in its graph's folder: ``CONTACTFLOW_RECORDING=recordings/<run>`` typed at the checkout's root is
    found from the checkout too; a miss names every place looked in and the recordings folder."""
    import contactflow.paths

    root, talos, _ = runs
    monkeypatch.setattr(contactflow.paths, "source_checkout", lambda: root.parent)
    monkeypatch.chdir(tmp_path_factory.mktemp("dataflows"))
    relative = Path(root.name) / talos.name
    assert resolve_run(str(relative), root) == root.parent / relative
    with pytest.raises(RecordingError) as err:
        resolve_run(str(Path(root.name) / "nope"), root)
    msg = str(err.value)
    assert f"no recording '{root.name}/nope' (looked for {Path.cwd() / root.name / 'nope'}, {root.parent / root.name / 'nope'}; " \
           f"runs are under {root}: `contactflow rec ls`)" == msg


def test_a_named_run_of_another_robot_is_refused(runs):
    root, talos, g1 = runs
    for arg in (g1.name, str(g1)):  # a run name under the recordings folder, or its path
        with pytest.raises(RecordingError) as err:
            resolve_run(arg, root, require_streams=[STREAM], robot="talos")
        msg = str(err.value)
        assert "\n" not in msg and str(g1) in msg and "robot 'g1_29dof'" in msg and "expected robot 'talos'" in msg
    assert resolve_run(talos.name, root, robot="talos") == talos
    assert resolve_run(g1.name, root) == g1  # no robot given: no check


def test_replay_node_refuses_the_other_robot_before_connecting(runs):
    root, _, g1 = runs
    env = dict(os.environ, CONTACTFLOW_RECORDINGS=str(root))
    env.pop("CONTACTFLOW_RECORDING", None)
    proc = subprocess.run([sys.executable, str(ROOT / "nodes" / "replay.py"), "--recording", g1.name, "--robot", "talos",
                           "--streams", STREAM], capture_output=True, text=True, timeout=60, env=env)
    err = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 2, err
    assert "Traceback" not in err and "WARNING" not in err
    (line,) = [ln for ln in err.splitlines() if "node 'replay'" in ln]
    assert f"node 'replay' failed: recording {g1} was made with robot 'g1_29dof', expected robot 'talos'" in line


def test_a_stream_of_another_size_is_refused(tmp_path):
    """A run labelled with the robot but holding another robot's sensors (recorded by a replay of a G1
    run before --robot was checked) is never latest, and refused when named (stream, sizes, contract)."""
    bad = _run(tmp_path, "seiko_talos_replay-20261201T120000", "talos", 123, "2026-12-01T12:00:00+00:00")
    assert plan_replay(bad, parse_stream_map(STREAM)).ticks  # nothing to compare with: replayed
    with pytest.raises(RecordingError, match=f"stream '{STREAM}' has 123 values per message, but contract 'sensors' "
                                             "has 117"):
        plan_replay(bad, parse_stream_map(STREAM), contract_sizes={"sensors": 117})
    # latest skips it (the manifest's stream size), so the newest good run is replayed ...
    good = _run(tmp_path, "seiko_talos-20261201T100000", "talos", 117, "2026-12-01T10:00:00+00:00")
    assert resolve_run("latest", tmp_path, require_streams=[STREAM], robot="talos") == bad
    assert resolve_run("latest", tmp_path, require_streams=[STREAM], robot="talos", contract_sizes={"sensors": 117}) == good
    # ... and the replay node, named the bad run, refuses it before connecting
    env = dict(os.environ, CONTACTFLOW_RECORDINGS=str(tmp_path))
    env.pop("CONTACTFLOW_RECORDING", None)
    proc = subprocess.run([sys.executable, str(ROOT / "nodes" / "replay.py"), "--recording", bad.name, "--robot", "talos",
                           "--streams", STREAM], capture_output=True, text=True, timeout=60, env=env)
    err = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 2 and "has 123 values per message, but contract 'sensors' has 117" in err, err


@pytest.mark.parametrize("graph", ["seiko_talos_replay.yml", "seiko_controller_replay.yml"])
def test_the_seiko_replay_graphs_ask_for_talos_runs(graph):
    flow = yaml.safe_load((ROOT / "dataflows" / graph).read_text())
    replays = [n for n in flow["nodes"] if str(n["path"]).endswith("replay")]
    assert replays and all("--robot talos" in n["args"] for n in replays)
    # the robot the graph's recorder writes in the manifest, which the next replay compares with
    (rec,) = [n for n in flow["nodes"] if n["id"] == "recorder"]
    assert "--robot talos" in rec["args"]
