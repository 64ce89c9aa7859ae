"""A trained LAC student in ``lac_policy``'s runner: standing time, per-step cost against the teacher.

Run: ``python benchmarks/bench_lac_policy_eval.py --model STUDENT.onnx [--stand-s 60] [--out FILE.json]``
(about 20-40 s on one core for 60 s of standing). Everything in one process, on the PD G1-23
simulator (``PDRobotSim``: PD at every 2 ms physics step, 50 Hz ticks), in the same run:

1. The student (``robots/g1/policies/lac.yaml`` + ``--model``, onnxruntime on 1 intra-op thread, as
   the node runs it) standing ``--stand-s`` under the teleop's default command
   (:func:`contactflow.policy.run_policy_loop`, recorded and summarised with the graphs' G1 summary):
   ``fell``, ``standing_drift_m``, ``base_height_min_m``, refused outputs; its per-step time
   (observation + history + inference + action map: mean, p95) and the simulator's per-tick time.
2. The teacher ``lac_expert`` standing 10 s (:func:`contactflow.lac.compliance.run_wrench_event`
   without a wrench): its per-step time, the baseline of the ratio ``student / expert``.

Timings depend on the machine's load (2 shared cores); the ratio is the number to compare. The last
line printed is one JSON object with every number.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
from pathlib import Path

import numpy as np

from contactflow.lac.compliance import run_wrench_event, stand_command
from contactflow.lac.expert import LacExpert, load_expert_config
from contactflow.lac.teleop import default_command
from contactflow.policy import load_policy_spec, run_policy_loop
from contactflow.robot import load_robot
from contactflow.sim.pd_robot import PDRobotSim, PDSimConfig


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="the student's ONNX model (LAC's deploy format)")
    ap.add_argument("--spec", default="lac", help="policy spec (default robots/g1/policies/lac.yaml)")
    ap.add_argument("--stand-s", type=float, default=60.0, help="simulated standing time of the student [s]")
    ap.add_argument("--out", default=None, help="also write the JSON here")
    args = ap.parse_args()
    robot = load_robot("g1")
    spec = load_policy_spec(args.spec, robot, model=args.model)
    stand = run_policy_loop(spec, robot, [(0.0, {})], args.stand_s, summary=True)
    keep = ("sim_time_s", "fell", "fell_early", "standing_drift_m", "base_height_min_m", "base_tilt_max_rad",
            "n_rejected", "loop_ticks", "policy_step_ms_mean", "policy_step_ms_p95", "sim_step_ms_mean",
            "sim_s_per_wall_s")
    student = {k: stand.get(k) for k in keep}

    sim = PDRobotSim(PDSimConfig(), robot)
    k5 = default_command(robot)["stiffness"]
    res = run_wrench_event(sim, LacExpert(load_expert_config(), robot), stand_command(robot, k5), None, np.zeros(6),
                           duration_s=10.0)
    st = 1e3 * res.step_times_s
    expert = {"fell": res.fell, "step_ms_mean": float(st.mean()), "step_ms_p95": float(np.percentile(st, 95)),
              "ticks": int(st.size)}
    out = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": f"{platform.node()} ({os.cpu_count()} cores), load {os.getloadavg()[0]:.2f}",
        "model": str(args.model), "spec": args.spec, "budget_ms": 1e3 * spec.period_s,
        "student_stand": student, "expert_stand_10s": expert,
        "student_over_expert_step_time": student["policy_step_ms_mean"] / expert["step_ms_mean"],
        "student_step_share_of_budget": student["policy_step_ms_mean"] / (1e3 * spec.period_s),
    }
    text = json.dumps(out)
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
