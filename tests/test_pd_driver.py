"""The mujoco_driver logic for PD robots (contactflow.sim.driver.RobotDriver), in-process: command
safety (hold the last safe PD command; damping mode on a lost stream, gain ramp on resume),
external wrenches, payloads, falls, the end of a run."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from contactflow.errors import ConfigError, ContractError
from contactflow.contracts.messages import port_specs
from contactflow.robot import load_robot
from contactflow.safety import PDCommandHold
from contactflow.sim.driver import BASE_STATE, DAMPING_KEY, RobotDriver, damping_mode_kd, parse_payload
from contactflow.sim.mujoco_robot import SimConfig
from contactflow.sim.pd_robot import PDSimConfig


@pytest.fixture(scope="module")
def g1():
    return load_robot("g1")


@pytest.fixture()
def driver(g1):
    d = RobotDriver(g1, PDSimConfig())
    d.reset()
    return d


def _cmd(r, q=None, kp_scale=10.0, kd_scale=1.5, tau_ff=None, ok=1.0):
    return {"q_target": r.theta_default.copy() if q is None else q, "kp": r.K * kp_scale, "kd": r.kd * kd_scale,
            "tau_ff": np.zeros(r.n) if tau_ff is None else tau_ff, "ok": np.array([ok])}


def test_command_contract_round_trip_through_the_driver(driver, g1):
    spec = port_specs(g1)["joint_command"]
    assert [f.name for f in spec.fields] == ["q_target", "kp", "kd", "tau_ff", "ok"]
    fields = spec.unpack(spec.pack(_cmd(g1)))
    assert driver.offer_command(fields, 0.0)
    r, done = driver.advance()
    assert not done and r.t == pytest.approx(0.02)
    c = driver.sim.command
    np.testing.assert_allclose(c.kp, g1.K * 10)
    np.testing.assert_allclose(c.q_target, g1.theta_default)


@pytest.mark.parametrize("what", ["nan_target", "beyond_limit", "negative_kp", "huge_kp", "huge_kd", "inf_tau_ff",
                                  "missing"])
def test_bad_command_is_not_applied_and_the_last_safe_one_is_held(driver, g1, what):
    good = _cmd(g1, q=g1.theta_default + 0.05, kp_scale=8.0)
    assert driver.offer_command(good, 0.0)
    driver.advance()
    bad = _cmd(g1, kp_scale=2.0)
    if what == "nan_target":
        bad["q_target"][5] = np.nan
    elif what == "beyond_limit":
        bad["q_target"][3] = g1.q_max[3] + 0.1
    elif what == "negative_kp":
        bad["kp"][0] = -1.0
    elif what == "huge_kp":  # past the simulator's explicit-integration stability bound (pitfall M3)
        bad["kp"][17] = driver.sim.kp_max[17] * 1.5
    elif what == "huge_kd":
        bad["kd"][17] = driver.sim.kd_max[17] * 1.5
    elif what == "inf_tau_ff":
        bad["tau_ff"][2] = np.inf
    else:
        bad = None
    assert not driver.offer_command(bad, 0.02)
    driver.advance()
    c = driver.sim.command  # the good command, its target WITH its gains
    np.testing.assert_allclose(c.q_target, good["q_target"])
    np.testing.assert_allclose(c.kp, good["kp"])
    np.testing.assert_allclose(c.kd, good["kd"])
    assert driver.status.rejected_commands == 1 and driver.status.ticks == 2


def test_degraded_commands_are_counted_and_applied(driver, g1):
    c = _cmd(g1, q=g1.theta_default + 0.02, ok=0.0)
    assert driver.offer_command(c, 0.0)
    driver.advance()
    assert driver.status.degraded_commands == 1
    np.testing.assert_allclose(driver.sim.command.q_target, c["q_target"])


def test_pd_hold_damping_mode_after_the_timeout_then_gain_ramp(g1, caplog):
    """Unitree convention on a lost stream: kp = 0, kd = kd_damping, tau_ff = 0 (not the old gains
    and feed-forward forever); logged once per entry; on resume the gains ramp back linearly."""
    kdd = np.full(g1.n, 0.5)
    h = PDCommandHold(g1.theta_default, g1.K, g1.kd, timeout_s=0.1, kd_damping=kdd, recovery_ramp_s=0.5)
    q, kp, kd, tff = h.pd_command(5.0)  # no command yet: the start-up posture with the robot's gains
    assert h.mode == "start" and h.holding
    np.testing.assert_array_equal(kp, g1.K)
    c = _cmd(g1, tau_ff=np.full(g1.n, 0.3))
    assert h.offer(c, 10.0)
    q, kp, kd, tff = h.pd_command(10.05)
    assert h.mode == "normal" and not h.holding
    np.testing.assert_array_equal(kp, g1.K * 10)
    with caplog.at_level("WARNING", logger="contactflow.safety"):
        for now in (10.15, 10.2, 10.3):
            q, kp, kd, tff = h.pd_command(now)
            assert h.mode == "damping" and h.holding
            np.testing.assert_array_equal(kp, 0.0)
            np.testing.assert_array_equal(kd, kdd)
            np.testing.assert_array_equal(tff, 0.0)
            np.testing.assert_array_equal(q, c["q_target"])
    lines = [r.getMessage() for r in caplog.records if "damping mode" in r.getMessage()]
    assert len(lines) == 1 and "no command received" in lines[0] and h.damping_entries == 1
    # resume: s = (now - t_resume) / 0.5, fresh commands every 50 ms
    for t_offer, now, s in ((10.4, 10.4, 0.0), (10.45, 10.5, 0.2), (10.55, 10.6, 0.4), (10.7, 10.7, 0.6)):
        assert h.offer(c, t_offer)
        q, kp, kd, tff = h.pd_command(now)
        assert h.mode == "ramp"
        np.testing.assert_allclose(kp, s * g1.K * 10, rtol=1e-9)
        np.testing.assert_allclose(kd, (1 - s) * kdd + s * c["kd"], rtol=1e-9)
        np.testing.assert_allclose(tff, s * 0.3, rtol=1e-9)
    assert h.offer(c, 10.9)
    q, kp, kd, tff = h.pd_command(10.95)
    assert h.mode == "normal"
    np.testing.assert_array_equal(kp, g1.K * 10)
    # every command rejected for longer than the timeout is a lost stream too; the reason says why
    bad = _cmd(g1)
    bad["kp"][0] = -1.0
    with caplog.at_level("WARNING", logger="contactflow.safety"):
        for now in (10.96, 10.99, 11.02):
            assert not h.offer(bad, now)
            h.pd_command(now)
    assert h.mode == "damping" and h.damping_entries == 2
    assert "3 command(s) rejected since the last valid one, last: kp:" in h.damping_reason
    with pytest.raises(ValueError, match=r"kd_damping: .* joint index \[2\]"):
        PDCommandHold(g1.theta_default, g1.K, g1.kd, kd_damping=np.where(np.arange(g1.n) == 2, 9.0, 1.0),
                      kd_max=np.full(g1.n, 5.0))


@pytest.mark.parametrize("clock", ["lockstep_rejected", "realtime_silent"])
def test_driver_enters_damping_mode_counts_it_and_recovers(g1, caplog, clock):
    """In-process driver: valid commands, then none valid for > the timeout (lockstep: every command
    rejected, simulated clock; realtime: no command at all, a wall-like clock), then valid again.
    Timeout 0.09 s, so the switch falls between ticks: damping from the 5th tick after the last
    valid command (0.10 s > 0.09 s)."""
    d = RobotDriver(g1, PDSimConfig(), command_timeout_s=0.09, recovery_ramp_s=0.2)
    d.reset()
    kdd = d.hold.kd_damping
    t0 = 0.0 if clock == "lockstep_rejected" else 1000.0  # realtime: a monotonic clock, not sim time
    now = lambda: t0 + d.readings.t  # noqa: E731
    good = _cmd(g1, q=g1.theta_default + 0.02, kp_scale=2.0, kd_scale=1.0, tau_ff=np.full(g1.n, 0.5))
    for _ in range(10):
        assert d.offer_command(good, now())
        d.advance(now())
        assert d.command_mode == "normal"
    bad = dict(good, q_target=np.full(g1.n, np.nan))
    modes = []
    with caplog.at_level("WARNING"):
        for _ in range(10):
            if clock == "lockstep_rejected":
                assert not d.offer_command(bad, now())
            r, done = d.advance(now())
            modes.append(d.command_mode)
            assert not done
    assert modes == ["normal"] * 4 + ["damping"] * 6
    c = d.sim.command
    np.testing.assert_array_equal(c.kp, 0.0)
    np.testing.assert_array_equal(c.kd, kdd)
    np.testing.assert_array_equal(c.tau_ff, 0.0)
    # the applied torque (sensors tau) is pure braking: -kd_damping qdot (clamped)
    np.testing.assert_allclose(r.tau, np.clip(-kdd * r.v[6:], -g1.tau_max, g1.tau_max), atol=1e-9)
    assert d.status.damping_entries == 1 and d.status.damping_ticks == 6
    lines = [x.getMessage() for x in caplog.records if "damping mode" in x.getMessage()]
    assert len(lines) == 1, lines
    assert ("rejected since the last valid one" if clock == "lockstep_rejected" else "no command received") in lines[0]
    # recovery: the stiffness ramps 0 -> kp over 0.2 s (10 ticks), then normal
    ratios = []
    for _ in range(14):
        assert d.offer_command(good, now())
        d.advance(now())
        ratios.append(float(d.sim.command.kp[0] / good["kp"][0]))
    np.testing.assert_allclose(ratios[:10], np.arange(10) * 0.1, atol=1e-9)
    assert ratios[10:] == [1.0] * 4 and d.command_mode == "normal"
    assert d.status.damping_entries == 1 and d.status.damping_ticks == 6


def test_damping_mode_brakes_a_robot_that_lost_its_commands(g1):
    """Physics: 0.5 s after the stream is lost (t = 0.56 s), the damped G1 has sunk much less than
    with kd_damping = 0 (measured pelvis heights 0.59 m vs 0.30 m: the limp one fell)."""
    heights = {}
    for name, robot in (("damped", g1), ("limp", dataclasses.replace(g1, raw={**g1.raw, DAMPING_KEY: 0.0}))):
        d = RobotDriver(robot, PDSimConfig())
        d.reset()
        for _ in range(3):
            d.offer_command(_cmd(g1, kp_scale=1.0, kd_scale=1.0), d.readings.t)
            d.advance()
        for _ in range(25):
            r, _ = d.advance()
        heights[name] = r.base_height, d.status.fell
        assert d.status.damping_entries == 1
    assert heights["damped"][0] > 0.5 and heights["damped"][0] > heights["limp"][0] + 0.2, heights
    assert heights["limp"][1] and not heights["damped"][1]


def test_damping_mode_kd_comes_from_the_robot_file(g1):
    kd = damping_mode_kd(g1)
    j = g1.joint_names.index
    assert kd[j("left_knee_joint")] == 8.0 and kd[j("left_ankle_roll_joint")] == 3.0
    assert kd[j("right_wrist_roll_joint")] == 1.5
    r29 = load_robot("g1_29dof")
    d29 = RobotDriver(r29, PDSimConfig())
    kd29 = d29.hold.kd_damping
    assert kd29[r29.joint_names.index("left_wrist_yaw_joint")] == 2.4
    assert np.all(kd29 <= d29.sim.kd_max) and np.all(kd29 > 0)

    def with_(value):
        return dataclasses.replace(g1, raw={**g1.raw, DAMPING_KEY: value})
    np.testing.assert_array_equal(damping_mode_kd(dataclasses.replace(g1, raw={k: v for k, v in g1.raw.items()
                                                                                if k != DAMPING_KEY})), g1.kd)
    np.testing.assert_array_equal(damping_mode_kd(with_(2.0)), 2.0)
    with pytest.raises(ConfigError, match=r"damping_mode_kd_nms_per_rad: above the simulator's kd stability limit "
                                          r"\(kd_max\) for left_wrist_roll_joint: 8 > 3.18, right_wrist_roll_joint"):
        RobotDriver(with_({"default": 8.0, "left_ankle_pitch_joint": 4.0, "right_ankle_pitch_joint": 4.0,
                           "left_ankle_roll_joint": 3.0, "right_ankle_roll_joint": 3.0}), PDSimConfig())
    with pytest.raises(ConfigError, match=r"damping_mode_kd_nms_per_rad: unknown joint\(s\) \['elbow'\]"):
        damping_mode_kd(with_({"default": 1.0, "elbow": 2.0}))
    with pytest.raises(ConfigError, match=r"no value \(and no 'default'\) for \['left_hip_pitch_joint'"):
        damping_mode_kd(with_({"left_knee_joint": 2.0}))
    with pytest.raises(ConfigError, match="must be finite and >= 0"):
        damping_mode_kd(with_(-1.0))
    with pytest.raises(ConfigError, match="expected a number or a mapping"):
        damping_mode_kd(with_("soft"))
    with pytest.raises(ConfigError, match="recovery_ramp_s"):
        RobotDriver(g1, PDSimConfig(), recovery_ramp_s=-1.0)


def test_driver_says_its_base_state_is_simulation_truth(g1):
    assert RobotDriver(g1, PDSimConfig()).base_state == BASE_STATE == "simulation_truth"


def test_external_wrench_fields_go_to_the_named_links(driver, g1):
    spec = port_specs(g1)["external_wrench"]
    links = g1.raw["wrench_links"]
    assert [f.name for f in spec.fields] == [f"wrench.{link}" for link in links]
    w = {f"wrench.{link}": np.zeros(6) for link in links}
    w["wrench.left_wrist_roll_link"] = np.array([10.0, 0, 0, 0, 0, 0.5])
    driver.set_wrenches(spec.unpack(spec.pack(w)))
    xfrc = driver.sim.data.xfrc_applied
    np.testing.assert_array_equal(xfrc[driver.sim.model.body("left_wrist_roll_link").id], w["wrench.left_wrist_roll_link"])
    assert np.count_nonzero(xfrc) == 2
    # the hand moves along the force under a soft arm PD
    p0 = driver.sim.data.xipos[driver.sim.model.body("left_wrist_roll_link").id].copy()
    for _ in range(25):
        driver.offer_command(_cmd(g1), driver.readings.t)
        driver.advance()
    p1 = driver.sim.data.xipos[driver.sim.model.body("left_wrist_roll_link").id]
    assert p1[0] - p0[0] > 0.005
    driver.set_wrenches(None)  # a malformed message clears the wrenches
    assert np.count_nonzero(xfrc) == 0 and driver.status.malformed_wrenches == 1
    bad = dict(w)
    bad["wrench.pelvis"] = np.array([np.nan, 0, 0, 0, 0, 0])
    with pytest.raises(ContractError, match="wrench.pelvis"):
        driver.set_wrenches(bad)


def test_fall_ends_the_run(driver, g1):
    z = np.zeros(g1.n)
    limp = {"q_target": g1.theta_default, "kp": z, "kd": z, "tau_ff": z, "ok": np.ones(1)}
    done = False
    for _ in range(200):
        driver.offer_command(limp, driver.readings.t)
        _, done = driver.advance()
        if done:
            break
    assert done and driver.status.fell and driver.readings.base_height < g1.fall_height_m


def test_max_sim_time_ends_the_run(g1):
    d = RobotDriver(g1, PDSimConfig(), max_sim_time_s=0.1)
    d.reset()
    dones = []
    for _ in range(5):
        d.offer_command(_cmd(g1), d.readings.t)
        dones.append(d.advance()[1])
    assert dones == [False, False, False, False, True]


def test_payload_option(g1):
    pm = parse_payload("torso_link:3.5:0.1:0:0.2", 0)
    assert (pm.parent, pm.mass, pm.pos) == ("torso_link", 3.5, (0.1, 0.0, 0.2))
    for bad in ("torso_link", "torso_link:abc", "torso_link:1:2", ":1", "torso_link:-1"):
        with pytest.raises(ConfigError, match="--payload"):
            parse_payload(bad)
    d = RobotDriver(g1, PDSimConfig(), payloads=[parse_payload("torso_link:2.0")])
    d.reset()
    for _ in range(100):
        d.offer_command(_cmd(g1), d.readings.t)
        r, _ = d.advance()
    fz = r.wrenches["left_foot"][2] + r.wrenches["right_foot"][2]
    assert fz == pytest.approx(g1.weight + 2.0 * 9.81, rel=3e-3)


def test_config_class_and_29dof(g1):
    with pytest.raises(ConfigError, match="needs a PDSimConfig"):
        RobotDriver(g1, SimConfig())
    r29 = load_robot("g1_29dof")
    d = RobotDriver(r29, PDSimConfig())
    assert d.wrench_links[0] == "left_wrist_yaw_link"
    spec = port_specs(r29)["joint_command"]
    assert spec.fields[0].size == 29
