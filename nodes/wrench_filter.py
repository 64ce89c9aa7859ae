"""wrench_filter node: SEIKO complementary wrench filter, eq. (13), as its own stage.

Inputs:  ``sensors`` (``sensors``, tick k): measured sole wrenches (LOCAL) and hand forces (world);
         ``flex_rate`` (``flex_wrench_rate``, tick k - 1): the Controller's flexible-model wrench
         rates and which effectors it filtered (``seiko_controller``'s ``flex_rate`` output).
Outputs: ``wrench`` (``filtered_wrench``): lam_tilde of tick k for the Controller's optional
         ``wrench`` input (taken at tick k: the same lam_tilde as the Controller's internal filter;
         or at tick k + 1 with ``seiko_controller --wrench-lag 1``, beside the Controller's QP).

The cutoff and period are the Controller's (``complementary_cutoff_hz``, ``dt_s`` of the
``seiko_controller`` section of ``--config``; defaults without it). Protocol:
:class:`contactflow.seiko.stages.WrenchFilterStage`. A malformed ``flex_rate`` message is reported
and the tick filtered as if every effector were active with a zero wrench rate.
"""

from __future__ import annotations

import logging
import time

from contactflow.nodes._runtime import (base_parser, connect, drain_after_finish, load_node_config, lockstep_for, node_main,
                                       sender_for)


log = logging.getLogger("contactflow.wrench_filter")


def main() -> int:
    from contactflow.contracts.messages import port_specs
    from contactflow.robot import load_robot
    from contactflow.seiko.controller import ControllerConfig
    from contactflow.seiko.stages import WrenchFilterStage

    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--realtime", action="store_true")
    args = p.parse_args()
    robot = load_robot(args.robot)
    cfg = load_node_config(ControllerConfig, args.config, "seiko_controller", required=False)
    specs = port_specs(robot)
    stage = WrenchFilterStage(robot, cfg)

    node = connect()
    sender = sender_for(node, "wrench_filter", specs,
                        {"complementary_cutoff_hz": cfg.complementary_cutoff_hz, "dt_s": cfg.dt_s})
    lock = lockstep_for(node, "wrench_filter", specs, offsets={"flex_rate": 1}, skip_missing=args.realtime)
    cpu0, n = None, 0
    for tick in lock:
        if cpu0 is None:
            cpu0 = time.process_time()
        values = stage.tick(tick.inputs["sensors"], tick.inputs["flex_rate"])
        sender.send("wrench", values, seq=tick.k, t=tick.t, finished=tick.finished)
        n += 1
    if n > 1:  # the node's cost: CPU time of its loop (receives, filter, send) per tick
        log.info("%d ticks, %.0f us CPU per tick", n, (time.process_time() - cpu0) / (n - 1) * 1e6)
    if lock.finished_seen:
        drain_after_finish(node)
    return 0


if __name__ == "__main__":
    node_main("wrench_filter", main)
