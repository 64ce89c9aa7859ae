"""seiko_stack node: the input filter, the SEIKO Retargeting and the SEIKO Controller in one process.

Inputs:  ``sensors`` (``sensors``, tick k) and ``command`` (``operator_command``, tick k).
Outputs: ``targets`` (``effector_targets``), ``desired`` (``desired``), ``command``
         (``joint_command``) and ``state`` (``controller_state``), tick k: the outputs of the three
         nodes it stands in for, so the recorder and the driver are wired as in the split graph.

The same stages as ``nodes/input_filter.py``, ``nodes/seiko_retargeting.py`` and
``nodes/seiko_controller.py`` (:mod:`contactflow.seiko.stages`) run one after the other on each
tick through :class:`contactflow.seiko.loop.SeikoPipeline` (the in-process loop of the tests and
benchmarks), fed exactly the messages those nodes would receive: with ``--lag L`` the input filter and
the Controller of tick k use the ``desired`` of tick k - L (kept here instead of received), so a
run gives the same outputs, bit for bit, as the split graph with ``--lag L`` on both nodes. What
it saves is the dora messaging between the three stages (six receives per tick) and two processes;
what it loses is running the two QPs concurrently (docs/benchmarks.md compares both).
``--config`` takes one graph config file; its ``input_filter``, ``seiko_retargeting`` and
``seiko_controller`` sections are used (each optional here). ``--sensor-lag`` as
``seiko_controller --sensor-lag``.

Each tick the Controller runs first and its ``command`` is sent at once; the input filter and the
Retargeting of the tick run after it (with ``--lag`` >= 1 neither depends on the other within a
tick, :meth:`SeikoPipeline.tick`), so the driver waits for the Controller's QP only.

``--realtime`` (with ``--no-controller``: the planner of ``seiko_talos_realtime_planner.yml``): a tick per ``sensors``
message, the newest one (:class:`Lockstep` real-time mode: skipped ones counted), the operator's
command sampled and held (the node stops when none came for ``--input-stale-s``: an operator that hangs);
when ticks were skipped the input filter steps over them, each with its own operator command (as
``input_filter --realtime``, at most :data:`contactflow.operator.input_filter.MAX_CATCH_UP_TICKS` at once).

``--no-controller`` (the planner of the real-time graph ``seiko_talos_realtime_planner.yml``): the input filter
and the Retargeting only (:meth:`SeikoPipeline.plan`), clocked by ``sensors`` (their time and seq only),
outputs ``targets`` and ``desired``; the Controller runs as its own node at a higher priority, so
the command never waits for the Retargeting and the two QPs run on two cores. With ``--lag L`` the
input filter of tick k uses the ``desired`` of tick k - L, as ``input_filter --lag L``.
"""

from __future__ import annotations

import time

from contactflow.nodes._runtime import (add_input_stale_argument, connect, base_parser, drain_after_finish, input_stale_s,
                                       int_at_least, load_node_config, lockstep_for, node_main, sender_for)


def main() -> int:
    from contactflow.environment import Environment, load_environment
    from contactflow.contracts.messages import port_specs
    from contactflow.operator.input_filter import MAX_SKIPPED_TICKS, InputFilterConfig
    from contactflow.robot import load_robot
    from contactflow.seiko.controller import ControllerConfig
    from contactflow.seiko.loop import SeikoPipeline
    from contactflow.seiko.retargeting import RetargetingConfig

    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--lag", type=int_at_least(0), default=2,
                   help="ticks between the Retargeting output used by the input filter and the Controller and the current tick")
    p.add_argument("--environment", action="store_true", help="the robot file's surfaces (walls, supports) for refusing contacts far from any surface (default: the floor only)")
    p.add_argument("--sensor-lag", type=int, default=0, choices=(0, 1),
                   help="the Controller's command of tick k from the sensors of tick k - 1 (seiko_controller --sensor-lag)")
    p.add_argument("--realtime", action="store_true",
                   help="a tick per newest sensors message, the operator's command sampled and held (real-time graph)")
    add_input_stale_argument(p, "the operator's `command`")
    p.add_argument("--no-controller", action="store_true",
                   help="the input filter and the Retargeting only, outputs targets and desired (the real-time graph's planner)")
    args = p.parse_args()
    robot = load_robot(args.robot)
    fcfg = load_node_config(InputFilterConfig, args.config, "input_filter", required=False)
    rcfg = load_node_config(RetargetingConfig, args.config, "seiko_retargeting", required=False)
    ccfg = load_node_config(ControllerConfig, args.config, "seiko_controller", required=False)
    specs = port_specs(robot)
    env = load_environment(robot.raw.get("environment"), f"{robot.name}:environment") if args.environment else Environment()  # the floor
    pipeline = SeikoPipeline(robot, filter_config=fcfg, retargeting_config=rcfg, controller_config=ccfg,
                             environment=env, lag=args.lag, sensor_lag=args.sensor_lag,
                             controller=not args.no_controller)  # ConfigError on a bad --lag

    node = connect()
    sender = sender_for(node, "seiko_stack", specs,
                        {"input_filter": fcfg, "seiko_retargeting": rcfg, "controller": ccfg, "lag": args.lag,
                         "sensor_lag": args.sensor_lag, "realtime": args.realtime, "with_controller": not args.no_controller})
    # (the tick's t: the metadata of the last offset-0 input listed, the operator's command;
    # real time: the clock, the sensors)
    lock = lockstep_for(node, "seiko_stack", specs, skip_missing=args.realtime, clock="sensors",
                        stale_s=input_stale_s(args), per_tick=("command",) if args.realtime else (),
                        max_per_tick=MAX_SKIPPED_TICKS,
                        values_unused=("sensors",) if args.no_controller else ())
    end = None
    t_prev = None  # the time of the previous tick's sensors
    cur = {"k": 0, "t": 0.0}  # the tick computed: its seq, the time of the sensors its Controller used

    def stamp(tick) -> None:
        # the Controller's outputs carry the time of the sensors it used (--sensor-lag 1: the tick before)
        nonlocal t_prev
        s = tick.inputs["sensors"]
        t_now = float(s["t"][0]) if s is not None else None
        t_used = t_prev if args.sensor_lag else t_now
        cur["k"], cur["t"] = tick.k, (tick.t if t_used is None else t_used)
        t_prev = t_now

    def send_command(command, state, fin) -> None:
        # the Controller's outputs end the run `lag` ticks after the operator, as in the split graph,
        # where the Controller sees `finished` on the desired of tick k - lag
        sender.send("command", command, seq=cur["k"], t=cur["t"], finished=fin)
        sender.send("state", state, seq=cur["k"], t=cur["t"], finished=fin)

    if args.no_controller:
        return _plan_only(node, sender, lock, pipeline)
    for tick in lock:
        t0 = time.perf_counter()
        stamp(tick)
        # the input filter and the Retargeting are stamped with the operator's tick time, as in the split graph
        t_op, k, s = tick.t, tick.k, tick.inputs["sensors"]
        out = pipeline.tick(k, tick.t, s, tick.inputs["command"], command_error=tick.errors.get("command"),
                            finished=tick.finished, t_start=t0, on_command=send_command,
                            skipped_commands=[h["command"] for h in tick.skipped])
        fin, delayed_fin = tick.finished, out.delayed_finished
        sender.send("targets", out.targets, seq=tick.k, t=t_op, finished=fin)
        sender.send("desired", out.desired_vec, seq=tick.k, t=t_op, finished=fin,
                    solve_time_s=float(pipeline.retargeting.out.diagnostics.get("solve_time_s", 0.0)))
        sender.end_of_tick(tick.k)  # the log batch now, not before the next tick's command
        pipeline.controller.prepare()  # the next QP (11)'s flexible-state part (seiko_controller node)
        if fin and not delayed_fin:
            end = tick.k
            break
    if end is not None:
        # after the operator's last command (which may be its last message: the scenario operator
        # stops there), only the Controller runs, on the sensors, up to the desired that carries
        # `finished`: the split graph's input filter and Retargeting end at the operator's end too
        tail = lockstep_for(node, "seiko_stack", specs, only=("sensors",), skip_missing=args.realtime)
        tail.k, tail.finished_seen = end + 1, True
        tail.buffers["sensors"].update(lock.buffers["sensors"])  # the sensors already received
        tail.newest["sensors"] = lock.newest["sensors"]  # so that a re-sent one (repeat) is known as received
        for tick in tail:
            stamp(tick)
            out = pipeline.tail_tick(tick.k, tick.inputs["sensors"], t_start=time.perf_counter())
            send_command(out.command, out.state, out.delayed_finished)
            if out.delayed_finished:
                break
    if lock.finished_seen:
        drain_after_finish(node)
    return 0


def _plan_only(node, sender, lock, pipeline) -> int:
    """``--no-controller``: the input filter and the Retargeting per tick, until the operator's end."""
    for tick in lock:
        out = pipeline.plan(tick.k, tick.t, tick.inputs["command"], command_error=tick.errors.get("command"),
                            finished=tick.finished, skipped_commands=[h["command"] for h in tick.skipped])
        sender.send("targets", out.targets, seq=tick.k, t=tick.t, finished=tick.finished)
        sender.send("desired", out.desired_vec, seq=tick.k, t=tick.t, finished=tick.finished,
                    solve_time_s=float(pipeline.retargeting.out.diagnostics.get("solve_time_s", 0.0)))
        sender.end_of_tick(tick.k)
        if tick.finished:
            break
    if lock.finished_seen:
        drain_after_finish(node)
    return 0


if __name__ == "__main__":
    node_main("seiko_stack", main)
