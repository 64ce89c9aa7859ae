"""Robot descriptions: ``robots/<name>/robot.yaml`` turned into a pinocchio model at run time.

A robot is data, not code. :func:`load_robot` reads the description, loads the URDF named there
(from example-robot-data), builds a free-flyer pinocchio model reduced to the listed actuated
joints (all other joints locked at 0 rad), adds the extra operational frames, and returns a
:class:`Robot` holding the per-joint parameters in model order.

Conventions (pinocchio): ``q`` is (7 + n,) = base position [m], base quaternion (x, y, z, w),
joint angles [rad]; ``v`` is (6 + n,) = base linear and angular velocity in the base frame, joint
velocities [rad/s].
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pinocchio as pin

from contactflow.config import did_you_mean, read_yaml
from contactflow.errors import ConfigError, ModelError
from contactflow.paths import ROBOT_PATH_ENV, robot_search_path, shipped_robots_dir

__all__ = ["ContactSpec", "Robot", "load_robot", "read_robot_file", "resolve_robot_file", "robot_search_path", "robots_dir",
           "resolve_package_path", "body_inertia", "urdf_mimic_joints"]


def robots_dir() -> Path:
    """The robot descriptions shipped with the package (``robots/`` of the checkout, installed as
    ``contactflow/robots``: :func:`contactflow.paths.shipped_robots_dir`)."""
    return shipped_robots_dir()


def resolve_package_path(package: str, path: str) -> Path:
    """Absolute path of ``path`` inside a data package.

    Only ``example-robot-data`` is known: its files live under ``<cmeel prefix>/share/example-robot-data``.

    Raises:
        ModelError: unknown package or missing file.
    """
    if package != "example-robot-data":
        raise ModelError(f"unknown URDF package {package!r}; expected 'example-robot-data'")
    candidates = []
    try:
        import cmeel  # noqa: F401  (cmeel.prefix lives beside it)
    except ImportError:
        pass
    import site
    import sys

    for sp in list(site.getsitepackages()) + [p for p in sys.path if p.endswith("site-packages")]:
        candidates.append(Path(sp) / "cmeel.prefix" / "share" / "example-robot-data" / path)
    for c in candidates:
        if c.exists():
            return c
    raise ModelError(
        f"{path} not found in example-robot-data (looked in {', '.join(str(c) for c in candidates[:2])}); "
        "install example-robot-data >= 4.1"
    )


@dataclasses.dataclass(frozen=True)
class ContactSpec:
    """An effector that can make contact.

    Attributes:
        name: effector name used on ports and in scenarios (``left_foot``, ``left_hand``...).
        frame: pinocchio frame name.
        frame_id: pinocchio frame index.
        type: ``"plane"`` (6-D wrench [f; tau] in the LOCAL frame) or ``"point"`` (3-D force in a
            world-fixed surface frame).
        enabled: contact state at reset.
    """

    name: str
    frame: str
    frame_id: int
    type: str
    enabled: bool

    @property
    def dim(self) -> int:
        """Wrench dimension: 6 for a plane contact, 3 for a point contact."""
        return 6 if self.type == "plane" else 3


@dataclasses.dataclass(frozen=True)
class Robot:
    """A loaded robot description.

    Attributes:
        name: robot name (directory under ``robots/``).
        directory: the robot's directory.
        urdf_path: absolute path of the URDF.
        model: pinocchio free-flyer model reduced to the actuated joints, with extra frames.
        joint_names: (n,) actuated joint names in model order.
        locked_joints: names of URDF joints locked at 0 rad.
        K: (n,) joint stiffness [N m/rad].
        q_min, q_max: (n,) joint position limits [rad] (robot limits, before SEIKO margins).
        v_max: (n,) joint velocity limits [rad/s].
        tau_max: (n,) joint effort limits [N m].
        position_margin: (n,) SEIKO position margin per joint [rad].
        theta_default: (n,) default joint posture [rad].
        q_default: (7 + n,) default configuration, base placed (and tilted, if the posture's
            soles are not level) so the soles lie flat on z = 0 with the left and right sole
            origins symmetric about the world origin in y.
        contacts: effector name -> ContactSpec, in file order.
        mass: total mass [kg].
        raw: the parsed YAML (for sections other components read: ``mujoco``...); for a variant
            file (``base:``), the base file's keys overridden by the variant's.
        actuation: ``"position"`` (joint position command ``theta_cmd``, Talos) or ``"pd"``
            (per-joint ``q_target``, ``kp``, ``kd``, ``tau_ff``, Unitree G1): the robot file's
            ``actuation`` key.
        armature: (n,) rotor armature per joint [kg m^2] (robot file ``actuators``; 0 if absent).
        kd: (n,) default PD damping per joint [N m s/rad] (robot file ``actuators``; 0 if absent).
            For a PD robot ``K`` is the default PD stiffness Kp.
        file: the robot file that was loaded.
        fall_height_m: base height below which a driver declares a fall [m] (robot file
            ``fall_height_m``; 0.6 if absent).
    """

    name: str
    directory: Path
    urdf_path: Path
    model: pin.Model
    joint_names: tuple[str, ...]
    locked_joints: tuple[str, ...]
    K: np.ndarray
    q_min: np.ndarray
    q_max: np.ndarray
    v_max: np.ndarray
    tau_max: np.ndarray
    position_margin: np.ndarray
    theta_default: np.ndarray
    q_default: np.ndarray
    contacts: dict[str, ContactSpec]
    mass: float
    raw: dict[str, Any]
    actuation: str = "position"
    armature: np.ndarray | None = None
    kd: np.ndarray | None = None
    file: Path | None = None
    fall_height_m: float = 0.6

    @property
    def n(self) -> int:
        """Number of actuated joints."""
        return len(self.joint_names)

    @property
    def nq(self) -> int:
        return self.model.nq

    @property
    def nv(self) -> int:
        return self.model.nv

    @property
    def weight(self) -> float:
        """Total weight m g [N] with g = |model.gravity|."""
        return self.mass * float(np.linalg.norm(self.model.gravity.linear))

    def frame_id(self, name: str) -> int:
        """pinocchio frame index of ``name``; raises ModelError if absent."""
        if not self.model.existFrame(name):
            raise ModelError(f"robot {self.name!r} has no frame {name!r}")
        return self.model.getFrameId(name)

    def contact(self, name: str) -> ContactSpec:
        """The ContactSpec of effector ``name``; raises ConfigError naming the known effectors."""
        try:
            return self.contacts[name]
        except KeyError:
            raise ConfigError(
                f"unknown effector {name!r} for robot {self.name!r}; expected one of {', '.join(self.contacts)}"
            ) from None

    def file_label(self) -> str:
        """Path of the robot file (for error messages)."""
        return str(self.file if self.file is not None else self.directory / "robot.yaml")

    def joint_index(self, names) -> np.ndarray:
        """Indices in ``joint_names`` of the joints ``names`` (mapping BY NAME).

        Raises:
            ModelError: some names are not actuated joints of this robot (all of them listed).
        """
        pos = {j: i for i, j in enumerate(self.joint_names)}
        missing = [n for n in names if n not in pos]
        if missing:
            raise ModelError(
                f"{self.file_label()}: joint(s) {missing} are not actuated joints of robot {self.name!r} "
                f"(expected names among {list(self.joint_names)})"
            )
        return np.array([pos[n] for n in names], dtype=int)


def resolve_robot_file(name_or_path: str | Path) -> Path:
    """The robot file of a robot name, folder or file (the order is :func:`load_robot`'s).

    Raises:
        ConfigError: no robot file found (the folders looked in named), or a name matching two variant files.
    """
    p = Path(name_or_path).expanduser()
    name = str(name_or_path)
    if p.suffix in (".yaml", ".yml") and p.is_file():
        return p
    if p.is_dir() and (p / "robot.yaml").is_file():
        return p / "robot.yaml"
    if p.suffix in (".yaml", ".yml") or p.name != name:  # a path (not a bare name) that holds no robot
        raise ConfigError(f"{name}: robot description not found (expected a robot name, a folder holding "
                          f"robot.yaml or a robot YAML file; from {Path.cwd()})")
    search = robot_search_path()
    for d in search:
        f = d / name / "robot.yaml"
        if f.is_file():
            return f
        # a variant file beside another robot's description: <folder>/*/<name>.yaml
        # (only robot files: a mapping with ``urdf:`` or ``base:``, not a robot's other YAML files)
        variants = [v for v in sorted(d.glob(f"*/{name}.yaml")) if _is_robot_file(v)]
        if len(variants) == 1:
            return variants[0]
        if len(variants) > 1:
            raise ConfigError(f"robot {name!r} is ambiguous: {[str(v) for v in variants]}")
    known = sorted({f.parent.name for d in search for f in d.glob("*/robot.yaml")})
    raise ConfigError(f"robot {name!r}: robot description not found (known: {', '.join(known) or 'none'}"
                      f"{did_you_mean([name], known)}; looked for {name}/robot.yaml and "
                      f"*/{name}.yaml in {', '.join(str(d) for d in search)}; ${ROBOT_PATH_ENV} or --robot-path "
                      "add folders, or give the robot's folder or robot.yaml path)")


def _is_robot_file(path: Path) -> bool:
    try:
        raw = read_yaml(path)
    except ConfigError:
        return False
    return isinstance(raw, dict) and ("urdf" in raw or "base" in raw)


def read_robot_file(path: Path, _seen: tuple = ()) -> dict:
    """Read a robot file, resolving ``base: <file>`` (a path relative to the file).

    A variant file holds ``base:`` and the top-level keys it changes: the base file's keys are
    taken first and each key of the variant replaces the base's key of the same name entirely
    (no deep merge). ``base`` chains are allowed; cycles are refused.

    Raises:
        ConfigError: unreadable file, non-mapping content, missing or cyclic base.
    """
    src = str(path)
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise ConfigError(f"{src}: expected a mapping at the top level")
    if "base" not in raw:
        return raw
    base = raw["base"]
    if not isinstance(base, str):
        raise ConfigError(f"{src}: key 'base' must be a file name relative to {path.parent} or a robot name")
    base_path = (path.parent / base).resolve()
    if not base_path.exists() and Path(base).name == base and not Path(base).suffix:
        base_path = resolve_robot_file(base).resolve()  # a robot name (``base: talos``): the search path
    if base_path in _seen or base_path == path.resolve():
        raise ConfigError(f"{src}: base: cyclic base files ({base})")
    if not base_path.exists():
        raise ConfigError(f"{src}: base: {base_path} not found")
    merged = dict(read_robot_file(base_path, _seen + (path.resolve(),)))
    merged.update({k: v for k, v in raw.items() if k != "base"})
    merged.setdefault("name", path.stem)
    return merged


def _need(d: dict, key: str, src: str, kind: type | tuple = object):
    if not isinstance(d, dict):
        raise ConfigError(f"{src}: expected a mapping, got {type(d).__name__}")
    if key not in d:
        raise ConfigError(f"{src}: missing key {key!r}")
    v = d[key]
    if not isinstance(v, kind):
        raise ConfigError(f"{src}: key {key!r} has the wrong type ({type(v).__name__})")
    return v


def _numbers(value: Any, n: int | None, where: str, what: str = "numbers") -> np.ndarray:
    """``value`` as a (n,) array of finite floats (``n`` None: one number, returned as a float array
    of shape ()); ConfigError ``<where>: expected ...`` otherwise (bools and text are not numbers)."""
    items = [value] if n is None else value
    if n is not None and not (isinstance(value, list) and len(value) == n):
        raise ConfigError(f"{where}: expected a list of {n} {what}, got {value!r}")
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and abs(x) < 1e300 and x == x for x in items):
        raise ConfigError(f"{where}: expected finite {what}, got {value!r}")
    out = np.array(items, dtype=float)
    return out[0] if n is None else out


def _mapping(raw: dict, key: str, src: str) -> dict:
    """The optional mapping ``raw[key]`` ({} when absent or null); ConfigError if it is something else."""
    v = raw.get(key)
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise ConfigError(f"{src}: {key}: expected a mapping, got {type(v).__name__}")
    return v


def _names(value: Any, where: str) -> list[str]:
    """A list of distinct strings (joint, link or frame names)."""
    if not (isinstance(value, list) and all(isinstance(x, str) for x in value)):
        raise ConfigError(f"{where}: expected a list of names, got {value!r}")
    dup = sorted({x for x in value if value.count(x) > 1})
    if dup:
        raise ConfigError(f"{where}: duplicate name(s) {dup}")
    return value


def urdf_mimic_joints(urdf_path: str | Path) -> dict[str, str]:
    """The URDF's mimic joints: ``{joint: mimicked joint}`` for every ``<joint>`` with a ``<mimic>``.

    Raises:
        ModelError: the file is not readable XML.
    """
    import xml.etree.ElementTree as ET

    try:
        root = ET.parse(str(urdf_path)).getroot()
    except (OSError, ET.ParseError) as exc:
        raise ModelError(f"{urdf_path}: not a readable URDF: {exc}") from None
    return {j.get("name"): m.get("joint") for j in root.iter("joint") if (m := j.find("mimic")) is not None}


def load_robot(name_or_path: str | Path = "talos") -> Robot:
    """Load a robot description and build its pinocchio model.

    Args:
        name_or_path: a robot folder (holding ``robot.yaml``), a robot YAML file, or a robot name:
            ``<name>/robot.yaml`` (else a variant file ``*/<name>.yaml``) in the folders of
            :func:`robot_search_path`: ``$CONTACTFLOW_ROBOT_PATH`` / ``--robot-path``, then the
            shipped robots. An unknown name is refused with the folders looked in.

    Optional key ``body_inertias: {<joint>: {mass_kg, com_m, inertia_kgm2}}`` replaces the
    inertia of the reduced model's body moved by ``<joint>`` (``root_joint``: the floating base;
    links welded by locked joints belong to their parent body): the inertial parameters a PRIME
    run identified (``contactflow prime apply``); see :func:`body_inertia` for the units and
    checks. The MuJoCo builder applies it too (:mod:`contactflow.sim.mujoco_model`).

    Returns:
        Robot.

    Raises:
        ConfigError: missing or malformed description (message names file and key).
        ModelError: URDF not found, unknown joint or frame, a listed joint that mimics another (URDF
            ``<mimic>``: it must stay locked).
    """
    path = resolve_robot_file(name_or_path)
    src = str(path)
    raw = read_robot_file(path)
    urdf = _need(raw, "urdf", src, dict)
    urdf_path = resolve_package_path(_need(urdf, "package", src + ":urdf", str), _need(urdf, "path", src + ":urdf", str))
    full = pin.buildModelFromUrdf(str(urdf_path), pin.JointModelFreeFlyer())

    joints = _names(_need(raw, "joints", src, list), f"{src}: joints")
    params = _need(raw, "joint_params", src, dict)
    mimic = urdf_mimic_joints(urdf_path)
    for j in joints:
        if not full.existJointName(j):
            raise ModelError(f"{src}: joints: {j!r} is not a joint of {urdf_path.name}")
        if j in mimic:
            raise ModelError(f"{src}: joints: {j!r} mimics {mimic[j]!r} in {urdf_path.name} (<mimic>); contactflow "
                             "models every listed joint as independent (pinocchio and MuJoCo would disagree): "
                             "leave it out of joints (locked)")
        if j not in params:
            raise ConfigError(f"{src}: joint_params: missing entry for {j!r}")
    # joint_params may hold rows of locked URDF joints (shared by variant files), never unknown names
    urdf_joints = set(full.names[2:])
    unknown = set(params) - urdf_joints
    if unknown:
        raise ConfigError(f"{src}: joint_params: unknown joint(s) {sorted(map(str, unknown))} (not joints of {urdf_path.name})")

    locked = [full.names[i] for i in range(2, full.njoints) if full.names[i] not in joints]
    locked_ids = [full.getJointId(n) for n in locked]
    model = pin.buildReducedModel(full, locked_ids, pin.neutral(full))

    names = tuple(model.names[i] for i in range(2, model.njoints))
    if set(names) != set(joints):
        raise ModelError(f"{src}: reduced model joints {names} differ from the listed joints")
    if list(names) != list(joints):
        raise ConfigError(f"{src}: joints must be listed in model order: {list(names)}")

    for fname, fr in _mapping(raw, "extra_frames", src).items():
        where = f"{src}: extra_frames.{fname}"
        if not isinstance(fname, str):
            raise ConfigError(f"{where}: expected a frame name, got {fname!r}")
        parent = _need(fr, "parent", where, str)
        if not model.existFrame(parent):
            raise ModelError(f"{where}: parent frame {parent!r} does not exist")
        if model.existFrame(fname):
            raise ConfigError(f"{where}: the model already has a frame {fname!r}")
        pf = model.getFrameId(parent)
        pfr = model.frames[pf]
        rpy = _numbers(fr.get("rpy", [0.0, 0.0, 0.0]), 3, f"{where}.rpy", "angles [rad]")
        translation = _numbers(_need(fr, "translation", where), 3, f"{where}.translation", "coordinates [m]")
        local = pin.SE3(pin.rpy.rpyToMatrix(*rpy), translation)
        model.addFrame(pin.Frame(fname, pfr.parentJoint, pf, pfr.placement * local, pin.FrameType.OP_FRAME))

    table = np.array([_numbers(params[j], 5, f"{src}: joint_params.{j}", "numbers [K, lower, upper, vel, effort]")
                      for j in joints], dtype=float).reshape(len(joints), 5)
    K, q_min, q_max, v_max, tau_max = table.T
    if np.any(K <= 0) or np.any(q_min >= q_max) or np.any(v_max <= 0) or np.any(tau_max <= 0):
        raise ConfigError(f"{src}: joint_params: need K > 0, lower < upper, vel > 0, effort > 0")
    margin = float(_numbers(raw.get("position_margin_rad", 0.0), None, f"{src}: position_margin_rad", "angle [rad]"))
    coef = _mapping(raw, "position_margin_coef", src)
    position_margin = np.array([margin * float(_numbers(coef.get(j, 1.0), None, f"{src}: position_margin_coef.{j}"))
                                for j in joints])
    if margin < 0 or np.any(position_margin < 0):
        raise ConfigError(f"{src}: position_margin_rad / position_margin_coef: expected margins >= 0")

    posture = _mapping(raw, "default_posture", src)
    bad = set(posture) - urdf_joints
    if bad:
        raise ConfigError(f"{src}: default_posture: unknown joint(s) {sorted(map(str, bad))}")
    theta = np.array([float(_numbers(posture.get(j, 0.0), None, f"{src}: default_posture.{j}", "angle [rad]"))
                      for j in joints])

    contacts = {}
    for cname, c in _need(raw, "contacts", src, dict).items():
        where = f"{src}: contacts.{cname}"
        if not isinstance(cname, str):
            raise ConfigError(f"{where}: expected an effector name, got {cname!r}")
        frame = _need(c, "frame", where, str)
        ctype = _need(c, "type", where, str)
        if ctype not in ("plane", "point"):
            raise ConfigError(f"{where}.type: expected 'plane' or 'point', got {ctype!r}")
        if not model.existFrame(frame):
            raise ModelError(f"{where}.frame: no frame {frame!r} in the model")
        enabled = c.get("enabled", False)
        if not isinstance(enabled, bool):
            raise ConfigError(f"{where}.enabled: expected true or false, got {enabled!r}")
        contacts[cname] = ContactSpec(cname, frame, model.getFrameId(frame), ctype, enabled)

    _apply_body_inertias(model, raw.get("body_inertias"), src)

    data = model.createData()
    q = pin.neutral(model)
    q[7:] = theta
    pin.framesForwardKinematics(model, data, q)
    soles = [c for c in contacts.values() if c.type == "plane" and c.enabled]
    if soles:
        # level the soles: tilt the base so the mean sole normal is vertical (the G1's default
        # posture pitches its feet by 6 mrad; Talos' is level, and is left untouched)
        n_W = np.mean([data.oMf[c.frame_id].rotation[:, 2] for c in soles], axis=0)
        n_W /= np.linalg.norm(n_W)
        axis = np.cross(n_W, [0.0, 0.0, 1.0])
        s = float(np.linalg.norm(axis))
        if s > 1e-12:
            R = pin.AngleAxis(float(np.arctan2(s, n_W[2])), axis / s).toRotationMatrix()
            q[3:7] = pin.Quaternion(R).coeffs()
            pin.framesForwardKinematics(model, data, q)
        z = np.mean([data.oMf[c.frame_id].translation[2] for c in soles])
        xy = np.mean([data.oMf[c.frame_id].translation[:2] for c in soles], axis=0)
        q[0:2] = -xy
        q[2] = -z
    mass = float(pin.computeTotalMass(model))
    actuation = raw.get("actuation", "position")
    if actuation not in ("position", "pd"):
        raise ConfigError(f"{src}: actuation: expected 'position' or 'pd', got {actuation!r}")
    armature, kd = _actuator_rows(raw.get("actuators"), joints, urdf_joints, src)
    fall = float(_numbers(raw.get("fall_height_m", 0.6), None, f"{src}: fall_height_m", "height [m]"))
    _check_contract_keys(raw, joints, src)
    name = raw.get("name", path.parent.name)
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{src}: name: expected the robot's name, got {name!r}")
    return Robot(
        name=name,
        directory=path.parent,
        urdf_path=urdf_path,
        model=model,
        joint_names=names,
        locked_joints=tuple(locked),
        K=K,
        q_min=q_min,
        q_max=q_max,
        v_max=v_max,
        tau_max=tau_max,
        position_margin=position_margin,
        theta_default=theta,
        q_default=q,
        contacts=contacts,
        mass=mass,
        raw=raw,
        actuation=actuation,
        armature=armature,
        kd=kd,
        file=path,
        fall_height_m=fall,
    )


def _check_contract_keys(raw: dict, joints: list[str], src: str) -> None:
    """The keys the port contracts read (:func:`contactflow.contracts.messages.port_specs`):
    ``control_rate_hz`` (> 0), ``teleop.arm_joints`` (actuated joints), ``wrench_links`` (names)."""
    if "control_rate_hz" in raw:
        rate = _numbers(raw["control_rate_hz"], None, f"{src}: control_rate_hz", "rate [Hz]")
        if rate <= 0:
            raise ConfigError(f"{src}: control_rate_hz: expected a rate > 0 Hz, got {raw['control_rate_hz']!r}")
    teleop = _mapping(raw, "teleop", src)
    arms = _names(teleop.get("arm_joints") or [], f"{src}: teleop.arm_joints")
    unknown = [j for j in arms if j not in joints]
    if unknown:
        raise ConfigError(f"{src}: teleop.arm_joints: {unknown} are not actuated joints of the robot")
    _names(raw.get("wrench_links") or [], f"{src}: wrench_links")


def _actuator_rows(section, joints, urdf_joints, src) -> tuple[np.ndarray, np.ndarray]:
    """(armature [kg m^2], kd [N m s/rad]) per actuated joint from ``actuators: {joint: [a, kd]}``."""
    n = len(joints)
    if section is None:
        return np.zeros(n), np.zeros(n)
    if not isinstance(section, dict):
        raise ConfigError(f"{src}: actuators: expected a mapping joint -> [armature_kgm2, kd_nms_per_rad]")
    unknown = set(section) - urdf_joints
    if unknown:
        raise ConfigError(f"{src}: actuators: unknown joint(s) {sorted(map(str, unknown))}")
    missing = [j for j in joints if j not in section]
    if missing:
        raise ConfigError(f"{src}: actuators: missing entries for {missing}")
    rows = []
    for j in joints:
        a, d = _numbers(section[j], 2, f"{src}: actuators.{j}", "numbers [armature_kgm2, kd_nms_per_rad]")
        if not (a >= 0 and d >= 0):
            raise ConfigError(f"{src}: actuators.{j}: armature and kd must be >= 0, got {section[j]!r}")
        rows.append((a, d))
    arr = np.array(rows, dtype=float)
    return arr[:, 0].copy(), arr[:, 1].copy()


def body_inertia(entry: Any, where: str) -> pin.Inertia:
    """A physically consistent spatial inertia from a robot file's ``body_inertias.<joint>`` entry.

    ``entry`` = ``{mass_kg: m, com_m: [x, y, z], inertia_kgm2: [xx, xy, yy, xz, yz, zz]}``: mass
    [kg] > 0, centre of mass [m] in the body (joint) frame, rotational inertia about the centre of
    mass [kg m^2] in the body frame's axes (pinocchio's order of the 6 components; a 3x3 nested
    list is accepted too). The inertia must be symmetric positive definite and satisfy the
    triangle inequalities (Wensing, Kim, Slotine, RA-L 2018: a body that exists).

    Raises:
        ConfigError: ``<where>.<key>: expected ...`` for a missing key, a wrong shape, a
            non-finite number or a physically inconsistent body.
    """
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected a mapping {{mass_kg, com_m, inertia_kgm2}}, got {entry!r}")
    unknown = sorted(map(str, set(entry) - {"mass_kg", "com_m", "inertia_kgm2"}))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; expected mass_kg, com_m, inertia_kgm2")
    mass = float(_numbers(_need(entry, "mass_kg", where), None, f"{where}.mass_kg", "mass [kg]"))
    if mass <= 0:
        raise ConfigError(f"{where}.mass_kg: expected a mass > 0 kg, got {entry['mass_kg']!r}")
    com = _numbers(_need(entry, "com_m", where), 3, f"{where}.com_m", "coordinates [m]")
    raw_i = _need(entry, "inertia_kgm2", where)
    if isinstance(raw_i, list) and len(raw_i) == 3 and all(isinstance(r, list) for r in raw_i):
        I = np.array([_numbers(r, 3, f"{where}.inertia_kgm2", "numbers [kg m^2]") for r in raw_i])
        if not np.allclose(I, I.T, rtol=0.0, atol=1e-12 * max(1.0, float(np.abs(I).max()))):
            raise ConfigError(f"{where}.inertia_kgm2: expected a symmetric 3x3 matrix, got {raw_i!r}")
        I = 0.5 * (I + I.T)
    else:
        xx, xy, yy, xz, yz, zz = _numbers(raw_i, 6, f"{where}.inertia_kgm2", "numbers [xx, xy, yy, xz, yz, zz] [kg m^2]")
        I = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
    ev = np.linalg.eigvalsh(I)
    if ev[0] <= 0 or 2.0 * ev.max() > ev.sum() * (1.0 + 1e-9):
        raise ConfigError(f"{where}.inertia_kgm2: not a physical rotational inertia (principal moments "
                          f"{ev.tolist()}: need all > 0 and each <= the sum of the other two)")
    return pin.Inertia(mass, com, I)


def _apply_body_inertias(model: pin.Model, section: Any, src: str) -> None:
    """Robot file ``body_inertias: {<joint>: {mass_kg, com_m, inertia_kgm2}}``: replace the
    inertia of the body moved by ``<joint>`` in the REDUCED model (``root_joint`` = the floating
    base; the links welded to a body by the locked joints are part of it), e.g. the inertial
    parameters identified by PRIME (``contactflow prime apply``). In place; see :func:`body_inertia`.

    Raises:
        ConfigError: not a mapping, a joint that is not a joint of the reduced model (a locked or
            unknown joint; the message lists the valid ones), or a bad entry.
    """
    if section is None:
        return
    if not isinstance(section, dict):
        raise ConfigError(f"{src}: body_inertias: expected a mapping joint -> {{mass_kg, com_m, inertia_kgm2}}")
    valid = [model.names[i] for i in range(1, model.njoints)]
    for joint, entry in section.items():
        if not isinstance(joint, str) or joint not in valid:
            raise ConfigError(f"{src}: body_inertias: {joint!r} is not a joint of the reduced model "
                              f"(expected one of {valid}; a locked joint's link belongs to its parent body)")
        model.inertias[model.getJointId(joint)] = body_inertia(entry, f"{src}: body_inertias.{joint}")
