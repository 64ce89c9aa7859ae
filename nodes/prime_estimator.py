"""prime_estimator node: PRIME (motion, contact-force and inertial-parameter estimation) on a stream.

Inputs: ``sensors`` (the robot's ``sensors`` contract: q, v, tau are read; e.g. a replay of a
recording). Outputs: ``ack`` (seq of each received sample, for a lockstep replay), and after the
input run has finished (a message with ``finished``, or the input closed): ``state`` (refined q, v
per sample), ``forces`` (force.<contact>, world [N]), ``torque`` and ``parameters`` (one message,
``finished``). The estimator is offline: it solves once on the whole received horizon.

Args: ``--robot``, ``--config FILE`` (PrimeConfig keys, e.g. robots/go2/prime_estimator.yaml),
``--report FILE`` (JSON report, default ``prime_report_<robot>.json`` in ``$CONTACTFLOW_RECORDINGS``
or ``<repo>/recordings``).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np

from contactflow.nodes._runtime import UpstreamError, base_parser, connect, drain_after_finish, load_node_config, node_main, sender_for
from contactflow.paths import default_recordings_dir

log = logging.getLogger("contactflow.prime_estimator")


def main() -> int:
    from contactflow.prime.fie import PrimeConfig, PrimeEstimator
    from contactflow.prime.io import measurements_from_arrays, parameters_vector
    from contactflow.prime.model import load_prime_robot
    from contactflow.prime.ports import prime_port_specs

    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--report", default=None)
    args = p.parse_args()
    pr = load_prime_robot(args.robot)
    cfg = load_node_config(PrimeConfig, args.config)
    est = PrimeEstimator(pr, cfg)
    specs = prime_port_specs(pr, est.bodies, 1.0 / cfg.dt_s)
    sin = specs["sensors"]
    node = connect()
    out = sender_for(node, "prime_estimator", {s.name: s for s in specs.values()}, cfg)

    seqs, ts, qs, vs, taus = [], [], [], [], []
    finished = False
    while not finished:
        ev = node.next(timeout=1.0)
        if ev is None:
            break
        typ = ev["type"]
        if typ == "INPUT" and ev["id"] == "sensors":
            md = ev["metadata"]
            vec = ev["value"].to_numpy(zero_copy_only=False)
            f = sin.unpack(vec, check_finite=False)  # non-finite samples are reported with their seq below
            seq = int(md.get("seq", len(seqs)))
            seqs.append(seq)
            ts.append(float(md.get("t", f["t"][0])))
            qs.append(f["q"].copy())
            vs.append(f["v"].copy())
            taus.append(f["tau"].copy())
            out.send("ack", np.array([float(seq)]), seq=seq, t=ts[-1])
            finished = bool(md.get("finished", False))
        elif typ == "INPUT_CLOSED" or typ == "STOP":
            break
        elif typ == "NODE_FAILED":
            raise UpstreamError(f"upstream node failed: {ev.get('value')}")
    if not seqs:
        raise UpstreamError("no sensors message received")
    meas, info = measurements_from_arrays(pr, cfg, np.array(seqs), np.array(ts), np.array(qs), np.array(vs),
                                          np.array(taus), where="input 'sensors'")
    log.info("solving PRIME on %d steps (identify %s)", meas.T, list(est.bodies))
    res = est.solve(meas)
    seq = info["seq"]
    T = meas.T
    for k in range(T + 1):
        s, t = int(seq[k]), float(res.t[k])
        out.send("state", np.r_[res.q[k], res.v[k]], seq=s, t=t, finished=k == T)
        if k >= 1:
            out.send("forces", res.force_W[k - 1].reshape(-1), seq=s, t=t, finished=k == T)
            out.send("torque", res.tau[k - 1], seq=s, t=t, finished=k == T)
    out.send("parameters", parameters_vector(res), seq=int(seq[-1]), t=float(res.t[-1]), finished=True)
    rec_root = default_recordings_dir()
    report = Path(args.report) if args.report else rec_root / f"prime_report_{pr.name}.json"
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(json.dumps({**res.report(), "robot": pr.name, "decimation": info["decimation"]}, indent=2))
    log.info("PRIME done: cost %.6g, %d iterations, %s; report %s", res.cost, res.iterations,
             {b: round(p["mass_kg"], 4) for b, p in res.body_parameters().items()}, report)
    drain_after_finish(node, 1.0)
    return 0


if __name__ == "__main__":
    node_main("prime_estimator", main)
