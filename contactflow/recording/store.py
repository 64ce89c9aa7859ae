"""Recordings: one directory per run, one Arrow IPC *stream* file per recorded stream.

Layout of ``recordings/<run>/``::

    manifest.json              dataflow, robot, resolved node configs, git revision, start time, streams
    <node>.<output>.arrows     Arrow IPC stream: seq int64, t float64, t_wall_ns int64,
                               finished bool, value fixed_size_list<float64>[N]
    summary.json               (pipelines that compute one)

The stream format is used rather than the file format because it has no footer: a file cut short
by a crash stays readable up to its last complete record batch. The writer flushes at least every
``flush_period_s`` (0.1 s by default here; the recorder node uses 0.05 s), so a killed recorder loses at most that much;
the operating system is asked to put the bytes on disk (``fsync``) every ``fsync_period_s`` (1 s) and at close,
which bounds what a power loss or kernel crash can take.
The field layout of ``value`` (names and sizes, see :mod:`contactflow.contracts.messages`) is stored in the
schema metadata and in the manifest.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pyarrow as pa

from contactflow.errors import RecordingError

__all__ = [
    "recorded_scenario",
    "StreamWriter", "RecordingWriter", "Stream", "Recording", "read_recording", "git_revision", "RecordingError",
    "recordings_root", "resolve_run", "list_runs", "STREAM_COLUMNS", "pack_log", "unpack_log", "LogBlock",
]

#: The columns of every contactflow stream file, in order.
STREAM_COLUMNS = ("seq", "t", "t_wall_ns", "finished", "value")

ARROW_STREAM_MAGIC = b"\xff\xff\xff\xff"
ARROW_FILE_MAGIC = b"ARROW1"


def git_revision(path: Path) -> str:
    """``git describe --always --dirty`` of the checkout holding ``path``, or ``"unknown"``."""
    try:
        out = subprocess.run(
            ["git", "-C", str(path), "describe", "--always", "--dirty", "--abbrev=12"],
            capture_output=True, text=True, timeout=5,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


class StreamWriter:
    """Buffered writer of one stream (flat float64 messages of fixed size).

    Args:
        path: output ``.arrows`` file.
        size: values per message.
        metadata: str -> str schema metadata (source, contract, layout...).
        flush_period_s: write buffered rows to the file (operating-system cache) at least this
            often [s]; a killed process loses at most this much.
        fsync_period_s: also ``fsync`` the file at least this often [s] (and at close).
    """

    def __init__(self, path: Path, size: int, metadata: dict[str, str], flush_period_s: float = 0.1,
                 fsync_period_s: float = 1.0):
        self.path = Path(path)
        self.size = int(size)
        self.schema = pa.schema(
            [
                ("seq", pa.int64()),
                ("t", pa.float64()),
                ("t_wall_ns", pa.int64()),
                ("finished", pa.bool_()),
                ("value", pa.list_(pa.float64(), self.size)),
            ],
            metadata={k: str(v) for k, v in metadata.items()},
        )
        self._f = open(self.path, "wb")
        self._w = pa.ipc.new_stream(self._f, self.schema)
        self._rows: list[tuple[int, float, int, bool, np.ndarray]] = []
        self._last_flush = self._last_fsync = time.monotonic()
        self.flush_period_s = flush_period_s
        self.fsync_period_s = fsync_period_s
        self.count = 0
        self.last_seq: int | None = None
        self.missing = 0  # messages skipped in seq (a lost message, or a producer that skipped ticks)

    def append(self, seq: int, t: float, values: np.ndarray, finished: bool = False, t_wall_ns: int | None = None):
        v = np.asarray(values, dtype=np.float64).reshape(-1)
        if v.size != self.size:
            raise RecordingError(f"{self.path.name}: message of {v.size} values, expected {self.size}")
        seq = int(seq)
        if self.last_seq is not None and seq > self.last_seq + 1:
            self.missing += seq - self.last_seq - 1
        self.last_seq = seq if self.last_seq is None else max(seq, self.last_seq)
        self._rows.append((seq, float(t), int(t_wall_ns if t_wall_ns is not None else time.time_ns()), bool(finished), v))
        self.count += 1
        if time.monotonic() - self._last_flush >= self.flush_period_s:
            self.flush()

    def append_block(self, seq: np.ndarray, t: np.ndarray, values: np.ndarray, finished: np.ndarray,
                     t_wall_ns: np.ndarray) -> None:
        """Append ``n`` messages at once (the rows of a log batch, :func:`unpack_log`).

        Args:
            seq: (n,) int tick indices; t: (n,) times [s]; values: (n, size); finished: (n,) bool;
            t_wall_ns: (n,) int wall-clock times [ns].

        Raises:
            RecordingError: ``values`` has the wrong number of columns.
        """
        values = np.asarray(values, dtype=np.float64)
        seq = np.asarray(seq, dtype=np.int64).reshape(-1)
        if values.ndim != 2 or values.shape[1] != self.size or values.shape[0] != seq.size:
            raise RecordingError(f"{self.path.name}: block of shape {values.shape}, expected ({seq.size}, {self.size})")
        if seq.size == 0:
            return
        prev = seq[0] - 1 if self.last_seq is None else self.last_seq
        run_max = np.maximum.accumulate(np.concatenate([[prev], seq]))  # as append(): gaps above the highest seq
        d = seq - run_max[:-1]
        self.missing += int(np.sum(d[d > 1] - 1))
        self.last_seq = int(run_max[-1])
        self._flush_rows()
        batch = pa.record_batch(
            [
                pa.array(seq, pa.int64()),
                pa.array(np.asarray(t, dtype=np.float64), pa.float64()),
                pa.array(np.asarray(t_wall_ns, dtype=np.int64), pa.int64()),
                pa.array(np.asarray(finished, dtype=bool), pa.bool_()),
                pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1), type=pa.float64()), self.size),
            ],
            schema=self.schema,
        )
        self._w.write_batch(batch)
        self.count += int(seq.size)
        if time.monotonic() - self._last_flush >= self.flush_period_s:
            self.flush()

    def _flush_rows(self):
        if self._rows:
            seq, t, tw, fin, vals = zip(*self._rows)
            flat = pa.array(np.concatenate(vals), type=pa.float64())
            batch = pa.record_batch(
                [
                    pa.array(seq, pa.int64()),
                    pa.array(t, pa.float64()),
                    pa.array(tw, pa.int64()),
                    pa.array(fin, pa.bool_()),
                    pa.FixedSizeListArray.from_arrays(flat, self.size),
                ],
                schema=self.schema,
            )
            self._w.write_batch(batch)
            self._rows.clear()

    def flush(self):
        self._flush_rows()
        self._f.flush()
        now = time.monotonic()
        if now - self._last_fsync >= self.fsync_period_s:
            self._fsync()
            self._last_fsync = now
        self._last_flush = now

    def _fsync(self):
        try:
            os.fsync(self._f.fileno())
        except OSError:
            pass

    def maybe_flush(self):
        if time.monotonic() - self._last_flush >= self.flush_period_s:
            self.flush()

    def close(self):
        self.flush()
        self._w.close()  # end-of-stream marker
        self._f.flush()
        self._fsync()
        self._f.close()


class RecordingWriter:
    """Writes a run directory: streams created lazily, manifest rewritten as streams appear.

    Args:
        run_dir: the run directory (created).
        manifest: initial manifest entries (dataflow, robot, git revision...).
        flush_period_s: see :class:`StreamWriter`.
    """

    def __init__(self, run_dir: Path, manifest: dict[str, Any], flush_period_s: float = 0.1):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.flush_period_s = flush_period_s
        self.manifest = {
            "format": "contactflow-recording/1",
            "start_time_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(),
            **manifest,
            "streams": {},
            "configs": {},
            "complete": False,
        }
        self.streams: dict[str, StreamWriter] = {}
        self.write_manifest()

    def write_manifest(self):
        tmp = self.run_dir / "manifest.json.tmp"
        tmp.write_text(json.dumps(self.manifest, indent=2))
        os.replace(tmp, self.run_dir / "manifest.json")

    def stream(self, name: str, size: int, metadata: dict[str, str]) -> StreamWriter:
        w = self.streams.get(name)
        if w is None:
            w = StreamWriter(self.run_dir / f"{name}.arrows", size, metadata, self.flush_period_s)
            self.streams[name] = w
            entry = {"file": f"{name}.arrows", "size": size}
            for key in ("source", "contract"):
                if key in metadata:
                    entry[key] = metadata[key]
            if "layout" in metadata:
                entry["layout"] = json.loads(metadata["layout"])
            self.manifest["streams"][name] = entry
            if "config" in metadata:
                self.manifest["configs"][metadata.get("source", name).split("/")[0]] = json.loads(metadata["config"])
            self.write_manifest()
        return w

    def flush(self):
        for w in self.streams.values():
            w.maybe_flush()

    def close(self, **extra):
        for name, w in self.streams.items():
            w.close()
            self.manifest["streams"][name]["messages"] = w.count
            self.manifest["streams"][name]["missing_seq"] = w.missing
        self.manifest.update(extra)
        self.manifest["complete"] = True
        self.manifest["end_time_utc"] = _dt.datetime.now(_dt.timezone.utc).isoformat()
        self.write_manifest()


#: Columns before the values in each row of a log batch: seq, t, finished, wall time offset [ns].
_LOG_HEAD = 4


@dataclasses.dataclass
class LogBlock:
    """The messages of one output in a log batch (:func:`unpack_log`).

    Attributes:
        output: the producer's output id.
        head: ``contract``, ``layout`` ([[field, size], ...]) and, in the output's first batch,
            ``config`` (the node's resolved configuration, JSON text).
        seq, t, finished, t_wall_ns: (n,) per message (``t_wall_ns``: the sender's wall clock at send).
        values: (n, size) the message values.
    """

    output: str
    head: dict
    seq: np.ndarray
    t: np.ndarray
    finished: np.ndarray
    t_wall_ns: np.ndarray
    values: np.ndarray


def pack_log(blocks: dict[str, tuple[dict, list[tuple]]], batch: int) -> tuple[np.ndarray, dict]:
    """Pack the kept messages of a node's outputs into one flat message (the node's ``log`` output).

    Args:
        blocks: output id -> (head, rows); head: ``contract``, ``layout`` and optionally ``config``;
            rows: (seq, t, finished, t_wall_ns, values (size,)) per message, all of one size.
        batch: index of this batch (0, 1, ...; the receiver counts lost batches from it).

    Returns:
        (values, metadata): float64 (sum of rows * (4 + size),): per output, per message
        ``[seq, t, finished, t_wall_ns - t0, values...]``; metadata ``seq`` (= batch), ``t`` (the last
        message's), ``log`` (JSON [[output, rows, size, head], ...]), ``log_t0_ns`` (t0, int),
        ``last_seq`` (the highest seq in the batch) and ``log_finished`` (a message carries ``finished``).

    Raises:
        RecordingError: messages of one output with different sizes.
    """
    t0 = min(r[3] for _, rows in blocks.values() for r in rows)
    parts, layout, t_last = [], [], 0.0
    for out, (head, rows) in blocks.items():
        size = int(np.asarray(rows[0][4]).size)
        arr = np.empty((len(rows), _LOG_HEAD + size))
        for i, (seq, t, fin, tw, vec) in enumerate(rows):
            vec = np.asarray(vec, dtype=np.float64).reshape(-1)
            if vec.size != size:
                raise RecordingError(f"log of output {out!r}: messages of {vec.size} and {size} values")
            arr[i, 0], arr[i, 1], arr[i, 2], arr[i, 3] = seq, t, float(fin), tw - t0
            arr[i, _LOG_HEAD:] = vec
            t_last = max(t_last, float(t))
        parts.append(arr.reshape(-1))
        layout.append([out, len(rows), size, head])
    last_seq = max(int(r[0]) for _, rows in blocks.values() for r in rows)
    any_fin = any(bool(r[2]) for _, rows in blocks.values() for r in rows)
    md = {"seq": int(batch), "t": t_last, "finished": False, "log": json.dumps(layout), "log_t0_ns": int(t0),
          "last_seq": last_seq, "log_finished": any_fin}
    return np.concatenate(parts), md


def unpack_log(values: np.ndarray, metadata: dict) -> list[LogBlock]:
    """Unpack a ``log`` message (:func:`pack_log`) into its blocks, one per output.

    Raises:
        RecordingError: metadata without ``log`` / ``log_t0_ns``, or a size that does not match.
    """
    try:
        layout = json.loads(metadata["log"])
        t0 = int(metadata["log_t0_ns"])
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordingError(f"log message without a readable 'log' / 'log_t0_ns' metadata: {exc}") from None
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    need = sum(int(n) * (_LOG_HEAD + int(size)) for _, n, size, _ in layout)
    if need != values.size:
        raise RecordingError(f"log message of {values.size} values, its layout says {need}")
    out, i = [], 0
    for name, n, size, head in layout:
        n, size = int(n), int(size)
        arr = values[i:i + n * (_LOG_HEAD + size)].reshape(n, _LOG_HEAD + size)
        i += arr.size
        out.append(LogBlock(str(name), dict(head), arr[:, 0].astype(np.int64), arr[:, 1].copy(), arr[:, 2] != 0.0,
                            arr[:, 3].astype(np.int64) + t0, arr[:, _LOG_HEAD:]))
    return out


@dataclasses.dataclass
class Stream:
    """One recorded stream.

    Attributes:
        name: ``<node>.<output>``.
        seq: (N,) tick indices.
        t: (N,) times [s].
        t_wall_ns: (N,) receive wall-clock times [ns].
        finished: (N,) finished flags.
        values: (N, size) flat message values.
        layout: [(field, size)] in order, or empty when unknown.
        truncated: True if the file ended inside a record batch (crash) and was recovered.
        metadata: the stream file's schema metadata (``source``, ``contract``, ``layout``,
            ``config``...), str -> str.
    """

    name: str
    seq: np.ndarray
    t: np.ndarray
    t_wall_ns: np.ndarray
    finished: np.ndarray
    values: np.ndarray
    layout: list
    truncated: bool = False
    metadata: dict = dataclasses.field(default_factory=dict)

    def field(self, name: str) -> np.ndarray:
        """(N, size) values of field ``name``; raises KeyError naming the known fields."""
        i = 0
        for fname, size in self.layout:
            if fname == name:
                return self.values[:, i : i + size]
            i += size
        raise KeyError(f"stream {self.name!r} has no field {name!r}; fields: {[f for f, _ in self.layout]}")

    def __len__(self) -> int:
        return len(self.seq)


def _read_stream_file(path: Path) -> tuple[pa.Table, dict, bool]:
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError as exc:
        raise RecordingError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    if len(head) < 8:
        raise RecordingError(f"{path}: truncated before the end of its Arrow header ({len(head)} bytes)")
    if head[:6] == ARROW_FILE_MAGIC:
        raise RecordingError(f"{path}: an Arrow IPC *file*, not a contactflow stream recording")
    if head[:4] != ARROW_STREAM_MAGIC:
        raise RecordingError(f"{path}: not an Arrow IPC stream (bad magic bytes {head[:4]!r})")
    batches = []
    truncated = False
    try:
        reader = pa.ipc.open_stream(str(path))
    except (pa.ArrowInvalid, OSError) as exc:
        raise RecordingError(f"{path}: unreadable Arrow stream header (truncated or corrupt): {exc}") from None
    schema = reader.schema
    while True:
        try:
            batches.append(reader.read_next_batch())
        except StopIteration:
            break
        except (pa.ArrowInvalid, OSError):  # cut short by a crash: keep what was complete
            truncated = True
            break
    names = tuple(schema.names)
    if names != STREAM_COLUMNS or not pa.types.is_fixed_size_list(schema.field("value").type):
        raise RecordingError(
            f"{path}: an Arrow stream but not a contactflow stream recording "
            f"(columns {list(names)}, expected {list(STREAM_COLUMNS)} with a fixed-size list 'value')"
        )
    meta = {k.decode(errors="replace"): v.decode(errors="replace") for k, v in (schema.metadata or {}).items()}
    return pa.Table.from_batches(batches, schema=schema), meta, truncated


@dataclasses.dataclass
class Recording:
    """A run directory opened for reading (:func:`read_recording`)."""

    path: Path
    manifest: dict
    _cache: dict = dataclasses.field(default_factory=dict)

    @property
    def stream_names(self) -> list[str]:
        return sorted(self.manifest.get("streams", {}))

    def stream(self, name: str) -> Stream:
        """Load stream ``name`` (cached). Raises RecordingError naming the known streams."""
        if name in self._cache:
            return self._cache[name]
        entry = self.manifest.get("streams", {}).get(name)
        if entry is None:
            raise RecordingError(f"{self.path}: no stream {name!r}; streams: {self.stream_names}")
        table, meta, truncated = _read_stream_file(self.path / entry["file"])
        layout = entry.get("layout") or json.loads(meta.get("layout", "[]"))
        size = int(entry["size"])
        file_size = table.schema.field("value").type.list_size
        if file_size != size:
            raise RecordingError(
                f"{self.path / entry['file']}: messages of {file_size} values, but the manifest says {size}"
            )
        vals = table.column("value").combine_chunks()
        flat = vals.flatten().to_numpy(zero_copy_only=False) if len(vals) else np.zeros(0)
        s = Stream(
            name=name,
            seq=table.column("seq").to_numpy(),
            t=table.column("t").to_numpy(),
            t_wall_ns=table.column("t_wall_ns").to_numpy(),
            finished=table.column("finished").to_numpy(zero_copy_only=False),
            values=flat.reshape(-1, size),
            layout=[tuple(x) for x in layout],
            truncated=truncated,
            metadata=meta,
        )
        self._cache[name] = s
        return s


def read_recording(path: str | Path) -> Recording:
    """Open a run directory.

    Raises:
        RecordingError: missing directory or manifest, or a manifest that is not JSON.
    """
    path = Path(path)
    if path.is_file():
        raise RecordingError(
            f"{path}: a file, not a recording directory (a run is a directory holding manifest.json "
            f"and one .arrows stream per port)"
        )
    mf = path / "manifest.json"
    if not mf.exists():
        raise RecordingError(f"{path}: not a contactflow recording (no manifest.json)")
    try:
        manifest = json.loads(mf.read_text())
    except json.JSONDecodeError as exc:
        raise RecordingError(f"{mf}: manifest is not valid JSON: {exc}") from None
    if not isinstance(manifest, dict) or "streams" not in manifest:
        raise RecordingError(f"{mf}: not a contactflow manifest (no 'streams')")
    return Recording(path, manifest)


def list_runs(root: str | Path) -> Iterable[Path]:
    """Run directories under ``root`` (those holding a manifest.json), sorted by name, without links."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink() and (p / "manifest.json").exists())


def recordings_root() -> Path:
    """Where runs are written and looked up: ``$CONTACTFLOW_RECORDINGS``, else ``<checkout>/recordings``
    in a source checkout, else ``./recordings`` (:func:`contactflow.paths.default_recordings_dir`)."""
    from contactflow.paths import default_recordings_dir

    return default_recordings_dir()


def resolve_run(run: str | Path, root: str | Path | None = None, *, require_streams: Iterable[str] = (),
                robot: str | None = None, contract_sizes: Mapping[str, int] | None = None) -> Path:
    """Turn a run argument into a run directory.

    Args:
        run: a path to a run directory, a run name under ``root``, or ``latest``: the newest
            *complete* run under ``root`` that holds every stream of ``require_streams`` (runs still
            being written, such as the one a replay dataflow is recording, are skipped).
        root: the recordings directory (default :func:`recordings_root`).
        require_streams: stream names that ``latest`` must hold.
        robot: when given, ``latest`` only considers runs whose manifest names this robot (the
            ``--robot`` of the recording graph, as given), and a run named explicitly that was
            recorded with another robot is refused.
        contract_sizes: contract name -> values per message for the robot: ``latest`` also skips
            runs in which a required stream of one of these contracts has another size (such as a
            run that replayed another robot's sensors).

    Returns:
        The run directory.

    Raises:
        RecordingError: nothing matches, naming where it looked; or the named run's manifest names
            another robot than ``robot`` (the run, its robot and the expected one named).
    """
    root = Path(root) if root is not None else recordings_root()
    run_s = str(run)
    if run_s == "latest":
        need = set(require_streams)
        best = None
        for p in list_runs(root):
            try:
                m = json.loads((p / "manifest.json").read_text())
            except (OSError, json.JSONDecodeError):
                continue
            if not isinstance(m, dict) or not m.get("complete") or not need <= set(m.get("streams", {})):
                continue
            if robot is not None and m.get("robot") != robot:
                continue
            if contract_sizes and any(isinstance(e, dict) and e.get("contract") in contract_sizes
                                      and e.get("size") != contract_sizes[e["contract"]]
                                      for e in (m["streams"][name] for name in need)):
                continue
            key = (str(m.get("start_time_utc", "")), p.name)
            if best is None or key > best[0]:
                best = (key, p)
        if best is None:
            what = (f" holding {sorted(need)}" if need else "") + (f" of robot {robot!r}" if robot is not None else "")
            raise RecordingError(f"no complete recording{what} under {root}")
        return best[1]
    p = Path(run_s)
    if not p.exists() and len(p.parts) == 1 and (root / run_s).exists():
        p = root / run_s
    if not p.exists():
        raise RecordingError(f"no recording {run_s!r} (neither a path nor a run under {root})")
    if robot is not None:
        try:
            recorded = json.loads((p / "manifest.json").read_text()).get("robot")
        except (OSError, json.JSONDecodeError, AttributeError):
            return p  # not a recording: the reader names the problem
        if recorded != robot:
            raise RecordingError(f"recording {p} was made with robot {recorded!r}, expected robot {robot!r}: name a run "
                                 f"of robot {robot!r} (or 'latest', the newest complete one)")
    return p


def recorded_scenario(run: str | Path, node: str, *, robot: str | None = None) -> str:
    """The scenario file that the scenario node ``node`` of a recorded run played.

    Read from the run manifest's ``configs.<node>.scenario`` (the node's resolved config on its
    first message); used by ``--scenario-from-recording`` of the operator and teleop nodes.

    Args:
        run: run directory, name or ``latest`` (:func:`resolve_run`; ``latest`` = the newest complete
            run holding ``<node>.command``, of ``robot`` when given).
        node: the recorded node id (``operator``, ``teleop``).
        robot: only runs of this robot (see :func:`resolve_run`).

    Raises:
        RecordingError: no such run, or its node played no scenario file (a live source).
    """
    run_dir = resolve_run(run, require_streams=[f"{node}.command"], robot=robot)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    scenario = ((manifest.get("configs") or {}).get(node) or {}).get("scenario")
    if not scenario:
        raise RecordingError(f"{run_dir}/manifest.json: configs.{node}.scenario missing (no scenario file was played)")
    return str(scenario)
