"""The logic of the ``mujoco_driver`` node, without dora: simulator, command safety, external
wrenches, payloads and the end-of-run rules, for position robots (Talos) and PD robots (G1).

The robot file's ``actuation`` chooses the simulator and the command contract
(``contactflow.messages.port_specs``):

* ``position``: :class:`~contactflow.sim.mujoco_robot.MujocoRobotSim`, command ``theta_cmd``,
  held by :class:`~contactflow.safety.CommandHold`;
* ``pd``: :class:`~contactflow.sim.pd_robot.PDRobotSim`, command ``q_target``, ``kp``, ``kd``,
  ``tau_ff`` (Unitree ``MotorCmd``), held by :class:`~contactflow.safety.PDCommandHold` with the
  simulator's gain limits and the effort limits.

A command that is malformed, non-finite, out of the joint limits (or, PD, with gains out of
range) is not applied: the last safe command stays in force and the rejection is counted and
logged once per reason. External wrenches (``external_wrench`` contract: ``wrench.<link>``
(6,) [f; tau] [N, N m], world frame, at the link's centre of mass) are applied with MuJoCo's
``xfrc_applied`` for the next tick.
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

__all__ = ["parse_payload", "sim_config_class", "RobotDriver", "DriverStatus"]

log = logging.getLogger("contactflow.mujoco_driver")


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
        fell: the robot fell (base below the fall height, or the state diverged).
    """

    ticks: int = 0
    rejected_commands: int = 0
    degraded_commands: int = 0
    malformed_wrenches: int = 0
    fell: bool = False


class RobotDriver:
    """Simulated robot driver: the part of ``mujoco_driver`` that does not need dora.

    Args:
        robot: the robot description.
        sim_config: ``SimConfig`` (position robots) or ``PDSimConfig`` (PD robots); ``None`` =
            defaults.
        payloads: unmodelled point masses welded to links (simulation only).
        environment: walls / supports (position robots with an ``environment:`` section).
        command_timeout_s: a command older than this is reported as stale (realtime mode).
        max_sim_time_s: the run ends at this simulated time [s].

    Raises:
        ConfigError: wrong configuration class, unknown wrench link.
        ModelError: the model cannot be built.
    """

    def __init__(self, robot: Robot, sim_config=None, *, payloads: Sequence[PointMass] = (), environment=None,
                 command_timeout_s: float = 0.1, max_sim_time_s: float = 600.0):
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
            self.hold: CommandHold = PDCommandHold(
                robot.theta_default, robot.K, robot.kd, None, timeout_s=command_timeout_s, q_min=robot.q_min,
                q_max=robot.q_max, kp_max=self.sim.kp_max, kd_max=self.sim.kd_max, tau_max=robot.tau_max)
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
        self._reasons: set[str] = set()
        self.readings: SensorReadings = self.sim.readings()

    def _body_id(self, name: str) -> int:
        import mujoco

        return mujoco.mj_name2id(self.sim.model, mujoco.mjtObj.mjOBJ_BODY, name)

    # ------------------------------------------------------------------ run
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
        else:
            self.readings = self.sim.step(self.hold.command(now))
        self.status.ticks += 1
        fell = self.sim.fell()
        if fell and not self.status.fell:
            log.error("robot fell at t = %.3f s (base height %.3f m, threshold %.2f m); ending the run",
                      self.readings.t, self.readings.base_height, self.sim.fall_height_m)
        self.status.fell = self.status.fell or fell
        return self.readings, fell or self.readings.t >= self.max_sim_time_s - 1e-9
