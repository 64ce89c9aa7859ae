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
import math

import numpy as np
import quadprog

__all__ = ["QPSolution", "solve_qp", "solve_qp_stacked"]


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


def solve_qp_stacked(
    H: np.ndarray,
    g: np.ndarray,
    C: np.ndarray,
    b: np.ndarray,
    n_eq: int,
    *,
    reg: float = 1e-9,
    tol: float = 1e-6,
    residual: np.ndarray | None = None,
) -> QPSolution:
    """The core of :func:`solve_qp` on constraints already stacked (the control loops' fast path).

    Rows ``C[:n_eq] x = b[:n_eq]`` and ``C[n_eq:] x >= b[n_eq:]``. ``H`` must be symmetric; it is
    regularised **in place** (``reg * max(1, max|diag H|)`` on its diagonal), so pass a scratch
    copy if you need it afterwards. ``residual`` is an optional (m,) buffer reused for C x - b.
    Same statuses, tolerances and never-raise behaviour as :func:`solve_qp`.
    """
    n = g.shape[0]
    zeros = np.zeros(n)
    if not (math.isfinite(float(H.sum())) and math.isfinite(float(g.sum()))
            and math.isfinite(float(C.sum())) and math.isfinite(float(b.sum()))):
        return QPSolution(False, "non_finite", zeros, message="non-finite entry in the QP data")
    diag = np.einsum("ii->i", H)  # a writable view of the diagonal
    added = reg * max(1.0, float(np.max(np.abs(diag)))) if n else 0.0
    diag += added
    try:
        if len(b):
            x, _, _, _, _, active = quadprog.solve_qp(H, -g, C.T, b, n_eq)
        else:
            x, _, _, _, _, active = quadprog.solve_qp(H, -g)
    except ValueError as exc:
        msg = str(exc)
        status = "infeasible" if "constraints are inconsistent" in msg else "not_pd" if "positive definite" in msg else "error"
        return QPSolution(False, status, zeros, message=msg)
    x = np.asarray(x)
    if not np.all(np.isfinite(x)):
        return QPSolution(False, "non_finite", zeros, message="solver returned non-finite x")
    res = residual if residual is not None else np.empty(len(b))
    np.matmul(C, x, out=res)
    res -= b
    eq_res = float(np.max(np.abs(res[:n_eq]))) if n_eq else 0.0
    viol = max(0.0, float(-np.min(res[n_eq:]))) if len(b) > n_eq else 0.0
    eq_tol = tol * (1.0 + (float(np.max(np.abs(b[:n_eq]))) if n_eq else 0.0))
    in_tol = tol * (1.0 + (float(np.max(np.abs(b[n_eq:]))) if len(b) > n_eq else 0.0))
    ok = eq_res <= eq_tol and viol <= in_tol
    return QPSolution(
        found=ok,
        status="optimal" if ok else "residual",
        x=x,
        cost=float(0.5 * x @ H @ x + g @ x - 0.5 * added * (x @ x)),  # cost without the regularisation
        eq_residual=eq_res,
        ineq_violation=viol,
        n_active=int(np.count_nonzero(np.asarray(active) > 0)),
        message="" if ok else f"residuals eq {eq_res:.3g}, ineq {viol:.3g} above tolerance",
    )


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
        blocks_C.append(np.asarray(A_eq, dtype=np.float64))
        blocks_b.append(np.asarray(b_eq, dtype=np.float64))
        meq = blocks_C[0].shape[0]
    if A_in is not None and len(A_in):
        blocks_C.append(np.asarray(A_in, dtype=np.float64))
        blocks_b.append(np.asarray(b_in, dtype=np.float64))
    C = np.vstack(blocks_C) if blocks_C else np.zeros((0, n))
    b = np.concatenate(blocks_b) if blocks_b else np.zeros(0)
    return solve_qp_stacked(0.5 * (H + H.T), g, C, b, meq, reg=reg, tol=tol)
