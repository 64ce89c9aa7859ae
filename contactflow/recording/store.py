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

Versions: the manifest's ``format`` (``contactflow-recording/<v>``) and ``format_version``, and each stream's
schema metadata ``contactflow_format``, give the format version (:data:`FORMAT_VERSION`). Version 1 is the
layout written before versions were recorded (manifest ``contactflow-recording/1`` or no ``format``, streams
without ``contactflow_format``): the same files, read by migrating the manifest in memory (its streams'
``missing_before_first`` stays unknown). Any other version is refused with a :class:`RecordingError` naming
the file, the version found and the one expected.

Damage: a stream file is read message by message. A file cut inside a message (a writer killed mid-batch),
one without the end-of-stream marker (a writer that never closed it), one with a corrupt batch or bytes
after its end are *salvaged*: every complete batch is read, and :attr:`Stream.damage` gives the byte offset
where the good data ends and the seq / time of the last good message (never a silently shorter clean
stream). A file cut inside its header, a foreign Arrow stream or not Arrow at all is refused
(:class:`RecordingError` naming the file and what was expected).

Lost streams: each stream's header is written when the stream is created (with an empty batch), so a writer
killed before a stream's first rows leaves a readable stream of 0 messages. A stream whose header could not
be written (first seen after the disk was full) has no readable file; the writer removes the partial file and lists the stream under the manifest's ``lost_streams`` (source, contract,
size, layout, ``reason``, ``first_t``, ``unwritten_messages`` and ``first_unwritten_rx_ns``) instead of ``streams``, so the run's other
streams read normally and ``rec info`` names it (:meth:`Recording.lost`).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import errno
import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pyarrow as pa

from contactflow.errors import RecordingError
from contactflow.paths import write_text_atomic

__all__ = [
    "recorded_scenario",
    "run_candidates",
    "StreamWriter", "RecordingWriter", "Stream", "Recording", "read_recording", "git_revision", "RecordingError",
    "recordings_root", "resolve_run", "list_runs", "STREAM_COLUMNS", "pack_log", "unpack_log", "LogBlock",
    "FORMAT_VERSION", "StreamDamage", "check_manifest", "refuse_damaged", "port_table_streams", "WriteFailure",
    "SeqGaps",
]

#: The columns of every contactflow stream file, in order.
STREAM_COLUMNS = ("seq", "t", "t_wall_ns", "finished", "value")

ARROW_STREAM_MAGIC = b"\xff\xff\xff\xff"
ARROW_FILE_MAGIC = b"ARROW1"
#: The end-of-stream marker of an Arrow IPC stream (continuation token, zero length); older writers: 4 zero bytes.
ARROW_EOS = b"\xff\xff\xff\xff\x00\x00\x00\x00"

#: The recording format written by this code: manifest ``format`` = ``contactflow-recording/<version>``.
FORMAT_NAME = "contactflow-recording"
#: Format version written (manifest ``format_version``, stream metadata :data:`STREAM_VERSION_KEY`).
#: 2: versions recorded, ``missing_before_first`` per stream. 1: the layout before (migrated on read).
FORMAT_VERSION = 2
#: Versions read: the current one and those migrated.
READABLE_VERSIONS = (1, 2)
#: Schema-metadata key of a stream file holding its format version.
STREAM_VERSION_KEY = "contactflow_format"

#: The Arrow types of the columns (``value``: fixed-size list of float64, any size).
_COLUMN_TYPES = {"seq": pa.int64(), "t": pa.float64(), "t_wall_ns": pa.int64(), "finished": pa.bool_()}


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


class _ByteBudget:
    """Bytes the stream files of a run may still take (``max_bytes``: the recorder's ``--max-bytes``)."""

    def __init__(self, max_bytes: int | None):
        self.max_bytes = None if max_bytes is None or max_bytes <= 0 else int(max_bytes)
        self.used = 0

    def left(self) -> int | None:
        return None if self.max_bytes is None else max(0, self.max_bytes - self.used)


class _StreamFile:
    """The file under a stream writer: each write goes to the operating system at once (``os.write``,
    so a failed write leaves no buffered bytes behind), counted; a write past the byte budget fails
    as on a full disk (``ENOSPC``) after writing what fits, as a full disk does."""

    closed = False

    def __init__(self, path: Path, budget: _ByteBudget):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.pos = 0
        self.budget = budget
        self._lock = threading.Lock()  # fsync (maybe from the writer's sync thread) vs close

    def write(self, data) -> int:
        mv = memoryview(data).cast("B")
        left = self.budget.left()
        allowed = len(mv) if left is None else min(len(mv), left)
        done = 0
        while done < allowed:
            done += os.write(self.fd, mv[done:allowed])
        self.pos += done
        self.budget.used += done
        if done < len(mv):
            raise OSError(errno.ENOSPC, f"No space left on device (byte limit {self.budget.max_bytes} of the run's "
                                        f"stream files reached)")
        return done

    def flush(self):
        pass

    def tell(self) -> int:
        return self.pos

    def fsync(self):
        with self._lock:
            if self.closed:
                return
            try:
                os.fsync(self.fd)
            except OSError:
                pass

    def truncate(self, size: int):
        """Cut the file back to ``size`` bytes (the end of its last complete batch); frees the budget."""
        try:
            os.ftruncate(self.fd, size)
            self.budget.used -= self.pos - size
            self.pos = size
        except OSError:
            pass

    def close(self):
        with self._lock:
            if not self.closed:
                self.closed = True
                os.close(self.fd)


@dataclasses.dataclass(frozen=True)
class WriteFailure:
    """Why a run's stream files stopped being written (a full disk, or the ``max_bytes`` limit).

    Attributes:
        stream: the stream whose write failed first.
        bytes_written: bytes of the run's stream files on disk (each cut back to its last complete batch).
        max_bytes: the byte limit, or None (a real write error).
        error: the operating system's message.
        t_wall_ns: wall-clock time of the failed write [ns since the epoch] (0: unknown).
    """

    stream: str
    bytes_written: int
    max_bytes: int | None
    error: str
    t_wall_ns: int = 0


class SeqGaps:
    """The messages missing from one stream of ``seq`` numbers: the one rule of "a gap in seq is a loss" (the
    stream writer per message and per log block, the recorder's log batches, the viewer's inputs).

    A seq more than one above the highest seen so far opens a gap (a message lost on the way, or a producer that
    skipped ticks); a seq at or below it (a repeat, one out of order) counts nothing and moves nothing back.

    Args:
        first: the seq the stream starts at: the seqs below the first one received count in
            ``missing_before_first``; None: a stream may start at any seq (nothing counted before it).

    Attributes:
        last: the highest seq received (None before any).
        missing: seqs skipped after the first one received.
        gaps: runs of skipped seqs (each one gap of one or more messages in ``missing``).
        missing_before_first: seqs below the first one received, from ``first`` (0 when ``first`` is None).
    """

    def __init__(self, first: int | None = None):
        self.first = first
        self.last: int | None = None
        self.missing = 0
        self.gaps = 0
        self.missing_before_first = 0

    def add(self, seq: int) -> int:
        """Count one message's ``seq``; returns the messages newly found missing (before the first included)."""
        seq = int(seq)
        if self.last is None:
            self.last = seq
            if self.first is not None and seq > self.first:
                self.missing_before_first = seq - self.first
            return self.missing_before_first
        n = seq - self.last - 1
        if n > 0:
            self.missing += n
            self.gaps += 1
        self.last = max(self.last, seq)
        return max(n, 0)

    def add_block(self, seq: np.ndarray) -> int:
        """Count the ``seq`` of ``n`` messages in arrival order ((n,) ints, vectorised); returns as :meth:`add`."""
        seq = np.asarray(seq, dtype=np.int64).reshape(-1)
        if seq.size == 0:
            return 0
        n0 = 0
        if self.last is None:
            n0, seq = self.add(seq[0]), seq[1:]
        if seq.size == 0:
            return n0
        run_max = np.maximum.accumulate(np.concatenate([[self.last], seq]))  # gaps above the highest seq so far
        d = seq - run_max[:-1]
        n = int(np.sum(d[d > 1] - 1))
        self.missing += n
        self.gaps += int(np.sum(d > 1))
        self.last = int(run_max[-1])
        return n0 + n


class StreamWriter:
    """Buffered writer of one stream (flat float64 messages of fixed size).

    Each record batch reaches the operating system as soon as it is written; a write that fails (a
    full disk, ``ENOSPC``, or the run's byte limit) cuts the file back to its last complete batch,
    closes it (without an end-of-stream marker: readers report it as truncated at that offset) and
    counts every later message in :attr:`unwritten` instead of raising (see :class:`RecordingWriter`).

    Args:
        path: output ``.arrows`` file.
        size: values per message.
        metadata: str -> str schema metadata (source, contract, layout...); the format version
            (:data:`STREAM_VERSION_KEY`) is added.
        flush_period_s: write buffered rows to the file (operating-system cache) at least this
            often [s], of wall time and of the messages' own time ``t`` (a lockstep graph faster than
            real time sends more than this much simulated time per wall period); a killed process
            loses at most about this much.
        fsync_period_s: also ``fsync`` the file at least this often [s] (and at close).
        on_failure: called with the ``OSError`` of a failed write (the :class:`RecordingWriter` stops
            every stream of the run then).
        background_fsync: leave the periodic ``fsync`` to the caller (:meth:`sync`, from a thread: a
            ``fsync`` on a busy disk blocked the writer for 5-230 ms); the one at close stays.

    Attributes:
        count: messages written to the file.
        missing: seq numbers skipped between the messages received.
        missing_before_first: messages known lost before the first one received (set by the recorder).
        unwritten: messages received but not written (after a write failure).
        first_t: time ``t`` of the first message received [s] (None before any).
        first_unwritten_rx_ns: after a failed write, the wall clock [ns] when the writer received the oldest
            message it did not write (None: every message written).
        lost: the write failed before any complete batch: the file held no readable header and was
            removed (the stream is listed under the manifest's ``lost_streams``).
    """

    #: Rows per record batch at most: a backlog (a recorder that starts late) is written in batches of this
    #: size, so what a crash or a full disk takes stays bounded.
    MAX_BATCH_ROWS = 100

    def __init__(self, path: Path, size: int, metadata: dict[str, str], flush_period_s: float = 0.1,
                 fsync_period_s: float = 1.0, *, budget: _ByteBudget | None = None, on_failure=None,
                 background_fsync: bool = False):
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
            metadata={**{k: str(v) for k, v in metadata.items()}, STREAM_VERSION_KEY: str(FORMAT_VERSION)},
        )
        self._f = _StreamFile(self.path, budget or _ByteBudget(None))
        self._w = pa.ipc.new_stream(self._f, self.schema)
        self._rows: list[tuple[int, float, int, bool, np.ndarray]] = []
        self._last_flush = self._last_fsync = time.monotonic()
        self.flush_period_s = flush_period_s
        self.fsync_period_s = fsync_period_s
        self.count = 0
        self.seq_gaps = SeqGaps()  # seqs skipped between the messages received (missing, gaps); what is missing
        # before the first message is the recorder's to judge (it knows the contract message): missing_before_first
        self.missing_before_first = 0
        self.unwritten = 0
        self.good_bytes = 0  # end of the last complete batch in the file
        self.failed: OSError | None = None
        self.first_t: float | None = None
        # the wall clock [ns] when the writer received the oldest message it did not write (a failed write)
        self.first_unwritten_rx_ns: int | None = None
        self._rows_rx_ns = 0  # when the oldest buffered row was received
        self.lost = False
        self._on_failure = on_failure
        self.background_fsync = background_fsync
        # the Arrow header now, with an empty batch (pyarrow writes the schema with the first batch): a
        # writer killed before its first rows leaves a readable stream of 0 messages, not a header-less file
        self._write(pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in self.schema], schema=self.schema))

    @property
    def missing(self) -> int:
        """Messages skipped in seq between those received (a lost message, or a producer that skipped ticks)."""
        return self.seq_gaps.missing

    @property
    def gaps(self) -> int:
        """Runs of skipped seq (each a gap of one or more messages in :attr:`missing`)."""
        return self.seq_gaps.gaps

    def append(self, seq: int, t: float, values: np.ndarray, finished: bool = False, t_wall_ns: int | None = None):
        v = np.asarray(values, dtype=np.float64).reshape(-1)
        if v.size != self.size:
            raise RecordingError(f"{self.path.name}: message of {v.size} values, expected {self.size}")
        seq = int(seq)
        t_wall_ns = int(t_wall_ns if t_wall_ns is not None else time.time_ns())
        if self.first_t is None:
            self.first_t = float(t)
        self.seq_gaps.add(seq)
        if self.failed is not None:
            self.unwritten += 1
            self._unwritten_at(time.time_ns())
            return
        if not self._rows:
            self._rows_rx_ns = time.time_ns()
        self._rows.append((seq, float(t), t_wall_ns, bool(finished), v))
        if (len(self._rows) >= self.MAX_BATCH_ROWS or time.monotonic() - self._last_flush >= self.flush_period_s
                or float(t) - self._rows[0][1] >= self.flush_period_s):  # NaN times: never by this rule
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
        if self.first_t is None:
            self.first_t = float(np.asarray(t, dtype=np.float64).reshape(-1)[0])
        self.seq_gaps.add_block(seq)
        rx_ns = time.time_ns()
        if self.failed is not None:
            self.unwritten += int(seq.size)
            self._unwritten_at(rx_ns)
            return
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
        self._write(batch, rx_ns)
        if time.monotonic() - self._last_flush >= self.flush_period_s:
            self.flush()

    def _unwritten_at(self, rx_ns: int) -> None:
        if self.first_unwritten_rx_ns is None or rx_ns < self.first_unwritten_rx_ns:
            self.first_unwritten_rx_ns = int(rx_ns)

    def _write(self, batch: pa.RecordBatch, rx_ns: int = 0) -> None:
        """Write ``batch`` (its rows received at ``rx_ns``, wall clock [ns], for the loss of a failed write)."""
        if self.failed is not None:
            self.unwritten += batch.num_rows
            if batch.num_rows:
                self._unwritten_at(rx_ns or time.time_ns())
            return
        try:
            self._w.write_batch(batch)
        except OSError as exc:
            self.unwritten += batch.num_rows
            if batch.num_rows:
                self._unwritten_at(rx_ns or time.time_ns())
            self.fail(exc)
            return
        self.count += batch.num_rows
        self.good_bytes = self._f.tell()

    def fail(self, exc: OSError) -> None:
        """Stop writing after a failed write: cut the file back to its last complete batch, close it
        (no end-of-stream marker) and count the rows still buffered as unwritten. A file without a
        complete batch (its Arrow header is written with the first one) could not be read: it is
        removed and the stream marked :attr:`lost`."""
        if self.failed is not None:
            return
        self.failed = exc
        self.unwritten += len(self._rows)
        if self._rows:
            self._unwritten_at(self._rows_rx_ns)
        self._rows.clear()
        self._f.truncate(self.good_bytes)
        self._f.fsync()
        self._f.close()
        if self.good_bytes == 0:
            self.lost = True
            try:
                self.path.unlink()
            except OSError:
                pass
        if self._on_failure is not None:
            self._on_failure(self, exc)

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
            self._rows.clear()
            self._write(batch, self._rows_rx_ns)

    def flush(self):
        self._flush_rows()
        now = time.monotonic()
        if self.failed is None and not self.background_fsync and now - self._last_fsync >= self.fsync_period_s:
            self._f.fsync()
            self._last_fsync = now
        self._last_flush = now

    def sync(self) -> None:
        """``fsync`` the file now (thread-safe against :meth:`close`; nothing after a failure)."""
        if self.failed is None:
            self._f.fsync()

    def maybe_flush(self):
        if time.monotonic() - self._last_flush >= self.flush_period_s:
            self.flush()

    def close(self):
        self.flush()
        if self.failed is not None:
            return
        try:
            self._w.close()  # end-of-stream marker
        except OSError as exc:
            self.fail(exc)
            return
        self.good_bytes = self._f.tell()
        self._f.fsync()
        self._f.close()


class RecordingWriter:
    """Writes a run directory: streams created lazily, manifest rewritten as streams appear.

    A write that fails (``ENOSPC``, any ``OSError``, or ``max_bytes`` reached, which emulates a full
    disk) stops the whole run's writing: every stream file is cut back to its last complete batch and
    closed, :attr:`failure` says where and why (with its wall time ``t_wall_ns``), and later messages are
    counted (``unwritten_messages`` in the manifest, with ``first_unwritten_rx_ns``: when the writer
    received the oldest message it did not write) rather than written; nothing is raised to the caller, who decides (the recorder
    reports it and exits non-zero). A stream with no complete batch at the failure (or first seen
    after it) has no file: it moves from the manifest's ``streams`` to ``lost_streams``, with the reason.

    Args:
        run_dir: the run directory (created).
        manifest: initial manifest entries (dataflow, robot, git revision...).
        flush_period_s: see :class:`StreamWriter`.
        max_bytes: bytes the run's stream files may take (None or 0: no limit); the manifest is not counted.
        background_fsync: ``fsync`` the stream files every ``fsync_period_s`` from a thread of its own
            rather than in the writing thread (the recorder: its event loop never waits on the disk).
        fsync_period_s: see :class:`StreamWriter`.
    """

    def __init__(self, run_dir: Path, manifest: dict[str, Any], flush_period_s: float = 0.1,
                 max_bytes: int | None = None, *, background_fsync: bool = False, fsync_period_s: float = 1.0):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.flush_period_s = flush_period_s
        self.manifest = {
            "format": f"{FORMAT_NAME}/{FORMAT_VERSION}",
            "format_version": FORMAT_VERSION,
            "start_time_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(),
            **manifest,
            "streams": {},
            "configs": {},
            "complete": False,
        }
        self.streams: dict[str, StreamWriter] = {}
        self.budget = _ByteBudget(max_bytes)
        self.failure: WriteFailure | None = None
        self.fsync_period_s = fsync_period_s
        self._sync_stop = threading.Event()
        self._syncer = None
        if background_fsync:
            self._syncer = threading.Thread(target=self._sync_loop, name="recording-fsync", daemon=True)
            self._syncer.start()
        self.write_manifest()

    def _sync_loop(self) -> None:
        while not self._sync_stop.wait(self.fsync_period_s):
            for w in list(self.streams.values()):
                w.sync()

    def write_manifest(self):
        try:
            write_text_atomic(self.run_dir / "manifest.json", json.dumps(self.manifest, indent=2))
        except OSError as exc:
            if self.failure is None:
                raise
            # a full disk: the last manifest written stays; say so in the failure
            self.failure = dataclasses.replace(self.failure, error=f"{self.failure.error}; manifest not updated: {exc}")

    def _failed(self, stream: StreamWriter, exc: OSError) -> None:
        if self.failure is not None:
            return
        name = next((n for n, w in self.streams.items() if w is stream), stream.path.stem)
        self.failure = WriteFailure(name, 0, self.budget.max_bytes, exc.strerror or str(exc), time.time_ns())
        for w in self.streams.values():
            w.fail(exc)
        self.failure = dataclasses.replace(self.failure, bytes_written=sum(w.good_bytes for w in self.streams.values()))
        self._move_lost()

    def _move_lost(self) -> None:
        """Move the streams left without a file by the failure from ``streams`` to ``lost_streams``."""
        moved = False
        for name, w in self.streams.items():
            if w.lost and name in self.manifest["streams"]:
                entry = self.manifest["streams"].pop(name)
                entry.pop("file", None)
                entry["reason"] = (f"not recorded: the run's stream files stopped being written ({self.failure.error}, "
                                   f"first at stream {self.failure.stream}) before a complete batch of this stream was "
                                   f"written; its partial file was removed")
                self.manifest.setdefault("lost_streams", {})[name] = entry
                moved = True
        if moved:
            self.write_manifest()

    def stream(self, name: str, size: int, metadata: dict[str, str]) -> StreamWriter:
        w = self.streams.get(name)
        if w is None:
            w = StreamWriter(self.run_dir / f"{name}.arrows", size, metadata, self.flush_period_s, self.fsync_period_s,
                             budget=self.budget, on_failure=self._failed, background_fsync=self._syncer is not None)
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
            if self.failure is not None:  # first seen after the disk was full: no file, a lost stream
                w.fail(OSError(errno.ENOSPC, self.failure.error))
                self._move_lost()
            self.write_manifest()
        return w

    def flush(self):
        for w in self.streams.values():
            w.maybe_flush()

    def close(self, **extra):
        if self._syncer is not None:
            self._sync_stop.set()
            self._syncer.join(timeout=5.0)
        for name, w in self.streams.items():
            w.close()
        for name, w in self.streams.items():
            entry = self.manifest["streams"].get(name)
            if entry is None:  # a lost stream (no file)
                lost = self.manifest["lost_streams"][name]
                lost["first_t"] = w.first_t
                lost["unwritten_messages"] = w.unwritten
                lost["first_unwritten_rx_ns"] = w.first_unwritten_rx_ns
                lost["missing_seq"] = w.missing
                continue
            entry["messages"] = w.count
            entry["missing_seq"] = w.missing
            entry["missing_before_first"] = w.missing_before_first
            if w.unwritten:
                entry["unwritten_messages"] = w.unwritten
                entry["first_unwritten_rx_ns"] = w.first_unwritten_rx_ns
        self.manifest.update(extra)
        if self.failure is not None:
            self.manifest["write_failure"] = dataclasses.asdict(self.failure)
            self.manifest["unwritten_messages"] = sum(w.unwritten for w in self.streams.values())
        # complete: every message the run sent is in the files; a failed write (full disk) is a partial run
        self.manifest["complete"] = self.failure is None
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


@dataclasses.dataclass(frozen=True)
class StreamDamage:
    """How a stream file was found damaged, and what of it was salvaged.

    Attributes:
        file: the stream file.
        reason: ``cut inside a message`` (a writer killed mid-batch), ``no end-of-stream marker`` (a
            writer that never closed the file: killed between batches, a full disk, or still writing),
            ``corrupt record batch``, or ``bytes after the end-of-stream marker``.
        offset: byte offset where the good data ends (the end of the last complete batch) [bytes].
        file_size: the file's size [bytes].
        messages: complete messages salvaged.
        last_seq: seq of the last good message (None when none).
        last_t: recorded time of the last good message [s] (NaN when none).
    """

    file: str
    reason: str
    offset: int
    file_size: int
    messages: int
    last_seq: int | None
    last_t: float

    def describe(self, stream: str) -> str:
        """One line naming the stream, the offset and the time of the last good message."""
        last = (f"the last at seq {self.last_seq}, t = {self.last_t:.6g} s" if self.last_seq is not None
                else "no message before it")
        return (f"stream {stream} ({self.file}): truncated at byte {self.offset} of {self.file_size} ({self.reason}); "
                f"{self.messages} complete message(s) salvaged, {last}")


@dataclasses.dataclass
class Stream:
    """One recorded stream.

    Attributes:
        name: ``<node>.<output>``.
        seq: (N,) tick indices.
        t: (N,) times [s].
        t_wall_ns: (N,) wall-clock times [ns]: for a stream that came in a node's log batch (``pack_log``), the
            sender's when it sent the message; for one the recorder took directly, the recorder's at receipt.
        finished: (N,) finished flags.
        values: (N, size) flat message values.
        layout: [(field, size)] in order, or empty when unknown.
        truncated: True if the file is damaged (see ``damage``) and its complete prefix was salvaged.
        metadata: the stream file's schema metadata (``source``, ``contract``, ``layout``,
            ``config``...), str -> str.
        damage: where and why the file was found damaged (None: a clean file with its end-of-stream marker).
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
    damage: StreamDamage | None = None

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


def refuse_damaged(streams: Iterable[Stream], allow: bool, flag: str = "--allow-truncated") -> list[str]:
    """Refuse damaged streams unless ``allow``; the one-line warnings otherwise.

    Args:
        streams: the streams a command is about to use.
        allow: use the salvaged prefix of a damaged stream (the user passed ``flag``).
        flag: the option that allows it, named in the refusal.

    Returns:
        One line per damaged stream (:meth:`StreamDamage.describe`), to show the user.

    Raises:
        RecordingError: a damaged stream and not ``allow`` (its line, and ``flag``).
    """
    lines = [st.damage.describe(st.name) if st.damage is not None else f"stream {st.name}: truncated"
             for st in streams if st.truncated]
    if lines and not allow:
        raise RecordingError(f"{lines[0]}; pass {flag} to use the complete messages"
                             + (f" ({len(lines) - 1} more truncated stream(s))" if len(lines) > 1 else ""))
    return lines


def _check_schema(path: Path, schema: pa.Schema) -> None:
    try:
        names = tuple(schema.names)
    except UnicodeDecodeError:
        raise RecordingError(f"{path}: an Arrow stream but not a contactflow stream recording (column names that "
                             f"are not UTF-8; expected {list(STREAM_COLUMNS)})") from None
    ok = names == STREAM_COLUMNS and all(schema.field(c).type == ty for c, ty in _COLUMN_TYPES.items())
    if ok:
        vt = schema.field("value").type
        ok = pa.types.is_fixed_size_list(vt) and vt.value_type == pa.float64()
    if not ok:
        raise RecordingError(
            f"{path}: an Arrow stream but not a contactflow stream recording "
            f"(columns {list(names)}, expected {list(STREAM_COLUMNS)} with a fixed-size list 'value')"
        )


def _stream_version(path: Path, meta: dict) -> int:
    raw = meta.get(STREAM_VERSION_KEY)
    if raw is None:
        return 1  # written before versions were recorded
    try:
        version = int(raw)
    except ValueError:
        version = None
    if version not in READABLE_VERSIONS:
        raise RecordingError(f"{path}: stream format version {raw!r}, expected {FORMAT_VERSION} (this contactflow reads "
                             f"versions {list(READABLE_VERSIONS)})")
    return version


#: Bytes read per call when a stream file is loaded [B]: between two calls Python runs its signal handlers,
#: so a SIGTERM or an alarm (the recorder's summary at a dataflow's stop, nodes/recorder.py) is honoured
#: within one chunk's read, not after a whole multi-GB file (an hour-long run: 2-6 GB per stream).
READ_CHUNK_BYTES = 32 << 20


def _read_file(path: Path) -> memoryview:
    """The whole file (bytes, as a memoryview), read ``READ_CHUNK_BYTES`` at a time into an uninitialised
    buffer (no zero-filling pass over a multi-GB file): signals are handled between chunks.

    Raises:
        OSError: the file cannot be opened or read.
    """
    with open(path, "rb", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size
        buf = np.empty(size, np.uint8)
        view = memoryview(buf)
        n = 0
        while n < size:
            got = f.readinto(view[n : min(size, n + READ_CHUNK_BYTES)])
            if not got:  # cut while being read (a writer's file truncated under us): what was there
                break
            n += got
    return view[:n]


def read_stream_file(path: Path) -> tuple[pa.Table, dict, StreamDamage | None]:
    """Read a stream file message by message, salvaging the complete batches of a damaged one.

    Raises:
        RecordingError: unreadable, not an Arrow IPC stream, cut inside its header, a foreign
            schema or another format version.
    """
    try:
        data = _read_file(path)  # in memory: no mapping of a file another process may cut
    except OSError as exc:
        raise RecordingError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    if len(data) < 8:
        raise RecordingError(f"{path}: truncated before the end of its Arrow header ({len(data)} bytes)")
    if data[:6] == ARROW_FILE_MAGIC:
        raise RecordingError(f"{path}: an Arrow IPC *file*, not a contactflow stream recording")
    if data[:4] != ARROW_STREAM_MAGIC:
        raise RecordingError(f"{path}: not an Arrow IPC stream (bad magic bytes {bytes(data[:4])!r})")
    src = pa.BufferReader(pa.py_buffer(data))
    try:
        reader = pa.ipc.MessageReader.open_stream(src)
        msg = reader.read_next_message()
        if msg.type != "schema":
            raise RecordingError(f"{path}: no Arrow schema at the start of the stream (a {msg.type} message)")
        schema = pa.ipc.read_schema(msg)
    except StopIteration:
        raise RecordingError(f"{path}: truncated before the end of its Arrow header (an empty stream)") from None
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise RecordingError(f"{path}: unreadable Arrow stream header (truncated or corrupt): {exc}") from None
    _check_schema(path, schema)
    meta = {k.decode(errors="replace"): v.decode(errors="replace") for k, v in (schema.metadata or {}).items()}
    _stream_version(path, meta)
    batches: list[pa.RecordBatch] = []
    reason = None
    end = src.tell()
    while True:
        pos = src.tell()
        try:
            msg = reader.read_next_message()
        except StopIteration:
            stop = src.tell()
            if (stop - pos == 8 and data[pos:stop] == ARROW_EOS) or (stop - pos == 4 and data[pos:stop] == b"\0" * 4):
                end = stop
                if stop != len(data):
                    reason = f"{len(data) - stop} byte(s) after the end-of-stream marker"
            else:
                end = pos
                reason = "no end-of-stream marker"
            break
        except (pa.ArrowException, OSError, ValueError):
            end, reason = pos, "cut inside a message"
            break
        if msg.type != "record batch":
            end, reason = pos, f"corrupt stream (a {msg.type} message after the schema)"
            break
        try:
            batch = pa.ipc.read_record_batch(msg, schema)
            batch.validate(full=True)
            if any(c.null_count for c in batch.columns) or batch.column("value").values.null_count:
                raise ValueError("null values")
        except (pa.ArrowException, OSError, ValueError):
            end, reason = pos, "corrupt record batch"
            break
        batches.append(batch)
    table = pa.Table.from_batches(batches, schema=schema)
    damage = None
    if reason is not None:
        n = table.num_rows
        damage = StreamDamage(path.name, reason, end, len(data), n,
                              int(table.column("seq")[n - 1].as_py()) if n else None,
                              float(table.column("t")[n - 1].as_py()) if n else float("nan"))
    return table, meta, damage


def _layout(where: str, raw: Any, size: int) -> list[tuple[str, int]]:
    """A stream layout checked: [[field, size], ...] whose sizes add up to ``size`` (or empty)."""
    if raw is None:
        return []
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            raise RecordingError(f"{where}: layout is not JSON (expected [[field, size], ...])") from None
    if not isinstance(raw, list) or not all(
            isinstance(x, (list, tuple)) and len(x) == 2 and isinstance(x[0], str) and _is_int(x[1]) and x[1] >= 0
            for x in raw):
        raise RecordingError(f"{where}: layout {str(raw)[:80]} is not [[field, size], ...]")
    if raw and sum(int(x[1]) for x in raw) != size:
        raise RecordingError(f"{where}: layout of {sum(int(x[1]) for x in raw)} values, the stream has {size}")
    return [(str(f), int(n)) for f, n in raw]


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _manifest_version(mf: Path, m: dict) -> int:
    fmt, ver = m.get("format"), m.get("format_version")
    if fmt is None and ver is None:
        return 1  # the earliest recordings: no format key
    found = None
    if fmt is not None:
        name, _, v = str(fmt).partition("/")
        if not isinstance(fmt, str) or name != FORMAT_NAME or not v.isdigit():
            raise RecordingError(f"{mf}: format {fmt!r} is not a contactflow recording format "
                                 f"(expected '{FORMAT_NAME}/{FORMAT_VERSION}')")
        found = int(v)
    if ver is not None:
        if not _is_int(ver) or (found is not None and ver != found):
            raise RecordingError(f"{mf}: format_version {ver!r} does not match format {fmt!r}")
        found = ver
    if found not in READABLE_VERSIONS:
        raise RecordingError(f"{mf}: recording format version {found}, expected {FORMAT_VERSION} (this contactflow "
                             f"reads versions {list(READABLE_VERSIONS)}; a newer recording needs a newer contactflow)")
    return found


def check_manifest(m: Any, mf: Path) -> dict:
    """Check a run manifest's keys and types, migrating an older format version.

    Args:
        m: the parsed ``manifest.json``.
        mf: its path (named in the errors).

    Returns:
        The manifest at :data:`FORMAT_VERSION` (a version-1 one gets ``format_version`` 2 and
        ``migrated_from`` 1; its streams' ``missing_before_first`` stays absent: unknown).

    Raises:
        RecordingError: not an object, no ``streams`` object, a stream entry without a plain
            ``file`` name or an integer ``size``, a bad ``layout``, a wrongly typed top-level key, or a
            format version this code does not read; naming the file, the key and what was expected.
    """
    if not isinstance(m, dict) or "streams" not in m:
        raise RecordingError(f"{mf}: not a contactflow manifest (no 'streams')")
    version = _manifest_version(mf, m)
    streams = m["streams"]
    if not isinstance(streams, dict):
        raise RecordingError(f"{mf}: 'streams' is a {type(streams).__name__}, expected an object name -> entry")
    for key, types in (("complete", (bool,)), ("configs", (dict,)), ("robot", (str, type(None))),
                       ("dataflow", (str, type(None))), ("start_time_utc", (str,)), ("end_time_utc", (str,)),
                       ("git_revision", (str,))):
        if key in m and not isinstance(m[key], types):
            raise RecordingError(f"{mf}: '{key}' is a {type(m[key]).__name__}, expected "
                                 f"{' or '.join(t.__name__ for t in types)}")
    for name, e in streams.items():
        where = f"{mf}: streams.{name}"
        if not isinstance(e, dict):
            raise RecordingError(f"{where} is a {type(e).__name__}, expected an object with 'file' and 'size'")
        f = e.get("file")
        if not isinstance(f, str) or not f or Path(f).name != f or f in (".", ".."):
            raise RecordingError(f"{where}.file: {f!r}, expected the name of a file in the run directory")
        if not _is_int(e.get("size")) or e["size"] < 0:
            raise RecordingError(f"{where}.size: {e.get('size')!r}, expected a non-negative integer")
        for key in ("messages", "missing_seq", "missing_before_first", "unwritten_messages"):
            if key in e and not _is_int(e[key]):
                raise RecordingError(f"{where}.{key}: {e[key]!r}, expected an integer")
        for key in ("contract", "source"):
            if key in e and not isinstance(e[key], str):
                raise RecordingError(f"{where}.{key}: {e[key]!r}, expected a string")
        _layout(f"{where}.layout", e.get("layout"), e["size"])
    lost = m.get("lost_streams", {})
    if not isinstance(lost, dict):
        raise RecordingError(f"{mf}: 'lost_streams' is a {type(lost).__name__}, expected an object name -> entry")
    for name, e in lost.items():
        if not isinstance(e, dict) or not isinstance(e.get("reason"), str):
            raise RecordingError(f"{mf}: lost_streams.{name}: {str(e)[:80]}, expected an object with a 'reason' string")
    if version != FORMAT_VERSION:  # 1 -> 2: the same files; the version keys added
        m = {**m, "format": f"{FORMAT_NAME}/{FORMAT_VERSION}", "format_version": FORMAT_VERSION,
             "migrated_from": version}
    return m


@dataclasses.dataclass
class Recording:
    """A run directory opened for reading (:func:`read_recording`)."""

    path: Path
    manifest: dict
    _cache: dict = dataclasses.field(default_factory=dict)

    @property
    def stream_names(self) -> list[str]:
        return sorted(self.manifest.get("streams", {}))

    @property
    def lost(self) -> dict[str, dict]:
        """Streams the recorder received but could not write at all (a full disk before their first
        batch): name -> manifest entry (``reason``, ``source``, ``contract``, ``size``, ``first_t`` [s],
        ``unwritten_messages``)."""
        return dict(self.manifest.get("lost_streams", {}))

    def stream(self, name: str) -> Stream:
        """Load stream ``name`` (cached); a damaged file gives its complete prefix, ``truncated`` and ``damage``.

        Raises:
            RecordingError: no such stream (naming the known ones), or its file is unreadable, foreign,
                cut inside its header, of another format version, or of another size or layout than the manifest says.
        """
        if name in self._cache:
            return self._cache[name]
        entry = self.manifest.get("streams", {}).get(name)
        if entry is None and name in self.lost:
            raise RecordingError(f"{self.path}: stream {name!r} {self.lost[name]['reason']}")
        if entry is None:
            raise RecordingError(f"{self.path}: no stream {name!r}; streams: {self.stream_names}")
        path = self.path / entry["file"]
        table, meta, damage = read_stream_file(path)
        size = int(entry["size"])
        file_size = table.schema.field("value").type.list_size
        if file_size != size:
            raise RecordingError(f"{path}: messages of {file_size} values, but the manifest says {size}")
        layout = (_layout(f"{self.path / 'manifest.json'}: streams.{name}.layout", entry.get("layout"), size)
                  or _layout(f"{path}: schema metadata", meta.get("layout"), size))
        cols = _columns_numpy(table, size)
        del table  # the file's bytes: the arrays below are copies
        s = Stream(
            name=name,
            seq=cols["seq"],
            t=cols["t"],
            t_wall_ns=cols["t_wall_ns"],
            finished=cols["finished"],
            values=cols["value"],
            layout=layout,
            truncated=damage is not None,
            metadata=meta,
            damage=damage,
        )
        self._cache[name] = s
        return s


def _columns_numpy(table: pa.Table, size: int) -> dict[str, np.ndarray]:
    """A stream table's columns as numpy arrays (``value``: (N, size)), copied one record batch at a time:
    no single call copies a whole multi-GB column, so signals are handled between batches (see
    ``READ_CHUNK_BYTES``)."""
    n = table.num_rows
    out = {name: np.empty(n, ty.to_pandas_dtype()) for name, ty in _COLUMN_TYPES.items()}
    out["value"] = np.empty((n, size), np.float64)
    i = 0
    for batch in table.to_batches():
        m = batch.num_rows
        if not m:
            continue
        for name in _COLUMN_TYPES:
            out[name][i : i + m] = batch.column(name).to_numpy(zero_copy_only=False)
        if size:
            out["value"][i : i + m] = batch.column("value").flatten().to_numpy(zero_copy_only=False).reshape(m, size)
        i += m
    return out


def read_recording(path: str | Path) -> Recording:
    """Open a run directory (the manifest is read and checked; streams are read on demand).

    Raises:
        RecordingError: missing directory or manifest, a manifest that is not JSON or not a
            contactflow manifest (:func:`check_manifest`), or of a format version not read.
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
        manifest = json.loads(mf.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RecordingError(f"{mf}: manifest is not valid JSON: {exc}") from None
    except (OSError, RecursionError) as exc:
        raise RecordingError(f"{mf}: cannot be read: {exc}") from None
    return Recording(path, check_manifest(manifest, mf))


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


def names_a_run_under_root(run: str | Path) -> bool:
    """Whether :func:`resolve_run` looks ``run`` up under the recordings folder: ``latest``, or a bare run name
    (one path component); a path of a folder and more, or an absolute one, is not."""
    return str(run) == "latest" or len(Path(str(run)).expanduser().parts) == 1


def run_candidates(run: str | Path, root: str | Path | None = None) -> list[Path]:
    """Where :func:`resolve_run` looks for a run named ``run`` (not ``latest``), in order: as given (from the working
    directory: a node's is its graph's folder), a run name under ``root`` (default :func:`recordings_root`), and, in
    a source checkout, a relative path of a folder and more from the checkout's root (``recordings/<run>`` as the
    README's commands name it, from any folder)."""
    from contactflow.paths import source_checkout

    root = Path(root) if root is not None else recordings_root()
    given = Path(str(run)).expanduser()
    looked = [given] + ([root / str(run)] if names_a_run_under_root(run) else [])
    checkout = source_checkout()
    if checkout is not None and not given.is_absolute() and len(given.parts) > 1:
        looked.append(checkout / given)
    return list(dict.fromkeys(looked))


def _dataflow_name(manifest: Mapping) -> str | None:
    """The file name of the dataflow a run's manifest names (the recorder's ``--dataflow``, a name or a path)."""
    flow = manifest.get("dataflow")
    return Path(flow).name if isinstance(flow, str) and flow else None


def resolve_run(run: str | Path, root: str | Path | None = None, *, require_streams: Iterable[str] = (),
                robot: str | None = None, contract_sizes: Mapping[str, int] | None = None,
                dataflows: Iterable[str] | None = None) -> Path:
    """Turn a run argument into a run directory.

    Args:
        run: a path to a run directory (:func:`run_candidates`: a relative one is also looked for from the
            checkout's root, ``recordings/<run>`` from a node, which runs in its graph's folder), a run name under
            ``root``, or ``latest``: the newest
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
        dataflows: when given, ``latest`` only considers runs whose manifest's ``dataflow`` (its file name) is one of these
            (a replay graph reproduces the runs of graphs with its own stages), and a run named explicitly
            that was recorded by another dataflow is refused.

    Returns:
        The run directory.

    Raises:
        RecordingError: nothing matches, naming where it looked; or the named run's manifest names
            another robot than ``robot`` (the run, its robot and the expected one named) or a dataflow not among
            ``dataflows``.
    """
    root = Path(root) if root is not None else recordings_root()
    flows = None if dataflows is None else sorted(set(dataflows))
    run_s = str(run)
    if run_s == "latest":
        need = set(require_streams)
        best = None
        for p in list_runs(root):
            try:
                m = check_manifest(json.loads((p / "manifest.json").read_bytes()), p / "manifest.json")
            except (OSError, ValueError, RecursionError, RecordingError):  # not a readable run: skipped
                continue
            if not m.get("complete") or not need <= set(m["streams"]):
                continue
            if robot is not None and m.get("robot") != robot:
                continue
            if flows is not None and _dataflow_name(m) not in flows:
                continue
            if contract_sizes and any(isinstance(e, dict) and e.get("contract") in contract_sizes
                                      and e.get("size") != contract_sizes[e["contract"]]
                                      for e in (m["streams"][name] for name in need)):
                continue
            key = (str(m.get("start_time_utc", "")), p.name)
            if best is None or key > best[0]:
                best = (key, p)
        if best is None:
            what = ((f" holding {sorted(need)}" if need else "") + (f" of robot {robot!r}" if robot is not None else "")
                    + (f" recorded by {', '.join(flows)}" if flows is not None else ""))
            raise RecordingError(f"no complete recording{what} under {root}")
        return best[1]
    looked = run_candidates(run_s, root)
    p = next((c for c in looked if c.exists()), None)
    if p is None:
        raise RecordingError(f"no recording {run_s!r} (looked for {', '.join(str(c.absolute()) for c in looked)}; "
                             f"runs are under {root}: `contactflow rec ls`)")
    if robot is not None or flows is not None:
        try:
            manifest = json.loads((p / "manifest.json").read_text())
            recorded, flow = manifest.get("robot"), _dataflow_name(manifest)
        except (OSError, json.JSONDecodeError, AttributeError):
            return p  # not a recording: the reader names the problem
        if robot is not None and recorded != robot:
            raise RecordingError(f"recording {p} was made with robot {recorded!r}, expected robot {robot!r}: name a run "
                                 f"of robot {robot!r} (or 'latest', the newest complete one)")
        if flows is not None and flow not in flows:
            raise RecordingError(f"recording {p} was made by dataflow {flow!r}; this replay reproduces runs of "
                                 f"{', '.join(flows)} (graphs with its stages and their configuration): a run of "
                                 f"another graph would not be reproduced (replay it with a graph of that graph's stages, "
                                 f"or widen --dataflows)")
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


def port_table_streams(descriptor: Mapping | None, inputs: Mapping[str, str], robot: Any,
                       renames: Mapping[str, str] | None = None) -> dict[str, dict]:
    """The streams a recorder will write, with their contract and layout, from the port table.

    So that a stream's layout does not depend on its first message arriving (the Sender attaches
    ``contract`` / ``layout`` to the first message of each output only), the recorder takes them at
    start from the port table (:mod:`contactflow.contracts.ports`) and the robot's contracts
    (:func:`contactflow.contracts.messages.port_specs`).

    Args:
        descriptor: the dataflow descriptor (``nodes``: id, path, args...); None: nothing known.
        inputs: the recorder's input id -> source ``node/output``; a node's ``log`` output stands for
            all its outputs (one stream each); a ``replay`` node's outputs take the contract of the
            recorded streams its ``--streams`` names.
        robot: a :class:`contactflow.robot.Robot` (the contracts' sizes).
        renames: source -> recorded name (the recorder's ``--rename``).

    Returns:
        Stream name (``node.output``) -> ``{"source", "contract", "layout" ([[field, size], ...]), "size"}``
        for every recorded output of a node in the port table whose contract is one of ``port_specs``
        (others, e.g. a test fixture or the ``prime_*`` contracts, are absent: their messages' own
        metadata is used).
    """
    from contactflow.contracts.messages import port_specs
    from contactflow.contracts.ports import NODES
    from contactflow.contracts.wiring import LOG_OUTPUT, graph_node_kind

    renames = dict(renames or {})
    nodes = {n["id"]: n for n in (descriptor or {}).get("nodes", []) if isinstance(n, dict) and "id" in n}
    specs = port_specs(robot)
    out: dict[str, dict] = {}
    for src in inputs.values():
        node_id, _, output = str(src).rpartition("/")
        n = nodes.get(node_id)
        kind = graph_node_kind(n) if n is not None else None
        if kind is None:
            continue
        if kind == "replay":
            from contactflow.recording.replay import parse_stream_map

            contracts = {}
            args = str(n.get("args", "") or "").split()
            streams_arg = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "--streams"), "")
            try:
                mappings = parse_stream_map(streams_arg) if streams_arg else []
            except RecordingError:
                mappings = []
            for m in mappings:
                rec_node, _, rec_out = m.stream.rpartition(".")
                decl = NODES.get(rec_node)
                port = decl.outputs.get(rec_out) if decl is not None else None
                if port is not None:
                    contracts[m.output] = port.contract
        else:
            contracts = {o: p.contract for o, p in NODES[kind].outputs.items()}
        outs = list(contracts) if output == LOG_OUTPUT else [output]
        for o in outs:
            spec = specs.get(contracts.get(o) or "")
            if spec is None:
                continue
            stream_src = renames.get(f"{node_id}/{o}", f"{node_id}/{o}")
            out[stream_src.replace("/", ".")] = {"source": stream_src, "contract": spec.name, "size": spec.size,
                                                  "layout": [[f.name, f.size] for f in spec.fields]}
    return out
