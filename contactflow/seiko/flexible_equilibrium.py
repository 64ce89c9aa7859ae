"""``runInit`` of the SEIKO Controller: one Newton step on the flexible equilibrium (SEIKO RA-L 2024
§IV-B eqs. (1), (3), (5)-(7); seiko.md §6.3), used at reset and after a contact switch
(:meth:`contactflow.seiko.controller.SeikoController.reset`), and the residual it drives to zero.

Conventions as :mod:`contactflow.seiko.controller`: ``q`` (7+n,) pinocchio FreeFlyer, ``v`` (6+n,);
plane wrenches ``[f; tau]`` (6,) LOCAL, point forces (3,) in the surface frame R_c; SI units.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pinocchio as pin

from contactflow.qp import QPSolution, solve_qp_box
from contactflow.robot import ContactSpec
from contactflow.seiko.equilibrium import equilibrium_terms, pose_error_world

__all__ = ["flexible_equilibrium_residual", "flexible_equilibrium_step"]


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
