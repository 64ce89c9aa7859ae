"""MuJoCo model of the 23-DoF Unitree G1 (LAC), built at run time from ``robots/g1/robot.yaml``.

Recipe (../shared/reference/lac.md §2.1): the example-robot-data URDF is patched (mesh paths made
relative, visual/collision geometry dropped unless meshes are asked for), loaded with
``mujoco.MjSpec.from_string``, given a free joint on ``pelvis``; the joints the robot file does not
list are deleted (their bodies become welded to the parent, so the mass is unchanged); only four
5 mm spheres per sole collide with a floor plane; every actuated joint gets LAC's armature, a small
damping and friction loss, and a torque motor with ``ctrlrange`` = +-effort limit.

``qpos`` layout: [base position (3) [m], base quaternion (w, x, y, z), 23 joint angles [rad] in
the robot file's order], i.e. pinocchio's ``q`` with the quaternion reordered
(:func:`pin_to_mj_qpos`).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import mujoco
import numpy as np

from contactflow.errors import ModelError
from contactflow.robot import Robot, load_robot

__all__ = ["G1MujocoModel", "build_g1_model", "pin_to_mj_qpos", "pd_torque"]

_FOOT_SPHERES_LOCAL = np.array(
    [[-0.05, 0.025, -0.03], [-0.05, -0.025, -0.03], [0.12, 0.03, -0.03], [0.12, -0.03, -0.03]]
)


@dataclasses.dataclass(frozen=True)
class G1MujocoModel:
    """A compiled MuJoCo G1 and its mapping to the robot description.

    Attributes:
        model: the compiled ``mujoco.MjModel`` (free-floating, 23 hinge joints, 23 motors).
        robot: the pinocchio-side :class:`Robot` it was built from.
        joint_names: (23,) joint names, same order as ``robot.joint_names``.
        qpos_adr: (23,) qpos address of each joint.
        dof_adr: (23,) qvel address of each joint.
        kp: (23,) PD stiffness [N m/rad]. kd: (23,) PD damping [N m s/rad].
        tau_max: (23,) effort limits [N m] (= motor ctrlrange).
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


def pin_to_mj_qpos(q: np.ndarray) -> np.ndarray:
    """Convert a pinocchio configuration to MuJoCo ``qpos``.

    Args:
        q: (7 + n,) [p (3) m, quaternion (x, y, z, w), joints rad].

    Returns:
        (7 + n,) [p (3) m, quaternion (w, x, y, z), joints rad].
    """
    q = np.asarray(q, dtype=float)
    out = q.copy()
    out[3] = q[6]
    out[4:7] = q[3:6]
    return out


def pd_torque(g1: G1MujocoModel, data: mujoco.MjData, q_target: np.ndarray) -> np.ndarray:
    """LAC joint PD ``tau = Kp (q* - q) - Kd qdot`` clamped to the effort limits.

    Args:
        g1: the model wrapper.
        data: MuJoCo data.
        q_target: (23,) target joint angles [rad].

    Returns:
        (23,) motor torques [N m].
    """
    q = data.qpos[g1.qpos_adr]
    qd = data.qvel[g1.dof_adr]
    return np.clip(g1.kp * (q_target - q) - g1.kd * qd, -g1.tau_max, g1.tau_max)


def _patched_urdf(urdf_path: Path, meshes: bool) -> str:
    text = urdf_path.read_text(encoding="utf-8")
    if meshes:
        text = re.sub(r'filename="package://[^"]*/meshes/', 'filename="', text)
        text = re.sub(r"<collision>.*?</collision>", "", text, flags=re.S)
    else:
        text = re.sub(r"<visual>.*?</visual>", "", text, flags=re.S)
        text = re.sub(r"<collision>.*?</collision>", "", text, flags=re.S)
    meshdir = urdf_path.parent.parent / "meshes"
    compiler = (
        f'<mujoco><compiler meshdir="{meshdir}" discardvisual="false" fusestatic="false" '
        'balanceinertia="true"/></mujoco>'
    )
    return re.sub(r"(<robot[^>]*>)", r"\1" + compiler, text, count=1)


def build_g1_model(robot: Robot | None = None, *, meshes: bool = False, spec_hook=None) -> G1MujocoModel:
    """Build the 23-DoF G1 MuJoCo model from its robot description.

    Args:
        robot: the loaded ``g1`` robot (``load_robot("g1")`` when None).
        meshes: keep the visual STL meshes (for rendering; compilation takes ~1-2 s instead of ~0.05 s).
        spec_hook: optional ``f(spec: mujoco.MjSpec)`` called just before compiling (to add sites,
            cameras...; it must not add or reorder joints).

    Returns:
        G1MujocoModel.

    Raises:
        ModelError: the URDF cannot be compiled or a listed joint is missing.
    """
    robot = robot if robot is not None else load_robot("g1")
    params = robot.raw.get("g1_mujoco") or {}
    spec = mujoco.MjSpec.from_string(_patched_urdf(robot.urdf_path, meshes))
    spec.option.timestep = float(params.get("timestep_s", 0.002))
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_EULER
    spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    spec.option.impratio = 30.0
    pelvis = spec.body("pelvis")
    if pelvis is None:
        raise ModelError(f"{robot.urdf_path.name}: no body 'pelvis'")
    pelvis.add_freejoint(name="floating_base_joint")
    for j in list(spec.joints):
        if j.type == mujoco.mjtJoint.mjJNT_FREE:
            continue
        if j.name not in robot.joint_names:
            spec.delete(j)

    arm = np.asarray(robot.raw.get("actuators", {}).get("armature", np.zeros(robot.n)), float)
    kd = np.asarray(robot.raw.get("actuators", {}).get("kd_nms_per_rad", np.zeros(robot.n)), float)
    if arm.shape != (robot.n,) or kd.shape != (robot.n,):
        raise ModelError(f"{robot.file_label()}: actuators.armature / kd_nms_per_rad need {robot.n} values")
    for i, name in enumerate(robot.joint_names):
        j = spec.joint(name)
        if j is None:
            raise ModelError(f"G1 MuJoCo model: joint {name!r} missing after URDF import")
        j.armature = float(arm[i])
        j.damping = [float(params.get("joint_damping_nms_per_rad", 0.05)), 0.0, 0.0]  # MuJoCo 4: 3-vector
        j.frictionloss = float(params.get("joint_frictionloss_nm", 0.2))
        j.range = [float(robot.q_min[i]), float(robot.q_max[i])]
        j.limited = mujoco.mjtLimited.mjLIMITED_TRUE
        act = spec.add_actuator(name=name.removesuffix("_joint"), target=name)
        act.trntype = mujoco.mjtTrn.mjTRN_JOINT
        act.ctrlrange = [-float(robot.tau_max[i]), float(robot.tau_max[i])]
        act.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE

    r = float(params.get("foot_sphere_radius_m", 0.005))
    for link in params.get("sole_links", ["left_ankle_roll_link", "right_ankle_roll_link"]):
        b = spec.body(link)
        if b is None:
            raise ModelError(f"{robot.file_label()}: g1_mujoco.sole_links: no body {link!r}")
        for k, p in enumerate(_FOOT_SPHERES_LOCAL):
            g = b.add_geom(name=f"{link}_foot{k}", type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[r, 0, 0], pos=p)
            g.mass = 0.0
            g.condim = 3
    spec.worldbody.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 0.05])
    spec.worldbody.add_light(pos=[0, 0, 3], dir=[0, 0, -1])
    if spec_hook is not None:
        spec_hook(spec)
    try:
        model = spec.compile()
    except ValueError as exc:
        raise ModelError(f"G1 MuJoCo model does not compile: {exc}") from None

    names = tuple(model.joint(i).name for i in range(1, model.njnt))
    if names != robot.joint_names:
        raise ModelError(f"G1 MuJoCo joint order {names} differs from the robot file {robot.joint_names}")
    qpos_adr = np.array([model.jnt_qposadr[i] for i in range(1, model.njnt)])
    dof_adr = np.array([model.jnt_dofadr[i] for i in range(1, model.njnt)])
    return G1MujocoModel(
        model=model,
        robot=robot,
        joint_names=names,
        qpos_adr=qpos_adr,
        dof_adr=dof_adr,
        kp=robot.K.copy(),
        kd=kd,
        tau_max=robot.tau_max.copy(),
    )
