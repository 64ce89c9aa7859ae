"""The compiled kernel of the SEIKO stages (``contactflow/native/seiko_qp11.cpp``) behind the same
buffers as their Python code.

:class:`SeikoKernel` holds the kernel's copy of the pinocchio model (one per model in a
process, shared by the stages: :func:`kernel_for` gives it to a stage for its ``kernel`` setting). For the Controller,
:class:`Qp11NativeLayout`: one contact layout (one per :class:`~contactflow.seiko.controller_qp.Qp11Workspace`):
its own pinocchio data and pointers to the workspace's and the Controller's buffers, which the kernel
reads and writes in place. What the kernel computes, and in which buffers, is what
:meth:`~contactflow.seiko.controller_qp.Qp11Mixin._prepare_qp11`, ``_solve_qp11`` (up to the solve) and
``_integrate`` compute in Python (SEIKO RA-L 2024 eqs. (5), (7), (11b)-(11i); seiko.md §6.2); the
QP is solved by :class:`contactflow.qp.BoxQP` either way. :class:`FeedbackNative`: the Controller's
filters (13) and (12) of a step (:mod:`contactflow.seiko.filters`), on the filters' own buffers.
``ControllerConfig.kernel`` chooses.
For the Retargeting, :class:`RetargetingKinematics`: the pinocchio part of a step of QP (9) (the
centroidal map, :func:`contactflow.seiko.equilibrium.equilibrium_terms`, the effector Jacobians and
poses) in one call; ``RetargetingConfig.kernel`` chooses.
"""

from __future__ import annotations

import ctypes
import logging
import weakref
from typing import TYPE_CHECKING

import numpy as np
import pinocchio as pin

from contactflow import native
from contactflow.errors import ConfigError, ContactflowError

if TYPE_CHECKING:
    from contactflow.seiko.controller import SeikoController
    from contactflow.seiko.controller_qp import Qp11Workspace

__all__ = ["SeikoKernel", "Qp11NativeLayout", "FeedbackNative", "RetargetingKinematics", "kernel_for"]

_ERRLEN = 1024
_log = logging.getLogger(__name__)
_warned = False  # the compiled kernel's absence is logged once per process
_kernels: "weakref.WeakValueDictionary[str, SeikoKernel]" = weakref.WeakValueDictionary()


def kernel_for(model: pin.Model, choice: str, key: str) -> "SeikoKernel | None":
    """The compiled kernel for a stage whose ``kernel`` setting (``key``, for the messages) is
    ``choice`` (one of :data:`contactflow.native.KERNELS`), or None for the Python code.

    Raises:
        ConfigError: ``"native"`` asked and the kernel cannot be built or loaded (the reason).
    """
    if choice == "python":
        return None
    try:
        # one kernel (one C++ copy of the model) per model in a process: the two stages of an
        # in-process loop share it (fewer cache lines per tick)
        text = model.saveToString()
        kernel = _kernels.get(text)
        if kernel is None:
            kernel = _kernels[text] = SeikoKernel(model, text)
        return kernel
    except ContactflowError as exc:  # NativeBuildError, or a library that does not fit this module
        if choice == "native":
            raise ConfigError(f"{key}: 'native' asked, but {exc}") from exc
        global _warned
        if not _warned:
            _warned = True
            _log.warning("SEIKO: the compiled kernel is not available, the stages run their Python code (same results, "
                         "slower; `kernel: python` in the stages' configs silences this): %s", exc)
        return None


def _ptr(a: np.ndarray, dtype=np.float64) -> int:
    """The address of ``a``'s data, which the kernel reads or writes as C-contiguous ``dtype``."""
    if a.dtype != dtype or not a.flags.c_contiguous:
        raise ContactflowError(f"native SEIKO kernel: a buffer is not C-contiguous {np.dtype(dtype)} ({a.dtype}, {a.shape})")
    return a.__array_interface__["data"][0]


class _Native:
    """An object of the compiled library: its handle (``_handle``, freed with the object by ``_free``)
    and the error buffer of its calls (``_err``, a call's message when it returns non-zero)."""

    _what = "native SEIKO kernel"
    _handle = None

    def _bind(self, free, new, *args) -> None:
        """``new(*args, err, errlen)``: the handle, or a ContactflowError with the library's message."""
        self._free = free
        self._err = ctypes.create_string_buffer(_ERRLEN)
        handle = new(*args, self._err, _ERRLEN)
        if not handle:
            raise ContactflowError(f"{self._what}: {self._err.value.decode(errors='replace')}")
        self._handle = ctypes.c_void_p(handle)

    def _call(self, fn) -> None:
        """``fn(handle, err, errlen)``; raises ContactflowError with the library's message on failure."""
        if fn(self._handle, self._err, _ERRLEN) != 0:
            raise ContactflowError(f"{self._what}: {self._err.value.decode(errors='replace')}")

    def __del__(self):
        if self._handle is not None:
            self._free(self._handle)
            self._handle = None


class SeikoKernel(_Native):
    """The compiled kernel's pinocchio model (a copy of ``model``, passed as pinocchio's text
    serialisation).

    Raises:
        native.NativeBuildError: the library cannot be built or loaded.
        ContactflowError: the kernel's model does not match ``model`` (sizes).
    """

    def __init__(self, model: pin.Model, text: str | None = None):
        self.lib = native.load("seiko_qp11")
        text = (model.saveToString() if text is None else text).encode()
        self._bind(self.lib.cf_kernel_free, self.lib.cf_kernel_new, text, len(text))
        sizes = (ctypes.c_int64 * 4)()
        self.lib.cf_kernel_sizes(self._handle, sizes)
        if (sizes[0], sizes[1], sizes[2], sizes[3]) != (model.nq, model.nv, model.njoints, model.nframes):
            raise ContactflowError(f"native SEIKO kernel: its model has (nq, nv, njoints, nframes) = {tuple(sizes)}, "
                                   f"the stage's {(model.nq, model.nv, model.njoints, model.nframes)}")
        self.nq, self.nv = model.nq, model.nv


class Qp11NativeLayout(_Native):
    """One contact layout of the compiled kernel, bound to the buffers of ``ws`` and ``ctrl``.

    Attributes (views of :attr:`io`, the kernel's per-step inputs and outputs): ``q_flex`` (nq,)
    the configuration prepared for; ``q_d`` (nq,); ``tau_lim`` (n,) [N m]; ``targets`` (n_eff, 12)
    contact targets ``[p (3); R row-major (9)]`` (world); ``rise`` (n_eff,) release rise of the
    pose targets [m]; ``x`` (nx,) the QP solution to integrate; ``tau_flex`` (n,) [N m]; ``bias``
    (2,); ``c_vec`` (n,); ``q_out`` (nq,) the integrated q_flex.
    """

    _what = "native QP (11) kernel"

    def __init__(self, kernel: SeikoKernel, ctrl: "SeikoController", ws: "Qp11Workspace"):
        cfg = ctrl.config
        self.kernel = kernel  # (the layout's C++ object points to the kernel's model)
        lib = kernel.lib
        n_eff = len(ctrl.contacts)
        index = {c.name: i for i, c in enumerate(ctrl.contacts)}
        on_eff = list(ws.idx_on)
        on_frame = [c.frame_id for c in ws.contacts]
        on_plane = [int(c.type == "plane") for c in ws.contacts]
        pose_eff, pose_frame, pose_pos, pose_rot, pose_row = [], [], [], [], []
        row = 0
        for name, fid, src, Jrows, e_pos, e_rot in ws.pose:
            pos, rot = e_pos is not None, e_rot is not None
            pose_eff.append(index[name])
            pose_frame.append(fid)
            pose_pos.append(int(pos))
            pose_rot.append(int(rot))
            pose_row.append(row)
            row += 3 * (pos + rot)
        ints = [ctrl.nq, ctrl.nv, ctrl.n, n_eff, ws.m, len(on_eff), len(ws.w_pose), len(pose_eff),
                *on_eff, *on_frame, *on_plane, *pose_eff, *pose_frame, *pose_pos, *pose_rot, *pose_row]
        self._ints = np.array(ints, dtype=np.int64)
        self._dbls = np.array([cfg.dt_s, cfg.weight_cmd_change, cfg.weight_cmd_offset, cfg.weight_ineq,
                               cfg.max_pos_cmd_offset_rad, cfg.gain_pose])
        # io sized as the kernel lays it out (checked against cf_layout_io_size below)
        nq, n, nx = ctrl.nq, ctrl.n, ws.nx
        self.io = np.zeros(2 * nq + n + 12 * n_eff + n_eff + nx + n + 2 + n + nq)
        o = 0
        views = {}
        for key, size in (("q_flex", nq), ("q_d", nq), ("tau_lim", n), ("targets", 12 * n_eff), ("rise", n_eff),
                          ("x", nx), ("tau_flex", n), ("bias", 2), ("c_vec", n), ("q_out", nq)):
            views[key] = self.io[o : o + size]
            o += size
        self.q_flex, self.q_d, self.tau_lim = views["q_flex"], views["q_d"], views["tau_lim"]
        self.targets = views["targets"].reshape(n_eff, 12)
        self.rise, self.x, self.tau_flex = views["rise"], views["x"], views["tau_flex"]
        self.bias, self.c_vec, self.q_out = views["bias"], views["c_vec"], views["q_out"]
        # what the kernel reads per step from the Controller: R_c rows of the point contacts
        self.R_c = np.zeros((n_eff, 3, 3))
        self.R_c[:] = np.eye(3)
        self.points_on = [(index[c.name], c.name) for c in ws.contacts if c.type == "point"]
        self.on = [(index[c.name], c.name) for c in ws.contacts]
        self.index = index
        # constants (copied by the kernel) and the buffers it keeps pointers to (alive with self)
        consts = [ws.w_pose, ws.w_wrench, ws.H_const_diag, ctrl.K, ctrl.K_inv, ctrl.theta_min, ctrl.theta_max,
                  ctrl._weight_ineq_dt_K]
        self._consts = [np.ascontiguousarray(c, dtype=float) for c in consts]
        self._bufs = [ws.H, ws.g, ws.A, ws.lo, ws.hi, ws.r, ws.M, ctrl.offset, ctrl._lam_flex_rows, ctrl._lam_flex_dot_rows,
                      ctrl._dmin, ctrl._dmax, ctrl._theta_cmd_dot, ws.effort, self.R_c, self.io]
        self._ptrs = np.array([_ptr(a) for a in self._consts + self._bufs], dtype=np.int64)
        self._owned = (ctrl.offset, ctrl._lam_flex_rows, ctrl._lam_flex_dot_rows, ctrl._dmin, ctrl._dmax, ctrl._theta_cmd_dot)
        self._bind(lib.cf_layout_free, lib.cf_layout_new, kernel._handle, _ptr(self._ints, np.int64), _ptr(self._dbls),
                   _ptr(self._ptrs, np.int64))
        if lib.cf_layout_io_size(self._handle) != self.io.size:
            raise ContactflowError("native QP (11) kernel: the library's io layout differs from this module's")
        self._prepare, self._assemble, self._integrate = lib.cf_prepare, lib.cf_assemble, lib.cf_integrate

    def prepare(self, ctrl: "SeikoController") -> None:
        """The flexible-state part of QP (11) at ``ctrl.q_flex`` and its lam_flex rows.

        Raises:
            ContactflowError: one of the Controller's state arrays the kernel writes in place was
                replaced by another array (the kernel would update the old one).
        """
        owned = self._owned
        if not (ctrl.offset is owned[0] and ctrl._lam_flex_rows is owned[1] and ctrl._lam_flex_dot_rows is owned[2]
                and ctrl._dmin is owned[3] and ctrl._dmax is owned[4] and ctrl._theta_cmd_dot is owned[5]):
            raise ContactflowError("native QP (11) kernel: a Controller state array (offset, lam_flex, lam_flex_dot, "
                                   "the offset margins or theta_cmd_dot) was replaced; write such arrays in place")
        np.copyto(self.q_flex, ctrl.q_flex)
        for i, name in self.points_on:
            self.R_c[i] = ctrl.R_c[name]
        self._call(self._prepare)

    def assemble(self, ctrl: "SeikoController", q_d: np.ndarray, tau_lim: np.ndarray | float) -> None:
        """The rest of QP (11) for this step (``ctrl.offset``, ``ws.effort`` as set), into the
        workspace's H, g, lo, hi; ``tau_flex``, ``bias``, ``c_vec`` of :attr:`io`."""
        np.copyto(self.q_d, q_d)
        self.tau_lim[:] = tau_lim
        targets = ctrl.targets
        for i, name in self.on:
            tgt = targets[name]
            row = self.targets[i]
            row[:3] = tgt.translation
            row[3:] = tgt.rotation.reshape(9)
        rise = ctrl._rise_m
        if rise or self.rise.any():
            self.rise[:] = 0.0
            for name, value in rise.items():
                self.rise[self.index[name]] = value
        self._call(self._assemble)

    def integrate(self, x: np.ndarray) -> None:
        """Integrate the solution ``x``: ``ctrl``'s lam_flex, lam_flex_dot, offset, theta_cmd_dot in
        place; the new q_flex in :attr:`q_out`, tau_flex in :attr:`tau_flex`."""
        np.copyto(self.x, x)
        self._call(self._integrate)


class FeedbackNative(_Native):
    """The Controller's feedback filters in the compiled kernel, on the Controller's and the
    filters' own buffers: the complementary filter (13) of
    :class:`~contactflow.seiko.filters.ComplementaryWrenchFilterBank` (:meth:`filter13`) and the
    tau_read low-pass (:class:`~contactflow.seiko.filters.ExponentialLowPass`) with
    :class:`~contactflow.seiko.filters.TorqueLimitAdapter` (12) (:meth:`torque12`): the same
    floating-point operations as their Python code, which stays the reference
    (``tests/test_seiko_native.py`` compares them bit for bit). The filters' constants (alpha, dt,
    rho, eps1-3, the lowering step) are copied when it is built; the arrays are bound by address,
    so the Controller and its filters must keep writing them in place (:meth:`check`, once per step).

    Raises:
        ContactflowError: a buffer of unexpected size, dtype or layout, or the library refused it.
    """

    _what = "native Controller filters"

    def __init__(self, kernel: SeikoKernel, ctrl: "SeikoController"):
        self.kernel = kernel
        lib = kernel.lib
        cf, ta, lp = ctrl._cfilt, ctrl._tau_adapt, ctrl._tau_read_lp
        n_eff, n = len(ctrl.contacts), ctrl.n
        # flags: [0] use the external lam_tilde rows, [1] tau_read low-pass (0 none, 1 seed, 2 update),
        # [2] allow_lowering, [3] (out) the adapter's `modified`
        self.flags = np.zeros(4, dtype=np.int64)
        self.tau_flex = np.zeros(n)  # the Controller's tau_flex of the step (a new array each step), copied here
        tau_lp = lp.value if lp is not None else np.zeros(n)
        self._ints = np.array([n_eff, n], dtype=np.int64)
        self._dbls = np.array([cf.alpha, cf.dt_s, ta.rho, ta.eps1, ta.eps2, ta.eps3, ta.lower_nm,
                               lp.alpha if lp is not None else 0.0])
        f8, b1 = np.float64, np.bool_
        bufs = [(cf._state, f8, 6 * n_eff), (cf._init, b1, n_eff), (ctrl._in_w[0], f8, 6 * n_eff),
                (ctrl._lam_flex_dot_rows, f8, 6 * n_eff), (ctrl._in_w[3], f8, 6 * n_eff), (ctrl._active, b1, n_eff),
                (ctrl._has[0], b1, n_eff), (ctrl._has[3], b1, n_eff), (ta.tau_urdf, f8, n), (ta._limit, f8, n),
                (ta._ratio, f8, n), (ta._abs_flex, f8, n), (ctrl._in_vecs[3], f8, n), (tau_lp, f8, n),
                (self.tau_flex, f8, n), (self.flags, np.int64, 4)]
        for arr, _, size in bufs:
            if arr.size != size:
                raise ContactflowError(f"native Controller filters: a buffer has {arr.size} entries, expected {size}")
        self._ptrs = np.array([_ptr(arr, dtype) for arr, dtype, _ in bufs], dtype=np.int64)
        self._ctrl = weakref.ref(ctrl)  # (no cycle: the Controller holds this object)
        self._held = self._bound(ctrl)
        self._bind(lib.cf_feedback_free, lib.cf_feedback_new, _ptr(self._ints, np.int64), _ptr(self._dbls),
                   _ptr(self._ptrs, np.int64))
        self._filter13, self._torque12 = lib.cf_filter13, lib.cf_torque12

    @staticmethod
    def _bound(ctrl: "SeikoController") -> tuple:
        """What the kernel's addresses point into, as ``ctrl`` holds it now: its filters and the arrays
        they and the Controller write in place."""
        cf, ta, lp = ctrl._cfilt, ctrl._tau_adapt, ctrl._tau_read_lp
        return (cf, ta, lp, cf._state, cf._init, ctrl._in, ctrl._has, ctrl._active, ctrl._lam_flex_dot_rows,
                ta.tau_urdf, ta._limit, ta._ratio, ta._abs_flex, None if lp is None else lp.value)

    def check(self) -> None:
        """Checks that the Controller still holds what the kernel was bound to (by identity): call it once
        per step before :meth:`filter13` and :meth:`torque12` (``SeikoController.step`` does).

        Raises:
            ContactflowError: the Controller, a filter or one of their arrays was replaced (the kernel
                would keep working on the old one).
        """
        ctrl = self._ctrl()
        if ctrl is None or any(a is not b for a, b in zip(self._bound(ctrl), self._held)):
            raise ContactflowError("native Controller filters: the Controller, one of its filters (13), (12) or an "
                                   "array they write in place was replaced; write such arrays in place")

    def filter13(self, external: bool) -> np.ndarray:
        """One step of (13) on every effector, as ``ComplementaryWrenchFilterBank.update`` on the
        Controller's input rows (lam_read; the external lam_tilde rows when ``external``), its
        lam_flex_dot rows and its active flags; writes the bank's state and init flags in place
        (after :meth:`check`).

        Returns:
            (n_eff, 6) the bank's state lam_tilde [N, N m] (a view).
        """
        self.flags[0] = external
        self._call(self._filter13)
        return self._held[3]

    def torque12(self, tau_flex: np.ndarray, allow_lowering: bool) -> bool:
        """The Controller's tau_read input through its low-pass (when it has one) and one step of
        ``TorqueLimitAdapter.update`` with ``tau_flex`` (n,) [N m]; writes the low-pass's value and
        the adapter's limits (and its ratio / |tau_flex| scratch) in place (after :meth:`check`).

        Returns:
            the adapter's ``modified`` (also to be set on it by the caller).
        """
        lp = self._held[2]
        np.copyto(self.tau_flex, tau_flex)
        flags = self.flags
        flags[1] = 0 if lp is None else (2 if lp.seeded else 1)
        flags[2] = allow_lowering
        self._call(self._torque12)
        if lp is not None:
            lp.seeded = True
        return bool(flags[3])


class _Pose:
    """A world pose as :func:`contactflow.seiko.equilibrium.pose_error_world` reads it: ``translation``
    (3,) and ``rotation`` (3, 3), views of the kernel's output."""

    __slots__ = ("translation", "rotation")

    def __init__(self, row: np.ndarray):
        self.translation = row[:3]
        self.rotation = row[3:].reshape(3, 3)


class RetargetingKinematics(_Native):
    """The pinocchio part of one step of the Retargeting's QP (9), compiled, for one contact layout.

    After :meth:`compute` (at ``q`` as written in :attr:`q`, the wrenches of the enabled contacts
    in ``lam_rows``): :attr:`A_G` (6, nv) centroidal momentum map; :attr:`r` (nv,), :attr:`dr_dq`
    (nv, nv), :attr:`J` (m, nv) as :func:`contactflow.seiko.equilibrium.equilibrium_terms` returns
    them; per effector (robot-file order) :attr:`J_frames` ``[i]`` (6, nv) its
    LOCAL_WORLD_ALIGNED Jacobian and :attr:`poses` ``[i]`` its world pose (``translation``,
    ``rotation``).

    Args:
        kernel: the compiled kernel (:func:`kernel_for`).
        specs: every effector's :class:`contactflow.robot.ContactSpec`, robot-file order.
        enabled: which are enabled (their wrenches enter the equilibrium).
        lam_rows: (n_eff, 6) the wrench rows (planes ``[f; tau]`` LOCAL, points the first 3 values
            in R_c), read at each :meth:`compute`.
        R_c: effector -> (3, 3) surface frame of the enabled point contacts, read at each
            :meth:`compute`.
    """

    _what = "native Retargeting kinematics"

    def __init__(self, kernel: SeikoKernel, specs, enabled, lam_rows: np.ndarray, R_c):
        self.kernel = kernel  # (the C++ object points to the kernel's model)
        lib = kernel.lib
        n_eff, nq, nv = len(specs), kernel.nq, kernel.nv
        on = [i for i, on in enumerate(enabled) if on]
        m = sum(specs[i].dim for i in on)
        self.q = np.zeros(nq)
        self.lam_rows = lam_rows
        self.R_c_rows = np.tile(np.eye(3), (n_eff, 1, 1))
        self._R_c, self._points = R_c, [(i, specs[i].name) for i in on if specs[i].type == "point"]
        self.A_G = np.zeros((6, nv))
        self.r = np.zeros(nv)
        self.dr_dq = np.zeros((nv, nv))
        self.J = np.zeros((m, nv))
        self.J_frames = np.zeros((n_eff, 6, nv))
        self._poses = np.zeros((n_eff, 12))
        self.poses = [_Pose(row) for row in self._poses]
        ints = [n_eff, m, len(on), n_eff, *on, *(specs[i].frame_id for i in on), *(int(specs[i].type == "plane") for i in on),
                *(c.frame_id for c in specs)]
        self._ints = np.array(ints, dtype=np.int64)
        bufs = [self.q, lam_rows, self.R_c_rows, self.A_G, self.r, self.dr_dq, self.J, self.J_frames, self._poses]
        self._ptrs = np.array([_ptr(a) for a in bufs], dtype=np.int64)
        self._bufs = bufs  # (alive as long as the C++ object that points to them)
        self._bind(lib.cf_kinematics_free, lib.cf_kinematics_new, kernel._handle, _ptr(self._ints, np.int64),
                   _ptr(self._ptrs, np.int64))
        self._compute = lib.cf_kinematics

    def compute(self, q: np.ndarray) -> None:
        """Everything listed in the class docstring, at ``q`` (nq,).

        Raises:
            ContactflowError: pinocchio refused the computation (the message says why).
        """
        np.copyto(self.q, q)
        for i, name in self._points:
            self.R_c_rows[i] = self._R_c[name]
        self._call(self._compute)
