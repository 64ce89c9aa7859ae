"""``contactflow lac eval``: the compliance experiments of LAC Figs. 3, 4 and 6 for any controller of
the teleop contract (``sensors`` + ``teleop_command`` -> ``joint_command``).

Every episode is :func:`contactflow.lac.compliance.run_wrench_event` on the PD G1 simulator
(:class:`contactflow.sim.pd_robot.PDRobotSim`, PD at every 2 ms physics step, 50 Hz ticks, MuJoCo
``xfrc_applied`` at the link's centre of mass: the G1 driver and the wrench injector of the
graphs, in one process): the robot starts at rest in the scenario's posture (plus a small seeded
joint perturbation per trial), stands under the teleop's standing command with one stiffness
channel swept, and one force (direction in the base frame) or couple (about the loaded link's own
joint axis) follows LAC's trapezoid (LAC §IV-B: ramp 1 s, hold 1 s, release 2 s, the direction
fixed at the event start). Metrics "at the force peak" (LAC Figs. 3, 4, 6): the mean over the last
``measure_window_s`` of the hold against the second before the event, of

* ``displacement_m``: the norm of the loaded link's CoM displacement (``displacement_along_m``:
  its component along the force);
* ``attitude_deg``: the link's attitude change ``|Log(R_peak R_pre^T)|``
  (``rotation_about_axis_deg``: its component about the couple's axis).

A fall (base below the robot's ``fall_height_m`` or tilted more than
:data:`contactflow.safety.FALL_TILT_RAD`) anywhere in the episode makes its metrics NaN and is
counted. The scenarios, the stiffness grids, the trials and two suites (``paper``: LAC's forces;
``envelope``: the same scenarios scaled to what the model-based teacher survives) are in
``robots/g1/lac_eval.yaml``.

Controllers (:func:`make_controller`; each one ``reset(sensors)`` / ``step(sensors, command) ->``
an object with ``command = {q_target, kp, kd, tau_ff, ok}``):

* ``expert`` (``lac_expert``): :class:`contactflow.lac.expert.LacExpert` with
  ``robots/g1/lac_expert.yaml``;
* ``pd_stand``: :class:`PDStand`, a stiff PD stand (the configured multiples of the robot's gains)
  to the default posture with the commanded arm references;
* ``policy:SPEC[:MODEL.onnx]``: a learned policy through :class:`PolicyController` (the
  ``lac_policy`` node's :class:`contactflow.policy.PolicyRunner`), e.g.
  ``policy:robots/g1/policies/lac.yaml:student.onnx``; the robot is the spec's;
* ``holosoma``: ``policy:robots/g1/policies/holosoma_g1_29dof_loco.yaml`` (G1-29; the links and
  joints of the scenarios are mapped by ``robot_aliases``), a soft baseline with no stiffness input.

Output (:func:`run_eval`): a JSON table (per controller, scenario, K: every trial and the mean),
monotonicity verdicts, fall counts, the K where a link ended against its load, LAC's headline numbers
beside ours, and (:func:`plot_eval`)
log-log PNG plots like the paper's; :func:`compare` gives per-K ratios of two controllers'
displacements (a student against its teacher).
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import math
import os
import platform
import time
import zlib
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from contactflow.config import did_you_mean, load_config, read_yaml
from contactflow.errors import ConfigError, ModelError

__all__ = [
    "ProfileCfg", "ScenarioCfg", "SuiteCfg", "PDStandCfg", "EvalConfig", "load_eval_config",
    "default_eval_config_path", "PDStand", "PolicyController", "make_controller", "controller_robot",
    "Job", "jobs_for", "run_job", "run_eval", "monotonic_verdict", "along_verdict", "compare", "plot_eval", "experiments",
    "check_same_experiments", "merge_tables",
]

log = logging.getLogger(__name__)

METRICS = ("displacement", "attitude")


# ----------------------------------------------------------------------------------------- config
@dataclasses.dataclass(frozen=True, kw_only=True)
class ProfileCfg:
    """The wrench event's trapezoid (LAC §IV-B: ramp 1 s, hold 1 s, release 2 s) and the measure.

    Attributes:
        t0_s: event start [s] (the robot stands from rest before it).
        ramp_s, hold_s, release_s: phase durations [s] (> 0, >= 0, > 0).
        after_s: simulated time after the release [s] (a fall there counts).
        measure_window_s: the value "at the force peak" is the mean over this last part of the
            hold [s] (0 < window <= hold_s).
    """

    t0_s: float = 2.0
    ramp_s: float = 1.0
    hold_s: float = 1.0
    release_s: float = 2.0
    after_s: float = 1.0
    measure_window_s: float = 0.2

    def __post_init__(self):
        if not self.t0_s >= 1.0:
            raise ConfigError(f"t0_s: must be >= 1 s (the pre-event window is the second before it), got {self.t0_s}")
        for n in ("ramp_s", "release_s"):
            if not getattr(self, n) > 0:
                raise ConfigError(f"{n}: must be > 0, got {getattr(self, n)}")
        if not (self.hold_s >= 0 and self.after_s >= 0):
            raise ConfigError("hold_s, after_s: must be >= 0")
        if not 0 < self.measure_window_s <= max(self.hold_s, 1e-9):
            raise ConfigError(f"measure_window_s: must be in (0, hold_s = {self.hold_s}], got {self.measure_window_s}")

    @property
    def duration_s(self) -> float:
        """Simulated duration of one episode [s]."""
        return self.t0_s + self.ramp_s + self.hold_s + self.release_s + self.after_s


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScenarioCfg:
    """One experiment: a force or a couple on one link, one stiffness channel swept.

    Attributes:
        figure: LAC figure it reproduces (3, 4 or 6).
        link: loaded MuJoCo body (G1-23 name; other robots map it through ``robot_aliases``).
        force_n: (3,) peak force in the BASE frame at the event start [N] (x forward, y left, z up).
        couple_nm: peak couple about the loaded link's own joint axis [N m] (that link's joint is
            the last wrist joint for a hand link; LAC Fig. 4). Exactly one of the two is non-zero.
        channel: swept stiffness channel (:data:`contactflow.lac.config.STIFFNESS_NAMES`).
        grid: key of ``k_grids`` with the swept values.
        metric: the primary metric of the monotonicity verdict, ``displacement`` or ``attitude``.
        arms: initial posture and arm references, joint name -> angle [rad] (others: default).
        stiffness: channels not swept that this scenario commands otherwise than ``base_stiffness``,
            channel name -> value [N/m or N m/rad] (a graph's command: ``hand_push.yaml`` holds the torso at
            300 N/m); {}: none.
        paper: LAC's text about this case (cited in the JSON).
        paper_headline: optional LAC headline, ``{k: [lo, hi], value: [at lo, at hi], unit}``.
    """

    figure: int
    link: str
    force_n: tuple[float, float, float] = (0.0, 0.0, 0.0)
    couple_nm: float = 0.0
    channel: str
    grid: str
    metric: str
    arms: dict[str, float] = dataclasses.field(default_factory=dict)
    stiffness: dict[str, float] = dataclasses.field(default_factory=dict)
    paper: str = ""
    paper_headline: dict[str, Any] | None = None

    def __post_init__(self):
        from contactflow.lac.config import STIFFNESS_NAMES

        if self.figure not in (3, 4, 6):
            raise ConfigError(f"figure: expected 3, 4 or 6, got {self.figure}")
        has_f, has_c = any(f != 0 for f in self.force_n), self.couple_nm != 0
        if has_f == has_c:
            raise ConfigError("give exactly one of a non-zero force_n or couple_nm")
        if self.channel not in STIFFNESS_NAMES:
            raise ConfigError(f"channel: {self.channel!r} is not one of {list(STIFFNESS_NAMES)}")
        if self.metric not in METRICS:
            raise ConfigError(f"metric: expected one of {list(METRICS)}, got {self.metric!r}")
        for name, value in self.stiffness.items():
            if name not in STIFFNESS_NAMES or name == self.channel:
                raise ConfigError(f"stiffness: {name!r} is not a channel left unswept here: expected one of "
                                  f"{[n for n in STIFFNESS_NAMES if n != self.channel]}")
            if not value > 0:
                raise ConfigError(f"stiffness: {name}: must be > 0, got {value!r}")

    @property
    def channel_index(self) -> int:
        from contactflow.lac.config import STIFFNESS_NAMES

        return STIFFNESS_NAMES.index(self.channel)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SuiteCfg:
    """A named selection of the scenarios with a force scale each.

    Attributes:
        description: what the suite is for.
        scale: scenario name -> factor on its force or couple (scenarios not listed: 1.0;
            ``scenarios`` restricts the selection).
        scenarios: the scenarios run, in order (empty: all of ``scenarios``).
    """

    description: str = ""
    scale: dict[str, float] = dataclasses.field(default_factory=dict)
    scenarios: tuple[str, ...] = ()

    def __post_init__(self):
        for k, v in self.scale.items():
            if not v > 0:
                raise ConfigError(f"scale.{k}: must be > 0, got {v}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PDStandCfg:
    """The stiff PD stand baseline: ``kp = kp_scale K``, ``kd = kd_scale kd`` of the robot file
    (LAC's gains; ``kd_scale = sqrt(kp_scale)`` keeps each joint's damping ratio), clipped to the
    simulator's stability limits."""

    kp_scale: float = 10.0
    kd_scale: float = 3.1623

    def __post_init__(self):
        if not (self.kp_scale > 0 and self.kd_scale > 0):
            raise ConfigError("kp_scale, kd_scale: must be > 0")


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvalConfig:
    """``robots/g1/lac_eval.yaml`` (every key documented there).

    Attributes:
        profile: the event profile and measure.
        trials: trials per (scenario, K); a trial varies the seed of the initial perturbation.
        seed: base seed of the perturbations.
        perturbation_std_rad: std of the initial joint perturbation [rad] (0: identical trials).
        base_stiffness: (5,) the channels not swept (raw LAC layout); ``None`` = the teleop's
            default (``robots/g1/teleop.yaml`` ``stiffness_default``).
        k_grids: grid name -> swept values [N/m or N m/rad].
        scenarios: name -> scenario.
        suites: name -> suite.
        pd_stand: gains of the ``pd_stand`` baseline.
        robot_aliases: robot name -> {G1-23 body or joint name: that robot's name}.
        monotonic_tol: a step counts as decreasing when ``next < prev + tol`` in the metric's
            unit [m or deg]; 0: strictly decreasing.
    """

    profile: ProfileCfg = ProfileCfg()
    trials: int = 3
    seed: int = 0
    perturbation_std_rad: float = 0.01
    base_stiffness: tuple[float, float, float, float, float] | None = None
    k_grids: dict[str, tuple[float, ...]] = dataclasses.field(default_factory=dict)
    scenarios: dict[str, ScenarioCfg] = dataclasses.field(default_factory=dict)
    suites: dict[str, SuiteCfg] = dataclasses.field(default_factory=dict)
    pd_stand: PDStandCfg = PDStandCfg()
    robot_aliases: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    monotonic_tol: float = 0.0

    def __post_init__(self):
        if self.trials < 1:
            raise ConfigError(f"trials: must be >= 1, got {self.trials}")
        if not self.perturbation_std_rad >= 0:
            raise ConfigError("perturbation_std_rad: must be >= 0")
        for name, g in self.k_grids.items():
            if not g or any(not k > 0 for k in g) or list(g) != sorted(set(g)):
                raise ConfigError(f"k_grids.{name}: expected increasing positive values, got {list(g)}")
        for name, sc in self.scenarios.items():
            if sc.grid not in self.k_grids:
                raise ConfigError(f"scenarios.{name}.grid: {sc.grid!r} is not a key of k_grids {sorted(self.k_grids)}")
        for sname, su in self.suites.items():
            for k in list(su.scale) + list(su.scenarios):
                if k not in self.scenarios:
                    raise ConfigError(f"suites.{sname}: unknown scenario {k!r}; known: {sorted(self.scenarios)}")


def default_eval_config_path() -> Path:
    """``robots/g1/lac_eval.yaml``."""
    from contactflow.robot import robots_dir

    return robots_dir() / "g1" / "lac_eval.yaml"


def load_eval_config(path: str | Path | None = None, override: Mapping | None = None) -> EvalConfig:
    """Read the evaluation config: the shipped file (:func:`default_eval_config_path`), ``path``'s keys
    layered over it (a file with one new scenario or suite, or a changed setting, needs only those
    keys), then ``override``.

    Raises:
        ConfigError: unreadable file, unknown key or bad value (one line with the file and key).
    """
    from contactflow.config import merge, read_layered

    data, source = read_layered(default_eval_config_path(), path, "EvalConfig keys")
    return load_config(EvalConfig, merge(data, override), source=source)


# ------------------------------------------------------------------------------------ controllers
@dataclasses.dataclass(frozen=True)
class _Out:
    command: dict
    diagnostics: dict


class PDStand:
    """Stiff PD stand: ``q_target`` = the robot's default posture with the command's ``q_ref_arms``
    and ``waist_yaw``, ``kp = kp_scale K``, ``kd = kd_scale kd``, no feed-forward (the stiff baseline
    of the evaluation; it ignores the stiffness, velocity and base-height commands).

    Args:
        robot: a PD robot. cfg: the gains. kp_max, kd_max: (n,) the simulator's limits (clip).
    """

    def __init__(self, robot, cfg: PDStandCfg, kp_max: np.ndarray | None = None, kd_max: np.ndarray | None = None):
        from contactflow.lac.teleop import arm_joints

        self.robot = robot
        kp = cfg.kp_scale * np.asarray(robot.K, float)
        kd = cfg.kd_scale * np.asarray(robot.kd, float)
        self.kp = kp if kp_max is None else np.minimum(kp, kp_max)
        self.kd = kd if kd_max is None else np.minimum(kd, kd_max)
        names = list(robot.joint_names)
        self._arm_idx = np.array([names.index(j) for j in arm_joints(robot)])
        self._waist = names.index("waist_yaw_joint") if "waist_yaw_joint" in names else None

    def reset(self, sensors: Mapping) -> None:
        """Nothing to reset (stateless)."""

    def step(self, sensors: Mapping, command: Mapping) -> _Out:
        """The PD command for this tick (``command``: ``teleop_command`` fields)."""
        q = np.array(self.robot.theta_default, float)
        q[self._arm_idx] = np.asarray(command["q_ref_arms"], float)
        if self._waist is not None:
            q[self._waist] = float(np.asarray(command["waist_yaw"]).reshape(-1)[0])
        return _Out({"q_target": q, "kp": self.kp, "kd": self.kd, "tau_ff": np.zeros_like(q),
                     "ok": np.array([1.0])}, {})


class PolicyController:
    """A learned policy (``lac_policy``'s :class:`contactflow.policy.PolicyRunner`) with the
    controller interface of :func:`contactflow.lac.compliance.run_wrench_event`:
    ``reset(sensors)`` empties its history, ``step(sensors, command)`` is the runner's step."""

    def __init__(self, spec):
        from contactflow.policy.runner import PolicyRunner

        self.runner = PolicyRunner(spec)

    def reset(self, sensors: Mapping) -> None:
        self.runner.reset()

    def step(self, sensors: Mapping, command: Mapping):
        return self.runner.step(sensors, command)


HOLOSOMA_SPEC = "robots/g1/policies/holosoma_g1_29dof_loco.yaml"


def _policy_parts(name: str) -> tuple[str, str | None]:
    """``policy:SPEC[:MODEL]`` -> (spec, model or None); ``holosoma`` -> its spec."""
    if name == "holosoma":
        return HOLOSOMA_SPEC, None
    rest = name[len("policy:"):]
    spec, _, model = rest.partition(":")
    if not spec:
        raise ConfigError(f"controller {name!r}: expected policy:SPEC[:MODEL.onnx]")
    return spec, (model or None)


def controller_robot(name: str) -> str:
    """The robot a controller runs on (``g1`` for the expert and the PD stand, the spec's robot
    for a policy).

    Raises:
        ConfigError: unknown controller name or unreadable spec.
    """
    if name in ("expert", "lac_expert", "pd_stand"):
        return "g1"
    if name == "holosoma" or name.startswith("policy:"):
        from contactflow.policy.spec import resolve_spec_file

        spec, _ = _policy_parts(name)
        data = read_yaml(resolve_spec_file(spec))
        robot = data.get("robot") if isinstance(data, Mapping) else None
        if not isinstance(robot, str):
            raise ConfigError(f"{spec}: robot: expected a robot name")
        return robot
    raise ConfigError(f"controller {name!r}: expected expert, pd_stand, holosoma or policy:SPEC[:MODEL.onnx]")


def make_controller(name: str, robot, cfg: EvalConfig, sim=None):
    """A factory ``f() -> controller`` for the controller ``name`` (module docstring).

    The policy's spec and model are loaded once here (the factory builds a fresh runner).

    Raises:
        ConfigError: unknown name, bad spec. ModelError: the model cannot be loaded (for
            ``holosoma``: :class:`contactflow.policy.ModelFetchError`, cannot be fetched).
    """
    if name in ("expert", "lac_expert"):
        from contactflow.lac.expert import LacExpert, load_expert_config

        ecfg = load_expert_config()
        return lambda: LacExpert(ecfg, robot)
    if name == "pd_stand":
        kp_max = kd_max = None
        if sim is not None:
            kp_max, kd_max = sim.kp_max, sim.kd_max
        return lambda: PDStand(robot, cfg.pd_stand, kp_max, kd_max)
    if name == "holosoma" or name.startswith("policy:"):
        from contactflow.policy.spec import load_policy_spec

        spec_file, model = _policy_parts(name)
        spec = load_policy_spec(spec_file, robot, model=model)
        return lambda: PolicyController(spec)
    raise ConfigError(f"controller {name!r}: expected expert, pd_stand, holosoma or policy:SPEC[:MODEL.onnx]")


# ------------------------------------------------------------------------------------------ jobs
@dataclasses.dataclass(frozen=True)
class Job:
    """One episode: controller, scenario (with its suite's scale), swept value, trial."""

    controller: str
    suite: str
    scenario: str
    k: float
    trial: int


def suite_scenarios(cfg: EvalConfig, suite: str) -> list[str]:
    """The scenario names of a suite, in order.

    Raises:
        ConfigError: unknown suite.
    """
    if suite not in cfg.suites:
        raise ConfigError(f"suite {suite!r}: not in the config{did_you_mean([suite], cfg.suites)}; known: "
                          f"{', '.join(sorted(cfg.suites))}")
    su = cfg.suites[suite]
    return list(su.scenarios) if su.scenarios else list(cfg.scenarios)


def jobs_for(cfg: EvalConfig, controllers: Sequence[str], suite: str) -> list[Job]:
    """Every episode of a suite for the given controllers (controller, scenario, K, trial order)."""
    return [Job(c, suite, s, float(k), t) for c in controllers for s in suite_scenarios(cfg, suite)
            for k in cfg.k_grids[cfg.scenarios[s].grid] for t in range(cfg.trials)]


def scenario_wrench(cfg: EvalConfig, suite: str, scenario: str) -> tuple[np.ndarray, float]:
    """(force (3,) base frame [N], couple about the link's joint axis [N m]) after the suite's scale."""
    sc = cfg.scenarios[scenario]
    s = float(cfg.suites[suite].scale.get(scenario, 1.0))
    return s * np.asarray(sc.force_n, float), s * float(sc.couple_nm)


def _seed(cfg: EvalConfig, scenario: str, trial: int) -> int:
    return (cfg.seed * 1_000_003 + zlib.crc32(scenario.encode()) * 101 + trial) % (2**32)


_WORKER: dict = {}


def _model_digest(name: str) -> str | None:
    """The SHA-256 of a policy controller's model file (``None``: no file named): a file written again under the same
    name (a training run's ``student.onnx`` after each round) is another controller."""
    if not name.startswith("policy:"):
        return None
    model = _policy_parts(name)[1]
    if model is None or not Path(model).is_file():
        return None
    from contactflow.paths import sha256_of_files

    return sha256_of_files([model])


def _worker_state(name: str, cfg: EvalConfig):
    """Per-process cache: robot, simulator and controller factory of ``name`` (and of the PD stand's
    gains: a second evaluation in the same process with other gains builds its own; and of the model file's
    contents)."""
    key = (name, repr(cfg.pd_stand), _model_digest(name))
    if key not in _WORKER:
        from contactflow.robot import load_robot
        from contactflow.sim.pd_robot import PDRobotSim, PDSimConfig

        robot = load_robot(controller_robot(name))
        sim = PDRobotSim(PDSimConfig(), robot)
        _WORKER[key] = (robot, sim, make_controller(name, robot, cfg, sim))
    return _WORKER[key]


def _alias(cfg: EvalConfig, robot, name: str) -> str:
    return cfg.robot_aliases.get(robot.name, {}).get(name, name)


def run_job(job: Job, cfg: EvalConfig) -> dict:
    """Run one episode (building the controller's robot and simulator once per process): :func:`run_episode`
    with ``job.controller``'s."""
    robot, sim, factory = _worker_state(job.controller, cfg)
    return run_episode(job, cfg, robot, sim, factory())


def run_episode(job: Job, cfg: EvalConfig, robot, sim, controller) -> dict:
    """Run one episode of ``job`` (its controller name is not used) with a given controller.

    Args:
        robot: the controller's robot (:func:`contactflow.robot.load_robot`). sim: its
            :class:`contactflow.sim.pd_robot.PDRobotSim` (reset here). controller: ``reset(sensors)`` and
            ``step(sensors, command)`` (:func:`contactflow.lac.compliance.run_wrench_event`).

    Returns:
        ``displacement_m``, ``displacement_along_m``, ``attitude_deg``, ``rotation_about_axis_deg``
        (NaN after a fall or where undefined), ``fell``, ``fell_time_s``, ``seed``,
        ``degraded_ticks``, ``base_height_min_m``, ``step_ms_mean``, ``wall_s``.

    Raises:
        ConfigError: a scenario's joint, link or couple axis that the robot does not have.
    """
    from contactflow.lac.compliance import run_wrench_event, stand_command
    from contactflow.lac.config import STIFFNESS_NAMES
    from contactflow.safety import FALL_TILT_RAD
    from contactflow.lac.teleop import arm_joints, default_command

    sc = cfg.scenarios[job.scenario]
    pr = cfg.profile
    names = list(robot.joint_names)
    q0 = np.array(robot.theta_default, float)
    for j, v in sc.arms.items():
        jn = _alias(cfg, robot, j)
        if jn not in names:
            raise ConfigError(f"scenarios.{job.scenario}.arms: {j!r} is not a joint of robot {robot.name!r}")
        q0[names.index(jn)] = float(v)
    # the arm references: the scenario's posture, unperturbed (a trial perturbs the initial state only)
    q_ref_arms = np.array([q0[names.index(j)] for j in arm_joints(robot)]) if set(arm_joints(robot)) <= set(names) \
        else None
    seed = _seed(cfg, job.scenario, job.trial)
    if cfg.perturbation_std_rad > 0:
        q0 = q0 + np.random.default_rng(seed).normal(0.0, cfg.perturbation_std_rad, q0.size)
        q0 = np.clip(q0, robot.q_min, robot.q_max)
    if cfg.base_stiffness is not None:
        k5 = np.array(cfg.base_stiffness, float)
    else:
        k5 = np.array(default_command(robot)["stiffness"], float)
    for name, value in sc.stiffness.items():
        k5[STIFFNESS_NAMES.index(name)] = float(value)
    k5[sc.channel_index] = job.k
    cmd = stand_command(robot, k5)
    if q_ref_arms is not None:
        cmd["q_ref_arms"] = q_ref_arms
    body = _alias(cfg, robot, sc.link)
    if body not in robot.raw.get("wrench_links", []):
        raise ConfigError(f"scenarios.{job.scenario}.link: {body!r} is not a wrench link of robot {robot.name!r}")
    force, couple = scenario_wrench(cfg, job.suite, job.scenario)
    if couple != 0:
        m = sim.model
        jid = int(m.body_jntadr[m.body(body).id])
        if jid < 0:
            raise ConfigError(f"scenarios.{job.scenario}: link {body!r} has no joint to take the couple axis from")
        wrench, frame = np.concatenate([np.zeros(3), couple * np.asarray(m.jnt_axis[jid], float)]), "body"
    else:
        wrench, frame = np.concatenate([force, np.zeros(3)]), "base"
    t0 = time.perf_counter()
    res = run_wrench_event(sim, controller, cmd, body, wrench, t0_s=pr.t0_s, ramp_s=pr.ramp_s, hold_s=pr.hold_s,
                           release_s=pr.release_s, after_s=pr.after_s, measure_window_s=pr.measure_window_s,
                           wrench_frame=frame, q0=q0, max_tilt_rad=FALL_TILT_RAD)
    wall = time.perf_counter() - t0
    st = res.step_times_s
    return {
        "displacement_m": res.displacement_norm_m,
        "displacement_along_m": res.displacement_m,
        "attitude_deg": math.degrees(res.attitude_rad),
        "rotation_about_axis_deg": math.degrees(res.rotation_rad),
        "fell": bool(res.fell),
        "fell_time_s": res.fell_time_s,
        "seed": seed,
        "degraded_ticks": int(res.not_ok_ticks),
        "base_height_min_m": res.base_height_min_m,
        "step_ms_mean": 1e3 * float(st.mean()) if st.size else float("nan"),
        "wall_s": wall,
    }


def _pool_init(cfg: EvalConfig) -> None:
    global _POOL_CFG
    _POOL_CFG = cfg
    logging.getLogger("contactflow").setLevel(logging.ERROR)


_POOL_CFG: EvalConfig | None = None


def _pool_run(job: Job) -> tuple[Job, dict]:
    return job, run_job(job, _POOL_CFG)


# ------------------------------------------------------------------------------------- analysis
def _nanmean(x) -> float:
    a = np.asarray(x, float)
    a = a[np.isfinite(a)]
    return float(a.mean()) if a.size else float("nan")


def monotonic_verdict(ks: Sequence[float], values: Sequence[float], falls: Sequence[int], tol: float = 0.0) -> dict:
    """Is the metric decreasing in K over the whole grid?

    Args:
        ks: the swept values (increasing). values: the mean metric per K (NaN: every trial fell).
        falls: falls per K. tol: a step ``v[i+1] < v[i] + tol`` counts as decreasing.

    Returns:
        ``decreasing`` (bool: every step decreases and no episode fell), ``reason`` ("" or why not),
        ``range`` ([value at the lowest K, at the highest K]).
    """
    v = [float(x) for x in values]
    reason = ""
    if any(falls):
        reason = f"falls at K = {[k for k, f in zip(ks, falls) if f]}"
    elif not all(np.isfinite(v)):
        reason = "missing values"
    else:
        bad = [(ks[i], ks[i + 1]) for i in range(len(v) - 1) if not v[i + 1] < v[i] + tol]
        if bad:
            reason = f"not decreasing between K = {bad}"
    return {"decreasing": reason == "", "reason": reason, "range": [v[0], v[-1]] if v else []}


def _summarise(cfg: EvalConfig, suite: str, controller: str, runs: Mapping[tuple[str, float], list[dict]]) -> dict:
    out = {}
    for s, ex in experiments(cfg, suite).items():
        sc = cfg.scenarios[s]
        ks = ex["k"]
        couple = ex["couple_nm"]
        rows = []
        for k in ks:
            trials = runs[(s, float(k))]
            mean = {m: _nanmean([t[m] for t in trials]) for m in
                    ("displacement_m", "displacement_along_m", "attitude_deg", "rotation_about_axis_deg")}
            rows.append({"k": k, "trials": trials, "mean": mean, "falls": sum(t["fell"] for t in trials)})
        key = "displacement_m" if sc.metric == "displacement" else "attitude_deg"
        tol = cfg.monotonic_tol
        verdicts = {m: monotonic_verdict(ks, [r["mean"][mk] for r in rows], [r["falls"] for r in rows], tol)
                    for m, mk in (("displacement", "displacement_m"), ("attitude", "attitude_deg"))}
        along, against = _against(rows, bool(couple))
        entry = {
            "figure": sc.figure, **ex, "metric": sc.metric,
            "scale": float(cfg.suites[suite].scale.get(s, 1.0)), "paper": sc.paper,
            "rows": rows, "falls": sum(r["falls"] for r in rows), "episodes": sum(len(r["trials"]) for r in rows),
            "against": against, "against_metric": along,
            "monotonic_along": along_verdict(rows, bool(couple), tol),
            "monotonic": verdicts[sc.metric], "monotonic_other": verdicts["attitude" if sc.metric == "displacement"
                                                                          else "displacement"],
        }
        if sc.paper_headline is not None:
            h = dict(sc.paper_headline)
            unit = h.get("unit", "")
            scale = 100.0 if unit == "cm" else 1.0
            ours, falls = {}, {}
            for kk in h.get("k", []):
                if kk in ks:
                    ours[str(kk)] = rows[ks.index(kk)]["mean"][key] * scale
                    falls[str(kk)] = rows[ks.index(kk)]["falls"]
            entry["headline"] = {"paper": h, "ours": ours, "ours_falls": falls, "unit": unit}
        out[s] = entry
    return out


def along_verdict(rows: Sequence[Mapping], couple: bool, tol: float = 0.0) -> dict:
    """Is the signed response along the load decreasing in K, and nowhere against the load?

    The primary verdict (:func:`monotonic_verdict` on ``displacement_m`` / ``attitude_deg``) takes norms: a hand
    that moves across the push, or turns against a couple, can decrease in norm while along the load it does not
    (docs/lac_policy.md, the suite ``graph``). This one takes the component along the load, the ``against_metric``
    of :func:`_against`: ``displacement_along_m`` [m] for a force (also in the attitude scenarios, the loaded
    link's displacement along it), ``rotation_about_axis_deg`` [deg] for a couple.

    Args:
        rows: a scenario's rows (``k``, ``mean``, ``falls``; ``trials`` for the against test). couple: the load is
            a couple. tol: as in :func:`monotonic_verdict`, in the along metric's unit.

    Returns:
        :func:`monotonic_verdict`'s dict plus ``metric``; not ``decreasing`` either where the link ended against
        the load (:func:`_against`) at some K.
    """
    metric, against = _against(rows, couple)
    v = monotonic_verdict([r["k"] for r in rows], [_none_nan(r["mean"].get(metric)) for r in rows],
                          [r["falls"] for r in rows], tol)
    if v["decreasing"] and against:
        v = {**v, "decreasing": False, "reason": f"against the load at K = {against}"}
    return {**v, "metric": metric}


def _against(rows: Sequence[Mapping], couple: bool) -> tuple[str, list]:
    """``(signed metric, the K of rows where the link ended against the load)``: the signed component along the load
    (``displacement_along_m``, ``rotation_about_axis_deg`` for a couple) negative in the mean and in most trials that
    stood (a single trial's sign is noise)."""
    along = "rotation_about_axis_deg" if couple else "displacement_along_m"
    against = []
    for r in rows:
        signed = np.array([_none_nan(t.get(along)) for t in r["trials"]])
        signed = signed[np.isfinite(signed)]
        if len(signed) and np.mean(signed) < 0 and np.sum(signed < 0) > len(signed) / 2:
            against.append(r["k"])
    return along, against


def run_eval(controllers: Sequence[str], *, suite: str = "envelope", cfg: EvalConfig | None = None,
             workers: int = 1, progress: bool = True, compare_pair: tuple[str, str] | None = None) -> dict:
    """Run a suite for some controllers (deterministic: each episode is independent, seeded).

    Args:
        controllers: names (module docstring). ``holosoma`` is skipped with a logged message (and a
            ``skipped`` entry) when its model cannot be fetched.
        suite: a suite of the config. cfg: the config (default :func:`load_eval_config`).
        workers: parallel worker processes (``spawn``ed; 1: in this process, also used when the
            caller's ``__main__`` is not a file the workers can re-import).
        progress: tqdm progress bar over the episodes.
        compare_pair: ``(student, teacher)``: add :func:`compare` of the two.

    Returns:
        The JSON table: ``suite``, ``profile``, ``trials``, ``k_grids``, ``pd_stand_gains``,
        ``results`` {controller: {scenario: {figure, link, channel, metric, force_base_n,
        couple_nm, scale, k, rows: [{k, trials: [:func:`run_job` dicts], mean (over the trials
        that did not fall; NaN if all fell), falls}], falls, episodes, monotonic (primary
        metric, :func:`monotonic_verdict`), monotonic_other, headline (LAC's numbers, ours and
        our falls at the same K), against (the K where the link ended against the load, which the norms hide:
        the signed component along it, ``against_metric`` = ``displacement_along_m`` or ``rotation_about_axis_deg``
        for a couple, negative in the mean and in most trials that stood), monotonic_along (that signed component
        decreasing and nowhere against the load, :func:`along_verdict`)}}}, ``falls`` {controller: {fell, episodes}}, ``skipped``,
        ``comparison`` (with ``compare_pair``), ``date_utc``, ``machine``, ``wall_s``, ``workers``.

    Raises:
        ConfigError: unknown suite or controller, bad spec. ModelError: a policy model cannot be
            loaded (other than holosoma's fetch).
    """
    cfg = load_eval_config() if cfg is None else cfg
    suite_scenarios(cfg, suite)
    skipped = {}
    ok = []
    for c in controllers:
        try:
            _worker_state(c, cfg)  # validate here (spec, model, robot) before any worker starts
            ok.append(c)
        except ModelError as exc:
            from contactflow.policy.holosoma import ModelFetchError

            if c == "holosoma" and isinstance(exc, ModelFetchError):
                log.warning("holosoma skipped: its model cannot be fetched (%s)", exc)
                skipped[c] = f"model cannot be fetched: {exc}"
                continue
            raise
    jobs = jobs_for(cfg, ok, suite)
    t0 = time.perf_counter()
    results: dict[Job, dict] = {}
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(jobs), desc=f"lac eval {suite}", unit="ep")
    if workers > 1 and not _main_importable():
        log.warning("--workers %d: the caller's __main__ cannot be re-imported by spawned workers (a script read "
                    "from stdin?); running in this process", workers)
        workers = 1
    if workers <= 1:
        for j in jobs:
            results[j] = run_job(j, cfg)
            if bar is not None:
                bar.update(1)
    else:
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        with ctx.Pool(min(workers, len(jobs)) or 1, initializer=_pool_init, initargs=(cfg,)) as pool:
            for j, r in pool.imap_unordered(_pool_run, jobs):
                results[j] = r
                if bar is not None:
                    bar.update(1)
    if bar is not None:
        bar.close()
    wall = time.perf_counter() - t0
    table: dict = {
        "suite": suite, "suite_description": cfg.suites[suite].description,
        "profile": dataclasses.asdict(cfg.profile), "trials": cfg.trials,
        "base_stiffness": None if cfg.base_stiffness is None else list(cfg.base_stiffness),
        "perturbation_std_rad": cfg.perturbation_std_rad, "k_grids": {k: list(v) for k, v in cfg.k_grids.items()},
        "pd_stand_gains": dataclasses.asdict(cfg.pd_stand), "results": {}, "falls": {}, "skipped": skipped,
    }
    for c in ok:
        runs: dict = {}
        for j in jobs:
            if j.controller == c:
                runs.setdefault((j.scenario, j.k), []).append(results[j])
        table["results"][c] = _summarise(cfg, suite, c, runs)
        res = table["results"][c]
        table["falls"][c] = {"fell": sum(v["falls"] for v in res.values()),
                             "episodes": sum(v["episodes"] for v in res.values())}
    if compare_pair is not None:
        a, b = compare_pair
        if a in table["results"] and b in table["results"]:
            table["comparison"] = compare(table, a, b)
    table["date_utc"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    table["machine"] = f"{platform.node()} ({os.cpu_count()} cores), load {os.getloadavg()[0]:.2f}"
    table["wall_s"] = wall
    table["workers"] = workers
    return table


def _main_importable() -> bool:
    import sys

    main = sys.modules.get("__main__")
    f = getattr(main, "__file__", None)
    return f is None or Path(f).is_file()  # no __file__: interactive / -c, spawn skips it


def compare(table: Mapping, student: str, teacher: str, tol: float = 0.25) -> dict:
    """Per scenario and K: the ratio of the student's mean primary metric to the teacher's.

    Args:
        table: a :func:`run_eval` table holding both controllers (same suite).
        student, teacher: controller names. tol: the allowed relative difference (LAC issue: 25 %).

    Returns:
        ``scenarios``: {scenario: ``metric`` (the scenario's primary one: the CoM displacement, or
        the attitude change for Fig. 4's K_theta sweeps), ``k``, ``ratio`` (student / teacher per
        K; NaN where either fell), ``within`` (``|ratio - 1| <= tol``), ``all_within``, and the same
        for the CoM displacement in every scenario (``displacement_ratio``, ``displacement_within``)},
        plus ``all_within`` (primary metrics) and ``displacement_all_within`` over everything.

    Raises:
        ConfigError: a controller is not in the table.
    """
    res = table["results"]
    for c in (student, teacher):
        if c not in res:
            raise ConfigError(f"compare: controller {c!r} not in the table; it has {sorted(res)}")
    out: dict = {"student": student, "teacher": teacher, "tolerance": tol, "scenarios": {}}
    every = every_d = True

    def ratios_of(e_s, e_t, key):
        ratios, within = [], []
        for rs, rt in zip(e_s["rows"], e_t["rows"]):
            a, b = _none_nan(rs["mean"][key]), _none_nan(rt["mean"][key])
            ok = np.isfinite(a) and np.isfinite(b) and b != 0 and not rs["falls"] and not rt["falls"]
            r = a / b if ok else float("nan")
            ratios.append(r)
            within.append(bool(np.isfinite(r) and abs(r - 1.0) <= tol))
        return ratios, within

    for s, e in res[teacher].items():
        if s not in res[student]:
            continue
        if [r["k"] for r in res[student][s]["rows"]] != [r["k"] for r in e["rows"]]:
            raise ConfigError(f"compare: scenario {s!r} has different K grids in the two runs")
        key = "displacement_m" if e["metric"] == "displacement" else "attitude_deg"
        ratios, within = ratios_of(res[student][s], e, key)
        d_ratios, d_within = ratios_of(res[student][s], e, "displacement_m")
        out["scenarios"][s] = {"metric": key, "k": e["k"], "ratio": ratios, "within": within, "all_within": all(within),
                               "displacement_ratio": d_ratios, "displacement_within": d_within}
        every = every and all(within)
        every_d = every_d and all(d_within)
    out["all_within"] = every
    out["displacement_all_within"] = every_d
    return out


def _none_nan(x) -> float:
    return float("nan") if x is None else float(x)


def _log_axes(ax) -> None:
    """Log x; log y when some plotted value is positive (all fell: nothing to put on a log axis)."""
    ax.set_xscale("log")
    ys = [y for line in ax.get_lines() for y in np.asarray(line.get_ydata(), float)]
    if any(np.isfinite(y) and y > 0 for y in ys):
        ax.set_yscale("log")


def plot_eval(table: Mapping, out_dir: str | Path, prefix: str = "lac_eval") -> list[Path]:
    """PNG plots like LAC Figs. 3, 4, 6 (log-log; one file per figure).

    Fig. 3: displacement (dashed, hollow markers) and attitude (solid, filled) against K.
    Fig. 4: attitude and displacement against K_theta. Fig. 6: one panel per scenario,
    displacement against K. One colour per scenario (Figs. 3, 4) or controller (Fig. 6); the
    legend counts the falls. Points where every trial fell are absent.

    Returns:
        The files written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = []
    ctrls = list(table["results"])
    styles = ["o", "s", "^", "D", "v"]
    for fig_no in (3, 4, 6):
        scen = [(c, s, e) for c in ctrls for s, e in table["results"][c].items() if e["figure"] == fig_no]
        if not scen:
            continue
        if fig_no == 6:
            names = list(dict.fromkeys(s for _, s, _ in scen))
            fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.6), squeeze=False)
            for ax, s in zip(axes[0], names):
                for ci, c in enumerate(ctrls):
                    e = table["results"][c].get(s)
                    if e is None:
                        continue
                    y = [100 * _none_nan(r["mean"]["displacement_m"]) for r in e["rows"]]
                    ax.plot(e["k"], y, marker=styles[ci % len(styles)], label=f"{c} (falls {e['falls']}/{e['episodes']})")
                _log_axes(ax)
                ax.set_xlabel("K [N/m]")
                ax.set_ylabel("CoM displacement at peak [cm]")
                e0 = next(table["results"][c][s] for c in ctrls if s in table["results"][c])
                ax.set_title(f"{s}: {np.linalg.norm(e0['force_base_n']):.3g} N on {e0['link']}", fontsize=9)
                ax.legend(fontsize=7)
        else:
            fig, axes = plt.subplots(1, 2, figsize=(10, 4), squeeze=False)
            order = (("displacement_m", 100.0, "CoM displacement [cm]", "--"), ("attitude_deg", 1.0, "attitude change [deg]", "-"))
            if fig_no == 4:
                order = order[::-1]
            for ax, (key, sc, label, ls) in zip(axes[0], order):
                for i, (c, s, e) in enumerate(scen):
                    y = [sc * _none_nan(r["mean"][key]) for r in e["rows"]]
                    ci = ctrls.index(c)
                    ax.plot(e["k"], y, ls=ls, marker=styles[ci % len(styles)], color=f"C{i % 10}",
                            mfc="none" if key == "displacement_m" else None,
                            label=f"{c} {s} (falls {e['falls']}/{e['episodes']})")
                _log_axes(ax)
                ax.set_xlabel("K [N/m]" if fig_no == 3 else "K_theta [N m/rad]")
                ax.set_ylabel(label)
                ax.legend(fontsize=6)
        fig.suptitle(f"LAC Fig. {fig_no} scenarios, suite {table['suite']}", fontsize=10)
        fig.tight_layout()
        f = out_dir / f"{prefix}_fig{fig_no}.png"
        fig.savefig(f, dpi=110)
        plt.close(fig)
        files.append(f)
    return files


# What makes two tables' episodes the same experiment (trials and perturbation seeds may differ: they are more
# samples of it): the event profile; the stiffness of the channels not swept (``base_stiffness``, a table's own
# key); per scenario the loaded link, the swept channel, the load, the posture, the channels it commands otherwise
# (``stiffness``) and the grid. A key a stored table lacks (``base_stiffness`` and ``stiffness`` are recorded since
# 2026-12-05) is not compared. Not in a table, so not compared: robot_aliases.
_SAME_EXPERIMENT = ("link", "channel", "force_base_n", "couple_nm", "arms", "stiffness", "k")
_NOT_RECORDED = object()  # check_same_experiments: a base_stiffness not known (an older table)


def experiments(cfg: EvalConfig, suite: str) -> dict[str, dict]:
    """What each scenario of a suite runs, as a table records it: scenario -> ``link``, ``channel``,
    ``force_base_n`` ((3,) [N], BASE frame, the suite's scale applied), ``couple_nm`` [N m], ``arms``
    (joint -> [rad]), ``stiffness`` (channel -> value: the channels not swept it commands otherwise) and ``k``
    (the swept grid [N/m or N m/rad]).

    Raises:
        ConfigError: an unknown suite.
    """
    out = {}
    for s in suite_scenarios(cfg, suite):
        sc = cfg.scenarios[s]
        force, couple = scenario_wrench(cfg, suite, s)
        out[s] = {"link": sc.link, "channel": sc.channel, "force_base_n": force.tolist(), "couple_nm": couple,
                  "arms": dict(sc.arms), "stiffness": dict(sc.stiffness), "k": list(cfg.k_grids[sc.grid])}
    return out


def check_same_experiments(stored: Mapping, suite: str, profile: Mapping, runs: Mapping[str, Mapping],
                           skip: Sequence[str] = (), base_stiffness=_NOT_RECORDED) -> None:
    """Refuse a stored :func:`run_eval` table whose episodes are not those of this run (before merging it,
    or before a run that will: a teacher suite takes minutes).

    Args:
        stored: the stored table (JSON-loaded). suite: this run's suite. profile: this run's event
            profile (:class:`ProfileCfg` as a dict). runs: :func:`experiments` of this run.
        skip: stored controllers that will not be merged (this run has its own).
        base_stiffness: this run's :attr:`EvalConfig.base_stiffness` ((5,) or None: the teleop's default);
            not given, or not in the stored table (made before it was recorded): not compared.

    Raises:
        ConfigError: another suite, event profile, stiffness of the channels not swept or set of scenarios,
            or a scenario with another link, channel, load, posture or K grid (a table made with another
            ``lac_eval.yaml``); the message names the first difference.
    """
    if stored.get("suite") != suite:
        raise ConfigError(f"merge: the stored table is of suite {stored.get('suite')!r}, this run of {suite!r}")
    if "profile" in stored and not _same(dict(stored["profile"]), dict(profile)):
        raise ConfigError(f"merge: the stored table's event profile {dict(stored['profile'])} is not this run's "
                          f"{dict(profile)}: rerun the stored controllers with this configuration")
    if base_stiffness is not _NOT_RECORDED and "base_stiffness" in stored and not _same(stored["base_stiffness"],
                                                                                         base_stiffness):
        raise ConfigError(f"merge: the stored table's base_stiffness (the channels not swept) is "
                          f"{stored['base_stiffness']!r}, this run's {None if base_stiffness is None else list(base_stiffness)!r} "
                          f"(null: the teleop's default): rerun the stored controllers with this configuration")
    for c, res in stored.get("results", {}).items():
        if c in skip:
            continue
        if set(res) != set(runs):
            lacks, extra = sorted(set(runs) - set(res)), sorted(set(res) - set(runs))
            what = "; ".join([*([f"lacks this run's scenarios {lacks}"] if lacks else []),
                              *([f"has scenarios {extra} this run does not run"] if extra else [])])
            raise ConfigError(f"merge: the stored table's {c!r} {what}: rerun {c!r} with this configuration")
        for s, e in runs.items():
            for key in _SAME_EXPERIMENT:
                if key in res[s] and not _same(e[key], res[s][key]):
                    raise ConfigError(f"merge: the stored table's {c!r} ran scenario {s!r} with {key} = "
                                      f"{res[s][key]!r}, this run with {e[key]!r}: rerun {c!r} with this configuration")


def merge_tables(table: dict, other: Mapping) -> dict:
    """Add the controllers of another :func:`run_eval` table of the same suite (not already present)
    to ``table`` (in place; for comparing a new run against a stored one). Returns ``table``.

    Raises:
        ConfigError: as :func:`check_same_experiments`, against the experiments recorded in ``table``
            (a table without results is checked for its suite only).
    """
    ours = next(iter(table["results"].values()), None)
    runs = {} if ours is None else {s: {k: e[k] for k in _SAME_EXPERIMENT if k in e} for s, e in ours.items()}
    if ours is None or "profile" not in table:  # nothing recorded to compare with: the suite only
        check_same_experiments({"suite": other.get("suite")}, table.get("suite"), {}, {})
    else:
        check_same_experiments(other, table.get("suite"), table["profile"], runs, skip=list(table["results"]),
                               base_stiffness=table.get("base_stiffness", _NOT_RECORDED))
    for c, res in other.get("results", {}).items():
        if c not in table["results"]:
            table["results"][c] = res
            table["falls"][c] = other["falls"][c]
    return table


def _same(a, b) -> bool:
    """Equal after a JSON round trip (lists for tuples and arrays, floats to 1e-9); values of other kinds
    (a mapping against a list, text against a number) are not equal."""
    try:
        if isinstance(a, Mapping) or isinstance(b, Mapping):
            return isinstance(a, Mapping) and isinstance(b, Mapping) and set(a) == set(b) and all(
                _same(a[k], b[k]) for k in a)
        if isinstance(a, (list, tuple, np.ndarray)) or isinstance(b, (list, tuple, np.ndarray)):
            a, b = list(np.asarray(a, float).ravel()), list(np.asarray(b, float).ravel())
            return len(a) == len(b) and all(abs(x - y) <= 1e-9 for x, y in zip(a, b))
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            return abs(float(a) - float(b)) <= 1e-9
    except (TypeError, ValueError):
        return False
    return a == b


def format_summary(table: Mapping) -> str:
    """A few text lines per controller: per scenario the primary metric over K, the monotonicity
    verdict, the falls and the K where the link ended against the load; the headline numbers beside LAC's;
    the comparison if any."""
    lines = [f"suite {table['suite']}: {table.get('suite_description', '')}"]
    for c, res in table["results"].items():
        f = table["falls"][c]
        along = {s: e.get("monotonic_along") or along_verdict(e["rows"], bool(e.get("couple_nm")))  # stored tables
                 for s, e in res.items()}                                                              # before it
        n_dec = sum(bool(e["monotonic"]["decreasing"]) for e in res.values())
        n_along = sum(bool(v["decreasing"]) for v in along.values())
        lines.append(f"{c}: {f['fell']} falls in {f['episodes']} episodes; {n_dec} of {len(res)} scenarios decreasing "
                     f"({n_along} of {len(res)} along the load)")
        for s, e in res.items():
            key, unit, sc = ("displacement_m", "cm", 100.0) if e["metric"] == "displacement" else ("attitude_deg", "deg", 1.0)
            vals = " / ".join(f"{sc * _none_nan(r['mean'][key]):.3g}" for r in e["rows"])
            mono = "decreasing" if e["monotonic"]["decreasing"] else f"NOT decreasing ({e['monotonic']['reason']})"
            metric, ks_against = ((e["against_metric"], e["against"]) if "against" in e  # tables stored before it: from
                                  else _against(e["rows"], bool(e.get("couple_nm"))))     # their trials
            against = f"; AGAINST the load ({metric} < 0) at K = {ks_against}" if ks_against else ""
            a = along[s]
            a_unit, a_sc = ("deg", 1.0) if a["metric"] == "rotation_about_axis_deg" else ("cm", 100.0)
            a_vals = " / ".join(f"{a_sc * _none_nan(r['mean'].get(a['metric'])):.3g}" for r in e["rows"])
            a_mono = "decreasing" if a["decreasing"] else f"NOT decreasing ({a['reason']})"
            lines.append(f"  {s}: {e['metric']} [{unit}] at K = {e['k']}: {vals}; {mono}; falls {e['falls']}/{e['episodes']}"
                         f"{against}")
            lines.append(f"    along the load [{a_unit}]: {a_vals}; {a_mono}")
            if "headline" in e:
                h = e["headline"]
                row_falls = {float(r["k"]): r["falls"] for r in e["rows"]}  # stored tables without ours_falls
                ours = ", ".join(f"K={k}: {_none_nan(v):.3g} "
                                 f"(falls {h.get('ours_falls', {}).get(k, row_falls.get(float(k), '?'))})"
                                 for k, v in h["ours"].items())
                lines.append(f"    LAC: {h['paper']['value']} {h['unit']} at K = {h['paper']['k']}; ours: {ours} {h['unit']}")
    for c, why in table.get("skipped", {}).items():
        lines.append(f"{c}: skipped ({why})")
    cmp_ = table.get("comparison")
    if cmp_:
        n_in = sum(sum(e["within"]) for e in cmp_["scenarios"].values())
        n_k = sum(len(e["within"]) for e in cmp_["scenarios"].values())
        lines.append(f"{cmp_['student']} / {cmp_['teacher']} (within {100 * cmp_['tolerance']:.0f} % at {n_in} of {n_k} "
                     f"points; at all: {cmp_['all_within']}):")
        for s, e in cmp_["scenarios"].items():
            lines.append(f"  {s} ({e['metric']}): " + " / ".join(f"{_none_nan(r):.2f}" for r in e["ratio"]))
    return "\n".join(lines)
