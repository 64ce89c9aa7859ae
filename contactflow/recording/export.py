"""Looking at recordings: per-stream statistics, export to Parquet / CSV / MCAP, signals and plots.

Used by the ``contactflow rec`` and ``contactflow plot`` commands; plain functions on a
:class:`~contactflow.recording.store.Recording`, no dora.

Signals are named ``<node>.<output>:<field>[<index>]``, e.g. ``mujoco_driver.sensors:wrench.left_foot[2]``
(the vertical force of the left sole); without ``[<index>]`` every component of the field is
selected, and a bare ``<node>.<output>[<index>]`` indexes the flat message.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import pyarrow as pa

from contactflow.recording.store import Recording, RecordingError, Stream, refuse_damaged

__all__ = [
    "StreamInfo", "stream_info", "run_info", "stream_table", "export_run", "Signal", "parse_signal",
    "signal_values", "plot_signals", "EXPORT_FORMATS",
]

EXPORT_FORMATS = ("parquet", "csv", "mcap")


@dataclasses.dataclass(frozen=True)
class StreamInfo:
    """Statistics of one stream.

    Attributes:
        name: ``<node>.<output>``.
        messages: number of messages.
        size: float64 values per message.
        seq_first, seq_last: first and last sequence numbers (-1 when empty).
        duration_s: recorded time span ``t[-1] - t[0]`` [s].
        rate_hz: messages per recorded second.
        wall_rate_hz: messages per second of receive wall time.
        missing_seq: number of sequence numbers missing between the first and the last.
        gaps: up to 10 (first missing seq, last missing seq) ranges.
        time_gaps: number of steps of the recorded time longer than 1.5 x the median step.
        max_dt_s: longest step of the recorded time [s].
        truncated: the file was damaged (cut short by a crash, no end-of-stream marker...) and its
            complete prefix recovered.
        contract: the port contract name, if recorded.
        fields: [(field, size)].
        damage: the damage (:class:`~contactflow.recording.store.StreamDamage` as a dict: reason,
            byte offset, last good seq and time) or None.
    """

    name: str
    messages: int
    size: int
    seq_first: int
    seq_last: int
    duration_s: float
    rate_hz: float
    wall_rate_hz: float
    missing_seq: int
    gaps: tuple
    time_gaps: int
    max_dt_s: float
    truncated: bool
    contract: str
    fields: tuple
    damage: dict | None = None


def stream_info(st: Stream) -> StreamInfo:
    """Compute :class:`StreamInfo` of a loaded stream."""
    n = len(st)
    gaps, missing = [], 0
    if n > 1:
        d = np.diff(st.seq)
        for i in np.flatnonzero(d > 1):
            missing += int(d[i] - 1)
            if len(gaps) < 10:
                gaps.append((int(st.seq[i] + 1), int(st.seq[i + 1] - 1)))
    t = st.t[np.isfinite(st.t)]
    dur = float(t[-1] - t[0]) if len(t) > 1 else 0.0
    dts = np.diff(t) if len(t) > 1 else np.zeros(0)
    med = float(np.median(dts)) if len(dts) else 0.0
    wall = (st.t_wall_ns[-1] - st.t_wall_ns[0]) / 1e9 if n > 1 else 0.0
    return StreamInfo(
        name=st.name, messages=n, size=st.values.shape[1] if st.values.ndim == 2 else 0,
        seq_first=int(st.seq[0]) if n else -1, seq_last=int(st.seq[-1]) if n else -1,
        duration_s=dur, rate_hz=(len(t) - 1) / dur if dur > 0 else 0.0,
        wall_rate_hz=(n - 1) / wall if wall > 0 else 0.0, missing_seq=missing, gaps=tuple(gaps),
        time_gaps=int(np.sum(dts > 1.5 * med)) if med > 0 else 0, max_dt_s=float(dts.max()) if len(dts) else 0.0,
        truncated=st.truncated, contract=st.metadata.get("contract", ""), fields=tuple(tuple(f) for f in st.layout),
        damage=dataclasses.asdict(st.damage) if st.damage is not None else None,
    )


def run_info(rec: Recording, progress: Callable[[Iterable], Iterable] = lambda x: x) -> dict:
    """Manifest summary and :class:`StreamInfo` of every readable stream of a run.

    A stream whose file cannot be read at all (cut inside its header, foreign, another version) does
    not stop the others: it is listed under ``unreadable`` with the reason.

    Returns:
        The manifest's keys, ``streams`` (a dict per readable stream, with the manifest's
        ``missing_before_first`` and ``unwritten_messages`` when recorded), ``unreadable``
        ([{name, error}]) and ``lost`` (streams received but never written, a full disk before their
        first batch: [{name, reason, unwritten_messages, ...}], :attr:`Recording.lost`) and
        ``silent_inputs`` (the recorder's inputs no message came on: ``{input id: source}``).
    """
    m = rec.manifest
    streams, unreadable = [], []
    for name in progress(rec.stream_names):
        try:
            streams.append(stream_info(rec.stream(name)))
        except RecordingError as exc:
            unreadable.append({"name": name, "error": str(exc)})
    entries = m.get("streams", {})

    def as_dict(s: StreamInfo) -> dict:
        d = dataclasses.asdict(s)
        for key in ("missing_before_first", "unwritten_messages"):
            d[key] = entries.get(s.name, {}).get(key)
        return d

    return {
        "run": rec.path.name,
        "path": str(rec.path),
        "dataflow": m.get("dataflow", ""),
        "robot": m.get("robot", ""),
        "git_revision": m.get("git_revision", ""),
        "start_time_utc": m.get("start_time_utc", ""),
        "end_time_utc": m.get("end_time_utc", ""),
        "complete": bool(m.get("complete", False)),
        "duration_s": max((s.duration_s for s in streams), default=0.0),
        "format_version": m.get("format_version"),
        "migrated_from": m.get("migrated_from"),
        "write_failure": m.get("write_failure"),
        "streams": [as_dict(s) for s in streams],
        "unreadable": unreadable,
        "lost": [{"name": n, **e} for n, e in sorted(rec.lost.items())],
        # the recorder's inputs that never received a message: {input id: source node/output}
        "silent_inputs": dict(m.get("silent_inputs") or {}),
    }


def _column_names(st: Stream) -> list[str]:
    names = []
    layout = st.layout or [("value", st.values.shape[1])]
    for f, size in layout:
        names += [f] if size == 1 else [f"{f}[{i}]" for i in range(size)]
    return names


def stream_table(st: Stream) -> pa.Table:
    """A flat table: ``seq, t, t_wall_ns, finished`` and one float64 column per value (``field[i]``)."""
    cols = {"seq": st.seq, "t": st.t, "t_wall_ns": st.t_wall_ns, "finished": st.finished}
    for j, name in enumerate(_column_names(st)):
        cols[name] = st.values[:, j]
    return pa.table(cols, metadata={k: v for k, v in st.metadata.items() if k != "config"})


def _fields_json(st: Stream, row: np.ndarray) -> dict:
    out, i = {}, 0
    for f, size in st.layout or [("value", len(row))]:
        v = row[i:i + size]
        out[f] = float(v[0]) if size == 1 else [float(x) for x in v]
        i += size
    return out


def _json_schema(st: Stream) -> dict:
    props = {}
    for f, size in st.layout or [("value", st.values.shape[1])]:
        props[f] = {"type": "number"} if size == 1 else {"type": "array", "items": {"type": "number"}, "minItems": size, "maxItems": size}
    return {
        "type": "object",
        "title": st.metadata.get("contract", st.name),
        "properties": {
            "timestamp": {"type": "object", "properties": {"sec": {"type": "integer"}, "nsec": {"type": "integer"}}},
            "seq": {"type": "integer"},
            "t": {"type": "number"},
            "finished": {"type": "boolean"},
            "fields": {"type": "object", "properties": props},
        },
    }


def export_run(rec: Recording, fmt: str, out_dir: str | Path, streams: list[str] | None = None,
               progress: Callable[[Iterable], Iterable] = lambda x: x, *, allow_truncated: bool = False,
               warn: Callable[[str], None] = lambda line: None) -> list[Path]:
    """Export streams of a run.

    Args:
        rec: the run.
        fmt: ``parquet`` or ``csv`` (one file per stream, :func:`stream_table` columns) or ``mcap``
            (one ``<run>.mcap`` file; one channel per stream on topic ``/<node>/<output>``, JSON
            messages with a JSON schema, which Foxglove opens; log time = receive wall time).
        out_dir: created if needed.
        streams: stream names (default: all).
        progress: wraps iterables with a progress bar (e.g. tqdm).
        allow_truncated: export the salvaged prefix of a damaged stream (``warn`` gets its line).
        warn: called with one line per damaged stream exported.

    Returns:
        The written files.

    Raises:
        RecordingError: unknown format or stream, unreadable stream, or a damaged (truncated) one
            without ``allow_truncated`` (naming the stream, byte offset and last good time).
    """
    if fmt not in EXPORT_FORMATS:
        raise RecordingError(f"unknown export format {fmt!r}; expected one of {list(EXPORT_FORMATS)}")
    names = streams or rec.stream_names
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    loaded = [rec.stream(n) for n in names]
    for line in refuse_damaged(loaded, allow_truncated):
        warn(line)
    written: list[Path] = []
    if fmt in ("parquet", "csv"):
        for st in progress(loaded):
            table = stream_table(st)
            path = out_dir / f"{st.name}.{fmt}"
            if fmt == "parquet":
                import pyarrow.parquet as pq

                pq.write_table(table, path)
            else:
                import pyarrow.csv as pcsv

                pcsv.write_csv(table, path)
            written.append(path)
        return written
    from mcap.writer import Writer

    path = out_dir / f"{rec.path.name}.mcap"
    total = sum(len(st) for st in loaded)
    with open(path, "wb") as f:
        w = Writer(f)
        w.start(profile="", library="contactflow")
        channels = {}
        for st in loaded:
            sid = w.register_schema(name=st.metadata.get("contract", st.name), encoding="jsonschema",
                                    data=json.dumps(_json_schema(st)).encode())
            topic = "/" + st.name.replace(".", "/", 1)
            channels[st.name] = w.register_channel(topic=topic, message_encoding="json", schema_id=sid,
                                                   metadata={"layout": json.dumps(st.layout)})
        # interleave the streams by receive time, as Foxglove expects log-time order
        order = sorted(((int(st.t_wall_ns[i]), k, i) for k, st in enumerate(loaded) for i in range(len(st))))
        for t_ns, k, i in progress(order) if total else []:
            st = loaded[k]
            msg = {
                "timestamp": {"sec": t_ns // 1_000_000_000, "nsec": t_ns % 1_000_000_000},
                "seq": int(st.seq[i]), "t": float(st.t[i]), "finished": bool(st.finished[i]),
                "fields": _fields_json(st, st.values[i]),
            }
            w.add_message(channel_id=channels[st.name], log_time=t_ns, publish_time=t_ns, sequence=int(st.seq[i]) & 0xFFFFFFFF,
                          data=json.dumps(msg).encode())
        w.finish()
    written.append(path)
    return written


@dataclasses.dataclass(frozen=True)
class Signal:
    """A selected signal: stream, field (or None for the flat message) and component index (or None)."""

    text: str
    stream: str
    field: str | None
    index: int | None


_SIGNAL_RE = re.compile(r"^(?P<stream>[^:\[\]]+?)(?::(?P<field>[^\[\]]+))?(?:\[(?P<index>\d+)\])?$")


def parse_signal(text: str) -> Signal:
    """Parse ``node.output[:field][[index]]``.

    Raises:
        RecordingError: malformed text, with the expected form.
    """
    m = _SIGNAL_RE.match(text.strip())
    if not m or "." not in m.group("stream"):
        raise RecordingError(f"signal {text!r}: expected <node>.<output>[:<field>][[<index>]], "
                             f"e.g. mujoco_driver.sensors:wrench.left_foot[2]")
    idx = m.group("index")
    return Signal(text.strip(), m.group("stream"), m.group("field"), int(idx) if idx is not None else None)


def signal_values(rec: Recording, sig: Signal) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Values of a signal.

    Returns:
        ``t`` (N,) recorded time [s], ``values`` (N, k), and k labels.

    Raises:
        RecordingError: unknown stream, field or index, naming the valid ones.
    """
    st = rec.stream(sig.stream)
    if sig.field is None:
        vals, base = st.values, sig.stream
    else:
        try:
            vals = st.field(sig.field)
        except KeyError:
            raise RecordingError(f"signal {sig.text!r}: stream {sig.stream!r} has no field {sig.field!r}; "
                                 f"fields: {[f for f, _ in st.layout]}") from None
        base = f"{sig.stream}:{sig.field}"
    if sig.index is not None:
        if sig.index >= vals.shape[1]:
            raise RecordingError(f"signal {sig.text!r}: index {sig.index} out of range (size {vals.shape[1]})")
        return st.t, vals[:, sig.index:sig.index + 1], [f"{base}[{sig.index}]"]
    labels = [base] if vals.shape[1] == 1 else [f"{base}[{i}]" for i in range(vals.shape[1])]
    return st.t, vals, labels


def plot_signals(rec: Recording, signals: list[str], out: str | Path, *, title: str | None = None,
                 separate: bool = False, allow_truncated: bool = False,
                 warn: Callable[[str], None] = lambda line: None) -> Path:
    """Plot signals against recorded time into a PNG (matplotlib, no display needed).

    Args:
        rec: the run.
        signals: signal names (see the module docstring).
        out: PNG path.
        title: figure title (default: the run name).
        separate: one subplot per signal instead of one shared axis.
        allow_truncated: plot the salvaged prefix of a damaged stream (``warn`` gets its line).
        warn: called with one line per damaged stream plotted.

    Returns:
        The PNG path.

    Raises:
        RecordingError: a bad signal name, or a damaged (truncated) stream without ``allow_truncated``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    parsed = [parse_signal(s) for s in signals]
    data = [signal_values(rec, s) for s in parsed]
    used = {s.stream: rec.stream(s.stream) for s in parsed}
    for line in refuse_damaged(used.values(), allow_truncated):
        warn(line)
    n_ax = len(data) if separate else 1
    fig, axes = plt.subplots(n_ax, 1, figsize=(9, 2.2 + 2.0 * n_ax), sharex=True, squeeze=False)
    for k, (t, vals, labels) in enumerate(data):
        ax = axes[k if separate else 0, 0]
        for j, label in enumerate(labels):
            ax.plot(t, vals[:, j], label=label, lw=1.0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    axes[-1, 0].set_xlabel("t [s]")
    fig.suptitle(title or rec.path.name, fontsize=10)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
