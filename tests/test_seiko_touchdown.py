"""Early touchdown of a lifted foot (SEIKO RA-L 2024 Fig. 4: "on early touchdown the admittance
lifts the foot"), closed loop Retargeting -> Controller -> MuJoCo with the effector admittance (14).

``robots/talos/scenarios/foot_touchdown.yaml``: the right foot is disabled, lifted 5 cm and lowered
6.5 cm, i.e. commanded 1.5 cm into the floor, and stays disabled. With the admittance on the feet
(50 N deadband, as in ``dataflows/seiko_talos_multicontact.yml``) its desired pose rises again once
the operator stops and the measured force falls back below the deadband; without it the leg keeps
pressing the foot into the floor (measured: 400 N, the robot falls at 22.3 s). Two 25 s runs, ~90 s on an
idle 2-core machine. The dora graph version is ``benchmarks/bench_seiko_experiments.py foot_touchdown``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from contactflow.robot import load_robot
from contactflow.seiko.admittance import AdmittanceParams

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_seiko_experiments import (  # noqa: E402
    TOUCHDOWN_END_TOL_M, TOUCHDOWN_FINAL_FZ_N, TOUCHDOWN_MIN_RISE_M, TOUCHDOWN_SCENARIO as SCENARIO, touchdown_lowering)
from contactflow.seiko.loop import run_loop  # noqa: E402

ADMITTANCE = {"left_foot": AdmittanceParams.foot(), "right_foot": AdmittanceParams.foot(),
              "left_hand": AdmittanceParams.hand()}


@pytest.fixture(scope="module")
def robot():
    return load_robot("talos")


def test_admittance_lifts_the_foot_on_early_touchdown(robot):
    lower_start_s, lower_end_s = touchdown_lowering(robot)
    L = run_loop(robot, SCENARIO, environment=True, admittance=ADMITTANCE)
    assert not L.fell
    fz = L.wrench["right_foot"][:, 2]
    z_d = L.pose_d["right_foot"][:, 2]
    i_low = int(np.searchsorted(L.t, lower_start_s))  # the lifted foot is in the air here
    assert fz[i_low] < 1.0, f"the right foot is not in the air when the lowering starts ({fz[i_low]:.1f} N)"
    assert (fz[i_low:] > 50.0).any(), "the lowered foot never touched the floor"
    td = i_low + int(np.argmax(fz[i_low:] > 50.0))
    assert L.t[td] < lower_end_s, f"touchdown at {L.t[td]:.2f} s, after the lowering ended: not early"
    i_end = int(np.searchsorted(L.t, lower_end_s))
    # the admittance raised the desired foot after the operator stopped lowering it
    # (measured: 5.3 mm, back to 0.6 mm above its height at reset; without: 15 mm below it)
    rise = z_d[-1] - z_d[i_end:].min()
    assert rise > TOUCHDOWN_MIN_RISE_M, f"desired right-foot height rose by {1e3 * rise:.1f} mm only"
    assert abs(z_d[-1] - z_d[0]) < TOUCHDOWN_END_TOL_M, f"desired right foot ends {1e3 * (z_d[-1] - z_d[0]):+.1f} mm from its start"
    last = L.t >= L.t[-1] - 1.0
    # back below the deadband, and still on the floor (measured 4.8 N): not lifted into the air
    assert TOUCHDOWN_FINAL_FZ_N[0] < np.mean(fz[last]) < TOUCHDOWN_FINAL_FZ_N[1], f"right foot ends with {np.mean(fz[last]):.1f} N"

    L0 = run_loop(robot, SCENARIO, environment=True)
    fz0 = L0.wrench["right_foot"][:, 2]
    # without the admittance the desired foot stays 1.5 cm below the floor and the leg presses on
    assert L0.fell or np.mean(fz0[L0.t >= L0.t[-1] - 1.0]) > 150.0
    assert fz0[L0.t >= lower_start_s].max() > fz[i_low:].max()
