"""admittance node: SEIKO effector admittance, eq. (14), on the disabled effectors.

Inputs:  ``sensors`` (``sensors``, tick k): measured sole wrenches (LOCAL) and hand forces (world);
         ``desired`` (``desired``, tick k-1): which effectors are enabled contacts and their
         desired orientations (to rotate the sole wrenches into world axes).
Outputs: ``twist`` (``admittance_command``): per effector a world twist [v; omega] that the
         input filter adds to the operator's command (seiko.md §6.8): zero for enabled contacts.

``--effectors`` restricts the admittance to some effectors (the multi-contact graph leaves out the
right ball hand: its force is estimated from joint torques, quasi-statically, and in single
support the body's roll oscillation alone gives > 10 N of estimate error, which the admittance
then turns into a hand drift of up to 0.1 m/s).

Talos gains (seiko.md §6.8): hands 10 N deadband, 0.003 (m/s)/N, 0.1 m/s; feet 50 N, 0.0005,
0.01 m/s and 3 N m, 0.05, 0.1 rad/s.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from _runtime import Lockstep, Sender, base_parser, drain_after_finish, node_main


def main() -> int:
    from dora import Node

    from contactflow.errors import ConfigError
    from contactflow.messages import port_specs
    from contactflow.robot import load_robot
    from contactflow.seiko.admittance import AdmittanceParams, EffectorAdmittance

    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--realtime", action="store_true")
    p.add_argument("--feet-angular", choices=["on", "off"], default="on",
                   help="angular part of the feet admittance (3 N m deadband, 0.05 (rad/s)/(N m))")
    p.add_argument("--effectors", nargs="*", default=None,
                   help="effectors with admittance (default: all); the others get a zero twist")
    args = p.parse_args()
    robot = load_robot(args.robot)
    specs = port_specs(robot)
    effs = list(robot.contacts)
    foot = AdmittanceParams.foot()
    if args.feet_angular == "off":
        foot = AdmittanceParams(deadband_lin_n=foot.deadband_lin_n, gain_lin=foot.gain_lin, clamp_lin_mps=foot.clamp_lin_mps)
    adm = {e: EffectorAdmittance(foot if robot.contacts[e].type == "plane" else AdmittanceParams.hand()) for e in effs}
    active = set(effs if args.effectors is None else args.effectors)
    unknown = active - set(effs)
    if unknown:
        raise ConfigError(f"--effectors: unknown effector(s) {sorted(unknown)}; expected some of {effs}")
    enabled = {e: robot.contacts[e].enabled for e in effs}
    data = robot.model.createData()
    pin.framesForwardKinematics(robot.model, data, robot.q_default)
    rot = {e: data.oMf[robot.contacts[e].frame_id].rotation.copy() for e in effs}

    node = Node()
    sender = Sender(node, {"twist": specs["admittance_command"]}, {"robot": robot.name})
    lock = Lockstep(node, {"sensors": (specs["sensors"], 0), "desired": (specs["desired"], 1)}, skip_missing=args.realtime)
    zero = np.zeros(6)
    for tick in lock:
        d = tick.inputs["desired"]
        if d is not None:
            for i, e in enumerate(effs):
                enabled[e] = bool(d["enabled"][i] > 0.5)
                rot[e] = pin.Quaternion(*np.roll(d[f"pose_d.{e}"][3:7], 1)).toRotationMatrix()
        s = tick.inputs["sensors"]
        out = {}
        for e in effs:
            w = None
            if s is not None and f"wrench.{e}" in s:
                w = np.concatenate([rot[e] @ s[f"wrench.{e}"][:3], rot[e] @ s[f"wrench.{e}"][3:]])
            elif s is not None and f"force.{e}" in s:
                w = np.asarray(s[f"force.{e}"])
            out[f"twist.{e}"] = zero if (w is None or e not in active) else adm[e].step(w, enabled[e])
        sender.send("twist", out, seq=tick.k, t=tick.t, finished=tick.finished)
    if lock.finished_seen:
        drain_after_finish(node)
    return 0


if __name__ == "__main__":
    node_main("admittance", main)
