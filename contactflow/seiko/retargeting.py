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
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from typing import Callable, Mapping

import numpy as np
import pinocchio as pin

from contactflow.environment import Environment
from contactflow.errors import ConfigError
from contactflow.operator.input_filter import BangBangFilter, exponential_alpha
from contactflow.qp import QP_SOLVERS, BoxQP
from contactflow.robot import ContactSpec, Robot
from contactflow.seiko.admittance import clamp_norm
from contactflow.seiko.equilibrium import contact_constraints, equilibrium_terms, pose_error_world
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

_DEG = math.pi / 180.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class EffectorParams:
    """Per-effector-type parameters of the Retargeting (seiko.md §4.1-4.6, §5.3; Talos values).

    Attributes:
        pose_weight_pos: weight of the position rows of the disabled-effector pose task (9b)
            [1/(m/s)^2 in rate form].
        pose_weight_rot: weight of its rotation rows (9b); also the weight of the enabled
            point-contact orientation task (term e) [1/(rad/s)^2].
        pose_clamp_pos_m: norm clamp of the position error of the pose tasks [m].
        pose_clamp_rot_rad: norm clamp of the rotation error of the pose tasks [rad].
        wrench_weights: (dim,) weights of the wrench task (9e), linear first: plane
            [fx, fy, fz, tx, ty, tz], point [fx, fy, fz].
        disabling_weight_scale: while a contact is being disabled its wrench weights are
            ``disabling_weight_scale * wrench_weights / max(wrench_weights)`` (seiko.md §7.4:
            1e4 on the tangential/torque components, 100 on f_z); push mode uses
            ``disabling_weight_scale * ones`` (§7.2).
        friction_mu: friction coefficient [-].
        fz_min_n: minimum normal force [N].
        fz_max_n: maximum normal force [N].
        cop_half_x_m: CoP half-length along the contact x axis [m] (planes only).
        cop_half_y_m: CoP half-length along the contact y axis [m] (planes only).
        force_rate_max_n_per_s: bound on each force-rate component (9m) [N/s].
        torque_rate_max_nm_per_s: bound on each torque-rate component (9m) [N m/s] (planes).
        disable_ramp_s: while a contact is being disabled, its rate bounds (9m) rise from 0 to
            the limits along a raised cosine over this time after the request [s]; 0 = the
            paper's step to the full limit (RA-L Supp. E). A deviation from the paper
            (docs/seiko_multicontact.md, Foot lift): the step of the desired force rate kicks a
            whole-body sway of the real robot.
        disable_taper_n: [N] below this normal force the normal-force rate bound of a disabling
            contact tapers to 0 as ``sqrt(u (2 - u))`` of ``u = f_n / disable_taper_n``, so the
            desired force reaches 0 with zero rate and a bounded second derivative (at most
            ``force_rate_max_n_per_s**2 / disable_taper_n``, 120 N/s^2 with the Talos values),
            in ``pi/2 disable_taper_n / force_rate_max_n_per_s`` s instead of
            ``disable_taper_n / force_rate_max_n_per_s`` s; 0 = the paper's constant limit. A
            disabling contact is released below ``dt`` x its (tapered) bound, or at 0 N.
    """

    pose_weight_pos: float
    pose_weight_rot: float
    pose_clamp_pos_m: float = 0.04
    pose_clamp_rot_rad: float = 10.0 * _DEG
    wrench_weights: tuple[float, ...]
    disabling_weight_scale: float = 1e4
    friction_mu: float = 0.6
    fz_min_n: float
    fz_max_n: float
    cop_half_x_m: float = 0.04
    cop_half_y_m: float = 0.03
    force_rate_max_n_per_s: float
    torque_rate_max_nm_per_s: float = 0.0
    disable_ramp_s: float = 0.0
    disable_taper_n: float = 0.0

    def __post_init__(self):
        for name in ("pose_weight_pos", "pose_weight_rot", "pose_clamp_pos_m", "pose_clamp_rot_rad",
                     "friction_mu", "force_rate_max_n_per_s", "cop_half_x_m", "cop_half_y_m"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if not (self.disable_ramp_s >= 0 and self.disable_taper_n >= 0):  # also refuses NaN
            raise ValueError("disable_ramp_s and disable_taper_n must be >= 0")
        if self.torque_rate_max_nm_per_s < 0 or self.disabling_weight_scale <= 0:
            raise ValueError("torque_rate_max_nm_per_s must be >= 0 and disabling_weight_scale > 0")
        if not 0 <= self.fz_min_n < self.fz_max_n:
            raise ValueError(f"need 0 <= fz_min_n < fz_max_n, got {self.fz_min_n}, {self.fz_max_n}")
        if len(self.wrench_weights) not in (3, 6) or min(self.wrench_weights) <= 0:
            raise ValueError("wrench_weights must hold 3 (point) or 6 (plane) values > 0")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlaneEffectorParams(EffectorParams):
    """:class:`EffectorParams` with the Talos foot (plane contact) defaults (seiko.md §4.1), except
    the disabled-foot pose weights (x10) and the disabling ramp and taper, which are contactflow's
    (docs/seiko_multicontact.md, Foot lift)."""

    # 10 x the Talos values of seiko.md §4.1 (1e5, 1e4): with those the free foot swings at
    # 0.16 rad/s for one step after its release (docs/seiko_multicontact.md, Foot lift)
    pose_weight_pos: float = 1e6
    pose_weight_rot: float = 1e5
    wrench_weights: tuple[float, ...] = (0.002, 0.002, 0.002 * 0.01, 0.002, 0.002, 0.002)
    fz_min_n: float = 100.0
    fz_max_n: float = 1000.0
    force_rate_max_n_per_s: float = 60.0
    torque_rate_max_nm_per_s: float = 0.04 * 60.0
    disable_ramp_s: float = 2.0
    disable_taper_n: float = 30.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class PointEffectorParams(EffectorParams):
    """:class:`EffectorParams` with the Talos hand (point contact) defaults."""

    pose_weight_pos: float = 5e3
    pose_weight_rot: float = 1e2
    wrench_weights: tuple[float, ...] = (0.005, 0.005, 0.005 * 0.01)
    fz_min_n: float = 10.0
    fz_max_n: float = 150.0
    force_rate_max_n_per_s: float = 10.0


def _surface_defaults() -> dict[str, tuple[float, float, float]]:
    # seiko.md §5.4: left hand R_y(-pi/2) (wall in front), right hand R_x(-pi/2) (support on the right).
    return {"left_hand": (0.0, -math.pi / 2, 0.0), "right_hand": (-math.pi / 2, 0.0, 0.0)}


@dataclasses.dataclass(frozen=True, kw_only=True)
class RetargetingConfig:
    """Parameters of :class:`SeikoRetargeting` (Talos values of seiko.md §4.1-4.6).

    Attributes:
        dt_s: step period Delta t [s].
        ahead_time_s: look-ahead of the "ahead" command theta + t theta_dot [s].
        init_ramp_s: duration of the init ratio ramp 0 -> 1 after reset [s].
        momentum_weight_lin: weight of the linear centroidal-momentum rows (term a).
        momentum_weight_ang: weight of the angular centroidal-momentum rows (term a).
        joint_vel_weight: joint-velocity regularisation weight (term b).
        joint_pos_weight: posture-target weight (term c).
        joint_pos_clamp_rad: per-joint clip of the posture error (term c) [rad].
        joint_torque_weight: torque weight W_tau of joints not matched by
            ``arm_joint_prefixes`` (term f) [1/(N m)^2].
        joint_torque_weight_arms: torque weight of the arm joints (term f).
        arm_joint_prefixes: joint-name prefixes that get ``joint_torque_weight_arms``.
        joint_vel_limit_ratio: velocity bound (9l) as a fraction of the robot's velocity limit.
        joint_torque_limit_ratio: torque bound (9j) and static-ID bound as a fraction of the
            robot's effort limit.
        plane: parameters of plane effectors (feet).
        point: parameters of point effectors (hands).
        surface_rpy_rad: effector name -> roll, pitch, yaw [rad] of the world-fixed surface frame
            R_c of a point contact; effectors not listed use their orientation when enabled.
        hessian_regularisation: absolute value added to the QP Hessian diagonal.
        enable_max_distance_m: enabling a contact is refused when the effector (its collision
            sphere) is farther than this from every surface of the environment [m] (only when
            an :class:`~contactflow.environment.Environment` is given).
        push_clamp_n: pushing mode: the normal-force reference is clamped to +- this around
            the current normal force (``clampRadiusForce``, §7.2) [N].
        push_cutoff_hz: pushing mode low-pass cut-off [Hz].
        push_max_rate_n_per_s: pushing mode bang-bang velocity bound [N/s].
        push_max_acc_n_per_s2: pushing mode bang-bang acceleration bound [N/s^2].
        max_push_rate_command_n_per_s: normal-force velocity commands above this (in absolute
            value) are refused [N/s].
        settle_at_reset: after the static inverse dynamics, step the QP without commands until the
            posture stops moving, so that the reset state is a fixed point of QP (9): with zero
            commands the Retargeting then holds its posture still from the first tick. Without
            it the torque term (9d) slowly pulls the posture away from the reset posture (about
            12 mrad on the arms for Talos) during the first seconds. The posture target (9c) stays
            the reset posture.
        settle_max_steps: maximum number of settling steps.
        settle_tol_rad: settling stops when no coordinate moves more than this in one step [rad, m].
        qp_solver: QP solver of QP (9), one of :data:`contactflow.qp.QP_SOLVERS`: ``"daqp"``
            (default, MIT) or ``"quadprog"`` (GPL, the reference; the same QP in stacked form).
    """

    dt_s: float = 0.002
    ahead_time_s: float = 0.006
    init_ramp_s: float = 2.0
    momentum_weight_lin: float = 1e-6
    momentum_weight_ang: float = 1e-6
    joint_vel_weight: float = 1000.0
    joint_pos_weight: float = 10.0
    joint_pos_clamp_rad: float = 10.0 * _DEG
    joint_torque_weight: float = 2e-5
    joint_torque_weight_arms: float = 0.005
    arm_joint_prefixes: tuple[str, ...] = ("arm_left_", "arm_right_")
    joint_vel_limit_ratio: float = 0.2
    joint_torque_limit_ratio: float = 0.65
    plane: PlaneEffectorParams = dataclasses.field(default_factory=PlaneEffectorParams)
    point: PointEffectorParams = dataclasses.field(default_factory=PointEffectorParams)
    surface_rpy_rad: dict[str, tuple[float, float, float]] = dataclasses.field(default_factory=_surface_defaults)
    hessian_regularisation: float = 1e-9
    enable_max_distance_m: float = 0.03
    push_clamp_n: float = 5.0
    push_cutoff_hz: float = 2.0
    push_max_rate_n_per_s: float = 10.0
    push_max_acc_n_per_s2: float = 100.0
    max_push_rate_command_n_per_s: float = 100.0
    settle_at_reset: bool = True
    settle_max_steps: int = 5000
    settle_tol_rad: float = 1e-9
    qp_solver: str = "daqp"

    def __post_init__(self):
        if self.qp_solver not in QP_SOLVERS:
            raise ConfigError(f"qp_solver: expected one of {', '.join(QP_SOLVERS)}, got {self.qp_solver!r}")
        for name in ("push_clamp_n", "push_cutoff_hz", "push_max_rate_n_per_s", "push_max_acc_n_per_s2",
                     "max_push_rate_command_n_per_s", "enable_max_distance_m"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        for name in ("dt_s", "init_ramp_s", "joint_vel_weight", "joint_pos_weight", "joint_pos_clamp_rad",
                     "joint_torque_weight", "joint_torque_weight_arms", "joint_vel_limit_ratio",
                     "joint_torque_limit_ratio", "momentum_weight_lin", "momentum_weight_ang"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.ahead_time_s < 0 or self.hessian_regularisation < 0:
            raise ValueError("ahead_time_s and hessian_regularisation must be >= 0")
        if len(self.plane.wrench_weights) != 6:
            raise ValueError("plane.wrench_weights must hold 6 values [fx, fy, fz, tx, ty, tz]")
        if len(self.point.wrench_weights) != 3:
            raise ValueError("point.wrench_weights must hold 3 values [fx, fy, fz]")

    def effector(self, ctype: str) -> EffectorParams:
        """The parameter set of contact type ``ctype`` ('plane' or 'point')."""
        return self.plane if ctype == "plane" else self.point


@dataclasses.dataclass(frozen=True)
class RetargetingOutput:
    """Output of one Retargeting step.

    Attributes:
        q: (nq,) desired posture q^d (pinocchio FreeFlyer configuration).
        v: (nv,) applied rate qdot^d (after clamps and init ramp) [m/s, rad/s], base twist in the
            base frame.
        theta_ahead: (n,) ahead joint command theta^d + ahead_time * theta_dot^d [rad].
        tau: (n,) desired joint torques tau^d [N m].
        lam: effector -> desired wrench lam^d, (6,) [f; tau] in LOCAL [N, N m] for planes, (3,)
            force in the surface frame R_c [N] for points; zeros when disabled.
        lam_dot: effector -> applied wrench rate [N/s, N m/s].
        enabled: effector -> contact enabled.
        poses: effector -> desired world pose (FK of q).
        ok: False when the QP failed (rates are then zero and the state is unchanged).
        diagnostics: status, message, solve_time_s, eq_residual, ineq_violation, n_active,
            n_var, n_eq, n_in (inequalities of QP (9) as written, each side of a bound
            counted: seiko.md §10.2), n_rows and n_bounds (its compact form: inequality rows,
            bounded variables), init_ratio.
        switching: effector -> ``"enabling"`` (minimum normal force still ratcheting up, §7.3),
            ``"disabling"`` (unloading, §7.4) or ``""``.
        push: effector -> pushing mode active (§7.2).
        lam_target: effector -> wrench target of (9e) (same layout as ``lam``).
        fz_min: effector -> current minimum normal force of (9k) [N].
    """

    q: np.ndarray
    v: np.ndarray
    theta_ahead: np.ndarray
    tau: np.ndarray
    lam: dict[str, np.ndarray]
    lam_dot: dict[str, np.ndarray]
    enabled: dict[str, bool]
    poses: dict[str, pin.SE3]
    ok: bool
    diagnostics: dict
    switching: dict[str, str] = dataclasses.field(default_factory=dict)
    push: dict[str, bool] = dataclasses.field(default_factory=dict)
    lam_target: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    fz_min: dict[str, float] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Request:
    """Answer to an operator request (contact switch, pushing mode, force velocity).

    Attributes:
        accepted: True if the request was applied (or was already satisfied).
        message: why it was refused, or what was done.
    """

    accepted: bool
    message: str


class NormalForceCommandFilter:
    """Pushing-mode normal-force reference (``FilterVelCommand``, seiko.md §7.2).

    Per step: ``ref += dt v`` then ``ref`` clamped to ``f_n +- clamp`` (``f_n`` the current
    desired normal force), exponential low-pass at ``cutoff_hz``, then a time-optimal bang-bang
    filter with ``|rate| <= max_rate``, ``|acc| <= max_acc``. Output: the normal-force target [N].

    Args:
        dt_s: period [s]. clamp_n: clamp radius [N]. cutoff_hz: low-pass cut-off [Hz].
        max_rate_n_per_s, max_acc_n_per_s2: bang-bang bounds [N/s, N/s^2].
    """

    def __init__(self, dt_s: float, clamp_n: float, cutoff_hz: float, max_rate_n_per_s: float, max_acc_n_per_s2: float):
        self.dt = dt_s
        self.clamp = clamp_n
        self.alpha = exponential_alpha(cutoff_hz, dt_s)
        self._bb = BangBangFilter(1, max_rate_n_per_s, max_acc_n_per_s2)
        self.reset(0.0)

    def reset(self, f_n: float) -> None:
        """Start at rest at normal force ``f_n`` [N]."""
        self.ref = float(f_n)
        self.lp = float(f_n)
        self._bb.reset(np.array([float(f_n)]))
        self.out = float(f_n)

    def step(self, rate_n_per_s: float, f_n: float) -> float:
        """Advance one period with velocity command ``rate_n_per_s`` [N/s]; returns the target [N]."""
        self.ref = min(max(self.ref + self.dt * float(rate_n_per_s), f_n - self.clamp), f_n + self.clamp)
        self.lp = self.alpha * self.lp + (1.0 - self.alpha) * self.ref
        self.out = float(self._bb.step(np.array([self.lp]), self.dt)[0])
        return self.out


# the pose rows of an effector (SeikoRetargeting._layout)
_FREE, _PLANE_ON, _POINT_ON = 0, 1, 2


class SeikoRetargeting:
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

        # Kinematics and equilibrium terms at (q, lam).
        A_G = pin.computeCentroidalMap(model, data, q)
        terms = equilibrium_terms(model, data, q, self._on_specs, self._on_lams, self._on_R_c)
        r, dr_dq, JT = terms.r, terms.dr_dq, terms.J.T
        tau0 = r[6:]
        # Cost rows that change, A_d x ~ b_d with neg_b_d = -b_d stored: (a) centroidal momentum (b = 0)
        A_d, neg_b_d, lo_hi = self._A_d, self._neg_b_d, self._lo_hi
        A_d[0:6, :nv] = A_G
        # (d), (e) pose tasks and (9h) contact equalities
        oMf, targets = data.oMf, self._targets
        for k, fid, mode, row, row_eq, clamp_pos, clamp_rot, target in self._pose_rows:
            J = pin.getFrameJacobian(model, data, fid, pin.LOCAL_WORLD_ALIGNED)  # effector_jacobian_world
            M = oMf[fid]
            if target is None:  # disabled: this step's target
                Tg = targets[k]
                t_g, R_g = Tg.translation, Tg.rotation
            else:  # enabled: the contact pose, fixed while enabled
                t_g, R_g = target
            err = pose_error_world(t_g, R_g, M, self._pose_err)  # [p_t - p; log3(R_t R^T)]
            p_err, r_err = err[:3], err[3:]
            if mode == _FREE:
                A_d[row : row + 6, :nv] = J
                clamp_norm(p_err, clamp_pos, -dt, out=neg_b_d[row : row + 3])  # -clampNorm(e)/dt
                clamp_norm(r_err, clamp_rot, -dt, out=neg_b_d[row + 3 : row + 6])
            elif mode == _PLANE_ON:
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

    # ------------------------------------------------------------------ switching / push (§7.2-7.4)

    @property
    def t_s(self) -> float:
        """Time since :meth:`reset` [s]: steps started x ``dt_s`` (the tick of a request made
        before this tick's step; used in the log lines)."""
        return self._n_steps * self.config.dt_s

    def _refuse(self, msg: str) -> Request:
        self.n_refused += 1
        if self.n_refused <= 20 or self.n_refused % 500 == 0:  # a live stream of bad values: throttled
            log.warning("SEIKO retargeting: t = %.3f s: request refused (%d so far): %s", self.t_s, self.n_refused, msg)
        return Request(False, msg)

    def _effector_pose(self, k: str) -> pin.SE3:
        pin.framesForwardKinematics(self.model, self.data, self._q)
        return self.data.oMf[self.robot.contacts[k].frame_id].copy()

    def request_contact(self, name: str, enable: bool) -> Request:
        """Ask to enable (add) or disable (remove) the contact of effector ``name`` (§7.3-7.4).

        Args:
            name: effector name.
            enable: True to add the contact at the current desired pose, False to start
                unloading it.

        Returns:
            Request; refused (state unchanged) for: an unknown effector; enabling an effector
            farther than ``enable_max_distance_m`` from every surface of the environment;
            disabling when no other enabled plane contact would remain (the last supporting
            foot). Repeating the current state is accepted and does nothing.

        Raises:
            ConfigError: called before reset.
        """
        if not self._reset_done:
            raise ConfigError("SeikoRetargeting.request_contact called before reset()")
        if name not in self._enabled:
            return self._refuse(f"unknown effector {name!r}; expected one of {', '.join(self._names)}")
        spec = self.robot.contacts[name]
        if enable:
            if self._enabled[name] and not self._disabling[name]:
                return Request(True, f"{name} is already an enabled contact")
            if self._enabled[name] and self._disabling[name]:
                return self._refuse(f"cannot enable {name!r} while it is being disabled; wait for its release")
            pose = self._effector_pose(name)
            if self.environment is not None:
                d = self.environment.distance(pose.translation, spec.frame)
                if d > self.config.enable_max_distance_m:
                    return self._refuse(
                        f"cannot enable contact {name!r}: it is {d:.3f} m from the nearest surface "
                        f"(> enable_max_distance_m = {self.config.enable_max_distance_m} m); move it onto a surface first"
                    )
            if spec.type == "point":
                rpy = self.config.surface_rpy_rad.get(name)
                self._R_c[name] = pin.rpy.rpyToMatrix(*rpy) if rpy is not None else pose.rotation.copy()
            self._targets[name] = pose
            self._lam[name][:] = 0.0
            self._lam_target[name][:] = 0.0
            self._fz_min[name] = 0.0
            self._push[name] = False
            self._disabling[name] = False
            self._enabled[name] = True
            self._layout()
            log.info("SEIKO retargeting: t = %.3f s: contact %s enabled (fz_min ratchets up to %.1f N)", self.t_s, name,
                     self.config.effector(spec.type).fz_min_n)
            return Request(True, f"{name} enabled")
        # disable
        if not self._enabled[name]:
            return Request(True, f"{name} is already disabled")
        if self._disabling[name]:
            return Request(True, f"{name} is already being disabled")
        planes_left = [k for k, c in zip(self._names, self._specs)
                       if c.type == "plane" and self._enabled[k] and not self._disabling[k] and k != name]
        if not planes_left:
            return self._refuse(
                f"cannot disable {name!r}: it is the last supporting plane contact (no enabled foot would remain)"
            )
        self._disabling[name] = True
        self._disable_steps[name] = 0
        self._push[name] = False
        self._fz_min[name] = 0.0
        self._lam_target[name][:] = 0.0
        self._update_contact(name)
        log.info("SEIKO retargeting: t = %.3f s: contact %s disabling (unloading at the rate limits)", self.t_s, name)
        return Request(True, f"{name} disabling")

    def request_push(self, name: str, on: bool) -> Request:
        """Turn pushing mode (§7.2) on or off for effector ``name``.

        Returns:
            Request; switching it on is refused for an unknown effector, a disabled contact or
            a contact being disabled. Off always succeeds (target back to 0, enabled weights).

        Raises:
            ConfigError: called before reset.
        """
        if not self._reset_done:
            raise ConfigError("SeikoRetargeting.request_push called before reset()")
        if name not in self._enabled:
            return self._refuse(f"unknown effector {name!r}; expected one of {', '.join(self._names)}")
        if not on:
            if self._push[name]:
                self._push[name] = False
                self._lam_target[name][:] = 0.0
                self._update_contact(name)
            return Request(True, f"push mode off on {name}")
        if self._push[name]:
            return Request(True, f"push mode already on for {name}")
        if not self._enabled[name]:
            return self._refuse(f"cannot push with {name!r}: it is not an enabled contact (enable it first)")
        if self._disabling[name]:
            return self._refuse(f"cannot push with {name!r}: it is being disabled")
        self._push[name] = True
        self._lam_target[name][:] = self._lam[name]
        self._push_filter[name].reset(float(self._lam[name][2]))
        self._update_contact(name)
        return Request(True, f"push mode on for {name} at {self._lam[name][2]:.1f} N")

    def _pre_step(self, rates: Mapping[str, float]) -> None:
        for k, v in rates.items():
            if k not in self._enabled:
                self._refuse(f"normal-force velocity for unknown effector {k!r}")
                continue
            v = float(v)
            if v == 0.0:
                continue
            if not math.isfinite(v):
                self._refuse(f"non-finite normal-force velocity {v!r} for {k!r} replaced by 0")
            elif abs(v) > self.config.max_push_rate_command_n_per_s:
                self._refuse(f"normal-force velocity {v:.1f} N/s for {k!r} exceeds "
                             f"{self.config.max_push_rate_command_n_per_s} N/s; replaced by 0")
            # a rate for an effector not in push mode is ignored (its push request, if any, was
            # refused and reported once); not counted, to avoid one refusal per tick.
        for k in self._names:
            if self._push[k]:
                v = float(rates.get(k, 0.0))
                if not (math.isfinite(v) and abs(v) <= self.config.max_push_rate_command_n_per_s):
                    v = 0.0
                self._lam_target[k][2] = self._push_filter[k].step(v, float(self._lam[k][2]))
        # §7.3 ratchet of the minimum normal force of enabling contacts.
        for k in self._on_names:
            want = self._fz_min_desired[k]
            if not self._disabling[k] and self._fz_min[k] < want:
                fn = float(self._lam[k][2])
                if fn > self._fz_min[k] + 0.01:
                    self._fz_min[k] = min(fn - 0.01, want)
                    self._update_contact(k)

    def _post_step(self) -> None:
        # §7.4: release a disabling contact once its normal force is below dt * rate limit.
        released = []
        for k, c in self._on:
            if self._disabling[k]:
                # below dt * rate bound, so the other contacts can take the rest in one step; the
                # bound of this step (tapered, disable_taper_n; the limit without the taper)
                lim = self.config.dt_s * float(self._lam_rate_lim[self._col[k] + 2])
                fn = float(self._lam[k][2])
                # the tapered bound is 0 at f_n = 0: a contact at 0 N is released too
                if fn < lim or fn <= 1e-6:
                    released.append(k)
        if released:
            pin.framesForwardKinematics(self.model, self.data, self._q)
            for k in released:
                c = self.robot.contacts[k]
                self._enabled[k] = False
                self._disabling[k] = False
                self._push[k] = False
                self._fz_min[k] = self.config.effector(c.type).fz_min_n
                self._lam[k][:] = 0.0
                self._lam_target[k][:] = 0.0
                self._targets[k] = self.data.oMf[c.frame_id].copy()
                log.info("SEIKO retargeting: t = %.3f s: contact %s released", self.t_s, k)
            self._layout()

    def _disabling_rate_bounds(self, lam: np.ndarray) -> None:
        """Rate bounds (9m) of the disabling contacts for this step (deviation from the paper).

        ``bound = limit * S(t / disable_ramp_s)`` with the raised cosine ``S(x) = (1 - cos(pi x))/2``
        (``t`` [s] since the disable request), and on the normal force additionally
        ``limit * sqrt(u (2 - u))``, ``u = f_n / disable_taper_n`` below the taper force; the
        bounds of the other contacts keep their limits.
        """
        if not any(self._disabling.values()):
            return
        dt = self.config.dt_s
        for k, c in self._on:
            if not self._disabling[k]:
                continue
            par = self.config.effector(c.type)
            self._disable_steps[k] += 1
            col = self._col[k]
            sl = slice(col, col + c.dim)
            scale = 1.0
            if par.disable_ramp_s > 0.0:
                x = min(1.0, self._disable_steps[k] * dt / par.disable_ramp_s)
                scale = 0.5 * (1.0 - math.cos(math.pi * x))
            rate = self._lam_rate_base[sl] * scale
            if par.disable_taper_n > 0.0:
                u = max(0.0, float(lam[col + 2])) / par.disable_taper_n
                if u < 1.0:
                    rate[2] = min(rate[2], par.force_rate_max_n_per_s * math.sqrt(u * (2.0 - u)))
            self._lam_rate_lim[sl] = rate
        self._rate_changed()

    def _wrench_weights(self, k: str) -> np.ndarray:
        c = self.robot.contacts[k]
        par = self.config.effector(c.type)
        if self._push[k]:
            return np.full(c.dim, par.disabling_weight_scale)
        w = np.asarray(par.wrench_weights, dtype=float)
        # disabling: 1e4 times the weight *shape* (seiko.md §7.4: feet 1e4 on every component
        # but 100 on f_z), i.e. the enabled vector normalised by its largest entry.
        return w * (par.disabling_weight_scale / float(np.max(w))) if self._disabling[k] else w

    def _update_contact(self, k: str) -> None:
        """Refresh the constraints (fz_min) and the wrench weights of enabled contact ``k``."""
        c = self.robot.contacts[k]
        par = self.config.effector(c.type)
        self._constraints[k] = contact_constraints(
            c.type, par.friction_mu, self._fz_min[k], par.fz_max_n, par.cop_half_x_m, par.cop_half_y_m
        )
        if self._enabled[k]:
            col = self._col[k]
            self._w_lam[col : col + c.dim] = self._wrench_weights(k)
            self._wrench_weights_changed()
            self._contact_block()

    # ------------------------------------------------------------------ internals

    @property
    def q(self) -> np.ndarray:
        """(nq,) current desired posture (copy)."""
        return self._q.copy()

    def _zero_rates(self) -> dict[str, np.ndarray]:
        return {k: np.zeros(c.dim) for k, c in zip(self._names, self._specs)}

    def _rate_changed(self) -> None:
        """Propagate the wrench-rate limits (9m) to the arrays derived from them."""
        np.negative(self._lam_rate_lim, out=self._neg_rate)
        self._x_clip[0, self._nv :] = self._neg_rate
        self._x_clip[1, self._nv :] = self._lam_rate_lim

    def _layout(self) -> None:
        """Preallocate the QP blocks for the current contact set and compute the parts that are
        constant for it (called on reset/switch)."""
        cfg = self.config
        n, nv = self._n, self._nv
        self._on = [(k, c) for k, c in zip(self._names, self._specs) if self._enabled[k]]
        self._on_names = [k for k, _ in self._on]
        self._on_specs = [c for _, c in self._on]
        self._on_R_c = [self._R_c[k] for k in self._on_names]
        self._on_lams = [self._lam[k] for k in self._on_names]  # views
        self._flat_idx = np.array([6 * i + j for i, (k, c) in enumerate(zip(self._names, self._specs))
                                   if self._enabled[k] for j in range(c.dim)], dtype=np.intp)
        self._col, col = {}, 0
        for k, c in self._on:
            self._col[k] = col
            col += c.dim
        m = self._m = col
        nx = self._nx = nv + m
        self._constraints = {}
        fz_min = getattr(self, "_fz_min", {})
        for k, c in zip(self._names, self._specs):
            par = cfg.effector(c.type)
            self._constraints[k] = contact_constraints(
                c.type, par.friction_mu, fz_min.get(k, par.fz_min_n), par.fz_max_n, par.cop_half_x_m, par.cop_half_y_m
            )

        # Cost rows that change every step: a (6) | d/e (6 per disabled, 3 per enabled point) | f (n).
        # The identity rows b (joint velocity), c (posture) and g (wrench target) only add a
        # constant diagonal to H (self._Hdiag) and a term to g.
        # Pose rows: (name, frame, mode, cost row, equality row, clamps, fixed target of a contact)
        self._pose_rows = []
        row, row_eq = 6, 0
        for k, c in zip(self._names, self._specs):
            par = cfg.effector(c.type)
            clamps = (par.pose_clamp_pos_m, par.pose_clamp_rot_rad)
            if not self._enabled[k]:
                self._pose_rows.append((k, c.frame_id, _FREE, row, -1, *clamps, None))
                row += 6
                continue
            T = self._targets[k]
            target = (T.translation.copy(), T.rotation.copy())
            if c.type == "plane":
                self._pose_rows.append((k, c.frame_id, _PLANE_ON, -1, row_eq, *clamps, target))
                row_eq += 6
            else:
                self._pose_rows.append((k, c.frame_id, _POINT_ON, row, row_eq, *clamps, target))
                row += 3
                row_eq += 3
        rt = self._row_tau = row
        n_d = row + n
        A_d = self._A_d = np.zeros((n_d, nx))
        neg_b_d = self._neg_b_d = np.zeros(n_d)
        self._T_J = A_d[rt : rt + n]
        self._neg_b_d_tau = neg_b_d[rt : rt + n]
        wd = self._wd = np.zeros(n_d)
        wd[0:3] = cfg.momentum_weight_lin
        wd[3:6] = cfg.momentum_weight_ang
        for k, _, mode, r, _, _, _, _ in self._pose_rows:
            par = cfg.effector(self.robot.contacts[k].type)
            if mode == _FREE:
                wd[r : r + 3] = par.pose_weight_pos
                wd[r + 3 : r + 6] = par.pose_weight_rot
            elif mode == _POINT_ON:
                wd[r : r + 3] = par.pose_weight_rot
        wd[rt : rt + n] = self._w_tau
        self._sqrt_wd = np.sqrt(wd)[:, None]
        self._w_lam = np.zeros(m)
        for k, c in self._on:
            self._w_lam[self._col[k] : self._col[k] + c.dim] = self._wrench_weights(k)
        self._Hdiag = np.diag(np.full(nx, cfg.hessian_regularisation))
        self._Hdiag.flat[6 * (nx + 1) : nv * (nx + 1) : nx + 1] += cfg.joint_vel_weight + cfg.joint_pos_weight
        self._wrench_weights_changed()

        self._A_d_s, self._wb_d = np.zeros((n_d, nx)), np.zeros(n_d)  # scratch of W^1/2 A_d, W b_d
        rate = np.zeros(m)
        for k, c in self._on:
            par = cfg.effector(c.type)
            lim = [par.force_rate_max_n_per_s] * 3 + ([par.torque_rate_max_nm_per_s] * 3 if c.dim == 6 else [])
            rate[self._col[k] : self._col[k] + c.dim] = lim
        self._lam_rate_lim = rate  # (9m) bounds of this step (a disabling contact's tapered)
        self._lam_rate_base = rate.copy()
        self._neg_rate = -rate
        # the clamps of the §4.4 post-processing: (9l) on theta_dot, (9m) on lam_dot
        self._x_clip = np.empty((2, nx))
        self._x_clip[0, :6], self._x_clip[1, :6] = -np.inf, np.inf
        self._x_clip[0, 6:nv], self._x_clip[1, 6:nv] = self._neg_vel_lim, self._vel_lim
        self._rate_changed()
        self._contact_rows_cache = None
        self._contact_block()

    def _wrench_weights_changed(self) -> None:
        nv, reg = self._nv, self.config.hessian_regularisation
        np.einsum("ii->i", self._Hdiag)[nv:] = self._w_lam + reg
        self._w_lam_inv_dt = self._w_lam / self.config.dt_s

    def _contact_block(self) -> None:
        """The constraint rows: equalities (9h) (6 per plane, 3 per point) and (9g) (6 base rows) |
        (9j) (n two-sided rows) | the general rows of (9k) (one-sided); and the split of (9k)
        into those rows and its unit rows (bounds on one lam_dot component), as the affine map
        ``v = Q lam + q0`` that gives, per step, the lower bounds of the general rows and the
        lower and upper bounds that the unit rows put on lam_dot (+-inf where none)."""
        n, nv, nx, m, dt = self._n, self._nv, self._nx, self._m, self.config.dt_s
        blocks, consts = [], []
        for k, c in self._on:
            C, cc = self._constraints[k]
            B = np.zeros((C.shape[0], m))
            B[:, self._col[k] : self._col[k] + c.dim] = C
            blocks.append(B)
            consts.append(cc)
        C_all = np.concatenate(blocks) if blocks else np.zeros((0, m))
        c_all = np.concatenate(consts) if consts else np.zeros(0)
        cache = self._contact_rows_cache
        if cache is None or cache[0].shape != C_all.shape or not np.array_equal(cache[0], C_all):
            # split the rows (once per layout; a new fz_min only changes c)
            nnz = np.count_nonzero(C_all, axis=1)
            gen, low, high = [], {}, {}  # unit rows: variable -> (row, coefficient)
            for i in range(C_all.shape[0]):
                if nnz[i] == 1:
                    j = int(np.flatnonzero(C_all[i])[0])
                    side = low if C_all[i, j] > 0 else high
                    if j not in side:
                        side[j] = (i, float(C_all[i, j]))
                        continue
                gen.append(i)
            cache = self._contact_rows_cache = (C_all.copy(), gen, low, high)
        _, gen, low, high = cache
        ng = self._n_gen = len(gen)
        # general rows: lo = -(C lam + c) / dt; a unit row s lam_dot_j >= -(s lam_j + c_i) / dt
        # bounds lam_dot_j by -lam_j / dt - c_i / (s dt) (below for s > 0, above for s < 0)
        Q = self._Q = np.zeros((ng + 2 * m, m))
        q0 = self._q0 = np.empty(ng + 2 * m)
        Q[:ng] = C_all[gen] / -dt
        q0[:ng] = c_all[gen] / -dt
        q0[ng : ng + m], q0[ng + m :] = -np.inf, np.inf
        for off, side in ((ng, low), (ng + m, high)):
            for j, (i, s) in side.items():
                Q[off + j, j] = -1.0 / dt
                q0[off + j] = -c_all[i] / (s * dt)

        n_eq = self._n_eq = sum(c.dim for _, c in self._on) + 6
        n_rows = n_eq + n + ng
        # (9i), (9l), (9j): 2n each; (9m): 2m; (9k): every row of C
        self._n_in_paper = 6 * n + 2 * m + C_all.shape[0]
        # the QP's buffers (contactflow.qp.BoxQP): H, g, the rows A_c, their bounds lo_hi (rows
        # lower / upper) and the variable bounds lb_ub, rows lower / upper: base free | (9i) + (9l)
        # on theta_dot | (9m) + the unit rows of (9k) on lam_dot
        qp = self._qp = BoxQP(nx, n_rows, bounds=True)
        A_c = self._A_c = qp.A
        A_c[n_eq + n :, nv:] = C_all[gen]
        lo_hi = self._lo_hi = qp.bounds[:, nx:]
        lo_hi[1, n_eq + n :] = np.inf
        lb_ub = qp.bounds[:, :nx]  # -inf, +inf until set
        self._lb_ub_theta, self._lb_ub_lam = lb_ub[:, 6:nv], lb_ub[:, nv:]
        self._A_c_T = A_c[n_eq - 6 : n_eq + n]  # T = [dr/dq | -J^T]: base rows (9g), joint rows (9j)
        self._lo_hi_base = lo_hi[:, n_eq - 6 : n_eq]
        self._lo_hi_tau = lo_hi[:, n_eq : n_eq + n]
        self._lo_contact = lo_hi[0, n_eq + n :]

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
