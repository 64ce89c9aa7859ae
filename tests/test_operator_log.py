"""The operator's "[operator] scenario ..." line and the nodes' warnings show with ``dora run --log-level info``.

A node's ``print`` and stderr are raw output, dora's lowest log level, which ``--log-level info``
hides; the operator sends its lines through dora's log at INFO (``_runtime.log_info``) and, after
``connect()``, the nodes' Python logging goes there too (``_runtime.log_through_dora``). A two-node
graph: a source of ``sensors``-sized ticks (5 ticks, the third malformed, the last ``finished``)
clocks the operator.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from contactflow.contracts.messages import port_specs
from contactflow.robot import load_robot

ROOT = Path(__file__).resolve().parent.parent
DORA = str(Path(sys.executable).parent / "dora") if (Path(sys.executable).parent / "dora").exists() else shutil.which("dora")
pytestmark = pytest.mark.dora

SOURCE = """\
import sys
import time
import numpy as np
import pyarrow as pa
from dora import Node

size, n = int(sys.argv[1]), 5
node = Node()
k = 0
for ev in node:
    if ev["type"] != "INPUT":
        break
    values = np.zeros(size if k != 2 else size - 1)  # tick 2 malformed: the operator logs a warning
    node.send_output("sensors", pa.array(values), {"seq": k, "t": k * 0.002, "finished": k == n - 1})
    k += 1
    if k == n:
        break
time.sleep(0.5)  # let the last messages leave before exiting
"""


def test_scenario_line_shows_at_log_level_info(tmp_path):
    size = port_specs(load_robot("talos"))["sensors"].size
    (tmp_path / "ticks.py").write_text(SOURCE)
    scenario = ROOT / "robots" / "talos" / "scenarios" / "smoke_2s.yaml"
    (tmp_path / "g.yml").write_text(f"""\
nodes:
  - id: ticks
    path: {tmp_path / 'ticks.py'}
    args: "{size}"
    inputs:
      timer: dora/timer/millis/20
    outputs: [sensors]
  - id: operator
    path: {ROOT / 'nodes' / 'operator.py'}
    args: --robot talos --scenario {scenario}
    inputs:
      tick: {{source: ticks/sensors, queue_size: 100, queue_policy: backpressure}}
    outputs: [command, log]
""")
    env = {k: v for k, v in os.environ.items() if k != "CONTACTFLOW_SCENARIO"}
    proc = subprocess.run([DORA, "run", "g.yml", "--log-level", "info"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    lines = [ln for ln in out.splitlines() if "[operator] scenario" in ln]
    assert lines and f"[operator] scenario {scenario} (2.00 s, from --scenario)" in lines[0], out[-3000:]
    assert "INFO" in lines[0]  # dora's log record at INFO, not the node's raw stdout
    # the nodes' Python logging goes through dora's log too (_runtime.log_through_dora): a warning shows
    warnings = [ln for ln in out.splitlines() if "WARN" in ln and "operator:" in ln and "malformed" in ln]
    assert warnings, out[-3000:]
