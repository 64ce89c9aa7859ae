"""``contactflow rec ls/info/export``, ``plot``, ``bench``: on a synthetic recording (no dora)."""

import json
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

from contactflow.cli import main
from contactflow.recording.export import parse_signal, signal_values
from contactflow.recording.store import RecordingError, RecordingWriter, read_recording


@pytest.fixture
def root(tmp_path):
    w = RecordingWriter(tmp_path / "demo-1", {"dataflow": "demo.yml", "robot": "talos"})
    s = w.stream("mujoco_driver.sensors", 7, {"source": "mujoco_driver/sensors", "contract": "sensors",
                                              "layout": json.dumps([["t", 1], ["wrench.left_foot", 6]])})
    c = w.stream("ctrl.command", 2, {"source": "ctrl/command", "layout": json.dumps([["theta_cmd", 1], ["ok", 1]])})
    for i in range(100):
        if i in (40, 41, 42):
            continue  # a gap of three ticks
        s.append(i, i * 0.002, np.r_[i * 0.002, 0.0, 0.0, 400.0 + i, 0.0, 0.0, 0.0], finished=i == 99)
        c.append(i, i * 0.002, np.array([np.sin(i * 0.1), 1.0]))
        if i % 30 == 0:
            w.flush()
            s.flush()
            c.flush()
    w.close()
    return tmp_path


def _cli(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_ls_and_info(root, capsys):
    rc, out, _ = _cli(capsys, "rec", "ls", "--root", str(root))
    assert rc == 0 and "demo-1" in out and "complete" in out
    for name, start in (("a_newer", "2030-01-02T00:00:00+00:00"), ("z_older", "2020-01-01T00:00:00+00:00")):
        RecordingWriter(root / "two" / name, {"dataflow": "x.yml", "start_time_utc": start}).close()
    rc, out, _ = _cli(capsys, "rec", "ls", "--root", str(root / "two"))
    names = [line.split()[0] for line in out.splitlines()[1:]]
    assert names.index("z_older") < names.index("a_newer")  # by start time, the newest last (not by name)
    rc, out, _ = _cli(capsys, "rec", "info", "demo-1", "--root", str(root), "--json")
    assert rc == 0
    info = json.loads(out)
    st = {s["name"]: s for s in info["streams"]}["mujoco_driver.sensors"]
    assert st["messages"] == 97 and st["missing_seq"] == 3 and st["gaps"] == [[40, 42]]
    assert st["rate_hz"] == pytest.approx(96 / 0.198) and st["time_gaps"] == 1
    assert st["duration_s"] == pytest.approx(0.198) and st["contract"] == "sensors"
    rc, out, _ = _cli(capsys, "rec", "info", "latest", "--root", str(root))
    assert rc == 0 and "missing seq: 40..42" in out
    rc, out, _ = _cli(capsys, "rec", "info", "latest", "--root", str(root), "--fields")
    assert rc == 0 and "mujoco_driver.sensors: t[1], wrench.left_foot[6]" in out and "theta_cmd[1], ok[1]" in out


def test_info_refuses_foreign_and_reports_truncated(root, tmp_path, capsys):
    f = root / "demo-1" / "ctrl.command.arrows"
    data = f.read_bytes()
    f.write_bytes(data[:-25])  # cut in the last batch: recovered, flagged, exit 1
    rc, out, err = _cli(capsys, "rec", "info", str(root / "demo-1"))
    assert rc == 1 and "TRUNCATED" in out and "cut short" in err
    f.write_bytes(data[:6])  # cut inside the header: refused
    rc, out, err = _cli(capsys, "rec", "info", str(root / "demo-1"))
    assert rc == 2 and "truncated" in err and "Traceback" not in err
    f.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(100))
    rc, out, err = _cli(capsys, "rec", "info", str(root / "demo-1"))
    assert rc == 2 and "not an Arrow IPC stream" in err
    png = tmp_path / "x.png"
    png.write_bytes(b"\x89PNG")
    rc, out, err = _cli(capsys, "rec", "info", str(png))
    assert rc == 2 and "not a recording directory" in err
    rc, out, err = _cli(capsys, "rec", "info", "nope", "--root", str(root))
    assert rc == 2 and "no recording 'nope'" in err
    # through the console entry point: a message, no traceback
    proc = subprocess.run([sys.executable, "-m", "contactflow.cli", "rec", "info", str(png)], capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "contactflow: error" in proc.stderr


def test_export_parquet_csv_mcap(root, tmp_path, capsys):
    out = tmp_path / "exp"
    assert _cli(capsys, "rec", "export", "demo-1", "--root", str(root), "--to", "parquet", "--out", str(out))[0] == 0
    t = pq.read_table(out / "mujoco_driver.sensors.parquet")
    assert t.num_rows == 97 and "wrench.left_foot[2]" in t.column_names and "seq" in t.column_names
    np.testing.assert_array_equal(t.column("wrench.left_foot[2]").to_numpy()[:3], [400.0, 401.0, 402.0])
    assert _cli(capsys, "rec", "export", "demo-1", "--root", str(root), "--to", "csv", "--out", str(out),
                "--streams", "ctrl.command")[0] == 0
    assert (out / "ctrl.command.csv").read_text().splitlines()[0].startswith('"seq","t"')
    assert _cli(capsys, "rec", "export", "demo-1", "--root", str(root), "--to", "mcap", "--out", str(out))[0] == 0
    from mcap.reader import make_reader

    with open(out / "demo-1.mcap", "rb") as f:
        reader = make_reader(f)
        summary = reader.get_summary()
        counts = {c.topic: summary.statistics.channel_message_counts[c.id] for c in summary.channels.values()}
        assert counts == {"/mujoco_driver/sensors": 97, "/ctrl/command": 97}
        assert {s.encoding for s in summary.schemas.values()} == {"jsonschema"}
        times, first = [], None
        for schema, channel, msg in reader.iter_messages(topics=["/mujoco_driver/sensors"]):
            times.append(msg.log_time)
            first = first or json.loads(msg.data)
        assert first["seq"] == 0 and first["fields"]["wrench.left_foot"][2] == 400.0
        assert times == sorted(times)


def test_signals_and_plot(root, tmp_path, capsys):
    rec = read_recording(root / "demo-1")
    t, v, labels = signal_values(rec, parse_signal("mujoco_driver.sensors:wrench.left_foot[2]"))
    assert v.shape == (97, 1) and v[0, 0] == 400.0 and labels == ["mujoco_driver.sensors:wrench.left_foot[2]"]
    assert signal_values(rec, parse_signal("mujoco_driver.sensors:wrench.left_foot"))[1].shape == (97, 6)
    assert signal_values(rec, parse_signal("ctrl.command[1]"))[1][5, 0] == 1.0
    for bad, msg in (("nodot", "expected"), ("ctrl.command:nope", "no field 'nope'"), ("ctrl.command:ok[3]", "out of range")):
        with pytest.raises(RecordingError, match=msg):
            signal_values(rec, parse_signal(bad))
    png = tmp_path / "p.png"
    rc, out, err = _cli(capsys, "plot", "demo-1", "--root", str(root), "mujoco_driver.sensors:wrench.left_foot[2]",
                        "ctrl.command:theta_cmd", "--out", str(png))
    assert rc == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    rc, out, err = _cli(capsys, "plot", "demo-1", "--root", str(root), "ctrl.command:bogus", "--out", str(png))
    assert rc == 2 and "no field 'bogus'" in err


def test_bench_lists_and_refuses_unknown(capsys):
    rc, out, _ = _cli(capsys, "bench", "--list")
    assert rc == 0 and "mujoco" in out and "seiko" in out
    rc, _, err = _cli(capsys, "bench", "nope")
    assert rc == 2 and "no benchmark 'nope'" in err


def test_bench_passes_help_to_the_script(capfd):
    rc = main(["bench", "seiko", "--help"])
    out = capfd.readouterr().out
    assert rc == 0 and "--baseline" in out and "OLD code" in out
    rc = main(["bench", "seiko", "--", "--help"])  # the older spelling still works
    assert rc == 0 and "--baseline" in capfd.readouterr().out


def test_info_lists_the_healthy_streams_and_names_the_one_with_a_cut_header(root, capsys):
    f = root / "demo-1" / "ctrl.command.arrows"
    f.write_bytes(f.read_bytes()[:30])  # cut inside its header: nothing to salvage
    rc, out, err = _cli(capsys, "rec", "info", "demo-1", "--root", str(root))
    assert rc == 2 and "Traceback" not in err
    line = next(ln for ln in out.splitlines() if ln.startswith("mujoco_driver.sensors"))
    assert " 97 " in line and "TRUNCATED" not in line  # the healthy stream is listed with its figures
    assert any(ln.startswith("ctrl.command") and "UNREADABLE" in ln for ln in out.splitlines())
    assert "stream 'ctrl.command' unreadable" in err and "ctrl.command.arrows" in err
    rc, out, _ = _cli(capsys, "rec", "info", "demo-1", "--root", str(root), "--json")
    info = json.loads(out)
    assert rc == 2 and [s["name"] for s in info["streams"]] == ["mujoco_driver.sensors"]
    assert info["unreadable"][0]["name"] == "ctrl.command" and "header" in info["unreadable"][0]["error"]


@pytest.mark.parametrize("cut", ["mid-batch", "no-eos"])
def test_export_and_plot_refuse_a_truncated_stream_unless_allowed(root, tmp_path, capsys, cut):
    f = root / "demo-1" / "ctrl.command.arrows"
    data = f.read_bytes()
    f.write_bytes(data[:-25] if cut == "mid-batch" else data[:-8])
    n = len(read_recording(root / "demo-1").stream("ctrl.command"))
    assert n == (88 if cut == "mid-batch" else 97)  # the last batch (seq 91..99, 9 messages) lost in the cut
    reason = "cut inside a message" if cut == "mid-batch" else "no end-of-stream marker"
    out_dir = tmp_path / "exp"
    for argv in (["rec", "export", "demo-1", "--to", "csv", "--out", str(out_dir)],
                 ["plot", "demo-1", "ctrl.command:theta_cmd", "--out", str(tmp_path / "p.png")]):
        rc, out, err = _cli(capsys, *argv, "--root", str(root))
        assert rc == 2 and "Traceback" not in err, err
        msg = [ln for ln in err.splitlines() if "ctrl.command" in ln]
        assert len(msg) == 1 and reason in msg[0] and "truncated at byte" in msg[0] and "t = " in msg[0]
        assert "--allow-truncated" in msg[0]
        rc, out, err = _cli(capsys, *argv, "--root", str(root), "--allow-truncated")
        assert rc == 0 and "warning: stream ctrl.command" in err and reason in err
    assert (tmp_path / "p.png").stat().st_size > 5000
    lines = (out_dir / "ctrl.command.csv").read_text().splitlines()
    assert len(lines) == 1 + n
    # a plot of a healthy stream of the same run is not refused
    rc, _, err = _cli(capsys, "plot", "demo-1", "mujoco_driver.sensors:t", "--root", str(root), "--out",
                      str(tmp_path / "q.png"))
    assert rc == 0 and "warning" not in err


def test_view_refuses_a_truncated_stream_unless_allowed(tmp_path, capsys):
    from contactflow.contracts.messages import port_specs
    from contactflow.robot import load_robot

    robot = load_robot("talos")
    spec = port_specs(robot)["sensors"]
    w = RecordingWriter(tmp_path / "v-1", {"robot": "talos", "dataflow": "x.yml"})
    s = w.stream("mujoco_driver.sensors", spec.size, {"source": "mujoco_driver/sensors", "contract": "sensors",
                                                      "layout": json.dumps([[f.name, f.size] for f in spec.fields])})
    for k in range(30):
        vals = {f.name: np.zeros(f.size) for f in spec.fields}
        vals["t"], vals["q"], vals["imu_quat"] = 0.002 * k, robot.q_default, [0, 0, 0, 1]
        s.append(k, 0.002 * k, spec.pack(vals), finished=k == 29)
        if k % 10 == 9:
            s.flush()
    w.close()
    f = tmp_path / "v-1" / "mujoco_driver.sensors.arrows"
    f.write_bytes(f.read_bytes()[:-30])
    rrd = tmp_path / "v.rrd"
    rc, _, err = _cli(capsys, "view", "v-1", "--root", str(tmp_path), "--no-meshes", "--rrd", str(rrd))
    assert rc == 2 and "stream mujoco_driver.sensors" in err and "truncated at byte" in err and not rrd.exists()
    rc, _, err = _cli(capsys, "view", "v-1", "--root", str(tmp_path), "--no-meshes", "--rrd", str(rrd),
                      "--allow-truncated")
    assert rc == 0 and "warning: stream mujoco_driver.sensors" in err and rrd.stat().st_size > 0
