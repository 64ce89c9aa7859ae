"""Operator side: scenario playback (timed twist commands) and operator input filtering (eq. (8))."""

from contactflow.operator.input_filter import (
    BangBang1D,
    BangBangFilter,
    EffectorInputFilter,
    InputFilter,
    InputFilterConfig,
)
from contactflow.operator.scenario import (
    OperatorCommand,
    Scenario,
    ScenarioPlayer,
    load_scenario,
)

__all__ = [
    "BangBang1D",
    "BangBangFilter",
    "EffectorInputFilter",
    "InputFilter",
    "InputFilterConfig",
    "OperatorCommand",
    "Scenario",
    "ScenarioPlayer",
    "load_scenario",
]
