"""Checks shared by the SEIKO config dataclasses (:class:`~contactflow.seiko.controller_config.ControllerConfig`,
:class:`~contactflow.seiko.retargeting_config.RetargetingConfig`, :class:`~contactflow.seiko.retargeting_config.EffectorParams`):
a bad value raises :class:`contactflow.errors.ConfigError` naming the class, the key and what was expected.
"""

from __future__ import annotations

from typing import Iterable

from contactflow.errors import ConfigError

__all__ = ["config_error", "require_positive"]


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
