"""In-process closed loop: a policy spec + the G1 PD simulator, no dora.

:func:`run_policy_loop` is the baseline the dora graphs are compared against (same policy, same
model, same simulator, one process): per control tick it reads the simulator, steps the
:class:`PolicyRunner` and applies the joint command (PD at every physics step). It also gives the
locomotion metrics of the LAC teleop issue on the run:

* ``standing_drift_m``: largest planar base displacement over a zero-velocity-command segment
  (start to end of the segment);
* ``base_velocity_tracking_error_mps``: per commanded segment, ``|v_cmd - mean v|`` of the planar
  base velocity in the yaw (heading) frame, the mean taken over the segment's last 4 s (whole gait
  cycles: the sway alone is ~0.2 m/s per sample, g1_policies.md); the worst segment.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from contactflow.errors import ConfigError
from contactflow.policy.runner import PolicyRunner
from contactflow.policy.spec import PolicySpec

__all__ = ["run_policy_loop", "planar_velocity_yaw_frame", "segment_metrics"]


def planar_velocity_yaw_frame(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Planar base velocity in the yaw (heading) frame.

    Args:
        q: (7 + n,) or (T, 7 + n) pinocchio configuration(s) (quaternion xyzw).
        v: (6 + n,) or (T, 6 + n) pinocchio velocity(ies) (base linear velocity in the BASE frame).

    Returns:
        (2,) or (T, 2) [vx, vy] [m/s]: the world-frame base velocity rotated by -yaw.
    """
    q2, v2 = np.atleast_2d(q), np.atleast_2d(v)
    x, y, z, w = q2[:, 3], q2[:, 4], q2[:, 5], q2[:, 6]
    R = np.empty((len(q2), 3, 3))
    R[:, 0] = np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], axis=1)
    R[:, 1] = np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], axis=1)
    R[:, 2] = np.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], axis=1)
    v_w = np.einsum("tij,tj->ti", R, v2[:, :3])
    yaw = np.arctan2(R[:, 1, 0], R[:, 0, 0])
    c, s = np.cos(yaw), np.sin(yaw)
    out = np.stack([c * v_w[:, 0] + s * v_w[:, 1], -s * v_w[:, 0] + c * v_w[:, 1]], axis=1)
    return out[0] if np.ndim(q) == 1 else out


def segment_metrics(t: np.ndarray, q: np.ndarray, v: np.ndarray, cmd: np.ndarray, *, window_s: float = 4.0) -> dict:
    """Standing drift and velocity tracking per constant-command segment.

    Args:
        t: (T,) times [s]. q: (T, 7 + n). v: (T, 6 + n) (pinocchio conventions).
        cmd: (T, 3) commanded [vx, vy, yaw rate] at each sample [m/s, rad/s].
        window_s: averaging window at the end of each commanded segment [s].

    Returns:
        ``standing_drift_m`` (max over zero-command segments, ``None`` if none),
        ``base_velocity_tracking_error_mps`` (max over commanded segments, ``None`` if none) and
        ``segments``: per segment ``start_s``, ``end_s``, ``command`` and ``drift_m`` or
        ``mean_velocity_mps`` / ``error_mps``.
    """
    t, q, v, cmd = map(np.asarray, (t, q, v, cmd))
    edges = [0] + [i for i in range(1, len(t)) if not np.array_equal(cmd[i], cmd[i - 1])] + [len(t)]
    segs, drifts, errors = [], [], []
    vy = planar_velocity_yaw_frame(q, v)
    for a, b in zip(edges[:-1], edges[1:]):
        if b - a < 2:
            continue
        c = cmd[a]
        row = {"start_s": float(t[a]), "end_s": float(t[b - 1]), "command": c.tolist()}
        if not np.any(c):
            row["drift_m"] = float(np.linalg.norm(q[b - 1, :2] - q[a, :2]))
            drifts.append(row["drift_m"])
        else:
            w = (t[a:b] >= t[b - 1] - window_s)
            mean = vy[a:b][w].mean(axis=0)
            row["mean_velocity_mps"] = mean.tolist()
            row["error_mps"] = float(np.linalg.norm(c[:2] - mean))
            errors.append(row["error_mps"])
        segs.append(row)
    return {
        "standing_drift_m": max(drifts) if drifts else None,
        "base_velocity_tracking_error_mps": max(errors) if errors else None,
        "segments": segs,
    }


def _command_source(commands, robot) -> Callable[[float], dict]:
    if isinstance(commands, (str, Path)):
        from contactflow.lac.teleop import TeleopPlayer, load_teleop_scenario

        player = TeleopPlayer(load_teleop_scenario(commands, robot))
        return lambda t: player.step(t).values()
    if hasattr(commands, "step"):
        return lambda t: commands.step(t).values()
    if callable(commands):
        return commands
    from contactflow.lac.teleop import LiveTeleop

    base = LiveTeleop(robot).command(0.0).values()
    points = sorted(((float(t0), dict(c)) for t0, c in commands), key=lambda p: p[0])
    if not points:
        raise ConfigError("run_policy_loop: commands: expected at least one (t_start_s, fields) entry")
    resolved = []
    cur = dict(base)
    for t0, c in points:
        unknown = set(c) - set(base)
        if unknown:
            raise ConfigError(f"run_policy_loop: commands at t = {t0:g} s: unknown field(s) {sorted(unknown)}; "
                              f"expected some of {sorted(base)}")
        cur = {**cur, **{k: np.atleast_1d(np.asarray(val, dtype=float)) for k, val in c.items()}}
        resolved.append((t0, cur))

    def at(t: float) -> dict:
        out = base
        for t0, c in resolved:
            if t + 1e-9 >= t0:
                out = c
        return out

    return at


def run_policy_loop(spec: PolicySpec, robot, commands: Sequence[tuple[float, Mapping]] | str | Path | Any,
                    duration_s: float, *, physics_dt_s: float | None = None, record: bool = True) -> dict:
    """Run a policy on the simulated PD robot in one process (no dora).

    Args:
        spec: the loaded policy spec (its robot must be ``robot``).
        robot: a PD robot (``load_robot("g1_29dof")``...).
        commands: the teleop command over time: a list of ``(t_start_s, {field: value})`` set-points
            (fields of ``teleop_command``, unspecified ones at the teleop defaults), a teleop
            scenario file, a :class:`contactflow.lac.teleop.TeleopPlayer`, or ``f(t) -> fields``.
        duration_s: simulated time [s].
        physics_dt_s: physics step [s] (default: the robot file's).
        record: keep the per-tick base trajectory and compute the segment metrics.

    Returns:
        ``sim_time_s``, ``wall_time_s``, ``sim_s_per_wall_s`` (simulated seconds per wall second),
        ``ticks``, ``fell``, ``base_height_min_m``, ``n_rejected``, ``policy_step_ms_mean`` /
        ``policy_step_ms_p95`` (observation + inference, acted ticks), ``sim_step_ms_mean``;
        with ``record``: ``standing_drift_m``, ``base_velocity_tracking_error_mps``, ``segments``
        (see :func:`segment_metrics`) and ``trajectory`` (``t``, ``q``, ``v``, ``cmd`` arrays).
    """
    from contactflow.sim.pd_robot import PDRobotSim, PDSimConfig

    sim = PDRobotSim(PDSimConfig(physics_dt_s=physics_dt_s, control_dt_s=spec.period_s), robot)
    runner = PolicyRunner(spec)
    source = _command_source(commands, robot)
    n_ticks = int(round(duration_s / spec.period_s))
    r = sim.reset()
    T, Q, V, C = [], [], [], []
    pol, phys = [], []
    zmin, fell = float(r.q[2]), False
    t_start = time.perf_counter()
    for _ in range(n_ticks):
        sensors = {"t": np.array([r.t]), "q": r.q, "v": r.v, "tau": r.tau, "imu_quat": r.imu_quat,
                   "imu_gyro": r.imu_gyro, "imu_acc": r.imu_acc}
        cmd = source(r.t)
        t0 = time.perf_counter()
        out = runner.step(sensors, cmd)
        t1 = time.perf_counter()
        c = out.command
        r = sim.step(c["q_target"], c["kp"], c["kd"], c["tau_ff"])
        t2 = time.perf_counter()
        pol.append(t1 - t0)
        phys.append(t2 - t1)
        zmin = min(zmin, float(r.q[2]))
        if record:
            T.append(r.t)
            Q.append(r.q.copy())
            V.append(r.v.copy())
            C.append(np.concatenate([np.asarray(cmd["lin_vel"], float), np.asarray(cmd["ang_vel"], float).reshape(1)]))
        if sim.fell() or not np.isfinite(r.q).all():
            fell = True
            break
    wall = time.perf_counter() - t_start
    res = {
        "sim_time_s": float(r.t), "wall_time_s": wall, "sim_s_per_wall_s": float(r.t) / wall if wall > 0 else None,
        "ticks": len(pol), "fell": fell, "base_height_min_m": zmin, "n_rejected": runner.n_rejected,
        "policy_step_ms_mean": 1e3 * float(np.mean(pol)), "policy_step_ms_p95": 1e3 * float(np.percentile(pol, 95)),
        "sim_step_ms_mean": 1e3 * float(np.mean(phys)),
    }
    if record and T:
        T, Q, V, C = map(np.asarray, (T, Q, V, C))
        res.update(segment_metrics(T, Q, V, C))
        res["trajectory"] = {"t": T, "q": Q, "v": V, "cmd": C}
    return res
