"""Tests of contactflow.seiko.retargeting (SEIKO RA-L 2024 eq. (9), seiko.md §4)."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pinocchio as pin
import pytest

from contactflow.config import load_config
from contactflow.errors import ConfigError
from contactflow.robot import load_robot
from contactflow.seiko.equilibrium import contact_constraints
from contactflow.seiko.retargeting import RetargetingConfig, SeikoRetargeting


@pytest.fixture(scope="module")
def robot():
    return load_robot("talos")


def _check_constraints(robot, cfg, out, tol=1e-6):
    """Torque bound (9j) and contact constraints (9k) on the output state."""
    assert np.all(np.abs(out.tau) <= cfg.joint_torque_limit_ratio * robot.tau_max + tol)
    for k, lam in out.lam.items():
        if not out.enabled[k]:
            continue
        c = robot.contacts[k]
        par = cfg.effector(c.type)
        C, cc = contact_constraints(c.type, par.friction_mu, par.fz_min_n, par.fz_max_n, par.cop_half_x_m, par.cop_half_y_m)
        assert np.all(C @ lam + cc >= -tol), k


def _sum_world_force(robot, out):
    f = np.zeros(3)
    for k, lam in out.lam.items():
        if out.enabled[k] and robot.contacts[k].type == "plane":
            f += out.poses[k].rotation @ lam[:3]
    return f


def test_config_defaults_and_loader():
    cfg = load_config(RetargetingConfig, {"dt_s": 0.002, "plane": {"fz_min_n": 50.0}}, "test")
    assert cfg.plane.fz_min_n == 50.0 and cfg.plane.pose_weight_pos == 1e6
    assert cfg.point.force_rate_max_n_per_s == 10.0
    assert cfg.plane.wrench_weights[2] == pytest.approx(2e-5)
    with pytest.raises(ConfigError):
        load_config(RetargetingConfig, {"dt": 0.002}, "test")
    with pytest.raises(ConfigError):
        load_config(RetargetingConfig, {"plane": {"fz_min_n": 2000.0}}, "test")


def test_reset_and_step_sizes_status_residuals(robot):
    cfg = RetargetingConfig()
    r = SeikoRetargeting(cfg, robot)
    out = r.reset()
    assert out.ok and out.diagnostics["status"] == "optimal"
    assert abs(_sum_world_force(robot, out)[2] - robot.weight) < 1e-6 * robot.weight
    for _ in range(5):
        out = r.step({})
        d = out.diagnostics
        assert out.ok and d["status"] == "optimal"
        assert (d["n_var"], d["n_eq"], d["n_in"]) == (43, 18, 210)  # seiko.md §10.2
        assert d["eq_residual"] < 1e-6 and d["ineq_violation"] < 1e-6
    assert out.lam["left_hand"].shape == (3,) and np.all(out.lam["left_hand"] == 0)
    assert out.theta_ahead.shape == (robot.n,) and out.tau.shape == (robot.n,)


def test_perturbed_configurations(robot):
    rng = np.random.default_rng(0)
    cfg = RetargetingConfig()
    r = SeikoRetargeting(cfg, robot)
    for _ in range(3):
        q = robot.q_default.copy()
        q[7:] += rng.uniform(-0.05, 0.05, robot.n)
        out = r.reset(q)
        assert out.ok, out.diagnostics
        for _ in range(20):
            out = r.step({})
            d = out.diagnostics
            assert out.ok and d["status"] == "optimal", d
            assert d["eq_residual"] < 1e-6 and d["ineq_violation"] < 1e-6
            _check_constraints(robot, cfg, out)


def test_point_contact_enabled(robot):
    """Feet + left hand (point contact on the wall of seiko.md §5.4): 46 variables."""
    contacts = dict(robot.contacts)
    contacts["left_hand"] = dataclasses.replace(contacts["left_hand"], enabled=True)
    rob = dataclasses.replace(robot, contacts=contacts)
    cfg = RetargetingConfig()
    r = SeikoRetargeting(cfg, rob)
    out = r.reset()
    assert out.ok, out.diagnostics
    assert out.lam["left_hand"][2] >= cfg.point.fz_min_n - 1e-6
    hand0 = out.poses["left_hand"].copy()
    for _ in range(100):
        out = r.step({})
        d = out.diagnostics
        assert out.ok and (d["n_var"], d["n_eq"], d["n_in"]) == (46, 21, 222), d
        assert d["eq_residual"] < 1e-6 and d["ineq_violation"] < 1e-6
        _check_constraints(rob, cfg, out)
    assert np.linalg.norm(out.poses["left_hand"].translation - hand0.translation) < 1e-4
    # Force balance includes the hand force R_c lam (world).
    R_c = pin.rpy.rpyToMatrix(*cfg.surface_rpy_rad["left_hand"])
    f = _sum_world_force(rob, out) + R_c @ out.lam["left_hand"]
    np.testing.assert_allclose(f, [0, 0, rob.weight], atol=1e-3)


def test_zero_commands_hold_the_standing_posture_still(robot):
    """With zero commands the Retargeting holds the standing posture still from the first tick:
    the reset settles QP (9) to its fixed point (settle_at_reset), so the QP at its optimum
    returns zero motion, and the wrenches stay those of the reset."""
    r = SeikoRetargeting(RetargetingConfig(), robot)
    out = r.reset()
    assert out.ok and out.diagnostics["settle_motion"] < 1e-9
    q0, lam0 = out.q.copy(), {k: v.copy() for k, v in out.lam.items()}
    for _ in range(1500):
        out = r.step({})
        assert out.ok
        assert out.diagnostics["eq_residual"] < 1e-6 and out.diagnostics["ineq_violation"] < 1e-6
    assert np.max(np.abs(pin.difference(robot.model, q0, out.q))) < 1e-6
    assert max(np.max(np.abs(out.lam[k] - lam0[k])) for k in lam0) < 1e-3
    assert abs(_sum_world_force(robot, out)[2] - robot.weight) < 1e-6 * robot.weight
    # the settled posture is a bounded compromise between the posture (9c) and torque (9d) terms
    assert np.max(np.abs(q0[7:] - robot.theta_default)) < 0.02


def test_without_settling_the_torque_term_pulls_the_posture(robot):
    """The reason for settle_at_reset: from the raw reset posture the QP drifts to its fixed point."""
    r = SeikoRetargeting(RetargetingConfig(settle_at_reset=False), robot)
    out = r.reset()
    q0 = out.q.copy()
    for _ in range(1500):
        out = r.step({})
    drift = np.max(np.abs(pin.difference(robot.model, q0, out.q)))
    assert 1e-3 < drift < 0.02


def test_left_hand_target_tracking(robot):
    """Left hand 5 cm forward, commanded once (missing targets are kept), 2 s after the ramp."""
    cfg = RetargetingConfig()
    r = SeikoRetargeting(cfg, robot)
    out = r.reset()
    feet0 = {k: out.poses[k].copy() for k in ("left_foot", "right_foot")}
    target = out.poses["left_hand"].copy()
    target.translation = target.translation + np.array([0.05, 0.0, 0.0])
    n_ramp = int(round(cfg.init_ramp_s / cfg.dt_s))
    for i in range(n_ramp + 1000):
        out = r.step({"left_hand": target} if i == 0 else {})
        assert out.ok, out.diagnostics
        if i % 50 == 0:
            _check_constraints(robot, cfg, out)
            assert out.diagnostics["eq_residual"] < 1e-6 and out.diagnostics["ineq_violation"] < 1e-6
    # The hand task (weight 5e3) is a soft cost against the posture task (weight 10, target =
    # reset posture): with the Talos weights the hand settles 1.08 mm (5.3 mrad) from its target.
    err = np.linalg.norm(out.poses["left_hand"].translation - target.translation)
    assert err < 1.5e-3, err
    assert np.linalg.norm(pin.log3(target.rotation @ out.poses["left_hand"].rotation.T)) < 1e-2
    assert np.max(np.abs(out.v)) < 1e-3  # converged
    for k, M0 in feet0.items():
        assert np.linalg.norm(out.poses[k].translation - M0.translation) < 1e-6
        assert np.linalg.norm(pin.log3(out.poses[k].rotation @ M0.rotation.T)) < 1e-6
    assert abs(_sum_world_force(robot, out)[2] - robot.weight) < 1e-6 * robot.weight


def test_infeasible_returns_not_ok(robot, caplog):
    cfg = RetargetingConfig(plane=dataclasses.replace(RetargetingConfig().plane, fz_min_n=0.6 * robot.weight))
    r = SeikoRetargeting(cfg, robot)
    with caplog.at_level(logging.WARNING):
        out = r.reset()
        assert not out.ok and out.diagnostics["status"] != "optimal"
        q0 = out.q.copy()
        out = r.step({})
    assert not out.ok
    assert out.diagnostics["status"] in ("infeasible", "residual", "not_pd", "non_finite", "error")
    assert np.all(out.v == 0) and np.array_equal(out.q, q0)
    assert any("failed" in rec.message for rec in caplog.records)


def test_errors(robot):
    r = SeikoRetargeting(RetargetingConfig(), robot)
    with pytest.raises(ConfigError):
        r.step({})
    r.reset()
    with pytest.raises(ConfigError):
        r.step({"nose": pin.SE3.Identity()})
    with pytest.raises(ConfigError):
        r.step({"left_hand": np.eye(4)})
    with pytest.raises(ConfigError):
        r.reset(np.zeros(3))
