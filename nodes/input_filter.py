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

A malformed input message is reported and the previous targets are sent again. A ``dt_s`` (its
config's) that is not the time step of its ticks is refused at the second tick (``ConfigError``: one
line).

``--realtime``: the operator's command is sampled (latest value); when ticks were skipped, the
filter steps once per skipped tick with that tick's own command (and admittance twist) from the
inputs' buffers (the newest message at or before it: a zero-order hold where the operator sent
none), so the targets integrate the operator's motion over the elapsed time (at most
:data:`contactflow.operator.input_filter.MAX_CATCH_UP_TICKS` at once).
"""

from __future__ import annotations

from contactflow.nodes._runtime import (connect, base_parser, declared_inputs, drain_after_finish, int_at_least, load_node_config,
                                       lockstep_for, node_main, sender_for)


def main() -> int:
    from contactflow.contracts.messages import port_specs
    from contactflow.operator.input_filter import MAX_SKIPPED_TICKS, InputFilterConfig
    from contactflow.robot import load_robot
    from contactflow.seiko.config_checks import PeriodCheck
    from contactflow.seiko.stages import InputFilterStage

    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--realtime", action="store_true")
    p.add_argument("--lag", type=int_at_least(1), default=2,
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
    wired = declared_inputs(node, "input_filter")
    clock = "sensors" if "sensors" in wired else None
    # real-time: each skipped tick's own operator command (and admittance twist), from the inputs' buffers
    per_tick = ["command", *(["admittance"] if "admittance" in wired else [])]
    lock = lockstep_for(node, "input_filter", specs, offsets={"desired": args.lag}, skip_missing=args.realtime,
                        clock=clock, per_tick=per_tick if args.realtime else (),
                        max_per_tick=MAX_SKIPPED_TICKS, values_unused=[clock] if clock else ())
    period = PeriodCheck(cfg, "the time step of its ticks, the driver's sensors" if clock else
                         "the time step of its ticks, the operator's commands")
    for tick in lock:
        period(tick.k, tick.t)
        for held in tick.skipped:  # real-time: the ticks skipped before this one, oldest first
            stage.tick(held["command"], tick.inputs["desired"],
                       held.get("admittance", tick.inputs.get("admittance")))
        targets = stage.tick(tick.inputs["command"], tick.inputs["desired"], tick.inputs.get("admittance"))
        sender.send("targets", targets, seq=tick.k, t=tick.t, finished=tick.finished)
    if lock.finished_seen:
        drain_after_finish(node)
    return 0


if __name__ == "__main__":
    node_main("input_filter", main)
