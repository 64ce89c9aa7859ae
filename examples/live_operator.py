"""Live operator as a dynamic dora node: another program drives SEIKO instead of a scenario file.

    dora up
    dora start dataflows/seiko_talos_live.yml --detach && python examples/live_operator.py
                          # start it right away: the other nodes wait 30 s for the first command
    python examples/live_operator.py --keyboard             # keys (see KeyboardMapper), q quits
    python examples/live_operator.py --spacemouse left_hand right_hand   # one device per effector
    python examples/live_operator.py --far-reach   # with dataflows/seiko_talos_far_reach.yml (Fig. 6)
    dora stop --name ...  (or q / Ctrl-C here: the last message carries `finished`)

The node follows the simulator's ticks (input ``tick`` = sensors) and answers each with the
current :class:`contactflow.operator.live.LiveOperator` state, so the graph stays in lockstep.
The whole "program" part is the ``script`` function below: edit it to command the robot.
"""

from __future__ import annotations

import argparse
import contextlib
import time
import sys

from contactflow.nodes._runtime import Lockstep, Sender  # the nodes' plumbing (installed package)
from contactflow.contracts.messages import port_specs  # noqa: E402
from contactflow.operator.live import KeyboardMapper, LiveOperator, SpaceMouseSource, TerminalKeys, TorqueRatioMonitor  # noqa: E402
from contactflow.robot import load_robot  # noqa: E402


def script(op: LiveOperator, t: float) -> bool:
    """The program: left hand 10 cm forward at 2 cm/s from 3 s, back from 10 s; done at 18 s."""
    v = 0.02 if 3.0 <= t < 8.0 else (-0.02 if 10.0 <= t < 15.0 else 0.0)
    op.set_twist("left_hand", [v, 0, 0, 0, 0, 0])
    return t >= 18.0


class FarReach:
    """A program for dataflows/seiko_talos_far_reach.yml (RA-L 2024 Fig. 6): the right hand moves
    forward and up (0.85 : 0.53) at 2 cm/s from 5 s, "as far as allowed": it stops once a measured
    joint torque |tau| / tau_max, low-passed at 5 Hz (from the ``tick`` = sensors message), passes
    ``rho``, holds 4 s, comes back to where it started at 5 cm/s and ends 2 s later."""

    def __init__(self, tau_max, rho: float = 0.6, dt: float = 0.002):
        self.rho, self.dt = rho, dt
        self.display = TorqueRatioMonitor(tau_max, rho, 5.0, dt)
        self.out_s = 0.0  # time spent reaching out [s]
        self.stop_t = self.back_t = None
        self.dir = [0.85, 0.0, 0.53]

    def __call__(self, op: LiveOperator, t: float, tau) -> bool:
        above = self.display.update(tau)
        v = 0.0
        if self.stop_t is None and t >= 5.0:
            if self.out_s > 0.0 and above:
                self.stop_t = t
                print(f"t = {t:.2f} s: a joint torque passed {self.rho} of its limit after {0.02 * self.out_s:.3f} m: "
                      "stopping, holding 4 s", flush=True)
            else:
                v, self.out_s = 0.02, self.out_s + self.dt
        elif self.stop_t is not None and t >= self.stop_t + 4.0:
            back = self.out_s * 0.02 / 0.05  # the same distance at 5 cm/s
            if t < self.stop_t + 4.0 + back:
                v = -0.05
            elif self.back_t is None:
                self.back_t = t
        op.set_twist("right_hand", [v * d for d in self.dir] + [0.0, 0.0, 0.0])
        return self.back_t is not None and t >= self.back_t + 2.0


def main() -> None:
    from dora import Node

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--robot", default="talos")
    p.add_argument("--node-id", default="operator")
    p.add_argument("--keyboard", action="store_true")
    p.add_argument("--spacemouse", nargs="*", default=None, metavar="EFFECTOR")
    p.add_argument("--far-reach", action="store_true", help="the FarReach program (seiko_talos_far_reach.yml)")
    args = p.parse_args()
    robot = load_robot(args.robot)
    specs = port_specs(robot)
    op = LiveOperator(list(robot.contacts), {e: c.enabled for e, c in robot.contacts.items()})
    keys = KeyboardMapper(op) if args.keyboard else None
    far = FarReach(robot.tau_max) if args.far_reach else None
    mice = SpaceMouseSource(op, args.spacemouse) if args.spacemouse else None
    node = None
    for _ in range(100):  # the dataflow may still be spawning its nodes
        try:
            node = Node(args.node_id)
            break
        except Exception:  # noqa: BLE001 - retry until the dynamic node is accepted
            time.sleep(0.2)
    if node is None:
        sys.exit(f"could not connect as dynamic node {args.node_id!r}: is the dataflow started?")
    sender = Sender(node, {"command": specs["operator_command"]}, {"live": True})
    quit_ = False
    with TerminalKeys() if keys else contextlib.nullcontext() as term:
        for tick in Lockstep(node, {"tick": (specs["sensors"], 0)}):
            for k in term.read() if term else "":
                quit_ = quit_ or k == "q"
                msg = keys.key(k)
                if msg:
                    print(msg, flush=True)
            if mice:
                mice.poll()
            if far is not None:
                quit_ = far(op, tick.t, tick.inputs["tick"]["tau"])
            elif not keys and not mice:
                quit_ = script(op, tick.t)
            sender.send("command", op.values(), seq=tick.k, t=tick.t, finished=quit_ or tick.finished)
            if quit_ or tick.finished:
                break


if __name__ == "__main__":
    main()
