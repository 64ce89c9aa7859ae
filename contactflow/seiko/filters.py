"""Signal processing of the SEIKO Controller loop: wrench estimation and torque-limit adaptation.

Three small stateful units, each with ``reset`` and ``update`` (numpy in, numpy out), used by
:class:`contactflow.seiko.controller.SeikoController` at the control rate (500 Hz on Talos):

* :class:`ComplementaryWrenchFilter` — SEIKO RA-L 2024 eq. (13) (seiko.md §6.5) for one
  effector: the reference implementation the bank is tested against (not used by the
  Controller), and :class:`ComplementaryWrenchFilterBank`, the same filter on every effector at
  once (the Controller's and the ``wrench_filter`` node's);
* :class:`WrenchRateEstimator` — the wrench rate lam_dot_read of eq. (10) (seiko.md §6.6);
* :class:`TorqueLimitAdapter` — the joint-torque limit update of eq. (12) (seiko.md §6.4).

Reference code: hucebot/seiko_controller_code ``inria_controller/src/TaskSEIKO.cpp``,
``inria_maths/include/inria_maths/FilterDifferentiator2.hpp`` and ``FilterExponential.hpp``.
"""

from __future__ import annotations

import math

import numpy as np

from contactflow.errors import ConfigError

__all__ = [
    "alpha_from_cutoff",
    "ComplementaryWrenchFilter",
    "ComplementaryWrenchFilterBank",
    "WrenchRateEstimator",
    "TorqueLimitAdapter",
    "ExponentialLowPass",
]


def alpha_from_cutoff(cutoff_hz: float, dt_s: float) -> float:
    """Smoothing coefficient of a first-order exponential filter (bilinear form, seiko.md §6.5).

    ``alpha = (1 - w dt / 2) / (1 + w dt / 2)`` with ``w = 2 pi f_c``, clamped to [0, 1]
    (``FilterExponential::getAlphaFromFreq``). The filter is ``y <- alpha y + (1 - alpha) u``.
    The one source of this alpha: the Controller's filters, the operator input filter (8), the
    pushing-mode filter and the operator's torque monitor all use it.

    Args:
        cutoff_hz: cutoff frequency f_c [Hz], > 0.
        dt_s: sampling period [s], > 0.

    Returns:
        alpha in [0, 1] (0: no filtering; 1: input ignored). 0.2 Hz at 0.002 s gives 0.99749.

    Raises:
        ConfigError: non-positive or non-finite cutoff or period.
    """
    if not (math.isfinite(cutoff_hz) and cutoff_hz > 0.0 and math.isfinite(dt_s) and dt_s > 0.0):
        raise ConfigError(f"alpha_from_cutoff: need cutoff_hz > 0 and dt_s > 0, got {cutoff_hz}, {dt_s}")
    h = math.pi * cutoff_hz * dt_s  # w dt / 2
    return min(1.0, max(0.0, (1.0 - h) / (1.0 + h)))


class ExponentialLowPass:
    """First-order exponential low-pass ``y <- alpha y + (1 - alpha) u`` (:func:`alpha_from_cutoff`),
    seeded by its first input (``y = u``): the Controller's measured joint torques before (12)
    (``ControllerConfig.tau_read_cutoff_hz``). The compiled kernel computes the same (FeedbackNative,
    contactflow/native/seiko_qp11.cpp ``torque12``): keep both in step.

    Args:
        n: size of the filtered vector.
        cutoff_hz: cutoff [Hz], > 0. dt_s: period [s], > 0.

    Attributes:
        value: (n,) the filtered vector (written in place). seeded: an input was taken since the reset.

    Raises:
        ConfigError: a non-positive cutoff or period.
    """

    def __init__(self, n: int, cutoff_hz: float, dt_s: float):
        self.alpha = alpha_from_cutoff(cutoff_hz, dt_s)
        self.value = np.zeros(n)
        self.seeded = False

    def reset(self) -> None:
        """The next input seeds the filter again."""
        self.seeded = False

    def update(self, u: np.ndarray) -> np.ndarray:
        """One step with the input ``u`` (n,); returns :attr:`value`."""
        if self.seeded:
            a = self.alpha
            self.value *= a
            self.value += (1.0 - a) * u
        else:
            self.value[:] = u
            self.seeded = True
        return self.value


class ComplementaryWrenchFilter:
    """Complementary filter of one effector's measured wrench, SEIKO RA-L 2024 eq. (13).

    ``lam_tilde <- alpha (lam_tilde + dt lam_flex_dot_prev) + (1 - alpha) lam_read``

    The high-frequency content comes from the flexible model's wrench rate of the previous
    controller step (``lam_flex_dot_prev`` [N/s, N m/s]), the low-frequency content from the
    measurement. ``alpha`` comes from :func:`alpha_from_cutoff` (0.2 Hz at 0.002 s on Talos).
    The filter is active only while the contact is enabled **and** the controller integrates;
    otherwise it passes ``lam_read`` through (and re-seeds its state with it). It is initialised
    with the first ``lam_read`` after :meth:`reset`. DC gain from ``lam_read`` is 1.

    Reference implementation: the Controller does not use this class; it runs
    :class:`ComplementaryWrenchFilterBank`, which applies the same eq. (13) to all effectors at
    once and is tested against this one-effector form (``tests/test_wrench_filter.py``,
    bit-identical outputs). Keep the two in step; change the bank only with this reference.

    Args:
        dim: wrench dimension (6 for a plane [f; tau] in the LOCAL sole frame, 3 for a point force
            in its surface frame R_c).
        cutoff_hz: cutoff frequency [Hz] (default 0.2).
        dt_s: control period [s] (default 0.002).
    """

    def __init__(self, dim: int, cutoff_hz: float = 0.2, dt_s: float = 0.002):
        if dim not in (3, 6):
            raise ConfigError(f"ComplementaryWrenchFilter: dim must be 3 or 6, got {dim}")
        self.dim = dim
        self.dt_s = float(dt_s)
        self.alpha = alpha_from_cutoff(cutoff_hz, dt_s)
        self._state = np.zeros(dim)
        self._initialised = False

    @property
    def value(self) -> np.ndarray:
        """(dim,) current filtered wrench lam_tilde (a view; copy it to keep it)."""
        return self._state

    def reset(self, lam_read: np.ndarray | None = None) -> None:
        """Forget the state; the next :meth:`update` (or ``lam_read`` here) seeds it."""
        if lam_read is None:
            self._initialised = False
            self._state[:] = 0.0
        else:
            self._state[:] = lam_read
            self._initialised = True

    def update(self, lam_read: np.ndarray, lam_flex_dot_prev: np.ndarray | None, active: bool) -> np.ndarray:
        """One step of eq. (13).

        Args:
            lam_read: (dim,) measured wrench [N, N m].
            lam_flex_dot_prev: (dim,) flexible-model wrench rate of the previous controller step
                [N/s, N m/s], or None (treated as zero).
            active: contact enabled and controller integrating.

        Returns:
            (dim,) lam_tilde (a view of the internal state).
        """
        if not self._initialised or not active:
            self._state[:] = lam_read
            self._initialised = True
            return self._state
        if lam_flex_dot_prev is not None:
            self._state += self.dt_s * np.asarray(lam_flex_dot_prev)
        self._state *= self.alpha
        self._state += (1.0 - self.alpha) * np.asarray(lam_read)
        return self._state


class ComplementaryWrenchFilterBank:
    """:class:`ComplementaryWrenchFilter` (SEIKO eq. (13)) on the wrenches of all effectors at once.

    State: (n_eff, 6) rows ``lam_tilde`` (a point effector uses the first 3 values of its row and
    keeps zeros in the rest). For each effector given a reading, one :meth:`update` does what
    :meth:`ComplementaryWrenchFilter.update` does, with the same floating-point operations:
    ``lam_tilde <- alpha (lam_tilde + dt lam_flex_dot_prev) + (1 - alpha) lam_read`` while the
    effector is active (enabled and the Controller integrating) and initialised, else
    ``lam_tilde <- lam_read``.

    Args:
        n_eff: number of effectors (rows).
        cutoff_hz: cutoff frequency [Hz] (default 0.2).
        dt_s: control period [s] (default 0.002).
    """

    def __init__(self, n_eff: int, cutoff_hz: float = 0.2, dt_s: float = 0.002):
        if n_eff < 0:
            raise ConfigError(f"ComplementaryWrenchFilterBank: n_eff must be >= 0, got {n_eff}")
        self.dt_s = float(dt_s)
        self.alpha = alpha_from_cutoff(cutoff_hz, dt_s)
        self._state = np.zeros((n_eff, 6))
        self._tmp = np.zeros((n_eff, 6))
        self._tmp2 = np.zeros((n_eff, 6))
        self._init = np.zeros(n_eff, dtype=bool)

    def reset(self) -> None:
        """Forget the state of every row; the next reading of each seeds it."""
        self._state[:] = 0.0
        self._init[:] = False

    def seed(self, rows: np.ndarray, which: np.ndarray) -> None:
        """Set the state of the effectors flagged in ``which`` (n_eff,) to ``rows`` (n_eff, 6)."""
        self._state[which] = rows[which]
        self._init |= which

    def update(
        self,
        lam_read: np.ndarray,
        lam_flex_dot_prev: np.ndarray,
        active: np.ndarray,
        has_read: np.ndarray,
        *,
        external: np.ndarray | None = None,
        has_external: np.ndarray | None = None,
    ) -> np.ndarray:
        """One step of eq. (13) on every effector with a reading.

        Args:
            lam_read: (n_eff, 6) measured wrenches [N, N m] (rows without a reading are ignored).
            lam_flex_dot_prev: (n_eff, 6) flexible-model wrench rates of the previous controller
                step [N/s, N m/s].
            active: (n_eff,) bool, contact enabled and controller integrating.
            has_read: (n_eff,) bool, the effector has a reading this step.
            external: optional (n_eff, 6) filtered values computed outside (the ``wrench_filter``
                node): used as the new state of the active rows flagged in ``has_external``.
            has_external: (n_eff,) bool, required with ``external``.

        Returns:
            (n_eff, 6) lam_tilde (a view of the internal state).
        """
        st, tmp, tmp2 = self._state, self._tmp, self._tmp2
        # (13) on every row (the same operations as ComplementaryWrenchFilter.update), then the
        # new state row by row: filtered (active and initialised), the reading (no filter), the
        # external value, or unchanged (no reading)
        np.multiply(lam_flex_dot_prev, self.dt_s, out=tmp)
        tmp += st
        tmp *= self.alpha
        np.multiply(lam_read, 1.0 - self.alpha, out=tmp2)
        tmp += tmp2
        filt = has_read & active
        np.copyto(st, lam_read, where=has_read[:, None])
        np.copyto(st, tmp, where=(filt & self._init)[:, None])
        if external is not None:
            np.copyto(st, external, where=(filt & has_external)[:, None])
        self._init |= has_read
        return st


class WrenchRateEstimator:
    """Rate of a measured wrench: windowed finite difference then first-order low-pass (seiko.md §6.6).

    Port of ``FilterDifferentiator2``: a ring buffer of (time, value) samples; the raw rate is the
    difference between the newest sample and the most recent one at least ``window_s`` older
    (or the oldest one available while the history is shorter), divided by their time
    difference; the raw rate then goes through an exponential low-pass (cutoff ``cutoff_hz``,
    initialised with the first raw rate). On Talos: window 0.05 s, 100 samples, 10 Hz.
    A ramp of slope s [unit/s] is recovered exactly once the window is filled and the low-pass
    has settled.

    Args:
        dim: signal dimension.
        dt_s: sampling period [s].
        window_s: finite-difference window [s] (default 0.05).
        cutoff_hz: low-pass cutoff [Hz] (default 10).
        history: ring-buffer length in samples (default 100; must cover ``window_s / dt_s``).
    """

    def __init__(self, dim: int, dt_s: float = 0.002, window_s: float = 0.05, cutoff_hz: float = 10.0, history: int = 100):
        if dim < 1 or history < 1 or not (window_s > 0.0):
            raise ConfigError(f"WrenchRateEstimator: need dim >= 1, history >= 1, window_s > 0 (got {dim}, {history}, {window_s})")
        self.dim = dim
        self.dt_s = float(dt_s)
        self.window_s = float(window_s)
        self.alpha = alpha_from_cutoff(cutoff_hz, dt_s)
        self._n = int(history) + 1
        self._t = np.zeros(self._n)
        self._buf = np.zeros((self._n, dim))
        self._head = 0
        self._count = 0
        self._time = 0.0
        self._rate = np.zeros(dim)
        self._raw = np.zeros(dim)
        self._lp_init = False

    @property
    def value(self) -> np.ndarray:
        """(dim,) current filtered rate [unit/s] (a view)."""
        return self._rate

    def reset(self) -> None:
        """Forget the history; the next sample seeds the buffer and the rate restarts at 0."""
        self._count = 0
        self._time = 0.0
        self._head = 0
        self._rate[:] = 0.0
        self._lp_init = False

    def update(self, value: np.ndarray, dt_s: float | None = None) -> np.ndarray:
        """Push a sample and return the filtered rate.

        Args:
            value: (dim,) new sample.
            dt_s: time since the previous sample [s] (default: the construction period).

        Returns:
            (dim,) filtered rate [unit/s] (a view of the internal state).
        """
        dt = self.dt_s if dt_s is None else float(dt_s)
        if self._count == 0:
            # Seed as FilterDifferentiator2::reset(value): the buffer holds the value at t = 0.
            self._t[0] = 0.0
            self._buf[0] = value
            self._head = 0
            self._count = 1
            self._time = 0.0
        self._time += dt
        self._head = (self._head + 1) % self._n
        self._t[self._head] = self._time
        self._buf[self._head] = value
        self._count = min(self._count + 1, self._n)
        # Newest sample at least window_s older than the head (or the oldest one stored). Ages
        # grow with k, so start from the guess for a regular period and walk to the boundary.
        last = self._count - 1
        win = self.window_s - 1e-12
        k = min(last, max(1, int(round(self.window_s / dt))))
        t, n, head, now = self._t, self._n, self._head, self._time
        if now - t[(head - k) % n] >= win:
            while k > 1 and now - t[(head - k + 1) % n] >= win:
                k -= 1
        else:
            while k < last and now - t[(head - k) % n] < win:
                k += 1
        idx = (head - k) % n
        span = self._time - self._t[idx]
        np.subtract(self._buf[self._head], self._buf[idx], out=self._raw)
        self._raw /= span
        if not self._lp_init:
            self._rate[:] = self._raw
            self._lp_init = True
        else:
            self._rate *= self.alpha
            self._rate += (1.0 - self.alpha) * self._raw
        return self._rate


class TorqueLimitAdapter:
    """Joint-torque limit adaptation with hysteresis, SEIKO RA-L 2024 eq. (12) (seiko.md §6.4).

    For each joint i, with ``r_i = tau_read_i / tau_urdf_i``:

    * if ``|r_i| > rho`` and ``|tau_flex_i| + eps1 < tau_lim_i``: ``tau_lim_i = |tau_flex_i| + eps1``
      (lower the limit to just above the model torque, so the Controller QP (11i) stops
      increasing it);
    * elif ``|r_i| < rho - eps3`` and ``tau_lim_i < tau_urdf_i``: ``tau_lim_i += eps2``
      (raise it back slowly; it may overshoot ``tau_urdf`` by at most ``eps2``).

    Extension (not in the paper or its code; off by default, ``lower_nm = 0``): while
    ``|r_i| > rho`` and the limit is within ``eps1`` of binding (``tau_lim_i <= |tau_flex_i| +
    eps1``, i.e. from the step after the paper's rule fired), ``tau_lim_i -= lower_nm`` per step,
    down to ``eps1``. The paper's rule only freezes the model torque; a torque the model does not
    know (an unmodelled load) can keep the measured one above ``rho`` (docs/seiko_multicontact.md,
    far reach). Lowering the model limit until the measured ratio is back below ``rho`` closes
    that loop on the measured torque. A research option, measured unsafe in two cases: with an
    operator who keeps reaching out (the Controller leans the body to keep the hand on target
    and the robot falls) and with a ``rho`` below what the posture needs (it lowers that joint's
    limit towards ``eps1`` too). It pauses after a failed QP (``allow_lowering``).

    The limits start at ``tau_urdf`` (the full URDF effort limit).

    Args:
        tau_urdf: (n,) URDF effort limits [N m], > 0.
        rho: ``max_tau_ratio`` (default 0.75; the paper's Fig. 6 uses 0.6).
        eps1_nm: margin above |tau_flex| [N m] (default 1).
        eps2_nm: increase per step [N m] (default 10 N m/s x 0.002 s = 0.02).
        eps3: hysteresis band, as a ratio of tau_urdf (default 0.1).
        lower_nm: decrease per step of a binding limit while the measured ratio stays above
            ``rho`` [N m] (extension, default 0 = the paper's (12)).

    Raises:
        ConfigError: non-positive limits or parameters out of range.
    """

    def __init__(self, tau_urdf: np.ndarray, rho: float = 0.75, eps1_nm: float = 1.0, eps2_nm: float = 0.02, eps3: float = 0.1,
                 lower_nm: float = 0.0):
        tau_urdf = np.asarray(tau_urdf, dtype=float).copy()
        if tau_urdf.ndim != 1 or np.any(~np.isfinite(tau_urdf)) or np.any(tau_urdf <= 0.0):
            raise ConfigError("TorqueLimitAdapter: tau_urdf must be a 1-D array of positive limits")
        if not (0.0 < rho) or not eps1_nm >= 0.0 or not eps2_nm >= 0.0 or not lower_nm >= 0.0 or not (0.0 <= eps3 < rho):
            raise ConfigError(
                "TorqueLimitAdapter: need rho > 0, eps1, eps2, lower_nm >= 0, 0 <= eps3 < rho "
                f"(got {rho}, {eps1_nm}, {eps2_nm}, {lower_nm}, {eps3})"
            )
        self.tau_urdf = tau_urdf
        self.rho = float(rho)
        self.eps1 = float(eps1_nm)
        self.eps2 = float(eps2_nm)
        self.eps3 = float(eps3)
        self.lower_nm = float(lower_nm)
        self._limit = tau_urdf.copy()
        self.modified = False  # the last update may have changed a limit
        self._ratio = np.zeros_like(tau_urdf)
        self._abs_flex = np.zeros_like(tau_urdf)

    @property
    def value(self) -> np.ndarray:
        """(n,) current adapted limits tau_lim [N m] (a view)."""
        return self._limit

    def reset(self) -> None:
        """Limits back to ``tau_urdf``."""
        self._limit[:] = self.tau_urdf

    def update(self, tau_read: np.ndarray, tau_flex: np.ndarray, allow_lowering: bool = True) -> np.ndarray:
        """One step of eq. (12).

        Args:
            tau_read: (n,) measured joint torques [N m].
            tau_flex: (n,) flexible-model joint torques K (theta_cmd - theta_flex) [N m].
            allow_lowering: False holds the extension's lowering this step (the Controller passes
                False after a failed QP, so a limit it cannot meet is not pushed further).

        Returns:
            (n,) adapted limits [N m] (a view of the internal state).
        """
        np.divide(tau_read, self.tau_urdf, out=self._ratio)
        np.abs(self._ratio, out=self._ratio)
        over = self._ratio > self.rho
        if not over.any():  # nothing to lower (the common case): only the raise rule can act
            below = self._limit < self.tau_urdf
            self.modified = bool(below.any())
            if self.modified:
                self._limit[below & (self._ratio < self.rho - self.eps3)] += self.eps2
            return self._limit
        self.modified = True
        np.abs(tau_flex, out=self._abs_flex)
        self._abs_flex += self.eps1
        lower = (self._ratio > self.rho) & (self._abs_flex < self._limit)
        raise_ = (~lower) & (self._ratio < self.rho - self.eps3) & (self._limit < self.tau_urdf)
        if self.lower_nm > 0.0 and allow_lowering:
            # the limit binds (|tau_flex| + eps1 >= limit) and the measured ratio is still above rho
            bind = (self._ratio > self.rho) & ~lower
            self._limit[bind] = np.maximum(self._limit[bind] - self.lower_nm, self.eps1)
        self._limit[lower] = self._abs_flex[lower]
        self._limit[raise_] += self.eps2
        return self._limit
