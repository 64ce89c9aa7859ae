"""Identify, correct, rerun: SEIKO with the nominal vs the PRIME-corrected model (issue 17 item 4).

    contactflow prime apply RUN_prime --out recordings/talos_corrected   # the corrected robot
    python benchmarks/bench_prime_apply.py --corrected recordings/talos_corrected --json docs/prime_apply_base.json
    # the Fig. 6 load (9 kg at the right hand, dataflows/seiko_talos_far_reach.yml), identified as
    # the arm_right_4 body (prime estimate --bodies arm_right_4_joint) on a stand_7s recording:
    python benchmarks/bench_prime_apply.py --corrected recordings/talos_hand_corrected --scenarios far_reach \
        --payload-graph dataflows/seiko_talos_far_reach.yml --json docs/prime_apply_hand.json

The simulated Talos carries the payload of ``dataflows/prime_seiko_talos_payload.yml`` (read from
that graph's ``mujoco_driver --payload``: 6.3 kg on ``base_link``) in every run; only the model of
SEIKO's stages (input filter, Retargeting, Controller: :class:`contactflow.seiko.loop.SeikoPipeline`)
changes: the nominal robot, or the variant ``contactflow prime apply`` wrote from a PRIME estimate
of the payload graph's recording (``stand_7s.yaml``). Scenarios the identification did not see:

* ``hand_forward``: the payload graph's own scenario (left hand 0.30 m forward and back), as
  ``seiko_talos.yml`` runs it (``--lag 2``, Controller ``--sensor-lag 1``), default settings;
* ``far_reach``: the Fig. 6 reach (right hand 0.40 m forward, 0.25 m up at 2 cm/s) with
  ``max_tau_ratio = 0.6``, the 5 Hz ``tau_read`` filter and the operator of
  ``bench_seiko_reach_load.py`` who stops reaching once a measured joint torque passes 0.6 of its
  limit ("as far as allowed by the controller"; (12) fires on the same tick). No hand load here:
  the unmodelled mass is the base payload. Run to 30 s (the reach out ends at 28.6 s).

In-process closed loop (:class:`contactflow.seiko.loop.SeikoLoop`), MuJoCo physics. Metrics
(from t = 0.1 s): sole F_z tracking RMSE and mean error per foot, measured (MuJoCo sole sensor,
LOCAL frame) vs the Retargeting's ``lam_d`` the Controller used (tick k - lag); hand position
error |p - p_d(k - lag)| of the moving hand; |tau| / tau_max of the loaded joints (legs and
torso: they carry the base payload; and arm_right_2, the far reach's shoulder): max and fraction
of the run above 0.6; on far_reach, when the operator stopped and how far the hand travelled
(forward, up) by then. Prints a markdown table; ``--json`` writes the numbers.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import pinocchio as pin
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from contactflow.robot import load_robot  # noqa: E402
from contactflow.seiko.controller import ControllerConfig  # noqa: E402
from contactflow.seiko.loop import DT_S, SeikoLoop, SeikoPipeline  # noqa: E402
from contactflow.sim.driver import parse_payload  # noqa: E402

GRAPH = ROOT / "dataflows/prime_seiko_talos_payload.yml"
T_SKIP_S = 0.1
RATIO = 0.6
SCENARIOS = {
    # name -> (scenario file, moving hand, controller overrides, stop-at-ratio operator, duration [s])
    "hand_forward": ("robots/talos/scenarios/hand_forward.yaml", "left_hand", {}, False, None),
    # cut at 30 s: the reach out ends at 28.6 s (the return is not measured)
    "far_reach": ("robots/talos/scenarios/far_reach.yaml", "right_hand",
                  {"max_tau_ratio": RATIO, "tau_read_cutoff_hz": 5.0}, True, 30.0),
}


def graph_payload(graph: Path = GRAPH) -> list:
    """A graph's ``mujoco_driver --payload`` options as PointMasses (one source)."""
    nodes = {n["id"]: n for n in yaml.safe_load(Path(graph).read_text())["nodes"]}
    args = shlex.split(nodes["mujoco_driver"]["args"])
    texts = [args[i + 1] for i, a in enumerate(args) if a == "--payload"]
    return [parse_payload(t, i) for i, t in enumerate(texts)]


class _Logging(SeikoPipeline):
    """A SeikoPipeline that keeps the desired sole wrenches of each tick (``lam_d.<foot>``)."""

    def __init__(self, *a, feet=(), **kw):
        super().__init__(*a, **kw)
        self.feet = feet
        self.lam_d = []

    def tick(self, *a, **kw):
        out = super().tick(*a, **kw)
        self.lam_d.append([np.array(out.desired[f"lam_d.{f}"]) for f in self.feet])
        return out


def run(scenario: str, model_robot, sim_robot, payload, lag: int = 2, sensor_lag: int = 1,
        duration_s: float | None = None) -> dict:
    """One closed-loop run: the simulated ``sim_robot`` + ``payload``, SEIKO on ``model_robot``."""
    from bench_seiko_reach_load import StopAtRatioOperator

    path, hand, ckw, stop, dur = SCENARIOS[scenario]
    duration_s = dur if duration_s is None else duration_s
    feet = [e for e, c in sim_robot.contacts.items() if c.type == "plane"]
    pipe = _Logging(model_robot, controller_config=ControllerConfig(**ckw), lag=lag, sensor_lag=sensor_lag, feet=feet)
    op = StopAtRatioOperator(sim_robot, RATIO) if stop else None
    loop = SeikoLoop(sim_robot, ROOT / path, extra_bodies=payload, pipeline=pipe, operator_hook=op,
                     duration_s=duration_s)
    t0 = time.perf_counter()
    while not loop.step():
        pass
    wall = time.perf_counter() - t0
    L = loop.log()
    T = len(L.t)
    keep = L.t >= T_SKIP_S
    lam_d = np.array(pipe.lam_d)  # (T, feet, 6), tick k; the Controller used tick k - lag
    m: dict = {"fell": bool(L.fell), "sim_s": float(L.t[-1]), "wall_s": round(wall, 1),
               "controller_failures": L.controller_failures, "retargeting_failures": L.retargeting_failures}
    for i, f in enumerate(feet):
        fz = L.wrench[f][lag:, 2]
        fz_d = lam_d[: T - lag, i, 2]
        e = (fz - fz_d)[keep[lag:]]
        m[f"{f}_fz_rmse_n"] = float(np.sqrt(np.mean(e**2)))
        m[f"{f}_fz_mean_error_n"] = float(np.mean(e))
    m["sum_fz_measured_mean_n"] = float(np.mean(sum(L.wrench[f][keep, 2] for f in feet)))
    m["sum_fz_desired_mean_n"] = float(np.mean(lam_d[keep, :, 2].sum(axis=1)))
    data = sim_robot.model.createData()
    fid = sim_robot.contacts[hand].frame_id
    p = np.empty((T, 3))
    for k, q in enumerate(L.q):
        pin.framesForwardKinematics(sim_robot.model, data, q)
        p[k] = data.oMf[fid].translation
    err = np.linalg.norm(p[lag:] - L.pose_d[hand][: T - lag], axis=1)[keep[lag:]]
    m[f"{hand}_error_rms_mm"] = float(1e3 * np.sqrt(np.mean(err**2)))
    m[f"{hand}_error_max_mm"] = float(1e3 * err.max())
    ratio = (np.abs(L.tau) / sim_robot.tau_max)[keep]
    groups = {"legs": [j for j in sim_robot.joint_names if j.startswith("leg_")],
              "torso": [j for j in sim_robot.joint_names if j.startswith("torso_")],
              "arm_right_2": ["arm_right_2_joint"]}
    for g, names in groups.items():
        r = ratio[:, sim_robot.joint_index(names)].max(axis=1)
        m[f"{g}_max_ratio"] = float(r.max())
        m[f"{g}_fraction_above_{RATIO}"] = float(np.mean(r > RATIO))
    worst = ratio.max(axis=1)
    m["all_max_ratio"] = float(worst.max())
    m["all_worst_joint"] = sim_robot.joint_names[int(np.argmax(ratio.max(axis=0)))]
    m[f"all_fraction_above_{RATIO}"] = float(np.mean(worst > RATIO))
    if op is not None:
        m["operator_stopped_at_s"] = op.stopped_at_s
        k_end = T if op.stopped_at_s is None else min(T, int(round(op.stopped_at_s / DT_S)) + 1)
        m["hand_travel_at_stop_fwd_up_m"] = [float(p[:k_end, 0].max() - p[0, 0]), float(p[:k_end, 2].max() - p[0, 2])]
        m["hand_travel_max_fwd_up_m"] = [float(p[:, 0].max() - p[0, 0]), float(p[:, 2].max() - p[0, 2])]
    return m


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corrected", required=True, help="the robot written by contactflow prime apply (folder or file)")
    ap.add_argument("--scenarios", default="hand_forward,far_reach")
    ap.add_argument("--payload-graph", default=str(GRAPH),
                    help="the graph whose mujoco_driver --payload the simulated robot carries (default: the "
                         "PRIME payload graph; dataflows/seiko_talos_far_reach.yml: 9 kg at the right hand)")
    ap.add_argument("--duration", type=float, default=None, help="cut every scenario to this many seconds")
    ap.add_argument("--json", default=None, help="write the numbers here")
    args = ap.parse_args()
    base = load_robot("talos")
    corr = load_robot(args.corrected)
    payload = graph_payload(args.payload_graph)
    print(f"# simulated: talos + {[(p.parent, p.mass, p.pos) for p in payload]}; model: talos "
          f"({base.mass:.3f} kg) vs {corr.name} ({corr.mass:.3f} kg; base body "
          f"{base.model.inertias[1].mass:.3f} -> {corr.model.inertias[1].mass:.3f} kg)", flush=True)
    body = {b: (base.model.inertias[base.model.getJointId(b)].mass, corr.model.inertias[base.model.getJointId(b)].mass)
            for b in (corr.raw.get("body_inertias") or {})}
    print(f"# corrected bodies (nominal -> identified kg): {body}", flush=True)
    res = {}
    for sc in args.scenarios.split(","):
        for label, model in (("nominal", base), ("corrected", corr)):
            res[f"{sc}/{label}"] = m = run(sc, model, base, payload, duration_s=args.duration)
            print(f"{sc}/{label}: {json.dumps(m)}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"corrected": str(args.corrected), "payload_graph": args.payload_graph,
                                               "payload": [[p.parent, p.mass, list(p.pos)] for p in payload],
                                               "corrected_bodies_kg": body, "results": res}, indent=2))
    keys = sorted({k for m in res.values() for k in m})
    print("\n| metric | " + " | ".join(res) + " |\n|---|" + "---|" * len(res))
    for k in keys:
        print(f"| {k} | " + " | ".join(_fmt(m.get(k)) for m in res.values()) + " |")


def _fmt(x) -> str:
    if isinstance(x, float):
        return f"{x:.3g}"
    if isinstance(x, list):
        return "[" + ", ".join(_fmt(v) for v in x) + "]"
    return str(x)


if __name__ == "__main__":
    main()
