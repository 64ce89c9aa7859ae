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
# The same for every QP (11), relative to its largest entry of each of H, g, A, lo, hi. Measured
# (2026-12-04): H 4e-15, A 4e-14, lo / hi 1e-13, g 2.2e-10 (g = M^T (w_e c / dt + ...) sums terms
# ~5e5 times larger than itself).
QP_TOL = 1e-8


@pytest.fixture(scope="module")
def robot():
    return load_robot("talos")


class Twin:
    """Runs ``new`` (native) and ``ref`` (Python) on the same arguments, keeps the largest
    difference of every array output, returns ``new``'s output. For the Controller it also compares
    every QP (11) both build (H, g, A, lo, hi, through ``qp_hook``: relative to the largest entry of
    each), and with ``prepare`` calls :meth:`ControllerStage.prepare` after each tick, as the real-time
    node does in its wait for the next sensors."""

    def __init__(self, new, ref, prepare: bool = False):
        self.new, self.ref, self.prepare = new, ref, prepare
        self.max_diff: dict[str, float] = {}
        self.qps = 0
        ctrl_new, ctrl_ref = getattr(new, "ctrl", None), getattr(ref, "ctrl", None)
        if ctrl_new is not None:
            self._qp = {}
            ctrl_new.qp_hook = lambda *a: self._keep("new", a)
            ctrl_ref.qp_hook = lambda *a: self._keep("ref", a)

    def __getattr__(self, name):
        return getattr(self.new, name)

    def _keep(self, who, args):
        self._qp[who] = [np.array(a) for a in args[:5]]

    def _diff(self, key, a, b, scale=1.0):
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        d = float(np.max(np.abs(a - b))) / scale if a.size else 0.0
        self.max_diff[key] = max(self.max_diff.get(key, 0.0), d)

    def tick(self, *args, **kw):
        out_new = self.new.tick(*args, **kw)
        out_ref = self.ref.tick(*args, **kw)
        parts_new = out_new if isinstance(out_new, tuple) else (out_new,)
        parts_ref = out_ref if isinstance(out_ref, tuple) else (out_ref,)
        for pn, pr in zip(parts_new, parts_ref):
            for key, value in pn.items():
                if not key.endswith("time") and key in pr:
                    self._diff(key, value, pr[key])
        if getattr(self, "_qp", None):
            if "new" in self._qp or "ref" in self._qp:
                assert self._qp.keys() == {"new", "ref"}, "one kernel solved a QP (11), the other not"
                for name, a, b in zip(("H", "g", "A", "lo", "hi"), self._qp["new"], self._qp["ref"]):
                    finite = np.isfinite(b)
                    assert (np.isfinite(a) == finite).all()
                    self._diff(f"qp.{name}", a[finite], b[finite], max(1.0, float(np.max(np.abs(b[finite])))))
                self.qps += 1
            self._qp = {}
        if self.prepare:
            assert self.new.prepare() == self.ref.prepare()
        return out_new


def run_twins(robot, scenario: str, seconds: float, environment: bool = False, lag: int = 2, prepare: bool = False):
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
    pipe.controller = tc = Twin(pipe.controller, ref_c, prepare=prepare)
    while not loop.step():
        pass
    return loop.log(), tr, tc


@needs_compiler
@pytest.mark.parametrize("scenario, seconds, environment, lag, prepare",
                         [("hand_forward.yaml", 3.0, False, 2, True), ("wall_touch_short.yaml", 6.0, True, 1, False)])
def test_native_and_python_kernels_compute_the_same_steps(robot, scenario, seconds, environment, lag, prepare):
    """hand_forward with the Controller's QP (11) prepared after each tick (the real-time node's order);
    wall_touch_short prepared inside the step, with a point contact enabled at 4.5 s."""
    log, tr, tc = run_twins(robot, scenario, seconds, environment, lag, prepare)
    assert not log.fell
    assert tc.qps >= 0.99 * seconds / 0.002
    for key in ("qp.H", "qp.g", "qp.A", "qp.lo", "qp.hi"):
        assert tc.max_diff[key] < QP_TOL, (key, tc.max_diff[key])
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
    flex = [k for k in tc.max_diff if k.startswith(("lam_flex.", "lam_tilde."))]
    assert flex and max(tc.max_diff[k] for k in flex) < 1e-6  # N, N m
    for key in ("qp.H", "qp.g", "qp.A", "qp.lo", "qp.hi"):
        assert tc.max_diff[key] < QP_TOL, (key, tc.max_diff[key])


@needs_compiler
@pytest.mark.parametrize("lower_nm_per_s, tau_read_cutoff_hz", [(0.0, 5.0), (5.0, 5.0), (5.0, 0.0)])
def test_native_filters_13_and_12_match_the_python_filters_bit_for_bit(robot, lower_nm_per_s, tau_read_cutoff_hz):
    """The compiled feedback filters (FeedbackNative) against ComplementaryWrenchFilterBank.update and
    ExponentialLowPass + TorqueLimitAdapter.update on the same random steps, every branch: rows with
    and without a reading, active or not, not yet initialised, the external lam_tilde rows; measured
    torques below the ratio rho (the raise rule only), above it (lower, raise, and the lowering
    extension with and without allow_lowering); the low-pass seeded, updated, reset and seeded again,
    or absent. Equal bit for bit (same floating-point operations in the same order); a replaced array
    is refused."""
    import copy

    from contactflow.errors import ContactflowError
    from contactflow.seiko.controller import SeikoController

    cfg = ControllerConfig(kernel="native", torque_lowering_nm_per_s=lower_nm_per_s, tau_read_cutoff_hz=tau_read_cutoff_hz)
    ctrl = SeikoController(cfg, robot)
    fb = ctrl._feedback
    assert fb is not None
    cf_ref, ta_ref, lp_ref = copy.deepcopy(ctrl._cfilt), copy.deepcopy(ctrl._tau_adapt), copy.deepcopy(ctrl._tau_read_lp)
    assert (lp_ref is None) == (tau_read_cutoff_hz == 0.0)
    rng = np.random.default_rng(7)
    n_eff, n = len(ctrl.contacts), ctrl.n
    tau_urdf = ctrl._tau_adapt.tau_urdf
    branches = set()
    for step in range(400):
        # (13): random readings, flags and external rows, into the Controller's own buffers
        ctrl._in_w[0] = rng.normal(0.0, 300.0, (n_eff, 6))
        ctrl._in_w[3] = rng.normal(0.0, 300.0, (n_eff, 6))
        ctrl._lam_flex_dot_rows[:] = rng.normal(0.0, 1000.0, (n_eff, 6))
        ctrl._has[0] = rng.random(n_eff) < 0.8
        ctrl._has[3] = rng.random(n_eff) < 0.5
        ctrl._active[:] = rng.random(n_eff) < 0.7
        external = bool(rng.random() < 0.3)
        ref = cf_ref.update(ctrl._in_w[0], ctrl._lam_flex_dot_rows, ctrl._active, ctrl._has[0],
                            external=ctrl._in_w[3] if external else None, has_external=ctrl._has[3])
        fb.check()
        got = fb.filter13(external)
        assert np.array_equal(got, ref) and np.array_equal(ctrl._cfilt._init, cf_ref._init), step
        # (12): phases of 40 steps around a torque below rho, then one above it for some joints
        if step % 40 == 0:
            base = rng.uniform(-0.9 if (step // 40) % 2 else -0.5, 0.9 if (step // 40) % 2 else 0.5, n) * tau_urdf
        if step == 250 and lp_ref is not None:  # reset (as SeikoController.reset does): seeded again
            ctrl._tau_read_lp.reset()
            lp_ref.reset()
        tau_read = base * rng.uniform(0.98, 1.02, n)
        tau_flex = base * rng.uniform(0.7, 0.9, n)
        limit_before = ta_ref.value.copy()
        allow = bool(rng.random() < 0.8)
        ctrl._in_vecs[3][:] = tau_read
        modified = fb.torque12(tau_flex, allow)
        ta_ref.update(tau_read if lp_ref is None else lp_ref.update(tau_read), tau_flex, allow_lowering=allow)
        if lp_ref is not None:
            assert np.array_equal(ctrl._tau_read_lp.value, lp_ref.value) and ctrl._tau_read_lp.seeded, step
        assert np.array_equal(ctrl._tau_adapt.value, ta_ref.value), step
        assert modified == ta_ref.modified, step
        over = ta_ref._ratio > ta_ref.rho
        raised = bool((ta_ref.value > limit_before).any())
        branches.add(("over" if over.any() else "below", modified, raised))
        if over.any():
            bind = over & (np.abs(tau_flex) + ta_ref.eps1 >= limit_before)
            branches.add(("lower", bool((over & ~bind).any())))
            branches.add(("bind", bool(bind.any()), allow))
    want = {("below", True, True), ("below", False, False), ("lower", True), ("bind", True, True), ("bind", True, False)}
    assert want <= branches and any(b[:2] == ("over", True) for b in branches), branches
    # a replaced array is refused, not silently left behind
    ctrl._tau_adapt._limit = ctrl._tau_adapt._limit.copy()
    with pytest.raises(ContactflowError, match="was replaced"):
        fb.check()


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
    import weakref

    import contactflow.seiko.native as seiko_native

    monkeypatch.setattr(seiko_native, "_warned", False)
    monkeypatch.setattr(seiko_native, "_kernels", weakref.WeakValueDictionary())  # no kernel of an earlier test
    from contactflow.seiko.controller import SeikoController

    with pytest.raises(ConfigError, match=r"ControllerConfig.kernel: 'native' asked, but .*(did not compile|does not run)"):
        SeikoController(ControllerConfig(kernel="native"), robot)
    with caplog.at_level(logging.WARNING):
        ctrl = SeikoController(ControllerConfig(kernel="auto"), robot)
        ctrl2 = SeikoController(ControllerConfig(kernel="auto"), robot)
    assert ctrl.kernel == ctrl2.kernel == "python"
    warnings = [r for r in caplog.records if "compiled kernel is not available" in r.getMessage()]
    assert len(warnings) == 1


def test_build_problems_are_reported_not_raised_raw(tmp_path, monkeypatch):
    """An unusable cache folder (here a file) and target flags in $CONTACTFLOW_NATIVE_CXXFLAGS are
    NativeBuildErrors naming the cause (so ``kernel: auto`` falls back), not raw OSErrors."""
    monkeypatch.setattr(native, "_loaded", {})
    monkeypatch.setattr(native, "_failed", {})
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("")
    monkeypatch.setenv(native.NATIVE_CACHE_ENV, str(blocker / "cache"))
    if os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++"):
        with pytest.raises(native.NativeBuildError, match="is not usable"):
            native.load()
    monkeypatch.setattr(native, "_failed", {})
    monkeypatch.setenv(native.NATIVE_FLAGS_ENV, "-O3 -march=native")
    monkeypatch.setenv("CXX", "g++")
    with pytest.raises(native.NativeBuildError, match="target flags"):
        native.load()
    # fast-math in the flags, a target flag inside $CXX: refused too
    for flags, cxx, match in (("-O3 -ffast-math", "g++", "must round as the Python code"),
                              ("", "g++ -march=native", r"\$CXX has \['-march=native'\]: target flags")):
        monkeypatch.setattr(native, "_failed", {})
        monkeypatch.setenv(native.NATIVE_FLAGS_ENV, flags)
        monkeypatch.setenv("CXX", cxx)
        with pytest.raises(native.NativeBuildError, match=match):
            native.load()
