"""recorder node: writes every input stream of the run to ``recordings/<run>/`` (Arrow IPC).

Inputs: any (declare one input per stream to record, e.g. ``sensors: mujoco_driver/sensors``;
use ``queue_policy: backpressure`` so no message is dropped). Stream files are named after the
*source* ``<node>.<output>``. An input wired to a node's batched ``log`` output (e.g.
``seiko_controller: seiko_controller/log``, see ``nodes/_runtime.py`` Sender) is unpacked into one
stream per output of that node (``seiko_controller.command``, ``seiko_controller.state``), the same
streams as when each output is wired on its own. Outputs: none.

Gaps: the recorder counts the ``seq`` numbers missing in each stream (a message lost on the way, or
ticks a real-time node skipped) and the log batches lost (a gap in the batches' ``seq``); both go to
the manifest (``missing_seq`` per stream, ``recording_gaps``, ``recording_lost_batches``) and, with
``--summary``, to the summary (``recording_gaps``: total, ``recording_gaps_by_stream``,
``recording_lost_batches``), and a warning is printed: nothing is lost silently.

Args: ``--out DIR`` (default ``<repo>/recordings``, or ``$CONTACTFLOW_RECORDINGS``), ``--name``
(run name prefix, default the dataflow's name), ``--dataflow FILE`` (recorded in the manifest),
``--summary seiko|g1`` (compute and print the SEIKO or the G1 teleop run summary at the end), ``--robot``.

The run directory name is ``<name>-<UTC time>``; ``recordings/latest`` points at the newest run.
Files are flushed every ``--flush-period-s`` (0.05 s), so a recorder killed with SIGKILL keeps all
but about the last 100 ms, and the stream files stay readable (Arrow IPC *stream* format: no footer).
After STOP the inputs are drained fully (STOP overtakes queued inputs in dora).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import time
from pathlib import Path

from contactflow.nodes import _runtime
from contactflow.nodes._runtime import connect, declared_inputs, base_parser, log_info, node_main
from contactflow.paths import default_recordings_dir, source_checkout

log = logging.getLogger("contactflow.recorder")


def main() -> int:
    from contactflow.recording.store import RecordingWriter, git_revision, read_recording, unpack_log

    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--out", default=str(default_recordings_dir()))
    p.add_argument("--name", default="run")
    p.add_argument("--dataflow", default="")
    p.add_argument("--summary", choices=["none", "seiko", "g1"], default="none",
                   help="seiko: SEIKO run summary (contactflow.recording.summary); g1: G1 teleop run summary (contactflow.lac.summary)")
    p.add_argument("--rename", action="append", default=[], metavar="SRC=DST",
                   help="record the output SRC (node/output) under the name of DST (node/output), e.g. "
                        "seiko_stack/desired=seiko_retargeting/desired, so that a fused graph's recording "
                        "has the stream names of the split graph")
    p.add_argument("--flush-period-s", type=float, default=0.05,
                   help="write the buffered messages to the files at least this often [s] (fsync every 1 s); a recorder "
                        "killed with SIGKILL loses at most about this much plus one event wait (50 ms)")
    args = p.parse_args()

    renames = {}
    for item in args.rename:
        src, sep, dst = item.partition("=")
        if not sep or src.count("/") != 1 or dst.count("/") != 1:
            from contactflow.errors import ConfigError

            raise ConfigError(f"--rename {item!r}: expected SRC=DST with both as node/output")
        renames[src] = dst
    node = connect()
    try:
        descriptor = node.dataflow_descriptor()
    except Exception:  # noqa: BLE001 - the descriptor is informative only
        descriptor = None
    sources = {}
    for iid, src in declared_inputs(node, "recorder").items():
        sources[iid] = renames.get(src, src)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    out = Path(args.out)
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
            "git_revision": git_revision(source_checkout()) if source_checkout() else "unknown (installed package)",
            "recorder_pid": os.getpid(),
            "flush_period_s": args.flush_period_s,
        },
        flush_period_s=args.flush_period_s,
    )
    latest = out / "latest"
    try:
        if latest.is_symlink() or latest.exists():
            latest.unlink()
        latest.symlink_to(run_dir.name)
    except OSError:
        pass
    print(f"[recorder] recording to {run_dir}", flush=True)

    stopped = False
    n_msgs = 0
    last_batch: dict[str, int] = {}
    lost_batches = 0

    def record_one(iid, src, vec, md):
        meta = {"source": src}
        for key in ("contract", "layout", "config"):
            if key in md:
                meta[key] = md[key]
        name = src.replace("/", ".")
        w = writer.stream(name, vec.size, meta)
        missing = w.missing
        w.append(int(md.get("seq", n_msgs)), float(md.get("t", float("nan"))), vec, bool(md.get("finished", False)))
        _warn_gap(name, w.missing - missing, md.get("seq"))

    def record_log(iid, src, vec, md):
        nonlocal lost_batches
        batch = int(md.get("seq", 0))
        prev = last_batch.get(iid)
        if prev is not None and batch > prev + 1:
            lost_batches += batch - prev - 1
            log.warning("input %r: %d log batch(es) lost before batch %d", iid, batch - prev - 1, batch)
        last_batch[iid] = batch if prev is None else max(prev, batch)
        src_node = src.rpartition("/")[0] or src
        count = 0
        for b in unpack_log(vec, md):
            stream_src = renames.get(f"{src_node}/{b.output}", f"{src_node}/{b.output}")
            meta = {"source": stream_src, "contract": b.head.get("contract", ""),
                    "layout": json.dumps(b.head.get("layout", []))}
            if "config" in b.head:
                meta["config"] = b.head["config"]
            name = stream_src.replace("/", ".")
            w = writer.stream(name, b.values.shape[1], meta)
            missing = w.missing
            w.append_block(b.seq, b.t, b.values, b.finished, b.t_wall_ns)
            _warn_gap(name, w.missing - missing, int(b.seq[0]) if len(b.seq) else None)
            count += len(b.seq)
        return count

    while True:
        ev = node.next(timeout=0.05)
        if ev is None:
            break
        typ = ev["type"]
        if typ == "INPUT":
            iid = ev["id"]
            src = sources.get(iid, iid)
            md = ev["metadata"]
            if md.get("repeat", False):  # a keep-alive re-send of a seq already recorded (Sender.repeat)
                continue
            try:
                vec = ev["value"].to_numpy(zero_copy_only=False)
                if "log" in md:
                    n_msgs += record_log(iid, src, vec, md)
                else:
                    record_one(iid, src, vec, md)
                    n_msgs += 1
            except Exception as exc:  # noqa: BLE001 - a bad message must not stop the recording
                log.warning("input %r: message not recorded: %s", iid, exc)
        elif typ == "STOP":
            stopped = True  # keep draining: queued inputs still arrive after STOP
        writer.flush()
    gaps = {name: w.missing for name, w in writer.streams.items() if w.missing}
    writer.close(messages=n_msgs, recording_gaps=sum(gaps.values()), recording_lost_batches=lost_batches)
    print(f"[recorder] wrote {n_msgs} messages in {len(writer.streams)} streams to {run_dir}", flush=True)
    if gaps or lost_batches:
        print(f"[recorder] WARNING: messages missing in seq: {gaps}; log batches lost: {lost_batches}", flush=True)

    if args.summary != "none":
        from contactflow.robot import load_robot
        from contactflow.recording.summary import json_safe

        if args.summary == "seiko":
            from contactflow.recording.summary import format_summary as fmt, seiko_summary as compute
            title = f"SEIKO run {run_dir.name}"
        else:
            from contactflow.lac.summary import format_g1_summary as fmt, g1_summary as compute
            title = f"G1 run {run_dir.name}"
        try:
            summary = compute(read_recording(run_dir), load_robot(args.robot))
        except Exception as exc:  # noqa: BLE001 - report, don't hide the recording
            print(f"[recorder] summary could not be computed: {exc}", flush=True)
            return 1
        summary["recording_gaps"] = int(sum(gaps.values()))
        summary["recording_gaps_by_stream"] = gaps
        summary["recording_lost_batches"] = int(lost_batches)
        (run_dir / "summary.json").write_text(json.dumps(json_safe(summary), indent=2))
        # through dora's log (INFO) rather than stdout, so that `dora run --log-level info`, which
        # hides the daemon's DEBUG lines and the nodes' raw stdout, still shows the summary
        for line in fmt(summary, title).splitlines():
            log_info(node, line)
        log_info(node, f"[recorder] summary written to {run_dir / 'summary.json'}")
    _ = stopped, time
    return 0


def _warn_gap(name: str, n: int, seq) -> None:
    if n > 0:
        log.warning("stream %s: %d message(s) missing before seq %s (lost on the way or skipped by the producer); "
                    "counted in the manifest as missing_seq and in recording_gaps", name, n, seq)


def _safe(fn):
    try:
        return str(fn())
    except Exception:  # noqa: BLE001
        return None


if __name__ == "__main__":
    node_main("recorder", main)
