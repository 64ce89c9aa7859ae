"""``contactflow lac eval`` (contactflow.lac.evaluate): LAC Figs. 3, 4, 6 experiments.

Quick runs only: the ``quick`` suite of ``robots/g1/lac_eval.yaml`` (Fig. 6's left-hand pull at
the teacher's envelope, 5 N), two K values, one trial, a shortened profile (event at 1 s, ramp
0.5 s, hold 0.5 s, release 0.5 s: 2.5 s of simulated time per episode). The full suites are run by
``contactflow lac eval --suite envelope|paper`` (docs/lac_policy.md).
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from contactflow.errors import ConfigError
from contactflow.lac.evaluate import (compare, load_eval_config, merge_tables, monotonic_verdict, plot_eval,
                                      run_eval)

SHORT = {"trials": 1, "perturbation_std_rad": 0.01,
         "profile": {"t0_s": 1.0, "ramp_s": 0.5, "hold_s": 0.5, "release_s": 0.5, "after_s": 0.0,
                     "measure_window_s": 0.2},
         "k_grids": {"low_mid_high": [10.0, 500.0]}}


def _cfg(**extra):
    from contactflow.config import merge

    return load_eval_config(override=merge(SHORT, extra))


@pytest.fixture(scope="module")
def table():
    return run_eval(["expert", "pd_stand"], suite="quick", cfg=_cfg(), progress=False)


def test_shipped_config_has_the_papers_scenarios_and_both_suites():
    cfg = load_eval_config()
    assert {s.figure for s in cfg.scenarios.values()} == {3, 4, 6}
    assert {"paper", "envelope"} <= set(cfg.suites)
    assert cfg.profile.ramp_s == 1.0 and cfg.profile.hold_s == 1.0 and cfg.profile.release_s == 2.0  # LAC §IV-B
    assert cfg.k_grids["linear"][0] == 10 and cfg.k_grids["linear"][-1] == 500
    assert cfg.k_grids["angular"][0] == 10 and cfg.k_grids["angular"][-1] == 100
    assert cfg.scenarios["fig4_couple"].couple_nm == 4.0 and cfg.scenarios["fig6_torso"].force_n == (-20.0, 0.0, 0.0)
    assert all(0 < v <= 1 for v in cfg.suites["envelope"].scale.values())


def test_an_unknown_suite_is_refused_with_the_close_name():
    from contactflow.lac.evaluate import suite_scenarios

    cfg = load_eval_config()
    with pytest.raises(ConfigError, match=r"^suite 'quik': not in the config \(did you mean 'quick'\?\); known: envelope, "
                                          r"graph, paper, quick$"):
        suite_scenarios(cfg, "quik")
    assert suite_scenarios(cfg, "quick")


def test_table_keys_falls_and_the_stiff_stand_moves_less_than_the_expert_at_low_k(table):
    for key in ("suite", "profile", "trials", "results", "falls", "skipped", "k_grids", "pd_stand_gains",
                "date_utc", "machine", "wall_s", "workers"):
        assert key in table
    for c in ("expert", "pd_stand"):
        e = table["results"][c]["fig6_hand"]
        for key in ("figure", "link", "channel", "metric", "force_base_n", "k", "rows", "falls", "episodes",
                    "monotonic", "monotonic_other", "paper"):
            assert key in e
        assert e["force_base_n"] == pytest.approx([5.0, 0.0, 0.0], abs=1e-4)
        assert e["k"] == [10.0, 500.0] and e["episodes"] == 2
        for row in e["rows"]:
            assert set(row) == {"k", "trials", "mean", "falls"}
            assert set(row["mean"]) == {"displacement_m", "displacement_along_m", "attitude_deg",
                                        "rotation_about_axis_deg"}
            tr = row["trials"][0]
            assert not tr["fell"] and np.isfinite(tr["displacement_m"]) and np.isfinite(tr["attitude_deg"])
        assert table["falls"][c] == {"fell": 0, "episodes": 2}
    ex = table["results"]["expert"]["fig6_hand"]["rows"]
    pd = table["results"]["pd_stand"]["fig6_hand"]["rows"]
    # the expert yields along the pull, more at the soft end; the stiff stand barely moves and ignores K
    assert ex[0]["mean"]["displacement_m"] > 2 * ex[1]["mean"]["displacement_m"]
    assert pd[0]["mean"]["displacement_m"] < 0.5 * ex[0]["mean"]["displacement_m"]
    assert table["results"]["expert"]["fig6_hand"]["monotonic"]["decreasing"]
    assert pd[0]["mean"]["displacement_m"] == pytest.approx(pd[1]["mean"]["displacement_m"], rel=0.05)
    c = compare(table, "pd_stand", "expert")
    r = c["scenarios"]["fig6_hand"]["ratio"]
    assert r[0] == pytest.approx(pd[0]["mean"]["displacement_m"] / ex[0]["mean"]["displacement_m"])
    assert c["scenarios"]["fig6_hand"]["within"][0] is False and c["all_within"] is False
    assert compare(table, "expert", "expert")["all_within"] is True


def test_a_huge_force_makes_both_fall_and_the_table_says_so():
    t = run_eval(["expert", "pd_stand"], suite="quick", cfg=_cfg(suites={"quick": {"scale": {"fig6_hand": 8.0}}}),
                 progress=False)  # 240 N forward on the left hand
    for c in ("expert", "pd_stand"):
        e = t["results"][c]["fig6_hand"]
        assert t["falls"][c] == {"fell": 2, "episodes": 2}
        assert all(r["trials"][0]["fell"] and np.isnan(r["mean"]["displacement_m"]) for r in e["rows"])
        assert all(1.0 < r["trials"][0]["fell_time_s"] < 3.0 for r in e["rows"])
        assert not e["monotonic"]["decreasing"] and "falls" in e["monotonic"]["reason"]


def test_a_policy_in_lacs_deploy_format_runs_through_the_policy_controller(tmp_path):
    pytest.importorskip("onnx")
    from contactflow.policy.testing import mlp_model

    model = tmp_path / "lac_zero.onnx"
    mlp_model(str(model), input_name="frames", input_shape=(1, 64, 95), n_out=23, weight_scale=0.0)
    name = f"policy:robots/g1/policies/lac.yaml:{model}"
    t = run_eval([name], suite="quick", cfg=_cfg(k_grids={"low_mid_high": [10.0]}), progress=False)
    row = t["results"][name]["fig6_hand"]["rows"][0]["trials"][0]
    # a zero action is the default posture under LAC's PD gains: not a controller, it falls
    # (docs/lac_teleop.md: at t = 1.4 s) -- the run is real, and counted as a fall
    assert row["fell"] and 1.0 < row["fell_time_s"] < 2.5 and row["degraded_ticks"] == 0
    with pytest.raises(ConfigError, match="policy:SPEC"):
        run_eval(["policy:"], suite="quick", cfg=_cfg(), progress=False)


def test_workers_give_the_same_table_as_one_process(table):
    t2 = run_eval(["pd_stand"], suite="quick", cfg=_cfg(), workers=2, progress=False)
    a = [r["trials"][0]["displacement_m"] for r in table["results"]["pd_stand"]["fig6_hand"]["rows"]]
    b = [r["trials"][0]["displacement_m"] for r in t2["results"]["pd_stand"]["fig6_hand"]["rows"]]
    assert a == b


def test_monotonic_verdict():
    assert monotonic_verdict([10, 100], [0.2, 0.1], [0, 0])["decreasing"]
    v = monotonic_verdict([10, 50, 100], [0.2, 0.2, 0.1], [0, 0, 0])
    assert not v["decreasing"] and "(10, 50)" in v["reason"]
    assert monotonic_verdict([10, 50, 100], [0.2, 0.2005, 0.1], [0, 0, 0], tol=0.001)["decreasing"]
    v = monotonic_verdict([10, 100], [0.2, 0.1], [1, 0])
    assert not v["decreasing"] and "falls at K = [10]" in v["reason"]


def test_plots_json_and_merge(table, tmp_path):
    files = plot_eval(table, tmp_path)
    assert [f.name for f in files] == ["lac_eval_fig6.png"] and files[0].stat().st_size > 5000
    from contactflow.recording.summary import json_safe

    stored = json.loads(json.dumps(json_safe(table)))
    fresh = {"suite": "quick", "results": {}, "falls": {}}
    merge_tables(fresh, stored)
    assert set(fresh["results"]) == {"expert", "pd_stand"}
    with pytest.raises(ConfigError, match="suite 'quick'"):
        merge_tables({"suite": "paper", "results": {}, "falls": {}}, stored)


def test_a_link_that_ends_against_the_load_is_flagged_though_its_norm_decreases():
    """The norms hide a link pushed back past its start (a load estimate that overshoots): ``against`` lists
    the K whose mean component along the load is negative, and the summary says so."""
    from contactflow.lac.evaluate import _summarise, format_summary

    cfg = _cfg()
    def trial(d, along):
        return {"displacement_m": d, "displacement_along_m": along, "attitude_deg": 1.0,
                "rotation_about_axis_deg": float("nan"), "fell": False}

    runs = {("fig6_hand", 10.0): [trial(0.05, 0.05)] * 3,
            ("fig6_hand", 500.0): [trial(0.01, -0.01), trial(0.01, -0.01), trial(0.01, 0.005)]}
    res = _summarise(cfg, "quick", "x", runs)
    assert res["fig6_hand"]["monotonic"]["decreasing"] and res["fig6_hand"]["against"] == [500.0]
    text = format_summary({"suite": "quick", "results": {"x": res}, "falls": {"x": {"fell": 0, "episodes": 6}}})
    assert "AGAINST the load (displacement_along_m < 0) at K = [500.0]" in text
    del res["fig6_hand"]["against"], res["fig6_hand"]["against_metric"]  # a table stored before: from its trials
    assert format_summary({"suite": "quick", "results": {"x": res}, "falls": {"x": {"fell": 0, "episodes": 6}}}) == text
    runs[("fig6_hand", 500.0)] = [trial(0.01, -0.01), trial(0.01, 0.001), trial(0.01, 0.001)]  # one trial: noise
    assert _summarise(cfg, "quick", "x", runs)["fig6_hand"]["against"] == []
    runs[("fig6_hand", 500.0)] = [trial(0.01, 0.01)] * 3
    assert _summarise(cfg, "quick", "x", runs)["fig6_hand"]["against"] == []


def test_the_along_verdict_sees_a_hand_that_moves_across_the_load():
    """The norm decreases while the component along the force does not (a hand turned across the push at the soft
    end, as the suite graph found): the primary verdict says decreasing, ``monotonic_along`` does not, and the
    summary counts and prints both; a response along the load that ends against it is not decreasing either."""
    from contactflow.lac.evaluate import _summarise, along_verdict, format_summary

    cfg = _cfg()

    def trial(d, along):
        return {"displacement_m": d, "displacement_along_m": along, "attitude_deg": 1.0,
                "rotation_about_axis_deg": float("nan"), "fell": False}

    runs = {("fig6_hand", 10.0): [trial(0.17, 0.064)] * 3, ("fig6_hand", 500.0): [trial(0.07, 0.068)] * 3}
    res = _summarise(cfg, "quick", "x", runs)
    e = res["fig6_hand"]
    assert e["monotonic"]["decreasing"] and not e["monotonic_along"]["decreasing"]
    assert e["monotonic_along"]["metric"] == "displacement_along_m" and "between K = [(10.0, 500.0)]" in e["monotonic_along"]["reason"]
    text = format_summary({"suite": "quick", "results": {"x": res}, "falls": {"x": {"fell": 0, "episodes": 6}}})
    assert "1 of 1 scenarios decreasing (0 of 1 along the load)" in text
    assert "along the load [cm]: 6.4 / 6.8; NOT decreasing" in text
    del e["monotonic_along"]  # a table stored before it: computed from its rows
    assert format_summary({"suite": "quick", "results": {"x": res}, "falls": {"x": {"fell": 0, "episodes": 6}}}) == text
    runs[("fig6_hand", 500.0)] = [trial(0.07, 0.05)] * 3
    assert _summarise(cfg, "quick", "x", runs)["fig6_hand"]["monotonic_along"]["decreasing"]
    # decreasing along, but ending against the load (a wrist turned past its start against a couple)
    rows = [{"k": 10.0, "mean": {"rotation_about_axis_deg": 4.2}, "falls": 0,
             "trials": [{"rotation_about_axis_deg": 4.2}] * 3},
            {"k": 100.0, "mean": {"rotation_about_axis_deg": -5.7}, "falls": 0,
             "trials": [{"rotation_about_axis_deg": -5.7}] * 3}]
    v = along_verdict(rows, couple=True)
    assert not v["decreasing"] and v["reason"] == "against the load at K = [100.0]"
    rows[1]["mean"]["rotation_about_axis_deg"] = 0.8
    rows[1]["trials"] = [{"rotation_about_axis_deg": 0.8}] * 3
    assert along_verdict(rows, couple=True)["decreasing"]


def test_bad_config_and_names_are_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"lac_eval\.yaml.*unknown key.*'trails'"):
        load_eval_config(override={"trails": 3})
    with pytest.raises(ConfigError, match="channel.*K_lin_leg"):
        load_eval_config(override={"scenarios": {"fig3_forward": {"channel": "K_lin_leg"}}})
    with pytest.raises(ConfigError, match="exactly one of"):
        load_eval_config(override={"scenarios": {"fig3_forward": {"couple_nm": 1.0}}})
    for bad, match in (({"K_lin_left_arm": 100.0}, "'K_lin_left_arm' is not a channel left unswept"),
                       ({"K_lin_leg": 100.0}, "'K_lin_leg' is not a channel"), ({"K_lin_torso": 0.0}, "must be > 0")):
        with pytest.raises(ConfigError, match=re.escape(match)):
            load_eval_config(override={"scenarios": {"fig3_forward": {"stiffness": bad}}})
    with pytest.raises(ConfigError, match="suite 'nope'.*known"):
        run_eval(["expert"], suite="nope", cfg=_cfg(), progress=False)
    with pytest.raises(ConfigError, match="controller 'mpc'"):
        run_eval(["mpc"], suite="quick", cfg=_cfg(), progress=False)


def test_a_scenarios_stiffness_commands_the_channels_not_swept():
    """``scenarios.*.stiffness`` (suite ``graph``: hand_push.yaml's command) reaches the controller's command: the
    swept channel at the episode's K, the listed ones at their value, the rest at the teleop's default; the suites of
    the paper and the envelope do not run it."""
    import contactflow.lac.evaluate as ev

    cfg = _cfg(k_grids={"linear": [20.0]})
    robot, sim, factory = ev._worker_state("pd_stand", cfg)
    seen = []

    class Spy:
        def __init__(self):
            self.inner = factory()

        def reset(self, sensors):
            self.inner.reset(sensors)

        def step(self, sensors, command):
            seen.append(np.array(command["stiffness"], float))
            return self.inner.step(sensors, command)

    r = ev.run_episode(ev.Job("pd_stand", "graph", "fig3_teleop_graph", 20.0, 0), cfg, robot, sim, Spy())
    assert not r["fell"] and len(seen) > 50
    assert all(np.array_equal(k, [20.0, 100.0, 300.0, 30.0, 30.0]) for k in seen)
    ev.run_episode(ev.Job("pd_stand", "envelope", "fig3_teleop", 20.0, 0), cfg, robot, sim, Spy())
    assert np.array_equal(seen[-1], [20.0, 70.0, 70.0, 30.0, 30.0])
    assert ev.experiments(cfg, "graph")["fig3_teleop_graph"]["stiffness"] == {"K_lin_right_arm": 100.0,
                                                                             "K_lin_torso": 300.0}
    assert "fig3_teleop_graph" not in ev.suite_scenarios(cfg, "envelope") + ev.suite_scenarios(cfg, "paper")
    assert len(ev.suite_scenarios(cfg, "envelope")) == 10


def test_a_partial_config_file_changes_only_its_keys(tmp_path):
    """`lac eval --config FILE`: FILE's keys are layered over robots/g1/lac_eval.yaml (as `lac train`'s)."""
    shipped = load_eval_config()
    p = tmp_path / "mine.yaml"
    p.write_text("trials: 1\nscenarios:\n  fig3_forward: {force_n: [4.0, 0.0, 0.0]}\n")
    mine = load_eval_config(p)
    assert mine.trials == 1 and mine.scenarios["fig3_forward"].force_n == (4.0, 0.0, 0.0)
    assert mine.scenarios.keys() == shipped.scenarios.keys() and mine.suites == shipped.suites
    assert mine.scenarios["fig3_lateral"] == shipped.scenarios["fig3_lateral"]
    p.write_text("trails: 1\n")
    with pytest.raises(ConfigError, match=r"mine\.yaml \(over lac_eval\.yaml\).*'trails'"):
        load_eval_config(p)


def test_a_stored_table_compares_and_plots_after_a_json_round_trip(table, tmp_path):
    """The lead's route: a stored teacher table (JSON: NaN -> null) merged into a later run."""
    from contactflow.lac.evaluate import format_summary
    from contactflow.recording.summary import json_safe

    t = run_eval(["expert", "pd_stand"], suite="quick", cfg=_cfg(suites={"quick": {"scale": {"fig6_hand": 8.0}}}),
                 progress=False)
    stored = json.loads(json.dumps(json_safe(t)))  # every mean is null (all fell)
    c = compare(stored, "pd_stand", "expert")
    assert c["all_within"] is False and all(np.isnan(r) for r in c["scenarios"]["fig6_hand"]["ratio"])
    text = format_summary(stored)
    assert plot_eval(stored, tmp_path) and "falls 2/2" in text and "0 of 1 scenarios decreasing" in text
    for c in stored["results"]:  # a table stored before the headline's falls were kept: taken from its rows
        for e in stored["results"][c].values():
            e.get("headline", {}).pop("ours_falls", None)
    assert "(falls ?)" not in format_summary(stored)
    fresh = dict(table, results=dict(table["results"]), falls=dict(table["falls"]))
    fresh["results"].pop("expert")
    with pytest.raises(ConfigError, match="'expert' ran scenario 'fig6_hand' with force_base_n"):
        merge_tables(fresh, stored)  # 8 x the load: another experiment, not a baseline for this one
    same = dict(stored, results=dict(stored["results"]), falls=dict(stored["falls"]))
    same["results"].pop("expert")
    merge_tables(same, stored)  # keeps this table's pd_stand, adds the stored expert
    assert same["results"]["pd_stand"] is stored["results"]["pd_stand"] and "expert" in same["results"]
    assert compare(same, "pd_stand", "expert")["displacement_all_within"] is False


def test_a_stored_table_of_other_experiments_is_refused(table):
    """A stored teacher table made with another ``lac_eval.yaml`` (a scenario added, a posture, grid or
    profile changed) would compare the student with episodes it did not run: refused, naming the difference."""
    import copy

    from contactflow.recording.summary import json_safe

    stored = json.loads(json.dumps(json_safe(table)))
    fresh = copy.deepcopy(stored)
    fresh["results"].pop("expert")
    merge_tables(copy.deepcopy(fresh), stored)  # the same experiments: merged
    older = copy.deepcopy(stored)
    del older["base_stiffness"]
    merge_tables(copy.deepcopy(fresh), older)  # a table made before base_stiffness was recorded: not compared there
    changes = {
        "has scenarios ['fig9'] this run does not run": lambda t: t["results"]["expert"].update(
            fig9=t["results"]["expert"]["fig6_hand"]),
        "lacks this run's scenarios ['fig6_hand']": lambda t: t["results"]["expert"].update(
            fig9=t["results"]["expert"].pop("fig6_hand")),
        "channel = 'K_lin_right_arm'": lambda t: t["results"]["expert"]["fig6_hand"].update(channel="K_lin_right_arm"),
        "arms = {'left_elbow_joint': 0.9}": lambda t: t["results"]["expert"]["fig6_hand"].update(
            arms={"left_elbow_joint": 0.9}),
        "with k = ": lambda t: t["results"]["expert"]["fig6_hand"].update(k=[10, 70, 500]),
        "event profile": lambda t: t["profile"].update(hold_s=3.0),
        "stiffness = {'K_lin_torso': 300.0}": lambda t: t["results"]["expert"]["fig6_hand"].update(
            stiffness={"K_lin_torso": 300.0}),
        "base_stiffness (the channels not swept) is [100": lambda t: t.update(base_stiffness=[100.0] * 5),
    }
    for match, change in changes.items():
        other = copy.deepcopy(stored)
        change(other)
        with pytest.raises(ConfigError, match=re.escape(match)):
            merge_tables(copy.deepcopy(fresh), other)


def test_holosoma_is_skipped_with_a_message_when_its_model_cannot_be_fetched(monkeypatch, caplog):
    import contactflow.lac.evaluate as ev
    import contactflow.policy.holosoma as hs

    def no_network(name, *a, **k):
        raise hs.ModelFetchError("no network (test)")

    monkeypatch.setattr(hs, "fetch_holosoma", no_network)
    monkeypatch.setattr(ev, "_WORKER", {})  # no cached holosoma from an earlier test
    t = run_eval(["holosoma", "pd_stand"], suite="quick", cfg=_cfg(k_grids={"low_mid_high": [10.0]}), progress=False)
    assert "no network (test)" in t["skipped"]["holosoma"] and "holosoma" not in t["results"]
    assert t["falls"]["pd_stand"]["episodes"] == 1
    assert "holosoma skipped" in caplog.text


def test_a_stored_table_of_other_experiments_is_refused_before_any_episode_runs(table, monkeypatch, tmp_path, capsys):
    """`lac eval --with-table FILE` checks FILE against this run's configuration before the episodes (a teacher
    suite takes minutes, and a refusal after them would lose the run); a table of the same experiments with
    another trial count is merged into the run's output."""
    import copy

    import yaml

    import contactflow.lac.evaluate as ev
    from contactflow.cli import main as cli_main
    from contactflow.recording.summary import json_safe

    (tmp_path / "short.yaml").write_text(yaml.safe_dump(SHORT))
    stored = json.loads(json.dumps(json_safe(table)))
    other = copy.deepcopy(stored)
    other["results"]["expert"]["fig6_hand"]["arms"] = {"left_elbow_joint": 0.9}
    (tmp_path / "other.json").write_text(json.dumps(other))
    (tmp_path / "same.json").write_text(json.dumps(stored))
    args = ["lac", "eval", "--suite", "quick", "--config", str(tmp_path / "short.yaml"), "--controller", "pd_stand",
            "--no-plots", "--no-progress", "--out", str(tmp_path / "out")]
    monkeypatch.setattr(ev, "run_eval", lambda *a, **k: pytest.fail("episodes ran before the check"))
    assert cli_main([*args, "--with-table", str(tmp_path / "other.json")]) == 2
    err = capsys.readouterr().err
    assert "--with-table" in err and "other.json" in err and "'expert' ran scenario 'fig6_hand' with arms" in err
    (tmp_path / "stiff.json").write_text(json.dumps(dict(stored, base_stiffness=[100.0] * 5)))
    assert cli_main([*args, "--with-table", str(tmp_path / "stiff.json")]) == 2  # this run: the teleop's default
    assert "stiff.json" in capsys.readouterr().err
    ours = copy.deepcopy(table)
    ours["results"].pop("expert"), ours["falls"].pop("expert")
    monkeypatch.setattr(ev, "run_eval", lambda *a, **k: ours)
    assert cli_main([*args, "--trials", "2", "--with-table", str(tmp_path / "same.json"),
                     "--compare", "pd_stand,expert"]) == 0
    out = json.loads((tmp_path / "out" / "lac_eval_quick.json").read_text())
    assert set(out["results"]) == {"pd_stand", "expert"} and "comparison" in out


def test_a_mistyped_compare_is_refused_before_any_episode_runs(monkeypatch, tmp_path):
    """`lac eval --compare S,T` names a controller neither run nor stored: refused up front, nothing run."""
    import contactflow.lac.evaluate as ev
    from contactflow.cli import main as cli_main

    def must_not_run(*a, **k):
        raise AssertionError("an episode ran")

    monkeypatch.setattr(ev, "run_eval", must_not_run)
    with pytest.raises(SystemExit, match=r"--compare: 'expertt' is neither.*known: pd_stand"):
        cli_main(["lac", "eval", "--controller", "pd_stand", "--compare", "pd_stand,expertt",
                  "--out", str(tmp_path), "--no-progress"])


def test_missing_matplotlib_is_named_before_any_episode_runs(monkeypatch, tmp_path):
    """`lac eval` without the [plot] extra stops at once (not after the episodes) and names --no-plots."""
    import sys

    import contactflow.lac.evaluate as ev
    from contactflow.cli import main

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now fails as if not installed
    monkeypatch.setattr(ev, "run_eval", lambda *a, **k: pytest.fail("episodes ran before the check"))
    with pytest.raises(SystemExit, match=r"matplotlib.*\[plot\].*--no-plots"):
        main(["lac", "eval", "--suite", "quick", "--out", str(tmp_path)])
