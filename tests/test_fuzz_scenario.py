"""Fuzzing (Hypothesis) of scenario files: operator scenarios (:func:`contactflow.operator.scenario.load_scenario`,
the Talos files) and teleop scenarios (:func:`contactflow.lac.teleop.load_teleop_scenario`, the G1
files, wrench events included).

Each example is a shipped scenario mutated (keys removed, retyped, out of range, non-finite, lists
cut or grown, unknown keys) or YAML-shaped garbage, written to a file. Outcome: a scenario that
then plays (its player stepped over the whole duration gives finite commands), or a ConfigError
naming the file; never another exception type, never a hang. More examples:
``CONTACTFLOW_FUZZ_EXAMPLES=2000``.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from contactflow.errors import ContactflowError
from contactflow.lac.teleop import TeleopPlayer, load_teleop_scenario
from contactflow.lac.wrench_injector import WrenchInjector, wrench_links
from contactflow.operator.scenario import ScenarioPlayer, load_scenario
from contactflow.robot import load_robot, robots_dir
from fuzz_support import fuzz_settings, mutate, outcome, yaml_values


def _docs(robot: str) -> dict[str, dict]:
    files = sorted((robots_dir() / robot / "scenarios").glob("*.yaml"))
    return {f.stem: yaml.safe_load(f.read_text()) for f in files}


KINDS = {"operator": ("talos", _docs("talos")), "teleop": ("g1", _docs("g1"))}


@pytest.fixture(scope="module")
def robots():
    return {"talos": load_robot("talos"), "g1": load_robot("g1")}


def _play_operator(sc) -> None:
    player = ScenarioPlayer(sc)
    for t in np.linspace(0.0, sc.duration_s + 0.1, 60):
        cmd = player.step(float(t), dt_s=0.002)
        assert all(np.isfinite(v).all() for v in cmd.velocities.values())
        assert all(np.isfinite(r) for r in cmd.force_rates.values())


def _play_teleop(sc, robot) -> None:
    player, injector = TeleopPlayer(sc), WrenchInjector(sc.wrenches, wrench_links(robot))
    for t in np.linspace(0.0, sc.duration_s + 0.1, 60):
        out = {**player.step(float(t)).values(), **injector.values(float(t))}
        assert all(np.isfinite(np.asarray(v, float)).all() for v in out.values()), out


@fuzz_settings(80)
@given(data=st.data())
def test_a_scenario_loads_and_plays_or_is_refused_naming_the_file(robots, tmp_path_factory, data):
    kind = data.draw(st.sampled_from(sorted(KINDS)), label="kind")
    robot_name, docs = KINDS[kind]
    name = data.draw(st.sampled_from(sorted(docs)), label="scenario")
    doc = data.draw(st.sampled_from(["mutated"] * 4 + ["garbage"]), label="how")
    doc = mutate(data, docs[name]) if doc == "mutated" else data.draw(yaml_values, label="document")
    path = tmp_path_factory.mktemp("sc") / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    robot = robots[robot_name]
    load = (lambda: load_scenario(path, robot)) if kind == "operator" else (lambda: load_teleop_scenario(path, robot))
    got = outcome(load, str(path), what=f"{kind} scenario")
    if isinstance(got, ContactflowError):
        return
    assert np.isfinite(got.duration_s) and got.duration_s > 0
    if kind == "operator":
        _play_operator(got)
    else:
        _play_teleop(got, robot)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_shipped_scenarios_load_and_play(robots, kind):
    robot_name, docs = KINDS[kind]
    robot = robots[robot_name]
    for name in docs:
        path = robots_dir() / robot_name / "scenarios" / f"{name}.yaml"
        if kind == "operator":
            if name == "bad_commands":  # a file kept to show the loader's refusals
                continue
            _play_operator(load_scenario(path, robot))
        else:
            _play_teleop(load_teleop_scenario(path, robot), robot)
