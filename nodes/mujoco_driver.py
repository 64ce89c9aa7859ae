"""mujoco_driver node: the simulated robot (MuJoCo) and the clock of the graph.

Inputs:  ``command`` (``joint_command``): for a position robot (Talos, ``actuation: position``)
         the joint position command theta_cmd [rad]; for a PD robot (Unitree G1, ``--robot g1`` or
         ``g1_29dof``, ``actuation: pd``) per joint q_target [rad], kp [N m/rad], kd [N m s/rad],
         tau_ff [N m] and ok; the PD law tau = kp (q_target - q) - kd qdot + tau_ff, clamped to
         the effort limits, runs at every physics step (0.002 s for the G1).
         ``wrench`` (``external_wrench``, OPTIONAL): wrench.<link> (6) [f; tau] [N, N m], world
         frame, applied at the link's centre of mass (MuJoCo xfrc_applied) from the tick it
         belongs to; in lockstep the driver waits for it only when the graph wires it.
Outputs: ``sensors`` (``sensors``): joint state, joint torques, pelvis IMU, sole wrenches and hand
         forces, one message per control tick (Talos: 500 Hz of simulated time; G1: the policy
         period, the robot file's ``control_rate_hz`` = 50 Hz, unless the node config's
         ``control_dt_s`` says otherwise).

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

PD robots, both modes: when no VALID command has come for ``--command-timeout-s`` (wall time in
realtime, simulated time in lockstep) after commands had started, the driver enters Unitree's
damping mode (kp = 0, kd = the robot file's ``damping_mode_kd_nms_per_rad``, tau_ff = 0), logged
once with the reason; on the next valid command the stiffness and feed-forward ramp back over
``--damping-recovery-s`` (contactflow.safety.PDCommandHold). Each ``sensors`` message of a PD
robot carries ``command_mode`` (start / normal / damping / ramp) in its metadata; the entries and
ticks in damping mode are reported at the end.

Base state: the driver's configuration metadata (first ``sensors`` message, kept in a recording's
manifest) says ``base_state: simulation_truth``: the base pose and twist in ``q``/``v`` are the
simulator's true state, not an estimate; a hardware driver says which estimator it uses.

The run ends when a command carries ``finished`` (end of the scenario), when the robot falls
(base below the robot file's ``fall_height_m``: 0.6 m for Talos, 0.35 m for the G1; reported,
then the run ends), or after ``--max-sim-time-s``. A malformed, non-finite or out-of-limit command
is not applied: the last safe command (PD: its target with its gains) is held, and the count is
reported at the end. The logic lives in :class:`contactflow.sim.driver.RobotDriver`.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from _runtime import (connect, Lockstep, Sender, UpstreamError, base_parser, declared_inputs, drain_after_finish,
                      load_node_config, node_main)

log = logging.getLogger("contactflow.mujoco_driver")


def readings_values(robot, r, spec=None, estimators=None) -> dict:
    from contactflow.sim.mujoco_robot import sensor_values

    return sensor_values(r, robot, fields=[f.name for f in spec.fields] if spec is not None else None,
                         estimators=estimators)


def main() -> int:
    from contactflow.errors import ContractError
    from contactflow.messages import port_specs
    from contactflow.robot import load_robot
    from contactflow.environment import load_environment
    from contactflow.seiko.estimation import JointTorqueForceEstimator
    from contactflow.sim.driver import RobotDriver, parse_payload, sim_config_class

    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--realtime", action="store_true", help="wall-clock pacing instead of lockstep")
    p.add_argument("--command-timeout-s", type=float, default=0.1)
    p.add_argument("--damping-recovery-s", type=float, default=1.0,
                   help="PD robots: gain ramp after damping mode [s] (0 = full gains at once)")
    p.add_argument("--max-sim-time-s", type=float, default=600.0)
    p.add_argument("--lockstep-timeout-s", type=float, default=60.0)
    p.add_argument("--environment", action="store_true",
                   help="add the robot file's walls/supports, hand spheres and hand force sensing")
    p.add_argument("--payload", action="append", default=[],
                   help="unmodelled point mass LINK:MASS_KG[:X:Y:Z] welded to a link (simulation only)")
    args = p.parse_args()
    robot = load_robot(args.robot)
    cfg = load_node_config(sim_config_class(robot), args.config, "mujoco_driver")
    specs = port_specs(robot)
    env = load_environment(robot.raw.get("environment"), f"{robot.name}:environment") if args.environment else None
    payloads = [parse_payload(item, i) for i, item in enumerate(args.payload)]
    driver = RobotDriver(robot, cfg, payloads=payloads, environment=env, command_timeout_s=args.command_timeout_s,
                         max_sim_time_s=args.max_sim_time_s, recovery_ramp_s=args.damping_recovery_s)
    sim = driver.sim
    estimators = {}
    if env is not None:
        for c, cs in robot.contacts.items():
            if cs.frame in env.force_joints:
                estimators[c] = JointTorqueForceEstimator(robot.model, cs.frame, env.force_joints[cs.frame])
    sspec = specs["sensors"]
    r = driver.reset()
    dt = sim.control_dt_s

    node = connect()
    wired = set(declared_inputs(node, "mujoco_driver"))
    use_wrench = "wrench" in wired and bool(driver.wrench_links)
    if "wrench" in wired and not driver.wrench_links:
        log.warning("input 'wrench' is wired but %s has no wrench_links: it is ignored", robot.file_label())
    meta = {"sim": cfg, "control_dt_s": dt, "realtime": args.realtime, "payloads": args.payload,
            "actuation": robot.actuation, "base_state": driver.base_state}
    if driver.pd:
        meta.update(command_timeout_s=args.command_timeout_s, damping_recovery_s=args.damping_recovery_s,
                    damping_mode_kd_nms_per_rad=driver.hold.kd_damping)
    sender = Sender(node, {"sensors": specs["sensors"]}, meta)
    mode = (lambda: {"command_mode": driver.command_mode}) if driver.pd else (lambda: {})
    sender.send("sensors", readings_values(robot, r, sspec, estimators), seq=0, t=r.t, **mode())
    finished = False

    def advance(fin: bool) -> bool:
        nonlocal r
        r, done = driver.advance(time.monotonic() if args.realtime else None)
        done = fin or done
        sender.send("sensors", readings_values(robot, r, sspec, estimators), seq=driver.status.ticks, t=r.t,
                    finished=done, **mode())
        return done

    if not args.realtime:
        inputs = {"command": (specs["joint_command"], 0)}
        if use_wrench:
            inputs["wrench"] = (specs["external_wrench"], 0)
        lock = Lockstep(node, inputs, dt=dt, timeout_s=args.lockstep_timeout_s)
        for tick in lock:
            if tick.errors:
                log.warning("tick %d: malformed input(s): %s", tick.k, tick.errors)
            driver.offer_command(tick.inputs["command"], r.t)
            if use_wrench:
                driver.set_wrenches(tick.inputs["wrench"])
            if advance(tick.finished):
                finished = True
                break
    else:
        jc, ew = specs["joint_command"], specs["external_wrench"]
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
                if ev["type"] == "INPUT" and ev["id"] in ("command", "wrench"):
                    spec = jc if ev["id"] == "command" else ew
                    try:
                        fields = spec.unpack(ev["value"].to_numpy(zero_copy_only=False))
                    except ContractError as exc:
                        log.warning("malformed %s ignored: %s", ev["id"], exc)
                        fields = None
                    if ev["id"] == "command":
                        driver.offer_command(fields, time.monotonic())
                    elif use_wrench:
                        driver.set_wrenches(fields)
                    fin = fin or bool(ev["metadata"].get("finished", False))
                elif ev["type"] == "STOP":
                    fin = True
            finished = advance(fin)
            next_deadline += dt
    st = driver.status
    if st.rejected_commands:
        log.warning("%d commands were not applied (malformed, non-finite or out of limits): the last safe command "
                    "was held", st.rejected_commands)
    if st.degraded_commands:
        log.warning("%d commands came from a degraded controller (ok = 0)", st.degraded_commands)
    if st.damping_entries:
        log.warning("damping mode entered %d time(s), %d ticks in damping mode (command timeout %.3f s)",
                    st.damping_entries, st.damping_ticks, args.command_timeout_s)
    if st.malformed_wrenches:
        log.warning("%d malformed external-wrench messages: wrenches cleared for those ticks", st.malformed_wrenches)
    log.info("simulation ended at t = %.3f s after %d ticks%s", r.t, st.ticks, " (the robot fell)" if st.fell else "")
    drain_after_finish(node, 1.0)
    return 0


if __name__ == "__main__":
    node_main("mujoco_driver", main)
