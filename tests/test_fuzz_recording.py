"""Fuzzing of the recording reader: a recording cut at every byte offset of each stream file, foreign
Arrow streams, random and bit-flipped bytes, manifests with missing or wrongly typed keys, older and
newer format versions.

The outcome of every input is either a :class:`RecordingError` whose message names the file, or a
read whose damage is reported (a salvaged prefix: ``Stream.damage`` with the byte offset and the last
good message); never another exception, never a hang (each read runs in a daemon thread bounded to
:data:`READ_TIMEOUT_S`). ``rec info`` (the CLI, in-process) is fuzzed on the same inputs: exit 0, 1 or
2, never a traceback (and ``rec ls`` on the fuzzed manifests: exit 0).

The number of Hypothesis examples per loader: 60 derandomised in CI, or ``$CONTACTFLOW_FUZZ_EXAMPLES``
random ones (``fuzz_support.fuzz_settings``); the hang bound is a thread here (it also catches a read
stuck in pyarrow's C++ code, which ``fuzz_support.no_hang``'s SIGALRM cannot interrupt); the enumerated truncations are all offsets whatever the setting (``rec info`` on one
in ``$CONTACTFLOW_FUZZ_INFO_STRIDE``, default 8). Each loader prints its count of inputs (``pytest -s``);
``docs/reliability.md`` gives the figures of a large run.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
import threading
from pathlib import Path
from unittest import mock

import numpy as np
import pyarrow as pa
import pytest
from fuzz_support import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from contactflow import cli
from contactflow.recording.export import run_info
from contactflow.recording.store import RecordingError, RecordingWriter, read_recording

READ_TIMEOUT_S = 10.0
#: ``rec info`` runs on one truncation offset in this many (``$CONTACTFLOW_FUZZ_INFO_STRIDE``; 1: all).
INFO_STRIDE = max(1, int(os.environ.get("CONTACTFLOW_FUZZ_INFO_STRIDE", "8")))
FUZZ = fuzz_settings(60)  # 60 derandomised examples per loader in CI; $CONTACTFLOW_FUZZ_EXAMPLES random ones
STREAMS = ("drv.sensors", "ctrl.command")


class Outcome:
    """Counts of one loader's inputs and outcomes."""

    def __init__(self, name: str):
        self.name, self.inputs, self.refused, self.salvaged, self.clean = name, 0, 0, 0, 0

    def __str__(self):
        return (f"{self.name}: {self.inputs} inputs, {self.refused} refused (RecordingError), {self.salvaged} salvaged "
                f"with the damage reported, {self.clean} read clean; 0 other exceptions, 0 hangs")


def _bounded(fn, *args):
    """Run ``fn(*args)`` in a daemon thread (a hung one does not keep the test process alive); a read that
    takes longer than READ_TIMEOUT_S fails the test. Exceptions are re-raised here."""
    box: dict = {}

    def work():
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            box["error"] = exc

    th = threading.Thread(target=work, daemon=True)
    th.start()
    th.join(READ_TIMEOUT_S)
    if th.is_alive():
        pytest.fail(f"{fn.__name__}{args}: no answer within {READ_TIMEOUT_S} s (a hang)")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _read_all(run: Path, only: str | None = None) -> list:
    """Open a run and read every stream (or ``only`` that one): the streams read (some may be salvaged), or
    the RecordingError."""
    try:
        rec = read_recording(run)
    except RecordingError as exc:
        return [exc]
    out = []
    for name in [only] if only else rec.stream_names:
        try:
            out.append(rec.stream(name))
        except RecordingError as exc:
            out.append(exc)
    return out


def _check(outcome: Outcome, results: list, run: Path) -> None:
    """Every result is a RecordingError naming a file of the run, or a stream (salvaged ones report it).
    The input counts as refused if any file of it was, else salvaged if any stream was, else clean."""
    outcome.inputs += 1
    for r in results:
        if isinstance(r, RecordingError):
            assert str(run) in str(r), f"the error does not name the file: {r}"
        else:
            assert r.truncated == (r.damage is not None)
            if r.damage is not None:
                assert r.damage.offset <= r.damage.file_size and r.damage.messages == len(r) and r.damage.reason
    if any(isinstance(r, RecordingError) for r in results):
        outcome.refused += 1
    elif any(r.damage is not None for r in results):
        outcome.salvaged += 1
    else:
        outcome.clean += 1


_PARSER = cli.build_parser()


def _info(run: Path) -> int:
    """``contactflow rec info RUN`` in-process (its output swallowed; the parser built once): the exit status."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
            mock.patch.object(cli, "build_parser", lambda: _PARSER):
        return cli.main(["rec", "info", str(run), "--no-progress"])


def _ls(root: Path) -> int:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
            mock.patch.object(cli, "build_parser", lambda: _PARSER):
        return cli.main(["rec", "ls", "--root", str(root)])


def _make_run(path: Path, *, batches: int = 3, per: int = 4) -> Path:
    """A small closed run: two streams of ``batches`` record batches of ``per`` messages."""
    w = RecordingWriter(path, {"dataflow": "fuzz.yml", "robot": "talos"})
    a = w.stream("drv.sensors", 3, {"source": "drv/sensors", "contract": "sensors",
                                    "layout": json.dumps([["t", 1], ["f", 2]]), "config": json.dumps({"k": 1})})
    b = w.stream("ctrl.command", 2, {"source": "ctrl/command", "layout": json.dumps([["u", 2]])})
    for k in range(batches * per):
        a.append(k, 0.002 * k, np.array([0.002 * k, k, -k]), finished=k == batches * per - 1)
        b.append(k, 0.002 * k, np.array([np.sin(k), 1.0]), finished=k == batches * per - 1)
        if k % per == per - 1:
            a.flush()
            b.flush()
    w.close()
    return path


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    return _make_run(tmp_path_factory.mktemp("fuzz") / "run")


@contextlib.contextmanager
def _copy(pristine: Path):
    d = Path(tempfile.mkdtemp(prefix="cf-fuzz-"))
    try:
        shutil.copytree(pristine, d / "run")
        yield d / "run"
    finally:
        shutil.rmtree(d, ignore_errors=True)


# --------------------------------------------------------------------------- truncation at every offset


@pytest.mark.parametrize("stream", STREAMS)
def test_a_stream_cut_at_every_byte_offset(pristine, stream):
    """Each offset from 0 to the file's size: refused (cut in the header, naming the file) or the
    complete batches before the cut, bit for bit, with the cut reported (never a clean shorter file)."""
    clean = read_recording(pristine).stream(stream)
    data = (pristine / f"{stream}.arrows").read_bytes()
    outcome = Outcome(f"stream cut at every offset ({stream}, {len(data)} bytes)")
    info_rc = {0: 0, 1: 0, 2: 0}
    with _copy(pristine) as run:
        path = run / f"{stream}.arrows"
        for cut in range(len(data) + 1):
            path.write_bytes(data[:cut])
            results = _bounded(_read_all, run, stream)
            _check(outcome, results, run)
            st_ = results[0]
            if cut == len(data):
                assert not isinstance(st_, RecordingError) and not st_.truncated and len(st_) == len(clean)
            elif not isinstance(st_, RecordingError):
                assert st_.truncated and st_.damage.offset <= cut, cut
                n = len(st_)
                np.testing.assert_array_equal(st_.seq, clean.seq[:n])
                np.testing.assert_array_equal(st_.values, clean.values[:n])  # bit for bit
                assert n == 0 or st_.damage.last_seq == clean.seq[n - 1]
            if cut % INFO_STRIDE == 0 or cut == len(data):  # `rec info` on every INFO_STRIDE-th offset (CI time)
                rc = _bounded(_info, run)
                info_rc[rc] += 1
                assert rc == (0 if cut == len(data) else 1 if not isinstance(st_, RecordingError) else 2), cut
    print(outcome, f"; rec info exit 0/1/2: {info_rc}")


# --------------------------------------------------------------------------- foreign Arrow streams

_ARROW_TYPES = st.sampled_from([pa.int64(), pa.int32(), pa.float64(), pa.float32(), pa.bool_(), pa.string(),
                                pa.list_(pa.float64()), pa.list_(pa.float64(), 3), pa.list_(pa.float32(), 3),
                                pa.list_(pa.int64(), 3), pa.binary()])
_NAMES = st.sampled_from(["seq", "t", "t_wall_ns", "finished", "value", "x", "time", "data"])


@st.composite
def _foreign_tables(draw):
    """A valid Arrow table: either any columns, or the contactflow column names with other types."""
    if draw(st.booleans()):
        names = ["seq", "t", "t_wall_ns", "finished", "value"]
    else:
        names = draw(st.lists(_NAMES, min_size=1, max_size=6, unique=True))
    types = [draw(_ARROW_TYPES) for _ in names]
    if names == ["seq", "t", "t_wall_ns", "finished", "value"] and types == [pa.int64(), pa.float64(), pa.int64(),
                                                                            pa.bool_(), pa.list_(pa.float64(), 3)]:
        types[0] = pa.int32()  # keep it foreign
    n = draw(st.integers(0, 5))
    cols = [pa.nulls(n, ty) if draw(st.booleans()) else pa.array([_default(ty)] * n, ty) for ty in types]
    return pa.table(cols, names=names)


def _default(ty):
    if pa.types.is_fixed_size_list(ty):
        return [0] * ty.list_size if not pa.types.is_floating(ty.value_type) else [0.0] * ty.list_size
    if pa.types.is_list(ty):
        return [1.0]
    return {pa.string(): "a", pa.binary(): b"a", pa.bool_(): True}.get(ty, 0)


_FOREIGN = Outcome("foreign Arrow streams")


@FUZZ
@given(table=_foreign_tables(), as_file=st.booleans())
def test_foreign_arrow_streams_are_refused(pristine, table, as_file):
    with _copy(pristine) as run:
        path = run / "drv.sensors.arrows"
        sink = pa.BufferOutputStream()
        with (pa.ipc.new_file if as_file else pa.ipc.new_stream)(sink, table.schema) as wr:
            wr.write_table(table)
        path.write_bytes(sink.getvalue().to_pybytes())
        results = _bounded(_read_all, run)
        _check(_FOREIGN, results, run)
        assert isinstance(results[1], RecordingError)  # the streams in name order: ctrl.command, drv.sensors
        assert "drv.sensors.arrows" in str(results[1])
        assert _bounded(_info, run) == 2


def test_foreign_count():
    print(_FOREIGN)


# --------------------------------------------------------------------------- random and flipped bytes

_BYTES = Outcome("random bytes / bit flips in a stream file")


@FUZZ
@given(blob=st.binary(max_size=600), magic=st.booleans())
def test_random_bytes_as_a_stream_file(pristine, blob, magic):
    with _copy(pristine) as run:
        (run / "ctrl.command.arrows").write_bytes((b"\xff\xff\xff\xff" if magic else b"") + blob)
        results = _bounded(_read_all, run)
        _check(_BYTES, results, run)
        assert _bounded(_info, run) in (0, 1, 2)


@FUZZ
@given(flips=st.lists(st.tuples(st.integers(0, 10 ** 6), st.integers(0, 255)), min_size=1, max_size=8))
def test_bytes_flipped_in_a_stream_file(pristine, flips):
    """Corruption inside a file (no checksum in Arrow): refused, salvaged up to the corrupt message, or
    read with other values; never another exception."""
    with _copy(pristine) as run:
        path = run / "drv.sensors.arrows"
        data = bytearray(path.read_bytes())
        for pos, val in flips:
            data[pos % len(data)] = val
        path.write_bytes(bytes(data))
        results = _bounded(_read_all, run)
        _check(_BYTES, results, run)
        assert _bounded(_info, run) in (0, 1, 2)


def test_bytes_count():
    print(_BYTES)


# --------------------------------------------------------------------------- manifests

_JSON = st.recursive(st.none() | st.booleans() | st.integers(-3, 10 ** 6) | st.floats(allow_nan=True) | st.text(max_size=12),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                     max_leaves=12)
_KEYS = ["format", "format_version", "streams", "complete", "configs", "robot", "dataflow", "start_time_utc"]
_ENTRY_KEYS = ["file", "size", "layout", "contract", "source", "messages", "missing_seq", "missing_before_first"]
_MANIFEST = Outcome("manifests with missing / wrongly typed keys")


@st.composite
def _manifest_edits(draw):
    """(path, action, value): delete or replace a top-level key or a key of a stream entry."""
    edits = []
    for _ in range(draw(st.integers(1, 4))):
        where = draw(st.sampled_from(["top", "entry"]))
        key = draw(st.sampled_from(_KEYS if where == "top" else _ENTRY_KEYS))
        edits.append((where, key, draw(st.sampled_from(["delete", "replace"])), draw(_JSON)))
    return edits


@FUZZ
@given(edits=_manifest_edits(), stream=st.sampled_from(STREAMS))
def test_manifests_with_wrong_keys(pristine, edits, stream):
    with _copy(pristine) as run:
        mf = run / "manifest.json"
        m = json.loads(mf.read_text())
        for where, key, action, value in edits:
            target = m if where == "top" else (m.get("streams") or {}).get(stream) if isinstance(m.get("streams"), dict) else None
            if not isinstance(target, dict):
                continue
            if action == "delete":
                target.pop(key, None)
            else:
                target[key] = value
        mf.write_text(json.dumps(m))
        results = _bounded(_read_all, run)
        _check(_MANIFEST, results, run)
        assert _bounded(_info, run) in (0, 1, 2)
        assert _bounded(_ls, run.parent) == 0  # `rec ls` lists a bad manifest as such
        if not (results and isinstance(results[0], RecordingError)):  # a readable manifest (maybe no streams)
            _bounded(run_info, read_recording(run))


@FUZZ
@given(text=st.one_of(st.binary(max_size=200), _JSON.map(lambda v: json.dumps(v).encode())))
def test_a_manifest_that_is_any_json_or_bytes(pristine, text):
    with _copy(pristine) as run:
        (run / "manifest.json").write_bytes(text)
        results = _bounded(_read_all, run)
        _check(_MANIFEST, results, run)
        assert _bounded(_info, run) in (0, 1, 2)


def test_manifest_count():
    print(_MANIFEST)


# --------------------------------------------------------------------------- older and newer versions

_VERSIONS = Outcome("format versions (older layout, newer or odd versions)")


@FUZZ
@given(fmt=st.one_of(st.none(), st.sampled_from(["contactflow-recording/1", "contactflow-recording/2",
                                                  "contactflow-recording/3", "contactflow-recording/x",
                                                  "contactflow-recording/", "rosbag2"]), st.text(max_size=30)),
       ver=st.one_of(st.none(), st.integers(-2, 5), st.text(max_size=3)),
       stream_ver=st.one_of(st.none(), st.sampled_from(["1", "2", "3", "", "x"])))
def test_older_and_other_versions(pristine, fmt, ver, stream_ver):
    """A run of the older layout (no version anywhere) is migrated; any other version is refused with a
    message naming the file and the versions."""
    with _copy(pristine) as run:
        mf = run / "manifest.json"
        m = {k: v for k, v in json.loads(mf.read_text()).items() if k not in ("format", "format_version")}
        if fmt is not None:
            m["format"] = fmt
        if ver is not None:
            m["format_version"] = ver
        mf.write_text(json.dumps(m))
        path = run / "drv.sensors.arrows"
        table = pa.ipc.open_stream(pa.py_buffer(path.read_bytes())).read_all()
        meta = {k: v for k, v in table.schema.metadata.items() if k != b"contactflow_format"}
        if stream_ver is not None:
            meta[b"contactflow_format"] = stream_ver.encode()
        table = table.replace_schema_metadata(meta)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as wr:
            wr.write_table(table)
        path.write_bytes(sink.getvalue().to_pybytes())
        results = _bounded(_read_all, run)
        _check(_VERSIONS, results, run)
        manifest_ok = (fmt is None and ver is None) or (
            fmt in (None, "contactflow-recording/1", "contactflow-recording/2")
            and (ver is None or (type(ver) is int and ver in (1, 2) and (fmt is None or fmt.endswith(f"/{ver}")))))
        if not manifest_ok:
            assert len(results) == 1 and isinstance(results[0], RecordingError) and "manifest.json" in str(results[0])
        else:
            assert not isinstance(results[0], RecordingError)  # ctrl.command: untouched
            sens = results[1]
            if stream_ver in (None, "1", "2"):
                assert not isinstance(sens, RecordingError) and len(sens) == 12
            else:
                assert isinstance(sens, RecordingError) and "stream format version" in str(sens) and "expected 2" in str(sens)
        assert _bounded(_info, run) in (0, 1, 2)


def test_versions_count():
    print(_VERSIONS)
