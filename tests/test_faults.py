"""The fault-injection campaign's runner and its process faults (issue 16, item 1).

The analysis and the criteria are tested on constructed outcomes (fast); the process faults run
the real lockstep SEIKO graph (``seiko_talos.yml``, 2 s scenario) through ``dora run``: the kill
of the controller in CI, one case per other kind marked ``slow`` (each is a whole run: 12-60 s
depending on the machine's load). The full campaign is ``contactflow faults run``.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from contactflow.faults.campaign import (GRAPH_SETUPS, LOST_MS_MAX, _interp_fault_t, judge, markdown_table,
                                         process_cases, recorder_has_max_bytes, run_case)
from contactflow.faults.cases import PROCESS_KINDS, FaultCase

needs_dora = pytest.mark.skipif(shutil.which("dora") is None and not __import__("pathlib").Path(
    __import__("sys").executable).with_name("dora").exists(), reason="dora CLI not installed")


def _outcome(**kw):
    base = {"exit_code": 1, "timed_out": False, "fault_sent": True, "errors": [],
            "failure_line": "node seiko_controller failed: exited because of signal SIGKILL",
            "base_kept": True, "base_min_m": 1.05, "unreadable": [], "lost_ms": 20.0, "lost_stream": "a.b",
            "recording": "/r", "clock_gaps": 0, "t_fault_s": 0.5}
    base.update(kw)
    return base


# ------------------------------------------------------------------ analysis and criteria (fast)


def test_fault_time_between_rows_is_the_last_row_before_the_signal():
    t = np.arange(10) * 0.002
    w = (np.arange(10) * 1_000_000).astype(np.int64)  # 1 ms of wall time per 2 ms tick
    assert _interp_fault_t(t, w, 4_500_000) == pytest.approx(0.008)


def test_fault_time_after_the_last_row_is_extrapolated_at_the_clock_rate():
    # a killed clock: its last 50 ticks never reached the recording; the time they covered counts
    t = np.arange(300) * 0.002
    w = (np.arange(300) * 4_000_000).astype(np.int64)  # 0.5 simulated s per wall s
    t_f = _interp_fault_t(t, w, int(w[-1] + 200_000_000))  # 0.2 s of wall time after the last row
    assert t_f == pytest.approx(t[-1] + 0.1, abs=1e-6)
    assert _interp_fault_t(np.zeros(0), np.zeros(0, np.int64), 5) is None


def test_the_trigger_extrapolates_the_clock_past_the_recorders_lag():
    from contactflow.faults.campaign import _sim_now

    t = np.arange(500) * 0.002  # 1 s of a real-time clock: 1 simulated s per wall s
    w = (np.arange(500) * 2_000_000).astype(np.int64)
    assert _sim_now(t, w, int(w[-1] + 300_000_000)) == pytest.approx(t[-1] + 0.3)
    assert _sim_now(t[:1], w[:1], int(w[0] + 10**9)) == 0.0  # one row: no rate, no extrapolation
    assert _sim_now(np.zeros(0), np.zeros(0, np.int64), 0) is None


def test_judge_a_kill_needs_a_nonzero_exit_and_a_failure_line():
    kill = FaultCase("seiko_talos.yml", "kill", "seiko_controller", 0.5)
    assert judge(kill, _outcome()) == (True, "")
    ok, why = judge(kill, _outcome(exit_code=0))
    assert not ok and "exit 0 although a node failed" in why
    ok, why = judge(kill, _outcome(failure_line=""))
    assert not ok and "no line names the failed node" in why
    ok, why = judge(kill, _outcome(failure_line="node mujoco_driver failed (exit code 3): exited with code 3"))
    assert not ok and "names another node than seiko_controller" in why
    ok, why = judge(kill, _outcome(timed_out=True))
    assert not ok and "did not end by itself" in why


def test_judge_recording_and_robot_criteria():
    kill = FaultCase("seiko_talos.yml", "kill", "seiko_controller", 0.5)
    ok, why = judge(kill, _outcome(lost_ms=LOST_MS_MAX + 1, lost_stream="operator.command"))
    assert not ok and "operator.command" in why
    assert judge(kill, _outcome(lost_ms=LOST_MS_MAX))[0]
    ok, why = judge(kill, _outcome(base_kept=False, base_min_m=0.4))
    assert not ok and "robot fell" in why
    ok, why = judge(kill, _outcome(unreadable=["x.arrows: bad magic"]))
    assert not ok and "unreadable" in why
    ok, why = judge(kill, _outcome(fault_sent=False, errors=["no process of node 'seiko_controller' found"]))
    assert not ok and "not injected" in why


def test_judge_a_pause_must_end_normally_without_gaps():
    stall = FaultCase("seiko_talos.yml", "stall", "mujoco_driver", 0.5, {"pause_s": 1.0})
    assert judge(stall, _outcome(exit_code=0, failure_line=""))[0]
    ok, why = judge(stall, _outcome(exit_code=1))
    assert not ok and "although no node failed" in why
    ok, why = judge(stall, _outcome(exit_code=0, failure_line="", clock_gaps=3))
    assert not ok and "gap" in why


def test_cases_quick_one_per_kind_full_kills_each_node():
    setup = GRAPH_SETUPS["seiko_talos.yml"]
    quick = process_cases(setup, quick=True, seed=1)
    kinds = [c.kind for c in quick if c.kind != "baseline"]
    assert sorted(kinds) == sorted(PROCESS_KINDS)
    full = process_cases(setup, quick=False, seed=1)
    killed = {c.target for c in full if c.kind == "kill"}
    assert killed == {"mujoco_driver", "operator", "input_filter", "seiko_retargeting", "seiko_controller"}
    for c in full:  # fault times on control ticks, inside the run
        if c.kind != "baseline":
            assert 0.2 * setup.duration_s < c.at_s < 0.65 * setup.duration_s
            assert c.at_s / 0.002 == pytest.approx(round(c.at_s / 0.002))
    assert process_cases(setup, quick=False, seed=1) == full  # the seed fixes the times
    assert process_cases(setup, quick=False, seed=2) != full


def test_table_has_one_row_per_case_and_escapes_pipes():
    kill = FaultCase("seiko_talos.yml", "kill", "seiko_controller", 0.5)
    rows = [dict(_outcome(failure_line="node a failed: x | y"), case=kill.to_dict(), t_fault_s=0.51,
                 hold_after_ms=0.0, **{"pass": True, "why": ""}),
            dict(_outcome(exit_code=0), case=kill.to_dict(), t_fault_s=0.52, hold_after_ms=2.0,
                 **{"pass": False, "why": "exit 0 although a node failed"})]
    table = markdown_table(rows).splitlines()
    assert len(table) == 4
    assert "x \\| y" in table[2] and table[2].endswith("| pass |")
    assert "**FAIL**: exit 0 although a node failed" in table[3]


# ------------------------------------------------------------------ the process faults, real runs


def _run(tmp_path, kind, target, at_s, params=None, **kw):
    # a generous hard limit: the graph's start-up alone took 107 s once at load average ~35 (2 cores)
    kw.setdefault("timeout_s", 420.0 if kind == "hang" else 360.0)
    r = run_case(FaultCase("seiko_talos.yml", kind, target, at_s, params or {}), tmp_path, **kw)
    print({k: v for k, v in r.items() if k != "case"})
    return r


@needs_dora
def test_kill_of_the_controller_is_named_and_the_recording_kept(tmp_path):
    r = _run(tmp_path, "kill", "seiko_controller", 0.5)
    assert r["fault_sent"] and r["exit_code"] not in (0, None) and not r["timed_out"]
    assert r["failure_line"].startswith("node seiko_controller failed") and "SIGKILL" in r["failure_line"]
    assert 0.5 <= r["t_fault_s"] < 1.9
    assert r["base_kept"] is True
    assert r["hold_after_ms"] is not None and r["hold_after_ms"] <= 10.0  # no command after the kill (lockstep)
    assert r["lost_ms"] is not None and r["lost_ms"] <= LOST_MS_MAX and not r["unreadable"]
    assert r["pass"], r["why"]


@needs_dora
@pytest.mark.slow
def test_recorder_kill_ends_the_run_named_and_keeps_the_recording(tmp_path):
    r = _run(tmp_path, "recorder_kill", "recorder", 0.5)
    assert r["fault_sent"] and r["exit_code"] not in (0, None) and "recorder" in r["failure_line"]
    assert r["base_kept"] is True
    assert r["pass"], r["why"]


@needs_dora
@pytest.mark.slow
def test_hang_of_the_controller_is_detected_by_the_driver(tmp_path):
    # the driver's lockstep timeout (no input for N s, default 60) is shortened to 15 s for CI time, and
    # dora's finish grace (it kills the stopped process at the end; default 120 s) to 10 s, as the campaign does
    r = _run(tmp_path, "hang", "seiko_controller", 0.5, {"node_args": {"mujoco_driver": "--lockstep-timeout-s 15"},
                                                         "env": {"DORA_FINISH_DRAIN_GRACE_SECS": 10}})
    assert r["fault_sent"] and not r["timed_out"] and r["exit_code"] not in (0, None)
    # the driver stops (no command for 15 s); dora kills the stopped node at the end and names it
    assert r["failure_line"].startswith("node seiko_controller failed") and "stop" in r["failure_line"]
    assert r["base_kept"] is True
    assert r["pass"], r["why"]


@needs_dora
@pytest.mark.slow
@pytest.mark.parametrize("kind,pause_s", [("stall", 1.0), ("dropout", 0.1)])
def test_driver_paused_then_resumed_the_run_goes_on(tmp_path, kind, pause_s):
    r = _run(tmp_path, kind, "mujoco_driver", 0.5, {"pause_s": pause_s})
    assert r["fault_sent"] and r["exit_code"] == 0 and r["failure_line"] == ""
    assert r["clock_gaps"] == 0 and r["base_kept"] is True
    assert r["pass"], r["why"]


@needs_dora
@pytest.mark.slow
@pytest.mark.skipif(not recorder_has_max_bytes(), reason="the recorder has no --max-bytes yet")
def test_disk_full_is_named_and_the_written_part_readable(tmp_path):
    r = _run(tmp_path, "disk_full", "recorder", 0.0, {"max_bytes": 1_000_000})
    assert r["exit_code"] not in (0, None) and "disk full" in r["failure_line"]
    assert r["base_kept"] is True and not r["unreadable"]
    assert r["pass"], r["why"]


def test_the_failure_line_names_the_node_killed_first():
    # dora 1.1's lines of a replay graph whose operator was SIGKILLed (abridged from a campaign run): the
    # replay node (dora id mujoco_driver) ended after it, with exit code 3; the killed node comes first
    from contactflow.cli.run import failure_report, parse_failures

    lines = [
        "22:13:48 ERROR  operator: daemon exited because of signal SIGKILL",
        "22:13:48 stdout input_filter: [contactflow] node 'input_filter' stopping: upstream node failed: "
        "{'source_node_id': 'operator', 'error': 'exited because of signal SIGKILL'}",
        "22:13:51 stdout mujoco_driver: [contactflow] node 'replay' stopping: input 'ack' closed",
        "22:13:52 ERROR  mujoco_driver: daemon exited with code 3 with stderr output:",
        "Node `operator` failed: exited because of signal SIGKILL",
    ]
    first = [f for f in parse_failures(lines).values() if not f.consequence]
    assert first[0].node == "operator" and first[0].message == "exited because of signal SIGKILL"
    assert "node operator failed: exited because of signal SIGKILL" in failure_report(lines, 1)[3]


def test_a_hung_node_is_named_before_the_nodes_that_timed_out_waiting_for_it():
    # dora 1.1's lines of the replay graph whose Controller was SIGSTOPped (abridged from a campaign run):
    # the stages waiting on it stop on their no-input timeouts first (consequences); dora kills the hung
    # Controller at the end and its summary names a stopped stage first
    from contactflow.cli.run import failure_report, parse_failures

    lines = [
        "02:10:42 stdout seiko_retargeting: [contactflow] node 'seiko_retargeting' stopping: no input for 30 s "
        "while waiting for targets (seq 773), command (seq 773)",
        "02:11:12 stdout operator: [contactflow] node 'replay' stopping: no ack of seq 723 on input 'ack' for 60 s",
        "02:11:13 ERROR  operator: daemon exited with code 3 with stderr output:",
        "02:12:02 ERROR  seiko_controller: daemon node was killed by dora because it didn't react to a stop message "
        "in time (SIGKILL)",
        "Dataflow failed:",
        "Node `seiko_retargeting` failed: exited with code 3 with stderr output:",
    ]
    first = [f for f in parse_failures(lines).values() if not f.consequence]
    assert [f.node for f in first] == ["seiko_controller"], first
    assert "didn't react to a stop message" in first[0].message
    assert "node seiko_controller failed: node was killed by dora" in failure_report(lines, 1)[3]


def test_recording_loss_is_measured_per_stream_beyond_its_usual_spacing(tmp_path):
    # a recording written with the project's writer: a per-tick stream cut 60 ms before the fault and a
    # stream sending every 20 ms (a real-time stage that skips ticks) whose last message is 18 ms old
    from contactflow.faults.campaign import analyse
    from contactflow.recording.store import RecordingWriter

    run = tmp_path / "recordings" / "run-1"
    w = RecordingWriter(run, {"robot": "talos"})
    fast, slow = w.stream("mujoco_driver.sensors", 1, {}), w.stream("input_filter.targets", 1, {})
    for k in range(0, 221):  # 0 .. 0.44 s, fault at 0.5 s
        fast.append(k, k * 0.002, np.zeros(1), t_wall_ns=10**9 + k * 2_000_000)
    for k in range(0, 25):  # every 20 ms, up to 0.48 s
        slow.append(k, k * 0.02, np.zeros(1), t_wall_ns=10**9 + k * 20_000_000)
    w.close()
    case = FaultCase("seiko_talos.yml", "hang", "seiko_controller", 0.5, {})
    r = analyse(case, GRAPH_SETUPS["seiko_talos.yml"], tmp_path / "recordings", [], 1, False,
                {"sent": False})  # not sent: t_fault falls back to none for a signal kind
    assert r["t_fault_s"] is None and r["lost_ms"] is None
    graph_case = FaultCase("seiko_talos.yml", "nan", "seiko_controller/command", 0.5, {})  # at_s is the fault time
    r = analyse(graph_case, GRAPH_SETUPS["seiko_talos.yml"], tmp_path / "recordings", [], 0, False, {})
    assert r["lost_stream"] == "mujoco_driver.sensors"
    assert r["lost_ms"] == pytest.approx(58.0, abs=0.5)  # 60 ms less the 2 ms tick spacing


def _stream(name, seq, dt=0.002):
    from contactflow.recording.store import Stream

    seq = np.asarray(seq, dtype=np.int64)
    n = seq.size
    return Stream(name, seq, seq * dt, np.zeros(n, np.int64), np.zeros(n, bool), np.zeros((n, 1)), [])


def test_real_time_runs_are_judged_by_what_was_lost_not_by_skipped_ticks():
    """A real-time stage that skips ticks: its last message before the fault is 198 ms old although
    nothing was lost. Lockstep judging fails it; real-time judging looks at the driver's stream (never
    skips) and the lost log batches, and reports the staleness and the skipped ticks beside."""
    from contactflow.faults.campaign import recording_loss

    clock = _stream("mujoco_driver.sensors", np.arange(501))  # 0..1 s, every tick
    # the controller: every tick to 0.4 s, then late: nothing until 0.62 s, then one tick in 40
    ctrl = _stream("seiko_controller.command", np.r_[np.arange(201), np.arange(310, 501, 40)])
    streams = {s.name: s for s in (clock, ctrl)}
    kw = dict(clock_stream="mujoco_driver.sensors")
    lock = recording_loss(streams, 0.6, realtime=False, **kw)
    assert lock["lost_ms"] == pytest.approx(198.0) and lock["lost_stream"] == "seiko_controller.command"
    rt = recording_loss(streams, 0.6, realtime=True, manifest={"recording_lost_batches": 0}, **kw)
    assert rt["lost_ms"] == 0.0 and rt["lost_stream"] == ""
    assert rt["stale_ms"] == pytest.approx(198.0) and rt["stale_stream"] == "seiko_controller.command"
    assert rt["skipped_ticks"] == 109 + 4 * 39 and rt["skipped_by_stream"] == {"seiko_controller.command": 265}
    kill = FaultCase("seiko_talos_realtime.yml", "kill", "seiko_controller", 0.6)
    assert judge(kill, _outcome(**rt)) == (True, "")
    ok, why = judge(kill, _outcome(**lock))
    assert not ok and "198 ms before the fault (seiko_controller.command)" in why
    # what was lost still fails a real-time run: log batches missing, or the driver's own stream cut
    lost = recording_loss(streams, 0.6, realtime=True, manifest={"recording_lost_batches": 2}, **kw)
    ok, why = judge(kill, _outcome(**lost))
    assert not ok and "2 log batch(es) lost" in why
    cut = {"mujoco_driver.sensors": _stream("mujoco_driver.sensors", np.arange(200)), "seiko_controller.command": ctrl}
    ok, why = judge(kill, _outcome(**recording_loss(cut, 0.6, realtime=True, **kw)))
    assert not ok and "mujoco_driver.sensors" in why
    row = markdown_table([dict(_outcome(**rt), case=kill.to_dict(), t_fault_s=0.6, hold_after_ms=0.0,
                               **{"pass": True, "why": ""})]).splitlines()[2]
    assert "0 (driver; stages 198 stale, 265 ticks skipped)" in row


def test_a_stream_never_written_counts_as_lost_from_its_first_message():
    """disk_full: a stream the recorder received but could not write (manifest lost_streams) lost
    everything from its first message; one that started after the fault lost nothing before it."""
    from contactflow.faults.campaign import recording_loss

    streams = {"drv.sensors": _stream("drv.sensors", np.arange(300))}
    m = {"lost_streams": {"est.out": {"reason": "not recorded", "first_t": 0.3}}}
    r = recording_loss(streams, 0.5, clock_stream="drv.sensors", realtime=False, manifest=m)
    assert r["lost_ms"] == pytest.approx(200.0) and r["lost_stream"] == "est.out"
    # with the failure's wall time and when the recorder received each stream's oldest unwritten message (a recorder
    # that wrote them): the loss in wall time; a stream whose messages all came after the failure lost
    # nothing from before it, whatever their recorded times (a batch estimator's outputs)
    mw = {"write_failure": {"t_wall_ns": 10_000_000_000},
          "streams": {"drv.sensors": {"first_unwritten_rx_ns": 9_960_000_000}},
          "lost_streams": {"est.out": {"first_t": 0.3, "first_unwritten_rx_ns": 10_200_000_000}}}
    r = recording_loss(streams, 0.5, clock_stream="drv.sensors", realtime=False, manifest=mw)
    assert r["lost_ms"] == pytest.approx(40.0) and r["lost_stream"] == "drv.sensors"
    mw["lost_streams"]["est.out"]["first_unwritten_rx_ns"] = 9_700_000_000
    r = recording_loss(streams, 0.5, clock_stream="drv.sensors", realtime=False, manifest=mw)
    assert r["lost_ms"] == pytest.approx(300.0) and r["lost_stream"] == "est.out"
    m["lost_streams"]["est.out"]["first_t"] = 0.55
    r = recording_loss(streams, 0.5, clock_stream="drv.sensors", realtime=False, manifest=m)
    assert r["lost_ms"] == 0.0 and r["lost_batches"] is None


def test_a_signal_fault_with_nothing_recorded_before_it_fails():
    """A recorder killed before it wrote a row of the clock's stream (the real-time graph at load ~20):
    no fault time can be placed and nothing before the fault survived: a failure, not a silent pass."""
    rk = FaultCase("seiko_talos_realtime.yml", "recorder_kill", "recorder", 3.554)
    ok, why = judge(rk, _outcome(failure_line="node recorder failed: exited because of signal SIGKILL",
                                 t_fault_s=None, lost_ms=None))
    assert not ok and "nothing of the clock's stream recorded before the fault" in why
    assert judge(rk, _outcome(failure_line="node recorder failed: exited because of signal SIGKILL", t_fault_s=3.55))[0]
