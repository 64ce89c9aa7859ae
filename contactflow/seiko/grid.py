"""The Fig. 7 robustness grid of SEIKO (RA-L 2024 §V-F, Fig. 7; seiko.md §9.3 "Fig. 7 protocol").

Talos in double support reaches with its **left hand** to a distant target at the edge of the
Retargeting's feasibility and comes back, with an *unmodelled* mass at the left hand (in the MuJoCo
model only), for each hand speed x mass x target, in three conditions:

* ``off``: the SEIKO Controller off, the Retargeting's ahead posture ``theta_ahead`` sent directly
  (:class:`contactflow.seiko.loop.SeikoLoop` with ``controller_on=False``; the Controller runs in shadow);
* ``no_tau_limit``: the Controller on without (11i) and without (12)
  (``torque_limit_constraint=False``, ``torque_limit_adaptation=False``);
* ``full``: the Controller as configured: the :class:`~contactflow.seiko.controller.ControllerConfig`
  defaults (the grid follows whatever the defaults are), or the configuration given (``ccfg``,
  ``--config FILE``: e.g. ``robots/talos/seiko_fig7.yaml``, K_p = 0.5 of (10)); ``no_tau_limit`` takes the
  same configuration without (11i) and (12).

The paper's counts (no fall, out of 10 per cell) give 30/250 = 0.12, 135/250 = 0.54, 181/250 = 0.72.

**Targets** (:func:`sample_targets`, seeded). The paper does not list its targets (its words: "reaching
a distant target with the left hand"; seiko.md §9.3 reads them as at the edge of feasibility). Here a target is a direction drawn uniformly in azimuth
[-20, 80] deg (forward to the robot's left) and elevation [-25, 35] deg, and the distance at which the
*Retargeting alone* (input filter + QP (9), run kinematically, no simulation, nominal model)
stops progressing along it when the left hand is commanded far beyond (at ``probe_speed_mps``):
the point where the Retargeting saturates (whichever of its constraints binds). A direction whose
edge is nearer than ``min_distance_m`` is redrawn. Each target is reachable by construction (the
Retargeting reached it with the nominal model) and at its feasibility edge.

**Trial** (:func:`run_trial`): the in-process closed loop :class:`contactflow.seiko.loop.SeikoLoop`
(scenario -> :class:`~contactflow.seiko.loop.SeikoPipeline` -> MuJoCo Talos with the driver's command
safety). A :class:`~contactflow.sim.mujoco_model.PointMass` is welded at the left hand frame and ramped
from ~0 to the trial's mass over [``LOAD_START_S``, ``LOAD_START_S`` + ``LOAD_RAMP_S``] (as
``benchmarks/bench_seiko_reach_load.py`` does for Fig. 6: the load is "added during operation", the
reset is the nominal one; ``--load-at wrist`` puts it at the wrist centre instead, where it puts no
moment on the wrist joints: the left wrist ``arm_left_7`` has an 8 N m effort limit, 3.4 kg at the
hand frame's 0.24 m lever). From ``REACH_START_S`` the operator (:class:`ReachOperator`) commands the
left hand at the trial's speed toward the target until the Retargeting's desired hand is there (or
stops at its edge), holds ``HOLD_S``, brings it back to its start, and the run goes on ``TAIL_S``.
The input filter's bang-bang velocity bound (0.2 m/s per axis by default) is raised to the trial's
speed where it would cap it; everything else is the configs' defaults.

**Operator** (``operator``): ``"target"`` (default) reaches until the target or the Retargeting's edge,
whatever the Controller does; ``"as_allowed"`` also ends the reach as soon as the driving Controller's
(12) engages a joint during the reach (its limit goes below the URDF effort, the Controller's "stop moving
this way" warning; :class:`ReachLimitWatch`: a joint engaged before the reach, by the load's ramp, does
not count): the paper's Fig. 6 operator reached "as far as allowed by the controller", and its Fig. 7
caption says that considering the torque limits in the controller "enhances robustness by optimizing
posture and avoiding infeasible hand pose commands". This operator changes the motion of the full
method only: the comparison with the other conditions is then not like for like (the full method's hand
stops earlier). Without (12) (``off``, ``no_tau_limit``) there is
no such signal and the two operators are the same trial (a results file reuses those trials across
operators and reruns the full method's). The paper does not say how its Fig. 7 operator decided to
stop; both readings are measurable here.

**Outcome**: ``success`` = the robot did not fall (base below the robot file's fall height or a
diverged state: :meth:`contactflow.sim.mujoco_robot.MujocoRobotSim.fell`, the project's rule) **and**
no QP of a stage driving the robot failed (the reference code throws on a failed QP: the run would
stop); the Controller's QP counts only when it drives the robot (not in ``off``). A failure's
``cause``: ``qp_failure`` (a driving QP failed), ``torque_limit`` (a joint's actuator torque reached
its URDF effort limit, the MuJoCo forcerange, before the fall; ``torque_limit_joint`` names the joint
longest at its limit in the last ``FALL_WINDOW_S`` before it),
``fall`` (neither). ``no_fall`` alone (the paper's metric) is kept in every result too.

**Aggregation** (:func:`summarize`): per condition the success rate with a 95 % Wilson score interval
(:func:`wilson_interval`), the failure causes, and per speed x mass cell the counts.

The grid runner (:func:`run_grid`, ``contactflow bench seiko-grid``) runs trials in parallel
processes, keeps every finished trial in the output JSON (rewritten after each one) and skips those
on a rerun (resumable).
"""

from __future__ import annotations

import dataclasses
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from contactflow.errors import ConfigError
from contactflow.paths import OneFileAction, write_text_atomic

__all__ = [
    "SPEEDS_MPS", "MASSES_KG", "CONDITIONS", "PAPER_RATES", "PAPER_COUNTS", "EFFECTOR",
    "OPERATORS", "GridTarget", "TrialSpec", "ReachLimitWatch", "ReachOperator", "effector_load", "load_ramp", "sample_targets",
    "run_trial", "wilson_interval", "summarize", "trial_specs", "run_grid", "config_changes", "plot_grid", "main",
]

EFFECTOR = "left_hand"
SPEEDS_MPS = (0.02, 0.10, 0.20, 0.30, 0.40)
"""The paper's hand Cartesian speeds [m/s] (2, 10, 20, 30, 40 cm/s)."""
MASSES_KG = (0.0, 2.0, 5.0, 10.0, 12.0)
"""The paper's unmodelled left-hand masses [kg]."""
CONDITIONS = ("off", "no_tau_limit", "full")
"""Condition keys: Controller off; Controller without (11i) and (12); the full method."""
CONDITION_LABELS = {"off": "Controller off", "no_tau_limit": "no (11i), no (12)", "full": "full"}
PAPER_RATES = {"off": 0.12, "no_tau_limit": 0.54, "full": 0.72}
"""The paper's overall success rates (seiko.md §9.3)."""
PAPER_COUNTS = {  # rows: speeds 2 -> 40 cm/s; columns: masses 0 -> 12 kg (read from Fig. 7, seiko.md §9.3)
    "off": [[4, 1, 1, 0, 0], [5, 1, 0, 0, 0], [5, 1, 0, 0, 0], [5, 1, 0, 0, 0], [5, 1, 0, 0, 0]],
    "no_tau_limit": [[9, 8, 7, 6, 6], [9, 8, 7, 5, 3], [9, 8, 4, 1, 1], [9, 8, 5, 1, 0], [9, 8, 4, 0, 0]],
    "full": [[10, 10, 10, 10, 10], [10, 10, 10, 8, 6], [10, 10, 7, 4, 3], [10, 9, 7, 2, 0], [9, 9, 6, 1, 0]],
}

LOAD_BODY = "grid_hand_load"
LOAD_START_S, LOAD_RAMP_S = 1.0, 0.5
REACH_START_S = 2.5  # after the load is in and the Controller's 2 s output blend is over
HOLD_S = 1.0
TAIL_S = 2.0
AZIMUTH_DEG = (-20.0, 80.0)
ELEVATION_DEG = (-25.0, 35.0)
SATURATION_RATIO = 0.1  # progress along the direction over SATURATION_WINDOW_S below this x the probe's: saturated
SATURATION_WINDOW_S = 0.5
GOAL_TOL_M = 0.01  # the operator's goal tolerance [m]
RETURN_TAU_S = 0.25  # the operator slows down over the last v * RETURN_TAU_S of the return [s]
FALL_WINDOW_S = 1.0  # a joint at its effort limit within this long before a fall: cause "torque_limit"
TORQUE_SATURATION = 0.999  # |tau| >= this * tau_max: the actuator is at its force limit
LIMITED_FRACTION = 0.99  # a (11i) limit below this * tau_max: (12) has lowered it


# ---- the unmodelled load ---------------------------------------------------------------------
OPERATORS = ("target", "as_allowed")
"""The trial operators (:class:`ReachOperator` ``stop_when_limited`` False / True; module doc)."""
LOAD_AT = ("hand", "wrist")


def effector_load(robot, effector: str, mass_kg: float, name: str = LOAD_BODY, at: str = "hand"):
    """An unmodelled point mass at an effector (simulation only).

    Args:
        robot: the :class:`contactflow.robot.Robot`. effector: a contact name (its frame is a robot
            file ``extra_frames`` entry or a link). mass_kg: [kg], > 0. name: the MuJoCo body name.
        at: ``"hand"``: at the effector's frame (Talos left hand: 0.24 m beyond the wrist joints, a
            grasped object); ``"wrist"``: at the origin of the link moved by the frame's parent joint
            (Talos: ``arm_left_7_link``, the wrist centre: no moment on the wrist joints).

    Returns:
        :class:`contactflow.sim.mujoco_model.PointMass`.

    Raises:
        ConfigError: an unknown effector or ``at``, or a frame that is neither an extra frame nor a link.
    """
    import pinocchio as pin

    from contactflow.sim.mujoco_model import PointMass

    if effector not in robot.contacts:
        raise ConfigError(f"effector_load: unknown effector {effector!r}; known: {list(robot.contacts)}")
    if at not in LOAD_AT:
        raise ConfigError(f"effector_load: at must be one of {LOAD_AT}, got {at!r}")
    m = robot.model
    frame = robot.contacts[effector].frame
    if at == "wrist":
        j = m.frames[m.getFrameId(frame)].parentJoint
        for f in m.frames:
            if f.type == pin.FrameType.BODY and f.parentJoint == j and f.placement.isIdentity():
                return PointMass(name=name, parent=f.name, pos=(0.0, 0.0, 0.0), mass=float(mass_kg))
        raise ConfigError(f"effector_load: no link at joint {m.names[j]!r} of {effector!r}")
    extra = (robot.raw.get("extra_frames") or {}).get(frame)
    if extra is not None:
        return PointMass(name=name, parent=extra["parent"], pos=tuple(float(x) for x in extra["translation"]),
                         mass=float(mass_kg))
    fid = m.getFrameId(frame)
    if fid >= m.nframes or m.frames[fid].type != pin.FrameType.BODY:
        raise ConfigError(f"effector_load: frame {frame!r} of {effector!r} is neither in extra_frames nor a link")
    return PointMass(name=name, parent=frame, pos=(0.0, 0.0, 0.0), mass=float(mass_kg))


def load_ramp(mass_kg: float, start_s: float = LOAD_START_S, ramp_s: float = LOAD_RAMP_S, body: str = LOAD_BODY):
    """``(sim_hook, disturb)`` for :class:`~contactflow.seiko.loop.SeikoLoop`: the body's mass is ~0
    (1e-6 kg) at reset and ramps linearly to ``mass_kg`` over [start_s, start_s + ramp_s] [s]."""

    def hook(sim):
        sim.set_body_mass(body, 1e-6)

    def disturb(sim, t):
        if start_s - 0.01 <= t <= start_s + ramp_s + 0.01:
            s = min(1.0, max(0.0, (t - start_s) / ramp_s))
            sim.set_body_mass(body, max(1e-6, mass_kg * s))

    return hook, disturb


# ---- targets -------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class GridTarget:
    """A reach target of the grid.

    Attributes:
        index: its index. azimuth_deg, elevation_deg: the direction (world; azimuth from +x toward +y).
        direction: (3,) unit vector, world. distance_m: the Retargeting's feasibility edge along it [m].
    """

    index: int
    azimuth_deg: float
    elevation_deg: float
    direction: tuple[float, float, float]
    distance_m: float

    @property
    def offset_m(self) -> np.ndarray:
        """(3,) commanded left-hand displacement, world [m]."""
        return np.asarray(self.direction) * self.distance_m


def _direction(az_deg: float, el_deg: float) -> np.ndarray:
    a, e = math.radians(az_deg), math.radians(el_deg)
    return np.array([math.cos(a) * math.cos(e), math.sin(a) * math.cos(e), math.sin(e)])


def feasibility_edge(robot, direction: np.ndarray, *, probe_speed_mps: float = 0.2, max_time_s: float = 10.0,
                     effector: str = EFFECTOR, rcfg=None, fcfg=None) -> tuple[float, bool]:
    """Distance [m] the Retargeting moves ``effector`` along ``direction`` before it saturates.

    Runs the input filter (8) and the Retargeting QP (9) alone (:meth:`SeikoPipeline.plan`,
    kinematic: no simulation, nominal model) with the effector commanded at ``probe_speed_mps``
    along ``direction`` (world) from the reset posture, until its desired position progressed
    less than ``SATURATION_RATIO`` x the commanded progress along it over ``SATURATION_WINDOW_S``,
    or ``max_time_s``.

    Returns:
        (distance along the direction at the end [m], saturated: True when it stopped progressing).
    """
    from contactflow.environment import Environment
    from contactflow.operator.input_filter import InputFilterConfig
    from contactflow.operator.scenario import OperatorCommand
    from contactflow.seiko.loop import DT_S, SeikoPipeline
    from contactflow.seiko.stages import operator_command_values

    d = np.asarray(direction, dtype=float)
    d = d / np.linalg.norm(d)
    fcfg = fcfg or InputFilterConfig()
    if fcfg.max_vel_lin_mps < probe_speed_mps:
        fcfg = dataclasses.replace(fcfg, max_vel_lin_mps=probe_speed_mps)
    p = SeikoPipeline(robot, filter_config=fcfg, retargeting_config=rcfg, environment=Environment(), lag=1,
                      controller=False)
    twist = np.concatenate([d * probe_speed_mps, np.zeros(3)])
    win = int(round(SATURATION_WINDOW_S / DT_S))
    hist: list[float] = []
    x0 = None
    for k in range(int(round(max_time_s / DT_S))):
        t = k * DT_S
        cmd = OperatorCommand(t=t, velocities={effector: twist}, finished=False, enable={}, push={}, force_rates={})
        out = p.plan(k, t, operator_command_values(robot, cmd))
        x = out.desired[f"pose_d.{effector}"][:3]
        x0 = x.copy() if x0 is None else x0
        hist.append(float((x - x0) @ d))
        if len(hist) > win and hist[-1] - hist[-1 - win] < SATURATION_RATIO * probe_speed_mps * SATURATION_WINDOW_S \
                and hist[-1] > 0.05:
            return hist[-1], True
    return hist[-1], False


def sample_targets(robot, n: int, seed: int, *, min_distance_m: float = 0.25, probe_speed_mps: float = 0.2,
                   max_draws: int | None = None, progress: Callable[[str], None] | None = None) -> list[GridTarget]:
    """``n`` seeded reach targets of the left hand at the Retargeting's feasibility edge (module doc).

    Args:
        robot: the :class:`contactflow.robot.Robot` (Talos). n: targets (>= 1). seed: RNG seed.
        min_distance_m: an edge nearer than this [m] is not a "distant target": the direction is redrawn.
        probe_speed_mps: commanded speed of the kinematic probe [m/s].
        max_draws: directions tried at most (default 10 n).
        progress: called with one line per accepted or rejected direction.

    Returns:
        n :class:`GridTarget` (same seed, same robot and configs: the same targets).

    Raises:
        ConfigError: ``n`` < 1, or fewer than ``n`` acceptable directions in ``max_draws``.
    """
    if n < 1:
        raise ConfigError(f"sample_targets: n must be >= 1, got {n}")
    rng = np.random.default_rng(seed)
    out: list[GridTarget] = []
    draws = 0
    max_draws = max_draws or 10 * n
    while len(out) < n:
        if draws >= max_draws:
            raise ConfigError(f"sample_targets: only {len(out)} of {n} directions reached >= {min_distance_m} m "
                              f"in {max_draws} draws (seed {seed})")
        draws += 1
        az, el = float(rng.uniform(*AZIMUTH_DEG)), float(rng.uniform(*ELEVATION_DEG))
        d = _direction(az, el)
        dist, saturated = feasibility_edge(robot, d, probe_speed_mps=probe_speed_mps)
        ok = saturated and dist >= min_distance_m
        if progress is not None:
            progress(f"target direction az {az:.1f} el {el:.1f} deg: edge {dist:.3f} m"
                     f"{'' if saturated else ' (not saturated)'} -> {'kept' if ok else 'redrawn'}")
        if ok:
            out.append(GridTarget(len(out), round(az, 3), round(el, 3), tuple(float(x) for x in d), round(dist, 4)))
    return out


# ---- one trial -----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class TrialSpec:
    """One trial of the grid: condition (:data:`CONDITIONS`), hand speed [m/s], unmodelled mass [kg], target index."""

    condition: str
    speed_mps: float
    mass_kg: float
    target: int

    @property
    def key(self) -> str:
        return f"{self.condition}|{self.speed_mps:g}|{self.mass_kg:g}|{self.target}"


class ReachOperator:
    """The grid's operator: reach the target at the trial's speed, hold, come back (``SeikoLoop(operator_hook=...)``).

    It watches the Retargeting's desired left-hand position ``x_d`` (what the operator commands; the
    measured hand sags under the unmodelled load) and sends world twists:

    * before ``REACH_START_S``: nothing;
    * reach: ``speed_mps`` along the target direction until ``x_d`` progressed ``distance_m`` along it
      (less ``GOAL_TOL_M``), or stopped progressing (less than ``SATURATION_RATIO`` of the commanded
      progress over ``SATURATION_WINDOW_S``: the Retargeting is at its feasibility edge), or
      ``2 d / v + 2 s`` passed;
    * hold ``HOLD_S``;
    * return: toward ``x_d``'s start position at ``min(speed_mps, |e| / RETURN_TAU_S)`` (slowing down over the
      last few cm instead of overshooting) until within ``GOAL_TOL_M`` or ``2 d / v + 2 s`` passed;
    * then nothing: :attr:`done_at_s` is set and the trial runs ``TAIL_S`` more.

    The paper does not describe its operator beyond the hand speed; this one keeps the hand speed
    the trial's whatever the Retargeting's lag (the input filter's clamp loses commands that run
    ahead of it), so the fast trials reach as far as the slow ones.

    Args:
        target: the :class:`GridTarget`. speed_mps: hand speed [m/s].
        stop_when_limited: also end the reach once :attr:`limited` is set (the ``as_allowed`` operator).

    Attributes:
        phase: "wait", "reach", "hold", "return", "done". reached_s, done_at_s: phase ends [s] or None.
        x_d: (3,) the latest desired hand position, set by the trial loop (None before the first tick).
        limited: set by the trial loop: the driving Controller's (12) has lowered a joint's limit.
        stopped_by_limit: the reach ended because of :attr:`limited`.
    """

    def __init__(self, target: GridTarget, speed_mps: float, stop_when_limited: bool = False):
        if not speed_mps > 0:
            raise ConfigError(f"trial speed must be > 0 m/s, got {speed_mps}")
        self.dir = np.asarray(target.direction, dtype=float)
        self.d, self.v = float(target.distance_m), float(speed_mps)
        self.cap_s = 2.0 * self.d / self.v + 2.0
        self.phase = "wait"
        self.x_d = None
        self.x_start = None
        self.t_phase = 0.0
        self.reached_s = self.done_at_s = None
        self._hist: list[float] = []
        self.stop_when_limited = bool(stop_when_limited)
        self.limited = False
        self.stopped_by_limit = False

    def _twist(self, cmd, lin):
        return dataclasses.replace(cmd, velocities={**cmd.velocities, EFFECTOR: np.concatenate([lin, np.zeros(3)])})

    def __call__(self, t, cmd, reading):
        """One tick: the scenario's command (no left-hand command in it) -> the command to send."""
        zero = np.zeros(3)
        x = self.x_d
        if self.phase == "wait":
            if t < REACH_START_S - 1e-9 or x is None:
                return self._twist(cmd, zero)
            self.phase, self.t_phase, self.x_start = "reach", t, x.copy()
        if self.phase == "reach":
            s = float((x - self.x_start) @ self.dir)
            self._hist.append(s)
            from contactflow.seiko.loop import DT_S

            win = int(round(SATURATION_WINDOW_S / DT_S))
            stalled = (len(self._hist) > win
                       and s - self._hist[-1 - win] < SATURATION_RATIO * self.v * SATURATION_WINDOW_S)
            allowed = not (self.stop_when_limited and self.limited)
            if s < self.d - GOAL_TOL_M and not stalled and t - self.t_phase < self.cap_s and allowed:
                return self._twist(cmd, self.v * self.dir)
            self.stopped_by_limit = not allowed
            self.phase, self.t_phase, self.reached_s = "hold", t, t
        if self.phase == "hold":
            if t - self.t_phase < HOLD_S:
                return self._twist(cmd, zero)
            self.phase, self.t_phase = "return", t
        if self.phase == "return":
            e = self.x_start - x
            dist = float(np.linalg.norm(e))
            if dist > GOAL_TOL_M and t - self.t_phase < self.cap_s:
                return self._twist(cmd, e / dist * min(self.v, dist / RETURN_TAU_S))
            self.phase, self.done_at_s = "done", t
        return self._twist(cmd, zero)


class ReachLimitWatch:
    """The ``as_allowed`` operator's signal: (12) engages a joint *during the reach*.

    :meth:`update` is called every tick with the operator's phase and the Controller's (11i) limits
    ``tau_limit`` (n,) [N m]; at the first ``"reach"`` tick it notes which joints are already engaged
    (limit below ``tau_urdf``: lowered by (12) before the reach, e.g. by the load's ramp), and from then
    on returns the index of a joint that becomes engaged (the Controller's own test, the one that logs
    "stop moving this way"), else None. Outside the reach it returns None.

    Args:
        tau_urdf: (n,) the URDF effort limits [N m] (the Controller's unadapted limits).
    """

    def __init__(self, tau_urdf):
        self.tau_urdf = np.asarray(tau_urdf, dtype=float)
        self.engaged_at_start: np.ndarray | None = None

    def update(self, phase: str, tau_limit) -> int | None:
        if phase != "reach":
            return None
        engaged = np.asarray(tau_limit, dtype=float) < self.tau_urdf
        if self.engaged_at_start is None:
            self.engaged_at_start = engaged
            return None
        new = np.flatnonzero(engaged & ~self.engaged_at_start)
        return int(new[0]) if len(new) else None


#: the ControllerConfig fields of the limit update (12): unused when it is off (``no_tau_limit``)
ADAPTATION_FIELDS = ("max_tau_ratio", "tau_read_cutoff_hz", "torque_margin_nm", "torque_decay_nm_per_s",
                     "torque_hysteresis", "torque_lowering_nm_per_s")


def condition_config(condition: str, config: dict) -> dict:
    """The part of a ControllerConfig (as a dict) a condition's outcome depends on: nothing with the
    Controller off (it runs in shadow), all but :data:`ADAPTATION_FIELDS` without (12), all of it
    for the full method. A stored trial is reused only while this part is unchanged."""
    if condition == "off":
        return {}
    if condition == "no_tau_limit":
        return {k: v for k, v in config.items() if k not in ADAPTATION_FIELDS}
    return dict(config)


def condition_setup(condition: str, ccfg=None) -> tuple[bool, object]:
    """(controller_on, ControllerConfig) of a condition; ``ccfg`` (default: the defaults) is the full method's."""
    from contactflow.seiko.controller import ControllerConfig

    ccfg = ccfg or ControllerConfig()
    if condition == "off":
        return False, ccfg
    if condition == "no_tau_limit":
        return True, dataclasses.replace(ccfg, torque_limit_constraint=False, torque_limit_adaptation=False)
    if condition == "full":
        return True, ccfg
    raise ConfigError(f"unknown condition {condition!r}; expected one of {list(CONDITIONS)}")


def run_trial(spec: TrialSpec, target: GridTarget, robot=None, *, ccfg=None, load_at: str = "hand",
              operator: str = "target") -> dict:
    """Run one trial (module doc) and return its outcome.

    Args:
        spec: the trial. target: its :class:`GridTarget` (``target.index == spec.target``).
        robot: the :class:`contactflow.robot.Robot` (default: Talos, loaded here).
        ccfg: the full method's ControllerConfig (default: the defaults).
        load_at: where the unmodelled mass sits (:func:`effector_load`).
        operator: one of :data:`OPERATORS` (module doc).

    Returns:
        JSON-ready mapping: the spec's fields; ``success``, ``no_fall``, ``cause`` (None, ``"fall"``,
        ``"torque_limit"``, ``"qp_failure"``), ``fell_at_s``, ``torque_limit_joint`` (after a fall: the
        joint longest at its effort limit in the :data:`FALL_WINDOW_S` before it, else None),
        ``first_torque_limit_s`` (first tick any joint was at its limit, or None), ``max_tau_ratio``
        (largest |tau| / tau_max after the load ramp), ``retargeting_failures``, ``controller_failures``
        (those of the driving stages), ``first_qp_failure_s``, ``reach_fraction`` and
        ``desired_reach_fraction`` (largest measured / Retargeting-desired hand travel along the
        direction over the target distance; the measured one includes a fall's motion), ``reached_at_s``
        (the operator's reach ended), ``stopped_by_limit`` (the ``as_allowed`` operator ended it on (12)) and ``stop_joint`` (the joint (12)
        engaged), ``limited_joints`` (joints whose (11i) limit (12) lowered below
        99 % of the URDF effort: the Controller's ``tau_limit``), ``desired_peak_speed_mps`` (the Retargeting's desired hand
        speed along the direction, peak over 0.1 s [m/s]: the realised speed), ``returned`` (the hand was brought back to its start),
        ``sim_s``, ``wall_s``, ``cpu_s`` (process CPU time [s]).
    """
    import pinocchio as pin

    from contactflow.operator.input_filter import InputFilterConfig
    from contactflow.robot import load_robot
    from contactflow.seiko.loop import DT_S, SeikoLoop

    if robot is None:
        robot = load_robot("talos")
    if target.index != spec.target:
        raise ConfigError(f"run_trial: target {target.index} given for spec target {spec.target}")
    controller_on, cfg = condition_setup(spec.condition, ccfg)
    fcfg = InputFilterConfig()
    if fcfg.max_vel_lin_mps < spec.speed_mps:
        fcfg = dataclasses.replace(fcfg, max_vel_lin_mps=spec.speed_mps)
    extra, hook, disturb = [], None, None
    if spec.mass_kg > 0:
        extra = [effector_load(robot, EFFECTOR, spec.mass_kg, at=load_at)]
        hook, disturb = load_ramp(spec.mass_kg)
    import yaml

    if operator not in OPERATORS:
        raise ConfigError(f"--operator must be one of {OPERATORS}, got {operator!r}")
    op = ReachOperator(target, spec.speed_mps, stop_when_limited=operator == "as_allowed" and controller_on)
    bound_s = REACH_START_S + 2 * op.cap_s + HOLD_S + TAIL_S
    with tempfile.TemporaryDirectory(prefix="seiko_grid_") as tmp:
        path = Path(tmp) / "trial.yaml"  # no scripted command: the ReachOperator commands the hand
        path.write_text(yaml.safe_dump({"description": "seiko grid trial", "duration_s": bound_s}))
        loop = SeikoLoop(robot, path, ccfg=cfg, fcfg=fcfg, controller_on=controller_on, sim_hook=hook,
                         disturb=disturb, extra_bodies=extra, operator_hook=op)
    tau_max = np.asarray(robot.tau_max, dtype=float)
    watch = ReachLimitWatch(tau_max) if op.stop_when_limited else None
    stop_joint = None
    t_after_load = LOAD_START_S + LOAD_RAMP_S
    sat_joint = sat_t = first_fail = None
    win = int(round(FALL_WINDOW_S / DT_S))
    sat_hist = np.zeros((win, robot.n), dtype=bool)  # ring buffer: joints at their effort limit, last ticks
    max_ratio = 0.0
    pipe = loop.pipeline
    m, data = robot.model, robot.model.createData()
    fid = robot.contacts[EFFECTOR].frame_id
    direction = np.asarray(target.direction)
    x0, best = None, 0.0
    t0, c0 = time.perf_counter(), time.process_time()
    while not loop.step():
        r = loop.readings
        k = loop.k
        log_now = loop.log()
        op.x_d = log_now.pose_d[EFFECTOR][-1]
        if watch is not None and not op.limited:
            j = watch.update(op.phase, log_now.tau_limit[-1])
            if j is not None:
                op.limited, stop_joint = True, robot.joint_names[j]
        if op.done_at_s is not None and r.t >= op.done_at_s + TAIL_S:
            break
        ratio = np.abs(r.tau) / tau_max
        if r.t >= t_after_load:
            max_ratio = max(max_ratio, float(ratio.max()))
        sat = ratio >= TORQUE_SATURATION
        sat_hist[k % win] = sat
        if sat_t is None and sat.any():
            sat_t = float(r.t)
        fails = pipe.retargeting.failures + (pipe.controller.failures if controller_on else 0)
        if fails and first_fail is None:
            first_fail = float(r.t)
        if k % 25 == 0 or k == 1:
            pin.framesForwardKinematics(m, data, r.q)
            x = data.oMf[fid].translation
            if x0 is None:
                x0 = x.copy()
            best = max(best, float((x - x0) @ direction))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    L = loop.log()
    fell = bool(L.fell)
    ticks_at_limit = sat_hist.sum(axis=0)
    if fell and ticks_at_limit.any():
        sat_joint = robot.joint_names[int(np.argmax(ticks_at_limit))]
    # joints whose limit (12) lowered below 99 % of the URDF effort (the Controller's tau_limit; off: in shadow)
    limited = [robot.joint_names[i] for i in np.flatnonzero(L.tau_limit.min(axis=0) < LIMITED_FRACTION * tau_max)] \
        if len(L.t) else []
    pd = L.pose_d[EFFECTOR]
    sd = (pd - pd[0]) @ direction if len(pd) else np.zeros(1)
    desired_best = float(sd.max())
    n10 = int(round(0.1 / DT_S))  # the desired hand's peak speed along the direction, over 0.1 s
    peak_speed = float(((sd[n10:] - sd[:-n10]) / 0.1).max()) if len(sd) > n10 else 0.0
    ctrl_fail = L.controller_failures if controller_on else 0
    qp_fail = L.retargeting_failures + ctrl_fail
    if qp_fail and first_fail is None:  # failures of the very last tick
        first_fail = float(L.t[-1])
    if qp_fail:
        cause = "qp_failure"
    elif fell and sat_joint is not None:  # a joint at its limit in the FALL_WINDOW_S before the fall
        cause = "torque_limit"
    elif fell:
        cause = "fall"
    else:
        cause = None
    return {
        "condition": spec.condition, "speed_mps": spec.speed_mps, "mass_kg": spec.mass_kg, "target": spec.target,
        "success": cause is None, "no_fall": not fell, "cause": cause,
        "fell_at_s": float(L.t[-1]) if fell else None,
        "torque_limit_joint": sat_joint, "first_torque_limit_s": sat_t, "max_tau_ratio": round(max_ratio, 4),
        "retargeting_failures": int(L.retargeting_failures), "controller_failures": int(ctrl_fail),
        "first_qp_failure_s": first_fail, "reached_at_s": op.reached_s, "returned": op.done_at_s is not None,
        "operator": operator, "stopped_by_limit": op.stopped_by_limit, "stop_joint": stop_joint,
        "reach_fraction": round(best / target.distance_m, 4),
        "desired_reach_fraction": round(desired_best / target.distance_m, 4),
        "desired_peak_speed_mps": round(peak_speed, 4),
        "limited_joints": limited,
        "sim_s": round(float(len(L.t) * DT_S), 3), "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
    }


# ---- aggregation ---------------------------------------------------------------------------
def wilson_interval(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion ``k / n`` (95 % with the default ``z``).

    Returns:
        (low, high) in [0, 1]; (0, 1) when ``n`` is 0.

    Raises:
        ValueError: ``k`` outside [0, n] or ``n`` < 0.
    """
    if n < 0 or not 0 <= k <= n:
        raise ValueError(f"wilson_interval: need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return 0.0, 1.0
    p = k / n
    z2 = z * z
    den = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / den
    return max(0.0, centre - half), min(1.0, centre + half)


def summarize(results: Iterable[dict], speeds: Sequence[float], masses: Sequence[float],
              conditions: Sequence[str] = CONDITIONS, n_targets: int | None = None) -> dict:
    """Per condition: trials, successes, rate, 95 % Wilson interval, no-fall count and rate, failure
    causes, and ``cells``: successes per speed (rows) x mass (columns), with ``cell_trials`` the trials
    per cell. Only results inside the given grid (and of targets < ``n_targets`` when given) count."""
    res = [r for r in results if r["condition"] in conditions and r["speed_mps"] in speeds and r["mass_kg"] in masses
           and (n_targets is None or r["target"] < n_targets)]
    out = {}
    for c in conditions:
        rc = [r for r in res if r["condition"] == c]
        n, k = len(rc), sum(bool(r["success"]) for r in rc)
        nf = sum(bool(r["no_fall"]) for r in rc)
        causes: dict[str, int] = {}
        joints: dict[str, int] = {}
        for r in rc:
            if r["cause"]:
                causes[r["cause"]] = causes.get(r["cause"], 0) + 1
            if r["cause"] == "torque_limit":
                joints[r["torque_limit_joint"]] = joints.get(r["torque_limit_joint"], 0) + 1
        cells = [[sum(r["success"] for r in rc if r["speed_mps"] == s and r["mass_kg"] == m_) for m_ in masses]
                 for s in speeds]
        cell_n = [[sum(1 for r in rc if r["speed_mps"] == s and r["mass_kg"] == m_) for m_ in masses] for s in speeds]
        lo, hi = wilson_interval(k, n)
        nlo, nhi = wilson_interval(nf, n)
        out[c] = {"trials": n, "successes": k, "rate": (k / n) if n else None, "ci95": [round(lo, 4), round(hi, 4)],
                  "no_fall": nf, "no_fall_rate": (nf / n) if n else None, "no_fall_ci95": [round(nlo, 4), round(nhi, 4)],
                  "causes": causes, "torque_limit_joints": joints, "cells": cells, "cell_trials": cell_n,
                  "paper_rate": PAPER_RATES.get(c)}
    return out


# ---- the grid runner -----------------------------------------------------------------------
def trial_specs(speeds, masses, n_targets: int, conditions) -> list[TrialSpec]:
    """Every trial of the grid: target by target, the fastest (shortest) speeds first, so an
    interrupted run has covered the most cells."""
    specs = [TrialSpec(c, float(s), float(m), t) for s in speeds for m in masses for t in range(n_targets)
             for c in conditions]
    return sorted(specs, key=lambda sp: (sp.target, -sp.speed_mps, sp.mass_kg, CONDITIONS.index(sp.condition)))


def _write_json(path: Path, doc: dict) -> None:
    write_text_atomic(path, json.dumps(doc, indent=1))


_WORKER_ROBOT = None


def _worker(args):
    global _WORKER_ROBOT
    spec, target, load_at, operator, ccfg = args
    if _WORKER_ROBOT is None:
        from contactflow.robot import load_robot

        _WORKER_ROBOT = load_robot("talos")
    return run_trial(spec, target, _WORKER_ROBOT, ccfg=ccfg, load_at=load_at, operator=operator)


def _trial_operator(r: dict) -> str:
    """The operator a stored trial ran with: ``"target"`` if it names none (a file written before operators
    existed); ``"as_allowed (old rule)"`` for an ``as_allowed`` trial without ``stop_joint``, written while
    the operator stopped on any limit below the URDF effort, a joint lowered by the load's ramp included
    (before :class:`ReachLimitWatch`): such a trial is run again."""
    op = r.get("operator", "target")
    return "as_allowed (old rule)" if op == "as_allowed" and "stop_joint" not in r else op


def run_grid(out: str | Path, *, speeds=SPEEDS_MPS, masses=MASSES_KG, n_targets: int = 10,
             conditions=CONDITIONS, seed: int = 0, jobs: int = 1, progress: bool = True,
             log: Callable[[str], None] = print, targets: Sequence[GridTarget] | None = None, robot=None,
             load_at: str = "hand", operator: str = "target", ccfg=None) -> dict:
    """Run (or resume) the grid and write ``out`` (JSON: ``meta``, ``targets``, ``trials``, ``summary``).

    A trial already in ``out`` (same condition, speed, mass, target) is not run again; ``out`` is
    rewritten after every finished trial, so an interrupted run resumes where it stopped. The targets
    are sampled once (:func:`sample_targets`) and kept in ``out``; a rerun asking for more targets
    samples again and keeps the trials of the stored targets when it drew them again (same seed); with
    another seed the stored trials are dropped (they were for other targets).

    Args:
        out: the JSON file. speeds [m/s], masses [kg], n_targets, conditions: the grid. seed: target seed.
        jobs: parallel processes (1: in this process). progress: a tqdm bar (stderr). log: one-line messages.
        targets: use these targets (at least ``n_targets``) instead of sampling them (tests); recorded
            with seed None.
        robot: the Talos :class:`contactflow.robot.Robot` (default: loaded here).
        load_at: where the unmodelled mass sits (:func:`effector_load`); trials stored for another
            place are dropped.
        operator: one of :data:`OPERATORS`; stored full-method trials of another operator run again
            (the other conditions do not depend on it).

    Returns:
        The written document.

    Raises:
        ConfigError: an unknown condition or operator, ``jobs`` < 1, a non-positive speed or a negative mass.
    """
    from contactflow.robot import load_robot

    for c in conditions:
        if c not in CONDITIONS:
            raise ConfigError(f"--conditions: unknown condition {c!r}; expected some of {list(CONDITIONS)}")
    if jobs < 1:
        raise ConfigError(f"--jobs must be >= 1, got {jobs}")
    if load_at not in LOAD_AT:
        raise ConfigError(f"--load-at must be one of {LOAD_AT}, got {load_at!r}")
    if operator not in OPERATORS:
        raise ConfigError(f"--operator must be one of {OPERATORS}, got {operator!r}")
    if any(not s > 0 for s in speeds) or any(m < 0 for m in masses):
        raise ConfigError(f"--speeds must be > 0 and --masses >= 0, got {list(speeds)} and {list(masses)}")
    out = Path(out)
    try:
        doc = json.loads(out.read_text()) if out.exists() else {}
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{out}: not a readable grid results file (JSON: meta, targets, trials, summary): {exc}; "
                          "remove it or choose another --out") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{out}: not a grid results file (expected a JSON object with meta, targets, trials)")
    stored = doc.get("targets") or []
    robot = robot if robot is not None else load_robot("talos")
    if targets is not None:
        if len(targets) < n_targets:
            raise ConfigError(f"run_grid: {len(targets)} targets given for n_targets = {n_targets}")
        seed = None
        targets = list(targets)
        same = json.loads(json.dumps([dataclasses.asdict(t) for t in targets])) == stored
        trials = list(doc.get("trials") or []) if same else []
    elif doc.get("meta", {}).get("seed") == seed and len(stored) >= n_targets:
        targets = [GridTarget(t["index"], t["azimuth_deg"], t["elevation_deg"], tuple(t["direction"]), t["distance_m"])
                   for t in stored]
        trials = list(doc.get("trials") or [])
    else:
        t0 = time.perf_counter()
        targets = sample_targets(robot, n_targets, seed, progress=log)
        log(f"sampled {n_targets} targets in {time.perf_counter() - t0:.1f} s")
        new = json.loads(json.dumps([dataclasses.asdict(t) for t in targets]))
        # more targets of the same seed: the sampler draws in sequence, so the stored ones come first again
        keep = len(stored) if doc.get("meta", {}).get("seed") == seed and new[:len(stored)] == stored else 0
        trials = [r for r in doc.get("trials") or [] if r["target"] < keep]
        if doc and not keep:
            log(f"{out}: stored targets are for seed {doc.get('meta', {}).get('seed')} / {len(stored)} targets: "
                f"the stored trials are dropped")
    from contactflow.seiko.controller import ControllerConfig

    ccfg = ccfg if ccfg is not None else ControllerConfig()
    config = _config_dict(ccfg)
    old = doc.get("meta", {}).get("controller_config") or {}
    stale = [r for r in trials if condition_config(r["condition"], old) != condition_config(r["condition"], config)]
    if stale:
        log(f"{out}: {len(stale)} stored trials ran with another ControllerConfig in the fields that matter to their "
            f"condition: they run again")
        trials = [r for r in trials if r not in stale]
    other_op = [r for r in trials if r["condition"] == "full" and _trial_operator(r) != operator]
    if other_op:  # off and no_tau_limit are the same trial with either operator (module doc): kept
        log(f"{out}: {len(other_op)} stored full-method trials had another operator (or an older as_allowed "
            "rule): they run again")
        trials = [r for r in trials if r not in other_op]
    if trials and doc.get("meta", {}).get("load_at", "hand") != load_at:
        log(f"{out}: the stored trials had the load at the {doc['meta'].get('load_at', 'hand')}: they are dropped")
        trials = []
    protocol = {"load_start_s": LOAD_START_S, "load_ramp_s": LOAD_RAMP_S, "reach_start_s": REACH_START_S,
                "hold_s": HOLD_S, "tail_s": TAIL_S}
    if trials and any(doc.get("meta", {}).get(k, v) != v for k, v in protocol.items()):
        log(f"{out}: the stored trials ran another protocol (load ramp, reach start, hold or tail times): they are "
            "dropped")
        trials = []
    done = {TrialSpec(r["condition"], r["speed_mps"], r["mass_kg"], r["target"]).key for r in trials}
    todo = [s for s in trial_specs(speeds, masses, n_targets, conditions) if s.key not in done]
    meta = {"seed": seed, "effector": EFFECTOR, "load_at": load_at, "operator": operator, "controller_config": config, "load_start_s": LOAD_START_S, "load_ramp_s": LOAD_RAMP_S,
            "reach_start_s": REACH_START_S, "hold_s": HOLD_S, "tail_s": TAIL_S,
            "azimuth_deg": AZIMUTH_DEG, "elevation_deg": ELEVATION_DEG}
    grid = {"speeds_mps": list(map(float, speeds)), "masses_kg": list(map(float, masses)), "n_targets": n_targets,
            "conditions": list(conditions)}

    def write():
        doc = {"meta": meta, "grid": grid, "targets": [dataclasses.asdict(t) for t in targets], "trials": trials,
               "summary": summarize(trials, grid["speeds_mps"], grid["masses_kg"], conditions, n_targets)}
        _write_json(out, doc)
        return doc

    log(f"{len(todo)} trials to run ({len(done)} already in {out}), {jobs} process(es)")
    doc = write()
    if not todo:
        return doc
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), unit="trial", dynamic_ncols=True)
    args = [(s, targets[s.target], load_at, operator, ccfg) for s in todo]

    def record(r):
        trials.append(r)
        write()
        if bar is not None:
            bar.set_postfix_str(f"{r['condition']} {r['speed_mps']:g} m/s {r['mass_kg']:g} kg t{r['target']}: "
                                f"{'ok' if r['success'] else r['cause']} ({r['wall_s']:.0f} s)", refresh=False)
            bar.update(1)

    if jobs == 1:
        global _WORKER_ROBOT
        _WORKER_ROBOT = robot
        for a in args:
            record(_worker(a))
    else:
        import multiprocessing as mp

        with mp.get_context("spawn").Pool(jobs) as pool:
            for r in pool.imap_unordered(_worker, args):
                record(r)
    if bar is not None:
        bar.close()
    return write()


def _config_dict(ccfg) -> dict:
    """A ControllerConfig as stored in a results file's ``meta.controller_config`` (JSON types)."""
    return json.loads(json.dumps(dataclasses.asdict(ccfg)))


# ---- the plot ------------------------------------------------------------------------------
def config_changes(doc: dict) -> str:
    """The fields of a results file's ``meta.controller_config`` that differ from today's
    :class:`~contactflow.seiko.controller.ControllerConfig` defaults, as ``"name value, ..."`` (``""``
    when none): what a plot or a table must say beside the rates."""
    from contactflow.seiko.controller import ControllerConfig

    stored = doc.get("meta", {}).get("controller_config") or {}
    default = _config_dict(ControllerConfig())
    return ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
                     for k, v in stored.items() if k in default and default[k] != v)


def plot_grid(doc: dict, path: str | Path) -> None:
    """A figure like Fig. 7: per condition a speed x mass grid of success counts, and the overall
    success rates with their 95 % Wilson intervals beside the paper's. Needs matplotlib (``[plot]``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid, summ = doc["grid"], doc["summary"]
    conds = [c for c in grid["conditions"] if summ[c]["trials"]]
    fig, axes = plt.subplots(1, len(conds) + 1, figsize=(3.4 * (len(conds) + 1), 3.6),
                             gridspec_kw={"width_ratios": [1] * len(conds) + [0.9]})
    for ax, c in zip(axes, conds):
        s = summ[c]
        cells, ns = np.array(s["cells"], float), np.array(s["cell_trials"], float)
        frac = np.where(ns > 0, cells / np.maximum(ns, 1), np.nan)
        ax.imshow(frac, vmin=0, vmax=1, cmap="RdYlGn", aspect="auto")
        for i in range(frac.shape[0]):
            for j in range(frac.shape[1]):
                ax.text(j, i, f"{int(cells[i, j])}/{int(ns[i, j])}" if ns[i, j] else "-", ha="center", va="center",
                        fontsize=8)
        ax.set_xticks(range(len(grid["masses_kg"])), [f"{m:g}" for m in grid["masses_kg"]])
        ax.set_yticks(range(len(grid["speeds_mps"])), [f"{100 * v:g}" for v in grid["speeds_mps"]])
        ax.set_xlabel("unmodelled left-hand mass [kg]")
        ax.set_ylabel("hand speed [cm/s]")
        ax.set_title(f"{CONDITION_LABELS[c]}: {s['successes']}/{s['trials']}", fontsize=9)
    ax = axes[-1]
    x = np.arange(len(conds))
    rates = [summ[c]["rate"] for c in conds]
    err = np.array([[r - summ[c]["ci95"][0], summ[c]["ci95"][1] - r] for c, r in zip(conds, rates)]).T
    ax.bar(x, rates, yerr=err, capsize=4, color="tab:blue", label="this run (95 % Wilson)")
    ax.scatter(x, [PAPER_RATES[c] for c in conds], color="k", marker="_", s=400, zorder=3, label="paper (Fig. 7)")
    ax.set_xticks(x, [CONDITION_LABELS[c] for c in conds], fontsize=7, rotation=15)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("success rate (no fall, no QP failure)")
    ax.legend(fontsize=7, loc="upper left")
    changed = config_changes(doc)
    fig.suptitle(f"SEIKO robustness grid (cf. RA-L 2024 Fig. 7): left-hand reach to the feasibility edge, "
                 f"{grid['n_targets']} target(s) per cell, load at the {doc['meta'].get('load_at', 'hand')}, "
                 f"operator {doc['meta'].get('operator', 'target')}"
                 + (f"; Controller: {changed}" if changed else ""),
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---- command line --------------------------------------------------------------------------
def _floats(text: str, what: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"{what}: expected comma-separated numbers, got {text!r}") from None


def main(argv: list[str] | None = None) -> int:
    """``contactflow bench seiko-grid``: run or resume the grid, print the summary, write the JSON and the plot."""
    import argparse

    from contactflow.paths import OnceArgumentParser

    p = OnceArgumentParser(prog="contactflow bench seiko-grid",
                           description="SEIKO Fig. 7 robustness grid (RA-L 2024 §V-F): left-hand reach to the "
                                       "feasibility edge x speed x unmodelled mass x condition; resumable",
                           formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--speeds", default=",".join(f"{100 * s:g}" for s in SPEEDS_MPS), help="hand speeds [cm/s]")
    p.add_argument("--masses", default=",".join(f"{m:g}" for m in MASSES_KG), help="unmodelled masses [kg]")
    p.add_argument("--targets", type=int, default=10, help="random targets per cell")
    p.add_argument("--conditions", default=",".join(CONDITIONS), help=f"some of {','.join(CONDITIONS)}")
    p.add_argument("--seed", type=int, default=0, help="target sampling seed")
    p.add_argument("--jobs", type=int, default=1, help="parallel processes")
    p.add_argument("--operator", choices=OPERATORS, default="target",
                   help="target: reach to the target whatever the Controller does; as_allowed: also stop reaching once "
                        "the Controller's (12) engages a joint during the reach (full-method trials of the other "
                        "operator in --out run again)")
    p.add_argument("--out", default="seiko_grid.json", help="results JSON (resumable)")
    p.add_argument("--plot", default=None, help="PNG like Fig. 7 (needs matplotlib)")
    p.add_argument("--load-at", choices=LOAD_AT, default="hand",
                   help="where the unmodelled mass sits: the hand frame (a grasped object, 0.24 m beyond the wrist) "
                        "or the wrist centre")
    p.add_argument("--config", default=None, action=OneFileAction, metavar="FILE",
                   help="YAML with a 'seiko_controller' section (the Controller node's --config file): the "
                        "Controller conditions run with it instead of the defaults; stored trials of another "
                        "configuration run again")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    a = p.parse_args(argv)
    try:
        from contactflow.nodes._runtime import load_node_config
        from contactflow.seiko.controller import ControllerConfig

        ccfg = load_node_config(ControllerConfig, a.config, "seiko_controller")  # the node's --config format
        speeds = [v / 100.0 for v in _floats(a.speeds, "--speeds")]
        doc = run_grid(a.out, speeds=speeds, masses=_floats(a.masses, "--masses"), n_targets=a.targets,
                       conditions=[c.strip() for c in a.conditions.split(",") if c.strip()], seed=a.seed,
                       jobs=a.jobs, progress=not a.no_progress, load_at=a.load_at, operator=a.operator, ccfg=ccfg)
    except ConfigError as exc:
        print(f"seiko-grid: error: {exc}")
        return 2
    for c, s in doc["summary"].items():
        if s["trials"]:
            print(f"{CONDITION_LABELS[c]:>18}: success {s['successes']}/{s['trials']} = {s['rate']:.2f} "
                  f"[{s['ci95'][0]:.2f}, {s['ci95'][1]:.2f}] (paper {s['paper_rate']:.2f}); no fall {s['no_fall']}; "
                  f"causes {s['causes']}")
    walls = [r["wall_s"] for r in doc["trials"]]
    if walls:
        print(f"trial wall time: mean {np.mean(walls):.1f} s, total {np.sum(walls):.0f} s over {len(walls)} trials")
    if a.plot:
        plot_grid(doc, a.plot)
        print(f"plot: {a.plot}")
    return 0
