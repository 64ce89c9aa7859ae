"""End-of-run summary of a G1 teleop run (LAC pipeline), computed from its recording.

Streams read: the driver's ``sensors`` (``q``, ``v``: in simulation the true state), the teleop's
``command`` (``teleop_command``; optional), the wrench injector's ``wrench`` (``external_wrench``,
ground truth; optional) and the controller's ``joint_command`` (optional, for ``ok``).

Metrics (SI units):

* ``fell``: the base went below the robot file's ``fall_height_m`` (0.35 m if absent), or tilted more
  than :data:`contactflow.safety.FALL_TILT_RAD` from upright, or the state became non-finite (a NaN / inf in
  ``q`` or ``v``, or a zero base quaternion: counted in ``invalid_state_samples``). ``base_height_min_m``:
  lowest base height; ``base_tilt_max_rad``: largest angle between the base's z axis and the vertical.
  On hardware the base height is an estimate that assumes the soles stay put (it cannot see a fall),
  while the orientation comes from the IMU: the tilt is what detects a fall there.
* ``velocity_segments``: one entry per commanded segment (a maximal run of ticks with the same
  non-zero ``lin_vel`` / ``ang_vel``): the command, the measured planar base velocity in the yaw
  (heading) frame and the yaw rate averaged over the segment's last ``window_s`` (4 s, whole gait
  cycles; the whole segment if shorter), and ``error_mps`` = |commanded - mean measured| (planar
  norm), ``yaw_rate_error_radps``. ``base_velocity_tracking_error_mps``: the worst segment's
  ``error_mps`` (``null`` without commanded segments).
* ``standing_segments`` / ``standing_drift_m``: for each zero-command segment, the horizontal base
  displacement from its start (``settle_s`` = 2 s later when it follows a moving segment: the robot
  stops) to its end; the worst one (``null`` without such segments).
* ``wrench_events``: one entry per event found in the injector's ground truth (a maximal run of
  ticks with a non-zero wrench on one link; overlapping events on one link count as one). Its hold
  is where the wrench equals its peak. ``displacement_m``: mean position of the loaded link's CoM
  over the last half of the hold minus its mean over the 1 s before the event, projected on the
  force direction (signed; ``displacement_norm_m`` the full distance); for a couple,
  ``rotation_rad``: the rotation vector ``log(R R_pre^T)`` (world) averaged over the same window,
  projected on the couple axis (``rotation_angle_rad`` its norm). With the teleop stream: the
  commanded stiffness of the link's channel (``lac_links`` group of the robot file: left, right,
  torso) and the ratio of the displacement to the ideal F/K (or tau/K_theta).
  The link CoM is the URDF link's own centre of mass (where the simulator applies the force), placed
  by pinocchio forward kinematics of the recorded ``q``.
* ``ticks``, ``sim_time_s``, ``wall_time_s`` (first to last sensor message), ``realtime_factor``;
  ``controller_degraded_ticks``: joint commands with ``ok = 0``.
"""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin

from contactflow.errors import ModelError
from contactflow.lac.config import GROUP_CHANNELS
from contactflow.lac.model import link_com_local as _link_com_local
from contactflow.recording.store import Recording, RecordingError
from contactflow.safety import FALL_TILT_RAD, base_tilt_rad
from contactflow.sim.state import base_rotation, yaw

__all__ = ["g1_summary", "format_g1_summary", "link_com_local", "STIFFNESS_CHANNEL"]

#: lac_links group -> index of its linear / angular stiffness channel in the 5-D command (LAC layout).
STIFFNESS_CHANNEL = GROUP_CHANNELS


def _yaw_frame_velocity(q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(N, 2) planar base velocity in the yaw frame [m/s] and (N,) world yaw rate [rad/s]."""
    out = np.empty((len(q), 2))
    yaw_rate = np.empty(len(q))
    for i in range(len(q)):
        R = base_rotation(q[i])
        vw = R @ v[i, :3]
        psi = yaw(R)
        c, s = math.cos(psi), math.sin(psi)
        out[i] = (c * vw[0] + s * vw[1], -s * vw[0] + c * vw[1])
        yaw_rate[i] = (R @ v[i, 3:6])[2]
    return out, yaw_rate


def _runs(keys: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) index ranges of maximal runs of equal rows."""
    if len(keys) == 0:
        return []
    change = np.flatnonzero(np.any(keys[1:] != keys[:-1], axis=1)) + 1
    bounds = np.concatenate([[0], change, [len(keys)]])
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


def link_com_local(robot, link: str) -> np.ndarray:
    """(3,) centre of mass of URDF link ``link`` in the link frame [m] (where MuJoCo's
    ``xfrc_applied`` acts): :func:`contactflow.lac.model.link_com_local`.

    Raises:
        RecordingError: no such link in the robot's URDF or in its pinocchio model.
    """
    try:
        return _link_com_local(robot, link)
    except ModelError as exc:
        raise RecordingError(f"{exc} (wrench link of the recording)") from None


def _link_poses(robot, link: str, qs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(N, 3) CoM positions (world) [m] and (N, 3, 3) orientations of link ``link`` at configurations ``qs``."""
    model, data = robot.model, robot.model.createData()
    c = link_com_local(robot, link)
    fid = model.getFrameId(link)
    p = np.empty((len(qs), 3))
    R = np.empty((len(qs), 3, 3))
    for i, q in enumerate(qs):
        pin.forwardKinematics(model, data, q)
        M = pin.updateFramePlacement(model, data, fid)
        p[i] = M.act(c)
        R[i] = M.rotation
    return p, R


def _mean_rotation(R: np.ndarray) -> np.ndarray:
    U, _, Vt = np.linalg.svd(R.mean(axis=0))
    M = U @ Vt
    if np.linalg.det(M) < 0:
        U[:, -1] *= -1
        M = U @ Vt
    return M


def _optional(rec: Recording, name: str):
    try:
        return rec.stream(name)
    except RecordingError:
        return None


def _controller_stream(rec: Recording, driver: str):
    for name in rec.stream_names:
        entry = rec.manifest["streams"][name]
        if entry.get("contract") == "joint_command" and not name.startswith(f"{driver}."):
            return rec.stream(name)
    return None


DRIVERS = ("mujoco_driver", "unitree_driver")
"""Node ids of the G1 drivers (simulation, hardware), looked up in this order when ``driver`` is None."""


def g1_summary(rec: Recording, robot, *, driver: str | None = None, teleop: str = "teleop",
               injector: str = "wrench_injector", window_s: float = 4.0, settle_s: float = 2.0,
               pre_s: float = 1.0, fall_height_m: float | None = None) -> dict:
    """Summary of a G1 teleop run (see the module docstring).

    Args:
        rec: the recording. robot: the recorded :class:`contactflow.robot.Robot`.
        driver, teleop, injector: node ids of the streams ``<node>.sensors|command|wrench``
            (``driver`` None: the first of :data:`DRIVERS` that the recording has).
        window_s: averaging window at the end of a velocity segment [s].
        settle_s: time left out at the start of a standing segment that follows a moving one [s].
        pre_s: reference window before a wrench event [s].
        fall_height_m: fall threshold [m] (default: the robot file's ``fall_height_m``, else 0.35).

    Returns:
        dict (NaN where undefined; :func:`json_safe` turns them into ``None``).

    Raises:
        RecordingError: no sensors stream, or a wrench link unknown to the robot model.
    """
    if fall_height_m is None:
        fall_height_m = float((robot.raw or {}).get("fall_height_m", 0.35))
    if driver is None:
        names = set(rec.stream_names)
        driver = next((d for d in DRIVERS if f"{d}.sensors" in names), DRIVERS[0])
    sensors = rec.stream(f"{driver}.sensors")
    q_all, v_all = sensors.field("q"), sensors.field("v")
    finite = np.all(np.isfinite(q_all), axis=1) & np.all(np.isfinite(v_all), axis=1)
    finite &= np.sum(np.where(finite[:, None], q_all[:, 3:7], 0.0) ** 2, axis=1) > 0.0  # a zero quaternion is no orientation
    heights = q_all[finite, 2]
    h_min = float(np.min(heights)) if len(heights) else float("nan")
    tilt = base_tilt_rad(q_all[finite, 3:7])  # the base quaternion (x, y, z, w)
    tilt_max = float(tilt.max()) if tilt.size else float("nan")
    fell = bool((not finite.all()) or h_min < fall_height_m or tilt_max > FALL_TILT_RAD)
    dt = float(np.median(np.diff(sensors.t))) if len(sensors) > 1 else float("nan")

    out: dict = {"fell": fell, "base_height_min_m": h_min, "base_tilt_max_rad": tilt_max,
                 "invalid_state_samples": int(np.count_nonzero(~finite))}
    cmd = _optional(rec, f"{teleop}.command")
    vel_segments, stand_segments = [], []
    if cmd is not None:
        common, i_s, i_c = np.intersect1d(sensors.seq, cmd.seq, return_indices=True)
        ok = finite[i_s]
        i_s, i_c = i_s[ok], i_c[ok]
        t = sensors.t[i_s]
        key = np.hstack([cmd.field("lin_vel")[i_c], cmd.field("ang_vel")[i_c]])
        v_yaw, yaw_rate = _yaw_frame_velocity(q_all[i_s], v_all[i_s])
        prev_moving = False
        for a, b in _runs(key):
            moving = bool(np.any(key[a] != 0.0))
            t0, t1 = float(t[a]), float(t[b - 1] + (dt if math.isfinite(dt) else 0.0))
            if moving:
                sel = np.arange(a, b)
                sel = sel[t[sel] >= t1 - window_s - 1e-9]
                mean_v = v_yaw[sel].mean(axis=0)
                vel_segments.append({
                    "start_s": t0, "end_s": t1,
                    "lin_vel_cmd_mps": key[a, :2].tolist(), "ang_vel_cmd_radps": float(key[a, 2]),
                    "window_s": float(min(window_s, t1 - t0)),
                    "lin_vel_mean_mps": mean_v.tolist(), "ang_vel_mean_radps": float(yaw_rate[sel].mean()),
                    "error_mps": float(np.linalg.norm(key[a, :2] - mean_v)),
                    "yaw_rate_error_radps": float(abs(key[a, 2] - yaw_rate[sel].mean())),
                })
            else:
                start = t0 + (settle_s if prev_moving else 0.0)
                sel = np.arange(a, b)
                sel = sel[t[sel] >= start - 1e-9]
                if len(sel) >= 2:
                    p = q_all[i_s[sel], :2]
                    stand_segments.append({"start_s": float(t[sel[0]]), "end_s": float(t[sel[-1]]),
                                           "drift_m": float(np.linalg.norm(p[-1] - p[0]))})
            prev_moving = moving
    out["base_velocity_tracking_error_mps"] = max((s["error_mps"] for s in vel_segments), default=float("nan"))
    out["standing_drift_m"] = max((s["drift_m"] for s in stand_segments), default=float("nan"))
    out["velocity_segments"] = vel_segments
    out["standing_segments"] = stand_segments
    out["wrench_events"] = _wrench_events(rec, robot, sensors, q_all, finite, cmd, injector, pre_s)

    ctrl = _controller_stream(rec, driver)
    wall = float((sensors.t_wall_ns[-1] - sensors.t_wall_ns[0]) * 1e-9) if len(sensors) > 1 else 0.0
    sim = float(sensors.t[-1] - sensors.t[0]) if len(sensors) > 1 else 0.0
    out.update({
        "ticks": int(len(sensors)),
        "sim_time_s": sim,
        "wall_time_s": wall,
        "realtime_factor": sim / wall if wall > 0 else float("nan"),
        "controller_degraded_ticks": int(np.sum(ctrl.field("ok")[:, 0] < 0.5)) if ctrl is not None else 0,
    })
    return out


def _wrench_events(rec, robot, sensors, q_all, finite, cmd, injector, pre_s) -> list[dict]:
    wr = _optional(rec, f"{injector}.wrench")
    if wr is None or len(wr) == 0:
        return []
    groups = {name: spec.get("group") for name, spec in ((robot.raw or {}).get("lac_links") or {}).items()}
    s_index = {int(k): i for i, k in enumerate(sensors.seq)}
    c_index = {int(k): i for i, k in enumerate(cmd.seq)} if cmd is not None else {}
    events = []
    for fname, size in wr.layout:
        if not fname.startswith("wrench.") or size != 6:
            continue
        link = fname[len("wrench."):]
        w = wr.field(fname)
        active = np.any(w != 0.0, axis=1).astype(float)[:, None]
        for a, b in _runs(active):
            if active[a, 0] == 0.0:
                continue
            mag = np.linalg.norm(w[a:b], axis=1)
            peak = float(mag.max())
            hold = np.arange(a, b)[mag >= peak * (1.0 - 1e-9)]
            h0, h1 = int(hold[0]), int(hold[-1])
            t_start, t_h0, t_h1 = float(wr.t[a]), float(wr.t[h0]), float(wr.t[h1])
            w_peak = w[h0]
            is_force = bool(np.any(w_peak[:3] != 0.0))
            idx = np.arange(h0, h1 + 1)
            idx = idx[wr.t[idx] >= 0.5 * (t_h0 + t_h1) - 1e-9]
            steady = [s_index[int(wr.seq[i])] for i in idx if int(wr.seq[i]) in s_index]
            pre = np.flatnonzero((sensors.t >= t_start - pre_s - 1e-9) & (sensors.t < t_start - 1e-9)).tolist()
            ev = {"link": link, "kind": "force" if is_force else "couple", "start_s": t_start,
                  "hold_s": [t_h0, t_h1]}
            steady = [i for i in steady if finite[i]]
            pre = [i for i in pre if finite[i]]
            k_lin = k_ang = float("nan")
            group = groups.get(link)
            if group in STIFFNESS_CHANNEL and cmd is not None and int(wr.seq[h1]) in c_index:
                k = cmd.field("stiffness")[c_index[int(wr.seq[h1])]]
                il, ia = STIFFNESS_CHANNEL[group]
                k_lin = float(k[il])
                k_ang = float(k[ia]) if ia is not None else float("nan")
            if not steady or not pre:
                ev["note"] = "no steady or pre-event window in the recording (event too early or too short)"
                events.append(ev)
                continue
            p_pre, R_pre = _link_poses(robot, link, q_all[pre])
            p_st, R_st = _link_poses(robot, link, q_all[steady])
            if is_force:
                f = w_peak[:3]
                u = f / np.linalg.norm(f)
                d = p_st.mean(axis=0) - p_pre.mean(axis=0)
                ideal = np.linalg.norm(f) / k_lin if math.isfinite(k_lin) else float("nan")
                ev.update({"force_n": f.tolist(), "displacement_m": float(d @ u),
                           "displacement_norm_m": float(np.linalg.norm(d)), "commanded_k_n_per_m": k_lin,
                           "f_over_k_m": ideal, "ratio_to_f_over_k": float(d @ u) / ideal if ideal > 0 else float("nan")})
            else:
                tau = w_peak[3:]
                u = tau / np.linalg.norm(tau)
                R0 = _mean_rotation(R_pre)
                rv = np.array([pin.log3(R @ R0.T) for R in R_st]).mean(axis=0)
                ideal = np.linalg.norm(tau) / k_ang if math.isfinite(k_ang) else float("nan")
                ev.update({"couple_nm": tau.tolist(), "rotation_rad": float(rv @ u),
                           "rotation_angle_rad": float(np.linalg.norm(rv)), "commanded_k_theta_nm_per_rad": k_ang,
                           "tau_over_k_rad": ideal,
                           "ratio_to_tau_over_k": float(rv @ u) / ideal if ideal > 0 else float("nan")})
            events.append(ev)
    events.sort(key=lambda e: e["start_s"])
    return events


def _fmt(v) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "n/a"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    return str(v)


def format_g1_summary(s: dict, title: str = "G1 teleop run summary") -> str:
    """A one-screen text table of :func:`g1_summary`'s dict."""
    lines = [title, "-" * len(title)]
    for k, v in s.items():
        if k in ("velocity_segments", "standing_segments", "wrench_events"):
            continue
        lines.append(f"{k:40s} {_fmt(v)}")
    for seg in s.get("velocity_segments", []):
        lines.append(f"  velocity {seg['start_s']:.2f}-{seg['end_s']:.2f} s: cmd {_fmt(seg['lin_vel_cmd_mps'])} m/s "
                     f"{_fmt(seg['ang_vel_cmd_radps'])} rad/s, mean {_fmt(seg['lin_vel_mean_mps'])} m/s "
                     f"{_fmt(seg['ang_vel_mean_radps'])} rad/s, error {_fmt(seg['error_mps'])} m/s")
    for seg in s.get("standing_segments", []):
        lines.append(f"  standing {seg['start_s']:.2f}-{seg['end_s']:.2f} s: drift {_fmt(seg['drift_m'])} m")
    for ev in s.get("wrench_events", []):
        if ev.get("kind") == "force" and "displacement_m" in ev:
            lines.append(f"  {ev['link']} force {_fmt(ev['force_n'])} N at {ev['start_s']:.2f} s: displacement "
                         f"{_fmt(ev['displacement_m'])} m along the force "
                         f"({_fmt(ev.get('displacement_norm_m'))} m in all), K {_fmt(ev['commanded_k_n_per_m'])} N/m, "
                         f"ratio to F/K {_fmt(ev['ratio_to_f_over_k'])}")
        elif "rotation_rad" in ev:
            lines.append(f"  {ev['link']} couple {_fmt(ev['couple_nm'])} N m at {ev['start_s']:.2f} s: rotation "
                         f"{_fmt(ev['rotation_rad'])} rad, K_theta {_fmt(ev['commanded_k_theta_nm_per_rad'])} N m/rad, "
                         f"ratio to tau/K {_fmt(ev['ratio_to_tau_over_k'])}")
        else:
            lines.append(f"  {ev['link']} {ev['kind']} at {ev['start_s']:.2f} s: {ev.get('note', '')}")
    return "\n".join(lines)
