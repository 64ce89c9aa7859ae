"""QP (9) of the SEIKO Retargeting: its row layout per contact set (seiko.md §4.1-4.6; the compact box
form of the module docstring of :mod:`contactflow.seiko.retargeting`): the cost rows that change every
step, the constant diagonal of the identity rows, the contact constraint rows (9k) split into
general rows and bounds, and the buffers of the :class:`contactflow.qp.BoxQP` that
:meth:`~contactflow.seiko.retargeting.SeikoRetargeting.step` fills.

:class:`Qp9LayoutMixin` is part of :class:`contactflow.seiko.retargeting.SeikoRetargeting` (its state lives there).
"""

from __future__ import annotations

import numpy as np

from contactflow.qp import BoxQP
from contactflow.seiko.equilibrium import contact_constraints

__all__ = ["Qp9LayoutMixin", "FREE", "PLANE_ON", "POINT_ON"]

#: the pose rows of an effector (:meth:`Qp9LayoutMixin._layout`): disabled (pose task (d)), enabled
#: plane (contact equality), enabled point (orientation task (e) and position equality)
FREE, PLANE_ON, POINT_ON = 0, 1, 2


class Qp9LayoutMixin:
    """The QP (9) layout of :class:`~contactflow.seiko.retargeting.SeikoRetargeting`."""

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
                self._pose_rows.append((k, c.frame_id, FREE, row, -1, *clamps, None))
                row += 6
                continue
            T = self._targets[k]
            target = (T.translation.copy(), T.rotation.copy())
            if c.type == "plane":
                self._pose_rows.append((k, c.frame_id, PLANE_ON, -1, row_eq, *clamps, target))
                row_eq += 6
            else:
                self._pose_rows.append((k, c.frame_id, POINT_ON, row, row_eq, *clamps, target))
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
            if mode == FREE:
                wd[r : r + 3] = par.pose_weight_pos
                wd[r + 3 : r + 6] = par.pose_weight_rot
            elif mode == POINT_ON:
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
        if self._native is not None:  # the compiled kinematics of this layout (RetargetingConfig.kernel)
            from contactflow.seiko.native import RetargetingKinematics

            self._kin = RetargetingKinematics(self._native, self._specs, [self._enabled[k] for k in self._names],
                                              self._lam_rows, self._R_c)

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
