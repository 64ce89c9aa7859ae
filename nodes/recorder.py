"""recorder node: writes every input stream of the run to ``recordings/<run>/`` (Arrow IPC).

Inputs: any (declare one input per stream to record, e.g. ``sensors: mujoco_driver/sensors``;
use ``queue_policy: backpressure`` so no message is dropped). Stream files are named after the
*source* ``<node>.<output>``. An input wired to a node's batched ``log`` output (e.g.
``seiko_controller: seiko_controller/log``, see ``nodes/_runtime.py`` Sender) is unpacked into one
stream per output of that node (``seiko_controller.command``, ``seiko_controller.state``), the same
streams as when each output is wired on its own. Outputs: none.

Gaps: the recorder counts the ``seq`` numbers missing in each stream (a message lost on the way, or
ticks a real-time node skipped), the messages lost before a stream's first one (its first message
received lacks the ``contract`` a contactflow node attaches to the first message of each output, or
the log batches before it were lost: counted from tick 0, ``missing_before_first``, an upper bound for
an output that starts later than tick 0) and the log batches lost (a gap in the batches' ``seq``,
which start at 0); all go to the manifest (``missing_seq`` and ``missing_before_first`` per stream,
``recording_gaps``, ``recording_lost_batches``) and, with ``--summary``, to the summary
(``recording_gaps``: total, ``recording_gaps_by_stream``, ``recording_lost_batches``), and a warning
is printed: nothing is lost silently. A stream's contract and layout come from the port table
(:func:`contactflow.recording.store.port_table_streams`, with ``--robot``) when its messages do not
carry them, so they do not depend on its first message arriving.

Disk full: a failed write (``ENOSPC`` or any ``OSError``), or ``--max-bytes N`` reached (the same path,
to emulate a full disk), cuts every stream file back to its last complete batch (readable; no
end-of-stream marker, so readers report it truncated), records ``write_failure`` and
``unwritten_messages`` in the manifest, keeps draining the inputs (counted, not written) and ends
with exit 2 and one line naming the stream and the bytes written.

Args: ``--out DIR`` (default ``<repo>/recordings``, or ``$CONTACTFLOW_RECORDINGS``: refused when relative, since
dora starts the node in the dataflow's folder; :func:`contactflow.paths.default_recordings_dir`), ``--name``
(run name prefix, default the dataflow's name), ``--dataflow FILE`` (recorded in the manifest),
``--summary seiko|g1`` (compute and print the SEIKO or the G1 teleop run summary at the end), ``--robot``.

Stop: after ``dora run --stop-after`` (or Ctrl-C) dora SIGTERMs a node that has not exited about 10 s
after the stop. The recorder honours that: a SIGTERM while recording ends the drain and closes the run
(manifest written); the summary (``--summary``), which reads the whole run back (minutes for an hour-long
run), gets ``--summary-budget-s`` (7 s) from the STOP event and is abandoned at a SIGTERM. The manifest's
``summary`` entry says what happened (``state``: ``computing`` while it runs, then ``written``,
``not computed`` with the ``reason``, or ``failed``) and names the command that computes it later,
``contactflow rec summary RUN`` (:func:`contactflow.recording.summary.run_summary`); a line says so too.
Nothing is lost silently: the recording itself is complete before the summary starts.

The run directory name is ``<name>-<UTC time>``; ``recordings/latest`` points at the newest run.
Files are flushed every ``--flush-period-s`` (0.05 s) of wall time and of the messages' own time, a log
batch is written as soon as it arrives, and every stream's header is written when the stream is created, so a
recorder killed with SIGKILL keeps everything it had read but about the last 50 ms (plus what it had not read
yet: ``recorder_lag_ms`` in the manifest), and the stream files stay readable (Arrow IPC *stream* format: no
footer). The stream files are fsynced every second from a thread of their own.
After STOP the inputs are drained fully (STOP overtakes queued inputs in dora).
"""

from __future__ import annotations

import array
import datetime as dt
import json
import logging
import os
import signal
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from contactflow.nodes._runtime import (connect, declared_inputs, base_parser, is_skipped_repeat, log_info, meta_time,
                                       node_main)
from contactflow.paths import default_recordings_dir, source_checkout

if TYPE_CHECKING:  # imported where used (pyarrow with it): the node starts without it
    from contactflow.recording.store import SeqGaps

log = logging.getLogger("contactflow.recorder")


class Recorder:
    """The recorder's state, fed one input message at a time (no dora here: tests drive it directly).

    Args:
        writer: the run's :class:`~contactflow.recording.store.RecordingWriter`.
        sources: input id -> source ``node/output`` (renames applied).
        renames: source ``node/output`` -> recorded name (``--rename``), for the outputs inside a log.
        expected: stream name -> ``{"source", "contract", "layout", "size"}`` from the port table
            (:func:`contactflow.recording.store.port_table_streams`): a stream's contract and layout
            when its messages do not carry them (its first message was lost).
    """

    def __init__(self, writer, sources: dict[str, str], renames: dict[str, str] | None = None,
                 expected: dict[str, dict] | None = None):
        self.writer = writer
        self.sources = dict(sources)
        self.renames = dict(renames or {})
        self.expected = dict(expected or {})
        self.n_msgs = 0
        self.gap_warned: set[str] = set()  # streams whose first gap was warned about (_warn_gap)
        self.batch_gaps: dict[str, SeqGaps] = {}  # input -> its log batches' seq (from 0): the batches lost
        self.batches_received = 0  # log messages received (the cost side of CONTACTFLOW_LOG_EVERY)
        # per log batch: receive time - its newest row's send time [ms]; an array of doubles, not a list of
        # floats (8 B per batch instead of ~32: ~3 MB an hour for a SEIKO graph's 100 batches per second)
        self.lag_ms = array.array("d")
        self.finished: dict[str, bool] = {}  # stream -> a message with `finished` arrived
        self.failure_reported = False
        self.received: set[str] = set()  # input ids with at least one message (repeats included)

    def _stream(self, name: str, size: int, meta: dict):
        """The stream's writer, created with the port table's contract / layout where the message lacks them."""
        w = self.writer.streams.get(name)
        if w is not None:
            return w, False
        exp = self.expected.get(name)
        if exp is not None and int(exp["size"]) == size:
            meta = {"contract": exp["contract"], "layout": json.dumps(exp["layout"]), **meta}
        elif exp is not None:
            log.warning("stream %s: messages of %d values, its contract %r has %d for robot of the recorder's --robot: "
                        "the port table's layout not used", name, size, exp["contract"], exp["size"])
        return self.writer.stream(name, size, meta), True

    def on_input(self, iid: str, vec, md: dict) -> None:
        """Record one input message (a bad message is logged, not raised). A re-send (``repeat``) is skipped: a
        keep-alive (:meth:`Sender.repeat`) always, a re-sent end of run (:meth:`Sender.repeat_finished`) when its seq
        is recorded already; one whose original never arrived (an input on a queue that dropped it) is recorded in
        its place, so the stream still ends with ``finished``."""
        self.received.add(iid)
        src = self.sources.get(iid, iid)
        if md.get("repeat", False):
            stream = self.writer.streams.get(src.replace("/", "."))
            if "log" in md or is_skipped_repeat(md, None if stream is None else stream.seq_gaps.last):
                return
            md = {k: v for k, v in md.items() if k != "repeat"}
        try:
            if "log" in md:
                self.n_msgs += self._record_log(iid, src, vec, md)
            else:
                self._record_one(src, vec, md)
                self.n_msgs += 1
        except Exception as exc:  # noqa: BLE001 - a bad message must not stop the recording
            log.warning("input %r: message not recorded: %s", iid, exc)
        self._report_failure()

    def _record_one(self, src, vec, md):
        meta = {"source": src}
        for key in ("contract", "layout", "config"):
            if key in md:
                meta[key] = md[key]
        name = src.replace("/", ".")
        w, new = self._stream(name, vec.size, meta)
        seq = int(md.get("seq", self.n_msgs))
        if new and "contract" not in md and name in self.expected and seq > 0:
            # a contactflow node's first message of an output carries its contract: this is not the
            # first, so the messages from tick 0 to this one were lost on the way (counted from tick 0:
            # an upper bound for an output that starts later)
            w.missing_before_first = seq
            self._warn_gap(name, seq, seq, before_first=True)
        missing = w.missing
        fin = bool(md.get("finished", False))
        w.append(seq, meta_time(md, float("nan")), vec, fin)
        self.finished[name] = self.finished.get(name, False) or fin
        self._warn_gap(name, w.missing - missing, md.get("seq"))

    def _warn_gap(self, name: str, n: int, seq, before_first: bool = False) -> None:
        """Warn about the messages of stream ``name`` missing before ``seq`` (``n`` > 0): the first gap of a stream
        only (:attr:`gap_warned`), as a real-time graph's stage that skips ticks opens a gap at each; the end of the
        run gives each stream's totals (:func:`_report_gaps`)."""
        if n > 0 and before_first:
            log.warning("stream %s: its first message received is seq %s without the first message's contract: %d "
                        "message(s) from tick 0 lost before it; counted in the manifest as missing_before_first and "
                        "in recording_gaps", name, seq, n)
        elif n > 0 and name not in self.gap_warned:
            self.gap_warned.add(name)
            log.warning("stream %s: %d message(s) missing before seq %s (lost on the way or skipped by the producer); "
                        "counted in the manifest as missing_seq and in recording_gaps (this stream's further gaps: "
                        "counted, totalled at the end)", name, n, seq)

    def _record_log(self, iid, src, vec, md):
        from contactflow.recording.store import SeqGaps, unpack_log

        batch = int(md.get("seq", 0))
        self.batches_received += 1
        gaps = self.batch_gaps.setdefault(iid, SeqGaps(first=0))  # the node's batches count from 0
        first = gaps.last is None
        lost = gaps.add(batch)
        if lost and first:
            log.warning("input %r: %d log batch(es) lost before the first one received (batch %d)", iid, lost, batch)
        elif lost:
            log.warning("input %r: %d log batch(es) lost before batch %d", iid, lost, batch)
        src_node = src.rpartition("/")[0] or src
        count = 0
        now_ns = time.time_ns()
        blocks = unpack_log(vec, md)
        newest = max((int(b.t_wall_ns.max()) for b in blocks if len(b.t_wall_ns)), default=None)
        if newest is not None:
            self.lag_ms.append((now_ns - newest) * 1e-6)
        for b in blocks:
            stream_src = self.renames.get(f"{src_node}/{b.output}", f"{src_node}/{b.output}")
            meta = {"source": stream_src}
            if "contract" in b.head:
                meta["contract"] = b.head["contract"]
            if b.head.get("layout"):
                meta["layout"] = json.dumps(b.head["layout"])
            if "config" in b.head:
                meta["config"] = b.head["config"]
            name = stream_src.replace("/", ".")
            w, new = self._stream(name, b.values.shape[1], meta)
            if new and len(b.seq) and int(b.seq[0]) > 0 and gaps.missing + gaps.missing_before_first:
                # its first messages may have been in the lost batches: counted from tick 0 (an upper bound)
                w.missing_before_first = int(b.seq[0])
                self._warn_gap(name, int(b.seq[0]), int(b.seq[0]), before_first=True)
            missing = w.missing
            w.append_block(b.seq, b.t, b.values, b.finished, b.t_wall_ns)
            self.finished[name] = self.finished.get(name, False) or bool(np.any(b.finished))
            self._warn_gap(name, w.missing - missing, int(b.seq[0]) if len(b.seq) else None)
            count += len(b.seq)
        return count

    @property
    def lost_batches(self) -> int:
        """Log batches lost on the way, over every input (before each input's first batch included)."""
        return sum(g.missing + g.missing_before_first for g in self.batch_gaps.values())

    @property
    def lost_batches_before_first(self) -> int:
        """Log batches lost before each input's first batch received."""
        return sum(g.missing_before_first for g in self.batch_gaps.values())

    def flush(self) -> None:
        self.writer.flush()
        self._report_failure()

    def _report_failure(self) -> None:
        f = self.writer.failure
        if f is not None and not self.failure_reported:
            self.failure_reported = True
            log.warning("%s", failure_line(f, None))

    def gaps(self) -> dict[str, int]:
        """Stream -> messages missing (gaps in seq and before the first message)."""
        return {name: w.missing + w.missing_before_first for name, w in self.writer.streams.items()
                if w.missing or w.missing_before_first}

    def close(self) -> None:
        for name in self.writer.streams:
            done = self.finished.get(name, False)
            entry = self.writer.manifest["streams"].get(name) or self.writer.manifest["lost_streams"][name]
            entry["finished"] = done
            if not done:
                log.warning("stream %s: no message with 'finished' arrived: the run was stopped before its end, or "
                            "the stream's last messages were lost (those cannot be counted)", name)
        # declared inputs that never sent: nothing of them is in the files (a node stopped before it sent,
        # e.g. an offline estimator stopped in its solve): listed, never silent
        silent = {iid: src for iid, src in sorted(self.sources.items()) if iid not in self.received}
        if silent and not self.received:  # nothing at all (a run stopped in its first second): one line for all
            log.warning("no input sent a message (%s): nothing is recorded (the run was stopped, or its nodes "
                        "stopped or failed, before any of them sent)", ", ".join(f"{i!r}" for i in silent))
        else:
            for iid, src in silent.items():
                log.warning("input %r (%s): no message arrived: nothing of it is recorded (its node was stopped or "
                            "failed before it sent, or it never sends in this run)", iid, src)
        gaps = self.gaps()
        _report_gaps(self.writer.streams, gaps)
        self.writer.close(messages=self.n_msgs, recording_gaps=sum(gaps.values()), silent_inputs=silent,
                          recording_lost_batches=self.lost_batches,
                          recording_lost_batches_before_first=self.lost_batches_before_first,
                          log_batches_received=self.batches_received, recorder_lag_ms=self.lag_summary())

    def lag_summary(self) -> dict | None:
        """How far behind the nodes the recorder read their log batches: receive wall time minus the
        batch's newest row's send time [ms] (``p50``, ``p99``, ``max``; None without a batch). What a
        recorder killed at any instant loses is about this plus the batch period."""
        if not self.lag_ms:
            return None
        a = np.frombuffer(self.lag_ms, dtype=np.float64)
        return {"p50": round(float(np.percentile(a, 50)), 1), "p99": round(float(np.percentile(a, 99)), 1),
                "max": round(float(a.max()), 1), "batches": int(a.size)}


class SummaryInterrupted(Exception):
    """The summary was abandoned: a SIGTERM (the dataflow's stop) or its time budget spent."""


class StopGuard:
    """The recorder's SIGTERM handling: while recording, a SIGTERM only sets :attr:`terminated` (the
    event loop ends and the run is closed normally); inside :meth:`interruptible` it raises
    :class:`SummaryInterrupted` at once, as does the end of the time budget (``SIGALRM``)."""

    def __init__(self):
        self.terminated = False
        self._raise = False
        self._prev = signal.signal(signal.SIGTERM, self._on_term)

    def _on_term(self, signum, frame):
        self.terminated = True
        if self._raise:
            self._raise = False
            raise SummaryInterrupted("SIGTERM (dora ends a node that has not exited ~10 s after the dataflow's stop)")

    @contextmanager
    def interruptible(self, deadline: float | None, budget_s: float | None = None):
        """Run the block until it ends, a SIGTERM or ``deadline`` (``time.monotonic()``; None: none)."""
        if self.terminated:
            raise SummaryInterrupted("SIGTERM received before it started")
        why = (f"its time budget ({budget_s:g} s from the STOP event, --summary-budget-s) was spent"
               if budget_s is not None else "its deadline passed")
        if deadline is not None and deadline - time.monotonic() <= 0:
            raise SummaryInterrupted(f"{why} before it started")

        def on_alarm(signum, frame):
            if self._raise:
                self._raise = False
                raise SummaryInterrupted(why)

        prev_alarm = None
        self._raise = True
        if deadline is not None:
            prev_alarm = signal.signal(signal.SIGALRM, on_alarm)
            signal.setitimer(signal.ITIMER_REAL, max(1e-3, deadline - time.monotonic()))
        try:
            yield
        finally:
            self._raise = False
            if deadline is not None:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, prev_alarm)

    def restore(self) -> None:
        signal.signal(signal.SIGTERM, self._prev)


def finish_summary(writer, kind: str, robot, guard: StopGuard, *, deadline: float | None = None,
                   budget_s: float | None = None, emit=print) -> int:
    """Compute and write the run's summary (:func:`contactflow.recording.summary.run_summary`) after the
    run was closed, within ``deadline`` and until a SIGTERM; the manifest's ``summary`` entry always says
    the outcome and the command that recomputes it. A run in which no message was recorded (stopped, or its
    nodes ended, before any of them sent: a Ctrl-C in the first second) has no summary to compute: one line
    says so, and that is not a failure. Returns the exit status (0; 1: the summary failed)."""
    from contactflow.recording.summary import (NO_MESSAGE_REASON, recompute_command, recorded_nothing, run_summary,
                                               write_run_summary)

    run_dir = writer.run_dir
    cmd = recompute_command(run_dir)

    def state(**entry):
        writer.manifest["summary"] = {**entry, "command": cmd}
        writer.write_manifest()

    if recorded_nothing(writer.manifest):  # nothing to summarise, and nothing to recompute later
        writer.manifest["summary"] = {"state": "not computed", "reason": NO_MESSAGE_REASON}
        writer.write_manifest()
        print(f"[recorder] no summary: {NO_MESSAGE_REASON}", flush=True)
        return 0
    state(state="computing")  # a recorder killed now leaves this: the summary is missing, and how to get it
    try:
        with guard.interruptible(deadline, budget_s):
            summary, text = run_summary(run_dir, kind, robot)
            path = write_run_summary(run_dir, summary)
    except SummaryInterrupted as exc:
        state(state="not computed", reason=f"stopped: {exc}")
        msg = (f"[recorder] WARNING: summary not computed (stopped: {exc}); the recording is complete; "
               f"`{cmd}` computes it")
        print(msg, flush=True)
        log.warning("%s", msg)
        return 0
    except Exception as exc:  # noqa: BLE001 - report, don't hide the recording
        state(state="failed", reason=str(exc))
        print(f"[recorder] summary could not be computed: {exc} (`{cmd}` retries it)", flush=True)
        return 1
    state(state="written", file=path.name)
    for line in text.splitlines():
        emit(line)
    emit(f"[recorder] summary written to {path}")
    return 0


def failure_line(f, unwritten: int | None) -> str:
    """The one line of a write failure (a full disk or ``--max-bytes``)."""
    limit = f" (limit --max-bytes {f.max_bytes})" if f.max_bytes is not None else ""
    tail = f"; {unwritten} message(s) not written" if unwritten is not None else ""
    return (f"disk full: stream {f.stream}: {f.bytes_written} bytes written{limit}: {f.error}{tail}; the stream "
            f"files are readable up to their last complete batch")


def main() -> int:
    from contactflow.errors import RecordingError
    from contactflow.recording.store import RecordingWriter, git_revision, port_table_streams

    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--out", default=None)  # None: default_recordings_dir(node=True), read after parsing
    p.add_argument("--name", default="run")
    p.add_argument("--dataflow", default="")
    p.add_argument("--summary", choices=["none", "seiko", "g1"], default="none",
                   help="seiko: SEIKO run summary (contactflow.recording.summary); g1: G1 teleop run summary (contactflow.lac.summary)")
    p.add_argument("--rename", action="append", default=[], metavar="SRC=DST",
                   help="record the output SRC (node/output) under the name of DST (node/output), e.g. "
                        "seiko_stack/desired=seiko_retargeting/desired, so that a fused graph's recording "
                        "has the stream names of the split graph")
    p.add_argument("--flush-period-s", type=float, default=0.05,
                   help="write the buffered messages to the files at least this often [s], of wall time and of the messages' "
                        "own time (fsync every 1 s, from a thread of its own); a recorder "
                        "killed with SIGKILL loses at most about this much plus one event wait (50 ms)")
    p.add_argument("--summary-budget-s", type=float, default=7.0,
                   help="time the summary may take after the dataflow's STOP event [s]: dora SIGTERMs a node ~10 s "
                        "after the stop; past it (or at a SIGTERM) the summary is left to `contactflow rec summary "
                        "RUN` and the manifest says so (<= 0: no budget; a natural end has none)")
    p.add_argument("--max-bytes", type=int, default=0, metavar="N",
                   help="stop writing once the run's stream files reach N bytes, exactly as on a full disk (ENOSPC): "
                        "the files are cut back to their last complete batch, later messages are counted, not "
                        "written, and the recorder exits 2 naming the stream and the bytes written (0: no limit; "
                        "a fault-injection aid)")
    args = p.parse_args()

    renames = {}
    for item in args.rename:
        src, sep, dst = item.partition("=")
        if not sep or src.count("/") != 1 or dst.count("/") != 1:
            from contactflow.errors import ConfigError

            raise ConfigError(f"--rename {item!r}: expected SRC=DST with both as node/output")
        renames[src] = dst
    if args.max_bytes < 0:
        from contactflow.errors import ConfigError

        raise ConfigError(f"--max-bytes {args.max_bytes}: expected a number of bytes >= 0 (0: no limit)")
    # the robot (the port table's contract sizes) is loaded BEFORE connecting: dora starts the dataflow once
    # every node has connected, so the graph does not run while the recorder is still loading (a real-time
    # graph's recorder, killed 3.5 s after the start on a loaded machine, had written nothing yet)
    try:
        from contactflow.robot import load_robot

        robot, robot_error = load_robot(args.robot), None
    except Exception as exc:  # noqa: BLE001 - reported below; the recording goes on without the port table
        robot, robot_error = None, exc
    revision = git_revision(source_checkout()) if source_checkout() else "unknown (installed package)"  # a subprocess
    node = connect()
    try:
        descriptor = node.dataflow_descriptor()
    except Exception:  # noqa: BLE001 - the descriptor is informative only
        descriptor = None
    inputs = declared_inputs(node, "recorder")
    sources = {iid: renames.get(src, src) for iid, src in inputs.items()}
    try:
        if robot_error is not None:
            raise robot_error
        expected = port_table_streams(descriptor, inputs, robot, renames)
    except Exception as exc:  # noqa: BLE001 - without the port table the messages' own metadata is used
        log.warning("the streams' contracts could not be taken from the port table (%s): a stream whose first "
                    "message is lost has no layout", exc)
        expected = {}
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    out = Path(args.out) if args.out else default_recordings_dir(node=True)
    if not out.is_absolute():
        out = (Path.cwd() / out).resolve()
    run_dir = out / f"{args.name}-{stamp}"
    i = 1
    while run_dir.exists():
        run_dir = out / f"{args.name}-{stamp}-{i}"
        i += 1
    dataflow = args.dataflow
    if dataflow and not Path(dataflow).is_absolute():
        dataflow = str((Path.cwd() / dataflow).resolve())
    writer = RecordingWriter(
        run_dir,
        {
            "dataflow": dataflow,
            "dataflow_descriptor": descriptor,
            "dataflow_id": _safe(node.dataflow_id),
            "robot": args.robot,
            "git_revision": revision,
            "recorder_pid": os.getpid(),
            "flush_period_s": args.flush_period_s,
            "max_bytes": args.max_bytes or None,
            "summary_kind": None if args.summary == "none" else args.summary,
        },
        flush_period_s=args.flush_period_s,
        max_bytes=args.max_bytes or None,
        background_fsync=True,  # the event loop never waits on a busy disk (fsync took 5-230 ms here)
    )
    latest = out / "latest"
    try:
        if latest.is_symlink() or latest.exists():
            latest.unlink()
        latest.symlink_to(run_dir.name)
    except OSError:
        pass
    print(f"[recorder] recording to {run_dir}", flush=True)

    rec = Recorder(writer, sources, renames, expected)
    guard = StopGuard()
    t_stop = None
    while True:
        if guard.terminated:
            log.warning("SIGTERM: the recording is closed now; inputs still queued are not recorded (streams "
                        "without their 'finished' message are flagged)")
            break
        ev = node.next(timeout=0.05)
        if ev is None:
            break
        typ = ev["type"]
        if typ == "STOP" and t_stop is None:
            t_stop = time.monotonic()
        if typ == "INPUT":
            try:
                vec = ev["value"].to_numpy(zero_copy_only=False)
            except Exception as exc:  # noqa: BLE001 - a bad message must not stop the recording
                log.warning("input %r: message not recorded: %s", ev["id"], exc)
                rec.received.add(ev["id"])  # it sent, though unreadable: not a silent input (on_input adds the others)
                continue
            rec.on_input(ev["id"], vec, ev["metadata"])
        # STOP: keep draining, queued inputs still arrive after STOP (dora delivers STOP first)
        rec.flush()
    rec.close()
    gaps = rec.gaps()
    n_msgs, lost_batches = rec.n_msgs, rec.lost_batches
    print(f"[recorder] wrote {n_msgs} messages in {len(writer.streams)} streams to {run_dir}", flush=True)
    if gaps or lost_batches:
        print(f"[recorder] WARNING: messages missing in seq (before the first message included): {gaps}; "
              f"log batches lost: {lost_batches}", flush=True)
    if writer.failure is not None:
        raise RecordingError(failure_line(writer.failure, writer.manifest.get("unwritten_messages")))

    if args.summary != "none":
        budget = args.summary_budget_s if args.summary_budget_s > 0 else None
        deadline = t_stop + budget if t_stop is not None and budget is not None else None
        # through dora's log (INFO) rather than stdout, so that `dora run --log-level info`, which
        # hides the daemon's DEBUG lines and the nodes' raw stdout, still shows the summary
        # the robot loaded at the start (its name if that failed: the summary then says why)
        return finish_summary(writer, args.summary, robot if robot is not None else args.robot, guard,
                              deadline=deadline, budget_s=budget,
                              emit=lambda line: log_info(node, line))
    return 0


def _report_gaps(streams: dict, gaps: dict[str, int]) -> None:
    """One line per stream (``streams``: name -> its writer) with more than one gap between its messages: the gaps
    and the messages missing in all (the manifest's counts)."""
    for name, w in sorted(streams.items()):
        if w.gaps > 1:
            log.warning("stream %s: %d gaps between its messages; %d message(s) missing in all (missing_seq and "
                        "missing_before_first in the manifest)", name, w.gaps, gaps.get(name, 0))


def _safe(fn):
    try:
        return str(fn())
    except Exception:  # noqa: BLE001
        return None


if __name__ == "__main__":
    node_main("recorder", main)
