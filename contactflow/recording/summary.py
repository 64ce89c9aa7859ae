"""End-of-run summary of a SEIKO run, computed from its recording.

Metrics (all SI):

* ``fell``: the pelvis went below ``fall_height_m`` or the state became non-finite.
* ``pelvis_min_height_m``: minimum base height of the simulated/measured robot.
* ``left_hand_max_error_m``: max distance between the Retargeting's desired left-hand position
  (FK of ``q_d``) and the measured one (FK of the measured ``q``) during the holds. A hold is a
  period where the operator's left-hand command is zero after having been non-zero, starting
  ``hold_settle_s`` after the command stopped (the input filter's low-pass settles) and ending when
  the next command starts or the run ends. Holds shorter than ``min_hold_s`` (0.5 s) in all give
  no error (NaN, ``null`` in JSON): a run that ends right after a motion has no hold to speak of.
* ``left_hand_hold_duration_s``: total duration of those holds [s].
* ``foot_fz_tracking_rmse_n``: RMSE between desired (``lam_d``) and measured vertical sole
  forces, both feet pooled, over the whole run.

Streams are aligned by ``seq``: at each sensors tick k, the newest desired (and operator command)
message with seq <= k, i.e. the one of tick k in lockstep and the one in force in a real-time run
whose stages skipped ticks.
* ``ticks``, ``sim_time_s``, ``wall_time_s`` (first to last sensor message, on the driver's wall clock when
  it sent them), ``realtime_factor`` (simulated seconds per wall second).
* ``requests_refused``: operator requests the Retargeting refused (its ``n_refused``).
* ``contact_switches``: ``"<effector> on|off at <t> s"`` for every change of the Retargeting's
  ``enabled`` flags (a disabled foot is "off" once released, after its unloading). In runs with
  switches, ``foot_fz_tracking_rmse_n`` includes the release and reload transients.

Tick timing (:func:`tick_timing`, keys :data:`TICK_TIMING_KEYS`), where a graph spends its wall time, from
the wall-clock stamps of the driver's sensors messages (one per tick; a lockstep run or a real-time one; the
stamps of messages that came in a node's log batch, as every stream of the SEIKO graphs, are the sender's
clock when it sent them; a stream the recorder takes directly has its receive times instead):

* ``startup_wall_s``: wall time of the first :data:`STARTUP_TICKS` ticks (the nodes' first messages);
* ``tick_wall_ms_p50`` / ``_p99`` / ``_max``: wall time between consecutive sensors messages after them [ms];
* ``slow_ticks``: those ticks that took more than twice the median; ``slow_tick_lost_s``: the wall time they
  took beyond the median [s], and ``slow_tick_lost_ratio`` its share of the run's wall time (what the run
  would gain at a steady median pace from those ticks alone). Ticks missing from the recording share the
  interval that spans them.

and, for a Retargeting run ahead of the Controller (``seiko_talos.yml``: its ``desired`` stamped before the
sensors of the tick that uses it), ``desired_lead_ticks_p1`` / ``_p50``: at each sensors tick k after the
start-up, the newest tick the Retargeting had computed its desired of (by their stamps) minus k: its lead in
ticks. The Controller of tick k reads the desired of k - ``--lag`` from the sensors of k - ``--sensor-lag``, in
batches of ``rows_every`` ticks (``desired_rows``, 10) sent when full, so it can wait only while the lead is
under ``rows_every - 1 - (lag - sensor_lag)`` (8 in ``seiko_talos.yml``); in a graph where the Retargeting
runs at the driver's pace the lead is about minus one.

Real-time keys (:func:`realtime_metrics`), from the driver's ``timing`` stream (contract
``driver_timing``: one row per control period, recorded by the real-time graph
``dataflows/seiko_talos_realtime.yml``); NaN (``null``) and ``realtime: false`` for a run without it
(the lockstep graph, where every command is waited for and applied in the tick it was computed for).
A *period* is one control period of the driver on the wall clock (2 ms for Talos) after the start-up
warm-up; in period k the driver publishes the sensors of t_k, takes the newest command received
before that moment and simulates [t_k, t_k+1) with it (a command acts from the period after the
sensors it was computed from arrived: a hardware driver's zero-order hold).

* ``periods``: wall-clock periods of the run (``warmup_periods``: the start-up ticks before them, in
  which the driver waited for each command; not counted). A period that the driver itself started
  j >= 1 periods late (the simulator fell behind the wall clock) re-anchors its deadlines: the j
  periods lost are counted in ``periods`` and as misses.
* ``deadline_misses``: periods in which the driver had no new command (the newest command at the
  period start was the one already applied in the previous period, or none: the last safe command
  was held), in which the driver itself started the period one period or more after its deadline,
  and the periods lost that way.
  ``deadline_miss_ratio`` = deadline_misses / periods.
* ``command_age_ms_p50`` / ``_p99``: per period, t_k minus the time ``t`` of the sensors message the
  applied command was computed from (the command's ``t``), on the driver's clock [ms]; a command that
  arrives in time has age one period (2 ms), each period it is held adds one.
* ``longest_stall_ms``: the longest wall time the same command stayed applied beyond its own period:
  max over consecutive periods a < b that applied new commands of (wall(b) - wall(a)) - period [ms];
  0 when every period had a new command on time (the driver's own lateness counts).
* ``driver_late_ms_p99`` / ``_max``: wall lateness of the period starts against their deadlines [ms].
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from contactflow.recording.store import Recording, RecordingError

__all__ = ["seiko_summary", "format_summary", "realtime_metrics", "REALTIME_KEYS", "tick_timing", "TICK_TIMING_KEYS",
           "desired_lead", "recorded_nothing", "NO_MESSAGE_REASON",
           "STARTUP_TICKS", "SUMMARY_KINDS", "run_summary",
           "write_run_summary", "recompute_command"]

#: The run summaries the recorder computes at the end (``--summary``) and ``contactflow rec summary`` recomputes.
SUMMARY_KINDS = ("seiko", "g1")


def _fk_positions(robot, qs: np.ndarray, frame_id: int) -> np.ndarray:
    data = robot.model.createData()
    out = np.empty((len(qs), 3))
    for i, q in enumerate(qs):
        pin.forwardKinematics(robot.model, data, q)
        out[i] = pin.updateFramePlacement(robot.model, data, frame_id).translation
    return out


def _align_latest(seq: np.ndarray, other: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``i`` of a stream with seqs ``seq`` and, for each, the row of ``other`` with the newest seq
    <= ``seq[i]``; only rows with such a row and with ``seq[i] <= max(other)`` (a stream that ends
    earlier is not extended). With every seq present both ways this is the exact match by seq."""
    seq = np.asarray(seq)
    other = np.asarray(other)
    if not len(seq) or not len(other):
        return np.zeros(0, int), np.zeros(0, int)
    order = np.argsort(other, kind="stable")
    pos = np.searchsorted(other[order], seq, side="right") - 1
    ok = (pos >= 0) & (seq <= other[order[-1]])
    return np.flatnonzero(ok), order[pos[ok]]


def _hold_mask(twist: np.ndarray, t: np.ndarray, settle_s: float) -> np.ndarray:
    moving = np.linalg.norm(twist, axis=1) > 0
    mask = np.zeros(len(t), bool)
    if not moving.any():
        return mask
    idx = np.flatnonzero(moving)
    # transitions moving -> idle
    for i in range(idx[0], len(t) - 1):
        if moving[i] and not moving[i + 1]:
            t_stop = t[i + 1]
            nxt = np.flatnonzero(moving[i + 1 :])
            end = i + 1 + nxt[0] if len(nxt) else len(t)
            sel = np.arange(i + 1, end)
            mask[sel[t[sel] >= t_stop + settle_s]] = True
    return mask


STARTUP_TICKS = 10
"""Ticks at the start of a run that :func:`tick_timing` counts apart (``startup_wall_s``): the nodes' first messages."""

TICK_TIMING_KEYS = ("startup_wall_s", "tick_wall_ms_p50", "tick_wall_ms_p99", "tick_wall_ms_max", "slow_ticks",
                    "slow_tick_lost_s", "slow_tick_lost_ratio")
"""The summary keys of :func:`tick_timing` (module docstring)."""


def tick_timing(seq, t_wall_ns) -> dict:
    """Where a run spends its wall time, tick by tick (module docstring, "Tick timing").

    Args:
        seq: (N,) tick index of each sensors message (any order; a tick missing from the recording, e.g. in a
            lost log batch, spreads the interval over the ticks it spans instead of making one slow tick).
        t_wall_ns: (N,) the driver's wall clock when it sent each [ns].

    Returns:
        dict with the keys :data:`TICK_TIMING_KEYS` (times in ms per tick, s in all): NaN (and 0 slow ticks)
        where the run has too few ticks (``startup_wall_s`` needs more than :data:`STARTUP_TICKS` messages, the
        rest two intervals after them).
    """
    order = np.argsort(np.asarray(seq, dtype=np.int64), kind="stable")
    k = np.asarray(seq, dtype=np.int64)[order]
    w = np.asarray(t_wall_ns, dtype=np.int64)[order]
    nan = float("nan")
    out = {k_: nan for k_ in TICK_TIMING_KEYS}
    out["slow_ticks"] = 0
    if len(w) <= STARTUP_TICKS:
        return out
    out["startup_wall_s"] = float((w[STARTUP_TICKS] - w[0]) * 1e-9)
    span = np.diff(k[STARTUP_TICKS:])
    ok = span > 0  # a seq recorded twice: no interval
    dt = np.diff(w[STARTUP_TICKS:])[ok] * 1e-9 / span[ok]  # [s] per tick
    span = span[ok]
    if len(dt) < 2:
        return out
    med = float(np.median(dt))
    slow = dt > 2.0 * med
    lost = float(np.sum((dt[slow] - med) * span[slow]))
    wall = float((w[-1] - w[0]) * 1e-9)
    out.update({
        "tick_wall_ms_p50": med * 1e3,
        "tick_wall_ms_p99": float(np.percentile(dt, 99) * 1e3),
        "tick_wall_ms_max": float(np.max(dt) * 1e3),
        "slow_ticks": int(np.sum(span[slow])),
        "slow_tick_lost_s": lost,
        "slow_tick_lost_ratio": lost / wall if wall > 0 else nan,
    })
    return out


def desired_lead(sensors_seq, sensors_wall_ns, desired_seq, desired_wall_ns) -> dict:
    """``desired_lead_ticks_p1`` / ``_p50`` (module docstring): how far ahead of the driver the Retargeting computed.

    Args:
        sensors_seq, sensors_wall_ns: (N,) the sensors messages' ticks and the driver's wall clock when it sent
            them [ns].
        desired_seq, desired_wall_ns: (M,) the desired rows' ticks and the Retargeting's wall clock when it
            computed them [ns] (each stream in any order, one wall clock).

    Returns:
        dict ``desired_lead_ticks_p1`` / ``_p50`` [ticks]: over the sensors ticks after the first
        :data:`STARTUP_TICKS`, the newest desired tick computed at or before the tick's sensors message minus the
        tick (ticks without such a row yet are left out); NaN where no tick has one.
    """
    nan = {"desired_lead_ticks_p1": float("nan"), "desired_lead_ticks_p50": float("nan")}
    s_seq, ws = np.asarray(sensors_seq, dtype=np.int64), np.asarray(sensors_wall_ns, dtype=np.int64)
    d_seq, wd = np.asarray(desired_seq, dtype=np.int64), np.asarray(desired_wall_ns, dtype=np.int64)
    if len(s_seq) <= STARTUP_TICKS or not len(d_seq):
        return nan
    o = np.argsort(s_seq, kind="stable")[STARTUP_TICKS:]
    od = np.argsort(wd, kind="stable")
    newest = np.maximum.accumulate(d_seq[od])  # newest desired tick computed by each stamp
    pos = np.searchsorted(wd[od], ws[o], side="right") - 1
    have = pos >= 0
    if not have.any():
        return nan
    lead = newest[pos[have]] - s_seq[o][have]
    # whole ticks: the 1st percentile and the median of the leads, each one of them (no interpolation)
    return {"desired_lead_ticks_p1": float(np.percentile(lead, 1, method="lower")),
            "desired_lead_ticks_p50": float(np.percentile(lead, 50, method="lower"))}


REALTIME_KEYS = ("realtime", "periods", "warmup_periods", "deadline_misses", "deadline_miss_ratio", "command_age_ms_p50",
                 "command_age_ms_p99", "longest_stall_ms", "driver_late_ms_p99", "driver_late_ms_max")
"""The summary keys of :func:`realtime_metrics` (module docstring)."""


def realtime_metrics(timing, dt_s: float | None = None) -> dict:
    """Real-time keys of a run from the driver's per-period timing rows (module docstring).

    Args:
        timing: mapping field -> (N,) arrays with the ``driver_timing`` fields (``command_seq``,
            ``command_t``, ``new_command``, ``paced``, ``late_s``, ``wall_s``) and ``t`` (t_k [s]),
            one row per period in period order; or None (no timing: NaN keys, ``realtime`` False).
        dt_s: control period [s]; None = the median step of ``t``.

    Returns:
        dict with the keys :data:`REALTIME_KEYS`.

    Raises:
        KeyError: a field is missing.
    """
    nan = float("nan")
    out = {k: nan for k in REALTIME_KEYS}
    out["realtime"] = False
    if timing is None:
        return out
    col = {k: np.asarray(timing[k], dtype=float).reshape(-1) for k in
           ("t", "command_seq", "command_t", "new_command", "paced", "late_s", "wall_s")}
    t = col["t"]
    if dt_s is None:
        dt_s = float(np.median(np.diff(t))) if len(t) > 1 else nan
    paced = col["paced"] > 0.5
    n = int(paced.sum())
    out["realtime"] = n > 0
    out["periods"] = n
    out["warmup_periods"] = int((~paced).sum())
    if n == 0:
        return out
    has = col["command_seq"][paced] >= 0
    new = (col["new_command"][paced] > 0.5) & has
    late = col["late_s"][paced]
    overrun = late >= dt_s * (1.0 - 1e-9)
    # a period started k >= 1 periods late: the driver re-anchored its deadlines, k periods were lost
    lost = int(np.sum(np.floor(late[overrun] / dt_s + 1e-9)))
    misses = int(np.sum(~new | overrun)) + lost
    out["periods"] = n + lost
    out["deadline_misses"] = misses
    out["deadline_miss_ratio"] = misses / (n + lost)
    age_ms = (t[paced] - col["command_t"][paced])[has] * 1e3
    if len(age_ms):
        out["command_age_ms_p50"] = float(np.percentile(age_ms, 50))
        out["command_age_ms_p99"] = float(np.percentile(age_ms, 99))
    wall = col["wall_s"][paced]
    # wall times of the periods that applied a new command, bracketed by the period before the first
    # one (the last warm-up tick applied a new command by construction) and the end of the last one
    marks = np.concatenate([[wall[0] - dt_s], wall[new], [wall[-1] + dt_s]])
    out["longest_stall_ms"] = float(max(0.0, np.max(np.diff(marks)) - dt_s) * 1e3)
    out["driver_late_ms_p99"] = float(np.percentile(late, 99) * 1e3)
    out["driver_late_ms_max"] = float(np.max(late) * 1e3)
    return out


def _timing_rows(rec: Recording, driver: str):
    try:
        st = rec.stream(f"{driver}.timing")
    except RecordingError:
        return None
    order = np.argsort(st.seq, kind="stable")
    rows = {f: st.field(f)[order, 0] for f in ("command_seq", "command_t", "new_command", "paced", "late_s", "wall_s")}
    rows["t"] = st.t[order]
    return rows


def seiko_summary(rec: Recording, robot, *, driver: str = "mujoco_driver", retargeting: str = "seiko_retargeting",
                  operator: str = "operator", fall_height_m: float = 0.6, hold_settle_s: float = 0.5,
                  hand: str = "left_hand", min_hold_s: float = 0.5) -> dict:
    """Compute the summary of a SEIKO run from its recording (see module docstring).

    Raises:
        RecordingError: a needed stream is missing.
    """
    sensors = rec.stream(f"{driver}.sensors")
    desired = rec.stream(f"{retargeting}.desired")
    q_meas = sensors.field("q")
    finite = np.all(np.isfinite(q_meas), axis=1)
    heights = q_meas[finite, 2]
    pelvis_min = float(np.min(heights)) if len(heights) else float("nan")
    fell = bool((not finite.all()) or pelvis_min < fall_height_m)

    # at each sensors tick k, the newest desired with seq <= k (lockstep: the one of tick k; real time:
    # the one in force, when the Retargeting skipped ticks)
    i_s, i_d = _align_latest(sensors.seq, desired.seq)
    fz_err = []
    for foot in [c for c, s in robot.contacts.items() if s.type == "plane"]:
        fz_meas = sensors.field(f"wrench.{foot}")[i_s, 2]
        fz_des = desired.field(f"lam_d.{foot}")[i_d, 2]
        fz_err.append(fz_meas - fz_des)
    fz_err = np.concatenate(fz_err) if fz_err else np.zeros(0)
    rmse = float(np.sqrt(np.mean(fz_err**2))) if len(fz_err) else float("nan")

    hand_err = float("nan")
    hold_s = 0.0
    try:
        op = rec.stream(f"{operator}.command")
    except RecordingError:  # no operator stream (e.g. a replay without operator): metric left NaN
        op = None
    if op is not None:
        i_s2, i_o = _align_latest(sensors.seq, op.seq)
        keep = np.isin(i_s2, i_s)  # ticks with a desired too
        i_s2, i_o = i_s2[keep], i_o[keep]
        i_d2 = i_d[np.searchsorted(i_s, i_s2)]
        tw = op.field(f"twist.{hand}")[i_o]
        t = sensors.t[i_s2]
        mask = _hold_mask(tw, t, hold_settle_s)
        if mask.any():
            fid = robot.contact(hand).frame_id
            qm = q_meas[i_s2][mask]
            qd = desired.field("q_d")[i_d2][mask]
            e = np.linalg.norm(_fk_positions(robot, qm, fid) - _fk_positions(robot, qd, fid), axis=1)
            hold_s = float(mask.sum() * (np.median(np.diff(t)) if len(t) > 1 else 0.0))
            hand_err = float(np.max(e)) if hold_s >= min_hold_s else float("nan")

    en = desired.field("enabled")
    switches = []
    names = list(robot.contacts)
    for i in np.flatnonzero(np.any(en[1:] != en[:-1], axis=1)) + 1:
        for j in np.flatnonzero(en[i] != en[i - 1]):
            switches.append(f"{names[j]} {'on' if en[i, j] > 0.5 else 'off'} at {desired.t[i]:.2f} s")
    n_refused = int(desired.field("n_refused")[-1, 0]) if len(desired) else 0
    wall = float((sensors.t_wall_ns[-1] - sensors.t_wall_ns[0]) * 1e-9) if len(sensors) > 1 else 0.0
    sim = float(sensors.t[-1] - sensors.t[0]) if len(sensors) > 1 else 0.0
    return {
        "fell": fell,
        "pelvis_min_height_m": pelvis_min,
        f"{hand}_max_error_m": hand_err,
        f"{hand}_hold_duration_s": hold_s,
        "foot_fz_tracking_rmse_n": rmse,
        "foot_fz_tracking_rmse_ratio_of_weight": rmse / robot.weight,
        "robot_weight_n": robot.weight,
        "ticks": int(len(sensors)),
        "sim_time_s": sim,
        "wall_time_s": wall,
        "realtime_factor": sim / wall if wall > 0 else float("nan"),
        "retargeting_failures": int(np.sum(desired.field("ok")[:, 0] < 0.5)),
        "requests_refused": n_refused,
        "contact_switches": switches,
        **tick_timing(sensors.seq, sensors.t_wall_ns),
        **desired_lead(sensors.seq, sensors.t_wall_ns, desired.seq, desired.t_wall_ns),
        **realtime_metrics(_timing_rows(rec, driver)),
    }


def json_safe(s):
    """The summary with every NaN, at any depth, replaced by None (JSON ``null``: NaN is not valid JSON)."""
    if isinstance(s, float):
        return None if s != s else s
    if isinstance(s, dict):
        return {k: json_safe(v) for k, v in s.items()}
    if isinstance(s, (list, tuple)):
        return [json_safe(v) for v in s]
    return s


def format_summary(s: dict, title: str = "contactflow run summary") -> str:
    """A one-screen text table of a summary dict."""
    lines = [title, "-" * len(title)]
    for k, v in s.items():
        if v is None or (isinstance(v, float) and v != v):
            v = "n/a (no hold of 0.5 s or more in this run)" if "hand" in k else "n/a"
        elif isinstance(v, float):
            v = f"{v:.4g}"
        elif isinstance(v, list):
            v = ", ".join(map(str, v)) if v else "none"
        lines.append(f"{k:40s} {v}")
    return "\n".join(lines)


def recompute_command(run_dir) -> str:
    """The command that (re)computes a run's summary: ``contactflow rec summary <run_dir>``."""
    return f"contactflow rec summary {run_dir}"


#: Why a run without any recorded message has no summary (the recorder's manifest entry, ``rec summary``'s error).
NO_MESSAGE_REASON = "no message was recorded: the run was stopped, or its nodes ended, before any of them sent one"


def recorded_nothing(manifest: dict) -> bool:
    """Whether a run's manifest counts no recorded message in any stream (a graph stopped in its first second):
    such a run has no summary to compute (:data:`NO_MESSAGE_REASON`)."""
    return not any(int(st.get("messages", 0) or 0) for st in (manifest.get("streams") or {}).values())


def run_summary(run_dir, kind: str | None = None, robot=None) -> tuple[dict, str]:
    """The summary of a recorded run, as the recorder computes it at the end, and its printed text.

    Args:
        run_dir: the run directory.
        kind: ``seiko`` (:func:`seiko_summary`) or ``g1`` (:func:`contactflow.lac.summary.g1_summary`);
            None: the manifest's ``summary_kind`` (the recorder's ``--summary``).
        robot: a :class:`contactflow.robot.Robot` (the recorder's, already loaded), a robot name, or
            None: the manifest's ``robot``.

    Returns:
        (summary dict with the recording's losses from the manifest: ``recording_gaps``,
        ``recording_gaps_by_stream``, ``recording_lost_batches``; the formatted text).

    Raises:
        RecordingError: the run cannot be read, no summary kind is given nor recorded, or no message was
            recorded (:func:`recorded_nothing`).
        ConfigError: an unknown robot.
    """
    from pathlib import Path

    from contactflow.recording.store import read_recording
    from contactflow.robot import load_robot

    run_dir = Path(run_dir)
    rec = read_recording(run_dir)
    m = rec.manifest
    if recorded_nothing(m):
        raise RecordingError(f"{run_dir}: {NO_MESSAGE_REASON}; there is no summary to compute")
    kind = kind or m.get("summary_kind")
    if kind not in SUMMARY_KINDS:
        raise RecordingError(f"{run_dir / 'manifest.json'}: summary kind {kind!r}, expected one of {list(SUMMARY_KINDS)} "
                             f"(pass --kind; the recorder records its --summary as summary_kind)")
    robot = robot or m.get("robot")
    if robot is None or robot == "":
        raise RecordingError(f"{run_dir / 'manifest.json'}: no robot recorded (pass --robot)")
    if kind == "seiko":
        compute, fmt, title = seiko_summary, format_summary, f"SEIKO run {run_dir.name}"
    else:
        from contactflow.lac.summary import format_g1_summary as fmt, g1_summary as compute

        title = f"G1 run {run_dir.name}"
    summary = compute(rec, load_robot(robot) if isinstance(robot, str) else robot)
    gaps = {name: int(e.get("missing_seq", 0) or 0) + int(e.get("missing_before_first", 0) or 0)
            for name, e in m.get("streams", {}).items()}
    gaps = {k: v for k, v in gaps.items() if v}
    summary["recording_gaps"] = int(sum(gaps.values()))
    summary["recording_gaps_by_stream"] = gaps
    summary["recording_lost_batches"] = int(m.get("recording_lost_batches", 0) or 0)
    return summary, fmt(summary, title)


def write_run_summary(run_dir, summary: dict):
    """Write ``summary.json`` into the run directory (JSON-safe: NaN as null); returns its path."""
    import json
    from pathlib import Path

    from contactflow.paths import write_text_atomic

    return write_text_atomic(Path(run_dir) / "summary.json", json.dumps(json_safe(summary), indent=2))
