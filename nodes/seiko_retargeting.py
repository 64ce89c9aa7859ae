"""seiko_retargeting node: SEIKO Retargeting QP (9) at the control rate.

Inputs:  ``targets`` (``effector_targets``, tick k): pose targets of the disabled effectors;
         ``command`` (``operator_command``, tick k, optional): requested contact state and
         pushing mode per effector (a change is a request, §7.2-7.4) and normal-force velocities.
Outputs: ``desired`` (``desired``, tick k): desired posture, rates, ahead joint command, joint
         torques, contact wrenches and their rates and targets, desired effector poses,
         switching / pushing state, refused-request count, QP status.

Enabling a contact far from every surface is refused: the surfaces are the floor, plus, with
``--environment``, the boxes of the robot file's ``environment:`` section. A refused request is logged with its
reason and counted in ``n_refused``; the robot keeps its current contacts.

At start the node resets the Retargeting on the robot's default posture (static inverse dynamics
gives the initial contact wrenches). If the QP fails, the Retargeting keeps its last posture and
wrenches (zero rates), the message carries ``ok = 0`` and a warning is logged. A ``dt_s`` (its
config's) that is not the time step of its ticks is refused at the second tick (``ConfigError``: one
line).
"""

from __future__ import annotations

import dataclasses

from contactflow.nodes._runtime import (connect, base_parser, drain_after_finish, load_node_config, lockstep_for, node_main,
                                       sender_for)


def main() -> int:
    import logging

    from contactflow.environment import Environment, load_environment
    from contactflow.contracts.messages import port_specs
    from contactflow.robot import load_robot
    from contactflow.seiko.config_checks import PeriodCheck
    from contactflow.seiko.retargeting import RetargetingConfig
    from contactflow.seiko.stages import RetargetingStage

    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--realtime", action="store_true")
    p.add_argument("--environment", action="store_true", help="the robot file's surfaces (walls, supports) for refusing contacts far from any surface (default: the floor only)")
    args = p.parse_args()
    robot = load_robot(args.robot)
    cfg = load_node_config(RetargetingConfig, args.config, "seiko_retargeting")
    specs = port_specs(robot)
    env = load_environment(robot.raw.get("environment"), f"{robot.name}:environment") if args.environment else Environment()  # the floor
    stage = RetargetingStage(robot, cfg, env)
    period = PeriodCheck(cfg, "the time step of its ticks, the input filter's targets")

    node = connect()
    logging.getLogger("contactflow.seiko_retargeting").info(
        "QP (9) kinematics computed by the %s kernel (RetargetingConfig.kernel: %s)", stage.retargeting.kernel, cfg.kernel)
    # its configuration as recorded, and kernel_used: the kernel that computes QP (9)'s kinematics here (cfg.kernel is
    # the configured one, e.g. auto)
    sender = sender_for(node, "seiko_retargeting", specs, {**dataclasses.asdict(cfg), "kernel_used": stage.retargeting.kernel})
    lock = lockstep_for(node, "seiko_retargeting", specs, skip_missing=args.realtime)  # + `command` when wired
    for tick in lock:
        period(tick.k, tick.t)
        desired = stage.tick(tick.k, tick.t, tick.inputs["targets"], tick.inputs.get("command"), tick.errors.get("command"))
        sender.send("desired", desired, seq=tick.k, t=tick.t, finished=tick.finished,
                    solve_time_s=float(stage.out.diagnostics.get("solve_time_s", 0.0)))
    if lock.finished_seen:
        drain_after_finish(node)
    if stage.failures:
        logging.getLogger("contactflow.seiko_retargeting").warning("retargeting QP failed on %d ticks", stage.failures)
    return 0


if __name__ == "__main__":
    node_main("seiko_retargeting", main)
