"""``contactflow check`` loads each node's ``--config`` file as the node will (contactflow.contracts.wiring.check_config_files).

A misspelled key, a missing or unknown section or a missing file is reported as a wiring-style line
naming the node, the flag, the file and the key, with ``did you mean`` from the loader itself (so a
node that fails at start in ``contactflow run`` / ``dora run`` says the same).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from contactflow import cli
from contactflow.config import did_you_mean
from contactflow.errors import ConfigError
from contactflow.contracts.wiring import check_config_files, check_dataflow

ROOT = Path(__file__).resolve().parent.parent
FAR_REACH = ROOT / "dataflows" / "seiko_talos_far_reach.yml"


def _far_reach_with(tmp_path: Path, config_arg: str) -> Path:
    """A copy of the shipped far-reach graph in tmp_path whose Controller reads ``config_arg``."""
    text = FAR_REACH.read_text()
    assert "--config ../robots/talos/seiko_far_reach.yaml" in text
    out = tmp_path / "graph.yml"
    out.write_text(text.replace("--config ../robots/talos/seiko_far_reach.yaml", f"--config {config_arg}"))
    return out


def _flow(*nodes: tuple[str, str, str]) -> dict:
    return {"nodes": [{"id": i, "path": f"contactflow-{k.replace('_', '-')}", "args": a} for i, k, a in nodes]}


def test_check_reports_a_misspelled_key_with_a_suggestion(tmp_path, capsys):
    (tmp_path / "my.yaml").write_text("seiko_controller:\n  kp_per_sec: 0.3\n")
    graph = _far_reach_with(tmp_path, "my.yaml")  # relative to the graph's folder, as dora runs the node
    (p,) = check_dataflow(graph)
    assert (p.node, p.port) == ("seiko_controller", "--config")
    assert str(tmp_path / "my.yaml") in p.message and "seiko_controller" in p.message
    assert "unknown key(s) 'kp_per_sec' (did you mean 'kp_per_s'?)" in p.message

    assert cli.main(["check", str(graph)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{graph}: 1 problem(s) (wiring, node configuration or arguments)"
    assert out[1].startswith("  - node 'seiko_controller' argument --config: configuration file ")
    assert "did you mean 'kp_per_s'" in out[1] and len(out) == 2


def test_check_accepts_the_shipped_file_from_another_folder(tmp_path):
    # ../robots/talos/... does not exist beside the copy: it names the shipped robot data
    graph = _far_reach_with(tmp_path, "../robots/talos/seiko_far_reach.yaml")
    assert check_dataflow(graph) == []
    shutil.copy(ROOT / "robots/talos/seiko_far_reach.yaml", tmp_path / "local.yaml")
    assert check_dataflow(_far_reach_with(tmp_path, "local.yaml")) == []


def test_check_reports_a_missing_file_and_sections(tmp_path):
    (p,) = check_dataflow(_far_reach_with(tmp_path, "nope.yaml"))
    assert p.port == "--config" and "nope.yaml: file not found" in p.message

    (tmp_path / "sec.yaml").write_text("seiko_controler:\n  kp_per_s: 0.3\n")
    (p,) = check_dataflow(_far_reach_with(tmp_path, "sec.yaml"))
    assert "unknown section(s) 'seiko_controler' (did you mean 'seiko_controller'?); this node reads 'seiko_controller', " \
           "'seiko_retargeting', and one file may hold the sections of other nodes: input_filter, lac_expert, mujoco_driver, seiko_controller, " \
           "seiko_retargeting, teleop" in p.message

    (tmp_path / "other.yaml").write_text("input_filter: {}\n")  # a known section, but not the Controller's
    (p,) = check_dataflow(_far_reach_with(tmp_path, "other.yaml"))
    assert "no 'seiko_controller' section" in p.message


def test_optional_sections_and_the_own_flag(tmp_path):
    (tmp_path / "filter.yaml").write_text("input_filter: {}\n")
    (tmp_path / "bad_retarget.yaml").write_text("seiko_retargeting:\n  joint_vel_wieght: 1.0\n")
    # seiko_stack reads its three sections optionally: a file with one of them is fine
    assert check_config_files(_flow(("stack", "seiko_stack", "--robot talos --config filter.yaml")), tmp_path) == []
    (tmp_path / "typo.yaml").write_text("input_filtre: {}\n")  # the message names the node's three sections
    (problem,) = check_config_files(_flow(("stack", "seiko_stack", "--robot talos --config typo.yaml")), tmp_path)
    msg = problem.message
    assert "this node reads 'input_filter', 'seiko_retargeting', 'seiko_controller', and one file" in msg, msg
    # the Controller reads seiko_retargeting from --retargeting-config (required there) ...
    flow = _flow(("ctl", "seiko_controller", "--robot talos --retargeting-config filter.yaml"))
    (p,) = check_config_files(flow, tmp_path)
    assert (p.node, p.port) == ("ctl", "--retargeting-config") and "no 'seiko_retargeting' section" in p.message
    # ... and a bad key in it is found under that flag
    flow = _flow(("ctl", "seiko_controller", "--robot talos --retargeting-config bad_retarget.yaml"))
    (p,) = check_config_files(flow, tmp_path)
    assert p.port == "--retargeting-config" and "'joint_vel_wieght'" in p.message
    # nodes without a configuration, and nodes not given a file, are not checked
    assert check_config_files(_flow(("r", "recorder", "--robot talos"), ("ctl", "seiko_controller", "--robot talos")),
                              tmp_path) == []


def test_lac_loaders_are_the_nodes_own(tmp_path):
    (tmp_path / "teleop.yaml").write_text("teleop:\n  max_lin_vel_mp: 1.0\n")
    (tmp_path / "expert.yaml").write_text(yaml.safe_dump({"lac_expert": {"robto": "g1"}}))
    flow = _flow(("teleop", "teleop", "--robot g1 --config teleop.yaml"),
                 ("lac_expert", "lac_expert", "--robot g1 --config expert.yaml"))
    msgs = {p.node: p.message for p in check_config_files(flow, tmp_path)}
    assert set(msgs) == {"teleop", "lac_expert"}
    assert "teleop.yaml:teleop: unknown key(s) 'max_lin_vel_mp'" in msgs["teleop"]
    assert "expert.yaml:lac_expert: unknown key(s) 'robto' (did you mean 'robot'?)" in msgs["lac_expert"]


def test_the_loader_itself_suggests_the_close_key(tmp_path):
    """The suggestion is in the loader's error, so a node failing at start (contactflow run) gives it too."""
    from contactflow.nodes._runtime import load_node_config
    from contactflow.seiko.controller import ControllerConfig

    path = tmp_path / "c.yaml"
    path.write_text("seiko_controller:\n  kp_per_sec: 0.3\n  zzzz: 1\n")
    with pytest.raises(ConfigError, match=r"c.yaml:seiko_controller: unknown key\(s\) 'kp_per_sec', 'zzzz' "
                                          r"\(did you mean 'kp_per_s' for 'kp_per_sec'\?\); expected some of"):
        load_node_config(ControllerConfig, str(path), "seiko_controller")
    assert did_you_mean(["qwerty"], ["kp_per_s"]) == ""
    assert did_you_mean(["kd_sing"], ["kd", "kd_sign"]) == " (did you mean 'kd_sign'?)"
