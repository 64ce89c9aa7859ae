"""Arrow IPC recordings: round trip, crash recovery, refusal of foreign files."""

import json

import numpy as np
import pyarrow as pa
import pytest

from contactflow.recording.store import RecordingError, RecordingWriter, read_recording, read_stream_file


def _write(tmp_path, n=50):
    w = RecordingWriter(tmp_path / "run", {"dataflow": "x.yml"})
    s = w.stream("drv.sensors", 3, {"source": "drv/sensors", "layout": json.dumps([["a", 1], ["b", 2]]), "config": json.dumps({"k": 1})})
    for i in range(n):
        s.append(i, i * 0.002, np.array([i, 2.0 * i, -i]), finished=i == n - 1)
    return w


def test_round_trip(tmp_path):
    w = _write(tmp_path)
    w.close()
    rec = read_recording(tmp_path / "run")
    assert rec.manifest["complete"] and rec.manifest["configs"]["drv"] == {"k": 1}
    st = rec.stream("drv.sensors")
    assert len(st) == 50 and not st.truncated
    np.testing.assert_array_equal(st.seq, np.arange(50))
    np.testing.assert_array_equal(st.field("b")[:, 0], 2.0 * np.arange(50))
    assert st.finished[-1] and not st.finished[0]
    with pytest.raises(KeyError, match="fields"):
        st.field("c")


def test_truncated_stream_is_recovered(tmp_path):
    w = _write(tmp_path, 10)
    s = w.streams["drv.sensors"]
    s.flush()
    for i in range(10, 20):
        s.append(i, i * 0.002, np.zeros(3))
    s.flush()
    path = tmp_path / "run" / "drv.sensors.arrows"
    data = path.read_bytes()
    path.write_bytes(data[:-40])  # a crash in the middle of the last batch
    rec = read_recording(tmp_path / "run")
    st = rec.stream("drv.sensors")
    assert st.truncated and len(st) == 10


def test_foreign_files_are_refused(tmp_path):
    with pytest.raises(RecordingError, match="no manifest.json"):
        read_recording(tmp_path)
    w = _write(tmp_path)
    w.close()
    # an Arrow *file* in place of the stream
    path = tmp_path / "run" / "drv.sensors.arrows"
    t = pa.table({"x": [1, 2]})
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_file(f, t.schema) as wr:
        wr.write_table(t)
    with pytest.raises(RecordingError, match="Arrow IPC \\*file\\*"):
        read_recording(tmp_path / "run").stream("drv.sensors")
    path.write_bytes(b"hello world, not arrow")
    with pytest.raises(RecordingError, match="bad magic"):
        read_recording(tmp_path / "run").stream("drv.sensors")
    (tmp_path / "run" / "manifest.json").write_text("{not json")
    with pytest.raises(RecordingError, match="not valid JSON"):
        read_recording(tmp_path / "run")


def test_missing_seq_is_counted_in_the_manifest(tmp_path):
    """A stream whose seq skips values (a lost message) says so in the manifest."""
    w = RecordingWriter(tmp_path / "run", {"dataflow": "x.yml"})
    s = w.stream("a.out", 2, {"source": "a/out"})
    full = w.stream("b.out", 2, {"source": "b/out"})
    for k in (0, 1, 2, 5, 6, 9):
        s.append(k, 0.002 * k, np.zeros(2))
    for k in range(10):
        full.append(k, 0.002 * k, np.zeros(2))
    w.close()
    streams = json.loads((tmp_path / "run" / "manifest.json").read_text())["streams"]
    assert streams["a.out"]["missing_seq"] == 4 and streams["a.out"]["messages"] == 6
    assert streams["b.out"]["missing_seq"] == 0


# --------------------------------------------------------------------------- format versions


def _rewrite_stream_without_version(path):
    """The same stream file as an older contactflow wrote it: no format version in its metadata."""
    table = pa.ipc.open_stream(pa.py_buffer(path.read_bytes())).read_all()  # a copy: the file is rewritten
    meta = {k: v for k, v in table.schema.metadata.items() if k != b"contactflow_format"}
    table = table.replace_schema_metadata(meta)
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_stream(f, table.schema) as wr:
        wr.write_table(table)


def test_the_version_is_written_and_version_1_is_migrated(tmp_path):
    from contactflow.recording.store import FORMAT_VERSION

    _write(tmp_path).close()
    run = tmp_path / "run"
    m = json.loads((run / "manifest.json").read_text())
    assert m["format"] == f"contactflow-recording/{FORMAT_VERSION}" and m["format_version"] == FORMAT_VERSION == 2
    st = read_recording(run).stream("drv.sensors")
    assert st.metadata["contactflow_format"] == "2" and "migrated_from" not in read_recording(run).manifest
    # a version-1 run (before versions were recorded): its manifest and streams are read, migrated in memory
    for v1 in ({"format": "contactflow-recording/1"}, {}):
        old = {k: v for k, v in m.items() if k not in ("format", "format_version")} | v1
        for e in old["streams"].values():
            e.pop("missing_before_first", None)
        (run / "manifest.json").write_text(json.dumps(old))
        _rewrite_stream_without_version(run / "drv.sensors.arrows")
        rec = read_recording(run)
        assert rec.manifest["migrated_from"] == 1 and rec.manifest["format_version"] == 2
        st = rec.stream("drv.sensors")
        assert "contactflow_format" not in st.metadata and len(st) == 50 and not st.truncated
        np.testing.assert_array_equal(st.field("b")[:, 0], 2.0 * np.arange(50))


def test_other_versions_are_refused_naming_file_found_and_expected(tmp_path):
    _write(tmp_path).close()
    run = tmp_path / "run"
    mf = run / "manifest.json"
    m = json.loads(mf.read_text())
    for fmt, ver, found in (("contactflow-recording/3", 3, "version 3"), ("contactflow-recording/0", None, "version 0")):
        mf.write_text(json.dumps({**m, "format": fmt, "format_version": ver} if ver else {**m, "format": fmt,
                                                                                           "format_version": 0}))
        with pytest.raises(RecordingError, match=rf"manifest.json: recording format version {found[-1]}, expected 2"):
            read_recording(run)
    mf.write_text(json.dumps({**m, "format": "rosbag2"}))
    with pytest.raises(RecordingError, match="manifest.json: format 'rosbag2' is not a contactflow recording format"):
        read_recording(run)
    mf.write_text(json.dumps(m))
    # a stream file of a newer contactflow
    path = run / "drv.sensors.arrows"
    table = pa.ipc.open_stream(pa.py_buffer(path.read_bytes())).read_all()  # a copy: the file is rewritten
    table = table.replace_schema_metadata({**table.schema.metadata, b"contactflow_format": b"9"})
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_stream(f, table.schema) as wr:
        wr.write_table(table)
    with pytest.raises(RecordingError, match=r"drv.sensors.arrows: stream format version '9', expected 2"):
        read_recording(run).stream("drv.sensors")


# --------------------------------------------------------------------------- truncation salvage


def _batched(tmp_path, batches=4, per=5):
    """A closed run whose stream has ``batches`` record batches of ``per`` messages; the file sizes after each."""
    w = RecordingWriter(tmp_path / "run", {"dataflow": "x.yml"})
    s = w.stream("drv.sensors", 3, {"source": "drv/sensors", "layout": json.dumps([["a", 1], ["b", 2]])})
    ends = []
    for b in range(batches):
        for i in range(b * per, (b + 1) * per):
            s.append(i, i * 0.002, np.array([i, 2.0 * i, -i]))
        s.flush()
        ends.append((tmp_path / "run" / "drv.sensors.arrows").stat().st_size)
    w.close()
    return tmp_path / "run", ends


def test_a_cut_stream_is_salvaged_with_its_offset_and_last_good_time(tmp_path):
    run, ends = _batched(tmp_path)
    path = run / "drv.sensors.arrows"
    data = path.read_bytes()
    assert len(data) == ends[-1] + 8 and data[-8:] == b"\xff\xff\xff\xff\x00\x00\x00\x00"
    clean = read_recording(run).stream("drv.sensors")
    assert not clean.truncated and clean.damage is None and len(clean) == 20
    # the writer killed in the middle of the third batch: two batches salvaged, the cut named
    path.write_bytes(data[: (ends[1] + ends[2]) // 2])
    st = read_recording(run).stream("drv.sensors")
    d = st.damage
    assert st.truncated and len(st) == 10 and d.reason == "cut inside a message"
    assert d.offset == ends[1] and d.file_size == (ends[1] + ends[2]) // 2 and d.last_seq == 9
    assert d.last_t == pytest.approx(9 * 0.002)
    line = d.describe("drv.sensors")
    assert f"truncated at byte {ends[1]} of {d.file_size}" in line and "seq 9, t = 0.018 s" in line
    # every batch complete but no end-of-stream marker (killed between batches): reported, never clean
    path.write_bytes(data[: ends[-1]])
    st = read_recording(run).stream("drv.sensors")
    assert st.truncated and len(st) == 20 and st.damage.reason == "no end-of-stream marker"
    assert st.damage.offset == ends[-1] and st.damage.last_seq == 19
    # bytes after the end-of-stream marker
    path.write_bytes(data + b"garbage")
    st = read_recording(run).stream("drv.sensors")
    assert st.truncated and len(st) == 20 and "7 byte(s) after the end-of-stream marker" in st.damage.reason
    # a cut inside the header is refused (nothing to salvage), naming the file
    path.write_bytes(data[:40])
    with pytest.raises(RecordingError, match="drv.sensors.arrows: unreadable Arrow stream header"):
        read_recording(run).stream("drv.sensors")


def test_a_manifest_with_wrong_keys_is_refused_naming_the_key(tmp_path):
    _write(tmp_path).close()
    run = tmp_path / "run"
    mf = run / "manifest.json"
    m = json.loads(mf.read_text())
    entry = m["streams"]["drv.sensors"]
    cases = [
        ({**m, "streams": ["drv.sensors"]}, "'streams' is a list, expected an object"),
        ({**m, "streams": {"drv.sensors": {**entry, "file": "../../etc/passwd"}}}, "streams.drv.sensors.file"),
        ({**m, "streams": {"drv.sensors": {**entry, "size": "3"}}}, "streams.drv.sensors.size: '3', expected"),
        ({**m, "streams": {"drv.sensors": {**entry, "layout": [["a", 1], ["b", 5]]}}}, "layout of 6 values, the stream has 3"),
        ({**m, "streams": {"drv.sensors": {**entry, "layout": "x"}}}, "layout is not JSON"),
        ({**m, "complete": "yes"}, "'complete' is a str, expected bool"),
        ({**m, "streams": {"drv.sensors": 3}}, "streams.drv.sensors is a int"),
    ]
    for bad, msg in cases:
        mf.write_text(json.dumps(bad))
        with pytest.raises(RecordingError, match="manifest.json") as exc:
            read_recording(run)
        assert msg in str(exc.value)


# --------------------------------------------------------------------------- a full disk


def _fill(w, streams, n, start=0):
    for i in range(start, start + n):
        for s in streams:
            s.append(i, i * 0.002, np.full(s.size, float(i)))
        if i % 10 == 9:
            w.flush()
            for s in streams:
                s.flush()


def test_max_bytes_behaves_as_a_full_disk(tmp_path):
    w = RecordingWriter(tmp_path / "run", {"dataflow": "x.yml"}, max_bytes=6000)
    a = w.stream("a.out", 4, {"source": "a/out"})
    b = w.stream("b.out", 2, {"source": "b/out"})
    _fill(w, [a, b], 200)
    f = w.failure
    assert f is not None and f.max_bytes == 6000 and "No space left on device" in f.error and f.stream in ("a.out", "b.out")
    sizes = {n: (tmp_path / "run" / f"{n}.arrows").stat().st_size for n in ("a.out", "b.out")}
    assert f.bytes_written == sum(sizes.values()) <= 6000
    w.close()
    m = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert m["write_failure"]["stream"] == f.stream and m["complete"] is False  # a partial run (rec ls: partial; never the replay's latest)
    rec = read_recording(tmp_path / "run")
    for n, s in (("a.out", a), ("b.out", b)):
        st = rec.stream(n)
        # readable up to the last complete batch, reported as truncated (no end-of-stream marker), nothing lost silently
        assert st.truncated and st.damage.reason == "no end-of-stream marker" and st.damage.offset == sizes[n]
        assert len(st) == m["streams"][n]["messages"] == s.count > 0
        assert s.count + m["streams"][n]["unwritten_messages"] == 200
        np.testing.assert_array_equal(st.seq, np.arange(len(st)))
    assert m["unwritten_messages"] == 400 - len(rec.stream("a.out")) - len(rec.stream("b.out"))


def test_a_real_write_error_takes_the_same_path(tmp_path, monkeypatch):
    import errno
    import os

    from contactflow.recording import store

    w = RecordingWriter(tmp_path / "run", {"dataflow": "x.yml"})
    a = w.stream("a.out", 4, {"source": "a/out"})
    _fill(w, [a], 30)
    good = (tmp_path / "run" / "a.out.arrows").stat().st_size
    real_write = os.write

    def enospc(fd, data):  # the disk fills in the middle of a batch: part of it written, then ENOSPC
        real_write(fd, bytes(data)[:7])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store.os, "write", enospc)
    _fill(w, [a], 20, start=30)
    monkeypatch.setattr(store.os, "write", real_write)
    assert w.failure is not None and w.failure.max_bytes is None and w.failure.bytes_written == good
    w.close()
    st = read_recording(tmp_path / "run").stream("a.out")
    assert len(st) == 30 and st.damage.offset == good and st.damage.file_size == good  # the partial batch cut off
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["streams"]["a.out"]["unwritten_messages"] == 20


def test_a_stream_first_seen_after_the_disk_is_full_is_listed_as_lost_and_the_others_read(tmp_path, capsys):
    """A stream created after the write budget is spent (the PRIME replay's estimator output) left an
    empty file cut inside its Arrow header that made reading the run fail; it now has no file, is listed
    under ``lost_streams`` with the reason, and ``rec info`` names it while the other stream reads."""
    from contactflow.cli import main as cli_main

    w = RecordingWriter(tmp_path / "run", {"dataflow": "x.yml"}, max_bytes=4000)
    a = w.stream("a.out", 4, {"source": "a/out"})
    _fill(w, [a], 200)
    assert w.failure is not None and w.failure.stream == "a.out"
    late = w.stream("late.out", 3, {"source": "late/out", "contract": "late", "layout": json.dumps([["x", 3]])})
    _fill(w, [late], 7, start=100)
    w.close()
    assert not (tmp_path / "run" / "late.out.arrows").exists()
    rec = read_recording(tmp_path / "run")
    assert rec.stream_names == ["a.out"] and len(rec.stream("a.out")) == a.count > 0
    lost = rec.lost["late.out"]
    assert lost["unwritten_messages"] == 7 and lost["first_t"] == pytest.approx(0.2) and lost["contract"] == "late"
    assert "not recorded" in lost["reason"] and "No space left on device" in lost["reason"]
    with pytest.raises(RecordingError, match="late.out.*not recorded"):
        rec.stream("late.out")
    assert rec.manifest["unwritten_messages"] == 200 - a.count + 7
    rc = cli_main(["rec", "info", "run", "--root", str(tmp_path)])
    out = capsys.readouterr()
    assert rc == 1  # readable, with data lost (not 2: nothing unreadable)
    assert "UNREADABLE" not in out.out and "late.out" in out.out and "NOT RECORDED: 7 message(s)" in out.out
    assert "stream 'late.out' not recorded" in out.err


def test_a_stream_is_readable_from_its_creation_and_lost_only_without_its_header(tmp_path):
    """A stream's header is written when it is created (with an empty batch): one whose first rows are
    still buffered when the disk fills, or when the recorder is SIGKILLed, reads as 0 messages (its rows
    counted as unwritten), never as a header-less file; one whose header itself did not fit is lost."""
    w = RecordingWriter(tmp_path / "run", {}, max_bytes=3000)
    a = w.stream("a.out", 4, {"source": "a/out"})
    b = w.stream("b.out", 2, {"source": "b/out"})
    table, _, damage = read_stream_file(tmp_path / "run" / "b.out.arrows")  # as a SIGKILL now would leave it
    assert table.num_rows == 0 and damage.reason == "no end-of-stream marker"
    for i in range(5):  # b's rows stay buffered (no flush)
        b.append(i, i * 0.002, np.zeros(2))
    _fill(w, [a], 200)  # a's batches spend the budget; the failure stops every stream
    w.close()
    assert not b.lost and not a.lost
    rec = read_recording(tmp_path / "run")
    assert rec.stream_names == ["a.out", "b.out"] and len(rec.stream("b.out")) == 0
    assert rec.manifest["streams"]["b.out"]["unwritten_messages"] == 5
    assert rec.stream("a.out").damage.reason == "no end-of-stream marker"
    # a budget smaller than a header: the stream is lost, its partial file removed
    w = RecordingWriter(tmp_path / "run2", {}, max_bytes=100)
    c = w.stream("c.out", 2, {"source": "c/out"})
    w.close()
    assert c.lost and not (tmp_path / "run2" / "c.out.arrows").exists()
    assert read_recording(tmp_path / "run2").lost["c.out"]["unwritten_messages"] == 0


def test_buffered_rows_are_written_every_flush_period_of_recorded_time(tmp_path):
    """A lockstep graph faster than real time (the G1 teleop graph, 50 Hz, ~5x real time) sends more
    simulated time per wall-clock flush period: the rows are also written once they span a flush
    period of their own time, so a killed recorder loses about that much simulated time, not 5x."""
    w = RecordingWriter(tmp_path / "run", {}, flush_period_s=0.05)
    s = w.stream("g1.cmd", 2, {"source": "g1/cmd"})
    for k in range(12):  # 0.22 s of recorded time at 50 Hz, in far less than 50 ms of wall time
        s.append(k, 0.02 * k, np.zeros(2))
    # written (not only buffered) up to the row that spanned 0.05 s: what a SIGKILL now would leave
    table, _, damage = read_stream_file(tmp_path / "run" / "g1.cmd.arrows")
    assert damage.reason == "no end-of-stream marker"
    assert 0.22 - table.column("t").to_numpy().max() <= 0.05 + 1e-9


def test_background_fsync_keeps_the_disk_wait_out_of_the_writing_thread(tmp_path, monkeypatch):
    """The recorder's writer fsyncs from a thread of its own (a fsync on a busy disk took 5-230 ms,
    during which the recorder read nothing); the final fsync at close stays in the caller."""
    import os
    import threading
    import time

    from contactflow.recording import store

    calls = []
    real = os.fsync
    monkeypatch.setattr(store.os, "fsync", lambda fd: (calls.append(threading.current_thread().name), real(fd)))
    w = RecordingWriter(tmp_path / "run", {}, flush_period_s=0.0, background_fsync=True, fsync_period_s=0.01)
    s = w.stream("a.out", 2, {"source": "a/out"})
    end = time.monotonic() + 0.2
    k = 0
    while time.monotonic() < end:
        s.append(k, 0.002 * k, np.zeros(2))
        k += 1
        time.sleep(0.002)
    assert calls and set(calls) == {"recording-fsync"}
    w.close()
    assert calls[-1] == threading.current_thread().name  # the last one, at close
    assert len(read_recording(tmp_path / "run").stream("a.out")) == k


def test_a_large_stream_is_read_with_signal_handlers_running_throughout(tmp_path, monkeypatch):
    """An hour-long run has streams of several GB; the recorder's summary reads them back after the dataflow's
    stop and must honour a SIGTERM or its time budget (a Python signal handler, nodes/recorder.py) within dora's
    grace: no single call may read or copy a whole stream (the soak of 2026-12-02 12:01: the recorder was killed
    while summarising 7.7 GB). Here a 96 MB stream is read with a 2 ms interval timer; the longest wait of its
    handler must be a small part of the read (one chunk or one record batch), and the values must be intact."""
    import signal
    import time

    from contactflow.recording import store

    monkeypatch.setattr(store, "READ_CHUNK_BYTES", 4 << 20)
    size, n, per = 6000, 2000, 20
    w = RecordingWriter(tmp_path / "run", {"dataflow": "x.yml"})
    s = w.stream("drv.sensors", size, {"source": "drv/sensors"})
    base = np.arange(size, dtype=np.float64)
    for i in range(n):
        s.append(i, i * 0.002, base + i)
        if (i + 1) % per == 0:
            s.flush()
    w.close()
    runs: list[float] = []
    prev = signal.signal(signal.SIGALRM, lambda *_: runs.append(time.monotonic()))
    try:
        t0 = time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, 0.002, 0.002)
        st = read_recording(tmp_path / "run").stream("drv.sensors")
        t1 = time.monotonic()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, prev)
    marks = [t0, *[t for t in runs if t <= t1], t1]
    longest = max(b - a for a, b in zip(marks, marks[1:]))
    assert len(marks) >= 12, f"the handler ran {len(marks) - 2} times in {t1 - t0:.3f} s"
    assert longest < 0.2 * (t1 - t0), f"the handler waited {longest * 1e3:.0f} ms of a {(t1 - t0) * 1e3:.0f} ms read"
    assert st.values.shape == (n, size) and not st.truncated
    np.testing.assert_array_equal(st.seq, np.arange(n))
    np.testing.assert_array_equal(st.values[:, 0], np.arange(n, dtype=np.float64))
    np.testing.assert_array_equal(st.values[-1], base + n - 1)
