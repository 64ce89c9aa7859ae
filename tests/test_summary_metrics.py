"""The SEIKO run summary (``contactflow/recording/summary.py``, README "Summary metrics") against an independent
calculation on a recording.

A short lockstep run (1.6 s, the in-process loop of the split graph's stages, ``lag`` 2) is recorded
as the recorder node would (``mujoco_driver.sensors``, ``seiko_retargeting.desired``,
``operator.command``); each metric is then computed in the test from the recorded arrays, written
from the metric's definition in the README (plain numpy, pinocchio's frame placements for the hand),
and compared with :func:`contactflow.recording.summary.seiko_summary`. Each case changes some recorded values
first (a low pelvis, a NaN, a foot-force spike, a hand offset inside and just outside the hold, failed
QPs, a contact switch) and checks that the metric it targets moves, or, for a change outside the
hold window, that it does not. The real-time keys are checked the same way on a recording that also
holds a driver ``timing`` stream (periods without a command yet, held commands, late period starts).
"""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pinocchio as pin
import pytest

from contactflow.contracts.messages import port_specs
from contactflow.recording.store import RecordingWriter, read_recording
from contactflow.robot import load_robot
from contactflow.seiko.loop import DT_S, SeikoLoop, SeikoPipeline
from contactflow.recording.summary import REALTIME_KEYS, seiko_summary

# left hand up 1.5 cm on [0.1, 0.4) s, then still: a hold from 0.9 s (0.4 s + the 0.5 s settling) to the
# end (0.7 s); a push on the right hand, a disabled contact: refused by the Retargeting
SCENARIO = """
description: summary-metric test, 1.6 s
duration_s: 1.6
commands:
  - {effector: left_hand, start_s: 0.1, end_s: 0.4, linear_mps: [0.0, 0.0, 0.05], angular_radps: [0.0, 0.0, 0.0]}
push:
  - {effector: right_hand, start_s: 0.2, end_s: 0.3, normal_force_rate_n_per_s: 5.0}
contacts: []
"""
SETTLE_S = 0.5  # the README's "from 0.5 s after it stopped"
FALL_HEIGHT_M = 0.6  # the README's "the pelvis went below 0.6 m"
STREAMS = {"sensors": "mujoco_driver.sensors", "desired": "seiko_retargeting.desired",
           "operator_command": "operator.command"}


@pytest.fixture(scope="module")
def robot():
    return load_robot("talos")


@pytest.fixture(scope="module")
def run(robot, tmp_path_factory):
    """Messages of a 1.6 s lockstep run: contract -> (N, size) values, plus seq, t, wall ns."""
    rows = []

    class Capture(SeikoPipeline):
        def tick(self, k, t, sensors, command, **kw):
            out = super().tick(k, t, sensors, command, **kw)
            rows.append((k, t, sensors, command, out.desired_vec.copy(), time.perf_counter_ns()))
            return out

    path = tmp_path_factory.mktemp("scn") / "hold.yaml"
    path.write_text(SCENARIO)
    loop = SeikoLoop(robot, str(path), pipeline=Capture(robot, lag=2))
    while not loop.step():
        pass
    assert not loop.fell
    specs = port_specs(robot)
    return {
        "seq": np.array([r[0] for r in rows]),
        "t": np.array([r[1] for r in rows]),
        "wall_ns": np.array([r[5] for r in rows]),
        "sensors": np.stack([specs["sensors"].pack(r[2]) for r in rows]),
        "operator_command": np.stack([specs["operator_command"].pack(r[3]) for r in rows]),
        "desired": np.stack([r[4] for r in rows]),
    }


def _record(run, robot, run_dir, streams=STREAMS):
    """Write the run's streams (contract -> stream name) as the recorder does; open the recording."""
    specs = port_specs(robot)
    w = RecordingWriter(run_dir, {"robot": robot.name, "dataflow": "test_summary_metrics"})
    n = len(run["seq"])
    for contract, name in streams.items():
        spec = specs[contract]
        md = {"source": name.replace(".", "/"), "contract": contract,
              "layout": json.dumps([[f.name, f.size] for f in spec.fields])}
        w.stream(name, spec.size, md).append_block(run["seq"], run["t"], run[contract], np.zeros(n, bool),
                                                   run["wall_ns"])
    w.close()
    return read_recording(run_dir)


def _col(run, robot, contract, field):
    """(N, size) values of one field, sliced by hand from the contract's field list."""
    i = 0
    for f in port_specs(robot)[contract].fields:
        if f.name == field:
            return run[contract][:, i:i + f.size]
        i += f.size
    raise KeyError(field)


def _hand_position(robot, q):
    fid = robot.model.getFrameId(robot.contact("left_hand").frame)
    data = robot.model.createData()
    pin.framesForwardKinematics(robot.model, data, q)
    return data.oMf[fid].translation.copy()


def independent(run, robot):
    """The summary keys, from their README definitions."""
    q = _col(run, robot, "sensors", "q")
    t = run["t"]
    out = {}
    finite = np.isfinite(q).all(axis=1)
    out["pelvis_min_height_m"] = min(q[k, 2] for k in range(len(q)) if finite[k])
    out["fell"] = bool(not finite.all() or out["pelvis_min_height_m"] < FALL_HEIGHT_M)

    # RMSE of desired vs measured vertical sole forces, both feet pooled, whole run
    sq = []
    for foot in ("left_foot", "right_foot"):
        sq += list((_col(run, robot, "sensors", f"wrench.{foot}")[:, 2]
                    - _col(run, robot, "desired", f"lam_d.{foot}")[:, 2]) ** 2)
    out["foot_fz_tracking_rmse_n"] = math.sqrt(sum(sq) / len(sq))
    model = robot.model
    out["robot_weight_n"] = sum(model.inertias[i].mass for i in range(model.njoints)) * 9.81
    out["foot_fz_tracking_rmse_ratio_of_weight"] = out["foot_fz_tracking_rmse_n"] / out["robot_weight_n"]

    # holds: the left-hand command is zero after a motion, from 0.5 s after it stopped
    speed = np.abs(_col(run, robot, "operator_command", "twist.left_hand")).sum(axis=1)
    hold, t_stop = [], None
    for k in range(1, len(t)):
        if speed[k] == 0 and speed[k - 1] != 0:
            t_stop = t[k]  # the command stopped at this tick
        if speed[k] == 0 and t_stop is not None and t[k] >= t_stop + SETTLE_S:
            hold.append(k)
    q_d = _col(run, robot, "desired", "q_d")
    err = [np.linalg.norm(_hand_position(robot, q[k]) - _hand_position(robot, q_d[k])) for k in hold]
    out["left_hand_hold_duration_s"] = len(hold) * DT_S
    out["left_hand_max_error_m"] = max(err) if len(hold) * DT_S >= 0.5 else float("nan")

    out["ticks"] = len(t)
    out["sim_time_s"] = t[-1] - t[0]
    out["wall_time_s"] = (run["wall_ns"][-1] - run["wall_ns"][0]) / 1e9
    out["realtime_factor"] = out["sim_time_s"] / out["wall_time_s"]
    out["retargeting_failures"] = int(sum(1 for v in _col(run, robot, "desired", "ok")[:, 0] if v < 0.5))
    out["requests_refused"] = int(_col(run, robot, "desired", "n_refused")[-1, 0])
    enabled = _col(run, robot, "desired", "enabled")
    names = list(robot.contacts)
    out["contact_switches"] = [f"{names[j]} {'on' if enabled[k, j] else 'off'} at {t[k]:.2f} s"
                               for k in range(1, len(t)) for j in range(len(names)) if enabled[k, j] != enabled[k - 1, j]]
    return out


def _mutated(run, robot, change):
    r = {k: v.copy() for k, v in run.items()}
    if change is not None:
        change(r, lambda contract, field: _col(r, robot, contract, field))
    return r


def _first_hold_tick(run, robot):
    speed = np.abs(_col(run, robot, "operator_command", "twist.left_hand")).sum(axis=1)
    t_stop = run["t"][np.flatnonzero(speed)[-1] + 1]
    return int(np.flatnonzero(run["t"] >= t_stop + SETTLE_S - 1e-12)[0])


def _pelvis_at(z):
    def change(r, col):
        col("sensors", "q")[300, 2] = z
    return change


def _nan_state(r, col):
    col("sensors", "q")[301, 7] = np.nan


def _fz_spike(r, col):
    col("sensors", "wrench.left_foot")[200, 2] += 300.0


def _failures(r, col):
    col("desired", "ok")[[10, 20, 30], 0] = 0.0


def _switch(r, col):
    col("desired", "enabled")[600:, 1] = 0.0  # right foot released at 1.2 s


def _refused(r, col):
    col("desired", "n_refused")[-1, 0] = 7.0


def _hand_offset(tick):
    def change(r, col):
        col("sensors", "q")[tick(r), 0] += 0.02  # the whole robot 2 cm forward at that one tick
    return change


CASES = {
    "as_recorded": (None, ()),
    "pelvis_below_fall_height": (_pelvis_at(FALL_HEIGHT_M - 0.01), ("pelvis_min_height_m", "fell")),
    "pelvis_above_fall_height": (_pelvis_at(FALL_HEIGHT_M + 0.01), ("pelvis_min_height_m",)),
    "nan_state": (_nan_state, ("fell",)),
    "fz_spike": (_fz_spike, ("foot_fz_tracking_rmse_n", "foot_fz_tracking_rmse_ratio_of_weight")),
    "failed_qps": (_failures, ("retargeting_failures",)),
    "contact_switch": (_switch, ("contact_switches",)),
    "refused": (_refused, ("requests_refused",)),
    "hand_offset_first_hold_tick": (None, ("left_hand_max_error_m",)),  # filled in below (needs robot)
    "hand_offset_tick_before_hold": (None, ()),
}


@pytest.mark.parametrize("case", list(CASES))
def test_summary_matches_an_independent_calculation(case, run, robot, tmp_path):
    change, moved = CASES[case]
    if case == "hand_offset_first_hold_tick":
        change = _hand_offset(lambda r: _first_hold_tick(r, robot))
    elif case == "hand_offset_tick_before_hold":
        change = _hand_offset(lambda r: _first_hold_tick(r, robot) - 1)
    r = _mutated(run, robot, change)
    got = seiko_summary(_record(r, robot, tmp_path / "run"), robot)  # its defaults are the README's
    want = independent(r, robot)
    base = independent(run, robot)
    for key, value in want.items():
        if isinstance(value, float):
            assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-12, nan_ok=True), key
        else:
            assert got[key] == value, key
    for key in REALTIME_KEYS[1:]:  # lockstep: no timing stream
        assert math.isnan(got[key]), key
    assert got["realtime"] is False
    for key, value in want.items():  # the change moves exactly the targeted metrics
        if key in ("wall_time_s", "realtime_factor"):
            continue
        if key in moved:
            assert value != base[key], key
        else:
            assert value == base[key] or (value != value and base[key] != base[key]), key


def test_the_recorded_run_exercises_every_metric(run, robot):
    """The unmutated run is one where the metrics mean something (so that the comparisons above test them)."""
    m = independent(run, robot)
    assert 0.69 < m["left_hand_hold_duration_s"] < 0.71  # holds of [0.9, 1.6) s
    assert 0 < m["left_hand_max_error_m"] < 0.05
    assert 0 < m["foot_fz_tracking_rmse_n"] < 200
    assert m["requests_refused"] == 1 and m["retargeting_failures"] == 0 and m["contact_switches"] == []
    assert not m["fell"] and m["ticks"] == 800


def _timing_rows(n, dt, rng):
    """Driver timing rows of n periods: 3 warm-up ticks, periods without a command yet, held commands, late starts."""
    new = (rng.random(n) > 0.2).astype(float)
    new[:6] = 0.0  # no command yet in the warm-up and the first 3 periods (command_seq -1: no age)
    new[6] = 1.0
    late = np.abs(rng.normal(0.0, 0.2 * dt, n))
    late[:3] = 0.0
    late[[50, 300]] = [1.3 * dt, 2.6 * dt]  # the driver itself started late: 1 and 2 periods lost
    cmd_seq, last = np.full(n, -1.0), -1
    wall, shift = np.zeros(n), 0.0
    for k in range(n):
        if new[k]:
            last = k - 1
        cmd_seq[k] = last
        wall[k] = k * dt + shift + late[k]
        if late[k] >= dt:
            shift += late[k]
    return {"command_seq": cmd_seq, "command_t": np.maximum(cmd_seq, 0) * dt, "new_command": new,
            "paced": (np.arange(n) >= 3).astype(float), "late_s": late, "wall_s": wall, "step_s": np.full(n, 1e-3)}


def _realtime_independent(rows, t, dt):
    """The real-time keys from their definitions (README; summary.py docstring), period by period."""
    periods = warmup = misses = 0
    ages, lates, new_walls, walls = [], [], [], []
    for k in range(len(t)):
        if rows["paced"][k] < 0.5:
            warmup += 1
            continue
        late = rows["late_s"][k]
        has = rows["command_seq"][k] >= 0
        new = rows["new_command"][k] > 0.5 and has
        lost = int(math.floor(late / dt + 1e-9)) if late >= dt * (1 - 1e-9) else 0
        periods += 1 + lost
        misses += (1 if (not new or lost) else 0) + lost
        if has:
            ages.append((t[k] - rows["command_t"][k]) * 1e3)
        lates.append(late * 1e3)
        walls.append(rows["wall_s"][k])
        if new:
            new_walls.append(rows["wall_s"][k])
    marks = [walls[0] - dt] + new_walls + [walls[-1] + dt]
    stall = max(b - a for a, b in zip(marks[:-1], marks[1:])) - dt
    return {"realtime": True, "periods": periods, "warmup_periods": warmup, "deadline_misses": misses,
            "deadline_miss_ratio": misses / periods, "command_age_ms_p50": float(np.percentile(ages, 50)),
            "command_age_ms_p99": float(np.percentile(ages, 99)), "longest_stall_ms": max(0.0, stall) * 1e3,
            "driver_late_ms_p99": float(np.percentile(lates, 99)), "driver_late_ms_max": max(lates)}


@pytest.mark.parametrize("hole", [None, (400, 410)])
def test_realtime_keys_match_an_independent_calculation(hole, run, robot, tmp_path):
    """With the driver's timing stream in the recording, the real-time keys are those of its rows."""
    n, dt = len(run["seq"]), DT_S
    rows = _timing_rows(n, dt, np.random.default_rng(0))
    if hole is not None:  # ten periods without a new command: the longest stall and the misses grow
        rows["new_command"][hole[0]:hole[1]] = 0.0
        rows["command_seq"][hole[0]:hole[1]] = rows["command_seq"][hole[0] - 1]
        rows["command_t"][hole[0]:hole[1]] = rows["command_t"][hole[0] - 1]
    spec = port_specs(robot)["driver_timing"]
    timed = dict(run, driver_timing=np.stack([spec.pack({f: rows[f][i] for f in rows}) for i in range(n)]))
    rec = _record(timed, robot, tmp_path / "run", {**STREAMS, "driver_timing": "mujoco_driver.timing"})
    got = seiko_summary(rec, robot)
    want = _realtime_independent(rows, run["t"], dt)
    assert set(want) == set(REALTIME_KEYS)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-9), key
    assert want["periods"] == n - 3 + 3  # 3 warm-up ticks out, 3 lost periods in
    if hole is not None:
        assert want["longest_stall_ms"] >= 20.0 - 1e-9  # 10 periods held: 10 x 2 ms beyond its own period
