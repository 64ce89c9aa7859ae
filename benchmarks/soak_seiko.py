"""Soak run: the lockstep SEIKO graph on Talos for an hour, watched every minute (issue 16).

Usage: nice -n 5 python benchmarks/soak_seiko.py [--duration-s 3600] [--sample-period-s 60]
       [--graph dataflows/seiko_talos.yml] [--out docs/soak_seiko.json] [--plot docs/soak_seiko.png]
       [--md FILE] [--keep-recording]

What it does:

1. Writes a looping scenario (no scenario file loops by itself: ``contactflow/operator/scenario.py``
   plays a fixed list of segments): the default scenario's left-hand motion (0.30 m forward at
   5 cm/s, hold 3 s, back, hold 3 s), repeated until 3x ``--duration-s`` of simulated time, so the
   run never reaches its end before the wall-clock limit.
2. ``dora run --stop-after <duration>s GRAPH`` with ``CONTACTFLOW_SCENARIO`` set to it and the
   recording in a temporary directory (``CONTACTFLOW_RECORDINGS``). The recorder's own counts of
   what was lost (``recording_gaps``, ``recording_lost_batches``) are read from the run's manifest,
   written when the recording is closed; its summary of an hour-long run does not fit in the ~10 s
   dora gives a node after the stop, and the manifest's ``summary`` entry says so
   (``contactflow rec summary RUN`` computes it; ``--keep-recording`` keeps the run).
3. Every ``--sample-period-s``: the resident memory (RSS, ``/proc/<pid>/status`` VmRSS) of every
   process of the dataflow (``dora run`` and its descendants: the nodes), the recording's size on
   disk, the machine's load average, and, read incrementally from the growing Arrow stream files
   (complete IPC messages only), the ticks simulated in the period, their wall time per tick
   (the driver's ``t_wall_ns`` of ``mujoco_driver.sensors``: in lockstep, one tick of the whole
   graph) and the ``seq`` numbers missing in every stream.
4. Writes a JSON file, a PNG plot and a markdown section with the criteria of issue 16:
   RSS growth of every process < 5 % after the first minute (last sample vs the sample at one
   minute), per-tick time flat, no sequence gaps (missing seq in every stream: 0, and the recorder's
   own counts from its manifest).

Per-tick time flat: the graph slowing down over the hour (a leak that costs time, a growing queue, a
list scanned every tick) shows as more *CPU time per tick* of the dataflow's processes (all of them,
``/proc/<pid>/stat`` utime + stime, over the ticks of the sample period): the criterion is that the
median of the last 10 % of the samples is at most 10 % above the median of the first 10 % (after the
first minute). Wall time per tick is reported beside it, not judged: on a shared machine it follows
the other jobs' load (the 1-hour run of 2026-12-01 saw it fall from 7.8 to 2.6 ms as the load fell
from ~30 to ~5), and so does CPU time per tick, less (contention and the nodes' 50 ms event polls
cost CPU per wall second): a falling CPU time per tick is the load falling, not a fault, so only a rise
fails. The load average is sampled next to both.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from contactflow.recording.store import SeqGaps  # noqa: E402 - after the checkout is on the path

#: the default scenario's motion (robots/talos/scenarios/hand_forward.yaml), one cycle [s, m]
CYCLE = ((2.5, 8.5, 0.30), (11.5, 17.5, -0.30))
CYCLE_S = 20.5  # the back motion ends at 17.5 s; a 3 s hold before the next cycle
RSS_GROWTH_MAX = 0.05
TICK_FLAT_MAX = 0.10
FIRST_MINUTE_S = 60.0  # start-up (imports, model builds, first QPs) excluded from the criteria
SENSORS = "mujoco_driver.sensors.arrows"  # the clock's stream: one row per tick


def looping_scenario(path: Path, sim_s: float) -> int:
    """Write the repeated hand motion for ``sim_s`` simulated seconds; returns the cycle count."""
    n = max(1, int(sim_s // CYCLE_S))
    lines = ["description: soak (benchmarks/soak_seiko.py), the default left-hand motion repeated "
             f"{n} times every {CYCLE_S} s", f"duration_s: {n * CYCLE_S:.1f}", "contacts: []", "commands:"]
    for k in range(n):
        for start, end, dx in CYCLE:
            t0 = k * CYCLE_S
            lines.append(f"  - {{effector: left_hand, start_s: {t0 + start:.1f}, end_s: {t0 + end:.1f}, "
                         f"offset_m: [{dx}, 0.0, 0.0]}}")
    path.write_text("\n".join(lines) + "\n")
    return n


# ------------------------------------------------------------------------------------ processes
def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(d.name))
    return kids


def process_tree(root_pid: int) -> list[int]:
    kids = _children()
    out, todo = [], [root_pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def process_name(pid: int) -> str:
    """``dora`` for the runtime, the node's executable (``contactflow-recorder``) otherwise."""
    try:
        argv = (Path(f"/proc/{pid}") / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    argv = [a.decode(errors="replace") for a in argv if a]
    for a in argv[:3]:
        base = os.path.basename(a)
        if base.startswith("contactflow-") or base == "dora":
            return base
    return os.path.basename(argv[0]) if argv else "?"


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process so far [s] (``/proc/<pid>/stat``)."""
    try:
        fields = (Path(f"/proc/{pid}") / "stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int, field: str = "VmRSS") -> int | None:
    """Resident memory of a process [bytes]: ``VmRSS`` (all), or ``RssAnon`` (its heap and stacks:
    what a leak grows; ``RssFile`` is the mapped libraries' pages it touched)."""
    try:
        for line in (Path(f"/proc/{pid}") / "status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


# ----------------------------------------------------------------------------- growing streams
class StreamTail:
    """Reads the complete IPC messages appended to a growing Arrow stream file since the last call."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.schema: pa.Schema | None = None
        self.seq_gaps = SeqGaps()  # seqs missing between the rows read (contactflow/recording/store.py)
        self.rows = 0

    @property
    def missing(self) -> int:
        return self.seq_gaps.missing

    def poll(self) -> list[pa.RecordBatch]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        buf = pa.BufferReader(pa.py_buffer(data))
        batches, used = [], 0
        while used < len(data):
            try:
                msg = pa.ipc.read_message(buf)
            except (pa.ArrowInvalid, OSError, EOFError):
                break  # an incomplete message at the end: read it next time
            if msg is None:
                break
            used = buf.tell()
            if msg.type == "schema":
                self.schema = pa.ipc.read_schema(msg)
            elif msg.type == "record batch" and self.schema is not None:
                b = pa.ipc.read_record_batch(msg, self.schema)
                batches.append(b)
                seq = b.column("seq").to_numpy()
                self.seq_gaps.add_block(seq)
                self.rows += int(seq.size)
        self.offset += used
        return batches


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


# ----------------------------------------------------------------------------------------- run
def soak(graph: str, duration_s: float, period_s: float, keep: bool) -> dict:
    from contactflow.paths import scripts_env

    work = Path(tempfile.mkdtemp(prefix="soak_seiko_"))
    rec_root = work / "recordings"
    rec_root.mkdir()
    scenario = work / "soak_scenario.yaml"
    cycles = looping_scenario(scenario, 3.0 * duration_s)
    # the driver ends a run at --max-sim-time-s (600 s by default): lift it in a copy of the graph
    import yaml

    flow = yaml.safe_load((ROOT / graph).read_text())
    for node in flow["nodes"]:
        if node.get("id") == "mujoco_driver":
            node["args"] = f"{node.get('args', '')} --max-sim-time-s {10.0 * duration_s:.0f}"
    graph_copy = work / Path(graph).name
    graph_copy.write_text(yaml.safe_dump(flow, sort_keys=False))
    env = dict(scripts_env(), CONTACTFLOW_RECORDINGS=str(rec_root), CONTACTFLOW_SCENARIO=str(scenario))
    dora = shutil.which("dora", path=env["PATH"]) or str(Path(sys.executable).parent / "dora")
    log_path = work / "dora_run.log"
    t_start = time.monotonic()
    with open(log_path, "w") as logf:
        proc = subprocess.Popen([dora, "run", "--stop-after", f"{int(duration_s)}s", str(graph_copy)], cwd=ROOT, env=env,
                                stdout=logf, stderr=subprocess.STDOUT)
    tails: dict[str, StreamTail] = {}
    samples = []
    run_dir: Path | None = None
    next_sample = t_start + period_s
    prev_ticks = prev_wall_ns = prev_t = prev_cpu = None
    while proc.poll() is None:
        time.sleep(min(1.0, max(0.0, next_sample - time.monotonic())))
        if time.monotonic() < next_sample:
            continue
        next_sample += period_s
        now = time.monotonic() - t_start
        if now > duration_s - 1.0:
            continue  # the stop is due: the processes are exiting, their RSS and CPU no longer the run's
        pids = process_tree(proc.pid)
        rss: dict[str, int] = {}
        rss_anon: dict[str, int] = {}
        cpu_total = 0.0
        for pid in pids:
            r = rss_bytes(pid)
            if r is None:
                continue
            name = process_name(pid)
            key = name if name not in rss else f"{name}#{pid}"
            rss[key] = r
            rss_anon[key] = rss_bytes(pid, "RssAnon") or 0
            cpu_total += cpu_seconds(pid) or 0.0
        if run_dir is None:
            runs = [p for p in rec_root.iterdir() if p.is_dir() and not p.is_symlink()]
            run_dir = runs[0] if runs else None
        sample = {"t_wall_s": round(now, 1), "rss_bytes": rss, "loadavg_1min": os.getloadavg()[0],
                  "rss_anon_bytes": rss_anon, "cpu_s": cpu_total}
        if run_dir is not None:
            for f in sorted(run_dir.glob("*.arrows")):
                tails.setdefault(f.name, StreamTail(f))
            sensors = None
            for name, tail in tails.items():
                batches = tail.poll()
                if name == SENSORS and batches:
                    sensors = pa.Table.from_batches(batches)
            sample["recording_bytes"] = dir_size(run_dir)
            sample["missing_seq"] = {n: t.missing for n, t in tails.items() if t.missing}
            st = tails.get(SENSORS)
            if st is not None and sensors is not None and sensors.num_rows:
                ticks = st.rows
                wall_ns = int(sensors.column("t_wall_ns")[-1].as_py())
                t_sim = float(sensors.column("t")[-1].as_py())
                if prev_ticks is not None and ticks > prev_ticks:
                    sample["tick_ms"] = (wall_ns - prev_wall_ns) / 1e6 / (ticks - prev_ticks)
                    sample["realtime_factor"] = (t_sim - prev_t) / ((wall_ns - prev_wall_ns) / 1e9)
                    # CPU of all the dataflow's processes per tick: the work, whatever the other jobs' load
                    sample["cpu_ms_per_tick"] = (cpu_total - prev_cpu) * 1e3 / (ticks - prev_ticks)
                sample["ticks"] = ticks
                sample["t_sim_s"] = t_sim
                prev_ticks, prev_wall_ns, prev_t, prev_cpu = ticks, wall_ns, t_sim, cpu_total
        samples.append(sample)
        print(f"[soak] {now:7.0f} s  ticks {sample.get('ticks', 0):>8}  tick {sample.get('tick_ms', float('nan')):6.3f} ms  "
              f"rec {sample.get('recording_bytes', 0) / 1e6:8.1f} MB  load {sample['loadavg_1min']:.1f}  "
              + "  ".join(f"{k} {v / 1e6:.0f}" for k, v in sorted(rss.items())) + " MB", flush=True)
    rc = proc.wait()
    total_s = time.monotonic() - t_start
    summary = manifest = None
    if run_dir is not None:
        for tail in tails.values():
            tail.poll()
        for f in sorted(run_dir.glob("*.arrows")):  # streams that appeared after the last sample
            if f.name not in tails:
                tails[f.name] = StreamTail(f)
                tails[f.name].poll()
        if (run_dir / "summary.json").exists():
            summary = json.loads((run_dir / "summary.json").read_text())
        if (run_dir / "manifest.json").exists():
            manifest = json.loads((run_dir / "manifest.json").read_text())
    log_tail = log_path.read_text(errors="replace")[-4000:]
    res = {
        "graph": graph, "duration_s": duration_s, "sample_period_s": period_s, "scenario_cycles": cycles,
        "dora_exit_code": rc, "dora_run_total_wall_s": total_s, "samples": samples,
        "final_recording_bytes": dir_size(run_dir) if run_dir is not None else None,
        "final_missing_seq": {n: t.missing for n, t in tails.items()},
        "final_rows": {n: t.rows for n, t in tails.items()},
        "recorder_summary": {k: summary.get(k) for k in ("recording_gaps", "recording_gaps_by_stream",
                                                         "recording_lost_batches", "ticks", "sim_time_s",
                                                         "wall_time_s", "realtime_factor", "fell")}
        if summary else None,
        # the recorder's counts, written when it closed the run (before, and whatever happened to, the summary)
        "recorder_manifest": {k: manifest.get(k) for k in ("complete", "recording_gaps", "recording_lost_batches",
                                                           "messages", "summary")} if manifest else None,
        "dora_log_tail": log_tail if rc != 0 or summary is None else None,
    }
    if keep and run_dir is not None:
        res["recording"] = str(run_dir)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return res


def run_samples(res: dict) -> list[dict]:
    """The samples of the running dataflow: those taken at the end (processes already exiting) are
    not the run's; kept: those with every process of the first-minute sample still there."""
    samples = [s for s in res["samples"] if s["t_wall_s"] <= res["duration_s"] - 1.0]
    ref = next((set(s["rss_bytes"]) for s in samples if s["t_wall_s"] >= FIRST_MINUTE_S - 1e-6), None)
    if ref is not None:
        samples = [s for s in samples if s["t_wall_s"] < FIRST_MINUTE_S - 1e-6 or ref <= set(s["rss_bytes"])]
    return samples


def verdict(res: dict) -> dict:
    """The issue's criteria from the samples."""
    samples = run_samples(res)
    after = [s for s in samples if s["t_wall_s"] >= FIRST_MINUTE_S - 1e-6]
    growth = {}
    if after:
        first, last = after[0]["rss_bytes"], samples[-1]["rss_bytes"]
        for name, r0 in first.items():
            if name in last and r0:
                growth[name] = (last[name] - r0) / r0
    # a step (an allocator arena, a pool growing once) and a leak look alike in the first measure: the
    # growth over the second half of the run tells them apart
    half = [s for s in after if s["t_wall_s"] >= after[-1]["t_wall_s"] / 2] if after else []
    growth_half = {}
    if half:
        mid, last = half[0]["rss_bytes"], samples[-1]["rss_bytes"]
        for name, r0 in mid.items():
            if name in last and r0:
                growth_half[name] = (last[name] - r0) / r0
    growth_anon = {}
    if after and "rss_anon_bytes" in after[0]:
        first, last = after[0]["rss_anon_bytes"], samples[-1]["rss_anon_bytes"]
        growth_anon = {n: (last[n] - r0) / r0 for n, r0 in first.items() if n in last and r0}
    ticks = [s["tick_ms"] for s in after if "tick_ms" in s]
    flat = None
    if len(ticks) >= 4:
        k = max(1, len(ticks) // 10)
        a, b = float(np.median(ticks[:k])), float(np.median(ticks[-k:]))
        flat = {"first_ms": a, "last_ms": b, "change": (b - a) / a}
    cpu = [s["cpu_ms_per_tick"] for s in after if "cpu_ms_per_tick" in s]
    cpu_flat = None
    if len(cpu) >= 4:
        k = max(1, len(cpu) // 10)
        a, b = float(np.median(cpu[:k])), float(np.median(cpu[-k:]))
        cpu_flat = {"first_ms": a, "last_ms": b, "change": (b - a) / a}
    gaps = sum(res["final_missing_seq"].values())
    counts = res.get("recorder_manifest") or res["recorder_summary"] or {}  # older JSONs: the summary's
    rec_gaps = counts.get("recording_gaps")
    lost = counts.get("recording_lost_batches")
    return {
        "rss_growth": growth,
        "rss_growth_max": max(growth.values()) if growth else None,
        "rss_ok": bool(growth) and max(growth.values()) < RSS_GROWTH_MAX,
        "rss_anon_growth": growth_anon,
        "rss_growth_second_half": growth_half,
        "rss_growth_second_half_max": max(growth_half.values()) if growth_half else None,
        "tick_time": flat,  # wall: reported, not judged (the other jobs' load)
        "wall_flat": flat is not None and abs(flat["change"]) < TICK_FLAT_MAX,
        "cpu_per_tick": cpu_flat,
        # the criterion: the graph itself did not slow down (a fall is the other jobs' load falling)
        "tick_flat_ok": cpu_flat is not None and cpu_flat["change"] < TICK_FLAT_MAX,
        "cpu_flat_ok": cpu_flat is not None and cpu_flat["change"] < TICK_FLAT_MAX,
        "missing_seq": gaps,
        "recorder_recording_gaps": rec_gaps,
        "recorder_lost_batches": lost,
        "gaps_ok": gaps == 0 and rec_gaps in (0, None) and lost in (0, None),
    }


def _fmt_s(x) -> str:
    return f"{x:.1f}" if isinstance(x, (int, float)) else "n/a"


def _load_windows(samples: list[dict]) -> tuple[float, float]:
    """Median load average of the first and the last 10 % of the samples after the first minute
    (the windows of the per-tick criteria)."""
    after = [x["loadavg_1min"] for x in samples if x["t_wall_s"] >= FIRST_MINUTE_S - 1e-6 and "cpu_ms_per_tick" in x]
    if not after:
        return float("nan"), float("nan")
    k = max(1, len(after) // 10)
    return float(np.median(after[:k])), float(np.median(after[-k:]))


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = run_samples(res)
    t = np.array([x["t_wall_s"] for x in s]) / 60
    fig, ax = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    names = sorted({k for x in s for k in x["rss_bytes"]})
    for n in names:
        ax[0].plot(t, [x["rss_bytes"].get(n, np.nan) / 1e6 for x in s], label=n, marker=".")
    ax[0].set_ylabel("RSS [MB]")
    ax[0].legend(fontsize=7, ncol=2)
    ax[0].set_title(f"soak: {res['graph']}, {t[-1]:.0f} min (shared 2-core machine)")
    tk = [(x["t_wall_s"] / 60, x["tick_ms"]) for x in s if "tick_ms" in x]
    if tk:
        ax[1].plot(*zip(*tk), marker=".", label="wall time per tick (mean over the sample period)")
    ct = [(x["t_wall_s"] / 60, x["cpu_ms_per_tick"]) for x in s if "cpu_ms_per_tick" in x]
    if ct:
        ax[1].plot(*zip(*ct), marker=".", label="CPU time per tick, all the dataflow's processes")
    ax[1].legend(fontsize=7, loc="upper left")
    ax1b = ax[1].twinx()
    ax1b.plot(t, [x["loadavg_1min"] for x in s], color="0.6", ls="--", label="load average (1 min)")
    ax1b.set_ylabel("load average", color="0.4")
    ax[1].set_ylabel("wall time per tick [ms]")
    ax[1].set_ylim(bottom=0)
    ax[2].plot(t, [x.get("recording_bytes", 0) / 1e6 for x in s], marker=".")
    ax[2].set_ylabel("recording [MB]")
    ax[2].set_xlabel("wall time [min]")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def markdown(res: dict, v: dict, json_path: str, png_path: str) -> str:
    s = run_samples(res)
    loads = [x["loadavg_1min"] for x in s]
    lines = [
        f"## Soak: {s[-1]['t_wall_s'] / 60:.0f} minutes of the lockstep SEIKO graph",
        "",
        f"`nice -n 5 python benchmarks/soak_seiko.py --duration-s {res['duration_s']:.0f}` "
        f"(`{res['graph']}`, the default hand motion looped {res['scenario_cycles']} times; "
        f"{res['started_utc']}, {res['machine']}). The machine was shared with other jobs: load average "
        f"{min(loads):.1f}-{max(loads):.1f} during the run (sampled every {res['sample_period_s']:g} s). Figures: `{json_path}`, plot `{png_path}`.",
        "",
        "| criterion | measured | met |",
        "|---|---|---|",
    ]
    g = v["rss_growth"]
    worst = max(g, key=g.get) if g else None
    lines.append(f"| RSS growth of every process < 5 % after the first minute | max {v['rss_growth_max'] * 100:+.2f} % "
                 f"({worst}); " + ", ".join(f"{k} {x * 100:+.1f} %" for k, x in sorted(g.items())) +
                 f" | {'yes' if v['rss_ok'] else 'NO'} |" if g else "| RSS growth | no samples | NO |")
    ga = v.get("rss_anon_growth") or {}
    if ga:
        lines.append(f"| (heap) anonymous RSS growth after the first minute | max {max(ga.values()) * 100:+.2f} % "
                     f"({max(ga, key=ga.get)}) | - |")
    gh = v.get("rss_growth_second_half") or {}
    if gh:
        lines.append(f"| (leak or step?) RSS growth over the second half of the run | max "
                     f"{v['rss_growth_second_half_max'] * 100:+.2f} % ({max(gh, key=gh.get)}) | - |")
    ct = v.get("cpu_per_tick")
    load_w = _load_windows(s)
    if ct:
        lines.append(f"| per-tick time flat: CPU time per tick of all the dataflow's processes, last 10 % of the samples "
                     f"at most 10 % above the first 10 % | {ct['first_ms']:.3f} -> {ct['last_ms']:.3f} ms "
                     f"({ct['change'] * 100:+.1f} %) | {'yes' if v['tick_flat_ok'] else 'NO'} |")
    else:
        lines.append("| per-tick time flat (CPU time per tick) | too few samples | NO |")
    tt = v["tick_time"]
    if tt:
        lines.append(f"| (beside it, not judged: the other jobs' load) wall time per tick, same windows | "
                     f"{tt['first_ms']:.3f} -> {tt['last_ms']:.3f} ms ({tt['change'] * 100:+.1f} %); load average "
                     f"{load_w[0]:.1f} -> {load_w[1]:.1f} | - |")
    lines.append(f"| no sequence gaps | {v['missing_seq']} seq missing over all streams (read back); recorder: "
                 f"recording_gaps {v['recorder_recording_gaps']}, lost batches {v['recorder_lost_batches']} | "
                 f"{'yes' if v['gaps_ok'] else 'NO'} |")
    rs = res["recorder_summary"] or {}
    ticks = s[-1].get("ticks") if s else None
    rm = res.get("recorder_manifest") or {}
    summ = rm.get("summary") or {}
    lines += [
        "",
        f"Ticks simulated: {ticks} ({_fmt_s(rs.get('sim_time_s'))} s simulated per the summary); recording "
        f"{(res['final_recording_bytes'] or 0) / 1e9:.2f} GB at the end; `dora run` exit code {res['dora_exit_code']} "
        f"after {res['dora_run_total_wall_s']:.0f} s ("
        + ("stopped by `--stop-after`)." if res["dora_run_total_wall_s"] >= res["duration_s"] - 5
           else "ended before `--stop-after`: see `dora_log_tail` in the JSON)."),
    ]
    if summ:
        lines.append(f"The recorder's summary: {summ.get('state')}"
                     + (f" ({summ['reason']})" if summ.get("reason") else "")
                     + f"; `{summ.get('command', 'contactflow rec summary RUN')}` computes it.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration-s", type=float, default=3600.0)
    ap.add_argument("--sample-period-s", type=float, default=60.0)
    ap.add_argument("--graph", default="dataflows/seiko_talos.yml")
    ap.add_argument("--out", default="docs/soak_seiko.json")
    ap.add_argument("--plot", default="docs/soak_seiko.png")
    ap.add_argument("--md", default="", help="also write the markdown section to this file")
    ap.add_argument("--keep-recording", action="store_true")
    ap.add_argument("--from-json", default="", help="no run: recompute the criteria, plot and markdown of a "
                    "JSON this script wrote")
    args = ap.parse_args(argv)
    if args.from_json:
        res = json.loads(Path(args.from_json).read_text())
    else:
        started = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        res = soak(args.graph, args.duration_s, args.sample_period_s, args.keep_recording)
        res["started_utc"] = started
        res["machine"] = f"{os.cpu_count()} cores, Python {platform.python_version()}"
    v = verdict(res)
    res["verdict"] = v
    out = ROOT / args.out if not Path(args.out).is_absolute() else Path(args.out)
    out.write_text(json.dumps(res, indent=1))
    png = ROOT / args.plot if not Path(args.plot).is_absolute() else Path(args.plot)
    plot(res, png)
    md = markdown(res, v, args.out, args.plot)
    if args.md:
        Path(args.md).write_text(md)
    print(md)
    return 0 if (v["rss_ok"] and v["tick_flat_ok"] and v["gaps_ok"] and res["dora_exit_code"] == 0) else 1


if __name__ == "__main__":
    sys.exit(main())
