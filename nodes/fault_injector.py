"""fault_injector node: a pass-through on one connection that corrupts it from a given time (reliability campaign).

Inputs:  ``in`` (any contract: the wrapped output's messages, as the source sends them).
Outputs: ``out`` (the same contract): every message forwarded unchanged, metadata included, until the
         first one whose simulated time reaches ``--at-s``; then the fault (``--fault``): ``nan`` / ``inf``
         (the values of ``--count`` messages replaced, all or only ``--index``), ``wrong_length`` (``--count``
         messages cut by one value), ``flood`` (one message sent ``--count`` times in a burst); then
         unchanged again.

``contactflow faults`` inserts it with :func:`contactflow.faults.inject.edit_graph` (source output ->
injector -> destination input, the destination's queue settings on both edges); the logic is
:class:`contactflow.faults.inject.PortFaultInjector`. It logs one line when the fault starts (time,
seq, connection) and one at the end. It ends when its event stream ends (its input closed and every queued message forwarded), so
the run ends as without it.
"""

from __future__ import annotations

import logging

from contactflow.nodes._runtime import NodeArgumentParser, connect, log_info, node_main

log = logging.getLogger("contactflow.fault_injector")


def main() -> int:
    import numpy as np
    import pyarrow as pa

    from contactflow.faults.inject import PORT_KINDS, PortFault, PortFaultInjector

    p = NodeArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fault", required=True, choices=sorted(PORT_KINDS), help="the fault applied from --at-s")
    p.add_argument("--at-s", type=float, default=0.0, help="simulated time [s] of the first faulted message")
    p.add_argument("--count", type=int, default=1,
                   help="nan/inf/wrong_length: messages faulted; flood: copies of the message sent at once")
    p.add_argument("--index", type=int, default=None, help="nan/inf: only this value of the message (default: all)")
    p.add_argument("--target", default="?", help="the wrapped source output (node/output), for the log")
    p.add_argument("--to", default="?", help="the destination input(s) (node/input), for the log")
    args = p.parse_args()
    injector = PortFaultInjector(PortFault(args.fault, args.at_s, args.count, args.index))
    where = f"{args.target} -> {args.to}"

    node = connect()
    received = 0
    while True:
        ev = node.next(timeout=1.0)
        if ev is None:
            break
        typ = ev["type"]
        if typ == "INPUT" and ev["id"] == "in":
            received += 1
            value, md = ev["value"], dict(ev["metadata"])
            fired_before = injector.fired is not None
            vec = value.to_numpy(zero_copy_only=False) if hasattr(value, "to_numpy") else np.asarray(value)
            out = injector.process(vec, md)
            if injector.fired is not None and not fired_before:
                seq, t = injector.fired
                log_info(node, f"[fault_injector] {args.fault} on {where} from t = {t:.3f} s (seq {seq}, "
                               f"{'%d copies' % args.count if args.fault == 'flood' else '%d message(s)' % args.count})")
            for vals, meta in out:
                # unchanged messages go out as received (same Arrow array); faulted ones as float64
                node.send_output("out", value if vals is vec else pa.array(vals, type=pa.float64()), meta)
        # INPUT_CLOSED and STOP overtake queued inputs (dora 1.1): keep reading until the stream ends
    state = "not reached" if injector.fired is None else f"{injector.faulted} message(s) faulted"
    log_info(node, f"[fault_injector] {args.fault} on {where}: {received} message(s) received, fault {state}")
    return 0


if __name__ == "__main__":
    node_main("fault_injector", main)
