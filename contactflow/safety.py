"""Command safety for robot drivers: validate joint commands and hold the last safe one.

A robot driver must never apply a malformed command and must keep a safe posture when commands
stop arriving. :class:`CommandHold` implements both rules for joint position commands; the
MuJoCo driver uses it, and a hardware driver should too.
"""

from __future__ import annotations

import logging

import numpy as np

__all__ = ["CommandHold"]

log = logging.getLogger("contactflow.safety")


class CommandHold:
    """Last-safe-command holder with a timeout.

    Args:
        theta_safe: (n,) initial safe joint position command [rad] (e.g. the default posture).
        timeout_s: a command older than this is stale: ``holding`` becomes True and the last safe
            command keeps being applied (it always is; ``holding`` is for reporting).
        q_min, q_max: optional (n,) joint limits [rad]; a command outside them is rejected.
    """

    def __init__(self, theta_safe: np.ndarray, timeout_s: float = 0.1, q_min: np.ndarray | None = None,
                 q_max: np.ndarray | None = None):
        self.theta = np.array(theta_safe, dtype=float)
        self.timeout_s = float(timeout_s)
        self.q_min = None if q_min is None else np.asarray(q_min, float)
        self.q_max = None if q_max is None else np.asarray(q_max, float)
        self.last_time: float | None = None
        self.rejected = 0
        self.holding = False

    def offer(self, theta: np.ndarray | None, now_s: float) -> bool:
        """Offer a new command received at time ``now_s`` [s].

        Returns:
            True if accepted; False if ``theta`` is None, of the wrong shape, non-finite or out of
            the joint limits (it is then counted in ``rejected`` and the last safe command stays).
        """
        ok = theta is not None
        if ok:
            theta = np.asarray(theta, dtype=float)
            ok = theta.shape == self.theta.shape and bool(np.all(np.isfinite(theta)))
            if ok and self.q_min is not None:
                ok = bool(np.all(theta >= self.q_min - 1e-6) and np.all(theta <= self.q_max + 1e-6))
        if not ok:
            self.rejected += 1
            return False
        self.theta = np.array(theta)
        self.last_time = now_s
        if self.holding:
            log.warning("commands resumed")
        self.holding = False
        return True

    def command(self, now_s: float) -> np.ndarray:
        """The command to apply at ``now_s`` [s]: the last safe one. Updates ``holding``."""
        stale = self.last_time is None or now_s - self.last_time > self.timeout_s
        if stale and not self.holding and self.last_time is not None:
            log.warning("no command for %.3f s: holding the last safe command", self.timeout_s)
        self.holding = stale
        return self.theta
