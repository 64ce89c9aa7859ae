"""The LAC G1's MuJoCo model as :class:`G1MujocoModel` (a thin wrapper of the one builder).

The model itself comes from :func:`contactflow.sim.mujoco_model.build_mujoco_spec`, driven by
``robots/g1/robot.yaml`` (its ``mujoco:`` section: 4 x 5 mm foot spheres per sole, Euler, elliptic
cone, impratio 30, per-joint armature; lac.md §2.1); this module keeps the small API the LAC
tools use (kinematic playback, the mink benchmark): joint addresses, gains and the optional
visual meshes for rendering.

``qpos`` layout: [base position (3) [m], base quaternion (w, x, y, z), n joint angles [rad] in
the robot file's order], i.e. pinocchio's ``q`` with the quaternion reordered
(:func:`pin_to_mj_qpos`, from :mod:`contactflow.sim.state`).
"""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np

from contactflow.errors import ModelError
from contactflow.robot import Robot, load_robot
from contactflow.sim.mujoco_model import build_mujoco_spec, state_map
from contactflow.sim.state import pin_to_mj_qpos

__all__ = ["G1MujocoModel", "build_g1_model", "pin_to_mj_qpos"]


@dataclasses.dataclass(frozen=True)
class G1MujocoModel:
    """A compiled MuJoCo G1 and its mapping to the robot description.

    Attributes:
        model: the compiled ``mujoco.MjModel`` (free-floating, n hinge joints, n PD actuators).
        robot: the pinocchio-side :class:`Robot` it was built from.
        joint_names: (n,) joint names, same order as ``robot.joint_names``.
        qpos_adr: (n,) qpos address of each joint.
        dof_adr: (n,) qvel address of each joint.
        kp: (n,) PD stiffness [N m/rad]. kd: (n,) PD damping [N m s/rad].
        tau_max: (n,) effort limits [N m] (= actuator forcerange). The PD law itself is
            :func:`contactflow.sim.pd_robot.pd_torque`.
    """

    model: mujoco.MjModel
    robot: Robot
    joint_names: tuple[str, ...]
    qpos_adr: np.ndarray
    dof_adr: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    tau_max: np.ndarray

    def body_id(self, name: str) -> int:
        """MuJoCo body index of link ``name``; raises ModelError if absent."""
        i = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, name)
        if i < 0:
            raise ModelError(f"G1 MuJoCo model has no body {name!r}")
        return i


def build_g1_model(robot: Robot | None = None, *, meshes: bool = False, spec_hook=None) -> G1MujocoModel:
    """Build the G1 MuJoCo model from its robot description (the project's one builder).

    Args:
        robot: the loaded ``g1`` (or ``g1_29dof``) robot (``load_robot("g1")`` when None).
        meshes: keep the visual STL meshes (for rendering; compilation takes ~1-2 s instead of ~0.01 s).
        spec_hook: optional ``f(spec: mujoco.MjSpec)`` called just before compiling (to add sites,
            cameras...; it must not add or reorder joints).

    Returns:
        G1MujocoModel.

    Raises:
        ModelError: the URDF cannot be compiled or a listed joint is missing.
    """
    robot = robot if robot is not None else load_robot("g1")
    spec = build_mujoco_spec(robot, visual_meshes=meshes)
    if spec_hook is not None:
        spec_hook(spec)
    try:
        model = spec.compile()
    except ValueError as exc:
        raise ModelError(f"G1 MuJoCo model does not compile: {exc}") from None
    sm = state_map(model, robot)
    if not sm.identity:
        raise ModelError(f"G1 MuJoCo joint order differs from the robot file {robot.joint_names}")
    return G1MujocoModel(
        model=model,
        robot=robot,
        joint_names=robot.joint_names,
        qpos_adr=sm.jq.copy(),
        dof_adr=sm.jv.copy(),
        kp=robot.K.copy(),
        kd=robot.kd.copy(),
        tau_max=robot.tau_max.copy(),
    )
