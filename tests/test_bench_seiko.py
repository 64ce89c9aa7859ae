"""`contactflow bench seiko` helpers (benchmarks/bench_seiko.py): repeated dora runs and their median."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import bench_seiko as B  # noqa: E402


def _runs(values):
    it = iter(values)
    return lambda: {"v": next(it), "id": len(values)}


def test_repeated_keeps_the_median_run_and_every_value():
    r = B.repeated(_runs([0.70, 0.90, 0.60]), 3, "v")
    assert r["v"] == 0.70 and r["repeats"] == [0.70, 0.90, 0.60] and r["repeats_of"] == "v"
    # even count: the worse middle run (a ratio: the lower one; a miss ratio: the higher one)
    assert B.repeated(_runs([0.7, 0.9, 0.6, 0.8]), 4, "v")["v"] == 0.7
    assert B.repeated(_runs([0.01, 0.04, 0.02, 0.03]), 4, "v", higher_is_better=False)["v"] == 0.03
    # a run without the value counts as the worst
    assert B.repeated(_runs([0.01, None, 0.02]), 3, "v", higher_is_better=False)["v"] == 0.02
    # one run: as it came, no spread
    one = B.repeated(_runs([0.5]), 1, "v")
    assert one == {"v": 0.5, "id": 1} and B._spread(one) == ""
    # a run that raises is one failed sample, the others kept
    it = iter([0.7, RuntimeError("dora run failed"), 0.8])

    def flaky():
        v = next(it)
        if isinstance(v, Exception):
            raise v
        return {"v": v}

    r = B.repeated(flaky, 3, "v")
    assert r["v"] == 0.7 and r["repeats"] == [0.7, None, 0.8] and B._spread(r) == " (median of 3: 0.70-0.80, 1 failed)"


def test_the_table_states_the_spread_of_repeated_runs():
    g = {"graph_realtime_factor": 1.3, "dora_run_total_wall_s": 20.0, "loop_realtime_factors": [1.6, 1.7],
         "graph_over_loop": 0.79, "sensor_lag": 1, "shipped": True, "repeats": [0.79, 0.83, 0.66]}
    r = {"deadline_misses": 5, "periods": 1000, "deadline_miss_ratio": 0.005, "repeats": [0.005, 0.02, 0.001]}
    md = B.markdown({"machine": "m", "date_utc": "d", "commit": "c", "baseline": "b", "load_before": [0],
                     "lockstep": g, "realtime": r})
    assert "x0.79 (median of 3: 0.66-0.83) | >= x0.8 | **no**" in md
    assert "5 of 1000 (0.50 %) (median of 3: 0.10 %-2.00 %)" in md
    assert "(`dora run` 20.0 s in all) |" in md  # a summary without the tick timing: nothing added
    g["summary"] = {"tick_wall_ms_p50": 1.305, "slow_tick_lost_ratio": 0.067, "desired_lead_ticks_p1": 7.0}
    md = B.markdown({"machine": "m", "date_utc": "d", "commit": "c", "baseline": "b", "load_before": [0], "lockstep": g})
    assert ("(`dora run` 20.0 s in all; median tick 1.30 ms, 6.7 % of the wall time lost in slow ticks, "
            "Retargeting lead p1 7 ticks) |") in md


def test_the_real_time_tracking_is_judged_against_the_stated_tolerances():
    assert B.tracking_within_tolerance("left_hand_max_error_m", 0.0110, 0.0093)  # +1.7 mm
    assert not B.tracking_within_tolerance("left_hand_max_error_m", 0.0114, 0.0093)  # +2.1 mm
    assert B.tracking_within_tolerance("foot_fz_tracking_rmse_ratio_of_weight", 0.0099, 0.0049)
    assert not B.tracking_within_tolerance("foot_fz_tracking_rmse_ratio_of_weight", 0.0167, 0.0049)
    assert B.tracking_within_tolerance("foot_fz_tracking_rmse_n", 14.8, 4.3) is None  # no stated tolerance: the ratio is
    assert B.tracking_within_tolerance("left_hand_max_error_m", None, 0.0093) is None
    r = {"deadline_misses": 5, "periods": 1000, "deadline_miss_ratio": 0.005,
         "tracking_vs_lockstep": {"left_hand_max_error_m": (0.0090, 0.0094), "foot_fz_tracking_rmse_ratio_of_weight": (0.0167, 0.0049)}}
    md = B.markdown({"machine": "m", "date_utc": "d", "commit": "c", "baseline": "b", "load_before": [0], "realtime": r})
    assert "`left_hand_max_error_m` | 0.009 | lockstep graph, same run: 0.0094 | - | <= lockstep + 2 mm | **yes** |" in md
    assert "`foot_fz_tracking_rmse_ratio_of_weight` | 0.0167 | lockstep graph, same run: 0.0049 | - | <= 0.01 | **no** |" in md
