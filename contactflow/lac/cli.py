"""``contactflow lac ...``: LAC on the G1: augmentation dataset, teacher and student training, export, evaluation.

Sub-commands:
    lac augment  --episodes N --workers W --out DIR --seed S [--shard-size 64] [--config FILE]
                 [--frames FILE] [--no-progress]
    lac plot     DIR --out FIG.png                      (Fig. 2-like composition plot)
    lac playback DIR --episode I --out FILE.npz [--png FIG.png]
                                                        (kinematic playback on the G1 MuJoCo model)
    lac train-teacher --out DIR [--config FILE] [--profile cpu] [--dataset DIR] [--iterations N]
                 [--seed S] [--resume] [--no-progress]   (the privileged PPO teacher, LAC §III-C)
    lac train    --out DIR [--config FILE] [--dataset DIR] [--workers N] [--resume] [--seed S] [--no-progress]
                                                        (DAgger student from lac_expert, contactflow.lac.train)
    lac train    [--config FILE] [--seed S] --print-config  (the resolved configuration, every key)
    lac export   DIR_OR_CKPT --out FILE.onnx [--average ROUNDS | --best]   (--best: DIR [DIR ...], the best over runs)
                                                        (LAC deploy ONNX of a training checkpoint)
    lac eval     [--controller C ...] [--suite paper|envelope|graph|quick] [--workers W] [--trials N] [--seed S]
                 [--out DIR] [--compare S,T]
                                                        (LAC Figs. 3, 4, 6 experiments, contactflow.lac.evaluate)
"""

from __future__ import annotations

import argparse
import json
import logging

from contactflow.paths import OneFileAction

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
    import dataclasses
    from pathlib import Path

    from contactflow.errors import ConfigError
    from contactflow.lac.evaluate import (check_same_experiments, compare, experiments, format_summary,
                                          load_eval_config, merge_tables, plot_eval, run_eval)
    from contactflow.recording.summary import json_safe

    override = {k: v for k, v in (("trials", args.trials), ("seed", args.seed)) if v is not None} or None
    cfg = load_eval_config(args.config, override)
    pair = tuple(args.compare.split(",", 1)) if args.compare else None
    if pair is not None and len(pair) != 2:
        raise SystemExit("--compare: expected STUDENT,TEACHER")
    if not args.no_plots:  # checked before any episode runs: the plots are written last
        from contactflow.cli import missing_extra_message

        try:
            import matplotlib  # noqa: F401
        except ModuleNotFoundError as exc:
            raise SystemExit(f"contactflow lac eval: the plots need matplotlib ({missing_extra_message(exc)}); "
                             "or run with --no-plots (the JSON table needs nothing more)") from None
    controllers = args.controller or ["expert", "pd_stand"]
    stored = [json.loads(Path(f).read_text(encoding="utf-8")) for f in args.with_table or []]
    runs = experiments(cfg, args.suite) if stored else {}
    for f, t in zip(args.with_table or [], stored):  # before any episode runs: a stored table of other experiments
        try:
            check_same_experiments(t, args.suite, dataclasses.asdict(cfg.profile), runs, skip=controllers,
                                   base_stiffness=cfg.base_stiffness)
        except ConfigError as exc:
            raise ConfigError(f"--with-table {f}: {exc}") from None
    if pair is not None:  # checked before any episode runs (a teacher suite takes minutes)
        known = list(dict.fromkeys([*controllers, *(c for t in stored for c in t.get("results", {}))]))
        for name in pair:
            if name not in known:
                raise SystemExit(f"--compare: {name!r} is neither a --controller of this run nor in a --with-table; "
                                 f"known: {', '.join(known)}")
    table = run_eval(controllers, suite=args.suite, cfg=cfg, workers=args.workers, progress=not args.no_progress)
    for t in stored:
        merge_tables(table, t)
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


def _train_teacher(args) -> int:
    from contactflow.lac.train.ppo import load_ppo_config, train_teacher

    over = {"run": {"seed": args.seed}} if args.seed is not None else None
    cfg = load_ppo_config(args.config, profile=args.profile, overrides=over)
    s = train_teacher(cfg, args.out, dataset=args.dataset, iterations=args.iterations, resume=args.resume,
                      progress=not args.no_progress)
    print(f"{s['env_steps']} env steps in {s['wall_s']:.1f} s ({s['env_steps_per_s']:.0f} steps/s; "
          f"rollout {s['rollout_s_per_iter']:.3f} s + PPO update {s['update_s_per_iter']:.3f} s per iteration); "
          f"curriculum level {s['curriculum']}; wrote {s['final']}")
    return 0


def _train(args) -> int:
    from contactflow.errors import ConfigError
    from contactflow.lac.train.config import config_yaml, load_train_config

    cfg = load_train_config(args.config, {"seed": args.seed} if args.seed is not None else None)
    if args.print_config:
        unused = [flag for flag, given in (("--out", args.out is not None), ("--dataset", args.dataset is not None),
                                          ("--resume", args.resume)) if given]
        if unused:  # a run's own configuration is its OUT/config.yaml; --print-config never reads or writes a run
            raise ConfigError(f"lac train: --print-config prints the configuration of --config and --seed only; drop "
                              f"{', '.join(unused)} (a run's configuration is OUT/config.yaml)")
        print(config_yaml(cfg), end="")
        return 0
    if args.out is None:
        raise ConfigError("lac train: --out DIR is required (the run directory; not with --print-config)")
    from contactflow.lac.train.dagger import train

    s = train(cfg, args.out, dataset=args.dataset, workers=args.workers, resume=args.resume, progress=not args.no_progress)
    print(f"student exported to {s['policy']} (train_log.json, loss.png, checkpoints/ in {s['out']})")
    if s.get("best_round") is not None:
        print(f"the validation suite scored round {s['best_round']} best: contactflow lac export {s['out']} --best --out FILE.onnx")
    return 0


def _rounds(text: str) -> list[int]:
    """``"10,11"`` or ``"8-11"`` (or both, comma-separated) -> sorted round numbers."""
    out = set()
    try:
        for part in text.split(","):
            a, _, b = part.strip().partition("-")
            out.update(range(int(a), int(b) + 1) if b else [int(a)])
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected rounds like 10,11 or 8-11, got {text!r}") from None
    if not out or min(out) < 0:
        raise argparse.ArgumentTypeError(f"expected rounds like 10,11 or 8-11, got {text!r}")
    return sorted(out)


def _export(args) -> int:
    from contactflow.lac.train.dagger import export_checkpoint

    from contactflow.lac.train.student import read_metadata

    run, chosen = args.run, ""  # export_checkpoint takes the list (several runs only with --best)
    if args.best:  # the checkpoint chosen, named in the message
        from contactflow.lac.train.dagger import best_checkpoint

        run = best_checkpoint(args.run)
        chosen = (f" ({run}), the one the {len(args.run)} runs' validation suites scored best"
                  if len(args.run) > 1 else ", the one the run's validation suite scored best")
    path = export_checkpoint(run, args.out, average=args.average or ())
    meta = read_metadata(path)
    which = (f"the weights of rounds {meta['train_rounds_averaged']} averaged" if meta.get("train_rounds_averaged")
             else f"round {meta.get('train_round')}" + chosen)
    print(f"wrote {path}: {which}")
    return 0


def _ensemble(args) -> int:
    from contactflow.lac.train.student import ensemble_onnx

    print(f"wrote {ensemble_onnx(args.members, args.out)}")
    return 0


def add_parser(subparsers) -> None:
    """Register ``lac`` and its sub-commands on the ``contactflow`` parser."""
    p = subparsers.add_parser("lac", help="LAC (G1): augmentation, training (teacher, student), export, evaluation")
    sub = p.add_subparsers(dest="lac_command", required=True)

    a = sub.add_parser("augment", help="generate augmented episodes as Parquet shards")
    a.add_argument("--episodes", type=int, required=True, help="contact frames (slots) to process")
    a.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    a.add_argument("--out", required=True, help="output directory (resumable)")
    a.add_argument("--seed", type=int, default=0, help="dataset seed (default 0)")
    a.add_argument("--shard-size", type=int, default=64, help="slots per shard (default 64)")
    a.add_argument("--config", default=None, action=OneFileAction, help="LAC config YAML (default robots/g1/lac.yaml)")
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
    e.add_argument("--suite", default="envelope", help="suite of the config: paper | envelope | graph | quick (default envelope)")
    e.add_argument("--config", default=None, action=OneFileAction, help="evaluation config: its keys layered over robots/g1/lac_eval.yaml (a file needs only the keys it changes)")
    e.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    e.add_argument("--trials", type=int, default=None, help="trials per (scenario, K) (default: the config's)")
    e.add_argument("--seed", type=int, default=None,
                   help="seed of the trials' initial perturbations (default: the config's, 0; lac train's validation suite uses 1)")
    e.add_argument("--out", default="lac_eval", help="output directory (JSON table + PNG plots; default lac_eval)")
    e.add_argument("--compare", default=None, help="STUDENT,TEACHER: per-K ratios of their primary metric")
    e.add_argument("--with-table", action="append", help="also include the controllers of a stored table (same suite)")
    e.add_argument("--no-plots", action="store_true", help="JSON only")
    e.add_argument("--no-progress", action="store_true", help="no progress bar")
    e.set_defaults(func=_eval)

    t = sub.add_parser("train-teacher", help="the privileged PPO teacher of LAC §III-C (stable-baselines3)")
    t.add_argument("--config", default=None, action=OneFileAction, help="teacher config: its keys layered over robots/g1/lac_ppo.yaml (a file needs only the keys it changes)")
    t.add_argument("--profile", default=None, help="a profile of the config merged over it (cpu: the test's)")
    t.add_argument("--dataset", default=None, help="augmentation dataset directory (default: env.dataset)")
    t.add_argument("--out", required=True, help="run directory (checkpoints, progress.csv, final.zip)")
    t.add_argument("--iterations", type=int, default=None, help="PPO iterations (default: the config's)")
    t.add_argument("--seed", type=int, default=None, help="run seed (default: the config's)")
    t.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in --out")
    t.add_argument("--no-progress", action="store_true", help="no progress bar")
    t.set_defaults(func=_train_teacher)

    d = sub.add_parser("train", help="DAgger student from the model-based teacher, LAC's deploy format (needs [train])")
    d.add_argument("--config", default=None, action=OneFileAction, help="training config: its keys layered over robots/g1/lac_train.yaml (the shipped recipe; a run's own config.yaml holds every key)")
    d.add_argument("--out", default=None, help="run directory (data, checkpoints, student.onnx, logs, loss.png); required except with --print-config")
    d.add_argument("--dataset", default=None, help="augmentation dataset directory (default: generated into OUT/dataset)")
    d.add_argument("--workers", type=int, default=1, help="rollout worker processes (default 1)")
    d.add_argument("--resume", action="store_true", help="continue after the last complete round in --out")
    d.add_argument("--seed", type=int, default=None, help="training seed (default: the config's)")
    d.add_argument("--no-progress", action="store_true", help="no progress bar")
    d.add_argument("--print-config", action="store_true",
                   help="print the resolved configuration (--config's keys over the shipped file, --seed) as the run's config.yaml would hold it, and exit (refused with --out, --dataset or --resume: a run's configuration is OUT/config.yaml)")
    d.set_defaults(func=_train)

    x = sub.add_parser("export", help="export a training checkpoint to LAC's deploy ONNX")
    x.add_argument("run", nargs="+", help="run directory (its latest checkpoint) or a checkpoints/round_XXX.pt file; "
                                          "with --best one or more run directories (e.g. the seeds of a recipe)")
    x.add_argument("--out", required=True, help="output .onnx")
    which = x.add_mutually_exclusive_group()
    which.add_argument("--average", type=_rounds, default=None, metavar="ROUNDS",
                       help="average the weights of these rounds of the run directory, e.g. 10,11 or 8-11 (default: none, the checkpoint as it is)")
    which.add_argument("--best", action="store_true",
                       help="the round of the run directory its validation suite scored best (validation.suite), not the latest; "
                            "of several run directories, the best round over them all")
    x.set_defaults(func=_export)

    e = sub.add_parser("ensemble", help="one deploy ONNX whose action is the mean of several exported students' (needs [train])")
    e.add_argument("members", nargs="+", help="two or more students exported by `contactflow lac export` (.onnx)")
    e.add_argument("--out", required=True, help="output .onnx")
    e.set_defaults(func=_ensemble)


def _main(argv=None) -> int:  # pragma: no cover - for python -m
    from contactflow.paths import OnceArgumentParser

    parser = OnceArgumentParser(prog="contactflow")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    return args.func(args)
