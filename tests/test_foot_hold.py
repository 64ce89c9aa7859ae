"""Talos's stance feet hold under a steady lateral load (issue 16, foot creep).

MuJoCo's contacts are soft: with its default pyramidal friction cone, impratio 1 and no noslip
pass, a sole under a steady tangential load slides slowly even far inside the friction cone (10 N
on a 90 kg robot is ~1 % of the friction limit mu m g = 0.8 * 883 N). On the default Talos scene a
10 N lateral push on the pelvis made the stance soles creep ~8 mm and ~1.8 deg in 10 s, which a
user reads as a controller fault (SEIKO models its feet as fixed contacts). The robot file now
uses an elliptic cone, impratio 10 and 20 noslip iterations (``robots/talos/robot.yaml``
``mujoco:``); this test measures the drift of both soles under the push, and the same push with
the old options, so that it fails if the scene loses the property (or if the measurement could
not see a creep).

The bounds: 0.2 mm and 0.1 deg in 10 s. Measured (2026-12-01): new defaults 0.038 mm / 0.018 deg,
old options 8.1 mm / 1.93 deg per 10 s. The bounds leave a ~5x margin for other MuJoCo builds and
sit ~20-40x below the old creep; over the longest shipped Talos scenario (18.5 s) they allow under
0.4 mm, below the resolution of any foot-placement quantity the SEIKO pipeline reports.
"""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from contactflow.robot import load_robot
from contactflow.sim.mujoco_robot import MujocoRobotSim, SimConfig

PUSH_N = 10.0
PUSH_S = 10.0
DRIFT_BOUND_M = 2e-4
YAW_BOUND_RAD = np.radians(0.1)


@pytest.fixture(scope="module")
def robot():
    return load_robot("talos")


def _soles(sim: MujocoRobotSim, robot) -> list[tuple[np.ndarray, float]]:
    """(xy position [m], yaw [rad]) of each plane-contact sole frame, in world."""
    out = []
    for c in robot.contacts.values():
        if c.type != "plane":
            continue
        sid = sim.model.site(c.frame).id
        R = sim.data.site_xmat[sid].reshape(3, 3)
        out.append((sim.data.site_xpos[sid][:2].copy(), float(np.arctan2(R[1, 0], R[0, 0]))))
    return out


def _push_drift(sim: MujocoRobotSim, robot, duration_s: float) -> tuple[float, float, float]:
    """Hold the default posture, push the pelvis +y with PUSH_N for ``duration_s``.

    Returns: (max sole xy drift [m], max sole yaw drift [rad], base lateral displacement [m]).
    """
    sim.reset()
    for _ in range(100):  # 0.2 s of default commands before the push
        sim.step(robot.theta_default)
    before = _soles(sim, robot)
    base_y0 = float(sim.readings().q[1])
    root = sim.model.body(1).name  # the free-floating base (pelvis)
    sim.set_external_wrench(root, np.array([0.0, PUSH_N, 0.0, 0.0, 0.0, 0.0]))
    for _ in range(int(round(duration_s / sim.control_dt_s))):
        sim.step(robot.theta_default)
    assert not sim.fell()
    after = _soles(sim, robot)
    drift = max(float(np.linalg.norm(a[0] - b[0])) for a, b in zip(after, before))
    yaw = max(abs(a[1] - b[1]) for a, b in zip(after, before))
    return drift, yaw, float(sim.readings().q[1]) - base_y0


def test_default_scene_options(robot):
    sim = MujocoRobotSim(SimConfig(), robot)
    opt = sim.model.opt
    assert opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC
    assert opt.impratio == 10.0 and opt.noslip_iterations == 20


def test_feet_hold_under_lateral_push(robot):
    sim = MujocoRobotSim(SimConfig(), robot)
    drift, yaw, base_dy = _push_drift(sim, robot, PUSH_S)
    assert base_dy > 1e-4, "the push did not load the robot"  # the compliant joints give way a little
    assert drift < DRIFT_BOUND_M, f"soles crept {drift * 1e3:.3f} mm in {PUSH_S} s"
    assert yaw < YAW_BOUND_RAD, f"soles turned {np.degrees(yaw):.4f} deg in {PUSH_S} s"


def test_old_options_creep(robot):
    """The same push with the former options (pyramidal, impratio 1, no noslip) is seen creeping."""
    sim = MujocoRobotSim(SimConfig(), robot)
    sim.model.opt.cone = mujoco.mjtCone.mjCONE_PYRAMIDAL
    sim.model.opt.impratio = 1.0
    sim.model.opt.noslip_iterations = 0
    sim._settled.clear()  # settle again with these options
    drift, yaw, _ = _push_drift(sim, robot, PUSH_S)
    assert drift > 10 * DRIFT_BOUND_M, f"old options: drift {drift * 1e3:.3f} mm"
    assert yaw > 10 * YAW_BOUND_RAD, f"old options: yaw {np.degrees(yaw):.3f} deg"
