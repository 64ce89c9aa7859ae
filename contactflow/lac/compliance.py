"""Compliance experiment of lac.md §4 on the simulated PD G1: a trapezoid wrench on one link.

``run_wrench_event`` closes the loop ``PDRobotSim`` (G1-23, PD at every physics step, 50 Hz ticks)
<- ``controller.step(sensors, command)`` and applies ``s(t) [F; C]`` to a MuJoCo body
(``xfrc_applied``: world frame, force at the body's centre of mass, constant over one tick), with
the trapezoid ``s(t)`` (ramp, hold, ramp). It measures the steady displacement of the loaded body's
CoM along the force, ``mean(x | last second of the hold) - mean(x | the second before the event)``,
and for a couple the rotation about its axis, ``Log(R_hold R_pre^T) . axis`` (lac.md §4 metrics).
It also gives the full CoM displacement and the attitude change ``|Log(R_hold R_pre^T)|`` (the
metrics of LAC Figs. 3, 4, 6: "at the force peak", with a measuring window at the end of the hold,
``measure_window_s``), and can take the wrench in the base or the loaded body's frame, rotated to
world once at the event start ("the direction fixed at the start of the event", LAC §IV-B).
Used by the CI tests, ``benchmarks/bench_lac_expert.py`` and ``contactflow lac eval``
(:mod:`contactflow.lac.evaluate`), one source for all.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Mapping

import numpy as np
import pinocchio as pin

from contactflow.lac.events import trapezoid
from contactflow.lac.teleop import default_command
from contactflow.safety import base_tilt_rad
from contactflow.sim.mujoco_robot import sensor_values
from contactflow.sim.state import base_rotation

__all__ = ["WrenchEventResult", "stand_command", "run_wrench_event", "rotate_wrench"]


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
        displacement_norm_m: norm of the steady CoM displacement of the loaded body [m] (NaN: fell).
        attitude_rad: attitude change of the loaded body, ``|mean Log(R_hold R_pre^T)|`` [rad]
            (NaN: fell).
        wrench_applied_W: (6,) the peak wrench applied, in world axes [N, N m] (after the frame
            rotation at the event start; the given one if the event never started).
        fell_time_s: simulated time of the fall [s] (NaN: no fall).
    """

    fell: bool
    displacement_m: float
    rotation_rad: float
    drift_m: float
    base_height_min_m: float
    not_ok_ticks: int
    step_times_s: np.ndarray
    sim_time_s: float
    displacement_norm_m: float = float("nan")
    attitude_rad: float = float("nan")
    wrench_applied_W: np.ndarray | None = None
    fell_time_s: float = float("nan")


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


def rotate_wrench(R: np.ndarray, w) -> np.ndarray:
    """(6,) [F; C] in the axes of a frame with world orientation ``R`` (3, 3) -> world axes."""
    w = np.asarray(w, float)
    return np.concatenate([R @ w[:3], R @ w[3:]])


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
    release_s: float | None = None,
    measure_window_s: float = 1.0,
    wrench_frame: str = "world",
    q0: np.ndarray | None = None,
    max_tilt_rad: float | None = None,
) -> WrenchEventResult:
    """Run one trapezoid wrench event in closed loop (module docstring).

    Args:
        sim: a :class:`contactflow.sim.pd_robot.PDRobotSim` (reset here).
        controller: object with ``reset(sensors)`` and ``step(sensors, command) -> Output`` whose
            ``command`` holds ``q_target``, ``kp``, ``kd``, ``tau_ff``, ``ok``.
        command: the teleop_command held during the run.
        body: loaded MuJoCo body (None: no wrench, a standing run).
        wrench_W: (6,) peak [F; C] in the axes of ``wrench_frame`` [N, N m].
        t0_s, ramp_s, hold_s: event start, ramp and hold durations [s].
        after_s: simulated time after the ramp down [s].
        duration_s: total duration (overrides the event-derived one) [s].
        on_tick: optional ``f(k, sensors, output)`` called every tick.
        release_s: ramp-down duration [s]; ``None`` = ``ramp_s``.
        measure_window_s: the steady values average the last ``measure_window_s`` of the hold [s]
            (and the pre-event pose the second before the event).
        wrench_frame: ``"world"``, ``"base"`` (the pelvis frame) or ``"body"`` (the loaded body's
            link frame, MuJoCo ``xmat``, in which its joint axis is given): ``wrench_W`` is rotated
            to world with that frame's orientation at the first tick at or after ``t0_s`` and held
            fixed.
        q0: initial posture for ``sim.reset`` (``None``: the default posture).
        max_tilt_rad: also count a base z axis tilted more than this from the vertical as a fall
            (``None``: the base height only, ``sim.fell()``).

    Returns:
        WrenchEventResult.

    Raises:
        ValueError: unknown ``wrench_frame``.
    """
    if wrench_frame not in ("world", "base", "body"):
        raise ValueError(f"wrench_frame: expected 'world', 'base' or 'body', got {wrench_frame!r}")
    w = np.asarray(wrench_W, float)
    rel = ramp_s if release_s is None else release_s
    T = duration_s if duration_s is not None else t0_s + ramp_s + hold_s + rel + after_s
    w_rotated = wrench_frame == "world"
    dt = sim.control_dt_s
    r = sim.reset(q0)
    s = sensor_values(r)
    controller.reset(s)
    bid = sim.model.body(body).id if body is not None else None
    pre_x, hold_x, pre_R, hold_R, times = [], [], [], [], []
    h_min, not_ok, fell, p_start, t_fell = np.inf, 0, False, None, float("nan")
    t_meas = t0_s + ramp_s + hold_s
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
            if t_meas - measure_window_s <= t < t_meas:
                hold_x.append(x)
                hold_R.append(R)
            if not w_rotated and t >= t0_s - 1e-9:
                w = rotate_wrench(sim.data.xmat[bid].reshape(3, 3) if wrench_frame == "body" else base_rotation(r.q), w)
                w_rotated = True
            sim.set_external_wrench(body, float(trapezoid(t + 0.5 * dt, t0_s, ramp_s, hold_s, rel)) * w)
        r = sim.step(c["q_target"], c["kp"], c["kd"], c["tau_ff"])
        s = sensor_values(r)
        h_min = min(h_min, r.base_height)
        if p_start is None and r.t >= 1.0:
            p_start = r.q[0:2].copy()
        tilted = False
        if max_tilt_rad is not None:
            tilted = base_tilt_rad(r.q[3:7]) > max_tilt_rad  # the base quaternion (x, y, z, w)
        if sim.fell() or tilted:
            fell, t_fell = True, float(r.t)
            break
    disp = rot = disp_n = att = float("nan")
    if not fell and pre_x and hold_x:
        dx = np.mean(hold_x, axis=0) - np.mean(pre_x, axis=0)
        disp_n = float(np.linalg.norm(dx))
        rots = [pin.log3(Rh @ pre_R[-1].T) for Rh in hold_R]
        att = float(np.linalg.norm(np.mean(rots, axis=0)))
        if np.linalg.norm(w[:3]) > 0:
            disp = float(dx @ (w[:3] / np.linalg.norm(w[:3])))
        if np.linalg.norm(w[3:]) > 0:
            rot = float(np.mean(rots, axis=0) @ (w[3:] / np.linalg.norm(w[3:])))
    drift = float(np.linalg.norm(r.q[0:2] - p_start)) if p_start is not None else float("nan")
    return WrenchEventResult(fell, disp, rot, drift, float(h_min), not_ok, np.array(times), float(r.t),
                             disp_n, att, w.copy(), t_fell)
