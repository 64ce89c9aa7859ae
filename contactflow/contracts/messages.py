"""Port contracts: the one declaration of every message that crosses a dataflow edge.

Every contactflow message is a flat Arrow ``float64`` array (one message = one array) whose layout
is declared here as named fields with a shape, unit and frame. Flat arrays cost a few
microseconds to send and receive at 500 Hz, unlike nested structs; the layout gives them names
again on both sides (:meth:`PortSpec.pack` / :meth:`PortSpec.unpack`), in the recorder and in
the catalogue. Message metadata carries ``seq`` (tick index, int), ``t`` (simulation or robot
time [s]) and ``finished`` (bool, the run is ending).

Effector-indexed fields are named ``<field>.<effector>``; wrenches are always 6 values
``[f; tau]`` (point contacts use the first 3 and carry zeros in the rest). Per-effector flag
vectors (``enable``, ``push``, ``switching``...) hold one value per effector in robot-file order.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Mapping

import numpy as np

from contactflow.errors import ContractError

__all__ = ["Field", "PortSpec", "port_specs"]


@dataclasses.dataclass(frozen=True)
class Field:
    """One named block of a flat message.

    Attributes:
        name: field name (``q``, ``wrench.left_foot``...).
        size: number of float64 values.
        unit: SI unit, or ``"-"`` for dimensionless/flags.
        frame: frame the values are expressed in, if any.
        description: one line for the catalogue.
    """

    name: str
    size: int
    unit: str
    frame: str = ""
    description: str = ""


@dataclasses.dataclass(frozen=True)
class PortSpec:
    """Contract of a port: an ordered tuple of fields packed into one float64 array.

    Attributes:
        name: contract name (``sensors``, ``joint_command``...).
        fields: ordered fields.
        rate_hz: nominal rate.
        description: one line for the catalogue.
    """

    name: str
    fields: tuple[Field, ...]
    rate_hz: float
    description: str = ""

    @property
    def size(self) -> int:
        return self._layout[2]

    @property
    def slices(self) -> dict[str, slice]:
        return dict(self._layout[0])

    @functools.cached_property
    def _layout(self) -> tuple[tuple[tuple[str, slice], ...], frozenset[str], int]:
        # (name, slice) pairs, field names, total size: computed once (pack/unpack run at 500 Hz)
        pairs, i = [], 0
        for f in self.fields:
            pairs.append((f.name, slice(i, i + f.size)))
            i += f.size
        return tuple(pairs), frozenset(f.name for f in self.fields), i

    def pack(self, values: Mapping[str, np.ndarray | float]) -> np.ndarray:
        """Pack named values into a flat (size,) float64 vector.

        Raises:
            ContractError: a field is missing, has the wrong size, or a key is unknown.
        """
        pairs, names, size = self._layout
        if len(values) != len(names) or not names.issuperset(values):
            unknown = set(values) - names
            if unknown:
                raise ContractError(f"port {self.name!r}: unknown field(s) {sorted(unknown)}")
        out = np.empty(size)
        for name, sl in pairs:
            try:
                v = values[name]
            except KeyError:
                raise ContractError(f"port {self.name!r}: missing field {name!r}") from None
            n = sl.stop - sl.start
            if not (type(v) is np.ndarray and v.ndim == 1 and v.shape[0] == n):
                v = np.asarray(v, dtype=np.float64).reshape(-1)
                if v.size != n:
                    raise ContractError(f"port {self.name!r}: field {name!r} has {v.size} values, expected {n}")
            out[sl] = v
        return out

    def decode(self, value, *, check_finite: bool = True) -> dict[str, np.ndarray]:
        """Unpack a received message: the Arrow array dora delivers (or an array-like) -> named fields.

        The one decoder of every node's inputs: :meth:`vector` then :meth:`unpack`, so a message
        from a peer is checked before any of its values is used.

        Args:
            value: a ``pyarrow.Array`` / ``ChunkedArray`` (a dora input's ``value``) or a numpy array.
            check_finite: refuse NaN / inf (the default); False keeps them (a node that reports them).

        Returns:
            field name -> (size,) float64 view.

        Raises:
            ContractError: another Arrow type, null values, wrong size or dtype, or a non-finite
                value (with ``check_finite``), naming the port and what was expected. Never
                another exception type.
        """
        return self.unpack(self.vector(value), check_finite=check_finite)

    def vector(self, value) -> np.ndarray:
        """The flat numpy vector of a received message (not yet checked against the layout).

        Arrow arrays must be ``float64`` without nulls: ``to_numpy`` would silently turn the nulls
        of an ``int64`` or ``float64`` array into NaN, and fails on a union type.

        Raises:
            ContractError: another Arrow type, null values, an Arrow array that cannot be read, or
                (not Arrow) a value that is not an array.
        """
        if not (hasattr(value, "null_count") and hasattr(value, "type")):  # not pyarrow
            try:
                return np.asarray(value)
            except (ValueError, TypeError) as exc:  # ragged or otherwise not an array
                raise ContractError(f"port {self.name!r}: expected {self.size} float64 values, got "
                                    f"{type(value).__name__} ({exc})") from None
        if str(value.type) != "double":
            raise ContractError(f"port {self.name!r}: expected an Arrow float64 array, got {value.type}")
        if value.null_count:
            raise ContractError(f"port {self.name!r}: {value.null_count} null value(s) in a float64 message")
        try:
            return value.to_numpy() if hasattr(value, "chunks") else value.to_numpy(zero_copy_only=False)
        except Exception as exc:  # noqa: BLE001 - any Arrow failure is a malformed message
            raise ContractError(f"port {self.name!r}: unreadable Arrow message: {exc}") from None

    def unpack(self, vec: np.ndarray, *, check_finite: bool = True) -> dict[str, np.ndarray]:
        """Split a received flat vector into named fields (views).

        Raises:
            ContractError: wrong size or dtype, or (with ``check_finite``) a non-finite value, naming
                the port and the field.
        """
        pairs, _, size = self._layout
        if type(vec) is not np.ndarray:
            try:
                vec = np.asarray(vec)
            except (ValueError, TypeError) as exc:  # ragged or otherwise not an array
                raise ContractError(f"port {self.name!r}: expected {size} float64 values, got {type(vec).__name__} "
                                    f"({exc})") from None
        if vec.dtype != np.float64:
            raise ContractError(f"port {self.name!r}: expected float64 values, got {vec.dtype}")
        if vec.ndim != 1 or vec.size != size:
            raise ContractError(f"port {self.name!r}: expected {size} float64 values, got shape {vec.shape}")
        out = {name: vec[sl] for name, sl in pairs}
        if check_finite and not np.isfinite(vec).all():
            bad = [k for k, v in out.items() if not np.isfinite(v).all()]
            raise ContractError(f"port {self.name!r}: non-finite value(s) in field(s) {bad}")
        return out

    def describe(self) -> dict:
        """Plain-data description (recorded in manifests and the catalogue)."""
        return {
            "name": self.name,
            "arrow_type": f"float64[{self.size}]",
            "rate_hz": self.rate_hz,
            "fields": [dataclasses.asdict(f) for f in self.fields],
        }


def port_specs(robot, rate_hz: float | None = None) -> dict[str, PortSpec]:
    """The contracts of every port of the SEIKO and LAC pipelines for ``robot``.

    ``joint_command`` depends on the robot file's ``actuation``: ``position`` (default, Talos:
    ``theta_cmd``) or ``pd`` (Unitree G1: ``q_target``, ``kp``, ``kd``, ``tau_ff``). ``teleop_command``
    sizes ``q_ref_arms`` from ``teleop.arm_joints`` and ``external_wrench`` has one field per link of
    ``wrench_links`` (both empty when the robot file has no such key).

    Args:
        robot: a :class:`contactflow.robot.Robot`.
        rate_hz: control rate; ``None`` = the robot file's ``control_rate_hz`` (500 Hz if absent).

    Raises:
        ContractError: unknown ``actuation``.

    Returns:
        contract name -> PortSpec.
    """
    nq, nv, n = robot.nq, robot.nv, robot.n
    if rate_hz is None:
        rate_hz = float((getattr(robot, "raw", None) or {}).get("control_rate_hz", 500.0))
    effs = list(robot.contacts)
    planes = [c for c in effs if robot.contacts[c].type == "plane"]
    points = [c for c in effs if robot.contacts[c].type == "point"]
    # Robots with an `environment:` section (surfaces the hands can touch) also report the
    # measured force on their point effectors (wrist FT sensor or joint-torque estimate, §6.7).
    sensed_points = points if isinstance(getattr(robot, "raw", None), dict) and "environment" in robot.raw else []
    specs = {}
    specs["sensors"] = PortSpec(
        "sensors",
        (
            Field("t", 1, "s", description="simulation/robot time"),
            Field("q", nq, "m, rad", "world / pinocchio free-flyer", "measured or estimated configuration (quaternion xyzw)"),
            Field("v", nv, "m/s, rad/s", "base frame", "generalised velocity"),
            Field("tau", n, "N m", description="measured joint torques"),
            Field("imu_quat", 4, "-", "world", "pelvis orientation (xyzw)"),
            Field("imu_gyro", 3, "rad/s", "imu", "pelvis angular velocity"),
            Field("imu_acc", 3, "m/s^2", "imu", "pelvis specific force"),
        )
        + tuple(Field(f"wrench.{c}", 6, "N, N m", "sole LOCAL", "ground reaction on the robot [f; tau]") for c in planes)
        + tuple(Field(f"force.{c}", 3, "N", "world", "force of the environment on the effector (wrist FT or "
                      "joint-torque estimate, SEIKO §6.7); zeros when not sensed") for c in sensed_points),
        rate_hz,
        "robot state and sensors, one message per control tick",
    )
    specs["operator_command"] = PortSpec(
        "operator_command",
        tuple(Field(f"twist.{c}", 6, "m/s, rad/s", "world", "velocity command [v; w]") for c in effs)
        + (
            Field("enable", len(effs), "-", description="per effector: 1 = contact wanted enabled, 0 = disabled "
                  "(a change is a switch request, SEIKO §7.3-7.4)"),
            Field("push", len(effs), "-", description="per effector: 1 = pushing mode wanted (SEIKO §7.2)"),
            Field("force_rate", len(effs), "N/s", description="per effector: normal-force velocity command in pushing mode"),
        ),
        rate_hz,
        "operator commands per effector: velocity, contact state, pushing mode",
    )
    specs["admittance_command"] = PortSpec(
        "admittance_command",
        tuple(Field(f"twist.{c}", 6, "m/s, rad/s", "world", "admittance velocity (14) [v; w]; zero when enabled") for c in effs),
        rate_hz,
        "effector admittance velocities (SEIKO eq. 14), added to the operator command",
    )
    specs["effector_targets"] = PortSpec(
        "effector_targets",
        tuple(Field(f"pose.{c}", 7, "m, -", "world", "target pose [p; quat xyzw]") for c in effs),
        rate_hz,
        "filtered effector pose targets (eq. 8) for the Retargeting",
    )
    specs["desired"] = PortSpec(
        "desired",
        (
            Field("q_d", nq, "m, rad", "world", "desired posture"),
            Field("v_d", nv, "m/s, rad/s", "base frame", "desired posture rate"),
            Field("theta_ahead", n, "rad", description="ahead joint command theta_d + 0.006 s * theta_d_dot"),
            Field("tau_d", n, "N m", description="desired joint torques"),
            Field("enabled", len(effs), "-", description="1 if the effector is an enabled contact"),
            Field("ok", 1, "-", description="1 if the QP succeeded this tick"),
            Field("switching", len(effs), "-", description="per effector: +1 enabling (fz_min ratchet), -1 disabling (unloading), 0"),
            Field("push", len(effs), "-", description="per effector: 1 if pushing mode is active"),
            Field("n_refused", 1, "-", description="operator requests refused so far"),
        )
        + tuple(Field(f"lam_target.{c}", 6, "N, N m", "sole LOCAL / surface frame", "wrench target of (9e) (push command)") for c in effs)
        + tuple(Field(f"lam_d.{c}", 6, "N, N m", "sole LOCAL / surface frame", "desired contact wrench") for c in effs)
        + tuple(Field(f"lam_d_dot.{c}", 6, "N/s, N m/s", "sole LOCAL / surface frame", "desired wrench rate") for c in effs)
        + tuple(Field(f"pose_d.{c}", 7, "m, -", "world", "desired effector pose [p; quat xyzw]") for c in effs),
        rate_hz,
        "SEIKO Retargeting output (QP 9)",
    )
    raw = robot.raw if isinstance(getattr(robot, "raw", None), dict) else {}
    actuation = str(raw.get("actuation", "position"))
    if actuation == "pd":
        # PD-controlled robot (Unitree G1): the fields of Unitree's MotorCmd; the driver applies
        # tau = kp (q_target - q) - kd qdot + tau_ff, clamped to the effort limits, every physics step.
        specs["joint_command"] = PortSpec(
            "joint_command",
            (
                Field("q_target", n, "rad", description="joint position target, robot joint order"),
                Field("kp", n, "N m/rad", description="joint stiffness of the PD law"),
                Field("kd", n, "N m s/rad", description="joint damping of the PD law"),
                Field("tau_ff", n, "N m", description="feed-forward joint torque"),
                Field("ok", 1, "-", description="1 = fresh controller output; 0 = degraded, last safe target resent"),
            ),
            rate_hz,
            "PD joint command to the robot driver (per joint: q_target, kp, kd, tau_ff)",
        )
    elif actuation == "position":
        specs["joint_command"] = PortSpec(
            "joint_command",
            (Field("theta_cmd", n, "rad", description="joint position command"), Field("ok", 1, "-", description="1 if the QP succeeded")),
            rate_hz,
            "joint position command to the robot driver",
        )
    else:
        raise ContractError(f"robot {getattr(robot, 'name', '?')!r}: actuation must be 'position' or 'pd', got {actuation!r}")
    arm_joints = list((raw.get("teleop") or {}).get("arm_joints") or [])
    specs["teleop_command"] = PortSpec(
        "teleop_command",
        (
            Field("lin_vel", 2, "m/s", "yaw (heading) frame", "base velocity command [vx, vy]"),
            Field("ang_vel", 1, "rad/s", "world z", "base yaw-rate command"),
            Field("base_height", 1, "m", "world", "base (pelvis) height command"),
            Field("waist_yaw", 1, "rad", description="waist yaw reference"),
            Field("q_ref_arms", len(arm_joints), "rad", description="arm joint references, robot file teleop.arm_joints order"),
            Field("stiffness", 5, "N/m, N m/rad", description="RAW [K_lin_left_arm, K_lin_right_arm, K_lin_torso, "
                  "K_ang_left_arm, K_ang_right_arm] (LAC)"),
        ),
        rate_hz,
        "teleoperation command: base velocity and height, upper-body references, 5-D stiffness (LAC)",
    )
    specs["external_wrench"] = PortSpec(
        "external_wrench",
        tuple(Field(f"wrench.{link}", 6, "N, N m", "world, at the link CoM", "external wrench [f; tau] applied to the link")
              for link in (raw.get("wrench_links") or [])),
        rate_hz,
        "external wrenches applied to robot links (simulation: MuJoCo xfrc_applied), ground truth",
    )
    specs["estop"] = PortSpec(
        "estop",
        (Field("stop", 1, "-", description="1 = emergency stop: the hardware driver latches damping mode"),),
        rate_hz,
        "emergency stop for a hardware driver (any message with stop >= 0.5 latches damping mode)",
    )
    specs["controller_state"] = PortSpec(
        "controller_state",
        (
            Field("q_flex", nq, "m, rad", "world", "flexible-model posture"),
            Field("offset", n, "rad", description="command offset theta_cmd - theta_d"),
            Field("tau_flex", n, "N m", description="flexible-model joint torques"),
            Field("tau_limit", n, "N m", description="adapted torque limits (eq. 12)"),
            Field("solve_time", 1, "s", description="controller step time"),
        )
        + tuple(Field(f"lam_flex.{c}", 6, "N, N m", "sole LOCAL / surface frame", "flexible-model wrench") for c in effs)
        + tuple(Field(f"lam_tilde.{c}", 6, "N, N m", "sole LOCAL / surface frame", "filtered measured wrench (eq. 13)") for c in effs),
        rate_hz,
        "SEIKO Controller internal state (diagnostics)",
    )
    # SEIKO eq. (13) as its own node (nodes/wrench_filter.py, contactflow.seiko.stages.WrenchFilterStage):
    # its output to the Controller, and the Controller's feedback it filters with.
    specs["filtered_wrench"] = PortSpec(
        "filtered_wrench",
        tuple(Field(f"lam_tilde.{c}", 6, "N, N m", "sole LOCAL (plane) / world (point, first 3)",
                    "complementary-filtered measured wrench (eq. 13) of tick k, as if the contact's filter "
                    "is active at tick k") for c in effs),
        rate_hz,
        "SEIKO complementary wrench filter (eq. 13) output, for the Controller",
    )
    specs["flex_wrench_rate"] = PortSpec(
        "flex_wrench_rate",
        tuple(Field(f"lam_flex_dot.{c}", 6, "N/s, N m/s", "sole LOCAL (plane) / world (point, first 3)",
                    "flexible-model wrench rate at the end of the Controller's tick k") for c in effs)
        + (Field("active", len(effs), "-", description="per effector: 1 = (13) filtered its wrench at tick k "
                 "(contact enabled and the Controller integrating), 0 = it passed lam_read through"),),
        rate_hz,
        "SEIKO Controller feedback to the complementary wrench filter (eq. 13), one message per tick",
    )
    specs["driver_timing"] = PortSpec(
        "driver_timing",
        (
            Field("command_seq", 1, "-", description="seq of the command applied in this period (-1: none yet, "
                  "the default posture)"),
            Field("command_t", 1, "s", description="t of the sensors message that command was computed from"),
            Field("new_command", 1, "-", description="1 if that command was not applied in the previous period"),
            Field("paced", 1, "-", description="1 = wall-clock period; 0 = start-up (warm-up) tick, waited for"),
            Field("late_s", 1, "s", description="wall time of the period start minus its deadline (paced)"),
            Field("wall_s", 1, "s", description="wall time of the period start since the first period"),
            Field("step_s", 1, "s", description="wall time the driver spent on the period (publish the sensors, "
                  "take the command, physics step)"),
        ),
        rate_hz,
        "robot driver timing, one row per control period (message seq = period k, t = t_k): the command "
        "in force and the deadline it met or missed (contactflow.recording.summary.realtime_metrics)",
    )
    return specs
