"""SEIKO Controller signal processing: complementary filter (13), wrench-rate estimator, (12)."""

from __future__ import annotations

import numpy as np
import pytest

from contactflow.errors import ConfigError
from contactflow.seiko.filters import (
    ComplementaryWrenchFilter,
    TorqueLimitAdapter,
    WrenchRateEstimator,
    alpha_from_cutoff,
)

DT = 0.002


def test_alpha_bilinear_talos_value():
    # seiko.md §6.5: 0.2 Hz at 500 Hz gives alpha = 0.99749.
    assert alpha_from_cutoff(0.2, DT) == pytest.approx(0.99749, abs=1e-5)
    w = 2 * np.pi * 10.0
    assert alpha_from_cutoff(10.0, DT) == pytest.approx((1 - w * DT / 2) / (1 + w * DT / 2))
    assert alpha_from_cutoff(1e6, DT) == 0.0  # clamped
    with pytest.raises(ConfigError):
        alpha_from_cutoff(0.0, DT)


def test_complementary_filter_dc_gain_is_one():
    f = ComplementaryWrenchFilter(6, cutoff_hz=0.2, dt_s=DT)
    lam0 = np.array([1.0, -2.0, 400.0, 3.0, -4.0, 0.5])
    f.update(lam0, None, active=True)  # seeds with the first read
    lam1 = lam0 + np.array([0.0, 0.0, 50.0, 1.0, 0.0, 0.0])
    for _ in range(int(10.0 / DT)):  # 10 s = 12.6 time constants
        out = f.update(lam1, np.zeros(6), active=True)
    np.testing.assert_allclose(out, lam1, atol=1e-3)


def test_complementary_filter_tracks_a_ramp_without_lag_when_the_model_rate_is_right():
    # lam_read a ramp, lam_flex_dot its exact slope: the complementary output follows with no lag.
    f = ComplementaryWrenchFilter(3, dt_s=DT)
    slope = np.array([5.0, -1.0, 20.0])
    lam = np.array([0.0, 0.0, 50.0])
    f.update(lam, None, active=True)
    for _ in range(1000):
        lam = lam + DT * slope
        out = f.update(lam, slope, active=True)
    np.testing.assert_allclose(out, lam, atol=1e-9)


def test_complementary_filter_passes_the_read_when_inactive():
    f = ComplementaryWrenchFilter(3, dt_s=DT)
    f.update(np.zeros(3), None, active=True)
    f.update(np.ones(3), 100.0 * np.ones(3), active=True)
    out = f.update(np.array([7.0, 8.0, 9.0]), 100.0 * np.ones(3), active=False)
    np.testing.assert_array_equal(out, [7.0, 8.0, 9.0])


def test_rate_estimator_recovers_a_ramp_and_is_zero_on_a_constant():
    est = WrenchRateEstimator(6, dt_s=DT, window_s=0.05, cutoff_hz=10.0)
    slope = np.array([10.0, -3.0, 60.0, 0.5, 0.0, -2.4])
    lam = np.array([0.0, 0.0, 440.0, 0.0, 0.0, 0.0])
    for k in range(400):  # 0.8 s: window filled, 10 Hz low-pass settled
        rate = est.update(lam + k * DT * slope)
    np.testing.assert_allclose(rate, slope, rtol=1e-6, atol=1e-6)
    est.reset()
    for _ in range(200):
        rate = est.update(lam)
    np.testing.assert_allclose(rate, 0.0, atol=1e-12)


def test_rate_estimator_uses_the_window_not_the_last_sample():
    # A single-sample spike of height h gives a raw rate of h / 0.05 s, not h / dt.
    est = WrenchRateEstimator(1, dt_s=DT, window_s=0.05, cutoff_hz=1e6)  # no low-pass
    for _ in range(100):
        est.update(np.zeros(1))
    rate = est.update(np.ones(1))
    assert rate[0] == pytest.approx(1.0 / 0.05)


def test_torque_limit_lowers_when_the_read_ratio_exceeds_rho():
    tau_urdf = np.array([100.0, 100.0, 100.0])
    ad = TorqueLimitAdapter(tau_urdf, rho=0.75, eps1_nm=1.0, eps2_nm=0.02, eps3=0.1)
    tau_read = np.array([80.0, -80.0, 10.0])  # |r| = 0.8, 0.8, 0.1
    tau_flex = np.array([60.0, -50.0, 10.0])
    lim = ad.update(tau_read, tau_flex).copy()
    np.testing.assert_allclose(lim, [61.0, 51.0, 100.0])
    # Never lowered below |tau_flex| + eps1, and not raised while |r| > rho - eps3.
    lim = ad.update(np.array([70.0, 70.0, 10.0]), np.array([65.0, 40.0, 10.0])).copy()
    np.testing.assert_allclose(lim, [61.0, 51.0, 100.0])  # r = 0.7: inside the hysteresis band
    # A larger model torque while over the ratio does not raise the limit either.
    lim = ad.update(tau_read, np.array([70.0, -70.0, 0.0])).copy()
    np.testing.assert_allclose(lim, [61.0, 51.0, 100.0])


def test_torque_limit_rises_back_below_the_band_and_stops_at_the_urdf_limit():
    tau_urdf = np.array([100.0])
    ad = TorqueLimitAdapter(tau_urdf, rho=0.75, eps1_nm=1.0, eps2_nm=0.02, eps3=0.1)
    ad.update(np.array([90.0]), np.array([50.0]))
    assert ad.value[0] == pytest.approx(51.0)
    ad.update(np.array([64.0]), np.array([50.0]))  # r = 0.64 < 0.65
    assert ad.value[0] == pytest.approx(51.02)
    for _ in range(5000):
        ad.update(np.array([10.0]), np.array([50.0]))
    assert 100.0 <= ad.value[0] <= 100.0 + 0.02 + 1e-12
    ad.reset()
    assert ad.value[0] == 100.0


def test_torque_limit_lowering_extension_only_while_binding_and_over_the_ratio():
    """The off-by-default extension: a binding limit keeps falling while the measured ratio stays
    above rho, stops in the hysteresis band, never goes below eps1; 0 = the paper's rule."""
    tau_urdf = np.array([100.0, 100.0])
    paper = TorqueLimitAdapter(tau_urdf, rho=0.6, eps1_nm=1.0, eps2_nm=0.02, eps3=0.1)
    ext = TorqueLimitAdapter(tau_urdf, rho=0.6, eps1_nm=1.0, eps2_nm=0.02, eps3=0.1, lower_nm=0.02)
    read, flex = np.array([62.0, 62.0]), np.array([20.0, 20.0])
    for ad in (paper, ext):
        np.testing.assert_allclose(ad.update(read, flex), [21.0, 21.0])  # the paper's first step
    # binding (|tau_flex| = limit - 0.5 < limit, so |tau_flex| + eps1 >= limit), still over rho
    flex = np.array([20.5, 20.5])
    for _ in range(100):
        paper.update(read, flex)
        ext.update(read, flex)
    np.testing.assert_allclose(paper.value, [21.0, 21.0])  # the paper's (12) only freezes
    np.testing.assert_allclose(ext.value, [21.0 - 100 * 0.02] * 2)
    # in the band (rho - eps3 < r < rho): held
    before = ext.value.copy()
    ext.update(np.array([55.0, 55.0]), flex)
    np.testing.assert_allclose(ext.value, before)
    # not binding (model torque well below the limit): the paper's rule lowers it to |tau_flex| + eps1
    np.testing.assert_allclose(ext.update(read, np.array([5.0, 5.0])), [6.0, 6.0])
    # floor at eps1
    for _ in range(1000):
        ext.update(read, np.array([5.5, 5.5]))
    np.testing.assert_allclose(ext.value, [1.0, 1.0])
    # per joint: only the joint over the ratio is lowered, the other one rises back
    ext.reset()
    ext.update(np.array([62.0, 62.0]), np.array([20.0, 20.0]))  # both at 21
    ext.update(np.array([62.0, 40.0]), np.array([20.5, 20.5]))  # r = 0.62 binding, r = 0.40 < 0.5
    np.testing.assert_allclose(ext.value, [21.0 - 0.02, 21.0 + 0.02])
    # after a failed QP the lowering pauses (the raising goes on)
    ext.update(np.array([62.0, 40.0]), np.array([20.5, 20.5]), allow_lowering=False)
    np.testing.assert_allclose(ext.value, [21.0 - 0.02, 21.0 + 0.04])
    with pytest.raises(ConfigError):
        TorqueLimitAdapter(tau_urdf, lower_nm=-1.0)
    with pytest.raises(ConfigError):
        TorqueLimitAdapter(tau_urdf, lower_nm=float("nan"))


def test_torque_limit_rejects_bad_parameters():
    with pytest.raises(ConfigError):
        TorqueLimitAdapter(np.array([0.0, 1.0]))
    with pytest.raises(ConfigError):
        TorqueLimitAdapter(np.array([1.0]), rho=0.05, eps3=0.1)
