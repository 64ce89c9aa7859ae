"""Static wiring check of the shipped dataflows and the generated node catalogue."""

from pathlib import Path

import pytest
import yaml

from contactflow.contracts.catalogue import render_catalogue
from contactflow.cli import main
from contactflow.errors import ConfigError
from contactflow.contracts.wiring import check_dataflow, check_descriptor

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted((ROOT / "dataflows").glob("*.yml"))


def test_there_are_shipped_dataflows():
    names = {p.name for p in SHIPPED}
    assert {"seiko_talos.yml", "seiko_talos_replay.yml", "seiko_talos_sim.yml", "seiko_controller_replay.yml"} <= names


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_dataflow_matches_the_contracts(path):
    """Modular dataflows (dora modules) are expanded with `dora expand` first."""
    assert check_dataflow(path) == []


def _flow():
    return yaml.safe_load((ROOT / "dataflows" / "seiko_talos.yml").read_text())


def _node(flow, nid):
    return next(n for n in flow["nodes"] if n["id"] == nid)


def test_miswired_dataflow_fails_naming_node_port_and_schema(tmp_path):
    flow = _flow()
    _node(flow, "seiko_controller")["inputs"]["sensors"] = {"source": "operator/command", "queue_size": 100}
    df = tmp_path / "miswired.yml"
    df.write_text(yaml.safe_dump(flow))
    problems = check_dataflow(df)
    assert len(problems) == 1
    p = problems[0]
    assert (p.node, p.port) == ("seiko_controller", "sensors")
    text = str(p)
    assert "operator/command" in text and "'operator_command'" in text
    assert "expected contract 'sensors': float64[" in text and "wrench.left_foot[6]" in text
    assert main(["check", str(df)]) == 1


def test_missing_input_undeclared_output_unknown_port_and_source():
    flow = _flow()
    del _node(flow, "seiko_controller")["inputs"]["desired"]
    _node(flow, "seiko_controller")["outputs"] = ["command"]
    _node(flow, "seiko_controller")["inputs"]["sensor"] = "mujoco_driver/sensors"  # typo
    _node(flow, "operator")["inputs"]["tick"] = "mujoco_drivr/sensors"
    _node(flow, "mujoco_driver")["inputs"]["command"] = "dora/timer/millis/2"
    msgs = {(p.node, p.port): p.message for p in check_descriptor(flow)}
    assert "input not wired; expected contract 'desired'" in msgs[("seiko_controller", "desired")]
    assert "not declared in 'outputs'" in msgs[("seiko_controller", "state")]
    assert "has no input 'sensor'" in msgs[("seiko_controller", "sensor")]
    assert "no node 'mujoco_drivr'" in msgs[("operator", "tick")]
    assert "expected contract 'joint_command'" in msgs[("mujoco_driver", "command")]
    # without its `log` output the controller's state would reach nobody: the recorder's input of
    # the undeclared log is reported too
    assert "declares no output 'log'" in msgs[("recorder", "seiko_controller")]


def test_replay_outputs_take_the_recorded_contracts():
    flow = yaml.safe_load((ROOT / "dataflows" / "seiko_controller_replay.yml").read_text())
    _node(flow, "seiko_retargeting")["args"] = "--recording latest --streams mujoco_driver.sensors=desired"
    msgs = {(p.node, p.port): p.message for p in check_descriptor(flow)}
    assert "carries contract 'sensors'" in msgs[("seiko_controller", "desired")]


def test_not_a_dataflow_is_refused(tmp_path):
    bad = tmp_path / "x.yml"
    bad.write_text("hello: [1, 2")
    with pytest.raises(ConfigError, match=r"x.yml: not valid YAML \(line 2, column 1\): did not find expected ',' or '\]'"):
        check_dataflow(bad)
    with pytest.raises(ConfigError, match="y.yml: file not found"):
        check_dataflow(tmp_path / "y.yml")
    bad.write_text("foo: 1\n")
    with pytest.raises(ConfigError, match="no 'nodes'"):
        check_dataflow(bad)


def test_node_catalogue_is_up_to_date():
    committed = (ROOT / "docs" / "nodes.md").read_text()
    assert committed == render_catalogue(), "docs/nodes.md is stale: run python scripts/gen_node_catalogue.py"
    for kind in ("mujoco_driver", "seiko_controller", "replay", "recorder"):
        assert f"## `{kind}`" in committed
    assert "--streams" in committed and "## Contract `sensors`" in committed


# The SEIKO graph variants (payload, live, view...) are rendered from one description:
# tests/test_graph_sources.py checks that they differ from seiko_talos.yml only where intended.


def test_the_catalogue_shows_the_value_of_a_default_taken_from_a_package_constant(tmp_path):
    """A node default written as a name (``UnitreeDriverConfig.fall_tilt_rad``) shows its value beside it."""
    from contactflow.contracts.catalogue import NODES_DIR, node_parameters
    from contactflow.hardware.unitree import UnitreeDriverConfig

    rows = {flag: default for flag, default, _ in node_parameters(NODES_DIR / "unitree_driver.py")}
    assert rows["--fall-tilt-rad"] == f"{UnitreeDriverConfig.fall_tilt_rad!r} (UnitreeDriverConfig.fall_tilt_rad)"
    node = tmp_path / "a_node.py"
    node.write_text('p.add_argument("--out", default=str(default_recordings_dir()))\n')
    rows = {flag: default for flag, default, _ in node_parameters(node)}
    assert rows["--out"] == "str(default_recordings_dir())"  # a call stays as written (its value is per machine)


def test_a_node_without_robot_is_checked_with_the_robot_it_runs(tmp_path):
    """lac_expert runs the G1 without --robot, lac_policy the robot its --spec names: `check` uses those
    (the node's declared default, contracts/ports.py), not Talos."""
    root = Path(__file__).resolve().parents[1] / "dataflows"
    for graph, node in (("lac_g1_teleop.yml", "lac_expert"), ("lac_g1_policy.yml", "lac_policy")):
        flow = yaml.safe_load((root / graph).read_text())
        n = next(x for x in flow["nodes"] if x["id"] == node)
        assert "--robot g1" in n["args"]
        n["args"] = n["args"].replace("--robot g1", "").strip()
        df = tmp_path / graph
        df.write_text(yaml.safe_dump(flow))
        assert check_dataflow(df) == [], graph
        n["args"] = (n["args"] + " --robot talos").strip()
        df.write_text(yaml.safe_dump(flow))
        assert check_dataflow(df), graph  # the wrong robot still fails


def test_local_inputs_are_checked():
    """CONTACTFLOW_LOCAL_INPUTS (nodes/_local.py): the node's own inputs, a lockstep node, not a real-time one."""
    flow = _flow()
    assert _node(flow, "seiko_controller")["env"]["CONTACTFLOW_LOCAL_INPUTS"] == "sensors desired"
    assert check_descriptor(flow) == []
    _node(flow, "seiko_controller")["env"]["CONTACTFLOW_LOCAL_INPUTS"] = "sensors desird"
    _node(flow, "recorder")["env"]["CONTACTFLOW_LOCAL_INPUTS"] = "mujoco_driver"
    _node(flow, "seiko_retargeting")["args"] += " --realtime"
    msgs = {(p.node, p.port): p.message for p in check_descriptor(flow)}
    assert ("'desird' is not an input of this node; its inputs: ['desired', 'sensors'] (did you mean 'desired'?)"
            in msgs[("seiko_controller", "CONTACTFLOW_LOCAL_INPUTS")])
    assert "recorder does not read local inputs" in msgs[("recorder", "CONTACTFLOW_LOCAL_INPUTS")]
    assert "--realtime node takes every input through dora" in msgs[("seiko_retargeting", "CONTACTFLOW_LOCAL_INPUTS")]
    # another reader of the driver's sensors, not local: the declaration would be idle
    flow = _flow()
    _node(flow, "recorder")["inputs"]["sensors"] = {"source": "mujoco_driver/sensors", "queue_size": 100}
    msgs = {(p.node, p.port): p.message for p in check_descriptor(flow)}
    assert ("'sensors': its source mujoco_driver/sensors is also read by recorder/sensors, not declared local there"
            in msgs[("seiko_controller", "CONTACTFLOW_LOCAL_INPUTS")])


def test_local_inputs_declared_for_the_whole_graph_are_refused(monkeypatch):
    """CONTACTFLOW_LOCAL_INPUTS in the graph's root env: or exported where dora runs would reach every node: one
    problem naming where it was set."""
    monkeypatch.delenv("CONTACTFLOW_LOCAL_INPUTS", raising=False)
    flow = _flow()
    assert check_descriptor(flow) == []
    flow["env"] = {"CONTACTFLOW_LOCAL_INPUTS": "sensors"}
    msgs = {(p.node, p.port): p.message for p in check_descriptor(flow)}
    assert list(msgs) == [("-", "CONTACTFLOW_LOCAL_INPUTS")]
    assert "set in the graph's env: every node without its own would read it" in msgs[("-", "CONTACTFLOW_LOCAL_INPUTS")]
    assert str(check_descriptor(flow)[0]).startswith("the graph: CONTACTFLOW_LOCAL_INPUTS set in the graph's env: ")
    del flow["env"]
    monkeypatch.setenv("CONTACTFLOW_LOCAL_INPUTS", "sensors")
    (problem,) = check_descriptor(flow)
    assert problem.node == "-" and "set in this environment (`dora run` passes it to every node)" in problem.message
