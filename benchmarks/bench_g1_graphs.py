"""G1 graphs: simulated seconds per wall second of the lockstep dora graphs vs an in-process loop.

Usage: python benchmarks/bench_g1_graphs.py [--holosoma] [--expert] [--out docs/g1_graphs_bench.json]

In the same run, for each graph:

1. ``dora run`` of the graph on its default scenario (lockstep, every node a Python process,
   recorder on); the recorder summary's ``realtime_factor`` counts from the first to the last
   sensor message (start-up excluded); ``dora_run_total_wall_s`` includes the ~1-2 s of start-up.
2. An in-process loop of the same controller, model and scenario (no dora, no recording):
   holosoma: :func:`contactflow.policy.loop.run_policy_loop`; lac_expert: :func:`expert_loop`
   below (teleop player + wrench injector + ``LacExpert`` + ``PDRobotSim``).

The ratio graph / loop is the cost of the dataflow (four or five processes, one lockstep hop per
node per 20 ms tick, serialisation, recording). The issue's aim: the graph at >= 1/4 of its loop.
Numbers depend on the machine's load (2 shared cores here): compare ratios from one run.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{cpu}, {os.cpu_count()} cores, load {load:.1f}, Python {platform.python_version()}"


def dora_graph(dataflow: str, scenario: str | None = None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, CONTACTFLOW_RECORDINGS=tmp)
        env.pop("CONTACTFLOW_SCENARIO", None)
        if scenario:
            env["CONTACTFLOW_SCENARIO"] = scenario
        dora = str(Path(sys.executable).parent / "dora")
        t0 = time.perf_counter()
        proc = subprocess.run([dora, "run", dataflow], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        total = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(proc.stdout[-3000:] + proc.stderr[-3000:])
        run = next(p for p in Path(tmp).iterdir() if p.is_dir() and not p.is_symlink())
        s = json.loads((run / "summary.json").read_text())
    keep = ("fell", "sim_time_s", "wall_time_s", "realtime_factor", "base_velocity_tracking_error_mps", "standing_drift_m",
            "base_height_min_m", "controller_degraded_ticks")
    return {"dataflow": dataflow, "dora_run_total_wall_s": total, **{k: s.get(k) for k in keep},
            "wrench_events": s.get("wrench_events", [])}


def holosoma_loop(scenario: Path) -> dict:
    from contactflow.lac.teleop import load_teleop_scenario
    from contactflow.policy import load_policy_spec
    from contactflow.policy.loop import run_policy_loop
    from contactflow.robot import load_robot

    robot = load_robot("g1_29dof")
    spec = load_policy_spec(ROOT / "robots/g1/policies/holosoma_g1_29dof_loco.yaml", robot)
    sc = load_teleop_scenario(scenario, robot)
    return run_policy_loop(spec, robot, scenario, sc.duration_s, summary=False)


def expert_loop(scenario: Path) -> dict:
    """The lac_expert graph in one process: teleop player, wrench injector, expert, PD simulator."""
    from contactflow.lac.expert import LacExpert, load_expert_config
    from contactflow.lac.teleop import TeleopPlayer, load_teleop_scenario
    from contactflow.lac.wrench_injector import WrenchInjector, wrench_links
    from contactflow.robot import load_robot
    from contactflow.sim.mujoco_robot import sensor_values
    from contactflow.sim.pd_robot import PDRobotSim, PDSimConfig

    robot = load_robot("g1")
    sc = load_teleop_scenario(scenario, robot)
    player, inj = TeleopPlayer(sc), WrenchInjector(sc.wrenches, wrench_links(robot))
    sim = PDRobotSim(PDSimConfig(), robot)
    expert = LacExpert(load_expert_config(), robot)

    def sensors(r):
        return sensor_values(r, robot)

    r = sim.reset()
    expert.reset(sensors(r))
    steps, t0 = [], time.perf_counter()
    while True:
        cmd = player.step(r.t)
        s = sensors(r)
        a = time.perf_counter()
        out = expert.step(s, cmd.values())
        steps.append(time.perf_counter() - a)
        if cmd.finished:
            break
        for link, w in inj.wrenches(r.t).items():
            sim.set_external_wrench(link, w)
        c = out.command
        r = sim.step(c["q_target"], c["kp"], c["kd"], c["tau_ff"])
        if sim.fell():
            break
    wall = time.perf_counter() - t0
    return {"sim_time_s": float(r.t), "loop_wall_time_s": wall, "sim_s_per_wall_s": float(r.t) / wall,
            "expert_step_ms_mean": 1e3 * float(np.mean(steps)), "expert_step_ms_p99": 1e3 * float(np.percentile(steps, 99)),
            "fell_early": bool(sim.fell())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--holosoma", action="store_true", help="g1_walk_holosoma.yml (30 s) vs run_policy_loop")
    ap.add_argument("--expert", action="store_true", help="lac_g1_teleop.yml (24 s) vs the in-process expert loop")
    ap.add_argument("--out", default=None, help="write the results as JSON")
    args = ap.parse_args()
    if not (args.holosoma or args.expert):
        args.holosoma = args.expert = True
    res = {"machine": machine(), "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime())}
    print(f"machine: {res['machine']}")
    cases = []
    if args.holosoma:
        cases.append(("holosoma", "dataflows/g1_walk_holosoma.yml", ROOT / "robots/g1/scenarios/walk_forward.yaml", holosoma_loop))
    if args.expert:
        cases.append(("lac_expert", "dataflows/lac_g1_teleop.yml", ROOT / "robots/g1/scenarios/hand_push.yaml", expert_loop))
    for key, flow, scenario, loop in cases:
        g = dora_graph(flow)
        lp = loop(scenario)
        ratio = g["realtime_factor"] / lp["sim_s_per_wall_s"]
        res[key] = {"graph": g, "loop": lp, "graph_over_loop": ratio}
        print(f"{key}: graph {flow} {g['realtime_factor']:.2f} sim s / wall s ({g['sim_time_s']:.1f} s simulated, "
              f"`dora run` total {g['dora_run_total_wall_s']:.1f} s); in-process loop {lp['sim_s_per_wall_s']:.2f}; "
              f"graph / loop = {ratio:.3f} (aim >= 0.25)")
        for k in ("policy_step_ms_mean", "policy_step_ms_p95", "expert_step_ms_mean", "expert_step_ms_p99"):
            if k in lp:
                print(f"  {k} {lp[k]:.3f} ms (budget 20 ms at 50 Hz)")
    print(json.dumps(res, default=float))
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=2, default=float))


if __name__ == "__main__":
    main()
