"""How well a LAC student generalises to episodes it was not trained on: a fresh student trained on a
run's aggregate with a share of the episodes held out, its training and held-out loss against the steps.

Run: ``python benchmarks/bench_lac_student_holdout.py RUN --round R [--steps 12500] [--variant KEY=VALUE,...]
[--out FILE.json]`` where ``RUN`` is a ``contactflow lac train`` run folder (``config.yaml``, ``data/``).
Each ``--variant`` (repeatable; none: the run's own configuration) is a comma-separated list of
``student.*`` / ``optim.*`` overrides of the run's configuration, e.g. ``student.actor_dropout=0.1``
or ``optim.weight_decay=1e-4``.

What it does, per variant, in one process on one torch thread: the aggregate of rounds ``0..R`` as
``contactflow lac train`` trains on it (``teacher_ok`` samples, the deploy windows of 64 frames);
``--holdout`` of the episodes (default 10 %, drawn with ``--seed``) left out; a fresh student (the
run's seed, the normaliser of the training samples) trained with the run's optimiser, batch size and
loss weights (``optim.loss``) on batches drawn with replacement, with ``lac train``'s own batch loss
(``dagger.batch_loss``: with a load estimate, its term and the teacher forcing too); every ``--every`` steps
the mean training loss of the last steps and the deployed student's weighted action loss on (at most 20 000
samples of) the held-out episodes (with a load estimate the two differ by the estimate's term); with a load
estimate (``student.wrench_input``) also its error on the held-out samples, per loaded link: the mean norm of
estimate minus true load [N or N m] and the estimate along the true load over the true load (1: unbiased), over
the samples whose true load exceeds 2 N or 0.3 N m (e.g. ``--variant student.force_head_frame=true`` against the
run's own configuration).
The held-out episodes share their dataset rows (reference motions) with training episodes: the gap is
between episodes, not between motions.

A student that generalises has a held-out loss near its training loss; DAgger's own measure of the
same gap is a round's ``on_policy_mse`` against the previous round's training loss (``train_log.json``).
The numbers are losses, not times: they do not depend on the machine's load. The last line printed is
one JSON object with every number.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np


def _override(spec: str) -> dict:
    """``"student.actor_dropout=0.1,optim.weight_decay=1e-4"`` -> nested dict (values parsed as YAML)."""
    import yaml

    out: dict = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        key, _, value = item.partition("=")
        section, _, name = key.partition(".")
        if section not in ("student", "optim") or not name or not value:
            raise SystemExit(f"--variant {item!r}: expected student.KEY=VALUE or optim.KEY=VALUE")
        out.setdefault(section, {})[name] = yaml.safe_load(value)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a `contactflow lac train` run folder")
    ap.add_argument("--round", type=int, required=True, help="the last round of the aggregate")
    ap.add_argument("--steps", type=int, default=12500)
    ap.add_argument("--every", type=int, default=2500)
    ap.add_argument("--holdout", type=float, default=0.1, help="share of the episodes held out")
    ap.add_argument("--seed", type=int, default=1, help="draws the held-out episodes and the batches")
    ap.add_argument("--variant", action="append", default=None)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    import torch
    import yaml

    from contactflow.config import merge
    from contactflow.lac.train import dagger as d
    from contactflow.lac.train.config import load_train_config
    from contactflow.lac.train.env import load_train_spec
    from contactflow.robot import load_robot

    torch.set_num_threads(1)
    for need in [args.run / "config.yaml"] + [args.run / "data" / f"round_{r:03d}.npz" for r in range(args.round + 1)]:
        if not need.is_file():
            raise SystemExit(f"{need}: not found (a `contactflow lac train` run folder with rounds 0-{args.round})")
    base = yaml.safe_load((args.run / "config.yaml").read_text())
    data = d.load_rounds(args.run / "data", args.round)
    ep_of = np.unique(data["first"], return_inverse=True)[1]  # each sample's episode, 0..n_episodes-1
    n_ep = int(ep_of.max()) + 1
    g = np.random.default_rng(args.seed)
    held = np.zeros(n_ep, bool)
    held[g.choice(n_ep, max(1, int(round(args.holdout * n_ep))), replace=False)] = True
    ok = data["ok"].astype(bool)
    train_idx = np.flatnonzero(ok & ~held[ep_of])
    test_idx = np.flatnonzero(ok & held[ep_of])
    test_idx = np.sort(g.choice(test_idx, min(20000, len(test_idx)), replace=False))
    frames, labels = torch.from_numpy(data["frames"]), torch.from_numpy(data["labels"])
    results = []
    for variant in args.variant or [""]:
        cfg = load_train_config(None, merge(base, _override(variant)))
        spec = load_train_spec(cfg.spec, load_robot(cfg.robot))
        H = spec.cfg.history.length
        w = d.loss_weights(cfg, spec)
        torch.manual_seed(cfg.seed)
        model = d.new_student(cfg, spec)
        with torch.no_grad():
            model.set_normalizer(model.features(frames[train_idx[::5]]).numpy(), cfg.student.std_floor)
            model.set_head_normalizer(frames[train_idx[::5]], cfg.student.std_floor)
        opt = torch.optim.Adam(model.parameters(), lr=cfg.optim.lr, weight_decay=cfg.optim.weight_decay)

        aux_t, aux_known = d.aux_tensors(cfg, data)
        true_t, true_known = d.aux_tensors(cfg, data, target="load")  # the true load, whichever the variant regresses

        def windows(idx: np.ndarray) -> torch.Tensor:
            return frames[torch.from_numpy(d.window_index(data["first"], idx, H))]

        def loss_of(idx: np.ndarray) -> torch.Tensor:
            """Held-out: the deployed student's (its estimate's) weighted action error per sample."""
            return (w * (model(windows(idx)) - labels[torch.from_numpy(idx)]) ** 2).mean(dim=1)

        def train_loss(idx: np.ndarray) -> torch.Tensor:
            """Training: the loss `lac train` minimises (dagger.batch_loss)."""
            ti = torch.from_numpy(idx)
            return d.batch_loss(cfg, model, w, windows(idx), labels[ti], *d.aux_rows(aux_t, aux_known, ti), rng=batches)

        def held_out() -> float:
            model.eval()
            with torch.no_grad():
                v = torch.cat([loss_of(test_idx[b:b + 4096]) for b in range(0, len(test_idx), 4096)])
            model.train()
            return float(v.mean())

        def held_out_estimate() -> dict:
            """The load estimate on the held-out samples, per loaded link (module docstring)."""
            model.eval()
            with torch.no_grad():
                est = torch.cat([model.forward_aux(windows(test_idx[b:b + 4096]))[1]
                                 for b in range(0, len(test_idx), 4096)]).numpy()
            model.train()
            true, known = true_t[test_idx].numpy(), true_known[test_idx].numpy()
            out = {}
            for link, kind, j0, unit, scale in d.aux_blocks()[:est.shape[1] // 3]:
                t, e = true[:, j0:j0 + 3] * scale, est[:, j0:j0 + 3] * scale
                m = np.linalg.norm(t, axis=1)
                sel = known[:, j0:j0 + 3].all(axis=1) & (m > (2.0 if unit == "N" else 0.3))
                if sel.sum() < 20:
                    continue
                along = np.sum(e[sel] * t[sel], axis=1) / m[sel]
                out[f"{link} {kind}"] = {"n": int(sel.sum()), "unit": unit,
                                         "error_mean": float(np.linalg.norm(e[sel] - t[sel], axis=1).mean()),
                                         "ratio": float(along.mean() / m[sel].mean())}
            return out

        t0, recent, curve = time.perf_counter(), [], []
        batches = np.random.default_rng([args.seed, 2])
        model.train()
        for step in range(1, args.steps + 1):
            loss = train_loss(batches.choice(train_idx, cfg.optim.batch_size))
            opt.zero_grad()
            loss.backward()
            opt.step()
            recent.append(loss.item())
            if step % args.every == 0 or step == args.steps:
                curve.append({"step": step, "train_loss": float(np.mean(recent)), "held_out_loss": held_out()})
                if model.force_input:
                    curve[-1]["held_out_estimate"] = held_out_estimate()
                recent = []
                est = "".join(f"; {k}: error {v['error_mean']:.2f} {v['unit']}, ratio {v['ratio']:.2f}"
                              for k, v in curve[-1].get("held_out_estimate", {}).items())
                print(f"{variant or 'the run configuration'}: step {step}: train {curve[-1]['train_loss']:.4f}, "
                      f"held-out {curve[-1]['held_out_loss']:.4f}{est}", flush=True)
        results.append({"variant": variant, "curve": curve, "wall_s": time.perf_counter() - t0})
    report = {"run": str(args.run), "round": args.round, "episodes": n_ep, "held_out_episodes": int(held.sum()),
              "train_samples": len(train_idx), "held_out_samples": len(test_idx), "results": results}
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
