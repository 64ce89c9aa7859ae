"""Steady state of the virtual admittance + whole-body IK (LAC eqs. (6)-(11)).

"Where the IK is unconstrained" = nothing competes with the contact task: the base-anchor and
posture weights are set to zero and the target is reachable with no bound active. The Table II
weights add a known steady-state offset (see test_linear_offset_with_table_ii_weights).
"""

import numpy as np
import pinocchio as pin
import pytest

from contactflow.lac.config import IKCfg, LacConfig
from contactflow.lac.contact_frames import ContactFrame
from contactflow.lac.events import EpisodeSample, Profile
from contactflow.lac.model import LacRobot
from contactflow.lac.synthesis import Synthesizer

Q_REF = np.array([0.0, -0.3, 0.2, 0.0, 0.8, 0.0, -0.3, -0.2, 0.0, 0.8, 0.0])
PROFILE = Profile(rest_s=0.5, ramp_s=1.0, hold_s=6.0, release_s=1.0, frames=450, dt_s=0.02)
T_END_HOLD = int((0.5 + 1.0 + 6.0) / 0.02) - 1
KAPPA = 30.0


@pytest.fixture(scope="module")
def lac():
    return LacRobot()


@pytest.fixture(scope="module")
def free_syn(lac):
    return Synthesizer(LacConfig(ik=IKCfg(w_posture=0.0, w_base_pos=0.0, w_base_ori=0.0)), lac)


def _frame(lac, link):
    i = lac.link_index(link)
    m = np.zeros(11, bool)
    m[i] = True
    p = np.zeros((11, 3))
    n = np.zeros((11, 3))
    p[i] = [0.1, 0.0, 0.0]
    n[i] = [0.0, 0.0, -1.0]
    return ContactFrame(Q_REF, m, p, n, "test"), i


def _sample(frame, i, k, force=None, couple=None):
    F = np.zeros((11, 3))
    C = np.zeros((11, 3))
    if force is not None:
        F[i] = force
    if couple is not None:
        C[i] = couple
    return EpisodeSample(frame, 0.72, PROFILE, np.asarray(k, float), "force" if force is not None else "couple",
                         (i,), F, C, np.zeros(11), np.zeros(11))


@pytest.mark.parametrize("link,k_idx", [("left_wrist_roll_link", 0), ("right_elbow_link", 1), ("torso_link", 2)])
def test_linear_displacement_equals_f_over_k(lac, free_syn, link, k_idx):
    frame, i = _frame(lac, link)
    k = [150.0, 150.0, 150.0, 30.0, 30.0]
    k[k_idx] = 120.0
    F = np.array([8.0, 3.0, -4.0])
    ro = free_syn.rollout(_sample(frame, i, k, force=F), stop_early=False)
    assert ro.qp_failures == 0
    d = ro.x_W[T_END_HOLD, i] - ro.x_ref_W[i]
    expected = F / 120.0
    assert np.linalg.norm(d - expected) <= 0.05 * np.linalg.norm(expected)


@pytest.mark.parametrize("k_theta", [15.0, 60.0])
def test_angular_settles_at_minus_kappa_over_k_theta(lac, free_syn, k_theta):
    frame, i = _frame(lac, "left_wrist_roll_link")
    ro = free_syn.rollout(_sample(frame, i, [150, 150, 150, k_theta, 30], couple=[0.5, -0.3, 2.0]), stop_early=False)
    t = T_END_HOLD
    e_R = pin.log3(ro.R_ref_W[i] @ ro.R_W[t, i].T)
    expected = -(KAPPA / k_theta) * ro.dtheta_W[t, i]
    assert np.linalg.norm(expected) > 0.05  # a real deflection, not a trivial zero
    assert np.linalg.norm(e_R - expected) <= 0.05 * np.linalg.norm(expected)
    # the linear channel holds the link's position under a pure couple
    assert np.linalg.norm(ro.x_W[t, i] - ro.x_ref_W[i]) < 1e-3


def test_k_theta_equal_kappa_reproduces_passive_deflection(lac, free_syn):
    """R_j at steady state equals R^Delta of eq. (5), computed here independently."""
    frame, i = _frame(lac, "right_wrist_roll_link")
    couple = np.array([1.0, 0.5, -1.5])
    ro = free_syn.rollout(_sample(frame, i, [150, 150, 150, 30, KAPPA], couple=couple), stop_early=False)
    t = T_END_HOLD
    # independent eq. (4)-(5): joint torques J_r^T tau at the solved configuration (pinocchio frame
    # Jacobian of the body frame), deflection by Lambda_q = 40.2 / 14.3, FK at the reference.
    model = lac.model
    data = model.createData()
    q_prev = ro.q[t - 1]
    fid = model.getFrameId("right_wrist_roll_link")
    J = pin.computeFrameJacobian(model, data, q_prev, fid, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
    tau = J[3:].T @ couple
    lam = np.array([40.2] + [14.3] * 10)
    q_ref = lac.reference_configuration(Q_REF, 0.72)
    q_def = q_ref.copy()
    q_def[lac.upper_q] += tau[lac.upper_v] / lam
    pin.framesForwardKinematics(model, data, q_def)
    R_delta = data.oMf[fid].rotation.copy()
    pin.framesForwardKinematics(model, data, q_ref)
    R_ref = data.oMf[fid].rotation.copy()
    passive = np.linalg.norm(pin.log3(R_delta @ R_ref.T))
    err = np.linalg.norm(pin.log3(ro.R_W[t, i] @ R_delta.T))
    assert passive > 0.1
    assert err <= 0.05 * passive


def test_linear_offset_with_table_ii_weights(lac):
    """With the Table II anchors the differential IK lags the target by a constant step, which
    the D term of eq. (8) turns into a steady-state force offset: the displacement is F/K within
    20 % (measured ~10-15 %), and always short of F/K (the anchors resist)."""
    syn = Synthesizer(LacConfig(), lac)
    frame, i = _frame(lac, "left_wrist_roll_link")
    F = np.array([8.0, 3.0, -4.0])
    ro = syn.rollout(_sample(frame, i, [120, 150, 150, 30, 30], force=F), stop_early=False)
    d = ro.x_W[T_END_HOLD, i] - ro.x_ref_W[i]
    expected = F / 120.0
    rel = np.linalg.norm(d - expected) / np.linalg.norm(expected)
    assert rel < 0.20
    assert np.linalg.norm(d) < np.linalg.norm(expected)
