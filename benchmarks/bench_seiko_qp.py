"""SEIKO QPs, solver against solver: per-QP time and agreement of daqp and quadprog.

Usage::

    python benchmarks/bench_seiko_qp.py                 # the fixture QPs (tests/fixtures/seiko_qps_*.npz)
    python benchmarks/bench_seiko_qp.py --run 6         # every QP of a 6 s closed-loop run, solved both ways
    python benchmarks/bench_seiko_qp.py --write-fixture # regenerate the fixtures (three scenarios, ~10 min)
    python benchmarks/bench_seiko_qp.py --step 4        # Retargeting step: this code vs d633261, same run

For each QP, in the same process and interleaved (so the machine's drift hits both alike):

* ``quadprog``: the QP in quadprog's stacked form (equalities, then ``C x >= b``: every two-sided
  row and every variable bound written as two rows), solved by :func:`contactflow.qp.solve_qp`
  with its full checks, as the stages called it before the compact form (the Retargeting's rows
  there were 210; in the stacked form rebuilt here from the compact one the position and velocity
  bounds of a joint are already merged, 174 rows: quadprog's time is if anything flattered);
* ``daqp``: the compact form (two-sided rows, variable bounds) through
  :func:`contactflow.qp.solve_qp_box` (status and lean residual checks);
* ``daqp_raw``: ``daqp.solve`` alone on the same arrays (the wrapper's cost is the difference).

Times are thread CPU time (``time.thread_time_ns``: a loaded 2-core machine preempts the process;
CPU time is what the QP costs), median and p99 per QP, and the largest ``|x_daqp - x_quadprog|``.

With ``--step SECONDS``: the whole Retargeting step (QP (9) assembly, solve, integration, output)
of this code against the baseline commit's (``--baseline``, default d633261: quadprog and the
assembly before the compact form), imported in the same process (``load_baseline`` of
``benchmarks/bench_seiko.py``) and fed the same targets (the default scenario's operator commands
through the input filter), (a) in alternating blocks of 100 steps (each implementation with warm
caches) and (b) alternating tick by tick (each step after the other implementation's: cold caches,
as in a loop that runs other stages between two steps). Thread CPU time per step, median and p99,
and the largest ``|q_new - q_baseline|`` over the run.

The fixture files hold, for QP ``k``, the arrays ``H_k, g_k, A_k, lo_k, hi_k`` and, when the
QP has variable bounds, ``lb_k, ub_k`` (the arguments of :func:`contactflow.qp.solve_qp_box`),
plus ``t_k`` (the simulation time of the tick [s]), ``scenario_k`` (its scenario's name) and
``x_ref_k``: the solution of the same tick's QP as the baseline commit (``--baseline``, d633261)
assembled it (stacked rows, quadprog), its stage run beside the new one on the same inputs. They
are written only by ``--write-fixture``: the scenarios of ``FIXTURE_SCENARIOS`` (the default
reach, the far reach, the multi-contact wall push with its contact switch and pushing mode)
through the in-process loop (:func:`contactflow.seiko.loop.run_loop`), every QP of each stage
captured; per stage and scenario ``--per-stage`` of them kept, half at evenly spaced ticks and
half those with the most active inequalities.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from contactflow.qp import _box_to_stacked, solve_qp, solve_qp_box  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
STAGES = ("retargeting", "controller")
KEYS = ("H", "g", "A", "lo", "hi", "lb", "ub")


def fixture_path(stage: str) -> Path:
    return FIXTURES / f"seiko_qps_{stage}.npz"


def load_fixture(path: Path) -> list[dict]:
    """The QPs of a fixture file: a list of dicts with the :func:`solve_qp_box` arguments."""
    with np.load(path) as z:
        n = int(z["n_qps"])
        return [{key: (z[f"{key}_{k}"] if f"{key}_{k}" in z else None) for key in (*KEYS, "t", "x_ref", "scenario")}
                for k in range(n)]


def save_fixture(path: Path, qps: list[dict]) -> None:
    arrays = {"n_qps": np.array(len(qps))}
    for k, qp in enumerate(qps):
        for key in (*KEYS, "t", "x_ref"):
            if qp.get(key) is not None:
                arrays[f"{key}_{k}"] = np.asarray(qp[key], dtype=float)
        if qp.get("scenario") is not None:
            arrays[f"scenario_{k}"] = np.array(str(qp["scenario"]))
    np.savez_compressed(path, **arrays)


FIXTURE_SCENARIOS = (("hand_forward", 6.0, False), ("far_reach", 6.0, False), ("wall_push", 7.0, True))
"""(scenario, seconds, environment) of the fixture runs: the default scenario; the far reach
(the arm's torque and joint rows); the multi-contact wall push (seiko_talos_multicontact.yml's
scene: the left hand's point contact enabled at 5 s, the minimum-force ratchet, pushing mode from
6 s)."""


def capture_run(seconds: float, scenario: str = "hand_forward", *, environment: bool = False,
                baseline: str | None = None) -> dict[str, list[dict]]:
    """Every QP of both stages over ``seconds`` of the closed loop on ``scenario``.

    With ``baseline`` (a commit, e.g. d633261): the baseline's stages run beside the new ones
    (``PairedStage`` of ``benchmarks/bench_seiko.py``: each tick both stages get the same inputs,
    the new one's output drives the loop) and each captured QP gets ``x_ref``, the solution of
    the baseline's own QP of that tick (its stacked assembly, quadprog), when both stages solved
    the same number of QPs in the tick (NaN-free ``x_ref``; otherwise absent)."""
    import contactflow.qp as qp_module
    import contactflow.seiko.flexible_equilibrium as runinit_module
    from contactflow.environment import load_environment
    from contactflow.operator.scenario import scenario_path
    from contactflow.robot import load_robot
    from contactflow.seiko.loop import SeikoPipeline, run_loop

    robot = load_robot("talos")
    env = load_environment(robot.raw.get("environment"), f"{robot.name}:environment") if environment else None
    qps: dict[str, list[dict]] = {s: [] for s in STAGES}
    refs: dict[str, list] = {s: [] for s in STAGES}
    clock = {"t": 0.0}

    def keep(stage, H, g, A, lo, hi, lb, ub):
        qps[stage].append({"H": np.array(H), "g": np.array(g), "A": np.array(A), "lo": np.array(lo),
                           "hi": np.array(hi), "lb": None if lb is None else np.array(lb),
                           "ub": None if ub is None else np.array(ub), "t": clock["t"], "scenario": scenario})

    restore = []
    if baseline is None:
        pipeline = SeikoPipeline(robot, environment=env)
        ret = pipeline.retargeting.retargeting
    else:
        import importlib
        import tempfile

        from bench_seiko import LAG, PairedStage, baseline_pipeline, load_baseline

        tmp = tempfile.TemporaryDirectory()
        base = load_baseline(baseline, Path(tmp.name))
        pipeline = SeikoPipeline(robot, environment=env, lag=LAG)
        old = baseline_pipeline(base, robot, environment=env)
        ret = pipeline.retargeting.retargeting
        for stage, names in (("retargeting", ("solve_qp",)), ("controller", ("solve_qp", "solve_qp_stacked"))):
            mod = importlib.import_module(f"{base.__name__}.seiko.{stage}")
            for name in names:
                fn = getattr(mod, name)

                def wrapped(*a, _fn=fn, _stage=stage, **kw):
                    sol = _fn(*a, **kw)
                    refs[_stage].append(np.array(sol.x) if sol.found else None)
                    return sol

                setattr(mod, name, wrapped)
                restore.append((mod, name, fn))

        class Capturing(PairedStage):
            """Pairs the QPs of one tick: the new stage's with the baseline's, in order."""

            def __init__(self, stage, new, old_stage):
                super().__init__(new, old_stage, ())
                self.stage = stage

            def tick(self, *args, **kw):
                n0, r0 = len(qps[self.stage]), len(refs[self.stage])
                out = super().tick(*args, **kw)
                new_qps, xs = qps[self.stage][n0:], refs[self.stage][r0:]
                if len(new_qps) == len(xs):
                    for qp, x in zip(new_qps, xs):
                        if x is not None and x.shape == qp["g"].shape:
                            qp["x_ref"] = x
                return out

        pipeline.retargeting = Capturing("retargeting", pipeline.retargeting, old.retargeting)
        pipeline.controller = Capturing("controller", pipeline.controller, old.controller)

    ret.qp_hook = lambda H, g, A, lo, hi, lb, ub, sol: keep("retargeting", H, g, A, lo, hi, lb, ub)
    # The Controller's QPs (11): its qp_hook; its runInit QPs (after a reset or a contact
    # switch): the solve_qp_box of their module (contactflow.seiko.flexible_equilibrium), wrapped
    # (arguments bound by name). Both in call order.
    pipeline.controller.ctrl.qp_hook = lambda H, g, A, lo, hi, lb, ub, sol: keep("controller", H, g, A, lo, hi, lb, ub)
    signature = inspect.signature(qp_module.solve_qp_box)
    original = runinit_module.solve_qp_box

    def controller_solve(*args, **kwargs):
        b = signature.bind(*args, **kwargs)
        b.apply_defaults()
        a = b.arguments
        keep("controller", a["H"], a["g"], a["A"], a["lo"], a["hi"], a["lb"], a["ub"])
        return original(*args, **kwargs)

    def operator_hook(t, cmd, reading):
        clock["t"] = t
        return cmd

    runinit_module.solve_qp_box = controller_solve
    try:
        log = run_loop(robot, scenario_path(robot, scenario), pipeline=pipeline, duration_s=seconds,
                       operator_hook=operator_hook, environment=environment)
    finally:
        runinit_module.solve_qp_box = original
        for mod, name, fn in restore:
            setattr(mod, name, fn)
    if log.fell:
        raise RuntimeError(f"the robot fell during the capture run ({scenario})")
    return qps


def select_qps(all_qps: list[dict], count: int) -> list[dict]:
    """``count`` QPs of a run: half evenly spaced over it (the init ramp included), half those
    with the most active inequalities (rows and bounds at a bound that are not equalities, from
    a daqp solve), among the QPs with a reference solution when there are any."""
    pool = [qp for qp in all_qps if "x_ref" in qp] or all_qps
    even = set(np.unique(np.linspace(0, len(pool) - 1, count - count // 2).round().astype(int)).tolist())

    def n_active_ineq(qp):
        sol = solve_qp_box(*(qp[k] for k in KEYS), reg=0.0)
        bl = qp["lo"] if qp["lb"] is None else np.concatenate((qp["lb"], qp["lo"]))
        bu = qp["hi"] if qp["ub"] is None else np.concatenate((qp["ub"], qp["hi"]))
        return sol.n_active - int(np.count_nonzero(bl == bu))

    rest = [i for i in range(len(pool)) if i not in even]
    # every 5th candidate only: enough to find the busy stretches, cheap on a loaded machine
    busy = sorted(rest[::5], key=lambda i: -n_active_ineq(pool[i]))[: count - len(even)]
    return [pool[i] for i in sorted(even | set(busy))]


def stacked(qp: dict):
    """quadprog's stacked form of a box-form QP: (A_eq, b_eq, A_in, b_in) for :func:`solve_qp`."""
    A, lo, hi, lb, ub = qp["A"], qp["lo"], qp["hi"], qp["lb"], qp["ub"]
    n = A.shape[1]
    if lb is None and ub is None:
        bl, bu = lo, hi
    else:
        bl = np.concatenate((np.full(n, -np.inf) if lb is None else lb, lo))
        bu = np.concatenate((np.full(n, np.inf) if ub is None else ub, hi))
    C, b, n_eq = _box_to_stacked(A, bl, bu, bl == bu)
    return C[:n_eq], b[:n_eq], C[n_eq:], b[n_eq:]


def compare(qps: list[dict], repeats: int = 3) -> dict:
    """Solve every QP with quadprog (stacked, :func:`solve_qp`), daqp (:func:`solve_qp_box`) and
    raw daqp, interleaved; per-QP CPU times and the solution differences."""
    import daqp

    t = {"quadprog": [], "daqp": [], "daqp_raw": []}
    dx, dcost, bad = 0.0, 0.0, []
    for i, qp in enumerate(qps):
        H, g, A, lo, hi, lb, ub = (qp[k] for k in KEYS)
        A_eq, b_eq, A_in, b_in = stacked(qp)
        n = len(g)
        bl = lo if lb is None else np.concatenate((lb, lo))
        bu = hi if ub is None else np.concatenate((ub, hi))
        sense = np.zeros(len(bl), dtype=np.intc)
        sense[bl == bu] = 5
        run = {
            "quadprog": lambda: solve_qp(H, g, A_eq, b_eq, A_in, b_in, reg=0.0),
            "daqp": lambda: solve_qp_box(H, g, A, lo, hi, lb, ub, reg=0.0),
            "daqp_raw": lambda: daqp.solve(H, g, A, bu, bl, sense),
        }
        out = {}
        for rep in range(repeats):
            # rotate the order: the solver that runs first after another pays the cold caches
            names = list(run)
            names = names[rep % 3:] + names[: rep % 3]
            for name in names:
                a = time.thread_time_ns()
                out[name] = run[name]()
                t[name].append(time.thread_time_ns() - a)
        ref, sol = out["quadprog"], out["daqp"]
        if not (ref.found and sol.found):
            bad.append((i, ref.status, sol.status))
            continue
        dx = max(dx, float(np.max(np.abs(sol.x - ref.x))) if n else 0.0)
        dcost = max(dcost, abs(sol.cost - ref.cost) / (1.0 + abs(ref.cost)))
    stats = {k: {"median_us": float(np.median(v)) / 1e3, "p99_us": float(np.percentile(v, 99)) / 1e3}
             for k, v in t.items()}
    stats["speedup_median"] = stats["quadprog"]["median_us"] / stats["daqp"]["median_us"]
    return {"n_qps": len(qps), "times": stats, "max_abs_dx": dx, "max_rel_dcost": dcost, "failures": bad,
            "size": {"n_var": int(len(qps[0]["g"])), "n_rows": int(qps[0]["A"].shape[0]),
                     "n_stacked_rows": int(sum(len(b) for b in stacked(qps[0])[1::2]))} if qps else {}}


def step_targets(robot, seconds: float, scenario: str = "hand_forward") -> list[dict]:
    """The Retargeting's effector targets over ``seconds`` of the default scenario: operator
    twists through the input filter (SEIKO eq. (8)), centred on the Retargeting's own output."""
    import pinocchio as pin

    from contactflow.operator.input_filter import InputFilter, InputFilterConfig
    from contactflow.operator.scenario import ScenarioPlayer, load_scenario, scenario_path
    from contactflow.seiko.retargeting import RetargetingConfig, SeikoRetargeting

    dt = RetargetingConfig().dt_s
    player = ScenarioPlayer(load_scenario(scenario_path(robot, scenario), robot))
    ret = SeikoRetargeting(RetargetingConfig(), robot)
    out = ret.reset()
    free = [e for e in robot.contacts if not out.enabled[e]]
    filt = InputFilter(InputFilterConfig(), free)
    filt.reset({e: out.poses[e] for e in free})
    zero, seq = np.zeros(6), []
    for k in range(int(round(seconds / dt))):
        cmd = player.step(k * dt, dt_s=dt)
        targets = filt.step({e: np.asarray(cmd.velocities.get(e, zero)) for e in free}, {e: out.poses[e] for e in free})
        seq.append({e: pin.SE3(T) for e, T in targets.items()})
        out = ret.step(seq[-1])
    return seq


def step_compare(seconds: float, baseline: str) -> dict:
    """Per-step CPU time of the Retargeting, this code vs the baseline commit's, same targets."""
    import importlib
    import tempfile

    from bench_seiko import load_baseline  # noqa: the one baseline loader of the SEIKO benchmarks

    from contactflow.robot import load_robot
    from contactflow.seiko.retargeting import RetargetingConfig, SeikoRetargeting

    robot = load_robot("talos")
    seq = step_targets(robot, seconds)
    with tempfile.TemporaryDirectory() as tmp:
        base = load_baseline(baseline, Path(tmp))
        old_mod = importlib.import_module(f"{base.__name__}.seiko.retargeting")
        res = {}
        for mode in ("blocks", "interleaved"):
            new, old = SeikoRetargeting(RetargetingConfig(), robot), old_mod.SeikoRetargeting(old_mod.RetargetingConfig(), robot)
            new.reset()
            old.reset()
            t = {"new": [], "baseline": []}
            dq = 0.0
            impl = {"new": new, "baseline": old}
            block = 100 if mode == "blocks" else 1
            for b0 in range(0, len(seq), block):
                order = ("new", "baseline") if (b0 // block) % 2 == 0 else ("baseline", "new")
                outs = {}
                for name in order:
                    for T in seq[b0 : b0 + block]:
                        a = time.thread_time_ns()
                        outs[name] = impl[name].step(T)
                        t[name].append(time.thread_time_ns() - a)
                        if not outs[name].ok:
                            raise RuntimeError(f"{name} Retargeting failed: {outs[name].diagnostics}")
                dq = max(dq, float(np.max(np.abs(outs["new"].q - outs["baseline"].q))))
            st = {k: {"median_us": float(np.median(v)) / 1e3, "p99_us": float(np.percentile(v, 99)) / 1e3}
                  for k, v in t.items()}
            res[mode] = {**st, "speedup_median": st["baseline"]["median_us"] / st["new"]["median_us"],
                         "max_abs_dq": dq}
    res["steps"] = len(seq)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=float, default=None, metavar="SECONDS",
                    help="capture every QP of a closed-loop run of this length instead of reading the fixtures")
    ap.add_argument("--write-fixture", action="store_true", help="regenerate tests/fixtures/seiko_qps_*.npz")
    ap.add_argument("--per-stage", type=int, default=12, help="QPs kept per stage and scenario in the fixture")
    ap.add_argument("--repeats", type=int, default=3, help="solves of each QP per solver")
    ap.add_argument("--step", type=float, default=None, metavar="SECONDS",
                    help="time the whole Retargeting step against --baseline over this much of the scenario")
    ap.add_argument("--baseline", default="d633261",
                    help="baseline commit of --step and of the fixtures' x_ref (default d633261)")
    ap.add_argument("--out", default=None, help="write the results as JSON")
    args = ap.parse_args()

    if args.step is not None:
        res = step_compare(args.step, args.baseline)
        print(f"Retargeting step, {res['steps']} steps of the default scenario, thread CPU time, "
              f"this code vs {args.baseline} in the same process")
        for mode in ("blocks", "interleaved"):
            r = res[mode]
            print(f"  {mode:11s} new median {r['new']['median_us']:6.1f} us p99 {r['new']['p99_us']:6.1f} us | "
                  f"baseline median {r['baseline']['median_us']:6.1f} us p99 {r['baseline']['p99_us']:6.1f} us | "
                  f"x{r['speedup_median']:.2f}; max |q_new - q_baseline| {r['max_abs_dq']:.1e}")
        if args.out:
            Path(args.out).write_text(json.dumps(res, indent=2))
        return

    if args.write_fixture:
        chosen: dict[str, list[dict]] = {st: [] for st in STAGES}
        for scenario, seconds, environment in FIXTURE_SCENARIOS:
            qps = capture_run(seconds, scenario, environment=environment, baseline=args.baseline)
            for stage, all_qps in qps.items():
                chosen[stage] += select_qps(all_qps, args.per_stage)
                n_ref = sum("x_ref" in qp for qp in all_qps)
                print(f"{scenario} {stage}: {len(all_qps)} QPs, {n_ref} with the baseline's x_ref", flush=True)
        for stage, sel in chosen.items():
            save_fixture(fixture_path(stage), sel)
            print(f"{fixture_path(stage).relative_to(ROOT)}: {len(sel)} QPs, "
                  f"{sum('x_ref' in qp for qp in sel)} with x_ref, {fixture_path(stage).stat().st_size / 1024:.0f} KiB")
        return
    if args.run is not None:
        sets = capture_run(args.run)
        source = f"every QP of a {args.run:g} s closed-loop run (default scenario)"
    else:
        sets = {s: load_fixture(fixture_path(s)) for s in STAGES if fixture_path(s).exists()}
        source = "the fixture QPs (tests/fixtures/seiko_qps_*.npz)"
    res = {"source": source, "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime())}
    print(f"{source}; per-QP thread CPU time, {args.repeats} solves each, interleaved")
    for stage, qps in sets.items():
        r = res[stage] = compare(qps, args.repeats)
        tm = r["times"]
        print(f"  {stage:12s} {r['n_qps']:5d} QPs, {r['size']}")
        for k in ("quadprog", "daqp", "daqp_raw"):
            print(f"    {k:9s} median {tm[k]['median_us']:7.1f} us  p99 {tm[k]['p99_us']:7.1f} us")
        print(f"    daqp (compact, checked) x{tm['speedup_median']:.2f} faster than quadprog (stacked, checked); "
              f"max |x_daqp - x_quadprog| = {r['max_abs_dx']:.2e}, max rel. cost difference {r['max_rel_dcost']:.1e}, "
              f"failures {r['failures']}")
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
