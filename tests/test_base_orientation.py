"""contactflow.sim.state.base_rotation / yaw: the one quaternion -> rotation and heading helper."""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from contactflow.sim.state import base_rotation, yaw


def test_base_rotation_matches_pinocchio_and_normalises():
    rng = np.random.default_rng(0)
    for _ in range(20):
        q = np.zeros(30)
        q[3:7] = rng.standard_normal(4) * rng.uniform(0.5, 2.0)  # not unit: normalised by the helper
        x, y, z, w = q[3:7] / np.linalg.norm(q[3:7])
        R = base_rotation(q)
        np.testing.assert_allclose(R, pin.Quaternion(w, x, y, z).toRotationMatrix(), atol=1e-14)
        np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-14)


def test_yaw_is_the_heading_of_a_zyx_rotation():
    for psi in (-3.0, -1.2, 0.0, 0.4, 1.5707963, 3.1):
        R = pin.rpy.rpyToMatrix(0.2, -0.3, psi)
        assert abs(yaw(R) - psi) < 1e-12
        q = np.zeros(7)
        q[3:7] = pin.Quaternion(R).coeffs()  # x, y, z, w
        assert abs(yaw(base_rotation(q)) - psi) < 1e-12
