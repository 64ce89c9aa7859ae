"""The per-tick work of the SEIKO dataflow nodes, from port messages to port messages (no dora here).

Each stage turns the unpacked input messages of one tick (``dict`` field -> array, as
:meth:`contactflow.contracts.messages.PortSpec.unpack` gives them, or ``None`` before an input's first
message) into the values of its output messages (``dict`` field -> array, for
:meth:`~contactflow.contracts.messages.PortSpec.pack`). The nodes ``nodes/input_filter.py``,
``nodes/seiko_retargeting.py`` and ``nodes/seiko_controller.py`` run one stage each;
``nodes/seiko_stack.py`` and the in-process closed loop :mod:`contactflow.seiko.loop` (tests,
benchmarks) run them in one process through :class:`contactflow.seiko.loop.SeikoPipeline`. All
feed a stage exactly the same messages for a tick, so all give the same outputs, bit for bit
(``tests/test_replay.py``, ``tests/test_seiko_loop.py``).

* :class:`InputFilterStage`: operator command (tick k) + Retargeting output (tick k - lag) ->
  effector targets; SEIKO eq. (8) (:class:`contactflow.operator.input_filter.InputFilter`).
* :class:`AdmittanceStage`: sensors (tick k) + Retargeting output (tick k - 1) -> admittance
  twists of the disabled effectors; eq. (14) (``nodes/admittance.py``).
* :class:`RetargetingStage`: effector targets + operator command (tick k) -> ``desired``; QP (9),
  contact switching and pushing mode (:class:`contactflow.seiko.retargeting.SeikoRetargeting`).
* :class:`ControllerStage`: sensors (tick k) + ``desired`` (tick k - lag) -> joint command and
  controller state; (10), (11), (13), (12) (:class:`contactflow.seiko.controller.SeikoController`).
* :class:`WrenchFilterStage`: sensors (tick k) + the Controller's ``flex_rate`` (tick k - 1) ->
  ``filtered_wrench``; the complementary filter (13) as its own stage (``nodes/wrench_filter.py``).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Mapping

import numpy as np
import pinocchio as pin

__all__ = ["InputFilterStage", "AdmittanceStage", "RetargetingStage", "ControllerStage", "pack_desired",
           "operator_command_values", "WrenchFilterStage"]

log = logging.getLogger("contactflow.seiko.stages")

Fields = Mapping[str, np.ndarray]


def _xyzquat_to_se3(v: np.ndarray) -> pin.SE3:
    return pin.XYZQUATToSE3(np.asarray(v, dtype=float))


class InputFilterStage:
    """Operator input filter of every effector (SEIKO eq. (8), seiko.md §7.1).

    Args:
        robot: the :class:`contactflow.robot.Robot`.
        config: :class:`contactflow.operator.input_filter.InputFilterConfig`.
    """

    def __init__(self, robot, config):
        from contactflow.operator.input_filter import InputFilter

        self.robot = robot
        self.effs = list(robot.contacts)
        data = robot.model.createData()
        pin.framesForwardKinematics(robot.model, data, robot.q_default)
        self.centers = {e: pin.SE3(data.oMf[robot.contacts[e].frame_id]) for e in self.effs}
        self.enabled = {e: robot.contacts[e].enabled for e in self.effs}
        self.filt = InputFilter(config, self.effs)  # every effector: a released contact becomes commandable
        self.filt.reset(self.centers)
        self.targets = dict(self.centers)
        self._zero = np.zeros(6)

    def tick(self, command: Fields | None, desired: Fields | None, admittance: Fields | None = None) -> dict:
        """One tick.

        Args:
            command: ``operator_command`` of tick k (None: the filters are not stepped).
            desired: ``desired`` of tick k - lag (None before its first message: reset state).
            admittance: ``admittance_command`` of tick k, or None.

        Returns:
            ``effector_targets`` values: ``pose.<effector>`` (7,) [x, y, z, qx, qy, qz, qw], world.
        """
        effs, filt, centers, enabled = self.effs, self.filt, self.centers, self.enabled
        if desired is not None:
            for i, e in enumerate(effs):
                centers[e] = _xyzquat_to_se3(desired[f"pose_d.{e}"])
                enabled[e] = bool(desired["enabled"][i] > 0.5)
        for e in effs:
            if enabled[e]:  # seiko.md §7.1: an enabled contact's filter is reset to its pose
                filt.reset_effector(e, centers[e])
        if command is not None:
            zero = self._zero
            twists = {e: (command[f"twist.{e}"] if not enabled[e] else zero) for e in effs}
            if admittance is not None:
                twists = {e: (tw + admittance[f"twist.{e}"] if not enabled[e] else tw) for e, tw in twists.items()}
            self.targets.update(filt.step(twists, centers))
        for e in effs:
            if enabled[e]:
                self.targets[e] = centers[e]
        return {f"pose.{e}": pin.SE3ToXYZQUAT(self.targets[e]) for e in effs}


def operator_command_values(robot, cmd) -> dict:
    """``operator_command`` message values of a :class:`contactflow.operator.scenario.OperatorCommand`.

    Returns:
        ``twist.<effector>`` (6,) world [v; omega] [m/s, rad/s] (zeros when the command has none);
        ``enable``, ``push`` (n_effectors,) 1.0 / 0.0 (an effector missing from ``cmd.enable``
        keeps the robot file's initial state); ``force_rate`` (n_effectors,) [N/s].
    """
    effs = robot.contacts
    zero = (0.0,) * 6
    values = {f"twist.{e}": cmd.velocities.get(e, zero) for e in effs}
    values["enable"] = [1.0 if cmd.enable.get(e, effs[e].enabled) else 0.0 for e in effs]
    values["push"] = [1.0 if cmd.push.get(e, False) else 0.0 for e in effs]
    values["force_rate"] = [cmd.force_rates.get(e, 0.0) for e in effs]
    return values


class AdmittanceStage:
    """Effector admittance, SEIKO RA-L 2024 eq. (14) (seiko.md §6.8), on the disabled effectors.

    The measured wrench of a plane effector (sole, LOCAL frame) is rotated into world axes with
    the orientation of its desired pose; a point effector's force is already in world axes. An
    enabled contact, an effector without admittance parameters, or one without a measurement
    gets a zero twist.

    Args:
        robot: the :class:`contactflow.robot.Robot`.
        params: effector -> :class:`contactflow.seiko.admittance.AdmittanceParams` (the effectors
            with admittance); see :meth:`default_params`.

    Raises:
        ConfigError: an effector of ``params`` is not a contact of the robot.
    """

    def __init__(self, robot, params):
        from contactflow.errors import ConfigError
        from contactflow.seiko.admittance import EffectorAdmittance

        self.effs = list(robot.contacts)
        unknown = set(params) - set(self.effs)
        if unknown:
            raise ConfigError(f"admittance effectors: unknown effector(s) {sorted(unknown)}; expected some of {self.effs}")
        self.adm = {e: EffectorAdmittance(p) for e, p in params.items()}
        self.enabled = {e: robot.contacts[e].enabled for e in self.effs}
        data = robot.model.createData()
        pin.framesForwardKinematics(robot.model, data, robot.q_default)
        self.rot = {e: data.oMf[robot.contacts[e].frame_id].rotation.copy() for e in self.effs}
        self._zero = np.zeros(6)

    @staticmethod
    def default_params(robot, effectors=None, feet_angular: bool = True) -> dict:
        """The Talos gains of seiko.md §6.8: plane effectors
        :meth:`~contactflow.seiko.admittance.AdmittanceParams.foot` (without the angular part when
        ``feet_angular`` is False), point effectors ``hand()``; ``effectors``: a subset (default all).

        Raises:
            ConfigError: an unknown effector name.
        """
        from contactflow.seiko.admittance import AdmittanceParams

        foot = AdmittanceParams.foot()
        if not feet_angular:
            foot = AdmittanceParams(deadband_lin_n=foot.deadband_lin_n, gain_lin=foot.gain_lin, clamp_lin_mps=foot.clamp_lin_mps)
        from contactflow.errors import ConfigError

        names = list(robot.contacts) if effectors is None else list(effectors)
        unknown = [e for e in names if e not in robot.contacts]
        if unknown:
            raise ConfigError(f"admittance effectors: unknown effector(s) {unknown}; expected some of {list(robot.contacts)}")
        return {e: (foot if robot.contacts[e].type == "plane" else AdmittanceParams.hand()) for e in names}

    def tick(self, sensors: Fields | None, desired: Fields | None) -> dict:
        """One tick: ``sensors`` (tick k) and ``desired`` (tick k - 1, or None) -> ``admittance_command``
        values ``twist.<effector>`` (6,) world [v; omega] [m/s, rad/s]."""
        effs, rot, enabled = self.effs, self.rot, self.enabled
        if desired is not None:
            for i, e in enumerate(effs):
                enabled[e] = bool(desired["enabled"][i] > 0.5)
                rot[e] = pin.Quaternion(*np.roll(desired[f"pose_d.{e}"][3:7], 1)).toRotationMatrix()
        out = {}
        for e in effs:
            w = None
            a = self.adm.get(e)
            if a is not None and sensors is not None:
                if f"wrench.{e}" in sensors:
                    s = sensors[f"wrench.{e}"]
                    w = np.concatenate([rot[e] @ s[:3], rot[e] @ s[3:]])
                elif f"force.{e}" in sensors:
                    w = np.asarray(sensors[f"force.{e}"])
            out[f"twist.{e}"] = self._zero if w is None else a.step(w, enabled[e])
        return out


_SWITCHING = {"enabling": 1.0, "disabling": -1.0}


def pack_desired(robot, out, n_refused: int = 0) -> dict:
    """``desired`` message values of a :class:`contactflow.seiko.retargeting.RetargetingOutput`
    (fresh arrays: views of two arrays allocated per call)."""
    effs = robot.contacts  # robot-file order
    n = len(effs)
    flags = np.zeros((3, n))  # enabled, switching, push
    wr = np.zeros((3, n, 6))  # lam_d, lam_d_dot, lam_target
    vals = {
        "q_d": out.q,
        "v_d": out.v,
        "theta_ahead": out.theta_ahead,
        "tau_d": out.tau,
        "enabled": flags[0],
        "ok": 1.0 if out.ok else 0.0,
        "switching": flags[1],
        "push": flags[2],
        "n_refused": float(n_refused),
    }
    switching, push, lam_target = out.switching, out.push, out.lam_target
    for i, e in enumerate(effs):
        if out.enabled[e]:
            flags[0, i] = 1.0
        sw = switching.get(e)
        if sw:
            flags[1, i] = _SWITCHING.get(sw, 0.0)
        if push.get(e, False):
            flags[2, i] = 1.0
        lam = out.lam[e]
        wr[0, i, : len(lam)] = lam
        dlam = out.lam_dot[e]
        wr[1, i, : len(dlam)] = dlam
        src = lam_target.get(e)
        if src is not None:
            wr[2, i, : len(src)] = src
        vals[f"lam_d.{e}"] = wr[0, i]
        vals[f"lam_d_dot.{e}"] = wr[1, i]
        vals[f"lam_target.{e}"] = wr[2, i]
        vals[f"pose_d.{e}"] = pin.SE3ToXYZQUAT(out.poses[e])
    return vals


class RetargetingStage:
    """SEIKO Retargeting QP (9) with contact switching and pushing mode driven by the operator.

    Args:
        robot: the robot. config: :class:`contactflow.seiko.retargeting.RetargetingConfig`.
        environment: surfaces for the enable-distance check, or None.
    """

    def __init__(self, robot, config, environment=None):
        from contactflow.seiko.retargeting import SeikoRetargeting

        self.robot = robot
        self.effs = list(robot.contacts)
        self.retargeting = SeikoRetargeting(config, robot, environment)
        self.out = self.retargeting.reset()
        self.targets = {e: self.out.poses[e] for e in self.effs if not self.out.enabled[e]}
        # last operator request per effector (edges are requests)
        self.req_enable = {e: robot.contacts[e].enabled for e in self.effs}
        self.req_push = {e: False for e in self.effs}
        self.failures = 0

    def tick(self, k: int, t: float, targets: Fields | None, command: Fields | None,
             command_error: str | None = None) -> dict:
        """One tick: ``effector_targets`` and ``operator_command`` of tick k -> ``desired`` values.

        A failed QP is counted (``failures``), logged (throttled) and its safe output returned.
        """
        effs, rt, out = self.effs, self.retargeting, self.out
        if targets is not None:
            self.targets = {e: _xyzquat_to_se3(targets[f"pose.{e}"]) for e in effs if not out.enabled[e]}
        rates = {}
        if command is not None:
            for i, e in enumerate(effs):
                en = bool(command["enable"][i] > 0.5)
                if en != self.req_enable[e]:
                    self.req_enable[e] = en
                    rt.request_contact(e, en)  # the Retargeting logs the switch or the refusal, with its time
                pu = bool(command["push"][i] > 0.5)
                if pu != self.req_push[e]:
                    self.req_push[e] = pu
                    r = rt.request_push(e, pu)
                    if r.accepted:
                        log.info("t = %.3f s: push %s %s: %s", t, "on" if pu else "off", e, r.message)
                if command["force_rate"][i] != 0.0:
                    rates[e] = float(command["force_rate"][i])
        elif command_error is not None:
            log.warning("tick %d: malformed operator command ignored (no switch, no push): %s", k, command_error)
        out = self.out = rt.step(self.targets, rates)
        if not out.ok:
            self.failures += 1
            if self.failures <= 5 or self.failures % 500 == 0:
                log.warning("tick %d: retargeting QP failed (%s); holding the last posture", k, out.diagnostics.get("status"))
        return pack_desired(self.robot, out, rt.n_refused)


class ControllerStage:
    """SEIKO flexible Controller: feedback (10), QP (11), filter (13), torque limits (12).

    Before the first Retargeting message the stage uses the Retargeting's reset state (the same
    computation as the Retargeting). If the QP fails, the last safe command is sent with ``ok = 0``
    (counted in ``failures``, logged throttled).

    Args:
        robot: the robot. config: :class:`contactflow.seiko.controller.ControllerConfig`.
        retargeting_config: the Retargeting's config (its reset state and surface frames R_c).
    """

    def __init__(self, robot, config, retargeting_config):
        from contactflow.seiko.controller import SeikoController
        from contactflow.seiko.retargeting import SeikoRetargeting

        self.robot = robot
        effs = self.effs = list(robot.contacts)
        dims = self.dims = {e: robot.contacts[e].dim for e in effs}
        # (the Retargeting's reset state only: its Python kinematics, no compiled kernel for one reset)
        r0 = SeikoRetargeting(dataclasses.replace(retargeting_config, kernel="python"), robot).reset()
        self.desired = {
            "q_d": r0.q, "v_d": np.zeros(robot.nv), "theta_ahead": r0.theta_ahead,
            "lam": {e: np.asarray(r0.lam[e]) for e in effs}, "lam_dot": {e: np.zeros(dims[e]) for e in effs},
            "enabled": dict(r0.enabled),
        }
        # One source of truth for the point contacts' world-fixed surface frames R_c: the
        # Retargeting's configuration (lam_d is expressed in it). Effectors it does not list take
        # their desired orientation when the contact is enabled, as the Retargeting does (§5.4, §7.3).
        self.configured_rc = {k: pin.rpy.rpyToMatrix(*rpy) for k, rpy in retargeting_config.surface_rpy_rad.items()}
        self.ctrl = SeikoController(config, robot, surface_rotations=self.configured_rc)
        # The robot starts holding its default posture (the MuJoCo driver's reset command): blend the
        # command from it over command_blend_s (the paper's 2 s FilterInterpolation after reset).
        out = self.ctrl.reset(r0.q, self.desired["lam"], self.desired["enabled"], theta_start=np.array(robot.theta_default))
        self.lam_read = {e: np.zeros(dims[e]) for e in effs}
        self.tau_read = np.zeros(robot.n)
        self.theta_safe = np.array(out.theta_cmd)
        self.failures = 0
        self._state_keys = [(e, f"lam_flex.{e}", f"lam_tilde.{e}") for e in effs]
        # the message fields of each effector, in order: (i, e, dim, lam_d, lam_d_dot, pose_d) of `desired`
        # and (e, dim, wrench, force) of `sensors`
        self._desired_keys = [(i, e, dims[e], f"lam_d.{e}", f"lam_d_dot.{e}", f"pose_d.{e}") for i, e in enumerate(effs)]
        self._sensor_keys = [(e, dims[e], f"wrench.{e}", f"force.{e}") for e in effs]

    def reset_from_measured(self, theta_measured: np.ndarray) -> None:
        """Blend the first commands from measured joint positions (a robot not at the default posture)."""
        d = self.desired
        self.ctrl.reset(d["q_d"], d["lam"], d["enabled"], theta_start=np.array(theta_measured))

    def tick(self, k: int, sensors: Fields | None, desired: Fields | None, t_start: float | None = None,
             integrating: bool = True, filtered: Fields | None = None) -> tuple[dict, dict]:
        """One tick: ``sensors`` (tick k) and ``desired`` (tick k - lag) -> (``joint_command``,
        ``controller_state``) values. ``t_start``: ``time.perf_counter()`` at the start of the
        tick (for the state's ``solve_time``; default now). ``integrating=False`` runs the
        Controller in shadow (no QP integration, :meth:`SeikoController.step`), for runs that send
        the Retargeting's ahead posture instead of the Controller's command. ``filtered``: the
        ``wrench_filter`` node's ``filtered_wrench`` message (:class:`WrenchFilterStage`), used
        instead of the Controller's internal filter (13); None = the internal filter."""
        t0 = time.perf_counter() if t_start is None else t_start
        ctrl, des = self.ctrl, self.desired
        if desired is not None:
            des["q_d"] = desired["q_d"]
            des["v_d"] = desired["v_d"]
            des["theta_ahead"] = desired["theta_ahead"]
            lam, lam_dot, enabled, flags = des["lam"], des["lam_dot"], des["enabled"], desired["enabled"]
            for i, e, dim, k_lam, k_dot, k_pose in self._desired_keys:
                lam[e] = desired[k_lam][:dim]
                lam_dot[e] = desired[k_dot][:dim]
                now_enabled = bool(flags[i] > 0.5)
                if now_enabled and not enabled[e] and dim == 3 and e not in self.configured_rc:
                    ctrl.set_surface_rotation(e, _xyzquat_to_se3(desired[k_pose]).rotation)
                enabled[e] = now_enabled
        if sensors is not None:
            lam_read = self.lam_read
            for e, dim, k_wrench, k_force in self._sensor_keys:
                if k_wrench in sensors:
                    lam_read[e] = sensors[k_wrench][:dim]
                elif k_force in sensors:  # point effector: world force -> surface frame R_c (§6.7)
                    lam_read[e] = ctrl.R_c[e].T @ sensors[k_force]
                else:
                    lam_read[e] = np.zeros(dim)
            self.tau_read = sensors["tau"]
        out = ctrl.step(
            q_d=des["q_d"], v_d=des["v_d"], lam_d=des["lam"], lam_d_dot=des["lam_dot"],
            enabled=des["enabled"], lam_read=self.lam_read, tau_read=self.tau_read, theta_ahead=des["theta_ahead"],
            integrating=integrating, lam_tilde=None if filtered is None else self._external_lam_tilde(filtered),
        )
        if out.ok and np.isfinite(out.theta_cmd).all():
            self.theta_safe = np.array(out.theta_cmd)
        else:
            self.failures += 1
            if self.failures <= 5 or self.failures % 500 == 0:
                log.warning("tick %d: controller QP failed (%s); sending the last safe command", k, out.diagnostics.get("status"))
        state = {
            "q_flex": out.q_flex, "offset": out.offset, "tau_flex": out.tau_flex, "tau_limit": out.tau_limit,
            "solve_time": time.perf_counter() - t0,
        }
        buf = np.zeros((2, len(self.effs), 6))  # lam_flex, lam_tilde (fresh arrays: views of one per tick)
        lam_flex, lam_tilde = out.lam_flex, out.lam_tilde
        for i, (e, k_flex, k_tilde) in enumerate(self._state_keys):
            val = lam_flex.get(e)
            if val is not None:
                buf[0, i, : len(val)] = val
            val = lam_tilde.get(e)
            if val is not None:
                buf[1, i, : len(val)] = val
            state[k_flex] = buf[0, i]
            state[k_tilde] = buf[1, i]
        return {"theta_cmd": self.theta_safe, "ok": 1.0 if out.ok else 0.0}, state

    def prepare(self) -> bool:
        """Compute the flexible-state part of the next tick's QP (11) now
        (:meth:`contactflow.seiko.controller.SeikoController.prepare`): a node calls it after
        sending its command, in the wait for the next sensors, so the next tick's latency from its
        sensors to its command is shorter; the outputs are the same bit for bit. Returns whether
        there was something to prepare."""
        return self.ctrl.prepare()

    # -------------------------------------------------------------- the wrench_filter node (13)

    def _external_lam_tilde(self, filtered: Fields) -> dict:
        """``filtered_wrench`` values -> effector -> lam_tilde in the Controller's frames (point
        forces: world -> surface frame R_c)."""
        ctrl, dims = self.ctrl, self.dims
        return {e: (v[:6] if dims[e] == 6 else ctrl.R_c[e].T @ v[:3])
                for e, v in ((e, filtered[f"lam_tilde.{e}"]) for e in self.effs)}

    def flex_rate_values(self) -> dict:
        """``flex_wrench_rate`` values of the last tick, for the ``wrench_filter`` node: the
        Controller's lam_flex_dot (planes LOCAL, points rotated into the world frame) and which
        effectors (13) filtered (:attr:`contactflow.seiko.controller.SeikoController.filter_feedback`)."""
        ldot, active = self.ctrl.filter_feedback
        vals = {"active": active.astype(float)}
        for i, e in enumerate(self.effs):
            if self.dims[e] == 6:
                vals[f"lam_flex_dot.{e}"] = ldot[i].copy()
            else:
                v = np.zeros(6)
                v[:3] = self.ctrl.R_c[e] @ ldot[i, :3]
                vals[f"lam_flex_dot.{e}"] = v
        return vals


class WrenchFilterStage:
    """SEIKO complementary wrench filter, eq. (13) (seiko.md §6.5), as its own stage.

    ``lam_tilde_k = alpha (lam_tilde_{k-1} + dt lam_flex_dot_{k-1}) + (1 - alpha) lam_read_k``
    while the contact is enabled and the Controller integrates, ``lam_read_k`` otherwise.
    ``lam_flex_dot`` and "active" are the Controller's, so the stage takes its ``flex_rate``
    feedback (``flex_wrench_rate``) of tick k - 1 beside the sensors of tick k:

    1. commit tick k - 1: an effector the Controller did not filter at k - 1 restarts from its
       ``lam_read_{k-1}`` (as the Controller's own filter does);
    2. filter tick k's measured wrenches with ``lam_flex_dot_{k-1}``, as if every effector is
       active at tick k; the Controller uses the value of an active effector and its
       ``lam_read_k`` for the others (:meth:`SeikoController.step` ``lam_tilde``).

    Fed this way (sensors offset 0, feedback offset 1, the Controller taking this output at
    offset 0), the Controller gets the same lam_tilde as with its internal filter: bit for bit
    for plane contacts, to rounding for point contacts (filtered in the world frame here, in R_c
    there; the same while R_c is constant, i.e. except the first tick of a point contact whose
    R_c is set when it is enabled) (``tests/test_wrench_filter.py``). Same arithmetic:
    :class:`contactflow.seiko.filters.ComplementaryWrenchFilterBank`.

    Args:
        robot: the robot (effectors in robot-file order).
        config: :class:`contactflow.seiko.controller.ControllerConfig` (``complementary_cutoff_hz``,
            ``dt_s``: one source with the Controller).
    """

    def __init__(self, robot, config):
        from contactflow.seiko.filters import ComplementaryWrenchFilterBank

        self.effs = list(robot.contacts)
        n = len(self.effs)
        self.dims = [robot.contacts[e].dim for e in self.effs]
        self.bank = ComplementaryWrenchFilterBank(n, config.complementary_cutoff_hz, config.dt_s)
        self.read = np.zeros((n, 6))  # lam_read of this tick (planes LOCAL [f; tau], points world force)
        self.prev_read = np.zeros((n, 6))
        self.ldot = np.zeros((n, 6))
        self._all = np.ones(n, dtype=bool)
        self._ticked = False

    def tick(self, sensors: Fields | None, flex_rate: Fields | None) -> dict:
        """One tick: ``sensors`` (tick k) and the Controller's ``flex_rate`` (tick k - 1, None at
        k = 0 or when malformed: then every effector is taken as active and lam_flex_dot as 0)
        -> ``filtered_wrench`` values (``lam_tilde.<effector>``, (6,))."""
        effs, read, ldot = self.effs, self.read, self.ldot
        if flex_rate is not None:
            for i, e in enumerate(effs):
                ldot[i] = flex_rate[f"lam_flex_dot.{e}"]
            if self._ticked:
                self.bank.seed(self.prev_read, flex_rate["active"] < 0.5)
        else:
            ldot[:] = 0.0
        if sensors is not None:
            for i, e in enumerate(effs):
                w = sensors.get(f"wrench.{e}")
                if w is not None:
                    read[i] = w
                else:  # point effector: the world force, or zeros when not sensed (as ControllerStage)
                    f = sensors.get(f"force.{e}")
                    read[i, :3] = 0.0 if f is None else f
        out = self.bank.update(read, ldot, self._all, self._all)
        self.prev_read[:] = read
        self._ticked = True
        return {f"lam_tilde.{e}": out[i].copy() for i, e in enumerate(effs)}
