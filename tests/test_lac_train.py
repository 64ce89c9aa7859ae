"""``contactflow lac train`` / ``lac export`` (contactflow/lac/train/): the pipeline, not the quality.

A tiny student is re-trained from scratch (2 augmented episodes, 2 DAgger rounds of 2 two-second
episodes), exported, loaded through the deploy spec and run in the PolicyRunner; the same seed gives
the same weights (with 1 or 2 rollout workers); a resumed run ends with the weights of an
uninterrupted one; the teacher's labels reproduce the expert's torque; the training windows are the
deploy input. Needs the ``[train]`` extra (torch, onnx).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

from contactflow.config import load_config  # noqa: E402
from contactflow.errors import ConfigError  # noqa: E402
from contactflow.lac.train.config import TrainConfig, load_train_config  # noqa: E402
from contactflow.lac.train.dagger import export_checkpoint, load_checkpoint, train, window_index  # noqa: E402
from contactflow.lac.train.env import LacTrainEnv, episode_from_row, episode_rng, load_train_spec  # noqa: E402
from contactflow.lac.train.teacher import ExpertTeacher, action_from_pd  # noqa: E402
from contactflow.robot import load_robot  # noqa: E402

TINY = yaml.safe_load((Path(__file__).resolve().parents[1] / "examples" / "lac_train_tiny.yaml").read_text())


@pytest.fixture(scope="module")
def robot():
    return load_robot("g1")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """Two augmented episodes of the shipped augmentation config (~3 s)."""
    from contactflow.lac.augment import augment

    d = tmp_path_factory.mktemp("lac_ds")
    augment(d, 2, seed=0, workers=1, progress=False)
    return d


@pytest.fixture(scope="module")
def rows(dataset):
    from contactflow.lac.dataset import read_episodes

    return read_episodes(dataset)


@pytest.fixture(scope="module")
def spec(robot):
    return load_train_spec("lac", robot)


@pytest.fixture(scope="module")
def tiny_cfg():
    return load_train_config(None, TINY)


@pytest.fixture(scope="module")
def run_a(tmp_path_factory, tiny_cfg, dataset):
    out = tmp_path_factory.mktemp("run_a")
    summary = train(tiny_cfg, out, dataset=dataset, workers=1, progress=False, echo=lambda s: None)
    return out, summary


def _expert_cfg():
    from contactflow.lac.expert import load_expert_config

    return load_expert_config()


def _weights(run_dir) -> dict:
    return load_checkpoint(run_dir)["model"]


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# --------------------------------------------------------------------------- teacher labels


def test_labels_reproduce_the_expert_torque(robot, spec, rows):
    """PD with (q_target + tau_ff / kp, tau_ff = 0) gives the expert's torque with tau_ff at every
    state, and the deploy runner turns the label back into that position target."""
    from contactflow.sim.pd_robot import PDRobotSim, PDSimConfig, pd_torque

    env = LacTrainEnv(load_train_config(None, TINY).env, spec, rows, robot)
    teacher = ExpertTeacher(_expert_cfg(), robot, spec)
    obs, priv = env.reset(5)
    teacher.reset(priv["sensors"])
    twin = PDRobotSim(PDSimConfig(), robot)
    rng = np.random.default_rng(0)
    n_checked = 0
    for _ in range(25):
        out = teacher.expert.step(priv["sensors"], priv["command"])  # the expert's own command ...
        c = out.command
        a = action_from_pd(spec, c["q_target"], c["kp"], c["tau_ff"])  # ... and its label (ExpertTeacher.label)
        assert np.abs(c["tau_ff"]).max() > 0.1                       # a feed-forward to fold in
        q_lab = spec.default_robot.copy()
        q_lab[spec.policy_to_robot] = spec.default_policy + spec.scale * a
        np.testing.assert_allclose(q_lab, c["q_target"] + c["tau_ff"] / c["kp"], atol=1e-12)
        for _k in range(3):  # the current state and perturbed ones (the substeps see other states)
            q = priv["sensors"]["q"][7:] + rng.normal(0, 0.05, robot.n) * (_k > 0)
            qd = priv["sensors"]["v"][6:] + rng.normal(0, 0.5, robot.n) * (_k > 0)
            t_exp = pd_torque(c["q_target"], c["kp"], c["kd"], c["tau_ff"], q, qd, robot.tau_max)
            t_lac = pd_torque(q_lab, spec.kp, spec.kd, 0.0, q, qd, robot.tau_max)
            np.testing.assert_allclose(t_lac, t_exp, atol=1e-9)
            n_checked += 1
        # independently, through the simulator: one tick from this state under each command
        q0, v0 = priv["sensors"]["q"], priv["sensors"]["v"]
        ends = []
        for cmd in ((c["q_target"], c["kp"], c["kd"], c["tau_ff"]), (q_lab, spec.kp, spec.kd, np.zeros(robot.n))):
            twin.set_state(q0, v0)
            twin.data.qacc_warmstart[:] = 0.0
            ends.append(twin.step(*cmd).q)
        np.testing.assert_allclose(ends[1], ends[0], atol=1e-7)
        res = env.step(a)
        np.testing.assert_allclose(env.runner.last_action, a)  # accepted and fed back, as deployed
        np.testing.assert_allclose(env.sim.command.q_target, q_lab, atol=1e-12)
        priv = res.privileged
        assert not res.done
    assert n_checked == 75


def test_teacher_labels_stay_inside_the_accepted_range_and_gains_are_checked(robot, spec, rows):
    """A label whose target is past the spec's accepted range (joint limits + safety margins) is
    clipped to the range shrunk by the margin; the other joints keep the exact label (the runner
    accepts it). Other gains are refused."""
    from contactflow.lac.expert import Output

    teacher = ExpertTeacher(_expert_cfg(), robot, spec, limit_margin_rad=0.02)
    env = LacTrainEnv(load_train_config(None, TINY).env, spec, rows, robot)
    _, priv = env.reset(1)
    teacher.reset(priv["sensors"])
    real = teacher.expert.step(priv["sensors"], priv["command"]).command
    over = dict(real)
    i_hi, i_lo = 3, 9  # two joints (robot order) pushed past the accepted range by feed-forward
    tau = np.array(real["tau_ff"], float)
    tau[i_hi] += real["kp"][i_hi] * (spec.q_max[i_hi] + 0.5 - real["q_target"][i_hi])
    tau[i_lo] -= real["kp"][i_lo] * (real["q_target"][i_lo] - spec.q_min[i_lo] + 0.5)
    over["tau_ff"] = tau
    teacher.expert.step = lambda sensors, command: Output(over, {})
    a, ok = teacher.label(priv["sensors"], priv["command"])
    raw = action_from_pd(spec, over["q_target"], over["kp"], over["tau_ff"])
    q = np.empty(robot.n)
    q[spec.policy_to_robot] = spec.default_policy + spec.scale * a
    np.testing.assert_allclose(q[i_hi], spec.q_max[i_hi] - 0.02, atol=1e-9)
    np.testing.assert_allclose(q[i_lo], spec.q_min[i_lo] + 0.02, atol=1e-9)
    keep = np.ones(robot.n, bool)
    keep[[i_hi, i_lo]] = False
    np.testing.assert_allclose(a[keep[spec.policy_to_robot]], raw[keep[spec.policy_to_robot]], atol=1e-12)
    assert ok and teacher.n_clipped == 1
    assert env.step(a).info["accepted"]
    del teacher.expert.step  # the expert's own step again
    teacher.expert.kp = teacher.expert.kp * 1.5  # an expert tuned with other gains
    with pytest.raises(ConfigError, match="PD gains differ"):
        teacher.label(priv["sensors"], priv["command"])


# --------------------------------------------------------------------------- environment


def test_episode_and_training_windows_are_the_deploy_input(robot, spec, rows):
    """The frame layout seen through the env (raw stiffness, command, fed-back action), the first
    frame replicated at reset, and the training windows (window_index) equal to every tick's input."""
    cfg = load_train_config(None, TINY).env
    env = LacTrainEnv(cfg, spec, rows, robot)
    rng = episode_rng(0, 3, 1)
    ep = episode_from_row(rows[0], cfg, env.lac, rng, row_index=0)
    # events scaled into the envelope, capped
    f = np.linalg.norm(ep.peaks_W[:, :3], axis=1)
    c = np.linalg.norm(ep.peaks_W[:, 3:], axis=1)
    assert np.all(f <= cfg.max_hand_force_n + 1e-9) and np.all(c <= cfg.max_couple_nm + 1e-9)
    assert len(ep.links) >= 1 and set(ep.links) <= set(env.lac_links)
    obs, priv = env.reset(0, episode=ep)
    assert obs.shape == (64, 95) and obs.dtype == np.float32
    assert np.all(obs == obs[0])  # first frame replicated
    lay = {r["term"]: slice(r["offset"], r["offset"] + r["dim"]) for r in spec.layout()}
    np.testing.assert_allclose(obs[-1, lay["stiffness"]], ep.command["stiffness"], rtol=1e-6)  # RAW
    np.testing.assert_allclose(obs[-1, lay["command_base_height"]], ep.command["base_height"], rtol=1e-6)
    frames, inputs = [env.frame.copy()], [obs.copy()]
    j = list(env.lac_links).index(ep.links[0])
    for k in range(50):  # 1 s: PD alone at the default posture falls after ~1.3 s (lac.md §0)
        a = np.full(23, 0.01 * (k % 5))
        res = env.step(a)
        assert res.info["accepted"] and not res.done, (k, res.info)
        np.testing.assert_allclose(res.obs[-1, lay["last_action"]], a, atol=1e-6)  # fed back, policy order
        frames.append(env.frame.copy())
        inputs.append(res.obs.copy())
        # the true wrench of the loaded link over the last tick: the trapezoid times the peak
        from contactflow.lac.events import trapezoid

        s = float(trapezoid(res.info["t"] - 0.5 * env.dt, *ep.event))
        np.testing.assert_allclose(res.privileged["wrench_W"][j], s * ep.peaks_W[0], atol=1e-12)
    frames = np.array(frames)
    idx = np.arange(len(frames))
    win = frames[window_index(np.zeros(len(frames), np.int64), idx, 64)]
    np.testing.assert_array_equal(win, np.array(inputs))


def test_event_caps_per_link_group(robot, rows):
    """The dataset's peaks are scaled, then capped: hand 10 N, other arm links 5 N, torso 3 N, couples
    1.5 N m (EnvCfg), direction kept up to the jitter."""
    from contactflow.lac.model import LacRobot

    cfg = load_train_config(None, {"env": {"randomization": {"force_direction_jitter_deg": 0.0},
                                           "hand_couple_prob": 0.0}}).env  # every episode the row's
    lac = LacRobot(robot)
    row = dict(rows[0])
    f = np.zeros((11, 3))
    c = np.zeros((11, 3))
    names = list(lac.link_names)
    for name in ("torso_link", "left_elbow_link", "left_wrist_roll_link"):
        f[names.index(name)] = [60.0, 0.0, 80.0]  # 100 N
    c[names.index("right_wrist_roll_link")] = [0.0, 0.0, 20.0]
    c[names.index("left_wrist_roll_link")] = [0.0, 2.0, 0.0]  # 0.3 x 2 = 0.6 N m: below the cap
    row["force_peak"], row["couple_peak"] = f, c
    ep = episode_from_row(row, cfg, lac, episode_rng(0, 1), row_index=0)
    got = {n: w for n, w in zip(ep.links, ep.peaks_W)}
    for name, cap in (("torso_link", cfg.max_torso_force_n), ("left_elbow_link", cfg.max_arm_force_n),
                      ("left_wrist_roll_link", cfg.max_hand_force_n)):
        np.testing.assert_allclose(got[name][:3], cap * np.array([0.6, 0.0, 0.8]), atol=1e-9)
    np.testing.assert_allclose(got["right_wrist_roll_link"][3:], [0.0, 0.0, cfg.max_couple_nm], atol=1e-9)
    np.testing.assert_allclose(got["left_wrist_roll_link"][3:], [0.0, 2.0 * cfg.couple_scale, 0.0], atol=1e-9)


def test_default_command_episodes(robot, rows):
    """default_command_prob = 1: the teleop's default command (posture, 0.74 m) with the row's stiffness."""
    from contactflow.lac.compliance import stand_command
    from contactflow.lac.model import LacRobot

    cfg = load_train_config(None, {"env": {"default_command_prob": 1.0}}).env
    ep = episode_from_row(rows[0], cfg, LacRobot(robot), episode_rng(0, 2), row_index=0)
    ref = stand_command(robot, rows[0]["stiffness"])
    for k in ("base_height", "waist_yaw", "q_ref_arms", "stiffness"):
        np.testing.assert_allclose(ep.command[k], ref[k], atol=1e-6)


def test_hand_push_episodes(robot, rows):
    """hand_push_prob = 1: one horizontal push on a hand, magnitude in hand_push_n, the row's profile."""
    from contactflow.lac.model import LacRobot

    cfg = load_train_config(None, {"env": {"hand_push_prob": 1.0, "hand_push_n": [4.0, 10.0], "hand_couple_prob": 0.0}}).env
    lac = LacRobot(robot)
    for i in range(4):
        ep = episode_from_row(rows[i % 2], cfg, lac, episode_rng(0, 9, i), row_index=i % 2)
        assert len(ep.links) == 1 and ep.links[0] in ("left_wrist_roll_link", "right_wrist_roll_link")
        f = ep.peaks_W[0]
        assert f[2] == 0.0 and np.all(f[3:] == 0.0) and 4.0 <= np.linalg.norm(f[:3]) <= 10.0


def test_hand_push_sphere_direction(robot, rows):
    """hand_push_direction: sphere: the push has vertical components (either sign) at the same magnitudes;
    an unknown direction mode is refused with its key."""
    from contactflow.errors import ConfigError
    from contactflow.lac.model import LacRobot

    cfg = load_train_config(None, {"env": {"hand_push_prob": 1.0, "hand_push_n": [4.0, 10.0], "hand_couple_prob": 0.0,
                                           "hand_push_direction": "sphere"}}).env
    lac = LacRobot(robot)
    fz = []
    for i in range(16):
        f = episode_from_row(rows[i % 2], cfg, lac, episode_rng(0, 9, i), row_index=i % 2).peaks_W[0]
        assert np.all(f[3:] == 0.0) and 4.0 <= np.linalg.norm(f[:3]) <= 10.0
        fz.append(f[2] / np.linalg.norm(f[:3]))
    assert min(fz) < -0.3 and max(fz) > 0.3
    with pytest.raises(ConfigError, match="hand_push_direction"):
        load_train_config(None, {"env": {"hand_push_direction": "up"}})


def test_stiffness_sampled_per_episode(robot, rows):
    """stiffness_sample_prob = 1: each episode commands a stiffness of its own, log-uniform over LAC's ranges,
    not the row's; the other draws of the episode are those of the configuration without the key."""
    from contactflow.lac.config import K_ANG_RANGE, K_LIN_RANGE
    from contactflow.lac.model import LacRobot

    lac = LacRobot(robot)
    base = load_train_config(None, {}).env
    cfg = load_train_config(None, {"env": {"stiffness_sample_prob": 1.0}}).env
    ks = []
    for i in range(12):
        ep0 = episode_from_row(rows[0], base, lac, episode_rng(0, 9, i), row_index=0)
        ep = episode_from_row(rows[0], cfg, lac, episode_rng(0, 9, i), row_index=0)
        k = ep.command["stiffness"]
        assert np.all((K_LIN_RANGE[0] <= k[:3]) & (k[:3] <= K_LIN_RANGE[1]))
        assert np.all((K_ANG_RANGE[0] <= k[3:]) & (k[3:] <= K_ANG_RANGE[1]))
        assert not np.allclose(k, rows[0]["stiffness"])
        np.testing.assert_array_equal(ep.peaks_W, ep0.peaks_W)
        np.testing.assert_array_equal(ep.q0, ep0.q0)
        ks.append(k)
    ks = np.log(np.array(ks))
    assert np.ptp(ks[:, 0]) > 0.5 * np.log(K_LIN_RANGE[1] / K_LIN_RANGE[0])  # spread over the range
    with pytest.raises(ConfigError, match="stiffness_sample_prob"):
        load_train_config(None, {"env": {"stiffness_sample_prob": 1.5}})


def test_student_acts_in_probes_only_leaves_the_other_episodes_to_the_teacher(run_a, rows):
    """``dagger.student_acts: probes``: in a DAgger round the student's actions are executed in the compliance-probe
    episodes only; every other episode is the teacher's rollout, tick for tick (the same as with beta 1), where
    ``all`` executes the student's there too. Refused without probe episodes."""
    from contactflow.lac.train import dagger

    out, _ = run_a
    over = {**TINY, "env": {**TINY["env"], "probe_prob": 0.5}}
    only = dagger._Context(load_train_config(None, {**over, "dagger": {**TINY["dagger"], "student_acts": "probes"}}),
                           rows, str(out / "student.onnx"))
    every = dagger._Context(load_train_config(None, over), rows, str(out / "student.onnx"))
    kinds = set()
    for i in range(6):
        res = dagger.rollout_episode(only, 1, i, 0.0)
        rng = episode_rng(only.cfg.seed, 1, i)
        ep = episode_from_row(only.env.rows[int(rng.integers(len(rows)))], only.cfg.env, only.env.lac, rng)
        kinds.add(ep.probe)
        if ep.probe:  # the student as in an `all` run, tick for tick
            assert res.student_acted.all()
            mixed, mixed_all = dagger.rollout_episode(only, 1, i, 0.5), dagger.rollout_episode(every, 1, i, 0.5)
            assert 0 < mixed.student_acted.sum() < len(mixed.student_acted)
            np.testing.assert_array_equal(mixed.student_acted, mixed_all.student_acted)
            np.testing.assert_array_equal(mixed.frames, mixed_all.frames)
        else:  # the teacher's rollout
            assert not res.student_acted.any()
            np.testing.assert_array_equal(res.frames, dagger.rollout_episode(every, 1, i, 1.0).frames)
            assert dagger.rollout_episode(every, 1, i, 0.0).student_acted.all()
    assert kinds == {True, False}
    with pytest.raises(ConfigError, match="student_acts.*probe_prob"):
        load_train_config(None, {"env": {"probe_prob": 0.0}, "dagger": {"student_acts": "probes"}})
    with pytest.raises(ConfigError, match="student_acts"):
        load_train_config(None, {"dagger": {"student_acts": "some"}})


def test_arm_action_noise_perturbs_the_executed_arm_actions_and_keeps_the_teachers_labels(rows, monkeypatch):
    """``dagger.arm_action_noise``: the action executed at each teacher tick (the next frame's ``last_action``) is the
    teacher's label plus a Gaussian noise of that std on the arm joints alone; the labels are the teacher's at the
    states visited; without it the executed action is the label; the episode's own draws are unchanged (its first
    frame the same). A spec without the joint order 'arms' is refused when the noise is on."""
    from contactflow.lac.train import dagger
    from contactflow.lac.train.student import last_action_map

    runs = {}
    for sigma in (0.0, 0.1):
        ctx = dagger._Context(load_train_config(None, {**TINY, "dagger": {**TINY["dagger"], "arm_action_noise": sigma}}),
                              rows, None)
        runs[sigma] = dagger.rollout_episode(ctx, 0, 1, 1.0)
    spec = ctx.spec
    arms = [spec.joint_names.index(j) for j in spec.cfg.joint_orders["arms"]]
    legs = [i for i in range(len(spec.joint_names)) if i not in arms]
    W = last_action_map(spec)
    for sigma, res in runs.items():
        executed = res.frames[1:] @ W  # the action executed at the tick before
        d = executed - res.labels[:-1]
        assert len(d) > 50
        np.testing.assert_allclose(d[:, legs], 0.0, atol=1e-6)
        if sigma == 0.0:
            np.testing.assert_allclose(d[:, arms], 0.0, atol=1e-6)
        else:
            assert abs(np.std(d[:, arms]) - sigma) < 0.02 and abs(np.mean(d[:, arms])) < 0.02
    np.testing.assert_array_equal(runs[0.0].frames[0], runs[0.1].frames[0])
    assert not np.allclose(runs[0.0].frames[-1], runs[0.1].frames[-1])
    assert ctx.arm_cols == arms
    from contactflow.lac.train import env as train_env

    no_arms = dataclasses.replace(spec, cfg=dataclasses.replace(spec.cfg, joint_orders={
        k: v for k, v in spec.cfg.joint_orders.items() if k != "arms"}))
    monkeypatch.setattr(train_env, "load_train_spec", lambda *a, **k: no_arms)
    noisy = load_train_config(None, {**TINY, "dagger": {**TINY["dagger"], "arm_action_noise": 0.1}})
    with pytest.raises(ConfigError, match="dagger.arm_action_noise: needs the joint order 'arms'"):
        dagger._Context(noisy, rows, None)
    dagger._Context(load_train_config(None, TINY), rows, None)  # no noise: no joint order needed
    with pytest.raises(ConfigError, match="arm_action_noise"):
        load_train_config(None, {"dagger": {"arm_action_noise": -0.1}})


def _executed_noise(res, spec, arms):
    """(ticks, n_arms): the arm noise executed at each tick of a rollout whose next frame exists (its
    ``last_action`` minus the tick's label; the student's ticks included)."""
    from contactflow.lac.train.student import last_action_map

    assert res.refused == 0  # a refused action would leave last_action as it was
    return (res.frames[1:] @ last_action_map(spec) - res.labels[:-1])[:, arms]


def _noise_draws(cfg, r, i, n, n_arms):
    """The first ``n`` draws xi_k (n, n_arms) of episode ``i`` of round ``r``'s noise generator."""
    g = np.random.default_rng(np.random.SeedSequence([cfg.seed, r, i]).spawn(1)[0])
    return np.array([g.normal(0.0, cfg.dagger.arm_action_noise, n_arms) for _ in range(n)])


def test_arm_action_noise_tau_makes_the_noise_an_ornstein_uhlenbeck_process_of_the_same_std(rows, run_a):
    """``dagger.arm_action_noise_tau_s``: the executed arm noise is eps_0 = xi_0 (stationary start), eps_k = rho
    eps_(k-1) + sqrt(1 - rho^2) xi_k with rho = exp(-dt / tau) and xi_k the noise generator's draws, one per teacher
    tick (tau 0: eps = xi, the white noise); in a DAgger round it advances on the teacher's ticks only (a student tick
    neither draws nor moves it); a tau without a noise and a non-finite tau are refused."""
    from contactflow.lac.train import dagger
    from contactflow.lac.train.config import DaggerCfg

    sigma, ctx = 0.2, {}
    for tau in (0.0, 0.5):
        cfg = load_train_config(None, {**TINY, "dagger": {**TINY["dagger"], "arm_action_noise": sigma,
                                                          "arm_action_noise_tau_s": tau}})
        ctx[tau] = dagger._Context(cfg, rows, None)
    spec = ctx[0.0].spec
    arms = ctx[0.0].arm_cols
    rho = np.exp(-ctx[0.0].env.dt / 0.5)
    for tau, c in ctx.items():
        d = _executed_noise(dagger.rollout_episode(c, 0, 1, 1.0), spec, arms)
        assert len(d) > 90
        xi = _noise_draws(c.cfg, 0, 1, len(d), len(arms))
        eps = xi.copy()
        for k in range(1, len(d)):
            eps[k] = (rho if tau else 0.0) * eps[k - 1] + (np.sqrt(1 - rho * rho) if tau else 1.0) * xi[k]
        np.testing.assert_allclose(d, eps, atol=2e-5)
        assert abs(np.std(eps) - sigma) < 0.08
    # a DAgger round (the tiny run's student, beta 0.5): the process moves on the teacher's ticks only
    out, _ = run_a
    cfg = load_train_config(None, {**TINY, "dagger": {**TINY["dagger"], "arm_action_noise": sigma,
                                                      "arm_action_noise_tau_s": 0.5}})
    res = dagger.rollout_episode(dagger._Context(cfg, rows, str(out / "student.onnx")), 1, 2, 0.5)
    teacher_ticks = np.flatnonzero(~res.student_acted[:-1])
    assert 10 < len(teacher_ticks) < len(res.student_acted) - 10
    d = _executed_noise(res, spec, arms)[teacher_ticks]
    xi = _noise_draws(cfg, 1, 2, len(d), len(arms))
    eps = xi.copy()
    for j in range(1, len(d)):
        eps[j] = rho * eps[j - 1] + np.sqrt(1 - rho * rho) * xi[j]
    np.testing.assert_allclose(d, eps, atol=2e-5)
    with pytest.raises(ConfigError, match="arm_action_noise_tau_s.*arm_action_noise, which is 0"):
        load_train_config(None, {"dagger": {"arm_action_noise_tau_s": 0.5}})
    for bad in (-0.1, float("inf"), float("nan")):
        with pytest.raises(ConfigError, match="arm_action_noise_tau_s"):
            DaggerCfg(arm_action_noise=0.1, arm_action_noise_tau_s=bad)


def test_probe_episodes_hold_one_load_at_a_drawn_stiffness_of_its_link(robot, rows):
    """probe_prob = 1: every episode is a compliance probe: the teleop's default command but for the loaded arm's
    shoulder and the loaded link's stiffness channels (in LAC's ranges), one load of the configured size on one link
    (a hand couple about the hand's own joint axis, in body axes), the trapezoid's parts in their ranges, the start at
    the commanded posture; probe_prob = 0 leaves a configuration's episodes as they were."""
    from contactflow.lac.config import K_ANG_RANGE, K_LIN_RANGE
    from contactflow.lac.model import LacRobot
    from contactflow.lac.teleop import load_teleop_config

    lac = LacRobot(robot)
    pc_over = {"hand_force_n": [2.0, 8.0], "couple_nm": [0.5, 1.5], "elbow_force_n": [2.0, 5.0], "torso_force_n": [1.0, 3.0],
               "posture_prob": 0.5, "all_stiffness_prob": 0.0}
    cfg = load_train_config(None, {"env": {"probe_prob": 1.0, "probe": pc_over}}).env
    default_k = np.asarray(load_teleop_config(robot).stiffness_default, float)
    channels = {"left_wrist_roll_link": {0, 3}, "right_wrist_roll_link": {1, 4}, "left_elbow_link": {0},
                "right_elbow_link": {1}, "torso_link": {2}}
    kinds, moved = set(), 0
    names, arms = list(robot.joint_names), list(robot.raw["teleop"]["arm_joints"])
    arm_default = np.array([robot.theta_default[names.index(j)] for j in arms])
    for i in range(40):
        ep = episode_from_row(rows[i % 2], cfg, lac, episode_rng(0, 7, i), row_index=i % 2)
        (link,), w = ep.links, ep.peaks_W[0]
        k = ep.command["stiffness"]
        assert np.all((K_LIN_RANGE[0] <= k[:3]) & (k[:3] <= K_LIN_RANGE[1]))
        assert np.all((K_ANG_RANGE[0] <= k[3:]) & (k[3:] <= K_ANG_RANGE[1]))
        assert {c for c in range(5) if k[c] != default_k[c]} <= channels[link]
        if np.any(w[3:]):
            kinds.add("couple")
            assert link.endswith("wrist_roll_link") and ep.body_frame == (True,) and not np.any(w[:3])
            assert 0.5 <= np.linalg.norm(w[3:]) <= 1.5 and np.count_nonzero(w[3:]) == 1
        else:
            kinds.add(link.split("_", 1)[-1] if link != "torso_link" else "torso")
            lo, hi = {"wrist_roll_link": (2.0, 8.0), "elbow_link": (2.0, 5.0), "torso_link": (1.0, 3.0)}[
                "torso_link" if link == "torso_link" else link.split("_", 1)[-1]]
            assert lo <= np.linalg.norm(w[:3]) <= hi and ep.body_frame == (False,)
        changed = {arms[j] for j in np.flatnonzero(np.abs(ep.command["q_ref_arms"] - arm_default) > 1e-12)}
        side = link.split("_")[0]
        assert changed <= {f"{side}_shoulder_pitch_joint", f"{side}_shoulder_roll_joint"}
        if changed:  # pitch in its range, roll away from the body: + on the left, - on the right
            q_cmd = dict(zip(arms, ep.command["q_ref_arms"]))
            assert -0.7 <= q_cmd[f"{side}_shoulder_pitch_joint"] <= 0.3
            roll_out = q_cmd[f"{side}_shoulder_roll_joint"] * (1.0 if side == "left" else -1.0)
            assert 0.0 <= roll_out <= 0.9
        moved += bool(changed)
        assert ep.command["base_height"][0] == load_teleop_config(robot).base_height_default_m
        q_arm0 = np.array([ep.q0[names.index(j)] for j in arms])
        assert np.max(np.abs(q_arm0 - ep.command["q_ref_arms"])) < 0.15  # the commanded posture + joint noise
        start, ramp, hold, release = ep.event
        assert cfg.settle_s + 0.5 <= start <= cfg.settle_s + 1.5 and 0.5 <= ramp <= 1.5 and 1.0 <= hold <= 3.0
        assert 1.0 <= release <= 2.0
    assert kinds == {"wrist_roll_link", "couple", "elbow_link", "torso"} and 5 <= moved <= 35
    # all_stiffness_prob 1: every channel drawn (none left at the teleop default), each in its range
    every = load_train_config(None, {"env": {"probe_prob": 1.0, "probe": {**pc_over, "all_stiffness_prob": 1.0}}}).env
    for i in range(10):
        k = episode_from_row(rows[i % 2], every, lac, episode_rng(0, 7, i), row_index=i % 2).command["stiffness"]
        assert np.all(k != default_k) and np.all((K_LIN_RANGE[0] <= k[:3]) & (k[:3] <= K_LIN_RANGE[1]))
        assert np.all((K_ANG_RANGE[0] <= k[3:]) & (k[3:] <= K_ANG_RANGE[1]))
    # a run with probes keeps, in its other episodes, every draw of the run without them
    base = load_train_config(None, {}).env
    rare = load_train_config(None, {"env": {"probe_prob": 1e-12}}).env
    for i in range(6):
        ep0 = episode_from_row(rows[i % 2], base, lac, episode_rng(0, 7, i), row_index=i % 2)
        ep1 = episode_from_row(rows[i % 2], rare, lac, episode_rng(0, 7, i), row_index=i % 2)
        for name in ("peaks_W", "q0", "event", "links", "friction_scale", "mass_scale", "body_frame"):
            np.testing.assert_equal(getattr(ep1, name), getattr(ep0, name), err_msg=name)
        for key, value in ep0.command.items():
            np.testing.assert_array_equal(ep1.command[key], value, err_msg=key)
    with pytest.raises(ConfigError, match="probe_prob"):
        load_train_config(None, {"env": {"probe_prob": -0.1}})
    with pytest.raises(ConfigError, match="load_weights"):
        load_train_config(None, {"env": {"probe": {"load_weights": [0, 0, 0, 0]}}})
    from contactflow.lac.train.gym_env import TeacherEnvCfg

    for key in ("probe_prob", "hand_push_prob", "hand_couple_prob"):  # the PPO teacher's targets need the dataset's rows
        env = load_train_config(None, {"env": {"probe_prob": 0.0, "hand_push_prob": 0.0, "hand_couple_prob": 0.0,
                                               key: 0.5}}).env
        with pytest.raises(ConfigError, match=f"episode.{key}"):
            TeacherEnvCfg(episode=env)
    TeacherEnvCfg(episode=load_train_config(None, {"env": {"hand_push_prob": 0.0, "hand_couple_prob": 0.0}}).env)


def test_probe_elbows_are_drawn_in_their_range_and_leave_a_configuration_without_them_as_it_was(robot, rows):
    """elbow_prob = 1: every probe commands both elbows at their own angle drawn in elbow_rad (the forearms raised
    as the teleop graph's default scenario), the rest of the command as without the key; elbow_prob = 0 (the default)
    draws nothing: the probes, and the generator's next draw, are those recorded before the key existed (revision
    26ac7d6, the shipped student's pooled run drew its probes with that code); bad values are refused naming the key."""
    from contactflow.lac.model import LacRobot

    lac = LacRobot(robot)
    names, arms = list(robot.joint_names), list(robot.raw["teleop"]["arm_joints"])
    elbows = [arms.index("left_elbow_joint"), arms.index("right_elbow_joint")]
    up = load_train_config(None, {"env": {"probe_prob": 1.0, "probe": {"elbow_prob": 1.0, "elbow_rad": [0.8, 1.2],
                                                                          "posture_prob": 0.0}}}).env
    arm_default = np.array([robot.theta_default[names.index(j)] for j in arms])
    drawn = []
    for i in range(12):
        ep = episode_from_row(rows[i % 2], up, lac, episode_rng(0, 7, i), row_index=i % 2)
        q = np.asarray(ep.command["q_ref_arms"])
        assert np.all((0.8 <= q[elbows]) & (q[elbows] <= 1.2))
        np.testing.assert_array_equal(np.delete(q, elbows), np.delete(arm_default, elbows))
        q_arm0 = np.array([ep.q0[names.index(j)] for j in arms])
        assert np.max(np.abs(q_arm0 - q)) < 0.15  # the episode starts at the commanded posture (+ joint noise)
        drawn.append(q[elbows])
    drawn = np.array(drawn)
    assert np.ptp(drawn[:, 0]) > 0.1 and np.any(drawn[:, 0] != drawn[:, 1])  # spread, each elbow its own draw
    # elbow_prob 0: the values of 26ac7d6's code (link, stiffness, arm command, the generator's next uniform draw)
    before = load_train_config(None, {"env": {"probe_prob": 1.0, "probe": {"posture_prob": 0.5}}}).env
    recorded = [("torso_link", [70.0, 70.0, 11.244043, 30.0, 30.0], None, 0.020657075358685106),
                ("left_wrist_roll_link", [425.059259, 70.0, 70.0, 57.213584, 30.0], (-0.036764, 0.076144),
                 0.773429947702671),
                ("right_wrist_roll_link", [70.0, 11.143154, 70.0, 30.0, 17.264165], None, 0.6817115393246969)]
    for i, (link, k, shoulder, next_u) in enumerate(recorded):
        rng = episode_rng(0, 7, i)
        ep = episode_from_row(rows[i % 2], before, lac, rng, row_index=i % 2)
        assert ep.links == (link,) and ep.command["stiffness"] == pytest.approx(k, abs=1e-6)
        q = arm_default.copy()
        if shoulder is not None:  # the loaded (left) arm's shoulder pitch and roll drawn
            q[[arms.index("left_shoulder_pitch_joint"), arms.index("left_shoulder_roll_joint")]] = shoulder
        assert np.asarray(ep.command["q_ref_arms"]) == pytest.approx(q, abs=1e-6)
        assert float(rng.uniform()) == next_u
    for bad, key in (({"elbow_prob": 1.5}, "elbow_prob"), ({"elbow_rad": [1.2, 0.8]}, "elbow_rad")):
        with pytest.raises(ConfigError, match=key):
            load_train_config(None, {"env": {"probe": bad}})

def test_hand_couple_episodes(robot, rows):
    """hand_couple_prob = 1: one couple on a hand, magnitude in hand_couple_nm, any axis, no force; the two
    episode kinds cannot together exceed probability 1."""
    from contactflow.errors import ConfigError
    from contactflow.lac.model import LacRobot

    lac = LacRobot(robot)
    cfg = load_train_config(None, {"env": {"hand_push_prob": 0.0, "hand_couple_prob": 1.0, "hand_couple_nm": [0.5, 1.5],
                                           "hand_couple_axis": "sphere"}}).env
    axes = []
    for i in range(4):
        ep = episode_from_row(rows[i % 2], cfg, lac, episode_rng(0, 9, i), row_index=i % 2)
        assert len(ep.links) == 1 and ep.links[0] in ("left_wrist_roll_link", "right_wrist_roll_link")
        w = ep.peaks_W[0]
        assert np.all(w[:3] == 0.0) and 0.5 <= np.linalg.norm(w[3:]) <= 1.5
        axes.append(w[3:] / np.linalg.norm(w[3:]))
    assert len({tuple(np.round(a, 6)) for a in axes}) == 4  # a direction per episode
    with pytest.raises(ConfigError, match="hand_couple_prob"):
        load_train_config(None, {"env": {"hand_push_prob": 0.7, "hand_couple_prob": 0.5}})


def test_hand_couple_about_the_joint_axis_is_the_evaluations_couple(robot, spec, rows):
    """hand_couple_axis: joint: the couple is about the hand's own joint axis (either sign), turned to
    world at the event start and held: parallel to MuJoCo's world axis of the wrist roll joint then."""
    from contactflow.lac.model import LacRobot

    lac = LacRobot(robot)
    cfg = load_train_config(None, {"env": {**TINY["env"], "hand_push_prob": 0.0, "hand_couple_prob": 1.0,
                                           "hand_couple_axis": "joint"}}).env
    signs = set()
    for i in range(6):
        ep = episode_from_row(rows[i % 2], cfg, lac, episode_rng(0, 9, i), row_index=i % 2)
        assert ep.body_frame == (True,)
        c = ep.peaks_W[0][3:]
        assert 0.5 <= np.linalg.norm(c) <= 1.5 and np.count_nonzero(c) == 1
        signs.add(float(np.sign(c.sum())))
    assert signs == {-1.0, 1.0}
    env = LacTrainEnv(cfg, spec, rows, robot)
    env.reset(0, episode=ep)
    m, d = env.sim.model, env.sim.data
    body = ep.links[0]
    jid = int(m.body_jntadr[m.body(body).id])
    start = ep.event[0]
    axis_at_start = None
    while env.sim.data.time < start + ep.event[1] + 0.1:
        if axis_at_start is None and env.sim.data.time + 0.5 * env.dt >= start:
            axis_at_start = np.array(d.xaxis[jid])
        env.step(np.zeros(len(spec.joint_names), np.float32))
    c_W = env.privileged()["wrench_W"][env.lac_links.index(body)][3:]
    assert np.linalg.norm(c_W) > 0.4
    np.testing.assert_allclose(abs(c_W @ axis_at_start) / np.linalg.norm(c_W), 1.0, atol=0.05)
    with pytest.raises(ConfigError, match="hand_couple_axis"):
        load_train_config(None, {"env": {"hand_couple_axis": "body"}})


def test_episode_is_deterministic_for_a_seed(robot, spec, rows):
    cfg = load_train_config(None, TINY).env
    env = LacTrainEnv(cfg, spec, rows, robot)
    traj = []
    for _ in range(2):
        obs, _ = env.reset(11)
        xs = [obs[-1].copy()]
        for _k in range(20):
            xs.append(env.step(np.zeros(23)).obs[-1].copy())
        traj.append(np.array(xs))
    np.testing.assert_array_equal(traj[0], traj[1])


# --------------------------------------------------------------------------- training and export


def test_tiny_training_exports_a_deploy_policy(run_a, robot, tiny_cfg, tmp_path):
    from contactflow.lac.compliance import stand_command
    import onnx

    from contactflow.lac.train.dagger import new_student
    from contactflow.policy import PolicyRunner, load_policy_spec
    from contactflow.sim.mujoco_robot import sensor_values
    from contactflow.sim.pd_robot import PDRobotSim, PDSimConfig

    out, summary = run_a
    log = json.loads((out / "train_log.json").read_text())
    assert [r["round"] for r in log["rounds"]] == [0, 1]
    assert log["rounds"][0]["beta"] == 1.0 and log["rounds"][0]["student_ticks"] == 0
    assert log["rounds"][1]["student_ticks"] > 0 and log["rounds"][1]["on_policy_mse"] > 0
    assert all(np.isfinite(e["loss"]) for e in log["epochs"])
    assert log["rounds"][1]["data_samples"] > log["rounds"][0]["data_samples"]  # aggregated
    v = log["rounds"][1]["validation"]  # the student alone after the round
    assert v["push_k"] == [100.0, 300.0] and len(v["push_fell"]) == len(v["push_displacement_m"]) == 2
    assert isinstance(v["stand_fell"], bool) and isinstance(v["monotonic"], bool)
    assert v["monotonic"] == (not any(v["push_fell"]) and v["push_displacement_m"][1] < v["push_displacement_m"][0])
    for f in ("loss.png", "train_log.csv", "config.yaml", "run.json", "checkpoints/round_001.pt"):
        assert (out / f).is_file(), f
    onnx_path = out / "student.onnx"
    assert onnx_path.stat().st_size < 10e6

    # unchanged deploy spec + the exported model
    spec = load_policy_spec("lac", robot, model=onnx_path)
    md = spec.model.metadata
    assert md["dof_names"] == list(spec.joint_names)
    np.testing.assert_allclose(md["kp"], spec.kp[spec.policy_to_robot])
    np.testing.assert_allclose(md["kd"], spec.kd[spec.policy_to_robot])
    np.testing.assert_allclose(md["action_scale"], spec.scale)
    assert md["joint_orders"]["isaaclab_bfs"] == list(spec.cfg.joint_orders["isaaclab_bfs"])
    assert md["dataset_seed"] == 0 and md["train_config"]["dagger"]["rounds"] == 2
    assert md["spec_version"].startswith("lac-deploy/1") and md["git_revision"]

    # the graph is the torch student, log of the RAW stiffness included
    ck = load_checkpoint(out)
    model = new_student(load_config(TrainConfig, ck["config"]), spec)
    model.load_state_dict(ck["model"])
    ops = {n.op_type for n in onnx.load(str(onnx_path)).graph.node}
    assert "Log" in ops and "Conv" in ops  # the log of the raw stiffness and the history encoder are in the graph
    model.eval()
    x = np.random.default_rng(1).normal(size=(1, 64, 95)).astype(np.float32)
    x[..., 90:] = np.exp(np.random.default_rng(2).uniform(np.log(10), np.log(500), size=(1, 64, 5)))
    with torch.no_grad():
        ref = model(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(spec.model.run(x), ref, atol=1e-4)

    # `contactflow lac export` of the run gives the same network
    from contactflow.cli import main as cli_main

    assert cli_main(["lac", "export", str(out), "--out", str(tmp_path / "p.onnx")]) == 0
    spec2 = load_policy_spec("lac", robot, model=tmp_path / "p.onnx")
    np.testing.assert_allclose(spec2.model.run(x), ref, atol=1e-4)

    # ticks of the PolicyRunner on the simulated G1 (the pipeline, not the quality)
    runner = PolicyRunner(spec)
    sim = PDRobotSim(PDSimConfig(), robot)
    r = sim.reset()
    cmd = stand_command(robot, [100.0, 100.0, 100.0, 30.0, 30.0])
    for _ in range(10):  # a tiny student's targets may leave the joint limits: refused, as deployed
        o = runner.step(sensor_values(r), cmd)
        assert o.acted and o.diagnostics["infer_time_s"] > 0 and np.all(np.isfinite(o.command["q_target"]))
        r = sim.step(o.command["q_target"], o.command["kp"], o.command["kd"], o.command["tau_ff"])


@pytest.mark.parametrize("keys", [
    {"student": {"arm_estimate": "analytic", "arm_feedforward": "admittance_lag"}},
    {"student": {"residual_action": "wrists"}, "dagger": {"student_acts": "probes"}, "env": {"probe_prob": 0.5}},
], ids=["admittance_lag", "wrists_probes"])
def test_tiny_training_with_the_graphs_model_keys_trains_and_exports_the_same_network(keys, dataset, robot, tmp_path):
    """A tiny run (two rounds) with the keys the recipe leaves off: the arms' model in the graph
    (``arm_estimate: analytic``, ``arm_feedforward: admittance_lag``), the wrists residual with DAgger in the probes
    only. It trains, the student acts in round 1, and the exported ONNX gives the checkpoint's torch actions on the
    recorded histories (the deploy input)."""
    from contactflow.lac.train.dagger import load_rounds, new_student
    from contactflow.policy import load_policy_spec

    over = {k: {**TINY.get(k, {}), **v} for k, v in keys.items()}
    cfg = load_train_config(None, {**TINY, **over})
    out = tmp_path / "run"
    train(cfg, out, dataset=dataset, workers=1, progress=False, echo=lambda s: None)
    log = json.loads((out / "train_log.json").read_text())
    assert [r["round"] for r in log["rounds"]] == [0, 1] and all(np.isfinite(e["loss"]) for e in log["epochs"])
    assert 0 < log["rounds"][1]["student_ticks"] <= log["rounds"][1]["ticks"]
    ck = load_checkpoint(out)
    spec = load_train_spec(cfg.spec, robot)
    model = new_student(cfg, spec)
    model.load_state_dict(ck["model"])
    model.eval()
    data = load_rounds(out / "data", 1)
    idx = np.linspace(0, len(data["frames"]) - 1, 12).astype(int)
    x = data["frames"][window_index(data["first"], idx, 64)]
    with torch.no_grad():
        a = model(torch.from_numpy(x)).numpy()
    onnx = load_policy_spec("lac", robot, model=out / "student.onnx").model
    np.testing.assert_allclose(np.concatenate([onnx.run(x[i:i + 1]) for i in range(len(x))]).reshape(a.shape), a,
                               atol=1e-4)


def test_export_averages_the_weights_of_rounds(run_a, robot, tmp_path, capsys):
    """`contactflow lac export RUN --average 0-1`: the ONNX is the student whose every weight is the mean
    of the rounds' (the normaliser, set in round 0, is shared); the rounds are recorded in the
    metadata; a checkpoint file or a missing round is refused by name."""
    from contactflow.cli import main as cli_main
    from contactflow.lac.train.dagger import new_student
    from contactflow.policy import load_policy_spec

    out, _ = run_a
    assert cli_main(["lac", "export", str(out), "--out", str(tmp_path / "avg.onnx"), "--average", "0,1"]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {tmp_path / 'avg.onnx'}: the weights of rounds [0, 1] averaged"
    assert cli_main(["lac", "export", str(out), "--out", str(tmp_path / "last.onnx")]) == 0  # the latest checkpoint
    assert capsys.readouterr().out.strip() == f"wrote {tmp_path / 'last.onnx'}: round 1"
    cks = [load_checkpoint(out / "checkpoints" / f"round_{r:03d}.pt") for r in (0, 1)]
    assert not _same(cks[0]["model"], cks[1]["model"])
    spec = load_policy_spec("lac", robot, model=tmp_path / "avg.onnx")
    assert spec.model.metadata["train_rounds_averaged"] == [0, 1] and spec.model.metadata["train_round"] == 1
    model = new_student(load_config(TrainConfig, cks[1]["config"]), spec)
    model.load_state_dict({k: (cks[0]["model"][k] + cks[1]["model"][k]) / 2 for k in cks[1]["model"]})
    model.eval()
    x = np.random.default_rng(4).normal(size=(1, 64, 95)).astype(np.float32)
    x[..., 90:] = 100.0
    with torch.no_grad():
        np.testing.assert_allclose(spec.model.run(x), model(torch.from_numpy(x)).numpy(), atol=1e-4)
        one = new_student(load_config(TrainConfig, cks[1]["config"]), spec)
        one.load_state_dict(cks[1]["model"])
        one.eval()
        assert np.abs(spec.model.run(x) - one(torch.from_numpy(x)).numpy()).max() > 1e-4  # not the last round
    with pytest.raises(ConfigError, match="run directory"):
        export_checkpoint(out / "checkpoints" / "round_001.pt", tmp_path / "x.onnx", average=[0, 1])
    with pytest.raises(ConfigError, match="round_007.pt"):
        export_checkpoint(out, tmp_path / "x.onnx", average=[1, 7])
    with pytest.raises(SystemExit):
        cli_main(["lac", "export", str(out), "--out", str(tmp_path / "x.onnx"), "--average", "a-b"])
    # a round recorded before a key existed (its value then the code's default) averages with a later one; a round
    # of another configuration does not
    old = tmp_path / "old_run"
    shutil.copytree(out / "checkpoints", old / "checkpoints")
    f0 = old / "checkpoints" / "round_000.pt"
    raw = torch.load(f0, weights_only=False)
    assert raw["config"]["optim"]["joint_loss_scale"] == TrainConfig().optim.joint_loss_scale
    del raw["config"]["optim"]["joint_loss_scale"]
    torch.save(raw, f0)
    export_checkpoint(old, tmp_path / "old.onnx", average=[0, 1])
    raw["config"]["optim"]["lr"] *= 2
    torch.save(raw, f0)
    with pytest.raises(ConfigError, match="another training configuration"):
        export_checkpoint(old, tmp_path / "old.onnx", average=[0, 1])


def test_best_round_orders_by_decreasing_scenarios_then_falls_then_closeness():
    """The validation suite's score: more scenarios decreasing wins over fewer falls, fewer falls over more points
    within 25 %; of equal scores the later round; no suite run: None."""
    from contactflow.lac.train.dagger import best_round

    def row(r, dec, falls, within):
        return {"round": r, "validation_suite": {"suite": "envelope", "trials": 3, "seed": 1, "decreasing": dec,
                                                 "falls": falls, "within": within}}

    assert best_round([row(0, 7, 0, 30), row(1, 8, 3, 10), row(2, 6, 0, 39)]) == 1
    assert best_round([row(0, 8, 1, 30), row(1, 8, 0, 10), row(2, 8, 2, 39)]) == 1
    assert best_round([row(0, 8, 0, 30), row(1, 8, 0, 31), row(2, 8, 0, 29)]) == 1
    assert best_round([row(0, 8, 0, 30), row(1, 8, 0, 30)]) == 1
    assert best_round([{"round": 0, "validation": {}}, row(1, 2, 0, 0)]) == 1
    assert best_round([{"round": 0}]) is None
    # a scenario added to lac_eval.yaml before a --resume: the rounds scored on the earlier scenarios are not compared
    before, after = row(0, 9, 0, 39), row(1, 8, 0, 20)
    before["validation_suite"]["config_digest"], after["validation_suite"]["config_digest"] = "a" * 16, "b" * 16
    assert best_round([before, after]) == 1 and best_round([after, before]) == 0


def test_validation_suite_scores_each_round_against_the_teacher_and_export_best_takes_its_choice(dataset, robot, tmp_path,
                                                                                                  monkeypatch, capsys):
    """`validation.suite`: after each round the student runs a `lac eval` suite against the teacher (whose table is
    computed once and kept in the run), each round's own student (one process: the file rewritten under the same name
    is not the cached controller), the log holds the verdicts and the tables, `train` returns the best-scored round
    and `lac export RUN --best` exports that round's checkpoint; a resumed run whose last round was not scored scores
    it; an unknown suite and the evaluation's own seed are refused by key before any rollout, and --best on a run
    without the suite by name."""
    import contactflow.lac.evaluate as ev
    from contactflow.cli import main as cli_main
    from contactflow.lac.train.dagger import SUITE_TEACHER_FILE, best_round
    from contactflow.policy import load_policy_spec

    calls: list[list[str]] = []
    real_run_eval = ev.run_eval
    monkeypatch.setattr(ev, "run_eval", lambda controllers, **kw: calls.append(list(controllers)) or real_run_eval(controllers, **kw))
    cfg = load_train_config(None, {**TINY, "validation": {**TINY["validation"], "suite": "quick", "suite_trials": 1}})
    out = tmp_path / "run"
    lines: list[str] = []
    summary = train(cfg, out, dataset=dataset, workers=1, progress=False, echo=lines.append)
    student = f"policy:lac:{out / 'student.onnx'}"
    assert calls == [["expert"], [student], [student]]  # the teacher once, the student every round
    rows = json.loads((out / "train_log.json").read_text())["rounds"]
    assert len(rows) == 2
    trials = []
    for r in rows:
        v = r["validation_suite"]
        assert v["suite"] == "quick" and v["trials"] == 1 and v["seed"] == 1 and v["scenarios"] == 1 and v["tolerance"] == 0.25
        assert len(v["config_digest"]) == 16
        assert v["episodes"] == 3 and v["points"] == 3 and 0 <= v["within"] <= 3 and v["decreasing"] in (0, 1)
        assert v["teacher_falls"] == 0 and (v["decreasing"] == 1) == (v["not_decreasing"] == [])
        table = json.loads((out / "validation_suite" / f"round_{r['round']:03d}.json").read_text())  # the whole table
        assert set(table["results"]) == {"expert", student} and table["validation_of"]["round"] == r["round"]
        assert sum(table["comparison"]["scenarios"]["fig6_hand"]["within"]) == v["within"]
        trials.append([(t["displacement_m"], t["fell_time_s"], t["base_height_min_m"])
                       for row in table["results"][student]["fig6_hand"]["rows"] for t in row["trials"]])
    # round 1 ran round 1's student, not the first one loaded (the tiny ones may fall: compared with their NaNs)
    assert not np.array_equal(np.array(trials[0], float), np.array(trials[1], float), equal_nan=True)
    teacher = json.loads((out / SUITE_TEACHER_FILE).read_text())
    assert list(teacher["results"]) == ["expert"] and teacher["trials"] == 1 and teacher["suite"] == "quick"
    assert summary["best_round"] == best_round(rows) == json.loads((out / "train_log.json").read_text())["best_round"]
    assert summary["best_round"] in (0, 1)
    assert any("validation suite 'quick'" in line for line in lines)
    assert cli_main(["lac", "export", str(out), "--best", "--out", str(tmp_path / "best.onnx")]) == 0
    spec = load_policy_spec("lac", robot, model=tmp_path / "best.onnx")
    assert spec.model.metadata["train_round"] == summary["best_round"]
    # over several runs (the seeds of a recipe): the best of their best rounds; a copy of the run whose round 0 scored
    # more scenarios is chosen, named in the message; runs scored by another suite seed, or several runs without
    # --best, are refused
    other = tmp_path / "run_other"
    shutil.copytree(out, other)
    last = max((other / "checkpoints").glob("round_*.pt"))
    ck = torch.load(last, weights_only=False)
    ck["log"][0]["validation_suite"]["decreasing"] = 5
    torch.save(ck, last)
    capsys.readouterr()
    assert cli_main(["lac", "export", str(out), str(other), "--best", "--out", str(tmp_path / "best2.onnx")]) == 0
    assert (f"round 0 ({other / 'checkpoints' / 'round_000.pt'}), the one the 2 runs' validation suites scored best"
            in capsys.readouterr().out)
    assert load_policy_spec("lac", robot, model=tmp_path / "best2.onnx").model.metadata["train_round"] == 0
    round0 = other / "checkpoints" / "round_000.pt"
    round0.rename(tmp_path / "kept.pt")
    with pytest.raises(ConfigError, match="round 0, the one its validation suite scored best, has no checkpoint"):
        export_checkpoint([out, other], tmp_path / "x.onnx", best=True)
    (tmp_path / "kept.pt").rename(round0)
    for r in ck["log"]:
        r["validation_suite"]["seed"] = 2
    torch.save(ck, last)
    with pytest.raises(ConfigError, match=f"{re.escape(str(other))}: its validation suite .* is not {re.escape(str(out))}'s"):
        export_checkpoint([out, other], tmp_path / "x.onnx", best=True)
    with pytest.raises(ConfigError, match="2 runs given: several runs are exported with --best only"):
        export_checkpoint([out, other], tmp_path / "x.onnx")
    with pytest.raises(ConfigError, match="no such run directory"):
        export_checkpoint([out, tmp_path / "nope"], tmp_path / "x.onnx", best=True)
    with pytest.raises(ConfigError, match="given twice"):
        export_checkpoint([out, tmp_path / "run" / "."], tmp_path / "x.onnx", best=True)
    # a run stopped inside the last round's validation: --resume scores that round (the teacher's table kept)
    ck_path = out / "checkpoints" / "round_001.pt"
    ck = torch.load(ck_path, weights_only=False)
    del ck["log"][-1]["validation_suite"]
    torch.save(ck, ck_path)
    calls.clear()
    again = train(cfg, out, dataset=dataset, workers=1, progress=False, resume=True, echo=lambda s: None)
    assert calls == [[student]] and again["rounds"][-1]["validation_suite"] == rows[-1]["validation_suite"] | {
        "wall_s": again["rounds"][-1]["validation_suite"]["wall_s"]}
    assert load_checkpoint(ck_path)["log"][-1]["validation_suite"]["within"] == rows[-1]["validation_suite"]["within"]
    with pytest.raises(ConfigError, match="no round ran the validation suite"):
        export_checkpoint(_tiny_run_without_suite(tmp_path, dataset), tmp_path / "x.onnx", best=True)
    with pytest.raises(ConfigError, match="run directory"):
        export_checkpoint(out / "checkpoints" / "round_000.pt", tmp_path / "x.onnx", best=True)
    refused = [({"suite": "envelpe"}, r"validation.suite: 'envelpe' is not a suite of .*lac_eval.yaml.*did you mean 'envelope'"),
               # a run configured before the suite's removal
               ({"suite": "selection"}, r"validation.suite: 'selection' was .*removed .*give `envelope`"),
               # the evaluation's own perturbation seed: the rounds would be chosen on the episodes it reports
               ({"suite": "quick", "suite_seed": 0}, r"validation.suite_seed: 0 is the evaluation's own seed .*lac_eval.yaml")]
    for validation, message in refused:
        with pytest.raises(ConfigError, match=message):
            train(load_train_config(None, {**TINY, "validation": validation}), tmp_path / "bad", dataset=dataset,
                  workers=1, progress=False, echo=lambda s: None)
        assert not (tmp_path / "bad").exists()


def test_best_of_runs_takes_the_best_scored_round_over_runs_the_first_run_on_a_tie():
    from contactflow.lac.train.dagger import best_of_runs

    def row(r, dec, falls, within, seed=1):
        return {"round": r, "validation_suite": {"suite": "envelope", "trials": 10, "seed": seed, "decreasing": dec,
                                                 "falls": falls, "within": within}}

    a = [row(0, 9, 0, 20), row(1, 8, 0, 30)]
    b = [row(0, 10, 40, 10), row(1, 7, 0, 10)]
    c = [row(0, 10, 0, 24)]
    assert best_of_runs([a, b, c], ["a", "b", "c"]) == (2, 0)
    assert best_of_runs([a, b], ["a", "b"]) == (1, 0)  # more scenarios decreasing first, then falls, then within
    assert best_of_runs([c, list(c)], ["c", "c2"]) == (0, 0)  # a tie: the run given first
    with pytest.raises(ConfigError, match="no round ran the validation suite"):
        best_of_runs([a, [{"round": 0}]], ["a", "plain"])
    with pytest.raises(ConfigError, match="b: its validation suite .* is not a's"):
        best_of_runs([a, [row(0, 10, 0, 45, seed=0)]], ["a", "b"])


def test_best_round_compares_only_rounds_scored_by_the_same_suite():
    from contactflow.lac.train.dagger import best_round

    def row(r, suite, dec):
        return {"round": r, "validation_suite": {"suite": suite, "trials": 3, "seed": 1, "decreasing": dec, "falls": 0,
                                                 "within": 0}}

    assert best_round([row(0, "envelope", 9), row(1, "quick", 1), row(2, "quick", 0)]) == 1


def _tiny_run_without_suite(tmp_path, dataset) -> Path:
    out = tmp_path / "plain"
    cfg = load_train_config(None, {**TINY, "dagger": {**TINY["dagger"], "rounds": 1}, "validation": {"enabled": False}})
    train(cfg, out, dataset=dataset, workers=1, progress=False, echo=lambda s: None)
    return out


def test_ensemble_is_the_mean_action_of_its_students_and_refuses_another_contract(run_a, robot, tmp_path):
    """`contactflow lac ensemble A.onnx B.onnx --out E.onnx`: E loads through the deploy spec, its action
    is the mean of A's and B's on any input, its metadata keeps the deploy contract and each member's
    record; the same student twice, an ensemble as a member, or a member with another deploy contract
    is refused naming the file."""
    import hashlib

    import onnx

    from contactflow.cli import main as cli_main
    from contactflow.lac.train.student import DEPLOY_METADATA_KEYS, deploy_metadata, ensemble_onnx
    from contactflow.policy import load_policy_spec

    out, _ = run_a
    a, b, e = tmp_path / "a.onnx", tmp_path / "b.onnx", tmp_path / "e.onnx"
    export_checkpoint(out / "checkpoints" / "round_000.pt", a)
    export_checkpoint(out / "checkpoints" / "round_001.pt", b)
    assert cli_main(["lac", "ensemble", str(a), str(b), "--out", str(e)]) == 0
    sa, sb, se = (load_policy_spec("lac", robot, model=p) for p in (a, b, e))
    x = np.random.default_rng(5).normal(size=(1, 64, 95)).astype(np.float32)
    x[..., 90:] = np.exp(np.random.default_rng(6).uniform(np.log(10.0), np.log(500.0), size=(1, 64, 5)))
    ya, yb, ye = sa.model.run(x), sb.model.run(x), se.model.run(x)
    assert np.abs(ya - yb).max() > 1e-3  # two different students
    np.testing.assert_allclose(ye, (ya + yb) / 2, atol=1e-6)
    md = se.model.metadata
    assert set(deploy_metadata(load_train_spec("lac", robot))) == set(DEPLOY_METADATA_KEYS)  # one contract
    assert all(md[k] == sa.model.metadata[k] for k in DEPLOY_METADATA_KEYS)
    rec = md["ensemble_members"]
    assert [m["train_round"] for m in rec] == [0, 1] and [m["file"] for m in rec] == ["a.onnx", "b.onnx"]
    assert rec[1]["sha256"] == hashlib.sha256(b.read_bytes()).hexdigest()
    assert rec[1]["train_config"] == sb.model.metadata["train_config"]
    assert rec[1]["git_revision"] == sb.model.metadata["git_revision"]
    # three members: still the mean
    c = tmp_path / "c.onnx"
    export_checkpoint(out, c, average=[0, 1])
    ensemble_onnx([a, b, c], tmp_path / "e3.onnx")
    yc = load_policy_spec("lac", robot, model=c).model.run(x)
    np.testing.assert_allclose(load_policy_spec("lac", robot, model=tmp_path / "e3.onnx").model.run(x),
                               (ya + yb + yc) / 3, atol=1e-6)
    assert load_policy_spec("lac", robot, model=tmp_path / "e3.onnx").model.metadata["ensemble_members"][2][
        "train_rounds_averaged"] == [0, 1]
    with pytest.raises(ConfigError, match="the same student"):
        ensemble_onnx([a, b, a], tmp_path / "x.onnx")
    with pytest.raises(ConfigError, match="already an ensemble"):
        ensemble_onnx([e, a], tmp_path / "x.onnx")
    with pytest.raises(ConfigError, match="two or more"):
        ensemble_onnx([a], tmp_path / "x.onnx")
    m = onnx.load(str(b))
    for p in m.metadata_props:
        if p.key == "kp":
            p.value = json.dumps([2.0 * v for v in json.loads(p.value)])
    onnx.save(m, str(tmp_path / "other_gains.onnx"))
    with pytest.raises(ConfigError, match="other_gains.onnx: metadata 'kp' differs"):
        ensemble_onnx([a, tmp_path / "other_gains.onnx"], tmp_path / "x.onnx")
    with pytest.raises(ConfigError, match="other_gains.onnx: the same student as .*b.onnx"):  # same weights
        ensemble_onnx([a, b, tmp_path / "other_gains.onnx"], tmp_path / "x.onnx")
    m.graph.output[0].name = "act"
    onnx.save(m, str(tmp_path / "renamed.onnx"))
    with pytest.raises(ConfigError, match="renamed.onnx: expected one input 'frames' and one output 'action'"):
        ensemble_onnx([a, tmp_path / "renamed.onnx"], tmp_path / "x.onnx")


def test_same_seed_same_weights_with_two_workers(run_a, tiny_cfg, dataset, tmp_path):
    """Episodes do not depend on the worker that runs them. Across processes the results agree to
    floating-point rounding, not bit for bit (measured once: 1 of 19 000 frame values 1 ulp apart;
    numpy's vectorised reductions may round differently with the memory alignment); within one
    process count a run is bit-identical (the resume test)."""
    out_a, _ = run_a
    train(tiny_cfg, tmp_path, dataset=dataset, workers=2, progress=False, echo=lambda s: None)
    wa, wb = _weights(out_a), _weights(tmp_path)
    assert wa.keys() == wb.keys()
    for k in wa:
        np.testing.assert_allclose(wb[k].numpy(), wa[k].numpy(), rtol=1e-4, atol=1e-6, err_msg=k)
    a = np.load(out_a / "data" / "round_001.npz")
    b = np.load(tmp_path / "data" / "round_001.npz")
    np.testing.assert_allclose(b["frames"], a["frames"], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(b["ep_len"], a["ep_len"])


def test_resume_continues_from_the_last_checkpoint(run_a, tiny_cfg, dataset, tmp_path):
    out_a, _ = run_a
    run = tmp_path / "run"
    shutil.copytree(out_a, run)
    (run / "checkpoints" / "round_001.pt").unlink()  # interrupted during round 1
    (run / "data" / "round_001.npz").unlink()
    with pytest.raises(ConfigError, match="--resume"):
        train(tiny_cfg, run, dataset=dataset, progress=False, echo=lambda s: None)
    lines = []
    train(tiny_cfg, run, dataset=dataset, resume=True, progress=False, echo=lines.append)
    assert lines[0].startswith("resuming after round 0")
    assert _same(_weights(out_a), _weights(run))
    log = json.loads((run / "train_log.json").read_text())["rounds"]
    assert "validation" in log[0] and "validation" in log[1]  # round 0's survives the resume
    other = load_train_config(None, {**TINY, "seed": 5})
    with pytest.raises(ConfigError, match="another configuration"):
        train(other, run, dataset=dataset, resume=True, progress=False, echo=lambda s: None)
    # a finished run is extended by more rounds (only dagger.rounds differs)
    more = load_train_config(None, {**TINY, "dagger": {**TINY["dagger"], "rounds": 3}})
    lines = []
    s = train(more, run, dataset=dataset, resume=True, progress=False, echo=lines.append)
    assert lines[0].startswith("resuming after round 1") and [r["round"] for r in s["rounds"]] == [0, 1, 2]


def test_auxiliary_force_head(robot, dataset, tmp_path):
    """optim.aux_force_weight > 0: the round data keep the TRUE force on the hands and torso, the
    student has a head on its latent for it, and the export is the deploy graph without the head."""
    from contactflow.policy import load_policy_spec

    cfg = load_train_config(None, {**TINY, "dagger": {"rounds": 1, "episodes_per_round": 3},  # episode 2: the force row
                                   "optim": {**TINY["optim"], "aux_force_weight": 1.0}, "validation": {"enabled": False},
                                   "student": {"wrench_input": "none", "residual_action": "none"}})
    train(cfg, tmp_path, dataset=dataset, progress=False, echo=lambda s: None)
    d = np.load(tmp_path / "data" / "round_000.npz")
    assert d["force"].shape == (len(d["frames"]), 9) and np.abs(d["force"]).max() > 0.5  # an event was applied
    ck = load_checkpoint(tmp_path)
    assert "aux.weight" in ck["model"] and ck["model"]["aux.weight"].shape == (9, cfg.student.latent_dim)
    spec = load_policy_spec("lac", robot, model=tmp_path / "student.onnx")
    assert spec.model.run(np.zeros((1, 64, 95), np.float32) + 50.0).shape == (1, 23)


def test_wrench_input_student_acts_on_its_load_estimate_trained_on_the_true_load(robot, dataset, tmp_path):
    """student.wrench_input (LAC's / RMA's adaptation module): the actor takes a load estimate made from the
    history latent; where ``given`` it takes the true values instead (and only there do they change the action);
    the rounds record the true forces and couples, values a round lacks (NaN) are neither given nor targets;
    training regresses the estimate on the true load; the export is the torch network on the estimate.
    Without the estimate's loss the configuration is refused."""
    from contactflow.lac.train.dagger import aux_dim, aux_target, aux_tensors, load_rounds, new_student
    from contactflow.policy import load_policy_spec

    with pytest.raises(ConfigError, match="wrench_input: needs optim.aux_force_weight"):
        load_train_config(None, {"student": {"wrench_input": "force"}, "optim": {"aux_force_weight": 0.0}})
    with pytest.raises(ConfigError, match="wrench_input: expected"):
        load_train_config(None, {"student": {"wrench_input": "torque"}, "optim": {"aux_force_weight": 1.0}})
    with pytest.raises(ConfigError, match="force_teacher_prob"):
        load_train_config(None, {"optim": {"force_teacher_prob": 1.5}})
    with pytest.raises(ConfigError, match="aux_target: expected 'load' or 'teacher', got 'estimate'"):
        load_train_config(None, {"optim": {"aux_target": "estimate"}})
    cfg = load_train_config(None, {**TINY, "dagger": {"rounds": 1, "episodes_per_round": 3},
                                   "env": {**TINY["env"], "hand_push_prob": 0.0, "hand_couple_prob": 1.0},  # couples only
                                   "student": {"wrench_input": "wrench", "force_head_hidden": [16]},
                                   "optim": {**TINY["optim"], "aux_force_weight": 1.0, "force_teacher_prob": 0.5},
                                   "validation": {"enabled": False}})
    assert aux_dim(cfg) == 15
    data = {"force": np.full((2, 9), 20.0), "couple": np.array([[0.5] * 6, [np.nan] * 6])}
    t = aux_target(cfg, data)  # forces in 10 N, couples in N m, an older round's NaN kept
    assert t.shape == (2, 15) and np.all(t[:, :9] == 2.0) and np.all(t[0, 9:] == 0.5) and np.isnan(t[1, 9:]).all()
    aux_t, known = aux_tensors(cfg, data)  # what training gives batch_loss: NaN -> 0 and not known
    # optim.aux_target: teacher takes the teacher's estimate instead; a round recorded without it (NaN) is not known
    on_teacher = load_train_config(None, {**TINY, "student": {"wrench_input": "wrench"},
                                          "optim": {**TINY["optim"], "aux_force_weight": 1.0, "aux_target": "teacher"}})
    est = {**data, "force_est": np.full((2, 9), 5.0), "couple_est": np.array([[np.nan] * 6, [0.25] * 6])}
    t_est = aux_target(on_teacher, est)
    assert np.all(t_est[:, :9] == 0.5) and np.isnan(t_est[0, 9:]).all() and np.all(t_est[1, 9:] == 0.25)
    assert not aux_tensors(on_teacher, est)[1][0, 9:].any()
    assert torch.equal(known, torch.from_numpy(np.isfinite(t))) and torch.equal(aux_t, torch.from_numpy(np.nan_to_num(t)))
    plain = load_train_config(None, {"student": {"wrench_input": "none"}, "optim": {"aux_force_weight": 0.0}})
    assert aux_dim(plain) == 0 and aux_tensors(plain, data) == (None, None)
    with pytest.raises(ValueError, match="no auxiliary output"):
        aux_target(plain, data)
    spec = load_policy_spec("lac", robot)
    model = new_student(cfg, spec)
    x = torch.from_numpy(np.random.default_rng(0).normal(size=(4, 64, 95)).astype(np.float32))
    x[..., 90:] = 100.0
    f = torch.zeros(4, 15)
    f_big = f.clone()
    f_big[:, 0] = 3.0
    f_big[:, 12] = 3.0
    given = torch.zeros(4, 15, dtype=torch.bool)
    given[0] = True  # sample 0: every true value; sample 1: the couples only
    given[1, 9:] = True
    with torch.no_grad():
        a0, est = model.forward_aux(x, f, given)
        a1, est1 = model.forward_aux(x, f_big, given)
        a_est, _ = model.forward_aux(x)
        a_none, _ = model.forward_aux(x, f, torch.zeros(4, dtype=torch.bool))
    assert est.shape == (4, 15) and torch.equal(est, est1)
    assert (a1[0] - a0[0]).abs().max() > 1e-4 and (a1[1] - a0[1]).abs().max() > 1e-4  # the given values reach the actor
    assert torch.equal(a1[2:], a0[2:]) and torch.equal(a_none, a_est)  # the estimate where not given and by default
    one = given.clone()
    one[1, 12] = False  # the only changed value of sample 1 no longer given: its action is the f-run's
    with torch.no_grad():
        assert torch.equal(model.forward_aux(x, f_big, one)[0][1], model.forward_aux(x, f, one)[0][1])

    before = new_student(cfg, spec).state_dict()
    train(cfg, tmp_path, dataset=dataset, progress=False, echo=lambda s: None)
    d = np.load(tmp_path / "data" / "round_000.npz")
    # every episode held one 0.5-1.5 N m couple on a hand and no force: the couple's columns hold it, the force's none
    assert d["couple"].shape == (len(d["frames"]), 6) and np.abs(d["couple"]).max() > 0.4
    assert np.abs(d["force"]).max() < 1e-9
    # beside them the teacher's own estimate, at every tick: it reads the held couple (0.6 of it along the couple in
    # this short hold, ramps included), and the estimate is what optim.aux_target: teacher regresses
    assert d["couple_est"].shape == d["couple"].shape and d["force_est"].shape == d["force"].shape
    assert np.isfinite(d["couple_est"]).all() and np.isfinite(d["force_est"]).all()
    for h in range(2):
        c, c_est = d["couple"][:, 3 * h:3 * h + 3], d["couple_est"][:, 3 * h:3 * h + 3]
        held = np.linalg.norm(c, axis=1) > 0.4
        if held.any():
            along = np.sum(c_est[held] * c[held], axis=1) / np.sum(c[held] ** 2, axis=1)
            assert np.median(along) > 0.3, (h, np.median(along))
    data_est = load_rounds(tmp_path / "data", 0)
    on_teacher = dataclasses.replace(cfg, optim=dataclasses.replace(cfg.optim, aux_target="teacher"))
    np.testing.assert_array_equal(aux_target(on_teacher, data_est)[:, 9:], data_est["couple_est"])
    np.testing.assert_array_equal(aux_target(on_teacher, data_est)[:, :9], data_est["force_est"] / 10.0)
    np.testing.assert_array_equal(aux_target(cfg, data_est)[:, 9:], data_est["couple"])
    ck = load_checkpoint(tmp_path)
    assert ck["model"]["aux.0.weight"].shape == (16, cfg.student.latent_dim)
    assert not torch.equal(ck["model"]["aux.2.weight"], before["aux.2.weight"])  # the estimate was trained
    trained = new_student(cfg, spec)
    trained.load_state_dict(ck["model"])
    trained.eval()
    loaded = load_policy_spec("lac", robot, model=tmp_path / "student.onnx")
    with torch.no_grad():
        np.testing.assert_allclose(loaded.model.run(x[:1].numpy()), trained(x[:1]).numpy(), atol=1e-4)


def _wrench_batch(seed: int):
    """A batch of 6 random windows (stiffness 100 raw), action labels, 15-D true loads and their recorded mask (all
    True) for :func:`dagger.batch_loss` with ``student.wrench_input: wrench``."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(6, 64, 95, generator=gen)
    x[..., 90:] = 100.0
    labels = torch.randn(6, 23, generator=gen)
    t = torch.randn(6, 15, generator=gen)
    return x, labels, t, torch.ones(6, 15, dtype=torch.bool)


def test_batch_loss_gives_the_true_load_where_recorded_and_ignores_what_a_round_did_not_record(spec):
    """dagger.batch_loss (lac train's and the hold-out benchmark's loss): with force_teacher_prob 1 the actor gets every
    recorded value of the true load and the estimate elsewhere, the estimate's error counts where recorded only (a
    changed unrecorded value changes nothing); with 0 the actor gets the estimate everywhere."""
    from contactflow.lac.train.dagger import batch_loss, loss_weights, new_student

    over = {"student": {"wrench_input": "wrench"}, "optim": {"aux_force_weight": 2.0, "force_teacher_prob": 1.0}}
    cfg = load_train_config(None, over)
    torch.manual_seed(0)
    model = new_student(cfg, spec)
    w = loss_weights(cfg, spec)
    x, labels, t, known = _wrench_batch(1)
    known[3:, 9:] = False  # samples of a round recorded before the couples
    t2 = t.clone()
    t2[3:, 9:] += 5.0
    with torch.no_grad():
        l0 = batch_loss(cfg, model, w, x, labels, t, known, np.random.default_rng(0))
        l1 = batch_loss(cfg, model, w, x, labels, t2, known, np.random.default_rng(0))
        pred, aux = model.forward_aux(x, t, known)
        manual = torch.mean(w * (pred - labels) ** 2) + 2.0 * torch.mean((aux - t)[known] ** 2)
        assert float(l0) == float(l1)
        assert float(l0) == pytest.approx(float(manual), rel=1e-6)
        cfg0 = load_train_config(None, {**over, "optim": {**over["optim"], "force_teacher_prob": 0.0}})
        pred0, aux0 = model.forward_aux(x)
        manual0 = torch.mean(w * (pred0 - labels) ** 2) + 2.0 * torch.mean((aux0 - t)[known] ** 2)
        got0 = batch_loss(cfg0, model, w, x, labels, t, known, np.random.default_rng(0))
        assert float(got0) == pytest.approx(float(manual0), rel=1e-6) and abs(float(got0) - float(l0)) > 1e-6
    with pytest.raises(ValueError, match="needs aux_t"):
        batch_loss(cfg, model, w, x, labels)


def test_estimate_action_grad_false_trains_the_load_estimate_on_the_true_load_alone(spec):
    """optim.estimate_action_grad false: the actor takes its estimate detached, so the estimate's head gets the
    gradient of the regression on the true load and nothing of the action loss; true (the default) both."""
    from contactflow.lac.train.dagger import batch_loss, loss_weights, new_student

    over = {"student": {"wrench_input": "wrench"}, "optim": {"aux_force_weight": 2.0, "force_teacher_prob": 0.0}}
    x, labels, t, known = _wrench_batch(2)
    head = {}
    for grad in (True, False):
        cfg = load_train_config(None, {**over, "optim": {**over["optim"], "estimate_action_grad": grad}})
        torch.manual_seed(0)
        model = new_student(cfg, spec)
        model.zero_grad()
        batch_loss(cfg, model, loss_weights(cfg, spec), x, labels, t, known, np.random.default_rng(0)).backward()
        head[grad] = [p.grad.clone() for p in model.aux.parameters()]
        model.zero_grad()
        _, aux = model.forward_aux(x)
        (2.0 * torch.mean((aux - t) ** 2)).backward()  # the regression alone
        regression = [p.grad.clone() for p in model.aux.parameters()]
        same = all(torch.allclose(a, b, atol=1e-7) for a, b in zip(head[grad], regression))
        assert same is (not grad)


def test_stiffness_film_student_starts_as_the_plain_one_and_exports(robot, spec, tmp_path):
    """student.stiffness_film: zero-initialised FiLM layers leave the actor as the plain MLP; once
    they are non-zero the action depends on the stiffness through them, and the ONNX export is the
    torch network (LAC's deploy input, unchanged spec)."""
    from contactflow.lac.train.dagger import new_student
    from contactflow.lac.train.student import export_onnx
    from contactflow.policy import load_policy_spec

    torch.manual_seed(3)
    plain = new_student(load_train_config(None, {"seed": 3}), spec)
    film = new_student(load_train_config(None, {"seed": 3, "student": {"stiffness_film": True}}), spec)
    assert all(k.startswith("film.") for k in film.state_dict().keys() - plain.state_dict().keys())
    film.load_state_dict({**film.state_dict(), **plain.state_dict()})
    x = np.random.default_rng(1).normal(size=(4, 64, 95)).astype(np.float32)
    x[..., 90:] = np.exp(np.random.default_rng(2).uniform(np.log(10), np.log(500), size=(4, 64, 5)))
    xt = torch.from_numpy(x)
    with torch.no_grad():
        np.testing.assert_array_equal(film(xt).numpy(), plain(xt).numpy())
        for lin in film.film:
            lin.weight.normal_(0.0, 0.3)
        a = film(xt).numpy()
        assert np.abs(a - plain(xt).numpy()).max() > 1e-3  # the modulation acts
    from contactflow.lac.train.student import deploy_metadata

    path = export_onnx(film, tmp_path / "film.onnx", deploy_metadata(spec))
    loaded = load_policy_spec("lac", robot, model=path)
    np.testing.assert_allclose(loaded.model.run(x[:1]), a[:1], atol=1e-4)


def test_actor_dropout_acts_in_training_only_and_the_export_has_none(robot, spec, tmp_path):
    """student.actor_dropout: in train mode two passes differ (the dropout masks), in eval mode the
    student is the same network without dropout (same weights, bit for bit), and the ONNX export is
    that eval-mode network; a probability outside [0, 1) is refused with its key."""
    from contactflow.lac.train.dagger import new_student
    from contactflow.lac.train.student import deploy_metadata, export_onnx
    from contactflow.policy import load_policy_spec

    torch.manual_seed(3)
    plain = new_student(load_train_config(None, {"seed": 3}), spec)
    drop = new_student(load_train_config(None, {"seed": 3, "student": {"actor_dropout": 0.2}}), spec)
    drop.load_state_dict(plain.state_dict())
    x = np.random.default_rng(1).normal(size=(4, 64, 95)).astype(np.float32)
    x[..., 90:] = np.exp(np.random.default_rng(2).uniform(np.log(10), np.log(500), size=(4, 64, 5)))
    xt = torch.from_numpy(x)
    with torch.no_grad():
        drop.train()
        a1, a2 = drop(xt).numpy(), drop(xt).numpy()
        assert np.abs(a1 - a2).max() > 1e-4
        drop.eval()
        plain.eval()
        a = drop(xt).numpy()
        np.testing.assert_array_equal(a, plain(xt).numpy())
    path = export_onnx(drop, tmp_path / "drop.onnx", deploy_metadata(spec))
    loaded = load_policy_spec("lac", robot, model=path)
    np.testing.assert_allclose(loaded.model.run(x[:1]), a[:1], atol=1e-4)
    with pytest.raises(ConfigError, match="actor_dropout"):
        load_train_config(None, {"student": {"actor_dropout": 1.0}})


def _runner_frame(robot, spec, rng, *, q_noise: float, q_ref_std: float):
    """A deploy PolicyRunner with a random last action, and the frame it builds for a random state and command:
    (runner, frame (95,), q, command)."""
    from contactflow.policy import PolicyRunner

    run = PolicyRunner(spec)
    q = robot.q_default.copy()
    q[7:] += q_noise * rng.standard_normal(robot.n)
    sensors = {"t": np.zeros(1), "q": q, "v": rng.standard_normal(robot.nv), "imu_quat": np.array([0.0, 0.0, 0.0, 1.0]),
               "imu_gyro": np.zeros(3)}
    n_arm = len(robot.raw["teleop"]["arm_joints"])
    command = {"lin_vel": np.zeros(2), "ang_vel": np.zeros(1), "base_height": np.array([0.74]), "waist_yaw": np.zeros(1),
               "q_ref_arms": q_ref_std * rng.standard_normal(n_arm), "stiffness": np.array([40.0, 300.0, 120.0, 15.0, 80.0])}
    run.last_action[:] = rng.standard_normal(len(spec.joint_names))
    return run, run.frame(sensors, command), q, command


def test_tracking_features_are_the_pd_and_reference_errors_of_the_runner_frame(robot, spec, tmp_path):
    """student.tracking_features: the 33 values appended inside the graph equal, for a frame the
    deploy runner builds, the PD tracking error (target - angle) of every joint in policy order and
    the arm reference minus the arm angle, computed here from the state by joint name; the export
    keeps LAC's input (1, 64, 95) and is the torch network."""
    from contactflow.lac.train.dagger import new_student
    from contactflow.lac.train.student import deploy_metadata, export_onnx
    from contactflow.policy import load_policy_spec

    rng = np.random.default_rng(7)
    run, frame, q, command = _runner_frame(robot, spec, rng, q_noise=0.2, q_ref_std=0.3)
    arm_names = list(robot.raw["teleop"]["arm_joints"])
    model = new_student(load_train_config(None, {"student": {"tracking_features": True}}), spec)
    with torch.no_grad():
        feats = model.features(torch.from_numpy(frame[None, None].astype(np.float32))).numpy()[0, 0]
    assert feats.shape == (95 + 23 + 10,)
    angle = {name: q[7 + i] for i, name in enumerate(robot.joint_names)}
    default = dict(zip(spec.joint_names, spec.default_policy))
    pd_err = [default[nm] + spec.scale[i] * run.last_action[i] - angle[nm] for i, nm in enumerate(spec.joint_names)]
    ref = dict(zip(arm_names, command["q_ref_arms"]))
    ref_err = [ref[nm] - angle[nm] for nm in spec.cfg.joint_orders["arms"]]
    np.testing.assert_allclose(feats[95:118], pd_err, atol=2e-6)
    np.testing.assert_allclose(feats[118:], ref_err, atol=2e-6)
    np.testing.assert_array_equal(feats[:90], frame[:90].astype(np.float32))
    x = np.repeat(frame[None, None].astype(np.float32), 64, axis=1)
    model.set_normalizer(model.features(torch.from_numpy(x[0])).numpy() + rng.normal(size=(64, 128)), 1e-2)
    path = export_onnx(model, tmp_path / "tracking.onnx", deploy_metadata(spec))
    loaded = load_policy_spec("lac", robot, model=path)
    with torch.no_grad():
        np.testing.assert_allclose(loaded.model.run(x), model(torch.from_numpy(x)).numpy(), atol=1e-4)


def test_force_head_frame_gives_the_estimate_the_newest_frame_and_its_tracking_errors(robot, spec, tmp_path):
    """student.force_head_frame: the load estimate's head takes the latent, the newest normalised frame and its 33
    tracking errors (:func:`tracking_feature_map`) normalised by the statistics set_head_normalizer stores; a
    change of the newest frame's last action (a PD offset) reaches the estimate; the encoder and the actor keep
    LAC's frame (no tracking features); the export is the torch network; refused without wrench_input, and
    force_head_stiffness false refused without it (no effect there)."""
    from contactflow.lac.train.dagger import new_student
    from contactflow.lac.train.student import deploy_metadata, export_onnx, tracking_feature_map
    from contactflow.policy import load_policy_spec

    with pytest.raises(ConfigError, match="force_head_stiffness: false .*force_head_frame: false"):
        load_train_config(None, {"student": {"force_head_stiffness": False}})
    with pytest.raises(ConfigError, match="force_head_frame: .*wrench_input 'none'"):
        load_train_config(None, {"student": {"wrench_input": "none", "force_head_frame": True},
                                 "optim": {"aux_force_weight": 0.0}})
    cfg = load_train_config(None, {"student": {"wrench_input": "wrench", "force_head_frame": True},
                                   "optim": {"aux_force_weight": 1.0}})
    model = new_student(cfg, spec)
    plain = new_student(load_train_config(None, {"student": {"wrench_input": "wrench"}, "optim": {"aux_force_weight": 1.0}}), spec)
    assert model.feat_dim == plain.feat_dim == 95  # the encoder and the actor: LAC's frame
    W, b = tracking_feature_map(spec)
    assert model.aux[0].in_features == cfg.student.latent_dim + 95 + W.shape[1]
    rng = np.random.default_rng(3)
    _, frame, _, _ = _runner_frame(robot, spec, rng, q_noise=0.2, q_ref_std=0.3)
    x = np.repeat(frame[None, None].astype(np.float32), 64, axis=1)
    x[..., :90] += rng.normal(scale=0.05, size=(1, 64, 90)).astype(np.float32)  # frames that differ (not the stiffness)
    train_frames = x[0] + rng.normal(scale=0.05, size=(64, 95)).astype(np.float32)
    model.set_normalizer(model.features(torch.from_numpy(train_frames)).numpy(), 1e-2)
    model.set_head_normalizer(train_frames, 1e-2)
    d = train_frames @ W + b
    np.testing.assert_allclose(model.head_mean.numpy(), d.mean(0), atol=1e-5)
    np.testing.assert_allclose(model.head_std.numpy(), np.where(d.std(0) < 1e-2, 1.0, d.std(0)), rtol=1e-4, atol=1e-6)
    la = next(t for t in spec.terms if t.cfg.term == "last_action")
    moved = x.copy()
    moved[0, -1, la.sl.start] += 0.5  # the newest frame's last action: its PD offset
    with torch.no_grad():
        e0 = model.forward_aux(torch.from_numpy(x))[1]
        e1 = model.forward_aux(torch.from_numpy(moved))[1]
        xn = torch.clamp((model.features(torch.from_numpy(x)) - model.obs_mean) / model.obs_std, -10, 10)
        z0 = model.encoder(xn.transpose(1, 2))
        d0 = torch.clamp((torch.from_numpy(x[:, -1]) @ model.head_W + model.head_b - model.head_mean) / model.head_std, -10, 10)
        assert torch.allclose(model.aux(torch.cat([z0, xn[:, -1], d0], -1)), e0, atol=1e-6)  # latent, frame, errors
        assert (e1 - e0).abs().max() > 1e-4
    model = new_student(cfg, spec)
    model.set_normalizer(model.features(torch.from_numpy(train_frames)).numpy(), 1e-2)
    model.set_head_normalizer(train_frames, 1e-2)
    path = export_onnx(model, tmp_path / "head_tracking.onnx", deploy_metadata(spec))
    loaded = load_policy_spec("lac", robot, model=path)
    with torch.no_grad():
        np.testing.assert_allclose(loaded.model.run(moved), model(torch.from_numpy(moved)).numpy(), atol=1e-4)
    # force_head_stiffness false: the newest frame's stiffness does not reach the estimate but through the encoder
    blind = new_student(load_train_config(None, {"student": {"wrench_input": "wrench", "force_head_frame": True,
                                                             "force_head_stiffness": False},
                                                 "optim": {"aux_force_weight": 1.0}}), spec)
    blind.set_normalizer(blind.features(torch.from_numpy(train_frames)).numpy(), 1e-2)
    blind.set_head_normalizer(train_frames, 1e-2)
    stiff = x.copy()
    stiff[0, -1, 90:] *= 3.0  # the newest frame's commanded stiffness only
    with torch.no_grad():
        xn = torch.clamp((blind.features(torch.from_numpy(x)) - blind.obs_mean) / blind.obs_std, -10, 10)
        z0 = blind.encoder(xn.transpose(1, 2))
        d0 = torch.clamp((torch.from_numpy(x[:, -1]) @ blind.head_W + blind.head_b - blind.head_mean) / blind.head_std, -10, 10)
        xh = xn[:, -1].clone()
        xh[:, 90:95] = 0.0
        assert torch.allclose(blind.forward_aux(torch.from_numpy(x))[1], blind.aux(torch.cat([z0, xh, d0], -1)), atol=1e-6)
        assert not torch.allclose(model.forward_aux(torch.from_numpy(stiff))[1], model.forward_aux(torch.from_numpy(x))[1])
    path = export_onnx(blind, tmp_path / "head_blind.onnx", deploy_metadata(spec))
    with torch.no_grad():
        np.testing.assert_allclose(load_policy_spec("lac", robot, model=path).model.run(stiff),
                                   blind(torch.from_numpy(stiff)).numpy(), atol=1e-4)


def test_compliance_input_gives_the_actor_the_bounded_admittance_displacement_of_its_load(robot, spec, tmp_path):
    """student.compliance_input: per block of the load (hands' and torso's forces, hands' couples) the steady
    displacement F / K of its own stiffness channel, bounded by the teacher's d_max (tanh) and divided by it, is
    the actor's last input (from the load the actor is given: the true one under teacher forcing); it falls with
    K of its channel; the export is the torch network; refused without wrench_input."""
    import dataclasses

    from contactflow.lac.expert import load_expert_config
    from contactflow.lac.train.dagger import compliance_map, new_student
    from contactflow.lac.train.student import Student, deploy_metadata, export_onnx
    from contactflow.policy import load_policy_spec

    with pytest.raises(ConfigError, match="compliance_input: .*wrench_input 'none'"):
        load_train_config(None, {"student": {"wrench_input": "none", "compliance_input": True},
                                 "optim": {"aux_force_weight": 0.0}})
    with pytest.raises(ConfigError, match="compliance_rotation_bound_rad: must be > 0"):
        load_train_config(None, {"student": {"compliance_rotation_bound_rad": 0.0}})
    def with_compliance(**student):  # the student of this test, with the keys given
        return load_train_config(None, {"student": {"wrench_input": "wrench", "compliance_input": True,
                                                    "compliance_rotation_bound_rad": 0.4, **student},
                                        "optim": {"aux_force_weight": 1.0}})

    cfg = with_compliance()
    with pytest.raises(ConfigError, match="compliance_torso: expected 'horizontal' or 'force'"):
        load_train_config(None, {"student": {"compliance_torso": "vertical"}})
    select, unit, bound, axes = compliance_map(cfg, spec)
    ecfg = load_expert_config()
    # blocks: left hand, right hand, torso forces [10 N]; left, right hand couples [1 N m]; channels in LAC's order
    np.testing.assert_array_equal(select, np.eye(5))
    np.testing.assert_allclose(unit, [10.0, 10.0, 10.0, 1.0, 1.0])
    np.testing.assert_allclose(bound, [ecfg.arm_max_displacement_m] * 2 + [ecfg.torso_max_displacement_m, 0.4, 0.4])
    # the torso's block: its horizontal force (the teacher's torso channel) by default, the whole force with 'force'
    horizontal = np.ones((5, 3))
    horizontal[2, 2] = 0.0
    np.testing.assert_array_equal(axes, horizontal)
    whole = with_compliance(compliance_torso="force")
    np.testing.assert_array_equal(compliance_map(whole, spec)[3], np.ones((5, 3)))
    forces_only = compliance_map(load_train_config(None, {"student": {"wrench_input": "force", "compliance_input": True}}), spec)
    np.testing.assert_array_equal(forces_only[0], np.eye(5)[:, :3])  # wrench_input force: the three force blocks
    no_k = dataclasses.replace(spec, terms=tuple(b for b in spec.terms if b.cfg.term != "stiffness"))
    for refused in (lambda: compliance_map(cfg, no_k), lambda: new_student(cfg, no_k)):  # a spec without the command
        with pytest.raises(ConfigError, match="no 'stiffness' observation term"):
            refused()
    model = new_student(cfg, spec)
    plain = new_student(load_train_config(None, {"student": {"wrench_input": "wrench"}, "optim": {"aux_force_weight": 1.0}}), spec)
    assert model.actor[0].in_features == plain.actor[0].in_features + 15
    k = np.array([[20.0, 500.0, 40.0, 15.0, 100.0]], np.float32)  # a K of its own per channel
    # loads whose |s| = |F / K| / d_max lies in 0.3-2 (tanh neither linear nor flat) in every block
    load = np.array([[0.3, -0.5, 0.6, 10.0, 5.0, -12.0, 0.1, 0.15, 0.2, 3.0, -2.0, 2.5, 30.0, -25.0, 40.0]], np.float32)

    def expected(channels, mask=horizontal):  # per block j: F / K [m] or tau / K_theta [rad] of channel channels[j], bounded
        d = mask * load[0].reshape(5, 3) * (unit / k[0, channels])[:, None]
        n = np.linalg.norm(d, axis=1)
        return (d / n[:, None] * np.tanh(n / bound)[:, None]).reshape(1, 15)

    n_own = np.linalg.norm(horizontal * load[0].reshape(5, 3) * (unit / k[0])[:, None], axis=1)
    assert np.all((0.3 < n_own / bound) & (n_own / bound < 2.0))

    with torch.no_grad():
        got = model.compliance_features(torch.from_numpy(k), torch.from_numpy(load)).numpy()
        stiffer = model.compliance_features(torch.from_numpy(1.5 * k), torch.from_numpy(load)).numpy()
        got_whole = new_student(whole, spec).compliance_features(torch.from_numpy(k), torch.from_numpy(load)).numpy()
    np.testing.assert_allclose(got, expected([0, 1, 2, 3, 4]), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(got_whole, expected([0, 1, 2, 3, 4], np.ones((5, 3))), rtol=1e-5, atol=1e-7)
    assert got[0, 8] == 0.0 and abs(got_whole[0, 8]) > 0.1  # the torso's vertical value
    assert np.all(np.linalg.norm(stiffer.reshape(5, 3), axis=1) < np.linalg.norm(got.reshape(5, 3), axis=1))
    # a block takes the channel its select column names (a map other than the identity)
    perm = [4, 3, 2, 1, 0]
    swapped = Student(dataclasses.replace(cfg.student, residual_action="none"), history=64, frame_dim=95, n_act=23,
                      stiffness=slice(90, 95), aux_dim=15,
                      compliance=(np.eye(5, dtype=np.float32)[:, perm], unit, bound, np.ones((5, 3), np.float32)))
    with torch.no_grad():
        got_swapped = swapped.compliance_features(torch.from_numpy(k), torch.from_numpy(load)).numpy()
    np.testing.assert_allclose(got_swapped, expected(perm, np.ones((5, 3))), rtol=1e-5, atol=1e-7)
    rng = np.random.default_rng(5)
    # the actor's input ends with the features of the load it is given (the true one here), at the newest frame's K
    _, frame, _, _ = _runner_frame(robot, spec, rng, q_noise=0.2, q_ref_std=0.3)
    x = np.repeat(frame[None, None].astype(np.float32), 64, axis=1)
    x[0, :-1, 90:95] = 100.0  # older frames: another command (not read by the features)
    x[0, -1, 90:95] = k[0]
    seen = []
    hook = model.actor[0].register_forward_pre_hook(lambda mod, inp: seen.append(inp[0].detach().clone()))
    with torch.no_grad():
        model.forward_aux(torch.from_numpy(x), torch.from_numpy(load), torch.ones(1, dtype=torch.bool))
        _, est = model.forward_aux(torch.from_numpy(x))
    hook.remove()
    np.testing.assert_allclose(seen[0][:, -15:].numpy(), got, rtol=1e-5, atol=1e-7)
    with torch.no_grad():
        np.testing.assert_allclose(seen[1][:, -15:].numpy(), model.compliance_features(torch.from_numpy(k), est).numpy(),
                                   rtol=1e-5, atol=1e-7)
    path = export_onnx(model, tmp_path / "compliance.onnx", deploy_metadata(spec))
    with torch.no_grad():
        np.testing.assert_allclose(load_policy_spec("lac", robot, model=path).model.run(x),
                                   model(torch.from_numpy(x)).numpy(), atol=1e-4)


def test_residual_action_student_starts_by_holding_the_runners_last_action_and_exports(robot, spec, tmp_path):
    """student.residual_action: the action is the network's output plus the last action of the frame the deploy runner
    builds (policy order, raw); the new student outputs exactly that last action; after a gradient step the
    network's part is no longer zero and the export (LAC's input and output) is the torch network."""
    from contactflow.lac.train.dagger import new_student
    from contactflow.lac.train.student import deploy_metadata, export_onnx, last_action_map
    from contactflow.policy import load_policy_spec

    rng = np.random.default_rng(3)
    run, frame, _, _ = _runner_frame(robot, spec, rng, q_noise=0.1, q_ref_std=0.0)
    x = np.repeat(frame[None, None].astype(np.float32), 64, axis=1)
    model = new_student(load_train_config(None, {"student": {"residual_action": "all"}}), spec)
    model.set_normalizer(model.features(torch.from_numpy(x[0])).numpy() + rng.normal(size=(64, 95)), 1e-2)
    with torch.no_grad():
        np.testing.assert_allclose(model(torch.from_numpy(x)).numpy()[0], run.last_action, atol=1e-5)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = ((model(torch.from_numpy(x)) - torch.zeros(1, 23)) ** 2).mean()
    loss.backward()
    opt.step()
    with torch.no_grad():
        a = model(torch.from_numpy(x)).numpy()[0]
    assert np.max(np.abs(a - run.last_action)) > 1e-3
    path = export_onnx(model, tmp_path / "residual.onnx", deploy_metadata(spec))
    loaded = load_policy_spec("lac", robot, model=path)
    np.testing.assert_allclose(loaded.model.run(x)[0], a, atol=1e-4)
    plain = new_student(load_train_config(None, {"student": {"residual_action": "none"}}), spec)
    assert not hasattr(plain, "last_action_W")
    arms = new_student(load_train_config(None, {"student": {"residual_action": "arms"}}), spec)
    arms.set_normalizer(arms.features(torch.from_numpy(x[0])).numpy() + rng.normal(size=(64, 95)), 1e-2)
    i_arm = [spec.joint_names.index(j) for j in spec.cfg.joint_orders["arms"]]
    i_leg = [i for i in range(len(spec.joint_names)) if i not in i_arm]
    with torch.no_grad():
        a = arms(torch.from_numpy(x)).numpy()[0]
    np.testing.assert_allclose(a[i_arm], run.last_action[i_arm], atol=1e-5)
    w_out = arms.actor[-1].weight.detach().numpy()
    assert not np.any(w_out[i_arm]) and np.all(np.abs(w_out[i_leg]).sum(axis=1) > 0)  # the legs: the network alone
    assert np.all(np.abs(a[i_leg] - run.last_action[i_leg]) > 1e-6)
    wrists = new_student(load_train_config(None, {"student": {"residual_action": "wrists"}}), spec)
    wrists.set_normalizer(wrists.features(torch.from_numpy(x[0])).numpy() + rng.normal(size=(64, 95)), 1e-2)
    i_wr = [spec.joint_names.index(j) for j in ("left_wrist_roll_joint", "right_wrist_roll_joint")]
    i_rest = [i for i in range(len(spec.joint_names)) if i not in i_wr]
    with torch.no_grad():
        a = wrists(torch.from_numpy(x)).numpy()[0]
    np.testing.assert_allclose(a[i_wr], run.last_action[i_wr], atol=1e-5)
    assert np.all(np.abs(a[i_rest] - run.last_action[i_rest]) > 1e-6)  # shoulders and elbows absolute
    no_wrist = dataclasses.replace(spec.cfg, joint_orders={**spec.cfg.joint_orders, "arms": [
        j for j in spec.cfg.joint_orders["arms"] if "wrist" not in j]})
    with pytest.raises(ConfigError, match="student.residual_action: wrists needs a joint named"):
        last_action_map(dataclasses.replace(spec, cfg=no_wrist), "wrists")
    with pytest.raises(ConfigError, match="copy_gain: wrists needs a joint named"):  # a caller's own key in the error
        last_action_map(dataclasses.replace(spec, cfg=no_wrist), "wrists", key="copy_gain")
    with pytest.raises(ConfigError, match="residual_action"):
        load_train_config(None, {"student": {"residual_action": "legs"}})
    with pytest.raises(ConfigError, match="arm_feedforward.*'wrists'"):
        load_train_config(None, {"student": {"residual_action": "wrists", "arm_estimate": "analytic",
                                             "wrench_input": "wrench", "arm_feedforward": "analytic"}})


def test_last_action_map_undoes_the_terms_scale_and_joint_order(robot, tmp_path):
    """last_action_map on a spec whose last_action term is scaled (0.5) and in another joint order than the
    actions (isaaclab_bfs): frame @ W is the runner's raw last action in policy order (LAC's own spec has scale 1
    in policy order, where a scale or order mistake would not show)."""
    from contactflow.lac.train.student import last_action_map
    from contactflow.policy import load_policy_spec

    root = Path(__file__).resolve().parents[1] / "robots/g1/policies"
    src = (root / "lac.yaml").read_text()
    term = "{term: last_action,         dim: 23, joints: policy}"
    assert term in src
    p = tmp_path / "lac_scaled.yaml"
    p.write_text(src.replace(term, "{term: last_action,         dim: 23, joints: isaaclab_bfs, scale: 0.5}"))
    spec = load_policy_spec(p, robot, model=root / "lac_policy.onnx")
    la = next(b for b in spec.terms if b.cfg.term == "last_action")
    assert la.cfg.scale == 0.5 and la.index is not None and not np.array_equal(la.index, np.arange(23))
    run, frame, _, _ = _runner_frame(robot, spec, np.random.default_rng(5), q_noise=0.1, q_ref_std=0.1)
    np.testing.assert_allclose(frame @ last_action_map(spec), run.last_action, atol=1e-6)
    arms = last_action_map(spec, "arms")
    i_arm = [spec.joint_names.index(j) for j in spec.cfg.joint_orders["arms"]]
    np.testing.assert_allclose((frame @ arms)[i_arm], run.last_action[i_arm], atol=1e-6)
    assert not np.any(np.delete(frame @ arms, i_arm))


def test_bad_config_is_named(tmp_path):
    p = tmp_path / "lac_train.yaml"
    p.write_text("optim: {lrr: 0.001}\n")
    with pytest.raises(ConfigError, match=r"lac_train\.yaml.*optim.*'lrr'"):
        load_train_config(p)
    p.write_text("dagger: {beta_1: 2.0}\n")
    with pytest.raises(ConfigError, match=r"lac_train\.yaml.*beta_1"):
        load_train_config(p)
    with pytest.raises(ConfigError, match="no checkpoints"):
        export_checkpoint(tmp_path, tmp_path / "x.onnx")


def test_joint_loss_scale_multiplies_the_named_joints_and_refuses_unknown_names(robot, spec, tmp_path):
    from contactflow.lac.train.dagger import loss_weights

    base = load_train_config()
    w0 = loss_weights(base, spec).numpy()
    p = tmp_path / "w.yaml"
    p.write_text("optim: {joint_loss_scale: {left_wrist_roll_joint: 8.0, right_wrist_roll_joint: 8.0}}\n")
    w = loss_weights(load_train_config(p), spec).numpy()
    names = list(spec.joint_names)
    wrists = [names.index("left_wrist_roll_joint"), names.index("right_wrist_roll_joint")]
    np.testing.assert_allclose(w[wrists], 8.0 * w0[wrists])
    others = [i for i in range(len(names)) if i not in wrists]
    np.testing.assert_array_equal(w[others], w0[others])
    assert w0[wrists[0]] == 1.0  # torque_floor: the arms weigh 1 before the factor
    p.write_text("optim: {joint_loss_scale: {left_wrist_rol_joint: 8.0}}\n")
    with pytest.raises(ConfigError, match=r"joint_loss_scale.*'left_wrist_rol_joint'.*did you mean 'left_wrist_roll_joint'"):
        loss_weights(load_train_config(p), spec)
    p.write_text("optim: {joint_loss_scale: {left_wrist_roll_joint: 0.0}}\n")
    with pytest.raises(ConfigError, match=r"w\.yaml.*joint_loss_scale.*> 0"):
        load_train_config(p)


def test_the_shipped_recipe_file_names_every_key():
    """robots/g1/lac_train.yaml is the recipe a user reads (docs: every hyper-parameter is a key of it): no key of
    TrainConfig may hide in the code's defaults (the loaded recipe holds every key, the file must too)."""
    import yaml

    from contactflow.config import to_dict
    from contactflow.lac.train.config import default_train_config_path

    def keys(d, path=""):
        out = set()
        for k, v in d.items():
            out.add(path + k)
            if isinstance(v, dict):
                out |= keys(v, f"{path}{k}.")
        return out

    raw = yaml.safe_load(Path(default_train_config_path()).read_text())
    missing = sorted(keys(to_dict(load_train_config())) - keys(raw))
    assert not missing, f"keys of TrainConfig not in {default_train_config_path()}: {missing}"


def test_a_partial_config_file_changes_only_its_keys_of_the_shipped_recipe(tmp_path):
    """--config FILE: its keys are layered over robots/g1/lac_train.yaml, not over the code's defaults."""
    shipped = load_train_config()
    p = tmp_path / "tiny.yaml"
    p.write_text("dagger: {rounds: 2}\noptim: {epochs_per_round: 1}\n")
    cfg = load_train_config(p)
    assert cfg.dagger.rounds == 2 and cfg.optim.epochs_per_round == 1
    assert cfg.student == shipped.student and cfg.env == shipped.env  # FiLM, hand pushes ... as shipped
    assert cfg.optim.lr == shipped.optim.lr and cfg.dagger.beta_decay == shipped.dagger.beta_decay
    assert TrainConfig().student != shipped.student  # the code's defaults are not the recipe


def test_the_cosine_schedule_ends_each_round_at_its_final_ratio_and_constant_keeps_lr(run_a, dataset, tmp_path):
    """optim.lr_schedule: cosine goes from lr at a round's first step to lr_final_ratio * lr at its last, never up;
    the trained run's optimiser ends there (the last step's rate, recorded in the checkpoint); constant (the default,
    the runs before) never changes it; a bad value is refused by name."""
    from contactflow.lac.train.config import round_lr

    cos = load_train_config(None, {"optim": {"lr_schedule": "cosine", "lr_final_ratio": 0.2}}).optim
    lrs = [round_lr(cos, s, 50) for s in range(50)]
    assert lrs[0] == pytest.approx(cos.lr) and lrs[-1] == pytest.approx(0.2 * cos.lr) and np.all(np.diff(lrs) < 0)
    assert lrs[25] == pytest.approx(cos.lr * (0.2 + 0.8 * 0.5 * (1 + np.cos(np.pi * 25 / 49))))
    assert {round_lr(load_train_config().optim, s, 50) for s in range(50)} == {load_train_config().optim.lr}
    cfg = load_train_config(None, {**TINY, "dagger": {**TINY["dagger"], "rounds": 2}, "validation": {"enabled": False},
                                   "optim": {**TINY["optim"], "lr_schedule": "cosine", "lr_final_ratio": 0.2}})
    s = train(cfg, tmp_path / "cos", dataset=dataset, progress=False, echo=lambda s: None)
    assert all(r["train_steps"] > 1 for r in s["rounds"])
    for r in (0, 1):  # each round's own schedule: both end at the final rate
        ck = load_checkpoint(tmp_path / "cos" / "checkpoints" / f"round_{r:03d}.pt")
        assert ck["optim"]["param_groups"][0]["lr"] == pytest.approx(0.2 * cfg.optim.lr)
    assert load_checkpoint(run_a[0])["optim"]["param_groups"][0]["lr"] == pytest.approx(load_train_config(None, TINY).optim.lr)
    with pytest.raises(ConfigError, match="lr_schedule: expected 'constant' or 'cosine', got 'step'"):
        load_train_config(None, {"optim": {"lr_schedule": "step"}})


def test_print_config_shows_the_layered_configuration_that_loads_back(tmp_path, capsys):
    """``lac train --print-config``: every key of --config over the shipped file, with --seed, as a run's config.yaml;
    the printout given as --config is the same configuration; without it --out is required (one line); with it --out,
    --dataset and --resume are refused (it never reads a run)."""
    from contactflow import cli

    p = tmp_path / "mine.yaml"
    p.write_text("dagger: {rounds: 2}\nstudent: {compliance_input: true}\n")
    assert cli.main(["lac", "train", "--config", str(p), "--seed", "7", "--print-config"]) == 0
    printed = capsys.readouterr().out
    again = tmp_path / "printed.yaml"
    again.write_text(printed)
    want = load_train_config(p, {"seed": 7})
    assert load_train_config(again) == want and want.seed == 7 and want.dagger.rounds == 2
    assert want.student.compliance_input and want.optim == load_train_config().optim  # the rest as shipped
    assert not list(tmp_path.glob("*/config.yaml"))  # nothing trained, no run directory
    assert cli.main(["lac", "train", "--config", str(p)]) == 2
    assert "--out DIR is required" in capsys.readouterr().err
    assert cli.main(["lac", "train", "--print-config", "--out", str(tmp_path / "run"), "--resume"]) == 2
    assert "drop --out, --resume (a run's configuration is OUT/config.yaml)" in capsys.readouterr().err


def test_the_pool_recipe_is_the_shipped_students_recorded_configuration():
    """robots/g1/lac_train_pool.yaml over robots/g1/lac_train.yaml is the configuration the shipped student's run
    recorded (robots/g1/policies/lac_policy_train/config.yaml), except where its prior runs lay (same names and order);
    and each prior run recorded there is its first-stage recipe file (robots/g1/lac_train.yaml, or
    robots/g1/lac_train_aux_teacher.yaml over it) with its seed."""
    import yaml

    from contactflow.config import to_dict
    from contactflow.lac.train.dagger import _as_loaded, best_of_runs, best_round

    root = Path(__file__).resolve().parents[1]
    record = root / "robots/g1/policies/lac_policy_train"
    pool = to_dict(load_train_config(root / "robots/g1/lac_train_pool.yaml"))
    # as the code loads it today: keys added since (with their defaults) do not tell them apart
    recorded = _as_loaded(yaml.safe_load((record / "config.yaml").read_text()), record / "config.yaml")
    # run -> (its layer over robots/g1/lac_train.yaml, its seed), in the aggregate's order
    first_stage = {"load_s0": (None, 0), "load_s1": (None, 1), "teacher_s0": ("lac_train_aux_teacher.yaml", 0),
                   "teacher_s1": ("lac_train_aux_teacher.yaml", 1)}
    assert [Path(p).name for p in pool["dagger"].pop("prior_runs")] == list(first_stage)
    # the shipped run's folders were named dg_<name>
    assert [Path(p).name.removeprefix("dg_") for p in recorded["dagger"].pop("prior_runs")] == list(first_stage)
    assert pool == recorded
    log = json.loads((record / "train_log.json").read_text())
    assert best_round(log["rounds"]) == log["best_round"] == 0  # the shipped student is the run's round 0
    # the choice over seeds (lac export RUN1 ... --best): the shipped run is seed 0, the best of seeds 0-3 and 0-5
    choice = json.loads((record / "seed_choice.json").read_text())["runs"]
    assert [r["seed"] for r in choice] == list(range(6)) and recorded["seed"] == 0
    assert choice[0]["rounds"] == [{k: r[k] for k in ("round", "validation_suite")} for r in log["rounds"]]
    for n in (4, 6):
        assert best_of_runs([r["rounds"] for r in choice[:n]], [r["name"] for r in choice[:n]]) == (0, 0)
    for name, (layer, seed) in first_stage.items():
        recipe = to_dict(load_train_config(layer and root / "robots/g1" / layer))
        path = record / "prior_runs" / f"{name}_config.yaml"
        prior = _as_loaded(yaml.safe_load(path.read_text()), path)
        assert prior == {**recipe, "seed": seed}


def test_shipped_config_binds_the_deploy_spec(robot):
    cfg = load_train_config()  # robots/g1/lac_train.yaml
    spec = load_train_spec(cfg.spec, robot)
    assert spec.cfg.input.shape == (1, 64, 95) and spec.cfg.output.shape == (1, 23)


def test_a_run_records_its_own_dataset_relative_to_itself_and_refuses_another_on_resume(run_a, tiny_cfg, dataset, tmp_path):
    """The record (run.json, the exported model's metadata) names a dataset inside the run directory
    relative to it (valid wherever the run is moved or shipped), one outside it as given; resuming with
    another dataset than the recorded one is refused, with either form."""
    import json

    from contactflow.lac.train.dagger import _dataset_ref

    out_a, _ = run_a
    assert json.loads((out_a / "run.json").read_text())["dataset"]["path"] == os.path.abspath(dataset)  # outside: absolute
    run = tmp_path / "run"
    shutil.copytree(out_a, run)
    assert _dataset_ref(run / "dataset", run) == "dataset"
    other = tmp_path / "other"
    shutil.copytree(dataset, other)
    with pytest.raises(ConfigError, match="the run used dataset"):
        train(tiny_cfg, run, dataset=other, resume=True, progress=False, echo=lambda s: None)
    # the dataset moved into the run directory and recorded relative to it: the run resumes with it
    shutil.copytree(dataset, run / "dataset")
    rec = json.loads((run / "run.json").read_text())
    rec["dataset"]["path"] = "dataset"
    (run / "run.json").write_text(json.dumps(rec))
    train(tiny_cfg, run, dataset=run / "dataset", resume=True, progress=False, echo=lambda s: None)
    assert json.loads((run / "run.json").read_text())["dataset"]["path"] == "dataset"
    with pytest.raises(ConfigError, match="the run used dataset dataset"):
        train(tiny_cfg, run, dataset=other, resume=True, progress=False, echo=lambda s: None)


def test_a_dataset_outside_the_run_given_relative_to_the_working_directory_is_recorded_absolute(tmp_path, monkeypatch):
    """A relative ``--dataset`` outside the run is recorded as an absolute path, so ``--resume`` with the
    same arguments (or from another directory) finds it the same; a run's symlinked ``OUT/dataset`` stays
    ``dataset``; older records (relative to the working directory) are still recognised."""
    from contactflow.lac.train.dagger import _dataset_ref, _is_recorded_dataset

    (tmp_path / "data" / "ds").mkdir(parents=True)
    (tmp_path / "runs" / "a").mkdir(parents=True)
    (tmp_path / "runs" / "a" / "dataset").symlink_to(tmp_path / "data" / "ds")
    monkeypatch.chdir(tmp_path)
    out, ds = Path("runs/a"), Path("data/ds")
    rec = _dataset_ref(ds, out)
    assert Path(rec).is_absolute() and Path(rec).resolve() == (tmp_path / "data" / "ds").resolve()
    assert _is_recorded_dataset(rec, ds, out)
    assert _is_recorded_dataset("data/ds", ds, out)  # an older record, relative to the working directory
    assert not _is_recorded_dataset(rec, Path("runs/a"), out)
    assert _dataset_ref(out / "dataset", out) == "dataset"  # the symlink inside the run: relative
    assert _is_recorded_dataset("dataset", out / "dataset", out)
    monkeypatch.chdir(tmp_path / "runs")  # resumed from elsewhere: the absolute record still matches
    assert _is_recorded_dataset(rec, tmp_path / "data" / "ds", Path("a"))


def test_holdout_benchmark_keeps_held_out_episodes_out_of_training(run_a, tiny_cfg, tmp_path):
    """benchmarks/bench_lac_student_holdout.py on a tiny run: every sample of the aggregate is in the
    training or the held-out share (never both), the losses are finite, and a variant is applied."""
    import json
    import subprocess
    import sys

    out, _ = run_a
    rnd = tiny_cfg.dagger.rounds - 1
    report = tmp_path / "holdout.json"
    subprocess.run([sys.executable, str(Path(__file__).parents[1] / "benchmarks" / "bench_lac_student_holdout.py"),
                    str(out), "--round", str(rnd), "--steps", "4", "--every", "2", "--holdout", "0.5",
                    "--variant", "", "--variant", "student.actor_dropout=0.2",
                    "--variant", "student.force_head_frame=true", "--out", str(report)],
                   check=True, capture_output=True, text=True)
    r = json.loads(report.read_text())
    n_ok = sum(int(np.load(out / "data" / f"round_{i:03d}.npz")["teacher_ok"].sum()) for i in range(rnd + 1))
    assert r["held_out_episodes"] == round(0.5 * r["episodes"]) and r["held_out_samples"] > 0
    assert r["train_samples"] + r["held_out_samples"] == n_ok  # (a tiny run: fewer than the 20 000 evaluated)
    assert [x["variant"] for x in r["results"]] == ["", "student.actor_dropout=0.2", "student.force_head_frame=true"]
    for x in r["results"]:
        assert [c["step"] for c in x["curve"]] == [2, 4]
        assert all(np.isfinite(c["train_loss"]) and np.isfinite(c["held_out_loss"]) for c in x["curve"])
    # the load estimate on the same held-out samples for each variant (the tiny run's hand loads and couples)
    est = [x["curve"][-1]["held_out_estimate"] for x in r["results"]]
    assert est[0] and all({k: v["n"] for k, v in e.items()} == {k: v["n"] for k, v in est[0].items()} for e in est)
    assert all(v["n"] >= 20 and np.isfinite(v["error_mean"]) and np.isfinite(v["ratio"]) for e in est for v in e.values())
    assert est[2] != est[0]  # the head with the newest frame is another estimate
    with pytest.raises(subprocess.CalledProcessError):
        subprocess.run([sys.executable, str(Path(__file__).parents[1] / "benchmarks" / "bench_lac_student_holdout.py"),
                        str(out), "--round", str(rnd), "--steps", "2", "--variant", "env.force_scale=1"],
                       check=True, capture_output=True, text=True)


def test_load_estimate_benchmark_runs_the_evaluations_episodes_and_reads_the_applied_load(run_a, tiny_cfg, tmp_path):
    """benchmarks/bench_lac_load_estimate.py on a tiny run's student (a short event at the stiff end: it falls
    standing after ~1.6 s and under a soft load sooner): its
    episodes with the estimate are the evaluation's (the same displacement as `lac eval` of the exported student),
    the load it reads over the hold is the scenario's, and the actor given the true load acts otherwise."""
    import json
    import subprocess
    import sys

    import yaml

    from contactflow.lac.evaluate import Job, load_eval_config, run_job
    from contactflow.lac.train.dagger import export_checkpoint

    out, _ = run_a
    rnd = tiny_cfg.dagger.rounds - 1
    ckpt = out / "checkpoints" / f"round_{rnd:03d}.pt"
    layer = tmp_path / "short.yaml"
    layer.write_text(yaml.safe_dump({"profile": {"t0_s": 1.0, "ramp_s": 0.1, "hold_s": 0.15, "release_s": 0.1,
                                                 "after_s": 0.0, "measure_window_s": 0.1},
                                     "k_grids": {"low_mid_high": [500.0]}}))
    report = tmp_path / "estimate.json"
    subprocess.run([sys.executable, str(Path(__file__).parents[1] / "benchmarks" / "bench_lac_load_estimate.py"),
                    str(ckpt), "--data", str(out / "data"), "--round", str(rnd), "--config", str(layer),
                    "--scenario", "fig6_hand", "--true-load", "--out", str(report)], check=True, capture_output=True,
                   text=True)
    r = json.loads(report.read_text())
    assert set(r["training_data"]["links"]) >= {"left_wrist_roll_link force", "torso_link force"}
    assert "analytic" in r["training_data"]["links"]["left_wrist_roll_link force"]  # the arm estimator beside it
    assert 0.0 < r["training_data"]["copy_gain"]["median"] < 1.0  # the trained residual student: between (test above)
    est, true = r["estimate"]["fig6_hand"]["rows"], r["true_load"]["fig6_hand"]["rows"]
    assert [x["k"] for x in est] == [500.0] and not any(x["falls"] for x in est)
    assert all(x["applied"] == pytest.approx(5.0, abs=0.1) for x in est + true)  # the envelope's 5 N on the hand
    onnx = export_checkpoint(ckpt, tmp_path / "s.onnx")
    ref = run_job(Job(f"policy:lac:{onnx}", "envelope", "fig6_hand", 500.0, 0), load_eval_config(layer))
    assert est[-1]["metric"] == pytest.approx(100.0 * ref["displacement_m"], abs=0.02)  # [cm]
    assert [x["metric"] for x in est] != [x["metric"] for x in true]


def test_copy_gain_of_the_load_estimate_benchmark_is_one_for_a_student_that_holds_its_last_arm_action(run_a, spec):
    """benchmarks/bench_lac_load_estimate.py's copy gain: a student whose arm actions are its last action (residual
    arms, the network's arm outputs zero: the initial student) keeps the whole change (1); one whose arm actions do
    not take it (absolute arms, those outputs zero) keeps none (0); a trained student lies between; the bands by K."""
    import importlib.util

    import torch

    from contactflow.lac.train.dagger import load_rounds, new_student, window_index

    path = Path(__file__).parents[1] / "benchmarks" / "bench_lac_load_estimate.py"
    mod_spec = importlib.util.spec_from_file_location("bench_lac_load_estimate", path)
    bench = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(bench)
    out, _ = run_a
    d = load_rounds(out / "data", 0)
    idx = np.arange(len(d["frames"]))[:1200]
    assert len(idx) >= 200
    x = d["frames"][window_index(d["first"], idx, 64)]
    k = np.geomspace(10.0, 500.0, len(idx))
    holds = new_student(load_train_config(None, {"student": {"residual_action": "arms"}}), spec)
    absolute = new_student(load_train_config(None, {"student": {"residual_action": "none"}}), spec)
    arms = [spec.joint_names.index(j) for j in spec.cfg.joint_orders["arms"]]
    with torch.no_grad():
        absolute.actor[-1].weight[arms] = 0.0
        absolute.actor[-1].bias[arms] = 0.0
    g1, g0 = (bench.copy_gain(spec, m.eval(), x, k) for m in (holds, absolute))
    assert g1["median"] == pytest.approx(1.0, abs=1e-4) and g0["median"] == pytest.approx(0.0, abs=1e-6)
    assert set(g1["bands"]) == {"[10, 30) N/m", "[30, 100) N/m", "[100, 250) N/m", "[250, 501) N/m"}
    assert sum(b["n"] for b in g1["bands"].values()) == len(idx)
    from contactflow.lac.train.dagger import load_checkpoint

    trained = new_student(load_train_config(None, load_checkpoint(out)["config"]), spec)
    trained.load_state_dict(load_checkpoint(out)["model"])
    g = bench.copy_gain(spec, trained.eval(), x, k)["median"]
    assert 0.0 < g < 1.0 and abs(g - 1.0) > 1e-3


def test_the_teacher_target_needs_a_teacher_that_estimates_those_loads(rows, tmp_path):
    """optim.aux_target: teacher with a teacher whose arm links are not the hands (it would estimate no load on them:
    every target NaN) is refused when the rollout context is built, naming the links; the shipped teacher passes."""
    from contactflow.lac.train import dagger

    text = (Path(__file__).resolve().parents[1] / "robots/g1/lac_expert.yaml").read_text()
    old = "arm_links: [left_wrist_roll_link, right_wrist_roll_link]"
    assert old in text
    elbows = tmp_path / "expert.yaml"
    elbows.write_text(text.replace(old, "arm_links: [left_elbow_link, right_elbow_link]"))
    on_teacher = {**TINY, "optim": {**TINY["optim"], "aux_target": "teacher"}}
    with pytest.raises(ConfigError, match=r"aux_target: teacher: the teacher estimates no load on \['left_wrist_roll_link'"):
        dagger._Context(load_train_config(None, {**on_teacher, "expert_config": str(elbows)}), rows, None)
    dagger._Context(load_train_config(None, {**on_teacher, "expert_config": str(elbows), "optim": TINY["optim"]}), rows, None)
    dagger._Context(load_train_config(None, on_teacher), rows, None)


def test_stiffness_relabel_adds_copies_of_each_episode_under_other_stiffness_commands(robot, rows, tmp_path):
    """``dagger.stiffness_relabel``: teachers commanded other stiffnesses label the same visited states; each copy
    differs from its episode only in the frames' stiffness entries and in its labels, which are those of a teacher
    run alone on the same states with that command."""
    from contactflow.lac.train import dagger

    cfg = load_train_config(None, {**TINY, "dagger": {**TINY["dagger"], "stiffness_relabel": 2}})
    ctx = dagger._Context(cfg, rows, None)
    res = dagger.rollout_episode(ctx, 0, 1, 1.0)
    assert len(res.relabelled) == 2 and len(res.frames) > 50
    ks = dagger._relabel_commands(ctx, cfg.seed, 0, 1)
    sl = ctx.stiffness_slice
    assert sl.stop - sl.start == 5
    for (f_j, l_j, ok_j), k5 in zip(res.relabelled, ks):
        assert f_j.shape == res.frames.shape and l_j.shape == res.labels.shape
        others = np.ones(res.frames.shape[1], bool)
        others[sl] = False
        np.testing.assert_array_equal(f_j[:, others], res.frames[:, others])  # the same history ...
        np.testing.assert_allclose(f_j[:, sl], np.broadcast_to(ctx.stiffness_frame(k5), f_j[:, sl].shape))  # ... its K
        assert not np.allclose(f_j[:, sl], res.frames[:, sl])
        assert np.isfinite(l_j).all() and ok_j.all()
    # the labels are a lone teacher's on the same states with that stiffness (the executed actions are the
    # episode's own labels: round 0, beta 1)
    lone = ExpertTeacher(_expert_cfg(), robot, ctx.spec, limit_margin_rad=cfg.dagger.label_limit_margin_rad)
    env = ctx.env
    rng = episode_rng(cfg.seed, 0, 1)
    idx = int(rng.integers(len(env.rows)))
    obs, priv = env.reset(0, episode=episode_from_row(env.rows[idx], cfg.env, env.lac, rng, row_index=idx))
    lone.reset(priv["sensors"])
    k5 = ks[0]
    for k in range(len(res.frames)):
        a_j, _ = lone.label(priv["sensors"], {**priv["command"], "stiffness": k5})
        np.testing.assert_allclose(a_j, res.relabelled[0][1][k], atol=1e-5)
        step = env.step(res.labels[k].astype(float))
        priv = step.privileged
        if step.done:
            break
    assert not np.allclose(res.relabelled[0][1], res.labels, atol=1e-4)  # another command, other actions
    # saved as episodes of their own, after their episode
    dagger._save_round(tmp_path / "round_000.npz", [res])
    d = dagger.load_rounds(tmp_path, 0)
    assert len(d["frames"]) == 3 * len(res.frames) and d["first"][len(res.frames)] == len(res.frames)
    with pytest.raises(ConfigError, match="stiffness_relabel"):
        load_train_config(None, {"dagger": {"stiffness_relabel": -1}})


def test_a_round_recorded_before_the_teachers_estimate_reads_as_unknown_there(tmp_path):
    """A round file of the code before the teacher's estimate was recorded (no force_est / couple_est) loads with NaN of
    the right widths there, beside a round that has them, and the teacher target marks those samples not known."""
    from contactflow.lac.train.dagger import aux_tensors, load_rounds

    n = 4
    old = dict(frames=np.zeros((n, 95), np.float32), labels=np.zeros((n, 23), np.float32), teacher_ok=np.ones(n, bool),
               ep_len=np.array([n]), force=np.ones((n, 9), np.float32), couple=np.ones((n, 6), np.float32))
    np.savez(tmp_path / "round_000.npz", **old)
    np.savez(tmp_path / "round_001.npz", **old, force_est=np.full((n, 9), 2.0, np.float32),
             couple_est=np.full((n, 6), 3.0, np.float32))
    d = load_rounds(tmp_path, 1)
    assert d["force_est"].shape == (2 * n, 9) and d["couple_est"].shape == (2 * n, 6)
    assert np.isnan(d["force_est"][:n]).all() and np.isnan(d["couple_est"][:n]).all()
    assert np.all(d["force_est"][n:] == 2.0) and np.all(d["couple_est"][n:] == 3.0)
    cfg = load_train_config(None, {"student": {"wrench_input": "wrench"}, "optim": {"aux_force_weight": 1.0,
                                                                                    "aux_target": "teacher"}})
    _, known = aux_tensors(cfg, d)
    assert not known[:n].any() and known[n:].all()
    _, known_true = aux_tensors(cfg, d, target="load")  # the true load, recorded in both
    assert known_true.all()


def test_joined_aggregates_keep_each_history_window_inside_its_own_episode():
    """join_aggregates shifts each part's episode starts: every sample's window (window_index) holds
    frames of its own episode of its own part only."""
    from contactflow.lac.train.dagger import join_aggregates

    def part(tag, lengths):
        n = sum(lengths)
        first = np.concatenate([np.full(L, sum(lengths[:i]), np.int64) for i, L in enumerate(lengths)])
        ep = np.concatenate([np.full(L, i, np.float32) for i, L in enumerate(lengths)])
        frames = np.stack([np.full(n, tag, np.float32), ep], axis=1)  # (part tag, episode) in every frame
        return {"frames": frames, "labels": np.zeros((n, 2), np.float32), "ok": np.ones(n, bool),
                "force": np.zeros((n, 9), np.float32), "couple": np.zeros((n, 6), np.float32), "first": first,
                "force_est": np.zeros((n, 9), np.float32), "couple_est": np.zeros((n, 6), np.float32)}

    joined = join_aggregates([part(0, [5, 3]), part(1, [4]), part(2, [2, 6])])
    idx = np.arange(len(joined["frames"]))
    w = window_index(joined["first"], idx, 8)
    win = joined["frames"][w]  # (N, 8, 2)
    assert np.all(win == joined["frames"][idx][:, None, :])  # every frame of a window: the sample's part and episode
    assert np.array_equal(joined["first"][[0, 5, 8, 12, 14]], [0, 5, 8, 12, 14])


def test_prior_runs_join_the_aggregate_and_are_checked(run_a, dataset, tmp_path):
    """dagger.prior_runs: an earlier run's recorded rounds join this run's aggregate from round 0 on (its
    samples counted in round 0's training data, its files' hash in run.json and the ONNX metadata);
    max_steps_first_round caps round 0 alone; a folder that is not a run, this run's own folder, a run
    given twice, a run with other labels or another deploy contract, or changed files on resume are
    refused by name."""
    import onnx

    prior = tmp_path / "a"
    shutil.copytree(run_a[0], prior)
    prior_samples = int(sum(np.load(f)["teacher_ok"].sum() for f in sorted((prior / "data").glob("round_*.npz"))))
    cfg = load_train_config(None, {**TINY, "dagger": {**TINY["dagger"], "rounds": 2, "prior_runs": [str(prior)]},
                                   "optim": {**TINY["optim"], "max_steps_first_round": 5, "max_steps_per_round": 3},
                                   "validation": {"enabled": False}})
    run = tmp_path / "b"
    lines = []
    s = train(cfg, run, dataset=dataset, progress=False, echo=lines.append)
    assert lines[0].startswith("prior runs:") and "from 1 run(s)" in lines[0]
    own0 = int(np.load(run / "data" / "round_000.npz")["teacher_ok"].sum())
    assert s["rounds"][0]["data_samples"] == prior_samples + own0
    assert [r["train_steps"] for r in s["rounds"]] == [5, 3]
    rec = json.loads((run / "run.json").read_text())["prior_runs"]
    assert len(rec) == 1 and rec[0]["path"] == str(prior.resolve()) and rec[0]["rounds"] == 2 and len(rec[0]["sha256"]) == 64
    meta = {p.key: p.value for p in onnx.load(run / "student.onnx").metadata_props}
    assert json.loads(meta["prior_runs"])[0]["sha256"] == rec[0]["sha256"]

    def refused(match, *runs, data=dataset):
        c = load_train_config(None, {**TINY, "dagger": {**TINY["dagger"], "prior_runs": [str(r) for r in runs]},
                                     "validation": {"enabled": False}})
        with pytest.raises(ConfigError, match=match):
            train(c, tmp_path / "c", dataset=data, progress=False, echo=lambda s: None)
        assert not (tmp_path / "c").exists()  # refused before any rollout, and no empty run folder left behind

    refused(r"prior_runs: .*nowhere: not a `contactflow lac train` run folder", tmp_path / "nowhere")
    # without --dataset: refused before the dataset is generated (nothing written into --out)
    refused(r"prior_runs: .*nowhere: not a `contactflow lac train` run folder", tmp_path / "nowhere", data=None)
    refused(r"that is this run's own output folder \(--out\)", tmp_path / "c")
    refused(r"the same run as", prior, tmp_path / "x" / ".." / "a")
    other = tmp_path / "other"
    shutil.copytree(prior, other)
    text = (other / "config.yaml").read_text()
    (other / "config.yaml").write_text(text.replace("label_limit_margin_rad: 0.02", "label_limit_margin_rad: 0.05"))
    refused(r"dagger.label_limit_margin_rad is 0.05 there and 0.02 here", other)
    (other / "config.yaml").write_text(text)
    m = onnx.load(other / "student.onnx")
    next(p for p in m.metadata_props if p.key == "spec_sha256").value = "0" * 64
    onnx.save(m, other / "student.onnx")
    refused(r"deploy metadata 'spec_sha256' of .*student.onnx differs from this run's spec", other)
    # the prior run's files change: a resumed run refuses them, naming the run
    (run / "checkpoints" / "round_001.pt").unlink()
    (run / "data" / "round_001.npz").unlink()
    shutil.copy(prior / "data" / "round_001.npz", prior / "data" / "round_000.npz")
    with pytest.raises(ConfigError, match=r"prior_runs: the files of .*a changed since the run began"):
        train(cfg, run, dataset=dataset, resume=True, progress=False, echo=lambda s: None)


# --------------------------------------------------------------------------- the analytic arm estimate


def _deploy_frame(robot, spec, run, q, v, action, stiffness=(40.0, 300.0, 120.0, 15.0, 80.0)):
    """The frame the deploy runner ``run`` builds at state ``q`` (30,), ``v`` (29,) with ``action`` (23,) its last
    action and the stiffness command ``stiffness`` (5,), and the sensors with the PD torque that action's target gives
    there as ``tau``."""
    run.last_action[:] = action
    sensors = {"t": np.zeros(1), "q": q, "v": v, "imu_quat": q[3:7].copy(), "imu_gyro": np.zeros(3)}
    n_arm = len(robot.raw["teleop"]["arm_joints"])
    command = {"lin_vel": np.zeros(2), "ang_vel": np.zeros(1), "base_height": np.array([0.74]), "waist_yaw": np.zeros(1),
               "q_ref_arms": np.zeros(n_arm), "stiffness": np.asarray(stiffness, float)}
    target = np.empty(robot.n)
    target[spec.policy_to_robot] = spec.default_policy + spec.scale * run.last_action
    sensors["tau"] = spec.kp * (target - q[7:]) - spec.kd * v[6:]
    return run.frame(sensors, command), sensors


def _tilted_state(robot, spec, rng):
    """A random arm posture and rates on a base tilted in roll and pitch (yaw 0), and a random action: (q, v, action)."""
    import pinocchio as pin

    q = robot.q_default.copy()
    q[3:7] = pin.Quaternion(pin.rpy.rpyToMatrix(0.15 * rng.standard_normal(), 0.15 * rng.standard_normal(), 0.0)).coeffs()
    q[7:] += 0.3 * rng.standard_normal(robot.n)
    v = np.zeros(robot.nv)
    v[6:] = rng.standard_normal(robot.n)
    return q, v, rng.standard_normal(len(spec.joint_names))


def _tilted_runner_frame(robot, spec, rng, last_action=None):
    """:func:`_deploy_frame` of :func:`_tilted_state` (its action replaced by ``last_action`` where given)."""
    from contactflow.policy import PolicyRunner

    q, v, action = _tilted_state(robot, spec, rng)
    return _deploy_frame(robot, spec, PolicyRunner(spec), q, v, action if last_action is None else last_action)


def _arm_statics(robot, spec):
    from contactflow.lac.train.arm_statics import ArmStatics, arm_statics_params

    return ArmStatics(arm_statics_params(robot, spec, _expert_cfg()))


def test_the_analytic_arm_estimate_is_the_teachers_estimator_on_the_deploy_frame(robot, spec):
    """student.arm_estimate: analytic: from the frame a deploy runner builds alone (arm angles and rates, last action,
    projected gravity), the graph's per-frame estimate is the teacher's arm estimator (``WrenchEstimator.raw``,
    quasi-static) given the robot's state and the PD torque in force, on tilted bases."""
    from contactflow.lac.estimation import WrenchEstimator
    from contactflow.lac.model import LacRobot

    ecfg = _expert_cfg()
    lac = LacRobot(robot)
    arm_links = [lac.link_index(n) for n in ecfg.arm_links]
    est = WrenchEstimator(dataclasses.replace(ecfg.estimator, inertial=False, torso=False), robot, lac, arm_links,
                          [], 1.0 / ecfg.rate_hz)
    mod = _arm_statics(robot, spec)
    rng = np.random.default_rng(3)
    for _ in range(5):
        frame, sensors = _tilted_runner_frame(robot, spec, rng)
        f_arm, c_arm, _ = est.raw(sensors)
        with torch.no_grad():
            got = mod.raw(torch.from_numpy(frame[None].astype(np.float32))).double().numpy()[0]
        assert np.abs(f_arm).max() > 5.0  # a random last action loads the arms: the comparison is not of zeros
        np.testing.assert_allclose(got[:6], f_arm.ravel(), rtol=1e-3, atol=2e-3)  # [N]
        np.testing.assert_allclose(got[6:], c_arm.ravel(), rtol=1e-3, atol=2e-4)  # [N m]


def _teacher_estimator_walk(robot, spec, frames: int = 80, stiffness=None):
    """A slow random walk of tilted states and actions pushed into a deploy runner's history (the first frame
    replicated), with the teacher's quasi-static arm estimator stepped over the same readings: yields ``(n, runner,
    q, estimator, its estimate)`` after each of ``frames`` frames (the state ``q`` of that frame); ``stiffness(n)``
    the stiffness command of frame ``n`` (default :func:`_deploy_frame`'s)."""
    from contactflow.lac.estimation import WrenchEstimator
    from contactflow.lac.model import LacRobot
    from contactflow.policy import PolicyRunner

    ecfg = _expert_cfg()
    lac = LacRobot(robot)
    dt = 1.0 / ecfg.rate_hz
    est = WrenchEstimator(dataclasses.replace(ecfg.estimator, inertial=False, torso=False), robot, lac,
                          [lac.link_index(n) for n in ecfg.arm_links], [], dt)
    rng = np.random.default_rng(4)
    run = PolicyRunner(spec)
    q, v, action = _tilted_state(robot, spec, rng)
    for n in range(1, frames + 1):
        q[7:] += 0.01 * rng.standard_normal(robot.n)
        v[6:] = 0.9 * v[6:] + 0.1 * rng.standard_normal(robot.n)
        action += 0.03 * rng.standard_normal(action.size)
        frame, sensors = _deploy_frame(robot, spec, run, q, v, action,
                                       *(() if stiffness is None else (stiffness(n),)))
        sensors["t"] = np.array([n * dt])
        run.push(frame)
        yield n, run, q, est, est.step(sensors)


def test_the_analytic_arm_estimate_filters_and_warms_up_as_the_teacher_over_the_deploy_history(robot, spec):
    """Over a sequence of states pushed into the deploy runner's 64-frame history (the first frame replicated), the
    graph's estimate is the teacher's estimator stepped over the same readings (quasi-static: its low-pass from
    zero, its warm-up ramp, its soft threshold), to the 16-frame truncation of its low-pass."""
    mod = _arm_statics(robot, spec)
    for n, run, _, _, want in _teacher_estimator_walk(robot, spec):
        if n in (1, 2, 5, 16, 30, 64, 80):
            with torch.no_grad():
                got = mod(torch.from_numpy(run.model_input().reshape(1, 64, -1))).double().numpy()[0]
            ref = np.concatenate([want.f_arm.ravel(), want.c_arm.ravel()])
            scale = np.abs(ref).max()
            assert scale > (0.1 if n == 1 else 1.0)  # loaded arms: not a comparison of zeros
            np.testing.assert_allclose(got, ref, atol=0.01 * scale + 1e-3, err_msg=f"after {n} frames")


def test_the_analytic_arm_feedforward_is_the_teachers_over_the_deploy_history(robot, spec):
    """student.arm_feedforward: analytic: over states pushed into the deploy runner's history, past its 64 frames, the
    graph's feed-forward at the newest frame and at the one before is the teacher's arm torque ``g_arm(q) - J_arm^T
    w_est`` (lac_expert's step 4, arm rows) with the teacher's estimator stepped over the same readings, on tilted
    bases; the one before is what the graph gave at the tick before (so the residual's running sum does not drift:
    exactly, but at the 64th frame, where the history's fill is gone, within 0.1 %), 0 at the first frame (no action
    in force), whose own is the gravity torque."""
    import pinocchio as pin

    from contactflow.lac.model import LacRobot
    from contactflow.lac.train.arm_statics import arm_statics_params

    ecfg = _expert_cfg()
    lac = LacRobot(robot)
    mod = _arm_statics(robot, spec)
    # the arm chains' joints, from the model (the hand joints' supports), in the policy's action order
    chains = [[robot.model.names[j] for j in robot.model.supports[lac.link_joint_ids[lac.link_index(link)]]][-5:]
              for link in ecfg.arm_links]
    cols = np.array([[spec.joint_names.index(name) for name in chain] for chain in chains])
    np.testing.assert_array_equal(arm_statics_params(robot, spec, ecfg).act_col, cols)
    rows = 6 + np.asarray(spec.policy_to_robot)[cols]  # (2, 5) v indices
    data = robot.model.createData()
    want_prev = got_prev = None
    for n, run, q, est, w in _teacher_estimator_walk(robot, spec):
        g = pin.computeGeneralizedGravity(robot.model, data, q)
        want = (g - est.generalized_force(w))[rows]
        with torch.no_grad():
            _, now, prev = (t.double().numpy()[0] for t in
                            mod.feedforward(torch.from_numpy(run.model_input().reshape(1, 64, -1))))
        if n == 1:
            np.testing.assert_array_equal(prev, 0.0)
            np.testing.assert_allclose(now, g[rows], atol=0.05)  # the estimate ramps in from 0
        elif n != 64:
            np.testing.assert_allclose(prev, got_prev, rtol=1e-5, atol=1e-6, err_msg=f"after {n} frames")
        else:  # the fill's last copy leaves: the warm-up's last readings count as ramped in from here (one tick)
            np.testing.assert_allclose(prev, got_prev, atol=1e-3 * np.abs(got_prev).max(), err_msg="after 64 frames")
        if n in (2, 5, 17, 30, 40, 64, 65, 80):
            scale = np.abs(want).max()
            assert scale > 1.0 and np.abs(want - want_prev).max() > 0.05  # loaded arms, a torque that changes
            np.testing.assert_allclose(now, want, atol=0.01 * scale, err_msg=f"after {n} frames")
            np.testing.assert_allclose(prev, want_prev, atol=0.01 * scale, err_msg=f"after {n} frames")
        want_prev, got_prev = want, now


def _teacher_admittance_rest(robot, F, C, K, K_th, ticks, ecfg=None):
    """The teacher's hand admittances (``VirtualAdmittance``, the soft bound) and whole-body IK (``WholeBodyIK``) of
    ``lac_expert``'s steps 2-3 iterated at a constant estimate (``F``, ``C``: (2, 3) world [N], [N m]) from the
    reference posture (the default upper body, upright base) until rest: (the frame's state ``q_ref`` (30,), the
    rest's arm offsets (2, 5) [rad] in chain order, the waist's [rad]). ``ecfg``: the expert's configuration (default
    ``robots/g1/lac_expert.yaml``'s)."""
    import pinocchio as pin

    from contactflow.lac.config import LacConfig
    from contactflow.lac.ik import LinkTarget, WholeBodyIK
    from contactflow.lac.model import LacRobot
    from contactflow.lac.synthesis import VirtualAdmittance

    ecfg = ecfg or _expert_cfg()
    lac = LacRobot(robot)
    m = robot.model
    dt = 1.0 / ecfg.rate_hz
    ik = WholeBodyIK(ecfg.ik, lac, dt, ecfg.base_height_m)
    hands = [lac.link_index(name) for name in ecfg.arm_links]
    pts = {i: lac.applied_point_local(i) for i in hands}
    qu_ref = robot.q_default[lac.upper_q].copy()
    q_ref = lac.reference_configuration(qu_ref, 0.75, 0.0)
    chains = [[j for j in m.supports[lac.link_joint_ids[i]] if j > 1] for i in hands]

    def loaded(i):
        x, R = lac.link_pose(i)
        return x + R @ (pts[i] - lac.link_com_local[i]), R

    adm = {i: VirtualAdmittance(LacConfig(admittance=ecfg.admittance), K, K_th, dt) for i in hands}
    lac.update(q_ref)
    refs = {i: loaded(i) for i in hands}
    q, prev = q_ref.copy(), None
    for _ in range(ticks):
        lac.update(q)
        cur = {i: loaded(i) for i in hands}
        prev = prev or cur
        targets = []
        for n, i in enumerate(hands):
            (x, R), (x0, R0) = cur[i], prev[i]
            xv, Rv, _, _ = adm[i].step(x, R, (x - x0) / dt, pin.log3(R @ R0.T) / dt, *refs[i], F[n], C[n])
            dx = xv - refs[i][0]
            nd, dm = np.linalg.norm(dx), ecfg.arm_max_displacement_m
            if nd > 1e-9:
                xv = refs[i][0] + dx * (dm * np.tanh(nd / dm) / nd)
            targets.append(LinkTarget(i, xv, Rv, m.inertias[lac.link_joint_ids[i]].mass, pts[i]))
        prev = cur
        res = ik.step(q, targets, qu_ref, q_ref[:3], np.eye(3), updated=True)
        assert res.qp.found
        q = res.q
    dq = np.array([[q[m.joints[j].idx_q] - q_ref[m.joints[j].idx_q] for j in c[1:]] for c in chains])
    w = m.joints[chains[0][0]].idx_q
    return q_ref, dq, q[w] - q_ref[w]


def _admittance_at(robot, spec, mod, q, est, k):
    """``mod.admittance_step`` at the deploy frame of state ``q`` (30,) at rest, for the estimate ``est`` (12,) and
    the hands' stiffness ``k`` (2, 2) given: (B=1 stripped) arm offsets (2, 5) [rad]."""
    from contactflow.policy import PolicyRunner

    v = np.zeros(robot.nv)
    frame, _ = _deploy_frame(robot, spec, PolicyRunner(spec), q, v, np.zeros(len(spec.joint_names)))
    x = torch.from_numpy(frame[None]).to(next(mod.buffers()).dtype)
    with torch.no_grad():
        _, _, Jp_T, Jr_T, Rw, Jw_T = mod._statics(x)
        F, C = _in_base(torch.as_tensor(np.asarray(est, float)[None], dtype=x.dtype), Rw)
        kk = torch.as_tensor(np.asarray(k, float)[None], dtype=x.dtype)
        return mod.admittance_step(F, C, kk, Jp_T, Jr_T, Jw_T).double().numpy()[0]


def _in_base(est, Rw):
    """The hands' forces and couples (B, 2, 3) each of an estimate (B, 12) in yaw-free world axes, rotated into the
    base frame by ``Rw`` (B, 1, 3, 3) transposed."""
    RT = Rw.transpose(-1, -2)
    return tuple((RT @ est[:, 6 * i:6 * i + 6].reshape(len(est), 2, 3, 1)).squeeze(-1) for i in range(2))


@pytest.mark.parametrize("load", ["force", "couple", "posture"])
def test_the_admittance_offset_is_the_teachers_rest_under_a_small_load(robot, spec, load):
    """student.arm_feedforward: admittance: at the reference posture, under a small constant estimate (a force on the
    left hand at K = 100 N/m, ~0.5 mm of displacement, or a couple at K_theta = 10 N m/rad, ~1 mrad), the graph's arm
    offsets are where the teacher's own admittances and IK (lac_expert steps 2-3, iterated to rest) take the arms,
    within 10 % (the right arm moves through the waist). Linearised: at the default posture the arms are near a
    singularity and the teacher's rest departs from it fast (its waist per newton of this force at 1 cm of displacement
    is 0.43 times the linear one, and turns sign by 5 cm), so the comparison holds for small loads only. ``posture``:
    the force with the IK's posture weight 100 times the teacher's, where the hand's target weight (its body's mass
    times ``w_contact_pos``) no longer dominates the posture's and the hand yields a fraction of ``F / K``."""
    Z = np.zeros(3)
    F, C = (np.array([[0.03, -0.02, -0.04], Z]), np.zeros((2, 3))) if load != "couple" else \
        (np.zeros((2, 3)), np.array([[0.01, 0.0, 0.0], Z]))
    K, K_th = 100.0, (10.0 if load == "couple" else 30.0)
    ecfg = _expert_cfg()
    if load == "posture":
        ecfg = dataclasses.replace(ecfg, ik=dataclasses.replace(ecfg.ik, w_posture=100.0 * ecfg.ik.w_posture))
    q_ref, want, _ = _teacher_admittance_rest(robot, F, C, K, K_th, ticks=1500, ecfg=ecfg)
    from contactflow.lac.train.arm_statics import ArmStatics, arm_statics_params

    got = _admittance_at(robot, spec, ArmStatics(arm_statics_params(robot, spec, ecfg)).double(), q_ref,
                         np.concatenate([F.ravel(), C.ravel()]), [[K, K_th], [K, K_th]])
    assert np.abs(want[0]).max() > 1e-4  # the loaded arm moves: not a comparison of zeros
    np.testing.assert_allclose(got, want, atol=0.1 * np.abs(want).max())
    if load == "posture":  # the posture's pull is felt: the hand yields less than with the teacher's weights
        _, free, _ = _teacher_admittance_rest(robot, F, C, K, K_th, ticks=1500)
        assert np.abs(want[0]).max() < 0.8 * np.abs(free[0]).max()


def test_the_admittance_offset_keeps_the_teachers_soft_bound_and_reads_each_hands_stiffness(robot, spec):
    """The admittance's force enters as the one whose linear rest is the teacher's bounded rest ``u`` (``K u + (D /
    dt) (d_max atanh(u / d_max) - u) = |F|``; 0.16 m for 5 N at K = 10 N/m, where ``F / K`` is 0.5 m): the offsets
    are those of a load 50 times smaller times the ratio of the two rests; ``feedforward(admittance=True)`` adds ``Kp dq`` of each hand's own ``[K, K_theta]``
    read from the frame's stiffness command (left 40 N/m and 15 N m/rad, right 300 and 80)."""
    from scipy.optimize import brentq

    from contactflow.lac.train.arm_statics import ArmStatics, arm_statics_params

    ecfg = _expert_cfg()
    p = arm_statics_params(robot, spec, ecfg)
    q_ref, _, _ = _teacher_admittance_rest(robot, np.zeros((2, 3)), np.zeros((2, 3)), 100.0, 30.0, ticks=1)
    F = np.array([5.0, 0.0, 0.0])
    d_max, c = p.max_displacement_m, p.bound_damping
    def rest(f):  # the teacher's bounded rest displacement of a free hand under |F| = f at K = 10 N/m [m]
        return brentq(lambda u: 10.0 * u + c * (d_max * np.arctanh(u / d_max) - u) - f, 0.0, d_max * (1 - 1e-12))

    u = rest(5.0)
    assert 0.1 < u < 0.2
    free = ArmStatics(dataclasses.replace(p, a_ori=0.0, w_posture=1e-9)).double()
    dq = _admittance_at(robot, spec, free, q_ref, np.concatenate([F, np.zeros(9)]), [[10.0, 30.0], [10.0, 30.0]])
    small = _admittance_at(robot, spec, free, q_ref, np.concatenate([F / 50.0, np.zeros(9)]), [[10.0, 30.0], [10.0, 30.0]])
    # the offsets are linear in the force that enters, F K u / |F|: they scale by u(5 N) / u(0.1 N) (~1 cm) between the two
    np.testing.assert_allclose(dq, small * (u / rest(0.1)), rtol=1e-4, atol=1e-7)
    # each hand's stiffness from the frame: the walk's command holds left [40, 15], right [300, 80]
    mod = _arm_statics(robot, spec)
    frame, _ = _tilted_runner_frame(robot, spec, np.random.default_rng(13))
    frames = torch.from_numpy(np.repeat(frame[None, None], 64, axis=1).astype(np.float32))
    frames[0, :-1] += 1e-3  # not an episode's first frame
    with torch.no_grad():
        est, with_adm, _ = mod.feedforward(frames, admittance=True)
        _, without, _ = mod.feedforward(frames)
        _, _, Jp_T, Jr_T, Rw, Jw_T = mod._statics(frames[:, -1])
        want = mod.kp * mod.admittance_step(*_in_base(est, Rw), torch.tensor([[[40.0, 15.0], [300.0, 80.0]]]), Jp_T, Jr_T,
                                            Jw_T)
    assert np.abs(want.numpy()).max() > 0.05
    np.testing.assert_allclose((with_adm - without).numpy(), want.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("lag", [False, True])
def test_the_admittance_offset_telescopes_over_the_deploy_history(robot, spec, lag):
    """With ``admittance`` (``admittance_lag``) the offset the graph gives for the frame before is what it gave at the
    tick before, with the stiffness command changing along the walk (so a residual's running sum does not drift), 0 at
    an episode's first frame, and it differs from the feed-forward alone."""
    mod = _arm_statics(robot, spec)
    got_prev = None

    def stiffness(n):  # a command that changes every few frames
        return np.array([40.0 + 5.0 * (n // 3), 300.0 - 3.0 * n, 120.0, 15.0 + 0.5 * n, 80.0 - (n // 4)])

    for n, run, _, _, _ in _teacher_estimator_walk(robot, spec, frames=70, stiffness=stiffness):
        x = torch.from_numpy(run.model_input().reshape(1, 64, -1))
        with torch.no_grad():
            _, now, prev = (t.double().numpy()[0] for t in mod.feedforward(x, admittance=True, lag=lag))
            _, ff, _ = (t.double().numpy()[0] for t in mod.feedforward(x))
        if n == 1:
            np.testing.assert_array_equal(prev, 0.0)
        elif n != 64:  # the fill's last copy leaves (the lag: the older frames' warm-up too; feedforward's docstring)
            np.testing.assert_allclose(prev, got_prev, rtol=1e-5, atol=1e-5, err_msg=f"after {n} frames")
        if n in (5, 30, 70):
            assert np.abs(now - ff).max() > 0.05  # the admittance's part is there
        got_prev = now


def test_the_estimate_at_each_frame_of_the_history_is_that_of_the_history_up_to_it(robot, spec):
    """``admittance_lag`` needs the estimate at each of the history's newest 49 frames: each is what the graph gives for
    the history cut after that frame (the fill and the warm-up counted as there), the newest and the one before are the
    estimates of ``admittance``, and the offsets of the two agree where the estimate has been constant (the teacher's
    admittance at rest)."""
    mod = _arm_statics(robot, spec)
    for n, run, _, _, _ in _teacher_estimator_walk(robot, spec, frames=70):
        if n not in (3, 20, 63, 70):
            continue
        x = torch.from_numpy(run.model_input().reshape(1, 64, -1))
        with torch.no_grad():
            wr = mod.raw(x[0]).reshape(1, 64, 12)
            seq = mod._estimate(wr, x, 49)
            for e in (15, 16, 40, 62, 63):
                np.testing.assert_allclose(seq[0, e - 15].numpy(), mod(x[:, :e + 1]).numpy()[0], rtol=1e-5, atol=1e-5,
                                           err_msg=f"after {n} frames, the end {e}")
            est0, _, _ = mod.feedforward(x, admittance=True)
            est1, _, _ = mod.feedforward(x, admittance=True, lag=True)
        np.testing.assert_allclose(est1.numpy(), est0.numpy(), rtol=1e-5, atol=1e-5)
    # a constant estimate: the lagged offset is the rest's (the same frame repeated but for the fill's mark)
    frame, _ = _tilted_runner_frame(robot, spec, np.random.default_rng(13))
    frames = torch.from_numpy(np.repeat(frame[None, None], 64, axis=1).astype(np.float32))
    frames[0, 0] += 1e-3  # no fill: every reading weighs fully
    with torch.no_grad():
        est, rest, rest_prev = mod.feedforward(frames, admittance=True)
        _, lag, lag_prev = mod.feedforward(frames, admittance=True, lag=True)
        _, ff, _ = mod.feedforward(frames)
    assert np.abs(est.numpy()).max() > 1.0 and np.abs((rest - ff).numpy()).max() > 0.05
    np.testing.assert_allclose(lag.numpy(), rest.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(lag_prev.numpy(), rest_prev.numpy(), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="lag acts on the admittance's offset"):
        mod.feedforward(frames, lag=True)


def test_the_admittance_lag_follows_the_teachers_admittance_through_a_step(robot, spec):
    """``ArmStatics.lagged`` moves a hand's force (couple) to a step of the estimate as the teacher's virtual admittance
    (``VirtualAdmittance``, LAC eqs. (7)-(10), its pose fed back as the IK's) moves the hand to ``F / K``: within 0.01
    of the step at K = 100-500 N/m (N m/rad) at every frame of the 48-frame window; at K = 10 the window ends on the
    teacher's slow tail (0.69 of the step after 0.96 s), so the lag reaches the step there, ahead of it but not behind;
    a constant estimate passes unchanged; each hand and channel takes its own stiffness."""
    import pinocchio as pin

    from contactflow.lac.config import LacConfig
    from contactflow.lac.synthesis import VirtualAdmittance

    mod = _arm_statics(robot, spec)
    n_w, dt = 48, 0.02
    for K in (10.0, 100.0, 500.0):
        va = VirtualAdmittance(LacConfig(admittance=_expert_cfg().admittance), K, K, dt)
        x, x_prev, R, R_prev = np.zeros(3), np.zeros(3), np.eye(3), np.eye(3)
        want = []
        for _ in range(n_w):
            x_vir, R_vir, _, _ = va.step(x, R, (x - x_prev) / dt, pin.log3(R @ R_prev.T) / dt, np.zeros(3), np.eye(3),
                                         np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0]))
            x_prev, x, R_prev, R = x, x_vir, R, R_vir
            want.append([x[0] * K, pin.log3(R)[2] * K])
        want = np.array(want)
        est = torch.zeros(n_w, n_w, 12)
        for i in range(n_w):  # row i: the step i + 1 frames ago (the newest i + 1 estimates hold it)
            est[i, n_w - 1 - i:, 0] = 1.0  # the left hand's force, x
            est[i, n_w - 1 - i:, 8] = 1.0  # its couple, z
        with torch.no_grad():
            got = mod.lagged(est, torch.full((n_w, 2, 2), K)).numpy()[:, [0, 8]]
        if K >= 100.0:
            np.testing.assert_allclose(got, want, atol=0.01, err_msg=f"K = {K}")
        else:
            assert (got >= want - 0.02).all() and want[-1, 0] < 0.75
        np.testing.assert_allclose(got[-1], 1.0, rtol=1e-5)
        assert got[0, 0] < 0.1 + 0.6 * (K > 100)  # a lag, not a copy of the newest estimate
    # constant: unchanged; the right hand's force at K = 10 against the left's at 500 over the same step
    const = torch.from_numpy(np.random.default_rng(3).standard_normal((1, 1, 12)).astype(np.float32)).repeat(1, n_w, 1)
    with torch.no_grad():
        np.testing.assert_allclose(mod.lagged(const, torch.tensor([[[30.0, 12.0], [250.0, 70.0]]])).numpy(),
                                   const[:, 0].numpy(), rtol=1e-5, atol=1e-6)
        step = torch.zeros(1, n_w, 12)
        step[0, -10:] = 1.0
        y = mod.lagged(step, torch.tensor([[[500.0, 20.0], [10.0, 300.0]]])).numpy()[0]
    # after 0.2 s: the left force (500 N/m) and the right couple (300 N m/rad) near the step, the right force (10 N/m)
    # and the left couple (20 N m/rad) far from it (0.91, 0.84, 0.20, 0.27)
    assert (y[:3] > 0.85).all() and (y[9:] > 0.8).all() and (y[3:6] < 0.25).all() and (y[6:9] < 0.3).all()


def test_the_analytic_arm_estimate_recovers_a_force_held_on_a_hand_at_rest(robot, spec):
    """At rest with the PD torque in force balancing gravity and a known force on the left hand (``tau = g_arm -
    Jp_arm^T F``, made by choosing the last action), the estimate read from the deploy frame is that force, world
    axes, and the right hand's is zero (without the solves' damping, which shrinks what a posture's levers see
    badly: the teacher's, checked against it above)."""
    import pinocchio as pin

    from contactflow.lac.model import LacRobot
    from contactflow.lac.train.arm_statics import ArmStatics, arm_statics_params

    ecfg = _expert_cfg()
    lac = LacRobot(robot)
    mod = ArmStatics(dataclasses.replace(arm_statics_params(robot, spec, ecfg), lever_damping_sq=0.0))
    rng = np.random.default_rng(11)
    frame, sensors = _tilted_runner_frame(robot, spec, rng)
    q = sensors["q"]
    f_true = np.array([4.0, -3.0, -6.0])
    g = pin.computeGeneralizedGravity(robot.model, robot.model.createData(), q)
    lac.update(q)
    pin.updateFramePlacements(robot.model, lac.data)
    i = lac.link_index(ecfg.arm_links[0])
    Jp, _ = lac.link_jacobians(i, lac.point_world(i, lac.applied_point_local(i)))
    tau = g[6:] - Jp[:, 6:].T @ f_true  # the joint torques that hold the force at rest (every joint's row)
    target = q[7:] + tau / spec.kp  # v = 0: the PD target that gives them
    action = (target[spec.policy_to_robot] - spec.default_policy) / spec.scale
    frame, _ = _tilted_runner_frame(robot, spec, np.random.default_rng(11), last_action=action)
    frame[spec.term_slice("joint_vel")] = 0.0
    with torch.no_grad():
        got = mod.raw(torch.from_numpy(frame[None].astype(np.float32))).double().numpy()[0]
    np.testing.assert_allclose(got[:3], f_true, atol=1e-3 * np.linalg.norm(f_true))
    np.testing.assert_allclose(got[3:6], 0.0, atol=1e-3)
    np.testing.assert_allclose(got[6:], 0.0, atol=1e-3)  # a pure force: no couple


def test_analytic_arm_estimate_student_acts_on_it_and_exports(robot, spec, tmp_path):
    """A student with student.arm_estimate: analytic gives its actor the graph's hand forces and couples (in the
    load estimate's units) and its head's torso force; the export (LAC's I/O) is the torch network; the key needs
    wrench_input: wrench."""
    from contactflow.lac.train.dagger import AUX_COUPLE_UNIT_NM, AUX_FORCE_UNIT_N, new_student
    from contactflow.lac.train.student import deploy_metadata, export_onnx
    from contactflow.policy import load_policy_spec

    with pytest.raises(ConfigError, match="arm_estimate: 'analytic' fills .*wrench_input 'none'"):
        load_train_config(None, {"student": {"wrench_input": "none", "arm_estimate": "analytic"},
                                 "optim": {"aux_force_weight": 0.0}})
    with pytest.raises(ConfigError, match="arm_estimate: expected 'learned', 'analytic' or 'analytic_forces'"):
        load_train_config(None, {"student": {"arm_estimate": "model"}})
    cfg = load_train_config(None, {"student": {"wrench_input": "wrench", "arm_estimate": "analytic"},
                                   "optim": {"aux_force_weight": 1.0}})
    model = new_student(cfg, spec)
    rng = np.random.default_rng(5)
    frames = np.stack([_tilted_runner_frame(robot, spec, rng)[0] for _ in range(64)]).astype(np.float32)[None]
    x = torch.from_numpy(frames)
    seen = {}
    model.actor[0].register_forward_hook(lambda m, inp, out: seen.update(h=inp[0].detach().clone()) or None)
    with torch.no_grad():
        a, aux = model.forward_aux(x)
        an = _arm_statics(robot, spec)(x).numpy()[0]
    h = seen["h"].numpy()[0]
    n_in = model.feat_dim + model.encoder[-2].out_features
    np.testing.assert_allclose(h[n_in:n_in + 6], an[:6] / AUX_FORCE_UNIT_N, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h[n_in + 6:n_in + 9], aux.numpy()[0, 6:9], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h[n_in + 9:n_in + 15], an[6:] / AUX_COUPLE_UNIT_NM, rtol=1e-5, atol=1e-6)
    assert np.abs(an).max() > 0.5
    path = export_onnx(model, tmp_path / "analytic.onnx", deploy_metadata(spec))
    loaded = load_policy_spec("lac", robot, model=path)
    np.testing.assert_allclose(loaded.model.run(frames), a.numpy(), atol=1e-4)
    # analytic_forces: the hands' forces from the estimator, their couples from the head
    forces_only = new_student(load_train_config(None, {"student": {"wrench_input": "wrench", "arm_estimate": "analytic_forces"},
                                                       "optim": {"aux_force_weight": 1.0}}), spec)
    forces_only.actor[0].register_forward_hook(lambda m, inp, out: seen.update(h=inp[0].detach().clone()) or None)
    with torch.no_grad():
        _, aux = forces_only.forward_aux(x)
    h = seen["h"].numpy()[0]
    np.testing.assert_allclose(h[n_in:n_in + 6], an[:6] / AUX_FORCE_UNIT_N, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h[n_in + 6:n_in + 15], aux.numpy()[0, 6:15], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["analytic", "admittance", "admittance_lag"])
def test_analytic_arm_feedforward_student_adds_it_to_the_arms_and_exports(robot, spec, tmp_path, mode):
    """A student with student.arm_feedforward: analytic (admittance, admittance_lag) adds the graph's arm feed-forward
    (with the admittance's ``Kp dq``) over Kp (action units) to the arm joints' actions: with residual_action the change since
    the frame before (the initial student, whose arm outputs are zero, then acts ``last_action + (tau_now - tau_prev) /
    (Kp scale)`` on them), without it the feed-forward itself; the other joints take none; the export is the torch
    network; the key needs the arm estimator."""
    from contactflow.lac.train.arm_statics import arm_statics_params
    from contactflow.lac.train.dagger import new_student
    from contactflow.lac.train.student import deploy_metadata, export_onnx
    from contactflow.policy import load_policy_spec

    with pytest.raises(ConfigError, match=f"arm_feedforward: '{mode}' is made of the graph's arm estimator"):
        load_train_config(None, {"student": {"wrench_input": "wrench", "arm_feedforward": mode},
                                 "optim": {"aux_force_weight": 1.0}})
    with pytest.raises(ConfigError, match="arm_feedforward: expected 'none', 'analytic', 'admittance' or 'admittance_lag'"):
        load_train_config(None, {"student": {"arm_feedforward": "model"}})
    keys = {"wrench_input": "wrench", "arm_estimate": "analytic", "arm_feedforward": mode}
    p = arm_statics_params(robot, spec, _expert_cfg())
    cols = p.act_col.reshape(-1)
    # [N m per action unit]: the spec's Kp (robot order) times its action scale (policy order)
    per_unit = np.array([spec.kp[spec.policy_to_robot[c]] * spec.scale[c] for c in cols])
    rng = np.random.default_rng(6)
    frames = np.stack([_tilted_runner_frame(robot, spec, rng)[0] for _ in range(64)]).astype(np.float32)[None]
    x = torch.from_numpy(frames)
    with torch.no_grad():
        _, now, prev = _arm_statics(robot, spec).feedforward(x, admittance=mode != "analytic", lag=mode == "admittance_lag")
    now, prev = now.numpy()[0].reshape(-1), prev.numpy()[0].reshape(-1)
    assert np.abs(now - prev).max() > 0.5  # random frames: a feed-forward that changes
    others = np.setdiff1d(np.arange(len(spec.joint_names)), cols)
    for residual in ("arms", "none"):
        cfg = load_train_config(None, {"student": {**keys, "residual_action": residual}, "optim": {"aux_force_weight": 1.0}})
        model = new_student(cfg, spec)
        plain = new_student(load_train_config(None, {"student": {**keys, "residual_action": residual,
                                                                 "arm_feedforward": "none"},
                                                     "optim": {"aux_force_weight": 1.0}}), spec)
        plain.load_state_dict(model.state_dict())
        with torch.no_grad():
            a, b = model(x).numpy()[0], plain(x).numpy()[0]
        ff = (now - prev if residual == "arms" else now) / per_unit
        np.testing.assert_allclose(a[cols] - b[cols], ff, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(a[others], b[others], rtol=0, atol=1e-6)  # none of the feed-forward (6e-8 seen
        # with admittance_lag: the actor's float32 kernels, not the feed-forward's exact zeros there)
        if residual == "arms":  # the initial student: last action plus the feed-forward's change on the arms
            last = frames[0, -1] @ model.last_action_W.numpy()
            np.testing.assert_allclose(a[cols], last[cols] + ff, rtol=1e-4, atol=1e-5)
            # an episode's first frame (the history all fill): the feed-forward in full (none was in force)
            first = torch.from_numpy(np.repeat(frames[:, -1:], 64, axis=1))
            with torch.no_grad():
                _, now0, _ = _arm_statics(robot, spec).feedforward(first, admittance=mode != "analytic",
                                                                   lag=mode == "admittance_lag")
                a0, b0 = model(first).numpy()[0], plain(first).numpy()[0]
            np.testing.assert_allclose(a0[cols] - b0[cols], now0.numpy()[0].reshape(-1) / per_unit, rtol=1e-4, atol=1e-5)
            assert np.abs(now0.numpy()).max() > 1.0
        path = export_onnx(model, tmp_path / f"ff_{residual}.onnx", deploy_metadata(spec))
        loaded = load_policy_spec("lac", robot, model=path)
        np.testing.assert_allclose(loaded.model.run(frames), a[None], atol=1e-4)
