"""MuJoCo model of a robot, built at run time from the same description as the pinocchio model.

The one MuJoCo builder of the project: every robot (Talos, G1 23/29 DoF, Go2) and every node or
tool gets its model here, driven by the robot file only (no code path keyed on a robot name).

Recipe: ``shared/reference/talos_mujoco.md`` §0 (verified on MuJoCo 4.0 / Talos) and lac.md §2.1
(G1). The URDF named in ``robots/<name>/robot.yaml`` is patched (absolute mesh paths,
``discardvisual``, ``fusestatic="false"``; with ``mujoco.strip_urdf_geometry`` its visual and
collision elements are removed, so no mesh is read) and loaded into an :class:`mujoco.MjSpec`, then:

* a free joint ``root`` is added on the URDF root link (``base_link``, ``pelvis``...);
* every joint that is not actuated (``robot.locked_joints``) is deleted, which welds its child
  link at 0 rad, as pinocchio's ``buildReducedModel`` does;
* the actuated joints lose their URDF ``frictionloss``/``damping`` and their ``actfrcrange``
  (pitfalls 2 and 3), so the joint forces are the actuator's plus the ``mujoco:`` section's
  uniform ``joint_damping_nms_per_rad`` and ``joint_frictionloss_nm`` (0 by default); each joint
  gets the robot file's per-joint rotor armature (``actuators``) plus ``mujoco.armature_kgm2``;
* one affine (position) actuator per actuated joint (named like the joint): force
  ``clamp(kp (ctrl - q) - kv qdot + b0, -tau_max, tau_max)`` with ``tau_max = robot.tau_max``.
  Position robots (``actuation: position``, SEIKO's flexible joint): ``kp = robot.K``, ``kv`` of
  the ``mujoco:`` section, ``b0 = 0``. PD robots (``actuation: pd``): initially ``kp = robot.K``,
  ``kv = robot.kd``; :class:`contactflow.sim.pd_robot.PDRobotSim` writes the commanded
  ``kp``, ``kd`` and ``tau_ff`` (as ``b0``) into the actuator parameters every control tick, so
  MuJoCo evaluates the PD law of Unitree's ``MotorCmd`` at every physics step;
* only the sole geometry collides with a floor plane (every URDF geom is discarded): one box per
  sole link (``foot_box_half_size_m``) or, with ``foot_sphere_points_m``, small spheres of radius
  ``foot_sphere_radius_m`` at those points of each sole link;
* optionally (``environment``, :mod:`contactflow.environment`): static boxes (a wall in front,
  a side support), collision spheres on the hand frames that touch only those boxes, and a
  force/torque sensor at the hand frames listed in ``ft_sensors`` (wrist FT);
* sites and sensors: a force + torque sensor at the origin of each plane-contact frame, a site
  per extra frame (hands), an IMU site (``framequat``, ``gyro``, ``accelerometer``) and one
  ``actuatorfrc`` sensor per actuator.

Names (used by :mod:`contactflow.sim.mujoco_robot`): free joint ``root``; actuator and joint
``<joint name>``; site
``<frame name>`` for contact and extra frames; sensors ``<frame>_force``, ``<frame>_torque``,
``imu_quat``, ``imu_gyro``, ``imu_acc`` and ``<joint name>_tau``.

Pitfall M3 (``shared/reference/pitfalls.md``): MuJoCo integrates the position-actuator stiffness
explicitly, so a joint with ``sqrt(kp / M_ii) * dt >= 2`` diverges. :func:`build_mujoco_model`
checks this at the default posture and raises :class:`ModelError`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any

import mujoco
import numpy as np
import pinocchio as pin

from contactflow.environment import Environment
from contactflow.errors import ConfigError, ModelError
from contactflow.robot import Robot
from contactflow.sim.state import StateMap

__all__ = [
    "PointMass",
    "MujocoOptions",
    "mujoco_options",
    "build_mujoco_spec",
    "build_mujoco_model",
    "check_actuator_stability",
    "set_pinocchio_configuration",
    "state_map",
    "root_link",
    "ROOT_JOINT",
    "IMU_SITE",
]

ROOT_JOINT = "root"
IMU_SITE = "imu"
STABILITY_BOUND = 2.0  # omega * dt at which explicit spring integration diverges (pitfall M3)

_INTEGRATORS = {
    "euler": mujoco.mjtIntegrator.mjINT_EULER,
    "rk4": mujoco.mjtIntegrator.mjINT_RK4,
    "implicit": mujoco.mjtIntegrator.mjINT_IMPLICIT,
    "implicitfast": mujoco.mjtIntegrator.mjINT_IMPLICITFAST,
}
_CONES = {"pyramidal": mujoco.mjtCone.mjCONE_PYRAMIDAL, "elliptic": mujoco.mjtCone.mjCONE_ELLIPTIC}


@dataclasses.dataclass(frozen=True, kw_only=True)
class PointMass:
    """An unmodelled payload welded to a link (e.g. a grasped load), absent from pinocchio.

    Attributes:
        name: body name (unique in the MuJoCo model).
        parent: name of the link (MuJoCo body) it is fixed to.
        pos: (3,) position of the mass in the parent link frame [m].
        mass: mass [kg], > 0.
        inertia: (3,) principal inertia about the mass centre [kg m^2] (small: a point mass).
    """

    name: str
    parent: str
    pos: tuple[float, float, float]
    mass: float
    inertia: tuple[float, float, float] = (1e-5, 1e-5, 1e-5)

    def __post_init__(self):
        if not (np.isfinite(self.mass) and self.mass > 0):
            raise ConfigError(f"PointMass {self.name!r}: mass must be > 0, got {self.mass}")
        if len(self.pos) != 3 or not np.all(np.isfinite(self.pos)):
            raise ConfigError(f"PointMass {self.name!r}: pos must be 3 finite numbers, got {self.pos}")
        if len(self.inertia) != 3 or not all(i > 0 for i in self.inertia):
            raise ConfigError(f"PointMass {self.name!r}: inertia must be 3 positive numbers")


@dataclasses.dataclass(frozen=True, kw_only=True)
class MujocoOptions:
    """Simulation parameters read from the robot file's ``mujoco:`` section (recipe defaults).

    Attributes:
        timestep_s: physics time step [s].
        integrator: ``implicitfast`` (recipe), ``euler``, ``rk4`` or ``implicit``.
        kv_nms_per_rad: position-actuator velocity gain [N m s/rad].
        armature_kgm2: joint armature added to every actuated joint [kg m^2], on top of the
            robot file's per-joint ``actuators`` armature.
        joint_damping_nms_per_rad: passive joint damping of every actuated joint [N m s/rad]
            (0 = the clean spring model; pitfall 5: a saturated actuator loses its kv damping).
        joint_frictionloss_nm: dry friction of every actuated joint [N m].
        strip_urdf_geometry: remove the URDF's visual and collision elements before import (no
            mesh is read: ~0.01 s instead of ~1-2 s for the G1).
        foot_box_half_size_m: (3,) half sizes of the sole collision box [m].
        foot_sphere_radius_m: radius of the sole spheres [m] (with ``foot_sphere_points_m``).
        foot_sphere_points_m: sphere centres in each sole link's frame [m]; when given, the
            soles are these spheres instead of boxes (G1: 4 x 5 mm, lac.md §1.1).
        foot_friction: (3,) sliding, torsional, rolling friction of the sole geoms.
        foot_solref: (2,) contact solref (time constant [s], damping ratio).
        foot_solimp: (3,) contact solimp (dmin, dmax, width [m]).
        sole_links: links that get sole geometry (default: the frames of the plane contacts).
        cone: friction cone, ``pyramidal`` or ``elliptic``.
        impratio: friction-to-normal impedance ratio.
        noslip_iterations: iterations of MuJoCo's noslip post-processor (0 = off). MuJoCo's
            soft contacts let a sole under a steady tangential load creep; the noslip pass (with
            an elliptic cone and impratio > 1) makes a loaded sole hold (Talos: a 10 N lateral
            push on the pelvis for 10 s moves the soles ~8 mm and 1.8 deg with pyramidal / 1 / 0,
            < 0.05 mm with elliptic / 10 / 20; ``tests/test_foot_hold.py``).
    """

    timestep_s: float = 0.001
    integrator: str = "implicitfast"
    kv_nms_per_rad: float = 20.0
    armature_kgm2: float = 0.0
    joint_damping_nms_per_rad: float = 0.0
    joint_frictionloss_nm: float = 0.0
    strip_urdf_geometry: bool = False
    foot_box_half_size_m: tuple[float, float, float] = (0.10, 0.065, 0.01)
    foot_sphere_radius_m: float = 0.005
    foot_sphere_points_m: tuple[tuple[float, float, float], ...] = ()
    foot_friction: tuple[float, float, float] = (0.8, 0.005, 0.0001)
    foot_solref: tuple[float, float] = (0.02, 1.0)
    foot_solimp: tuple[float, float, float] = (0.9, 0.95, 0.001)
    sole_links: tuple[str, ...] = ()
    cone: str = "pyramidal"
    impratio: float = 1.0
    noslip_iterations: int = 0

    def __post_init__(self):
        if not self.timestep_s > 0:
            raise ConfigError(f"timestep_s must be > 0, got {self.timestep_s}")
        if self.integrator not in _INTEGRATORS:
            raise ConfigError(f"integrator must be one of {sorted(_INTEGRATORS)}, got {self.integrator!r}")
        if self.cone not in _CONES:
            raise ConfigError(f"cone must be one of {sorted(_CONES)}, got {self.cone!r}")
        if self.kv_nms_per_rad < 0 or self.armature_kgm2 < 0 or self.joint_damping_nms_per_rad < 0:
            raise ConfigError("kv_nms_per_rad, armature_kgm2 and joint_damping_nms_per_rad must be >= 0")
        if any(h <= 0 for h in self.foot_box_half_size_m):
            raise ConfigError("foot_box_half_size_m must be positive")
        if self.joint_frictionloss_nm < 0 or not self.foot_sphere_radius_m > 0:
            raise ConfigError("joint_frictionloss_nm must be >= 0 and foot_sphere_radius_m > 0")
        if not self.impratio >= 1 or self.noslip_iterations < 0:
            raise ConfigError(f"impratio must be >= 1 and noslip_iterations >= 0, got {self.impratio}, "
                             f"{self.noslip_iterations}")
        if any(len(p) != 3 for p in self.foot_sphere_points_m):
            raise ConfigError("foot_sphere_points_m: each point needs 3 coordinates [m]")


def mujoco_options(robot: Robot) -> MujocoOptions:
    """The :class:`MujocoOptions` of ``robot`` (its ``mujoco:`` section; unknown keys rejected).

    Raises:
        ConfigError: unknown key, wrong type or out-of-range value (names the robot file).
    """
    from contactflow.config import load_config

    section = dict(robot.raw.get("mujoco") or {})
    opts = load_config(MujocoOptions, section, source=f"{robot.file_label()}:mujoco")
    if not opts.sole_links:
        soles = tuple(c.frame for c in robot.contacts.values() if c.type == "plane")
        opts = dataclasses.replace(opts, sole_links=soles)
    return opts


def _patched_urdf(robot: Robot, *, strip_geometry: bool = False, visual_meshes: bool = False) -> str:
    text = robot.urdf_path.read_text()
    if strip_geometry or visual_meshes:
        # collision meshes never collide here (only the soles do): dropping them skips reading them
        text = re.sub(r"<collision>.*?</collision>", "", text, flags=re.S)
        if not visual_meshes:
            text = re.sub(r"<visual>.*?</visual>", "", text, flags=re.S)
    # example-robot-data mesh URIs: package://example-robot-data/robots/... -> absolute path.
    robots_root = robot.urdf_path
    while robots_root.name != "robots" and robots_root.parent != robots_root:
        robots_root = robots_root.parent
    if robots_root.name != "robots":
        raise ModelError(f"{robot.urdf_path}: cannot find the example-robot-data 'robots' directory")
    text = text.replace("package://example-robot-data/robots/", str(robots_root) + "/")
    m = re.search(r"<robot\b[^>]*>", text)
    if m is None:
        raise ModelError(f"{robot.urdf_path}: no <robot> element")
    discard = "false" if visual_meshes else "true"
    mj = f'<mujoco><compiler discardvisual="{discard}" balanceinertia="true" fusestatic="false"/></mujoco>'
    return text[: m.end()] + mj + text[m.end() :]


def _frame_placement(robot: Robot, frame: str) -> tuple[str, np.ndarray, np.ndarray]:
    """MuJoCo body and local pose (pos (3,) [m], quat wxyz) of a pinocchio frame.

    Links are bodies with the same name (``fusestatic=false``); extra frames are placed on their
    parent link as in :func:`contactflow.robot.load_robot`.
    """
    extra = robot.raw.get("extra_frames") or {}
    if frame in extra:
        fr = extra[frame]
        parent_body, p0, q0 = _frame_placement(robot, fr["parent"])
        R = pin.rpy.rpyToMatrix(*map(float, fr.get("rpy", [0, 0, 0])))
        M0 = pin.XYZQUATToSE3(np.r_[p0, q0[1:], q0[0]])
        M = M0 * pin.SE3(R, np.asarray(fr["translation"], float))
        xyzw = pin.SE3ToXYZQUAT(M)[3:]
        return parent_body, M.translation.copy(), np.r_[xyzw[3], xyzw[:3]]
    return frame, np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0])


def _as_point_mass(item: Any) -> PointMass:
    if isinstance(item, PointMass):
        return item
    if isinstance(item, Mapping):
        try:
            return PointMass(**item)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"extra_bodies: {exc}") from None
    raise ConfigError(f"extra_bodies: expected PointMass or a mapping, got {type(item).__name__}")


def build_mujoco_spec(robot: Robot, *, extra_bodies: Iterable[PointMass | Mapping] | None = None,
                      environment: Environment | None = None, visual_meshes: bool = False,
                      options: MujocoOptions | None = None, torque_actuators: bool = False) -> mujoco.MjSpec:
    """Build the (uncompiled) MuJoCo spec of ``robot`` following the recipe.

    Args:
        robot: the loaded robot description (:func:`contactflow.robot.load_robot`).
        extra_bodies: unmodelled payloads (:class:`PointMass` or mappings with the same keys),
            each welded to a link; they change the MuJoCo model only, not ``robot.model``.
        environment: static boxes, hand collision spheres and wrist FT sensors (None: floor
            only, as for the double-support pipeline).
        visual_meshes: keep the URDF's visual meshes (for rendering; they never collide).
        options: simulation parameters replacing the robot file's ``mujoco:`` section (e.g. a
            data generator with its own physics); ``sole_links=()`` here means no sole geometry.
        torque_actuators: plain torque motors (force = ctrl, clamped to ``+-tau_max``) instead of
            the affine PD actuators, for callers that compute the joint torques themselves.

    Returns:
        The spec; call ``spec.compile()`` or use :func:`build_mujoco_model`.

    Raises:
        ModelError: a joint, link or frame of the description is missing from the URDF import.
        ConfigError: malformed ``mujoco:`` section or extra body.
    """
    opts = mujoco_options(robot) if options is None else options
    try:
        spec = mujoco.MjSpec.from_string(
            _patched_urdf(robot, strip_geometry=opts.strip_urdf_geometry, visual_meshes=visual_meshes))
    except ValueError as exc:  # mujoco raises ValueError on XML errors
        raise ModelError(f"{robot.urdf_path}: MuJoCo cannot load the URDF: {exc}") from None

    spec.option.timestep = opts.timestep_s
    spec.option.integrator = _INTEGRATORS[opts.integrator]
    spec.option.cone = _CONES[opts.cone]
    spec.option.impratio = opts.impratio
    spec.option.noslip_iterations = opts.noslip_iterations
    spec.option.gravity = robot.model.gravity.linear.tolist()  # one gravity for both models

    root = root_link(robot)
    base = spec.body(root)
    if base is None:
        raise ModelError(f"MuJoCo import of {robot.urdf_path.name} has no body {root!r}")
    base.add_freejoint(name=ROOT_JOINT)

    actuated = set(robot.joint_names)
    for j in list(spec.joints):
        if j.type == mujoco.mjtJoint.mjJNT_FREE:
            continue
        if j.name not in actuated:
            spec.delete(j)  # welds the child link at 0 rad, like pinocchio's reduced model
    present = {j.name for j in spec.joints}
    missing = [j for j in robot.joint_names if j not in present]
    if missing:
        raise ModelError(f"MuJoCo import of {robot.urdf_path.name} lacks joints {missing}")

    pd = robot.actuation == "pd"
    armature = robot.armature if robot.armature is not None else np.zeros(robot.n)
    kv = robot.kd if pd else np.full(robot.n, opts.kv_nms_per_rad)
    for i, (name, kp, tau_max) in enumerate(zip(robot.joint_names, robot.K, robot.tau_max)):
        j = spec.joint(name)
        j.frictionloss = opts.joint_frictionloss_nm  # URDF friction replaced (pitfall 3)
        j.damping = [opts.joint_damping_nms_per_rad, 0.0, 0.0]  # URDF damping replaced (pitfall 3)
        j.actfrclimited = mujoco.mjtLimited.mjLIMITED_FALSE  # pitfall 2: URDF effort clamps otherwise
        j.armature = float(armature[i]) + opts.armature_kgm2
        a = spec.add_actuator(name=name, target=name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
        if torque_actuators:
            a.set_to_motor()
        else:
            a.set_to_position(kp=float(kp), kv=float(kv[i]))
        a.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
        a.forcerange = [-float(tau_max), float(tau_max)]
        a.ctrllimited = mujoco.mjtLimited.mjLIMITED_FALSE

    # Collisions: only sole boxes against the floor. URDF geoms are discarded (discardvisual).
    for g in spec.geoms:
        g.contype = 0
        g.conaffinity = 0
    floor = spec.worldbody.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 0.05])
    floor.contype = 0
    floor.conaffinity = 1
    half = np.asarray(opts.foot_box_half_size_m, float)
    for link in opts.sole_links:
        body = _body(spec, link, "mujoco.sole_links")
        if opts.foot_sphere_points_m:
            geoms = [
                body.add_geom(name=f"{link}_foot{k}", type=mujoco.mjtGeom.mjGEOM_SPHERE,
                              size=[opts.foot_sphere_radius_m, 0.0, 0.0], pos=[float(x) for x in p])
                for k, p in enumerate(opts.foot_sphere_points_m)
            ]
        else:
            geoms = [body.add_geom(
                name=f"{link}_box",
                type=mujoco.mjtGeom.mjGEOM_BOX,
                size=half.tolist(),
                pos=[0.0, 0.0, float(half[2])],  # bottom face on the sole plane
            )]
        for g in geoms:
            g.contype = 1
            g.conaffinity = 0
            g.condim = 3
            g.friction = list(opts.foot_friction)
            g.solref = list(opts.foot_solref)
            g.solimp = list(opts.foot_solimp) + [0.5, 2.0]
            g.mass = 0.0
            g.density = 0.0

    # Sites and sensors.
    for c in robot.contacts.values():
        if c.type != "plane":
            continue
        _add_frame_site(spec, robot, c.frame)
        spec.add_sensor(name=f"{c.frame}_force", type=mujoco.mjtSensor.mjSENS_FORCE,
                        objtype=mujoco.mjtObj.mjOBJ_SITE, objname=c.frame)
        spec.add_sensor(name=f"{c.frame}_torque", type=mujoco.mjtSensor.mjSENS_TORQUE,
                        objtype=mujoco.mjtObj.mjOBJ_SITE, objname=c.frame)
    for fname in robot.raw.get("extra_frames") or {}:
        if spec.site(fname) is None:  # a sole frame may already have its sensor site
            _add_frame_site(spec, robot, fname)
    for c in robot.contacts.values():
        if spec.site(c.frame) is None:
            _add_frame_site(spec, robot, c.frame)

    imu_frame = str(robot.raw.get("imu_frame", root))
    imu_body, imu_pos, imu_quat = _frame_placement(robot, imu_frame)
    _body(spec, imu_body, "imu_frame").add_site(name=IMU_SITE, pos=imu_pos.tolist(), quat=imu_quat.tolist())
    site = mujoco.mjtObj.mjOBJ_SITE
    spec.add_sensor(name="imu_quat", type=mujoco.mjtSensor.mjSENS_FRAMEQUAT, objtype=site, objname=IMU_SITE)
    spec.add_sensor(name="imu_gyro", type=mujoco.mjtSensor.mjSENS_GYRO, objtype=site, objname=IMU_SITE)
    spec.add_sensor(name="imu_acc", type=mujoco.mjtSensor.mjSENS_ACCELEROMETER, objtype=site, objname=IMU_SITE)
    for name in robot.joint_names:
        spec.add_sensor(name=f"{name}_tau", type=mujoco.mjtSensor.mjSENS_ACTUATORFRC,
                        objtype=mujoco.mjtObj.mjOBJ_ACTUATOR, objname=name)

    if environment is not None:
        if environment.cone is not None:
            spec.option.cone = _CONES[environment.cone]
        if environment.impratio is not None:
            spec.option.impratio = environment.impratio
        # MuJoCo's soft friction creeps under a sustained tangential load (hand on the wall, feet
        # resisting the push): the noslip pass removes the creep that relaxes a held contact force.
        spec.option.noslip_iterations = max(opts.noslip_iterations, 20)
        if environment.foot_solref is not None:
            for g in spec.geoms:
                if g.contype == 1:  # the sole geoms
                    g.solref = list(environment.foot_solref)
        for b in environment.boxes:
            g = spec.worldbody.add_geom(name=b.name, type=mujoco.mjtGeom.mjGEOM_BOX, size=list(b.half_size_m),
                                        pos=list(b.center_m))
            g.contype = 0
            g.conaffinity = 2  # touched only by the hand spheres
            g.condim = 3
            g.friction = list(opts.foot_friction)
            g.rgba = [0.6, 0.6, 0.7, 0.5]
        for frame, radius in environment.hand_radius_m.items():
            body, pos, _ = _frame_placement(robot, frame)
            g = _body(spec, body, f"environment.hand_geoms.{frame}").add_geom(
                name=f"{frame}_sphere", type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[float(radius), 0, 0], pos=pos.tolist()
            )
            g.contype = 2
            g.conaffinity = 0
            g.condim = 3
            g.friction = list(opts.foot_friction)
            g.solref = list(environment.foot_solref or opts.foot_solref)  # as stiff as the soles
            g.mass = 0.0
            g.density = 0.0
        for frame in environment.ft_sensor_frames:
            if spec.site(frame) is None:
                _add_frame_site(spec, robot, frame)
            spec.add_sensor(name=f"{frame}_force", type=mujoco.mjtSensor.mjSENS_FORCE, objtype=site, objname=frame)
            spec.add_sensor(name=f"{frame}_torque", type=mujoco.mjtSensor.mjSENS_TORQUE, objtype=site, objname=frame)

    _apply_body_inertias(spec, robot)

    for item in extra_bodies or ():
        pm = _as_point_mass(item)
        parent = _body(spec, pm.parent, f"extra_bodies.{pm.name}.parent")
        if spec.body(pm.name) is not None:
            raise ConfigError(f"extra_bodies: a body named {pm.name!r} already exists")
        b = parent.add_body(name=pm.name, pos=list(map(float, pm.pos)))
        b.mass = float(pm.mass)
        b.ipos = [0.0, 0.0, 0.0]  # pitfall 6: add_body leaves ipos = [nan, 0, 0]
        b.iquat = [1.0, 0.0, 0.0, 0.0]
        b.inertia = list(map(float, pm.inertia))
        b.explicitinertial = True
    return spec


def _apply_body_inertias(spec: mujoco.MjSpec, robot: Robot) -> None:
    """The robot file's ``body_inertias`` (:func:`contactflow.robot.load_robot`) in the MuJoCo model.

    ``body_inertias.<joint>`` is the inertia of the REDUCED model's body: the link moved by
    ``<joint>`` plus the links welded to it (locked joints). MuJoCo keeps those links as separate
    bodies, so the moved link gets ``robot.model.inertias[<joint>]`` minus the welded links'
    URDF inertias (all in its frame, which is pinocchio's joint frame for a URDF): the composite
    then equals the pinocchio body. Extra bodies (payloads) are added after, on top of it.

    Raises:
        ModelError: a joint without a MuJoCo body, or welded links heavier than the given body
            (the remainder would not be a physical inertia).
    """
    section = robot.raw.get("body_inertias")
    if not section:
        return
    m = spec.copy().compile()
    d = mujoco.MjData(m)
    mujoco.mj_kinematics(m, d)

    def frame(b: int) -> pin.SE3:
        return pin.SE3(pin.Quaternion(*d.xquat[b]).toRotationMatrix(), d.xpos[b].copy())  # wxyz ctor

    for joint in section:
        jid = robot.model.getJointId(joint)
        body = root_link(robot) if jid == 1 else m.body(m.joint(joint).bodyid[0]).name
        b = m.body(body).id
        oMb = frame(b)
        welded = pin.Inertia.Zero()
        for c in range(m.nbody):  # descendants of b reached without crossing a joint
            a = c
            while a != b and a != 0 and m.body_jntnum[a] == 0:
                a = m.body_parentid[a]
            if c == b or a != b:
                continue
            R = pin.Quaternion(*m.body_iquat[c]).toRotationMatrix()
            Ic = pin.Inertia(float(m.body_mass[c]), m.body_ipos[c].copy(), R @ np.diag(m.body_inertia[c]) @ R.T)
            welded += (oMb.actInv(frame(c))).act(Ic)
        target = robot.model.inertias[jid]
        rest = pin.Inertia.FromDynamicParameters(target.toDynamicParameters() - welded.toDynamicParameters())
        I = np.asarray(rest.inertia)
        if rest.mass <= 0 or np.linalg.eigvalsh(0.5 * (I + I.T))[0] <= 0:
            raise ModelError(f"{robot.file_label()}: body_inertias.{joint}: the links welded to {body!r} "
                             f"({welded.mass:.4g} kg) leave no physical inertia for {body!r} itself")
        sb = spec.body(body)
        sb.mass = float(rest.mass)
        sb.ipos = [float(x) for x in rest.lever]
        sb.fullinertia = [I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[0, 2], I[1, 2]]
        sb.explicitinertial = True


def root_link(robot: Robot) -> str:
    """Name of the link that carries the free joint (the free-flyer's child link in pinocchio)."""
    # The free-flyer's child link: the body frame attached to joint 1 with the smallest index.
    for f in robot.model.frames:
        if f.parentJoint == 1 and f.type == pin.FrameType.BODY:
            return f.name
    raise ModelError(f"robot {robot.name!r}: no body frame on the free-flyer joint")


def _body(spec: mujoco.MjSpec, name: str, where: str):
    b = spec.body(name)
    if b is None:
        raise ModelError(f"{where}: no link {name!r} in the MuJoCo model")
    return b


def _add_frame_site(spec: mujoco.MjSpec, robot: Robot, frame: str) -> None:
    body, pos, quat = _frame_placement(robot, frame)
    _body(spec, body, f"frame {frame}").add_site(name=frame, pos=pos.tolist(), quat=quat.tolist())


def state_map(m: mujoco.MjModel, robot: Robot) -> StateMap:
    """The pinocchio <-> MuJoCo :class:`~contactflow.sim.state.StateMap` of a model built here."""
    return StateMap(m, robot.joint_names, ROOT_JOINT)


def set_pinocchio_configuration(m: mujoco.MjModel, d: mujoco.MjData, robot: Robot, q: np.ndarray) -> None:
    """Write a pinocchio configuration into ``d.qpos`` (joints mapped by name, xyzw -> wxyz).

    Args:
        q: (robot.nq,) pinocchio configuration [m, -, rad].
    """
    state_map(m, robot).set(d, q)


def check_actuator_stability(m: mujoco.MjModel, robot: Robot, *, bound: float = STABILITY_BOUND) -> np.ndarray:
    """Check pitfall M3: ``omega_i dt = sqrt(kp_i / M_ii) dt < bound`` for every actuator.

    ``M_ii`` is the diagonal of the joint-space inertia (armature included) at ``robot.q_default``.
    This is a per-joint (1-DoF) estimate: the coupled eigenfrequency is somewhat higher, and
    contact on the feet raises the practical limit (recipe §3).

    Args:
        m: compiled model from :func:`build_mujoco_spec`.
        robot: the robot it was built from.
        bound: divergence threshold of ``omega dt`` (MuJoCo 4.0: diverges at 2.1, stable at 1.9).

    Returns:
        (n,) ``omega_i dt`` per actuated joint (robot.joint_names order).

    Raises:
        ModelError: some joint reaches the bound; the message names it and suggests fixes.
    """
    d = mujoco.MjData(m)
    set_pinocchio_configuration(m, d, robot, robot.q_default)
    mujoco.mj_forward(m, d)
    M = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, M)
    dt = m.opt.timestep
    wdt = np.empty(robot.n)
    for i, name in enumerate(robot.joint_names):
        dof = m.joint(name).dofadr[0]
        kp = m.actuator(name).gainprm[0]
        wdt[i] = np.sqrt(kp / M[dof, dof]) * dt
    worst = int(np.argmax(wdt))
    if wdt[worst] >= bound:
        name = robot.joint_names[worst]
        dof = m.joint(name).dofadr[0]
        raise ModelError(
            f"unstable position actuator (pitfall M3): {name} has sqrt(kp/M_ii)*dt = {wdt[worst]:.3f} >= {bound} "
            f"(kp {m.actuator(name).gainprm[0]:g} N m/rad, M_ii {M[dof, dof]:.4g} kg m^2, dt {dt:g} s); "
            "lower mujoco.timestep_s or raise mujoco.armature_kgm2"
        )
    return wdt


def build_mujoco_model(
    robot: Robot,
    *,
    extra_bodies: Iterable[PointMass | Mapping] | None = None,
    environment: Environment | None = None,
    visual_meshes: bool = False,
    timestep_s: float | None = None,
    kv_nms_per_rad: float | None = None,
    check_stability: bool = True,
) -> mujoco.MjModel:
    """Compile the MuJoCo model of ``robot`` and check actuator stability (pitfall M3).

    Args:
        robot: the loaded robot description.
        extra_bodies: see :func:`build_mujoco_spec`.
        environment: see :func:`build_mujoco_spec`.
        visual_meshes: see :func:`build_mujoco_spec`.
        timestep_s: physics step [s] overriding the robot file's ``mujoco.timestep_s``.
        kv_nms_per_rad: actuator velocity gain [N m s/rad] overriding ``mujoco.kv_nms_per_rad``.
        check_stability: run :func:`check_actuator_stability` (raises on an unstable setting).

    Returns:
        The compiled model.

    Raises:
        ModelError: URDF import or compilation failed, or the actuators are unstable at this step.
        ConfigError: malformed ``mujoco:`` section or extra body.
    """
    spec = build_mujoco_spec(robot, extra_bodies=extra_bodies, environment=environment, visual_meshes=visual_meshes)
    if timestep_s is not None:
        if not (np.isfinite(timestep_s) and timestep_s > 0):
            raise ConfigError(f"timestep_s must be > 0, got {timestep_s}")
        spec.option.timestep = float(timestep_s)
    if kv_nms_per_rad is not None:
        if not (np.isfinite(kv_nms_per_rad) and kv_nms_per_rad >= 0):
            raise ConfigError(f"kv_nms_per_rad must be >= 0, got {kv_nms_per_rad}")
        for a in spec.actuators:
            kp = a.gainprm[0]
            a.set_to_position(kp=float(kp), kv=float(kv_nms_per_rad))
    try:
        m = spec.compile()
    except ValueError as exc:
        raise ModelError(f"MuJoCo model of robot {robot.name!r} does not compile: {exc}") from None
    if m.nu != robot.n:
        raise ModelError(f"MuJoCo model has {m.nu} actuators, robot {robot.name!r} has {robot.n} joints")
    if check_stability:
        check_actuator_stability(m, robot)
    return m
