"""Dense convex QPs on daqp or quadprog, with an explicit status and constraint residuals.

Two forms. :func:`solve_qp_box` (the control loops' form, solved by daqp by default or by
quadprog)::

    minimise    1/2 x^T H x + g^T x
    subject to  lo <= A x <= hi        (a row with lo == hi is an equality)
                lb <= x <= ub

(:class:`BoxQP`: the same QP in preallocated buffers of a fixed size, the SEIKO stages' per-tick
path), and :func:`solve_qp` / :func:`solve_qp_stacked` (quadprog's stacked form)::

    minimise    1/2 x^T H x + g^T x
    subject to  A_eq x = b_eq
                A_in x >= b_in

Both solvers need a strictly positive definite Hessian; a regularisation relative to the
Hessian scale (``reg * max(1, max|diag H|)``) is added. Empty constraint blocks are omitted. A
failed solve never raises inside a control loop: the functions return
``QPSolution(found=False, ...)`` with the status, and the caller degrades to a safe output.

Solvers: daqp (D. Arnström, A. Bemporad, D. Axehill, "A dual active-set solver for embedded
quadratic programming using recursive LDL^T updates", IEEE TAC 2022; MIT) is the default;
quadprog (Goldfarb-Idnani, GPL-2.0-or-later) stays selectable as the reference.
"""

from __future__ import annotations

import dataclasses
import math

import daqp
import numpy as np

__all__ = ["QP_SOLVERS", "BoxQP", "QPSolution", "solve_qp", "solve_qp_box", "solve_qp_stacked"]

QP_SOLVERS = ("daqp", "quadprog")
"""The solvers :func:`solve_qp_box` accepts (the ``qp_solver`` config key of the SEIKO stages)."""

# daqp exit flags (daqp/include/constants.h) -> QPSolution.status
_DAQP_STATUS = {
    -1: ("infeasible", "daqp: infeasible constraints"),
    -2: ("error", "daqp: cycling detected"),
    -3: ("not_pd", "daqp: unbounded problem (Hessian not positive definite)"),
    -4: ("error", "daqp: iteration limit reached"),
    -5: ("not_pd", "daqp: non-convex problem (Hessian not positive definite)"),
    -6: ("error", "daqp: overdetermined initial active set"),
}
_DAQP_OPTIMAL = (1, 2)  # EXIT_OPTIMAL, EXIT_SOFT_OPTIMAL (no soft constraints are posed here)
_DAQP_EQUALITY = np.intc(5)  # daqp's constraint "sense" of an equality
_INF = math.inf
# the reductions as ufunc calls (ndarray.max / .any / .sum add a Python-level wrapper; same results)
_MAX, _ANY, _SUM = np.maximum.reduce, np.logical_or.reduce, np.add.reduce


@dataclasses.dataclass(frozen=True)
class QPSolution:
    """Result of :func:`solve_qp_box`, :func:`solve_qp` and :func:`solve_qp_stacked`.

    Attributes:
        found: True when the solver returned a finite solution whose residuals are within
            tolerance (and the QP data were finite).
        status: ``"optimal"``, ``"infeasible"``, ``"not_pd"``, ``"non_finite"``,
            ``"residual"`` (a solution came back but violates constraints beyond ``tol``) or
            ``"error"`` (another solver failure: cycling, iteration limit; see ``message``).
        x: (n,) solution; zeros when not found.
        cost: objective value at ``x`` (without the regularisation).
        eq_residual: max |A_eq x - b_eq| (box form: over the rows and variables with
            ``lo == hi``; 0 without equalities).
        ineq_violation: max(0, max(b_in - A_in x)) (box form: the largest excess over a bound
            of ``lo <= A x <= hi``, ``lb <= x <= ub``; 0 without inequalities).
        n_active: number of active constraints reported by the solver (rows and bounds).
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


def _quadprog(H, g, C, b, n_eq):
    """quadprog on ``C[:n_eq] x = b[:n_eq]``, ``C[n_eq:] x >= b[n_eq:]``: ``(x, cost, n_active,
    None, "")`` or, when it raises, ``(None, nan, 0, status, message)``. quadprog (GPL) is imported
    here, only when it is the selected solver."""
    import quadprog

    try:
        if len(b):
            x, fval, _, _, _, active = quadprog.solve_qp(H, -g, C.T, b, n_eq)
        else:
            x, fval, _, _, _, active = quadprog.solve_qp(H, -g)
    except ValueError as exc:
        msg = str(exc)
        status = ("infeasible" if "constraints are inconsistent" in msg
                  else "not_pd" if "positive definite" in msg else "error")
        return None, math.nan, 0, status, msg
    return x, fval, int(np.count_nonzero(np.asarray(active) > 0)), None, ""


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
    x, _, n_active, status, msg = _quadprog(H, g, C, b, n_eq)
    if status is not None:
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
        n_active=n_active,
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


def _box_to_stacked(A, bl, bu, eq):
    """The box form (bounds ``bl, bu`` on ``[x; A x]`` or on ``A x``) as quadprog's
    ``C x >= b`` with the equalities first."""
    n = A.shape[1]
    M = A if len(bl) == A.shape[0] else np.vstack((np.eye(n), A))
    has_lo = ~eq & (bl > -_INF)
    has_hi = ~eq & (bu < _INF)
    C = np.concatenate((M[eq], M[has_lo], -M[has_hi]))
    b = np.concatenate((bl[eq], bl[has_lo], -bu[has_hi]))
    return C, b, int(np.count_nonzero(eq))


def _hga_finite(H, g, A) -> bool:
    """False when H, g or A hold NaN or inf (one sum each; checked before every solve: a NaN in
    H may still come back "optimal" from daqp, and H and g enter no residual)."""
    return math.isfinite(float(H.sum()) + float(g.sum()) + float(A.sum()))


def _bounds_finite(bl, bu) -> bool:
    """False when a lower bound is NaN or +inf or an upper bound NaN or -inf (a sum of lower
    bounds is -inf when one is -inf, NaN when one is NaN or +inf among -inf, +inf when one is
    +inf). Checked on the failure path only: such a bound always fails the residual check."""
    return float(bl.sum()) < _INF and float(bu.sum()) > -_INF


def _box_residuals(A, x, bl, bu, eq, has_eq, tol, work=None, block=None):
    """(eq_residual, ineq_violation, ok) of x for the box form, with ``bl <= [x; A x] <= bu``
    (or ``bl <= A x <= bu`` without variable bounds) and ``eq`` the equality mask.

    Per-row tolerance: ``ok`` when every row ``i`` satisfies ``bl_i - tol (1 + |bl_i|) <=
    r_i <= bu_i + tol (1 + |bu_i|)``, each side relative to its own bound, so a row in small
    units (an equality at 1e-3 m/s) is not loosened by a row in large ones (a bound at 2000 N);
    infinite bounds never bind. Lean: when the worst residual is within ``tol`` (the usual case)
    every row passes and the per-row bounds are not computed. NaN (in x or a bound) fails.
    ``work``: optional :class:`BoxQP` whose scratch rows (``_r``, ``_d``, ``_d2``) are used
    (else new ones); ``block``: ``(a, b)`` when the equalities are exactly the rows ``a:b``
    (slices instead of masked reductions, same values), else None."""
    nr = len(bl)
    if not nr:  # no row, no bound: only x itself to check
        return 0.0, 0.0, math.isfinite(float(x.sum()))
    r, d, d2 = (np.empty(nr), np.empty(nr), np.empty(nr)) if work is None else (work._r, work._d, work._d2)
    k = nr - A.shape[0]  # variable bounds first, when there are
    if k:
        r[:k] = x
    A.dot(x, out=r[k:])
    np.subtract(bl, r, out=d)
    np.maximum(d, np.subtract(r, bu, out=d2), out=d)  # |r - b| on equality rows; > 0 = violation elsewhere
    eq_res = 0.0
    if block is not None:
        a, b = block
        eq_res = float(_MAX(d[a:b]))
        d[a:b] = -_INF
    elif has_eq:
        eq_res = float(_MAX(d, where=eq, initial=-_INF))
        np.copyto(d, -_INF, where=eq)
    viol = float(_MAX(d))
    if eq_res != eq_res or viol != viol:  # NaN
        return eq_res, viol, False
    viol = max(0.0, viol)
    ok = max(eq_res, viol) <= tol
    if not ok and tol > 0.0:  # the per-row tolerance tol (1 + |b_i|) >= tol
        # an infinite bound: bl - r = -inf < tol (1 + inf) = inf, never binding
        ok = not ((bl - r > tol * (1.0 + np.abs(bl))).any() or (r - bu > tol * (1.0 + np.abs(bu))).any())
    return eq_res, viol, ok


def _box_failure(bl, bu, n: int, status: str, message: str) -> QPSolution:
    """A failed solve; a non-finite bound takes precedence over the solver's own status."""
    if not _bounds_finite(bl, bu):
        status, message = "non_finite", "non-finite entry in the QP data"
    return QPSolution(False, status, np.zeros(n), message=message)


def solve_qp_box(
    H: np.ndarray,
    g: np.ndarray,
    A: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    lb: np.ndarray | None = None,
    ub: np.ndarray | None = None,
    *,
    solver: str = "daqp",
    reg: float = 1e-9,
    tol: float = 1e-6,
) -> QPSolution:
    """Solve ``min 1/2 x^T H x + g^T x`` s.t. ``lo <= A x <= hi``, ``lb <= x <= ub``.

    A row (or a variable) with ``lo == hi`` is an equality; ``-inf`` / ``+inf`` make it
    one-sided. The compact form (a row and its negation as one two-sided row, unit rows as
    variable bounds) is what makes daqp fast (its simple bounds cost no row).

    Args:
        H: (n, n) symmetric positive (semi)definite Hessian (converted to float64); not modified.
        g: (n,) linear term.
        A: (m, n) constraint rows (m may be 0).
        lo, hi: (m,) row bounds, ``lo <= hi``; ``lo`` may hold ``-inf``, ``hi`` ``+inf``.
        lb, ub: (n,) variable bounds, or None (unbounded); may hold infinities.
        solver: ``"daqp"`` (default) or ``"quadprog"`` (converted to the stacked form; the
            reference). One of :data:`QP_SOLVERS`.
        reg: relative Tikhonov regularisation ``reg * max(1, max|diag H|)`` added to the
            diagonal of a copy of H (0 = none: H must then be positive definite).
        tol: residual tolerance for ``found``, per row and side: every equality and every bound
            ``b_i`` (of ``lo``, ``hi``, ``lb``, ``ub``) met within ``tol * (1 + |b_i|)``.

    Returns:
        QPSolution (``x`` zeros when no solution came back; ``cost`` without the
        regularisation). Never raises for infeasible, ill-posed or non-finite problems (status
        ``"infeasible"``, ``"not_pd"``, ``"non_finite"``, ``"residual"``, ``"error"``).

    Raises:
        ValueError: ``solver`` is not one of :data:`QP_SOLVERS` (a programming error, caught
            when a stage is configured, never in the loop).
    """
    if solver not in QP_SOLVERS:
        raise ValueError(f"solve_qp_box: solver {solver!r} is not one of {QP_SOLVERS}")
    # float64 without a copy when already so (integer or float32 data would break the solvers' C calls)
    H, g, A, lo, hi = (np.asarray(a, dtype=np.float64) for a in (H, g, A, lo, hi))
    lb = None if lb is None else np.asarray(lb, dtype=np.float64)
    ub = None if ub is None else np.asarray(ub, dtype=np.float64)
    n = g.shape[0]
    if not _hga_finite(H, g, A):
        return QPSolution(False, "non_finite", np.zeros(n), message="non-finite entry in the QP data")
    added = reg * max(1.0, float(np.abs(H.diagonal()).max())) if (reg and n) else 0.0
    if added:
        H = np.array(H, order="C")  # a contiguous copy: ravel() below is a view
        H.ravel()[:: n + 1] += added
    if lb is None and ub is None:
        bl, bu = lo, hi
    else:
        bl = np.concatenate((np.full(n, -_INF) if lb is None else lb, lo))
        bu = np.concatenate((np.full(n, _INF) if ub is None else ub, hi))
    return _solve_box(H, g, A, bl, bu, solver, added, tol, None)


def _solve_box(H, g, A, bl, bu, solver, added, tol, work) -> QPSolution:
    """The solve and the checks of :func:`solve_qp_box` and :meth:`BoxQP.solve`, on data
    already checked finite, H regularised (by ``added``) and the bounds stacked (``bl <= [x; A
    x] <= bu`` or ``bl <= A x <= bu``); ``work``: a :class:`BoxQP` lending its scratch, or None."""
    n = g.shape[0]
    if work is None:
        eq = bl == bu
        sense = eq * _DAQP_EQUALITY if solver == "daqp" else None  # C int: 5 on equalities, 0 otherwise
        has_eq, block = bool(_ANY(eq)), None
    else:  # the mask's derived arrays are looked up by its bytes (a stage has a few masks)
        np.equal(bl, bu, out=work._eq)
        eq, sense, has_eq, block = work._equality_pattern()
    if solver == "daqp":
        x, fval, flag, info = daqp.solve(H, g, A, bu, bl, sense)
        if flag not in _DAQP_OPTIMAL:
            status, msg = _DAQP_STATUS.get(flag, ("error", f"daqp: exit flag {flag}"))
            return _box_failure(bl, bu, n, status, msg)
        n_active = int(np.count_nonzero(info["lam"]))
    else:
        C, b, n_eq = _box_to_stacked(A, bl, bu, eq)
        x, fval, n_active, status, msg = _quadprog(H, g, C, b, n_eq)
        if status is not None:
            return _box_failure(bl, bu, n, status, msg)
    eq_res, viol, ok = _box_residuals(A, x, bl, bu, eq, has_eq, tol, work, block)
    if not ok and not (_bounds_finite(bl, bu) and math.isfinite(float(x.sum()))):
        # a non-finite bound (the data message takes precedence) or a non-finite x
        return _box_failure(bl, bu, n, "non_finite", "solver returned non-finite x")
    return QPSolution(
        found=ok,
        status="optimal" if ok else "residual",
        x=x,
        cost=float(fval) - 0.5 * added * float(x.dot(x)) if added else float(fval),  # without the regularisation
        eq_residual=eq_res,
        ineq_violation=viol,
        n_active=n_active,
        message="" if ok else f"residuals eq {eq_res:.3g}, ineq {viol:.3g} above tolerance",
    )


class BoxQP:
    """One QP of :func:`solve_qp_box`'s form and of fixed size, in preallocated buffers: the
    control loops' fast path (same solvers, statuses, regularisation and residual checks, same
    solution for the same data).

    The caller writes the problem into the views :attr:`H`, :attr:`g`, :attr:`A`, :attr:`lo`,
    :attr:`hi` (and :attr:`lb`, :attr:`ub` with ``bounds``) and calls :meth:`solve`. H, g and A
    lie in one contiguous buffer (one finiteness check for the three) and ``[lb; lo]``,
    ``[ub; hi]`` in one row of bounds each (no stacking per solve); the equality mask, daqp's
    constraint senses and the residual rows reuse their own buffers. Build one per problem
    layout (a SEIKO stage: one per set of enabled contacts).

    Args:
        n: number of variables.
        m: number of constraint rows (may be 0).
        bounds: True for variable bounds ``lb <= x <= ub`` (initially unbounded: -inf, +inf).

    Attributes:
        H: (n, n) Hessian (symmetric positive semidefinite), regularised **in place** by
            :meth:`solve` (rebuild it before every solve). g: (n,). A: (m, n).
        lo, hi: (m,) row bounds (lo == hi: an equality; +-inf: one-sided); initially 0.
        lb, ub: (n,) variable bounds, or (0,) without ``bounds``.
        H_diag: (n,) writable view of the diagonal of H.
        bounds: (2, n_bounds + m) rows ``[lb; lo]`` and ``[ub; hi]``, the bounds as solved
            (:attr:`lb`, :attr:`ub`, :attr:`lo`, :attr:`hi` are views of it; a two-row slice
            sets both sides of an equality at once). bl, bu: its two rows.
    """

    def __init__(self, n: int, m: int, bounds: bool = False):
        self.n, self.m = n, m
        self.n_bounds = k = n if bounds else 0
        self._data = np.zeros(n * n + n + m * n)
        self.H = self._data[: n * n].reshape(n, n)
        self.H_diag = self._data[: n * n : n + 1]
        self.g = self._data[n * n : n * n + n]
        self.A = self._data[n * n + n :].reshape(m, n)
        self.bounds = np.zeros((2, k + m))
        self.bl, self.bu = self.bounds
        self.bl[:k], self.bu[:k] = -_INF, _INF
        self.lb, self.ub = self.bl[:k], self.bu[:k]
        self.lo, self.hi = self.bl[k:], self.bu[k:]
        self._eq = np.zeros(k + m, dtype=bool)
        self._patterns: dict[bytes, tuple] = {}  # equality mask -> (mask, daqp senses, any, block)
        self._r, self._d, self._d2 = np.zeros(k + m), np.zeros(k + m), np.zeros(k + m)

    def _equality_pattern(self) -> tuple:
        """``(eq, sense, has_eq, block)`` of the equality mask in ``_eq``: a copy of the mask,
        daqp's senses (C int, 5 on equalities), whether there is one, and ``(a, b)`` when the
        equalities are exactly the entries ``a:b`` (else None); computed once per mask."""
        key = self._eq.tobytes()
        pat = self._patterns.get(key)
        if pat is None:
            eq = self._eq.copy()
            idx = np.flatnonzero(eq)
            block = (int(idx[0]), int(idx[-1]) + 1) if len(idx) and idx[-1] - idx[0] + 1 == len(idx) else None
            pat = (eq, eq * _DAQP_EQUALITY, bool(len(idx)), block)
            if len(self._patterns) < 64:  # a few masks per stage; never an unbounded cache
                self._patterns[key] = pat
        return pat

    def solve(self, *, solver: str = "daqp", reg: float = 1e-9, tol: float = 1e-6) -> QPSolution:
        """Solve the QP in the buffers (as :func:`solve_qp_box` on these arguments).

        Args:
            solver: one of :data:`QP_SOLVERS`.
            reg: relative Tikhonov regularisation ``reg * max(1, max|diag H|)``, added to the
                diagonal of :attr:`H` **in place** (0 = none).
            tol: residual tolerance for ``found`` (per row and side, as :func:`solve_qp_box`).

        Returns:
            QPSolution (never raises for a failed solve; statuses as :func:`solve_qp_box`).

        Raises:
            ValueError: ``solver`` is not one of :data:`QP_SOLVERS`.
        """
        if solver not in QP_SOLVERS:
            raise ValueError(f"BoxQP.solve: solver {solver!r} is not one of {QP_SOLVERS}")
        n = self.n
        if not math.isfinite(float(_SUM(self._data))):  # H, g and A at once
            return QPSolution(False, "non_finite", np.zeros(n), message="non-finite entry in the QP data")
        added = 0.0
        if reg and n:
            added = reg * max(1.0, float(_MAX(np.abs(self.H_diag))))
            self.H_diag += added
        return _solve_box(self.H, self.g, self.A, self.bl, self.bu, solver, added, tol, self)
