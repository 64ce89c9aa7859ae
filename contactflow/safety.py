"""Command safety for robot drivers: validate joint commands and hold the last safe one.

A robot driver must never apply a malformed command and must keep a safe state when commands
stop arriving. :class:`CommandHold` implements both rules for joint position commands (Talos'
``theta_cmd``: the last safe position is held) and :class:`PDCommandHold` for PD commands
(Unitree ``MotorCmd`` fields: ``q_target``, ``kp``, ``kd``, ``tau_ff``: after the timeout, damping
mode ``kp = 0``, ``kd = kd_damping``, ``tau_ff = 0``, Unitree's convention for a lost command
stream, then a gain ramp when commands come back); the MuJoCo driver uses them, and a hardware
driver should too. :func:`base_tilt_rad` and :data:`FALL_TILT_RAD` are the one fall-by-tilt rule of
the floating-base robots (the G1 runs' summary, the LAC evaluation and training, the Unitree driver).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from contactflow.errors import ConfigError

__all__ = ["CommandHold", "PDCommandHold", "FileEstop", "FALL_TILT_RAD", "base_tilt_rad"]

log = logging.getLogger("contactflow.safety")

#: A floating base tilted more than this from upright [rad] (~57 deg) has fallen: the G1 runs' summary
#: (:func:`contactflow.lac.summary.g1_summary`), the LAC evaluation (``contactflow lac eval``) and the
#: Unitree driver's fall rule (``fall_tilt_rad``).
FALL_TILT_RAD = 1.0


def base_tilt_rad(quat_xyzw):
    """Tilt of a floating base: the angle between its z axis and the world's vertical [rad].

    ``arccos(R_zz)`` with ``R_zz = 1 - 2 (x^2 + y^2) / |q|^2``, the (z, z) entry of the base's
    rotation matrix in the world (0 upright, pi upside down).

    Args:
        quat_xyzw: (4,) or (N, 4) base orientations in the world frame, (x, y, z, w) (pinocchio's
            and the IMU readings' order), not necessarily normalised.

    Returns:
        float for one quaternion, (N,) array for N; NaN where a quaternion holds NaN or is zero.
    """
    q = np.asarray(quat_xyzw, dtype=float)
    if q.ndim == 1:  # one reading (the Unitree driver, every 500 Hz state): plain floats, ~5x cheaper
        x, y, z, w = (float(c) for c in q)
        n2 = x * x + y * y + z * z + w * w
        if not n2 > 0.0 or not math.isfinite(n2):
            return math.nan
        return math.acos(min(1.0, max(-1.0, 1.0 - 2.0 * (x * x + y * y) / n2)))
    x, y = q[..., 0], q[..., 1]
    with np.errstate(invalid="ignore", divide="ignore"):
        r_zz = 1.0 - 2.0 * (x * x + y * y) / np.sum(q * q, axis=-1)
    tilt = np.arccos(np.clip(r_zz, -1.0, 1.0))
    return float(tilt) if tilt.ndim == 0 else tilt


class CommandHold:
    """Last-safe-command holder with a timeout.

    Args:
        theta_safe: (n,) initial safe joint position command [rad] (e.g. the default posture).
        timeout_s: a command older than this is stale: ``holding`` becomes True and the last safe
            command keeps being applied (it always is; ``holding`` is for reporting).
        q_min, q_max: optional (n,) joint limits [rad]; a command outside them is rejected.

    Attributes:
        rejected: number of rejected commands.
        last_reason: why the last command was rejected ('' if none was).
    """

    def __init__(self, theta_safe: np.ndarray, timeout_s: float = 0.1, q_min: np.ndarray | None = None,
                 q_max: np.ndarray | None = None):
        self.theta = np.array(theta_safe, dtype=float)
        self.timeout_s = float(timeout_s)
        self.q_min = None if q_min is None else np.asarray(q_min, float)
        self.q_max = None if q_max is None else np.asarray(q_max, float)
        self.last_time: float | None = None
        self.rejected = 0
        self.last_reason = ""
        self.holding = False
        self._hold_reported = False  # a "holding" warning was logged and no "resumed" since

    def _position_problem(self, theta, name: str = "theta_cmd") -> str:
        """Why ``theta`` is not a safe position command ('' if it is)."""
        if theta is None:
            return f"{name}: missing or malformed message"
        theta = np.asarray(theta, dtype=float)
        if theta.shape != self.theta.shape:
            return f"{name}: shape {theta.shape}, expected {self.theta.shape}"
        if not np.all(np.isfinite(theta)):
            return f"{name}: non-finite value(s) at joint index {np.flatnonzero(~np.isfinite(theta)).tolist()}"
        if self.q_min is not None:
            out = (theta < self.q_min - 1e-6) | (theta > self.q_max + 1e-6)
            if np.any(out):
                return f"{name}: outside the joint limits at joint index {np.flatnonzero(out).tolist()}"
        return ""

    def _reject(self, reason: str) -> bool:
        self.rejected += 1
        self.last_reason = reason
        return False

    def _accepted(self, now_s: float) -> bool:
        self.last_time = now_s
        if self.holding and self._hold_reported:  # not for the first command: nothing was reported held
            log.warning("commands resumed")
            self._hold_reported = False
        self.holding = False
        return True

    def offer(self, theta: np.ndarray | None, now_s: float) -> bool:
        """Offer a new command received at time ``now_s`` [s].

        Returns:
            True if accepted; False if ``theta`` is None, of the wrong shape, non-finite or out of
            the joint limits (it is then counted in ``rejected`` and the last safe command stays).
        """
        problem = self._position_problem(theta)
        if problem:
            return self._reject(problem)
        self.theta = np.array(theta, dtype=float)
        return self._accepted(now_s)

    def _update_stale(self, now_s: float) -> None:
        stale = self.last_time is None or now_s - self.last_time > self.timeout_s
        if stale and not self.holding and self.last_time is not None:
            log.warning("no command for %.3f s: holding the last safe command", self.timeout_s)
            self._hold_reported = True
        self.holding = stale

    def command(self, now_s: float) -> np.ndarray:
        """The command to apply at ``now_s`` [s]: the last safe one. Updates ``holding``."""
        self._update_stale(now_s)
        return self.theta


class PDCommandHold(CommandHold):
    """Last-safe PD command holder (Unitree ``MotorCmd`` fields) with a timeout.

    A command is accepted only as a whole: ``q_target`` as :class:`CommandHold` checks it (shape,
    finite, within the joint limits), ``kp`` and ``kd`` finite within ``[0, kp_max]`` /
    ``[0, kd_max]``, ``tau_ff`` finite within ``+-tau_max``. A rejected command leaves the last
    safe one in force: its ``q_target`` with ITS gains and feed-forward.

    Modes (:attr:`mode`), on the clock of ``now_s``:

    * ``"start"``: no command accepted yet: the initial command is applied (the default posture
      with the robot's gains: a simulated robot stands until its controller is up).
    * ``"normal"``: the last accepted command (also for up to ``timeout_s`` after it, when later
      commands are missing or rejected).
    * ``"damping"``: no valid command for more than ``timeout_s`` after commands had started
      (stream lost, or every command rejected): ``kp = 0``, ``kd = kd_damping``, ``tau_ff = 0``
      (Unitree's damping command for a lost stream, e.g. unitree_rl_gym ``deploy_real``
      ``create_damping_cmd``); the joints brake instead of pushing with a stale feed-forward
      toward a stale target. Logged once per entry with the reason, counted in
      :attr:`damping_entries`.
    * ``"ramp"``: the first valid command after damping mode: what a robot owner expects is no
      jump, so the stiffness and feed-forward come back linearly over ``recovery_ramp_s``,
      ``(q_target, s kp, (1 - s) kd_damping + s kd, s tau_ff)`` with ``s = (now - t_resume) /
      recovery_ramp_s`` (``s = 0`` on the resume tick), then ``"normal"``. A full-gain return
      would apply ``kp (q_target - q)`` at once to a robot that sagged in damping mode.

    Args:
        q_safe: (n,) initial safe position target [rad] (e.g. the default posture).
        kp, kd: (n,) initial gains [N m/rad, N m s/rad] (e.g. the robot file's).
        tau_ff: (n,) initial feed-forward [N m] (None: zeros).
        timeout_s: see :class:`CommandHold`.
        q_min, q_max: (n,) joint limits [rad] (optional).
        kp_max, kd_max: (n,) largest accepted gains (optional; e.g. the simulator's stability
            limits ``PDRobotSim.kp_max`` / ``kd_max``).
        tau_max: (n,) largest accepted ``|tau_ff|`` [N m] (optional; e.g. the effort limits).
        kd_damping: (n,) damping of damping mode [N m s/rad] (None: the initial ``kd``); must be
            finite, >= 0 and within ``kd_max``.
        recovery_ramp_s: duration of the gain ramp after damping mode [s] (>= 0; 0 = full gains
            on the first valid command).

    Raises:
        ConfigError: ``kd_damping`` or ``recovery_ramp_s`` out of range (the message names the
            joint indices).
    """

    def __init__(self, q_safe: np.ndarray, kp: np.ndarray, kd: np.ndarray, tau_ff: np.ndarray | None = None,
                 timeout_s: float = 0.1, q_min: np.ndarray | None = None, q_max: np.ndarray | None = None,
                 kp_max: np.ndarray | None = None, kd_max: np.ndarray | None = None,
                 tau_max: np.ndarray | None = None, kd_damping: np.ndarray | None = None,
                 recovery_ramp_s: float = 1.0):
        super().__init__(q_safe, timeout_s, q_min, q_max)
        n = self.theta.shape
        self.kp = np.array(kp, dtype=float).reshape(n)
        self.kd = np.array(kd, dtype=float).reshape(n)
        self.tau_ff = np.zeros(n) if tau_ff is None else np.array(tau_ff, dtype=float).reshape(n)
        inf = np.full(n, np.inf)
        self.kp_max = inf if kp_max is None else np.asarray(kp_max, float)
        self.kd_max = inf if kd_max is None else np.asarray(kd_max, float)
        self.tau_max = inf if tau_max is None else np.asarray(tau_max, float)
        kdd = self.kd.copy() if kd_damping is None else np.array(kd_damping, dtype=float).reshape(n)
        bad = ~np.isfinite(kdd) | (kdd < 0) | (kdd > self.kd_max)
        if np.any(bad):
            raise ConfigError(f"kd_damping: non-finite, negative or above kd_max at joint index {np.flatnonzero(bad).tolist()}")
        if not (np.isfinite(recovery_ramp_s) and recovery_ramp_s >= 0):
            raise ConfigError(f"recovery_ramp_s must be >= 0, got {recovery_ramp_s}")
        self.kd_damping = kdd
        self.recovery_ramp_s = float(recovery_ramp_s)
        self.mode = "start"
        self.damping_entries = 0
        self.damping_reason = ""
        self._rejected_at_accept = 0
        self._resume_s: float | None = None

    def problem(self, fields: Mapping[str, np.ndarray] | None) -> str:
        """Why ``fields`` (``q_target``, ``kp``, ``kd``, ``tau_ff``) is not a safe command ('' if it is)."""
        if fields is None:
            return "command: missing or malformed message"
        missing = [k for k in ("q_target", "kp", "kd", "tau_ff") if k not in fields]
        if missing:
            return f"command: missing field(s) {missing}"
        problem = self._position_problem(fields["q_target"], "q_target")
        if problem:
            return problem
        for name, lo, hi in (("kp", 0.0, self.kp_max), ("kd", 0.0, self.kd_max), ("tau_ff", -self.tau_max, self.tau_max)):
            x = np.asarray(fields[name], dtype=float)
            if x.shape != self.theta.shape:
                return f"{name}: shape {x.shape}, expected {self.theta.shape}"
            bad = ~np.isfinite(x) | (x < lo) | (x > hi)
            if np.any(bad):
                return f"{name}: non-finite or out of range at joint index {np.flatnonzero(bad).tolist()}"
        return ""

    def offer(self, fields: Mapping[str, np.ndarray] | None, now_s: float) -> bool:  # type: ignore[override]
        """Offer a PD command (a mapping with ``q_target``, ``kp``, ``kd``, ``tau_ff``, (n,) each).

        Returns:
            True if accepted; False otherwise (counted in ``rejected``, reason in ``last_reason``;
            the last safe command stays in force).
        """
        problem = self.problem(fields)
        if problem:
            return self._reject(problem)
        self.theta = np.array(fields["q_target"], dtype=float)
        self.kp = np.array(fields["kp"], dtype=float)
        self.kd = np.array(fields["kd"], dtype=float)
        self.tau_ff = np.array(fields["tau_ff"], dtype=float)
        self.last_time = now_s
        self.holding = False
        self._rejected_at_accept = self.rejected
        if self.mode == "damping":
            self.mode = "ramp"
            self._resume_s = now_s
            log.warning("commands resumed after damping mode: stiffness and feed-forward ramp back over %.2f s",
                        self.recovery_ramp_s)
        elif self.mode == "start":
            self.mode = "normal"
        return True

    @property
    def damping(self) -> bool:
        """True while damping mode is applied."""
        return self.mode == "damping"

    def pd_command(self, now_s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(q_target, kp, kd, tau_ff) to apply at ``now_s`` [s] (see the modes in the class docstring).

        Updates ``holding`` and :attr:`mode`; the entry into damping mode is logged once.
        Returns (n,) arrays [rad, N m/rad, N m s/rad, N m].
        """
        stale = self.last_time is None or now_s - self.last_time > self.timeout_s
        self.holding = stale
        if self.mode == "start":
            return self.theta, self.kp, self.kd, self.tau_ff
        if stale:
            if self.mode != "damping":
                self.mode = "damping"
                self._resume_s = None
                self.damping_entries += 1
                n_rej = self.rejected - self._rejected_at_accept
                why = (f"{n_rej} command(s) rejected since the last valid one, last: {self.last_reason}" if n_rej
                       else "no command received")
                self.damping_reason = (f"no valid command for {now_s - self.last_time:.3f} s "
                                       f"(timeout {self.timeout_s:.3f} s): {why}")
                log.warning("damping mode (kp = 0, kd = damping, tau_ff = 0): %s", self.damping_reason)
            z = np.zeros_like(self.kp)
            return self.theta, z, self.kd_damping, z
        if self.mode == "ramp":
            s = 1.0 if self.recovery_ramp_s == 0 else (now_s - self._resume_s) / self.recovery_ramp_s
            if s < 1.0:
                s = max(s, 0.0)
                return self.theta, s * self.kp, (1.0 - s) * self.kd_damping + s * self.kd, s * self.tau_ff
            self.mode = "normal"
            self._resume_s = None
        return self.theta, self.kp, self.kd, self.tau_ff


class FileEstop:
    """A software e-stop a person can trigger from any shell: the stop is on once ``path`` exists
    (``touch PATH``) and stays on (latched) for the life of the object, even if the file goes away.

    A file left over from an earlier stop keeps the robot stopped from the start: removing it is
    the deliberate reset (like turning a mushroom button back).

    Args:
        path: the trigger file.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.reason = ""

    def stop(self) -> bool:
        """True once the trigger file was seen (then always)."""
        if not self.reason and self.path.exists():
            self.reason = f"e-stop file {self.path} exists"
            log.warning("%s: emergency stop (remove the file before the next run)", self.reason)
        return bool(self.reason)
