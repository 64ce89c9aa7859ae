"""Observation terms of learned G1 policies: a registry of small functions.

A term turns the current inputs (``sensors`` and ``teleop_command`` fields, the runner's state)
into a raw vector; the policy spec says which terms, in which order, with which scale, clip and
joint order (by name). Nothing here is specific to one policy: LAC (lac.md §1.1) and holosoma
(g1_policies.md) are two orderings of these terms.

Conventions: ``sensors["q"]`` is pinocchio's ``q`` (7 + n: base position, quaternion xyzw,
joints in robot order), ``sensors["v"]`` is ``v`` (6 + n, base twist in the base frame, joint
velocities); ``imu_quat`` (x, y, z, w) is the pelvis orientation in the world, ``imu_gyro`` the
pelvis angular velocity in the pelvis (IMU) frame [rad/s].

Joint-indexed terms (``joint_pos_rel``, ``joint_pos``, ``joint_vel``, ``last_action``,
``ref_upper_dof_pos``) take an index array that reorders their source (robot order, policy order
or the robot file's ``teleop.arm_joints`` order) into the term's joint order; the spec builds it
by name.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Mapping

import numpy as np

__all__ = ["ObsTerm", "OBS_TERMS", "TermInputs", "projected_gravity"]


@dataclasses.dataclass
class TermInputs:
    """What a term may read at one policy tick.

    Attributes:
        sensors: fields of the ``sensors`` contract (``q``, ``v``, ``imu_quat``, ``imu_gyro``...).
        command: fields of the ``teleop_command`` contract (``lin_vel``, ``ang_vel``, ``base_height``,
            ``waist_yaw``, ``q_ref_arms``, ``stiffness``).
        last_action: (n,) previous accepted policy output after ``action.clip`` (holosoma's
            convention), policy (action) order (zeros at reset).
        phase: (2,) gait phase of the left and right leg [rad] (the spec's phase clock).
        default_robot: (n,) the policy's default joint angles in robot order [rad].
    """

    sensors: Mapping[str, np.ndarray]
    command: Mapping[str, np.ndarray]
    last_action: np.ndarray
    phase: np.ndarray
    default_robot: np.ndarray


@dataclasses.dataclass(frozen=True)
class ObsTerm:
    """One observation term.

    Attributes:
        name: registry key used in policy specs.
        fn: ``fn(inputs, index) -> (dim,) raw vector`` (``index`` is ``None`` for terms without joints).
        dim: fixed dimension, or ``None`` for joint-indexed terms (dimension = number of joints of
            the term's order).
        joint_source: where a joint-indexed term reads from: ``"robot"`` (robot joint order),
            ``"policy"`` (the action order) or ``"arms"`` (``teleop.arm_joints``); ``None`` otherwise.
        command_fields: ``teleop_command`` fields the term reads.
        unit: unit of the raw value.
        description: one line.
    """

    name: str
    fn: Callable[[TermInputs, np.ndarray | None], np.ndarray]
    dim: int | None
    joint_source: str | None
    command_fields: tuple[str, ...]
    unit: str
    description: str


def projected_gravity(quat_xyzw: np.ndarray) -> np.ndarray:
    """Gravity direction [0, 0, -1] expressed in the body frame: ``R_WB^T [0, 0, -1]``.

    Args:
        quat_xyzw: (4,) body orientation in the world (x, y, z, w), need not be normalised.

    Returns:
        (3,) unit vector in the body frame (``[0, 0, -1]`` when upright).
    """
    x, y, z, w = np.asarray(quat_xyzw, dtype=float) / np.linalg.norm(quat_xyzw)
    # third row of R_WB (= R^T e_z), negated
    return -np.array([2.0 * (x * z - w * y), 2.0 * (y * z + w * x), 1.0 - 2.0 * (x * x + y * y)])


def _joints(src: Callable[[TermInputs], np.ndarray]):
    return lambda inp, idx: src(inp)[idx]


_TERMS = [
    ObsTerm("base_ang_vel", lambda i, _: np.asarray(i.sensors["imu_gyro"], float), 3, None, (), "rad/s",
            "pelvis angular velocity, IMU (base) frame (raw gyro)"),
    ObsTerm("projected_gravity", lambda i, _: projected_gravity(i.sensors["imu_quat"]), 3, None, (), "-",
            "gravity direction in the pelvis frame, from imu_quat"),
    ObsTerm("command_lin_vel", lambda i, _: np.asarray(i.command["lin_vel"], float), 2, None, ("lin_vel",), "m/s",
            "commanded [vx, vy], yaw (heading) frame"),
    ObsTerm("command_ang_vel", lambda i, _: np.asarray(i.command["ang_vel"], float), 1, None, ("ang_vel",), "rad/s",
            "commanded yaw rate"),
    ObsTerm("command_waist_yaw", lambda i, _: np.asarray(i.command["waist_yaw"], float), 1, None, ("waist_yaw",), "rad",
            "commanded waist yaw"),
    ObsTerm("command_base_height", lambda i, _: np.asarray(i.command["base_height"], float), 1, None, ("base_height",),
            "m", "commanded pelvis height"),
    ObsTerm("ref_upper_dof_pos", _joints(lambda i: np.asarray(i.command["q_ref_arms"], float)), None, "arms",
            ("q_ref_arms",), "rad", "commanded arm joint angles"),
    ObsTerm("stiffness", lambda i, _: np.asarray(i.command["stiffness"], float), 5, None, ("stiffness",),
            "N/m, N m/rad", "RAW [K_lin_left_arm, K_lin_right_arm, K_lin_torso, K_ang_left_arm, K_ang_right_arm]"),
    ObsTerm("joint_pos_rel", _joints(lambda i: np.asarray(i.sensors["q"], float)[7:] - i.default_robot), None, "robot",
            (), "rad", "joint angles minus the policy's default angles"),
    ObsTerm("joint_pos", _joints(lambda i: np.asarray(i.sensors["q"], float)[7:]), None, "robot", (), "rad",
            "absolute joint angles"),
    ObsTerm("joint_vel", _joints(lambda i: np.asarray(i.sensors["v"], float)[6:]), None, "robot", (), "rad/s",
            "joint velocities"),
    ObsTerm("last_action", _joints(lambda i: i.last_action), None, "policy", (), "-",
            "previous raw policy output (after the spec's action clip)"),
    ObsTerm("gait_phase_sin", lambda i, _: np.sin(i.phase), 2, None, (), "-", "sin of the left/right leg phase"),
    ObsTerm("gait_phase_cos", lambda i, _: np.cos(i.phase), 2, None, (), "-", "cos of the left/right leg phase"),
]

#: name -> ObsTerm, every term a spec may use.
OBS_TERMS: dict[str, ObsTerm] = {t.name: t for t in _TERMS}
