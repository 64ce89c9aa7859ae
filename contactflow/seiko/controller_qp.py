"""QP (11) of the SEIKO Controller (SEIKO RA-L 2024 §IV-C; seiko.md §6.2): its row layout per contact
set (:class:`Qp11Workspace`), its assembly and solve, and the integration of its solution
(:class:`Qp11Mixin`, part of :class:`contactflow.seiko.controller.SeikoController`).

Rows and frames as the module docstring of :mod:`contactflow.seiko.controller` states: the (11g)
contact rows and the (11c) pose rows in each effector's own frame (planes and pose rows LOCAL,
points R_c), the (11f) base rows, then 2 n two-sided inequality rows ((11h) with the offset bound,
(11i)).
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

import numpy as np
import pinocchio as pin

from contactflow.qp import BoxQP, QPSolution
from contactflow.seiko.equilibrium import equilibrium_terms, pose_error_local

if TYPE_CHECKING:
    from contactflow.seiko.controller import SeikoController

__all__ = ["Qp11Workspace", "Qp11Mixin"]

#: (11i) bound used when ``torque_limit_constraint`` is off [N m]: never binds.
_NO_TORQUE_LIMIT_NM = 1e6


class Qp11Workspace:
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
        # The part of the QP that depends only on the flexible state (Qp11Mixin._prepare_qp11): the
        # Hessian before regularisation (copied into H at each solve: the solve regularises H in
        # place), r of the equilibrium terms, and the state it was computed for (the bytes of q_flex
        # and of the lam_flex rows); None = not prepared.
        self.H0 = np.zeros((nx, nx))
        self.H0_diag = np.einsum("ii->i", self.H0)
        self.r = np.zeros(nv)
        self.prepared_for: tuple | None = None
        # the compiled kernel's layout bound to these buffers (ControllerConfig.kernel), or None
        self.native = None
        if ctrl._native is not None:
            from contactflow.seiko.native import Qp11NativeLayout

            self.native = Qp11NativeLayout(ctrl._native, ctrl, self)


class Qp11Mixin:
    """The QP (11) part of :class:`~contactflow.seiko.controller.SeikoController` (its state lives
    there): the workspace of the current contact layout, the assembly and solve, the integration."""

    def _workspace(self) -> Qp11Workspace:
        key = self._enabled_key
        ws = self._ws_cache.get(key)
        if ws is None:
            ws = Qp11Workspace(self, key)
            self._ws_cache[key] = ws
        return ws

    def _prepared_key(self) -> tuple[bytes, bytes]:
        """What the prepared part of QP (11) depends on: the bytes of q_flex and of the lam_flex rows
        (compared by value: q_flex is also handed out in the outputs)."""
        return (self.q_flex.tobytes(), self._lam_flex_rows.tobytes())

    def prepare(self) -> bool:
        """Compute now the part of the next :meth:`step`'s QP (11) that depends only on the flexible
        state: the equilibrium terms (5) at ``(q_flex, lam_flex)``, the command-rate map M of (7),
        the Hessian of (11b)-(11e) with the (11c) pose rows, and the constraint rows of (11f)-(11i)
        (their bounds and the costs' linear terms need the next desired posture and the measured
        wrenches, and are left to :meth:`step`). A real-time node calls it right after sending its
        command, in the wait for the next sensors, so that the next step's latency from its
        sensors to its command is only the rest of the step; :meth:`step` uses the prepared part
        when the flexible state and the contact layout are still those it was prepared for, and
        computes it itself otherwise (after a contact switch, runInit or reset). The results are
        the same bit for bit either way (``tests/test_seiko_controller.py``).

        Returns:
            True when prepared; False when there is nothing to prepare (before :meth:`reset`, or
            while the Controller runs in shadow, ``integrating=False``).
        """
        if not self._is_reset or not self.integrating:
            return False
        ws = self._workspace()
        if not self._is_prepared(ws):
            self._prepare_qp11(ws)
        return True

    def _is_prepared(self, ws: Qp11Workspace) -> bool:
        return ws.prepared_for is not None and ws.prepared_for == self._prepared_key()

    def _invalidate_prepared(self) -> None:
        """Forget every prepared QP (11) part (``self.data`` was used at another configuration, or
        a surface frame R_c changed)."""
        for ws in self._ws_cache.values():
            ws.prepared_for = None

    def _prepare_qp11(self, ws: Qp11Workspace) -> None:
        """The flexible-state part of QP (11) into the workspace (see :meth:`prepare`). The Python
        kernel leaves ``self.data`` at ``q_flex`` (joint Jacobians, frame placements) for the rest of
        the step; the compiled one (``ws.native``) uses its own pinocchio data and leaves
        ``self.data`` as it was."""
        if ws.native is not None:  # the same computation, compiled (contactflow/native/seiko_qp11.cpp)
            ws.native.prepare(self)
            ws.prepared_for = self._prepared_key()
            return
        cfg = self.config
        dt = cfg.dt_s
        nv = self.nv
        model, data = self.model, self.data
        terms = equilibrium_terms(
            model, data, self.q_flex, ws.contacts, ws.lam_flex_on, [self.R_c.get(name) for name in ws.names_on]
        )
        np.copyto(ws.r, terms.r)
        # T = [dr/dq + S K S^T | -J^T] (eq. 5); its joint rows T_J.
        T = ws.T
        T[:, :nv] = terms.dr_dq
        ws.T_jdiag += self.K
        np.negative(terms.J.T, out=T[:, nv:])
        T_J = T[6:]
        # theta_cmd_dot = M x + c / dt (eq. 7), M = K^-1 T_J.
        M = ws.M
        np.multiply(self._K_inv_col, T_J, out=M)
        # (11e) + (11d): w_e ||M x + c/dt||^2 + w_d ||dt M x + offset + c||^2 -> (w_e + w_d dt^2) M^T M;
        # base regularisation and (11b) wrench-rate tracking: constant diagonal.
        H0 = ws.H0
        w_e, w_d = cfg.weight_cmd_change, cfg.weight_cmd_offset
        np.matmul(M.T, M, out=H0)
        H0 *= w_e + w_d * dt * dt
        ws.H0_diag += ws.H_const_diag
        # (11c) pose rows: LOCAL Jacobians at q_flex, one weighted product.
        if ws.pose:
            for name, fid, src, Jrows, e_pos, e_rot in ws.pose:
                Jrows[:] = pin.getFrameJacobian(model, data, fid, pin.LOCAL)[src]
            Jp, WJ = ws.J_pose, ws.WJ_pose
            np.multiply(ws.w_pose_col, Jp, out=WJ)
            np.dot(Jp.T, WJ, out=ws.H_pose)
            H0[:nv, :nv] += ws.H_pose
        # Rows: (11g) contacts (the rows of J), (11f) base rows T_B, (11h) + offset bound on
        # dt theta_cmd_dot, (11i) on dt (T_J x - K theta_dot), each scaled by weight_ineq.
        s = cfg.weight_ineq
        ws.A_c[:] = terms.J
        ws.A_B[:] = T[:6]
        np.multiply(M, s * dt, out=ws.A_P)
        np.multiply(T_J, s * dt, out=ws.A_N)
        ws.A_N_jdiag -= self._weight_ineq_dt_K
        ws.prepared_for = self._prepared_key()

    def _solve_qp11(self, ws: Qp11Workspace, q_d: np.ndarray) -> QPSolution:
        """Assemble QP (11) in the workspace (effort of (10) in ``ws.effort``) and solve it: the
        flexible-state part as :meth:`prepare` left it (computed here when it is not prepared
        for this state), then the terms of this step's desired posture and measurements."""
        if not self._is_prepared(ws):
            self._prepare_qp11(ws)
        cfg = self.config
        tau_lim = self._tau_adapt.value if cfg.torque_limit_constraint else _NO_TORQUE_LIMIT_NM
        if ws.native is not None:  # the same computation, compiled (contactflow/native/seiko_qp11.cpp)
            nat = ws.native
            nat.assemble(self, q_d, tau_lim)
            self.tau_flex = nat.tau_flex.copy()
            self._last_bias = (float(nat.bias[0]), float(nat.bias[1]))
        else:
            self._assemble_qp11(ws, q_d, tau_lim)
        H, g, A, lo, hi = ws.H, ws.g, ws.A, ws.lo, ws.hi
        # solved in the workspace's buffers, H regularised in place (qp_reg * max(1, max|diag H|);
        # H is copied from H0 every step)
        t_solve = time.perf_counter()
        sol = ws.qp.solve(solver=cfg.qp_solver, reg=cfg.qp_reg, tol=cfg.qp_tol)
        self._solve_time = time.perf_counter() - t_solve
        if self.qp_hook is not None:
            self.qp_hook(H, g, A, lo, hi, None, None, sol)
        return sol

    def _assemble_qp11(self, ws: Qp11Workspace, q_d: np.ndarray, tau_lim: np.ndarray | float) -> None:
        """This step's terms of QP (11) (Python kernel): H from the prepared H0, g, the bounds."""
        cfg = self.config
        dt = cfg.dt_s
        nv = self.nv
        model, data = self.model, self.data
        theta_cmd = self.theta_d + self.offset
        tau_flex = self.K * (theta_cmd - self.q_flex[7:])
        self.tau_flex = tau_flex
        dmin, dmax = self._dmin, self._dmax  # joint-limit margins of the offset (also for _integrate)
        np.subtract(self.theta_min, self.theta_d, out=dmin)
        np.subtract(self.theta_max, self.theta_d, out=dmax)
        # t = r - S tau_flex (eq. 5)
        t = ws.t
        np.copyto(t, ws.r)
        t[6:] -= tau_flex
        t_J = t[6:]
        M = ws.M
        c_vec = self.K_inv * t_J
        # offset + K^-1 t_J: the offset after this step for x = 0 ((11d), (11h) and the offset bound)
        offset_x0 = self.offset + c_vec
        H, g = ws.H, ws.g
        w_e, w_d = cfg.weight_cmd_change, cfg.weight_cmd_offset
        np.copyto(H, ws.H0)
        v = offset_x0 * (w_d * dt)
        v += c_vec * (w_e / dt)
        np.dot(M.T, v, out=g)  # (np.dot: less per-call overhead than matmul here, same BLAS product)
        # (11b): - w effort.
        g[nv:] -= ws.w_wrench * ws.effort
        # (11c) disabled effectors and enabled-point orientation, targets = FK of q_d: LOCAL errors.
        oMf = data.oMf
        if ws.pose:
            data_d = self._data_d
            pin.forwardKinematics(model, data_d, q_d)
            for fid in ws.pose_frames:
                pin.updateFramePlacement(model, data_d, fid)
            oMf_d = data_d.oMf
            for name, fid, src, Jrows, e_pos, e_rot in ws.pose:
                cur = oMf[fid]
                pose_error_local(oMf_d[fid], cur, e_pos, e_rot)  # R^T (p_t - p), log3(R^T R_t)
                if e_pos is not None:
                    rise = self._rise_m.get(name)
                    if rise is not None:
                        e_pos += rise * cur.rotation[2]  # R^T [0, 0, rise]
            np.dot(ws.WJ_pose.T, ws.e_pose, out=ws.g_pose)
            ws.g_pose *= cfg.gain_pose / dt
            g[:nv] -= ws.g_pose
        # Equalities (lo = hi): (11g) contacts stay at their frozen targets, in the rows of J
        # (planes: LOCAL [R^T (p_t - p); log3(R^T R_t)], points: R_c^T (p_t - p)); (11f) base rows.
        A, lo, hi = ws.A, ws.lo, ws.hi
        for name, fid, plane, e_pos, e_rot in ws.contact_rows:
            tgt = self.targets[name]
            if plane:
                pose_error_local(tgt, oMf[fid], e_pos, e_rot)
            else:
                np.subtract(tgt.translation, oMf[fid].translation, out=ws.tmp3)
                np.dot(ws.tmp3, self.R_c[name], out=e_pos)
        ws.lo_c /= dt
        np.divide(t[:6], -dt, out=ws.lo_B)
        ws.hi_eq[:] = ws.lo_eq
        # Inequalities, scaled by weight_ineq: command rows (11h) and |offset| bound, one
        # two-sided row per joint on dt theta_cmd_dot (the intersection of both intervals) ...
        s = cfg.weight_ineq
        L = cfg.max_pos_cmd_offset_rad
        np.maximum(dmin, -L, out=ws.lo_P)  # max(theta_min - theta_cmd, -L - offset) - c
        np.minimum(dmax, L, out=ws.hi_P)
        bounds_P = ws.bounds_P  # both sides at once
        bounds_P -= offset_x0
        bounds_P *= s
        # ... and (11i): |tau_flex + t_J + dt (T_J x - K theta_dot)| <= tau_lim.
        # Without (11i) the rows stay (fixed QP size) with a bound that never binds.
        tt = tau_flex + t_J
        np.add(tau_lim, tt, out=ws.lo_N)
        ws.lo_N *= -s
        np.subtract(tau_lim, tt, out=ws.hi_N)
        ws.hi_N *= s
        t6 = t[:6]
        self._last_bias = (math.sqrt(float(t6.dot(t6))), math.sqrt(float(c_vec.dot(c_vec))))
        self._c_vec = c_vec

    def _integrate(self, ws: Qp11Workspace, x: np.ndarray) -> None:
        if ws.native is not None:  # the same computation, compiled (contactflow/native/seiko_qp11.cpp)
            nat = ws.native
            nat.integrate(x)
            self.q_flex = nat.q_out.copy()
            self.tau_flex = nat.tau_flex.copy()
            return
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
