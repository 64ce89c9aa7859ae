"""Gymnasium environment of LAC's privileged PPO teacher (LAC §III-C), over :class:`LacTrainEnv`.

The episode, the simulation, the deployable observation and the action map are those of
:class:`contactflow.lac.train.env.LacTrainEnv` (the G1-23 PD simulator at 50 Hz; the 95-D frame
from the ``lac_policy`` runner's own code; a dataset row's wrench events on the LAC links). This
module adds what only the PPO teacher needs:

Observation (flat ``Box``, float32; slices in :attr:`LacTeacherEnv.obs_layout`):

* ``actor`` -- ``o_{t-9:t}``: the newest ``actor_history`` deployable frames (10 x 95, oldest
  first), with the 5 RAW stiffness values replaced by their natural log (LAC takes the log inside
  its graph; the network sees log K here);
* ``priv`` -- ``o^priv_{t-4:t}``: ``priv_history`` privileged frames (5 x 88, oldest first, the
  first frame replicated), each ``[R_b (4, quaternion xyzw), pdot_b (3, base frame) [m/s],
  {f_j, tau_j} (11 x 6, base frame, ``wrench_obs_scale`` x [N, N m]), v_res (3: v_x, v_y [m/s],
  yaw rate [rad/s]), h_res (1) [m], q_res (11) [rad]]`` = 4 + 3 + 66 + 3 + 1 + 11 = 88 (LAC's
  88-D privileged observation). The wrenches are the TRUE ones the simulator applied over the
  last tick (``xfrc_applied``), rotated into the base frame;
* ``crit`` -- ``o^crit_{t-4:t}``: the stance (0) / walk (1) label of the same 5 ticks: walk when
  a component of ``v_tar = v_cmd + v_res`` exceeds ``walk_threshold`` (LAC: 0.1).

Residuals and targets (command-residual form, LAC §III-C): ``q_res = s (q_aug - q_ref)``,
``h_res = s (h_aug - h_cmd)``, ``v_res = s v_aug`` from the dataset row at the episode time,
with ``s`` the mean applied/dataset wrench ratio of the episode's loaded links (1 with
``episode.force_scale = couple_scale = 1`` and no caps hit, the paper's setting; below 1 the
augmented deviation is scaled linearly, an approximation: the admittance is linear in the wrench,
the IK nearly so). Targets ``q_aug = q_ref + q_res``, ``h_aug = h_cmd + h_res``,
``v_tar = v_cmd + v_res`` (``v_cmd = 0``: the episodes are standing ones, as in synthesis).

Reward (per 50 Hz tick; weights and widths in :class:`RewardCfg`), LAC §III-C "Rewards":

* tracking (implemented as stated): Gaussian kernels ``exp(-|e|^2 / sigma^2)`` on the base velocity
  ``(v_x, v_y, yaw rate)`` against ``v_tar`` (zeroed in stance), the base height against
  ``h_aug`` and each of the eleven upper-body joints against ``q_aug`` (their mean);
* gait: in stance, both feet planted (the fraction of soles with a normal force above
  ``contact_force_n``). The walk-mode gait terms (stride period, swing height, contact schedule,
  foot placement, from FALCON [12]) are NOT implemented: the episodes here do not walk;
* auxiliary: base orientation ``-|g_xy|^2``, energy ``-sum |tau qdot|``, action smoothness
  ``-|a_t - a_{t-1}|^2``, joint-limit proximity ``-sum max(0, |q - mid| - soft half-range)``,
  survival bonus, and a termination penalty on a fall.

``info["tracking"]`` is the tracking reward divided by its maximum (in [0, 1]); the curriculum
reads it. Curriculum (LAC §III-C): level ``L`` admits dataset rows whose ``curriculum_bin`` is at
most ``L`` (force bins 0..10, couple bins 0..7 of Fig. 2), :meth:`LacTeacherEnv.set_curriculum_level`.
Episode sampling (LAC §III-C): rows whose rarest loaded link has few events in the dataset are drawn
more often, mixed with a uniform floor (:meth:`LacTeacherEnv.row_probabilities`).

Symmetry: :func:`teacher_mirror` gives the left/right mirror of the observation and of the action
as signed permutations (sagittal-plane reflection: left and right joints, links and stiffness
commands swapped; roll and yaw joint angles, the y components of polar vectors and the x, z
components of axial ones negated).
"""

from __future__ import annotations

import dataclasses
import functools
from collections import deque
from pathlib import Path
from typing import Mapping, Sequence

import gymnasium as gym
import numpy as np

from contactflow.errors import ConfigError
from contactflow.lac.train.config import EnvCfg
from contactflow.policy.terms import projected_gravity

__all__ = ["RewardCfg", "CurriculumCfg", "TeacherEnvCfg", "LacTeacherEnv", "PRIV_DIM", "teacher_mirror",
           "frame_mirror", "joint_mirror", "priv_frame"]

#: size of one privileged frame (LAC §III-C: 88).
PRIV_DIM = 88
_N_LINKS = 11


@dataclasses.dataclass(frozen=True, kw_only=True)
class RewardCfg:
    """Reward weights (per tick) and kernel widths (module docstring).

    Attributes:
        w_base_vel, sigma_base_vel: base velocity kernel weight and width [m/s, rad/s].
        w_base_height, sigma_base_height_m: base height kernel.
        w_upper_joints, sigma_upper_joint_rad: weight of the mean of the 11 joint kernels, width.
        w_feet_planted: stance: fraction of soles in contact. contact_force_n: contact threshold [N].
        w_orientation: on ``|g_xy|^2`` (<= 0). w_energy: on ``sum |tau qdot|`` [W] (<= 0).
        w_action_rate: on ``|a_t - a_{t-1}|^2`` (<= 0). w_joint_limit: on the excess beyond
            ``soft_limit`` of each joint's half range [rad] (<= 0).
        w_alive: survival bonus per tick. w_fall: added once on a fall (<= 0).
    """

    w_base_vel: float = 1.0
    sigma_base_vel: float = 0.25
    w_base_height: float = 1.0
    sigma_base_height_m: float = 0.05
    w_upper_joints: float = 2.0
    sigma_upper_joint_rad: float = 0.2
    w_feet_planted: float = 0.5
    contact_force_n: float = 20.0
    w_orientation: float = -1.0
    w_energy: float = -2.0e-4
    w_action_rate: float = -0.01
    w_joint_limit: float = -1.0
    soft_limit: float = 0.95
    w_alive: float = 0.5
    w_fall: float = -10.0

    def __post_init__(self):
        for k in ("w_base_vel", "w_base_height", "w_upper_joints", "w_feet_planted", "w_alive"):
            if getattr(self, k) < 0:
                raise ConfigError(f"reward.{k}: expected >= 0, got {getattr(self, k)}")
        for k in ("w_orientation", "w_energy", "w_action_rate", "w_joint_limit", "w_fall"):
            if getattr(self, k) > 0:
                raise ConfigError(f"reward.{k}: a penalty, expected <= 0, got {getattr(self, k)}")
        for k in ("sigma_base_vel", "sigma_base_height_m", "sigma_upper_joint_rad"):
            if not getattr(self, k) > 0:
                raise ConfigError(f"reward.{k}: expected > 0, got {getattr(self, k)}")
        if self.w_base_vel + self.w_base_height + self.w_upper_joints <= 0:
            raise ConfigError("reward: the tracking weights must not all be 0")
        if not 0 < self.soft_limit <= 1:
            raise ConfigError(f"reward.soft_limit: expected in (0, 1], got {self.soft_limit}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class CurriculumCfg:
    """Wrench curriculum over the dataset's bins (LAC §III-C, Fig. 2).

    Attributes:
        start_level: first level (rows with ``curriculum_bin <= level`` are drawn).
        max_level: last level (10: every force bin; couple bins stop at 7).
        unlock_tracking: mean normalised tracking reward of a rollout that unlocks the next level.
    """

    start_level: int = 0
    max_level: int = 10
    unlock_tracking: float = 0.8

    def __post_init__(self):
        if not 0 <= self.start_level <= self.max_level:
            raise ConfigError(f"curriculum: expected 0 <= start_level <= max_level, got {self.start_level}, {self.max_level}")
        if not 0 < self.unlock_tracking <= 1:
            raise ConfigError(f"curriculum.unlock_tracking: expected in (0, 1], got {self.unlock_tracking}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TeacherEnvCfg:
    """Configuration of :class:`LacTeacherEnv` (``env`` section of ``robots/g1/lac_ppo.yaml``).

    Attributes:
        robot: robot name. spec: the deploy policy spec whose observation and action are used.
        dataset: augmentation dataset directory (``contactflow lac augment``); relative paths are
            from the working directory; ``None``: rows must be given to the env.
        episode: the episode (scaling, caps, timing, domain randomisation), engineer T's
            :class:`~contactflow.lac.train.config.EnvCfg`.
        actor_history, priv_history: frames of ``o`` and ``o^priv`` (LAC: 10 and 5).
        action_clip: bound of the action Box (the Gaussian's samples are clipped to it by SB3);
            the Box is narrower where a joint limit is nearer (a target outside the limits would
            make the deploy runner refuse the whole action).
        walk_threshold: stance/walk label threshold on ``|v_tar|`` components (LAC: 0.1).
        wrench_obs_scale: factor on the wrenches in ``o^priv``.
        uniform_floor: episode sampling (LAC §III-C): a row's probability is ``(1 - floor)
            w_i / sum w + floor / N`` over the admitted rows, ``w_i = 1 / (event count of the
            row's rarest loaded link in the dataset)``; 1 = uniform sampling.
        reward, curriculum: see :class:`RewardCfg`, :class:`CurriculumCfg`.
    """

    robot: str = "g1"
    spec: str = "lac"
    dataset: str | None = None
    episode: EnvCfg = dataclasses.field(default_factory=EnvCfg)
    actor_history: int = 10
    priv_history: int = 5
    action_clip: float = 10.0
    walk_threshold: float = 0.1
    wrench_obs_scale: float = 0.1
    uniform_floor: float = 0.3
    reward: RewardCfg = dataclasses.field(default_factory=RewardCfg)
    curriculum: CurriculumCfg = dataclasses.field(default_factory=CurriculumCfg)

    def __post_init__(self):
        if not 1 <= self.actor_history <= 64 or self.priv_history < 1:
            raise ConfigError("actor_history in [1, 64] and priv_history >= 1 expected")
        if not self.action_clip > 0 or not self.wrench_obs_scale > 0:
            raise ConfigError("action_clip and wrench_obs_scale must be > 0")
        if not 0 <= self.uniform_floor <= 1:
            raise ConfigError(f"uniform_floor: expected in [0, 1], got {self.uniform_floor}")
        for key in ("probe_prob", "hand_push_prob", "hand_couple_prob"):
            # the residual targets scale the dataset row's augmented motion by its wrench scale, which an episode
            # whose events replace the row's does not have (NaN targets)
            if getattr(self.episode, key) > 0:
                raise ConfigError(f"episode.{key}: the PPO teacher trains on the dataset's episodes only "
                                  f"(its residual targets are the row's), got {getattr(self.episode, key)}")


# --------------------------------------------------------------------------- mirrors


def _swap_lr(name: str) -> str:
    if name.startswith("left_"):
        return "right_" + name[5:]
    if name.startswith("right_"):
        return "left_" + name[6:]
    return name


def joint_mirror(names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Signed permutation mirroring joint-indexed values (G1 conventions: left/right joints swap;
    roll and yaw joints change sign, pitch joints, knees and elbows do not).

    Args:
        names: (n,) joint names of the vector's order.

    Returns:
        ``(perm, sign)``: ``x_mirrored = sign * x[perm]``.

    Raises:
        ConfigError: a joint's mirror is not in ``names``.
    """
    names = list(names)
    perm, sign = [], []
    for n in names:
        m = _swap_lr(n)
        if m not in names:
            raise ConfigError(f"joint_mirror: the mirror of {n!r} ({m!r}) is not in the joint order")
        perm.append(names.index(m))
        sign.append(-1.0 if ("_roll_" in n or "_yaw_" in n) else 1.0)
    return np.array(perm), np.array(sign)


# per-term mirrors of the non-joint terms: (perm, sign)
_TERM_MIRROR = {
    "base_ang_vel": ([0, 1, 2], [-1, 1, -1]),  # axial vector
    "projected_gravity": ([0, 1, 2], [1, -1, 1]),  # polar vector
    "command_lin_vel": ([0, 1], [1, -1]),
    "command_ang_vel": ([0], [-1]),
    "command_waist_yaw": ([0], [-1]),
    "command_base_height": ([0], [1]),
    "stiffness": ([1, 0, 2, 4, 3], [1, 1, 1, 1, 1]),  # [K_L, K_R, K_T, Kth_L, Kth_R]
}


def frame_mirror(spec) -> tuple[np.ndarray, np.ndarray]:
    """Mirror of the deployable frame of a policy spec (each term by its registry name).

    Args:
        spec: a :class:`contactflow.policy.spec.PolicySpec`.

    Returns:
        ``(perm, sign)`` over the frame (95 for LAC).

    Raises:
        ConfigError: a term without a known mirror (gait phase terms, for instance).
    """
    D = spec.frame_dim
    perm, sign = np.arange(D), np.ones(D)
    for b in spec.terms:
        s = b.sl
        if b.term.joint_source is not None:
            p, g = joint_mirror(spec.cfg.joint_orders[b.cfg.joints])
        elif b.cfg.term in _TERM_MIRROR:
            p, g = (np.array(x) for x in _TERM_MIRROR[b.cfg.term])
        else:
            raise ConfigError(f"{spec.file}: no left/right mirror for observation term {b.cfg.term!r}")
        perm[s] = s.start + np.asarray(p)
        sign[s] = g
    return perm, sign


def _priv_mirror(lac_links: Sequence[str], upper_joints: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    perm, sign = [0, 1, 2, 3], [-1, 1, -1, 1]  # quaternion xyzw of the reflected rotation S R S
    perm += [4, 5, 6]
    sign += [1, -1, 1]
    links = list(lac_links)
    for name in links:
        j = links.index(_swap_lr(name))
        perm += [7 + 6 * j + k for k in range(6)]
        sign += [1, -1, 1, -1, 1, -1]  # force polar, couple axial
    o = 7 + 6 * len(links)
    perm += [o, o + 1, o + 2, o + 3]
    sign += [1, -1, -1, 1]  # v_res (vx, vy, yaw rate), h_res
    p, g = joint_mirror(upper_joints)
    perm += list(o + 4 + p)
    sign += list(g)
    return np.array(perm), np.array(sign, float)


def teacher_mirror(cfg: TeacherEnvCfg, spec=None, lac=None):
    """Mirrors of the teacher's observation and action.

    Args:
        cfg: the env configuration (history lengths).
        spec: the deploy spec (``None``: :func:`~contactflow.lac.train.env.load_train_spec`).
        lac: :class:`~contactflow.lac.model.LacRobot` (``None``: built for ``cfg.robot``).

    Returns:
        ``((obs_perm, obs_sign), (act_perm, act_sign))``: ``x' = sign * x[perm]``.
    """
    if spec is None or lac is None:
        spec, lac = _spec_and_lac(cfg)
    fp, fs = frame_mirror(spec)
    pp, ps = _priv_mirror(lac.link_names, [lac.model.names[j] for j in lac.link_joint_ids])
    D, P = spec.frame_dim, PRIV_DIM
    Ha, Hp = cfg.actor_history, cfg.priv_history
    perm = np.concatenate([[h * D + fp for h in range(Ha)], [Ha * D + h * P + pp for h in range(Hp)]], axis=None)
    sign = np.concatenate([np.tile(fs, Ha), np.tile(ps, Hp)])
    n0 = Ha * D + Hp * P
    perm = np.concatenate([perm, n0 + np.arange(Hp)])  # labels unchanged
    sign = np.concatenate([sign, np.ones(Hp)])
    ap, as_ = joint_mirror(spec.joint_names)
    return (perm.astype(int), sign.astype(np.float32)), (ap, as_.astype(np.float32))


def _spec_and_lac(cfg: TeacherEnvCfg):
    """The deploy spec (engineer T's :func:`~contactflow.lac.train.env.load_train_spec`: a
    placeholder model, only the observation, history and action map are used) and the LAC robot
    view; built once per process and robot/spec pair (about 4 s) and shared read-only by its envs."""
    return _spec_and_lac_cached(cfg.robot, cfg.spec)


@functools.lru_cache(maxsize=4)
def _spec_and_lac_cached(robot_name: str, spec_name: str):
    from contactflow.lac.model import LacRobot
    from contactflow.lac.train.env import load_train_spec
    from contactflow.robot import load_robot

    robot = load_robot(robot_name)
    return load_train_spec(spec_name, robot), LacRobot(robot)


# --------------------------------------------------------------------------- privileged frame


def priv_frame(sensors: Mapping, wrench_W: np.ndarray, v_res: np.ndarray, h_res: float, q_res: np.ndarray,
               wrench_obs_scale: float) -> np.ndarray:
    """One privileged frame ``o^priv_t`` (88,) (LAC §III-C).

    Args:
        sensors: the true ``sensors`` (``q`` (7 + n,) pinocchio, quaternion xyzw; ``v`` (6 + n,)
            base twist in the base frame).
        wrench_W: (11, 6) [F; C] applied to each LAC link, world axes [N, N m].
        v_res: (3,) (v_x, v_y, yaw rate) residual [m/s, rad/s]. h_res: base height residual [m].
        q_res: (11,) upper-body joint residuals [rad].
        wrench_obs_scale: factor on the wrenches.

    Returns:
        (88,) float32: quaternion (4), base linear velocity (3, base frame), wrenches (11 x 6, base
        frame, scaled), v_res (3), h_res (1), q_res (11).
    """
    q, v = np.asarray(sensors["q"], float), np.asarray(sensors["v"], float)
    x, y, z, w = q[3:7] / np.linalg.norm(q[3:7])
    R_WB = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
    wr = np.asarray(wrench_W, float).reshape(_N_LINKS, 2, 3) @ R_WB  # rows: R^T f, R^T c
    return np.concatenate([[x, y, z, w], v[0:3], wrench_obs_scale * wr.reshape(-1), v_res, [h_res],
                           q_res]).astype(np.float32)


# --------------------------------------------------------------------------- the env


class LacTeacherEnv(gym.Env):
    """Gymnasium env of the PPO teacher (module docstring).

    Args:
        cfg: :class:`TeacherEnvCfg`.
        dataset: dataset rows (:func:`contactflow.lac.dataset.read_episodes`), a dataset
            directory, or ``None`` (``cfg.dataset``).

    Attributes:
        obs_layout: ``{"actor": [a, b], "priv": [b, c], "crit": [c, d]}`` slices of the observation.
        curriculum_level: the current level.
        train_env: the wrapped :class:`~contactflow.lac.train.env.LacTrainEnv`.

    Raises:
        ConfigError: no dataset, an empty one, or no row at any level.
    """

    metadata = {"render_modes": []}

    def __init__(self, cfg: TeacherEnvCfg, dataset=None):
        from contactflow.lac.dataset import read_episodes
        from contactflow.lac.train.env import LacTrainEnv

        self.cfg = cfg
        if dataset is None:
            if cfg.dataset is None:
                raise ConfigError("LacTeacherEnv: no dataset (env.dataset in the config, or --dataset DIR)")
            dataset = cfg.dataset
        rows = read_episodes(dataset) if isinstance(dataset, (str, Path)) else list(dataset)
        if not rows:
            raise ConfigError("LacTeacherEnv: the dataset has no episode")
        spec, lac = _spec_and_lac(cfg)
        self.spec, self.lac = spec, lac
        self.train_env = LacTrainEnv(cfg.episode, spec, rows, lac.robot)
        self.rows = self.train_env.rows
        self._bins = np.array([int(r["curriculum_bin"]) for r in rows])
        counts: dict[str, int] = {}
        for r in rows:
            for name in r["links"]:
                counts[name] = counts.get(name, 0) + 1
        self._w = np.array([1.0 / min((counts[n] for n in r["links"]), default=max(counts.values(), default=1))
                            for r in rows])
        self.curriculum_level = cfg.curriculum.start_level
        D, P = spec.frame_dim, PRIV_DIM
        a = cfg.actor_history * D
        p = a + cfg.priv_history * P
        self.obs_layout = {"actor": [0, a], "priv": [a, p], "crit": [p, p + cfg.priv_history]}
        self.n_obs = p + cfg.priv_history
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (self.n_obs,), np.float32)
        n_act = len(spec.joint_names)
        # per joint, the actions whose target stays inside the joint limits (the deploy runner
        # refuses a whole action otherwise): SB3 clips the Gaussian's samples to these bounds
        lo, hi = spec.action_bounds()
        lo, hi = lo + 1e-4, hi - 1e-4
        self.action_space = gym.spaces.Box(np.maximum(lo, -cfg.action_clip).astype(np.float32),
                                           np.minimum(hi, cfg.action_clip).astype(np.float32), (n_act,), np.float32)
        self._k_sl = spec.term_slice("stiffness")
        upper = [lac.model.names[j] for j in lac.link_joint_ids]
        names = list(lac.robot.joint_names)
        self._upper_idx = np.array([names.index(j) for j in upper])  # into q[7:]
        self._q_mid = 0.5 * (lac.robot.q_max + lac.robot.q_min)
        self._q_half = 0.5 * (lac.robot.q_max - lac.robot.q_min)
        self._tau_max = lac.robot.tau_max
        self._priv: deque = deque(maxlen=cfg.priv_history)
        self._label: deque = deque(maxlen=cfg.priv_history)
        self._last_action = np.zeros(n_act)

    # ------------------------------------------------------------------ curriculum

    def set_curriculum_level(self, level: int) -> None:
        """Admit rows with ``curriculum_bin <= level`` from the next episode on (clamped to the
        configured range)."""
        self.curriculum_level = int(np.clip(level, 0, self.cfg.curriculum.max_level))

    def admitted_rows(self) -> np.ndarray:
        """Indices of the rows of the current level (the weakest bin's rows when none is)."""
        idx = np.flatnonzero(self._bins <= self.curriculum_level)
        return idx if idx.size else np.flatnonzero(self._bins == self._bins.min())

    def row_probabilities(self) -> np.ndarray:
        """(len(rows),) probability of each row at the next reset (0 outside the level; the
        rare-link reweighting of LAC §III-C mixed with ``uniform_floor``)."""
        idx = self.admitted_rows()
        w = self._w[idx] / self._w[idx].sum()
        f = self.cfg.uniform_floor
        p = np.zeros(len(self.rows))
        p[idx] = (1.0 - f) * w + f / idx.size
        return p

    # ------------------------------------------------------------------ gym API

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        rng = self.np_random
        if options is not None and "row" in options:
            i = int(options["row"])
        else:
            i = int(rng.choice(len(self.rows), p=self.row_probabilities()))
        ep_seed = int(rng.integers(2**31 - 1))
        _, priv = self.train_env.reset(ep_seed, i)
        ep = self.train_env.episode
        self._row = self.rows[i]
        self._scale = float(np.mean(ep.wrench_scale)) if len(ep.wrench_scale) else 0.0
        self._q_ref = np.asarray(self._row["q_ref"], float).reshape(11)
        self._h_cmd_row = float(self._row["base_height_cmd"])
        self._h_cmd = float(ep.command["base_height"][0])
        self._v_aug = np.asarray(self._row["base_vel"], float).reshape(-1, 3)
        self._last_action = np.zeros(self.action_space.shape[0])
        self._priv.clear()
        self._label.clear()
        self._push_priv(priv)
        return self._obs(), {"row": i, "curriculum_level": self.curriculum_level}

    def step(self, action):
        """One 50 Hz tick; ``action`` (23,) policy order is clipped to the action Box first (as
        SB3 does with its samples), so no action is refused by the deploy runner's limit check."""
        a = np.clip(np.asarray(action, float), self.action_space.low, self.action_space.high)
        res = self.train_env.step(a)
        fell = bool(res.info["fell"])  # the training episode's fall rule (episode.fall_tilt_rad, fall_height_m)
        if not fell:
            self._push_priv(res.privileged)
        r, parts = self._reward(res.privileged, a, fell)
        self._last_action = a
        terminated = fell
        truncated = bool(res.done and not fell)
        info = dict(parts, fell=fell, accepted=res.info["accepted"])
        return self._obs(), r, terminated, truncated, info

    # ------------------------------------------------------------------ pieces

    def targets(self, priv: Mapping) -> dict:
        """Residuals and tracking targets at the privileged record's time (module docstring).

        Returns:
            ``q_res`` (11,), ``h_res``, ``v_res`` (3,), ``q_aug`` (11,), ``h_aug``, ``v_tar`` (3,),
            ``walk`` (bool).
        """
        s = self._scale
        q_res = s * (np.asarray(priv["q_aug"], float) - self._q_ref)
        h_res = s * (float(priv["base_height_aug"][0]) - self._h_cmd_row)
        te = self.train_env
        k = int(np.clip(round((priv["t"] - te.cfg.settle_s) / te.dt), 0, len(self._v_aug) - 1))
        v_res = s * self._v_aug[k]
        v_tar = v_res  # v_cmd = 0: standing episodes
        walk = bool(np.any(np.abs(v_tar) > self.cfg.walk_threshold))
        return {"q_res": q_res, "h_res": h_res, "v_res": v_res, "q_aug": self._q_ref + q_res,
                "h_aug": self._h_cmd + h_res, "v_tar": v_tar, "walk": walk}

    def _push_priv(self, priv: Mapping) -> None:
        tg = self.targets(priv)
        f = priv_frame(priv["sensors"], priv["wrench_W"], tg["v_res"], tg["h_res"], tg["q_res"],
                       self.cfg.wrench_obs_scale)
        lab = 1.0 if tg["walk"] else 0.0
        if not self._priv:
            self._priv.extend([f] * self.cfg.priv_history)
            self._label.extend([lab] * self.cfg.priv_history)
        else:
            self._priv.append(f)
            self._label.append(lab)
        self._tg = tg
        self._sensors = priv["sensors"]

    def _obs(self) -> np.ndarray:
        frames = np.array(self.train_env.obs[-self.cfg.actor_history:], dtype=np.float32)
        if self._k_sl is not None:
            frames[:, self._k_sl] = np.log(np.maximum(frames[:, self._k_sl], 1e-6))
        return np.concatenate([frames.reshape(-1), np.concatenate(self._priv),
                               np.array(self._label, np.float32)]).astype(np.float32)

    def _reward(self, priv: Mapping, a: np.ndarray, fell: bool) -> tuple[float, dict]:
        c = self.cfg.reward
        s = priv["sensors"]
        q, v, tau = np.asarray(s["q"], float), np.asarray(s["v"], float), np.asarray(s["tau"], float)
        tg = self.targets(priv)
        v_meas = np.array([v[0], v[1], v[5]])
        v_tar = np.zeros(3) if not tg["walk"] else tg["v_tar"]
        r_v = np.exp(-np.sum((v_meas - v_tar) ** 2) / c.sigma_base_vel**2)
        r_h = np.exp(-(q[2] - tg["h_aug"]) ** 2 / c.sigma_base_height_m**2)
        r_q = np.mean(np.exp(-((q[7:][self._upper_idx] - tg["q_aug"]) ** 2) / c.sigma_upper_joint_rad**2))
        track = c.w_base_vel * r_v + c.w_base_height * r_h + c.w_upper_joints * r_q
        track_max = c.w_base_vel + c.w_base_height + c.w_upper_joints
        planted = 0.0
        if not tg["walk"]:
            planted = np.mean([float(s[k][2] > c.contact_force_n) for k in s if k.startswith("wrench.")])
        g = projected_gravity(q[3:7])
        excess = np.maximum(np.abs(q[7:] - self._q_mid) - c.soft_limit * self._q_half, 0.0)
        parts = {
            "tracking": float(track / track_max),
            "r_base_vel": float(r_v), "r_base_height": float(r_h), "r_upper_joints": float(r_q),
            "feet_planted": float(planted),
            "orientation": float(g[0] ** 2 + g[1] ** 2),
            "energy": float(np.sum(np.abs(tau * v[6:]))),
            "action_rate": float(np.sum((a - self._last_action) ** 2)),
            "joint_limit": float(np.sum(excess)),
        }
        r = (track + c.w_feet_planted * planted + c.w_orientation * parts["orientation"]
             + c.w_energy * parts["energy"] + c.w_action_rate * parts["action_rate"]
             + c.w_joint_limit * parts["joint_limit"] + c.w_alive + (c.w_fall if fell else 0.0))
        return float(r), parts
