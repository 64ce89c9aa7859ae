"""Per-tick cost of MujocoRobotSim.step on Talos (standing, default commands).

Usage: python benchmarks/bench_mujoco.py [--seconds 4] [--control-dt 0.002] [--no-interpolate]

Prints model build and reset (settle) time, then the median / p99 / max wall time of one control
tick, and the same for a bare ``mj_step`` loop with the same number of physics steps per tick
(the baseline): their ratio is the Python + readings overhead.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import mujoco
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without install

from contactflow.robot import load_robot  # noqa: E402
from contactflow.sim.mujoco_robot import MujocoRobotSim, SimConfig  # noqa: E402


def _stats(samples_s: np.ndarray) -> str:
    us = samples_s * 1e6
    return f"median {np.median(us):7.1f} us   p99 {np.percentile(us, 99):7.1f} us   max {us.max():7.1f} us"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=4.0, help="simulated time [s]")
    ap.add_argument("--control-dt", type=float, default=0.002, help="control tick [s]")
    ap.add_argument("--no-interpolate", action="store_true", help="zero-order hold of the command")
    args = ap.parse_args()

    robot = load_robot("talos")
    t0 = time.perf_counter()
    cfg = SimConfig(control_dt_s=args.control_dt, interpolate_commands=not args.no_interpolate)
    sim = MujocoRobotSim(cfg, robot)  # builds the model and runs the first (settling) reset
    t_init = time.perf_counter() - t0
    t0 = time.perf_counter()
    sim.reset()  # cached settled state
    t_reset = time.perf_counter() - t0

    n_ticks = int(round(args.seconds / sim.control_dt_s))
    theta = robot.theta_default
    ticks = np.empty(n_ticks)
    for k in range(n_ticks):
        t = time.perf_counter()
        sim.step(theta)
        ticks[k] = time.perf_counter() - t
    fell = sim.fell()

    sim.reset()
    m, d = sim.model, sim.data
    base = np.empty(n_ticks)
    for k in range(n_ticks):
        t = time.perf_counter()
        mujoco.mj_step(m, d, nstep=sim.n_substeps)
        base[k] = time.perf_counter() - t

    print(f"model build + first reset (settle {cfg.settle_s} s): {t_init * 1e3:.0f} ms; cached reset {t_reset * 1e3:.2f} ms")
    print(f"control dt {sim.control_dt_s * 1e3:g} ms = {sim.n_substeps} x {sim.physics_dt_s * 1e3:g} ms physics, "
          f"{n_ticks} ticks, interpolate={cfg.interpolate_commands}, fell={fell}")
    print(f"MujocoRobotSim.step : {_stats(ticks)}")
    print(f"bare mj_step x{sim.n_substeps}   : {_stats(base)}")
    print(f"overhead ratio (median): {np.median(ticks) / np.median(base):.2f}; "
          f"real-time factor: {sim.control_dt_s / np.median(ticks):.1f}x")


if __name__ == "__main__":
    main()
