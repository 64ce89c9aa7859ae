"""Effector admittance (SEIKO RA-L 2024 eq. (14), seiko.md §6.8) for disabled effectors.

    nu_adm = [clampNorm(g_lin deadband(f, w_lin), c_lin); clampNorm(g_ang deadband(tau, w_ang), c_ang)]

with the continuous norm deadband ``v -> v (|v| - w) / |v|`` for ``|v| > w`` else 0
(``DeadbandVectorNorm``) and a norm clamp (``ClampVectorNorm``). ``f``, ``tau`` are the measured
interaction force/torque on the effector in world axes (on the robot), so the effector yields
along the force. The twist is added to the operator's command before the input filter (8).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from contactflow.errors import ContractError

__all__ = ["AdmittanceParams", "EffectorAdmittance", "deadband_norm", "clamp_norm"]


def deadband_norm(v: np.ndarray, width: float) -> np.ndarray:
    """Continuous norm deadband: ``v (|v| - width) / |v|`` if ``|v| > width`` else 0."""
    n = float(np.linalg.norm(v))
    return v * ((n - width) / n) if n > width else np.zeros_like(v)


def clamp_norm(v: np.ndarray, c: float, divisor: float = 1.0, out: np.ndarray | None = None) -> np.ndarray:
    """``clampNorm(v, c) / divisor``: ``v`` scaled down so that ``|v| <= c``, then divided by
    ``divisor`` (the Retargeting's pose-task rates: ``divisor = -dt``; seiko.md §4.2).

    Args:
        v: (k,) vector. c: norm bound (same unit as v). divisor: scalar, nonzero.
        out: (k,) buffer for the result (may not be ``v``), or None (a new array).

    Returns:
        (k,) ``out``, or a new array.
    """
    n = math.sqrt(float(v.dot(v)))  # = np.linalg.norm(v) (sqrt of the dot), without its Python overhead
    return np.multiply(v, (c / n if n > c else 1.0) / divisor, out=out)


@dataclasses.dataclass(frozen=True, kw_only=True)
class AdmittanceParams:
    """Parameters of eq. (14) for one effector (Talos values of seiko.md §6.8).

    Attributes:
        deadband_lin_n: force deadband [N]. gain_lin: [(m/s)/N]. clamp_lin_mps: [m/s].
        deadband_ang_nm: torque deadband [N m]. gain_ang: [(rad/s)/(N m)]. clamp_ang_radps: [rad/s].
    """

    deadband_lin_n: float
    gain_lin: float
    clamp_lin_mps: float
    deadband_ang_nm: float = 0.0
    gain_ang: float = 0.0
    clamp_ang_radps: float = 0.0

    @staticmethod
    def hand() -> "AdmittanceParams":
        """Hands: 10 N deadband, 0.003 (m/s)/N, 0.1 m/s clamp; no angular part."""
        return AdmittanceParams(deadband_lin_n=10.0, gain_lin=0.003, clamp_lin_mps=0.1)

    @staticmethod
    def foot() -> "AdmittanceParams":
        """Feet: 50 N / 0.0005 / 0.01 m/s; 3 N m / 0.05 / 0.1 rad/s."""
        return AdmittanceParams(deadband_lin_n=50.0, gain_lin=0.0005, clamp_lin_mps=0.01,
                                deadband_ang_nm=3.0, gain_ang=0.05, clamp_ang_radps=0.1)


class EffectorAdmittance:
    """Eq. (14) on one effector; active only while the effector is a disabled contact.

    Args:
        params: :class:`AdmittanceParams`.
    """

    def __init__(self, params: AdmittanceParams):
        self.p = params

    def step(self, wrench_W: np.ndarray, enabled: bool) -> np.ndarray:
        """Admittance twist.

        Args:
            wrench_W: (3,) force or (6,) [f; tau] of the environment on the effector, world axes
                [N, N m].
            enabled: the effector is an enabled contact (then the output is zero).

        Returns:
            (6,) world twist [v; omega] [m/s, rad/s].

        Raises:
            ContractError: wrong size or non-finite wrench.
        """
        w = np.asarray(wrench_W, dtype=float).reshape(-1)
        if w.size not in (3, 6) or not np.all(np.isfinite(w)):
            raise ContractError(f"admittance: expected 3 or 6 finite values, got {w}")
        out = np.zeros(6)
        if enabled:
            return out
        p = self.p
        out[:3] = clamp_norm(p.gain_lin * deadband_norm(w[:3], p.deadband_lin_n), p.clamp_lin_mps)
        if w.size == 6 and p.gain_ang > 0:
            out[3:] = clamp_norm(p.gain_ang * deadband_norm(w[3:], p.deadband_ang_nm), p.clamp_ang_radps)
        return out
