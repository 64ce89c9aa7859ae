"""Shared piece of the tests that open DDS (``tests/test_hardware.py``, ``tests/test_hardware_dora.py``).

* :func:`test_domain` -- a random DDS domain for one test, whose ports lie below the ephemeral port range.
"""

from __future__ import annotations

import random


def test_domain() -> int:
    """A DDS domain for one test: 2-99, random (no cross-talk between concurrent runs), whose RTPS ports (7400 + 250 d
    + ...: 7900-32160) lie below Linux's ephemeral port range (32768-60999), where another socket may hold the port a
    domain needs (CI runs failed to open domain 147, ports 44150-44161, and domain 162, port 47901)."""
    return random.randint(2, 99)


test_domain.__test__ = False  # a helper, not a test, for pytest's collection
