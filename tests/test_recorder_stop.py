"""The recorder honours the dataflow's stop: its summary never outlives dora's SIGTERM silently (issue 16).

After ``dora run --stop-after`` dora SIGTERMs a node ~10 s after the stop; the recorder used to be
killed while it read an hour-long run back for its summary: no summary.json, exit 0, nothing said.
Here the summary is made slow on purpose (no dora): a real SIGTERM, or the time budget, abandons it;
the manifest is complete and says where the summary is, and ``contactflow rec summary`` computes it.
"""

import json
import os
import signal
import threading
import time

import numpy as np
import pytest

from contactflow.nodes.recorder import Recorder, StopGuard, finish_summary
from contactflow.recording import summary as summary_mod
from contactflow.recording.store import RecordingWriter


def _closed_run(tmp_path, kind="seiko"):
    w = RecordingWriter(tmp_path / "run-1", {"robot": "talos", "summary_kind": kind})
    rec = Recorder(w, {"s": "drv/sensors"})
    for k in range(20):
        rec.on_input("s", np.full(3, float(k)), {"seq": k, "t": 0.002 * k, "finished": k == 19})
    rec.close()
    return w


def _slow_summary(run_dir, kind=None, robot=None):
    end = time.monotonic() + 30.0
    while time.monotonic() < end:  # reading an hour-long run back: pure Python, interruptible
        sum(range(1000))
    raise AssertionError("the slow summary was not interrupted")


def _manifest(w):
    return json.loads((w.run_dir / "manifest.json").read_text())


def test_a_sigterm_while_summarising_leaves_a_complete_manifest_that_says_where_the_summary_is(
        tmp_path, monkeypatch, capsys):
    w = _closed_run(tmp_path)
    monkeypatch.setattr(summary_mod, "run_summary", _slow_summary)
    guard = StopGuard()
    try:
        timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM))
        t0 = time.monotonic()
        timer.start()
        rc = finish_summary(w, "seiko", "talos", guard)
        took = time.monotonic() - t0
    finally:
        timer.cancel()
        guard.restore()
    assert rc == 0 and took < 5.0
    m = _manifest(w)
    assert m["complete"] is True and m["streams"]["drv.sensors"]["messages"] == 20
    assert m["summary"]["state"] == "not computed" and "SIGTERM" in m["summary"]["reason"]
    assert m["summary"]["command"] == f"contactflow rec summary {w.run_dir}"
    assert not (w.run_dir / "summary.json").exists()
    out = capsys.readouterr().out
    assert "summary not computed" in out and f"contactflow rec summary {w.run_dir}" in out


def test_the_summary_budget_from_the_stop_bounds_it(tmp_path, monkeypatch):
    w = _closed_run(tmp_path)
    monkeypatch.setattr(summary_mod, "run_summary", _slow_summary)
    guard = StopGuard()
    try:
        t0 = time.monotonic()
        rc = finish_summary(w, "seiko", "talos", guard, deadline=t0 + 0.3, budget_s=0.3)
        took = time.monotonic() - t0
    finally:
        guard.restore()
    assert rc == 0 and took < 5.0
    s = _manifest(w)["summary"]
    assert s["state"] == "not computed" and "time budget (0.3 s from the STOP event" in s["reason"]
    # the budget spent before the summary starts (a long drain): not started at all
    guard = StopGuard()
    try:
        assert finish_summary(w, "seiko", "talos", guard, deadline=time.monotonic() - 1.0, budget_s=7.0) == 0
    finally:
        guard.restore()
    assert "before it started" in _manifest(w)["summary"]["reason"]


def test_the_summary_written_and_recomputed_by_rec_summary(tmp_path, monkeypatch, capsys):
    from contactflow.cli import main as cli_main

    w = _closed_run(tmp_path)

    def fake(rec, robot, **kw):  # the summary of the SEIKO streams, which this synthetic run lacks
        return {"ticks": len(rec.stream("drv.sensors")), "robot": robot.name}

    monkeypatch.setattr(summary_mod, "seiko_summary", fake)
    monkeypatch.setattr(summary_mod, "format_summary", lambda s, title: f"{title}: {s['ticks']} ticks")
    lines = []
    guard = StopGuard()
    try:
        assert finish_summary(w, "seiko", "talos", guard, emit=lines.append) == 0
    finally:
        guard.restore()
    assert _manifest(w)["summary"]["state"] == "written"
    assert lines[0] == "SEIKO run run-1: 20 ticks"
    (w.run_dir / "summary.json").unlink()
    assert cli_main(["rec", "summary", "run-1", "--root", str(tmp_path)]) == 0
    got = json.loads((w.run_dir / "summary.json").read_text())
    assert got["ticks"] == 20 and got["recording_gaps"] == 0 and got["recording_lost_batches"] == 0
    assert "SEIKO run run-1: 20 ticks" in capsys.readouterr().out


def test_rec_summary_without_a_recorded_kind_says_what_to_pass(tmp_path, capsys):
    from contactflow.cli import main as cli_main

    _closed_run(tmp_path, kind=None)
    assert cli_main(["rec", "summary", "run-1", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "summary kind None" in err and "pass --kind" in err


def test_a_run_stopped_before_any_message_has_no_summary_and_is_not_a_failure(tmp_path, monkeypatch, capsys, caplog):
    """A Ctrl-C in a graph's first second: the recorder closes an empty run and exits 0 (dora then reports no
    failed node), saying why there is no summary, in its output and in the manifest."""
    w = RecordingWriter(tmp_path / "run-1", {"robot": "talos", "summary_kind": "seiko"})
    with caplog.at_level("WARNING", logger="contactflow.recorder"):
        Recorder(w, {"s": "drv/sensors", "c": "ctl/command"}).close()
    silent = [r.getMessage() for r in caplog.records if "sent a message" in r.getMessage() or "no message arrived" in r.getMessage()]
    assert silent == ["no input sent a message ('c', 's'): nothing is recorded (the run was stopped, or its nodes stopped "
                      "or failed, before any of them sent)"]  # one line, not one per input

    def never(*a, **k):
        raise AssertionError("a summary of nothing was computed")

    monkeypatch.setattr(summary_mod, "run_summary", never)
    guard = StopGuard()
    try:
        rc = finish_summary(w, "seiko", "talos", guard)
    finally:
        guard.restore()
    assert rc == 0
    assert "[recorder] no summary: no message was recorded" in capsys.readouterr().out
    m = _manifest(w)
    assert m["complete"] is True and m["summary"]["state"] == "not computed"
    assert "no message was recorded" in m["summary"]["reason"] and "command" not in m["summary"]  # nothing to recompute
    monkeypatch.undo()
    # `contactflow rec summary` on it: the same reason, one line, no traceback
    from contactflow.errors import RecordingError

    with pytest.raises(RecordingError, match="no message was recorded.*no summary to compute"):
        summary_mod.run_summary(w.run_dir)
    # one message recorded: the summary is computed (here: fails for want of its streams, exit 1 as before)
    w2 = RecordingWriter(tmp_path / "run-2", {"robot": "talos", "summary_kind": "seiko"})
    r2 = Recorder(w2, {"s": "drv/other"})
    r2.on_input("s", np.zeros(3), {"seq": 0, "t": 0.0, "finished": True})
    r2.close()
    guard = StopGuard()
    try:
        assert finish_summary(w2, "seiko", "talos", guard) == 1
    finally:
        guard.restore()
