"""The node catalogue (``docs/nodes.md``), generated from the contracts in code.

For every node of ``nodes/``: its docstring's first paragraph, its inputs and outputs with their
contract, Arrow type and rate, optional or not (the port table :data:`contactflow.contracts.ports.NODES` and
:func:`contactflow.contracts.messages.port_specs`), its command-line parameters (read from the node's
``add_argument`` calls, statically), and the field layout of every contract. Regenerate with
``python scripts/gen_node_catalogue.py``; a test checks that the committed file is up to date.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
from pathlib import Path

from contactflow.contracts.messages import port_specs
from contactflow.paths import ROBOT_PATH_HELP, node_script
from contactflow.contracts.ports import NODES, TIMER

__all__ = ["render_catalogue", "node_parameters"]

#: The node adapters: ``nodes/`` of the checkout, installed as the package ``contactflow.nodes``.
NODES_DIR = Path(importlib.util.find_spec("contactflow.nodes").origin).parent
_BASE = [("--robot", "talos", "robot name (robot search path), robot folder or robot YAML file"),
         ("--robot-path", "None", ROBOT_PATH_HELP),
         ("--config", "None", "YAML file with this node's configuration overrides")]


def _parsed(path: Path) -> tuple[str, ast.Module]:
    """(source, syntax tree) of a node file, read and parsed once while the file is unchanged."""
    st = path.stat()
    return _parse(path, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=None)
def _parse(path: Path, mtime_ns: int, size: int) -> tuple[str, ast.Module]:
    text = path.read_text()
    return text, ast.parse(text)


def _imported_names(tree: ast.AST) -> dict[str, tuple[str, str]]:
    """local name -> (module, name in the module) of every ``from contactflow... import name [as local]``
    of a node file (at any depth)."""
    return {a.asname or a.name: (n.module, a.name) for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("contactflow") for a in n.names}


def _default_text(expr: ast.expr, imported: dict[str, tuple[str, str]]) -> str:
    """A default as the catalogue shows it: the source text; for a constant taken from the package (a
    name, or an attribute of one, imported from ``contactflow``) its value first, then the source."""
    text = ast.unparse(expr)
    parts = []
    node = expr
    while isinstance(node, ast.Attribute):
        parts.insert(0, node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in imported:
        return text
    module, name = imported[node.id]
    try:
        value = getattr(importlib.import_module(module), name)
        for attr in parts:
            value = getattr(value, attr)
    except Exception:  # noqa: BLE001 -- a module that cannot be imported here: the default as written
        return text
    if not isinstance(value, (bool, int, float, str, type(None))):
        return text
    return f"{value!r} ({text})"


def node_parameters(path: Path) -> list[tuple[str, str, str]]:
    """(flag, default, help) of every ``add_argument`` call of a node file (plus ``base_parser``'s and
    ``add_input_stale_argument``'s). A default that names a constant of the package shows its value
    and its name."""
    text, tree = _parsed(Path(path))
    imported = _imported_names(tree)
    out = []
    if "base_parser(" in text:
        from contactflow.contracts.ports import DEFAULT_ROBOT, NODES

        decl = NODES.get(Path(path).stem)
        robot = DEFAULT_ROBOT if decl is None else decl.default_robot
        out = [(_BASE[0][0], "the --spec file's robot" if robot is None else robot, _BASE[0][2]), *_BASE[1:]]
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "add_input_stale_argument"
                and len(node.args) == 2 and isinstance(node.args[1], ast.Constant)):
            from contactflow.nodes._runtime import INPUT_STALE_S_DEFAULT, input_stale_help

            out.append(("--input-stale-s", repr(INPUT_STALE_S_DEFAULT), input_stale_help(node.args[1].value)))
            continue
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument" and node.args:
            first = node.args[0]
            if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                continue
            kw = {k.arg: k.value for k in node.keywords}
            default = _default_text(kw["default"], imported) if "default" in kw else ("False" if "action" in kw else "")
            help_ = kw["help"].value if isinstance(kw.get("help"), ast.Constant) else ""
            if "required" in kw and ast.unparse(kw["required"]) == "True":
                default = "(required)"
            out.append((first.value, default, " ".join(str(help_).split())))
    return out


def _doc(path: Path) -> str:
    doc = ast.get_docstring(_parsed(Path(path))[1]) or ""
    return doc.split("\n\n")[0].replace("\n", " ")


def render_catalogue(robot_names: tuple[str, ...] = ("talos", "g1")) -> str:
    """Markdown text of the catalogue; port sizes and rates are given for each of ``robot_names``
    (a contract's size depends on the robot: joint count, contacts, ``actuation``, ``wrench_links``)."""
    from contactflow.robot import load_robot

    all_specs = {name: port_specs(load_robot(name)) for name in robot_names}
    shown = " / ".join(f"`{n}`" for n in robot_names)
    lines = [
        "# Node catalogue",
        "",
        "<!-- generated by scripts/gen_node_catalogue.py from contactflow/contracts/ports.py, contactflow/contracts/messages.py and "
        "nodes/*.py; do not edit -->",
        "",
        f"Every message is a flat Arrow `float64` array; its field layout is its contract (sizes and rates for "
        f"the robots {shown}: a contract's size depends on the robot). Metadata on every message: `seq` (int tick "
        "index), `t` (float, time [s]), `finished` (bool); on the first message of each output also `contract`, "
        "`layout` (JSON) and `config` (the node's resolved configuration, JSON). Check a dataflow against these "
        "contracts with `contactflow check DATAFLOW`.",
        "",
    ]
    files = sorted(p for p in NODES_DIR.glob("*.py") if not p.name.startswith("_"))
    for path in files:
        kind = path.stem
        lines += [f"## `{kind}`", "", _doc(path), "",
                  f"Source: `nodes/{path.name}`; installed executable (a graph's `path:`): `{node_script(kind)}`", ""]
        decl = NODES.get(kind)
        if decl is None:  # tests/test_ports.py keeps every node in the table
            raise KeyError(f"nodes/{path.name}: no port declaration in contactflow/contracts/ports.py")
        if decl.any_inputs:
            lines += ["Ports: any inputs (records every input the graph gives it, any contract), no outputs.", ""]
        if decl.stream_outputs:
            lines += ["Outputs: the recorded streams named by `--streams` (each with its recorded contract).", ""]
        if decl.inputs or decl.outputs:
            lines += [f"| direction | port | contract | Arrow type ({shown}) | rate [Hz] |", "|---|---|---|---|---|"]
            for direction, table in (("input", decl.inputs), ("output", decl.outputs)):
                for port, p in table.items():
                    opt = " (optional)" if p.optional else ""
                    if p.kind == TIMER:
                        contract, types, rates = "dora timer", "timer", "(its period)"
                    elif p.contract is None:
                        contract, types, rates = "any", "any", "-"
                    elif all(p.contract in all_specs[n] for n in robot_names):
                        ss = [all_specs[n][p.contract] for n in robot_names]
                        contract = f"`{p.contract}`"
                        types = " / ".join(f"`float64[{s.size}]`" for s in ss)
                        rates = " / ".join(f"{s.rate_hz:g}" for s in ss)
                    else:  # a contract of another family (PRIME): its size is set by the node's config
                        contract, types, rates = f"`{p.contract}`", "`float64[...]` (set by the node's config)", "-"
                    lines.append(f"| {direction} | `{port}`{opt} | {contract} | {types} | {rates} |")
            lines.append("")
        params = node_parameters(path)
        if params:
            lines += ["| parameter | default | description |", "|---|---|---|"]
            lines += [f"| `{f}` | `{d}` | {h} |" if d else f"| `{f}` | | {h} |" for f, d, h in params]
            lines.append("")
    for robot_name, specs in all_specs.items():
        lines += [f"# Contracts for robot `{robot_name}`", ""]
        for name, s in specs.items():
            if not s.fields:
                lines += [f"## Contract `{name}` ({robot_name})", "", f"{s.description}: no fields for this robot.", ""]
                continue
            lines += [f"## Contract `{name}` ({robot_name})", "",
                      f"{s.description}. Arrow type `float64[{s.size}]`, nominal rate {s.rate_hz:g} Hz.", "",
                      "| offset | field | size | unit | frame | description |", "|---|---|---|---|---|---|"]
            for f, sl in zip(s.fields, s.slices.values()):
                lines.append(f"| {sl.start} | `{f.name}` | {f.size} | {f.unit} | {f.frame} | {f.description} |")
            lines.append("")
    return "\n".join(lines)
