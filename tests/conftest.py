"""Test session set-up shared by every test module.

The shipped graphs name the nodes by their installed executables (``path: contactflow-<node>``,
found on ``PATH`` by dora), and the tests start ``dora`` themselves: both live beside the Python
running the tests (the venv's ``bin/``). That folder is put first on ``PATH``
(:func:`contactflow.paths.scripts_env`) so the tests also run with a venv that is not activated
(``.venv/bin/python -m pytest``).
"""

import os

from contactflow.paths import scripts_env

_env = scripts_env()
os.environ["PATH"] = _env["PATH"]
os.environ["UV_NO_SYNC"] = _env["UV_NO_SYNC"]  # dora's `uv run which <node>` must not sync this project


import pytest


@pytest.fixture(autouse=True)
def _no_run_selection_from_the_shell(monkeypatch):
    """A developer's shell may set the variables that replace a graph's scenario or the run a replay reads (README);
    the tests set them where they test them, never inherit them."""
    monkeypatch.delenv("CONTACTFLOW_SCENARIO", raising=False)
    monkeypatch.delenv("CONTACTFLOW_RECORDING", raising=False)


@pytest.fixture(scope="session", autouse=True)
def _native_kernel_built():
    """Build the compiled SEIKO kernel once, before any test (cached in ~/.cache/contactflow/native
    across runs: ~30 s on a fresh machine, nothing afterwards), so that the dora graphs' nodes never
    wait for it while a test times their start. Where it cannot be built the stages run their Python
    code, and tests/test_seiko_native.py says why."""
    from contactflow import native

    native.status()
    yield
