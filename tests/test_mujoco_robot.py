"""MuJoCo simulation of Talos: model construction, standing, sensor conventions, contracts.

Reference values: shared/reference/talos_mujoco.md (recipe §0, sensors §2, flexibility §5).
"""

from __future__ import annotations

import mujoco
import numpy as np
import pinocchio as pin
import pytest

from contactflow.config import load_config
from contactflow.errors import ConfigError, ContractError, ModelError
from contactflow.robot import load_robot
from contactflow.sim.mujoco_model import (
    IMU_SITE,
    PointMass,
    build_mujoco_model,
    check_actuator_stability,
    set_pinocchio_configuration,
)
from contactflow.sim.mujoco_robot import MujocoRobotSim, SimConfig

STAND_S = 3.0


@pytest.fixture(scope="module")
def robot():
    return load_robot("talos")


@pytest.fixture(scope="module")
def model(robot):
    return build_mujoco_model(robot)


@pytest.fixture(scope="module")
def stood(robot):
    """A default simulator after reset (settled) and STAND_S seconds of default commands."""
    sim = MujocoRobotSim(SimConfig(), robot)
    first = sim.reset()
    history = [first]
    for _ in range(int(round(STAND_S / sim.control_dt_s))):
        history.append(sim.step(robot.theta_default))
    return sim, history


# ---------------------------------------------------------------------------- model
def test_model_matches_robot(robot, model):
    assert (model.nq, model.nv, model.nu) == (7 + robot.n, 6 + robot.n, 25)
    assert abs(float(np.sum(model.body_mass)) - robot.mass) < 1e-6
    assert model.ngeom == 3  # floor + two sole boxes: every URDF geom is discarded
    for i, name in enumerate(robot.joint_names):
        a = model.actuator(name)
        assert a.gainprm[0] == robot.K[i]
        assert tuple(a.forcerange) == (-robot.tau_max[i], robot.tau_max[i])
        j = model.joint(name)
        assert not model.jnt_actfrclimited[j.id]  # pitfall 2
        assert model.dof_frictionloss[j.dofadr[0]] == 0 and model.dof_damping[j.dofadr[0]] == 0
    assert model.opt.timestep == robot.raw["mujoco"]["timestep_s"]
    assert model.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST


def test_sites_match_pinocchio_fk(robot, model):
    d = mujoco.MjData(model)
    set_pinocchio_configuration(model, d, robot, robot.q_default)
    mujoco.mj_kinematics(model, d)
    pd = robot.model.createData()
    pin.framesForwardKinematics(robot.model, pd, robot.q_default)
    frames = [c.frame for c in robot.contacts.values()] + list(robot.raw["extra_frames"])
    for f in set(frames):
        oMf = pd.oMf[robot.frame_id(f)]
        s = model.site(f).id
        np.testing.assert_allclose(d.site_xpos[s], oMf.translation, atol=1e-9, err_msg=f)
        np.testing.assert_allclose(d.site_xmat[s].reshape(3, 3), oMf.rotation, atol=1e-9, err_msg=f)
    # IMU on base_link: its pose is the base pose of q_default.
    s = model.site(IMU_SITE).id
    np.testing.assert_allclose(d.site_xpos[s], robot.q_default[:3], atol=1e-12)


def test_unstable_timestep_raises(robot):
    with pytest.raises(ModelError, match="M3"):
        build_mujoco_model(robot, timestep_s=0.004)  # ankle roll: sqrt(5000/0.0099)*0.004 = 2.8


def test_stability_margin_at_default(robot, model):
    wdt = check_actuator_stability(model, robot)
    assert wdt.shape == (robot.n,) and 0.5 < wdt.max() < 1.0  # recipe: ~0.71 at dt = 1 ms


def test_extra_point_mass(robot, model):
    pm = PointMass(name="payload", parent="gripper_left_base_link", pos=(0.0, 0.0, -0.1), mass=5.0)
    m = build_mujoco_model(robot, extra_bodies=[pm])
    assert abs(float(np.sum(m.body_mass)) - (robot.mass + 5.0)) < 1e-9
    d = mujoco.MjData(m)
    set_pinocchio_configuration(m, d, robot, robot.q_default)
    mujoco.mj_kinematics(m, d)
    b = m.body("payload").id
    np.testing.assert_allclose(d.xipos[b], d.xpos[b], atol=1e-12)  # pitfall 6: CoM at the body origin
    p = m.body("gripper_left_base_link").id
    np.testing.assert_allclose(d.xpos[b], d.xpos[p] + d.xmat[p].reshape(3, 3) @ [0, 0, -0.1], atol=1e-12)
    with pytest.raises(ConfigError):
        build_mujoco_model(robot, extra_bodies=[{"name": "x", "parent": "base_link", "pos": (0, 0, 0), "mass": -1}])
    with pytest.raises(ModelError):
        build_mujoco_model(robot, extra_bodies=[PointMass(name="x", parent="nope", pos=(0, 0, 0), mass=1.0)])


def test_set_body_mass_ramps_a_payload(robot):
    # A payload welded at ~0 kg and raised to 5 kg during a run: the feet carry its weight and the
    # subtree masses follow; the settled-state cache is cleared (the next reset settles again).
    pm = PointMass(name="payload", parent="gripper_left_base_link", pos=(0.0, 0.0, -0.1), mass=5.0)
    sim = MujocoRobotSim(SimConfig(), robot, extra_bodies=[pm])
    sim.set_body_mass("payload", 1e-6)
    assert not sim._settled
    assert abs(float(sim.model.body_subtreemass[0]) - robot.mass) < 1e-5
    r = sim.reset()
    fz0 = sum(w[2] for w in r.wrenches.values())
    for k in range(1, 251):  # 0 -> 5 kg over 0.5 s
        sim.set_body_mass("payload", 5.0 * k / 250)
        sim.step(robot.theta_default)
    assert abs(float(sim.model.body_subtreemass[0]) - (robot.mass + 5.0)) < 1e-9
    fz1 = np.mean([sum(w[2] for w in sim.step(robot.theta_default).wrenches.values()) for _ in range(500)])
    assert not sim.fell()
    assert abs(fz1 - fz0 - 5.0 * 9.81) < 2.0
    with pytest.raises(ContractError):
        sim.set_body_mass("payload", 0.0)


# ---------------------------------------------------------------------------- standing
def test_reset_state(robot, stood):
    first = stood[1][0]
    assert first.t == 0.0
    assert first.q.shape == (robot.nq,) and first.v.shape == (robot.nv,) and first.tau.shape == (robot.n,)
    assert abs(np.linalg.norm(first.q[3:7]) - 1) < 1e-12
    # Settled start: close to q_default (base dropped ~1.6 mm, recipe §3) and at rest.
    assert np.linalg.norm(first.q[:3] - robot.q_default[:3]) < 0.01
    assert np.abs(first.v).max() < 1e-3
    np.testing.assert_allclose(first.imu_quat, first.q[3:7], atol=1e-12)


def test_stands_without_drift(robot, stood):
    sim, hist = stood
    last = hist[-1]
    assert abs(last.t - STAND_S) < 1e-9
    assert not sim.fell()
    assert all(h.diagnostics["diverged"] == 0 for h in hist)
    drift = max(np.linalg.norm(h.q[:3] - hist[0].q[:3]) for h in hist)
    assert drift < 5e-3
    assert last.diagnostics["ncon"] == 8 and last.diagnostics["n_saturated"] == 0


def test_sole_forces_carry_weight(robot, stood):
    last = stood[1][-1]
    fz = sum(last.wrenches[c.name][2] for c in robot.contacts.values() if c.type == "plane")
    assert abs(fz / robot.weight - 1.0) < 5e-3
    for w in last.wrenches.values():
        assert w.shape == (6,) and w[2] > 0.3 * robot.weight
        cop = np.array([-w[4], w[3]]) / w[2]
        assert np.all(np.abs(cop) < 0.03)  # within a few cm of the sole origin
    # IMU at rest: specific force ~ +g along the base z axis, no rotation rate.
    assert abs(np.linalg.norm(last.imu_acc) - 9.81) < 0.01 and last.imu_acc[2] > 9.7
    assert np.abs(last.imu_gyro).max() < 1e-3


def test_flexible_joint_model(robot, stood):
    """Recipe §5: K (theta_cmd - q) = g(q) - sum J^T w at rest (the SEIKO joint spring)."""
    sim, hist = stood
    r = hist[-1]
    pm, pd = robot.model, robot.model.createData()
    tau_pred = pin.computeGeneralizedGravity(pm, pd, r.q).copy()
    pin.computeJointJacobians(pm, pd, r.q)
    for c in robot.contacts.values():
        if c.type == "plane":
            J = pin.getFrameJacobian(pm, pd, c.frame_id, pin.LOCAL)
            tau_pred -= J.T @ r.wrenches[c.name]
    spring = robot.K * (sim.theta_cmd - r.q[7:])
    np.testing.assert_allclose(spring, tau_pred[6:], atol=1e-3)
    np.testing.assert_allclose(r.tau, tau_pred[6:], atol=1e-3)
    assert np.abs(tau_pred[:3]).max() < 0.02 and np.abs(tau_pred[3:6]).max() < 0.02  # base rows


def test_hand_positions(robot, stood):
    r = stood[1][-1]
    pd = robot.model.createData()
    pin.framesForwardKinematics(robot.model, pd, r.q)
    for c in robot.contacts.values():
        if c.type == "point":
            np.testing.assert_allclose(r.hand_positions[c.name], pd.oMf[c.frame_id].translation, atol=1e-9)


# ---------------------------------------------------------------------------- conventions
def test_velocity_convention_standing(robot, stood):
    hist = stood[1]
    dt = stood[0].control_dt_s
    for a, b in zip(hist[:50], hist[1:51]):
        fd = pin.difference(robot.model, a.q, b.q) / dt
        np.testing.assert_allclose(fd, b.v, atol=1e-4)


def test_velocity_and_quaternion_convention_in_flight(robot):
    """Rotated, tumbling base: v from readings = pin.difference(q_k, q_k+1) / dt (base-frame twist)."""
    sim = MujocoRobotSim(SimConfig(control_dt_s=0.001, settle_s=0.0), robot)
    rng = np.random.default_rng(0)
    q = robot.q_default.copy()
    q[2] = 5.0  # far above the floor: no contact during the test
    q[3:7] = pin.Quaternion(pin.exp3(rng.normal(size=3))).coeffs()  # xyzw
    v = 0.5 * rng.normal(size=robot.nv)
    r = sim.set_state(q, v)
    np.testing.assert_allclose(r.q, q, atol=1e-12)
    np.testing.assert_allclose(r.v, v, atol=1e-12)
    np.testing.assert_allclose(r.imu_quat, q[3:7], atol=1e-12)
    np.testing.assert_allclose(r.imu_gyro, v[3:6], atol=1e-12)  # IMU on base_link: base-frame rate
    prev = r
    for _ in range(10):
        r = sim.step(robot.theta_default)
        fd = pin.difference(robot.model, prev.q, r.q) / sim.control_dt_s
        # Second-order SE(3)-vs-R3xSO(3) integration difference only: ~|v||omega| dt.
        np.testing.assert_allclose(fd, r.v, atol=5e-4)
        prev = r
    assert r.diagnostics["ncon"] == 0


# ---------------------------------------------------------------------------- contracts
def test_bad_commands_raise(robot, stood):
    sim = stood[0]
    t0 = sim.time
    bad = robot.theta_default.copy()
    bad[3] = np.nan
    for cmd in (bad, np.zeros(robot.n + 1), np.zeros((robot.n, 1)), ["a"] * robot.n, np.full(robot.n, np.inf)):
        with pytest.raises(ContractError):
            sim.step(cmd)
    assert sim.time == t0  # the state did not advance
    with pytest.raises(ContractError, match="leg_left_4_joint"):
        sim.step(bad)


def test_config_validation(robot):
    with pytest.raises(ConfigError, match="integer multiple"):
        MujocoRobotSim(SimConfig(control_dt_s=0.0015, settle_s=0.0), robot)
    with pytest.raises(ConfigError, match="unknown"):
        load_config(SimConfig, {"control_dt": 0.002}, source="test")
    with pytest.raises(ConfigError):
        load_config(SimConfig, {"tau_noise_std_nm": -1.0}, source="test")
    cfg = load_config(SimConfig, {"control_dt_s": 0.004, "interpolate_commands": False})
    assert cfg.control_dt_s == 0.004 and cfg.physics_dt_s is None


def test_interpolation_and_fall_detection(robot):
    sim = MujocoRobotSim(SimConfig(settle_s=0.0), robot)
    theta = robot.theta_default.copy()
    theta[0] += 0.01
    sim.step(theta)
    np.testing.assert_allclose(sim.data.ctrl[sim.model.actuator("leg_left_1_joint").id], theta[0])
    assert not sim.fell()
    q = robot.q_default.copy()
    q[2] = 0.3
    sim.set_state(q)
    assert sim.fell()
    sim.reset()
    assert not sim.fell() and sim.time == 0.0


def test_reset_to_other_posture(robot):
    sim = MujocoRobotSim(SimConfig(settle_s=1.0), robot)
    theta = robot.theta_default.copy()
    i = robot.joint_names.index("arm_left_4_joint")
    theta[i] = -1.0
    r = sim.reset(theta)
    np.testing.assert_array_equal(sim.theta_cmd, theta)
    assert r.t == 0.0 and not sim.fell()
    assert abs(r.q[7 + i] - theta[i]) < 0.01
    assert abs(sum(w[2] for w in r.wrenches.values()) / robot.weight - 1) < 0.01
    z = [sim.data.site_xpos[sim.model.site(c.frame).id][2] for c in robot.contacts.values() if c.type == "plane"]
    assert max(abs(zi) for zi in z) < 3e-3  # soles on the floor (contact penetration ~1 mm)


def test_sensor_noise(robot):
    clean = MujocoRobotSim(SimConfig(settle_s=0.0), robot).readings()
    noisy = MujocoRobotSim(SimConfig(settle_s=0.0, q_noise_std_rad=1e-3, force_noise_std_n=1.0), robot).readings()
    dq = noisy.q[7:] - clean.q[7:]
    assert 1e-4 < np.std(dq) < 1e-2
    np.testing.assert_array_equal(noisy.q[:7], clean.q[:7])
    np.testing.assert_array_equal(noisy.tau, clean.tau)
    assert np.abs(noisy.wrenches["left_foot"][:3] - clean.wrenches["left_foot"][:3]).max() > 0


def test_yawed_robot_wrenches_in_local_frame(robot, stood):
    """The settled robot turned 90 deg about z: readings stay consistent (LOCAL wrenches, base-frame v)."""
    sim0, hist = stood
    q = hist[-1].q.copy()
    R_z = pin.rpy.rpyToMatrix(0.0, 0.0, np.pi / 2)
    M = pin.XYZQUATToSE3(q[:7])
    M = pin.SE3(R_z, np.zeros(3)) * M
    q[:7] = pin.SE3ToXYZQUAT(M)
    sim = MujocoRobotSim(SimConfig(settle_s=0.0), robot)
    sim.set_state(q)
    for _ in range(250):
        r = sim.step(sim0.theta_cmd)
    pm, pd = robot.model, robot.model.createData()
    tau_pred = pin.computeGeneralizedGravity(pm, pd, r.q).copy()
    pin.computeJointJacobians(pm, pd, r.q)
    for c in robot.contacts.values():
        if c.type == "plane":
            tau_pred -= pin.getFrameJacobian(pm, pd, c.frame_id, pin.LOCAL).T @ r.wrenches[c.name]
    np.testing.assert_allclose(robot.K * (sim.theta_cmd - r.q[7:]), tau_pred[6:], atol=1e-2)
    np.testing.assert_allclose(r.wrenches["left_foot"], hist[-1].wrenches["left_foot"], atol=0.5)
