"""The training episode of ``contactflow lac train``: the G1-23 PD simulator driven by a LAC action.

:class:`LacTrainEnv` wraps :class:`~contactflow.sim.pd_robot.PDRobotSim` (PD at every 2 ms physics
step, 50 Hz ticks) and a :class:`~contactflow.policy.PolicyRunner` of the deploy spec
(``robots/g1/policies/lac.yaml``): the 95-D observation frame, the 64-frame history (oldest first,
the first frame replicated) and the action map ``q_target = default + 0.25 effort/Kp * action`` are
computed by the runner's own methods (``frame``, ``push``, ``model_input``, ``act``), i.e. by the
code ``lac_policy`` runs at deployment. The runner's model is never called here.

An episode comes from one row of an augmentation dataset (``contactflow lac augment``,
docs/lac_dataset.md) through :func:`episode_from_row`: the commanded upper-body posture ``q_ref``,
base height and 5-D stiffness form the ``teleop_command`` held during the episode; the row's
trapezoid profile (rest, ramp, hold, release) and peak force / couple per LAC link (world axes) are
applied to the MuJoCo bodies of those links (``xfrc_applied``, force at the body's CoM), scaled into
the teacher's envelope (:class:`~contactflow.lac.train.config.EnvCfg`). Domain randomisation
(:class:`~contactflow.lac.train.config.RandomizationCfg`): sole/floor friction, pelvis and torso mass,
initial joint angles, direction of each event's force and couple, and whether the arms start at
``q_ref`` or at the default posture.

Privileged information (never in the student's observation; for the DAgger teacher and the PPO
teacher): the true state in ``sensors`` (the simulator's base pose and twist, torques, sole
wrenches), the external wrench applied to each LAC link, and the dataset's augmented reference
motion (``q_aug``, ``base_height_aug``) at the episode time. The augmented motion was computed for
the dataset's UNSCALED wrench; ``wrench_scale`` gives the factor applied here.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import Mapping, Sequence

import mujoco
import numpy as np
import pinocchio as pin

from contactflow.errors import ConfigError
from contactflow.lac.compliance import rotate_wrench, stand_command
from contactflow.lac.events import trapezoid
from contactflow.lac.model import LacRobot
from contactflow.lac.teleop import load_teleop_config
from contactflow.lac.train.config import EnvCfg
from contactflow.policy.runner import PolicyRunner
from contactflow.policy.spec import PolicySpec
from contactflow.robot import Robot
from contactflow.safety import base_tilt_rad
from contactflow.sim.mujoco_robot import sensor_values
from contactflow.sim.pd_robot import PDRobotSim, PDSimConfig

__all__ = ["Episode", "StepResult", "LacTrainEnv", "episode_from_row", "probe_episode", "episode_rng", "load_train_spec"]


def load_train_spec(spec: str, robot: Robot, model: str | Path | None = None) -> PolicySpec:
    """The deploy spec bound to ``robot`` for training.

    ``load_policy_spec`` checks the spec against an ONNX model; before a student exists (or for a
    teacher that never runs one) a placeholder of the spec's I/O that outputs zeros is written to
    a temporary file (:func:`contactflow.policy.testing.mlp_model`, needs ``onnx``). Only the
    spec's observation, history and action map are used by :class:`LacTrainEnv`.

    Args:
        spec: spec name or file (``lac``). robot: the robot. model: an ONNX file (None: placeholder).

    Raises:
        ConfigError / ModelError: as :func:`contactflow.policy.load_policy_spec`.
    """
    from contactflow.config import read_yaml
    from contactflow.policy.spec import load_policy_spec, resolve_spec_file

    if model is None:
        from contactflow.policy.testing import mlp_model

        raw = read_yaml(resolve_spec_file(spec))
        tmp = Path(tempfile.mkdtemp(prefix="contactflow_lac_train_"))
        model, _ = mlp_model(tmp / "placeholder.onnx", input_name=raw["input"]["name"], input_shape=raw["input"]["shape"],
                             output_name=raw["output"]["name"], n_out=int(np.prod(raw["output"]["shape"])), weight_scale=0.0)
    return load_policy_spec(spec, robot, model=model)


def sample_stiffness(robot, rng: np.random.Generator) -> np.ndarray:
    """(5,) RAW stiffness command [N/m x3, N m/rad x2] drawn log-uniform over the ranges the teleop and the teacher
    enforce (``load_teleop_config(robot)``)."""
    t = load_teleop_config(robot)
    lo, hi = np.log([t.stiffness_lin_range_n_per_m] * 3 + [t.stiffness_ang_range_nm_per_rad] * 2).T
    return np.exp(rng.uniform(lo, hi))


def episode_rng(seed: int, *keys: int) -> np.random.Generator:
    """The RNG of one episode: ``SeedSequence([seed, *keys])`` (independent of workers and order)."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), *map(int, keys)]))


@dataclasses.dataclass(frozen=True)
class Episode:
    """One training episode (built by :func:`episode_from_row`).

    Attributes:
        command: the ``teleop_command`` held during the episode (``lin_vel`` 0, ``ang_vel`` 0,
            ``base_height`` (1,) [m], ``waist_yaw`` (1,) [rad], ``q_ref_arms`` (10,) [rad],
            ``stiffness`` (5,) RAW [N/m x3, N m/rad x2]).
        links: (L,) MuJoCo bodies loaded (LAC link names).
        peaks_W: (L, 6) peak [F; C] per loaded link, world axes, after scaling and jitter [N, N m].
        wrench_scale: (L,) factor from the dataset's peak to the applied one [-].
        body_frame: (L,) True where ``peaks_W`` is in the loaded body's own axes instead (the
            ``hand_couple_axis: joint`` couple): rotated to world with the body's orientation at the
            first tick of the event and held there, as the evaluation does; () = all world axes.
        probe: a compliance probe (:func:`probe_episode`), not a dataset row's episode.
        event: (start, ramp, hold, release) [s], episode time.
        duration_s: episode length [s].
        q0: (n,) initial joint angles, robot order [rad].
        friction_scale: factor on the sliding friction [-].
        mass_scale: body name -> mass factor [-].
        q_aug: (T, 11) the dataset's augmented upper-body motion (waist yaw + arms) [rad];
            frame k is at episode time ``aug_t0_s + k aug_dt_s`` (:meth:`aug_index`).
        base_height_aug: (T,) the dataset's augmented base height [m].
        row_index: index of the dataset row.
        aug_t0_s: episode time of the dataset's frame 0 (the standing ``settle_s`` before it) [s].
        aug_dt_s: the dataset's frame period [s] (``profile.dt_s`` of the augmentation config,
            0.02 s; ``train`` checks the dataset's manifest).
    """

    command: dict
    links: tuple[str, ...]
    peaks_W: np.ndarray
    wrench_scale: np.ndarray
    event: tuple[float, float, float, float]
    duration_s: float
    q0: np.ndarray
    friction_scale: float
    mass_scale: dict
    q_aug: np.ndarray
    base_height_aug: np.ndarray
    row_index: int
    aug_t0_s: float = 0.0
    aug_dt_s: float = 0.02
    body_frame: tuple[bool, ...] = ()
    probe: bool = False

    def aug_index(self, t_s: float) -> int:
        """The dataset frame at episode time ``t_s`` [s] (clamped to the first / last frame)."""
        return int(np.clip(round((t_s - self.aug_t0_s) / self.aug_dt_s), 0, len(self.q_aug) - 1))


def _unit_sphere(rng: np.random.Generator) -> np.ndarray:
    """(3,) a direction uniform on the sphere (one ``normal(size=3)`` draw)."""
    d = rng.normal(size=3)
    return d / max(float(np.linalg.norm(d)), 1e-9)


def _initial_posture(robot: Robot, joints: Mapping[str, float], rng: np.random.Generator, noise_rad: float) -> np.ndarray:
    """(n,) initial joint angles [rad], robot order: the default posture with ``joints`` (name -> angle) set, plus
    N(0, ``noise_rad``) on every joint (one draw), clipped to the joint limits."""
    names = list(robot.joint_names)
    q0 = np.asarray(robot.theta_default, float).copy()
    for name, v in joints.items():
        q0[names.index(name)] = v
    return np.clip(q0 + rng.normal(0.0, noise_rad, len(q0)), robot.q_min, robot.q_max)


def _upper_reference(cmd: Mapping, upper: Sequence[str], arms: Sequence[str]) -> np.ndarray:
    """(len(upper),) the command's waist yaw and arm references in the dataset's upper-joint order [rad]."""
    arms = list(arms)
    return np.array([cmd["waist_yaw"][0] if j == "waist_yaw_joint" else cmd["q_ref_arms"][arms.index(j)] for j in upper])


def _rotation(rng: np.random.Generator, max_angle_rad: float) -> np.ndarray:
    axis = rng.standard_normal(3)
    axis /= np.linalg.norm(axis)
    return pin.exp3(axis * rng.uniform(0.0, max_angle_rad))


def episode_from_row(row: Mapping, cfg: EnvCfg, lac: LacRobot, rng: np.random.Generator, *,
                     row_index: int = -1) -> Episode:
    """Build a training episode from one dataset row (:func:`contactflow.lac.dataset.read_episodes`).

    Args:
        row: the row (``q_ref`` (11,), ``base_height_cmd``, ``stiffness`` (5,), ``profile_s`` (4,),
            ``force_peak`` / ``couple_peak`` (11, 3) world, ``q_aug`` (T, 11), ``base_height`` (T,)).
        cfg: the episode configuration (scaling, caps, randomisation).
        lac: the G1's LAC view (:class:`LacRobot`: link names and their joints, in the dataset's
            order; the robot's limits, default posture and ``teleop.arm_joints``).
        rng: the episode's RNG (:func:`episode_rng`).
        row_index: kept in the episode for the logs.

    Returns:
        Episode.

    Raises:
        ConfigError: the row lacks a field or has a wrong shape (names it).
    """
    try:
        q_ref = np.asarray(row["q_ref"], float).reshape(11)
        k5 = np.asarray(row["stiffness"], float).reshape(5)
        prof = np.asarray(row["profile_s"], float).reshape(4)
        f_pk = np.asarray(row["force_peak"], float).reshape(11, 3)
        c_pk = np.asarray(row["couple_peak"], float).reshape(11, 3)
        h_cmd = float(row["base_height_cmd"])
        q_aug = np.asarray(row["q_aug"], np.float32).reshape(-1, 11)
        h_aug = np.asarray(row["base_height"], np.float32).reshape(-1)
    except (KeyError, ValueError) as exc:
        raise ConfigError(f"dataset row {row_index}: not an augmentation episode ({type(exc).__name__}: {exc})") from None
    robot, lac_links = lac.robot, lac.link_names
    upper = [lac.model.names[j] for j in lac.link_joint_ids]  # the joints of q_ref, dataset order
    r = cfg.randomization
    # ---- the command: waist yaw and the arm references by joint name (or the teleop's default)
    if cfg.default_command_prob > 0 and rng.uniform() < cfg.default_command_prob:
        cmd = stand_command(robot, k5)
        q_ref = _upper_reference(cmd, upper, robot.raw["teleop"]["arm_joints"])
    else:
        cmd = stand_command(robot, k5, float(np.clip(h_cmd, *cfg.base_height_m)))
        cmd["waist_yaw"] = np.array([q_ref[upper.index("waist_yaw_joint")]])
        cmd["q_ref_arms"] = np.array([q_ref[upper.index(j)] for j in robot.raw["teleop"]["arm_joints"]])
    # ---- events: scaled into the teacher's envelope, capped per link group, direction jitter
    links, peaks, scales = [], [], []
    for j, name in enumerate(lac_links):
        f, c = f_pk[j], c_pk[j]
        if not (np.any(f) or np.any(c)):
            continue
        cap = cfg.max_torso_force_n if name == "torso_link" else (
            cfg.max_hand_force_n if name.endswith("wrist_roll_link") else cfg.max_arm_force_n)
        sf = cfg.force_scale
        nf = float(np.linalg.norm(f)) * sf
        if nf > cap:
            sf *= cap / nf
        sc = cfg.couple_scale
        nc = float(np.linalg.norm(c)) * sc
        if nc > cfg.max_couple_nm:
            sc *= cfg.max_couple_nm / nc
        R = _rotation(rng, np.deg2rad(r.force_direction_jitter_deg))
        links.append(name)
        peaks.append(np.concatenate([R @ (sf * f), R @ (sc * c)]))
        scales.append(sf if np.any(f) else sc)
    # one push or one couple on a hand instead of the row's events (draws: u, the hand, then the wrench)
    body_frame: tuple[bool, ...] = ()
    u = rng.uniform() if (cfg.hand_push_prob > 0 or cfg.hand_couple_prob > 0) else 1.0
    if u < cfg.hand_push_prob + cfg.hand_couple_prob:
        hand = ("left_wrist_roll_link", "right_wrist_roll_link")[int(rng.integers(2))]
        w = np.zeros(6)
        if u < cfg.hand_push_prob:  # a force: any direction, or horizontal
            if cfg.hand_push_direction == "sphere":
                d = _unit_sphere(rng)
            else:
                ang = rng.uniform(0.0, 2.0 * np.pi)
                d = np.array([np.cos(ang), np.sin(ang), 0.0])
            w[:3] = rng.uniform(*cfg.hand_push_n) * d
        elif cfg.hand_couple_axis == "joint":  # about the hand's joint axis, body axes, either sign
            axis = lac.link_axis_local[lac.link_index(hand)] * (1.0 if rng.uniform() < 0.5 else -1.0)
            w[3:] = rng.uniform(*cfg.hand_couple_nm) * axis
            body_frame = (True,)
        else:  # couple about a uniform axis
            axis = _unit_sphere(rng)
            w[3:] = rng.uniform(*cfg.hand_couple_nm) * axis
        links, peaks, scales = [hand], [w], [float("nan")]
    rest, ramp, hold, release = (float(x) for x in prof)
    start = cfg.settle_s + rest
    duration = min(start + ramp + hold + release + cfg.after_s, cfg.max_episode_s)
    # ---- initial posture
    at_reference = rng.uniform() < r.start_at_reference_prob
    q0 = _initial_posture(robot, dict(zip(upper, q_ref)) if at_reference else {}, rng, r.joint_noise_rad)
    if cfg.stiffness_sample_prob > 0 and rng.uniform() < cfg.stiffness_sample_prob:  # after every other draw
        cmd["stiffness"] = sample_stiffness(robot, rng)
    friction = float(rng.uniform(*r.friction_scale))
    mass = {b: float(rng.uniform(*r.mass_scale)) for b in r.mass_bodies}
    if cfg.probe_prob > 0 and rng.uniform() < cfg.probe_prob:  # after every other draw: the other episodes stay
        return probe_episode(cfg, lac, rng, row_index=row_index, friction_scale=friction, mass_scale=mass)
    return Episode(
        command=cmd, links=tuple(links), peaks_W=np.array(peaks).reshape(-1, 6), wrench_scale=np.array(scales),
        event=(start, ramp, hold, release), duration_s=float(duration), q0=q0,
        friction_scale=friction, mass_scale=mass,
        q_aug=q_aug, base_height_aug=h_aug, row_index=int(row_index), aug_t0_s=cfg.settle_s,
        body_frame=body_frame,
    )


#: LAC stiffness channels [K_lin_left, K_lin_right, K_lin_torso, K_ang_left, K_ang_right] of a probe's loaded link
_PROBE_CHANNELS = {"left_wrist_roll_link": (0, 3), "right_wrist_roll_link": (1, 4), "left_elbow_link": (0,),
                   "right_elbow_link": (1,), "torso_link": (2,)}


def probe_episode(cfg: EnvCfg, lac: LacRobot, rng: np.random.Generator, *, row_index: int = -1,
                  friction_scale: float | None = None, mass_scale: Mapping[str, float] | None = None) -> Episode:
    """A compliance-probe episode (:class:`~contactflow.lac.train.config.ProbeCfg`): standing at the
    teleop's default command, the loaded arm's shoulder and both elbows possibly moved, one held load on one link at a
    drawn stiffness of that link's channels.

    Args:
        cfg: the episode configuration (``cfg.probe``; ``settle_s``, ``after_s``, ``max_episode_s``
            and the randomisation's friction, mass and joint noise).
        lac: the G1's LAC view. rng: the episode's RNG. row_index: kept for the logs.
        friction_scale, mass_scale: the episode's friction factor [-] and mass factor per body [-]
            (``episode_from_row`` draws them before it decides on a probe); ``None``: drawn here last.

    Returns:
        Episode: one link loaded, ``peaks_W`` (1, 6) [N, N m] (world axes for a force, the hand's
        body axes for a couple: ``body_frame``), the event (start, ramp, hold, release) [s], ``q0``
        [rad]; its ``q_aug`` is the commanded posture (one frame: a still reference) and its
        ``wrench_scale`` NaN (no dataset wrench).

    Raises:
        ConfigError: the robot's teleop configuration is unreadable (``load_teleop_config``).
    """
    pc, r, robot = cfg.probe, cfg.randomization, lac.robot
    t = load_teleop_config(robot)
    kind = int(rng.choice(4, p=np.asarray(pc.load_weights, float) / sum(pc.load_weights)))
    side = ("left", "right")[int(rng.integers(2))]
    link = {0: f"{side}_wrist_roll_link", 1: f"{side}_wrist_roll_link", 2: f"{side}_elbow_link", 3: "torso_link"}[kind]
    w = np.zeros(6)
    if kind == 1:  # about the hand's own joint axis, body axes, either sign
        w[3:] = rng.uniform(*pc.couple_nm) * lac.link_axis_local[lac.link_index(link)] * (1.0 if rng.uniform() < 0.5 else -1.0)
    else:
        d = _unit_sphere(rng)
        w[:3] = rng.uniform(*(pc.hand_force_n, None, pc.elbow_force_n, pc.torso_force_n)[kind]) * d
    # the command: the teleop's default, the loaded arm's shoulder pitch / roll and both elbows possibly drawn
    k5 = np.asarray(t.stiffness_default, float)
    cmd = stand_command(robot, k5)
    arms, names = list(robot.raw["teleop"]["arm_joints"]), list(robot.joint_names)
    q_arms = np.array(cmd["q_ref_arms"], float)
    if kind != 3 and rng.uniform() < pc.posture_prob:
        q_arms[arms.index(f"{side}_shoulder_pitch_joint")] = rng.uniform(*pc.shoulder_pitch_rad)
        q_arms[arms.index(f"{side}_shoulder_roll_joint")] = rng.uniform(*pc.shoulder_roll_out_rad) * (1.0 if side == "left" else -1.0)
    if pc.elbow_prob > 0 and rng.uniform() < pc.elbow_prob:  # no draw at 0: the episodes of a configuration without it
        for s in ("left", "right"):
            q_arms[arms.index(f"{s}_elbow_joint")] = rng.uniform(*pc.elbow_rad)
    lo, hi = (np.array([lim[names.index(j)] for j in arms]) for lim in (robot.q_min, robot.q_max))
    cmd["q_ref_arms"] = np.clip(q_arms, lo, hi)
    # the stiffness: the loaded link's channels (or all) log-uniform over LAC's ranges
    drawn = sample_stiffness(robot, rng)
    chans = range(5) if rng.uniform() < pc.all_stiffness_prob else _PROBE_CHANNELS[link]
    for c in chans:
        k5[c] = drawn[c]
    cmd["stiffness"] = k5
    rest, ramp, hold, release = (float(rng.uniform(*x)) for x in (pc.rest_s, pc.ramp_s, pc.hold_s, pc.release_s))
    start = cfg.settle_s + rest
    duration = min(start + ramp + hold + release + cfg.after_s, cfg.max_episode_s)
    # the initial posture: the commanded one plus the joint noise
    q0 = _initial_posture(robot, dict(zip(arms, cmd["q_ref_arms"])), rng, r.joint_noise_rad)
    q_ref = _upper_reference(cmd, [lac.model.names[j] for j in lac.link_joint_ids], arms)
    return Episode(
        command=cmd, links=(link,), peaks_W=w.reshape(1, 6), wrench_scale=np.array([float("nan")]),
        event=(start, ramp, hold, release), duration_s=float(duration), q0=q0,
        friction_scale=float(rng.uniform(*r.friction_scale)) if friction_scale is None else float(friction_scale),
        mass_scale={b: float(rng.uniform(*r.mass_scale)) for b in r.mass_bodies} if mass_scale is None else dict(mass_scale),
        q_aug=q_ref.reshape(1, -1).astype(np.float32), base_height_aug=np.asarray(cmd["base_height"], np.float32).reshape(1),
        row_index=int(row_index), aug_t0_s=cfg.settle_s, body_frame=(kind == 1,),
        probe=True,
    )


@dataclasses.dataclass(frozen=True)
class StepResult:
    """What :meth:`LacTrainEnv.step` returns.

    Attributes:
        obs: (64, 95) float32 student input (oldest frame first), the deploy ``frames`` without the
            batch dimension.
        privileged: see :meth:`LacTrainEnv.privileged`.
        done: the episode ended (fell: the pelvis tilted beyond ``fall_tilt_rad``, went below
            ``fall_height_m`` or the simulator diverged; or its duration is reached).
        info: ``fell`` (bool), ``accepted`` (the action passed the runner's checks; else the last
            safe command was held, as at deployment), ``reason`` (why refused), ``t`` [s].
    """

    obs: np.ndarray
    privileged: dict
    done: bool
    info: dict


class LacTrainEnv:
    """LAC training episodes on the G1 PD simulator (module docstring).

    Args:
        cfg: episode configuration (:class:`EnvCfg`).
        spec: the deploy policy spec (``load_policy_spec("lac", robot, model=...)``); its model is
            not run here, only its observation, history and action map.
        rows: dataset rows (:func:`contactflow.lac.dataset.read_episodes`) :meth:`reset` draws from.
        robot: the spec's robot (``load_robot("g1")``).

    Raises:
        ConfigError: no rows, or a randomised body is not in the MuJoCo model.
    """

    def __init__(self, cfg: EnvCfg, spec: PolicySpec, rows: Sequence[Mapping], robot: Robot):
        if not rows:
            raise ConfigError("LacTrainEnv: the dataset has no episode")
        self.cfg, self.spec, self.rows, self.robot = cfg, spec, list(rows), robot
        self.sim = PDRobotSim(PDSimConfig(), robot)
        self.runner = PolicyRunner(spec)
        self.dt = self.sim.control_dt_s
        m = self.sim.model
        self._friction0 = m.geom_friction[:, 0].copy()
        self._mass0 = {}
        for b in cfg.randomization.mass_bodies:
            bid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, b)
            if bid < 0:
                raise ConfigError(f"randomization.mass_bodies: no MuJoCo body {b!r}")
            self._mass0[b] = float(m.body_mass[bid])
        self.lac = LacRobot(robot)
        self.lac_links = self.lac.link_names
        self.episode: Episode | None = None

    # ------------------------------------------------------------------ API
    def reset(self, seed: int, index: int | None = None, *, episode: Episode | None = None) -> tuple[np.ndarray, dict]:
        """Start an episode.

        Args:
            seed: the episode seed (row choice when ``index`` is None, randomisation).
            index: dataset row; ``None`` = drawn from ``seed``.
            episode: a prepared :class:`Episode` (``seed`` and ``index`` are then unused).

        Returns:
            (obs (64, 95) float32, privileged dict) at t = 0.
        """
        if episode is None:
            rng = episode_rng(seed)
            i = int(rng.integers(len(self.rows))) if index is None else int(index)
            episode = episode_from_row(self.rows[i], self.cfg, self.lac, rng, row_index=i)
        self.episode = ep = episode
        sim, m = self.sim, self.sim.model
        m.geom_friction[:, 0] = self._friction0 * ep.friction_scale
        for b, m0 in self._mass0.items():
            sim.set_body_mass(b, m0 * ep.mass_scale.get(b, 1.0))
        self._r = sim.reset(ep.q0)
        self.sensors = sensor_values(self._r)
        self.command = ep.command
        self._k = 0
        self._n = int(round(ep.duration_s / self.dt))
        self._wrench = np.zeros((len(self.lac_links), 6))
        self._peaks = None
        self.runner.reset()
        self._observe()
        return self.obs, self.privileged()

    def step(self, action: np.ndarray) -> StepResult:
        """Apply a LAC action for one 50 Hz tick.

        Args:
            action: (23,) raw action, policy order (``q_target = default + scale * action``).

        Returns:
            StepResult.
        """
        ep = self.episode
        out = self.runner.act(action, tick=self._k)
        t = self._r.t
        s = float(trapezoid(t + 0.5 * self.dt, *ep.event))
        self._wrench[:] = 0.0
        if self._peaks is None and s > 0:  # the event starts: body-axes peaks turned to world, held
            self._peaks = np.array(ep.peaks_W, float).reshape(-1, 6)
            for i in np.flatnonzero(ep.body_frame):
                R = self.sim.data.xmat[self.sim.model.body(ep.links[i]).id].reshape(3, 3)
                self._peaks[i] = rotate_wrench(R, ep.peaks_W[i])
        for name, w in zip(ep.links, ep.peaks_W if self._peaks is None else self._peaks):
            self.sim.set_external_wrench(name, s * w)
            self._wrench[self.lac_links.index(name)] = s * w
        c = out.command
        self._r = self.sim.step(c["q_target"], c["kp"], c["kd"], c["tau_ff"])
        self.sensors = sensor_values(self._r)
        self._k += 1
        fell = (self.sim.fell() or self._r.base_height < self.cfg.fall_height_m
                or base_tilt_rad(self._r.imu_quat) > self.cfg.fall_tilt_rad)
        done = fell or self._k >= self._n
        if not fell:
            self._observe()
        return StepResult(self.obs, self.privileged(), done,
                          {"fell": fell, "accepted": out.ok, "reason": out.diagnostics["reason"], "t": self._r.t})

    def privileged(self) -> dict:
        """What the teachers may see at the current tick (the student never does).

        Returns:
            ``t`` [s]; ``sensors`` (the ``sensors`` message with the TRUE base state: ``q`` (30,),
            ``v`` (29,), ``tau`` (23,), IMU, ``wrench.<sole>``); ``command`` (the teleop command);
            ``wrench_W`` (11, 6) [F; C] applied to each LAC link over the last tick (world axes,
            force at the body's CoM) [N, N m]; ``lac_links`` (11,) their names; ``q_aug`` (11,)
            and ``base_height_aug`` (1,) the dataset's augmented reference at this time (its last
            frame after the end) [rad, m]; ``wrench_scale`` (L,) applied / dataset peak.
        """
        ep = self.episode
        k = ep.aug_index(self._r.t)
        return {
            "t": self._r.t, "sensors": self.sensors, "command": self.command, "wrench_W": self._wrench.copy(),
            "lac_links": self.lac_links, "q_aug": ep.q_aug[k].astype(float),
            "base_height_aug": np.array([float(ep.base_height_aug[min(k, len(ep.base_height_aug) - 1)])]),
            "wrench_scale": ep.wrench_scale,
        }

    @property
    def frame(self) -> np.ndarray:
        """(95,) float32 the newest observation frame (the last row of :attr:`obs`)."""
        return self.obs[-1]

    @property
    def n_steps(self) -> int:
        """Ticks of the current episode."""
        return self._n

    # ------------------------------------------------------------------ helpers
    def _observe(self) -> None:
        run = self.runner
        run.advance_phase(self.command)
        run.push(run.frame(self.sensors, self.command))
        self.obs = run.model_input()[0]
