"""Far reach with an unmodelled 9 kg load, torque-limit adaptation (12) on/off (RA-L 2024 Fig. 6).

    python benchmarks/bench_seiko_reach_load.py      # ~4 min on 2 cores; docs/reach_load.{png,json}
    python benchmarks/bench_seiko_reach_load.py --ratio 0.3   # docs/reach_load_ratio0.3.{png,json}

In-process closed loop (:mod:`seiko_loop`) of ``robots/talos/scenarios/far_reach.yaml``: the right
ball hand reaches 0.30 m forward and back. From t = 2 s a 9 kg load (88.3 N downward, ramped in
over 0.5 s) hangs on the hand link in MuJoCo only (the SEIKO model does not know it). The
Controller runs with ``max_tau_ratio = 0.6`` (the paper's Fig. 6), with (12) and without it
(``torque_limit_adaptation = False``: (11i) with the URDF limits). Metrics: fall; the largest
``|tau_read| / tau_max`` over joints and time; the fraction of time any joint exceeds 0.6.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from seiko_loop import ROOT, run_loop  # noqa: E402

from contactflow.robot import load_robot  # noqa: E402
from contactflow.seiko.controller import ControllerConfig  # noqa: E402

LOAD_N = 9.0 * 9.81


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "docs"))
    p.add_argument("--ratio", type=float, default=0.6)
    args = p.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    robot = load_robot("talos")

    def disturb(sim, t):
        s = min(1.0, max(0.0, (t - 2.0) / 0.5))
        sim.set_external_wrench("arm_right_5_link", np.array([0, 0, -LOAD_N * s, 0, 0, 0]))

    res = {}
    fig, ax = plt.subplots(figsize=(8, 4))
    for adapt in (True, False):
        cfg = ControllerConfig(max_tau_ratio=args.ratio, torque_limit_adaptation=adapt)
        L = run_loop(robot, ROOT / "robots/talos/scenarios/far_reach.yaml", ccfg=cfg, disturb=disturb)
        ratio = np.abs(L.tau) / robot.tau_max
        worst = ratio.max(axis=1)
        j = int(np.argmax(ratio.max(axis=0)))
        key = "with (12)" if adapt else "without (12)"
        res[key] = {
            "fell": L.fell,
            "sim_time_s": float(L.t[-1]),
            "max_ratio": float(worst.max()),
            "worst_joint": robot.joint_names[j],
            "fraction_of_time_above_ratio": float(np.mean(worst > args.ratio)),
        }
        print(key, res[key], flush=True)
        ax.plot(L.t, worst, label=f"{key}: max {worst.max():.2f}, {100 * np.mean(worst > args.ratio):.1f} % > {args.ratio}")
    ax.axhline(args.ratio, color="k", ls="--", lw=0.8)
    ax.set_xlabel("time [s]")
    ax.set_ylabel("max over joints |tau_read| / tau_max")
    ax.legend(fontsize=8)
    ax.set_title("Far reach + unmodelled 9 kg on the right hand (cf. RA-L 2024 Fig. 6)")
    out = Path(args.out)
    stem = "reach_load" if args.ratio == 0.6 else f"reach_load_ratio{args.ratio:g}"
    fig.savefig(out / f"{stem}.png", dpi=110)
    (out / f"{stem}.json").write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
