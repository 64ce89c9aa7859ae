"""Graph faults of the reliability campaign (issue 16 item 1, contactflow/faults/inject.py): the fault
injector's logic, the graph edits (checked by the wiring check), the Lockstep's handling of a malformed
multi-tick message, and the CI subset: every port-fault kind in one run of the lockstep SEIKO graph and
each scenario fault in a short run, through the shipped nodes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import yaml

from contactflow.errors import ConfigError
from contactflow.faults.cases import FaultCase
from contactflow.faults.inject import (GRAPH_KINDS, INJECTOR_ID, PORT_KINDS, SCENARIO_FILES, SCENARIO_KINDS, PortFault,
                                       PortFaultInjector, edit_graph, graph_cases, graph_edges, graph_fault_problems)
from contactflow.contracts.wiring import check_descriptor

ROOT = Path(__file__).resolve().parent.parent
DATAFLOWS = ROOT / "dataflows"
CAMPAIGN_GRAPHS = ["seiko_talos.yml", "seiko_talos_realtime.yml", "seiko_talos_multicontact.yml",
                   "seiko_talos_replay.yml", "prime_replay_go2.yml", "lac_g1_teleop.yml", "lac_g1_policy.yml"]


def _graph(name: str) -> dict:
    return yaml.safe_load((DATAFLOWS / name).read_text())


# ---------------------------------------------------------------- the injector's logic
def _msgs(n: int, size: int = 4, dt: float = 0.002):
    return [(np.arange(size, dtype=np.float64) + k, {"seq": k, "t": k * dt, "finished": False}) for k in range(n)]


@pytest.mark.parametrize("kind", ["nan", "inf"])
def test_nan_inf_replace_the_values_of_count_messages_from_the_fault_time(kind):
    inj = PortFaultInjector(PortFault(kind, at_s=0.004, count=2))
    out = [inj.process(v, md) for v, md in _msgs(6)]
    assert all(len(o) == 1 for o in out)
    for k, [(vec, md)] in enumerate(out):
        assert md["seq"] == k
        if k in (2, 3):
            assert not np.isfinite(vec).any() and (np.isnan(vec).all() if kind == "nan" else np.isposinf(vec).all())
        else:
            assert np.array_equal(vec, np.arange(4) + k)
    assert inj.fired == (2, 0.004) and inj.faulted == 2 and inj.done
    one = PortFaultInjector(PortFault(kind, 0.0, index=1)).process(np.zeros(3), {"seq": 0, "t": 0.0})[0][0]
    assert np.isfinite(one).tolist() == [True, False, True]


def test_wrong_length_cuts_one_value_and_unchanged_messages_are_the_same_object():
    inj = PortFaultInjector(PortFault("wrong_length", at_s=0.002))
    vals = _msgs(3)
    out = [inj.process(v, md) for v, md in vals]
    assert out[0][0][0] is vals[0][0]  # forwarded as received
    assert out[1][0][0].size == 3 and np.array_equal(out[1][0][0], vals[1][0][:3])
    assert out[2][0][0] is vals[2][0]


def test_flood_sends_count_copies_once_and_multi_tick_messages_use_their_last_row_time():
    inj = PortFaultInjector(PortFault("flood", at_s=0.1, count=500))
    rows = {"seq": 0, "t": 0.0, "rows": 50, "row_t": [k * 0.002 for k in range(50)]}  # 0 .. 0.098 s
    assert len(inj.process(np.zeros(50), rows)) == 1
    rows2 = {**rows, "seq": 50, "t": 0.1, "row_t": [0.1 + k * 0.002 for k in range(50)]}
    burst = inj.process(np.zeros(50), rows2)
    assert len(burst) == 500 and all(md["seq"] == 50 for _, md in burst)
    assert len(inj.process(np.zeros(50), {**rows, "seq": 100, "t": 0.2})) == 1
    assert inj.faulted == 500 and inj.fired == (50, 0.1)
    # a keep-alive re-send is never the faulted message
    nan = PortFaultInjector(PortFault("nan", at_s=0.0))
    assert np.isfinite(nan.process(np.ones(2), {"seq": 3, "t": 1.0, "repeat": True})[0][0]).all()
    assert not np.isfinite(nan.process(np.ones(2), {"seq": 4, "t": 1.002})[0][0]).any()


@pytest.mark.parametrize("kw, msg", [
    ({"kind": "zero", "at_s": 0.0}, "unknown kind 'zero'"),
    ({"kind": "nan", "at_s": float("nan")}, "at_s must be a finite time"),
    ({"kind": "nan", "at_s": -1.0}, "at_s must be a finite time"),
    ({"kind": "flood", "at_s": 0.0, "count": 0}, "count must be >= 1"),
    ({"kind": "wrong_length", "at_s": 0.0, "index": 2}, "index applies to nan/inf only"),
])
def test_a_bad_port_fault_is_refused(kw, msg):
    with pytest.raises(ConfigError, match=msg):
        PortFault(**kw)


# ---------------------------------------------------------------- graph edits
def test_edit_graph_inserts_the_injector_on_one_connection_with_its_queue():
    g = _graph("seiko_talos.yml")
    case = FaultCase("seiko_talos.yml", "nan", "seiko_controller/command", 1.0, {"to": "mujoco_driver/command"})
    edited = edit_graph(g, case)
    assert g == _graph("seiko_talos.yml")  # the input is not modified
    nodes = {n["id"]: n for n in edited["nodes"]}
    inj = nodes[INJECTOR_ID]
    assert inj["path"] in ("contactflow-fault-injector", str(ROOT / "nodes" / "fault_injector.py"))
    assert "--fault nan --at-s 1.0 --count 1" in inj["args"]
    assert inj["inputs"]["in"] == {"source": "seiko_controller/command", "queue_size": 100, "queue_policy": "backpressure"}
    assert nodes["mujoco_driver"]["inputs"]["command"] == {"source": f"{INJECTOR_ID}/out", "queue_size": 100,
                                                           "queue_policy": "backpressure"}
    assert check_descriptor(edited, strict=True) == []  # the injector is a declared node: every port checked
    # a second fault in the same graph gets its own injector
    twice = edit_graph(edited, FaultCase("seiko_talos.yml", "flood", "mujoco_driver/sensors", 1.2,
                                         {"to": "seiko_controller/sensors"}))
    assert {n["id"] for n in twice["nodes"]} >= {INJECTOR_ID, f"{INJECTOR_ID}_1"}
    assert check_descriptor(twice, strict=True) == []
    assert "env" not in inj  # a lockstep graph's nodes run at the normal priority
    # real-time graph: the injector runs at its destination's SCHED_FIFO priority (else it is starved)
    rt = edit_graph(_graph("seiko_talos_realtime.yml"), FaultCase("seiko_talos_realtime.yml", "nan",
                                                                 "seiko_retargeting/desired", 1.0,
                                                                 {"to": "seiko_controller/desired"}))
    assert {n["id"]: n for n in rt["nodes"]}[INJECTOR_ID]["env"] == {"CONTACTFLOW_RT_PRIORITY": 10}


def test_edit_graph_refuses_what_it_cannot_do():
    g = _graph("seiko_talos.yml")
    with pytest.raises(ConfigError, match=r"no connection 'seiko_controller/comand'; its connections: \["):
        edit_graph(g, FaultCase("seiko_talos.yml", "nan", "seiko_controller/comand", 1.0))
    with pytest.raises(ConfigError, match="target must be 'node/output'"):
        edit_graph(g, FaultCase("seiko_talos.yml", "inf", "seiko_controller", 1.0))
    with pytest.raises(ConfigError, match="not a graph fault"):
        edit_graph(g, FaultCase("seiko_talos.yml", "kill", "seiko_controller", 1.0))
    with pytest.raises(ConfigError, match="needs a Talos SEIKO graph"):
        edit_graph(_graph("lac_g1_teleop.yml"), FaultCase("lac_g1_teleop.yml", "far_contact", "operator", 0.3))


def test_scenario_faults_swap_the_operator_scenario_and_too_much_adds_a_payload():
    g = _graph("seiko_talos.yml")
    for kind in sorted(SCENARIO_KINDS):
        edited = edit_graph(g, FaultCase("seiko_talos.yml", kind, "operator", 0.0, {"mass_kg": 15.0}))
        nodes = {n["id"]: n for n in edited["nodes"]}
        assert nodes["operator"]["args"].endswith(f"--scenario {SCENARIO_FILES[kind]}")
        assert nodes["operator"]["args"].count("--scenario") == 1
        assert ("--payload arm_left_7_link:15" in nodes["mujoco_driver"]["args"]) == (kind == "too_much")
        assert (ROOT / SCENARIO_FILES[kind]).is_file()


@pytest.mark.parametrize("graph", CAMPAIGN_GRAPHS)
def test_every_campaign_case_edits_its_graph_into_a_graph_the_wiring_check_accepts(graph):
    quick, full = graph_cases(graph, True), graph_cases(graph, False)
    assert {c.kind for c in quick} >= set(PORT_KINDS)
    assert len(full) >= len(quick) and {c.kind for c in full} == {c.kind for c in quick} <= GRAPH_KINDS
    base = {(p.node, p.port, p.message) for p in check_descriptor(_graph(graph))}
    for case in full:
        edited = edit_graph(_graph(graph), case)
        # no new wiring problem (the shipped graph's own, if any, are test_wiring's business)
        assert {(p.node, p.port, p.message) for p in check_descriptor(edited)} <= base, case.name
        if case.kind in PORT_KINDS:
            assert 0 < case.at_s and case.params["to"] in {d for _, d in graph_edges(_graph(graph))}
    scen = {c.kind for c in full} & SCENARIO_KINDS
    assert scen == (SCENARIO_KINDS if graph in CAMPAIGN_GRAPHS[:3] else set())


# ---------------------------------------------------------------- the Lockstep and a malformed multi-tick message
class _Events:
    """A dora node double delivering a fixed list of events."""

    def __init__(self, events):
        self.events = list(events)

    def next(self, timeout=None):
        return self.events.pop(0) if self.events else None

    def node_config(self):
        return {"inputs": {}, "outputs": []}


def test_a_malformed_multi_tick_message_delivers_its_ticks_as_malformed_instead_of_stalling():
    from contactflow.contracts.messages import port_specs
    from contactflow.nodes._runtime import lockstep_for
    from contactflow.robot import load_robot

    spec = port_specs(load_robot("talos"))["operator_command"]
    good = np.zeros(spec.size * 3)

    def rows(seq, values, fin=False):
        return {"type": "INPUT", "id": "command", "value": pa.array(values),
                "metadata": {"seq": seq, "t": seq * 0.002, "finished": fin, "rows": 3,
                             "row_t": [(seq + j) * 0.002 for j in range(3)], "row_finished": [0, 0, int(fin)]}}

    events = [rows(0, good), rows(3, good[:-1]), rows(6, good, fin=True), {"type": "INPUT_CLOSED", "id": "command"}]
    ticks = list(lockstep_for(_Events(events), "input_filter", {"operator_command": spec, "desired": None},
                              only=("command",)))
    assert [t.k for t in ticks] == list(range(9))  # the three ticks of the bad message came, nothing waited
    assert [t.inputs["command"] is None for t in ticks] == [False] * 3 + [True] * 3 + [False] * 3
    assert "expected 36 float64 values" in ticks[4].errors["command"] and ticks[-1].finished
    assert [t.t for t in ticks[3:6]] == [0.006, 0.008, 0.010]  # the bad message's own row_t


def test_the_ticks_of_a_malformed_multi_tick_message_keep_their_own_times():
    """Its row_t when usable (a 1 ms graph stays 1 ms), else its t plus the Lockstep's dt per row."""
    from contactflow.contracts.messages import port_specs
    from contactflow.nodes._runtime import lockstep_for

    from contactflow.robot import load_robot

    spec = port_specs(load_robot("talos"))["operator_command"]
    lock = lockstep_for(_Events([]), "input_filter", {"operator_command": spec, "desired": None}, only=("command",))
    assert lock._row_times({"t": 0.1, "row_t": [0.1, 0.101, 0.102]}, 100, 3) == [0.1, 0.101, 0.102]
    for bad in ([0.1, 0.101], [0.1, "x", 0.102], [0.1, float("nan"), 0.102], None):
        assert lock._row_times({"t": 0.1, "row_t": bad}, 100, 3) == [0.1, 0.1 + lock.dt, 0.1 + 2 * lock.dt]
    assert lock._row_times({}, 100, 2) == [100 * lock.dt, 101 * lock.dt]


# ---------------------------------------------------------------- through the real nodes (CI subset)
def _run(graph: dict, tmp_path: Path, scenario: str, timeout_s: float = 240.0):
    flow = DATAFLOWS / f"_test_fault_{os.getpid()}_{tmp_path.name}.yml"
    flow.write_text(yaml.safe_dump(graph, sort_keys=False))
    env = {**os.environ, "CONTACTFLOW_RECORDINGS": str(tmp_path / "rec"), "UV_NO_SYNC": "1",
           "CONTACTFLOW_SCENARIO": str(ROOT / scenario)}
    env.pop("CONTACTFLOW_RECORDING", None)
    dora = str(Path(sys.executable).with_name("dora"))
    try:
        proc = subprocess.run([dora if Path(dora).exists() else "dora", "run", str(flow)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=timeout_s)
    finally:
        flow.unlink(missing_ok=True)
    runs = sorted(p for p in (tmp_path / "rec").glob("*") if p.is_dir() and not p.is_symlink())
    summary = json.loads((runs[-1] / "summary.json").read_text()) if runs else None
    return proc.returncode, (proc.stdout + proc.stderr).splitlines(), summary


def test_port_faults_on_the_lockstep_graph_are_refused_by_the_receivers_and_the_robot_keeps_standing(tmp_path):
    """nan on the command into the driver, inf on the Retargeting's multi-tick output into the Controller,
    a wrong-length multi-tick operator command into the input filter, a flood of 1000 copies of a sensors
    message into the Controller: one run, each fault at its own time."""
    cases = [FaultCase("seiko_talos.yml", "nan", "seiko_controller/command", 0.5, {"to": "mujoco_driver/command"}),
             FaultCase("seiko_talos.yml", "wrong_length", "operator/command", 0.6, {"to": "input_filter/command"}),
             FaultCase("seiko_talos.yml", "inf", "seiko_retargeting/desired_rows", 0.8,
                       {"to": "seiko_controller/desired"}),
             FaultCase("seiko_talos.yml", "flood", "mujoco_driver/sensors", 1.0,
                       {"to": "seiko_controller/sensors", "count": 1000})]
    graph = _graph("seiko_talos.yml")
    for case in cases:
        graph = edit_graph(graph, case)
    rc, lines, summary = _run(graph, tmp_path, "robots/talos/scenarios/smoke_2s.yaml")
    text = "\n".join(lines)
    assert rc == 0, text[-3000:]
    for case in cases:
        assert graph_fault_problems(case, lines) == [], case.name
    assert "1 commands were not applied (malformed, non-finite or out of limits)" in text
    assert "malformed multi-tick message (seq 300..349) ignored" in text  # the operator's 50-tick batch
    assert summary["fell"] is False and summary["pelvis_min_height_m"] > 1.0
    assert summary["sim_time_s"] >= 2.0  # the scenario ran to its end


@pytest.mark.parametrize("kind, graph", [("infeasible_qp", "seiko_talos.yml"),
                                         ("far_contact", "seiko_talos_multicontact.yml"),
                                         ("too_much", "seiko_talos.yml")])
def test_a_scenario_fault_is_bounded_or_refused_and_the_robot_keeps_standing(kind, graph, tmp_path):
    case = next(c for c in graph_cases(graph, True) if c.kind == kind)
    rc, lines, summary = _run(edit_graph(_graph(graph), case), tmp_path, case.scenario)
    text = "\n".join(lines)
    assert rc == 0, text[-3000:]
    assert graph_fault_problems(case, lines) == [], text[-3000:]
    assert summary["fell"] is False and summary["pelvis_min_height_m"] > 0.9, summary
    if kind == "far_contact":
        assert summary["requests_refused"] >= 2 and not summary["contact_switches"]  # nothing was enabled
    if kind == "too_much":  # lockstep is deterministic: the Controller's torque guard (12) engages
        assert "torque limit (12)" in text and summary["pelvis_min_height_m"] < 1.0  # the load bends it down


def test_a_hang_case_runs_with_the_online_finish_graces():
    """The PRIME graph's 10 min grace (its estimator solves after the replay) would outlast the campaign's
    time limit of a hang case: there the graces are the online ones, elsewhere as shipped."""
    import yaml

    from contactflow.faults.campaign import FaultCase, _edit_graph, _setup
    from contactflow.graphs import FINISH_GRACE_S, FINISH_GRACE_S_OF, FINISH_GRACE_S_OFFLINE

    graph = yaml.safe_load((ROOT / "dataflows" / "prime_replay_go2.yml").read_text())
    setup = _setup("prime_replay_go2.yml")
    hang = _edit_graph(graph, FaultCase("prime_replay_go2.yml", "hang", "prime_estimator", 1.0), setup, None)
    assert {n["id"]: n["finish_grace_secs"] for n in hang["nodes"]} == {
        n["id"]: FINISH_GRACE_S_OF.get(n["id"], FINISH_GRACE_S) for n in graph["nodes"]}
    kill = _edit_graph(graph, FaultCase("prime_replay_go2.yml", "kill", "prime_estimator", 1.0), setup, None)
    assert {n["id"]: n["finish_grace_secs"] for n in kill["nodes"]}["prime_estimator"] == FINISH_GRACE_S_OFFLINE
