"""G1 (23 DoF) description for LAC: pinocchio and MuJoCo models agree; LAC joint order and gains."""

import mujoco
import numpy as np
import pinocchio as pin
import pytest

from contactflow.robot import load_robot
from contactflow.sim.g1_mujoco import build_g1_model
from contactflow.sim.state import pin_to_mj_qpos

LAC_ORDER = [
    "left_hip_pitch", "left_hip_roll", "left_hip_yaw", "left_knee", "left_ankle_pitch", "left_ankle_roll",
    "right_hip_pitch", "right_hip_roll", "right_hip_yaw", "right_knee", "right_ankle_pitch", "right_ankle_roll",
    "waist_yaw", "left_shoulder_pitch", "left_shoulder_roll", "left_shoulder_yaw", "left_elbow", "left_wrist_roll",
    "right_shoulder_pitch", "right_shoulder_roll", "right_shoulder_yaw", "right_elbow", "right_wrist_roll",
]


@pytest.fixture(scope="module")
def g1():
    return build_g1_model()


def test_joint_order_posture_gains(g1):
    r = g1.robot
    assert list(r.joint_names) == [n + "_joint" for n in LAC_ORDER]
    assert g1.joint_names == r.joint_names
    default = [-0.312, 0, 0, 0.669, -0.363, 0] * 2 + [0, 0.2, 0.2, 0, 0.6, 0, 0.2, -0.2, 0, 0.6, 0]
    np.testing.assert_allclose(r.theta_default, default)
    # Kp = a (2 pi 10)^2 with the LAC armatures; efforts of LAC's table
    np.testing.assert_allclose(g1.kp, r.armature * (2 * np.pi * 10) ** 2, rtol=1e-3)
    np.testing.assert_allclose(g1.kd, r.armature * 4 * (2 * np.pi * 10), rtol=1e-3)
    eff = dict(zip(LAC_ORDER, r.tau_max))
    assert (eff["left_hip_pitch"], eff["left_knee"], eff["left_ankle_roll"], eff["waist_yaw"], eff["right_elbow"]) == (
        88, 139, 50, 88, 25)
    np.testing.assert_allclose(g1.model.actuator_forcerange[:, 1], r.tau_max)
    np.testing.assert_allclose(g1.model.dof_armature[6:], r.armature)
    for locked in ("waist_roll_joint", "waist_pitch_joint", "left_wrist_pitch_joint", "right_wrist_yaw_joint"):
        assert locked in r.locked_joints


def test_total_mass_equal_in_pinocchio_and_mujoco(g1):
    m_pin = pin.computeTotalMass(g1.robot.model)
    m_mj = float(np.sum(g1.model.body_mass))
    assert m_pin == pytest.approx(33.34114202, abs=1e-6)
    assert m_mj == pytest.approx(m_pin, abs=1e-9)


def test_kinematics_agree_at_default(g1):
    r = g1.robot
    d = mujoco.MjData(g1.model)
    d.qpos[:] = pin_to_mj_qpos(r.q_default)
    mujoco.mj_forward(g1.model, d)
    pd = r.model.createData()
    pin.framesForwardKinematics(r.model, pd, r.q_default)
    for link in ("left_wrist_roll_link", "right_elbow_link", "torso_link", "left_ankle_roll_link"):
        np.testing.assert_allclose(d.xpos[g1.body_id(link)], pd.oMf[r.model.getFrameId(link)].translation, atol=1e-9)
    # sole frames on the ground at the default configuration
    for c in r.contacts.values():
        assert abs(pd.oMf[c.frame_id].translation[2]) < 1e-9


def test_talos_still_loads():
    t = load_robot("talos")
    assert t.n == 25 and t.mass == pytest.approx(90.272192, abs=1e-5)
