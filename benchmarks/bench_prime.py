"""PRIME benchmark: Go2 +3 kg trunk payload in MuJoCo (shared/reference/prime.md §6).

    python benchmarks/bench_prime.py                  # squat/sway 3 s @ 100 Hz (T = 300), ID and no-ID
    python benchmarks/bench_prime.py --long           # + a 1000-step problem (wall time vs the paper's 200 s)
    python benchmarks/bench_prime.py --motion trot

Steps: simulate in MuJoCo (seeded noise, documented in contactflow.prime.datagen.NoiseConfig),
write an ordinary recording, read it back through contactflow.prime.io (the estimator never sees
the ground-truth streams), solve PRIME with and without identification of the trunk, and report
the identified mass/COM, force RMSE against the MuJoCo contact forces, the MAP cost, the per-node
step + derivative time (paper: 80 us in C++) and the solve wall time. Results go to
``benchmarks/out/prime_<motion>.json``; ``--plot`` writes ``docs/prime_go2_forces.png``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from contactflow.prime.datagen import GenerateConfig, simulate_mujoco, write_recording  # noqa: E402
from contactflow.prime.fie import PrimeConfig, PrimeEstimator  # noqa: E402
from contactflow.prime.io import ground_truth_forces, measurements_from_recording  # noqa: E402
from contactflow.prime.model import load_prime_robot  # noqa: E402
from contactflow.recording.store import read_recording  # noqa: E402

PAPER_NODE_US = 80.0
PAPER_1000_STEP_S = 200.0


def node_timing(est: PrimeEstimator, meas, n: int = 100) -> dict:
    """Mean smoothed step and IFT-derivative time per node over the measured trajectory [us].

    Also times pinocchio's ``computeABADerivatives`` in the same run, so that the node time can be
    read as a machine-independent multiple of it (the machine is shared and loaded).
    """
    import pinocchio as pin

    dyn = est.dyn
    m, d = dyn.model, dyn.model.createData()
    ta = time.perf_counter()
    for k in range(200):
        pin.computeABADerivatives(m, d, meas.q[k % meas.T], meas.v[k % meas.T], np.r_[np.zeros(6), meas.tau[k % meas.T]])
    aba_us = (time.perf_counter() - ta) / 200 * 1e6
    ks = np.linspace(0, meas.T - 1, min(n, meas.T)).astype(int)
    th = dyn.theta_nominal if dyn.ntheta else None
    results = []
    t0 = time.perf_counter()
    for k in ks:
        results.append(dyn.step(meas.q[k], meas.v[k], meas.tau[k], th))
    t1 = time.perf_counter()
    warm = []
    t2 = time.perf_counter()
    for k, r in zip(ks, results):
        warm.append(dyn.step(meas.q[k], meas.v[k], meas.tau[k], th, v_guess=r.v_next))
    t3 = time.perf_counter()
    for r in results:
        dyn.derivatives(r)
    t4 = time.perf_counter()
    m = len(ks)
    return {
        "step_cold_us": (t1 - t0) / m * 1e6,
        "step_warm_us": (t3 - t2) / m * 1e6,
        "derivatives_us": (t4 - t3) / m * 1e6,
        "step_plus_derivatives_us": ((t1 - t0) + (t4 - t3)) / m * 1e6,
        "newton_iters_cold": float(np.mean([r.newton_iters for r in results])),
        "pin_aba_derivatives_us": aba_us,
        "step_plus_derivatives_in_aba_derivative_calls": ((t1 - t0) + (t4 - t3)) / m * 1e6 / aba_us,
    }


def run_case(pr, rec, identify: bool, max_samples: int, max_iter: int, gt=True) -> dict:
    cfg = PrimeConfig(identify=identify, max_samples=max_samples, max_iter=max_iter)
    meas, info = measurements_from_recording(rec, pr, cfg)
    est = PrimeEstimator(pr, cfg)
    res = est.solve(meas)
    out = {"identify": identify, "T": meas.T, "cost": res.cost, "iterations": res.iterations,
           "solve_time_s": res.solve_time_s, "defect": res.defect_norm,
           "time_per_iteration_s": res.solve_time_s / max(res.iterations, 1)}
    if identify:
        out["trunk"] = res.body_parameters()["root_joint"]
    if gt:
        f_gt = ground_truth_forces(rec, pr, info["seq"])
        err = res.force_W - f_gt
        out["force_rmse_3d_n"] = float(np.sqrt(np.mean(np.sum(err**2, axis=2))))
        out["force_rmse_fz_n"] = float(np.sqrt(np.mean(err[:, :, 2] ** 2)))
        out["_forces"] = (res.t, res.force_W, f_gt)
    out["_timing_est"] = (est, meas)
    return out


def plot_forces(path: Path, t, f_id, f_noid, f_gt, names, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(names), 1, figsize=(9, 2.0 * len(names)), sharex=True)
    for i, ax in enumerate(axes):
        ax.plot(t[1:], f_gt[:, i, 2], "k-", lw=1.5, label="MuJoCo (ground truth)")
        ax.plot(t[1:], f_id[:, i, 2], "C0-", lw=1.0, label="PRIME with ID")
        if f_noid is not None:
            ax.plot(t[1:], f_noid[:, i, 2], "C3--", lw=0.8, label="PRIME without ID")
        ax.set_ylabel(f"{names[i]} F_z [N]")
        ax.grid(alpha=0.3)
    axes[0].legend(loc="upper right", fontsize=8)
    axes[0].set_title(title)
    axes[-1].set_xlabel("t [s]")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--motion", default="squat", choices=["squat", "trot"])
    p.add_argument("--duration", type=float, default=3.0, help="simulated seconds [s]")
    p.add_argument("--max-iter", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--long", action="store_true", help="also time a 1000-step problem")
    p.add_argument("--no-baseline", action="store_true", help="skip the no-identification solve")
    p.add_argument("--plot", action="store_true", help="write docs/prime_go2_forces.png")
    p.add_argument("--out", default=str(REPO / "benchmarks" / "out"))
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    pr = load_prime_robot("go2")
    report: dict = {"robot": "go2", "motion": args.motion}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        dur = (max(args.duration, 10.0) if args.long else args.duration) + 0.02  # T full steps
        run = simulate_mujoco(pr, GenerateConfig(motion=args.motion, duration_s=dur, seed=args.seed))
        rec_dir = write_recording(pr, run, Path(tmp) / "go2_run")
        report["generate_s"] = time.perf_counter() - t0
        report["truth"] = run.info["trunk_true"]
        report["nominal"] = run.info["trunk_nominal"]
        rec = read_recording(rec_dir)
        T = int(round(args.duration * 100))
        with_id = run_case(pr, rec, True, T, args.max_iter)
        report["timing_per_node"] = node_timing(*with_id.pop("_timing_est"))
        f_id = with_id.pop("_forces")
        report["with_id"] = with_id
        f_noid = None
        if not args.no_baseline:
            no_id = run_case(pr, rec, False, T, args.max_iter)
            no_id.pop("_timing_est")
            f_noid = no_id.pop("_forces")
            report["without_id"] = no_id
        if args.long:
            long = run_case(pr, rec, True, 1000, args.max_iter)
            long.pop("_timing_est")
            long.pop("_forces")
            report["long_1000"] = long
    tn = report["timing_per_node"]["step_plus_derivatives_us"]
    report["ratios"] = {"node_step_plus_derivatives_vs_paper_80us": tn / PAPER_NODE_US}
    if "long_1000" in report:
        report["ratios"]["wall_1000_steps_vs_paper_200s"] = report["long_1000"]["solve_time_s"] / PAPER_1000_STEP_S
    m_true = report["truth"]["mass_kg"]
    report["mass_error_kg"] = report["with_id"]["trunk"]["mass_kg"] - m_true
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"prime_{args.motion}.json").write_text(json.dumps(report, indent=2))
    if args.plot:
        t, fi, fg = f_id
        plot_forces(REPO / "docs" / f"prime_go2_forces{'' if args.motion == 'squat' else '_' + args.motion}.png",
                    t, fi, None if f_noid is None else f_noid[1], fg, pr.contact_names,
                    f"Go2 +3 kg payload, MuJoCo {args.motion}, T = {T}: contact forces F_z")
    print(json.dumps({k: v for k, v in report.items() if k not in ("truth", "nominal")}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
