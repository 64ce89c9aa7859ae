"""Simulated robots on MuJoCo, with readings in pinocchio conventions.

:class:`MujocoSimBase` holds what every simulated robot shares (model, readings, falls, state
and external-wrench access); :class:`MujocoRobotSim` is the position-controlled robot (Talos) and
:class:`contactflow.sim.pd_robot.PDRobotSim` the PD-controlled one (Unitree G1).

:class:`MujocoRobotSim` runs the model of :mod:`contactflow.sim.mujoco_model` at ``physics_dt_s``
and takes one joint position command ``theta_cmd`` per control tick (``control_dt_s``). Each joint
behaves as the SEIKO flexible joint (SEIKO RA-L 2024, joint model ``tau = K (theta_cmd - q)``)
plus a small velocity damping ``-kv qdot``, clamped to ``+-tau_max`` (recipe §5).

Conventions of :class:`SensorReadings` (pinocchio, ``robot.model``):

* ``q`` (7 + n,): base position in world [m], base quaternion (x, y, z, w), joint angles [rad]
  in ``robot.joint_names`` order. MuJoCo's free joint stores (w, x, y, z): converted.
* ``v`` (6 + n,): base linear and angular velocity in the BASE frame [m/s, rad/s], joint
  velocities [rad/s]. MuJoCo's free-joint ``qvel`` is (world linear, local angular): the linear
  part is rotated into the base frame.
* Joints, actuators and sensors are mapped between MuJoCo and pinocchio by NAME.
* ``wrenches[name]`` (6,) = [f; tau] of the ground reaction ON the robot for each plane contact,
  in the contact (sole) LOCAL frame, torque about the sole origin [N, N m]. MuJoCo's force/torque
  sensor gives the wrench of the parent link on the sole link: it is negated and the sole link's
  own weight is added back (recipe §2), so that ``sum fz = m g`` at rest.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping

import mujoco
import numpy as np

from contactflow.errors import ConfigError, ContractError
from contactflow.robot import Robot
from contactflow.sim.mujoco_model import (
    PointMass,
    build_mujoco_model,
    state_map,
)

__all__ = ["SensorNoiseConfig", "SimConfig", "SensorReadings", "MujocoSimBase", "MujocoRobotSim", "sensor_values"]

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SensorNoiseConfig:
    """Fall threshold and sensor noise, shared by every simulated robot's configuration.

    Attributes:
        fall_height_m: :meth:`MujocoSimBase.fell` threshold on the base height [m]; ``None`` =
            the robot file's ``fall_height_m`` (0.6 m when absent: Talos).
        noise_seed: seed of the sensor-noise generator.
        q_noise_std_rad: joint-angle noise standard deviation [rad].
        dq_noise_std_rad_per_s: joint-velocity noise [rad/s].
        tau_noise_std_nm: joint-torque noise [N m].
        force_noise_std_n: contact-force noise [N].
        torque_noise_std_nm: contact-torque noise [N m].
        gyro_noise_std_rad_per_s: gyro noise [rad/s].
        acc_noise_std_m_per_s2: accelerometer noise [m/s^2].
    """

    fall_height_m: float | None = None
    noise_seed: int = 0
    q_noise_std_rad: float = 0.0
    dq_noise_std_rad_per_s: float = 0.0
    tau_noise_std_nm: float = 0.0
    force_noise_std_n: float = 0.0
    torque_noise_std_nm: float = 0.0
    gyro_noise_std_rad_per_s: float = 0.0
    acc_noise_std_m_per_s2: float = 0.0

    def __post_init__(self):
        for f in dataclasses.fields(self):
            if "_noise_std_" in f.name and not getattr(self, f.name) >= 0:
                raise ConfigError(f"{f.name} must be >= 0, got {getattr(self, f.name)}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SimConfig(SensorNoiseConfig):
    """Configuration of :class:`MujocoRobotSim` (plus the fields of :class:`SensorNoiseConfig`).

    Attributes:
        physics_dt_s: physics step [s]; ``None`` = the robot file's ``mujoco.timestep_s``
            (0.001 s for Talos).
        control_dt_s: control tick [s] (one :meth:`MujocoRobotSim.step`); an integer multiple of
            the physics step (2 ms = 500 Hz by default).
        interpolate_commands: ramp the actuator targets linearly from the previous command to the
            new one across the physics steps of a tick (otherwise a zero-order hold).
        kv_nms_per_rad: actuator velocity gain [N m s/rad]; ``None`` = the robot file's.
        settle_s: hidden settling time at reset [s] (recipe §3 "transient-free start"); 0 = none.
            The settled state is cached per command, so later resets cost nothing.
        settle_kv_nms_per_rad: velocity gain used while settling [N m s/rad] (damps the 1.1 Hz
            whole-body sway; the equilibrium does not depend on kv).
    """

    physics_dt_s: float | None = None
    control_dt_s: float = 0.002
    interpolate_commands: bool = True
    kv_nms_per_rad: float | None = None
    settle_s: float = 8.0
    settle_kv_nms_per_rad: float = 200.0

    def __post_init__(self):
        super().__post_init__()
        if self.physics_dt_s is not None and not self.physics_dt_s > 0:
            raise ConfigError(f"physics_dt_s must be > 0, got {self.physics_dt_s}")
        if not self.control_dt_s > 0:
            raise ConfigError(f"control_dt_s must be > 0, got {self.control_dt_s}")
        if self.kv_nms_per_rad is not None and self.kv_nms_per_rad < 0:
            raise ConfigError(f"kv_nms_per_rad must be >= 0, got {self.kv_nms_per_rad}")
        if self.settle_s < 0 or self.settle_kv_nms_per_rad < 0:
            raise ConfigError("settle_s and settle_kv_nms_per_rad must be >= 0")


@dataclasses.dataclass(frozen=True)
class SensorReadings:
    """Everything the simulated robot measures at time ``t`` (arrays are read-only).

    Attributes:
        t: simulation time [s] (0 after reset).
        q: (7 + n,) pinocchio configuration: base position in world [m], base quaternion xyzw,
            joint angles [rad].
        v: (6 + n,) pinocchio velocity: base linear and angular velocity in the base frame
            [m/s, rad/s], joint velocities [rad/s].
        tau: (n,) joint torques applied by the actuators [N m] (``actuatorfrc``, clamped to
            ``tau_max``), computed from the current state and command.
        wrenches: plane-contact name -> (6,) ground reaction wrench [f; tau] on the robot in the
            contact LOCAL frame, torque about the frame origin [N, N m].
        imu_quat: (4,) IMU orientation in world, xyzw.
        imu_gyro: (3,) angular velocity in the IMU frame [rad/s].
        imu_acc: (3,) specific force in the IMU frame [m/s^2] (+g along z at rest).
        hand_positions: point-contact name (``left_hand``...) -> (3,) frame position in world [m].
        hand_forces: point-contact name -> (3,) force of the environment on the hand in world
            [N], from the wrist force/torque sensor (hands listed in the environment's
            ``ft_sensors``; the weight of the sensed subtree is removed, quasi-static).
        base_height: base origin height above the floor [m].
        diagnostics: ``ncon`` (active contacts), ``n_saturated`` (actuators at their force limit),
            ``diverged`` (1.0 if MuJoCo reported a divergence since reset).
    """

    t: float
    q: np.ndarray
    v: np.ndarray
    tau: np.ndarray
    wrenches: dict[str, np.ndarray]
    imu_quat: np.ndarray
    imu_gyro: np.ndarray
    imu_acc: np.ndarray
    hand_positions: dict[str, np.ndarray]
    base_height: float
    diagnostics: Mapping[str, float] = dataclasses.field(default_factory=dict)
    hand_forces: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)


def sensor_values(r: "SensorReadings", robot: Robot | None = None, *, fields=None, estimators=None) -> dict:
    """The fields of the ``sensors`` contract (:func:`contactflow.contracts.messages.port_specs`) from readings.

    The one place where simulator readings become a ``sensors`` message: the driver node, the
    in-process loops and the tests all use it.

    Args:
        r: the readings of a simulator (:class:`MujocoRobotSim` or the PD simulator).
        robot: the robot; needed only for the ``force.<effector>`` fields of point contacts.
        fields: names of the contract's fields (``PortSpec.fields`` names); ``force.<c>`` fields
            are filled only when listed (measured hand force, else ``estimators[c]``, else zeros).
        estimators: effector -> object with ``estimate(q, tau) -> (3,)`` [N] (SEIKO §6.7).

    Returns:
        field name -> value: ``t`` (1,) [s], ``q``, ``v``, ``tau``, ``imu_quat``, ``imu_gyro``,
        ``imu_acc`` and ``wrench.<plane contact>`` (6,) [N, N m] (sole LOCAL frame).
    """
    vals = {
        "t": np.array([r.t]), "q": r.q, "v": r.v, "tau": r.tau,
        "imu_quat": r.imu_quat, "imu_gyro": r.imu_gyro, "imu_acc": r.imu_acc,
    }
    for c, w in r.wrenches.items():
        vals[f"wrench.{c}"] = w
    names = set(fields or ())
    if robot is not None:
        for c in robot.contacts:
            if f"force.{c}" in names:
                if c in r.hand_forces:
                    vals[f"force.{c}"] = r.hand_forces[c]
                elif estimators and c in estimators:
                    vals[f"force.{c}"] = estimators[c].estimate(r.q, r.tau)
                else:
                    vals[f"force.{c}"] = np.zeros(3)
    return vals


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # np.cross costs ~50 us per call; this is the hot path of every tick.
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])


def _ro(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


class MujocoSimBase:
    """What every simulated robot shares: the MuJoCo model of the robot file, readings in
    pinocchio conventions (module docstring), fall detection, state overwrite, external wrenches
    and payload masses. Subclasses add ``reset`` and ``step`` for their actuation.

    Args:
        config: a :class:`SensorNoiseConfig` (or subclass) with ``physics_dt_s`` and
            ``control_dt_s`` attributes.
        robot: the robot description.
        extra_bodies: unmodelled payloads welded to links.
        environment: walls / supports, hand spheres and wrist FT sensors (None: floor only).
        kv_nms_per_rad: actuator velocity gain override (position robots).
        control_dt_s: control tick [s] overriding ``config.control_dt_s``.

    Raises:
        ConfigError: ``control_dt_s`` is not an integer multiple of the physics step.
        ModelError: the model cannot be built or its actuators are unstable (pitfall M3).
    """

    def __init__(self, config, robot: Robot, *, extra_bodies: Iterable[PointMass | Mapping] | None = None,
                 environment=None, kv_nms_per_rad: float | None = None, control_dt_s: float | None = None):
        self.config = config
        self.robot = robot
        self.environment = environment
        extra_bodies = list(extra_bodies) if extra_bodies else []
        self.model = build_mujoco_model(
            robot, extra_bodies=extra_bodies, environment=environment, timestep_s=config.physics_dt_s,
            kv_nms_per_rad=kv_nms_per_rad,
        )
        self.data = mujoco.MjData(self.model)
        m = self.model
        dt = m.opt.timestep
        control_dt = config.control_dt_s if control_dt_s is None else control_dt_s
        ratio = control_dt / dt
        self.n_substeps = int(round(ratio))
        if self.n_substeps < 1 or abs(ratio - self.n_substeps) > 1e-9 * max(1.0, ratio):
            raise ConfigError(
                f"control_dt_s {control_dt} s must be an integer multiple of the physics step {dt} s"
            )
        self.fall_height_m = float(robot.fall_height_m if config.fall_height_m is None else config.fall_height_m)
        n = robot.n
        self.state_map = state_map(m, robot)
        self._root_q = self.state_map.root_q
        self._root_v = self.state_map.root_v
        self._jq = self.state_map.jq
        self._jv = self.state_map.jv
        self._act = np.array([m.actuator(j).id for j in robot.joint_names])
        if np.array_equal(self._act, np.arange(m.nu)):
            self._act = slice(0, m.nu)  # same order: a slice is cheaper than fancy indexing
        self._tau_adr = np.array([m.sensor(f"{j}_tau").adr[0] for j in robot.joint_names])
        self._kv_model = m.actuator_biasprm[:, 2].copy()
        self._plane = []  # (name, site id, force adr, torque adr, body id)
        for c in robot.contacts.values():
            if c.type == "plane":
                sid = m.site(c.frame).id
                bid = int(m.site_bodyid[sid])
                self._plane.append(
                    (c.name, sid, m.sensor(f"{c.frame}_force").adr[0], m.sensor(f"{c.frame}_torque").adr[0],
                     bid, float(m.body_subtreemass[bid]))
                )
        self._points = [(c.name, m.site(c.frame).id) for c in robot.contacts.values() if c.type == "point"]
        self._hand_ft = []  # (name, site id, force adr, body id, nominal subtree mass)
        ft_frames = set(environment.ft_sensor_frames) if environment is not None else set()
        # A wrist sensor is tared for the robot's own hand: an unmodelled payload welded below it
        # (extra_bodies) must show up in the reading, so the weight compensation uses the subtree
        # mass of the nominal model, without the payloads.
        nominal = m
        if extra_bodies and ft_frames:
            nominal = build_mujoco_model(robot, environment=environment, timestep_s=config.physics_dt_s,
                                         kv_nms_per_rad=kv_nms_per_rad, check_stability=False)
        for c in robot.contacts.values():
            if c.type == "point" and c.frame in ft_frames:
                sid = m.site(c.frame).id
                bid = int(m.site_bodyid[sid])
                nominal_mass = float(nominal.body_subtreemass[nominal.body(m.body(bid).name).id])
                self._hand_ft.append((c.name, sid, m.sensor(f"{c.frame}_force").adr[0], bid, nominal_mass))
        self._imu = tuple(m.sensor(s).adr[0] for s in ("imu_quat", "imu_gyro", "imu_acc"))
        self._sole_sites = [p[1] for p in self._plane]
        self._g_W = m.opt.gravity.copy()
        self._rng = np.random.default_rng(config.noise_seed)
        # Views into MjData (the buffers are never reallocated; attribute access is not free).
        d = self.data
        self._qpos, self._qvel, self._sensordata = d.qpos, d.qvel, d.sensordata
        self._site_xmat, self._site_xpos, self._subtree_com = d.site_xmat, d.site_xpos, d.subtree_com
        self._actuator_force = d.actuator_force
        self._badqacc = d.warning[mujoco.mjtWarning.mjWARN_BADQACC]
        self._n_joints = n
        self._lo, self._hi = m.actuator_forcerange[self._act, 0], m.actuator_forcerange[self._act, 1]
        # states cached by reset (MujocoRobotSim's settled postures); cleared when masses change
        self._settled: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}

    # ------------------------------------------------------------------ properties
    @property
    def physics_dt_s(self) -> float:
        """Physics step [s]."""
        return float(self.model.opt.timestep)

    @property
    def control_dt_s(self) -> float:
        """Control tick [s]."""
        return self.n_substeps * self.physics_dt_s

    @property
    def time(self) -> float:
        """Simulation time [s]."""
        return float(self.data.time)

    def _place_default(self, q0: np.ndarray, lift_to_floor: bool) -> None:
        """Write ``q0`` into the (reset) data; with ``lift_to_floor`` shift the base height so the
        lowest sole frame touches z = 0."""
        m, d = self.model, self.data
        self.state_map.set(d, q0)
        if lift_to_floor:
            mujoco.mj_kinematics(m, d)
            d.qpos[self._root_q + 2] -= min(d.site_xpos[s, 2] for s in self._sole_sites)

    def readings(self) -> SensorReadings:
        """The readings at the current state (no time advance)."""
        cfg = self.config
        n = self._n_joints
        sd = self._sensordata
        qpos, qvel = self._qpos, self._qvel
        rq = self._root_q
        sm = self.state_map
        q = sm.q_from_qpos(qpos)
        v = sm.v_from_qvel(qvel, sm.base_rotation(qpos))
        tau = sd[self._tau_adr]  # fancy indexing copies

        wrenches = {}
        site_xmat, site_xpos, subtree_com = self._site_xmat, self._site_xpos, self._subtree_com
        for name, sid, fa, ta, bid, mass in self._plane:
            R_WS = site_xmat[sid].reshape(3, 3)
            mg_S = mass * (R_WS.T @ self._g_W)  # subtree weight in the sole frame [N]
            r_S = R_WS.T @ (subtree_com[bid] - site_xpos[sid])
            w = np.empty(6)
            w[:3] = -sd[fa : fa + 3] - mg_S
            w[3:] = -sd[ta : ta + 3] - _cross(r_S, mg_S)
            wrenches[name] = w
        qa, ga, aa = self._imu
        imu_quat = np.array([sd[qa + 1], sd[qa + 2], sd[qa + 3], sd[qa]])
        gyro = sd[ga : ga + 3].copy()
        acc = sd[aa : aa + 3].copy()
        hands = {name: site_xpos[sid].copy() for name, sid in self._points}
        hand_forces = {}
        for name, sid, fa, bid, mass in self._hand_ft:
            R_WS = site_xmat[sid].reshape(3, 3)
            # sensor: force of the parent on the subtree, site frame; remove the subtree weight
            f_S = -sd[fa : fa + 3] - mass * (R_WS.T @ self._g_W)
            f_W = R_WS @ f_S
            if cfg.force_noise_std_n > 0:
                f_W += self._rng.normal(0.0, cfg.force_noise_std_n, 3)
            hand_forces[name] = _ro(f_W)

        rng = self._rng
        if cfg.q_noise_std_rad > 0:
            q[7:] += rng.normal(0.0, cfg.q_noise_std_rad, n)
        if cfg.dq_noise_std_rad_per_s > 0:
            v[6:] += rng.normal(0.0, cfg.dq_noise_std_rad_per_s, n)
        if cfg.tau_noise_std_nm > 0:
            tau += rng.normal(0.0, cfg.tau_noise_std_nm, n)
        if cfg.force_noise_std_n > 0 or cfg.torque_noise_std_nm > 0:
            for w in wrenches.values():
                w[:3] += rng.normal(0.0, cfg.force_noise_std_n, 3)
                w[3:] += rng.normal(0.0, cfg.torque_noise_std_nm, 3)
        if cfg.gyro_noise_std_rad_per_s > 0:
            gyro += rng.normal(0.0, cfg.gyro_noise_std_rad_per_s, 3)
        if cfg.acc_noise_std_m_per_s2 > 0:
            acc += rng.normal(0.0, cfg.acc_noise_std_m_per_s2, 3)

        f = self._actuator_force[self._act]
        diag = {
            "ncon": float(self.data.ncon),
            "n_saturated": float(np.count_nonzero((f <= self._lo + 1e-9) | (f >= self._hi - 1e-9))),
            "diverged": float(self._diverged()),
        }
        return SensorReadings(
            t=float(self.data.time),
            q=_ro(q),
            v=_ro(v),
            tau=_ro(tau),
            wrenches={k: _ro(w) for k, w in wrenches.items()},
            imu_quat=_ro(imu_quat),
            imu_gyro=_ro(gyro),
            imu_acc=_ro(acc),
            hand_positions={k: _ro(p) for k, p in hands.items()},
            base_height=float(qpos[rq + 2]),
            diagnostics=diag,
            hand_forces=hand_forces,
        )

    def fell(self, threshold_m: float | None = None) -> bool:
        """True if the base is below ``threshold_m`` (default: the configured or robot-file
        ``fall_height_m``), the state
        is not finite, or MuJoCo reported a divergence (it then resets its state) since reset."""
        thr = self.fall_height_m if threshold_m is None else threshold_m
        d = self.data
        if self._diverged() or not (np.all(np.isfinite(d.qpos)) and np.all(np.isfinite(d.qvel))):
            return True
        return bool(d.qpos[self._root_q + 2] < thr)

    def set_state(self, q: np.ndarray, v: np.ndarray | None = None) -> SensorReadings:
        """Overwrite the simulated state with a pinocchio configuration and velocity.

        Time and commands are kept; for experiments and tests (e.g. a robot thrown in the air).

        Args:
            q: (7 + n,) pinocchio configuration (quaternion xyzw, normalised here) [m, -, rad].
            v: (6 + n,) pinocchio velocity (base twist in the base frame) [m/s, rad/s];
                ``None`` = zero.

        Returns:
            The readings at the new state.

        Raises:
            ContractError: wrong shapes, non-finite values or a zero quaternion.
        """
        n = self._n_joints
        q = np.array(q, dtype=float)
        v = np.zeros(6 + n) if v is None else np.array(v, dtype=float)
        if q.shape != (7 + n,) or v.shape != (6 + n,):
            raise ContractError(f"set_state: expected q ({7 + n},) and v ({6 + n},), got {q.shape} and {v.shape}")
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(v))):
            raise ContractError("set_state: non-finite q or v")
        nrm = np.linalg.norm(q[3:7])
        if nrm < 1e-9:
            raise ContractError("set_state: zero base quaternion")
        q[3:7] /= nrm
        m, d = self.model, self.data
        d.qvel[:] = 0.0
        self.state_map.set(d, q, v)  # MuJoCo: world linear, local angular base velocity
        mujoco.mj_forward(m, d)
        return self.readings()

    def set_external_wrench(self, body: str, wrench_W: np.ndarray | None) -> None:
        """Apply (or clear with ``None``) a constant external wrench on a link.

        Args:
            body: link (MuJoCo body) name.
            wrench_W: (6,) [f; tau] in world axes, force applied at the link's centre of mass,
                torque about it [N, N m] (MuJoCo ``xfrc_applied``); held until changed. Reset
                clears it.

        Raises:
            ContractError: unknown body or not 6 finite numbers.
        """
        bid = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, body)
        if bid < 0:
            raise ContractError(f"external wrench: no MuJoCo body {body!r}")
        if wrench_W is None:
            self.data.xfrc_applied[bid] = 0.0
            return
        w = np.asarray(wrench_W, dtype=float)
        if w.shape != (6,) or not np.all(np.isfinite(w)):
            raise ContractError(f"external wrench must be 6 finite numbers, got shape {w.shape}")
        self.data.xfrc_applied[bid] = w

    def set_body_mass(self, body: str, mass_kg: float) -> None:
        """Change the mass of a body (e.g. an ``extra_bodies`` payload) during a run.

        The inertia is scaled with the mass and the subtree masses of the body and its ancestors
        are updated; the settled-state cache of :meth:`reset` is cleared (it depends on the
        masses). For a load added "during operation": weld it with its full mass, set it to ~0
        before :meth:`reset`, then ramp it up.

        Args:
            body: MuJoCo body name.
            mass_kg: new mass [kg], > 0.

        ``invweight0`` (MuJoCo's constraint-scaling constant) is not recomputed.

        Raises:
            ContractError: ``mass_kg`` is not a positive finite number, ``body`` does not exist, or
                the body has zero mass.
        """
        if not (np.isfinite(mass_kg) and mass_kg > 0.0):
            raise ContractError(f"set_body_mass: mass must be > 0, got {mass_kg}")
        m = self.model
        try:
            bid = m.body(body).id
        except KeyError:
            raise ContractError(f"set_body_mass: no MuJoCo body named {body!r}") from None
        old = float(m.body_mass[bid])
        if not old > 0.0:
            raise ContractError(f"set_body_mass: body {body!r} has mass {old} kg; its inertia cannot be scaled")
        m.body_inertia[bid] *= mass_kg / old
        m.body_mass[bid] = mass_kg
        b = bid
        while True:
            m.body_subtreemass[b] += mass_kg - old
            if b == 0:
                break
            b = int(m.body_parentid[b])
        self._settled.clear()

    def _diverged(self) -> bool:
        return self._badqacc.number > 0



class MujocoRobotSim(MujocoSimBase):
    """A position-controlled robot standing on a floor, simulated with MuJoCo.

    Per control tick the actuator target goes from the previous command to ``theta_cmd``
    (linear ramp over the ``control_dt_s / physics_dt_s`` physics steps if
    ``interpolate_commands``), and each actuated joint feels
    ``tau = clamp(K (target - q) - kv qdot, -tau_max, tau_max)``.

    Args:
        config: simulation configuration.
        robot: the robot description (:func:`contactflow.robot.load_robot`).
        extra_bodies: unmodelled payloads welded to links (see
            :func:`contactflow.sim.mujoco_model.build_mujoco_spec`).
        environment: walls / supports, hand spheres and wrist FT sensors (None: floor only).

    Raises:
        ConfigError: ``control_dt_s`` is not an integer multiple of the physics step, or a
            malformed ``mujoco:`` section.
        ModelError: the model cannot be built or its actuators are unstable (pitfall M3).
    """

    def __init__(self, config: SimConfig, robot: Robot, *, extra_bodies: Iterable[PointMass | Mapping] | None = None,
                 environment=None):
        super().__init__(config, robot, extra_bodies=extra_bodies, environment=environment,
                         kv_nms_per_rad=config.kv_nms_per_rad)
        self._theta_cmd = robot.theta_default.copy()
        self.reset()

    @property
    def theta_cmd(self) -> np.ndarray:
        """(n,) last joint position command [rad] (a copy)."""
        return self._theta_cmd.copy()

    # ------------------------------------------------------------------ API
    def reset(self, theta_cmd: np.ndarray | None = None) -> SensorReadings:
        """Put the robot at its default configuration (or ``theta_cmd``), standing, at t = 0.

        The base is placed as in ``robot.q_default`` (soles on z = 0); for a non-default
        ``theta_cmd`` the base height is shifted so the lowest sole touches the floor. Commands
        are set to the posture. With ``settle_s > 0`` the robot then settles for ``settle_s``
        (hidden, kv = ``settle_kv_nms_per_rad``) and time restarts at 0 from the settled state,
        which is cached per posture (later resets with the same posture are instantaneous). If the
        robot falls while settling, the fallen state is returned uncached (see :meth:`fell`).
        External wrenches are cleared.

        Args:
            theta_cmd: (n,) joint posture and command [rad]; ``None`` = ``robot.theta_default``.

        Returns:
            The readings at t = 0.

        Raises:
            ContractError: ``theta_cmd`` has the wrong shape or non-finite values.
        """
        theta = self.robot.theta_default.copy() if theta_cmd is None else self._check_cmd(theta_cmd)
        m, d = self.model, self.data
        mujoco.mj_resetData(m, d)
        key = theta.tobytes()
        if key in self._settled:
            qpos, qvel = self._settled[key]
            d.qpos[:] = qpos
            d.qvel[:] = qvel
        else:
            q0 = self.robot.q_default.copy()
            q0[7:] = theta
            self._place_default(q0, theta_cmd is not None and not np.array_equal(theta, self.robot.theta_default))
            d.ctrl[self._act] = theta
            ok = True
            if self.config.settle_s > 0:
                ok = self._settle(self.config.settle_s)
            state = (d.qpos.copy(), d.qvel.copy())
            if ok:  # a fallen or diverged settle is returned (fell() says so) but not cached
                self._settled[key] = state
            mujoco.mj_resetData(m, d)
            d.qpos[:], d.qvel[:] = state
        d.ctrl[self._act] = theta
        d.time = 0.0
        self._theta_cmd = theta
        mujoco.mj_forward(m, d)
        return self.readings()

    def _settle(self, duration_s: float) -> bool:
        m, d = self.model, self.data
        m.actuator_biasprm[self._act, 2] = -self.config.settle_kv_nms_per_rad
        try:
            mujoco.mj_step(m, d, nstep=max(1, int(round(duration_s / m.opt.timestep))))
        finally:
            m.actuator_biasprm[:, 2] = self._kv_model
        if self.fell():
            log.warning(
                "robot fell or MuJoCo diverged while settling at reset (base height %.3f m)", d.qpos[self._root_q + 2]
            )
            return False
        return True

    def step(self, theta_cmd: np.ndarray) -> SensorReadings:
        """Advance one control tick with joint position command ``theta_cmd``.

        Args:
            theta_cmd: (n,) joint position command [rad] in ``robot.joint_names`` order.

        Returns:
            The readings at the end of the tick (t += control_dt_s).

        Raises:
            ContractError: wrong shape or non-finite values (the state is not advanced; a node
                holds its last command and reports it).
        """
        new = self._check_cmd(theta_cmd)
        m, d = self.model, self.data
        ns = self.n_substeps
        if self.config.interpolate_commands and ns > 1:
            prev = self._theta_cmd
            for k in range(1, ns + 1):
                d.ctrl[self._act] = prev + (new - prev) * (k / ns)
                mujoco.mj_step(m, d)
        else:
            d.ctrl[self._act] = new
            mujoco.mj_step(m, d, nstep=ns)
        self._theta_cmd = new
        # Sensors of mj_step refer to the state before the last integration: recompute them at
        # the current state so that every reading refers to the same instant.
        mujoco.mj_forward(m, d)
        return self.readings()

    def _check_cmd(self, theta_cmd) -> np.ndarray:
        try:
            theta = np.array(theta_cmd, dtype=float)
        except (TypeError, ValueError) as exc:
            raise ContractError(f"theta_cmd: not a numeric array ({exc})") from None
        if theta.shape != (self._n_joints,):
            raise ContractError(f"theta_cmd: expected shape ({self._n_joints},), got {theta.shape}")
        if not np.all(np.isfinite(theta)):
            bad = [self.robot.joint_names[i] for i in np.flatnonzero(~np.isfinite(theta))]
            raise ContractError(f"theta_cmd: non-finite value(s) for {', '.join(bad)}")
        return theta
