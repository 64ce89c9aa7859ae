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
0.01 m/s and 3 N m, 0.05, 0.1 rad/s. The per-tick work is
:class:`contactflow.seiko.stages.AdmittanceStage` (also run by the in-process loop).
"""

from __future__ import annotations

from contactflow.nodes._runtime import base_parser, drain_after_finish, lockstep_for, node_main, sender_for


def main() -> int:
    from dora import Node

    from contactflow.contracts.messages import port_specs
    from contactflow.robot import load_robot
    from contactflow.seiko.stages import AdmittanceStage

    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--realtime", action="store_true")
    p.add_argument("--feet-angular", choices=["on", "off"], default="on",
                   help="angular part of the feet admittance (3 N m deadband, 0.05 (rad/s)/(N m))")
    p.add_argument("--effectors", nargs="*", default=None,
                   help="effectors with admittance (default: all); the others get a zero twist")
    args = p.parse_args()
    robot = load_robot(args.robot)
    specs = port_specs(robot)
    # ConfigError naming --effectors' unknown names
    stage = AdmittanceStage(robot, AdmittanceStage.default_params(robot, args.effectors, args.feet_angular == "on"))

    node = Node()
    sender = sender_for(node, "admittance", specs, {"robot": robot.name})
    lock = lockstep_for(node, "admittance", specs, offsets={"desired": 1}, skip_missing=args.realtime)
    for tick in lock:
        out = stage.tick(tick.inputs["sensors"], tick.inputs["desired"])
        sender.send("twist", out, seq=tick.k, t=tick.t, finished=tick.finished)
    if lock.finished_seen:
        drain_after_finish(node)
    return 0


if __name__ == "__main__":
    node_main("admittance", main)
