"""Configuration, output and request answer of the SEIKO Retargeting
(:class:`contactflow.seiko.retargeting.SeikoRetargeting`, SEIKO RA-L 2024 eq. (9); Talos values of
``shared/reference/seiko.md`` §4-5, §7).

* :class:`EffectorParams` (:class:`PlaneEffectorParams`, :class:`PointEffectorParams`): per contact
  type; :class:`RetargetingConfig`: the whole Retargeting; both validated when built;
* :class:`RetargetingOutput`: what ``reset`` and ``step`` return; :class:`Request`: the answer to
  an operator request.

All are importable from :mod:`contactflow.seiko.retargeting` too.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pinocchio as pin

from contactflow.native import KERNELS
from contactflow.qp import QP_SOLVERS
from contactflow.seiko.config_checks import config_error, require_positive
from contactflow.seiko.surfaces import DEFAULT_SURFACE_RPY

__all__ = ["EffectorParams", "PlaneEffectorParams", "PointEffectorParams", "RetargetingConfig",
           "RetargetingOutput", "Request"]

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

    Raises:
        ConfigError: a value out of its range (the message names the class, the key and what was
            expected; :mod:`contactflow.seiko.config_checks`).
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
        require_positive(self, ("pose_weight_pos", "pose_weight_rot", "pose_clamp_pos_m", "pose_clamp_rot_rad",
                                "friction_mu", "force_rate_max_n_per_s", "cop_half_x_m", "cop_half_y_m",
                                "disabling_weight_scale"))
        require_positive(self, ("disable_ramp_s", "disable_taper_n", "torque_rate_max_nm_per_s"), strict=False)
        if not 0 <= self.fz_min_n < self.fz_max_n:
            raise config_error(self, "fz_min_n", f"a number in [0, fz_max_n = {self.fz_max_n})", self.fz_min_n)
        if len(self.wrench_weights) not in (3, 6) or min(self.wrench_weights) <= 0:
            raise config_error(self, "wrench_weights", "3 (point) or 6 (plane) values > 0", self.wrench_weights)


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


@dataclasses.dataclass(frozen=True, kw_only=True)
class RetargetingConfig:
    """Parameters of :class:`~contactflow.seiko.retargeting.SeikoRetargeting` (Talos values of seiko.md §4.1-4.6).

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
            R_c of a point contact; effectors not listed use their orientation when enabled
            (default :data:`contactflow.seiko.surfaces.DEFAULT_SURFACE_RPY`).
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
        kernel: who computes each step's kinematics and equilibrium terms (the centroidal map, (1)-(2)
            and their q-derivative, the effector Jacobians and poses), one of
            :data:`contactflow.native.KERNELS`: ``"native"`` the compiled kernel
            (:mod:`contactflow.seiko.native`; a ConfigError at construction if it cannot be built),
            ``"python"`` pinocchio's Python bindings (the reference), ``"auto"`` (default) the
            compiled one when it builds, else Python with one warning. Same QP to rounding.

    Raises:
        ConfigError: a value out of its range (the message names the class, the key and what was
            expected; :mod:`contactflow.seiko.config_checks`).
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
    surface_rpy_rad: dict[str, tuple[float, float, float]] = dataclasses.field(default_factory=DEFAULT_SURFACE_RPY.copy)
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
    kernel: str = "auto"

    def __post_init__(self):
        if self.qp_solver not in QP_SOLVERS:
            raise config_error(self, "qp_solver", f"one of {', '.join(QP_SOLVERS)}", self.qp_solver)
        if self.kernel not in KERNELS:
            raise config_error(self, "kernel", f"one of {', '.join(KERNELS)}", self.kernel)
        require_positive(self, ("push_clamp_n", "push_cutoff_hz", "push_max_rate_n_per_s", "push_max_acc_n_per_s2",
                                "max_push_rate_command_n_per_s", "enable_max_distance_m"))
        require_positive(self, ("dt_s", "init_ramp_s", "joint_vel_weight", "joint_pos_weight", "joint_pos_clamp_rad",
                                "joint_torque_weight", "joint_torque_weight_arms", "joint_vel_limit_ratio",
                                "joint_torque_limit_ratio", "momentum_weight_lin", "momentum_weight_ang"))
        require_positive(self, ("ahead_time_s", "hessian_regularisation"), strict=False)
        if len(self.plane.wrench_weights) != 6:
            raise config_error(self, "plane.wrench_weights", "6 values [fx, fy, fz, tx, ty, tz]", self.plane.wrench_weights)
        if len(self.point.wrench_weights) != 3:
            raise config_error(self, "point.wrench_weights", "3 values [fx, fy, fz]", self.point.wrench_weights)

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

