"""Checks shared by the SEIKO config dataclasses (:class:`~contactflow.seiko.controller_config.ControllerConfig`,
:class:`~contactflow.seiko.retargeting_config.RetargetingConfig`, :class:`~contactflow.seiko.retargeting_config.EffectorParams`):
a bad value raises :class:`contactflow.errors.ConfigError` naming the class, the key and what was expected.
"""

from __future__ import annotations

from typing import Iterable

from contactflow.errors import ConfigError

__all__ = ["config_error", "require_positive", "require_period", "PeriodCheck"]


def config_error(obj, key: str, expected: str, value) -> ConfigError:
    """``ConfigError("<Class>.<key>: expected <expected>, got <value>")`` (to raise)."""
    return ConfigError(f"{type(obj).__name__}.{key}: expected {expected}, got {value!r}")


def require_positive(obj, names: Iterable[str], *, strict: bool = True) -> None:
    """Each attribute of ``obj`` named in ``names`` must be > 0 (``strict``) or >= 0; NaN is refused.

    Raises:
        ConfigError: the first attribute that is not.
    """
    for name in names:
        value = getattr(obj, name)
        if not (value > 0 if strict else value >= 0):
            raise config_error(obj, name, "a number > 0" if strict else "a number >= 0", value)


#: Two periods [s] closer than this are the same (float times: k * dt summed or multiplied).
PERIOD_TOL_S = 1e-6


def require_period(configs, period_s: float, source: str) -> None:
    """Every config of ``configs`` (objects with ``dt_s``) must have ``dt_s == period_s`` (within
    :data:`PERIOD_TOL_S`): a stage that integrates with another period than its clock's runs silently
    wrong (its rates, filters and integration).

    Args:
        configs: the stage configs (``InputFilterConfig``, ``RetargetingConfig``, ``ControllerConfig``...).
        period_s: the clock's period [s]. source: where that period comes from (for the message).

    Raises:
        ConfigError: ``<Class>.dt_s: expected <period_s> (<source>), got <dt_s>``.
    """
    for cfg in configs:
        if not abs(cfg.dt_s - period_s) <= PERIOD_TOL_S:
            raise config_error(cfg, "dt_s", f"{period_s:g} s ({source})", cfg.dt_s)


class PeriodCheck:
    """A node's configured period against the clock it runs on: the time step of the messages
    that clock it (e.g. the driver's sensors), per ``seq``.

    Args:
        config: the stage config whose ``dt_s`` [s] must match. source: the clock, for the message
            (e.g. ``"the sensors' time step"``).
    """

    def __init__(self, config, source: str):
        self.config = config
        self.source = source
        self._prev: tuple[int, float] | None = None

    def __call__(self, seq: int | None, t: float) -> None:
        """One clock message (its ``seq`` and time [s]).

        Raises:
            ConfigError: the time step per seq differs from ``config.dt_s`` by more than
                :data:`PERIOD_TOL_S`.
        """
        if seq is None:
            return
        prev, self._prev = self._prev, (seq, t)
        if prev is None or seq <= prev[0]:
            return
        step = (t - prev[1]) / (seq - prev[0])
        if not abs(step - self.config.dt_s) <= PERIOD_TOL_S:
            raise config_error(self.config, "dt_s", f"{step:g} s ({self.source}: the clock's period; set dt_s in "
                               "the node's config file)", self.config.dt_s)
