"""The in-process SEIKO loop (contactflow.seiko.loop): the nodes' stages, wired as the graph wires them.

The fast tests check the wiring of one tick (which tick's ``desired`` each stage uses), the safe
command on a Controller QP failure and the admittance stage (14); the dora test checks that the
loop computes what the lockstep graph ``dataflows/seiko_talos.yml`` computes, bit for bit.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from contactflow.errors import ConfigError
from contactflow.contracts.messages import port_specs
from contactflow.robot import load_robot
from contactflow.seiko.admittance import AdmittanceParams, EffectorAdmittance
from contactflow.seiko.loop import SeikoPipeline, run_loop
from contactflow.seiko.stages import AdmittanceStage
from contactflow.sim.mujoco_robot import MujocoRobotSim, SimConfig, sensor_values

ROOT = Path(__file__).resolve().parent.parent
DORA = shutil.which("dora") or str(Path(sys.executable).parent / "dora")
SMOKE = ROOT / "robots/talos/scenarios/smoke_2s.yaml"


@pytest.fixture(scope="module")
def robot():
    return load_robot("talos")


@pytest.fixture(scope="module")
def standing(robot):
    """``sensors`` values of the robot at reset (standing, default posture)."""
    r = MujocoRobotSim(SimConfig(), robot).reset()
    return sensor_values(r, robot, fields=[f.name for f in port_specs(robot)["sensors"].fields])


def _command(robot, k):
    """``operator_command`` values: the left hand moving up at 2 cm/s (a different target every tick)."""
    effs = list(robot.contacts)
    vals = {f"twist.{e}": np.zeros(6) for e in effs}
    vals["twist.left_hand"] = np.array([0.0, 0.0, 0.02, 0.0, 0.0, 0.0])
    vals["enable"] = np.array([1.0 if robot.contacts[e].enabled else 0.0 for e in effs])
    vals["push"] = np.zeros(len(effs))
    vals["force_rate"] = np.zeros(len(effs))
    return vals


def test_lag_must_be_positive(robot):
    with pytest.raises(ConfigError, match="lag must be >= 1"):
        SeikoPipeline(robot, lag=0)


@pytest.mark.parametrize("lag", [1, 2])
def test_the_controller_and_the_input_filter_use_the_desired_of_tick_k_minus_lag(robot, standing, lag):
    p = SeikoPipeline(robot, lag=lag)
    outs = []
    for k in range(lag + 3):
        out = p.tick(k, k * 0.002, standing, _command(robot, k), finished=(k == 1))
        outs.append(out)
        used = p.controller.desired["q_d"]
        if k < lag:  # before the first delayed message: the Retargeting's reset state
            assert out.delayed_finished is False
        else:
            np.testing.assert_array_equal(used, outs[k - lag].desired["q_d"])
            assert out.delayed_finished == (k - lag == 1)
            # the input filter's clamp centre: the desired pose of tick k - lag
            c = p.filter.centers["left_hand"]
            np.testing.assert_allclose(pin.SE3ToXYZQUAT(c), outs[k - lag].desired["pose_d.left_hand"], atol=1e-12)
        assert out.command["ok"] == 1.0
        assert np.all(np.isfinite(out.command["theta_cmd"]))
    # the hand target moves: each tick's desired differs from the previous one
    assert not np.array_equal(outs[-1].desired["pose_d.left_hand"], outs[-2].desired["pose_d.left_hand"])
    assert p.times.shape == (3,) and np.all(p.times >= 0.0)
    # the operator ends at tick K = lag + 2: the Controller alone runs `lag` more ticks, on the
    # desired of K - lag + 1 .. K, and its last one carries `finished`
    out = p.tick(lag + 3, 0.0, standing, _command(robot, lag + 3), finished=True)
    outs.append(out)
    K = lag + 3
    for j in range(1, lag + 1):
        tail = p.tail_tick(K + j, standing)
        assert tail.targets is None and tail.desired is None
        np.testing.assert_array_equal(p.controller.desired["q_d"], outs[K + j - lag].desired["q_d"])
        assert tail.delayed_finished == (j == lag)


def test_the_planner_computes_the_input_filter_and_retargeting_of_the_full_pipeline(robot, standing):
    """SeikoPipeline(controller=False).plan: the real-time graph's planner (seiko_stack --no-controller)
    gives the targets and desired of the full pipeline's ticks, bit for bit (skipped ticks included),
    and builds no Controller."""
    full, planner = SeikoPipeline(robot, lag=2), SeikoPipeline(robot, lag=2, controller=False)
    assert planner.controller is None and planner.wrench_filter is None
    for k in range(8):
        # a tick after two skipped ones: the filter steps over them, with their own commands
        held = [_command(robot, k + 10), _command(robot, k + 20)] if k == 5 else []
        a = full.tick(k, k * 0.002, standing, _command(robot, k), skipped_commands=held)
        b = planner.plan(k, k * 0.002, _command(robot, k), skipped_commands=held)
        assert b.command is None and b.state is None
        np.testing.assert_array_equal(a.desired_vec, b.desired_vec)
        for name, v in a.targets.items():
            np.testing.assert_array_equal(v, b.targets[name])
    with pytest.raises(RuntimeError, match="plan"):
        planner.tick(8, 0.016, standing, _command(robot, 8))


@pytest.mark.parametrize("wrench_lag", [0, 1])
def test_the_wrench_filter_stage_stands_in_for_the_controllers_filter(robot, standing, wrench_lag):
    """wrench_lag 0: the Controller gets the filter (13) of tick k from the WrenchFilterStage, the
    same as its own (the standing robot's feet: plane contacts, bit for bit); wrench_lag 1: the
    filter's tick k - 1 output, a different but close command."""
    with pytest.raises(ConfigError, match="wrench_lag"):
        SeikoPipeline(robot, wrench_lag=2)
    own, split = SeikoPipeline(robot, lag=2), SeikoPipeline(robot, lag=2, wrench_lag=wrench_lag)
    assert own.wrench_filter is None and split.wrench_filter is not None
    diff = 0.0
    for k in range(12):
        a = own.tick(k, k * 0.002, standing, _command(robot, k)).command["theta_cmd"]
        b = split.tick(k, k * 0.002, standing, _command(robot, k)).command["theta_cmd"]
        diff = max(diff, float(np.max(np.abs(a - b))))
    if wrench_lag == 0:
        assert diff == 0.0
    else:
        assert diff < 1e-3


def test_sensor_lag_1_gives_the_controller_the_sensors_of_the_tick_before(robot, standing):
    """sensor_lag 1 (``seiko_controller --sensor-lag 1``): the Controller of tick k gets the sensors
    of tick k - 1 (None at tick 0: its reset readings); the same ticks fed those sensors with
    sensor_lag 0 give the same commands, bit for bit."""
    with pytest.raises(ConfigError, match="sensor_lag"):
        SeikoPipeline(robot, sensor_lag=2)
    lagged, direct = SeikoPipeline(robot, lag=2, sensor_lag=1), SeikoPipeline(robot, lag=2)
    # a different sensors message every tick (the soles loaded a little more each tick)
    seq = [{**standing, **{k: v * (1.0 + 0.01 * i) for k, v in standing.items() if k.startswith("wrench.")}}
           for i in range(8)]
    prev = None
    for k, s in enumerate(seq):
        a = lagged.tick(k, k * 0.002, s, _command(robot, k)).command["theta_cmd"]
        b = direct.tick(k, k * 0.002, prev, _command(robot, k)).command["theta_cmd"]
        np.testing.assert_array_equal(a, b)
        prev = s
    # and differs from using the sensors of tick k
    c = SeikoPipeline(robot, lag=2)
    assert any(not np.array_equal(c.tick(k, k * 0.002, s, _command(robot, k)).command["theta_cmd"],
                                  SeikoPipeline(robot, lag=2, sensor_lag=1).tick(k, k * 0.002, s, _command(robot, k)).command["theta_cmd"])
               for k, s in enumerate(seq[:1]))


def test_a_failed_controller_qp_sends_the_last_safe_command(robot, standing):
    p = SeikoPipeline(robot, lag=1)
    good = p.tick(0, 0.0, standing, _command(robot, 0)).command["theta_cmd"].copy()
    real_step = p.controller.ctrl.step

    def failing(**kw):
        o = real_step(**kw)
        return dataclasses.replace(o, ok=False, theta_cmd=np.full_like(o.theta_cmd, np.nan))

    p.controller.ctrl.step = failing
    out = p.tick(1, 0.002, standing, _command(robot, 1))
    assert out.command["ok"] == 0.0
    np.testing.assert_array_equal(out.command["theta_cmd"], good)
    assert p.controller.failures == 1


def test_admittance_stage_rotates_sole_wrenches_into_world_axes(robot):
    params = AdmittanceStage.default_params(robot, ["right_foot", "left_hand"])
    assert params["right_foot"] == AdmittanceParams.foot() and params["left_hand"] == AdmittanceParams.hand()
    with pytest.raises(ConfigError, match="unknown effector"):
        AdmittanceStage.default_params(robot, ["tail"])
    st = AdmittanceStage(robot, params)
    effs = list(robot.contacts)
    dspec = port_specs(robot)["desired"]
    R = pin.rpy.rpyToMatrix(0.1, -0.2, 0.3)
    desired = {f.name: np.zeros(f.size) for f in dspec.fields}
    for e in effs:
        desired[f"pose_d.{e}"] = pin.SE3ToXYZQUAT(pin.SE3(R, np.zeros(3)))
    desired["enabled"] = np.array([0.0 if e == "right_foot" else 1.0 for e in effs])  # only the right foot lifted
    w_local = np.array([10.0, -20.0, 120.0, 1.0, 5.0, -2.0])
    sensors = {f"wrench.{e}": w_local for e in effs if robot.contacts[e].type == "plane"}
    sensors |= {f"force.{e}": np.array([0.0, 30.0, 0.0]) for e in effs if robot.contacts[e].type == "point"}
    out = st.tick(sensors, desired)
    want = EffectorAdmittance(params["right_foot"]).step(np.concatenate([R @ w_local[:3], R @ w_local[3:]]), False)
    np.testing.assert_allclose(out["twist.right_foot"], want, atol=1e-12)
    assert np.linalg.norm(out["twist.right_foot"][:3]) > 0  # the sole force is above its deadband
    for e in effs:
        if e != "right_foot":  # enabled contacts, and effectors without admittance: zero
            np.testing.assert_array_equal(out[f"twist.{e}"], np.zeros(6))
    desired["enabled"][effs.index("left_hand")] = 0.0  # the hand released: its world force yields it
    out = st.tick(sensors, desired)
    np.testing.assert_allclose(out["twist.left_hand"],
                               EffectorAdmittance(params["left_hand"]).step(np.array([0.0, 30.0, 0.0]), False))
    assert out["twist.left_hand"][1] > 0


def _shipped_sensor_lag() -> int:
    """The ``--sensor-lag`` of the Controller in the shipped ``dataflows/seiko_talos.yml``."""
    import yaml

    (ctrl,) = [n for n in yaml.safe_load((ROOT / "dataflows/seiko_talos.yml").read_text())["nodes"]
               if n["id"] == "seiko_controller"]
    m = re.search(r"--sensor-lag (\d)", ctrl.get("args", ""))
    return int(m.group(1)) if m else 0


@pytest.mark.dora
@pytest.mark.parametrize("variant", ["shipped", pytest.param("other sensor lag", marks=pytest.mark.slow)])
def test_the_loop_computes_what_the_lockstep_graph_computes(robot, tmp_path, variant):
    """``dora run dataflows/seiko_talos.yml`` (lag 2, its Controller's ``--sensor-lag``) and
    ``run_loop(lag=2, sensor_lag=...)`` on the 2 s scenario: the same measured states and desired
    poses, bit for bit; also with the other ``--sensor-lag`` (0 <-> 1) in a copy of the graph."""
    from contactflow.recording.store import read_recording

    graph, sensor_lag = ROOT / "dataflows/seiko_talos.yml", _shipped_sensor_lag()
    if variant != "shipped":
        text = graph.read_text()
        old = f"--lag 2 --sensor-lag 1" if sensor_lag else "--lag 2"
        i = text.index("id: seiko_controller")
        j = text.index(old, i)
        sensor_lag = 1 - sensor_lag
        new = "--lag 2 --sensor-lag 1" if sensor_lag else "--lag 2"
        graph = tmp_path / "seiko_talos.yml"
        graph.write_text(text[:j] + new + text[j + len(old):])
    env = dict(os.environ, CONTACTFLOW_RECORDINGS=str(tmp_path / "recordings"), CONTACTFLOW_SCENARIO=str(SMOKE))
    proc = subprocess.run([DORA, "run", str(graph)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    run = next(p for p in sorted((tmp_path / "recordings").iterdir()) if p.is_dir() and not p.is_symlink())
    rec = read_recording(run)
    assert rec.manifest["configs"]["seiko_controller"].get("sensor_lag", 0) == sensor_lag
    L = run_loop(robot, SMOKE, lag=2, sensor_lag=sensor_lag)
    assert not L.fell and L.retargeting_failures == 0 and L.controller_failures == 0
    s = rec.stream("mujoco_driver.sensors")
    # the loop's row i is the state after tick i = the graph's sensors message seq i + 1
    rows = {int(q): i for i, q in enumerate(s.seq)}
    idx = [rows[i + 1] for i in range(len(L.t)) if i + 1 in rows]
    n = len(idx)
    assert n >= 990
    np.testing.assert_array_equal(s.field("q")[idx], L.q[:n])
    np.testing.assert_array_equal(s.field("tau")[idx], L.tau[:n])
    d = rec.stream("seiko_retargeting.desired")
    rows = {int(q): i for i, q in enumerate(d.seq)}
    idx = [rows[i] for i in range(n) if i in rows]
    np.testing.assert_array_equal(d.field("pose_d.left_hand")[idx, :3], L.pose_d["left_hand"][: len(idx)])


@pytest.mark.dora
@pytest.mark.slow
def test_the_loop_with_admittance_computes_what_the_multicontact_graph_computes(robot, tmp_path):
    """``dataflows/seiko_talos_multicontact.yml`` (lag 1, the admittance node on the feet and the
    left hand, the environment: wrist FT and the ball hand's joint-torque force estimate) on
    ``wall_touch_short.yaml`` (a hand contact enabled, then pushing) and ``run_loop`` with the same
    settings: the same measured states, bit for bit (~30 s)."""
    from contactflow.recording.store import read_recording

    scenario = ROOT / "robots/talos/scenarios/wall_touch_short.yaml"
    env = dict(os.environ, CONTACTFLOW_RECORDINGS=str(tmp_path), CONTACTFLOW_SCENARIO=str(scenario))
    proc = subprocess.run([DORA, "run", str(ROOT / "dataflows/seiko_talos_multicontact.yml")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    run = next(p for p in sorted(tmp_path.iterdir()) if p.is_dir() and not p.is_symlink())
    s = read_recording(run).stream("mujoco_driver.sensors")
    adm = AdmittanceStage.default_params(robot, ["left_foot", "right_foot", "left_hand"])  # the graph's --effectors
    L = run_loop(robot, scenario, environment=True, admittance=adm, lag=1)
    assert not L.fell
    rows = {int(q): i for i, q in enumerate(s.seq)}
    idx = [rows[i + 1] for i in range(len(L.t)) if i + 1 in rows]
    assert len(idx) >= 3900
    np.testing.assert_array_equal(s.field("q")[idx], L.q[: len(idx)])
    assert np.linalg.norm(s.field("force.left_hand")[idx[-1]]) > 1.0  # the hand touched the wall and pushes
