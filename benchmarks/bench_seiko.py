"""SEIKO on Talos: per-step time of the Retargeting and the Controller, and real-time factors.

Usage: python benchmarks/bench_seiko.py [--seconds 6] [--dora] [--out docs/benchmarks_seiko.json]

1. In-process closed loop (no dora): MuJoCo Talos + input filter + Retargeting + Controller in one
   Python process, the left hand moving forward at 5 cm/s (the default scenario's first phase).
   Reports median / p99 of each stage's step time and the loop's simulated seconds per wall
   second. The authors' C++ took 0.50 ms (Retargeting) and 0.40 ms (Controller) per step on the
   robot's computer (RA-L 2024 §V-A): the ratios are printed.
2. With ``--dora``: the same scenario through ``dora run dataflows/seiko_talos.yml`` (6 processes,
   lockstep), whose recorder summary gives the graph's simulated seconds per wall second; the
   ratio to the in-process loop is the cost of the dataflow (hops, serialisation, recording).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pinocchio as pin

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from contactflow.operator.input_filter import InputFilter, InputFilterConfig  # noqa: E402
from contactflow.robot import load_robot  # noqa: E402
from contactflow.seiko.controller import ControllerConfig, SeikoController  # noqa: E402
from contactflow.seiko.retargeting import RetargetingConfig, SeikoRetargeting  # noqa: E402
from contactflow.sim.mujoco_robot import MujocoRobotSim, SimConfig  # noqa: E402

CPP_RETARGETING_MS = 0.50
CPP_CONTROLLER_MS = 0.40


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}"


def stats_ms(x) -> dict:
    x = np.asarray(x) * 1e3
    return {"median_ms": float(np.median(x)), "p99_ms": float(np.percentile(x, 99)), "max_ms": float(np.max(x))}


def in_process(seconds: float) -> dict:
    robot = load_robot("talos")
    sim = MujocoRobotSim(SimConfig(), robot)
    r = sim.reset()
    ret = SeikoRetargeting(RetargetingConfig(), robot)
    out = ret.reset()
    ctrl = SeikoController(ControllerConfig(), robot)
    ctrl.reset(out.q, out.lam, out.enabled)
    effs = list(robot.contacts)
    free = [e for e in effs if not out.enabled[e]]
    filt = InputFilter(InputFilterConfig(), free)
    filt.reset({e: out.poses[e] for e in free})
    dims = {e: robot.contacts[e].dim for e in effs}
    twist = {e: np.zeros(6) for e in free}
    t_ret, t_ctrl, t_sim = [], [], []
    n = int(round(seconds / 0.002))
    wall0 = time.perf_counter()
    for k in range(n):
        t = k * 0.002
        twist["left_hand"] = np.array([0.05, 0, 0, 0, 0, 0]) if t >= 2.0 else np.zeros(6)
        targets = filt.step(twist, {e: out.poses[e] for e in free})
        a = time.perf_counter()
        out = ret.step(targets)
        b = time.perf_counter()
        lam_read = {e: (np.asarray(r.wrenches[e])[: dims[e]] if e in r.wrenches else np.zeros(dims[e])) for e in effs}
        c_out = ctrl.step(q_d=out.q, v_d=out.v, lam_d=out.lam, lam_d_dot=out.lam_dot, enabled=out.enabled,
                          lam_read=lam_read, tau_read=r.tau, theta_ahead=out.theta_ahead)
        c = time.perf_counter()
        r = sim.step(c_out.theta_cmd)
        d = time.perf_counter()
        t_ret.append(b - a)
        t_ctrl.append(c - b)
        t_sim.append(d - c)
        if not (out.ok and c_out.ok):
            raise RuntimeError(f"QP failure at tick {k}: {out.diagnostics.get('status')} / {c_out.diagnostics.get('status')}")
    wall = time.perf_counter() - wall0
    return {
        "sim_seconds": seconds,
        "retargeting": stats_ms(t_ret),
        "controller": stats_ms(t_ctrl),
        "mujoco_tick": stats_ms(t_sim),
        "loop_realtime_factor": seconds / wall,
        "fell": bool(sim.fell()),
        "qp_sizes": {"retargeting": [out.diagnostics.get(k) for k in ("n_var", "n_eq", "n_in")],
                     "controller": [c_out.diagnostics.get(k) for k in ("n_var", "n_eq", "n_ineq")]},
    }


def with_dora(dataflow: str = "dataflows/seiko_talos.yml") -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, CONTACTFLOW_RECORDINGS=tmp)
        dora = str(Path(sys.executable).parent / "dora")
        t0 = time.perf_counter()
        proc = subprocess.run([dora, "run", dataflow], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        total = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(proc.stdout[-3000:] + proc.stderr[-3000:])
        run = next(p for p in Path(tmp).iterdir() if p.is_dir() and not p.is_symlink())
        summary = json.loads((run / "summary.json").read_text())
    return {"summary": summary, "dora_run_total_wall_s": total}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--dora", action="store_true", help="also time the full dora graph (default scenario, ~1.5 min)")
    ap.add_argument("--out", default=None, help="write the results as JSON")
    args = ap.parse_args()
    res = {"machine": machine(), "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime())}
    res["in_process"] = ip = in_process(args.seconds)
    print(f"machine: {res['machine']}")
    print(f"in-process closed loop, {args.seconds:.1f} s simulated, QP sizes {ip['qp_sizes']}")
    for name, cpp in (("retargeting", CPP_RETARGETING_MS), ("controller", CPP_CONTROLLER_MS)):
        s = ip[name]
        print(f"  {name:12s} median {s['median_ms']:.3f} ms  p99 {s['p99_ms']:.3f} ms  "
              f"(x{s['median_ms'] / cpp:.2f} the authors' C++ {cpp:.2f} ms)")
    s = ip["mujoco_tick"]
    print(f"  {'mujoco tick':12s} median {s['median_ms']:.3f} ms  p99 {s['p99_ms']:.3f} ms")
    print(f"  loop: {ip['loop_realtime_factor']:.3f} simulated s per wall s (1.0 = real time at 500 Hz)")
    if args.dora:
        for key, flow, label in (("dora", "dataflows/seiko_talos.yml", "split graph, 6 nodes"),
                                 ("dora_stack", "dataflows/seiko_talos_stack.yml", "fused stages, 4 nodes")):
            res[key] = d = with_dora(flow)
            rt = d["summary"]["realtime_factor"]
            print(f"dora graph {flow} ({label}, default scenario, lockstep): {rt:.3f} simulated s per wall s "
                  f"(x{rt / ip['loop_realtime_factor']:.2f} the in-process loop); "
                  f"`dora run` total {d['dora_run_total_wall_s']:.1f} s for {d['summary']['sim_time_s']:.1f} s simulated")
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
