"""PPO teacher cost on this machine: environment steps per second on one core and the PPO update.

Run: ``OMP_NUM_THREADS=1 python benchmarks/bench_lac_ppo.py [--steps 600] [--batch 4096] [--json OUT]``
(about a minute; needs the ``[train]`` extra). One run measures, with torch on one thread:

1. environment: ``--steps`` ticks of the teacher env (:class:`LacTeacherEnv`, the ``robots/g1/lac_ppo.yaml``
   episode settings) under the model-based expert's actions (a standing robot, as a trained teacher
   would be), against the same ticks of the bare training episode (:class:`LacTrainEnv`: simulator +
   deploy observation) as the baseline: ticks/s of each and the ratio (the teacher's privileged frame,
   targets and reward are the difference). The expert's own time is not counted.
2. networks at the paper's sizes (``model`` section): the policy's forward pass for acting, per
   sample, at batch 1 and at batch 256; one PPO minibatch step (``evaluate_actions`` + backward +
   Adam) on ``--batch`` samples doubled by the symmetry augmentation, per sample.
3. the extrapolation to the config's paper-scale run: env steps = iterations x n_envs x n_steps and
   sample-gradient evaluations = that x n_epochs x 2 (symmetry), in core-hours at the measured rates.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=600, help="environment ticks per measurement")
    ap.add_argument("--batch", type=int, default=4096, help="PPO minibatch (before the symmetry doubling)")
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args(argv)

    import torch as th

    th.set_num_threads(1)
    from contactflow.lac.augment import augment
    from contactflow.lac.dataset import read_episodes
    from contactflow.lac.expert import load_expert_config
    from contactflow.lac.train.gym_env import LacTeacherEnv
    from contactflow.lac.train.ppo import load_ppo_config, make_ppo, make_vec_env
    from contactflow.lac.train.teacher import ExpertTeacher

    import tempfile

    d = tempfile.mkdtemp(prefix="bench_lac_ppo_")
    augment(d, 2, seed=0, workers=1, progress=False)
    rows = read_episodes(d)
    cfg = load_ppo_config(overrides={"ppo": {"n_envs": 2, "n_steps": 16, "n_minibatches": 2}, "run": {"device": "cpu"}})
    env = LacTeacherEnv(cfg.env, dataset=rows)
    te = env.train_env
    teacher = ExpertTeacher(load_expert_config(), env.lac.robot, env.spec)

    # ---- 1. environment: record the expert's actions once, replay them through both envs
    def expert_actions(n):
        acts, k, seed = [], 0, 0
        env.reset(seed=seed)
        pr = te.privileged()
        teacher.reset(pr["sensors"])
        while k < n:
            a, _ = teacher.label(pr["sensors"], pr["command"])
            a = np.clip(a, env.action_space.low, env.action_space.high)
            acts.append((seed, a))
            *_, term, trunc, _ = env.step(a)
            pr = te.privileged()
            k += 1
            if term or trunc:
                seed += 1
                env.reset(seed=seed)
                pr = te.privileged()
                teacher.reset(pr["sensors"])
        return acts

    acts = expert_actions(args.steps)

    def run_teacher():
        cur = None
        t0 = time.perf_counter()
        for seed, a in acts:
            if seed != cur:
                env.reset(seed=seed)
                cur = seed
            env.step(a)
        return time.perf_counter() - t0

    def run_bare():
        cur = None
        t0 = time.perf_counter()
        for seed, a in acts:
            if seed != cur:
                env.reset(seed=seed)  # same episode draw, then the bare env steps
                cur = seed
            te.step(a)
        return time.perf_counter() - t0

    t_teacher = min(run_teacher() for _ in range(2))
    t_bare = min(run_bare() for _ in range(2))
    n = len(acts)

    # ---- 2. networks at the paper's sizes
    venv = make_vec_env(cfg, rows)
    model = make_ppo(cfg, venv)
    pol = model.policy
    obs_dim = env.n_obs

    def fwd(b, reps):
        x = th.randn(b, obs_dim)
        with th.no_grad():
            pol(x)
            t0 = time.perf_counter()
            for _ in range(reps):
                pol(x)
        return (time.perf_counter() - t0) / reps / b

    fwd1, fwd256 = fwd(1, 200), fwd(256, 20)
    B = 2 * args.batch
    x, a = th.randn(B, obs_dim), th.randn(B, 23)
    opt = pol.optimizer

    def update():
        values, logp, ent = pol.evaluate_actions(x, a)
        loss = -(logp.mean()) + values.pow(2).mean() - 0.005 * ent.mean()
        opt.zero_grad()
        loss.backward()
        th.nn.utils.clip_grad_norm_(pol.parameters(), 1.0)
        opt.step()

    update()
    t0 = time.perf_counter()
    reps = 3
    for _ in range(reps):
        update()
    upd = (time.perf_counter() - t0) / reps / B
    venv.close()

    # ---- 3. paper-scale extrapolation
    full = load_ppo_config()
    p = full.ppo
    steps = p.iterations * p.n_envs * p.n_steps
    grads = steps * p.n_epochs * (2 if p.symmetry else 1)
    env_rate = n / t_teacher
    res = {
        "machine": f"{platform.processor() or platform.machine()}, torch {th.__version__}, 1 thread",
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "load_average_1min": os.getloadavg()[0],
        "cpu_count": os.cpu_count(),
        "env_ticks": n,
        "teacher_env_ticks_per_s": env_rate,
        "bare_env_ticks_per_s": n / t_bare,
        "teacher_over_bare_time_ratio": t_teacher / t_bare,
        "policy_forward_s_per_sample_batch1": fwd1,
        "policy_forward_s_per_sample_batch256": fwd256,
        "ppo_update_s_per_sample": upd,
        "ppo_minibatch_samples": B,
        "paper_env_steps": steps,
        "paper_sample_gradients": grads,
        "paper_env_core_hours": steps / env_rate / 3600,
        "paper_acting_core_hours": steps * fwd256 / 3600,
        "paper_update_core_hours": grads * upd / 3600,
        "paper_iteration_core_s": (p.n_envs * p.n_steps) * (1 / env_rate + fwd256)
        + p.n_envs * p.n_steps * p.n_epochs * (2 if p.symmetry else 1) * upd,
    }
    for k, v in res.items():
        print(f"{k}: {v:.4g}" if isinstance(v, float) else f"{k}: {v}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return res


if __name__ == "__main__":
    main()
