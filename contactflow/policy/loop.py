"""In-process closed loop: a policy spec + the G1 PD simulator, no dora.

:func:`run_policy_loop` is the baseline the dora graphs are compared against (same policy, same
model, same simulator, one process): per control tick it reads the simulator, steps the
:class:`PolicyRunner` and applies the joint command (PD at every physics step). It records the
run with the stream names of ``dataflows/g1_walk_holosoma.yml`` (``mujoco_driver.sensors``,
``teleop.command``, ``lac_policy.command``) and summarises it with the graphs' own summary
(:func:`contactflow.lac.summary.g1_summary`: ``fell``, ``standing_drift_m``,
``base_velocity_tracking_error_mps``...), so a loop and a graph are measured the same way.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from contactflow.errors import ConfigError
from contactflow.policy.runner import PolicyRunner
from contactflow.policy.spec import PolicySpec

__all__ = ["run_policy_loop"]


def _command_source(commands, robot):
    if isinstance(commands, (str, Path)):
        from contactflow.lac.teleop import TeleopPlayer, load_teleop_scenario

        player = TeleopPlayer(load_teleop_scenario(commands, robot))
        return lambda t: player.step(t).values()
    if hasattr(commands, "step"):
        return lambda t: commands.step(t).values()
    if callable(commands):
        return commands
    from contactflow.lac.teleop import LiveTeleop

    base = LiveTeleop(robot).command(0.0).values()
    points = sorted(((float(t0), dict(c)) for t0, c in commands), key=lambda p: p[0])
    if not points:
        raise ConfigError("run_policy_loop: commands: expected at least one (t_start_s, fields) entry")
    resolved = []
    cur = dict(base)
    for t0, c in points:
        unknown = set(c) - set(base)
        if unknown:
            raise ConfigError(f"run_policy_loop: commands at t = {t0:g} s: unknown field(s) {sorted(unknown)}; "
                              f"expected some of {sorted(base)}")
        cur = {**cur, **{k: np.atleast_1d(np.asarray(val, dtype=float)) for k, val in c.items()}}
        resolved.append((t0, cur))

    def at(t: float) -> dict:
        out = base
        for t0, c in resolved:
            if t + 1e-9 >= t0:
                out = c
        return out

    return at


def run_policy_loop(spec: PolicySpec, robot, commands: Sequence[tuple[float, Mapping]] | str | Path | Any,
                    duration_s: float, *, physics_dt_s: float | None = None, run_dir: str | Path | None = None,
                    summary: bool = True) -> dict:
    """Run a policy on the simulated PD robot in one process (no dora).

    Args:
        spec: the loaded policy spec (for ``robot``).
        robot: a PD robot (``load_robot("g1_29dof")``...).
        commands: the teleop command over time: a list of ``(t_start_s, {field: value})`` set-points
            (``teleop_command`` fields; unspecified ones keep the teleop defaults), a teleop
            scenario file, a :class:`contactflow.lac.teleop.TeleopPlayer`, or ``f(t) -> fields``.
        duration_s: simulated time [s].
        physics_dt_s: physics step [s] (default: the robot file's).
        run_dir: keep the recording there (default: a temporary directory, removed).
        summary: record the run and compute the G1 summary (off: timing only).

    Returns:
        ``sim_time_s``, ``loop_wall_time_s``, ``sim_s_per_wall_s`` (simulated seconds per wall
        second of the loop, recording excluded), ``loop_ticks``, ``n_rejected``,
        ``policy_step_ms_mean`` / ``policy_step_ms_p95`` (observation + inference + action map per
        tick), ``sim_step_ms_mean``, ``fell_early`` (stopped at a fall); with ``summary``, the keys
        of :func:`contactflow.lac.summary.g1_summary` (``fell``, ``base_height_min_m``,
        ``standing_drift_m``, ``base_velocity_tracking_error_mps``, segments...).
    """
    from contactflow.contracts.messages import port_specs
    from contactflow.sim.mujoco_robot import sensor_values
    from contactflow.sim.pd_robot import PDRobotSim, PDSimConfig

    sim = PDRobotSim(PDSimConfig(physics_dt_s=physics_dt_s, control_dt_s=spec.period_s), robot)
    runner = PolicyRunner(spec)
    source = _command_source(commands, robot)
    n_ticks = int(round(duration_s / spec.period_s))
    r = sim.reset()
    rows = []
    pol, phys = [], []
    fell = False
    t_start = time.perf_counter()
    for k in range(n_ticks + 1):
        sensors = sensor_values(r)
        cmd = source(r.t)
        t0 = time.perf_counter()
        out = runner.step(sensors, cmd)
        t1 = time.perf_counter()
        if summary:
            rows.append((r.t, sensors, cmd, out.command))
        if k == n_ticks or fell:
            break
        c = out.command
        r = sim.step(c["q_target"], c["kp"], c["kd"], c["tau_ff"])
        t2 = time.perf_counter()
        pol.append(t1 - t0)
        phys.append(t2 - t1)
        fell = bool(sim.fell() or not np.isfinite(r.q).all())
    wall = time.perf_counter() - t_start
    res = {
        "sim_time_s": float(r.t), "loop_wall_time_s": wall, "sim_s_per_wall_s": float(r.t) / wall if wall > 0 else None,
        "loop_ticks": len(pol), "n_rejected": runner.n_rejected, "fell_early": fell,
        "policy_step_ms_mean": 1e3 * float(np.mean(pol)), "policy_step_ms_p95": 1e3 * float(np.percentile(pol, 95)),
        "sim_step_ms_mean": 1e3 * float(np.mean(phys)),
    }
    if summary:
        res.update(_summarise(rows, robot, port_specs(robot), run_dir))
    return res


def _summarise(rows, robot, specs, run_dir) -> dict:
    """Write the rows as a recording (graph stream names) and return its G1 summary."""
    from contactflow.lac.summary import g1_summary
    from contactflow.recording.summary import json_safe
    from contactflow.recording.store import RecordingWriter, read_recording

    tmp = None
    if run_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="contactflow_policy_loop_")
        run_dir = Path(tmp.name) / "run"
    try:
        w = RecordingWriter(Path(run_dir), {"robot": robot.name, "dataflow": "contactflow.policy.run_policy_loop"})
        streams = {}
        for name, contract in (("mujoco_driver.sensors", "sensors"), ("teleop.command", "teleop_command"),
                               ("lac_policy.command", "joint_command")):
            ps = specs[contract]
            streams[name] = (w.stream(name, ps.size, {"source": name.replace(".", "/"), "contract": contract,
                                                      "layout": json.dumps([[f.name, f.size] for f in ps.fields])}), ps)
        for k, (t, sens, cmd, jc) in enumerate(rows):
            last = k == len(rows) - 1
            for name, values in (("mujoco_driver.sensors", sens), ("teleop.command", cmd), ("lac_policy.command", jc)):
                sw, ps = streams[name]
                sw.append(k, t, ps.pack(values), last, t_wall_ns=k)
        w.close()
        s = g1_summary(read_recording(run_dir), robot)
        # the recording's wall clock is synthetic: keep only the simulated quantities
        for key in ("wall_time_s", "realtime_factor"):
            s.pop(key, None)
        return json_safe(s)
    finally:
        if tmp is not None:
            tmp.cleanup()
