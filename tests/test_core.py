"""Core library pieces: typed config loading, the QP wrapper, the Talos description, contracts."""

import dataclasses

import numpy as np
import pinocchio as pin
import pytest

from contactflow.config import load_config
from contactflow.errors import ConfigError, ContractError
from contactflow.contracts.messages import port_specs
from contactflow.qp import solve_qp
from contactflow.robot import load_robot


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Inner:
    gain: float = 1.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Cfg:
    rate_hz: float = 500.0
    name: str = "x"
    inner: _Inner = _Inner()
    weights: tuple[float, ...] = (1.0, 2.0)

    def __post_init__(self):
        if self.rate_hz <= 0:
            raise ValueError("rate_hz must be > 0")


def test_config_defaults_and_overrides():
    c = load_config(_Cfg, {"rate_hz": 250, "inner": {"gain": 3}})
    assert c.rate_hz == 250.0 and c.inner.gain == 3.0 and c.weights == (1.0, 2.0)


@pytest.mark.parametrize(
    "mapping, fragment",
    [
        ({"rate_hz": "fast"}, "rate_hz: expected a number"),
        ({"rate_hz": float("nan")}, "rate_hz: expected a finite number"),
        ({"rate": 3}, "unknown key(s) 'rate'"),
        ({"inner": {"gian": 1}}, "inner: unknown key(s) 'gian'"),
        ({"rate_hz": -1}, "rate_hz must be > 0"),
        ({"weights": [1, "a"]}, "weights[1]"),
    ],
)
def test_config_errors_name_file_and_key(mapping, fragment):
    with pytest.raises(ConfigError) as exc:
        load_config(_Cfg, mapping, source="node.yaml:section")
    assert "node.yaml:section" in str(exc.value) and fragment in str(exc.value)


def test_qp_equality_inequality_and_residuals():
    H = np.eye(3)
    g = -np.array([1.0, 2.0, 3.0])
    sol = solve_qp(H, g, np.array([[1.0, 1.0, 0.0]]), np.array([2.0]), np.vstack([np.eye(3), -np.eye(3)]), -np.full(6, 10.0))
    assert sol.found and sol.status == "optimal"
    np.testing.assert_allclose(sol.x, [0.5, 1.5, 3.0], atol=1e-8)
    assert sol.eq_residual < 1e-9 and sol.ineq_violation == 0.0
    # redundant but consistent equality rows give the same answer (pitfall Q3)
    sol2 = solve_qp(H, g, np.array([[1.0, 1.0, 0.0], [2.0, 2.0, 0.0]]), np.array([2.0, 4.0]))
    assert sol2.found
    np.testing.assert_allclose(sol2.x, [0.5, 1.5, 3.0], atol=1e-6)


def test_qp_failures_are_reported_not_raised():
    H = np.eye(2)
    g = np.zeros(2)
    infeasible = solve_qp(H, g, None, None, np.array([[1.0, 0.0], [-1.0, 0.0]]), np.array([1.0, 0.0]))
    assert not infeasible.found and infeasible.status == "infeasible"
    nan = solve_qp(H, np.array([np.nan, 0.0]))
    assert not nan.found and nan.status == "non_finite"
    psd = solve_qp(np.zeros((2, 2)), np.zeros(2), np.array([[1.0, 1.0]]), np.array([1.0]))  # regularised
    assert psd.found
    ints = solve_qp(np.eye(2, dtype=int), np.array([1, 1]))  # integer arrays are cast
    assert ints.found


def test_talos_description():
    robot = load_robot("talos")
    assert robot.n == 25 and robot.nq == 32 and robot.nv == 31
    assert robot.mass == pytest.approx(90.272192, abs=1e-5)
    # paper robot limits, not the URDF's (robot file documents the choice)
    i = robot.joint_names.index("arm_left_4_joint")
    assert robot.tau_max[i] == 70.0
    assert robot.tau_max[robot.joint_names.index("torso_1_joint")] == 200.0
    assert set(robot.locked_joints) == {
        "head_1_joint", "head_2_joint", "gripper_left_joint", "gripper_right_joint",
        "arm_right_5_joint", "arm_right_6_joint", "arm_right_7_joint",
    }
    data = robot.model.createData()
    pin.framesForwardKinematics(robot.model, data, robot.q_default)
    for foot in ("left_foot", "right_foot"):
        M = data.oMf[robot.contacts[foot].frame_id]
        assert abs(M.translation[2]) < 1e-12
        np.testing.assert_allclose(M.rotation, np.eye(3), atol=1e-12)
    assert robot.q_default[2] == pytest.approx(1.050252, abs=1e-6)
    with pytest.raises(ConfigError, match="unknown effector 'nose'"):
        robot.contact("nose")


def test_contracts_pack_unpack_and_reject_bad_messages():
    robot = load_robot("talos")
    spec = port_specs(robot)["joint_command"]
    vec = spec.pack({"theta_cmd": np.arange(robot.n, dtype=float), "ok": 1.0})
    out = spec.unpack(vec)
    np.testing.assert_array_equal(out["theta_cmd"], np.arange(robot.n))
    with pytest.raises(ContractError, match="joint_command.*expected 26"):
        spec.unpack(np.zeros(3))
    bad = vec.copy()
    bad[2] = np.nan
    with pytest.raises(ContractError, match="non-finite.*theta_cmd"):
        spec.unpack(bad)
    with pytest.raises(ContractError, match="float64"):
        spec.unpack(vec.astype(np.float32))
    with pytest.raises(ContractError, match="missing field 'ok'"):
        spec.pack({"theta_cmd": np.zeros(robot.n)})
