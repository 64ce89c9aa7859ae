"""Operator input filter, SEIKO eq. (8) + low-pass + bang-bang (contactflow.operator.input_filter)."""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
import pytest

from contactflow.errors import ContractError
from contactflow.operator.input_filter import (
    BangBang1D,
    BangBangFilter,
    EffectorInputFilter,
    InputFilter,
    InputFilterConfig,
    bang_bang_step,
    bang_bang_time,
    bound_distance,
    clamp_orientation_update_into_sphere,
    clamp_position_update_into_sphere,
)
from contactflow.seiko.filters import alpha_from_cutoff

CFG = InputFilterConfig()
DT = CFG.dt_s


def _pose(seed=0):
    rng = np.random.default_rng(seed)
    return pin.SE3(pin.exp3(rng.normal(size=3)), rng.normal(size=3))


# ---- bang-bang -----------------------------------------------------------------------------
@pytest.mark.parametrize("target", [0.1, 0.01, -0.05, 0.3])
def test_bang_bang_step_response_is_time_optimal_bounded_no_overshoot(target):
    vmax, amax = CFG.max_vel_lin_mps, CFG.max_acc_lin_mps2
    D = abs(target)
    T_opt = D / vmax + vmax / amax if D >= vmax**2 / amax else 2.0 * math.sqrt(D / amax)
    assert bang_bang_time(0.0, 0.0, target, vmax, amax) == pytest.approx(T_opt, rel=1e-12)
    f = BangBang1D(vmax, amax)
    f.reset(0.0)
    xs, vs = [0.0], [0.0]
    for _ in range(int(T_opt / DT) + 50):
        f.step(target, DT)
        xs.append(f.x)
        vs.append(f.v)
    xs, vs = np.array(xs), np.array(vs)
    k_done = int(np.argmax((xs == target) & (vs == 0.0)))
    assert xs[k_done] == target and vs[k_done] == 0.0  # reached exactly
    assert k_done == math.ceil(T_opt / DT - 1e-9)  # in the time-optimal time (first sample after T)
    assert np.all(xs[k_done:] == target)  # and held
    assert np.max(np.abs(vs)) <= vmax * (1 + 1e-12)
    assert np.max(np.abs(np.diff(vs))) / DT <= amax * (1 + 1e-9)
    s = np.sign(target)
    assert np.all(s * xs <= D) and np.all(np.diff(s * xs) >= 0.0)  # no overshoot, monotone


def test_bang_bang_initial_velocity_away_from_target():
    # brake 0.05 s (moving -2.5 mm), then 0.1025 m trapezoid: 0.1025/0.2 + 0.2/2
    assert bang_bang_time(0.0, -0.1, 0.1, 0.2, 2.0) == pytest.approx(0.05 + 0.6125, rel=1e-12)
    # above the velocity bound: slow down to vmax first
    assert bang_bang_time(0.0, 0.4, 1.0, 0.2, 2.0) == pytest.approx(
        0.1 + (1.0 - (0.16 - 0.04) / 4 - 0.01) / 0.2 + 0.1, rel=1e-12
    )


def test_bang_bang_replanning_reproduces_the_plan():
    """Replanning each step from a state on the trajectory gives the same trajectory (no chatter)."""
    x0, v0 = 0.0, 0.07  # start moving, not at rest
    x1, v1, x2, v2 = x0, v0, x0, v0
    for _ in range(400):
        x1, v1 = bang_bang_step(x1, v1, 0.08, 0.2, 2.0, 0.002)
        for _ in range(2):
            x2, v2 = bang_bang_step(x2, v2, 0.08, 0.2, 2.0, 0.001)
        assert x1 == pytest.approx(x2, abs=1e-12) and v1 == pytest.approx(v2, abs=1e-10)


def test_bang_bang_filter_vector_matches_scalar():
    f = BangBangFilter(3, 1.0, 3.0)
    f.reset(np.zeros(3))
    target = np.array([0.3, -0.1, 0.0])
    out = f.step(target, DT)
    for i in range(3):
        assert out[i] == bang_bang_step(0.0, 0.0, target[i], 1.0, 3.0, DT)[0]
    assert out[2] == 0.0 and f.v[2] == 0.0


# ---- low-pass -------------------------------------------------------------------------------
def test_low_pass_alpha_and_dc_gain():
    a = alpha_from_cutoff(2.0, 0.002)
    w = 2 * math.pi * 2.0
    assert a == pytest.approx((1 - w * 0.001) / (1 + w * 0.001))
    y, u = 0.0, 1.7
    for _ in range(5000):
        y = a * y + (1 - a) * u
    assert y == pytest.approx(u, rel=1e-12)


def test_pipeline_dc_gain_one_position_and_rotation():
    """A held reference (constant input after a motion) is reproduced exactly at the output."""
    X0 = _pose(1)
    f = EffectorInputFilter(CFG)
    f.reset(X0)
    twist = np.array([0.05, -0.02, 0.01, 0.3, -0.2, 0.1])
    for _ in range(100):  # 0.2 s: 1.1 cm and 0.075 rad, inside the clamp balls around X0
        f.step(twist, X0)
    X_ref = pin.SE3(f.x_ref)
    np.testing.assert_allclose(X_ref.translation - X0.translation, 0.2 * twist[:3], atol=1e-12)
    for _ in range(2000):
        out = f.step(np.zeros(6), X0)
    assert f.x_ref == X_ref
    np.testing.assert_allclose(out.translation, X_ref.translation, atol=1e-12)
    np.testing.assert_allclose(pin.log3(out.rotation @ X_ref.rotation.T), 0.0, atol=1e-12)
    np.testing.assert_allclose(f.twist, 0.0, atol=1e-9)


# ---- boundDistance --------------------------------------------------------------------------
def test_clamp_position_cases():
    c, r = np.zeros(3), 1.0
    p = np.array([0.5, 0, 0])
    np.testing.assert_array_equal(clamp_position_update_into_sphere(p, [0.2, 0, 0], c, r), [0.7, 0, 0])
    # inside, leaving: shortened to the exit point
    np.testing.assert_allclose(clamp_position_update_into_sphere(p, [1.0, 0, 0], c, r), [1.0, 0, 0])
    q = clamp_position_update_into_sphere(p, [0, 2.0, 0], c, r)
    assert np.linalg.norm(q) == pytest.approx(1.0) and q[0] == 0.5
    # outside, moving away: stepped back toward the ball by |delta|, never past the sphere
    po = np.array([2.0, 0, 0])
    np.testing.assert_allclose(clamp_position_update_into_sphere(po, [0.1, 0, 0], c, r), [1.9, 0, 0])
    np.testing.assert_allclose(clamp_position_update_into_sphere(po, [0, 0.1, 0], c, r), [1.9, 0, 0])
    np.testing.assert_allclose(clamp_position_update_into_sphere(po, [5.0, 0, 0], c, r), [1.0, 0, 0])
    # outside, moving toward but the ray misses the ball: no update
    pm = np.array([2.0, 2.0, 0])
    np.testing.assert_array_equal(clamp_position_update_into_sphere(pm, [-0.1, 0, 0], c, r), pm)
    # outside, approaching: accepted; crossing the whole ball: far intersection
    np.testing.assert_allclose(clamp_position_update_into_sphere(po, [-0.5, 0, 0], c, r), [1.5, 0, 0])
    np.testing.assert_allclose(clamp_position_update_into_sphere(po, [-4.0, 0, 0], c, r), [-1.0, 0, 0])
    # zero update: bit-exact
    assert clamp_position_update_into_sphere(po, np.zeros(3), c, r) is not po
    np.testing.assert_array_equal(clamp_position_update_into_sphere(po, np.zeros(3), c, r), po)


def test_clamp_orientation_exit_point_on_sphere():
    Rc = pin.exp3(np.array([0.3, -0.2, 0.5]))
    R = pin.exp3(np.array([0.1, 0, 0])) @ Rc
    Rn = clamp_orientation_update_into_sphere(R, np.array([0.5, 0, 0]), Rc, 0.2)
    np.testing.assert_allclose(pin.log3(Rn @ Rc.T), [0.2, 0, 0], atol=1e-12)


def test_bound_distance_keeps_reference_in_the_balls():
    rng = np.random.default_rng(3)
    Xc = _pose(2)
    X = pin.SE3(Xc)
    for _ in range(2000):
        X = bound_distance(X, rng.normal(scale=0.02, size=6), Xc, 0.03, 0.2)
        assert np.linalg.norm(X.translation - Xc.translation) <= 0.03 * (1 + 1e-12)
        assert np.linalg.norm(pin.log3(X.rotation @ Xc.rotation.T)) <= 0.2 * (1 + 1e-9)
    # through the full filter with a fixed centre and a large constant command
    f = EffectorInputFilter(CFG)
    f.reset(Xc)
    for _ in range(1000):
        out = f.step(np.array([0.5, 0.3, -0.2, 2.0, -1.0, 0.5]), Xc)
        assert np.linalg.norm(f.x_ref.translation - Xc.translation) <= 0.03 * (1 + 1e-12)
        assert np.linalg.norm(pin.log3(f.x_ref.rotation @ Xc.rotation.T)) <= 0.2 * (1 + 1e-9)
    assert np.linalg.norm(out.translation - Xc.translation) == pytest.approx(0.03, abs=1e-9)


# ---- full pipeline --------------------------------------------------------------------------
def test_constant_command_steady_state_velocity():
    """5 cm/s with the centre following the output: the output moves at 5 cm/s."""
    X0 = _pose(4)
    f = EffectorInputFilter(CFG)
    f.reset(X0)
    center = X0
    twist = np.array([0.05, 0.0, 0.0, 0.0, 0.0, 0.1])
    ps = []
    for _ in range(2000):  # 4 s
        center = f.step(twist, center)
        ps.append(center.translation.copy())
    v = np.diff(np.array(ps)[-500:], axis=0) / DT
    np.testing.assert_allclose(v, np.tile([0.05, 0.0, 0.0], (499, 1)), atol=1e-9)
    np.testing.assert_allclose(f.twist, twist, atol=1e-9)
    # lag well inside the clamp ball (low-pass tau * v + bang-bang)
    assert np.linalg.norm(f.x_ref.translation - center.translation) < 0.01


def test_output_respects_velocity_and_acceleration_bounds():
    X0 = _pose(5)
    f = EffectorInputFilter(CFG)
    f.reset(X0)
    center = X0
    prev = np.zeros(6)
    for k in range(1500):
        twist = np.array([1.0, -1.0, 0.5, 3.0, 0.0, -3.0]) if (k // 300) % 2 == 0 else -np.ones(6)
        center = f.step(twist, center)
        tw = f.twist
        assert np.all(np.abs(tw[:3]) <= CFG.max_vel_lin_mps * (1 + 1e-9))
        assert np.all(np.abs(tw[3:]) <= CFG.max_vel_ang_radps * (1 + 1e-6))
        assert np.all(np.abs(tw[:3] - prev[:3]) / DT <= CFG.max_acc_lin_mps2 * (1 + 1e-6))
        prev = tw


def test_zero_command_from_rest_is_exactly_unchanged():
    X0 = _pose(6)
    off_center = pin.SE3(pin.exp3(np.array([0.05, 0, 0])) @ X0.rotation, X0.translation + [0.01, 0, 0])
    for center in (X0, off_center):
        f = EffectorInputFilter(CFG)
        f.reset(X0)
        for _ in range(500):
            out = f.step(np.zeros(6), center)
            assert np.array_equal(out.homogeneous, X0.homogeneous)
        assert not np.any(f.twist)


def test_rest_shortcut_gives_the_same_output_as_the_full_step():
    """The at-rest shortcut (no command, every stage settled) is bit-exact with the full step."""
    X0 = _pose(7)
    fast, full = EffectorInputFilter(CFG), EffectorInputFilter(CFG)
    fast.reset(X0)
    full.reset(X0)
    rng = np.random.default_rng(3)
    cmd = np.zeros(6)
    shortcuts = 0
    for k in range(3000):
        if k % 600 == 300:  # at rest for 0.6 s, move for 0.4 s, then nothing until the next segment
            cmd = np.concatenate([rng.normal(scale=0.05, size=3), rng.normal(scale=0.2, size=3)])
        elif k % 600 == 500:
            cmd = np.zeros(6)
        shortcuts += fast._at_rest and not cmd.any()
        full._at_rest = False  # always the full step
        a, b = fast.step(cmd, X0), full.step(cmd, X0)
        assert np.array_equal(a.homogeneous, b.homogeneous), k
        assert np.array_equal(fast.twist, full.twist), k
    # taken from the reset on (enabled contacts are reset every cycle); after a motion the
    # low-pass approaches its input without reaching it bit-exactly, so the full step runs
    assert shortcuts >= 300


def test_effector_filter_errors_and_nonfinite_hold():
    f = EffectorInputFilter(CFG)
    with pytest.raises(ContractError, match="before reset"):
        f.step(np.zeros(6), pin.SE3.Identity())
    X0 = _pose(7)
    f.reset(X0)
    with pytest.raises(ContractError, match=r"\(6,\)"):
        f.step(np.zeros(3), X0)
    out = f.step(np.array([np.nan, 0, 0, 0, 0, 0]), X0)
    assert np.array_equal(out.homogeneous, X0.homogeneous)
    assert f.diagnostics["n_rejected"] == 1


def test_input_filter_several_effectors():
    names = ("left_hand", "right_hand")
    poses = {"left_hand": _pose(8), "right_hand": _pose(9)}
    filt = InputFilter(CFG, names)
    with pytest.raises(ContractError, match="right_hand"):
        filt.reset({"left_hand": poses["left_hand"]})
    filt.reset(poses)
    centers = dict(poses)
    for _ in range(300):
        centers = filt.step({"left_hand": np.array([0.05, 0, 0, 0, 0, 0])}, centers)
    assert set(centers) == set(names)
    assert centers["left_hand"].translation[0] > poses["left_hand"].translation[0] + 0.01
    assert np.array_equal(centers["right_hand"].homogeneous, poses["right_hand"].homogeneous)
    with pytest.raises(ContractError, match="missing centre"):
        filt.step({}, {"left_hand": poses["left_hand"]})
    with pytest.raises(ContractError, match="unknown"):
        filt.step({"left_foot": np.zeros(6)}, centers)
    filt.reset_effector("left_hand", poses["left_hand"])
    assert filt.filters["left_hand"].x_out == poses["left_hand"]
