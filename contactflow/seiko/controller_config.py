"""Configuration and output of the SEIKO Controller (:class:`contactflow.seiko.controller.SeikoController`,
SEIKO RA-L 2024 §IV-B/C; Talos values of ``shared/reference/seiko.md`` §6).

* :class:`ControllerConfig`: the Controller's gains, weights, limits and solver, validated when built;
* :class:`ControllerOutput`: what :meth:`~contactflow.seiko.controller.SeikoController.reset` and
  :meth:`~contactflow.seiko.controller.SeikoController.step` return.

Both are importable from :mod:`contactflow.seiko.controller` too.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from contactflow.native import KERNELS
from contactflow.qp import QP_SOLVERS
from contactflow.seiko.config_checks import config_error, require_positive

__all__ = ["ControllerConfig", "ControllerOutput", "PAPER_KD"]

PAPER_KD = 0.02
"""K_d of (10) in the paper's experiments after Fig. 5 (RA-L 2024 §V-C) [-]; not the default
(:attr:`ControllerConfig.kd`, docs/seiko_multicontact.md "The paper's settings")."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ControllerConfig:
    """SEIKO Controller parameters; defaults are the Talos values of seiko.md §6.

    All QP weights are in the code's rate form (decision variables are rates).

    Attributes:
        dt_s: control period [s] (500 Hz).
        kp_per_s: proportional gain K_p of the feedback law (10) [1/s] (code: 0.2; not in the paper).
            0.5 in ``robots/talos/seiko_fig7.yaml`` (the Fig. 7 grid); not the default, as it fails the
            early touchdown of Fig. 4 (docs/seiko_multicontact.md, "K_p = 0.5 on Figs. 3-6").
        kd: derivative gain K_d of (10) [-] (rate form: multiplies lam_dot_read [N/s] to give
            N/s). Default **0.0**; the paper's experiments use 0.02. Not shipped because
            0.02 with either sign makes a shipped experiment worse (measured, MuJoCo Talos:
            docs/seiko_multicontact.md "The paper's settings"): with the paper's sign the
            wall push holds 32 N of 75 N and the foot-lift unloading rate peaks at 90 N/s
            (criterion 80); with the code's sign the torso-push rocking decays more slowly.
        kd_sign: -1 for the paper's ``- K_d lam_dot_read`` (default), +1 for the released code.
            -1 is the sign derived from the flexible model for a wrench disturbance the command
            does not cause (docs/seiko_multicontact.md, "The paper's settings": the loop divides
            the measured wrench rate by 1 + K_d), and the damping one in closed loop for the
            whole-body rocking after a torso push (Fig. 5; ``tests/test_seiko_paper_settings.py``);
            for a stiff contact mode driven by the command itself (the hand on the wall) the
            estimator's ~41 ms lag makes +1 the damping one (same section).
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
        max_tau_ratio: rho of (12) [-]; default 0.75, the released code's. The paper states 0.6
            for its Fig. 6 experiment only (``robots/talos/seiko_far_reach.yaml``); as a default
            0.6 fires (12) on the stance hip (leg_left_2, 0.63 of its limit) in the foot lift
            and the unloading rate peaks at 252 N/s instead of 67 (criterion 80;
            docs/seiko_multicontact.md, "The paper's settings").
        tau_read_cutoff_hz: low-pass of ``tau_read`` before (12) [Hz]; default 5, the released
            code's joint-torque sensor filter (seiko.md §6.4, §9.2); 0 = unfiltered (then the
            start-up transient lowers limits at t = 0, docs/seiko_multicontact.md, Far reach).
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
        kernel: who computes QP (11)'s rows and costs and integrates its solution (the equilibrium
            terms (5), the command-rate map (7), (11b)-(11i)), one of :data:`contactflow.native.KERNELS`:
            ``"native"`` the compiled kernel (:mod:`contactflow.seiko.native`, built on first use;
            an error if it cannot be),
            ``"python"`` the numpy / pinocchio code of :mod:`contactflow.seiko.controller_qp` (the
            reference), ``"auto"`` (default) the compiled one when it builds, else Python with one
            warning. Same QP to rounding (``tests/test_seiko_native.py``).

    Raises:
        ConfigError: a value out of its range (the message names the class, the key and what was
            expected; :mod:`contactflow.seiko.config_checks`).
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
    tau_read_cutoff_hz: float = 5.0
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
    kernel: str = "auto"

    def __post_init__(self):
        if self.qp_solver not in QP_SOLVERS:
            raise config_error(self, "qp_solver", f"one of {', '.join(QP_SOLVERS)}", self.qp_solver)
        if self.kernel not in KERNELS:
            raise config_error(self, "kernel", f"one of {', '.join(KERNELS)}", self.kernel)
        if self.kd_sign not in (-1.0, 1.0):
            raise config_error(self, "kd_sign", "-1 or +1", self.kd_sign)
        require_positive(self, (
            "dt_s",
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
        ))
        require_positive(self, (
            "kp_per_s",
            "kd",
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
        ), strict=False)
        if not 0.0 <= self.torque_hysteresis < self.max_tau_ratio:
            raise config_error(self, "torque_hysteresis", f"a number in [0, max_tau_ratio = {self.max_tau_ratio})",
                               self.torque_hysteresis)
        if self.init_iterations < 1:
            raise config_error(self, "init_iterations", "an integer >= 1", self.init_iterations)


@dataclasses.dataclass(frozen=True)
class ControllerOutput:
    """Result of :meth:`~contactflow.seiko.controller.SeikoController.reset` / :meth:`~contactflow.seiko.controller.SeikoController.step`.

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

