"""Arrow IPC recordings: round trip, crash recovery, refusal of foreign files."""

import json

import numpy as np
import pyarrow as pa
import pytest

from contactflow.recording.store import RecordingError, RecordingWriter, read_recording


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
