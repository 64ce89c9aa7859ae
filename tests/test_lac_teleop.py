"""LAC teleop command sources, wrench injector and G1 run summary (no dora; known answers)."""

import json
import math

import numpy as np
import pinocchio as pin
import pytest
import yaml

from contactflow.errors import ConfigError, ContractError
from contactflow.lac.events import Profile, trapezoid
from contactflow.lac.summary import format_g1_summary, g1_summary
from contactflow.recording.summary import json_safe
from contactflow.lac.teleop import (LiveTeleop, TeleopConfig, TeleopKeyboard, TeleopPlayer, load_teleop_config,
                                    load_teleop_scenario)
from contactflow.lac.wrench_injector import WrenchInjector, wrench_links
from contactflow.contracts.messages import port_specs
from contactflow.recording.store import RecordingWriter, read_recording
from contactflow.robot import load_robot


@pytest.fixture(scope="module")
def g1():
    return load_robot("g1")


def _write(tmp_path, data, name="sc.yaml"):
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return p


# ---- scenario validation -------------------------------------------------------------------
BAD = [
    ("velocty: []", ["unknown key", "'velocty'"]),
    ("velocity: [{start_s: 1, end_s: 2, lin_vel_mps: [0.6, 0.0]}]", ["velocity[0].lin_vel_mps", "0.6 m/s above the limit"]),
    ("velocity: [{start_s: 1, end_s: 2, ang_vel_radps: 2.0}]", ["velocity[0].ang_vel_radps", "above the limit"]),
    ("velocity: [{start_s: 1, end_s: 3, lin_vel_mps: [0.1, 0]}, {start_s: 2, end_s: 4, lin_vel_mps: [0.2, 0]}]",
     ["velocity[1]", "overlaps velocity[0]"]),
    ("velocity: [{start_s: 2, end_s: 1}]", ["velocity[0].end_s", "end_s > start_s"]),
    ("velocity: [{start_s: 1, end_s: 2, lin_vel_mps: [.nan, 0]}]", ["velocity[0]: lin_vel_mps[0]", "finite"]),
    ("velocity: [{start_s: 1, end_s: 2, lin_vel_mps: [0.1]}]", ["velocity[0]: lin_vel_mps", "expected 2 values"]),
    ("posture: [{t_s: 1, base_height_m: 0.9}]", ["posture[0].base_height_m", "outside base_height_range_m [0.56, 0.78]"]),
    ("posture: [{t_s: 1, arms: {left_knee_joint: 0.1}}]", ["posture[0].arms.left_knee_joint", "not an arm joint",
                                                           "left_shoulder_pitch_joint"]),
    ("posture: [{t_s: 1, arms: {left_elbow_joint: 3.0}}]", ["posture[0].arms.left_elbow_joint", "outside the joint limits"]),
    ("posture: [{t_s: 1, waist_yaw_rad: 4.0}]", ["posture[0].waist_yaw_rad", "outside the joint limits"]),
    ("posture: [{t_s: 2, ramp_s: 2, base_height_m: 0.7}, {t_s: 3, base_height_m: 0.74}]",
     ["posture[1].t_s", "before the end of the previous posture entry"]),
    ("posture: [{t_s: 1}]", ["posture[0]", "sets nothing"]),
    ("stiffness: [{t_s: 0, lin_n_per_m: [600, 70, 70], ang_nm_per_rad: [30, 30]}]",
     ["stiffness[0]", "K_lin_left_arm = 600 N/m outside [10, 500] N/m"]),
    ("stiffness: [{t_s: 0, lin_n_per_m: [70, 70, 70], ang_nm_per_rad: [30, 5]}]",
     ["stiffness[0]", "K_ang_right_arm = 5 N m/rad outside [10, 100] N m/rad"]),
    ("stiffness: [{t_s: 0, lin_n_per_m: [70, 70], ang_nm_per_rad: [30, 30]}]", ["stiffness[0]: lin_n_per_m", "expected 3 values"]),
    ("wrenches: [{link: left_hand, start_s: 1, hold_s: 1, force_n: [1, 0, 0]}]",
     ["wrenches[0].link", "'left_hand' is not a wrench link", "left_wrist_roll_link, right_wrist_roll_link"]),
    ("wrenches: [{link: torso_link, start_s: 1, hold_s: 1}]", ["wrenches[0]", "needs force_n"]),
    ("wrenches: [{link: torso_link, start_s: 1, hold_s: 1, force_n: [1, 0, 0], torque: 1}]", ["wrenches[0]", "unknown key(s) 'torque'"]),
    ("duration_s: 2\nwrenches: [{link: torso_link, start_s: 1, hold_s: 1, force_n: [1, 0, 0]}]",
     ["wrenches[0]", "ends at 3 s, after the scenario's duration_s = 2 s"]),
    ("duration_s: 1\nvelocity: [{start_s: 1, end_s: 2, lin_vel_mps: [0.1, 0]}]", ["duration_s", "ends before the last velocity, posture or stiffness entry (2 s)"]),
    ("description: nothing", ["the scenario is empty"]),
    ("- 1\n- 2", ["expected a mapping at the top level"]),
]


@pytest.mark.parametrize("text,needles", BAD, ids=[b[1][0] for b in BAD])
def test_bad_scenario_is_refused_naming_file_key_and_reason(tmp_path, g1, text, needles):
    p = _write(tmp_path, text)
    with pytest.raises(ConfigError) as exc:
        load_teleop_scenario(p, g1)
    msg = str(exc.value)
    assert str(p) in msg and "\n" not in msg
    for n in needles:
        assert n in msg, msg


def test_missing_scenario_file_is_named(tmp_path, g1):
    with pytest.raises(ConfigError, match="nope.yaml: file not found"):
        load_teleop_scenario(tmp_path / "nope.yaml", g1)


def test_limits_are_robot_data(tmp_path, g1):
    """The limits come from the robot's teleop.yaml; another file changes them."""
    assert load_teleop_config(g1) == TeleopConfig()
    lim = _write(tmp_path, {"teleop": {"max_lin_vel_mps": 1.0}}, "lim.yaml")
    sc = _write(tmp_path, "velocity: [{start_s: 0, end_s: 1, lin_vel_mps: [0.8, 0.0]}]")
    with pytest.raises(ConfigError, match="above the limit max_lin_vel_mps = 0.5"):
        load_teleop_scenario(sc, g1)
    assert load_teleop_scenario(sc, g1, load_teleop_config(g1, lim)).velocity[0].lin_vel[0] == 0.8
    bad = _write(tmp_path, {"teleop": {"stiffness_default": [5, 70, 70, 30, 30]}}, "bad.yaml")
    with pytest.raises(ConfigError, match=r"bad.yaml:teleop: stiffness_default: K_lin_left_arm = 5 N/m"):
        load_teleop_config(g1, bad)
    with pytest.raises(ConfigError, match="unknown key"):
        load_teleop_config(g1, _write(tmp_path, {"teleop": {"max_speed": 1.0}}, "unk.yaml"))


def test_every_shipped_g1_scenario_loads(g1):
    from pathlib import Path

    files = sorted((Path(g1.directory) / "scenarios").glob("*.yaml"))
    assert len(files) >= 6
    for f in files:
        load_teleop_scenario(f, g1)


# ---- player -------------------------------------------------------------------------------
def test_player_values_defaults_ramps_and_end(tmp_path, g1):
    p = _write(tmp_path, """
duration_s: 10
velocity: [{start_s: 2, end_s: 4, lin_vel_mps: [0.3, -0.1], ang_vel_radps: 0.2}]
posture:
  - {t_s: 1, ramp_s: 2, base_height_m: 0.66, arms: {left_elbow_joint: 1.0}}
  - {t_s: 5, waist_yaw_rad: 0.4}
stiffness:
  - {t_s: 6, ramp_s: 1, lin_n_per_m: [170, 70, 70], ang_nm_per_rad: [30, 50]}
""")
    sc = load_teleop_scenario(p, g1)
    pl = TeleopPlayer(sc)
    h0 = 0.74  # robots/g1/teleop.yaml: LAC's teleop default (lac.md §1.1)
    elbow = sc.arm_joints.index("left_elbow_joint")
    c = pl.step(0.5)
    assert c.base_height == pytest.approx(h0) and np.allclose(c.lin_vel, 0) and c.ang_vel == 0
    assert np.allclose(c.stiffness, [70, 70, 70, 30, 30]) and c.waist_yaw == 0.0
    assert c.q_ref_arms[elbow] == pytest.approx(0.6)  # LAC default posture
    c = pl.step(2.0)  # mid-ramp, velocity segment starts
    assert c.base_height == pytest.approx(0.5 * (h0 + 0.66))
    assert c.q_ref_arms[elbow] == pytest.approx(0.8)
    assert np.allclose(c.lin_vel, [0.3, -0.1]) and c.ang_vel == pytest.approx(0.2)
    c = pl.step(4.0)  # end of the segment is exclusive
    assert np.allclose(c.lin_vel, 0) and c.base_height == pytest.approx(0.66)
    assert pl.step(5.0).waist_yaw == pytest.approx(0.4)  # a step (ramp 0)
    assert np.allclose(pl.step(6.5).stiffness, [120, 70, 70, 30, 40])
    c = pl.step(9.99)
    assert not c.finished and np.allclose(c.stiffness, [170, 70, 70, 30, 50])
    assert pl.step(10.0).finished
    vec = port_specs(g1)["teleop_command"].pack(c.values())
    assert vec.size == 2 + 1 + 1 + 1 + 10 + 5
    with pytest.raises(ValueError):
        pl.step(float("nan"))


# ---- wrench injector ----------------------------------------------------------------------
def test_trapezoid_matches_the_lac_profile():
    prof = Profile(rest_s=0.7, ramp_s=1.3, hold_s=2.1, release_s=1.7, frames=400, dt_s=0.02)
    t = np.arange(400) * 0.02
    assert np.array_equal(prof.values(), trapezoid(t, 0.7, 1.3, 2.1, 1.7))
    assert trapezoid(1.0, 1.0, 0.0, 1.0, 0.0) == 1.0 and trapezoid(2.0, 1.0, 0.0, 1.0, 0.0) == 0.0


def test_injector_profile_values(tmp_path, g1):
    p = _write(tmp_path, """
wrenches:
  - {link: left_wrist_roll_link, start_s: 1.0, ramp_s: 0.5, hold_s: 2.0, release_s: 1.0, force_n: [10, 0, -4]}
  - {link: left_wrist_roll_link, start_s: 3.0, ramp_s: 0.0, hold_s: 1.0, release_s: 0.0, couple_nm: [0, 0, 2]}
  - {link: torso_link, start_s: 0.0, ramp_s: 1.0, hold_s: 1.0, release_s: 1.0, force_n: [0, 20, 0]}
""")
    sc = load_teleop_scenario(p, g1)
    inj = WrenchInjector(sc.wrenches, wrench_links(g1))
    assert sc.duration_s == pytest.approx(5.5)  # last end 4.5 + tail 1
    hand = lambda t: inj.wrenches(t)["left_wrist_roll_link"]  # noqa: E731
    assert np.allclose(hand(0.99), 0)
    assert np.allclose(hand(1.25), [5, 0, -2, 0, 0, 0])       # mid-ramp
    assert np.allclose(hand(2.0), [10, 0, -4, 0, 0, 0])       # hold
    assert np.allclose(hand(3.5), [10, 0, -4, 0, 0, 2])       # hold of the first, couple of the second: they add
    assert np.allclose(hand(4.0), [5, 0, -2, 0, 0, 0])        # mid-release, couple ended (step)
    assert np.allclose(hand(4.5), 0)
    assert np.allclose(inj.wrenches(0.5)["torso_link"], [0, 10, 0, 0, 0, 0])
    assert np.allclose(inj.wrenches(2.0)["pelvis"], 0)
    vals = inj.values(2.0)
    spec = port_specs(g1)["external_wrench"]
    assert set(vals) == {f.name for f in spec.fields}
    assert spec.pack(vals).size == 6 * len(wrench_links(g1))
    ev = sc.wrenches[0]
    assert (ev.kind, ev.hold_start_s, ev.hold_end_s, ev.end_s) == ("force", 1.5, 3.5, 4.5)
    assert sc.wrenches[1].kind == "couple"


# ---- live mode ----------------------------------------------------------------------------
def test_live_teleop_refuses_out_of_range_and_keyboard_clamps(g1):
    live = LiveTeleop(g1)
    for call in (lambda: live.set_velocity(0.6), lambda: live.set_velocity(float("nan")), lambda: live.set_base_height(0.5),
                 lambda: live.set_stiffness([70, 70, 70, 30, 200]), lambda: live.set_arm("left_knee_joint", 0.0),
                 lambda: live.set_waist_yaw(5.0), lambda: live.set_stiffness([70, 70, 70])):
        with pytest.raises(ContractError):
            call()
    c = live.command(0.0)
    assert np.allclose(c.lin_vel, 0) and np.allclose(c.stiffness, [70, 70, 70, 30, 30])
    kb = TeleopKeyboard(live)
    for _ in range(8):
        kb.key("w")
    assert np.allclose(live.lin_vel, [0.5, 0.0])  # clamped at max_lin_vel_mps
    kb.key("a")
    assert np.hypot(*live.lin_vel) == pytest.approx(0.5)
    kb.key(" ")
    assert np.allclose(live.lin_vel, 0)
    for _ in range(20):
        kb.key("r")
    assert live.base_height == pytest.approx(0.78)
    kb.key("5")
    for _ in range(10):
        kb.key("+")
    assert live.stiffness[4] == pytest.approx(100.0) and live.stiffness[3] == 30.0
    assert "K_ang_right_arm" in kb.key("-")
    live.set_arm("right_elbow_joint", 1.1)
    assert live.command(1.0).q_ref_arms[live.arm_joints.index("right_elbow_joint")] == 1.1
    assert kb.key("z") == ""


# ---- summary on a synthetic recording with known answers ----------------------------------
def _synthetic_run(run_dir, robot):
    """A 20 s run at 50 Hz whose base motion, commands and wrenches give known summary values."""
    specs = port_specs(robot)
    dt, T = 0.02, 1000
    t = np.arange(T) * dt
    yaw = np.full(T, 0.3)
    pos = np.zeros((T, 3))
    pos[:, 2] = 0.75
    v_base = np.zeros((T, 6))
    cmd_lin = np.zeros((T, 2))
    stiff = np.tile([50.0, 70.0, 70.0, 30.0, 30.0], (T, 1))
    # standing segment 1 (0-5 s): x drifts 0.01 m linearly; a couple event on the left hand at 1.5 s
    # (ramp 0.5, hold 2.0-4.0, release to 4.5) during which the whole robot yaws +0.1 rad (hold included)
    pos[t < 5.0, 0] = 0.01 * t[t < 5.0] / t[t < 5.0][-1]
    yaw[(t >= 2.0) & (t <= 4.0 + 1e-9)] += 0.1
    # velocity segment (5-11 s): command 0.4 m/s forward; measured [0.1, 0] for 2 s then [0.35, 0.02]
    # in the yaw frame (= base frame here: no roll or pitch)
    seg = (t >= 5.0) & (t < 11.0)
    cmd_lin[seg] = [0.4, 0.0]
    v_base[seg & (t < 7.0), :2] = [0.1, 0.0]
    v_base[seg & (t >= 7.0), :2] = [0.35, 0.02]
    pos[t >= 5.0, 0] = 0.01
    # standing segment 2 (11-20 s): 0.03 m in y during the settle time (11-12 s, ignored), then
    # 0.02 m in y at 13.0-13.5 s (counted), and a 10 N +x push on the left hand at 15 s (ramp 0.5,
    # hold 15.5-18.5, release to 19) that moves the whole robot +0.05 m in x during [15.5, 18.5)
    pos[t >= 12.0, 1] = 0.03
    pos[t >= 13.5, 1] = 0.05
    pos[(t >= 15.5) & (t <= 18.5 + 1e-9), 0] += 0.05
    pos[500, 2] = 0.70  # one low sample
    q = np.tile(robot.q_default, (T, 1))
    q[:, :3] = pos
    for i in range(T):
        quat = pin.Quaternion(pin.rpy.rpyToMatrix(0.0, 0.0, yaw[i]))
        q[i, 3:7] = [quat.x, quat.y, quat.z, quat.w]
    v = np.zeros((T, robot.nv))
    v[:, :6] = v_base
    wr_hand = np.zeros((T, 6))
    wr_hand[:, 5] = 1.5 * trapezoid(t, 1.5, 0.5, 2.0, 0.5)
    wr_hand[:, 0] = 10.0 * trapezoid(t, 15.0, 0.5, 3.0, 0.5)
    ok = np.ones(T)
    ok[[100, 200, 300]] = 0.0

    _record(run_dir, robot, t, q, v, cmd_lin, stiff, wr_hand, ok)


def _record(run_dir, robot, t, q, v, cmd_lin, stiff, wr_hand, ok, cmd_ang=None):
    """Write a G1 teleop recording (driver sensors, teleop command, injector wrench, joint command)."""
    specs = port_specs(robot)
    T = len(t)
    cmd_ang = np.zeros(T) if cmd_ang is None else cmd_ang
    w = RecordingWriter(run_dir, {"robot": robot.name, "dataflow": ""})

    def stream(name, spec):
        return w.stream(name, spec.size, {"source": name.replace(".", "/"), "contract": spec.name,
                                          "layout": json.dumps([[f.name, f.size] for f in spec.fields])})

    s_sens = stream("mujoco_driver.sensors", specs["sensors"])
    s_cmd = stream("teleop.command", specs["teleop_command"])
    s_wr = stream("wrench_injector.wrench", specs["external_wrench"])
    s_jc = stream("lac_expert.command", specs["joint_command"])
    n = robot.n
    for k in range(T):
        sv = {f.name: np.zeros(f.size) for f in specs["sensors"].fields}
        sv.update({"t": [t[k]], "q": q[k], "v": v[k]})
        s_sens.append(k, t[k], specs["sensors"].pack(sv), k == T - 1, t_wall_ns=int(k * 1e7))
        cv = {"lin_vel": cmd_lin[k], "ang_vel": [cmd_ang[k]], "base_height": [0.75], "waist_yaw": [0.0],
              "q_ref_arms": np.zeros(10), "stiffness": stiff[k]}
        s_cmd.append(k, t[k], specs["teleop_command"].pack(cv), k == T - 1)
        wv = {f.name: np.zeros(6) for f in specs["external_wrench"].fields}
        wv["wrench.left_wrist_roll_link"] = wr_hand[k]
        s_wr.append(k, t[k], specs["external_wrench"].pack(wv), k == T - 1)
        jv = {"q_target": robot.theta_default, "kp": np.ones(n), "kd": np.ones(n), "tau_ff": np.zeros(n), "ok": [ok[k]]}
        s_jc.append(k, t[k], specs["joint_command"].pack(jv), k == T - 1)
    w.close()


def test_g1_summary_known_answers(tmp_path, g1):
    run = tmp_path / "run"
    _synthetic_run(run, g1)
    s = g1_summary(read_recording(run), g1)
    assert s["fell"] is False
    assert s["base_height_min_m"] == pytest.approx(0.70)
    assert s["ticks"] == 1000 and s["sim_time_s"] == pytest.approx(19.98)
    assert s["realtime_factor"] == pytest.approx(2.0)  # 1e7 ns per 0.02 s tick
    assert s["controller_degraded_ticks"] == 3
    (seg,) = s["velocity_segments"]
    assert seg["start_s"] == pytest.approx(5.0) and seg["end_s"] == pytest.approx(11.0)
    assert seg["lin_vel_mean_mps"] == pytest.approx([0.35, 0.02])  # last 4 s only
    assert s["base_velocity_tracking_error_mps"] == pytest.approx(math.hypot(0.05, 0.02))
    drifts = [d["drift_m"] for d in s["standing_segments"]]
    assert drifts == pytest.approx([0.01, 0.02])
    assert s["standing_segments"][1]["start_s"] == pytest.approx(13.0)  # 2 s settle after the walk
    assert s["standing_drift_m"] == pytest.approx(0.02)
    couple, push = s["wrench_events"]
    assert couple["kind"] == "couple" and couple["link"] == "left_wrist_roll_link"
    assert couple["hold_s"] == pytest.approx([2.0, 4.0])  # the release starts after the tick at 4.0 s
    assert couple["rotation_rad"] == pytest.approx(0.1, abs=1e-9)
    assert couple["commanded_k_theta_nm_per_rad"] == 30.0
    assert couple["ratio_to_tau_over_k"] == pytest.approx(0.1 / (1.5 / 30.0))
    assert push["kind"] == "force" and push["force_n"] == pytest.approx([10, 0, 0])
    assert push["displacement_m"] == pytest.approx(0.05, abs=1e-9)
    assert push["displacement_norm_m"] == pytest.approx(0.05, abs=1e-9)
    assert push["commanded_k_n_per_m"] == 50.0 and push["f_over_k_m"] == pytest.approx(0.2)
    assert push["ratio_to_f_over_k"] == pytest.approx(0.25)
    text = format_g1_summary(s)
    assert "ratio to F/K 0.25" in text and "drift 0.02 m" in text
    assert "displacement 0.05 m along the force (0.05 m in all)" in text
    json.dumps(json_safe(s))


def test_g1_summary_a_tilt_beyond_one_radian_is_a_fall(tmp_path, g1):
    """On hardware the base height is an estimate (soles assumed fixed) that cannot see a fall: the
    base tilt from the IMU quaternion can. 0.9 rad: standing; 1.1 rad about x (base still high): fell."""
    run = tmp_path / "run"
    _synthetic_run(run, g1)
    base = g1_summary(read_recording(run), g1)
    assert base["base_tilt_max_rad"] == pytest.approx(0.0, abs=1e-9) and base["fell"] is False
    rec = read_recording(run)
    t, q, v = rec.stream("mujoco_driver.sensors").t, rec.stream("mujoco_driver.sensors").field("q"), rec.stream(
        "mujoco_driver.sensors").field("v")
    T = len(t)
    for roll, fell in ((0.9, False), (1.1, True)):
        q2 = q.copy()
        quat = pin.Quaternion(pin.rpy.rpyToMatrix(roll, 0.0, 0.0))
        q2[T // 2, 3:7] = [quat.x, quat.y, quat.z, quat.w]
        run2 = tmp_path / f"tilt{roll}"
        _record(run2, g1, t, q2, v, np.zeros((T, 2)), np.tile([500.0, 500.0, 500.0, 50.0, 50.0], (T, 1)),
                np.zeros((T, 6)), np.ones(T))
        s = g1_summary(read_recording(run2), g1)
        assert s["base_tilt_max_rad"] == pytest.approx(roll, abs=1e-9)
        assert s["fell"] is fell and s["base_height_min_m"] > 0.6


def test_g1_summary_counts_a_zero_quaternion_as_an_invalid_state(tmp_path, g1):
    """A corrupted sample (base quaternion all zeros) is counted like a non-finite one, not a crash."""
    run = tmp_path / "run"
    _synthetic_run(run, g1)
    rec = read_recording(run)
    s0 = g1_summary(rec, g1)
    assert s0["invalid_state_samples"] == 0
    t, q, v = rec.stream("mujoco_driver.sensors").t, rec.stream("mujoco_driver.sensors").field("q"), rec.stream(
        "mujoco_driver.sensors").field("v")
    T = len(t)
    q2 = q.copy()
    q2[T // 3, 3:7] = 0.0
    run2 = tmp_path / "zero_quat"
    _record(run2, g1, t, q2, v, np.zeros((T, 2)), np.tile([500.0, 500.0, 500.0, 50.0, 50.0], (T, 1)),
            np.zeros((T, 6)), np.ones(T))
    s = g1_summary(read_recording(run2), g1)
    assert s["invalid_state_samples"] == 1 and s["fell"] is True
    assert s["base_tilt_max_rad"] == pytest.approx(0.0, abs=1e-9)


def test_base_rotation_refuses_a_quaternion_that_is_no_orientation():
    from contactflow.sim.state import base_rotation

    q = np.zeros(7)
    with pytest.raises(ValueError, match=r"q\[3:7\].*not an orientation"):
        base_rotation(q)
    q[3:7] = [0.0, 0.0, 0.0, 2.0]  # not normalised: fine
    np.testing.assert_allclose(base_rotation(q), np.eye(3))


def test_g1_summary_without_commands_or_wrenches(tmp_path, g1):
    """A recording with only the driver's sensors: the metrics that need the rest are null."""
    run = tmp_path / "run"
    _synthetic_run(run, g1)
    rec = read_recording(run)
    s = g1_summary(rec, g1, teleop="nobody", injector="nobody")
    assert s["velocity_segments"] == [] and s["wrench_events"] == []
    safe = json_safe(s)
    assert safe["base_velocity_tracking_error_mps"] is None and safe["standing_drift_m"] is None


@pytest.mark.parametrize("robot_name", ["g1", "g1_29dof"])
def test_summary_link_com_is_where_the_simulator_applies_the_force(robot_name):
    """The summary's link CoM (URDF inertial origin placed by pinocchio FK) equals MuJoCo's body xipos."""
    import mujoco

    from contactflow.lac.summary import _link_poses
    from contactflow.sim.pd_robot import PDRobotSim, PDSimConfig

    robot = load_robot(robot_name)
    sim = PDRobotSim(PDSimConfig(), robot)
    q = robot.q_default.copy()
    q[7:] += np.random.default_rng(0).uniform(-0.2, 0.2, robot.n)
    q[:3] += [0.1, 0.2, 0.0]
    sim.reset(q)
    for link in wrench_links(robot):
        bid = mujoco.mj_name2id(sim.model, mujoco.mjtObj.mjOBJ_BODY, link)
        p, _ = _link_poses(robot, link, q[None])
        assert np.allclose(p[0], sim.data.xipos[bid], atol=1e-9), link


def test_tick_times_with_rounding_errors_keep_segment_bounds(tmp_path, g1):
    """A simulator clock summing 0.02 s steps reads 4.9999999997 s at the tick of 5 s: still that tick."""
    sc = load_teleop_scenario(_write(tmp_path, "duration_s: 6\nvelocity: [{start_s: 2, end_s: 5, lin_vel_mps: [0.5, 0]}]"), g1)
    pl = TeleopPlayer(sc)
    t = np.cumsum(np.full(300, 0.02))  # t[k] = (k + 1) * 0.02 with rounding
    ticks = [k + 1 for k in range(300) if pl.step(t[k]).lin_vel[0] > 0]
    assert (ticks[0], ticks[-1], len(ticks)) == (100, 249, 150)
    assert next(k + 1 for k in range(300) if pl.step(t[k]).finished) == 300


def test_live_teleop_program_answers_tick_zero_and_skips_missed_ticks(monkeypatch, g1, tmp_path, capsys):
    """examples/live_teleop.py with a fake dora Node whose tick 0 went by before it subscribed: it
    sends the command of tick 0 right after connecting, then answers ticks 1, 2..., and its scripted
    program lowers the base at 4 s and ends the run at 15 s."""
    import importlib.util
    import sys
    import types
    from pathlib import Path

    import pyarrow as pa

    specs = port_specs(g1)
    sens = specs["sensors"]
    sent = []

    class FakeNode:
        def __init__(self, node_id):
            self.k = 1  # tick 0 was lost

        def next(self, timeout=None):
            if self.k == 700:  # the graph's recorder writes its run (here: complete already)
                run = tmp_path / "lac_g1_teleop_live-20261201T000000"
                run.mkdir()
                (run / "manifest.json").write_text('{"complete": true}')
            if self.k > 800:
                return None
            k, self.k = self.k, self.k + 1
            vals = {f.name: np.zeros(f.size) for f in sens.fields}
            vals["q"] = g1.q_default
            vals["imu_quat"] = np.array([0, 0, 0, 1.0])
            return {"type": "INPUT", "id": "tick", "value": pa.array(sens.pack(vals)),
                    "metadata": {"seq": k, "t": 0.02 * k, "finished": False}}

        def send_output(self, output, value, metadata):
            sent.append((metadata["seq"], metadata["t"], metadata["finished"],
                         specs["teleop_command"].unpack(value.to_numpy())))

    monkeypatch.setitem(sys.modules, "dora", types.SimpleNamespace(Node=FakeNode))
    monkeypatch.setattr(sys, "argv", ["live_teleop.py", "--wait-recording-s", "0"])
    monkeypatch.setenv("CONTACTFLOW_RECORDINGS", str(tmp_path))
    path = Path(__file__).resolve().parent.parent / "examples" / "live_teleop.py"
    spec = importlib.util.spec_from_file_location("live_teleop_example", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.main()
    seqs = [s[0] for s in sent]
    assert seqs == list(range(len(seqs))) and len(seqs) == 751  # 0..750: finished at t = 15 s
    assert sent[-1][2] and not any(s[2] for s in sent[:-1])
    h = {round(s[1], 2): s[3]["base_height"][0] for s in sent}
    assert h[2.0] == pytest.approx(0.74) and h[5.0] == pytest.approx(0.70)
    assert sent[450][3]["waist_yaw"][0] == pytest.approx(0.3)  # t = 9 s
    out = capsys.readouterr().out
    assert "[live_teleop] connected as dynamic node 'teleop'" in out
    assert "[live_teleop] finished at t = 15.00 s" in out
    assert f"[live_teleop] recording: {tmp_path / 'lac_g1_teleop_live-20261201T000000'}" in out


def test_one_stiffness_layout_table():
    """The 5-D layout (lac.md §1.1: K_lin left, right, torso [N/m], K_ang left, right [N m/rad]) is
    one table: the teleop's names, the IK/augmentation's groups and the summary's channels are it."""
    from contactflow.lac import config, model, summary, teleop

    assert config.STIFFNESS_NAMES == ("K_lin_left_arm", "K_lin_right_arm", "K_lin_torso", "K_ang_left_arm", "K_ang_right_arm")
    assert config.GROUP_CHANNELS == {"left": (0, 3), "right": (1, 4), "torso": (2, None)}
    assert teleop.STIFFNESS_FIELDS is config.STIFFNESS_NAMES
    assert model.UPPER_GROUPS is config.GROUP_CHANNELS and summary.STIFFNESS_CHANNEL is config.GROUP_CHANNELS


def test_one_default_base_height_for_teleop_and_stand_command(g1, tmp_path):
    """LAC's teleop default base height (0.74 m, lac.md §1.1) is robot data (robots/g1/teleop.yaml):
    the teleop's first command and the compliance experiments' stand_command both read it."""
    from contactflow.lac.compliance import stand_command

    p = _write(tmp_path, "duration_s: 2\nvelocity: [{start_s: 1, end_s: 2, lin_vel_mps: [0.1, 0.0]}]\n")
    first = TeleopPlayer(load_teleop_scenario(p, g1)).step(0.0)
    stand = stand_command(g1, [70, 70, 70, 30, 30])
    assert first.base_height == pytest.approx(0.74) and stand["base_height"][0] == pytest.approx(0.74)
    for key in ("waist_yaw", "q_ref_arms", "stiffness"):
        np.testing.assert_allclose(stand[key], first.values()[key])


def test_g1_summary_velocity_in_the_yaw_frame_while_turning(tmp_path, g1):
    """The walk turns 90 deg at a constant rate with the base pitched 0.2 rad: the yaw-frame
    velocity is constant [0.3, 0.1] m/s while the world velocity turns and the base-frame one is
    tilted, so the summary must rotate each tick by that tick's heading (and not by the base)."""
    dt, T = 0.02, 500
    t = np.arange(T) * dt
    seg = (t >= 2.0) & (t < 8.0)
    psi_dot = (np.pi / 2) / 6.0
    psi = np.clip(t - 2.0, 0.0, 6.0) * psi_dot
    v_yaw = np.array([0.3, 0.1, 0.0])
    q = np.tile(g1.q_default, (T, 1))
    v = np.zeros((T, g1.nv))
    pos = np.zeros(3)
    for i in range(T):
        R = pin.rpy.rpyToMatrix(0.0, 0.2, psi[i])
        Rz = pin.rpy.rpyToMatrix(0.0, 0.0, psi[i])
        w_world = np.array([0.0, 0.0, psi_dot if seg[i] else 0.0])
        v_world = Rz @ v_yaw if seg[i] else np.zeros(3)
        v[i, :3], v[i, 3:6] = R.T @ v_world, R.T @ w_world
        q[i, :3] = pos + [0.0, 0.0, 0.75]
        pos = pos + v_world * dt
        quat = pin.Quaternion(R)
        q[i, 3:7] = [quat.x, quat.y, quat.z, quat.w]
    cmd_lin = np.where(seg[:, None], v_yaw[:2], 0.0)
    cmd_ang = np.where(seg, psi_dot, 0.0)
    run = tmp_path / "run"
    _record(run, g1, t, q, v, cmd_lin, np.tile([70.0, 70, 70, 30, 30], (T, 1)), np.zeros((T, 6)), np.ones(T), cmd_ang)
    (sg,) = g1_summary(read_recording(run), g1)["velocity_segments"]
    assert sg["lin_vel_mean_mps"] == pytest.approx([0.3, 0.1], abs=1e-9)
    assert sg["ang_vel_mean_radps"] == pytest.approx(psi_dot, abs=1e-9)
    assert sg["error_mps"] == pytest.approx(0.0, abs=1e-9) and sg["yaw_rate_error_radps"] == pytest.approx(0.0, abs=1e-9)

