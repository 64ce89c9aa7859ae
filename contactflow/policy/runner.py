"""Run a learned joint-position policy: observation -> history -> ONNX -> PD joint command.

:class:`PolicyRunner` is the library side of the ``lac_policy`` node (numpy in, numpy out, no
dora). Each policy tick it builds the observation frame from the spec's terms, pushes it into the
history, runs the ONNX model and maps the action to ``q_target = default + scale * clip(action)``
(policy order, sent in robot order with the spec's PD gains). Deploy interfaces: LAC (lac.md §1.1,
(1, 64, 95) -> 23) and holosoma (g1_policies.md, (1, 100) -> 29) are two specs of this one class.

Safety: a non-finite observation or action, an inference that fails (:class:`ModelError` from the
model), or a ``q_target`` outside the robot's joint limits (+ the spec's margin), is not sent: the
runner returns the last safe command with ``ok = 0``, counts it and logs it; the policy's
``last_action`` stays the last accepted one. Before the first accepted output the safe command is
the default posture with the spec's gains. The gait phase advances only on a tick whose observation frame is accepted (a refused frame leaves it as it was).

Decimation: built with ``tick_period_s`` shorter than the policy period, the runner acts every
``N = period / tick`` calls and resends its last command in between (same ``ok``).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Mapping

import numpy as np

from contactflow.errors import ModelError
from contactflow.policy.spec import PolicySpec
from contactflow.policy.terms import TermInputs

__all__ = ["PolicyOutput", "PolicyRunner"]

log = logging.getLogger("contactflow.policy")


@dataclasses.dataclass(frozen=True)
class PolicyOutput:
    """One tick of a policy runner.

    Attributes:
        command: the ``joint_command`` PD fields, robot joint order: ``q_target`` (n,) [rad],
            ``kp`` (n,) [N m/rad], ``kd`` (n,) [N m s/rad], ``tau_ff`` (n,) [N m] (zeros),
            ``ok`` (1,) (1 = the policy's output, 0 = the last safe command held).
        ok: ``command["ok"] == 1``.
        acted: the policy ran this tick (False between decimated ticks).
        diagnostics: ``reason`` (why an output was refused, else ""), ``n_rejected`` (so far),
            ``obs_time_s`` and ``infer_time_s`` (this tick; 0 when not acted), ``tick``.
    """

    command: dict[str, np.ndarray]
    ok: bool
    acted: bool
    diagnostics: dict


class PolicyRunner:
    """Observation assembly, history, inference and action map of one policy spec.

    Args:
        spec: a :class:`PolicySpec` (from :func:`contactflow.policy.load_policy_spec`).
        tick_period_s: period of the calls to :meth:`step` [s]; ``None`` = the policy period.

    Raises:
        ConfigError: the policy period is not a multiple of ``tick_period_s``.
    """

    def __init__(self, spec: PolicySpec, *, tick_period_s: float | None = None):
        self.spec = spec
        self.decimation = 1 if tick_period_s is None else spec.decimation(tick_period_s)
        cfg = spec.cfg
        self._H, self._D = cfg.history.length, spec.frame_dim
        self._in_shape = tuple(cfg.input.shape)
        times = list(range(self._H)) if cfg.history.order == "oldest_first" else list(range(self._H - 1, -1, -1))
        if cfg.history.layout == "terms":
            # flat frames (H*D, time-major) -> per term its H values in time order, terms concatenated
            idx = [h * self._D + j for b in spec.terms for h in times for j in range(b.sl.start, b.sl.stop)]
        else:
            idx = [h * self._D + j for h in times for j in range(self._D)]
        self._perm = None if idx == list(range(self._H * self._D)) else np.array(idx)
        ph = cfg.phase
        self._dphi = 0.0 if ph is None else 2.0 * np.pi / (cfg.rate_hz * ph.period_s)
        self.reset()

    # ------------------------------------------------------------------ state

    def reset(self) -> None:
        """Empty history, zero last action, phase at its start, safe command = default posture."""
        spec = self.spec
        self._hist = np.zeros((self._H, self._D), dtype=np.float32)
        self._n_frames = 0
        self.last_action = np.zeros(len(spec.joint_names))
        start = spec.cfg.phase.start_rad if spec.cfg.phase is not None else (0.0, 0.0)
        self.phase = np.array(start, dtype=float)
        self._standing = False
        self._tick = 0
        self.n_rejected = 0
        self._safe = self._command(spec.default_robot.copy(), True)

    def _command(self, q_target: np.ndarray, ok: bool) -> dict[str, np.ndarray]:
        return {"q_target": q_target, "kp": self.spec.kp, "kd": self.spec.kd,
                "tau_ff": np.zeros_like(q_target), "ok": np.array([1.0 if ok else 0.0])}

    # ------------------------------------------------------------------ pieces (public for tests)

    def advance_phase(self, command: Mapping[str, np.ndarray]) -> None:
        """Advance the gait phase one policy tick (see :class:`contactflow.policy.spec.PhaseCfg`)."""
        ph = self.spec.cfg.phase
        if ph is None:
            return
        p = np.fmod(self.phase + self._dphi + np.pi, 2.0 * np.pi) - np.pi
        lin = float(np.linalg.norm(command["lin_vel"]))
        ang = float(np.linalg.norm(command["ang_vel"]))
        if lin < ph.stand_threshold and ang < ph.stand_threshold:
            p[:] = ph.stand_rad
            self._standing = True
        elif self._standing:
            p = np.array(ph.start_rad, dtype=float)
            self._standing = False
        self.phase = p

    def frame(self, sensors: Mapping[str, np.ndarray], command: Mapping[str, np.ndarray]) -> np.ndarray:
        """The observation frame at the current state (phase and last action as they are now).

        Args:
            sensors: ``sensors`` contract fields (``q``, ``v``, ``imu_quat``, ``imu_gyro``...).
            command: ``teleop_command`` fields.

        Returns:
            (frame_dim,) float64 frame: per term ``scale * clip(raw)``, in spec order.
        """
        inp = TermInputs(sensors, command, self.last_action, self.phase, self.spec.default_robot)
        out = np.empty(self._D)
        for b in self.spec.terms:
            raw = b.term.fn(inp, b.index)
            if b.lo is not None:
                raw = np.clip(raw, b.lo, b.hi)
            out[b.sl] = b.cfg.scale * raw
        return out

    def push(self, frame: np.ndarray) -> None:
        """Append a frame to the history (oldest first; the first push fills per ``history.fill``)."""
        if self._n_frames == 0 and self.spec.cfg.history.fill == "first_frame":
            self._hist[:] = frame
        else:
            self._hist[:-1] = self._hist[1:]
            self._hist[-1] = frame
        self._n_frames += 1

    def model_input(self) -> np.ndarray:
        """The ONNX input tensor (float32, the spec's input shape) from the current history."""
        flat = self._hist.reshape(-1)
        if self._perm is not None:
            flat = flat[self._perm]
        return flat.reshape(self._in_shape)

    # ------------------------------------------------------------------ tick

    def step(self, sensors: Mapping[str, np.ndarray] | None, command: Mapping[str, np.ndarray] | None) -> PolicyOutput:
        """One tick.

        Args:
            sensors: ``sensors`` fields of this tick, or ``None`` (malformed/missing message).
            command: ``teleop_command`` fields of this tick, or ``None``.

        Returns:
            PolicyOutput (the command to send; the last safe one, ``ok = 0``, if refused).
        """
        tick = self._tick
        self._tick += 1
        if tick % self.decimation:
            return self._out(self._safe, bool(self._safe["ok"][0]), False, "", 0.0, 0.0, tick)
        if sensors is None or command is None:
            return self._reject("missing or malformed input message", 0.0, 0.0, tick)
        t0 = time.perf_counter()
        phase, standing = self.phase.copy(), self._standing
        self.advance_phase(command)
        f = self.frame(sensors, command)
        if not np.isfinite(f).all():
            self.phase, self._standing = phase, standing  # the refused frame does not move the clock
            bad = [b.cfg.term for b in self.spec.terms if not np.isfinite(f[b.sl]).all()]
            return self._reject(f"non-finite observation term(s) {bad}", time.perf_counter() - t0, 0.0, tick)
        self.push(f)
        x = self.model_input()
        t1 = time.perf_counter()
        try:
            a = np.asarray(self.spec.model.run(x), dtype=float).reshape(-1)
        except ModelError as exc:
            return self._reject(f"inference failed: {exc}", t1 - t0, time.perf_counter() - t1, tick)
        t2 = time.perf_counter()
        return self.act(a, obs_s=t1 - t0, infer_s=t2 - t1, tick=tick)

    def act(self, action: np.ndarray, *, obs_s: float = 0.0, infer_s: float = 0.0, tick: int | None = None) -> PolicyOutput:
        """Map a raw action to the PD command and check it (the second half of :meth:`step`).

        ``q_target = default + scale * clip(action)`` (policy order, sent in robot order). An
        accepted action becomes ``last_action`` and the safe command; a refused one (wrong size,
        non-finite, ``q_target`` outside the joint limits) returns the last safe command with
        ``ok = 0``. :meth:`step` calls it after inference; the training environment
        (``contactflow.lac.train.env``) calls it with the action of the policy being trained, so
        training and deployment apply actions with the same code.

        Args:
            action: (n,) raw action, policy order.
            obs_s, infer_s: time spent on the observation and the inference [s] (diagnostics).
            tick: tick index for the diagnostics (``None``: the last tick).

        Returns:
            PolicyOutput.
        """
        a = np.asarray(action, dtype=float).reshape(-1)
        tick = self._tick - 1 if tick is None else tick
        if a.size != len(self.spec.joint_names):
            return self._reject(f"action has {a.size} values, expected {len(self.spec.joint_names)}", obs_s, infer_s, tick)
        if not np.isfinite(a).all():
            return self._reject(f"non-finite action ({int((~np.isfinite(a)).sum())} of {a.size} values)", obs_s, infer_s, tick)
        clip = self.spec.cfg.action.clip
        if clip is not None:
            a = np.clip(a, clip[0], clip[1])
        q = np.empty(len(a))
        q[self.spec.policy_to_robot] = self.spec.default_policy + self.spec.scale * a
        out = (q < self.spec.q_min) | (q > self.spec.q_max)
        if out.any():
            names = [self.spec.robot_joint_names[i] for i in np.flatnonzero(out)]
            return self._reject(f"q_target outside the joint limits at {names}", obs_s, infer_s, tick)
        self.last_action = a
        self._safe = self._command(q, True)
        return self._out(self._safe, True, True, "", obs_s, infer_s, tick)

    def _reject(self, reason: str, obs_s: float, inf_s: float, tick: int) -> PolicyOutput:
        self.n_rejected += 1
        if self.n_rejected == 1 or self.n_rejected % 50 == 0:
            log.warning("policy %s tick %d: output refused (%s); holding the last safe command (%d refused so far)",
                        self.spec.cfg.name, tick, reason, self.n_rejected)
        self._safe = dict(self._safe, ok=np.array([0.0]))
        return self._out(self._safe, False, True, reason, obs_s, inf_s, tick)

    def _out(self, cmd, ok, acted, reason, obs_s, inf_s, tick) -> PolicyOutput:
        return PolicyOutput(cmd, ok, acted, {"reason": reason, "n_rejected": self.n_rejected,
                                             "obs_time_s": obs_s, "infer_time_s": inf_s, "tick": tick})
