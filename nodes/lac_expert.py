"""lac_expert node: model-based compliant standing controller under LAC's stiffness contract.

Inputs:  ``sensors`` (``sensors``, tick k): joint state, applied joint torques, sole wrenches;
         ``command`` (``teleop_command``, tick k): base height, waist yaw, arm references,
         5-D stiffness (base velocity commands are ignored: the expert stands; logged once).
         ``heartbeat`` (OPTIONAL, a dora timer such as ``dora/timer/millis/5``): the keep-alive: with a
         wall-clock driver the newest command is re-sent (``repeat``) on each of its events between
         ticks, so the driver's command watchdog hears from a live controller every few ms
         (``_runtime.KeepAlive``).
Outputs: ``command`` (``joint_command``, PD robots): ``q_target``, ``kp``, ``kd``, ``tau_ff``, ``ok``
         in robot joint order, LAC's own PD gains.

Same ports as ``lac_policy``: swapping one for the other in a graph changes that one node.
``--config`` is ``robots/<robot>/lac_expert.yaml`` by default (a flat ``ExpertConfig`` file) or a
graph file with a ``lac_expert:`` section. A failed IK step, a malformed input message or a
stiffness outside the robot's teleop ranges (``robots/<robot>/teleop.yaml``, the teleop's own
limits) sends the last safe command with ``ok = 0`` (logged).
Library: :mod:`contactflow.lac.expert`.
"""

from __future__ import annotations

import logging

import numpy as np

from contactflow.nodes._runtime import KeepAlive, base_parser, connect, drain_after_finish, lockstep_for, node_main, sender_for

log = logging.getLogger("contactflow.lac_expert")


def main() -> int:
    from contactflow.config import to_dict
    from contactflow.errors import ConfigError, ContactflowError
    from contactflow.lac.expert import LacExpert, default_expert_config_path, load_expert_config
    from contactflow.contracts.messages import port_specs
    from contactflow.robot import load_robot

    p = base_parser(__doc__.splitlines()[0], "lac_expert")
    p.add_argument("--realtime", action="store_true",
                   help="skip ticks whose messages were dropped (the wrench estimate then uses the measured joint torques)")
    args = p.parse_args()
    robot = load_robot(args.robot)
    if robot.actuation != "pd":
        raise ConfigError(f"{robot.file_label()}: lac_expert sends PD joint commands; the robot has actuation {robot.actuation!r}")
    path = args.config or str(default_expert_config_path())
    cfg = load_expert_config(path)
    if cfg.robot != robot.name:
        raise ConfigError(f"{path}: configured for robot {cfg.robot!r}, the graph runs {robot.name!r}")
    specs = port_specs(robot)
    tick_s = 1.0 / specs["joint_command"].rate_hz
    if abs(tick_s * cfg.rate_hz - 1.0) > 1e-9:
        raise ConfigError(f"{path}: rate_hz {cfg.rate_hz:g} differs from the robot's control rate {1.0 / tick_s:g} Hz")
    # realtime: ticks may be skipped, so the command in force is not known: the estimator uses the
    # measured joint torques instead of the last command sent
    expert = LacExpert(cfg, robot, lockstep=not args.realtime)

    node = connect()
    sender = sender_for(node, "lac_expert", specs, {"robot": robot.name, "config": to_dict(cfg)})
    lock = lockstep_for(node, "lac_expert", specs, dt=tick_s, skip_missing=args.realtime,
                        heartbeat=KeepAlive.if_wired(node, sender, "lac_expert"))
    times = []
    for tick in lock:
        s, c = tick.inputs["sensors"], tick.inputs["command"]
        if s is None or c is None:
            if not expert.ready:
                raise ConfigError(f"lac_expert: first tick unusable ({tick.errors}); no safe command to hold")
            out = expert.hold(f"malformed input at tick {tick.k}: {tick.errors}")
        else:
            try:
                out = expert.step(s, c)
            except ContactflowError as exc:
                if not expert.ready:
                    raise
                out = expert.hold(str(exc))
        if out.command["ok"][0] >= 0.5:
            times.append(out.diagnostics["step_time_s"])
        sender.send("command", out.command, seq=tick.k, t=tick.t, finished=tick.finished)
    if times:
        log.info("lac_expert: %d steps, %.3f ms mean, %.3f ms max; %d degraded tick(s)", len(times),
                 1e3 * float(np.mean(times)), 1e3 * float(np.max(times)), expert.n_degraded)
    if lock.finished_seen:
        drain_after_finish(node)
    return 0


if __name__ == "__main__":
    node_main("lac_expert", main)
