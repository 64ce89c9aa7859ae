"""Static inverse dynamics: contact wrenches that hold a posture (SEIKO reset, seiko.md §4.5).

Given a fixed configuration q and a set of enabled contacts, find the stacked wrench lam that

    minimises   ||tau(lam)||^2_Wtau + ||lam - lam_target||^2_Wlam,   tau(lam) = S'(g(q) - J(q)^T lam)
    subject to  g_B(q) - J_B(q)^T lam = 0                 (6 floating-base rows of eq. (1))
                -tau_max <= tau(lam) <= tau_max             (torque bounds)
                C_i lam_i + c_i >= 0                        (contact stability, Supp. D / §5)

This is ``SEIKORetargeting::runInverseDynamics`` of the SEIKO code (RA-L 2024), called by
``SEIKOWrapper::reset``.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np
import pinocchio as pin

from contactflow.errors import ModelError
from contactflow.qp import QPSolution, solve_qp_box
from contactflow.robot import ContactSpec
from contactflow.seiko.equilibrium import equilibrium_terms

__all__ = ["StaticIDResult", "static_inverse_dynamics"]


@dataclasses.dataclass(frozen=True)
class StaticIDResult:
    """Result of :func:`static_inverse_dynamics`.

    Attributes:
        ok: True when the QP was solved within tolerance.
        lams: per contact, (6,) [f; tau] LOCAL [N, N m] (plane) or (3,) force in R_c [N]
            (point); zeros when not ok.
        tau: (n,) joint torques S'(g - J^T lam) [N m].
        solution: the QP solution (status, residuals).
    """

    ok: bool
    lams: list[np.ndarray]
    tau: np.ndarray
    solution: QPSolution


def static_inverse_dynamics(
    model: pin.Model,
    data: pin.Data,
    q: np.ndarray,
    contacts: Sequence[ContactSpec],
    R_cs: Sequence[np.ndarray | None],
    *,
    tau_weights: np.ndarray,
    lam_weights: Sequence[np.ndarray],
    tau_max: np.ndarray,
    constraints: Sequence[tuple[np.ndarray, np.ndarray]],
    lam_targets: Sequence[np.ndarray] | None = None,
    hessian_regularisation: float = 1e-9,
    solver: str = "daqp",
) -> StaticIDResult:
    """Solve the static inverse dynamics QP of seiko.md §4.5 (never raises on QP failure).

    Args:
        model: pinocchio FreeFlyer model.
        data: its data (overwritten).
        q: (nq,) configuration.
        contacts: enabled contacts, in the order of the stacked wrench.
        R_cs: per contact, (3, 3) world-fixed surface frame of a point contact, None for planes.
        tau_weights: (n,) torque weights W_tau [1/(N m)^2].
        lam_weights: per contact, (dim,) wrench weights W_lam (linear first).
        tau_max: (n,) torque bound used in the constraint [N m] (SEIKO: 0.65 x effort limit).
        constraints: per contact, ``(C, c)`` with ``C @ lam_i + c >= 0``.
        lam_targets: per contact, (dim,) wrench target; zeros when None.
        hessian_regularisation: absolute value added to the Hessian diagonal.
        solver: QP solver, one of :data:`contactflow.qp.QP_SOLVERS` (the stage's ``qp_solver``).

    Returns:
        StaticIDResult.

    Raises:
        ModelError: inconsistent argument lengths or shapes (a programming error).
    """
    if not (len(contacts) == len(R_cs) == len(lam_weights) == len(constraints)):
        raise ModelError("static_inverse_dynamics: per-contact arguments have different lengths")
    nv = model.nv
    n = nv - 6
    dims = [c.dim for c in contacts]
    m = int(sum(dims))
    zeros = [np.zeros(d) for d in dims]
    terms = equilibrium_terms(model, data, q, contacts, zeros, R_cs)
    g = terms.gravity
    Jt = terms.J.T  # (nv, m)
    tau_weights = np.asarray(tau_weights, float)
    tau_max = np.asarray(tau_max, float)
    if tau_weights.shape != (n,) or tau_max.shape != (n,):
        raise ModelError(f"static_inverse_dynamics: tau_weights and tau_max must have shape ({n},)")
    w_lam = np.concatenate([np.asarray(w, float) for w in lam_weights]) if m else np.zeros(0)
    lam_t = np.concatenate([np.asarray(t, float) for t in lam_targets]) if (lam_targets and m) else np.zeros(m)
    if w_lam.shape != (m,) or lam_t.shape != (m,):
        raise ModelError(f"static_inverse_dynamics: wrench weights/targets must stack to ({m},)")

    # tau(lam) = g_J - Jt_J lam
    Jt_J = Jt[6:]
    g_J = g[6:]
    H = Jt_J.T @ (tau_weights[:, None] * Jt_J) + np.diag(w_lam)
    H[np.diag_indices(m)] += hessian_regularisation
    grad = -Jt_J.T @ (tau_weights * g_J) - w_lam * lam_t

    # box form of contactflow.qp.solve_qp_box: the 6 base rows as equalities, one two-sided row
    # per joint  g_J - tau_max <= Jt_J lam <= g_J + tau_max  (|tau| <= tau_max), and the contact
    # rows  C_i lam_i >= -c_i
    n_c = sum(C.shape[0] for C, _ in constraints)
    A = np.zeros((6 + n + n_c, m))
    lo = np.empty(6 + n + n_c)
    hi = np.empty(6 + n + n_c)
    A[:6] = Jt[:6]
    lo[:6] = hi[:6] = g[:6]
    A[6 : 6 + n] = Jt_J
    lo[6 : 6 + n] = g_J - tau_max
    hi[6 : 6 + n] = g_J + tau_max
    hi[6 + n :] = np.inf
    row, col = 6 + n, 0
    for (C, c), d in zip(constraints, dims):
        k = C.shape[0]
        A[row : row + k, col : col + d] = C
        lo[row : row + k] = -c
        row += k
        col += d

    sol = solve_qp_box(H, grad, A, lo, hi, solver=solver, reg=0.0)
    lam = sol.x if sol.found else np.zeros(m)
    tau = g_J - Jt_J @ lam
    lams, col = [], 0
    for d in dims:
        lams.append(lam[col : col + d].copy())
        col += d
    return StaticIDResult(ok=sol.found, lams=lams, tau=tau, solution=sol)
