"""Far reach with an unmodelled 9 kg load, torque-limit adaptation (12) on/off (RA-L 2024 Fig. 6).

    python benchmarks/bench_seiko_reach_load.py      # ~6 min on 2 cores; docs/reach_load.{png,json}
    python benchmarks/bench_seiko_reach_load.py --sweep-rho 0.6 0.57 0.55   # (12) alone: docs/reach_load_sweep.json

In-process closed loop (:func:`contactflow.seiko.loop.run_loop`) of ``robots/talos/scenarios/far_reach.yaml``: the right
ball hand reaches 0.40 m forward and 0.25 m up at 2 cm/s, holds 4 s and comes back. A 9 kg point
mass is welded at the ball hand (``right_hand_frame``) in MuJoCo only (the SEIKO model does not
know it); it is ~0 at reset and ramped to 9 kg over 1-1.5 s ("added during operation"). The
Controller runs with ``max_tau_ratio = 0.6`` (the paper's Fig. 6) and ``tau_read`` low-passed at
5 Hz (the code's joint-torque filter, seiko.md §6.4). Two operators:

* scripted: the scenario's reach, whatever happens;
* "as far as allowed" (:class:`StopAtRatioOperator`, the paper: "a forward-reaching motion as far
  as allowed by the controller"): stops reaching out once a measured joint torque (5 Hz) passes
  the ratio, holds, and comes back to the start.

and four Controller settings:

* with (12), the paper's rule (5 Hz ``tau_read``);
* with (12) + lowering: ``torque_lowering_nm_per_s = 10`` (an extension, off by default: a binding
  limit keeps falling while the measured ratio stays above it);
* without (12): ``torque_limit_adaptation = False``, (11i) with the URDF limits;
* without (11i), (12): ``torque_limit_constraint = False`` (the paper's Fig. 7 condition (ii)).

Metrics on the raw simulated joint torques (MuJoCo actuator forces), from t = 0.1 s (the first
ticks hold a start-up transient of the pipeline, reported separately): fall; the largest
``|tau_read| / tau_max`` over joints and time and its joint; the fraction of time any joint
exceeds the ratio and the 95th percentile of that maximum (below the ratio <=> above it less than
5 % of the time); the same for the loaded shoulder joint ``arm_right_2`` and its mean over the
hold at the far reach; the hand's largest forward and upward travel.

``--sweep-rho R...``: the paper's rule (12) alone (no lowering), the paper's settings (K_d = 0.02,
5 Hz ``tau_read``), the operator stopping when (12) fires (its ratio = R: the Controller's "stop
moving this way"), judged at the criterion ratio ``--ratio`` (0.6): for which rho of (12) does
the measured ratio stay below 0.6 (docs/seiko_multicontact.md, "Far reach")? Also reported: the
loaded joint's ratio at the stop and its excess after it. With ``--scripted`` the same rule with
the scripted reach (the operator does not stop): docs/reach_load_sweep_scripted.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import pinocchio as pin

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from contactflow.operator.live import TorqueRatioMonitor  # noqa: E402
from contactflow.robot import load_robot  # noqa: E402
from contactflow.seiko.controller import ControllerConfig  # noqa: E402
from contactflow.seiko.controller_config import PAPER_KD  # noqa: E402
from contactflow.seiko.loop import run_loop  # noqa: E402
from contactflow.sim.mujoco_model import PointMass  # noqa: E402

LOAD_KG = 9.0
LOAD_BODY = "reach_load"
LOAD_START_S, LOAD_RAMP_S = 1.0, 0.5
T_SKIP_S = 0.1  # start-up transient excluded from the metrics (reported separately)
HOLD_S = (28.6, 32.6)  # the hold at the far reach in far_reach.yaml
LOADED_JOINT = "arm_right_2_joint"
LOWERING_NM_PER_S = 10.0
#: name -> (ControllerConfig overrides, operator stops at the ratio)
CONDITIONS = {
    "with (12)": ({}, False),
    "without (12)": ({"torque_limit_adaptation": False}, False),
    "without (11i), (12)": ({"torque_limit_adaptation": False, "torque_limit_constraint": False}, False),
    "with (12) + lowering": ({"torque_lowering_nm_per_s": LOWERING_NM_PER_S}, False),
    "stop at ratio, with (12)": ({}, True),
    "stop at ratio, with (12) + lowering": ({"torque_lowering_nm_per_s": LOWERING_NM_PER_S}, True),
    "stop at ratio, without (12)": ({"torque_limit_adaptation": False}, True),
}


def hand_load(robot, mass_kg: float = LOAD_KG) -> PointMass:
    """The unmodelled load: a point mass welded at the ball hand (``right_hand_frame``;
    :func:`contactflow.seiko.grid.effector_load`)."""
    from contactflow.seiko.grid import effector_load

    return effector_load(robot, "right_hand", mass_kg, name=LOAD_BODY, at="hand")


def load_ramp(mass_kg: float = LOAD_KG, start_s: float = LOAD_START_S, ramp_s: float = LOAD_RAMP_S):
    """(sim_hook, disturb) for :func:`run_loop`: the load is ~0 at reset and ramps to ``mass_kg``
    (:func:`contactflow.seiko.grid.load_ramp`)."""
    from contactflow.seiko.grid import load_ramp as ramp

    return ramp(mass_kg, start_s, ramp_s, body=LOAD_BODY)


class StopAtRatioOperator:
    """Operator model for "as far as allowed by the controller" (the paper's Fig. 6 paragraph).

    The operator follows the scenario's right-hand commands but stops reaching out as soon as any
    joint's measured ``|tau| / tau_max``, low-passed at 5 Hz (a torque display; the filter before (12)
    is the bilinear one on the signed torque, equal to this one to ~1e-5, so the operator stops
    on the tick (12) fires), passes ``rho``; on the way back it stops once its commanded displacement is back
    to zero, so the hand returns to where it started. Use as ``run_loop(operator_hook=...)``.
    An assumption of this benchmark: the paper does not say how its operator decided to stop.
    Handles one reach out and one straight return (the displacement is the *commanded* one, and
    "back" means the return is opposite to the reach, as in ``far_reach.yaml``); a new instance
    per run.

    Args:
        robot: the :class:`~contactflow.robot.Robot` (joint names, ``tau_max`` [N m]).
        rho: ratio |tau| / tau_max at which the operator stops reaching out [-].
        effector: the commanded effector.
        cutoff_hz: first-order low-pass of |tau| [Hz] (the display's filter).
        dt: tick [s].
        joints: watch only these joints (default: all).

    Raises:
        ValueError: an unknown joint name. ContractError: bad ``rho``, ``cutoff_hz`` or ``dt``.
    """

    def __init__(self, robot, rho: float, effector: str = "right_hand", cutoff_hz: float = 5.0, dt: float = 0.002,
                 joints: list[str] | None = None):
        unknown = [j for j in joints or () if j not in robot.joint_names]
        if unknown:
            raise ValueError(f"StopAtRatioOperator: unknown joints {unknown}; known: {robot.joint_names}")
        watch = [robot.joint_names.index(j) for j in joints] if joints else None
        self.display = TorqueRatioMonitor(robot.tau_max, rho, cutoff_hz, dt, watch)
        self.effector = effector
        self.dt = dt
        self.stopped_at_s: float | None = None
        self.disp = np.zeros(3)  # commanded displacement so far [m]

    def _idle(self, cmd):
        """``cmd`` with a zero twist for the effector (the command itself is frozen)."""
        return dataclasses.replace(cmd, velocities={**cmd.velocities, self.effector: np.zeros(6)})

    def __call__(self, t, cmd, reading):
        """One tick: ``t`` [s], the scenario's :class:`OperatorCommand`, the latest simulator
        reading (its ``tau`` [N m]); returns the command to use."""
        above = self.display.update(reading.tau)
        v = cmd.velocities.get(self.effector)
        if v is None:
            return cmd
        out = v[:3]
        if not np.any(out):
            return cmd
        if np.dot(out, self.disp) >= 0.0:  # reaching out
            if self.stopped_at_s is None and above:
                self.stopped_at_s = t
            if self.stopped_at_s is not None:
                return self._idle(cmd)
        elif np.dot(self.disp + out * self.dt, self.disp) <= 0.0:  # back at the start
            return self._idle(cmd)
        self.disp = self.disp + out * self.dt
        return cmd


def metrics(robot, L, ratio_limit: float) -> dict:
    ratio = np.abs(L.tau) / robot.tau_max
    keep = L.t >= T_SKIP_S
    r = ratio[keep]
    worst = r.max(axis=1)
    j = int(np.argmax(r.max(axis=0)))
    jl = robot.joint_names.index(LOADED_JOINT)
    m, d = robot.model, robot.model.createData()
    fid = robot.contacts["right_hand"].frame_id
    hand = []
    for q in L.q[::50]:
        pin.framesForwardKinematics(m, d, q)
        hand.append(d.oMf[fid].translation.copy())
    hand = np.array(hand)
    return {
        "fell": bool(L.fell),
        "sim_time_s": float(L.t[-1]),
        "max_ratio": float(worst.max()),
        "worst_joint": robot.joint_names[j],
        "fraction_of_time_above_ratio": float(np.mean(worst > ratio_limit)),
        "p95_ratio": float(np.percentile(worst, 95)),
        "loaded_joint": LOADED_JOINT,
        "loaded_joint_max_ratio": float(r[:, jl].max()),
        "loaded_joint_fraction_above_ratio": float(np.mean(r[:, jl] > ratio_limit)),
        "loaded_joint_hold_mean_ratio": float(ratio[(L.t >= HOLD_S[0]) & (L.t <= HOLD_S[1]), jl].mean()),
        "loaded_joint_min_tau_limit_ratio": float(L.tau_limit[:, jl].min() / robot.tau_max[jl]),
        "hand_travel_forward_up_m": [float(hand[:, 0].max() - hand[0, 0]), float(hand[:, 2].max() - hand[0, 2])],
        "startup_transient_max_ratio": float(ratio[~keep].max()) if np.any(~keep) else 0.0,
    }


def run_condition(key: str, ratio: float, **overrides) -> tuple[dict, dict]:
    """One condition of :data:`CONDITIONS`: (metrics, arrays for the plot). ``overrides``: further
    :class:`ControllerConfig` fields (e.g. ``kp_per_s``)."""
    robot = load_robot("talos")
    kw, stop = CONDITIONS[key]
    cfg = ControllerConfig(max_tau_ratio=ratio, tau_read_cutoff_hz=5.0, **kw, **overrides)
    op = StopAtRatioOperator(robot, ratio) if stop else None
    hook, disturb = load_ramp()
    L = run_loop(robot, ROOT / "robots/talos/scenarios/far_reach.yaml", ccfg=cfg, disturb=disturb,
                 sim_hook=hook, extra_bodies=[hand_load(robot)], operator_hook=op)
    m = metrics(robot, L, ratio)
    m["operator"] = "stops at the ratio" if stop else "scripted"
    m["operator_stopped_at_s"] = op.stopped_at_s if op else None
    m["fell_at_s"] = float(L.t[-1]) if L.fell else None
    jl = robot.joint_names.index(LOADED_JOINT)
    keep = L.t >= T_SKIP_S
    arrays = {"t": L.t, "ratio_joint": np.abs(L.tau[:, jl]) / robot.tau_max[jl],
              "limit_joint": L.tau_limit[:, jl] / robot.tau_max[jl],
              "t_keep": L.t[keep], "ratio_max": (np.abs(L.tau) / robot.tau_max)[keep].max(axis=1)}
    return m, arrays


def run_rho(rho: float, ratio: float, mass_kg: float = LOAD_KG, stop: bool = True) -> dict:
    """The paper's rule (12) alone with ``max_tau_ratio = rho`` and the operator stopping when it
    fires (:class:`StopAtRatioOperator` at ``rho``; ``stop`` False: the scripted reach), judged at
    ``ratio``: :func:`metrics` plus the loaded joint's ratio at the stop, its largest value after it
    and the time above ``ratio`` after the stop [s]."""
    robot = load_robot("talos")
    cfg = ControllerConfig(max_tau_ratio=rho, tau_read_cutoff_hz=5.0, kd=PAPER_KD, kd_sign=-1.0)
    op = StopAtRatioOperator(robot, rho) if stop else None
    hook, disturb = load_ramp(mass_kg)
    L = run_loop(robot, ROOT / "robots/talos/scenarios/far_reach.yaml", ccfg=cfg, disturb=disturb,
                 sim_hook=hook, extra_bodies=[hand_load(robot, mass_kg)], operator_hook=op)
    m = metrics(robot, L, ratio)
    m.update(rho_12=rho, criterion_ratio=ratio, load_kg=mass_kg, operator="stops when (12) fires" if stop else "scripted",
             operator_stopped_at_s=op.stopped_at_s if stop else None, fell_at_s=float(L.t[-1]) if L.fell else None)
    if stop and op.stopped_at_s is not None:
        jl = robot.joint_names.index(LOADED_JOINT)
        r = np.abs(L.tau[:, jl]) / robot.tau_max[jl]
        after = L.t >= op.stopped_at_s
        m["loaded_joint_ratio_at_stop"] = float(r[np.argmax(after)])
        m["loaded_joint_max_ratio_after_stop"] = float(r[after].max())
        m["loaded_joint_time_above_ratio_after_stop_s"] = float(np.sum(r[after] > ratio) * (L.t[1] - L.t[0]))
    return m


def sweep_rho(rhos: list[float], ratio: float, jobs: int, out: Path, stop: bool = True) -> None:
    """``--sweep-rho``: :func:`run_rho` for each rho, in parallel; docs/reach_load_sweep.json
    (``stop`` False: the scripted reach, docs/reach_load_sweep_scripted.json)."""
    from concurrent.futures import ProcessPoolExecutor

    n = len(rhos)
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        runs = pool.map(run_rho, rhos, [ratio] * n, [LOAD_KG] * n, [stop] * n)
        res = {f"rho_12={r:g}": m for r, m in zip(rhos, runs)}
    for key, m in res.items():
        print(key, {k: m[k] for k in ("fell", "operator_stopped_at_s", "loaded_joint_fraction_above_ratio",
                                      "fraction_of_time_above_ratio", "loaded_joint_max_ratio",
                                      "loaded_joint_hold_mean_ratio", "hand_travel_forward_up_m")}, flush=True)
    (out / ("reach_load_sweep.json" if stop else "reach_load_sweep_scripted.json")).write_text(json.dumps(res, indent=2))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "docs"))
    p.add_argument("--ratio", type=float, default=0.6)
    p.add_argument("--jobs", type=int, default=2, help="conditions run in parallel (processes)")
    p.add_argument("--sweep-rho", type=float, nargs="+", metavar="RHO",
                   help="run only the (12)-alone sweep over these rho of (12) (judged at --ratio)")
    p.add_argument("--scripted", action="store_true", help="--sweep-rho with the scripted reach (no stop)")
    args = p.parse_args()
    if args.sweep_rho:
        sweep_rho(args.sweep_rho, args.ratio, args.jobs, Path(args.out), stop=not args.scripted)
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = {key: pool.submit(run_condition, key, args.ratio) for key in CONDITIONS}
        done = {key: f.result() for key, f in futures.items()}
    res = {key: m for key, (m, _) in done.items()}
    for key, m in res.items():
        print(key, m, flush=True)
    fig, axes = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    for key, (m, a) in done.items():
        ax = axes[1] if key.startswith("stop at ratio") else axes[0]
        (line,) = ax.plot(a["t"], a["ratio_joint"],
                          label=f"{key}: max {m['loaded_joint_max_ratio']:.2f}, "
                                f"{100 * m['loaded_joint_fraction_above_ratio']:.1f} % > {args.ratio}"
                                + (f", FELL at {m['fell_at_s']:.1f} s" if m["fell"] else ""))
        if "with (12)" in key:
            ax.plot(a["t"], a["limit_joint"], ls=":", color=line.get_color(), lw=0.8)
        axes[2].plot(a["t_keep"], a["ratio_max"], lw=0.8,
                     label=f"{key}: {100 * m['fraction_of_time_above_ratio']:.1f} % > {args.ratio}")
    stop_t = next((m["operator_stopped_at_s"] for m in res.values() if m["operator_stopped_at_s"]), None)
    if stop_t is not None:
        axes[1].axvline(stop_t, color="k", lw=0.8, ls=":", label=f"operator stops reaching ({stop_t:.1f} s)")
    for ax in axes:
        ax.axhline(args.ratio, color="k", ls="--", lw=0.8)
        ax.legend(fontsize=6.5)
        ax.set_ylim(0.0, 1.05)
    name = LOADED_JOINT.replace("_joint", "")
    axes[0].set_ylabel(f"{name}, scripted reach")
    axes[1].set_ylabel(f"{name}, stop at ratio")
    axes[2].set_ylabel("max over joints")
    axes[2].set_xlabel("time [s]")
    axes[0].set_title("Far reach (0.40 m fwd, 0.25 m up) + unmodelled 9 kg at the right hand (cf. RA-L 2024 Fig. 6)\n"
                      "|tau_read| / tau_max; dotted: adapted limit of (11i)", fontsize=9)
    fig.tight_layout()
    out = Path(args.out)
    stem = "reach_load" if args.ratio == 0.6 else f"reach_load_ratio{args.ratio:g}"
    fig.savefig(out / f"{stem}.png", dpi=110)
    (out / f"{stem}.json").write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
