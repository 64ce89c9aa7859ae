"""The tick-timing keys of the SEIKO run summary (contactflow/recording/summary.py: tick_timing, desired_lead),
on wall-clock stamps whose answer is known by construction."""

from __future__ import annotations

import math

import numpy as np
import pytest

from contactflow.recording.summary import STARTUP_TICKS, TICK_TIMING_KEYS, desired_lead, tick_timing

MS = 1_000_000  # ns


def _stamps(gaps_ms) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(np.round(np.asarray(gaps_ms, dtype=float) * MS))]).astype(np.int64) + 10**18


def test_tick_timing_counts_the_slow_ticks_and_the_time_they_lose():
    # 10 start-up ticks of 30 ms, then 100 ticks of 1 ms with three of 5 ms, one of 1.9 ms and one of exactly
    # 2 ms (neither slow: not more than twice the median)
    steady = [1.0] * 100
    steady[20] = steady[50] = steady[80] = 5.0
    steady[60], steady[70] = 1.9, 2.0
    w = _stamps([30.0] * STARTUP_TICKS + steady)
    seq = np.arange(len(w))
    m = tick_timing(seq, w)
    assert set(m) == set(TICK_TIMING_KEYS)
    assert m["startup_wall_s"] == pytest.approx(0.3)
    assert m["tick_wall_ms_p50"] == pytest.approx(1.0)
    assert m["tick_wall_ms_max"] == pytest.approx(5.0)
    assert m["tick_wall_ms_p99"] == pytest.approx(np.percentile(steady, 99))
    assert m["slow_ticks"] == 3
    assert m["slow_tick_lost_s"] == pytest.approx(3 * 4e-3)
    assert m["slow_tick_lost_ratio"] == pytest.approx(12e-3 / (0.3 + sum(steady) * 1e-3))
    # the same messages in another order: the same numbers
    perm = np.random.default_rng(1).permutation(len(w))
    assert tick_timing(seq[perm], w[perm]) == m


def test_ticks_missing_from_the_recording_share_the_interval_that_spans_them():
    w = _stamps([1.0] * 120)
    seq = np.arange(len(w))
    keep = np.r_[0:50, 75:len(w)]  # a lost log batch of 25 ticks: one interval of 26 ms over 26 ticks (49 -> 75)
    m = tick_timing(seq[keep], w[keep])
    assert m["slow_ticks"] == 0 and m["slow_tick_lost_s"] == 0.0 and m["tick_wall_ms_max"] == pytest.approx(1.0)
    w2 = w.copy()
    w2[60:] += 50 * MS  # a stall inside the lost batch: 50 ms more over those 26 ticks, ~2.9 ms per tick
    m = tick_timing(seq[keep], w2[keep])
    assert m["slow_ticks"] == 26 and m["slow_tick_lost_s"] == pytest.approx(0.050)


def test_a_steady_run_has_no_slow_tick_and_a_short_run_no_numbers():
    w = _stamps([2.0] * 50)
    m = tick_timing(np.arange(len(w)), w)
    assert m["slow_ticks"] == 0 and m["slow_tick_lost_s"] == 0.0 and m["tick_wall_ms_p99"] == pytest.approx(2.0)
    w = _stamps([2.0] * (STARTUP_TICKS - 1))  # STARTUP_TICKS messages: no tick after the start-up
    short = tick_timing(np.arange(len(w)), w)
    assert short["slow_ticks"] == 0
    assert all(math.isnan(short[k]) for k in TICK_TIMING_KEYS if k != "slow_ticks")
    w = _stamps([2.0] * STARTUP_TICKS)  # one interval after the start-up: its time, no per-tick numbers
    one = tick_timing(np.arange(len(w)), w)
    assert one["startup_wall_s"] == pytest.approx(0.020) and math.isnan(one["tick_wall_ms_p50"])


def test_desired_lead_is_the_newest_desired_tick_computed_before_each_sensors_tick():
    n = 200
    ws = _stamps([2.0] * (n - 1))
    seq = np.arange(n)
    # a Retargeting 30 ticks ahead, except 20 ticks where it fell to 3 ahead
    ahead = np.full(n, 30)
    ahead[100:120] = 3
    # desired row j stamped just before the sensors of tick j - ahead (1 us earlier), rows in seq order
    d_seq = np.arange(n)
    d_wall = np.array([ws[j - ahead[j]] - 1000 if j >= ahead[j] else ws[0] - 10**6 for j in range(n)], dtype=np.int64)
    d_wall = np.maximum.accumulate(d_wall)  # computed in seq order: a row no earlier than the one before
    # shuffled stream order: the lead comes from the stamps and seqs, not the row order
    perm = np.random.default_rng(0).permutation(n)
    m = desired_lead(seq[::-1], ws[::-1], d_seq[perm], d_wall[perm])
    k = np.arange(STARTUP_TICKS, n)
    want = np.array([np.max(d_seq[d_wall <= ws[i]]) - i for i in k])
    assert m["desired_lead_ticks_p1"] == np.percentile(want, 1, method="lower")  # whole ticks, one of the leads
    assert m["desired_lead_ticks_p50"] == np.percentile(want, 50, method="lower")
    assert m["desired_lead_ticks_p1"] <= 3  # the dip (and the end of its rows)
    assert m["desired_lead_ticks_p50"] == 30
    # a Retargeting at the driver's pace (its desired of tick k stamped after the sensors of tick k): lead -1
    lag = desired_lead(seq, ws, d_seq, ws + 1000)
    assert lag["desired_lead_ticks_p50"] == -1 and lag["desired_lead_ticks_p1"] == -1
    assert math.isnan(desired_lead(seq, ws, [], [])["desired_lead_ticks_p50"])
