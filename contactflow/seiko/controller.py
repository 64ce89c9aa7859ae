"""SEIKO Controller: joint-flexibility-aware wrench feedback through the position command.

Implements SEIKO RA-L 2024 (Rouxel et al.) §IV-B/C: the flexible equilibrium model (3)-(7), the
wrench feedback law (10), the Controller QP (11) in the code's *rate form*, the joint-torque
limit adaptation (12), the complementary filter (13) and ``runInit`` (the Newton step on the
flexible equilibrium used at reset and after a contact switch). Formulas, weights and Talos
values are those of ``shared/reference/seiko.md`` §3 and §6, checked against the released C++
(hucebot/seiko_controller_code ``inria_model/src/SEIKOController.cpp``, ``TaskSEIKO.cpp``).

Model. The robot is a rigid multibody whose joints are springs of stiffness K driven by a
position command: ``tau_flex = K (theta_cmd - theta_flex)`` (3). For a command, the *flexible
state* ``(q_flex, lam_flex)`` is the quasi-static equilibrium ``g(q) = S tau_flex + J^T lam``
(1) with the enabled contacts fixed. Linearised (5)-(7), in rate form with ``x = [q_dot; lam_dot]``
(``q_dot`` (nv,) tangent rate, ``lam_dot`` (m,) stacked wrench rates of the enabled contacts)::

    dt T x + t = dt S K theta_cmd_dot,
    T = [dr/dq + S K S^T | -J^T],   t = g - S tau_flex - J^T lam   (at q_flex, lam_flex)

whose 6 base rows are an equality of the QP and whose n joint rows give the command rate
``theta_cmd_dot = K^-1 (T_J x + t_J / dt)`` (7). ``t`` uses ``theta_cmd = theta_d + offset``
(new Retargeting posture, previous offset), so the feed-forward of the desired motion is in
``t_J``. After the solve, ``offset += dt theta_cmd_dot`` and ``theta_cmd = theta_d + offset``.

Frames of the QP rows. The paper writes the pose costs (11c) and the contact equalities (11g)
in world axes (seiko.md §6.2: ``J_w q_dot = [log3(R_t R^T); p_t - p] / dt``). Here each
effector's rows are expressed in its own frame instead: plane contacts and all (11c) pose rows
in the LOCAL frame of the effector (``pin.LOCAL`` Jacobian rows, errors ``R^T (p_t - p)`` and
``log3(R^T R_t)``), point contacts (11g) in their surface frame R_c (rows ``R_c^T J_lin``,
error ``R_c^T (p_t - p)``). Each 3-row block (position or rotation) is rotated by a rotation
matrix, so the equalities (11g) define the same feasible set, and the weighted costs (11c) are
the same **because the weights are equal within each 3-row block** (position weight x3,
rotation weight x3; a per-axis weight would change the QP). Only the diagnostics that read
single rows differ: ``eq_residual`` (max |row|) is measured in these local frames.

Conventions: ``q`` (7+n,) pinocchio FreeFlyer, ``v`` (6+n,); plane wrenches ``[f; tau]`` (6,)
in the LOCAL sole frame, point forces (3,) in the world-fixed surface frame R_c; wrenches are
those of the environment on the robot; SI units.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
import types
from typing import Callable, Mapping, Sequence

import numpy as np
import pinocchio as pin

from contactflow.errors import ConfigError, ContractError
from contactflow.qp import QP_SOLVERS, BoxQP, QPSolution, solve_qp_box
from contactflow.robot import ContactSpec, Robot
from contactflow.seiko.equilibrium import equilibrium_terms, pose_error_world
from contactflow.seiko.filters import ComplementaryWrenchFilterBank, TorqueLimitAdapter, WrenchRateEstimator, alpha_from_cutoff

__all__ = [
    "ControllerConfig",
    "ControllerOutput",
    "SeikoController",
    "DEFAULT_SURFACE_ROTATIONS",
    "flexible_equilibrium_step",
    "flexible_equilibrium_residual",
]

_log = logging.getLogger(__name__)

#: (11i) bound used when ``torque_limit_constraint`` is off [N m]: never binds.
_NO_TORQUE_LIMIT_NM = 1e6


def _rot_y(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def _rot_x(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


#: World-fixed surface frames R_c of the Talos point contacts (seiko.md §5.4, ``TaskSEIKO.cpp``
#: l.296-307): left hand R_y(-pi/2) (normal along world -x, a wall in front), right hand
#: R_x(-pi/2) (normal along world +y, a support on the robot's right).
DEFAULT_SURFACE_ROTATIONS: dict[str, np.ndarray] = {
    "left_hand": _rot_y(-math.pi / 2.0),
    "right_hand": _rot_x(-math.pi / 2.0),
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class ControllerConfig:
    """SEIKO Controller parameters; defaults are the Talos values of seiko.md §6.

    All QP weights are in the code's rate form (decision variables are rates).

    Attributes:
        dt_s: control period [s] (500 Hz).
        kp_per_s: proportional gain K_p of the feedback law (10) [1/s] (code: 0.2; not in the paper).
        kd: derivative gain K_d of (10) [-] (rate form: multiplies lam_dot_read [N/s] to give
            N/s). Default **0.0**: the D term's sign differs between paper and code (seiko.md
            §6.1/§11.1) and nothing here has verified it; the paper's experiments use 0.02 with
            ``kd_sign = -1`` — enable it once a dynamic simulation confirms that a larger K_d
            increases the logarithmic decrement (Fig. 5).
        kd_sign: -1 for the paper's ``- K_d lam_dot_read`` (default), +1 for the released code.
        complementary_cutoff_hz: cutoff of the complementary filter (13) [Hz].
        rate_window_s: finite-difference window of the wrench-rate estimator [s].
        rate_cutoff_hz: low-pass cutoff of the wrench-rate estimator [Hz].
        weight_reg_base: floating-base rate regularisation (``weightRegBase``).
        weight_wrench_plane: (11b) enabled plane wrench-rate tracking, all 6 components.
        weight_force_point: (11b) enabled point force-rate tracking, all 3 components.
        weight_cmd_change: (11e) ``||theta_cmd_dot||^2`` (``weightRegCmdChange``).
        weight_cmd_offset: (11d) ``||offset + dt theta_cmd_dot||^2`` (``weightRegCmdOffset``).
        weight_pose_plane_pos: (11c) disabled plane effector, position rows.
        weight_pose_plane_rot: (11c) disabled plane effector, orientation rows.
        weight_pose_point_pos: (11c) disabled point effector, position rows (no orientation).
        weight_point_orientation: enabled point contact, orientation rows (code-only term).
        gain_pose: gain on the pose errors of (11c) and the enabled-point orientation term [-].
        weight_ineq: scale of the inequality rows (conditioning only; feasible set unchanged).
        max_pos_cmd_offset_rad: bound on |offset| [rad] (code-only; 0.5 on Talos).
        torque_limit_adaptation: run the limit update (12); off = (11i) with the URDF limits.
        torque_limit_constraint: impose (11i); off = the joint-torque rows of QP (11) get a
            1e6 N m bound that never binds (the QP keeps its size; the paper's Fig. 7 condition
            "Controller without (11i) and (12)"; (12) then has no effect on the solution).
        max_tau_ratio: rho of (12) [-].
        tau_read_cutoff_hz: low-pass of ``tau_read`` before (12) [Hz] (the code filters the
            joint-torque sensors at 5 Hz, seiko.md §6.4); 0 = unfiltered (default).
        torque_margin_nm: eps1 of (12) [N m].
        torque_decay_nm_per_s: eps2 / dt of (12) [N m/s].
        torque_hysteresis: eps3 of (12), ratio of the URDF limit [-].
        torque_lowering_nm_per_s: extension of (12), not in the paper: while the measured ratio
            stays above ``max_tau_ratio`` and (11i) binds, lower that joint's limit at this rate
            [N m/s] (see :class:`~contactflow.seiko.filters.TorqueLimitAdapter`); 0 = the paper's
            (12) (default). Used by the far-reach experiment (docs/seiko_multicontact.md).
        weight_elastic_energy: runInit elastic-energy weight (times K).
        init_iterations: runInit Newton steps at reset and after a contact switch.
        command_blend_s: linear blend of the output command after a switch or a re-enable [s].
        release_max_force_n: a plane contact released by the Retargeting stays enabled here
            until its low-pass filtered *measured* normal force is below this [N]; meanwhile its
            contact target (11g) rises along world z at ``min(release_lift_max_m_per_s,
            release_lift_gain * f_z)`` (ramped in along a raised cosine over
            ``release_ramp_s``), which unloads the foot through the structure's compliance, and
            (10) runs with ``lam_d = 0``. The accumulated rise is added to the effector's pose
            target (11c) until it is enabled again; after the switch it keeps growing at
            ``min(release_lift_max_m_per_s, release_lift_gain (f_z - release_max_force_n))``
            while the measured force exceeds the threshold and shrinks back to 0 at
            ``release_lift_max_m_per_s`` once the foot is off the ground (filtered f_z below
            0.2 x the threshold). 0 = switch on the Retargeting's flag
            (paper, released code). Deviation from the paper: docs/seiko_multicontact.md, Foot
            lift (the Retargeting releases on the *desired* force while ~60 N are measured).
        release_filter_cutoff_hz: cutoff of the low-pass on the measured normal force [Hz].
        release_lift_gain: [(m/s)/N] of that rise.
        release_lift_max_m_per_s: its speed bound [m/s].
        release_lift_max_m: bound on the accumulated rise [m] (a foot still loaded after the
            timeout, or set down on an obstacle, does not climb further).
        release_ramp_s: its raised-cosine ramp-in [s].
        release_timeout_s: the switch runs anyway (with a warning) after this long held [s].
        qp_tol: relative residual tolerance of the QP solutions (as :func:`contactflow.qp.solve_qp_box`).
        qp_reg: relative Tikhonov regularisation of the QP Hessian (as :func:`contactflow.qp.solve_qp_box`).
        qp_solver: QP solver of (11) and runInit, one of :data:`contactflow.qp.QP_SOLVERS`:
            ``"daqp"`` (default, MIT) or ``"quadprog"`` (GPL, the reference).
    """

    dt_s: float = 0.002
    kp_per_s: float = 0.2
    kd: float = 0.0
    kd_sign: float = -1.0
    complementary_cutoff_hz: float = 0.2
    rate_window_s: float = 0.05
    rate_cutoff_hz: float = 10.0
    weight_reg_base: float = 1e-6
    weight_wrench_plane: float = 0.1
    weight_force_point: float = 10.0
    weight_cmd_change: float = 1e3
    weight_cmd_offset: float = 1e2
    weight_pose_plane_pos: float = 2e2
    weight_pose_plane_rot: float = 2e1
    weight_pose_point_pos: float = 2e1
    weight_point_orientation: float = 100.0
    gain_pose: float = 1.0
    weight_ineq: float = 10.0
    max_pos_cmd_offset_rad: float = 0.5
    torque_limit_adaptation: bool = True
    torque_limit_constraint: bool = True
    max_tau_ratio: float = 0.75
    tau_read_cutoff_hz: float = 0.0
    torque_margin_nm: float = 1.0
    torque_decay_nm_per_s: float = 10.0
    torque_hysteresis: float = 0.1
    torque_lowering_nm_per_s: float = 0.0
    weight_elastic_energy: float = 1.0
    init_iterations: int = 3
    command_blend_s: float = 2.0
    release_max_force_n: float = 3.0
    release_filter_cutoff_hz: float = 5.0
    release_lift_gain: float = 1e-4
    release_lift_max_m_per_s: float = 0.001
    release_lift_max_m: float = 0.01
    release_ramp_s: float = 1.0
    release_timeout_s: float = 5.0
    qp_tol: float = 1e-6
    qp_reg: float = 1e-9
    qp_solver: str = "daqp"

    def __post_init__(self):
        if self.qp_solver not in QP_SOLVERS:
            raise ConfigError(f"qp_solver must be one of {QP_SOLVERS}, got {self.qp_solver!r}")
        if not self.dt_s > 0.0:
            raise ValueError(f"dt_s must be > 0, got {self.dt_s}")
        if self.kd_sign not in (-1.0, 1.0):
            raise ValueError(f"kd_sign must be -1 or +1, got {self.kd_sign}")
        if self.kp_per_s < 0.0 or self.kd < 0.0:
            raise ValueError("kp_per_s and kd must be >= 0")
        for name in (
            "complementary_cutoff_hz",
            "rate_window_s",
            "rate_cutoff_hz",
            "weight_wrench_plane",
            "weight_force_point",
            "weight_cmd_change",
            "weight_ineq",
            "max_pos_cmd_offset_rad",
            "max_tau_ratio",
            "release_filter_cutoff_hz",
            "qp_tol",
            "qp_reg",
        ):
            if not getattr(self, name) > 0.0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        for name in (
            "weight_reg_base",
            "weight_cmd_offset",
            "weight_pose_plane_pos",
            "weight_pose_plane_rot",
            "weight_pose_point_pos",
            "weight_point_orientation",
            "gain_pose",
            "torque_margin_nm",
            "torque_decay_nm_per_s",
            "torque_lowering_nm_per_s",
            "tau_read_cutoff_hz",
            "weight_elastic_energy",
            "command_blend_s",
            "release_max_force_n",
            "release_lift_gain",
            "release_lift_max_m_per_s",
            "release_lift_max_m",
            "release_ramp_s",
            "release_timeout_s",
        ):
            if not getattr(self, name) >= 0.0:  # also refuses NaN
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not 0.0 <= self.torque_hysteresis < self.max_tau_ratio:
            raise ValueError("torque_hysteresis must be in [0, max_tau_ratio)")
        if self.init_iterations < 1:
            raise ValueError(f"init_iterations must be >= 1, got {self.init_iterations}")


@dataclasses.dataclass(frozen=True)
class ControllerOutput:
    """Result of :meth:`SeikoController.reset` / :meth:`SeikoController.step`.

    Attributes:
        theta_cmd: (n,) joint position command to send [rad] (after the post-switch blend):
            ``theta_ahead + offset`` (``theta_d + offset`` without ``theta_ahead``).
        offset: (n,) command offset [rad].
        q_flex: (nq,) flexible (deflected) posture estimate.
        lam_flex: effector -> flexible-model wrench ((6,) plane [f; tau] LOCAL [N, N m] or (3,)
            point force in R_c [N]); zeros for disabled effectors.
        lam_tilde: effector -> complementary-filtered measured wrench (13) (same layout); only
            for effectors whose ``lam_read`` was given.
        tau_flex: (n,) flexible-model joint torques K (theta_d + offset - theta_flex) [N m].
        tau_limit: (n,) joint-torque limits used by (11i) [N m].
        ok: False when the QP (or runInit) failed; the command then holds the last offset.
        diagnostics: ``status``, ``solve_time_s``, ``step_time_s``, ``eq_residual`` (max
            |A_eq x - b_eq| of the solved QP, with the (11g) contact rows in each contact's own
            frame: planes LOCAL, points R_c; see the module docstring), ``ineq_violation``,
            ``n_active``, ``bias_base_n`` (|t_B| [N, N m]), ``bias_joint_rad`` (|K^-1 t_J|
            [rad]), ``n_var``, ``n_eq``, ``n_ineq`` (inequalities of QP (11) as the paper
            writes them, each side of a bound counted: 6 n, seiko.md §10.2, like the
            Retargeting's ``n_in``), ``n_rows`` (the compact form actually solved: 2 n
            two-sided rows), ``switched``, ``held``, ``integrating``, ``message``.
    """

    theta_cmd: np.ndarray
    offset: np.ndarray
    q_flex: np.ndarray
    lam_flex: dict
    lam_tilde: dict
    tau_flex: np.ndarray
    tau_limit: np.ndarray
    ok: bool
    diagnostics: dict


# --------------------------------------------------------------------------------------------
# runInit: one Newton step on the flexible equilibrium (seiko.md §6.3)
# --------------------------------------------------------------------------------------------


def flexible_equilibrium_residual(
    model: pin.Model,
    data: pin.Data,
    q: np.ndarray,
    theta_cmd: np.ndarray,
    K: np.ndarray,
    contacts: Sequence[ContactSpec],
    lams: Sequence[np.ndarray],
    R_cs: Sequence[np.ndarray | None],
) -> np.ndarray:
    """Flexible equilibrium residual ``g(q) - J^T lam - S K (theta_cmd - theta)`` (eqs. 1, 3).

    Args:
        model, data: pinocchio model and data (data overwritten).
        q: (nq,) posture.
        theta_cmd: (n,) joint command [rad].
        K: (n,) joint stiffness [N m/rad].
        contacts, lams, R_cs: enabled contacts, their wrenches and surface frames (as
            :func:`contactflow.seiko.equilibrium.equilibrium_terms`).

    Returns:
        (nv,) residual [N, N m]; zero at the flexible equilibrium.
    """
    terms = equilibrium_terms(model, data, q, contacts, lams, R_cs)
    res = terms.r.copy()
    res[6:] -= K * (theta_cmd - q[7:])
    return res


def flexible_equilibrium_step(
    model: pin.Model,
    data: pin.Data,
    q: np.ndarray,
    theta_cmd: np.ndarray,
    K: np.ndarray,
    contacts: Sequence[ContactSpec],
    lams: Sequence[np.ndarray],
    R_cs: Sequence[np.ndarray | None],
    targets: Sequence[pin.SE3],
    *,
    wrench_weights: Sequence[float] | None = None,
    weight_reg_base: float = 1e-6,
    weight_elastic_energy: float = 1.0,
    tol: float = 1e-6,
    solver: str = "daqp",
) -> tuple[np.ndarray, list[np.ndarray], QPSolution]:
    """``runInit``: one full Newton step on the flexible equilibrium for a fixed command (§6.3).

    Variables ``(dq (nv,), dlam (m,))`` (no 1/dt). Equalities: the enabled contacts reach their
    targets (planes: ``J_w dq = [p_t - p; log3(R_t R^T)]``, 6 rows LOCAL_WORLD_ALIGNED; points:
    position rows only) and **all** 6+n rows of the linearised flexible equilibrium
    ``T [dq; dlam] + t = 0`` with ``T = [dr/dq + S K S^T | -J^T]``, ``t = r - S K (theta_cmd -
    theta)``. The system is square (6+n+m equations), so the cost (base regularisation, elastic
    energy ``||dtheta - (theta_cmd - theta)||^2_K``, wrench regularisation ``||lam + dlam||^2``)
    only matters when it is singular.

    Args:
        model, data: pinocchio model and data (data overwritten).
        q: (nq,) current flexible posture.
        theta_cmd: (n,) fixed joint command [rad].
        K: (n,) joint stiffness [N m/rad].
        contacts: enabled contacts.
        lams: per contact, its current wrench ((6,) plane LOCAL [f; tau], (3,) point in R_c).
        R_cs: per contact, its surface frame R_c (points) or None (planes).
        targets: per contact, the fixed world pose of its frame (points: translation only).
        wrench_weights: per contact, the wrench regularisation weight (default 0.1 each).
        weight_reg_base: base regularisation weight.
        weight_elastic_energy: elastic energy weight (times K).
        tol: relative residual tolerance of the QP.
        solver: QP solver (:data:`contactflow.qp.QP_SOLVERS`).

    Returns:
        ``(q_new, lams_new, solution)``; on failure ``q`` and ``lams`` are returned unchanged
        (copies) with ``solution.found == False``.
    """
    nv = model.nv
    terms = equilibrium_terms(model, data, q, contacts, lams, R_cs)
    m = terms.J.shape[0]
    nx = nv + m
    theta = q[7:]
    t = terms.r.copy()
    t[6:] -= K * (theta_cmd - theta)
    T = np.zeros((nv, nx))
    T[:, :nv] = terms.dr_dq
    T[6:, 6:nv] += np.diag(K)
    T[:, nv:] = -terms.J.T
    A_eq = np.zeros((m + nv, nx))
    b_eq = np.zeros(m + nv)
    row = 0
    for c, tgt in zip(contacts, targets):
        d = c.dim  # plane: 6 pose rows; point: 3 position rows
        A_eq[row : row + d, :nv] = pin.getFrameJacobian(model, data, c.frame_id, pin.LOCAL_WORLD_ALIGNED)[:d]
        pose_error_world(tgt.translation, tgt.rotation, data.oMf[c.frame_id], b_eq[row : row + d], rotation=d == 6)
        row += d
    A_eq[m:] = T
    np.negative(t, out=b_eq[m:])
    H = np.zeros((nx, nx))
    g = np.zeros(nx)
    H[range(6), range(6)] = weight_reg_base
    wK = weight_elastic_energy * K
    H[range(6, nv), range(6, nv)] += wK
    g[6:nv] -= wK * (theta_cmd - theta)
    col = nv
    for i, (c, lam) in enumerate(zip(contacts, lams)):
        w = 0.1 if wrench_weights is None else float(wrench_weights[i])
        d = c.dim
        H[range(col, col + d), range(col, col + d)] += w
        g[col : col + d] += w * np.asarray(lam)
        col += d
    sol = solve_qp_box(H, g, A_eq, b_eq, b_eq, solver=solver, tol=tol)
    if not sol.found:
        return q.copy(), [np.array(lam, dtype=float) for lam in lams], sol
    q_new = pin.integrate(model, q, sol.x[:nv])
    lams_new = []
    col = nv
    for c, lam in zip(contacts, lams):
        lams_new.append(np.asarray(lam, dtype=float) + sol.x[col : col + c.dim])
        col += c.dim
    return q_new, lams_new, sol


# --------------------------------------------------------------------------------------------
# Controller
# --------------------------------------------------------------------------------------------


class _Workspace:
    """Preallocated QP (11) buffers and the constant parts of one contact layout (which contacts
    are enabled), built once per layout.

    Compact box form of :func:`contactflow.qp.solve_qp_box` (``lo <= A x <= hi``), in the
    buffers of a :class:`contactflow.qp.BoxQP` (``qp``; H, g, A, lo, hi are its views): rows
    ``[contacts (m, equalities); base (6, equalities); command (n); joint torque (n)]``. The
    command rows merge (11h) and the offset bound, which constrain the same ``dt theta_cmd_dot``
    (one two-sided row with the intersection of both intervals); the torque rows are (11i) as
    one two-sided row per joint (quadprog's stacked form had 6 n one-sided rows).
    """

    def __init__(self, ctrl: "SeikoController", enabled: tuple[bool, ...]):
        cfg = ctrl.config
        nv, n = ctrl.nv, ctrl.n
        contacts_on = [c for c, on in zip(ctrl.contacts, enabled) if on]
        self.contacts = contacts_on
        self.names_on = [c.name for c in contacts_on]
        self.lam_flex_on = [ctrl._lam_flex[name] for name in self.names_on]  # views of the state rows
        self.idx_on = [i for i, on in enumerate(enabled) if on]
        self.m = m = sum(c.dim for c in contacts_on)
        self.nx = nx = nv + m
        self.n_eq = n_eq = m + 6
        self.n_rows = 2 * n  # inequality rows of the compact form (two-sided)
        self.n_in = 6 * n  # inequalities of (11) as the paper writes them (seiko.md §10.2)
        self.T = np.zeros((nv, nx))
        self.T_jdiag = np.einsum("ii->i", self.T[6:, 6:nv])  # writable diagonal views
        self.t = np.zeros(nv)
        self.M = np.zeros((n, nx))
        # the QP's buffers (contactflow.qp.BoxQP); the wrench columns of the contact rows stay zero
        self.qp = BoxQP(nx, n_eq + 2 * n)
        self.H, self.H_diag, self.g = self.qp.H, self.qp.H_diag, self.qp.g
        self.A, self.lo, self.hi = self.qp.A, self.qp.lo, self.qp.hi
        self.A_c, self.A_B = self.A[:m, :nv], self.A[m:n_eq]
        self.A_P, self.A_N = self.A[n_eq : n_eq + n], self.A[n_eq + n :]
        self.A_N_jdiag = np.einsum("ii->i", self.A_N[:, 6:nv])
        self.lo_c, self.lo_B, self.hi_eq = self.lo[:m], self.lo[m:n_eq], self.hi[:n_eq]
        self.lo_eq = self.lo[:n_eq]
        self.lo_P, self.hi_P = self.lo[n_eq : n_eq + n], self.hi[n_eq : n_eq + n]
        self.bounds_P = self.qp.bounds[:, n_eq : n_eq + n]  # (2, n): lo_P, hi_P
        self.lo_N, self.hi_N = self.lo[n_eq + n :], self.hi[n_eq + n :]
        self.cols, self.dims = [], []
        col = nv
        for c in contacts_on:
            self.cols.append(slice(col, col + c.dim))
            self.dims.append(c.dim)
            col += c.dim
        # x[nv:] <-> the flattened (n_eff, 6) per-effector rows (lam_flex, lam_flex_dot, effort)
        self.flat_idx = np.array([6 * i + k for i, c in zip(self.idx_on, contacts_on) for k in range(c.dim)], dtype=np.intp)
        # the same entries as a slice when they are contiguous (both feet, say): views instead of
        # fancy indexing
        i0 = int(self.flat_idx[0]) if m else 0
        contiguous = m > 0 and np.array_equal(self.flat_idx, np.arange(i0, i0 + m))
        self.flat_sel = slice(i0, i0 + m) if contiguous else self.flat_idx
        # Constant diagonal of H: base regularisation and the (11b) weights.
        w = np.concatenate([np.full(c.dim, cfg.weight_wrench_plane if c.type == "plane" else cfg.weight_force_point)
                            for c in contacts_on]) if contacts_on else np.zeros(0)
        self.w_wrench = w
        self.H_const_diag = np.zeros(nx)
        self.H_const_diag[:6] = cfg.weight_reg_base
        self.H_const_diag[nv:] = w
        self.effort = np.zeros(m)
        # (11c) pose rows: disabled effectors (planes 6-D, points position) and the orientation of
        # the enabled points, in each effector's LOCAL frame (the weights are isotropic per 3-row
        # block, so the cost is the same as in world axes): per effector (name, frame, rows of J,
        # J rows, position error rows or None, rotation error rows or None), and the row weights.
        wp = []
        rows = []
        for c, on in zip(ctrl.contacts, enabled):
            if on and c.type == "plane":
                continue
            pos, rot = not on, c.type == "plane" or on
            rows.append((c, pos, rot, len(wp)))
            if pos:
                wp += [cfg.weight_pose_plane_pos if c.type == "plane" else cfg.weight_pose_point_pos] * 3
            if rot:
                wp += [cfg.weight_pose_plane_rot if c.type == "plane" else cfg.weight_point_orientation] * 3
        self.w_pose = np.array(wp)
        self.w_pose_col = self.w_pose[:, None]
        self.J_pose = np.zeros((len(wp), nv))
        self.e_pose = np.zeros(len(wp))
        self.pose = []
        self.pose_frames = [c.frame_id for c, _, _, _ in rows]
        for c, pos, rot, r in rows:
            k = 3 * (pos + rot)
            src = slice(0, 6) if pos and rot else slice(0, 3) if pos else slice(3, 6)
            self.pose.append((c.name, c.frame_id, src, self.J_pose[r : r + k],
                              self.e_pose[r : r + 3] if pos else None, self.e_pose[r + 3 * pos : r + k] if rot else None))
        # (11g) contact rows in each contact's own frame (the rows of J: planes LOCAL, points R_c):
        # per contact (name, frame, plane?, position error rows, rotation error rows or None)
        self.contact_rows = []
        row = 0
        for c in contacts_on:
            plane = c.type == "plane"
            self.contact_rows.append((c.name, c.frame_id, plane, self.lo[row : row + 3], self.lo[row + 3 : row + 6] if plane else None))
            row += c.dim
        self.tmp3 = np.zeros(3)
        self.WJ_pose = np.zeros((len(wp), nv))
        self.H_pose = np.zeros((nv, nv))
        self.g_pose = np.zeros(nv)


class SeikoController:
    """SEIKO Controller (RA-L 2024 §IV-C): QP (11) on the flexible model, with (10), (12), (13).

    Per :meth:`step` (rate form, seiko.md §6 and §12 items 4-6):

    1. wrench-rate estimate ``lam_dot_read`` of each measured wrench (§6.6);
    2. complementary filter (13): ``lam_tilde`` (only while enabled and integrating);
    3. feedback law (10): ``dlam_effort = lam_d_dot + K_p (lam_d - lam_tilde) + kd_sign K_d lam_dot_read``;
    4. torque-limit update (12) from ``tau_read`` and the previous ``tau_flex``;
    5. QP (11) in ``x = [q_dot_flex (nv); lam_dot_flex (m)]``:

       * costs: base regularisation; (11b) ``||lam_dot - dlam_effort||^2``; (11e)
         ``||theta_cmd_dot||^2``; (11d) ``||offset + dt theta_cmd_dot||^2``; (11c) disabled
         effectors track the desired poses (FK of ``q_d``; planes 6-D, points position only);
         enabled points keep the desired orientation; all (11c) rows in the effector's LOCAL
         frame (paper: world axes; same cost because the weights are equal within each 3-row
         block);
       * equalities: (11g) enabled contacts stay at their targets (frozen flexible poses),
         planes in their LOCAL frame, points in R_c (paper: world axes; same constraint, a
         rotation of each 3-row block); (11f) ``T_B x + t_B / dt = 0``;
       * inequalities (2 n two-sided rows): (11h) ``theta_min <= theta_cmd + dt theta_cmd_dot <=
         theta_max`` (URDF limits shrunk by the SEIKO margin) and ``|offset + dt theta_cmd_dot| <=
         max offset`` (one row per joint: the intersection of both intervals); (11i)
         ``|tau_flex + t_J + dt (T_J x - K theta_dot_flex)| <= tau_limit``;

       solved as :func:`contactflow.qp.solve_qp_box` solves it (in the preallocated buffers of a
       :class:`contactflow.qp.BoxQP` per contact layout; ``qp_solver``: daqp or quadprog) in the
       compact form (diagnostics ``n_ineq`` = 6 n as in the paper, ``n_rows`` = 2 n solved),
       with the contact rows (11g) and the pose rows (11c) in each effector's own frame (see
       the module docstring; ``eq_residual`` is measured in these frames);

    6. integration: ``q_flex``, ``lam_flex``, ``offset += dt theta_cmd_dot`` (clamped to
       ``±max offset`` and ``[theta_min - theta_d, theta_max - theta_d]``);
       ``theta_cmd = theta_d + offset`` (``theta_ahead + offset`` for the output when given).

    A QP failure never raises: the state is not integrated, the previous offset is kept
    (``theta_cmd = theta_d + last offset``), ``ok=False`` and a warning is logged.

    Args:
        config: :class:`ControllerConfig`.
        robot: loaded robot (model, K, limits, contacts).
        surface_rotations: effector -> (3, 3) world-fixed surface frame R_c of the point
            contacts (default :data:`DEFAULT_SURFACE_ROTATIONS` for the names it holds,
            identity otherwise).

    Raises:
        ConfigError: a surface rotation for an unknown or non-point effector, or not a rotation.
    """

    def __init__(self, config: ControllerConfig, robot: Robot, surface_rotations: Mapping[str, np.ndarray] | None = None):
        self.config = config
        self.robot = robot
        self.model = robot.model
        self.data = self.model.createData()
        self._data_d = self.model.createData()
        self.nq, self.nv, self.n = self.model.nq, self.model.nv, robot.n
        self.K = np.asarray(robot.K, dtype=float).copy()
        self.K_inv = 1.0 / self.K
        self._K_inv_col = self.K_inv[:, None]
        # weight_ineq dt K: the -dt K theta_dot_flex part of the (11i) rows, on the joint diagonal
        self._weight_ineq_dt_K = (config.weight_ineq * config.dt_s) * self.K
        self.theta_min = robot.q_min + robot.position_margin
        self.theta_max = robot.q_max - robot.position_margin
        self.contacts: list[ContactSpec] = list(robot.contacts.values())
        self.names = [c.name for c in self.contacts]
        self.R_c: dict[str, np.ndarray] = {}
        for c in self.contacts:
            if c.type == "point":
                self.R_c[c.name] = DEFAULT_SURFACE_ROTATIONS.get(c.name, np.eye(3)).copy()
        for name, R in (surface_rotations or {}).items():
            self.set_surface_rotation(name, R)
        dt = config.dt_s
        n_eff = len(self.contacts)
        self._index = {c.name: i for i, c in enumerate(self.contacts)}
        self._dims = [c.dim for c in self.contacts]
        # (13) for every effector at once, on (n_eff, 6) rows (points use the first 3 values).
        self._cfilt = ComplementaryWrenchFilterBank(n_eff, config.complementary_cutoff_hz, dt)
        # lam_dot_read of (10): needed only with a derivative gain.
        self._rate = {c.name: WrenchRateEstimator(c.dim, dt, config.rate_window_s, config.rate_cutoff_hz) for c in self.contacts}
        # Step inputs, copied into one buffer and checked for finiteness at once: q_d, v_d,
        # theta_ahead, tau_read, then (n_eff, 6) rows of lam_read, lam_d, lam_d_dot and the
        # external lam_tilde.
        nq, nv, n = self.model.nq, self.model.nv, robot.n
        self._in = np.zeros(nq + nv + 2 * n + 4 * n_eff * 6)
        o = 0
        self._in_vecs = []
        for size in (nq, nv, n, n):
            self._in_vecs.append(self._in[o : o + size])
            o += size
        self._in_w = self._in[o:].reshape(4, n_eff, 6)
        self._in_names = ("lam_read", "lam_d", "lam_d_dot", "lam_tilde")
        self._in_views = [{c.name: (i, self._in_w[j, i, : c.dim], (c.dim,)) for i, c in enumerate(self.contacts)}
                          for j in range(4)]
        self._has = np.zeros((4, n_eff), dtype=bool)
        self._active = np.zeros(n_eff, dtype=bool)
        self._tau_adapt = TorqueLimitAdapter(
            robot.tau_max,
            rho=config.max_tau_ratio,
            eps1_nm=config.torque_margin_nm,
            eps2_nm=config.torque_decay_nm_per_s * dt,
            eps3=config.torque_hysteresis,
            lower_nm=config.torque_lowering_nm_per_s * dt,
        )
        self._tau_read_lp: np.ndarray | None = None  # low-passed tau_read (tau_read_cutoff_hz)
        self._qp_ok_prev = True  # the last QP (11) succeeded: the (12) lowering extension may act
        self._tau_engaged = np.zeros(len(robot.joint_names), dtype=bool)  # (12) has lowered this joint's limit
        self._tau_read_alpha = (
            alpha_from_cutoff(config.tau_read_cutoff_hz, dt) if config.tau_read_cutoff_hz > 0.0 else 0.0
        )
        self._ws_cache: dict[tuple[bool, ...], _Workspace] = {}
        self.qp_hook: Callable[..., None] | None = None
        """Optional ``qp_hook(H, g, A, lo, hi, lb, ub, solution)`` called after every solve of QP
        (11) with the box form of :func:`contactflow.qp.solve_qp_box` (``lb = ub = None``; H as
        solved, regularised; reused buffers: copy what you keep). Used to dump QPs
        (tests/fixtures, benchmarks/bench_seiko_qp.py) and compare solvers."""
        # State
        self.q_flex = robot.q_default.copy()
        # lam_flex: (n_eff, 6) rows (points: the first 3 values) and a view per effector
        self._lam_flex_rows = np.zeros((n_eff, 6))
        self._lam_flex = {c.name: self._lam_flex_rows[i, : c.dim] for i, c in enumerate(self.contacts)}
        # read-only views of the same rows, for the public lam_flex property
        ro = {c.name: self._lam_flex_rows[i, : c.dim] for i, c in enumerate(self.contacts)}
        for arr in ro.values():
            arr.flags.writeable = False
        self._lam_flex_public = types.MappingProxyType(ro)
        self._effort_rows = np.zeros((n_eff, 6))  # (10) per effector
        self._effort_flat = self._effort_rows.reshape(-1)  # a view
        # theta_min - theta_d, theta_max - theta_d of this step
        self._dmin, self._dmax = np.zeros(self.n), np.zeros(self.n)
        # lam_flex_dot of the last step, (n_eff, 6) rows (what (13) uses next step), and views per effector
        self._lam_flex_dot_rows = np.zeros((n_eff, 6))
        self._lam_flex_dot = {c.name: self._lam_flex_dot_rows[i, : c.dim] for i, c in enumerate(self.contacts)}
        self._lam_flex_dot_flat = self._lam_flex_dot_rows.reshape(-1)  # views
        self._lam_flex_flat = self._lam_flex_rows.reshape(-1)
        self._enabled = {c.name: False for c in self.contacts}
        self._enabled_key = tuple(False for _ in self.contacts)  # the values of self._enabled, in order
        self._enabled_public = types.MappingProxyType(self._enabled)
        self.targets: dict[str, pin.SE3] = {}
        self.offset = np.zeros(self.n)
        self.theta_d = robot.q_default[7:].copy()
        self.tau_flex = np.zeros(self.n)
        self.integrating = True
        self._blend_start = np.zeros(self.n)
        self._blend_left_s = 0.0
        self._last_cmd = self.theta_d.copy()
        self._is_reset = False
        self._theta_cmd_dot = np.zeros(self.n)
        # Release on the measured force (release_max_force_n): low-passed measured normal force
        # of each plane contact [N], time held so far [s], accumulated target rise [m].
        self._fn_alpha = alpha_from_cutoff(config.release_filter_cutoff_hz, dt)
        self._fn_lp: dict[str, float | None] = {c.name: None for c in self.contacts if c.type == "plane"}
        self._held_s: dict[str, float] = {}
        self._rise_m: dict[str, float] = {}

    # ---------------------------------------------------------------- public state (read-only)

    @property
    def enabled(self) -> Mapping[str, bool]:
        """Effector -> contact enabled in the Controller (read-only live view, robot-file order).

        Set only by :meth:`reset` and :meth:`step` (the ``enabled`` argument, with the release
        hold of ``release_max_force_n``): the QP (11) layout (``_enabled_key``) is derived from
        it, so it cannot be assigned from outside.
        """
        return self._enabled_public

    @property
    def lam_flex(self) -> Mapping[str, np.ndarray]:
        """Effector -> flexible-model wrench, read-only live views: (6,) plane ``[f; tau]`` in the
        LOCAL sole frame [N, N m], (3,) point force in R_c [N]; zeros for disabled effectors.

        Views of the state rows the QP (11) integrates (seiko.md §6.2, "Integration"); copy them
        to keep a value. Set only by :meth:`reset` and :meth:`step`.
        """
        return self._lam_flex_public

    # ---------------------------------------------------------------- public helpers

    def set_surface_rotation(self, name: str, R_c: np.ndarray) -> None:
        """Set the world-fixed surface frame R_c (3, 3) of point effector ``name``.

        Raises:
            ConfigError: unknown or non-point effector, or R_c not a rotation matrix.
        """
        spec = self.robot.contact(name)
        if spec.type != "point":
            raise ConfigError(f"surface rotation given for {name!r}, which is a {spec.type} contact")
        R = np.asarray(R_c, dtype=float)
        if R.shape != (3, 3) or not np.allclose(R @ R.T, np.eye(3), atol=1e-6) or np.linalg.det(R) < 0:
            raise ConfigError(f"surface rotation of {name!r} is not a (3, 3) rotation matrix")
        self.R_c[name] = R.copy()

    @property
    def contacts_on(self) -> list[ContactSpec]:
        """Enabled contacts, in robot-file order (the order of the stacked wrench)."""
        return [c for c in self.contacts if self._enabled[c.name]]

    # ---------------------------------------------------------------- input checks

    def _vec(self, name: str, value, shape: tuple[int, ...]) -> np.ndarray:
        a = np.asarray(value, dtype=float)
        if a.shape != shape:
            raise ContractError(f"SeikoController: {name} must have shape {shape}, got {a.shape}")
        if not math.isfinite(float(a.sum())):  # finite sum <=> all entries finite
            raise ContractError(f"SeikoController: {name} has non-finite entries")
        return a

    def _wrench(self, what: str, mapping: Mapping[str, np.ndarray] | None, name: str, required: bool) -> np.ndarray | None:
        dim = self.robot.contacts[name].dim
        if mapping is None or name not in mapping:
            if required:
                raise ContractError(f"SeikoController: {what} has no entry for enabled effector {name!r}")
            return None
        return self._vec(f"{what}[{name!r}]", mapping[name], (dim,))

    def _check_names(self, what: str, mapping: Mapping | None) -> None:
        if mapping is None:
            return
        unknown = set(mapping) - set(self.names)
        if unknown:
            raise ContractError(f"SeikoController: {what} has unknown effector(s) {sorted(unknown)}; expected some of {self.names}")

    _VEC_NAMES = ("q_d", "v_d", "theta_ahead", "tau_read")

    def _load_step_inputs(self, vecs: tuple, maps: tuple, want: tuple[bool, ...]) -> None:
        """Copy the inputs of :meth:`step` into the one input buffer (a shape check per entry),
        then check the finiteness of all of them at once (the offending entry is looked up only
        on failure). ``vecs``: (q_d, v_d, theta_ahead, tau_read), None = not given; ``maps``:
        (lam_read, lam_d, lam_d_dot, lam_tilde) effector -> array, or None; lam_d and lam_d_dot
        are read (and checked) only for the effectors ``want`` enables (the others are unused).
        Fills ``self._has``.

        Raises:
            ContractError: a wrong shape, an unknown effector or a non-finite entry.
        """
        for j, value in enumerate(vecs):
            if value is None:
                continue
            buf = self._in_vecs[j]
            a = value if type(value) is np.ndarray else np.asarray(value, dtype=float)
            if a.shape != buf.shape:
                raise ContractError(f"SeikoController: {self._VEC_NAMES[j]} must have shape {buf.shape}, got {a.shape}")
            buf[:] = a
        has = self._has
        has[:] = False
        self._in_w[2] = 0.0  # lam_d_dot: a missing entry means zero
        for j, mapping in enumerate(maps):
            if not mapping:
                continue
            views, has_j = self._in_views[j], has[j]
            if not self._index.keys() >= mapping.keys():
                self._check_names(self._in_names[j], mapping)
            skip = j in (1, 2)
            for name, value in mapping.items():
                i, view, shape = views[name]
                if skip and not want[i]:
                    continue
                a = value if type(value) is np.ndarray else np.asarray(value, dtype=float)
                if a.shape != shape:
                    raise ContractError(f"SeikoController: {self._in_names[j]}[{name!r}] must have shape {shape}, got {a.shape}")
                view[:] = a
                has_j[i] = True
        rows = self._in_w
        # a finite sum: all entries finite (the per-entry check only when it is not)
        if not math.isfinite(float(np.add.reduce(self._in))) and not np.isfinite(self._in).all():
            bad = [self._VEC_NAMES[j] for j, v in enumerate(vecs) if v is not None and not np.isfinite(self._in_vecs[j]).all()]
            bad += [f"{self._in_names[j]}[{self.names[i]!r}]" for j, i in zip(*np.nonzero(has))
                    if not np.isfinite(rows[j, i]).all()]
            self._in[:] = 0.0  # no stale non-finite value stays in the buffer
            raise ContractError(f"SeikoController: non-finite entries in {', '.join(bad)}")

    # ---------------------------------------------------------------- runInit

    def _run_init(self, theta_cmd: np.ndarray) -> QPSolution:
        on = self.contacts_on
        cfg = self.config
        weights = [cfg.weight_wrench_plane if c.type == "plane" else cfg.weight_force_point for c in on]
        q_new, lams_new, sol = flexible_equilibrium_step(
            self.model,
            self.data,
            self.q_flex,
            theta_cmd,
            self.K,
            on,
            [self._lam_flex[c.name] for c in on],
            [self.R_c.get(c.name) for c in on],
            [self.targets[c.name] for c in on],
            wrench_weights=weights,
            weight_reg_base=cfg.weight_reg_base,
            weight_elastic_energy=cfg.weight_elastic_energy,
            tol=cfg.qp_tol,
            solver=cfg.qp_solver,
        )
        if sol.found:
            self.q_flex = q_new
            for c, lam in zip(on, lams_new):
                self._lam_flex[c.name][:] = lam
        for c in self.contacts:
            if not self._enabled[c.name]:
                self._lam_flex[c.name][:] = 0.0
        self.tau_flex = self.K * (theta_cmd - self.q_flex[7:])
        return sol

    def _run_init_n(self, theta_cmd: np.ndarray, count: int) -> QPSolution:
        sol = None
        for _ in range(count):
            sol = self._run_init(theta_cmd)
            if not sol.found:
                break
        return sol

    def _freeze_target(self, name: str) -> None:
        """Contact target := current flexible pose of the effector (``askSwitchingEnable``)."""
        pin.framesForwardKinematics(self.model, self.data, self.q_flex)
        self.targets[name] = pin.SE3(self.data.oMf[self.robot.contacts[name].frame_id])

    # ---------------------------------------------------------------- reset

    def reset(
        self,
        q_d: np.ndarray,
        lam_d: Mapping[str, np.ndarray],
        enabled: Mapping[str, bool],
        *,
        theta_start: np.ndarray | None = None,
        theta_ahead: np.ndarray | None = None,
    ) -> ControllerOutput:
        """Reset the flexible state to the desired one and solve the flexible equilibrium.

        ``q_flex := q_d``, ``lam_flex := lam_d`` (enabled contacts), ``offset := 0``; contact
        targets frozen at the current flexible poses; filters and torque limits reset; then
        ``init_iterations`` runInit steps with ``theta_cmd = theta_d``. Afterwards ``q_flex`` is
        the deflected equilibrium of the commanded posture and ``tau_flex`` the static joint
        torques.

        Args:
            q_d: (nq,) desired posture (Retargeting).
            lam_d: effector -> desired wrench for the enabled contacts (plane (6,) [f; tau]
                LOCAL [N, N m]; point (3,) in R_c [N]).
            enabled: effector -> contact enabled; effectors not listed are disabled.
            theta_start: (n,) command currently applied to the robot [rad]; when given, the
                output command is blended from it over ``command_blend_s``.
            theta_ahead: (n,) Retargeting ahead posture for the output command [rad].

        Returns:
            ControllerOutput; ``ok=False`` (with a warning logged) if runInit failed.

        Raises:
            ContractError: wrong shapes, non-finite values, unknown effectors, or a missing
                ``lam_d`` entry for an enabled contact.
        """
        q_d = self._vec("q_d", q_d, (self.nq,))
        self._check_names("lam_d", lam_d)
        self._check_names("enabled", enabled)
        t0 = time.perf_counter()
        for name in self.names:
            self._enabled[name] = bool(enabled.get(name, False))
        self._enabled_key = tuple(self._enabled[name] for name in self.names)
        self.q_flex = q_d.copy()
        self.theta_d = q_d[7:].copy()
        self.offset[:] = 0.0
        for c in self.contacts:
            w = self._wrench("lam_d", lam_d, c.name, self._enabled[c.name])
            self._lam_flex[c.name][:] = w if (w is not None and self._enabled[c.name]) else 0.0
            self._lam_flex_dot[c.name][:] = 0.0
            self._rate[c.name].reset()
        self._cfilt.reset()
        self._active[:] = False
        for name in self._fn_lp:
            self._fn_lp[name] = None
        self._held_s = {}
        self._rise_m = {}
        self._tau_adapt.reset()
        self._qp_ok_prev = True
        self._tau_engaged[:] = False
        self._tau_read_lp = None
        self.targets = {}
        pin.framesForwardKinematics(self.model, self.data, self.q_flex)
        for c in self.contacts_on:
            self.targets[c.name] = pin.SE3(self.data.oMf[c.frame_id])
        self.integrating = True
        sol = self._run_init_n(self.theta_d + self.offset, self.config.init_iterations)
        self._is_reset = True
        self._theta_cmd_dot[:] = 0.0
        raw = (self.theta_d if theta_ahead is None else self._vec("theta_ahead", theta_ahead, (self.n,))) + self.offset
        if theta_start is not None:
            self._start_blend(self._vec("theta_start", theta_start, (self.n,)))
        else:
            self._blend_left_s = 0.0
        cmd = self._blend_output(raw, advance=False)
        if not sol.found:
            _log.warning("SEIKO controller reset: runInit failed (%s): %s", sol.status, sol.message)
        diag = self._diagnostics(sol, t0, time.perf_counter() - t0, switched=True, ws=None)
        return self._output(cmd, {}, sol.found, diag)

    # ---------------------------------------------------------------- step

    def step(
        self,
        *,
        q_d: np.ndarray,
        v_d: np.ndarray,
        lam_d: Mapping[str, np.ndarray],
        lam_d_dot: Mapping[str, np.ndarray] | None,
        enabled: Mapping[str, bool],
        lam_read: Mapping[str, np.ndarray],
        tau_read: np.ndarray | None,
        theta_ahead: np.ndarray | None = None,
        integrating: bool = True,
        lam_tilde: Mapping[str, np.ndarray] | None = None,
    ) -> ControllerOutput:
        """One control step (seiko.md §9.2 items 5-10).

        Args:
            q_d: (nq,) desired posture from the Retargeting (theta_d = q_d[7:]).
            v_d: (nv,) its rate; not used by the law (the feed-forward of the desired motion is
                inside ``t_J``, evaluated with the new theta_d), checked for shape only.
            lam_d: effector -> desired wrench of the enabled contacts ((6,) plane [f; tau] in
                LOCAL [N, N m]; (3,) point force in R_c [N]).
            lam_d_dot: effector -> its rate [N/s, N m/s] (Retargeting ``lam_dot``); missing
                entries or None mean zero.
            enabled: effector -> contact enabled (Retargeting state); effectors not listed are
                disabled. A change triggers the contact switch (targets frozen at
                the flexible pose, runInit x init_iterations, output blend); the release of a
                plane contact is deferred while its measured normal force is above
                ``release_max_force_n`` (``diagnostics["held"]``; during that hold the
                complementary filter (13) keeps running on it, unlike §6.5).
            lam_read: effector -> measured wrench (same layout); required for enabled contacts
                and, with ``release_max_force_n`` > 0, for disabled plane contacts (their
                release and the rise of their pose target use it).
            tau_read: (n,) measured joint torques [N m], for (12); None skips the update.
            theta_ahead: (n,) Retargeting ahead posture used for the output command [rad].
            integrating: False runs the controller in shadow: no QP integration, the offset is
                held, the complementary filter passes lam_read, and one runInit per step keeps
                the flexible state tracking the command.
            lam_tilde: effector -> complementary-filtered measured wrench (13) computed outside
                (the ``wrench_filter`` node, :class:`contactflow.seiko.stages.WrenchFilterStage`:
                same layout as ``lam_read``), used instead of the internal filter for the
                effectors listed whose filter is active this step (enabled and integrating;
                otherwise ``lam_read`` passes through, as inside). The internal filter's state
                is set to the value used, so a step without it continues seamlessly. None = the
                internal filter (default).

        Returns:
            ControllerOutput. On QP failure ``ok=False``, the offset and flexible state are
            held and ``diagnostics['status']`` gives the solver status.

        Raises:
            RuntimeError: called before :meth:`reset`.
            ContractError: wrong shapes, non-finite values or unknown / missing effectors.
        """
        if not self._is_reset:
            raise RuntimeError("SeikoController.step called before reset")
        t0 = time.perf_counter()
        cfg = self.config
        dt = cfg.dt_s
        if not self._index.keys() >= enabled.keys():
            self._check_names("enabled", enabled)
        key = tuple([bool(enabled.get(name, False)) for name in self.names])
        self._load_step_inputs((q_d, v_d, theta_ahead, tau_read), (lam_read, lam_d, lam_d_dot, lam_tilde), key)
        vin, rows, has = self._in_vecs, self._in_w, self._has
        q_d = vin[0]
        theta_ahead = None if theta_ahead is None else vin[2]
        tau_read = None if tau_read is None else vin[3]
        self.theta_d = q_d[7:].copy()

        # Contact switching (TaskSEIKO.cpp l.530-593); a released plane contact is first held
        # until its measured normal force is low (release_max_force_n, not in the paper).
        self._filter_normal_forces()
        switched = False
        for name in (self.names if (key != self._enabled_key or self._held_s or self._rise_m) else ()):
            want = bool(enabled.get(name, False))
            was = self._enabled[name]
            if want and name in self._held_s:  # enabled again while held: the contact stays
                del self._held_s[name]
                rise = self._rise_m.pop(name, 0.0)
                T = self.targets[name]  # back to the contact target before the hold's rise
                T.translation = T.translation - np.array([0.0, 0.0, rise])
            if not want and was and self._hold_for_release(name):
                continue
            if want and not was:
                self._rise_m.pop(name, None)
            elif not want and not was and name in self._rise_m:
                # after the switch: keep rising while touching (admittance on the measured f_z),
                # sink back to the Retargeting's pose once off the ground (< 0.2 x threshold)
                fn = self._fn_lp.get(name) or 0.0
                if fn > cfg.release_max_force_n:
                    v = min(cfg.release_lift_max_m_per_s, cfg.release_lift_gain * (fn - cfg.release_max_force_n))
                    self._rise_m[name] = min(cfg.release_lift_max_m, self._rise_m[name] + dt * v)
                elif fn < 0.2 * cfg.release_max_force_n:
                    self._rise_m[name] = max(0.0, self._rise_m[name] - dt * cfg.release_lift_max_m_per_s)
            if want != was:
                switched = True
                self._enabled[name] = want
                if want:
                    self._freeze_target(name)
                else:
                    self.targets.pop(name, None)
                self._lam_flex[name][:] = 0.0
                self._lam_flex_dot[name][:] = 0.0
        if switched:
            self._enabled_key = tuple(self._enabled[name] for name in self.names)
        init_sol = None
        if switched:
            init_sol = self._run_init_n(self.theta_d + self.offset, cfg.init_iterations)
            self._start_blend(self._last_cmd)
        if integrating and not self.integrating:
            self._start_blend(self._last_cmd)
        self.integrating = bool(integrating)

        # (6.6) wrench rates, (13) complementary filter, (10) feedback law.
        active = self._active
        active[:] = self._enabled_key
        missing = active & ~has[0]
        if missing.any():
            name = self.names[int(np.flatnonzero(missing)[0])]
            raise ContractError(f"SeikoController: lam_read has no entry for enabled effector {name!r}")
        if not self.integrating:
            active[:] = False
        read = rows[0]
        lt_rows = self._cfilt.update(read, self._lam_flex_dot_rows, active, has[0],
                                     external=rows[3] if lam_tilde is not None else None, has_external=has[3])
        lt_copy = lt_rows.copy()
        lam_tilde_out = {name: lt_copy[i, : self._dims[i]] for i, name in enumerate(self.names) if has[0, i]}
        ws = self._workspace()
        # (10) on every effector's row at once, gathered for the enabled ones:
        # lam_d_dot + K_p (lam_d - lam_tilde) + kd_sign K_d lam_dot_read; a contact held for its
        # release has lam_d = 0 and no lam_d_dot.
        dlam_effort = self._effort_rows
        np.subtract(rows[1], lt_rows, out=dlam_effort)
        dlam_effort *= cfg.kp_per_s
        kdr = cfg.kd_sign * cfg.kd
        if cfg.kd > 0.0:
            for i, name in enumerate(self.names):
                if has[0, i]:
                    rate = self._rate[name].update(read[i, : self._dims[i]], dt)
                    if self._enabled[name]:
                        dlam_effort[i, : self._dims[i]] += kdr * rate
        dlam_effort += rows[2]
        for i in ws.idx_on:
            name = self.names[i]
            if name in self._held_s:
                np.multiply(lt_rows[i], -cfg.kp_per_s, out=dlam_effort[i])
                if kdr != 0.0:
                    dlam_effort[i, : self._dims[i]] += kdr * self._rate[name].value
            elif not has[1, i]:
                raise ContractError(f"SeikoController: lam_d has no entry for enabled effector {name!r}")
        ws.effort[:] = self._effort_flat[ws.flat_sel]

        # (12) torque-limit update, from the previous tau_flex.
        if cfg.torque_limit_adaptation and tau_read is not None:
            if cfg.tau_read_cutoff_hz > 0.0:
                if self._tau_read_lp is None:
                    self._tau_read_lp = tau_read.copy()
                else:
                    a = self._tau_read_alpha
                    self._tau_read_lp *= a
                    self._tau_read_lp += (1.0 - a) * tau_read
                tau_read = self._tau_read_lp
            self._tau_adapt.update(tau_read, self.tau_flex, allow_lowering=self._qp_ok_prev)
            if self._tau_adapt.modified:
                self._report_torque_limits(tau_read)

        if init_sol is not None and not init_sol.found:
            sol = init_sol
            ws = None
        elif not self.integrating:
            sol = self._run_init(self.theta_d + self.offset)
            ws = None
            self._lam_flex_dot_rows[:] = 0.0
        else:
            sol = self._solve_qp11(ws, q_d)
            if sol.found:
                self._integrate(ws, sol.x)
            else:
                self._lam_flex_dot_rows[:] = 0.0
                self.tau_flex = self.K * (self.theta_d + self.offset - self.q_flex[7:])
        if not sol.found:
            _log.warning("SEIKO controller QP failed (%s): %s; holding the last offset", sol.status, sol.message)
        self._qp_ok_prev = bool(sol.found)
        raw = (self.theta_d if theta_ahead is None else theta_ahead) + self.offset
        cmd = self._blend_output(raw, advance=True)
        step_time = time.perf_counter() - t0
        diag = self._diagnostics(sol, t0, step_time, switched=switched, ws=ws)
        return self._output(cmd, lam_tilde_out, sol.found, diag)

    @property
    def filter_feedback(self) -> tuple[np.ndarray, np.ndarray]:
        """What the complementary filter (13) of the next step uses, for an external filter
        (:class:`contactflow.seiko.stages.WrenchFilterStage`): ``(lam_flex_dot, active)``, the
        (n_eff, 6) flexible-model wrench rates of the last step (rows in robot-file order; LOCAL
        for planes, R_c for points in the first 3 values) [N/s, N m/s] and the (n_eff,) flags
        "(13) filtered this effector in the last step" (enabled and integrating). Views: copy
        them to keep them."""
        return self._lam_flex_dot_rows, self._active

    def _report_torque_limits(self, tau_read: np.ndarray) -> None:
        """Log when (12) first lowers a joint's limit and when it is back at the URDF limit (an
        operator reaching "as far as allowed by the controller" should stop at the first)."""
        lim = self._tau_adapt.value
        engaged = lim < self._tau_adapt.tau_urdf
        if not (engaged != self._tau_engaged).any():
            return
        names = self.robot.joint_names
        for i in np.flatnonzero(engaged & ~self._tau_engaged):
            _log.warning(
                "torque limit (12): %s measured |tau| / tau_max = %.3f > %.2f; its limit in QP (11) is now %.1f N m "
                "(model torque frozen): stop moving this way", names[i], abs(tau_read[i]) / self._tau_adapt.tau_urdf[i],
                self.config.max_tau_ratio, lim[i])
        for i in np.flatnonzero(~engaged & self._tau_engaged):
            _log.info("torque limit (12): %s back at its URDF limit %.1f N m", names[i], lim[i])
        self._tau_engaged = engaged

    # ---------------------------------------------------------------- release on the measured force

    def _filter_normal_forces(self) -> None:
        """Low-pass the measured normal force of the plane contacts (this step's ``lam_read``)."""
        a = self._fn_alpha
        read, has = self._in_w[0], self._has[0]
        for name in self._fn_lp:
            i = self._index[name]
            if not has[i]:
                continue
            fn = float(read[i, 2])
            prev = self._fn_lp[name]
            self._fn_lp[name] = fn if prev is None else a * prev + (1.0 - a) * fn

    def _hold_for_release(self, name: str) -> bool:
        """True while the released plane contact ``name`` stays enabled (measured f_z too high);
        raises its contact target meanwhile (``release_*`` of :class:`ControllerConfig`)."""
        cfg = self.config
        fn = self._fn_lp.get(name)
        if cfg.release_max_force_n <= 0.0 or fn is None:
            return False
        held = self._held_s.get(name)
        if held is None:
            if fn < cfg.release_max_force_n:
                self._rise_m.pop(name, None)
                return False
            _log.info("SEIKO controller: %s released by the Retargeting with %.1f N measured; "
                      "unloading it before the switch", name, fn)
            held = 0.0
            self._rise_m[name] = 0.0
        elif fn < cfg.release_max_force_n or held >= cfg.release_timeout_s:
            if fn >= cfg.release_max_force_n:
                _log.warning("SEIKO controller: %s still carries %.1f N after %.1f s; switching anyway", name, fn, held)
            del self._held_s[name]
            return False
        x = min(1.0, held / cfg.release_ramp_s) if cfg.release_ramp_s > 0.0 else 1.0
        v = min(cfg.release_lift_max_m_per_s, cfg.release_lift_gain * max(0.0, fn)) * 0.5 * (1.0 - math.cos(math.pi * x))
        dz = min(cfg.dt_s * v, max(0.0, cfg.release_lift_max_m - self._rise_m[name]))
        T = self.targets[name]
        T.translation = T.translation + np.array([0.0, 0.0, dz])
        self._rise_m[name] += dz
        self._held_s[name] = held + cfg.dt_s
        return True

    # ---------------------------------------------------------------- QP (11)

    def _workspace(self) -> _Workspace:
        key = self._enabled_key
        ws = self._ws_cache.get(key)
        if ws is None:
            ws = _Workspace(self, key)
            self._ws_cache[key] = ws
        return ws

    def _solve_qp11(self, ws: _Workspace, q_d: np.ndarray) -> QPSolution:
        """Assemble QP (11) in the workspace (effort of (10) in ``ws.effort``) and solve it."""
        cfg = self.config
        dt = cfg.dt_s
        nv = self.nv
        on = ws.contacts
        model, data = self.model, self.data
        terms = equilibrium_terms(
            model, data, self.q_flex, on, ws.lam_flex_on, [self.R_c.get(name) for name in ws.names_on]
        )
        theta_cmd = self.theta_d + self.offset
        tau_flex = self.K * (theta_cmd - self.q_flex[7:])
        self.tau_flex = tau_flex
        dmin, dmax = self._dmin, self._dmax  # joint-limit margins of the offset (also for _integrate)
        np.subtract(self.theta_min, self.theta_d, out=dmin)
        np.subtract(self.theta_max, self.theta_d, out=dmax)
        # T = [dr/dq + S K S^T | -J^T], t = r - S tau_flex (eq. 5).
        T, t = ws.T, ws.t
        T[:, :nv] = terms.dr_dq
        ws.T_jdiag += self.K
        np.negative(terms.J.T, out=T[:, nv:])
        np.copyto(t, terms.r)
        t[6:] -= tau_flex
        T_J, t_J = T[6:], t[6:]
        # theta_cmd_dot = M x + c / dt (eq. 7).
        M = ws.M
        np.multiply(self._K_inv_col, T_J, out=M)
        c_vec = self.K_inv * t_J
        # offset + K^-1 t_J: the offset after this step for x = 0 ((11d), (11h) and the offset bound)
        offset_x0 = self.offset + c_vec
        H, g = ws.H, ws.g
        # (11e) + (11d): w_e ||M x + c/dt||^2 + w_d ||dt M x + offset + c||^2.
        w_e, w_d = cfg.weight_cmd_change, cfg.weight_cmd_offset
        np.matmul(M.T, M, out=H)
        H *= w_e + w_d * dt * dt
        v = offset_x0 * (w_d * dt)
        v += c_vec * (w_e / dt)
        np.dot(M.T, v, out=g)  # (np.dot: less per-call overhead than matmul here, same BLAS product)
        # Base regularisation and (11b) wrench-rate tracking: constant diagonal, - w effort.
        ws.H_diag += ws.H_const_diag
        g[nv:] -= ws.w_wrench * ws.effort
        # (11c) disabled effectors and enabled-point orientation, targets = FK of q_d: all the
        # pose rows stacked (LOCAL Jacobians, LOCAL errors), one weighted product.
        oMf = data.oMf
        if ws.pose:
            data_d = self._data_d
            pin.forwardKinematics(model, data_d, q_d)
            for fid in ws.pose_frames:
                pin.updateFramePlacement(model, data_d, fid)
            oMf_d = data_d.oMf
            for name, fid, src, Jrows, e_pos, e_rot in ws.pose:
                Jrows[:] = pin.getFrameJacobian(model, data, fid, pin.LOCAL)[src]
                cur = oMf[fid]
                D = cur.actInv(oMf_d[fid])  # R^T (p_t - p), R^T R_t
                if e_pos is not None:
                    e_pos[:] = D.translation
                    rise = self._rise_m.get(name)
                    if rise is not None:
                        e_pos += rise * cur.rotation[2]  # R^T [0, 0, rise]
                if e_rot is not None:
                    e_rot[:] = pin.log3(D.rotation)
            Jp, WJ = ws.J_pose, ws.WJ_pose
            np.multiply(ws.w_pose_col, Jp, out=WJ)
            np.dot(Jp.T, WJ, out=ws.H_pose)
            H[:nv, :nv] += ws.H_pose
            np.dot(WJ.T, ws.e_pose, out=ws.g_pose)
            ws.g_pose *= cfg.gain_pose / dt
            g[:nv] -= ws.g_pose
        # Equalities (lo = hi): (11g) contacts stay at their frozen targets, in the rows of J
        # (planes: LOCAL [R^T (p_t - p); log3(R^T R_t)], points: R_c^T (p_t - p)); (11f) base rows.
        A, lo, hi = ws.A, ws.lo, ws.hi
        for name, fid, plane, e_pos, e_rot in ws.contact_rows:
            tgt = self.targets[name]
            if plane:
                D = oMf[fid].actInv(tgt)
                e_pos[:] = D.translation
                e_rot[:] = pin.log3(D.rotation)
            else:
                np.subtract(tgt.translation, oMf[fid].translation, out=ws.tmp3)
                np.dot(ws.tmp3, self.R_c[name], out=e_pos)
        ws.A_c[:] = terms.J
        ws.lo_c /= dt
        ws.A_B[:] = T[:6]
        np.divide(t[:6], -dt, out=ws.lo_B)
        ws.hi_eq[:] = ws.lo_eq
        # Inequalities, scaled by weight_ineq: command rows (11h) and |offset| bound, one
        # two-sided row per joint on dt theta_cmd_dot (the intersection of both intervals) ...
        s = cfg.weight_ineq
        L = cfg.max_pos_cmd_offset_rad
        np.multiply(M, s * dt, out=ws.A_P)
        np.maximum(dmin, -L, out=ws.lo_P)  # max(theta_min - theta_cmd, -L - offset) - c
        np.minimum(dmax, L, out=ws.hi_P)
        bounds_P = ws.bounds_P  # both sides at once
        bounds_P -= offset_x0
        bounds_P *= s
        # ... and (11i): |tau_flex + t_J + dt (T_J x - K theta_dot)| <= tau_lim.
        np.multiply(T_J, s * dt, out=ws.A_N)
        ws.A_N_jdiag -= self._weight_ineq_dt_K
        # Without (11i) the rows stay (fixed QP size) with a bound that never binds.
        tau_lim = self._tau_adapt.value if cfg.torque_limit_constraint else _NO_TORQUE_LIMIT_NM
        tt = tau_flex + t_J
        np.add(tau_lim, tt, out=ws.lo_N)
        ws.lo_N *= -s
        np.subtract(tau_lim, tt, out=ws.hi_N)
        ws.hi_N *= s
        t6 = t[:6]
        self._last_bias = (math.sqrt(float(t6.dot(t6))), math.sqrt(float(c_vec.dot(c_vec))))
        self._c_vec = c_vec
        # solved in the workspace's buffers, H regularised in place (qp_reg * max(1, max|diag H|);
        # H is rebuilt every step)
        t_solve = time.perf_counter()
        sol = ws.qp.solve(solver=cfg.qp_solver, reg=cfg.qp_reg, tol=cfg.qp_tol)
        self._solve_time = time.perf_counter() - t_solve
        if self.qp_hook is not None:
            self.qp_hook(H, g, A, lo, hi, None, None, sol)
        return sol

    def _integrate(self, ws: _Workspace, x: np.ndarray) -> None:
        cfg = self.config
        dt = cfg.dt_s
        nv = self.nv
        theta_cmd_dot = ws.M.dot(x)
        theta_cmd_dot += self._c_vec / dt
        self._theta_cmd_dot = theta_cmd_dot
        self.q_flex = pin.integrate(self.model, self.q_flex, dt * x[:nv])
        # enabled effectors: lam_flex += dt lam_flex_dot; disabled ones keep lam_flex = 0 (set
        # at their switch) and get lam_flex_dot = 0
        xl = x[nv:]
        ldot = self._lam_flex_dot_flat
        ldot[:] = 0.0
        ldot[ws.flat_sel] = xl
        self._lam_flex_flat[ws.flat_sel] += dt * xl
        off = self.offset
        off += dt * theta_cmd_dot
        # clip to +-L, then to [theta_min - theta_d, theta_max - theta_d] (np.clip's wrapper
        # costs more than these four ufuncs)
        L = cfg.max_pos_cmd_offset_rad
        np.maximum(off, -L, out=off)
        np.minimum(off, L, out=off)
        np.maximum(off, self._dmin, out=off)
        np.minimum(off, self._dmax, out=off)
        self.tau_flex = self.K * (self.theta_d + off - self.q_flex[7:])

    # ---------------------------------------------------------------- output

    def _start_blend(self, start: np.ndarray) -> None:
        if self.config.command_blend_s > 0.0:
            self._blend_start = np.array(start, dtype=float)
            self._blend_left_s = self.config.command_blend_s

    def _blend_output(self, raw: np.ndarray, advance: bool) -> np.ndarray:
        """``FilterInterpolation``: linear blend from the start value to ``raw``."""
        if advance and self._blend_left_s > 0.0:
            self._blend_left_s = max(0.0, self._blend_left_s - self.config.dt_s)
        if self._blend_left_s > 0.0:
            a = self._blend_left_s / self.config.command_blend_s
            cmd = a * self._blend_start + (1.0 - a) * raw
        else:
            cmd = np.array(raw, dtype=float)
        self._last_cmd = cmd
        return cmd

    def _diagnostics(self, sol: QPSolution, t0: float, step_time: float, *, switched: bool, ws: _Workspace | None) -> dict:
        bias_b, bias_j = getattr(self, "_last_bias", (float("nan"), float("nan"))) if ws is not None else (float("nan"), float("nan"))
        return {
            "status": sol.status,
            "solve_time_s": getattr(self, "_solve_time", float("nan")) if ws is not None else float("nan"),
            "step_time_s": step_time,
            "eq_residual": sol.eq_residual,
            "ineq_violation": sol.ineq_violation,
            "n_active": sol.n_active,
            "bias_base_n": bias_b,
            "bias_joint_rad": bias_j,
            "n_var": ws.nx if ws is not None else self.nv + sum(c.dim for c in self.contacts_on),
            "n_eq": ws.n_eq if ws is not None else 0,
            "n_ineq": ws.n_in if ws is not None else 0,
            "n_rows": ws.n_rows if ws is not None else 0,
            "switched": switched,
            "held": sorted(self._held_s) if self._held_s else [],  # released by the Retargeting, held until unloaded
            "integrating": self.integrating,
            "message": sol.message,
        }

    def _lam_flex_copy(self) -> dict:
        rows = self._lam_flex_rows.copy()
        return {name: rows[i, :d] for i, (name, d) in enumerate(zip(self.names, self._dims))}

    def _output(self, cmd: np.ndarray, lam_tilde: dict, ok: bool, diag: dict) -> ControllerOutput:
        return ControllerOutput(
            theta_cmd=cmd,
            offset=self.offset.copy(),
            q_flex=self.q_flex,  # a new array at every update (pin.integrate, runInit, reset), never modified in place
            lam_flex=self._lam_flex_copy(),
            lam_tilde=lam_tilde,
            tau_flex=self.tau_flex,  # a new array every step, never modified in place
            tau_limit=self._tau_adapt.value.copy(),
            ok=bool(ok),
            diagnostics=diag,
        )
