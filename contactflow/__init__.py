"""contactflow: multi-contact whole-body control, compliance and estimation on dora-rs dataflows.

The library package never imports dora: algorithms take numpy arrays and return frozen
dataclasses, so the same code runs in a dataflow node, a test, a benchmark or a notebook.
"""

from contactflow.errors import (
    ConfigError,
    ContactflowError,
    ContractError,
    ModelError,
    SolverError,
)

__all__ = ["ContactflowError", "ConfigError", "ModelError", "ContractError", "SolverError"]
__version__ = "0.1.0"
