"""input_filter node: SEIKO operator input processing, eq. (8), for every disabled effector.

Inputs:  ``command`` (``operator_command``, tick k) and ``desired`` (``desired``, tick k - lag,
         ``--lag`` default 2: the Retargeting's latest desired effector poses available without
         waiting, the centres of the boundDistance clamp).
Outputs: ``targets`` (``effector_targets``): filtered pose targets. Enabled contacts are passed
         through at their desired pose (the filter is reset to it, seiko.md §7.1).

Optional input ``admittance`` (``admittance_command``, tick k): admittance twists (eq. 14) added
to the operator's twists of the disabled effectors.

A malformed input message is reported and the previous targets are sent again.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from _runtime import declared_inputs, connect, Lockstep, Sender, base_parser, drain_after_finish, load_node_config, node_main


def se3_to_vec(M: pin.SE3) -> np.ndarray:
    return pin.SE3ToXYZQUAT(M)


def vec_to_se3(v: np.ndarray) -> pin.SE3:
    return pin.XYZQUATToSE3(np.asarray(v, dtype=float))


def main() -> int:
    from contactflow.messages import port_specs
    from contactflow.operator.input_filter import InputFilter, InputFilterConfig
    from contactflow.robot import load_robot

    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--realtime", action="store_true")
    p.add_argument("--lag", type=int, default=2,
                   help="ticks between the Retargeting output used as clamp centres and the current tick")
    args = p.parse_args()
    robot = load_robot(args.robot)
    cfg = load_node_config(InputFilterConfig, args.config, "input_filter")
    specs = port_specs(robot)
    effs = list(robot.contacts)

    data = robot.model.createData()
    pin.framesForwardKinematics(robot.model, data, robot.q_default)
    centers = {e: pin.SE3(data.oMf[robot.contacts[e].frame_id]) for e in effs}
    enabled = {e: robot.contacts[e].enabled for e in effs}
    filt = InputFilter(cfg, effs)  # every effector: a released contact becomes commandable
    filt.reset(centers)
    targets = dict(centers)
    zero = np.zeros(6)

    node = connect()
    sender = Sender(node, {"targets": specs["effector_targets"]}, cfg)
    inputs = {"command": (specs["operator_command"], 0), "desired": (specs["desired"], args.lag)}
    if "admittance" in declared_inputs(node, "input_filter"):
        inputs["admittance"] = (specs["admittance_command"], 0)
    lock = Lockstep(node, inputs, skip_missing=args.realtime)
    for tick in lock:
        des = tick.inputs["desired"]
        if des is not None:
            for i, e in enumerate(effs):
                centers[e] = vec_to_se3(des[f"pose_d.{e}"])
                enabled[e] = bool(des["enabled"][i] > 0.5)
        for e in effs:
            if enabled[e]:  # seiko.md §7.1: an enabled contact's filter is reset to its pose
                filt.reset_effector(e, centers[e])
        cmd = tick.inputs["command"]
        if cmd is not None:
            twists = {e: (cmd[f"twist.{e}"] if not enabled[e] else zero) for e in effs}
            adm = tick.inputs.get("admittance")
            if adm is not None:
                twists = {e: (tw + adm[f"twist.{e}"] if not enabled[e] else tw) for e, tw in twists.items()}
            out = filt.step(twists, centers)
            targets.update(out)
        for e in effs:
            if enabled[e]:
                targets[e] = centers[e]
        sender.send("targets", {f"pose.{e}": se3_to_vec(targets[e]) for e in effs}, seq=tick.k, t=tick.t, finished=tick.finished)
    if lock.finished_seen:
        drain_after_finish(node)
    return 0


if __name__ == "__main__":
    node_main("input_filter", main)
