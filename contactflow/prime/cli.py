"""``contactflow prime ...``: generate PRIME data, run the PRIME estimator on a recording, apply its result.

    contactflow prime generate --robot go2 --motion squat --duration 3 --payload-kg 3 --seed 0 \
        --out recordings/prime_go2_squat
    contactflow prime estimate recordings/prime_go2_squat --robot go2 [--config est.yaml] \
        [--no-identify] [--max-samples 300] [--kappa-schedule 50,200] [--resample] --out recordings/prime_go2_squat_est

    contactflow prime apply recordings/prime_go2_squat_est --out robots/go2_corrected [--force]

``estimate`` writes the estimator's recording (``prime_estimator.*`` streams) and ``report.json``
into ``--out``, prints the identified parameters and, when the input recording holds
``ground_truth.contact_forces``, the force RMSE against it. ``apply`` writes the identified inertial
parameters as a robot variant (:mod:`contactflow.prime.apply`).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import numpy as np

from contactflow.paths import OneFileAction

log = logging.getLogger("contactflow.prime")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("prime", help="PRIME motion, contact-force and inertial-parameter estimation")
    sub = p.add_subparsers(dest="prime_command", required=True)

    g = sub.add_parser("generate", help="simulate a scripted motion in MuJoCo and write a recording")
    g.add_argument("--robot", default="go2")
    g.add_argument("--motion", default="squat", help="squat | trot | stand | weight_shift")
    g.add_argument("--duration", type=float, default=3.0, help="logged duration [s]")
    g.add_argument("--rate-hz", type=float, default=100.0)
    g.add_argument("--payload-kg", type=float, default=3.0)
    g.add_argument("--payload-offset", default="0,0,0.05", help="payload centre in the trunk frame [m], x,y,z")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--noise-scale", type=float, default=1.0, help="0 = noise-free")
    g.add_argument("--amplitude", type=float, default=1.0, help="scale of the scripted joint motions")
    g.add_argument("--simulator", choices=["mujoco", "smoothed"], default="mujoco",
                   help="mujoco, or PRIME's own smoothed model (self-consistent data)")
    g.add_argument("--out", required=True, help="run directory to create")
    g.set_defaults(func=_generate)

    e = sub.add_parser("estimate", help="run PRIME on a recording")
    e.add_argument("recording", help="run directory")
    e.add_argument("--robot", default=None, help="robot (default: the recording's)")
    e.add_argument("--config", default=None, action=OneFileAction, help="YAML with PrimeConfig keys")
    e.add_argument("--stream", default=None, help="measurement stream (default: auto-detected)")
    e.add_argument("--no-identify", action="store_true", help="keep the nominal inertial parameters")
    e.add_argument("--max-samples", type=int, default=None, help="estimator steps (horizon) limit")
    e.add_argument("--max-iter", type=int, default=None)
    e.add_argument("--kappa-schedule", default=None, help="comma-separated kappas solved before the final one")
    e.add_argument("--dt", type=float, default=None, help="estimator time step [s]")
    e.add_argument("--bodies", default=None, help="comma-separated joints whose bodies are identified")
    e.add_argument("--start-s", type=float, default=None,
                   help="skip this many seconds of the stream first (e.g. a start-up ramp)")
    e.add_argument("--resample", action="store_true",
                   help="interpolate an irregularly sampled stream (a hardware recording) onto the dt grid")
    e.add_argument("--out", default=None, help="output run directory (default: <recording>_prime)")
    e.set_defaults(func=_estimate)

    a = sub.add_parser("apply", help="write the identified inertial parameters of a PRIME run as a robot variant")
    a.add_argument("run", help="a contactflow prime estimate output directory")
    a.add_argument("--out", required=True, help="robot folder to create (e.g. robots/talos_corrected)")
    a.add_argument("--robot", default=None, help="base robot (default: the run's; refused if it differs)")
    a.add_argument("--name", default=None, help="the variant's robot name (default: the --out folder's name)")
    a.add_argument("--force", action="store_true", help="replace an --out folder written by an earlier apply")
    a.set_defaults(func=_apply)


def _generate(args) -> int:
    from contactflow.config import load_config
    from contactflow.prime.datagen import GenerateConfig, simulate_mujoco, simulate_smoothed, write_recording
    from contactflow.prime.model import load_prime_robot

    pr = load_prime_robot(args.robot)
    offset = [float(x) for x in args.payload_offset.split(",")]
    cfg = load_config(GenerateConfig, {
        "motion": args.motion, "duration_s": args.duration, "rate_hz": args.rate_hz, "seed": args.seed,
        "noise_scale": args.noise_scale, "amplitude_scale": args.amplitude,
        "payload": {"mass_kg": args.payload_kg, "offset_m": offset},
    }, source="contactflow prime generate")
    t0 = time.perf_counter()
    run = (simulate_mujoco if args.simulator == "mujoco" else simulate_smoothed)(pr, cfg)
    out = write_recording(pr, run, Path(args.out))
    fz = run.force_W[1:, :, 2].sum(axis=1)
    wall = time.perf_counter() - t0
    print(f"wrote {out}: {run.t.size} samples of {pr.name} {cfg.motion}, {run.t[-1] - run.t[0]:g} s simulated "
          f"({args.simulator}, generated in {wall:.1f} s wall); true trunk mass {run.info['trunk_true']['mass_kg']:.3f} kg; "
          f"mean total vertical contact force {fz.mean():.1f} N")
    return 0


def _estimate(args) -> int:
    from contactflow.config import load_config, read_yaml
    from contactflow.prime.fie import PrimeConfig, PrimeEstimator
    from contactflow.prime.io import ground_truth_forces, measurements_from_recording, write_result
    from contactflow.prime.model import load_prime_robot
    from contactflow.recording.store import read_recording

    rec = read_recording(args.recording)
    robot_name = args.robot or rec.manifest.get("robot")
    if not robot_name:
        from contactflow.errors import ConfigError

        raise ConfigError(f"{args.recording}: the manifest names no robot; pass --robot")
    pr = load_prime_robot(robot_name)
    data = dict(read_yaml(args.config) or {}) if args.config else {}
    if args.no_identify:
        data["identify"] = False
    if args.max_samples is not None:
        data["max_samples"] = args.max_samples
    if args.max_iter is not None:
        data["max_iter"] = args.max_iter
    if args.dt is not None:
        data["dt_s"] = args.dt
    if args.resample:
        data["resample"] = True
    if args.kappa_schedule:
        data["kappa_schedule"] = [float(x) for x in args.kappa_schedule.split(",")]
    cfg = load_config(PrimeConfig, data, source=args.config or "contactflow prime estimate")
    meas, info = measurements_from_recording(rec, pr, cfg, stream=args.stream, start_s=args.start_s)
    bodies = args.bodies.split(",") if args.bodies else None
    est = PrimeEstimator(pr, cfg, bodies=bodies)
    log.info("PRIME on %s: %d steps of %s (stream %s, dt %.4g s), identify %s", rec.path, meas.T, pr.name,
             info["stream"], cfg.dt_s, list(est.bodies))
    res = est.solve(meas)
    prov = {"source_recording": str(Path(args.recording).resolve()), "stream": info["stream"],
            "decimation": info["decimation"], "config": _plain(cfg)}
    if "resampled" in info:
        prov["resampled"] = info["resampled"]
    if "ground_truth.contact_forces" in rec.stream_names:
        gt = ground_truth_forces(rec, pr, info["seq"], t_grid=meas.t if "resampled" in info else None)
        err = res.force_W - gt
        prov["force_rmse_3d_n"] = float(np.sqrt(np.mean(np.sum(err**2, axis=2))))
        prov["force_rmse_fz_n"] = float(np.sqrt(np.mean(err[:, :, 2] ** 2)))
    truth = (rec.manifest.get("prime_datagen") or {}).get("trunk_true")
    if truth:
        prov["trunk_true"] = truth
    out = Path(args.out) if args.out else Path(str(Path(args.recording).resolve()) + "_prime")
    write_result(res, pr, out, info["seq"], prov)
    summary = {"out": str(out), "cost": res.cost, "iterations": res.iterations,
               "converged": res.converged,  # FDDP's flag for the final stage (false: its iteration cap or another stop)
               "solve_time_s": round(res.solve_time_s, 2),
               "bodies": res.body_parameters() if res.identified else {}}
    for k in ("force_rmse_3d_n", "force_rmse_fz_n", "resampled"):
        if k in prov:
            summary[k] = prov[k]
    if truth and res.identified:
        summary["trunk_mass_error_kg"] = res.body_parameters()["root_joint"]["mass_kg"] - truth["mass_kg"] \
            if "root_joint" in res.bodies else None
    print(json.dumps(summary, indent=2))
    return 0


def _apply(args) -> int:
    from contactflow.prime.apply import apply_estimate
    from contactflow.robot import load_robot

    path = apply_estimate(args.run, args.out, robot=args.robot, name=args.name, force=args.force)
    r = load_robot(path)
    print(f"wrote {path}: robot {r.name!r} ({r.mass:.3f} kg); load it with --robot {path.parent} "
          f"(or --robot {r.name} --robot-path {path.parent.parent})")
    return 0


def _plain(cfg):
    from contactflow.config import to_dict

    return to_dict(cfg)
