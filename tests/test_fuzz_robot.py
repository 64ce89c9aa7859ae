"""Fuzzing (Hypothesis) of robot files: :func:`contactflow.robot.load_robot` on mutated copies of
``robots/talos/robot.yaml`` and ``robots/g1/robot.yaml``.

The mutations hit the keys the loader and the port contracts read (``urdf``, ``joints``,
``joint_params``, margins, posture, extra frames, contacts, actuation, actuators, fall height,
control rate, ``teleop.arm_joints``, ``wrench_links``): keys removed, retyped, set out of range or
non-finite, lists cut or grown, unknown keys added. Outcome: a robot whose per-joint arrays are
finite and whose contracts build, or a ContactflowError (ConfigError / ModelError) naming the file;
never another exception type, never a hang. A load builds the pinocchio model from the URDF
(~0.2 s), so CI runs few examples; more: ``CONTACTFLOW_FUZZ_EXAMPLES=500``. Also the robots' PRIME
settings (``prime.yaml``, :func:`contactflow.prime.model.load_prime_robot`), mutated the same way.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from contactflow.contracts.messages import port_specs
from contactflow.errors import ContactflowError
from contactflow.robot import load_robot, robots_dir
from fuzz_support import fuzz_settings, mutate, outcome

#: the keys load_robot and port_specs read (the other sections belong to other components)
READ_KEYS = ("name", "urdf", "joints", "joint_params", "position_margin_rad", "position_margin_coef",
             "default_posture", "extra_frames", "contacts", "actuation", "actuators", "fall_height_m",
             "control_rate_hz", "teleop", "wrench_links")
ROBOT_FILES = {name: yaml.safe_load((robots_dir() / name / "robot.yaml").read_text()) for name in ("talos", "g1")}


@fuzz_settings(20)
@given(data=st.data())
def test_load_robot_gives_a_finite_robot_or_names_the_file(tmp_path_factory, data):
    name = data.draw(st.sampled_from(sorted(ROBOT_FILES)), label="robot")
    full = ROBOT_FILES[name]
    read = {k: v for k, v in full.items() if k in READ_KEYS}
    mutated = mutate(data, read, max_changes=2)
    doc = {**{k: v for k, v in full.items() if k not in READ_KEYS}, **mutated}  # removed keys stay removed
    folder = tmp_path_factory.mktemp(name)
    path = folder / "robot.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))

    def load():
        robot = load_robot(path)
        return robot, port_specs(robot)

    got = outcome(load, str(path), what=f"load_robot {name}")
    if isinstance(got, ContactflowError):
        return
    robot, specs = got
    for attr in ("K", "q_min", "q_max", "v_max", "tau_max", "position_margin", "theta_default", "q_default"):
        assert np.all(np.isfinite(getattr(robot, attr))), f"{attr} not finite: {getattr(robot, attr)}"
    assert np.isfinite(robot.fall_height_m) and robot.mass > 0
    assert specs["joint_command"].size == (4 * robot.n + 1 if robot.actuation == "pd" else robot.n + 1)


def test_the_shipped_robots_load_unchanged(tmp_path):
    for name, full in ROBOT_FILES.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(full, sort_keys=False))
        robot = load_robot(path)
        assert robot.n == len(full["joints"])


PRIME_FILES = {name: yaml.safe_load((robots_dir() / name / "prime.yaml").read_text())
               for name in ("talos", "g1", "go2") if (robots_dir() / name / "prime.yaml").exists()}


@fuzz_settings(30)
@given(data=st.data())
def test_prime_settings_load_or_name_the_file(tmp_path_factory, data):
    """``robots/<robot>/prime.yaml`` (:func:`contactflow.prime.model.load_prime_robot`), mutated: the
    contact points' frames and offsets, friction, armature, identified bodies."""
    import dataclasses

    from contactflow.prime.model import load_prime_robot

    name = data.draw(st.sampled_from(sorted(PRIME_FILES)), label="robot")
    robot = _robot(name)
    folder = tmp_path_factory.mktemp(f"prime_{name}")
    path = folder / "prime.yaml"
    path.write_text(yaml.safe_dump(mutate(data, PRIME_FILES[name]), sort_keys=False))
    got = outcome(lambda: load_prime_robot(dataclasses.replace(robot, directory=folder)), str(path), what="prime.yaml")
    if isinstance(got, ContactflowError):
        return
    assert got.config.mu > 0 and np.isfinite(got.config.mu)
    for p in got.points:
        assert np.all(np.isfinite(got.model.frames[p.frame_id].placement.translation)) and p.radius_m >= 0


_ROBOTS: dict = {}


def _robot(name: str):
    if name not in _ROBOTS:
        _ROBOTS[name] = load_robot(name)
    return _ROBOTS[name]


def test_a_listed_mimic_joint_is_refused_naming_it(tmp_path):
    """A URDF <mimic> joint listed as an actuated joint would be independent in pinocchio and coupled in
    MuJoCo: load_robot refuses it, naming the joint and the one it mimics (Talos' gripper joints)."""
    from contactflow.errors import ModelError
    from contactflow.robot import resolve_package_path, urdf_mimic_joints

    doc = dict(ROBOT_FILES["talos"])
    # the full Talos URDF: its gripper's mimic joints are revolute (fixed in the reduced one)
    doc["urdf"] = {"package": "example-robot-data", "path": "robots/talos_data/robots/talos_full_v2.urdf"}
    mimic = urdf_mimic_joints(resolve_package_path(doc["urdf"]["package"], doc["urdf"]["path"]))
    assert len(mimic) == 12 and not set(mimic) & set(doc["joints"])
    j, of = "gripper_left_inner_double_joint", "gripper_left_joint"
    assert mimic[j] == of
    doc["joints"] = list(doc["joints"]) + [j]
    (tmp_path / "robot.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(ModelError, match=rf"joints: '{j}' mimics '{of}'"):
        load_robot(tmp_path / "robot.yaml")
