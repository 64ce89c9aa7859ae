"""Damping of the feedback law (10) (SEIKO RA-L 2024 Fig. 5): log decrement vs K_d.

    python benchmarks/bench_seiko_damping.py            # ~2 min on 2 cores; docs/damping.{png,json}

Talos stands in double support (``robots/talos/scenarios/stand_7s.yaml``, in-process closed loop
:func:`contactflow.seiko.loop.run_loop`); at t = 3 s a short push (``--force-n`` for 0.1 s along +x) hits the torso.
The pelvis pitch rate (IMU gyro y, unfiltered) is recorded; the logarithmic decrement is
``delta = mean(log(|w_i| / |w_{i+1}|))`` over successive extrema of the same sign after the
push whose amplitude exceeds 5 % of the first one (the paper's definition, Fig. 5 right).
K_d in {0, 0.01, 0.02, 0.05} with the paper's sign (``kd_sign = -1``: ``- K_d lam_dot_read``), plus
K_d = 0.02 and 0.05 with the released code's sign (``kd_sign = +1``) to check seiko.md §11.1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from contactflow.robot import load_robot  # noqa: E402
from contactflow.seiko.controller import ControllerConfig  # noqa: E402
from contactflow.seiko.loop import run_loop  # noqa: E402


def log_decrement(t: np.ndarray, w: np.ndarray, t0: float) -> tuple[float, list[float]]:
    """Mean log ratio of successive same-sign extrema of ``w`` after ``t0`` (nan if < 2)."""
    sel = t >= t0
    t, w = t[sel], w[sel]
    ext = [i for i in range(1, len(w) - 1) if (w[i] > w[i - 1] and w[i] >= w[i + 1] and w[i] > 0)
           or (w[i] < w[i - 1] and w[i] <= w[i + 1] and w[i] < 0)]
    if not ext:
        return float("nan"), []
    a0 = abs(w[ext[0]])
    peaks = [i for i in ext if abs(w[i]) > 0.05 * a0]
    pos = [abs(w[i]) for i in peaks if w[i] > 0]
    neg = [abs(w[i]) for i in peaks if w[i] < 0]
    ratios = [np.log(a / b) for seq in (pos, neg) for a, b in zip(seq, seq[1:]) if b > 0]
    return (float(np.mean(ratios)) if ratios else float("nan")), [float(t[i]) for i in peaks[:12]]


PUSH_BODY = "torso_2_link"


def torso_push(force_n: float = 60.0, start_s: float = 3.0, duration_s: float = 0.1):
    """``disturb(sim, t)`` for :func:`run_loop`: a push of ``force_n`` [N] along world +x on the torso
    (``torso_2_link``) during [start_s, start_s + duration_s) [s]."""

    def disturb(sim, t):
        on = start_s <= t < start_s + duration_s
        sim.set_external_wrench(PUSH_BODY, np.array([force_n, 0, 0, 0, 0, 0]) if on else None)

    return disturb


def damping_case(robot, ccfg: ControllerConfig, force_n: float = 60.0, with_log: bool = False):
    """Standing (``stand_7s.yaml``, :func:`run_loop`) with Controller ``ccfg``, a ``force_n`` [N] x 0.1 s torso
    push at 3 s: ``{log_decrement, fell, peak_times_s, max_abs_pitch_rate_after_push_radps}`` of the pelvis
    pitch rate after 3.1 s ([-], [s], [rad/s]); with ``with_log``, ``(that, the LoopLog)``."""
    L = run_loop(robot, ROOT / "robots/talos/scenarios/stand_7s.yaml", ccfg=ccfg, disturb=torso_push(force_n))
    delta, peaks = log_decrement(L.t, L.gyro[:, 1], 3.1)
    res = {"log_decrement": delta, "fell": L.fell, "peak_times_s": peaks,
           "max_abs_pitch_rate_after_push_radps": float(np.max(np.abs(L.gyro[L.t > 3.1, 1])))}
    return (res, L) if with_log else res


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--force-n", type=float, default=60.0)
    p.add_argument("--out", default=str(ROOT / "docs"))
    args = p.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    robot = load_robot("talos")

    cases = [(0.0, -1.0), (0.01, -1.0), (0.02, -1.0), (0.05, -1.0), (0.02, 1.0), (0.05, 1.0)]
    res = {}
    fig, ax = plt.subplots(figsize=(8, 4))
    for kd, sign in cases:
        key = f"kd={kd} sign={'paper(-)' if sign < 0 else 'code(+)'}"
        res[key], L = damping_case(robot, ControllerConfig(kd=kd, kd_sign=sign), args.force_n, with_log=True)
        print(key, res[key], flush=True)
        ax.plot(L.t, L.gyro[:, 1], label=f"{key}: $\\delta$={res[key]['log_decrement']:.3f}")
    ax.set_xlim(2.8, 7.0)
    ax.set_xlabel("time [s]")
    ax.set_ylabel("pelvis pitch rate [rad/s]")
    ax.legend(fontsize=8)
    ax.set_title(f"SEIKO damping: torso push {args.force_n:.0f} N x 0.1 s (cf. RA-L 2024 Fig. 5)")
    out = Path(args.out)
    fig.savefig(out / "damping.png", dpi=110)
    (out / "damping.json").write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
