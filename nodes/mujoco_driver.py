"""mujoco_driver node: the simulated robot (MuJoCo) and the clock of the graph.

Inputs:  ``command`` (``joint_command``): joint position command theta_cmd [rad].
Outputs: ``sensors`` (``sensors``): joint state, joint torques, pelvis IMU, sole wrenches and hand
         forces, one message per control tick (500 Hz of simulated time).

``--environment`` adds the robot file's ``environment:`` (wall, side support, hand spheres); the
left hand force then comes from a wrist FT sensor and the right (ball) hand force from the arm
joint torques (SEIKO §6.7); without it the hand forces are zeros. ``--payload LINK:KG[:X:Y:Z]``
welds an unmodelled point mass to a link (the SEIKO model does not know it).

Modes:
* lockstep (default): publish the sensors of tick k, wait for the command of tick k, step the
  physics (1 kHz, command linearly interpolated across the substeps), publish tick k+1. The
  simulation is the clock, so a run is deterministic and runs as fast as the graph allows.
* ``--realtime``: step at wall-clock pace; use the newest command received; if no command arrives
  for ``--command-timeout-s`` the last safe command is held (and reported), as a hardware
  driver must.

The run ends when a command carries ``finished`` (end of the scenario), when the robot falls
(base below 0.6 m: reported, then the run ends), or after ``--max-sim-time-s``. A malformed command
is reported and the last safe command is held.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from _runtime import connect, Lockstep, Sender, UpstreamError, base_parser, drain_after_finish, load_node_config, node_main

log = logging.getLogger("contactflow.mujoco_driver")


def readings_values(robot, r, spec=None, estimators=None) -> dict:
    vals = {
        "t": r.t, "q": r.q, "v": r.v, "tau": r.tau,
        "imu_quat": r.imu_quat, "imu_gyro": r.imu_gyro, "imu_acc": r.imu_acc,
    }
    for c, cs in robot.contacts.items():
        if cs.type == "plane":
            vals[f"wrench.{c}"] = r.wrenches[c]
    names = {f.name for f in spec.fields} if spec is not None else set()
    for c, cs in robot.contacts.items():
        if f"force.{c}" in names:
            if c in r.hand_forces:
                vals[f"force.{c}"] = r.hand_forces[c]
            elif estimators and c in estimators:
                vals[f"force.{c}"] = estimators[c].estimate(r.q, r.tau)
            else:
                vals[f"force.{c}"] = np.zeros(3)
    return vals


def main() -> int:
    from contactflow.errors import ContractError
    from contactflow.messages import port_specs
    from contactflow.robot import load_robot
    from contactflow.safety import CommandHold
    from contactflow.environment import load_environment
    from contactflow.seiko.estimation import JointTorqueForceEstimator
    from contactflow.sim.mujoco_model import PointMass
    from contactflow.sim.mujoco_robot import MujocoRobotSim, SimConfig

    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--realtime", action="store_true", help="wall-clock pacing instead of lockstep")
    p.add_argument("--command-timeout-s", type=float, default=0.1)
    p.add_argument("--max-sim-time-s", type=float, default=600.0)
    p.add_argument("--lockstep-timeout-s", type=float, default=60.0)
    p.add_argument("--environment", action="store_true",
                   help="add the robot file's walls/supports, hand spheres and hand force sensing")
    p.add_argument("--payload", action="append", default=[],
                   help="unmodelled point mass LINK:MASS_KG[:X:Y:Z] welded to a link (simulation only)")
    args = p.parse_args()
    robot = load_robot(args.robot)
    cfg = load_node_config(SimConfig, args.config, "mujoco_driver")
    specs = port_specs(robot)
    env = load_environment(robot.raw.get("environment"), f"{robot.name}:environment") if args.environment else None
    payloads = []
    for i, item in enumerate(args.payload):
        parts = item.split(":")
        pos = [float(x) for x in parts[2:5]] if len(parts) >= 5 else [0.0, 0.0, 0.0]
        payloads.append(PointMass(name=f"payload_{i}", parent=parts[0], mass=float(parts[1]), pos=tuple(pos)))
    sim = MujocoRobotSim(cfg, robot, extra_bodies=payloads, environment=env)
    estimators = {}
    if env is not None:
        for c, cs in robot.contacts.items():
            if cs.frame in env.force_joints:
                estimators[c] = JointTorqueForceEstimator(robot.model, cs.frame, env.force_joints[cs.frame])
    sspec = specs["sensors"]
    r = sim.reset()
    dt = cfg.control_dt_s
    hold = CommandHold(robot.theta_default, timeout_s=args.command_timeout_s, q_min=robot.q_min, q_max=robot.q_max)

    node = connect()
    sender = Sender(node, {"sensors": specs["sensors"]}, {"sim": cfg, "realtime": args.realtime})
    sender.send("sensors", readings_values(robot, r, sspec, estimators), seq=0, t=r.t)
    k = 0
    finished = False
    bad_commands = 0

    def apply(cmd_fields) -> None:
        nonlocal bad_commands
        theta = None if cmd_fields is None else cmd_fields["theta_cmd"]
        if not hold.offer(theta, time.monotonic() if args.realtime else r.t):
            bad_commands += 1

    def advance(fin: bool) -> bool:
        nonlocal k, r
        try:
            r = sim.step(hold.command(time.monotonic() if args.realtime else r.t))
        except ContractError as exc:  # cannot happen with theta_safe, kept for hardware parity
            log.error("command rejected by the simulator: %s", exc)
        k += 1
        fell = sim.fell()
        if fell:
            log.error("robot fell at t = %.3f s (base height %.3f m); ending the run", r.t, r.base_height)
        done = fin or fell or r.t >= args.max_sim_time_s
        sender.send("sensors", readings_values(robot, r, sspec, estimators), seq=k, t=r.t, finished=done)
        return done

    if not args.realtime:
        lock = Lockstep(node, {"command": (specs["joint_command"], 0)}, dt=dt, timeout_s=args.lockstep_timeout_s)
        for tick in lock:
            if tick.errors:
                log.warning("tick %d: malformed command, holding the last safe command: %s", tick.k, tick.errors)
            apply(tick.inputs["command"])
            if advance(tick.finished):
                finished = True
                break
    else:
        jc = specs["joint_command"]
        next_deadline = time.monotonic() + dt
        while not finished:
            fin = False
            while True:
                remaining = next_deadline - time.monotonic()
                if remaining <= 0:
                    break
                ev = node.next(timeout=remaining)
                if ev is None:
                    raise UpstreamError("event stream closed")
                if ev["type"] == "INPUT" and ev["id"] == "command":
                    try:
                        apply(jc.unpack(ev["value"].to_numpy(zero_copy_only=False)))
                    except ContractError as exc:
                        log.warning("malformed command ignored, holding the last safe command: %s", exc)
                        bad_commands += 1
                    fin = fin or bool(ev["metadata"].get("finished", False))
                elif ev["type"] == "STOP":
                    fin = True
            finished = advance(fin)
            next_deadline += dt
    if bad_commands:
        log.warning("%d malformed commands were replaced by the last safe command", bad_commands)
    log.info("simulation ended at t = %.3f s after %d ticks", r.t, k)
    drain_after_finish(node, 1.0)
    return 0


if __name__ == "__main__":
    node_main("mujoco_driver", main)
