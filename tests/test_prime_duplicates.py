"""prime_estimator: a duplicated sensors message is skipped and counted; a real gap still fails.

Found by the fault campaign (``contactflow faults``, ``flood`` on ``prime_replay_go2.yml``: 1000
copies of one sensors message): the estimator ended with "seq not contiguous (143 -> 143, 999
gap(s))". The node's receive loop (:func:`contactflow.nodes.prime_estimator.receive_samples`) is
driven here by a scripted event stream in dora's event format; its samples then go through the
same :func:`contactflow.prime.io.measurements_from_arrays` as in the node.
"""

from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa
import pytest

from contactflow.errors import RecordingError
from contactflow.nodes.prime_estimator import receive_samples
from contactflow.prime.fie import PrimeConfig
from contactflow.prime.io import measurements_from_arrays
from contactflow.prime.model import load_prime_robot
from contactflow.prime.ports import prime_port_specs


class _Events:
    """``next(timeout)`` over a list of dora-like events, then None (the stream ended)."""

    def __init__(self, events):
        self.events = list(events)

    def next(self, timeout=None):
        return self.events.pop(0) if self.events else None


class _Acks:
    def __init__(self):
        self.seqs = []

    def send(self, port, values, seq, t, **_):
        assert port == "ack"
        self.seqs.append(seq)


@pytest.fixture(scope="module")
def go2():
    pr = load_prime_robot("go2")
    cfg = PrimeConfig()
    return pr, cfg, prime_port_specs(pr, (), 1.0 / cfg.dt_s)["sensors"]


def _sample(sin, pr, seq: int, dt: float, finished: bool = False, marker: float = 0.0) -> dict:
    vec = np.zeros(sin.size)
    q = pr.model.referenceConfigurations["standing"] if "standing" in pr.model.referenceConfigurations \
        else np.r_[0.0, 0.0, 0.3, 0.0, 0.0, 0.0, 1.0, np.zeros(pr.model.nq - 7)]
    vec[sin.slices["q"]] = q
    vec[sin.slices["q"].start] = marker  # base x: tells the copies of one seq apart
    vec[sin.slices["t"]] = seq * dt
    return {"type": "INPUT", "id": "sensors", "value": pa.array(vec),
            "metadata": {"seq": seq, "t": seq * dt, "finished": finished}}


def test_duplicated_messages_are_skipped_counted_and_logged_once(go2, caplog):
    pr, cfg, sin = go2
    dt = cfg.dt_s
    n = 30
    events = []
    for k in range(n):
        events.append(_sample(sin, pr, k, dt, finished=k == n - 1))
        if k == 14:  # the campaign's flood: 1000 copies of one message (another payload: the first one wins)
            events += [_sample(sin, pr, k, dt, marker=9.0)] * 1000
        if k == 20:  # and a late duplicate of an older seq
            events.append(_sample(sin, pr, 3, dt, marker=9.0))
    acks = _Acks()
    with caplog.at_level(logging.WARNING, logger="contactflow.prime_estimator"):
        seqs, ts, qs, vs, taus = receive_samples(_Events(events), sin, acks)
    assert seqs == list(range(n)) and acks.seqs == list(range(n))  # each seq once, acknowledged once
    assert all(q[0] == 0.0 for q in qs)  # the first delivery of seq 14 and 3 was kept
    dup_lines = [r.getMessage() for r in caplog.records if "duplicated" in r.getMessage()]
    assert dup_lines == ["input 'sensors': 1001 duplicated message(s) skipped (a seq already received; "
                         "first at seq 14)"]
    meas, info = measurements_from_arrays(pr, cfg, np.array(seqs), np.array(ts), np.array(qs), np.array(vs),
                                          np.array(taus), where="input 'sensors'")
    assert meas.T + 1 == len(info["seq"]) and info["seq"][-1] <= n - 1  # the estimator gets the horizon


def test_a_real_gap_still_fails_with_one_line(go2, caplog):
    pr, cfg, sin = go2
    dt = cfg.dt_s
    events = [_sample(sin, pr, k, dt, finished=k == 29) for k in range(30) if k not in (17, 18)]
    events.insert(5, _sample(sin, pr, 4, dt))  # a duplicate too: skipped, the gap is still the error
    seqs, ts, qs, vs, taus = receive_samples(_Events(events), sin, _Acks())
    assert len(seqs) == 28
    with pytest.raises(RecordingError, match=r"input 'sensors': seq not contiguous \(16 -> 19, 1 gap\(s\)\)"):
        measurements_from_arrays(pr, cfg, np.array(seqs), np.array(ts), np.array(qs), np.array(vs), np.array(taus),
                                 where="input 'sensors'")


def test_an_upstream_that_goes_silent_is_named_after_the_silence(go2):
    """A replay that hangs (alive, no message, next() timing out): the estimator stops with one line
    after ``silence_s`` instead of waiting forever; timeouts within it are waited through."""
    from contactflow.nodes._runtime import UpstreamError

    pr, cfg, sin = go2
    timeout = {"type": "ERROR", "error": "timed out"}
    events = [_sample(sin, pr, 0, cfg.dt_s), timeout, timeout, _sample(sin, pr, 1, cfg.dt_s, finished=True)]
    seqs, *_ = receive_samples(_Events(events), sin, _Acks(), silence_s=60.0)
    assert seqs == [0, 1]
    events = [_sample(sin, pr, 0, cfg.dt_s), timeout, _sample(sin, pr, 1, cfg.dt_s, finished=True)]
    with pytest.raises(UpstreamError, match=r"no 'sensors' message for 0 s \(after 1 samples"):
        receive_samples(_Events(events), sin, _Acks(), silence_s=0.0)
