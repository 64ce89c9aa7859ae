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
* ``--realtime``: paced by the wall clock (:func:`run_realtime`): at the start of each control
  period the driver publishes the sensors, takes the newest command received (latest value, never
  waits for one: without a new command the last safe command stays in force, a deadline miss) and
  simulates the period with it; the first ``--warmup-ticks`` ticks are a start-up handshake in which
  it waits for each command. If no command arrives for ``--command-timeout-s`` the last safe
  command is held and reported (PD robots: damping mode), as a hardware driver must. If no VALID
  command has come for ``--command-lost-s`` (default 1 s of wall time, counted from the last
  valid command taken, after the start-up handshake; 0 = never) the controller is lost (hung,
  descheduled, or sending only refused commands): the driver keeps holding, publishes its last
  sensors with ``finished`` (the other nodes and the recorder end normally) and then ENDS the
  run, exit 3, with one line in the hardware driver's words::

      command lost: no valid command for 1.002 s (timeout 1.000 s) on input 'command' from
      seiko_controller/command; the last safe command was held; ending the run

  (lockstep's counterpart is ``--lockstep-timeout-s``: "no input for 60 s while waiting for
  command"). A driver that was itself paused (SIGSTOP) does not trip it: its own absence is not
  counted (its controller had no sensors to answer meanwhile; ``contactflow.sim.driver.CommandLossClock``). With an
  output ``log`` (or ``timing``) declared, one ``driver_timing`` row per period (the command in
  force, its age, the deadline met or missed) goes to the recorder; ``contactflow.recording.summary``
  turns them into ``deadline_misses``, ``command_age_ms_p50/p99`` and ``longest_stall_ms``.

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
(base below the robot file's ``fall_height_m``: 0.6 m for Talos, 0.35 m for the G1), or after
``--max-sim-time-s``. A fall is a failed run: the driver publishes the sensors of the fall with
``finished`` (the recording and its summary, ``fell: true``, complete), then exits 2 with one line
``the robot fell at t = X s (base height Y m < Z m)``; ``--fall-is-ok`` makes a fall a normal end
(exit 0) for graphs whose purpose is to measure falls. A malformed, non-finite or out-of-limit command
is not applied: the last safe command (PD: its target with its gains) is held, and the count is
reported at the end. The logic lives in :class:`contactflow.sim.driver.RobotDriver`.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from contactflow.nodes._runtime import (REALTIME_WARMUP_TICKS, connect, UpstreamError, base_parser, declared_inputs,
                      drain_after_finish, is_received_repeat, load_node_config, lockstep_for, meta_seq, meta_time, SEQ_RULE,
                      node_main, sender_for, upstream_failure)

log = logging.getLogger("contactflow.mujoco_driver")


def readings_values(robot, r, spec=None, estimators=None) -> dict:
    from contactflow.sim.mujoco_robot import sensor_values

    return sensor_values(r, robot, fields=[f.name for f in spec.fields] if spec is not None else None,
                         estimators=estimators)


def main() -> int:
    from contactflow.errors import ConfigError, ContactflowError
    from contactflow.contracts.messages import port_specs
    from contactflow.robot import load_robot
    from contactflow.environment import load_environment
    from contactflow.seiko.estimation import JointTorqueForceEstimator
    from contactflow.sim.driver import RobotDriver, parse_payload, sim_config_class

    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--realtime", action="store_true", help="wall-clock pacing instead of lockstep")
    p.add_argument("--command-timeout-s", type=float, default=0.1)
    p.add_argument("--damping-recovery-s", type=float, default=1.0,
                   help="PD robots: gain ramp after damping mode [s] (0 = full gains at once)")
    p.add_argument("--command-lost-s", type=float, default=1.0,
                   help="realtime: no valid command for this long [s of wall time] after the start-up -> the run "
                        "ends with a failure naming the input (0 = never)")
    p.add_argument("--fall-is-ok", action="store_true",
                   help="a fall ends the run normally (exit 0) instead of failing it (exit 2)")
    p.add_argument("--max-sim-time-s", type=float, default=600.0)
    p.add_argument("--lockstep-timeout-s", type=float, default=60.0)
    p.add_argument("--warmup-ticks", type=int, default=REALTIME_WARMUP_TICKS,
                   help="realtime: start-up ticks in which the driver waits for each command before the wall "
                        "clock starts (every node of the graph has then run)")
    p.add_argument("--environment", action="store_true",
                   help="add the robot file's walls/supports, hand spheres and hand force sensing")
    p.add_argument("--payload", action="append", default=[],
                   help="unmodelled point mass LINK:MASS_KG[:X:Y:Z] welded to a link (simulation only)")
    args = p.parse_args()
    if not (args.command_lost_s >= 0):  # NaN too
        raise ConfigError(f"--command-lost-s must be >= 0 s (0 = never), got {args.command_lost_s}")
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
    sources = declared_inputs(node, "mujoco_driver")  # input -> source
    wired = set(sources)
    use_wrench = "wrench" in wired and bool(driver.wrench_links)
    if "wrench" in wired and not driver.wrench_links:
        log.warning("input 'wrench' is wired but %s has no wrench_links: it is ignored", robot.file_label())
    meta = {"sim": cfg, "control_dt_s": dt, "realtime": args.realtime, "payloads": args.payload,
            "actuation": robot.actuation, "base_state": driver.base_state}
    if driver.pd:
        meta.update(command_timeout_s=args.command_timeout_s, damping_recovery_s=args.damping_recovery_s,
                    damping_mode_kd_nms_per_rad=driver.hold.kd_damping)
    if args.realtime:
        meta.update(warmup_ticks=args.warmup_ticks, command_lost_s=args.command_lost_s)
    sender = sender_for(node, "mujoco_driver", specs, meta, optional=("timing",))  # timing: real time only
    mode = (lambda: {"command_mode": driver.command_mode}) if driver.pd else (lambda: {})
    if not args.realtime:
        sender.send("sensors", readings_values(robot, r, sspec, estimators), seq=0, t=r.t, **mode())
    finished = False
    lost = ""

    def advance(fin: bool) -> bool:
        nonlocal r
        r, done = driver.advance(time.monotonic() if args.realtime else None)
        done = fin or done
        sender.send("sensors", readings_values(robot, r, sspec, estimators), seq=driver.status.ticks, t=r.t,
                    finished=done, **mode())
        return done

    if not args.realtime:
        lock = lockstep_for(node, "mujoco_driver", specs, optional=("wrench",) if use_wrench else (), dt=dt,
                            timeout_s=args.lockstep_timeout_s)
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
        lost = run_realtime(node, driver, sender, specs, lambda rr: readings_values(robot, rr, sspec, estimators),
                            mode, use_wrench=use_wrench, warmup_ticks=args.warmup_ticks,
                            timeout_s=args.lockstep_timeout_s, command_lost_s=args.command_lost_s,
                            command_source=sources.get("command", "command"))
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
    log.info("simulation ended at t = %.3f s after %d ticks%s", driver.readings.t, st.ticks,
             " (the robot fell)" if st.fell else "")
    drain_after_finish(node, 1.0)  # the last sensors reach the other nodes and the recorder first
    if lost:
        raise UpstreamError(lost)
    if st.fell and not args.fall_is_ok:
        raise ContactflowError(st.fall)
    return 0


#: Real time: the driver takes the events received so far this long before each deadline [s] (then
#: again at the deadline), so that the command, usually in by then, is not received between the
#: deadline and the sensors' publish.
DRAIN_AHEAD_S = 0.0004


def run_realtime(node, driver, sender, specs, values_of, mode, *, use_wrench: bool, warmup_ticks: int,
                 timeout_s: float, command_lost_s: float = 0.0, command_source: str = "command") -> str:
    """The real-time loop: the driver paced by the wall clock (module docstring, ``--realtime``).

    Period k (control period ``dt``): at its deadline the driver publishes the sensors of t_k, then
    takes the newest command received so far (:class:`contactflow.sim.driver.NewestCommand`; none
    new: the last safe command stays in force, a miss; events are taken :data:`DRAIN_AHEAD_S` before
    the deadline, at it and after the publish, so a command delivered during the publish counts, and
    one computed from the sensors just published waits a period) and simulates [t_k, t_k+1) with it; so a command
    acts from the period after the sensors it was computed from, as on a robot whose joint
    controllers latch the newest command at their period start. The deadlines are t0 + k dt on
    the monotonic clock; a period started less than one period late does not move the later ones;
    one started a period late or more (the simulator itself fell behind) re-anchors them one
    period after its start (no burst of catch-up periods without commands), and its ``late_s``
    counts the periods lost. The first ``warmup_ticks`` periods are a start-up handshake: the
    driver waits for the command of the previous sensors (every node has run and warmed up) and
    the wall clock starts after them. One ``timing`` row (contract ``driver_timing``) per period
    goes to the node's batched log when the entry declares ``log`` (or on ``timing`` if declared), sent
    after the next sensors and with their ``finished`` (so the stream of a complete run ends finished).

    Command loss: when no valid command has been taken for ``command_lost_s`` [s of wall time]
    (0 = never) since the last one (the clock starts with the first period after the start-up, or
    with the first valid command when there is no start-up; the driver's own absence, a period
    that began more than two periods after the one before, does not count), the sensors of that
    period are the last (``finished``). Returns that failure line (module docstring), or '' for any other end.
    """
    from contactflow.errors import ContractError
    from contactflow.contracts.ports import input_specs
    from contactflow.sim.driver import CommandLossClock, NewestCommand

    jc, ew = (input_specs("mujoco_driver", specs)[p] for p in ("command", "wrench"))  # declared inputs
    dt = driver.sim.control_dt_s
    send_timing = sender.logging or "timing" in sender.wire
    latch = NewestCommand()
    stopped = False
    hold_from = None  # after the publish of the sensors of tick k: commands of seq >= k wait a period
    held: list[tuple] = []
    timing_row = None  # (fields, seq, t) of the period just simulated: sent after the next sensors, finished with them

    def handle(ev) -> None:
        nonlocal stopped
        typ = ev["type"]
        if typ == "INPUT" and ev["id"] in ("command", "wrench"):
            spec = jc if ev["id"] == "command" else ew
            md = ev["metadata"]
            try:
                fields = spec.decode(ev["value"])
            except ContractError as exc:
                log.warning("malformed %s ignored: %s", ev["id"], exc)
                fields = None
            if ev["id"] == "command":
                seq = meta_seq(md)
                if md.get("finished", False) and is_received_repeat(md, latch.seq):
                    latch.finished = True  # a re-sent end of run (Sender.repeat_finished) whose original arrived
                elif seq is not None:
                    offer = (seq, meta_time(md, float("nan")), fields, bool(md.get("finished", False)))
                    if hold_from is not None and seq >= hold_from:
                        held.append(offer)  # computed from the sensors just published: next period
                    else:
                        latch.offer(*offer)
                else:
                    log.warning("command without %s ignored", SEQ_RULE)
            elif use_wrench:
                driver.set_wrenches(fields)
        elif typ == "STOP":
            stopped = True
        elif typ == "INPUT_CLOSED" and ev["id"] == "command" and not latch.finished:
            raise UpstreamError("input 'command' closed before the run ended: the controller stopped")
        elif typ == "NODE_FAILED":
            raise UpstreamError(upstream_failure(ev.get("value")))

    def drain() -> None:  # every event already received, without blocking
        for _ in range(1000):
            ev = node.try_recv()
            if ev is None:
                return
            handle(ev)

    def send_timing_row(finished: bool) -> None:
        """The period before's timing row, once: after the next sensors (``finished`` with them) or on a failure."""
        nonlocal timing_row
        if timing_row is not None:
            sender.send("timing", timing_row[0], seq=timing_row[1], t=timing_row[2], finished=finished)
            timing_row = None

    pending, done = driver.readings, False  # the state of t_k, published at the start of period k
    applied_seq, applied_t = -1, float("nan")
    deadline = wall0 = None
    k = 0
    loss = CommandLossClock(dt, command_lost_s)  # time without a valid command (--command-lost-s)
    lost = ""
    try:
        while True:
            if k < warmup_ticks:  # start-up handshake: wait for the command of the previous sensors
                waited = time.monotonic()
                while k >= 1 and latch.seq < k - 1 and not stopped:
                    ev = node.next(timeout=1.0)
                    if ev is None:
                        raise UpstreamError("event stream closed before the run ended")
                    handle(ev)
                    if latch.seq < k - 1 and time.monotonic() - waited > timeout_s:
                        raise UpstreamError(f"no command for tick {k - 1} within {timeout_s:.0f} s (start-up)")
            else:
                if deadline is None:  # the wall clock starts one period after the last start-up tick
                    deadline = last_start + dt if k > 0 else time.monotonic()
                remaining = deadline - time.monotonic()
                if remaining > DRAIN_AHEAD_S and not stopped:
                    # sleep to shortly before the deadline and take what has arrived (the command is
                    # usually there by then): a received event costs ~0.1 ms of this thread in dora 1.1,
                    # spent here in the slack instead of between the deadline and the sensors' publish
                    time.sleep(remaining - DRAIN_AHEAD_S)
                    drain()
                    remaining = deadline - time.monotonic()
                if remaining > 0 and not stopped:
                    # sleep to the deadline, then take everything that arrived meanwhile: cheaper than
                    # waking up for each event (only the newest command counts)
                    time.sleep(remaining)
                drain()  # late or not: what has arrived by now counts (never blocks)
            start = time.monotonic()
            if wall0 is None:
                wall0 = start
            # the run ends at the sensors after the last period (fell, max time), on STOP, when the
            # newest command says the scenario finished (as in lockstep: the same number of ticks), or
            # when the commands are lost
            finishing = done or stopped or latch.finished or bool(lost)
            sender.send("sensors", values_of(pending), seq=k, t=pending.t, finished=finishing, **mode())
            send_timing_row(finishing)  # the period before, sent once it is known whether it was the last
            if finishing:
                break
            if deadline is not None:
                # the command is latched after the sensors' publish (a robot's low level reads its state,
                # then writes the newest command): one sent before the deadline and still in the daemon
                # then is taken now (~0.15 ms of publish), not a period later; a command computed from the
                # sensors just published (seq k) is held for the next period, so a command still acts
                # from the period after the state it answers
                hold_from = k
                drain()
                hold_from = None
            new, fields, seq, t_cmd = latch.take()
            for offer in held:
                latch.offer(*offer)
            held.clear()
            if new and driver.offer_command(fields, start):
                applied_seq, applied_t = seq, t_cmd
            else:
                new = False
                if deadline is not None and k >= warmup_ticks > 0:
                    loss.start(start)  # the start-up handshake took a command for each tick: commands had started
            without_s = loss.period(start, new)
            if without_s is not None:
                # no command, or only refused ones: this period is simulated under the held command, and
                # the sensors after it are the last (finished)
                lost = (f"command lost: no valid command for {without_s:.3f} s (timeout {command_lost_s:.3f} s) "
                        f"on input 'command' from {command_source}; the last safe command was held"
                        f"{' (damping mode)' if driver.command_mode == 'damping' else ''}; ending the run")
                log.error("t = %.3f s: %s", pending.t, lost)
            t_k = pending.t
            pending, done = driver.advance(start)
            step_s = time.monotonic() - start
            if send_timing:
                timing_row = ({"command_seq": applied_seq, "command_t": applied_t if applied_seq >= 0 else 0.0,
                               "new_command": float(new), "paced": float(deadline is not None),
                               "late_s": start - deadline if deadline is not None else 0.0,
                               "wall_s": start - wall0, "step_s": step_s}, k, t_k)
            if sender.logging and sender.pending >= 2 * sender.log_every:
                sender.flush()  # here, in the slack of the period, not inside the next sensors publish
            last_start = start
            if deadline is not None:
                # a period started a whole period late or more (the driver was descheduled or overran):
                # the next deadline is one period from now, not a burst of catch-up periods (the rows'
                # late_s says how many periods were lost; contactflow.recording.summary counts them as misses)
                deadline = deadline + dt if start - deadline < dt else start + dt
            k += 1
    except BaseException:  # a failure mid-run: the last period's timing row is not lost with it
        send_timing_row(False)
        raise
    return lost


if __name__ == "__main__":
    node_main("mujoco_driver", main)
