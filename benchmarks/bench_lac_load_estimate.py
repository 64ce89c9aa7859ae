"""How well a LAC student's load estimate (``student.wrench_input``, LAC's adaptation module) knows the load, and
what its actor does with the true load instead.

Run: ``python benchmarks/bench_lac_load_estimate.py CHECKPOINT.pt [--data RUN/data --round R] [--suite envelope]
[--config LAYER.yaml] [--scenario NAME ...] [--trials 1] [--true-load] [--out FILE.json]`` where ``CHECKPOINT.pt`` is a ``contactflow lac
train`` checkpoint (``RUN/checkpoints/round_RRR.pt``) of a student with a load estimate.

What it measures, in one process on one torch thread (the checkpoint's torch network, whose actions are the exported
ONNX graph's to 1e-4: ``tests/test_lac_train.py``):

- with ``--data``: on 30 000 samples of the rounds ``0..R`` recorded there (the student's own training data), the
  estimate the actor takes along the true load's direction over the true load's magnitude (1: unbiased), per loaded
  link and band of magnitude, and for the downward hand loads (more than 70 % of the force downward); beside it
  (``analytic``) the same of the teacher's arm estimator computed from the frames
  (:mod:`contactflow.lac.train.arm_statics`, what ``student.arm_estimate: analytic`` gives the actor) and of the
  teacher's own estimate as the rounds recorded it (``teacher``), for the hands' forces and couples;
- on the evaluation's scenarios (``robots/g1/lac_eval.yaml``, the suite's loads, the evaluation's episodes:
  :func:`contactflow.lac.evaluate.run_episode`), per swept K: the load applied to the scenario's link (at each
  policy tick the one the simulator applied during the step before: a hold's first tick reads the ramp's last
  value) and the estimate over the hold (its component along the load and its norm, in N or N m), and the scenario's metric
  (displacement in cm or attitude in deg) with the decreasing verdict of ``lac eval``;
- with ``--data``, also the student's *copy gain* (:func:`copy_gain`) on 1500 of those samples with a hand force above
  3 N: the share of a change of the newest frame's last arm action (a random vector, std 0.1 action units) that its
  next arm action keeps, ``<a(x') - a(x), delta> / |delta|^2`` over the arm joints, median overall and by the loaded
  hand's K. The teacher's label does not take its last action (0); a student that holds its last target keeps all of
  it (1): on the teacher's own states such a student fits the labels as well as one that restores (the copycat
  problem of behaviour cloning from observation histories, Wen et al., NeurIPS 2020), which DART's noise
  (``dagger.arm_action_noise``) is for;
- with ``--true-load``: the same episodes again with the actor given the TRUE load (what the training's teacher
  forcing gives it with ``optim.aux_target: load``; a student of ``aux_target: teacher`` was taught on the teacher's
  estimate instead): whether a better estimate alone would make the student follow K.

The numbers are of the simulation, not of the machine. The last line printed is one JSON object with every number.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np


def _student(ckpt: Path):
    from contactflow.config import load_config
    from contactflow.errors import ConfigError
    from contactflow.lac.train.config import TrainConfig
    from contactflow.lac.train.dagger import load_checkpoint, new_student
    from contactflow.lac.train.env import load_train_spec
    from contactflow.robot import load_robot

    ck = load_checkpoint(ckpt)
    cfg = load_config(TrainConfig, ck["config"], source=ck["path"])
    if cfg.student.wrench_input == "none":
        raise ConfigError(f"{ckpt}: student.wrench_input is none: the student has no load estimate")
    spec = load_train_spec(cfg.spec, load_robot(cfg.robot))
    model = new_student(cfg, spec)
    model.load_state_dict(ck["model"])
    model.eval()
    return cfg, spec, model


def on_training_data(cfg, spec, model, data_dir: Path, upto: int, n: int = 30000, seed: int = 0) -> dict:
    """The estimate against the true load on samples of the recorded rounds ``0..upto`` (module docstring)."""
    import torch

    from contactflow.lac.train.dagger import aux_blocks, aux_target, aux_tensors, load_rounds, window_index

    data = load_rounds(data_dir, upto)
    aux_t, known = aux_tensors(cfg, data, target="load")  # the true load, whichever the student regressed
    ok = np.flatnonzero(data["ok"] & known.all(dim=1).numpy())
    if len(ok) == 0:
        raise SystemExit(f"{data_dir}: no sample of rounds 0-{upto} records the true load")
    idx = np.random.default_rng(seed).choice(ok, min(n, len(ok)), replace=False)
    from contactflow.lac.expert import load_expert_config
    from contactflow.lac.train.arm_statics import ArmStatics, arm_statics_params
    from contactflow.robot import load_robot

    expert_cfg = load_expert_config(cfg.expert_config)
    statics = ArmStatics(arm_statics_params(load_robot(cfg.robot), spec, expert_cfg))
    est, analytic = [], []
    with torch.no_grad():
        for b in range(0, len(idx), 1000):
            i = idx[b:b + 1000]
            x = torch.from_numpy(data["frames"][window_index(data["first"], i, spec.cfg.history.length)])
            est.append(model.load_taken(x, model.forward_aux(x)[1]).numpy())
            analytic.append(statics(x).numpy())  # SI: hands' forces [N], then couples [N m]
    est, true = np.concatenate(est), aux_t[idx].numpy()
    analytic = np.concatenate(analytic)
    teacher = aux_target(cfg, data, "teacher")[idx] if cfg.student.wrench_input == "wrench" else None
    arm_cols = {(link, kind): off + 3 * a for a, link in enumerate(expert_cfg.arm_links)  # ArmStatics' columns
                for kind, off in (("force", 0), ("couple", 6))}

    def ratios(t, e, unit) -> dict:
        m = np.linalg.norm(t, axis=1)
        bands = {}
        for lo, hi in ([(2.0, 6.0), (6.0, 12.0)] if unit == "N" else [(0.3, 0.8), (0.8, 2.0)]):
            sel = (m >= lo) & (m < hi) & np.isfinite(e).all(axis=1)
            if sel.sum() < 20:
                continue
            along = np.sum(e[sel] * t[sel], axis=1) / m[sel]
            bands[f"[{lo:g}, {hi:g}) {unit}"] = {"n": int(sel.sum()), "true_mean": float(m[sel].mean()),
                                                "estimate_along_mean": float(along.mean()),
                                                "ratio": float(along.mean() / m[sel].mean())}
        return bands

    out = {}
    for link, kind, j0, unit, unit_scale in aux_blocks()[:true.shape[1] // 3]:
        name = f"{link} {kind}"
        t, e = true[:, j0:j0 + 3] * unit_scale, est[:, j0:j0 + 3] * unit_scale
        entry = {"unit": unit, "bands": ratios(t, e, unit)}
        if (link, kind) in arm_cols:
            c = arm_cols[(link, kind)]
            entry["analytic"] = ratios(t, analytic[:, c:c + 3], unit)
            if teacher is not None:
                entry["teacher"] = ratios(t, teacher[:, j0:j0 + 3] * unit_scale, unit)
        if kind == "force" and "torso" not in link:
            m = np.linalg.norm(t, axis=1)
            sel = (m > 4.0) & (t[:, 2] < -0.7 * m)
            if sel.sum() >= 10:
                along = np.sum(e[sel] * t[sel], axis=1) / m[sel]
                entry["downward"] = {"n": int(sel.sum()), "ratio": float(along.mean() / m[sel].mean())}
        out[name] = entry
    def hand_forces(i):  # (len(i), 2) the two hands' true force magnitudes [N]
        return np.linalg.norm(data["force"][i, 0:6].reshape(-1, 2, 3), axis=2)

    loaded = idx[hand_forces(idx).max(axis=1) > 3.0]
    cg = None  # too few loaded samples
    if len(loaded) >= 20:
        sub = np.sort(np.random.default_rng(seed).choice(loaded, min(1500, len(loaded)), replace=False))
        x = data["frames"][window_index(data["first"], sub, spec.cfg.history.length)]
        hand = np.argmax(hand_forces(sub), axis=1)
        k = x[np.arange(len(sub)), -1, model.k0 + hand]  # the loaded hand's K_lin (the channels' first two: the arms)
        cg = copy_gain(spec, model, x, k, seed)
    return {"rounds": [0, upto], "samples": int(len(idx)), "links": out, "copy_gain": cg}


def copy_gain(spec, model, x: np.ndarray, k: np.ndarray, seed: int = 0, std: float = 0.1) -> dict:
    """The share of a change of the newest frame's last arm action that the student keeps (module docstring).

    Args:
        spec: the deploy spec; model: the student (torch). x: (N, history, frame_dim) raw windows.
        k: (N,) the loaded hand's commanded K [N/m], for the bands. seed, std: the changes' draw [action units].

    Returns:
        ``{"median": g, "bands": {"[lo, hi) N/m": {"n": n, "median": g}}}``.
    """
    import torch

    from contactflow.lac.train.student import action_columns, last_action_map

    W = last_action_map(spec, "arms", key="copy_gain")
    arms = action_columns(spec, "arms", key="copy_gain")
    rows = [int(np.flatnonzero(W[:, i])[0]) for i in arms]
    delta = np.random.default_rng(seed).normal(0.0, std, (len(x), len(arms))).astype(np.float32)
    xp = np.array(x, np.float32, copy=True)
    xp[:, -1, rows] += delta / W[rows, arms]  # a frame value is the action times 1 / W
    with torch.no_grad():
        a, ap = (torch.cat([model(torch.from_numpy(np.ascontiguousarray(v[b:b + 500]))) for b in range(0, len(v), 500)])
                 .numpy()[:, arms] for v in (np.asarray(x, np.float32), xp))
    g = np.sum((ap - a) * delta, axis=1) / np.sum(delta * delta, axis=1)
    bands = {}
    for lo, hi in ((10, 30), (30, 100), (100, 250), (250, 501)):
        sel = (k >= lo) & (k < hi)
        if sel.sum() >= 20:
            bands[f"[{lo}, {hi}) N/m"] = {"n": int(sel.sum()), "median": float(np.median(g[sel]))}
    return {"median": float(np.median(g)), "bands": bands}


class _TorchStudent:
    """The student's torch network behind the deploy spec's runner (the same observation frames), recording its
    estimate and the load applied in the simulator each tick; ``true_load``: the actor gets the applied load."""

    def __init__(self, deploy_spec, model, sim, true_load: bool):
        from contactflow.lac.evaluate import PolicyController
        from contactflow.lac.train.dagger import aux_blocks

        self.c = PolicyController(deploy_spec)
        self.c.runner.spec.model.run = self._run
        self.model, self.sim, self.true_load = model, sim, true_load
        n = model.aux[-1].out_features // 3  # the blocks this student estimates
        self.blocks = [(sim.model.body(link).id, slice(0, 3) if kind == "force" else slice(3, 6), scale)
                       for link, kind, _, _, scale in aux_blocks()[:n]]
        self.ticks: list[tuple[float, np.ndarray, np.ndarray]] = []

    def _applied(self) -> np.ndarray:  # aux units, world axes (as the rounds record them)
        xf = self.sim.data.xfrc_applied
        return np.concatenate([xf[body, part] / scale for body, part, scale in self.blocks]).astype(np.float32)

    def _run(self, x):
        import torch

        applied = self._applied()
        with torch.no_grad():
            xt = torch.from_numpy(np.asarray(x, np.float32))
            if self.true_load:
                a, est = self.model.forward_aux(xt, torch.from_numpy(applied[None]), torch.ones(1, dtype=torch.bool))
            else:
                a, est = self.model.forward_aux(xt)
            est = self.model.load_taken(xt, est)  # what the actor takes (the head's, or the arm estimator's)
        self.ticks.append((float(self.sim.data.time), applied, est[0].numpy()))
        return a.numpy()

    def reset(self, sensors) -> None:
        self.ticks.clear()
        self.c.reset(sensors)

    def step(self, sensors, command):
        return self.c.step(sensors, command)


def on_scenarios(ckpt: Path, model, cfg, suite: str, scenarios: list[str] | None, trials: int, true_load: bool) -> dict:
    """The evaluation's episodes (``cfg``: :func:`contactflow.lac.evaluate.load_eval_config`) with the estimate
    recorded (module docstring)."""
    import tempfile

    from contactflow.lac.evaluate import Job, monotonic_verdict, run_episode, suite_scenarios
    from contactflow.lac.train.dagger import aux_blocks, export_checkpoint
    from contactflow.policy.spec import load_policy_spec
    from contactflow.robot import load_robot
    from contactflow.sim.pd_robot import PDRobotSim, PDSimConfig

    robot = load_robot("g1")
    sim = PDRobotSim(PDSimConfig(), robot)
    with tempfile.TemporaryDirectory() as tmp:  # the spec loads a model file: the checkpoint's own export
        onnx = export_checkpoint(ckpt, Path(tmp) / "student.onnx")
        spec = load_policy_spec("lac", robot, model=onnx)
    ctrl = _TorchStudent(spec, model, sim, true_load)
    pr = cfg.profile
    hold = (pr.t0_s + pr.ramp_s, pr.t0_s + pr.ramp_s + pr.hold_s)
    blocks = {(link, kind): (j0, unit, scale) for link, kind, j0, unit, scale in aux_blocks()}
    out = {}
    for s in scenarios or suite_scenarios(cfg, suite):
        sc = cfg.scenarios[s]
        kind = "couple" if sc.couple_nm else "force"
        j0, unit, scale = blocks[(sc.link, kind)]
        rows = []
        for k in cfg.k_grids[sc.grid]:
            metric, applied, along, norm, falls = [], [], [], [], 0
            for t in range(trials):
                r = run_episode(Job("student", suite, s, float(k), t), cfg, robot, sim, ctrl)
                falls += int(r["fell"])
                metric.append(np.nan if r["fell"] else (100.0 * r["displacement_m"] if sc.metric == "displacement"
                                                        else r["attitude_deg"]))
                win = [(a, e) for (tt, a, e) in ctrl.ticks if hold[0] <= tt < hold[1]]
                if win:
                    a = np.mean([w[0][j0:j0 + 3] for w in win], axis=0) * scale
                    e = np.mean([w[1][j0:j0 + 3] for w in win], axis=0) * scale
                    applied.append(float(np.linalg.norm(a)))
                    along.append(float(e @ a / max(np.linalg.norm(a), 1e-9)))
                    norm.append(float(np.linalg.norm(e)))
            rows.append({"k": k, "metric": float(np.nanmean(metric)) if not np.all(np.isnan(metric)) else None,
                         "falls": falls, "applied": float(np.mean(applied)) if applied else None,
                         "estimate_along": float(np.mean(along)) if along else None,
                         "estimate_norm": float(np.mean(norm)) if norm else None})
        v = monotonic_verdict([r["k"] for r in rows], [np.nan if r["metric"] is None else r["metric"] for r in rows],
                              [r["falls"] for r in rows], cfg.monotonic_tol)
        out[s] = {"metric": sc.metric, "metric_unit": "cm" if sc.metric == "displacement" else "deg",
                  "load_unit": unit, "rows": rows, "decreasing": v["decreasing"]}
    return out


def main() -> None:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint", type=Path, help="a `contactflow lac train` checkpoint (RUN/checkpoints/round_RRR.pt)")
    ap.add_argument("--data", type=Path, default=None, help="a run's data/ folder: the estimate on its rounds")
    ap.add_argument("--round", type=int, default=None, help="the last round of --data")
    ap.add_argument("--suite", default="envelope")
    ap.add_argument("--config", default=None, help="evaluation config: its keys layered over robots/g1/lac_eval.yaml")
    ap.add_argument("--scenario", action="append", default=None, help="one scenario of the suite (repeat; default all)")
    ap.add_argument("--trials", type=int, default=1)
    ap.add_argument("--true-load", action="store_true", help="also run the episodes with the actor given the true load")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if (args.data is None) != (args.round is None):
        raise SystemExit("--data and --round go together")
    from contactflow.lac.evaluate import load_eval_config

    torch.set_num_threads(1)
    eval_cfg = load_eval_config(args.config)
    cfg, spec, model = _student(args.checkpoint)
    result: dict = {"checkpoint": str(args.checkpoint), "suite": args.suite, "trials": args.trials}
    t0 = time.perf_counter()
    if args.data is not None:
        result["training_data"] = on_training_data(cfg, spec, model, args.data, args.round)
        for link, e in result["training_data"]["links"].items():
            bands = "; ".join(f"{b}: {v['ratio']:.2f} (n {v['n']})" for b, v in e["bands"].items())
            down = f"; downward {e['downward']['ratio']:.2f} (n {e['downward']['n']})" if "downward" in e else ""
            other = "".join(f"; {who}: " + ", ".join(f"{v['ratio']:.2f}" for v in e[who].values())
                            for who in ("analytic", "teacher") if who in e)
            print(f"training data, {link}: estimate along / true load: {bands}{down}{other}")
        cg = result["training_data"]["copy_gain"] or {"median": float("nan"), "bands": {}}
        print(f"copy gain (share of a change of the last arm action kept, loaded hands): median {cg['median']:.2f}; "
              + "; ".join(f"K {b}: {v['median']:.2f} (n {v['n']})" for b, v in cg["bands"].items()))
    modes = [("estimate", False)] + ([("true_load", True)] if args.true_load else [])
    for mode, true_load in modes:
        res = on_scenarios(args.checkpoint, model, eval_cfg, args.suite, args.scenario, args.trials, true_load)
        result[mode] = res
        print(f"actor given the {'TRUE load' if true_load else 'estimate'}: "
              f"{sum(e['decreasing'] for e in res.values())} of {len(res)} scenarios decreasing")
        for s, e in res.items():
            cells = " / ".join("fell" if r["metric"] is None else f"{r['metric']:.2f}" for r in e["rows"])
            est = " / ".join("-" if r["estimate_along"] is None else f"{r['estimate_along']:.2f}" for r in e["rows"])
            applied = next((r["applied"] for r in e["rows"] if r["applied"] is not None), float("nan"))
            print(f"  {s}: {e['metric']} [{e['metric_unit']}] {cells}; {'decreasing' if e['decreasing'] else 'NOT decreasing'}; "
                  f"load {applied:.2f} {e['load_unit']}, estimate along it {est}")
    result["wall_s"] = time.perf_counter() - t0
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
