"""seiko_retargeting node: SEIKO Retargeting QP (9) at the control rate.

Inputs:  ``targets`` (``effector_targets``, tick k): pose targets of the disabled effectors.
Outputs: ``desired`` (``desired``, tick k): desired posture, rates, ahead joint command, joint
         torques, contact wrenches and their rates, desired effector poses, QP status.

At start the node resets the Retargeting on the robot's default posture (static inverse dynamics
gives the initial contact wrenches). If the QP fails, the Retargeting keeps its last posture and
wrenches (zero rates), the message carries ``ok = 0`` and a warning is logged.
"""

from __future__ import annotations

import logging

import numpy as np
import pinocchio as pin

from _runtime import connect, Lockstep, Sender, base_parser, drain_after_finish, load_node_config, node_main

log = logging.getLogger("contactflow.seiko_retargeting")


def pack_desired(robot, out) -> dict:
    effs = list(robot.contacts)
    vals = {
        "q_d": out.q,
        "v_d": out.v,
        "theta_ahead": out.theta_ahead,
        "tau_d": out.tau,
        "enabled": np.array([1.0 if out.enabled[e] else 0.0 for e in effs]),
        "ok": 1.0 if out.ok else 0.0,
    }
    for e in effs:
        lam = np.zeros(6)
        lam[: len(out.lam[e])] = out.lam[e]
        dlam = np.zeros(6)
        dlam[: len(out.lam_dot[e])] = out.lam_dot[e]
        vals[f"lam_d.{e}"] = lam
        vals[f"lam_d_dot.{e}"] = dlam
        vals[f"pose_d.{e}"] = pin.SE3ToXYZQUAT(out.poses[e])
    return vals


def main() -> int:
    from contactflow.messages import port_specs
    from contactflow.robot import load_robot
    from contactflow.seiko.retargeting import RetargetingConfig, SeikoRetargeting

    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--realtime", action="store_true")
    args = p.parse_args()
    robot = load_robot(args.robot)
    cfg = load_node_config(RetargetingConfig, args.config, "seiko_retargeting")
    specs = port_specs(robot)
    effs = list(robot.contacts)
    retargeting = SeikoRetargeting(cfg, robot)
    out = retargeting.reset()
    targets = {e: out.poses[e] for e in effs if not out.enabled[e]}

    node = connect()
    sender = Sender(node, {"desired": specs["desired"]}, cfg)
    failures = 0
    lock = Lockstep(node, {"targets": (specs["effector_targets"], 0)}, skip_missing=args.realtime)
    for tick in lock:
        tg = tick.inputs["targets"]
        if tg is not None:
            targets = {e: pin.XYZQUATToSE3(np.array(tg[f"pose.{e}"])) for e in effs if not out.enabled[e]}
        out = retargeting.step(targets)
        if not out.ok:
            failures += 1
            if failures <= 5 or failures % 500 == 0:
                log.warning("tick %d: retargeting QP failed (%s); holding the last posture", tick.k, out.diagnostics.get("status"))
        sender.send("desired", pack_desired(robot, out), seq=tick.k, t=tick.t, finished=tick.finished,
                    solve_time_s=float(out.diagnostics.get("solve_time_s", 0.0)))
    if lock.finished_seen:
        drain_after_finish(node)
    if failures:
        log.warning("retargeting QP failed on %d ticks", failures)
    return 0


if __name__ == "__main__":
    node_main("seiko_retargeting", main)
