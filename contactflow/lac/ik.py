"""Whole-body differential IK of LAC eq. (11), as a QP on pinocchio + quadprog.

One step from configuration ``q`` solves, for the tangent displacement ``dq`` (29,) (``q+ =
pin.integrate(q, dq)``; ``dq[0:3]`` base translation and ``dq[3:6]`` base rotation, both in the
base frame, ``dq[6:]`` joint increments [rad])::

    min  sum_j m_j Pi(t) [ w1p |x_vir_j - x_j - Jp_j dq|^2 + w1o |Log(R_vir_j R_j^T) - Jr_j dq|^2 ]
         + wbp |p_b_ref - p_b - R_b dq_lin|^2 + wbo |Log(R_b_ref R_b^T) - R_b dq_ang|^2
         + wpost |q_ref - q_u - dq_u|^2 + lambda |dq|^2
    s.t. dq[3] = dq[4] = 0                         (base roll and pitch stay zero)
         dq_leg = q_leg_ref - q_leg                 (legs at stance)
         q- - q <= dq_j <= q+ - q                    (0.95 of the model range, upper body)
         h_min - p_z <= (R_b dq_lin)_z <= h_max - p_z (base height)
         |(R_b dq_lin)_x|, |(R_b dq_lin)_y| <= v_xy dt, |(R_b dq_lin)_z| <= v_z dt, |dq[5]| <= w_z dt

All task errors are in world axes. The base starts with zero roll and pitch and only yaws, so the
roll/pitch equality keeps ``R_b = Rz(psi)`` exactly.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pinocchio as pin

from contactflow.lac.config import IKCfg
from contactflow.lac.model import LacRobot
from contactflow.qp import QPSolution, solve_qp
from contactflow.sim.state import base_rotation

__all__ = ["LinkTarget", "IKResult", "WholeBodyIK"]


@dataclasses.dataclass(frozen=True)
class LinkTarget:
    """Admittance target of one contact link.

    Attributes:
        link: link index. x_W: (3,) CoM target in world [m]. R_W: (3, 3) orientation target.
        weight: m_j Pi(t) >= 0 multiplying w1p and w1o.
        p_local: (3,) point of the link (joint frame) [m] that ``x_W`` targets; None = the link CoM
            (LAC eq. (11)). Used by the LAC expert to steer the point where the load acts.
    """

    link: int
    x_W: np.ndarray
    R_W: np.ndarray
    weight: float
    p_local: np.ndarray | None = None


@dataclasses.dataclass(frozen=True)
class IKResult:
    """Result of :meth:`WholeBodyIK.step`.

    Attributes:
        q: (30,) new configuration (the old one when the QP failed).
        dq: (29,) applied tangent step.
        qp: the QP solution (status, residuals).
        solve_time_s: wall time of the QP build + solve [s].
    """

    q: np.ndarray
    dq: np.ndarray
    qp: QPSolution
    solve_time_s: float


class WholeBodyIK:
    """LAC eq. (11) differential IK.

    Args:
        cfg: IK parameters (weights, joint range scale, base rate caps).
        lac: the robot.
        dt: frame period [s] (the rate caps are per frame).
        base_height_bounds: (h_min, h_max) [m].
    """

    def __init__(self, cfg: IKCfg, lac: LacRobot, dt: float, base_height_bounds: tuple[float, float]):
        self.cfg = cfg
        self.lac = lac
        self.dt = dt
        self.h_min, self.h_max = base_height_bounds
        nv = lac.model.nv
        self.nv = nv
        mid = 0.5 * (lac.q_lo + lac.q_hi)
        half = 0.5 * (lac.q_hi - lac.q_lo) * cfg.joint_range_scale
        self.q_lo = mid - half
        self.q_hi = mid + half
        n_leg = len(lac.leg_v)
        A_eq = np.zeros((2 + n_leg, nv))
        A_eq[0, 3] = 1.0
        A_eq[1, 4] = 1.0
        for k, v in enumerate(lac.leg_v):
            A_eq[2 + k, v] = 1.0
        self.A_eq = A_eq
        n_u = len(lac.upper_v)
        self._n_u = n_u
        self._qu_lo = self.q_lo[lac.upper_v - 6]
        self._qu_hi = self.q_hi[lac.upper_v - 6]
        A_in = np.zeros((2 * n_u + 8, nv))
        A_in[np.arange(n_u), lac.upper_v] = 1.0
        A_in[n_u + np.arange(n_u), lac.upper_v] = -1.0
        A_in[2 * n_u + 6, 5] = 1.0
        A_in[2 * n_u + 7, 5] = -1.0
        self._A_in = A_in
        b_in = np.zeros(2 * n_u + 8)
        b_in[2 * n_u:2 * n_u + 4] = -cfg.base_vel_xy_max_m_s * dt
        b_in[2 * n_u + 6:2 * n_u + 8] = -cfg.base_yaw_rate_max_rad_s * dt
        self._b_in = b_in
        self._H_post = np.zeros((nv, nv))
        self._H_post[lac.upper_v, lac.upper_v] = 1.0

    @staticmethod
    def integrate(q: np.ndarray, dq: np.ndarray) -> np.ndarray:
        """Apply a step: base p+ = p + R_b dq[0:3], R_b+ = R_b Exp(dq[3:6]) (translation and
        rotation integrated separately, so the world-frame rate caps hold exactly), joints += dq[6:].

        Args:
            q: (30,) configuration. dq: (29,) tangent step.

        Returns:
            (30,) new configuration.
        """
        out = q.copy()
        R_b = base_rotation(q)
        out[0:3] = q[0:3] + R_b @ dq[0:3]
        quat = pin.Quaternion(R_b @ pin.exp3(dq[3:6]))
        quat.normalize()
        out[3:7] = quat.coeffs()
        out[7:] = q[7:] + dq[6:]
        return out

    def step(
        self,
        q: np.ndarray,
        targets: list[LinkTarget],
        q_upper_ref: np.ndarray,
        p_base_ref: np.ndarray,
        R_base_ref: np.ndarray,
        *,
        updated: bool = False,
    ) -> IKResult:
        """One QP step.

        Args:
            q: (30,) current configuration.
            targets: contact-link targets (weights already include m_j Pi(t)).
            q_upper_ref: (11,) q_ref [rad].
            p_base_ref: (3,) base reference position in world [m].
            R_base_ref: (3, 3) base reference orientation.
            updated: True when ``lac.update(q)`` was already called for this ``q``.

        Returns:
            IKResult; on QP failure ``q`` is returned unchanged with ``qp.found == False``.
        """
        t0 = time.perf_counter()
        lac, cfg, nv = self.lac, self.cfg, self.nv
        if not updated:
            lac.update(q)
        H = cfg.damping * np.eye(nv) + cfg.w_posture * self._H_post
        g = np.zeros(nv)
        e_post = q_upper_ref - q[lac.upper_q]
        g[lac.upper_v] -= cfg.w_posture * e_post
        for tg in targets:
            if tg.weight <= 0.0:
                continue
            x, R = lac.link_pose(tg.link)
            if tg.p_local is not None:
                x = lac.point_world(tg.link, tg.p_local)
            Jp, Jr = lac.link_jacobians(tg.link, x)
            ep = tg.x_W - x
            eo = pin.log3(tg.R_W @ R.T)
            wp = tg.weight * cfg.w_contact_pos
            wo = tg.weight * cfg.w_contact_ori
            H += wp * Jp.T @ Jp + wo * Jr.T @ Jr
            g -= wp * Jp.T @ ep + wo * Jr.T @ eo
        R_b = base_rotation(q)
        p_b = q[0:3]
        # base position: p_b+ = p_b + R_b dq_lin
        H[0:3, 0:3] += cfg.w_base_pos * np.eye(3)  # R_b^T R_b = I
        g[0:3] -= cfg.w_base_pos * R_b.T @ (p_base_ref - p_b)
        H[3:6, 3:6] += cfg.w_base_ori * np.eye(3)
        g[3:6] -= cfg.w_base_ori * R_b.T @ pin.log3(R_base_ref @ R_b.T)

        b_eq = np.zeros(self.A_eq.shape[0])
        b_eq[2:] = lac.q_stance - q[7:][lac.leg_v - 6]
        # inequalities A x >= b (rows: joints lo/hi, base x/y lo/hi, base z lo/hi, yaw lo/hi)
        A_in = self._A_in
        A_in[2 * self._n_u:2 * self._n_u + 2, 0:3] = R_b[0:2]
        A_in[2 * self._n_u + 2:2 * self._n_u + 4, 0:3] = -R_b[0:2]
        A_in[2 * self._n_u + 4, 0:3] = R_b[2]
        A_in[2 * self._n_u + 5, 0:3] = -R_b[2]
        qu = q[lac.upper_q]
        vz = cfg.base_vel_z_max_m_s * self.dt
        z_lo = max(self.h_min - p_b[2], -vz)
        z_hi = min(self.h_max - p_b[2], vz)
        if z_lo > z_hi:  # outside the height band (initial state): move towards it at the rate cap
            z_lo = z_hi = float(np.clip(0.5 * (self.h_min + self.h_max) - p_b[2], -vz, vz))
        b_in = self._b_in
        b_in[: self._n_u] = self._qu_lo - qu
        b_in[self._n_u:2 * self._n_u] = qu - self._qu_hi
        b_in[2 * self._n_u + 4] = z_lo
        b_in[2 * self._n_u + 5] = -z_hi
        sol = solve_qp(H, g, self.A_eq, b_eq, A_in, b_in)
        if sol.found:
            dq = sol.x
            q_new = self.integrate(q, dq)
        else:
            dq = np.zeros(nv)
            q_new = q.copy()
        return IKResult(q_new, dq, sol, time.perf_counter() - t0)
