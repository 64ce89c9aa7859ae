"""Record -> replay: the replay plan, the replay node's refusals, the lockstep round trip, crash safety.

The round trip and crash tests start real dora dataflows (tens of seconds on 2 cores).
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from contactflow.recording.store import RecordingError, RecordingWriter, read_recording, resolve_run
from contactflow.recording.replay import parse_stream_map, plan_replay

ROOT = Path(__file__).resolve().parent.parent
DORA = shutil.which("dora") or str(Path(sys.executable).parent / "dora")
PY = sys.executable


def _synthetic(tmp_path, n=20, name="run", dataflow="x.yml"):
    w = RecordingWriter(tmp_path / name, {"dataflow": dataflow})
    a = w.stream("drv.sensors", 3, {"source": "drv/sensors", "contract": "sensors",
                                    "layout": json.dumps([["a", 1], ["b", 2]]), "config": json.dumps({"k": 1})})
    b = w.stream("ret.desired", 2, {"source": "ret/desired", "layout": json.dumps([["x", 2]])})
    for i in range(n):
        a.append(i, i * 0.002, np.array([i, 2.0 * i, -i]))
        b.append(i, i * 0.002, np.array([0.5 * i, 1.0]))
        if i == n // 2:
            a.flush()
            b.flush()
    return w


# --------------------------------------------------------------------------- library: the plan


def test_stream_map_parsing():
    m = parse_stream_map("mujoco_driver.sensors, seiko_retargeting.desired=des")
    assert [(x.stream, x.output) for x in m] == [("mujoco_driver.sensors", "sensors"), ("seiko_retargeting.desired", "des")]
    for bad in ("", "nodot", "a.x,b.x"):
        with pytest.raises(RecordingError):
            parse_stream_map(bad)


def test_plan_orders_ticks_keeps_values_and_finishes(tmp_path):
    _synthetic(tmp_path).close()
    plan = plan_replay(tmp_path / "run", parse_stream_map("drv.sensors,ret.desired"))
    assert [t.seq for t in plan.ticks] == list(range(20))
    first, last = plan.ticks[0], plan.ticks[-1]
    assert [o for o, _, _ in first.messages] == ["sensors", "desired"]
    out, vals, md = first.messages[0]
    assert md["contract"] == "sensors" and json.loads(md["config"]) == {"k": 1} and md["seq"] == 0
    assert "contract" not in plan.ticks[1].messages[0][2]  # contract/layout/config only on the first message
    np.testing.assert_array_equal(plan.ticks[7].messages[1][1], [3.5, 1.0])
    assert all(md["finished"] for _, _, md in last.messages)  # the last tick ends the run
    assert not any(md["finished"] for t in plan.ticks[:-1] for _, _, md in t.messages)
    part = plan_replay(tmp_path / "run", parse_stream_map("drv.sensors"), start_seq=5, end_seq=9)
    assert [t.seq for t in part.ticks] == [5, 6, 7, 8, 9] and part.ticks[-1].messages[0][2]["finished"]


def test_plan_refuses_missing_truncated_and_foreign_streams(tmp_path):
    w = _synthetic(tmp_path)
    w.close()
    with pytest.raises(RecordingError, match="no stream 'drv.nope'"):
        plan_replay(tmp_path / "run", parse_stream_map("drv.nope"))
    path = tmp_path / "run" / "drv.sensors.arrows"
    data = path.read_bytes()
    path.write_bytes(data[:-30])
    with pytest.raises(RecordingError, match="truncated.*--allow-truncated"):
        plan_replay(tmp_path / "run", parse_stream_map("drv.sensors"))
    plan = plan_replay(tmp_path / "run", parse_stream_map("drv.sensors"), allow_truncated=True)
    assert plan.warnings and len(plan.ticks) < 20
    path.write_bytes(data[:5])
    with pytest.raises(RecordingError, match="truncated"):
        plan_replay(tmp_path / "run", parse_stream_map("drv.sensors"))
    path.write_bytes(b"PK\x03\x04 a zip file, not arrow")
    with pytest.raises(RecordingError, match="not an Arrow IPC stream"):
        plan_replay(tmp_path / "run", parse_stream_map("drv.sensors"))
    with pytest.raises(RecordingError, match="not a contactflow recording"):
        plan_replay(tmp_path, parse_stream_map("drv.sensors"))


def test_latest_skips_incomplete_runs(tmp_path):
    _synthetic(tmp_path, name="a").close()
    _synthetic(tmp_path, name="b")  # still being written (not closed)
    assert resolve_run("latest", tmp_path, require_streams=["drv.sensors"]).name == "a"
    with pytest.raises(RecordingError, match="no complete recording"):
        resolve_run("latest", tmp_path, require_streams=["x.y"])


def test_a_replay_takes_only_runs_of_the_dataflows_it_reproduces(tmp_path):
    """--dataflows: `latest` is the newest run of one of them (a newer run of another graph, whose live stages ran
    with another configuration, is skipped); such a run named explicitly is refused, naming its dataflow. The SEIKO
    replay graphs list the graphs whose stages run with their arguments and inputs, not the multi-contact one (its
    Retargeting checks the environment, its stages lag 1 tick: a replay of its run diverges)."""
    from contactflow import graphs

    _synthetic(tmp_path, name="a", dataflow="seiko_talos.yml").close()
    _synthetic(tmp_path, name="b", dataflow="seiko_talos_multicontact.yml").close()
    flows = ("seiko_talos.yml", "seiko_talos_sim.yml")
    assert resolve_run("latest", tmp_path).name == "b"
    assert resolve_run("latest", tmp_path, dataflows=flows).name == "a"
    with pytest.raises(RecordingError, match="made by dataflow 'seiko_talos_multicontact.yml'; this replay reproduces "
                                             "runs of seiko_talos.yml, seiko_talos_sim.yml"):
        resolve_run(str(tmp_path / "b"), tmp_path, dataflows=flows)
    with pytest.raises(RecordingError, match="no complete recording recorded by x.yml"):
        resolve_run("latest", tmp_path, dataflows=["x.yml"])
    for name in ("seiko_talos_replay", "seiko_controller_replay"):
        args = [n.args for n in graphs.GRAPHS[name]().nodes if "--dataflows" in n.args]
        assert len(args) == 2, name
        listed = set(args[0].split("--dataflows ")[1].split()[0].split(","))
        assert {"seiko_talos.yml", "seiko_talos_sim.yml", "seiko_talos_stack.yml"} <= listed, name
        assert not listed & {"seiko_talos_multicontact.yml", "seiko_talos_far_reach.yml", "seiko_talos_realtime.yml",
                             "seiko_talos_wrench_filter.yml"}, name


@pytest.mark.parametrize("case", ["missing", "foreign", "truncated"])
def test_replay_node_refuses_bad_input_without_traceback(tmp_path, case):
    _synthetic(tmp_path).close()
    run = tmp_path / "run"
    if case == "missing":
        arg = str(tmp_path / "nowhere")
    elif case == "foreign":
        (run / "drv.sensors.arrows").write_bytes(b"\x89PNG\r\n\x1a\n not a recording")
        arg = str(run)
    else:
        p = run / "drv.sensors.arrows"
        p.write_bytes(p.read_bytes()[:-30])
        arg = str(run)
    proc = subprocess.run([PY, str(ROOT / "nodes" / "replay.py"), "--recording", arg, "--streams", "drv.sensors"],
                          capture_output=True, text=True, timeout=60)
    err = proc.stdout + proc.stderr
    assert proc.returncode == 2, err
    assert "Traceback" not in err
    assert "node 'replay' failed" in err
    assert {"missing": "no recording", "foreign": "not an Arrow IPC stream", "truncated": "--allow-truncated"}[case] in err


# --------------------------------------------------------------------------- real dora runs


def _dora_run(dataflow: Path, env: dict, timeout: float = 240.0):
    proc = subprocess.run([DORA, "run", str(dataflow)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    return proc, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory):
    """A recorded 2 s SEIKO run (closed loop with MuJoCo)."""
    root = tmp_path_factory.mktemp("rec")
    env = dict(os.environ, CONTACTFLOW_RECORDINGS=str(root),
               CONTACTFLOW_SCENARIO=str(ROOT / "robots/talos/scenarios/smoke_2s.yaml"))
    proc, out = _dora_run(ROOT / "dataflows" / "seiko_talos.yml", env)
    assert proc.returncode == 0, out[-4000:]
    run = resolve_run("latest", root, require_streams=["mujoco_driver.sensors"])
    return root, run, env


def _compare(orig, rep, stream, skip_fields=()):
    x, y = orig.stream(stream), rep.stream(stream)
    assert len(y) == len(x), stream
    np.testing.assert_array_equal(y.seq, x.seq)
    np.testing.assert_array_equal(y.t, x.t)
    keep = np.ones(x.values.shape[1], bool)
    i = 0
    for f, size in x.layout:
        if f in skip_fields:
            keep[i:i + size] = False
        i += size
    diff = np.abs(y.values[:, keep] - x.values[:, keep]).max()
    assert diff <= 1e-9, f"{stream}: max |replayed - recorded| = {diff}"
    return diff


@pytest.mark.dora
def test_round_trip_controller_reproduces_recorded_outputs(recorded_run, tmp_path):
    """Replay the recorded sensors and Retargeting output into a live Controller, in lockstep."""
    root, run, env = recorded_run
    flow = yaml.safe_load((ROOT / "dataflows" / "seiko_controller_replay.yml").read_text())
    for n in flow["nodes"]:
        if n["path"].endswith(".py"):  # a script path (installed executables are found on PATH)
            n["path"] = str((ROOT / "dataflows" / n["path"]).resolve())
        n["args"] = n["args"].replace("--recording latest", f"--recording {run}")
    out_root = tmp_path / "out"
    df = tmp_path / "replay.yml"
    df.write_text(yaml.safe_dump(flow))
    proc, out = _dora_run(df, dict(env, CONTACTFLOW_RECORDINGS=str(out_root)))
    assert proc.returncode == 0, out[-4000:]
    rep = read_recording(resolve_run("latest", out_root))
    orig = read_recording(run)
    assert len(orig.stream("seiko_controller.command")) >= 990
    assert _compare(orig, rep, "seiko_controller.command") == 0.0  # bit for bit
    assert _compare(orig, rep, "seiko_controller.state", skip_fields=("solve_time",)) == 0.0
    _compare(orig, rep, "mujoco_driver.sensors")
    assert rep.stream("seiko_controller.command").finished[-1]


@pytest.mark.dora
def test_shipped_replay_dataflow_runs_seiko_live_on_recorded_sensors(recorded_run, tmp_path):
    """dataflows/seiko_talos_replay.yml as shipped (`--recording latest`): the live SEIKO nodes on
    the recorded sensors and operator commands reproduce the recorded run (open loop, lockstep). The
    recorded operator commands are replayed (no scenario file is played again)."""
    root, run, env = recorded_run
    env = {k: v for k, v in env.items() if k != "CONTACTFLOW_SCENARIO"}
    # a newer run of another robot holding the same stream name (a G1 walk: 123 sensor values) is
    # not the one replayed (--robot talos in the graph)
    g1 = RecordingWriter(root / "g1_walk_holosoma-29991231T000000", {"robot": "g1_29dof", "start_time_utc": "2999-12-31"})
    g1.stream("mujoco_driver.sensors", 123, {"source": "mujoco_driver/sensors"}).append(0, 0.0, np.zeros(123))
    g1.close()
    try:
        proc, out = _dora_run(ROOT / "dataflows" / "seiko_talos_replay.yml", env)
    finally:
        shutil.rmtree(g1.run_dir)
    assert proc.returncode == 0, out[-4000:]
    assert "malformed" not in out and "g1_walk_holosoma" not in out
    assert f"ticks of operator.command->command from {run}" in out
    reps = [p for p in root.iterdir() if p.name.startswith("seiko_talos_replay-")]
    assert len(reps) == 1, out[-2000:]
    rep, orig = read_recording(reps[0]), read_recording(run)
    for s in ("operator.command", "input_filter.targets", "seiko_retargeting.desired", "seiko_controller.command",
              "mujoco_driver.sensors"):
        assert _compare(orig, rep, s) == 0.0
    # the replayed streams reach the recorder through the replay nodes' logs with their recorded contract and config
    for s in ("mujoco_driver.sensors", "operator.command"):
        for key in ("contract", "config"):
            assert rep.stream(s).metadata[key] == orig.stream(s).metadata[key], (s, key)
    # the replayed sensors, the stages' batches and the Controller's command to the replays' acks went over the local
    # sockets (nodes/_local.py), as in seiko_talos.yml
    for edge in ("output sensors -> seiko_controller/sensors", "output targets_rows2 -> seiko_retargeting/targets",
                 "output desired_rows2 -> input_filter/desired", "output desired_rows -> seiko_controller/desired",
                 "output command -> mujoco_driver/ack, operator/ack"):
        m = re.search(re.escape(edge) + r": (\d+) message\(s\) over the local socket, (\d+) through dora", out)
        assert m is not None, (edge, out[-3000:])
        assert int(m.group(1)) > 10 * int(m.group(2)), edge


@pytest.mark.dora
def test_fused_stack_graph_gives_the_split_graphs_outputs_bit_for_bit(recorded_run, tmp_path):
    """dataflows/seiko_talos_stack.yml (input filter + Retargeting + Controller in one process)
    records exactly what seiko_talos.yml recorded for the same scenario: same streams, names,
    lengths, values and `finished` flags (only the measured solve times differ)."""
    root, run, env = recorded_run
    out_root = tmp_path / "out"
    proc, out = _dora_run(ROOT / "dataflows" / "seiko_talos_stack.yml", dict(env, CONTACTFLOW_RECORDINGS=str(out_root)))
    assert proc.returncode == 0, out[-4000:]
    rep, orig = read_recording(resolve_run("latest", out_root)), read_recording(run)
    assert sorted(rep.stream_names) == sorted(orig.stream_names)
    for s in orig.stream_names:
        assert _compare(orig, rep, s, skip_fields=("solve_time",)) == 0.0
        np.testing.assert_array_equal(rep.stream(s).finished, orig.stream(s).finished)


@pytest.mark.dora
def test_recorder_sigkill_keeps_all_but_the_last_100ms(tmp_path):
    """SIGKILL the recorder mid-run: the recording is readable and only the last ~100 ms are lost."""
    log = tmp_path / "sent.txt"
    flow = {"nodes": [
        {"id": "source", "path": str(ROOT / "tests" / "fixtures" / "counter_source.py"),
         "args": f"--count 2500 --log {log}", "inputs": {"tick": "dora/timer/millis/2"}, "outputs": ["out"]},
        {"id": "recorder", "path": str(ROOT / "nodes" / "recorder.py"), "args": "--name crash",
         "inputs": {"data": {"source": "source/out", "queue_size": 1000, "queue_policy": "backpressure"}}},
    ]}
    df = tmp_path / "crash.yml"
    df.write_text(yaml.safe_dump(flow))
    root = tmp_path / "rec"
    env = dict(os.environ, CONTACTFLOW_RECORDINGS=str(root))
    proc = subprocess.Popen([DORA, "run", str(df), "--stop-after", "20s"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        manifest = None
        while time.monotonic() < deadline:
            runs = [p for p in root.glob("crash-*") if (p / "manifest.json").exists()] if root.exists() else []
            if runs and log.exists() and len(log.read_text().splitlines()) > 500:  # > 1 s of data sent
                manifest = json.loads((runs[0] / "manifest.json").read_text())
                break
            time.sleep(0.05)
        assert manifest is not None, "the recorder never started"
        os.kill(manifest["recorder_pid"], signal.SIGKILL)
        t_kill = time.time_ns()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=30)
    rec = read_recording(runs[0])
    assert rec.manifest["complete"] is False
    st = rec.stream("source.out")
    sent = dict(tuple(map(int, line.split())) for line in log.read_text().splitlines() if len(line.split()) == 2)
    assert len(st) > 400
    np.testing.assert_array_equal(st.seq, np.arange(len(st)))  # a contiguous prefix, nothing lost in the middle
    np.testing.assert_array_equal(st.values[:, 0], st.seq.astype(float))
    # Everything sent more than 100 ms (+ 20 ms delivery slack) before the kill is on disk.
    must_have = [k for k, t_ns in sent.items() if t_ns < t_kill - 120_000_000]
    assert must_have and max(must_have) <= st.seq[-1], (
        f"lost seq {st.seq[-1] + 1}..{max(must_have)}: the recording ends "
        f"{(t_kill - sent[int(st.seq[-1])]) / 1e6:.0f} ms before the kill")
    lost_s = (t_kill - st.t_wall_ns[-1]) / 1e9
    print(f"recorder killed: {len(st)} messages recovered, the last received {lost_s * 1e3:.0f} ms before the kill")
    assert lost_s < 0.12
