"""G1 upper-body kinematics for LAC augmentation (pinocchio).

``LacRobot`` wraps the 23-DoF G1 :class:`~contactflow.robot.Robot` with the eleven upper-body
contact links of LAC (``lac_links`` in ``robots/g1/robot.yaml``): link j is the rigid body moved by
upper-body joint j, its frame is that joint's frame, its CoM is the CoM of that body in the reduced
model. It gives link CoM poses and world-aligned Jacobians, the passive-chain rotation of
LAC eqs. (4)-(5), and capsule distances for the self-collision gate.

Conventions: ``q`` (30,) pinocchio free-flyer configuration (quaternion x, y, z, w); ``v``/``dq``
(29,) tangent vectors (base linear and angular part in the base frame). Jacobians are (3, 29),
world-aligned (``pin.LOCAL_WORLD_ALIGNED``): rows map ``dq`` to a world-frame velocity.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pinocchio as pin

from contactflow.errors import ConfigError, ModelError
from contactflow.lac.config import GROUP_CHANNELS
from contactflow.robot import Robot, load_robot

__all__ = ["LacRobot", "UPPER_GROUPS", "link_com_local", "segment_distances"]

def link_com_local(robot: Robot, link: str) -> np.ndarray:
    """(3,) centre of mass of URDF link ``link`` in the link frame [m] (its ``<inertial><origin xyz>``).

    This is the point where MuJoCo's ``xfrc_applied`` acts on the link's body (links are bodies of
    their own in the simulator, ``fusestatic=false``), unlike the CoM of the reduced pinocchio
    model, which merges the bodies of locked joints (the G1-23 torso holds the head and the waist
    roll/pitch links; the hand link holds the locked wrist pitch/yaw and the rubber hand).

    Raises:
        ModelError: no such frame in the robot's pinocchio model or no such link in its URDF.
    """
    import xml.etree.ElementTree as ET

    if not robot.model.existFrame(link):
        raise ModelError(f"robot {robot.name!r} has no frame {link!r}")
    root = ET.parse(robot.urdf_path).getroot()
    for el in root.iter("link"):
        if el.get("name") == link:
            origin = el.find("inertial/origin")
            xyz = origin.get("xyz", "0 0 0") if origin is not None else "0 0 0"
            return np.array([float(x) for x in xyz.split()])
    raise ModelError(f"{robot.urdf_path}: no link {link!r}")


#: group name -> index into the 5-D stiffness command (linear, angular or None): the table of
#: :data:`contactflow.lac.config.STIFFNESS_CHANNELS`.
UPPER_GROUPS = GROUP_CHANNELS


def _skew(p: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -p[2], p[1]], [p[2], 0.0, -p[0]], [-p[1], p[0], 0.0]])


def segment_distances(a0, a1, b0, b1) -> np.ndarray:
    """Minimum distances between pairs of 3-D segments (vectorised).

    Args:
        a0, a1, b0, b1: (m, 3) segment end points [m].

    Returns:
        (m,) distances [m].
    """
    d1 = a1 - a0
    d2 = b1 - b0
    r = a0 - b0
    a = np.einsum("ij,ij->i", d1, d1)
    e = np.einsum("ij,ij->i", d2, d2)
    f = np.einsum("ij,ij->i", d2, r)
    c = np.einsum("ij,ij->i", d1, r)
    b = np.einsum("ij,ij->i", d1, d2)
    denom = a * e - b * b
    eps = 1e-12
    s = np.where(denom > eps, np.clip((b * f - c * e) / np.maximum(denom, eps), 0.0, 1.0), 0.0)
    t = (b * s + f) / np.maximum(e, eps)
    # clamp t, recompute s
    t_c = np.clip(t, 0.0, 1.0)
    s = np.where(t < 0.0, np.clip(-c / np.maximum(a, eps), 0.0, 1.0), s)
    s = np.where(t > 1.0, np.clip((b - c) / np.maximum(a, eps), 0.0, 1.0), s)
    p = a0 + d1 * s[:, None]
    q = b0 + d2 * t_c[:, None]
    return np.linalg.norm(p - q, axis=1)


@dataclasses.dataclass(frozen=True)
class _Capsule:
    joint_id: int
    p0: np.ndarray
    p1: np.ndarray
    radius: float


class LacRobot:
    """The G1 seen by the augmentation: upper-body links, stance, Jacobians.

    Args:
        robot: the loaded ``g1`` :class:`Robot` (``load_robot("g1")`` when None).

    Attributes:
        robot: the wrapped Robot. model: its pinocchio model.
        link_names: (11,) upper-body contact links, in upper-joint order.
        link_joint_ids: (11,) pinocchio joint index of each link.
        link_groups: (11,) ``"torso"``, ``"left"`` or ``"right"``.
        link_weights: (11,) synthetic sampling weights (normalised).
        upper_v: (11,) indices of the upper-body joints in ``v`` (waist yaw + 2 x 5 arm joints).
        leg_v: (12,) indices of the leg joints in ``v``.
        upper_q: (11,) indices of the upper-body joints in ``q``.
        q_stance: (12,) default leg angles [rad].
        q_upper_default: (11,) default upper-body angles [rad].
        q_lo, q_hi: (23,) model joint ranges [rad].

    Raises:
        ModelError / ConfigError: the robot file lacks ``lac_links`` or names unknown joints.
    """

    def __init__(self, robot: Robot | None = None):
        self.robot = robot if robot is not None else load_robot("g1")
        self.model = self.robot.model
        self.data = self.model.createData()
        self._fk_data = self.model.createData()
        raw = self.robot.raw
        links = raw.get("lac_links")
        if not isinstance(links, dict) or not links:
            raise ConfigError(f"{self.robot.file_label()}: missing 'lac_links'")
        m = self.model
        self.link_names = tuple(links)
        self.link_joint_ids = []
        self.link_groups = []
        weights = []
        caps = {}
        for name, spec in links.items():
            j = spec.get("joint")
            if not m.existJointName(j):
                raise ModelError(f"{self.robot.file_label()}: lac_links.{name}: unknown joint {j!r}")
            if spec.get("group") not in UPPER_GROUPS:
                raise ConfigError(f"{self.robot.file_label()}: lac_links.{name}.group must be one of {list(UPPER_GROUPS)}")
            jid = m.getJointId(j)
            self.link_joint_ids.append(jid)
            self.link_groups.append(spec["group"])
            weights.append(float(spec.get("weight", 1.0)))
            caps[name] = self._capsule(jid, spec.get("capsule"), f"lac_links.{name}")
        for name, spec in (raw.get("lac_collision_bodies") or {}).items():
            j = spec.get("joint")
            if not m.existJointName(j):
                raise ModelError(f"{self.robot.file_label()}: lac_collision_bodies.{name}: unknown joint {j!r}")
            caps[name] = self._capsule(m.getJointId(j), spec.get("capsule"), f"lac_collision_bodies.{name}")
        self.capsules = caps
        pairs = raw.get("lac_collision_pairs") or []
        for a, b in pairs:
            if a not in caps or b not in caps:
                raise ConfigError(f"{self.robot.file_label()}: lac_collision_pairs: unknown body in {[a, b]}")
        self.collision_pairs = tuple((a, b) for a, b in pairs)
        self.link_joint_ids = tuple(int(j) for j in self.link_joint_ids)
        self.link_groups = tuple(self.link_groups)
        w = np.array(weights)
        self.link_weights = w / w.sum()
        self.upper_v = np.array([m.joints[j].idx_v for j in self.link_joint_ids])
        self.upper_q = np.array([m.joints[j].idx_q for j in self.link_joint_ids])
        all_j = np.arange(6, m.nv)
        self.leg_v = np.array([i for i in all_j if i not in set(self.upper_v)])
        if len(self.upper_v) != 11 or len(self.leg_v) != 12:
            raise ModelError(f"{self.robot.file_label()}: expected 11 upper-body and 12 leg joints")
        self.q_stance = self.robot.q_default[7:][self.leg_v - 6].copy()
        self.q_upper_default = self.robot.q_default[7:][self.upper_v - 6].copy()
        self.q_lo = self.robot.q_min.copy()
        self.q_hi = self.robot.q_max.copy()
        self.link_com_local = np.array([m.inertias[j].lever.copy() for j in self.link_joint_ids])
        # joint axis in the joint frame (all revolute about x, y or z)
        axes = []
        for j in self.link_joint_ids:
            s = m.joints[j].shortname()
            axes.append({"JointModelRX": [1, 0, 0], "JointModelRY": [0, 1, 0], "JointModelRZ": [0, 0, 1]}.get(s))
            if axes[-1] is None:
                raise ModelError(f"LAC link joint {m.names[j]} is not a revolute X/Y/Z joint ({s})")
        self.link_axis_local = np.array(axes, float)
        # pairs as index arrays for the vectorised distance
        self._pa = [caps[a] for a, _ in self.collision_pairs]
        self._pb = [caps[b] for _, b in self.collision_pairs]
        order = [(c, "p0") for c in self._pa] + [(c, "p1") for c in self._pa] + [(c, "p0") for c in self._pb] + [
            (c, "p1") for c in self._pb
        ]
        self._cap_joints = sorted({c.joint_id for c, _ in order})
        slot = {j: k for k, j in enumerate(self._cap_joints)}
        self._cap_slot = np.array([slot[c.joint_id] for c, _ in order], dtype=int)
        self._cap_local = np.array([getattr(c, e) for c, e in order]).reshape(-1, 3)
        self._cap_r = np.array([c.radius for c in self._pa]) + np.array([c.radius for c in self._pb])

    def _capsule(self, jid: int, c, where: str) -> _Capsule:
        if not isinstance(c, list) or len(c) != 7:
            raise ConfigError(f"{self.robot.file_label()}: {where}.capsule: expected [p0 (3), p1 (3), radius]")
        c = np.asarray(c, float)
        return _Capsule(jid, c[:3], c[3:6], float(c[6]))

    # ------------------------------------------------------------------ indices
    def link_index(self, name: str) -> int:
        """Index of upper-body link ``name`` in :attr:`link_names`.

        Raises:
            ConfigError: unknown link (the message lists the known ones).
        """
        try:
            return self.link_names.index(name)
        except ValueError:
            raise ConfigError(f"unknown LAC contact link {name!r}; expected one of {', '.join(self.link_names)}") from None

    def reference_configuration(self, q_upper: np.ndarray, base_height: float, yaw: float = 0.0) -> np.ndarray:
        """Reference configuration: base at (0, 0, h), identity roll/pitch, legs at stance.

        Args:
            q_upper: (11,) upper-body angles [rad].
            base_height: pelvis height h_cmd [m].
            yaw: base yaw [rad].

        Returns:
            (30,) q.
        """
        q = self.robot.q_default.copy()
        q[0:3] = (0.0, 0.0, base_height)
        q[3:7] = (0.0, 0.0, np.sin(yaw / 2), np.cos(yaw / 2))
        q[7:][self.leg_v - 6] = self.q_stance
        q[7:][self.upper_v - 6] = q_upper
        return q

    # ------------------------------------------------------------------ kinematics
    def update(self, q: np.ndarray) -> None:
        """Forward kinematics and all joint Jacobians at ``q`` (30,) into the working data."""
        pin.computeJointJacobians(self.model, self.data, q)

    def applied_point_local(self, i: int) -> np.ndarray:
        """(3,) where the simulator applies an external force on link ``i``: the URDF link's own CoM
        (:func:`link_com_local`, where MuJoCo's ``xfrc_applied`` acts), in the frame of link ``i``'s
        joint (the one :meth:`point_world` takes) [m].

        Raises:
            ModelError: the link is not a URDF link of the robot.
        """
        name = self.link_names[i]
        c = link_com_local(self.robot, name)
        return self.model.frames[self.model.getFrameId(name)].placement.act(c)

    def link_pose(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """CoM position (3,) [m] and orientation (3, 3) of link ``i`` in world (after :meth:`update`)."""
        M = self.data.oMi[self.link_joint_ids[i]]
        return M.rotation @ self.link_com_local[i] + M.translation, M.rotation.copy()

    def point_world(self, i: int, p_local: np.ndarray) -> np.ndarray:
        """World position (3,) [m] of a point (3,) given in link ``i``'s frame (after :meth:`update`)."""
        return self.data.oMi[self.link_joint_ids[i]].act(np.asarray(p_local, float))

    def link_jacobians(self, i: int, p_W: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """World-aligned Jacobians of link ``i`` (after :meth:`update`).

        Args:
            i: link index.
            p_W: (3,) point on the link in world [m]; the link CoM when None.

        Returns:
            J_p (3, 29) translational Jacobian of the point, J_r (3, 29) rotational Jacobian.
        """
        jid = self.link_joint_ids[i]
        J = pin.getJointJacobian(self.model, self.data, jid, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
        if p_W is None:
            p_W = self.link_pose(i)[0]
        r = p_W - self.data.oMi[jid].translation
        Jp = J[:3] - _skew(r) @ J[3:]
        return Jp, J[3:].copy()

    def link_orientations_at(self, q: np.ndarray, links) -> list[np.ndarray]:
        """Orientations (3, 3) of ``links`` at configuration ``q`` (30,), on a scratch data (eq. (5))."""
        pin.forwardKinematics(self.model, self._fk_data, q)
        return [self._fk_data.oMi[self.link_joint_ids[i]].rotation.copy() for i in links]

    def link_poses_at(self, q: np.ndarray, links) -> list[tuple[np.ndarray, np.ndarray]]:
        """CoM positions (3,) [m] and orientations (3, 3) of ``links`` at ``q`` (eq. (1)), scratch data."""
        pin.forwardKinematics(self.model, self._fk_data, q)
        out = []
        for i in links:
            M = self._fk_data.oMi[self.link_joint_ids[i]]
            out.append((M.rotation @ self.link_com_local[i] + M.translation, M.rotation.copy()))
        return out

    def joint_axis_world(self, i: int, q: np.ndarray) -> np.ndarray:
        """Unit axis (3,) of link ``i``'s own joint in world at ``q`` (30,)."""
        pin.forwardKinematics(self.model, self._fk_data, q)
        return self._fk_data.oMi[self.link_joint_ids[i]].rotation @ self.link_axis_local[i]

    def min_collision_distance(self, q: np.ndarray | None = None) -> tuple[float, tuple[str, str]]:
        """Smallest capsule-capsule distance over the gate's pairs.

        Args:
            q: (30,) configuration; the working data (after :meth:`update`) when None.

        Returns:
            (distance [m] (negative = penetration), the closest pair of names).
        """
        data = self.data
        if q is not None:
            pin.forwardKinematics(self.model, self._fk_data, q)
            data = self._fk_data
        if not self._pa:
            return float("inf"), ("", "")
        R = np.empty((len(self._cap_joints), 3, 3))
        t = np.empty((len(self._cap_joints), 3))
        for k, j in enumerate(self._cap_joints):
            M = data.oMi[j]
            R[k] = M.rotation
            t[k] = M.translation
        ends = np.einsum("kij,kj->ki", R[self._cap_slot], self._cap_local) + t[self._cap_slot]
        n = len(self._pa)
        a0, a1, b0, b1 = ends[0:n], ends[n:2 * n], ends[2 * n:3 * n], ends[3 * n:4 * n]
        d = segment_distances(a0, a1, b0, b1) - self._cap_r
        k = int(np.argmin(d))
        return float(d[k]), self.collision_pairs[k]

    def surface_point(self, i: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """A random point on link ``i``'s capsule surface and the inward unit normal, in the link frame.

        Args:
            i: link index.
            rng: random generator.

        Returns:
            p (3,) [m], n (3,) inward unit normal.
        """
        c = self.capsules[self.link_names[i]]
        axis = c.p1 - c.p0
        L = float(np.linalg.norm(axis))
        # area-weighted choice between the cylinder and the two hemispheres
        cyl = 2 * np.pi * c.radius * L
        sph = 4 * np.pi * c.radius**2
        u = rng.uniform(0.0, cyl + sph)
        d = rng.normal(size=3)
        d /= np.linalg.norm(d)
        if u < cyl and L > 0:
            a = axis / L
            d = d - a * (d @ a)
            nd = np.linalg.norm(d)
            d = d / nd if nd > 1e-9 else np.cross(a, [1.0, 0.0, 0.0]) / max(np.linalg.norm(np.cross(a, [1.0, 0.0, 0.0])), 1e-9)
            centre = c.p0 + axis * rng.uniform()
        else:
            ahat = axis / L if L > 0 else np.array([0.0, 0.0, 1.0])
            centre = c.p1 if d @ ahat >= 0 else c.p0
        return centre + c.radius * d, -d
