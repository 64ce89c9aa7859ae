"""PRIME core: log-Cholesky conversions and the smoothed contact step with its IFT derivatives."""

import numpy as np
import pinocchio as pin
import pytest

from contactflow.errors import ConfigError, ModelError
from contactflow.prime.contact import ContactStepConfig, SmoothContactDynamics
from contactflow.prime.inertia import dpi_dtheta, dynamic_parameters_from_theta, inertia_from_theta, theta_from_inertia
from contactflow.prime.model import load_prime_robot, standing_configuration

H_FD = 1e-6


@pytest.fixture(scope="module")
def go2():
    return load_prime_robot("go2")


@pytest.fixture(scope="module")
def dyn(go2):
    return SmoothContactDynamics(go2.model, go2.points, ContactStepConfig(), ["root_joint"])


def _rel(A, B):
    return np.abs(A - B).max() / max(np.abs(B).max(), 1e-12)


def _fd(f, x0, n, perturb):
    cols = []
    for k in range(n):
        e = np.zeros(n)
        e[k] = H_FD
        cols.append((f(perturb(x0, e)) - f(perturb(x0, -e))) / (2 * H_FD))
    return np.array(cols).T


# ----------------------------------------------------------------------------- log-Cholesky
def test_log_cholesky_round_trip_on_robot_bodies_and_random_parameters(go2):
    for I in list(go2.model.inertias)[1:]:  # every Go2 body: inertia -> theta -> inertia
        th = theta_from_inertia(I)
        I2 = inertia_from_theta(th)
        assert np.allclose(I2.toDynamicParameters(), I.toDynamicParameters(), rtol=1e-10, atol=1e-12)
        assert np.isclose(np.exp(2 * th[0]), I.mass)
    rng = np.random.default_rng(1)
    for _ in range(20):  # theta -> inertia -> theta
        th = rng.standard_normal(10) * 0.5
        assert np.allclose(theta_from_inertia(inertia_from_theta(th)), th, atol=1e-9)


def test_log_cholesky_jacobian_matches_finite_differences():
    th = np.random.default_rng(2).standard_normal(10) * 0.3
    A = _fd(dynamic_parameters_from_theta, th, 10, lambda x, e: x + e)
    assert _rel(dpi_dtheta(th), A) < 1e-5


def test_nonphysical_inertia_is_rejected():
    bad = pin.Inertia(1.0, np.zeros(3), np.diag([1.0, 1.0, 3.0]))  # violates the triangle inequality
    with pytest.raises(ModelError, match="not physically consistent"):
        theta_from_inertia(bad)


# ----------------------------------------------------------------------------- contact step
def _cases(go2, dyn):
    rng = np.random.default_rng(0)
    q0 = standing_configuration(go2, 0.0005)
    g = pin.computeGeneralizedGravity(dyn.model, dyn.data, q0)[6:]
    th = dyn.theta_nominal + 0.05 * rng.standard_normal(dyn.ntheta)
    stance = (q0, 0.1 * rng.standard_normal(dyn.nv), 0.8 * g + rng.standard_normal(12), th)
    v_slide = np.zeros(dyn.nv)
    v_slide[0] = 0.5  # base sliding forward: feet slide (sliding friction branch)
    slide = (q0, v_slide, g, th)
    q_air = q0.copy()
    q_air[2] += 0.02  # feet 2 cm above the ground: force at a distance only
    air = (q_air, 0.05 * rng.standard_normal(dyn.nv), g, th)
    return {"stance": stance, "slide": slide, "air": air}


@pytest.mark.parametrize("case", ["stance", "slide", "air"])
def test_step_derivatives_match_finite_differences(go2, dyn, case):
    q, v, u, th = _cases(go2, dyn)[case]
    r = dyn.step(q, v, u, th)
    assert r.converged
    D = dyn.derivatives(r)
    m = dyn.model

    def vn(qq, vv, uu, tt):
        return dyn.step(qq, vv, uu, tt).v_next

    def qn(qq, vv, uu, tt):
        return pin.difference(m, r.q_next, dyn.step(qq, vv, uu, tt).q_next)

    integ = lambda x, e: pin.integrate(m, x, e)  # noqa: E731
    add = lambda x, e: x + e  # noqa: E731
    assert _rel(D.dv_dq, _fd(lambda x: vn(x, v, u, th), q, dyn.nv, integ)) < 1e-5
    assert _rel(D.dv_dv, _fd(lambda x: vn(q, x, u, th), v, dyn.nv, add)) < 1e-5
    assert _rel(D.dv_du, _fd(lambda x: vn(q, v, x, th), u, dyn.nu, add)) < 1e-5
    assert _rel(D.dv_dtheta, _fd(lambda x: vn(q, v, u, x), th, dyn.ntheta, add)) < 1e-5
    assert _rel(D.dq_dq, _fd(lambda x: qn(x, v, u, th), q, dyn.nv, integ)) < 1e-5
    assert _rel(D.dq_dv, _fd(lambda x: qn(q, x, u, th), v, dyn.nv, add)) < 1e-5
    assert _rel(D.dq_du, _fd(lambda x: qn(q, v, x, th), u, dyn.nu, add)) < 1e-5
    assert _rel(D.dq_dtheta, _fd(lambda x: qn(q, v, u, x), th, dyn.ntheta, add)) < 1e-5


def test_step_satisfies_momentum_balance_cone_and_central_path(go2, dyn):
    q, v, u, th = _cases(go2, dyn)["slide"]
    r = dyn.step(q, v, u, th)
    cfg = dyn.config
    dyn.set_theta(th)
    # M (v+ - v) = dt (B u - h) + sum J^T Lambda  (PRIME §III-A)
    M = pin.crba(dyn.model, dyn.data, q)
    M = np.triu(M) + np.triu(M, 1).T
    h = pin.nle(dyn.model, dyn.data, q, v)
    pin.computeJointJacobians(dyn.model, dyn.data, q)
    pin.updateFramePlacements(dyn.model, dyn.data)
    gen = sum(pin.getFrameJacobian(dyn.model, dyn.data, p.frame_id, pin.LOCAL_WORLD_ALIGNED)[:3].T @ r.impulse_W[i]
              for i, p in enumerate(dyn.points))
    lhs = M @ (r.v_next - v)
    rhs = cfg.dt_s * (np.r_[np.zeros(6), u] - h) + gen
    assert np.abs(lhs - rhs).max() < 1e-9
    # impulses inside the friction cone, smoothed complementarity lam . w = 2 / kappa
    fn, ft = r.impulse_W[:, 2], np.linalg.norm(r.impulse_W[:, :2], axis=1)
    assert np.all(fn > 0) and np.all(ft <= cfg.mu * fn + 1e-12)
    lam = np.stack([fn * cfg.mu, r.impulse_W[:, 0], r.impulse_W[:, 1]], axis=1)
    assert np.allclose(np.sum(lam * r.w, axis=1), 2 / cfg.kappa, rtol=1e-8)


def test_standing_robot_carries_its_weight(go2):
    dyn = SmoothContactDynamics(go2.model, go2.points, ContactStepConfig(), ())
    q = standing_configuration(go2, 0.0002)
    v = np.zeros(dyn.nv)
    kp, kd = 60.0, 1.0
    th0 = go2.robot.theta_default
    r = None
    for _ in range(150):
        u = kp * (th0 - q[7:]) - kd * v[6:]
        r = dyn.step(q, v, u, v_guess=None if r is None else r.v_next)
        q, v = r.q_next, r.v_next
    W = go2.robot.mass * 9.81
    assert abs(r.force_W[:, 2].sum() - W) < 0.01 * W
    assert abs(v[2]) < 1e-2  # no sinking (the smoothed friction lets the feet creep slowly)


def test_g1_corner_contacts_load_and_step():
    g1 = load_prime_robot("g1")
    assert len(g1.points) == 8
    dyn = SmoothContactDynamics(g1.model, g1.points, ContactStepConfig(), ["root_joint"])
    q = standing_configuration(g1, 0.0005)
    r = dyn.step(q, np.zeros(dyn.nv), np.zeros(dyn.nu))
    assert r.converged and np.all(r.force_W[:, 2] > 0)


def test_bad_contact_step_config_is_rejected():
    with pytest.raises(ValueError, match="kappa"):
        ContactStepConfig(kappa=0.0)
    from contactflow.config import load_config

    with pytest.raises(ConfigError, match="unknown key"):
        load_config(ContactStepConfig, {"kapa": 1.0}, source="test")
