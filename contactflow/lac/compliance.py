"""Compliance experiment of lac.md §4 on the simulated PD G1: a trapezoid wrench on one link.

``run_wrench_event`` closes the loop ``PDRobotSim`` (G1-23, PD at every physics step, 50 Hz ticks)
<- ``controller.step(sensors, command)`` and applies ``s(t) [F; C]`` to a MuJoCo body
(``xfrc_applied``: world frame, force at the body's centre of mass, constant over one tick), with
the trapezoid ``s(t)`` (ramp, hold, ramp). It measures the steady displacement of the loaded body's
CoM along the force, ``mean(x | last second of the hold) - mean(x | the second before the event)``,
and for a couple the rotation about its axis, ``Log(R_hold R_pre^T) . axis`` (lac.md §4 metrics).
Used by the CI tests and ``benchmarks/bench_lac_expert.py`` (one source for both).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Mapping

import numpy as np
import pinocchio as pin

from contactflow.lac.events import trapezoid
from contactflow.lac.teleop import default_command
from contactflow.sim.mujoco_robot import sensor_values

__all__ = ["WrenchEventResult", "stand_command", "run_wrench_event"]


@dataclasses.dataclass(frozen=True)
class WrenchEventResult:
    """Outcome of :func:`run_wrench_event`.

    Attributes:
        fell: the base went below the fall height (the run stopped there).
        displacement_m: steady CoM displacement of the loaded body along the force [m] (NaN: no force).
        rotation_rad: steady rotation of the body about the couple's axis [rad] (NaN: no couple).
        drift_m: horizontal base displacement from 1 s after the start to the end [m].
        base_height_min_m: lowest base height [m].
        not_ok_ticks: ticks whose command had ``ok = 0``.
        step_times_s: (ticks,) controller step wall times [s].
        sim_time_s: simulated duration [s].
    """

    fell: bool
    displacement_m: float
    rotation_rad: float
    drift_m: float
    base_height_min_m: float
    not_ok_ticks: int
    step_times_s: np.ndarray
    sim_time_s: float


def stand_command(robot, stiffness, base_height_m: float | None = None) -> dict:
    """A standing ``teleop_command``: the teleop's default command
    (:func:`contactflow.lac.teleop.default_command`: zero base velocity, the robot's default
    posture, the base height of ``robots/<robot>/teleop.yaml``) with the given stiffness.

    Args:
        robot: the robot (``teleop.arm_joints`` names the arm references).
        stiffness: (5,) RAW LAC stiffness. base_height_m: pelvis height [m]; ``None`` = the
            teleop's default (G1: 0.74 m, LAC's teleop value, lac.md §1.1).
    """
    cmd = default_command(robot)
    cmd["stiffness"] = np.asarray(stiffness, float)
    if base_height_m is not None:
        cmd["base_height"] = np.array([float(base_height_m)])
    return cmd


def run_wrench_event(
    sim,
    controller,
    command: Mapping,
    body: str | None,
    wrench_W,
    *,
    t0_s: float = 2.0,
    ramp_s: float = 0.5,
    hold_s: float = 3.0,
    after_s: float = 0.0,
    duration_s: float | None = None,
    on_tick: Callable | None = None,
) -> WrenchEventResult:
    """Run one trapezoid wrench event in closed loop (module docstring).

    Args:
        sim: a :class:`contactflow.sim.pd_robot.PDRobotSim` (reset here).
        controller: object with ``reset(sensors)`` and ``step(sensors, command) -> Output`` whose
            ``command`` holds ``q_target``, ``kp``, ``kd``, ``tau_ff``, ``ok``.
        command: the teleop_command held during the run.
        body: loaded MuJoCo body (None: no wrench, a standing run).
        wrench_W: (6,) peak [F; C] in world axes [N, N m].
        t0_s, ramp_s, hold_s: event start, ramp and hold durations [s].
        after_s: simulated time after the ramp down [s].
        duration_s: total duration (overrides the event-derived one) [s].
        on_tick: optional ``f(k, sensors, output)`` called every tick.

    Returns:
        WrenchEventResult.
    """
    w = np.asarray(wrench_W, float)
    T = duration_s if duration_s is not None else t0_s + 2 * ramp_s + hold_s + after_s
    dt = sim.control_dt_s
    r = sim.reset()
    s = sensor_values(r)
    controller.reset(s)
    bid = sim.model.body(body).id if body is not None else None
    pre_x, hold_x, pre_R, hold_R, times = [], [], [], [], []
    h_min, not_ok, fell, p_start = np.inf, 0, False, None
    for k in range(int(round(T / dt))):
        t = r.t
        t_s = time.perf_counter()
        out = controller.step(s, command)
        times.append(time.perf_counter() - t_s)
        if on_tick is not None:
            on_tick(k, s, out)
        c = out.command
        not_ok += int(c["ok"][0] < 0.5)
        if bid is not None:
            x = sim.data.xipos[bid].copy()
            R = sim.data.ximat[bid].reshape(3, 3).copy()
            if t0_s - 1.0 <= t < t0_s:
                pre_x.append(x)
                pre_R.append(R)
            if t0_s + ramp_s + hold_s - 1.0 <= t < t0_s + ramp_s + hold_s:
                hold_x.append(x)
                hold_R.append(R)
            sim.set_external_wrench(body, float(trapezoid(t + 0.5 * dt, t0_s, ramp_s, hold_s, ramp_s)) * w)
        r = sim.step(c["q_target"], c["kp"], c["kd"], c["tau_ff"])
        s = sensor_values(r)
        h_min = min(h_min, r.base_height)
        if p_start is None and r.t >= 1.0:
            p_start = r.q[0:2].copy()
        if sim.fell():
            fell = True
            break
    disp = rot = float("nan")
    if not fell and pre_x and hold_x:
        dx = np.mean(hold_x, axis=0) - np.mean(pre_x, axis=0)
        if np.linalg.norm(w[:3]) > 0:
            disp = float(dx @ (w[:3] / np.linalg.norm(w[:3])))
        if np.linalg.norm(w[3:]) > 0:
            rots = [pin.log3(Rh @ pre_R[-1].T) for Rh in hold_R]
            rot = float(np.mean(rots, axis=0) @ (w[3:] / np.linalg.norm(w[3:])))
    drift = float(np.linalg.norm(r.q[0:2] - p_start)) if p_start is not None else float("nan")
    return WrenchEventResult(fell, disp, rot, drift, float(h_min), not_ok, np.array(times), float(r.t))
