"""estop node: a software emergency stop for a hardware driver (``unitree_driver``'s ``estop`` input).

Inputs:  ``tick`` (``sensors`` contract, the driver's clock).
Outputs: ``estop`` (``estop``): every tick, ``stop`` = 0, or 1 from the tick the trigger file exists
         on (latched: it stays 1 for the rest of the run; :class:`contactflow.safety.FileEstop`),
         with the metadata ``reason``.

Trigger: ``touch`` the ``--trigger-file`` (default ``/tmp/contactflow-estop``) from any shell. A file
left from an earlier stop stops the next run from its first tick: remove it to run again.
The driver latches damping on the first ``stop`` = 1 AND when this node's output closes (the node
died: a dead e-stop must not leave the robot unprotected). The robot's own wireless remote is a
second, independent e-stop handled inside the driver (``--remote-estop``, default L2+B).
"""

from __future__ import annotations

import logging

import numpy as np

from contactflow.nodes._runtime import base_parser, connect, drain_after_finish, lockstep_for, node_main, sender_for

log = logging.getLogger("contactflow.estop")


def main() -> int:
    from contactflow.contracts.messages import port_specs
    from contactflow.robot import load_robot
    from contactflow.safety import FileEstop

    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--trigger-file", default="/tmp/contactflow-estop", help="the e-stop is on once this file exists")
    args = p.parse_args()
    robot = load_robot(args.robot)
    specs = port_specs(robot)
    trigger = FileEstop(args.trigger_file)
    node = connect()
    sender = sender_for(node, "estop", specs, {"trigger_file": str(trigger.path)})
    if trigger.stop():
        log.error("%s at start: the robot stays in damping; remove it to run", trigger.reason)
    else:
        log.info("e-stop armed: touch %s to stop the robot", trigger.path)
    finished = False
    for tick in lockstep_for(node, "estop", specs, skip_missing=True):
        stop = trigger.stop()
        sender.send("estop", {"stop": np.array([float(stop)])}, seq=tick.k, t=tick.t, finished=tick.finished,
                    **({"reason": trigger.reason} if stop else {}))
        finished = finished or tick.finished
    if finished:
        drain_after_finish(node)
    return 0


if __name__ == "__main__":
    node_main("estop", main)
