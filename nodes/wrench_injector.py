"""wrench_injector node: timed trapezoid force and couple events on robot links (ground truth).

Inputs:  ``tick`` (``sensors`` contract, the robot driver's clock).
Outputs: ``wrench`` (``external_wrench``): one ``wrench.<link>`` (6, ``[f; tau]``, WORLD frame, force
         applied at the link's centre of mass, MuJoCo ``xfrc_applied``) per link of the robot file's
         ``wrench_links``; the driver applies it over the physics steps of the tick, the recorder
         keeps it as ground truth. Each tick carries the profile sampled at the tick time.

Args: ``--scenario FILE``: the ``wrenches:`` list of a teleop scenario
(:mod:`contactflow.lac.wrench_injector`); ``CONTACTFLOW_SCENARIO`` overrides it as for the ``teleop``
node, so both play one file. A link that is not in ``wrench_links`` or any other bad entry stops the
run before anything moves, naming the file, key and the allowed links. The run ends with the
teleop's ``finished`` (propagated from the driver's last tick).
"""

from __future__ import annotations

import logging

from contactflow.nodes._runtime import base_parser, connect, drain_after_finish, lockstep_for, node_main, sender_for
from contactflow.nodes.teleop import scenario_file
from contactflow.paths import scenario_origin

log = logging.getLogger("contactflow.wrench_injector")


def main() -> int:
    from contactflow.lac.teleop import load_teleop_config, load_teleop_scenario
    from contactflow.lac.wrench_injector import WrenchInjector, wrench_links
    from contactflow.contracts.messages import port_specs
    from contactflow.robot import load_robot

    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--scenario", default=None)
    p.add_argument("--realtime", action="store_true", help="skip ticks instead of waiting when inputs were dropped")
    args = p.parse_args()
    robot = load_robot(args.robot)
    sp, origin = scenario_file(args.scenario, robot)
    limits = load_teleop_config(robot, args.config)
    with scenario_origin(origin):
        scenario = load_teleop_scenario(sp, robot, limits)
    injector = WrenchInjector(scenario.wrenches, wrench_links(robot))

    specs = port_specs(robot)
    node = connect()
    sender = sender_for(node, "wrench_injector", specs, {"scenario": str(sp.resolve()), "robot": robot.name})
    log.info("%d event(s) from %s", len(scenario.wrenches), sp)
    for e in scenario.wrenches:
        log.info("  %s: %s %s from %g s, hold %g-%g s, end %g s", e.link, e.kind,
                 (e.force_W if e.kind == "force" else e.couple_W).tolist(), e.start_s, e.hold_start_s, e.hold_end_s, e.end_s)
    finished = False
    for tick in lockstep_for(node, "wrench_injector", specs, skip_missing=args.realtime):
        sender.send("wrench", injector.values(tick.t), seq=tick.k, t=tick.t, finished=tick.finished)
        finished = finished or tick.finished
    if finished:
        drain_after_finish(node)
    return 0


if __name__ == "__main__":
    node_main("wrench_injector", main)
