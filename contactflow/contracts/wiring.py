"""Static wiring check of a dataflow YAML against the node port table (:mod:`contactflow.contracts.ports`).

A node's kind comes from its ``path`` (``contactflow-seiko-controller`` or ``../nodes/seiko_controller.py`` ->
``seiko_controller``: :func:`contactflow.paths.node_kind`); a ``path: dynamic`` node (started by the
user's program: the live operator, the live teleop) has the kind of its id when the table has it,
and the robot the graph's other nodes name.
Its ports, their contracts and which are optional come from :data:`contactflow.contracts.ports.NODES`, the
schemas from ``port_specs(robot)`` for the robot of the node's ``--robot`` argument (default
``talos``; contracts of another family, such as PRIME's ``prime_*``, are compared by name). A
``replay`` node's outputs take the contracts of the recorded streams named by its ``--streams``
argument; a ``recorder`` accepts any input (the two free-form kinds). Nodes of other kinds (test
fixtures, future nodes) are not checked (``strict=True``: each is reported), but edges into a
checked node from them are reported if their source output is not declared.

Checked: every required input of a known node is wired and no undeclared input is; an optional input
may be left out, but when wired it must carry its contract like any other; a timer input (the LAC
controllers' ``heartbeat``) must come from a dora timer; every required output is declared (an
undeclared output is silently dropped by dora); every edge's source node and output exist; both
ends of an edge carry the same contract and size. :func:`check_dataflow` also loads each node's
configuration file (``--config``) and scenario file (``--scenario``), a replay node's recording and a policy
node's model, as the node will (:func:`check_config_files`, :func:`check_scenario_files`, :func:`check_run_inputs`;
the environment variables that replace them read as dora sets them, :func:`graph_env_value`) and parses its
``args:`` with the node's own argument parser (:func:`check_node_arguments`), and names a node whose optional
packages are not installed (:func:`check_node_extras`). ``contactflow check`` also names an
executable ``dora run`` would not find on ``PATH`` (:func:`executables_not_on_path`). Dataflows that use
dora modules (``module:``) are expanded with ``dora expand`` first.

A node may declare the output ``log`` (``LOG_OUTPUT``: its outputs batched for the recorder, see
``nodes/_runtime.py`` Sender); such a node sends the outputs it does not declare only in its log, so
an undeclared contract output is then not a problem (an edge from it still is). An output
``<output>_rows`` carries ``<output>``'s messages several ticks per message (``<output>_rows<N>``: N
ticks per message, :func:`rows_output`): same contract.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import yaml

from contactflow.config import read_yaml
from contactflow.errors import ConfigError, ContactflowError
from contactflow.contracts.messages import PortSpec
from contactflow.paths import NODE_SCRIPT_PREFIX, SCENARIO_ENV, node_kind, robot_path_scope, scenario_from_env
from contactflow.contracts.ports import DEFAULT_ROBOT, MESSAGE, NODES, TIMER

__all__ = ["WiringProblem", "check_dataflow", "check_descriptor", "check_config_files", "check_node_arguments",
           "check_env_values", "check_run_inputs", "check_node_extras", "NODE_OPTIONAL_PACKAGES", "env_value",
           "check_scenario_files", "executables_not_on_path", "graph_env_value", "SCENARIO_LOADERS", "load_dataflow",
           "graph_node_kind", "LOG_OUTPUT", "ROWS_SUFFIX", "rows_output"]

#: The batched-log output every contactflow node may declare (nodes/_runtime.py Sender).
LOG_OUTPUT = "log"
#: ``<output>_rows``: the messages of ``<output>`` several ticks per message (same contract).
ROWS_SUFFIX = "_rows"


def rows_output(name: str) -> tuple[str, int | None] | None:
    """``(output, ticks per message)`` of a multi-tick output name: ``desired_rows`` -> ``("desired", None)``
    (the sender's default, ``$CONTACTFLOW_ROWS_EVERY``), ``desired_rows2`` -> ``("desired", 2)``; None for
    any other name (``_rows0`` included)."""
    base, sep, n = name.rpartition(ROWS_SUFFIX)
    if not sep or not base:
        return None
    if n == "":
        return base, None
    if n.isdigit() and n[0] != "0":
        return base, int(n)
    return None


@dataclasses.dataclass(frozen=True)
class WiringProblem:
    """One wiring error: the node (``-``: the graph as a whole), the port and what was expected."""

    node: str
    port: str
    message: str

    def __str__(self) -> str:
        if self.node == "-":  # the graph as a whole (its root env:, a variable every node would read)
            return f"the graph: {self.message}"
        # "-": the node as a whole (not a contactflow node); "$VAR": an environment variable it reads (named in the message)
        if self.port == "-" or self.port.startswith("$"):
            return f"node {self.node!r}: {self.message}"
        if self.port == "args":  # the node's arguments as its own parser reads them
            return f"node {self.node!r} args: {self.message}"
        if self.port.startswith("--"):  # a node argument (a configuration file)
            return f"node {self.node!r} argument {self.port}: {self.message}"
        return f"node {self.node!r} port {self.port!r}: {self.message}"


def _robot_paths(args: list[str], base_dir: Path | None) -> tuple[str, ...]:
    """A node's ``--robot-path`` folders, absolute (relative ones from the dataflow's folder, where dora
    starts the node), in search order (each use goes first, as :class:`contactflow.paths.RobotPathAction`)."""
    dirs = []
    for i, a in enumerate(args):  # in the order given, both spellings
        if a == "--robot-path" and i + 1 < len(args):
            dirs.append(args[i + 1])
        elif a.startswith("--robot-path="):
            dirs.append(a.split("=", 1)[1])
    base = Path.cwd() if base_dir is None else Path(base_dir)
    return tuple(str((base / Path(d).expanduser()).resolve()) for d in reversed(dirs))


@lru_cache(maxsize=8)
def _specs(robot: str, robot_path: tuple[str, ...] = ()) -> dict[str, PortSpec]:
    from contactflow.contracts.messages import port_specs
    from contactflow.robot import load_robot

    with robot_path_scope(*robot_path):
        return port_specs(load_robot(robot))


def _schema(spec: PortSpec | str) -> str:
    if isinstance(spec, str):  # a contract of another family (prime_*): known by name only
        return f"contract {spec!r}"
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
        ConfigError: unreadable YAML, a key given twice in one mapping (dora refuses a node's field given twice,
            "duplicate field", but keeps the last of two equal keys in ``inputs:`` or ``env:``, silently dropping
            the other: refused here in every mapping), no ``nodes`` list, or a failed module expansion.
    """
    path = Path(path)
    flow = read_yaml(path)
    if not isinstance(flow, dict) or not isinstance(flow.get("nodes"), list):
        raise ConfigError(f"{path}: not a dora dataflow (no 'nodes' list)")
    if any(isinstance(n, dict) and "module" in n for n in flow["nodes"]):
        dora = shutil.which("dora") or str(Path(sys.executable).parent / "dora")
        env = dict(os.environ, RUST_BACKTRACE="0", RUST_LIB_BACKTRACE="0")
        proc = subprocess.run([dora, "expand", str(path)], capture_output=True, text=True, timeout=60, env=env)
        if proc.returncode != 0:
            from contactflow.cli.run import dora_error_cause

            raise ConfigError(f"{path}: `dora expand` failed: {dora_error_cause(proc.stderr)[:500]}")
        flow = yaml.safe_load(proc.stdout)
    return flow


def executables_not_on_path(flow: dict, base_dir: str | Path) -> list[WiringProblem]:
    """The nodes whose ``path:`` names an executable that ``dora run`` started from this shell would not find: a bare
    name (no folder, not ``dynamic`` or ``shell``, not a file beside the graph, where dora looks first) found neither
    on ``$PATH`` nor, when ``uv`` is on ``$PATH``, by ``uv run which NAME`` in the graph's folder (dora 1.1 asks uv
    too: it finds a checkout's ``.venv``). The usual cause: the virtual environment contactflow is installed in is
    not activated (``contactflow run`` puts its executables on ``PATH`` itself).
    """
    missing: dict[str, list[str]] = {}  # executable -> the nodes that name it
    found_by_uv: set[str] = set()
    uv = shutil.which("uv")
    for n in flow.get("nodes") or []:
        if not isinstance(n, dict) or "id" not in n:
            continue
        exe = str(n.get("path", ""))
        if (not exe or exe in ("dynamic", "shell") or "/" in exe or "://" in exe or exe.endswith(".py")
                or exe in found_by_uv or (Path(base_dir) / exe).exists() or shutil.which(exe) is not None):
            continue
        if exe not in missing and uv is not None:
            try:
                found = subprocess.run([uv, "run", "--no-sync", "which", exe], cwd=base_dir, capture_output=True,
                                       text=True, timeout=60, env=dict(os.environ, UV_NO_SYNC="1")).returncode == 0
            except (OSError, subprocess.SubprocessError):
                found = False
            if found:
                found_by_uv.add(exe)
                continue
        missing.setdefault(exe, []).append(str(n["id"]))
    if not missing:
        return []
    hints = []
    if any(exe.startswith(NODE_SCRIPT_PREFIX) for exe in missing):
        hints.append("activate the environment contactflow is installed in (e.g. `. .venv/bin/activate`), or start "
                     "the graph with `contactflow run`, which puts its executables first on PATH (dora's error: "
                     "\"Could not find source path\")")
    if not all(exe.startswith(NODE_SCRIPT_PREFIX) for exe in missing):
        hints.append("install the others or give their nodes' paths")
    hint = "; ".join(hints)
    nodes = [i for ids in missing.values() for i in ids]
    # one problem for the graph (each node's would repeat it): on its first node, the others named
    return [WiringProblem(nodes[0], "-", f"{len(missing)} executable(s) not on PATH, where `dora run` looks for them "
                                         f"({', '.join(map(repr, missing))}; nodes {', '.join(nodes)}): {hint}")]


def check_dataflow(path: str | Path, *, strict: bool = False, executables: bool = False) -> list[WiringProblem]:
    """Check the wiring of a dataflow file (see the module docstring).

    Args:
        path: the dataflow YAML.
        strict: also report the nodes that are not contactflow nodes (see :func:`check_descriptor`).
        executables: also report the node executables ``dora run`` started from this shell would not find
            (:func:`executables_not_on_path`; ``contactflow check``).

    Returns:
        The problems found (empty when the wiring matches the contracts).

    Raises:
        ConfigError: the file is not a readable dataflow.
    """
    flow = load_dataflow(path)
    base = Path(path).parent
    return ((executables_not_on_path(flow, base) if executables else []) + check_node_extras(flow) + check_env_values(flow)
            + check_descriptor(flow, strict=strict, base_dir=base) + check_config_files(flow, base)
            + check_scenario_files(flow, base) + check_run_inputs(flow, base) + check_node_arguments(flow, base))


def _load_seiko_scenario(arg: str, robot, args: list[str]) -> None:
    # as the operator node loads it (nodes/operator.py)
    from contactflow.operator.scenario import load_scenario
    from contactflow.paths import resolve_data_path

    load_scenario(resolve_data_path(arg), robot)


def _load_teleop_scenario(arg: str, robot, args: list[str]) -> None:
    # as the teleop and wrench_injector nodes load it (nodes/teleop.py, nodes/wrench_injector.py), with the
    # limits of their --config (a --config that does not load is check_config_files' problem: not loaded here)
    from contactflow.lac.teleop import load_teleop_config, load_teleop_scenario
    from contactflow.paths import resolve_data_path

    try:
        cfg = load_teleop_config(robot, _arg(args, "--config"))
    except ConfigError:
        return
    load_teleop_scenario(resolve_data_path(arg), robot, cfg)


#: node kind -> how it loads the file of its ``--scenario`` (:func:`check_scenario_files`).
SCENARIO_LOADERS = {"operator": _load_seiko_scenario, "teleop": _load_teleop_scenario,
                    "wrench_injector": _load_teleop_scenario}


def check_scenario_files(flow: dict, base_dir: str | Path) -> list[WiringProblem]:
    """Load every ``--scenario`` file given to a node that plays one (:data:`SCENARIO_LOADERS`: the SEIKO
    operator, the G1 teleop and wrench injector) as the node will at its start, in the dataflow's folder: a file
    not found (a bare name is looked up in the robot's ``scenarios/``), not YAML, or with a bad key or value is
    one problem on the port ``--scenario`` with the loader's message. Where ``$CONTACTFLOW_SCENARIO`` is set for
    a node (its own ``env:``, else the graph's ``env:``, else this shell's, as dora passes them: :func:`graph_env_value`),
    its file is loaded instead (as the nodes do; the problem's port names the variable; a value dora refuses is a
    problem there too). A node given ``--scenario-from-recording`` plays the recorded run's scenario: its
    ``--scenario`` is not loaded (:func:`contactflow.paths.scenario_source`).
    A node whose robot does not load (reported by :func:`check_descriptor`) or whose code needs a package not
    installed here is skipped.

    Args:
        flow: the (flat) descriptor.
        base_dir: the dataflow's folder.
    """
    import contextlib

    from contactflow.robot import load_robot

    problems: list[WiringProblem] = []
    nodes = [n for n in flow.get("nodes") or [] if isinstance(n, dict) and "id" in n]
    graph_robot = _graph_robot(nodes)
    for n in nodes:
        kind = node_kind(str(n.get("path", "")))
        load = SCENARIO_LOADERS.get(kind)
        args, _ = _node_args(n)
        if args is None:  # a quote left open: check_node_arguments reports it
            continue
        if load is None:
            continue
        try:
            value = graph_env_value(flow, n, SCENARIO_ENV)  # it replaces the player's scenario, as in the nodes
        except ConfigError:  # a value dora refuses: check_env_values reports it
            continue
        # --scenario-from-recording plays the recorded run's scenario (validated when it was played), not --scenario
        arg = None if _arg(args, "--scenario-from-recording") else _arg(args, "--scenario")
        if not (arg or value):
            continue
        from_env = bool(value)
        port = f"${SCENARIO_ENV}" if from_env else "--scenario"
        with robot_path_scope(*_robot_paths(args, Path(base_dir))), contextlib.chdir(base_dir):
            try:
                robot = load_robot(_arg(args, "--robot", _default_robot(kind, args, graph_robot)))
            except ContactflowError:
                continue
            try:
                load(str(scenario_from_env(value)) if from_env else arg, robot, args)
            except ConfigError as exc:
                named = str(exc).startswith(f"${SCENARIO_ENV}=")  # the variable named already (file not found)
                problems.append(WiringProblem(str(n["id"]), port, str(exc) if named or not from_env
                                              else f"${SCENARIO_ENV}={value}: {exc}"))
            except ImportError:
                continue
    return problems


#: node kind -> (its environment variable that overrides the flag, the flag) naming a file or run it opens at start
RUN_INPUTS = {"replay": ("CONTACTFLOW_RECORDING", "--recording"), "lac_policy": ("CONTACTFLOW_POLICY_MODEL", "--model")}


def check_run_inputs(flow: dict, base_dir: str | Path) -> list[WiringProblem]:
    """Open what a replay node replays and what a policy node loads (:data:`RUN_INPUTS`; the variable where it is set
    for the node, as dora passes it, :func:`graph_env_value`, else the flag), as the node will at its start, in the
    dataflow's folder: a recording named by the variable that is not found, or a recording named (not ``latest``,
    the newest run when the graph starts) that lacks the replayed streams or was recorded with another robot than the
    node's ``--robot`` (a run the graph's own ``--recording`` names but that is not there yet is not a problem: a
    shipped PRIME graph names the run ``contactflow prime generate`` writes first); an ONNX model file not found. One
    problem each, on the port that named it (a variable's problem names it and its value).
    """
    import contextlib

    from contactflow.errors import RecordingError

    problems = []
    for n in flow.get("nodes") or []:
        if not isinstance(n, dict) or "id" not in n:
            continue
        kind = node_kind(str(n.get("path", "")))
        if kind not in RUN_INPUTS:
            continue
        var, flag = RUN_INPUTS[kind]
        args, _ = _node_args(n)
        if args is None:  # a quote left open: check_node_arguments reports it
            continue
        try:
            value = graph_env_value(flow, n, var)
        except ConfigError:  # a value dora refuses: check_env_values reports it
            continue
        port, value = (f"${var}", value) if value else (flag, _arg(args, flag))
        if not value or (kind == "replay" and value == "latest"):
            continue
        named = f"{port}={value}: " if port != flag else ""  # a variable's problem names it and its value
        with contextlib.chdir(base_dir):
            try:
                if kind == "replay":
                    from contactflow.recording.replay import check_replay_inputs, replayed_dataflows, replayed_streams
                    from contactflow.recording.store import resolve_run, run_candidates

                    if port == flag and not any(c.exists() for c in run_candidates(value)):
                        continue
                    # as nodes/replay.py opens it (the streams' contract sizes are checked when it replays)
                    need = replayed_streams(_arg(args, "--streams", "") or "", _arg(args, "--require-streams", "") or "")
                    check_replay_inputs(resolve_run(value, require_streams=need, robot=_arg(args, "--robot"),
                                                    dataflows=replayed_dataflows(_arg(args, "--dataflows", "") or "")),
                                        need)
                else:
                    from contactflow.policy.spec import resolve_data_path as resolve_model  # as load_policy_spec does

                    resolve_model(value, "model file")  # its error names the places it looked
            except (RecordingError, ConfigError) as exc:
                problems.append(WiringProblem(str(n["id"]), port, f"{named}{exc}"))
    return problems


#: node kind -> the optional packages it imports (each installed by the extra ``contactflow.cli.OPTIONAL_EXTRAS``
#: names); tests/test_wiring_extras.py derives it from every import reachable from the node's module through
#: contactflow's own modules (lazy ones included: an optional import a node can run without would need an exception)
NODE_OPTIONAL_PACKAGES = {"prime_estimator": ("crocoddyl",), "unitree_driver": ("cyclonedds",), "viewer": ("rerun",)}


def check_node_extras(flow: dict) -> list[WiringProblem]:
    """The contactflow nodes whose optional packages (:data:`NODE_OPTIONAL_PACKAGES`) are not installed in this
    Python, where the node would stop at its start with the same hint (``contactflow.cli.extra_install_hint``):
    one problem per (node, missing package), naming the package and the extra that installs it."""
    import importlib.util

    from contactflow.cli import extra_install_hint

    def installed(pkg: str) -> bool:
        if sys.modules.get(pkg) is not None:  # imported already (a stub without __spec__ included)
            return True
        try:
            return importlib.util.find_spec(pkg) is not None
        except (ImportError, ValueError):
            return False

    problems = []
    for n in flow.get("nodes") or []:
        if not isinstance(n, dict) or "id" not in n:
            continue
        kind = graph_node_kind(n)
        for pkg in NODE_OPTIONAL_PACKAGES.get(kind, ()):
            if not installed(pkg):
                hint = extra_install_hint(pkg) or f"install {pkg!r}"
                problems.append(WiringProblem(str(n["id"]), "-", f"its optional package {pkg!r} is not installed in "
                                              f"this Python ({sys.executable}): the {kind} node would stop at its "
                                              f"start; {hint}"))
    return problems


#: dora 1.1's expansion in an ``env:`` value: ``$$`` (a ``$``), ``${...}`` (all inside the braces the name, or
#: ``NAME:-default``), ``$NAME``; anything else is kept as written (a ``$`` at the end, ``${`` unclosed)
_ENV_REF = re.compile(r"\$\$|\$\{([^}]*)\}|\$(\w+)")


def env_value(value, name: str, where: str = "env") -> str:
    """One ``env:`` value as dora 1.1 passes it to the node: a string with ``$$``, ``$NAME``, ``${NAME}`` and
    ``${NAME:-default}`` expanded from this environment, a bool as ``true`` / ``false``, a number as its text, a YAML
    date as its ISO text. (dora also rewrites a string that reads as a number, ``"017"`` -> ``17``: not
    reproduced, a path does not read as one.)

    Raises:
        ConfigError: a value dora refuses to start the graph with (a name not set without a default, ``${NAME-d}``
            and ``${}`` included: all inside the braces is dora's name; a null, a mapping such as
            ``{__dora_env: VAR}`` or a list: "data did not match any variant of untagged enum EnvValue"), naming
            ``where`` (the node's ``env``, or ``the graph's env``) and the variable.
    """
    import datetime

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if value is None or isinstance(value, (dict, list)):
        raise ConfigError(f"{where}: {name}: dora takes a string, number or bool, got {value!r}")
    value = str(value)

    def ref(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        inner = m.group(1)
        var, default = (m.group(2), None) if inner is None else (
            (inner[:inner.index(":-")], inner[inner.index(":-") + 2:]) if inner.find(":-") > 0 else (inner, None))
        if var in os.environ:
            return os.environ[var]
        if default is not None:
            return default
        if not re.fullmatch(r"\w+", var):
            raise ConfigError(f"{where}: {name}: {m.group(0)}: dora takes {var!r} as a variable's name, not set here "
                              f"(dora refuses the graph; it knows only ${{NAME}} and ${{NAME:-default}})")
        raise ConfigError(f"{where}: {name}: {m.group(0)} is not set in this environment (dora refuses the graph); "
                          f"set it or write ${{{var}:-DEFAULT}}")

    return _ENV_REF.sub(ref, value)


#: how messages name a node's own ``env:`` and the graph's root ``env:`` (:func:`graph_env_value`, :func:`check_env_values`)
_NODE_ENV, _ROOT_ENV = "env", "the graph's env"


def graph_env_value(flow: dict, node: dict, name: str) -> str | None:
    """The value of the environment variable ``name`` a node of the graph ``flow`` starts with, as dora 1.1 sets
    it: the node's own ``env:``, else the graph's root ``env:``, else this process's environment (``dora run``
    passes its own), as :func:`env_value` reads it. None when unset.

    Raises:
        ConfigError: a value dora refuses to start the graph with (:func:`env_value`).
    """
    for env, where in ((node.get("env"), _NODE_ENV), (flow.get("env"), _ROOT_ENV)):
        if isinstance(env, dict):
            for key, value in env.items():
                if str(key) == name:  # dora reads a key `1:` as "1"
                    return env_value(value, name, where)
    return os.environ.get(name)


def check_env_values(flow: dict) -> list[WiringProblem]:
    """Every ``env:`` value of the graph (the root's and each node's) that dora 1.1 refuses to start the graph with
    (:func:`env_value`): dora says only "data did not match any variant of untagged enum EnvValue" with a
    backtrace. One problem per value, on the port ``$NAME`` (a root value: on the node ``-``). ``contactflow run``
    refuses a graph with one before starting dora."""
    problems = []
    for env, owner in [(flow.get("env"), None)] + [(n.get("env"), n) for n in flow.get("nodes") or []
                                                   if isinstance(n, dict) and "id" in n]:
        for name, value in env.items() if isinstance(env, dict) else ():
            try:
                env_value(value, str(name), _NODE_ENV if owner is not None else _ROOT_ENV)
            except ConfigError as exc:
                problems.append(WiringProblem(str(owner["id"]) if owner is not None else "-", f"${name}", str(exc)))
    return problems


def _node_args(node: dict) -> tuple[list[str] | None, str]:
    """A node's ``args:`` split as a shell would (as dora passes them), and ``""``; ``(None, shlex's message)`` with a
    quote left open (one problem, from :func:`check_node_arguments`)."""
    try:
        return shlex.split(str(node.get("args", "") or "")), ""
    except ValueError as exc:
        return None, str(exc)


def _split_args(node: dict) -> list[str]:
    """:func:`_node_args`, split on whitespace with a quote left open (the wiring checks still run)."""
    args, _ = _node_args(node)
    return str(node.get("args", "") or "").split() if args is None else args


def check_node_arguments(flow: dict, base_dir: str | Path) -> list[WiringProblem]:
    """Parse every contactflow node's ``args:`` with the node's own argument parser, as the node will at its
    start (:func:`contactflow.nodes._runtime.check_node_args`: its ``main`` up to ``parse_args``, in this process,
    in the dataflow's folder): an unknown flag, a value of the wrong type or not among the choices, a missing
    required argument, ``--help`` is one problem on the port ``args`` with argparse's message (values the node
    interprets after parsing are not checked). Nodes of other kinds, ``path: dynamic`` nodes (no ``args:``)
    and nodes whose code does not import here (an optional package not installed: the node says so when it
    starts) are not parsed.

    Args:
        flow: the (flat) descriptor.
        base_dir: the dataflow's folder.
    """
    from contactflow.nodes._runtime import check_node_args, is_node_kind

    problems: list[WiringProblem] = []
    for n in flow.get("nodes") or []:
        if not isinstance(n, dict) or "id" not in n or str(n.get("path", "")) == "dynamic":
            continue
        kind = node_kind(str(n.get("path", "")))
        if not is_node_kind(kind):
            continue
        args, bad = _node_args(n)
        try:
            msg = bad if args is None else check_node_args(kind, args, base_dir)
        except ImportError:  # an optional package not installed here: not an argument problem
            continue
        except ValueError as exc:  # a node whose main returned without parsing its arguments (a bug of ours)
            msg = str(exc)
        if msg is not None:
            problems.append(WiringProblem(str(n["id"]), "args", msg))
    return problems


#: The flags that name a node's configuration file (:data:`contactflow.cli.config.NODE_CONFIGS`).
CONFIG_FLAGS = ("--config", "--retargeting-config")


def _node_file(arg: str, base_dir: Path) -> str:
    # the nodes run in the dataflow's folder (dora run); a robots/... path not found there names the
    # shipped robot data (contactflow.paths.resolve_data_path, as the nodes resolve it)
    from contactflow.paths import data_path_candidates

    p = Path(arg).expanduser()
    if p.is_absolute():
        return str(p)
    here = base_dir / p
    return str(next((c for c in [here, *data_path_candidates(p)[1:]] if c.exists()), here))


def check_config_files(flow: dict, base_dir: str | Path) -> list[WiringProblem]:
    """Load every node's configuration file (``--config``, ``--retargeting-config``) as the node will.

    Each node of :data:`contactflow.cli.config.NODE_CONFIGS` that is given a file has it loaded with
    its own sections and loader (:func:`contactflow.cli.config.check_node_config_files`); a file that
    the node would refuse at start (not found, not YAML, unknown or missing section, unknown key,
    bad value) is one problem on the port named by the flag, with the loader's message.

    Args:
        flow: the (flat) descriptor.
        base_dir: the dataflow's folder (relative paths are resolved from it, as ``dora run`` starts
            the nodes there).
    """
    from contactflow.cli.config import check_node_config_files

    problems: list[WiringProblem] = []
    nodes = [n for n in flow.get("nodes") or [] if isinstance(n, dict) and "id" in n]
    graph_robot = _graph_robot(nodes)
    for n in nodes:
        kind = node_kind(str(n.get("path", "")))
        args, _ = _node_args(n)
        if args is None:  # a quote left open: one problem, from check_node_arguments
            continue
        files = {flag: _node_file(v, Path(base_dir)) for flag in CONFIG_FLAGS if (v := _arg(args, flag))}
        if not files:
            continue
        robot = _arg(args, "--robot", graph_robot) or graph_robot
        with robot_path_scope(*_robot_paths(args, Path(base_dir))):
            found = check_node_config_files(kind, files, robot)
        for flag, msg in found:
            problems.append(WiringProblem(str(n["id"]), flag, f"configuration file {msg}"))
    return problems


def _source(spec) -> str | None:
    return spec if isinstance(spec, str) else (spec or {}).get("source")


def graph_node_kind(node: dict) -> str | None:
    """The port-table kind of a dataflow node entry (see the module docstring), None if not a
    contactflow node."""
    path = str(node.get("path", ""))
    kind = str(node.get("id", "")) if path == "dynamic" else node_kind(path)
    return kind if kind in NODES else None


def _contract(specs: dict[str, PortSpec], name: str) -> PortSpec | str:
    return specs.get(name, name)


def _same(a: PortSpec | str, b: PortSpec | str) -> bool:
    name = lambda s: s if isinstance(s, str) else s.name  # noqa: E731
    if name(a) != name(b):
        return False
    return isinstance(a, str) or isinstance(b, str) or a.size == b.size


def _default_robot(kind: str, args: list[str], graph_robot: str) -> str:
    """The robot a node of ``kind`` runs without ``--robot``: its declared default
    (:attr:`~contactflow.contracts.ports.NodePorts.default_robot`), or for a node that takes it from
    its ``--spec`` (lac_policy) the spec file's ``robot``, else the graph's."""
    default = NODES[kind].default_robot
    if default is not None:
        return default
    spec = _arg(args, "--spec", None)
    if spec:
        from contactflow.policy.spec import spec_robot

        try:
            return spec_robot(spec) or graph_robot
        except ConfigError:  # an unreadable spec is the node's own error at start: the ports with the graph's robot
            pass
    return graph_robot


def _graph_robot(nodes) -> str:
    """The robot a graph's nodes name with ``--robot`` when they agree on one, else ``talos``."""
    robots = {_arg(_split_args(n), "--robot") for n in nodes} - {None}
    return robots.pop() if len(robots) == 1 else DEFAULT_ROBOT


def _graph_robot_paths(nodes, base_dir: Path | None) -> tuple[str, ...]:
    """The ``--robot-path`` folders a graph's nodes give when those that give any agree, else none
    (a dynamic node, with no args, is started with the graph's robot: it takes these)."""
    paths = {_robot_paths(_split_args(n), base_dir) for n in nodes} - {()}
    return paths.pop() if len(paths) == 1 else ()


#: Node kinds that read their inputs with the lockstep runtime (nodes/_runtime.py Lockstep), the readers of
#: local inputs (nodes/_local.py, env ``CONTACTFLOW_LOCAL_INPUTS``), and the replay (its ``ack``, lockstep mode).
LOCAL_INPUT_KINDS = ("mujoco_driver", "input_filter", "seiko_retargeting", "seiko_controller", "wrench_filter",
                     "admittance", "replay")


def _check_local_inputs(nid: str, n: dict, kind: str, args: list[str]) -> list[WiringProblem]:
    """The problems of a node's ``CONTACTFLOW_LOCAL_INPUTS`` (nodes/_local.py): inputs it does not have or that
    are not lockstep messages, a node kind that does not read them with the lockstep runtime, a real-time or
    dynamic node (which take every input through dora). An idle declaration: :func:`_idle_local_inputs`."""
    from contactflow.nodes._local import LOCAL_INPUTS_ENV, parse_local_inputs

    listed = parse_local_inputs((n.get("env") or {}).get(LOCAL_INPUTS_ENV))
    if not listed:
        return []
    where = (nid, LOCAL_INPUTS_ENV)
    if kind not in LOCAL_INPUT_KINDS:
        return [WiringProblem(*where, f"{kind} does not read local inputs (the lockstep nodes do: "
                                      f"{', '.join(LOCAL_INPUT_KINDS)})")]
    if str(n.get("path")) == "dynamic":
        return [WiringProblem(*where, "a dynamic node takes every input through dora; remove the variable")]
    if "--realtime" in args:
        return [WiringProblem(*where, "a --realtime node takes every input through dora; remove the variable")]
    if kind == "replay" and (_arg(args, "--mode", "lockstep") or "lockstep") != "lockstep":
        return [WiringProblem(*where, "a replay reads its ack locally in --mode lockstep only; remove the variable")]
    wired = n.get("inputs") or {}
    decl = NODES[kind]
    problems = []
    for i in listed:
        if i not in wired:
            from contactflow.config import did_you_mean

            problems.append(WiringProblem(*where, f"{i!r} is not an input of this node; its inputs: {sorted(wired)}"
                                                  f"{did_you_mean([i], wired)}"))
            continue
        if i in decl.inputs and decl.inputs[i].kind != MESSAGE:
            problems.append(WiringProblem(*where, f"{i!r} is a {decl.inputs[i].kind} input, not a lockstep message"))
            continue
    return problems


def _graph_wide_local_inputs(flow: dict) -> list[WiringProblem]:
    """``CONTACTFLOW_LOCAL_INPUTS`` in the graph's root ``env:`` or in this environment (``dora run`` passes its own
    to the nodes): every node without its own value would read it, and a node without those inputs refuses to
    start. One problem on the node ``-``: a node's local inputs are declared in that node's ``env:``."""
    from contactflow.nodes._local import LOCAL_INPUTS_ENV

    root = flow.get("env")
    if isinstance(root, dict) and any(str(k) == LOCAL_INPUTS_ENV for k in root):
        where = _ROOT_ENV
    elif os.environ.get(LOCAL_INPUTS_ENV):
        where = "this environment (`dora run` passes it to every node)"
    else:
        return []
    return [WiringProblem("-", LOCAL_INPUTS_ENV, f"{LOCAL_INPUTS_ENV} set in {where}: every node without its own would "
                                                 f"read it; declare a node's local inputs in that node's env: (and unset "
                                                 f"it here)")]


def _idle_local_inputs(nodes: dict[str, dict], problems: list[WiringProblem]) -> list[WiringProblem]:
    """A local input whose source another node reads without declaring it local (the output then goes through dora
    to all its readers: the declaration is idle); not reported for an input that has a problem already."""
    from contactflow.nodes._local import LOCAL_INPUTS_ENV, output_readers

    flagged = {(p.node, p.port) for p in problems}
    out = []
    for src, readers in output_readers(nodes.values()).items():
        others = sorted(f"{r}/{i}" for r, i, is_local in readers if not is_local)
        if not others:
            continue
        for r, i, is_local in readers:
            if is_local and (r, i) not in flagged and (r, LOCAL_INPUTS_ENV) not in flagged:
                out.append(WiringProblem(r, LOCAL_INPUTS_ENV, f"{i!r}: its source {src} is also read by "
                                         f"{', '.join(others)}, not declared local there, so it goes through dora to "
                                         "every reader"))
    return out


def check_descriptor(flow: dict, *, strict: bool = False, base_dir: str | Path | None = None) -> list[WiringProblem]:
    """Check an already loaded (flat) dataflow descriptor; see :func:`check_dataflow`.

    Args:
        flow: the descriptor.
        strict: also report every node that is not a contactflow node (not in the port table), so a
            check that passes covers every node of the graph.
        base_dir: the dataflow's folder: a node's relative ``--robot-path`` is resolved from it, as
            the node resolves it (default: the current folder).
    """
    problems: list[WiringProblem] = []
    nodes = {n["id"]: n for n in flow["nodes"] if isinstance(n, dict) and "id" in n}
    # contract of every output of every known node: (node id, output) -> PortSpec (or contract name)
    out_specs: dict[tuple[str, str], PortSpec | str] = {}
    in_specs: dict[tuple[str, str], PortSpec | str] = {}
    # a dynamic node has no args: its robot is the graph's (the one --robot its other nodes name)
    graph_robot = _graph_robot(nodes.values())
    base_dir = None if base_dir is None else Path(base_dir)
    graph_paths = _graph_robot_paths(nodes.values(), base_dir)
    for nid, n in nodes.items():
        kind = graph_node_kind(n)
        if kind is None:
            if strict:
                problems.append(WiringProblem(nid, "-", f"path {n.get('path')!r} is not a contactflow node (kinds: "
                                                        f"{sorted(NODES)}): its ports are not checked"))
            continue
        args = _split_args(n)
        dynamic = str(n.get("path")) == "dynamic"
        robot = _arg(args, "--robot", graph_robot if dynamic else _default_robot(kind, args, graph_robot))
        rpath = _robot_paths(args, base_dir) or (graph_paths if dynamic else ())
        declared = [str(o) for o in (n.get("outputs") or [])]
        problems += _check_local_inputs(nid, n, kind, args)
        if kind == "replay":
            streams = _arg(args, "--streams", "") or ""
            for item in [s.strip() for s in streams.split(",") if s.strip()]:
                name, _, out = item.partition("=")
                rec_node, _, rec_out = name.rpartition(".")
                out = out or rec_out
                rec_decl = NODES.get(rec_node.rsplit(".", 1)[-1])
                port = rec_decl.outputs.get(rec_out) if rec_decl is not None else None
                if port is None or port.contract is None:
                    continue
                try:
                    specs = _specs(robot, rpath)
                except ContactflowError as exc:
                    problems.append(WiringProblem(nid, "--robot", str(exc)))
                    break
                out_specs[(nid, out)] = _contract(specs, port.contract)
                if out not in declared:
                    problems.append(WiringProblem(nid, out, f"replayed stream {name!r} is sent on output {out!r}, "
                                                            f"which is not in the node's outputs {declared}"))
            ack = _arg(args, "--ack-input", "ack")  # its one input (any contract), renamed by --ack-input
            for port in n.get("inputs") or {}:
                if port != ack:
                    problems.append(WiringProblem(nid, port, f"replay has no input {port!r}; its input: {ack!r} "
                                                             "(--ack-input)"))
            continue
        decl = NODES[kind]
        if decl.any_inputs:  # the recorder: any input, no outputs
            continue
        try:
            specs = _specs(robot, rpath)
        except ContactflowError as exc:  # a robot that does not load: this node's problem; the others still checked
            problems.append(WiringProblem(nid, "--robot", str(exc)))
            continue
        outputs = {out: _contract(specs, port.contract) for out, port in decl.outputs.items()}
        for out, port in decl.outputs.items():
            out_specs[(nid, out)] = outputs[out]
            if out not in declared and LOG_OUTPUT not in declared and not port.optional:
                problems.append(WiringProblem(nid, out, f"output not declared in 'outputs' {declared}: the node sends "
                                                        f"{_schema(outputs[out])} and dora would drop it"))
        for out in declared:
            base = (rows_output(out) or (None,))[0]
            if base in outputs:  # the same messages, several ticks per message
                out_specs[(nid, out)] = outputs[base]
                continue
            if out not in outputs and out != LOG_OUTPUT:
                problems.append(WiringProblem(nid, out, f"{kind} has no output {out!r}; its outputs: {sorted(outputs)}"))
        wired = n.get("inputs") or {}
        for port, p in decl.inputs.items():
            if p.kind == MESSAGE and p.contract is not None:
                in_specs[(nid, port)] = _contract(specs, p.contract)
            if port not in wired and not p.optional:
                problems.append(WiringProblem(nid, port, f"input not wired; expected {_schema(in_specs[(nid, port)])}"))
        for port in wired:
            p = decl.inputs.get(port)
            if p is None:
                problems.append(WiringProblem(nid, port, f"{kind} has no input {port!r}; its inputs: {sorted(decl.inputs)}"))
            elif p.kind == TIMER and not str(_source(wired[port]) or "").startswith("dora/timer/"):
                problems.append(WiringProblem(nid, port, f"wired to {_source(wired[port])!r}; expected a dora timer "
                                                         "(e.g. dora/timer/millis/5: the keep-alive period)"))
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
            if expected is not None and got is not None and not _same(got, expected):
                problems.append(WiringProblem(nid, port, f"wired to {src!r} which carries {_schema(got)}; expected {_schema(expected)}"))
    return problems + _idle_local_inputs(nodes, problems) + _graph_wide_local_inputs(flow)
