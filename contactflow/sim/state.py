"""The one pinocchio <-> MuJoCo state converter, joints mapped BY NAME.

pinocchio (``robot.model``, FreeFlyer root):

* ``q`` (7 + n,): base position in world [m], base quaternion (x, y, z, w), joint angles [rad]
  in ``robot.joint_names`` order;
* ``v`` (6 + n,): base linear and angular velocity in the BASE frame [m/s, rad/s], joint
  velocities [rad/s].

MuJoCo (free joint): ``qpos`` holds the base position [m] and quaternion (w, x, y, z); ``qvel``
the base linear velocity in WORLD axes and the angular velocity in the BASE frame. Joint
addresses are looked up by name, so the MuJoCo tree order may differ from the robot file's, and
``qpos`` may hold more than the robot (payload bodies have no joints; other free bodies are left
untouched).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import mujoco
import numpy as np

from contactflow.errors import ContractError, ModelError

__all__ = ["StateMap", "pin_to_mj_qpos", "mj_to_pin_q"]


def pin_to_mj_qpos(q: np.ndarray) -> np.ndarray:
    """A pinocchio configuration as MuJoCo ``qpos`` when the MuJoCo joint order is the robot's.

    Args:
        q: (7 + n,) [p (3) m, quaternion (x, y, z, w), joints rad].

    Returns:
        (7 + n,) [p (3) m, quaternion (w, x, y, z), joints rad] (a copy).
    """
    q = np.asarray(q, dtype=float)
    out = q.copy()
    out[3] = q[6]
    out[4:7] = q[3:6]
    return out


def mj_to_pin_q(qpos: np.ndarray) -> np.ndarray:
    """Inverse of :func:`pin_to_mj_qpos` (same joint order assumed)."""
    qpos = np.asarray(qpos, dtype=float)
    out = qpos.copy()
    out[3:6] = qpos[4:7]
    out[6] = qpos[3]
    return out


class StateMap:
    """Addresses of a robot's free joint and actuated joints in a compiled MuJoCo model.

    Args:
        model: compiled ``mujoco.MjModel``.
        joint_names: (n,) actuated joint names in pinocchio order (``robot.joint_names``).
        root_joint: name of the MuJoCo free joint of the base.

    Raises:
        ModelError: the root joint is missing or not free, or joints are missing (all listed,
            with the names the model has).

    Attributes:
        root_q, root_v: qpos / qvel address of the free joint.
        jq, jv: (n,) qpos / qvel address of each joint, pinocchio order.
        identity: True when the joints follow the free joint contiguously in pinocchio order
            (then ``qpos[root_q + 7:]`` is ``q[7:]``).
    """

    def __init__(self, model: mujoco.MjModel, joint_names: Sequence[str], root_joint: str):
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, root_joint)
        if jid < 0 or model.jnt_type[jid] != mujoco.mjtJoint.mjJNT_FREE:
            raise ModelError(f"MuJoCo model has no free joint {root_joint!r}")
        self.model = model
        self.joint_names = tuple(joint_names)
        self.n = len(self.joint_names)
        self.root_q = int(model.jnt_qposadr[jid])
        self.root_v = int(model.jnt_dofadr[jid])
        ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in self.joint_names]
        missing = [j for j, i in zip(self.joint_names, ids) if i < 0]
        if missing:
            have = [model.joint(i).name for i in range(model.njnt) if model.jnt_type[i] != mujoco.mjtJoint.mjJNT_FREE]
            raise ModelError(f"MuJoCo model lacks joint(s) {missing}; it has {have}")
        self.jq = np.array([model.jnt_qposadr[i] for i in ids], dtype=int)
        self.jv = np.array([model.jnt_dofadr[i] for i in ids], dtype=int)
        self.identity = bool(
            np.array_equal(self.jq, self.root_q + 7 + np.arange(self.n))
            and np.array_equal(self.jv, self.root_v + 6 + np.arange(self.n))
        )

    # ------------------------------------------------------------------ configuration
    def qpos_from_q(self, q: np.ndarray, qpos: np.ndarray) -> None:
        """Write pinocchio ``q`` (7 + n,) into ``qpos`` (model.nq,) in place."""
        rq = self.root_q
        qpos[rq : rq + 3] = q[:3]
        qpos[rq + 3] = q[6]
        qpos[rq + 4 : rq + 7] = q[3:6]
        qpos[self.jq] = q[7:]

    def q_from_qpos(self, qpos: np.ndarray) -> np.ndarray:
        """pinocchio ``q`` (7 + n,) from MuJoCo ``qpos``."""
        rq = self.root_q
        q = np.empty(7 + self.n)
        q[:3] = qpos[rq : rq + 3]
        q[3:6] = qpos[rq + 4 : rq + 7]
        q[6] = qpos[rq + 3]
        q[7:] = qpos[self.jq]
        return q

    def base_rotation(self, qpos: np.ndarray) -> np.ndarray:
        """(3, 3) base rotation R_WB from ``qpos``."""
        R = np.empty(9)
        mujoco.mju_quat2Mat(R, qpos[self.root_q + 3 : self.root_q + 7])
        return R.reshape(3, 3)

    # ------------------------------------------------------------------ velocity
    def qvel_from_v(self, v: np.ndarray, qvel: np.ndarray, R_WB: np.ndarray) -> None:
        """Write pinocchio ``v`` (6 + n,) into ``qvel`` in place (base linear velocity rotated
        to world axes with ``R_WB`` (3, 3))."""
        rv = self.root_v
        qvel[rv : rv + 3] = R_WB @ v[:3]
        qvel[rv + 3 : rv + 6] = v[3:6]
        qvel[self.jv] = v[6:]

    def v_from_qvel(self, qvel: np.ndarray, R_WB: np.ndarray) -> np.ndarray:
        """pinocchio ``v`` (6 + n,) from MuJoCo ``qvel`` and the base rotation ``R_WB`` (3, 3)."""
        rv = self.root_v
        v = np.empty(6 + self.n)
        v[:3] = R_WB.T @ qvel[rv : rv + 3]
        v[3:6] = qvel[rv + 3 : rv + 6]
        v[6:] = qvel[self.jv]
        return v

    # ------------------------------------------------------------------ MjData
    def get(self, data: mujoco.MjData) -> tuple[np.ndarray, np.ndarray]:
        """(q (7 + n,), v (6 + n,)) of ``data`` in pinocchio conventions."""
        R = self.base_rotation(data.qpos)
        return self.q_from_qpos(data.qpos), self.v_from_qvel(data.qvel, R)

    def set(self, data: mujoco.MjData, q: np.ndarray, v: np.ndarray | None = None) -> None:
        """Write pinocchio ``q`` (and ``v``, zero if None) into ``data`` (other DoFs untouched;
        the base velocity and joint velocities are set only when ``v`` is given).

        Raises:
            ContractError: wrong shapes.
        """
        q = np.asarray(q, dtype=float)
        if q.shape != (7 + self.n,):
            raise ContractError(f"q: expected shape ({7 + self.n},), got {q.shape}")
        self.qpos_from_q(q, data.qpos)
        if v is not None:
            v = np.asarray(v, dtype=float)
            if v.shape != (6 + self.n,):
                raise ContractError(f"v: expected shape ({6 + self.n},), got {v.shape}")
            self.qvel_from_v(v, data.qvel, self.base_rotation(data.qpos))


# ---------------------------------------------------------------------- base orientation helpers
__all__ += ["base_rotation", "yaw"]


def base_rotation(q: np.ndarray) -> np.ndarray:
    """Base orientation ``R_WB`` (3, 3) of a pinocchio configuration.

    Args:
        q: (7 + n,) pinocchio configuration (quaternion x, y, z, w at ``q[3:7]``; normalised here).

    Returns:
        (3, 3) rotation from the base frame to world.

    Raises:
        ValueError: the quaternion is zero or not finite (no orientation).
    """
    x, y, z, w = (float(c) for c in q[3:7])
    n = (x * x + y * y + z * z + w * w) ** 0.5
    if not (math.isfinite(n) and n > 0.0):
        raise ValueError(f"base quaternion q[3:7] = {[x, y, z, w]} is not an orientation (zero or not finite)")
    x, y, z, w = x / n, y / n, z / n, w / n
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def yaw(R: np.ndarray) -> float:
    """Heading angle [rad] of a rotation (3, 3): ``atan2(R[1, 0], R[0, 0])`` (the Z of a Z-Y-X
    Euler decomposition: the angle of the body x axis projected on the ground plane)."""
    return float(np.arctan2(R[1, 0], R[0, 0]))
