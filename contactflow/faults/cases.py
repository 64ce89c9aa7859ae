"""Fault cases of the reliability campaign: what to break, where and when.

A :class:`FaultCase` names a shipped dataflow, a fault kind, its target and its time. Two families:

* **process faults** (:data:`PROCESS_KINDS`, applied by the campaign runner,
  :mod:`contactflow.faults.campaign`): signals sent to one node's process while the graph runs
  (``kill``: SIGKILL; ``hang``: SIGSTOP never followed by SIGCONT, the process exists but reads
  and sends nothing; ``stall``: SIGSTOP for ``params["pause_s"]`` (1 s) then SIGCONT; ``dropout``:
  the same for 0.1 s on the driver, its output stops then resumes; ``recorder_kill``: SIGKILL of
  the recorder; ``disk_full``: the recorder's write-size limit ``--max-bytes``).
* **graph faults** (:data:`contactflow.faults.inject.GRAPH_KINDS`): the dataflow itself is edited
  before the run (a fault-injector node on one connection, a scenario swapped) by
  ``contactflow.faults.inject.edit_graph(graph, case)``.

The fault time ``at_s`` is in **simulated seconds** after the first sensor message: the runner
reads the driver's simulated time from the recording as it is written and fires when it passes
``at_s`` (the wall time at which that happens depends on the machine's load; the simulated time
does not).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

__all__ = ["FaultCase", "PROCESS_KINDS", "SIGNAL_KINDS"]

PROCESS_KINDS: frozenset[str] = frozenset({"kill", "hang", "stall", "dropout", "recorder_kill", "disk_full"})
"""Fault kinds the campaign runner applies to a running node's process (module docstring)."""

SIGNAL_KINDS: frozenset[str] = PROCESS_KINDS - {"disk_full"}
"""The process kinds delivered as signals while the graph runs (``disk_full`` is an argument)."""


@dataclasses.dataclass(frozen=True)
class FaultCase:
    """One injected fault.

    Attributes:
        graph: a shipped dataflow's file name in ``dataflows/`` (e.g. ``"seiko_talos.yml"``).
        kind: the fault kind (:data:`PROCESS_KINDS` or ``inject.GRAPH_KINDS``).
        target: the node id (process faults; a scenario fault names the node that reads the
            scenario) or ``"node/port"`` (a port fault: the output ``port`` of node ``node``; with
            ``params["to"] = "dest_node/input"`` one connection of it only).
        at_s: fault time [s of simulated time] after the first sensor message (module docstring).
        params: kind-specific values (``pause_s`` for stall/dropout, ``max_bytes`` for disk_full,
            ``count`` for a flood, ``scenario`` for a scenario fault...). A plain mapping of
            JSON-serialisable values.
        seed: the seed that drew ``at_s`` (a random tick), recorded for reproducing the case.
        scenario: the scenario file the run plays (``CONTACTFLOW_SCENARIO``), relative to the
            repository root; "" keeps the graph's own.
    """

    graph: str
    kind: str
    target: str
    at_s: float = 0.0
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    seed: int = 0
    scenario: str = ""

    @property
    def node(self) -> str:
        """The node id of ``target`` (the part before ``/``)."""
        return self.target.split("/", 1)[0]

    @property
    def port(self) -> str:
        """The output port of ``target`` (after ``/``), "" for a node target."""
        return self.target.split("/", 1)[1] if "/" in self.target else ""

    @property
    def name(self) -> str:
        """A short unique label: ``graph-stem:kind:target@at_s``."""
        stem = self.graph.rsplit(".", 1)[0]
        return f"{stem}:{self.kind}:{self.target}@{self.at_s:g}s"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the fields."""
        d = dataclasses.asdict(self)
        d["params"] = dict(self.params)
        return d
