"""Test session set-up shared by every test module.

The shipped graphs name the nodes by their installed executables (``path: contactflow-<node>``,
found on ``PATH`` by dora), and the tests start ``dora`` themselves: both live beside the Python
running the tests (the venv's ``bin/``). That folder is put first on ``PATH`` so the tests also run
with a venv that is not activated (``.venv/bin/python -m pytest``).
"""

import os
import sys
from pathlib import Path

_BIN = str(Path(sys.executable).parent)
if os.environ.get("PATH", "").split(os.pathsep)[:1] != [_BIN]:
    os.environ["PATH"] = os.pathsep.join([_BIN, os.environ.get("PATH", "")])
