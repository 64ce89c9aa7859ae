"""contactflow.qp.solve_qp_box: hand-made QPs with known solutions, on both solvers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from contactflow.qp import QP_SOLVERS, solve_qp, solve_qp_box

INF = np.inf


def _ok(sol, x_expected, atol=1e-7):
    assert sol.found and sol.status == "optimal", sol
    np.testing.assert_allclose(sol.x, x_expected, atol=atol)
    assert sol.eq_residual <= 1e-9 and sol.ineq_violation <= 1e-9


@pytest.mark.parametrize("solver", QP_SOLVERS)
def test_unconstrained_and_bounds_known_solutions(solver):
    H = np.diag([2.0, 4.0, 1.0])
    g = np.array([-4.0, 8.0, -1.0])
    x_free = -g / np.diag(H)  # (2, -2, 1)
    none = np.zeros((0, 3)), np.zeros(0), np.zeros(0)
    sol = solve_qp_box(H, g, *none, solver=solver, reg=0.0)
    _ok(sol, x_free)
    assert sol.cost == pytest.approx(0.5 * g @ x_free)  # = -1/2 g^T H^-1 g
    assert sol.n_active == 0
    # a diagonal Hessian with box bounds: the solution is the clipped free minimum
    lb, ub = np.array([-1.0, -1.0, -INF]), np.array([1.0, 1.0, 0.5])
    sol = solve_qp_box(H, g, *none, lb, ub, solver=solver, reg=0.0)
    _ok(sol, np.clip(x_free, lb, ub))
    assert sol.n_active == 3
    # one side only
    _ok(solve_qp_box(H, g, *none, None, ub, solver=solver, reg=0.0), np.minimum(x_free, ub))
    _ok(solve_qp_box(H, g, *none, lb, None, solver=solver, reg=0.0), np.maximum(x_free, lb))
    # a fixed variable (lb == ub) is an equality
    sol = solve_qp_box(H, g, *none, np.array([0.3, -INF, -INF]), np.array([0.3, INF, INF]), solver=solver, reg=0.0)
    _ok(sol, [0.3, -2.0, 1.0])


@pytest.mark.parametrize("solver", QP_SOLVERS)
def test_equality_and_two_sided_rows(solver):
    H, g = np.eye(2), np.zeros(2)
    # min |x|^2 s.t. x1 + x2 = 2 -> (1, 1)
    sol = solve_qp_box(H, g, np.array([[1.0, 1.0]]), np.array([2.0]), np.array([2.0]), solver=solver, reg=0.0)
    _ok(sol, [1.0, 1.0])
    assert sol.cost == pytest.approx(1.0)
    # min 1/2 |x - (5, 0)|^2 s.t. -1 <= x1 - x2 <= 1 -> projection on the band: (3, 2)
    g = np.array([-5.0, 0.0])
    A = np.array([[1.0, -1.0]])
    sol = solve_qp_box(H, g, A, np.array([-1.0]), np.array([1.0]), solver=solver, reg=0.0)
    _ok(sol, [3.0, 2.0])
    assert sol.n_active == 1
    # the same row from below is inactive: the free minimum
    _ok(solve_qp_box(H, -g, A, np.array([-1.0]), np.array([1.0]), solver=solver, reg=0.0), [-3.0, -2.0])
    # one-sided rows (infinite bounds) and an equality together with variable bounds:
    # x1 + x2 = 1, x1 - x2 >= 0.6 (hi = +inf), x2 >= 0 -> the target (5, 0) projects to (1, 0)
    A = np.array([[1.0, 1.0], [1.0, -1.0]])
    sol = solve_qp_box(H, g, A, np.array([1.0, 0.6]), np.array([1.0, INF]), np.array([-INF, 0.0]), None, solver=solver, reg=0.0)
    _ok(sol, [1.0, 0.0])
    # x1 + x2 <= 1 written with lo = -inf: the target (0.2, 0.3) is feasible and returned
    sol = solve_qp_box(H, np.array([-0.2, -0.3]), A[:1], np.array([-INF]), np.array([1.0]), solver=solver, reg=0.0)
    _ok(sol, [0.2, 0.3])


@pytest.mark.parametrize("solver", QP_SOLVERS)
def test_random_qps_agree_with_the_stacked_reference(solver):
    """Random QPs in box form against quadprog on the same rows written out by hand."""
    rng = np.random.default_rng(12)
    for _ in range(20):
        n, m = 8, 10
        M = rng.standard_normal((n, n))
        H = M @ M.T + 0.1 * np.eye(n)
        g = rng.standard_normal(n)
        A = rng.standard_normal((m, n))
        lo, hi = -rng.uniform(0.1, 1.0, m), rng.uniform(0.1, 1.0, m)
        lo[:2] = hi[:2] = rng.uniform(-0.2, 0.2, 2)  # two equalities
        hi[2:4] = INF
        lo[4:6] = -INF
        lb, ub = -rng.uniform(0.05, 0.5, n), rng.uniform(0.05, 0.5, n)
        ineq = slice(2, m)
        fin_lo, fin_hi = np.isfinite(lo[ineq]), np.isfinite(hi[ineq])
        A_in = np.vstack([A[ineq][fin_lo], -A[ineq][fin_hi], np.eye(n), -np.eye(n)])
        b_in = np.concatenate([lo[ineq][fin_lo], -hi[ineq][fin_hi], lb, -ub])
        ref = solve_qp(H, g, A[:2], lo[:2], A_in, b_in, reg=0.0)
        sol = solve_qp_box(H, g, A, lo, hi, lb, ub, solver=solver, reg=0.0)
        assert ref.found
        _ok(sol, ref.x, atol=1e-7)
        assert sol.cost == pytest.approx(ref.cost, abs=1e-9)
        assert sol.n_active == ref.n_active


@pytest.mark.parametrize("solver", QP_SOLVERS)
def test_failures_come_back_as_statuses(solver):
    H, g = np.eye(2), np.zeros(2)
    A = np.array([[1.0, 0.0], [1.0, 0.0]])
    # x1 >= 1 and x1 <= 0: infeasible rows
    sol = solve_qp_box(H, g, A, np.array([1.0, -INF]), np.array([INF, 0.0]), solver=solver)
    assert not sol.found and sol.status == "infeasible" and not sol.x.any()
    # an equality outside the variable bounds
    sol = solve_qp_box(H, g, A[:1], np.array([2.0]), np.array([2.0]), -np.ones(2), np.ones(2), solver=solver)
    assert not sol.found and sol.status == "infeasible"
    # a negative definite Hessian without regularisation
    sol = solve_qp_box(-H, g, A[:1], np.array([-1.0]), np.array([1.0]), solver=solver, reg=0.0)
    assert not sol.found and sol.status == "not_pd"
    # non-finite data: NaN in H (off the diagonal, symmetric: daqp alone reports it optimal),
    # in g, in A, in a bound; lo = +inf; NaN in a variable bound
    for bad in ("H", "g", "A", "hi", "lo", "ub"):
        data = {"H": H.copy(), "g": g.copy(), "A": A[:1].copy(), "lo": np.array([-1.0]), "hi": np.array([1.0]),
                "ub": np.ones(2)}
        if bad == "H":
            data["H"][0, 1] = data["H"][1, 0] = np.nan
        else:
            data[bad].flat[0] = INF if bad == "lo" else np.nan
        sol = solve_qp_box(data["H"], data["g"], data["A"], data["lo"], data["hi"], -data["ub"] if bad != "ub" else None,
                           data["ub"], solver=solver)
        assert not sol.found and sol.status == "non_finite", (bad, sol)
        assert not sol.x.any()
    # a residual check that cannot be met (negative tolerance) reports "residual" with the x
    sol = solve_qp_box(H, np.array([-5.0, 0.0]), A[:1], np.array([-1.0]), np.array([1.0]), solver=solver, tol=-1.0)
    assert not sol.found and sol.status == "residual" and sol.x[0] == pytest.approx(1.0)


@pytest.mark.parametrize("solver", QP_SOLVERS)
def test_residual_tolerance_is_per_row(solver, monkeypatch):
    """Rows in mixed units: an equality at 1e-3 missed by 1e-4 fails even when another row
    sits at 2000 (a tolerance relative to the largest row would pass it); each row's own
    tol * (1 + |bound|) is what counts."""
    import contactflow.qp as qp_module

    H, g = np.eye(2), np.array([0.0, -3000.0])
    A = np.eye(2)
    lo, hi = np.array([1e-3, -INF]), np.array([1e-3, 2000.0])  # x1 = 1e-3 (m/s), x2 <= 2000 (N)
    sol = solve_qp_box(H, g, A, lo, hi, solver=solver, reg=0.0, tol=1e-6)
    _ok(sol, [1e-3, 2000.0])
    # the same rows checked against an x off by 1e-4 on the small equality
    x_bad = np.array([1.1e-3, 2000.0])
    eq = lo == hi
    eq_res, viol, ok = qp_module._box_residuals(A, x_bad, lo, hi, eq, True, 1e-6)
    assert not ok and eq_res == pytest.approx(1e-4)
    assert 1e-4 < 1e-6 * (1.0 + 2000.0)  # what the old check tol * (1 + max|A x|) let through
    # within each row's own tolerance: 2000 + 1e-3 on the large row passes, 1e-3 + 1e-8 too
    ok_x = np.array([1e-3 + 1e-8, 2000.0 + 1e-3])
    assert qp_module._box_residuals(A, ok_x, lo, hi, eq, True, 1e-6)[2]
    # and 2000 + 3e-3 (beyond 1e-6 * 2001) fails
    assert not qp_module._box_residuals(A, np.array([1e-3, 2000.003]), lo, hi, eq, True, 1e-6)[2]
    # with variable bounds the same per-side rule applies to lb / ub
    lb, ub = np.array([-INF, -INF]), np.array([INF, 5e-3])
    bl, bu = np.concatenate((lb, lo)), np.concatenate((ub, hi))
    assert not qp_module._box_residuals(A, np.array([1e-3, 5.1e-3]), bl, bu, bl == bu, True, 1e-6)[2]
    assert qp_module._box_residuals(A, np.array([1e-3, 5e-3]), bl, bu, bl == bu, True, 1e-6)[2]
    # tol = 0 with infinite bounds: exact feasibility passes (no 0 * inf = NaN)
    assert qp_module._box_residuals(A, np.array([1e-3, 1.0]), lo, hi, eq, True, 0.0)[2]


def test_quadprog_is_imported_only_when_selected():
    """quadprog (GPL) is not imported by the default path: the QP layer and the Retargeting
    import without it; selecting it imports it."""
    import subprocess
    import sys

    code = ("import sys; import contactflow.qp as q, contactflow.seiko.retargeting, numpy as np; "
            "assert 'quadprog' not in sys.modules, 'imported'; "
            "q.solve_qp_box(np.eye(1), np.ones(1), np.zeros((0, 1)), np.zeros(0), np.zeros(0)); "
            "assert 'quadprog' not in sys.modules, 'daqp solve'; "
            "q.solve_qp_box(np.eye(1), np.ones(1), np.zeros((0, 1)), np.zeros(0), np.zeros(0), solver='quadprog'); "
            "assert 'quadprog' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_regularisation_and_inputs_untouched():
    H = np.array([[1.0, 1.0], [1.0, 1.0]])  # singular: regularised (reg > 0) it solves
    H0 = H.copy()
    g = np.array([-1.0, -1.0])
    A = np.array([[1.0, -1.0]])
    lo = hi = np.array([0.0])
    for solver in QP_SOLVERS:
        sol = solve_qp_box(H, g, A, lo, hi, solver=solver, reg=1e-9)
        _ok(sol, [0.5, 0.5], atol=1e-6)
        assert sol.cost == pytest.approx(-0.5, abs=1e-8)
        np.testing.assert_array_equal(H, H0)
    with pytest.raises(ValueError, match="osqp"):
        solve_qp_box(H, g, A, lo, hi, solver="osqp")


def test_integer_and_float32_data_are_solved_as_float64():
    """solve_qp_box takes integer or float32 arrays (converted, inputs untouched) and a redundant equality
    row (the same equality twice) without a failure."""
    H = np.array([[2, 0], [0, 2]])  # int64
    g = np.array([-2, -4])
    A = np.array([[1, 1], [1, 1], [2, 2]])  # x0 + x1 = 1, written three times
    lo = hi = np.array([1, 1, 2])
    for solver in QP_SOLVERS:
        for cast in (lambda a: a, lambda a: a.astype(np.float32)):
            sol = solve_qp_box(cast(H), cast(g), cast(A), cast(lo), cast(hi), cast(np.array([-5, -5])),
                               cast(np.array([5, 5])), solver=solver)
            _ok(sol, [0.0, 1.0], atol=1e-6)
    assert H.dtype == np.int64


def test_nan_without_any_constraint():
    for solver in QP_SOLVERS:
        sol = solve_qp_box(np.eye(2), np.array([np.nan, 0.0]), np.zeros((0, 2)), np.zeros(0), np.zeros(0), solver=solver)
        assert not sol.found and sol.status == "non_finite"


# ---------------------------------------------------------------- real SEIKO QPs (fixtures)

FIXTURE_DIR = Path(__file__).parent / "fixtures"
FIXTURES = ("seiko_qps_retargeting.npz", "seiko_qps_controller.npz")
X_TOL = 1e-6
"""Largest |x_daqp - x_quadprog| accepted on a SEIKO QP (x of both stages: rates, base and joint
velocities [m/s, rad/s] and wrench rates [N/s, N m/s]; measured on the fixtures: 3e-8
Retargeting, 3e-11 Controller)."""


X_REF_TOL = 1e-6
"""Largest |x - x_ref| accepted between the compact QP's solution (both solvers) and ``x_ref``, the
solution of the QP as the code before the compact form (commit d633261: stacked rows, quadprog)
built it in the same tick, its stage run beside the new one on the same inputs (the two stages'
states agree to solver precision, not bit for bit)."""


def _load_qps(name):
    keys = ("H", "g", "A", "lo", "hi", "lb", "ub", "x_ref", "scenario")
    with np.load(FIXTURE_DIR / name) as z:
        return [{key: (z[f"{key}_{k}"] if f"{key}_{k}" in z else None) for key in keys}
                for k in range(int(z["n_qps"]))]


def _max_violation(qp, x):
    r = qp["A"] @ x
    v = max(0.0, float(np.max(np.maximum(qp["lo"] - r, r - qp["hi"]), initial=0.0)))
    if qp["lb"] is not None:
        v = max(v, float(np.max(qp["lb"] - x)), float(np.max(x - qp["ub"])))
    return v


@pytest.mark.parametrize("name", FIXTURES)
def test_daqp_matches_quadprog_on_dumped_seiko_qps(name):
    """QPs dumped from three scenarios (benchmarks/bench_seiko_qp.py --write-fixture: the default
    reach, the far reach, the wall push with a contact switch and pushing mode): same solution,
    status and residuals with both solvers, the constraints hold when recomputed here, and the
    solution is the one of the stacked QP of the code before the compact form (x_ref: a dropped
    row or a flipped sign in the compact assembly would make both solvers agree on a wrong QP)."""
    qps = _load_qps(name)
    assert len(qps) >= 20
    assert {str(qp["scenario"]) for qp in qps} == {"hand_forward", "far_reach", "wall_push"}
    with_ref = [qp for qp in qps if qp["x_ref"] is not None]
    assert len(with_ref) >= 0.9 * len(qps)
    worst = worst_ref = 0.0
    for qp in qps:
        args = [qp[k] for k in ("H", "g", "A", "lo", "hi", "lb", "ub")]
        sols = {s: solve_qp_box(*args, solver=s, reg=0.0) for s in QP_SOLVERS}
        for s, sol in sols.items():
            assert sol.found and sol.status == "optimal", (name, s, sol.status, sol.message)
            scale = 1.0 + float(np.max(np.abs(qp["A"] @ sol.x), initial=0.0))
            assert sol.eq_residual <= 1e-6 * scale and sol.ineq_violation <= 1e-6 * scale
            assert _max_violation(qp, sol.x) <= 1e-6 * scale
        dx = float(np.max(np.abs(sols["daqp"].x - sols["quadprog"].x)))
        worst = max(worst, dx)
        if qp["x_ref"] is not None:
            worst_ref = max(worst_ref, *(float(np.max(np.abs(sol.x - qp["x_ref"]))) for sol in sols.values()))
        assert sols["daqp"].cost == pytest.approx(sols["quadprog"].cost, rel=1e-8, abs=1e-9)
    assert worst <= X_TOL, worst
    assert worst_ref <= X_REF_TOL, worst_ref


@pytest.mark.parametrize("name", FIXTURES)
def test_reference_check_catches_an_assembly_mistake(name):
    """The x_ref comparison above can fail: a dropped active row or a flipped sign in the compact
    assembly moves the solution far beyond X_REF_TOL on some fixture QP."""
    dropped = flipped = 0.0
    for qp in _load_qps(name):
        A, lo, hi = qp["A"], qp["lo"], qp["hi"]
        x = solve_qp_box(*(qp[k] for k in ("H", "g", "A", "lo", "hi", "lb", "ub")), reg=0.0).x
        r = A @ x
        active = np.flatnonzero((lo != hi) & ((np.abs(r - lo) < 1e-9) | (np.abs(r - hi) < 1e-9)))
        for i in active[:2]:  # an active inequality row dropped
            lo2, hi2 = lo.copy(), hi.copy()
            lo2[i], hi2[i] = -INF, INF
            sol = solve_qp_box(qp["H"], qp["g"], A, lo2, hi2, qp["lb"], qp["ub"], reg=0.0)
            dropped = max(dropped, float(np.max(np.abs(sol.x - qp["x_ref"]))))
        i = int(np.argmax(np.where(lo == hi, np.abs(lo), -1.0)))
        if lo[i] == hi[i] and lo[i] != 0.0:  # the sign of the equality row with the largest target flipped
            A2 = A.copy()
            A2[i] *= -1.0
            sol = solve_qp_box(qp["H"], qp["g"], A2, lo, hi, qp["lb"], qp["ub"], reg=0.0)
            if sol.found:
                flipped = max(flipped, float(np.max(np.abs(sol.x - qp["x_ref"]))))
    assert dropped > 100 * X_REF_TOL and flipped > 100 * X_REF_TOL, (dropped, flipped)


def test_retargeting_qp_solver_key_and_both_solvers_agree(monkeypatch):
    """The Retargeting on daqp and on quadprog: the same motion over a reach, to solver tolerance."""
    import pinocchio as pin

    from contactflow.config import load_config
    from contactflow.errors import ConfigError
    from contactflow.robot import load_robot
    from contactflow.seiko.retargeting import RetargetingConfig, SeikoRetargeting

    assert RetargetingConfig().qp_solver == "daqp"
    with pytest.raises(ConfigError, match="qp_solver"):
        load_config(RetargetingConfig, {"qp_solver": "osqp"}, "test")
    import daqp
    import quadprog

    calls = {s: 0 for s in QP_SOLVERS}
    for s, mod, fn in (("daqp", daqp, "solve"), ("quadprog", quadprog, "solve_qp")):
        def counting(*a, _s=s, _f=getattr(mod, fn), **kw):
            calls[_s] += 1
            return _f(*a, **kw)
        monkeypatch.setattr(mod, fn, counting)
    robot = load_robot("talos")
    runs = {}
    for solver in (*QP_SOLVERS, "daqp"):  # daqp twice: deterministic run to run
        r = SeikoRetargeting(RetargetingConfig(qp_solver=solver, settle_at_reset=False, init_ramp_s=0.1), robot)
        out = r.reset()  # (its static inverse dynamics, contactflow.seiko.static_id, on the same solver)
        before = dict(calls)
        target = out.poses["left_hand"].copy()
        qs, taus = [], []
        for k in range(150):
            target.translation = target.translation + np.array([2e-4, 0.0, 1e-4])  # 10 cm/s forward, 5 up
            out = r.step({"left_hand": pin.SE3(target)})
            assert out.ok and out.diagnostics["status"] == "optimal"
            qs.append(out.q)
            taus.append(out.tau)
        other = next(s for s in QP_SOLVERS if s != solver)
        assert calls[solver] - before[solver] >= 150 and calls[other] == before[other]  # the key selects the solver
        if solver in runs:
            np.testing.assert_array_equal(np.array(qs), runs[solver][0])
            np.testing.assert_array_equal(np.array(taus), runs[solver][1])
        runs[solver] = np.array(qs), np.array(taus), out
    (q_d, tau_d, out_d), (q_q, tau_q, out_q) = runs["daqp"], runs["quadprog"]
    assert np.max(np.abs(q_d[-1] - q_d[0])) > 1e-3  # it moved
    np.testing.assert_allclose(q_d, q_q, atol=1e-9)
    np.testing.assert_allclose(tau_d, tau_q, atol=1e-6)
    for k in out_d.lam:
        np.testing.assert_allclose(out_d.lam[k], out_q.lam[k], atol=1e-6)


@pytest.mark.parametrize("solver", QP_SOLVERS)
def test_boxqp_buffers_solve_as_solve_qp_box(solver):
    """BoxQP (the stages' preallocated form) on the fixture QPs: the same x (bit for bit), status,
    residuals and active count as solve_qp_box on the same data, with its regularisation in
    place; its checks still fail a non-finite H and an infeasible equality."""
    from contactflow.qp import BoxQP

    for name in FIXTURES:
        for qp in _load_qps(name)[::6]:
            n, m = qp["H"].shape[0], qp["A"].shape[0]
            bounds = qp["lb"] is not None
            box = BoxQP(n, m, bounds=bounds)
            box.H[:], box.g[:], box.A[:], box.lo[:], box.hi[:] = qp["H"], qp["g"], qp["A"], qp["lo"], qp["hi"]
            if bounds:
                box.lb[:], box.ub[:] = qp["lb"], qp["ub"]
            ref = solve_qp_box(*(qp[k] for k in ("H", "g", "A", "lo", "hi", "lb", "ub")), solver=solver, reg=1e-9)
            sol = box.solve(solver=solver, reg=1e-9)
            assert sol.found and sol.status == ref.status == "optimal"
            assert np.array_equal(sol.x, ref.x), (name, float(np.max(np.abs(sol.x - ref.x))))
            assert (sol.eq_residual, sol.ineq_violation, sol.n_active) == (ref.eq_residual, ref.ineq_violation, ref.n_active)
            assert sol.cost == pytest.approx(ref.cost, rel=1e-12, abs=1e-12)
            diag = np.diag(qp["H"])
            np.testing.assert_array_equal(box.H_diag, diag + 1e-9 * max(1.0, np.abs(diag).max()))  # in place
    # equalities not in one block (a fixed variable and a row), and after a change of the mask
    box = BoxQP(3, 2, bounds=True)
    box.H[:] = np.diag([2.0, 1.0, 1.0])
    box.A[:] = [[1.0, 1.0, 1.0], [1.0, -1.0, 0.0]]
    box.lb[:], box.ub[:] = [0.2, -INF, -INF], [0.2, INF, 0.1]
    box.lo[:], box.hi[:] = [1.0, -0.5], [1.0, 0.5]
    for fixed in (0.2, None, 0.3):
        if fixed is None:
            box.lb[0], box.ub[0] = -INF, INF
        else:
            box.lb[0] = box.ub[0] = fixed
        box.g[:] = [-1.0, 0.5, -2.0]
        ref = solve_qp_box(box.H, box.g, box.A, box.lo, box.hi, box.lb, box.ub, solver=solver, reg=0.0)
        sol = box.solve(solver=solver, reg=0.0)
        assert sol.found and np.array_equal(sol.x, ref.x)
        assert (sol.eq_residual, sol.ineq_violation, sol.n_active) == (ref.eq_residual, ref.ineq_violation, ref.n_active)
    box = BoxQP(2, 1)
    box.H[:] = np.eye(2)
    box.A[:] = [[1.0, 1.0]]
    box.lo[:] = box.hi[:] = 2.0
    sol = box.solve(solver=solver, reg=0.0)
    _ok(sol, [1.0, 1.0])
    box.H[0, 1] = np.nan
    assert box.solve(solver=solver, reg=0.0).status == "non_finite"
    box.H[:] = np.eye(2)
    box.A[:] = [[0.0, 0.0]]  # 0 x = 2: infeasible
    assert not box.solve(solver=solver, reg=0.0).found
    with pytest.raises(ValueError, match="solver"):
        box.solve(solver="osqp")
