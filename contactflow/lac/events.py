"""Sampling of LAC episodes: time profile, stiffness, base height and wrench events.

Implements LAC §III-B: the trapezoidal profile Pi(t) (Table II phase durations), force events
by displacing a virtual environment spring (eq. (2)), couple events (eq. (3)) and the curriculum
bins of Fig. 2.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from contactflow.lac.config import STIFFNESS_CHANNELS, LacConfig, check_stiffness
from contactflow.lac.contact_frames import ContactFrame
from contactflow.errors import ConfigError
from contactflow.lac.model import UPPER_GROUPS, LacRobot

__all__ = [
    "Profile",
    "EpisodeSample",
    "sample_profile",
    "trapezoid",
    "sample_stiffness",
    "sample_episode",
    "force_bin",
    "couple_bin",
    "FORCE_BINS_N",
    "COUPLE_BINS_NM",
]

#: Curriculum bin edges: eleven 5 N bins over [15, 70] N and eight equal bins over [0.5, 10] N m.
FORCE_BINS_N = np.linspace(15.0, 70.0, 12)
COUPLE_BINS_NM = np.linspace(0.5, 10.0, 9)


def force_bin(total_peak_n: float) -> int:
    """Force curriculum bin (0..10) of a summed peak force [N] (clipped to the end bins)."""
    return int(np.clip(np.searchsorted(FORCE_BINS_N, total_peak_n, side="right") - 1, 0, 10))


def couple_bin(total_peak_nm: float) -> int:
    """Couple curriculum bin (0..7) of a summed peak couple [N m] (clipped to the end bins)."""
    return int(np.clip(np.searchsorted(COUPLE_BINS_NM, total_peak_nm, side="right") - 1, 0, 7))


@dataclasses.dataclass(frozen=True)
class Profile:
    """Trapezoidal time profile Pi(t) in [0, 1].

    Attributes:
        rest_s, ramp_s, hold_s, release_s: phase durations [s]; the event starts at ``rest_s``.
        frames: T. dt_s: frame period [s].
    """

    rest_s: float
    ramp_s: float
    hold_s: float
    release_s: float
    frames: int
    dt_s: float

    def values(self) -> np.ndarray:
        """(T,) Pi at t_k = k dt: 0 at rest, linear ramp, 1 on hold, linear release, 0 after."""
        return trapezoid(np.arange(self.frames) * self.dt_s, self.rest_s, self.ramp_s, self.hold_s, self.release_s)


def trapezoid(t, start_s: float, ramp_s: float, hold_s: float, release_s: float) -> np.ndarray:
    """Trapezoidal profile in [0, 1] at times ``t`` (LAC §III-B, Pi(t)).

    0 before ``start_s``, linear ramp to 1 over ``ramp_s``, 1 for ``hold_s``, linear release to 0
    over ``release_s``, 0 after. A zero ramp or release is a step.

    Args:
        t: times [s], any shape. start_s: start of the ramp [s]. ramp_s, hold_s, release_s: phase
            durations [s], >= 0.

    Returns:
        Array of the shape of ``t``.
    """
    t = np.asarray(t, dtype=float)
    b = start_s + ramp_s
    c = b + hold_s
    d = c + release_s
    up = np.clip((t - start_s) / ramp_s, 0.0, 1.0) if ramp_s > 0 else (t >= start_s).astype(float)
    down = np.clip((d - t) / release_s, 0.0, 1.0) if release_s > 0 else (t < d).astype(float)
    return np.where(t < c, up, down)


@dataclasses.dataclass(frozen=True)
class EpisodeSample:
    """Everything sampled for one restart of Algorithm 1 (before any decay).

    Attributes:
        frame: the contact frame e.
        base_height: h_cmd [m].
        profile: Pi(t).
        stiffness: (5,) [K_L, K_R, K_T] [N/m], [K_L^theta, K_R^theta] [N m/rad].
        event_type: ``"force"`` or ``"couple"``.
        links: indices of the loaded links (the frame's mask; couple events drop the torso).
        force_peak_W: (11, 3) F_j^peak in world [N] (zero rows for unloaded links).
        couple_peak_W: (11, 3) tau_j^peak c_j in world [N m].
        k_env: (11,) K_j^env [N/m] (force events; 0 elsewhere).
        dx: (11,) setpoint displacement Delta x_j [m] (force events; 0 elsewhere).
    """

    frame: ContactFrame
    base_height: float
    profile: Profile
    stiffness: np.ndarray
    event_type: str
    links: tuple[int, ...]
    force_peak_W: np.ndarray
    couple_peak_W: np.ndarray
    k_env: np.ndarray
    dx: np.ndarray

    def peak_sum(self, scale: float = 1.0) -> float:
        """Sum over loaded links of the peak magnitude, times ``scale`` [N] or [N m]."""
        w = self.force_peak_W if self.event_type == "force" else self.couple_peak_W
        return float(scale * np.linalg.norm(w, axis=1).sum())


def _log_uniform(rng: np.random.Generator, r) -> float:
    return float(np.exp(rng.uniform(np.log(r[0]), np.log(r[1]))))


def sample_profile(cfg: LacConfig, rng: np.random.Generator) -> Profile:
    """Rest U(0.5, 1) s, ramp/hold/release U(1, 3) s each (Table II)."""
    p = cfg.profile
    return Profile(
        rest_s=float(rng.uniform(*p.rest_s)),
        ramp_s=float(rng.uniform(*p.ramp_s)),
        hold_s=float(rng.uniform(*p.hold_s)),
        release_s=float(rng.uniform(*p.release_s)),
        frames=p.frames,
        dt_s=p.dt_s,
    )


def sample_stiffness(cfg: LacConfig, rng: np.random.Generator) -> np.ndarray:
    """(5,) stiffness command, each channel log-uniform on its range (Table II)."""
    e = cfg.events
    k = [_log_uniform(rng, e.k_lin_n_per_m if kind == "lin" else e.k_ang_nm_per_rad) for _, _, kind in STIFFNESS_CHANNELS]
    return check_stiffness(np.array(k), k_lin_range=e.k_lin_n_per_m, k_ang_range=e.k_ang_nm_per_rad)


def _unit(rng: np.random.Generator) -> np.ndarray:
    d = rng.normal(size=3)
    return d / np.linalg.norm(d)


def _in_cone(axis: np.ndarray, half_angle: float, rng: np.random.Generator) -> np.ndarray:
    """Uniform direction within a cone of ``half_angle`` [rad] about unit ``axis``."""
    cos_t = rng.uniform(np.cos(half_angle), 1.0)
    phi = rng.uniform(0.0, 2 * np.pi)
    a = axis / np.linalg.norm(axis)
    t = np.cross(a, [1.0, 0.0, 0.0])
    if np.linalg.norm(t) < 1e-6:
        t = np.cross(a, [0.0, 1.0, 0.0])
    t /= np.linalg.norm(t)
    b = np.cross(a, t)
    s = np.sqrt(max(0.0, 1.0 - cos_t**2))
    return cos_t * a + s * (np.cos(phi) * t + np.sin(phi) * b)


def sample_episode(
    lac: LacRobot,
    cfg: LacConfig,
    frame: ContactFrame,
    rng: np.random.Generator,
    *,
    event_type: str | None = None,
    stiffness: np.ndarray | None = None,
) -> EpisodeSample:
    """Sample one restart of Algorithm 1 for contact frame ``frame``.

    Force events (eq. (2)): per loaded link, K_env ~ log-U, x_max = min(F_lim / K_env,
    d_lim K_rob / K_env), Delta x = x_min + (x_max - x_min) Beta(3, 1), F_peak = K_env Delta x d,
    d = R_ref n (the inward normal rotated to world by the reference orientation).
    Couple events (eq. (3)): tau_peak = tau_s Beta(3, 1); direction uniform on the sphere, or with
    probability ``couple_axis_prob`` within ``couple_axis_cone_deg`` of the link's joint axis at
    the reference pose, random sign. Couples act on arm links only; a frame whose only contact is
    the torso always gets a force event.

    Args:
        lac: the robot. cfg: parameters. frame: contact frame. rng: random generator.
        event_type: force the event type (tests); sampled with ``couple_event_prob`` when None.
        stiffness: (5,) force the stiffness command (validated); sampled when None.

    Returns:
        EpisodeSample.

    Raises:
        ConfigError: ``stiffness`` out of range, unknown ``event_type``.
    """
    e = cfg.events
    h = float(rng.uniform(*e.base_height_m))
    profile = sample_profile(cfg, rng)
    k = sample_stiffness(cfg, rng)
    if stiffness is not None:
        k = check_stiffness(stiffness, k_lin_range=e.k_lin_n_per_m, k_ang_range=e.k_ang_nm_per_rad)
    arm_links = [int(i) for i in frame.links if lac.link_groups[i] != "torso"]
    etype = "couple" if rng.uniform() < e.couple_event_prob else "force"
    if event_type is not None:
        if event_type not in ("force", "couple"):
            raise ConfigError(f"event_type: expected 'force' or 'couple', got {event_type!r}")
        etype = event_type
    if etype == "couple" and not arm_links:
        etype = "force"
    links = tuple(int(i) for i in frame.links) if etype == "force" else tuple(arm_links)
    q_ref = lac.reference_configuration(frame.q_ref, h)
    poses = lac.link_poses_at(q_ref, links)
    F = np.zeros((11, 3))
    C = np.zeros((11, 3))
    k_env = np.zeros(11)
    dx = np.zeros(11)
    for (x_ref, R_ref), i in zip(poses, links):
        if etype == "force":
            ke = _log_uniform(rng, e.k_env_n_per_m)
            k_rob = k[UPPER_GROUPS[lac.link_groups[i]][0]]
            x_max = min(e.force_limit_n / ke, e.disp_limit_m * k_rob / ke)
            x_max = max(x_max, e.x_min_m)
            d = R_ref @ frame.normals[i]
            dx[i] = e.x_min_m + (x_max - e.x_min_m) * rng.beta(3.0, 1.0)
            k_env[i] = ke
            F[i] = ke * dx[i] * d / np.linalg.norm(d)
        else:
            mag = e.couple_scale_nm * rng.beta(3.0, 1.0)
            if rng.uniform() < e.couple_axis_prob:
                axis = R_ref @ lac.link_axis_local[i]
                c = _in_cone(axis, np.deg2rad(e.couple_axis_cone_deg), rng) * (1.0 if rng.uniform() < 0.5 else -1.0)
            else:
                c = _unit(rng)
            C[i] = mag * c
    return EpisodeSample(frame, h, profile, k, etype, links, F, C, k_env, dx)
