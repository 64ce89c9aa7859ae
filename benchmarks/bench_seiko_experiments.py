"""SEIKO multi-contact experiments in MuJoCo (RA-L 2024 Figs. 3 and 4): run, measure, plot.

    python benchmarks/bench_seiko_experiments.py wall_push        # ~100 s on 2 cores
    python benchmarks/bench_seiko_experiments.py foot_lift        # ~180 s
    python benchmarks/bench_seiko_experiments.py foot_touchdown   # ~150 s
    python benchmarks/bench_seiko_experiments.py bad_commands     # ~40 s
    python benchmarks/bench_seiko_experiments.py kd_sign          # in process, ~3 min idle: docs/kd_sign.json
    python benchmarks/bench_seiko_experiments.py kp               # in process, ~2 min on 2 cores: docs/kp_default.json
    python benchmarks/bench_seiko_experiments.py wall_push --recording recordings/latest   # re-plot

Each experiment runs ``dataflows/seiko_talos_multicontact.yml`` with its scenario
(``robots/talos/scenarios/<name>.yaml``), then writes ``docs/<name>.png`` and
``docs/<name>.json`` (the metrics below). Needs matplotlib (``pip install -e '.[bench]'``).

* wall_push (Fig. 3): left-hand normal force, commanded (``lam_d``, Retargeting) vs measured
  (wrist FT rotated into the surface frame R_c); error during the hold (last 4 s of pushing);
  the feet's tangential forces along x (they must oppose the push).
* foot_lift (Fig. 4): right-foot vertical force, desired vs measured; its largest rate (the
  Retargeting's is bounded by the 60 N/s limit, the measured one adds sensor noise and
  dynamics); right-foot height; left-foot force; fall flag. The unloading window runs from the
  disable request to the first measured f_z < 2 N after the Retargeting's release (it includes
  the Controller's hold until the measured force is below ``release_max_force_n``). Acceptance:
  measured rate over 50 ms windows <= 60 N/s + 20 N/s (``RATE_MARGIN_N_PER_S``).
* foot_touchdown (Fig. 4, early touchdown): the lifted right foot is lowered 1.5 cm further than
  it was lifted and stays disabled; the effector admittance (14) must lift its desired pose until
  the measured force is back near its 50 N deadband. Metrics: touchdown time, peak force, mean
  force over the last second, rise of the desired foot height after the operator stops; the same
  scenario in-process without the admittance for comparison (fall, peak and final force).
* kd_sign: the wall push and the foot lift in process (:func:`multicontact_loop`, the graph's
  computation) with K_d = 0 and K_d = 0.02 of either sign of (10)'s D term (:func:`kd_sign`).
* kp: the default K_p of (10) (0.2 1/s, the released code's) against the Fig. 7 grid's 0.5
  (``robots/talos/seiko_fig7.yaml``) on Figs. 3-6, in process: the wall push and the foot lift
  (as ``kd_sign``), the early touchdown (:func:`touchdown_in_process`, the acceptance of
  ``tests/test_seiko_touchdown.py``), the damping of the rocking after a torso push
  (``bench_seiko_damping.damping_case``) and the Fig. 6 far reach with (12) alone
  (``bench_seiko_reach_load.py``, scripted and stop-at-ratio operators) (:func:`kp_check`).
* bad_commands: the refused requests of ``bad_commands.yaml`` (times from ``n_refused`` of the
  Retargeting's output, messages from the nodes' log, kept as ``dora_run.log`` in the run),
  the feet's vertical forces and the pelvis height: the robot must stay balanced.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from contactflow.paths import scripts_env  # noqa: E402
from contactflow.recording.store import read_recording  # noqa: E402
from contactflow.robot import load_robot  # noqa: E402
from contactflow.seiko.controller import DEFAULT_SURFACE_ROTATIONS  # noqa: E402
from contactflow.seiko.controller_config import PAPER_KD  # noqa: E402


def run_dataflow(scenario: str, out_dir: Path) -> Path:
    env = scripts_env(dict(os.environ, CONTACTFLOW_RECORDINGS=str(out_dir), CONTACTFLOW_SCENARIO=str(ROOT / scenario)))
    dora = shutil.which("dora") or str(Path(sys.executable).parent / "dora")
    proc = subprocess.run([dora, "run", str(ROOT / "dataflows/seiko_talos_multicontact.yml")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        sys.exit(f"dora run failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
    runs = sorted(p for p in out_dir.iterdir() if p.is_dir() and not p.is_symlink())
    (runs[-1] / "dora_run.log").write_text(proc.stdout + proc.stderr)  # the nodes' messages
    return runs[-1]


def _aligned(rec):
    s = rec.stream("mujoco_driver.sensors")
    d = rec.stream("seiko_retargeting.desired")
    seq, i_s, i_d = np.intersect1d(s.seq, d.seq, return_indices=True)
    return s, d, i_s, i_d, s.t[i_s]


def wall_push(rec, robot, plt):
    s, d, i_s, i_d, t = _aligned(rec)
    R_c = DEFAULT_SURFACE_ROTATIONS["left_hand"]
    fn_meas = (s.field("force.left_hand")[i_s] @ R_c)[:, 2]
    fn_d = d.field("lam_d.left_hand")[i_d, 2]
    push = d.field("push")[i_d, list(robot.contacts).index("left_hand")] > 0.5
    fx_l = s.field("wrench.left_foot")[i_s, 0]
    fx_r = s.field("wrench.right_foot")[i_s, 0]
    t_push = t[push]
    hold = push & (t >= t_push[-1] - 4.0) if push.any() else push
    err = fn_meas[hold] - fn_d[hold]
    q = s.field("q")[i_s]
    m = {
        "fell": bool(np.min(q[:, 2]) < 0.6),
        "commanded_normal_force_hold_n": float(np.mean(fn_d[hold])),
        "measured_normal_force_hold_mean_n": float(np.mean(fn_meas[hold])),
        "hold_max_abs_error_n": float(np.max(np.abs(err))),
        "hold_mean_error_n": float(np.mean(err)),
        "feet_fx_sum_hold_mean_n": float(np.mean(fx_l[hold] + fx_r[hold])),
        "hold_window_s": [float(t[hold][0]), float(t[hold][-1])],
    }
    fig, ax = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    ax[0].plot(t, fn_d, label="commanded $\\lambda^d_n$ (Retargeting)")
    ax[0].plot(t, fn_meas, label="measured (wrist FT)", alpha=0.8)
    ax[0].fill_between(t, fn_d - 10, fn_d + 10, where=hold, color="g", alpha=0.15, label="±10 N, hold")
    ax[0].set_ylabel("left hand normal force [N]")
    ax[0].legend(loc="upper left")
    ax[1].plot(t, fx_l, label="left foot $f_x$")
    ax[1].plot(t, fx_r, label="right foot $f_x$")
    ax[1].plot(t, d.field("lam_d.left_foot")[i_d, 0], "--", label="left foot $f_x^d$")
    ax[1].plot(t, d.field("lam_d.right_foot")[i_d, 0], "--", label="right foot $f_x^d$")
    ax[1].set_ylabel("sole tangential force [N]")
    ax[1].set_xlabel("time [s]")
    ax[1].legend(loc="upper left")
    fig.suptitle("SEIKO wall push (MuJoCo Talos), cf. RA-L 2024 Fig. 3")
    return fig, m


RATE_LIMIT_N_PER_S = 60.0  # Retargeting plane force-rate limit (9m)
RATE_MARGIN_N_PER_S = 20.0  # "plus sensor noise": 1 N of force change over a 50 ms window


def _windowed_rates(t, x, mask, window_s):
    """|x(t) - x(t - window)| / window [x/s] for the windows entirely inside ``mask``, and their end times."""
    k = max(1, int(round(window_s / np.median(np.diff(t)))))
    r = np.abs(x[k:] - x[:-k]) / (t[k:] - t[:-k])
    m = mask[k:] & mask[:-k]
    return r[m], t[k:][m]


def _windowed_rate(t, x, mask, window_s):
    r, _ = _windowed_rates(t, x, mask, window_s)
    return float(np.max(r)) if r.size else None


def foot_lift(rec, robot, plt):
    import pinocchio as pin

    s, d, i_s, i_d, t = _aligned(rec)
    fz = s.field("wrench.right_foot")[i_s, 2]
    fz_d = d.field("lam_d.right_foot")[i_d, 2]
    fzl = s.field("wrench.left_foot")[i_s, 2]
    k = list(robot.contacts).index("right_foot")
    sw = d.field("switching")[i_d, k]
    en = d.field("enabled")[i_d, k]
    data = robot.model.createData()
    fid = robot.contact("right_foot").frame_id
    z = np.empty(len(t))
    for i, q in enumerate(s.field("q")[i_s]):
        pin.framesForwardKinematics(robot.model, data, q)
        z[i] = data.oMf[fid].translation[2]
    dt = np.diff(t)
    unload = (sw[1:] < -0.5) & (sw[:-1] < -0.5)
    # unloading window: disable request -> first measured f_z < 2 N after the Retargeting's release
    i_req = int(np.argmax(sw < -0.5)) if (sw < -0.5).any() else None
    i_rel = i_req + int(np.argmax(en[i_req:] < 0.5)) if i_req is not None and (en[i_req:] < 0.5).any() else None
    i_off = i_rel + int(np.argmax(fz[i_rel:] < 2.0)) if i_rel is not None and (fz[i_rel:] < 2.0).any() else None
    window = np.zeros(len(t), bool)
    if i_req is not None and i_off is not None:
        window[i_req : i_off + 1] = True
    r50, t50 = _windowed_rates(t, fz, window, 0.05)
    # the Controller's own release: its flexible-model wrench of the foot becomes exactly 0
    c = rec.stream("seiko_controller.state")
    _, i_c, i_d2 = np.intersect1d(c.seq, d.seq, return_indices=True)
    lf = np.full(len(t), np.nan)
    lf[np.searchsorted(d.seq[i_d], d.seq[i_d2])] = c.field("lam_flex.right_foot")[i_c, 2]
    i_crel = i_rel + int(np.argmax(lf[i_rel:] == 0.0)) if i_rel is not None and (lf[i_rel:] == 0.0).any() else None
    m = {
        "fell": bool(np.min(s.field("q")[i_s][:, 2]) < 0.6),
        "desired_fz_max_rate_n_per_s": float(np.max(np.abs(np.diff(fz_d)[unload] / dt[unload]))) if unload.any() else None,
        "measured_fz_max_rate_unloading_n_per_s": float(np.max(np.abs(np.diff(fz)[unload] / dt[unload]))) if unload.any() else None,
        "measured_fz_rate_p99_unloading_n_per_s": float(np.percentile(np.abs(np.diff(fz)[unload] / dt[unload]), 99)) if unload.any() else None,
        "released_at_s": float(t[np.argmax(en < 0.5)]) if (en < 0.5).any() else None,
        # rate over 50 ms (the SEIKO wrench-rate window, seiko.md §6.6): contact chatter removed
        "measured_fz_max_rate_50ms_disabling_n_per_s": _windowed_rate(t, fz, sw < -0.5, 0.05),
        "unloading_window_s": [float(t[i_req]), float(t[i_off])] if window.any() else None,
        "measured_fz_max_rate_50ms_unloading_n_per_s": float(np.max(r50)) if r50.size else None,
        "measured_fz_max_rate_50ms_unloading_at_s": float(t50[np.argmax(r50)]) if r50.size else None,
        "measured_fz_rate_50ms_p95_unloading_n_per_s": float(np.percentile(r50, 95)) if r50.size else None,
        "measured_fz_rate_50ms_p99_unloading_n_per_s": float(np.percentile(r50, 99)) if r50.size else None,
        "unloading_time_above_limit_plus_margin_fraction": float(np.mean(r50 > RATE_LIMIT_N_PER_S + RATE_MARGIN_N_PER_S)) if r50.size else None,
        "rate_criterion_n_per_s": RATE_LIMIT_N_PER_S + RATE_MARGIN_N_PER_S,
        "measured_fz_at_retargeting_release_n": float(fz[i_rel]) if i_rel is not None else None,
        "controller_released_at_s": float(t[i_crel]) if i_crel is not None else None,
        "measured_fz_at_controller_release_n": float(fz[i_crel]) if i_crel is not None else None,
        "right_foot_max_height_m": float(np.max(z)),
        "right_foot_final_fz_n": float(fz[-1]),
        "left_foot_final_fz_n": float(fzl[-1]),
        "right_foot_fz_rmse_n": float(np.sqrt(np.mean((fz - fz_d) ** 2))),
    }
    # the same scenario without the Controller (Retargeting ahead posture sent directly),
    # in-process (contactflow.seiko.loop, no admittance)
    from contactflow.seiko.loop import run_loop

    L0 = run_loop(robot, ROOT / "robots/talos/scenarios/foot_lift.yaml", environment=True, controller_on=False)
    fz0 = L0.wrench["right_foot"][:, 2]
    sel0 = (L0.t > 2.5) & (L0.t < (m["released_at_s"] or 10.5))
    m["no_controller_fell"] = bool(L0.fell)
    m["no_controller_measured_fz_max_rate_n_per_s"] = float(np.max(np.abs(np.diff(fz0[sel0])) / 0.002))
    m["no_controller_fz_at_retargeting_release_n"] = float(fz0[np.searchsorted(L0.t, m["released_at_s"] or 0.0) - 1]) if m["released_at_s"] else None
    fig, ax = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    ax[0].plot(t, fz_d, label="right foot $f_z^d$")
    ax[0].plot(t, fz, label="right foot $f_z$ measured", alpha=0.8)
    ax[0].plot(L0.t, fz0, ":", label="right foot $f_z$, no Controller", alpha=0.8)
    ax[0].plot(t, fzl, label="left foot $f_z$ measured", alpha=0.8)
    for ts, lbl in ((m["released_at_s"], "Retargeting release"), (m["controller_released_at_s"], "Controller release")):
        if ts is not None:
            ax[0].axvline(ts, color="k", lw=0.8, ls="--" if lbl.startswith("R") else ":", label=lbl)
    ax[0].set_ylabel("vertical force [N]")
    ax[0].legend(loc="center left", fontsize=8)
    ax[1].plot(t, 100 * z, label="right sole height")
    ax[1].plot(t, 5 * en, "--", label="enabled (x5)")
    ax[1].set_ylabel("height [cm]")
    ax[1].set_xlabel("time [s]")
    ax[1].legend(loc="upper left")
    fig.suptitle("SEIKO foot lift (MuJoCo Talos), cf. RA-L 2024 Fig. 4")
    return fig, m


TOUCHDOWN_SCENARIO = ROOT / "robots/talos/scenarios/foot_touchdown.yaml"
#: early-touchdown acceptance (tests/test_seiko_touchdown.py): the desired foot rises by more than this after the
#: operator stops [m], ends within this of its start height [m], and the mean force of the last second is in this range [N]
TOUCHDOWN_MIN_RISE_M, TOUCHDOWN_END_TOL_M, TOUCHDOWN_FINAL_FZ_N = 0.003, 0.003, (0.5, 50.0)


def touchdown_lowering(robot) -> tuple[float, float]:
    """(start_s, end_s) of the right-foot lowering command of ``foot_touchdown.yaml`` (from the file)."""
    from contactflow.operator.scenario import load_scenario

    scn = load_scenario(TOUCHDOWN_SCENARIO, robot)
    low = next(g for g in scn.segments if g.effector == "right_foot" and g.twist[2] < 0.0)
    return low.start_s, low.end_s


def touchdown_metrics(robot, t: np.ndarray, fz: np.ndarray, z_d: np.ndarray, fell: bool) -> dict:
    """The early-touchdown metrics from the right sole's measured f_z [N] and desired height [m] over
    time ``t`` [s] (heights relative to the desired foot's at the start) and ``met``, the acceptance of
    ``tests/test_seiko_touchdown.py`` (:data:`TOUCHDOWN_MIN_RISE_M`, :data:`TOUCHDOWN_END_TOL_M`,
    :data:`TOUCHDOWN_FINAL_FZ_N`; touchdown = f_z above the 50 N deadband before the lowering ends)."""
    lower_start_s, lower_end_s = touchdown_lowering(robot)
    i_low = int(np.searchsorted(t, lower_start_s))  # the foot is in the air here
    i_end = int(np.searchsorted(t, lower_end_s))
    td = i_low + int(np.argmax(fz[i_low:] > 50.0)) if (fz[i_low:] > 50.0).any() else None
    last = t >= t[-1] - 1.0
    m = {
        "fell": bool(fell),
        "touchdown_at_s": float(t[td]) if td is not None else None,
        "lowering_ends_at_s": lower_end_s,
        "right_foot_peak_fz_after_lowering_start_n": float(fz[i_low:].max()),
        "right_foot_final_fz_n_mean_last_1s": float(fz[last].mean()),
        "desired_foot_z_min_after_lowering_m": float(z_d[i_end:].min() - z_d[0]),
        "desired_foot_z_final_m": float(z_d[-1] - z_d[0]),
        "desired_foot_rise_after_lowering_m": float(z_d[-1] - z_d[i_end:].min()),
    }
    lo, hi = TOUCHDOWN_FINAL_FZ_N
    m["met"] = bool(not fell and td is not None and t[td] < lower_end_s
                    and m["desired_foot_rise_after_lowering_m"] > TOUCHDOWN_MIN_RISE_M
                    and abs(m["desired_foot_z_final_m"]) < TOUCHDOWN_END_TOL_M
                    and lo < m["right_foot_final_fz_n_mean_last_1s"] < hi)
    return m


def foot_touchdown(rec, robot, plt):
    lower_start_s, lower_end_s = touchdown_lowering(robot)
    s, d, i_s, i_d, t = _aligned(rec)
    fz = s.field("wrench.right_foot")[i_s, 2]
    z_d = d.field("pose_d.right_foot")[i_d, 2]
    m = touchdown_metrics(robot, t, fz, z_d, np.min(s.field("q")[i_s][:, 2]) < 0.6)
    from contactflow.seiko.loop import run_loop

    L0 = run_loop(robot, TOUCHDOWN_SCENARIO, environment=True)
    fz0 = L0.wrench["right_foot"][:, 2]
    m["no_admittance_fell"] = bool(L0.fell)
    m["no_admittance_fell_at_s"] = float(L0.t[-1]) if L0.fell else None
    m["no_admittance_peak_fz_after_lowering_start_n"] = float(fz0[L0.t >= lower_start_s].max())
    z0 = L0.pose_d["right_foot"][:, 2]
    m["no_admittance_desired_foot_z_min_m"] = float(z0[L0.t >= lower_start_s].min() - z0[0])
    fig, ax = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    ax[0].plot(t, fz, label="right foot $f_z$ measured, admittance (dora graph)")
    ax[0].plot(L0.t, fz0, ":", label="no admittance (in-process)" + (", FELL" if L0.fell else ""))
    ax[0].axhline(50.0, color="k", lw=0.6, ls="--", label="admittance deadband 50 N")
    ax[0].set_ylabel("vertical force [N]")
    ax[0].legend(loc="upper left", fontsize=8)
    ax[1].plot(t, 100 * (z_d - z_d[0]), label="desired right-sole height, admittance")
    ax[1].plot(L0.t, 100 * (z0 - z0[0]), ":",
               label="desired right-sole height, no admittance")
    ax[1].axvline(lower_end_s, color="k", lw=0.8, ls=":", label="operator stops lowering")
    ax[1].set_ylabel("height [cm]")
    ax[1].set_xlabel("time [s]")
    ax[1].legend(loc="upper left", fontsize=8)
    ax[1].set_xlim(14.0, t[-1])
    fig.suptitle("SEIKO early touchdown: foot lowered 1.5 cm into the floor (MuJoCo Talos)")
    return fig, m


def bad_commands(rec, robot, plt):
    import re

    s, d, i_s, i_d, t = _aligned(rec)
    n_ref = d.field("n_refused")[i_d, 0]
    fzl = s.field("wrench.left_foot")[i_s, 2]
    fzr = s.field("wrench.right_foot")[i_s, 2]
    z = s.field("q")[i_s][:, 2]
    t_ref = [float(t[i]) for i in np.flatnonzero(np.diff(n_ref) > 0) + 1]
    log = rec.path / "dora_run.log"
    msgs = []
    if log.exists():
        for line in log.read_text().splitlines():
            m = re.search(r"(cannot (enable|disable|push)[^\n]*)", line)
            if m and m.group(1) not in msgs:
                msgs.append(m.group(1).strip())
    summary = json.loads((rec.path / "summary.json").read_text()) if (rec.path / "summary.json").exists() else {}
    weight = summary.get("robot_weight_n", float(fzl[0] + fzr[0]))
    m = {
        "fell": bool(z.min() < 0.6),
        "n_refused": int(n_ref[-1]),
        "refused_at_s": t_ref,
        "messages": msgs,
        "pelvis_height_min_m": float(z.min()),
        "total_fz_final_over_weight": float((fzl[-1] + fzr[-1]) / weight),
        "right_foot_fz_final_n": float(fzr[-1]),
    }
    fig, ax = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    ax[0].plot(t, fzl, label="left foot $f_z$")
    ax[0].plot(t, fzr, label="right foot $f_z$ (disable accepted at 2.6 s: unloading)")
    ax[0].plot(t, fzl + fzr, "k", lw=0.8, label="sum")
    ax[0].set_ylabel("vertical force [N]")
    ax[0].set_ylim(0.0, 1.1 * float(np.max(fzl + fzr)))
    ax[1].plot(t, z, label="pelvis height")
    ax[1].set_ylabel("height [m]")
    ax[1].set_xlabel("time [s]")
    for k, tr in enumerate(t_ref):
        for a in ax:
            a.axvline(tr, color="r", lw=0.8, ls="--")
        ax[0].text(tr, 0.5, f" {k + 1}", color="r", fontsize=9, transform=ax[0].get_xaxis_transform())
    ax[0].legend(loc="lower left", fontsize=8)
    ax[1].legend(loc="lower left", fontsize=8)
    import textwrap

    lines = [textwrap.fill(f"{k + 1}: {msg}", 120, subsequent_indent="   ") for k, msg in enumerate(msgs)]
    fig.text(0.01, 0.005, "\n".join(lines), fontsize=6.5, va="bottom")
    fig.subplots_adjust(bottom=0.22)
    fig.suptitle("SEIKO bad commands: refused requests (red) while standing (MuJoCo Talos)")
    return fig, m


EXPERIMENTS = {"wall_push": wall_push, "foot_lift": foot_lift, "foot_touchdown": foot_touchdown,
               "bad_commands": bad_commands}


#: the admittance node's effectors in ``dataflows/seiko_talos_multicontact.yml`` (its ``--effectors``)
MULTICONTACT_ADMITTANCE = ("left_foot", "right_foot", "left_hand")
#: the D term of (10) compared by ``kd_sign``: name -> (K_d, kd_sign)
KD_CASES = {"K_d = 0": (0.0, -1.0), "K_d = 0.02, paper's sign (-)": (PAPER_KD, -1.0),
            "K_d = 0.02, code's sign (+)": (PAPER_KD, 1.0)}


def multicontact_loop(robot, scenario: str, ccfg=None, duration_s: float | None = None):
    """``dataflows/seiko_talos_multicontact.yml`` in one process: a :class:`contactflow.seiko.loop.SeikoLoop`
    with lag 1, the environment and the admittance on :data:`MULTICONTACT_ADMITTANCE` (it computes what
    the lockstep graph computes, ``tests/test_seiko_loop.py``). ``scenario``: path from the repository root."""
    from contactflow.seiko.loop import SeikoLoop
    from contactflow.seiko.stages import AdmittanceStage

    adm = AdmittanceStage.default_params(robot, list(MULTICONTACT_ADMITTANCE))
    return SeikoLoop(robot, ROOT / scenario, ccfg=ccfg, environment=True, admittance=adm, lag=1, duration_s=duration_s)


def kd_wall_push(robot, ccfg) -> dict:
    """The wall push in process: the left hand's measured normal force (wrist FT in R_c) against the
    ``lam_d`` the Controller used, over the last 4 s of pushing (the hold, as :func:`wall_push`) [N]."""
    from contactflow.operator.scenario import load_scenario

    scenario = "robots/talos/scenarios/wall_push.yaml"
    t_end = max(p.end_s for p in load_scenario(ROOT / scenario, robot).push if p.effector == "left_hand")
    loop = multicontact_loop(robot, scenario, ccfg, t_end + 0.5)
    R_c = DEFAULT_SURFACE_ROTATIONS["left_hand"]
    rows = []
    while not loop.done:
        loop.step()
        r = loop.readings
        rows.append((r.t, (r.hand_forces["left_hand"] @ R_c)[2], loop.pipeline.controller.desired["lam"]["left_hand"][2]))
    t, fn, fn_d = np.array(rows).T
    hold = (t >= t_end - 4.0) & (t < t_end)
    err = fn[hold] - fn_d[hold]
    return {"fell": loop.fell, "commanded_normal_force_hold_n": float(np.mean(fn_d[hold])),
            "measured_normal_force_hold_mean_n": float(np.mean(fn[hold])), "hold_mean_error_n": float(np.mean(err)),
            "hold_max_abs_error_n": float(np.max(np.abs(err))), "hold_window_s": [t_end - 4.0, t_end]}


def kd_foot_lift(robot, ccfg) -> dict:
    """The foot lift in process, from the disable request to the foot's lift-off (measured f_z < 2 N
    after 10 s): the largest measured right-sole f_z rate over 50 ms windows and its 95th percentile
    [N/s] (the foot-lift acceptance, :data:`RATE_LIMIT_N_PER_S` + :data:`RATE_MARGIN_N_PER_S`)."""
    from contactflow.operator.scenario import load_scenario

    scenario = "robots/talos/scenarios/foot_lift.yaml"
    t_req = next(e.t_s for e in load_scenario(ROOT / scenario, robot).contacts if e.effector == "right_foot" and not e.enable)
    loop = multicontact_loop(robot, scenario, ccfg, 15.0)  # lift-off ~14.4 s; the lift starts at 15 s
    while not loop.step():
        pass
    L = loop.log()
    fz = L.wrench["right_foot"][:, 2]
    off = np.flatnonzero((fz < 2.0) & (L.t > 10.0))
    window = (L.t >= t_req) & (L.t <= (L.t[off[0]] if off.size else L.t[-1]))
    r, tr = _windowed_rates(L.t, fz, window, 0.05)
    return {"fell": L.fell, "lift_off_s": float(L.t[off[0]]) if off.size else None,
            "measured_fz_max_rate_50ms_n_per_s": float(r.max()), "at_s": float(tr[np.argmax(r)]),
            "measured_fz_rate_50ms_p95_n_per_s": float(np.percentile(r, 95)),
            "rate_criterion_n_per_s": RATE_LIMIT_N_PER_S + RATE_MARGIN_N_PER_S}


def kd_sign(robot, out: Path) -> None:
    """``kd_sign``: the wall push and the foot lift in process for each of :data:`KD_CASES`
    (docs/seiko_multicontact.md, "The paper's settings"; the damping row is
    ``benchmarks/bench_seiko_damping.py``); writes ``kd_sign.json``."""
    import dataclasses

    from contactflow.seiko.controller import ControllerConfig

    res = {}
    for name, (kd, sign) in KD_CASES.items():
        ccfg = dataclasses.replace(ControllerConfig(), kd=kd, kd_sign=sign)
        res[name] = {"wall_push": kd_wall_push(robot, ccfg), "foot_lift": kd_foot_lift(robot, ccfg)}
        print(name, json.dumps(res[name]), flush=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "kd_sign.json").write_text(json.dumps(res, indent=2))
    print(f"wrote {out / 'kd_sign.json'}")


#: K_p of (10) compared by ``kp``: the default and the Fig. 7 grid's (robots/talos/seiko_fig7.yaml) [1/s]
KP_CASES = (0.2, 0.5)


def touchdown_in_process(robot, ccfg) -> dict:
    """The early touchdown in process (:func:`multicontact_loop`, the graph's computation) with
    ``ccfg``: :func:`touchdown_metrics`."""
    loop = multicontact_loop(robot, str(TOUCHDOWN_SCENARIO.relative_to(ROOT)), ccfg)
    while not loop.step():
        pass
    L = loop.log()
    return touchdown_metrics(robot, L.t, L.wrench["right_foot"][:, 2], L.pose_d["right_foot"][:, 2], L.fell)


def kp_case(kp: float) -> dict:
    """Every experiment of ``kp`` with K_p = ``kp`` and the other Controller settings the defaults (the
    Fig. 6 runs: rho = 0.6, as ``bench_seiko_reach_load.py``)."""
    import dataclasses

    from bench_seiko_damping import damping_case
    from bench_seiko_reach_load import run_condition

    from contactflow.seiko.controller import ControllerConfig

    robot = load_robot("talos")
    ccfg = dataclasses.replace(ControllerConfig(), kp_per_s=kp)
    keys = ("fell", "fraction_of_time_above_ratio", "loaded_joint_max_ratio", "loaded_joint_hold_mean_ratio",
            "hand_travel_forward_up_m", "operator_stopped_at_s")
    reach = {}
    for cond in ("with (12)", "stop at ratio, with (12)"):
        m, _ = run_condition(cond, 0.6, kp_per_s=kp)
        reach[cond] = {k: m[k] for k in keys}
    return {"kp_per_s": kp, "wall_push": kd_wall_push(robot, ccfg), "foot_lift": kd_foot_lift(robot, ccfg),
            "foot_touchdown": touchdown_in_process(robot, ccfg), "damping": damping_case(robot, ccfg),
            "far_reach_12_alone": reach}


def kp_check(out: Path, jobs: int = 2) -> None:
    """``kp``: :func:`kp_case` for each of :data:`KP_CASES`, in parallel processes; writes
    ``kp_default.json`` (docs/seiko_multicontact.md, the defaults table's K_p row)."""
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=jobs) as pool:
        res = {f"K_p = {kp:g}": r for kp, r in zip(KP_CASES, pool.map(kp_case, KP_CASES))}
    for name, r in res.items():
        print(name, json.dumps(r), flush=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "kp_default.json").write_text(json.dumps(res, indent=2))
    print(f"wrote {out / 'kp_default.json'}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("experiment", choices=sorted(EXPERIMENTS) + ["kd_sign", "kp"])
    p.add_argument("--recording", default=None, help="analyse this recording instead of running")
    p.add_argument("--out", default=str(ROOT / "docs"),
                   help="where <experiment>.png and .json go (default: the repository's docs/, tracked files)")
    p.add_argument("--keep-recording", default=None, metavar="DIR",
                   help="record the run into DIR and keep it (default: a temporary directory, deleted afterwards)")
    args = p.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    robot = load_robot("talos")
    if args.experiment == "kd_sign":
        kd_sign(robot, Path(args.out))
        return
    if args.experiment == "kp":
        kp_check(Path(args.out))
        return
    tmp = None
    if args.recording:
        run = Path(args.recording)
    else:
        rec_dir = Path(args.keep_recording) if args.keep_recording else Path(tempfile.mkdtemp(prefix="seiko_bench_"))
        tmp = None if args.keep_recording else rec_dir
        rec_dir.mkdir(parents=True, exist_ok=True)
        print(f"running dataflows/seiko_talos_multicontact.yml with robots/talos/scenarios/{args.experiment}.yaml "
              "(a few minutes; the dora output is kept as dora_run.log in the run) ...", flush=True)
        run = run_dataflow(f"robots/talos/scenarios/{args.experiment}.yaml", rec_dir)
    try:
        rec = read_recording(run)
        fig, metrics = EXPERIMENTS[args.experiment](rec, robot, plt)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / f"{args.experiment}.png", dpi=110)
    metrics["recording"] = str(run) if tmp is None else None
    (out / f"{args.experiment}.json").write_text(json.dumps(metrics, indent=2))
    print(json.dumps(metrics, indent=2))
    print(f"wrote {out / (args.experiment + '.png')} and {out / (args.experiment + '.json')}"
          + (f"; recording kept in {run}" if tmp is None else "; recording deleted (--keep-recording DIR keeps it)"))


if __name__ == "__main__":
    main()
