"""contactflow.policy: spec validation, observation layouts, history, action map, safety, decimation.

The ONNX models are fixtures built here (contactflow.policy.testing): no third-party weights.
The expected observation frames are computed independently from the deploy interfaces as written
in lac.md §1.1 and g1_policies.md (constants typed below, not read from the specs).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import yaml

from contactflow.errors import ConfigError, ModelError
from contactflow.policy import OBS_TERMS, PolicyRunner, load_policy_spec, projected_gravity
from contactflow.policy.testing import counter_model, mlp_model
from contactflow.robot import load_robot

pytest.importorskip("onnx")

REPO = Path(__file__).resolve().parent.parent
POLICIES = REPO / "robots" / "g1" / "policies"

# ---- LAC deploy interface, lac.md §1.1 (typed here, independent of robots/g1/policies/lac.yaml)
_LEG = ["hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch", "ankle_roll"]
_ARM = ["shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow", "wrist_roll"]
LAC_POLICY = ([f"left_{j}_joint" for j in _LEG] + [f"right_{j}_joint" for j in _LEG] + ["waist_yaw_joint"]
              + [f"left_{j}_joint" for j in _ARM] + [f"right_{j}_joint" for j in _ARM])
LAC_ART = [f"{s}_{j}_joint" for s, j in [
    ("left", "hip_pitch"), ("right", "hip_pitch"), ("waist", "yaw"), ("left", "hip_roll"), ("right", "hip_roll"),
    ("left", "shoulder_pitch"), ("right", "shoulder_pitch"), ("left", "hip_yaw"), ("right", "hip_yaw"),
    ("left", "shoulder_roll"), ("right", "shoulder_roll"), ("left", "knee"), ("right", "knee"),
    ("left", "shoulder_yaw"), ("right", "shoulder_yaw"), ("left", "ankle_pitch"), ("right", "ankle_pitch"),
    ("left", "elbow"), ("right", "elbow"), ("left", "ankle_roll"), ("right", "ankle_roll"),
    ("left", "wrist_roll"), ("right", "wrist_roll")]]
LAC_ARMS = [f"left_{j}_joint" for j in _ARM] + [f"right_{j}_joint" for j in _ARM]
LAC_DEFAULT = [-0.312, 0, 0, 0.669, -0.363, 0] * 2 + [0.0] + [0.2, 0.2, 0, 0.6, 0] + [0.2, -0.2, 0, 0.6, 0]
LAC_SCALE = [0.5475, 0.3507, 0.5475, 0.3507, 0.4386, 0.4386] * 2 + [0.5475] + [0.4386] * 10
LAC_KP = [40.18, 99.10, 40.18, 99.10, 28.50, 28.50] * 2 + [40.18] + [14.25] * 10

# ---- holosoma G1-29 locomotion, g1_policies.md (alphabetical terms, scales, default)
HOLO_NAMES = (LAC_POLICY[:12] + ["waist_yaw_joint", "waist_roll_joint", "waist_pitch_joint"]
              + [f"left_{j}_joint" for j in _ARM + ["wrist_pitch", "wrist_yaw"]]
              + [f"right_{j}_joint" for j in _ARM + ["wrist_pitch", "wrist_yaw"]])
HOLO_DEFAULT = [-0.312, 0, 0, 0.669, -0.363, 0] * 2 + [0, 0, 0] + [0.2, 0.2, 0, 0.6, 0, 0, 0] + [0.2, -0.2, 0, 0.6, 0, 0, 0]
HOLO_META = {"dof_names": HOLO_NAMES, "kp": [40.0 + i for i in range(29)], "kd": [1.0 + 0.1 * i for i in range(29)]}


@pytest.fixture(scope="module")
def g1():
    return load_robot("g1")


@pytest.fixture(scope="module")
def g1_29():
    return load_robot("g1_29dof")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("policy_models")
    out = {}
    out["lac"], out["lac_layers"] = mlp_model(d / "lac.onnx", input_name="frames", input_shape=(1, 64, 95), n_out=23,
                                              weight_scale=0.002)
    out["holo"], out["holo_layers"] = mlp_model(d / "holo.onnx", input_name="actor_obs", input_shape=(1, 100), n_out=29,
                                                weight_scale=0.1, metadata=HOLO_META)
    out["ref"], _ = mlp_model(d / "ref.onnx", input_name="obs", input_shape=(1, 154), n_out=23, weight_scale=0.01)
    out["dir"] = d
    return out


def _quat_xyzw(rng) -> np.ndarray:
    q = rng.standard_normal(4)
    return q / np.linalg.norm(q)


def _state(robot, rng):
    q = robot.q_default.copy()
    q[7:] += 0.05 * rng.standard_normal(robot.n)
    q[3:7] = _quat_xyzw(rng)
    v = rng.standard_normal(robot.nv)
    return {"t": np.zeros(1), "q": q, "v": v, "imu_quat": q[3:7].copy(), "imu_gyro": rng.standard_normal(3)}


def _command(rng, lin=(0.3, -0.1), ang=0.2):
    return {"lin_vel": np.array(lin, float), "ang_vel": np.array([ang]), "base_height": np.array([0.7]),
            "waist_yaw": np.array([0.15]), "q_ref_arms": 0.1 * rng.standard_normal(10),
            "stiffness": np.array([40.0, 300.0, 120.0, 15.0, 80.0])}


def _gravity_body(quat_xyzw) -> np.ndarray:
    x, y, z, w = quat_xyzw
    R = pin.Quaternion(w, x, y, z).normalized().toRotationMatrix()
    return R.T @ np.array([0.0, 0.0, -1.0])


def _write_spec(tmp_path, base: str, **changes) -> Path:
    data = yaml.safe_load((POLICIES / f"{base}.yaml").read_text())
    for k, v in changes.items():
        if v is None:
            data.pop(k, None)
        else:
            data[k] = v
    p = tmp_path / f"{base}_variant.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


# ------------------------------------------------------------------ shipped specs


def test_shipped_specs_load_and_their_layouts_add_up(g1, g1_29, models):
    lac = load_policy_spec("lac", g1, model=models["lac"])
    assert lac.frame_dim == 95 and lac.cfg.history.length == 64 and lac.cfg.rate_hz == 50.0
    assert [r["term"] for r in lac.layout()] == [
        "base_ang_vel", "projected_gravity", "command_lin_vel", "command_ang_vel", "command_waist_yaw",
        "command_base_height", "ref_upper_dof_pos", "joint_pos_rel", "joint_vel", "last_action", "stiffness"]
    assert list(lac.joint_names) == LAC_POLICY
    np.testing.assert_allclose(lac.scale, LAC_SCALE, atol=1e-4)
    np.testing.assert_allclose(lac.default_policy, LAC_DEFAULT, atol=1e-12)
    np.testing.assert_allclose(lac.kp, LAC_KP, atol=0.01)
    assert set(lac.command_fields) == {"lin_vel", "ang_vel", "waist_yaw", "base_height", "q_ref_arms", "stiffness"}

    holo = load_policy_spec("holosoma_g1_29dof_loco", g1_29, model=models["holo"])
    assert holo.frame_dim == 100
    labels = [r["label"] for r in holo.layout()]
    assert labels == sorted(labels)  # holosoma concatenates its terms alphabetically
    np.testing.assert_allclose(holo.default_policy, HOLO_DEFAULT)
    np.testing.assert_allclose(holo.kp, HOLO_META["kp"])  # from the model metadata, mapped by name
    np.testing.assert_allclose(holo.kd, HOLO_META["kd"])
    assert set(holo.command_fields) == {"lin_vel", "ang_vel"}

    ref = load_policy_spec(POLICIES / "reference.yaml", g1, model=models["ref"])
    assert ref.frame_dim * ref.cfg.history.length == 154


def test_projected_gravity_matches_the_rotation(rng=np.random.default_rng(3)):
    for _ in range(20):
        qt = _quat_xyzw(rng)
        np.testing.assert_allclose(projected_gravity(2.0 * qt), _gravity_body(qt), atol=1e-12)
    np.testing.assert_allclose(projected_gravity([0, 0, 0, 1.0]), [0, 0, -1.0])


# ------------------------------------------------------------------ observation layouts, term by term


def test_lac_frame_term_by_term(g1, models):
    rng = np.random.default_rng(0)
    spec = load_policy_spec("lac", g1, model=models["lac"])
    run = PolicyRunner(spec)
    s, c = _state(g1, rng), _command(rng)
    names = list(g1.joint_names)
    qj, vj = s["q"][7:], s["v"][6:]
    default = np.array([LAC_DEFAULT[LAC_POLICY.index(j)] for j in names])  # robot order
    arm_order = list(g1.raw["teleop"]["arm_joints"])
    out0 = run.step(s, c)
    assert out0.ok
    a0 = (out0.command["q_target"][[names.index(j) for j in LAC_POLICY]] - np.array(LAC_DEFAULT)) / spec.scale
    s2 = _state(g1, rng)
    f = run.frame(s2, c)  # second tick: last_action = a0
    expected = np.concatenate([
        s2["imu_gyro"],                                                       # base_ang_vel, raw
        _gravity_body(s2["imu_quat"]),                                        # projected_gravity
        c["lin_vel"], c["ang_vel"], c["waist_yaw"], c["base_height"],
        [c["q_ref_arms"][arm_order.index(j)] for j in LAC_ARMS],              # ref_upper_dof_pos
        [s2["q"][7 + names.index(j)] - default[names.index(j)] for j in LAC_ART],   # joint_pos_rel, ART
        [s2["v"][6 + names.index(j)] for j in LAC_ART],                       # joint_vel_rel, ART
        a0,                                                                   # last_action, policy order
        c["stiffness"],                                                       # RAW
    ])
    assert f.shape == (95,)
    np.testing.assert_allclose(f, expected, atol=1e-9)
    del qj, vj


def test_holosoma_frame_and_action_map(g1_29, models):
    rng = np.random.default_rng(1)
    spec = load_policy_spec("holosoma_g1_29dof_loco", g1_29, model=models["holo"])
    run = PolicyRunner(spec)
    s, c = _state(g1_29, rng), _command(rng, lin=(0.4, 0.0), ang=0.0)
    names = list(g1_29.joint_names)
    idx = [names.index(j) for j in HOLO_NAMES]
    out = run.step(s, c)
    dphi = 2 * np.pi / 50.0
    phase = np.array([0.0, np.pi]) + dphi  # advanced once before the first inference (moving command)
    phase = np.fmod(phase + np.pi, 2 * np.pi) - np.pi
    x = np.concatenate([
        np.zeros(29),                                         # actions (none yet)
        0.25 * s["imu_gyro"],                                 # base_ang_vel x 0.25
        c["ang_vel"],                                         # command_ang_vel
        c["lin_vel"],                                         # command_lin_vel
        np.cos(phase),                                        # cos_phase
        s["q"][7:][idx] - np.array(HOLO_DEFAULT),             # dof_pos relative to the default
        0.05 * s["v"][6:][idx],                               # dof_vel x 0.05
        _gravity_body(s["imu_quat"]),                         # projected_gravity
        np.sin(phase),                                        # sin_phase
    ])
    np.testing.assert_allclose(run.model_input().reshape(-1), x.astype(np.float32), atol=1e-6)
    (W, b), = models["holo_layers"]
    a = np.clip(W.astype(float) @ x + b, -100, 100)
    q_policy = np.array(HOLO_DEFAULT) + 0.25 * a
    np.testing.assert_allclose(out.command["q_target"][idx], q_policy, atol=1e-5)
    np.testing.assert_allclose(out.command["kp"][idx], HOLO_META["kp"])
    np.testing.assert_allclose(out.command["tau_ff"], 0.0)
    assert out.command["ok"][0] == 1.0


def test_joint_orders_map_by_name(g1, models, tmp_path):
    """A policy whose action order is the reverse of the robot's: q_target is sent in robot order."""
    rev = list(reversed(LAC_POLICY))
    spec_file = _write_spec(tmp_path, "lac", joint_orders={"policy": rev, "isaaclab_bfs": LAC_ART, "arms": LAC_ARMS})
    spec = load_policy_spec(spec_file, g1, model=models["lac"])
    rng = np.random.default_rng(5)
    run = PolicyRunner(spec)
    s, c = _state(g1, rng), _command(rng)
    out = run.step(s, c)
    (W, b), = models["lac_layers"]
    a = W.astype(float) @ run.model_input().reshape(-1).astype(float) + b     # policy (reversed) order
    names = list(g1.joint_names)
    for k, j in enumerate(rev):
        i = names.index(j)
        assert out.command["q_target"][i] == pytest.approx(g1.theta_default[i] + spec.scale[k] * a[k], abs=1e-5)
        assert spec.scale[k] == pytest.approx(0.25 * g1.tau_max[i] / g1.K[i])
    # the last_action term reads the policy order back: frame slice == a (reversed order)
    f = run.frame(s, c)
    np.testing.assert_allclose(f[67:90], a, atol=1e-5)


# ------------------------------------------------------------------ history


def test_history_first_frame_replicated_oldest_first(g1, models):
    spec = load_policy_spec("lac", g1, model=models["lac"])
    run = PolicyRunner(spec)
    frames = [np.full(95, float(i + 1)) for i in range(70)]
    run.push(frames[0])
    x = run.model_input()
    assert x.shape == (1, 64, 95) and x.dtype == np.float32
    assert np.all(x == 1.0)  # the first frame in all 64 slots (not zeros)
    run.push(frames[1])
    x = run.model_input()[0]
    assert np.all(x[:63] == 1.0) and np.all(x[63] == 2.0)  # newest last
    for f in frames[2:]:
        run.push(f)
    x = run.model_input()[0]
    np.testing.assert_array_equal(x[:, 0], np.arange(7, 71, dtype=np.float32))  # the last 64, oldest first
    run.reset()
    run.push(frames[5])
    assert np.all(run.model_input() == 6.0)


def test_history_term_major_layout_with_zero_fill(g1, models):
    spec = load_policy_spec(POLICIES / "reference.yaml", g1, model=models["ref"])
    run = PolicyRunner(spec)
    D = spec.frame_dim
    f1, f2 = np.arange(D, dtype=float) + 1.0, -(np.arange(D, dtype=float) + 1.0)
    run.push(f1)
    x1 = run.model_input().reshape(-1)
    expected = np.concatenate([np.concatenate([np.zeros(b.cfg.dim), f1[b.sl]]) for b in spec.terms])
    np.testing.assert_array_equal(x1, expected.astype(np.float32))
    run.push(f2)
    x2 = run.model_input().reshape(-1)
    expected = np.concatenate([np.concatenate([f1[b.sl], f2[b.sl]]) for b in spec.terms])
    np.testing.assert_array_equal(x2, expected.astype(np.float32))


# ------------------------------------------------------------------ safety, decimation, phase


def _lac_counter(g1, d, **kw):
    path = counter_model(d / f"counter_{kw.get('nan_after')}_{kw.get('step', 1e-3)}.onnx", input_name="frames",
                         input_shape=(1, 64, 95), last_action_flat=slice(63 * 95 + 67, 63 * 95 + 90), **kw)
    return load_policy_spec("lac", g1, model=path)


def test_nan_output_after_n_steps_holds_the_last_safe_command(g1, models):
    spec = _lac_counter(g1, models["dir"], nan_after=5)
    run = PolicyRunner(spec)
    rng = np.random.default_rng(2)
    c = _command(rng)
    outs = [run.step(_state(g1, rng), c) for _ in range(9)]
    for k in range(5):
        assert outs[k].ok and outs[k].command["ok"][0] == 1.0
        np.testing.assert_allclose(outs[k].command["q_target"], g1.theta_default + spec.scale * 1e-3 * (k + 1), atol=1e-6)
    for k in range(5, 9):
        assert not outs[k].ok and outs[k].command["ok"][0] == 0.0
        assert "non-finite action" in outs[k].diagnostics["reason"]
        np.testing.assert_array_equal(outs[k].command["q_target"], outs[4].command["q_target"])
        assert np.isfinite(outs[k].command["q_target"]).all()
    assert run.n_rejected == 4
    np.testing.assert_allclose(run.last_action, 5e-3, atol=1e-6)  # the refused action is not fed back


def test_target_outside_joint_limits_is_refused(g1, models):
    spec = _lac_counter(g1, models["dir"], step=10.0)  # 10 x 0.44 rad on every joint
    run = PolicyRunner(spec)
    rng = np.random.default_rng(4)
    out = run.step(_state(g1, rng), _command(rng))
    assert not out.ok and "outside the joint limits" in out.diagnostics["reason"]
    np.testing.assert_array_equal(out.command["q_target"], g1.theta_default)  # the safe command at start
    assert run.step(None, _command(rng)).diagnostics["reason"].startswith("missing")


def test_inference_failure_holds_the_last_safe_command(g1, models):
    # a real onnxruntime failure: the model is bound to an output the graph does not have
    spec = _lac_counter(g1, models["dir"], nan_after=None)
    run = PolicyRunner(spec)
    rng = np.random.default_rng(8)
    first = run.step(_state(g1, rng), _command(rng))
    assert first.ok
    spec.model.bind("frames", "no_such_output")
    try:
        outs = [run.step(_state(g1, rng), _command(rng)) for _ in range(3)]
    finally:
        spec.model.bind("frames", "action")
    for out in outs:
        assert not out.ok and out.command["ok"][0] == 0.0
        assert out.diagnostics["reason"].startswith("inference failed:") and "no_such_output" in out.diagnostics["reason"]
        np.testing.assert_array_equal(out.command["q_target"], first.command["q_target"])
    assert run.n_rejected == 3
    np.testing.assert_allclose(run.last_action, 1e-3, atol=1e-6)
    assert run.step(_state(g1, rng), _command(rng)).ok  # recovers once inference works again


def test_clipped_action_is_fed_back(g1, models, tmp_path):
    # holosoma's deploy loop stores the clipped action as its last action (spec.ActionCfg.clip)
    data = yaml.safe_load((POLICIES / "lac.yaml").read_text())
    data["action"]["clip"] = [-0.5, 0.5]
    p = tmp_path / "lac_clip.yaml"
    p.write_text(yaml.safe_dump(data))
    path = counter_model(models["dir"] / "counter_clip.onnx", input_name="frames", input_shape=(1, 64, 95),
                         last_action_flat=slice(63 * 95 + 67, 63 * 95 + 90), step=0.3)
    run = PolicyRunner(load_policy_spec(p, g1, model=path))
    rng = np.random.default_rng(9)
    outs = [run.step(_state(g1, rng), _command(rng)) for _ in range(3)]
    assert all(o.ok for o in outs)
    np.testing.assert_allclose(run.last_action, 0.5, atol=1e-6)  # raw outputs 0.3, 0.8, 0.8 (fed back 0.3, 0.5, 0.5)
    np.testing.assert_allclose(run.model_input()[0, -1, 67:90], 0.5, atol=1e-6)


def test_refused_frame_does_not_advance_the_phase(g1_29, models):
    spec = load_policy_spec("holosoma_g1_29dof_loco", g1_29, model=models["holo"])
    run = PolicyRunner(spec)
    rng = np.random.default_rng(10)
    walk = {"lin_vel": np.array([0.5, 0.0]), "ang_vel": np.zeros(1), "base_height": np.array([0.7]),
            "waist_yaw": np.zeros(1), "q_ref_arms": np.zeros(10), "stiffness": np.zeros(5)}
    assert run.step(_state(g1_29, rng), walk).ok
    phase = run.phase.copy()
    bad = _state(g1_29, rng)
    bad["v"][:] = np.nan
    out = run.step(bad, walk)
    assert not out.ok and "non-finite observation" in out.diagnostics["reason"]
    np.testing.assert_array_equal(run.phase, phase)
    assert run.step(_state(g1_29, rng), walk).ok
    np.testing.assert_allclose(run.phase, np.fmod(phase + 2 * np.pi / 50 + np.pi, 2 * np.pi) - np.pi, atol=1e-12)


def test_decimation_resends_between_policy_ticks(g1, models):
    spec = _lac_counter(g1, models["dir"], nan_after=None)
    run = PolicyRunner(spec, tick_period_s=0.01)  # 100 Hz ticks, 50 Hz policy
    assert run.decimation == 2
    rng = np.random.default_rng(6)
    outs = [run.step(_state(g1, rng), _command(rng)) for _ in range(6)]
    assert [o.acted for o in outs] == [True, False] * 3
    for k in range(0, 6, 2):
        np.testing.assert_array_equal(outs[k].command["q_target"], outs[k + 1].command["q_target"])
        np.testing.assert_allclose(outs[k].command["q_target"], g1.theta_default + spec.scale * 1e-3 * (k // 2 + 1), atol=1e-6)
    with pytest.raises(ConfigError, match="not the tick rate"):
        PolicyRunner(spec, tick_period_s=0.015)


def test_phase_clock_pins_while_standing_and_restarts(g1_29, models):
    spec = load_policy_spec("holosoma_g1_29dof_loco", g1_29, model=models["holo"])
    run = PolicyRunner(spec)
    stand, walk = {"lin_vel": np.zeros(2), "ang_vel": np.zeros(1)}, {"lin_vel": np.array([0.5, 0]), "ang_vel": np.zeros(1)}
    run.advance_phase(stand)
    np.testing.assert_allclose(run.phase, [np.pi, np.pi])
    run.advance_phase(walk)  # first moving tick after standing: restart
    np.testing.assert_allclose(run.phase, [0.0, np.pi])
    for _ in range(30):
        run.advance_phase(walk)
    expected = np.fmod(np.array([0.0, np.pi]) + 30 * 2 * np.pi / 50 + np.pi, 2 * np.pi) - np.pi
    np.testing.assert_allclose(run.phase, expected, atol=1e-9)
    run.advance_phase({"lin_vel": np.array([0.005, 0]), "ang_vel": np.array([0.005])})  # below 0.01: standing
    np.testing.assert_allclose(run.phase, [np.pi, np.pi])


# ------------------------------------------------------------------ start-up errors: one line, naming the files


def _one_line(exc) -> str:
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


def test_wrong_shaped_model_is_refused_naming_both_files(g1, models):
    bad, _ = mlp_model(models["dir"] / "bad_shape.onnx", input_name="frames", input_shape=(1, 64, 90), n_out=23)
    with pytest.raises(ConfigError) as e:
        load_policy_spec("lac", g1, model=bad)
    msg = _one_line(e)
    assert "lac.yaml" in msg and "bad_shape.onnx" in msg and "(1, 64, 95)" in msg and "(1, 64, 90)" in msg
    bad_name, _ = mlp_model(models["dir"] / "bad_name.onnx", input_name="obs", input_shape=(1, 64, 95), n_out=23)
    with pytest.raises(ConfigError, match="input 'frames'.*bad_name.onnx has input.*'obs'"):
        load_policy_spec("lac", g1, model=bad_name)
    bad_out, _ = mlp_model(models["dir"] / "bad_out.onnx", input_name="frames", input_shape=(1, 64, 95), n_out=29)
    with pytest.raises(ConfigError, match=r"output 'action' \(1, 23\) expected.*\(1, 29\)"):
        load_policy_spec("lac", g1, model=bad_out)
    with pytest.raises(ModelError, match="not found"):
        load_policy_spec("lac", g1, model=models["dir"] / "absent.onnx")
    junk = models["dir"] / "junk.onnx"
    junk.write_bytes(b"not a model")
    with pytest.raises(ModelError, match="junk.onnx: not a loadable ONNX model"):
        load_policy_spec("lac", g1, model=junk)


def test_a_float64_model_is_refused_naming_the_tensor_and_its_type(g1, tmp_path):
    """LAC's deploy format takes float32 frames; a model exported in float64 (a common torch.onnx slip) is
    refused at load, naming the tensor, the file and both types, not fed a silently converted input."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def model(in_type, out_type, name):
        inits = [numpy_helper.from_array(np.array([1, 64 * 95], dtype=np.int64), "flat"),
                 numpy_helper.from_array(np.array([0], dtype=np.int64), "s"),
                 numpy_helper.from_array(np.array([23], dtype=np.int64), "e"),
                 numpy_helper.from_array(np.array([1], dtype=np.int64), "ax")]
        nodes = [helper.make_node("Reshape", ["frames", "flat"], ["h"]),
                 helper.make_node("Slice", ["h", "s", "e", "ax"], ["y"]),
                 helper.make_node("Cast", ["y"], ["action"], to=out_type)]
        graph = helper.make_graph(nodes, "cast", [helper.make_tensor_value_info("frames", in_type, [1, 64, 95])],
                                  [helper.make_tensor_value_info("action", out_type, [1, 23])], initializer=inits)
        path = tmp_path / name
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
        return path

    ok = model(TensorProto.FLOAT, TensorProto.FLOAT, "f32.onnx")
    load_policy_spec("lac", g1, model=ok)  # the same graph in float32 loads
    with pytest.raises(ConfigError) as e:
        load_policy_spec("lac", g1, model=model(TensorProto.DOUBLE, TensorProto.FLOAT, "f64_in.onnx"))
    msg = _one_line(e)
    assert "input 'frames'" in msg and "f64_in.onnx" in msg and "tensor(double)" in msg and "tensor(float)" in msg
    with pytest.raises(ConfigError, match=r"output 'action' of .*f64_out.onnx is tensor\(double\)"):
        load_policy_spec("lac", g1, model=model(TensorProto.FLOAT, TensorProto.DOUBLE, "f64_out.onnx"))


def test_unknown_term_is_refused_naming_the_known_ones(g1, models, tmp_path):
    data = yaml.safe_load((POLICIES / "lac.yaml").read_text())
    data["observation"][1]["term"] = "gravity_vector"
    p = tmp_path / "unknown_term.yaml"
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as e:
        load_policy_spec(p, g1, model=models["lac"])
    msg = _one_line(e)
    assert "unknown_term.yaml" in msg and "'gravity_vector'" in msg and "projected_gravity" in msg
    assert all(t in msg for t in OBS_TERMS)


def test_joint_name_mismatches_are_refused_listing_names(g1, g1_29, models, tmp_path):
    # spec vs robot
    names = list(LAC_POLICY)
    names[3] = "left_knee_pitch_joint"
    p = _write_spec(tmp_path, "lac", joint_orders={"policy": names, "isaaclab_bfs": LAC_ART, "arms": LAC_ARMS})
    with pytest.raises(ConfigError) as e:
        load_policy_spec(p, g1, model=models["lac"])
    msg = _one_line(e)
    assert "left_knee_pitch_joint" in msg and "left_knee_joint" in msg and "robot.yaml" in msg
    # a 29-DoF spec on the 23-DoF robot
    with pytest.raises(ConfigError, match="waist_roll_joint"):
        load_policy_spec("holosoma_g1_29dof_loco", g1, model=models["holo"])
    # spec vs ONNX metadata dof_names
    meta = dict(HOLO_META, dof_names=HOLO_NAMES[:-1] + ["right_wrist_yaw"])
    m, _ = mlp_model(models["dir"] / "holo_badmeta.onnx", input_name="actor_obs", input_shape=(1, 100), n_out=29, metadata=meta)
    with pytest.raises(ConfigError) as e:
        load_policy_spec("holosoma_g1_29dof_loco", g1_29, model=m)
    msg = _one_line(e)
    assert "holo_badmeta.onnx" in msg and "'right_wrist_yaw'" in msg and "right_wrist_yaw_joint" in msg
    # a term joint order naming a joint the term's source lacks
    p = _write_spec(tmp_path, "lac", joint_orders={"policy": LAC_POLICY, "isaaclab_bfs": LAC_ART,
                                                   "arms": LAC_ARMS[:-1] + ["waist_yaw_joint"]})
    with pytest.raises(ConfigError, match=r"\['waist_yaw_joint'\].*teleop.arm_joints"):
        load_policy_spec(p, g1, model=models["lac"])


@pytest.mark.parametrize("change, match", [
    ({"observation": [{"term": "base_ang_vel", "dim": 4}]}, r"dim 4 given, the term has 3"),
    ({"history": {"length": 32}}, r"95 values x history 32 = 3040, but input 'frames' \(1, 64, 95\) holds 6080"),
    ({"rate_hz": -1.0}, r"rate_hz: expected > 0"),
    ({"command_fields": ["lin_vel"]}, r"command_fields \['lin_vel'\] differ"),
    ({"gains": "metadata"}, r"gains: expected 'robot', 'onnx_metadata' or"),
    ({"extra_key": 1}, r"unknown key\(s\) 'extra_key'"),
    ({"action": {"default": "robot", "scale": 0.25, "scale_effort_over_kp": 0.25}}, r"exactly one of 'scale'"),
])
def test_malformed_specs_name_file_and_key(g1, models, tmp_path, change, match):
    data = yaml.safe_load((POLICIES / "lac.yaml").read_text())
    if "observation" in change:
        data["observation"][0] = change["observation"][0]
    else:
        data.update(change)
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=match) as e:
        load_policy_spec(p, g1, model=models["lac"])
    assert str(p) in _one_line(e)


def test_node_refuses_a_wrong_model_at_start_up_with_one_line(models):
    bad, _ = mlp_model(models["dir"] / "node_bad.onnx", input_name="frames", input_shape=(1, 64, 90), n_out=23)
    res = subprocess.run([sys.executable, str(REPO / "nodes" / "lac_policy.py"), "--spec", "lac", "--model", str(bad)],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert res.returncode == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in res.stderr
    assert "lac.yaml" in lines[0] and "node_bad.onnx" in lines[0] and "(1, 64, 95)" in lines[0]


def test_newest_first_history_and_explicit_gains(g1, models, tmp_path):
    data = yaml.safe_load((POLICIES / "lac.yaml").read_text())
    data["history"]["order"] = "newest_first"
    data["gains"] = {"kp": {j: 10.0 + i for i, j in enumerate(LAC_POLICY)}, "kd": {j: 1.0 for j in LAC_POLICY}}
    p = tmp_path / "newest.yaml"
    p.write_text(yaml.safe_dump(data))
    spec = load_policy_spec(p, g1, model=models["lac"])
    names = list(g1.joint_names)
    np.testing.assert_allclose(spec.kp, [10.0 + LAC_POLICY.index(j) for j in names])
    run = PolicyRunner(spec)
    for i in range(3):
        run.push(np.full(95, float(i + 1)))
    x = run.model_input()[0, :, 0]
    assert x[0] == 3.0 and x[1] == 2.0 and np.all(x[2:] == 1.0)  # newest first, then the replicated first frame
    del data["gains"]["kd"]["waist_yaw_joint"]
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"gains.kd: in the robot but not in the spec: \['waist_yaw_joint'\]"):
        load_policy_spec(p, g1, model=models["lac"])


def test_spec_and_model_paths_resolve_from_a_dataflow_directory(g1, models, monkeypatch):
    """The documented swap (`--spec robots/g1/policies/lac.yaml` from dataflows/, the node's working
    directory) finds the spec at the repository root; a missing file lists every place looked in."""
    monkeypatch.chdir(REPO / "dataflows")
    spec = load_policy_spec("robots/g1/policies/lac.yaml", g1, model=models["lac"])
    assert spec.file.resolve() == (POLICIES / "lac.yaml").resolve()
    rel_model = Path(models["lac"]).resolve()
    monkeypatch.chdir(rel_model.parent.parent)
    spec = load_policy_spec("lac", g1, model=Path(rel_model.parent.name) / rel_model.name)  # cwd-relative
    assert spec.model.path.resolve() == rel_model
    monkeypatch.chdir(REPO / "dataflows")
    with pytest.raises(ConfigError) as e:
        load_policy_spec("robots/g1/policies/nope.yaml", g1, model=models["lac"])
    msg = _one_line(e)
    assert str(REPO / "dataflows" / "robots/g1/policies/nope.yaml") in msg and str(REPO / "robots/g1/policies/nope.yaml") in msg
    with pytest.raises(ModelError) as e:
        load_policy_spec("lac", g1, model="nope.onnx")
    msg = _one_line(e)
    assert "looked in" in msg and str(REPO / "dataflows" / "nope.onnx") in msg and str(REPO / "nope.onnx") in msg


def test_holosoma_first_use_download_is_logged(tmp_path, monkeypatch, caplog):
    """The first use says where it downloads (visible with `dora run --log-level info`)."""
    import logging

    from contactflow.policy import holosoma

    def no_network(dest, timeout_s):
        raise holosoma.ModelFetchError("no network (test)")

    monkeypatch.setattr(holosoma, "_installed_model", lambda inner: None)
    monkeypatch.setattr(holosoma, "_download_wheel", no_network)
    with caplog.at_level(logging.INFO, logger="contactflow.policy.holosoma"), pytest.raises(holosoma.ModelFetchError):
        holosoma.fetch_holosoma(cache=tmp_path)
    (rec,) = [r for r in caplog.records if "downloading" in r.getMessage()]
    assert "holosoma-inference" in rec.getMessage() and "PyPI" in rec.getMessage() and str(tmp_path / "wheels") in rec.getMessage()


def test_lac_spec_accepts_targets_up_to_effort_over_kp_past_a_limit(g1, models):
    """safety.effort_margin (the LAC spec): a target up to tau_max / kp past a joint limit is accepted,
    where the PD asks for at most the joint's effort limit at the limit; the G1's ankle roll at LAC's
    Kp 28.5 N m/rad gets 50 / 28.5 = 1.75 rad past its limits. Without it, 0 past the limits."""
    spec = load_policy_spec("lac", g1, model=models["lac"])
    effort = np.asarray(g1.tau_max, float) / spec.kp
    np.testing.assert_allclose(spec.q_max - np.asarray(g1.q_max, float), effort)
    np.testing.assert_allclose(np.asarray(g1.q_min, float) - spec.q_min, effort)
    j = g1.joint_names.index("left_ankle_roll_joint")
    assert effort[j] == pytest.approx(50.0 / 28.5, rel=0.01)
    run = PolicyRunner(spec)
    p = list(spec.joint_names).index("left_ankle_roll_joint")
    for past, ok in ((0.9, True), (1.1, False)):
        a = np.zeros(len(spec.joint_names))
        a[p] = (g1.q_max[j] + past * effort[j] - spec.default_policy[p]) / spec.scale[p]
        out = run.act(a)
        assert out.ok is ok, (past, out.diagnostics)
    plain = _write_spec(models["dir"], "lac", safety={"joint_limit_margin_rad": 0.0})
    spec0 = load_policy_spec(plain, g1, model=models["lac"])
    np.testing.assert_allclose(spec0.q_max, g1.q_max)
