"""``unitree_emulator``: the project's MuJoCo G1 playing a Unitree G1 on DDS (loopback).

Started by ``contactflow sim-robot g1`` and by the tests. At every physics step (the robot file's
``mujoco.timestep_s``, 0.002 s = 500 Hz), real-time paced:

1. take the ``rt/lowcmd`` messages received since the last step; a message whose CRC
   (:func:`contactflow.hardware.unitree_msgs.lowcmd_crc`) does not match, or whose gains the
   simulator refuses, is rejected and counted; the newest valid one becomes the motor command;
2. step the physics with, per joint (motor slot from ``unitree_motor_slots``), the motor's law
   ``tau + kp (q - q_meas) + kd (dq - dq_meas)`` evaluated at every physics step
   (:class:`contactflow.sim.pd_robot.PDRobotSim`, the same model builder as ``mujoco_driver``;
   ``dq`` enters as the feed-forward ``kd dq``); motor ``mode`` 0 = no torque;
3. publish ``rt/lowstate`` (CRC, IMU quaternion wxyz / gyroscope / accelerometer / rpy of the
   pelvis IMU, motor ``q``, ``dq``, ``tau_est`` = the applied torque, ``tick`` [ms]).

Before the first valid command the physics does not run: the robot stays at its default posture
(as if held by its harness or the vendor's stand controller while the graph starts) and its state
is published with ``tick`` advancing; the physics starts with the first valid command. After
that, like the real motors, the last command stays in force when commands stop. Counters and the first damping command's
arrival time (``time.monotonic``, the clock the tests compare with the driver's) are in
:class:`EmulatorStatus`. ``corrupt_state_every`` corrupts the CRC of every k-th state (fault
injection for the driver's tests).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from pathlib import Path

import numpy as np
import pinocchio as pin

from contactflow.errors import ContractError
from contactflow.robot import Robot
from contactflow.sim.pd_robot import PDRobotSim, PDSimConfig

__all__ = ["EmulatorStatus", "UnitreeEmulator"]

log = logging.getLogger("contactflow.unitree_emulator")


@dataclasses.dataclass
class EmulatorStatus:
    """Counters of an emulator run.

    Attributes:
        steps: physics steps (from the first valid command on). states: ``rt/lowstate`` published. states_corrupted: of which with a
        deliberately wrong CRC. commands: valid ``rt/lowcmd`` received. commands_bad_crc: rejected
        for the CRC. commands_invalid: rejected by the simulator (gains out of its stability
        limits). overruns: steps that started more than 10 ms late (the clock was reset).
        first_command_mono_s / first_damping_mono_s: ``time.monotonic()`` of the first valid
        command and of the first damping command (every enabled motor kp = 0, kd > 0, after a command
        with some kp > 0: the start-up ramp also begins at kp = 0).
        t_s: simulated time [s]. fell: the base went below the robot file's fall height.
        fell_in_damping: it did so under the driver's damping command (kp = 0 after a stiff command: the
            driver's end of run, when a robot in damping mode sinks, or a fault it latched, which the
            driver's log names).
        remote_pressed_mono_s: ``time.monotonic()`` of the first state showing ``press_remote``.
        damping_mono_s: ``time.monotonic()`` of every damping command that follows a stiff one (each
        entry into damping: watchdog, latch).
    """

    steps: int = 0
    states: int = 0
    states_corrupted: int = 0
    commands: int = 0
    commands_bad_crc: int = 0
    commands_invalid: int = 0
    overruns: int = 0
    first_command_mono_s: float | None = None
    first_damping_mono_s: float | None = None
    t_s: float = 0.0
    fell: bool = False
    fell_in_damping: bool = False
    remote_pressed_mono_s: float | None = None
    damping_mono_s: list = dataclasses.field(default_factory=list)


class UnitreeEmulator:
    """A G1 on DDS (module docstring).

    Args:
        robot: a PD robot with ``unitree_motor_slots`` (``load_robot("g1")`` or ``"g1_29dof"``).
        domain_id: DDS domain. interface: network interface (``lo``).
        mode_machine: the ``mode_machine`` reported in ``rt/lowstate``.
        corrupt_state_every: 0, or k: every k-th state is sent with a wrong CRC.
        scenario: a teleop scenario file (or a bare name, no ``.yaml``, in ``robots/<robot>/scenarios``) whose
            ``wrenches:`` events are applied to the links (:class:`contactflow.lac.wrench_injector.
            WrenchInjector` of :func:`contactflow.lac.teleop.load_teleop_scenario`, the same source
            as the ``wrench_injector`` node): the profile sampled on the control grid
            (``control_rate_hz``) and held for the control period, as the simulated graph applies
            it, on the emulator's clock: simulated time since the first valid command. None: no
            external wrench.
        press_remote: buttons of the wireless remote (``"L2+B"``, :mod:`contactflow.hardware.remote`)
            shown pressed in ``rt/lowstate`` from ``press_at_s`` [s] of simulated time (since the first
            command) on ('': never).
        harness_s: for this long [s] of simulated time after the first command, the base is held at
            its start pose (feet on the ground, the harness carrying the weight: the start-up
            procedure of docs/hardware.md, during which the driver ramps the gains up from damping);
            then released. 0: no harness.

    Raises:
        ConfigError: bad slots, interface or DDS domain.
    """

    def __init__(self, robot: Robot, domain_id: int = 1, interface: str = "lo", *, mode_machine: int = 1,
                 corrupt_state_every: int = 0, harness_s: float = 0.0, press_remote: str = "",
                 press_at_s: float = 0.0, scenario: str | Path | None = None):
        from contactflow.hardware.dds import UnitreeChannels
        from contactflow.hardware.unitree import motor_slots
        from contactflow.hardware.unitree_msgs import TOPIC_LOWCMD, TOPIC_LOWSTATE, LowCmd_, LowState_

        self.robot = robot
        self.slots = motor_slots(robot)
        dt = float(robot.raw.get("mujoco", {}).get("timestep_s", 0.002))
        self.sim = PDRobotSim(PDSimConfig(physics_dt_s=dt, control_dt_s=dt), robot)
        self.dt = dt
        self.channels = UnitreeChannels(domain_id, interface, TOPIC_LOWCMD, LowCmd_, TOPIC_LOWSTATE, LowState_)
        self.state = LowState_(mode_machine=int(mode_machine))
        self._cmd_type = LowCmd_
        self.corrupt_state_every = int(corrupt_state_every)
        self.status = EmulatorStatus()
        self.readings = self.sim.reset()
        self.harness_s = float(harness_s)
        self._prev_stiff = False
        self._damping_since_t: float | None = None  # sim time the driver's damping began (kp = 0 after a stiff command)
        self._base0 = (self.sim.data.qpos[:7].copy(), self.sim.data.time)
        self._tick_ms = 0
        from contactflow.hardware.remote import parse_combo, remote_bytes

        self._press = remote_bytes(parse_combo(press_remote, "sim-robot --press-remote")) if press_remote else None
        self.press_at_s, self.press_remote = float(press_at_s), press_remote
        self.injector = None
        if scenario is not None:
            from contactflow.lac.teleop import load_teleop_scenario
            from contactflow.lac.wrench_injector import WrenchInjector, wrench_links

            self.injector = WrenchInjector(load_teleop_scenario(scenario, robot).wrenches, wrench_links(robot))
            self._control_dt = 1.0 / float(robot.raw.get("control_rate_hz", 50.0))
            for e in self.injector.events:
                log.info("wrench event on %s from %g s to %g s (emulator clock: since the first command)", e.link,
                         e.start_s, e.end_s)
        n = robot.n
        self._cmd = self.sim.check_command(robot.theta_default, robot.K, robot.kd, np.zeros(n))

    def _accept(self, msg) -> None:
        from contactflow.hardware.unitree_msgs import lowcmd_crc

        if lowcmd_crc(msg) != msg.crc:
            self.status.commands_bad_crc += 1
            if self.status.commands_bad_crc == 1:
                log.warning("rt/lowcmd with a wrong CRC rejected (counted)")
            return
        mc = msg.motor_cmd
        on = np.array([mc[s].mode != 0 for s in self.slots])
        g = lambda name: np.array([getattr(mc[s], name) for s in self.slots], dtype=float)  # noqa: E731
        q, dq, tau, kp, kd = g("q"), g("dq"), g("tau"), g("kp"), g("kd")
        kp, kd = np.where(on, kp, 0.0), np.where(on, kd, 0.0)
        tff = np.where(on, tau + kd * dq, 0.0)
        try:
            cmd = self.sim.check_command(q, kp, kd, tff)
        except ContractError as exc:
            self.status.commands_invalid += 1
            log.warning("rt/lowcmd refused by the simulator: %s", exc)
            return
        now = time.monotonic()
        self.status.commands += 1
        if self.status.first_command_mono_s is None:
            self.status.first_command_mono_s = now
            log.info("first valid rt/lowcmd received")
        stiff = bool(np.any(kp[on] > 0))
        # damping = kp 0, kd > 0 AFTER a stiff command (the driver's start-up ramp also begins at kp 0)
        if self._prev_stiff and np.any(on) and not stiff and np.all(kd[on] > 0):
            if self.status.first_damping_mono_s is None:
                self.status.first_damping_mono_s = now
                log.info("damping command received")
            self.status.damping_mono_s.append(now)
            self._damping_since_t = float(self.readings.t)
        elif stiff:
            self._damping_since_t = None
        self._prev_stiff = stiff
        self._cmd = cmd

    def _publish(self) -> None:
        from contactflow.hardware.unitree_msgs import lowstate_crc

        r, st = self.readings, self.state
        x, y, z, w = (float(a) for a in r.imu_quat)
        imu = st.imu_state
        imu.quaternion = [w, x, y, z]
        imu.gyroscope = [float(a) for a in r.imu_gyro]
        imu.accelerometer = [float(a) for a in r.imu_acc]
        imu.rpy = [float(a) for a in pin.rpy.matrixToRpy(pin.Quaternion(w, x, y, z).toRotationMatrix())]
        q, dq, tau = r.q[7:].tolist(), r.v[6:].tolist(), r.tau.tolist()
        ms = st.motor_state
        for j, s in enumerate(self.slots.tolist()):
            m = ms[s]
            m.mode, m.q, m.dq, m.tau_est = 1, q[j], dq[j], tau[j]
        st.tick = self._tick_ms & 0xFFFFFFFF
        if self._press is not None and self.status.steps > 0 and r.t >= self.press_at_s:
            if self.status.remote_pressed_mono_s is None:
                self.status.remote_pressed_mono_s = time.monotonic()
                log.info("wireless remote: %s pressed", self.press_remote)
            st.wireless_remote = self._press
        st.crc = lowstate_crc(st)
        self.status.states += 1
        if self.corrupt_state_every and self.status.states % self.corrupt_state_every == 0:
            st.crc ^= 0x1
            self.status.states_corrupted += 1
        self.channels.write(st)

    def step(self) -> None:
        """One physics step: newest valid command, physics, publish the state."""
        for msg in self.channels.reader.take(N=64):
            if isinstance(msg, self._cmd_type):  # not an InvalidSample (a writer went away)
                self._accept(msg)
        self._tick_ms += int(round(self.dt * 1000))
        if self.status.first_command_mono_s is None:
            self._publish()  # held until the first command
            return
        if self.injector is not None:  # the wrench of the control tick the step is in (zero-order hold)
            t = self.sim.data.time - self._base0[1]
            t_k = math.floor(t / self._control_dt + 1e-9) * self._control_dt
            for link, w in self.injector.wrenches(t_k).items():
                self.sim.set_external_wrench(link, w)
        self.readings = self.sim.step_command(self._cmd)
        if self.readings.t - self._base0[1] < self.harness_s:  # the harness holds the base
            d = self.sim.data
            d.qpos[:7] = self._base0[0]
            d.qvel[:6] = 0.0
        self.status.steps += 1
        self.status.t_s = self.readings.t
        if self.sim.fell() and not self.status.fell:
            self.status.fell = True
            if self._damping_since_t is not None:  # a robot in damping mode sinks: after a run's end, expected
                self.status.fell_in_damping = True
                log.warning("the emulated robot fell at t = %.3f s, under the driver's damping command since t = %.3f s "
                            "(the driver's end of run, when a robot in damping mode sinks, or a fault it latched: the "
                            "driver's log says which)", self.readings.t, self._damping_since_t)
            else:
                log.warning("the emulated robot fell at t = %.3f s", self.readings.t)
        self._publish()

    def run(self, duration_s: float = float("inf"), stop=None) -> EmulatorStatus:
        """Run real-time paced for ``duration_s`` [s] of wall time or until ``stop()`` is True."""
        self._publish()
        t_end = time.monotonic() + duration_s
        deadline = time.monotonic()
        while time.monotonic() < t_end and not (stop is not None and stop()):
            deadline += self.dt
            delay = deadline - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            elif delay < -0.01:
                self.status.overruns += 1
                deadline = time.monotonic()
            self.step()
        return self.status

    def write_status(self, path: str | Path) -> None:
        """Write :class:`EmulatorStatus` as JSON to ``path``."""
        Path(path).write_text(json.dumps(dataclasses.asdict(self.status), indent=2))
