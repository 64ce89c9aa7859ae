"""The mujoco_driver logic for PD robots (contactflow.sim.driver.RobotDriver), in-process: command
safety (hold the last safe PD command), external wrenches, payloads, falls, the end of a run."""

from __future__ import annotations

import numpy as np
import pytest

from contactflow.errors import ConfigError, ContractError
from contactflow.messages import port_specs
from contactflow.robot import load_robot
from contactflow.safety import PDCommandHold
from contactflow.sim.driver import RobotDriver, parse_payload
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


@pytest.mark.parametrize("what", ["nan_target", "beyond_limit", "negative_kp", "huge_kd", "inf_tau_ff", "missing"])
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


def test_pd_hold_timeout_reports_stale_commands(g1):
    h = PDCommandHold(g1.theta_default, g1.K, g1.kd, timeout_s=0.1)
    assert h.offer(_cmd(g1), 1.0)
    h.pd_command(1.05)
    assert not h.holding
    q, kp, kd, tff = h.pd_command(1.5)
    assert h.holding
    np.testing.assert_allclose(kp, g1.K * 10)


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
        driver.offer_command(_cmd(g1), 0.0)
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
        driver.offer_command(limp, 0.0)
        _, done = driver.advance()
        if done:
            break
    assert done and driver.status.fell and driver.readings.base_height < g1.fall_height_m


def test_max_sim_time_ends_the_run(g1):
    d = RobotDriver(g1, PDSimConfig(), max_sim_time_s=0.1)
    d.reset()
    dones = []
    for _ in range(5):
        d.offer_command(_cmd(g1), 0.0)
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
        d.offer_command(_cmd(g1), 0.0)
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
