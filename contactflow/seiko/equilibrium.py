"""Quasi-static equilibrium, its linearisation and the contact-stability constraints of SEIKO.

Implements SEIKO RA-L 2024 eqs. (1)-(2) (Supp. B, eqs. 17-21) with the pinocchio-native
formulation of ``shared/reference/seiko.md`` §2.4, and the contact conditions of Supp. D
(eqs. 24-29, seiko.md §5).

Conventions:
    * ``q`` (nq,) pinocchio FreeFlyer configuration; tangent vectors (nv,) follow
      ``pin.integrate`` (base twist in the base frame).
    * A wrench ``lam`` is the action of the environment **on the robot**, linear first:
      plane contact ``[f; tau]`` (6,) in the LOCAL contact frame (z = surface normal);
      point contact ``f`` (3,) in a world-fixed surface frame ``R_c`` (world force ``R_c @ f``).
    * The equilibrium is ``g(q) = S tau + J(q)^T lam`` (eq. 1), and
      ``r(q, lam) = g(q) - J(q)^T lam`` so that ``r = S tau`` at equilibrium.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Sequence

import numpy as np
import pinocchio as pin

from contactflow.errors import ModelError
from contactflow.robot import ContactSpec

__all__ = [
    "EquilibriumTerms",
    "equilibrium_terms",
    "effector_jacobian_world",
    "pose_error_world",
    "pose_error_local",
    "plane_contact_constraints",
    "point_contact_constraints",
    "contact_constraints",
]


@dataclasses.dataclass(frozen=True)
class EquilibriumTerms:
    """Equilibrium quantities at ``(q, lam)`` (SEIKO eqs. 1-2).

    Attributes:
        r: (nv,) residual g(q) - J^T lam [N, N m]; its joint rows are the joint torques tau
            that hold the posture, its 6 base rows vanish at equilibrium.
        dr_dq: (nv, nv) dr/dq on the tangent space (``pin.integrate`` convention), with every
            lam held constant in its expression frame (planes: LOCAL; points: the world-fixed
            surface frame R_c, which adds the rotation term of seiko.md §2.4).
        J: (m, nv) stacked contact Jacobian, contacts in the given order, such that J^T lam is
            the generalised contact force. Plane rows: LOCAL frame Jacobian (6 rows, [v; w]);
            point rows: ``R_c^T @ J_LOCAL_WORLD_ALIGNED[:3]`` (3 rows).
        lam: (m,) the stacked wrenches the terms were computed with.
        gravity: (nv,) generalised gravity g(q) = r + J^T lam [N, N m] (computed on first use).
    """

    r: np.ndarray
    dr_dq: np.ndarray
    J: np.ndarray
    lam: np.ndarray

    @functools.cached_property
    def gravity(self) -> np.ndarray:
        return self.r + self.J.T @ self.lam if len(self.lam) else self.r.copy()


def _skew(v: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


class _ModelCache:
    """Scratch and constants of :func:`equilibrium_terms` for one ``(model, data)`` pair: a zero
    external-force vector (entries set for the call and reset after it) and each contact
    frame's parent joint and placement (``model.frames[i]`` copies the whole frame at every
    access). Held by the data object itself (attribute ``_CACHE_ATTR``): it lives as long as the
    data, and two threads, each with its own data (pinocchio's rule), never share the scratch."""

    def __init__(self, model: pin.Model):
        self.model = model  # compared by identity: a data reused with another model gets a new cache
        self.zero = pin.Force.Zero()
        self.fext = pin.StdVec_Force()
        for _ in range(model.njoints):
            self.fext.append(pin.Force.Zero())
        self.frames: dict[int, tuple[int, pin.SE3]] = {}

    def frame(self, frame_id: int) -> tuple[int, pin.SE3]:
        entry = self.frames.get(frame_id)
        if entry is None:
            fr = self.model.frames[frame_id]
            entry = self.frames[frame_id] = (fr.parentJoint, fr.placement.copy())
        return entry


_CACHE_ATTR = "_contactflow_equilibrium_cache"


def _model_cache(model: pin.Model, data: pin.Data) -> _ModelCache:
    cache = getattr(data, _CACHE_ATTR, None)
    if cache is None or cache.model is not model:
        cache = _ModelCache(model)
        setattr(data, _CACHE_ATTR, cache)
    return cache


def equilibrium_terms(
    model: pin.Model,
    data: pin.Data,
    q: np.ndarray,
    contacts: Sequence[ContactSpec],
    lams: Sequence[np.ndarray],
    R_cs: Sequence[np.ndarray | None],
) -> EquilibriumTerms:
    """Equilibrium residual r, its q-derivative and the contact Jacobian (seiko.md §2.2-2.4).

    One call to ``pin.computeStaticTorqueDerivatives`` gives dg/dq - sum d(J_LOCAL^T w)/dq for
    all contacts (forces frozen in their LOCAL frames). For a point contact the force is frozen
    in the world, which adds ``- J_L,lin^T [f_l]x J_L,ang`` (f_l = R^T R_c lam, J_L LOCAL).

    Side effect: ``data`` holds, at ``q``, the joint placements, joint Jacobians
    (``computeJointJacobians``) and frame placements (``updateFramePlacements``), so
    :func:`effector_jacobian_world` and ``data.oMf`` can be used right after this call.

    Args:
        model: pinocchio model (FreeFlyer root); treated as constant (its frames are cached).
        data: its data (reused; overwritten).
        q: (nq,) configuration.
        contacts: the contacts whose wrenches enter the equilibrium (usually the enabled ones).
        lams: per contact, (6,) [f; tau] in LOCAL [N, N m] for a plane, (3,) force in R_c [N]
            for a point.
        R_cs: per contact, the (3, 3) world-fixed surface frame R_c of a point contact
            (columns = surface axes in world, z = normal); ignored (may be None) for planes.

    Returns:
        EquilibriumTerms with J of shape (sum of contact dims, nv).

    Raises:
        ModelError: inconsistent lengths, a wrench of the wrong size, an unknown contact type
            or a point contact without R_c.
    """
    if not (len(contacts) == len(lams) == len(R_cs)):
        raise ModelError(
            f"equilibrium_terms: {len(contacts)} contacts, {len(lams)} wrenches, {len(R_cs)} surface frames"
        )
    nv = model.nv
    lams = [lam if type(lam) is np.ndarray and lam.dtype == np.float64 else np.asarray(lam, dtype=float) for lam in lams]
    m = 0
    points = False
    for c, lam in zip(contacts, lams):
        want = 6 if c.type == "plane" else 3 if c.type == "point" else None
        if want is None:
            raise ModelError(f"contact {c.name!r}: unknown type {c.type!r}")
        if lam.shape != (want,):
            what = "plane wrench" if want == 6 else "point force"
            raise ModelError(f"contact {c.name!r}: {what} must have shape ({want},), got {lam.shape}")
        m += want
        points = points or want == 3
    if points:  # a point force is frozen in R_c: its LOCAL value needs the frame placement at q
        pin.computeJointJacobians(model, data, q)
        pin.updateFramePlacements(model, data)
    # (without a point contact the kinematics comes with the torque derivatives below: they
    # compute the same joint placements and joint Jacobians as computeJointJacobians)
    cache = _model_cache(model, data)
    fext = cache.fext
    J = np.zeros((m, nv))
    rot_terms = []
    touched = []
    try:
        for c, lam, R_c in zip(contacts, lams, R_cs):
            parent, placement = cache.frame(c.frame_id)
            if c.type == "plane":
                f_local = pin.Force(lam)
            else:
                if R_c is None:
                    raise ModelError(f"contact {c.name!r}: a point contact needs its surface frame R_c")
                f_local = pin.Force(data.oMf[c.frame_id].rotation.T @ (np.asarray(R_c, dtype=float) @ lam), np.zeros(3))
            if parent in touched:  # a second contact on the same joint
                fext[parent] = fext[parent] + placement.act(f_local)
            else:  # (the zero force it replaces added nothing)
                touched.append(parent)
                fext[parent] = placement.act(f_local)
        r = pin.computeStaticTorque(model, data, q, fext)  # fresh arrays (pinocchio returns copies)
        dr_dq = pin.computeStaticTorqueDerivatives(model, data, q, fext)
    finally:
        zero = cache.zero
        for j in touched:
            fext[j] = zero
    if not points:
        pin.updateFramePlacements(model, data)
    row = 0
    for c, lam, R_c in zip(contacts, lams, R_cs):
        if c.type == "plane":
            J[row : row + 6] = pin.getFrameJacobian(model, data, c.frame_id, pin.LOCAL)
            row += 6
        else:
            R_c = np.asarray(R_c, dtype=float)
            f_l = data.oMf[c.frame_id].rotation.T @ (R_c @ lam)
            J_lwa = pin.getFrameJacobian(model, data, c.frame_id, pin.LOCAL_WORLD_ALIGNED)
            J[row : row + 3] = R_c.T @ J_lwa[:3]
            J_L = pin.getFrameJacobian(model, data, c.frame_id, pin.LOCAL)
            rot_terms.append(J_L[:3].T @ (_skew(f_l) @ J_L[3:]))
            row += 3
    for term in rot_terms:
        dr_dq -= term
    lam = np.concatenate(lams) if m else np.zeros(0)
    return EquilibriumTerms(r=r, dr_dq=dr_dq, J=J, lam=lam)


def effector_jacobian_world(model: pin.Model, data: pin.Data, frame_id: int) -> np.ndarray:
    """Frame Jacobian in LOCAL_WORLD_ALIGNED, rows [linear; angular].

    Maps the tangent velocity v (nv,) to the frame origin's world linear velocity [m/s] and its
    world angular velocity [rad/s]. The angular rows are the derivative of the world rotation
    vector ``pin.log3(R_t @ R.T)`` used by SEIKO's pose tasks (seiko.md §2.4).

    Requires ``pin.computeJointJacobians(model, data, q)`` and
    ``pin.updateFramePlacements(model, data)`` at the current q (both done by
    :func:`equilibrium_terms`).

    Args:
        model: pinocchio model.
        data: its data, prepared as above.
        frame_id: pinocchio frame index.

    Returns:
        (6, nv) Jacobian.
    """
    return pin.getFrameJacobian(model, data, frame_id, pin.LOCAL_WORLD_ALIGNED)


def pose_error_world(p_t: np.ndarray, R_t: np.ndarray, current: pin.SE3, out: np.ndarray, rotation: bool = True) -> np.ndarray:
    """World pose error of ``current`` towards the target ``(p_t, R_t)``, the right-hand side of
    SEIKO's pose tasks and contact equalities on :func:`effector_jacobian_world` rows (seiko.md
    §2.4, §4.2): ``out[:3] = p_t - p`` [m] and, with ``rotation``, ``out[3:6] = log3(R_t R^T)``
    [rad] (world rotation vector). Reads the SE3 translation and rotation without a copy of it.

    Args:
        p_t: (3,) target position in world [m]. R_t: (3, 3) target rotation (world).
        current: the current world pose of the frame.
        out: (6,) (or (3,) without ``rotation``) buffer written.
        rotation: also write the rotation error.

    Returns:
        ``out``.
    """
    np.subtract(p_t, current.translation, out=out[:3])
    if rotation:
        out[3:6] = pin.log3(R_t.dot(current.rotation.T))
    return out


def pose_error_local(target: pin.SE3, current: pin.SE3, pos_out: np.ndarray | None, rot_out: np.ndarray | None) -> None:
    """LOCAL pose error of ``current`` towards ``target``, the right-hand side of pose rows and
    contact equalities on ``pin.LOCAL`` Jacobian rows (the Controller's QP (11), seiko.md §6.2 in
    the effector's own frame): ``pos_out = R^T (p_t - p)`` [m] and ``rot_out = log3(R^T R_t)``
    [rad], with ``(p, R)`` the current and ``(p_t, R_t)`` the target world pose. The rotation
    of :func:`pose_error_world` expressed in the local frame: ``log3(R^T R_t) = R^T log3(R_t R^T)``.

    Args:
        target, current: world poses of the frame.
        pos_out: (3,) buffer for the position error, or None (not computed).
        rot_out: (3,) buffer for the rotation error, or None (not computed).
    """
    D = current.actInv(target)
    if pos_out is not None:
        pos_out[:] = D.translation
    if rot_out is not None:
        rot_out[:] = pin.log3(D.rotation)


def plane_contact_constraints(
    mu: float, cop_x: float, cop_y: float, fz_min: float, fz_max: float
) -> tuple[np.ndarray, np.ndarray]:
    """Plane-contact stability constraints ``C @ lam + c >= 0`` (Supp. D eqs. 24-27; seiko.md §5.1).

    ``lam = [fx, fy, fz, tx, ty, tz]`` in the LOCAL contact frame (z = normal), on the robot.

    Rows: 0-1 normal-force bounds (24, 28); 2-5 square friction pyramid (25); 6-9 CoP rectangle
    |ty| <= X fz, |tx| <= Y fz (26); 10-17 torsional friction (27), Caron et al. ICRA 2015:
    for s1, s2 in {+1, -1}:
    ``tz + mu(X+Y) fz - s1 (Y fx - mu tx) - s2 (X fy - mu ty) >= 0`` and
    ``-tz + mu(X+Y) fz - s1 (Y fx + mu tx) - s2 (X fy + mu ty) >= 0``.

    Args:
        mu: friction coefficient [-].
        cop_x: CoP half-length X along the contact x axis [m].
        cop_y: CoP half-length Y along the contact y axis [m].
        fz_min: minimum normal force [N].
        fz_max: maximum normal force [N].

    Returns:
        C: (18, 6), c: (18,).
    """
    X, Y = float(cop_x), float(cop_y)
    C = np.zeros((18, 6))
    c = np.zeros(18)
    FX, FY, FZ, TX, TY, TZ = range(6)
    C[0, FZ], c[0] = 1.0, -fz_min
    C[1, FZ], c[1] = -1.0, fz_max
    C[2, [FX, FZ]] = [-1.0, mu]
    C[3, [FX, FZ]] = [1.0, mu]
    C[4, [FY, FZ]] = [-1.0, mu]
    C[5, [FY, FZ]] = [1.0, mu]
    C[6, [TY, FZ]] = [-1.0, X]
    C[7, [TY, FZ]] = [1.0, X]
    C[8, [TX, FZ]] = [-1.0, Y]
    C[9, [TX, FZ]] = [1.0, Y]
    row = 10
    for s1 in (1.0, -1.0):
        for s2 in (1.0, -1.0):
            # tz + mu(X+Y) fz - s1 (Y fx - mu tx) - s2 (X fy - mu ty) >= 0
            C[row, TZ] = 1.0
            C[row, FZ] = mu * (X + Y)
            C[row, FX] = -s1 * Y
            C[row, TX] = s1 * mu
            C[row, FY] = -s2 * X
            C[row, TY] = s2 * mu
            # -tz + mu(X+Y) fz - s1 (Y fx + mu tx) - s2 (X fy + mu ty) >= 0
            C[row + 1, TZ] = -1.0
            C[row + 1, FZ] = mu * (X + Y)
            C[row + 1, FX] = -s1 * Y
            C[row + 1, TX] = -s1 * mu
            C[row + 1, FY] = -s2 * X
            C[row + 1, TY] = -s2 * mu
            row += 2
    return C, c


def point_contact_constraints(mu: float, fz_min: float, fz_max: float) -> tuple[np.ndarray, np.ndarray]:
    """Point-contact stability constraints ``C @ lam + c >= 0`` (Supp. D; seiko.md §5.2).

    ``lam = [fx, fy, fz]`` in the world-fixed surface frame R_c (z = normal), on the robot.
    Rows: 0-1 ``fz_min <= fz <= fz_max``; 2-5 ``|fx| <= mu fz``, ``|fy| <= mu fz``.

    Args:
        mu: friction coefficient [-].
        fz_min: minimum normal force [N].
        fz_max: maximum normal force [N].

    Returns:
        C: (6, 3), c: (6,).
    """
    C = np.zeros((6, 3))
    c = np.zeros(6)
    C[0, 2], c[0] = 1.0, -fz_min
    C[1, 2], c[1] = -1.0, fz_max
    C[2] = [-1.0, 0.0, mu]
    C[3] = [1.0, 0.0, mu]
    C[4] = [0.0, -1.0, mu]
    C[5] = [0.0, 1.0, mu]
    return C, c


def contact_constraints(
    ctype: str, mu: float, fz_min: float, fz_max: float, cop_x: float = 0.0, cop_y: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Dispatch to :func:`plane_contact_constraints` or :func:`point_contact_constraints`.

    Raises:
        ModelError: unknown contact type.
    """
    if ctype == "plane":
        return plane_contact_constraints(mu, cop_x, cop_y, fz_min, fz_max)
    if ctype == "point":
        return point_contact_constraints(mu, fz_min, fz_max)
    raise ModelError(f"unknown contact type {ctype!r}")
