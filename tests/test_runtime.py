"""The nodes' lockstep runtime, driven by a fake dora node (no daemon)."""

import sys

import numpy as np
import pyarrow as pa
import pytest

from contactflow.contracts.messages import Field, PortSpec
from contactflow.nodes import _runtime
from contactflow.nodes._runtime import Lockstep, Sender, UpstreamError

SPEC = PortSpec("test", (Field("x", 2, "m"),), 500.0)


class FakeNode:
    """Replays a list of dora-like events; records what is sent."""

    def __init__(self, events):
        self.events = list(events)
        self.sent = []

    def next(self, timeout=None):
        if self.events:
            return self.events.pop(0)
        return None

    def send_output(self, output, value, metadata):
        self.sent.append((output, value.to_numpy(), dict(metadata)))


def msg(iid, seq, x, finished=False):
    return {"type": "INPUT", "id": iid, "value": pa.array(np.asarray(x, float)), "metadata": {"seq": seq, "t": seq * 0.002, "finished": finished}}


def test_ticks_are_matched_by_seq_with_offsets_whatever_the_arrival_order():
    events = [msg("b", 1, [1, 1]), msg("a", 1, [10, 10]), msg("a", 0, [0, 0]), msg("b", 0, [5, 5]),
              msg("a", 2, [20, 20], finished=True), {"type": "INPUT_CLOSED", "id": "a"}, {"type": "INPUT_CLOSED", "id": "b"}]
    ticks = list(Lockstep(FakeNode(events), {"a": (SPEC, 0), "b": (SPEC, 1)}))
    assert [t.k for t in ticks] == [0, 1, 2]
    assert ticks[0].inputs["b"] is None  # before its first message: the node uses its reset state
    np.testing.assert_array_equal(ticks[1].inputs["a"]["x"], [10, 10])
    np.testing.assert_array_equal(ticks[1].inputs["b"]["x"], [5, 5])  # seq k-1
    np.testing.assert_array_equal(ticks[2].inputs["b"]["x"], [1, 1])
    assert ticks[2].finished and not ticks[1].finished


def test_malformed_message_is_reported_and_the_tick_still_runs(caplog):
    events = [msg("a", 0, [0, 0]), msg("a", 1, [np.nan, 0]), msg("a", 2, [1, 2, 3], finished=True), {"type": "INPUT_CLOSED", "id": "a"}]
    ticks = list(Lockstep(FakeNode(events), {"a": (SPEC, 0)}))
    assert [t.k for t in ticks] == [0, 1, 2]
    assert ticks[1].inputs["a"] is None and "non-finite" in ticks[1].errors["a"]
    assert ticks[2].inputs["a"] is None and "expected 2 float64 values" in ticks[2].errors["a"]
    assert "malformed message ignored" in caplog.text


def test_input_closing_before_the_end_names_the_input():
    events = [msg("a", 0, [0, 0]), {"type": "INPUT_CLOSED", "id": "a"}]
    with pytest.raises(UpstreamError, match="input\\(s\\) a closed before the run ended"):
        list(Lockstep(FakeNode(events), {"a": (SPEC, 0)}))


def test_node_failed_event_stops_with_the_failed_node():
    events = [{"type": "NODE_FAILED", "value": {"source_node_id": "seiko_controller"}}]
    with pytest.raises(UpstreamError, match="seiko_controller"):
        list(Lockstep(FakeNode(events), {"a": (SPEC, 0)}))


def test_silence_times_out_naming_the_missing_input():
    class Silent(FakeNode):
        def next(self, timeout=None):
            return {"type": "ERROR", "error": "Timeout event stream error: Receiver timed out"}

    with pytest.raises(UpstreamError, match="waiting for a \\(seq 0\\)"):
        list(Lockstep(Silent([]), {"a": (SPEC, 0)}, timeout_s=0.0))


def test_realtime_mode_skips_dropped_ticks():
    events = [msg("a", 0, [0, 0]), msg("a", 3, [3, 3]), msg("a", 4, [4, 4], finished=True), {"type": "INPUT_CLOSED", "id": "a"}]
    ticks = list(Lockstep(FakeNode(events), {"a": (SPEC, 0)}, skip_missing=True))
    assert [t.k for t in ticks] == [0, 3, 4]


def repeat(m):
    return {**m, "metadata": {**m["metadata"], "repeat": True}}


@pytest.mark.parametrize("realtime", [False, True], ids=["lockstep", "realtime"])
def test_a_re_sent_end_of_run_stands_in_for_a_lost_one_and_is_ignored_after_the_original(realtime):
    """Sender.repeat_finished's copy: the run ends cleanly when the original `finished` message was lost; after the
    original it adds no tick; a keep-alive repeat (not finished) of a seq never received is still ignored."""
    end = msg("a", 2, [20, 20], finished=True)
    closed = {"type": "INPUT_CLOSED", "id": "a"}
    kw = {"skip_missing": True} if realtime else {}
    lost = [msg("a", 0, [0, 0]), msg("a", 1, [1, 1]), repeat(end), closed]
    ticks = list(Lockstep(FakeNode(lost), {"a": (SPEC, 0)}, **kw))
    assert [t.k for t in ticks] == [0, 1, 2] and ticks[-1].finished
    np.testing.assert_array_equal(ticks[-1].inputs["a"]["x"], [20, 20])
    # after the original, a copy with other values (as if corrupted) changes nothing: tick 2 waits for b, holding a's
    both = [msg("a", 0, [0, 0]), msg("b", 0, [0, 0]), msg("a", 1, [1, 1]), msg("b", 1, [1, 1]), end,
            repeat(msg("a", 2, [99, 99], finished=True)), msg("b", 2, [2, 2], finished=True), closed,
            {"type": "INPUT_CLOSED", "id": "b"}]
    ins = {"a": (SPEC, 0), "b": (SPEC, 0)}
    ticks = list(Lockstep(FakeNode(both), ins, **({**kw, "clock": "b"} if realtime else kw)))
    assert [t.k for t in ticks] == [0, 1, 2]
    np.testing.assert_array_equal(ticks[-1].inputs["a"]["x"], [20, 20])
    keep_alive = [msg("a", 0, [0, 0]), repeat(msg("a", 1, [1, 1])), closed]
    seen = []
    with pytest.raises(UpstreamError, match="closed before the run ended"):
        for t in Lockstep(FakeNode(keep_alive), {"a": (SPEC, 0)}, **kw):
            seen.append(t.k)
    assert seen == [0]  # the keep-alive of seq 1 is no tick


def test_the_end_of_run_is_re_sent_once_on_the_outputs_a_dropping_queue_reads(monkeypatch):
    monkeypatch.setenv("DORA_NODE_CONFIG", "dataflow_id: f\nnode_id: ctl\n")
    flow = {"nodes": [
        {"id": "ctl", "outputs": ["command", "log"]},
        {"id": "drv", "inputs": {"command": {"source": "ctl/command", "queue_size": 10}}},  # drop_oldest (default)
        {"id": "rec", "inputs": {"ctl": {"source": "ctl/log", "queue_policy": "backpressure"}}},
        {"id": "obs", "inputs": {"cmd": "ctl/command"}},
    ]}

    class Node(FakeNode):
        def dataflow_descriptor(self):
            return flow

    node = Node([])
    s = Sender(node, {"command": SPEC, "log": SPEC})
    s.send("command", np.array([1.0, 2.0]), seq=0, t=0.0)
    assert s.repeat_finished() == [] and len(node.sent) == 1  # nothing said finished yet
    s.send("command", np.array([3.0, 4.0]), seq=1, t=0.002, finished=True)
    s.send("log", np.array([5.0, 6.0]), seq=1, t=0.002, finished=True)
    _runtime.drain_after_finish(node, grace_s=0.02)  # re-sends after half the grace, the event stream being over
    (out, value, md), = node.sent[3:]
    assert out == "command" and md["repeat"] and md["finished"] and md["seq"] == 1 and "contract" not in md
    np.testing.assert_array_equal(value, [3.0, 4.0])
    assert s.repeat_finished() == []  # once


def _ahead_commands_and_a_dropping_clock(missing_cmd=(2,)):
    """An operator ahead (cmd 0..7, some seqs missing), then a clock that drops ticks 1-3 and 6 (values of
    the wrong length: a clock whose values the node does not read)."""
    events = [msg("cmd", k, [k, -k]) for k in range(8) if k not in missing_cmd]
    events += [msg("clk", k, [0, 0, 0], finished=k == 7) for k in (0, 4, 5, 7)]
    return events + [{"type": "INPUT_CLOSED", "id": "clk"}, {"type": "INPUT_CLOSED", "id": "cmd"}]


def test_realtime_per_tick_inputs_give_each_skipped_ticks_own_message():
    """The real-time input filter steps once per skipped tick: with ``per_tick`` it gets each tick's own
    operator command (the newest at or before it where one is missing), not the newest held over the gap;
    a ``values_unused`` clock is not decoded (its wrong-length values raise no error)."""
    ins = {"clk": (SPEC, 0), "cmd": (SPEC, 0)}
    ticks = list(Lockstep(FakeNode(_ahead_commands_and_a_dropping_clock()), ins, skip_missing=True, clock="clk",
                          per_tick=("cmd",), values_unused=("clk",)))
    assert [t.k for t in ticks] == [0, 4, 5, 7] and [t.ticks for t in ticks] == [1, 4, 1, 2]
    assert all(t.inputs["clk"] is None and not t.errors for t in ticks) and ticks[-1].finished
    held = [[h["cmd"]["x"][0] for h in t.skipped] for t in ticks]
    assert held == [[], [1, 1, 3], [], [6]]  # tick 2's command missing: tick 1's held for it
    np.testing.assert_array_equal(ticks[1].inputs["cmd"]["x"], [4, -4])
    # the newest max_per_tick skipped ticks only; without per_tick none (the clock decoded: its error kept)
    short = list(Lockstep(FakeNode(_ahead_commands_and_a_dropping_clock()), ins, skip_missing=True, clock="clk",
                          per_tick=("cmd",), max_per_tick=2, values_unused=("clk",)))
    assert [[h["cmd"]["x"][0] for h in t.skipped] for t in short] == [[], [1, 3], [], [6]]
    plain = list(Lockstep(FakeNode(_ahead_commands_and_a_dropping_clock()), ins, skip_missing=True, clock="clk"))
    assert all(t.skipped == [] for t in plain) and "expected 2 float64 values" in plain[0].errors["clk"]
    # a command that never came before a skipped tick: None (the filter is not stepped with it)
    late = list(Lockstep(FakeNode(_ahead_commands_and_a_dropping_clock(missing_cmd=(0, 1, 2))), ins,
                         skip_missing=True, clock="clk", per_tick=("cmd",)))
    assert [h["cmd"] for h in late[1].skipped][:2] == [None, None]
    with pytest.raises(ValueError, match="per_tick input\\(s\\) \\['nope'\\]"):
        Lockstep(FakeNode([]), ins, skip_missing=True, per_tick=("nope",))


def test_sender_attaches_seq_time_and_layout_once():
    node = FakeNode([])
    s = Sender(node, {"out": SPEC}, {"gain": 2.0})
    s.send("out", {"x": [1.0, 2.0]}, seq=0, t=0.0)
    s.send("out", {"x": [3.0, 4.0]}, seq=1, t=0.002, finished=True)
    (_, v0, m0), (_, v1, m1) = node.sent
    assert m0["seq"] == 0 and m0["contract"] == "test" and "layout" in m0 and '"gain": 2.0' in m0["config"]
    assert m1["seq"] == 1 and m1["finished"] is True and "layout" not in m1
    np.testing.assert_array_equal(v1, [3.0, 4.0])


def test_node_config_sections_are_checked(tmp_path, monkeypatch):
    import dataclasses

    from contactflow.errors import ConfigError

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Cfg:
        kp_per_s: float = 0.2

    f = tmp_path / "cfg.yaml"
    f.write_text("seiko_controller: {kp_per_s: 0.5}\ninput_filter: {}\n")
    assert _runtime.load_node_config(Cfg, str(f), "seiko_controller").kp_per_s == 0.5
    f.write_text("controller: {kp_per_s: 0.5}\n")
    with pytest.raises(ConfigError, match="unknown section.*'controller'"):
        _runtime.load_node_config(Cfg, str(f), "seiko_controller")
    f.write_text("input_filter: {}\n")
    with pytest.raises(ConfigError, match="no 'seiko_controller' section"):
        _runtime.load_node_config(Cfg, str(f), "seiko_controller")
    assert _runtime.load_node_config(Cfg, str(f), "seiko_controller", required=False).kp_per_s == 0.2  # defaults
    f.write_text("controller: {kp_per_s: 0.5}\n")
    with pytest.raises(ConfigError, match="unknown section"):  # still refused when the section is optional
        _runtime.load_node_config(Cfg, str(f), "seiko_controller", required=False)
    monkeypatch.setattr(sys, "argv", ["/venv/bin/contactflow-seiko-stack"])  # a node reading three sections
    with pytest.raises(ConfigError, match="this node reads 'input_filter', 'seiko_retargeting', 'seiko_controller',"):
        _runtime.load_node_config(Cfg, str(f), "seiko_controller", required=False)
    f.write_text("seiko_controller: {kp_per_sec: 0.5}\n")
    with pytest.raises(ConfigError, match="cfg.yaml:seiko_controller: unknown key.*'kp_per_sec'"):
        _runtime.load_node_config(Cfg, str(f), "seiko_controller")


def test_meta_time_takes_a_finite_number_and_nothing_else():
    """Every node reads a message's ``t`` through meta_time: a peer's garbage ``t`` (text, None, a bool,
    NaN, inf, an overflowing int) gives the caller's default instead of raising out of its loop."""
    from contactflow.nodes._runtime import meta_time

    assert meta_time({"t": 0.25}, -1.0) == 0.25 and meta_time({"t": 3}, -1.0) == 3.0
    for bad in ("0.1", None, True, float("nan"), float("inf"), 10**400, [0.1]):
        assert meta_time({"t": bad}, -1.0) == -1.0, bad
    assert meta_time({}, -1.0) == -1.0


def test_meta_seq_takes_an_integer_in_range_and_nothing_else():
    """Every reader of a message's ``seq`` (Lockstep, the MuJoCo driver's command, the replay's ack, the viewer, the
    re-send rule) reads it through meta_seq: a bool (an int to Python), a float, text, a negative or a too large
    integer gives None; and a re-send whose seq is a bool is not taken for a received one."""
    from contactflow.nodes._runtime import MAX_SEQ, is_received_repeat, meta_seq

    assert meta_seq({"seq": 0}) == 0 and meta_seq({"seq": MAX_SEQ - 1}) == MAX_SEQ - 1
    for bad in (True, False, 1.0, "3", None, -1, MAX_SEQ, [1]):
        assert meta_seq({"seq": bad}) is None, bad
    assert meta_seq({}) is None
    assert is_received_repeat({"seq": 0, "repeat": True}, 0)
    assert not is_received_repeat({"seq": False, "repeat": True}, 0)


class TimedNode(FakeNode):
    """A FakeNode whose events come at given delays of a fake monotonic clock: (delay_s, event) pairs
    (no real sleep: a loaded machine cannot stretch the test's time)."""

    def __init__(self, events, clock):
        super().__init__(events)
        self.clock = clock

    def next(self, timeout=None):
        if self.events:
            delay, ev = self.events.pop(0)
            self.clock[0] += delay
            return ev
        return None


@pytest.fixture
def fake_clock(monkeypatch):
    """The runtime's time.monotonic() replaced by a list cell the TimedNode advances."""
    import time as real_time
    import types

    cell = [1000.0]
    fake = types.SimpleNamespace(**{k: getattr(real_time, k) for k in dir(real_time) if not k.startswith("_")})
    fake.monotonic = lambda: cell[0]
    monkeypatch.setattr(_runtime, "time", fake)
    return cell


def _clock_and_b(b_until: int, n: int = 40, b_finished: bool = False, pause_at: int = -1, pause_s: float = 0.0,
                 b_from: int = 0):
    """Clock input `a` every 10 ms for n ticks (a pause of pause_s before tick pause_at); input `b` with each
    tick from b_from up to b_until, then silent."""
    events = []
    for k in range(n):
        events.append((0.01 + (pause_s if k == pause_at else 0.0), msg("a", k, [k, k], finished=k == n - 1)))
        if b_from <= k <= b_until:
            events.append((0.0, msg("b", k, [k, k], finished=b_finished and k == b_until)))
    return events + [(0.0, {"type": "INPUT_CLOSED", "id": "a"}), (0.0, {"type": "INPUT_CLOSED", "id": "b"})]


def test_realtime_stale_input_stops_the_node_naming_the_input(fake_clock):
    """Real time holds an input's newest message: an upstream that hangs (b silent after tick 5 while
    the clock goes on) is noticed after stale_s, not run on a stale value for ever; an input that said
    `finished` is exempt, and without stale_s nothing is checked."""
    ins = {"a": (SPEC, 0), "b": (SPEC, 0)}
    seen = []
    with pytest.raises(UpstreamError, match=r"input 'b': no new message for 0\.1\d s while the clock \('a'\) ticked"):
        for tick in Lockstep(TimedNode(_clock_and_b(5), fake_clock), ins, skip_missing=True, stale_s=0.1):
            seen.append(tick.k)
    assert max(seen) == 15  # b's last message came with tick 5: ticks 6..15 are 0.10 s, tick 16 is past
    ticks = list(Lockstep(TimedNode(_clock_and_b(5, b_finished=True), fake_clock), ins, skip_missing=True, stale_s=0.1))
    assert ticks[-1].k == 39 and ticks[-1].finished
    ticks = list(Lockstep(TimedNode(_clock_and_b(5), fake_clock), ins, skip_missing=True))
    assert ticks[-1].k == 39
    np.testing.assert_array_equal(ticks[-1].inputs["b"]["x"], [5, 5])  # held


def test_realtime_staleness_does_not_count_a_paused_clock(fake_clock):
    """The clock paused for 1 s (the driver stopped) while b waited for it: not stale (b had nothing to
    answer); b silent afterwards while the clock ticks again: stale after stale_s of ticking."""
    ins = {"a": (SPEC, 0), "b": (SPEC, 0)}
    ticks = list(Lockstep(TimedNode(_clock_and_b(39, pause_at=10, pause_s=1.0), fake_clock), ins,
                          skip_missing=True, stale_s=0.1))
    assert ticks[-1].k == 39
    seen = []
    with pytest.raises(UpstreamError, match="input 'b': no new message"):
        for tick in Lockstep(TimedNode(_clock_and_b(9, pause_at=10, pause_s=1.0), fake_clock), ins,
                             skip_missing=True, stale_s=0.1):
            seen.append(tick.k)
    assert max(seen) == 20  # b's last with tick 9; the pause before tick 10 (and that tick's period) not counted


def test_realtime_input_that_never_sends_gets_the_start_up_allowance(monkeypatch, fake_clock):
    monkeypatch.setattr(_runtime, "STALE_FIRST_S", 0.15)
    ins = {"a": (SPEC, 0), "b": (SPEC, 0)}
    with pytest.raises(UpstreamError, match=r"input 'b': no message yet for 0\.1\d s .*limit 0\.15 s"):
        list(Lockstep(TimedNode(_clock_and_b(-1), fake_clock), ins, skip_missing=True, stale_s=0.05))


def test_a_node_stops_on_sigterm_even_if_started_with_it_ignored():
    """An ignored SIGTERM survives exec (a CI runner, nohup-like launchers): node_main restores the default
    action, so dora's SIGTERM still stops a node that has no handler of its own."""
    import signal
    import subprocess
    import sys

    code = ("import sys, time\nfrom contactflow.nodes._runtime import node_main\n"
            "def body():\n    print('up', flush=True)\n    time.sleep(30)\nnode_main('sleeper', body)\n")
    # the shell ignores SIGTERM (trap '') and execs Python, which inherits the ignored disposition
    p = subprocess.Popen(["sh", "-c", 'trap "" TERM; exec "$0" -c "$1"', sys.executable, code], stdout=subprocess.PIPE)
    try:
        assert p.stdout.readline().strip() == b"up"
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=10) == -signal.SIGTERM
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_start_up_records_are_sent_through_dora_once_connected(monkeypatch):
    """Records logged before ``connect()`` (a SEIKO node building its compiled kernel, or warning that it
    cannot) went to stderr only, which ``dora run --log-level info`` hides: log_through_dora sends them
    through dora's log as well, at their level, marked as such; later records go to dora only."""
    import logging

    root = logging.RootLogger(logging.INFO)
    monkeypatch.setattr(logging, "root", root)
    monkeypatch.setattr(logging.Logger, "root", root)
    early = _runtime._EarlyRecords(limit=2)
    root.addHandler(early)
    root.info("building the native kernel seiko_qp11 (once, ~30 s)")
    root.warning("the compiled kernel is not available")
    root.warning("a third record")  # over the limit: counted
    root.debug("not kept")

    class FakeNode:
        def __init__(self):
            self.sent = []

        def __getattr__(self, name):
            if name.startswith("log_"):
                return lambda line: self.sent.append((name, line))
            raise AttributeError(name)

    node = FakeNode()
    _runtime.log_through_dora(node)
    assert node.sent == [("log_info", "(before connecting) building the native kernel seiko_qp11 (once, ~30 s)"),
                         ("log_warn", "(before connecting) the compiled kernel is not available"),
                         ("log_warn", "1 more start-up log records only on stderr")]
    assert early not in root.handlers
    root.warning("after")
    assert node.sent[-1] == ("log_warn", "after")
