"""End-of-run summary of a SEIKO run, computed from its recording.

Metrics (all SI):

* ``fell``: the pelvis went below ``fall_height_m`` or the state became non-finite.
* ``pelvis_min_height_m``: minimum base height of the simulated/measured robot.
* ``left_hand_max_error_m``: max distance between the Retargeting's desired left-hand position
  (FK of ``q_d``) and the measured one (FK of the measured ``q``) during the holds. A hold is a
  period where the operator's left-hand command is zero after having been non-zero, starting
  ``hold_settle_s`` after the command stopped (the input filter's low-pass settles) and ending when
  the next command starts or the run ends. Holds shorter than ``min_hold_s`` (0.5 s) in all give
  no error (NaN, ``null`` in JSON): a run that ends right after a motion has no hold to speak of.
* ``left_hand_hold_duration_s``: total duration of those holds [s].
* ``foot_fz_tracking_rmse_n``: RMSE between desired (``lam_d``) and measured vertical sole
  forces, both feet pooled, over the whole run.
* ``ticks``, ``sim_time_s``, ``wall_time_s`` (first to last sensor message, receive times),
  ``realtime_factor`` (simulated seconds per wall second).
* ``requests_refused``: operator requests the Retargeting refused (its ``n_refused``).
* ``contact_switches``: ``"<effector> on|off at <t> s"`` for every change of the Retargeting's
  ``enabled`` flags (a disabled foot is "off" once released, after its unloading). In runs with
  switches, ``foot_fz_tracking_rmse_n`` includes the release and reload transients.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from contactflow.recording import Recording, RecordingError

__all__ = ["seiko_summary", "format_summary"]


def _fk_positions(robot, qs: np.ndarray, frame_id: int) -> np.ndarray:
    data = robot.model.createData()
    out = np.empty((len(qs), 3))
    for i, q in enumerate(qs):
        pin.forwardKinematics(robot.model, data, q)
        out[i] = pin.updateFramePlacement(robot.model, data, frame_id).translation
    return out


def _hold_mask(twist: np.ndarray, t: np.ndarray, settle_s: float) -> np.ndarray:
    moving = np.linalg.norm(twist, axis=1) > 0
    mask = np.zeros(len(t), bool)
    if not moving.any():
        return mask
    idx = np.flatnonzero(moving)
    # transitions moving -> idle
    for i in range(idx[0], len(t) - 1):
        if moving[i] and not moving[i + 1]:
            t_stop = t[i + 1]
            nxt = np.flatnonzero(moving[i + 1 :])
            end = i + 1 + nxt[0] if len(nxt) else len(t)
            sel = np.arange(i + 1, end)
            mask[sel[t[sel] >= t_stop + settle_s]] = True
    return mask


def seiko_summary(rec: Recording, robot, *, driver: str = "mujoco_driver", retargeting: str = "seiko_retargeting",
                  operator: str = "operator", fall_height_m: float = 0.6, hold_settle_s: float = 0.5,
                  hand: str = "left_hand", min_hold_s: float = 0.5) -> dict:
    """Compute the summary of a SEIKO run from its recording (see module docstring).

    Raises:
        RecordingError: a needed stream is missing.
    """
    sensors = rec.stream(f"{driver}.sensors")
    desired = rec.stream(f"{retargeting}.desired")
    q_meas = sensors.field("q")
    finite = np.all(np.isfinite(q_meas), axis=1)
    heights = q_meas[finite, 2]
    pelvis_min = float(np.min(heights)) if len(heights) else float("nan")
    fell = bool((not finite.all()) or pelvis_min < fall_height_m)

    # align by seq
    common, i_s, i_d = np.intersect1d(sensors.seq, desired.seq, return_indices=True)
    fz_err = []
    for foot in [c for c, s in robot.contacts.items() if s.type == "plane"]:
        fz_meas = sensors.field(f"wrench.{foot}")[i_s, 2]
        fz_des = desired.field(f"lam_d.{foot}")[i_d, 2]
        fz_err.append(fz_meas - fz_des)
    fz_err = np.concatenate(fz_err) if fz_err else np.zeros(0)
    rmse = float(np.sqrt(np.mean(fz_err**2))) if len(fz_err) else float("nan")

    hand_err = float("nan")
    hold_s = 0.0
    try:
        op = rec.stream(f"{operator}.command")
    except RecordingError:  # no operator stream (e.g. a replay without operator): metric left NaN
        op = None
    if op is not None:
        common_h, i_o, i_s2 = np.intersect1d(op.seq, sensors.seq, return_indices=True)
        _, i_o2, i_d2 = np.intersect1d(op.seq[i_o], desired.seq, return_indices=True)
        tw = op.field(f"twist.{hand}")[i_o[i_o2]]
        t = sensors.t[i_s2[i_o2]]
        mask = _hold_mask(tw, t, hold_settle_s)
        if mask.any():
            fid = robot.contact(hand).frame_id
            qm = q_meas[i_s2[i_o2]][mask]
            qd = desired.field("q_d")[i_d2][mask]
            e = np.linalg.norm(_fk_positions(robot, qm, fid) - _fk_positions(robot, qd, fid), axis=1)
            hold_s = float(mask.sum() * (np.median(np.diff(t)) if len(t) > 1 else 0.0))
            hand_err = float(np.max(e)) if hold_s >= min_hold_s else float("nan")

    en = desired.field("enabled")
    switches = []
    names = list(robot.contacts)
    for i in np.flatnonzero(np.any(en[1:] != en[:-1], axis=1)) + 1:
        for j in np.flatnonzero(en[i] != en[i - 1]):
            switches.append(f"{names[j]} {'on' if en[i, j] > 0.5 else 'off'} at {desired.t[i]:.2f} s")
    n_refused = int(desired.field("n_refused")[-1, 0]) if len(desired) else 0
    wall = float((sensors.t_wall_ns[-1] - sensors.t_wall_ns[0]) * 1e-9) if len(sensors) > 1 else 0.0
    sim = float(sensors.t[-1] - sensors.t[0]) if len(sensors) > 1 else 0.0
    return {
        "fell": fell,
        "pelvis_min_height_m": pelvis_min,
        f"{hand}_max_error_m": hand_err,
        f"{hand}_hold_duration_s": hold_s,
        "foot_fz_tracking_rmse_n": rmse,
        "foot_fz_tracking_rmse_ratio_of_weight": rmse / robot.weight,
        "robot_weight_n": robot.weight,
        "ticks": int(len(sensors)),
        "sim_time_s": sim,
        "wall_time_s": wall,
        "realtime_factor": sim / wall if wall > 0 else float("nan"),
        "retargeting_failures": int(np.sum(desired.field("ok")[:, 0] < 0.5)),
        "requests_refused": n_refused,
        "contact_switches": switches,
    }


def json_safe(s):
    """The summary with every NaN, at any depth, replaced by None (JSON ``null``: NaN is not valid JSON)."""
    if isinstance(s, float):
        return None if s != s else s
    if isinstance(s, dict):
        return {k: json_safe(v) for k, v in s.items()}
    if isinstance(s, (list, tuple)):
        return [json_safe(v) for v in s]
    return s


def format_summary(s: dict, title: str = "contactflow run summary") -> str:
    """A one-screen text table of a summary dict."""
    lines = [title, "-" * len(title)]
    for k, v in s.items():
        if v is None or (isinstance(v, float) and v != v):
            v = "n/a (no hold of 0.5 s or more in this run)" if "hand" in k else "n/a"
        elif isinstance(v, float):
            v = f"{v:.4g}"
        elif isinstance(v, list):
            v = ", ".join(map(str, v)) if v else "none"
        lines.append(f"{k:40s} {v}")
    return "\n".join(lines)
