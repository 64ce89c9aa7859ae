"""seiko_controller node: SEIKO flexible-joint Controller, feedback law (10), QP (11), filter (13).

Inputs:  ``sensors`` (``sensors``, tick k): measured sole wrenches, hand forces (world frame,
         rotated here into the surface frames R_c) and joint torques;
         ``desired`` (``desired``, tick k - lag): the Retargeting output. ``--lag`` (default 2)
         pipelines the two QPs: the Controller of tick k uses the Retargeting of tick k-2, so they
         and the input filter run concurrently (2 ticks = 4 ms of extra latency on the operator's
         command; ``--lag 1`` = 2 ms, measured 20 % slower on 2 cores, docs/benchmarks.md).
Outputs: ``command`` (``joint_command``): theta_cmd = theta_d + offset;
         ``state`` (``controller_state``): flexible state and filter values (diagnostics).

Optional, with a ``wrench_filter`` node (SEIKO eq. 13 as its own stage, nodes/wrench_filter.py):
input ``wrench`` (``filtered_wrench``, tick k - ``--wrench-lag``, default 0) replaces the internal
complementary filter, and output ``flex_rate`` (``flex_wrench_rate``, tick k) feeds the filter back.
Both are used only when the graph wires ``wrench``.

Before the first Retargeting message arrives the node uses the Retargeting's reset state (the
same computation as the seiko_retargeting node). After sending each command the node computes the
part of the next QP (11) that depends only on the flexible state (``ControllerStage.prepare``), so
that the next sensors are answered with only the rest of the tick. In real time (``--realtime``) it holds the newest
Retargeting message, and stops when none came for ``--input-stale-s`` (an upstream stage that hangs). If the QP fails, the previous offset is kept
(a safe command: the desired posture plus the last compensation), ``ok = 0`` is sent and a
warning is logged. A ``dt_s`` (its config's, the Retargeting config's) that is not the period of the
sensors it receives is refused at the first two sensor messages (``ConfigError``: one line).
"""

from __future__ import annotations

import logging
import time

from contactflow.nodes._runtime import (add_input_stale_argument, connect, declared_inputs, base_parser, drain_after_finish,
                                       input_stale_s, int_at_least, load_node_config, lockstep_for, node_main, sender_for)

log = logging.getLogger("contactflow.seiko_controller")


def main() -> int:
    import numpy as np

    from contactflow.contracts.messages import port_specs
    from contactflow.paths import OneFileAction
    from contactflow.robot import load_robot
    from contactflow.seiko.config_checks import PeriodCheck, require_period
    from contactflow.seiko.controller import ControllerConfig
    from contactflow.seiko.retargeting import RetargetingConfig
    from contactflow.seiko.stages import ControllerStage

    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--lag", type=int_at_least(0), default=2, help="ticks between the Retargeting output used and the current tick")
    p.add_argument("--retargeting-config", default=None, action=OneFileAction, help="config of the Retargeting (for its reset state)")
    p.add_argument("--sensor-lag", type=int, default=0, choices=(0, 1),
                   help="ticks between the sensors used and the current tick: 1 = the command of tick k is computed "
                        "from the sensors of tick k - 1 (as on a robot, where it is applied one period after the "
                        "state it answers), so the Controller runs beside the driver's step in a lockstep graph")
    p.add_argument("--realtime", action="store_true")
    add_input_stale_argument(p, "`desired` (or `wrench`)")
    p.add_argument("--wrench-lag", type=int_at_least(0), default=0,
                   help="with a wrench_filter node: ticks between its filtered wrench used and the current tick")
    p.add_argument("--blend-from-measured", action="store_true",
                   help="blend the first command_blend_s of commands from the measured joint positions "
                        "(for a robot that does not start at the default posture)")
    args = p.parse_args()
    robot = load_robot(args.robot)
    cfg = load_node_config(ControllerConfig, args.config, "seiko_controller")
    # the Retargeting's config (its reset state, R_c): --retargeting-config, else the graph config
    # file's seiko_retargeting section if it has one, else the defaults
    rcfg = load_node_config(RetargetingConfig, args.retargeting_config or args.config, "seiko_retargeting",
                            required=args.retargeting_config is not None)
    require_period((rcfg,), cfg.dt_s, "the Controller's ControllerConfig.dt_s")
    period = PeriodCheck(cfg, "the sensors' time step")
    specs = port_specs(robot)
    stage = ControllerStage(robot, cfg, rcfg)

    node = connect()
    log.info("QP (11) computed by the %s kernel (ControllerConfig.kernel: %s)", stage.ctrl.kernel, cfg.kernel)
    filtered = "wrench" in declared_inputs(node, "seiko_controller")
    # eq. (13) in the wrench_filter node when `wrench` is wired: its output in, our flexible wrench rates out
    # kernel_used: the kernel that computes QP (11) here (cfg.kernel is the configured one, e.g. auto)
    config = {"controller": cfg, "kernel_used": stage.ctrl.kernel, "lag": args.lag, "sensor_lag": args.sensor_lag,
              "wrench_lag": args.wrench_lag if filtered else None}
    sender = sender_for(node, "seiko_controller", specs, config, optional=("flex_rate",) if filtered else ())
    lock = lockstep_for(node, "seiko_controller", specs, offsets={"sensors": args.sensor_lag, "desired": args.lag,
                                                                  "wrench": args.wrench_lag},
                        optional=("wrench",) if filtered else (), skip_missing=args.realtime,
                        stale_s=input_stale_s(args))
    for tick in lock:
        t0 = time.perf_counter()
        s = tick.inputs["sensors"]
        if s is not None:
            period(tick.seqs.get("sensors"), float(s["t"][0]))
        if tick.k == args.sensor_lag and s is not None and args.blend_from_measured:
            stage.reset_from_measured(np.array(s["q"][7:]))
        if filtered:
            command, state = stage.tick(tick.k, s, tick.inputs["desired"], t_start=t0, filtered=tick.inputs["wrench"])
        else:
            command, state = stage.tick(tick.k, s, tick.inputs["desired"], t_start=t0)
        # stamped with the time of the sensors used (with --sensor-lag 1: those of tick k - 1)
        t = float(s["t"][0]) if args.sensor_lag and s is not None else tick.t
        sender.send("command", command, seq=tick.k, t=t, finished=tick.finished)
        sender.send("state", state, seq=tick.k, t=t, finished=tick.finished)
        if filtered:
            sender.send("flex_rate", stage.flex_rate_values(), seq=tick.k, t=tick.t, finished=tick.finished)
        # the next tick's QP rows and Hessian from the flexible state, while the driver steps: its
        # sensors are then answered with only the rest of the tick (same outputs bit for bit)
        stage.prepare()
    if lock.finished_seen:
        drain_after_finish(node)
    if stage.failures:
        log.warning("controller QP failed on %d ticks", stage.failures)
    return 0


if __name__ == "__main__":
    node_main("seiko_controller", main)
