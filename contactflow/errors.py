"""The project's exception hierarchy: one root and a few subclasses."""


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


class RecordingError(ContactflowError):
    """A recording is missing, truncated beyond recovery, of another format version or not a contactflow
    recording. The message names the file and what was expected."""
