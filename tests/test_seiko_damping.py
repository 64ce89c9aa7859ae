"""Damping of the feedback law (10) in closed loop (SEIKO RA-L 2024 Fig. 5), MuJoCo Talos.

Double support (``robots/talos/scenarios/stand_7s.yaml``), a 60 N x 0.1 s push on the torso at
3 s; the logarithmic decrement of the pelvis pitch rate (IMU gyro, unfiltered) must increase with
K_d in {0, 0.01, 0.05} (the paper's sign, ``- K_d lam_dot_read``). Measured (docs/damping.json):
0.346, 0.376, 0.414 (2026-12-02). The same runs as ``benchmarks/bench_seiko_damping.py``; ~40 s on 2 cores.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from contactflow.robot import load_robot
from contactflow.seiko.controller import ControllerConfig

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_seiko_damping import log_decrement, torso_push  # noqa: E402
from contactflow.seiko.loop import run_loop  # noqa: E402

PUSH_N, PUSH_START_S, PUSH_S = 60.0, 3.0, 0.1
_push = torso_push(PUSH_N, PUSH_START_S, PUSH_S)


def test_log_decrement_increases_with_kd():
    robot = load_robot("talos")
    delta = {}
    for kd in (0.0, 0.01, 0.05):
        L = run_loop(robot, ROOT / "robots/talos/scenarios/stand_7s.yaml", ccfg=ControllerConfig(kd=kd, kd_sign=-1.0),
                     disturb=_push)
        assert not L.fell
        assert np.max(np.abs(L.gyro[L.t > PUSH_START_S + PUSH_S, 1])) > 0.02, "the push did not rock the robot"
        delta[kd], peaks = log_decrement(L.t, L.gyro[:, 1], PUSH_START_S + PUSH_S)
        assert len(peaks) >= 5, f"K_d = {kd}: too few oscillation peaks ({len(peaks)})"
    assert 0.0 < delta[0.0] < delta[0.01] < delta[0.05], f"log decrements {delta}"
    assert delta[0.05] > delta[0.0] + 0.04, f"K_d = 0.05 adds too little damping: {delta}"
