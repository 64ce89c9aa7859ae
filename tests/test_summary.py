import numpy as np

from contactflow.recording.summary import _hold_mask


def test_hold_windows_start_after_settling_and_end_at_the_next_command():
    t = np.arange(0, 10, 0.5)
    tw = np.zeros((len(t), 6))
    tw[(t >= 1) & (t < 3), 0] = 0.05  # move, hold [3, 6), move again, hold to the end
    tw[(t >= 6) & (t < 7), 0] = -0.05
    mask = _hold_mask(tw, t, settle_s=1.0)
    np.testing.assert_array_equal(t[mask], [4.0, 4.5, 5.0, 5.5, 8.0, 8.5, 9.0, 9.5])
    assert not _hold_mask(np.zeros((len(t), 6)), t, 1.0).any()  # never commanded: no hold
