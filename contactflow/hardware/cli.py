"""``contactflow sim-robot``: the Unitree emulator on DDS (:mod:`contactflow.hardware.emulator`)."""

from __future__ import annotations


def add_parser(subparsers) -> None:
    """Register ``contactflow sim-robot``."""
    p = subparsers.add_parser("sim-robot", help="play a Unitree robot on DDS (loopback) with the MuJoCo model")
    p.add_argument("robot", help="robot name under robots/ (g1, g1_29dof)")
    p.add_argument("--domain", type=int, default=1, help="DDS domain id (the real G1 uses 0; unitree_mujoco 1)")
    p.add_argument("--interface", default="lo", help="network interface (loopback only for an emulator)")
    p.add_argument("--duration-s", type=float, default=float("inf"), help="wall-clock run time [s]")
    p.add_argument("--status-json", default=None, help="write the counters to this JSON file at the end")
    p.add_argument("--corrupt-state-every", type=int, default=0,
                   help="fault injection: every k-th rt/lowstate with a wrong CRC (0 = none)")
    p.add_argument("--harness-s", type=float, default=0.0,
                   help="the base is held at its start pose (feet on the ground) for this long after the first "
                        "command, for a driver run with --startup-ramp-gains (the robot starts damped) [s] (0 = no harness: the robot stands on its feet)")
    p.add_argument("--scenario", default=None,
                   help="apply the external wrenches (wrenches:) of this teleop scenario file, the one the graph's "
                        "wrench_injector plays (clock: since the first command)")
    p.add_argument("--press-remote", default="",
                   help="test: wireless-remote buttons shown pressed in rt/lowstate (e.g. L2+B, the driver's e-stop)")
    p.add_argument("--press-at-s", type=float, default=0.0, help="when --press-remote is pressed: simulated time since the first command [s]")
    p.set_defaults(func=_run)


def _run(args) -> int:
    import signal

    from contactflow.hardware.emulator import UnitreeEmulator, log
    from contactflow.robot import load_robot

    emu = UnitreeEmulator(load_robot(args.robot), args.domain, args.interface,
                          corrupt_state_every=args.corrupt_state_every, harness_s=args.harness_s,
                          press_remote=args.press_remote, press_at_s=args.press_at_s, scenario=args.scenario)
    stopped = []
    signal.signal(signal.SIGTERM, lambda *_: stopped.append(1))
    log.info("%s on DDS domain %d, interface %s: publishing rt/lowstate at %.0f Hz", args.robot, args.domain,
             args.interface, 1.0 / emu.dt)
    try:
        emu.run(args.duration_s, stop=lambda: bool(stopped))
    except KeyboardInterrupt:
        pass
    if args.status_json:
        emu.write_status(args.status_json)
    s = emu.status
    fell = (", the robot fell under the driver's damping command" if s.fell_in_damping
            else ", the robot fell" if s.fell else "")
    log.info("emulator ended at t = %.3f s (simulated since the first command): %d states (%d corrupted), %d commands, "
             "%d bad CRC, %d invalid, %d overruns%s", s.t_s, s.states, s.states_corrupted, s.commands, s.commands_bad_crc,
             s.commands_invalid, s.overruns, fell)
    return 0
