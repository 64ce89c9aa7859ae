"""The logic of the ``unitree_driver`` node, without dora and without DDS.

A Unitree G1 speaks ``rt/lowstate`` (joints + IMU, 500 Hz) and ``rt/lowcmd`` (per motor
``q, dq, tau, kp, kd``, 500 Hz) (:mod:`contactflow.hardware.unitree_msgs`). This module turns a
``LowState_`` into the project's ``sensors`` readings and the graph's PD ``joint_command`` into
``LowCmd_`` messages, with the safety layer a robot owner expects:

* **Motor slots** (:func:`motor_slots`): joints are mapped BY NAME to the 35 motor slots with the
  robot file's ``unitree_motor_slots`` (Unitree's G1JointIndex: 29-DoF slots 0-28; the 23-DoF
  robot keeps those numbers, its absent joints' slots stay empty).
* **Base state** (:class:`BaseStateEstimator`, ``base_state`` = :data:`BASE_STATE`): LowState has no
  base position. Orientation = the IMU quaternion; base position from leg kinematics assuming
  BOTH soles stay where they were at start-up on flat ground (standing, teleoperated upper body;
  not valid while stepping); base linear velocity = the time derivative of that position from the
  gyroscope and the motor velocities (analytic, low-pass filtered); angular velocity = the gyroscope (the G1's IMU is in the pelvis, its axes
  taken as the pelvis frame's).
* **Sole wrenches** (:class:`SoleWrenchEstimator`): the G1 has no foot force sensors; each sole's
  wrench is estimated quasi-statically from the six leg joint torques (``tau_est``):
  ``J_sole^T w = g_leg(q) - tau_leg`` (LOCAL sole frame, leg subtree gravity, no inertia).
* **Safety** (:class:`UnitreeCommandShaper`, built on :class:`contactflow.safety.PDCommandHold`):
  nothing is sent before a state was seen and before the first valid command (the robot stays
  under the vendor's mode or its harness; not while the robot reports a ``mode_pr`` other than
  pitch/roll); then a start-up ramp of the target from the measured posture to the commands over
  ``startup_ramp_s`` with the command's gains (``startup_ramp_gains``: also kp, kd and feed-forward
  from damping with the same factor, for a robot started hanging); gains capped per joint
  (:func:`gain_caps`); command watchdog (no valid command for ``command_timeout_s`` ->
  damping mode ``kp = 0``, ``kd`` = the robot file's ``damping_mode_kd_nms_per_rad``, ``tau = 0``,
  with a gain ramp on recovery); non-finite / out-of-limit commands refused
  (``PDCommandHold``); per-joint clamps of the sent target to the joint limits and of the torque
  at the measured state to the effort limits; lost ``rt/lowstate`` for ``state_timeout_s`` ->
  damping, latched, and a named failure; an e-stop that latches damping; the fall rule (IMU tilt
  beyond ``fall_tilt_rad`` once commands are sent -> damping latched, the run fails). Each transition is
  logged once with its reason and counted (:class:`HardwareStatus`).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
from collections.abc import Mapping

import numpy as np
import pinocchio as pin

from contactflow.errors import ConfigError
from contactflow.hardware.remote import DEFAULT_ESTOP_COMBO
from contactflow.robot import Robot
from contactflow.safety import FALL_TILT_RAD, PDCommandHold
from contactflow.sim.driver import damping_mode_kd
from contactflow.sim.mujoco_robot import SensorReadings

__all__ = ["BASE_STATE", "SOLE_WRENCH", "motor_slots", "UnitreeDriverConfig", "LowStateReading", "reading_from_lowstate", "state_problem", "gain_caps",
           "BaseStateEstimator", "SoleWrenchEstimator", "HardwareStatus", "MotorTargets", "UnitreeCommandShaper",
           "fill_lowcmd", "readings_from_state"]

log = logging.getLogger("contactflow.unitree_driver")

BASE_STATE = "estimated: IMU orientation + leg kinematics with both soles fixed since start-up (flat ground)"
"""``base_state`` of the hardware driver's configuration metadata (see :class:`BaseStateEstimator`)."""
SOLE_WRENCH = "estimated: quasi-static from the leg joint torques tau_est (J^T w = g - tau)"
"""``sole_wrench`` of the hardware driver's configuration metadata (see :class:`SoleWrenchEstimator`)."""

SLOTS_KEY = "unitree_motor_slots"
MODE_MACHINE_KEY = "unitree_mode_machine"
"""Optional robot-file key: list of accepted ``mode_machine`` values (the robot's hardware revision;
Unitree's G1 description lists several per DoF count). Absent: the reported value is only logged."""
N_SLOTS = 35


def motor_slots(robot: Robot) -> np.ndarray:
    """(n,) motor slot of each joint (robot joint order), from the robot file's ``unitree_motor_slots``.

    The key maps joint name -> slot (0-34), read BY NAME.

    Raises:
        ConfigError: key missing, a joint without slot, an unknown joint, a slot out of 0-34 or
            used twice (the message names the file and the joints).
    """
    src = f"{robot.file_label()}: {SLOTS_KEY}"
    raw = robot.raw.get(SLOTS_KEY)
    if not isinstance(raw, dict):
        raise ConfigError(f"{src}: missing or not a mapping joint -> motor slot (needed by the Unitree driver)")
    unknown = sorted(set(raw) - set(robot.joint_names))
    missing = [j for j in robot.joint_names if j not in raw]
    if unknown or missing:
        raise ConfigError(f"{src}: unknown joint(s) {unknown}, joint(s) without slot {missing}")
    slots = np.array([raw[j] for j in robot.joint_names])
    if slots.dtype.kind not in "iu" or np.any((slots < 0) | (slots >= N_SLOTS)):
        raise ConfigError(f"{src}: slots must be integers in 0-{N_SLOTS - 1}, got {slots.tolist()}")
    if len(set(slots.tolist())) != len(slots):
        raise ConfigError(f"{src}: a slot is used twice: {slots.tolist()}")
    return slots.astype(int)


GAIN_CAP_KEY = "unitree_gain_cap_factor"
GAIN_CAP_DEFAULT = 3.0


def gain_caps(robot: Robot, kd_damping: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(kp_max, kd_max), (n,) each [N m/rad, N m s/rad]: the largest gains a command may ask for on hardware.

    ``factor`` x the robot file's nominal per-joint ``kp`` / ``kd`` (``factor`` = the robot file's
    ``unitree_gain_cap_factor``, default 3: room for a controller that stiffens a joint, not for a
    wrong unit or a runaway gain; the simulator's stability-derived caps do not apply to real motors);
    ``kd_max`` is at least the damping-mode ``kd_damping``. A command above a cap is refused (the
    last safe one stays, :class:`contactflow.safety.PDCommandHold`).

    Raises:
        ConfigError: the factor is not a number >= 1.
    """
    f = robot.raw.get(GAIN_CAP_KEY, GAIN_CAP_DEFAULT)
    if isinstance(f, bool) or not isinstance(f, (int, float)) or not (np.isfinite(f) and f >= 1.0):
        raise ConfigError(f"{robot.file_label()}: {GAIN_CAP_KEY}: expected a number >= 1, got {f!r}")
    kp_max = float(f) * np.asarray(robot.K, float)
    kd_max = np.maximum(float(f) * np.asarray(robot.kd, float), np.asarray(kd_damping, float))
    return kp_max, kd_max


@dataclasses.dataclass(frozen=True, kw_only=True)
class UnitreeDriverConfig:
    """Configuration of the hardware driver (times in seconds).

    Attributes:
        command_timeout_s: no valid joint command for this long -> damping mode (watchdog).
        state_timeout_s: no ``rt/lowstate`` for this long -> damping (latched) and failure.
        first_state_timeout_s: the driver fails when no ``rt/lowstate`` came this long after start.
        startup_ramp_s: interpolation from the measured posture to the commands [s] (>= 0).
        startup_ramp_gains: also ramp kp and tau_ff from 0 (and kd from the damping value) with the
            position's factor. Off (default): the command's gains and feed-forward apply from the first
            tick, so a robot already standing on its feet keeps standing (ramping the stiffness of a
            standing G1 from zero dropped the emulated robot in about one run in three). On: for a
            robot started hanging in its harness with the feet off the ground.
        recovery_ramp_s: gain ramp after damping mode (:class:`PDCommandHold`).
        lowcmd_rate_hz: ``rt/lowcmd`` rate (500 Hz on the G1).
        velocity_cutoff_hz: low-pass cutoff of the base velocity estimate (None: unfiltered; a 10 Hz
            filter's lag made the LAC expert oscillate in the emulator, the analytic estimate needs none
            there; on hardware the motors' dq noise may want one).
        exit_damping_s: damping sent before the driver process exits (the robot must not keep a
            stale stiff command; afterwards the vendor's mode or the harness takes over).
        mode_pr: the ankle/waist mode the driver's targets are written for, sent in every ``rt/lowcmd``
            (0 = pitch/roll, the only one implemented: the targets are joint angles of the robot
            file). The driver refuses to leave ``wait`` while the robot reports another one.
        estop_timeout_s: an ``estop`` input that has sent a message and then stays silent this long
            (its node hung: alive, so dora does not close the input) latches damping: an e-stop that
            cannot be heard is not an e-stop. The e-stop node sends every control tick (20 ms).
        remote_estop: buttons of the robot's wireless remote (``rt/lowstate`` ``wireless_remote``,
            :mod:`contactflow.hardware.remote`) that latch damping, joined by ``+`` (default
            ``L2+B``, the remote's own damping combination); ``none``: no e-stop on the remote.
        fall_tilt_rad: the fall rule [rad]: once the driver has left ``wait``, a state whose IMU
            tilt (the angle between the IMU's z axis and the vertical, :func:`contactflow.safety.base_tilt_rad`
            of the ``rt/lowstate`` quaternion) exceeds it latches damping (mode ``fell``)
            and ends the run as a failure, as the simulated driver's fall does (a fallen robot must
            not keep pushing stiff joints against the floor). Default
            :data:`contactflow.safety.FALL_TILT_RAD` (1.0 rad, 57 deg: the tilt by which a G1 run's
            summary and the evaluation call a fall); None: no fall rule.
    """

    command_timeout_s: float = 0.1
    state_timeout_s: float = 0.04
    first_state_timeout_s: float = 10.0
    startup_ramp_s: float = 2.0
    startup_ramp_gains: bool = False
    recovery_ramp_s: float = 1.0
    lowcmd_rate_hz: float = 500.0
    velocity_cutoff_hz: float | None = None
    exit_damping_s: float = 0.5
    mode_pr: int = 0
    estop_timeout_s: float = 0.25
    remote_estop: str = DEFAULT_ESTOP_COMBO
    fall_tilt_rad: float | None = FALL_TILT_RAD

    def __post_init__(self):
        from contactflow.hardware.remote import parse_combo

        parse_combo(self.remote_estop, "unitree_driver: remote_estop")
        f = self.fall_tilt_rad
        if f is not None and not (isinstance(f, (int, float)) and 0.0 < f <= math.pi):
            raise ConfigError(f"unitree_driver: fall_tilt_rad must be in (0, pi] rad or None (no fall rule), got {f!r}")
        for name in ("command_timeout_s", "state_timeout_s", "first_state_timeout_s", "lowcmd_rate_hz",
                     "velocity_cutoff_hz", "estop_timeout_s"):
            x = getattr(self, name)
            if x is None and name == "velocity_cutoff_hz":
                continue
            if not (np.isfinite(x) and x > 0):
                raise ConfigError(f"unitree_driver: {name} must be > 0, got {x}")
        for name in ("startup_ramp_s", "recovery_ramp_s", "exit_damping_s"):
            x = getattr(self, name)
            if not (np.isfinite(x) and x >= 0):
                raise ConfigError(f"unitree_driver: {name} must be >= 0, got {x}")
        if self.mode_pr != 0:
            raise ConfigError(f"unitree_driver: mode_pr must be 0 (pitch/roll; the A/B parallel mode is not "
                              f"implemented), got {self.mode_pr}")


@dataclasses.dataclass(frozen=True)
class LowStateReading:
    """What one ``LowState_`` says about the robot's joints, in robot joint order.

    Attributes:
        q, dq, tau: (n,) joint positions [rad], velocities [rad/s], torque estimates [N m].
        quat_xyzw: (4,) IMU orientation in world (xyzw, pinocchio order; LowState sends wxyz).
        gyro: (3,) angular velocity in the IMU frame [rad/s]. acc: (3,) specific force [m/s^2].
        tick_ms: the robot's ms counter. mode_machine, mode_pr: as reported.
    """

    q: np.ndarray
    dq: np.ndarray
    tau: np.ndarray
    quat_xyzw: np.ndarray
    gyro: np.ndarray
    acc: np.ndarray
    tick_ms: int
    mode_machine: int
    mode_pr: int


def state_problem(reading: LowStateReading) -> str:
    """Why ``reading`` must not be used ('' if it may): a non-finite joint position or velocity, IMU
    quaternion (or one of norm ~0), gyroscope or accelerometer value (the field and joint indices named)."""
    for name in ("q", "dq", "quat_xyzw", "gyro", "acc"):
        bad = ~np.isfinite(getattr(reading, name))
        if np.any(bad):
            return f"non-finite {name} at index {np.flatnonzero(bad).tolist()} (tick {reading.tick_ms})"
    return ""


def reading_from_lowstate(msg, slots: np.ndarray) -> LowStateReading:
    """A :class:`LowStateReading` from a ``LowState_`` (``slots``: (n,) from :func:`motor_slots`)."""
    ms = msg.motor_state
    q = np.array([ms[s].q for s in slots], dtype=float)
    dq = np.array([ms[s].dq for s in slots], dtype=float)
    tau = np.array([ms[s].tau_est for s in slots], dtype=float)
    w, x, y, z = msg.imu_state.quaternion
    quat = np.array([x, y, z, w], dtype=float)
    nq = np.linalg.norm(quat)
    quat = quat / nq if nq > 1e-6 else np.full(4, np.nan)  # a zero quaternion is no orientation
    return LowStateReading(q, dq, tau, quat, np.array(msg.imu_state.gyroscope, dtype=float),
                           np.array(msg.imu_state.accelerometer, dtype=float), int(msg.tick), int(msg.mode_machine),
                           int(msg.mode_pr))


class BaseStateEstimator:
    """Base pose and twist from the IMU and leg kinematics (flat ground, soles fixed since start-up).

    At :meth:`reset`, with the measured joints and IMU orientation R, the soles' positions
    relative to the base ``r_c = R p_c^B(q)`` fix the world: the base is put at the x, y of the
    robot file's default configuration with the mean sole height at z = 0, and the sole
    positions ``s_c = p_base + r_c`` are kept. Then ``p_base = mean_c(s_c - R p_c^B(q))``; the
    base velocity is the time derivative of that position, taken analytically (no finite-difference
    lag): ``v_W = -mean_c(omega_W x r_c + R J_c(q) dq)`` with the gyroscope ``omega`` and the
    motors' ``dq``, then low-passed (first order, ``cutoff_hz``; ``None`` = raw); ``v`` in the base
    frame ``R^T v_W``; ``omega`` = the gyroscope (the IMU frame taken as the pelvis frame). Valid
    while both feet stay flat where they were (not while stepping).

    Args:
        robot: the robot (pinocchio model with the sole frames of its plane contacts).
        cutoff_hz: velocity low-pass cutoff [Hz] (None: no filter).
    """

    def __init__(self, robot: Robot, cutoff_hz: float | None = None):
        self.robot = robot
        self.model = robot.model
        self.data = self.model.createData()
        self.frames = [robot.frame_id(cs.frame) for cs in robot.contacts.values() if cs.type == "plane"]
        if not self.frames:
            raise ConfigError(f"{robot.file_label()}: the base estimator needs plane contacts (soles)")
        self.cutoff_hz = None if cutoff_hz is None else float(cutoff_hz)
        self.soles_W: np.ndarray | None = None
        self._p_prev: np.ndarray | None = None
        self._t_prev = 0.0
        self._v_W = np.zeros(3)

    def _relative(self, joints: np.ndarray, quat_xyzw: np.ndarray) -> np.ndarray:
        q = np.concatenate([np.zeros(3), quat_xyzw, joints])
        pin.framesForwardKinematics(self.model, self.data, q)
        return np.array([self.data.oMf[f].translation for f in self.frames])

    def reset(self, joints: np.ndarray, quat_xyzw: np.ndarray) -> None:
        """Fix the soles in the world from the current measurement (``joints`` (n,) [rad])."""
        rel = self._relative(joints, quat_xyzw)
        p0 = np.array([self.robot.q_default[0], self.robot.q_default[1], -float(np.mean(rel[:, 2]))])
        self.soles_W = p0 + rel
        self._p_prev = None
        self._v_W = np.zeros(3)

    @property
    def ready(self) -> bool:
        return self.soles_W is not None

    def update(self, t: float, joints: np.ndarray, quat_xyzw: np.ndarray, gyro: np.ndarray,
               dq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(q (7 + n,), v (6 + n,)) at time ``t`` [s] (pinocchio conventions; v in the base frame).

        Raises:
            RuntimeError: before :meth:`reset`.
        """
        if self.soles_W is None:
            raise RuntimeError("BaseStateEstimator.update before reset")
        m, d = self.model, self.data
        qb = np.concatenate([np.zeros(3), quat_xyzw, joints])
        vb = np.concatenate([np.zeros(3), gyro, dq])
        pin.forwardKinematics(m, d, qb, vb)
        pin.updateFramePlacements(m, d)
        rel = np.array([d.oMf[f].translation for f in self.frames])
        p = np.mean(self.soles_W - rel, axis=0)
        # soles at rest: 0 = v_base + (omega x r_c + R J_c dq), the bracket being the sole velocity
        # of a base without linear velocity (world axes)
        v_kin = -np.mean([pin.getFrameVelocity(m, d, f, pin.LOCAL_WORLD_ALIGNED).linear for f in self.frames], axis=0)
        if self._p_prev is not None and t > self._t_prev and self.cutoff_hz is not None:
            dt = t - self._t_prev
            a = dt / (dt + 1.0 / (2.0 * np.pi * self.cutoff_hz))
            self._v_W = (1.0 - a) * self._v_W + a * v_kin
        else:
            self._v_W = v_kin
        self._p_prev, self._t_prev = p, t
        R = d.oMi[1].rotation
        q = np.concatenate([p, quat_xyzw, joints])
        v = np.concatenate([R.T @ self._v_W, gyro, dq])
        return q, v


class SoleWrenchEstimator:
    """Quasi-static sole wrenches from the leg joint torques.

    For each plane contact c with sole frame S_c, the joints of its leg (the joints between the
    base and the sole) satisfy, at rest, ``g_leg(q) = tau_leg + J_c,leg^T w_c`` (the
    floating-base equation of motion without inertia; ``g_leg`` only involves the leg's links),
    so ``w_c = lstsq(J_c,leg^T, g_leg - tau_leg)`` with ``J`` the LOCAL frame Jacobian:
    ``w_c`` (6,) = [f; tau] on the robot in the sole LOCAL frame [N, N m], torque about the frame
    origin (the ``wrench.<c>`` contract of ``sensors``). Inertial terms and joint friction are
    ignored (errors of a few N while the legs are still; more while they move).

    Args:
        robot: the robot.
    """

    def __init__(self, robot: Robot):
        self.model = robot.model
        self.data = self.model.createData()
        self.contacts = {}
        for c, cs in robot.contacts.items():
            if cs.type != "plane":
                continue
            fid = robot.frame_id(cs.frame)
            jid = self.model.frames[fid].parentJoint
            idx = []
            while jid > 1:  # up to the free-flyer (joint 1)
                idx.append(self.model.joints[jid].idx_v)
                jid = self.model.parents[jid]
            self.contacts[c] = (fid, np.array(sorted(idx)))

    def estimate(self, q: np.ndarray, tau: np.ndarray) -> dict[str, np.ndarray]:
        """Contact name -> (6,) wrench [N, N m] (sole LOCAL frame) from ``q`` (7 + n,) and ``tau`` (n,) [N m]."""
        m, d = self.model, self.data
        g = pin.computeGeneralizedGravity(m, d, q)
        pin.computeJointJacobians(m, d, q)
        pin.updateFramePlacements(m, d)
        out = {}
        for c, (fid, iv) in self.contacts.items():
            J = pin.getFrameJacobian(m, d, fid, pin.LOCAL)[:, iv]
            w, *_ = np.linalg.lstsq(J.T, g[iv] - np.asarray(tau)[iv - 6], rcond=1e-6)
            out[c] = w
        return out


@dataclasses.dataclass
class HardwareStatus:
    """Counters and transitions of a hardware run (reported at the end and in the metadata).

    Attributes:
        states: ``rt/lowstate`` messages accepted. states_bad_crc: rejected for their CRC.
        states_stale: messages whose ``tick`` did not advance (repeated/old): ignored, they do not
            refresh the lost-state timer.
        states_nonfinite: messages rejected for a non-finite joint/IMU value (:func:`state_problem`).
        lowcmds: ``rt/lowcmd`` messages sent. commands: joint commands accepted from the graph.
        command_repeats: of those, keep-alive re-sends of a command already received (``repeat``
            metadata: the controller is alive between its ticks; nodes/_runtime.py KeepAlive).
        rejected_commands: joint commands refused (malformed, non-finite, out of limits).
        clamped: lowcmds in which a target or torque was clamped.
        damping_entries: entries into damping mode (watchdog, lost state, e-stop, fall).
        mode_refusals: reported ``mode_pr`` / ``mode_machine`` refused (the driver stays in ``wait``).
        transitions: list of (time [s], mode, reason), one per transition.
        failure: '' or why the driver gave up (lost state, no state at start).
        latched_mono_s: ``time.monotonic()`` when damping was latched (e-stop, lost state, command
            source closed, end), None before. latched_lowcmd_mono_s: when the first ``rt/lowcmd``
            with the latched damping targets was written (the latency of the latch to the wire).
    """

    states: int = 0
    states_bad_crc: int = 0
    states_stale: int = 0
    states_nonfinite: int = 0
    lowcmds: int = 0
    commands: int = 0
    command_repeats: int = 0
    rejected_commands: int = 0
    clamped: int = 0
    damping_entries: int = 0
    mode_refusals: int = 0
    transitions: list = dataclasses.field(default_factory=list)
    failure: str = ""
    latched_mono_s: float | None = None
    latched_lowcmd_mono_s: float | None = None

    def summary(self) -> dict:
        d = dataclasses.asdict(self)
        d["transitions"] = [f"{t:.3f} s {m}: {r}" for t, m, r in self.transitions]
        return d


@dataclasses.dataclass(frozen=True)
class MotorTargets:
    """What to send to the motors (robot joint order, (n,) each): ``q`` [rad], ``kp`` [N m/rad],
    ``kd`` [N m s/rad], ``tau`` [N m]; ``dq`` targets are always 0. ``mode`` is the driver mode."""

    q: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    tau: np.ndarray
    mode: str


class UnitreeCommandShaper:
    """Joint commands of the graph -> safe motor targets at the ``rt/lowcmd`` rate.

    Modes (:attr:`mode`; module docstring): ``wait`` (no state or no command yet: nothing is
    sent), ``startup`` (ramp from the posture measured at the first command: ``q = (1 - s) q0 + s
    q_cmd``, ``s = (t - t0) / startup_ramp_s``, with the command's gains and feed-forward; with
    ``startup_ramp_gains`` also ``kp = s kp_cmd``, ``kd = (1 - s) kd_damping + s kd_cmd``, ``tau = s
    tau_cmd``, for a robot started hanging; the torque clamp still applies), then the modes of
    :class:`PDCommandHold` (``normal``, ``damping`` on the watchdog, ``ramp`` on recovery), and the
    latched ``estop`` / ``fell`` / ``lost_state`` / ``command_lost`` / ``end`` (damping until the process ends). Thread-safe: the graph
    thread offers commands, the 500 Hz thread asks for targets.

    Clamps, each counted in ``status.clamped``: the sent ``q`` within ``[q_min, q_max]``; ``tau``
    within ``+-tau_max``; and ``q`` moved toward the measured ``q_meas`` so that
    ``|kp (q - q_meas) + tau| <= tau_max`` (the motor would saturate beyond).

    Args:
        robot: a PD robot (``actuation: pd``) with ``damping_mode_kd_nms_per_rad``.
        config: :class:`UnitreeDriverConfig`.
    """

    def __init__(self, robot: Robot, config: UnitreeDriverConfig):
        self.robot, self.config = robot, config
        kdd = damping_mode_kd(robot)
        self.kp_max, self.kd_max = gain_caps(robot, kdd)
        self.hold = PDCommandHold(robot.theta_default, robot.K, robot.kd, None, timeout_s=config.command_timeout_s,
                                  q_min=robot.q_min, q_max=robot.q_max, tau_max=robot.tau_max, kd_damping=kdd,
                                  recovery_ramp_s=config.recovery_ramp_s, kp_max=self.kp_max, kd_max=self.kd_max)
        self.status = HardwareStatus()
        self.mode = "wait"
        self._lock = threading.Lock()
        self._q0: np.ndarray | None = None
        self._t0 = 0.0
        self._latched = ""
        self._ramp_unfinished = False
        self._reasons: set[str] = set()
        self.last_command_s: float | None = None
        mm = robot.raw.get(MODE_MACHINE_KEY)
        if mm is not None and not (isinstance(mm, list) and mm and all(isinstance(x, int) for x in mm)):
            raise ConfigError(f"{robot.file_label()}: {MODE_MACHINE_KEY}: expected a list of integers, got {mm!r}")
        self.mode_machine_allowed: list[int] | None = mm
        self.mode_refusal = ""

    def _modes_refused(self, mode_pr: int | None, mode_machine: int | None) -> str:
        """'' if the reported modes allow leaving ``wait``, else why not (logged once per reason)."""
        why = ""
        if mode_pr is not None and int(mode_pr) != self.config.mode_pr:
            why = (f"the robot reports mode_pr {int(mode_pr)}, the driver only implements mode_pr "
                   f"{self.config.mode_pr} (pitch/roll): nothing is sent")
        elif (mode_machine is not None and self.mode_machine_allowed is not None
              and int(mode_machine) not in self.mode_machine_allowed):
            why = (f"the robot reports mode_machine {int(mode_machine)}, {self.robot.file_label()}: "
                   f"{MODE_MACHINE_KEY} allows {self.mode_machine_allowed}: nothing is sent")
        if why and why != self.mode_refusal:
            log.error("%s", why)
            self.status.mode_refusals += 1
        self.mode_refusal = why
        return why

    def _transition(self, now_s: float, mode: str, reason: str) -> None:
        if mode == self.mode:
            return
        self.mode = mode
        self.status.transitions.append((now_s, mode, reason))
        if mode in ("damping", "estop", "fell", "lost_state", "command_lost", "end", "link_failed"):
            self.status.damping_entries += 1
            log.warning("%s: damping mode (kp = 0, kd = damping, tau = 0): %s", mode, reason)
        else:
            log.info("mode %s: %s", mode, reason)

    def offer(self, fields: Mapping[str, np.ndarray] | None, now_s: float, repeat: bool = False) -> bool:
        """Offer a ``joint_command`` (fields ``q_target``, ``kp``, ``kd``, ``tau_ff``) received at ``now_s``;
        ``repeat``: a keep-alive re-send of the newest one (validated and timed the same; counted apart).

        Returns:
            True if accepted (refused ones are counted and logged once per reason).
        """
        with self._lock:
            ok = self.hold.offer(fields, now_s)
            if ok:
                self.status.commands += 1
                self.status.command_repeats += bool(repeat)
                self.last_command_s = now_s
            else:
                self.status.rejected_commands += 1
                if self.hold.last_reason not in self._reasons:
                    self._reasons.add(self.hold.last_reason)
                    log.warning("joint command refused (the last safe one stays): %s", self.hold.last_reason)
            return ok

    def latch(self, mode: str, reason: str, now_s: float) -> bool:
        """Latch damping mode until the process ends: ``mode`` ``estop``, ``fell`` (the fall rule),
        ``lost_state``, ``command_lost`` (the command source stopped) or ``end`` (end of the run). The first
        latch wins (its reason is the one reported). Returns whether this call latched."""
        with self._lock:
            if self._latched:
                return False
            self._latched = mode
            self.status.latched_mono_s = now_s
            self._transition(now_s, mode, reason)
            return True

    @property
    def latched(self) -> str:
        return self._latched

    def targets(self, now_s: float, q_meas: np.ndarray, mode_pr: int | None = None,
                mode_machine: int | None = None) -> MotorTargets | None:
        """The motor targets at ``now_s`` [s] given the measured joints ``q_meas`` (n,) [rad] and the
        ``mode_pr`` / ``mode_machine`` the robot reports (None: not checked).

        Returns:
            None while nothing may be sent (mode ``wait``; it is not left while the reported
            ``mode_pr`` differs from the configured one, or ``mode_machine`` is not one the robot
            file's ``unitree_mode_machine`` lists).
        """
        r = self.robot
        with self._lock:
            if self._latched:  # damping at the measured posture
                q, kp, kd, tau = q_meas, np.zeros(r.n), self.hold.kd_damping, np.zeros(r.n)
            elif self.mode == "wait":
                if self.hold.mode == "start" or self._modes_refused(mode_pr, mode_machine):
                    return None
                self._q0, self._t0 = np.array(q_meas, dtype=float), now_s
                self._transition(now_s, "startup", f"first command: ramp from the measured posture over "
                                                   f"{self.config.startup_ramp_s:.2f} s")
                q, kp, kd, tau = self._startup(now_s)
            elif self.mode == "startup":
                q, kp, kd, tau = self._startup(now_s)
            elif self._ramp_unfinished and self.hold.mode != "damping":  # offer() left damping
                # commands are back after a watchdog during the start-up ramp: the position ramp starts
                # again from the posture measured now (the gains ramp back from damping as after any
                # watchdog: PDCommandHold's recovery ramp)
                self._ramp_unfinished = False
                self._q0, self._t0 = np.array(q_meas, dtype=float), now_s
                self._transition(now_s, "startup", f"commands resumed during the start-up ramp: ramp again from "
                                                   f"the measured posture over {self.config.startup_ramp_s:.2f} s")
                q, kp, kd, tau = self._startup(now_s)
            else:
                q, kp, kd, tau = self.hold.pd_command(now_s)
                hm = self.hold.mode
                if hm != self.mode:
                    self._transition(now_s, hm, self.hold.damping_reason if hm == "damping" else "commands resumed"
                                     if hm == "ramp" else "recovery ramp done")
                if hm == "damping":
                    q = q_meas
            q, tau, clamped = self._clamp(np.asarray(q, float), np.asarray(kp, float), np.asarray(tau, float), q_meas)
            self.status.clamped += int(clamped)
            return MotorTargets(q, np.asarray(kp, float), np.asarray(kd, float), tau, self.mode)

    def _startup(self, now_s: float):
        q_c, kp, kd, tau = self.hold.pd_command(now_s)
        if self.hold.mode == "damping":  # the watchdog also runs during the start-up ramp
            self._transition(now_s, "damping", self.hold.damping_reason)
            self._ramp_unfinished = True  # resumed from the measured posture when commands come back
            return self.hold.theta, np.zeros_like(kp), self.hold.kd_damping, np.zeros_like(kp)
        T = self.config.startup_ramp_s
        s = 1.0 if T == 0 else min(max((now_s - self._t0) / T, 0.0), 1.0)
        if s >= 1.0:
            self._transition(now_s, "normal", "start-up ramp done")
        # the damping-recovery ramp's blend (PDCommandHold): stiffness and feed-forward from 0, kd from
        # the damping value, with the same factor as the position
        q = (1.0 - s) * self._q0 + s * q_c
        if not self.config.startup_ramp_gains:
            return q, kp, kd, tau
        kdd = self.hold.kd_damping
        return q, s * kp, (1.0 - s) * kdd + s * kd, s * tau

    def _clamp(self, q, kp, tau, q_meas):
        r = self.robot
        q1 = np.clip(q, r.q_min, r.q_max)
        tau1 = np.clip(tau, -r.tau_max, r.tau_max)
        # |kp (q - q_meas) + tau| <= tau_max: limit the position error per joint
        with np.errstate(divide="ignore", invalid="ignore"):
            lo = np.where(kp > 0, q_meas + (-r.tau_max - tau1) / kp, -np.inf)
            hi = np.where(kp > 0, q_meas + (r.tau_max - tau1) / kp, np.inf)
        q2 = np.clip(q1, lo, hi)
        clamped = bool(np.any((q2 != q) & (kp > 0)) or np.any(tau1 != tau))  # a target under kp = 0 pulls nothing
        return q2, tau1, clamped


def fill_lowcmd(msg, targets: MotorTargets, slots: np.ndarray, mode_machine: int, mode_pr: int) -> None:
    """Write ``targets`` into a ``LowCmd_`` ``msg`` (slots of the robot's joints: ``mode`` 1; the
    other slots: ``mode`` 0, zeros); ``mode_machine`` / ``mode_pr`` as the robot reported them.
    The ``crc`` field is left to the caller (:func:`contactflow.hardware.unitree_msgs.lowcmd_crc`)."""
    msg.mode_machine = int(mode_machine)
    msg.mode_pr = int(mode_pr)
    used = set(slots.tolist())
    for i, m in enumerate(msg.motor_cmd):
        if i not in used:
            m.mode, m.q, m.dq, m.tau, m.kp, m.kd = 0, 0.0, 0.0, 0.0, 0.0, 0.0
    q, kp, kd, tau = targets.q.tolist(), targets.kp.tolist(), targets.kd.tolist(), targets.tau.tolist()
    for j, s in enumerate(slots.tolist()):
        m = msg.motor_cmd[s]
        m.mode, m.q, m.dq, m.tau, m.kp, m.kd = 1, q[j], 0.0, tau[j], kp[j], kd[j]


def readings_from_state(reading: LowStateReading, t: float, base: BaseStateEstimator,
                        wrenches: SoleWrenchEstimator) -> SensorReadings:
    """:class:`SensorReadings` (the simulator's type, so ``sensor_values`` builds ``sensors``) from a
    LowState reading at time ``t`` [s]: base from ``base`` (reset on first use), wrenches from
    ``wrenches``, no hand positions or forces."""
    if not base.ready:
        base.reset(reading.q, reading.quat_xyzw)
    q, v = base.update(t, reading.q, reading.quat_xyzw, reading.gyro, reading.dq)
    return SensorReadings(t=t, q=q, v=v, tau=reading.tau.copy(), wrenches=wrenches.estimate(q, reading.tau),
                          imu_quat=reading.quat_xyzw.copy(), imu_gyro=reading.gyro.copy(), imu_acc=reading.acc.copy(),
                          hand_positions={}, base_height=float(q[2]))
