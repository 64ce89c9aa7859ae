"""Real `dora run` of the shipped SEIKO graph (short scenarios), faults and bad input.

These start real dora dataflows (several Python processes) and take seconds each.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from contactflow.recording.store import read_recording

ROOT = Path(__file__).resolve().parent.parent
DORA = shutil.which("dora") or str(Path(sys.executable).parent / "dora")
pytestmark = pytest.mark.dora


def _run(dataflow: Path, tmp_path: Path, scenario: str | None = None, timeout: float = 240.0, **extra_env: str):
    env = {**os.environ, **extra_env}
    env["CONTACTFLOW_RECORDINGS"] = str(tmp_path / "recordings")
    if scenario:
        env["CONTACTFLOW_SCENARIO"] = scenario
    proc = subprocess.run(
        [DORA, "run", str(dataflow)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    return proc, proc.stdout + proc.stderr


def _runs(tmp_path: Path):
    root = tmp_path / "recordings"
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink()) if root.exists() else []


@pytest.fixture(scope="module")
def smoke_runs(tmp_path_factory):
    """The 2-second scenario, run twice (for the determinism check): as shipped, then with every message through
    dora (``CONTACTFLOW_LOCAL_EDGES=0``: no local edge, nodes/_local.py)."""
    results = []
    for i in range(2):
        tmp = tmp_path_factory.mktemp(f"smoke{i}")
        proc, out = _run(ROOT / "dataflows" / "seiko_talos.yml", tmp, str(ROOT / "robots/talos/scenarios/smoke_2s.yaml"),
                         **({"CONTACTFLOW_LOCAL_EDGES": "0"} if i else {}))
        results.append((proc, out, _runs(tmp)))
    return results


def test_seiko_talos_short_scenario_ends_by_itself(smoke_runs):
    proc, out, runs = smoke_runs[0]
    assert proc.returncode == 0, out[-4000:]
    assert len(runs) == 1, out[-2000:]
    summary = json.loads((runs[0] / "summary.json").read_text())
    assert summary["fell"] is False
    assert summary["sim_time_s"] == pytest.approx(2.0, abs=0.1)
    assert summary["ticks"] >= 990
    assert summary["retargeting_failures"] == 0
    # the tick timing (contactflow/recording/summary.py): the graph's pace, its stalls, the Retargeting run ahead
    wall = summary["wall_time_s"]
    assert 0 < summary["tick_wall_ms_p50"] <= summary["tick_wall_ms_p99"] <= summary["tick_wall_ms_max"] < 1e3 * wall
    assert 0 <= summary["slow_tick_lost_s"] < wall and 0 <= summary["slow_ticks"] < summary["ticks"]
    assert summary["desired_lead_ticks_p50"] >= 0  # the scenario operator lets the Retargeting run ahead
    rec = read_recording(runs[0])
    assert rec.manifest["complete"]
    for stream in ("mujoco_driver.sensors", "operator.command", "input_filter.targets",
                   "seiko_retargeting.desired", "seiko_controller.command", "seiko_controller.state"):
        st = rec.stream(stream)
        # lockstep: every tick present exactly once, in order
        assert len(st) >= 990, stream
        assert (st.seq[1:] - st.seq[:-1] == 1).all(), stream
    assert "seiko_controller" in rec.manifest["configs"]
    # the kernel that ran, beside the configured one (auto): the kernel the same configuration gets in this process
    from contactflow.robot import load_robot
    from contactflow.seiko.native import kernel_for

    used = "native" if kernel_for(load_robot("talos").model, "auto", "kernel") is not None else "python"
    cfgs = rec.manifest["configs"]
    assert cfgs["seiko_controller"]["controller"]["kernel"] == "auto" == cfgs["seiko_retargeting"]["kernel"]
    assert cfgs["seiko_controller"]["kernel_used"] == used == cfgs["seiko_retargeting"]["kernel_used"]
    assert "SEIKO run" in out  # the one-screen summary is printed


def test_lockstep_runs_are_deterministic(smoke_runs):
    """The same run twice gives the same recording (wall-clock fields aside), whether the per-tick edges go
    over local sockets (as shipped) or through dora."""
    (p1, o1, r1), (p2, o2, r2) = smoke_runs
    assert p1.returncode == 0 and p2.returncode == 0, (o1 + o2)[-3000:]
    # the shipped run used its local edges (nodes/_local.py); the other sent everything through dora
    for edge in ("output sensors -> seiko_controller/sensors", "output command -> mujoco_driver/command",
                 "output targets_rows2 -> seiko_retargeting/targets", "output desired_rows2 -> input_filter/desired",
                 "output desired_rows -> seiko_controller/desired"):
        m = re.search(re.escape(edge) + r": (\d+) message\(s\) over the local socket, (\d+) through dora", o1)
        assert m is not None, (edge, o1[-3000:])
        assert int(m.group(1)) > 10 * int(m.group(2)), edge  # through dora at most while the receiver started
    assert "over the local socket" not in o2 and "local edges off (CONTACTFLOW_LOCAL_EDGES=0)" in o2
    a, b = read_recording(r1[0]), read_recording(r2[0])
    assert a.stream_names == b.stream_names
    for name in a.stream_names:
        x, y = a.stream(name), b.stream(name)
        assert len(x) == len(y), name
        np.testing.assert_array_equal(x.seq, y.seq)
        for field, _ in x.layout:
            if field == "solve_time":  # wall-clock measurement
                continue
            np.testing.assert_array_equal(x.field(field), y.field(field), err_msg=f"{name}:{field}")


def test_node_crash_ends_run_with_error_and_keeps_recording(tmp_path):
    flow = yaml.safe_load((ROOT / "dataflows" / "seiko_talos.yml").read_text())
    for n in flow["nodes"]:
        if n["path"].endswith(".py"):  # a script path (installed executables are found on PATH)
            n["path"] = str((ROOT / "dataflows" / n["path"]).resolve())
        if n["id"] == "seiko_controller":
            n["args"] = f"{n['path']} 400 {n['args']}"
            n["path"] = str(ROOT / "tests" / "fixtures" / "crashing_node.py")
        if "--scenario" in n.get("args", ""):
            n["args"] = n["args"].replace("../robots", str(ROOT / "robots"))
        if n["id"] == "recorder":
            n["args"] = n["args"].replace("--summary seiko", "")
    df = tmp_path / "crash.yml"
    df.write_text(yaml.safe_dump(flow))
    proc, out = _run(df, tmp_path, str(ROOT / "robots/talos/scenarios/hand_forward.yaml"))
    assert proc.returncode != 0, out[-3000:]
    assert re.search(r"seiko_controller", out), out[-3000:]
    runs = _runs(tmp_path)
    assert runs, out[-2000:]
    rec = read_recording(runs[0])
    st = rec.stream("mujoco_driver.sensors")
    assert len(st) > 10  # what was written before the crash is readable


def test_bad_scenario_is_refused_before_anything_moves(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "description: bad\ncommands:\n  - {effector: left_tentacle, start_s: 0.0, end_s: 1.0, linear_mps: [0.01, 0, 0]}\n"
    )
    proc, out = _run(ROOT / "dataflows" / "seiko_talos.yml", tmp_path, str(bad), timeout=120)
    assert proc.returncode != 0
    assert "bad.yaml" in out and "left_tentacle" in out, out[-3000:]
    for run in _runs(tmp_path):
        rec = read_recording(run)
        if "mujoco_driver.sensors" in rec.stream_names:
            assert len(rec.stream("mujoco_driver.sensors")) <= 1  # nothing moved


def test_a_controller_period_other_than_the_sensors_is_refused(tmp_path):
    """ControllerConfig.dt_s (and the Retargeting's, which it checks) at 1 ms in a 2 ms graph: the Controller
    node stops at its second sensors message with one line naming the key and the sensors' period."""
    cfg = tmp_path / "seiko_1ms.yaml"
    cfg.write_text("seiko_controller: {dt_s: 0.001}\nseiko_retargeting: {dt_s: 0.001}\n")
    graph = yaml.safe_load((ROOT / "dataflows" / "seiko_talos.yml").read_text())
    for n in graph["nodes"]:
        n["args"] = n.get("args", "").replace("../", f"{ROOT}/")
        if n["id"] == "seiko_controller":
            n["args"] += f" --config {cfg}"
    path = tmp_path / "seiko_1ms.yml"
    path.write_text(yaml.safe_dump(graph))
    proc, out = _run(path, tmp_path, str(ROOT / "robots/talos/scenarios/smoke_2s.yaml"), timeout=120)
    assert proc.returncode != 0
    assert re.search(r"ControllerConfig.dt_s: expected 0.002 s \(the sensors' time step.*got 0.001", out), out[-3000:]


@pytest.mark.parametrize("node_id, section, cls", [("input_filter", "input_filter", "InputFilterConfig"),
                                                    ("seiko_retargeting", "seiko_retargeting", "RetargetingConfig")])
def test_an_upstream_stage_period_other_than_its_ticks_is_refused(tmp_path, node_id, section, cls):
    """The input filter's and the Retargeting's dt_s at 1 ms in a 2 ms graph (only that node given the
    file): the node stops at its second tick with one line naming the key and its ticks' period."""
    cfg = tmp_path / "stage_1ms.yaml"
    cfg.write_text(f"{section}: {{dt_s: 0.001}}\n")
    graph = yaml.safe_load((ROOT / "dataflows" / "seiko_talos.yml").read_text())
    for n in graph["nodes"]:
        n["args"] = n.get("args", "").replace("../", f"{ROOT}/")
        if n["id"] == node_id:
            n["args"] += f" --config {cfg}"
    path = tmp_path / "stage_1ms.yml"
    path.write_text(yaml.safe_dump(graph))
    proc, out = _run(path, tmp_path, str(ROOT / "robots/talos/scenarios/smoke_2s.yaml"), timeout=120)
    assert proc.returncode != 0
    assert re.search(rf"{cls}.dt_s: expected 0.002 s \(the time step of its ticks.*got 0.001", out), out[-3000:]


def _multicontact(tmp_path, scenario):
    proc, out = _run(ROOT / "dataflows" / "seiko_talos_multicontact.yml", tmp_path, str(ROOT / "robots/talos/scenarios" / scenario))
    assert proc.returncode == 0, out[-4000:]
    runs = _runs(tmp_path)
    assert len(runs) == 1, out[-2000:]
    return out, runs[0]


def test_bad_commands_are_refused_while_the_robot_stays_balanced(tmp_path):
    out, run = _multicontact(tmp_path, "bad_commands.yaml")
    summary = json.loads((run / "summary.json").read_text())
    assert summary["fell"] is False and summary["retargeting_failures"] == 0
    assert "cannot enable contact 'left_hand'" in out and "from the nearest surface" in out
    assert "cannot push with 'right_hand'" in out and "not an enabled contact" in out
    assert "cannot disable 'left_foot'" in out and "last supporting" in out
    rec = read_recording(run)
    d = rec.stream("seiko_retargeting.desired")
    assert d.field("n_refused")[-1, 0] == 3
    assert summary["requests_refused"] == 3 and summary["contact_switches"] == []  # right foot still unloading
    effs = ["left_foot", "right_foot", "left_hand", "right_hand"]
    enabled = d.field("enabled")[-1]
    assert list(enabled) == [1.0, 1.0, 0.0, 0.0]  # right foot still unloading (accepted request)
    assert d.field("switching")[-1, effs.index("right_foot")] == -1.0
    s = rec.stream("mujoco_driver.sensors")
    fz = s.field("wrench.left_foot")[:, 2] + s.field("wrench.right_foot")[:, 2]
    assert abs(fz[-1] - summary["robot_weight_n"]) < 0.05 * summary["robot_weight_n"]


def test_wall_touch_enable_and_push(tmp_path):
    import numpy as np

    from contactflow.seiko.controller import DEFAULT_SURFACE_ROTATIONS

    out, run = _multicontact(tmp_path, "wall_touch_short.yaml")
    summary = json.loads((run / "summary.json").read_text())
    assert summary["fell"] is False and summary["retargeting_failures"] == 0
    rec = read_recording(run)
    s, d = rec.stream("mujoco_driver.sensors"), rec.stream("seiko_retargeting.desired")
    n = min(len(s), len(d))
    t = s.t[:n]
    fn_meas = (s.field("force.left_hand")[:n] @ DEFAULT_SURFACE_ROTATIONS["left_hand"])[:, 2]
    fn_d = d.field("lam_d.left_hand")[:n, 2]
    assert d.field("enabled")[n - 1, 2] == 1.0 and d.field("push")[t.searchsorted(7.0), 2] == 1.0
    assert fn_d[-1] > fn_d[t.searchsorted(5.0)] + 10.0  # the push raised the commanded force (~8 N/s)
    late = t > 6.0
    err = np.abs(fn_meas[late] - fn_d[late])
    # early in the push (commanded 12-19 N) the wrist FT force tracks the command; the 75 N hold
    # of the full wall_push experiment does not (docs/seiko_multicontact.md)
    assert np.mean(err) < 5.0 and np.max(err) < 15.0, (np.mean(err), np.max(err))
    fx = s.field("wrench.left_foot")[:n, 0] + s.field("wrench.right_foot")[:n, 0]
    assert np.mean(fx[late]) > 0.5 * np.mean(fn_meas[late])  # the feet oppose the push (+x on the robot)
