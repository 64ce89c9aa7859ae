"""The model-based teacher of the student: :class:`~contactflow.lac.expert.LacExpert` labels as LAC actions.

LAC's action has no torque feed-forward: ``q_target = default + scale * action`` with LAC's PD
gains. The expert sends ``(q_target, kp, kd, tau_ff)``. At every physics substep the motor law is
``kp (q_target - q) - kd qdot + tau_ff = kp (q_target + tau_ff / kp - q) - kd qdot``, so the
position target ``q_target + tau_ff / kp`` at the SAME gains gives the same torque at every state
(the effort clamp included). The label is therefore

    action = (q_target + tau_ff / kp - default) / scale          (policy order)

which holds only while the expert's ``kp`` and ``kd`` equal the spec's gains: checked at
construction and at every label (:class:`ConfigError` otherwise).

**Joint limits.** LAC's deploy loop has no clip, but the project's runner refuses a target outside
the spec's accepted range (``spec.q_min``, ``spec.q_max``: the joint limits widened by the spec's
``safety`` margins; the whole action is refused and the last command held). With LAC's low gains the
expert's equivalent target can leave that range when its feed-forward is large (measured with the
range = the joint limits: ankle pitch/roll under balance torques, elbows and shoulder roll commanded
near their limits; the refused teacher then fell in 3 of 24 episodes). The label is therefore
clipped, per joint, to the accepted range shrunk by ``limit_margin_rad``: the closest target the
deployed runner accepts (the torque differs only on the clipped joints; :attr:`ExpertTeacher.n_clipped`
counts the clipped labels).

The expert runs as an OBSERVER on the states the executed actions (student or teacher) produce
(DAgger relabelling), with ``lockstep=False``: the command in force over the last tick is then not
the expert's own, so its arm-force estimate must use the measured joint torques (``sensors["tau"]``)
instead of its last command (:class:`~contactflow.lac.expert.LacExpert`, ``lockstep``).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from contactflow.errors import ConfigError
from contactflow.lac.expert import ExpertConfig, LacExpert
from contactflow.policy.spec import PolicySpec
from contactflow.robot import Robot

__all__ = ["ExpertTeacher", "action_from_pd"]


def action_from_pd(spec: PolicySpec, q_target: np.ndarray, kp: np.ndarray, tau_ff: np.ndarray) -> np.ndarray:
    """The LAC action whose PD command equals ``(q_target, kp, tau_ff)`` at the spec's gains.

    Args:
        spec: the deploy spec (default posture, action scale, joint orders).
        q_target, kp, tau_ff: (n,) robot order [rad], [N m/rad] (> 0), [N m].

    Returns:
        (n,) action, policy order: ``((q_target + tau_ff / kp) - default) / scale``.
    """
    q_eq = np.asarray(q_target, float) + np.asarray(tau_ff, float) / np.asarray(kp, float)
    return (q_eq[spec.policy_to_robot] - spec.default_policy) / spec.scale


class ExpertTeacher:
    """``LacExpert`` as a labeller of LAC actions (module docstring).

    Args:
        config: the expert's configuration (``load_expert_config()``).
        robot: the G1.
        spec: the deploy spec whose action the labels are.
        limit_margin_rad: the label's target is kept this far inside the joint limits [rad].

    Raises:
        ConfigError: the expert's PD gains differ from the spec's (the label would not reproduce
            the expert's torque).
    """

    def __init__(self, config: ExpertConfig, robot: Robot, spec: PolicySpec, *, limit_margin_rad: float = 0.02):
        self.spec = spec
        self.expert = LacExpert(config, robot, lockstep=False)
        self._check_gains(self.expert.kp, self.expert.kd)
        self._lo, self._hi = spec.action_bounds(limit_margin_rad)
        #: labels whose target was clipped to the limits (at least one joint), since construction
        self.n_clipped = 0
        #: the expert's diagnostics of the last :meth:`label` (its own load estimate ``f_est.<link>``,
        #: ``c_est.<link>`` among them; :class:`~contactflow.lac.expert.Output`); {} before the first
        self.diagnostics: dict = {}

    def _check_gains(self, kp: np.ndarray, kd: np.ndarray) -> None:
        if not (np.allclose(kp, self.spec.kp, rtol=0, atol=1e-9) and np.allclose(kd, self.spec.kd, rtol=0, atol=1e-9)):
            raise ConfigError(f"{self.spec.file}: the expert's PD gains differ from the spec's: a LAC action "
                              f"cannot reproduce its torque (kp {np.round(kp, 3).tolist()} vs {np.round(self.spec.kp, 3).tolist()})")

    def reset(self, sensors: Mapping) -> None:
        """Restart the expert on the first reading of an episode."""
        self.expert.reset(sensors)
        self.diagnostics = {}

    def label(self, sensors: Mapping, command: Mapping) -> tuple[np.ndarray, bool]:
        """The teacher's action at the current (observed) state.

        Args:
            sensors: the ``sensors`` message (true base state). command: the ``teleop_command``.

        Returns:
            (action (n,) policy order, clipped into the joint limits, ok: the expert's own output
            (False: it held its last safe command, the label is then that command's action)).
        """
        out = self.expert.step(sensors, command)
        self.diagnostics = out.diagnostics
        c = out.command
        self._check_gains(c["kp"], c["kd"])
        a = action_from_pd(self.spec, c["q_target"], c["kp"], c["tau_ff"])
        a_c = np.clip(a, self._lo, self._hi)
        self.n_clipped += int(np.any(a_c != a))
        return a_c, bool(c["ok"][0] > 0.5)
