"""Feasibility gates and decays of LAC Algorithm 1."""

import numpy as np
import pytest

from contactflow.lac.config import LacConfig, ProfileCfg
from contactflow.lac.contact_frames import ContactFrame, REFERENCE_POSTURES, sample_synthetic_frame
from contactflow.lac.events import EpisodeSample, Profile
from contactflow.lac.ik import LinkTarget
from contactflow.lac.model import LacRobot
from contactflow.lac.synthesis import SynthesisStats, Synthesizer

SHORT = ProfileCfg(frames=150, rest_s=(0.2, 0.3), ramp_s=(0.5, 0.8), hold_s=(0.8, 1.0), release_s=(0.5, 0.8))
PROFILE = Profile(0.2, 0.6, 1.0, 0.6, 150, 0.02)


@pytest.fixture(scope="module")
def lac():
    return LacRobot()


@pytest.fixture(scope="module")
def syn(lac):
    return Synthesizer(LacConfig(profile=SHORT), lac)


def _sample(lac, link, force, k):
    i = lac.link_index(link)
    m = np.zeros(11, bool)
    m[i] = True
    p = np.zeros((11, 3))
    n = np.zeros((11, 3))
    p[i] = [0.1, 0.0, 0.0]
    n[i] = force / np.linalg.norm(force)
    frame = ContactFrame(np.array(REFERENCE_POSTURES["default"]), m, p, n, "test")
    F = np.zeros((11, 3))
    F[i] = force
    return EpisodeSample(frame, 0.72, PROFILE, np.asarray(k, float), "force", (i,), F, np.zeros((11, 3)),
                         np.zeros(11), np.zeros(11))


def test_too_strong_wrench_is_decayed_by_the_right_factors(lac, syn):
    s = _sample(lac, "left_wrist_roll_link", np.array([100.0, 0.0, 0.0]), [400, 400, 400, 80, 80])
    trace = []
    st = SynthesisStats()
    ep = syn.decay_loop(s, 0, st, trace)
    gates = [g.failed for _, g in trace]
    # 100 N > 70 N cap: rho_3 = 0.8 twice (100 -> 80 -> 64 N), then the T-frame loop runs
    assert gates[:2] == ["sum_cap", "sum_cap"]
    scales = [sc for sc, _ in trace]
    factors = {"sum_cap": 0.8, "self_collision": 0.5, "balance": 0.8}
    for (sc, g), nxt in zip(trace[:-1], scales[1:]):
        assert nxt == pytest.approx(sc * factors[g.failed])
    last_scale, last = trace[-1]
    # decay_loop has no randomness (fixed sample, deterministic rollout and gates), so the outcome is
    # fixed: after the two sum-cap decays the balance gate decays 64 N until a scale passes above the
    # 15 N weak floor -> one decayed episode (measured trace: 100, 80 sum_cap; 64, 51.2 balance; 41 N pass).
    assert ep is not None, f"expected a decayed episode, trace ended {last}"
    assert set(gates[2:-1]) == {"balance"} and last.passed and not last.weak
    assert ep.scale == pytest.approx(last_scale) and ep.decays == len(trace) - 1 >= 3
    assert last.balance_force_n <= 5.0 and last.balance_torque_nm <= 1.5
    assert 15.0 <= s.peak_sum(ep.scale) <= 70.0 and ep.peak_sum == pytest.approx(s.peak_sum(ep.scale))
    assert (st.accepted, st.decayed, st.restarts_weak, st.restarts_exhausted) == (0, 1, 0, 0)
    assert st.decays_by_gate["sum_cap"] == 2 and st.decays_by_gate["balance"] == len(trace) - 3
    print(f"\ntrace: {[(round(s.peak_sum(sc), 1), g.failed or ('pass' if g.passed else 'weak')) for sc, g in trace]}")


def test_self_collision_halves_until_abandoned_below_weak_floor(lac, syn):
    # left hand pushed into the torso with a soft arm: collides at 30 N -> rho_2 = 0.5 -> 15 N, which
    # fails again (whichever gate trips first in time sets the factor) -> below the 15 N floor.
    s = _sample(lac, "left_wrist_roll_link", np.array([0.0, -30.0, 0.0]), [10, 400, 400, 80, 80])
    trace = []
    st = SynthesisStats()
    ep = syn.decay_loop(s, 0, st, trace)
    assert ep is None
    assert trace[0][1].failed == "self_collision" and trace[1][0] == pytest.approx(0.5)
    factors = {"sum_cap": 0.8, "self_collision": 0.5, "balance": 0.8}
    for (sc, g), (nxt, _) in zip(trace[:-1], trace[1:]):
        assert nxt == pytest.approx(sc * factors[g.failed])
    assert trace[-1][1].weak and s.peak_sum(trace[-1][0]) < 15.0
    assert st.restarts_weak == 1 and st.decays_by_gate["self_collision"] >= 1
    print(f"\ntrace: {[(round(s.peak_sum(sc), 1), g.failed or 'weak') for sc, g in trace]}")


def test_counts_over_synthetic_frames(lac, syn):
    st = SynthesisStats()
    n = 3
    eps = []
    for k in range(n):
        rng = np.random.default_rng(100 + k)
        eps.append(syn.synthesize(sample_synthetic_frame(lac, rng), rng, st))
    # The frames and samples are random, so the outcome depends on the seeds: with seeds 100..102 (pinned
    # above; the run is deterministic) every frame yields an episode, one at full scale and two decayed.
    assert (st.frames, st.accepted, st.decayed, st.failed) == (n, 1, 2, 0)
    assert all(ep is not None for ep in eps)
    assert sorted(ep.decays == 0 for ep in eps) == [False, False, True]
    g = syn.cfg.gates
    for ep in eps:
        if ep.decays == 0:
            assert ep.scale == pytest.approx(1.0)
        else:
            assert 0.0 < ep.scale < 1.0
        cap = g.sum_cap_force_n if ep.sample.event_type == "force" else g.sum_cap_couple_nm
        assert ep.peak_sum <= cap
    assert st.rollouts >= n and sum(st.decays_by_gate.values()) >= 2
    print(f"\ncounts: {st.as_dict()}")


def test_ik_qp_constraints_hold(lac, syn):
    """QP status and residuals; base roll/pitch stay zero; height, joint bounds and rate caps hold."""
    ik = syn.ik
    q = lac.reference_configuration(np.array(REFERENCE_POSTURES["push"]), 0.60)
    lac.update(q)
    x, R = lac.link_pose(5)
    # at the reference with no target the step is exactly zero
    r0 = ik.step(q, [], np.array(REFERENCE_POSTURES["push"]), q[:3].copy(), np.eye(3))
    assert r0.qp.found and np.max(np.abs(r0.dq)) < 1e-12
    target = LinkTarget(5, x + np.array([0.5, 0.3, -0.4]), R, 1.0)  # far away: caps and bounds active
    for _ in range(60):
        r = ik.step(q, [target], np.array(REFERENCE_POSTURES["push"]), np.array([0, 0, 0.60]), np.eye(3))
        assert r.qp.found and r.qp.status == "optimal"
        assert r.qp.eq_residual < 1e-9 and r.qp.ineq_violation < 1e-9
        dz = r.q[2] - q[2]
        assert abs(np.linalg.norm(r.q[:2] - q[:2], ord=np.inf)) <= 0.6 * 0.02 + 1e-9 and abs(dz) <= 0.5 * 0.02 + 1e-9
        q = r.q
        assert 0.56 - 1e-9 <= q[2] <= 0.78 + 1e-9
        assert abs(q[3]) < 1e-12 and abs(q[4]) < 1e-12  # quaternion x, y: roll = pitch = 0
        np.testing.assert_allclose(q[7:][lac.leg_v - 6], lac.q_stance, atol=1e-12)
        assert np.all(q[7:] >= ik.q_lo - 1e-9) and np.all(q[7:] <= ik.q_hi + 1e-9)
