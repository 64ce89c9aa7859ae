"""``contactflow check`` parses each contactflow node's ``args:`` with the node's own argument parser
(contactflow.contracts.wiring.check_node_arguments, contactflow.nodes._runtime.check_node_args), loads the
scenario files the nodes play (check_scenario_files) and names a node whose robot does not load, so a misspelled
flag, a bad value, a missing scenario or a robot typo is reported before ``dora run`` starts anything."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from contactflow import cli
from contactflow.contracts.wiring import check_dataflow, check_node_arguments
from contactflow.nodes import _runtime
from contactflow.nodes._runtime import NodeArgumentParser, check_node_args, is_node_kind
from contactflow.errors import ConfigError
from contactflow.paths import ROBOT_PATH_ENV

ROOT = Path(__file__).resolve().parent.parent
SEIKO = ROOT / "dataflows" / "seiko_talos.yml"


def _edited(tmp_path: Path, *edits: tuple[str, str]) -> Path:
    text = SEIKO.read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    out = tmp_path / "graph.yml"
    out.write_text(text)
    return out


def test_check_reports_bad_node_arguments_with_the_nodes_own_message(tmp_path, capsys):
    graph = _edited(tmp_path, ("--robot talos --lag 2 --sensor-lag 1", "--robot talos --lag x --sensor-lag 1"),
                    ("contactflow-input-filter\n    args: --robot talos --lag 2", "contactflow-input-filter\n    args: --robot talos --lags 2"),
                    ("--name seiko_talos", "--name seiko_talos --summary nope"))
    got = {(p.node, p.port): p.message for p in check_dataflow(graph)}
    assert got == {
        ("seiko_controller", "args"): "argument --lag: expected an integer >= 0, got 'x'",
        ("input_filter", "args"): "unrecognized arguments: --lags 2 (did you mean '--lag'?)",
        ("recorder", "args"): got[("recorder", "args")],
    }
    assert got[("recorder", "args")].startswith("argument --summary: invalid choice: 'nope'")
    assert cli.main(["check", str(graph)]) == 1
    out = capsys.readouterr().out
    assert "  - node 'seiko_controller' args: argument --lag: expected an integer >= 0, got 'x'" in out


def test_a_single_value_option_given_twice_is_refused(tmp_path, capsys):
    """argparse keeps the last of a repeated single-value option silently (``--lag 2 --lag 3`` ran with 3): a node's
    parser and the commands' refuse it, naming the option and both values; an option that takes several values
    (append) and a flag given once are unchanged."""
    graph = _edited(tmp_path, ("--robot talos --lag 2 --sensor-lag 1", "--robot talos --lag 2 --sensor-lag 1 --lag=3"))
    got = {(p.node, p.port): p.message for p in check_dataflow(graph)}
    assert got == {("seiko_controller", "args"): "argument --lag: given twice (2, 3): it takes one value"}
    with pytest.raises(SystemExit) as exc:
        cli.main(["lac", "eval", "--suite", "quick", "--suite", "graph"])
    assert exc.value.code == 2
    assert "argument --suite: given twice (quick, graph): it takes one value" in capsys.readouterr().err
    p = _runtime.base_parser("d")
    p.add_argument("--lag", type=int, default=2)
    p.add_argument("--tag", action="append")
    ns = p.parse_args(["--lag", "4", "--tag", "a", "--tag", "b"])
    assert ns.lag == 4 and ns.tag == ["a", "b"]
    assert p.parse_args([]).lag == 2 and p.parse_args(["--lag", "5"]).lag == 5  # each parse starts afresh


def test_a_node_option_is_given_in_full(tmp_path, capsys):
    """A node refuses an abbreviated option (argparse took ``--sensor-l 1`` as ``--sensor-lag 1``; the check reads a
    node's options by their full names), naming the option it abbreviates; the commands keep argparse's abbreviations."""
    graph = _edited(tmp_path, ("--robot talos --lag 2 --sensor-lag 1", "--robot talos --lag 2 --sensor-l 1"))
    got = {(p.node, p.port): p.message for p in check_dataflow(graph)}
    assert got == {("seiko_controller", "args"): "unrecognized arguments: --sensor-l 1 (--sensor-l abbreviates "
                                                 "--sensor-lag: give it in full)"}
    p = _runtime.base_parser("d")
    p.add_argument("--scenario")
    p.add_argument("--scenario-from-recording")
    with pytest.raises(SystemExit):
        p.parse_args(["--scenario-from", "latest", "--scenrio", "x"])
    err = capsys.readouterr().err  # the node's own refusal: the abbreviation and the misspelling, each named
    assert ("unrecognized arguments: --scenario-from latest --scenrio x (--scenario-from abbreviates "
            "--scenario-from-recording: give it in full) (did you mean '--scenario'?)") in err, err
    assert p.parse_args(["--scenario-from-recording", "latest"]).scenario_from_recording == "latest"
    assert cli.build_parser().parse_args(["lac", "eval", "--suit", "quick"]).suite == "quick"


def test_the_check_names_an_executable_dora_run_would_not_find(monkeypatch, capsys):
    """Without the virtual environment activated, `dora run` does not find contactflow-<node> (dora's "Could not find
    source path" and a backtrace): the check says so per node, with what to do."""
    assert cli.main(["check", str(SEIKO)]) == 0  # the test's environment has the executables on PATH
    capsys.readouterr()
    monkeypatch.setenv("PATH", "/nonexistent")
    assert cli.main(["check", str(SEIKO)]) == 1
    out = capsys.readouterr().out
    problems = [line for line in out.splitlines() if line.startswith("  - ")]
    assert len(problems) == 1, out  # one line for the graph, not one per node
    assert problems[0].startswith("  - node 'mujoco_driver': 6 executable(s) not on PATH, where `dora run` looks for "
                                  "them ('contactflow-mujoco-driver', 'contactflow-operator', ")
    assert problems[0].endswith(": activate the environment contactflow is installed in (e.g. `. .venv/bin/activate`), "
                                "or start the graph with `contactflow run`, which puts its executables first on PATH "
                                "(dora's error: \"Could not find source path\")"), problems[0]


def test_a_key_given_twice_in_a_graph_is_refused_as_dora_refuses_it(tmp_path, capsys):
    """dora's parser refuses a node with a field given twice ("duplicate field `args`"); PyYAML keeps the last one
    silently, so the check passed such a graph before: now it fails naming the file and both lines."""
    graph = _edited(tmp_path, ("    args: --robot talos --lag 2 --sensor-lag 1\n",
                               "    args: --robot talos --lag 2 --sensor-lag 1\n    args: --robot talos --lag 3\n"))
    first = next(i for i, line in enumerate(graph.read_text().splitlines(), 1) if "--lag 2 --sensor-lag 1" in line)
    assert cli.main(["check", str(graph)]) == 2
    err = capsys.readouterr().err
    assert f"graph.yml: not valid YAML (line {first + 1}, column 5): key 'args' given twice in one mapping " \
           f"(first at line {first})" in err
    assert check_dataflow(SEIKO) == []  # the shipped graph: each key once


def test_the_check_loads_the_scenario_of_contactflow_scenario_as_the_nodes_do(monkeypatch):
    """$CONTACTFLOW_SCENARIO replaces every scenario player's --scenario in the nodes: the check loads it instead,
    naming the variable (a file found nowhere, with the close name suggested; a file of another robot's format)."""
    monkeypatch.setenv("CONTACTFLOW_SCENARIO", "robots/talos/scenarios/smoke2s.yaml")
    got = {(p.node, p.port): p.message for p in check_dataflow(SEIKO)}
    assert got == {("operator", "$CONTACTFLOW_SCENARIO"): "$CONTACTFLOW_SCENARIO=robots/talos/scenarios/smoke2s.yaml: "
                                                          "file not found (did you mean 'smoke_2s.yaml'?)"}
    monkeypatch.setenv("CONTACTFLOW_SCENARIO", "robots/talos/scenarios/smoke_2s.yaml")
    assert check_dataflow(SEIKO) == []
    monkeypatch.setenv("CONTACTFLOW_SCENARIO", "robots/g1/scenarios/hand_push.yaml")  # a teleop scenario
    got = {(p.node, p.port): p.message for p in check_dataflow(SEIKO)}
    assert list(got) == [("operator", "$CONTACTFLOW_SCENARIO")] and "unknown key(s) 'posture'" in got[list(got)[0]]
    assert got[list(got)[0]].endswith("; the file looks like a teleop scenario of the LAC pipeline (the G1's, "
                                      "robots/g1/scenarios/), not an operator scenario of SEIKO (robots/talos/scenarios/)")
    g1 = ROOT / "dataflows" / "lac_g1_policy.yml"
    assert check_dataflow(g1) == []  # the teleop and the injector load it
    monkeypatch.setenv("CONTACTFLOW_SCENARIO", "robots/talos/scenarios/smoke_2s.yaml")  # a SEIKO scenario: both refuse it
    got = {(p.node, p.port): str(p) for p in check_dataflow(g1)}
    assert set(got) == {("teleop", "$CONTACTFLOW_SCENARIO"), ("wrench_injector", "$CONTACTFLOW_SCENARIO")}
    assert got[("teleop", "$CONTACTFLOW_SCENARIO")].startswith("node 'teleop': ") and "smoke_2s.yaml" in got[("teleop", "$CONTACTFLOW_SCENARIO")]
    assert "the file looks like an operator scenario of SEIKO" in got[("teleop", "$CONTACTFLOW_SCENARIO")]


def test_the_check_leaves_the_process_as_it_was(tmp_path):
    argv, cwd, rpath = list(sys.argv), os.getcwd(), os.environ.get(ROBOT_PATH_ENV)
    (tmp_path / "robots").mkdir()
    msg = check_node_args("seiko_controller", ["--robot", "talos", "--robot-path", str(tmp_path / "robots"), "--lag", "2"],
                          tmp_path)
    assert msg is None
    assert (sys.argv, os.getcwd(), os.environ.get(ROBOT_PATH_ENV)) == (argv, cwd, rpath)
    assert NodeArgumentParser.check_mode is False
    # a required argument missing, a refused choice
    assert check_node_args("lac_policy", ["--robot", "g1"]) == "the following arguments are required: --spec"
    assert "invalid choice: 'zzz'" in check_node_args("fault_injector", ["--fault", "zzz", "--at-s", "1"])
    # one configuration file per node (base_parser's --config: argparse would keep the last silently)
    assert "--config given twice (a.yaml, b.yaml)" in check_node_args(
        "seiko_controller", ["--robot", "talos", "--config", "a.yaml", "--config", "b.yaml"], tmp_path)
    with pytest.raises(ValueError, match="no contactflow node 'my_node'"):
        check_node_args("my_node", [])


def test_other_nodes_are_not_parsed_and_a_node_outside_the_check_still_exits_on_a_bad_argument(tmp_path):
    flow = {"nodes": [{"id": "mine", "path": "my_node.py", "args": "--whatever"},
                      {"id": "live", "path": "dynamic"},
                      {"id": "ctl", "path": "../nodes/seiko_controller.py", "args": "--robot talos --sensor-lag 3"}]}
    (p,) = check_node_arguments(flow, tmp_path)
    assert (p.node, p.port) == ("ctl", "args") and "argument --sensor-lag: invalid choice: 3" in p.message
    parser = NodeArgumentParser()
    parser.add_argument("--lag", type=int)
    with pytest.raises(SystemExit) as exc:  # a running node: argparse's usage line and exit status 2
        parser.parse_args(["--lag", "x"])
    assert exc.value.code == 2
    assert parser.parse_args(["--lag", "3"]).lag == 3


def test_every_node_parses_with_the_checked_parser():
    """A node whose parser escaped NodeArgumentParser (a plain argparse parser, parse_known_args) would exit the
    check or accept anything: every node of the package refuses an unknown flag through it."""
    kinds = sorted(p.stem for p in Path(_runtime.__file__).parent.glob("*.py") if is_node_kind(p.stem))
    assert len(kinds) >= 19 and "seiko_controller" in kinds and not is_node_kind("_runtime")
    for kind in kinds:
        try:
            msg = check_node_args(kind, ["--no-such-flag"])
        except ImportError:  # an optional package not installed here
            continue
        # refused by argparse through the checked parser (a required argument may be named first)
        assert msg is not None and ("--no-such-flag" in msg or "arguments are required" in msg), (kind, msg)


def test_help_in_the_args_is_a_problem_not_an_exit(tmp_path, capsys):
    assert check_node_args("input_filter", ["--robot", "talos", "--help"]) == (
        "-h / --help: the node would print its help and exit instead of running")
    assert capsys.readouterr().out == ""  # nothing printed
    graph = _edited(tmp_path, ("contactflow-input-filter\n    args: --robot talos --lag 2",
                               "contactflow-input-filter\n    args: --robot talos -h"))
    assert cli.main(["check", str(graph), str(SEIKO)]) == 1  # the check goes on to the next graph
    out = capsys.readouterr().out
    assert "node 'input_filter' args: -h / --help" in out and f"{SEIKO}: wiring OK" in out


def test_a_node_that_cannot_be_imported_here_is_not_parsed(tmp_path, monkeypatch):
    import importlib

    real = importlib.import_module

    def no_rerun(name, *a, **k):
        if name == "contactflow.nodes.viewer":
            raise ModuleNotFoundError("No module named 'rerun'", name="rerun")
        return real(name, *a, **k)

    monkeypatch.setattr(importlib, "import_module", no_rerun)
    flow = {"nodes": [{"id": "view", "path": "contactflow-viewer", "args": "--robot talos --every x"},
                      {"id": "drv", "path": "contactflow-mujoco-driver", "args": "--robot talos --bogus"}]}
    assert [(p.node, p.message) for p in check_node_arguments(flow, tmp_path)] == [
        ("drv", "unrecognized arguments: --bogus")]
    with pytest.raises(ModuleNotFoundError):
        check_node_args("viewer", [])
    assert NodeArgumentParser.check_mode is False and sys.argv[0] != "contactflow-viewer"


def test_an_unclosed_quote_in_args_is_one_problem_not_a_traceback(tmp_path):
    graph = _edited(tmp_path, ("--robot talos --lag 2 --sensor-lag 1", "--robot talos --lag 2 --sensor-lag '1"))
    got = [(p.node, p.port, p.message) for p in check_dataflow(graph)]
    assert got == [("seiko_controller", "args", "No closing quotation")]


def test_the_check_reads_contactflow_scenario_where_dora_sets_it(tmp_path, monkeypatch):
    """A graph may set $CONTACTFLOW_SCENARIO in a node's env: or its root env: (dora sets the node's own over the
    graph's over the shell's, $VAR expanded): the check loads the file the node will play (it said "OK" before and
    the node failed at its start)."""
    node_env = ("    env: {CONTACTFLOW_CPU_ROLE: support}\n    finish_grace_secs: 10",
                "    env: {CONTACTFLOW_CPU_ROLE: support, CONTACTFLOW_SCENARIO: smoke2s.yaml}\n    finish_grace_secs: 10")
    got = {(p.node, p.port): p.message for p in check_dataflow(_edited(tmp_path, node_env))}
    assert got == {("operator", "$CONTACTFLOW_SCENARIO"): "$CONTACTFLOW_SCENARIO=smoke2s.yaml: file not found"}
    monkeypatch.setenv("CONTACTFLOW_SCENARIO", "robots/talos/scenarios/smoke_2s.yaml")  # the node's own wins
    assert set(p.port for p in check_dataflow(_edited(tmp_path, node_env))) == {"$CONTACTFLOW_SCENARIO"}
    monkeypatch.setenv("MY_SCENARIOS", str(ROOT / "robots/talos/scenarios"))
    good = (node_env[0], node_env[1].replace("smoke2s.yaml", "$MY_SCENARIOS/smoke_2s.yaml"))
    assert check_dataflow(_edited(tmp_path, good)) == []
    root_env = ("nodes:\n", "env: {CONTACTFLOW_SCENARIO: ../robots/talos/scenarios/smoke2s.yaml}\nnodes:\n")
    got = {(p.node, p.port): p.message for p in check_dataflow(_edited(tmp_path, root_env))}  # the graph's over the shell's
    assert list(got) == [("operator", "$CONTACTFLOW_SCENARIO")] and "did you mean 'smoke_2s.yaml'" in got[list(got)[0]]
    assert check_dataflow(_edited(tmp_path, root_env, good)) == []  # the node's own over the graph's
    monkeypatch.delenv("CONTACTFLOW_SCENARIO")
    default = (node_env[0], node_env[1].replace("smoke2s.yaml", '"${NOT_SET_HERE:-../robots/talos/scenarios/smoke_2s.yaml}"'))
    assert check_dataflow(_edited(tmp_path, default)) == []  # ${VAR:-default}, as dora expands it
    for value, expected in (("$NOT_SET_HERE/smoke_2s.yaml", "$NOT_SET_HERE is not set in this environment (dora refuses the graph)"),
                            ("~", "dora takes a string, number or bool, got None"),
                            ("{__dora_env: HOME}", "dora takes a string, number or bool, got {'__dora_env': 'HOME'}")):
        refused = (node_env[0], node_env[1].replace("smoke2s.yaml", value))
        got = {(p.node, p.port): p.message for p in check_dataflow(_edited(tmp_path, refused))}
        assert got == {("operator", "$CONTACTFLOW_SCENARIO"): f"env: CONTACTFLOW_SCENARIO: {expected}"
                       + ("; set it or write ${NOT_SET_HERE:-DEFAULT}" if "not set" in expected else "")}, got
    # any env: value dora refuses, reported once, and refused by `contactflow run` before dora starts (dora's own error
    # names neither the variable nor the node)
    other = (node_env[0], node_env[1].replace("CONTACTFLOW_SCENARIO: smoke2s.yaml", 'MY_DATA: "${NOT_SET_HERE}/x"'))
    graph = _edited(tmp_path, other)
    assert [str(p) for p in check_dataflow(graph)] == [
        "node 'operator': env: MY_DATA: ${NOT_SET_HERE} is not set in this environment (dora refuses the graph); set it "
        "or write ${NOT_SET_HERE:-DEFAULT}"]
    with pytest.raises(ConfigError, match=r"graph.yml: node 'operator': env: MY_DATA: \$\{NOT_SET_HERE\} is not set"):
        cli.run.run_dataflow(str(graph), [])


def test_the_check_opens_the_recording_and_the_model_a_node_is_given(tmp_path, monkeypatch):
    """A replay node's recording and a policy node's model, named by $CONTACTFLOW_RECORDING / $CONTACTFLOW_POLICY_MODEL
    (or the graph's flags), are opened as the nodes open them: a run not found or of another robot, a model file not
    found, is one problem naming the variable and its value (it said "wiring OK" and the node failed at its start)."""
    import numpy as np

    from contactflow.recording.store import RecordingWriter

    monkeypatch.setenv("CONTACTFLOW_POLICY_MODEL", "out/nope.onnx")
    got = {(p.node, p.port): p.message for p in check_dataflow(ROOT / "dataflows" / "lac_g1_policy.yml")}
    assert list(got) == [("lac_policy", "$CONTACTFLOW_POLICY_MODEL")]
    assert got[("lac_policy", "$CONTACTFLOW_POLICY_MODEL")].startswith(
        "$CONTACTFLOW_POLICY_MODEL=out/nope.onnx: out/nope.onnx: model file not found; looked in: ")
    monkeypatch.delenv("CONTACTFLOW_POLICY_MODEL")
    w = RecordingWriter(tmp_path / "g1_run", {"dataflow": "x.yml", "robot": "g1", "start_time_utc": "2026-12-06T00:00:00+00:00"})
    s = w.stream("mujoco_driver.sensors", 3, {"source": "mujoco_driver/sensors", "contract": "sensors"})
    s.append(0, 0.0, np.zeros(3))
    w.close()
    replay = ROOT / "dataflows" / "seiko_talos_replay.yml"
    assert check_dataflow(replay) == []  # --recording latest: whatever run is newest when the graph starts
    monkeypatch.setenv("CONTACTFLOW_RECORDING", str(tmp_path / "g1_run"))
    got = {(p.node, p.port): p.message for p in check_dataflow(replay)}
    assert set(got) == {("mujoco_driver", "$CONTACTFLOW_RECORDING"), ("operator", "$CONTACTFLOW_RECORDING")}
    assert got[("mujoco_driver", "$CONTACTFLOW_RECORDING")].startswith(f"$CONTACTFLOW_RECORDING={tmp_path / 'g1_run'}: ")
    assert "was made with robot 'g1', expected robot 'talos'" in got[("mujoco_driver", "$CONTACTFLOW_RECORDING")]
    monkeypatch.setenv("CONTACTFLOW_RECORDING", "nope")
    got = {(p.node, p.port): p.message for p in check_dataflow(replay)}
    assert set(got) == {("mujoco_driver", "$CONTACTFLOW_RECORDING"), ("operator", "$CONTACTFLOW_RECORDING")}
    assert all("no recording 'nope'" in m for m in got.values())
    w = RecordingWriter(tmp_path / "talos_run", {"dataflow": "seiko_talos.yml", "robot": "talos", "start_time_utc": "2026-12-06T00:00:00+00:00"})
    s = w.stream("other.stream", 3, {"source": "other/stream"})
    s.append(0, 0.0, np.zeros(3))
    w.close()
    monkeypatch.setenv("CONTACTFLOW_RECORDING", str(tmp_path / "talos_run"))  # the robot's run, without the streams
    got = {(p.node, p.port): p.message for p in check_dataflow(replay)}
    assert set(got) == {("mujoco_driver", "$CONTACTFLOW_RECORDING"), ("operator", "$CONTACTFLOW_RECORDING")}
    assert all("mujoco_driver.sensors" in m for m in got.values()), got
    monkeypatch.delenv("CONTACTFLOW_RECORDING")
    # a run the graph's own --recording names and that is not there yet (PRIME's, generated first): not a problem
    assert check_dataflow(ROOT / "dataflows" / "prime_replay_go2.yml") == []


def test_a_scenario_file_is_loaded_as_the_node_loads_it(tmp_path):
    graph = _edited(tmp_path, ("--scenario ../robots/talos/scenarios/hand_forward.yaml", "--scenario reahc.yaml"))
    assert [(p.node, p.port, p.message) for p in check_dataflow(graph)] == [("operator", "--scenario", "reahc.yaml: file not found")]
    text = (ROOT / "robots/talos/scenarios/smoke_2s.yaml").read_text()
    assert "    linear_mps:" in text
    (tmp_path / "mine.yaml").write_text(text.replace("    linear_mps:", "    linear_mpss:"))  # a misspelled key
    graph = _edited(tmp_path, ("--scenario ../robots/talos/scenarios/hand_forward.yaml", "--scenario mine.yaml"))
    (p,) = check_dataflow(graph)
    assert (p.node, p.port) == ("operator", "--scenario") and "mine.yaml" in p.message and "linear_mpss" in p.message
    # a bare name is looked up in the robot's scenarios/, as the node does
    graph = _edited(tmp_path, ("--scenario ../robots/talos/scenarios/hand_forward.yaml", "--scenario smoke_2s"))
    assert check_dataflow(graph) == []


def test_a_robot_that_does_not_load_is_a_problem_of_its_node_and_the_rest_is_checked(tmp_path, capsys):
    graph = _edited(tmp_path, ("--robot talos --lag 2 --sensor-lag 1", "--robot talso --lag x --sensor-lag 1"))
    got = {(p.node, p.port): p.message for p in check_dataflow(graph)}
    assert set(got) == {("seiko_controller", "--robot"), ("seiko_controller", "args")}
    assert "robot 'talso'" in got[("seiko_controller", "--robot")] and "did you mean 'talos'" in got[("seiko_controller", "--robot")]
    assert cli.main(["check", str(graph)]) == 1
    assert "node 'seiko_controller' argument --robot: robot 'talso'" in capsys.readouterr().out


def test_the_g1_teleop_and_wrench_injector_scenarios_are_loaded_too(tmp_path):
    text = (ROOT / "dataflows/lac_g1_teleop.yml").read_text()
    assert text.count("--scenario ../robots/g1/scenarios/hand_push.yaml") == 2
    graph = tmp_path / "g1.yml"
    graph.write_text(text.replace("--scenario ../robots/g1/scenarios/hand_push.yaml", "--scenario hand_psuh.yaml"))
    got = {(p.node, p.port): p.message for p in check_dataflow(graph)}
    assert set(got) == {("teleop", "--scenario"), ("wrench_injector", "--scenario")}
    assert all("hand_psuh.yaml" in m for m in got.values())


def test_a_lag_out_of_range_is_refused_by_the_parser():
    assert check_node_args("input_filter", ["--robot", "talos", "--lag", "0"]) == "argument --lag: expected an integer >= 1, got 0"
    assert check_node_args("seiko_controller", ["--robot", "talos", "--lag", "-3"]) == (
        "argument --lag: expected an integer >= 0, got -3")
    assert check_node_args("seiko_controller", ["--robot", "talos", "--lag", "0", "--wrench-lag", "1"]) is None


def test_env_values_are_read_as_dora_reads_them(monkeypatch):
    """What dora 1.1 passes a node for an env: value (each case run through dora 1.1 itself): $$ is a $, all inside
    ${...} is the name unless it holds :-, a YAML date is its text; what dora refuses, refused here too, and a graph
    dora runs is not refused (contactflow run checks these before starting dora)."""
    import datetime

    from contactflow.contracts.wiring import env_value

    monkeypatch.setenv("HOME", "/root")
    monkeypatch.delenv("NOT_SET_HERE", raising=False)
    ok = [("pa$$word", "pa$word"), ("$$$HOME", "$/root"), ("${HOME}/x", "/root/x"), ("${NOT_SET_HERE:-d}/x", "d/x"),
          ("x$", "x$"), ("$-/x", "$-/x"), ("${HOME", "${HOME"), (1, "1"), (1.0, "1"), (1.5, "1.5"), (True, "true"),
          (datetime.date(2026, 12, 6), "2026-12-06")]
    assert [(k, env_value(k, "X")) for k, _ in ok] == ok
    for refused in ("${HOME-d}", "${}", "$NOT_SET_HERE", None, {"__dora_env": "HOME"}, [1]):
        with pytest.raises(ConfigError, match="^env: X: "):
            env_value(refused, "X")
