"""PRIME data generator: MuJoCo model built from the URDF, payload, seeded noise, conventions."""

import mujoco
import numpy as np
import pinocchio as pin
import pytest

from contactflow.errors import ConfigError
from contactflow.prime.datagen import (
    GenerateConfig,
    PayloadConfig,
    build_mujoco_model,
    joint_targets,
    simulate_mujoco,
    true_trunk_inertia,
)
from contactflow.prime.model import load_prime_robot


@pytest.fixture(scope="module")
def go2():
    return load_prime_robot("go2")


def test_mujoco_model_matches_pinocchio_plus_payload(go2):
    m = build_mujoco_model(go2, PayloadConfig(mass_kg=3.0))
    assert m.nu == 12 and m.nq == go2.model.nq
    assert np.isclose(m.body_subtreemass[1], pin.computeTotalMass(go2.model) + 3.0)
    assert np.allclose(m.dof_armature[6:], go2.model.armature[6:])
    for p in go2.points:
        g = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, f"contact_{p.name}")
        assert g >= 0 and np.isclose(m.geom_size[g, 0], p.radius_m)
    trunk = true_trunk_inertia(go2, PayloadConfig(mass_kg=3.0))
    assert np.isclose(trunk.mass, 10.277, atol=1e-3)  # base 6.921 + 4 hip rotors + payload


def test_noise_is_seeded_and_scalable(go2):
    cfg = GenerateConfig(motion="squat", duration_s=0.1, seed=3)
    a, b = simulate_mujoco(go2, cfg), simulate_mujoco(go2, cfg)
    assert np.array_equal(a.q_meas, b.q_meas) and np.array_equal(a.tau_meas, b.tau_meas)
    c = simulate_mujoco(go2, GenerateConfig(motion="squat", duration_s=0.1, seed=4))
    assert not np.array_equal(a.q_meas, c.q_meas)
    assert np.allclose(a.q_true, c.q_true)  # the simulation itself is deterministic
    clean = simulate_mujoco(go2, GenerateConfig(motion="squat", duration_s=0.1, noise_scale=0.0))
    assert np.array_equal(clean.q_meas, clean.q_true) and np.array_equal(clean.tau_meas, clean.tau_true)
    err = a.q_meas[:, 7:] - a.q_true[:, 7:]
    assert 0.001 < err.std() < 0.004  # joint noise sigma 2 mrad


def test_trot_keeps_the_robot_upright_with_alternating_support(go2):
    run = simulate_mujoco(go2, GenerateConfig(motion="trot", duration_s=1.0))
    rpy = np.array([pin.rpy.matrixToRpy(pin.Quaternion(q[6], q[3], q[4], q[5]).toRotationMatrix()) for q in run.q_true])
    assert np.abs(rpy[:, :2]).max() < 0.2
    in_contact = run.force_W[1:, :, 2] > 1.0
    assert (in_contact.sum(axis=1) < 4).mean() > 0.5  # feet leave the ground most of the time


def test_unknown_motion_is_rejected(go2):
    with pytest.raises(ValueError, match="motion must be one of"):
        GenerateConfig(motion="backflip")
    with pytest.raises(ConfigError, match="not scripted for robot 'go2'"):
        joint_targets("weight_shift", 0.0, go2.robot.theta_default, 1.0, "go2")
