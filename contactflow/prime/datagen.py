"""Data for PRIME: scripted motions simulated in MuJoCo (or in PRIME's own smoothed model), with a
payload on the trunk and seeded measurement noise, written as ordinary contactflow recordings.

Recording written by :func:`write_recording` (``contactflow.recording.store`` format)::

    datagen.sensors                 'sensors' contract (t, q, v, tau, imu_quat, imu_gyro, imu_acc):
                                    NOISY measurements at the log rate; ``tau`` is the mean joint
                                    torque over (t_{k-1}, t_k]; imu_quat/gyro = noisy base
                                    orientation / angular velocity; imu_acc is not simulated (0);
                                    wrench.<sole> (robots with plane contacts, e.g. G1): the true
                                    contact-point forces of that sole as [f; tau] in the sole
                                    frame, noise-free (mean over the interval).
    ground_truth.state              q, v: true state (not read by the estimator).
    ground_truth.contact_forces     force.<contact> (3 each): mean contact force on the robot over
                                    (t_{k-1}, t_k], world [N] (not read by the estimator).

The manifest's ``prime_datagen`` entry records the motion, payload, noise, seed and the true
inertial parameters of the trunk.

MuJoCo model (``shared/reference/prime.md`` §5): the project's one builder
(:mod:`contactflow.sim.mujoco_model`: the example-robot-data URDF without visual and collision
geometry, a free joint on the root link, locked joints deleted, torque motors clipped at the
effort limits) with PRIME's own physics: one collision sphere per contact point (``prime.yaml``
radius, elliptic cones, friction mu), joint armature as in the pinocchio model, and the payload
as a welded box body. The
pinocchio base inertia merges fixed links (Go2: base 6.921 kg + 4 hip rotors = 7.277 kg), so the
true trunk is that nominal body plus the payload.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import pinocchio as pin

from contactflow.errors import ConfigError, ModelError
from contactflow.contracts.messages import port_specs
from contactflow.prime.contact import ContactStepConfig, SmoothContactDynamics
from contactflow.prime.inertia import describe_inertia, theta_from_inertia
from contactflow.prime.model import PrimeRobot, standing_configuration
from contactflow.recording.store import RecordingWriter, git_revision
from contactflow.sim.mujoco_model import MujocoOptions, PointMass, build_mujoco_spec, root_link, state_map
from contactflow.sim.pd_robot import pd_torque

__all__ = [
    "PayloadConfig",
    "NoiseConfig",
    "GenerateConfig",
    "GeneratedRun",
    "payload_inertia",
    "true_trunk_inertia",
    "build_mujoco_model",
    "simulate_mujoco",
    "simulate_smoothed",
    "write_recording",
    "MOTIONS",
]

MOTIONS = ("squat", "trot", "stand", "weight_shift")
_TROT_GAIN = 1.0  # attitude feedback of the trot [rad of thigh per rad of roll/pitch]
_REPO = Path(__file__).resolve().parents[2]


@dataclasses.dataclass(frozen=True, kw_only=True)
class PayloadConfig:
    """A box welded to the trunk (absent from the estimator's nominal model).

    Attributes:
        mass_kg: payload mass [kg] (0 = none).
        offset_m: (3,) box centre in the trunk (root joint) frame [m].
        size_m: (3,) box edge lengths [m] (for its rotational inertia).
    """

    mass_kg: float = 3.0
    offset_m: tuple[float, float, float] = (0.0, 0.0, 0.05)
    size_m: tuple[float, float, float] = (0.2, 0.1, 0.05)

    def __post_init__(self):
        if self.mass_kg < 0:
            raise ConfigError(f"payload mass_kg must be >= 0, got {self.mass_kg}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class NoiseConfig:
    """Standard deviations of the white Gaussian measurement noise (``shared/reference/prime.md`` §5).

    Attributes:
        base_position_m, base_orientation_rad, joint_position_rad: configuration noise.
        base_linear_velocity_mps, base_angular_velocity_radps, joint_velocity_radps: velocity noise.
        torque_nm: joint torque noise [N m].
    """

    base_position_m: float = 0.003
    base_orientation_rad: float = 0.005
    joint_position_rad: float = 0.002
    base_linear_velocity_mps: float = 0.03
    base_angular_velocity_radps: float = 0.02
    joint_velocity_radps: float = 0.05
    torque_nm: float = 0.2

    def scaled(self, s: float) -> "NoiseConfig":
        return NoiseConfig(**{f.name: getattr(self, f.name) * s for f in dataclasses.fields(self)})


@dataclasses.dataclass(frozen=True, kw_only=True)
class GenerateConfig:
    """A data-generation run.

    Attributes:
        motion: ``squat`` (squat/sway/pitch-rock, all feet down), ``trot`` (trot in place, Go2),
            ``stand`` or ``weight_shift`` (G1 standing weight shifts).
        duration_s: logged duration [s].
        rate_hz: log rate [Hz] (= 1 / PRIME's dt).
        seed: noise seed.
        noise_scale: multiplies every noise standard deviation (0 = noise-free).
        payload: trunk payload.
        noise: noise standard deviations.
        amplitude_scale: scales the scripted joint-target amplitudes.
    """

    motion: str = "squat"
    duration_s: float = 3.0
    rate_hz: float = 100.0
    seed: int = 0
    noise_scale: float = 1.0
    payload: PayloadConfig = dataclasses.field(default_factory=PayloadConfig)
    noise: NoiseConfig = dataclasses.field(default_factory=NoiseConfig)
    amplitude_scale: float = 1.0

    def __post_init__(self):
        if self.motion not in MOTIONS:
            raise ConfigError(f"motion must be one of {MOTIONS}, got {self.motion!r}")
        if not self.duration_s > 0 or not self.rate_hz > 0:
            raise ConfigError("duration_s and rate_hz must be > 0")
        if self.noise_scale < 0:
            raise ConfigError("noise_scale must be >= 0")


@dataclasses.dataclass
class GeneratedRun:
    """A generated run at the log rate (N samples).

    Attributes:
        t: (N,) times [s].
        q_true, v_true: (N, nq), (N, nv) true state.
        tau_true: (N, n) mean joint torque over (t_{k-1}, t_k] [N m] (row 0: the settle interval).
        force_W: (N, nc, 3) mean contact forces on the robot over (t_{k-1}, t_k], world [N].
        q_meas, v_meas, tau_meas: noisy measurements (same shapes).
        info: generator settings and true trunk parameters (for the manifest).
    """

    t: np.ndarray
    q_true: np.ndarray
    v_true: np.ndarray
    tau_true: np.ndarray
    force_W: np.ndarray
    q_meas: np.ndarray
    v_meas: np.ndarray
    tau_meas: np.ndarray
    info: dict


# ------------------------------------------------------------------------------------ inertia
def payload_inertia(p: PayloadConfig) -> pin.Inertia:
    """Spatial inertia of the payload box about the trunk frame."""
    if p.mass_kg == 0:
        return pin.Inertia.Zero()
    a, b, c = p.size_m
    m = p.mass_kg
    I = m / 12.0 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])
    return pin.Inertia(m, np.asarray(p.offset_m, float), I)


def true_trunk_inertia(pr: PrimeRobot, p: PayloadConfig, joint: str = "root_joint") -> pin.Inertia:
    """Nominal inertia of the body of ``joint`` plus the payload."""
    return pr.model.inertias[pr.model.getJointId(joint)] + payload_inertia(p)


# ------------------------------------------------------------------------------------ motions
def joint_targets(motion: str, t: float, theta0: np.ndarray, scale: float, robot_name: str,
                  rpy: np.ndarray | None = None) -> np.ndarray:
    """Scripted joint targets of a motion.

    Args:
        motion: one of :data:`MOTIONS` (``squat``/``trot``: Go2, legs FL, FR, RL, RR x
            hip/thigh/calf; ``weight_shift``: G1, joint order of robots/g1/robot.yaml; ``stand``: any).
        t: time since the start of the motion [s].
        theta0: (n,) default posture [rad].
        scale: amplitude scale [-].
        robot_name: robot the motion is scripted for.
        rpy: (3,) measured base roll, pitch, yaw [rad] (trot attitude feedback).

    Returns:
        (n,) joint targets [rad].

    Raises:
        ConfigError: the motion is not scripted for this robot.
    """
    th = theta0.copy()
    if motion == "stand":
        return th
    if robot_name == "go2":
        legs = th.reshape(4, 3)
        if motion == "squat":
            # squat (thigh +d, calf -2d keeps each foot under its hip), lateral sway (hips) and
            # pitch rock (front legs extend while the rear legs flex), all feet on the ground.
            sq = 0.14 * scale * np.sin(2 * np.pi * 0.8 * t)
            sway = 0.105 * scale * np.sin(2 * np.pi * 0.5 * t)
            rock = 0.056 * scale * np.sin(2 * np.pi * 1.1 * t)
            for i in range(4):
                r = rock if i < 2 else -rock
                legs[i, 0] += sway
                legs[i, 1] += sq + r
                legs[i, 2] += -2.0 * (sq + r)
            return legs.reshape(-1)
        if motion == "trot":
            # diagonal pairs (FL+RR, FR+RL) alternately lift (calf flex, half period 0.25 s) while
            # the stance legs extend/flex against the base roll and pitch (attitude feedback).
            half = 0.25
            first = (t % (2 * half)) < half
            lift = np.sin(np.pi * ((t % half) / half)) * scale
            active = (0, 3) if first else (1, 2)
            roll, pitch = (rpy[0], rpy[1]) if rpy is not None else (0.0, 0.0)
            for i in range(4):
                front, left = i < 2, i in (0, 2)
                ext = _TROT_GAIN * (roll * (-1.0 if left else 1.0) + pitch * (1.0 if front else -1.0))
                legs[i, 1] -= ext
                legs[i, 2] += 2.0 * ext
                if i in active:
                    legs[i, 1] += 0.2 * lift
                    legs[i, 2] -= 0.5 * lift
            return legs.reshape(-1)
    if motion == "weight_shift" and robot_name == "g1":
        # G1: lateral weight shift with hip/ankle roll and a slow squat (knee/hip/ankle pitch).
        shift = 0.04 * scale * np.sin(2 * np.pi * 0.4 * t)
        sq = 0.075 * scale * (1 - np.cos(2 * np.pi * 0.3 * t)) / 2
        th = th.copy()
        # left leg 0..5, right leg 6..11: hip_pitch, hip_roll, hip_yaw, knee, ankle_pitch, ankle_roll
        for base in (0, 6):
            th[base + 1] += shift
            th[base + 5] -= shift
            th[base + 0] -= sq
            th[base + 3] += 2 * sq
            th[base + 4] -= sq
        return th
    raise ConfigError(f"motion {motion!r} is not scripted for robot {robot_name!r}")


# ------------------------------------------------------------------------------------ MuJoCo
def build_mujoco_model(pr: PrimeRobot, payload: PayloadConfig, timestep_s: float = 0.002) -> mujoco.MjModel:
    """Compile the MuJoCo model of ``pr`` with a payload box welded to the root link.

    The project's one builder (:func:`contactflow.sim.mujoco_model.build_mujoco_spec`) with
    PRIME's data-generation physics instead of the robot file's ``mujoco:`` section: ideal joints
    (no friction loss, no damping), the pinocchio model's armature, Euler, elliptic cones,
    impratio 1, plain torque motors (the generator computes its PD torques), and PRIME's own
    contact spheres (``prime.yaml``: one sphere per contact point, friction ``mu``) instead of the
    robot's sole geometry.

    Raises:
        ModelError: the URDF does not compile or a contact link is missing.
    """
    robot = pr.robot
    opts = MujocoOptions(timestep_s=float(timestep_s), integrator="euler", cone="elliptic", impratio=1.0,
                         strip_urdf_geometry=True, sole_links=())
    extra = []
    if payload.mass_kg > 0:
        I = payload_inertia(payload)
        extra.append(PointMass(name="payload", parent=root_link(robot), pos=tuple(map(float, payload.offset_m)),
                               mass=float(payload.mass_kg), inertia=tuple(np.diag(I.inertia).tolist())))
    spec = build_mujoco_spec(robot, options=opts, torque_actuators=True, extra_bodies=extra)
    arm = np.asarray(pr.model.armature[6:], dtype=float)
    for i, name in enumerate(robot.joint_names):
        spec.joint(name).armature = float(arm[i])  # PRIME's armature (prime.yaml may override the robot's)
    friction = [pr.config.mu, 0.005, 0.0001]
    for p in pr.points:
        pc = pr.config.contacts[p.name]
        b = spec.body(pc.frame)
        if b is None:
            raise ModelError(f"MuJoCo model: contact {p.name!r}: no body {pc.frame!r}")
        g = b.add_geom(name=f"contact_{p.name}", type=mujoco.mjtGeom.mjGEOM_SPHERE,
                       size=[max(p.radius_m, 1e-3), 0, 0], pos=list(pc.translation))
        g.mass = 0.0
        g.condim = 3
        g.contype = 1
        g.conaffinity = 0
        g.friction = friction
    spec.geom("floor").friction = friction
    try:
        model = spec.compile()
    except ValueError as exc:
        raise ModelError(f"PRIME MuJoCo model of {robot.name!r} does not compile: {exc}") from None
    return model


def _contact_forces(m, d, geom_ids: dict[int, int], nc: int) -> np.ndarray:
    f = np.zeros((nc, 3))
    c6 = np.zeros(6)
    for i in range(d.ncon):
        con = d.contact[i]
        if con.geom1 in geom_ids:
            k, sign = geom_ids[con.geom1], -1.0
        elif con.geom2 in geom_ids:
            k, sign = geom_ids[con.geom2], 1.0
        else:
            continue
        mujoco.mj_contactForce(m, d, i, c6)
        f[k] += sign * (con.frame.reshape(3, 3).T @ c6[:3])
    return f


def simulate_mujoco(pr: PrimeRobot, cfg: GenerateConfig) -> GeneratedRun:
    """Simulate a scripted motion in MuJoCo with PD joint control and log it at ``cfg.rate_hz``.

    Raises:
        ModelError: the model does not compile; SolverError: the robot fell or the state diverged.
    """
    from contactflow.errors import SolverError

    mj = pr.config.mujoco
    timestep = float(mj.get("timestep_s", 0.002))
    robot = pr.robot
    kp = float(mj["kp_nm_per_rad"]) * np.ones(robot.n) if "kp_nm_per_rad" in mj else robot.K.copy()
    kd_default = robot.kd if robot.kd is not None and np.all(robot.kd > 0) else 2.0 * np.ones(robot.n)
    kd = float(mj["kd_nms_per_rad"]) * np.ones(robot.n) if "kd_nms_per_rad" in mj else np.asarray(kd_default, float)
    settle = float(mj.get("settle_s", 1.0))
    m = build_mujoco_model(pr, cfg.payload, timestep)
    d = mujoco.MjData(m)
    sm = state_map(m, robot)
    sub = int(round(1.0 / (cfg.rate_hz * timestep)))
    if abs(sub * timestep * cfg.rate_hz - 1.0) > 1e-9:
        raise ConfigError(f"rate_hz {cfg.rate_hz} is not an integer divisor of the physics rate {1 / timestep:g} Hz")
    q0 = standing_configuration(pr, 0.0)
    sm.set(d, q0)
    geom_ids = {mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, f"contact_{p.name}"): k for k, p in enumerate(pr.points)}
    theta0 = pr.robot.theta_default
    tau_max = pr.robot.tau_max
    n, nc = pr.robot.n, len(pr.points)
    N = int(round(cfg.duration_s * cfg.rate_hz)) + 1
    out_q = np.empty((N, pr.model.nq))
    out_v = np.empty((N, pr.model.nv))
    out_tau = np.empty((N, n))
    out_f = np.empty((N, nc, 3))
    n_settle = int(round(settle * cfg.rate_hz))
    acc_tau = np.zeros(n)
    acc_f = np.zeros((nc, 3))
    for k in range(-n_settle, N):
        if k > -n_settle:
            q, v = sm.get(d)
            if k >= 0:
                out_q[k], out_v[k] = q, v
                out_tau[k] = acc_tau / sub
                out_f[k] = acc_f / sub
        acc_tau[:] = 0.0
        acc_f[:] = 0.0
        if k == N - 1:
            break
        for s in range(sub):
            t = max(k, 0) / cfg.rate_hz + (s * timestep if k >= 0 else 0.0)
            qm, vm = sm.get(d)
            rpy = pin.rpy.matrixToRpy(pin.Quaternion(qm[6], qm[3], qm[4], qm[5]).toRotationMatrix())
            target = joint_targets(cfg.motion if k >= 0 else "stand", t, theta0, cfg.amplitude_scale, pr.robot.name,
                                   rpy=rpy)
            u = pd_torque(target, kp, kd, 0.0, qm[7:], vm[6:], tau_max)
            d.ctrl[:] = u
            mujoco.mj_step(m, d)
            acc_tau += d.actuator_force
            acc_f += _contact_forces(m, d, geom_ids, nc)
        if not np.all(np.isfinite(d.qpos)) or d.qpos[2] < 0.05:
            raise SolverError(f"MuJoCo {cfg.motion} run of {pr.name}: robot fell or diverged at t = {k / cfg.rate_hz:.2f} s")
    info = {"simulator": "mujoco", "mujoco_version": mujoco.__version__, "timestep_s": timestep,
            "kp": kp.tolist(), "kd": kd.tolist()}
    return _finish(pr, cfg, out_q, out_v, out_tau, out_f, info)


def simulate_smoothed(pr: PrimeRobot, cfg: GenerateConfig, kappa: float = 500.0, kp: float = 40.0,
                      kd: float = 1.0, settle_s: float = 0.5) -> GeneratedRun:
    """Simulate with PRIME's own smoothed contact model (self-consistent data) at ``cfg.rate_hz``.

    The true model is the nominal one with the payload added to the trunk; PD torques are held
    over each step, so the logged torque is exactly the one of the model.
    """
    dt = 1.0 / cfg.rate_hz
    dyn = SmoothContactDynamics(pr.model, pr.points, ContactStepConfig(dt_s=dt, kappa=kappa, mu=pr.config.mu),
                                ("root_joint",))
    theta_true = theta_from_inertia(true_trunk_inertia(pr, cfg.payload))
    q = standing_configuration(pr, 0.0005)
    v = np.zeros(pr.model.nv)
    theta0 = pr.robot.theta_default
    tau_max = pr.robot.tau_max
    n, nc = pr.robot.n, len(pr.points)
    N = int(round(cfg.duration_s * cfg.rate_hz)) + 1
    out_q = np.empty((N, pr.model.nq))
    out_v = np.empty((N, pr.model.nv))
    out_tau = np.zeros((N, n))
    out_f = np.zeros((N, nc, 3))
    n_settle = int(round(settle_s * cfg.rate_hz))
    guess = None
    last_tau, last_f = np.zeros(n), np.zeros((nc, 3))
    for k in range(-n_settle, N):
        if k >= 0:
            out_q[k], out_v[k], out_tau[k], out_f[k] = q, v, last_tau, last_f
            if k == N - 1:
                break
        target = joint_targets(cfg.motion if k >= 0 else "stand", max(k, 0) * dt, theta0, cfg.amplitude_scale, pr.robot.name)
        u = pd_torque(target, kp, kd, 0.0, q[7:], v[6:], tau_max)
        r = dyn.step(q, v, u, theta_true, v_guess=guess)
        guess = r.v_next
        q, v = r.q_next, r.v_next
        last_tau, last_f = u, r.force_W
    info = {"simulator": "prime_smoothed", "kappa": kappa, "kp": kp, "kd": kd}
    return _finish(pr, cfg, out_q, out_v, out_tau, out_f, info)


def _finish(pr, cfg, q, v, tau, f, info) -> GeneratedRun:
    rng = np.random.default_rng(cfg.seed)
    nz = cfg.noise.scaled(cfg.noise_scale)
    N = q.shape[0]
    n = pr.robot.n
    qm = q.copy()
    qm[:, :3] += nz.base_position_m * rng.standard_normal((N, 3))
    for k in range(N):
        dq = nz.base_orientation_rad * rng.standard_normal(3)
        if nz.base_orientation_rad == 0:
            continue
        quat = pin.Quaternion(q[k, 6], q[k, 3], q[k, 4], q[k, 5]) * pin.Quaternion(pin.exp3(dq))
        quat.normalize()
        qm[k, 3:7] = quat.coeffs()
    qm[:, 7:] += nz.joint_position_rad * rng.standard_normal((N, n))
    vm = v.copy()
    vm[:, :3] += nz.base_linear_velocity_mps * rng.standard_normal((N, 3))
    vm[:, 3:6] += nz.base_angular_velocity_radps * rng.standard_normal((N, 3))
    vm[:, 6:] += nz.joint_velocity_radps * rng.standard_normal((N, n))
    taum = tau + nz.torque_nm * rng.standard_normal(tau.shape)
    trunk = true_trunk_inertia(pr, cfg.payload)
    nominal = pr.model.inertias[1]
    info = {
        **info,
        "robot": pr.name,
        "config": _plain(dataclasses.asdict(cfg)),
        "trunk_true": describe_inertia(trunk),
        "trunk_nominal": describe_inertia(nominal),
        "theta_trunk_true": theta_from_inertia(trunk).tolist(),
        "contacts": list(pr.contact_names),
        "tau_convention": "mean joint torque over (t_{k-1}, t_k]",
        "force_convention": "mean contact force on the robot over (t_{k-1}, t_k], world frame",
    }
    t = np.arange(N) / cfg.rate_hz
    return GeneratedRun(t, q, v, tau, f, qm, vm, taum, info)


def _plain(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


# ------------------------------------------------------------------------------------ recording
SENSORS_STREAM = "datagen.sensors"
GT_STATE_STREAM = "ground_truth.state"
GT_FORCE_STREAM = "ground_truth.contact_forces"


def force_layout(contact_names) -> list[tuple[str, int]]:
    """Field layout of a per-contact force stream: ``force.<contact>`` (3 each, world, N)."""
    return [(f"force.{c}", 3) for c in contact_names]


def _sole_wrenches(pr: PrimeRobot, run: GeneratedRun) -> dict[str, np.ndarray]:
    """``wrench.<effector>`` (N, 6) of the robot's plane contacts: the true point forces of the
    contact points on the same link, as [f; tau] in the sole frame (LOCAL, about its origin)."""
    out = {}
    model = pr.model
    data = model.createData()
    planes = [c for c in pr.robot.contacts.values() if c.type == "plane"]
    if not planes:
        return out
    for c in planes:
        out[f"wrench.{c.name}"] = np.zeros((run.t.size, 6))
    for k in range(run.t.size):
        pin.framesForwardKinematics(model, data, run.q_true[k])
        for c in planes:
            oMs = data.oMf[model.getFrameId(c.frame)]
            joint = model.frames[model.getFrameId(c.frame)].parentJoint
            w = np.zeros(6)
            for i, p in enumerate(pr.points):
                if model.frames[p.frame_id].parentJoint != joint:
                    continue
                f_loc = oMs.rotation.T @ run.force_W[k, i]
                r_loc = oMs.rotation.T @ (data.oMf[p.frame_id].translation - oMs.translation)
                w[:3] += f_loc
                w[3:] += np.cross(r_loc, f_loc)
            out[f"wrench.{c.name}"][k] = w
    return out


def write_recording(pr: PrimeRobot, run: GeneratedRun, run_dir: str | Path) -> Path:
    """Write ``run`` as a contactflow recording (see the module docstring for the streams).

    Returns:
        The run directory.
    """
    import json

    run_dir = Path(run_dir)
    spec = port_specs(pr.robot, float(run.info["config"]["rate_hz"]))["sensors"]
    writer = RecordingWriter(run_dir, {"dataflow": "", "robot": pr.name, "git_revision": git_revision(_REPO),
                                       "prime_datagen": run.info})
    layout = [(f.name, f.size) for f in spec.fields]
    ws = writer.stream(SENSORS_STREAM, spec.size, {"source": "datagen/sensors", "contract": "sensors",
                                                   "layout": json.dumps(layout)})
    gs_layout = [("q", pr.model.nq), ("v", pr.model.nv)]
    wg = writer.stream(GT_STATE_STREAM, pr.model.nq + pr.model.nv,
                       {"source": "ground_truth/state", "contract": "prime_ground_truth_state", "layout": json.dumps(gs_layout)})
    fl = force_layout(pr.contact_names)
    wf = writer.stream(GT_FORCE_STREAM, 3 * len(pr.points),
                       {"source": "ground_truth/contact_forces", "contract": "prime_contact_forces", "layout": json.dumps(fl)})
    N = run.t.size
    wrenches = _sole_wrenches(pr, run)
    for k in range(N):
        t = float(run.t[k])
        fin = k == N - 1
        vals = spec.pack({
            "t": t, "q": run.q_meas[k], "v": run.v_meas[k], "tau": run.tau_meas[k],
            "imu_quat": run.q_meas[k, 3:7], "imu_gyro": run.v_meas[k, 3:6], "imu_acc": np.zeros(3),
            **{name: w[k] for name, w in wrenches.items()},
        })
        ws.append(k, t, vals, fin)
        wg.append(k, t, np.r_[run.q_true[k], run.v_true[k]], fin)
        wf.append(k, t, run.force_W[k].reshape(-1), fin)
    writer.close(messages=3 * N)
    return run_dir
