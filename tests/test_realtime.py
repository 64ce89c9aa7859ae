"""The real-time SEIKO graph: the summary's real-time keys, the driver's newest-command slot, the
nodes' real-time Lockstep mode (fake dora node) and a short real `dora run` of
dataflows/seiko_talos_realtime.yml (its summary has the keys with consistent values; no miss rate is
asserted: the CI machine is loaded, speed figures go to the benchmark)."""

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from contactflow.contracts.messages import Field, PortSpec
from contactflow.sim.driver import NewestCommand
from contactflow.recording.summary import REALTIME_KEYS, realtime_metrics

from contactflow.nodes._runtime import Lockstep, UpstreamError, apply_scheduling

ROOT = Path(__file__).resolve().parent.parent

DORA = shutil.which("dora") or str(Path(sys.executable).parent / "dora")
DT = 0.002
SPEC = PortSpec("test", (Field("x", 1, "-"),), 500.0)


# ---------------------------------------------------------------- summary keys
def _rows(new, late=None, seqs=None, warmup=2):
    """Timing rows: `warmup` start-up rows, then one paced row per entry of `new` (1 = a new command)."""
    n = warmup + len(new)
    new = np.concatenate([np.ones(warmup), np.asarray(new, float)])
    late = np.concatenate([np.zeros(warmup), np.zeros(len(new) - warmup) if late is None else np.asarray(late, float)])
    t = np.arange(n) * DT
    # the command in force: computed from the sensors of the period before the last new one
    cmd_seq = np.full(n, -1.0)
    last = -1
    for k in range(n):
        if new[k]:
            last = k - 1
        cmd_seq[k] = last
    wall, shift = np.zeros(n), 0.0
    for k in range(n):  # deadlines k dt, re-anchored after a period started a whole period late or more
        wall[k] = k * DT + shift + late[k]
        if late[k] >= DT:
            shift += late[k]
    return {"t": t, "command_seq": cmd_seq, "command_t": np.maximum(cmd_seq, 0) * DT, "new_command": new,
            "paced": (np.arange(n) >= warmup).astype(float), "late_s": late, "wall_s": wall}


def test_realtime_metrics_of_a_run_that_meets_every_deadline():
    m = realtime_metrics(_rows([1] * 100), DT)
    assert set(m) == set(REALTIME_KEYS)
    assert m["realtime"] is True and m["periods"] == 100 and m["warmup_periods"] == 2
    assert m["deadline_misses"] == 0 and m["deadline_miss_ratio"] == 0.0
    assert m["command_age_ms_p50"] == pytest.approx(2.0) and m["command_age_ms_p99"] == pytest.approx(2.0)
    assert m["longest_stall_ms"] == pytest.approx(0.0, abs=1e-9)


def test_realtime_metrics_count_held_commands_and_the_longest_stall():
    new = [1] * 10 + [0, 0, 0] + [1] * 10 + [0] + [1] * 6  # a 3-period hole and a 1-period hole
    m = realtime_metrics(_rows(new), DT)
    assert m["periods"] == 30 and m["deadline_misses"] == 4
    assert m["deadline_miss_ratio"] == pytest.approx(4 / 30)
    assert m["longest_stall_ms"] == pytest.approx(6.0)  # the same command for 3 periods beyond its own
    # ages: 2 ms when on time, then 4, 6, 8 ms while the command is held
    assert m["command_age_ms_p50"] == pytest.approx(2.0)
    assert 6.0 < m["command_age_ms_p99"] <= 8.0


def test_realtime_metrics_count_the_periods_a_late_driver_lost():
    late = np.zeros(20)
    late[5] = 2.5 * DT  # the driver itself started period 5 2.5 periods late: 2 periods lost
    m = realtime_metrics(_rows([1] * 20, late=late), DT)
    assert m["periods"] == 22 and m["deadline_misses"] == 3  # the late period and the 2 lost ones
    assert m["driver_late_ms_max"] == pytest.approx(5.0)
    assert m["longest_stall_ms"] == pytest.approx(5.0)  # wall time without a new command


def test_realtime_metrics_without_timing_are_nan():
    m = realtime_metrics(None)
    assert m["realtime"] is False and np.isnan(m["deadline_misses"]) and np.isnan(m["command_age_ms_p50"])


def test_summary_aligns_each_tick_with_the_newest_message_in_force():
    from contactflow.recording.summary import _align_latest

    i, j = _align_latest(np.arange(8), np.array([0, 3, 4, 6]))  # a stage that skipped ticks 1, 2, 5
    assert i.tolist() == [0, 1, 2, 3, 4, 5, 6] and j.tolist() == [0, 0, 0, 1, 2, 2, 3]  # tick 7: after its end
    i, j = _align_latest(np.arange(5), np.arange(5))  # lockstep: the exact match
    assert i.tolist() == j.tolist() == [0, 1, 2, 3, 4]


# ---------------------------------------------------------------- driver command slot
def test_the_command_loss_clock_counts_the_controllers_time_not_the_drivers_absence():
    """mujoco_driver --command-lost-s: periods of 2 ms without a valid command are lost after 1 s; a
    driver that was itself away 1.5 s (paused: the campaign's stall) had no sensors out, so that time
    does not count; a valid command restarts the clock; 0 = never."""
    from contactflow.sim.driver import CommandLossClock

    dt = 0.002
    c = CommandLossClock(dt, 1.0)
    assert c.period(0.0, False) is None  # not started: no command yet
    assert c.period(dt, True) is None
    t, lost = dt, None
    while lost is None and t < 2.0:  # the controller goes silent
        t += dt
        lost = c.period(t, False)
    assert lost is not None and 1.0 <= lost < 1.0 + 1.5 * dt and t == pytest.approx(dt + lost)
    c = CommandLossClock(dt, 1.0)
    c.period(0.0, True)
    assert c.period(dt, False) is None
    assert c.period(dt + 1.5, False) is None  # the driver's own 1.5 s absence
    assert c.period(dt + 1.5 + dt, False) is None
    t, lost = dt + 1.5 + dt, None  # the controller then silent: lost ~1 s of the driver's running time later
    while lost is None and t < 5.0:
        t += dt
        lost = c.period(t, False)
    # without the credit for the absence it would have been lost at the first period after it (t = 1.502 s)
    assert 1.0 <= lost < 1.0 + 1.5 * dt and t == pytest.approx(1.5 - dt + lost, abs=2 * dt) and t > 2.4
    c = CommandLossClock(dt, 1.0)
    c.start(0.0)  # after a start-up handshake
    assert c.period(0.5, False) is None and c.period(0.5 + dt, True) is None and c.period(1.4, False) is None
    assert CommandLossClock(dt, 0.0).period(10.0, False) is None


def test_newest_command_wins_and_a_held_command_is_not_new():
    slot = NewestCommand()
    assert slot.take()[0] is False  # nothing yet: the driver holds its default command
    slot.offer(3, 0.006, {"theta_cmd": np.zeros(2)})
    slot.offer(5, 0.010, {"theta_cmd": np.ones(2)})
    slot.offer(4, 0.008, {"theta_cmd": np.zeros(2)})  # late arrival, older: ignored
    new, fields, seq, t = slot.take()
    assert new and seq == 5 and t == 0.010 and fields["theta_cmd"][0] == 1.0 and slot.stale == 1
    assert slot.take()[0] is False  # no newer command: a miss, the last safe command is held
    slot.offer(6, 0.012, None, finished=True)  # malformed but newest: taken (the driver refuses it)
    new, fields, seq, _ = slot.take()
    assert new and fields is None and seq == 6 and slot.finished


# ---------------------------------------------------------------- Lockstep real-time mode
class FakeNode:
    """Replays dora-like events; `try_recv` returns what `next` would, or None when none is left."""

    def __init__(self, events, queues=None):
        self.events = list(events)
        self.queues = queues or {}

    def next(self, timeout=None):
        return self.events.pop(0) if self.events else None

    def try_recv(self):
        if self.events and self.events[0]["type"] == "INPUT":
            return self.events.pop(0)
        return None

    def node_config(self):
        return {"inputs": {k: {"source": "x/y", **q} for k, q in self.queues.items()}, "outputs": []}


def msg(iid, seq, finished=False):
    return {"type": "INPUT", "id": iid, "value": pa.array([float(seq)]),
            "metadata": {"seq": seq, "t": seq * DT, "finished": finished}}


def test_realtime_lockstep_samples_and_holds_the_other_inputs():
    ev = [msg("s", 0), msg("d", 0), msg("s", 1), msg("s", 2), msg("s", 3), msg("d", 2), msg("s", 4, finished=True),
          {"type": "INPUT_CLOSED", "id": "s"}, {"type": "INPUT_CLOSED", "id": "d"}]
    ticks = list(Lockstep(FakeNode(ev), {"s": (SPEC, 0), "d": (SPEC, 1)}, skip_missing=True,
                          latest_clock=False))
    assert [t.k for t in ticks] == [0, 1, 2, 3, 4]
    assert [t.seqs["d"] for t in ticks] == [None, 0, 0, 2, 2]  # newest <= k - 1, held, never waited for
    assert ticks[2].inputs["d"]["x"][0] == 0.0 and ticks[-1].finished


def test_realtime_lockstep_latest_value_clock_skips_to_the_newest():
    ev = [msg("s", 0), msg("s", 1), msg("s", 2), msg("s", 5), msg("s", 6, finished=True), {"type": "INPUT_CLOSED", "id": "s"}]
    lock = Lockstep(FakeNode(ev), {"s": (SPEC, 0)}, skip_missing=True)
    ticks = list(lock)
    assert [t.k for t in ticks] == [6] and lock.skipped == 6  # everything had arrived: only the newest runs
    assert ticks[0].ticks == 7  # it stands for ticks 0..6 (the input filter steps 7 times)
    ticks2 = list(Lockstep(FakeNode(ev), {"s": (SPEC, 0)}, skip_missing=True, latest_clock=False))
    assert [t.k for t in ticks2] == [0, 1, 2, 5, 6]  # every delivered message, in order
    assert [t.ticks for t in ticks2] == [1, 1, 1, 3, 1]


def test_realtime_lockstep_never_waits_for_the_other_inputs():
    # tick 1 needs d (offset 1) but d has sent nothing yet: reset state (None), no waiting
    ev = [msg("s", 0), msg("s", 1), {"type": "ERROR", "error": "Receiver timed out"}, msg("d", 0), msg("s", 2),
          msg("d", 1, finished=True), msg("s", 3, finished=True), {"type": "INPUT_CLOSED", "id": "s"},
          {"type": "INPUT_CLOSED", "id": "d"}]
    lock = Lockstep(FakeNode(ev), {"s": (SPEC, 0), "d": (SPEC, 1)}, skip_missing=True, latest_clock=False)
    ticks = list(lock)
    assert [t.k for t in ticks] == [0, 1, 2, 3]
    assert ticks[1].inputs["d"] is None and ticks[1].seqs["d"] is None
    assert ticks[2].seqs["d"] == 1 and ticks[3].seqs["d"] == 1  # d 1 drained before tick 2 (newest <= k - 1)


def test_realtime_lockstep_reports_an_input_that_closed_before_the_end():
    ev = [msg("s", 0), msg("d", 0), {"type": "INPUT_CLOSED", "id": "d"}, msg("s", 1)]
    with pytest.raises(UpstreamError, match="input\\(s\\) d closed before the run ended"):
        list(Lockstep(FakeNode(ev), {"s": (SPEC, 0), "d": (SPEC, 1)}, skip_missing=True))


def test_scheduling_from_the_node_environment(caplog):
    assert apply_scheduling("x", {}) == ""
    assert apply_scheduling("x", {"CONTACTFLOW_NICE": "0"}) == "nice +0"
    assert apply_scheduling("x", {"CONTACTFLOW_RT_PRIORITY": "fast"}) == ""
    assert apply_scheduling("x", {"CONTACTFLOW_RT_PRIORITY": "150"}) == ""
    assert "CONTACTFLOW_RT_PRIORITY='fast': expected an integer" in caplog.text
    assert "CONTACTFLOW_RT_PRIORITY=150 not applied (expected a priority in 1..99" in caplog.text
    assert apply_scheduling("x", {"CONTACTFLOW_RT_DAEMON": "30"}) == ""  # pytest's parent is not the dora daemon
    assert "not the dora daemon" in caplog.text


def test_cpu_roles_split_the_allowed_cpus():
    from contactflow.nodes._runtime import cpus_for_role

    assert cpus_for_role("control", {3, 1, 2}) == {1}
    assert cpus_for_role("support", {3, 1, 2}) == {2, 3}
    assert cpus_for_role("support", {0, 1}) == {1}
    assert cpus_for_role("control", {0}) is None  # one CPU: nothing pinned
    with pytest.raises(ValueError, match="expected one of"):
        cpus_for_role("fast", {0, 1})


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")
@pytest.mark.parametrize("role", ["control", "support"])
def test_cpu_role_pins_every_thread_of_the_node(role, caplog):
    """In a child process (pytest's own affinity stays): every thread of the process, one started before
    and one after, runs on the role's CPUs; a bad role and a daemon that is not there are warnings."""
    code = f"""
import os, threading, time
from contactflow.nodes._runtime import apply_scheduling, cpus_for_role
allowed = os.sched_getaffinity(0)
ev = threading.Event()
before = threading.Thread(target=ev.wait); before.start()
done = apply_scheduling("x", {{"CONTACTFLOW_CPU_ROLE": "{role}"}})
after = threading.Thread(target=ev.wait); after.start()
want = cpus_for_role("{role}", allowed)
got = [os.sched_getaffinity(int(t)) for t in os.listdir("/proc/self/task")]
ev.set()
print(len(got), all(g == want for g in got), done)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    n, ok, _ = out.split(" ", 2)
    assert int(n) >= 3 and ok == "True", out
    assert f"CPU role {role}" in out
    assert apply_scheduling("x", {"CONTACTFLOW_CPU_ROLE": "fast"}) == ""
    assert "CONTACTFLOW_CPU_ROLE=fast not applied (expected one of" in caplog.text
    from contactflow.nodes import _runtime

    apply_scheduling("x", {"CONTACTFLOW_DAEMON_CPU_ROLE": role})  # applied at connect(), to the parent
    caplog.set_level(logging.INFO, logger="contactflow.node")
    _runtime._apply_daemon_cpu_role()
    assert f"CONTACTFLOW_DAEMON_CPU_ROLE={role} not applied" in caplog.text and "not the dora daemon" in caplog.text
    assert _runtime._DAEMON_CPU_ROLE is None


def test_only_the_daemon_of_dora_run_is_pinned():
    from contactflow.nodes._runtime import _is_dora_run

    assert _is_dora_run([b"dora", b"run", b"g.yml", b""])
    assert _is_dora_run([b"/v/bin/python", b"/v/bin/dora", b"run", b"g.yml", b""])
    assert not _is_dora_run([b"/v/bin/dora", b"daemon", b"--quiet", b""])  # `dora up`'s daemon
    assert not _is_dora_run([b"python", b"-m", b"pytest", b""])


def test_cpu_role_with_one_cpu_pins_nothing():
    """A process allowed one CPU (in a child process): nothing pinned, an info line, not a warning."""
    code = """
import logging, os, sys
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(levelname)s %(message)s")
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
from contactflow.nodes._runtime import apply_scheduling
print(repr(apply_scheduling("x", {"CONTACTFLOW_CPU_ROLE": "support"})), os.sched_getaffinity(0))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert "INFO node x: CONTACTFLOW_CPU_ROLE=support: one CPU allowed to this process, nothing to pin" in out, out
    assert "WARNING" not in out and "'' {" in out, out


# ---------------------------------------------------------------- real dora run
@pytest.mark.dora
@pytest.mark.parametrize("graph", ["seiko_talos_realtime", "seiko_talos_realtime_planner"])
def test_realtime_graph_summary_has_consistent_realtime_keys(tmp_path, graph):
    """The split real-time graph and the planner layout (seiko_stack --no-controller --realtime)."""
    env = dict(os.environ)
    env["CONTACTFLOW_RECORDINGS"] = str(tmp_path / "recordings")
    env["CONTACTFLOW_SCENARIO"] = str(ROOT / "robots/talos/scenarios/smoke_2s.yaml")
    proc = subprocess.run([DORA, "run", str(ROOT / "dataflows" / f"{graph}.yml"), "--stop-after", "120s"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    (run,) = [p for p in (tmp_path / "recordings").iterdir() if p.is_dir() and not p.is_symlink()]
    s = json.loads((run / "summary.json").read_text())
    assert s["fell"] is False, s
    assert s["realtime"] is True and s["warmup_periods"] == 10
    # the scenario (2 s) ended the run by itself (its end reaches the driver through the whole chain:
    # later than 2 s of simulated time when the chain lags on a loaded machine)
    assert "scenario finished at t = 2.0" in out and s["sim_time_s"] >= 1.95
    assert s["periods"] >= s["ticks"] - 1 - s["warmup_periods"] - 1
    assert 0 <= s["deadline_misses"] <= s["periods"]
    assert s["deadline_miss_ratio"] == pytest.approx(s["deadline_misses"] / s["periods"])
    assert 2.0 - 1e-6 <= s["command_age_ms_p50"] <= s["command_age_ms_p99"]  # one period at least
    assert s["longest_stall_ms"] >= 0 and s["driver_late_ms_max"] >= s["driver_late_ms_p99"] >= 0
    assert s["longest_stall_ms"] == 0 or s["deadline_misses"] > 0
    assert isinstance(s["recording_gaps"], int) and s["recording_gaps"] >= 0  # real-time stages skip ticks: counted
    # every driver period is recorded, without a gap
    from contactflow.recording.store import read_recording

    rec = read_recording(run)
    timing = rec.stream("mujoco_driver.timing")
    assert np.array_equal(timing.seq, np.arange(len(timing)))
    assert len(rec.stream("mujoco_driver.sensors")) == len(timing) + 1
    # a complete run: the driver's streams end with 'finished' (the timing row of the last period too), no warning
    streams = rec.manifest["streams"]
    assert streams["mujoco_driver.timing"]["finished"] is True and streams["mujoco_driver.sensors"]["finished"] is True
    assert "no message with 'finished' arrived" not in out, out[-3000:]
