"""``contactflow run``: ``dora run`` with the failed node and its error line at the end.

The parser is checked on excerpts of real ``dora run`` 1.1 output; one real run of a two-node graph
whose contactflow node has a bad configuration key checks the whole command (a few seconds).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from contactflow import cli
from contactflow.cli.run import failure_report, parse_failures

ROOT = Path(__file__).resolve().parent.parent

# excerpt of `dora run` on seiko_talos.yml with a bad key in seiko_controller's --config (dora 1.1.0)
CONFIG_FAILURE = """\
18:59:35 DEBUG  seiko_retargeting: spawner spawned node with pid 25664
18:59:44 stdout seiko_controller: [contactflow] node 'seiko_controller' failed: bad.yaml:seiko_controller: unknown key(s) 'kp_per_sec'; expected some of dt_s, kp_per_s
18:59:45 INFO   input_filter: daemon node is ready
\x1b[2m2026-12-01T18:59:45.160772Z\x1b[0m \x1b[31mERROR\x1b[0m \x1b[1mnode_failure\x1b[0m: node exited with error: ExitCode(2) node_id=seiko_controller
18:59:45 ERROR  seiko_controller: daemon exited with code 2 with stderr output:
---------------------------------------------------------------------------------
[contactflow] node 'seiko_controller' failed: bad.yaml:seiko_controller: unknown key(s) 'kp_per_sec'; expected some of dt_s, kp_per_s
---------------------------------------------------------------------------------
18:59:48 stdout seiko_retargeting: [contactflow] node 'seiko_retargeting' stopping: dataflow start aborted: 2: subscribe failed: Node seiko_controller exited before initializing dora.
18:59:50 stdout recorder: [contactflow] node 'recorder' stopping: dataflow start aborted: 2: subscribe failed: Node seiko_controller exited before initializing dora.
18:59:50 INFO   seiko_retargeting: daemon marking `seiko_retargeting` as cascading error caused by `seiko_controller`
18:59:51 ERROR  seiko_retargeting: daemon exited with code 3. This error occurred because node `seiko_controller` exited before connecting to dora.
18:59:51 ERROR  recorder: daemon exited with code 3. This error occurred because node `seiko_controller` exited before connecting to dora.

[ERROR]
Dataflow failed:

Node `seiko_controller` failed: exited with code 2 with stderr output:
Stack backtrace:
   0: <unknown>
"""

# a node that raised an unexpected exception mid-run (node_main's "crashed" form), and a node that
# is not a contactflow node ending with a traceback because of it
CRASH = """\
19:10:01 stdout seiko_controller: [contactflow] node 'seiko_controller' crashed:
19:10:01 stdout seiko_controller: Traceback (most recent call last):
19:10:01 stdout seiko_controller:   File "nodes/_runtime.py", line 808, in node_main
19:10:01 stdout seiko_controller:     rc = body() or 0
19:10:01 stdout seiko_controller: ValueError: operands could not be broadcast together with shapes (25,) (24,)
19:10:01 ERROR  seiko_controller: daemon exited with code 1 with stderr output:
19:10:02 stdout counter: Traceback (most recent call last):
19:10:02 stdout counter: RuntimeError: Could not initiate node from environment variable.
19:10:02 stdout counter: Caused by:
19:10:02 ERROR  counter: daemon exited with code 1 with stderr output:
19:10:02 INFO   counter: daemon marking `counter` as cascading error caused by `seiko_controller`
19:10:02 stdout mujoco_driver: [contactflow] node 'mujoco_driver' stopping: input 'command' closed before the end of the run
19:10:02 ERROR  mujoco_driver: daemon exited with code 3
"""


def test_config_failure_is_reported_with_its_node_and_line():
    fails = parse_failures(CONFIG_FAILURE.splitlines())
    c = fails["seiko_controller"]
    assert (c.kind, c.exit_code, c.consequence) == ("failed", 2, False)
    assert c.message == "bad.yaml:seiko_controller: unknown key(s) 'kp_per_sec'; expected some of dt_s, kp_per_s"
    assert fails["seiko_retargeting"].consequence and fails["seiko_retargeting"].exit_code == 3
    assert fails["recorder"].consequence
    report = failure_report(CONFIG_FAILURE.splitlines(), 1, "g.yml")
    assert report[2] == "contactflow run: the dataflow g.yml failed (dora run exit code 1)"
    assert report[3] == ("  node seiko_controller failed (exit code 2): bad.yaml:seiko_controller: unknown key(s) "
                         "'kp_per_sec'; expected some of dt_s, kp_per_s")
    assert report[4] == "  stopped because of it: seiko_retargeting, recorder"
    assert len(report) == 5
    assert failure_report(CONFIG_FAILURE.splitlines(), 0) == []  # a run that succeeded: no report


def test_crash_is_reported_with_the_last_line_of_its_traceback():
    report = failure_report(CRASH.splitlines(), 1)
    assert report[3] == ("  node seiko_controller crashed (exit code 1): ValueError: operands could not be broadcast "
                         "together with shapes (25,) (24,)")
    assert report[4] == "  stopped because of it: counter, mujoco_driver"


def test_missing_graph_is_one_line(tmp_path, capsys):
    assert cli.main(["run", str(tmp_path / "nope.yml")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"contactflow: error: {tmp_path / 'nope.yml'}: dataflow file not found"
    (tmp_path / "seiko_talos.yml").write_text("nodes: []\n")
    assert cli.main(["run", str(tmp_path / "seiko_tallos.yml")]) == 2  # a close name in its folder is suggested
    assert capsys.readouterr().err.strip().endswith("dataflow file not found (did you mean 'seiko_talos.yml'?)")
    for odd in (".", "seiko_talos.realtime"):  # no name to suggest from; a dot that is no suffix
        assert cli.main(["run", odd]) == 2
        assert "seiko_talos.yml'?" not in capsys.readouterr().err


def test_a_subcommand_refuses_an_unknown_option_with_its_own_usage(capsys):
    """argparse leaves a subcommand's unknown option to the top-level parser (its usage, no suggestion): the
    subcommand refuses it itself, suggesting its close option."""
    import pytest

    with pytest.raises(SystemExit) as exc:
        cli.main(["lac", "eval", "--trails", "1"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "usage: contactflow lac eval" in err
    assert "contactflow lac eval: error: unrecognized arguments: --trails 1 (did you mean '--trials'?)" in err


def test_a_key_given_twice_in_the_graph_is_one_line_before_dora_starts(tmp_path, capsys):
    g = tmp_path / "g.yml"
    g.write_text("nodes:\n  - id: a\n    path: a.py\n    args: --x 1\n    args: --x 2\n")
    assert cli.main(["run", str(g)]) == 2
    assert capsys.readouterr().err.strip() == (f"contactflow: error: {g}: not valid YAML (line 5, column 5): key 'args' "
                                               "given twice in one mapping (first at line 4): merge the two")


def test_a_run_dora_refuses_ends_with_dora_s_cause_not_its_backtrace():
    """dora refusing the graph itself (no node started): the report gives dora's cause, not "read dora's output"."""
    lines = ["[ERROR]\n", "failed to read dataflow at `g.yml`\n", "\n", "Caused by:\n",
             "   0: failed to parse given descriptor\n", "   1: nodes[0]: unknown field `pathh`\n", "\n", "Location:\n",
             "    libraries/core/src/descriptor/mod.rs:487:38\n", "Stack backtrace:\n", "   0: x\n"]
    assert failure_report(lines, 1, "g.yml")[-1] == ("  dora: 0: failed to parse given descriptor 1: nodes[0]: unknown "
                                                     "field `pathh`")
    assert failure_report(["something else\n"], 1)[-1] == "  no node reported a failure; read dora's output above"


def _graph(tmp_path: Path, config: str | None) -> Path:
    counter = f"""\
  - id: counter
    path: {ROOT / 'tests' / 'fixtures' / 'counter_source.py'}
    args: --count 3 --log {tmp_path / 'counter.log'}
    inputs:
      tick: dora/timer/millis/20
    outputs: [out]
"""
    text = "nodes:\n" + counter
    if config is not None:
        (tmp_path / "bad.yaml").write_text(config)
        text += f"""\
  - id: input_filter
    path: {ROOT / 'nodes' / 'input_filter.py'}
    args: --robot talos --config {tmp_path / 'bad.yaml'}
    inputs:
      command: counter/out
      desired: counter/out
    outputs: [targets, log]
"""
    g = tmp_path / "g.yml"
    g.write_text(text)
    return g


def _contactflow_run(graph: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "contactflow.cli", "run", str(graph), *extra], cwd=graph.parent,
                          env=dict(os.environ), capture_output=True, text=True, timeout=180)


@pytest.mark.dora
def test_run_ends_with_the_failed_node_and_its_config_error(tmp_path):
    graph = _graph(tmp_path, "input_filter:\n  cutoff_hz: 2.0\n  max_vel_lin: 0.3\n")
    proc = _contactflow_run(graph)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]  # dora run's exit code for a failed dataflow
    tail = [ln for ln in proc.stdout.splitlines() if ln.strip()][-3:]
    assert tail[0] == f"contactflow run: the dataflow {graph} failed (dora run exit code 1)", out[-3000:]
    assert tail[1].startswith(f"  node input_filter failed (exit code 2): {tmp_path / 'bad.yaml'}:input_filter: "
                              "unknown key(s) 'max_vel_lin' (did you mean 'max_vel_lin_mps'?); expected some of"), tail
    assert tail[2] == "  stopped because of it: counter", tail
    assert "Stack backtrace" in out  # dora's own output is streamed unchanged, before the report


@pytest.mark.dora
def test_successful_run_passes_dora_arguments_and_prints_no_report(tmp_path):
    proc = _contactflow_run(_graph(tmp_path, None), "--log-level", "info")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "contactflow run:" not in proc.stdout
    # --log-level info reached dora run: of dora's DEBUG lines only "building node" is left (dora 1.1)
    debug = [ln for ln in proc.stdout.splitlines() if "DEBUG" in ln]
    assert debug and all("building node" in ln for ln in debug), debug
    assert len((tmp_path / "counter.log").read_text().splitlines()) == 3


def test_a_missing_training_package_names_the_train_extra(monkeypatch, capsys):
    """`contactflow lac train` without the [train] extra: one line naming the extra and torch's CPU
    build, not a traceback (simulated: the training module raises as a missing torch would)."""
    import contactflow.lac.train.dagger as dagger

    def no_torch(*a, **k):
        raise ModuleNotFoundError("No module named 'torch'", name="torch")

    monkeypatch.setattr(dagger, "export_checkpoint", no_torch)
    assert cli.main(["lac", "export", "runs/none", "--out", "x.onnx"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'torch'" in err and ".[train]" in err and "torch==2.13.0" in err
    assert cli.missing_extra_message(ModuleNotFoundError("x", name="stable_baselines3.common")).count(".[train]") == 1
    assert cli.missing_extra_message(ModuleNotFoundError("x", name="numpy")) is None


def test_a_bad_node_argument_is_reported_with_argparse_line():
    """A node whose graph `args` its parser refuses exits 2 before any contactflow line: the report
    quotes argparse's error line (dora prints the node's output with its prefix)."""
    lines = """\
10:00:01 stdout seiko_retargeting: usage: contactflow-seiko-retargeting [-h] [--robot ROBOT]
10:00:01 stdout seiko_retargeting: contactflow-seiko-retargeting: error: unrecognized arguments: --lag 0
10:00:01 ERROR  seiko_retargeting: daemon exited with code 2 with stderr output:
""".splitlines()
    report = failure_report(lines, 1, "g.yml")
    assert report[-1] == ("  node seiko_retargeting failed (exit code 2): contactflow-seiko-retargeting: error: "
                          "unrecognized arguments: --lag 0 (the node's args in the graph)")


def test_a_failure_quoted_in_dora_stderr_block_is_the_node_of_that_block():
    """A replay node standing in for `mujoco_driver` names itself 'replay' in its error line; when dora
    quotes it in the driver's stderr block (no prefix), the report names the graph's node id."""
    lines = """\
10:00:01 ERROR  mujoco_driver: daemon exited with code 2 with stderr output:
---------------------------------------------------------------------------------
[contactflow] node 'replay' failed: run.arrows: recorded with robot 'g1', this graph runs 'talos'
---------------------------------------------------------------------------------
10:00:02 stdout recorder: [contactflow] node 'recorder' stopping: input closed
""".splitlines()
    failures = parse_failures(lines)
    assert "replay" not in failures
    assert failures["mujoco_driver"].kind == "failed" and "recorded with robot 'g1'" in failures["mujoco_driver"].message


def test_a_relative_recordings_folder_is_refused_by_a_node_and_made_absolute_by_the_commands(tmp_path, monkeypatch):
    """A relative $CONTACTFLOW_RECORDINGS: a node (dora starts it in the dataflow's folder) refuses it, naming the
    variable; the commands that start dora (scripts_env) pass it on absolute from their working directory; a
    command in the shell reads it there; the replay node refuses it only where it looks a run up there (a name,
    `latest`), not for a run given by its path, and the recorder only when it records there (not with --help)."""
    from contactflow.errors import ConfigError
    from contactflow.paths import default_recordings_dir, scripts_env

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CONTACTFLOW_RECORDINGS", "recs")
    assert default_recordings_dir() == Path("recs")
    with pytest.raises(ConfigError, match=r"\$CONTACTFLOW_RECORDINGS='recs': a node needs an absolute path .*=\$PWD/recs"):
        default_recordings_dir(node=True)
    assert scripts_env()["CONTACTFLOW_RECORDINGS"] == str(tmp_path / "recs")
    monkeypatch.setenv("CONTACTFLOW_RECORDINGS", str(tmp_path / "abs"))
    assert default_recordings_dir(node=True) == tmp_path / "abs"
    assert scripts_env()["CONTACTFLOW_RECORDINGS"] == str(tmp_path / "abs")

    nodes = Path(__file__).resolve().parents[1] / "nodes"
    env = dict(os.environ, CONTACTFLOW_RECORDINGS="recs")

    def node(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(nodes / args[0]), *args[1:]], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)

    refused = node("replay.py", "--recording", "latest", "--streams", "mujoco_driver.sensors")
    assert refused.returncode != 0 and "$CONTACTFLOW_RECORDINGS='recs': a node needs an absolute path" in refused.stderr
    by_path = node("replay.py", "--recording", str(tmp_path / "no_such_run"), "--streams", "mujoco_driver.sensors")
    assert by_path.returncode != 0 and "no recording" in by_path.stderr and "CONTACTFLOW_RECORDINGS=" not in by_path.stderr
    assert node("recorder.py", "--help").returncode == 0
