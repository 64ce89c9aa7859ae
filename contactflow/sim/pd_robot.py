"""Simulated PD-controlled robot (Unitree G1) on MuJoCo, with readings in pinocchio conventions.

:class:`PDRobotSim` takes one joint command per control tick (``control_dt_s``, 0.02 s = the
50 Hz policy period by default) with the fields of Unitree's ``MotorCmd`` (unitree_dds.md): per
joint a position target ``q_target`` [rad], a stiffness ``kp`` [N m/rad], a damping ``kd``
[N m s/rad] and a feed-forward torque ``tau_ff`` [N m]. At EVERY physics step (``physics_dt_s``,
0.002 s for the G1) each joint feels

    tau = clamp(kp (q_target - q) - kd qdot + tau_ff, -tau_max, tau_max)

(the motor PD law; LAC deploy, lac.md §1.1: "PD is applied every substep"), evaluated by MuJoCo
itself: the builder (:mod:`contactflow.sim.mujoco_model`) gives each joint an affine actuator
``gain * ctrl + b0 + b1 q + b2 qdot`` with ``forcerange = +-tau_max``, and :meth:`PDRobotSim.step`
writes ``gain = kp``, ``b0 = tau_ff``, ``b1 = -kp``, ``b2 = -kd`` and ``ctrl = q_target``. The
joints also have the robot file's rotor armature and small passive damping / friction loss.
:func:`pd_torque` is the same law in numpy, the project's one writing of it (tools, tests and the
PRIME data generator's torque-motor simulation use it).

Readings (:class:`contactflow.sim.mujoco_robot.SensorReadings`) are those of the Talos
simulation: pinocchio ``q``/``v``, ``tau`` = the PD torque applied at the reading's state, IMU at
the robot file's ``imu_frame`` (pelvis), sole wrenches [f; tau] in the sole LOCAL frame.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

import mujoco
import numpy as np

from contactflow.errors import ConfigError, ContractError
from contactflow.robot import Robot
from contactflow.sim.mujoco_model import PointMass
from contactflow.sim.mujoco_robot import MujocoSimBase, SensorNoiseConfig, SensorReadings

__all__ = ["PDSimConfig", "PDRobotSim", "PDCommand", "pd_torque"]


def pd_torque(q_target, kp, kd, tau_ff, q, qd, tau_max) -> np.ndarray:
    """The motor PD law ``tau = clamp(kp (q_target - q) - kd qd + tau_ff, -tau_max, tau_max)``.

    Unitree ``MotorCmd`` semantics (unitree_dds.md) with a zero velocity target; LAC deploy applies
    it at every physics substep (lac.md §1.1). Arguments broadcast (a scalar gain or ``tau_ff = 0``
    is accepted).

    Args:
        q_target: (n,) position targets [rad].
        kp: (n,) stiffness [N m/rad]. kd: (n,) damping [N m s/rad].
        tau_ff: (n,) feed-forward torques [N m].
        q: (n,) joint positions [rad]. qd: (n,) joint velocities [rad/s].
        tau_max: (n,) effort limits [N m] (> 0).

    Returns:
        (n,) joint torques [N m].
    """
    return np.clip(kp * (q_target - q) - kd * qd + tau_ff, -tau_max, tau_max)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PDSimConfig(SensorNoiseConfig):
    """Configuration of :class:`PDRobotSim` (plus the fields of :class:`SensorNoiseConfig`).

    Attributes:
        physics_dt_s: physics step [s]; ``None`` = the robot file's ``mujoco.timestep_s``.
        control_dt_s: control tick [s] (one :meth:`PDRobotSim.step`); an integer multiple of the
            physics step; ``None`` = ``1 / control_rate_hz`` of the robot file (the G1: 50 Hz,
            LAC's and holosoma's policy rate, so 0.02 s), 0.02 s if absent.
        stability_margin: commanded ``kp`` and ``kd`` are refused above this fraction of the
            explicit-integration limits of each joint (``kp_max``, ``kd_max``; pitfall M3).
    """

    physics_dt_s: float | None = None
    control_dt_s: float | None = None
    stability_margin: float = 0.8

    def __post_init__(self):
        super().__post_init__()
        if self.physics_dt_s is not None and not self.physics_dt_s > 0:
            raise ConfigError(f"physics_dt_s must be > 0, got {self.physics_dt_s}")
        if self.control_dt_s is not None and not self.control_dt_s > 0:
            raise ConfigError(f"control_dt_s must be > 0, got {self.control_dt_s}")
        if not 0 < self.stability_margin <= 1:
            raise ConfigError(f"stability_margin must be in (0, 1], got {self.stability_margin}")


@dataclasses.dataclass(frozen=True)
class PDCommand:
    """A validated PD joint command (robot joint order; arrays (n,)).

    Attributes:
        q_target: position targets [rad]. kp: stiffness [N m/rad]. kd: damping [N m s/rad].
        tau_ff: feed-forward torques [N m].
    """

    q_target: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    tau_ff: np.ndarray


class PDRobotSim(MujocoSimBase):
    """A PD-controlled robot standing on a floor, simulated with MuJoCo (module docstring).

    Args:
        config: simulation configuration.
        robot: a robot description with ``actuation: pd`` (``load_robot("g1")``,
            ``load_robot("g1_29dof")``).
        extra_bodies: unmodelled payloads welded to links (see
            :func:`contactflow.sim.mujoco_model.build_mujoco_spec`).

    Attributes:
        kp_max: (n,) largest accepted ``kp`` [N m/rad]: ``margin (2 / dt)^2 M_ii`` with ``M_ii``
            the joint-space inertia diagonal (armature included) at ``robot.q_default``.
        kd_max: (n,) largest accepted ``kd`` [N m s/rad]: ``margin 2 M_ii / dt`` (MuJoCo's Euler
            integrates actuator damping explicitly).

    Raises:
        ConfigError: the robot is not a PD robot, or ``control_dt_s`` is not a multiple of the
            physics step.
        ModelError: the model cannot be built.
    """

    def __init__(self, config: PDSimConfig, robot: Robot, *, extra_bodies: Iterable[PointMass | Mapping] | None = None):
        if robot.actuation != "pd":
            raise ConfigError(f"{robot.file_label()}: PDRobotSim needs 'actuation: pd', robot has {robot.actuation!r}")
        dt_ctrl = config.control_dt_s
        if dt_ctrl is None:
            rate = float(robot.raw.get("control_rate_hz", 50.0))
            if not (np.isfinite(rate) and rate > 0):
                raise ConfigError(f"{robot.file_label()}: control_rate_hz must be > 0, got {rate}")
            dt_ctrl = 1.0 / rate
        super().__init__(config, robot, extra_bodies=extra_bodies, control_dt_s=dt_ctrl)
        m, d = self.model, self.data
        act = np.array([m.actuator(j).id for j in robot.joint_names])
        self._act_ids = act
        self._gain = m.actuator_gainprm
        self._bias = m.actuator_biasprm
        self._ctrl = d.ctrl
        dt = m.opt.timestep
        self.state_map.set(d, robot.q_default)
        mujoco.mj_forward(m, d)
        M = np.zeros((m.nv, m.nv))
        mujoco.mj_fullM(m, d, M)
        Mii = M[self._jv, self._jv]
        self.kp_max = config.stability_margin * (2.0 / dt) ** 2 * Mii
        self.kd_max = config.stability_margin * 2.0 * Mii / dt
        self._default = PDCommand(robot.theta_default.copy(), robot.K.copy(), robot.kd.copy(), np.zeros(robot.n))
        self._cmd = self._default
        self.reset()

    # ------------------------------------------------------------------ properties
    @property
    def command(self) -> PDCommand:
        """The PD command in force (arrays are copies)."""
        c = self._cmd
        return PDCommand(c.q_target.copy(), c.kp.copy(), c.kd.copy(), c.tau_ff.copy())

    # ------------------------------------------------------------------ API
    def reset(self, q0: np.ndarray | None = None) -> SensorReadings:
        """Put the robot at rest at ``q0`` at t = 0, standing on its soles, no hidden settling.

        The PD command is set to hold the posture with the robot file's gains (``kp = robot.K``,
        ``kd = robot.kd``, ``tau_ff = 0``); external wrenches are cleared. The soles touch the
        floor without penetration, so contact forces build up in the first physics steps: the
        controller holds the robot from t = 0.

        Args:
            q0: ``None`` (``robot.q_default``: soles flat on z = 0), a joint posture (n,) [rad]
                (base of ``q_default`` moved vertically so the lowest sole frame is at z = 0), or
                a full configuration (7 + n,) used as is.

        Returns:
            The readings at t = 0.

        Raises:
            ContractError: ``q0`` has the wrong shape or non-finite values.
        """
        r = self.robot
        m, d = self.model, self.data
        n = r.n
        if q0 is None:
            q, lift = r.q_default.copy(), False
        else:
            q0 = np.array(q0, dtype=float)
            if not np.all(np.isfinite(q0)):
                raise ContractError("reset: non-finite q0")
            if q0.shape == (n,):
                q, lift = r.q_default.copy(), True
                q[7:] = q0
            elif q0.shape == (7 + n,):
                q, lift = q0, False
                q[3:7] /= np.linalg.norm(q[3:7])
            else:
                raise ContractError(f"reset: q0 must have shape ({n},) or ({7 + n},), got {q0.shape}")
        mujoco.mj_resetData(m, d)
        self._place_default(q, lift)
        self._apply(PDCommand(q[7:].copy(), r.K.copy(), r.kd.copy(), np.zeros(n)))
        d.time = 0.0
        mujoco.mj_forward(m, d)
        return self.readings()

    def check_command(self, q_target, kp=None, kd=None, tau_ff=None) -> PDCommand:
        """Validate a PD command (shapes, finiteness, ``0 <= kp <= kp_max``, ``0 <= kd <= kd_max``).

        Args:
            q_target: (n,) position targets [rad], robot joint order.
            kp, kd: (n,) gains [N m/rad, N m s/rad]; ``None`` = the robot file's (``robot.K``,
                ``robot.kd``).
            tau_ff: (n,) feed-forward torques [N m]; ``None`` = 0.

        Returns:
            The validated :class:`PDCommand` (copies).

        Raises:
            ContractError: the first problem found, naming the field and the joints.
        """
        r = self.robot
        fields = {
            "q_target": q_target,
            "kp": r.K if kp is None else kp,
            "kd": r.kd if kd is None else kd,
            "tau_ff": np.zeros(r.n) if tau_ff is None else tau_ff,
        }
        out = {}
        for name, x in fields.items():
            try:
                a = np.array(x, dtype=float)
            except (TypeError, ValueError) as exc:
                raise ContractError(f"{name}: not a numeric array ({exc})") from None
            if a.shape != (r.n,):
                raise ContractError(f"{name}: expected shape ({r.n},), got {a.shape}")
            bad = ~np.isfinite(a)
            if np.any(bad):
                raise ContractError(f"{name}: non-finite value(s) for {self._names(bad)}")
            out[name] = a
        for name, hi in (("kp", self.kp_max), ("kd", self.kd_max)):
            bad = (out[name] < 0) | (out[name] > hi)
            if np.any(bad):
                i = int(np.flatnonzero(bad)[0])
                raise ContractError(
                    f"{name}: outside [0, {name}_max] for {self._names(bad)} "
                    f"(e.g. {r.joint_names[i]}: {out[name][i]:g} > {hi[i]:.4g} or < 0)"
                )
        return PDCommand(**out)

    def step(self, q_target, kp=None, kd=None, tau_ff=None) -> SensorReadings:
        """Advance one control tick under the PD command (applied at every physics step).

        Args: see :meth:`check_command`.

        Returns:
            The readings at the end of the tick (t += control_dt_s).

        Raises:
            ContractError: invalid command (the state is not advanced; a driver holds its last
                safe command and reports it).
        """
        return self.step_command(self.check_command(q_target, kp, kd, tau_ff))

    def step_command(self, cmd: PDCommand) -> SensorReadings:
        """:meth:`step` with a command already validated by :meth:`check_command` (a caller that
        holds one command over many ticks checks it once)."""
        self._apply(cmd)
        m, d = self.model, self.data
        mujoco.mj_step(m, d, nstep=self.n_substeps)
        # sensors of mj_step refer to the state before the last integration: recompute them
        mujoco.mj_forward(m, d)
        return self.readings()

    def pd_torque(self) -> np.ndarray:
        """(n,) the PD law at the current state and command [N m] (numpy, for tests and tools)."""
        c = self._cmd
        return pd_torque(c.q_target, c.kp, c.kd, c.tau_ff, self._qpos[self._jq], self._qvel[self._jv],
                         self.robot.tau_max)

    # ------------------------------------------------------------------ helpers
    def _apply(self, c: PDCommand) -> None:
        a = self._act_ids
        self._gain[a, 0] = c.kp
        self._bias[a, 0] = c.tau_ff
        self._bias[a, 1] = -c.kp
        self._bias[a, 2] = -c.kd
        self._ctrl[a] = c.q_target
        self._cmd = c

    def _names(self, mask: np.ndarray) -> str:
        return ", ".join(self.robot.joint_names[i] for i in np.flatnonzero(mask))
