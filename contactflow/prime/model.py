"""PRIME's view of a robot: the pinocchio model with contact-point frames and rotor armature.

``robots/<name>/prime.yaml`` (next to ``robot.yaml``) lists the contact points (a parent frame, a
translation in it and a sphere radius), the friction coefficient, the joint armature and the
bodies whose inertial parameters are identified (see :class:`PrimeRobotConfig`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pinocchio as pin

from contactflow.config import load_config, read_yaml
from contactflow.errors import ConfigError, ModelError
from contactflow.prime.contact import ContactPoint
from contactflow.robot import Robot, load_robot

__all__ = ["PointConfig", "PrimeRobotConfig", "PrimeRobot", "load_prime_robot"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class PointConfig:
    """A contact point: ``frame`` (existing pinocchio frame), ``translation`` in it [m], sphere ``radius_m`` [m]."""

    frame: str
    translation: tuple[float, float, float] = (0.0, 0.0, 0.0)
    radius_m: float = 0.0

    def __post_init__(self):
        if self.radius_m < 0:
            raise ConfigError(f"radius_m must be >= 0, got {self.radius_m}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrimeRobotConfig:
    """Contents of ``robots/<name>/prime.yaml``.

    Attributes:
        contacts: contact name -> point.
        mu: friction coefficient [-].
        armature_kgm2: rotor armature added to every actuated joint [kg m^2]; 0 keeps the robot
            file's ``actuators.armature`` when it has one.
        identified_bodies: joint names whose child-body inertias are identified.
        mujoco: data-generator settings (read by :mod:`contactflow.prime.datagen`).
    """

    contacts: dict[str, PointConfig]
    mu: float = 0.8
    armature_kgm2: float = 0.0
    identified_bodies: tuple[str, ...] = ("root_joint",)
    mujoco: dict[str, float] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if not self.contacts:
            raise ConfigError("contacts: at least one contact point is needed")
        if self.mu <= 0:
            raise ConfigError(f"mu must be > 0, got {self.mu}")
        if self.armature_kgm2 < 0:
            raise ConfigError("armature_kgm2 must be >= 0")


@dataclasses.dataclass(frozen=True)
class PrimeRobot:
    """A robot prepared for PRIME.

    Attributes:
        robot: the contactflow robot description.
        config: its ``prime.yaml``.
        model: pinocchio model with armature and one OP frame ``prime_<contact>`` per contact point.
        points: contact points (frames of ``model``).
    """

    robot: Robot
    config: PrimeRobotConfig
    model: pin.Model
    points: tuple[ContactPoint, ...]

    @property
    def name(self) -> str:
        return self.robot.name

    @property
    def contact_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.points)


def load_prime_robot(name_or_robot: str | Path | Robot) -> PrimeRobot:
    """Load a robot and its ``prime.yaml``.

    Raises:
        ConfigError: missing or malformed ``prime.yaml`` (file and key named).
        ModelError: unknown frame or joint.
    """
    robot = name_or_robot if isinstance(name_or_robot, Robot) else load_robot(name_or_robot)
    path = robot.directory / "prime.yaml"
    if not path.exists():
        raise ConfigError(f"{path}: PRIME settings not found for robot {robot.name!r}")
    cfg = load_config(PrimeRobotConfig, read_yaml(path), source=str(path))
    model = robot.model.copy()
    if cfg.armature_kgm2 > 0:
        model.armature[6:] = cfg.armature_kgm2
    elif robot.armature is not None and np.any(robot.armature > 0):
        model.armature[6:] = robot.armature  # robot file `actuators`, per joint by name
    for j in cfg.identified_bodies:
        if not model.existJointName(j):
            raise ModelError(f"{path}: identified_bodies: no joint {j!r} in robot {robot.name!r}")
    points = []
    for cname, pc in cfg.contacts.items():
        if not model.existFrame(pc.frame):
            raise ModelError(f"{path}: contacts.{cname}.frame: no frame {pc.frame!r} in robot {robot.name!r}")
        parent = model.getFrameId(pc.frame)
        pf = model.frames[parent]
        placement = pf.placement * pin.SE3(np.eye(3), np.asarray(pc.translation, dtype=float))
        fname = f"prime_{cname}"
        fid = model.addFrame(pin.Frame(fname, pf.parentJoint, parent, placement, pin.FrameType.OP_FRAME))
        points.append(ContactPoint(cname, fname, fid, pc.radius_m))
    return PrimeRobot(robot, cfg, model, tuple(points))


def standing_configuration(pr: PrimeRobot, gap_m: float = 0.0) -> np.ndarray:
    """Default posture with the base lowered so the lowest contact sphere touches z = gap_m.

    Returns:
        q: (nq,) configuration [m, quaternion xyzw, rad].
    """
    q = pr.robot.q_default.copy()
    q[:3] = 0.0
    data = pr.model.createData()
    pin.framesForwardKinematics(pr.model, data, q)
    zmin = min(data.oMf[p.frame_id].translation[2] - p.radius_m for p in pr.points)
    q[2] = gap_m - zmin
    return q
