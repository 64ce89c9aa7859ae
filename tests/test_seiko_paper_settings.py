"""The sign of the D term of the feedback law (10) in closed loop (SEIKO RA-L 2024 eq. (10), Fig. 5),
MuJoCo Talos; docs/seiko_multicontact.md, "The paper's settings".

The sign derived from the flexible model (``kd_sign = -1``, the paper's ``- K_d lam_dot_read``)
must damp the whole-body sagittal rocking that a torso push starts: with the paper's K_d = 0.02
the logarithmic decrement of the pelvis pitch rate is larger than with K_d = 0 and than with the
released code's sign (``kd_sign = +1``). The same push as ``benchmarks/bench_seiko_damping.py``
(60 N x 0.1 s at 3 s, ``stand_7s.yaml``). Measured (2026-12-02): 0.388 (derived sign), 0.346
(K_d = 0), 0.272 (opposite sign). Three 7 s runs, ~25 s on an idle 2-core machine.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

from contactflow.robot import load_robot
from contactflow.seiko.controller import ControllerConfig
from contactflow.seiko.controller_config import PAPER_KD

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_seiko_damping import log_decrement, torso_push  # noqa: E402
from contactflow.seiko.loop import run_loop  # noqa: E402

PUSH_START_S, PUSH_S = 3.0, 0.1


@pytest.fixture(scope="module")
def robot():
    return load_robot("talos")


def _decrement(robot, ccfg) -> float:
    L = run_loop(robot, ROOT / "robots/talos/scenarios/stand_7s.yaml", ccfg=ccfg,
                 disturb=torso_push(60.0, PUSH_START_S, PUSH_S))
    assert not L.fell
    after = L.t > PUSH_START_S + PUSH_S
    assert np.max(np.abs(L.gyro[after, 1])) > 0.02, "the push did not rock the robot"
    delta, peaks = log_decrement(L.t, L.gyro[:, 1], PUSH_START_S + PUSH_S)
    assert len(peaks) >= 5, f"too few oscillation peaks ({len(peaks)})"
    return delta


def test_the_derived_sign_of_the_d_term_damps_the_rocking_after_a_torso_push(robot):
    base = ControllerConfig()
    assert base.kd_sign == -1.0, "the shipped sign is the derived one (docs/seiko_multicontact.md)"
    delta = {
        "derived": _decrement(robot, dataclasses.replace(base, kd=PAPER_KD)),
        "off": _decrement(robot, dataclasses.replace(base, kd=0.0)),
        "opposite": _decrement(robot, dataclasses.replace(base, kd=PAPER_KD, kd_sign=-base.kd_sign)),
    }
    # measured 0.388 / 0.346 / 0.272: margins 0.042 and 0.074
    assert delta["derived"] > delta["off"] + 0.02, delta
    assert delta["off"] > delta["opposite"] + 0.04, delta
