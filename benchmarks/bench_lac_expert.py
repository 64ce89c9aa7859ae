"""lac_expert benchmark: the full stiffness sweeps of lac.md §4 and the expert's step time.

Run: ``python benchmarks/bench_lac_expert.py [--out docs/lac_expert_sweep.json]`` (about 30-60 s on
one core). Everything runs in-process on the PD G1-23 simulator (``PDRobotSim``: PD at every 2 ms
physics step, 50 Hz ticks) with the shipped ``robots/g1/lac_expert.yaml``; every wrench event is a
trapezoid (ramp 0.5 s, hold 3 s, ramp 0.5 s) from t = 2 s applied with MuJoCo ``xfrc_applied``
(world frame, at the body's CoM), measured by :func:`contactflow.lac.compliance.run_wrench_event`.

1. Standing 20 s at zero command for the demo boot stiffness [70, 70, 70, 30, 30] and the real
   robot's boot [250, 250, 250, 55, 55]: fall, base drift, lowest base height.
2. Hand force 10 N, K_lin of that arm in {30, 60, 100, 300, 500} N/m (the other channels at
   [300, 300, 300, 50, 50]): left hand +x (forward), -x, +y (outward), right hand +x. Displacement of the hand
   body's CoM along the force and its ratio to F/K.
3. Torso force (+x) on ``torso_link``, K_lin_torso in the same set, 2 N (the shipped test load) and
   10 N (to show where the feet-anchored torso channel stops: the CoP-aware bound saturates the
   displacement at the low K end).
   Then forward pushes of 10, 18, 20, 25, 30 N on the left hand at K = 100 and 500 N/m: which stand.
4. Hand couple 1.5 N m about world z and about world x on the left hand, K_ang in {10, 30, 100}:
   rotation about the couple axis and its ratio to C / K_theta. (LAC has no torso angular channel.)
5. Step time of ``LacExpert.step`` over every tick of every run: mean, p50, p99, max against the
   20 ms budget of 50 Hz, and the in-process loop's simulated seconds per wall second.

Prints the JSON and writes it to ``--out``. Timings depend on the machine's load (2 shared cores).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

from contactflow.lac.compliance import run_wrench_event, stand_command
from contactflow.lac.expert import LacExpert, load_expert_config
from contactflow.robot import load_robot
from contactflow.sim.pd_robot import PDRobotSim, PDSimConfig

K_LIN = (30.0, 60.0, 100.0, 300.0, 500.0)
K_ANG = (10.0, 30.0, 100.0)
BASE = (300.0, 300.0, 300.0, 50.0, 50.0)


def _k5(channel: int, k: float) -> list[float]:
    out = list(BASE)
    out[channel] = k
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "docs" / "lac_expert_sweep.json"))
    args = p.parse_args()
    robot = load_robot("g1")
    cfg = load_expert_config()
    sim = PDRobotSim(PDSimConfig(), robot)
    step_times: list[np.ndarray] = []
    sim_s = wall_s = 0.0

    def run(k5, body, wrench, **kw):
        nonlocal sim_s, wall_s
        t0 = time.perf_counter()
        res = run_wrench_event(sim, LacExpert(cfg, robot), stand_command(robot, k5), body, wrench, **kw)
        wall_s += time.perf_counter() - t0
        sim_s += res.sim_time_s
        step_times.append(res.step_times_s)
        return res

    out: dict = {"machine": f"{platform.node()} ({platform.processor() or platform.machine()}), shared 2 cores",
                 "config": "robots/g1/lac_expert.yaml", "event": "trapezoid ramp 0.5 s, hold 3 s, ramp 0.5 s, t0 = 2 s"}
    stand = {}
    for name, k5 in (("demo_boot", [70, 70, 70, 30, 30]), ("robot_boot", [250, 250, 250, 55, 55])):
        r = run(k5, None, np.zeros(6), duration_s=20.0)
        stand[name] = {"stiffness": k5, "fell": r.fell, "drift_m": round(r.drift_m, 5),
                       "base_height_min_m": round(r.base_height_min_m, 4), "degraded_ticks": r.not_ok_ticks}
    out["stand_20s"] = stand

    def sweep(channel, ks, body, wrench, key):
        rows = []
        mag = float(np.linalg.norm(wrench[:3]) if key == "displacement_m" else np.linalg.norm(wrench[3:]))
        for k in ks:
            r = run(_k5(channel, k), body, np.asarray(wrench, float))
            val = getattr(r, key)
            rows.append({"k": k, "fell": r.fell, key: None if r.fell else round(val, 5),
                         "ratio_to_ideal": None if r.fell else round(val / (mag / k), 3),
                         "degraded_ticks": r.not_ok_ticks})
        vals = [row[key] for row in rows]
        mono = all(v is not None for v in vals) and all(a > b for a, b in zip(vals, vals[1:]))
        return {"body": body, "wrench_W": list(wrench), "rows": rows, "strictly_decreasing_in_k": mono}

    out["hand_force"] = {
        "left_+x_10N": sweep(0, K_LIN, "left_wrist_roll_link", [10, 0, 0, 0, 0, 0], "displacement_m"),
        "left_-x_10N": sweep(0, K_LIN, "left_wrist_roll_link", [-10, 0, 0, 0, 0, 0], "displacement_m"),
        "left_+y_10N": sweep(0, K_LIN, "left_wrist_roll_link", [0, 10, 0, 0, 0, 0], "displacement_m"),
        "right_+x_10N": sweep(1, K_LIN, "right_wrist_roll_link", [10, 0, 0, 0, 0, 0], "displacement_m"),
    }
    # where the feet-anchored expert stops: forward pushes of growing magnitude on the left hand
    limits = []
    for F in (10.0, 18.0, 20.0, 25.0, 30.0):
        for K in (100.0, 500.0):
            r = run(_k5(0, K), "left_wrist_roll_link", np.array([F, 0, 0, 0, 0, 0]))
            limits.append({"force_n": F, "k": K, "fell": r.fell,
                           "displacement_m": None if r.fell else round(r.displacement_m, 5)})
    out["hand_force_magnitude_left_+x"] = limits
    out["torso_force"] = {
        "+x_2N": sweep(2, K_LIN, "torso_link", [2, 0, 0, 0, 0, 0], "displacement_m"),
        "+x_10N": sweep(2, K_LIN, "torso_link", [10, 0, 0, 0, 0, 0], "displacement_m"),
    }
    out["hand_couple"] = {
        "left_z_1.5Nm": sweep(3, K_ANG, "left_wrist_roll_link", [0, 0, 0, 0, 0, 1.5], "rotation_rad"),
        "left_x_1.5Nm": sweep(3, K_ANG, "left_wrist_roll_link", [0, 0, 0, 1.5, 0, 0], "rotation_rad"),
    }
    st = np.concatenate(step_times)
    out["step_time"] = {
        "ticks": int(st.size),
        "mean_ms": round(1e3 * float(st.mean()), 3),
        "p50_ms": round(1e3 * float(np.percentile(st, 50)), 3),
        "p99_ms": round(1e3 * float(np.percentile(st, 99)), 3),
        "max_ms": round(1e3 * float(st.max()), 3),
        "budget_ms": 20.0,
        "p99_fraction_of_budget": round(float(np.percentile(st, 99)) / 0.02, 4),
        "in_process_loop_sim_s_per_wall_s": round(sim_s / wall_s, 2),
    }
    text = json.dumps(out, indent=1)
    print(text)
    Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
