"""Configuration of LAC compliant-motion augmentation (LAC Table II) and the stiffness command.

``LacConfig`` is a frozen keyword-only dataclass; ``load_lac_config(path)`` reads it from YAML with
strict key checking (``contactflow.config.load_config``). The shipped reference file is
``robots/g1/lac.yaml``; its values equal the dataclass defaults (Table II).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np

from contactflow.config import load_config, read_yaml
from contactflow.errors import ConfigError

__all__ = [
    "STIFFNESS_CHANNELS",
    "STIFFNESS_NAMES",
    "GROUP_CHANNELS",
    "K_LIN_RANGE",
    "K_ANG_RANGE",
    "LacConfig",
    "ProfileCfg",
    "EventCfg",
    "AdmittanceCfg",
    "IKCfg",
    "GateCfg",
    "load_lac_config",
    "default_config_path",
    "check_stiffness",
    "stiffness_problem",
]

#: The 5-D stiffness command, LAC deploy order (lac.md §1.1): per channel its name, the
#: ``lac_links`` group it acts on and its kind (``lin`` [N/m] or ``ang`` [N m/rad]). The one table of
#: the layout: the teleop, the expert, the augmentation and the run summary read it.
STIFFNESS_CHANNELS = (
    ("K_lin_left_arm", "left", "lin"),
    ("K_lin_right_arm", "right", "lin"),
    ("K_lin_torso", "torso", "lin"),
    ("K_ang_left_arm", "left", "ang"),
    ("K_ang_right_arm", "right", "ang"),
)
#: Channel names, in command order.
STIFFNESS_NAMES = tuple(name for name, _, _ in STIFFNESS_CHANNELS)
#: ``lac_links`` group -> (index of its linear channel, index of its angular channel or None).
GROUP_CHANNELS = {
    g: (next(i for i, (_, gg, kind) in enumerate(STIFFNESS_CHANNELS) if gg == g and kind == "lin"),
        next((i for i, (_, gg, kind) in enumerate(STIFFNESS_CHANNELS) if gg == g and kind == "ang"), None))
    for g in dict.fromkeys(gg for _, gg, _ in STIFFNESS_CHANNELS)
}
#: LAC's ranges, linear [N/m], angular [N m/rad] (LAC Table II): the defaults of the robot data
#: (``TeleopConfig``, ``robots/<robot>/teleop.yaml``, which the expert enforces) and of the
#: augmentation's sampling ranges (``EventCfg``).
K_LIN_RANGE = (10.0, 500.0)
K_ANG_RANGE = (10.0, 100.0)


def stiffness_problem(k: np.ndarray, k_lin_range: tuple[float, float], k_ang_range: tuple[float, float]) -> str | None:
    """What is wrong with a 5-D stiffness command, or None.

    Args:
        k: (5,) command, :data:`STIFFNESS_CHANNELS` order [N/m, N m/rad].
        k_lin_range, k_ang_range: [low, high] of the linear [N/m] and angular [N m/rad] channels.

    Returns:
        ``"<name> = <value> <unit> outside [lo, hi] <unit>"`` for the first bad channel (or a wrong
        shape), else None.
    """
    k = np.asarray(k, dtype=float)
    if k.shape != (len(STIFFNESS_CHANNELS),):
        return f"expected {len(STIFFNESS_CHANNELS)} values {STIFFNESS_NAMES}, got shape {k.shape}"
    for i, (name, _, kind) in enumerate(STIFFNESS_CHANNELS):
        lo, hi = k_lin_range if kind == "lin" else k_ang_range
        unit = "N/m" if kind == "lin" else "N m/rad"
        if not (math.isfinite(k[i]) and lo <= k[i] <= hi):
            return f"{name} = {float(k[i]):g} {unit} outside [{lo:g}, {hi:g}] {unit}"
    return None


def check_stiffness(k: np.ndarray, *, k_lin_range: tuple[float, float], k_ang_range: tuple[float, float],
                    source: str = "") -> np.ndarray:
    """Validate a 5-D stiffness command against the given ranges.

    Args:
        k: (5,) ``[K_L, K_R, K_T]`` [N/m] then ``[K_L^theta, K_R^theta]`` [N m/rad].
        k_lin_range, k_ang_range: [low, high] [N/m], [N m/rad] (the robot's teleop limits for a
            controller, the sampling ranges for the augmentation).
        source: where the ranges come from, appended to the message (e.g. ``"teleop limits"``).

    Returns:
        (5,) float64 copy.

    Raises:
        ConfigError: wrong shape, non-finite, or a channel outside its range (the message names it).
    """
    bad = stiffness_problem(k, k_lin_range, k_ang_range)
    if bad:
        raise ConfigError(f"stiffness command: {bad}" + (f" ({source})" if source else ""))
    return np.asarray(k, dtype=float).copy()


def _range(name: str, r: tuple[float, float], lo: float = 0.0, strict: bool = True) -> None:
    if len(r) != 2 or not (r[0] <= r[1]):
        raise ConfigError(f"{name}: expected [low, high] with low <= high, got {list(r)}")
    if (r[0] <= lo) if strict else (r[0] < lo):
        raise ConfigError(f"{name}: low end must be {'>' if strict else '>='} {lo:g}, got {r[0]:g}")


def _pos(obj, *names: str) -> None:
    for n in names:
        v = getattr(obj, n)
        if not v > 0:
            raise ConfigError(f"{n}: must be > 0, got {v!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProfileCfg:
    """Episode length and trapezoidal profile Pi(t) (LAC Table II).

    Attributes:
        frames: T, frames per episode.
        dt_s: frame period [s].
        rest_s: U(low, high) rest before the ramp [s].
        ramp_s, hold_s, release_s: U(low, high) phase durations [s].
    """

    frames: int = 500
    dt_s: float = 0.02
    rest_s: tuple[float, float] = (0.5, 1.0)
    ramp_s: tuple[float, float] = (1.0, 3.0)
    hold_s: tuple[float, float] = (1.0, 3.0)
    release_s: tuple[float, float] = (1.0, 3.0)

    def __post_init__(self):
        _pos(self, "frames", "dt_s")
        _range("rest_s", self.rest_s, 0.0, strict=False)
        for n in ("ramp_s", "hold_s", "release_s"):
            _range(n, getattr(self, n))
        longest = self.rest_s[1] + self.ramp_s[1] + self.hold_s[1] + self.release_s[1]
        if longest > self.frames * self.dt_s + 1e-9:
            raise ConfigError(f"longest profile {longest:g} s exceeds the episode {self.frames * self.dt_s:g} s")


@dataclasses.dataclass(frozen=True, kw_only=True)
class EventCfg:
    """Sampling of wrench events, stiffness and base height (LAC eqs. (2)-(3), Table II).

    Attributes:
        base_height_m: h_cmd ~ U(h_min, h_max) [m]; also the IK base-height bounds.
        k_env_n_per_m: K_env ~ log-U [N/m].
        x_min_m: minimum setpoint displacement [m].
        force_limit_n: F_lim [N]. disp_limit_m: d_lim [m].
        k_lin_n_per_m: K^rob ~ log-U [N/m]. k_ang_nm_per_rad: K^rob,theta ~ log-U [N m/rad].
        couple_scale_nm: tau_s [N m].
        couple_axis_prob: probability of sampling the couple axis in a cone about the link's joint axis.
        couple_axis_cone_deg: half-angle of that cone [deg].
        couple_event_prob: probability that an episode carries couple (not force) events; not in
            Table II, chosen as the paper's dataset split 99,793 / 378,051 = 0.26.
    """

    base_height_m: tuple[float, float] = (0.56, 0.78)
    k_env_n_per_m: tuple[float, float] = (10.0, 500.0)
    x_min_m: float = 0.01
    force_limit_n: float = 70.0
    disp_limit_m: float = 4.0
    k_lin_n_per_m: tuple[float, float] = K_LIN_RANGE
    k_ang_nm_per_rad: tuple[float, float] = K_ANG_RANGE
    couple_scale_nm: float = 5.0
    couple_axis_prob: float = 0.5
    couple_axis_cone_deg: float = 10.0
    couple_event_prob: float = 0.26

    def __post_init__(self):
        for n in ("base_height_m", "k_env_n_per_m", "k_lin_n_per_m", "k_ang_nm_per_rad"):
            _range(n, getattr(self, n))
        _pos(self, "x_min_m", "force_limit_n", "disp_limit_m", "couple_scale_nm")
        for n in ("couple_axis_prob", "couple_event_prob"):
            if not 0.0 <= getattr(self, n) <= 1.0:
                raise ConfigError(f"{n}: must be in [0, 1], got {getattr(self, n)!r}")
        if not 0.0 <= self.couple_axis_cone_deg <= 180.0:
            raise ConfigError(f"couple_axis_cone_deg: must be in [0, 180], got {self.couple_axis_cone_deg!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class AdmittanceCfg:
    """Passive chain (eqs. (4)-(6)) and virtual admittance (eqs. (7)-(10)).

    Attributes:
        joint_stiffness_waist_nm_per_rad, joint_stiffness_arm_nm_per_rad: Lambda_q [N m/rad].
        kappa_nm_per_rad: virtual torque gain kappa [N m/rad].
        mass_kg: M. inertia_kgm2: I. damping_ratio: zeta of K_d = 2 zeta sqrt(M K).
        damping_lin_ns_per_m: D [N s/m]. damping_ang_nms_per_rad: D_omega [N m s/rad].
    """

    joint_stiffness_waist_nm_per_rad: float = 40.2
    joint_stiffness_arm_nm_per_rad: float = 14.3
    kappa_nm_per_rad: float = 30.0
    mass_kg: float = 1.0
    inertia_kgm2: float = 1.0
    damping_ratio: float = 1.0
    damping_lin_ns_per_m: float = 2.0
    damping_ang_nms_per_rad: float = 2.0

    def __post_init__(self):
        _pos(self, "joint_stiffness_waist_nm_per_rad", "joint_stiffness_arm_nm_per_rad", "kappa_nm_per_rad",
             "mass_kg", "inertia_kgm2")
        for n in ("damping_ratio", "damping_lin_ns_per_m", "damping_ang_nms_per_rad"):
            if getattr(self, n) < 0:
                raise ConfigError(f"{n}: must be >= 0, got {getattr(self, n)!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class IKCfg:
    """Whole-body differential IK (eq. (11)).

    Attributes:
        w_contact_pos, w_contact_ori: w_1^p, w_1^o.
        w_base_pos, w_base_ori: w_b^p, w_b^o.
        w_posture: w_post.
        joint_range_scale: bounds are this fraction of the model range, about its centre.
        base_vel_xy_max_m_s, base_vel_z_max_m_s, base_yaw_rate_max_rad_s: base rate caps.
        damping: Levenberg-Marquardt regulariser on the step (not in the paper) [-].
        iterations: IK QP solves per frame (the paper: 1).
    """

    w_contact_pos: float = 6.0
    w_contact_ori: float = 6.0
    w_base_pos: float = 1.5
    w_base_ori: float = 0.75
    w_posture: float = 0.2
    joint_range_scale: float = 0.95
    base_vel_xy_max_m_s: float = 0.6
    base_vel_z_max_m_s: float = 0.5
    base_yaw_rate_max_rad_s: float = 0.6
    damping: float = 1e-6
    iterations: int = 1

    def __post_init__(self):
        for n in ("w_contact_pos", "w_contact_ori", "w_base_pos", "w_base_ori", "w_posture", "damping"):
            if getattr(self, n) < 0:
                raise ConfigError(f"{n}: must be >= 0, got {getattr(self, n)!r}")
        if not 0.0 < self.joint_range_scale <= 1.0:
            raise ConfigError(f"joint_range_scale: must be in (0, 1], got {self.joint_range_scale!r}")
        _pos(self, "base_vel_xy_max_m_s", "base_vel_z_max_m_s", "base_yaw_rate_max_rad_s", "iterations")


@dataclasses.dataclass(frozen=True, kw_only=True)
class GateCfg:
    """Feasibility gates and retries (LAC §III-B, Algorithm 1, Table II).

    Attributes:
        balance_force_tol_n: mean_t | |f_imp| - |f_ext| | bound [N].
        balance_torque_tol_nm: mean_t | |tau_imp| - |tau_vir| | bound [N m].
        sum_cap_force_n, sum_cap_couple_nm: budgets on the summed peak wrench [N], [N m].
        self_collision_margin_m: capsule pairs closer than this count as a collision [m].
        decay_balance, decay_self_collision, decay_sum_cap: rho_1, rho_2, rho_3.
        weak_floor_force_n, weak_floor_couple_nm: abandon below these summed peaks [N], [N m].
        n_iter: restarts per contact frame. n_decay: decay retries per restart.
    """

    balance_force_tol_n: float = 5.0
    balance_torque_tol_nm: float = 1.5
    sum_cap_force_n: float = 70.0
    sum_cap_couple_nm: float = 10.0
    self_collision_margin_m: float = 0.0
    decay_balance: float = 0.8
    decay_self_collision: float = 0.5
    decay_sum_cap: float = 0.8
    weak_floor_force_n: float = 15.0
    weak_floor_couple_nm: float = 0.5
    n_iter: int = 10
    n_decay: int = 50

    def __post_init__(self):
        _pos(self, "balance_force_tol_n", "balance_torque_tol_nm", "sum_cap_force_n", "sum_cap_couple_nm",
             "n_iter", "n_decay")
        for n in ("decay_balance", "decay_self_collision", "decay_sum_cap"):
            if not 0.0 < getattr(self, n) < 1.0:
                raise ConfigError(f"{n}: must be in (0, 1), got {getattr(self, n)!r}")
        for n in ("weak_floor_force_n", "weak_floor_couple_nm"):
            if getattr(self, n) < 0:
                raise ConfigError(f"{n}: must be >= 0, got {getattr(self, n)!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class LacConfig:
    """All augmentation parameters (LAC Table II). Defaults are the paper's values."""

    robot: str = "g1"
    profile: ProfileCfg = dataclasses.field(default_factory=ProfileCfg)
    events: EventCfg = dataclasses.field(default_factory=EventCfg)
    admittance: AdmittanceCfg = dataclasses.field(default_factory=AdmittanceCfg)
    ik: IKCfg = dataclasses.field(default_factory=IKCfg)
    gates: GateCfg = dataclasses.field(default_factory=GateCfg)


def default_config_path() -> Path:
    """The shipped reference file ``robots/g1/lac.yaml``."""
    from contactflow.robot import robots_dir

    return robots_dir() / "g1" / "lac.yaml"


def load_lac_config(path: str | Path | None = None) -> LacConfig:
    """Load a :class:`LacConfig` from YAML (the shipped ``robots/g1/lac.yaml`` when None).

    Raises:
        ConfigError: unreadable file, unknown key, wrong type or out-of-range value (names file and key).
    """
    path = Path(path) if path is not None else default_config_path()
    return load_config(LacConfig, read_yaml(path), source=str(path))
