"""Dense convex QP on quadprog, with an explicit status and constraint residuals.

Problem (all arrays float64)::

    minimise    1/2 x^T H x + g^T x
    subject to  A_eq x = b_eq
                A_in x >= b_in

quadprog needs a strictly positive definite Hessian; a regularisation relative to the Hessian
scale (``reg * max(1, max|diag H|)``) is added. Empty constraint blocks are omitted. A failed
solve never raises inside a control loop: ``solve_qp`` returns ``QPSolution(found=False, ...)``
with the status, and the caller degrades to a safe output.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import quadprog

__all__ = ["QPSolution", "solve_qp"]


@dataclasses.dataclass(frozen=True)
class QPSolution:
    """Result of :func:`solve_qp`.

    Attributes:
        found: True when quadprog returned a solution whose residuals are within tolerance.
        status: ``"optimal"``, ``"infeasible"``, ``"not_pd"``, ``"non_finite"`` or
            ``"residual"`` (a solution came back but violates constraints beyond ``tol``).
        x: (n,) solution; zeros when not found.
        cost: objective value at ``x`` (without the regularisation).
        eq_residual: max |A_eq x - b_eq| (0 without equalities).
        ineq_violation: max(0, max(b_in - A_in x)) (0 without inequalities).
        n_active: number of active constraints reported by quadprog.
        message: solver message for failures.
    """

    found: bool
    status: str
    x: np.ndarray
    cost: float = float("nan")
    eq_residual: float = 0.0
    ineq_violation: float = 0.0
    n_active: int = 0
    message: str = ""


def solve_qp(
    H: np.ndarray,
    g: np.ndarray,
    A_eq: np.ndarray | None = None,
    b_eq: np.ndarray | None = None,
    A_in: np.ndarray | None = None,
    b_in: np.ndarray | None = None,
    *,
    reg: float = 1e-9,
    tol: float = 1e-6,
) -> QPSolution:
    """Solve the QP above with quadprog (Goldfarb-Idnani dual active set).

    Args:
        H: (n, n) symmetric PSD Hessian.
        g: (n,) linear term.
        A_eq, b_eq: (m_eq, n), (m_eq,) equality rows, or None.
        A_in, b_in: (m_in, n), (m_in,) inequality rows ``A_in x >= b_in``, or None.
        reg: relative Tikhonov regularisation added to the diagonal of H.
        tol: residual tolerance, relative to ``1 + max|b|`` of each block, for ``found``.

    Returns:
        QPSolution; never raises for infeasible or ill-posed problems.
    """
    H = np.asarray(H, dtype=np.float64)
    g = np.asarray(g, dtype=np.float64)
    n = g.shape[0]
    blocks_C, blocks_b = [], []
    meq = 0
    if A_eq is not None and len(A_eq):
        A_eq = np.asarray(A_eq, dtype=np.float64)
        b_eq = np.asarray(b_eq, dtype=np.float64)
        blocks_C.append(A_eq)
        blocks_b.append(b_eq)
        meq = A_eq.shape[0]
    if A_in is not None and len(A_in):
        A_in = np.asarray(A_in, dtype=np.float64)
        b_in = np.asarray(b_in, dtype=np.float64)
        blocks_C.append(A_in)
        blocks_b.append(b_in)
    zeros = np.zeros(n)
    finite = np.all(np.isfinite(H)) and np.all(np.isfinite(g))
    for blk in blocks_C + blocks_b:
        finite = finite and np.all(np.isfinite(blk))
    if not finite:
        return QPSolution(False, "non_finite", zeros, message="non-finite entry in the QP data")
    scale = max(1.0, float(np.max(np.abs(np.diag(H)))) if n else 1.0)
    Hr = H + (reg * scale) * np.eye(n)
    Hr = 0.5 * (Hr + Hr.T)
    try:
        if blocks_C:
            C = np.vstack(blocks_C).T.copy()
            b = np.concatenate(blocks_b)
            x, _, _, _, _, active = quadprog.solve_qp(Hr, -g, C, b, meq)
        else:
            x, _, _, _, _, active = quadprog.solve_qp(Hr, -g)
    except ValueError as exc:
        msg = str(exc)
        status = "infeasible" if "constraints are inconsistent" in msg else "not_pd" if "positive definite" in msg else "error"
        return QPSolution(False, status, zeros, message=msg)
    x = np.asarray(x)
    cost = float(0.5 * x @ H @ x + g @ x)
    eq_res = float(np.max(np.abs(A_eq @ x - b_eq))) if meq else 0.0
    viol = float(max(0.0, np.max(b_in - A_in @ x))) if (A_in is not None and len(A_in)) else 0.0
    eq_tol = tol * (1.0 + (float(np.max(np.abs(b_eq))) if meq else 0.0))
    in_tol = tol * (1.0 + (float(np.max(np.abs(b_in))) if (A_in is not None and len(A_in)) else 0.0))
    if not np.all(np.isfinite(x)):
        return QPSolution(False, "non_finite", zeros, message="solver returned non-finite x")
    ok = eq_res <= eq_tol and viol <= in_tol
    return QPSolution(
        found=ok,
        status="optimal" if ok else "residual",
        x=x,
        cost=cost,
        eq_residual=eq_res,
        ineq_violation=viol,
        n_active=int(np.count_nonzero(np.asarray(active) > 0)),
        message="" if ok else f"residuals eq {eq_res:.3g}, ineq {viol:.3g} above tolerance",
    )
