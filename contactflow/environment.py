"""The robot's surroundings: a floor and static boxes (walls, supports), shared by the MuJoCo scene
and the SEIKO contact-switching checks.

The ``environment:`` section of ``robots/<name>/robot.yaml``::

    environment:
      boxes:                       # static boxes, world frame, axis-aligned
        - {name: front_wall, center_m: [0.65, 0.35, 1.0], half_size_m: [0.05, 0.45, 0.5]}
      hand_geoms:                  # collision spheres of point effectors (frame name -> radius)
        left_hand_frame: {radius_m: 0.03}
      ft_sensors: [left_hand_frame]   # frames carrying a force/torque sensor (wrist FT)
      cone: elliptic                  # optional MuJoCo friction cone / impratio of this scene
      impratio: 10
      foot_solref: [0.005, 1.0]       # optional sole contact stiffness of this scene
      force_from_joint_torques:       # frames without a sensor: force from these joints' torques
        right_hand_frame: [arm_right_1_joint, arm_right_2_joint, arm_right_3_joint, arm_right_4_joint]

The floor is the plane z = 0. Nothing here imports MuJoCo: the scene builder
(:mod:`contactflow.sim.mujoco_model`) turns it into geoms; SEIKO uses :meth:`Environment.distance`
to refuse enabling a contact far from any surface.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

import numpy as np

from contactflow.errors import ConfigError

__all__ = ["Box", "Environment", "load_environment"]


@dataclasses.dataclass(frozen=True)
class Box:
    """A static axis-aligned box.

    Attributes:
        name: geom name.
        center_m: (3,) centre in world [m].
        half_size_m: (3,) half sizes along world x, y, z [m] (> 0).
    """

    name: str
    center_m: tuple[float, float, float]
    half_size_m: tuple[float, float, float]

    def distance(self, p_W: np.ndarray) -> float:
        """Euclidean distance [m] from world point ``p_W`` (3,) to the box (0 inside)."""
        d = np.abs(np.asarray(p_W, float) - np.asarray(self.center_m)) - np.asarray(self.half_size_m)
        return float(np.linalg.norm(np.maximum(d, 0.0)))


@dataclasses.dataclass(frozen=True)
class Environment:
    """Floor (plane z = 0) plus static boxes; effector collision radii; FT-sensor frames.

    Attributes:
        boxes: static boxes.
        hand_radius_m: frame name -> radius of the effector's collision sphere [m].
        ft_sensor_frames: frames with a simulated wrist force/torque sensor.
        floor: whether the floor z = 0 counts as a surface.
        force_joints: frame name -> joints whose torques give its contact force (§6.7).
        cone: MuJoCo friction cone of the scene (``elliptic``/``pyramidal``), None = robot file's.
        impratio: MuJoCo friction-to-normal impedance ratio, None = robot file's. With a
            pyramidal cone and impratio 1 (the Talos file's before issue 16; it now uses elliptic,
            10 and a noslip pass everywhere), the soft foot contacts creep in yaw under
            a sustained torsional load (a 20 N m yaw torque on the pelvis turns the standing robot
            by 0.23 rad in 3 s; elliptic + impratio 10: 0.017 rad), which a one-handed wall push
            produces; the multi-contact scene therefore uses elliptic cones with impratio 10.
        foot_solref: (time constant [s], damping ratio) of the sole and hand-sphere contacts in
            this scene, None = robot file's (0.02, 1). The default soft soles add a compliance that the
            SEIKO flexibility model does not have: in single support (foot lift) the robot then
            tips over the stance foot's inner edge (roll 0.05 -> 0.2 rad in 2 s); with 0.005 it
            stays within 0.05 rad.
    """

    boxes: tuple[Box, ...] = ()
    hand_radius_m: Mapping[str, float] = dataclasses.field(default_factory=dict)
    ft_sensor_frames: tuple[str, ...] = ()
    floor: bool = True
    force_joints: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    cone: str | None = None
    impratio: float | None = None
    foot_solref: tuple[float, float] | None = None

    def distance(self, p_W: np.ndarray, frame: str | None = None) -> float:
        """Distance [m] from the surface of the effector on ``frame`` (sphere of
        ``hand_radius_m[frame]``, a point otherwise) at ``p_W`` (3,) to the nearest surface."""
        p = np.asarray(p_W, float)
        ds = [b.distance(p) for b in self.boxes]
        if self.floor:
            ds.append(max(0.0, float(p[2])))
        if not ds:
            return math.inf
        return max(0.0, min(ds) - float(self.hand_radius_m.get(frame, 0.0)))


def _vec3(v: Any, where: str) -> tuple[float, float, float]:
    try:
        a = tuple(float(x) for x in v)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: expected 3 numbers, got {v!r}") from None
    if len(a) != 3 or not all(math.isfinite(x) for x in a):
        raise ConfigError(f"{where}: expected 3 finite numbers, got {v!r}")
    return a  # type: ignore[return-value]


def load_environment(raw: Mapping[str, Any] | None, source: str = "environment") -> Environment:
    """Build an :class:`Environment` from the ``environment:`` mapping of a robot file.

    Raises:
        ConfigError: unknown key, malformed vector, non-positive size or radius.
    """
    if raw is None:
        return Environment()
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{source}: expected a mapping")
    unknown = set(raw) - {"boxes", "hand_geoms", "ft_sensors", "floor", "force_from_joint_torques", "cone", "impratio",
                            "foot_solref"}
    if unknown:
        raise ConfigError(f"{source}: unknown key(s) {sorted(unknown)}")
    boxes = []
    for i, b in enumerate(raw.get("boxes") or []):
        where = f"{source}.boxes[{i}]"
        if not isinstance(b, Mapping) or set(b) - {"name", "center_m", "half_size_m"} or "name" not in b:
            raise ConfigError(f"{where}: expected {{name, center_m, half_size_m}}, got {b!r}")
        hs = _vec3(b.get("half_size_m"), where + ".half_size_m")
        if min(hs) <= 0:
            raise ConfigError(f"{where}.half_size_m: sizes must be > 0")
        boxes.append(Box(str(b["name"]), _vec3(b.get("center_m"), where + ".center_m"), hs))
    radii = {}
    for frame, g in (raw.get("hand_geoms") or {}).items():
        r = float((g or {}).get("radius_m", 0.0))
        if not r > 0:
            raise ConfigError(f"{source}.hand_geoms.{frame}.radius_m: expected > 0, got {r!r}")
        radii[str(frame)] = r
    fj = {}
    for frame, joints in (raw.get("force_from_joint_torques") or {}).items():
        if not isinstance(joints, list) or len(joints) < 3:
            raise ConfigError(f"{source}.force_from_joint_torques.{frame}: expected a list of >= 3 joint names")
        fj[str(frame)] = tuple(str(j) for j in joints)
    cone = raw.get("cone")
    if cone is not None and cone not in ("elliptic", "pyramidal"):
        raise ConfigError(f"{source}.cone: expected 'elliptic' or 'pyramidal', got {cone!r}")
    imp = raw.get("impratio")
    if imp is not None and not (isinstance(imp, (int, float)) and imp >= 1):
        raise ConfigError(f"{source}.impratio: expected a number >= 1, got {imp!r}")
    sr = raw.get("foot_solref")
    if sr is not None:
        if not (isinstance(sr, (list, tuple)) and len(sr) == 2 and all(isinstance(x, (int, float)) and x > 0 for x in sr)):
            raise ConfigError(f"{source}.foot_solref: expected [time constant s, damping ratio] > 0, got {sr!r}")
        sr = (float(sr[0]), float(sr[1]))
    return Environment(tuple(boxes), radii, tuple(str(f) for f in raw.get("ft_sensors") or ()),
                       bool(raw.get("floor", True)), fj, cone, None if imp is None else float(imp), sr)
