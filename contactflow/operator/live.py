"""Live operator input (no dora here): a command state that a program, a keyboard or 3Dconnexion
SpaceMice update, turned into the ``operator_command`` values once per control tick.

* :class:`LiveOperator` holds, per effector, the current twist (world [v; omega]), the requested
  contact state, pushing mode and normal-force velocity; ``set_*`` methods validate and refuse
  bad values (non-finite, unknown effector) with a :class:`ContractError`; :meth:`values` packs
  them for :func:`contactflow.contracts.messages.port_specs` ``["operator_command"]``.
* :class:`KeyboardMapper` maps terminal keys to it (one selected effector at a time);
  :class:`TerminalKeys` reads those keys from a terminal without waiting for Enter.
* :class:`SpaceMouseSource` reads one pyspacemouse device per effector, as in the paper
  (optional dependency; :func:`spacemouse_available` says whether it can be used).

``examples/live_operator.py`` runs this as a dynamic dora node (see its docstring).
"""

from __future__ import annotations

import math
import threading
from typing import Mapping, Sequence

import numpy as np

from contactflow.errors import ContractError
from contactflow.seiko.filters import ExponentialLowPass

__all__ = ["LiveOperator", "KeyboardMapper", "TerminalKeys", "SpaceMouseSource", "TorqueRatioMonitor",
           "spacemouse_available"]


class TorqueRatioMonitor:
    """A joint-torque display for an operator: ``|tau| / tau_max``, low-passed, against a ratio.

    What an operator reaching "as far as allowed by the controller" (SEIKO RA-L 2024, Fig. 6)
    watches: the first-order low-pass ``lp <- a lp + (1 - a) |tau|``, ``a`` of
    :func:`contactflow.seiko.filters.alpha_from_cutoff` (the bilinear form of SEIKO's
    ``FilterExponential``, seiko.md §6.5; 5 Hz by default, like the Controller's filter before
    (12)), compared with ``rho``.

    Args:
        tau_max: (n,) joint torque limits [N m], > 0.
        rho: ratio at which :meth:`update` reports "above" [-], > 0.
        cutoff_hz: low-pass cut-off [Hz], > 0. dt: sample period [s], > 0.
        watch: indices of the joints to watch (default: all).

    Raises:
        ContractError: non-positive parameters or limits, a watched index out of range.
    """

    def __init__(self, tau_max, rho: float, cutoff_hz: float = 5.0, dt: float = 0.002,
                 watch: Sequence[int] | None = None):
        self.tau_max = np.asarray(tau_max, dtype=float)
        if not (rho > 0.0 and cutoff_hz > 0.0 and dt > 0.0) or np.any(~(self.tau_max > 0.0)):
            raise ContractError(f"TorqueRatioMonitor: need rho, cutoff_hz, dt, tau_max > 0 (got {rho}, {cutoff_hz}, {dt})")
        self.watch = list(range(self.tau_max.size)) if watch is None else list(watch)
        if any(not 0 <= i < self.tau_max.size for i in self.watch):
            raise ContractError(f"TorqueRatioMonitor: watched joint index out of range: {self.watch}")
        self.rho = float(rho)
        self._lp = ExponentialLowPass(self.tau_max.size, cutoff_hz, dt)  # of |tau|, seeded by the first sample

    @property
    def alpha(self) -> float:
        """The low-pass coefficient (:func:`contactflow.seiko.filters.alpha_from_cutoff`)."""
        return self._lp.alpha

    def update(self, tau) -> bool:
        """Feed one (n,) measured torque sample [N m]; True if a watched joint is above ``rho``."""
        lp = self._lp.update(np.abs(np.asarray(tau, dtype=float)))
        return bool(np.any(lp[self.watch] / self.tau_max[self.watch] > self.rho))


class LiveOperator:
    """Thread-safe operator command state.

    Args:
        effectors: effector names in robot order.
        initial_enabled: effector -> contact state at reset.
    """

    def __init__(self, effectors: Sequence[str], initial_enabled: Mapping[str, bool]):
        self.effectors = tuple(effectors)
        self._lock = threading.Lock()
        self.twist = {e: np.zeros(6) for e in self.effectors}
        self.enable = {e: bool(initial_enabled.get(e, False)) for e in self.effectors}
        self.push = {e: False for e in self.effectors}
        self.force_rate = {e: 0.0 for e in self.effectors}

    def _eff(self, e: str) -> str:
        if e not in self.twist:
            raise ContractError(f"unknown effector {e!r}; expected one of {', '.join(self.effectors)}")
        return e

    def set_twist(self, e: str, twist) -> None:
        """Set the world twist (6,) [m/s, rad/s] of effector ``e`` (held until changed)."""
        t = np.asarray(twist, dtype=float).reshape(-1)
        if t.shape != (6,) or not np.all(np.isfinite(t)):
            raise ContractError(f"twist of {e!r}: expected 6 finite numbers, got {twist!r}")
        with self._lock:
            self.twist[self._eff(e)] = t

    def set_enable(self, e: str, on: bool) -> None:
        """Request the contact of ``e`` enabled (True) or disabled (False)."""
        with self._lock:
            self.enable[self._eff(e)] = bool(on)

    def set_push(self, e: str, on: bool, rate_n_per_s: float = 0.0) -> None:
        """Pushing mode of ``e`` and its normal-force velocity [N/s]."""
        if not math.isfinite(float(rate_n_per_s)):
            raise ContractError(f"normal-force velocity of {e!r} must be finite, got {rate_n_per_s!r}")
        with self._lock:
            self.push[self._eff(e)] = bool(on)
            self.force_rate[e] = float(rate_n_per_s) if on else 0.0

    def stop(self) -> None:
        """Zero every twist and force velocity (e.g. when the input device is lost)."""
        with self._lock:
            for e in self.effectors:
                self.twist[e] = np.zeros(6)
                self.force_rate[e] = 0.0

    def values(self) -> dict[str, np.ndarray]:
        """The ``operator_command`` fields (twist.<e>, enable, push, force_rate)."""
        with self._lock:
            out = {f"twist.{e}": self.twist[e].copy() for e in self.effectors}
            out["enable"] = np.array([1.0 if self.enable[e] else 0.0 for e in self.effectors])
            out["push"] = np.array([1.0 if self.push[e] else 0.0 for e in self.effectors])
            out["force_rate"] = np.array([self.force_rate[e] for e in self.effectors])
        return out


class KeyboardMapper:
    """Terminal keys -> :class:`LiveOperator` (a key press sets a velocity for ``hold_s``).

    Keys: ``1``-``9`` select the effector (robot order); ``w/s`` +-x, ``a/d`` +-y, ``r/f`` +-z
    at ``speed_mps``; ``e`` toggles the contact request; ``p`` toggles pushing mode; ``+``/``-``
    push harder/softer (``force_rate`` N/s while pushing, ``0`` holds); space stops everything.

    Args:
        op: the command state. speed_mps: linear speed [m/s]. force_rate: [N/s].
    """

    def __init__(self, op: LiveOperator, speed_mps: float = 0.03, force_rate: float = 5.0):
        self.op = op
        self.speed = speed_mps
        self.rate = force_rate
        self.selected = next((e for e in op.effectors if not op.enable[e]), op.effectors[0])

    _AXES = {"w": (0, 1), "s": (0, -1), "a": (1, 1), "d": (1, -1), "r": (2, 1), "f": (2, -1)}

    def key(self, k: str) -> str:
        """Apply one key; returns a short description of what it did."""
        op = self.op
        if k.isdigit() and 1 <= int(k) <= len(op.effectors):
            self.selected = op.effectors[int(k) - 1]
            return f"selected {self.selected}"
        e = self.selected
        if k in self._AXES:
            i, s = self._AXES[k]
            tw = np.zeros(6)
            tw[i] = s * self.speed
            op.set_twist(e, tw)
            return f"{e} twist {tw[:3]}"
        if k == " ":
            op.stop()
            return "stop"
        if k == "e":
            op.set_enable(e, not op.enable[e])
            return f"{e} contact {'enable' if op.enable[e] else 'disable'} requested"
        if k == "p":
            op.set_push(e, not op.push[e])
            return f"{e} push {'on' if op.push[e] else 'off'}"
        if k in "+-0" and op.push[e]:
            op.set_push(e, True, {"+": self.rate, "-": -self.rate, "0": 0.0}[k])
            return f"{e} normal-force velocity {op.force_rate[e]} N/s"
        return ""


class TerminalKeys:
    """Single key presses from a terminal, without Enter and without blocking (POSIX).

    A context manager: entering puts the terminal in cbreak mode (keys are delivered one at a
    time, Ctrl-C still interrupts, nothing is echoed), leaving restores its previous settings,
    also after an exception. :meth:`read` returns the keys pressed since the last call.

    Args:
        fd: file descriptor of the terminal (``sys.stdin.fileno()`` by default).

    Raises:
        ContractError: ``fd`` is not a terminal (for example stdin redirected from a file).
    """

    def __init__(self, fd: int | None = None):
        import sys

        self.fd = sys.stdin.fileno() if fd is None else int(fd)
        self._old = None

    def __enter__(self) -> "TerminalKeys":
        import os
        import termios
        import tty

        if not os.isatty(self.fd):
            raise ContractError(f"--keyboard needs a terminal: file descriptor {self.fd} is not a tty")
        self._old = termios.tcgetattr(self.fd)
        tty.setcbreak(self.fd)
        return self

    def __exit__(self, *exc) -> None:
        import termios

        if self._old is not None:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._old)
            self._old = None

    def read(self) -> str:
        """The keys typed since the last call ('' if none); never waits."""
        import os
        import select

        out = []
        while select.select([self.fd], [], [], 0)[0]:
            chunk = os.read(self.fd, 64)
            if not chunk:
                break
            out.append(chunk.decode(errors="ignore"))
        return "".join(out)


def spacemouse_available() -> bool:
    """True when pyspacemouse can be imported (devices are probed by :class:`SpaceMouseSource`)."""
    try:
        import pyspacemouse  # noqa: F401
    except Exception:  # noqa: BLE001 - any import problem means "not available"
        return False
    return True


class SpaceMouseSource:
    """One 3Dconnexion SpaceMouse per effector (paper §V), through pyspacemouse.

    Each :meth:`poll` reads every device and sets its effector's twist: the device axes
    (x, y, z, roll, pitch, yaw in [-1, 1]) scaled by ``max_lin_mps`` / ``max_ang_radps``. The
    left button toggles the contact request; a lost device zeroes its effector.

    Args:
        op: command state. effectors: effector per device, in device order.

    Raises:
        ContractError: pyspacemouse missing or fewer devices than effectors.
    """

    def __init__(self, op: LiveOperator, effectors: Sequence[str], max_lin_mps: float = 0.05, max_ang_radps: float = 0.3):
        try:
            import pyspacemouse
        except Exception as exc:  # noqa: BLE001
            raise ContractError(f"pyspacemouse is not available ({exc}); pip install pyspacemouse") from None
        self.op, self.effectors = op, list(effectors)
        self.lin, self.ang = max_lin_mps, max_ang_radps
        self.devices = []
        for i, e in enumerate(self.effectors):
            dev = pyspacemouse.open(device_index=i) if "device_index" in pyspacemouse.open.__code__.co_varnames else pyspacemouse.open()
            if not dev:
                raise ContractError(f"no SpaceMouse #{i} for effector {e!r}")
            self.devices.append(dev)
        self._buttons = [0] * len(self.devices)

    def poll(self) -> None:
        for i, (e, dev) in enumerate(zip(self.effectors, self.devices)):
            try:
                st = dev.read() if hasattr(dev, "read") else __import__("pyspacemouse").read()
            except Exception:  # noqa: BLE001 - a lost device stops its effector
                self.op.set_twist(e, np.zeros(6))
                continue
            tw = np.array([st.x * self.lin, st.y * self.lin, st.z * self.lin,
                           st.roll * self.ang, st.pitch * self.ang, st.yaw * self.ang])
            self.op.set_twist(e, np.where(np.isfinite(tw), tw, 0.0))
            b = int(st.buttons[0]) if getattr(st, "buttons", None) else 0
            if b and not self._buttons[i]:
                self.op.set_enable(e, not self.op.enable[e])
            self._buttons[i] = b
