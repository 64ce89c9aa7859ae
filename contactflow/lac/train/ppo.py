"""The privileged PPO teacher of LAC (LAC §III-C, first stage), on stable-baselines3.

LAC trains a *teacher* with PPO [30] before distilling the deployable student: the actor reads the
10-frame history of the deployable observation ``o_{t-9:t}`` (95 per frame) and a latent
``Z_t`` (64) that a privileged encoder ``E^priv`` computes from the 5-frame history of the
privileged observation ``o^priv_{t-4:t}`` (88 per frame: true base orientation and velocity, the
true external wrenches on the 11 upper-body links, the residuals of the augmented motion); an
asymmetric critic reads the same plus the critic-only stance/walk label ``o^crit_{t-4:t}``. The
rewards track the augmented motion (:mod:`contactflow.lac.train.gym_env`), the wrench strength
follows the curriculum bins of Fig. 2, and the PPO updates use symmetry augmentation [32, 33].

Pieces (each small, each tested in ``tests/test_lac_ppo.py``):

* :class:`TeacherExtractor` -- the encoder: ``[o_{t-9:t}, E^priv(o^priv_{t-4:t})]`` for the
  actor, the same with its own encoder plus the label history for the critic;
* :class:`TeacherPolicy` -- SB3's ``ActorCriticPolicy`` with those two extractors (their feature
  sizes differ, so each head has its own MLP);
* :class:`SymmetricRolloutBuffer` -- every PPO minibatch is doubled with its left/right mirror
  (observation and action mirrored, advantage, return, value and old log-probability kept): the
  data-augmentation form of [32] (Mittal et al., rsl_rl's ``symmetry`` with ``use_data_augmentation``);
* :class:`CurriculumCallback` -- after each rollout, when the mean tracking reward per step of
  the rollout exceeds ``curriculum.unlock_tracking`` (a fraction of its maximum), the next force
  and couple bins are unlocked (LAC: "unlocks the stronger ones step by step as the tracking
  rewards grow sufficiently high");
* :func:`train_teacher` -- builds the vectorised environments, the PPO, trains, checkpoints
  (``model_<steps>.zip`` every ``run.checkpoint_every`` iterations and ``final.zip``), logs
  (``progress.csv``) and resumes (``resume=True`` continues from the newest checkpoint).

Not implemented (said so in the docs): the estimator ``E^est`` regressed in parallel from the
64-frame history and LAC's second stage (here the student is distilled by
:mod:`contactflow.lac.train.dagger` instead), the gait terms of the walk mode and the freshly sampled
velocity command (episodes here are standing ones: ``v_cmd = 0``, as in synthesis).

Every hyper-parameter is in ``robots/g1/lac_ppo.yaml`` (the paper-scale values, and a ``cpu``
profile for tests); :func:`load_ppo_config` reads it (unknown keys are refused).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from contactflow.config import load_config, merge, read_layered
from contactflow.errors import ConfigError

__all__ = [
    "PpoModelCfg", "PpoAlgoCfg", "PpoRunCfg", "PpoConfig", "load_ppo_config", "default_ppo_config_path",
    "TeacherExtractor", "TeacherPolicy", "SymmetricRolloutBuffer", "CurriculumCallback", "make_ppo",
    "train_teacher",
]

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- configuration


@dataclasses.dataclass(frozen=True, kw_only=True)
class PpoModelCfg:
    """Network sizes (LAC §III-C: latent Z in R^64; layer sizes are not given by the paper: the
    usual IsaacLab humanoid sizes are used).

    Attributes:
        latent_dim: size of ``Z_t``. encoder: hidden sizes of ``E^priv``.
        actor, critic: hidden sizes of the two heads. activation: ``elu``, ``relu`` or ``tanh``.
        init_log_std: initial log standard deviation of the Gaussian actions.
    """

    latent_dim: int = 64
    encoder: tuple[int, ...] = (256, 128)
    actor: tuple[int, ...] = (512, 256, 128)
    critic: tuple[int, ...] = (512, 256, 128)
    activation: str = "elu"
    init_log_std: float = 0.0

    def __post_init__(self):
        if self.activation not in ("elu", "relu", "tanh"):
            raise ConfigError(f"model.activation: expected elu, relu or tanh, got {self.activation!r}")
        if self.latent_dim < 1 or not self.actor or not self.critic:
            raise ConfigError("model: latent_dim >= 1 and non-empty actor/critic sizes expected")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PpoAlgoCfg:
    """PPO [30] hyper-parameters (SB3 names). One iteration = ``n_steps`` steps of every
    environment, then ``n_epochs`` passes over the rollout in ``n_minibatches`` minibatches.

    Attributes:
        n_envs: parallel environments (LAC: 4 x 8192 = 32768).
        n_steps: steps per environment per iteration.
        iterations: PPO iterations of the run (LAC's first stage: 20000).
        n_epochs, n_minibatches: update passes and minibatches per pass.
        learning_rate, gamma, gae_lambda, clip_range, ent_coef, vf_coef, max_grad_norm: PPO.
        target_kl: stop an update early above this KL (None: never).
        symmetry: double each minibatch with its mirror (:class:`SymmetricRolloutBuffer`).
    """

    n_envs: int = 32768
    n_steps: int = 24
    iterations: int = 20000
    n_epochs: int = 5
    n_minibatches: int = 4
    learning_rate: float = 1.0e-3
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_range: float = 0.2
    ent_coef: float = 0.005
    vf_coef: float = 1.0
    max_grad_norm: float = 1.0
    target_kl: float | None = 0.02
    symmetry: bool = True

    def __post_init__(self):
        for k in ("n_envs", "n_steps", "iterations", "n_epochs", "n_minibatches"):
            if getattr(self, k) < 1:
                raise ConfigError(f"ppo.{k}: expected >= 1, got {getattr(self, k)}")
        if (self.n_envs * self.n_steps) % self.n_minibatches:
            raise ConfigError(f"ppo: n_envs * n_steps ({self.n_envs * self.n_steps}) must be a multiple of "
                              f"n_minibatches ({self.n_minibatches})")
        if not 0 < self.learning_rate < 1 or not 0 < self.gamma <= 1 or not 0 <= self.gae_lambda <= 1:
            raise ConfigError("ppo: learning_rate in (0, 1), gamma in (0, 1], gae_lambda in [0, 1] expected")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PpoRunCfg:
    """Run settings.

    Attributes:
        seed: seeds torch, the action noise and the environments (env ``i`` gets ``seed + i``).
        device: ``cpu``, ``cuda`` or ``auto``. torch_threads: torch intra-op threads.
        workers: environment processes (1: all environments in this process, SB3 ``DummyVecEnv``;
            > 1: ``SubprocVecEnv`` with ``n_envs / workers`` environments each is NOT done by SB3,
            so each process holds one environment: use ``workers = n_envs`` or 1).
        checkpoint_every: iterations between checkpoints.
    """

    seed: int = 0
    device: str = "auto"
    torch_threads: int = 1
    workers: int = 1
    checkpoint_every: int = 500

    def __post_init__(self):
        if self.device not in ("cpu", "cuda", "auto"):
            raise ConfigError(f"run.device: expected cpu, cuda or auto, got {self.device!r}")
        if self.torch_threads < 1 or self.workers < 1 or self.checkpoint_every < 1:
            raise ConfigError("run: torch_threads, workers and checkpoint_every must be >= 1")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PpoConfig:
    """The whole teacher configuration (``robots/g1/lac_ppo.yaml``).

    Attributes:
        env: the environment's configuration (:class:`contactflow.lac.train.gym_env.TeacherEnvCfg`).
        model, ppo, run: see :class:`PpoModelCfg`, :class:`PpoAlgoCfg`, :class:`PpoRunCfg`.
        source: the file (and profile) it was read from.
    """

    env: Any
    model: PpoModelCfg = PpoModelCfg()
    ppo: PpoAlgoCfg = PpoAlgoCfg()
    run: PpoRunCfg = PpoRunCfg()
    source: str = ""


def default_ppo_config_path() -> Path:
    """``robots/g1/lac_ppo.yaml`` of the repository."""
    from contactflow.robot import robots_dir

    return robots_dir() / "g1" / "lac_ppo.yaml"


def load_ppo_config(path: str | Path | None = None, *, profile: str | None = None,
                    overrides: dict | None = None) -> PpoConfig:
    """Read the teacher configuration: the shipped file (``robots/g1/lac_ppo.yaml``) with ``path``'s
    keys layered over it (a file needs only the keys it changes).

    The file has sections ``env``, ``model``, ``ppo``, ``run`` and ``profiles``; a profile
    (``profiles.<name>``) is merged over the sections (``cpu``: the few-iteration CPU settings of
    the test), then ``overrides`` (same layout).

    Raises:
        ConfigError: unknown section, key or profile, or a value out of range (naming the file).
    """
    from contactflow.lac.train.gym_env import TeacherEnvCfg

    raw, src = read_layered(default_ppo_config_path(), path, "teacher config sections")
    unknown = set(raw) - {"env", "model", "ppo", "run", "profiles"}
    if unknown:
        raise ConfigError(f"{src}: unknown section(s) {sorted(unknown)}; expected env, model, ppo, run, profiles")
    profiles = raw.get("profiles") or {}
    data = {k: v for k, v in raw.items() if k != "profiles"}
    if profile is not None:
        if profile not in profiles:
            raise ConfigError(f"{src}: unknown profile {profile!r}; expected one of {sorted(profiles)}")
        data = merge(data, profiles[profile])
        src += f" (profile {profile})"
    data = merge(data, overrides or {})
    return PpoConfig(
        env=load_config(TeacherEnvCfg, data.get("env"), source=f"{src}:env"),
        model=load_config(PpoModelCfg, data.get("model"), source=f"{src}:model"),
        ppo=load_config(PpoAlgoCfg, data.get("ppo"), source=f"{src}:ppo"),
        run=load_config(PpoRunCfg, data.get("run"), source=f"{src}:run"),
        source=src,
    )


# --------------------------------------------------------------------------- networks (torch, SB3)

# torch and SB3 are the optional ``[train]`` dependencies: imported here, in a module only the
# training path imports.
import torch as th  # noqa: E402
from gymnasium import spaces  # noqa: E402
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.buffers import RolloutBuffer  # noqa: E402
from stable_baselines3.common.callbacks import BaseCallback  # noqa: E402
from stable_baselines3.common.policies import ActorCriticPolicy  # noqa: E402
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor  # noqa: E402
from stable_baselines3.common.type_aliases import RolloutBufferSamples  # noqa: E402

_ACT = {"elu": th.nn.ELU, "relu": th.nn.ReLU, "tanh": th.nn.Tanh}


def _mlp(n_in: int, sizes, act, n_out: int | None = None) -> th.nn.Sequential:
    layers, d = [], n_in
    for h in sizes:
        layers += [th.nn.Linear(d, h), act()]
        d = h
    if n_out is not None:
        layers.append(th.nn.Linear(d, n_out))
    return th.nn.Sequential(*layers)


class TeacherExtractor(BaseFeaturesExtractor):
    """Features of the teacher (LAC §III-C): ``[o_{t-9:t}, Z_t]`` (actor) or
    ``[o_{t-9:t}, Z_t, o^crit_{t-4:t}]`` (critic), ``Z_t = E^priv(o^priv_{t-4:t})``.

    Args:
        observation_space: the flat Box of :class:`contactflow.lac.train.gym_env.LacTeacherEnv`.
        layout: ``{"actor": [start, stop], "priv": [...], "crit": [...]}`` slices of the flat
            observation (the env's ``obs_layout``).
        latent_dim: size of Z. encoder: hidden sizes of E^priv. activation: name.
        critic: True for the critic's extractor (adds the label history).
    """

    def __init__(self, observation_space: spaces.Box, *, layout: dict, latent_dim: int, encoder, activation: str,
                 critic: bool):
        a, p, c = (slice(*layout[k]) for k in ("actor", "priv", "crit"))
        n = (a.stop - a.start) + latent_dim + ((c.stop - c.start) if critic else 0)
        super().__init__(observation_space, features_dim=n)
        self._a, self._p, self._c, self.critic = a, p, c, critic
        self.encoder = _mlp(p.stop - p.start, encoder, _ACT[activation], latent_dim)

    def forward(self, obs: th.Tensor) -> th.Tensor:
        z = self.encoder(obs[:, self._p])
        parts = [obs[:, self._a], z] + ([obs[:, self._c]] if self.critic else [])
        return th.cat(parts, dim=1)


class _Heads(th.nn.Module):
    """Actor and critic MLPs over features of different sizes (SB3's ``MlpExtractor`` interface)."""

    def __init__(self, pi_in: int, vf_in: int, pi_sizes, vf_sizes, act):
        super().__init__()
        self.policy_net = _mlp(pi_in, pi_sizes, act)
        self.value_net = _mlp(vf_in, vf_sizes, act)
        self.latent_dim_pi = pi_sizes[-1]
        self.latent_dim_vf = vf_sizes[-1]

    def forward(self, features):  # not used: the extractors are never shared
        raise RuntimeError("_Heads needs separate actor and critic features")

    def forward_actor(self, features: th.Tensor) -> th.Tensor:
        return self.policy_net(features)

    def forward_critic(self, features: th.Tensor) -> th.Tensor:
        return self.value_net(features)


class TeacherPolicy(ActorCriticPolicy):
    """SB3 actor-critic with the asymmetric :class:`TeacherExtractor` pair (actor first, critic
    second: SB3 builds the actor's extractor first when ``share_features_extractor=False``).

    Extra keyword arguments: ``layout``, ``latent_dim``, ``encoder``, ``activation`` (for the
    extractors) and ``net_arch = {"pi": [...], "vf": [...]}``.
    """

    def __init__(self, *args, layout: dict, latent_dim: int, encoder, activation: str = "elu", **kwargs):
        self._ext_kw = dict(layout=layout, latent_dim=latent_dim, encoder=tuple(encoder), activation=activation)
        self._n_made = 0
        kwargs["share_features_extractor"] = False
        kwargs.setdefault("activation_fn", _ACT[activation])
        super().__init__(*args, **kwargs)

    def make_features_extractor(self) -> BaseFeaturesExtractor:
        ext = TeacherExtractor(self.observation_space, critic=self._n_made > 0, **self._ext_kw)
        self._n_made += 1
        return ext

    def _build_mlp_extractor(self) -> None:
        self.mlp_extractor = _Heads(self.pi_features_extractor.features_dim, self.vf_features_extractor.features_dim,
                                    self.net_arch["pi"], self.net_arch["vf"], self.activation_fn)

    def _get_constructor_parameters(self) -> dict:
        d = super()._get_constructor_parameters()
        d.update(self._ext_kw)
        d.pop("share_features_extractor", None)
        return d


# --------------------------------------------------------------------------- symmetry, curriculum


class SymmetricRolloutBuffer(RolloutBuffer):
    """SB3 rollout buffer whose minibatches are doubled with their left/right mirror ([32, 33]).

    A mirrored sample is ``(M_o o, M_a a)`` with the original sample's value, old
    log-probability, advantage and return (the data-augmentation form of Mittal et al.: the
    mirrored transition is as good as the original one for a symmetric task; the ratio of the
    mirrored sample uses the original old log-probability, as rsl_rl does). Mirrors are signed
    permutations ``x' = sign * x[perm]`` (:func:`contactflow.lac.train.gym_env.teacher_mirror`).

    Args: those of SB3's ``RolloutBuffer`` plus
        obs_perm, obs_sign: (n_obs,) the observation mirror. act_perm, act_sign: (23,) the action mirror.
    """

    def __init__(self, *args, obs_perm, obs_sign, act_perm, act_sign, **kwargs):
        super().__init__(*args, **kwargs)
        self._op = th.as_tensor(np.asarray(obs_perm), dtype=th.long, device=self.device)
        self._os = th.as_tensor(np.asarray(obs_sign), dtype=th.float32, device=self.device)
        self._ap = th.as_tensor(np.asarray(act_perm), dtype=th.long, device=self.device)
        self._as = th.as_tensor(np.asarray(act_sign), dtype=th.float32, device=self.device)

    def _get_samples(self, batch_inds: np.ndarray, env=None) -> RolloutBufferSamples:
        s = super()._get_samples(batch_inds, env)
        obs_m = s.observations[:, self._op] * self._os
        act_m = s.actions[:, self._ap] * self._as

        def two(x):
            return th.cat([x, x], dim=0)

        return RolloutBufferSamples(th.cat([s.observations, obs_m], 0), th.cat([s.actions, act_m], 0),
                                    two(s.old_values), two(s.old_log_prob), two(s.advantages), two(s.returns))


class CurriculumCallback(BaseCallback):
    """Unlock the next curriculum bins when the tracking reward is high (LAC §III-C).

    After each rollout: ``tracking`` = mean over the rollout's steps and environments of the
    env's ``info["tracking"]`` (the tracking reward of the step divided by its maximum, in [0, 1]).
    If it is at least ``threshold``, every environment's level goes up by one
    (``env.set_curriculum_level``), at most ``max_level``. The level and the tracking value are
    logged (``curriculum/level``, ``curriculum/tracking``).
    """

    def __init__(self, threshold: float, max_level: int, start_level: int = 0):
        super().__init__()
        self.threshold, self.max_level, self.level = float(threshold), int(max_level), int(start_level)
        self._sum, self._n = 0.0, 0
        self.history: list[tuple[int, float, int]] = []

    def _on_training_start(self) -> None:
        self.level = int(max(self.training_env.get_attr("curriculum_level")))

    def _on_step(self) -> bool:
        for info in self.locals.get("infos", ()):
            if "tracking" in info:
                self._sum += float(info["tracking"])
                self._n += 1
        return True

    def _on_rollout_end(self) -> None:
        tr = self._sum / max(self._n, 1)
        self._sum, self._n = 0.0, 0
        if tr >= self.threshold and self.level < self.max_level:
            self.level += 1
            self.training_env.env_method("set_curriculum_level", self.level)
        self.history.append((self.num_timesteps, tr, self.level))
        self.logger.record("curriculum/tracking", tr)
        self.logger.record("curriculum/level", self.level)


class _Checkpoints(BaseCallback):
    """Save ``model_<steps>.zip`` every ``every`` iterations, and the curriculum level next to it.

    Saved when the NEXT rollout starts: SB3 calls ``on_rollout_end`` before the update of that
    rollout's data, so a checkpoint taken there would hold the weights from before the update under
    a step counter that already counts the rollout (resume would silently drop one update)."""

    def __init__(self, out: Path, every: int, curriculum: CurriculumCallback):
        super().__init__()
        self.out, self.every, self.cur, self._k = out, every, curriculum, 0

    def _on_step(self) -> bool:
        return True

    def _on_rollout_start(self) -> None:
        if self._k > 0 and self._k % self.every == 0:  # the update of rollout k is done
            save_checkpoint(self.model, self.out / f"model_{self.num_timesteps:012d}.zip", self.cur.level)

    def _on_rollout_end(self) -> None:
        self._k += 1


def save_checkpoint(model: PPO, path: Path, level: int) -> None:
    """Save the PPO (SB3 zip: weights, optimiser, step counter) and ``<path>.json`` (curriculum level)."""
    model.save(path)
    Path(str(path) + ".json").write_text(json.dumps({"num_timesteps": int(model.num_timesteps),
                                                     "curriculum_level": int(level)}))


# --------------------------------------------------------------------------- building and training


def _make_env_fn(cfg: PpoConfig, dataset, rank: int):
    def thunk():
        from contactflow.lac.train.gym_env import LacTeacherEnv

        env = LacTeacherEnv(cfg.env, dataset=dataset)
        env.reset(seed=cfg.run.seed + rank)
        return env

    return thunk


def make_vec_env(cfg: PpoConfig, dataset=None):
    """``cfg.ppo.n_envs`` teacher environments: in this process (``run.workers == 1``) or one per
    process (``SubprocVecEnv``, ``run.workers == n_envs``).

    Raises:
        ConfigError: ``run.workers`` is neither 1 nor ``ppo.n_envs``.
    """
    from stable_baselines3.common.vec_env import VecMonitor

    return VecMonitor(_make_vec_env(cfg, dataset))  # episode return and length in progress.csv


def _make_vec_env(cfg: PpoConfig, dataset):
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    n = cfg.ppo.n_envs
    if cfg.run.workers == 1:
        from contactflow.lac.dataset import read_episodes

        if n > 256:
            log.warning("%s: %d MuJoCo environments in one process (LAC's GPU-simulator scale); with the CPU "
                        "physics use a profile with one process per core (--profile workstation)", cfg.source, n)

        if dataset is None and cfg.env.dataset is not None:
            dataset = cfg.env.dataset
        if isinstance(dataset, (str, Path)):
            dataset = read_episodes(dataset)  # once for all the environments of this process
        return DummyVecEnv([_make_env_fn(cfg, dataset, i) for i in range(n)])
    fns = [_make_env_fn(cfg, dataset, i) for i in range(n)]
    if cfg.run.workers != n:
        raise ConfigError(f"{cfg.source}: run.workers must be 1 or ppo.n_envs ({n}), got {cfg.run.workers}")
    return SubprocVecEnv(fns, start_method="spawn")


def make_ppo(cfg: PpoConfig, venv) -> PPO:
    """The SB3 PPO of ``cfg`` on ``venv`` (teacher policy, symmetric buffer if ``ppo.symmetry``)."""
    from contactflow.lac.train.gym_env import teacher_mirror

    p, m = cfg.ppo, cfg.model
    th.set_num_threads(cfg.run.torch_threads)
    layout = venv.get_attr("obs_layout", [0])[0]
    buf_cls, buf_kw = None, None
    if p.symmetry:
        env_cfg = venv.get_attr("cfg", [0])[0]
        (op, os_), (ap, as_) = teacher_mirror(env_cfg)
        buf_cls = SymmetricRolloutBuffer
        buf_kw = dict(obs_perm=op, obs_sign=os_, act_perm=ap, act_sign=as_)
    return PPO(
        TeacherPolicy,
        venv,
        learning_rate=p.learning_rate,
        n_steps=p.n_steps,
        batch_size=p.n_envs * p.n_steps // p.n_minibatches,
        n_epochs=p.n_epochs,
        gamma=p.gamma,
        gae_lambda=p.gae_lambda,
        clip_range=p.clip_range,
        ent_coef=p.ent_coef,
        vf_coef=p.vf_coef,
        max_grad_norm=p.max_grad_norm,
        target_kl=p.target_kl,
        rollout_buffer_class=buf_cls,
        rollout_buffer_kwargs=buf_kw,
        policy_kwargs=dict(layout=layout, latent_dim=m.latent_dim, encoder=m.encoder, activation=m.activation,
                           net_arch=dict(pi=list(m.actor), vf=list(m.critic)), log_std_init=m.init_log_std),
        seed=cfg.run.seed,
        device=cfg.run.device,
        verbose=0,
    )


def _latest_checkpoint(out: Path) -> Path | None:
    """The checkpoint of ``out`` (``model_*.zip`` or ``final.zip``) with the most steps (``final.zip``
    on a tie: it holds every update)."""
    best, best_n = None, -1
    for ck in [*sorted(out.glob("model_*.zip")), out / "final.zip"]:
        meta = Path(str(ck) + ".json")
        if ck.is_file() and meta.is_file():
            n = int(json.loads(meta.read_text())["num_timesteps"])
            if n > best_n or (n == best_n and ck.name == "final.zip"):
                best, best_n = ck, n
    return best


def train_teacher(cfg: PpoConfig, out: str | Path, *, dataset=None, iterations: int | None = None,
                  resume: bool = False, progress: bool = True) -> dict:
    """Train the privileged teacher with PPO.

    Args:
        cfg: the configuration (:func:`load_ppo_config`).
        out: run folder (created): ``config.json``, ``progress.csv`` (SB3 logger),
            ``model_<steps>.zip`` checkpoints, ``final.zip``, ``summary.json``.
        dataset: augmentation episodes (rows of :func:`contactflow.lac.dataset.read_episodes`), a
            dataset directory, or None (the env's ``dataset`` setting).
        iterations: overrides ``ppo.iterations``.
        resume: continue from the newest checkpoint of ``out`` (same config expected): weights,
            optimiser state, step counter and curriculum level; the environments start new
            episodes and the random streams restart from the seed, so a resumed run is not
            bit-identical to an uninterrupted one.
        progress: show a progress bar (tqdm) over the environment steps.

    Returns:
        Summary: ``iterations``, ``env_steps``, ``wall_s``, ``env_steps_per_s``, ``update_s_per_iter``
        (mean time of the PPO update per iteration), ``curriculum`` (final level), ``final``
        (path of ``final.zip``).
    """
    from stable_baselines3.common.logger import configure

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    n_it = cfg.ppo.iterations if iterations is None else int(iterations)
    venv = make_vec_env(cfg, dataset)
    model = make_ppo(cfg, venv)
    cur = CurriculumCallback(cfg.env.curriculum.unlock_tracking, cfg.env.curriculum.max_level)
    done_steps = 0
    if resume and (ck := _latest_checkpoint(out)) is not None:
        model.set_parameters(str(ck), exact_match=True, device=model.device)
        meta = json.loads(Path(str(ck) + ".json").read_text())
        done_steps = int(meta["num_timesteps"])
        model.num_timesteps = done_steps
        venv.env_method("set_curriculum_level", int(meta["curriculum_level"]))
        log.info("resumed from %s (%d steps, curriculum level %d)", ck, done_steps, meta["curriculum_level"])
    (out / "config.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=1, default=str))
    model.set_logger(configure(str(out), ["csv"]))
    timer = _UpdateTimer()
    total = n_it * cfg.ppo.n_envs * cfg.ppo.n_steps
    remaining = max(total - done_steps, 0)
    t0 = time.perf_counter()
    if remaining:
        cbs = [cur, _Checkpoints(out, cfg.run.checkpoint_every, cur), timer]
        if progress:
            cbs.append(_Progress(total, done_steps))
        model.learn(remaining, callback=cbs, reset_num_timesteps=not resume)
    wall = time.perf_counter() - t0
    final = out / "final.zip"
    save_checkpoint(model, final, cur.level)
    venv.close()
    steps = model.num_timesteps - done_steps
    summary = {
        "iterations": n_it,
        "env_steps": int(steps),
        "wall_s": wall,
        "env_steps_per_s": steps / wall if wall > 0 else float("nan"),
        "update_s_per_iter": float(np.mean(timer.update_s)) if timer.update_s else float("nan"),
        "rollout_s_per_iter": float(np.mean(timer.rollout_s)) if timer.rollout_s else float("nan"),
        "curriculum": cur.level,
        "curriculum_history": cur.history,
        "final": str(final),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


class _Progress(BaseCallback):
    """A tqdm bar over the run's environment steps (tqdm is a core dependency; SB3's own bar needs rich)."""

    def __init__(self, total: int, done: int):
        super().__init__()
        self.total, self.done, self.bar = total, done, None

    def _on_training_start(self) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=self.total, initial=self.done, unit="step", desc="PPO teacher")

    def _on_rollout_end(self) -> None:
        self.bar.update(self.num_timesteps - self.bar.n)
        self.bar.set_postfix(level=self.model.logger.name_to_value.get("curriculum/level", 0))

    def _on_training_end(self) -> None:
        self.bar.update(self.num_timesteps - self.bar.n)
        self.bar.close()

    def _on_step(self) -> bool:
        return True


class _UpdateTimer(BaseCallback):
    """Wall time of each rollout (collection) and of each PPO update (between two rollouts)."""

    def __init__(self):
        super().__init__()
        self.rollout_s: list[float] = []
        self.update_s: list[float] = []
        self._t_start = self._t_end = None

    def _on_rollout_start(self) -> None:
        now = time.perf_counter()
        if self._t_end is not None:
            self.update_s.append(now - self._t_end)
        self._t_start = now

    def _on_rollout_end(self) -> None:
        self._t_end = time.perf_counter()
        self.rollout_s.append(self._t_end - self._t_start)

    def _on_training_end(self) -> None:
        if self._t_end is not None:
            self.update_s.append(time.perf_counter() - self._t_end)

    def _on_step(self) -> bool:
        return True
