"""Graph faults of the reliability campaign: a fault injector on one connection,
a scenario that asks for the wrong thing.

Two families, both applied by editing the dataflow before the run (:func:`edit_graph`), so that
every fault goes through the shipped nodes' own code paths:

* **port faults** (:data:`PORT_KINDS`): a ``fault_injector`` node (``nodes/fault_injector.py``) is
  inserted on one connection, ``source output -> injector -> destination input`` (same queue size
  and policy as the original edge). It forwards every message unchanged, metadata included, until
  the first message whose simulated time reaches ``at_s`` (a multi-tick message: its last row),
  then applies the fault (:class:`PortFault`):

  - ``nan`` / ``inf``: the values of ``count`` messages (default 1) replaced by NaN / +inf (all of
    them, or only the value at ``index``);
  - ``wrong_length``: ``count`` messages cut by one value (a sender of another contract version);
  - ``flood``: one message sent ``count`` times in a burst (default 1000 copies, ten times a
    shipped lockstep queue), then the stream goes on.

  What must happen (README, "Faults and bad input"): the receiving node refuses the malformed
  message with one line naming the input and the field, keeps its last safe values for that tick,
  and the robot keeps standing; a flood of copies of a message already received changes nothing.

* **scenario faults** (:data:`SCENARIO_KINDS`): the operator's scenario is replaced by a file of
  :data:`SCENARIO_FILES` (``robots/talos/scenarios/fault_*.yaml``; the Talos SEIKO graphs only):

  - ``infeasible_qp``: impossible targets (both hands sent 3 m away in 0.5 s) and a contradictory
    contact request (both feet disabled);
  - ``far_contact``: a hand contact requested in free air, then pushing mode on it;
  - ``too_much``: more than the robot can carry: an unmodelled load (``params["mass_kg"]``, default
    15 kg, on the left wrist through the driver's ``--payload``; the far-reach experiment carries 9 kg; from
    20 kg MuJoCo diverges while the driver settles the robot at reset) while the scenario reaches out.

  What must happen: impossible targets are bounded by the input filter (SEIKO eq. 8), a request the
  Retargeting cannot honour is refused with its reason, a failed QP degrades to a safe output and is
  counted; the robot keeps standing or, when the physics cannot (``too_much``), the driver reports
  the fall and the run ends.

:func:`graph_cases` lists these cases for one shipped graph (the campaign runner,
:mod:`contactflow.faults.campaign`, adds them to its process faults).

This module imports neither dora nor a robot model.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import shlex
import shutil
from typing import Any, Mapping

import numpy as np

from contactflow.errors import ConfigError
from contactflow.faults.cases import FaultCase

__all__ = ["PORT_KINDS", "SCENARIO_KINDS", "GRAPH_KINDS", "SCENARIO_FILES", "INJECTOR_ID", "PortFault", "graph_fault_problems",
           "PortFaultInjector", "edit_graph", "graph_cases", "graph_edges"]

#: Faults injected on one connection by the ``fault_injector`` node.
PORT_KINDS: frozenset[str] = frozenset({"nan", "inf", "wrong_length", "flood"})
#: Faults that swap the operator's scenario (Talos SEIKO graphs).
SCENARIO_KINDS: frozenset[str] = frozenset({"infeasible_qp", "far_contact", "too_much"})
#: Every fault kind :func:`edit_graph` applies (the campaign's graph faults).
GRAPH_KINDS: set[str] = set(PORT_KINDS | SCENARIO_KINDS)

#: scenario fault kind -> scenario file (shipped robot data: resolvable from any folder).
SCENARIO_FILES: Mapping[str, str] = {
    "infeasible_qp": "robots/talos/scenarios/fault_infeasible_targets.yaml",
    "far_contact": "robots/talos/scenarios/fault_far_contact.yaml",
    "too_much": "robots/talos/scenarios/fault_too_much.yaml",
}
#: ``too_much``: the unmodelled load's link and default mass [kg] (Talos left wrist).
TOO_MUCH_LINK = "arm_left_7_link"
TOO_MUCH_MASS_KG = 15.0
#: Copies of one message in a ``flood`` (a shipped lockstep queue holds 100; dora's backpressure cap
#: is 10 x the queue size).
FLOOD_COPIES = 1000
#: Node id of the inserted injector (the next ones in one graph: ``fault_injector_1``, ...).
INJECTOR_ID = "fault_injector"
_INJECTOR_KIND = "fault_injector"
#: Nodes whose inputs are not fault targets: the recorder and the viewer (observers; the recorder's
#: own faults are the runner's ``recorder_kill`` / ``disk_full``).
_OBSERVERS = frozenset({"recorder", "viewer"})


@dataclasses.dataclass(frozen=True)
class PortFault:
    """One fault on one connection.

    Attributes:
        kind: one of :data:`PORT_KINDS`.
        at_s: the fault starts at the first message whose simulated time (metadata ``t``; a
            multi-tick message: its last ``row_t``) is >= ``at_s`` [s].
        count: ``nan``/``inf``/``wrong_length``: messages faulted (consecutive, >= 1); ``flood``:
            copies of the message sent in the burst (>= 1).
        index: ``nan``/``inf``: only the value at this index (None: every value).

    Raises:
        ConfigError: an unknown kind, a non-finite or negative time, a count < 1.
    """

    kind: str
    at_s: float
    count: int = 1
    index: int | None = None

    def __post_init__(self):
        if self.kind not in PORT_KINDS:
            raise ConfigError(f"port fault: unknown kind {self.kind!r}; expected one of {sorted(PORT_KINDS)}")
        if not (math.isfinite(self.at_s) and self.at_s >= 0):
            raise ConfigError(f"port fault: at_s must be a finite time >= 0 [s], got {self.at_s!r}")
        if int(self.count) < 1:
            raise ConfigError(f"port fault: count must be >= 1, got {self.count!r}")
        if self.index is not None and self.kind not in ("nan", "inf"):
            raise ConfigError(f"port fault: index applies to nan/inf only, not {self.kind!r}")


def _message_time(metadata: Mapping[str, Any]) -> float | None:
    rows = metadata.get("row_t")
    if isinstance(rows, (list, tuple)) and rows:
        return float(rows[-1])
    t = metadata.get("t")
    return float(t) if isinstance(t, (int, float)) else None


class PortFaultInjector:
    """Applies a :class:`PortFault` to a stream of messages (the ``fault_injector`` node's logic).

    :meth:`process` takes one received message and returns the messages to forward in its place.
    Keep-alive re-sends (metadata ``repeat``, ``nodes/_runtime.py`` Sender.repeat) are forwarded
    unchanged: the faulted message is always one the receiver uses.
    ``fired`` holds ``(seq, t)`` of the first faulted message (None before); ``faulted`` counts the
    messages faulted (a flood: the copies sent).
    """

    def __init__(self, fault: PortFault):
        self.fault = fault
        self.fired: tuple[int | None, float] | None = None
        self.faulted = 0
        self._left = 1 if fault.kind == "flood" else int(fault.count)

    @property
    def done(self) -> bool:
        """True once every faulted message has been produced."""
        return self._left == 0

    def process(self, values: np.ndarray, metadata: Mapping[str, Any]) -> list[tuple[np.ndarray, dict]]:
        """The messages to send for one received message ``(values, metadata)``.

        Args:
            values: the message's flat float64 values (any size).
            metadata: its metadata (``seq``, ``t``, ...), forwarded unchanged.

        Returns:
            ``[(values, metadata), ...]``: the message itself before the fault time and after the
            fault; a corrupted copy while it lasts; ``count`` copies for a flood.
        """
        md = dict(metadata)
        t = _message_time(md)
        # a re-send (``repeat``: a keep-alive, a re-sent end of run) is never the faulted message: receivers skip it
        # (Lockstep; a re-sent end of run only stands in for a lost original)
        if self._left == 0 or t is None or t < self.fault.at_s or md.get("repeat", False):
            return [(values, md)]
        if self.fired is None:
            seq = md.get("seq")
            self.fired = (int(seq) if isinstance(seq, int) else None, float(md.get("t", t)))
        self._left -= 1
        kind = self.fault.kind
        if kind == "flood":
            self.faulted += self.fault.count
            return [(values, md)] * int(self.fault.count)
        self.faulted += 1
        vec = np.array(values, dtype=np.float64, copy=True).reshape(-1)
        if kind == "wrong_length":
            return [(vec[:-1] if vec.size else np.zeros(1), md)]
        bad = np.nan if kind == "nan" else np.inf
        if self.fault.index is None:
            vec[:] = bad
        else:
            vec[int(self.fault.index) % max(vec.size, 1)] = bad
        return [(vec, md)]


# ---------------------------------------------------------------------------------------- graph edits
def _source(spec) -> str | None:
    return spec if isinstance(spec, str) else (spec or {}).get("source") if isinstance(spec, dict) else None


def _kind(node: Mapping) -> str:
    from contactflow.paths import node_kind

    path = str(node.get("path", ""))
    return str(node.get("id", "")) if path == "dynamic" else node_kind(path)


def graph_edges(graph: Mapping) -> list[tuple[str, str]]:
    """The connections of ``graph`` that port faults target: ``(source "node/output", destination
    "node/input")`` for every input of every node that is not an observer (recorder, viewer) or an
    injector already inserted, and
    whose source is a node's output (not a dora timer), in the graph's order."""
    out = []
    for n in graph.get("nodes") or []:
        if not isinstance(n, dict) or _kind(n) in _OBSERVERS | {_INJECTOR_KIND} or n.get("id") in _OBSERVERS:
            continue
        for port, spec in (n.get("inputs") or {}).items():
            src = _source(spec)
            if src and not src.startswith("dora/"):
                out.append((src, f"{n['id']}/{port}"))
    return out


def _injector_path() -> str:
    """``path:`` of the injector node: its installed executable, else its module file (a script node)."""
    from contactflow.paths import node_script

    script = node_script(_INJECTOR_KIND)
    if shutil.which(script):
        return script
    import importlib.util

    return str(importlib.util.find_spec(f"contactflow.nodes.{_INJECTOR_KIND}").origin)


def _port_fault(case: FaultCase) -> PortFault:
    p = dict(case.params)
    count = p.get("count", FLOOD_COPIES if case.kind == "flood" else 1)
    try:
        return PortFault(case.kind, float(case.at_s), int(count), None if p.get("index") is None else int(p["index"]))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"fault case {case.name}: params {p}: {exc}") from None


def _insert_injector(graph: dict, case: FaultCase) -> dict:
    fault = _port_fault(case)
    if not case.port:
        raise ConfigError(f"fault case {case.name}: a {case.kind} fault targets a connection: target must be "
                          f"'node/output', got {case.target!r}")
    nodes = graph.get("nodes") or []
    ids = {n.get("id") for n in nodes if isinstance(n, dict)}
    nid = next(i for i in (INJECTOR_ID if j == 0 else f"{INJECTOR_ID}_{j}" for j in range(len(ids) + 1)) if i not in ids)
    to = case.params.get("to")
    edges = [(s, d) for s, d in graph_edges(graph) if s == case.target and (to is None or d == to)]
    if not edges:
        known = sorted({f"{s} -> {d}" for s, d in graph_edges(graph)})
        want = f"{case.target} -> {to}" if to else case.target
        raise ConfigError(f"fault case {case.name}: {case.graph}: no connection {want!r}; its connections: {known}")
    dests = {d for _, d in edges}
    queue: dict[str, Any] = {}
    for n in nodes:
        for port, spec in list((n.get("inputs") or {}).items()):
            if f"{n['id']}/{port}" not in dests:
                continue
            if isinstance(spec, dict):
                queue = queue or {k: v for k, v in spec.items() if k != "source"}
                n["inputs"][port] = {**spec, "source": f"{nid}/out"}
            else:
                n["inputs"][port] = f"{nid}/out"
    args = ["--fault", fault.kind, "--at-s", repr(fault.at_s), "--count", str(fault.count),
            "--target", case.target, "--to", ",".join(sorted(dests))]
    if fault.index is not None:
        args += ["--index", str(fault.index)]
    entry = {"id": nid, "path": _injector_path(), "args": shlex.join(args),
             "inputs": {"in": {"source": case.target, **queue} if queue else case.target}, "outputs": ["out"]}
    _drop_local_readers(nodes, case.target)
    dest_nodes = [n for n in nodes if isinstance(n, dict) and any(d.startswith(f"{n.get('id')}/") for d in dests)]
    env = _scheduling_env(dest_nodes)
    if env:
        entry["env"] = env
    graces = [n["finish_grace_secs"] for n in dest_nodes if isinstance(n.get("finish_grace_secs"), (int, float))]
    if graces:  # dora waits for the longest grace of the nodes still running: not dora's 120 s default
        entry["finish_grace_secs"] = max(graces)
    nodes.append(entry)
    return graph


def _drop_local_readers(nodes: list, target: str) -> None:
    """The injector reads ``target`` (``node/output``) through dora, so that output goes through dora to every
    reader (nodes/_local.py): the readers still on it drop it from their ``CONTACTFLOW_LOCAL_INPUTS`` (the
    declaration would be idle, a wiring problem), in place."""
    from contactflow.nodes._local import LOCAL_INPUTS_ENV, parse_local_inputs

    for n in nodes:
        if not isinstance(n, dict) or not isinstance(n.get("env"), dict):
            continue
        listed = parse_local_inputs(n["env"].get(LOCAL_INPUTS_ENV))
        inputs = n.get("inputs") or {}
        keep = [i for i in listed if _source(inputs.get(i)) != target]
        if keep != listed:
            n["env"] = {k: v for k, v in n["env"].items() if k != LOCAL_INPUTS_ENV}
            if keep:
                n["env"][LOCAL_INPUTS_ENV] = " ".join(keep)


def _scheduling_env(dest_nodes: list[dict]) -> dict:
    """The CPU scheduling of the injector: that of its destination node(s) (``CONTACTFLOW_RT_PRIORITY``:
    the highest, ``CONTACTFLOW_NICE``: the lowest). In a real-time graph whose stages run SCHED_FIFO, an
    injector at the normal priority is starved on a busy machine (measured: 62 of ~1000 messages
    forwarded in 2 s of a loaded 2-core run, the stop never reached the driver)."""
    prio, nice = [], []
    for n in dest_nodes:
        env = n.get("env") or {}
        for key, into in (("CONTACTFLOW_RT_PRIORITY", prio), ("CONTACTFLOW_NICE", nice)):
            try:
                if key in env:
                    into.append(int(str(env[key]).strip()))
            except ValueError:
                pass
    out = {}
    if prio:
        out["CONTACTFLOW_RT_PRIORITY"] = max(prio)
    if nice:
        out["CONTACTFLOW_NICE"] = min(nice)
    return out


def _node_args(node: dict) -> list[str]:
    return shlex.split(str(node.get("args", "") or ""))


def _set_arg(args: list[str], flag: str, value: str) -> list[str]:
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a == flag:
            skip = True
            continue
        if a.startswith(flag + "="):
            continue
        out.append(a)
    return out + [flag, value]


def _swap_scenario(graph: dict, case: FaultCase) -> dict:
    nodes = [n for n in graph.get("nodes") or [] if isinstance(n, dict)]
    ops = [n for n in nodes if _kind(n) == "operator" and (case.node in ("", "operator") or n.get("id") == case.node)]
    drivers = [n for n in nodes if _kind(n) == "mujoco_driver"]
    robots = {a for n in nodes for a in [_arg(_node_args(n), "--robot")] if a}
    if not ops or robots - {"talos"}:
        raise ConfigError(f"fault case {case.name}: {case.graph}: a {case.kind} fault needs a Talos SEIKO graph with a "
                          f"scenario operator (node kind 'operator'); this graph has none")
    scenario = str(case.params.get("scenario") or case.scenario or SCENARIO_FILES[case.kind])
    for n in ops:
        n["args"] = shlex.join(_set_arg(_node_args(n), "--scenario", scenario))
    if case.kind == "too_much":
        if not drivers:
            raise ConfigError(f"fault case {case.name}: {case.graph}: too_much needs the mujoco_driver (its --payload)")
        mass = float(case.params.get("mass_kg", TOO_MUCH_MASS_KG))
        link = str(case.params.get("link", TOO_MUCH_LINK))
        if not (math.isfinite(mass) and mass > 0):
            raise ConfigError(f"fault case {case.name}: params.mass_kg must be > 0 [kg], got {mass!r}")
        for n in drivers:
            n["args"] = shlex.join(_node_args(n) + ["--payload", f"{link}:{mass:g}"])
    return graph


def _arg(args: list[str], flag: str) -> str | None:
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def edit_graph(graph: dict, case: FaultCase) -> dict:
    """The dataflow ``graph`` (a loaded dora YAML mapping) with the graph fault ``case`` applied.

    Port kinds: a ``fault_injector`` node on the connection(s) of ``case.target`` (``node/output``;
    ``case.params["to"] = "node/input"`` restricts it to one destination), the destinations rewired
    to its output with their queue settings; its id is :data:`INJECTOR_ID`, or ``fault_injector_<j>``
    when the graph already has one (several faults in one run: apply ``edit_graph`` again). Scenario kinds: the operator's ``--scenario`` replaced
    (``params["scenario"]``, else ``case.scenario``, else :data:`SCENARIO_FILES`); ``too_much`` also
    adds the driver's ``--payload``. The input mapping is not modified (a deep copy is returned).

    Raises:
        ConfigError: a kind that is not a graph fault, a target connection the graph lacks (naming
            its connections), a scenario fault on a graph without a Talos scenario operator.
    """
    if case.kind not in GRAPH_KINDS:
        raise ConfigError(f"fault case {case.name}: kind {case.kind!r} is not a graph fault; "
                          f"graph faults: {sorted(GRAPH_KINDS)}")
    graph = copy.deepcopy(dict(graph))
    if case.kind in PORT_KINDS:
        return _insert_injector(graph, case)
    return _swap_scenario(graph, case)


# ---------------------------------------------------------------------------------------- the cases
#: scenario kind -> simulated time [s] of the scenario's first impossible request (the fault time).
SCENARIO_FAULT_AT_S: Mapping[str, float] = {"infeasible_qp": 0.2, "far_contact": 0.3, "too_much": 0.0}
_DRIVER_KINDS = ("mujoco_driver", "unitree_driver")


def _load_graph(graph: str) -> dict:
    from contactflow.contracts.wiring import load_dataflow
    from contactflow.faults.campaign import DATAFLOWS

    return load_dataflow(DATAFLOWS / graph)


def _main_edge(graph: Mapping, edges: list[tuple[str, str]]) -> tuple[str, str]:
    """The connection the quick port faults use: the command into the robot driver, else the first
    connection of a ``sensors`` output (a replayed robot), else the first."""
    kinds = {n.get("id"): _kind(n) for n in graph.get("nodes") or [] if isinstance(n, dict)}
    for s, d in edges:
        node, _, port = d.partition("/")
        if kinds.get(node) in _DRIVER_KINDS and port == "command":
            return s, d
    return next(((s, d) for s, d in edges if s.endswith("/sensors")), edges[0])


def _reads_values(graph: Mapping, dest: str) -> bool:
    """Whether input ``dest`` ("node/input") of ``graph`` has a contract its node checks: False for an
    input of any contract (the replay's ``ack``: only its ``seq`` paces the replay)."""
    from contactflow.contracts.ports import NODES

    node, _, port = dest.partition("/")
    kinds = {n.get("id"): _kind(n) for n in graph.get("nodes") or [] if isinstance(n, dict)}
    decl = NODES.get(kinds.get(node, ""))
    return not (decl is not None and port in decl.inputs and decl.inputs[port].contract is None)


def _is_log(source: str) -> bool:
    """A batched ``log`` output (``nodes/_runtime.py`` Sender): its values are the recorder's; a node
    clocked by it (the scenario operator in ahead mode) reads only its metadata."""
    return source.rpartition("/")[2] == "log"


def _scenario_graph(graph: Mapping) -> bool:
    """A Talos graph whose operator plays a scenario file (not the replay's recorded one)."""
    nodes = [n for n in graph.get("nodes") or [] if isinstance(n, dict)]
    ops = [n for n in nodes if _kind(n) == "operator"]
    robots = {_arg(_node_args(n), "--robot") for n in nodes} - {None}
    return bool(ops) and robots <= {"talos"} and not any("--scenario-from-recording" in _node_args(n) for n in ops) \
        and any(_kind(n) == "mujoco_driver" for n in nodes)


def graph_cases(graph: str, quick: bool, seed: int = 0) -> list[FaultCase]:
    """The graph faults of one shipped graph (``dataflows/<graph>``) for the campaign.

    Port faults at a time drawn from ``seed`` on a 2 ms tick between 25 % and 60 % of the campaign's
    run of that graph (:data:`contactflow.faults.campaign.GRAPH_SETUPS`; 2 s if it has none).
    Quick: ``nan`` and ``flood`` on the command into the robot driver (else the first connection of a
    ``sensors`` output, else the first connection), ``inf`` and ``wrong_length`` on two other message
    connections (the middle and the last of the graph's order: on the SEIKO graphs the Retargeting's
    targets and its multi-tick ``desired_rows``). Full: ``nan``, ``inf`` and ``wrong_length`` on every
    connection between the graph's nodes (:func:`graph_edges`), ``flood`` on the quick one.
    Both: the scenario faults on a Talos graph that plays a scenario file (at the time of the
    scenario's first impossible request, :data:`SCENARIO_FAULT_AT_S`).

    Raises:
        ConfigError: the graph cannot be read.
    """
    import random

    from contactflow.faults.campaign import GRAPH_SETUPS

    g = _load_graph(graph)
    setup = GRAPH_SETUPS.get(graph)
    duration = setup.duration_s if setup is not None else 2.0
    rng = random.Random(f"{graph}:{seed}:graph")

    def at() -> float:
        return round(round(rng.uniform(0.25, 0.6) * duration / 0.002) * 0.002, 3)

    edges = graph_edges(g)
    cases: list[FaultCase] = []
    if edges:
        main = _main_edge(g, edges)
        # quick: the kinds spread over the message connections (a log batch's values are only recorded)
        spread = [main] + [e for e in edges if e != main and not _is_log(e[0]) and _reads_values(g, e[1])]
        for i, kind in enumerate(("nan", "inf", "wrong_length")):
            targets = [spread[(i * len(spread)) // 2 if i < 2 else -1]] if quick else edges
            cases += [FaultCase(graph, kind, s, at(), {"to": d}, seed=seed) for s, d in targets]
        cases.append(FaultCase(graph, "flood", main[0], at(), {"to": main[1], "count": FLOOD_COPIES}, seed=seed))
    if _scenario_graph(g):
        for kind in ("infeasible_qp", "far_contact", "too_much"):
            params = {"mass_kg": TOO_MUCH_MASS_KG} if kind == "too_much" else {}
            cases.append(FaultCase(graph, kind, "operator", SCENARIO_FAULT_AT_S[kind], params, seed=seed,
                                   scenario=SCENARIO_FILES[kind]))
    return cases


# ---------------------------------------------------------------------------------------- outcome
#: scenario kind -> (log text that shows the system handled it, what it means). ``too_much`` has none:
#: whether the Controller's torque guard (12) engages depends on the timing (seen in lockstep, not in the
#: real-time graph); the robot standing is its criterion (the runner's).
SCENARIO_EVIDENCE: Mapping[str, tuple[str, str]] = {
    "infeasible_qp": ("last supporting", "the contradictory request (both feet off) refused"),
    "far_contact": ("from the nearest surface", "the contact in free air refused"),
}


#: Words of a node's line refusing a malformed message (Lockstep, the real-time driver, PRIME's check).
_REFUSALS = ("malformed", "non-finite", "expected")


def graph_fault_problems(case: FaultCase, lines: list[str]) -> list[str]:
    """What the log of a graph-fault run (``dora run`` output, ``lines``) lacks against the expected
    handling (module docstring); [] when every expected line is there.

    Port faults: the injector's line saying the fault started; for ``nan``/``inf``/``wrong_length``
    also the destination node's line refusing a malformed message on its input (naming the input; in a
    not in a real-time graph, where a stage may skip the faulted message for a newer one: there the
    runner's robot and exit criteria decide),
    except on a ``log`` output (its values are only recorded; the recorder is not a target) and into an
    input of any contract (the replay's ``ack``, whose values nothing reads).
    Scenario faults: the evidence of :data:`SCENARIO_EVIDENCE` (a refusal).
    The robot's state, the exit code and the recording are judged by the campaign runner.
    """
    problems = []
    if case.kind in PORT_KINDS:
        fired = [ln for ln in lines if f"[fault_injector] {case.kind} on {case.target}" in ln and " from t = " in ln]
        if not fired:
            return [f"the injector never applied the fault (no message of {case.target} at t >= {case.at_s:g} s)"]
        if case.kind != "flood" and not _is_log(case.target):
            dests = [case.params["to"]] if case.params.get("to") else []
            try:
                g = _load_graph(case.graph)
                args = {n.get("id"): _node_args(n) for n in g.get("nodes") or [] if isinstance(n, dict)}
                dests = [d for d in dests if _reads_values(g, d) and "--realtime" not in args.get(d.partition("/")[0], [])]
            except ConfigError:  # not a shipped graph: every destination is expected to check
                pass
            for d in dests:
                node, _, port = d.partition("/")
                if not any(f"{node}:" in ln and any(w in ln for w in _REFUSALS) and (f"'{port}'" in ln or f" {port} " in ln)
                           for ln in lines):
                    problems.append(f"{node} did not report the malformed message on its input {port!r}")
    elif case.kind in SCENARIO_EVIDENCE:
        text, what = SCENARIO_EVIDENCE[case.kind]
        if not any(text in ln for ln in lines):
            problems.append(f"not seen: {what} (no line with {text!r})")
    return problems
