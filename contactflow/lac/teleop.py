"""Teleoperation commands of the LAC pipeline: scenario files, a player, and a live command state.

The ``teleop_command`` contract (:mod:`contactflow.contracts.messages`) carries what LAC's deploy interface
reads from its operator (lac.md §1.1): the base velocity ``lin_vel`` [vx, vy] (yaw / heading
frame) [m/s] and yaw rate ``ang_vel`` [rad/s], the base (pelvis) height [m], the waist yaw [rad], the
arm joint references ``q_ref_arms`` (robot file ``teleop.arm_joints`` order) [rad] and the RAW 5-D
stiffness ``[K_lin_left_arm, K_lin_right_arm, K_lin_torso`` [N/m] ``, K_ang_left_arm,
K_ang_right_arm]`` [N m/rad].

Three sources produce it:

* :class:`TeleopPlayer` plays a scenario file (the ``teleop`` node);
* :class:`LiveTeleop` holds a command state that a program changes at run time (thread-safe, the
  same limits), with :class:`TeleopKeyboard` mapping terminal keys to it
  (``examples/live_teleop.py``, a dynamic dora node).

Limits and defaults are robot/policy data (:class:`TeleopConfig`, ``robots/<robot>/teleop.yaml``
section ``teleop``): LAC's ranges are K in [10, 500] N/m, K_theta in [10, 100] N m/rad, base height
in [0.56, 0.78] m and |v| <= 0.5 m/s (lac.md §1.1). Waist-yaw and arm references must lie in the
robot's joint limits.

Scenario file format (``robots/<robot>/scenarios/*.yaml``)::

    description: free text                       # optional
    duration_s: 12.0                             # optional; default: last entry's end + tail_s
    tail_s: 1.0                                  # optional, default 1.0 [s]
    velocity:                                    # base velocity on [start_s, end_s); zero elsewhere
      - {start_s: 2.0, end_s: 8.0, lin_vel_mps: [0.5, 0.0], ang_vel_radps: 0.0}   # either may be omitted
    posture:                                     # set-points held until changed; each field blends
      - {t_s: 1.0, ramp_s: 1.0,                  # linearly from its current value over ramp_s [s]
         base_height_m: 0.74, waist_yaw_rad: 0.2, arms: {left_elbow_joint: 0.9}}  # any subset
    stiffness:                                   # set-points (LAC layout), held; ramp_s optional
      - {t_s: 0.0, lin_n_per_m: [70, 70, 70], ang_nm_per_rad: [30, 30]}
    wrenches:                                    # external wrench events: contactflow.lac.wrench_injector
      - {link: left_wrist_roll_link, start_s: 3.0, ramp_s: 0.5, hold_s: 3.0, release_s: 0.5, force_n: [10, 0, 0]}

Until the first set-point, a field holds its default: the config's ``base_height_default_m``,
the robot's default posture for the waist yaw and the arms, the config's ``stiffness_default``.
Everything is validated before the first tick; every error is a :class:`ConfigError` naming the
file, the key path and the reason.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from contactflow.config import load_config, load_file_format, read_yaml
from contactflow.errors import ConfigError, ContractError
from contactflow.lac.config import K_ANG_RANGE, K_LIN_RANGE, STIFFNESS_CHANNELS, STIFFNESS_NAMES, stiffness_problem
from contactflow.lac.wrench_injector import WrenchEvent, parse_wrench_events

__all__ = [
    "TeleopConfig",
    "TeleopCommand",
    "TeleopScenario",
    "TeleopPlayer",
    "LiveTeleop",
    "TeleopKeyboard",
    "VelocitySegment",
    "SetPoint",
    "load_teleop_scenario",
    "load_teleop_config",
    "arm_joints",
    "default_command",
    "STIFFNESS_FIELDS",
]

#: Names of the 5 stiffness channels, LAC layout (lac.md §1.1): ``contactflow.lac.config.STIFFNESS_NAMES``.
STIFFNESS_FIELDS = STIFFNESS_NAMES


@dataclasses.dataclass(frozen=True, kw_only=True)
class TeleopConfig:
    """Limits and defaults of the teleop command (``robots/<robot>/teleop.yaml``, section ``teleop``).

    Attributes:
        max_lin_vel_mps: bound on the planar speed |[vx, vy]| [m/s] (LAC: 0.5).
        max_ang_vel_radps: bound on |yaw rate| [rad/s].
        base_height_range_m: [min, max] base height command [m] (LAC: [0.56, 0.78]).
        base_height_default_m: base height before any set-point [m] (LAC's teleop default 0.74,
            lac.md §1.1; LAC's policy default is 0.78); also the base height of
            :func:`contactflow.lac.compliance.stand_command`. ``None`` = the base height of the
            robot's default posture (``robot.q_default[2]``, feet flat on the ground; G1 0.756 m),
            clamped to the range.
        stiffness_lin_range_n_per_m: [min, max] of K_lin [N/m] (LAC: [10, 500]).
        stiffness_ang_range_nm_per_rad: [min, max] of K_ang [N m/rad] (LAC: [10, 100]).
            These two ranges are the robot's one set of stiffness limits: the teleop validates and
            clamps with them and ``lac_expert`` refuses a command outside them.
        stiffness_default: the 5-D stiffness before any set-point, LAC layout (LAC demo boot:
            [70, 70, 70, 30, 30]).
    """

    max_lin_vel_mps: float = 0.5
    max_ang_vel_radps: float = 1.0
    base_height_range_m: tuple[float, float] = (0.56, 0.78)
    base_height_default_m: float | None = 0.74
    stiffness_lin_range_n_per_m: tuple[float, float] = K_LIN_RANGE
    stiffness_ang_range_nm_per_rad: tuple[float, float] = K_ANG_RANGE
    stiffness_default: tuple[float, float, float, float, float] = (70.0, 70.0, 70.0, 30.0, 30.0)

    def __post_init__(self):
        if not (self.max_lin_vel_mps >= 0.0 and self.max_ang_vel_radps >= 0.0):
            raise ConfigError("max_lin_vel_mps and max_ang_vel_radps must be >= 0")
        for name in ("base_height_range_m", "stiffness_lin_range_n_per_m", "stiffness_ang_range_nm_per_rad"):
            lo, hi = getattr(self, name)
            if not (0.0 < lo <= hi):
                raise ConfigError(f"{name}: expected 0 < min <= max, got [{lo}, {hi}]")
        lo, hi = self.base_height_range_m
        if self.base_height_default_m is not None and not lo <= self.base_height_default_m <= hi:
            raise ConfigError(f"base_height_default_m: {self.base_height_default_m} outside base_height_range_m [{lo}, {hi}]")
        bad = _stiffness_problem(np.asarray(self.stiffness_default), self)
        if bad:
            raise ConfigError(f"stiffness_default: {bad}")

    def clamp_stiffness(self, k) -> np.ndarray:
        """(5,) stiffness clamped to the ranges (LAC layout)."""
        k = np.asarray(k, dtype=float).copy()
        lin = np.array([kind == "lin" for _, _, kind in STIFFNESS_CHANNELS])
        k[lin] = np.clip(k[lin], *self.stiffness_lin_range_n_per_m)
        k[~lin] = np.clip(k[~lin], *self.stiffness_ang_range_nm_per_rad)
        return k


def _stiffness_problem(k: np.ndarray, cfg: TeleopConfig) -> str | None:
    return stiffness_problem(k, cfg.stiffness_lin_range_n_per_m, cfg.stiffness_ang_range_nm_per_rad)


def load_teleop_config(robot: Any, path: str | Path | None = None) -> TeleopConfig:
    """The teleop limits of ``robot``: section ``teleop`` of ``path``, else of
    ``<robot dir>/teleop.yaml`` when it exists, else the :class:`TeleopConfig` defaults.

    Raises:
        ConfigError: unreadable file, no ``teleop`` section, unknown key, bad value (file and key named).
    """
    if path is None:
        default = Path(robot.directory) / "teleop.yaml"
        if not default.exists():
            return TeleopConfig()
        path = default
    data = read_yaml(path)
    if not isinstance(data, Mapping) or "teleop" not in data:
        raise ConfigError(f"{path}: expected a 'teleop:' section with the teleop limits")
    return load_config(TeleopConfig, data["teleop"], source=f"{path}:teleop")


def arm_joints(robot: Any) -> tuple[str, ...]:
    """The robot file's ``teleop.arm_joints`` (order of ``q_ref_arms``).

    Raises:
        ConfigError: a name that is not an actuated joint of the robot (the joints are listed).
    """
    raw = robot.raw if isinstance(getattr(robot, "raw", None), dict) else {}
    names = tuple((raw.get("teleop") or {}).get("arm_joints") or ())
    unknown = [j for j in names if j not in robot.joint_names]
    if unknown:
        raise ConfigError(f"robot {robot.name!r}: teleop.arm_joints {unknown} are not actuated joints; "
                          f"joints: {', '.join(robot.joint_names)}")
    return names


# ---- scenario file schema -------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, kw_only=True)
class _ScenarioFile:
    description: str = ""
    duration_s: float | None = None
    tail_s: float = 1.0
    velocity: list[Any] = dataclasses.field(default_factory=list)
    posture: list[Any] = dataclasses.field(default_factory=list)
    stiffness: list[Any] = dataclasses.field(default_factory=list)
    wrenches: list[Any] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class _VelocityFile:
    start_s: float
    end_s: float
    lin_vel_mps: tuple[float, float] = (0.0, 0.0)
    ang_vel_radps: float = 0.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class _PostureFile:
    t_s: float
    ramp_s: float = 0.0
    base_height_m: float | None = None
    waist_yaw_rad: float | None = None
    arms: dict[str, float] | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class _StiffnessFile:
    t_s: float
    ramp_s: float = 0.0
    lin_n_per_m: tuple[float, float, float]
    ang_nm_per_rad: tuple[float, float]


@dataclasses.dataclass(frozen=True)
class VelocitySegment:
    """Base velocity on ``[start_s, end_s)``: ``lin_vel`` (2,) yaw frame [m/s], ``ang_vel`` [rad/s]."""

    start_s: float
    end_s: float
    lin_vel: np.ndarray
    ang_vel: float
    index: int


@dataclasses.dataclass(frozen=True)
class SetPoint:
    """A set-point of one command channel: from ``t_s`` the value blends linearly from the current
    value to ``value`` over ``ramp_s`` [s], then holds."""

    t_s: float
    ramp_s: float
    value: np.ndarray


@dataclasses.dataclass(frozen=True)
class TeleopScenario:
    """A validated teleop scenario.

    Attributes:
        path: the file. description: free text. duration_s: end [s]. tail_s: [s].
        velocity: base velocity segments, sorted by start.
        channels: channel name (``base_height``, ``waist_yaw``, ``q_ref_arms``, ``stiffness``) ->
            set-points sorted by time.
        defaults: channel name -> value before the first set-point.
        wrenches: external wrench events (:mod:`contactflow.lac.wrench_injector`).
        arm_joints: joint order of ``q_ref_arms``.
        config: the limits it was validated against.
    """

    path: Path
    description: str
    duration_s: float
    tail_s: float
    velocity: tuple[VelocitySegment, ...]
    channels: dict[str, tuple[SetPoint, ...]]
    defaults: dict[str, np.ndarray]
    wrenches: tuple[WrenchEvent, ...]
    arm_joints: tuple[str, ...]
    config: TeleopConfig


@dataclasses.dataclass(frozen=True)
class TeleopCommand:
    """The teleop command at one instant (the ``teleop_command`` fields, SI units).

    Attributes:
        t: time [s]. lin_vel: (2,) [vx, vy] yaw frame [m/s]. ang_vel: yaw rate [rad/s].
        base_height: [m]. waist_yaw: [rad]. q_ref_arms: (n_arm,) [rad].
        stiffness: (5,) LAC layout [N/m, N m/rad]. finished: the scenario has ended.
    """

    t: float
    lin_vel: np.ndarray
    ang_vel: float
    base_height: float
    waist_yaw: float
    q_ref_arms: np.ndarray
    stiffness: np.ndarray
    finished: bool = False

    def values(self) -> dict[str, np.ndarray]:
        """The ``teleop_command`` contract fields."""
        return {"lin_vel": self.lin_vel, "ang_vel": np.array([self.ang_vel]),
                "base_height": np.array([self.base_height]), "waist_yaw": np.array([self.waist_yaw]),
                "q_ref_arms": self.q_ref_arms, "stiffness": self.stiffness}


def _joint_range(robot: Any, name: str) -> tuple[float, float]:
    i = robot.joint_names.index(name)
    return float(robot.q_min[i]), float(robot.q_max[i])


def default_command(robot: Any, config: TeleopConfig | None = None) -> dict[str, np.ndarray]:
    """The ``teleop_command`` before any set-point: zero base velocity and the defaults.

    Args:
        robot: the robot (``teleop.arm_joints``, default posture).
        config: the teleop limits and defaults; ``None`` = the robot's (:func:`load_teleop_config`).

    Returns:
        ``lin_vel`` (2,) [m/s], ``ang_vel`` (1,) [rad/s] (zeros), ``base_height`` (1,) [m] (the
        config's ``base_height_default_m``), ``waist_yaw`` (1,) [rad] and ``q_ref_arms`` [rad] (the
        robot's default posture), ``stiffness`` (5,) (the config's ``stiffness_default``).
    """
    cfg = load_teleop_config(robot) if config is None else config
    return {"lin_vel": np.zeros(2), "ang_vel": np.zeros(1), **_defaults(robot, cfg, arm_joints(robot))}


def _defaults(robot: Any, cfg: TeleopConfig, arms: tuple[str, ...]) -> dict[str, np.ndarray]:
    theta = np.asarray(robot.theta_default, dtype=float)
    names = list(robot.joint_names)
    waist = float(theta[names.index("waist_yaw_joint")]) if "waist_yaw_joint" in names else 0.0
    h = cfg.base_height_default_m
    if h is None:
        h = float(np.clip(robot.q_default[2], *cfg.base_height_range_m))
    return {
        "base_height": np.array([h]),
        "waist_yaw": np.array([waist]),
        "q_ref_arms": np.array([theta[names.index(j)] for j in arms], dtype=float),
        "stiffness": np.array(cfg.stiffness_default, dtype=float),
    }


def load_teleop_scenario(path: str | Path, robot: Any, config: TeleopConfig | None = None) -> TeleopScenario:
    """Load and validate a teleop scenario file (format in the module docstring).

    Args:
        path: a YAML file, or a bare name looked up in ``<robot dir>/scenarios/``.
        robot: the :class:`contactflow.robot.Robot` it commands (arm joints, joint limits, wrench links).
        config: limits (default: :func:`load_teleop_config` of the robot).

    Returns:
        TeleopScenario.

    Raises:
        ConfigError: file missing or not YAML; unknown or missing key; wrong type or vector length;
            non-finite number; negative or reversed times; overlapping velocity segments; a speed,
            yaw rate, base height or stiffness outside the limits; an unknown arm joint or a
            reference outside its joint limits; set-points out of time order or starting inside
            the previous one's ramp; ``duration_s`` before the last entry; a bad wrench event.
            The message names the file, the key path and the reason.
    """
    cfg = config if config is not None else load_teleop_config(robot)
    path = Path(path)
    if not path.suffix and not path.exists():
        path = Path(robot.directory) / "scenarios" / f"{path}.yaml"
    src = str(path)
    raw = read_yaml(path)
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{src}: expected a mapping at the top level, got {type(raw).__name__}")
    from contactflow.operator.scenario import _ScenarioFile as _OperatorScenarioFile

    top = load_file_format(_ScenarioFile, raw, src, _OperatorScenarioFile,
                           "an operator scenario of SEIKO (the Talos', robots/talos/scenarios/), not a teleop "
                           "scenario of the LAC pipeline (robots/g1/scenarios/)")
    arms = arm_joints(robot)
    last = 0.0

    velocity = []
    for i, entry in enumerate(top.velocity):
        where = f"{src}: velocity[{i}]"
        v = load_config(_VelocityFile, entry, source=where)
        if not v.start_s >= 0.0:
            raise ConfigError(f"{where}.start_s: expected a time >= 0 s, got {v.start_s!r}")
        if not v.end_s > v.start_s:
            raise ConfigError(f"{where}.end_s: expected end_s > start_s = {v.start_s!r}, got {v.end_s!r}")
        speed = math.hypot(*v.lin_vel_mps)
        if speed > cfg.max_lin_vel_mps + 1e-12:
            raise ConfigError(f"{where}.lin_vel_mps: planar speed {speed:.3g} m/s above the limit "
                              f"max_lin_vel_mps = {cfg.max_lin_vel_mps:g} m/s")
        if abs(v.ang_vel_radps) > cfg.max_ang_vel_radps + 1e-12:
            raise ConfigError(f"{where}.ang_vel_radps: |{v.ang_vel_radps:g}| rad/s above the limit "
                              f"max_ang_vel_radps = {cfg.max_ang_vel_radps:g} rad/s")
        lin = np.array(v.lin_vel_mps, dtype=float)
        lin.setflags(write=False)
        velocity.append(VelocitySegment(v.start_s, v.end_s, lin, float(v.ang_vel_radps), i))
        last = max(last, v.end_s)
    velocity.sort(key=lambda s: s.start_s)
    for a, b in zip(velocity, velocity[1:]):
        if b.start_s < a.end_s:
            raise ConfigError(f"{src}: velocity[{b.index}]: overlaps velocity[{a.index}] "
                              f"([{b.start_s}, {b.end_s}) s and [{a.start_s}, {a.end_s}) s)")

    channels: dict[str, list[SetPoint]] = {"base_height": [], "waist_yaw": [], "q_ref_arms": [], "stiffness": []}
    defaults = _defaults(robot, cfg, arms)
    arm_current = defaults["q_ref_arms"].copy()
    prev_end = None
    for i, entry in enumerate(top.posture):
        where = f"{src}: posture[{i}]"
        p = load_config(_PostureFile, entry, source=where)
        prev_end = _check_time(p.t_s, p.ramp_s, prev_end, where, "posture")
        if p.base_height_m is None and p.waist_yaw_rad is None and not p.arms:
            raise ConfigError(f"{where}: sets nothing (give base_height_m, waist_yaw_rad and/or arms)")
        if p.base_height_m is not None:
            lo, hi = cfg.base_height_range_m
            if not lo <= p.base_height_m <= hi:
                raise ConfigError(f"{where}.base_height_m: {p.base_height_m!r} m outside base_height_range_m [{lo:g}, {hi:g}] m")
            channels["base_height"].append(SetPoint(p.t_s, p.ramp_s, np.array([p.base_height_m])))
        if p.waist_yaw_rad is not None:
            if "waist_yaw_joint" not in robot.joint_names:
                raise ConfigError(f"{where}.waist_yaw_rad: robot {robot.name!r} has no waist_yaw_joint")
            lo, hi = _joint_range(robot, "waist_yaw_joint")
            if not lo <= p.waist_yaw_rad <= hi:
                raise ConfigError(f"{where}.waist_yaw_rad: {p.waist_yaw_rad!r} rad outside the joint limits [{lo:g}, {hi:g}] rad")
            channels["waist_yaw"].append(SetPoint(p.t_s, p.ramp_s, np.array([p.waist_yaw_rad])))
        if p.arms:
            for j, val in p.arms.items():
                if j not in arms:
                    raise ConfigError(f"{where}.arms.{j}: not an arm joint of robot {robot.name!r}; "
                                      f"arm joints (teleop.arm_joints): {', '.join(arms)}")
                lo, hi = _joint_range(robot, j)
                if not lo <= val <= hi:
                    raise ConfigError(f"{where}.arms.{j}: {val!r} rad outside the joint limits [{lo:g}, {hi:g}] rad")
                arm_current[arms.index(j)] = val
            channels["q_ref_arms"].append(SetPoint(p.t_s, p.ramp_s, arm_current.copy()))
        last = max(last, p.t_s + p.ramp_s)

    prev_end = None
    for i, entry in enumerate(top.stiffness):
        where = f"{src}: stiffness[{i}]"
        s = load_config(_StiffnessFile, entry, source=where)
        prev_end = _check_time(s.t_s, s.ramp_s, prev_end, where, "stiffness")
        k = np.array(s.lin_n_per_m + s.ang_nm_per_rad, dtype=float)
        bad = _stiffness_problem(k, cfg)
        if bad:
            raise ConfigError(f"{where}: {bad} (limits: robot teleop config)")
        channels["stiffness"].append(SetPoint(s.t_s, s.ramp_s, k))
        last = max(last, s.t_s + s.ramp_s)

    if not top.tail_s >= 0.0:
        raise ConfigError(f"{src}: tail_s: expected a time >= 0 s, got {top.tail_s!r}")
    if top.duration_s is None:
        wrenches = parse_wrench_events(top.wrenches, robot, src)
        last = max([last] + [e.end_s for e in wrenches])
        if not (velocity or top.posture or top.stiffness or wrenches):
            raise ConfigError(f"{src}: duration_s: the scenario is empty (no entries and no duration_s)")
        duration = last + top.tail_s
    else:
        duration = float(top.duration_s)
        if not duration > 0.0:
            raise ConfigError(f"{src}: duration_s: expected a time > 0 s, got {duration!r}")
        wrenches = parse_wrench_events(top.wrenches, robot, src, duration)
        if duration < last - 1e-9:
            raise ConfigError(f"{src}: duration_s: {duration:g} s ends before the last velocity, posture or "
                              f"stiffness entry ({last:g} s)")
    for d in defaults.values():
        d.setflags(write=False)
    return TeleopScenario(
        path=path, description=top.description, duration_s=duration, tail_s=float(top.tail_s),
        velocity=tuple(velocity), channels={k: tuple(v) for k, v in channels.items()}, defaults=defaults,
        wrenches=wrenches, arm_joints=arms, config=cfg,
    )


def _check_time(t_s: float, ramp_s: float, prev_end: float | None, where: str, key: str) -> float:
    if not t_s >= 0.0:
        raise ConfigError(f"{where}.t_s: expected a time >= 0 s, got {t_s!r}")
    if not ramp_s >= 0.0:
        raise ConfigError(f"{where}.ramp_s: expected a duration >= 0 s, got {ramp_s!r}")
    if prev_end is not None and t_s < prev_end - 1e-12:
        raise ConfigError(f"{where}.t_s: {t_s!r} s is before the end of the previous {key} entry "
                          f"(its t_s + ramp_s = {prev_end!r} s); entries must be in time order without overlap")
    return t_s + ramp_s


def _channel_value(points: Sequence[SetPoint], default: np.ndarray, t: float) -> np.ndarray:
    value = default
    for p in points:
        if t < p.t_s:
            break
        if p.ramp_s > 0.0 and t < p.t_s + p.ramp_s:
            a = (t - p.t_s) / p.ramp_s
            return (1.0 - a) * value + a * p.value
        value = p.value
    return value


#: Time tolerance [s] of the segment bounds: a simulator's clock accumulates rounding errors
#: (a tick at "5.0 s" may read 4.9999999997 s), which must not shift a segment by one tick.
TIME_EPS_S = 1e-6


class TeleopPlayer:
    """Plays a :class:`TeleopScenario`: ``step(t)`` -> :class:`TeleopCommand`.

    The base velocity is that of the segment active at ``t`` (``start_s <= t < end_s``, bounds
    within :data:`TIME_EPS_S`), zero otherwise; the other channels follow their set-points (linear
    blends over ``ramp_s``); ``finished`` once ``t >= duration_s`` (within :data:`TIME_EPS_S`).
    Stateless: any ``t`` may be asked in any order.
    """

    def __init__(self, scenario: TeleopScenario):
        self.scenario = scenario

    def step(self, t: float) -> TeleopCommand:
        """Command at time ``t`` [s].

        Raises:
            ValueError: ``t`` not finite.
        """
        t = float(t)
        if not math.isfinite(t):
            raise ValueError(f"t: expected a finite time, got {t!r}")
        sc = self.scenario
        lin, ang = np.zeros(2), 0.0
        te = t + TIME_EPS_S
        for s in sc.velocity:
            if s.start_s <= te < s.end_s:
                lin, ang = s.lin_vel.copy(), s.ang_vel
                break
        ch = {k: _channel_value(sc.channels[k], sc.defaults[k], te) for k in sc.channels}
        return TeleopCommand(t=t, lin_vel=lin, ang_vel=float(ang), base_height=float(ch["base_height"][0]),
                             waist_yaw=float(ch["waist_yaw"][0]), q_ref_arms=np.array(ch["q_ref_arms"], dtype=float),
                             stiffness=np.array(ch["stiffness"], dtype=float), finished=te >= sc.duration_s)


class LiveTeleop:
    """Thread-safe teleop command state changed at run time (a program, a keyboard).

    Starts at the defaults (config base height and stiffness, robot default posture). Setters
    refuse values outside the limits or non-finite with a :class:`ContractError` and leave the
    state unchanged; :meth:`command` returns the current :class:`TeleopCommand`.

    Args:
        robot: the commanded robot. config: limits (default: :func:`load_teleop_config`).
    """

    def __init__(self, robot: Any, config: TeleopConfig | None = None):
        self.robot = robot
        self.config = config if config is not None else load_teleop_config(robot)
        self.arm_joints = arm_joints(robot)
        d = _defaults(robot, self.config, self.arm_joints)
        self._lock = threading.Lock()
        self.lin_vel = np.zeros(2)
        self.ang_vel = 0.0
        self.base_height = float(d["base_height"][0])
        self.waist_yaw = float(d["waist_yaw"][0])
        self.q_ref_arms = d["q_ref_arms"].copy()
        self.stiffness = d["stiffness"].copy()

    def set_velocity(self, vx: float, vy: float = 0.0, yaw_rate: float = 0.0) -> None:
        """Base velocity [m/s] (yaw frame) and yaw rate [rad/s], held until changed."""
        v = np.array([vx, vy, yaw_rate], dtype=float)
        if not np.all(np.isfinite(v)):
            raise ContractError(f"velocity: expected finite numbers, got {v.tolist()}")
        if math.hypot(v[0], v[1]) > self.config.max_lin_vel_mps + 1e-12 or abs(v[2]) > self.config.max_ang_vel_radps + 1e-12:
            raise ContractError(f"velocity {v.tolist()} outside the limits |v| <= {self.config.max_lin_vel_mps:g} m/s, "
                                f"|yaw rate| <= {self.config.max_ang_vel_radps:g} rad/s")
        with self._lock:
            self.lin_vel, self.ang_vel = v[:2], float(v[2])

    def set_base_height(self, h: float) -> None:
        """Base height command [m] within ``base_height_range_m``."""
        lo, hi = self.config.base_height_range_m
        if not (math.isfinite(h) and lo <= h <= hi):
            raise ContractError(f"base height {h!r} m outside [{lo:g}, {hi:g}] m")
        with self._lock:
            self.base_height = float(h)

    def set_waist_yaw(self, yaw: float) -> None:
        """Waist yaw reference [rad] within the joint limits."""
        lo, hi = _joint_range(self.robot, "waist_yaw_joint")
        if not (math.isfinite(yaw) and lo <= yaw <= hi):
            raise ContractError(f"waist yaw {yaw!r} rad outside the joint limits [{lo:g}, {hi:g}] rad")
        with self._lock:
            self.waist_yaw = float(yaw)

    def set_arm(self, joint: str, value: float) -> None:
        """One arm joint reference [rad] (a name of ``teleop.arm_joints``) within its limits."""
        if joint not in self.arm_joints:
            raise ContractError(f"unknown arm joint {joint!r}; arm joints: {', '.join(self.arm_joints)}")
        lo, hi = _joint_range(self.robot, joint)
        if not (math.isfinite(value) and lo <= value <= hi):
            raise ContractError(f"{joint} reference {value!r} rad outside the joint limits [{lo:g}, {hi:g}] rad")
        with self._lock:
            self.q_ref_arms[self.arm_joints.index(joint)] = float(value)

    def set_stiffness(self, k) -> None:
        """The 5-D stiffness, LAC layout [N/m x 3, N m/rad x 2], within the ranges."""
        k = np.asarray(k, dtype=float).reshape(-1)
        if k.shape != (5,):
            raise ContractError(f"stiffness: expected 5 values {STIFFNESS_FIELDS}, got {k.size}")
        bad = _stiffness_problem(k, self.config)
        if bad:
            raise ContractError(f"stiffness: {bad}")
        with self._lock:
            self.stiffness = k.copy()

    def stop(self) -> None:
        """Zero the base velocity."""
        with self._lock:
            self.lin_vel, self.ang_vel = np.zeros(2), 0.0

    def command(self, t: float, finished: bool = False) -> TeleopCommand:
        """The current command, stamped ``t`` [s]."""
        with self._lock:
            return TeleopCommand(t=float(t), lin_vel=self.lin_vel.copy(), ang_vel=self.ang_vel, base_height=self.base_height,
                                 waist_yaw=self.waist_yaw, q_ref_arms=self.q_ref_arms.copy(),
                                 stiffness=self.stiffness.copy(), finished=finished)


class TeleopKeyboard:
    """Terminal keys -> :class:`LiveTeleop` (values held until changed, clamped to the limits).

    Keys: ``w``/``s`` vx +-``lin_step``, ``a``/``d`` vy +-, ``j``/``l`` yaw rate +-``ang_step``,
    space: stop; ``r``/``f`` base height +-``height_step``; ``[``/``]`` waist yaw +-``yaw_step``;
    ``1``-``5`` select a stiffness channel (LAC layout), ``+``/``-`` multiply / divide it by
    ``stiffness_factor``. (``q`` is left to the program: quit.)

    Args:
        live: the command state. lin_step [m/s], ang_step [rad/s], height_step [m], yaw_step [rad],
        stiffness_factor [-] (> 1).
    """

    def __init__(self, live: LiveTeleop, lin_step: float = 0.1, ang_step: float = 0.2, height_step: float = 0.02,
                 yaw_step: float = 0.1, stiffness_factor: float = 1.5):
        self.live = live
        self.lin_step, self.ang_step, self.height_step, self.yaw_step = lin_step, ang_step, height_step, yaw_step
        self.factor = stiffness_factor
        self.channel = 0

    def key(self, k: str) -> str:
        """Apply one key; returns a short description of what it did ('' for an unused key)."""
        live, cfg = self.live, self.live.config
        lin, ang = live.lin_vel.copy(), live.ang_vel
        steps = {"w": (0, self.lin_step), "s": (0, -self.lin_step), "a": (1, self.lin_step), "d": (1, -self.lin_step)}
        if k in steps or k in ("j", "l"):
            if k in steps:
                i, dv = steps[k]
                lin[i] += dv
                n = math.hypot(*lin)
                if n > cfg.max_lin_vel_mps:
                    lin *= cfg.max_lin_vel_mps / n
            else:
                ang = float(np.clip(ang + (self.ang_step if k == "j" else -self.ang_step),
                                    -cfg.max_ang_vel_radps, cfg.max_ang_vel_radps))
            live.set_velocity(lin[0], lin[1], ang)
            return f"velocity vx {lin[0]:+.2f} vy {lin[1]:+.2f} m/s, yaw rate {ang:+.2f} rad/s"
        if k == " ":
            live.stop()
            return "stop"
        if k in ("r", "f"):
            lo, hi = cfg.base_height_range_m
            h = float(np.clip(live.base_height + (self.height_step if k == "r" else -self.height_step), lo, hi))
            live.set_base_height(h)
            return f"base height {h:.3f} m"
        if k in ("[", "]"):
            lo, hi = _joint_range(live.robot, "waist_yaw_joint")
            y = float(np.clip(live.waist_yaw + (self.yaw_step if k == "]" else -self.yaw_step), lo, hi))
            live.set_waist_yaw(y)
            return f"waist yaw {y:+.2f} rad"
        if k in ("1", "2", "3", "4", "5"):
            self.channel = int(k) - 1
            return f"stiffness channel {STIFFNESS_FIELDS[self.channel]} ({live.stiffness[self.channel]:g})"
        if k in ("+", "-"):
            s = live.stiffness.copy()
            s[self.channel] *= self.factor if k == "+" else 1.0 / self.factor
            s = cfg.clamp_stiffness(s)
            live.set_stiffness(s)
            return f"{STIFFNESS_FIELDS[self.channel]} = {s[self.channel]:.4g}"
        return ""
