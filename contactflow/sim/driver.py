"""The logic of the ``mujoco_driver`` node, without dora: simulator, command safety, external
wrenches, payloads and the end-of-run rules, for position robots (Talos) and PD robots (G1).

The robot file's ``actuation`` chooses the simulator and the command contract
(``contactflow.contracts.messages.port_specs``):

* ``position``: :class:`~contactflow.sim.mujoco_robot.MujocoRobotSim`, command ``theta_cmd``,
  held by :class:`~contactflow.safety.CommandHold`;
* ``pd``: :class:`~contactflow.sim.pd_robot.PDRobotSim`, command ``q_target``, ``kp``, ``kd``,
  ``tau_ff`` (Unitree ``MotorCmd``), held by :class:`~contactflow.safety.PDCommandHold` with the
  simulator's gain limits and the effort limits.

A command that is malformed, non-finite, out of the joint limits (or, PD, with gains out of
range) is not applied: the last safe command stays in force and the rejection is counted and
logged once per reason. PD robots: when no valid command has come for ``command_timeout_s``
(of the timeout clock: simulated time in lockstep, wall time in realtime) after commands had
started, the driver switches to damping mode (``kp = 0``, ``kd`` = the robot file's
``damping_mode_kd_nms_per_rad``, ``tau_ff = 0``) and ramps the gains back over
``recovery_ramp_s`` on the next valid command (:class:`~contactflow.safety.PDCommandHold`).

External wrenches (``external_wrench`` contract: ``wrench.<link>`` (6,) [f; tau] [N, N m], world
frame, at the link's centre of mass) are applied with MuJoCo's ``xfrc_applied`` for the next tick.

Base state: the ``sensors`` message carries the simulator's TRUE base pose and twist in ``q``/``v``
(:data:`BASE_STATE` ``= "simulation_truth"``, announced as ``base_state`` in the driver's
configuration metadata); a hardware driver says which estimate it sends instead, and a
controller that reads the base from ``q``/``v`` needs that estimator on hardware.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence

import numpy as np

from contactflow.errors import ConfigError, ContractError
from contactflow.robot import Robot
from contactflow.safety import CommandHold, PDCommandHold
from contactflow.sim.mujoco_model import PointMass
from contactflow.sim.mujoco_robot import MujocoRobotSim, SensorReadings, SimConfig
from contactflow.sim.pd_robot import PDRobotSim, PDSimConfig

__all__ = ["parse_payload", "sim_config_class", "damping_mode_kd", "RobotDriver", "DriverStatus", "BASE_STATE",
           "NewestCommand"]

log = logging.getLogger("contactflow.mujoco_driver")

BASE_STATE = "simulation_truth"
"""Where the base pose/twist of ``sensors`` comes from (the simulator's state, not an estimate)."""

DAMPING_KEY = "damping_mode_kd_nms_per_rad"


def parse_payload(text: str, index: int = 0) -> PointMass:
    """A ``--payload LINK:MASS_KG[:X:Y:Z]`` option as a :class:`PointMass` named ``payload_<index>``.

    X, Y, Z: position in the link frame [m] (default 0).

    Raises:
        ConfigError: malformed text (message names the option and the expected form).
    """
    parts = text.split(":")
    if len(parts) not in (2, 5) or not parts[0]:
        raise ConfigError(f"--payload {text!r}: expected LINK:MASS_KG or LINK:MASS_KG:X:Y:Z")
    try:
        nums = [float(x) for x in parts[1:]]
    except ValueError:
        raise ConfigError(f"--payload {text!r}: MASS_KG, X, Y, Z must be numbers") from None
    pos = tuple(nums[1:4]) if len(nums) == 4 else (0.0, 0.0, 0.0)
    try:
        return PointMass(name=f"payload_{index}", parent=parts[0], mass=nums[0], pos=pos)
    except ValueError as exc:
        raise ConfigError(f"--payload {text!r}: {exc}") from None


def damping_mode_kd(robot: Robot, kd_max: np.ndarray | None = None) -> np.ndarray:
    """(n,) damping-mode ``kd`` [N m s/rad] of a PD robot, from its robot file.

    The key ``damping_mode_kd_nms_per_rad`` is a number (every joint) or a mapping joint ->
    value read BY NAME, with an optional ``default`` entry for the joints it does not list.
    Absent: the robot's PD damping ``robot.kd``.

    Args:
        robot: a robot with ``actuation: pd``.
        kd_max: (n,) largest value accepted (the simulator's ``PDRobotSim.kd_max``), or None.

    Raises:
        ConfigError: malformed key, unknown joint, a joint without value, a value that is not
            finite, negative or above ``kd_max`` (the message names the file, key and joints).
    """
    src = f"{robot.file_label()}: {DAMPING_KEY}"
    raw = robot.raw.get(DAMPING_KEY)
    names = list(robot.joint_names)
    if raw is None:
        kd = np.array(robot.kd, dtype=float)
    elif isinstance(raw, (int, float)) and not isinstance(raw, bool):
        kd = np.full(robot.n, float(raw))
    elif isinstance(raw, dict):
        known = set(names) | set((robot.raw.get("joint_params") or {})) | {"default"}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ConfigError(f"{src}: unknown joint(s) {unknown}")
        missing = [j for j in names if j not in raw and "default" not in raw]
        if missing:
            raise ConfigError(f"{src}: no value (and no 'default') for {missing}")
        try:
            kd = np.array([float(raw.get(j, raw.get("default"))) for j in names])
        except (TypeError, ValueError):
            raise ConfigError(f"{src}: expected numbers [N m s/rad], got {raw!r}") from None
    else:
        raise ConfigError(f"{src}: expected a number or a mapping joint -> N m s/rad, got {raw!r}")
    bad = ~np.isfinite(kd) | (kd < 0)
    if np.any(bad):
        raise ConfigError(f"{src}: must be finite and >= 0, not for {[names[i] for i in np.flatnonzero(bad)]}")
    if kd_max is not None:
        over = kd > kd_max
        if np.any(over):
            detail = ", ".join(f"{names[i]}: {kd[i]:g} > {kd_max[i]:.3g}" for i in np.flatnonzero(over))
            raise ConfigError(f"{src}: above the simulator's kd stability limit (kd_max) for {detail}")
    return kd


def sim_config_class(robot: Robot) -> type:
    """The simulator configuration class for ``robot`` (``SimConfig`` or ``PDSimConfig``)."""
    return PDSimConfig if robot.actuation == "pd" else SimConfig


@dataclasses.dataclass
class DriverStatus:
    """Counters of a run.

    Attributes:
        ticks: control ticks simulated.
        rejected_commands: commands not applied (the last safe command was held instead).
        degraded_commands: PD commands with ``ok = 0`` (the controller said it was degraded; they
            are applied when otherwise valid).
        malformed_wrenches: external-wrench messages that could not be used (wrenches cleared).
        damping_entries: times the PD driver entered damping mode (no valid command for the
            command timeout). damping_ticks: control ticks simulated in damping mode.
        fell: the robot fell (base below the fall height, or the state diverged).
        fall: '' or one line saying when and how it fell (``the robot fell at t = X s (base
            height Y m < Z m)``; a diverged state says so), for the run's failure line.
    """

    ticks: int = 0
    rejected_commands: int = 0
    degraded_commands: int = 0
    malformed_wrenches: int = 0
    damping_entries: int = 0
    damping_ticks: int = 0
    fell: bool = False
    fall: str = ""


class RobotDriver:
    """Simulated robot driver: the part of ``mujoco_driver`` that does not need dora.

    Args:
        robot: the robot description.
        sim_config: ``SimConfig`` (position robots) or ``PDSimConfig`` (PD robots); ``None`` =
            defaults.
        payloads: unmodelled point masses welded to links (simulation only).
        environment: walls / supports (position robots with an ``environment:`` section).
        command_timeout_s: a command older than this is stale [s] (on the timeout clock): a
            position robot holds its last safe command, a PD robot enters damping mode.
        max_sim_time_s: the run ends at this simulated time [s].
        recovery_ramp_s: PD robots: gain ramp after damping mode [s] (:class:`PDCommandHold`).

    Attributes:
        base_state: where the base state of the readings comes from (:data:`BASE_STATE`).

    Raises:
        ConfigError: wrong configuration class, unknown wrench link, bad
            ``damping_mode_kd_nms_per_rad`` (:func:`damping_mode_kd`) or ``recovery_ramp_s``.
        ModelError: the model cannot be built.
    """

    base_state = BASE_STATE

    def __init__(self, robot: Robot, sim_config=None, *, payloads: Sequence[PointMass] = (), environment=None,
                 command_timeout_s: float = 0.1, max_sim_time_s: float = 600.0, recovery_ramp_s: float = 1.0):
        self.robot = robot
        self.pd = robot.actuation == "pd"
        cls = sim_config_class(robot)
        cfg = cls() if sim_config is None else sim_config
        if not isinstance(cfg, cls):
            raise ConfigError(f"robot {robot.name!r} (actuation {robot.actuation}) needs a {cls.__name__}, "
                              f"got {type(cfg).__name__}")
        self.config = cfg
        self.max_sim_time_s = float(max_sim_time_s)
        if self.pd:
            if environment is not None:
                raise ConfigError(f"robot {robot.name!r}: --environment is only supported for position robots")
            self.sim = PDRobotSim(cfg, robot, extra_bodies=list(payloads))
            if not (np.isfinite(recovery_ramp_s) and recovery_ramp_s >= 0):
                raise ConfigError(f"recovery_ramp_s must be >= 0 s, got {recovery_ramp_s}")
            self.hold: CommandHold = PDCommandHold(
                robot.theta_default, robot.K, robot.kd, None, timeout_s=command_timeout_s, q_min=robot.q_min,
                q_max=robot.q_max, kp_max=self.sim.kp_max, kd_max=self.sim.kd_max, tau_max=robot.tau_max,
                kd_damping=damping_mode_kd(robot, self.sim.kd_max), recovery_ramp_s=recovery_ramp_s)
        else:
            self.sim = MujocoRobotSim(cfg, robot, extra_bodies=list(payloads), environment=environment)
            self.hold = CommandHold(robot.theta_default, timeout_s=command_timeout_s, q_min=robot.q_min,
                                    q_max=robot.q_max)
        self.wrench_links = tuple((robot.raw.get("wrench_links") or []))
        missing = [b for b in self.wrench_links if self._body_id(b) < 0]
        if missing:
            raise ConfigError(f"{robot.file_label()}: wrench_links: no MuJoCo body {missing}")
        self._wrench_bodies = np.array([self._body_id(b) for b in self.wrench_links], dtype=int)
        self.status = DriverStatus()
        self._damping_seen = 0
        self._reasons: set[str] = set()
        self.readings: SensorReadings = self.sim.readings()

    def _body_id(self, name: str) -> int:
        import mujoco

        return mujoco.mj_name2id(self.sim.model, mujoco.mjtObj.mjOBJ_BODY, name)

    # ------------------------------------------------------------------ run
    @property
    def command_mode(self) -> str:
        """The command mode of the last tick: PD robots ``start``, ``normal``, ``damping`` or
        ``ramp`` (:class:`PDCommandHold`); position robots ``hold`` (stale) or ``normal``."""
        if self.pd:
            return self.hold.mode
        return "hold" if self.hold.holding else "normal"

    def reset(self) -> SensorReadings:
        """Reset the simulation (t = 0, default posture, no external wrench)."""
        self.readings = self.sim.reset()
        self.sim.data.xfrc_applied[:] = 0.0
        self.status = DriverStatus()
        return self.readings

    def offer_command(self, fields: Mapping[str, np.ndarray] | None, now_s: float) -> bool:
        """Offer the command of this tick (``joint_command`` fields, or None when malformed).

        Returns:
            True if it was accepted; False if the last safe command stays in force.
        """
        if self.pd:
            if fields is not None and "ok" in fields and float(np.asarray(fields["ok"]).reshape(-1)[0]) < 0.5:
                self.status.degraded_commands += 1
            ok = self.hold.offer(fields, now_s)
        else:
            ok = self.hold.offer(None if fields is None else fields.get("theta_cmd"), now_s)
        if not ok:
            self.status.rejected_commands += 1
            reason = self.hold.last_reason
            if reason not in self._reasons:  # once per reason, the count is in the status
                self._reasons.add(reason)
                log.warning("t = %.3f s: command not applied, holding the last safe command: %s", self.readings.t, reason)
        return ok

    def set_wrenches(self, fields: Mapping[str, np.ndarray] | None) -> None:
        """Apply the ``external_wrench`` fields (world [f; tau] at each link's CoM) from now on.

        ``None`` (a malformed message) clears every external wrench and counts it.
        """
        xfrc = self.sim.data.xfrc_applied
        if fields is None:
            self.status.malformed_wrenches += 1
            xfrc[self._wrench_bodies] = 0.0
            return
        for b, link in zip(self._wrench_bodies, self.wrench_links):
            w = np.asarray(fields.get(f"wrench.{link}", np.zeros(6)), dtype=float).reshape(-1)
            if w.shape != (6,) or not np.all(np.isfinite(w)):
                raise ContractError(f"wrench.{link}: expected 6 finite numbers, got {w}")
            xfrc[b] = w

    def advance(self, now_s: float | None = None) -> tuple[SensorReadings, bool]:
        """Simulate one control tick under the last safe command.

        Args:
            now_s: the clock of the command timeout (wall time in realtime mode); ``None`` = the
                simulation time.

        Returns:
            (readings at the end of the tick, done) where ``done`` is True when the robot fell or
            the maximum simulated time is reached.
        """
        now = self.readings.t if now_s is None else now_s
        if self.pd:
            q_t, kp, kd, tff = self.hold.pd_command(now)
            self.readings = self.sim.step(q_t, kp, kd, tff)
            entries = self.hold.damping_entries
            self.status.damping_entries += entries - self._damping_seen
            self._damping_seen = entries
            self.status.damping_ticks += int(self.hold.damping)
        else:
            self.readings = self.sim.step(self.hold.command(now))
        self.status.ticks += 1
        fell = self.sim.fell()
        if fell and not self.status.fell:
            h, thr = self.readings.base_height, self.sim.fall_height_m
            if np.isfinite(h) and h < thr:
                self.status.fall = f"the robot fell at t = {self.readings.t:.3f} s (base height {h:.3f} m < {thr:.2f} m)"
            else:  # MuJoCo diverged (it reset its state) or the state is not finite
                self.status.fall = (f"the robot fell at t = {self.readings.t:.3f} s (the simulation diverged: base "
                                    f"height {h:.3f} m, fall height {thr:.2f} m)")
            log.error("%s; ending the run", self.status.fall)
        self.status.fell = self.status.fell or fell
        return self.readings, fell or self.readings.t >= self.max_sim_time_s - 1e-9


class CommandLossClock:
    """How long a real-time driver has gone without a valid command, in the time its controller
    could have answered (``nodes/mujoco_driver.py --command-lost-s``).

    Call :meth:`period` once per control period, at its start, with whether a valid command was
    taken. The clock starts with the first valid command (or :meth:`start`, after a start-up
    handshake that took one per tick). The driver's own absence does not count: when a period
    begins more than two periods after the one before (the driver was paused or descheduled), its
    controller had no sensors to answer meanwhile, and that time (less one period) is not added.

    Args:
        dt_s: control period [s].
        timeout_s: the loss threshold [s] (0 = never lost).
    """

    def __init__(self, dt_s: float, timeout_s: float):
        self.dt_s = float(dt_s)
        self.timeout_s = float(timeout_s)
        self.valid_s: float | None = None  # the time of the last valid command, shifted by the driver's absences
        self._last_start: float | None = None

    def start(self, now_s: float) -> None:
        """Commands have started (the start-up handshake took one per tick) at ``now_s``."""
        if self.valid_s is None:
            self.valid_s = now_s

    def period(self, now_s: float, valid: bool) -> float | None:
        """A period starts at ``now_s`` [s]; ``valid``: a valid command was taken in it. Returns the
        time without a valid command [s] once it reaches ``timeout_s`` (the commands are lost),
        else None."""
        last, self._last_start = self._last_start, now_s
        if self.valid_s is not None and last is not None and now_s - last > 2.0 * self.dt_s:
            self.valid_s += now_s - last - self.dt_s  # the driver's own absence
        if valid:
            self.valid_s = now_s
            return None
        if self.timeout_s > 0 and self.valid_s is not None and now_s - self.valid_s >= self.timeout_s:
            return now_s - self.valid_s
        return None


class NewestCommand:
    """Latest-value command slot of a real-time driver: the newest command received wins.

    Commands are offered as they arrive (any order); :meth:`take` is called once per control
    period, at its start, and says whether a command newer than the one taken last is there. A
    real-time driver never waits for a command: when none is new, the last safe command stays in
    force (a *miss*, ``contactflow.recording.summary.realtime_metrics``).

    Attributes:
        seq: seq of the newest command received (-1: none yet).
        taken_seq: seq of the command taken last (-1: none).
        finished: a received command carried ``finished`` (the run is ending).
        stale: commands received older than the newest one (out of order), ignored.
    """

    def __init__(self):
        self.seq = -1
        self.t = float("nan")
        self.fields = None
        self.taken_seq = -1
        self.finished = False
        self.stale = 0

    def offer(self, seq: int, t: float, fields: Mapping[str, np.ndarray] | None, finished: bool = False) -> bool:
        """Keep a received command if it is newer than the newest one; returns True if kept.

        Args:
            seq: the command's ``seq`` (tick of the sensors it was computed from).
            t: the command's ``t`` [s] (time of those sensors).
            fields: ``joint_command`` fields, or None for a malformed message (it still counts as
                the newest: the driver then refuses it and holds the last safe command).
            finished: the command's ``finished`` metadata.
        """
        self.finished = self.finished or bool(finished)
        if seq <= self.seq:
            self.stale += 1
            return False
        self.seq, self.t, self.fields = int(seq), float(t), fields
        return True

    def take(self) -> tuple[bool, Mapping[str, np.ndarray] | None, int, float]:
        """At a period start: (new, fields, seq, t) of the newest command; ``new`` is False when it
        was already taken (or there is none), and then ``fields`` is None."""
        if self.seq <= self.taken_seq:
            return False, None, self.seq, self.t
        self.taken_seq = self.seq
        return True, self.fields, self.seq, self.t
