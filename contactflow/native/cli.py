"""``contactflow native``: build the compiled kernels ahead of a run, or say why they do not load."""

from __future__ import annotations

import sys

from contactflow import native

__all__ = ["add_parser"]


def add_parser(sub) -> None:
    p = sub.add_parser(
        "native", help="the compiled SEIKO kernel: build it ahead of a run, or say why it does not load",
        description="The SEIKO stages use a compiled kernel (contactflow/native/seiko_qp11.cpp, built with g++ against "
                    "the pin wheel on first use, ~30 s, then cached); without it they run their Python code (same "
                    "results, slower). `build` builds it now (a graph's nodes then start without the wait); "
                    "`status` says whether it loads and where the library is (building it first if it is not cached).")
    nsub = p.add_subparsers(dest="native_command", required=True)
    for name, text in (("build", "build (or find in the cache) the compiled kernel; exit 1 if it cannot be built"),
                       ("status", "print whether the compiled kernel loads (built first if not cached), and where, "
                                  "or why not; exit 1 if not")):
        q = nsub.add_parser(name, help=text)
        q.set_defaults(func=_run)


def _run(args) -> int:
    ok, what = native.status()
    if ok:
        print(f"seiko_qp11: loads ({what})")
        return 0
    print(f"seiko_qp11: not available: {what}", file=sys.stderr)
    return 1
