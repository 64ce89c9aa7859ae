"""``contactflow run GRAPH.yml [dora run options]``: ``dora run`` with the reason of a failure last.

When a node fails, ``dora run`` prints the node's one clear contactflow error line among ~80 lines
of dora's own log (each other node's "stopping" line, dora's cascading-error lines) and a Rust
stack backtrace. This command reads the graph first (a YAML error or a key given twice in one mapping: one line, exit
2, before dora starts; dora keeps the last of two equal keys in ``inputs:`` or ``env:``), then runs
``dora run GRAPH.yml [options]`` unchanged (same environment, same working directory), streams its
output as it comes, and, when the run fails, ends with a
short report: the node(s) that failed first, each with its contactflow error line (or dora's line
for a node that is not a contactflow node, or the last line of a Python traceback), and the nodes
that only stopped because of them. It exits with ``dora run``'s exit code.

The report is read from the output (:func:`failure_report`), in the forms ``nodes/_runtime.py``
``node_main`` prints (``[contactflow] node 'X' failed: ...`` for a bad configuration, scenario or
message contract, ``... crashed:`` + traceback, ``... stopping: ...`` for a node ended by another
one's failure) and dora 1.1 prints (``X: daemon exited with code N``, ``marking `X` as cascading
error caused by `Y```, ``Node `X` failed: ...``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterable

from contactflow.errors import ConfigError, ContactflowError

__all__ = ["NodeFailure", "parse_failures", "failure_report", "dora_error_cause", "dora_executable", "run_dataflow", "add_parser"]

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_CF = re.compile(r"\[contactflow\] node '(?P<node>[^']+)' (?P<kind>failed|crashed|stopping)(?::\s*(?P<msg>.*))?$")
_EXIT = re.compile(r"(?P<node>[\w.-]+): daemon exited with code (?P<code>-?\d+)")
_SIGNALLED = re.compile(r"(?P<node>[\w.-]+): daemon exited because of signal (?P<sig>\w+)")
_HUNG = re.compile(r"(?P<node>[\w.-]+): daemon node was killed by dora because it didn't react to a stop message in time")
_CASCADE = re.compile(r"marking `(?P<node>[^`]+)` as cascading error caused by `(?P<cause>[^`]+)`")
_DORA_FAILED = re.compile(r"^Node `(?P<node>[^`]+)` failed: (?P<msg>.*?)(?: with stderr output:)?$")
_EXC_LINE = re.compile(r"^(?P<exc>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)(?::.*)?)$")
_ARGPARSE = re.compile(r"^(?P<prog>[\w.-]+): error: (?P<msg>.+)$")  # argparse: a bad command-line argument
_STAMP = re.compile(r"^\d\d:\d\d:\d\d ")  # a line of dora's own log (or a node's prefixed output)
_PREFIX = re.compile(r"^\d\d:\d\d:\d\d (?:stdout|stderr)\s+(?P<node>[\w.-]+): (?P<text>.*)$")


@dataclasses.dataclass
class NodeFailure:
    """What the output says about one node that did not end normally.

    Attributes:
        node: node id.
        exit_code: its exit code (dora's "exited with code N"), or None if not printed.
        message: its contactflow error line (after ``failed:``), the last line of its traceback,
            or dora's line about it; "" if none.
        kind: ``"failed"`` (a contactflow error), ``"crashed"`` (an unexpected exception),
            ``"stopping"`` (ended because another node failed), ``""`` (only dora's lines).
        caused_by: the node whose failure dora says caused this one, or "".
    """

    node: str
    exit_code: int | None = None
    message: str = ""
    kind: str = ""
    caused_by: str = ""

    @property
    def consequence(self) -> bool:
        """True for a node that only stopped because another one failed."""
        return self.kind == "stopping" or (bool(self.caused_by) and self.kind not in ("failed", "crashed"))


def parse_failures(lines: Iterable[str]) -> dict[str, NodeFailure]:
    """The failed nodes named in ``dora run``'s output (module docstring), in order of appearance.

    A node's output lines come prefixed by dora (``HH:MM:SS stdout <node>: <text>``); the last
    line of a Python traceback in them (``ValueError: ...``) is the message of a node that crashed
    or that printed no contactflow line.
    """
    out: dict[str, NodeFailure] = {}
    last_exc: dict[str, str] = {}

    def get(node: str) -> NodeFailure:
        return out.setdefault(node, NodeFailure(node))

    block = None  # the node whose stderr dora is quoting ("<node>: daemon exited with code N with stderr output:")
    for raw in lines:
        line = _ANSI.sub("", raw).rstrip()
        p = _PREFIX.match(line)
        text = p["text"] if p else line.strip()
        if _STAMP.match(line) or p:
            block = None
            q = _EXIT.search(line)
            if q and line.endswith("with stderr output:"):
                block = q["node"]
        else:
            q = _DORA_FAILED.match(text)
            if q:
                block = q["node"] if line.endswith("with stderr output:") else None
        m = _CF.search(text)
        if m:
            # the dora id from dora's prefix, or of the stderr block dora quotes, when there is one: a
            # replay node names itself 'replay' while its id is the node it stands in for
            f = get(p["node"] if p else block or m["node"])
            kind, msg = m["kind"], (m["msg"] or "").strip()
            if kind != "stopping" or f.kind in ("", "stopping"):
                f.kind = kind
                if msg:
                    f.message = msg
            continue
        if p:
            em = _EXC_LINE.match(p["text"])
            if em:
                last_exc[p["node"]] = em["exc"]
            am = _ARGPARSE.match(p["text"])
            if am:  # argparse's exit (code 2) before the node's own error handling: its args in the graph
                last_exc[p["node"]] = f"{am['prog']}: error: {am['msg']} (the node's args in the graph)"
            continue
        m = _EXIT.search(line)
        if m:
            get(m["node"]).exit_code = int(m["code"])
            continue
        m = _SIGNALLED.search(line)  # killed by a signal (SIGKILL, ...): dora's first line about it
        if m:
            f = get(m["node"])
            f.message = f.message or f"exited because of signal {m['sig']}"
            continue
        m = _HUNG.search(line)  # alive but not reading (a hang): dora killed it at the end of the run
        if m:
            f = get(m["node"])
            f.message = f.message or "node was killed by dora because it didn't react to a stop message in time (SIGKILL)"
            continue
        m = _CASCADE.search(line)
        if m:
            get(m["node"]).caused_by = m["cause"]
            continue
        m = _DORA_FAILED.match(text)
        if m and not get(m["node"]).message:
            out[m["node"]].message = m["msg"]
    for node, exc in last_exc.items():
        f = out.get(node)
        if f is not None and (f.kind == "crashed" or not f.kind):
            f.message = exc
    return out


def failure_report(lines: Iterable[str], returncode: int, graph: str = "") -> list[str]:
    """The concise report printed at the end of a failed run (empty when ``returncode`` is 0).

    Args:
        lines: the run's output lines.
        returncode: ``dora run``'s exit code.
        graph: the dataflow file, for the title.
    """
    if returncode == 0:
        return []
    lines = list(lines)  # read twice: the failures, then dora's own cause
    failures = parse_failures(lines)
    first = [f for f in failures.values() if not f.consequence]
    after = [f for f in failures.values() if f.consequence]
    title = f"contactflow run: the dataflow {graph + ' ' if graph else ''}failed (dora run exit code {returncode})"
    report = ["", "=" * min(len(title), 100), title]
    text = "".join(lines)
    if not first and not after and "Caused by:" in text:  # dora refused the run itself (e.g. the graph's YAML)
        report.append(f"  dora: {dora_error_cause(text)[:500]}")
    elif not first and not after:
        report.append("  no node reported a failure; read dora's output above")
    for f in first:
        code = f" (exit code {f.exit_code})" if f.exit_code is not None else ""
        what = "crashed" if f.kind == "crashed" else "failed"
        report.append(f"  node {f.node} {what}{code}: {f.message or 'no error line; see its output above'}")
    if after:
        report.append(f"  stopped because of it: {', '.join(f.node for f in after)}")
    return report


def dora_error_cause(text: str) -> str:
    """dora's error output reduced to its cause, on one line: the text after ``Caused by:`` up to ``Location:`` (dora's
    source location and backtrace dropped); the whole text when it has no ``Caused by:``."""
    if "Caused by:" in text:
        text = text.split("Caused by:", 1)[1].split("Location:", 1)[0]
    return " ".join(text.split())


def dora_executable() -> str:
    """The ``dora`` CLI of this Python environment (beside the interpreter), else the one on PATH.

    Raises:
        ContactflowError: no ``dora`` executable.
    """
    local = Path(sys.executable).parent / "dora"
    if local.exists():
        return str(local)
    found = shutil.which("dora")
    if found is None:
        raise ContactflowError("the dora CLI was not found (package dora-rs-cli, a core dependency: "
                               "uv pip install -e . in a checkout)")
    return found


def _near_graph(path: Path) -> str:
    """`` (did you mean 'X'?)`` for a graph file not found: a close name in its folder, or the shipped graph of that
    name (``seiko_talos`` or ``seiko_talos.yml`` typed without ``dataflows/``); else ``""``."""
    from contactflow.config import near_file_names
    from contactflow.paths import data_root

    if not path.name:  # ".", "/", ""
        return ""
    plain = path.suffix in ("", ".yaml")  # seiko_talos, seiko_talos.yaml (not seiko_talos.realtime: no suffix cut)
    for cand in (path.with_suffix(".yml") if plain else None, data_root() / "dataflows" / path.name,
                 data_root() / "dataflows" / f"{path.stem}.yml" if plain else None):
        if cand is not None and cand.is_file():
            shown = os.path.relpath(cand)
            return f" (did you mean {shown if not shown.startswith('../..') else str(cand)!r}?)"
    return near_file_names(path)


def run_dataflow(graph: str, dora_args: list[str], out=None) -> int:
    """Run ``dora run graph *dora_args``, stream its output to ``out``, then print the report.

    Returns:
        ``dora run``'s exit code.

    Raises:
        ConfigError: ``graph`` is not a file, not valid YAML, has a key given twice in one mapping, or an ``env:``
            value dora refuses (:func:`contactflow.contracts.wiring.check_env_values`).
    """
    out = sys.stdout if out is None else out
    if not Path(graph).is_file():
        raise ConfigError(f"{graph}: dataflow file not found{_near_graph(Path(graph))}")
    from contactflow.contracts.wiring import check_env_values, load_dataflow

    # a YAML error or a key given twice: one line naming the file and line; an env: value dora refuses (its own
    # message names neither the variable nor the node, after a backtrace): named; both before dora starts
    refused = check_env_values(load_dataflow(graph))
    if refused:
        raise ConfigError(f"{graph}: " + "; ".join(str(p) for p in refused))
    cmd = [dora_executable(), "run", graph, *dora_args]
    lines: list[str] = []
    from contactflow.paths import scripts_env

    # the nodes' executables on PATH, and dora's `uv run which <node>` without a project sync
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=scripts_env())
    try:
        for raw in proc.stdout:
            text = raw.decode(errors="replace")
            out.write(text)
            out.flush()
            lines.append(text)
        rc = proc.wait()
    except KeyboardInterrupt:  # the terminal sent SIGINT to dora too: let it stop the dataflow
        rc = proc.wait()
    for line in failure_report(lines, rc, graph):
        print(line, file=out, flush=True)
    return rc


def _run(args) -> int:
    return run_dataflow(args.graph, list(args.dora_args))


def add_parser(sub) -> None:
    p = sub.add_parser(
        "run", help="dora run GRAPH with a short failure report at the end (failed node and its error line)",
        description="Runs `dora run GRAPH [DORA_ARGS...]` (output streamed unchanged) and, when the run fails, ends "
                    "with the node(s) that failed first and their error line, then the nodes that only stopped "
                    "because of them. Exits with dora's exit code.")
    p.add_argument("graph", help="dataflow YAML file")
    p.add_argument("dora_args", nargs=argparse.REMAINDER, help="passed to `dora run` (e.g. --log-level info)")
    p.set_defaults(func=_run)
