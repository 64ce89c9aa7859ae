"""Killed controller -> damping on the wire: where the time goes, against the emulator.

Usage: python benchmarks/bench_unitree_kill.py [--runs 10] [--out FILE.json]

Each run starts the emulator (``contactflow sim-robot g1``) and ``dora run`` of the shipped hardware
graph (``dataflows/lac_g1_hw.yml``, a random DDS domain, ``stand.yaml``: the test's harness,
``tests/test_hardware_dora.py::Run``), waits past the start-up ramp plus a random delay (uniform over
one 20 ms command period, so the kill falls at a random phase of the 50 Hz command stream), SIGKILLs
``lac_expert`` and reads the driver's and the emulator's timestamps (``time.monotonic``, one clock for
all processes of the machine):

* ``phase``: last valid command accepted by the driver -> SIGKILL;
* (a) SIGKILL -> the driver latches damping (dora's ``INPUT_CLOSED`` for ``command`` handled);
* (b) latch -> the first ``rt/lowcmd`` with the damping targets written by the 500 Hz thread;
* (c) that write -> the emulator applies it (its state of that step is published right after);
* ``kill_to_damping`` = (a) + (b) + (c), ``last_command_to_damping`` = phase + that.

Benchmark only (wall-clock, depends on the load; the load is in the JSON), not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from test_hardware_dora import Run  # noqa: E402  (the tests' emulator + dora run harness)


def one_run(tmp: Path, extra: str) -> dict:
    run = Run(tmp, "stand.yaml", extra)
    run.wait_commands()
    pid = run.node_pid("contactflow-lac-expert")
    time.sleep(3.0 + random.uniform(0.0, 0.02))
    rss_mb = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    t_kill = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    rc, out, status, emu, _ = run.finish()
    if status is None or emu is None or not emu.get("damping_mono_s"):
        raise RuntimeError(f"run without the timestamps (rc {rc}):\n{out[-3000:]}")
    t_last, t_latch = status["last_command_mono_s"], status["latched_mono_s"]
    t_wire = status["latched_lowcmd_mono_s"]
    t_emu = min((t for t in emu["damping_mono_s"] if t >= t_kill), default=float("nan"))
    ms = lambda a, b: 1e3 * (b - a)  # noqa: E731
    return {"phase_ms": ms(t_last, t_kill), "a_kill_to_latch_ms": ms(t_kill, t_latch),
            "b_latch_to_lowcmd_ms": ms(t_latch, t_wire), "c_lowcmd_to_emulator_ms": ms(t_wire, t_emu),
            "kill_to_damping_ms": ms(t_kill, t_emu), "last_command_to_damping_ms": ms(t_last, t_emu),
            "expert_rss_mb": rss_mb,
            "latch": next((t for t in status["transitions"] if " command_lost: " in t or " damping: " in t), ""),
            "watch": next((ln.strip()[-120:] for ln in out.splitlines() if "watched" in ln), "")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--extra", default="--state-timeout-s 0.2", help="extra driver arguments")
    ap.add_argument("--out", default=None, help="also write the results to this JSON file")
    args = ap.parse_args()
    rows, loads, failed = [], [], []
    for i in range(args.runs):
        with tempfile.TemporaryDirectory() as d:
            loads.append(os.getloadavg()[0])
            try:
                r = one_run(Path(d), args.extra)
            except RuntimeError as exc:  # a run the loaded machine broke (lost state, fall): reported, skipped
                why = next((ln.strip() for ln in str(exc).splitlines() if "lost rt/lowstate" in ln or "fell" in ln),
                           str(exc).splitlines()[0])
                failed.append(why)
                print(f"run {i}: no measurement: {why}", flush=True)
                continue
        rows.append(r)
        print(f"run {i}: " + ", ".join(f"{k} {v:.1f}" for k, v in r.items() if k.endswith("_ms")), flush=True)
        print(f"    expert RSS {r['expert_rss_mb']:.0f} MB; {r['latch']}\n    {r['watch']}", flush=True)
    if not rows:
        print("no run gave a measurement", file=sys.stderr)
        return 1
    keys = [k for k in rows[0] if k.endswith("_ms")]
    # nan: no entry into damping after the kill (the watchdog had already damped the robot: the
    # expert, descheduled on a loaded machine, was late by more than the command timeout)
    stats = {k: {"min": float(np.nanmin(v)), "p50": float(np.nanmedian(v)), "max": float(np.nanmax(v)),
                 "n": int(np.sum(np.isfinite(v)))} for k in keys for v in [np.array([r[k] for r in rows], float)]}
    within = sum(r["last_command_to_damping_ms"] <= 20.0 for r in rows)
    res = {"runs": len(rows), "failed_runs": failed, "cores": os.cpu_count(), "load_average_1min": loads, "stats": stats,
           "last_command_to_damping_within_20ms": within, "rows": rows}
    for k, s in stats.items():
        print(f"{k:28s} min {s['min']:6.1f}  p50 {s['p50']:6.1f}  max {s['max']:6.1f} ms")
    print(f"last command -> damping <= 20 ms in {within}/{len(rows)} runs (load {np.mean(loads):.1f}, "
          f"{os.cpu_count()} cores)")
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
