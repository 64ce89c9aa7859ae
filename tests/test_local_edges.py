"""Local edges (nodes/_local.py): a lockstep edge over a Unix datagram socket beside dora.

The whole-graph check (the same recording with and without local edges, and each shipped edge used) is
tests/test_dataflow.py::test_lockstep_runs_are_deterministic.
"""

import os
import socket
import time
import uuid

import numpy as np
import pyarrow as pa
import pytest

from contactflow.contracts.messages import Field, PortSpec
from contactflow.errors import UpstreamError
from contactflow.nodes import _local
from contactflow.nodes._local import LocalInbox, LocalOutbox, decode, encode, local_targets, parse_local_inputs
from contactflow.nodes import _runtime
from contactflow.nodes._runtime import Lockstep, Sender

SPEC = PortSpec("test", (Field("x", 2, "-"),), 500.0)


def _env(node_id: str, flow: str, **extra) -> dict:
    return {"DORA_NODE_CONFIG": f"dataflow_id: {flow}\nnode_id: {node_id}\nrun_config: {{}}\n", **extra}


class FakeNode:
    """A dora node double: dora events from a list, a descriptor, what was sent through dora."""

    def __init__(self, events=(), descriptor=None, outputs=None, timeouts=False):
        self.events = list(events)
        self.timeouts = timeouts  # no event left: dora's timeout event (True) or the end of the stream
        self.descriptor = descriptor or {"nodes": []}
        self.outputs = outputs
        self.sent = []

    def next(self, timeout=None):
        if not self.events and self.timeouts:
            time.sleep(timeout or 0)
            return {"type": "ERROR", "error": "Timed out while waiting for the next event"}
        return self.events.pop(0) if self.events else None

    def try_recv(self):
        return self.events.pop(0) if self.events else None

    def dataflow_descriptor(self):
        return self.descriptor

    def node_config(self):
        return {"outputs": self.outputs} if self.outputs is not None else {}

    def send_output(self, output, value, metadata):
        self.sent.append((output, value.to_numpy(), dict(metadata)))


def _descriptor(local_inputs: str = "cmd", extra_reader: bool = False) -> dict:
    nodes = [{"id": "a", "inputs": {}, "outputs": ["out"]},
             {"id": "b", "inputs": {"cmd": {"source": "a/out", "queue_size": 100}},
              "env": {"CONTACTFLOW_LOCAL_INPUTS": local_inputs}}]
    if extra_reader:
        nodes.append({"id": "viewer", "inputs": {"x": "a/out"}})
    return {"nodes": nodes}


def test_encode_decode_round_trip_and_malformed():
    vec = np.arange(5, dtype=np.float64)
    md = {"seq": 7, "t": 0.014, "finished": False, "rows": 1, "row_t": [0.014], "row_finished": [0],
          "contract": "test", "layout": '[["x", 5]]'}
    back, md2 = decode(encode(vec, md))
    np.testing.assert_array_equal(back, vec)
    assert md2 == md
    data = encode(vec, md)
    with pytest.raises(ValueError):
        decode(data[:3])
    with pytest.raises(ValueError):
        decode(data[:-3])  # not whole float64 values
    with pytest.raises(ValueError):
        decode(encode(vec, md)[:4] + b"[1]" + b"\0" * (len(data) - 7))  # metadata that is not a mapping


def test_an_output_goes_local_only_when_every_reader_declares_it():
    assert parse_local_inputs("sensors desired") == parse_local_inputs("sensors, desired") == ["sensors", "desired"]
    assert local_targets(_descriptor()["nodes"], "a", ["out"]) == {"out": [("b", "cmd")]}
    assert local_targets(_descriptor("other")["nodes"], "a", ["out"]) == {}
    # an observer that reads it through dora keeps the output on dora for every reader
    assert local_targets(_descriptor(extra_reader=True)["nodes"], "a", ["out"]) == {}
    assert local_targets(_descriptor()["nodes"], "b", ["out"]) == {}  # another sender


def test_messages_cross_and_fall_back_to_dora_when_the_receiver_is_not_there():
    flow = uuid.uuid4().hex
    out = LocalOutbox(FakeNode(descriptor=_descriptor()), ["out"], env=_env("a", flow))
    assert list(out.targets) == ["out"]
    # the receiver has not bound its socket yet: the caller sends through dora
    assert not out.send("out", np.zeros(2), {"seq": 0, "t": 0.0, "finished": False})
    inbox = LocalInbox(["cmd"], env=_env("b", flow, CONTACTFLOW_LOCAL_INPUTS="cmd"))
    assert list(inbox.socks) == ["cmd"]
    assert out.send("out", np.array([1.0, 2.0]), {"seq": 1, "t": 0.002, "finished": False})
    assert out.sent == {"out": 1} and out.fallbacks == {"out": 1}
    got = []
    assert inbox.wait(["cmd"], 1.0, got.append)
    assert got[0]["id"] == "cmd" and got[0]["metadata"]["seq"] == 1
    np.testing.assert_array_equal(got[0]["value"], [1.0, 2.0])
    assert not inbox.wait(["cmd"], 0.01, got.append)  # nothing more: a timeout
    inbox.close()
    assert not out.send("out", np.zeros(2), {"seq": 2, "t": 0.004, "finished": False})  # the receiver ended


def test_local_edges_are_off_in_real_time_nodes_and_when_turned_off():
    flow = uuid.uuid4().hex
    assert LocalInbox(["cmd"], env=_env("b", flow, CONTACTFLOW_LOCAL_INPUTS="cmd"), realtime=True).socks == {}
    assert LocalInbox(["cmd"], env=_env("b", flow, CONTACTFLOW_LOCAL_INPUTS="cmd", CONTACTFLOW_LOCAL_EDGES="0")).socks == {}
    assert LocalOutbox(FakeNode(descriptor=_descriptor()), ["out"], env=_env("a", flow, CONTACTFLOW_LOCAL_EDGES="0")).targets == {}
    assert LocalInbox(["cmd"], env={"CONTACTFLOW_LOCAL_INPUTS": "cmd"}).socks == {}  # outside dora


def test_a_misspelled_local_input_is_refused_with_a_suggestion():
    from contactflow.errors import ConfigError

    with pytest.raises(ConfigError, match=r"CONTACTFLOW_LOCAL_INPUTS='sensor desired' of node 'b': 'sensor' not among "
                                          r"its lockstep inputs \['desired', 'sensors'\] \(did you mean 'sensors'\?\)"):
        LocalInbox(["sensors", "desired"], env=_env("b", uuid.uuid4().hex, CONTACTFLOW_LOCAL_INPUTS="sensor desired"))


def test_a_malformed_local_message_is_counted_and_skipped():
    flow = uuid.uuid4().hex
    inbox = LocalInbox(["cmd"], env=_env("b", flow, CONTACTFLOW_LOCAL_INPUTS="cmd"))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.sendto(b"\x01", _local.address(flow, "b", "cmd", _local.socket_dir()))
    got = []
    assert inbox.wait(["cmd"], 1.0, got.append)
    assert got == [] and inbox.malformed == {"cmd": 1}
    assert "MALFORMED" in inbox.note()
    inbox.close()


def test_lockstep_takes_local_and_dora_messages_alike(monkeypatch):
    """A Sender whose output's reader declared it local, and a Lockstep reading it: ticks in order, the first
    message through dora (the receiver not there yet), the others over the socket, the same values."""
    flow = uuid.uuid4().hex
    monkeypatch.setenv("DORA_NODE_CONFIG", _env("a", flow)["DORA_NODE_CONFIG"])
    sender_node = FakeNode(descriptor=_descriptor(), outputs=["out"])
    sender = Sender(sender_node, {"out": SPEC}, {"gain": 2.0})
    sender.send("out", {"x": [0.0, 0.5]}, seq=0, t=0.0)  # nobody bound: through dora
    assert [s[0] for s in sender_node.sent] == ["out"]
    monkeypatch.setenv("DORA_NODE_CONFIG", _env("b", flow)["DORA_NODE_CONFIG"])
    monkeypatch.setenv("CONTACTFLOW_LOCAL_INPUTS", "cmd")
    dora_events = [{"type": "INPUT", "id": "cmd", "value": pa.array(sender_node.sent[0][1]),
                    "metadata": sender_node.sent[0][2]},
                   {"type": "INPUT_CLOSED", "id": "cmd"}]  # the sender ended (dora says so on the declared edge)
    lock = Lockstep(FakeNode(dora_events), {"cmd": (SPEC, 0)})
    assert list(lock.local.socks) == ["cmd"]
    for k in (1, 2):
        sender.send("out", {"x": [k, k + 0.5]}, seq=k, t=0.002 * k, finished=k == 2)
    assert len(sender_node.sent) == 1 and sender.local.sent == {"out": 2}
    ticks = list(lock)
    assert [t.k for t in ticks] == [0, 1, 2] and ticks[-1].finished
    np.testing.assert_array_equal(ticks[1].inputs["cmd"]["x"], [1.0, 1.5])
    assert lock.local.received == {"cmd": 2}
    assert lock.configs["cmd"] == '{"gain": 2.0}'  # the first message's config metadata (dora here) reached the Lockstep


def _receiver(monkeypatch, flow, node_id="b", inputs="cmd"):
    monkeypatch.setenv("DORA_NODE_CONFIG", _env(node_id, flow)["DORA_NODE_CONFIG"])
    monkeypatch.setenv("CONTACTFLOW_LOCAL_INPUTS", inputs)


def _local_sender(flow, readers=("b",)):
    nodes = [{"id": "a", "inputs": {}, "outputs": ["out"]}] + [
        {"id": r, "inputs": {"cmd": "a/out"}, "env": {"CONTACTFLOW_LOCAL_INPUTS": "cmd"}} for r in readers]
    return LocalOutbox(FakeNode(descriptor={"nodes": nodes}), ["out"], env=_env("a", flow))


def _md(k, finished=False):
    return {"seq": k, "t": 0.002 * k, "finished": finished}


def test_a_local_input_that_stops_coming_ends_with_the_lockstep_timeout(monkeypatch):
    """The sender stopped (hung) after some local messages: the wait on the socket ends at the timeout, naming the
    input and what came over its socket."""
    flow = uuid.uuid4().hex
    _receiver(monkeypatch, flow)
    lock = Lockstep(FakeNode(), {"cmd": (SPEC, 0)}, timeout_s=0.2)
    out = _local_sender(flow)
    assert out.send("out", np.zeros(2), _md(0))
    it = iter(lock)
    assert next(it).k == 0
    with pytest.raises(UpstreamError, match=r"no input for .* cmd \(seq 1\) \(local inputs: cmd: 1 over the socket"):
        next(it)
    assert not lock.local.socks  # closed at the end of the loop: the sender now falls back to dora at once
    assert not out.send("out", np.zeros(2), _md(1)) and out.fallbacks == {"out": 1}


@pytest.mark.parametrize("event", [{"type": "INPUT_CLOSED", "id": "cmd"}, {"type": "STOP"}])
def test_dora_events_are_seen_while_local_messages_keep_coming(monkeypatch, event):
    """STOP or a closed input reach a node whose local input keeps it busy (its dora events are looked at every
    LOCAL_POLL_S, not only when the socket is silent)."""
    flow = uuid.uuid4().hex
    _receiver(monkeypatch, flow)
    node = FakeNode()
    lock = Lockstep(node, {"cmd": (SPEC, 0)})
    out = _local_sender(flow)
    assert out.send("out", np.zeros(2), _md(0))
    seen_at = None
    for tick in lock:
        if tick.k == 3:
            node.events.append(dict(event))
        if seen_at is None and (lock.stopped or "cmd" in lock.closed):
            seen_at = tick.k
        if tick.k < 200:
            assert out.send("out", np.zeros(2), _md(tick.k + 1, finished=tick.k + 1 == 200))
        time.sleep(0.0005)
    assert seen_at is not None and seen_at < 60, seen_at  # within a few LOCAL_POLL_S of ~1 ms ticks
    assert tick.k == 200 and tick.finished


def test_a_sender_that_turns_to_dora_is_waited_for_on_dora(monkeypatch):
    """The newest message of an input decides where the node waits: after one through dora, dora."""
    flow = uuid.uuid4().hex
    _receiver(monkeypatch, flow)
    node = FakeNode(timeouts=True)
    lock = Lockstep(node, {"cmd": (SPEC, 0)})
    out = _local_sender(flow)
    out.send("out", np.zeros(2), _md(0))
    it = iter(lock)
    assert next(it).k == 0 and lock.local.via_socket == {"cmd": True}
    node.events += [{"type": "INPUT", "id": "cmd", "value": pa.array([1.0, 1.0]), "metadata": _md(k)} for k in (1, 2)]
    assert next(it).k == 1 and lock.local.via_socket == {"cmd": False} and lock.local.via_dora == {"cmd": 2}
    waits = []
    monkeypatch.setattr(lock.local, "wait", lambda *a: waits.append(a) or False)
    assert next(it).k == 2 and waits == []


def test_a_full_receiver_queue_makes_the_sender_wait_then_use_dora(monkeypatch):
    """More messages than the receiver's socket queue holds before it reads: the sender waits up to
    LOCAL_SEND_TIMEOUT_S, then sends through dora (counted); nothing is lost."""
    monkeypatch.setattr(_local, "LOCAL_SEND_TIMEOUT_S", 0.05)
    flow = uuid.uuid4().hex
    _receiver(monkeypatch, flow)
    node = FakeNode()
    sent_dora = node.events  # what the sender sent through dora reaches the node's dora events
    lock = Lockstep(node, {"cmd": (SPEC, 0)})
    out = _local_sender(flow)
    try:  # the receiver's queue length (Linux default 10)
        qlen = int(open("/proc/sys/net/unix/max_dgram_qlen").read())
    except (OSError, ValueError):
        qlen = 10
    n = min(qlen, 1000) + 10
    for k in range(n):
        if not out.send("out", np.full(2, float(k)), _md(k, finished=k == n - 1)):
            sent_dora.append({"type": "INPUT", "id": "cmd", "value": pa.array([float(k)] * 2), "metadata": _md(k, k == n - 1)})
    assert out.sent["out"] >= 5 and out.fallbacks["out"] == len(sent_dora) > 0
    sent_dora.append({"type": "INPUT_CLOSED", "id": "cmd"})
    ticks = list(lock)
    assert [t.k for t in ticks] == list(range(n))
    assert [float(t.inputs["cmd"]["x"][0]) for t in ticks] == [float(k) for k in range(n)]


def test_a_message_over_the_size_limit_goes_through_dora(monkeypatch):
    flow = uuid.uuid4().hex
    inbox = LocalInbox(["cmd"], env=_env("b", flow, CONTACTFLOW_LOCAL_INPUTS="cmd"))
    out = _local_sender(flow)
    assert not out.send("out", np.zeros(_local.MAX_LOCAL_BYTES // 8), _md(0))
    assert out.send("out", np.zeros(1000), _md(1)) and (out.sent, out.fallbacks) == ({"out": 1}, {"out": 1})
    inbox.close()


def test_two_readers_one_not_ready_get_the_message_through_dora_too():
    """A message that reached one reader's socket and not the other's goes to both through dora: the first gets
    it twice (the seq matching keeps one)."""
    flow = uuid.uuid4().hex
    inbox = LocalInbox(["cmd"], env=_env("b", flow, CONTACTFLOW_LOCAL_INPUTS="cmd"))
    out = _local_sender(flow, readers=("b", "c"))
    assert out.readers == {"out": ["b/cmd", "c/cmd"]}
    assert not out.send("out", np.zeros(2), _md(0))  # c has not bound: through dora, to both
    got = []
    inbox.drain(got.append)
    assert [e["metadata"]["seq"] for e in got] == [0]
    inbox.close()


def test_one_local_input_read_by_two_loops_at_once_is_refused(monkeypatch):
    from contactflow.errors import ConfigError

    flow = uuid.uuid4().hex
    _receiver(monkeypatch, flow)
    first = Lockstep(FakeNode(), {"cmd": (SPEC, 0)})
    with pytest.raises(ConfigError, match="input 'cmd' of node 'b' is already read over its socket"):
        Lockstep(FakeNode(), {"cmd": (SPEC, 0)})
    first.local.close()
    Lockstep(FakeNode(), {"cmd": (SPEC, 0)}).local.close()  # one after the other: fine


def test_the_sockets_are_in_a_private_folder():
    d = _local.socket_dir()
    assert d is not None and (d.stat().st_mode & 0o777) == 0o700 and d.stat().st_uid == os.getuid()


def test_a_local_input_whose_sender_uses_dora_waits_on_dora(monkeypatch):
    """A sender that does not use local edges (another driver in the node's place): its messages come through
    dora, and the node waits on dora for them, never on the socket it listens to."""
    flow = uuid.uuid4().hex
    monkeypatch.setenv("DORA_NODE_CONFIG", _env("b", flow)["DORA_NODE_CONFIG"])
    monkeypatch.setenv("CONTACTFLOW_LOCAL_INPUTS", "cmd")
    events = [{"type": "INPUT", "id": "cmd", "value": pa.array([k, 0.0]),
               "metadata": {"seq": k, "t": 0.002 * k, "finished": k == 49}} for k in range(50)]
    lock = Lockstep(FakeNode(events + [{"type": "INPUT_CLOSED", "id": "cmd"}]), {"cmd": (SPEC, 0)})
    waits = []
    monkeypatch.setattr(lock.local, "wait", lambda *a: waits.append(a) or False)
    assert [t.k for t in lock] == list(range(50))
    assert waits == [] and lock.local.received == {"cmd": 0} and lock.local.via_dora == {"cmd": 50}


def test_the_sender_closing_its_dora_edge_ends_a_local_wait(monkeypatch):
    flow = uuid.uuid4().hex
    monkeypatch.setenv("DORA_NODE_CONFIG", _env("b", flow)["DORA_NODE_CONFIG"])
    monkeypatch.setenv("CONTACTFLOW_LOCAL_INPUTS", "cmd")
    lock = Lockstep(FakeNode([{"type": "INPUT_CLOSED", "id": "cmd"}]), {"cmd": (SPEC, 0)})
    with pytest.raises(UpstreamError, match="closed before the run ended"):
        next(iter(lock))
    assert os.environ["CONTACTFLOW_LOCAL_INPUTS"] == "cmd"


def test_stale_socket_files_are_pruned_live_ones_kept(tmp_path):
    live = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    live.bind(str(tmp_path / "live.sock"))
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    dead.bind(str(tmp_path / "dead.sock"))
    dead.close()  # its file stays, as a killed node's does
    fresh = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    fresh.bind(str(tmp_path / "fresh.sock"))
    fresh.close()
    old = time.time() - 2 * _local.STALE_SOCKET_S
    for name in ("live.sock", "dead.sock"):
        os.utime(tmp_path / name, (old, old))
    assert _local.prune_stale_sockets(tmp_path) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh.sock", "live.sock"]
    live.close()


def test_a_replay_with_a_local_ack_sees_stop_while_acks_keep_coming(monkeypatch):
    """nodes/replay.py: acks over the ack's socket every millisecond (faster than LOCAL_POLL_S) do not hide a STOP
    queued on dora: the replay looks at its dora events at least every LOCAL_POLL_S, as a Lockstep does."""
    from contactflow.nodes.replay import _Events

    flow = uuid.uuid4().hex
    _receiver(monkeypatch, flow, inputs="ack")
    nodes = [{"id": "a", "inputs": {}, "outputs": ["out"]},
             {"id": "b", "inputs": {"ack": "a/out"}, "env": {"CONTACTFLOW_LOCAL_INPUTS": "ack"}}]
    node = FakeNode(events=[{"type": "STOP"}])
    events = _Events(node, "ack", local=True)
    try:
        out = LocalOutbox(FakeNode(descriptor={"nodes": nodes}), ["out"], env=_env("a", flow))
        start = time.monotonic()
        for k in range(200):
            assert out.send("out", np.zeros(2), _md(k))
            events.poll(1.0)
            if events.stopped:
                break
            time.sleep(0.001)
        assert events.stopped and events.acked >= 0, events.acked
        assert time.monotonic() - start < 20 * _runtime.LOCAL_POLL_S  # within a few polls, not at the end
        assert events.local.received == {"ack": events.acked + 1}  # the acks came over the socket
    finally:
        events.local.close()
