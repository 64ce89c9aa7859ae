import numpy as np
import pytest

from contactflow.safety import CommandHold


def test_bad_commands_are_rejected_and_the_last_safe_one_is_held():
    h = CommandHold(np.zeros(3), timeout_s=0.1, q_min=-np.ones(3), q_max=np.ones(3))
    assert h.offer(np.array([0.1, 0.2, 0.3]), 0.0)
    for bad in (None, np.array([np.nan, 0, 0]), np.zeros(4), np.array([2.0, 0, 0])):
        assert not h.offer(bad, 0.01)
    assert h.rejected == 4
    np.testing.assert_array_equal(h.command(0.02), [0.1, 0.2, 0.3])
    assert not h.holding


def test_stale_commands_hold_the_last_safe_command_until_new_ones_arrive():
    h = CommandHold(np.zeros(2), timeout_s=0.1)
    assert h.offer(np.array([0.5, 0.5]), 1.0)
    np.testing.assert_array_equal(h.command(1.05), [0.5, 0.5])
    assert not h.holding
    np.testing.assert_array_equal(h.command(1.5), [0.5, 0.5])
    assert h.holding
    h.offer(np.array([0.4, 0.4]), 1.6)
    assert not h.holding
    np.testing.assert_array_equal(h.command(1.61), [0.4, 0.4])


def test_resumed_is_logged_only_after_a_reported_hold(caplog):
    import logging

    hold = CommandHold(np.zeros(3), timeout_s=0.01)
    with caplog.at_level(logging.WARNING, logger="contactflow.safety"):
        hold.command(0.0)  # start-up: no command yet (stale, not reported)
        assert hold.offer(np.ones(3), 0.001)
        assert not [r for r in caplog.records if "resumed" in r.getMessage()]
        hold.command(0.1)  # stale after a command: reported
        assert hold.offer(np.ones(3), 0.102)
    msgs = [r.getMessage() for r in caplog.records]
    assert any("holding" in m for m in msgs) and msgs[-1] == "commands resumed"


def test_base_tilt_is_the_angle_of_the_base_z_axis_from_the_vertical():
    """The one fall-by-tilt rule (contactflow.safety.base_tilt_rad): against pinocchio rotations about
    horizontal and tilted axes, one quaternion and a batch, unnormalised, and NaN for a NaN quaternion."""
    import pinocchio as pin

    from contactflow.safety import FALL_TILT_RAD, base_tilt_rad

    rng = np.random.default_rng(3)
    quats, expected = [], []
    for _ in range(50):
        R = pin.exp3(rng.normal(size=3) * rng.uniform(0.0, 3.0))
        q = pin.Quaternion(R).coeffs()  # (x, y, z, w)
        quats.append(q * rng.uniform(0.5, 2.0))  # not normalised
        expected.append(np.arccos(np.clip(R[2, 2], -1.0, 1.0)))  # angle between R e_z and e_z
        assert base_tilt_rad(quats[-1]) == pytest.approx(expected[-1], abs=1e-9)
    np.testing.assert_allclose(base_tilt_rad(np.array(quats)), expected, atol=1e-9)
    # a pure yaw is no tilt; a rotation about a horizontal axis by a tilts by a
    assert base_tilt_rad(pin.Quaternion(pin.utils.rpyToMatrix(0.0, 0.0, 2.5)).coeffs()) == pytest.approx(0.0, abs=1e-7)
    for a in (0.3, FALL_TILT_RAD, 2.0):
        R = pin.AngleAxis(a, np.array([np.cos(0.7), np.sin(0.7), 0.0])).matrix()
        assert base_tilt_rad(pin.Quaternion(R).coeffs()) == pytest.approx(a, abs=1e-9)
    assert np.isnan(base_tilt_rad([np.nan, 0.0, 0.0, 1.0]))
    assert isinstance(base_tilt_rad([0.0, 0.0, 0.0, 1.0]), float)
    # one quaternion (the driver's per-state path, plain floats) and a batch give the same numbers, NaN included
    rng = np.random.default_rng(0)
    batch = rng.normal(size=(200, 4))
    batch[3] = 0.0
    batch[4, 1] = np.inf
    one_by_one = np.array([base_tilt_rad(q) for q in batch])
    np.testing.assert_allclose(one_by_one, base_tilt_rad(batch), atol=1e-12)
    assert np.isnan(one_by_one[3]) and np.isnan(one_by_one[4])
