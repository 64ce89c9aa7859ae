"""PRIME and recordings: measurements from a contactflow recording, results back into one.

PRIME reads one *measurement stream* of a recording: any stream whose layout has the fields
``q`` (nq), ``v`` (nv) and ``tau`` (n) of the robot (the ``sensors`` contract of
:mod:`contactflow.contracts.messages` qualifies, so a SEIKO run's ``mujoco_driver.sensors`` and the
generator's ``datagen.sensors`` both work), at a constant rate with contiguous ``seq``.
``tau`` at sample k is taken as the mean torque over (t_{k-1}, t_k] (``torque_sample_offset = 1``).
Streams named ``ground_truth.*`` are never read by the estimator.

A stream sampled at irregular times (a hardware driver that ticks on the wall clock and stamps
each sample with the robot's own clock) is refused unless ``PrimeConfig.resample`` is set
(``contactflow prime estimate --resample``): then :func:`resample_stream` interpolates it onto
the estimator's regular grid ``t_0 + k dt_s`` first (q on the configuration manifold, v linearly,
tau as interval means; see there for the bounds on the jitter it accepts).

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
import pinocchio as pin

from contactflow.errors import ConfigError, ContractError, ModelError
from contactflow.prime.fie import Measurements, PrimeConfig, PrimeResult
from contactflow.prime.model import PrimeRobot
from contactflow.recording.store import Recording, RecordingError, RecordingWriter, Stream, git_revision

__all__ = [
    "find_measurement_stream",
    "measurements_from_recording",
    "measurements_from_arrays",
    "ground_truth_forces",
    "write_result",
    "parameters_layout",
    "resample_stream",
    "interval_means",
    "REQUIRED_FIELDS",
    "RESAMPLE_MAX_PERIOD_RATIO",
]

REQUIRED_FIELDS = ("q", "v", "tau")
RESAMPLE_MAX_PERIOD_RATIO = 2.0  # resampling refuses a sample period longer than this x the median
_RESAMPLE_HINT = "pass --resample (PrimeConfig resample: true) to interpolate onto the dt_s grid"
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
                                stream: str | None = None, start: int = 0,
                                start_s: float | None = None) -> tuple[Measurements, dict]:
    """Measurements at the estimator rate from a recording.

    Args:
        rec: the recording.
        robot: the robot PRIME estimates (must be the recorded one).
        config: estimator settings (``dt_s`` must be a multiple of the recording's sample period;
            ``max_samples`` limits the horizon).
        stream: measurement stream name (default: auto-detected).
        start: first sample used (index in the stream).
        start_s: instead of ``start``: skip this many seconds from the stream's first sample (e.g. a
            hardware start-up ramp); the first sample at or after it is used.

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
    if start_s is not None:
        t_sorted = np.asarray(s.t)[np.argsort(s.seq, kind="stable")]
        start = int(np.searchsorted(t_sorted, t_sorted[0] + start_s - 1e-9))
    meas, info = measurements_from_arrays(robot, config, s.seq, s.t, q, v, tau, where=f"{rec.path}: stream {s.name!r}",
                                          start=start)
    return meas, {"stream": s.name, **info}


def measurements_from_arrays(robot: PrimeRobot, config: PrimeConfig, seq: np.ndarray, t: np.ndarray, q: np.ndarray,
                             v: np.ndarray, tau: np.ndarray, *, where: str = "measurements",
                             start: int = 0) -> tuple[Measurements, dict]:
    """Measurements at the estimator rate from per-sample arrays (a recorded or received stream).

    With ``config.resample`` the stream is first interpolated onto the regular grid
    ``t[start] + k dt_s`` by :func:`resample_stream` (irregular sample times accepted within its
    bounds); the returned ``seq`` is then the grid index k, not a recorded seq.

    Args:
        robot: the estimated robot.
        config: estimator settings (``dt_s``, ``torque_sample_offset``, ``max_samples``, ``resample``).
        seq: (N,) sample indices; t: (N,) times [s]; q: (N, nq); v: (N, nv); tau: (N, n) (mean
            torque over the interval ending at the sample).
        where: label for error messages.
        start: first sample used.

    Returns:
        (measurements, info) with info = {seq (T+1,) of the samples used, decimation, sample_period_s},
        plus ``resampled`` (a dict from :func:`resample_stream`) when ``config.resample``.

    Raises:
        RecordingError / ContractError: seq gaps, non-finite samples (field and seq named),
            irregular times (without ``resample``; the message names the flag), jitter beyond the
            resampling bound, too few samples. ConfigError: dt_s not a multiple of the sample period
            (without ``resample``) or shorter than the median period (with it).
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
    resampled = None
    if config.resample:
        t, q, v, tau, resampled = resample_stream(robot.model, seq[start:], t[start:], q[start:], v[start:],
                                                  tau[start:], config.dt_s, torque_sample_offset=config.torque_sample_offset,
                                                  where=where)
        seq, start = np.arange(t.size), 0
    dts = np.diff(t)
    dt_rec = float(np.median(dts))
    if not dt_rec > 0 or np.max(np.abs(dts - dt_rec)) > 1e-6 + 1e-3 * dt_rec:
        raise RecordingError(f"{where}: irregular sample times (median period {dt_rec:g} s, periods "
                             f"{dts.min():g}..{dts.max():g} s); {_RESAMPLE_HINT}")
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
    info = {"seq": seq[idx], "decimation": dec, "sample_period_s": dt_rec}
    if resampled is not None:
        info["resampled"] = resampled
    return meas, info


def interval_means(t: np.ndarray, values: np.ndarray, t_grid: np.ndarray, offset: int = 1) -> np.ndarray:
    """Means over the intervals of ``t_grid`` of a signal given as means over the intervals of ``t``.

    The recorded interval ``[t_i, t_i+1]`` carries ``values[i + offset]`` (``offset = 1``: the value
    at a sample is the mean over the interval ending there, PRIME's torque and force convention;
    ``offset = 0``: over the interval starting there). The signal is taken as constant on each
    recorded interval (all an interval mean tells), so the result is the overlap-weighted average
    of the recorded values and conserves the integral (impulse) over any union of intervals; on a
    grid equal to ``t`` it returns the values unchanged.

    Args:
        t: (N,) strictly increasing sample times [s].
        values: (N, m) interval means (any unit).
        t_grid: (M,) increasing times [s] within ``[t[0], t[-1]]``.
        offset: 1 or 0 (see above).

    Returns:
        (M - 1, m) mean over ``[t_grid[k], t_grid[k+1]]``.

    Raises:
        ValueError: ``t_grid`` outside ``[t[0], t[-1]]``.
    """
    t = np.asarray(t, float)
    t_grid = np.asarray(t_grid, float)
    tol = 1e-9 * max(1.0, abs(t[-1]))
    if t_grid[0] < t[0] - tol or t_grid[-1] > t[-1] + tol:
        raise ValueError(f"grid [{t_grid[0]:g}, {t_grid[-1]:g}] s outside the samples [{t[0]:g}, {t[-1]:g}] s")
    vals = np.asarray(values, float)[offset : offset + t.size - 1]  # value of recorded interval i
    out = np.empty((t_grid.size - 1, vals.shape[1]))
    lo = np.clip(np.searchsorted(t, t_grid[:-1], side="right") - 1, 0, t.size - 2)
    hi = np.clip(np.searchsorted(t, t_grid[1:], side="left"), lo + 1, t.size - 1)
    for k in range(out.shape[0]):
        i = np.arange(lo[k], hi[k])
        w = np.minimum(t[i + 1], t_grid[k + 1]) - np.maximum(t[i], t_grid[k])
        w = np.maximum(w, 0.0)
        out[k] = w @ vals[i] / w.sum() if w.sum() > 0 else vals[i[0]]
    return out


def resample_stream(model, seq: np.ndarray, t: np.ndarray, q: np.ndarray, v: np.ndarray, tau: np.ndarray,
                    dt_s: float, *, torque_sample_offset: int = 1, where: str = "measurements",
                    max_period_ratio: float = RESAMPLE_MAX_PERIOD_RATIO):
    """Interpolate a jittered measurement stream onto the regular grid ``t[0] + k dt_s``.

    For a driver that samples the newest robot state on its own (wall-clock) tick and stamps it
    with the robot's clock (``nodes/unitree_driver.py``): the sample times jitter by the robot's
    state period (and more under load), and the same state may be sent twice. Grid values:

    * ``q``: ``pinocchio.interpolate`` between the two bracketing samples (on the configuration
      manifold: the free-flyer part as an SE(3) geodesic, base quaternion included);
    * ``v``: linear between the bracketing samples (base twist in the base frame, joint rates);
    * ``tau``: PRIME's convention is kept: the value at a grid sample (``torque_sample_offset = 1``)
      is the mean torque over the grid interval ending there, computed by :func:`interval_means`
      from the recorded samples read in the same convention (each the mean over the recorded
      interval ending at it). A driver that reports an instantaneous torque (the motors'
      ``tau_est``) is thereby read as holding it over the preceding interval, as PRIME already
      does without resampling.

    A regular stream on the same grid comes back unchanged (to rounding). Samples with the same
    time as the previous one and identical values (a re-sent state) are dropped.

    Args:
        model: the robot's pinocchio model.
        seq: (N,) contiguous sample indices (checked by the caller).
        t: (N,) sample times [s], non-decreasing.
        q: (N, nq) configurations (quaternion xyzw, normalised here); v: (N, nv); tau: (N, n) [N m].
        dt_s: grid period [s], at least the median sample period (no upsampling).
        torque_sample_offset: 1 or 0, as ``PrimeConfig.torque_sample_offset``.
        where: label for error messages.
        max_period_ratio: longest accepted sample period, in medians (a longer one is a dropout,
            not jitter).

    Returns:
        (t_grid (M,), q (M, nq), v (M, nv), tau (M, n), info) with ``tau`` in the same convention
        as the input (the row that no grid interval uses is NaN: row 0 for offset 1, row M-1 for
        offset 0) and info = {grid_period_s, median_period_s, min_period_s, max_period_s,
        duplicates_dropped, seq_first, seq_last, grid_samples}.

    Raises:
        RecordingError: time going backwards, a repeated time with different values, a period
            longer than ``max_period_ratio`` x the median, fewer than 2 grid samples (each names
            the seq and the values).
        ContractError: a base quaternion of norm < 0.5 (names the seq).
        ConfigError: ``dt_s`` shorter than the median sample period.
    """
    seq, t = np.asarray(seq), np.asarray(t, float)
    q, v, tau = (np.array(a, dtype=float) for a in (q, v, tau))
    dts = np.diff(t)
    if np.any(dts < 0):
        i = int(np.argmax(dts < 0))
        raise RecordingError(f"{where}: sample time goes back at seq {int(seq[i + 1])} ({t[i]:g} -> {t[i + 1]:g} s)")
    dup = np.nonzero(dts == 0)[0]
    for i in dup:
        if not (np.array_equal(q[i], q[i + 1]) and np.array_equal(v[i], v[i + 1]) and np.array_equal(tau[i], tau[i + 1])):
            raise RecordingError(f"{where}: seq {int(seq[i])} and {int(seq[i + 1])} have the same time {t[i]:g} s "
                                 "but different values; cannot resample")
    keep = np.ones(t.size, bool)
    keep[dup + 1] = False
    seq, t, q, v, tau = seq[keep], t[keep], q[keep], v[keep], tau[keep]
    if t.size < 2:
        raise RecordingError(f"{where}: fewer than 2 distinct sample times; cannot resample")
    dts = np.diff(t)
    med = float(np.median(dts))
    if dts.max() > max_period_ratio * med:
        i = int(np.argmax(dts))
        raise RecordingError(
            f"{where}: sample period {dts[i]:g} s before seq {int(seq[i + 1])} is {dts[i] / med:.2f}x the median "
            f"{med:g} s; resampling accepts at most {max_period_ratio:g}x (a dropout, not jitter)")
    if dt_s < med * (1 - 1e-6):
        raise ConfigError(f"dt_s = {dt_s} s is shorter than the median sample period {med:g} s of {where}; "
                          "resampling does not upsample (use dt_s >= the sample period)")
    nrm = np.linalg.norm(q[:, 3:7], axis=1)
    if np.any(nrm < 0.5):
        i = int(np.argmax(nrm < 0.5))
        raise ContractError(f"{where} field 'q': base quaternion with norm {nrm[i]:.3g} at seq {int(seq[i])}")
    q[:, 3:7] /= nrm[:, None]
    M = int(np.floor((t[-1] - t[0]) / dt_s + 1e-9)) + 1
    if M < 2:
        raise RecordingError(f"{where}: {t[-1] - t[0]:g} s of samples hold fewer than 2 grid samples at dt_s = {dt_s} s")
    tg = t[0] + dt_s * np.arange(M)
    tg[-1] = min(tg[-1], t[-1])
    j = np.clip(np.searchsorted(t, tg, side="right") - 1, 0, t.size - 2)
    u = np.clip((tg - t[j]) / (t[j + 1] - t[j]), 0.0, 1.0)
    qg = np.empty((M, q.shape[1]))
    for k in range(M):
        qg[k] = pin.interpolate(model, q[j[k]], q[j[k] + 1], float(u[k]))
    vg = (1.0 - u)[:, None] * v[j] + u[:, None] * v[j + 1]
    taug = np.full((M, tau.shape[1]), np.nan)
    off = torque_sample_offset
    taug[off : off + M - 1] = interval_means(t, tau, tg, offset=off)
    info = {"grid_period_s": float(dt_s), "median_period_s": med, "min_period_s": float(dts.min()),
            "max_period_s": float(dts.max()), "duplicates_dropped": int(dup.size), "seq_first": int(seq[0]),
            "seq_last": int(seq[-1]), "grid_samples": M}
    return tg, qg, vg, taug, info


def ground_truth_forces(rec: Recording, robot: PrimeRobot, seq: np.ndarray,
                        name: str = "ground_truth.contact_forces", t_grid: np.ndarray | None = None) -> np.ndarray:
    """(T, nc, 3) ground-truth forces of the estimator's intervals, world [N].

    Without ``t_grid``: the intervals end at the messages ``seq[1:]``; with decimation the interval
    mean is the mean of the recorded sub-interval means. With ``t_grid`` ((T+1,) times [s] of a
    resampled run, ``seq`` then unused): the recorded interval means resampled onto the grid by
    :func:`interval_means`, as the torque is.
    """
    s = rec.stream(name)
    if t_grid is not None:
        vals = np.concatenate([s.field(f"force.{c}") for c in robot.contact_names], axis=1)
        order = np.argsort(s.seq, kind="stable")
        t = np.asarray(s.t, float)[order]
        keep = np.r_[True, np.diff(t) > 0]  # re-sent samples (same time), as resample_stream drops them
        return interval_means(t[keep], vals[order][keep], t_grid).reshape(len(t_grid) - 1, -1, 3)
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
