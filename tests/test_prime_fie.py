"""PRIME estimator: crocoddyl action-model derivatives, self-consistent identification, recordings
in and out, bad-input errors. Kept short (horizon 40 steps); long runs are in benchmarks/bench_prime.py."""

import json

import numpy as np
import pytest

from contactflow.errors import ContactflowError, ContractError, ModelError
from contactflow.prime.datagen import (
    GenerateConfig,
    PayloadConfig,
    simulate_mujoco,
    simulate_smoothed,
    true_trunk_inertia,
    write_recording,
)
from contactflow.prime.fie import Measurements, PrimeConfig, PrimeEstimator
from contactflow.prime.io import ground_truth_forces, measurements_from_recording, write_result
from contactflow.prime.model import load_prime_robot
from contactflow.recording.store import RecordingError, RecordingWriter, read_recording


@pytest.fixture(scope="module")
def go2():
    return load_prime_robot("go2")


@pytest.fixture(scope="module")
def selfsim(go2):
    """Noise-free data from PRIME's own smoothed model, +3 kg on the trunk, 0.4 s squat."""
    return simulate_smoothed(go2, GenerateConfig(motion="squat", duration_s=0.4, noise_scale=0.0,
                                                 payload=PayloadConfig(mass_kg=3.0, offset_m=(0.0, 0.0, 0.05))))


def _meas(run):
    return Measurements(run.t.copy(), run.q_meas.copy(), run.v_meas.copy(), run.tau_meas[1:].copy())


def test_action_model_derivatives_match_finite_differences_and_write_in_place(go2, selfsim):
    est = PrimeEstimator(go2, PrimeConfig())
    problem = est.build_problem(_meas(selfsim))
    model = problem.runningModels[3]
    data = model.createData()
    rng = np.random.default_rng(0)
    nv = est.dyn.nv
    x = np.r_[1e-3 * rng.standard_normal(nv), selfsim.v_meas[2] + 0.01 * rng.standard_normal(nv),
              est.theta_nominal + 0.02 * rng.standard_normal(10)]
    u = np.r_[selfsim.tau_meas[3] + 0.1 * rng.standard_normal(12), 1e-4 * rng.standard_normal(2 * nv)]
    model.calc(data, x, u)
    model.calcDiff(data, x, u)
    # pitfall C2: results written into crocoddyl's buffers (the solver reads data.xnext / data.Fx)
    assert np.all(np.isfinite(data.xnext)) and np.abs(data.xnext).max() > 0
    Fx, Fu, Lx, Lu = (np.array(a) for a in (data.Fx, data.Fu, data.Lx, data.Lu))
    h = 1e-6

    def f(xx, uu):
        d = model.createData()
        model.calc(d, xx, uu)
        return np.array(d.xnext), d.cost

    for name, n, J, L, pert in (("x", x.size, Fx, Lx, lambda e: (x + e, u)), ("u", u.size, Fu, Lu, lambda e: (x, u + e))):
        cols, grads = [], []
        for k in range(n):
            e = np.zeros(n)
            e[k] = h
            (xp, cp), (xm, cm) = f(*pert(e)), f(*pert(-e))
            cols.append((xp - xm) / (2 * h))
            grads.append((cp - cm) / (2 * h))
        A = np.array(cols).T
        assert np.abs(J - A).max() / np.abs(A).max() < 1e-5, name
        assert np.abs(L - np.array(grads)).max() / max(np.abs(grads).max(), 1e-9) < 1e-5, name


def test_self_consistent_data_recovers_added_trunk_mass(go2, selfsim):
    res = PrimeEstimator(go2, PrimeConfig(max_iter=15)).solve(_meas(selfsim))
    true = true_trunk_inertia(go2, PayloadConfig(mass_kg=3.0, offset_m=(0.0, 0.0, 0.05)))
    est = res.body_parameters()["root_joint"]
    assert abs(est["mass_kg"] - true.mass) < 0.02  # the bar (measured: ~1e-4 kg)
    assert np.abs(np.array(est["com_m"]) - true.lever).max() < 2e-3
    assert res.force_W.shape == (selfsim.t.size - 1, 4, 3)
    assert np.sqrt(np.mean((res.force_W - selfsim.force_W[1:]) ** 2)) < 0.5  # [N]
    assert res.history and res.history[-1].cost <= res.history[0].cost


@pytest.fixture(scope="module")
def mj_recording(go2, tmp_path_factory):
    """A short MuJoCo Go2 recording (+3 kg, default noise, seed 0)."""
    run = simulate_mujoco(go2, GenerateConfig(motion="squat", duration_s=0.3, seed=0))
    return write_recording(go2, run, tmp_path_factory.mktemp("prime") / "go2_squat"), run


def test_recording_round_trip_and_estimator_outputs(go2, mj_recording, tmp_path):
    rec_dir, run = mj_recording
    rec = read_recording(rec_dir)
    assert {"datagen.sensors", "ground_truth.state", "ground_truth.contact_forces"} <= set(rec.stream_names)
    cfg = PrimeConfig(max_iter=3)
    meas, info = measurements_from_recording(rec, go2, cfg)
    assert info["stream"] == "datagen.sensors"  # ground truth never chosen
    assert meas.T == 29 and np.allclose(meas.q, run.q_meas[:30])
    assert np.allclose(meas.tau, run.tau_meas[1:30])  # torque over (t_k, t_k+1] = sample k+1
    res = PrimeEstimator(go2, cfg).solve(meas)
    out = write_result(res, go2, tmp_path / "out", info["seq"], {"source": str(rec_dir)})
    back = read_recording(out)
    assert back.stream("prime_estimator.forces").values.shape == (29, 12)
    assert back.stream("prime_estimator.state").values.shape == (30, go2.model.nq + go2.model.nv)
    par = back.stream("prime_estimator.parameters")
    assert np.isclose(par.field("mass.root_joint")[0, 0], res.body_parameters()["root_joint"]["mass_kg"])
    report = json.loads((out / "report.json").read_text())
    assert report["robot"] == "go2" and report["iterations"] == res.iterations
    gt = ground_truth_forces(rec, go2, info["seq"])
    assert gt.shape == res.force_W.shape
    assert abs(gt[:, :, 2].sum(axis=1).mean() - 19.085 * 9.81) < 0.05 * 19.085 * 9.81  # MuJoCo carries m g


# ----------------------------------------------------------------------------- bad input
def _copy_with(rec_dir, out, *, drop=(), robot=None, nan_at=None, field_layout=None):
    src = read_recording(rec_dir)
    w = RecordingWriter(out, {"robot": src.manifest["robot"] if robot is None else robot})
    for name in src.stream_names:
        if name in drop:
            continue
        s = src.stream(name)
        layout = field_layout if (field_layout and name == "datagen.sensors") else s.layout
        vals = s.values[:, : sum(n for _, n in layout)].copy()
        if nan_at is not None and name == "datagen.sensors":
            i0 = sum(n for f, n in layout[: [f for f, _ in layout].index("tau")])
            vals[nan_at, i0] = np.nan
        st = w.stream(name, vals.shape[1], {"source": name, "layout": json.dumps(layout)})
        for k in range(len(s)):
            st.append(int(s.seq[k]), float(s.t[k]), vals[k])
    w.close()
    return read_recording(out)


def test_missing_stream_is_named(go2, mj_recording, tmp_path):
    rec = _copy_with(mj_recording[0], tmp_path / "r", drop=("datagen.sensors",))
    with pytest.raises(RecordingError, match=r"no stream with the fields \['q', 'v', 'tau'\]"):
        measurements_from_recording(rec, go2, PrimeConfig())
    with pytest.raises(RecordingError, match="no stream 'mujoco_driver.sensors'"):
        measurements_from_recording(rec, go2, PrimeConfig(), stream="mujoco_driver.sensors")


def test_missing_field_is_named(go2, mj_recording, tmp_path):
    layout = [("t", 1), ("q", 19), ("v", 18)]
    rec = _copy_with(mj_recording[0], tmp_path / "r", field_layout=layout)
    with pytest.raises(ContractError, match=r"lacks field\(s\) \['tau'\]"):
        measurements_from_recording(rec, go2, PrimeConfig(), stream="datagen.sensors")


def test_mismatched_robot_is_rejected(go2, mj_recording, tmp_path):
    rec = read_recording(mj_recording[0])
    g1 = load_prime_robot("g1")
    with pytest.raises(ModelError, match="recorded with robot 'go2'.*'g1'"):
        measurements_from_recording(rec, g1, PrimeConfig())
    anon = _copy_with(mj_recording[0], tmp_path / "anon", robot="")
    with pytest.raises(ModelError, match="does not match robot 'g1'"):
        measurements_from_recording(anon, g1, PrimeConfig())


def test_non_finite_sample_is_located(go2, mj_recording, tmp_path):
    rec = _copy_with(mj_recording[0], tmp_path / "r", nan_at=7)
    with pytest.raises(ContractError, match="field 'tau': non-finite value.*first at seq 7"):
        measurements_from_recording(rec, go2, PrimeConfig())


def test_wrong_measurement_shapes_raise_contract_error(go2, selfsim):
    m = _meas(selfsim)
    m.tau = m.tau[:, :11]
    with pytest.raises(ContractError, match=r"measurements.tau: shape"):
        PrimeEstimator(go2, PrimeConfig()).build_problem(m)
    assert issubclass(ContractError, ContactflowError)


def test_kappa_schedule_and_progress_reporting(go2, selfsim):
    seen = []
    cfg = PrimeConfig(kappa_schedule=(100.0,), schedule_iters=2, max_iter=3)
    res = PrimeEstimator(go2, cfg).solve(_meas(selfsim), progress=seen.append)
    kappas = [h.kappa for h in res.history]
    assert kappas[0] == 100.0 and kappas[-1] == 500.0 and len(seen) == len(res.history) == res.iterations
    assert all(np.isfinite(h.cost) for h in seen) and len(seen[-1].mass_kg) == 1


def test_without_identification_parameters_stay_nominal(go2, selfsim):
    res = PrimeEstimator(go2, PrimeConfig(identify=False, max_iter=3)).solve(_meas(selfsim))
    assert not res.identified and res.theta.size == 0 and res.bodies == ()
    assert np.all(np.isfinite(res.force_W))


def test_command_line_generate_and_estimate(tmp_path, capsys):
    from contactflow.cli import main

    rec = tmp_path / "run"
    assert main(["prime", "generate", "--robot", "go2", "--duration", "0.2", "--out", str(rec)]) == 0
    assert ", 0.2 s simulated (mujoco, generated in " in capsys.readouterr().out  # not the wall time alone
    out = tmp_path / "est"
    assert main(["prime", "estimate", str(rec), "--max-iter", "2", "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["iterations"] == 2 and summary["converged"] is False  # stopped at --max-iter: said, not hidden
    report = json.loads((out / "report.json").read_text())
    assert report["robot"] == "go2" and "force_rmse_3d_n" in report and report["steps"] == 19
    assert main(["prime", "estimate", str(rec), "--robot", "g1"]) == 2  # mismatched robot
    assert "recorded with robot 'go2'" in capsys.readouterr().err


def test_shipped_prime_configs_load():
    from pathlib import Path

    from contactflow.config import load_config, read_yaml

    root = Path(__file__).resolve().parent.parent
    cfg = load_config(PrimeConfig, read_yaml(root / "robots/go2/prime_estimator.yaml"), source="prime_estimator.yaml")
    assert cfg == PrimeConfig()  # the reference file documents the defaults
    for robot, nc in (("go2", 4), ("g1", 8), ("talos", 8)):
        assert len(load_prime_robot(robot).points) == nc
