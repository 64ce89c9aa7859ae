"""Smoothed time-stepping contact dynamics of PRIME and its analytic derivatives.

Time stepping (PRIME §III-A, semi-implicit Euler)::

    q+ = q (+) dt v+,        M(q)(v+ - v) = dt (B u - h(q, v)) + sum_i J_i(q)^T Lambda_i

with the contact impulses ``Lambda_i`` of point contacts on a flat ground (normal e_z, tangents
e_x, e_y) given by the smoothed, Anitescu-relaxed second-order-cone contact problem (PRIME
§III-C, the ``min_{v+}`` problem; Pang et al. 2023)::

    v+ = argmin_v  1/2 ||v - v_free||^2_M - (1/kappa) sum_i log(w_i0^2 - ||w_i,t||^2),
    w_i = G_i v + e_i,  G_i = [J_n,i / mu; J_x,i; J_y,i],  e_i = [phi_i / (dt mu), 0, 0],

solved by damped Newton with a backtracking line search that stays inside the cones. The dual
variables ``lam_i = (2/kappa) wbar_i / s_i`` (``wbar = (w0, -w1, -w2)``, ``s = w0^2 - |w_t|^2``)
give the impulse in world, ``Lambda_i = [lam_i1, lam_i2, lam_i0 / mu]`` [N s] (the paper's
``lambda^n = 2 (phi/dt + J_n v+) / (mu^2 kappa s)``), and the force ``f_i = Lambda_i / dt`` [N];
``|Lambda_t| <= mu Lambda_n`` holds by construction and ``lam_i . w_i = 2/kappa`` (central path).

Derivatives (PRIME §IV-E) follow from the implicit function theorem on the stationarity residual

    F(v+; q, v, u, theta) = dt [RNEA(q, v, (v+ - v)/dt; theta) - B u] - sum_i G_i(q)^T lam_i(w_i(q, v+)) = 0,

``dv+/dp = -H^-1 dF/dp`` with ``H = dF/dv+ = M + sum_i G_i^T D_i G_i`` (the Newton Hessian at
the solution, ``D_i = -d lam_i / d w_i``). Configuration derivatives are in the tangent space
(pinocchio's ``integrate``/``difference`` convention). Inertial parameters of chosen bodies are
log-Cholesky vectors (:mod:`contactflow.prime.inertia`), ``dF/dtheta = dt Y dpi/dtheta`` with the
joint-torque regressor ``Y``.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Sequence

import numpy as np
import pinocchio as pin
from scipy.linalg import cho_factor, cho_solve

from contactflow.errors import ConfigError, ModelError, SolverError
from contactflow.prime.inertia import dpi_dtheta, inertia_from_theta, theta_from_inertia

__all__ = ["ContactPoint", "ContactStepConfig", "StepResult", "StepDerivatives", "SmoothContactDynamics"]

log = logging.getLogger(__name__)

_SIGN = np.array([1.0, -1.0, -1.0])
_NEWTON_FULL_STEP = 1e-6  # squared Newton decrement below which full Newton steps are taken


@dataclasses.dataclass(frozen=True)
class ContactPoint:
    """A contact point (sphere of radius ``radius_m`` centred on a frame) on the flat ground z = 0.

    Attributes:
        name: contact name (used in stream layouts: ``force.<name>``).
        frame: pinocchio frame name (the sphere centre).
        frame_id: pinocchio frame index.
        radius_m: sphere radius [m]; the gap is ``phi = z_frame - radius - ground_height``.
    """

    name: str
    frame: str
    frame_id: int
    radius_m: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class ContactStepConfig:
    """Parameters of the smoothed contact step.

    Attributes:
        dt_s: time step [s] (paper: 0.01).
        kappa: barrier stiffness (paper default 500); larger = stiffer, less force at a distance.
        mu: friction coefficient [-].
        ground_height_m: height of the flat ground [m].
        newton_tol: stop when the squared Newton decrement is below this [kg m^2/s^2].
        newton_max_iter: Newton iteration limit.
        feasible_margin_mps: cone margin of the fallback feasible start [m/s].
    """

    dt_s: float = 0.01
    kappa: float = 500.0
    mu: float = 0.8
    ground_height_m: float = 0.0
    newton_tol: float = 1e-18
    newton_max_iter: int = 100
    feasible_margin_mps: float = 0.01

    def __post_init__(self):
        if not self.dt_s > 0:
            raise ConfigError(f"dt_s must be > 0, got {self.dt_s}")
        if not self.kappa > 0:
            raise ConfigError(f"kappa must be > 0, got {self.kappa}")
        if not self.mu > 0:
            raise ConfigError(f"mu must be > 0, got {self.mu}")
        if self.newton_max_iter < 1:
            raise ConfigError("newton_max_iter must be >= 1")


@dataclasses.dataclass
class StepResult:
    """One smoothed contact step (and the cache its derivatives reuse).

    Attributes:
        q, v, u, theta: the inputs: (nq,) [m, -, rad], (nv,) base frame [m/s, rad/s], (n,) [N m],
            (10 nb,) log-Cholesky parameters.
        q_next: (nq,) next configuration.
        v_next: (nv,) next velocity.
        impulse_W: (nc, 3) contact impulses on the robot in world [N s].
        force_W: (nc, 3) mean contact forces over the step in world [N].
        newton_iters: Newton iterations used.
        converged: Newton decrement below tolerance.
    """

    q: np.ndarray
    v: np.ndarray
    u: np.ndarray
    theta: np.ndarray
    q_next: np.ndarray
    v_next: np.ndarray
    impulse_W: np.ndarray
    force_W: np.ndarray
    newton_iters: int
    converged: bool
    # cache
    M: np.ndarray = dataclasses.field(repr=False, default=None)
    G: np.ndarray = dataclasses.field(repr=False, default=None)  # (nc, 3, nv)
    J_loc: np.ndarray = dataclasses.field(repr=False, default=None)  # (nc, 6, nv) LOCAL frame Jacobians
    R: np.ndarray = dataclasses.field(repr=False, default=None)  # (nc, 3, 3) frame rotations
    w: np.ndarray = dataclasses.field(repr=False, default=None)  # (nc, 3)
    chol: tuple = dataclasses.field(repr=False, default=None)


@dataclasses.dataclass
class StepDerivatives:
    """Jacobians of one step; configuration perturbations are tangent vectors (nv,).

    Attributes:
        dv_dq, dv_dv: (nv, nv); dv_du: (nv, n); dv_dtheta: (nv, ntheta) of ``v_next``.
        dq_dq, dq_dv: (nv, nv); dq_du: (nv, n); dq_dtheta: (nv, ntheta) of ``q_next`` (tangent at q_next).
    """

    dv_dq: np.ndarray
    dv_dv: np.ndarray
    dv_du: np.ndarray
    dv_dtheta: np.ndarray
    dq_dq: np.ndarray
    dq_dv: np.ndarray
    dq_du: np.ndarray
    dq_dtheta: np.ndarray


def _chol(H: np.ndarray):
    """Cholesky factor of the SPD matrix H, with a growing diagonal shift if round-off breaks it
    (extreme iterates of the estimator: a barrier term near the cone boundary or a near-singular
    identified inertia)."""
    try:
        return cho_factor(H, check_finite=False)
    except np.linalg.LinAlgError:
        pass
    if not np.all(np.isfinite(H)):
        raise SolverError("smoothed contact step: non-finite Hessian", status="nonfinite")
    shift = 1e-12 * max(float(np.max(np.abs(np.diag(H)))), 1e-12)
    for _ in range(30):
        try:
            return cho_factor(H + shift * np.eye(H.shape[0]), check_finite=False)
        except np.linalg.LinAlgError:
            shift *= 10.0
    raise SolverError("smoothed contact step: Hessian not positive definite", status="not_pd")


def _soc_s(w: np.ndarray) -> np.ndarray:
    """``s = w0^2 - |w_t|^2`` computed as ``(w0 - |w_t|)(w0 + |w_t|)`` (no cancellation near the boundary)."""
    r = np.sqrt(w[:, 1] * w[:, 1] + w[:, 2] * w[:, 2])
    return (w[:, 0] - r) * (w[:, 0] + r)


class SmoothContactDynamics:
    """PRIME's smoothed contact step ``(q, v, u; theta) -> (q+, v+, Lambda)`` with IFT derivatives.

    Args:
        model: pinocchio free-flyer model (copied; its ``armature`` is used as is). The actuated
            joints are the last ``nv - 6`` velocity coordinates (``B = [0; I]``).
        points: contact points.
        config: step parameters.
        param_joints: names of the joints whose body inertias are identified (e.g. ``root_joint``
            for the trunk); the parameter vector is their log-Cholesky vectors stacked in this order.

    Raises:
        ModelError: unknown joint or frame, or a nominal inertia that is not physically consistent.
    """

    def __init__(self, model: pin.Model, points: Sequence[ContactPoint], config: ContactStepConfig,
                 param_joints: Sequence[str] = ()):
        self.model = model.copy()
        self.data = self.model.createData()
        self.points = tuple(points)
        self.config = config
        self.kappa = float(config.kappa)
        self.nq, self.nv = self.model.nq, self.model.nv
        self.nu = self.nv - 6
        self.nc = len(self.points)
        for p in self.points:
            if not (0 <= p.frame_id < self.model.nframes) or self.model.frames[p.frame_id].name != p.frame:
                raise ModelError(f"contact point {p.name!r}: frame {p.frame!r} (id {p.frame_id}) not in the model")
        self.param_joints = tuple(param_joints)
        self.param_joint_ids = []
        for j in self.param_joints:
            if not self.model.existJointName(j):
                raise ModelError(f"identified body: no joint {j!r} in the model")
            self.param_joint_ids.append(self.model.getJointId(j))
        self.ntheta = 10 * len(self.param_joint_ids)
        self.theta_nominal = np.concatenate(
            [theta_from_inertia(self.model.inertias[j]) for j in self.param_joint_ids]
        ) if self.param_joint_ids else np.zeros(0)
        self._frames = [self.model.frames[p.frame_id] for p in self.points]
        self._radius = np.array([p.radius_m for p in self.points])
        self._zeros_nv = np.zeros(self.nv)

    # ------------------------------------------------------------------ parameters
    def set_theta(self, theta: np.ndarray | None) -> np.ndarray:
        """Write the bodies' inertias from ``theta`` (10 nb,) into the model; None = nominal."""
        if theta is None:
            theta = self.theta_nominal
        theta = np.asarray(theta, dtype=float)
        for b, j in enumerate(self.param_joint_ids):
            self.model.inertias[j] = inertia_from_theta(theta[10 * b : 10 * b + 10])
        return theta

    # ------------------------------------------------------------------ step
    def _kinematics(self, q):
        m, d = self.model, self.data
        pin.computeJointJacobians(m, d, q)
        pin.updateFramePlacements(m, d)
        nc = self.nc
        J_loc = np.empty((nc, 6, self.nv))
        R = np.empty((nc, 3, 3))
        z = np.empty(nc)
        for i, p in enumerate(self.points):
            J_loc[i] = pin.getFrameJacobian(m, d, p.frame_id, pin.LOCAL)
            oMf = d.oMf[p.frame_id]
            R[i] = oMf.rotation
            z[i] = oMf.translation[2]
        return J_loc, R, z

    def step(self, q: np.ndarray, v: np.ndarray, u: np.ndarray, theta: np.ndarray | None = None,
             v_guess: np.ndarray | None = None) -> StepResult:
        """One smoothed contact step.

        Args:
            q: (nq,) configuration [m, quaternion xyzw, rad].
            v: (nv,) velocity (base twist in the base frame) [m/s, rad/s].
            u: (n,) joint torques applied over the step [N m].
            theta: (10 nb,) log-Cholesky parameters of the identified bodies (None = nominal).
            v_guess: (nv,) warm start for Newton (e.g. the previous solution).

        Returns:
            StepResult.

        Raises:
            SolverError: no point inside the friction cones could be found (a contact Jacobian
                without enough rank to lift the feet out of penetration).
        """
        cfg = self.config
        dt, mu, kappa = cfg.dt_s, cfg.mu, self.kappa
        m, d = self.model, self.data
        theta = self.set_theta(theta)
        M = pin.crba(m, d, q)
        M = np.triu(M) + np.triu(M, 1).T
        h = pin.nle(m, d, q, v)
        J_loc, R, z = self._kinematics(q)
        J_lin = np.einsum("iab,ibn->ian", R, J_loc[:, :3, :])  # LWA linear Jacobians (nc, 3, nv)
        G = np.empty_like(J_lin)
        G[:, 0] = J_lin[:, 2] / mu
        G[:, 1] = J_lin[:, 0]
        G[:, 2] = J_lin[:, 1]
        phi = z - self._radius - cfg.ground_height_m
        e = np.zeros((self.nc, 3))
        e[:, 0] = phi / (dt * mu)
        Gs = G.reshape(3 * self.nc, self.nv)
        Bu = np.zeros(self.nv)
        Bu[6:] = u
        Mv_free = M @ v + dt * (Bu - h)
        v_free = np.linalg.solve(M, Mv_free)

        def wfun(x):
            return (Gs @ x).reshape(self.nc, 3) + e

        def inside(w):
            if self.nc == 0:
                return True
            return w[:, 0].min() > 0.0 and _soc_s(w).min() > 0.0

        def cost(x, w):
            dx = x - v_free
            s = _soc_s(w)
            return 0.5 * dx @ (M @ dx) - np.log(s).sum() / kappa

        x = None
        if self.nc == 0:
            x = v_free
        for cand in (v_guess, v_free, v):
            if x is None and cand is not None and inside(wfun(cand)):
                x = np.array(cand, dtype=float)
        if x is None:
            x = self._feasible_start(M, Gs, e, v_free)
            if not inside(wfun(x)):
                raise SolverError("smoothed contact step: no velocity inside the friction cones found "
                                  f"(gaps {np.round(phi, 4).tolist()} m)", status="infeasible_start")
        w = wfun(x)
        c = cost(x, w)
        converged = False
        it = 0
        eyeS = np.diag(_SIGN)[None]
        for it in range(1, cfg.newton_max_iter + 1):
            s = _soc_s(w)
            wbar = w * _SIGN
            lam = (2.0 / kappa) * wbar / s[:, None]
            g = M @ (x - v_free) - Gs.T @ lam.reshape(-1)
            D = (4.0 / kappa) * (wbar[:, :, None] * wbar[:, None, :]) / (s**2)[:, None, None]
            D -= (2.0 / kappa) * (1.0 / s)[:, None, None] * eyeS
            H = M + Gs.T @ np.matmul(D, G).reshape(3 * self.nc, self.nv)
            chol = _chol(H)
            dx = -cho_solve(chol, g, check_finite=False)
            dec2 = -g @ dx
            if dec2 < _NEWTON_FULL_STEP:
                # quadratic-convergence region: full steps (an Armijo test is below round-off here)
                xt = x + dx
                wt = wfun(xt)
                if inside(wt):
                    x, w = xt, wt
                    c = cost(x, w)
                    if dec2 < cfg.newton_tol:
                        converged = True
                        break
                    continue
            t = 1.0
            ok = False
            while t > 1e-12:
                xt = x + t * dx
                wt = wfun(xt)
                if inside(wt):
                    ct = cost(xt, wt)
                    if ct <= c - 1e-4 * t * dec2:
                        ok = True
                        break
                t *= 0.5
            if not ok:
                converged = dec2 < 1e-10
                break
            x, w, c = xt, wt, ct
        if not converged:
            log.debug("smoothed contact step: Newton not converged after %d iterations", it)
        # final dual variables and Hessian at the solution (for the IFT)
        s = _soc_s(w)
        wbar = w * _SIGN
        lam = (2.0 / kappa) * wbar / s[:, None]
        D = (4.0 / kappa) * (wbar[:, :, None] * wbar[:, None, :]) / (s**2)[:, None, None]
        D -= (2.0 / kappa) * (1.0 / s)[:, None, None] * np.diag(_SIGN)[None]
        H = M + Gs.T @ np.matmul(D, G).reshape(3 * self.nc, self.nv)
        chol = _chol(H)
        impulse = np.stack([lam[:, 1], lam[:, 2], lam[:, 0] / mu], axis=1)
        q_next = pin.integrate(m, q, dt * x)
        res = StepResult(
            q=np.array(q, dtype=float), v=np.array(v, dtype=float), u=np.array(u, dtype=float), theta=theta.copy(),
            q_next=q_next, v_next=x, impulse_W=impulse, force_W=impulse / dt, newton_iters=it, converged=converged,
            M=M, G=G, J_loc=J_loc, R=R, w=w, chol=chol,
        )
        res._D = D  # noqa: SLF001 - cache for derivatives
        return res

    def _feasible_start(self, M, Gs, e, v_free):
        """Velocity closest to ``v_free`` (in the M metric) with every w_i = [margin, 0, 0]."""
        nc = self.nc
        target = np.zeros((nc, 3))
        target[:, 0] = self.config.feasible_margin_mps
        b = (target - e).reshape(-1)
        Minv_Gt = np.linalg.solve(M, Gs.T)
        A = Gs @ Minv_Gt
        A += 1e-10 * np.trace(A) / A.shape[0] * np.eye(A.shape[0])
        return v_free + Minv_Gt @ np.linalg.solve(A, b - Gs @ v_free)

    # ------------------------------------------------------------------ derivatives
    def derivatives(self, r: StepResult) -> StepDerivatives:
        """Analytic Jacobians of :meth:`step` by the implicit function theorem (PRIME §IV-E).

        Args:
            r: the result of :meth:`step` (its cache is reused: Newton Hessian factor, Jacobians).

        Returns:
            StepDerivatives (tangent-space configuration derivatives).
        """
        cfg = self.config
        dt, mu = cfg.dt_s, cfg.mu
        m, d = self.model, self.data
        self.set_theta(r.theta)
        q, v, vn = r.q, r.v, r.v_next
        nv, nc = self.nv, self.nc
        a = (vn - v) / dt
        # external forces at the joints from the impulses (local frame), for RNEA derivatives
        fext = pin.StdVec_Force()
        for _ in range(m.njoints):
            fext.append(pin.Force.Zero())
        f_loc = np.einsum("iba,ib->ia", r.R, r.impulse_W)  # R^T Lambda (nc, 3) [N s]
        for i, fr in enumerate(self._frames):
            fext[fr.parentJoint] += fr.placement.act(pin.Force(f_loc[i] / dt, np.zeros(3)))
        dtau_dq, dtau_dv, _ = pin.computeRNEADerivatives(m, d, q, v, a, fext)
        dtau_dq = np.array(dtau_dq)
        dtau_dv = np.array(dtau_dv)
        if self.ntheta:
            Y = np.array(pin.computeJointTorqueRegressor(m, d, q, v, a))
        # d(J v+)/dq of each point (LWA linear), via LOCAL velocity derivatives (LWA variant is wrong)
        pin.computeForwardKinematicsDerivatives(m, d, q, vn, self._zeros_nv)
        Fq = dt * dtau_dq
        D = r._D  # noqa: SLF001
        for i, p in enumerate(self.points):
            dvloc_dq = np.asarray(pin.getFrameVelocityDerivatives(m, d, p.frame_id, pin.LOCAL)[0])[:3]
            Jl, Ja = r.J_loc[i, :3], r.J_loc[i, 3:]
            Ri = r.R[i]
            v_loc = Jl @ vn
            dvW_dq = Ri @ dvloc_dq - Ri @ (pin.skew(v_loc) @ Ja)
            Jn = Ri[2] @ Jl
            dw_dq = np.empty((3, nv))
            dw_dq[0] = (dvW_dq[2] + Jn / dt) / mu
            dw_dq[1] = dvW_dq[0]
            dw_dq[2] = dvW_dq[1]
            Fq += r.G[i].T @ (D[i] @ dw_dq)
            Fq -= Jl.T @ (pin.skew(f_loc[i]) @ Ja)
        Fv = dt * dtau_dv - r.M
        blocks = [Fq, Fv]
        if self.ntheta:
            for b, j in enumerate(self.param_joint_ids):
                blocks.append(dt * Y[:, 10 * (j - 1) : 10 * j] @ dpi_dtheta(r.theta[10 * b : 10 * b + 10]))
        rhs = np.concatenate(blocks, axis=1)
        sol = -cho_solve(r.chol, rhs, check_finite=False)
        dv_dq = sol[:, :nv]
        dv_dv = sol[:, nv : 2 * nv]
        dv_dtheta = sol[:, 2 * nv :]
        dv_du = dt * cho_solve(r.chol, np.eye(nv)[:, 6:], check_finite=False)
        Jq0 = pin.dIntegrate(m, q, dt * vn, pin.ArgumentPosition.ARG0)
        Jq1 = pin.dIntegrate(m, q, dt * vn, pin.ArgumentPosition.ARG1)
        return StepDerivatives(
            dv_dq=dv_dq, dv_dv=dv_dv, dv_du=dv_du, dv_dtheta=dv_dtheta,
            dq_dq=Jq0 + dt * Jq1 @ dv_dq, dq_dv=dt * Jq1 @ dv_dv, dq_du=dt * Jq1 @ dv_du,
            dq_dtheta=dt * Jq1 @ dv_dtheta,
        )
