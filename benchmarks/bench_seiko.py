"""SEIKO on Talos: the targets table of the real-time issue, new code against a baseline commit in
the same run (``contactflow bench seiko`` runs this script).

Usage: python benchmarks/bench_seiko.py [--baseline d633261] [--seconds 8] [--rounds 2]
       [--no-dora] [--no-realtime] [--no-qp] [--out docs/benchmarks_seiko.json] [--md FILE]

The baseline ("today's code") is the ``contactflow`` package of ``--baseline``, extracted with
``git archive`` into a temporary directory, renamed textually to ``contactflow_baseline`` and
imported in this process, so both versions run on the same machine state, interleaved:

1. Per step, on the same states: one closed loop (:func:`contactflow.seiko.loop.run_loop`, lag 2,
   the default scenario's first ``--seconds``) in which every tick feeds the Retargeting stage and
   the Controller stage of BOTH versions the same messages (the baseline's stages keep their own
   internal state; the order alternates every tick); the new outputs drive the robot. Median / p99
   of each stage's ``tick`` (a node's work per tick: messages in, QP, messages out), the ratio
   baseline / new, and the largest difference between their outputs over the run (``q_d`` of the
   Retargeting, ``theta_cmd`` of the Controller: same QP solutions within the solvers' tolerance).
2. In-process closed loop: the same loop with the new stages and with the baseline's stages
   (everything else -- scenario player, simulator, command safety -- shared), alternated
   ``--rounds`` times; simulated seconds per wall second, median over the rounds, and the ratio.
3. Lockstep dora graph: ``dora run dataflows/seiko_talos.yml`` (default scenario, recorder on),
   its summary's ``realtime_factor`` against the new in-process loop on the same full scenario,
   run just before it.
4. Real-time graph: ``dora run dataflows/seiko_talos_realtime.yml`` (the driver paced by the wall
   clock), the summary's deadline misses, command ages, longest stall and recording gaps.
5. The QP solvers per QP: ``benchmarks/bench_seiko_qp.py --run QP_SECONDS`` (every QP of a
   closed-loop run solved by daqp and by quadprog, interleaved).

Writes a JSON file and a markdown table (the SEIKO section of docs/benchmarks.md is written from it).
The machine's speed drifts ~2x from day to day: compare the ratios, each taken in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from contactflow.robot import load_robot  # noqa: E402
from contactflow.seiko.loop import SeikoPipeline, run_loop  # noqa: E402

CPP_RETARGETING_MS = 0.50  # the authors' C++ on the robot's computer (RA-L 2024 §V-A)
CPP_CONTROLLER_MS = 0.40
SCENARIO = ROOT / "robots/talos/scenarios/hand_forward.yaml"  # the default graph's scenario
LAG = 2  # dataflows/seiko_talos.yml
TARGETS = {"retargeting_speedup": 2.5, "controller_speedup": 2.5, "loop_speedup": 1.8, "graph_over_loop": 0.8,
           "realtime_miss_ratio": 0.01}


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}"


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def stats_ms(x) -> dict:
    x = np.asarray(x) * 1e3
    return {"median_ms": float(np.median(x)), "p99_ms": float(np.percentile(x, 99)), "mean_ms": float(np.mean(x)),
            "n": int(x.size)}


# ----------------------------------------------------------------------------------- the baseline

def load_baseline(commit: str, workdir: Path) -> types.ModuleType:
    """Import the ``contactflow`` package of ``commit`` as ``contactflow_baseline``.

    Raises:
        RuntimeError: ``git archive`` failed (not a checkout, unknown commit).
    """
    tar = workdir / "baseline.tar"
    proc = subprocess.run(["git", "archive", "--format=tar", "-o", str(tar), commit, "contactflow"], cwd=ROOT,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"git archive {commit} contactflow failed: {proc.stderr.strip()}")
    with tarfile.open(tar) as tf:
        tf.extractall(workdir, filter="data")
    pkg = workdir / "contactflow_baseline"
    (workdir / "contactflow").rename(pkg)
    word = re.compile(r"\bcontactflow\b")
    for f in pkg.rglob("*.py"):
        f.write_text(word.sub("contactflow_baseline", f.read_text()))
    sys.path.insert(0, str(workdir))
    import importlib

    return importlib.import_module("contactflow_baseline")


def baseline_pipeline(base, robot, environment=None) -> SeikoPipeline:
    """A :class:`SeikoPipeline` running the baseline's stages with the baseline's default configs."""
    import importlib

    st = importlib.import_module(f"{base.__name__}.seiko.stages")
    fcfg = importlib.import_module(f"{base.__name__}.operator.input_filter").InputFilterConfig()
    rcfg = importlib.import_module(f"{base.__name__}.seiko.retargeting").RetargetingConfig()
    ccfg = importlib.import_module(f"{base.__name__}.seiko.controller").ControllerConfig()
    return SeikoPipeline(robot, filter_config=fcfg, retargeting_config=rcfg, controller_config=ccfg,
                         environment=environment, lag=LAG, stages=st)


class PairedStage:
    """Stands in for a stage of the new pipeline: each ``tick`` runs the new stage and the
    baseline's with the same arguments (alternating which goes first), times both and keeps the
    largest difference of ``key`` between their outputs; returns the new stage's output."""

    def __init__(self, new, old, key: str):
        self.new, self.old, self.key = new, old, key
        self.t_new: list[float] = []
        self.t_old: list[float] = []
        self.max_diff = 0.0
        self._k = 0

    def __getattr__(self, name):
        return getattr(self.new, name)

    def _pick(self, out):
        d = out[0] if isinstance(out, tuple) else out
        return np.asarray(d[self.key], dtype=float)

    def tick(self, *args, **kw):
        pc = time.perf_counter
        if self._k % 2 == 0:
            a = pc(); rn = self.new.tick(*args, **kw); b = pc(); ro = self.old.tick(*args, **kw); c = pc()
            tn, to = b - a, c - b
        else:
            a = pc(); ro = self.old.tick(*args, **kw); b = pc(); rn = self.new.tick(*args, **kw); c = pc()
            to, tn = b - a, c - b
        self._k += 1
        self.t_new.append(tn)
        self.t_old.append(to)
        self.max_diff = max(self.max_diff, float(np.max(np.abs(self._pick(rn) - self._pick(ro)))))
        return rn


def per_step(robot, base, seconds: float) -> dict:
    p = SeikoPipeline(robot, lag=LAG)
    old = baseline_pipeline(base, robot)
    p.retargeting = rt = PairedStage(p.retargeting, old.retargeting, "q_d")
    p.controller = ct = PairedStage(p.controller, old.controller, "theta_cmd")
    L = run_loop(robot, SCENARIO, duration_s=seconds, pipeline=p)
    res = {"sim_seconds": float(L.t[-1]), "fell": bool(L.fell)}
    for name, st, cpp in (("retargeting", rt, CPP_RETARGETING_MS), ("controller", ct, CPP_CONTROLLER_MS)):
        n, o = stats_ms(st.t_new), stats_ms(st.t_old)
        res[name] = {"new": n, "baseline": o, "speedup_median": o["median_ms"] / n["median_ms"],
                     "speedup_p99": o["p99_ms"] / n["p99_ms"], "new_over_cpp": n["median_ms"] / cpp,
                     "baseline_over_cpp": o["median_ms"] / cpp, "cpp_ms": cpp,
                     "max_abs_output_diff": st.max_diff, "output": st.key}
    res["retargeting_failures"] = {"new": int(rt.new.failures), "baseline": int(rt.old.failures)}
    res["controller_failures"] = {"new": int(ct.new.failures), "baseline": int(ct.old.failures)}
    return res


def loops(robot, base, seconds: float, rounds: int) -> dict:
    runs = {"new": [], "baseline": []}
    finals = {}
    for _ in range(rounds):
        for which in ("new", "baseline"):
            pipe = SeikoPipeline(robot, lag=LAG) if which == "new" else baseline_pipeline(base, robot)
            L = run_loop(robot, SCENARIO, duration_s=seconds, pipeline=pipe)
            runs[which].append({"realtime_factor": L.realtime_factor, "fell": bool(L.fell),
                                "stage_median_ms": (np.median(L.stage_s, axis=0) * 1e3).tolist()})
            finals[which] = L.q[-1]
    med = {w: float(np.median([r["realtime_factor"] for r in v])) for w, v in runs.items()}
    return {"sim_seconds": seconds, "rounds": runs, "new_realtime_factor": med["new"],
            "baseline_realtime_factor": med["baseline"], "speedup": med["new"] / med["baseline"],
            "final_q_max_abs_diff": float(np.max(np.abs(finals["new"] - finals["baseline"])))}


# -------------------------------------------------------------------------------------- dora runs

def dora_run(dataflow: str, timeout_s: float = 900.0) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, CONTACTFLOW_RECORDINGS=tmp)
        env.pop("CONTACTFLOW_SCENARIO", None)
        dora = shutil.which("dora") or str(Path(sys.executable).parent / "dora")
        t0 = time.perf_counter()
        proc = subprocess.run([dora, "run", dataflow], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=timeout_s)
        total = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"dora run {dataflow} failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
        run = next(p for p in sorted(Path(tmp).iterdir()) if p.is_dir() and not p.is_symlink())
        summary = json.loads((run / "summary.json").read_text())
    return {"dataflow": dataflow, "summary": summary, "dora_run_total_wall_s": total}


def lockstep_graph(robot) -> dict:
    L = run_loop(robot, SCENARIO, lag=LAG)
    d = dora_run("dataflows/seiko_talos.yml")
    rt = float(d["summary"]["realtime_factor"])
    return {"loop_realtime_factor": L.realtime_factor, "loop_fell": bool(L.fell), "graph_realtime_factor": rt,
            "graph_over_loop": rt / L.realtime_factor, "dora_run_total_wall_s": d["dora_run_total_wall_s"],
            "summary": d["summary"]}


REALTIME_KEYS = ("realtime", "periods", "deadline_misses", "deadline_miss_ratio", "command_age_ms_p50",
                 "command_age_ms_p99", "longest_stall_ms", "driver_late_ms_max", "recording_gaps", "fell",
                 "sim_time_s", "realtime_factor")


def realtime_graph(lockstep_summary: dict | None) -> dict:
    d = dora_run("dataflows/seiko_talos_realtime.yml")
    s = d["summary"]
    res = {k: s.get(k) for k in REALTIME_KEYS}
    res["dora_run_total_wall_s"] = d["dora_run_total_wall_s"]
    res["summary"] = s
    if lockstep_summary:  # tracking metrics against the lockstep run of the same benchmark
        res["tracking_vs_lockstep"] = {k: [s.get(k), lockstep_summary.get(k)] for k, v in lockstep_summary.items()
                                       if isinstance(v, (int, float)) and not isinstance(v, bool)
                                       and any(w in k for w in ("error", "rmse"))}
    return res


def qp_bench(seconds: float) -> dict | None:
    script = ROOT / "benchmarks" / "bench_seiko_qp.py"
    if not script.exists():
        return None
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "qp.json"
        proc = subprocess.run([sys.executable, str(script), "--run", f"{seconds:g}", "--out", str(out)], cwd=ROOT,
                              capture_output=True, text=True, timeout=900)
        if proc.returncode != 0 or not out.exists():
            return {"error": (proc.stdout + proc.stderr)[-2000:]}
        return json.loads(out.read_text())


# ------------------------------------------------------------------------------------------ report

def _yes(ok) -> str:
    return "n/a" if ok is None else ("**yes**" if ok else "**no**")


def markdown(res: dict) -> str:
    rows = ["| target | new | baseline (same run) | ratio | aim | met |", "|---|---|---|---|---|---|"]
    ps = res.get("per_step")
    if ps:
        for name, label, key in (("retargeting", "Retargeting stage tick (QP 9)", "retargeting_speedup"),
                                 ("controller", "Controller stage tick (QP 11)", "controller_speedup")):
            s = ps[name]
            n, o = s["new"], s["baseline"]
            rows.append(f"| {label}, median (p99) | {n['median_ms']:.3f} ({n['p99_ms']:.3f}) ms, "
                        f"x{s['new_over_cpp']:.2f} the C++ {s['cpp_ms']:.2f} ms | {o['median_ms']:.3f} "
                        f"({o['p99_ms']:.3f}) ms | x{s['speedup_median']:.2f} (p99 x{s['speedup_p99']:.2f}) | "
                        f">= x{TARGETS[key]} | {_yes(s['speedup_median'] >= TARGETS[key])} |")
        rows.append(f"| same solutions: max abs(new - baseline) over {ps['sim_seconds']:.1f} s | Retargeting q_d "
                    f"{ps['retargeting']['max_abs_output_diff']:.1e}, Controller theta_cmd "
                    f"{ps['controller']['max_abs_output_diff']:.1e} | failures new {ps['retargeting_failures']['new']}"
                    f"/{ps['controller_failures']['new']}, baseline {ps['retargeting_failures']['baseline']}"
                    f"/{ps['controller_failures']['baseline']} | - | - | - |")
    lp = res.get("loop")
    if lp:
        rows.append(f"| in-process closed loop, sim s / wall s ({lp['sim_seconds']:.0f} s, median of "
                    f"{len(lp['rounds']['new'])}) | {lp['new_realtime_factor']:.3f} | {lp['baseline_realtime_factor']:.3f} | "
                    f"x{lp['speedup']:.2f} | >= x{TARGETS['loop_speedup']} | {_yes(lp['speedup'] >= TARGETS['loop_speedup'])} |")
    g = res.get("lockstep")
    if g:
        rows.append(f"| `dora run dataflows/seiko_talos.yml` (lockstep, recorder on), sim s / wall s | "
                    f"{g['graph_realtime_factor']:.3f} (`dora run` {g['dora_run_total_wall_s']:.1f} s) | in-process loop, "
                    f"same scenario: {g['loop_realtime_factor']:.3f} | x{g['graph_over_loop']:.2f} | >= x{TARGETS['graph_over_loop']} | "
                    f"{_yes(g['graph_over_loop'] >= TARGETS['graph_over_loop'])} |")
    r = res.get("realtime")
    if r and "error" not in r:
        ratio = r.get("deadline_miss_ratio")
        ok = None if ratio is None else ratio < TARGETS["realtime_miss_ratio"]
        rows.append(f"| real-time graph: missed 2 ms periods | {r.get('deadline_misses')} of {r.get('periods')} "
                    f"({100 * (ratio or 0):.2f} %) | - | - | < 1 % | {_yes(ok)} |")
        rows.append(f"| real-time graph: command age p50 / p99, longest stall, recording gaps | "
                    f"{r.get('command_age_ms_p50')} / {r.get('command_age_ms_p99')} ms, {r.get('longest_stall_ms')} ms, "
                    f"{r.get('recording_gaps')} | - | - | reported | - |")
    elif r:
        rows.append(f"| real-time graph | failed: {r['error'][:200]!r} | - | - | - | - |")
    lines = [f"Machine: {res['machine']}; {res['date_utc']} UTC; commit {res['commit']} vs baseline {res['baseline']}; "
             f"load average before {res['load_before']}, after {res.get('load_after')}.", "", *rows]
    q = res.get("qp")
    if q and "error" not in q:
        lines += ["", f"QP solvers per QP (`benchmarks/bench_seiko_qp.py`, {q.get('source')}; thread CPU time, "
                  "interleaved):", "",
                  "| stage (QPs; variables, compact rows / stacked rows) | quadprog stacked + checks, median / p99 | "
                  "daqp compact + checks | daqp alone | ratio | max abs(x_daqp - x_quadprog) | failures |",
                  "|---|---|---|---|---|---|---|"]
        for stage in ("retargeting", "controller"):
            r = q.get(stage)
            if not r:
                continue
            tm, sz = r["times"], r.get("size", {})
            lines.append(f"| {stage} ({r['n_qps']}; {sz.get('n_var')}, {sz.get('n_rows')} / {sz.get('n_stacked_rows')}) | "
                         + " | ".join(f"{tm[k]['median_us']:.0f} / {tm[k]['p99_us']:.0f} us" for k in ("quadprog", "daqp", "daqp_raw"))
                         + f" | x{tm['speedup_median']:.2f} | {r['max_abs_dx']:.1e} | {len(r['failures'])} |")
    elif q:
        lines += ["", f"QP solvers: failed: {q['error'][-300:]!r}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="d633261", help="commit of today's code (default d633261)")
    ap.add_argument("--seconds", type=float, default=8.0, help="simulated seconds of the per-step and loop runs")
    ap.add_argument("--rounds", type=int, default=2, help="alternated loop runs of each version")
    ap.add_argument("--no-dora", action="store_true", help="skip both dora graphs")
    ap.add_argument("--no-realtime", action="store_true", help="skip the real-time graph")
    ap.add_argument("--no-qp", action="store_true", help="skip benchmarks/bench_seiko_qp.py")
    ap.add_argument("--qp-seconds", type=float, default=4.0, help="closed-loop seconds whose every QP is solved both ways")
    ap.add_argument("--out", default=None, help="write the results as JSON")
    ap.add_argument("--md", default=None, help="write the markdown table")
    args = ap.parse_args(argv)
    robot = load_robot("talos")
    res = {"machine": machine(), "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
           "commit": git("rev-parse", "--short", "HEAD") + ("+dirty" if git("status", "--porcelain", "--", "contactflow", "nodes", "dataflows") else ""),
           "baseline": args.baseline, "load_before": [round(x, 2) for x in os.getloadavg()], "targets": TARGETS}

    def step(name, fn):
        t0 = time.perf_counter()
        print(f"[bench seiko] {name} ...", flush=True)
        try:
            res[name] = fn()
        except Exception as exc:  # one failed part must not lose the others: reported in the table
            res[name] = {"error": f"{type(exc).__name__}: {exc}"}
        print(f"[bench seiko] {name}: {time.perf_counter() - t0:.1f} s", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        base = load_baseline(args.baseline, Path(tmp))
        step("per_step", lambda: per_step(robot, base, args.seconds))
        step("loop", lambda: loops(robot, base, args.seconds, args.rounds))
    if not args.no_dora:
        step("lockstep", lambda: lockstep_graph(robot))
        if not args.no_realtime:
            step("realtime", lambda: realtime_graph((res.get("lockstep") or {}).get("summary")))
    if not args.no_qp:
        step("qp", lambda: qp_bench(args.qp_seconds))
    res["load_after"] = [round(x, 2) for x in os.getloadavg()]
    for k in ("per_step", "loop", "lockstep", "realtime"):
        if isinstance(res.get(k), dict) and "error" in res[k]:
            print(f"[bench seiko] {k} FAILED: {res[k]['error']}", file=sys.stderr)
    md = markdown({k: v for k, v in res.items() if not (isinstance(v, dict) and "error" in v and k != "realtime")})
    print(md)
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=2, default=float))
    if args.md:
        Path(args.md).write_text(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
