"""Fuzzing (Hypothesis) of node configuration: every config dataclass of every node with a ``--config``.

Two levels: :func:`contactflow.config.load_config` on each node's config class (the registry
:data:`contactflow.cli.config.NODE_CONFIGS`; robot-dependent classes for Talos and G1) with the
defaults mutated (keys removed, retyped, out of range, non-finite, unknown keys added) or replaced
by YAML-shaped garbage; and the node's own file loader (``contactflow check``'s
:func:`check_node_config_files`: sections, the teleop and expert loaders) on YAML text written to a
file: mutated sections, documents that are not mappings, invalid YAML, mixed key types,
self-referencing aliases, deep nesting. Outcome: the config, or a ConfigError naming the file
(and the key); never another exception type, never a hang. More examples:
``CONTACTFLOW_FUZZ_EXAMPLES=2000``.
"""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from contactflow.cli.config import NODE_CONFIGS, check_node_config_files, node_sections
from contactflow.config import load_config, to_dict
from contactflow.errors import ConfigError
from fuzz_support import fuzz_settings, mutate, no_hang, outcome, yaml_values

ROBOTS = ("talos", "g1")


def _classes():
    out = {}
    for robot in ROBOTS:
        for node in NODE_CONFIGS:
            try:
                sections = node_sections(node, robot)
            except ModuleNotFoundError:  # an optional extra (prime: crocoddyl)
                continue
            for s, cls in sections:
                out.setdefault(f"{cls.__module__}.{cls.__name__}", (cls, robot))
    return out


CLASSES = _classes()


def test_every_node_config_class_is_fuzzed():
    names = {c.rsplit(".", 1)[1] for c in CLASSES}
    assert {"InputFilterConfig", "RetargetingConfig", "ControllerConfig", "SimConfig", "PDSimConfig",
            "TeleopConfig", "ExpertConfig"} <= names, names


@st.composite
def config_docs(draw, cls):
    defaults = to_dict(cls())
    kind = draw(st.sampled_from(["mutated", "mutated", "mutated", "garbage", "mapping"]))
    if kind == "mutated":
        return mutate(_Data(draw), defaults)
    if kind == "garbage":
        return draw(yaml_values)
    return draw(st.dictionaries(st.sampled_from(sorted(defaults)) | st.text(max_size=8), yaml_values, max_size=4))


class _Data:
    """``st.data()``-like wrapper of a composite's ``draw`` (so :func:`mutate` runs inside a strategy)."""

    def __init__(self, draw):
        self.draw = lambda strategy, label=None: draw(strategy)


@fuzz_settings(100)
@given(data=st.data())
def test_load_config_returns_the_config_or_a_config_error_naming_the_file(data):
    name = data.draw(st.sampled_from(sorted(CLASSES)), label="class")
    cls, _ = CLASSES[name]
    doc = data.draw(config_docs(cls), label="document")
    got = outcome(lambda: load_config(cls, doc, source="fuzz.yaml:section"), "fuzz.yaml:section", what=name)
    if not isinstance(got, ConfigError):
        assert isinstance(got, cls)
        # an accepted config is what the file said: its values round-trip through the loader
        assert load_config(cls, to_dict(got), source="again") == got


_TEXTS = [
    "", "~", "- 1\n- 2\n", "just text", "{", "a: [1, 2", "\t- x", "1: {}\nseiko_controller: {}\n",
    "a: &x [*x]\n", "input_filter: &x {cutoff_hz: *x}\n", "[" * 5000 + "]" * 5000, "{a: 1, a: 2}",
    "input_filter: !!python/object:os.system {}\n", "? [1, 2]\n: 3\n", "teleop: 1e400\n", "x: 1" + "0" * 400 + "\n",
    "lac_expert: []\n", "teleop: {max_lin_vel_mps: .nan}\n", "\x00\x01", "key: \"\\ud800\"\n",
]


@st.composite
def config_files(draw, node):
    """YAML text of a ``--config`` file for ``node``."""
    kind = draw(st.sampled_from(["sections", "sections", "flat", "garbage", "text"]))
    if kind == "text":
        return draw(st.sampled_from(_TEXTS) | st.text(max_size=40))
    if kind == "garbage":
        doc = draw(yaml_values)
    else:
        doc = {}
        for s, cls in node_sections(node, "g1" if node in ("teleop", "wrench_injector", "lac_expert") else "talos"):
            body = mutate(_Data(draw), to_dict(cls()))
            if kind == "flat" or s.section is None:
                doc.update(body if isinstance(body, dict) else {})
            else:
                doc[s.section] = body
    try:
        return yaml.safe_dump(doc, sort_keys=False)
    except yaml.YAMLError:
        return "{}"


FILE_NODES = sorted(n for n in NODE_CONFIGS if n != "prime_estimator" or any("PrimeConfig" in c for c in CLASSES))


@fuzz_settings(40)
@given(data=st.data())
def test_a_node_config_file_loads_or_is_refused_naming_the_file(tmp_path_factory, data):
    node = data.draw(st.sampled_from(FILE_NODES), label="node")
    robot = "g1" if node in ("teleop", "wrench_injector", "lac_expert") else "talos"
    text = data.draw(config_files(node), label="file")
    path = tmp_path_factory.mktemp("cfg") / f"{node}.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    with no_hang(20.0, f"{node} config"):
        problems = check_node_config_files(node, {"--config": str(path)}, robot)
    for flag, msg in problems:
        assert str(path) in msg, f"{node} {flag}: the message does not name the file: {msg}"
        assert "\n" not in msg.strip(), msg


@pytest.fixture(scope="module")
def g1():
    from contactflow.robot import load_robot

    return load_robot("g1")


@pytest.mark.parametrize("text", _TEXTS, ids=range(len(_TEXTS)))
def test_every_hostile_yaml_text_is_a_config_error(tmp_path, g1, text):
    """The node loaders (sections, the teleop and the flat expert file) on hostile text: each loads
    (defaults) or raises a one-line ConfigError naming the file."""
    from contactflow.lac.expert import load_expert_config
    from contactflow.lac.teleop import load_teleop_config
    from contactflow.nodes._runtime import load_node_config
    from contactflow.seiko.controller import ControllerConfig

    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    for what, load in (("section", lambda: load_node_config(ControllerConfig, str(path), "seiko_controller", required=False)),
                       ("teleop", lambda: load_teleop_config(g1, path)), ("expert", lambda: load_expert_config(path))):
        outcome(load, str(path), seconds=10.0, what=f"{what} loader")
