"""Operator input processing: velocity command -> filtered effector target pose (SEIKO eq. (8)).

For every free (non-contact) effector SEIKO turns the operator's world-frame twist command
``nu_op`` into the Retargeting target pose ``X_target`` (SEIKO RA-L 2024, eq. (8); reference:
``shared/reference/seiko.md`` §7.1, ``inria_maths`` ``FilterPoseCommand`` /
``PoseCommandProcessing`` / ``Clamp.h`` / ``TrajectoryBangBangAcc``)::

    X_ref    <- boundDistance(X_ref (+) dt nu_op, X_center)         (8), world frame
    X_lp     <- exponential low-pass (cutoff_hz) of X_ref           position; slerp on rotation
    X_target <- time-optimal bang-bang filter of X_lp               per component, replanned each step

``X_center`` is the current desired effector pose of the Retargeting model (``X^d_off``), so the
reference cannot run away from what the robot can actually follow: it stays inside a ball of
radius ``clamp_radius_lin_m`` / ``clamp_radius_ang_rad`` around the centre.

Scope: only the **velocity-command** path is implemented (SpaceMouse-style operator input, as in
the paper's experiments). The clutch / raw VR pose path of §7.1 step 1 (relative pose latched
when the clutch is pressed, re-projection of ``X_ref`` on clutch release) is not: the relative
pose is the identity, so the filter input target is ``X_ref`` itself (§7.1 step 3 with
``p_rel = 0``, ``R_rel = I``). The admittance velocity ``nu_adm`` of (8) can simply be added to
the commanded twist by the caller.

Conventions: twists are linear first, ``[v; omega]`` (6,), in the world frame [m/s, rad/s];
poses are ``pin.SE3`` world-frame placements; rotations are integrated on the left,
``R <- exp3(omega dt) R`` (world-frame angular velocity).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Iterable, Mapping

import numpy as np
import pinocchio as pin

from contactflow.errors import ConfigError, ContractError
from contactflow.seiko.filters import alpha_from_cutoff

__all__ = [
    "InputFilterConfig",
    "BangBang1D",
    "BangBangFilter",
    "bang_bang_step",
    "bang_bang_time",
    "clamp_position_update_into_sphere",
    "clamp_orientation_update_into_sphere",
    "bound_distance",
    "EffectorInputFilter",
    "InputFilter",
]

log = logging.getLogger(__name__)

_EPS = float(np.finfo(float).eps)

#: Real time (``input_filter --realtime``, ``seiko_stack --realtime``): the most skipped ticks the filter
#: steps over at once, each with its own operator command (0.1 s at 500 Hz; a longer gap loses the
#: oldest of them instead of making this tick slower still).
MAX_CATCH_UP_TICKS = 50

#: The skipped ticks a catch-up steps over besides the tick itself (``Lockstep(max_per_tick=...)``).
MAX_SKIPPED_TICKS = MAX_CATCH_UP_TICKS - 1


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, kw_only=True)
class InputFilterConfig:
    """Parameters of the operator input filter (SEIKO eq. (8), §7.1). Defaults: Talos.

    Talos values come from ``SEIKOTalos.hpp`` (``clampRadiusLin`` 0.03, ``clampRadiusAng`` 0.2,
    ``cutoffFreq`` 2, ``maxVelLin`` 0.2, ``maxAccLin`` 2, ``maxVelAng`` 1, ``maxAccAng`` 3) and the
    500 Hz SEIKO loop.

    Attributes:
        clamp_radius_lin_m: radius of the ball around the centre position that bounds the
            reference position (``boundDistance``) [m].
        clamp_radius_ang_rad: radius of the ball around the centre orientation, measured as
            ``|log3(R_ref R_center^T)|`` [rad]; must be below pi.
        cutoff_hz: cutoff frequency of the exponential low-pass on position and rotation [Hz].
        max_vel_lin_mps: bang-bang velocity bound per position component [m/s].
        max_acc_lin_mps2: bang-bang acceleration bound per position component [m/s^2].
        max_vel_ang_radps: bang-bang velocity bound per rotation-vector component [rad/s].
        max_acc_ang_radps2: bang-bang acceleration bound per rotation-vector component [rad/s^2].
        dt_s: filter period [s].

    Raises:
        ConfigError: a value not a finite number > 0, or ``clamp_radius_ang_rad`` >= pi (the
            message names the key and what was expected).
    """

    clamp_radius_lin_m: float = 0.03
    clamp_radius_ang_rad: float = 0.2
    cutoff_hz: float = 2.0
    max_vel_lin_mps: float = 0.2
    max_acc_lin_mps2: float = 2.0
    max_vel_ang_radps: float = 1.0
    max_acc_ang_radps2: float = 3.0
    dt_s: float = 0.002

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0.0):
                raise ConfigError(f"{f.name}: expected a finite number > 0, got {value!r}")
        if self.clamp_radius_ang_rad >= math.pi:
            raise ConfigError(
                f"clamp_radius_ang_rad: expected a value below pi, got {self.clamp_radius_ang_rad!r}"
            )


# --------------------------------------------------------------------------------------------
# Time-optimal bang-bang filter (FilterBangBangAcc / TrajectoryBangBangAcc)
# --------------------------------------------------------------------------------------------
def _bang_bang_plan(d: float, v: float, vmax: float, amax: float, tol: float = 0.0):
    """Time-optimal profile from (0, v) to (d, 0) under |v| <= vmax (once reached), |a| <= amax.

    Returns ``(s, V, a1, t1, t2, t3)`` in the frame normalised by the direction ``s`` (+1/-1):
    phase 1 constant acceleration ``a1`` (``+amax``, or ``-amax`` when ``|v| > vmax`` must first be
    reduced) for ``t1``, phase 2 cruise for ``t2``, phase 3 deceleration ``-amax`` for ``t3``.
    ``tol`` [unit]: when ``|d - d_stop| <= tol`` the state is taken to be on the braking curve
    (pure braking), which keeps rounding errors from being amplified by the square root near
    the end of a motion.
    """
    d_stop = v * abs(v) / (2.0 * amax)  # signed distance travelled when braking at once
    if v != 0.0 and abs(d - d_stop) <= tol:
        s = 1.0 if v > 0.0 else -1.0  # on the braking curve: brake
        V = s * v
        if V <= vmax:
            return s, V, amax, 0.0, 0.0, V / amax
        return s, V, -amax, (V - vmax) / amax, 0.0, vmax / amax
    if d > d_stop:
        s = 1.0
    elif d < d_stop:
        s = -1.0
    else:  # exactly on the braking curve (v != 0 here): brake
        s = 1.0 if v > 0.0 else -1.0
    D, V = s * d, s * v
    if V > vmax:
        # slow down to vmax, cruise, brake (D >= V^2/(2 amax) by the choice of s)
        a1 = -amax
        t1 = (V - vmax) / amax
        t2 = max(0.0, (D - V * V / (2.0 * amax)) / vmax)
        t3 = vmax / amax
        return s, V, a1, t1, t2, t3
    vp2 = amax * D + 0.5 * V * V  # peak velocity^2 of the triangular profile
    vp = math.sqrt(max(0.0, vp2))
    if vp > vmax:
        t1 = (vmax - V) / amax
        t3 = vmax / amax
        t2 = max(0.0, (D - (vmax * vmax - V * V) / (2.0 * amax) - vmax * vmax / (2.0 * amax)) / vmax)
    else:
        t1 = max(0.0, (vp - V) / amax)
        t2 = 0.0
        t3 = vp / amax
    return s, V, amax, t1, t2, t3


def bang_bang_time(x: float, v: float, target: float, vmax: float, amax: float) -> float:
    """Duration [s] of the time-optimal trajectory from (x, v) to (target, 0).

    Args:
        x: position [unit]. v: velocity [unit/s]. target: goal position [unit].
        vmax: velocity bound [unit/s] (> 0). amax: acceleration bound [unit/s^2] (> 0).
    """
    d = target - x
    if d == 0.0 and v == 0.0:
        return 0.0
    tol = 64.0 * _EPS * (abs(x) + abs(target))
    _, _, _, t1, t2, t3 = _bang_bang_plan(d, v, vmax, amax, tol)
    return t1 + t2 + t3


def bang_bang_step(
    x: float, v: float, target: float, vmax: float, amax: float, dt: float
) -> tuple[float, float]:
    """Advance by ``dt`` along the time-optimal trajectory from (x, v) to (target, 0).

    The trajectory is replanned from the given state (``FilterBangBangAcc``): accelerate at
    ``±amax`` toward the target, cruise at ``±vmax`` if reached, brake at ``amax`` to stop exactly
    on the target. It is evaluated in closed form at ``dt`` (switching instants inside the step
    are honoured), so replanning from a state on the trajectory reproduces the same trajectory
    (no chattering) and the target is reached in the time-optimal time, then held exactly.

    Args:
        x: current position [unit]. v: current velocity [unit/s]. target: goal [unit].
        vmax: velocity bound [unit/s] (> 0). amax: acceleration bound [unit/s^2] (> 0).
        dt: time step [s] (> 0).

    Returns:
        (x_next, v_next): state after ``dt``; exactly ``(target, 0.0)`` once the trajectory ends
        within the step.
    """
    d = target - x
    if d == 0.0 and v == 0.0:
        return target, 0.0
    tol = 64.0 * _EPS * (abs(x) + abs(target))  # rounding of d = target - x
    s, V, a1, t1, t2, t3 = _bang_bang_plan(d, v, vmax, amax, tol)
    if t1 + t2 + t3 <= dt * (1.0 + 1e-9):
        return target, 0.0
    rem = dt
    pos = 0.0
    vel = V
    tau = min(rem, t1)
    pos += vel * tau + 0.5 * a1 * tau * tau
    vel += a1 * tau
    rem -= tau
    if rem > 0.0:
        tau = min(rem, t2)
        pos += vel * tau
        rem -= tau
        if rem > 0.0:
            tau = min(rem, t3)
            pos += vel * tau - 0.5 * amax * tau * tau
            vel -= amax * tau
    return x + s * pos, s * vel


class BangBang1D:
    """Scalar time-optimal bang-bang filter (``FilterBangBangAcc``), see :func:`bang_bang_step`.

    Args:
        max_vel: velocity bound [unit/s] (> 0).
        max_acc: acceleration bound [unit/s^2] (> 0).

    Attributes:
        x: filtered position [unit]. v: filtered velocity [unit/s].
    """

    def __init__(self, max_vel: float, max_acc: float):
        if not (max_vel > 0.0 and max_acc > 0.0):
            raise ValueError(f"max_vel and max_acc must be > 0, got {max_vel!r}, {max_acc!r}")
        self.max_vel = float(max_vel)
        self.max_acc = float(max_acc)
        self.x = 0.0
        self.v = 0.0

    def reset(self, x: float, v: float = 0.0) -> None:
        """Set the state to position ``x`` [unit] and velocity ``v`` [unit/s]."""
        self.x = float(x)
        self.v = float(v)

    def step(self, target: float, dt: float) -> float:
        """Advance by ``dt`` [s] toward ``target`` [unit]; returns the new position [unit]."""
        self.x, self.v = bang_bang_step(self.x, self.v, float(target), self.max_vel, self.max_acc, dt)
        return self.x


class BangBangFilter:
    """Component-wise time-optimal bang-bang filter on an (n,) vector (independent components).

    Args:
        n: number of components.
        max_vel: velocity bound per component [unit/s] (> 0).
        max_acc: acceleration bound per component [unit/s^2] (> 0).

    Attributes:
        x: (n,) filtered position [unit]. v: (n,) filtered velocity [unit/s].
    """

    def __init__(self, n: int, max_vel: float, max_acc: float):
        if not (max_vel > 0.0 and max_acc > 0.0):
            raise ValueError(f"max_vel and max_acc must be > 0, got {max_vel!r}, {max_acc!r}")
        self.n = int(n)
        self.max_vel = float(max_vel)
        self.max_acc = float(max_acc)
        self.x = np.zeros(self.n)
        self.v = np.zeros(self.n)

    def reset(self, x: np.ndarray, v: np.ndarray | None = None) -> None:
        """Set the state: ``x`` (n,) [unit], ``v`` (n,) [unit/s] (zeros by default)."""
        self.x = np.array(x, dtype=float).reshape(self.n)
        self.v = np.zeros(self.n) if v is None else np.array(v, dtype=float).reshape(self.n)

    def step(self, target: np.ndarray, dt: float) -> np.ndarray:
        """Advance every component by ``dt`` [s] toward ``target`` (n,); returns a copy of ``x``."""
        self.x, self.v = self.advance(self.x, self.v, target, dt)
        return self.x.copy()

    def advance(
        self, x: np.ndarray, v: np.ndarray, target: np.ndarray, dt: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """Stateless step: (n,) ``x``, ``v``, ``target`` -> (n,) ``x_next``, ``v_next``."""
        xn = np.empty(self.n)
        vn = np.empty(self.n)
        for i in range(self.n):
            xn[i], vn[i] = bang_bang_step(
                float(x[i]), float(v[i]), float(target[i]), self.max_vel, self.max_acc, dt
            )
        return xn, vn


# --------------------------------------------------------------------------------------------
# boundDistance (Clamp.h: ClampPositionUpdateIntoSphere / ClampOrientationUpdateIntoSphere)
# --------------------------------------------------------------------------------------------
def clamp_position_update_into_sphere(
    p: np.ndarray, delta: np.ndarray, center: np.ndarray, radius: float
) -> np.ndarray:
    """Apply the update ``p + delta`` but keep the result in the ball ``|x - center| <= radius``.

    Ray/sphere semantics (SEIKO §7.1 step 2, ``ClampPositionUpdateIntoSphere``):

    * zero update: ``p`` is returned unchanged (bit-exact);
    * ``p + delta`` inside the ball: accepted as is (also when ``p`` was outside: it re-enters);
    * ``p`` inside and ``p + delta`` outside: the step is shortened to the exit point of the ray
      ``p + s delta`` (on the sphere);
    * ``p`` outside and moving away (``delta . (p - center) >= 0``): the step is turned back
      toward the ball, ``p`` moves by ``min(|delta|, |p - center| - radius)`` toward the centre
      (never past the sphere);
    * ``p`` outside and moving toward the centre: if the ray misses the ball there is no update;
      if it reaches the ball the step is accepted, shortened to the far intersection when it
      would cross the ball entirely.

    Args:
        p: (3,) current point [m] (or rotation vector [rad] for the orientation variant).
        delta: (3,) update, same unit.
        center: (3,) centre of the ball, same unit.
        radius: ball radius (> 0), same unit.

    Returns:
        (3,) updated point (a new array).
    """
    p = np.asarray(p, dtype=float)
    delta = np.asarray(delta, dtype=float)
    center = np.asarray(center, dtype=float)
    if not np.any(delta):
        return p.copy()
    q = p + delta
    r2 = radius * radius
    if float((q - center) @ (q - center)) <= r2:
        return q
    e = p - center
    a = float(delta @ delta)
    b = float(delta @ e)  # half of the usual "b"
    c = float(e @ e) - r2
    if c <= 0.0:
        # inside (or on the sphere), leaving: exit point of the ray
        s = (-b + math.sqrt(max(0.0, b * b - a * c))) / a
        return p + min(1.0, max(0.0, s)) * delta
    # outside
    dist = math.sqrt(float(e @ e))
    if b >= 0.0:
        # moving away: step back toward the ball, at most |delta|, stopping on the sphere
        step = min(math.sqrt(a), dist - radius)
        return p - (step / dist) * e
    disc = b * b - a * c
    if disc < 0.0:
        return p.copy()  # the ray misses the ball: no update
    s_exit = (-b + math.sqrt(disc)) / a
    return p + min(1.0, s_exit) * delta


def clamp_orientation_update_into_sphere(
    R: np.ndarray, omega_dt: np.ndarray, R_center: np.ndarray, radius: float
) -> np.ndarray:
    """Orientation variant of :func:`clamp_position_update_into_sphere`.

    The update is ``R <- exp3(omega_dt) R`` (world frame). The ball is
    ``|log3(R R_center^T)| <= radius``. When the unclamped update leaves the ball, the ray rules
    are applied in the tangent space at the centre on ``e = log3(R R_center^T)`` with step
    ``omega_dt`` (first-order), and the result is ``exp3(e_new) R_center`` (left multiplication),
    which lies inside the ball exactly.

    Args:
        R: (3, 3) current rotation, world from effector.
        omega_dt: (3,) rotation vector of the update, world frame [rad].
        R_center: (3, 3) centre rotation, world from effector.
        radius: ball radius [rad], in (0, pi).

    Returns:
        (3, 3) updated rotation (a new array).
    """
    R = np.asarray(R, dtype=float)
    omega_dt = np.asarray(omega_dt, dtype=float)
    if not np.any(omega_dt):
        return R.copy()
    R_new = pin.exp3(omega_dt) @ R
    e_new = pin.log3(R_new @ R_center.T)
    if float(e_new @ e_new) <= radius * radius:
        return R_new
    e = pin.log3(R @ R_center.T)
    e_clamped = clamp_position_update_into_sphere(e, omega_dt, np.zeros(3), radius)
    if np.array_equal(e_clamped, e):
        return R.copy()
    return pin.exp3(e_clamped) @ R_center


def bound_distance(
    X: pin.SE3, twist_dt: np.ndarray, X_center: pin.SE3, radius_lin: float, radius_ang: float
) -> pin.SE3:
    """``boundDistance(X (+) twist_dt, X_center)`` of SEIKO eq. (8), world frame.

    Args:
        X: current reference pose, world from effector.
        twist_dt: (6,) world-frame increment ``[dp; dtheta]`` [m; rad].
        X_center: centre pose, world from effector.
        radius_lin: position ball radius [m].
        radius_ang: orientation ball radius [rad].

    Returns:
        Updated pose; position and orientation are clamped independently.
    """
    twist_dt = np.asarray(twist_dt, dtype=float)
    p = clamp_position_update_into_sphere(X.translation, twist_dt[:3], X_center.translation, radius_lin)
    R = clamp_orientation_update_into_sphere(X.rotation, twist_dt[3:], X_center.rotation, radius_ang)
    return pin.SE3(R, p)


# --------------------------------------------------------------------------------------------
# Pipeline
# --------------------------------------------------------------------------------------------
class EffectorInputFilter:
    """Operator input filter of one effector: SEIKO eq. (8) then low-pass then bang-bang (§7.1).

    Per step, with ``dt = config.dt_s``:

    1. ``X_ref <- boundDistance(X_ref (+) dt nu, X_center)`` (world frame, (8));
    2. ``p_lp <- alpha p_lp + (1 - alpha) p_ref``;
       ``R_lp <- exp3((1 - alpha) log3(R_ref R_lp^T)) R_lp`` (slerp-style exponential filter,
       ``alpha`` from :func:`contactflow.seiko.filters.alpha_from_cutoff`);
    3. position: component-wise time-optimal bang-bang from ``(p, v)`` toward ``(p_lp, 0)``
       under ``max_vel_lin_mps`` / ``max_acc_lin_mps2``; orientation: the same from
       ``(0, omega)`` toward ``(log3(R_lp R^T), 0)`` under ``max_vel_ang_radps`` /
       ``max_acc_ang_radps2``, then ``R <- exp3(dtheta) R``.

    Only the velocity-command path is implemented (no clutch / raw VR pose, see module doc).
    Stages are skipped when their input equals their state exactly, so a zero command from rest
    leaves every pose bit-exactly unchanged. A non-finite twist is replaced by zero (hold), logged
    and counted in ``diagnostics["n_rejected"]``.

    Args:
        config: filter parameters.
    """

    def __init__(self, config: InputFilterConfig | None = None):
        self.config = config or InputFilterConfig()
        c = self.config
        self.alpha = alpha_from_cutoff(c.cutoff_hz, c.dt_s)
        self._bb_lin = BangBangFilter(3, c.max_vel_lin_mps, c.max_acc_lin_mps2)
        self._bb_ang = BangBangFilter(3, c.max_vel_ang_radps, c.max_acc_ang_radps2)
        self.x_ref = pin.SE3.Identity()
        self.x_lp = pin.SE3.Identity()
        self.x_out = pin.SE3.Identity()
        self.omega_out = np.zeros(3)
        self._twist_out = np.zeros(6)
        self.n_rejected = 0
        self._is_reset = False
        self._at_rest = False

    def reset(self, pose: pin.SE3) -> None:
        """Start at rest at ``pose`` (world from effector): reference, low-pass and output states."""
        self.x_ref = pin.SE3(pose)
        self.x_lp = pin.SE3(pose)
        self.x_out = pin.SE3(pose)
        self._bb_lin.reset(pose.translation)
        self.omega_out = np.zeros(3)
        self._twist_out = np.zeros(6)
        self._bb_ang.reset(np.zeros(3))
        self.n_rejected = 0
        self._is_reset = True
        self._at_rest = True

    @property
    def twist(self) -> np.ndarray:
        """(6,) mean world-frame velocity of the output pose over the last step [m/s, rad/s].

        ``[(p_k - p_{k-1}) / dt; log3(R_k R_{k-1}^T) / dt]``. (The bang-bang state velocity at the
        sample instants can differ by up to ``max_acc dt / 2`` when it switches inside a step.)
        """
        return self._twist_out.copy()

    @property
    def diagnostics(self) -> dict:
        """Signals for logging: reference/output positions, clamp distance, rejected inputs."""
        return {
            "p_ref": self.x_ref.translation.copy(),
            "p_lp": self.x_lp.translation.copy(),
            "p_out": self.x_out.translation.copy(),
            "twist_out": self.twist,
            "n_rejected": self.n_rejected,
        }

    def step(self, twist_cmd: np.ndarray, pose_center: pin.SE3) -> pin.SE3:
        """Advance one period.

        Args:
            twist_cmd: (6,) operator twist ``[v; omega]`` in the world frame [m/s, rad/s]
                (plus any admittance twist); it is consumed for this step only.
            pose_center: ``X^d_off``, the current desired effector pose of the Retargeting
                model (world from effector); centre of the ``boundDistance`` balls.

        Returns:
            ``X_target``: the filtered target pose for the Retargeting (world from effector).

        Raises:
            ContractError: ``twist_cmd`` is not 6 numbers, or ``reset`` was never called.
        """
        if not self._is_reset:
            raise ContractError("EffectorInputFilter.step called before reset(pose)")
        nu = np.asarray(twist_cmd, dtype=float)
        if nu.shape != (6,):
            raise ContractError(f"twist_cmd: expected shape (6,), got {nu.shape}")
        if not np.all(np.isfinite(nu)):
            self.n_rejected += 1
            log.warning("non-finite operator twist %s replaced by zero", nu)
            nu = np.zeros(6)
        if self._at_rest and not nu.any():
            # every stage at rest on the same pose and no command: each stage would return its
            # state unchanged (bit-exact), so skip them (enabled contacts are reset every cycle)
            self._twist_out = np.zeros(6)
            return pin.SE3(self.x_out)
        c = self.config
        dt = c.dt_s

        # 1. reference integration with boundDistance, eq. (8)
        self.x_ref = bound_distance(
            self.x_ref, dt * nu, pose_center, c.clamp_radius_lin_m, c.clamp_radius_ang_rad
        )

        # 2. exponential low-pass (position; slerp-style on rotation)
        k = 1.0 - self.alpha
        p_lp = self.x_lp.translation
        p_ref = self.x_ref.translation
        if not np.array_equal(p_lp, p_ref):
            p_lp = p_lp + k * (p_ref - p_lp)
        R_lp = self.x_lp.rotation
        R_ref = self.x_ref.rotation
        if not np.array_equal(R_lp, R_ref):
            R_lp = pin.exp3(k * pin.log3(R_ref @ R_lp.T)) @ R_lp
        self.x_lp = pin.SE3(R_lp, p_lp)

        # 3. time-optimal bang-bang, position components
        p_prev = self.x_out.translation
        p_out = self._bb_lin.step(p_lp, dt)
        # orientation components: from (0, omega) toward (log3(R_lp R^T), 0)
        R_out = self.x_out.rotation
        dtheta = np.zeros(3)
        if np.array_equal(R_out, R_lp):
            err = np.zeros(3)
        else:
            err = pin.log3(R_lp @ R_out.T)
        if np.any(err) or np.any(self.omega_out):
            dtheta, self.omega_out = self._bb_ang.advance(np.zeros(3), self.omega_out, err, dt)
            if np.array_equal(dtheta, err) and not np.any(self.omega_out):
                R_out = R_lp.copy()  # trajectory ended inside the step: land exactly
            else:
                R_out = pin.exp3(dtheta) @ R_out
        self.x_out = pin.SE3(R_out, p_out)
        self._twist_out = np.concatenate([(p_out - p_prev) / dt, dtheta / dt])
        self._at_rest = (
            not self.omega_out.any() and not self._bb_lin.v.any()
            and np.array_equal(p_out, p_lp) and np.array_equal(p_lp, self.x_ref.translation)
            and np.array_equal(R_out, R_lp) and np.array_equal(R_lp, self.x_ref.rotation)
        )
        return pin.SE3(self.x_out)


class InputFilter:
    """Operator input filters of several effectors (one :class:`EffectorInputFilter` each).

    Enabled contacts are not filtered by SEIKO: the caller resets an effector to its contact
    target with :meth:`reset_effector` every cycle while it is in contact (§7.1).

    Args:
        config: parameters shared by all effectors.
        effector_names: names of the filtered effectors (e.g. ``("left_hand", "right_hand")``).
    """

    def __init__(self, config: InputFilterConfig | None, effector_names: Iterable[str]):
        self.config = config or InputFilterConfig()
        self.effector_names = tuple(effector_names)
        if len(set(self.effector_names)) != len(self.effector_names):
            raise ValueError(f"duplicate effector names in {self.effector_names}")
        self.filters = {name: EffectorInputFilter(self.config) for name in self.effector_names}

    def reset(self, poses: Mapping[str, pin.SE3]) -> None:
        """Reset every effector at rest at ``poses[name]`` (world from effector).

        Raises:
            ContractError: a pose is missing.
        """
        missing = [n for n in self.effector_names if n not in poses]
        if missing:
            raise ContractError(f"InputFilter.reset: missing pose for {', '.join(missing)}")
        for name in self.effector_names:
            self.filters[name].reset(poses[name])

    def reset_effector(self, name: str, pose: pin.SE3) -> None:
        """Reset one effector at rest at ``pose`` (e.g. while it is an enabled contact)."""
        self._filter(name).reset(pose)

    def _filter(self, name: str) -> EffectorInputFilter:
        try:
            return self.filters[name]
        except KeyError:
            raise ContractError(
                f"unknown effector {name!r}; filtered effectors: {', '.join(self.effector_names)}"
            ) from None

    def step(
        self, twists: Mapping[str, np.ndarray], centers: Mapping[str, pin.SE3]
    ) -> dict[str, pin.SE3]:
        """Advance every effector one period.

        Args:
            twists: effector -> (6,) world twist ``[v; omega]`` [m/s, rad/s]; a missing
                effector gets a zero twist.
            centers: effector -> current desired pose ``X^d_off`` (world from effector); required
                for every filtered effector.

        Returns:
            effector -> target pose ``X_target`` (world from effector).

        Raises:
            ContractError: an unknown effector in ``twists``, a missing centre, a bad twist shape.
        """
        unknown = [n for n in twists if n not in self.filters]
        if unknown:
            raise ContractError(
                f"twists for unknown effector(s) {', '.join(unknown)}; "
                f"filtered effectors: {', '.join(self.effector_names)}"
            )
        missing = [n for n in self.effector_names if n not in centers]
        if missing:
            raise ContractError(f"InputFilter.step: missing centre pose for {', '.join(missing)}")
        zero = np.zeros(6)
        return {
            name: f.step(twists.get(name, zero), centers[name]) for name, f in self.filters.items()
        }
