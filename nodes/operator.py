"""operator node: plays a scenario file (timed velocity/pose commands per effector).

Inputs:  ``tick`` (``sensors`` contract, the robot driver's clock; one command per tick).
Outputs: ``command`` (``operator_command``): twist per effector (world frame), requested contact
         state, pushing mode and normal-force velocity per effector; the message of the tick
         where the scenario ends carries ``finished: true``, which ends the run.

Args: ``--scenario FILE`` (default: the robot's ``scenarios/hand_forward.yaml``). The environment
variable ``CONTACTFLOW_SCENARIO`` overrides it, so another scenario runs without editing the
dataflow: ``CONTACTFLOW_SCENARIO=robots/talos/scenarios/smoke_2s.yaml dora run dataflows/seiko_talos.yml``.
``--scenario-from-recording RUN`` plays the scenario that the operator of a recorded run played
(read from its manifest; ``latest`` = the newest complete run holding ``operator.command``), so a
replay graph re-issues the recorded commands. The scenario is validated before the first tick; a
bad file stops the node (and the run) before anything moves, naming the file, key and reason.
"""

from __future__ import annotations

import os
from pathlib import Path

from _runtime import connect, REPO_ROOT, Lockstep, Sender, base_parser, drain_after_finish, node_main


def main() -> int:
    from contactflow.messages import port_specs
    from contactflow.operator.scenario import ScenarioPlayer, load_scenario
    from contactflow.recording import recorded_scenario
    from contactflow.robot import load_robot

    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--scenario", default=None)
    p.add_argument("--scenario-from-recording", default=None, metavar="RUN",
                   help="play the scenario of a recorded run (run directory, name, or latest)")
    p.add_argument("--realtime", action="store_true", help="skip ticks instead of waiting when inputs were dropped")
    args = p.parse_args()
    robot = load_robot(args.robot)
    recorded = None
    if args.scenario_from_recording and not os.environ.get("CONTACTFLOW_SCENARIO"):
        recorded = recorded_scenario(args.scenario_from_recording, "operator")
    scenario_path = (os.environ.get("CONTACTFLOW_SCENARIO") or recorded or args.scenario
                     or str(robot.directory / "scenarios" / "hand_forward.yaml"))
    sp = Path(scenario_path)
    if not sp.is_absolute() and not sp.exists() and (REPO_ROOT / sp).exists():
        sp = REPO_ROOT / sp  # paths relative to the repository root work from any directory
    scenario = load_scenario(sp, robot)  # validates everything before the node connects
    player = ScenarioPlayer(scenario)
    player.reset()

    specs = port_specs(robot)
    node = connect()
    sender = Sender(node, {"command": specs["operator_command"]}, {"scenario": str(sp.resolve()), "robot": robot.name})
    origin = ("CONTACTFLOW_SCENARIO" if os.environ.get("CONTACTFLOW_SCENARIO") else
              f"recording {args.scenario_from_recording}" if recorded else ("--scenario" if args.scenario else "default"))
    print(f"[operator] scenario {sp} ({scenario.duration_s:.2f} s, from {origin})", flush=True)
    finished = False
    for tick in Lockstep(node, {"tick": (specs["sensors"], 0)}, skip_missing=args.realtime):
        cmd = player.step(tick.t, dt_s=0.002)
        effs = list(robot.contacts)
        values = {f"twist.{e}": cmd.velocities.get(e, (0.0,) * 6) for e in effs}
        values["enable"] = [1.0 if cmd.enable.get(e, robot.contacts[e].enabled) else 0.0 for e in effs]
        values["push"] = [1.0 if cmd.push.get(e, False) else 0.0 for e in effs]
        values["force_rate"] = [cmd.force_rates.get(e, 0.0) for e in effs]
        sender.send("command", values, seq=tick.k, t=tick.t, finished=cmd.finished or tick.finished)
        if cmd.finished and not finished:
            finished = True
            print(f"[operator] scenario finished at t = {tick.t:.3f} s", flush=True)
    if finished:
        drain_after_finish(node)
    return 0


if __name__ == "__main__":
    node_main("operator", main)
