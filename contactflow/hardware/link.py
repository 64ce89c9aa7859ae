"""The 500 Hz side of the hardware driver: ``rt/lowstate`` in, ``rt/lowcmd`` out, on its own thread.

:class:`UnitreeLink` owns the DDS channels, the :class:`~contactflow.hardware.unitree.UnitreeCommandShaper`
(safety) and the estimators. Its thread waits for ``rt/lowstate``; each state is CRC-checked
(a mismatch is rejected and counted in ``status.states_bad_crc``; a state with a non-finite
joint position / velocity / IMU value or a zero quaternion in ``states_nonfinite``; a state whose
``tick`` does not advance in ``states_stale``: none of them feeds the estimators or the targets,
nor refreshes the lost-state timer), and a ``rt/lowcmd`` is sent
right after it (and, if states stop, every ``1 / lowcmd_rate_hz`` anyway), built from the
newest graph command, with ``mode_machine`` / ``mode_pr`` copied from the newest state. Nothing is
sent before a state was seen. Once commands are being sent (not in mode ``wait``, when a gap in
the state stream cannot hurt), no state for ``state_timeout_s`` latches damping mode and sets
:attr:`UnitreeLink.failure` (naming the topic, the domain and the interface), and so does a
state whose IMU tilt exceeds ``fall_tilt_rad`` (the fall rule: mode ``fell``, checked on every
accepted state in this thread, so the damping ``rt/lowcmd`` answers that very state). The graph side
(dora node or test) calls :meth:`offer_command` and :meth:`readings`.

Latency record (for ``benchmarks/bench_unitree_latency.py``): per sent command, the time from
taking the state it answers to the end of ``write`` [s], and the send times.
"""

from __future__ import annotations

import logging
import math
import threading
import time

import numpy as np

from contactflow.errors import ConfigError
from contactflow.hardware.remote import combo_masks, combo_pressed, parse_combo
from contactflow.robot import Robot
from contactflow.safety import base_tilt_rad
from contactflow.hardware.unitree import (BaseStateEstimator, SoleWrenchEstimator, UnitreeCommandShaper,
                                          UnitreeDriverConfig, fill_lowcmd, motor_slots, reading_from_lowstate,
                                          readings_from_state, state_problem)

__all__ = ["UnitreeLink"]

log = logging.getLogger("contactflow.unitree_driver")


class UnitreeLink:
    """DDS link to a Unitree robot with the driver's safety layer (module docstring).

    Args:
        robot: a PD robot with ``unitree_motor_slots``.
        config: :class:`UnitreeDriverConfig`.
        domain_id: DDS domain (0 on the robot). interface: network interface.
        record_latency: keep per-command latency samples (benchmark).

    Raises:
        ConfigError: bad slots, damping values, interface or DDS domain.
    """

    def __init__(self, robot: Robot, config: UnitreeDriverConfig, domain_id: int, interface: str, *,
                 record_latency: bool = False):
        from contactflow.hardware.dds import UnitreeChannels
        from contactflow.hardware.unitree_msgs import TOPIC_LOWCMD, TOPIC_LOWSTATE, LowCmd_, LowState_

        if robot.actuation != "pd":
            raise ConfigError(f"{robot.file_label()}: the Unitree driver needs 'actuation: pd'")
        self.robot, self.config = robot, config
        self.domain_id, self.interface = domain_id, interface
        self.slots = motor_slots(robot)
        self.shaper = UnitreeCommandShaper(robot, config)
        self.status = self.shaper.status
        self.base = BaseStateEstimator(robot, config.velocity_cutoff_hz)
        self.wrenches = SoleWrenchEstimator(robot)
        self.channels = UnitreeChannels(domain_id, interface, TOPIC_LOWSTATE, LowState_, TOPIC_LOWCMD, LowCmd_)
        self._cmd = LowCmd_()
        self.latest = None  # LowStateReading
        self.latest_mono: float | None = None
        self.first_state_mono: float | None = None
        self.failure = ""
        self._mode_machine, self._mode_pr = 0, config.mode_pr
        self._last_tick: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="unitree-lowcmd", daemon=True)
        self.record_latency = record_latency
        self.latency_s: list[float] = []
        self.send_mono: list[float] = []
        self._crc_logged = self._stale_logged = self._nonfinite_logged = False
        self._watch = None  # (ProcessMonitor, describe) of the command source's process
        # the e-stop buttons' bit masks (the config checked the names): two ANDs per state; None: no remote e-stop
        combo = parse_combo(config.remote_estop)
        self._remote_estop = combo_masks(combo) if combo else None
        self.watch_failure = ""

    def watch_source(self, monitor, describe) -> None:
        """Poll ``monitor`` (:class:`contactflow.hardware.process_watch.ProcessMonitor` of the command
        source's process) before every ``rt/lowcmd``: once it says the process is dying, latch
        ``command_lost`` with the reason ``describe(why)`` (also in :attr:`watch_failure`), so the
        same ``rt/lowcmd`` already carries damping. ``None`` stops watching (a normal end under way)."""
        self._watch = None if monitor is None else (monitor, describe)

    # ------------------------------------------------------------------ graph side
    def start(self) -> None:
        """Start the 500 Hz thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread (no more ``rt/lowcmd``)."""
        self._stop.set()
        self._thread.join(timeout=1.0)

    def wait_first_state(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` [s] for a valid ``rt/lowstate``; True if one came."""
        t_end = time.monotonic() + timeout_s
        while self.latest is None and time.monotonic() < t_end:
            time.sleep(0.005)
        return self.latest is not None

    def offer_command(self, fields, now_s: float | None = None, repeat: bool = False) -> bool:
        """Offer a ``joint_command`` (fields dict or None when malformed); see :meth:`UnitreeCommandShaper.offer`."""
        return self.shaper.offer(fields, time.monotonic() if now_s is None else now_s, repeat)

    def latch(self, mode: str, reason: str) -> None:
        """Latch damping mode until the process ends (:meth:`UnitreeCommandShaper.latch`) and wake the
        500 Hz thread: the damping ``rt/lowcmd`` is written at once, not at the next state. Thread-safe."""
        self.shaper.latch(mode, reason, time.monotonic())
        self.channels.wake()

    def estop(self, reason: str) -> None:
        """Latch damping mode (e-stop) until the process ends."""
        self.latch("estop", reason)

    def readings(self, t: float):
        """:class:`SensorReadings` at time ``t`` [s] from the newest state (None before the first)."""
        r = self.latest
        return None if r is None else readings_from_state(r, t, self.base, self.wrenches)

    # ------------------------------------------------------------------ 500 Hz thread
    def _take_states(self, now: float) -> bool:
        from contactflow.hardware.unitree_msgs import LowState_, lowstate_crc

        got = False
        for msg in self.channels.reader.take(N=16):
            if not isinstance(msg, LowState_):  # InvalidSample: the writer went away (disposed)
                continue
            if lowstate_crc(msg) != msg.crc:
                self.status.states_bad_crc += 1
                if not self._crc_logged:
                    self._crc_logged = True
                    log.warning("rt/lowstate with a wrong CRC rejected (counted in states_bad_crc)")
                continue
            if self._last_tick is not None and not 0 < (int(msg.tick) - self._last_tick) & 0xFFFFFFFF < 1 << 31:
                # the robot's ms counter did not advance (a repeated or old message): not a sign of life,
                # the lost-state timer is not refreshed
                self.status.states_stale += 1
                if not self._stale_logged:
                    self._stale_logged = True
                    log.warning("rt/lowstate whose tick did not advance (%d after %d) ignored (counted in "
                                "states_stale)", msg.tick, self._last_tick)
                continue
            reading = reading_from_lowstate(msg, self.slots)
            bad = state_problem(reading)
            if bad:
                self.status.states_nonfinite += 1
                if not self._nonfinite_logged:
                    self._nonfinite_logged = True
                    log.warning("rt/lowstate rejected (counted in states_nonfinite): %s", bad)
                continue
            self._last_tick = int(msg.tick)
            self.status.states += 1
            if self._remote_estop and not self.shaper.latched and combo_pressed(msg.wireless_remote, self._remote_estop):
                self.shaper.latch("estop", f"wireless remote: {self.config.remote_estop} pressed", now)
            self.latest = reading
            limit = self.config.fall_tilt_rad
            if limit is not None and not self.shaper.latched and self.shaper.mode != "wait":
                tilt = base_tilt_rad(reading.quat_xyzw)
                if tilt > limit:
                    why = (f"the robot fell: IMU tilt {math.degrees(tilt):.0f} deg > "
                           f"fall_tilt_rad {self.config.fall_tilt_rad:g} rad (rt/lowstate tick {reading.tick_ms}); "
                           "damping mode latched")
                    if self.shaper.latch("fell", why, now):  # another latch (e-stop, end) may have come first
                        self.failure = self.status.failure = why
                        log.error("%s", why)
            if self.first_state_mono is not None and int(msg.mode_machine) != self._mode_machine:
                log.warning("rt/lowstate mode_machine changed %d -> %d", self._mode_machine, msg.mode_machine)
            self._mode_machine, self._mode_pr = int(msg.mode_machine), int(msg.mode_pr)
            self.latest_mono = now
            if self.first_state_mono is None:
                self.first_state_mono = now
                log.info("first rt/lowstate received (mode_machine %d, mode_pr %d)", msg.mode_machine, msg.mode_pr)
            got = True
        return got

    def _loop(self) -> None:
        from contactflow.hardware.unitree_msgs import lowcmd_crc

        period = 1.0 / self.config.lowcmd_rate_hz
        next_send = time.monotonic() + period
        cfg = self.config
        try:
            while not self._stop.is_set():
                wait = next_send - time.monotonic()
                if wait > 0:
                    self.channels.wait(wait)
                t_state = time.monotonic()
                fresh = self._take_states(t_state)
                now = time.monotonic()
                if self.latest_mono is not None and now - self.latest_mono > cfg.state_timeout_s \
                        and self.shaper.latched not in ("lost_state", "fell") and self.shaper.mode != "wait":
                    self.failure = (f"lost rt/lowstate: no message for {1e3 * (now - self.latest_mono):.0f} ms "
                                    f"(timeout {1e3 * cfg.state_timeout_s:.0f} ms) on DDS domain {self.domain_id}, "
                                    f"interface {self.interface!r}")
                    self.status.failure = self.failure
                    self.shaper.latch("lost_state", self.failure, now)
                    log.error("%s: damping mode latched", self.failure)
                # a latch not on the wire yet is sent now (the thread was woken), not at the next period
                urgent = bool(self.shaper.latched) and self.status.latched_lowcmd_mono_s is None
                watch = self._watch
                if watch is not None and not self.shaper.latched and (why := watch[0].dying()):
                    self.watch_failure = watch[1](why)
                    self.shaper.latch("command_lost", self.watch_failure, now)
                    urgent = True
                if not fresh and now < next_send and not urgent:
                    continue
                next_send = max(next_send + period, now + 0.5 * period) if not fresh else now + period
                if self.latest is None:
                    continue
                targets = self.shaper.targets(now, self.latest.q, self._mode_pr, self._mode_machine)
                if targets is None:
                    continue
                fill_lowcmd(self._cmd, targets, self.slots, self._mode_machine, cfg.mode_pr)
                self._cmd.crc = lowcmd_crc(self._cmd)
                self.channels.write(self._cmd)
                self.status.lowcmds += 1
                if self.shaper.latched and self.status.latched_lowcmd_mono_s is None \
                        and targets.mode == self.shaper.latched:
                    self.status.latched_lowcmd_mono_s = time.monotonic()
                if self.record_latency:
                    t_done = time.monotonic()
                    self.send_mono.append(t_done)
                    if fresh:
                        self.latency_s.append(t_done - t_state)
        except Exception as exc:  # noqa: BLE001 - the graph side must learn why the link died
            self.failure = self.status.failure = f"unitree lowcmd thread failed: {type(exc).__name__}: {exc}"
            log.exception("unitree lowcmd thread failed")
            self._damping_burst()

    def _damping_burst(self) -> None:
        """Last words of a dying 500 Hz thread: damping ``rt/lowcmd`` (kp = 0, kd = the damping kd,
        tau = 0) for ``exit_damping_s`` (at least one message), so the motors do not keep a stiff
        target nobody updates. Nothing is sent before a state was seen."""
        from contactflow.hardware.unitree import MotorTargets
        from contactflow.hardware.unitree_msgs import lowcmd_crc

        if self.latest is None:
            return
        try:
            self.shaper.latch("link_failed", self.failure, time.monotonic())
            n = self.robot.n
            q = self.latest.q
            t = MotorTargets(np.where(np.isfinite(q), q, 0.0), np.zeros(n), self.shaper.hold.kd_damping.copy(),
                             np.zeros(n), "link_failed")
            period = 1.0 / self.config.lowcmd_rate_hz
            t_end = time.monotonic() + self.config.exit_damping_s
            while True:
                fill_lowcmd(self._cmd, t, self.slots, self._mode_machine, self.config.mode_pr)
                self._cmd.crc = lowcmd_crc(self._cmd)
                self.channels.write(self._cmd)
                self.status.lowcmds += 1
                if time.monotonic() >= t_end or self._stop.is_set():
                    break
                time.sleep(period)
            log.error("lowcmd thread: damping sent for %.2f s before the thread ended", self.config.exit_damping_s)
        except Exception:  # noqa: BLE001 - nothing more can be done from this thread
            log.exception("lowcmd thread: the damping burst failed too")
