"""SEIKO Retargeting: quasi-static whole-body retargeting QP (SEIKO RA-L 2024, eq. (9)).

Each step solves, in rate form (x = [qdot (nv); lam_dot (m)], increments = dt x, seiko.md §1.3,
§4), the QP

    min  1e-6 ||A_G qdot||^2                                         (a, 9f)
       + w_vel ||theta_dot||^2                                        (b, 9f)
       + w_pos ||theta_dot - clip(theta_t - theta, c_theta)/dt||^2    (c, 9c)
       + sum_off ||J_w qdot - [clampNorm(p_t - p); clampNorm(log(R_t R^T))]/dt||^2_W   (d, 9b)
       + sum_on_points w_rot ||J_w,ang qdot - clampNorm(log(R_t R^T))/dt||^2            (e)
       + ||T_J x + tau_0/dt||^2_Wtau                                  (f, 9d)
       + ||lam_dot - (lam_t - lam)/dt||^2_Wlam                        (g, 9e)
    s.t. plane on: J_w qdot = [p_t - p; log(R_t R^T)]/dt; point on: J_w,lin qdot = (p_t - p)/dt  (9h)
         T_B x + t_B/dt = 0                                             (9g)
         theta_min <= theta + dt theta_dot <= theta_max                 (9i)
         |theta_dot| <= theta_dot_max                                   (9l)
         |lam_dot_j| <= rate limit                                      (9m)
         -tau_max <= tau_0 + dt T_J x <= tau_max                        (9j)
         C (lam + dt lam_dot) + c >= 0                                  (9k)

with T = [dr/dq | -J^T], t = r = g - J^T lam (eq. 2, :mod:`contactflow.seiko.equilibrium`),
tau_0 = t_J.

The QP is posed in compact (box) form for :func:`contactflow.qp.solve_qp_box` (assembled and solved
in the preallocated buffers of a :class:`contactflow.qp.BoxQP`, one per contact layout): (9i) and (9l) are
one pair of bounds on theta_dot, (9m) and the unit rows of (9k) (the normal-force bounds) are
bounds on lam_dot, (9j) is one two-sided row per joint; the constant identity rows of the cost
(b, c, g) enter the Hessian as a diagonal computed once per contact layout. World-frame Cartesian
quantities use the LOCAL_WORLD_ALIGNED Jacobian, linear rows first. After a successful solve the
rates are clamped, the torque is integrated, every rate is scaled by the 2 s init ramp, q and lam
are integrated and the "ahead" command theta + 0.006 theta_dot is formed (seiko.md §4.4).

Contact switching (seiko.md §7.3-7.4, RA-L Supp. E) and pushing mode (§7.2) are requested with
:meth:`SeikoRetargeting.request_contact`, :meth:`SeikoRetargeting.request_push` and the
``normal_force_rates`` argument of :meth:`SeikoRetargeting.step`; a request that cannot be honoured
is refused (returned as a :class:`Request` with ``accepted=False`` and a message) and the state
is left unchanged, so the robot stays balanced.

Parts (the names users import stay importable from here): :mod:`~contactflow.seiko.retargeting_config`
(:class:`RetargetingConfig`, :class:`EffectorParams`, :class:`RetargetingOutput`, :class:`Request`),
:mod:`~contactflow.seiko.retargeting_switching` (the requests, the switching schedule, pushing
mode), :mod:`~contactflow.seiko.retargeting_qp` (the row layout of QP (9) per contact set); this
module keeps :class:`SeikoRetargeting` (state, reset, the step: assembly, solve, integration, output).
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Mapping

import numpy as np
import pinocchio as pin

from contactflow.environment import Environment
from contactflow.errors import ConfigError
from contactflow.robot import ContactSpec, Robot
from contactflow.seiko.admittance import clamp_norm
from contactflow.seiko.equilibrium import effector_jacobian_world, equilibrium_terms, pose_error_world
from contactflow.seiko.native import kernel_for
from contactflow.seiko.retargeting_config import (
    EffectorParams,
    PlaneEffectorParams,
    PointEffectorParams,
    Request,
    RetargetingConfig,
    RetargetingOutput,
)
from contactflow.seiko.retargeting_qp import FREE, PLANE_ON, Qp9LayoutMixin
from contactflow.seiko.retargeting_switching import ContactSwitchingMixin, NormalForceCommandFilter
from contactflow.seiko.static_id import static_inverse_dynamics

__all__ = [
    "EffectorParams",
    "PlaneEffectorParams",
    "PointEffectorParams",
    "RetargetingConfig",
    "RetargetingOutput",
    "Request",
    "NormalForceCommandFilter",
    "SeikoRetargeting",
]

log = logging.getLogger(__name__)


class SeikoRetargeting(ContactSwitchingMixin, Qp9LayoutMixin):
    """SEIKO Retargeting (RA-L 2024 eq. (9), code ``SEIKORetargeting::runSEIKO``).

    Usage: ``out = r.reset()`` then ``out = r.step(targets)`` every ``dt_s``.

    Contact switching (seiko.md §7.3-7.4):

    * enable (:meth:`request_contact` ``(name, True)``): a point contact gets its world-fixed
      surface frame R_c (``surface_rpy_rad``, else the current hand orientation); the contact
      target becomes the current desired pose (planes: full pose, points: position, plus the
      orientation task e); lam starts at 0 with ``fz_min = 0``, then every step ``fz_min`` is
      ratcheted up to ``min(f_n - 0.01, fz_min_desired)`` while the optimiser loads the contact;
    * disable (``(name, False)``): the wrench weights become ``disabling_weight_scale`` times
      the enabled ones, ``fz_min = 0``, push mode off; the wrench decreases at the rate limits
      (9m) (ramped in over ``disable_ramp_s`` and tapered below ``disable_taper_n``, feet only by
      default, not in the paper) and the contact is released once ``f_n < dt *`` the normal-force
      rate bound of that step.

    Pushing mode (§7.2, :meth:`request_push`): on an enabled contact that is not being disabled,
    the wrench target is frozen at the current wrench, the weights become
    ``disabling_weight_scale * ones``, and the normal-force target follows
    :class:`NormalForceCommandFilter` driven by the ``normal_force_rates`` of :meth:`step`.

    Refused requests (an unknown effector; enabling far from every surface of ``environment``;
    disabling the last enabled plane contact; pushing on a disabled or disabling contact; a
    non-finite or too large force velocity) return ``Request(False, message)``, log a warning
    and change nothing.

    Args:
        config: RetargetingConfig.
        robot: loaded Robot (model, limits, contacts).
        environment: surfaces for the "far from any surface" check of an enable request; None
            disables the check.

    Raises:
        ConfigError: a contact listed in ``surface_rpy_rad`` is not a point effector of the robot.
    """

    def __init__(self, config: RetargetingConfig, robot: Robot, environment: Environment | None = None):
        self.config = config
        self.environment = environment
        self.robot = robot
        self.model = robot.model
        self.data = robot.model.createData()
        # the compiled kinematics (RetargetingConfig.kernel), one per contact layout (_layout), or None
        self._native = kernel_for(self.model, config.kernel, "RetargetingConfig.kernel")
        self._kin = None
        for name in config.surface_rpy_rad:
            if name in robot.contacts and robot.contacts[name].type != "point":
                raise ConfigError(f"surface_rpy_rad.{name}: effector {name!r} is not a point contact")
        n = robot.n
        self._n = n
        self._nv = robot.nv
        self._theta_min = robot.q_min + robot.position_margin
        self._theta_max = robot.q_max - robot.position_margin
        self._vel_lim = config.joint_vel_limit_ratio * robot.v_max
        self._neg_vel_lim = -self._vel_lim
        self._inv_dt = 1.0 / config.dt_s
        self._theta_lims = np.stack([self._theta_min, self._theta_max])  # (2, n) rows: lower, upper
        self._tau_lim = config.joint_torque_limit_ratio * robot.tau_max
        self._tau_lims = np.stack([-self._tau_lim, self._tau_lim])
        self._w_tau = np.array(
            [config.joint_torque_weight_arms if j.startswith(config.arm_joint_prefixes) else config.joint_torque_weight
             for j in robot.joint_names]
        )
        self._names = list(robot.contacts)
        self._specs: list[ContactSpec] = [robot.contacts[k] for k in self._names]
        # (name, frame, wrench size) of every effector, and its desired minimum normal force [N]
        self._effectors = [(k, c.frame_id, c.dim) for k, c in zip(self._names, self._specs)]
        self._fz_min_desired = {k: config.effector(c.type).fz_min_n for k, c in zip(self._names, self._specs)}
        self._enabled = {k: False for k in self._names}
        self._q = robot.q_default.copy()
        self._reset_done = False
        self.n_refused = 0
        self._n_steps = 0
        self._pose_err = np.zeros(6)  # scratch of the pose errors (one effector at a time)
        self.qp_hook: Callable[..., None] | None = None
        """Optional ``qp_hook(H, g, A, lo, hi, lb, ub, solution)`` called after every solve of
        QP (9) with the box form of :func:`contactflow.qp.solve_qp_box` (reused buffers: copy
        what you keep). Used to dump QPs (tests/fixtures) and compare solvers."""

    # ------------------------------------------------------------------ public API

    @property
    def kernel(self) -> str:
        """Who computes each step's kinematics and equilibrium terms: ``"native"`` (compiled) or
        ``"python"`` (``RetargetingConfig.kernel``)."""
        return "python" if self._native is None else "native"

    def reset(self, q: np.ndarray | None = None) -> RetargetingOutput:
        """Reset the state at posture ``q`` and compute the wrenches by static inverse dynamics.

        Enabled contacts follow ``robot.contacts[...].enabled``; contact and effector targets
        become the current poses; the posture target becomes theta; the init ratio restarts at 0.

        Args:
            q: (nq,) posture; ``robot.q_default`` when None.

        Returns:
            RetargetingOutput with zero rates; ``ok=False`` (not raised) if the static inverse
            dynamics is infeasible, with its status in ``diagnostics``.

        Raises:
            ConfigError: ``q`` has the wrong shape or is not finite.
        """
        q = self.robot.q_default.copy() if q is None else np.array(q, dtype=float)
        if q.shape != (self.model.nq,) or not np.all(np.isfinite(q)):
            raise ConfigError(f"reset: q must be a finite ({self.model.nq},) vector")
        q[3:7] /= np.linalg.norm(q[3:7])
        self._q = q
        self._theta_target = q[7:].copy()
        self._enabled = {k: self.robot.contacts[k].enabled for k in self._names}
        pin.framesForwardKinematics(self.model, self.data, q)
        self._targets = {k: self.data.oMf[c.frame_id].copy() for k, c in zip(self._names, self._specs)}
        self._R_c: dict[str, np.ndarray | None] = {}
        for k, c in zip(self._names, self._specs):
            if c.type == "point":
                rpy = self.config.surface_rpy_rad.get(k)
                self._R_c[k] = pin.rpy.rpyToMatrix(*rpy) if rpy is not None else self._targets[k].rotation.copy()
            else:
                self._R_c[k] = None
        # lam and the wrench target (9e) of every effector: (n_eff, 6) rows (points: the first 3
        # values), one view per effector (always written in place); the enabled ones stacked by
        # one gather (self._flat_idx of the layout)
        self._wrench_rows = np.zeros((2, len(self._names), 6))  # lam, lam_target
        self._lam_rows, self._lam_target_rows = self._wrench_rows[0], self._wrench_rows[1]
        self._lam_flat, self._lam_target_flat = self._lam_rows.reshape(-1), self._lam_target_rows.reshape(-1)
        self._lam = {k: self._lam_rows[i, : c.dim] for i, (k, c) in enumerate(zip(self._names, self._specs))}
        self._lam_target = {k: self._lam_target_rows[i, : c.dim] for i, (k, c) in enumerate(zip(self._names, self._specs))}
        self._fz_min = dict(self._fz_min_desired)
        self._disabling = {k: False for k in self._names}
        self._disable_steps = {k: 0 for k in self._names}
        self._push = {k: False for k in self._names}
        cfg = self.config
        self._push_filter = {
            k: NormalForceCommandFilter(cfg.dt_s, cfg.push_clamp_n, cfg.push_cutoff_hz, cfg.push_max_rate_n_per_s,
                                        cfg.push_max_acc_n_per_s2)
            for k in self._names
        }
        self.n_refused = 0
        self._init_ratio = 0.0
        self._layout()

        on = self._on
        sid = static_inverse_dynamics(
            self.model, self.data, q, [c for _, c in on], [self._R_c[k] for k, _ in on],
            tau_weights=self._w_tau,
            lam_weights=[np.asarray(self.config.effector(c.type).wrench_weights) for _, c in on],
            tau_max=self._tau_lim,
            constraints=[self._constraints[k] for k, _ in on],
            lam_targets=[self._lam_target[k] for k, _ in on],
            hessian_regularisation=self.config.hessian_regularisation,
            solver=self.config.qp_solver,
        )
        for (k, _), lam in zip(on, sid.lams):
            self._lam[k][:] = lam
        self._tau = sid.tau.copy()
        self._reset_done = True
        diag = {
            "status": sid.solution.status,
            "message": sid.solution.message,
            "solve_time_s": 0.0,
            "eq_residual": sid.solution.eq_residual,
            "ineq_violation": sid.solution.ineq_violation,
            "n_active": sid.solution.n_active,
            "n_var": self._m,
            "n_eq": 6,
            "n_in": 2 * self._n + sum(self._constraints[k][0].shape[0] for k, _ in on),
            "init_ratio": 0.0,
            "stage": "static_id",
        }
        if not sid.ok:
            log.warning("SEIKO retargeting reset: static inverse dynamics failed (%s) %s",
                        sid.solution.status, sid.solution.message)
        elif self.config.settle_at_reset:
            diag["settle_steps"], diag["settle_motion"] = self._settle()
        self._n_steps = 0  # steps since reset, after the settling: the clock of the log lines (t_s)
        return self._output(np.zeros(self._nv), {k: np.zeros(c.dim) for k, c in zip(self._names, self._specs)},
                            sid.ok, diag)

    def _settle(self) -> tuple[int, float]:
        """Run QP (9) without commands (full ratio) until the posture is a fixed point.

        Returns:
            (steps taken, last per-step motion max|v| dt).
        """
        self._init_ratio = 1.0
        motion = float("inf")
        k = 0
        for k in range(1, self.config.settle_max_steps + 1):
            out = self.step(None)
            if not out.ok:
                log.warning("SEIKO retargeting reset: settling stopped at step %d (%s)", k, out.diagnostics.get("status"))
                break
            motion = float(np.max(np.abs(out.v)) * self.config.dt_s)
            if motion < self.config.settle_tol_rad:
                break
        else:
            log.warning("SEIKO retargeting reset: posture still moving %.2e per step after %d settling steps", motion, k)
        self._init_ratio = 0.0
        return k, motion

    def step(self, targets: Mapping[str, pin.SE3] | None = None,
             normal_force_rates: Mapping[str, float] | None = None) -> RetargetingOutput:
        """One Retargeting step: solve QP (9) and integrate (seiko.md §4.1-4.4, §7.2-7.4).

        Args:
            targets: effector name -> world pose target (pin.SE3) for **disabled** effectors;
                missing effectors keep their last target; targets of enabled effectors are
                ignored (their contact pose is fixed).
            normal_force_rates: effector -> normal-force velocity command [N/s] for contacts in
                pushing mode, consumed this step only (missing = 0). A non-finite rate or one
                above ``max_push_rate_command_n_per_s`` is refused (logged, counted in
                ``n_refused``) and replaced by 0; a rate for an effector not in pushing mode is
                ignored.

        Returns:
            RetargetingOutput. On QP failure: ``ok=False``, zero rates, state unchanged, a
            warning logged; never raises for a failed solve.

        Raises:
            ConfigError: unknown effector name, a target that is not a pin.SE3, or step before
                reset.
        """
        self._n_steps += 1
        if not self._reset_done:
            raise ConfigError("SeikoRetargeting.step called before reset()")
        if targets:
            for k, T in targets.items():
                if k not in self._enabled:
                    raise ConfigError(f"unknown effector {k!r}; expected one of {', '.join(self._names)}")
                if not isinstance(T, pin.SE3):
                    raise ConfigError(f"target of {k!r} must be a pin.SE3, got {type(T).__name__}")
                if not self._enabled[k]:
                    self._targets[k] = T
        cfg = self.config
        dt, inv_dt = cfg.dt_s, self._inv_dt
        self._pre_step(normal_force_rates or {})
        nv = self._nv
        model, data, q = self.model, self.data, self._q
        theta = q[7:]
        lam = self._lam_flat[self._flat_idx]  # the enabled contacts' wrenches, stacked

        # Kinematics and equilibrium terms at (q, lam): compiled (RetargetingConfig.kernel) or pinocchio's
        # Python bindings, the same values
        kin = self._kin
        if kin is not None:
            kin.compute(q)
            A_G, r, dr_dq, JT = kin.A_G, kin.r, kin.dr_dq, kin.J.T
        else:
            A_G = pin.computeCentroidalMap(model, data, q)
            terms = equilibrium_terms(model, data, q, self._on_specs, self._on_lams, self._on_R_c)
            r, dr_dq, JT = terms.r, terms.dr_dq, terms.J.T
        tau0 = r[6:]
        # Cost rows that change, A_d x ~ b_d with neg_b_d = -b_d stored: (a) centroidal momentum (b = 0)
        A_d, neg_b_d, lo_hi = self._A_d, self._neg_b_d, self._lo_hi
        A_d[0:6, :nv] = A_G
        # (d), (e) pose tasks and (9h) contact equalities
        oMf, targets = data.oMf, self._targets
        for i, (k, fid, mode, row, row_eq, clamp_pos, clamp_rot, target) in enumerate(self._pose_rows):
            if kin is not None:
                J, M = kin.J_frames[i], kin.poses[i]
            else:
                J, M = effector_jacobian_world(model, data, fid), oMf[fid]
            if target is None:  # disabled: this step's target
                Tg = targets[k]
                t_g, R_g = Tg.translation, Tg.rotation
            else:  # enabled: the contact pose, fixed while enabled
                t_g, R_g = target
            err = pose_error_world(t_g, R_g, M, self._pose_err)  # [p_t - p; log3(R_t R^T)]
            p_err, r_err = err[:3], err[3:]
            if mode == FREE:
                A_d[row : row + 6, :nv] = J
                clamp_norm(p_err, clamp_pos, -dt, out=neg_b_d[row : row + 3])  # -clampNorm(e)/dt
                clamp_norm(r_err, clamp_rot, -dt, out=neg_b_d[row + 3 : row + 6])
            elif mode == PLANE_ON:
                self._A_c[row_eq : row_eq + 6, :nv] = J
                lo_hi[:, row_eq : row_eq + 6] = err * inv_dt
            else:  # enabled point: orientation task (e), position equality (9h)
                A_d[row : row + 3, :nv] = J[3:]
                clamp_norm(r_err, clamp_rot, -dt, out=neg_b_d[row : row + 3])
                self._A_c[row_eq : row_eq + 3, :nv] = J[:3]
                lo_hi[:, row_eq : row_eq + 3] = p_err * inv_dt
        # (9g) base rows of the equilibrium and the joint rows T_J of (9j), adjacent in A_c: T =
        # [dr/dq | -J^T] in two writes
        A_T = self._A_c_T
        A_T[:, :nv] = dr_dq
        np.negative(JT, out=A_T[:, nv:])
        self._lo_hi_base[:] = r[:6] * -inv_dt
        # (f) torque task T_J x + tau0/dt -> 0 and (9j) -tau_max <= tau0 + dt T_J x <= tau_max:
        # the same rows T_J
        T_J = self._T_J
        T_J[:] = A_T[6:]
        self._neg_b_d_tau[:] = tau0 * inv_dt
        np.subtract(self._tau_lims, tau0, out=self._lo_hi_tau)
        self._lo_hi_tau *= inv_dt
        # (9i) position bounds, limited to the velocity bounds so the QP stays feasible when
        # theta starts outside [theta_min, theta_max] (no effect inside), with (9l)
        lb_ub = self._lb_ub_theta
        np.subtract(self._theta_lims, theta, out=lb_ub)
        lb_ub *= inv_dt
        np.maximum(lb_ub, self._neg_vel_lim, out=lb_ub)
        np.minimum(lb_ub, self._vel_lim, out=lb_ub)
        # (9m) wrench-rate bounds (disabling contacts: ramp-in and taper, EffectorParams) and
        # (9k) contact constraints C (lam + dt lam_dot) + c >= 0: its general rows as one-sided
        # rows, its unit rows (normal-force bounds) merged into the bounds of lam_dot
        self._disabling_rate_bounds(lam)
        if self._m:
            ng, m = self._n_gen, self._m
            v = self._Q.dot(lam)
            v += self._q0
            self._lo_contact[:] = v[:ng]
            np.maximum(self._neg_rate, v[ng : ng + m], out=self._lb_ub_lam[0])
            np.minimum(self._lam_rate_lim, v[ng + m :], out=self._lb_ub_lam[1])

        # H = (W^1/2 A_d)^T (W^1/2 A_d) + the constant diagonal of the identity rows (b, c, g) and
        # the regularisation (exactly symmetric); g = -A^T W b
        qp = self._qp
        H, g = qp.H, qp.g
        A_d_s = np.multiply(A_d, self._sqrt_wd, out=self._A_d_s)
        np.matmul(A_d_s.T, A_d_s, out=H)
        H += self._Hdiag
        np.dot(A_d.T, np.multiply(self._wd, neg_b_d, out=self._wb_d), out=g)  # (np.dot: less overhead than matmul)
        # (c) posture target: b = clip(theta_t - theta, c_theta)/dt on identity rows of weight w_pos
        b_c = self._theta_target - theta
        np.maximum(b_c, -cfg.joint_pos_clamp_rad, out=b_c)
        np.minimum(b_c, cfg.joint_pos_clamp_rad, out=b_c)
        b_c *= cfg.joint_pos_weight * inv_dt
        g[6:nv] -= b_c
        # (g) wrench target: b = (lam_t - lam)/dt on identity rows of weight w_lam
        if self._m:
            b_g = self._lam_target_flat[self._flat_idx]
            b_g -= lam
            b_g *= self._w_lam_inv_dt
            g[nv:] -= b_g
        lo, hi = qp.lo, qp.hi  # (the rows of lo_hi; unpacking the array would iterate it)
        t0 = time.perf_counter()
        sol = qp.solve(solver=cfg.qp_solver, reg=0.0)  # contactflow.qp.BoxQP: the buffers filled above
        solve_time = time.perf_counter() - t0
        if self.qp_hook is not None:
            self.qp_hook(H, g, self._A_c, lo, hi, qp.lb, qp.ub, sol)
        diag = {
            "status": sol.status,
            "message": sol.message,
            "solve_time_s": solve_time,
            "eq_residual": sol.eq_residual,
            "ineq_violation": sol.ineq_violation,
            "n_active": sol.n_active,
            "n_var": self._nx,
            "n_eq": self._n_eq,
            "n_in": self._n_in_paper,
            "n_rows": len(lo) - self._n_eq,
            "n_bounds": self._nx - 6,
            "init_ratio": self._init_ratio,
        }
        if not sol.found:
            log.warning("SEIKO retargeting QP failed (%s): %s; holding the last posture", sol.status, sol.message)
            return self._output(np.zeros(nv), self._zero_rates(), False, diag)

        # §4.4 post-processing: rates clamped to (9l), (9m)
        x = sol.x.copy()
        np.maximum(x, self._x_clip[0], out=x)
        np.minimum(x, self._x_clip[1], out=x)
        self._tau = tau0 + dt * T_J.dot(x)
        ratio = self._init_ratio
        if ratio != 1.0:
            x *= ratio
            self._init_ratio = min(1.0, ratio + dt / cfg.init_ramp_s)
        v = x[:nv]
        q_new = pin.integrate(model, q, dt * v)
        q_theta = q_new[7:]
        np.maximum(q_theta, self._theta_min, out=q_theta)
        np.minimum(q_theta, self._theta_max, out=q_theta)
        self._q = q_new
        rates = {}
        enabled = self._enabled
        for k, _, dim in self._effectors:
            if enabled[k]:
                col = nv + self._col[k]
                rates[k] = rate_k = x[col : col + dim].copy()
                self._lam[k] += dt * rate_k
            else:
                rates[k] = np.zeros(dim)
        self._post_step()
        return self._output(v, rates, True, diag)

    # ------------------------------------------------------------------ internals

    @property
    def q(self) -> np.ndarray:
        """(nq,) current desired posture (copy)."""
        return self._q.copy()

    def _zero_rates(self) -> dict[str, np.ndarray]:
        return {k: np.zeros(c.dim) for k, c in zip(self._names, self._specs)}

    def _output(self, v: np.ndarray, lam_dot: dict, ok: bool, diag: dict) -> RetargetingOutput:
        q = self._q.copy()
        model, data = self.model, self.data
        pin.forwardKinematics(model, data, q)
        enabled, fz_min, disabling = self._enabled, self._fz_min, self._disabling
        fz_min_desired = self._fz_min_desired
        poses, lam, lam_target, switching = {}, {}, {}, {}
        # lam, lam_target: views of one copy each of the state rows (a disabled effector's rows are 0)
        rows = self._wrench_rows.copy()
        for i, (k, frame_id, dim) in enumerate(self._effectors):
            poses[k] = pin.updateFramePlacement(model, data, frame_id).copy()
            on = enabled[k]
            lam[k] = rows[0, i, :dim]
            lam_target[k] = rows[1, i, :dim]
            switching[k] = ("disabling" if disabling[k] else "enabling" if on and fz_min[k] < fz_min_desired[k] else "")
        cfg = self.config
        return RetargetingOutput(
            q=q,
            v=v,  # a view of this step's own array (never written afterwards)
            theta_ahead=q[7:] + cfg.ahead_time_s * v[6:],
            tau=self._tau.copy(),
            lam=lam,
            lam_dot=lam_dot,
            enabled=dict(enabled),
            poses=poses,
            ok=ok,
            diagnostics=diag,
            switching=switching,
            push=dict(self._push),
            lam_target=lam_target,
            fz_min=dict(self._fz_min),
        )
