"""Scenario files and their playback (contactflow.operator.scenario)."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from contactflow.config import load_config
from contactflow.errors import ConfigError
from contactflow.operator.input_filter import InputFilterConfig
from contactflow.operator.scenario import OperatorCommand, ScenarioPlayer, load_scenario
from contactflow.robot import load_robot


@pytest.fixture(scope="module")
def robot():
    return load_robot("talos")


def _write(tmp_path, body: str, name: str = "scn.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return p


GOOD = """
    description: test
    commands:
      - {effector: left_hand, start_s: 1.0, end_s: 2.0, linear_mps: [0.1, 0, 0]}
      - {effector: left_hand, start_s: 2.0, end_s: 4.0, offset_m: [0, 0.2, 0]}
      - {effector: right_hand, start_s: 0.5, end_s: 1.5, angular_radps: [0, 0, 0.3]}
"""


# ---- shipped scenarios ---------------------------------------------------------------------
@pytest.mark.parametrize("name", ["hand_forward", "smoke_2s"])
def test_shipped_scenarios_load(robot, name):
    scn = load_scenario(robot.directory / "scenarios" / f"{name}.yaml", robot)
    assert scn.duration_s > 0
    assert scn.contacts == ()
    assert set(scn.effectors) == {"left_hand", "right_hand"}
    assert all(s.effector in scn.effectors for s in scn.segments)


def test_hand_forward_content(robot):
    scn = load_scenario("hand_forward", robot)  # bare name -> robots/talos/scenarios
    assert scn.duration_s == pytest.approx(18.5)
    player = ScenarioPlayer(scn)
    np.testing.assert_allclose(player.step(2.0).velocities["left_hand"], 0.0)
    np.testing.assert_allclose(player.step(3.0).velocities["left_hand"], [0.05, 0, 0, 0, 0, 0])
    np.testing.assert_allclose(player.step(10.0).velocities["left_hand"], 0.0)
    np.testing.assert_allclose(player.step(12.0).velocities["left_hand"], [-0.05, 0, 0, 0, 0, 0])
    # integrated displacement (mean twist over each step) is exactly out and back
    dt = 0.002
    disp = sum(player.step(k * dt, dt_s=dt).velocities["left_hand"][:3] * dt for k in range(int(18.5 / dt)))
    np.testing.assert_allclose(disp, 0.0, atol=1e-12)


def test_smoke_scenario_is_2s_and_moves_left_hand(robot):
    scn = load_scenario("smoke_2s", robot)
    assert scn.duration_s == 2.0
    player = ScenarioPlayer(scn)
    assert np.any(player.step(1.0).velocities["left_hand"])
    assert player.step(2.0).finished


def test_shipped_scenario_speeds_within_filter_limits(robot):
    cfg = InputFilterConfig()
    for name in ("hand_forward", "smoke_2s"):
        for s in load_scenario(name, robot).segments:
            assert np.linalg.norm(s.twist[:3], np.inf) <= cfg.max_vel_lin_mps
            assert np.linalg.norm(s.twist[3:], np.inf) <= cfg.max_vel_ang_radps


# ---- player ------------------------------------------------------------------------------
def test_player_velocities_at_times(robot, tmp_path):
    scn = load_scenario(_write(tmp_path, GOOD), robot)
    assert scn.duration_s == pytest.approx(5.0)  # last end 4.0 + default tail 1.0
    player = ScenarioPlayer(scn)
    player.reset()
    cmd = player.step(0.0)
    assert isinstance(cmd, OperatorCommand)
    assert set(cmd.velocities) == {"left_hand", "right_hand"}
    assert not cmd.finished
    for v in cmd.velocities.values():
        assert v.shape == (6,) and not np.any(v)
    np.testing.assert_array_equal(player.step(1.0).velocities["left_hand"], [0.1, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(player.step(1.0).velocities["right_hand"], [0, 0, 0, 0, 0, 0.3])
    np.testing.assert_allclose(player.step(2.0).velocities["left_hand"], [0, 0.1, 0, 0, 0, 0])  # 0.2 m / 2 s
    np.testing.assert_array_equal(player.step(1.5).velocities["right_hand"], 0.0)  # end exclusive
    np.testing.assert_array_equal(player.step(4.0).velocities["left_hand"], 0.0)
    assert not player.step(4.999).finished
    assert player.step(5.0).finished
    # mean twist over a step straddling a boundary
    np.testing.assert_allclose(player.step(0.999, dt_s=0.002).velocities["left_hand"], [0.05, 0, 0, 0, 0, 0])
    # returned arrays are read-only
    with pytest.raises(ValueError):
        player.step(1.0).velocities["left_hand"][0] = 1.0
    with pytest.raises(ValueError):
        player.step(float("nan"))


def test_explicit_duration_and_empty_commands(robot, tmp_path):
    scn = load_scenario(_write(tmp_path, "duration_s: 3.0\n"), robot)
    assert scn.duration_s == 3.0 and scn.segments == ()
    assert ScenarioPlayer(scn).step(3.0).finished


# ---- validation errors -------------------------------------------------------------------
BAD = {
    "unknown_effector": (
        "commands:\n  - {effector: left_elbow, start_s: 0, end_s: 1, linear_mps: [0, 0, 0.1]}\n",
        ["commands[0].effector", "left_elbow", "left_foot, right_foot, left_hand, right_hand"],
    ),
    "missing_key": (
        "commands:\n  - {effector: left_hand, start_s: 0, linear_mps: [0, 0, 0.1]}\n",
        ["commands[0]", "end_s", "missing"],
    ),
    "missing_command_kind": (
        "commands:\n  - {effector: left_hand, start_s: 0, end_s: 1}\n",
        ["commands[0]", "missing key", "offset_m"],
    ),
    "both_kinds": (
        "commands:\n  - {effector: left_hand, start_s: 0, end_s: 1, offset_m: [0, 0, 0.1], linear_mps: [0, 0, 1]}\n",
        ["commands[0]", "not both"],
    ),
    "unknown_key_command": (
        "commands:\n  - {effector: left_hand, start_s: 0, end_s: 1, linear_mps: [0, 0, 0.1], speed: 3}\n",
        ["commands[0]", "unknown key", "speed"],
    ),
    "unknown_key_top": ("duration_s: 2.0\nrepeat: true\n", ["unknown key", "repeat"]),
    "nan": (
        "commands:\n  - {effector: left_hand, start_s: 0, end_s: 1, linear_mps: [0, .nan, 0.1]}\n",
        ["commands[0]", "linear_mps[1]", "finite"],
    ),
    "inf_duration": ("duration_s: .inf\n", ["duration_s", "finite"]),
    "negative_start": (
        "commands:\n  - {effector: left_hand, start_s: -0.5, end_s: 1, linear_mps: [0, 0, 0.1]}\n",
        ["commands[0].start_s", ">= 0"],
    ),
    "reversed_times": (
        "commands:\n  - {effector: left_hand, start_s: 2, end_s: 1, linear_mps: [0, 0, 0.1]}\n",
        ["commands[0].end_s", "end_s > start_s"],
    ),
    "negative_tail": ("tail_s: -1\ncommands: []\nduration_s: 1\n", ["tail_s", ">= 0"]),
    "negative_duration": ("duration_s: -1\n", ["duration_s", "> 0"]),
    "duration_too_short": (
        "duration_s: 1.0\ncommands:\n  - {effector: left_hand, start_s: 0, end_s: 2, linear_mps: [0, 0, 0.1]}\n",
        ["duration_s", "commands[0]"],
    ),
    "empty": ("description: nothing\n", ["duration_s", "empty"]),
    "overlap": (
        "commands:\n"
        "  - {effector: left_hand, start_s: 0, end_s: 2, linear_mps: [0, 0, 0.1]}\n"
        "  - {effector: right_hand, start_s: 0, end_s: 2, linear_mps: [0, 0, 0.1]}\n"
        "  - {effector: left_hand, start_s: 1.5, end_s: 3, offset_m: [0.1, 0, 0]}\n",
        ["commands[2]", "overlaps commands[0]", "left_hand"],
    ),
    "vector_length": (
        "commands:\n  - {effector: left_hand, start_s: 0, end_s: 1, linear_mps: [0, 0.1]}\n",
        ["commands[0]", "linear_mps", "expected 3 values, got 2"],
    ),
    "vector_type": (
        "commands:\n  - {effector: left_hand, start_s: 0, end_s: 1, offset_m: 0.1}\n",
        ["commands[0]", "offset_m", "list"],
    ),
    "enabled_contact": (
        "commands:\n  - {effector: left_foot, start_s: 0, end_s: 1, linear_mps: [0, 0, 0.1]}\n",
        ["commands[0].effector", "left_foot", "enabled contact", "left_hand, right_hand"],
    ),
    "command_not_mapping": ("commands:\n  - left_hand\n", ["commands[0]", "mapping"]),
    "top_not_mapping": ("- a\n- b\n", ["top level", "mapping"]),
    "command_on_foot_before_its_disable_event": (
        "contacts:\n  - {t_s: 2.0, effector: right_foot, enable: false}\n"
        "commands:\n  - {effector: right_foot, start_s: 1.0, end_s: 3.0, linear_mps: [0, 0, 0.01]}\n",
        ["commands[0].effector", "right_foot", "enabled contact at 1.0 s"],
    ),
    "push_overlap": (
        "duration_s: 5\npush:\n  - {effector: left_hand, start_s: 1, end_s: 3}\n"
        "  - {effector: left_hand, start_s: 2, end_s: 4, normal_force_rate_n_per_s: 1}\n",
        ["push[1]", "overlaps push[0]", "left_hand"],
    ),
    "push_after_end": (
        "duration_s: 5\npush:\n  - {effector: left_hand, start_s: 1, end_s: 6}\n",
        ["push[0]", "duration_s = 5"],
    ),
    "push_nan_rate": (
        "duration_s: 5\npush:\n  - {effector: left_hand, start_s: 1, end_s: 2, normal_force_rate_n_per_s: .nan}\n",
        ["push[0]", "normal_force_rate_n_per_s"],
    ),
    "contact_event_missing_key": (
        "duration_s: 5\ncontacts:\n  - {t_s: 1.0, effector: left_hand}\n",
        ["contacts[0]", "enable", "missing"],
    ),
    "contact_event_bad_bool": (
        "duration_s: 5\ncontacts:\n  - {t_s: 1.0, effector: left_hand, enable: 1}\n",
        ["contacts[0]", "enable", "true or false"],
    ),
    "contact_event_unknown_effector": (
        "duration_s: 5\ncontacts:\n  - {t_s: 1.0, effector: nose, enable: true}\n",
        ["contacts[0].effector", "nose"],
    ),
    "contact_event_time": (
        "duration_s: 5\ncontacts:\n  - {t_s: 6.0, effector: left_hand, enable: true}\n",
        ["contacts[0].t_s", "6.0"],
    ),
    "not_yaml": ("commands: [\n", ["not valid YAML"]),
}


def test_contact_events_and_push_segments_play_back(robot, tmp_path):
    path = tmp_path / "switch.yaml"
    path.write_text(
        "contacts:\n  - {t_s: 1.0, effector: right_foot, enable: false}\n"
        "  - {t_s: 4.0, effector: right_foot, enable: true}\n  - {t_s: 0.5, effector: left_hand, enable: true}\n"
        "commands:\n  - {effector: right_foot, start_s: 2.0, end_s: 3.0, offset_m: [0, 0, 0.05]}\n"
        "push:\n  - {effector: left_hand, start_s: 1.0, end_s: 2.0, normal_force_rate_n_per_s: 8.0}\n"
    )
    scn = load_scenario(path, robot)
    assert [e.t_s for e in scn.contacts] == [0.5, 1.0, 4.0]  # sorted
    assert "right_foot" in scn.effectors
    assert scn.duration_s == pytest.approx(5.0)  # last event (4 s) + tail 1 s
    p = ScenarioPlayer(scn)
    c = p.step(0.2)
    assert c.enable == {"left_foot": True, "right_foot": True, "left_hand": False, "right_hand": False}
    c = p.step(1.5)
    assert c.enable["right_foot"] is False and c.enable["left_hand"] is True
    assert c.push["left_hand"] and c.force_rates["left_hand"] == 8.0
    c = p.step(2.5)
    assert not c.push["left_hand"] and c.force_rates["left_hand"] == 0.0
    assert c.velocities["right_foot"][2] == pytest.approx(0.05)
    assert p.step(4.0).enable["right_foot"] is True


@pytest.mark.parametrize("case", sorted(BAD))
def test_validation_errors_name_file_key_and_reason(robot, tmp_path, case):
    body, fragments = BAD[case]
    path = tmp_path / f"{case}.yaml"
    path.write_text(body)
    with pytest.raises(ConfigError) as info:
        load_scenario(path, robot)
    msg = str(info.value)
    assert str(path) in msg, msg
    for frag in fragments:
        assert frag in msg, f"{frag!r} not in {msg!r}"


def test_missing_file(robot, tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_scenario(tmp_path / "nope.yaml", robot)


def test_input_filter_config_loads_and_validates():
    cfg = load_config(InputFilterConfig, {"cutoff_hz": 3.0}, source="x.yaml:input_filter")
    assert cfg.cutoff_hz == 3.0 and cfg.clamp_radius_lin_m == 0.03
    with pytest.raises(ConfigError, match="x.yaml:input_filter.*max_vel_lin_mps"):
        load_config(InputFilterConfig, {"max_vel_lin_mps": 0.0}, source="x.yaml:input_filter")
    with pytest.raises(ConfigError, match="clamp_radius_ang_rad"):
        load_config(InputFilterConfig, {"clamp_radius_ang_rad": 4.0}, source="x.yaml")
    with pytest.raises(ConfigError, match="unknown key"):
        load_config(InputFilterConfig, {"cutoff": 3.0}, source="x.yaml")


def test_live_operator_and_keyboard(robot):
    import numpy as np

    from contactflow.errors import ContractError
    from contactflow.contracts.messages import port_specs
    from contactflow.operator.live import KeyboardMapper, LiveOperator

    op = LiveOperator(list(robot.contacts), {e: c.enabled for e, c in robot.contacts.items()})
    kb = KeyboardMapper(op, speed_mps=0.02)
    assert kb.selected == "left_hand"
    kb.key("w")
    kb.key("e")
    kb.key("p")
    kb.key("+")
    vals = op.values()
    port_specs(robot)["operator_command"].pack(vals)  # matches the contract
    assert np.allclose(vals["twist.left_hand"], [0.02, 0, 0, 0, 0, 0])
    assert list(vals["enable"]) == [1, 1, 1, 0] and list(vals["push"]) == [0, 0, 1, 0]
    assert vals["force_rate"][2] == 5.0
    kb.key("2")
    kb.key("e")
    assert op.values()["enable"][1] == 0.0  # right foot disable requested (the Retargeting decides)
    with pytest.raises(ContractError, match="finite"):
        op.set_twist("left_hand", [float("nan")] * 6)
    with pytest.raises(ContractError, match="unknown effector"):
        op.set_enable("nose", True)


def test_keyboard_through_a_pseudo_terminal(robot):
    """Keys typed into a real (pseudo-)terminal reach the operator command without Enter."""
    import os
    import pty
    import termios

    import numpy as np

    from contactflow.errors import ContractError
    from contactflow.operator.live import KeyboardMapper, LiveOperator, TerminalKeys

    op = LiveOperator(list(robot.contacts), {e: c.enabled for e, c in robot.contacts.items()})
    kb = KeyboardMapper(op, speed_mps=0.02)
    master, slave = pty.openpty()
    try:
        before = termios.tcgetattr(slave)
        with TerminalKeys(slave) as term:
            assert not termios.tcgetattr(slave)[3] & termios.ICANON  # cbreak: no line buffering
            assert term.read() == ""  # nothing typed: returns at once
            os.write(master, b"w")  # no Enter
            typed = ""
            for _ in range(100):
                typed += term.read()
                if typed:
                    break
            assert typed == "w"
            for k in typed:
                kb.key(k)
            assert np.allclose(op.values()["twist.left_hand"], [0.02, 0, 0, 0, 0, 0])
            os.write(master, b"ep ")
            typed = ""
            for _ in range(100):
                typed += term.read()
                if len(typed) == 3:
                    break
            for k in typed:
                kb.key(k)
        assert termios.tcgetattr(slave) == before  # settings restored
        vals = op.values()
        assert not vals["twist.left_hand"].any()  # space stops
        assert vals["enable"][2] == 1.0 and vals["push"][2] == 1.0
    finally:
        os.close(master)
        os.close(slave)
    r, w = os.pipe()
    try:
        with pytest.raises(ContractError, match="not a tty"):
            with TerminalKeys(r):
                pass
    finally:
        os.close(r)
        os.close(w)


def test_spacemouse_source_with_a_stand_in_device(robot, monkeypatch):
    """SpaceMouseSource against a stand-in pyspacemouse module (no physical device here)."""
    import sys
    import types

    import numpy as np

    from contactflow.errors import ContractError
    from contactflow.operator.live import LiveOperator, SpaceMouseSource

    class State:
        def __init__(self, x=0.0, y=0.0, z=0.0, roll=0.0, pitch=0.0, yaw=0.0, buttons=(0, 0)):
            self.x, self.y, self.z, self.roll, self.pitch, self.yaw, self.buttons = x, y, z, roll, pitch, yaw, list(buttons)

    class Device:
        def __init__(self):
            self.state, self.lost = State(), False

        def read(self):
            if self.lost:
                raise OSError("device unplugged")
            return self.state

    devices = [Device(), Device()]
    fake = types.ModuleType("pyspacemouse")

    def open(device_index=0):  # noqa: A001 - the pyspacemouse API name
        return devices[device_index] if device_index < len(devices) else None

    fake.open = open
    monkeypatch.setitem(sys.modules, "pyspacemouse", fake)
    op = LiveOperator(list(robot.contacts), {e: c.enabled for e, c in robot.contacts.items()})
    src = SpaceMouseSource(op, ["left_hand", "right_hand"], max_lin_mps=0.05, max_ang_radps=0.3)
    devices[0].state = State(x=1.0, yaw=-0.5)
    devices[1].state = State(z=0.5, buttons=(1, 0))
    src.poll()
    vals = op.values()
    assert np.allclose(vals["twist.left_hand"], [0.05, 0, 0, 0, 0, -0.15])
    assert np.allclose(vals["twist.right_hand"], [0, 0, 0.025, 0, 0, 0])
    assert vals["enable"][3] == 1.0  # button press toggles the contact request
    src.poll()
    assert op.values()["enable"][3] == 1.0  # held button: no second toggle
    devices[0].lost = True
    src.poll()
    assert not op.values()["twist.left_hand"].any()  # a lost device stops its effector
    devices[1].state = State(x=float("nan"), z=0.5)
    src.poll()
    assert np.allclose(op.values()["twist.right_hand"], [0, 0, 0.025, 0, 0, 0])  # non-finite axis -> 0
    with pytest.raises(ContractError, match="no SpaceMouse #2"):
        SpaceMouseSource(op, ["left_hand", "right_hand", "left_foot"])


def test_far_reach_program_stops_at_the_torque_ratio_and_comes_back(robot):
    """examples/live_operator.py --far-reach: out at 2 cm/s from 5 s, stop when a measured joint
    torque (5 Hz) passes 0.6 of its limit, hold 4 s, back the same distance at 5 cm/s, end 2 s later."""
    import importlib.util
    from pathlib import Path

    from contactflow.operator.live import LiveOperator

    path = Path(__file__).resolve().parent.parent / "examples" / "live_operator.py"
    spec = importlib.util.spec_from_file_location("live_operator_example", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    tau_max = np.asarray(robot.tau_max)
    far = mod.FarReach(list(tau_max))
    op = LiveOperator(list(robot.contacts), {e: c.enabled for e, c in robot.contacts.items()})
    dt, t, done, disp, stop_t = 0.002, 0.0, False, np.zeros(3), None
    while not done and t < 60.0:
        over = stop_t is None and t >= 10.0  # the measured torque passes the ratio at 10 s
        tau = 0.7 * tau_max if over else 0.3 * tau_max
        done = far(op, t, tau)
        v = op.values()["twist.right_hand"][:3]
        disp += v * dt
        if far.stop_t is not None and stop_t is None:
            stop_t = far.stop_t
        t += dt
    assert done and 10.0 < stop_t < 10.2  # 5 Hz filter: a few tens of ms
    assert far.out_s == pytest.approx(stop_t - 5.0, abs=0.01)
    assert np.linalg.norm(disp) < 1e-3  # back where it started
    assert far.back_t == pytest.approx(stop_t + 4.0 + far.out_s * 0.4, abs=0.01) and t == pytest.approx(far.back_t + 2.0, abs=0.01)


def test_torque_ratio_monitor_filters_and_watches():
    from contactflow.errors import ContractError
    from contactflow.operator.live import TorqueRatioMonitor

    tau_max = np.array([100.0, 50.0])
    mon = TorqueRatioMonitor(tau_max, rho=0.6, cutoff_hz=5.0, dt=0.002, watch=[0])
    assert not mon.update([50.0, -49.0])  # joint 1 at 0.98 is not watched
    # a step to 0.7 of the limit crosses 0.6 after ln(0.2 / 0.1) / (2 pi 5 Hz) = 22 ms of low-pass
    n = next(k for k in range(1, 200) if mon.update([-70.0, 0.0]))
    assert 10 <= n <= 12
    with pytest.raises(ContractError):
        TorqueRatioMonitor(tau_max, rho=0.0)
    with pytest.raises(ContractError):
        TorqueRatioMonitor(tau_max, rho=0.6, watch=[2])
