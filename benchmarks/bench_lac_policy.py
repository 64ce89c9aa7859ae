"""lac_policy benchmark: per-step cost of a learned policy against the 20 ms budget, and a closed loop.

Run: ``python benchmarks/bench_lac_policy.py [--steps 2000] [--loop-s 20]`` (about 10-30 s; needs the
``onnx`` package of the ``[test]`` extra to build the LAC stand-in model). Measured
in one run, onnxruntime on 1 intra-op thread (as the node runs it):

1. Per policy step of :class:`contactflow.policy.PolicyRunner` (observation assembly + history +
   onnxruntime inference + action map and safety check), for
   * LAC's spec (``robots/g1/policies/lac.yaml``: (1, 64, 95) -> 23) with a STAND-IN model: there
     is no LAC checkpoint; an MLP of LAC's I/O over the whole 64-frame history (6080 -> 96 -> 256 ->
     128 -> 23, ~0.64 M parameters, LAC's student is ~0.7 M, lac.md §3) built here;
   * holosoma's G1-29 locomotion spec with the real PPO model (fetched from its PyPI wheel; the
     line is skipped when it cannot be downloaded).
   States: the simulated robot standing, with small random joint perturbations (not a closed loop:
   the policy's own outputs are not applied; ``refused`` counts the refused outputs). Reported:
   mean / p50 / p95 / max of the whole step, the observation and inference parts, and the share of
   the 20 ms period of a 50 Hz policy.
2. The in-process closed loop :func:`contactflow.policy.run_policy_loop` (holosoma + PDRobotSim,
   stand 5 s then 0.5 m/s forward, no recording) in simulated seconds per wall second, next to
   the bare simulator (same PDRobotSim, constant default command) in the same run. The dora
   graph ``dataflows/g1_walk_holosoma.yml`` is compared against this loop (docs/benchmarks.md).

The last line printed is one JSON object with every number.
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

from contactflow.policy import ModelFetchError, PolicyRunner, fetch_holosoma, load_policy_spec, run_policy_loop
from contactflow.robot import load_robot
from contactflow.sim.mujoco_robot import sensor_values
from contactflow.sim.pd_robot import PDRobotSim, PDSimConfig

BUDGET_MS = 20.0


def _stats(x_s) -> dict:
    x = 1e3 * np.asarray(x_s)
    return {"mean_ms": float(x.mean()), "p50_ms": float(np.median(x)), "p95_ms": float(np.percentile(x, 95)),
            "max_ms": float(x.max())}


def per_step(spec, robot, steps: int, seed: int = 0) -> dict:
    """Time ``steps`` PolicyRunner steps on standing states with random joint perturbations."""
    sim = PDRobotSim(PDSimConfig(control_dt_s=spec.period_s), robot)
    r = sim.reset()
    rng = np.random.default_rng(seed)
    runner = PolicyRunner(spec)
    arms = len((robot.raw.get("teleop") or {}).get("arm_joints") or [])
    cmd = {"lin_vel": np.array([0.3, 0.0]), "ang_vel": np.zeros(1), "base_height": np.array([0.75]),
           "waist_yaw": np.zeros(1), "q_ref_arms": np.zeros(arms), "stiffness": np.array([70.0, 70, 70, 30, 30])}
    base = {k: np.array(v, copy=True) for k, v in sensor_values(r, robot).items()}
    states = []
    for _ in range(64):
        s = dict(base, q=base["q"].copy(), v=base["v"].copy())
        s["q"][7:] += 0.005 * rng.standard_normal(robot.n)
        s["v"][6:] += 0.05 * rng.standard_normal(robot.n)
        states.append(s)
    for k in range(100):  # warm-up (first inference allocates)
        runner.step(states[k % 64], cmd)
    total, obs, inf = [], [], []
    for k in range(steps):
        t0 = time.perf_counter()
        out = runner.step(states[k % 64], cmd)
        total.append(time.perf_counter() - t0)
        obs.append(out.diagnostics["obs_time_s"])
        inf.append(out.diagnostics["infer_time_s"])
    st = _stats(total)
    return {"step": st, "observation": _stats(obs), "inference": _stats(inf),
            "budget_share_mean": st["mean_ms"] / BUDGET_MS, "budget_share_max": st["max_ms"] / BUDGET_MS,
            "refused": runner.n_rejected, "model": str(spec.model.path)}


def bare_sim(robot, seconds: float) -> float:
    """Simulated seconds per wall second of PDRobotSim alone (constant default PD command)."""
    sim = PDRobotSim(PDSimConfig(), robot)
    sim.reset()
    n = int(round(seconds / sim.control_dt_s))
    q, kp, kd, ff = robot.theta_default.copy(), robot.K.copy(), robot.kd.copy(), np.zeros(robot.n)
    t0 = time.perf_counter()
    for _ in range(n):
        sim.step(q, kp, kd, ff)
    return n * sim.control_dt_s / (time.perf_counter() - t0)


def main() -> int:
    logging.getLogger("contactflow.policy").setLevel(logging.ERROR)  # refusals are counted, not printed
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2000, help="policy steps timed per spec")
    ap.add_argument("--loop-s", type=float, default=20.0, help="simulated seconds of the closed loop")
    args = ap.parse_args()
    result: dict = {"budget_ms": BUDGET_MS, "ort_intra_op_threads": 1}

    g1 = load_robot("g1")
    from contactflow.policy.testing import mlp_model

    with tempfile.TemporaryDirectory() as d:
        path, layers = mlp_model(Path(d) / "lac_standin.onnx", input_name="frames", input_shape=(1, 64, 95), n_out=23,
                                 hidden=(96, 256, 128), weight_scale=0.01)
        n_params = int(sum(W.size + b.size for W, b in layers))
        lac = load_policy_spec("lac", g1, model=path)
        result["lac_standin"] = dict(per_step(lac, g1, args.steps), parameters=n_params)
    print(f"LAC spec, stand-in MLP ({n_params / 1e6:.2f} M params): step {result['lac_standin']['step']['mean_ms']:.3f} ms "
          f"mean, {result['lac_standin']['step']['p95_ms']:.3f} ms p95 (inference "
          f"{result['lac_standin']['inference']['mean_ms']:.3f} ms) = {100 * result['lac_standin']['budget_share_mean']:.1f} % "
          f"of {BUDGET_MS:g} ms")

    try:
        fetch_holosoma("ppo_g1_29dof")
    except ModelFetchError as exc:
        print(f"holosoma: skipped ({exc})")
        result["holosoma"] = None
    else:
        g1_29 = load_robot("g1_29dof")
        holo = load_policy_spec("holosoma_g1_29dof_loco", g1_29)
        result["holosoma"] = per_step(holo, g1_29, args.steps)
        h = result["holosoma"]
        print(f"holosoma PPO: step {h['step']['mean_ms']:.3f} ms mean, {h['step']['p95_ms']:.3f} ms p95 (observation "
              f"{h['observation']['mean_ms']:.3f}, inference {h['inference']['mean_ms']:.3f}) = "
              f"{100 * h['budget_share_mean']:.2f} % of {BUDGET_MS:g} ms")
        loop = run_policy_loop(holo, g1_29, [(0.0, {}), (5.0, {"lin_vel": [0.5, 0.0]})], args.loop_s, summary=False)
        bare = bare_sim(g1_29, args.loop_s)
        result["loop"] = {k: loop[k] for k in ("sim_time_s", "loop_wall_time_s", "sim_s_per_wall_s", "policy_step_ms_mean",
                                                "sim_step_ms_mean", "fell_early", "n_rejected")}
        result["loop"]["bare_sim_s_per_wall_s"] = bare
        result["loop"]["loop_over_bare"] = loop["sim_s_per_wall_s"] / bare
        print(f"closed loop holosoma + PDRobotSim: {loop['sim_s_per_wall_s']:.1f} sim s / wall s "
              f"(policy {loop['policy_step_ms_mean']:.3f} ms + sim {loop['sim_step_ms_mean']:.3f} ms per 20 ms tick); "
              f"bare PDRobotSim {bare:.1f} sim s / wall s; ratio {loop['sim_s_per_wall_s'] / bare:.2f}")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
