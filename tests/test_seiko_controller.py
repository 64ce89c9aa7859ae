"""SEIKO Controller (RA-L 2024 eqs. 3-7, 10-13): runInit, QP (11), closed loop on a flexible plant."""

from __future__ import annotations

import logging

import numpy as np
import pinocchio as pin
import pytest

from contactflow.config import load_config
from contactflow.errors import ConfigError, ContractError
from contactflow.robot import load_robot
from contactflow.seiko.controller import (
    ControllerConfig,
    SeikoController,
    flexible_equilibrium_residual,
    flexible_equilibrium_step,
)
from contactflow.seiko.equilibrium import equilibrium_terms

FEET = {"left_foot": True, "right_foot": True}


@pytest.fixture(scope="module")
def robot():
    return load_robot("talos")


def _lam0(robot):
    w = robot.weight / 2.0
    return {"left_foot": np.array([0.0, 0.0, w, 0.0, 0.0, 0.0]), "right_foot": np.array([0.0, 0.0, w, 0.0, 0.0, 0.0])}


def _step(ctl, robot, q_d, lam_d, lam_read, tau_read=None, enabled=FEET, **kw):
    return ctl.step(
        q_d=q_d,
        v_d=np.zeros(robot.nv),
        lam_d=lam_d,
        lam_d_dot=None,
        enabled=enabled,
        lam_read=lam_read,
        tau_read=tau_read,
        **kw,
    )


def _plant_model(robot, extra_kg):
    """The robot model with an unmodelled point mass on the left hand frame."""
    m = robot.model.copy()
    fr = m.frames[robot.contacts["left_hand"].frame_id]
    m.inertias[fr.parentJoint] = m.inertias[fr.parentJoint] + pin.Inertia(extra_kg, fr.placement.translation, np.zeros((3, 3)))
    return m


# ------------------------------------------------------------------------------------- config


def test_config_defaults_and_loader(robot):
    cfg = ControllerConfig()
    assert (cfg.kp_per_s, cfg.kd, cfg.kd_sign, cfg.dt_s) == (0.2, 0.0, -1.0, 0.002)
    assert (cfg.max_pos_cmd_offset_rad, cfg.init_iterations, cfg.command_blend_s) == (0.5, 3, 2.0)
    cfg = load_config(ControllerConfig, {"kd": 0.02, "max_tau_ratio": 0.6}, source="test.yaml:controller")
    assert cfg.kd == 0.02 and cfg.max_tau_ratio == 0.6
    with pytest.raises(ConfigError, match="unknown key"):
        load_config(ControllerConfig, {"gain_p": 1.0})
    with pytest.raises(ConfigError, match="kd_sign"):
        load_config(ControllerConfig, {"kd_sign": 0.5})


def test_qp_solver_key_and_both_solvers_give_the_same_commands(robot):
    """qp_solver: daqp (default) and quadprog (the reference) solve the same QP (11) and runInit;
    anything else is refused naming the key."""
    assert ControllerConfig().qp_solver == "daqp"
    with pytest.raises(ConfigError, match="qp_solver"):
        load_config(ControllerConfig, {"qp_solver": "osqp"}, source="test.yaml:seiko_controller")
    cmds = {}
    for solver in ("daqp", "quadprog"):
        ctl = SeikoController(ControllerConfig(qp_solver=solver), robot)
        out = ctl.reset(robot.q_default, _lam0(robot), FEET)
        lam_d = {k: out.lam_flex[k].copy() for k in FEET}
        read = {k: v.copy() for k, v in lam_d.items()}
        read["left_foot"][2] += 20.0
        read["right_foot"][2] -= 20.0
        rows = []
        for _ in range(20):
            out = _step(ctl, robot, robot.q_default, lam_d, read, tau_read=out.tau_flex)
            assert out.ok and out.diagnostics["status"] == "optimal", out.diagnostics
            rows.append(out.theta_cmd)
        cmds[solver] = np.array(rows)
    assert np.max(np.abs(cmds["daqp"] - cmds["quadprog"])) < 1e-9


def test_far_reach_config_file_loads():
    """robots/talos/seiko_far_reach.yaml (dataflows/seiko_talos_far_reach.yml) is a valid section."""
    from pathlib import Path

    from contactflow.config import read_yaml

    data = read_yaml(Path(__file__).resolve().parent.parent / "robots/talos/seiko_far_reach.yaml")
    cfg = load_config(ControllerConfig, data["seiko_controller"], source="seiko_far_reach.yaml:seiko_controller")
    assert (cfg.max_tau_ratio, cfg.tau_read_cutoff_hz, cfg.torque_lowering_nm_per_s) == (0.6, 5.0, 10.0)


# ------------------------------------------------------------------------------------- runInit


def test_reset_gives_the_flexible_equilibrium_of_the_commanded_posture(robot):
    ctl = SeikoController(ControllerConfig(), robot)
    out = ctl.reset(robot.q_default, _lam0(robot), FEET)
    assert out.ok, out.diagnostics
    on = ctl.contacts_on
    lams = [out.lam_flex[c.name] for c in on]
    theta_cmd = robot.q_default[7:]
    np.testing.assert_allclose(out.theta_cmd, theta_cmd)
    np.testing.assert_array_equal(out.offset, 0.0)
    # All 6 + n rows of g - J^T lam - S K (theta_cmd - theta_flex) vanish.
    res = flexible_equilibrium_residual(robot.model, robot.model.createData(), out.q_flex, theta_cmd, robot.K, on, lams, [None, None])
    assert np.max(np.abs(res)) < 1e-6 * robot.weight
    # K (theta_cmd - theta_flex) equals the static joint torques (g - J^T lam)_J at the flexible state.
    terms = equilibrium_terms(robot.model, robot.model.createData(), out.q_flex, on, lams, [None, None])
    np.testing.assert_allclose(out.tau_flex, terms.r[6:], atol=1e-6 * robot.weight)
    np.testing.assert_allclose(out.tau_flex, robot.K * (theta_cmd - out.q_flex[7:]), atol=1e-9)
    # The posture is deflected, the total vertical force carries the weight, the soles stay put.
    assert np.max(np.abs(out.q_flex[7:] - theta_cmd)) > 1e-3
    assert out.lam_flex["left_foot"][2] + out.lam_flex["right_foot"][2] == pytest.approx(robot.weight, rel=1e-6)
    data = robot.model.createData()
    pin.framesForwardKinematics(robot.model, data, robot.q_default)
    for c in on:
        pin.framesForwardKinematics(robot.model, ctl.data, out.q_flex)
        np.testing.assert_allclose(ctl.data.oMf[c.frame_id].homogeneous, data.oMf[c.frame_id].homogeneous, atol=1e-9)


# ------------------------------------------------------------------------------------- QP (11)


def _leaning_posture(robot):
    q = robot.q_default.copy()
    j = {name: 7 + i for i, name in enumerate(robot.joint_names)}
    q[j["torso_1_joint"]] = 0.3
    q[j["torso_2_joint"]] = 0.2
    q[j["arm_left_1_joint"]] = -0.6
    q[j["arm_left_4_joint"]] = -0.9
    q[j["arm_right_2_joint"]] = -1.0
    return q


@pytest.mark.parametrize(
    "posture, enabled, sizes",
    [
        # (n_var, n_eq, n_ineq, n_rows): n_ineq = 6 n inequalities of (11) as the paper writes
        # them (seiko.md §10.2, 150 for Talos); n_rows = 2 n two-sided rows actually solved
        # (command/offset and joint torque per joint)
        ("default", FEET, (43, 18, 150, 50)),
        ("leaning", FEET, (43, 18, 150, 50)),
        ("default", {**FEET, "left_hand": True, "right_hand": True}, (49, 24, 150, 50)),
    ],
)
def test_qp_status_and_residuals(robot, posture, enabled, sizes):
    q_d = robot.q_default if posture == "default" else _leaning_posture(robot)
    ctl = SeikoController(ControllerConfig(), robot)
    lam_d = _lam0(robot)
    for h in ("left_hand", "right_hand"):
        if enabled.get(h):
            lam_d[h] = np.array([0.0, 0.0, 10.0])
    out = ctl.reset(q_d, lam_d, enabled)
    assert out.ok, out.diagnostics
    lam_d = {k: v.copy() for k, v in out.lam_flex.items() if enabled.get(k)}
    # A wrench error to react to: 20 N more on the left sole, 20 N less on the right.
    lam_read = {k: v.copy() for k, v in lam_d.items()}
    lam_read["left_foot"][2] += 20.0
    lam_read["right_foot"][2] -= 20.0
    for _ in range(5):
        out = _step(ctl, robot, q_d, lam_d, lam_read, tau_read=out.tau_flex, enabled=enabled)
        d = out.diagnostics
        assert out.ok and d["status"] == "optimal", d
        assert (d["n_var"], d["n_eq"], d["n_ineq"], d["n_rows"]) == sizes
        assert d["eq_residual"] < 1e-8 * max(1.0, robot.weight / ctl.config.dt_s)
        assert d["ineq_violation"] < 1e-6
        assert d["bias_base_n"] < 1e-3 and d["bias_joint_rad"] < 1e-3
    # Flexible state after integration: base equilibrium still holds, contacts did not move.
    on = ctl.contacts_on
    lams = [out.lam_flex[c.name] for c in on]
    R_cs = [ctl.R_c.get(c.name) for c in on]
    res = flexible_equilibrium_residual(robot.model, robot.model.createData(), out.q_flex, ctl.theta_d + ctl.offset, robot.K, on, lams, R_cs)
    assert np.max(np.abs(res)) < 1e-3 * robot.weight
    data = robot.model.createData()
    pin.framesForwardKinematics(robot.model, data, out.q_flex)
    for c in on:
        np.testing.assert_allclose(data.oMf[c.frame_id].translation, ctl.targets[c.name].translation, atol=1e-6)
    # Offset and command within their bounds.
    assert np.all(np.abs(out.offset) <= ctl.config.max_pos_cmd_offset_rad + 1e-12)
    assert np.all(np.abs(out.tau_flex) <= out.tau_limit + 1e-6)


def test_offset_converges_and_stays_bounded_when_the_read_equals_the_goal(robot):
    # lam_read == lam_d constant, zero rates: no wrench feedback, but the disabled hands track their
    # desired poses (11c), so the command compensates the arms' deflection and the offset settles.
    ctl = SeikoController(ControllerConfig(), robot)
    out = ctl.reset(robot.q_default, _lam0(robot), FEET)
    lam_d = {k: out.lam_flex[k].copy() for k in FEET}
    data = robot.model.createData()
    pin.framesForwardKinematics(robot.model, data, robot.q_default)
    p_d = {h: data.oMf[robot.contacts[h].frame_id].translation.copy() for h in ("left_hand", "right_hand")}
    pin.framesForwardKinematics(robot.model, data, out.q_flex)
    err0 = max(np.linalg.norm(data.oMf[robot.contacts[h].frame_id].translation - p_d[h]) for h in p_d)
    offsets = []
    for _ in range(1000):  # 2 s
        out = _step(ctl, robot, robot.q_default, lam_d, lam_d, tau_read=out.tau_flex)
        assert out.ok
        offsets.append(out.offset.copy())
    offsets = np.array(offsets)
    assert np.max(np.abs(offsets)) < 0.05  # bounded, far inside the 0.5 rad bound
    # Converging: the offset moves ever less (first vs last 100 steps), to a limit of a few mrad.
    early = np.max(np.abs(offsets[199] - offsets[99]))
    late = np.max(np.abs(offsets[999] - offsets[899]))
    assert late < 0.35 * early
    pin.framesForwardKinematics(robot.model, data, out.q_flex)
    err = max(np.linalg.norm(data.oMf[robot.contacts[h].frame_id].translation - p_d[h]) for h in p_d)
    assert err0 > 2e-3 and err < 0.3 * err0  # the arms' deflection is being compensated
    for k in FEET:  # the flexible wrenches stay at the goal
        np.testing.assert_allclose(out.lam_flex[k], lam_d[k], atol=2.0)


def test_offset_converges_to_the_command_that_realises_lam_d_on_a_perfect_plant(robot):
    # Plant = the controller's own flexible model (lam_read = lam_flex): the goal asks for an
    # internal force (the soles pushed 20 N apart along y, no net wrench on the robot); the offset
    # converges to the command whose flexible equilibrium has exactly these wrenches.
    # The hands' pose tracking (11c) is switched off here so that the wrench loop is the only drive.
    ctl = SeikoController(ControllerConfig(kp_per_s=4.0, weight_pose_point_pos=0.0), robot)
    out = ctl.reset(robot.q_default, _lam0(robot), FEET)
    lam_d = {k: out.lam_flex[k].copy() for k in FEET}
    lam_d["left_foot"][1] += 20.0
    lam_d["right_foot"][1] -= 20.0
    offsets = []
    for _ in range(1000):
        out = _step(ctl, robot, robot.q_default, lam_d, out.lam_flex, tau_read=out.tau_flex)
        assert out.ok
        offsets.append(out.offset.copy())
    for k in FEET:
        np.testing.assert_allclose(out.lam_flex[k], lam_d[k], atol=1.0)
    assert np.max(np.abs(offsets[999] - offsets[899])) < 0.1 * np.max(np.abs(offsets[199] - offsets[99]))
    assert 1e-4 < np.max(np.abs(out.offset)) < 0.1
    # Independent check: the flexible equilibrium of theta_d + offset (fresh runInit) has lam_d.
    on = ctl.contacts_on
    q, lams = robot.q_default.copy(), [v.copy() for v in _lam0(robot).values()]
    targets = [ctl.targets[c.name] for c in on]
    data = robot.model.createData()
    for _ in range(4):
        q, lams, sol = flexible_equilibrium_step(robot.model, data, q, robot.q_default[7:] + out.offset, robot.K, on, lams, [None, None], targets)
        assert sol.found
    for c, lam in zip(on, lams):
        np.testing.assert_allclose(lam, lam_d[c.name], atol=2.0)


def test_closed_loop_with_an_unmodelled_hand_mass_reduces_the_vertical_force_error(robot):
    # Plant: quasi-static flexible equilibrium of the same model plus 5 kg on the left hand
    # (seiko.md §12). Error: left-right vertical force difference against the goal's.
    ctl = SeikoController(ControllerConfig(kp_per_s=1.0), robot)
    out = ctl.reset(robot.q_default, _lam0(robot), FEET)
    lam_d = {k: out.lam_flex[k].copy() for k in FEET}
    on = ctl.contacts_on
    targets = [ctl.targets[c.name] for c in on]
    pm = _plant_model(robot, 5.0)
    pd = pm.createData()

    def plant(theta, q, lams, iters):
        for _ in range(iters):
            q, lams, sol = flexible_equilibrium_step(pm, pd, q, theta, robot.K, on, lams, [None, None], targets)
            assert sol.found
        return q, lams

    def error(lams):
        return (lams[0][2] - lams[1][2]) - (lam_d["left_foot"][2] - lam_d["right_foot"][2])

    theta = out.theta_cmd
    q_p, lam_p = plant(theta, out.q_flex, [lam_d[c.name] for c in on], 4)
    e_open = error(lam_p)  # without the controller the plant stays here (command = theta_d)
    assert e_open > 50.0
    for _ in range(1000):  # 2 s
        out = _step(ctl, robot, robot.q_default, lam_d, {c.name: l for c, l in zip(on, lam_p)}, tau_read=robot.K * (theta - q_p[7:]))
        assert out.ok, out.diagnostics
        theta = out.theta_cmd
        q_p, lam_p = plant(theta, q_p, lam_p, 1)
    q_p, lam_p = plant(theta, q_p, lam_p, 2)
    assert abs(error(lam_p)) < 0.25 * e_open
    assert lam_p[0][2] + lam_p[1][2] == pytest.approx(robot.weight + 5.0 * 9.81, rel=1e-3)
    assert np.max(np.abs(out.offset)) < ctl.config.max_pos_cmd_offset_rad


# ------------------------------------------------------------------------------------- failures, switching


def test_qp_failure_holds_the_offset_and_does_not_raise(robot, caplog):
    ctl = SeikoController(ControllerConfig(), robot)
    out = ctl.reset(robot.q_default, _lam0(robot), FEET)
    lam_d = {k: out.lam_flex[k].copy() for k in FEET}
    read = {k: v + np.array([0.0, 0.0, 5.0, 0.0, 0.0, 0.0]) for k, v in lam_d.items()}
    for _ in range(20):
        out = _step(ctl, robot, robot.q_default, lam_d, read)
    last_offset = out.offset.copy()
    # A desired knee far beyond its limit: (11h) needs an offset above the 0.5 rad bound.
    bad = robot.q_default.copy()
    k = 7 + robot.joint_names.index("leg_left_4_joint")
    bad[k] = -1.0
    with caplog.at_level(logging.WARNING, logger="contactflow.seiko.controller"):
        out = _step(ctl, robot, bad, lam_d, read)
    assert not out.ok
    assert out.diagnostics["status"] in ("infeasible", "residual")
    np.testing.assert_array_equal(out.offset, last_offset)
    np.testing.assert_allclose(out.theta_cmd, bad[7:] + last_offset)
    assert any("QP failed" in r.message for r in caplog.records)
    out = _step(ctl, robot, robot.q_default, lam_d, read)  # recovers
    assert out.ok


def test_bad_inputs_raise_contract_errors(robot):
    ctl = SeikoController(ControllerConfig(), robot)
    with pytest.raises(RuntimeError):
        _step(ctl, robot, robot.q_default, _lam0(robot), _lam0(robot))
    ctl.reset(robot.q_default, _lam0(robot), FEET)
    lam = _lam0(robot)
    with pytest.raises(ContractError, match="non-finite"):
        _step(ctl, robot, robot.q_default, lam, {**lam, "left_foot": np.full(6, np.nan)})
    with pytest.raises(ContractError, match="no entry"):
        _step(ctl, robot, robot.q_default, lam, {"left_foot": lam["left_foot"]})
    with pytest.raises(ContractError, match="unknown effector"):
        _step(ctl, robot, robot.q_default, lam, {**lam, "nose": np.zeros(3)})
    with pytest.raises(ContractError, match="shape"):
        _step(ctl, robot, robot.q_default[:10], lam, lam)


def test_contact_switch_runs_init_and_blends_the_command(robot):
    ctl = SeikoController(ControllerConfig(), robot)
    out = ctl.reset(robot.q_default, _lam0(robot), FEET)
    lam_d = {k: out.lam_flex[k].copy() for k in FEET}
    for _ in range(5):
        out = _step(ctl, robot, robot.q_default, lam_d, lam_d)
    before = out.theta_cmd.copy()
    enabled = {**FEET, "left_hand": True}
    lam_d2 = {**lam_d, "left_hand": np.zeros(3)}
    out = _step(ctl, robot, robot.q_default, lam_d2, lam_d2, enabled=enabled)
    assert out.ok and out.diagnostics["switched"]
    assert out.diagnostics["n_var"] == 46
    np.testing.assert_allclose(out.theta_cmd, before, atol=1e-3)  # blended, no jump
    hand = robot.contacts["left_hand"].frame_id
    pin.framesForwardKinematics(robot.model, ctl.data, out.q_flex)
    np.testing.assert_allclose(ctl.data.oMf[hand].translation, ctl.targets["left_hand"].translation, atol=1e-6)
    out = _step(ctl, robot, robot.q_default, lam_d, lam_d, enabled=FEET)  # release it again
    assert out.ok and out.diagnostics["switched"] and out.diagnostics["n_var"] == 43
    np.testing.assert_array_equal(out.lam_flex["left_hand"], 0.0)


def test_prepare_between_steps_gives_the_same_outputs_bit_for_bit(robot, monkeypatch):
    """SeikoController.prepare (the flexible-state part of the next QP (11), computed while a node waits
    for its sensors) against the same steps without it: every output identical at every step, through
    a moving target, measured wrenches off the goal, a failed QP, a contact switch there and back, a
    new surface frame of the enabled contact, a shadow step; on the steady steps the step itself prepares nothing."""
    from contactflow.seiko import controller_qp

    calls = {"n": 0}
    real = controller_qp.Qp11Mixin._prepare_qp11

    def counted(self, ws):
        calls["n"] += 1
        return real(self, ws)

    monkeypatch.setattr(controller_qp.Qp11Mixin, "_prepare_qp11", counted)
    plain, early = SeikoController(ControllerConfig(), robot), SeikoController(ControllerConfig(), robot)
    plain._is_prepared = lambda ws: False  # the reference computes the whole QP in every step
    out = plain.reset(robot.q_default, _lam0(robot), FEET)
    early.reset(robot.q_default, _lam0(robot), FEET)
    lam_d = {k: out.lam_flex[k].copy() for k in FEET}
    hand = dict(FEET, left_hand=True)
    bad = robot.q_default.copy()
    bad[7 + robot.joint_names.index("leg_left_4_joint")] = -1.0  # (11h) infeasible: the QP fails
    arm = 7 + robot.joint_names.index("arm_left_1_joint")
    steady_prepares, lowered = [], False
    for k in range(60):
        q_d = robot.q_default.copy()
        q_d[arm] += 0.004 * k
        lam, enabled, kw = lam_d, FEET, {}
        if k == 20:
            q_d = bad
        elif 30 <= k < 40:
            lam, enabled = {**lam_d, "left_hand": np.array([0.0, 0.0, 2.0])}, hand
        elif k == 45:
            kw = {"integrating": False}
        if k == 35:  # a new surface frame of the enabled hand contact (its rows of J and the terms)
            for c in (plain, early):
                c.set_surface_rotation("left_hand", pin.rpy.rpyToMatrix(0.0, 0.3, 0.0))
        read = {e: v + np.array([0.0, 0.0, 3.0 * np.sin(0.3 * k), 0.5, 0.0, 0.0])[: len(v)] for e, v in lam.items()}
        # measured torques near the limits of some joints: the limit adaptation (12) acts on the bounds
        tau_read = np.asarray(robot.tau_max) * (0.6 + 0.3 * np.sin(0.2 * k + np.arange(robot.n)))
        a = _step(plain, robot, q_d, lam, read, tau_read=tau_read, enabled=enabled, **kw)
        before = calls["n"]
        b = _step(early, robot, q_d, lam, read, tau_read=tau_read, enabled=enabled, **kw)
        if k not in (20, 21, 30, 35, 40, 45, 46) and k > 0:
            steady_prepares.append(calls["n"] - before)
        for name in ("theta_cmd", "offset", "q_flex", "tau_flex", "tau_limit"):
            np.testing.assert_array_equal(getattr(b, name), getattr(a, name), err_msg=f"{name}, step {k}")
        for e in a.lam_flex:
            np.testing.assert_array_equal(b.lam_flex[e], a.lam_flex[e], err_msg=f"lam_flex[{e}], step {k}")
        assert (a.ok, a.diagnostics["eq_residual"]) == (b.ok, b.diagnostics["eq_residual"])
        assert a.ok == (k != 20), f"step {k}: ok {a.ok}"
        lowered = lowered or bool((a.tau_limit < np.asarray(robot.tau_max)).any())
        assert early.prepare() == (k != 45)  # nothing to prepare right after a shadow step
        early.prepare()  # twice: still the same part
    assert steady_prepares and set(steady_prepares) == {0}  # the step used what prepare() computed
    assert lowered  # (12) lowered a limit: its bounds entered the comparison


def test_shadow_mode_holds_the_offset_and_tracks_the_flexible_state(robot):
    ctl = SeikoController(ControllerConfig(), robot)
    out = ctl.reset(robot.q_default, _lam0(robot), FEET)
    lam_d = {k: out.lam_flex[k].copy() for k in FEET}
    read = {k: v + np.array([0.0, 0.0, 30.0, 0.0, 0.0, 0.0]) for k, v in lam_d.items()}
    out = _step(ctl, robot, robot.q_default, lam_d, read, integrating=False)
    assert out.ok
    np.testing.assert_array_equal(out.offset, 0.0)
    for k in FEET:  # the complementary filter passes the read through in shadow mode
        np.testing.assert_array_equal(out.lam_tilde[k], read[k])


def test_torque_limit_constraint_switch(robot):
    # (12) clamps the arm_right_2 limit (tau_read above the ratio); raising the arm would increase
    # its model torque: with (11i) |tau_flex| stays at the limit, without (11i) it passes it.
    j = robot.joint_names.index("arm_right_2_joint")
    q_d = robot.q_default.copy()
    q_d[7 + j] -= 0.4
    tau_read = np.zeros(robot.n)
    tau_read[j] = 0.9 * robot.tau_max[j]
    excess = {}
    for on in (True, False):
        ctl = SeikoController(ControllerConfig(max_tau_ratio=0.6, torque_limit_constraint=on), robot)
        out = ctl.reset(robot.q_default, _lam0(robot), FEET)
        lam = {k: out.lam_flex[k].copy() for k in FEET}
        tau0 = abs(out.tau_flex[j])
        ex = []
        for _ in range(100):
            out = _step(ctl, robot, q_d, lam, lam, tau_read=tau_read)
            assert out.ok
            assert out.tau_limit[j] == pytest.approx(tau0 + ctl.config.torque_margin_nm, abs=1e-6)
            ex.append(abs(out.tau_flex[j]) - out.tau_limit[j])
        excess[on] = max(ex)
    assert excess[True] < 1e-6
    assert excess[False] > 5.0


def test_tau_read_low_pass_ignores_a_one_tick_spike(robot):
    # A one-tick spike above the ratio lowers the (12) limit when tau_read is used raw; the 5 Hz
    # low-pass of the code's joint-torque sensors (seiko.md §6.4) keeps it far below the ratio.
    j = robot.joint_names.index("arm_left_1_joint")
    for cutoff, lowered in ((0.0, True), (5.0, False)):
        ctl = SeikoController(ControllerConfig(max_tau_ratio=0.6, tau_read_cutoff_hz=cutoff), robot)
        out = ctl.reset(robot.q_default, _lam0(robot), FEET)
        lam = {k: out.lam_flex[k].copy() for k in FEET}
        for k in range(3):
            tau_read = np.zeros(robot.n)
            if k == 1:
                tau_read[j] = 0.9 * robot.tau_max[j]
            out = _step(ctl, robot, robot.q_default, lam, lam, tau_read=tau_read)
        assert (out.tau_limit[j] < 0.5 * robot.tau_max[j]) == lowered


def test_enabled_and_lam_flex_are_read_only_views(robot):
    """The QP (11) layout is derived from ``enabled``: neither it nor ``lam_flex`` can be
    assigned (or written through) from outside; both follow the state set by reset/step."""
    ctl = SeikoController(ControllerConfig(), robot)
    out = ctl.reset(robot.q_default, _lam0(robot), FEET)
    assert dict(ctl.enabled) == {c: c in FEET for c in robot.contacts}
    np.testing.assert_array_equal(ctl.lam_flex["left_foot"], out.lam_flex["left_foot"])
    with pytest.raises(AttributeError):
        ctl.enabled = {}
    with pytest.raises(AttributeError):
        ctl.lam_flex = {}
    with pytest.raises(TypeError):
        ctl.enabled["left_hand"] = True
    with pytest.raises(ValueError):
        ctl.lam_flex["left_foot"][2] = 0.0
    lam_d = {k: out.lam_flex[k].copy() for k in FEET}
    lam_read = {k: v.copy() for k, v in lam_d.items()}
    lam_read["left_foot"][2] += 20.0
    out = _step(ctl, robot, robot.q_default, lam_d, lam_read, tau_read=out.tau_flex)
    assert out.ok
    np.testing.assert_array_equal(ctl.lam_flex["left_foot"], out.lam_flex["left_foot"])  # live view
