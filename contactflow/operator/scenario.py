"""Operator scenarios: timed velocity / pose commands per effector, played back as twists.

A scenario replaces the paper's operators (one 3Dconnexion SpaceMouse per effector sending
world-frame velocity commands, SEIKO §7.1) by a YAML file of timed commands. The player turns it
into an :class:`OperatorCommand` — one (6,) world twist ``[v; omega]`` per commandable effector —
at any simulation time; the twists then go through the operator input filter
(:mod:`contactflow.operator.input_filter`, eq. (8)) like a live operator's.

File format (``robots/<robot>/scenarios/*.yaml``)::

    description: free text                      # optional
    duration_s: 18.5                            # optional; default: last command end + tail_s
    tail_s: 1.0                                 # optional, default 1.0 [s]
    commands:                                   # optional list; each entry is one of:
      # velocity segment: constant world twist on [start_s, end_s)
      - {effector: left_hand, start_s: 2.5, end_s: 4.0,
         linear_mps: [0.05, 0, 0], angular_radps: [0, 0, 0.1]}   # either may be omitted (zeros)
      # pose segment: move by offset_m (world) relative to the pose at start_s, at constant
      # velocity offset_m / (end_s - start_s); realised as a velocity command
      - {effector: left_hand, start_s: 5.0, end_s: 11.0, offset_m: [0.30, 0, 0]}
    contacts:                                   # optional: contact switch requests (§7.3-7.4)
      - {t_s: 11.5, effector: left_hand, enable: true}
    push:                                       # optional: pushing mode (§7.2) on [start_s, end_s)
      - {effector: left_hand, start_s: 13.0, end_s: 20.0, normal_force_rate_n_per_s: 8.0}

Velocity commands go to effectors that are free at the segment's start according to the
scenario's contact events (an effector enabled at reset can be commanded after an event that
disables it). The contact state requested by the events is sent every tick as a boolean per
effector; pushing mode is on while a push segment is active, with its normal-force velocity
[N/s]. Whether a request can be honoured (a surface nearby, another foot left to stand on,
pushing on an enabled contact...) is decided by the Retargeting at run time, which refuses bad
requests with a message and keeps the robot balanced; the loader only checks the file.

Everything is validated at load time; every error is a :class:`ConfigError` naming the file,
the key path and the reason.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from contactflow.config import load_config, load_file_format, read_yaml
from contactflow.errors import ConfigError

__all__ = [
    "Segment",
    "ContactEvent",
    "PushSegment",
    "Scenario",
    "OperatorCommand",
    "ScenarioPlayer",
    "load_scenario",
    "scenario_path",
]

Vec3 = tuple[float, float, float]


# ---- raw file schema (typed, unknown keys rejected by load_config) --------------------------
@dataclasses.dataclass(frozen=True, kw_only=True)
class _ScenarioFile:
    description: str = ""
    duration_s: float | None = None
    tail_s: float = 1.0
    commands: list[Any] = dataclasses.field(default_factory=list)
    contacts: list[Any] = dataclasses.field(default_factory=list)
    push: list[Any] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class _VelocitySegmentFile:
    effector: str
    start_s: float
    end_s: float
    linear_mps: Vec3 = (0.0, 0.0, 0.0)
    angular_radps: Vec3 = (0.0, 0.0, 0.0)


@dataclasses.dataclass(frozen=True, kw_only=True)
class _PoseSegmentFile:
    effector: str
    start_s: float
    end_s: float
    offset_m: Vec3


@dataclasses.dataclass(frozen=True, kw_only=True)
class _ContactEventFile:
    t_s: float
    effector: str
    enable: bool


@dataclasses.dataclass(frozen=True, kw_only=True)
class _PushSegmentFile:
    effector: str
    start_s: float
    end_s: float
    normal_force_rate_n_per_s: float = 0.0


# ---- validated scenario ---------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Segment:
    """One command segment, active on ``[start_s, end_s)``.

    Attributes:
        effector: effector name.
        start_s: start time [s] (>= 0).
        end_s: end time [s] (> start_s).
        twist: (6,) world-frame twist ``[v; omega]`` [m/s, rad/s] while active (read-only).
        kind: ``"velocity"`` or ``"pose"`` (pose segments have ``twist = [offset/T; 0]``).
        offset_m: (3,) world offset of a pose segment [m], None for velocity segments.
        index: position of the entry in the file's ``commands`` list.
    """

    effector: str
    start_s: float
    end_s: float
    twist: np.ndarray
    kind: str
    offset_m: np.ndarray | None
    index: int


@dataclasses.dataclass(frozen=True)
class ContactEvent:
    """A contact switch request.

    Attributes:
        t_s: time [s]. effector: effector name. enable: True to add the contact.
    """

    t_s: float
    effector: str
    enable: bool


@dataclasses.dataclass(frozen=True)
class PushSegment:
    """Pushing mode on ``[start_s, end_s)`` with a normal-force velocity command.

    Attributes:
        effector: effector name. start_s, end_s: times [s].
        normal_force_rate_n_per_s: normal-force velocity [N/s] (0 holds the force).
        index: position in the file's ``push`` list.
    """

    effector: str
    start_s: float
    end_s: float
    normal_force_rate_n_per_s: float
    index: int


@dataclasses.dataclass(frozen=True)
class Scenario:
    """A validated scenario.

    Attributes:
        path: the file it was loaded from.
        description: free text.
        duration_s: end of the scenario [s].
        tail_s: idle time after the last command used for the default duration [s].
        segments: command segments, in file order.
        contacts: contact events, sorted by time.
        effectors: commandable effectors (free at reset or after a disable event), robot order.
        push: pushing-mode segments.
        initial_enabled: effector -> contact state at reset (robot description).
    """

    path: Path
    description: str
    duration_s: float
    tail_s: float
    segments: tuple[Segment, ...]
    contacts: tuple[ContactEvent, ...]
    effectors: tuple[str, ...]
    push: tuple[PushSegment, ...] = ()
    initial_enabled: dict[str, bool] = dataclasses.field(default_factory=dict)

    def enabled_at(self, effector: str, t: float) -> bool:
        """Contact state requested for ``effector`` at time ``t`` (reset state + events <= t)."""
        state = self.initial_enabled.get(effector, False)
        for e in self.contacts:
            if e.effector == effector and e.t_s <= t:
                state = e.enable
        return state


@dataclasses.dataclass(frozen=True)
class OperatorCommand:
    """Operator command at one instant.

    Attributes:
        t: simulation time [s].
        velocities: effector -> (6,) world twist ``[v; omega]`` [m/s, rad/s] for every
            commandable effector, zeros when idle (read-only arrays).
        finished: True once ``t >= duration_s``.
        enable: effector -> contact state requested (every effector of the robot).
        push: effector -> pushing mode requested.
        force_rates: effector -> normal-force velocity command [N/s] (0 unless pushing).
    """

    t: float
    velocities: dict[str, np.ndarray]
    finished: bool
    enable: dict[str, bool] = dataclasses.field(default_factory=dict)
    push: dict[str, bool] = dataclasses.field(default_factory=dict)
    force_rates: dict[str, float] = dataclasses.field(default_factory=dict)


def scenario_path(robot: Any, name: str) -> Path:
    """``<robot directory>/scenarios/<name>.yaml``."""
    return Path(robot.directory) / "scenarios" / f"{name}.yaml"


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=float)
    a.setflags(write=False)
    return a


def _known_effector(robot: Any, name: str, where: str):
    """The contact spec of effector ``name``; ConfigError ``<where>: ...`` if the robot has none."""
    try:
        return robot.contact(name)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _check_effector(robot: Any, name: str, where: str, free: tuple[str, ...],
                    events: list | None = None, t_s: float = 0.0) -> None:
    """A commandable effector at ``t_s``: known and not an enabled contact (events applied)."""
    state = _known_effector(robot, name, where).enabled
    for e in sorted(events or [], key=lambda e: e.t_s):
        if e.effector == name and e.t_s <= t_s:
            state = e.enable
    if state:
        raise ConfigError(
            f"{where}: effector {name!r} is an enabled contact at {t_s} s (robot {robot.name!r}, "
            f"contact events of the scenario) and cannot be commanded; commandable effectors: "
            f"{', '.join(free) or 'none'} (or disable the contact first with a contacts event)"
        )


def load_scenario(path: str | Path, robot: Any) -> Scenario:
    """Load and validate a scenario file.

    Args:
        path: a YAML file, or a bare scenario name looked up in ``<robot dir>/scenarios/``.
        robot: the :class:`contactflow.robot.Robot` it drives (effector names, contact state at
            reset).

    Returns:
        Scenario.

    Raises:
        ConfigError: file missing or not YAML; unknown or missing key; wrong type or vector
            length; non-finite number; negative or reversed times; overlapping segments on one
            effector; unknown effector; an effector that is an enabled contact at reset;
            ``duration_s`` shorter than the commands; any contact event ("not supported yet").
            The message names the file, the key path and the reason.
    """
    path = Path(path)
    if not path.suffix and not path.exists():
        path = scenario_path(robot, str(path))
    src = str(path)
    raw = read_yaml(path)
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{src}: expected a mapping at the top level, got {type(raw).__name__}")
    from contactflow.lac.teleop import _ScenarioFile as _TeleopScenarioFile

    top = load_file_format(_ScenarioFile, raw, src, _TeleopScenarioFile,
                           "a teleop scenario of the LAC pipeline (the G1's, robots/g1/scenarios/), not an operator "
                           "scenario of SEIKO (robots/talos/scenarios/)")

    raw_events: list[ContactEvent] = []
    for i, entry in enumerate(top.contacts):
        where = f"{src}: contacts[{i}]"
        cfg = load_config(_ContactEventFile, entry, source=where)
        _known_effector(robot, cfg.effector, f"{where}.effector")
        if not (math.isfinite(cfg.t_s) and cfg.t_s >= 0.0):
            raise ConfigError(f"{where}.t_s: expected a finite time >= 0 s, got {cfg.t_s!r}")
        raw_events.append(ContactEvent(cfg.t_s, cfg.effector, cfg.enable))
    disabled_later = {e.effector for e in raw_events if not e.enable}
    free = tuple(n for n, c in robot.contacts.items() if not c.enabled or n in disabled_later)

    segments: list[Segment] = []
    for i, entry in enumerate(top.commands):
        where = f"{src}: commands[{i}]"
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {entry!r}")
        is_pose = "offset_m" in entry
        is_vel = "linear_mps" in entry or "angular_radps" in entry
        if is_pose and is_vel:
            raise ConfigError(
                f"{where}: a command has either offset_m (pose segment) or linear_mps/angular_radps "
                "(velocity segment), not both"
            )
        if not (is_pose or is_vel):
            raise ConfigError(
                f"{where}: missing key: a command needs offset_m (pose segment) or "
                "linear_mps and/or angular_radps (velocity segment)"
            )
        cfg = load_config(_PoseSegmentFile if is_pose else _VelocitySegmentFile, entry, source=where)
        _check_effector(robot, cfg.effector, f"{where}.effector", free, raw_events, cfg.start_s)
        if cfg.start_s < 0.0:
            raise ConfigError(f"{where}.start_s: expected a time >= 0 s, got {cfg.start_s!r}")
        if cfg.end_s <= cfg.start_s:
            raise ConfigError(
                f"{where}.end_s: expected end_s > start_s = {cfg.start_s!r}, got {cfg.end_s!r}"
            )
        if is_pose:
            offset = np.array(cfg.offset_m, dtype=float)
            twist = np.concatenate([offset / (cfg.end_s - cfg.start_s), np.zeros(3)])
            segments.append(
                Segment(cfg.effector, cfg.start_s, cfg.end_s, _readonly(twist), "pose", _readonly(offset), i)
            )
        else:
            twist = np.array(cfg.linear_mps + cfg.angular_radps, dtype=float)
            segments.append(Segment(cfg.effector, cfg.start_s, cfg.end_s, _readonly(twist), "velocity", None, i))

    # overlaps, per effector
    by_eff: dict[str, list[Segment]] = {}
    for s in segments:
        by_eff.setdefault(s.effector, []).append(s)
    for eff, segs in by_eff.items():
        segs.sort(key=lambda s: (s.start_s, s.end_s))
        for a, b in zip(segs, segs[1:]):
            if b.start_s < a.end_s:
                raise ConfigError(
                    f"{src}: commands[{b.index}]: overlaps commands[{a.index}] on effector {eff!r} "
                    f"([{b.start_s}, {b.end_s}) s and [{a.start_s}, {a.end_s}) s)"
                )

    if top.tail_s < 0.0:
        raise ConfigError(f"{src}: tail_s: expected a time >= 0 s, got {top.tail_s!r}")
    last_end = max((s.end_s for s in segments), default=0.0)
    last_any = max([last_end] + [e.t_s for e in raw_events]
                   + [float(p.get("end_s", 0.0)) for p in top.push if isinstance(p, Mapping)
                      and isinstance(p.get("end_s", 0.0), (int, float))])
    if top.duration_s is None:
        if not segments and not raw_events and not top.push:
            raise ConfigError(f"{src}: duration_s: the scenario is empty (no commands and no duration_s)")
        duration = last_any + top.tail_s
    else:
        duration = top.duration_s
        if duration <= 0.0:
            raise ConfigError(f"{src}: duration_s: expected a time > 0 s, got {duration!r}")
        if duration < last_end:
            last = max(segments, key=lambda s: s.end_s)
            raise ConfigError(
                f"{src}: duration_s: {duration!r} s ends before commands[{last.index}] "
                f"(end_s {last.end_s!r} s)"
            )

    for i, e in enumerate(raw_events):
        if e.t_s > duration:
            raise ConfigError(f"{src}: contacts[{i}].t_s: expected a time in [0, duration_s = {duration}] s, got {e.t_s!r}")
    events = sorted(raw_events, key=lambda e: e.t_s)

    pushes: list[PushSegment] = []
    for i, entry in enumerate(top.push):
        where = f"{src}: push[{i}]"
        cfg = load_config(_PushSegmentFile, entry, source=where)
        _known_effector(robot, cfg.effector, f"{where}.effector")
        if not (0.0 <= cfg.start_s < cfg.end_s <= duration):
            raise ConfigError(
                f"{where}: expected 0 <= start_s < end_s <= duration_s = {duration} s, got [{cfg.start_s}, {cfg.end_s})"
            )
        if not math.isfinite(cfg.normal_force_rate_n_per_s):
            raise ConfigError(f"{where}.normal_force_rate_n_per_s: expected a finite number, got {cfg.normal_force_rate_n_per_s!r}")
        pushes.append(PushSegment(cfg.effector, cfg.start_s, cfg.end_s, float(cfg.normal_force_rate_n_per_s), i))
    for a in pushes:
        for b in pushes:
            if a.index < b.index and a.effector == b.effector and a.start_s < b.end_s and b.start_s < a.end_s:
                raise ConfigError(f"{src}: push[{b.index}]: overlaps push[{a.index}] on effector {a.effector!r}")

    return Scenario(
        path=path,
        description=top.description,
        duration_s=float(duration),
        tail_s=float(top.tail_s),
        segments=tuple(segments),
        contacts=tuple(events),
        effectors=free,
        push=tuple(pushes),
        initial_enabled={n: bool(c.enabled) for n, c in robot.contacts.items()},
    )


class ScenarioPlayer:
    """Plays a :class:`Scenario` back as world-frame twists.

    ``step(t)`` returns, for every commandable effector, the twist of the segment active at
    ``t`` (``start_s <= t < end_s``), zeros otherwise. With ``dt_s`` it returns the mean twist
    over ``[t, t + dt_s)`` instead, so that integrating ``dt_s * twist`` reproduces every
    segment's displacement (a pose segment's ``offset_m``) exactly whatever the step alignment.

    Args:
        scenario: a validated scenario.
    """

    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        self._by_eff: dict[str, list[Segment]] = {e: [] for e in scenario.effectors}
        for s in scenario.segments:
            self._by_eff[s.effector].append(s)
        for segs in self._by_eff.values():
            segs.sort(key=lambda s: s.start_s)
        self._zero = _readonly(np.zeros(6))
        self.reset()

    def reset(self) -> None:
        """Restart the scenario (the player holds no state beyond the last time it was asked)."""
        self.t_last: float | None = None

    def step(self, t: float, *, dt_s: float | None = None) -> OperatorCommand:
        """Command at simulation time ``t``.

        Args:
            t: simulation time [s] (finite).
            dt_s: optional step [s] (> 0); when given, twists are averaged over ``[t, t + dt_s)``.

        Returns:
            OperatorCommand with (6,) world twists ``[v; omega]`` [m/s, rad/s] per effector.

        Raises:
            ValueError: ``t`` not finite or ``dt_s`` not > 0.
        """
        t = float(t)
        if not math.isfinite(t):
            raise ValueError(f"t: expected a finite time, got {t!r}")
        if dt_s is not None and not (math.isfinite(dt_s) and dt_s > 0.0):
            raise ValueError(f"dt_s: expected a finite step > 0, got {dt_s!r}")
        self.t_last = t
        velocities: dict[str, np.ndarray] = {}
        for eff, segs in self._by_eff.items():
            if dt_s is None:
                twist = self._zero
                for s in segs:
                    if s.start_s <= t < s.end_s:
                        twist = s.twist
                        break
            else:
                acc = np.zeros(6)
                for s in segs:
                    overlap = min(s.end_s, t + dt_s) - max(s.start_s, t)
                    if overlap > 0.0:
                        acc += (overlap / dt_s) * s.twist
                twist = _readonly(acc) if np.any(acc) else self._zero
            velocities[eff] = twist
        sc = self.scenario
        enable = {e: sc.enabled_at(e, t) for e in sc.initial_enabled}
        push = {e: False for e in sc.initial_enabled}
        rates = {e: 0.0 for e in sc.initial_enabled}
        for p in sc.push:
            if p.start_s <= t < p.end_s:
                push[p.effector] = True
                rates[p.effector] = p.normal_force_rate_n_per_s
        return OperatorCommand(t=t, velocities=velocities, finished=t >= sc.duration_s,
                               enable=enable, push=push, force_rates=rates)
