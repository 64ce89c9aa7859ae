"""External wrench estimation for the LAC expert, from proprioception and the sole wrenches.

The expert never sees the true external wrench; it estimates, quasi-statically (the robot stands,
the accelerations are small; the dynamic terms are left to a first-order low-pass filter):

* **Arm links** (the loaded hand link of each arm, force at the URDF hand link's own CoM, where the
  simulator applies it, or at ``arm_point_local_m``). The joint rows of the
  floating-base equation of motion ``M vdot + h = S^T tau + J_c^T lam + J_e^T w`` restricted to the
  5 arm joints of one arm hold neither the contact Jacobians (the feet are not on the arm's chain)
  nor the other links' wrenches, so at rest ``J_e,arm^T w = g_arm(q) - tau_arm`` (``tau`` the
  applied motor torques). With 5 joints and a 6-D wrench the system is under-determined; the force
  is taken first as the least-squares solution ``F = pinv(Jp_arm^T) r`` (exact for a pure force),
  then the couple from the residual ``C = pinv(Jr_arm^T) (r - Jp_arm^T F)`` (both solves damped, see
  ``lever_damping_m``). A pure couple is then
  partly seen as a force (the part of ``Jr^T C`` in the range of ``Jp^T``): reported, not hidden.
  (Momentum-free version of the generalized-momentum observer, De Luca & Mattone, ICRA 2005.)
* **Torso** (horizontal force at the URDF torso link's own CoM, where MuJoCo's ``xfrc_applied``
  acts, not at the reduced model's torso + head CoM): at quasi-static equilibrium the external
  forces balance the ground reactions, ``sum_i f_sole,i + sum_e F_e + m g = 0``, so the horizontal
  external force is minus the sum of the horizontal sole forces (rotated to world); the arms'
  estimated forces are subtracted, the rest is attributed to the torso. The vertical part is not
  estimated (it would need the model mass to within a few newtons).

Every estimate passes a first-order low-pass (``cutoff_hz``) and a magnitude deadband.

The base state (``q[0:7]``, ``v[0:6]``) and the sole wrenches are taken as measured; in simulation they
are the simulator's truth (driver metadata ``base_state: simulation_truth``): on hardware they come
from a base state estimator and foot force sensors (see :mod:`contactflow.lac.expert`).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Mapping, Sequence

import numpy as np
import pinocchio as pin

from contactflow.errors import ConfigError
from contactflow.lac.model import LacRobot
from contactflow.robot import Robot

log = logging.getLogger(__name__)

__all__ = ["EstimatorCfg", "WrenchEstimate", "WrenchEstimator"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class EstimatorCfg:
    """Wrench estimation parameters.

    Attributes:
        cutoff_hz: first-order low-pass cut-off on every estimate [Hz].
        deadband_force_n: force magnitudes below this are zero; above it the magnitude is reduced
            by it (continuous soft threshold) [N].
        deadband_couple_nm: the same for couples [N m].
        torso: estimate the torso force from the sole wrenches (False: torso channel off).
        max_force_n: clamp of each force estimate's magnitude [N].
        max_couple_nm: clamp of each couple estimate's magnitude [N m].
        inertial: add the inertial terms (inverse dynamics with the acceleration finite-differenced
            over one tick; ``m c_ddot`` for the torso). Without them the estimate error is
            ``-M qdd``, which the torque feed-forward turns into a negative apparent inertia
            (measured: the K = 30 N/m hand oscillates and the robot falls).
        arm_point_local_m: where the arm force is assumed to act, in the arm link's joint frame [m];
            ``None`` = the URDF link's own CoM (:func:`contactflow.lac.model.link_com_local`, where
            the simulator's ``xfrc_applied`` acts; not the reduced model's CoM, which for the G1
            hand merges wrist roll, locked wrist pitch/yaw and rubber hand). The estimated force
            and couple are about this point.
        lever_damping_m: Tikhonov damping of the arm force solve, ``F = (A^T A + l^2 I)^-1 A^T r``
            with ``A = Jp_arm^T`` [m]: force directions the arm joints see with a lever below ~l
            are shrunk instead of amplifying the joint friction (0.2 N m) into newtons.
        couple_damping: the same for the couple solve [-] (rad^2).
        warmup_s: after a reset the raw estimate is weighted by a ramp from 0 to 1 over this time
            [s] (the first readings hold the contact build-up: -38 N of "torso force" at t = 0).
    """

    cutoff_hz: float = 3.0
    deadband_force_n: float = 0.3
    deadband_couple_nm: float = 0.05
    torso: bool = True
    max_force_n: float = 60.0
    max_couple_nm: float = 6.0
    inertial: bool = True
    arm_point_local_m: tuple[float, float, float] | None = None
    warmup_s: float = 1.0
    lever_damping_m: float = 0.02
    couple_damping: float = 0.01

    def __post_init__(self):
        for n in ("cutoff_hz", "max_force_n", "max_couple_nm"):
            if not getattr(self, n) > 0:
                raise ConfigError(f"{n}: must be > 0, got {getattr(self, n)!r}")
        for n in ("deadband_force_n", "deadband_couple_nm", "warmup_s", "lever_damping_m", "couple_damping"):
            if getattr(self, n) < 0:
                raise ConfigError(f"{n}: must be >= 0, got {getattr(self, n)!r}")


@dataclasses.dataclass(frozen=True)
class WrenchEstimate:
    """Filtered estimates, world frame.

    Attributes:
        f_arm: (2, 3) force at each arm link's CoM (left, right) [N].
        c_arm: (2, 3) couple on each arm link [N m].
        f_torso: (3,) force at the torso link CoM (z = 0) [N].
    """

    f_arm: np.ndarray
    c_arm: np.ndarray
    f_torso: np.ndarray


def _soft(x: np.ndarray, band: float, cap: float) -> np.ndarray:
    n = float(np.linalg.norm(x))
    if n <= band:
        return np.zeros_like(x)
    return x * (min(n - band, cap) / n)


class WrenchEstimator:
    """Quasi-static external wrench estimator (module docstring for the math).

    Args:
        cfg: EstimatorCfg.
        robot: the robot (pinocchio model, joint order).
        lac: a :class:`LacRobot` of that robot (its own working data is used: do not share it
            with the IK).
        arm_links: indices (into ``lac.link_names``) of the left and right loaded arm links.
        sole_frames: pinocchio frame ids of the two soles (``wrench.<contact>`` are in these frames).
        dt: step [s].
    """

    def __init__(self, cfg: EstimatorCfg, robot: Robot, lac: LacRobot, arm_links: Sequence[int],
                 sole_frames: Sequence[int], dt: float):
        self.cfg = cfg
        self.robot = robot
        self.lac = LacRobot(robot) if lac is None else lac
        self.model = robot.model
        self.data = self.model.createData()
        self.arm_links = tuple(arm_links)
        self.sole_frames = tuple(sole_frames)
        self.contacts = [c for c in robot.contacts.values() if c.frame_id in self.sole_frames]
        groups = [self.lac.link_groups[i] for i in self.arm_links]
        self.arm_v = [self.lac.upper_v[[k for k, g in enumerate(self.lac.link_groups) if g == grp]] for grp in groups]
        self.dt = dt
        self.mass = float(robot.mass)
        self.alpha = dt / (dt + 1.0 / (2 * np.pi * cfg.cutoff_hz))
        self.torso_link = next(i for i, g in enumerate(self.lac.link_groups) if g == "torso")
        #: link index -> (3,) point where its force is assumed to act, in the link's joint frame [m]
        self.point_local = {i: self.lac.applied_point_local(i) if cfg.arm_point_local_m is None
                            else np.asarray(cfg.arm_point_local_m, float) for i in self.arm_links}
        self.point_local[self.torso_link] = self.lac.applied_point_local(self.torso_link)
        self.reset(None)

    def reset(self, sensors: Mapping | None) -> None:
        """Zero the filter states and restart the warm-up ramp."""
        self._f = np.zeros(15)
        self._k = 0
        self._J = None
        self._v_prev = None
        self._vcom_prev = None
        self._t_prev = None
        self._last: WrenchEstimate | None = None
        #: readings have come at other intervals than the nominal step (a wall-clock driver):
        #: the measured joint torques are used from then on (:meth:`step`)
        self.wall_clock = False

    def interval(self, sensors: Mapping) -> float:
        """Time since the previous reading [s]: the readings' own clock (``t``) where it differs
        from the nominal step by more than 1 us, else the nominal ``dt``.

        A wall-clock driver (the hardware, its emulator) reads the robot every 20 ms on average, but
        one reading can follow the last by 0 to 35 ms (measured on the emulated G1); the finite
        differences of :meth:`raw` taken over the nominal step then turned that jitter into
        spurious external forces of several newtons while the arms moved, and the admittance
        followed them. A lockstep simulator's readings are one nominal step apart (float noise
        below 1 us is ignored, so lockstep runs are unchanged). 0 (or less): the same reading again.
        """
        t = sensors.get("t")
        if t is None or self._t_prev is None:
            return self.dt
        dt = float(np.asarray(t, float).reshape(-1)[0]) - self._t_prev
        return self.dt if abs(dt - self.dt) <= 1e-6 else dt

    def raw(self, sensors: Mapping, applied: Mapping | None = None, dt: float | None = None
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Unfiltered estimates (f_arm (2, 3), c_arm (2, 3), f_torso (3,)) at ``sensors``; also
        caches the link Jacobians used by :meth:`generalized_force`.

        Args:
            sensors: ``q`` (30,), ``v`` (29,), ``tau`` (23,), ``wrench.<sole>`` (6,).
            applied: the PD command in force since the previous reading (``q_target``, ``kp``,
                ``kd``, ``tau_ff``, (23,) each), or None. With it (and ``inertial``) the arm rows
                use the tick-averaged momentum balance (see :meth:`step`).
            dt: time since the previous reading [s] (``None``: :meth:`interval`).
        """
        q = np.asarray(sensors["q"], float)
        v = np.asarray(sensors["v"], float)
        tau = np.asarray(sensors["tau"], float)
        m, d, lac = self.model, self.data, self.lac
        dt = self.interval(sensors) if dt is None else dt
        if "t" in sensors:
            self._t_prev = float(np.asarray(sensors["t"], float).reshape(-1)[0])
        if self.cfg.inertial and self._v_prev is not None:
            a = (v - self._v_prev) / dt
            if applied is not None:
                # momentum balance averaged over the last tick: the PD law is linear in (q, qdot),
                # so its tick average is kp (q* - q_mid) - kd (q_k - q_k-1) / dt + tau_ff (exact
                # up to the trapezoid q_mid and the effort clamp); dynamics at the mid state
                q_mid = pin.interpolate(m, self._q_prev, q, 0.5)
                g = pin.rnea(m, d, q_mid, 0.5 * (v + self._v_prev), a).copy()
                dqj = (q[7:] - self._q_prev[7:]) / dt
                tau = np.clip(applied["kp"] * (applied["q_target"] - q_mid[7:]) - applied["kd"] * dqj + applied["tau_ff"],
                              -self.robot.tau_max, self.robot.tau_max)
            else:
                # inverse dynamics with the finite-difference acceleration over the last tick
                g = pin.rnea(m, d, q, v, a).copy()
        else:
            g = pin.computeGeneralizedGravity(m, d, q).copy()
        self._v_prev = v.copy()
        self._q_prev = q.copy()
        lac.update(q)
        pin.updateFramePlacements(m, lac.data)
        f_arm = np.zeros((2, 3))
        c_arm = np.zeros((2, 3))
        J = {}
        for n, (i, av) in enumerate(zip(self.arm_links, self.arm_v)):
            Jp, Jr = lac.link_jacobians(i, lac.point_world(i, self.point_local[i]))
            J[i] = (Jp, Jr)
            r = g[av] - tau[av - 6]
            A = Jp[:, av].T
            lam = self.cfg.lever_damping_m ** 2
            F = np.linalg.solve(A.T @ A + lam * np.eye(3), A.T @ r)
            B = Jr[:, av].T
            C = np.linalg.solve(B.T @ B + self.cfg.couple_damping * np.eye(3), B.T @ (r - A @ F))
            f_arm[n], c_arm[n] = F, C
        f_t = np.zeros(3)
        if self.cfg.torso:
            f_soles = np.zeros(3)
            for c in self.contacts:
                w = np.asarray(sensors[f"wrench.{c.name}"], float)
                f_soles += lac.data.oMf[c.frame_id].rotation @ w[:3]
            pin.centerOfMass(m, d, q, v)
            vcom = d.vcom[0].copy()
            a_com = (vcom - self._vcom_prev) / dt if (self.cfg.inertial and self._vcom_prev is not None) else np.zeros(3)
            self._vcom_prev = vcom
            # m c_ddot = sum f_sole + sum F_ext + m g  ->  F_ext,xy = m c_ddot,xy - sum f_sole,xy
            f_t[:2] = self.mass * a_com[:2] - f_soles[:2] - f_arm[:, :2].sum(axis=0)
            J[self.torso_link] = lac.link_jacobians(self.torso_link, lac.point_world(self.torso_link, self.point_local[self.torso_link]))
        self._J = J
        return f_arm, c_arm, f_t

    def step(self, sensors: Mapping, applied: Mapping | None = None) -> WrenchEstimate:
        """Filtered estimate at ``sensors`` (``q`` (30,), ``v`` (29,), ``tau`` (23,), ``wrench.<sole>`` (6,)).

        Args:
            sensors: the reading.
            applied: the PD command in force since the previous reading (None: use ``tau``).
                Ignored from the first reading that is not one nominal step after the previous one
                (:attr:`wall_clock`): such a driver runs on its own clock, so the command in force
                over the interval is not known (the emulated G1 on a loaded machine: readings 0 to
                35 ms apart, and the tick-averaged PD law then gave spurious forces of up to 55 N
                where the measured torques give under 5 N).
        """
        dt = self.interval(sensors)
        if self._t_prev is not None and dt != self.dt and not self.wall_clock:
            self.wall_clock = True
            log.info("wrench estimator: a reading %.1f ms after the last (nominal %.1f ms): a wall-clock driver; "
                     "the measured joint torques are used from now on", 1e3 * dt, 1e3 * self.dt)
        if self.wall_clock:
            applied = None
        if self._last is not None and dt <= 0.0:
            return self._last  # the same reading again (a wall-clock driver): nothing new to estimate
        f_arm, c_arm, f_t = self.raw(sensors, applied, dt)
        x = np.concatenate([f_arm.ravel(), c_arm.ravel(), f_t])
        self._k += 1
        # warm-up: the first readings after a reset hold the contact build-up (sole forces of
        # tens of newtons, zero joint torques); the estimate's weight ramps from 0 to 1
        ramp = min(1.0, self._k * self.dt / self.cfg.warmup_s) if self.cfg.warmup_s > 0 else 1.0
        self._f = self._f + self.alpha * (ramp * x - self._f)
        y = self._f
        c = self.cfg
        fa = np.array([_soft(y[0:3], c.deadband_force_n, c.max_force_n), _soft(y[3:6], c.deadband_force_n, c.max_force_n)])
        ca = np.array([_soft(y[6:9], c.deadband_couple_nm, c.max_couple_nm), _soft(y[9:12], c.deadband_couple_nm, c.max_couple_nm)])
        ft = _soft(y[12:15], c.deadband_force_n, c.max_force_n)
        self._last = WrenchEstimate(fa, ca, ft)
        return self._last

    def generalized_force(self, est: WrenchEstimate) -> np.ndarray:
        """``J_e^T w_est`` (29,): the generalized force of the estimated wrenches at the state of
        the last :meth:`step` [N, N m]."""
        out = np.zeros(self.model.nv)
        for n, i in enumerate(self.arm_links):
            Jp, Jr = self._J[i]
            out += Jp.T @ est.f_arm[n] + Jr.T @ est.c_arm[n]
        if self.torso_link in self._J:
            out += self._J[self.torso_link][0].T @ est.f_torso
        return out
