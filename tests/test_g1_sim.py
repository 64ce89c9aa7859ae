"""Unitree G1 (23 and 29 DoF) as robot data, its MuJoCo model against pinocchio, the one state
converter, and the PD simulator (Unitree MotorCmd law at every physics step)."""

from __future__ import annotations

import mujoco
import numpy as np
import pinocchio as pin
import pytest

from contactflow.errors import ConfigError, ContractError, ModelError
from contactflow.robot import load_robot
from contactflow.sim.mujoco_model import ROOT_JOINT, build_mujoco_model, state_map
from contactflow.sim.pd_robot import PDRobotSim, PDSimConfig, pd_torque
from contactflow.sim.state import StateMap, mj_to_pin_q, pin_to_mj_qpos

# Unitree 29-DoF motor slots 0-28 (unitree_dds.md "Motor slots"), written out independently.
UNITREE_29 = (
    [f"left_{j}_joint" for j in ("hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch", "ankle_roll")]
    + [f"right_{j}_joint" for j in ("hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch", "ankle_roll")]
    + ["waist_yaw_joint", "waist_roll_joint", "waist_pitch_joint"]
    + [f"left_{j}_joint" for j in ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow", "wrist_roll",
                                   "wrist_pitch", "wrist_yaw")]
    + [f"right_{j}_joint" for j in ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow", "wrist_roll",
                                    "wrist_pitch", "wrist_yaw")]
)
EXTRA_6 = ["waist_roll_joint", "waist_pitch_joint", "left_wrist_pitch_joint", "left_wrist_yaw_joint",
           "right_wrist_pitch_joint", "right_wrist_yaw_joint"]
TWO_PI_10 = 2 * np.pi * 10  # BeyondMimic rule: Kp = a (2 pi 10)^2, Kd = 4 a (2 pi 10)


@pytest.fixture(scope="module")
def g1():
    return load_robot("g1")


@pytest.fixture(scope="module")
def g1_29():
    return load_robot("g1_29dof")


@pytest.fixture(scope="module", params=["g1", "g1_29dof"])
def robot(request):
    return load_robot(request.param)


# ---------------------------------------------------------------------------- robot data
def test_29dof_joint_order_is_urdf_depth_first_and_unitree_slots(g1_29):
    assert g1_29.name == "g1_29dof" and g1_29.n == 29 and g1_29.locked_joints == ()
    assert list(g1_29.joint_names) == UNITREE_29
    # pinocchio's order is the URDF depth-first order of the full model
    full = pin.buildModelFromUrdf(str(g1_29.urdf_path), pin.JointModelFreeFlyer())
    assert list(full.names[2:]) == UNITREE_29
    assert g1_29.actuation == "pd" and g1_29.fall_height_m == pytest.approx(0.35)


def test_variants_share_rows_by_name(g1, g1_29):
    assert g1_29.mass == pytest.approx(g1.mass, abs=1e-9)  # the same URDF, locking moves no mass
    i29 = g1_29.joint_index(g1.joint_names)
    for attr in ("K", "q_min", "q_max", "v_max", "tau_max", "armature", "kd", "theta_default"):
        np.testing.assert_array_equal(getattr(g1_29, attr)[i29], getattr(g1, attr), err_msg=attr)
    # LAC default posture extended with zeros
    np.testing.assert_array_equal(g1_29.theta_default[g1_29.joint_index(EXTRA_6)], 0.0)
    # BeyondMimic rule for every joint of both variants; the six extra joints' motors
    for r in (g1, g1_29):
        np.testing.assert_allclose(r.K, r.armature * TWO_PI_10**2, rtol=2e-4)
        np.testing.assert_allclose(r.kd, 4 * r.armature * TWO_PI_10, rtol=2e-3)
    ex = dict(zip(EXTRA_6, g1_29.armature[g1_29.joint_index(EXTRA_6)]))
    assert ex["waist_roll_joint"] == ex["waist_pitch_joint"] == pytest.approx(0.00721945)  # 2 x 5020
    assert ex["left_wrist_pitch_joint"] == ex["right_wrist_yaw_joint"] == pytest.approx(0.00425)  # 4010
    # the same teleop / wrench contracts hold for the 29-DoF robot (hands: the last wrist link)
    assert g1_29.raw["teleop"]["arm_joints"] == g1.raw["teleop"]["arm_joints"]
    assert "left_wrist_yaw_link" in g1_29.raw["wrench_links"] and "left_wrist_roll_link" in g1.raw["wrench_links"]


def test_joint_name_mismatch_lists_the_names(g1):
    with pytest.raises(ModelError, match=r"waist_roll_joint.*not actuated joints of robot 'g1'"):
        g1.joint_index(["left_knee_joint", "waist_roll_joint"])


def _write(path, text):
    path.write_text(text)
    return path


def test_variant_file_errors(tmp_path, g1):
    base = g1.file
    ok = _write(tmp_path / "v.yaml", f"base: {base}\nname: v\nfall_height_m: 0.3\n")
    r = load_robot(ok)
    assert (r.name, r.n, r.fall_height_m) == ("v", 23, 0.3)
    cyc = _write(tmp_path / "a.yaml", "base: b.yaml\n")
    _write(tmp_path / "b.yaml", "base: a.yaml\n")
    with pytest.raises(ConfigError, match="cyclic"):
        load_robot(cyc)
    with pytest.raises(ConfigError, match="not found"):
        load_robot(_write(tmp_path / "c.yaml", "base: nowhere.yaml\n"))
    bad = _write(tmp_path / "d.yaml", f"base: {base}\nactuators: {{left_knee_joint: [0.01, 1.0]}}\n")
    with pytest.raises(ConfigError, match=r"actuators: missing entries for \['left_hip_pitch_joint'"):
        load_robot(bad)
    bad = _write(tmp_path / "e.yaml", f"base: {base}\nactuation: torque\n")
    with pytest.raises(ConfigError, match="actuation"):
        load_robot(bad)
    with pytest.raises(ConfigError, match="robot description not found"):
        load_robot("no_such_robot_variant")
    # robots/g1/lac.yaml is the LAC augmentation config, not a robot file: not taken for robot "lac"
    with pytest.raises(ConfigError, match="robot description not found"):
        load_robot("lac")


# ---------------------------------------------------------------------------- MuJoCo vs pinocchio
def test_mujoco_model_matches_robot_file(robot):
    m = build_mujoco_model(robot)
    assert (m.nq, m.nv, m.nu) == (robot.nq, robot.nv, robot.n)
    assert float(np.sum(m.body_mass)) == pytest.approx(robot.mass, abs=1e-9)
    sm = state_map(m, robot)
    assert sm.identity  # MuJoCo tree order = URDF depth-first = robot file order
    np.testing.assert_array_equal(m.dof_armature[sm.jv], robot.armature)
    np.testing.assert_array_equal(m.actuator_forcerange[:, 1], robot.tau_max)
    np.testing.assert_array_equal(m.actuator_gainprm[:, 0], robot.K)
    np.testing.assert_array_equal(-m.actuator_biasprm[:, 2], robot.kd)
    for i, name in enumerate(robot.joint_names):
        assert m.actuator(i).name == name and m.joint(sm.jq[i] - 7 + 1).name == name
    mj = robot.raw["mujoco"]
    assert m.opt.timestep == mj["timestep_s"] == 0.002
    assert m.opt.integrator == mujoco.mjtIntegrator.mjINT_EULER
    assert m.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC and m.opt.impratio == 30.0
    spheres = [g for g in range(m.ngeom) if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_SPHERE]
    assert len(spheres) == 8 and np.all(m.geom_size[spheres, 0] == 0.005)
    assert m.ngeom == 9  # the spheres and the floor: no URDF geometry


def test_frames_agree_at_random_configurations(robot):
    m = build_mujoco_model(robot)
    d = mujoco.MjData(m)
    sm = state_map(m, robot)
    pdata = robot.model.createData()
    rng = np.random.default_rng(3)
    links = ["pelvis", "torso_link", "left_ankle_roll_link", "right_wrist_roll_link", "left_elbow_link"]
    if robot.n == 29:
        links += ["left_wrist_yaw_link", "right_wrist_pitch_link"]
    for _ in range(5):
        q = pin.randomConfiguration(robot.model, np.r_[-np.ones(3), -np.ones(4), robot.q_min],
                                    np.r_[np.ones(3), np.ones(4), robot.q_max])
        sm.set(d, q)
        mujoco.mj_kinematics(m, d)
        pin.framesForwardKinematics(robot.model, pdata, q)
        for link in links:
            oMf = pdata.oMf[robot.frame_id(link)]
            b = m.body(link).id
            np.testing.assert_allclose(d.xpos[b], oMf.translation, atol=1e-9, err_msg=link)
            np.testing.assert_allclose(d.xmat[b].reshape(3, 3), oMf.rotation, atol=1e-9, err_msg=link)
        for c in robot.contacts.values():  # sole sites = sole frames
            oMf = pdata.oMf[c.frame_id]
            np.testing.assert_allclose(d.site_xpos[m.site(c.frame).id], oMf.translation, atol=1e-9)


def test_state_converter_round_trip_and_velocity_convention(g1_29):
    r = g1_29
    m = build_mujoco_model(r)
    d = mujoco.MjData(m)
    sm = StateMap(m, r.joint_names, ROOT_JOINT)
    rng = np.random.default_rng(0)
    q = pin.randomConfiguration(r.model, np.r_[-np.ones(7), r.q_min], np.r_[np.ones(7), r.q_max])
    v = rng.normal(size=r.nv)
    sm.set(d, q, v)
    q2, v2 = sm.get(d)
    np.testing.assert_allclose(q2, q, atol=1e-15)
    np.testing.assert_allclose(v2, v, atol=1e-12)
    np.testing.assert_allclose(mj_to_pin_q(pin_to_mj_qpos(q)), q)
    np.testing.assert_allclose(d.qpos, pin_to_mj_qpos(q))  # identity joint map for this model
    # velocity conventions: the hand's spatial velocity from MuJoCo equals pinocchio's (LOCAL frame)
    mujoco.mj_forward(m, d)
    pdata = r.model.createData()
    pin.forwardKinematics(r.model, pdata, q, v)
    pin.updateFramePlacements(r.model, pdata)
    for link in ("pelvis", "left_wrist_yaw_link"):
        vel = np.zeros(6)
        mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_XBODY, m.body(link).id, vel, 1)  # local: [w; v]
        vp = pin.getFrameVelocity(r.model, pdata, r.frame_id(link), pin.LOCAL)
        np.testing.assert_allclose(vel[3:], vp.linear, atol=1e-10, err_msg=link)
        np.testing.assert_allclose(vel[:3], vp.angular, atol=1e-10, err_msg=link)


def test_state_converter_maps_joints_by_name(g1):
    m = build_mujoco_model(g1)
    names = list(reversed(g1.joint_names))
    sm = StateMap(m, names, ROOT_JOINT)
    assert not sm.identity
    d = mujoco.MjData(m)
    q = np.r_[0, 0, 0.7, 0, 0, 0, 1, np.arange(g1.n) * 0.01]
    sm.set(d, q)
    for i, name in enumerate(names):
        assert d.qpos[m.joint(name).qposadr[0]] == q[7 + i]
    with pytest.raises(ModelError, match=r"lacks joint\(s\) \['waist_roll_joint'\]"):
        StateMap(m, list(g1.joint_names) + ["waist_roll_joint"], ROOT_JOINT)


# ---------------------------------------------------------------------------- PD simulator
@pytest.fixture(scope="module")
def sim(g1):
    return PDRobotSim(PDSimConfig(), g1)


def _stiff(r):
    return r.K * 10.0, r.kd * 1.5  # stiff enough to hold the posture without balance control


def test_reset_is_standing_at_rest_on_the_soles(sim, g1):
    r0 = sim.reset()
    assert r0.t == 0.0
    np.testing.assert_allclose(r0.q, g1.q_default, atol=1e-12)
    assert np.all(r0.v == 0)
    spheres = [g for g in range(sim.model.ngeom) if sim.model.geom_type[g] == mujoco.mjtGeom.mjGEOM_SPHERE]
    lowest = sim.data.geom_xpos[spheres, 2] - 0.005
    np.testing.assert_allclose(lowest, 0.0, atol=1e-9)  # every sole sphere touches the floor
    assert sim.control_dt_s == pytest.approx(0.02) and sim.n_substeps == 10


def test_sole_forces_carry_the_weight_at_rest(sim, g1):
    sim.reset()
    kp, kd = _stiff(g1)
    for _ in range(100):  # 2 s
        r = sim.step(g1.theta_default, kp, kd)
    assert not sim.fell()
    fz = r.wrenches["left_foot"][2] + r.wrenches["right_foot"][2]
    assert fz == pytest.approx(g1.weight, rel=2e-3)
    assert r.wrenches["left_foot"][2] == pytest.approx(g1.weight / 2, rel=0.05)  # symmetric stance
    assert np.max(np.abs(r.v)) < 0.05
    np.testing.assert_allclose(r.imu_acc, [0, 0, 9.81], atol=0.4)


def test_pd_law_and_clamp_at_every_physics_step(sim, g1):
    """One tick of PDRobotSim (MuJoCo's affine actuators) equals a hand loop applying the numpy PD
    law (pd_torque, the one used by the PRIME data generator) as a plain torque at each of the 10
    physics steps."""
    sim.reset()
    rng = np.random.default_rng(1)
    q_t = g1.theta_default + rng.normal(0, 0.3, g1.n)
    kp = g1.K * rng.uniform(0.5, 3.0, g1.n)
    kd = g1.kd * rng.uniform(0.5, 1.5, g1.n)
    tff = rng.normal(0, 3.0, g1.n)
    q_t[3] = g1.q_max[3]  # knee: far target -> saturated torque
    kp[3] = 500.0
    m2 = build_mujoco_model(g1)
    m2.actuator_gainprm[:, 0] = 1.0  # plain torque motors: force = ctrl, clamped to +-tau_max
    m2.actuator_biasprm[:, :3] = 0.0
    d2 = mujoco.MjData(m2)
    d2.qpos[:] = sim.data.qpos
    d2.qvel[:] = sim.data.qvel
    sm = state_map(m2, g1)
    saturated = False
    for _ in range(sim.n_substeps):
        q, v = sm.get(d2)
        tau = pd_torque(q_t, kp, kd, tff, q[7:], v[6:], g1.tau_max)
        saturated |= bool(np.any(np.abs(tau) >= g1.tau_max))
        d2.ctrl[:] = tau
        mujoco.mj_step(m2, d2)
    r = sim.step(q_t, kp, kd, tff)
    assert saturated
    np.testing.assert_allclose(sim.data.qpos, d2.qpos, atol=1e-10)
    np.testing.assert_allclose(sim.data.qvel, d2.qvel, atol=1e-8)
    # the reading's tau is the PD law at the reading's state, clamped
    q, v = r.q, r.v
    np.testing.assert_allclose(r.tau, pd_torque(q_t, kp, kd, tff, q[7:], v[6:], g1.tau_max), atol=1e-9)
    np.testing.assert_array_equal(sim.pd_torque(), pd_torque(q_t, kp, kd, tff, q[7:], v[6:], g1.tau_max))
    assert r.tau[3] == pytest.approx(g1.tau_max[3])


def test_feed_forward_only_and_command_errors(sim, g1):
    sim.reset()
    z = np.zeros(g1.n)
    r = sim.step(g1.theta_default, z, z, np.full(g1.n, 0.5))
    np.testing.assert_allclose(r.tau, 0.5)
    bad_kp = g1.K.copy()
    bad_kp[4] = np.nan
    with pytest.raises(ContractError, match="kp: non-finite value.*left_ankle_pitch_joint"):
        sim.step(g1.theta_default, bad_kp)
    with pytest.raises(ContractError, match="kd: outside"):
        sim.step(g1.theta_default, None, sim.kd_max * 2)
    with pytest.raises(ContractError, match=r"q_target: expected shape \(23,\)"):
        sim.step(np.zeros(29))
    assert sim.time == pytest.approx(0.02)  # the refused commands did not advance time


def test_external_wrench_in_world_frame_at_the_com(sim, g1):
    sim.reset()
    kp, kd = _stiff(g1)
    sim.set_external_wrench("pelvis", np.array([0, 0, 100.0, 0, 0, 0]))  # lift 100 N
    for _ in range(100):
        r = sim.step(g1.theta_default, kp, kd)
    fz = r.wrenches["left_foot"][2] + r.wrenches["right_foot"][2]
    assert fz == pytest.approx(g1.weight - 100.0, rel=5e-3)
    sim.set_external_wrench("pelvis", None)
    with pytest.raises(ContractError, match="no MuJoCo body 'nope'"):
        sim.set_external_wrench("nope", np.zeros(6))


def test_payload_adds_its_weight(g1):
    s = PDRobotSim(PDSimConfig(), g1, extra_bodies=[{"name": "box", "parent": "torso_link", "pos": (0.1, 0, 0.1),
                                                      "mass": 2.0}])
    kp, kd = _stiff(g1)
    for _ in range(100):
        r = s.step(g1.theta_default, kp, kd)
    fz = r.wrenches["left_foot"][2] + r.wrenches["right_foot"][2]
    assert fz == pytest.approx(g1.weight + 2.0 * 9.81, rel=3e-3)


def test_limp_robot_falls_and_fell_says_so(sim, g1):
    sim.reset()
    z = np.zeros(g1.n)
    fell_at = None
    for k in range(150):
        sim.step(g1.theta_default, z, z)
        if sim.fell():
            fell_at = k
            break
    assert fell_at is not None and sim.data.qpos[2] < g1.fall_height_m


def test_29dof_holds_its_posture_with_stiff_gains(g1_29):
    s = PDRobotSim(PDSimConfig(), g1_29)
    kp, kd = _stiff(g1_29)
    for _ in range(100):
        r = s.step(g1_29.theta_default, kp, kd)
    assert not s.fell()
    np.testing.assert_allclose(r.q[7:], g1_29.theta_default, atol=0.05)


def test_pd_sim_refuses_a_position_robot():
    with pytest.raises(ConfigError, match="actuation: pd"):
        PDRobotSim(PDSimConfig(), load_robot("talos"))


def test_prime_datagen_model_comes_from_the_builder_with_the_true_payload():
    """PRIME's generator model: the one builder plus PRIME's contact spheres; its payload CoM is
    where the ground truth (true_trunk_inertia) says (it was 5 cm higher before the builder)."""
    from contactflow.prime.datagen import PayloadConfig, build_mujoco_model as prime_model, true_trunk_inertia
    from contactflow.prime.model import load_prime_robot

    pr = load_prime_robot("g1")
    payload = PayloadConfig(mass_kg=3.0, offset_m=(0.02, -0.01, 0.05))
    m = prime_model(pr, payload)
    d = mujoco.MjData(m)
    q = pr.robot.q_default
    state_map(m, pr.robot).set(d, q)
    mujoco.mj_kinematics(m, d)
    pdata = pr.model.createData()
    pin.framesForwardKinematics(pr.model, pdata, q)
    oMb = pdata.oMi[1]  # the trunk (root joint) frame
    np.testing.assert_allclose(d.xipos[m.body("payload").id], oMb.act(np.array(payload.offset_m)), atol=1e-12)
    trunk = true_trunk_inertia(pr, payload)
    # the trunk = every body welded to the pelvis (pinocchio merges them), payload included
    welded = np.flatnonzero(m.body_weldid == m.body_weldid[m.body("pelvis").id])
    mass = m.body_mass[welded].sum()
    com_mj = (m.body_mass[welded, None] * d.xipos[welded]).sum(axis=0) / mass
    assert mass == pytest.approx(trunk.mass, abs=1e-9)
    np.testing.assert_allclose(com_mj, oMb.act(trunk.lever), atol=1e-9)
    assert m.nu == pr.robot.n and m.opt.integrator == mujoco.mjtIntegrator.mjINT_EULER
    assert np.all(m.actuator_gainprm[:, 0] == 1.0) and np.all(m.actuator_biasprm[:, :3] == 0.0)  # torque motors
    spheres = [g for g in range(m.ngeom) if m.geom(g).name.startswith("contact_")]
    assert len(spheres) == len(pr.points) and m.ngeom == len(pr.points) + 1
