"""Cost of the Talos scene's holding feet (issue 16): elliptic cone, impratio 10, 20 noslip iterations
(the robot file's defaults now) against the former pyramidal cone, impratio 1, no noslip, in one run.

Usage: python benchmarks/bench_foot_hold.py [--ticks 1000] [--repeats 7]

Both simulators stand in the default posture with default commands; blocks of ``--ticks`` control
ticks (2 ms, 2 physics steps each) alternate between them. Prints the median CPU time (this
thread's) per tick of each and the ratio new / old. The drift the options remove is measured by
tests/test_foot_hold.py. The machine is shared: compare the ratio, not the absolute times.
Measured 2026-12-01 22:05 UTC (load average 23-32): 253 / 243 us and 252 / 221 us, ratio 1.04 and 1.14.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import mujoco
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from contactflow.robot import load_robot  # noqa: E402
from contactflow.sim.mujoco_robot import MujocoRobotSim, SimConfig  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ticks", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args(argv)
    robot = load_robot("talos")
    sims = {"new (elliptic, 10, noslip 20)": MujocoRobotSim(SimConfig(), robot),
            "old (pyramidal, 1, noslip 0)": MujocoRobotSim(SimConfig(), robot)}
    old = sims["old (pyramidal, 1, noslip 0)"]
    old.model.opt.cone = mujoco.mjtCone.mjCONE_PYRAMIDAL
    old.model.opt.impratio = 1.0
    old.model.opt.noslip_iterations = 0
    old._settled.clear()
    times: dict[str, list[float]] = {k: [] for k in sims}
    for r in range(args.repeats):
        for name, sim in (sims.items() if r % 2 == 0 else reversed(list(sims.items()))):
            sim.reset()
            t0 = time.thread_time()  # CPU time of this thread: less sensitive to other jobs than wall time
            for _ in range(args.ticks):
                sim.step(robot.theta_default)
            times[name].append((time.thread_time() - t0) / args.ticks)
    med = {k: float(np.median(v)) for k, v in times.items()}
    for k, v in med.items():
        print(f"{k:32s} median {v * 1e6:7.1f} us CPU per 2 ms tick  ({', '.join(f'{x * 1e6:.0f}' for x in times[k])})")
    new, old_ = med["new (elliptic, 10, noslip 20)"], med["old (pyramidal, 1, noslip 0)"]
    print(f"ratio new / old: {new / old_:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
