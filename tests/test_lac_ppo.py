"""The privileged PPO teacher of LAC §III-C (contactflow/lac/train/{gym_env,ppo}.py): a few PPO
iterations on CPU, the teacher's observation (shapes, the TRUE applied wrench), the left/right
mirror against the deploy observation code, the symmetric minibatches, the curriculum, determinism
and resume. Needs the ``[train]`` extra (torch, stable-baselines3)."""

from __future__ import annotations

import dataclasses

import json

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("stable_baselines3")

import torch as th  # noqa: E402

from contactflow.errors import ConfigError  # noqa: E402
from contactflow.lac.train.gym_env import (PRIV_DIM, LacTeacherEnv, frame_mirror, joint_mirror,  # noqa: E402
                                           priv_frame, teacher_mirror)
from contactflow.lac.train.ppo import (SymmetricRolloutBuffer, load_ppo_config, make_ppo, make_vec_env,  # noqa: E402
                                       train_teacher)


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    """Two augmented episodes (seed 0: a force event in bin 0 and a couple event in bin 3), ~3 s."""
    from contactflow.lac.augment import augment
    from contactflow.lac.dataset import read_episodes

    d = tmp_path_factory.mktemp("lac_ds")
    augment(d, 2, seed=0, workers=1, progress=False)
    return read_episodes(d)


@pytest.fixture(scope="module")
def cfg():
    return load_ppo_config(profile="cpu")


def _params(model) -> dict:
    return {k: v.detach().clone() for k, v in model.policy.state_dict().items()}


def test_observation_shapes_reward_and_true_wrench(rows):
    # half the dataset's force (~9 N on the hand, inside the expert's envelope; residual targets scaled by 0.5)
    cfg = load_ppo_config(profile="cpu", overrides={"env": {"episode": {"force_scale": 0.5}}})
    env = LacTeacherEnv(cfg.env, dataset=rows)
    lay = env.obs_layout
    assert lay == {"actor": [0, 10 * 95], "priv": [950, 950 + 5 * PRIV_DIM], "crit": [1390, 1395]}
    assert PRIV_DIM == 88  # LAC §III-C
    i = next(k for k, r in enumerate(rows) if r["event_type"] == "force")
    obs, info = env.reset(seed=3, options={"row": i})
    assert obs.shape == env.observation_space.shape == (1395,) and obs.dtype == np.float32
    assert env.train_env.episode.wrench_scale == pytest.approx([0.5])  # no cap hit: residual targets x 0.5
    te = env.train_env
    sim = te.sim
    ep = te.episode
    link = ep.links[0]
    j = list(env.lac.link_names).index(link)
    bid = sim.model.body(link).id
    pel = sim.model.body("pelvis").id
    # the model-based expert (engineer T's ExpertTeacher) keeps the robot up through the event
    from contactflow.lac.expert import load_expert_config
    from contactflow.lac.train.teacher import ExpertTeacher

    teacher = ExpertTeacher(load_expert_config(), env.lac.robot, env.spec)
    priv = te.privileged()
    teacher.reset(priv["sensors"])
    seen, tracking = 0, []
    for _ in range(int(round((ep.event[0] + ep.event[1]) / te.dt))):
        a, _ok = teacher.label(priv["sensors"], priv["command"])
        obs, r, term, trunc, inf = env.step(a)
        priv = te.privileged()
        assert np.isfinite(obs).all() and np.isfinite(r) and 0.0 <= inf["tracking"] <= 1.0
        assert obs.shape == (1395,) and not (term or trunc)
        tracking.append(inf["tracking"])
        # the newest privileged frame's wrench of the loaded link vs what MuJoCo applied (xfrc_applied,
        # world, at the CoM) rotated into the base (pelvis) frame with MuJoCo's own rotation
        newest = obs[lay["priv"][1] - PRIV_DIM: lay["priv"][1]]
        w_obs = newest[7 + 6 * j: 7 + 6 * j + 6] / cfg.env.wrench_obs_scale
        R = sim.data.xmat[pel].reshape(3, 3)
        applied = sim.data.xfrc_applied[bid]
        np.testing.assert_allclose(w_obs, np.concatenate([R.T @ applied[:3], R.T @ applied[3:]]), atol=1e-3)
        others = np.delete(newest[7:7 + 66].reshape(11, 6), j, axis=0)
        assert not np.any(others), "only the loaded link carries a wrench"
        seen += int(np.linalg.norm(applied[:3]) > 1.0)
        # the deploy frame is the actor's newest frame (stiffness as log K)
        f = te.frame.copy()
        f[env._k_sl] = np.log(f[env._k_sl])
        np.testing.assert_allclose(obs[lay["actor"][1] - 95: lay["actor"][1]], f, rtol=1e-6)
    assert seen >= 20, "the event's force must have been applied and observed"
    # the reward tells the standing expert (measured 0.97 mean tracking) from zero actions (a fall)
    assert np.mean(tracking) > 0.8
    env.reset(seed=3, options={"row": i})
    for k in range(len(tracking)):
        *_, term, trunc, inf = env.step(np.zeros(23))
        if term:
            break
    assert term and inf["fell"], "zero actions (the default posture at LAC's gains) fall in this episode"


def _mirror_state(q, v, robot_names):
    p, s = joint_mirror(robot_names)
    qm, vm = q.copy(), v.copy()
    qm[7:], vm[6:] = s * q[7:][p], s * v[6:][p]
    qm[1], qm[3], qm[5] = -q[1], -q[3], -q[5]  # position y; quaternion (x, y, z, w) -> (-x, y, -z, w)
    vm[1], vm[3], vm[5] = -v[1], -v[3], -v[5]  # linear y; angular x and z
    return qm, vm


def test_mirrors_match_the_deploy_observation_code(cfg, rows):
    """Observation of the mirrored state == mirror of the observation (frame: the PolicyRunner's
    own code; privileged frame: priv_frame); mirrors are involutions."""
    from contactflow.policy.runner import PolicyRunner

    env = LacTeacherEnv(cfg.env, dataset=rows)
    spec, lac = env.spec, env.lac
    rng = np.random.default_rng(0)
    names = list(lac.robot.joint_names)
    q = lac.robot.q_default.copy()
    q[7:] += rng.normal(0, 0.2, 23)
    quat = rng.normal(0, 0.2, 4) + [0, 0, 0, 1]
    q[3:7] = quat / np.linalg.norm(quat)
    v = rng.normal(0, 0.5, 29)
    qm, vm = _mirror_state(q, v, names)
    arms = list(lac.robot.raw["teleop"]["arm_joints"])
    pa, sa = joint_mirror(arms)
    cmd = {"lin_vel": np.array([0.3, 0.2]), "ang_vel": np.array([0.4]), "waist_yaw": np.array([0.1]),
           "base_height": np.array([0.72]), "q_ref_arms": rng.normal(0, 0.3, 10),
           "stiffness": np.array([30.0, 300.0, 100.0, 20.0, 80.0])}
    cmd_m = {"lin_vel": np.array([0.3, -0.2]), "ang_vel": -cmd["ang_vel"], "waist_yaw": -cmd["waist_yaw"],
             "base_height": cmd["base_height"], "q_ref_arms": sa * cmd["q_ref_arms"][pa],
             "stiffness": cmd["stiffness"][[1, 0, 2, 4, 3]]}
    pp, sp = joint_mirror(spec.joint_names)
    a = rng.normal(0, 1, 23)

    def frame(q_, v_, c_, a_):
        run = PolicyRunner(spec)
        run.last_action = a_
        return run.frame({"q": q_, "v": v_, "imu_quat": q_[3:7], "imu_gyro": v_[3:6]}, c_)

    fp, fs = frame_mirror(spec)
    f, f_m = frame(q, v, cmd, a), frame(qm, vm, cmd_m, sp * a[pp])
    assert np.abs(f - f_m).max() > 0.1  # the state is not symmetric: the test can fail
    np.testing.assert_allclose(fs * f[fp], f_m, atol=1e-9)

    # privileged frame: links and wrench components mirrored in the world
    wr = rng.normal(0, 5, (11, 6))
    links = list(lac.link_names)
    lp = [links.index(n.replace("left_", "X").replace("right_", "left_").replace("X", "right_")) for n in links]
    wr_m = wr[lp] * np.array([1, -1, 1, -1, 1, -1])
    upper = [lac.model.names[k] for k in lac.link_joint_ids]
    pu, su = joint_mirror(upper)
    v_res, q_res = np.array([0.1, 0.2, 0.3]), rng.normal(0, 0.1, 11)
    o = priv_frame({"q": q, "v": v}, wr, v_res, 0.02, q_res, 0.1)
    o_m = priv_frame({"q": qm, "v": vm}, wr_m, v_res * [1, -1, -1], 0.02, su * q_res[pu], 0.1)
    (op, os_), (ap, as_) = teacher_mirror(cfg.env, spec, lac)
    D, P = 95, PRIV_DIM
    pr = op[10 * D: 10 * D + P] - 10 * D
    np.testing.assert_allclose(os_[10 * D: 10 * D + P] * o[pr], o_m, atol=1e-5)
    # involutions
    assert (op[op] == np.arange(op.size)).all() and (os_ * os_[op] == 1).all()
    assert (ap[ap] == np.arange(23)).all() and (as_ * as_[ap] == 1).all()


def test_symmetric_buffer_doubles_each_minibatch(cfg, rows):
    env = LacTeacherEnv(cfg.env, dataset=rows)
    (op, os_), (ap, as_) = teacher_mirror(cfg.env, env.spec, env.lac)
    buf = SymmetricRolloutBuffer(4, env.observation_space, env.action_space, device="cpu", n_envs=1,
                                 obs_perm=op, obs_sign=os_, act_perm=ap, act_sign=as_)
    rng = np.random.default_rng(1)
    for _ in range(4):
        buf.add(rng.normal(size=(1, env.n_obs)).astype(np.float32), rng.normal(size=(1, 23)).astype(np.float32),
                np.ones(1), np.zeros(1, bool), th.zeros(1), th.full((1,), -3.0))
    buf.compute_returns_and_advantage(th.zeros(1), np.zeros(1, bool))
    s = next(buf.get(4))
    assert s.observations.shape == (8, env.n_obs) and s.actions.shape == (8, 23)
    o, a = s.observations.numpy(), s.actions.numpy()
    np.testing.assert_allclose(o[4:], o[:4][:, op] * os_, rtol=1e-6)
    np.testing.assert_allclose(a[4:], a[:4][:, ap] * as_, rtol=1e-6)
    for x in (s.advantages, s.returns, s.old_log_prob, s.old_values):
        np.testing.assert_array_equal(x[4:].numpy(), x[:4].numpy())


def test_curriculum_levels_gate_the_rows(cfg, rows):
    env = LacTeacherEnv(cfg.env, dataset=rows)
    bins = [int(r["curriculum_bin"]) for r in rows]
    env.set_curriculum_level(min(bins))
    drawn = {env.reset(seed=s)[1]["row"] for s in range(6)}
    assert {bins[i] for i in drawn} == {min(bins)}
    env.set_curriculum_level(max(bins))
    drawn = {env.reset(seed=s)[1]["row"] for s in range(12)}
    assert drawn == set(range(len(rows)))


def test_rare_links_are_drawn_more_often(cfg, rows):
    r0 = rows[0]
    three = [r0, dict(r0), dict(r0, links=["left_elbow_link"])]  # the elbow: 1 event, the hand: 2
    env = LacTeacherEnv(cfg.env, dataset=three)
    env.set_curriculum_level(10)
    f = cfg.env.uniform_floor
    np.testing.assert_allclose(env.row_probabilities(), (1 - f) * np.array([0.25, 0.25, 0.5]) + f / 3)
    drawn = [env.reset(seed=s)[1]["row"] for s in range(60)]
    assert 0.3 < drawn.count(2) / 60 < 0.75  # expected 0.45 (seeds fixed: deterministic)


def test_ppo_iterations_change_the_policy_deterministically_and_resume(cfg, rows, tmp_path):
    """A few PPO iterations on CPU (profile ``cpu``: 2 envs x 16 steps x 2 iterations)."""
    init = _params(make_ppo(cfg, make_vec_env(cfg, rows)))
    s1 = train_teacher(cfg, tmp_path / "a", dataset=rows, progress=False)
    s2 = train_teacher(cfg, tmp_path / "b", dataset=rows, progress=False)
    from stable_baselines3 import PPO

    p1 = PPO.load(tmp_path / "a" / "final.zip", device="cpu").policy.state_dict()
    p2 = PPO.load(tmp_path / "b" / "final.zip", device="cpu").policy.state_dict()
    assert s1["env_steps"] == 2 * 16 * 2
    assert set(p1) == set(init)
    changed = [k for k in init if not th.equal(init[k], p1[k])]
    assert "log_std" in changed and any(k.startswith("pi_features_extractor.encoder") for k in changed)
    assert any(k.startswith("mlp_extractor.policy_net") for k in changed)
    for k in p1:  # same seed -> same weights
        assert th.equal(p1[k], p2[k]), k
    assert np.isfinite(s1["update_s_per_iter"]) and np.isfinite(s1["env_steps_per_s"])
    # a checkpoint is written when the next rollout starts (after the update of the one before): the
    # one after iteration 1 holds that update's weights; the last iteration's are in final.zip
    assert sorted(p.name for p in (tmp_path / "a").glob("model_*.zip")) == ["model_000000000032.zip"]
    ck32 = PPO.load(tmp_path / "a" / "model_000000000032.zip", device="cpu").policy.state_dict()
    assert any(not th.equal(ck32[k], init[k]) for k in init)  # saved at the first rollout's end, it was init
    # resume: one more iteration continues from final.zip (the most steps)
    from contactflow.lac.train.ppo import _latest_checkpoint

    assert _latest_checkpoint(tmp_path / "a").name == "final.zip"
    s3 = train_teacher(cfg, tmp_path / "a", dataset=rows, iterations=3, resume=True, progress=False)
    assert s3["env_steps"] == 32
    assert json.loads((tmp_path / "a" / "final.zip.json").read_text())["num_timesteps"] == 96
    # curriculum: a reachable threshold unlocks one level per rollout
    easy = load_ppo_config(profile="cpu", overrides={"env": {"curriculum": {"unlock_tracking": 1e-6}}})
    s4 = train_teacher(easy, tmp_path / "c", dataset=rows, progress=False)
    assert [h[2] for h in s4["curriculum_history"]] == [1, 2]


def test_config_errors_name_the_file_and_key(tmp_path):
    from contactflow.lac.train.ppo import default_ppo_config_path

    text = default_ppo_config_path().read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("  n_epochs: 5", "  n_epoch: 5"))
    with pytest.raises(ConfigError, match=r"bad\.yaml.*n_epoch"):
        load_ppo_config(bad)
    with pytest.raises(ConfigError, match="unknown profile 'gpu'"):
        load_ppo_config(profile="gpu")
    with pytest.raises(ConfigError, match="n_minibatches"):
        load_ppo_config(overrides={"ppo": {"n_envs": 3, "n_steps": 1, "n_minibatches": 2}})
    partial = tmp_path / "partial.yaml"
    partial.write_text("ppo: {n_epochs: 3}\n")  # layered over the shipped file: only this key changes
    assert load_ppo_config(partial).ppo == dataclasses.replace(load_ppo_config().ppo, n_epochs=3)
    assert load_ppo_config(partial, profile="cpu").ppo.n_envs == load_ppo_config(profile="cpu").ppo.n_envs
    full = load_ppo_config()
    assert full.ppo.n_envs == 32768 and full.ppo.iterations == 20000 and full.model.latent_dim == 64
    ws = load_ppo_config(profile="workstation")  # every shipped profile loads
    assert ws.run.workers == ws.ppo.n_envs == 16 and ws.model == full.model
