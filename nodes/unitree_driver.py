"""unitree_driver node: a real Unitree G1 (or ``contactflow sim-robot g1``) over Unitree's low-level DDS protocol.

The same ports as ``mujoco_driver`` for a PD robot, so the graph cannot tell sim from hardware:

Inputs:  ``command`` (``joint_command``): per joint q_target [rad], kp [N m/rad], kd [N m s/rad],
         tau_ff [N m], ok; the newest valid one is sent to the motors. Keep-alive re-sends
         (``repeat`` metadata, a LAC controller's ``heartbeat``) refresh the watchdog like a command.
         ``wrench`` (``external_wrench``, OPTIONAL): accepted for wiring compatibility and ignored
         (on hardware external wrenches are physical; the recorder still records the stream).
         ``estop`` (``estop``, OPTIONAL): a message with stop >= 0.5 latches damping mode, and so
         does the input closing (the e-stop's node died: ``nodes/estop.py``) or falling silent for
         ``--estop-timeout-s`` after its first message (the node hung).
Outputs: ``sensors`` (``sensors``) every control tick (the robot file's ``control_rate_hz``, 50 Hz),
         wall-clock paced (a tick more than one period late is not made up: no burst of stale
         ticks; counted as ``late_ticks``), ``seq`` contiguous; tick 0 at the first state, then a
         warm-up: tick 1 only once the graph's first valid command came (every node has run once;
         no backlog of sensors forms in a controller's queue while it loads); ``t`` = the robot's
         clock (the LowState ``tick`` [ms]) counted so that the first command falls at t = 0 (tick 1
         at one period); metadata
         ``command_mode`` (wait / startup / normal / damping / ramp / estop / fell / lost_state /
         command_lost / end).

DDS (own thread, :class:`contactflow.hardware.link.UnitreeLink`): ``rt/lowstate`` read and
CRC-checked; ``rt/lowcmd`` sent at 500 Hz (right after each state) with the CRC, ``mode_machine``
and ``mode_pr`` copied from the newest state, joints mapped by name to the motor slots
(``unitree_motor_slots`` of the robot file). ``--domain`` / ``--interface`` choose the network;
the environment variables ``CONTACTFLOW_UNITREE_DOMAIN`` / ``CONTACTFLOW_UNITREE_INTERFACE``
override them (and ``CONTACTFLOW_UNITREE_STATE_TIMEOUT_S`` the lost-state timeout: an emulator on a
loaded machine misses the robot's 40 ms) (so one graph file runs on the emulator and on the robot, docs/hardware.md).

Safety (:mod:`contactflow.hardware.unitree`): nothing is sent before the first state and the first
valid command; start-up ramp from the measured posture over ``--startup-ramp-s``; watchdog:
no valid command for ``--command-timeout-s`` -> damping mode (kp = 0, kd = the robot file's
``damping_mode_kd_nms_per_rad``, tau = 0), recovery ramp when commands resume; limit and torque
clamps; non-finite or out-of-limit commands refused; no ``rt/lowstate`` for ``--state-timeout-s``
-> damping latched and the run ends with a message naming the topic, domain and interface; the
command source's process dying (seen in ``/proc`` by the 500 Hz thread: a pending SIGKILL or the
kernel's exiting flag, :mod:`contactflow.hardware.process_watch`; otherwise dora closing the input)
-> damping in the same ``rt/lowcmd`` and the run ends naming that node; the fall rule: once commands
are sent, an IMU tilt beyond ``--fall-tilt-rad`` (1.0 rad) -> damping latched in the ``rt/lowcmd``
answering that state, the sensors of the fall published with ``finished``, and the run fails (exit 2)
with one line ``the robot fell: IMU tilt X deg > ...`` as ``mujoco_driver``'s fall does; the wireless remote's
``--remote-estop`` buttons (L2+B) -> damping latched; a watchdog during the start-up ramp ramps
again from the measured posture when commands resume; at the
end of a run (SIGTERM included), damping for ``exit_damping_s`` before the process exits. Every transition is logged
once with its reason; the counters (states, bad CRC, stale, commands, rejected, clamps, damping
entries, transitions) are printed at the end as ``unitree_driver status: {json}``.

Base state: ``base_state`` in the configuration metadata says it is ESTIMATED (IMU orientation +
leg kinematics with the soles fixed since start-up, flat ground); sole wrenches are estimated
quasi-statically from the leg joint torques (``sole_wrench``). Without a robot or emulator the
driver waits ``--first-state-timeout-s`` for a state, then fails naming the topic, domain and
interface.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time

from contactflow.nodes._runtime import REPEAT_FINISHED_AFTER_S, UpstreamError, base_parser, connect, declared_inputs, node_main, sender_for

log = logging.getLogger("contactflow.unitree_driver")


def _node_process(node_id: str, pid: int | None = None) -> int | None:
    """The pid of dora node ``node_id`` of this dataflow among this process's siblings (children of
    the daemon; dora gives each node its ``DORA_NODE_CONFIG``), or None; with ``pid``: that pid if
    it is that node, else None."""
    from contactflow.hardware.process_watch import find_child_with_env, process_env
    from contactflow.nodes._local import node_identity

    flow, _ = node_identity()
    if not flow:
        return None
    match = lambda t: node_identity({"DORA_NODE_CONFIG": t}) == (flow, node_id)  # noqa: E731
    if pid is not None:
        env = process_env(pid)
        return pid if env is not None and match(env.get("DORA_NODE_CONFIG", "")) else None
    # dora runs one process per node: the first match, searched from this process's pid outwards
    found = find_child_with_env(os.getppid(), "DORA_NODE_CONFIG", match, exclude=os.getpid(), near=os.getpid())
    return found[0] if found else None


def main() -> int:
    from contactflow.errors import ContactflowError, ContractError
    from contactflow.hardware.link import UnitreeLink
    from contactflow.hardware.process_watch import ProcessMonitor
    from contactflow.hardware.unitree import BASE_STATE, SOLE_WRENCH, UnitreeDriverConfig
    from contactflow.contracts.messages import port_specs
    from contactflow.contracts.ports import input_specs
    from contactflow.robot import load_robot
    from contactflow.sim.mujoco_robot import sensor_values

    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--domain", type=int, default=1, help="DDS domain id (the robot: 0; env CONTACTFLOW_UNITREE_DOMAIN overrides)")
    p.add_argument("--interface", default="lo", help="network interface (env CONTACTFLOW_UNITREE_INTERFACE overrides)")
    p.add_argument("--command-timeout-s", type=float, default=0.1, help="watchdog: no valid command -> damping mode [s]")
    p.add_argument("--state-timeout-s", type=float, default=0.04,
                   help="no rt/lowstate -> damping and failure [s] (env CONTACTFLOW_UNITREE_STATE_TIMEOUT_S overrides)")
    p.add_argument("--first-state-timeout-s", type=float, default=10.0, help="wait for the first rt/lowstate [s]")
    p.add_argument("--startup-ramp-s", type=float, default=2.0, help="ramp from the measured posture to the commands [s]")
    p.add_argument("--startup-ramp-gains", action="store_true",
                   help="also ramp kp and tau_ff from zero during the start-up ramp (robot started hanging in its harness)")
    p.add_argument("--damping-recovery-s", type=float, default=1.0, help="gain ramp after damping mode [s]")
    p.add_argument("--exit-damping-s", type=float, default=0.5, help="damping sent before the process exits [s]")
    p.add_argument("--estop-timeout-s", type=float, default=0.25,
                   help="the estop input silent this long after its first message (its node hung) -> damping latched [s]")
    p.add_argument("--remote-estop", default="L2+B",
                   help="wireless-remote buttons that latch damping, joined by '+' ('none': no remote e-stop)")
    p.add_argument("--fall-tilt-rad", type=float, default=UnitreeDriverConfig.fall_tilt_rad,
                   help="fall rule: IMU tilt beyond this once commands are sent -> damping latched, the run fails "
                        "(exit 2) [rad]; 0: no fall rule")
    args = p.parse_args()
    domain = int(os.environ.get("CONTACTFLOW_UNITREE_DOMAIN", args.domain))
    interface = os.environ.get("CONTACTFLOW_UNITREE_INTERFACE", args.interface)
    robot = load_robot(args.robot)
    state_timeout_s = float(os.environ.get("CONTACTFLOW_UNITREE_STATE_TIMEOUT_S", args.state_timeout_s))
    cfg = UnitreeDriverConfig(command_timeout_s=args.command_timeout_s, state_timeout_s=state_timeout_s,
                              first_state_timeout_s=args.first_state_timeout_s, startup_ramp_s=args.startup_ramp_s,
                              startup_ramp_gains=args.startup_ramp_gains,
                              recovery_ramp_s=args.damping_recovery_s, exit_damping_s=args.exit_damping_s,
                              estop_timeout_s=args.estop_timeout_s, remote_estop=args.remote_estop,
                              fall_tilt_rad=args.fall_tilt_rad or None)
    specs = port_specs(robot)
    sspec = specs["sensors"]
    jc, es = (input_specs("unitree_driver", specs)[p] for p in ("command", "estop"))  # declared inputs
    fields = [f.name for f in sspec.fields]
    dt = 1.0 / float(robot.raw.get("control_rate_hz", 50.0))

    link = UnitreeLink(robot, cfg, domain, interface)
    node = connect()
    wired = declared_inputs(node, "unitree_driver")
    source = wired.get("command", "command")
    meta = {"driver": cfg, "control_dt_s": dt, "realtime": True, "actuation": robot.actuation, "base_state": BASE_STATE,
            "sole_wrench": SOLE_WRENCH, "dds_domain": domain, "network_interface": interface,
            "damping_mode_kd_nms_per_rad": link.shaper.hold.kd_damping}

    sender = sender_for(node, "unitree_driver", specs, meta)
    failure, ended, late, t0_mono = "", "", 0, None
    terminated: list[int] = []
    # SIGTERM (dora stop, systemd, kill): the normal end of the run, damping burst included
    signal.signal(signal.SIGTERM, lambda signum, _frame: terminated.append(signum))
    link.start()  # after the imports and the dora connection: the 500 Hz thread shares the GIL
    source_node = source.split("/")[0]

    def watch_source() -> None:
        # on its own thread (a /proc scan takes milliseconds): the command source's process, polled
        # by the 500 Hz thread for the first sign of its death (contactflow.hardware.process_watch)
        t_search = time.monotonic()
        try:
            pid = _node_process(source_node)
            mon = ProcessMonitor(pid) if pid is not None else None
            if mon is not None and _node_process(source_node, pid) != pid:  # reused between scan and open
                mon.close()
                mon = None
        except OSError:
            mon = None
        if mon is None:
            log.info("node %r: its process is not watched (not found among this node's siblings): dora's "
                     "INPUT_CLOSED is the notice of its end", source_node)
            return
        if not (ended or failure):
            link.watch_source(mon, lambda why: f"command source {source} closed: node {source_node!r} stopped "
                                               f"(process {mon.pid}: {why}); damping mode")
            log.info("node %r: process %d watched for its end (found in %.0f ms)", source_node, mon.pid,
                     1e3 * (time.monotonic() - t_search))

    watcher = threading.Thread(target=watch_source, name="watch-command-source", daemon=True)
    try:
        if not link.wait_first_state(cfg.first_state_timeout_s):
            raise ContactflowError(f"no rt/lowstate within {cfg.first_state_timeout_s:g} s on DDS domain {domain}, "
                                   f"interface {interface!r}: is the robot in low-level mode, or `contactflow sim-robot "
                                   f"{robot.name} --domain {domain}` running?")
        tick0 = link.latest.tick_ms
        seq, deadline, wrench_logged = 0, time.monotonic(), False
        estop_heard: float | None = None  # monotonic time of the newest estop message
        while True:
            # tick `seq`; the tick after the end says `finished` (as mujoco_driver's does); t is the
            # robot's clock (LowState tick, ms) since the first state
            r = link.readings(((link.latest.tick_ms - tick0) & 0xFFFFFFFF) / 1000.0)
            sender.send("sensors", sensor_values(r, robot, fields=fields), seq=seq, t=r.t,
                        finished=bool(failure or ended), command_mode=link.shaper.mode)
            if failure or ended:
                break
            seq += 1
            deadline += dt
            if deadline < time.monotonic() - dt:  # more than a tick late: no burst of stale ticks
                late += 1
                deadline = time.monotonic()
            # warm-up: after tick 0 the driver waits for the graph's first valid command (every node has
            # run once; no backlog of sensors forms while a controller loads)
            while (((remaining := deadline - time.monotonic()) > 0 or (seq == 1 and link.shaper.last_command_s is None))
                   and not (failure or ended or terminated or link.watch_failure)):
                ev = node.next(timeout=max(remaining, 0.01))
                if ev is None:
                    ended = "event stream closed"
                    break
                kind = ev["type"]
                if kind == "INPUT":
                    iid = ev["id"]
                    if iid == "command":
                        try:
                            f = jc.decode(ev["value"])
                        except ContractError as exc:
                            log.warning("malformed command refused: %s", exc)
                            f = None
                        link.offer_command(f, repeat=bool(ev["metadata"].get("repeat", False)))
                        if watcher.ident is None:  # the source runs: look for its process
                            watcher.start()
                        if ev["metadata"].get("finished", False):
                            ended = "end of the scenario (the command says finished)"
                            link.watch_source(None, None)  # its process may now end normally
                    elif iid == "estop":
                        estop_heard = time.monotonic()
                        try:
                            stop = es.decode(ev["value"])["stop"][0] >= 0.5
                        except ContractError:
                            stop = True  # a malformed e-stop message is an e-stop
                        if stop:
                            link.estop(f"estop input from {wired.get('estop', 'estop')}: "
                                       f"{ev['metadata'].get('reason', 'stop')}")
                    elif iid == "wrench" and not wrench_logged:
                        wrench_logged = True
                        log.info("input 'wrench' ignored: on hardware external wrenches are physical (still recorded)")
                elif kind == "INPUT_CLOSED" and ev["id"] == "command":
                    # the controller is gone: damping now, not after the watchdog (dora's notice; the
                    # process watcher usually latched it already)
                    failure = (link.watch_failure or link.failure
                               or f"command source {source} closed: node {source_node!r} stopped; damping mode")
                    link.latch("command_lost", failure)
                    link.status.failure = failure
                elif kind == "INPUT_CLOSED" and ev["id"] == "estop":
                    # a dead e-stop source cannot stop the robot any more: stop it now
                    link.estop(f"estop source {wired.get('estop', 'estop')} closed: the e-stop is gone")
                elif kind == "STOP":
                    ended = "dataflow stopped"
            if seq == 1 and link.shaper.last_command_s is not None:
                # the clock starts with the first command: it answered tick 0, so t of tick 1 is one
                # period later (the emulator's scenario clock also starts with the robot's first command)
                tick0 = (link.latest.tick_ms - round(1000 * dt)) & 0xFFFFFFFF
                deadline = time.monotonic()
                t0_mono = deadline - dt  # wall-clock time of t = 0 (approximately: the robot's clock)
                if estop_heard is not None:  # the e-stop ticks with the sensors: none were sent in the warm-up
                    estop_heard = deadline
            if estop_heard is not None and time.monotonic() - estop_heard > cfg.estop_timeout_s and not link.shaper.latched:
                link.estop(f"estop source {wired.get('estop', 'estop')} silent for "
                           f"{1e3 * (time.monotonic() - estop_heard):.0f} ms (its node hung?): the e-stop cannot be heard")
                estop_heard = None
            if link.failure and not failure:
                failure = link.failure
            if link.watch_failure and not (failure or ended):
                failure = link.status.failure = link.watch_failure
            if terminated and not ended:
                ended = "SIGTERM received"
    finally:
        reason = failure or ended or "driver stopped"
        link.watch_source(None, None)
        link.latch("end", f"run ended: {reason}")
        first = min(REPEAT_FINISHED_AFTER_S, cfg.exit_damping_s)
        time.sleep(first)
        try:  # the last sensors (finished) once more where a dropping queue reads them (Sender.repeat_finished)
            sender.repeat_finished()
        except Exception as exc:  # noqa: BLE001 - the damping and the stop below come first
            log.warning("end of run not re-sent: %s", exc)
        time.sleep(cfg.exit_damping_s - first)
        link.stop()
        print(f"[contactflow] unitree_driver status: {json.dumps({**link.status.summary(), 'late_ticks': late, 'last_command_mono_s': link.shaper.last_command_s, 't0_mono_s': t0_mono})}",
              flush=True)
    if failure and link.shaper.latched == "fell" and failure == link.failure:
        raise ContactflowError(failure)  # the robot's failure, as mujoco_driver's fall (exit 2)
    if failure:
        raise UpstreamError(failure)
    log.info("run ended: %s; damping mode sent for %.2f s", ended, cfg.exit_damping_s)
    return 0


if __name__ == "__main__":
    node_main("unitree_driver", main)
