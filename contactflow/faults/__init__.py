"""Fault injection over the shipped graphs: cases, the campaign runner, the CLI.

``contactflow faults run`` runs the campaign (:mod:`contactflow.faults.campaign`); the case type is
:class:`contactflow.faults.cases.FaultCase`.
"""

from contactflow.faults.cases import PROCESS_KINDS, FaultCase

__all__ = ["FaultCase", "PROCESS_KINDS"]
