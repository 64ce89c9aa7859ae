"""Composing pipelines outside the repository (issue 14, items 1 and 2): installed nodes, robots found
like package data.

The must-show test installs contactflow NON-editable into a fresh venv, deletes the source copy it
was installed from, and then, in temporary folders outside the repository:

* runs the README's "Compose your own pipeline" example (its three files are read from README.md):
  a user's YAML reusing the SEIKO nodes by their installed names, with the user's own scenario and
  a node of their own (a script node), to the end, and checks its recording and the node's output;
* runs a shipped graph (``dataflows/seiko_talos.yml``) copied into another folder, unchanged, with
  ``CONTACTFLOW_SCENARIO`` naming a shipped scenario by its ``robots/...`` path.

The fresh venv does not re-download the dependencies: it is created with ``--system-site-packages``
(from the base interpreter, so that is the base interpreter's site-packages) and a ``.pth`` file
layers the test venv's site-packages on top, processing its ``.pth`` files (cmeel's, for pinocchio)
EXCEPT the editable contactflow hook, so the only contactflow the child can import is the one it
installed (checked: ``contactflow.__file__`` and the robot data are inside the child venv). The
install itself is ``uv pip install --no-deps`` (pip when uv is not there); its build backend comes
from the package cache (or PyPI).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import numpy as np
import pytest
import yaml

from contactflow.errors import ConfigError
from contactflow.paths import (ROBOT_PATH_ENV, data_path_candidates, node_kind, node_script, resolve_data_path,
                               shipped_robots_dir, source_checkout)
from contactflow.recording.store import read_recording
from contactflow.robot import load_robot, robot_search_path

ROOT = Path(__file__).resolve().parent.parent
#: What the distribution is built from (pyproject's readme included): the copy that gets installed.
PACKAGED = ("pyproject.toml", "setup.py", "README.md", "contactflow", "nodes", "robots")


def _node_kinds() -> list[str]:
    return sorted(p.stem for p in (ROOT / "nodes").glob("*.py") if not p.name.startswith("_"))


# ------------------------------------------------------------------------------------------- fast checks

def test_every_node_is_an_installed_executable():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    nodes = {k: v for k, v in scripts.items() if k != "contactflow"}
    assert nodes == {node_script(k): f"contactflow.nodes._launch:{k}" for k in _node_kinds()}
    for k in _node_kinds():
        assert node_kind(node_script(k)) == k and node_kind(f"../nodes/{k}.py") == k


def test_the_launcher_runs_only_node_modules():
    from contactflow.nodes import _launch

    assert callable(_launch.seiko_controller)
    with pytest.raises(AttributeError, match="no contactflow node 'nope'"):
        _launch.nope  # noqa: B018
    with pytest.raises(AttributeError):
        _launch._runtime_private  # noqa: B018


def test_shipped_graphs_name_installed_nodes():
    """Every node of every shipped graph is an installed executable, a dynamic node or a dora built-in."""
    for df in sorted((ROOT / "dataflows").glob("*.yml")):
        for n in yaml.safe_load(df.read_text())["nodes"]:
            path = str(n.get("path", ""))
            if path == "dynamic" or "module" in n:
                continue
            assert path in {node_script(k) for k in _node_kinds()}, f"{df.name}: node {n['id']!r} path {path!r}"


def test_checkout_paths(tmp_path, monkeypatch):
    assert source_checkout() == ROOT
    assert shipped_robots_dir() == ROOT / "robots"
    monkeypatch.chdir(tmp_path)
    # a robots/... path names the shipped data from any directory (the shipped graphs' ../robots/... too)
    for given in ("robots/talos/scenarios/smoke_2s.yaml", "../robots/talos/scenarios/smoke_2s.yaml"):
        assert resolve_data_path(given) == ROOT / "robots/talos/scenarios/smoke_2s.yaml"
    (tmp_path / "robots/talos/scenarios").mkdir(parents=True)
    (tmp_path / "robots/talos/scenarios/smoke_2s.yaml").write_text("mine")  # the working directory's comes first
    assert resolve_data_path("robots/talos/scenarios/smoke_2s.yaml") == Path("robots/talos/scenarios/smoke_2s.yaml")
    assert resolve_data_path("no/such/file.yaml") == Path("no/such/file.yaml")
    assert data_path_candidates("/abs/x.yaml") == [Path("/abs/x.yaml")]


def _readme_files(section: str) -> dict[str, str]:
    """The code blocks of a README section whose first line is ``# <file name>: ...``, by file name."""
    text = (ROOT / "README.md").read_text()
    start = text.index(f"\n{section}\n") + len(section) + 2
    end = re.search(r"\n##+ ", text[start:])  # the next heading (a sub-section too)
    body = text[start:start + end.start()] if end else text[start:]
    blocks = re.findall(r"```(?:yaml|python)\n(.*?)```", body, flags=re.S)
    out = {}
    for b in blocks:
        m = re.match(r"# ([\w./]+\.(?:ya?ml|py))\b", b)
        if m:
            out[m.group(1)] = b
    return out


def _tool_robot(tmp_path: Path) -> Path:
    files = _readme_files("### Adding a robot of one's own")
    (tmp_path / "my_robots/talos_tool").mkdir(parents=True)
    (tmp_path / "my_robots/talos_tool/robot.yaml").write_text(files["my_robots/talos_tool/robot.yaml"])
    return tmp_path / "my_robots"


def _left_hand(robot) -> np.ndarray:
    import pinocchio as pin

    data = robot.model.createData()
    pin.framesForwardKinematics(robot.model, data, robot.q_default)
    return data.oMf[robot.model.getFrameId("left_hand_frame")].translation.copy()


def test_a_robot_of_ones_own_by_path_search_path_and_flag(tmp_path, monkeypatch):
    """The README's variant (base: talos by name): by folder path, by $CONTACTFLOW_ROBOT_PATH and by
    --robot-path; it is Talos with the left-hand frame 10 cm further out."""
    from contactflow.nodes._runtime import base_parser

    my_robots = _tool_robot(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(ROBOT_PATH_ENV, raising=False)
    talos = load_robot("talos")
    by_path = load_robot("my_robots/talos_tool")
    assert by_path.name == "talos_tool" and by_path.joint_names == talos.joint_names
    assert np.linalg.norm(_left_hand(by_path) - _left_hand(talos)) == pytest.approx(0.10, abs=1e-9)
    with pytest.raises(ConfigError, match=r"robot 'talos_tool': robot description not found \(known: g1, go2, talos "
                       r"\(did you mean 'talos'\?\); .*" + re.escape(str(ROOT / "robots"))):
        load_robot("talos_tool")

    monkeypatch.setenv(ROBOT_PATH_ENV, str(my_robots))
    assert load_robot("talos_tool").file == my_robots / "talos_tool/robot.yaml"
    assert load_robot("talos").file == ROOT / "robots/talos/robot.yaml"  # the shipped ones stay found

    monkeypatch.setenv(ROBOT_PATH_ENV, "")
    args = base_parser("test").parse_args(["--robot", "talos_tool", "--robot-path", "my_robots"])
    assert args.robot_path == ["my_robots"] and robot_search_path()[0] == my_robots.resolve()
    assert load_robot(args.robot).name == "talos_tool"


def test_contactflow_check_uses_the_robot_path_of_each_node(tmp_path, monkeypatch):
    """A graph whose nodes say `--robot talos_tool --robot-path my_robots` (the README's variant, relative to
    the dataflow's folder, as dora starts the nodes there) checks clean from any folder; without the
    flag the robot is not found and the check says so."""
    from contactflow.contracts.wiring import check_dataflow

    _tool_robot(tmp_path)
    monkeypatch.delenv(ROBOT_PATH_ENV, raising=False)
    monkeypatch.chdir(ROOT)  # not the dataflow's folder
    for name in ("seiko_talos_live", "seiko_talos"):  # the live graph's operator is a dynamic node (no args)
        graph = yaml.safe_load((ROOT / f"dataflows/{name}.yml").read_text())
        for n in graph["nodes"]:
            n["args"] = n.get("args", "").replace("--robot talos", "--robot talos_tool --robot-path my_robots").replace(
                "../robots/", f"{ROOT}/robots/")
        (tmp_path / "tool.yml").write_text(yaml.safe_dump(graph))
        assert check_dataflow(tmp_path / "tool.yml") == [], name
        assert ROBOT_PATH_ENV not in os.environ  # the check's search path does not leak
    for n in graph["nodes"]:
        n["args"] = n["args"].replace(" --robot-path my_robots", "")
    (tmp_path / "tool2.yml").write_text(yaml.safe_dump(graph))
    problems = check_dataflow(tmp_path / "tool2.yml")  # each node that needs the robot says so, on its --robot
    assert problems and all(p.port == "--robot" and "robot 'talos_tool': robot description not found" in p.message
                            for p in problems), problems


def test_the_search_path_comes_first_and_an_unknown_robot_lists_where_it_looked(tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    for d, margin in ((first, 0.1), (second, 0.3)):
        (d / "talos_m").mkdir(parents=True)
        (d / "talos_m/robot.yaml").write_text(f"base: talos\nposition_margin_rad: {margin}\n")
    monkeypatch.setenv(ROBOT_PATH_ENV, os.pathsep.join([str(first), str(second)]))
    robot = load_robot("talos_m")
    assert robot.file == first / "talos_m/robot.yaml"
    assert robot.position_margin.max() == pytest.approx(0.1)  # the first folder's, not the second's 0.3
    with pytest.raises(ConfigError) as exc:
        load_robot("no_such_robot")
    msg = str(exc.value)
    assert all(str(d) in msg for d in (first, second, ROOT / "robots")) and "\n" not in msg
    with pytest.raises(ConfigError, match="no_such_dir/robot.yaml: robot description not found"):
        load_robot("no_such_dir/robot.yaml")


# ---------------------------------------------------------------------------- non-editable install, outside

def _child_venv(tmp: Path) -> Path:
    """A fresh venv over the test venv's packages, without its editable contactflow (module docstring)."""
    venv = tmp / "venv"
    base = getattr(sys, "_base_executable", None) or sys.executable
    subprocess.run([base, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    child_sp = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   check=True, capture_output=True, text=True).stdout.strip())
    parent_sps = list(dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]))
    (child_sp / "_contactflow_test_parent.py").write_text(
        "import os, site, sys\n"
        f"for sp in {parent_sps!r}:\n"
        "    if sp not in sys.path:\n"
        "        sys.path.append(sp)\n"
        "        for name in sorted(os.listdir(sp)):\n"
        "            if name.endswith('.pth') and 'contactflow' not in name:  # not the editable contactflow\n"
        "                site.addpackage(sp, name, None)\n")
    (child_sp / "_contactflow_test_parent.pth").write_text("import _contactflow_test_parent\n")
    # dora run by the child's interpreter (it starts script nodes with its own interpreter)
    dora = Path(shutil.which("dora", path=str(Path(sys.executable).parent)) or shutil.which("dora"))
    lines = dora.read_text().splitlines()
    (venv / "bin" / "dora").write_text("\n".join([f"#!{py}"] + lines[1:]) + "\n")
    (venv / "bin" / "dora").chmod(0o755)
    return venv


def _install(venv: Path, tmp: Path) -> str:
    src = tmp / "src"
    src.mkdir()
    for name in PACKAGED:
        s = ROOT / name
        if s.is_dir():
            shutil.copytree(s, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(s, src / name)
    py = str(venv / "bin" / "python")
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    cmd = ([uv, "pip", "install", "--python", py, "--no-deps", str(src)] if uv else
           [sys.executable, "-m", "pip", "--python", py, "install", "--no-deps", str(src)])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0 and uv:  # no index reachable: the build backend from uv's cache only
        proc = subprocess.run(cmd + ["--offline"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{(proc.stdout + proc.stderr)[-3000:]}"
    shutil.rmtree(src)  # the source it was installed from is gone
    return proc.stdout + proc.stderr


def _env(venv: Path) -> dict:
    drop = ("PYTHONPATH", "PYTHONHOME", "CONTACTFLOW_RECORDINGS", "CONTACTFLOW_SCENARIO", ROBOT_PATH_ENV, "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PATH"] = os.pathsep.join([str(venv / "bin"), "/usr/local/bin", "/usr/bin", "/bin"])
    env["VIRTUAL_ENV"] = str(venv)
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("install")
    assert ROOT not in tmp.parents
    venv = _child_venv(tmp)
    _install(venv, tmp)
    env = _env(venv)
    probe = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import json, contactflow, contactflow.nodes, contactflow.paths as p, contactflow.robot as r\n"
         "print(json.dumps({'package': contactflow.__file__, 'nodes': contactflow.nodes.__file__,"
         " 'robots': str(r.robots_dir()), 'checkout': str(p.source_checkout())}))"],
        capture_output=True, text=True, env=env, cwd=tmp, timeout=120)
    assert probe.returncode == 0, probe.stderr[-3000:]
    return venv, env, json.loads(probe.stdout.strip().splitlines()[-1])


def _dora_run(venv: Path, env: dict, graph: Path, timeout: float = 300.0) -> tuple[subprocess.CompletedProcess, str]:
    proc = subprocess.run([str(venv / "bin" / "dora"), "run", graph.name], cwd=graph.parent, env=env,
                          capture_output=True, text=True, timeout=timeout)
    return proc, proc.stdout + proc.stderr


def _one_run(folder: Path) -> Path:
    runs = [p for p in (folder / "recordings").iterdir() if p.is_dir() and not p.is_symlink()]
    assert len(runs) == 1, runs
    return runs[0]


def _check_seiko_run(run: Path, duration_s: float) -> dict:
    summary = json.loads((run / "summary.json").read_text())
    assert summary["fell"] is False and summary["retargeting_failures"] == 0
    assert summary["sim_time_s"] == pytest.approx(duration_s, abs=0.1)
    rec = read_recording(run)
    assert rec.manifest["complete"]
    # the recorder ran from the installed package, not from a checkout
    assert rec.manifest["git_revision"] == "unknown (installed package)"
    for stream in ("mujoco_driver.sensors", "operator.command", "seiko_controller.command"):
        st = rec.stream(stream)
        assert len(st) >= duration_s / 0.002 - 10 and (np.diff(st.seq) == 1).all(), stream
    return summary


@pytest.mark.dora
def test_installed_package_comes_from_the_fresh_venv(installed):
    venv, _, where = installed
    for key in ("package", "nodes", "robots"):
        assert Path(where[key]).is_relative_to(venv), where
        assert not Path(where[key]).is_relative_to(ROOT), where
    assert where["checkout"] == "None"
    assert (Path(where["robots"]) / "talos/scenarios/smoke_2s.yaml").is_file()
    assert all((venv / "bin" / node_script(k)).is_file() for k in _node_kinds())


@pytest.mark.dora
def test_a_users_pipeline_runs_outside_the_repository_from_a_plain_install(installed, tmp_path):
    """The README's example: the user's YAML (SEIKO nodes by installed name + the user's scenario + the
    user's script node) in a folder of their own runs to the end and records there."""
    venv, env, _ = installed
    folder = tmp_path / "my_pipeline"
    folder.mkdir()
    files = _readme_files("## Compose your own pipeline")
    assert set(files) == {"reach.yaml", "height_monitor.py", "pipeline.yml"}, set(files)
    for name, text in files.items():
        (folder / name).write_text(text)
    check = subprocess.run([str(venv / "bin" / "contactflow"), "check", "pipeline.yml"], cwd=folder, env=env,
                           capture_output=True, text=True, timeout=120)  # the installed command line too
    assert check.returncode == 0 and "wiring OK" in check.stdout, check.stdout + check.stderr
    proc, out = _dora_run(venv, env, folder / "pipeline.yml")
    assert proc.returncode == 0, out[-5000:]
    assert "[operator] scenario reach.yaml" in out, out[-3000:]
    summary = _check_seiko_run(_one_run(folder), 3.0)  # ./recordings: the default outside a checkout
    assert summary["ticks"] >= 1490
    assert summary["left_hand_max_error_m"] < 0.02  # the README's hold is long enough to be measured
    monitor = json.loads((folder / "height_monitor.json").read_text())
    assert monitor["messages"] > 100 and 0.9 < monitor["lowest_base_height_m"] < 1.2, monitor
    assert "[height_monitor]" in out


@pytest.mark.dora
def test_a_shipped_graph_copied_anywhere_runs_unchanged(installed, tmp_path):
    venv, env, _ = installed
    folder = tmp_path / "copied"
    folder.mkdir()
    shutil.copy2(ROOT / "dataflows" / "seiko_talos.yml", folder / "seiko_talos.yml")
    env = {**env, "CONTACTFLOW_SCENARIO": "robots/talos/scenarios/smoke_2s.yaml"}  # the shipped data, by name
    proc, out = _dora_run(venv, env, folder / "seiko_talos.yml")
    assert proc.returncode == 0, out[-5000:]
    _check_seiko_run(_one_run(folder), 2.0)


def test_sha256_of_files_is_the_digest_of_the_concatenated_contents(tmp_path):
    """contactflow.paths.sha256_of_files, chunked (the holosoma wheel, a run's recorded rounds): one file gives
    its usual SHA-256, several the digest of their contents in order, whatever the chunk size."""
    import hashlib

    from contactflow.paths import sha256_of_files

    a, b = tmp_path / "a.bin", tmp_path / "b.bin"
    a.write_bytes(bytes(range(256)) * 41)
    b.write_bytes(b"round_001")
    assert sha256_of_files([a]) == hashlib.sha256(a.read_bytes()).hexdigest()
    both = hashlib.sha256(a.read_bytes() + b.read_bytes()).hexdigest()
    assert sha256_of_files([a, b]) == sha256_of_files([a, b], chunk_bytes=7) == both
    assert sha256_of_files([b, a]) != both


def test_a_file_replaced_atomically_is_whole_or_untouched(tmp_path):
    """contactflow.paths.replaced_atomically (summaries, manifests, dataset shards, checkpoints, tables): the
    file appears only when its writer finished; a writer that fails leaves the old file and no temporary one."""
    import numpy as np

    from contactflow.paths import replaced_atomically, write_text_atomic

    f = tmp_path / "table.json"
    assert write_text_atomic(f, '{"a": 1}') == f and f.read_text() == '{"a": 1}'
    with pytest.raises(RuntimeError, match="stopped"):
        with replaced_atomically(f) as tmp:
            tmp.write_text('{"a": 2, "b"')
            assert f.read_text() == '{"a": 1}'  # not in place while being written
            raise RuntimeError("stopped while writing")
    assert f.read_text() == '{"a": 1}' and sorted(p.name for p in tmp_path.iterdir()) == ["table.json"]
    npz = tmp_path / "round_000.npz"
    with replaced_atomically(npz, ".tmp.npz") as tmp:
        np.savez(tmp, x=np.arange(3))  # a name ending in .npz: numpy adds no second extension
    assert np.load(npz)["x"].tolist() == [0, 1, 2] and sorted(p.name for p in tmp_path.iterdir()) == [
        "round_000.npz", "table.json"]
