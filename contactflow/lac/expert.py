"""Model-based compliant standing controller under LAC's stiffness contract (``lac_expert``).

``LacExpert(config, robot)`` reads the same inputs as the ``lac_policy`` node (the robot ``sensors``
and the ``teleop_command``) and returns the same PD joint command ``{q_target, kp, kd, tau_ff, ok}``
that the driver applies at every physics step, ``tau = kp (q_target - q) - kd qdot + tau_ff``
clamped to the effort limits. It runs at the policy rate (50 Hz) and **stands**: the base velocity
commands (``lin_vel``, ``ang_vel``) are not executed (reported in the diagnostics, logged once).

One step (the expert of lac.md §0 / §3, "BC/DAgger from a model-based expert"):

1. **Wrench estimation** (the expert never sees the true external wrench;
   :class:`~contactflow.lac.estimation.WrenchEstimator`): arm links from the joint rows of the
   momentum balance over the last tick (the PD command in force, the model's inverse dynamics),
   the torso from the sole wrenches (horizontal force balance with ``m c_ddot``).
2. **Virtual admittance** per loaded link under the commanded K / K_theta: LAC eqs. (7)-(10),
   :class:`~contactflow.lac.synthesis.VirtualAdmittance` (reused), driven by the estimated force and,
   on the hands, by the estimated couple as the virtual torque (so the steady rotation is
   C / K_theta as in SoftMimic's ``R = Exp(tau / K_theta) R_ref``; LAC's passive-chain torque of
   eq. (6) is a training-data device and is not used here). The torso has no angular channel
   (LAC §III: K_torso is linear only). A hand's displacement is softly bounded,
   ``d_max tanh(|d| / d_max)`` (reach; strictly increasing, so the response stays monotonic in K).
3. **Whole-body differential IK**, LAC eq. (11): :class:`~contactflow.lac.ik.WholeBodyIK` (reused)
   with the hand admittance targets, the commanded upper-body posture and a base reference that
   carries the torso channel (the torso link is rigid on the pelvis up to the waist yaw, so its
   admittance displacement is realised as a horizontal pelvis displacement, bounded so that the
   predicted static CoP under the torso and hand loads stays inside the soles: a CoP-aware CoM
   shift, lac.md §0; when the hand loads alone would push the CoP out, the pelvis leans back). The legs of the
   IK stay at stance; a foot-anchored leg IK (6 x 6 Newton steps per leg) then gives the leg angles
   that put the pelvis at the IK's base pose with both soles at their anchors.
4. **Static torque feed-forward**, contact-consistent: with the measured state,
   ``S^T tau + J_c^T lam = g(q) - J_e^T w_est``; the base rows fix the stacked sole wrenches ``lam``
   (weighted least norm: sole moments cost more than forces), the joint rows give ``tau``
   (lac.md §3).
5. **Balance feedback** (lac.md §0: LAC's ankle gains, 2 x 28.5 N m/rad, are below m g h ~ 195 N m/rad,
   so PD alone falls in 1.3 s): DCM control of the linear inverted pendulum
   (Englsberger et al., "Three-dimensional bipedal walking control based on divergent component of
   motion", IEEE T-RO 2015): ``xi = c + cdot / omega``, desired CoP shift
   ``dp = cdot / omega + k_xi (xi - c_ref) + (slow CoM integral)``, clamped to the support
   rectangle, realised as the least-norm change of the sole wrenches that moves the ground
   moment by ``(dp_y F_z, -dp_x F_z)`` (load moved between the feet for lateral shifts, ankle
   moments for sagittal ones), mapped to joint torques through ``-J_c^T``.
6. ``q_target`` = the IK / leg-IK joint angles, ``kp``/``kd`` = LAC's own PD gains from the robot file,
   ``tau_ff`` = steps 4 + 5. A failed IK QP, a leg IK that does not converge, or a non-finite output
   degrades to the last safe command with ``ok = 0`` (logged with the reason).

**Base state: simulation truth.** The expert reads the floating base from the ``sensors`` message as
if it were measured: ``q[0:7]`` (pelvis position and orientation in world) anchors the soles and the
pelvis reference at :meth:`LacExpert.reset` and places every link; ``v[0:6]`` (base twist) enters
the CoM velocity of the DCM feedback, the inverse dynamics of the arm-force estimate and the
``m c_ddot`` of the torso-force estimate. The simulator drivers publish the TRUE base state (their
``sensors`` metadata says ``base_state: simulation_truth``). A real robot measures the joints and
the IMU, not the base position or linear velocity, so on hardware the expert needs a base state
estimator upstream of it (leg odometry fused with the IMU, e.g. a Kalman filter), and the sole
wrenches of the torso-force estimate need foot force sensors the stock G1 does not have. Its
measured behaviour here (docs/lac_teleop.md, ``docs/lac_expert_sweep.json``) holds for true base
states; with an estimator it is not measured. (The learned ``lac_policy`` reads only the IMU and
the joints.)

Conventions: ``q`` (30,) pinocchio free-flyer configuration (quaternion xyzw), ``v`` (29,) with the
base twist in the base frame, spatial vectors linear first, SI units.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path
from typing import Mapping

import numpy as np
import pinocchio as pin

from contactflow.config import load_config, read_yaml
from contactflow.errors import ConfigError
from contactflow.lac.config import AdmittanceCfg, IKCfg, LacConfig, check_stiffness
from contactflow.lac.estimation import EstimatorCfg, WrenchEstimator
from contactflow.lac.ik import LinkTarget, WholeBodyIK
from contactflow.lac.model import UPPER_GROUPS, LacRobot
from contactflow.lac.synthesis import VirtualAdmittance
from contactflow.lac.teleop import TeleopConfig, load_teleop_config
from contactflow.robot import Robot
from contactflow.sim.state import base_rotation, yaw

__all__ = ["BalanceCfg", "LegIKCfg", "ExpertConfig", "Output", "LacExpert", "load_expert_config",
           "default_expert_config_path"]

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, kw_only=True)
class BalanceCfg:
    """DCM balance feedback (Englsberger T-RO 2015, LIPM).

    Attributes:
        k_xi: DCM feedback gain k_xi [-] (> 0; lac.md §3: the robot stands for k_xi >= 1.5).
        cop_margin_m: the desired CoP shift is clamped so the CoP stays this far inside the
            support rectangle of the soles [m].
        foot_half_length_m, foot_half_width_m: support rectangle of one sole about its frame [m]
            (the G1 foot spheres span x in [-0.085, 0.085], y in [-0.03, 0.03] about the sole frame).
        com_integral_gain: slow integral on the CoM error (removes the steady drift from
            model mismatch) [1/s]; 0 disables.
        com_integral_limit_m: clamp of that integral [m].
        moment_weight: cost of a sole moment relative to a vertical force redistribution between
            the soles, [m^2] (large: lateral CoP shifts move load between the feet instead of
            rolling one ankle beyond its 3 cm half width).
    """

    k_xi: float = 2.0
    cop_margin_m: float = 0.02
    foot_half_length_m: float = 0.085
    foot_half_width_m: float = 0.03
    com_integral_gain: float = 0.5
    com_integral_limit_m: float = 0.03
    moment_weight: float = 100.0

    def __post_init__(self):
        if not self.k_xi > 0:
            raise ConfigError(f"k_xi: must be > 0, got {self.k_xi!r}")
        for n in ("cop_margin_m", "com_integral_gain", "com_integral_limit_m"):
            if getattr(self, n) < 0:
                raise ConfigError(f"{n}: must be >= 0, got {getattr(self, n)!r}")
        for n in ("foot_half_length_m", "foot_half_width_m"):
            if not getattr(self, n) > self.cop_margin_m:
                raise ConfigError(f"{n}: must be > cop_margin_m ({self.cop_margin_m:g}), got {getattr(self, n)!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class LegIKCfg:
    """Foot-anchored leg IK (damped Newton on the sole pose error, LOCAL frame).

    Attributes:
        iterations: Newton steps per control tick (warm-started from the previous tick).
        damping: Levenberg-Marquardt damping on the 6 x 6 solve [-].
        tolerance: residual |log6| above which the step counts as failed [m, rad].
    """

    iterations: int = 3
    damping: float = 1e-6
    tolerance: float = 1e-3

    def __post_init__(self):
        if self.iterations < 1:
            raise ConfigError(f"iterations: must be >= 1, got {self.iterations!r}")
        if self.damping < 0 or not self.tolerance > 0:
            raise ConfigError("damping must be >= 0 and tolerance > 0")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExpertConfig:
    """All parameters of :class:`LacExpert` (``robots/g1/lac_expert.yaml``).

    Attributes:
        robot: robot file name (the 23-DoF G1 of LAC).
        rate_hz: control rate [Hz] (LAC: 50).
        base_height_m: clamp of the commanded pelvis height [m] (LAC: [0.56, 0.78]).
        torso_max_displacement_m: horizontal bound of the torso admittance displacement [m]: with the
            feet anchored the pelvis cannot travel further without losing balance.
        torso_cop_margin_m: the torso displacement is also bounded so that the predicted static
            CoP (CoM shift plus the moments of the estimated torso and hand forces) stays this far
            inside the support rectangle (already shrunk by ``balance.cop_margin_m``) [m]; the
            bound may be negative (lean back against hand pushes).
        arm_max_displacement_m: soft bound d_max of a hand's admittance displacement from its
            reference, ``d_max tanh(|d| / d_max)`` [m] (reach: near full extension the arm
            Jacobian, hence the force estimate, degrades and the arm meets its joint limits).
        arm_links, torso_link: the loaded links of the arms (left, right) and the torso
            (names of ``lac_links`` in the robot file).
        admittance: LAC eqs. (7)-(10) parameters (the same dataclass as the augmentation).
        ik: LAC eq. (11) parameters. Here ``w_base_pos``/``w_base_ori`` are large so that the base
            follows its reference (the base of a standing robot is moved by the legs, not by the
            hands), the link position weight is large and the posture weight small so that the
            hand reaches its admittance target (with LAC's augmentation weights the posture term
            acts as a second spring: 40 % of F/K at K = 100 N/m, measured), and the orientation
            weight is low (5 arm joints cannot hold the orientation while translating); the step
            damping (0.01) removes a tick-to-tick alternation of the arm targets measured under a
            1.5 N m hand couple at K_theta = 100 N m/rad.
        estimator: external wrench estimation.
        balance: DCM feedback.
        leg_ik: foot-anchored leg IK.
    """

    robot: str = "g1"
    rate_hz: float = 50.0
    base_height_m: tuple[float, float] = (0.56, 0.78)
    torso_max_displacement_m: float = 0.06
    torso_cop_margin_m: float = 0.02
    arm_max_displacement_m: float = 0.25
    arm_links: tuple[str, str] = ("left_wrist_roll_link", "right_wrist_roll_link")
    torso_link: str = "torso_link"
    admittance: AdmittanceCfg = dataclasses.field(default_factory=AdmittanceCfg)
    ik: IKCfg = dataclasses.field(default_factory=lambda: IKCfg(
        w_contact_pos=100.0, w_contact_ori=2.0, w_base_pos=1000.0, w_base_ori=1000.0, w_posture=0.01, damping=0.01))
    estimator: EstimatorCfg = dataclasses.field(default_factory=EstimatorCfg)
    balance: BalanceCfg = dataclasses.field(default_factory=BalanceCfg)
    leg_ik: LegIKCfg = dataclasses.field(default_factory=LegIKCfg)

    def __post_init__(self):
        if not self.rate_hz > 0:
            raise ConfigError(f"rate_hz: must be > 0, got {self.rate_hz!r}")
        lo, hi = self.base_height_m
        if not 0 < lo <= hi:
            raise ConfigError(f"base_height_m: expected [low, high] with 0 < low <= high, got {list(self.base_height_m)}")
        for n in ("torso_max_displacement_m", "arm_max_displacement_m", "torso_cop_margin_m"):
            if not getattr(self, n) >= 0:
                raise ConfigError(f"{n}: must be >= 0, got {getattr(self, n)!r}")
        if len(self.arm_links) != 2:
            raise ConfigError(f"arm_links: expected [left, right], got {list(self.arm_links)}")


def default_expert_config_path() -> Path:
    """The shipped reference file ``robots/g1/lac_expert.yaml``."""
    from contactflow.robot import robots_dir

    return robots_dir() / "g1" / "lac_expert.yaml"


def load_expert_config(path: str | Path | None = None, override: Mapping | None = None) -> ExpertConfig:
    """Load an :class:`ExpertConfig` from YAML (the shipped file when None), strict keys.

    The file is either a flat ``ExpertConfig`` mapping (``robots/g1/lac_expert.yaml``) or a graph
    configuration with a ``lac_expert:`` section (the other sections are not read here).

    Args:
        path: YAML file. override: optional mapping merged over the file (tests, dataflow args).

    Raises:
        ConfigError: unreadable file, unknown key, wrong type or out-of-range value (file and key named).
    """
    from contactflow.config import merge

    path = Path(path) if path is not None else default_expert_config_path()
    raw = read_yaml(path)
    source = str(path)
    if isinstance(raw, Mapping) and "lac_expert" in raw:
        raw, source = raw["lac_expert"], f"{path}:lac_expert"
    if raw is not None and not isinstance(raw, Mapping):
        raise ConfigError(f"{source}: expected a mapping of ExpertConfig keys (or a 'lac_expert:' section), "
                          f"got {type(raw).__name__}")
    return load_config(ExpertConfig, merge(raw, override), source=source)


@dataclasses.dataclass(frozen=True)
class Output:
    """Result of :meth:`LacExpert.step`.

    Attributes:
        command: the ``joint_command`` fields: ``q_target`` (23,) [rad], ``kp`` (23,) [N m/rad],
            ``kd`` (23,) [N m s/rad], ``tau_ff`` (23,) [N m], ``ok`` (1,) (1 fresh, 0 degraded).
        diagnostics: estimates and internal signals (``f_est.<link>`` (3,) world [N],
            ``c_est.<link>`` (3,) [N m], ``x_vir.<link>`` (3,) [m], ``cop_shift`` (2,) [m],
            ``xi`` (2,) [m], ``ik_status``, ``step_time_s``, ``velocity_command_ignored``, ``reason``).
    """

    command: dict
    diagnostics: dict


class LacExpert:
    """Compliant standing expert for the 23-DoF G1 (module docstring for the math).

    Args:
        config: :class:`ExpertConfig`.
        robot: the loaded ``g1`` :class:`Robot` (PD actuation, ``actuators.kd_nms_per_rad``,
            ``teleop.arm_joints``, ``lac_links``, two plane contacts).
        teleop: the teleop limits whose stiffness ranges the expert enforces; ``None`` = the
            robot's (:func:`contactflow.lac.teleop.load_teleop_config`, ``robots/<robot>/teleop.yaml``):
            the one set of ranges the teleop also validates with.
        lockstep: every reading follows the expert's previous output (the lockstep driver: the
            command in force over the last tick is the one sent last), so the arm rows of the
            wrench estimate use that PD command's tick average. ``False`` (a realtime graph, where
            ticks can be skipped and the driver may still apply an older command): the measured
            joint torques ``tau`` of each reading are used instead. A lockstep expert whose
            readings stop coming one period apart (a wall-clock driver: the hardware, its emulator)
            switches to the measured torques by itself (``WrenchEstimator.wall_clock``).

    Raises:
        ConfigError: a configured link is not a LAC link of the right group, the robot file lacks
            the PD damping or arm joints, or the robot has not exactly two plane contacts.
    """

    def __init__(self, config: ExpertConfig, robot: Robot, teleop: TeleopConfig | None = None, *,
                 lockstep: bool = True):
        if getattr(robot, "actuation", None) != "pd":
            raise ConfigError(f"{robot.file_label()}: lac_expert needs a PD robot ('actuation: pd')")
        self.cfg = config
        self.robot = robot
        self.teleop = load_teleop_config(robot) if teleop is None else teleop
        self.lockstep = bool(lockstep)
        self.lac = LacRobot(robot)
        model = robot.model
        self.model = model
        self.data = model.createData()
        self._leg_data = model.createData()
        self.dt = 1.0 / config.rate_hz
        label = robot.file_label()
        # ------------------------------------------------------------- links
        self.i_arm = tuple(self.lac.link_index(n) for n in config.arm_links)
        self.i_torso = self.lac.link_index(config.torso_link)
        for i, grp in zip(self.i_arm, ("left", "right")):
            if self.lac.link_groups[i] != grp:
                raise ConfigError(f"arm_links: {self.lac.link_names[i]} is in group {self.lac.link_groups[i]!r}, expected {grp!r}")
        if self.lac.link_groups[self.i_torso] != "torso":
            raise ConfigError(f"torso_link: {config.torso_link} is not in the torso group")
        # ------------------------------------------------------------- PD gains (LAC's own)
        self.kp = robot.K.copy()
        self.kd = np.asarray(robot.kd, float).copy()
        # ------------------------------------------------------------- command mapping (by name)
        arm_joints = list((robot.raw.get("teleop") or {}).get("arm_joints") or [])
        upper_names = [model.names[j] for j in self.lac.link_joint_ids]
        missing = [j for j in upper_names[1:] if j not in arm_joints]
        if missing or len(arm_joints) != 10:
            raise ConfigError(f"{label}: teleop.arm_joints must name the 10 arm joints {upper_names[1:]}; missing {missing}")
        self._arm_to_upper = np.array([arm_joints.index(j) for j in upper_names[1:]])
        # ------------------------------------------------------------- contacts (two soles)
        planes = [c for c in robot.contacts.values() if c.type == "plane"]
        if len(planes) != 2:
            raise ConfigError(f"{label}: lac_expert needs exactly two plane (sole) contacts, got {len(planes)}")
        self.contacts = tuple(planes)
        self._sole_fid = [c.frame_id for c in planes]
        self._leg_v = []
        for c in planes:
            parent = model.frames[c.frame_id].parentJoint
            joints = [j for j in model.supports[parent] if j > 1]
            self._leg_v.append(np.array([model.joints[j].idx_v for j in joints]))
        # ------------------------------------------------------------- stages
        self.ik = WholeBodyIK(config.ik, self.lac, self.dt, config.base_height_m)
        self._adm_cfg = LacConfig(admittance=config.admittance)
        self.estimator = WrenchEstimator(config.estimator, robot, LacRobot(robot), self.i_arm, self._sole_fid, self.dt)
        self._mg = robot.mass * 9.81
        self._adm: dict = {}
        self._reset_done = False
        self._last_reason: str | None = None
        #: ticks answered with the last safe command (ok = 0) since construction
        self.n_degraded = 0

    # ------------------------------------------------------------------ helpers
    def _loaded_point(self, i: int, x_com: np.ndarray, R: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(position (3,) [m], orientation (3, 3)) of link ``i``'s loaded point (where the estimator
        assumes the force acts: the URDF link's own CoM, or ``arm_point_local_m`` on the hands)
        from its reduced-model CoM pose ``x_com`` (3,) [m], ``R`` (3, 3)."""
        p = self.estimator.point_local.get(i)
        if p is None:
            return x_com, R
        return x_com + R @ (p - self.lac.link_com_local[i]), R

    def _upper_ref(self, command: Mapping) -> np.ndarray:
        qu = np.empty(11)
        qu[0] = float(np.asarray(command["waist_yaw"]).reshape(-1)[0])
        qu[1:] = np.asarray(command["q_ref_arms"], float)[self._arm_to_upper]
        return np.clip(qu, self.ik.q_lo[self.lac.upper_v - 6], self.ik.q_hi[self.lac.upper_v - 6])

    def _admittances(self, k5: np.ndarray) -> None:
        """(Re)build the virtual admittances when the commanded stiffness changes (state kept)."""
        new = {}
        for i in (*self.i_arm, self.i_torso):
            gl, ga = UPPER_GROUPS[self.lac.link_groups[i]]
            a = VirtualAdmittance(self._adm_cfg, float(k5[gl]), None if ga is None else float(k5[ga]), self.dt)
            old = self._adm.get(i)
            if old is not None:
                a.xd_vir, a.w_vir = old.xd_vir, old.w_vir
            new[i] = a
        self._adm = new
        self._k5 = k5.copy()

    def _legs(self, q_cmd: np.ndarray) -> tuple[np.ndarray, float]:
        """Leg angles putting both soles at their anchors for the pelvis pose ``q_cmd[0:7]``.

        Damped Newton on ``log6(oMf^-1 anchor)`` (LOCAL sole frame) with the 6 x 6 Jacobian of
        each leg; warm-started from ``q_cmd``'s leg angles.

        Returns:
            (q_cmd with the new leg angles (30,), worst residual norm after the last step).
        """
        m, d, lc = self.model, self._leg_data, self.cfg.leg_ik
        q = q_cmd.copy()
        res = np.inf
        for _ in range(lc.iterations):
            pin.computeJointJacobians(m, d, q)
            pin.updateFramePlacements(m, d)
            res = 0.0
            for fid, anchor, lv in zip(self._sole_fid, self._anchors, self._leg_v):
                err = pin.log6(d.oMf[fid].actInv(anchor)).vector
                J = pin.getFrameJacobian(m, d, fid, pin.ReferenceFrame.LOCAL)[:, lv]
                dq = np.linalg.solve(J.T @ J + lc.damping * np.eye(6), J.T @ err)
                q[lv + 1] += dq  # joint q index = v index + 1 (free flyer)
                res = max(res, float(np.linalg.norm(err)))
        pin.framesForwardKinematics(m, d, q)
        res = max(float(np.linalg.norm(pin.log6(d.oMf[f].actInv(a)).vector)) for f, a in zip(self._sole_fid, self._anchors))
        return q, res

    def _support_rect(self) -> tuple[np.ndarray, np.ndarray]:
        b = self.cfg.balance
        corners = []
        for a in self._anchors:
            for sx in (-1, 1):
                for sy in (-1, 1):
                    corners.append(a.act(np.array([sx * b.foot_half_length_m, sy * b.foot_half_width_m, 0.0]))[:2])
        corners = np.array(corners)
        return corners.min(axis=0) + b.cop_margin_m, corners.max(axis=0) - b.cop_margin_m

    # ------------------------------------------------------------------ API
    @property
    def ready(self) -> bool:
        """True once :meth:`reset` ran (a safe command exists)."""
        return self._reset_done

    def reset(self, sensors: Mapping) -> None:
        """Initialise from the first ``sensors`` message (the robot standing on both feet).

        Anchors the soles where they are (flattened to zero roll and pitch), sets the pelvis
        reference so that the commanded CoM is above the middle of the soles, starts the IK from
        the measured upper body and restarts the wrench estimator (its warm-up ramp: the first
        readings hold the contact build-up).

        Args:
            sensors: mapping with ``q`` (30,), ``v`` (29,), ``tau`` (23,), ``wrench.<sole contact>`` (6,).
        """
        m = self.model
        q = np.asarray(sensors["q"], float).copy()
        pin.framesForwardKinematics(m, self.data, q)
        self._anchors = [self.data.oMf[f].copy() for f in self._sole_fid]
        # anchors flat on the ground plane they stand on (roll/pitch removed, mean height kept)
        for k, a in enumerate(self._anchors):
            self._anchors[k] = pin.SE3(pin.rpy.rpyToMatrix(0.0, 0.0, yaw(a.rotation)), a.translation.copy())
        mid = 0.5 * (self._anchors[0].translation + self._anchors[1].translation)
        self._yaw0 = yaw(base_rotation(q))
        self._R_base_ref = pin.rpy.rpyToMatrix(0.0, 0.0, self._yaw0)
        # IK state: base upright at the measured position, legs at stance, upper body measured
        q_ik = self.lac.reference_configuration(q[self.lac.upper_q], float(q[2]), self._yaw0)
        q_ik[0:2] = q[0:2]
        com = pin.centerOfMass(m, self.data, q_ik)
        q_ik[0:2] += mid[0:2] - com[0:2]  # CoM above the middle of the soles
        self._p_nom = q_ik[0:3].copy()
        self._q_ik = q_ik
        self._d_torso = np.zeros(3)
        self._com_int = np.zeros(2)
        self._adm = {}
        self._prev_poses = None
        self._admittances(np.array([300.0, 300.0, 300.0, 50.0, 50.0]))
        q_cmd = q_ik.copy()
        q_cmd[7:][self.lac.leg_v - 6] = q[7:][self.lac.leg_v - 6]
        q_cmd, _ = self._legs(q_cmd)
        # CoP-aware torso bound: CoM shift per pelvis shift (legs re-solved), nominal CoM, support
        self._c0 = pin.centerOfMass(m, self._leg_data, q_cmd)[:2].copy()
        q_sh = q_cmd.copy()
        q_sh[0:2] += 0.01
        q_sh, _ = self._legs(q_sh)
        self._alpha = np.clip((pin.centerOfMass(m, self._leg_data, q_sh)[:2] - self._c0) / 0.01, 0.2, 1.0)
        self._support = self._support_rect()
        self._z_ground = float(mid[2])
        self._last = {
            "q_target": q_cmd[7:].copy(),
            "kp": self.kp.copy(),
            "kd": self.kd.copy(),
            "tau_ff": np.zeros(self.robot.n),
            "ok": np.zeros(1),
        }
        self._q_cmd = q_cmd
        self._applied = False  # no command of ours in force yet
        self.estimator.reset(sensors)
        self._warned_vel = False
        self._reset_done = True

    def step(self, sensors: Mapping, command: Mapping) -> Output:
        """One 50 Hz control step.

        Args:
            sensors: ``q`` (30,), ``v`` (29,), ``tau`` (23,) applied joint torques [N m],
                ``wrench.<sole>`` (6,) sole LOCAL ground reaction [N, N m].
            command: teleop_command fields: ``lin_vel`` (2,), ``ang_vel`` (1,) (ignored: the expert
                stands), ``base_height`` (1,) [m], ``waist_yaw`` (1,) [rad], ``q_ref_arms`` (10,)
                [rad] (robot file ``teleop.arm_joints`` order), ``stiffness`` (5,) RAW
                ``[K_L, K_R, K_T]`` [N/m], ``[K_L^theta, K_R^theta]`` [N m/rad].

        Returns:
            Output. On a failed stage the last safe command with ``ok = 0`` (reason in diagnostics).

        Raises:
            ConfigError: the stiffness command is outside the robot's teleop ranges (names the channel).
        """
        t0 = time.perf_counter()
        if not self._reset_done:
            self.reset(sensors)
        cfg, lac, m = self.cfg, self.lac, self.model
        diag: dict = {}
        q = np.asarray(sensors["q"], float)
        v = np.asarray(sensors["v"], float)
        t = self.teleop
        k5 = check_stiffness(np.asarray(command["stiffness"], float), k_lin_range=t.stiffness_lin_range_n_per_m,
                             k_ang_range=t.stiffness_ang_range_nm_per_rad, source="the robot's teleop limits")
        if not np.array_equal(k5, self._k5):
            self._admittances(k5)
        vel = np.concatenate([np.asarray(command["lin_vel"], float).reshape(-1), np.asarray(command["ang_vel"], float).reshape(-1)])
        ignored = bool(np.any(np.abs(vel) > 1e-9))
        diag["velocity_command_ignored"] = ignored
        if ignored and not self._warned_vel:
            log.warning("lac_expert stands: base velocity command %s ignored", np.round(vel, 3).tolist())
            self._warned_vel = True
        h_cmd = float(np.clip(np.asarray(command["base_height"], float).reshape(-1)[0], *cfg.base_height_m))
        qu_ref = self._upper_ref(command)

        # 1. wrench estimation at the measured state
        # the command in force since the last reading is the one sent last tick (lockstep driver);
        # without lockstep it is not known: the measured joint torques are used
        est = self.estimator.step(sensors, self._last if (self._applied and self.lockstep) else None)
        for n, i in enumerate(self.i_arm):
            diag[f"f_est.{lac.link_names[i]}"] = est.f_arm[n]
            diag[f"c_est.{lac.link_names[i]}"] = est.c_arm[n]
        diag[f"f_est.{lac.link_names[self.i_torso]}"] = est.f_torso

        # 2. reference poses and admittances (IK state q_ik is the admittance's solved state)
        p_ref = self._p_nom.copy()
        p_ref[2] = h_cmd
        q_ref = lac.reference_configuration(qu_ref, h_cmd, self._yaw0)
        q_ref[0:3] = p_ref + self._d_torso
        prev = self._prev_poses
        lac.update(self._q_ik)
        links = (*self.i_arm, self.i_torso)
        cur = {i: self._loaded_point(i, *lac.link_pose(i)) for i in links}
        if prev is None:
            prev = cur
        refs = {i: self._loaded_point(i, *xr) for i, xr in zip(links, lac.link_poses_at(q_ref, links))}
        q_ref0 = q_ref.copy()
        q_ref0[0:3] = p_ref
        x_ref_torso = self._loaded_point(self.i_torso, *lac.link_poses_at(q_ref0, [self.i_torso])[0])[0]
        targets = []
        for n, i in enumerate(links):
            x, R = cur[i]
            xd = (x - prev[i][0]) / self.dt
            w = pin.log3(R @ prev[i][1].T) / self.dt
            if i == self.i_torso:
                f = np.array([est.f_torso[0], est.f_torso[1], 0.0])
                x_vir, _, _, _ = self._adm[i].step(x, R, xd, w, x_ref_torso, R, f, np.zeros(3))
                d = x_vir - x_ref_torso
                d[2] = 0.0
                nd = float(np.linalg.norm(d))
                lim = cfg.torso_max_displacement_m
                d = d if nd <= lim else d * (lim / nd)
                # CoP-aware bound (SoftMimic's CoP-aware CoM shift, lac.md §0): the static CoP,
                # c0 + alpha d + sum_e F_e,xy z_e / (m g) over the torso and hand loads, must stay
                # torso_cop_margin_m inside the soles
                s_cop = f[:2] * (x_ref_torso[2] - self._z_ground) / self._mg
                for na, ia in enumerate(self.i_arm):
                    s_cop = s_cop + est.f_arm[na][:2] * (cur[ia][0][2] - self._z_ground) / self._mg
                lo, hi = self._support
                e = cfg.torso_cop_margin_m
                d_lo = (lo + e - self._c0 - s_cop) / self._alpha
                d_hi = (hi - e - self._c0 - s_cop) / self._alpha
                # inside the bounds; a negative bound (the loads alone push the CoP out) leans back
                d[:2] = np.where(d_lo <= d_hi, np.clip(d[:2], d_lo, d_hi), 0.5 * (d_lo + d_hi))
                self._d_torso = d
                diag[f"x_vir.{lac.link_names[i]}"] = x_vir
                continue
            x_vir, R_vir, _, _ = self._adm[i].step(x, R, xd, w, refs[i][0], refs[i][1], est.f_arm[n], est.c_arm[n])
            # soft reach bound: |x_vir - x_ref| = d_max tanh(|d| / d_max) (strictly increasing in |d|,
            # so the response stays monotonic in K; near full extension the arm Jacobian, hence the
            # force estimate, degrades and the arm meets its joint limits)
            dx = x_vir - refs[i][0]
            ndx = float(np.linalg.norm(dx))
            dmax = cfg.arm_max_displacement_m
            if ndx > 1e-9 and dmax > 0:
                x_vir = refs[i][0] + dx * (dmax * np.tanh(ndx / dmax) / ndx)
            targets.append(LinkTarget(i, x_vir, R_vir, lac.robot.model.inertias[lac.link_joint_ids[i]].mass,
                                      self.estimator.point_local[i]))
            diag[f"x_vir.{lac.link_names[i]}"] = x_vir
            diag[f"x_ik.{lac.link_names[i]}"] = x
        self._prev_poses = cur
        p_base_ref = p_ref + self._d_torso

        # 3. whole-body IK (LAC eq. 11), then the foot-anchored legs
        res = self.ik.step(self._q_ik, targets, qu_ref, p_base_ref, self._R_base_ref, updated=True)
        for _ in range(cfg.ik.iterations - 1):
            if not res.qp.found:
                break
            res = self.ik.step(res.q, targets, qu_ref, p_base_ref, self._R_base_ref)
        diag["ik_status"] = res.qp.status
        if not res.qp.found:
            return self._degraded(f"IK QP failed ({res.qp.status}: {res.qp.message})", diag, t0)
        q_ik = res.q
        q_cmd = q_ik.copy()
        q_cmd[7:][lac.leg_v - 6] = self._q_cmd[7:][lac.leg_v - 6]
        q_cmd, leg_res = self._legs(q_cmd)
        diag["leg_ik_residual"] = leg_res
        if not leg_res < cfg.leg_ik.tolerance:
            return self._degraded(f"leg IK residual {leg_res:.3g} above {cfg.leg_ik.tolerance:g}", diag, t0)

        # 4. static feed-forward at the measured state
        pin.computeJointJacobians(m, self.data, q)
        pin.updateFramePlacements(m, self.data)
        g = pin.computeGeneralizedGravity(m, self.data, q)
        Jc = [pin.getFrameJacobian(m, self.data, f, pin.ReferenceFrame.LOCAL) for f in self._sole_fid]
        h = g - self.estimator.generalized_force(est)  # g - J_e^T w_est
        A = np.hstack([J[:6, :6].T for J in Jc])  # base rows of J_c^T (6, 12)
        b = cfg.balance
        # sole moments cost moment_weight [m^2] x a force: the load is shared by force distribution,
        # the feet's CoPs stay near their centres (a G1 sole is only 6 cm wide)
        Wi = 1.0 / np.tile([1.0, 1.0, 1.0, b.moment_weight, b.moment_weight, b.moment_weight], 2)
        lam = Wi * (A.T @ np.linalg.solve((A * Wi) @ A.T, h[:6]))

        # 5. DCM balance: extra sole moments for the CoP shift
        com = pin.centerOfMass(m, self.data, q, v)
        vcom = self.data.vcom[0].copy()
        pin.centerOfMass(m, self._leg_data, q_cmd)
        c_ref = self._leg_data.com[0].copy()
        omega = np.sqrt(9.81 / max(com[2] - self._anchors[0].translation[2], 0.3))
        e = com[:2] - c_ref[:2]
        self._com_int = np.clip(self._com_int + b.com_integral_gain * e * self.dt, -b.com_integral_limit_m, b.com_integral_limit_m)
        xi = com[:2] + vcom[:2] / omega
        dp = vcom[:2] / omega + b.k_xi * (xi - c_ref[:2]) + self._com_int
        # static CoP of lam (world), then clamp the shifted CoP into the support rectangle
        fz_tot, mom = 0.0, np.zeros(2)
        for k, fid in enumerate(self._sole_fid):
            M = self.data.oMf[fid]
            fw = M.rotation @ lam[6 * k:6 * k + 3]
            tw = M.rotation @ lam[6 * k + 3:6 * k + 6] + np.cross(M.translation, fw)
            fz_tot += fw[2]
            mom += np.array([-tw[1], tw[0]])  # CoP x = -M_y / F_z, y = M_x / F_z (ground at z ~ 0)
        p0 = mom / max(fz_tot, 1e-6)
        lo, hi = self._support_rect()
        dp = np.clip(p0 + dp, lo, hi) - p0
        # realise the CoP shift: the ground moment about the soles must change by
        # dM = (dp_y F_z, -dp_x F_z); unknowns per sole u = [df_z, dm_x, dm_y] (world axes, about the
        # sole origin) with sum df_z = 0; weighted least norm (a sole moment costs
        # moment_weight / 1 m^2 of vertical force: lateral shifts move load between the feet,
        # sagittal ones use the ankles)
        P = [self.data.oMf[f].translation for f in self._sole_fid]
        A = np.array([[1.0, 0.0, 0.0, 1.0, 0.0, 0.0],
                      [P[0][1], 1.0, 0.0, P[1][1], 1.0, 0.0],
                      [-P[0][0], 0.0, 1.0, -P[1][0], 0.0, 1.0]])
        b_dm = np.array([0.0, dp[1] * fz_tot, -dp[0] * fz_tot])
        Wi = 1.0 / np.tile([1.0, b.moment_weight, b.moment_weight], 2)
        u = Wi * (A.T @ np.linalg.solve((A * Wi) @ A.T, b_dm))
        dlam = np.zeros(12)
        for k, fid in enumerate(self._sole_fid):
            Rk = self.data.oMf[fid].rotation
            dlam[6 * k:6 * k + 3] = Rk.T @ np.array([0.0, 0.0, u[3 * k]])
            dlam[6 * k + 3:6 * k + 6] = Rk.T @ np.array([u[3 * k + 1], u[3 * k + 2], 0.0])
        lam_tot = lam + dlam
        tau_full = h - sum(J.T @ lam_tot[6 * k:6 * k + 6] for k, J in enumerate(Jc))
        tau_ff = np.clip(tau_full[6:], -self.robot.tau_max, self.robot.tau_max)
        diag.update(xi=xi, cop_shift=dp, com=com, com_ref=c_ref, lam=lam_tot)

        q_target = q_cmd[7:].copy()
        if not (np.isfinite(q_target).all() and np.isfinite(tau_ff).all()):
            return self._degraded("non-finite command", diag, t0)
        self._q_ik = q_ik
        self._q_cmd = q_cmd
        out = {"q_target": q_target, "kp": self.kp.copy(), "kd": self.kd.copy(), "tau_ff": tau_ff, "ok": np.ones(1)}
        self._last = {k: v.copy() for k, v in out.items()}
        self._applied = True
        self._last_reason = None
        diag["reason"] = ""
        diag["step_time_s"] = time.perf_counter() - t0
        return Output(out, diag)

    def hold(self, reason: str) -> Output:
        """The last safe command with ``ok = 0`` (a node calls it when a tick's input is unusable).

        Args:
            reason: logged and put in ``diagnostics["reason"]``.

        Raises:
            RuntimeError: before the first :meth:`reset` (there is no safe command yet).
        """
        if not self._reset_done:
            raise RuntimeError("LacExpert.hold before reset: no safe command yet")
        return self._degraded(reason, {}, time.perf_counter())

    def _degraded(self, reason: str, diag: dict, t0: float) -> Output:
        # logged when the reason changes (not at every 50 Hz tick of a persisting failure)
        self.n_degraded += 1
        if reason != self._last_reason:
            log.warning("lac_expert degraded, last safe command resent: %s", reason)
            self._last_reason = reason
        out = {k: v.copy() for k, v in self._last.items()}
        out["ok"] = np.zeros(1)
        self._applied = True
        diag["reason"] = reason
        diag["step_time_s"] = time.perf_counter() - t0
        return Output(out, diag)
