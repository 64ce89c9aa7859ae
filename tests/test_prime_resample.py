"""PRIME on an irregularly sampled (hardware-like) stream: ``PrimeConfig.resample`` /
``contactflow prime estimate --resample`` (contactflow.prime.io.resample_stream).

The data: 0.5 s of Go2 squat simulated in MuJoCo and logged at 500 Hz (the robot's state rate).
The *regular* stream takes every 5th sample (100 Hz); the *jittered* one takes sample 5k + r_k,
r_k in {-1, 0, 1} (times off the grid by up to +-2 ms, values exactly the trajectory's at those
times), like a driver that samples the newest 500 Hz state on its own clock. Torques and
contact forces of a subsampled stream are the exact means over its (irregular) intervals.
"""

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from contactflow import cli
from contactflow.errors import ConfigError, ContractError
from contactflow.prime.datagen import GenerateConfig, simulate_mujoco, write_recording
from contactflow.prime.fie import PrimeConfig
from contactflow.prime.io import interval_means, measurements_from_arrays, measurements_from_recording, resample_stream
from contactflow.prime.model import load_prime_robot
from contactflow.recording.store import RecordingError, read_recording

STEP = 5  # 500 Hz -> 100 Hz
ROOT = Path(__file__).resolve().parent.parent
DORA = shutil.which("dora") or str(Path(sys.executable).parent / "dora")


@pytest.fixture(scope="module")
def go2():
    return load_prime_robot("go2")


@pytest.fixture(scope="module")
def run500(go2):
    return simulate_mujoco(go2, GenerateConfig(motion="squat", duration_s=0.5, rate_hz=500.0, seed=1))


def _jittered_indices(n: int, seed: int = 0) -> np.ndarray:
    reg = np.arange(0, n, STEP)
    idx = reg + np.random.default_rng(seed).integers(-1, 2, reg.size)
    idx[0], idx[-1] = reg[0], reg[-1]
    return idx


def _interval_mean_rows(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Row k: mean of the 500 Hz interval means over (idx[k-1], idx[k]] (row 0: x[idx[0]])."""
    out = np.empty((idx.size,) + x.shape[1:])
    out[0] = x[idx[0]]
    for k in range(1, idx.size):
        out[k] = x[idx[k - 1] + 1 : idx[k] + 1].mean(axis=0)
    return out


def _subsample(run, idx):
    """The generated run seen only at the samples ``idx`` (a 100 Hz log of it)."""
    return dataclasses.replace(
        run, t=run.t[idx], q_true=run.q_true[idx], v_true=run.v_true[idx], q_meas=run.q_meas[idx],
        v_meas=run.v_meas[idx], tau_true=_interval_mean_rows(run.tau_true, idx),
        tau_meas=_interval_mean_rows(run.tau_meas, idx), force_W=_interval_mean_rows(run.force_W, idx),
        info={**run.info, "config": {**run.info["config"], "rate_hz": 500.0 / STEP}})


def _arrays(run, noisy=True):
    if noisy:
        return np.arange(run.t.size), run.t, run.q_meas, run.v_meas, run.tau_meas
    return np.arange(run.t.size), run.t, run.q_true, run.v_true, run.tau_true


# ------------------------------------------------------------------------------------ unit
@pytest.mark.parametrize("dt_s,offset", [(0.01, 1), (0.02, 1), (0.01, 0)])
def test_a_regular_stream_resampled_is_itself(go2, run500, dt_s, offset):
    reg = _subsample(run500, np.arange(0, run500.t.size, STEP))
    plain, info0 = measurements_from_arrays(go2, PrimeConfig(dt_s=dt_s, torque_sample_offset=offset), *_arrays(reg))
    res, info1 = measurements_from_arrays(go2, PrimeConfig(dt_s=dt_s, torque_sample_offset=offset, resample=True),
                                          *_arrays(reg))
    assert res.T == plain.T
    for name in ("t", "q", "v", "tau"):
        assert np.abs(getattr(res, name) - getattr(plain, name)).max() < 1e-12, name
    assert info1["resampled"]["duplicates_dropped"] == 0 and info0["decimation"] == round(dt_s / 0.01)
    np.testing.assert_array_equal(info1["seq"], np.arange(res.T + 1))  # grid index


def test_a_jittered_stream_resampled_gives_the_regular_values(go2, run500):
    n = run500.t.size
    reg = _subsample(run500, np.arange(0, n, STEP))
    jit = _subsample(run500, _jittered_indices(n))
    assert 0.0015 < np.abs(jit.t - reg.t).max() <= 0.002 + 1e-12
    tg, q, v, tau, info = resample_stream(go2.model, *_arrays(jit, noisy=False), 0.01)
    assert info["max_period_s"] == pytest.approx(0.014) and info["min_period_s"] == pytest.approx(0.006)
    np.testing.assert_allclose(tg, reg.t, atol=1e-12)
    dq = np.array([pin.difference(go2.model, a, b) for a, b in zip(reg.q_true, q)])
    dv = np.abs(v - reg.v_true)
    dtau = np.abs(tau[1:] - reg.tau_true[1:])
    # The error of interpolating across <= 14 ms: (1/8) a_max h^2 for q (joint a_max 28 rad/s^2: 7e-4 rad).
    # Tolerances ~3x the measured maxima (noted per line); the data: joint |v| <= 2.3 rad/s, |tau| <= 10.6 N m.
    assert np.abs(dq[:, :3]).max() < 1e-4  # base position [m], measured 3.2e-5
    assert np.abs(dq[:, 3:6]).max() < 2e-4  # base orientation [rad], measured 6.9e-5
    assert np.abs(dq[:, 6:]).max() < 7e-4  # joints [rad], measured 2.3e-4
    assert dv[:, :3].max() < 2e-3 and dv[:, 3:6].max() < 4e-3  # base [m/s, rad/s], measured 4.4e-4, 1.1e-3
    assert dv[:, 6:].max() < 0.015  # joints [rad/s], measured 4.2e-3
    # tau as interval means (piecewise constant on the recorded intervals): first order in the jitter,
    # <= 2 x 2 ms x max|dtau/dt| (131 N m/s) = 0.52 N m; measured max 0.049, rms 0.011 N m
    assert dtau.max() < 0.15 and np.sqrt(np.mean(dtau**2)) < 0.035
    assert np.isnan(tau[0]).all()  # row 0 closes no interval (torque_sample_offset 1)


def test_interval_means_conserve_the_impulse_and_reject_a_grid_outside():
    t = np.array([0.0, 0.01, 0.03, 0.04, 0.06])
    vals = np.array([[9.0], [1.0], [2.0], [3.0], [4.0]])  # row i + 1 holds over [t_i, t_i+1]
    g = np.array([0.0, 0.02, 0.04, 0.06])
    m = interval_means(t, vals, g)
    np.testing.assert_allclose(m[:, 0], [1.5, 2.5, 4.0], atol=1e-15)
    np.testing.assert_allclose(np.sum(m[:, 0] * np.diff(g)), np.sum(vals[1:, 0] * np.diff(t)), atol=1e-15)
    with pytest.raises(ValueError, match="outside the samples"):
        interval_means(t, vals, np.array([0.0, 0.07]))


def test_irregular_times_without_the_flag_name_it(go2, run500):
    jit = _subsample(run500, _jittered_indices(run500.t.size))
    with pytest.raises(RecordingError, match=r"irregular sample times .*--resample"):
        measurements_from_arrays(go2, PrimeConfig(), *_arrays(jit))


def test_resampling_errors_name_the_sample(go2, run500):
    reg = _subsample(run500, np.arange(0, run500.t.size, STEP))
    seq, t, q, v, tau = _arrays(reg)
    cfg = PrimeConfig(resample=True)
    # a dropout: 3 samples missing in time (seq contiguous) -> a 40 ms period = 4x the median
    with pytest.raises(RecordingError, match=r"before seq 10 is 4.00x the median .* at most 2x"):
        measurements_from_arrays(go2, cfg, np.arange(t.size - 3), np.r_[t[:10], t[13:]], np.r_[q[:10], q[13:]],
                                 np.r_[v[:10], v[13:]], np.r_[tau[:10], tau[13:]])
    with pytest.raises(RecordingError, match=r"seq not contiguous \(9 -> 11"):  # seq gaps still refused
        measurements_from_arrays(go2, cfg, np.r_[seq[:10], seq[11:]], np.r_[t[:10], t[11:]], np.r_[q[:10], q[11:]],
                                 np.r_[v[:10], v[11:]], np.r_[tau[:10], tau[11:]])
    t_back = t.copy()
    t_back[7] = t[5]
    with pytest.raises(RecordingError, match="sample time goes back at seq 7 \\(0.06 -> 0.05 s\\)"):
        measurements_from_arrays(go2, cfg, seq, t_back, q, v, tau)
    t_dup = t.copy()
    t_dup[6] = t[5]
    with pytest.raises(RecordingError, match="seq 5 and 6 have the same time"):
        measurements_from_arrays(go2, cfg, seq, t_dup, q, v, tau)
    with pytest.raises(ConfigError, match="shorter than the median sample period 0.01 s"):
        measurements_from_arrays(go2, PrimeConfig(dt_s=0.005, resample=True), seq, t, q, v, tau)
    q0 = q.copy()
    q0[4, 3:7] = 0.0
    with pytest.raises(ContractError, match="norm 0 at seq 4"):
        measurements_from_arrays(go2, cfg, seq, t, q0, v, tau)


def test_a_resent_sample_is_dropped(go2, run500):
    reg = _subsample(run500, np.arange(0, run500.t.size, STEP))
    seq, t, q, v, tau = _arrays(reg)
    ins = lambda a: np.insert(a, 6, a[5], axis=0)  # noqa: E731  sample 5 sent twice
    plain, _ = measurements_from_arrays(go2, PrimeConfig(resample=True), seq, t, q, v, tau)
    dup, info = measurements_from_arrays(go2, PrimeConfig(resample=True), np.arange(seq.size + 1), ins(t), ins(q),
                                         ins(v), ins(tau))
    assert info["resampled"]["duplicates_dropped"] == 1
    for name in ("q", "v", "tau"):
        np.testing.assert_array_equal(getattr(dup, name), getattr(plain, name))


# ------------------------------------------------------------------------------------ PRIME end to end
def test_prime_estimate_resample_on_a_jittered_recording_matches_the_regular_run(go2, run500, tmp_path, capsys):
    n = run500.t.size
    write_recording(go2, _subsample(run500, np.arange(0, n, STEP)), tmp_path / "reg")
    write_recording(go2, _subsample(run500, _jittered_indices(n)), tmp_path / "jit")
    meas, _ = measurements_from_recording(read_recording(tmp_path / "jit"), go2, PrimeConfig(resample=True, max_samples=3),
                                          start_s=0.1)
    assert meas.t[0] == pytest.approx(0.1, abs=0.002) and np.diff(meas.t) == pytest.approx(0.01)  # --start-s
    common = ["--max-samples", "30", "--max-iter", "15"]
    assert cli.main(["prime", "estimate", str(tmp_path / "jit"), *common, "--out", str(tmp_path / "x")]) == 2
    assert "--resample" in capsys.readouterr().err
    assert cli.main(["prime", "estimate", str(tmp_path / "reg"), *common, "--out", str(tmp_path / "reg_prime")]) == 0
    assert cli.main(["prime", "estimate", str(tmp_path / "jit"), *common, "--resample",
                     "--out", str(tmp_path / "jit_prime")]) == 0
    rep = {k: json.loads((tmp_path / f"{k}_prime" / "report.json").read_text()) for k in ("reg", "jit")}
    f = {k: read_recording(tmp_path / f"{k}_prime").stream("prime_estimator.forces").values.reshape(30, -1, 3)
         for k in ("reg", "jit")}
    assert rep["jit"]["resampled"]["grid_samples"] == 51 and rep["jit"]["resampled"]["max_period_s"] < 0.0141
    np.testing.assert_array_equal(read_recording(tmp_path / "jit_prime").stream("prime_estimator.forces").seq,
                                  np.arange(1, 31))
    true_mass = rep["reg"]["trunk_true"]["mass_kg"]  # 7.277 kg nominal + 3 kg payload
    m = {k: rep[k]["bodies"]["root_joint"]["mass_kg"] for k in rep}
    # measured: regular 10.283, jittered 10.278 kg (true 10.277)
    assert abs(m["jit"] - m["reg"]) < 0.05 and abs(m["jit"] - true_mass) < 0.05
    # forces (4 feet x 3 components, 30 steps): measured RMS difference 0.68 N; vs ground truth 1.04 N
    # (regular run 1.09 N); the robot (with payload) weighs 187 N
    assert np.sqrt(np.mean(np.sum((f["jit"] - f["reg"]) ** 2, axis=2))) < 1.5
    assert rep["jit"]["force_rmse_3d_n"] < 1.5 * rep["reg"]["force_rmse_3d_n"] + 0.2
    total_mass = sum(i.mass for i in go2.model.inertias) + 3.0
    weight = total_mass * 9.81
    assert abs(f["jit"][:, :, 2].sum(axis=1).mean() - weight) < 0.05 * weight  # measured 184.9 N (-1.2 %)



def test_a_state_the_contact_step_cannot_leave_is_an_error_not_an_abort():
    """A hardware base estimate can tilt the soles into the ground (seen at 16 s of a G1 emulator run);
    the contact step fails there at the initial guess, which used to abort the process inside crocoddyl."""
    from contactflow.errors import SolverError
    from contactflow.prime.fie import Measurements, PrimeEstimator
    from contactflow.prime.model import standing_configuration

    g1 = load_prime_robot("g1")
    nv = g1.model.nv
    q = np.tile(standing_configuration(g1), (4, 1))
    q[2, 3:7] = pin.Quaternion(pin.rpy.rpyToMatrix(0.0, 0.1, 0.0)).coeffs()  # pelvis pitched 0.1 rad: heels 7 mm deep
    meas = Measurements(0.02 * np.arange(4), q, np.zeros((4, nv)), np.zeros((3, nv - 6)))
    with pytest.raises(SolverError, match=r"initial guess of node 2 \(t = 0.04 s\).*no velocity inside the friction cones"):
        PrimeEstimator(g1, PrimeConfig(dt_s=0.02, max_iter=3)).solve(meas)


@pytest.mark.dora
def test_prime_estimator_node_resamples_with_the_config_key(go2, run500, tmp_path):
    """dataflows/prime_replay_go2.yml on a jittered recording, the estimator's config saying resample: true."""
    recs = tmp_path / "recordings"
    write_recording(go2, _subsample(run500, _jittered_indices(run500.t.size)), recs / "jit")
    (tmp_path / "est.yaml").write_text("resample: true\nmax_samples: 20\nmax_iter: 10\n")
    flow = (ROOT / "dataflows" / "prime_replay_go2.yml").read_text()
    flow = flow.replace("--recording prime_go2_squat", "--recording jit")
    flow = flow.replace("--config ../robots/go2/prime_estimator.yaml", f"--config {tmp_path / 'est.yaml'}")
    assert "--recording jit" in flow and "est.yaml" in flow
    (tmp_path / "flow.yml").write_text(flow)
    env = dict(os.environ, CONTACTFLOW_RECORDINGS=str(recs))
    proc = subprocess.run([DORA, "run", str(tmp_path / "flow.yml")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    runs = [p for p in recs.iterdir() if p.name.startswith("prime_go2-") and not p.is_symlink()]
    assert len(runs) == 1, out[-2000:]
    rec = read_recording(runs[0])
    assert rec.stream("prime_estimator.forces").values.shape == (20, 12)
    np.testing.assert_array_equal(rec.stream("prime_estimator.state").seq, np.arange(21))  # grid index
    mass = rec.stream("prime_estimator.parameters").field("mass.root_joint")[0, 0]
    assert abs(mass - run500.info["trunk_true"]["mass_kg"]) < 0.5  # 20 steps, 10 iterations: coarse
