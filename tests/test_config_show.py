"""``contactflow config show``: every node's documented defaults load back to the defaults.

Also checks that the registry (:data:`contactflow.cli.config.NODE_CONFIGS`) names the sections and
classes the node files really load (read statically from ``nodes/*.py``), and the docstring parser
on a synthetic docstring.
"""

from __future__ import annotations

import ast
import dataclasses
import os
from pathlib import Path

import pytest
import yaml

from contactflow import cli
from contactflow.config import field_docs, load_config, to_dict
from contactflow.cli.config import NODE_CONFIGS, node_sections, render_node_config
from contactflow.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent

CASES = [(n, "talos") for n in NODE_CONFIGS] + [("mujoco_driver", "g1")]


def _plain(x):
    """to_dict output with tuples as lists (what YAML gives back)."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def _rendered(node, robot):
    try:
        return render_node_config(node, robot)
    except ModuleNotFoundError as exc:  # prime_estimator without the [prime] extra
        pytest.skip(f"optional package missing: {exc.name}")


@pytest.mark.parametrize("node,robot", CASES)
def test_show_loads_back_to_the_defaults(node, robot):
    text = _rendered(node, robot)
    data = yaml.safe_load(text)
    for s, cls in node_sections(node, robot):
        section = data if s.section is None else data[s.section]
        assert section == _plain(to_dict(cls())), (node, s.section)
        assert load_config(cls, section, source=f"show {node}") == cls()
    expected = {s.section for s, _ in node_sections(node, robot)}
    if None not in expected:
        assert set(data) == expected


def _key_comments(text: str) -> dict[str, list[str]]:
    """dotted key -> the comment lines right above it, for every key line of the YAML text."""
    out, stack, comments = {}, [], []
    for ln in text.splitlines():
        body = ln.strip()
        if not body:
            comments = []
            continue
        indent = len(ln) - len(ln.lstrip())
        if body.startswith("#"):
            comments.append(body[1:].strip())
            continue
        key = body.split(":", 1)[0]
        stack = [(i, k) for i, k in stack if i < indent] + [(indent, key)]
        out[".".join(k for _, k in stack)] = comments
        comments = []
    return out


def _documented_fields(cls, prefix):
    docs = field_docs(cls)
    for f in dataclasses.fields(cls):
        yield f"{prefix}{f.name}", docs.get(f.name)
        tp = type(getattr(cls(), f.name))
        if dataclasses.is_dataclass(tp):
            yield from _documented_fields(tp, f"{prefix}{f.name}.")


@pytest.mark.parametrize("node,robot", CASES)
def test_every_key_is_shown_under_its_documentation(node, robot):
    keys = _key_comments(_rendered(node, robot))
    for s, cls in node_sections(node, robot):
        prefix = "" if s.section is None else f"{s.section}."
        for key, doc in _documented_fields(cls, prefix):
            assert doc, f"{cls.__name__}: field {key} has no entry in an Attributes: docstring section"
            assert key in keys, key
            assert " ".join(keys[key]) == " ".join(doc.split()), key


def test_field_docs_parses_attributes_sections():
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Base:
        """Base.

        Attributes:
            a_m: first line
                continued [m].
            b, c: shared text.
        """

        a_m: float = 1.0
        b: int = 0
        c: int = 0

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Child(Base):
        """Child.

        Attributes:
            b: overridden. d: compact entry. e_s: another [s].

        Raises:
            ValueError: not a field.
        """

        d: float = 0.0
        e_s: float = 0.0
        f: float = 0.0

    docs = field_docs(Child)
    assert docs == {"a_m": "first line continued [m].", "b": "overridden.", "c": "shared text.",
                    "d": "compact entry.", "e_s": "another [s]."}


def test_registry_matches_the_node_files():
    """Each node's config loads (static read of nodes/*.py) are the sections NODE_CONFIGS lists."""
    loaders = {"load_teleop_config": ("teleop", "TeleopConfig"), "load_expert_config": ("lac_expert", "ExpertConfig")}
    found = {}
    for path in sorted((ROOT / "nodes").glob("*.py")):
        if path.name.startswith("_"):
            continue
        for call in ast.walk(ast.parse(path.read_text())):
            if not isinstance(call, ast.Call):
                continue
            name = getattr(call.func, "id", getattr(call.func, "attr", ""))
            if name == "load_node_config":
                cls_arg = call.args[0]
                cls_name = cls_arg.id if isinstance(cls_arg, ast.Name) else cls_arg.func.id
                section = call.args[2].value if len(call.args) > 2 else None
                req = next((k.value for k in call.keywords if k.arg == "required"), ast.Constant(True))
                # required=<flag> is not None: the section comes from that flag's file (own_flag)
                required = req.value if isinstance(req, ast.Constant) else ast.unparse(req)
                found.setdefault(path.stem, set()).add((section, cls_name, required, "node"))
            elif name in loaders:
                found.setdefault(path.stem, set()).add((*loaders[name], True, name.split("_")[1]))
    registry = {node: {(s.section, s.config.split(":")[1],
                        f"args.{s.own_flag[2:].replace('-', '_')} is not None" if s.own_flag else s.required, s.loader)
                       for s in sections}
                for node, sections in NODE_CONFIGS.items()}
    assert found == registry


def test_unknown_node_is_one_line_naming_the_known_ones(capsys):
    with pytest.raises(ConfigError, match="unknown node 'nope'; nodes with a configuration: .*seiko_controller"):
        render_node_config("nope")
    assert cli.main(["config", "show", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "input_filter" in err and "lac_expert" in err


def test_list_names_every_node(capsys):
    assert cli.main(["config", "show"]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.split()[:2] == ["node", "sections"] and "--config" in header  # says what the columns are
    assert [ln.split()[0] for ln in lines] == list(NODE_CONFIGS)
    assert lines[list(NODE_CONFIGS).index("seiko_controller")].split(None, 1)[1] == \
        "seiko_controller, seiko_retargeting (optional)"
    assert cli.main(["config", "show", "--list"]) == 0
    assert capsys.readouterr().out.splitlines() == [header, *lines]


def test_shown_file_configures_the_node(tmp_path):
    """The printed file, one value edited, is accepted by the node's own loader with that value."""
    from contactflow.nodes._runtime import load_node_config
    from contactflow.seiko.controller import ControllerConfig

    text = render_node_config("seiko_controller").replace("  kp_per_s: 0.2  #", "  kp_per_s: 0.3  #")
    path = tmp_path / "c.yaml"
    path.write_text(text)
    cfg = load_node_config(ControllerConfig, str(path), "seiko_controller")
    assert cfg == dataclasses.replace(ControllerConfig(), kp_per_s=0.3)


def test_robot_option_picks_the_robot_dependent_class(capsys):
    assert cli.main(["config", "show", "mujoco_driver", "--robot", "g1"]) == 0
    g1 = capsys.readouterr().out
    assert cli.main(["config", "show", "mujoco_driver"]) == 0
    talos = capsys.readouterr().out
    assert "PDSimConfig" in g1 and "  stability_margin: 0.8  # float" in g1 and "interpolate_commands" not in g1
    assert "SimConfig" in talos and "  interpolate_commands: true  # bool" in talos and "stability_margin" not in talos


@pytest.mark.parametrize("argv", [["lac", "train", "--out", "x"], ["lac", "eval"], ["lac", "augment", "--episodes", "1", "--out", "x"],
                                  ["lac", "train-teacher", "--out", "x"], ["prime", "estimate", "r.parquet"]])
def test_a_second_config_file_is_refused_naming_both(argv, capsys):
    """``--config`` takes one file: argparse would keep the last of two silently (the first's keys lost, the
    shipped defaults run); every command-line ``--config`` (contactflow.paths.OneFileAction) refuses it."""
    parser = cli.build_parser()
    with pytest.raises(SystemExit) as exc:
        parser.parse_args([*argv, "--config", "a.yaml", "--config", "b.yaml"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--config given twice (a.yaml, b.yaml)" in err
    assert parser.parse_args([*argv, "--config", "a.yaml"]).config == "a.yaml"


def test_the_seiko_grid_refuses_a_second_config_file(capsys):
    from contactflow.seiko import grid

    with pytest.raises(SystemExit) as exc:
        grid.main(["--config", "a.yaml", "--config", "b.yaml"])
    assert exc.value.code == 2 and "--config given twice (a.yaml, b.yaml)" in capsys.readouterr().err


def test_a_missing_file_suggests_a_close_name_in_its_folder(tmp_path, monkeypatch):
    from contactflow.config import read_yaml

    (tmp_path / "smoke_2s.yaml").write_text("a: 1\n")
    with pytest.raises(ConfigError, match=r"smoke2s.yaml: file not found \(did you mean 'smoke_2s.yaml'\?\)$"):
        read_yaml(tmp_path / "smoke2s.yaml")
    with pytest.raises(ConfigError, match=r"other.yaml: file not found$"):
        read_yaml(tmp_path / "other.yaml")
    (tmp_path / "sub").mkdir()
    with pytest.raises(ConfigError, match=r"sub/smoke_2s.yaml: file not found$"):  # only the file's own folder
        read_yaml(tmp_path / "sub" / "smoke_2s.yaml")
    monkeypatch.chdir(tmp_path)  # read_yaml reads the path as given: the same name elsewhere is not suggested
    with pytest.raises(ConfigError, match=r"^robots/g1/lac_train.yaml: file not found$"):
        read_yaml("robots/g1/lac_train.yaml")
    from contactflow.config import near_file_names

    assert near_file_names(Path("smoke2s.yaml"), [tmp_path / "smoke_2s.yaml", tmp_path]) == " (did you mean 'smoke_2s.yaml'?)"
    (tmp_path / "locked").mkdir(mode=0o300)  # a folder that cannot be listed: the one line still
    if not os.access(tmp_path / "locked", os.R_OK):  # (root reads any folder)
        with pytest.raises(ConfigError, match=r"locked/x.yaml: file not found$"):
            read_yaml(tmp_path / "locked" / "x.yaml")


def test_a_key_given_twice_in_a_config_file_is_refused_naming_the_file_and_both_lines(tmp_path):
    """PyYAML keeps the last of two equal keys silently: a section appended to a copy of the tiny training file
    (``optim: {force_teacher_prob: 0.0}``) replaced the file's own ``optim`` (the full recipe's epochs and batch
    then ran). Every file read by contactflow.config.read_yaml refuses it, at any depth; the shipped file loads."""
    from contactflow.lac.train.config import load_train_config

    tiny = ROOT / "examples" / "lac_train_tiny.yaml"
    assert "\noptim:" in tiny.read_text()
    layer = tmp_path / "mine.yaml"
    layer.write_text(tiny.read_text() + "optim: {force_teacher_prob: 0.0}\n")
    first = next(i for i, line in enumerate(tiny.read_text().splitlines(), 1) if line.startswith("optim:"))
    last = len(layer.read_text().splitlines())
    with pytest.raises(ConfigError, match=rf"mine.yaml: not valid YAML \(line {last}, column 1\): key 'optim' given "
                                          rf"twice in one mapping \(first at line {first}\)"):
        load_train_config(layer)
    layer.write_text("student:\n  compliance_input: true\n  latent_dim: 16\n  compliance_input: false\n")
    with pytest.raises(ConfigError, match=r"\(line 4, column 3\): key 'compliance_input' given twice .*first at line 2"):
        load_train_config(layer)
    layer.write_text("student: {compliance_input: true}\noptim: {force_teacher_prob: 0.0}\n")  # merged: loads
    cfg = load_train_config(layer)
    assert cfg.student.compliance_input and cfg.optim.force_teacher_prob == 0.0
    assert load_train_config(tiny).optim.batch_size == 64
