"""PRIME and recordings: measurements from a contactflow recording, results back into one.

PRIME reads one *measurement stream* of a recording: any stream whose layout has the fields
``q`` (nq), ``v`` (nv) and ``tau`` (n) of the robot (the ``sensors`` contract of
:mod:`contactflow.messages` qualifies, so a SEIKO run's ``mujoco_driver.sensors`` and the
generator's ``datagen.sensors`` both work), at a constant rate with contiguous ``seq``.
``tau`` at sample k is taken as the mean torque over (t_{k-1}, t_k] (``torque_sample_offset = 1``).
Streams named ``ground_truth.*`` are never read by the estimator.

Estimator outputs (:func:`write_result`), in a recording of their own::

    prime_estimator.state       q (nq), v (nv): refined trajectory, seq = measurement seq
    prime_estimator.forces      force.<contact> (3 each): mean contact force over (t_{k-1}, t_k],
                                world [N] (seq of the sample that ends the interval)
    prime_estimator.torque      tau (n): refined torque over (t_{k-1}, t_k] [N m]
    prime_estimator.parameters  per identified body: mass (1) [kg], com (3) [m, body frame],
                                inertia (6: xx, xy, yy, xz, yz, zz about the COM) [kg m^2],
                                theta (10); then cost (1); one message
    report.json                 PrimeResult.report() + provenance
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from contactflow.errors import ConfigError, ContractError, ModelError
from contactflow.prime.fie import Measurements, PrimeConfig, PrimeResult
from contactflow.prime.model import PrimeRobot
from contactflow.recording import Recording, RecordingError, RecordingWriter, Stream, git_revision

__all__ = [
    "find_measurement_stream",
    "measurements_from_recording",
    "measurements_from_arrays",
    "ground_truth_forces",
    "write_result",
    "parameters_layout",
    "REQUIRED_FIELDS",
]

REQUIRED_FIELDS = ("q", "v", "tau")
_REPO = Path(__file__).resolve().parents[2]


def _sizes(robot: PrimeRobot) -> dict[str, int]:
    return {"q": robot.model.nq, "v": robot.model.nv, "tau": robot.model.nv - 6}


def find_measurement_stream(rec: Recording, robot: PrimeRobot, name: str | None = None) -> Stream:
    """The stream PRIME reads: ``name``, or the one stream holding q, v and tau of the robot.

    Raises:
        RecordingError: no (or several) candidate streams, or the named stream is absent.
        ContractError: the stream lacks a required field or a field has the wrong size (named).
    """
    sizes = _sizes(robot)
    if name is not None:
        s = rec.stream(name)  # RecordingError names the known streams
        layout = dict(s.layout)
        missing = [f for f in REQUIRED_FIELDS if f not in layout]
        if missing:
            raise ContractError(
                f"{rec.path}: stream {name!r} lacks field(s) {missing} that PRIME needs "
                f"(fields: {[f for f, _ in s.layout]})"
            )
        for f, n in sizes.items():
            if layout[f] != n:
                raise ContractError(f"{rec.path}: stream {name!r} field {f!r} has {layout[f]} values, robot "
                                    f"{robot.name!r} needs {n}")
        return s
    candidates = []
    for sname in rec.stream_names:
        if sname.startswith("ground_truth.") or sname.startswith("prime_estimator."):
            continue
        layout = rec.manifest["streams"][sname].get("layout") or []
        fields = {f: n for f, n in layout}
        if all(f in fields for f in REQUIRED_FIELDS):
            candidates.append((sname, fields))
    if not candidates:
        raise RecordingError(
            f"{rec.path}: no stream with the fields {list(REQUIRED_FIELDS)} PRIME needs "
            f"(measured q, v and joint torques tau); streams: {rec.stream_names}"
        )
    matching = [c for c in candidates if all(c[1][f] == n for f, n in sizes.items())]
    if not matching:
        c = candidates[0]
        bad = {f: c[1][f] for f in sizes if c[1][f] != sizes[f]}
        raise ModelError(
            f"{rec.path}: stream {c[0]!r} does not match robot {robot.name!r}: field sizes {bad}, expected "
            f"{ {f: sizes[f] for f in bad} } (recorded robot: {rec.manifest.get('robot')!r})"
        )
    if len(matching) > 1:
        raise RecordingError(f"{rec.path}: several measurement streams {[c[0] for c in matching]}; choose one (stream=...)")
    return rec.stream(matching[0][0])


def measurements_from_recording(rec: Recording, robot: PrimeRobot, config: PrimeConfig,
                                stream: str | None = None, start: int = 0) -> tuple[Measurements, dict]:
    """Measurements at the estimator rate from a recording.

    Args:
        rec: the recording.
        robot: the robot PRIME estimates (must be the recorded one).
        config: estimator settings (``dt_s`` must be a multiple of the recording's sample period;
            ``max_samples`` limits the horizon).
        stream: measurement stream name (default: auto-detected).
        start: first sample used (index in the stream).

    Returns:
        (measurements, info) with info = {stream, seq (T+1,) of the samples used, decimation}.

    Raises:
        ModelError: the recording was made with another robot.
        RecordingError / ContractError: missing stream or field, non-finite samples, seq gaps,
            irregular sample times, too few samples (each message names what is wrong).
        ConfigError: dt_s not a multiple of the sample period.
    """
    rec_robot = rec.manifest.get("robot")
    if rec_robot and rec_robot != robot.name:
        raise ModelError(f"{rec.path}: recorded with robot {rec_robot!r}, but the estimator's robot is {robot.name!r}")
    s = find_measurement_stream(rec, robot, stream)
    q, v, tau = (np.asarray(s.field(f)) for f in REQUIRED_FIELDS)
    meas, info = measurements_from_arrays(robot, config, s.seq, s.t, q, v, tau, where=f"{rec.path}: stream {s.name!r}",
                                          start=start)
    return meas, {"stream": s.name, **info}


def measurements_from_arrays(robot: PrimeRobot, config: PrimeConfig, seq: np.ndarray, t: np.ndarray, q: np.ndarray,
                             v: np.ndarray, tau: np.ndarray, *, where: str = "measurements",
                             start: int = 0) -> tuple[Measurements, dict]:
    """Measurements at the estimator rate from per-sample arrays (a recorded or received stream).

    Args:
        robot: the estimated robot.
        config: estimator settings (``dt_s``, ``torque_sample_offset``, ``max_samples``).
        seq: (N,) sample indices; t: (N,) times [s]; q: (N, nq); v: (N, nv); tau: (N, n) (mean
            torque over the interval ending at the sample).
        where: label for error messages.
        start: first sample used.

    Returns:
        (measurements, info) with info = {seq (T+1,) of the samples used, decimation, sample_period_s}.

    Raises:
        RecordingError / ContractError: seq gaps, non-finite samples (field and seq named),
            irregular times, too few samples. ConfigError: dt_s not a multiple of the sample period.
    """
    seq = np.asarray(seq)
    if len(seq) < 2:
        raise RecordingError(f"{where}: {len(seq)} sample(s); PRIME needs at least 2")
    order = np.argsort(seq, kind="stable")
    seq = seq[order]
    gaps = np.nonzero(np.diff(seq) != 1)[0]
    if gaps.size:
        i = gaps[0]
        raise RecordingError(f"{where}: seq not contiguous ({seq[i]} -> {seq[i + 1]}, {gaps.size} gap(s)); "
                             "PRIME needs every sample")
    q, v, tau, t = q[order], v[order], tau[order], np.asarray(t)[order]
    for fname, arr in (("t", t[:, None]), ("q", q), ("v", v), ("tau", tau)):
        bad = ~np.all(np.isfinite(arr), axis=1)
        if bad.any():
            i = int(np.argmax(bad))
            raise ContractError(f"{where} field {fname!r}: non-finite value(s) in {int(bad.sum())} sample(s), "
                                f"first at seq {int(seq[i])}")
    dts = np.diff(t)
    dt_rec = float(np.median(dts))
    if not dt_rec > 0 or np.max(np.abs(dts - dt_rec)) > 1e-6 + 1e-3 * dt_rec:
        raise RecordingError(f"{where}: irregular sample times (median period {dt_rec:g} s)")
    dec = int(round(config.dt_s / dt_rec))
    if dec < 1 or abs(dec * dt_rec - config.dt_s) > 1e-6:
        raise ConfigError(f"dt_s = {config.dt_s} s is not a multiple of the sample period {dt_rec:g} s of {where}")
    off = config.torque_sample_offset
    idx = np.arange(start, len(seq) - off, dec)
    if config.max_samples:
        idx = idx[: config.max_samples + 1]
    if idx.size < 2:
        raise RecordingError(f"{where}: fewer than 2 samples at dt_s = {config.dt_s} s")
    T = idx.size - 1
    tau_k = np.empty((T, tau.shape[1]))
    for k in range(T):
        tau_k[k] = tau[idx[k] + off : idx[k + 1] + off].mean(axis=0)
    meas = Measurements(t[idx].copy(), q[idx].copy(), v[idx].copy(), tau_k)
    meas.check(robot.model)
    return meas, {"seq": seq[idx], "decimation": dec, "sample_period_s": dt_rec}


def ground_truth_forces(rec: Recording, robot: PrimeRobot, seq: np.ndarray,
                        name: str = "ground_truth.contact_forces") -> np.ndarray:
    """(T, nc, 3) ground-truth forces of the estimator's intervals (messages ``seq[1:]``), world [N].

    With decimation the interval mean is the mean of the recorded sub-interval means.
    """
    s = rec.stream(name)
    index = {int(k): i for i, k in enumerate(s.seq)}
    out = np.empty((len(seq) - 1, len(robot.points), 3))
    for k in range(len(seq) - 1):
        rows = [index[int(j)] for j in range(int(seq[k]) + 1, int(seq[k + 1]) + 1)]
        vals = np.stack([np.concatenate([s.field(f"force.{c}")[r] for c in robot.contact_names]) for r in rows])
        out[k] = vals.mean(axis=0).reshape(-1, 3)
    return out


def parameters_layout(result: PrimeResult) -> list[tuple[str, int]]:
    """Field layout of ``prime_estimator.parameters``."""
    lay = []
    for b in result.bodies:
        lay += [(f"mass.{b}", 1), (f"com.{b}", 3), (f"inertia.{b}", 6), (f"theta.{b}", 10)]
    return lay + [("cost", 1)]


def parameters_vector(result: PrimeResult) -> np.ndarray:
    """Flat values of :func:`parameters_layout`."""
    vals = []
    for b, p in result.body_parameters().items():
        I = np.asarray(p["inertia_com_kgm2"])
        i = result.bodies.index(b)
        vals += [[p["mass_kg"]], p["com_m"], [I[0, 0], I[0, 1], I[1, 1], I[0, 2], I[1, 2], I[2, 2]],
                 result.theta[10 * i : 10 * i + 10]]
    vals.append([result.cost])
    return np.concatenate([np.asarray(v, dtype=float) for v in vals])


def write_result(result: PrimeResult, robot: PrimeRobot, run_dir: str | Path, seq: np.ndarray,
                 provenance: dict | None = None) -> Path:
    """Write a PRIME result as a recording (streams in the module docstring) plus ``report.json``."""
    run_dir = Path(run_dir)
    nq, nv = robot.model.nq, robot.model.nv
    n = nv - 6
    w = RecordingWriter(run_dir, {"dataflow": "", "robot": robot.name, "git_revision": git_revision(_REPO),
                                  "prime": provenance or {}})
    st = w.stream("prime_estimator.state", nq + nv, {"source": "prime_estimator/state", "contract": "prime_state",
                                                     "layout": json.dumps([("q", nq), ("v", nv)])})
    fl = [(f"force.{c}", 3) for c in result.contact_names]
    fs = w.stream("prime_estimator.forces", 3 * len(fl), {"source": "prime_estimator/forces",
                                                           "contract": "prime_contact_forces", "layout": json.dumps(fl)})
    ts = w.stream("prime_estimator.torque", n, {"source": "prime_estimator/torque", "contract": "prime_torque",
                                                "layout": json.dumps([("tau", n)])})
    pl = parameters_layout(result)
    ps = w.stream("prime_estimator.parameters", sum(s for _, s in pl),
                  {"source": "prime_estimator/parameters", "contract": "prime_parameters", "layout": json.dumps(pl)})
    T = result.tau.shape[0]
    for k in range(T + 1):
        fin = k == T
        st.append(int(seq[k]), float(result.t[k]), np.r_[result.q[k], result.v[k]], fin)
        if k >= 1:
            fs.append(int(seq[k]), float(result.t[k]), result.force_W[k - 1].reshape(-1), fin)
            ts.append(int(seq[k]), float(result.t[k]), result.tau[k - 1], fin)
    ps.append(int(seq[-1]), float(result.t[-1]), parameters_vector(result), True)
    w.close()
    report = {**result.report(), "robot": robot.name, **(provenance or {})}
    (run_dir / "report.json").write_text(json.dumps(report, indent=2, default=_json_default))
    return run_dir


def _json_default(x):
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")
