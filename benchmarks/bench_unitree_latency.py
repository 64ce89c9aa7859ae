"""Hardware driver latency: ``rt/lowstate`` received -> ``rt/lowcmd`` sent, against the emulator.

Usage: python benchmarks/bench_unitree_latency.py [--duration-s 60] [--robot g1] [--out FILE.json]

Two processes on loopback DDS (a random domain): the emulator (``contactflow sim-robot``, the MuJoCo
G1 publishing ``rt/lowstate`` at 500 Hz) and, in this process, the driver's 500 Hz link
(:class:`contactflow.hardware.link.UnitreeLink`, the thread of the ``unitree_driver`` node) with
the graph side played by this script: the robot's default posture offered as the joint command
at 50 Hz and the ``sensors`` readings (base estimator, sole wrenches) built at 50 Hz, as the node
does; the link checks a stand-in command-source process in ``/proc`` before every command, as the
node's does (:mod:`contactflow.hardware.process_watch`). Reports, over the run:

* the latency from taking a state off the reader to the end of writing the command that answers
  it (CRC check, safety layer, packing, CRC, DDS write): p50 / p99 / max [ms];
* the fraction of the 2 ms periods (from the first command to the last) that no command answered:
  each gap between two commands counts the periods it skipped (``round(gap / 2 ms) - 1``), and the
  longest gap [ms];
* the emulator's overruns (steps started > 10 ms late) and the machine's core count.

The robot is held by a fixed PD posture at the robot file's gains (a policy's: too soft to keep the
emulated G1 up, it lies on the floor after ~1.3 s), so the driver's fall rule is off here: the link's
timing does not depend on the robot standing. The run ends early if the link fails otherwise (lost
states, say); the figures then cover the time before it (``measured_s``), the reason is printed and
the exit status is 2.

Benchmark only (wall-clock numbers depend on the machine and its load), not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without install

from contactflow.hardware.link import UnitreeLink  # noqa: E402
from contactflow.hardware.process_watch import ProcessMonitor  # noqa: E402
from contactflow.hardware.unitree import UnitreeDriverConfig  # noqa: E402
from contactflow.robot import load_robot  # noqa: E402
from contactflow.sim.mujoco_robot import sensor_values  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration-s", type=float, default=60.0, help="measured run time [s]")
    ap.add_argument("--robot", default="g1")
    ap.add_argument("--out", default=None, help="also write the results to this JSON file")
    args = ap.parse_args()

    robot = load_robot(args.robot)
    domain = random.randint(100, 220)
    emu_status = Path(f"/tmp/bench_unitree_emu_{os.getpid()}.json")
    emu = subprocess.Popen([sys.executable, "-m", "contactflow.cli", "sim-robot", args.robot, "--domain", str(domain),
                            "--duration-s", str(args.duration_s + 30), "--status-json", str(emu_status)], cwd=ROOT,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # no fall rule: a fixed PD posture at the robot file's gains (a policy's, soft) does not hold the emulated
    # G1 up (it tips over ~1.3 s after the ramp, at any load); what is measured is the link's timing, which
    # does not depend on the robot standing (the numbers of docs/hardware.md were taken so)
    link = UnitreeLink(robot, UnitreeDriverConfig(startup_ramp_s=1.0, fall_tilt_rad=None), domain, "lo",
                       record_latency=True)
    # as in the node: the 500 Hz thread checks the command source's process before every rt/lowcmd
    # (a stand-in child process here: it sleeps, as the controller does between its ticks)
    source = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1e6)"])
    link.watch_source(ProcessMonitor(source.pid), lambda why: f"stand-in source {why}")
    link.start()
    try:
        if not link.wait_first_state(30.0):
            print("no rt/lowstate from the emulator", file=sys.stderr)
            return 1
        cmd = {"q_target": robot.theta_default, "kp": robot.K, "kd": robot.kd, "tau_ff": np.zeros(robot.n)}
        t0 = time.monotonic()
        deadline = t0
        while time.monotonic() - t0 < args.duration_s and not link.failure:
            link.offer_command(cmd)
            sensor_values(link.readings(time.monotonic() - t0), robot)
            deadline += 0.02
            time.sleep(max(0.0, deadline - time.monotonic()))
    finally:
        link.stop()
        source.kill()
        source.wait()
        emu.terminate()
        emu.wait(timeout=30)
    lat = np.array(link.latency_s) * 1e3
    send = np.array(link.send_mono)
    if len(send) < 2 or not len(lat):  # the link failed before it could answer two states
        print(f"no measurement: {len(send)} command(s) sent; {link.failure or 'no failure named'}", file=sys.stderr)
        return 2
    # periods missed: each gap between two commands counts the 2 ms periods it skipped (a gap of 4 ms:
    # one); binning the send times into 2 ms periods from the first send instead counted the jitter of
    # commands sent near a bin's edge (two in one bin, none in the next) and read 1-15 % from run to run
    gaps = np.diff(send)
    n_periods = int(round(float(send[-1] - send[0]) / 0.002)) + 1
    empty = float(np.maximum(np.round(gaps / 0.002) - 1.0, 0.0).sum()) / n_periods
    es = json.loads(emu_status.read_text()) if emu_status.exists() else {}
    measured_s = float(send[-1] - send[0])  # first to last command sent
    res = {
        "duration_s": args.duration_s, "measured_s": measured_s, "cores": os.cpu_count(),
        "load_average_1min": os.getloadavg()[0],
        "latency_ms": {"p50": float(np.percentile(lat, 50)), "p99": float(np.percentile(lat, 99)), "max": float(lat.max()),
                       "n": int(len(lat))},
        "periods_skipped_fraction": empty, "max_gap_ms": float(gaps.max() * 1e3),
        "lowcmds": int(link.status.lowcmds), "states": int(link.status.states),
        "states_bad_crc": int(link.status.states_bad_crc), "failure": link.failure,
        "emulator": {k: es.get(k) for k in ("steps", "states", "commands", "overruns")},
    }
    print(f"lowstate -> lowcmd latency: p50 {res['latency_ms']['p50']:.3f} ms, p99 {res['latency_ms']['p99']:.3f} ms, "
          f"max {res['latency_ms']['max']:.2f} ms over {len(lat)} commands ({measured_s:.1f} s of the {args.duration_s:g} s asked, "
          f"{os.cpu_count()} cores, load {res['load_average_1min']:.1f})")
    print(f"2 ms periods skipped (no command): {100 * empty:.2f} %; longest gap {res['max_gap_ms']:.1f} ms; "
          f"emulator overruns {res['emulator']['overruns']}")
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=2))
    if link.failure:  # the figures above cover only the run before it
        print(f"the run ended early, after {measured_s:.1f} s: {link.failure}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
