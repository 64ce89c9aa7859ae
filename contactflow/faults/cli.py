"""``contactflow faults``: the fault-injection campaign over the shipped graphs.

``contactflow faults run [--quick] [--graphs G ...] [--kinds K ...] [--out DIR]`` runs every case
(:func:`contactflow.faults.campaign.campaign_cases`) one after the other, prints a progress line per
case and writes ``DIR/results.json`` and ``DIR/table.md`` (one row per case) after each.
``contactflow faults list`` prints the cases without running them; ``contactflow faults table DIR...``
prints one table and the counts from the results of one or more campaigns. Exit status: 0 when every case
passed (pending ones aside), 1 otherwise.
"""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from pathlib import Path

__all__ = ["add_parser"]


def _cases(args):
    from contactflow.faults.campaign import GRAPH_SETUPS, campaign_cases

    graphs = args.graphs or list(GRAPH_SETUPS)
    return campaign_cases(graphs, quick=args.quick, seed=args.seed, kinds=args.kinds or None)


def _list(args) -> int:
    for c in _cases(args):
        print(f"{c.name}  params={dict(c.params)}")
    return 0


def _run(args) -> int:
    from contactflow.faults.campaign import run_campaign

    cases = _cases(args)
    out = Path(args.out or f"faults-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}")
    print(f"contactflow faults: {len(cases)} case(s) -> {out}/results.json, {out}/table.md", flush=True)
    results = run_campaign(cases, out, progress=lambda line: print(line, flush=True), timeout_s=args.timeout_s)
    done = [r for r in results if not r.get("pending") and r["case"]["kind"] != "baseline"]
    ok = sum(1 for r in done if r["pass"])
    base_bad = [r["name"] for r in results if r["case"]["kind"] == "baseline" and not r["pass"]]
    print(f"contactflow faults: {len(done)} fault(s) injected, {ok} passed; "
          f"{sum(1 for r in results if r.get('pending'))} pending"
          f"{'; baselines failed: ' + ', '.join(base_bad) if base_bad else ''}; table: {out / 'table.md'}")
    return 0 if ok == len(done) and not base_bad else 1


def _table(args) -> int:
    import json

    from contactflow.errors import ConfigError
    from contactflow.faults.campaign import markdown_table, summarise

    from contactflow.faults.campaign import reanalyse

    results = []
    for d in args.dirs:
        f = Path(d) / "results.json" if Path(d).is_dir() else Path(d)
        try:
            found = json.loads(f.read_text())["cases"]
        except (OSError, ValueError, KeyError) as exc:
            raise ConfigError(f"{f}: not a campaign's results.json ({exc})") from None
        results += [reanalyse(r, f.parent) for r in found] if args.reanalyse else found
    s = summarise(results)
    print(f"{s['injected']} fault(s) injected, {s['passed']} passed, {len(s['pending'])} pending; "
          f"baselines {s['baselines_passed']}/{s['baselines']} passed\n")
    print(markdown_table(results))
    return 0


def add_parser(sub) -> None:
    from contactflow.faults.cases import PROCESS_KINDS

    p = sub.add_parser("faults", help="fault-injection campaign over the shipped graphs (docs/reliability.md)",
                       description=__doc__.splitlines()[0])
    fs = p.add_subparsers(dest="faults_command", required=True)
    for name, func, hlp in (("run", _run, "run the campaign"), ("list", _list, "list the cases")):
        q = fs.add_parser(name, help=hlp)
        q.add_argument("--quick", action="store_true", help="one case per fault kind per graph")
        q.add_argument("--graphs", nargs="+", metavar="GRAPH", help="dataflow file names (default: all set up)")
        q.add_argument("--kinds", nargs="+", metavar="KIND",
                       help=f"only these fault kinds (process kinds: {' '.join(sorted(PROCESS_KINDS))}; "
                            "graph kinds: contactflow.faults.inject.GRAPH_KINDS)")
        q.add_argument("--seed", type=int, default=0, help="seed of the fault times")
        if name == "run":
            q.add_argument("--out", metavar="DIR", help="output folder (default: ./faults-<UTC time>)")
            q.add_argument("--timeout-s", type=float, default=None,
                           help="hard wall-clock limit per run [s] (default 120, 180 for a hang)")
        q.set_defaults(func=func)
    q = fs.add_parser("table", help="one table (and the counts) from the results.json of one or more campaigns")
    q.add_argument("dirs", nargs="+", metavar="DIR", help="a campaign's --out folder (or its results.json)")
    q.add_argument("--reanalyse", action="store_true",
                   help="measure and judge each run again from its stored log and recording (current criteria)")
    q.set_defaults(func=_table)
