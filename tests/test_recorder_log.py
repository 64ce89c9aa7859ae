"""The nodes' batched log (nodes/_runtime.py Sender) and its unpacking by the recorder."""

import json
import re
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from contactflow.contracts.messages import Field, PortSpec
from contactflow.nodes import _runtime
from contactflow.nodes._runtime import Sender
from contactflow.recording.store import (RecordingError, RecordingWriter, SeqGaps, pack_log, read_recording,
                                         unpack_log)

ROOT = Path(__file__).resolve().parent.parent
DORA = shutil.which("dora") or str(Path(sys.executable).parent / "dora")
A = PortSpec("a", (Field("x", 2, "m"),), 500.0)
B = PortSpec("b", (Field("y", 3, "m"),), 500.0)


class FakeNode:
    def __init__(self, outputs):
        self.outputs = outputs
        self.sent = []

    def node_config(self):
        return {"inputs": {}, "outputs": self.outputs}

    def next(self, timeout=None):
        return None

    def send_output(self, output, value, metadata):
        self.sent.append((output, value.to_numpy(), dict(metadata)))


@pytest.fixture(autouse=True)
def _no_global_senders():
    _runtime._SENDERS.clear()
    yield
    _runtime._SENDERS.clear()


def test_pack_unpack_round_trip_keeps_every_value_and_wall_time():
    rows_a = [(k, k * 0.002, k == 2, 1_700_000_000_000_000_000 + 1000 * k + 7, np.array([k, -k / 3])) for k in range(3)]
    rows_b = [(5, 0.01, False, 1_700_000_000_000_000_001, np.array([np.pi, 1e-300, -2.5]))]
    values, md = pack_log({"a": ({"contract": "a", "layout": [["x", 2]]}, rows_a),
                           "b": ({"contract": "b", "layout": [["y", 3]], "config": "{}"}, rows_b)}, batch=4)
    assert md["seq"] == 4
    blocks = unpack_log(pa.array(values).to_numpy(), md)
    assert [b.output for b in blocks] == ["a", "b"]
    a, b = blocks
    np.testing.assert_array_equal(a.seq, [0, 1, 2])
    np.testing.assert_array_equal(a.t, [0.0, 0.002, 0.004])
    np.testing.assert_array_equal(a.finished, [False, False, True])
    np.testing.assert_array_equal(a.t_wall_ns, [r[3] for r in rows_a])  # exact, not rounded through float64
    np.testing.assert_array_equal(a.values, np.stack([r[4] for r in rows_a]))
    np.testing.assert_array_equal(b.values[0], rows_b[0][4])
    assert b.head["config"] == "{}" and "config" not in a.head
    with pytest.raises(RecordingError, match="layout says"):
        unpack_log(values[:-1], md)


def test_append_block_counts_gaps_as_append_does(tmp_path):
    w = RecordingWriter(tmp_path / "run", {})
    s1 = w.stream("x.one", 1, {"source": "x/one"})
    s2 = w.stream("x.block", 1, {"source": "x/block"})
    seqs = [0, 1, 2, 5, 6, 6, 4, 9, 10]
    for k in seqs:
        s1.append(k, k * 0.1, np.array([k]))
    a = np.array(seqs)
    s2.append_block(a[:4], a[:4] * 0.1, a[:4, None].astype(float), np.zeros(4, bool), np.zeros(4, int))
    s2.append_block(a[4:], a[4:] * 0.1, a[4:, None].astype(float), np.zeros(5, bool), np.zeros(5, int))
    assert s1.missing == s2.missing == 4
    w.close()
    rec = read_recording(tmp_path / "run")
    np.testing.assert_array_equal(rec.stream("x.block").seq, seqs)
    np.testing.assert_array_equal(rec.stream("x.block").values[:, 0], seqs)
    assert rec.manifest["streams"]["x.block"]["missing_seq"] == 4


def test_seq_gaps_counts_one_rule_per_message_and_per_block():
    """The one seq-gap rule (writer, recorder batches, viewer): a gap above the highest seq is a loss, a repeat or a
    late seq is not; ``first`` counts what is missing before the first message; blocks count as single messages do."""
    g = SeqGaps(first=0)
    assert [g.add(k) for k in (3, 4, 4, 2, 7, 8, 12)] == [3, 0, 0, 0, 2, 0, 3]
    assert (g.missing_before_first, g.missing, g.gaps, g.last) == (3, 5, 2, 12)
    assert SeqGaps().add(3) == 0 and SeqGaps(first=5).add(3) == 0  # no expected start / started early: no loss
    rng = np.random.default_rng(0)
    for trial in range(200):
        seqs = np.cumsum(rng.integers(-2, 4, size=int(rng.integers(1, 30)))) + int(rng.integers(0, 5))
        one, block = SeqGaps(first=0), SeqGaps(first=0)
        n_one = sum(one.add(k) for k in seqs)
        cuts = np.sort(rng.integers(0, len(seqs) + 1, size=3))
        n_block = sum(block.add_block(part) for part in np.split(seqs, cuts))
        assert n_one == n_block == one.missing + one.missing_before_first, (trial, seqs, cuts)
        assert (one.missing, one.gaps, one.missing_before_first, one.last) == \
            (block.missing, block.gaps, block.missing_before_first, block.last), (trial, seqs, cuts)
        assert one.last == max(seqs)


def test_sender_without_a_log_output_sends_every_message_as_before():
    node = FakeNode(["a", "b"])
    s = Sender(node, {"a": A, "b": B}, log_every=2)
    for k in range(3):
        s.send("a", np.zeros(2), seq=k, t=0.0)
        s.send("b", np.zeros(3), seq=k, t=0.0)
    assert [o for o, _, _ in node.sent] == ["a", "b"] * 3
    assert not s.flush()


def test_sender_batches_every_n_ticks_and_sends_undeclared_outputs_only_in_the_log():
    node = FakeNode(["a", "log"])
    s = Sender(node, {"a": A, "b": B}, {"k": 1}, log_every=4)
    for k in range(10):
        s.send("a", np.array([k, k]), seq=k, t=k * 0.002)
        s.send("b", np.array([k, k, k]), seq=k, t=k * 0.002)
    kinds = [o for o, _, _ in node.sent]
    assert kinds.count("a") == 10 and "b" not in kinds  # b: not declared -> only in the log
    logs = [(v, md) for o, v, md in node.sent if o == "log"]
    assert len(logs) == 2 and s.pending == 4  # ticks 0-3, 4-7 sent; 8-9 wait for the end of the run
    _runtime.drain_after_finish(node, grace_s=0.0)  # the end of a run flushes the partial batch
    logs = [(v, md) for o, v, md in node.sent if o == "log"]
    assert [md["seq"] for _, md in logs] == [0, 1, 2] and s.pending == 0
    blocks = [unpack_log(v, md) for v, md in logs]
    seq_b = np.concatenate([bl[1].seq for bl in blocks])
    np.testing.assert_array_equal(seq_b, np.arange(10))
    assert not any(bl[1].finished.any() for bl in blocks)
    assert "config" in blocks[0][0].head and "config" not in blocks[1][0].head
    assert blocks[0][0].head["layout"] == [["x", 2]] and blocks[0][1].head["contract"] == "b"
    s.send("a", np.array([10, 10]), seq=10, t=0.02, finished=True)  # the end: sent at once (a node may be
    (v, md) = [(v, md) for o, v, md in node.sent if o == "log"][-1]  # clocked by this log)
    assert md["seq"] == 3 and md["log_finished"] and md["last_seq"] == 10 and s.pending == 0


def test_node_main_sends_the_last_partial_batch_when_the_node_fails():
    node = FakeNode(["a", "log"])

    def body():
        s = Sender(node, {"a": A}, log_every=50)
        for k in range(3):
            s.send("a", np.zeros(2), seq=k, t=0.0)
        raise _runtime.UpstreamError("upstream gone")

    with pytest.raises(SystemExit) as exc:
        _runtime.node_main("fixture", body)
    assert exc.value.code == 3
    logs = [(v, md) for o, v, md in node.sent if o == "log"]
    assert len(logs) == 1 and len(unpack_log(*logs[0])[0].seq) == 3


def _graph(tmp_path, source_args):
    fixture = ROOT / "tests" / "fixtures" / "log_source.py"
    text = f"""nodes:
  - id: src
    path: {fixture}
    args: {source_args}
    inputs:
      tick: dora/timer/millis/2
    outputs: [a, log]
  - id: sink
    path: {ROOT / 'nodes' / 'recorder.py'}
    args: --name logtest
    inputs:
      src: {{source: src/log, queue_size: 1000, queue_policy: backpressure}}
"""
    df = tmp_path / "g.yml"
    df.write_text(text)
    env = dict(os.environ, CONTACTFLOW_RECORDINGS=str(tmp_path / "rec"), CONTACTFLOW_LOG_EVERY="25")
    proc = subprocess.run([DORA, "run", str(df), "--stop-after", "60s"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    runs = [p for p in (tmp_path / "rec").iterdir() if p.is_dir() and not p.is_symlink()]
    assert len(runs) == 1, (proc.stdout + proc.stderr)[-3000:]
    return proc, read_recording(runs[0])


@pytest.mark.dora
def test_recorder_unpacks_logs_into_streams_and_counts_gaps(tmp_path):
    """A node that skipped ticks 40-44 (as a real-time node may): every sent message is recorded,
    in the streams of a per-output recording, and the gap is counted, not hidden."""
    proc, rec = _graph(tmp_path, "--count 110 --skip 40,41,42,43,44")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert rec.stream_names == ["src.a", "src.b"]
    a, b = rec.stream("src.a"), rec.stream("src.b")
    want = np.array([k for k in range(110) if not 40 <= k <= 44])
    np.testing.assert_array_equal(a.seq, want)
    np.testing.assert_array_equal(b.values[:, 2], 3 * want)
    assert a.layout == [("x", 2)] and b.metadata["contract"] == "b"
    assert b.finished[-1] and not b.finished[:-1].any()
    assert rec.manifest["configs"]["src"] == {"fixture": True}
    assert rec.manifest["streams"]["src.a"]["missing_seq"] == 5
    assert rec.manifest["recording_gaps"] == 10 and rec.manifest["recording_lost_batches"] == 0
    assert "messages missing in seq" in out


@pytest.mark.dora
def test_the_last_partial_batch_is_recorded_when_the_node_fails(tmp_path):
    proc, rec = _graph(tmp_path, "--count 60 --fail")
    assert proc.returncode != 0
    np.testing.assert_array_equal(rec.stream("src.a").seq, np.arange(60))  # 2 full batches of 25 + 10
    assert rec.manifest["recording_gaps"] == 0


def test_send_rows_is_one_message_that_lockstep_splits_into_the_ticks_of_per_tick_sends():
    node = FakeNode(["a", "log"])
    s = Sender(node, {"a": A}, {"k": 1}, log_every=50)
    rows = [(k, k * 0.002, k == 4, np.array([k, -k], float)) for k in range(5)]
    s.send_rows("a", rows[:3])
    s.send_rows("a", rows[3:])
    sent = [(v, md) for o, v, md in node.sent if o == "a"]
    assert len(sent) == 2 and sent[0][1]["rows"] == 3 and sent[0][1]["contract"] == "a"
    events = [{"type": "INPUT", "id": "a", "value": pa.array(v), "metadata": md} for v, md in reversed(sent)]
    lock = _runtime.Lockstep(FakeEvents(events), {"a": (A, 0)})
    ticks = list(lock)
    assert [t.k for t in ticks] == [0, 1, 2, 3, 4]
    np.testing.assert_array_equal([t.inputs["a"]["x"] for t in ticks], [r[3] for r in rows])
    assert [t.t for t in ticks] == [r[1] for r in rows] and [t.finished for t in ticks] == [False] * 4 + [True]
    _runtime.drain_after_finish(node, grace_s=0.0)
    (v, md), = [(v, md) for o, v, md in node.sent if o == "log"]
    np.testing.assert_array_equal(unpack_log(v, md)[0].seq, np.arange(5))  # the log has one row per tick
    with pytest.raises(ValueError, match="consecutive"):
        s.send_rows("a", [rows[0], rows[2]])


def test_a_malformed_multi_tick_message_is_refused_by_split_rows():
    with pytest.raises(_runtime.ContractError):
        _runtime.split_rows(np.zeros(5), {"seq": 0, "rows": 2, "row_t": [0, 1], "row_finished": [0, 0]})


class FakeEvents:
    def __init__(self, events):
        self.events = list(events)

    def next(self, timeout=None):
        return self.events.pop(0) if self.events else None


def test_a_rows_output_carries_the_messages_ten_ticks_per_message_and_flushes_at_the_end():
    node = FakeNode(["a", "a_rows", "log"])
    s = Sender(node, {"a": A}, log_every=50)
    s.rows_every = 4
    for k in range(10):
        s.send("a", np.array([k, k], float), seq=k, t=k * 0.002)
    rows = [(v, md) for o, v, md in node.sent if o == "a_rows"]
    assert [md["seq"] for _, md in rows] == [0, 4] and all(md["rows"] == 4 for _, md in rows)
    assert rows[0][1]["contract"] == "a" and "contract" not in rows[1][1]
    assert [o for o, _, _ in node.sent].count("a") == 10  # the per-tick output is still sent
    s.send("a", np.array([10, 10], float), seq=10, t=0.02, finished=True)  # finished: sent at once
    rows = [(v, md) for o, v, md in node.sent if o == "a_rows"]
    assert rows[-1][1]["seq"] == 8 and rows[-1][1]["rows"] == 3 and rows[-1][1]["row_finished"] == [0, 0, 1]
    events = [{"type": "INPUT", "id": "a", "value": pa.array(v), "metadata": md} for v, md in rows]
    ticks = list(_runtime.Lockstep(FakeEvents(events), {"a": (A, 0)}))
    np.testing.assert_array_equal([t.inputs["a"]["x"][0] for t in ticks], np.arange(11))
    assert ticks[-1].finished


def test_rows_outputs_of_several_sizes_batch_the_same_messages_each_on_its_own():
    """``a_rows2`` (2 ticks per message, the input filter <-> Retargeting cycle of lag 2) beside ``a_rows``
    (the default, the Controller's): each is split back into the same per-tick messages; the per-tick
    output, undeclared, is only logged."""
    from contactflow.contracts.wiring import rows_output

    assert [rows_output(n) for n in ("a_rows", "a_rows2", "a_rows10", "a_rows0", "a_rowsx", "_rows2", "a")] == [
        ("a", None), ("a", 2), ("a", 10), None, None, None, None]
    node = FakeNode(["a_rows", "a_rows2", "log"])
    s = Sender(node, {"a": A}, log_every=50)
    s.rows_every = 4
    for k in range(7):
        s.send("a", np.array([k, k], float), seq=k, t=k * 0.002, finished=k == 6)
    assert [o for o, _, _ in node.sent].count("a") == 0
    for wire, seqs in (("a_rows2", [0, 2, 4, 6]), ("a_rows", [0, 4])):
        rows = [(v, md) for o, v, md in node.sent if o == wire]
        assert [md["seq"] for _, md in rows] == seqs and rows[0][1]["contract"] == "a"
        events = [{"type": "INPUT", "id": "a", "value": pa.array(v), "metadata": md} for v, md in rows]
        ticks = list(_runtime.Lockstep(FakeEvents(events), {"a": (A, 0)}))
        np.testing.assert_array_equal([t.inputs["a"]["x"][0] for t in ticks], np.arange(7))
        assert ticks[-1].finished


# --------------------------------------------------------------------------- losses before the first message


def _talos_descriptor():
    return {"nodes": [
        {"id": "mujoco_driver", "path": "contactflow-mujoco_driver", "outputs": ["sensors"]},
        {"id": "seiko_controller", "path": "contactflow-seiko_controller", "outputs": ["command", "log"]},
        {"id": "recorder", "path": "contactflow-recorder"},
    ]}


def test_a_stream_whose_first_messages_were_lost_keeps_its_layout_and_counts_the_loss(tmp_path, capsys):
    """The recorder fed faster than it reads: the first messages of a stream (the one with the contract
    and layout) and the first log batches of a node are dropped before it reads; every loss is counted and
    the layout comes from the port table."""
    from contactflow.cli import main as cli_main
    from contactflow.contracts.messages import port_specs
    from contactflow.nodes.recorder import Recorder
    from contactflow.recording.store import port_table_streams
    from contactflow.robot import load_robot

    robot = load_robot("talos")
    specs = port_specs(robot)
    inputs = {"sensors": "mujoco_driver/sensors", "ctrl": "seiko_controller/log"}
    expected = port_table_streams(_talos_descriptor(), inputs, robot)
    assert expected["mujoco_driver.sensors"]["contract"] == "sensors"
    assert expected["seiko_controller.state"]["size"] == specs["controller_state"].size
    w = RecordingWriter(tmp_path / "rec-1", {"robot": "talos"})
    rec = Recorder(w, inputs, {}, expected)
    sens, cmd, state = specs["sensors"], specs["joint_command"], specs["controller_state"]
    # seq 0..6 of the sensors lost (seq 0 carried contract and layout); then 7..99 arrive, 50 and 51 lost too
    for k in range(7, 100):
        if k in (50, 51):
            continue
        rec.on_input("sensors", np.full(sens.size, float(k)), {"seq": k, "t": 0.002 * k, "finished": k == 99})
    # the controller's log batches 0 and 1 (ticks 0..19) lost; batches 2..4 arrive (ticks 20..49)
    for batch in range(2, 5):
        rows = {"command": ({"contract": "joint_command", "layout": [[f.name, f.size] for f in cmd.fields]},
                            [(k, 0.002 * k, False, 10 ** 18 + k, np.zeros(cmd.size)) for k in range(10 * batch, 10 * batch + 10)]),
                "state": ({"contract": "controller_state"},  # a head without a layout: the port table's is used
                          [(k, 0.002 * k, False, 10 ** 18 + k, np.zeros(state.size)) for k in range(10 * batch, 10 * batch + 10)])}
        values, md = pack_log(rows, batch)
        rec.on_input("ctrl", values, md)
    rec.close()
    m = w.manifest
    s = m["streams"]["mujoco_driver.sensors"]
    assert s["missing_before_first"] == 7 and s["missing_seq"] == 2 and s["messages"] == 91
    assert s["messages"] + s["missing_seq"] + s["missing_before_first"] == 100  # every loss counted
    assert s["layout"] == [[f.name, f.size] for f in sens.fields] and s["contract"] == "sensors"
    assert m["streams"]["seiko_controller.command"]["missing_before_first"] == 20
    assert m["streams"]["seiko_controller.state"]["layout"] == [[f.name, f.size] for f in state.fields]
    assert m["recording_lost_batches"] == 2 and m["recording_lost_batches_before_first"] == 2
    assert m["recording_gaps"] == 7 + 2 + 20 + 20
    # the fields are known to `rec info --fields` and `plot`
    rc = cli_main(["rec", "info", "rec-1", "--root", str(tmp_path), "--fields"])
    out = capsys.readouterr().out
    assert rc == 0 and "mujoco_driver.sensors: t[1], q[" in out and "missing before the first message: 7" in out
    rc = cli_main(["plot", "rec-1", "--root", str(tmp_path), "mujoco_driver.sensors:q[2]", "--out", str(tmp_path / "p.png")])
    assert rc == 0


def test_a_first_message_with_its_contract_is_not_a_loss(tmp_path):
    """An output that starts after tick 0 (its first message carries the contract) counts nothing lost."""
    from contactflow.nodes.recorder import Recorder

    w = RecordingWriter(tmp_path / "run", {})
    rec = Recorder(w, {"x": "src/a"}, {}, {"src.a": {"source": "src/a", "contract": "a", "size": 2,
                                                    "layout": [["x", 2]]}})
    rec.on_input("x", np.zeros(2), {"seq": 5, "t": 0.01, "contract": "a", "layout": '[["x", 2]]'})
    rec.on_input("x", np.zeros(2), {"seq": 6, "t": 0.012})
    rec.close()
    assert w.manifest["streams"]["src.a"]["missing_before_first"] == 0 and w.manifest["recording_gaps"] == 0


def test_a_re_sent_end_of_run_is_recorded_only_in_place_of_a_lost_original(tmp_path):
    """Sender.repeat_finished's copy: skipped where the original was recorded (no second row), recorded where the
    original never arrived (the stream then ends with finished and counts no loss); keep-alives never recorded."""
    from contactflow.nodes.recorder import Recorder

    w = RecordingWriter(tmp_path / "rec-1", {"robot": "go2"}, flush_period_s=0.0)
    rec = Recorder(w, {"a": "src/a", "b": "src/b"})
    for k in range(3):
        rec.on_input("a", np.full(2, float(k)), {"seq": k, "t": 0.01 * k, "finished": k == 2})
        if k < 2:  # b's finished message (seq 2) is lost on the way
            rec.on_input("b", np.full(2, float(k)), {"seq": k, "t": 0.01 * k})
        rec.on_input("b", np.full(2, -1.0), {"seq": k, "t": 0.01 * k, "repeat": True})  # keep-alives
    rec.on_input("a", np.full(2, 9.0), {"seq": 2, "t": 0.02, "finished": True, "repeat": True})
    rec.on_input("b", np.full(2, 2.0), {"seq": 2, "t": 0.02, "finished": True, "repeat": True})
    rec.close()
    m = json.loads((tmp_path / "rec-1" / "manifest.json").read_text())
    run = read_recording(tmp_path / "rec-1")
    for name in ("src.a", "src.b"):
        st = run.stream(name)
        np.testing.assert_array_equal(st.seq, [0, 1, 2])
        np.testing.assert_array_equal(st.values[:, 0], [0.0, 1.0, 2.0])
        assert list(st.finished) == [False, False, True]
    assert m["recording_gaps"] == 0 and m["complete"] is True


def test_a_replay_sends_through_the_sender_with_the_recorded_config_and_logs_for_the_recorder():
    """nodes/replay.py with the port table (--robot): each output's first message carries the port table's contract,
    the recorded config and where it was replayed from; the log batch for the recorder carries the same contract and
    config and every row. Without --robot, or a stream of no contract of the table, a graph declaring `log` is
    refused naming why; without `log` the node sends as recorded (no Sender)."""
    from contactflow.errors import ConfigError
    from contactflow.nodes import replay
    from contactflow.recording.replay import ReplayPlan, ReplayTick

    spec = PortSpec("c", (Field("x", 2, "m"),), 500.0)
    first = {"seq": 0, "t": 0.0, "finished": False, "contract": "c", "layout": '[["x", 2]]', "config": '{"k": 1}',
             "replayed_from": "drv/out"}
    ticks = [ReplayTick(0, 0.0, (("out", np.array([0.0, 1.0]), first),)),
             ReplayTick(1, 0.002, (("out", np.array([2.0, 3.0]), {"seq": 1, "t": 0.002, "finished": True}),))]
    plan = ReplayPlan(Path("run"), [], ticks, [])
    with pytest.raises(ConfigError, match="declares the output 'log'.*no --robot"):
        replay._sender(FakeNode(["out", "log"]), plan, None)
    with pytest.raises(ConfigError, match="no contract of the port table \\('c'\\)"):
        replay._sender(FakeNode(["out", "log"]), plan, {"other": spec})
    assert replay._sender(FakeNode(["out"]), plan, None) is None
    node = FakeNode(["out", "log"])
    sender = replay._sender(node, plan, {"c": spec})
    for tick in ticks:
        replay.send_ticks(node, sender, [tick])
    wire = [m for m in node.sent if m[0] == "out"]
    assert [m[2]["seq"] for m in wire] == [0, 1] and wire[1][2]["finished"]
    assert {k: wire[0][2][k] for k in ("contract", "config", "replayed_from")} == {
        "contract": "c", "config": '{"k": 1}', "replayed_from": "drv/out"}
    logs = [m for m in node.sent if m[0] == "log"]
    assert len(logs) == 1  # the finished row sends the batch
    (block,) = unpack_log(logs[0][1], logs[0][2])
    assert block.output == "out" and block.head["contract"] == "c" and block.head["config"] == '{"k": 1}'
    np.testing.assert_array_equal(block.values, [[0.0, 1.0], [2.0, 3.0]])
    # --batch: consecutive ticks in one message (a recorded gap starts a new one), split back per tick by Lockstep
    assert [[t.seq for t in g] for g in replay.batches(ticks + [ReplayTick(5, 0.01, ())], 2)] == [[0, 1], [5]]
    node = FakeNode(["out", "log"])
    replay.send_ticks(node, replay._sender(node, plan, {"c": spec}), ticks)
    (msg,) = [m for m in node.sent if m[0] == "out"]
    parts = _runtime.split_rows(msg[1], msg[2])
    assert [p[2]["seq"] for p in parts] == [0, 1] and [p[2]["finished"] for p in parts] == [False, True]
    np.testing.assert_array_equal(np.concatenate([p[1] for p in parts]), [0.0, 1.0, 2.0, 3.0])
    assert msg[2]["config"] == '{"k": 1}' and msg[2]["replayed_from"] == "drv/out"
    with pytest.raises(_runtime.ContractError, match="sender_for, not stream_sender"):  # a node whose outputs are declared
        _runtime.stream_sender(FakeNode(["command"]), "seiko_controller", {"command": spec})


def _flood_graph(tmp_path, n, recorder_args="", queue="", mode="--mode fast"):
    """A replay (``mode``: fast, or paced) of an ``n``-tick Talos sensors stream into a recorder (no
    backpressure unless ``queue`` says so). The recorder takes seconds to start (imports, robot model):
    a replay that starts sending at once fills its queue before it reads."""
    from contactflow.contracts.messages import port_specs
    from contactflow.robot import load_robot

    spec = port_specs(load_robot("talos"))["sensors"]
    src = RecordingWriter(tmp_path / "src" / "flood-1", {"robot": "talos", "dataflow": "x.yml"})
    s = src.stream("mujoco_driver.sensors", spec.size, {"source": "mujoco_driver/sensors", "contract": "sensors",
                                                        "layout": json.dumps([[f.name, f.size] for f in spec.fields])})
    for k in range(n):
        s.append(k, 0.002 * k, np.full(spec.size, float(k)), finished=k == n - 1)
    src.close()
    df = tmp_path / "g.yml"
    df.write_text(f"""nodes:
  - id: mujoco_driver
    path: {ROOT / 'nodes' / 'replay.py'}
    args: --recording {tmp_path / 'src' / 'flood-1'} --streams mujoco_driver.sensors {mode}
    outputs: [sensors]
  - id: recorder
    path: {ROOT / 'nodes' / 'recorder.py'}
    args: --name flood --robot talos {recorder_args}
    inputs:
      sensors: {{source: mujoco_driver/sensors{queue}}}
""")
    env = dict(os.environ, CONTACTFLOW_RECORDINGS=str(tmp_path / "rec"))
    proc = subprocess.run([DORA, "run", str(df), "--stop-after", "60s"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    runs = [p for p in (tmp_path / "rec").iterdir() if p.is_dir() and not p.is_symlink()]
    assert len(runs) == 1, (proc.stdout + proc.stderr)[-3000:]
    return proc, runs[0]


@pytest.mark.dora
def test_a_flooded_recorder_counts_every_loss_and_keeps_the_layout(tmp_path):
    """A replay at 2000 messages/s into a recorder with a 20-message queue (dora discards what does not
    fit) while the recorder starts: its first messages, which carry the contract and layout, are
    lost; every loss is counted, and the stream has its layout from the port table."""
    n = 6000
    proc, run = _flood_graph(tmp_path, n, "", ", queue_size: 20", "--mode paced --speed 4")  # 2000 messages/s
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    rec = read_recording(run)
    st = rec.stream("mujoco_driver.sensors")
    e = rec.manifest["streams"]["mujoco_driver.sensors"]
    print(f"flood: {len(st)} of {n} recorded, {e['missing_seq']} missing in seq, {e['missing_before_first']} before "
          f"the first (first seq {st.seq[0]})")
    # the flood did drop messages (before the first one recorded in most runs: on a fast machine the recorder
    # is sometimes reading before the replay's first send, and then only later ones are lost)
    assert e["missing_seq"] + e["missing_before_first"] > 0
    assert e["missing_before_first"] == st.seq[0]
    # every loss up to the last message received is counted
    assert len(st) + e["missing_seq"] + e["missing_before_first"] == st.seq[-1] + 1
    # a lost tail cannot be counted (nothing comes after it) but is flagged: no 'finished' message
    assert e["finished"] == bool(st.finished[-1]) == (st.seq[-1] == n - 1)
    assert [f for f, _ in st.layout][:3] == ["t", "q", "v"] and e["contract"] == "sensors"
    np.testing.assert_array_equal(st.values[:, 0], st.seq)  # the recorded values are the sent ones
    assert rec.manifest["recording_gaps"] == st.seq[-1] + 1 - len(st)


@pytest.mark.dora
def test_recorder_max_bytes_ends_like_a_full_disk(tmp_path):
    """--max-bytes: the files are readable up to their last complete batch, what was not written is
    counted, and the recorder exits non-zero with one line naming the stream and the bytes written."""
    n = 2000
    proc, run = _flood_graph(tmp_path, n, "--max-bytes 200000", ", queue_size: 100000, queue_policy: backpressure",
                             "--mode paced --speed 2")  # 1000 messages/s: batches of ~50 messages (47 kB)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    lines = {ln.split("[contactflow] ", 1)[1] for ln in out.splitlines() if "node 'recorder' failed: disk full" in ln}
    assert len(lines) == 1, out[-3000:]  # one line (dora echoes it in its own report too)
    line = lines.pop()
    assert "stream mujoco_driver.sensors" in line and "bytes written (limit --max-bytes 200000)" in line
    rec = read_recording(run)
    st = rec.stream("mujoco_driver.sensors")
    m = rec.manifest
    assert st.truncated and st.damage.reason == "no end-of-stream marker" and st.damage.offset <= 200000
    assert len(st) == m["streams"]["mujoco_driver.sensors"]["messages"] > 0
    assert len(st) + m["unwritten_messages"] == n and m["write_failure"]["bytes_written"] == st.damage.offset
    assert f"{st.damage.offset} bytes written" in line and f"{m['unwritten_messages']} message(s) not written" in line
    np.testing.assert_array_equal(st.seq, np.arange(len(st)))


def test_recorder_max_bytes_a_stream_first_seen_after_the_limit_is_named_lost(tmp_path, capsys):
    """``--max-bytes`` (the PRIME replay's disk_full case): the estimator's output first arrives after the
    budget is spent; the run keeps no unreadable file for it, the manifest lists it as lost with the
    reason and the count, and the sensors stream reads up to its last complete batch."""
    from contactflow.cli import main as cli_main
    from contactflow.nodes.recorder import Recorder

    w = RecordingWriter(tmp_path / "rec-1", {"robot": "go2"}, flush_period_s=0.0, max_bytes=20000)
    rec = Recorder(w, {"sensors": "datagen/sensors", "est": "prime_estimator/estimate"})
    for k in range(400):
        rec.on_input("sensors", np.full(30, float(k)), {"seq": k, "t": 0.01 * k, "finished": k == 399})
        rec.flush()
    assert w.failure is not None
    for k in range(3):
        rec.on_input("est", np.zeros(12), {"seq": k, "t": 0.01 * k, "contract": "prime_estimate", "finished": k == 2})
    rec.close()
    assert sorted(p.name for p in (tmp_path / "rec-1").glob("*.arrows")) == ["datagen.sensors.arrows"]
    m = json.loads((tmp_path / "rec-1" / "manifest.json").read_text())
    assert m["lost_streams"]["prime_estimator.estimate"]["unwritten_messages"] == 3
    assert m["lost_streams"]["prime_estimator.estimate"]["finished"] is True
    # when the write failed and when the lost stream's first message was sent (the fault campaign's judge)
    est = m["lost_streams"]["prime_estimator.estimate"]
    assert 0 < m["write_failure"]["t_wall_ns"] <= est["first_unwritten_rx_ns"]  # received after the failure
    assert m["streams"]["datagen.sensors"]["first_unwritten_rx_ns"] <= m["write_failure"]["t_wall_ns"]
    assert m["complete"] is False and "prime_estimator.estimate" not in m["streams"]
    run = read_recording(tmp_path / "rec-1")
    s = run.stream("datagen.sensors")
    assert 0 < len(s) < 400 and s.truncated
    assert len(s) + m["streams"]["datagen.sensors"]["unwritten_messages"] == 400
    assert cli_main(["rec", "info", "rec-1", "--root", str(tmp_path)]) == 1
    assert "prime_estimator.estimate" in capsys.readouterr().out


def test_the_recorder_measures_how_far_behind_the_nodes_it_reads(tmp_path):
    """recorder_lag_ms in the manifest: receive time minus the newest row's send time of each batch
    (what a recorder killed at that instant would lose, besides the batch period)."""
    import time

    from contactflow.nodes.recorder import Recorder

    w = RecordingWriter(tmp_path / "rec-1", {})
    rec = Recorder(w, {"src": "src/log"})
    for batch in range(4):
        sent = time.time_ns() - 300_000_000  # rows sent 0.3 s before the recorder reads them
        rows = {"a": ({"contract": "a", "layout": [["x", 2]]},
                      [(k, 0.002 * k, False, sent - 1000 * (25 - k % 25), np.zeros(2))
                       for k in range(25 * batch, 25 * batch + 25)])}
        rec.on_input("src", *pack_log(rows, batch))
    rec.close()
    lag = w.manifest["recorder_lag_ms"]
    assert lag["batches"] == 4 and 300.0 <= lag["p50"] <= lag["max"] < 1000.0


def test_an_input_that_never_sent_is_listed_in_the_manifest_and_by_rec_info(tmp_path, capsys):
    """The PRIME replay stopped in its solve: the recorder's estimator inputs got nothing. The manifest
    names them (``silent_inputs``), the recorder logs one line each, `rec info` prints NO MESSAGE."""
    from contactflow.cli import main as cli_main
    from contactflow.nodes.recorder import Recorder

    w = RecordingWriter(tmp_path / "rec-1", {"robot": "go2"}, flush_period_s=0.0)
    rec = Recorder(w, {"sensors": "datagen/sensors", "state": "prime_estimator/state", "ping": "x/ping"})
    for k in range(3):
        rec.on_input("sensors", np.full(30, float(k)), {"seq": k, "t": 0.01 * k, "finished": k == 2})
    rec.on_input("ping", np.zeros(1), {"seq": 0, "t": 0.0, "repeat": True})  # a keep-alive repeat: it did send
    rec.close()
    m = json.loads((tmp_path / "rec-1" / "manifest.json").read_text())
    assert m["silent_inputs"] == {"state": "prime_estimator/state"} and m["complete"] is True
    cli_main(["rec", "info", "rec-1", "--root", str(tmp_path)])
    out = capsys.readouterr().out
    assert re.search(r"prime_estimator\.state .*NO MESSAGE: the recorder's input 'state' received nothing", out), out


def test_a_streams_gaps_are_warned_once_then_counted_and_totalled(caplog, tmp_path):
    """A real-time graph's stage that skips ticks opens a gap at each (hundreds of warnings buried the summary): the
    first gap of a stream is one warning, the others are counted (each gap of a log batch too), and the end gives each
    stream's totals; the warned streams are the recorder's own (a second recorder in one process warns again)."""
    import logging

    from contactflow.nodes import recorder

    w = RecordingWriter(tmp_path / "run", {"dataflow": "x.yml"})
    a, b = w.stream("input_filter.targets", 1, {}), w.stream("seiko_controller.command", 1, {})
    rec = recorder.Recorder(w, {})
    with caplog.at_level(logging.WARNING, logger=recorder.log.name):
        a.append(0, 0.0, np.zeros(1))
        for seq in (3, 6, 9):  # three gaps of two messages, one message at a time
            before = a.missing
            a.append(seq, 0.0, np.zeros(1))
            rec._warn_gap(a.path.stem, a.missing - before, seq)
        seq = np.array([12, 13, 20])  # a log batch with two gaps
        before = a.missing
        a.append_block(seq, np.zeros(3), np.zeros((3, 1)), np.zeros(3, bool), np.zeros(3, np.int64))
        rec._warn_gap(a.path.stem, a.missing - before, 12)
        b.append(0, 0.0, np.zeros(1))
        b.append(2, 0.0, np.zeros(1))
        rec._warn_gap("seiko_controller.command", 1, 2)
        recorder.Recorder(w, {})._warn_gap("seiko_controller.command", 1, 2)  # another recorder's own first
        recorder._report_gaps({"input_filter.targets": a, "seiko_controller.command": b},
                              {"input_filter.targets": a.missing, "seiko_controller.command": b.missing})
    lines = [r.getMessage() for r in caplog.records]
    assert a.gaps == 5 and a.missing == 14 and b.gaps == 1
    assert len(lines) == 4, lines
    assert lines[0].startswith("stream input_filter.targets: 2 message(s) missing before seq 3")
    assert lines[1].startswith("stream seiko_controller.command: 1 message(s) missing before seq 2")
    assert lines[2] == lines[1]
    assert lines[3] == ("stream input_filter.targets: 5 gaps between its messages; 14 message(s) missing in all "
                        "(missing_seq and missing_before_first in the manifest)")
    w.close()
