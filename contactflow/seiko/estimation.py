"""Contact-force estimation of a point effector without a force sensor (SEIKO seiko.md §6.7).

The paper's right hand (a 3-D printed ball, no FT sensor) gets its contact force from the arm's
joint torques: with the quasi-static equilibrium ``tau = g(q) - J^T f`` (pinocchio convention,
``f`` the force of the environment on the robot), the force solves, in the least-squares sense,

    J_lin[arm]^T f = g[arm](q) - tau_read[arm]

over the arm joints only (``TaskSEIKO.cpp`` l.319-326 uses the LOCAL Jacobian of
``right_hand_frame`` and a full-pivot QR; here the LOCAL_WORLD_ALIGNED Jacobian gives ``f``
directly in world axes).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pinocchio as pin

from contactflow.errors import ModelError

__all__ = ["JointTorqueForceEstimator"]


class JointTorqueForceEstimator:
    """Force on a frame from the measured torques of a few joints (seiko.md §6.7).

    Args:
        model: pinocchio free-flyer model (the robot's ``model``).
        frame: frame name of the contact point (``right_hand_frame``).
        joint_names: actuated joints whose torques are used (``arm_right_1..4_joint``).

    Raises:
        ModelError: unknown frame or joint.
    """

    def __init__(self, model: pin.Model, frame: str, joint_names: Sequence[str]):
        if not model.existFrame(frame):
            raise ModelError(f"JointTorqueForceEstimator: no frame {frame!r}")
        self.model = model
        self.data = model.createData()
        self.frame_id = model.getFrameId(frame)
        idx = []
        for j in joint_names:
            if not model.existJointName(j):
                raise ModelError(f"JointTorqueForceEstimator: no joint {j!r}")
            idx.append(model.joints[model.getJointId(j)].idx_v)
        self.v_idx = np.array(idx)
        self.tau_idx = self.v_idx - 6  # actuated joints follow the 6 base velocities

    def estimate(self, q: np.ndarray, tau_read: np.ndarray) -> np.ndarray:
        """World force [N] (3,) of the environment on the frame.

        Args:
            q: (nq,) measured configuration.
            tau_read: (n,) measured joint torques [N m] (actuated joints, model order).
        """
        model, data = self.model, self.data
        g = pin.computeGeneralizedGravity(model, data, q)
        pin.computeJointJacobians(model, data, q)
        pin.updateFramePlacements(model, data)
        J = pin.getFrameJacobian(model, data, self.frame_id, pin.LOCAL_WORLD_ALIGNED)[:3, self.v_idx]
        rhs = g[self.v_idx] - np.asarray(tau_read)[self.tau_idx]
        f, *_ = np.linalg.lstsq(J.T, rhs, rcond=1e-6)
        return f
