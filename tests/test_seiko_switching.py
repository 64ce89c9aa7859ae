"""Contact switching (seiko.md §7.3-7.4), pushing mode (§7.2), refused requests, the environment
check, the joint-torque force estimate (§6.7) and the admittance (14).

The Retargeting runs alone here (no simulation): a foot is unloaded at the rate limit, lifted
5 cm, put back and reloaded; a hand contact is pushed to a force; bad requests are refused and
the state keeps the robot balanced (QP ok, total vertical force = weight).
"""

from __future__ import annotations

import logging

import numpy as np
import pinocchio as pin
import pytest

from contactflow.environment import load_environment
from contactflow.robot import load_robot
from contactflow.seiko.admittance import AdmittanceParams, EffectorAdmittance, deadband_norm
from contactflow.seiko.controller import ControllerConfig, SeikoController
from contactflow.seiko.estimation import JointTorqueForceEstimator
from contactflow.seiko.retargeting import NormalForceCommandFilter, RetargetingConfig, SeikoRetargeting

DT = 0.002


@pytest.fixture(scope="module")
def robot():
    return load_robot("talos")


@pytest.fixture(scope="module")
def env(robot):
    return load_environment(robot.raw["environment"])


def _ready(robot, env=None):
    rt = SeikoRetargeting(RetargetingConfig(), robot, env)
    rt.reset()
    out = None
    for _ in range(1000):  # 2 s init ramp
        out = rt.step()
    return rt, out


def _vertical_force(robot, out):
    fz = 0.0
    for k, lam in out.lam.items():
        if out.enabled[k] and robot.contacts[k].type == "plane":
            fz += (out.poses[k].rotation @ lam[:3])[2]
    return fz


def test_foot_unload_lift_reload(robot, caplog):
    rt, out = _ready(robot)
    assert rt.request_contact("right_foot", False).accepted
    fz, released_at = [], None
    for i in range(5000):
        out = rt.step()
        assert out.ok
        if not out.enabled["right_foot"]:
            released_at = i
            break
        fz.append(out.lam["right_foot"][2])
        assert out.switching["right_foot"] == "disabling"
    assert released_at is not None
    # unloading at the 60 N/s rate limit (9m), never faster, with the smooth 2 s ramp-in and the
    # 30 N taper of the bound: 440 N in 440/60 + 2/2 + (pi/2 - 1) 30/60 s, bounded jerk
    par = rt.config.plane
    rate = np.diff(fz) / DT
    assert np.max(np.abs(rate)) <= 60.0 + 1e-6
    assert released_at * DT == pytest.approx(
        440.0 / 60.0 + par.disable_ramp_s / 2 + (np.pi / 2 - 1) * par.disable_taper_n / 60.0, rel=0.02)
    assert abs(rate[0]) < 0.1 and abs(rate[-1]) < 10.0  # starts and ends at (almost) zero rate
    # bounded second derivative: ramp-in 60 pi / (2 T) = 47 N/s^2; taper 60^2 / 30 = 120 N/s^2 at
    # f -> 0 (+12 % in the last steps, where the discrete steps meet the sqrt)
    acc = np.diff(rate) / DT
    assert np.max(np.abs(acc)) <= 1.2 * 60.0**2 / par.disable_taper_n
    # released in the step after it fell below dt x the tapered bound (§7.4): ~1 mN with the taper
    assert fz[-1] < 0.01
    assert np.all(out.lam["right_foot"] == 0)
    assert _vertical_force(robot, out) == pytest.approx(robot.weight, rel=1e-3)  # one foot carries all
    # the released foot is free: lift it 5 cm and put it back
    T0 = out.poses["right_foot"]
    for i in range(1000):
        up = 0.05 * min(1.0, i / 400)
        out = rt.step({"right_foot": pin.SE3(T0.rotation, T0.translation + [0, 0, up])})
        assert out.ok
    assert out.poses["right_foot"].translation[2] == pytest.approx(0.05, abs=2e-3)
    for i in range(1000):
        down = 0.05 * max(0.0, 1.0 - i / 400)
        out = rt.step({"right_foot": pin.SE3(T0.rotation, T0.translation + [0, 0, down])})
    assert abs(out.poses["right_foot"].translation[2]) < 2e-3
    # reload: fz_min ratchets from 0 up to 100 N (§7.3), force rate <= 60 N/s
    assert rt.request_contact("right_foot", True).accepted
    prev = 0.0
    for i in range(2000):
        out = rt.step()
        assert out.ok
        assert abs(out.lam["right_foot"][2] - prev) / DT <= 60.0 + 1e-6
        prev = out.lam["right_foot"][2]
        if out.switching["right_foot"] == "":
            break
    assert out.fz_min["right_foot"] == pytest.approx(100.0)
    assert out.lam["right_foot"][2] >= 100.0 - 1e-6
    assert _vertical_force(robot, out) == pytest.approx(robot.weight, rel=1e-3)


def test_bad_requests_are_refused_and_the_robot_stays_balanced(robot, env, caplog):
    rt, out = _ready(robot, env)
    caplog.set_level(logging.WARNING)
    # enabling a hand far from any surface (the default hand is ~11 cm from the wall)
    r = rt.request_contact("left_hand", True)
    assert not r.accepted and "from the nearest surface" in r.message and "left_hand" in r.message
    # pushing mode on a disabled contact
    r = rt.request_push("right_hand", True)
    assert not r.accepted and "not an enabled contact" in r.message
    # disabling the last supporting foot
    assert rt.request_contact("left_foot", False).accepted
    r = rt.request_contact("right_foot", False)
    assert not r.accepted and "last supporting" in r.message
    # a NaN normal-force velocity, an unknown effector
    out = rt.step(normal_force_rates={"left_foot": float("nan")})
    assert out.ok
    assert not rt.request_contact("nose", True).accepted
    assert rt.n_refused == 5
    assert "request refused" in caplog.text
    for _ in range(200):
        out = rt.step()
        assert out.ok
    assert out.enabled == {"left_foot": True, "right_foot": True, "left_hand": False, "right_hand": False}
    assert out.switching["left_foot"] == "disabling"  # the accepted request goes on
    assert _vertical_force(robot, out) == pytest.approx(robot.weight, rel=1e-3)


def test_point_contact_push_mode_ramps_normal_force(robot):
    rt, out = _ready(robot)  # no environment: the hand contact is accepted where it is
    assert rt.request_contact("left_hand", True).accepted
    for _ in range(250):
        out = rt.step()
    f0 = out.lam["left_hand"][2]
    assert rt.request_push("left_hand", True).accepted
    for i in range(2500):
        out = rt.step(normal_force_rates={"left_hand": 8.0})
        assert out.ok and out.push["left_hand"]
    # 5 s at 8 N/s, delayed by the 2 Hz low-pass and the bang-bang start
    assert out.lam["left_hand"][2] == pytest.approx(f0 + 40.0, abs=4.0)
    assert out.lam["left_hand"][2] == pytest.approx(out.lam_target["left_hand"][2], abs=1.0)
    # the world force of the hand (normal -x) is balanced by the feet's tangential forces
    fx_feet = sum((out.poses[k].rotation @ out.lam[k][:3])[0] for k in ("left_foot", "right_foot"))
    assert fx_feet == pytest.approx(out.lam["left_hand"][2], rel=0.05)
    assert rt.request_push("left_hand", False).accepted
    assert rt.request_contact("left_hand", False).accepted
    for _ in range(4000):
        out = rt.step()
        if not out.enabled["left_hand"]:
            break
    assert not out.enabled["left_hand"] and out.ok


def test_normal_force_filter_rate_and_clamp():
    f = NormalForceCommandFilter(DT, 5.0, 2.0, 10.0, 100.0)
    f.reset(20.0)
    outs = [f.step(50.0, 20.0) for _ in range(1000)]
    assert max(outs) <= 25.0 + 1e-9  # reference clamped to +-5 N around the current force
    assert np.max(np.abs(np.diff(outs))) / DT <= 10.0 + 1e-6


def test_environment_distance(env):
    assert env.distance(np.array([0.49, 0.35, 1.0]), "left_hand_frame") == pytest.approx(0.0, abs=1e-9)
    assert env.distance(np.array([0.40, 0.35, 1.0]), "left_hand_frame") == pytest.approx(0.09)
    assert env.distance(np.array([0.0, 0.0, 0.02])) == pytest.approx(0.02)  # floor


def test_joint_torque_force_estimate_recovers_a_known_force(robot, env):
    est = JointTorqueForceEstimator(robot.model, "right_hand_frame", env.force_joints["right_hand_frame"])
    q = robot.q_default
    data = robot.model.createData()
    f_W = np.array([3.0, 25.0, -4.0])
    pin.computeJointJacobians(robot.model, data, q)
    pin.updateFramePlacements(robot.model, data)
    J = pin.getFrameJacobian(robot.model, data, est.frame_id, pin.LOCAL_WORLD_ALIGNED)[:3]
    tau = (pin.computeGeneralizedGravity(robot.model, data, q) - J.T @ f_W)[6:]  # tau = g - J^T f
    assert np.allclose(est.estimate(q, tau), f_W, atol=1e-6)


def test_admittance_deadband_gain_clamp_and_enabled():
    a = EffectorAdmittance(AdmittanceParams.hand())
    assert np.all(a.step(np.array([8.0, 0, 0]), False) == 0)  # inside the 10 N deadband
    assert np.allclose(a.step(np.array([0, 0, 20.0]), False)[:3], [0, 0, 0.003 * 10.0])
    assert np.linalg.norm(a.step(np.array([500.0, 0, 0]), False)) == pytest.approx(0.1)  # clamp
    assert np.all(a.step(np.array([0, 0, 50.0]), True) == 0)  # enabled contact: no admittance
    assert np.allclose(deadband_norm(np.array([3.0, 4.0]), 2.0), [1.8, 2.4])


def test_contracts_carry_the_switching_fields(robot):
    from contactflow.contracts.messages import port_specs

    specs = port_specs(robot)
    oc = {f.name: f.size for f in specs["operator_command"].fields}
    assert oc["enable"] == oc["push"] == oc["force_rate"] == len(robot.contacts)
    des = {f.name for f in specs["desired"].fields}
    assert {"switching", "push", "n_refused", "lam_target.left_hand"} <= des
    sen = {f.name for f in specs["sensors"].fields}
    assert {"force.left_hand", "force.right_hand"} <= sen


def test_mujoco_scene_wall_hand_spheres_and_wrist_ft(robot, env):
    from contactflow.sim.mujoco_robot import MujocoRobotSim, SimConfig

    sim = MujocoRobotSim(SimConfig(), robot, environment=env)
    m = sim.model
    assert m.geom("front_wall").id >= 0 and m.geom("right_support").id >= 0
    assert m.geom("left_hand_frame_sphere").size[0] == pytest.approx(0.03)
    r = sim.reset()
    for _ in range(100):
        r = sim.step(robot.theta_default)
    assert np.linalg.norm(r.hand_forces["left_hand"]) < 0.5  # free hand: weight compensated
    sim.set_external_wrench("gripper_left_base_link", np.array([-40.0, 0, 0, 0, 0, 0]))
    for _ in range(200):
        r = sim.step(robot.theta_default)
    assert np.allclose(r.hand_forces["left_hand"], [-40.0, 0, 0], atol=1.5)
    assert not sim.fell()


def test_wrist_ft_sees_an_unmodelled_payload(robot, env):
    """A payload welded below the wrist sensor is a load the sensor must measure (the sensor is
    tared for the nominal hand only)."""
    from contactflow.sim.mujoco_model import PointMass
    from contactflow.sim.mujoco_robot import MujocoRobotSim, SimConfig

    payload = PointMass(name="payload", parent="gripper_left_base_link", pos=(0.0, 0.0, -0.05), mass=2.0)
    sim = MujocoRobotSim(SimConfig(), robot, environment=env, extra_bodies=[payload])
    r = sim.reset()
    for _ in range(250):
        r = sim.step(robot.theta_default)
    f = r.hand_forces["left_hand"]  # on the robot, world frame: the payload pulls down
    assert f[2] == pytest.approx(-2.0 * 9.81, abs=1.0)
    assert abs(f[0]) < 1.0 and abs(f[1]) < 1.0


# ------------------------------------------------------------------ foot release on the measured force


def _ctl_step(ctl, robot, lam_d, lam_read, enabled):
    return ctl.step(q_d=robot.q_default, v_d=np.zeros(robot.nv), lam_d=lam_d, lam_d_dot=None, enabled=enabled,
                    lam_read=lam_read, tau_read=None)


def test_controller_holds_a_released_foot_until_its_measured_force_is_low(robot):
    """The Retargeting releases on the desired force; the Controller keeps the foot a contact
    (raising its target) while the filtered measured f_z is above release_max_force_n."""
    w = robot.weight / 2.0
    lam = {k: np.array([0.0, 0.0, w, 0.0, 0.0, 0.0]) for k in ("left_foot", "right_foot")}
    feet = {"left_foot": True, "right_foot": True}
    single = {"left_foot": True, "right_foot": False}
    cfg = ControllerConfig()
    # paper / released code (release_max_force_n = 0): the switch follows the Retargeting's flag
    ctl = SeikoController(ControllerConfig(release_max_force_n=0.0), robot)
    ctl.reset(robot.q_default, lam, feet)
    out = _ctl_step(ctl, robot, {**lam, "right_foot": np.zeros(6)}, {**lam, "right_foot": np.array([0, 0, 40.0, 0, 0, 0])}, single)
    assert out.diagnostics["switched"] and not ctl.enabled["right_foot"]
    # default: held while 40 N are measured, the contact target rises (ramped in), lam_d = 0
    ctl = SeikoController(cfg, robot)
    ctl.reset(robot.q_default, lam, feet)
    z0 = ctl.targets["right_foot"].translation[2]
    lam_d = {"left_foot": np.array([0.0, 0.0, 2 * w, 0, 0, 0]), "right_foot": np.zeros(6)}
    read = {"left_foot": np.array([0.0, 0.0, 2 * w - 40.0, 0, 0, 0]), "right_foot": np.array([0, 0, 40.0, 0, 0, 0])}
    for _ in range(600):
        out = _ctl_step(ctl, robot, lam_d, read, single)
        assert out.ok and not out.diagnostics["switched"]
    assert ctl.enabled["right_foot"] and out.diagnostics["n_var"] == 43  # still two plane contacts
    rise = ctl.targets["right_foot"].translation[2] - z0
    # 1.2 s: a 1 s raised-cosine ramp-in (worth 0.5 s at full speed) + 0.2 s at
    # min(1 mm/s, 1e-4 (m/s)/N x 40 N) = 1 mm/s, i.e. 0.7 s at 1 mm/s
    assert rise == pytest.approx(cfg.release_lift_max_m_per_s * (600 * DT - cfg.release_ramp_s / 2), rel=0.02)
    # the measured force falls to 0: released once the 5 Hz low-pass is below 3 N (~0.08 s)
    read = {"left_foot": np.array([0.0, 0.0, 2 * w, 0, 0, 0]), "right_foot": np.zeros(6)}
    for i in range(200):
        out = _ctl_step(ctl, robot, lam_d, read, single)
        if out.diagnostics["switched"]:
            break
    assert out.ok and out.diagnostics["switched"] and not ctl.enabled["right_foot"]
    assert 0.05 < i * DT < 0.15
    assert out.diagnostics["n_var"] == 37
    np.testing.assert_array_equal(out.lam_flex["right_foot"], 0.0)


def test_reenabling_a_held_foot_restores_its_contact_target(robot):
    """A foot re-enabled during the Controller's hold gets its contact target (11g) back, without
    the hold's rise; the hold is reported in the diagnostics while it lasts."""
    w = robot.weight / 2.0
    lam = {k: np.array([0.0, 0.0, w, 0.0, 0.0, 0.0]) for k in ("left_foot", "right_foot")}
    feet = {"left_foot": True, "right_foot": True}
    single = {"left_foot": True, "right_foot": False}
    ctl = SeikoController(ControllerConfig(), robot)
    ctl.reset(robot.q_default, lam, feet)
    z0 = ctl.targets["right_foot"].translation[2]
    read = {"left_foot": np.array([0.0, 0.0, 2 * w - 40.0, 0, 0, 0]), "right_foot": np.array([0, 0, 40.0, 0, 0, 0])}
    lam_d = {"left_foot": np.array([0.0, 0.0, 2 * w, 0, 0, 0]), "right_foot": np.zeros(6)}
    for _ in range(1000):
        out = _ctl_step(ctl, robot, lam_d, read, single)
    assert out.diagnostics["held"] == ["right_foot"]
    assert ctl.targets["right_foot"].translation[2] - z0 > 1e-3  # risen during the hold
    out = _ctl_step(ctl, robot, lam, read, feet)  # the operator enables it again
    assert out.ok and out.diagnostics["held"] == [] and ctl.enabled["right_foot"]
    assert ctl.targets["right_foot"].translation[2] == pytest.approx(z0, abs=1e-12)


def test_a_disabling_contact_at_zero_force_is_released(robot):
    """With the taper the rate bound is 0 at 0 N: a contact disabled before it carried any force
    must still be released (it would otherwise stay 'disabling' forever)."""
    from contactflow.seiko.retargeting import PointEffectorParams

    cfg = RetargetingConfig(point=PointEffectorParams(disable_taper_n=5.0))
    rt = SeikoRetargeting(cfg, robot)
    rt.reset()
    for _ in range(1000):
        rt.step()
    assert rt.request_contact("left_hand", True).accepted
    assert rt.request_contact("left_hand", False).accepted  # at once: lambda is exactly 0
    assert rt._lam["left_hand"][2] == 0.0
    for _ in range(50):
        out = rt.step()
        if not out.enabled["left_hand"]:
            break
    assert out.ok and not out.enabled["left_hand"]


def test_foot_unloading_measured_force_rate_in_mujoco(robot, env):
    """Closed loop (Retargeting -> Controller -> MuJoCo, multi-contact scene): the measured right-sole
    f_z changes no faster than the 60 N/s rate limit + 20 N/s over 50 ms windows in the first 3 s
    of the unloading (with the paper's step of the bound to 60 N/s: ~320 N/s at +0.3 s, a kicked
    1.7 Hz sway; docs/seiko_multicontact.md, Foot lift)."""
    from contactflow.sim.mujoco_robot import MujocoRobotSim, SimConfig

    sim = MujocoRobotSim(SimConfig(), robot, environment=env)
    rt = SeikoRetargeting(RetargetingConfig(), robot, env)
    prev = rt.reset()
    ctl = SeikoController(ControllerConfig(), robot)
    ctl.reset(prev.q, prev.lam, prev.enabled)
    r = sim.reset()
    t_req, t_end = 2.5, 5.5
    fz = []
    for k in range(int(round(t_end / DT))):
        if k == int(round(t_req / DT)):
            assert rt.request_contact("right_foot", False).accepted
        out = rt.step()
        assert out.ok
        co = ctl.step(q_d=prev.q, v_d=prev.v, lam_d=prev.lam, lam_d_dot=prev.lam_dot, enabled=prev.enabled,
                      lam_read={e: r.wrenches[e] for e in ("left_foot", "right_foot")}, tau_read=r.tau,
                      theta_ahead=prev.theta_ahead)
        assert co.ok
        prev = out
        r = sim.step(co.theta_cmd)
        fz.append(r.wrenches["right_foot"][2])
        assert not sim.fell()
    fz = np.array(fz)
    assert out.switching["right_foot"] == "disabling" and fz[-1] < fz[int(t_req / DT)] - 60.0  # unloading
    w = int(round(0.05 / DT))
    i0 = int(round(t_req / DT))
    rate = np.abs(fz[i0 + w :] - fz[i0:-w]) / 0.05
    assert np.max(rate) <= 60.0 + 20.0, f"max {np.max(rate):.1f} N/s at {(i0 + w + np.argmax(rate)) * DT:.2f} s"
