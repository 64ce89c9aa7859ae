"""The node runtime's own Python per tick: :class:`Lockstep` and :class:`Sender` around a stage, dora left out.

Usage::

    python benchmarks/bench_node_runtime.py [RUN] [--ticks 3000] [--repeat 3]

The input filter node's loop (``nodes/input_filter.py``, as ``dataflows/seiko_talos.yml`` wires it: the
operator's commands 50 ticks per message, the Retargeting's desired 2 ticks per message, its targets out 2
ticks per message and in its log batch) runs in this process on a fake dora node that hands it a recorded
run's messages (``RUN``: a run of ``seiko_talos.yml``, default ``latest``) and drops what it sends. Per tick:
the whole loop, the stage alone (``InputFilterStage.tick``) and their difference, the runtime's share
(splitting the multi-tick messages, decoding and checking the inputs, packing the outputs, keeping the log
rows and packing the batches). Wall time per tick on one thread, each repeat after a first warm-up pass.
What dora itself costs per message (its receive thread, the loopback TCP to the daemon, the daemon) is not in
it: in the graph the input filter process takes ~0.37 ms of CPU per tick (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from contactflow.contracts.messages import port_specs  # noqa: E402
from contactflow.nodes._runtime import lockstep_for, sender_for  # noqa: E402
from contactflow.operator.input_filter import InputFilterConfig  # noqa: E402
from contactflow.recording.store import read_recording, resolve_run  # noqa: E402
from contactflow.robot import load_robot  # noqa: E402
from contactflow.seiko.stages import InputFilterStage  # noqa: E402


def _rows_event(iid: str, seq0: int, values: np.ndarray, ts: np.ndarray) -> dict:
    n = len(values)
    md = {"seq": int(seq0), "t": float(ts[0]), "finished": False, "rows": n, "row_t": [float(x) for x in ts],
          "row_finished": [0] * n}
    return {"type": "INPUT", "id": iid, "kind": "dora", "value": pa.array(values.reshape(-1), type=pa.float64()),
            "metadata": md}


class FakeNode:
    """The dora node API the loop uses, fed the recorded operator commands and desired, in the graph's order."""

    def __init__(self, cmd, des, ticks: int):
        self.cmd, self.des, self.ticks, self.sent = cmd, des, ticks, 0
        self._events = self._generate()

    def _generate(self):
        c = d = 0
        while True:
            if c < self.ticks + 60:
                yield _rows_event("command", c, self.cmd.values[c:c + 50], self.cmd.t[c:c + 50])
                c += 50
            for _ in range(25):
                yield _rows_event("desired", d, self.des.values[d:d + 2], self.des.t[d:d + 2])
                d += 2

    def node_config(self):
        return {"inputs": {"command": "operator/command", "desired": "seiko_retargeting/desired_rows2"},
                "outputs": ["targets_rows2", "log"]}

    def next(self, timeout=None):
        return next(self._events)

    def send_output(self, output, value, metadata=None):
        self.sent += 1


def run_once(robot, specs, cmd, des, ticks: int) -> tuple[float, float]:
    """(whole loop, stage alone) wall time per tick [us] of ``ticks`` ticks."""
    node = FakeNode(cmd, des, ticks)
    cfg = InputFilterConfig()
    stage = InputFilterStage(robot, cfg)
    sender = sender_for(node, "input_filter", specs, cfg)
    lock = lockstep_for(node, "input_filter", specs, offsets={"desired": 2})
    in_stage = 0.0
    t0 = time.perf_counter()
    for tick in lock:
        a = time.perf_counter()
        targets = stage.tick(tick.inputs["command"], tick.inputs["desired"], None)
        in_stage += time.perf_counter() - a
        sender.send("targets", targets, seq=tick.k, t=tick.t, finished=False)
        if tick.k + 1 >= ticks:
            break
    return (time.perf_counter() - t0) / ticks * 1e6, in_stage / ticks * 1e6


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", nargs="?", default="latest", help="a run of dataflows/seiko_talos.yml (default latest)")
    p.add_argument("--ticks", type=int, default=3000)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    rec = read_recording(resolve_run(args.run, require_streams=("operator.command", "seiko_retargeting.desired")))
    cmd, des = rec.stream("operator.command"), rec.stream("seiko_retargeting.desired")
    ticks = min(args.ticks, len(cmd) - 60, len(des) - 60)
    robot = load_robot("talos")
    specs = port_specs(robot)
    run_once(robot, specs, cmd, des, min(ticks, 500))  # warm-up
    for _ in range(args.repeat):
        whole, stage = run_once(robot, specs, cmd, des, ticks)
        print(f"input filter node, {ticks} ticks: loop {whole:.1f} us per tick, stage {stage:.1f} us, "
              f"runtime {whole - stage:.1f} us ({100 * (whole - stage) / whole:.0f} %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
