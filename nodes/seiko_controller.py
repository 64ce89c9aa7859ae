"""seiko_controller node: SEIKO flexible-joint Controller, feedback law (10), QP (11), filter (13).

Inputs:  ``sensors`` (``sensors``, tick k): measured sole wrenches, hand forces (world frame,
         rotated here into the surface frames R_c) and joint torques;
         ``desired`` (``desired``, tick k - lag): the Retargeting output. ``--lag`` (default 2)
         pipelines the two QPs: the Controller of tick k uses the Retargeting of tick k-2, so they
         and the input filter run concurrently (2 ticks = 4 ms of extra latency on the operator's
         command; ``--lag 1`` = 2 ms, measured 20 % slower on 2 cores, docs/benchmarks.md).
Outputs: ``command`` (``joint_command``): theta_cmd = theta_d + offset;
         ``state`` (``controller_state``): flexible state and filter values (diagnostics).

Before the first Retargeting message arrives the node uses the Retargeting's reset state (the
same computation as the seiko_retargeting node). If the QP fails, the previous offset is kept
(a safe command: the desired posture plus the last compensation), ``ok = 0`` is sent and a
warning is logged.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import pinocchio as pin

from _runtime import connect, Lockstep, Sender, base_parser, drain_after_finish, load_node_config, node_main

log = logging.getLogger("contactflow.seiko_controller")


def main() -> int:
    from contactflow.messages import port_specs
    from contactflow.robot import load_robot
    from contactflow.seiko.controller import ControllerConfig, SeikoController
    from contactflow.seiko.retargeting import RetargetingConfig, SeikoRetargeting

    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--lag", type=int, default=2, help="ticks between the Retargeting output used and the current tick")
    p.add_argument("--retargeting-config", default=None, help="config of the Retargeting (for its reset state)")
    p.add_argument("--realtime", action="store_true")
    p.add_argument("--blend-from-measured", action="store_true",
                   help="blend the first command_blend_s of commands from the measured joint positions "
                        "(for a robot that does not start at the default posture)")
    args = p.parse_args()
    robot = load_robot(args.robot)
    cfg = load_node_config(ControllerConfig, args.config, "seiko_controller")
    rpath = args.retargeting_config
    if rpath is None and args.config:  # one file for the whole graph: reuse its Retargeting section
        from contactflow.config import read_yaml

        data = read_yaml(args.config)
        rpath = args.config if isinstance(data, dict) and "seiko_retargeting" in data else None
    rcfg = load_node_config(RetargetingConfig, rpath, "seiko_retargeting")
    specs = port_specs(robot)
    effs = list(robot.contacts)
    dims = {e: robot.contacts[e].dim for e in effs}

    r0 = SeikoRetargeting(rcfg, robot).reset()
    desired = {
        "q_d": r0.q, "v_d": np.zeros(robot.nv), "theta_ahead": r0.theta_ahead,
        "lam": {e: np.asarray(r0.lam[e]) for e in effs}, "lam_dot": {e: np.zeros(dims[e]) for e in effs},
        "enabled": dict(r0.enabled),
    }
    # One source of truth for the point contacts' world-fixed surface frames R_c: the Retargeting's
    # configuration (lam_d is expressed in it). Effectors it does not list take their desired
    # orientation when the contact is enabled, as the Retargeting does (seiko.md §5.4, §7.3).
    configured_rc = {k: pin.rpy.rpyToMatrix(*rpy) for k, rpy in rcfg.surface_rpy_rad.items()}
    ctrl = SeikoController(cfg, robot, surface_rotations=configured_rc)
    # The robot starts holding its default posture (the MuJoCo driver's reset command): blend the
    # command from it over command_blend_s (the paper's 2 s FilterInterpolation after reset). The
    # Retargeting's settled posture differs from it by up to ~12 mrad on the arms.
    out = ctrl.reset(r0.q, desired["lam"], desired["enabled"], theta_start=np.array(robot.theta_default))
    lam_read = {e: np.zeros(dims[e]) for e in effs}
    tau_read = np.zeros(robot.n)
    theta_safe = np.array(out.theta_cmd)

    node = connect()
    sender = Sender(node, {"command": specs["joint_command"], "state": specs["controller_state"]}, {"controller": cfg, "lag": args.lag})
    failures = 0
    lock = Lockstep(node, {"sensors": (specs["sensors"], 0), "desired": (specs["desired"], args.lag)}, skip_missing=args.realtime)
    for tick in lock:
        t0 = time.perf_counter()
        d = tick.inputs["desired"]
        if d is not None:
            desired["q_d"] = d["q_d"]
            desired["v_d"] = d["v_d"]
            desired["theta_ahead"] = d["theta_ahead"]
            for i, e in enumerate(effs):
                desired["lam"][e] = d[f"lam_d.{e}"][: dims[e]]
                desired["lam_dot"][e] = d[f"lam_d_dot.{e}"][: dims[e]]
                now_enabled = bool(d["enabled"][i] > 0.5)
                if now_enabled and not desired["enabled"][e] and dims[e] == 3 and e not in configured_rc:
                    ctrl.set_surface_rotation(e, pin.XYZQUATToSE3(np.array(d[f"pose_d.{e}"])).rotation)
                desired["enabled"][e] = now_enabled
        s = tick.inputs["sensors"]
        if tick.k == 0 and s is not None and args.blend_from_measured:
            ctrl.reset(desired["q_d"], desired["lam"], desired["enabled"], theta_start=np.array(s["q"][7:]))
        if s is not None:
            for e in effs:
                key = f"wrench.{e}"
                if key in s:
                    lam_read[e] = s[key][: dims[e]]
                elif f"force.{e}" in s:  # point effector: world force -> surface frame R_c (§6.7)
                    lam_read[e] = ctrl.R_c[e].T @ s[f"force.{e}"]
                else:
                    lam_read[e] = np.zeros(dims[e])
            tau_read = s["tau"]
        out = ctrl.step(
            q_d=desired["q_d"], v_d=desired["v_d"], lam_d=desired["lam"], lam_d_dot=desired["lam_dot"],
            enabled=desired["enabled"], lam_read=lam_read, tau_read=tau_read, theta_ahead=desired["theta_ahead"],
        )
        if out.ok and np.all(np.isfinite(out.theta_cmd)):
            theta_safe = np.array(out.theta_cmd)
        else:
            failures += 1
            if failures <= 5 or failures % 500 == 0:
                log.warning("tick %d: controller QP failed (%s); sending the last safe command", tick.k, out.diagnostics.get("status"))
        dt_step = time.perf_counter() - t0
        sender.send("command", {"theta_cmd": theta_safe, "ok": 1.0 if out.ok else 0.0}, seq=tick.k, t=tick.t, finished=tick.finished)
        state = {
            "q_flex": out.q_flex, "offset": out.offset, "tau_flex": out.tau_flex, "tau_limit": out.tau_limit,
            "solve_time": dt_step,
        }
        for e in effs:
            for name, src in (("lam_flex", out.lam_flex), ("lam_tilde", out.lam_tilde)):
                v = np.zeros(6)
                val = np.asarray(src.get(e, np.zeros(dims[e])))
                v[: val.size] = val
                state[f"{name}.{e}"] = v
        sender.send("state", state, seq=tick.k, t=tick.t, finished=tick.finished)
    if lock.finished_seen:
        drain_after_finish(node)
    if failures:
        log.warning("controller QP failed on %d ticks", failures)
    return 0


if __name__ == "__main__":
    node_main("seiko_controller", main)
