"""The complementary wrench filter (SEIKO eq. (13)) as its own stage / node (WrenchFilterStage,
nodes/wrench_filter.py): fed with the protocol of its contracts (sensors of tick k, the Controller's
flex_rate of tick k - 1; the Controller taking its output at tick k), the Controller gets the same
lam_tilde and commands as with its internal filter."""

import numpy as np
import pytest

from contactflow.contracts.messages import port_specs
from contactflow.contracts.ports import NODES
from contactflow.robot import load_robot
from contactflow.seiko.controller import ControllerConfig
from contactflow.seiko.filters import ComplementaryWrenchFilter, ComplementaryWrenchFilterBank
from contactflow.seiko.retargeting import RetargetingConfig, SeikoRetargeting
from contactflow.seiko.stages import ControllerStage, WrenchFilterStage, pack_desired

N_TICKS = 110
ENABLE, RELEASE = 50, 90  # ticks: the left hand enabled as a contact, released


@pytest.fixture(scope="module")
def robot():
    return load_robot("talos")


def _roundtrip(spec, values):
    """Pack and unpack through the port contract, as the node's messages go."""
    return spec.unpack(spec.pack(values))


def _scenario(robot, specs):
    """Per tick: (sensors, desired or None, integrating). Measured sole wrenches off the model's
    (a slow sway, a step and noise), a hand that touches and pushes (force in the world),
    shadow mode for a few ticks, then the left hand enabled as a contact (its R_c is the
    configured one), then released."""
    rng = np.random.default_rng(3)
    r0 = SeikoRetargeting(RetargetingConfig(), robot).reset()
    des0 = pack_desired(robot, r0)
    w = robot.weight / 2.0
    out = []
    for k in range(N_TICKS):
        t = 0.002 * k
        sensors = {f.name: np.zeros(f.size) for f in specs["sensors"].fields}
        sensors["t"][:] = t
        sensors["q"][:] = robot.q_default
        sensors["imu_quat"][:] = [0.0, 0.0, 0.0, 1.0]
        sensors["tau"][:] = 5.0 * np.sin(0.3 * np.arange(robot.n) + t)
        sway = 40.0 * np.sin(2.0 * np.pi * 3.0 * t) + (25.0 if k >= 30 else 0.0)
        for e, sign in (("left_foot", 1.0), ("right_foot", -1.0)):
            sensors[f"wrench.{e}"][:] = [0.0, 0.0, w + sign * sway, 0.0, 0.0, 0.0] + rng.normal(0.0, 2.0, 6)
        if "force.left_hand" in sensors and k >= 40:
            sensors["force.left_hand"][:] = [-12.0, 1.0, 0.5] + rng.normal(0.0, 0.5, 3)
        desired = None
        if k >= ENABLE:  # the Retargeting enables the left hand, then releases it
            vals = {key: np.array(v, dtype=float, copy=True) for key, v in des0.items()}
            i = list(robot.contacts).index("left_hand")
            vals["enabled"][i] = 1.0 if k < RELEASE else 0.0
            vals["lam_d.left_hand"][:3] = [0.0, 0.0, 5.0] if k < RELEASE else 0.0
            desired = vals
        out.append((sensors, desired, not (15 <= k < 22)))
    return out


def _run(robot, specs, ticks, *, use_node: bool, lag: int = 0):
    ctrl = ControllerStage(robot, ControllerConfig(), RetargetingConfig())
    filt = WrenchFilterStage(robot, ControllerConfig())
    feedback, sent, rows = None, [], []
    for k, (sensors, desired, integrating) in enumerate(ticks):
        s = _roundtrip(specs["sensors"], sensors)
        d = None if desired is None else _roundtrip(specs["desired"], desired)
        filtered = None
        if use_node:
            sent.append(_roundtrip(specs["filtered_wrench"], filt.tick(s, feedback)))
            filtered = sent[k - lag] if k >= lag else None
        command, state = ctrl.tick(k, s, d, integrating=integrating, filtered=filtered)
        if use_node:
            feedback = _roundtrip(specs["flex_wrench_rate"], ctrl.flex_rate_values())
        rows.append((command["theta_cmd"].copy(), {e: state[f"lam_tilde.{e}"].copy() for e in robot.contacts},
                     np.array(ctrl.ctrl.filter_feedback[1])))
    return rows


@pytest.fixture(scope="module")
def runs(robot):
    specs = port_specs(robot)
    ticks = _scenario(robot, specs)
    return ticks, {name: _run(robot, specs, ticks, **kw) for name, kw in (
        ("inside", {"use_node": False}), ("node", {"use_node": True}), ("node_lag1", {"use_node": True, "lag": 1}))}


def test_stage_gives_the_controllers_lam_tilde(runs):
    ticks, r = runs
    inside, outside = r["inside"], r["node"]
    active = np.array([x[2] for x in inside])
    # the scenario covers the filter's cases: active feet, shadow mode, an enabled point contact, released
    assert active[:15, :2].all() and not active[18].any() and active[ENABLE + 10, 2] and not active[RELEASE + 5, 2]
    for k, ((cmd_i, lt_i, _), (cmd_o, lt_o, _)) in enumerate(zip(inside, outside)):
        for e in ("left_foot", "right_foot"):
            if k < ENABLE:  # plane contacts: the same floating-point operations, bit for bit
                np.testing.assert_array_equal(lt_o[e], lt_i[e], err_msg=f"tick {k} {e}")
            else:  # then the hand's rounding (filtered in the world frame) reaches the QP
                np.testing.assert_allclose(lt_o[e], lt_i[e], rtol=1e-12, atol=1e-9, err_msg=f"tick {k} {e}")
        for e in ("left_hand", "right_hand"):  # point contacts: filtered in the world frame, rotated
            np.testing.assert_allclose(lt_o[e], lt_i[e], rtol=0, atol=1e-9, err_msg=f"tick {k} {e}")
        np.testing.assert_allclose(cmd_o, cmd_i, rtol=0, atol=1e-9, err_msg=f"tick {k}")
    # and the filter did filter: lam_tilde is off lam_read while active
    read = ticks[60][0]["wrench.left_foot"][2]
    assert abs(inside[60][1]["left_foot"][2] - read) > 1.0


def test_one_tick_lag_variant_stays_close(runs):
    """--wrench-lag 1 (the filter beside the Controller's QP): one tick older lam_tilde; the
    commands stay within a micro-radian of the exact protocol's over the scenario."""
    _, r = runs
    dev = max(float(np.max(np.abs(a[0] - b[0]))) for a, b in zip(r["node"], r["node_lag1"]))
    assert 0.0 < dev < 1e-6


def test_bank_matches_the_single_filter_bit_for_bit():
    rng = np.random.default_rng(0)
    singles = [ComplementaryWrenchFilter(6, 0.2, 0.002), ComplementaryWrenchFilter(3, 0.2, 0.002)]
    bank = ComplementaryWrenchFilterBank(2, 0.2, 0.002)
    for k in range(200):
        read = rng.normal(size=(2, 6))
        read[1, 3:] = 0.0
        ldot = rng.normal(size=(2, 6)) * 50.0
        ldot[1, 3:] = 0.0
        active = np.array([k % 37 != 5, k % 23 > 3])
        out = bank.update(read, ldot, active, np.ones(2, dtype=bool))
        for i, (f, d) in enumerate(zip(singles, (6, 3))):
            np.testing.assert_array_equal(out[i, :d], f.update(read[i, :d], ldot[i, :d], bool(active[i])))


def test_contracts_and_ports(robot):
    specs = port_specs(robot)
    effs = list(robot.contacts)
    assert [f.name for f in specs["filtered_wrench"].fields] == [f"lam_tilde.{e}" for e in effs]
    assert specs["flex_wrench_rate"].size == 6 * len(effs) + len(effs)
    assert {p: v.contract for p, v in NODES["wrench_filter"].inputs.items()} == {"sensors": "sensors",
                                                                                "flex_rate": "flex_wrench_rate"}
    wrench = NODES["seiko_controller"].inputs["wrench"]
    assert wrench.contract == "filtered_wrench" and wrench.optional
    assert NODES["seiko_controller"].outputs["flex_rate"].optional


@pytest.mark.dora
@pytest.mark.slow
def test_node_in_the_lockstep_graph_computes_the_internal_filter(robot, tmp_path):
    """``dataflows/seiko_talos.yml`` with the wrench_filter node wired (``--wrench-lag 0``) on the
    2 s scenario: the robot's measured states are those of the in-process loop with the
    Controller's internal filter, bit for bit; the filter's output is recorded."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    import yaml

    from contactflow.recording.store import read_recording
    from contactflow.seiko.loop import run_loop

    root = Path(__file__).resolve().parent.parent
    dora = shutil.which("dora") or str(Path(sys.executable).parent / "dora")
    smoke = root / "robots/talos/scenarios/smoke_2s.yaml"
    flow = yaml.safe_load((root / "dataflows/seiko_talos.yml").read_text())
    bp = {"queue_size": 100, "queue_policy": "backpressure"}
    for n in flow["nodes"]:
        if n["path"].endswith(".py"):  # a script path (installed executables are found on PATH)
            n["path"] = str((root / "dataflows" / n["path"]).resolve())
        if n["id"] == "seiko_controller":
            n["args"] += " --wrench-lag 0"
            n["inputs"]["wrench"] = {"source": "wrench_filter/wrench", **bp}
            n["outputs"] = ["command", "flex_rate", "log"]
        if n["id"] == "recorder":
            n["inputs"]["wrench_filter"] = {"source": "wrench_filter/log", "queue_size": 1000, "queue_policy": "backpressure"}
        if n.get("args"):
            n["args"] = n["args"].replace("../robots/", f"{root}/robots/")
    flow["nodes"].append({"id": "wrench_filter", "path": str(root / "nodes/wrench_filter.py"), "args": "--robot talos",
                          "inputs": {"sensors": {"source": "mujoco_driver/sensors", **bp},
                                     "flex_rate": {"source": "seiko_controller/flex_rate", **bp}},
                          "outputs": ["wrench", "log"]})
    df = tmp_path / "seiko_talos_wrench_filter.yml"
    df.write_text(yaml.safe_dump(flow, sort_keys=False))
    env = dict(os.environ, CONTACTFLOW_RECORDINGS=str(tmp_path / "rec"), CONTACTFLOW_SCENARIO=str(smoke),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.run([dora, "run", str(df)], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    run = next(p for p in sorted((tmp_path / "rec").iterdir()) if p.is_dir() and not p.is_symlink())
    rec = read_recording(run)
    L = run_loop(robot, smoke, lag=2)  # the internal filter
    assert not L.fell and L.controller_failures == 0
    s = rec.stream("mujoco_driver.sensors")
    rows = {int(q): i for i, q in enumerate(s.seq)}
    idx = [rows[i + 1] for i in range(len(L.t)) if i + 1 in rows]
    n = len(idx)
    assert n >= 990
    np.testing.assert_array_equal(s.field("q")[idx], L.q[:n])
    w = rec.stream("wrench_filter.wrench")
    assert len(w) >= 990
    fz = w.field("lam_tilde.left_foot")[:, 2]
    assert np.all(np.isfinite(fz)) and np.all(fz > 100.0)  # the left sole carries about half the weight
