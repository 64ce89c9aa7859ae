"""input_filter node: SEIKO operator input processing, eq. (8), for every disabled effector.

Inputs:  ``command`` (``operator_command``, tick k) and ``desired`` (``desired``, tick k - lag,
         ``--lag`` default 2: the Retargeting's latest desired effector poses available without
         waiting, the centres of the boundDistance clamp).
Outputs: ``targets`` (``effector_targets``): filtered pose targets. Enabled contacts are passed
         through at their desired pose (the filter is reset to it, seiko.md §7.1).

Optional input ``admittance`` (``admittance_command``, tick k): admittance twists (eq. 14) added
to the operator's twists of the disabled effectors. Optional input ``sensors`` (the driver's
``sensors``; values unused): with ``--realtime``, the clock, a tick per newest sensors message (the
real-time graph, whose operator sends its commands ahead of the driver in batches).

A malformed input message is reported and the previous targets are sent again.

``--realtime``: the operator's command is sampled (latest value); when commands were skipped, the
filter steps once per skipped tick with the newest command (a zero-order hold of the twist), so
the targets integrate the operator's motion over the elapsed time (at most ``MAX_CATCH_UP_TICKS``
at once).
"""

from __future__ import annotations

from contactflow.nodes._runtime import (connect, base_parser, declared_inputs, drain_after_finish, load_node_config, lockstep_for, node_main,
                                       sender_for)


#: real-time mode: at most this many skipped ticks are integrated at once (0.1 s at 500 Hz; a longer
#: gap loses the rest of the operator's motion instead of making this tick slower still)
MAX_CATCH_UP_TICKS = 50


def main() -> int:
    from contactflow.contracts.messages import port_specs
    from contactflow.operator.input_filter import InputFilterConfig
    from contactflow.robot import load_robot
    from contactflow.seiko.stages import InputFilterStage

    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--realtime", action="store_true")
    p.add_argument("--lag", type=int, default=2,
                   help="ticks between the Retargeting output used as clamp centres and the current tick")
    args = p.parse_args()
    robot = load_robot(args.robot)
    cfg = load_node_config(InputFilterConfig, args.config, "input_filter")
    specs = port_specs(robot)
    stage = InputFilterStage(robot, cfg)

    node = connect()
    sender = sender_for(node, "input_filter", specs, cfg)
    # + `admittance` when wired
    # `sensors`, when wired (the real-time graph), is the clock: a tick per newest sensors message, so an
    # operator that sends its commands ahead in batches is sampled at the driver's pace
    clock = "sensors" if "sensors" in declared_inputs(node, "input_filter") else None
    lock = lockstep_for(node, "input_filter", specs, offsets={"desired": args.lag}, skip_missing=args.realtime,
                        clock=clock)
    for tick in lock:
        for _ in range(min(tick.ticks, MAX_CATCH_UP_TICKS) - 1):  # real-time: the ticks skipped before this one
            stage.tick(tick.inputs["command"], tick.inputs["desired"], tick.inputs.get("admittance"))
        targets = stage.tick(tick.inputs["command"], tick.inputs["desired"], tick.inputs.get("admittance"))
        sender.send("targets", targets, seq=tick.k, t=tick.t, finished=tick.finished)
    if lock.finished_seen:
        drain_after_finish(node)
    return 0


if __name__ == "__main__":
    node_main("input_filter", main)
