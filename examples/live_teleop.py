"""Live teleop of the G1 as a dynamic dora node: a program or the keyboard drives the LAC pipeline.

    dora up
    dora start dataflows/lac_g1_teleop_live.yml --detach && python examples/live_teleop.py
                          # start it right away: the other nodes wait for the first command
    python examples/live_teleop.py --keyboard      # keys: see contactflow.lac.teleop.TeleopKeyboard, q quits
    dora stop --name ...  (or q / Ctrl-C here: the last message carries `finished`)

The node follows the simulator's ticks (input ``tick`` = sensors) and answers each with the
current :class:`contactflow.lac.teleop.LiveTeleop` state (same limits as the scenario files:
``robots/<robot>/teleop.yaml``), so the graph stays in lockstep. The "program" part is the
``script`` function below: edit it to command the robot.

A dynamic node may connect after the driver has published its first tick (dora does not wait for
dynamic nodes, and does not deliver what was sent before they subscribed): the command of tick 0
(t = 0) is therefore sent right after connecting, and the node then answers every tick it receives
(skipping to the newest one if some were missed), so the graph never waits on a lost tick.

It prints when it is connected, when the run is finished, and the recording the graph's recorder
wrote (the newest ``<recordings>/<--recording-name>-<UTC>`` run started after it connected; it waits
up to ``--wait-recording-s`` for the recorder to close it).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

from contactflow.nodes._runtime import Lockstep, Sender  # the nodes' plumbing (installed package)

from contactflow.lac.teleop import LiveTeleop, TeleopKeyboard  # noqa: E402
from contactflow.contracts.messages import port_specs  # noqa: E402
from contactflow.operator.live import TerminalKeys  # noqa: E402
from contactflow.recording.store import list_runs, recordings_root  # noqa: E402
from contactflow.robot import load_robot  # noqa: E402


def find_recording(name: str, since: float, wait_s: float) -> Path | None:
    """The newest run ``<name>-*`` under the recordings root whose directory appeared at or after
    ``since`` (epoch seconds), waiting up to ``wait_s`` for its manifest to say it is complete."""
    import json

    end = time.time() + wait_s
    while True:
        runs = [p for p in list_runs(recordings_root()) if p.name.startswith(name + "-") and p.stat().st_mtime >= since - 2.0]
        if runs:
            run = max(runs, key=lambda p: p.name)
            try:
                complete = json.loads((run / "manifest.json").read_text()).get("complete")
            except (OSError, ValueError):
                complete = False
            if complete or time.time() >= end:
                return run
        if time.time() >= end:
            return None
        time.sleep(0.2)


def script(live: LiveTeleop, t: float, h0: float) -> bool:
    """The program: stand soft (K = 60 N/m) 4 s, lower the base to 0.70 m and stiffen the arms
    (K = 300 N/m) from 4 s, turn the waist 0.3 rad at 8 s, back to the defaults at 12 s; done at 15 s."""
    if 4.0 <= t < 12.0:
        live.set_base_height(0.70)
        live.set_stiffness([300, 300, 300, 30, 30])
        live.set_waist_yaw(0.3 if t >= 8.0 else 0.0)
    else:
        live.set_base_height(h0)
        live.set_stiffness([60, 60, 60, 30, 30])
        live.set_waist_yaw(0.0)
    return t >= 15.0


def main() -> None:
    from dora import Node

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--robot", default="g1")
    p.add_argument("--node-id", default="teleop")
    p.add_argument("--keyboard", action="store_true")
    p.add_argument("--recording-name", default="lac_g1_teleop_live",
                   help="the recorder's --name in the graph (to print where the run was recorded)")
    p.add_argument("--wait-recording-s", type=float, default=10.0)
    args = p.parse_args()
    robot = load_robot(args.robot)
    specs = port_specs(robot)
    live = LiveTeleop(robot)
    keys = TeleopKeyboard(live) if args.keyboard else None
    h0 = live.base_height  # the default base height
    node = None
    for _ in range(100):  # the dataflow may still be spawning its nodes
        try:
            node = Node(args.node_id)
            break
        except Exception:  # noqa: BLE001 - retry until the dynamic node is accepted
            time.sleep(0.2)
    if node is None:
        sys.exit(f"could not connect as dynamic node {args.node_id!r}: is the dataflow started?")
    connected = time.time()
    print(f"[live_teleop] connected as dynamic node {args.node_id!r} (robot {robot.name}); "
          + ("keys: w/s a/d j/l space r/f [/] 1-5 +/- q" if keys else "running the scripted program (15 s)"), flush=True)
    sender = Sender(node, {"command": specs["teleop_command"]}, {"live": True, "limits": live.config})
    if not keys:
        script(live, 0.0, h0)
    sender.send("command", live.command(0.0).values(), seq=0, t=0.0)  # tick 0 may have gone by already
    quit_ = False
    last_t = 0.0
    with TerminalKeys() if keys else contextlib.nullcontext() as term:
        for tick in Lockstep(node, {"tick": (specs["sensors"], 0)}, skip_missing=True):
            if tick.k == 0:
                continue  # already answered
            for k in term.read() if term else "":
                quit_ = quit_ or k == "q"
                msg = keys.key(k)
                if msg:
                    print(msg, flush=True)
            if not keys:
                quit_ = script(live, tick.t, h0)
            cmd = live.command(tick.t)
            last_t = tick.t
            sender.send("command", cmd.values(), seq=tick.k, t=tick.t, finished=quit_ or tick.finished)
            if quit_ or tick.finished:
                break
    print(f"[live_teleop] finished at t = {last_t:.2f} s (" + ("quit" if quit_ else "the graph ended") + ")", flush=True)
    run = find_recording(args.recording_name, connected, args.wait_recording_s)
    if run is None:
        print(f"[live_teleop] no recording {args.recording_name}-* appeared under {recordings_root()} "
              f"within {args.wait_recording_s:.0f} s", flush=True)
    else:
        summary = run / "summary.json"
        print(f"[live_teleop] recording: {run}" + (f" (summary: {summary})" if summary.exists() else ""), flush=True)


if __name__ == "__main__":
    main()
