"""seiko_retargeting node: SEIKO Retargeting QP (9) at the control rate.

Inputs:  ``targets`` (``effector_targets``, tick k): pose targets of the disabled effectors;
         ``command`` (``operator_command``, tick k, optional): requested contact state and
         pushing mode per effector (a change is a request, §7.2-7.4) and normal-force velocities.
Outputs: ``desired`` (``desired``, tick k): desired posture, rates, ahead joint command, joint
         torques, contact wrenches and their rates and targets, desired effector poses,
         switching / pushing state, refused-request count, QP status.

``--environment`` loads the surfaces of the robot file's ``environment:`` section, so that
enabling a contact far from every surface is refused. A refused request is logged with its
reason and counted in ``n_refused``; the robot keeps its current contacts.

At start the node resets the Retargeting on the robot's default posture (static inverse dynamics
gives the initial contact wrenches). If the QP fails, the Retargeting keeps its last posture and
wrenches (zero rates), the message carries ``ok = 0`` and a warning is logged.
"""

from __future__ import annotations

import logging

import numpy as np
import pinocchio as pin

from _runtime import declared_inputs, connect, Lockstep, Sender, base_parser, drain_after_finish, load_node_config, node_main

log = logging.getLogger("contactflow.seiko_retargeting")


def pack_desired(robot, out, n_refused: int = 0) -> dict:
    effs = list(robot.contacts)
    vals = {
        "q_d": out.q,
        "v_d": out.v,
        "theta_ahead": out.theta_ahead,
        "tau_d": out.tau,
        "enabled": np.array([1.0 if out.enabled[e] else 0.0 for e in effs]),
        "ok": 1.0 if out.ok else 0.0,
        "switching": np.array([{"enabling": 1.0, "disabling": -1.0}.get(out.switching.get(e, ""), 0.0) for e in effs]),
        "push": np.array([1.0 if out.push.get(e, False) else 0.0 for e in effs]),
        "n_refused": float(n_refused),
    }
    for e in effs:
        lam = np.zeros(6)
        lam[: len(out.lam[e])] = out.lam[e]
        dlam = np.zeros(6)
        dlam[: len(out.lam_dot[e])] = out.lam_dot[e]
        vals[f"lam_d.{e}"] = lam
        vals[f"lam_d_dot.{e}"] = dlam
        lt = np.zeros(6)
        src = out.lam_target.get(e)
        if src is not None:
            lt[: len(src)] = src
        vals[f"lam_target.{e}"] = lt
        vals[f"pose_d.{e}"] = pin.SE3ToXYZQUAT(out.poses[e])
    return vals


def main() -> int:
    from contactflow.environment import load_environment
    from contactflow.messages import port_specs
    from contactflow.robot import load_robot
    from contactflow.seiko.retargeting import RetargetingConfig, SeikoRetargeting

    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--realtime", action="store_true")
    p.add_argument("--environment", action="store_true", help="refuse enabling contacts far from the robot file's surfaces")
    args = p.parse_args()
    robot = load_robot(args.robot)
    cfg = load_node_config(RetargetingConfig, args.config, "seiko_retargeting")
    specs = port_specs(robot)
    effs = list(robot.contacts)
    env = load_environment(robot.raw.get("environment"), f"{robot.name}:environment") if args.environment else None
    retargeting = SeikoRetargeting(cfg, robot, env)
    out = retargeting.reset()
    targets = {e: out.poses[e] for e in effs if not out.enabled[e]}
    # last operator request per effector (edges are requests)
    req_enable = {e: robot.contacts[e].enabled for e in effs}
    req_push = {e: False for e in effs}

    node = connect()
    sender = Sender(node, {"desired": specs["desired"]}, cfg)
    failures = 0
    inputs = {"targets": (specs["effector_targets"], 0)}
    if "command" in declared_inputs(node, "seiko_retargeting"):
        inputs["command"] = (specs["operator_command"], 0)
    lock = Lockstep(node, inputs, skip_missing=args.realtime)
    for tick in lock:
        tg = tick.inputs["targets"]
        if tg is not None:
            targets = {e: pin.XYZQUATToSE3(np.array(tg[f"pose.{e}"])) for e in effs if not out.enabled[e]}
        rates = {}
        cmd = tick.inputs.get("command")
        if cmd is not None:
            for i, e in enumerate(effs):
                en = bool(cmd["enable"][i] > 0.5)
                if en != req_enable[e]:
                    req_enable[e] = en
                    r = retargeting.request_contact(e, en)
                    if r.accepted:  # a refusal is logged (as a warning) by the Retargeting itself
                        log.info("t = %.3f s: %s %s: %s", tick.t, "enable" if en else "disable", e, r.message)
                pu = bool(cmd["push"][i] > 0.5)
                if pu != req_push[e]:
                    req_push[e] = pu
                    r = retargeting.request_push(e, pu)
                    if r.accepted:
                        log.info("t = %.3f s: push %s %s: %s", tick.t, "on" if pu else "off", e, r.message)
                if cmd["force_rate"][i] != 0.0:
                    rates[e] = float(cmd["force_rate"][i])
        elif "command" in tick.errors:
            log.warning("tick %d: malformed operator command ignored (no switch, no push): %s", tick.k, tick.errors["command"])
        out = retargeting.step(targets, rates)
        if not out.ok:
            failures += 1
            if failures <= 5 or failures % 500 == 0:
                log.warning("tick %d: retargeting QP failed (%s); holding the last posture", tick.k, out.diagnostics.get("status"))
        sender.send("desired", pack_desired(robot, out, retargeting.n_refused), seq=tick.k, t=tick.t, finished=tick.finished,
                    solve_time_s=float(out.diagnostics.get("solve_time_s", 0.0)))
    if lock.finished_seen:
        drain_after_finish(node)
    if failures:
        log.warning("retargeting QP failed on %d ticks", failures)
    return 0


if __name__ == "__main__":
    node_main("seiko_retargeting", main)
