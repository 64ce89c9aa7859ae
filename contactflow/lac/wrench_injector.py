"""Timed external wrench events on robot links (trapezoid force and couple profiles).

The ``wrench_injector`` node plays the ``wrenches:`` list of a teleop scenario file
(:mod:`contactflow.lac.teleop`) and publishes, every control tick, one wrench per link of the robot
file's ``wrench_links`` on the ``external_wrench`` contract; the MuJoCo driver applies it with
``xfrc_applied`` and the recorder keeps it as ground truth. This reproduces the evaluation harness
of LAC (lac.md §4: trapezoid ramp / hold / release on a link) in a dataflow.

Frame and point of application: ``[f; tau]`` in the WORLD frame, the force applied at the link's
centre of mass (MuJoCo ``xfrc_applied`` semantics), ``tau`` a pure couple. The profile is the LAC
trapezoid :func:`contactflow.lac.events.trapezoid`. Each tick's wrench is the profile sampled at
the tick time and held for the tick (the driver applies it over the physics steps of the tick).

Scenario entries (validated by :func:`parse_wrench_events`, errors name the file, key and reason)::

    wrenches:
      - {link: left_wrist_roll_link, start_s: 3.0, ramp_s: 0.5, hold_s: 3.0, release_s: 0.5,
         force_n: [10.0, 0.0, 0.0]}            # world-frame force at the link CoM [N]
      - {link: left_wrist_roll_link, start_s: 9.0, ramp_s: 0.5, hold_s: 3.0, release_s: 0.5,
         couple_nm: [0.0, 0.0, 1.5]}           # world-frame couple [N m]

An event has ``force_n``, ``couple_nm`` or both; events on one link may overlap (they add up).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Sequence

import numpy as np

from contactflow.config import load_config
from contactflow.errors import ConfigError
from contactflow.lac.events import trapezoid

__all__ = ["WrenchEvent", "WrenchInjector", "parse_wrench_events", "wrench_links"]

Vec3 = tuple[float, float, float]


@dataclasses.dataclass(frozen=True, kw_only=True)
class _WrenchEventFile:
    link: str
    start_s: float
    ramp_s: float = 0.5
    hold_s: float
    release_s: float = 0.5
    force_n: Vec3 | None = None
    couple_nm: Vec3 | None = None


@dataclasses.dataclass(frozen=True)
class WrenchEvent:
    """One trapezoid wrench event on a link.

    Attributes:
        link: body name (one of the robot file's ``wrench_links``).
        start_s: start of the ramp [s]. ramp_s, hold_s, release_s: phase durations [s].
        force_W: (3,) peak force, world frame, applied at the link CoM [N] (zeros for a pure couple).
        couple_W: (3,) peak couple, world frame [N m] (zeros for a pure force).
        index: position of the entry in the file's ``wrenches`` list.
    """

    link: str
    start_s: float
    ramp_s: float
    hold_s: float
    release_s: float
    force_W: np.ndarray
    couple_W: np.ndarray
    index: int

    @property
    def hold_start_s(self) -> float:
        """Start of the hold [s]."""
        return self.start_s + self.ramp_s

    @property
    def hold_end_s(self) -> float:
        """End of the hold [s]."""
        return self.start_s + self.ramp_s + self.hold_s

    @property
    def end_s(self) -> float:
        """End of the release [s]."""
        return self.hold_end_s + self.release_s

    @property
    def kind(self) -> str:
        """``"force"`` if the event has a force, else ``"couple"``."""
        return "force" if np.any(self.force_W) else "couple"

    def profile(self, t) -> np.ndarray:
        """Trapezoid scale in [0, 1] at times ``t`` [s] (shape of ``t``)."""
        return trapezoid(t, self.start_s, self.ramp_s, self.hold_s, self.release_s)


def wrench_links(robot: Any) -> tuple[str, ...]:
    """The robot file's ``wrench_links`` (links that can receive an external wrench), in file order."""
    raw = robot.raw if isinstance(getattr(robot, "raw", None), dict) else {}
    return tuple(raw.get("wrench_links") or ())


def parse_wrench_events(entries: Sequence[Any], robot: Any, source: str, duration_s: float | None = None
                        ) -> tuple[WrenchEvent, ...]:
    """Validate a scenario's ``wrenches`` list.

    Args:
        entries: the parsed list. robot: the :class:`contactflow.robot.Robot` (its ``wrench_links``).
        source: file label for error messages. duration_s: scenario end [s]; events must end by then.

    Returns:
        The events, in file order.

    Raises:
        ConfigError: ``wrenches[i]``: unknown or missing key, wrong vector length, non-finite
            number, a link not in the robot file's ``wrench_links`` (the allowed links are listed),
            a negative time, an event without force and couple, or an event ending after
            ``duration_s``.
    """
    allowed = wrench_links(robot)
    events = []
    for i, entry in enumerate(entries or ()):
        where = f"{source}: wrenches[{i}]"
        cfg = load_config(_WrenchEventFile, entry, source=where)
        if cfg.link not in allowed:
            raise ConfigError(f"{where}.link: {cfg.link!r} is not a wrench link of robot {robot.name!r}; "
                              f"allowed (robot file wrench_links): {', '.join(allowed) or 'none'}")
        for key in ("start_s", "ramp_s", "hold_s", "release_s"):
            if not getattr(cfg, key) >= 0.0:
                raise ConfigError(f"{where}.{key}: expected a time >= 0 s, got {getattr(cfg, key)!r}")
        if cfg.force_n is None and cfg.couple_nm is None:
            raise ConfigError(f"{where}: an event needs force_n [N] and/or couple_nm [N m] (world frame)")
        force = np.array(cfg.force_n if cfg.force_n is not None else (0.0, 0.0, 0.0), dtype=float)
        couple = np.array(cfg.couple_nm if cfg.couple_nm is not None else (0.0, 0.0, 0.0), dtype=float)
        if not (np.any(force) or np.any(couple)):
            raise ConfigError(f"{where}: force_n and couple_nm are both zero")
        force.setflags(write=False)
        couple.setflags(write=False)
        ev = WrenchEvent(cfg.link, cfg.start_s, cfg.ramp_s, cfg.hold_s, cfg.release_s, force, couple, i)
        if duration_s is not None and ev.end_s > duration_s + 1e-9:
            raise ConfigError(f"{where}: ends at {ev.end_s:g} s, after the scenario's duration_s = {duration_s:g} s")
        events.append(ev)
    return tuple(events)


class WrenchInjector:
    """The external wrench on every wrench link at a given time.

    Args:
        events: validated events. links: the robot's wrench links (output order).

    Raises:
        ConfigError: an event on a link not in ``links``.
    """

    def __init__(self, events: Sequence[WrenchEvent], links: Sequence[str]):
        self.links = tuple(links)
        for e in events:
            if e.link not in self.links:
                raise ConfigError(f"wrench event {e.index}: link {e.link!r} not in {list(self.links)}")
        self.events = tuple(events)

    def wrenches(self, t: float) -> dict[str, np.ndarray]:
        """Link -> (6,) ``[f; tau]`` world frame [N, N m] at time ``t`` [s] (zeros when unloaded).

        Raises:
            ValueError: ``t`` not finite.
        """
        t = float(t)
        if not math.isfinite(t):
            raise ValueError(f"t: expected a finite time, got {t!r}")
        out = {link: np.zeros(6) for link in self.links}
        t += 1e-6  # a simulator clock's rounding error must not shift a step edge by one tick
        for e in self.events:
            s = float(e.profile(t))
            if s > 0.0:
                w = out[e.link]
                w[:3] += s * e.force_W
                w[3:] += s * e.couple_W
        return out

    def values(self, t: float) -> Mapping[str, np.ndarray]:
        """The ``external_wrench`` contract fields (``wrench.<link>``) at time ``t``."""
        return {f"wrench.{k}": v for k, v in self.wrenches(t).items()}
