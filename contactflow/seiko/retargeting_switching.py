"""Contact switching and pushing mode of the SEIKO Retargeting (seiko.md §7.2-7.4, RA-L 2024 Supp. E):
the operator's requests (:meth:`~ContactSwitchingMixin.request_contact`,
:meth:`~ContactSwitchingMixin.request_push`), the ratchet of the minimum normal force of an enabling
contact, the unloading and release of a disabling one, and the pushing-mode normal-force reference
(:class:`NormalForceCommandFilter`).

:class:`ContactSwitchingMixin` is part of :class:`contactflow.seiko.retargeting.SeikoRetargeting`
(its state lives there: ``_enabled``, ``_disabling``, ``_push``, ``_fz_min``, ``_targets``, ...).
"""

from __future__ import annotations

import logging
import math
from typing import Mapping

import numpy as np
import pinocchio as pin

from contactflow.errors import ConfigError
from contactflow.operator.input_filter import BangBangFilter
from contactflow.seiko.equilibrium import contact_constraints
from contactflow.seiko.filters import alpha_from_cutoff
from contactflow.seiko.retargeting_config import Request

__all__ = ["NormalForceCommandFilter", "ContactSwitchingMixin"]

log = logging.getLogger("contactflow.seiko.retargeting")


class NormalForceCommandFilter:
    """Pushing-mode normal-force reference (``FilterVelCommand``, seiko.md §7.2).

    Per step: ``ref += dt v`` then ``ref`` clamped to ``f_n +- clamp`` (``f_n`` the current
    desired normal force), exponential low-pass at ``cutoff_hz``, then a time-optimal bang-bang
    filter with ``|rate| <= max_rate``, ``|acc| <= max_acc``. Output: the normal-force target [N].

    Args:
        dt_s: period [s]. clamp_n: clamp radius [N]. cutoff_hz: low-pass cut-off [Hz].
        max_rate_n_per_s, max_acc_n_per_s2: bang-bang bounds [N/s, N/s^2].
    """

    def __init__(self, dt_s: float, clamp_n: float, cutoff_hz: float, max_rate_n_per_s: float, max_acc_n_per_s2: float):
        self.dt = dt_s
        self.clamp = clamp_n
        self.alpha = alpha_from_cutoff(cutoff_hz, dt_s)
        self._bb = BangBangFilter(1, max_rate_n_per_s, max_acc_n_per_s2)
        self.reset(0.0)

    def reset(self, f_n: float) -> None:
        """Start at rest at normal force ``f_n`` [N]."""
        self.ref = float(f_n)
        self.lp = float(f_n)
        self._bb.reset(np.array([float(f_n)]))
        self.out = float(f_n)

    def step(self, rate_n_per_s: float, f_n: float) -> float:
        """Advance one period with velocity command ``rate_n_per_s`` [N/s]; returns the target [N]."""
        self.ref = min(max(self.ref + self.dt * float(rate_n_per_s), f_n - self.clamp), f_n + self.clamp)
        self.lp = self.alpha * self.lp + (1.0 - self.alpha) * self.ref
        self.out = float(self._bb.step(np.array([self.lp]), self.dt)[0])
        return self.out


class ContactSwitchingMixin:
    """The contact-switching and pushing-mode state machine of
    :class:`~contactflow.seiko.retargeting.SeikoRetargeting` (§7.2-7.4)."""

    @property
    def t_s(self) -> float:
        """Time since :meth:`reset` [s]: steps started x ``dt_s`` (the tick of a request made
        before this tick's step; used in the log lines)."""
        return self._n_steps * self.config.dt_s

    def _refuse(self, msg: str) -> Request:
        self.n_refused += 1
        if self.n_refused <= 20 or self.n_refused % 500 == 0:  # a live stream of bad values: throttled
            log.warning("SEIKO retargeting: t = %.3f s: request refused (%d so far): %s", self.t_s, self.n_refused, msg)
        return Request(False, msg)

    def _effector_pose(self, k: str) -> pin.SE3:
        pin.framesForwardKinematics(self.model, self.data, self._q)
        return self.data.oMf[self.robot.contacts[k].frame_id].copy()

    def request_contact(self, name: str, enable: bool) -> Request:
        """Ask to enable (add) or disable (remove) the contact of effector ``name`` (§7.3-7.4).

        Args:
            name: effector name.
            enable: True to add the contact at the current desired pose, False to start
                unloading it.

        Returns:
            Request; refused (state unchanged) for: an unknown effector; enabling an effector
            farther than ``enable_max_distance_m`` from every surface of the environment;
            disabling when no other enabled plane contact would remain (the last supporting
            foot). Repeating the current state is accepted and does nothing.

        Raises:
            ConfigError: called before reset.
        """
        if not self._reset_done:
            raise ConfigError("SeikoRetargeting.request_contact called before reset()")
        if name not in self._enabled:
            return self._refuse(f"unknown effector {name!r}; expected one of {', '.join(self._names)}")
        spec = self.robot.contacts[name]
        if enable:
            if self._enabled[name] and not self._disabling[name]:
                return Request(True, f"{name} is already an enabled contact")
            if self._enabled[name] and self._disabling[name]:
                return self._refuse(f"cannot enable {name!r} while it is being disabled; wait for its release")
            pose = self._effector_pose(name)
            if self.environment is not None:
                d = self.environment.distance(pose.translation, spec.frame)
                if d > self.config.enable_max_distance_m:
                    return self._refuse(
                        f"cannot enable contact {name!r}: it is {d:.3f} m from the nearest surface "
                        f"(> enable_max_distance_m = {self.config.enable_max_distance_m} m); move it onto a surface first"
                    )
            if spec.type == "point":
                rpy = self.config.surface_rpy_rad.get(name)
                self._R_c[name] = pin.rpy.rpyToMatrix(*rpy) if rpy is not None else pose.rotation.copy()
            self._targets[name] = pose
            self._lam[name][:] = 0.0
            self._lam_target[name][:] = 0.0
            self._fz_min[name] = 0.0
            self._push[name] = False
            self._disabling[name] = False
            self._enabled[name] = True
            self._layout()
            log.info("SEIKO retargeting: t = %.3f s: contact %s enabled (fz_min ratchets up to %.1f N)", self.t_s, name,
                     self.config.effector(spec.type).fz_min_n)
            return Request(True, f"{name} enabled")
        # disable
        if not self._enabled[name]:
            return Request(True, f"{name} is already disabled")
        if self._disabling[name]:
            return Request(True, f"{name} is already being disabled")
        planes_left = [k for k, c in zip(self._names, self._specs)
                       if c.type == "plane" and self._enabled[k] and not self._disabling[k] and k != name]
        if not planes_left:
            return self._refuse(
                f"cannot disable {name!r}: it is the last supporting plane contact (no enabled foot would remain)"
            )
        self._disabling[name] = True
        self._disable_steps[name] = 0
        self._push[name] = False
        self._fz_min[name] = 0.0
        self._lam_target[name][:] = 0.0
        self._update_contact(name)
        log.info("SEIKO retargeting: t = %.3f s: contact %s disabling (unloading at the rate limits)", self.t_s, name)
        return Request(True, f"{name} disabling")

    def request_push(self, name: str, on: bool) -> Request:
        """Turn pushing mode (§7.2) on or off for effector ``name``.

        Returns:
            Request; switching it on is refused for an unknown effector, a disabled contact or
            a contact being disabled. Off always succeeds (target back to 0, enabled weights).

        Raises:
            ConfigError: called before reset.
        """
        if not self._reset_done:
            raise ConfigError("SeikoRetargeting.request_push called before reset()")
        if name not in self._enabled:
            return self._refuse(f"unknown effector {name!r}; expected one of {', '.join(self._names)}")
        if not on:
            if self._push[name]:
                self._push[name] = False
                self._lam_target[name][:] = 0.0
                self._update_contact(name)
            return Request(True, f"push mode off on {name}")
        if self._push[name]:
            return Request(True, f"push mode already on for {name}")
        if not self._enabled[name]:
            return self._refuse(f"cannot push with {name!r}: it is not an enabled contact (enable it first)")
        if self._disabling[name]:
            return self._refuse(f"cannot push with {name!r}: it is being disabled")
        self._push[name] = True
        self._lam_target[name][:] = self._lam[name]
        self._push_filter[name].reset(float(self._lam[name][2]))
        self._update_contact(name)
        return Request(True, f"push mode on for {name} at {self._lam[name][2]:.1f} N")

    def _pre_step(self, rates: Mapping[str, float]) -> None:
        for k, v in rates.items():
            if k not in self._enabled:
                self._refuse(f"normal-force velocity for unknown effector {k!r}")
                continue
            v = float(v)
            if v == 0.0:
                continue
            if not math.isfinite(v):
                self._refuse(f"non-finite normal-force velocity {v!r} for {k!r} replaced by 0")
            elif abs(v) > self.config.max_push_rate_command_n_per_s:
                self._refuse(f"normal-force velocity {v:.1f} N/s for {k!r} exceeds "
                             f"{self.config.max_push_rate_command_n_per_s} N/s; replaced by 0")
            # a rate for an effector not in push mode is ignored (its push request, if any, was
            # refused and reported once); not counted, to avoid one refusal per tick.
        for k in self._names:
            if self._push[k]:
                v = float(rates.get(k, 0.0))
                if not (math.isfinite(v) and abs(v) <= self.config.max_push_rate_command_n_per_s):
                    v = 0.0
                self._lam_target[k][2] = self._push_filter[k].step(v, float(self._lam[k][2]))
        # §7.3 ratchet of the minimum normal force of enabling contacts.
        for k in self._on_names:
            want = self._fz_min_desired[k]
            if not self._disabling[k] and self._fz_min[k] < want:
                fn = float(self._lam[k][2])
                if fn > self._fz_min[k] + 0.01:
                    self._fz_min[k] = min(fn - 0.01, want)
                    self._update_contact(k)

    def _post_step(self) -> None:
        # §7.4: release a disabling contact once its normal force is below dt * rate limit.
        released = []
        for k, c in self._on:
            if self._disabling[k]:
                # below dt * rate bound, so the other contacts can take the rest in one step; the
                # bound of this step (tapered, disable_taper_n; the limit without the taper)
                lim = self.config.dt_s * float(self._lam_rate_lim[self._col[k] + 2])
                fn = float(self._lam[k][2])
                # the tapered bound is 0 at f_n = 0: a contact at 0 N is released too
                if fn < lim or fn <= 1e-6:
                    released.append(k)
        if released:
            pin.framesForwardKinematics(self.model, self.data, self._q)
            for k in released:
                c = self.robot.contacts[k]
                self._enabled[k] = False
                self._disabling[k] = False
                self._push[k] = False
                self._fz_min[k] = self.config.effector(c.type).fz_min_n
                self._lam[k][:] = 0.0
                self._lam_target[k][:] = 0.0
                self._targets[k] = self.data.oMf[c.frame_id].copy()
                log.info("SEIKO retargeting: t = %.3f s: contact %s released", self.t_s, k)
            self._layout()

    def _disabling_rate_bounds(self, lam: np.ndarray) -> None:
        """Rate bounds (9m) of the disabling contacts for this step (deviation from the paper).

        ``bound = limit * S(t / disable_ramp_s)`` with the raised cosine ``S(x) = (1 - cos(pi x))/2``
        (``t`` [s] since the disable request), and on the normal force additionally
        ``limit * sqrt(u (2 - u))``, ``u = f_n / disable_taper_n`` below the taper force; the
        bounds of the other contacts keep their limits.
        """
        if not any(self._disabling.values()):
            return
        dt = self.config.dt_s
        for k, c in self._on:
            if not self._disabling[k]:
                continue
            par = self.config.effector(c.type)
            self._disable_steps[k] += 1
            col = self._col[k]
            sl = slice(col, col + c.dim)
            scale = 1.0
            if par.disable_ramp_s > 0.0:
                x = min(1.0, self._disable_steps[k] * dt / par.disable_ramp_s)
                scale = 0.5 * (1.0 - math.cos(math.pi * x))
            rate = self._lam_rate_base[sl] * scale
            if par.disable_taper_n > 0.0:
                u = max(0.0, float(lam[col + 2])) / par.disable_taper_n
                if u < 1.0:
                    rate[2] = min(rate[2], par.force_rate_max_n_per_s * math.sqrt(u * (2.0 - u)))
            self._lam_rate_lim[sl] = rate
        self._rate_changed()

    def _wrench_weights(self, k: str) -> np.ndarray:
        c = self.robot.contacts[k]
        par = self.config.effector(c.type)
        if self._push[k]:
            return np.full(c.dim, par.disabling_weight_scale)
        w = np.asarray(par.wrench_weights, dtype=float)
        # disabling: 1e4 times the weight *shape* (seiko.md §7.4: feet 1e4 on every component
        # but 100 on f_z), i.e. the enabled vector normalised by its largest entry.
        return w * (par.disabling_weight_scale / float(np.max(w))) if self._disabling[k] else w

    def _update_contact(self, k: str) -> None:
        """Refresh the constraints (fz_min) and the wrench weights of enabled contact ``k``."""
        c = self.robot.contacts[k]
        par = self.config.effector(c.type)
        self._constraints[k] = contact_constraints(
            c.type, par.friction_mu, self._fz_min[k], par.fz_max_n, par.cop_half_x_m, par.cop_half_y_m
        )
        if self._enabled[k]:
            col = self._col[k]
            self._w_lam[col : col + c.dim] = self._wrench_weights(k)
            self._wrench_weights_changed()
            self._contact_block()
