"""seiko_stack node: the input filter, the SEIKO Retargeting and the SEIKO Controller in one process.

Inputs:  ``sensors`` (``sensors``, tick k) and ``command`` (``operator_command``, tick k).
Outputs: ``targets`` (``effector_targets``), ``desired`` (``desired``), ``command``
         (``joint_command``) and ``state`` (``controller_state``), tick k: the outputs of the three
         nodes it stands in for, so the recorder and the driver are wired as in the split graph.

The same stages as ``nodes/input_filter.py``, ``nodes/seiko_retargeting.py`` and
``nodes/seiko_controller.py`` (:mod:`contactflow.seiko.stages`) run one after the other on each
tick, fed exactly the messages those nodes would receive: with ``--lag L`` the input filter and
the Controller of tick k use the ``desired`` of tick k - L (kept here instead of received), so a
run gives the same outputs, bit for bit, as the split graph with ``--lag L`` on both nodes. What
it saves is the dora messaging between the three stages (six receives per tick) and two processes;
what it loses is running the two QPs concurrently (docs/benchmarks.md compares both).
``--config`` takes one graph config file; its ``input_filter``, ``seiko_retargeting`` and
``seiko_controller`` sections are used (each optional here).
"""

from __future__ import annotations

import collections
import time

from _runtime import connect, Lockstep, Sender, base_parser, drain_after_finish, load_node_config, node_main


def main() -> int:
    from contactflow.environment import load_environment
    from contactflow.errors import ConfigError
    from contactflow.messages import port_specs
    from contactflow.operator.input_filter import InputFilterConfig
    from contactflow.robot import load_robot
    from contactflow.seiko.controller import ControllerConfig
    from contactflow.seiko.retargeting import RetargetingConfig
    from contactflow.seiko.stages import ControllerStage, InputFilterStage, RetargetingStage

    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--lag", type=int, default=2,
                   help="ticks between the Retargeting output used by the input filter and the Controller and the current tick")
    p.add_argument("--environment", action="store_true", help="refuse enabling contacts far from the robot file's surfaces")
    args = p.parse_args()
    if args.lag < 1:
        raise ConfigError(f"--lag must be >= 1 (the stages run in order within a tick), got {args.lag}")
    robot = load_robot(args.robot)
    fcfg = load_node_config(InputFilterConfig, args.config, "input_filter", required=False)
    rcfg = load_node_config(RetargetingConfig, args.config, "seiko_retargeting", required=False)
    ccfg = load_node_config(ControllerConfig, args.config, "seiko_controller", required=False)
    specs = port_specs(robot)
    env = load_environment(robot.raw.get("environment"), f"{robot.name}:environment") if args.environment else None
    filt = InputFilterStage(robot, fcfg)
    retargeting = RetargetingStage(robot, rcfg, env)
    controller = ControllerStage(robot, ccfg, rcfg)
    dspec = specs["desired"]
    past: collections.deque = collections.deque(maxlen=args.lag)  # desired vectors of ticks k-lag .. k-1

    node = connect()
    sender = Sender(node, {"targets": specs["effector_targets"], "desired": dspec, "command": specs["joint_command"],
                           "state": specs["controller_state"]},
                    {"input_filter": fcfg, "seiko_retargeting": rcfg, "controller": ccfg, "lag": args.lag})
    lock = Lockstep(node, {"sensors": (specs["sensors"], 0), "command": (specs["operator_command"], 0)})
    for tick in lock:
        t0 = time.perf_counter()
        # the desired of tick k - lag as the split graph's nodes receive it (None before it exists)
        delayed, delayed_fin = (dspec.unpack(past[0][0]), past[0][1]) if len(past) == args.lag else (None, False)
        targets = filt.tick(tick.inputs["command"], delayed)
        tvec = specs["effector_targets"].pack(targets)
        desired = retargeting.tick(tick.k, tick.t, specs["effector_targets"].unpack(tvec), tick.inputs["command"],
                                   tick.errors.get("command"))
        dvec = dspec.pack(desired)
        command, state = controller.tick(tick.k, tick.inputs["sensors"], delayed, t_start=t0)
        fin = tick.finished
        past.append((dvec, fin))
        # the Controller's outputs end the run `lag` ticks after the operator, as in the split
        # graph, where the Controller sees `finished` on the desired of tick k - lag
        sender.send("command", command, seq=tick.k, t=tick.t, finished=delayed_fin)
        sender.send("targets", tvec, seq=tick.k, t=tick.t, finished=fin)
        sender.send("desired", dvec, seq=tick.k, t=tick.t, finished=fin,
                    solve_time_s=float(retargeting.out.diagnostics.get("solve_time_s", 0.0)))
        sender.send("state", state, seq=tick.k, t=tick.t, finished=delayed_fin)
    if lock.finished_seen:
        drain_after_finish(node)
    return 0


if __name__ == "__main__":
    node_main("seiko_stack", main)
