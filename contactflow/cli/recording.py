"""``contactflow rec | plot | bench | check | view``: recordings, plots, benchmarks, wiring check, viewer.

Sub-commands:
    rec ls [--root DIR]                                 runs under the recordings directory
    rec info RUN [--json] [--fields]                    streams, rates, duration, gaps, damage
    rec summary RUN [--kind seiko|g1] [--robot R]       (re)compute the run summary into RUN/summary.json
    rec export RUN --to parquet|csv|mcap [--out DIR] [--streams a.b,c.d] [--allow-truncated]
    plot RUN SIGNAL... [--out FIG.png] [--separate] [--allow-truncated]   time series (matplotlib PNG)
    bench NAME [ARGS...] | bench --list                 run benchmarks/bench_NAME.py (ARGS, --help too, go to it)
    check DATAFLOW...                                   static wiring check against the node contracts
    view RUN [--rrd OUT.rrd] [--every N] [--no-meshes]  convert a run to a rerun .rrd file (robot, wrenches, plots)

``RUN`` is a run directory, a run name under the recordings directory (``--root``, else
``$CONTACTFLOW_RECORDINGS``, else ``<repo>/recordings``) or ``latest``. Signals are
``<node>.<output>[:<field>][[<index>]]``, e.g. ``mujoco_driver.sensors:wrench.left_foot[2]``.
Exit status: 0 success; 1 ``rec info`` of a readable but damaged run (a stream cut short by a crash
and recovered, or without its end-of-stream marker, or a stream never written: a full disk before its first
batch, named as NOT RECORDED), or a failed wiring check; 2 refused input (not a
recording, foreign or unreadable file, another format version, unknown signal; ``rec info`` lists the
readable streams first and names the unreadable ones), with a message and no traceback.
``rec export``, ``plot`` and ``view`` refuse a damaged stream (one line naming the stream, the byte
offset where its good data ends and the time of its last good message; exit 2) unless
``--allow-truncated`` is given: they then use its complete messages and print that line as a warning.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from contactflow.paths import scripts_env, source_checkout
from contactflow.recording.store import (RecordingError, check_manifest, list_runs, read_recording, recordings_root,
                                         resolve_run)

#: The checkout holding the benchmarks (``benchmarks/`` is not installed: ``contactflow bench`` needs a checkout).
REPO_ROOT = source_checkout()
BENCH_DIR = REPO_ROOT / "benchmarks" if REPO_ROOT is not None else None


def _progress(args, desc: str):
    no = getattr(args, "no_progress", False) or not sys.stderr.isatty()

    def wrap(it):
        if no:
            return it
        from tqdm import tqdm

        return tqdm(it, desc=desc, unit="msg" if desc == "export" else "stream", leave=False, file=sys.stderr)

    return wrap


def _root(args) -> Path:
    return Path(args.root) if args.root else recordings_root()


def _open(args):
    return read_recording(resolve_run(args.run, _root(args)))


def _cmd_ls(args) -> int:
    root = _root(args)
    runs = list_runs(root)
    if not runs:
        print(f"no recordings under {root}")
        return 0
    manifests = {}
    for p in runs:
        try:
            manifests[p] = check_manifest(json.loads((p / "manifest.json").read_bytes()), p / "manifest.json")
        except (OSError, ValueError, RecursionError, RecordingError):
            manifests[p] = None
    # oldest first, the newest last (next to the prompt); a run without a readable start time first, by name
    runs = sorted(runs, key=lambda p: (str((manifests[p] or {}).get("start_time_utc", "")), p.name))
    print(f"{'run':48s} {'start (UTC)':20s} {'state':10s} {'streams':>7s} {'messages':>9s} {'size':>9s}")
    for p in runs:
        m = manifests[p]
        if m is None:
            print(f"{p.name:48s} {'?':20s} {'bad manifest':10s}")
            continue
        streams = m.get("streams", {})
        msgs = sum(int(s.get("messages", 0)) for s in streams.values()) if m.get("complete") else "?"
        size = sum(f.stat().st_size for f in p.iterdir() if f.is_file())
        state = "complete" if m.get("complete") else "partial"
        print(f"{p.name:48s} {str(m.get('start_time_utc', ''))[:19]:20s} {state:10s} {len(streams):7d} {str(msgs):>9s} "
              f"{size / 1e6:8.1f}M")
    return 0


def _cmd_info(args) -> int:
    from contactflow.recording.export import run_info

    rec = _open(args)
    info = run_info(rec, _progress(args, "reading"))
    damaged = [s for s in info["streams"] if s["truncated"]]
    rc = 2 if info["unreadable"] else 1 if damaged or info["lost"] else 0
    if args.json:
        print(json.dumps(info, indent=2))
        return rc
    print(f"run       {info['run']}  ({info['path']})")
    print(f"dataflow  {info['dataflow']}")
    print(f"robot     {info['robot']}    git {info['git_revision']}")
    print(f"start     {info['start_time_utc']}   end {info['end_time_utc'] or '-'}")
    print(f"state     {'complete' if info['complete'] else 'PARTIAL (the recorder did not close it: killed or still running)'}")
    print(f"duration  {info['duration_s']:.3f} s (recorded time)")
    print(f"format    version {info['format_version']}"
          + (f" (migrated from version {info['migrated_from']})" if info["migrated_from"] else ""))
    if info["write_failure"]:
        wf = info["write_failure"]
        print(f"WRITE FAILURE  stream {wf.get('stream')}: {wf.get('error')} after {wf.get('bytes_written')} bytes; "
              f"{rec.manifest.get('unwritten_messages', '?')} message(s) not written")
    print()
    print(f"{'stream':34s} {'contract':18s} {'msgs':>7s} {'seq':>13s} {'dur [s]':>8s} {'rate [Hz]':>9s} "
          f"{'wall [Hz]':>9s} {'missing':>7s} {'t gaps':>6s}")
    for s in info["streams"]:
        seq = f"{s['seq_first']}..{s['seq_last']}"
        print(f"{s['name']:34s} {s['contract'] or '-':18s} {s['messages']:7d} {seq:>13s} {s['duration_s']:8.3f} "
              f"{s['rate_hz']:9.1f} {s['wall_rate_hz']:9.1f} {s['missing_seq']:7d} {s['time_gaps']:6d}"
              + ("  TRUNCATED" if s["truncated"] else ""))
        if s["gaps"]:
            print(f"{'':34s} missing seq: " + ", ".join(f"{a}..{b}" if a != b else str(a) for a, b in s["gaps"]))
        if s["missing_before_first"]:
            print(f"{'':34s} missing before the first message: {s['missing_before_first']}")
        if rec.manifest.get("streams", {}).get(s["name"], {}).get("finished") is False:
            print(f"{'':34s} no 'finished' message: the run was stopped, or its last messages were lost (not countable)")
        if s["unwritten_messages"]:
            print(f"{'':34s} received but not written: {s['unwritten_messages']}")
    for u in info["unreadable"]:
        print(f"{u['name']:34s} UNREADABLE")
    for iid, src in info["silent_inputs"].items():
        print(f"{src.replace('/', '.'):34s} {'-':18s} NO MESSAGE: the recorder's input {iid!r} received nothing "
              "(its node stopped or failed before it sent)")
    for lost in info["lost"]:
        print(f"{lost['name']:34s} {lost.get('contract') or '-':18s} NOT RECORDED: "
              f"{lost.get('unwritten_messages', '?')} message(s) received, none written (disk full before its first batch)")
    if args.fields:
        print()
        for name in rec.stream_names:
            print(f"{name}: " + ", ".join(_field_list(rec, name)))
    for s in damaged:
        d = s["damage"]
        print(f"warning: stream {s['name']!r} was cut short ({d['reason']}) and its complete prefix recovered: "
              f"good data ends at byte {d['offset']} of {d['file_size']}, last good message seq {d['last_seq']} "
              f"t = {d['last_t']:.6g} s", file=sys.stderr)
    for u in info["unreadable"]:
        print(f"error: stream {u['name']!r} unreadable: {u['error']}", file=sys.stderr)
    for lost in info["lost"]:
        print(f"warning: stream {lost['name']!r} {lost['reason']}", file=sys.stderr)
    return rc


def _cmd_summary(args) -> int:
    from contactflow.recording.summary import run_summary, write_run_summary

    run_dir = resolve_run(args.run, _root(args))
    summary, text = run_summary(run_dir, args.kind, args.robot)
    print(text)
    print(f"summary written to {write_run_summary(run_dir, summary)}")
    return 0


def _field_list(rec, name: str) -> list[str]:
    """``field[size]`` of a stream's contract, from the manifest (no stream data read)."""
    layout = rec.manifest.get("streams", {}).get(name, {}).get("layout") or []
    if isinstance(layout, str):
        layout = json.loads(layout)
    return [f"{f}[{n}]" for f, n in layout]


def _cmd_export(args) -> int:
    from contactflow.recording.export import export_run

    rec = _open(args)
    out = Path(args.out) if args.out else rec.path / "export"
    streams = [s.strip() for s in args.streams.split(",") if s.strip()] if args.streams else None
    files = export_run(rec, args.to, out, streams, _progress(args, "export"), allow_truncated=args.allow_truncated,
                       warn=_warn)
    for f in files:
        print(f)
    return 0


def _cmd_plot(args) -> int:
    from contactflow.recording.export import plot_signals

    rec = _open(args)
    out = Path(args.out) if args.out else rec.path / "plot.png"
    print(plot_signals(rec, args.signals, out, separate=args.separate, allow_truncated=args.allow_truncated,
                       warn=_warn))
    return 0


def _warn(line: str) -> None:
    print(f"warning: {line} (--allow-truncated)", file=sys.stderr)


def _cmd_bench(args) -> int:
    if BENCH_DIR is None:
        raise RecordingError("contactflow bench runs the benchmarks of a source checkout (benchmarks/ is not "
                             "installed): run it from a clone with an editable install (pip install -e .)")
    benches = sorted(p.stem[len("bench_"):] for p in BENCH_DIR.glob("bench_*.py"))
    if args.list or not args.name:
        print("benchmarks: " + ", ".join(benches))
        return 0
    if args.name not in benches and args.name.replace("-", "_") in benches:  # `bench seiko-grid` runs bench_seiko_grid.py
        args.name = args.name.replace("-", "_")
    if args.name not in benches:
        raise RecordingError(f"no benchmark {args.name!r}; available: {benches}")
    rest = list(args.bench_args)
    if rest[:1] == ["--"]:  # `bench NAME -- ARGS` (the older spelling) still works
        rest = rest[1:]
    return subprocess.call([sys.executable, str(BENCH_DIR / f"bench_{args.name}.py"), *rest], cwd=REPO_ROOT,
                           env=scripts_env())  # the nodes' executables found without an activated venv


def _cmd_check(args) -> int:
    from contactflow.contracts.wiring import check_dataflow

    bad = 0
    for df in args.dataflows:
        # the graph as `dora run` in this shell will start it: its executables found on this PATH
        problems = check_dataflow(df, strict=args.strict, executables=True)
        if problems:
            bad += 1
            print(f"{df}: {len(problems)} problem(s) (wiring, node configuration or arguments)")
            for p in problems:
                print(f"  - {p}")
        else:
            print(f"{df}: wiring OK")
    return 1 if bad else 0


def _cmd_view(args) -> int:
    from contactflow.errors import ContactflowError

    try:
        from contactflow.recording.viewer import log_recording
    except ModuleNotFoundError as exc:
        from contactflow.cli import missing_extra_message

        hint = missing_extra_message(exc)
        if hint is not None:
            raise ContactflowError(f"`contactflow view`: {hint}") from None
        raise
    run = resolve_run(args.run, _root(args), require_streams=())
    out = Path(args.rrd) if args.rrd else run / "view.rrd"
    bar = None
    if not (args.no_progress or not sys.stderr.isatty()):
        from tqdm import tqdm

        bar = tqdm(desc="view", unit="tick", leave=False, file=sys.stderr)

    def progress(done, total):
        if bar is not None:
            bar.total = total
            bar.n = done
            bar.refresh()

    try:
        log_recording(run, out, every=args.every, meshes=not args.no_meshes,
                      force_scale_m_per_n=args.force_scale_m_per_n, progress=progress,
                      allow_truncated=args.allow_truncated, warn=_warn)
    finally:
        if bar is not None:
            bar.close()
    print(out)
    return 0


def add_parser(subparsers) -> None:
    """Register ``rec``, ``plot``, ``bench``, ``check`` and ``view`` on the ``contactflow`` parser."""
    rec = subparsers.add_parser("rec", help="recordings: ls, info, summary, export")
    rsub = rec.add_subparsers(dest="rec_command", required=True)

    def common(p, run=True):
        if run:
            p.add_argument("run", help="run directory, run name, or 'latest'")
        p.add_argument("--root", default=None, help="recordings directory")
        p.add_argument("--no-progress", action="store_true")

    def allow_truncated(p):
        p.add_argument("--allow-truncated", action="store_true",
                       help="use the complete messages of a damaged stream (cut short by a crash, no end-of-stream "
                            "marker) instead of refusing it; its damage is printed as a warning")

    p = rsub.add_parser("ls", help="list runs")
    common(p, run=False)
    p.set_defaults(func=_cmd_ls)
    p = rsub.add_parser("info", help="streams, rates, duration, gaps of a run")
    common(p)
    p.add_argument("--json", action="store_true")
    p.add_argument("--fields", action="store_true", help="also list each stream's fields (names for `contactflow plot`)")
    p.set_defaults(func=_cmd_info)
    p = rsub.add_parser("summary", help="(re)compute a run's summary into RUN/summary.json (the recorder's --summary, "
                                        "e.g. after a stop that left it not computed)")
    common(p)
    p.add_argument("--kind", choices=["seiko", "g1"], default=None,
                   help="the summary (default: the recorder's --summary, recorded in the manifest as summary_kind)")
    p.add_argument("--robot", default=None, help="robot (default: the manifest's)")
    p.set_defaults(func=_cmd_summary)
    p = rsub.add_parser("export", help="export a run to parquet, csv or mcap")
    common(p)
    p.add_argument("--to", required=True, choices=["parquet", "csv", "mcap"])
    p.add_argument("--out", default=None, help="output directory (default RUN/export)")
    p.add_argument("--streams", default=None, help="comma-separated stream names (default all)")
    allow_truncated(p)
    p.set_defaults(func=_cmd_export)

    p = subparsers.add_parser("plot", help="plot signals of a run into a PNG")
    common(p)
    p.add_argument("signals", nargs="+", help="e.g. mujoco_driver.sensors:wrench.left_foot[2]")
    p.add_argument("--out", default=None, help="PNG file (default RUN/plot.png)")
    p.add_argument("--separate", action="store_true", help="one subplot per signal")
    allow_truncated(p)
    p.set_defaults(func=_cmd_plot)

    p = subparsers.add_parser("bench", help="run a benchmark of benchmarks/",
                              description="Run benchmarks/bench_NAME.py; everything after NAME (--help included: "
                                          "`contactflow bench seiko --help` shows the benchmark's own options) "
                                          "goes to the script.")
    p.add_argument("name", nargs="?", help="benchmark name (bench_NAME.py; --list shows them)")
    p.add_argument("bench_args", nargs=argparse.REMAINDER, help="arguments passed to the benchmark, e.g. --help")
    p.add_argument("--list", action="store_true")
    p.set_defaults(func=_cmd_bench)

    p = subparsers.add_parser("check", help="check dataflows before running them: wiring against the node contracts, configuration files, node arguments")
    p.add_argument("dataflows", nargs="+")
    p.add_argument("--strict", action="store_true", help="also report nodes that are not contactflow nodes "
                   "(their ports are not checked), so a pass covers every node")
    p.set_defaults(func=_cmd_check)

    p = subparsers.add_parser("view", help="convert a run to a rerun .rrd file (open it with `rerun FILE.rrd`)")
    common(p)
    p.add_argument("--rrd", default=None, help="output .rrd file (default RUN/view.rrd)")
    p.add_argument("--every", type=int, default=10, help="log one tick in N (10: 50 Hz at 500 Hz)")
    p.add_argument("--no-meshes", action="store_true", help="draw links as boxes and axes instead of URDF meshes")
    p.add_argument("--force-scale-m-per-n", type=float, default=1e-3, help="wrench arrow length per newton [m/N]")
    allow_truncated(p)
    p.set_defaults(func=_cmd_view)
