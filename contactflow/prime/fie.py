"""PRIME's parameter full-information estimation (PFIE) solved with crocoddyl's FDDP.

The MAP problem (PRIME §IV-A/B, problem (PFIE))::

    min  Gamma(x_0, theta) + sum_k ||delta^x_k||^2_{Cov_x^-1} + sum_k ||delta^y_k||^2_{Cov_y^-1}
    s.t. x_{k+1} = F(x_k, u_k; theta) (+) delta^x_k,   y_k = Meas(x_k) (+) delta^y_k

is written as an optimal-control problem over the horizon (PRIME §IV-C/D):

* state ``z_k = [dq_k (nv), v_k (nv), theta (10 nb)]``: the configuration as a tangent offset from
  the measurement, ``q_k = q_meas,k (+) dq_k`` (so the state space is Euclidean), the velocity
  and the log-Cholesky inertial parameters of the identified bodies, a constant augmented state
  (``theta_{k+1} = theta_k``);
* control ``[tau_k (n), w_k (2 nv)]``: joint torques and the process noise ``delta^x_k``, added in
  the chart of the next measurement: ``dq_{k+1} = (q_meas,k+1)^-1 (-) q+ + w_q``, ``v_{k+1} = v+ + w_v``
  with ``(q+, v+)`` the smoothed contact step (:class:`~contactflow.prime.contact.SmoothContactDynamics`);
* running cost ``1/2 (sum w_q dq^2 + w_v (v - v_meas)^2 + w_tau (tau - tau_meas)^2 + w_proc w^2)``
  (the measurement residuals ``delta^y`` and the process noise ``delta^x``), terminal cost on
  ``dq_T, v_T``;
* a prior node before ``z_0``: ``z_0 = zbar + u_prior`` with cost ``1/2 u_prior^T P u_prior``, which
  frees the initial state and the parameters (FDDP fixes its initial state) and carries the
  arrival cost ``Gamma`` and the parameter regulariser ``||theta - theta_0||^2``.

Cost weights default to PRIME's Table V (the coefficient multiplies ``1/2 ||r||^2``); the
process-noise weights are not given in the paper (defaults from the prototype, see
``shared/reference/prime.md`` §3).
"""

from __future__ import annotations

import ctypes
import dataclasses
import logging
import os
import time
from typing import Callable, Sequence

import crocoddyl
import numpy as np
import pinocchio as pin

from contactflow.errors import ConfigError, ContractError, SolverError
from contactflow.prime.contact import ContactStepConfig, SmoothContactDynamics
from contactflow.prime.inertia import describe_inertia, inertia_from_theta
from contactflow.prime.model import PrimeRobot

__all__ = ["PrimeWeights", "PrimeConfig", "Measurements", "PrimeResult", "PrimeEstimator", "IterationInfo"]

log = logging.getLogger(__name__)


def _limit_openmp_threads() -> None:
    """Run crocoddyl's Eigen kernels on one OpenMP thread unless ``OMP_NUM_THREADS`` says otherwise.

    The FDDP backward pass on PRIME's small dense blocks (nx ~ 46) is 5-40x slower with the
    default OpenMP team on a loaded machine (measured: 207 ms vs 5 ms for T = 30, 2 shared cores).
    """
    if os.environ.get("OMP_NUM_THREADS"):
        return
    try:
        ctypes.CDLL("libgomp.so.1").omp_set_num_threads(1)
    except (OSError, AttributeError):  # no GNU OpenMP runtime: nothing to limit
        pass


_limit_openmp_threads()


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrimeWeights:
    """Cost weights (each multiplies ``1/2 ||r||^2`` of its residual, SI units of the residual).

    Attributes:
        base_position, base_orientation, joint_position: measurement weights of ``dq`` (PRIME Table V).
        base_linear_velocity, base_angular_velocity, joint_velocity: measurement weights of ``v``.
        torque: measurement weight of the joint torques.
        theta: log-Cholesky regulariser ``||theta - theta_0||^2`` (prior node).
        process_q, process_v: process-noise weights on the configuration / velocity defects
            (not given in the paper; a tuning knob).
        prior_scale: prior-node weight of the initial state = prior_scale x measurement weights.
    """

    base_position: float = 4e2
    base_orientation: float = 3e1
    joint_position: float = 2e2
    base_linear_velocity: float = 1e1
    base_angular_velocity: float = 1.5e2
    joint_velocity: float = 4e1
    torque: float = 2e1
    theta: float = 4e-2
    process_q: float = 1e6
    process_v: float = 1e4
    prior_scale: float = 1.0

    def __post_init__(self):
        for f in dataclasses.fields(self):
            if not getattr(self, f.name) > 0:
                raise ConfigError(f"weights.{f.name} must be > 0, got {getattr(self, f.name)}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrimeConfig:
    """Estimator settings (``prime_estimator`` node / ``contactflow prime estimate``).

    Attributes:
        dt_s: estimator time step [s]; the recording's sample period times ``decimation``.
        kappa: final barrier stiffness (paper default 500).
        kappa_schedule: stiffnesses solved first, in order, ``schedule_iters`` FDDP iterations each,
            warm-starting the next (PRIME §VII-F); empty = solve at ``kappa`` only.
        schedule_iters: FDDP iterations per schedule stage.
        max_iter: FDDP iterations at the final ``kappa``.
        stop_threshold: stopping criterion per estimator step: crocoddyl's ``th_stop`` is
            ``stop_threshold * T`` (its ``stop`` measure sums over the nodes). 2e-4 stops the Go2
            benchmarks once the cost has settled to ~1e-4 relative (measured).
        init_reg: initial FDDP regularisation.
        identify: estimate the inertial parameters of the robot's ``identified_bodies``; False fixes
            them at their nominal values.
        decimation: use every ``decimation``-th sample of the recording (torques averaged).
        torque_sample_offset: the torque applied over ``[t_k, t_k+1]`` is the sample ``k + offset``
            (1 when the recorded torque is the mean over the interval that ends at the sample time).
        max_samples: keep at most this many estimator steps (0 = all).
        resample: interpolate the measurement stream onto the regular dt_s grid first (for irregular
            sample times, e.g. a hardware recording; contactflow.prime.io.resample_stream).
        weights: cost weights.
    """

    dt_s: float = 0.01
    kappa: float = 500.0
    kappa_schedule: tuple[float, ...] = ()
    schedule_iters: int = 5
    max_iter: int = 30
    stop_threshold: float = 2e-4
    init_reg: float = 10.0
    identify: bool = True
    decimation: int = 1
    torque_sample_offset: int = 1
    max_samples: int = 0
    resample: bool = False
    weights: PrimeWeights = dataclasses.field(default_factory=PrimeWeights)

    def __post_init__(self):
        if not self.dt_s > 0:
            raise ConfigError(f"dt_s must be > 0, got {self.dt_s}")
        if not self.kappa > 0 or any(k <= 0 for k in self.kappa_schedule):
            raise ConfigError("kappa and kappa_schedule values must be > 0")
        if not self.stop_threshold > 0:
            raise ConfigError(f"stop_threshold must be > 0, got {self.stop_threshold}")
        if self.max_iter < 0 or self.schedule_iters < 0:
            raise ConfigError("max_iter and schedule_iters must be >= 0")
        if self.decimation < 1:
            raise ConfigError(f"decimation must be >= 1, got {self.decimation}")
        if self.torque_sample_offset not in (0, 1):
            raise ConfigError(f"torque_sample_offset must be 0 or 1, got {self.torque_sample_offset}")
        if self.max_samples < 0:
            raise ConfigError("max_samples must be >= 0")


@dataclasses.dataclass
class Measurements:
    """Measured trajectory at the estimator rate.

    Attributes:
        t: (T+1,) sample times [s].
        q: (T+1, nq) configurations [m, quaternion xyzw, rad].
        v: (T+1, nv) velocities, base twist in the base frame [m/s, rad/s].
        tau: (T, n) joint torques applied over [t_k, t_k+1] [N m].
    """

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    tau: np.ndarray

    @property
    def T(self) -> int:
        return self.tau.shape[0]

    def check(self, model: pin.Model) -> None:
        """Raise ContractError naming the array and the problem (shape, non-finite, zero quaternion)."""
        T = self.tau.shape[0]
        n = model.nv - 6
        for name, arr, shape in (("t", self.t, (T + 1,)), ("q", self.q, (T + 1, model.nq)),
                                 ("v", self.v, (T + 1, model.nv)), ("tau", self.tau, (T, n))):
            if arr.shape != shape:
                raise ContractError(f"measurements.{name}: shape {arr.shape}, expected {shape}")
            bad = ~np.isfinite(arr)
            if bad.any():
                rows = np.unique(np.nonzero(bad)[0])
                raise ContractError(f"measurements.{name}: non-finite values in {rows.size} sample(s), first at index {rows[0]}")
        if T < 1:
            raise ContractError("measurements: need at least 2 samples")
        nrm = np.linalg.norm(self.q[:, 3:7], axis=1)
        if np.any(nrm < 0.5):
            raise ContractError(f"measurements.q: base quaternion with norm < 0.5 at sample {int(np.argmax(nrm < 0.5))}")
        self.q[:, 3:7] /= nrm[:, None]


@dataclasses.dataclass
class IterationInfo:
    """Progress of one FDDP iteration (passed to the progress callback)."""

    iteration: int
    kappa: float
    cost: float
    stop: float
    step: float
    mass_kg: list[float]


@dataclasses.dataclass
class PrimeResult:
    """Output of :meth:`PrimeEstimator.solve`.

    Attributes:
        t: (T+1,) times [s].
        q: (T+1, nq) refined configurations.
        v: (T+1, nv) refined velocities (base frame).
        tau: (T, n) refined torques over [t_k, t_k+1] [N m].
        force_W: (T, nc, 3) mean contact forces on the robot over [t_k, t_k+1], world [N].
        contact_names: (nc,) contact point names.
        theta: (10 nb,) identified log-Cholesky parameters (nominal when not identifying).
        theta_nominal: (10 nb,) nominal parameters.
        bodies: identified body (joint) names.
        cost: final MAP cost.
        iterations: FDDP iterations (all stages).
        converged: crocoddyl's convergence flag of the final stage.
        solve_time_s: wall time of the solve [s].
        history: per-iteration info.
        defect_norm: final dynamics infeasibility (crocoddyl ``ffeas``).
    """

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    tau: np.ndarray
    force_W: np.ndarray
    contact_names: tuple[str, ...]
    theta: np.ndarray
    theta_nominal: np.ndarray
    bodies: tuple[str, ...]
    cost: float
    iterations: int
    converged: bool
    solve_time_s: float
    history: list[IterationInfo]
    defect_norm: float
    identified: bool

    def body_parameters(self, theta: np.ndarray | None = None) -> dict[str, dict]:
        """Body -> {mass_kg, com_m, inertia_com_kgm2} of ``theta`` (default: the estimate)."""
        th = self.theta if theta is None else theta
        return {b: describe_inertia(inertia_from_theta(th[10 * i : 10 * i + 10])) for i, b in enumerate(self.bodies)}

    def report(self) -> dict:
        """JSON-able summary (identified and nominal parameters, cost, iterations, timing)."""
        return {
            "identified": self.identified,
            "bodies": self.body_parameters(),
            "bodies_nominal": self.body_parameters(self.theta_nominal),
            "theta": self.theta.tolist(),
            "theta_nominal": self.theta_nominal.tolist(),
            "cost": self.cost,
            "iterations": self.iterations,
            "converged": self.converged,
            "defect_norm": self.defect_norm,
            "solve_time_s": self.solve_time_s,
            "steps": int(self.tau.shape[0]),
            "contacts": list(self.contact_names),
            "history": [dataclasses.asdict(h) for h in self.history],
        }


# ---------------------------------------------------------------------------------- action models
class _NodeData(crocoddyl.ActionDataAbstract):
    def __init__(self, model):
        super().__init__(model)
        self.result = None
        self.v_guess = None
        self.xu = None  # (x, u) of the cached result


class _PriorModel(crocoddyl.ActionModelAbstract):
    """``z_0 = zbar + u``, cost ``1/2 u^T P u`` (arrival cost and parameter regulariser)."""

    def __init__(self, state, P: np.ndarray):
        super().__init__(state, state.nx, 0)
        self.P = P

    def calc(self, data, x, u=None):
        if u is None:
            data.cost = 0.0
            return
        data.xnext[:] = x + u
        data.cost = 0.5 * float(u @ (self.P * u))

    def calcDiff(self, data, x, u=None):
        if u is None:
            return
        nx = self.state.nx
        data.Fx[:, :] = np.eye(nx)
        data.Fu[:, :] = np.eye(nx)
        data.Lu[:] = self.P * u
        data.Luu[:, :] = np.diag(self.P)

    def createData(self):
        return _NodeData(self)


class _RunningModel(crocoddyl.ActionModelAbstract):
    """One estimator step ``k``: smoothed contact dynamics + process noise + measurement costs."""

    def __init__(self, state, dyn: SmoothContactDynamics, k: int, meas: Measurements, wx: np.ndarray,
                 wtau: float, wproc: np.ndarray, terminal: bool = False):
        nv = dyn.nv
        nu = 0 if terminal else dyn.nu + 2 * nv
        super().__init__(state, nu, 0)
        self.dyn, self.k, self.terminal = dyn, k, terminal
        self.nv, self.ntheta = nv, dyn.ntheta
        self.q_meas = meas.q[k]
        self.v_meas = meas.v[k]
        self.q_meas_next = None if terminal else meas.q[k + 1]
        self.tau_meas = None if terminal else meas.tau[k]
        self.wx = wx  # (2 nv,) weights of [dq, v - v_meas]
        self.wtau = wtau
        self.wproc = wproc  # (2 nv,)

    def _state_cost(self, x):
        nv = self.nv
        r = np.concatenate([x[:nv], x[nv : 2 * nv] - self.v_meas])
        return r

    def calc(self, data, x, u=None):
        nv = self.nv
        rx = self._state_cost(x)
        cost = 0.5 * float(rx @ (self.wx * rx))
        if self.terminal or u is None:
            data.cost = cost
            return
        dyn = self.dyn
        n = dyn.nu
        tau, w = u[:n], u[n:]
        q = pin.integrate(dyn.model, self.q_meas, x[:nv])
        theta = x[2 * nv :] if self.ntheta else None
        try:
            res = dyn.step(q, x[nv : 2 * nv], tau, theta, v_guess=data.v_guess)
        except SolverError as exc:  # an extreme trial iterate: reject it through an infinite cost
            log.warning("PRIME node %d: contact step failed (%s); trial point rejected", self.k, exc)
            data.result = None
            data.xnext[:] = np.r_[np.zeros(nv), self.v_meas, x[2 * nv :]] if self.ntheta else np.r_[np.zeros(nv), self.v_meas]
            data.cost = float("inf")
            return
        data.result = res
        data.xu = (x.copy(), u.copy())
        data.v_guess = res.v_next
        data.xnext[:nv] = pin.difference(dyn.model, self.q_meas_next, res.q_next) + w[:nv]
        data.xnext[nv : 2 * nv] = res.v_next + w[nv:]
        if self.ntheta:
            data.xnext[2 * nv :] = x[2 * nv :]
        rt = tau - self.tau_meas
        data.cost = cost + 0.5 * self.wtau * float(rt @ rt) + 0.5 * float(w @ (self.wproc * w))

    def calcDiff(self, data, x, u=None):
        nv = self.nv
        rx = self._state_cost(x)
        data.Lx[: 2 * nv] = self.wx * rx
        data.Lxx[: 2 * nv, : 2 * nv] = np.diag(self.wx)
        if self.terminal or u is None:
            return
        dyn = self.dyn
        n = dyn.nu
        res = data.result
        if res is None or not (np.array_equal(data.xu[0], x) and np.array_equal(data.xu[1], u)):
            self.calc(data, x, u)
            res = data.result
            if res is None:
                raise SolverError(f"PRIME node {self.k}: contact step failed at an accepted iterate", status="step_failed")
        D = dyn.derivatives(res)
        model = dyn.model
        Jin = pin.dIntegrate(model, self.q_meas, x[:nv], pin.ArgumentPosition.ARG1)
        Jout = pin.dDifference(model, self.q_meas_next, res.q_next, pin.ArgumentPosition.ARG1)
        Fx = data.Fx
        Fx[:nv, :nv] = Jout @ D.dq_dq @ Jin
        Fx[:nv, nv : 2 * nv] = Jout @ D.dq_dv
        Fx[nv : 2 * nv, :nv] = D.dv_dq @ Jin
        Fx[nv : 2 * nv, nv : 2 * nv] = D.dv_dv
        if self.ntheta:
            Fx[:nv, 2 * nv :] = Jout @ D.dq_dtheta
            Fx[nv : 2 * nv, 2 * nv :] = D.dv_dtheta
            Fx[2 * nv :, 2 * nv :] = np.eye(self.ntheta)
        Fu = data.Fu
        Fu[:nv, :n] = Jout @ D.dq_du
        Fu[nv : 2 * nv, :n] = D.dv_du
        Fu[: 2 * nv, n:] = np.eye(2 * nv)
        tau, w = u[:n], u[n:]
        data.Lu[:n] = self.wtau * (tau - self.tau_meas)
        data.Lu[n:] = self.wproc * w
        Luu = np.zeros((self.nu, self.nu))
        Luu[:n, :n] = self.wtau * np.eye(n)
        Luu[n:, n:] = np.diag(self.wproc)
        data.Luu[:, :] = Luu

    def createData(self):
        return _NodeData(self)


class _Progress(crocoddyl.CallbackAbstract):
    def __init__(self, est: "PrimeEstimator", fn: Callable[[IterationInfo], None] | None):
        super().__init__()
        self.est, self.fn = est, fn

    def __call__(self, solver, *args):
        est = self.est
        th = np.asarray(solver.xs[1])[2 * est.dyn.nv :]
        masses = [float(np.exp(2 * th[10 * b])) for b in range(len(est.bodies))]
        info = IterationInfo(len(est.history), est.dyn.kappa, float(solver.cost), float(solver.stop),
                             float(solver.stepLength), masses)
        est.history.append(info)
        log.info("PRIME iter %3d kappa %g cost %.6g stop %.3g step %.3g mass %s", info.iteration, info.kappa,
                 info.cost, info.stop, info.step, [round(m, 4) for m in masses])
        if self.fn is not None:
            self.fn(info)


# ---------------------------------------------------------------------------------- estimator
class PrimeEstimator:
    """PRIME estimator: builds the PFIE problem for a measured trajectory and solves it with FDDP.

    Args:
        robot: robot prepared for PRIME (:func:`contactflow.prime.model.load_prime_robot`).
        config: estimator settings.
        bodies: joints whose bodies are identified (default: the robot's ``identified_bodies``;
            ignored when ``config.identify`` is False).
        theta_nominal: (10 nb,) nominal/prior parameters (default: the model's inertias).
    """

    def __init__(self, robot: PrimeRobot, config: PrimeConfig, *, bodies: Sequence[str] | None = None,
                 theta_nominal: np.ndarray | None = None):
        self.robot = robot
        self.config = config
        self.bodies = tuple(bodies if bodies is not None else robot.config.identified_bodies) if config.identify else ()
        step_cfg = ContactStepConfig(dt_s=config.dt_s, kappa=config.kappa, mu=robot.config.mu)
        self.dyn = SmoothContactDynamics(robot.model, robot.points, step_cfg, self.bodies)
        if theta_nominal is not None:
            theta_nominal = np.asarray(theta_nominal, dtype=float)
            if theta_nominal.shape != (self.dyn.ntheta,):
                raise ContractError(f"theta_nominal: shape {theta_nominal.shape}, expected ({self.dyn.ntheta},)")
        self.theta_nominal = self.dyn.theta_nominal.copy() if theta_nominal is None else theta_nominal
        self.history: list[IterationInfo] = []
        nv = self.dyn.nv
        w = config.weights
        self.wq = np.r_[np.full(3, w.base_position), np.full(3, w.base_orientation), np.full(nv - 6, w.joint_position)]
        self.wv = np.r_[np.full(3, w.base_linear_velocity), np.full(3, w.base_angular_velocity), np.full(nv - 6, w.joint_velocity)]
        self.wproc = np.r_[np.full(nv, w.process_q), np.full(nv, w.process_v)]

    @property
    def nx(self) -> int:
        return 2 * self.dyn.nv + self.dyn.ntheta

    def build_problem(self, meas: Measurements) -> crocoddyl.ShootingProblem:
        """The shooting problem ``[prior, step_0 .. step_{T-1}] + terminal`` for ``meas``."""
        meas.check(self.dyn.model)
        nv = self.dyn.nv
        state = crocoddyl.StateVector(self.nx)
        wx = np.r_[self.wq, self.wv]
        P = np.r_[self.config.weights.prior_scale * wx, np.full(self.dyn.ntheta, self.config.weights.theta)]
        running = [_PriorModel(state, P)]
        for k in range(meas.T):
            running.append(_RunningModel(state, self.dyn, k, meas, wx, self.config.weights.torque, self.wproc))
        terminal = _RunningModel(state, self.dyn, meas.T, meas, wx, 0.0, self.wproc, terminal=True)
        x0 = np.r_[np.zeros(nv), meas.v[0], self.theta_nominal]
        problem = crocoddyl.ShootingProblem(x0, running, terminal)
        return problem

    def _check_initial_guess(self, meas: Measurements, xs: list, us: list, kappa: float) -> None:
        """Raise SolverError if the contact step fails at the initial guess.

        crocoddyl calls ``calcDiff`` of all nodes inside an OpenMP region that an exception cannot
        leave, so a node whose step failed there (``_RunningModel.calcDiff``) aborted the process;
        a trial iterate that fails later only gets an infinite cost. The check repeats the first
        ``calc`` of every node (same inputs; the step has no state besides scratch data).
        """
        nv, n = self.dyn.nv, self.dyn.nu
        kappa_solve = self.dyn.kappa
        self.dyn.kappa = float(kappa)
        try:
            for k in range(meas.T):
                x, u = np.asarray(xs[k + 1]), np.asarray(us[k + 1])
                q = pin.integrate(self.dyn.model, meas.q[k], x[:nv])
                try:
                    self.dyn.step(q, x[nv : 2 * nv], u[:n], x[2 * nv :] if self.dyn.ntheta else None)
                except SolverError as exc:
                    raise SolverError(
                        f"PRIME: the contact step fails at the initial guess of node {k} (t = {meas.t[k]:g} s): {exc}; "
                        "the measured state is outside what the smoothed contact model can step from "
                        "(e.g. sole corners below the ground)", status="step_failed") from exc
        finally:
            self.dyn.kappa = kappa_solve

    def solve(self, meas: Measurements, progress: Callable[[IterationInfo], None] | None = None,
              warm_start: tuple[list, list] | None = None) -> PrimeResult:
        """Solve the PFIE problem.

        Args:
            meas: measurements at the estimator rate.
            progress: called after every FDDP iteration with an :class:`IterationInfo`.
            warm_start: (xs, us) of a previous solve of the same problem size.

        Returns:
            PrimeResult.

        Raises:
            ContractError: malformed measurements (shape, non-finite values).
            SolverError: FDDP produced a non-finite trajectory, or the contact step fails at the
                initial guess (the node and time named).
        """
        t0 = time.perf_counter()
        cfg = self.config
        problem = self.build_problem(meas)
        nv, n = self.dyn.nv, self.dyn.nu
        T = meas.T
        if warm_start is None:
            xs = [problem.x0.copy()] + [np.r_[np.zeros(nv), meas.v[k], self.theta_nominal] for k in range(T + 1)]
            us = [np.zeros(self.nx)] + [np.r_[meas.tau[k], np.zeros(2 * nv)] for k in range(T)]
        else:
            xs, us = list(warm_start[0]), list(warm_start[1])
        self._check_initial_guess(meas, xs, us, (list(cfg.kappa_schedule) + [cfg.kappa])[0])
        solver = crocoddyl.SolverFDDP(problem)
        solver.th_stop = cfg.stop_threshold * T
        self.history = []
        solver.setCallbacks([_Progress(self, progress)])
        stages = [(k, cfg.schedule_iters) for k in cfg.kappa_schedule] + [(cfg.kappa, cfg.max_iter)]
        converged = False
        for kappa, maxiter in stages:
            self.dyn.kappa = float(kappa)
            if maxiter == 0:
                continue
            converged = solver.solve(xs, us, maxiter, False, cfg.init_reg)
            xs, us = list(solver.xs), list(solver.us)
            if not all(np.all(np.isfinite(x)) for x in xs):
                raise SolverError("PRIME: FDDP produced a non-finite trajectory", status="nonfinite")
        self.dyn.kappa = float(cfg.kappa)
        self._last = (xs, us)
        # final trajectory, torques and forces
        q = np.empty_like(meas.q)
        v = np.empty_like(meas.v)
        for k in range(T + 1):
            z = np.asarray(xs[k + 1])
            q[k] = pin.integrate(self.dyn.model, meas.q[k], z[:nv])
            v[k] = z[nv : 2 * nv]
        theta = np.asarray(xs[1])[2 * nv :].copy()
        tau = np.array([np.asarray(us[k + 1])[:n] for k in range(T)])
        forces = np.empty((T, self.dyn.nc, 3))
        guess = None
        for k in range(T):
            r = self.dyn.step(q[k], v[k], tau[k], theta if self.dyn.ntheta else None, v_guess=guess)
            forces[k] = r.force_W
        cost = float(problem.calc(xs, us))
        return PrimeResult(
            t=meas.t.copy(), q=q, v=v, tau=tau, force_W=forces, contact_names=self.robot.contact_names,
            theta=theta, theta_nominal=self.theta_nominal.copy(), bodies=self.bodies, cost=cost, iterations=len(self.history),
            converged=bool(converged), solve_time_s=time.perf_counter() - t0, history=list(self.history),
            defect_norm=float(solver.ffeas), identified=bool(self.dyn.ntheta),
        )
