"""teleop node: plays a teleop scenario file (base velocity, base height, waist yaw, arm references, stiffness).

Inputs:  ``tick`` (``sensors`` contract, the robot driver's clock; one command per tick).
Outputs: ``command`` (``teleop_command``): ``lin_vel`` [vx, vy] (yaw frame) [m/s], ``ang_vel`` [rad/s],
         ``base_height`` [m], ``waist_yaw`` [rad], ``q_ref_arms`` (robot file ``teleop.arm_joints``
         order) [rad], ``stiffness`` RAW 5-D LAC layout [N/m x 3, N m/rad x 2]; the message of the tick
         where the scenario ends carries ``finished: true``, which ends the run.

Args: ``--scenario FILE`` (default: the robot's ``scenarios/stand.yaml``); the environment variable
``CONTACTFLOW_SCENARIO`` overrides it (the ``wrench_injector`` reads the same variable, so one file
drives both); ``--config FILE`` the teleop limits (section ``teleop``; default
``robots/<robot>/teleop.yaml``); ``--realtime``; ``--scenario-from-recording RUN`` plays the scenario
the teleop of a recorded run played (its manifest; ``latest`` = the newest complete run of ``--robot``
holding ``teleop.command``), for replay graphs; the environment variable ``CONTACTFLOW_RECORDING``
overrides RUN (the ``replay`` node's ``--recording`` reads the same variable, so one name drives both). The scenario is validated before the node connects:
a bad file stops the run before anything moves, naming the file, key and reason. Format:
:mod:`contactflow.lac.teleop`. Live input instead of a file: ``examples/live_teleop.py``.
"""

from __future__ import annotations

import logging
from pathlib import Path

from contactflow.nodes._runtime import base_parser, connect, drain_after_finish, lockstep_for, node_main, sender_for
from contactflow.paths import scenario_origin, scenario_source

log = logging.getLogger("contactflow.teleop")


def scenario_file(arg: str | None, robot, recorded: str | None = None) -> tuple[Path, str]:
    """The scenario the teleop (and the wrench_injector) plays and where its name came from
    (:func:`contactflow.paths.scenario_source`; the default: ``<robot dir>/scenarios/stand.yaml``)."""
    return scenario_source("teleop", arg, Path(robot.directory) / "scenarios" / "stand.yaml", recorded=recorded,
                           robot=robot.name)


def main() -> int:
    from contactflow.lac.teleop import TeleopPlayer, load_teleop_config, load_teleop_scenario
    from contactflow.contracts.messages import port_specs
    from contactflow.robot import load_robot

    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--scenario", default=None)
    p.add_argument("--scenario-from-recording", default=None, metavar="RUN",
                   help="play the scenario of a recorded run (run directory, name, or latest)")
    p.add_argument("--realtime", action="store_true", help="skip ticks instead of waiting when inputs were dropped")
    args = p.parse_args()
    robot = load_robot(args.robot)
    cfg = load_teleop_config(robot, args.config)
    sp, origin = scenario_file(args.scenario, robot, args.scenario_from_recording)
    with scenario_origin(origin):
        scenario = load_teleop_scenario(sp, robot, cfg)  # validates everything before the node connects
    player = TeleopPlayer(scenario)

    specs = port_specs(robot)
    node = connect()
    sender = sender_for(node, "teleop", specs,
                        {"scenario": str(sp.resolve()), "robot": robot.name, "limits": cfg})
    log.info("scenario %s (%.2f s, from %s)", sp, scenario.duration_s, origin)
    finished = False
    for tick in lockstep_for(node, "teleop", specs, skip_missing=args.realtime):
        cmd = player.step(tick.t)
        sender.send("command", cmd.values(), seq=tick.k, t=tick.t, finished=cmd.finished or tick.finished)
        if cmd.finished and not finished:
            finished = True
            log.info("scenario finished at t = %.3f s", tick.t)
    if finished:
        drain_after_finish(node)
    return 0


if __name__ == "__main__":
    node_main("teleop", main)
