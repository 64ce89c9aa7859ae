"""The rerun viewer: a recorded run becomes a non-trivial .rrd file (robot links with meshes, wrench
arrows, effector points and tracking plots at several times), read back with rerun's own reader and
compared with an independent forward-kinematics computation; bad input is refused; the viewer node
writes an .rrd file in a headless `dora run`.
"""

import collections
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pinocchio as pin
import pyarrow as pa
import pytest

import yaml
from rerun.chunk import RrdReader

from contactflow.cli import main as cli_main
from contactflow.errors import ConfigError, ContractError
from contactflow.contracts.messages import port_specs
from contactflow.recording.store import RecordingError, RecordingWriter
from contactflow.robot import load_robot
from contactflow.recording.viewer import MESH_SUFFIXES, RerunLogger, log_recording, open_recording, urdf_visuals

ROOT = Path(__file__).resolve().parent.parent
DORA = shutil.which("dora") or str(Path(sys.executable).parent / "dora")
N_TICKS = 40
HAND_OFFSET_M = np.array([0.0, 0.0, 0.01])  # desired left hand 1 cm above the measured one
FZ_N = {"left_foot": 400.0, "right_foot": 380.0}
TAU_LEFT = np.array([4.0, -8.0, 0.0])  # left sole torque [N m]: CoP at (0.02, 0.01) m in the sole frame


@pytest.fixture(scope="module")
def robot():
    return load_robot("talos")


def _q(robot, k):
    q = robot.q_default.copy()
    j = robot.model.joints[robot.model.getJointId("arm_left_4_joint")].idx_q
    q[j] += 0.01 * k  # the left elbow moves: the arm links move between ticks
    return q


def _write_run(robot, run_dir: Path) -> Path:
    """A small run with the real Talos contracts: sensors, desired and controller_state streams."""
    specs = port_specs(robot)
    data = robot.model.createData()
    w = RecordingWriter(run_dir, {"robot": "talos", "dataflow": "synthetic"})
    streams = {}
    for name, contract in (("mujoco_driver.sensors", "sensors"), ("seiko_retargeting.desired", "desired"),
                           ("seiko_controller.state", "controller_state")):
        spec = specs[contract]
        streams[contract] = w.stream(name, spec.size, {"source": name.replace(".", "/"), "contract": contract,
                                                       "layout": json.dumps([[f.name, f.size] for f in spec.fields])})
    for k in range(N_TICKS):
        t, q = 0.002 * k, _q(robot, k)
        pin.framesForwardKinematics(robot.model, data, q)
        sens = {f.name: np.zeros(f.size) for f in specs["sensors"].fields}
        sens["t"], sens["q"], sens["imu_quat"] = t, q, [0, 0, 0, 1]
        sens["wrench.left_foot"] = np.r_[0, 0, FZ_N["left_foot"], TAU_LEFT]
        sens["wrench.right_foot"] = np.r_[0, 0, FZ_N["right_foot"], 0, 0, 0]
        des = {f.name: np.zeros(f.size) for f in specs["desired"].fields}
        des["q_d"] = q
        for c, s in robot.contacts.items():
            M = data.oMf[s.frame_id]
            p = M.translation + (HAND_OFFSET_M if c == "left_hand" else 0.0)
            des[f"pose_d.{c}"] = np.r_[p, pin.Quaternion(M.rotation).coeffs()]
        for c in FZ_N:
            des[f"lam_d.{c}"] = np.r_[0, 0, FZ_N[c] + 10.0, 0, 0, 0]
        st = {f.name: np.zeros(f.size) for f in specs["controller_state"].fields}
        st["q_flex"], st["solve_time"] = q, 1e-3
        for c in FZ_N:
            st[f"lam_tilde.{c}"] = np.r_[0, 0, FZ_N[c] - 5.0, 0, 0, 0]
        fin = k == N_TICKS - 1
        streams["sensors"].append(k, t, specs["sensors"].pack(sens), fin)
        streams["desired"].append(k, t, specs["desired"].pack(des), fin)
        streams["controller_state"].append(k, t, specs["controller_state"].pack(st), fin)
    w.close()
    return run_dir


def _read_rrd(path: Path) -> dict:
    """entity path -> {"static": set of components, "rows": [(t_ns, {component: value})]} (temporal rows)."""
    out = collections.defaultdict(lambda: {"static": set(), "rows": []})
    for chunk in RrdReader(path).stream().to_chunks():
        rb = chunk.to_record_batch()
        comps = [n for n in rb.schema.names if ":" in n]
        e = out[chunk.entity_path]
        if chunk.is_static:
            e["static"].update(comps)
            continue
        ts = rb.column("t").cast(pa.int64()).to_pylist()
        cols = {c: rb.column(c).to_pylist() for c in comps}
        for i, t_ns in enumerate(ts):
            e["rows"].append((t_ns, {c: cols[c][i] for c in comps}))
    for e in out.values():
        e["rows"].sort(key=lambda r: r[0])
    return dict(out)


@pytest.fixture(scope="module")
def viewed(robot, tmp_path_factory):
    run = _write_run(robot, tmp_path_factory.mktemp("rec") / "run")
    rrd = log_recording(run, run / "view.rrd", every=5, robot=robot)
    return run, rrd, _read_rrd(rrd)


def test_rrd_has_robot_links_with_meshes_at_several_times(robot, viewed):
    _, rrd, ent = viewed
    visuals = urdf_visuals(robot.urdf_path)
    links = {v.link for v in visuals}
    assert len(links) > 40 and rrd.stat().st_size > 100_000
    times = None
    for link in links:
        rows = ent[f"/world/robot/{link}"]["rows"]
        assert len(rows) == 9, link  # ticks 0, 5, ..., 35 and the finished tick 39
        assert times is None or [r[0] for r in rows] == times
        times = [r[0] for r in rows]
    assert times[:2] == [0, 10_000_000] and times[-1] == 78_000_000  # t [ns]: 0, 0.010 s, ..., 0.078 s
    meshes = [v for v in visuals if v.kind == "mesh"]
    assert all(v.mesh_path is not None and v.mesh_path.suffix.lower() in MESH_SUFFIXES for v in meshes)
    assets = [p for p, e in ent.items() if "Asset3D:blob" in e["static"]]
    assert len(assets) == len(meshes) > 30


def test_link_poses_match_forward_kinematics(robot, viewed):
    """The logged pose of the moving left forearm equals pinocchio's FK of the recorded q."""
    _, _, ent = viewed
    data = robot.model.createData()
    fid = robot.model.getFrameId("arm_left_7_link")
    rows = ent["/world/robot/arm_left_7_link"]["rows"]
    for (t_ns, comps), k in zip(rows, [0, 5, 10, 15, 20, 25, 30, 35, 39]):
        assert t_ns == round(0.002 * k * 1e9)
        pin.framesForwardKinematics(robot.model, data, _q(robot, k))
        M = data.oMf[fid]
        np.testing.assert_allclose(comps["Transform3D:translation"][0], M.translation, atol=1e-6)
        qx = np.array(comps["Transform3D:quaternion"][0])
        assert abs(abs(qx @ pin.Quaternion(M.rotation).coeffs()) - 1) < 1e-6
    p0, p1 = (np.array(rows[i][1]["Transform3D:translation"][0]) for i in (0, -1))
    assert np.linalg.norm(p1 - p0) > 0.01  # it really moved


def test_wrench_arrows_are_world_forces_at_the_centre_of_pressure(robot, viewed):
    _, _, ent = viewed
    data = robot.model.createData()
    for c in FZ_N:
        for kind, fz in (("measured", FZ_N[c]), ("desired", FZ_N[c] + 10.0)):
            e = ent[f"/world/wrench/{c}/{kind}"]
            assert len(e["rows"]) == 9 and {"Arrows3D:colors", "Arrows3D:radii"} <= e["static"]
            for _, comps in e["rows"]:
                np.testing.assert_allclose(comps["Arrows3D:vectors"][0], [0, 0, fz * 1e-3], atol=1e-5)  # feet flat: 1 mm/N
    pin.framesForwardKinematics(robot.model, data, _q(robot, 0))
    M = data.oMf[robot.contacts["left_foot"].frame_id]
    cop = np.array([-TAU_LEFT[1] / FZ_N["left_foot"], TAU_LEFT[0] / FZ_N["left_foot"], 0.0])
    origin = ent["/world/wrench/left_foot/measured"]["rows"][0][1]["Arrows3D:origins"][0]
    np.testing.assert_allclose(origin, M.translation + M.rotation @ cop, atol=1e-5)


def test_effector_points_and_tracking_plots(robot, viewed):
    _, _, ent = viewed
    n_eff = len(robot.contacts)
    for kind in ("measured", "desired"):
        e = ent[f"/world/effectors/{kind}"]
        assert len(e["rows"]) == 9 and all(len(r[1]["Points3D:positions"]) == n_eff for r in e["rows"])
        assert "Points3D:labels" in e["static"]
    for c in FZ_N:
        for kind, fz in (("measured", FZ_N[c]), ("desired", FZ_N[c] + 10.0), ("filtered", FZ_N[c] - 5.0)):
            rows = ent[f"/plots/fz/{c}/{kind}"]["rows"]
            assert [r[1]["Scalars:scalars"][0] for r in rows] == [pytest.approx(fz)] * 9
    err = [r[1]["Scalars:scalars"][0] for r in ent["/plots/effector_error/left_hand"]["rows"]]
    assert err == [pytest.approx(0.01, abs=1e-9)] * 9
    assert [r[1]["Scalars:scalars"][0] for r in ent["/plots/effector_error/right_foot"]["rows"]] == [pytest.approx(0)] * 9
    assert len(ent["/plots/solve_time"]["rows"]) == 9


def test_fallback_without_meshes_draws_boxes_and_says_so(robot, tmp_path, caplog):
    rec = open_recording(tmp_path / "nomesh.rrd")
    with caplog.at_level("WARNING", logger="contactflow.recording.viewer"):
        lg = RerunLogger(robot, rec, meshes=False)
    lg.log_sensors({"q": robot.q_default}, 0.0, 0)
    lg.close()
    assert lg.fallbacks and all(r == "meshes disabled" for _, r in lg.fallbacks)
    assert "drawn as boxes" in caplog.text
    ent = _read_rrd(tmp_path / "nomesh.rrd")
    assert not [p for p, e in ent.items() if "Asset3D:blob" in e["static"]]
    assert "Boxes3D:half_sizes" in ent["/world/robot/leg_left_4_link/visual_0"]["static"]
    assert len(ent["/world/robot/leg_left_4_link"]["rows"]) == 1


def test_bad_messages_are_refused_with_the_field_name(robot, tmp_path):
    lg = RerunLogger(robot, open_recording(tmp_path / "bad.rrd"), meshes=False)
    with pytest.raises(ContractError, match="'q' has 31 values, expected 32"):
        lg.log_sensors({"q": np.zeros(31)}, 0.0, 0)
    with pytest.raises(ContractError, match="missing field 'q'"):
        lg.log_sensors({}, 0.0, 0)
    with pytest.raises(ContractError, match="non-finite value.*wrench.left_foot"):
        lg.log_sensors({"q": robot.q_default, "wrench.left_foot": np.r_[0, 0, np.nan, 0, 0, 0]}, 0.0, 0)
    with pytest.raises(ContractError, match="pose_d.left_hand"):
        lg.log_desired({"pose_d.left_hand": np.zeros(3)}, 0.0, 0)
    lg.close()
    with pytest.raises(ConfigError):
        RerunLogger(robot, open_recording(tmp_path / "x.rrd"), force_scale_m_per_n=0.0)
    with pytest.raises(ConfigError, match="exactly one"):
        open_recording()


def test_recording_without_sensors_is_refused(tmp_path):
    w = RecordingWriter(tmp_path / "run", {"robot": "talos"})
    w.stream("x.y", 2, {"layout": json.dumps([["a", 2]])}).append(0, 0.0, np.zeros(2))
    w.close()
    with pytest.raises(RecordingError, match="no sensors stream"):
        log_recording(tmp_path / "run", tmp_path / "o.rrd")
    with pytest.raises(RecordingError):
        log_recording(tmp_path / "missing", tmp_path / "o.rrd")


def test_cli_view_writes_the_rrd_file(viewed, tmp_path, capsys):
    run, _, _ = viewed
    out = tmp_path / "cli.rrd"
    assert cli_main(["view", str(run), "--rrd", str(out), "--every", "20", "--no-progress", "--no-meshes"]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    ent = _read_rrd(out)
    assert len(ent["/world/wrench/left_foot/measured"]["rows"]) == 3  # ticks 0, 20 and the finished 39
    assert cli_main(["view", str(tmp_path / "nope"), "--no-progress"]) == 2


@pytest.mark.dora
def test_viewer_node_writes_an_rrd_file_headless(robot, tmp_path):
    """replay (paced) -> viewer in a real dora run, without a display: the node saves the .rrd file."""
    run = _write_run(robot, tmp_path / "rec" / "run")
    rrd = tmp_path / "node.rrd"
    df = tmp_path / "view.yml"
    df.write_text(f"""
nodes:
  - id: mujoco_driver
    path: {ROOT}/nodes/replay.py
    args: --recording {run} --streams mujoco_driver.sensors,seiko_retargeting.desired=desired --mode paced
    outputs: [sensors, desired]
  - id: viewer
    path: {ROOT}/nodes/viewer.py
    args: --robot talos --every 5 --spawn --rrd {rrd}
    inputs:
      sensors: {{source: mujoco_driver/sensors, queue_size: 1000, queue_policy: backpressure}}
      desired: {{source: mujoco_driver/desired, queue_size: 1000, queue_policy: backpressure}}
""")  # the test is the file, not dora's delivery: on a loaded machine dora's drop_oldest path lost ticks 5-39
    # unannounced even behind 1000-deep queues (1 run in 2 with five busy loops on 2 cores, CI of 60b2e66);
    # backpressure queues (dora 1.1: the daemon's lossless path) lost none in 20 such runs
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    proc = subprocess.run([DORA, "run", str(df), "--stop-after", "60s"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "no display" in out
    assert re.search(r"\[viewer\] logged \d+ messages \(0 malformed skipped, \d+ never arrived\)", out), out[-3000:]
    ent = _read_rrd(rrd)
    assert len(ent["/world/robot/leg_left_4_link"]["rows"]) >= 3
    assert len(ent["/world/wrench/left_foot/measured"]["rows"]) >= 3
    assert len(ent["/world/wrench/left_foot/desired"]["rows"]) >= 3


# dataflows/seiko_talos_view.yml = seiko_talos.yml + the viewer (on drop-oldest queues): rendered from
# one description, checked by tests/test_graph_sources.py.
