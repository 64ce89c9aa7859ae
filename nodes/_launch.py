"""Entry points of the installed node executables: ``contactflow-<kind> = "contactflow.nodes._launch:<kind>"``.

Each attribute of this module named after a node kind (a module of :mod:`contactflow.nodes`) is a
function that runs that node under :func:`contactflow.nodes._runtime.node_main`, exactly as
``python nodes/<kind>.py`` does; the module is imported inside ``node_main``, so an import error (a
missing extra) is reported with the node's name like any other failure.
"""

from __future__ import annotations

import importlib
from typing import Callable


def run(kind: str) -> None:
    """Run node ``kind`` (the module ``contactflow.nodes.<kind>``, its ``main``)."""
    from contactflow.nodes._runtime import node_main

    node_main(kind, lambda: importlib.import_module(f"contactflow.nodes.{kind}").main())


def __getattr__(kind: str) -> Callable[[], None]:
    from contactflow.nodes._runtime import is_node_kind

    if not is_node_kind(kind):
        raise AttributeError(f"no contactflow node {kind!r} (expected a module contactflow/nodes/{kind}.py)")
    return lambda: run(kind)
