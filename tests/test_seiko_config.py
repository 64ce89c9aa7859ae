"""The SEIKO config dataclasses and the facts the stages share (one source each):

* a bad config value raises ConfigError (a ValueError) naming the class, the key and what was expected;
* the point contacts' surface frames R_c of the Retargeting and the Controller come from
  contactflow.seiko.surfaces;
* the exponential low-pass alpha of the input filter, the pushing-mode filter, the Controller and
  the operator's torque monitor is contactflow.seiko.filters.alpha_from_cutoff (bilinear, seiko.md §6.5).
"""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
import pytest

from contactflow.errors import ConfigError
from contactflow.operator.input_filter import EffectorInputFilter, InputFilterConfig
from contactflow.operator.live import TorqueRatioMonitor
from contactflow.seiko.controller import DEFAULT_SURFACE_ROTATIONS, ControllerConfig
from contactflow.seiko.filters import alpha_from_cutoff
from contactflow.seiko.retargeting import (
    NormalForceCommandFilter,
    PlaneEffectorParams,
    PointEffectorParams,
    RetargetingConfig,
)
from contactflow.seiko.surfaces import DEFAULT_SURFACE_RPY, rpy_rotation


@pytest.mark.parametrize("make, message", [
    (lambda: ControllerConfig(kd=-0.1), "ControllerConfig.kd: expected a number >= 0, got -0.1"),
    (lambda: ControllerConfig(dt_s=0.0), "ControllerConfig.dt_s: expected a number > 0, got 0.0"),
    (lambda: ControllerConfig(qp_tol=float("nan")), "ControllerConfig.qp_tol: expected a number > 0, got nan"),
    (lambda: ControllerConfig(torque_hysteresis=0.8), r"ControllerConfig.torque_hysteresis: expected a number in \[0, max_tau_ratio = 0.75\)"),
    (lambda: ControllerConfig(init_iterations=0), "ControllerConfig.init_iterations: expected an integer >= 1, got 0"),
    (lambda: ControllerConfig(kd_sign=0.5), r"ControllerConfig.kd_sign: expected -1 or \+1, got 0.5"),
    (lambda: ControllerConfig(qp_solver="osqp"), "ControllerConfig.qp_solver: expected one of daqp, quadprog, got 'osqp'"),
    (lambda: RetargetingConfig(ahead_time_s=-1.0), "RetargetingConfig.ahead_time_s: expected a number >= 0, got -1.0"),
    (lambda: RetargetingConfig(push_cutoff_hz=0.0), "RetargetingConfig.push_cutoff_hz: expected a number > 0"),
    (lambda: RetargetingConfig(plane=PointEffectorParams()), r"RetargetingConfig.plane.wrench_weights: expected 6 values"),
    (lambda: PlaneEffectorParams(fz_min_n=2000.0), r"PlaneEffectorParams.fz_min_n: expected a number in \[0, fz_max_n = 1000.0\), got 2000.0"),
    (lambda: PointEffectorParams(disable_taper_n=-1.0), "PointEffectorParams.disable_taper_n: expected a number >= 0"),
    (lambda: PointEffectorParams(wrench_weights=(1.0, 0.0, 1.0)), "PointEffectorParams.wrench_weights: expected 3 .point. or 6"),
    (lambda: InputFilterConfig(cutoff_hz=0.0), "cutoff_hz: expected a finite number > 0, got 0.0"),
])
def test_a_bad_config_value_raises_config_error_naming_the_key(make, message):
    with pytest.raises(ConfigError, match=message):
        make()


def test_the_surface_frames_have_one_source():
    assert RetargetingConfig().surface_rpy_rad == DEFAULT_SURFACE_RPY
    assert set(DEFAULT_SURFACE_ROTATIONS) == set(DEFAULT_SURFACE_RPY)
    for name, rpy in DEFAULT_SURFACE_RPY.items():
        R = DEFAULT_SURFACE_ROTATIONS[name]
        np.testing.assert_allclose(R, pin.rpy.rpyToMatrix(*rpy), atol=1e-15)  # the Retargeting's construction
        np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-15)
    # the surface normals (z of R_c): a wall in front of the left hand, a support on the right
    np.testing.assert_allclose(DEFAULT_SURFACE_ROTATIONS["left_hand"][:, 2], [-1.0, 0.0, 0.0], atol=1e-15)
    np.testing.assert_allclose(DEFAULT_SURFACE_ROTATIONS["right_hand"][:, 2], [0.0, 1.0, 0.0], atol=1e-15)
    for rpy in [(0.3, -0.2, 1.1), (0.0, 0.0, 0.0), (1.0, 0.0, -0.4)]:
        np.testing.assert_allclose(rpy_rotation(rpy), pin.rpy.rpyToMatrix(*rpy), atol=1e-15)
    with pytest.raises(ValueError, match="3 finite angles"):
        rpy_rotation((0.0, float("inf"), 0.0))


def test_the_low_pass_alpha_has_one_source():
    dt = 0.002
    h = math.pi * 5.0 * dt  # bilinear: (1 - w dt / 2) / (1 + w dt / 2)
    assert alpha_from_cutoff(5.0, dt) == pytest.approx((1 - h) / (1 + h), rel=1e-15)
    assert TorqueRatioMonitor(np.ones(2), rho=0.5, cutoff_hz=5.0, dt=dt).alpha == alpha_from_cutoff(5.0, dt)
    cfg = InputFilterConfig()
    assert EffectorInputFilter(cfg).alpha == alpha_from_cutoff(cfg.cutoff_hz, cfg.dt_s)
    r = RetargetingConfig()
    f = NormalForceCommandFilter(r.dt_s, r.push_clamp_n, r.push_cutoff_hz, r.push_max_rate_n_per_s, r.push_max_acc_n_per_s2)
    assert f.alpha == alpha_from_cutoff(r.push_cutoff_hz, r.dt_s)


def test_a_stage_period_other_than_its_clock_is_refused_naming_the_key():
    """dt_s of the three SEIKO stage configs has to be the period they run at: the in-process loop's
    2 ms, or the sensors' time step in the Controller node (PeriodCheck); seq gaps (real time) count."""
    from contactflow.robot import load_robot
    from contactflow.seiko.config_checks import PeriodCheck, require_period
    from contactflow.seiko.loop import DT_S, SeikoPipeline

    require_period((ControllerConfig(), RetargetingConfig(), InputFilterConfig()), DT_S, "the loop")
    with pytest.raises(ConfigError, match=r"RetargetingConfig.dt_s: expected 0.002 s \(the in-process loop's period\), "
                                          r"got 0.001"):
        SeikoPipeline(load_robot("talos"), retargeting_config=RetargetingConfig(dt_s=0.001))
    check = PeriodCheck(ControllerConfig(), "the sensors' time step")
    for seq, t in ((None, 0.0), (0, 0.0), (1, 0.002), (1, 0.002), (4, 0.008), (5, 0.010)):
        check(seq, t)
    with pytest.raises(ConfigError, match=r"ControllerConfig.dt_s: expected 0.001 s \(the sensors' time step"):
        check(6, 0.011)
    slow = PeriodCheck(ControllerConfig(), "the sensors' time step")
    slow(10, 0.04)
    with pytest.raises(ConfigError, match=r"expected 0.004 s"):
        slow(11, 0.044)
