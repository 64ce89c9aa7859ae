"""`contactflow check` names a node whose optional packages are missing (contactflow.contracts.wiring.check_node_extras),
and its table of those packages is what the nodes import."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

from contactflow.cli import OPTIONAL_EXTRAS, main
from contactflow.contracts.ports import NODES
from contactflow.contracts.wiring import NODE_OPTIONAL_PACKAGES, check_dataflow

ROOT = Path(__file__).resolve().parent.parent


def _module_file(name: str) -> Path | None:
    parts = name.split(".")
    if parts[0] != "contactflow":
        return None
    base = ROOT / "nodes" / Path(*parts[2:]) if parts[1:2] == ["nodes"] else ROOT / Path(*parts)
    for f in (base.with_suffix(".py"), base / "__init__.py"):
        if f.is_file():
            return f
    return None


def _imports(name: str, cache: dict) -> tuple[list[str], Path | None]:
    """The module names ``name`` imports anywhere in its code (function bodies included: the nodes import lazily)."""
    if name not in cache:
        f = _module_file(name)
        out = []
        if f is not None:
            pkg = name if f.name == "__init__.py" else name.rpartition(".")[0]
            for node in ast.walk(ast.parse(f.read_text())):
                if isinstance(node, ast.Import):
                    out += [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    mod = node.module or ""
                    if node.level:
                        base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                        mod = ".".join(base + ([node.module] if node.module else []))
                    out += [mod] + [f"{mod}.{a.name}" for a in node.names]
        cache[name] = (out, f)
    return cache[name]


def _optional_packages(kind: str, cache: dict) -> set[str]:
    """The optional packages (OPTIONAL_EXTRAS) reachable from nodes/<kind>.py through contactflow's own modules."""
    seen, found, todo = set(), set(), [f"contactflow.nodes.{kind}"]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        for imp in _imports(m, cache)[0]:
            top = imp.split(".")[0]
            if top in OPTIONAL_EXTRAS:
                found.add(top)
            elif top == "contactflow":
                todo.append(imp)
    return found


def test_the_table_of_optional_packages_is_what_the_nodes_import():
    cache: dict = {}
    kinds = sorted(p.stem for p in (ROOT / "nodes").glob("*.py") if not p.stem.startswith("_"))
    assert set(kinds) >= set(NODES) - {"dynamic"}, "nodes/ lost a node of the port table"
    derived = {k: tuple(sorted(pkgs)) for k in kinds if (pkgs := _optional_packages(k, cache))}
    assert derived == {k: tuple(sorted(v)) for k, v in NODE_OPTIONAL_PACKAGES.items()}
    assert derived, "the scan found no optional import at all: it no longer reads the nodes"


def test_check_names_a_node_whose_extra_is_missing(monkeypatch, capsys):
    pytest.importorskip("rerun")
    graph = ROOT / "dataflows" / "seiko_talos_view.yml"
    assert not [p for p in check_dataflow(graph) if "optional package" in str(p)]  # installed here (the test extra)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, package=None: None if name == "rerun" else real(name, package))
    monkeypatch.delitem(sys.modules, "rerun", raising=False)  # imported by an earlier test: not installed now
    problems = [str(p) for p in check_dataflow(graph)]
    assert len(problems) == 1, problems
    assert problems[0].startswith("node 'viewer': its optional package 'rerun' is not installed"), problems[0]
    assert "contactflow[viewer]" in problems[0]
    assert main(["check", str(graph)]) == 1
    out = capsys.readouterr().out
    assert "1 problem(s)" in out and "would stop at its start" in out
