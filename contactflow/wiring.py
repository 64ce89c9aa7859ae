"""Static wiring check of a dataflow YAML against the node contracts (:mod:`contactflow.messages`).

A node's kind comes from its ``path`` (``contactflow-seiko-controller`` or ``../nodes/seiko_controller.py`` ->
``seiko_controller``: :func:`contactflow.paths.node_kind`);
its ports and their contracts come from ``NODE_PORTS``, the schemas from ``port_specs(robot)`` for the
robot of the node's ``--robot`` argument (default ``talos``). A ``replay`` node's outputs take the
contracts of the recorded streams named by its ``--streams`` argument; a ``recorder`` accepts any
input. Nodes of other kinds (test fixtures, future nodes) are not checked, but edges into a checked
node from them are reported if their source output is not declared.

Checked: every contract input of a known node is wired and no unknown input is; every contract
output is declared (an undeclared output is silently dropped by dora); every edge's source node
and output exist; both ends of an edge carry the same contract and size. Dataflows that use dora
modules (``module:``) are expanded with ``dora expand`` first.

A node may declare the output ``log`` (``LOG_OUTPUT``: its outputs batched for the recorder, see
``nodes/_runtime.py`` Sender); such a node sends the outputs it does not declare only in its log, so
an undeclared contract output is then not a problem (an edge from it still is). An output
``<output>_rows`` carries ``<output>``'s messages several ticks per message: same contract.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import yaml

from contactflow.errors import ConfigError
from contactflow.messages import NODE_PORTS, PortSpec
from contactflow.paths import node_kind

__all__ = ["WiringProblem", "check_dataflow", "check_descriptor", "load_dataflow", "OPTIONAL_INPUTS", "LOG_OUTPUT", "HEARTBEAT_INPUT"]

#: The batched-log output every contactflow node may declare (nodes/_runtime.py Sender).
LOG_OUTPUT = "log"
#: ``<output>_rows``: the messages of ``<output>`` several ticks per message (same contract).
ROWS_SUFFIX = "_rows"

#: The keep-alive timer input of the LAC controllers (``heartbeat: dora/timer/millis/5``;
#: nodes/_runtime.py KeepAlive): optional, wired to a dora timer.
HEARTBEAT_INPUT = "heartbeat"
#: Nodes that take :data:`HEARTBEAT_INPUT`.
HEARTBEAT_NODES = frozenset({"lac_expert", "lac_policy"})

#: Inputs a node works without (its docstring says "optional"). A ``NODE_PORTS`` entry may also
#: list them under the key ``"optional"``.
OPTIONAL_INPUTS: dict[str, set[str]] = {"seiko_retargeting": {"command"}}


@dataclasses.dataclass(frozen=True)
class WiringProblem:
    """One wiring error: the node, the port and what was expected."""

    node: str
    port: str
    message: str

    def __str__(self) -> str:
        return f"node {self.node!r} port {self.port!r}: {self.message}"


@lru_cache(maxsize=8)
def _specs(robot: str) -> dict[str, PortSpec]:
    from contactflow.messages import port_specs
    from contactflow.robot import load_robot

    return port_specs(load_robot(robot))


def _schema(spec: PortSpec) -> str:
    fields = ", ".join(f"{f.name}[{f.size}]" for f in spec.fields)
    return f"contract {spec.name!r}: float64[{spec.size}] = {fields}"


def _arg(args: list[str], flag: str, default: str | None = None) -> str | None:
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return default


def load_dataflow(path: str | Path) -> dict:
    """Read a dataflow YAML, expanding dora modules with ``dora expand`` when it uses any.

    Raises:
        ConfigError: unreadable YAML, no ``nodes`` list, or a failed module expansion.
    """
    path = Path(path)
    try:
        flow = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read the dataflow: {exc}") from None
    if not isinstance(flow, dict) or not isinstance(flow.get("nodes"), list):
        raise ConfigError(f"{path}: not a dora dataflow (no 'nodes' list)")
    if any(isinstance(n, dict) and "module" in n for n in flow["nodes"]):
        dora = shutil.which("dora") or str(Path(sys.executable).parent / "dora")
        env = dict(os.environ, RUST_BACKTRACE="0", RUST_LIB_BACKTRACE="0")
        proc = subprocess.run([dora, "expand", str(path)], capture_output=True, text=True, timeout=60, env=env)
        if proc.returncode != 0:
            err = proc.stderr
            if "Caused by:" in err:  # keep the cause, drop dora's location and backtrace
                err = err.split("Caused by:", 1)[1].split("Location:", 1)[0]
            raise ConfigError(f"{path}: `dora expand` failed: {' '.join(err.split())[:500]}")
        flow = yaml.safe_load(proc.stdout)
    return flow


def check_dataflow(path: str | Path) -> list[WiringProblem]:
    """Check the wiring of a dataflow file (see the module docstring).

    Returns:
        The problems found (empty when the wiring matches the contracts).

    Raises:
        ConfigError: the file is not a readable dataflow.
    """
    return check_descriptor(load_dataflow(path))


def _source(spec) -> str | None:
    return spec if isinstance(spec, str) else (spec or {}).get("source")


def check_descriptor(flow: dict) -> list[WiringProblem]:
    """Check an already loaded (flat) dataflow descriptor; see :func:`check_dataflow`."""
    problems: list[WiringProblem] = []
    nodes = {n["id"]: n for n in flow["nodes"] if isinstance(n, dict) and "id" in n}
    # contract of every output of every known node: (node id, output) -> PortSpec
    out_specs: dict[tuple[str, str], PortSpec] = {}
    in_specs: dict[tuple[str, str], PortSpec] = {}
    kinds: dict[str, str] = {}
    for nid, n in nodes.items():
        kind = node_kind(str(n.get("path", "")))
        kinds[nid] = kind
        args = shlex.split(str(n.get("args", "") or ""))
        declared = [str(o) for o in (n.get("outputs") or [])]
        if kind == "replay":
            streams = _arg(args, "--streams", "") or ""
            for item in [s.strip() for s in streams.split(",") if s.strip()]:
                name, _, out = item.partition("=")
                rec_node, _, rec_out = name.rpartition(".")
                out = out or rec_out
                contract = NODE_PORTS.get(rec_node.rsplit(".", 1)[-1], {}).get("outputs", {}).get(rec_out)
                if contract is None:
                    continue
                specs = _specs(_arg(args, "--robot", "talos"))
                out_specs[(nid, out)] = specs[contract]
                if out not in declared:
                    problems.append(WiringProblem(nid, out, f"replayed stream {name!r} is sent on output {out!r}, "
                                                            f"which is not in the node's outputs {declared}"))
            continue
        ports = NODE_PORTS.get(kind)
        if ports is None or kind == "recorder":
            continue
        specs = _specs(_arg(args, "--robot", "talos"))
        for out, contract in ports["outputs"].items():
            out_specs[(nid, out)] = specs[contract]
            if out not in declared and LOG_OUTPUT not in declared and out not in ports.get("optional_outputs", ()):
                problems.append(WiringProblem(nid, out, f"output not declared in 'outputs' {declared}: the node sends "
                                                        f"{_schema(specs[contract])} and dora would drop it"))
        for out in declared:
            base = out[: -len(ROWS_SUFFIX)] if out.endswith(ROWS_SUFFIX) else None
            if base in ports["outputs"]:  # the same messages, several ticks per message
                out_specs[(nid, out)] = specs[ports["outputs"][base]]
                continue
            if out not in ports["outputs"] and out != LOG_OUTPUT:
                problems.append(WiringProblem(nid, out, f"{kind} has no output {out!r}; its outputs: {sorted(ports['outputs'])}"))
        wired = n.get("inputs") or {}
        optional = OPTIONAL_INPUTS.get(kind, set()) | set(ports.get("optional", ()))
        for port, contract in ports["inputs"].items():
            in_specs[(nid, port)] = specs[contract]
            if port not in wired and port not in optional:
                problems.append(WiringProblem(nid, port, f"input not wired; expected {_schema(specs[contract])}"))
        for port in wired:
            if port == HEARTBEAT_INPUT and kind in HEARTBEAT_NODES:
                if not str(_source(wired[port]) or "").startswith("dora/timer/"):
                    problems.append(WiringProblem(nid, port, f"wired to {_source(wired[port])!r}; expected a dora timer "
                                                             "(dora/timer/millis/5: the keep-alive period)"))
                continue
            if port not in ports["inputs"]:
                problems.append(WiringProblem(nid, port, f"{kind} has no input {port!r}; its inputs: {sorted(ports['inputs'])}"))
    for nid, n in nodes.items():
        for port, spec in (n.get("inputs") or {}).items():
            src = _source(spec)
            if not src:
                problems.append(WiringProblem(nid, port, "input without a source"))
                continue
            expected = in_specs.get((nid, port))
            if src.startswith("dora/"):
                if expected is not None:
                    problems.append(WiringProblem(nid, port, f"wired to {src!r}, expected {_schema(expected)}"))
                continue
            src_node, _, src_out = src.rpartition("/")
            if src_node not in nodes:
                problems.append(WiringProblem(nid, port, f"source {src!r}: no node {src_node!r} in the dataflow"))
                continue
            if src_out not in [str(o) for o in (nodes[src_node].get("outputs") or [])]:
                problems.append(WiringProblem(nid, port, f"source {src!r}: node {src_node!r} declares no output {src_out!r}"))
                continue
            got = out_specs.get((src_node, src_out))
            if expected is not None and got is not None and (got.name != expected.name or got.size != expected.size):
                problems.append(WiringProblem(nid, port, f"wired to {src!r} which carries {_schema(got)}; expected {_schema(expected)}"))
    return problems
