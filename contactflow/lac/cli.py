"""``contactflow lac ...``: augmentation dataset generation and inspection.

Sub-commands:
    lac augment  --episodes N --workers W --out DIR --seed S [--shard-size 64] [--config FILE]
                 [--frames FILE] [--no-progress]
    lac plot     DIR --out FIG.png                      (Fig. 2-like composition plot)
    lac playback DIR --episode I --out FILE.npz [--png FIG.png]
                                                        (kinematic playback on the G1 MuJoCo model)
    lac eval     [--controller C ...] [--suite paper|envelope] [--workers W] [--out DIR] [--compare S,T]
                                                        (LAC Figs. 3, 4, 6 experiments, contactflow.lac.evaluate)
"""

from __future__ import annotations

import argparse
import json
import logging

log = logging.getLogger(__name__)


def _augment(args) -> int:
    from contactflow.lac.augment import augment

    summary = augment(
        args.out,
        args.episodes,
        seed=args.seed,
        workers=args.workers,
        shard_size=args.shard_size,
        config=args.config,
        frames_path=args.frames,
        progress=not args.no_progress,
    )
    print(
        "accepted {accepted}, decayed {decayed}, failed {failed} of {frames} contact frames; "
        "restarts abandoned below the weak floor {restarts_weak}, exhausted {restarts_exhausted}; "
        "decays by gate {decays_by_gate}; rollouts {rollouts}".format(**summary)
    )
    if summary["episodes_per_min_per_core"] is not None:
        print(f"{summary['episodes_per_min_per_core']:.1f} episodes written (accepted + decayed) / min / core")
    return 0


def _plot(args) -> int:
    from contactflow.lac.inspect import plot_composition

    counts = plot_composition(args.dir, args.out)
    print(json.dumps(counts))
    return 0


def _playback(args) -> int:
    from contactflow.lac.inspect import playback

    info = playback(args.dir, args.episode, args.out, png=args.png)
    print(json.dumps(info))
    return 0


def _eval(args) -> int:
    from pathlib import Path

    from contactflow.lac.evaluate import (compare, format_summary, load_eval_config, merge_tables, plot_eval,
                                          run_eval)
    from contactflow.recording.summary import json_safe

    override = {"trials": args.trials} if args.trials is not None else None
    cfg = load_eval_config(args.config, override)
    pair = tuple(args.compare.split(",", 1)) if args.compare else None
    if pair is not None and len(pair) != 2:
        raise SystemExit("--compare: expected STUDENT,TEACHER")
    table = run_eval(args.controller or ["expert", "pd_stand"], suite=args.suite, cfg=cfg, workers=args.workers,
                     progress=not args.no_progress)
    for f in args.with_table or []:
        merge_tables(table, json.loads(Path(f).read_text(encoding="utf-8")))
    if pair is not None:
        table["comparison"] = compare(table, pair[0], pair[1])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    js = out / f"lac_eval_{args.suite}.json"
    js.write_text(json.dumps(json_safe(table), indent=1) + "\n", encoding="utf-8")
    pngs = [] if args.no_plots else plot_eval(table, out, prefix=f"lac_eval_{args.suite}")
    print(format_summary(table))
    print(f"wrote {js}" + "".join(f", {p}" for p in pngs))
    return 0


def add_parser(subparsers) -> None:
    """Register ``lac`` and its sub-commands on the ``contactflow`` parser."""
    p = subparsers.add_parser("lac", help="LAC compliant-motion augmentation (G1)")
    sub = p.add_subparsers(dest="lac_command", required=True)

    a = sub.add_parser("augment", help="generate augmented episodes as Parquet shards")
    a.add_argument("--episodes", type=int, required=True, help="contact frames (slots) to process")
    a.add_argument("--workers", type=int, default=1, help="worker processes")
    a.add_argument("--out", required=True, help="output directory (resumable)")
    a.add_argument("--seed", type=int, default=0, help="dataset seed")
    a.add_argument("--shard-size", type=int, default=64, help="slots per shard")
    a.add_argument("--config", default=None, help="LAC config YAML (default robots/g1/lac.yaml)")
    a.add_argument("--frames", default=None, help="contact-frame library (.npz/.yaml); synthetic if absent")
    a.add_argument("--no-progress", action="store_true", help="no progress bar")
    a.set_defaults(func=_augment)

    f = sub.add_parser("plot", help="Fig. 2-like plot: events per link, curriculum-bin occupancy")
    f.add_argument("dir", help="dataset directory or shard")
    f.add_argument("--out", required=True, help="output PNG")
    f.set_defaults(func=_plot)

    b = sub.add_parser("playback", help="kinematic playback of one episode on the G1 MuJoCo model")
    b.add_argument("dir", help="dataset directory or shard")
    b.add_argument("--episode", type=int, default=0, help="row index in the dataset")
    b.add_argument("--out", required=True, help="output .npz with the MuJoCo qpos trajectory")
    b.add_argument("--png", default=None, help="also render a few frames to this PNG (needs MUJOCO_GL)")
    b.set_defaults(func=_playback)

    e = sub.add_parser("eval", help="LAC Figs. 3, 4, 6 compliance experiments for teleop-contract controllers")
    e.add_argument("--controller", action="append",
                   help="expert | pd_stand | holosoma | policy:SPEC[:MODEL.onnx] (repeat; default expert and pd_stand)")
    e.add_argument("--suite", default="envelope", help="suite of the config: paper | envelope | quick")
    e.add_argument("--config", default=None, help="evaluation config (default robots/g1/lac_eval.yaml)")
    e.add_argument("--workers", type=int, default=1, help="worker processes")
    e.add_argument("--trials", type=int, default=None, help="trials per (scenario, K) (default: the config's)")
    e.add_argument("--out", default="lac_eval", help="output directory (JSON table + PNG plots)")
    e.add_argument("--compare", default=None, help="STUDENT,TEACHER: per-K ratios of their primary metric")
    e.add_argument("--with-table", action="append", help="also include the controllers of a stored table (same suite)")
    e.add_argument("--no-plots", action="store_true", help="JSON only")
    e.add_argument("--no-progress", action="store_true", help="no progress bar")
    e.set_defaults(func=_eval)


def _main(argv=None) -> int:  # pragma: no cover - for python -m
    parser = argparse.ArgumentParser(prog="contactflow")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    return args.func(args)
