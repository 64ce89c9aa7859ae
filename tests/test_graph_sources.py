"""The SEIKO graphs in dataflows/ are rendered from one description (contactflow/graphs.py)."""

import re
from pathlib import Path

import pytest
import yaml

from contactflow import graphs
from contactflow.cli import main
from contactflow.paths import node_kind
from contactflow.contracts.wiring import check_descriptor, rows_output
from contactflow.nodes._runtime import ROWS_EVERY_DEFAULT

ROOT = Path(__file__).resolve().parent.parent


def _nodes(name: str) -> dict[str, dict]:
    return {n["id"]: n for n in yaml.safe_load(graphs.render(name))["nodes"]}


def test_every_shipped_graph_matches_its_source():
    assert graphs.check_graphs(ROOT / "dataflows") == [], "run `contactflow graphs --write` (do not edit them by hand)"
    assert main(["graphs", "--check"]) == 0


def test_a_hand_edited_graph_is_reported_by_name(tmp_path, capsys):
    assert main(["graphs", "--write", "--dir", str(tmp_path)]) == 0
    assert graphs.check_graphs(tmp_path) == []
    p = tmp_path / "seiko_talos_view.yml"
    p.write_text(p.read_text().replace("--lag 2", "--lag 3", 1))
    (tmp_path / "seiko_talos_live.yml").unlink()
    assert graphs.check_graphs(tmp_path) == ["seiko_talos_live", "seiko_talos_view"]
    capsys.readouterr()
    assert main(["graphs", "--check", "--dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "seiko_talos_view.yml" in out and "seiko_talos_live.yml" in out and "--write" in out


@pytest.mark.parametrize("name", list(graphs.GRAPHS))
def test_every_graph_passes_the_wiring_check_and_is_flat(name):
    flow = yaml.safe_load(graphs.render(name))
    assert not any("module" in n for n in flow["nodes"])  # `dora run` needs no expansion
    assert check_descriptor(flow) == []


@pytest.mark.parametrize("name", list(graphs.GRAPHS))
def test_a_live_retargeting_gets_the_operator_command(name):
    """dataflows/modules/seiko.yml dropped it: contact switches and pushing mode were ignored."""
    nodes = _nodes(name)
    ret = nodes.get("seiko_retargeting")
    if ret is None or node_kind(ret["path"]) == "replay":
        pytest.skip("no live Retargeting in this graph")
    assert ret["inputs"]["command"]["source"] == "operator/command"


@pytest.mark.parametrize("name", list(graphs.GRAPHS))
def test_every_node_output_is_recorded_once_and_control_edges_keep_backpressure(name):
    nodes = _nodes(name)
    rec = nodes["recorder"]["inputs"]
    sources = [v["source"] for v in rec.values()]
    assert len(sources) == len(set(sources))
    for nid, n in nodes.items():
        if nid in ("recorder", "viewer"):
            continue
        outs = n.get("outputs", [])
        if "log" in outs:
            assert f"{nid}/log" in sources, (name, nid)
        else:  # recorded output by output (replay nodes, a dynamic operator)
            assert all(f"{nid}/{o}" in sources for o in outs), (name, nid)
        for port, spec in (n.get("inputs") or {}).items():
            if "--realtime" in n.get("args", "").split():  # latest value between real-time stages
                assert spec == {"source": spec["source"], **graphs.REALTIME}, (name, nid, port)
            else:
                assert spec["queue_policy"] == "backpressure", (name, nid, port)
    for spec in rec.values():
        assert spec["queue_policy"] == "backpressure" and spec["queue_size"] >= 1000
    for spec in (nodes.get("viewer") or {}).get("inputs", {}).values():
        assert spec["queue_policy"] == "drop_oldest"  # an observer never holds back the loop


@pytest.mark.parametrize("variant, changed", [
    # node id -> the keys allowed to differ from seiko_talos (None: absent in the variant)
    ("prime_seiko_talos_payload", {"mujoco_driver": {"args"}, "recorder": {"args"}}),
    # a live operator runs per tick: the Retargeting is then paced by the driver and the Controller
    # reads its per-tick `desired` (not `desired_rows`, which would deadlock)
    # (and the input filter <-> Retargeting cycle a message per tick: `targets`, `desired`)
    # (a dynamic operator is started by the user's program: no `env`, no CPU role; it reads the driver's sensors,
    # so the Controller's `sensors` is not a local input there: its `env` differs)
    ("seiko_talos_live", {"operator": {"path", "args", "outputs", "inputs", "env"}, "recorder": {"args", "inputs"},
                          "seiko_retargeting": {"outputs", "inputs"}, "seiko_controller": {"inputs", "env"},
                          "input_filter": {"outputs", "inputs"}}),
    ("seiko_talos_far_reach", {"operator": {"path", "args", "outputs", "inputs", "env"}, "recorder": {"args", "inputs"},
                               "mujoco_driver": {"args"}, "seiko_controller": {"args", "inputs", "env"},
                               "seiko_retargeting": {"outputs", "inputs"}, "input_filter": {"outputs", "inputs"}}),
    ("seiko_talos_sim", {"recorder": {"args"}}),
    # the viewer reads the Retargeting's per-tick `desired`: declared again beside the batches; and the driver's
    # sensors: the Controller's `sensors` is then not a local input (nodes/_local.py)
    ("seiko_talos_view", {"seiko_controller": {"outputs", "env"}, "seiko_retargeting": {"outputs"}, "recorder": {"args"},
                          "viewer": None}),
])
def test_variants_differ_from_the_main_graph_only_where_intended(variant, changed):
    base, var = _nodes("seiko_talos"), _nodes(variant)
    assert set(var) - set(base) == {k for k, v in changed.items() if v is None}
    assert set(base) <= set(var)
    for nid, node in base.items():
        keys = set(node) | set(var[nid])
        differ = {k for k in keys if node.get(k) != var[nid].get(k)}
        assert differ <= (changed.get(nid) or set()), (variant, nid, differ)
    if variant == "seiko_talos_view":
        assert var["seiko_controller"]["outputs"] == ["command", "state", "log"]
        assert var["seiko_retargeting"]["outputs"] == ["desired", *base["seiko_retargeting"]["outputs"]]
    if "operator" in changed and var["operator"]["path"] == "dynamic":
        assert var["seiko_controller"]["inputs"]["desired"]["source"] == "seiko_retargeting/desired"


def _operator_runs_ahead(nodes) -> bool:
    """The operator publishes its commands ahead of the Controller: a scenario operator clocked by the driver's log
    (ahead mode), or a replay of the recorded commands whose --window less its --batch leaves at least two of the
    Controller's batches (ROWS_EVERY_DEFAULT ticks each) ahead of its acks."""
    op = nodes["operator"]
    if "tick" in op["inputs"]:
        return op["inputs"]["tick"]["source"].endswith("/log")
    window, batch = re.search(r"--window (\d+)", op["args"]), re.search(r"--batch (\d+)", op["args"])
    ahead = int(window[1]) - (int(batch[1]) if batch else 1) if window else 0
    return op["path"] == "contactflow-replay" and ahead >= 2 * ROWS_EVERY_DEFAULT


def test_multi_tick_edges_only_where_the_retargeting_runs_ahead_of_the_driver():
    """`desired_rows` deadlocks unless the Retargeting is free of the driver's pace: an operator that runs ahead
    (:func:`_operator_runs_ahead`) and no admittance input on the filter."""
    used = []
    for name in graphs.GRAPHS:
        nodes = _nodes(name)
        ctrl = nodes.get("seiko_controller", {}).get("inputs", {}).get("desired", {})
        if ctrl.get("source", "").endswith("_rows"):
            assert _operator_runs_ahead(nodes), name
            assert "admittance" not in nodes["input_filter"]["inputs"], name
            used.append(name)
    assert "seiko_talos" in used and "seiko_talos_replay" in used and "seiko_talos_live" not in used
    assert _nodes("seiko_talos")["seiko_controller"]["inputs"]["desired"]["source"] == "seiko_retargeting/desired_rows"


def test_the_planner_cycle_batches_no_more_ticks_than_the_input_filter_lags():
    """The input filter <-> Retargeting cycle in `lag`-tick messages (`targets_rows<N>`, `desired_rows<N>`)
    is deadlock-free only if the input filter's --lag >= N (the desired of tick k - lag is in a complete
    batch when tick k needs it); the main graph uses it, a per-tick operator does not."""
    used = []
    for name in graphs.GRAPHS:
        nodes = _nodes(name)
        filt, ret = nodes.get("input_filter"), nodes.get("seiko_retargeting")
        if filt is None or ret is None:
            continue
        lag = int(re.search(r"--lag (\d+)", filt["args"]).group(1))
        for port, node in (("desired", filt), ("targets", ret)):
            rows = rows_output(node["inputs"][port]["source"].split("/")[1])
            if rows is not None:
                assert rows[1] is not None and rows[1] <= lag, (name, port, rows, lag)
                assert _operator_runs_ahead(nodes), name
                used.append(name)
    assert "seiko_talos" in used and "seiko_talos_replay" in used and "seiko_talos_live" not in used
    with pytest.raises(ValueError, match="lag >= 2"):
        graphs.seiko_stages(lag=1, desired_rows=True, planner_rows=True)
    with pytest.raises(ValueError, match="desired_rows=True"):
        graphs.seiko_stages(planner_rows=True)


def test_the_realtime_graph_is_the_main_graph_with_every_stage_in_real_time():
    """Same stages and wiring as seiko_talos.yml, but every SEIKO stage and the driver --realtime, the
    operator in ahead mode as in the lockstep graph (a scenario depends only on time) with the input
    filter ticking on the driver's sensors, no `desired_rows`, drop-oldest queues of 10 between stages,
    lossless recorder inputs, and each stage's SCHED_FIFO priority (the driver first, the dora daemon
    above it) in its env."""
    rt, base = _nodes("seiko_talos_realtime"), _nodes("seiko_talos")
    assert set(rt) == set(base)
    # ahead mode, clocked by the driver's log, as in the lockstep graph; with its SCHED_FIFO priority
    # (the lockstep graph's CPU roles are lockstep-only: the real-time graph has its priorities instead)
    assert {k: v for k, v in rt["operator"].items() if k != "env"} == {k: v for k, v in base["operator"].items() if k != "env"}
    assert base["operator"]["env"] == {"CONTACTFLOW_CPU_ROLE": "support"}
    assert rt["operator"]["env"] == {"CONTACTFLOW_RT_PRIORITY": graphs.RT_PRIORITY["operator"]}
    stages = set(rt) - {"recorder", "operator"}
    assert set(graphs.RT_PRIORITY) - {"seiko_stack", "operator"} == stages
    for nid in stages:
        node, ref = rt[nid], base[nid]
        args = node["args"].split()
        assert args.count("--realtime") == 1, nid
        # (the lockstep Controller's --sensor-lag is the real-time graph's timing already: not repeated)
        assert [a for a in args if a != "--realtime"] == re.sub(r" --sensor-lag \d", "", ref["args"]).split(), nid
        # the lockstep graph's outputs, per tick (its multi-tick ones are lockstep-only)
        per_tick = [o if rows_output(o) is None else rows_output(o)[0] for o in ref["outputs"] if o != "desired_rows"]
        assert [o for o in node["outputs"]] == per_tick, nid
        assert set(node["inputs"]) == set(ref["inputs"]) | ({"sensors"} if nid == "input_filter" else set()), nid
        for port, spec in node["inputs"].items():
            assert spec["queue_size"] == 10 and spec["queue_policy"] == "drop_oldest", (nid, port)
        assert node["env"]["CONTACTFLOW_RT_PRIORITY"] == graphs.RT_PRIORITY[nid]
    assert rt["input_filter"]["inputs"]["sensors"]["source"] == "mujoco_driver/sensors"  # its clock
    assert rt["seiko_controller"]["inputs"]["desired"]["source"] == "seiko_retargeting/desired"
    prio = {nid: rt[nid]["env"]["CONTACTFLOW_RT_PRIORITY"] for nid in stages}
    assert max(prio, key=prio.get) == "mujoco_driver" and prio["seiko_controller"] == sorted(prio.values())[-2]
    assert set(rt["mujoco_driver"]["env"]) == {"CONTACTFLOW_RT_PRIORITY", "CONTACTFLOW_RT_DAEMON"}
    assert rt["mujoco_driver"]["env"]["CONTACTFLOW_RT_DAEMON"] > max(prio.values())
    assert rt["recorder"]["inputs"] == base["recorder"]["inputs"]
    # the recorder below the critical path (driver, Controller), above the planning stages
    assert rt["recorder"]["env"] == {"CONTACTFLOW_RT_PRIORITY": graphs.RT_RECORDER_PRIORITY}
    assert max(p for n, p in prio.items() if n not in ("mujoco_driver", "seiko_controller")) < graphs.RT_RECORDER_PRIORITY < prio["seiko_controller"]
    assert "--name seiko_talos_realtime --dataflow seiko_talos_realtime.yml" in rt["recorder"]["args"]


def test_realtime_pieces_refuse_the_stages_without_realtime_settings():
    for kw in ({"admittance": "left_hand"}, {"wrench_filter": 0}, {"desired_rows": True}):
        with pytest.raises(ValueError, match="realtime"):
            graphs.seiko_stages(realtime=True, **kw)
    with pytest.raises(ValueError, match="scenario"):
        graphs.operator("dynamic", realtime=True)


def test_the_dora_module_is_gone_and_nothing_refers_to_it():
    assert not (ROOT / "dataflows" / "modules" / "seiko.yml").exists()
    for p in (ROOT / "dataflows").glob("*.yml"):
        assert "modules/seiko.yml" not in p.read_text(), p.name


def test_an_unknown_graph_is_refused_naming_the_known_ones():
    with pytest.raises(KeyError, match="seiko_talos"):
        graphs.render("seiko_tales")


def test_the_realtime_planner_graph_puts_the_controller_alone_on_the_critical_path():
    """seiko_talos_realtime_planner.yml: the driver and the Controller as in seiko_talos_realtime.yml,
    the input filter and the Retargeting in one planner process (seiko_stack --no-controller) below the
    Controller's priority, clocked by the newest sensors; the operator ahead of the driver on its
    batched log (as in seiko_talos.yml); the recorder names the planner's streams as the split graph's."""
    rt, split = _nodes("seiko_talos_realtime_planner"), _nodes("seiko_talos_realtime")
    assert set(rt) == {"mujoco_driver", "operator", "seiko_stack", "seiko_controller", "recorder"}
    assert rt["mujoco_driver"] == split["mujoco_driver"]
    assert rt["seiko_controller"]["args"] == split["seiko_controller"]["args"]
    assert rt["seiko_controller"]["inputs"]["desired"]["source"] == "seiko_stack/desired"
    assert rt["seiko_controller"]["inputs"]["sensors"] == split["seiko_controller"]["inputs"]["sensors"]
    planner = rt["seiko_stack"]
    assert set(planner["args"].split()) >= {"--realtime", "--no-controller"} and "--lag 2" in planner["args"]
    assert planner["outputs"] == ["targets", "desired", "log"]
    assert {p: i["source"] for p, i in planner["inputs"].items()} == {"sensors": "mujoco_driver/sensors",
                                                                       "command": "operator/command"}
    for nid in ("seiko_stack", "seiko_controller"):
        for port, spec in rt[nid]["inputs"].items():
            assert spec["queue_size"] == 10 and spec["queue_policy"] == "drop_oldest", (nid, port)
    prio = {nid: rt[nid]["env"]["CONTACTFLOW_RT_PRIORITY"] for nid in ("mujoco_driver", "seiko_controller", "seiko_stack")}
    assert prio["mujoco_driver"] > prio["seiko_controller"] > prio["seiko_stack"]
    # ahead mode, clocked by the driver's log, with its SCHED_FIFO priority
    assert {k: v for k, v in rt["operator"].items() if k != "env"} == {
        k: v for k, v in _nodes("seiko_talos")["operator"].items() if k != "env"}
    assert rt["operator"]["env"] == {"CONTACTFLOW_RT_PRIORITY": graphs.RT_PRIORITY["operator"]}
    assert rt["operator"]["inputs"]["tick"]["source"] == "mujoco_driver/log"
    args = " ".join(rt["recorder"]["args"].split())
    for old, new in graphs.PLANNER_RENAMES.items():
        assert f"--rename {old}={new}" in args
    assert "seiko_stack/command" not in args
    assert rt["recorder"]["env"] == {"CONTACTFLOW_RT_PRIORITY": graphs.RT_RECORDER_PRIORITY}

@pytest.mark.parametrize("name, control", [
    ("seiko_talos", {"mujoco_driver", "seiko_controller"}),
    ("seiko_talos_view", {"mujoco_driver", "seiko_controller"}),
    ("seiko_talos_wrench_filter", {"mujoco_driver", "seiko_controller", "wrench_filter"}),  # --wrench-lag 0
    ("seiko_talos_wrench_filter_lag1", {"mujoco_driver", "seiko_controller"}),  # beside the Controller's QP
])
def test_lockstep_graphs_put_the_per_tick_round_trip_on_one_cpu(name, control):
    """The nodes of the per-tick round trip share the control CPU; every other node and, through the
    driver, the dora daemon take the others (nodes/_runtime.py apply_scheduling)."""
    nodes = _nodes(name)
    roles = {nid: n.get("env", {}).get("CONTACTFLOW_CPU_ROLE") for nid, n in nodes.items()}
    assert {nid for nid, r in roles.items() if r == "control"} == control, roles
    assert all(r == "support" for nid, r in roles.items() if nid not in control), roles
    assert nodes["mujoco_driver"]["env"]["CONTACTFLOW_DAEMON_CPU_ROLE"] == "support"
