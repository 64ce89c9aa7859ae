"""Unitree ``unitree_hg`` (humanoid) low-level message types and their fixed packing.

IDL (Unitree's public ``unitree_hg`` IDL, summarised in docs/hardware.md): the types are declared
with ``cyclonedds.idl`` dataclasses, ``@final`` with sequential member ids, under the exact type
names ``unitree_hg.msg.dds_.<Name>`` that a real robot matches on.

* ``rt/lowcmd`` -- :class:`LowCmd_`: ``mode_pr``, ``mode_machine`` (uint8), ``motor_cmd``
  (35 :class:`MotorCmd_`: ``mode`` uint8 (1 = servo, 0 = no torque), ``q`` [rad], ``dq``
  [rad/s], ``tau`` [N m], ``kp`` [N m/rad], ``kd`` [N m s/rad] float32, ``reserve`` uint32),
  ``reserve`` (4 uint32), ``crc`` (uint32). The motor applies ``tau + kp (q - q_meas) + kd (dq -
  dq_meas)``.
* ``rt/lowstate`` -- :class:`LowState_`: ``version`` (2 uint32), ``mode_pr``, ``mode_machine``,
  ``tick`` (uint32, ms), ``imu_state`` (:class:`IMUState_`: quaternion wxyz, gyroscope [rad/s],
  accelerometer [m/s^2] in the IMU frame, rpy [rad], temperature int16), ``motor_state``
  (35 :class:`MotorState_`: ``mode``, ``q``, ``dq``, ``ddq``, ``tau_est``, ``temperature`` (2 int16),
  ``vol``, ``sensor`` (2 uint32), ``motorstate``, ``reserve`` (4 uint32)), ``wireless_remote``
  (40 uint8), ``reserve`` (4 uint32), ``crc``.

The CRC (:mod:`contactflow.hardware.crc`) is computed over the SDK's fixed little-endian layout,
:data:`LOWCMD_FORMAT` (1004 bytes) and :data:`LOWSTATE_FORMAT` (2092 bytes), explicit padding
included; :func:`pack_lowcmd` / :func:`pack_lowstate` produce it and :func:`lowcmd_crc` /
:func:`lowstate_crc` the CRC to put in (or check against) the ``crc`` field.
"""

# no `from __future__ import annotations`: cyclonedds resolves the annotations at run time
import struct
from dataclasses import dataclass, field

from cyclonedds.idl import IdlStruct
from cyclonedds.idl.annotations import autoid, final
from cyclonedds.idl.types import array, float32, int16, uint8, uint32

from contactflow.hardware.crc import FixedLengthCrc

__all__ = ["MotorCmd_", "LowCmd_", "MotorState_", "IMUState_", "LowState_", "N_MOTORS", "LOWCMD_FORMAT",
           "LOWSTATE_FORMAT", "pack_lowcmd", "pack_lowstate", "lowcmd_crc", "lowstate_crc", "TOPIC_LOWCMD",
           "TOPIC_LOWSTATE"]

N_MOTORS = 35
TOPIC_LOWCMD = "rt/lowcmd"
TOPIC_LOWSTATE = "rt/lowstate"

_MOTOR_CMD = "B3x5fI"                   # mode, 3 pad, q dq tau kp kd, reserve: 28 bytes
_MOTOR_STATE = "B3x4f2hf7I"             # mode, 3 pad, q dq ddq tau_est, temperature[2], vol, sensor[2] motorstate reserve[4]: 56
LOWCMD_FORMAT = "<BB2x" + _MOTOR_CMD * N_MOTORS + "5I"
"""struct format of a packed ``LowCmd_`` (1004 bytes): the CRC covers its first 250 words."""
LOWSTATE_FORMAT = "<2IBB2xI" + "13fh2x" + _MOTOR_STATE * N_MOTORS + "40B" + "5I"
"""struct format of a packed ``LowState_`` (2092 bytes): the CRC covers its first 522 words."""
_LOWCMD = struct.Struct(LOWCMD_FORMAT)
_LOWSTATE = struct.Struct(LOWSTATE_FORMAT)
_LOWCMD_CRC = FixedLengthCrc(_LOWCMD.size)
_LOWSTATE_CRC = FixedLengthCrc(_LOWSTATE.size)


@dataclass
@final
@autoid("sequential")
class MotorCmd_(IdlStruct, typename="unitree_hg.msg.dds_.MotorCmd_"):
    """One motor's command (SI units; see the module docstring)."""

    mode: uint8 = 0
    q: float32 = 0.0
    dq: float32 = 0.0
    tau: float32 = 0.0
    kp: float32 = 0.0
    kd: float32 = 0.0
    reserve: uint32 = 0


@dataclass
@final
@autoid("sequential")
class LowCmd_(IdlStruct, typename="unitree_hg.msg.dds_.LowCmd_"):
    """``rt/lowcmd``: the command of the 35 motor slots (see the module docstring)."""

    mode_pr: uint8 = 0
    mode_machine: uint8 = 0
    motor_cmd: array[MotorCmd_, 35] = field(default_factory=lambda: [MotorCmd_() for _ in range(N_MOTORS)])
    reserve: array[uint32, 4] = field(default_factory=lambda: [0, 0, 0, 0])
    crc: uint32 = 0


@dataclass
@final
@autoid("sequential")
class MotorState_(IdlStruct, typename="unitree_hg.msg.dds_.MotorState_"):
    """One motor's state: position [rad], velocity [rad/s], acceleration [rad/s^2], torque estimate [N m]."""

    mode: uint8 = 0
    q: float32 = 0.0
    dq: float32 = 0.0
    ddq: float32 = 0.0
    tau_est: float32 = 0.0
    temperature: array[int16, 2] = field(default_factory=lambda: [0, 0])
    vol: float32 = 0.0
    sensor: array[uint32, 2] = field(default_factory=lambda: [0, 0])
    motorstate: uint32 = 0
    reserve: array[uint32, 4] = field(default_factory=lambda: [0, 0, 0, 0])


@dataclass
@final
@autoid("sequential")
class IMUState_(IdlStruct, typename="unitree_hg.msg.dds_.IMUState_"):
    """Pelvis IMU: quaternion (w, x, y, z) of the IMU in world, gyroscope [rad/s] and accelerometer
    (specific force) [m/s^2] in the IMU frame, roll-pitch-yaw [rad], temperature."""

    quaternion: array[float32, 4] = field(default_factory=lambda: [1.0, 0.0, 0.0, 0.0])
    gyroscope: array[float32, 3] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    accelerometer: array[float32, 3] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    rpy: array[float32, 3] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    temperature: int16 = 0


@dataclass
@final
@autoid("sequential")
class LowState_(IdlStruct, typename="unitree_hg.msg.dds_.LowState_"):
    """``rt/lowstate``: the robot's state (see the module docstring)."""

    version: array[uint32, 2] = field(default_factory=lambda: [0, 0])
    mode_pr: uint8 = 0
    mode_machine: uint8 = 0
    tick: uint32 = 0
    imu_state: IMUState_ = field(default_factory=IMUState_)
    motor_state: array[MotorState_, 35] = field(default_factory=lambda: [MotorState_() for _ in range(N_MOTORS)])
    wireless_remote: array[uint8, 40] = field(default_factory=lambda: [0] * 40)
    reserve: array[uint32, 4] = field(default_factory=lambda: [0, 0, 0, 0])
    crc: uint32 = 0


def _lowcmd_values(msg: LowCmd_) -> list:
    vals = [msg.mode_pr, msg.mode_machine]
    for m in msg.motor_cmd:
        vals += (m.mode, m.q, m.dq, m.tau, m.kp, m.kd, m.reserve)
    vals += msg.reserve
    vals.append(msg.crc)
    return vals


def _lowstate_values(msg: LowState_) -> list:
    imu = msg.imu_state
    vals = [*msg.version, msg.mode_pr, msg.mode_machine, msg.tick, *imu.quaternion, *imu.gyroscope,
            *imu.accelerometer, *imu.rpy, imu.temperature]
    for m in msg.motor_state:
        vals += (m.mode, m.q, m.dq, m.ddq, m.tau_est, *m.temperature, m.vol, *m.sensor, m.motorstate, *m.reserve)
    vals += msg.wireless_remote
    vals += msg.reserve
    vals.append(msg.crc)
    return vals


def pack_lowcmd(msg: LowCmd_) -> bytes:
    """The SDK's fixed little-endian packing of a ``LowCmd_`` (1004 bytes, ``crc`` field last).

    Raises:
        struct.error: a field out of its type's range (e.g. ``mode`` > 255).
    """
    return _LOWCMD.pack(*_lowcmd_values(msg))


def pack_lowstate(msg: LowState_) -> bytes:
    """The SDK's fixed little-endian packing of a ``LowState_`` (2092 bytes, ``crc`` field last).

    Raises:
        struct.error: a field out of its type's range.
    """
    return _LOWSTATE.pack(*_lowstate_values(msg))


# ---------------------------------------------------------------------- fast CDR codec
# The messages have only fixed-size primitive members, so their XCDR1 encoding (what Cyclone's
# Python writer sends for these @final types) is a little-endian struct with natural alignment,
# relative to the end of the 4-byte encapsulation header (00 01 00 00 = CDR little-endian). The
# generic cyclonedds serializer walks 1000+ members per message in Python (~0.5 ms);
# `_cdr_format` compiles the same layout once into a struct, and tests check the bytes are
# identical to cyclonedds' own `serialize` and `deserialize` both ways.
_CDR_HEADER = bytes([0, 1, 0, 0])


def _cdr_format(codes: str) -> struct.Struct:
    """Little-endian struct of primitive ``codes`` (no padding given) with XCDR1 alignment."""
    out, off = ["<"], 0
    for c in codes:
        size = struct.calcsize("<" + c)
        pad = (-off) % size
        out.append("x" * pad + c)
        off += pad + size
    return struct.Struct("".join(out))


def _codes(fmt: str) -> str:
    """The primitive codes of a struct format, padding removed and counts expanded."""
    out, num = [], ""
    for ch in fmt.lstrip("<"):
        if ch.isdigit():
            num += ch
            continue
        if ch != "x":
            out.append(ch * (int(num) if num else 1))
        num = ""
    return "".join(out)


_LOWCMD_CDR = _cdr_format(_codes(LOWCMD_FORMAT))
_LOWSTATE_CDR = _cdr_format(_codes(LOWSTATE_FORMAT))


def _lowcmd_from_values(v) -> LowCmd_:
    msg = LowCmd_.__new__(LowCmd_)
    msg.mode_pr, msg.mode_machine = v[0], v[1]
    mcs = []
    for i in range(N_MOTORS):
        m = MotorCmd_.__new__(MotorCmd_)
        m.mode, m.q, m.dq, m.tau, m.kp, m.kd, m.reserve = v[2 + 7 * i: 9 + 7 * i]
        mcs.append(m)
    msg.motor_cmd = mcs
    k = 2 + 7 * N_MOTORS
    msg.reserve, msg.crc = list(v[k:k + 4]), v[k + 4]
    return msg


def _lowstate_from_values(v) -> LowState_:
    msg = LowState_.__new__(LowState_)
    msg.version, msg.mode_pr, msg.mode_machine, msg.tick = list(v[0:2]), v[2], v[3], v[4]
    imu = IMUState_.__new__(IMUState_)
    imu.quaternion, imu.gyroscope, imu.accelerometer, imu.rpy = list(v[5:9]), list(v[9:12]), list(v[12:15]), list(v[15:18])
    imu.temperature = v[18]
    msg.imu_state = imu
    mss, k = [], 19
    for _ in range(N_MOTORS):
        m = MotorState_.__new__(MotorState_)
        m.mode, m.q, m.dq, m.ddq, m.tau_est = v[k:k + 5]
        m.temperature, m.vol, m.sensor, m.motorstate, m.reserve = list(v[k + 5:k + 7]), v[k + 7], list(v[k + 8:k + 10]), v[k + 10], list(v[k + 11:k + 15])
        mss.append(m)
        k += 15
    msg.motor_state = mss
    msg.wireless_remote = bytes(v[k:k + 40])  # as cyclonedds decodes uint8 arrays
    msg.reserve, msg.crc = list(v[k + 40:k + 44]), v[k + 44]
    msg._packed = _LOWSTATE.pack(*v)  # the SDK packing of these values, for the CRC check
    return msg


def _install_codec(cls, cdr: struct.Struct, values, from_values) -> None:
    generic_ser, generic_deser = cls.serialize, cls.deserialize.__func__

    def serialize(self, use_version_2=None, buffer=None, endianness=None, **kw):
        if use_version_2 or buffer is not None or endianness is not None or kw:
            return generic_ser(self, use_version_2=use_version_2, buffer=buffer, endianness=endianness, **kw)
        return _CDR_HEADER + cdr.pack(*values(self))

    def deserialize(klass, data, has_header=True, use_version_2=None, **kw):
        data = bytes(data)
        if has_header and not kw and use_version_2 is None and data[:4] == _CDR_HEADER and len(data) == 4 + cdr.size:
            return from_values(cdr.unpack_from(data, 4))
        return generic_deser(klass, data, has_header=has_header, use_version_2=use_version_2, **kw)

    cls.serialize = serialize
    cls.deserialize = classmethod(deserialize)
    cls.generic_serialize = generic_ser


_install_codec(LowCmd_, _LOWCMD_CDR, _lowcmd_values, _lowcmd_from_values)
_install_codec(LowState_, _LOWSTATE_CDR, _lowstate_values, _lowstate_from_values)


def lowcmd_crc(msg: LowCmd_) -> int:
    """The CRC the ``crc`` field of ``msg`` must hold (the field's own value is not covered)."""
    return _LOWCMD_CRC(pack_lowcmd(msg))


def lowstate_crc(msg: LowState_) -> int:
    """The CRC the ``crc`` field of ``msg`` must hold (the field's own value is not covered).

    A message just received (fast codec) carries its packing; it is used when present."""
    packed = msg.__dict__.get("_packed")
    return _LOWSTATE_CRC(packed if packed is not None else pack_lowstate(msg))
