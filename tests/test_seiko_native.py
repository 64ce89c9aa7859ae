"""The compiled SEIKO kernel (contactflow/native/seiko_qp11.cpp) against the Python code it replaces.

The kernel computes the Controller's QP (11) rows, costs and integration and the Retargeting's
kinematics and equilibrium terms; the Python of contactflow/seiko/controller_qp.py,
equilibrium.py and retargeting.py stays the reference. Here both run side by side in one closed
loop: every tick, the native stages and a Python twin of each get the same messages, the native
outputs drive the robot, and every output of the twins must agree to rounding. The scenarios
cover both feet in contact (hand_forward), a point contact enabled and pushed on the wall
(wall_touch_short: the R_c rows and the rotation term of seiko.md §2.4), and a foot released on
its measured force, lifted and put back (foot_lift: the release hold's rising target).

Where no C++ compiler is on PATH the equivalence tests are skipped (the stages then run Python);
where one is, the kernel must build.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from contactflow import native
from contactflow.errors import ConfigError
from contactflow.robot import load_robot
from contactflow.seiko import stages
from contactflow.seiko.controller import ControllerConfig
from contactflow.seiko.loop import SeikoLoop
from contactflow.seiko.retargeting import RetargetingConfig

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "robots" / "talos" / "scenarios"

needs_compiler = pytest.mark.skipif(not (os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")),
                                    reason="no C++ compiler: the SEIKO stages run their Python code")

# Largest difference allowed between the kernels' outputs over a run (rad, rad/s, m, N, N m): both
# compute the same expressions in another order (Eigen vs numpy/BLAS), ~1e-15 per step.
TOL = 1e-8


@pytest.fixture(scope="module")
def robot():
    return load_robot("talos")


class Twin:
    """Runs ``new`` (native) and ``ref`` (Python) on the same arguments, keeps the largest
    difference of every array output, returns ``new``'s output."""

    def __init__(self, new, ref):
        self.new, self.ref = new, ref
        self.max_diff: dict[str, float] = {}

    def __getattr__(self, name):
        return getattr(self.new, name)

    def tick(self, *args, **kw):
        out_new = self.new.tick(*args, **kw)
        out_ref = self.ref.tick(*args, **kw)
        parts_new = out_new if isinstance(out_new, tuple) else (out_new,)
        parts_ref = out_ref if isinstance(out_ref, tuple) else (out_ref,)
        for pn, pr in zip(parts_new, parts_ref):
            for key, value in pn.items():
                if key.endswith("time") or key not in pr:
                    continue
                a, b = np.asarray(value, dtype=float), np.asarray(pr[key], dtype=float)
                d = float(np.max(np.abs(a - b))) if a.size else 0.0
                self.max_diff[key] = max(self.max_diff.get(key, 0.0), d)
        return out_new


def run_twins(robot, scenario: str, seconds: float, environment: bool = False, lag: int = 2):
    """The scenario in the in-process loop (``environment``: the robot file's wall and supports, as
    the multi-contact graph) with native stages, each twinned with a Python one."""
    loop = SeikoLoop(robot, SCENARIOS / scenario, ccfg=ControllerConfig(kernel="native"),
                     rcfg=RetargetingConfig(kernel="native"), environment=environment, duration_s=seconds, lag=lag)
    pipe = loop.pipeline
    assert pipe.controller.ctrl.kernel == "native"
    assert pipe.retargeting.retargeting._kin is not None
    ref_r = stages.RetargetingStage(robot, RetargetingConfig(kernel="python"), pipe.retargeting.retargeting.environment)
    ref_c = stages.ControllerStage(robot, ControllerConfig(kernel="python"), RetargetingConfig(kernel="python"))
    assert ref_c.ctrl.kernel == "python" and ref_r.retargeting._kin is None
    pipe.retargeting = tr = Twin(pipe.retargeting, ref_r)
    pipe.controller = tc = Twin(pipe.controller, ref_c)
    while not loop.step():
        pass
    return loop.log(), tr, tc


@needs_compiler
@pytest.mark.parametrize("scenario, seconds, environment, lag",
                         [("hand_forward.yaml", 3.0, False, 2), ("wall_touch_short.yaml", 6.0, True, 1)])
def test_native_and_python_kernels_compute_the_same_steps(robot, scenario, seconds, environment, lag):
    log, tr, tc = run_twins(robot, scenario, seconds, environment, lag)
    assert not log.fell
    assert tr.new.failures == tr.ref.failures == 0
    assert tc.new.failures == tc.ref.failures == 0
    for key in ("q_d", "v_d", "theta_ahead"):
        assert tr.max_diff[key] < TOL, (key, tr.max_diff[key])
    for key in ("theta_cmd", "q_flex", "offset", "tau_flex"):
        assert tc.max_diff[key] < TOL, (key, tc.max_diff[key])
    flex = [k for k in tc.max_diff if k.startswith(("lam_flex.", "lam_tilde."))]
    assert flex and max(tc.max_diff[k] for k in flex) < 1e-6  # N, N m


@needs_compiler
@pytest.mark.slow
def test_native_kernel_through_a_foot_release_and_lift(robot):
    """foot_lift to 16 s: the Retargeting releases the right foot (~11 s), the Controller holds the
    contact until the measured force is gone (the target rises meanwhile), then the foot lifts."""
    log, tr, tc = run_twins(robot, "foot_lift.yaml", 16.0, True, 1)
    assert not log.fell
    assert tc.new.failures == tc.ref.failures == 0
    assert not tc.new.ctrl.enabled["right_foot"]  # released by the Controller within the run
    for key in ("theta_cmd", "q_flex", "offset", "tau_flex"):
        assert tc.max_diff[key] < TOL, (key, tc.max_diff[key])
    for key in ("q_d", "v_d"):
        assert tr.max_diff[key] < TOL, (key, tr.max_diff[key])


@needs_compiler
def test_the_kernel_builds_where_a_compiler_is(tmp_path):
    ok, what = native.status()
    assert ok, what
    assert Path(what).is_file() and Path(what).parent == native.cache_dir()


def test_kernel_setting_is_checked():
    with pytest.raises(ConfigError, match="kernel"):
        ControllerConfig(kernel="fast")
    with pytest.raises(ConfigError, match="kernel"):
        RetargetingConfig(kernel="fast")


def test_without_the_kernel_native_is_refused_and_auto_runs_python(robot, tmp_path, monkeypatch, caplog):
    """A compiler that fails (here /bin/false, into an empty cache): ``kernel: native`` is refused
    naming the setting and the compiler's failure; ``auto`` runs the Python code with one warning."""
    monkeypatch.setenv("CXX", "/bin/false")
    monkeypatch.setenv(native.NATIVE_CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(native, "_loaded", {})
    monkeypatch.setattr(native, "_failed", {})
    import contactflow.seiko.native as seiko_native

    monkeypatch.setattr(seiko_native, "_warned", False)
    from contactflow.seiko.controller import SeikoController

    with pytest.raises(ConfigError, match=r"ControllerConfig.kernel: 'native' asked, but .*(did not compile|does not run)"):
        SeikoController(ControllerConfig(kernel="native"), robot)
    with caplog.at_level(logging.WARNING):
        ctrl = SeikoController(ControllerConfig(kernel="auto"), robot)
        ctrl2 = SeikoController(ControllerConfig(kernel="auto"), robot)
    assert ctrl.kernel == ctrl2.kernel == "python"
    warnings = [r for r in caplog.records if "compiled kernel is not available" in r.getMessage()]
    assert len(warnings) == 1
