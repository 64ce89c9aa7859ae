"""In-process closed loop of the SEIKO pipeline (no dora): the same library calls as the nodes of
``dataflows/seiko_talos*.yml`` in one Python process, for benchmarks that sweep parameters.

Per tick k (dt = 2 ms), as in the dataflow with ``--lag 1``: operator scenario -> input filter
(centred on the desired poses of tick k-1) -> Retargeting (contact / push requests on edges of
the operator's flags) -> Controller (Retargeting output of tick k-1, measured wrenches and
torques of tick k) -> MuJoCo step. A ``disturb(sim, t)`` callback applies external wrenches.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Callable

import numpy as np
import pinocchio as pin

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from contactflow.environment import load_environment  # noqa: E402
from contactflow.operator.input_filter import InputFilter, InputFilterConfig  # noqa: E402
from contactflow.operator.scenario import ScenarioPlayer, load_scenario  # noqa: E402
from contactflow.seiko.admittance import EffectorAdmittance  # noqa: E402
from contactflow.seiko.controller import ControllerConfig, SeikoController  # noqa: E402
from contactflow.seiko.estimation import JointTorqueForceEstimator  # noqa: E402
from contactflow.seiko.retargeting import RetargetingConfig, SeikoRetargeting  # noqa: E402
from contactflow.sim.mujoco_robot import MujocoRobotSim, SimConfig  # noqa: E402


@dataclasses.dataclass
class LoopLog:
    t: np.ndarray
    q: np.ndarray
    gyro: np.ndarray
    tau: np.ndarray
    tau_limit: np.ndarray
    fell: bool
    wrench: dict = dataclasses.field(default_factory=dict)
    pose_d: dict = dataclasses.field(default_factory=dict)


def run_loop(robot, scenario_path, *, ccfg: ControllerConfig | None = None, rcfg: RetargetingConfig | None = None,
             environment: bool = False, disturb: Callable | None = None, controller_on: bool = True,
             duration_s: float | None = None, sim_hook: Callable | None = None,
             extra_bodies: list | None = None, admittance: dict | None = None,
             operator_hook: Callable | None = None) -> LoopLog:
    """Run the closed loop; ``admittance``: effector -> :class:`AdmittanceParams` of eq. (14) on
    those effectors while disabled (as ``nodes/admittance.py`` in the multi-contact graph; the
    twist is added to the operator's, tick k measured wrench in the axes of pose_d of k-1).
    ``operator_hook(t, cmd, reading) -> cmd`` may change the scenario's command of each tick from
    the latest simulator reading (an operator model, e.g. "stop reaching when ...").
    ``LoopLog.pose_d``: effector -> (T, 3) the Retargeting's desired world position [m] at tick k (the
    output the Controller uses at tick k + 1)."""
    ccfg = ccfg or ControllerConfig()
    rcfg = rcfg or RetargetingConfig()
    env = load_environment(robot.raw.get("environment")) if environment else None
    sim = MujocoRobotSim(SimConfig(), robot, environment=env, extra_bodies=extra_bodies)
    if sim_hook is not None:
        sim_hook(sim)  # e.g. change contact parameters of the compiled model
    scn = load_scenario(scenario_path, robot)
    player = ScenarioPlayer(scn)
    effs = list(robot.contacts)
    rt = SeikoRetargeting(rcfg, robot, env)
    out_prev = rt.reset()
    ctrl = SeikoController(ccfg, robot)
    ctrl.reset(out_prev.q, out_prev.lam, out_prev.enabled)
    filt = InputFilter(InputFilterConfig(), effs)
    filt.reset(out_prev.poses)
    adm = {e: EffectorAdmittance(p) for e, p in (admittance or {}).items()}
    est = {}
    if env is not None:
        for e, c in robot.contacts.items():
            if c.frame in env.force_joints:
                est[e] = JointTorqueForceEstimator(robot.model, c.frame, env.force_joints[c.frame])
    req_en = {e: robot.contacts[e].enabled for e in effs}
    req_push = {e: False for e in effs}
    r = sim.reset()
    T = duration_s if duration_s is not None else scn.duration_s
    n = int(round(T / 0.002))
    log = {k: [] for k in ("t", "q", "gyro", "tau", "tau_limit")}
    wlog = {e: [] for e, c in robot.contacts.items() if c.type == "plane"}
    plog = {e: [] for e in effs}
    fell = False
    for k in range(n):
        t = k * 0.002
        cmd = player.step(t, dt_s=0.002)
        if operator_hook is not None:
            cmd = operator_hook(t, cmd, r)
        for e in effs:
            if out_prev.enabled[e]:
                filt.reset_effector(e, out_prev.poses[e])
        tw = {e: (cmd.velocities.get(e, np.zeros(6)) if not out_prev.enabled[e] else np.zeros(6)) for e in effs}
        for e, a in adm.items():
            R = out_prev.poses[e].rotation
            w = r.wrenches[e] if e in r.wrenches else r.hand_forces.get(e, np.zeros(3))
            w_W = np.concatenate([R @ w[:3], R @ w[3:]]) if len(w) == 6 else np.asarray(w)
            tw[e] = tw[e] + a.step(w_W, out_prev.enabled[e])
        targets = filt.step(tw, out_prev.poses)
        for e in effs:
            if cmd.enable.get(e, req_en[e]) != req_en[e]:
                req_en[e] = cmd.enable[e]
                rt.request_contact(e, req_en[e])
            if cmd.push.get(e, False) != req_push[e]:
                req_push[e] = cmd.push[e]
                rt.request_push(e, req_push[e])
        out = rt.step({e: targets[e] for e in effs if not out_prev.enabled[e]},
                      {e: v for e, v in cmd.force_rates.items() if v})
        lam_read = {}
        for e, c in robot.contacts.items():
            if c.type == "plane":
                lam_read[e] = r.wrenches[e]
            else:
                f = r.hand_forces.get(e, est[e].estimate(r.q, r.tau) if e in est else np.zeros(3))
                lam_read[e] = ctrl.R_c[e].T @ f
        co = ctrl.step(q_d=out_prev.q, v_d=out_prev.v, lam_d=out_prev.lam, lam_d_dot=out_prev.lam_dot,
                       enabled=out_prev.enabled, lam_read=lam_read, tau_read=r.tau, theta_ahead=out_prev.theta_ahead,
                       integrating=controller_on)
        theta = co.theta_cmd if controller_on else out_prev.theta_ahead
        out_prev = out
        if disturb is not None:
            disturb(sim, t)
        r = sim.step(theta)
        log["t"].append(r.t)
        log["q"].append(r.q)
        log["gyro"].append(r.imu_gyro)
        log["tau"].append(r.tau)
        log["tau_limit"].append(co.tau_limit)
        for e in wlog:
            wlog[e].append(r.wrenches[e])
        for e in plog:
            plog[e].append(out_prev.poses[e].translation.copy())
        if sim.fell():
            fell = True
            break
    return LoopLog(**{k: np.array(v) for k, v in log.items()}, fell=fell,
                   wrench={e: np.array(v) for e, v in wlog.items()}, pose_d={e: np.array(v) for e, v in plog.items()})
