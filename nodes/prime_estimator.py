"""prime_estimator node: PRIME (motion, contact-force and inertial-parameter estimation) on a stream.

Inputs: ``sensors`` (the robot's ``sensors`` contract: q, v, tau are read; e.g. a replay of a
recording). Outputs: ``ack`` (seq of each received sample, for a lockstep replay), and after the
input run has finished (a message with ``finished``, or the input closed): ``state`` (refined q, v
per sample), ``forces`` (force.<contact>, world [N]), ``torque`` and ``parameters`` (one message,
``finished``). The estimator is offline: it solves once on the whole received horizon. An input
silent for ``SILENCE_S`` (30 s) before its run finished stops the node with one line (a hung replay).

Duplicates and gaps (:func:`receive_samples`): a sensors message whose ``seq`` was already received
(a duplicated delivery, a flood) is skipped (the first one wins, it is not acknowledged again) and
counted; the count is logged once, when the input run ends. A missing seq (a real gap) still ends
the node before the solve with one line naming the gap (``seq not contiguous (a -> b, n gap(s))``,
:func:`contactflow.prime.io.measurements_from_arrays`).

Stop: the node honours the dataflow's stop (``dora run --stop-after``, Ctrl-C) within one FDDP
iteration, also while it solves: the solver's per-iteration callback polls the node's events and
abandons the solve on a ``STOP``, or on SIGTERM / SIGINT (once the replay has ended, the node's
inputs are closed and dora drops the STOP: it sends SIGTERM after the node's finish grace,
``finish_grace_secs``: 10 min in the shipped PRIME graphs, contactflow.graphs.FINISH_GRACE_S_OFFLINE). dora 1.1
ends every node's input stream right after the stop (the recorder's included; checked: outputs
sent after it never arrive), so an estimate finished after the stop could not be recorded anyway. A run stopped before the estimator sent its outputs
therefore ends with one line naming the node, the phase (receiving or solving, iterations done)
and that no estimate was recorded, and a non-zero exit status (2): never a clean exit with the
outputs silently missing. A run that must keep the estimate ends by itself (the replay's last
message has ``finished``), without ``--stop-after`` or with one longer than the solve.

Args: ``--robot``, ``--config FILE`` (PrimeConfig keys, e.g. robots/go2/prime_estimator.yaml),
``--report FILE`` (JSON report, default ``prime_report_<robot>.json`` in ``$CONTACTFLOW_RECORDINGS``
(absolute: a relative one is refused before the solve) or ``<repo>/recordings``).
"""

from __future__ import annotations

import json
import logging
import signal
import time
from pathlib import Path

import numpy as np

from contactflow.errors import ContactflowError
from contactflow.nodes._runtime import (SILENCE_S, UpstreamError, base_parser, connect, drain_after_finish, load_node_config,
                                       node_main, sender_for, upstream_failure, watched_events)
from contactflow.paths import default_recordings_dir

log = logging.getLogger("contactflow.prime_estimator")


#: the id of the STOP dora sends when a node's inputs have all closed (its upstream ended): not a stop
_INPUTS_CLOSED = "ALL_INPUTS_CLOSED"


class _Stopped(Exception):
    """Raised from the FDDP callback when the dataflow stops during the solve."""


def _stopped_line(phase: str) -> str:
    return (f"stopped by the dataflow {phase}: no estimate was sent, the recording has no prime_estimator "
            "outputs (dora delivers nothing after a stop); let the replay finish the run (no --stop-after, "
            "or a longer one) to keep the estimate")


def receive_samples(node, sin, out, silence_s: float = SILENCE_S) -> tuple[list, list, list, list, list]:
    """Read the ``sensors`` input run until a message with ``finished`` (or the input closes).

    Each new sample is acknowledged on ``ack``. A message whose ``seq`` was already received is
    skipped and counted (module docstring), the count logged once at the end.

    Args:
        node: the dora node (``next(timeout)`` events).
        sin: the ``sensors`` port spec (:func:`contactflow.prime.ports.prime_port_specs`).
        out: the node's sender (``send(port, values, seq=, t=)``).
        silence_s: no ``sensors`` message for this long [s] (wall time) before the run finished raises.

    Returns:
        (seqs, ts, qs, vs, taus): per received sample, in arrival order: seq, t [s], q (nq), v (nv),
        tau (n).

    Raises:
        ContactflowError: the dataflow stopped before the input run finished.
        UpstreamError: an upstream node failed, no sample came, or none for ``silence_s``.
    """
    seqs, ts, qs, vs, taus = [], [], [], [], []
    seen: set[int] = set()
    duplicates, first_dup = 0, None
    for ev in watched_events(node, "sensors", silence_s, lambda: f"no 'sensors' message for {silence_s:.0f} s (after "
                             f"{len(seqs)} samples, before the input run finished): the upstream node hangs"):
        typ = ev["type"]
        if typ == "INPUT" and ev["id"] == "sensors":
            md = ev["metadata"]
            seq = int(md.get("seq", len(seqs)))
            if seq in seen:  # a duplicated delivery: the first one counts
                duplicates += 1
                first_dup = seq if first_dup is None else first_dup
                continue
            vec = ev["value"].to_numpy(zero_copy_only=False)
            f = sin.unpack(vec, check_finite=False)  # non-finite samples are reported with their seq below
            seen.add(seq)
            seqs.append(seq)
            ts.append(float(md.get("t", f["t"][0])))
            qs.append(f["q"].copy())
            vs.append(f["v"].copy())
            taus.append(f["tau"].copy())
            out.send("ack", np.array([float(seq)]), seq=seq, t=ts[-1])
            if md.get("finished", False):
                break
        elif typ == "STOP" and ev.get("id") != _INPUTS_CLOSED:
            raise ContactflowError(_stopped_line(f"while receiving (after {len(seqs)} samples, before the "
                                                 "input run finished)"))
        elif typ in ("INPUT_CLOSED", "STOP"):  # the replay ended without a `finished` message
            break
        elif typ == "NODE_FAILED":
            raise UpstreamError(upstream_failure(ev.get("value")))
    if duplicates:
        log.warning("input 'sensors': %d duplicated message(s) skipped (a seq already received; first at seq %d)",
                    duplicates, first_dup)
    if not seqs:
        raise UpstreamError("no sensors message received")
    return seqs, ts, qs, vs, taus


def main() -> int:
    from contactflow.prime.fie import PrimeConfig, PrimeEstimator
    from contactflow.prime.io import measurements_from_arrays, parameters_vector
    from contactflow.prime.model import load_prime_robot
    from contactflow.prime.ports import prime_port_specs

    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--report", default=None)
    args = p.parse_args()
    pr = load_prime_robot(args.robot)
    # before the solve: a relative $CONTACTFLOW_RECORDINGS is refused now, not after minutes of work
    report = Path(args.report) if args.report else default_recordings_dir(node=True) / f"prime_report_{pr.name}.json"
    cfg = load_node_config(PrimeConfig, args.config)
    est = PrimeEstimator(pr, cfg)
    specs = prime_port_specs(pr, est.bodies, 1.0 / cfg.dt_s)
    sin = specs["sensors"]
    node = connect()
    out = sender_for(node, "prime_estimator", {s.name: s for s in specs.values()}, cfg)

    seqs, ts, qs, vs, taus = receive_samples(node, sin, out)
    meas, info = measurements_from_arrays(pr, cfg, np.array(seqs), np.array(ts), np.array(qs), np.array(vs),
                                          np.array(taus), where="input 'sensors'")
    log.info("solving PRIME on %d steps (identify %s)", meas.T, list(est.bodies))
    t_solve = time.monotonic()
    # Once its inputs have all closed (the replay ended) the node's event stream is over and dora 1.1
    # drops the STOP it sends later: the stop then comes as SIGTERM (after the node's finish grace)
    # or, from a terminal, as SIGINT. Either ends the solve at the next iteration, as a STOP does.
    signalled: list[str] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda num, frame: signalled.append(signal.Signals(num).name))

    def poll_stop(info) -> None:  # after every FDDP iteration: a stop abandons the solve
        if signalled:
            raise _Stopped(f"{0 if info is None else info.iteration + 1} FDDP iteration(s), signal {signalled[0]}")
        while (ev := node.try_recv()) is not None:
            if ev["type"] == "STOP" and ev.get("id") != _INPUTS_CLOSED:
                raise _Stopped(f"{0 if info is None else info.iteration + 1} FDDP iteration(s)")
            if ev["type"] == "NODE_FAILED":
                raise UpstreamError(f"during the solve: {upstream_failure(ev.get('value'))}")

    try:
        poll_stop(None)  # a stop that came with the last samples
        res = est.solve(meas, progress=poll_stop)
    except _Stopped as exc:
        raise ContactflowError(_stopped_line(f"during the PRIME solve (after {exc}, {time.monotonic() - t_solve:.1f} "
                                             "s into it)")) from None
    seq = info["seq"]
    T = meas.T
    for k in range(T + 1):
        s, t = int(seq[k]), float(res.t[k])
        out.send("state", np.r_[res.q[k], res.v[k]], seq=s, t=t, finished=k == T)
        if k >= 1:
            out.send("forces", res.force_W[k - 1].reshape(-1), seq=s, t=t, finished=k == T)
            out.send("torque", res.tau[k - 1], seq=s, t=t, finished=k == T)
    out.send("parameters", parameters_vector(res), seq=int(seq[-1]), t=float(res.t[-1]), finished=True)
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(json.dumps({**res.report(), "robot": pr.name, "decimation": info["decimation"]}, indent=2))
    log.info("PRIME done: cost %.6g, %d iterations, %s; report %s", res.cost, res.iterations,
             {b: round(p["mass_kg"], 4) for b, p in res.body_parameters().items()}, report)
    drain_after_finish(node, 1.0)
    return 0


if __name__ == "__main__":
    node_main("prime_estimator", main)
