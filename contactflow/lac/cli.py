"""``contactflow lac ...``: augmentation dataset generation and inspection.

Sub-commands:
    lac augment  --episodes N --workers W --out DIR --seed S [--shard-size 64] [--config FILE]
                 [--frames FILE] [--no-progress]
    lac plot     DIR --out FIG.png                      (Fig. 2-like composition plot)
    lac playback DIR --episode I --out FILE.npz [--png FIG.png]
                                                        (kinematic playback on the G1 MuJoCo model)
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


def _main(argv=None) -> int:  # pragma: no cover - for python -m
    parser = argparse.ArgumentParser(prog="contactflow")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    return args.func(args)
