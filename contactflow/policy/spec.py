"""Policy I/O specs: what a learned joint-position policy reads and what its output means.

A spec is a YAML file (``robots/<robot>/policies/*.yaml``; commented reference:
``robots/g1/policies/reference.yaml``) giving the ONNX model, its input and output tensors, the
observation terms in order (dimension, scale, clip, joint order by NAME), the history, the phase
clock, the action -> ``q_target`` map, the control rate, the PD gains and the teleop command
fields read. :func:`load_policy_spec` reads it into frozen dataclasses, opens the model and checks
everything against the model and the robot before anything runs:

* the model's input/output names and shapes against the spec (one line naming both files);
* each observation term against the registry :data:`contactflow.policy.terms.OBS_TERMS`;
* each joint order against the robot's joints, and the policy order against the ONNX
  metadata's ``dof_names`` when the model has them, all by name (the message lists the names);
* the frame size x history against the input size.

Every error is a :class:`contactflow.errors.ConfigError` (or ``ModelError`` for an unreadable
model) whose message is one line.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np

from contactflow.config import load_config, read_yaml
from contactflow.errors import ConfigError, ModelError
from contactflow.policy.onnx_model import OnnxModel
from contactflow.policy.terms import OBS_TERMS, ObsTerm

__all__ = [
    "ActionCfg", "BoundTerm", "GainsCfg", "HistoryCfg", "ModelCfg", "PhaseCfg", "PolicySpec", "PolicySpecCfg", "SafetyCfg",
    "TensorCfg", "TermCfg", "load_policy_spec", "policies_dir", "resolve_spec_file",
]


# --------------------------------------------------------------------------- YAML schema


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelCfg:
    """Where the ONNX model comes from: exactly one of ``path`` (relative to the spec file) or
    ``holosoma`` (a model name of :func:`contactflow.policy.fetch_holosoma`, downloaded on first use)."""

    path: str | None = None
    holosoma: str | None = None

    def __post_init__(self):
        if (self.path is None) == (self.holosoma is None):
            raise ConfigError("model: give exactly one of 'path' or 'holosoma'")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TensorCfg:
    """An ONNX tensor: name and shape (batch dimension included, e.g. ``[1, 64, 95]``)."""

    name: str
    shape: tuple[int, ...]

    def __post_init__(self):
        if not self.shape or any(d <= 0 for d in self.shape):
            raise ConfigError(f"shape: expected positive dimensions, got {list(self.shape)}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TermCfg:
    """One observation term of the frame.

    Attributes:
        term: registry name (:data:`contactflow.policy.terms.OBS_TERMS`).
        dim: number of values (checked against the term and its joint order).
        scale: multiplies the (clipped) raw value.
        clip: optional ``[low, high]`` on the raw value, before the scale (each bound a number or a
            list of ``dim`` numbers).
        joints: name of a joint order of ``joint_orders`` (joint-indexed terms only).
        label: the policy's own name for the term (documentation and diagnostics).
    """

    term: str
    dim: int
    scale: float = 1.0
    clip: tuple[float | list[float], float | list[float]] | None = None
    joints: str | None = None
    label: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class HistoryCfg:
    """Observation history.

    Attributes:
        length: frames kept (1 = no history).
        layout: ``frames`` (input = the ``length`` frames, oldest first, each the whole frame:
            LAC's (1, 64, 95)) or ``terms`` (per term its ``length`` values oldest first, terms
            concatenated: holosoma/IsaacLab term-major flattening).
        fill: before ``length`` frames exist: ``first_frame`` (the first frame replicated into
            every slot, LAC) or ``zeros`` (holosoma).
        order: ``oldest_first`` (LAC, holosoma) or ``newest_first``: the time order of the frames
            (``frames`` layout) or of each term's values (``terms`` layout) in the input.
    """

    length: int = 1
    layout: str = "frames"
    fill: str = "first_frame"
    order: str = "oldest_first"

    def __post_init__(self):
        if self.length < 1:
            raise ConfigError("history.length: expected >= 1")
        if self.order not in ("oldest_first", "newest_first"):
            raise ConfigError(f"history.order: expected 'oldest_first' or 'newest_first', got {self.order!r}")
        if self.layout not in ("frames", "terms"):
            raise ConfigError(f"history.layout: expected 'frames' or 'terms', got {self.layout!r}")
        if self.fill not in ("first_frame", "zeros"):
            raise ConfigError(f"history.fill: expected 'first_frame' or 'zeros', got {self.fill!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PhaseCfg:
    """Two-leg gait phase clock (holosoma's locomotion policies, g1_policies.md).

    Each policy tick, before inference: ``phase += 2 pi / (rate_hz period_s)``, wrapped to
    [-pi, pi); if ``|lin_vel| < stand_threshold`` and ``|ang_vel| < stand_threshold`` both phases
    are pinned to ``stand_rad``; on the first tick with a non-zero command after standing they
    restart at ``start_rad``.
    """

    period_s: float = 1.0
    start_rad: tuple[float, float] = (0.0, math.pi)
    stand_threshold: float = 0.01
    stand_rad: float = math.pi

    def __post_init__(self):
        if self.period_s <= 0:
            raise ConfigError("phase.period_s: expected > 0")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ActionCfg:
    """Action -> joint target map ``q_target = default + scale * clip(action)`` (policy order).

    Attributes:
        default: ``robot`` (the robot file's default posture) or a mapping joint name -> angle
            [rad] (joints not listed: 0).
        scale: one scale for every joint [rad per unit action], or
        scale_effort_over_kp: per joint ``c * effort / Kp`` (LAC: c = 0.25, robot file's effort
            limit and stiffness K) -- exactly one of the two.
        clip: optional ``[low, high]`` on the raw action. The CLIPPED action is what the
            ``last_action`` term feeds back: holosoma's deploy loop clips the ONNX output to
            [-100, 100] and stores that copy as its last action (``policy_action = np.clip(...)``
            then ``last_policy_action = policy_action.copy()``); LAC has no clip, so there raw and
            clipped are the same. A refused action is not fed back.
    """

    default: str | dict[str, float] = "robot"
    scale: float | None = None
    scale_effort_over_kp: float | None = None
    clip: tuple[float, float] | None = None

    def __post_init__(self):
        if (self.scale is None) == (self.scale_effort_over_kp is None):
            raise ConfigError("action: give exactly one of 'scale' or 'scale_effort_over_kp'")
        if isinstance(self.default, str) and self.default != "robot":
            raise ConfigError(f"action.default: expected 'robot' or a mapping joint -> rad, got {self.default!r}")
        if self.clip is not None and not self.clip[0] < self.clip[1]:
            raise ConfigError("action.clip: expected low < high")


@dataclasses.dataclass(frozen=True, kw_only=True)
class GainsCfg:
    """PD gains given in the spec, per joint name (every joint of the robot).

    Attributes:
        kp: joint -> stiffness [N m/rad]. kd: joint -> damping [N m s/rad].
    """

    kp: dict[str, float]
    kd: dict[str, float]


@dataclasses.dataclass(frozen=True, kw_only=True)
class SafetyCfg:
    """Output check: a non-finite action, or a ``q_target`` outside ``[q_min - margin, q_max +
    margin]`` of the robot file, is not sent (the last safe command is held, ``ok`` = 0).

    Attributes:
        joint_limit_margin_rad: ``margin`` [rad], the same for every joint.
        effort_margin: add ``tau_max / kp`` of each joint to its margin: a PD target that far past
            a limit asks for the joint's effort limit at the limit, and a farther one for no more
            (the motor saturates). A low-gain policy (LAC: Kp 28.5 N m/rad at the ankles) asks for
            torque near a limit this way: held inside the limits, the G1's ankle roll at the
            default posture could ask for 7.5 N m of its 50. The Unitree driver still clamps the
            sent target into the limits on the robot (``contactflow.hardware.unitree``).
    """

    joint_limit_margin_rad: float = 0.0
    effort_margin: bool = False

    def __post_init__(self):
        if self.joint_limit_margin_rad < 0:
            raise ConfigError("safety.joint_limit_margin_rad: expected >= 0")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PolicySpecCfg:
    """The YAML file, as typed configuration (see ``robots/g1/policies/reference.yaml``)."""

    name: str
    description: str = ""
    source: str = ""
    robot: str | None = None
    model: ModelCfg | None = None
    input: TensorCfg
    output: TensorCfg
    rate_hz: float
    joint_orders: dict[str, list[str] | str]
    observation: list[TermCfg]
    history: HistoryCfg = HistoryCfg()
    phase: PhaseCfg | None = None
    action: ActionCfg
    gains: str | GainsCfg = "robot"
    command_fields: list[str] = dataclasses.field(default_factory=list)
    safety: SafetyCfg = SafetyCfg()

    def __post_init__(self):
        if self.rate_hz <= 0:
            raise ConfigError("rate_hz: expected > 0")
        if isinstance(self.gains, str) and self.gains not in ("robot", "onnx_metadata"):
            raise ConfigError(f"gains: expected 'robot', 'onnx_metadata' or {{kp: {{joint: value}}, kd: {{...}}}}, got {self.gains!r}")
        if "policy" not in self.joint_orders:
            raise ConfigError("joint_orders: missing 'policy' (the action order)")
        if not self.observation:
            raise ConfigError("observation: expected at least one term")


# --------------------------------------------------------------------------- resolved spec


@dataclasses.dataclass(frozen=True)
class BoundTerm:
    """An observation term bound to a robot: where it sits in the frame and how it reads.

    Attributes:
        cfg: the term's YAML entry.
        term: the registry entry.
        sl: its slice in the frame.
        index: (dim,) index array reordering the term's source into its joint order, or None.
        lo, hi: (dim,) clip bounds of the raw value, or None.
    """

    cfg: TermCfg
    term: ObsTerm
    sl: slice
    index: np.ndarray | None
    lo: np.ndarray | None
    hi: np.ndarray | None


@dataclasses.dataclass(frozen=True, eq=False)
class PolicySpec:
    """A policy spec checked against its ONNX model and a robot.

    Attributes:
        cfg: the parsed YAML.
        file: the spec file.
        model: the opened ONNX model (input/output bound to the spec's names).
        joint_names: (n,) policy (action) joint order.
        robot_joint_names: (n,) the robot's joint order (``q_target`` is sent in this order).
        policy_to_robot: (n,) ``robot_vec[policy_to_robot] = policy_vec``.
        terms: bound observation terms, frame order.
        frame_dim: values in one frame.
        default_policy: (n,) default angles, policy order [rad].
        default_robot: (n,) default angles, robot order [rad].
        scale: (n,) action scale, policy order [rad].
        kp, kd: (n,) PD gains, robot order [N m/rad], [N m s/rad].
        q_min, q_max: (n,) accepted ``q_target`` range, robot order (limits +- margin) [rad].
        command_fields: teleop command fields the terms (and the phase clock) read.
    """

    cfg: PolicySpecCfg
    file: Path
    model: OnnxModel
    joint_names: tuple[str, ...]
    robot_joint_names: tuple[str, ...]
    policy_to_robot: np.ndarray
    terms: tuple[BoundTerm, ...]
    frame_dim: int
    default_policy: np.ndarray
    default_robot: np.ndarray
    scale: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    q_min: np.ndarray
    q_max: np.ndarray
    command_fields: tuple[str, ...]

    @property
    def period_s(self) -> float:
        """Policy period 1 / rate_hz [s]."""
        return 1.0 / self.cfg.rate_hz

    def decimation(self, tick_period_s: float) -> int:
        """Ticks per policy step when the caller ticks every ``tick_period_s`` [s].

        Raises:
            ConfigError: the policy period is not an integer multiple of the tick period.
        """
        ratio = self.period_s / float(tick_period_s)
        n = int(round(ratio))
        if n < 1 or abs(ratio - n) > 1e-6 * max(1.0, ratio):
            raise ConfigError(
                f"{self.file}: rate_hz {self.cfg.rate_hz:g} is not the tick rate {1.0 / tick_period_s:g} Hz divided by an integer"
            )
        return n

    def action_bounds(self, margin_rad: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """The raw actions the runner accepts (before ``action.clip``): ``q_target = default + scale *
        action`` inside ``[q_min + margin, q_max - margin]`` (the accepted target range shrunk by
        ``margin_rad``), per joint in policy order. For training code that must emit acceptable actions.

        Returns:
            (low (n,), high (n,)) policy order.

        Raises:
            ConfigError: the margin is larger than half a joint's accepted range.
        """
        lo, hi = self.q_min + margin_rad, self.q_max - margin_rad
        if np.any(lo > hi):
            raise ConfigError(f"{self.file}: action margin {margin_rad:g} rad exceeds half the accepted range of "
                              f"{[self.robot_joint_names[i] for i in np.flatnonzero(lo > hi)]}")
        p2r = self.policy_to_robot
        return (lo[p2r] - self.default_policy) / self.scale, (hi[p2r] - self.default_policy) / self.scale

    def term(self, term: str) -> BoundTerm | None:
        """The first observation term named ``term`` (a registry name, e.g. ``stiffness``) in frame order (its
        config, its place ``sl`` in a frame); None when the spec has no such term."""
        return next((b for b in self.terms if b.cfg.term == term), None)

    def term_slice(self, term: str) -> slice | None:
        """Where :meth:`term` ``term`` sits in a frame; None when the spec has no such term."""
        bound = self.term(term)
        return None if bound is None else bound.sl

    def layout(self) -> list[dict[str, Any]]:
        """The observation frame as plain data: one row per term (for logs, docs and manifests)."""
        return [
            {"term": b.cfg.term, "label": b.cfg.label or b.cfg.term, "offset": b.sl.start, "dim": b.cfg.dim,
             "scale": b.cfg.scale, "joints": b.cfg.joints}
            for b in self.terms
        ]


def policies_dir(robot_name: str = "g1") -> Path:
    """``robots/<robot>/policies`` of the robot descriptions directory."""
    from contactflow.robot import robots_dir

    return robots_dir() / robot_name / "policies"


def resolve_data_path(path: str | Path, what: str) -> Path:
    """A file given on a command line: absolute, or relative to the working directory, else to the
    repository root or installed package, else through its ``robots/`` part in the shipped robot data
    (:func:`contactflow.paths.data_path_candidates`; so ``robots/g1/policies/lac.yaml`` works from a
    dataflow's working directory, in a checkout or an install).

    Args:
        path: the file as given.
        what: what the file is, for the error (``policy spec file``, ``model file``).

    Raises:
        ConfigError: not found; the message lists every place it looked.
    """
    p = Path(path).expanduser()
    if p.is_absolute():
        if p.is_file():
            return p
        raise ConfigError(f"{path}: {what} not found")
    from contactflow.paths import data_path_candidates

    tried = []
    for cand in data_path_candidates(p):  # the working directory, then the shipped data (checkout or install)
        if cand.is_file():
            return cand
        tried.append(str(cand))
    raise ConfigError(f"{path}: {what} not found; looked in: {', '.join(dict.fromkeys(tried))}")


def spec_robot(path: str | Path) -> str | None:
    """The robot a spec file names (its ``robot`` key), or None when it names none.

    Raises:
        ConfigError: the spec file is not found or not readable YAML (:func:`resolve_spec_file`).
    """
    from contactflow.config import read_yaml

    raw = read_yaml(resolve_spec_file(path))
    robot = raw.get("robot") if isinstance(raw, dict) else None
    return robot if isinstance(robot, str) and robot else None


def resolve_spec_file(path: str | Path) -> Path:
    """The spec file: a YAML path (absolute, from the working directory, else from the repository
    root), or a bare name ``<name>`` = ``robots/*/policies/<name>.yaml``.

    Raises:
        ConfigError: not found (listing where it looked), or the name is ambiguous (several robots
            have it).
    """
    from contactflow.robot import robots_dir

    p = Path(path)
    if p.suffix in (".yaml", ".yml"):
        return resolve_data_path(path, "policy spec file")
    pattern = robots_dir() / "*" / "policies" / f"{p.name}.yaml"
    found = sorted(robots_dir().glob(f"*/policies/{p.name}.yaml")) if p.name == str(path) else []
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        raise ConfigError(f"policy spec {str(path)!r} is ambiguous: {[str(f) for f in found]}")
    raise ConfigError(f"{path}: policy spec not found (a YAML file, or a bare name looked up as {pattern})")


def _robot_kd(robot, src: str) -> np.ndarray:
    kd = getattr(robot, "kd", None)
    if kd is None or len(kd) != robot.n or not np.any(np.asarray(kd) > 0):
        raise ConfigError(f"{src}: gains: robot, but the robot file {robot.file_label()} gives no PD damping "
                          f"(actuators: joint -> [armature, kd]) for its {robot.n} joints")
    return np.asarray(kd, dtype=float).copy()


def _name_list(values: list[str] | str, key: str, robot, model: OnnxModel, src: str) -> list[str]:
    if isinstance(values, str):
        if values == "robot":
            return list(robot.joint_names)
        if values == "onnx_metadata":
            names = model.metadata.get("dof_names")
            if not isinstance(names, list):
                raise ConfigError(f"{src}: joint_orders.{key}: 'onnx_metadata' but {model.path} has no dof_names metadata")
            return [str(n) for n in names]
        raise ConfigError(f"{src}: joint_orders.{key}: expected a list of joint names, 'robot' or 'onnx_metadata'")
    if len(set(values)) != len(values):
        dup = sorted({v for v in values if values.count(v) > 1})
        raise ConfigError(f"{src}: joint_orders.{key}: duplicate joint name(s) {dup}")
    return list(values)


def _mismatch(have: list[str], want: list[str], have_label: str, want_label: str) -> str:
    extra = [n for n in have if n not in want]
    missing = [n for n in want if n not in have]
    parts = ([f"in {have_label} but not in {want_label}: {extra}"] if extra else []) + (
        [f"in {want_label} but not in {have_label}: {missing}"] if missing else [])
    return "; ".join(parts) or f"same names in another order ({have_label}: {have}; {want_label}: {want})"


def _bounds(value, dim: int, where: str) -> np.ndarray:
    arr = np.asarray(value, dtype=float).reshape(-1)
    if arr.size == 1:
        return np.full(dim, float(arr[0]))
    if arr.size != dim:
        raise ConfigError(f"{where}: expected one number or {dim} numbers, got {arr.size}")
    return arr


def load_policy_spec(path: str | Path, robot, *, model: str | Path | None = None, intra_op_threads: int = 1) -> PolicySpec:
    """Read a policy spec, open its ONNX model and check both against ``robot``.

    Args:
        path: the spec YAML file, or a spec name under ``robots/*/policies/`` (``lac``,
            ``holosoma_g1_29dof_loco``).
        robot: the loaded robot (:func:`contactflow.robot.load_robot`); its ``joint_names``,
            limits, effort limits, default posture and (for ``gains: robot``) PD gains ``K`` and
            ``kd`` are used.
        model: an ONNX file overriding the spec's ``model`` (e.g. a freshly trained checkpoint).
        intra_op_threads: onnxruntime intra-op threads.

    Returns:
        PolicySpec.

    Raises:
        ConfigError: malformed spec, unknown term, joint-name mismatch (spec / ONNX metadata /
            robot), wrong input or output name or shape (one line naming the spec and the model).
        ModelError: the model file is missing or not loadable.
        ModelFetchError: a ``holosoma`` model cannot be downloaded.
    """
    file = resolve_spec_file(path)
    src = str(file)
    cfg = load_config(PolicySpecCfg, read_yaml(file), source=src)

    if model is not None:
        try:
            model_path = resolve_data_path(model, "model file (--model, or $CONTACTFLOW_POLICY_MODEL in a graph)")
        except ConfigError as exc:
            raise ModelError(str(exc)) from None
    elif cfg.model is None:
        raise ConfigError(f"{src}: no 'model' in the spec and none given (--model FILE)")
    elif cfg.model.path is not None:
        model_path = Path(cfg.model.path).expanduser()
        if not model_path.is_absolute():
            model_path = file.parent / model_path
    else:
        from contactflow.policy.holosoma import fetch_holosoma

        model_path = fetch_holosoma(cfg.model.holosoma)
    if not model_path.is_file():
        raise ModelError(f"{src}: model file {model_path} not found (give an ONNX file with --model FILE; "
                         f"no LAC checkpoint is public: docs/lac_teleop.md, 'Swapping in lac_policy')")
    onnx = OnnxModel(model_path, intra_op_threads=intra_op_threads)

    # ---- ONNX I/O against the spec
    for kind, want, have in (("input", cfg.input, onnx.inputs), ("output", cfg.output, onnx.outputs)):
        info = next((t for t in have if t.name == want.name), None)
        if info is None or not info.matches(want.shape) or (kind == "input" and len(have) != 1):
            raise ConfigError(
                f"{src}: {kind} {want.name!r} {tuple(want.shape)} expected, but {model_path} has {kind}(s) "
                f"{', '.join(map(repr, have)) or 'none'}"
            )
        if info.dtype != "tensor(float)":
            raise ConfigError(f"{src}: {kind} {want.name!r} of {model_path} is {info.dtype}, expected tensor(float)")
    onnx.bind(cfg.input.name, cfg.output.name)

    # ---- joint orders, by name
    robot_names = list(robot.joint_names)
    orders = {k: _name_list(v, k, robot, onnx, src) for k, v in cfg.joint_orders.items()}
    policy = orders["policy"]
    if sorted(policy) != sorted(robot_names):
        raise ConfigError(f"{src}: joint_orders.policy does not match the joints of robot {robot.name!r} "
                          f"({robot.file_label()}): {_mismatch(policy, robot_names, 'the spec', 'the robot')}")
    meta = onnx.metadata.get("dof_names")
    if isinstance(meta, list) and [str(m) for m in meta] != policy:
        raise ConfigError(f"{src}: joint_orders.policy differs from the dof_names metadata of {model_path}: "
                          f"{_mismatch(policy, [str(m) for m in meta], 'the spec', 'the model')}")
    n_act = int(np.prod(cfg.output.shape))
    if n_act != len(policy):
        raise ConfigError(f"{src}: output {cfg.output.name!r} has {n_act} values but joint_orders.policy lists {len(policy)} joints")
    policy_to_robot = np.array([robot_names.index(j) for j in policy])
    arms = list(((robot.raw or {}).get("teleop") or {}).get("arm_joints") or [])

    # ---- observation terms
    bound, offset, used_fields = [], 0, []
    for i, t in enumerate(cfg.observation):
        where = f"{src}: observation[{i}] ({t.term})"
        term = OBS_TERMS.get(t.term)
        if term is None:
            raise ConfigError(f"{src}: observation[{i}]: unknown term {t.term!r}; known terms: {', '.join(OBS_TERMS)}")
        index = None
        if term.joint_source is not None:
            if t.joints is None:
                raise ConfigError(f"{where}: 'joints' (a joint order name) is required for this term")
            if t.joints not in orders:
                raise ConfigError(f"{where}: joints {t.joints!r} is not in joint_orders ({', '.join(orders)})")
            names = orders[t.joints]
            source = {"robot": robot_names, "policy": policy, "arms": arms}[term.joint_source]
            bad = [j for j in names if j not in source]
            if bad:
                what = {"robot": f"joints of robot {robot.name!r}", "policy": "joint_orders.policy",
                        "arms": f"teleop.arm_joints of {robot.file_label()}"}[term.joint_source]
                raise ConfigError(f"{where}: joint(s) {bad} of order {t.joints!r} are not {what} ({source})")
            index = np.array([source.index(j) for j in names])
            natural = len(names)
        else:
            if t.joints is not None:
                raise ConfigError(f"{where}: this term takes no 'joints'")
            natural = term.dim
        if t.dim != natural:
            raise ConfigError(f"{where}: dim {t.dim} given, the term has {natural} values")
        lo = hi = None
        if t.clip is not None:
            lo, hi = _bounds(t.clip[0], t.dim, where + ".clip"), _bounds(t.clip[1], t.dim, where + ".clip")
            if np.any(lo > hi):
                raise ConfigError(f"{where}.clip: expected low <= high")
        bound.append(BoundTerm(t, term, slice(offset, offset + t.dim), index, lo, hi))
        offset += t.dim
        used_fields += [f for f in term.command_fields if f not in used_fields]
    frame_dim = offset
    if cfg.phase is None and any(b.cfg.term.startswith("gait_phase") for b in bound):
        raise ConfigError(f"{src}: gait_phase terms need a 'phase' section")
    phase_fields = ["lin_vel", "ang_vel"] if cfg.phase is not None else []
    needed = used_fields + [f for f in phase_fields if f not in used_fields]
    if sorted(needed) != sorted(cfg.command_fields):
        raise ConfigError(f"{src}: command_fields {list(cfg.command_fields)} differ from the fields the terms read {needed}")

    total = int(np.prod(cfg.input.shape))
    if frame_dim * cfg.history.length != total:
        raise ConfigError(
            f"{src}: the observation frame has {frame_dim} values x history {cfg.history.length} = "
            f"{frame_dim * cfg.history.length}, but input {cfg.input.name!r} {tuple(cfg.input.shape)} holds {total}"
        )

    # ---- action map, gains, limits
    a = cfg.action
    if a.default == "robot":
        default_robot = np.asarray(robot.theta_default, dtype=float).copy()
    else:
        bad = sorted(set(a.default) - set(robot_names))
        if bad:
            raise ConfigError(f"{src}: action.default: unknown joint(s) {bad}")
        default_robot = np.array([float(a.default.get(j, 0.0)) for j in robot_names])
    default_policy = default_robot[policy_to_robot]
    if a.scale is not None:
        scale = np.full(len(policy), float(a.scale))
    else:
        scale = (a.scale_effort_over_kp * np.asarray(robot.tau_max) / np.asarray(robot.K))[policy_to_robot]
    if isinstance(cfg.gains, GainsCfg):
        kp, kd = np.empty(robot.n), np.empty(robot.n)
        for key, table, out in (("kp", cfg.gains.kp, kp), ("kd", cfg.gains.kd, kd)):
            if sorted(table) != sorted(robot_names):
                raise ConfigError(f"{src}: gains.{key}: {_mismatch(list(table), robot_names, 'the spec', 'the robot')}")
            out[:] = [table[j] for j in robot_names]
    elif cfg.gains == "robot":
        kp, kd = np.asarray(robot.K, dtype=float).copy(), _robot_kd(robot, src)
    else:
        mkp, mkd = onnx.metadata.get("kp"), onnx.metadata.get("kd")
        if not (isinstance(mkp, list) and isinstance(mkd, list) and len(mkp) == len(mkd) == len(policy)):
            raise ConfigError(f"{src}: gains: onnx_metadata, but {model_path} has no kp/kd metadata lists of {len(policy)} values")
        if not isinstance(meta, list):
            raise ConfigError(f"{src}: gains: onnx_metadata needs dof_names metadata in {model_path} to map the gains by name")
        kp, kd = np.empty(robot.n), np.empty(robot.n)
        kp[policy_to_robot], kd[policy_to_robot] = np.asarray(mkp, float), np.asarray(mkd, float)
    if not (np.all(np.isfinite(kp)) and np.all(kp >= 0) and np.all(np.isfinite(kd)) and np.all(kd >= 0)):
        raise ConfigError(f"{src}: gains: expected finite, non-negative kp and kd")
    margin = cfg.safety.joint_limit_margin_rad
    if cfg.safety.effort_margin:  # tau_max / kp per joint (none where kp = 0)
        margin = margin + np.where(kp > 0, np.asarray(robot.tau_max, float) / np.where(kp > 0, kp, 1.0), 0.0)
    q_min, q_max = np.asarray(robot.q_min, float) - margin, np.asarray(robot.q_max, float) + margin
    if np.any(default_robot < q_min) or np.any(default_robot > q_max):
        bad = [robot_names[i] for i in np.flatnonzero((default_robot < q_min) | (default_robot > q_max))]
        raise ConfigError(f"{src}: action.default: joint(s) {bad} outside the robot's joint limits")

    return PolicySpec(
        cfg=cfg, file=file, model=onnx, joint_names=tuple(policy), robot_joint_names=tuple(robot_names),
        policy_to_robot=policy_to_robot, terms=tuple(bound), frame_dim=frame_dim, default_policy=default_policy,
        default_robot=default_robot, scale=scale, kp=kp, kd=kd, q_min=q_min, q_max=q_max,
        command_fields=tuple(needed),
    )
