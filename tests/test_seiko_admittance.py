"""contactflow.seiko.admittance.clamp_norm: the norm clamp shared by the admittance (14) and the
Retargeting's pose-task rates (seiko.md §4.2, §6.8)."""

from __future__ import annotations

import numpy as np

from contactflow.seiko.admittance import clamp_norm


def test_clamp_norm_known_values():
    v = np.array([3.0, 0.0, 4.0])  # |v| = 5
    np.testing.assert_allclose(clamp_norm(v, 2.5), [1.5, 0.0, 2.0])
    inside = clamp_norm(v, 6.0)  # inside the bound: v's values, in a new array
    np.testing.assert_array_equal(inside, v)
    assert inside is not v
    # as the Retargeting uses it: -clampNorm(e, c) / dt, in a caller's buffer
    out = np.full(3, np.nan)
    assert clamp_norm(v, 2.5, -0.002, out=out) is out
    np.testing.assert_allclose(out, [-750.0, 0.0, -1000.0])
    np.testing.assert_allclose(clamp_norm(v, 6.0, -0.002), v / -0.002)
    np.testing.assert_array_equal(clamp_norm(v, 2.5, 1.0, out=np.empty(3)), clamp_norm(v, 2.5))
    assert np.linalg.norm(clamp_norm(np.array([1e3, -2e3, 5.0]), 0.04)) <= 0.04 * (1 + 1e-15)
