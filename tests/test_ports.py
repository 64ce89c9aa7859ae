"""The port table (contactflow/contracts/ports.py): every node declared once, the nodes build their ports from it
and refuse any other, and `contactflow check` covers every node of every shipped graph."""

import ast
from pathlib import Path

import numpy as np
import pytest
import yaml

from contactflow import graphs
from contactflow.errors import ContractError
from contactflow.contracts.messages import port_specs
from contactflow.nodes._runtime import Lockstep, Sender, lockstep_for, sender_for
from contactflow.contracts.ports import NODES, lockstep_inputs, node_ports, sender_outputs
from contactflow.robot import load_robot
from contactflow.contracts.wiring import check_dataflow, check_descriptor, graph_node_kind

ROOT = Path(__file__).resolve().parent.parent
NODE_FILES = sorted(p for p in (ROOT / "nodes").glob("*.py") if not p.name.startswith("_"))
SHIPPED = sorted((ROOT / "dataflows").glob("*.yml"))
#: kinds whose ports are (partly) named by the graph or the arguments rather than by the table
FREE_FORM = {"recorder", "replay"}


@pytest.fixture(scope="module")
def specs():
    return port_specs(load_robot("talos"))


def test_every_node_has_one_declaration():
    assert {p.stem for p in NODE_FILES} == set(NODES)
    assert {k for k, d in NODES.items() if d.free_form} == FREE_FORM
    assert NODES["prime_estimator"].inputs["sensors"].contract == "sensors"
    hb = NODES["lac_expert"].inputs["heartbeat"]
    assert (hb.kind, hb.optional, hb.contract) == ("timer", True, None)
    with pytest.raises(ContractError, match="no port declaration for node kind 'seiko_controllr'"):
        node_ports("seiko_controllr")


# ---------------------------------------------------------------- the nodes read and send only declared ports
def _literal(node):
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _strings(node):
    """String literals of a constant, a tuple/list/set of constants, or `(...) if c else (...)`."""
    if isinstance(node, ast.IfExp):
        return _strings(node.body) + _strings(node.orelse)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [v for e in node.elts for v in _strings(e)]
    v = _literal(node)
    return [v] if v is not None else []


def port_uses(source: str, kind: str) -> list[str]:
    """Problems in a node's source: a port it sends, reads or builds that its declaration lacks, a
    Lockstep/Sender built by hand, or helpers called with another node's kind."""
    decl = NODES[kind]
    problems = []

    def need(port, direction, where):
        table = decl.inputs if direction == "input" else decl.outputs
        if port not in table and not (direction == "input" and decl.any_inputs):
            problems.append(f"line {where.lineno}: {direction} {port!r} is not declared for {kind}")

    for n in ast.walk(ast.parse(source)):
        if isinstance(n, ast.Call):
            name = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
            if name in ("Lockstep", "Sender"):
                problems.append(f"line {n.lineno}: {name}(...) built by hand (use lockstep_for / sender_for)")
            if name in ("send", "send_rows", "repeat") and n.args and _literal(n.args[0]) is not None:
                need(_literal(n.args[0]), "output", n)
            if name in ("lockstep_for", "sender_for", "stream_sender", "input_specs", "if_wired"):
                kinds = [_literal(a) for a in n.args if _literal(a) is not None]
                if kinds and kinds[0] != kind:
                    problems.append(f"line {n.lineno}: {name} called with kind {kinds[0]!r} in the {kind} node")
                for kw in n.keywords:
                    direction = "output" if name == "sender_for" else "input"
                    if kw.arg == "offsets" and isinstance(kw.value, ast.Dict):
                        for k in kw.value.keys:
                            need(_literal(k), "input", n)
                    elif kw.arg in ("optional", "only"):
                        for p in _strings(kw.value):
                            need(p, direction, n)
            if name == "get" and isinstance(n.func, ast.Attribute) and n.args:
                owner = n.func.value  # tick.inputs.get("x"), tick.errors.get("x"), tick.raw.get("x")
                if isinstance(owner, ast.Attribute) and owner.attr in ("inputs", "errors", "raw", "seqs") \
                        and getattr(owner.value, "id", "") == "tick":
                    need(_literal(n.args[0]), "input", n)
        elif isinstance(n, ast.Subscript) and _literal(n.slice) is not None:
            owner = n.value
            if isinstance(owner, ast.Attribute) and owner.attr in ("inputs", "raw", "seqs", "buffers") \
                    and getattr(owner.value, "id", "") in ("tick", "lock", "tail"):
                need(_literal(n.slice), "input", n)
            if isinstance(owner, ast.Call) and getattr(owner.func, "id", "") == "input_specs":
                need(_literal(n.slice), "input", n)
        elif isinstance(n, ast.Compare) and len(n.ops) == 1:
            left, right = n.left, n.comparators[0]
            is_id = (isinstance(left, ast.Subscript) and _literal(left.slice) == "id") or getattr(left, "id", "") == "iid"
            if is_id and isinstance(n.ops[0], (ast.Eq, ast.NotEq, ast.In, ast.NotIn)):
                for p in _strings(right):
                    need(p, "input", n)
        elif isinstance(n, ast.For):  # for p in ("command", "wrench") feeding input_specs(...)[p]
            if isinstance(n.iter, (ast.Tuple, ast.List)) and "input_specs(" in ast.unparse(n):
                for p in _strings(n.iter):
                    need(p, "input", n)
        elif isinstance(n, ast.comprehension):
            if isinstance(n.iter, (ast.Tuple, ast.List)):
                for p in _strings(n.iter):
                    need(p, "input", n)
    return problems


@pytest.mark.parametrize("path", NODE_FILES, ids=lambda p: p.stem)
def test_every_node_sends_and_reads_only_declared_ports(path):
    assert port_uses(path.read_text(), path.stem) == []


@pytest.mark.parametrize("stray, found", [
    ('sender.send("bogus", out, seq=tick.k, t=tick.t)', "output 'bogus'"),
    ('x = tick.inputs["bogus"]', "input 'bogus'"),
    ('x = tick.inputs.get("bogus")', "input 'bogus'"),
    ('lock = lockstep_for(node, "seiko_controller", specs, offsets={"sensorz": 1})', "input 'sensorz'"),
    ('sender = sender_for(node, "seiko_controller", specs, optional=("flex",))', "output 'flex'"),
    ('lock = lockstep_for(node, "input_filter", specs)', "kind 'input_filter'"),
    ('lock = Lockstep(node, {"sensors": (specs["sensors"], 0)})', "built by hand"),
    ('ok = ev["id"] == "bogus"', "input 'bogus'"),
])
def test_a_stray_port_in_a_node_fails_the_check(stray, found):
    """The scan above is not vacuous: one stray line in the Controller node is reported."""
    src = (ROOT / "nodes" / "seiko_controller.py").read_text()
    mutated = src.replace("    for tick in lock:\n", f"    {stray}\n    for tick in lock:\n", 1)
    assert mutated != src
    problems = port_uses(mutated, "seiko_controller")
    assert len(problems) == 1 and found in problems[0], problems


# ---------------------------------------------------------------- the runtime refuses undeclared ports
class FakeNode:
    def __init__(self, inputs=None, outputs=None):
        self.cfg = {"inputs": inputs or {}, "outputs": outputs or []}
        self.sent = []

    def node_config(self):
        return self.cfg

    def send_output(self, output, value, metadata):
        self.sent.append((output, value.to_numpy(), dict(metadata)))


def test_sender_refuses_an_undeclared_output(specs):
    node = FakeNode(outputs=["command", "state"])
    s = sender_for(node, "seiko_controller", specs)
    assert list(s.specs) == ["command", "state"]  # flex_rate is optional: only when asked for
    with pytest.raises(ContractError, match="node 'seiko_controller': output 'flex_rate' is not among its outputs"):
        s.send("flex_rate", np.zeros(specs["flex_wrench_rate"].size), seq=0, t=0.0)
    with pytest.raises(ContractError, match="output 'bogus'"):
        s.repeat("bogus")
    assert node.sent == []
    assert list(sender_for(node, "seiko_controller", specs, optional=("flex_rate",)).specs)[-1] == "flex_rate"
    with pytest.raises(ContractError, match="node 'operator': output 'twist' is not in its port declaration"):
        Sender(node, {"twist": specs["admittance_command"]}, node_kind="operator")
    with pytest.raises(ContractError, match="output 'command' is not optional"):
        sender_outputs("seiko_controller", specs, optional=("command",))
    with pytest.raises(ContractError, match="named by its --streams"):
        sender_outputs("replay", specs)


def test_lockstep_refuses_an_undeclared_input(specs):
    node = FakeNode()
    with pytest.raises(ContractError, match="node 'seiko_controller': input 'sensor' is not in its port declaration"):
        lockstep_for(node, "seiko_controller", specs, offsets={"sensor": 1})
    with pytest.raises(ContractError, match="node 'operator': input 'sensors' is not in its port declaration"):
        Lockstep(node, {"sensors": (specs["sensors"], 0)}, node_kind="operator")
    with pytest.raises(ContractError, match="'heartbeat' is a timer input, not a lockstep message"):
        Lockstep(node, {"heartbeat": (specs["sensors"], 0)}, node_kind="lac_expert")
    with pytest.raises(ContractError, match="heartbeat input 'command' is not a timer input"):
        Lockstep(node, {"sensors": (specs["sensors"], 0)}, node_kind="lac_expert", heartbeat=("command", print))
    with pytest.raises(ContractError, match="input 'desired' is not an optional message input"):
        lockstep_inputs("seiko_controller", specs, optional=("desired",))


def test_optional_inputs_follow_the_wiring_and_the_declared_order(specs):
    """Order matters: the first offset-0 input is the real-time clock, the last gives the tick time."""
    ret = "seiko_retargeting"
    assert list(lockstep_for(FakeNode({"targets": "input_filter/targets"}), ret, specs).specs) == ["targets"]
    wired = FakeNode({"targets": "input_filter/targets", "command": "operator/command"})
    assert list(lockstep_for(wired, ret, specs).specs) == ["targets", "command"]
    lock = lockstep_for(FakeNode(), "seiko_controller", specs, offsets={"sensors": 1, "desired": 2, "wrench": 0},
                        optional=("wrench",))
    assert lock.offsets == {"sensors": 1, "desired": 2, "wrench": 0}
    assert lock.specs["wrench"] is specs["filtered_wrench"] and lock.node_kind == "seiko_controller"
    assert list(lockstep_for(FakeNode(), "seiko_stack", specs, only=("sensors",)).specs) == ["sensors"]
    assert list(lockstep_for(FakeNode({"heartbeat": "dora/timer/millis/5"}), "lac_expert", specs).specs) == \
        ["sensors", "command"]  # the timer is the heartbeat, not a tick input


# ---------------------------------------------------------------- contactflow check covers every node
@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_check_covers_every_node_of_every_shipped_graph(path):
    flow = yaml.safe_load(path.read_text())
    kinds = {n["id"]: graph_node_kind(n) for n in flow["nodes"]}
    assert None not in kinds.values(), f"nodes not checked: {[i for i, k in kinds.items() if k is None]}"
    assert check_dataflow(path, strict=True) == []


def test_contactflow_check_strict_passes_on_every_shipped_graph(capsys):
    from contactflow.cli import main

    assert main(["check", "--strict", *map(str, SHIPPED)]) == 0
    assert capsys.readouterr().out.count("wiring OK") == len(SHIPPED)


def test_a_replay_input_other_than_its_ack_is_reported():
    flow = yaml.safe_load((ROOT / "dataflows" / "seiko_controller_replay.yml").read_text())
    rep = next(n for n in flow["nodes"] if graph_node_kind(n) == "replay" and n.get("inputs"))
    rep["inputs"]["acks"] = rep["inputs"].pop("ack")
    (p,) = [p for p in check_descriptor(flow) if p.port == "acks"]  # (its CONTACTFLOW_LOCAL_INPUTS: ack is reported too)
    assert p.port == "acks" and "replay has no input 'acks'" in p.message


def test_check_strict_reports_a_node_it_does_not_know():
    flow = yaml.safe_load((ROOT / "dataflows" / "seiko_talos.yml").read_text())
    flow["nodes"].append({"id": "probe", "path": "../tests/fixtures/probe.py", "inputs": {"x": "operator/command"}})
    assert check_descriptor(flow) == []
    (p,) = check_descriptor(flow, strict=True)
    assert p.node == "probe" and "not a contactflow node" in p.message


def _nodes(flow):
    return {n["id"]: n for n in flow["nodes"]}


def test_a_miswired_optional_input_is_caught():
    flow = yaml.safe_load((ROOT / "dataflows" / "seiko_talos_multicontact.yml").read_text())
    n = _nodes(flow)
    assert n["seiko_retargeting"]["inputs"]["command"]["source"] == "operator/command"
    n["seiko_retargeting"]["inputs"]["command"]["source"] = "admittance/twist"  # optional, wrong contract
    n["input_filter"]["inputs"]["admittance"]["source"] = "operator/command"  # optional, wrong contract
    msgs = {(p.node, p.port): p.message for p in check_descriptor(flow)}
    assert set(msgs) == {("seiko_retargeting", "command"), ("input_filter", "admittance")}
    assert "carries contract 'admittance_command'" in msgs[("seiko_retargeting", "command")]
    assert "expected contract 'operator_command'" in msgs[("seiko_retargeting", "command")]
    assert "expected contract 'admittance_command'" in msgs[("input_filter", "admittance")]


def test_a_miswired_optional_wrench_and_timer_are_caught():
    flow = yaml.safe_load((ROOT / "dataflows" / "seiko_talos_wrench_filter.yml").read_text())
    _nodes(flow)["seiko_controller"]["inputs"]["wrench"] = {"source": "mujoco_driver/sensors"}
    (p,) = check_descriptor(flow)
    assert (p.node, p.port) == ("seiko_controller", "wrench") and "expected contract 'filtered_wrench'" in p.message
    flow = yaml.safe_load((ROOT / "dataflows" / "lac_g1_hw.yml").read_text())
    lac = _nodes(flow)["lac_expert"]["inputs"]
    hb = lac["heartbeat"]
    assert (hb if isinstance(hb, str) else hb["source"]).startswith("dora/timer/")
    lac["heartbeat"] = "teleop/command"
    (p,) = check_descriptor(flow)
    assert (p.node, p.port) == ("lac_expert", "heartbeat") and "expected a dora timer" in p.message


def test_a_live_node_is_checked_with_the_graph_robot():
    """`path: dynamic` nodes take the kind of their id (they used to be skipped as unknown)."""
    flow = yaml.safe_load((ROOT / "dataflows" / "lac_g1_teleop_live.yml").read_text())
    assert graph_node_kind(_nodes(flow)["teleop"]) == "teleop"
    _nodes(flow)["teleop"]["inputs"]["tick"] = {"source": "wrench_injector/wrench"}
    (p,) = check_descriptor(flow)
    assert (p.node, p.port) == ("teleop", "tick") and "expected contract 'sensors': float64[105]" in p.message


def test_an_optional_input_dropped_from_a_generated_graph_is_caught(tmp_path):
    """The wiring check accepts a graph without the Retargeting's optional `command` (a valid graph);
    the graph source says it is wired, so `contactflow graphs --check` reports the generated file."""
    from contactflow.cli import main

    assert main(["graphs", "--write", "--dir", str(tmp_path)]) == 0
    path = tmp_path / "seiko_talos.yml"
    flow = yaml.safe_load(path.read_text())
    del _nodes(flow)["seiko_retargeting"]["inputs"]["command"]
    path.write_text(yaml.safe_dump(flow, sort_keys=False))
    assert check_dataflow(path, strict=True) == []
    assert graphs.check_graphs(tmp_path) == ["seiko_talos"]
