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

Parts (the names users import stay importable from here): :mod:`~contactflow.seiko.controller_config`
(:class:`ControllerConfig`, :class:`ControllerOutput`), :mod:`~contactflow.seiko.flexible_equilibrium`
(runInit), :mod:`~contactflow.seiko.controller_qp` (the rows of QP (11), its assembly and
integration), :mod:`~contactflow.seiko.controller_switching` (the contact switch and the release
hold), :mod:`~contactflow.seiko.controller_inputs` (input checks); this module keeps
:class:`SeikoController` (state, reset, the step's sequence, output) and the surface frames.
"""

from __future__ import annotations

import logging
import time
import types
from typing import Callable, Mapping

import numpy as np
import pinocchio as pin

from contactflow.errors import ConfigError, ContractError
from contactflow.qp import QPSolution
from contactflow.robot import ContactSpec, Robot
from contactflow.seiko.controller_config import ControllerConfig, ControllerOutput
from contactflow.seiko.controller_inputs import StepInputsMixin
from contactflow.seiko.controller_qp import Qp11Mixin, Qp11Workspace
from contactflow.seiko.controller_switching import ContactSwitchingMixin
from contactflow.seiko.filters import ComplementaryWrenchFilterBank, ExponentialLowPass, TorqueLimitAdapter, WrenchRateEstimator, alpha_from_cutoff
from contactflow.seiko.native import FeedbackNative, kernel_for
from contactflow.seiko.flexible_equilibrium import flexible_equilibrium_residual, flexible_equilibrium_step
from contactflow.seiko.surfaces import DEFAULT_SURFACE_ROTATIONS

__all__ = [
    "ControllerConfig",
    "ControllerOutput",
    "SeikoController",
    "DEFAULT_SURFACE_ROTATIONS",
    "flexible_equilibrium_step",
    "flexible_equilibrium_residual",
]

_log = logging.getLogger(__name__)


class SeikoController(StepInputsMixin, ContactSwitchingMixin, Qp11Mixin):
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
        self._ws_cache: dict[tuple[bool, ...], Qp11Workspace] = {}  # QP (11) workspace per contact layout
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
        # low-pass of tau_read before (12) (tau_read_cutoff_hz > 0), else None
        self._tau_read_lp = (ExponentialLowPass(n, config.tau_read_cutoff_hz, dt) if config.tau_read_cutoff_hz > 0.0
                             else None)
        self._qp_ok_prev = True  # the last QP (11) succeeded: the (12) lowering extension may act
        self._tau_engaged = np.zeros(len(robot.joint_names), dtype=bool)  # (12) has lowered this joint's limit
        self._native = kernel_for(self.model, config.kernel, "ControllerConfig.kernel")
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
        # the filters (13) and (12) of the step in the compiled kernel too (contactflow/seiko/native.py)
        self._feedback = None if self._native is None else FeedbackNative(self._native, self)

    @property
    def kernel(self) -> str:
        """Who computes QP (11)'s rows: ``"native"`` (compiled) or ``"python"`` (``ControllerConfig.kernel``)."""
        return "python" if self._native is None else "native"

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
        self._invalidate_prepared()

    @property
    def contacts_on(self) -> list[ContactSpec]:
        """Enabled contacts, in robot-file order (the order of the stacked wrench)."""
        return [c for c in self.contacts if self._enabled[c.name]]

    # ---------------------------------------------------------------- runInit

    def _run_init(self, theta_cmd: np.ndarray) -> QPSolution:
        self._invalidate_prepared()  # self.data is used at other configurations
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
        if self._tau_read_lp is not None:
            self._tau_read_lp.reset()
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

        switched = self._switch_contacts(enabled, key)
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
        fb = self._feedback
        if fb is not None:  # the same computation, compiled (contactflow/native/seiko_qp11.cpp)
            fb.check()  # (once per step: also for torque12 below)
            lt_rows = fb.filter13(lam_tilde is not None)
        else:
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
            lp = self._tau_read_lp
            if fb is not None:  # the same computation, compiled
                self._tau_adapt.modified = fb.torque12(self.tau_flex, self._qp_ok_prev)
                if lp is not None:
                    tau_read = lp.value
            else:
                if lp is not None:
                    tau_read = lp.update(tau_read)
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

    def _diagnostics(self, sol: QPSolution, t0: float, step_time: float, *, switched: bool, ws: Qp11Workspace | None) -> dict:
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
