import numpy as np

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
