"""operator node: plays a scenario file (timed velocity/pose commands per effector).

Inputs:  ``tick`` (``sensors`` contract, the robot driver's clock; one command per tick).
Outputs: ``command`` (``operator_command``): twist per effector (world frame), requested contact
         state, pushing mode and normal-force velocity per effector; the message of the tick
         where the scenario ends carries ``finished: true``, which ends the run.

Ahead mode (lockstep graphs that wire ``tick`` to the driver's batched ``log`` output): a scenario
depends only on time, so the node plays it ``--ahead`` ticks (default 200) ahead of the driver's
last logged tick at t_k = k * 2 ms and sends ``--ahead-batch`` ticks (default 50) per message
(``Sender.send_rows``; the consumers' Lockstep splits them): the graph then pays one message per 50
ticks instead of one receive of the sensors, one send and two receives of the command per tick, and
the input filter and the Retargeting run ahead of the driver on the free core. The window is kept
above two log batches (``$CONTACTFLOW_LOG_EVERY``) so the driver never waits for a command. If the
driver ends first (a fall), a last command with ``finished`` ends the stages that ran ahead. A driver
whose log goes silent for ``SILENCE_S`` (30 s) stops the node with one line (a hung driver).

Args: ``--scenario FILE`` (default: the robot's ``scenarios/hand_forward.yaml``). The environment
variable ``CONTACTFLOW_SCENARIO`` overrides it, so another scenario runs without editing the
dataflow: ``CONTACTFLOW_SCENARIO=robots/talos/scenarios/smoke_2s.yaml dora run dataflows/seiko_talos.yml``.
``--scenario-from-recording RUN`` plays the scenario that the operator of a recorded run played
(read from its manifest; ``latest`` = the newest complete run holding ``operator.command``), so a
replay graph re-issues the recorded commands. The scenario is validated before the first tick; a
bad file stops the node (and the run) before anything moves, naming the file, key and reason.
"""

from __future__ import annotations

from contactflow.nodes._runtime import (SILENCE_S, connect, declared_inputs, base_parser, drain_after_finish, lockstep_for, log_info,
                                       node_main, sender_for, watched_events)
from contactflow.paths import scenario_origin, scenario_source

DT_S = 0.002  # the control period [s]: one command per tick


def main() -> int:
    from contactflow.contracts.messages import port_specs
    from contactflow.operator.scenario import ScenarioPlayer, load_scenario
    from contactflow.robot import load_robot
    from contactflow.seiko.stages import operator_command_values

    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--scenario", default=None)
    p.add_argument("--scenario-from-recording", default=None, metavar="RUN",
                   help="play the scenario of a recorded run (run directory, name, or latest)")
    p.add_argument("--realtime", action="store_true", help="skip ticks instead of waiting when inputs were dropped")
    p.add_argument("--ahead", type=int, default=200, help="ahead mode: ticks played ahead of the driver's last logged tick")
    p.add_argument("--ahead-batch", type=int, default=50, help="ahead mode: ticks per command message")
    args = p.parse_args()
    robot = load_robot(args.robot)
    sp, origin = scenario_source("operator", args.scenario, robot.directory / "scenarios" / "hand_forward.yaml",
                                 recorded=args.scenario_from_recording, robot=robot.name)
    with scenario_origin(origin):
        scenario = load_scenario(sp, robot)  # validates everything before the node connects
    player = ScenarioPlayer(scenario)
    player.reset()

    specs = port_specs(robot)
    node = connect()
    sender = sender_for(node, "operator", specs, {"scenario": str(sp.resolve()), "robot": robot.name})
    # through dora's log (INFO): `dora run --log-level info` hides a node's print (raw stdout)
    log_info(node, f"[operator] scenario {sp} ({scenario.duration_s:.2f} s, from {origin})")
    if not args.realtime and declared_inputs(node, "operator").get("tick", "").endswith("/log"):
        return _play_ahead(node, sender, player, robot, args)
    finished = False
    for tick in lockstep_for(node, "operator", specs, skip_missing=args.realtime):
        cmd = player.step(tick.t, dt_s=DT_S)
        sender.send("command", operator_command_values(robot, cmd), seq=tick.k, t=tick.t, finished=cmd.finished or tick.finished)
        if cmd.finished and not finished:
            finished = True
            log_info(node, f"[operator] scenario finished at t = {tick.t:.3f} s")
    if finished:
        drain_after_finish(node)
    return 0


def _play_ahead(node, sender, player, robot, args) -> int:
    """Ahead mode (module docstring): commands in batches, ahead of the driver's logged ticks."""
    from contactflow.seiko.stages import operator_command_values

    window = max(int(args.ahead), 2 * sender.log_every + 4)
    batch = max(1, int(args.ahead_batch))
    k, done = 0, False

    def play(upto: int) -> None:
        # full batches only (the last one may be short: the scenario's end), so a message carries
        # --ahead-batch ticks whatever the driver's log cadence ($CONTACTFLOW_LOG_EVERY)
        nonlocal k, done
        while upto - k + 1 >= batch and not done:
            rows = []
            while len(rows) < batch and k <= upto and not done:
                t = k * DT_S
                cmd = player.step(t, dt_s=DT_S)
                rows.append((k, t, cmd.finished, operator_command_values(robot, cmd)))
                if cmd.finished:
                    done = True
                    log_info(node, f"[operator] scenario finished at t = {t:.3f} s")
                k += 1
            sender.send_rows("command", rows)

    play(window - 1)
    stopped = False
    for ev in watched_events(node, "tick", SILENCE_S, lambda: f"no 'tick' message (the robot driver's log) for "
                             f"{SILENCE_S:.0f} s, at scenario tick {k}: the driver hangs"):
        typ = ev["type"]
        if typ == "INPUT" and ev["id"] == "tick":
            md = ev["metadata"]
            if md.get("log_finished", False):
                break
            play(int(md.get("last_seq", 0)) + window)
        elif typ in ("STOP", "INPUT_CLOSED"):
            stopped = typ == "STOP"
            break
    if not done:  # the driver ended first (a fall, its time limit) or the run was stopped: end the stages that ran ahead
        t = k * DT_S
        sender.send_rows("command", [(k, t, True, operator_command_values(robot, player.step(t, dt_s=DT_S)))])
        why = "the dataflow was stopped" if stopped else "the robot driver ended first"
        log_info(node, f"[operator] {why}: the scenario stopped at tick {k} (it plays ahead of the driver)")
    drain_after_finish(node)
    return 0


if __name__ == "__main__":
    node_main("operator", main)
