"""The Fig. 7 robustness grid (contactflow/seiko/grid.py, ``contactflow bench seiko-grid``): the
Wilson interval, the target sampler, the resume logic, and a 3-run mini grid in closed loop (one
trial per condition at the fastest speed with a small mass)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from contactflow.errors import ConfigError
from contactflow.seiko import grid
from contactflow.seiko.grid import GridTarget, TrialSpec

# a target of the sampler (seed 0, its first direction): left hand forward-left and a little down,
# at the Retargeting's feasibility edge
TARGET = GridTarget(0, 43.696, -8.813, (0.7144775820509752, 0.6826782081807912, -0.15320655606617), 0.5811)


@pytest.fixture(scope="module")
def robot():
    from contactflow.robot import load_robot

    return load_robot("talos")


def test_wilson_interval_known_values():
    # textbook values (Wilson 1927; e.g. Newcombe 1998, Table I): 0/10 -> [0, 0.2775], 5/10 -> [0.2366, 0.7634]
    lo, hi = grid.wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.27753, abs=1e-4)
    lo, hi = grid.wilson_interval(5, 10)
    assert (lo, hi) == pytest.approx((0.23659, 0.76341), abs=1e-4)
    lo, hi = grid.wilson_interval(10, 10)
    assert lo == pytest.approx(0.72247, abs=1e-4) and hi == pytest.approx(1.0)
    # the paper's full method, 181/250: the interval holds the rate and is ~ +-0.055 wide
    lo, hi = grid.wilson_interval(181, 250)
    assert lo < 0.724 < hi and 0.10 < hi - lo < 0.12
    assert grid.wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        grid.wilson_interval(11, 10)


def test_summarize_counts_cells_causes_and_intervals():
    def r(c, s, m, t, ok, cause=None, joint=None):
        return {"condition": c, "speed_mps": s, "mass_kg": m, "target": t, "success": ok, "no_fall": cause != "fall"
                and cause != "torque_limit", "cause": cause, "torque_limit_joint": joint}

    res = [r("full", 0.1, 0.0, 0, True), r("full", 0.1, 2.0, 0, False, "torque_limit", "arm_left_4_joint"),
           r("full", 0.2, 0.0, 0, True), r("full", 0.2, 2.0, 0, False, "qp_failure"),
           r("off", 0.1, 0.0, 0, False, "fall"), r("off", 0.3, 0.0, 0, True)]  # 0.3 m/s: outside the grid
    s = grid.summarize(res, [0.1, 0.2], [0.0, 2.0], ["off", "full"])
    assert s["full"]["trials"] == 4 and s["full"]["successes"] == 2 and s["full"]["rate"] == 0.5
    assert s["full"]["cells"] == [[1, 0], [1, 0]] and s["full"]["cell_trials"] == [[1, 1], [1, 1]]
    assert s["full"]["causes"] == {"torque_limit": 1, "qp_failure": 1}
    assert s["full"]["torque_limit_joints"] == {"arm_left_4_joint": 1}
    assert s["full"]["no_fall"] == 3  # a QP failure without a fall is a failure, not a fall
    assert s["full"]["ci95"] == pytest.approx(list(grid.wilson_interval(2, 4)), abs=1e-4)
    assert s["off"]["trials"] == 1 and s["off"]["successes"] == 0 and s["off"]["causes"] == {"fall": 1}


def test_target_sampler_is_seeded_and_its_targets_reachable(robot):
    a = grid.sample_targets(robot, 1, seed=3)
    b = grid.sample_targets(robot, 1, seed=3)
    assert a == b
    t = a[0]
    assert np.linalg.norm(t.direction) == pytest.approx(1.0)
    assert grid.AZIMUTH_DEG[0] <= t.azimuth_deg <= grid.AZIMUTH_DEG[1]
    assert grid.ELEVATION_DEG[0] <= t.elevation_deg <= grid.ELEVATION_DEG[1]
    # at the edge: the Retargeting reached it and stopped there (a new probe, twice as fast, agrees
    # within 5 cm: the edge is a property of the Retargeting, not of the probe's speed)
    assert t.distance_m >= 0.25
    d, saturated = grid.feasibility_edge(robot, np.array(t.direction), probe_speed_mps=0.4)
    assert saturated and d == pytest.approx(t.distance_m, abs=0.05)
    with pytest.raises(ConfigError):
        grid.sample_targets(robot, 0, seed=3)


def test_operator_reaches_holds_and_returns():
    """The ReachOperator against a hand that follows its command exactly (x_d integrates the twist)."""
    from contactflow.operator.scenario import OperatorCommand

    v, dt = 0.2, 0.002
    op = grid.ReachOperator(TARGET, v)
    x = np.array([0.1, 0.3, 0.9])
    cmd0 = OperatorCommand(t=0.0, velocities={}, finished=False, enable={}, push={}, force_rates={})
    speeds, t = [], 0.0
    while op.phase != "done" and t < 20.0:
        op.x_d = x.copy()
        tw = op(t, cmd0, None).velocities[grid.EFFECTOR]
        speeds.append(np.linalg.norm(tw[:3]))
        x = x + dt * tw[:3]
        t += dt
    assert op.phase == "done"
    reach_s = TARGET.distance_m / v
    assert op.reached_s == pytest.approx(grid.REACH_START_S + reach_s, abs=0.1)  # at the speed, to the target
    assert max(speeds) == pytest.approx(v)
    assert np.linalg.norm(x - [0.1, 0.3, 0.9]) <= grid.GOAL_TOL_M  # back at the start
    assert op.done_at_s - op.reached_s == pytest.approx(grid.HOLD_S + reach_s, abs=0.5)

    # a hand stuck at 0.2 m (the edge nearer than the target): the operator stops reaching
    op = grid.ReachOperator(TARGET, v)
    x0, t = np.zeros(3), 0.0
    x = x0.copy()
    while op.phase in ("wait", "reach") and t < 20.0:
        op.x_d = x.copy()
        tw = op(t, cmd0, None).velocities[grid.EFFECTOR]
        if (x - x0) @ np.array(TARGET.direction) < 0.2:
            x = x + dt * tw[:3]
        t += dt
    assert op.phase == "hold" and op.reached_s < grid.REACH_START_S + 0.2 / v + 1.0
    with pytest.raises(ConfigError):
        grid.ReachOperator(TARGET, 0.0)


def test_as_allowed_operator_stops_reaching_when_the_controller_lowers_a_limit():
    """The ``as_allowed`` operator ends its reach (then holds and returns) once the trial loop says the
    Controller's (12) has lowered a limit; the ``target`` operator keeps reaching."""
    from contactflow.operator.scenario import OperatorCommand

    v, dt = 0.2, 0.002
    cmd0 = OperatorCommand(t=0.0, velocities={}, finished=False, enable={}, push={}, force_rates={})
    t_limit = grid.REACH_START_S + 0.5
    ends = {}
    for stop in (False, True):
        op = grid.ReachOperator(TARGET, v, stop_when_limited=stop)
        x, t = np.zeros(3), 0.0
        while op.phase in ("wait", "reach") and t < 20.0:
            op.x_d = x.copy()
            op.limited = t >= t_limit
            x = x + dt * op(t, cmd0, None).velocities[grid.EFFECTOR][:3]
            t += dt
        ends[stop] = (op.reached_s, op.stopped_by_limit, float(x @ np.array(TARGET.direction)))
    assert ends[True][0] == pytest.approx(t_limit, abs=2 * dt) and ends[True][1]
    assert ends[True][2] == pytest.approx(0.5 * v, abs=0.01)  # stopped 0.5 s into the reach
    assert ends[False][0] > t_limit + 1.0 and not ends[False][1]
    assert ends[False][2] == pytest.approx(TARGET.distance_m, abs=grid.GOAL_TOL_M + 0.01)


def test_reach_limit_watch_signals_a_joint_engaged_during_the_reach_only():
    """The as_allowed operator's signal: a joint whose limit (12) lowers during the reach; one lowered
    before it (by the load's ramp) does not count, nor anything outside the reach."""
    urdf = np.array([10.0, 100.0, 50.0])
    w = grid.ReachLimitWatch(urdf)
    assert w.update("wait", [5.0, 100.0, 50.0]) is None  # engaged before the reach: ignored
    assert w.update("reach", [5.0, 100.0, 50.0]) is None  # the reach's first tick: noted
    assert w.update("reach", [4.0, 100.0, 50.0]) is None  # the same joint lowered further: not new
    assert w.update("reach", [5.0, 100.0, 49.9]) == 2  # a newly engaged joint
    assert w.update("hold", [5.0, 60.0, 49.9]) is None
    w = grid.ReachLimitWatch(urdf)
    w.update("reach", urdf)
    assert w.update("reach", [10.0, 100.0, 50.0]) is None and w.update("reach", [10.0, 99.0, 50.0]) == 1


def test_a_results_file_reruns_only_the_full_method_for_another_operator(tmp_path, monkeypatch, robot):
    seen = []

    def fake_trial(spec, target, robot=None, **kw):
        seen.append((spec.condition, kw.get("operator")))
        return {"condition": spec.condition, "speed_mps": spec.speed_mps, "mass_kg": spec.mass_kg,
                "target": spec.target, "success": True, "no_fall": True, "cause": None, "torque_limit_joint": None,
                "wall_s": 0.0, "operator": kw.get("operator"), "stop_joint": None}

    monkeypatch.setattr(grid, "run_trial", fake_trial)
    out = tmp_path / "g.json"
    kw = dict(speeds=[0.1], masses=[0.0], n_targets=1, conditions=["off", "no_tau_limit", "full"], targets=[TARGET],
              progress=False, log=lambda s: None, robot=robot)
    doc = grid.run_grid(out, **kw)
    assert sorted(seen) == [("full", "target"), ("no_tau_limit", "target"), ("off", "target")]
    assert doc["meta"]["operator"] == "target"
    seen.clear()
    doc = grid.run_grid(out, **kw, operator="as_allowed")  # the other operator: only the full method again
    assert seen == [("full", "as_allowed")] and doc["meta"]["operator"] == "as_allowed" and len(doc["trials"]) == 3
    seen.clear()
    stored = json.loads(out.read_text())  # a file written before operators existed: its trials are "target"
    for r in stored["trials"]:
        r.pop("operator", None)
    out.write_text(json.dumps(stored))
    grid.run_grid(out, **kw, operator="as_allowed")
    assert seen == [("full", "as_allowed")]
    seen.clear()
    grid.run_grid(out, **kw, operator="as_allowed")  # nothing left to run
    assert seen == []
    stored = json.loads(out.read_text())  # as_allowed trials of the older rule (no stop_joint): run again
    for r in stored["trials"]:
        r.pop("stop_joint", None)
    out.write_text(json.dumps(stored))
    grid.run_grid(out, **kw, operator="as_allowed")
    assert seen == [("full", "as_allowed")]
    with pytest.raises(ConfigError, match="--operator"):
        grid.run_grid(tmp_path / "h.json", **kw, operator="bogus")


def test_a_grid_runs_with_a_given_controller_config_and_reruns_trials_of_another(tmp_path, monkeypatch, robot):
    from contactflow.seiko.controller import ControllerConfig

    seen = []

    def fake_trial(spec, target, robot=None, **kw):
        seen.append((spec.condition, kw["ccfg"].kp_per_s))
        return {"condition": spec.condition, "speed_mps": spec.speed_mps, "mass_kg": spec.mass_kg,
                "target": spec.target, "success": True, "no_fall": True, "cause": None, "torque_limit_joint": None,
                "wall_s": 0.0}

    monkeypatch.setattr(grid, "run_trial", fake_trial)
    out = tmp_path / "g.json"
    kw = dict(speeds=[0.1], masses=[0.0], n_targets=1, conditions=["off", "no_tau_limit", "full"], targets=[TARGET],
              progress=False, log=lambda s: None, robot=robot)
    grid.run_grid(out, **kw)
    assert sorted(seen) == [("full", 0.2), ("no_tau_limit", 0.2), ("off", 0.2)]
    seen.clear()
    doc = grid.run_grid(out, **kw, ccfg=ControllerConfig(kp_per_s=1.0))  # (10)'s gain: the Controller-driven trials
    assert sorted(seen) == [("full", 1.0), ("no_tau_limit", 1.0)]
    assert doc["meta"]["controller_config"]["kp_per_s"] == 1.0
    assert grid.config_changes(doc) == "kp_per_s 1"  # what the plot's title states beside the rates
    assert grid.config_changes(json.loads(json.dumps({"meta": {"controller_config": doc["meta"]["controller_config"]
                                                                | {"kp_per_s": 0.2}}}))) == ""
    # the command line: --config FILE, the Controller node's file format (its seiko_controller section)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("seiko_controller:\n  kp_per_s: 1.0\n")
    monkeypatch.setattr(grid, "sample_targets", lambda robot, n, seed, progress=None: [TARGET])
    seen.clear()
    args = ["--speeds", "10", "--masses", "0", "--targets", "1", "--out", str(tmp_path / "cli.json"), "--no-progress"]
    assert grid.main(args + ["--config", str(cfg)]) == 0
    assert sorted(seen) == [("full", 1.0), ("no_tau_limit", 1.0), ("off", 1.0)]
    seen.clear()
    assert grid.main(args + ["--config", str(cfg)]) == 0 and seen == []  # the same configuration: nothing again
    assert grid.main(args) == 0 and sorted(seen) == [("full", 0.2), ("no_tau_limit", 0.2)]  # the defaults again
    cfg.write_text("seiko_controller:\n  kp_per_sec: 1.0\n")
    assert grid.main(["--out", str(out), "--config", str(cfg), "--no-progress"]) == 2  # a misspelt key: refused
    cfg.write_text("input_filter: {}\n")
    assert grid.main(["--out", str(out), "--config", str(cfg), "--no-progress"]) == 2


def test_the_shipped_fig7_config_changes_only_the_force_feedback_gain(tmp_path, monkeypatch):
    """robots/talos/seiko_fig7.yaml (the grid's K_p = 0.5 run, docs/seiko_multicontact.md) loads by its
    robots/... name from any folder and differs from the defaults in K_p of (10) alone."""
    import dataclasses

    from contactflow.seiko.controller import ControllerConfig

    monkeypatch.chdir(tmp_path)
    from contactflow.nodes._runtime import load_node_config

    cfg = load_node_config(ControllerConfig, "robots/talos/seiko_fig7.yaml", "seiko_controller")  # as --config
    diff = {f.name for f in dataclasses.fields(cfg) if getattr(cfg, f.name) != getattr(ControllerConfig(), f.name)}
    assert diff == {"kp_per_s"} and cfg.kp_per_s == 0.5


def test_conditions():
    with pytest.raises(ConfigError):
        grid.condition_setup("nope")
    on, cfg = grid.condition_setup("no_tau_limit")
    assert on and not cfg.torque_limit_constraint and not cfg.torque_limit_adaptation
    on, cfg = grid.condition_setup("off")
    assert not on
    on, full = grid.condition_setup("full")
    from contactflow.seiko.controller import ControllerConfig

    assert on and full == ControllerConfig()  # the defaults, whatever they are


def test_grid_resumes_and_skips_finished_trials(tmp_path, monkeypatch, robot):
    calls = []

    def fake_trial(spec, target, robot=None, **kw):
        calls.append(spec.key)
        return {"condition": spec.condition, "speed_mps": spec.speed_mps, "mass_kg": spec.mass_kg,
                "target": spec.target, "success": spec.mass_kg == 0.0, "no_fall": spec.mass_kg == 0.0,
                "cause": None if spec.mass_kg == 0.0 else "fall", "torque_limit_joint": None, "wall_s": 0.0}

    monkeypatch.setattr(grid, "run_trial", fake_trial)
    out = tmp_path / "g.json"
    kw = dict(speeds=[0.1, 0.4], masses=[0.0, 5.0], n_targets=1, conditions=["off", "full"], targets=[TARGET],
              progress=False, log=lambda s: None, robot=robot)
    doc = grid.run_grid(out, **kw)
    assert len(calls) == 8 and len(doc["trials"]) == 8
    assert doc["summary"]["full"]["successes"] == 2 and doc["summary"]["full"]["cells"] == [[1, 0], [1, 0]]
    # an interrupted run: two trials missing from the file -> only those two run again
    stored = json.loads(out.read_text())
    dropped = stored["trials"][-2:]
    stored["trials"] = stored["trials"][:-2]
    out.write_text(json.dumps(stored))
    calls.clear()
    doc = grid.run_grid(out, **kw)
    assert sorted(calls) == sorted(TrialSpec(r["condition"], r["speed_mps"], r["mass_kg"], r["target"]).key
                                   for r in dropped)
    assert len(doc["trials"]) == 8
    calls.clear()
    grid.run_grid(out, **kw)  # complete: nothing runs
    assert calls == []
    # a larger grid runs only the new cells
    grid.run_grid(out, **{**kw, "masses": [0.0, 5.0, 10.0]})
    assert len(calls) == 4 and all("|10|" in c for c in calls)
    # trials of other Controller defaults are stale where the condition uses them: run again
    stored = json.loads(out.read_text())
    stored["meta"]["controller_config"]["max_tau_ratio"] = 0.5  # (12) only: the full method's trials
    out.write_text(json.dumps(stored))
    calls.clear()
    grid.run_grid(out, **kw)
    assert len(calls) == 4 and all(c.startswith("full|") for c in calls)
    stored = json.loads(out.read_text())
    stored["meta"]["controller_config"]["kd"] = 123.0  # (10): every Controller-driven trial
    out.write_text(json.dumps(stored))
    calls.clear()
    grid.run_grid(out, **kw)
    assert len(calls) == 4 and all(c.startswith("full|") for c in calls)  # `off` runs the Controller in shadow
    stored = json.loads(out.read_text())
    stored["meta"]["controller_config"]["kd"] = 123.0
    out.write_text(json.dumps(stored))
    calls.clear()
    grid.run_grid(out, **{**kw, "conditions": ["off", "no_tau_limit", "full"]})
    assert sum(c.startswith("no_tau_limit|") for c in calls) == 4  # new cells, run once
    calls.clear()
    grid.run_grid(out, **kw)
    assert calls == []
    calls.clear()
    doc = grid.run_grid(out, **kw, load_at="wrist")  # the load elsewhere: other trials
    assert len(calls) == 8 and doc["meta"]["load_at"] == "wrist"
    with pytest.raises(ConfigError):
        grid.run_grid(out, **{**kw, "conditions": ["bogus"]})
    # another protocol (the load's ramp) in the stored file: its trials are dropped
    stored = json.loads(out.read_text())
    stored["meta"]["load_ramp_s"] = 9.0
    out.write_text(json.dumps(stored))
    calls.clear()
    grid.run_grid(out, **{**kw, "load_at": "wrist"})
    assert len(calls) == 8
    # a file that is not a grid's: refused, naming it
    out.write_text("{not json")
    with pytest.raises(ConfigError, match="g.json: not a readable grid results file"):
        grid.run_grid(out, **kw)


@pytest.mark.slow  # ~35 s of CPU: three ~12 s closed-loop runs
def test_mini_grid_one_trial_per_condition_in_closed_loop(tmp_path, robot):
    """The 3-run mini grid: 40 cm/s (the fastest), 2 kg, one target, each condition once."""
    out = tmp_path / "mini.json"
    doc = grid.run_grid(out, speeds=[0.4], masses=[2.0], n_targets=1, targets=[TARGET], progress=False,
                        log=lambda s: None, robot=robot)
    trials = {r["condition"]: r for r in doc["trials"]}
    assert set(trials) == set(grid.CONDITIONS)
    for c, r in trials.items():
        # the trial ran to the scenario's end or stopped at a fall, and its outcome is consistent
        assert r["sim_s"] > grid.REACH_START_S
        assert r["success"] == (r["cause"] is None)
        assert r["no_fall"] == (r["fell_at_s"] is None)
        assert r["no_fall"] or r["cause"] in ("fall", "torque_limit", "qp_failure")
        assert r["max_tau_ratio"] > 0.0
    # the full method reaches the target and comes back standing (paper: 9/10 at 40 cm/s, 2 kg)
    full = trials["full"]
    assert full["success"], full
    assert full["desired_reach_fraction"] > 0.9, full
    s = doc["summary"]
    assert sum(s[c]["trials"] for c in grid.CONDITIONS) == 3
    assert json.loads(out.read_text())["summary"] == s


def test_grid_with_more_targets_of_the_same_seed_keeps_the_finished_trials(tmp_path, monkeypatch, robot):
    calls = []

    def fake_sampler(robot, n, seed, progress=None):  # sequential, as the real one: seed -> same first targets
        return [GridTarget(i, float(seed), 0.0, (1.0, 0.0, 0.0), 0.3 + 0.01 * i) for i in range(n)]

    def fake_trial(spec, target, robot=None, **kw):
        calls.append((spec.key, target.distance_m))
        return {"condition": spec.condition, "speed_mps": spec.speed_mps, "mass_kg": spec.mass_kg,
                "target": spec.target, "success": True, "no_fall": True, "cause": None, "torque_limit_joint": None,
                "wall_s": 0.0}

    monkeypatch.setattr(grid, "sample_targets", fake_sampler)
    monkeypatch.setattr(grid, "run_trial", fake_trial)
    out = tmp_path / "g.json"
    kw = dict(speeds=[0.4], masses=[0.0], conditions=["full"], progress=False, log=lambda s: None, robot=robot)
    grid.run_grid(out, n_targets=1, seed=7, **kw)
    assert calls == [("full|0.4|0|0", 0.3)]
    calls.clear()
    doc = grid.run_grid(out, n_targets=2, seed=7, **kw)  # one more target: only its trial runs
    assert calls == [("full|0.4|0|1", pytest.approx(0.31))] and len(doc["trials"]) == 2
    calls.clear()
    doc = grid.run_grid(out, n_targets=1, seed=8, **kw)  # another seed: other targets, everything again
    assert len(calls) == 1 and len(doc["trials"]) == 1 and doc["meta"]["seed"] == 8


def test_bench_seiko_grid_command(capfd, tmp_path):
    from contactflow.cli import main

    rc = main(["bench", "seiko-grid", "--help"])  # `seiko-grid` runs benchmarks/bench_seiko_grid.py
    out = capfd.readouterr().out
    assert rc == 0 and "--targets" in out and "--jobs" in out and "resumable" in out
    rc = grid.main(["--conditions", "full,bogus", "--out", str(tmp_path / "x.json"), "--no-progress"])
    assert rc == 2 and "unknown condition 'bogus'" in capfd.readouterr().out
    assert not (tmp_path / "x.json").exists()


def test_effector_load_at_the_hand_or_the_wrist(robot):
    import pinocchio as pin

    hand = grid.effector_load(robot, "left_hand", 5.0)
    wrist = grid.effector_load(robot, "left_hand", 5.0, at="wrist")
    assert hand.mass == wrist.mass == 5.0
    m, d = robot.model, robot.model.createData()
    pin.framesForwardKinematics(m, d, robot.q_default)

    def world(pm):
        return d.oMf[m.getFrameId(pm.parent)].act(np.array(pm.pos))

    # the hand load sits on the left hand frame; the wrist load on the wrist joints' axis point
    assert np.allclose(world(hand), d.oMf[robot.contacts["left_hand"].frame_id].translation, atol=1e-9)
    assert np.allclose(world(wrist), d.oMi[m.getJointId("arm_left_7_joint")].translation, atol=1e-9)
    assert np.linalg.norm(world(hand) - world(wrist)) > 0.2
    with pytest.raises(ConfigError):
        grid.effector_load(robot, "left_hand", 5.0, at="elbow")
    with pytest.raises(ConfigError):
        grid.effector_load(robot, "nope", 5.0)
