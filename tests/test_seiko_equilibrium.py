"""Tests of contactflow.seiko.equilibrium: finite differences on the manifold and constraint rows."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from contactflow.errors import ModelError
from contactflow.robot import load_robot
from contactflow.seiko.equilibrium import (
    effector_jacobian_world,
    equilibrium_terms,
    plane_contact_constraints,
    point_contact_constraints,
)

EPS = 1e-6


@pytest.fixture(scope="module")
def robot():
    return load_robot("talos")


def _random_q(robot, rng):
    q = robot.q_default.copy()
    q[:3] = rng.normal(size=3)
    q[3:7] = pin.Quaternion(pin.exp3(rng.normal(size=3))).coeffs()
    q[7:] = robot.q_min + rng.random(robot.n) * (robot.q_max - robot.q_min)
    return q


def _setup(robot, rng, kinds):
    contacts = [c for c in robot.contacts.values() if c.type in kinds]
    lams = [rng.normal(size=c.dim) * 100.0 for c in contacts]
    R_cs = [None if c.type == "plane" else pin.exp3(rng.normal(size=3)) for c in contacts]
    return contacts, lams, R_cs


def _fd_dr_dq(robot, data, q, contacts, lams, R_cs):
    nv = robot.nv
    D = np.zeros((nv, nv))
    for i in range(nv):
        dv = np.zeros(nv)
        dv[i] = EPS
        rp = equilibrium_terms(robot.model, data, pin.integrate(robot.model, q, dv), contacts, lams, R_cs).r
        rm = equilibrium_terms(robot.model, data, pin.integrate(robot.model, q, -dv), contacts, lams, R_cs).r
        D[:, i] = (rp - rm) / (2 * EPS)
    return D


@pytest.mark.parametrize("kinds", [("plane",), ("point",), ("plane", "point")], ids=["plane", "point", "mixed"])
def test_dr_dq_matches_central_differences(robot, kinds):
    rng = np.random.default_rng(len(kinds) * 7 + len(kinds[0]))
    data = robot.model.createData()
    for _ in range(2):
        q = _random_q(robot, rng)
        contacts, lams, R_cs = _setup(robot, rng, kinds)
        terms = equilibrium_terms(robot.model, data, q, contacts, lams, R_cs)
        D = _fd_dr_dq(robot, data, q, contacts, lams, R_cs)
        rel = np.max(np.abs(D - terms.dr_dq)) / np.max(np.abs(D))
        assert rel < 1e-5, rel


def test_point_rotation_term_is_needed(robot):
    """Without the world-frame rotation term the point-contact derivative is wrong."""
    rng = np.random.default_rng(3)
    data = robot.model.createData()
    q = _random_q(robot, rng)
    contacts, lams, R_cs = _setup(robot, rng, ("point",))
    D = _fd_dr_dq(robot, data, q, contacts, lams, R_cs)
    # A LOCAL-frozen force (R_c := current hand rotation, lam fixed in LOCAL) differs from world-fixed.
    terms = equilibrium_terms(robot.model, data, q, contacts, lams, R_cs)
    fext = [pin.Force.Zero() for _ in range(robot.model.njoints)]
    for c, lam, R_c in zip(contacts, lams, R_cs):
        fr = robot.model.frames[c.frame_id]
        f_l = data.oMf[c.frame_id].rotation.T @ R_c @ lam
        fext[fr.parentJoint] = fext[fr.parentJoint] + fr.placement.act(pin.Force(f_l, np.zeros(3)))
    local_only = pin.computeStaticTorqueDerivatives(robot.model, data, q, fext)
    assert np.max(np.abs(D - local_only)) > 1e-3 * np.max(np.abs(D))
    assert np.max(np.abs(D - terms.dr_dq)) < 1e-5 * np.max(np.abs(D))


def test_jt_lambda_consistent_with_static_torque(robot):
    rng = np.random.default_rng(11)
    data = robot.model.createData()
    q = _random_q(robot, rng)
    contacts, lams, R_cs = _setup(robot, rng, ("plane", "point"))
    terms = equilibrium_terms(robot.model, data, q, contacts, lams, R_cs)
    lam = np.concatenate(lams)
    g = pin.computeGeneralizedGravity(robot.model, data, q)
    np.testing.assert_allclose(terms.gravity, g, atol=1e-9)
    np.testing.assert_allclose(terms.r, g - terms.J.T @ lam, atol=1e-9)
    # Independent construction: world forces through LWA Jacobians.
    pin.computeJointJacobians(robot.model, data, q)
    pin.updateFramePlacements(robot.model, data)
    gen = np.zeros(robot.nv)
    for c, lam_c, R_c in zip(contacts, lams, R_cs):
        J_lwa = pin.getFrameJacobian(robot.model, data, c.frame_id, pin.LOCAL_WORLD_ALIGNED)
        R = data.oMf[c.frame_id].rotation
        if c.type == "plane":
            w = np.concatenate([R @ lam_c[:3], R @ lam_c[3:]])
            gen += J_lwa.T @ w
        else:
            gen += J_lwa[:3].T @ (R_c @ lam_c)
    np.testing.assert_allclose(terms.r, g - gen, atol=1e-9)
    assert terms.J.shape == (12 + 6, robot.nv)


def test_effector_jacobians_match_pose_differences(robot):
    rng = np.random.default_rng(5)
    model, data = robot.model, robot.model.createData()
    q = _random_q(robot, rng)
    pin.computeJointJacobians(model, data, q)
    pin.updateFramePlacements(model, data)
    for c in robot.contacts.values():
        J = effector_jacobian_world(model, data, c.frame_id)
        M0 = data.oMf[c.frame_id].copy()
        D = np.zeros((6, robot.nv))
        for i in range(robot.nv):
            dv = np.zeros(robot.nv)
            dv[i] = EPS
            pin.framesForwardKinematics(model, data, pin.integrate(model, q, dv))
            Mp = data.oMf[c.frame_id].copy()
            pin.framesForwardKinematics(model, data, pin.integrate(model, q, -dv))
            Mm = data.oMf[c.frame_id].copy()
            D[:3, i] = (Mp.translation - Mm.translation) / (2 * EPS)
            D[3:, i] = (pin.log3(Mp.rotation @ M0.rotation.T) - pin.log3(Mm.rotation @ M0.rotation.T)) / (2 * EPS)
        assert np.max(np.abs(D - J)) < 1e-5 * max(1.0, np.max(np.abs(D))), c.name


def test_plane_and_point_contact_jacobian_rows(robot):
    """Plane rows are the LOCAL Jacobian; point rows are R_c^T J_LWA,lin."""
    rng = np.random.default_rng(9)
    model, data = robot.model, robot.model.createData()
    q = _random_q(robot, rng)
    contacts, lams, R_cs = _setup(robot, rng, ("plane", "point"))
    terms = equilibrium_terms(model, data, q, contacts, lams, R_cs)
    row = 0
    for c, R_c in zip(contacts, R_cs):
        J_lwa = effector_jacobian_world(model, data, c.frame_id)
        if c.type == "plane":
            R = data.oMf[c.frame_id].rotation
            np.testing.assert_allclose(terms.J[row : row + 3], R.T @ J_lwa[:3], atol=1e-10)
            np.testing.assert_allclose(terms.J[row + 3 : row + 6], R.T @ J_lwa[3:], atol=1e-10)
            row += 6
        else:
            np.testing.assert_allclose(terms.J[row : row + 3], R_c.T @ J_lwa[:3], atol=1e-10)
            row += 3


def test_equilibrium_terms_errors(robot):
    data = robot.model.createData()
    c = robot.contacts["left_hand"]
    with pytest.raises(ModelError):
        equilibrium_terms(robot.model, data, robot.q_default, [c], [np.zeros(3)], [None])
    with pytest.raises(ModelError):
        equilibrium_terms(robot.model, data, robot.q_default, [c], [np.zeros(6)], [np.eye(3)])
    with pytest.raises(ModelError):
        equilibrium_terms(robot.model, data, robot.q_default, [c], [], [])


# --- contact constraints -------------------------------------------------------------------

MU, X, Y, FMIN, FMAX = 0.6, 0.04, 0.03, 100.0, 1000.0
D = 1e-3


def _rows(C, c, lam):
    return C @ lam + c


def test_plane_constraint_shapes_and_nominal_wrench():
    C, c = plane_contact_constraints(MU, X, Y, FMIN, FMAX)
    assert C.shape == (18, 6) and c.shape == (18,)
    assert np.all(_rows(C, c, np.array([0, 0, 400.0, 0, 0, 0])) > 0)


@pytest.mark.parametrize(
    "lam, row",
    [
        # normal force bounds
        ([0, 0, FMIN, 0, 0, 0], 0),
        ([0, 0, FMAX, 0, 0, 0], 1),
        # friction pyramid on fx, fy
        ([MU * 400, 0, 400, 0, 0, 0], 2),
        ([-MU * 400, 0, 400, 0, 0, 0], 3),
        ([0, MU * 400, 400, 0, 0, 0], 4),
        ([0, -MU * 400, 400, 0, 0, 0], 5),
        # CoP: |ty| <= X fz, |tx| <= Y fz
        ([0, 0, 400, 0, X * 400, 0], 6),
        ([0, 0, 400, 0, -X * 400, 0], 7),
        ([0, 0, 400, Y * 400, 0, 0], 8),
        ([0, 0, 400, -Y * 400, 0, 0], 9),
    ],
)
def test_plane_constraint_rows_at_boundary(lam, row):
    C, c = plane_contact_constraints(MU, X, Y, FMIN, FMAX)
    lam = np.array(lam, float)
    val = _rows(C, c, lam)
    assert abs(val[row]) < 1e-9
    # Step just inside / just outside along the row's gradient.
    grad = C[row] / np.linalg.norm(C[row])
    inside = _rows(C, c, lam + D * grad)
    outside = _rows(C, c, lam - D * grad)
    assert np.all(inside >= -1e-12), np.nonzero(inside < 0)
    assert outside[row] < 0
    others = np.delete(outside, row)
    # only rows genuinely tied to the same boundary may fail with it
    assert np.sum(others < 0) <= 4


def test_plane_cop_inside_outside():
    C, c = plane_contact_constraints(MU, X, Y, FMIN, FMAX)
    fz = 500.0
    # CoP_x = -ty / fz; just inside and just outside the 4 cm half-length.
    for cop_x, ok in [(0.0399, True), (-0.0399, True), (0.0401, False), (-0.0401, False)]:
        lam = np.array([0, 0, fz, 0, -cop_x * fz, 0])
        assert np.all(_rows(C, c, lam) >= 0) == ok, cop_x
    # CoP_y = tx / fz against the 3 cm half-width.
    for cop_y, ok in [(0.0299, True), (-0.0299, True), (0.0301, False), (-0.0301, False)]:
        lam = np.array([0, 0, fz, cop_y * fz, 0, 0])
        assert np.all(_rows(C, c, lam) >= 0) == ok, cop_y


def test_plane_friction_inside_outside():
    C, c = plane_contact_constraints(MU, X, Y, FMIN, FMAX)
    fz = 500.0
    for fx, fy, ok in [
        (0.999 * MU * fz, 0, True),
        (1.001 * MU * fz, 0, False),
        (0, -0.999 * MU * fz, True),
        (0, -1.001 * MU * fz, False),
    ]:
        lam = np.array([fx, fy, fz, 0, 0, 0])
        assert np.all(_rows(C, c, lam) >= 0) == ok, (fx, fy)


def test_plane_torsion_closed_form():
    """Torsion rows equal the Caron et al. bounds tau_min <= tz <= tau_max."""
    C, c = plane_contact_constraints(MU, X, Y, FMIN, FMAX)
    rng = np.random.default_rng(2)
    for _ in range(200):
        fz = rng.uniform(200, 800)
        fx, fy = rng.uniform(-0.3, 0.3, 2) * fz
        tx, ty = rng.uniform(-0.5, 0.5) * Y * fz, rng.uniform(-0.5, 0.5) * X * fz
        tmin = -MU * (X + Y) * fz + abs(Y * fx - MU * tx) + abs(X * fy - MU * ty)
        tmax = MU * (X + Y) * fz - abs(Y * fx + MU * tx) - abs(X * fy + MU * ty)
        if tmin >= tmax:
            continue
        for tz, ok in [
            (tmax - 1e-6, True),
            (tmax + 1e-6, False),
            (tmin + 1e-6, True),
            (tmin - 1e-6, False),
            (0.5 * (tmin + tmax), True),
        ]:
            val = _rows(C, c, np.array([fx, fy, fz, tx, ty, tz]))
            assert np.all(val[:10] >= 0)
            assert np.all(val[10:] >= 0) == ok
    # Pure torsion with no tangential force: |tz| <= mu (X + Y) fz.
    fz = 500.0
    lim = MU * (X + Y) * fz
    assert np.all(_rows(C, c, np.array([0, 0, fz, 0, 0, 0.999 * lim])) >= 0)
    assert not np.all(_rows(C, c, np.array([0, 0, fz, 0, 0, 1.001 * lim])) >= 0)
    assert not np.all(_rows(C, c, np.array([0, 0, fz, 0, 0, -1.001 * lim])) >= 0)


def test_point_constraint_rows():
    C, c = point_contact_constraints(MU, 10.0, 150.0)
    assert C.shape == (6, 3) and c.shape == (6,)
    cases = [
        ([0, 0, 50], True),
        ([0, 0, 9.99], False),
        ([0, 0, 10.01], True),
        ([0, 0, 150.01], False),
        ([0.999 * MU * 50, 0, 50], True),
        ([-1.001 * MU * 50, 0, 50], False),
        ([0, 0.999 * MU * 50, 50], True),
        ([0, 1.001 * MU * 50, 50], False),
        ([0, 0, -5], False),
    ]
    for lam, ok in cases:
        assert np.all(_rows(C, c, np.array(lam, float)) >= 0) == ok, lam


def test_equilibrium_terms_threads_sharing_a_model_and_no_model_kept_alive(robot):
    """Two threads sharing one model, each with its own data (pinocchio's rule), get the serial
    results: the external-force scratch belongs to the data, not to the model. The scratch dies
    with its data: a model and data dropped by the caller are not kept by the module."""
    import gc
    import threading
    import weakref

    rng = np.random.default_rng(5)
    contacts, _, R_cs = _setup(robot, rng, ("plane", "point"))
    cases = [(_random_q(robot, rng), [rng.normal(size=c.dim) * 100.0 for c in contacts]) for _ in range(6)]
    ref_data = robot.model.createData()
    expected = [equilibrium_terms(robot.model, ref_data, q, contacts, lams, R_cs) for q, lams in cases]
    results: dict[int, list] = {0: [], 1: []}
    start = threading.Barrier(2)

    def work(i):
        data = robot.model.createData()
        start.wait()
        for _ in range(30):
            for q, lams in cases:
                results[i].append(equilibrium_terms(robot.model, data, q, contacts, lams, R_cs))

    threads = [threading.Thread(target=work, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in (0, 1):
        for k, got in enumerate(results[i]):
            want = expected[k % len(cases)]
            np.testing.assert_array_equal(got.r, want.r)
            np.testing.assert_array_equal(got.dr_dq, want.dr_dq)

    import dataclasses

    model = pin.buildSampleModelHumanoid()
    data = model.createData()
    spec = dataclasses.replace(contacts[0], frame_id=model.getFrameId("lleg_effector_body"))
    R_c = None if spec.type == "plane" else np.eye(3)
    equilibrium_terms(model, data, pin.neutral(model), [spec], [np.ones(spec.dim)], [R_c])
    alive = weakref.ref(model)
    del model, data
    gc.collect()
    assert alive() is None


def test_pose_error_world_known_values():
    """pose_error_world: [p_t - p; log3(R_t R^T)] in world axes (a known rotation about the world z
    axis of a rotated frame), written into the buffer; position only without rotation."""
    import pinocchio as pin

    from contactflow.seiko.equilibrium import pose_error_world

    R = pin.rpy.rpyToMatrix(0.4, -0.2, 0.1)
    cur = pin.SE3(R, np.array([0.1, 0.2, 0.3]))
    R_t = pin.rpy.rpyToMatrix(0.0, 0.0, 0.3) @ R  # 0.3 rad about world z from the current frame
    out = np.full(6, np.nan)
    assert pose_error_world(np.array([0.5, 0.2, -0.1]), R_t, cur, out) is out
    np.testing.assert_allclose(out, [0.4, 0.0, -0.4, 0.0, 0.0, 0.3], atol=1e-12)
    out3 = np.full(3, np.nan)
    pose_error_world(np.zeros(3), R_t, cur, out3, rotation=False)
    np.testing.assert_allclose(out3, [-0.1, -0.2, -0.3])


def test_pose_error_local_known_values():
    """pose_error_local: [R^T (p_t - p); log3(R^T R_t)], the error of pose_error_world expressed in
    the current frame (a known 0.3 rad rotation about the frame's own x axis); either part may be
    skipped."""
    import pinocchio as pin

    from contactflow.seiko.equilibrium import pose_error_local, pose_error_world

    R = pin.rpy.rpyToMatrix(0.4, -0.2, 0.1)
    cur = pin.SE3(R, np.array([0.1, 0.2, 0.3]))
    tgt = pin.SE3(R @ pin.rpy.rpyToMatrix(0.3, 0.0, 0.0), np.array([0.5, 0.2, -0.1]))
    pos, rot = np.full(3, np.nan), np.full(3, np.nan)
    pose_error_local(tgt, cur, pos, rot)
    np.testing.assert_allclose(pos, R.T @ [0.4, 0.0, -0.4], atol=1e-12)
    np.testing.assert_allclose(rot, [0.3, 0.0, 0.0], atol=1e-12)
    world = pose_error_world(tgt.translation, tgt.rotation, cur, np.zeros(6))
    np.testing.assert_allclose(rot, R.T @ world[3:], atol=1e-12)
    only = np.full(3, np.nan)
    pose_error_local(tgt, cur, None, only)
    np.testing.assert_array_equal(only, rot)
    pose_error_local(tgt, cur, only, None)
    np.testing.assert_array_equal(only, pos)
