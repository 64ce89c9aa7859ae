"""The project's exception hierarchy: one root and a few subclasses.

Which one to raise:

* :class:`ConfigError` -- a value a user wrote is wrong: a configuration dataclass (built from YAML
  by :func:`contactflow.config.load_config` or directly in a notebook), a robot, scenario or policy
  spec file. The message names the file (when there is one), the key path and what was expected.
* :class:`ContractError` -- a message between nodes does not match its port contract
  (:mod:`contactflow.contracts.messages`): wrong size, dtype, Arrow type, null or non-finite values.
* :class:`ModelError` -- a robot or policy model cannot be built or does not fit.
* :class:`SolverError` -- a QP or nonlinear solve failed.
* :class:`UpstreamError` -- in a running graph, an upstream node stopped, failed or went silent.

``ConfigError`` and ``ContractError`` are also ``ValueError`` s, so code that catches ``ValueError``
keeps working. A bare ``ValueError`` is left only for a programming error in an internal call (an
argument no user file or peer message can produce).
"""


class ContactflowError(Exception):
    """Root of every error raised by contactflow."""


class ConfigError(ContactflowError, ValueError):
    """A configuration, robot or scenario file is malformed.

    The message names the file, the key path and what was expected.
    """


class ModelError(ContactflowError):
    """A robot model cannot be built or does not match what a component expects."""


class ContractError(ContactflowError, ValueError):
    """A message does not match its port contract (schema, shape, finiteness)."""


class SolverError(ContactflowError):
    """A QP or nonlinear solve failed; carries the solver status when known."""

    def __init__(self, message: str, status: str | None = None):
        super().__init__(message)
        self.status = status


class UpstreamError(ContactflowError):
    """An upstream node stopped, failed or went silent before the run ended (raised by the node
    runtime, :mod:`contactflow.nodes._runtime`, and by nodes that read their inputs themselves)."""


class RecordingError(ContactflowError):
    """A recording is missing, truncated beyond recovery, of another format version or not a contactflow
    recording. The message names the file and what was expected."""
