"""Tests of contactflow.seiko.static_id (SEIKO reset wrenches, seiko.md §4.5)."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from contactflow.qp import QP_SOLVERS
from contactflow.robot import load_robot
from contactflow.seiko.equilibrium import equilibrium_terms, plane_contact_constraints
from contactflow.seiko.static_id import static_inverse_dynamics


@pytest.fixture(scope="module")
def robot():
    return load_robot("talos")


def _solve(robot, fz_min=100.0, solver="daqp"):
    feet = [c for c in robot.contacts.values() if c.type == "plane"]
    data = robot.model.createData()
    w_tau = np.where([j.startswith("arm_") for j in robot.joint_names], 0.005, 2e-5)
    res = static_inverse_dynamics(
        robot.model,
        data,
        robot.q_default,
        feet,
        [None] * len(feet),
        tau_weights=w_tau,
        lam_weights=[0.002 * np.array([1, 1, 0.01, 1, 1, 1])] * len(feet),
        tau_max=0.65 * robot.tau_max,
        constraints=[plane_contact_constraints(0.6, 0.04, 0.03, fz_min, 1000.0)] * len(feet),
        solver=solver,
    )
    return feet, data, res


@pytest.mark.parametrize("solver", QP_SOLVERS)
def test_static_id_double_support_holds_the_weight(robot, solver):
    feet, data, res = _solve(robot, solver=solver)
    assert res.ok and res.solution.status == "optimal"
    assert res.solution.eq_residual < 1e-8
    assert res.solution.ineq_violation < 1e-8
    mg = robot.weight
    # Feet are flat on q_default: local fz is the world vertical force.
    fz = sum(lam[2] for lam in res.lams)
    assert abs(fz - mg) < 1e-6 * mg
    pin.framesForwardKinematics(robot.model, data, robot.q_default)
    f_world = sum(data.oMf[c.frame_id].rotation @ lam[:3] for c, lam in zip(feet, res.lams))
    np.testing.assert_allclose(f_world, [0, 0, mg], atol=1e-6 * mg)
    # Full equilibrium: base rows vanish and the joint rows are the returned torques.
    terms = equilibrium_terms(robot.model, data, robot.q_default, feet, res.lams, [None, None])
    assert np.max(np.abs(terms.r[:6])) < 1e-8
    np.testing.assert_allclose(terms.r[6:], res.tau, atol=1e-8)
    assert np.all(np.abs(res.tau) <= 0.65 * robot.tau_max + 1e-9)
    # Symmetric posture: both feet carry about half the weight, CoP inside the box.
    for lam in res.lams:
        assert 0.4 * mg < lam[2] < 0.6 * mg
        C, c = plane_contact_constraints(0.6, 0.04, 0.03, 100.0, 1000.0)
        assert np.all(C @ lam + c >= -1e-9)


def test_static_id_solvers_agree(robot):
    """daqp (the default) and quadprog (the reference) give the same reset wrenches."""
    _, _, a = _solve(robot, solver="daqp")
    _, _, b = _solve(robot, solver="quadprog")
    np.testing.assert_allclose(np.concatenate(a.lams), np.concatenate(b.lams), atol=1e-6)
    np.testing.assert_allclose(a.tau, b.tau, atol=1e-6)


@pytest.mark.parametrize("solver", QP_SOLVERS)
def test_static_id_infeasible_reports_status(robot, solver):
    _, _, res = _solve(robot, fz_min=0.6 * robot.weight, solver=solver)
    assert not res.ok
    assert res.solution.status != "optimal"
    assert all(np.all(lam == 0) for lam in res.lams)
