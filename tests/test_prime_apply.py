"""``contactflow prime apply``: a PRIME result -> robot variant -> the models every node loads.

The PRIME output is synthetic but written by the estimator's own writer
(:func:`contactflow.prime.io.write_result`): Talos' base body with 6.3 kg 5 cm above the base
origin (the payload of ``dataflows/prime_seiko_talos_payload.yml``) as the identified body.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
import yaml

pytest.importorskip("crocoddyl")

from contactflow.errors import ConfigError, ModelError  # noqa: E402
from contactflow.prime.apply import apply_estimate, identified_bodies  # noqa: E402
from contactflow.robot import load_robot  # noqa: E402

PAYLOAD_KG, PAYLOAD_POS = 6.3, np.array([0.0, 0.0, 0.05])


def _identified(base) -> pin.Inertia:
    I0 = base.model.inertias[1]
    return I0 + pin.Inertia(PAYLOAD_KG, PAYLOAD_POS, np.diag([2e-3, 3e-3, 4e-3]))


def _write_run(tmp_path, identified=True, name="run_prime"):
    from contactflow.prime.fie import PrimeResult
    from contactflow.prime.inertia import theta_from_inertia
    from contactflow.prime.io import write_result
    from contactflow.prime.model import load_prime_robot

    pr = load_prime_robot("talos")
    T, nq, nv, nc = 3, pr.model.nq, pr.model.nv, len(pr.points)
    th_nom = theta_from_inertia(pr.model.inertias[1])
    th = theta_from_inertia(_identified(pr.robot)) if identified else th_nom
    res = PrimeResult(t=np.arange(T + 1) * 0.01, q=np.tile(pr.robot.q_default, (T + 1, 1)), v=np.zeros((T + 1, nv)),
                      tau=np.zeros((T, nv - 6)), force_W=np.zeros((T, nc, 3)), contact_names=pr.contact_names,
                      theta=th, theta_nominal=th_nom, bodies=("root_joint",), cost=2.9, iterations=5, converged=True,
                      solve_time_s=1.0, history=[], defect_norm=0.0, identified=identified)
    run = tmp_path / name
    write_result(res, pr, run, np.arange(T + 1), {"source_recording": "/x/prime_talos_payload", "stream":
                                                   "mujoco_driver.sensors", "decimation": 5, "config": {"dt_s": 0.01}})
    return run


@pytest.fixture(scope="module")
def variant(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("apply")
    run = _write_run(tmp)
    path = apply_estimate(run, tmp / "talos_corrected")
    return tmp, run, path


def test_round_trip_pinocchio(variant):
    tmp, run, path = variant
    base, corr = load_robot("talos"), load_robot(path.parent)
    target = _identified(base)
    I = corr.model.inertias[1]
    assert corr.name == "talos_corrected"
    assert I.mass == pytest.approx(base.model.inertias[1].mass + PAYLOAD_KG, abs=1e-9)
    np.testing.assert_allclose(I.lever, target.lever, atol=1e-12)
    np.testing.assert_allclose(I.inertia, target.inertia, atol=1e-10)
    assert corr.mass == pytest.approx(base.mass + PAYLOAD_KG, abs=1e-9)
    # the base robot otherwise unchanged
    for j in range(2, base.model.njoints):
        np.testing.assert_array_equal(corr.model.inertias[j].toDynamicParameters(),
                                      base.model.inertias[j].toDynamicParameters())
        assert corr.model.jointPlacements[j] == base.model.jointPlacements[j]
    assert corr.joint_names == base.joint_names and list(corr.contacts) == list(base.contacts)
    for k in ("K", "q_min", "q_max", "v_max", "tau_max", "q_default"):
        np.testing.assert_array_equal(getattr(corr, k), getattr(base, k))
    doc = yaml.safe_load(path.read_text())
    assert doc["base"] == "talos" and doc["prime_provenance"]["source_run"] == str(run.resolve())
    assert doc["prime_provenance"]["prime_settings"] == {"dt_s": 0.01} and doc["prime_provenance"]["written_utc"]


def test_found_by_name_on_the_robot_path(variant, monkeypatch):
    tmp, _, path = variant
    monkeypatch.setenv("CONTACTFLOW_ROBOT_PATH", str(tmp))
    assert load_robot("talos_corrected").model.inertias[1].mass == pytest.approx(load_robot(path).model.inertias[1].mass)


def test_mujoco_model_sees_the_correction(variant):
    import mujoco

    from contactflow.sim.mujoco_model import build_mujoco_model, root_link, set_pinocchio_configuration

    tmp, _, path = variant
    base = load_robot("talos")
    # bodies with links welded to them (head on torso_2, forearm and hand on arm_right_4): the
    # MuJoCo body gets the rest, the composite must equal the pinocchio body
    extra = {}
    for j, pos in (("torso_2_joint", [0.05, -0.02, 0.1]), ("arm_right_4_joint", [0.0, 0.03, -0.2])):
        I = base.model.inertias[base.model.getJointId(j)] + pin.Inertia(2.0, np.array(pos), np.diag([1e-3, 2e-3, 3e-3]))
        M = I.inertia
        extra[j] = {"mass_kg": float(I.mass), "com_m": I.lever.tolist(),
                    "inertia_kgm2": [float(M[0, 0]), float(M[0, 1]), float(M[1, 1]), float(M[0, 2]), float(M[1, 2]), float(M[2, 2])]}
    f = tmp / "welded.yaml"
    f.write_text(yaml.safe_dump({"base": "talos", "name": "welded", "body_inertias": extra}))
    welded = load_robot(f)
    assert welded.mass == pytest.approx(base.mass + 4.0, abs=1e-9)
    for robot in (base, load_robot(path.parent), welded):
        m = build_mujoco_model(robot)
        d = mujoco.MjData(m)
        set_pinocchio_configuration(m, d, robot, robot.q_default)
        mujoco.mj_forward(m, d)
        root = m.body(root_link(robot)).id
        assert m.body_subtreemass[root] == pytest.approx(robot.mass, abs=1e-9)
        c = pin.centerOfMass(robot.model, robot.model.createData(), robot.q_default)
        np.testing.assert_allclose(d.subtree_com[root], c, atol=1e-9)


def test_identified_bodies_reads_the_parameters_stream(variant):
    _, run, _ = variant
    robot, bodies, report = identified_bodies(run)
    assert robot == "talos" and list(bodies) == ["root_joint"] and report["identified"]
    assert bodies["root_joint"]["mass_kg"] == pytest.approx(load_robot("talos").model.inertias[1].mass + PAYLOAD_KG)


def test_refusals(tmp_path, variant):
    _, run, path = variant
    with pytest.raises(ConfigError, match="no identified parameters"):
        apply_estimate(_write_run(tmp_path, identified=False, name="noid"), tmp_path / "a")
    with pytest.raises(ConfigError, match="exists"):
        apply_estimate(run, path.parent)
    apply_estimate(run, path.parent, force=True)  # an apply folder is replaced with --force
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("x")
    with pytest.raises(ConfigError, match="not a robot folder written by"):
        apply_estimate(run, tmp_path / "mine", force=True)
    assert (tmp_path / "mine" / "notes.txt").exists()
    with pytest.raises(ConfigError, match="differs from the PRIME run's robot"):
        apply_estimate(run, tmp_path / "b", robot="g1")
    other = tmp_path / "talos" / "robot.yaml"  # called talos, but its base body is not the run's
    other.parent.mkdir()
    other.write_text(yaml.safe_dump({"base": str(load_robot("talos").file), "name": "talos", "body_inertias": {
        "root_joint": {"mass_kg": 10.0, "com_m": [0, 0, 0], "inertia_kgm2": [0.1, 0, 0.1, 0, 0, 0.1]}}}))
    with pytest.raises(ConfigError, match="not the run's base robot"):
        apply_estimate(run, tmp_path / "b", robot=str(other))
    with pytest.raises(ConfigError, match="not a PRIME estimate output|no prime_estimator.parameters"):
        apply_estimate(tmp_path / "mine", tmp_path / "c")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_cli(tmp_path, variant, capsys):
    from contactflow.cli import main

    _, run, _ = variant
    assert main(["prime", "apply", str(run), "--out", str(tmp_path / "tc"), "--name", "talos_c"]) == 0
    assert "talos_c" in capsys.readouterr().out
    assert main(["prime", "apply", str(run), "--out", str(tmp_path / "tc")]) != 0  # exists


@pytest.mark.parametrize("entry, match", [
    ({"arm_left_1_joint": {"mass_kg": 1.0, "com_m": [0, 0, 0], "inertia_kgm2": [1, 0, 1, 0, 0, 1]}}, None),
    ({"root_joint": {"mass_kg": -1.0, "com_m": [0, 0, 0], "inertia_kgm2": [1, 0, 1, 0, 0, 1]}}, "body_inertias.root_joint.mass_kg"),
    ({"root_joint": {"mass_kg": 1.0, "com_m": [0, 0], "inertia_kgm2": [1, 0, 1, 0, 0, 1]}}, "body_inertias.root_joint.com_m"),
    ({"root_joint": {"mass_kg": 1.0, "com_m": [0, 0, 0], "inertia_kgm2": [1, 0, 1, 0, 0, 5]}}, "not a physical"),
    ({"root_joint": {"mass_kg": 1.0, "com_m": [0, 0, 0]}}, "missing key 'inertia_kgm2'"),
    ({"root_joint": {"mass_kg": 1.0, "com_m": [0, 0, 0], "inertia_kgm2": [1, 0, 1, 0, 0, 1], "x": 1}}, "unknown key"),
    ({"torso_1_joint_typo": {}}, "is not a joint of the reduced model"),
    ([1, 2], "body_inertias: expected a mapping"),
])
def test_body_inertias_key(tmp_path, entry, match):
    f = tmp_path / "robot.yaml"
    f.write_text(yaml.safe_dump({"base": "talos", "name": "t", "body_inertias": entry}))
    if match is None:
        r = load_robot(f)
        assert r.model.inertias[r.model.getJointId("arm_left_1_joint")].mass == 1.0
        return
    with pytest.raises(ConfigError, match=match):
        load_robot(f)


def test_mujoco_refuses_a_body_lighter_than_its_welded_links(tmp_path):
    from contactflow.sim.mujoco_model import build_mujoco_spec

    f = tmp_path / "robot.yaml"  # torso_2 at 0.1 kg: less than the head links welded to it
    f.write_text(yaml.safe_dump({"base": "talos", "name": "t", "body_inertias": {
        "torso_2_joint": {"mass_kg": 0.1, "com_m": [0, 0, 0], "inertia_kgm2": [1e-3, 0, 1e-3, 0, 0, 1e-3]}}}))
    r = load_robot(f)
    with pytest.raises(ModelError, match="body_inertias.torso_2_joint"):
        build_mujoco_spec(r)
