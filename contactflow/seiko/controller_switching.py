"""Contact switching of the SEIKO Controller (SEIKO RA-L 2024 §IV-C, ``TaskSEIKO.cpp`` l.530-593;
seiko.md §6.7, §7.3-7.4): the switch itself (targets frozen at the flexible pose on an enable, the
wrench rows zeroed) and contactflow's release hold of a plane contact until its *measured* normal
force is low (``release_*`` of :class:`~contactflow.seiko.controller_config.ControllerConfig`; not
in the paper: docs/seiko_multicontact.md, Foot lift).

:class:`ContactSwitchingMixin` is part of :class:`contactflow.seiko.controller.SeikoController`
(its state lives there: ``_enabled``, ``targets``, ``_fn_lp``, ``_held_s``, ``_rise_m``).
"""

from __future__ import annotations

import logging
import math
from typing import Mapping

import numpy as np
import pinocchio as pin

__all__ = ["ContactSwitchingMixin"]

_log = logging.getLogger("contactflow.seiko.controller")


class ContactSwitchingMixin:
    """The contact-switching state machine of :class:`~contactflow.seiko.controller.SeikoController`."""

    def _switch_contacts(self, enabled: Mapping[str, bool], key: tuple[bool, ...]) -> bool:
        """Apply this step's ``enabled`` (``key``: its values in robot-file order) to the
        Controller's contacts; returns True when a contact was switched (the caller then runs
        runInit and starts the output blend). Needs :meth:`_filter_normal_forces` of this step."""
        cfg = self.config
        dt = cfg.dt_s
        # Contact switching (TaskSEIKO.cpp l.530-593); a released plane contact is first held
        # until its measured normal force is low (release_max_force_n, not in the paper).
        self._filter_normal_forces()
        switched = False
        for name in (self.names if (key != self._enabled_key or self._held_s or self._rise_m) else ()):
            want = bool(enabled.get(name, False))
            was = self._enabled[name]
            if want and name in self._held_s:  # enabled again while held: the contact stays
                del self._held_s[name]
                rise = self._rise_m.pop(name, 0.0)
                T = self.targets[name]  # back to the contact target before the hold's rise
                T.translation = T.translation - np.array([0.0, 0.0, rise])
            if not want and was and self._hold_for_release(name):
                continue
            if want and not was:
                self._rise_m.pop(name, None)
            elif not want and not was and name in self._rise_m:
                # after the switch: keep rising while touching (admittance on the measured f_z),
                # sink back to the Retargeting's pose once off the ground (< 0.2 x threshold)
                fn = self._fn_lp.get(name) or 0.0
                if fn > cfg.release_max_force_n:
                    v = min(cfg.release_lift_max_m_per_s, cfg.release_lift_gain * (fn - cfg.release_max_force_n))
                    self._rise_m[name] = min(cfg.release_lift_max_m, self._rise_m[name] + dt * v)
                elif fn < 0.2 * cfg.release_max_force_n:
                    self._rise_m[name] = max(0.0, self._rise_m[name] - dt * cfg.release_lift_max_m_per_s)
            if want != was:
                switched = True
                self._enabled[name] = want
                if want:
                    self._freeze_target(name)
                else:
                    self.targets.pop(name, None)
                self._lam_flex[name][:] = 0.0
                self._lam_flex_dot[name][:] = 0.0
        if switched:
            self._enabled_key = tuple(self._enabled[name] for name in self.names)
        return switched

    def _freeze_target(self, name: str) -> None:
        """Contact target := current flexible pose of the effector (``askSwitchingEnable``)."""
        pin.framesForwardKinematics(self.model, self.data, self.q_flex)
        self.targets[name] = pin.SE3(self.data.oMf[self.robot.contacts[name].frame_id])

    def _filter_normal_forces(self) -> None:
        """Low-pass the measured normal force of the plane contacts (this step's ``lam_read``)."""
        a = self._fn_alpha
        read, has = self._in_w[0], self._has[0]
        for name in self._fn_lp:
            i = self._index[name]
            if not has[i]:
                continue
            fn = float(read[i, 2])
            prev = self._fn_lp[name]
            self._fn_lp[name] = fn if prev is None else a * prev + (1.0 - a) * fn

    def _hold_for_release(self, name: str) -> bool:
        """True while the released plane contact ``name`` stays enabled (measured f_z too high);
        raises its contact target meanwhile (``release_*`` of :class:`ControllerConfig`)."""
        cfg = self.config
        fn = self._fn_lp.get(name)
        if cfg.release_max_force_n <= 0.0 or fn is None:
            return False
        held = self._held_s.get(name)
        if held is None:
            if fn < cfg.release_max_force_n:
                self._rise_m.pop(name, None)
                return False
            _log.info("SEIKO controller: %s released by the Retargeting with %.1f N measured; "
                      "unloading it before the switch", name, fn)
            held = 0.0
            self._rise_m[name] = 0.0
        elif fn < cfg.release_max_force_n or held >= cfg.release_timeout_s:
            if fn >= cfg.release_max_force_n:
                _log.warning("SEIKO controller: %s still carries %.1f N after %.1f s; switching anyway", name, fn, held)
            del self._held_s[name]
            return False
        x = min(1.0, held / cfg.release_ramp_s) if cfg.release_ramp_s > 0.0 else 1.0
        v = min(cfg.release_lift_max_m_per_s, cfg.release_lift_gain * max(0.0, fn)) * 0.5 * (1.0 - math.cos(math.pi * x))
        dz = min(cfg.dt_s * v, max(0.0, cfg.release_lift_max_m - self._rise_m[name]))
        T = self.targets[name]
        T.translation = T.translation + np.array([0.0, 0.0, dz])
        self._rise_m[name] += dz
        self._held_s[name] = held + cfg.dt_s
        return True
