"""DAgger distillation of the model-based teacher into the LAC student (``contactflow lac train``).

LAC (Sec. III-C) trains a privileged PPO teacher and distils it into a student that sees only the
95-D observation over 64 frames. On a 2-core CPU the teacher is the model-based ``LacExpert``
(lac.md §0: PPO is not feasible here, BC/DAgger from such an expert is), and the distillation is
DAgger (Ross, Gordon, Bagnell, AISTATS 2011):

* round 0: the teacher acts (behaviour cloning data);
* round r >= 1: at each tick the teacher's action is executed with probability ``beta_r``
  (:meth:`DaggerCfg.beta`), else the student's (its ONNX export run by onnxruntime, as deployed;
  with ``dagger.student_acts: probes`` in the compliance-probe episodes only, the others at beta 1);
  the teacher labels EVERY visited state (it runs as an observer, ``lockstep=False``);
* the data of all rounds are aggregated and the student is trained on them (squared action error
  weighted per joint, ``optim.loss``; Adam), warm-started from the previous round;
* after each round the exported student runs ALONE through the deploy runner (:func:`validate`:
  a stand and hand pushes across K), logged and plotted; it does not change the training. With
  ``validation.suite`` it also runs a suite of ``contactflow lac eval`` against the teacher
  (:func:`validate_suite`), whose score chooses a round (:func:`best_round`, ``lac export --best``).

Episodes are independent (seed ``SeedSequence([seed, round, episode])``) and rolled out in worker
processes; results are gathered in episode order, so a run is deterministic for a seed: bit for bit
with the same number of workers (the training uses ``optim.torch_threads`` threads, 1 by default,
and a batch order seeded per round); across worker counts to floating-point rounding only (measured:
one frame value 1 ulp apart in 19 000; numpy's vectorised reductions may round differently with the
memory alignment, and a long episode can amplify such a difference). After each round a checkpoint (weights, optimiser, log) and the
round's data are written; ``resume`` continues after the last complete round (with the same
configuration; a larger ``dagger.rounds`` extends a finished run).

Output directory: ``config.yaml`` (the resolved configuration), ``run.json`` (provenance),
``data/round_XXX.npz``, ``checkpoints/round_XXX.pt``, ``student.onnx`` (the latest export, with the
deploy metadata), ``train_log.json`` / ``train_log.csv`` (per round / per epoch) and ``loss.png``; with
``validation.suite`` also ``validation_teacher.json`` and ``validation_suite/round_XXX.json`` (the suite's tables).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import multiprocessing as mp
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from contactflow.config import did_you_mean, json_digest, load_config, to_dict
from contactflow.errors import ConfigError
from contactflow.lac.train.config import TrainConfig, config_yaml, round_lr
from contactflow.paths import replaced_atomically, write_text_atomic

if TYPE_CHECKING:
    from contactflow.lac.evaluate import EvalConfig

__all__ = ["RolloutResult", "rollout_episode", "train", "validate", "validate_suite", "suite_score", "best_round", "best_of_runs", "best_checkpoint", "new_student", "aux_dim", "aux_blocks", "compliance_map", "aux_target", "aux_tensors", "aux_rows", "batch_loss", "load_checkpoint", "export_checkpoint",
           "git_revision", "window_index"]

log = logging.getLogger(__name__)

#: links whose true external force the auxiliary head predicts (``optim.aux_force_weight``)
AUX_FORCE_LINKS = ("left_wrist_roll_link", "right_wrist_roll_link", "torso_link")
#: the auxiliary target's unit [N]
AUX_FORCE_UNIT_N = 10.0
#: links whose true external couple ``student.wrench_input: wrench`` estimates besides the forces
AUX_COUPLE_LINKS = ("left_wrist_roll_link", "right_wrist_roll_link")
#: the couple target's unit [N m]
AUX_COUPLE_UNIT_NM = 1.0


def aux_blocks() -> list[tuple[str, str, int, str, float]]:
    """The auxiliary output's layout (:func:`aux_target`): per block of 3 values (world axes) ``(link, "force" |
    "couple", offset, SI unit, SI value of one unit)``, the forces of :data:`AUX_FORCE_LINKS` first, then the
    couples of :data:`AUX_COUPLE_LINKS` (present with ``student.wrench_input: wrench`` only: take the first
    ``aux_dim(cfg) // 3``)."""
    forces = [(b, "force", 3 * i, "N", AUX_FORCE_UNIT_N) for i, b in enumerate(AUX_FORCE_LINKS)]
    return forces + [(b, "couple", 3 * (len(forces) + i), "N m", AUX_COUPLE_UNIT_NM) for i, b in enumerate(AUX_COUPLE_LINKS)]


def compliance_map(cfg: TrainConfig, spec) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(select, unit, bound, axes)`` of ``student.compliance_input`` (:class:`~contactflow.lac.train.student.Student`):
    per block of the load estimate (:func:`aux_blocks`) its stiffness channel (the ``lac_links`` group of its
    link in the robot file, :data:`~contactflow.lac.config.GROUP_CHANNELS`: linear for a force, angular for a
    couple) as a (n_stiffness, n_blocks) 0/1 matrix, the SI value of one unit, ``d_max``: the teacher's
    ``arm_max_displacement_m`` (a force on one of its ``arm_links``) or ``torso_max_displacement_m`` (its
    ``torso_link``) [m], ``student.compliance_rotation_bound_rad`` for a couple [rad], and the (n_blocks, 3) 0/1
    axes of the block that enter (world x, y, z; the torso's z is 0 with ``student.compliance_torso:
    horizontal``, as the teacher's torso channel).

    Raises:
        ConfigError: the spec's stiffness term is not the 5-D command, a block's link is not in the robot file's
            ``lac_links`` or not one of the teacher's links, or its group has no channel of that kind.
    """
    from contactflow.lac.config import GROUP_CHANNELS, STIFFNESS_CHANNELS
    from contactflow.lac.expert import load_expert_config
    from contactflow.robot import read_robot_file, resolve_robot_file

    k = spec.term_slice("stiffness")
    if k is None:
        raise ConfigError(f"{spec.file}: no 'stiffness' observation term: student.compliance_input needs the "
                          f"{len(STIFFNESS_CHANNELS)}-D command {[n for n, _, _ in STIFFNESS_CHANNELS]}")
    if k.stop - k.start != len(STIFFNESS_CHANNELS):
        raise ConfigError(f"{spec.file}: stiffness: compliance_input needs the {len(STIFFNESS_CHANNELS)}-D command "
                          f"{[n for n, _, _ in STIFFNESS_CHANNELS]}, got {k.stop - k.start} values")
    robot_file = resolve_robot_file(cfg.robot)
    links = read_robot_file(robot_file).get("lac_links") or {}
    ecfg = load_expert_config(cfg.expert_config)
    blocks = aux_blocks()[:aux_dim(cfg) // 3]
    select = np.zeros((len(STIFFNESS_CHANNELS), len(blocks)), np.float32)
    unit, bound = np.zeros(len(blocks), np.float32), np.zeros(len(blocks), np.float32)
    axes = np.ones((len(blocks), 3), np.float32)
    for j, (link, kind, _, _, one) in enumerate(blocks):
        group = (links.get(link) or {}).get("group")
        channel = GROUP_CHANNELS.get(group, (None, None))[0 if kind == "force" else 1]
        if channel is None:
            raise ConfigError(f"{robot_file}: lac_links.{link}: student.compliance_input needs its group's "
                              f"{'linear' if kind == 'force' else 'angular'} stiffness channel (group {group!r})")
        select[channel, j], unit[j] = 1.0, one
        if kind == "couple":
            bound[j] = cfg.student.compliance_rotation_bound_rad
        elif link in ecfg.arm_links:
            bound[j] = ecfg.arm_max_displacement_m
        elif link == ecfg.torso_link:
            bound[j] = ecfg.torso_max_displacement_m
            if cfg.student.compliance_torso == "horizontal":
                axes[j, 2] = 0.0
        else:
            raise ConfigError(f"student.compliance_input: {link} is neither one of the teacher's arm_links "
                              f"{list(ecfg.arm_links)} nor its torso_link {ecfg.torso_link!r}")
    return select, unit, bound, axes


# --------------------------------------------------------------------------- rollouts (no torch)


@dataclasses.dataclass
class RolloutResult:
    """One DAgger episode.

    Attributes:
        frames: (T, 95) float32 observation frames (the newest frame of each tick's input).
        labels: (T, 23) float32 teacher actions (policy order).
        teacher_ok: (T,) the teacher's own output (False: it held its last safe command).
        student_acted: (T,) the student's action was executed.
        fell: the robot fell (the episode ended there).
        refused: ticks whose executed action the deploy runner refused.
        on_policy_se: sum over the ticks of the mean squared student-teacher action difference
            (0 in round 0).
        row_index: dataset row. wall_s: rollout wall time [s].
        force: (T, 3 * len(AUX_FORCE_LINKS)) float32 the TRUE external force on the left hand, right hand and torso
            (world axes) over the tick before each frame [N] (privileged; the auxiliary target).
        couple: (T, 3 * len(AUX_COUPLE_LINKS)) float32 the TRUE external couple on the left and right hand, the same way [N m].
        force_est, couple_est: the same shapes, the TEACHER's own estimate of those forces and couples at each frame
            (``f_est.<link>``, ``c_est.<link>`` of ``lac_expert``'s diagnostics, from the measured joint torques and
            the base state; NaN where it gave none): what its labels act on (``optim.aux_target: teacher``).
        relabelled: ``DaggerCfg.stiffness_relabel`` copies of the episode, each ``(frames, labels, teacher_ok)``
            of the same shapes: the frames with another stiffness command, the labels of a teacher commanded it.
    """

    frames: np.ndarray
    labels: np.ndarray
    teacher_ok: np.ndarray
    student_acted: np.ndarray
    fell: bool
    refused: int
    on_policy_se: float
    row_index: int
    wall_s: float
    force: np.ndarray | None = None
    couple: np.ndarray | None = None
    relabelled: list = dataclasses.field(default_factory=list)
    force_est: np.ndarray | None = None
    couple_est: np.ndarray | None = None


class _Context:
    """What a worker builds once per round: robot, spec (with the round's student), env, teacher."""

    def __init__(self, cfg: TrainConfig, rows: list, student_model: str | None):
        from contactflow.lac.expert import load_expert_config
        from contactflow.lac.train.env import LacTrainEnv, load_train_spec
        from contactflow.lac.train.teacher import ExpertTeacher
        from contactflow.robot import load_robot

        self.cfg = cfg
        robot = load_robot(cfg.robot)
        self.spec = load_train_spec(cfg.spec, robot, model=student_model)
        self.env = LacTrainEnv(cfg.env, self.spec, rows, robot)
        self.teacher = ExpertTeacher(load_expert_config(cfg.expert_config), robot, self.spec,
                                     limit_margin_rad=cfg.dagger.label_limit_margin_rad)
        # the teachers of DaggerCfg.stiffness_relabel: each labels the visited states under another stiffness
        self.relabel_teachers = [ExpertTeacher(load_expert_config(cfg.expert_config), robot, self.spec,
                                               limit_margin_rad=cfg.dagger.label_limit_margin_rad)
                                 for _ in range(cfg.dagger.stiffness_relabel)]
        if cfg.optim.aux_target == "teacher":
            ex = self.teacher.expert.cfg  # the links whose load it estimates (f_est / c_est): the target's
            missing = sorted((set(AUX_FORCE_LINKS) - set(ex.arm_links) - {ex.torso_link})
                             | (set(AUX_COUPLE_LINKS) - set(ex.arm_links)))
            if missing:
                raise ConfigError(f"optim.aux_target: teacher: the teacher estimates no load on {missing} (its arm_links "
                                  f"{list(ex.arm_links)}, torso_link {ex.torso_link!r}; expert_config {cfg.expert_config})")
        #: the action columns dagger.arm_action_noise perturbs (checked before any rollout)
        self.arm_cols = []
        if cfg.dagger.arm_action_noise > 0:
            from contactflow.lac.train.student import action_columns

            self.arm_cols = action_columns(self.spec, "arms", key="dagger.arm_action_noise")
        self.has_student = student_model is not None
        stiff = [b for b in self.spec.terms if b.term.name == "stiffness"]
        if self.relabel_teachers and len(stiff) != 1:
            raise ConfigError(f"dagger.stiffness_relabel: the spec {self.spec.file} has {len(stiff)} 'stiffness' "
                              "observation terms, expected one")
        self._stiff = stiff[0] if stiff else None

    @property
    def stiffness_slice(self) -> slice:
        """Where the frame holds the stiffness command."""
        return self._stiff.sl

    def stiffness_frame(self, k5: np.ndarray) -> np.ndarray:
        """(5,) the frame's entries for the stiffness command ``k5`` (5,) RAW, as the runner writes them."""
        b = self._stiff
        raw = np.asarray(k5, float)
        if b.lo is not None:
            raw = np.clip(raw, b.lo, b.hi)
        return (b.cfg.scale * raw).astype(np.float32)


def rollout_episode(ctx: _Context, r: int, i: int, beta: float) -> RolloutResult:
    """Roll out episode ``i`` of round ``r`` (module docstring): teacher labels, beta mixing.

    Args:
        ctx: the worker's context. r, i: round and episode (the seed is
            ``SeedSequence([cfg.seed, r, i])``). beta: probability of executing the teacher's action (1 in an
            episode that is not a compliance probe with ``dagger.student_acts: probes``).

    Returns:
        RolloutResult.
    """
    # the deploy runner warns on every 50th refused action; a young student's refusals are counted
    # in the round's log instead
    plog = logging.getLogger("contactflow.policy")
    level = plog.level
    plog.setLevel(logging.ERROR)
    try:
        return _rollout(ctx, r, i, beta)
    finally:
        plog.setLevel(level)


def _rollout(ctx: _Context, r: int, i: int, beta: float) -> RolloutResult:
    from contactflow.lac.train.env import episode_from_row, episode_rng

    t0 = time.perf_counter()
    env, teacher, cfg = ctx.env, ctx.teacher, ctx.cfg
    rng = episode_rng(cfg.seed, r, i)
    idx = int(rng.integers(len(env.rows)))
    ep = episode_from_row(env.rows[idx], cfg.env, env.lac, rng, row_index=idx)
    if cfg.dagger.student_acts == "probes" and not ep.probe:
        beta = 1.0  # the teacher acts; the per-tick draw stays, so the probe episodes are an `all` run's tick for tick
    obs, priv = env.reset(0, episode=ep)
    teacher.reset(priv["sensors"])
    relabel = _relabel_commands(ctx, cfg.seed, r, i)
    for t_j in ctx.relabel_teachers:
        t_j.reset(priv["sensors"])
    n = env.n_steps
    frames = np.empty((n, env.spec.frame_dim), np.float32)
    labels = np.empty((n, len(env.spec.joint_names)), np.float32)
    t_ok = np.zeros(n, bool)
    s_act = np.zeros(n, bool)
    force = np.zeros((n, len(AUX_FORCE_LINKS), 3), np.float32)
    i_f = [env.lac_links.index(b) for b in AUX_FORCE_LINKS]
    couple = np.zeros((n, len(AUX_COUPLE_LINKS), 3), np.float32)
    i_c = [env.lac_links.index(b) for b in AUX_COUPLE_LINKS]
    force_est = np.full((n, len(AUX_FORCE_LINKS), 3), np.nan, np.float32)
    couple_est = np.full((n, len(AUX_COUPLE_LINKS), 3), np.nan, np.float32)
    re_labels = np.empty((len(relabel), n, labels.shape[1]), np.float32)
    re_ok = np.zeros((len(relabel), n), bool)
    fell, refused, se, k = False, 0, 0.0, 0
    noise, tau = cfg.dagger.arm_action_noise, cfg.dagger.arm_action_noise_tau_s
    if noise > 0:  # a generator of its own: the episode's draws stay as without noise
        noise_rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, r, i]).spawn(1)[0])
        arm_cols = ctx.arm_cols
        rho = float(np.exp(-env.dt / tau)) if tau > 0 else 0.0  # 0: white (eps = xi exactly)
        eps = None
    for k in range(n):
        a_t, ok = teacher.label(priv["sensors"], priv["command"])
        frames[k], labels[k], t_ok[k] = env.frame, a_t, ok
        for j, (t_j, k5) in enumerate(zip(ctx.relabel_teachers, relabel)):
            re_labels[j, k], re_ok[j, k] = t_j.label(priv["sensors"], {**priv["command"], "stiffness": k5})
        force[k] = priv["wrench_W"][i_f, :3]
        couple[k] = priv["wrench_W"][i_c, 3:]
        _teacher_estimate(teacher.diagnostics, force_est[k], couple_est[k])
        a = a_t
        if ctx.has_student:
            a_s = np.asarray(env.spec.model.run(obs[None]), float).reshape(-1)
            se += float(np.mean((a_s - a_t) ** 2))
            if rng.uniform() >= beta:
                a, s_act[k] = a_s, True
        if noise > 0 and not s_act[k]:
            xi = noise_rng.normal(0.0, noise, len(arm_cols))
            eps = xi if eps is None else rho * eps + np.sqrt(1.0 - rho * rho) * xi  # Ornstein-Uhlenbeck, std noise
            a = np.array(a, float)
            a[arm_cols] += eps
        res = env.step(a)
        obs, priv = res.obs, res.privileged
        refused += int(not res.info["accepted"])
        if res.done:
            fell = bool(res.info["fell"])
            break
    m = k + 1
    copies = []
    for j, k5 in enumerate(relabel):
        f_j = frames[:m].copy()
        f_j[:, ctx.stiffness_slice] = ctx.stiffness_frame(k5)
        copies.append((f_j, re_labels[j, :m].copy(), re_ok[j, :m].copy()))
    return RolloutResult(frames[:m], labels[:m], t_ok[:m], s_act[:m], fell, refused, se, idx, time.perf_counter() - t0,
                         force[:m].reshape(m, -1), couple[:m].reshape(m, -1), copies,
                         force_est[:m].reshape(m, -1), couple_est[:m].reshape(m, -1))


def _teacher_estimate(diagnostics: dict, force_est: np.ndarray, couple_est: np.ndarray) -> None:
    """Write the teacher's load estimate of one tick into ``force_est`` (len(AUX_FORCE_LINKS), 3) [N] and
    ``couple_est`` (len(AUX_COUPLE_LINKS), 3) [N m] (world axes), from its diagnostics' ``f_est.<link>`` /
    ``c_est.<link>``; a value it did not give stays as it is (NaN: unknown)."""
    for out, kind, links in ((force_est, "f_est", AUX_FORCE_LINKS), (couple_est, "c_est", AUX_COUPLE_LINKS)):
        for j, b in enumerate(links):
            v = diagnostics.get(f"{kind}.{b}")
            if v is not None:
                out[j] = v


def _relabel_commands(ctx: _Context, seed: int, r: int, i: int) -> list[np.ndarray]:
    """The stiffness commands (5,) RAW of the relabelling teachers of episode ``i`` of round ``r``: log-uniform
    over the teleop's ranges, from their own RNG (the episode's draws are unchanged by the option)."""
    if not ctx.relabel_teachers:
        return []
    from contactflow.lac.train.env import episode_rng, sample_stiffness

    rng = episode_rng(seed, r, i, 1)  # the episode's RNG is episode_rng(seed, r, i)
    return [sample_stiffness(ctx.env.robot, rng) for _ in ctx.relabel_teachers]


_CTX: _Context | None = None
_ROWS: list | None = None


def _init_worker(cfg: TrainConfig, student_model: str | None) -> None:
    global _CTX
    _CTX = _Context(cfg, _ROWS, student_model)


def _run_job(job: tuple[int, int, float]) -> tuple[int, RolloutResult]:
    r, i, beta = job
    return i, rollout_episode(_CTX, r, i, beta)


def _rollouts(cfg: TrainConfig, rows: list, r: int, student_model: str | None, workers: int,
              tick: Callable[[int], None] | None) -> list[RolloutResult]:
    global _ROWS
    beta = cfg.dagger.beta(r) if student_model is not None else 1.0
    jobs = [(r, i, beta) for i in range(cfg.dagger.episodes_per_round)]
    out: dict[int, RolloutResult] = {}
    if workers <= 1:
        ctx = _Context(cfg, rows, student_model)
        for job in jobs:
            out[job[1]] = rollout_episode(ctx, *job)
            if tick:
                tick(1)
    else:
        _ROWS = rows  # inherited by the forked workers
        with mp.get_context("fork").Pool(min(workers, len(jobs)), initializer=_init_worker,
                                         initargs=(cfg, student_model)) as pool:
            for i, res in pool.imap_unordered(_run_job, jobs):
                out[i] = res
                if tick:
                    tick(1)
        _ROWS = None
    return [out[i] for i in range(len(jobs))]


# --------------------------------------------------------------------------- data


def window_index(first: np.ndarray, idx: np.ndarray, history: int) -> np.ndarray:
    """Indices of the ``history`` frames of each sample, oldest first, clamped at the episode's
    first frame (the deploy history's ``first_frame`` fill).

    Args:
        first: (N,) index of the first frame of each sample's episode. idx: (B,) sample indices.
        history: frames per window (64).

    Returns:
        (B, history) int64 frame indices.
    """
    w = idx[:, None] + np.arange(-history + 1, 1)[None, :]
    return np.maximum(w, first[idx][:, None])


def _with_relabelled(results: list[RolloutResult]) -> list[RolloutResult]:
    """The episodes and, after each, its relabelled copies as episodes of their own (the same states, fall and
    forces; no student action counted in them, no on-policy error)."""
    out = []
    for x in results:
        out.append(x)
        for f_j, l_j, ok_j in x.relabelled:
            out.append(dataclasses.replace(x, frames=f_j, labels=l_j, teacher_ok=ok_j, on_policy_se=0.0, refused=0,
                                           student_acted=np.zeros_like(x.student_acted), relabelled=[]))
    return out


def _save_round(path: Path, results: list[RolloutResult]) -> None:
    results = _with_relabelled(results)
    with replaced_atomically(path, ".tmp.npz") as tmp:
        np.savez(tmp, frames=np.concatenate([x.frames for x in results]),
                 labels=np.concatenate([x.labels for x in results]),
                 teacher_ok=np.concatenate([x.teacher_ok for x in results]),
                 student_acted=np.concatenate([x.student_acted for x in results]),
                 ep_len=np.array([len(x.frames) for x in results]), fell=np.array([x.fell for x in results]),
                 row_index=np.array([x.row_index for x in results]), refused=np.array([x.refused for x in results]),
                 force=np.concatenate([x.force for x in results]), couple=np.concatenate([x.couple for x in results]),
                 force_est=np.concatenate([x.force_est for x in results]),
                 couple_est=np.concatenate([x.couple_est for x in results]))


def join_aggregates(parts: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """One aggregate of several (:func:`load_rounds`' dicts, in order): arrays concatenated, each part's
    ``first`` shifted by the samples before it."""
    if len(parts) == 1:
        return parts[0]
    out = {k: np.concatenate([p[k] for p in parts]) for k in ("frames", "labels", "ok") + _LOAD_KEYS}
    offsets = np.cumsum([0] + [len(p["frames"]) for p in parts[:-1]])
    out["first"] = np.concatenate([p["first"] + o for p, o in zip(parts, offsets)])
    return out


# the per-sample loads a round records (load_rounds): the true ones and the teacher's estimate of them
_LOAD_KEYS = ("force", "couple", "force_est", "couple_est")

# the keys of a run's configuration that decide its frames and labels: a prior run must share them
_PRIOR_RUN_KEYS = ("robot", "spec", "expert_config", "dagger.label_limit_margin_rad")


def prior_aggregate(cfg: TrainConfig, out: Path, spec) -> tuple[dict[str, np.ndarray] | None, list[dict]]:
    """The recorded rounds of ``cfg.dagger.prior_runs`` as one aggregate, and their provenance.

    A prior run must have been made for this run's deploy contract: its ``student.onnx`` carries the deploy
    metadata of ``spec`` (:data:`~contactflow.lac.train.student.DEPLOY_METADATA_KEYS`: joint orders, gains,
    observation layout, history, the spec file's SHA-256), its configuration this run's robot, spec name,
    teacher configuration and label margin, and its frames and labels the spec's sizes.

    Returns:
        (aggregate or None when there is no prior run, one record per run: ``path`` (absolute),
        ``rounds``, ``samples``, ``episodes``, ``sha256`` (of its round files, in order), its
        ``git_revision``, ``dataset`` and ``seed``).

    Raises:
        ConfigError: a prior run is missing, is this run or given twice, has no recorded round or an
            unreadable one, or differs from this run in one of the keys that decide the frames and labels,
            in its deploy metadata (the key named) or in the frame or action size.
    """
    import yaml

    from contactflow.lac.train.student import deploy_contract_mismatch, deploy_metadata, metadata_strings, read_metadata
    from contactflow.paths import sha256_of_files

    parts, records, seen = [], [], {}
    mine = to_dict(cfg)
    deploy = metadata_strings(deploy_metadata(spec))
    sizes = (spec.frame_dim, len(spec.joint_names))
    for given in cfg.dagger.prior_runs:
        run_dir = Path(given)
        where = f"dagger.prior_runs: {given}"
        if run_dir.resolve() == Path(out).resolve():
            raise ConfigError(f"{where}: that is this run's own output folder (--out): a run cannot pool its own data")
        if run_dir.resolve() in seen:
            raise ConfigError(f"{where}: the same run as {seen[run_dir.resolve()]} (its data would count twice)")
        seen[run_dir.resolve()] = given
        if not (run_dir / "config.yaml").is_file():
            rel = "" if run_dir.is_absolute() else f"; a relative path is read from the working directory, {Path.cwd()}"
            raise ConfigError(f"{where}: not a `contactflow lac train` run folder (no config.yaml{rel})")
        theirs = yaml.safe_load((run_dir / "config.yaml").read_text()) or {}
        for key in _PRIOR_RUN_KEYS:
            a, b = mine, theirs
            for part in key.split("."):
                a, b = (a or {}).get(part), (b or {}).get(part)
            if a != b:
                raise ConfigError(f"{where}: {key} is {b!r} there and {a!r} here: its frames or labels are not this run's")
        model = run_dir / "student.onnx"
        if not model.is_file():
            raise ConfigError(f"{where}: no student.onnx (its deploy contract cannot be checked)")
        theirs_meta = read_metadata(model)
        key = deploy_contract_mismatch(theirs_meta, deploy)
        if key is not None:
            raise ConfigError(f"{where}: deploy metadata {key!r} of {model} differs from this run's spec "
                              f"({cfg.spec}): its frames or actions are not this run's")
        files = sorted((run_dir / "data").glob("round_[0-9][0-9][0-9].npz"))
        if not files:
            raise ConfigError(f"{where}: no recorded round (data/round_XXX.npz)")
        if [f.name for f in files] != [f"round_{r:03d}.npz" for r in range(len(files))]:
            raise ConfigError(f"{where}: its rounds are not 0..{len(files) - 1} ({[f.name for f in files]})")
        try:
            agg = load_rounds(run_dir / "data", len(files) - 1)
        except (OSError, KeyError, ValueError) as exc:
            raise ConfigError(f"{where}: a recorded round cannot be read ({type(exc).__name__}: {exc})") from None
        if (agg["frames"].shape[1], agg["labels"].shape[1]) != sizes:
            raise ConfigError(f"{where}: frames x actions {agg['frames'].shape[1]} x {agg['labels'].shape[1]}, "
                              f"expected {sizes[0]} x {sizes[1]} (spec {cfg.spec})")
        parts.append(agg)
        run = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").is_file() else {}
        records.append({"path": str(run_dir.resolve()), "rounds": len(files), "samples": int(len(agg["frames"])),
                        "episodes": int(len(np.unique(agg["first"]))), "sha256": sha256_of_files(files),
                        "git_revision": run.get("git_revision", "unknown"), "dataset": run.get("dataset", {}),
                        "seed": theirs.get("seed")})
    if not parts:
        return None, []
    return join_aggregates(parts), records


def load_rounds(data_dir: Path, upto: int) -> dict[str, np.ndarray]:
    """The aggregate of rounds ``0..upto`` of a run's ``data/`` folder, as training reads it.

    Returns:
        ``frames`` (N, frame_dim) float32, ``labels`` (N, n_act) float32, ``ok`` (N,) the teacher's own
        label, ``first`` (N,) int64 the index of each sample's episode's first sample, ``force`` (N, 3 * len(AUX_FORCE_LINKS))
        the true hand/torso forces [N], ``couple`` (N, 3 * len(AUX_COUPLE_LINKS)) the true hand couples [N m],
        ``force_est`` and ``couple_est`` the teacher's estimate of them (:class:`RolloutResult`); each NaN for rounds
        saved without it.
    """
    frames, labels, ok, first = [], [], [], []
    loads = {k: [] for k in _LOAD_KEYS}
    n = 0
    for r in range(upto + 1):
        with np.load(data_dir / f"round_{r:03d}.npz") as d:
            for k in _LOAD_KEYS:
                width = 3 * len(AUX_FORCE_LINKS if k.startswith("force") else AUX_COUPLE_LINKS)
                loads[k].append(d[k] if k in d.files else np.full((len(d["frames"]), width), np.nan, np.float32))
            frames.append(d["frames"])
            labels.append(d["labels"])
            ok.append(d["teacher_ok"])
            for L in d["ep_len"]:
                first.append(np.full(int(L), n, np.int64))
                n += int(L)
    return {"frames": np.concatenate(frames), "labels": np.concatenate(labels), "ok": np.concatenate(ok),
            "first": np.concatenate(first), **{k: np.concatenate(v) for k, v in loads.items()}}


# --------------------------------------------------------------------------- provenance


def loss_weights(cfg: TrainConfig, spec):
    """Per-joint weights of the squared action error (``optim.loss``), (n_act,) float32 tensor, policy
    order: ``action`` ones; ``torque`` (Kp scale)^2 per joint, mean 1; ``torque_floor`` those raised to
    >= 1 (no joint weighs less than in the action loss: the arms); then each joint of
    ``optim.joint_loss_scale`` multiplied by its factor.

    Raises:
        ConfigError: a name of ``optim.joint_loss_scale`` that is not a joint of the spec.
    """
    import torch

    names = list(spec.joint_names)
    if cfg.optim.loss not in ("torque", "torque_floor"):
        w = torch.ones(len(names))
    else:
        w = torch.as_tensor((spec.kp[spec.policy_to_robot] * spec.scale) ** 2, dtype=torch.float32)
        w = w / w.mean()
        if cfg.optim.loss == "torque_floor":
            w = torch.clamp(w, min=1.0)
    unknown = sorted(set(cfg.optim.joint_loss_scale) - set(names))
    if unknown:
        raise ConfigError(f"optim.joint_loss_scale: unknown joint(s) {unknown}{did_you_mean(unknown, names)}; "
                          f"expected some of the policy's joints {names}")
    for name, factor in cfg.optim.joint_loss_scale.items():
        w[names.index(name)] *= factor
    return w


def git_revision() -> str:
    """``git describe --always --dirty`` of the source tree ("unknown" outside a checkout)."""
    from contactflow.recording.store import git_revision as describe

    return describe(Path(__file__).resolve().parents[3])


@functools.cache
def _process_revision() -> str:
    """:func:`git_revision` when this process first asked: the code it runs (a commit made while a run goes on does not
    change that code)."""
    return git_revision()


def _dataset_ref(path: Path, out: Path) -> str:
    """How a run records its dataset's place: relative to the run directory when it lies inside it (the
    default ``OUT/dataset``, a symlink there included: the record and the exported model stay valid
    wherever the run is moved or shipped), else as an absolute path (valid from any working directory)."""
    p, o = os.path.abspath(path), os.path.abspath(out)
    if os.path.commonpath([p, o]) == o:
        return Path(os.path.relpath(p, o)).as_posix()
    return p


def _is_recorded_dataset(used: str, path: Path, out: Path) -> bool:
    """Whether ``path`` (the dataset given now) is the one a run recorded as ``used``: relative to the run
    directory (:func:`_dataset_ref`), or a path as recorded by older runs (absolute, or relative to the
    working directory)."""
    now = Path(path).resolve()
    return (Path(out) / used).resolve() == now or Path(used).resolve() == now


def _dataset_info(path: Path, out: Path) -> dict:
    man = path / "manifest.json"
    info = {"path": _dataset_ref(path, out)}
    if man.is_file():
        m = json.loads(man.read_text())
        info.update(seed=m.get("seed"), config_hash=m.get("config_hash"), frames=m.get("frames"))
    return info


# --------------------------------------------------------------------------- checkpoints and export


def aux_dim(cfg: TrainConfig) -> int:
    """Size of the student's auxiliary output: the forces on :data:`AUX_FORCE_LINKS` (``optim.aux_force_weight`` or
    ``student.wrench_input: force``), then the couples on :data:`AUX_COUPLE_LINKS` (``wrench_input: wrench``); 0: none."""
    if cfg.student.wrench_input == "wrench":
        return 3 * len(AUX_FORCE_LINKS) + 3 * len(AUX_COUPLE_LINKS)
    return 3 * len(AUX_FORCE_LINKS) if cfg.optim.aux_force_weight > 0 or cfg.student.wrench_input == "force" else 0


def aux_target(cfg: TrainConfig, data: dict[str, np.ndarray], target: str | None = None) -> np.ndarray:
    """The auxiliary output's target for an aggregate (:func:`load_rounds`): (N, :func:`aux_dim`) float32, forces in
    units of :data:`AUX_FORCE_UNIT_N`, couples of :data:`AUX_COUPLE_UNIT_NM`; NaN where a round did not record them.
    ``target`` (default ``optim.aux_target``): the true loads (``load``) or the teacher's estimate of them (``teacher``).

    Raises:
        ValueError: the configuration has no auxiliary output (:func:`aux_dim` 0)."""
    if aux_dim(cfg) == 0:
        raise ValueError("aux_target: the configuration has no auxiliary output (aux_dim 0)")
    suffix = "_est" if (target or cfg.optim.aux_target) == "teacher" else ""
    parts = [data["force" + suffix] / AUX_FORCE_UNIT_N]
    if cfg.student.wrench_input == "wrench":
        parts.append(data["couple" + suffix] / AUX_COUPLE_UNIT_NM)
    return np.concatenate(parts, axis=1).astype(np.float32)


def aux_tensors(cfg: TrainConfig, data: dict[str, np.ndarray], target: str | None = None) -> tuple:
    """``(aux_t, aux_known)`` for :func:`batch_loss` over a whole aggregate: the target (:func:`aux_target`, (N,
    aux_dim) float32 tensor; ``target`` as there, ``load`` for the true load whatever the run regressed) with NaN
    replaced by 0, and the (N, aux_dim) bool tensor of the values a round recorded; ``(None, None)`` without an
    auxiliary output."""
    import torch

    if aux_dim(cfg) == 0:
        return None, None
    aux_t = torch.from_numpy(aux_target(cfg, data, target))
    aux_known = torch.isfinite(aux_t)  # per value: rounds recorded before the couples have NaN there
    return torch.nan_to_num(aux_t), aux_known


def aux_rows(aux_t, aux_known, idx) -> tuple:
    """The rows ``idx`` of :func:`aux_tensors`' pair (a batch's ``aux_t``, ``aux_known`` for :func:`batch_loss`);
    ``(None, None)`` without an auxiliary output."""
    return (None, None) if aux_t is None else (aux_t[idx], aux_known[idx])


def batch_loss(cfg: TrainConfig, model, w, x, labels, aux_t=None, aux_known=None, rng: np.random.Generator | None = None):
    """The training loss of one batch (a scalar tensor): the ``w``-weighted squared action error (:func:`loss_weights`)
    plus, with an auxiliary output (:func:`aux_dim`), ``optim.aux_force_weight`` times its squared error over the
    values a round recorded.

    With ``student.wrench_input`` the actor is given the target load (``aux_t``: ``optim.aux_target``'s, the true load
    by default) where it is known, in a share
    ``optim.force_teacher_prob`` of the samples drawn from ``rng``, and the estimate elsewhere (where the action loss
    trains the estimate's head too, unless ``optim.estimate_action_grad`` is false).

    Args:
        x: (B, H, frame_dim) windows. labels: (B, n_act) teacher actions. w: (n_act,) loss weights.
        aux_t: (B, aux_dim) targets with NaN replaced, aux_known: (B, aux_dim) (rows of :func:`aux_tensors`)
            bool, the values recorded (both None: no auxiliary term). rng: the batch generator (``wrench_input``).
    """
    import torch

    if cfg.student.wrench_input != "none":
        if aux_t is None or aux_known is None or rng is None:
            raise ValueError("batch_loss: student.wrench_input needs aux_t, aux_known and rng")
        given = aux_known & torch.from_numpy(rng.random(len(x)) < cfg.optim.force_teacher_prob)[:, None]
        pred, aux = model.forward_aux(x, aux_t, given, detach_estimate=not cfg.optim.estimate_action_grad)
    else:
        pred, aux = model.forward_aux(x)
    loss = torch.mean(w * (pred - labels) ** 2)
    if aux is not None and aux_known is not None and bool(aux_known.any()):
        loss = loss + cfg.optim.aux_force_weight * torch.mean((aux - aux_t)[aux_known] ** 2)
    return loss


def new_student(cfg: TrainConfig, spec):
    """A :class:`~contactflow.lac.train.student.Student` shaped by the deploy spec (history, frame,
    actions, where the raw stiffness sits in a frame)."""
    from contactflow.lac.train.student import Student, last_action_map, tracking_feature_map

    k = spec.term_slice("stiffness")
    if k is None:
        raise ConfigError(f"{spec.file}: no 'stiffness' observation term: a LAC student reads the stiffness command")
    tracking = tracking_feature_map(spec) if cfg.student.tracking_features or cfg.student.force_head_frame else None
    return Student(cfg.student, history=spec.cfg.history.length, frame_dim=spec.frame_dim,
                   n_act=len(spec.joint_names), stiffness=k,
                   aux_dim=aux_dim(cfg),
                   tracking=tracking if cfg.student.tracking_features else None,
                   last_action=(last_action_map(spec, cfg.student.residual_action)
                                if cfg.student.residual_action != "none" else None),
                   head_tracking=tracking if cfg.student.force_head_frame else None,
                   compliance=compliance_map(cfg, spec) if cfg.student.compliance_input else None,
                   arm_statics=_arm_statics(cfg, spec))


def _arm_statics(cfg: TrainConfig, spec) -> tuple | None:
    """``Student``'s ``arm_statics`` with ``student.arm_estimate`` not ``learned`` (the teacher's estimator on the spec's
    robot, :func:`~contactflow.lac.train.arm_statics.arm_statics_params`, in the load estimate's units), else None."""
    if cfg.student.arm_estimate == "learned":
        return None
    from contactflow.lac.expert import load_expert_config
    from contactflow.lac.train.arm_statics import arm_statics_params
    from contactflow.robot import load_robot

    params = arm_statics_params(load_robot(cfg.robot), spec, load_expert_config(cfg.expert_config))
    return params, AUX_FORCE_UNIT_N, AUX_COUPLE_UNIT_NM


def load_checkpoint(path: str | Path) -> dict:
    """Read a checkpoint (``checkpoints/round_XXX.pt``) or the latest one of a run directory.

    Raises:
        ConfigError: no checkpoint found, or the file is not one.
    """
    import torch

    p = Path(path)
    if p.is_dir():
        found = sorted((p / "checkpoints").glob("round_*.pt"))
        if not found:
            raise ConfigError(f"{p}: no checkpoints/round_*.pt (not a training run directory, or no round finished)")
        p = found[-1]
    if not p.is_file():
        raise ConfigError(f"{p}: checkpoint not found")
    try:
        ck = torch.load(p, map_location="cpu", weights_only=False)
    except Exception as exc:  # noqa: BLE001 - torch raises many types for a bad file: name it
        raise ConfigError(f"{p}: not a readable checkpoint ({type(exc).__name__}: {exc})") from None
    if not isinstance(ck, dict) or "model" not in ck or "config" not in ck:
        raise ConfigError(f"{p}: not a contactflow lac train checkpoint")
    ck["path"] = str(p)
    return ck


def _metadata(spec, cfg_dict: dict, run: dict, round_: int, averaged: Sequence[int] = ()) -> dict:
    from contactflow.lac.train.student import deploy_metadata

    extra = {"train_rounds_averaged": [int(r) for r in averaged]} if averaged else {}
    return {**deploy_metadata(spec), "training": "contactflow lac train (DAgger from lac_expert)",
            "train_config": cfg_dict, "train_round": round_, **extra, "dataset": run.get("dataset", {}),
            "dataset_seed": run.get("dataset", {}).get("seed"), "git_revision": run.get("git_revision", "unknown"),
            **({"prior_runs": run["prior_runs"]} if run.get("prior_runs") else {})}


def _same_run_keys(cfg_dict: dict) -> dict:
    """The configuration keys that make two runs (or two checkpoints) one run: all but the validation
    (it does not change the result) and ``dagger.rounds`` (more rounds extend a run, ``--resume``)."""
    c = {k: v for k, v in cfg_dict.items() if k != "validation"}
    c["dagger"] = {k: v for k, v in c.get("dagger", {}).items() if k != "rounds"}
    return c


def _as_loaded(cfg_dict: dict, source) -> dict:
    """A recorded configuration as the code loads it today: keys the record did not have yet count as their defaults
    (so a run resumed across a change that added keys compares equal); the record itself where it no longer loads."""
    try:
        return to_dict(load_config(TrainConfig, cfg_dict, source=str(source)))
    except ConfigError:
        return cfg_dict


def best_checkpoint(runs: Sequence[str | Path]) -> Path:
    """The checkpoint of the round that the validation suite scored best over one or more run directories
    (:func:`best_of_runs`; one run: :func:`best_round`), ``RUN/checkpoints/round_XXX.pt``.

    Raises:
        ConfigError: no run, a run given twice, a path that does not exist or is not a run directory, a run with
            no round scored, runs not comparable (:func:`best_of_runs`), the chosen round's checkpoint missing.
    """
    runs = [Path(r) for r in runs]
    if not runs:
        raise ConfigError("--best: no run directory given")
    for k, run_dir in enumerate(runs):
        if run_dir.resolve() in [r.resolve() for r in runs[:k]]:
            raise ConfigError(f"{run_dir}: given twice")
        if not run_dir.exists():
            raise ConfigError(f"{run_dir}: no such run directory")
        if not run_dir.is_dir():
            raise ConfigError(f"{run_dir}: --best needs the run directory (not a checkpoint file)")
    i, r = best_of_runs([load_checkpoint(d)["log"] for d in runs], [str(d) for d in runs])
    path = runs[i] / "checkpoints" / f"round_{r:03d}.pt"
    if not path.is_file():
        raise ConfigError(f"{runs[i]}: round {r}, the one its validation suite scored best, has no checkpoint ({path})")
    return path


def export_checkpoint(ckpt: str | Path | Sequence[str | Path], out: str | Path, *, average: Sequence[int] = (),
                      best: bool = False) -> Path:
    """Export a checkpoint (or the latest of a run directory) to LAC's deploy ONNX.

    Args:
        ckpt: checkpoint file or run directory; with ``best``, one or more run directories (the seeds of a
            recipe: the best round over them all, :func:`best_of_runs`). out: the ``.onnx`` file.
        average: rounds whose weights are averaged into the exported student, uniformly
            (stochastic weight averaging over DAgger rounds, Izmailov et al., 2018: each round
            warm-starts from the one before, so their weights lie in one basin); ``ckpt`` must then
            be the run directory. Empty: the checkpoint as it is.
        best: export the round of the run directory ``ckpt`` that its validation suite scored best
            (:func:`best_round` over the latest checkpoint's log) instead of the latest; of several run
            directories, the best of their best rounds.

    Returns:
        The written path.

    Raises:
        ConfigError: no such checkpoint; ``average`` given with a checkpoint file, naming a
            round without a checkpoint, or rounds whose configuration or normaliser differ; ``best``
            with a checkpoint file, with ``average``, or for a run whose log has no validation suite;
            several runs without ``best``; runs scored by different suites (:func:`best_of_runs`).
    """
    import torch

    from contactflow.lac.train.env import load_train_spec
    from contactflow.lac.train.student import export_onnx
    from contactflow.robot import load_robot

    runs = [Path(c) for c in ([ckpt] if isinstance(ckpt, (str, os.PathLike)) else ckpt)]
    if len(runs) != 1 and not best:
        raise ConfigError(f"{len(runs)} runs given: several runs are exported with --best only (the best round over them; "
                          f"--average takes one run directory)")
    if best and average:
        raise ConfigError("--best and --average are exclusive")
    ckpt = best_checkpoint(runs) if best else runs[0]
    if average:
        run_dir = Path(ckpt)
        if not run_dir.is_dir():
            raise ConfigError(f"{run_dir}: averaging rounds needs the run directory, not a checkpoint file")
        cks = [load_checkpoint(run_dir / "checkpoints" / f"round_{int(r):03d}.pt") for r in sorted(set(average))]
        ck = cks[-1]
        mine = _same_run_keys(_as_loaded(ck["config"], ck["path"]))
        for other in cks[:-1]:
            if _same_run_keys(_as_loaded(other["config"], other["path"])) != mine:
                raise ConfigError(f"{other['path']}: another training configuration than {ck['path']}: not averaged")
            for key in ("obs_mean", "obs_std"):
                if not torch.equal(other["model"][key], ck["model"][key]):
                    raise ConfigError(f"{other['path']}: another normaliser ({key}) than {ck['path']}: not averaged")
        state = {k: (sum(c["model"][k].double() for c in cks) / len(cks)).to(v.dtype) if v.is_floating_point() else v
                 for k, v in ck["model"].items()}
        averaged = [int(c["round"]) for c in cks]
    else:
        ck = load_checkpoint(ckpt)
        state, averaged = ck["model"], []
    cfg = load_config(TrainConfig, ck["config"], source=ck["path"])
    robot = load_robot(cfg.robot)
    spec = load_train_spec(cfg.spec, robot)
    model = new_student(cfg, spec)
    model.load_state_dict(state)
    return export_onnx(model, out, _metadata(spec, ck["config"], ck.get("run", {}), ck["round"], averaged))


# --------------------------------------------------------------------------- validation


class _RunnerController:
    """The deploy ``PolicyRunner`` behind the ``reset`` / ``step`` interface of ``run_wrench_event``."""

    def __init__(self, spec):
        from contactflow.policy import PolicyRunner

        self.runner = PolicyRunner(spec)

    def reset(self, sensors) -> None:
        self.runner.reset()

    def step(self, sensors, command):
        return self.runner.step(sensors, command)


def validate(cfg: TrainConfig, model: str | Path) -> dict:
    """The student alone on the G1 PD simulator (:class:`~contactflow.lac.train.config.ValidationCfg`).

    Args:
        cfg: the training configuration (``validation``, ``robot``, ``spec``). model: the student ONNX.

    Returns:
        ``stand_fell``, ``stand_drift_m`` [m]; ``push_k`` (the K values) with ``push_fell`` and
        ``push_displacement_m`` [m] (NaN when fallen) per K; ``monotonic``: no fall and the
        displacement strictly decreasing in K; ``refused`` (actions refused by the runner, all runs).
    """
    from contactflow.lac.compliance import run_wrench_event, stand_command
    from contactflow.lac.train.env import load_train_spec
    from contactflow.robot import load_robot
    from contactflow.sim.pd_robot import PDRobotSim, PDSimConfig

    v = cfg.validation
    robot = load_robot(cfg.robot)
    spec = load_train_spec(cfg.spec, robot, model=model)
    sim = PDRobotSim(PDSimConfig(), robot)
    ctl = _RunnerController(spec)
    plog = logging.getLogger("contactflow.policy")
    level = plog.level
    plog.setLevel(logging.ERROR)
    try:
        k0 = stand_command(robot, [100.0, 100.0, 100.0, 30.0, 30.0])
        st = run_wrench_event(sim, ctl, k0, None, np.zeros(6), duration_s=v.stand_s)
        refused = ctl.runner.n_rejected
        ch = {"left": 0, "right": 1, "torso": 2}
        grp = "torso" if v.body == "torso_link" else ("left" if v.body.startswith("left") else "right")
        ks = sorted(v.stiffness)
        fell, disp = [], []
        for k in ks:
            stiff = np.array([100.0, 100.0, 100.0, 30.0, 30.0])
            stiff[ch[grp]] = k
            r = run_wrench_event(sim, ctl, stand_command(robot, stiff), v.body, [v.force_n, 0, 0, 0, 0, 0],
                                 t0_s=2.0, ramp_s=0.5, hold_s=3.0, after_s=0.5)
            fell.append(bool(r.fell))
            disp.append(float(r.displacement_m))
            refused += ctl.runner.n_rejected
    finally:
        plog.setLevel(level)
    d = np.array(disp)
    mono = (not any(fell)) and bool(np.all(np.diff(d) < 0))
    return {"stand_fell": bool(st.fell), "stand_drift_m": float(st.drift_m), "push_k": ks, "push_fell": fell,
            "push_displacement_m": disp, "monotonic": mono, "refused": int(refused)}


#: the teacher's table of the validation suite, run once per run directory (:func:`validate_suite`)
SUITE_TEACHER_FILE = "validation_teacher.json"


# suites a run's configuration may still name (its config.yaml, for --resume or --config) -> what replaced them
REMOVED_SUITES = {"selection": "the envelope's scenarios at 80 % of its loads, removed on 2026-12-05: it did not see falls "
                                "at the loads' margin (docs/lac_policy.md); give `envelope` (validation.suite_seed keeps its "
                                "episodes apart from the evaluation's)"}


def suite_eval_config(cfg: TrainConfig) -> EvalConfig:
    """The evaluation configuration of ``validation.suite``.

    Returns:
        ``robots/g1/lac_eval.yaml`` with the validation's ``suite_trials`` and ``suite_seed``.

    Raises:
        ConfigError: the suite is not one of that file's (named as ``validation.suite``; one of
            :data:`REMOVED_SUITES` says what replaced it), or ``suite_seed`` is that
            file's ``seed``: the rounds would be chosen on the very episodes ``contactflow lac eval`` reports.
    """
    from contactflow.lac.evaluate import default_eval_config_path, load_eval_config

    v = cfg.validation
    reported = load_eval_config()
    if v.suite not in reported.suites:
        if v.suite in REMOVED_SUITES:
            raise ConfigError(f"validation.suite: {v.suite!r} was {REMOVED_SUITES[v.suite]}")
        raise ConfigError(f"validation.suite: {v.suite!r} is not a suite of {default_eval_config_path()}; known: "
                          f"{sorted(reported.suites)}{did_you_mean([v.suite], reported.suites)}")
    if v.suite_seed == reported.seed:
        raise ConfigError(f"validation.suite_seed: {v.suite_seed} is the evaluation's own seed (`seed` of "
                          f"{default_eval_config_path()}): the rounds would be chosen on the episodes it reports; "
                          f"give another")
    return dataclasses.replace(reported, trials=v.suite_trials, seed=v.suite_seed)


def validate_suite(cfg: TrainConfig, model: str | Path, out: str | Path, *, workers: int = 1,
                   save_as: str | Path | None = None, round_: int | None = None) -> dict:
    """``validation.suite`` on the student against the teacher (``contactflow lac eval``'s episodes and verdicts).

    The teacher's table is computed once and kept in ``out/validation_teacher.json`` (again when the suite's
    configuration, the teacher's or the git revision of the code this process runs changed: it carries a digest of them).

    Args:
        cfg: the training configuration (``validation.suite``, ``suite_trials``, ``suite_seed``; ``spec``).
        model: the student ONNX. out: the run directory. workers: evaluation worker processes.
        save_as: where to write the whole table (student, teacher and comparison: ``contactflow lac eval``'s JSON,
            plus ``validation_of``: the model file as it was then, its SHA-256 and ``round_``); ``None``: not written.
        round_: the training round the model is of (recorded in that table).

    Returns:
        ``suite``, ``trials``, ``seed``, ``config_digest`` (16 hex digits of the suite's evaluation configuration:
        scenarios, loads, grids, profile, trials, seed), ``scenarios`` (how many), ``decreasing`` (how many decrease in K with no
        fall, the evaluation's verdict), ``not_decreasing`` (their names), ``falls`` / ``episodes`` (the student's),
        ``within`` / ``points`` (the (scenario, K) points whose primary metric is within ``tolerance`` of the
        teacher's, :func:`~contactflow.lac.evaluate.compare`), ``tolerance`` (0.25), ``teacher_falls``, ``wall_s`` [s].

    Raises:
        ConfigError: as :func:`suite_eval_config`.
    """
    from contactflow.lac.evaluate import compare, merge_tables, run_eval
    from contactflow.lac.expert import load_expert_config
    from contactflow.paths import sha256_of_files

    t0 = time.perf_counter()
    v = cfg.validation
    ecfg = suite_eval_config(cfg)
    config_digest = json_digest([v.suite, dataclasses.asdict(ecfg)])
    digest = json_digest([v.suite, dataclasses.asdict(ecfg), dataclasses.asdict(load_expert_config()), _process_revision()])
    tpath = Path(out) / SUITE_TEACHER_FILE
    teacher = json.loads(tpath.read_text()) if tpath.is_file() else None
    if teacher is None or teacher.get("validation_digest") != digest:
        teacher = run_eval(["expert"], suite=v.suite, cfg=ecfg, workers=workers, progress=False)
        teacher["validation_digest"] = digest
        write_text_atomic(tpath, json.dumps(teacher))
    student = f"policy:{cfg.spec}:{model}"
    table = merge_tables(run_eval([student], suite=v.suite, cfg=ecfg, workers=workers, progress=False), teacher)
    res = table["results"][student]
    table["comparison"] = compare(table, student, "expert")
    cmp = table["comparison"]["scenarios"]
    if save_as is not None:
        table["validation_of"] = {"model": str(model), "sha256": sha256_of_files([model]), "round": round_}
        Path(save_as).parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(save_as, json.dumps(table, indent=1))
    return {"suite": v.suite, "trials": ecfg.trials, "seed": ecfg.seed, "tolerance": table["comparison"]["tolerance"],
            "config_digest": config_digest, "scenarios": len(res),
            "decreasing": sum(e["monotonic"]["decreasing"] for e in res.values()),
            "not_decreasing": [s for s, e in res.items() if not e["monotonic"]["decreasing"]],
            "falls": table["falls"][student]["fell"], "episodes": table["falls"][student]["episodes"],
            "within": sum(sum(c["within"]) for c in cmp.values()), "points": sum(len(c["within"]) for c in cmp.values()),
            "teacher_falls": table["falls"]["expert"]["fell"], "wall_s": time.perf_counter() - t0}


def suite_score(result: dict) -> tuple[int, int, int]:
    """The order of :func:`validate_suite` results, better last: (scenarios decreasing, -falls, points within 25 %).
    A response that follows the commanded stiffness comes first, then not falling, then closeness to the teacher."""
    return (int(result["decreasing"]), -int(result["falls"]), int(result["within"]))


def best_round(log_rows: Sequence[dict]) -> int | None:
    """The round of a run's log whose ``validation_suite`` scores best (:func:`suite_score`; of equal scores the later
    round, trained on more data), among the rounds scored by the same suite, trials, seed and evaluation configuration
    (``config_digest``: a scenario added to ``lac_eval.yaml`` between a run and its ``--resume``) as the last scored
    one: like is compared with like; ``None`` if no round ran the suite."""
    row = _best_row(log_rows)
    return None if row is None else int(row["round"])


def _best_row(log_rows: Sequence[dict]) -> dict | None:
    """The log row :func:`best_round` chooses (its round, its ``validation_suite``), ``None`` if no round ran the suite."""
    rows = [r for r in log_rows if r.get("validation_suite")]
    if not rows:
        return None
    last = _suite_key(rows[-1]["validation_suite"])
    same = [(suite_score(r["validation_suite"]), int(r["round"]), k) for k, r in enumerate(rows)
            if _suite_key(r["validation_suite"]) == last]
    return rows[max(same)[2]]


def _suite_key(v: dict) -> tuple:
    """What makes two validation-suite results comparable: the suite, its trials and seed, the evaluation configuration."""
    return (v["suite"], v["trials"], v["seed"], v.get("config_digest"))


def best_of_runs(run_logs: Sequence[Sequence[dict]], names: Sequence[str]) -> tuple[int, int]:
    """The run and round that the validation suite scored best over several runs (e.g. the seeds of one recipe):
    each run's :func:`best_round`, then the best of those by :func:`suite_score`; of equal scores the run given first.

    Args:
        run_logs: each run's per-round log (``load_checkpoint(run)["log"]``). names: the runs' names, for messages.

    Returns:
        (index of the run in ``run_logs``, its round).

    Raises:
        ConfigError: a run with no round scored by the validation suite, or runs whose chosen rounds were scored by
            different suites, trials, seeds or evaluation configurations (not comparable), naming the run.
    """
    picks, first = [], None
    for i, (log, name) in enumerate(zip(run_logs, names, strict=True)):
        row = _best_row(log)
        if row is None:
            raise ConfigError(f"{name}: no round ran the validation suite (validation.suite null or validation.enabled "
                              f"false in its config.yaml); without --best the export takes its last round")
        r, v = int(row["round"]), row["validation_suite"]
        key = _suite_key(v)
        if first is None:
            first = (key, name)
        elif key != first[0]:
            raise ConfigError(f"{name}: its validation suite (suite, trials, seed, evaluation digest) {list(key)} is not "
                              f"{first[1]}'s {list(first[0])}: the runs are not compared")
        picks.append((suite_score(v), -i, r))
    _, neg_i, r = max(picks)
    return -neg_i, r


# --------------------------------------------------------------------------- training


def _plot(log_rows: list[dict], epochs: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 3, figsize=(15, 3.6))
    x = np.arange(len(epochs))
    ax[0].semilogy(x, [e["loss"] for e in epochs], "-o", ms=3)
    for e in epochs:
        if e["epoch"] == 0:
            ax[0].axvline(x[epochs.index(e)], color="0.85", lw=0.8)
    ax[0].set_xlabel("epoch (grey lines: new DAgger round)")
    ax[0].set_ylabel("training loss (weighted action MSE)")
    rr = [r for r in log_rows if r["round"] >= 1]
    if rr:
        ax[1].semilogy([r["round"] for r in rr], [r["on_policy_mse"] for r in rr], "-o",
                       label="student vs teacher on the round's states (plain action MSE)")
        ax[1].legend(loc="best", fontsize=8)
    ax[1].set_xlabel("DAgger round")
    ax[1].set_ylabel("action MSE on the round's rollouts")
    vr = [r for r in log_rows if "validation" in r]
    if vr:
        ks = vr[0]["validation"]["push_k"]
        for j, k in enumerate(ks):
            y = [np.nan if r["validation"]["push_fell"][j] else 100 * r["validation"]["push_displacement_m"][j] for r in vr]
            ax[2].plot([r["round"] for r in vr], y, "-o", ms=3, label=f"K = {k:g} N/m")
        ax[2].legend(loc="best", fontsize=8)
    ax[2].set_xlabel("DAgger round")
    ax[2].set_ylabel("student alone: push displacement [cm] (gap: fell)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _start_run(cfg: TrainConfig, out: Path, dataset, workers: int, resume: bool, progress: bool,
               echo: Callable[[str], None]):
    """:func:`train`'s checks and records before the first round: ``(run record, dataset rows, spec, prior
    aggregate, the run's checkpoints so far)``; writes ``run.json`` and ``config.yaml`` (and generates the dataset) only once every check passed
    but the dataset's own. Raises ConfigError as :func:`train` documents."""
    from contactflow.lac.augment import augment
    from contactflow.lac.dataset import read_episodes
    from contactflow.lac.train.env import load_train_spec
    from contactflow.robot import load_robot

    if cfg.validation.enabled and cfg.validation.suite:
        suite_eval_config(cfg)
    cfg_dict = to_dict(cfg)
    have = sorted((out / "checkpoints").glob("round_*.pt"))
    if have and not resume:
        raise ConfigError(f"{out}: holds a training run ({len(have)} round(s)); use --resume or a new directory")
    run_path = out / "run.json"
    if run_path.is_file():
        old = json.loads(run_path.read_text())
        oc, nc = _same_run_keys(_as_loaded(old.get("config", {}), run_path)), _same_run_keys(cfg_dict)
        if oc != nc:
            diff = sorted(k for k in set(oc) | set(nc) if oc.get(k) != nc.get(k))
            raise ConfigError(f"{out}: holds a run made with another configuration (sections {diff}); use a new directory, "
                              f"or --config {out / 'config.yaml'} to continue that run")
        if len(have) > cfg.dagger.rounds:
            raise ConfigError(f"{out}: holds {len(have)} rounds, more than dagger.rounds = {cfg.dagger.rounds}")
        run = dict(old, config=cfg_dict)
    else:
        run = {"config": cfg_dict, "git_revision": git_revision(), "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

    robot = load_robot(cfg.robot)
    spec = load_train_spec(cfg.spec, robot)
    # the prior runs before the dataset (minutes to generate): a missing or mismatched one is refused at once
    prior, prior_records = prior_aggregate(cfg, out, spec)
    if prior_records:
        for was, now in zip(run.get("prior_runs", []), prior_records):
            if was["sha256"] != now["sha256"]:
                raise ConfigError(f"{out}: dagger.prior_runs: the files of {now['path']} changed since the run began "
                                  f"(SHA-256 {now['sha256'][:12]}..., recorded {was['sha256'][:12]}...)")
        run["prior_runs"] = prior_records
        echo(f"prior runs: {sum(r['samples'] for r in prior_records)} samples of "
             f"{sum(r['episodes'] for r in prior_records)} episodes from {len(prior_records)} run(s) join the aggregate")

    # ---- the augmentation dataset
    out.mkdir(parents=True, exist_ok=True)
    if dataset is None:
        dpath = out / "dataset"
        t0 = time.perf_counter()
        s = augment(dpath, cfg.dagger.dataset_episodes, seed=cfg.dagger.dataset_seed, workers=workers, progress=progress)
        if s["shards_written"]:
            echo(f"dataset: generated {s['episodes_written']} episodes into {dpath} in {time.perf_counter() - t0:.1f} s "
                 f"({workers} worker(s))")
    else:
        dpath = Path(dataset)
        if not dpath.exists():
            raise ConfigError(f"--dataset {dpath}: not found")
    rows = read_episodes(dpath)
    if not rows:
        raise ConfigError(f"{dpath}: the dataset has no episode")
    man = dpath / "manifest.json"
    dt_aug = json.loads(man.read_text()).get("config", {}).get("profile", {}).get("dt_s") if man.is_file() else None
    if dt_aug is not None and abs(float(dt_aug) - 1.0 / 50.0) > 1e-9:
        raise ConfigError(f"{man}: profile.dt_s = {dt_aug}; the training episode reads the augmented motion at the "
                          f"50 Hz policy rate (0.02 s frames)")
    used = run.get("dataset", {}).get("path")
    if used is not None and not _is_recorded_dataset(used, dpath, out):
        raise ConfigError(f"{out}: the run used dataset {used}, not {dpath}")
    run["dataset"] = _dataset_info(dpath, out)
    (out / "data").mkdir(exist_ok=True)
    (out / "checkpoints").mkdir(exist_ok=True)
    write_text_atomic(run_path, json.dumps(run, indent=1, sort_keys=True))  # read back by --resume
    write_text_atomic(out / "config.yaml", config_yaml(cfg))
    return run, rows, spec, prior, have


def train(cfg: TrainConfig, out_dir: str | Path, *, dataset: str | Path | None = None, workers: int = 1,
          resume: bool = False, progress: bool = True, echo: Callable[[str], None] = print) -> dict:
    """Run (or resume) DAgger training into ``out_dir`` (module docstring).

    Args:
        cfg: the training configuration.
        out_dir: run directory (created).
        dataset: augmentation dataset directory; ``None``: one is generated into ``out_dir/dataset``
            with ``dagger.dataset_seed`` / ``dagger.dataset_episodes`` (resumable).
        workers: rollout worker processes.
        resume: continue after the last complete round of ``out_dir``.
        progress: tqdm progress bars.
        echo: where the one-line rates are printed.

    Returns:
        Summary: ``rounds`` (the per-round log), ``policy`` (the exported ONNX), ``out``, ``best_round`` (the round
        the validation suite scores best, :func:`best_round`; ``None`` without ``validation.suite``).

    Raises:
        ConfigError: ``out_dir`` holds a run and ``resume`` is false, or it holds a run with another
            configuration; the dataset is missing or empty; a prior run is refused (:func:`prior_aggregate`);
            ``validation.suite`` is not a suite of ``robots/g1/lac_eval.yaml`` or ``validation.suite_seed`` is the
            evaluation's own seed (:func:`suite_eval_config`), all before any rollout. A refused run removes the
            folders it created if they are empty (a generated dataset stays).
    """
    import torch

    from contactflow.lac.train.student import export_onnx

    out = Path(out_dir)
    created = not out.exists()
    try:
        run, rows, spec, prior, have = _start_run(cfg, out, dataset, workers, resume, progress, echo)
    except ConfigError:
        if created:  # a refused run leaves no empty folder behind (a generated dataset stays)
            for d in (out / "checkpoints", out / "data", out):
                try:
                    d.rmdir()
                except OSError:
                    pass
        raise
    cfg_dict = run["config"]
    # ---- model, optimiser, state
    torch.set_num_threads(cfg.optim.torch_threads)
    torch.manual_seed(cfg.seed)
    w = loss_weights(cfg, spec)  # per joint, the same every round (joint_loss_scale's names checked before any rollout)
    model = new_student(cfg, spec)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.optim.lr, weight_decay=cfg.optim.weight_decay)
    log_rows: list[dict] = []
    epochs: list[dict] = []
    start = 0
    if have:
        ck = load_checkpoint(have[-1])
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optim"])
        log_rows, epochs, start = ck["log"], ck["epochs"], ck["round"] + 1
        echo(f"resuming after round {ck['round']} ({ck['path']})")
    student_onnx = out / "student.onnx"
    meta = lambda r: _metadata(spec, cfg_dict, run, r)  # noqa: E731
    if start > 0:
        export_onnx(model, student_onnx, meta(start - 1))
        last = log_rows[-1]
        if cfg.validation.enabled and ("validation" not in last or (cfg.validation.suite and not last.get("validation_suite"))):
            # the run stopped before the last round's validation ended (or the suite was added): validate it now
            _validate_round(cfg, last, student_onnx, out, workers)
            _save_checkpoint({**{k: v for k, v in ck.items() if k != "path"}, "log": log_rows}, Path(ck["path"]))
            _write_logs(out, log_rows, epochs)
            _echo_validation(cfg, last, log_rows, echo)

    H = spec.cfg.history.length
    bar_cls = None
    if progress:
        from tqdm import tqdm as bar_cls
    for r in range(start, cfg.dagger.rounds):
        # ---- rollouts
        t0 = time.perf_counter()
        bar = bar_cls(total=cfg.dagger.episodes_per_round, desc=f"round {r} rollouts", unit="ep", dynamic_ncols=True) if bar_cls else None
        results = _rollouts(cfg, rows, r, str(student_onnx) if r > 0 else None, workers, bar.update if bar else None)
        if bar:
            bar.close()
        roll_wall = time.perf_counter() - t0
        _save_round(out / "data" / f"round_{r:03d}.npz", results)
        ticks = sum(len(x.frames) for x in results)
        row = {
            "round": r, "beta": 1.0 if r == 0 else cfg.dagger.beta(r), "episodes": len(results), "ticks": ticks,
            "falls": sum(x.fell for x in results), "teacher_not_ok": int(sum((~x.teacher_ok).sum() for x in results)),
            "student_ticks": int(sum(x.student_acted.sum() for x in results)),
            "refused": sum(x.refused for x in results),
            "on_policy_mse": (sum(x.on_policy_se for x in results) / ticks) if r > 0 else None,
            "rollout_wall_s": roll_wall, "rollout_ticks_per_s": ticks / roll_wall,
            "rollout_ticks_per_s_per_worker": sum(len(x.frames) for x in results) / max(sum(x.wall_s for x in results), 1e-9),
        }
        # ---- training on the aggregate
        data = load_rounds(out / "data", r)
        if prior is not None:
            data = join_aggregates([prior, data])
        frames = torch.from_numpy(data["frames"])
        labels = torch.from_numpy(data["labels"])
        aux_t, aux_known = aux_tensors(cfg, data)
        if cfg.optim.aux_target == "teacher" and aux_known is not None:
            share = float(aux_known.any(dim=1).double().mean())
            if share == 0.0:
                raise ConfigError(f"round {r}: optim.aux_target: teacher, but no sample of the aggregate holds the "
                                  "teacher's estimate (its rounds were recorded before it was)")
            if share < 1.0 and r == start:
                echo(f"optim.aux_target: teacher: {100 * share:.1f} % of the samples hold the teacher's estimate; the "
                     "rest (rounds recorded before it was: dagger.prior_runs) train the actions only")
        samples = np.flatnonzero(data["ok"])
        if len(samples) == 0:
            raise ConfigError(f"round {r}: no usable teacher label (the expert degraded on every tick of rounds 0-{r})")
        if r == 0 and start == 0:
            with torch.no_grad():
                model.set_normalizer(model.features(frames[samples]).numpy(), cfg.student.std_floor)
                model.set_head_normalizer(frames[samples], cfg.student.std_floor)
        g = np.random.default_rng(np.random.SeedSequence([cfg.seed, r, 7]))
        B = cfg.optim.batch_size
        per_epoch = max(1, int(np.ceil(len(samples) / B)))
        total = per_epoch * cfg.optim.epochs_per_round
        cap = cfg.optim.max_steps_first_round if r == 0 and cfg.optim.max_steps_first_round else cfg.optim.max_steps_per_round
        if cap:
            total = min(total, cap)
        t0 = time.perf_counter()
        bar = bar_cls(total=total, desc=f"round {r} training", unit="step", dynamic_ncols=True) if bar_cls else None
        model.train()
        step, ep_i, seen = 0, 0, 0
        while step < total:
            perm = g.permutation(samples)
            losses = []
            for b0 in range(0, len(perm), B):
                if step >= total:
                    break
                idx = perm[b0:b0 + B]
                x = frames[torch.from_numpy(window_index(data["first"], idx, H))]
                ti = torch.from_numpy(idx)
                loss = batch_loss(cfg, model, w, x, labels[ti], *aux_rows(aux_t, aux_known, ti), rng=g)
                for group in opt.param_groups:  # optim.lr_schedule (constant: lr at every step)
                    group["lr"] = round_lr(cfg.optim, step, total)
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(float(loss.detach()))
                step += 1
                seen += len(idx)
                if bar:
                    bar.update(1)
            epochs.append({"round": r, "epoch": ep_i, "loss": float(np.mean(losses)), "steps": len(losses)})
            ep_i += 1
        if bar:
            bar.close()
        train_wall = time.perf_counter() - t0
        del data, frames, labels, aux_t, aux_known  # the aggregate is read again next round: not two of them at once
        row.update(data_samples=int(len(samples)), train_steps=step, train_samples=seen, train_wall_s=train_wall,
                   train_samples_per_s=seen / max(train_wall, 1e-9), loss_first_epoch=epochs[-ep_i]["loss"],
                   loss_last_epoch=epochs[-1]["loss"])
        log_rows.append(row)
        # ---- checkpoint, export for the next round, logs
        ck_path = out / "checkpoints" / f"round_{r:03d}.pt"

        def save_checkpoint() -> None:
            _save_checkpoint({"round": r, "model": model.state_dict(), "optim": opt.state_dict(), "log": log_rows,
                              "epochs": epochs, "config": cfg_dict, "run": run}, ck_path)

        save_checkpoint()
        export_onnx(model, student_onnx, meta(r))
        if cfg.validation.enabled:
            _validate_round(cfg, row, student_onnx, out, workers)
            save_checkpoint()  # again, with the validation in its log: a resumed run's log keeps it
        _write_logs(out, log_rows, epochs)
        mse = "" if row["on_policy_mse"] is None else f", on-policy action MSE {row['on_policy_mse']:.4f}"
        where = " in the probe episodes" if r > 0 and cfg.dagger.student_acts == "probes" else ""
        echo(f"round {r}: beta {row['beta']:.3g}{where}, {row['episodes']} episodes, {ticks} ticks, {row['falls']} fall(s){mse}; "
             f"rollouts {row['rollout_ticks_per_s']:.0f} samples/s ({workers} worker(s), "
             f"{row['rollout_ticks_per_s_per_worker']:.0f} per worker); training {row['train_samples_per_s']:.0f} samples/s, "
             f"loss {row['loss_first_epoch']:.4f} -> {row['loss_last_epoch']:.4f} on {row['data_samples']} samples")
        _echo_validation(cfg, row, log_rows, echo)
    best = best_round(log_rows)
    return {"rounds": log_rows, "policy": str(student_onnx), "out": str(out), "best_round": best}


def _save_checkpoint(ck: dict, path: Path) -> None:
    """``torch.save`` through a temporary file: a run stopped while saving leaves the previous checkpoint whole."""
    import torch

    with replaced_atomically(path) as tmp:
        torch.save(ck, tmp)


def _validate_round(cfg: TrainConfig, row: dict, student_onnx: Path, out: Path, workers: int) -> None:
    """A round's validation (:func:`validate`, and :func:`validate_suite` with ``validation.suite``) into its log row."""
    t0 = time.perf_counter()
    row["validation"] = validate(cfg, student_onnx)
    if cfg.validation.suite:
        row["validation_suite"] = validate_suite(cfg, student_onnx, out, workers=workers,
                                                 save_as=out / "validation_suite" / f"round_{row['round']:03d}.json",
                                                 round_=row["round"])
    row["validation_wall_s"] = time.perf_counter() - t0


def _echo_validation(cfg: TrainConfig, row: dict, log_rows: list[dict], echo: Callable[[str], None]) -> None:
    r = row["round"]
    if "validation" in row:
        v = row["validation"]
        pushes = ", ".join(f"K {k:g}: {'fell' if f else f'{100 * x:.1f} cm'}"
                           for k, f, x in zip(v["push_k"], v["push_fell"], v["push_displacement_m"]))
        echo(f"round {r} student alone: stand {cfg.validation.stand_s:g} s {'FELL' if v['stand_fell'] else 'ok'}; "
             f"{cfg.validation.force_n:g} N on {cfg.validation.body}: {pushes}; "
             f"{'monotonic' if v['monotonic'] else 'not monotonic'} in K")
    if row.get("validation_suite"):
        su = row["validation_suite"]
        echo(f"round {r} validation suite {su['suite']!r}: {su['decreasing']} of {su['scenarios']} scenarios decreasing "
             f"(not: {', '.join(su['not_decreasing']) or 'none'}), {su['falls']} fall(s) in {su['episodes']}, within "
             f"{100 * su['tolerance']:g} % of the teacher at {su['within']} of {su['points']} points; best so far: "
             f"round {best_round(log_rows)}")


def _write_logs(out: Path, log_rows: list[dict], epochs: list[dict]) -> None:
    write_text_atomic(out / "train_log.json", json.dumps({"rounds": log_rows, "epochs": epochs,
                                                          "best_round": best_round(log_rows)}, indent=1))
    with open(out / "train_log.csv", "w") as f:
        f.write("round,epoch,loss,steps\n")
        for e in epochs:
            f.write(f"{e['round']},{e['epoch']},{e['loss']:.6g},{e['steps']}\n")
    try:
        _plot(log_rows, epochs, out / "loss.png")
    except ModuleNotFoundError:  # matplotlib is in [train]; without it the CSV/JSON logs remain
        log.warning("matplotlib not installed: %s not drawn", out / "loss.png")


