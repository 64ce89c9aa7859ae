"""The complementary wrench filter as its own node: what the graph costs against ``seiko_talos.yml``.

Usage: python benchmarks/bench_seiko_wrench_filter.py [--rounds 3] [--out FILE.json]

``dataflows/seiko_talos_wrench_filter.yml`` (and ``_lag1``) are ``seiko_talos.yml`` with the filter of SEIKO eq. 13
moved out of the Controller into ``nodes/wrench_filter.py``: one more node and one more hop on the driver <->
Controller path. Each round runs the three graphs one after the other (``dora run``, lockstep, recorder on, the
default scenario), so that every ratio is taken against ``seiko_talos.yml`` of the same round (this machine's speed
drifts within minutes). Per run: the summary's simulated seconds per wall second, the median wall time per tick,
the hand's tracking and the feet's force tracking (the graphs must control the robot alike), and the filter node's
own CPU per tick (its log line). Prints a markdown table (median over the rounds, the spread beside it) and writes
the JSON with ``--out``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_seiko import dora_run, machine  # noqa: E402

GRAPHS = ("dataflows/seiko_talos.yml", "dataflows/seiko_talos_wrench_filter.yml",
          "dataflows/seiko_talos_wrench_filter_lag1.yml")
KEYS = ("realtime_factor", "tick_wall_ms_p50", "left_hand_max_error_m", "foot_fz_tracking_rmse_n")
FILTER_CPU = re.compile(r"wrench_filter: (\d+) ticks, (\d+) us CPU per tick")


def one_run(graph: str) -> dict:
    d = dora_run(graph, keep_output=True)
    s = d["summary"]
    row = {k: s.get(k) for k in KEYS} | {"fell": bool(s.get("fell")), "dora_run_total_wall_s": d["dora_run_total_wall_s"]}
    m = FILTER_CPU.search(d["output"])
    row["wrench_filter_cpu_us_per_tick"] = float(m.group(2)) if m else None
    return row


def summarise(rounds: list[dict]) -> dict:
    """Per graph and key: ``{"median", "min", "max"}`` over the rounds that have the value (None when none has)."""
    table = {}
    for g in GRAPHS:
        runs = [rnd[g] for rnd in rounds if g in rnd]
        table[g] = {}
        for key in ("realtime_factor", "over_seiko_talos", "tick_wall_ms_p50", "wrench_filter_cpu_us_per_tick",
                    "left_hand_max_error_m", "foot_fz_tracking_rmse_n"):
            vals = [x[key] for x in runs if x.get(key) is not None]
            table[g][key] = {"median": statistics.median(vals), "min": min(vals), "max": max(vals)} if vals else None
        table[g]["fell"] = sum(bool(x.get("fell")) for x in runs)
        table[g]["runs"] = len(runs)
    return table


def markdown(res: dict) -> str:
    lines = [f"Machine: {res['machine']}; {res['date_utc']} UTC; {len(res['rounds'])} rounds, median (min-max)", "",
             "| graph | sim s / wall s | against seiko_talos.yml, same round | median tick, ms | filter node CPU per tick, us "
             "| left hand max error, mm | foot Fz RMSE, N | fell |", "|---|---|---|---|---|---|---|---|"]
    for g, t in res["table"].items():
        def cell(key, fmt, scale=1.0):
            v = t[key]
            return "-" if v is None else "{} ({}-{})".format(*(fmt.format(v[k] * scale) for k in ("median", "min", "max")))

        lines.append(f"| `{Path(g).name}` | {cell('realtime_factor', '{:.3f}')} | {cell('over_seiko_talos', 'x{:.2f}')} | "
                     f"{cell('tick_wall_ms_p50', '{:.2f}')} | {cell('wrench_filter_cpu_us_per_tick', '{:.0f}')} | "
                     f"{cell('left_hand_max_error_m', '{:.2f}', 1e3)} | {cell('foot_fz_tracking_rmse_n', '{:.2f}')} | "
                     f"{t['fell']} of {t['runs']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the three graphs (default 3)")
    ap.add_argument("--out", default=None, help="write the runs and the table's numbers as JSON")
    args = ap.parse_args(argv)
    res = {"machine": machine(), "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "rounds": []}
    for r in range(args.rounds):
        rnd = {}
        for g in GRAPHS:
            t0 = time.perf_counter()
            try:
                rnd[g] = one_run(g)
            except Exception as exc:  # one failed run is reported, not the loss of the others
                rnd[g] = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
            print(f"[bench wrench filter] round {r}: {g}: {rnd[g].get('realtime_factor')} sim s / wall s "
                  f"({time.perf_counter() - t0:.1f} s){' FAILED: ' + rnd[g]['error'] if 'error' in rnd[g] else ''}",
                  flush=True)
        base = rnd[GRAPHS[0]].get("realtime_factor")
        for g in GRAPHS:
            rf = rnd[g].get("realtime_factor")
            rnd[g]["over_seiko_talos"] = rf / base if rf is not None and base else None
        res["rounds"].append(rnd)
    res["table"] = summarise(res["rounds"])
    print(markdown(res))
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
