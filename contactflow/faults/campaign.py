"""The fault-injection campaign: run shipped graphs with one fault each, measure.

For each :class:`~contactflow.faults.cases.FaultCase` the runner starts ``dora run`` on the graph
(edited first for the graph faults of :mod:`contactflow.faults.inject` and for ``disk_full``), with
a short scenario, its own recordings folder and a hard wall-clock limit (a hang never hangs the
campaign: the whole process group is killed at the limit). A process fault is sent when the
recording shows the graph's clock (the driver's ``sensors`` stream) past ``case.at_s`` [s of
simulated time]; the node's process is found among the children of ``dora run`` by the
``node_id`` of its ``DORA_NODE_CONFIG`` (as :func:`contactflow.hardware.process_watch.find_child_with_env`).

What is measured afterwards (:func:`analyse`), from the run's output and its recording:

* **fault time** ``t_fault`` [s simulated]: the driver's simulated time at the wall-clock instant
  of the signal, interpolated in the clock stream's rows (each row carries its sender's wall clock
  ``t_wall_ns``); extrapolated at the stream's recent rate when the rows after it were lost (a
  killed driver). Graph faults: ``case.at_s`` (the injector applies them at that time).
* **robot**: ``base_min_m`` (lowest base height after the fault, the clock stream's ``q[2]``) and
  ``base_kept`` (above the robot file's ``fall_height_m``); ``sim_after_fault_ms`` (how much
  simulated time the driver ran after the fault); ``hold_after_ms`` (simulated time from the fault to
  the last command the driver received: from then on it applied its last safe command, held;
  in lockstep the physics does not advance without a command, in real time it runs on the held
  command). Replays (no simulated robot) and a killed simulator report ``n/a``.
* **end of the run**: ``dora run``'s exit code, the ONE failure line (the first node that failed,
  :func:`contactflow.cli.run.parse_failures`, as ``contactflow run`` prints it), ``timed_out``.
* **recording** (:func:`recording_loss`): every stream read back (truncated streams salvaged by the
  reader); ``lost_ms``: the largest gap, over the streams that were being written at the fault,
  between ``t_fault`` and the stream's last message at or before it, less the stream's usual spacing
  (0 when the stream goes on past the fault); a stream the recorder could not write at all (a full disk
  before its first batch, the manifest's ``lost_streams``) counts from its first message. A failed
  write (disk full) is measured in wall time instead, from the manifest: how long before the failure
  the recorder received the oldest message it did not write (``first_unwritten_rx_ns``): what it held
  and lost, whatever the senders' clocks (a replay or a batch estimator sends faster than its recorded
  time, the scenario operator runs ahead of it; messages still on their way when the disk filled are
  counted in ``unwritten_messages``, not judged). In a
  real-time graph the stages skip ticks by design (a stage late for one tick takes the newest input),
  so a stage's last message can be older than 100 ms without anything lost: there ``lost_ms`` is the
  driver's stream (the clock never skips a tick) and the other streams' gap is reported as
  ``stale_ms`` / ``stale_stream``, beside ``skipped_ticks`` (seq numbers missing in the streams other
  than the clock's) -- reported, not judged. ``lost_batches``: the log batches lost on the way to the
  recorder (the manifest's ``recording_lost_batches``; None when the recorder never closed the run),
  judged in every graph: what was lost, whatever the stages skipped.

Pass/fail per case (:func:`judge`, the issue's criteria): the robot kept (base above the fall
height, or n/a); where a node failed (kill, hang, recorder kill, disk full) the run ended by itself
with a non-zero exit and a failure line; where nothing failed (stall, dropout, baseline) exit 0 and
no line; the recording readable up to <= 100 ms before the fault and no log batch lost.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from contactflow.errors import ConfigError
from contactflow.faults.cases import PROCESS_KINDS, SIGNAL_KINDS, FaultCase

__all__ = ["GraphSetup", "GRAPH_SETUPS", "process_cases", "campaign_cases", "run_case", "analyse", "judge",
           "run_campaign", "markdown_table", "summarise", "write_outputs", "reanalyse", "REPO", "LOST_MS_MAX",
           "recording_loss"]

log = logging.getLogger("contactflow.faults")

REPO = Path(__file__).resolve().parents[2]
DATAFLOWS = REPO / "dataflows"
LOST_MS_MAX = 100.0
"""The issue's criterion: the recording readable up to <= 100 ms [simulated] before the fault."""


@dataclasses.dataclass(frozen=True)
class GraphSetup:
    """How the campaign runs one shipped graph.

    Attributes:
        graph: file name in ``dataflows/``.
        robot: robot name (its ``fall_height_m``).
        scenario: short scenario for the runs (``CONTACTFLOW_SCENARIO``, repository-relative), "" = the graph's.
        duration_s: simulated length of a run with that scenario [s] (faults are drawn inside it).
        clock: node id of the graph's clock (the driver or the replay node).
        clock_stream: the recorded stream holding the clock's sensors.
        command_stream: the recorded stream of the command the driver applies ("" = none).
        simulated: whether the clock simulates a robot (False: a replay of recorded sensors).
        needs: a recording the graph replays, made before its runs: ``"seiko"`` (a SEIKO lockstep
            run, ``CONTACTFLOW_RECORDING``), ``"prime_go2"`` (``contactflow prime generate``), "".
        timeout_s: the hard wall-clock limit of one run [s] (a hang: + 60 s).
        realtime: the clock follows the wall clock: the fault is sent ``at_s`` wall seconds after dora
            starts the dataflow (its recording lagged the driver by seconds on a loaded machine, too late
            to time a fault by).
    """

    graph: str
    robot: str
    scenario: str
    duration_s: float
    clock: str
    clock_stream: str
    command_stream: str
    simulated: bool = True
    needs: str = ""
    timeout_s: float = 120.0
    realtime: bool = False


_TALOS_SMOKE = "robots/talos/scenarios/smoke_2s.yaml"
GRAPH_SETUPS: dict[str, GraphSetup] = {s.graph: s for s in [
    GraphSetup("seiko_talos.yml", "talos", _TALOS_SMOKE, 2.0, "mujoco_driver", "mujoco_driver.sensors",
               "seiko_controller.command"),
    # real time: 7 s (the recording, which times the faults, lags the wall clock by up to ~1 s under load)
    GraphSetup("seiko_talos_realtime.yml", "talos", "robots/talos/scenarios/stand_7s.yaml", 7.0, "mujoco_driver",
               "mujoco_driver.sensors", "seiko_controller.command", realtime=True),
    GraphSetup("seiko_talos_realtime_planner.yml", "talos", "robots/talos/scenarios/stand_7s.yaml", 7.0,
               "mujoco_driver", "mujoco_driver.sensors", "seiko_controller.command", realtime=True),
    GraphSetup("seiko_talos_multicontact.yml", "talos", _TALOS_SMOKE, 2.0, "mujoco_driver",
               "mujoco_driver.sensors", "seiko_controller.command"),
    GraphSetup("seiko_talos_replay.yml", "talos", "", 2.0, "mujoco_driver", "mujoco_driver.sensors",
               "seiko_controller.command", simulated=False, needs="seiko"),
    # PRIME: a 1 s recording (100 steps) replayed in a fraction of a second, then one batch solve (minutes)
    GraphSetup("prime_replay_go2.yml", "go2", "", 1.0, "datagen", "datagen.sensors", "", simulated=False,
               needs="prime_go2", timeout_s=400.0),
    GraphSetup("lac_g1_teleop.yml", "g1", "robots/g1/scenarios/stand_3s.yaml", 3.0, "mujoco_driver",
               "mujoco_driver.sensors", "lac_expert.command"),
    # the shipped LAC student (an ONNX policy) in place of the expert
    GraphSetup("lac_g1_policy.yml", "g1", "robots/g1/scenarios/stand_3s.yaml", 3.0, "mujoco_driver",
               "mujoco_driver.sensors", "lac_policy.command"),
]}


def _graph_nodes(graph: str) -> list[str]:
    from contactflow.contracts.wiring import load_dataflow

    data = load_dataflow(DATAFLOWS / graph)
    return [n["id"] for n in data.get("nodes", [])]


def _recorder(graph: str) -> str:
    return "recorder" if "recorder" in _graph_nodes(graph) else ""


def process_cases(setup: GraphSetup, *, quick: bool, seed: int = 0) -> list[FaultCase]:
    """The process faults (:data:`PROCESS_KINDS`) of one graph, fault times drawn from ``seed``.

    Quick: one case per kind (kill and hang on the node that sends the driver its commands, or on
    the first non-clock node). Full: a kill of each node in turn, a hang of each non-clock node.
    The times are drawn uniformly on control ticks (2 ms) between 25 % and 60 % of the run.
    """
    rng = random.Random(f"{setup.graph}:{seed}")
    nodes = _graph_nodes(setup.graph)
    rec = _recorder(setup.graph)
    workers = [n for n in nodes if n not in (setup.clock, rec)]
    main = setup.command_stream.split(".")[0] if setup.command_stream else (workers[0] if workers else setup.clock)

    def at() -> float:
        return round(rng.uniform(0.25, 0.6) * setup.duration_s / 0.002) * 0.002

    cases: list[FaultCase] = [FaultCase(setup.graph, "baseline", "", 0.0, seed=seed)]
    kill_targets = [main] if quick else [n for n in nodes if n != rec]
    hang_targets = [main] if quick else workers
    cases += [FaultCase(setup.graph, "kill", n, at(), seed=seed) for n in kill_targets]
    # a stopped process never answers dora's stop: dora stops it after its finish grace and kills it 15 s
    # later; every shipped graph bounds that grace (finish_grace_secs, contactflow.graphs.FINISH_GRACE_S:
    # 10 s, the recorder 30 s; dora's default is 120 s), so the campaign runs the graphs as shipped (an
    # offline graph's 10 min for its estimator's solve, FINISH_GRACE_S_OFFLINE, is cut back to those in a hang)
    cases += [FaultCase(setup.graph, "hang", n, at(), seed=seed) for n in hang_targets]
    cases.append(FaultCase(setup.graph, "stall", setup.clock, at(), {"pause_s": 1.0}, seed=seed))
    cases.append(FaultCase(setup.graph, "dropout", setup.clock, at(), {"pause_s": 0.1}, seed=seed))
    if rec:
        cases.append(FaultCase(setup.graph, "recorder_kill", rec, at(), seed=seed))
        cases.append(FaultCase(setup.graph, "disk_full", rec, at(), {"fraction": 0.5}, seed=seed))
    return cases


def campaign_cases(graphs: Iterable[str], *, quick: bool, seed: int = 0, kinds: Iterable[str] | None = None,
                   with_graph_faults: bool = True) -> list[FaultCase]:
    """Every case of the campaign: per graph, :func:`process_cases` then the graph faults of
    ``contactflow.faults.inject.graph_cases`` (when that module is present).

    Raises:
        ConfigError: a graph the campaign has no setup for.
    """
    out: list[FaultCase] = []
    inject = _inject() if with_graph_faults else None
    for g in graphs:
        setup = _setup(g)
        out += process_cases(setup, quick=quick, seed=seed)
        if inject is not None and hasattr(inject, "graph_cases"):
            out += list(inject.graph_cases(g, quick))
    if kinds is not None:
        keep = set(kinds) | {"baseline"}
        out = [c for c in out if c.kind in keep]
    return out


def _setup(graph: str) -> GraphSetup:
    name = Path(graph).name
    if name not in GRAPH_SETUPS:
        raise ConfigError(f"faults: no campaign setup for graph {graph!r}; known: {sorted(GRAPH_SETUPS)}")
    return GRAPH_SETUPS[name]


def _inject():
    try:
        from contactflow.faults import inject
    except ModuleNotFoundError as exc:
        if exc.name == "contactflow.faults.inject":
            return None
        raise
    return inject


# ---------------------------------------------------------------------------------------------
# reading a recording while it is written


def _stream_t(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(t [s], t_wall_ns) of the complete batches of a (possibly growing) stream file; empty if none
    (the recording reader's salvaging read: a file still being written has no end-of-stream marker)."""
    from contactflow.errors import RecordingError
    from contactflow.recording.store import read_stream_file

    try:
        table, _, _ = read_stream_file(path)
    except RecordingError:  # nothing complete yet (its header still being written)
        return np.zeros(0), np.zeros(0, np.int64)
    return table.column("t").to_numpy(), table.column("t_wall_ns").to_numpy()


def _run_dir(root: Path) -> Path | None:
    runs = sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink()) if root.is_dir() else []
    return runs[-1] if runs else None


def _node_pid(dora_pid: int, node_id: str) -> int | None:
    """The pid of dora node ``node_id`` among the descendants of ``dora run`` (``DORA_NODE_CONFIG``)."""
    from contactflow.hardware.process_watch import process_env

    want = re.compile(rf"^node_id: *{re.escape(node_id)}$", re.M)
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == dora_pid:
            continue
        env = process_env(int(d.name))
        if env and want.search(env.get("DORA_NODE_CONFIG", "")) and _descends(int(d.name), dora_pid):
            return int(d.name)
    return None


def _descends(pid: int, ancestor: int) -> bool:
    for _ in range(8):
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return False
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
    return False


# ---------------------------------------------------------------------------------------------
# one run


def _edit_graph(graph: dict, case: FaultCase, setup: GraphSetup, baseline: dict | None) -> dict:
    """The dataflow of the run: F2's edit for graph faults, the recorder's write limit for disk_full."""
    import copy

    graph = copy.deepcopy(graph)
    inject = _inject()
    if inject is not None and case.kind in getattr(inject, "GRAPH_KINDS", ()):
        graph = inject.edit_graph(graph, case)
    extra = {str(k): str(v) for k, v in dict(case.params.get("node_args", {})).items()}
    if case.kind == "disk_full":
        limit = case.params.get("max_bytes")
        if limit is None:
            if not baseline or not baseline.get("recording_bytes"):
                raise ConfigError(f"{case.name}: disk_full needs params max_bytes or a baseline run's size")
            limit = int(baseline["recording_bytes"] * float(case.params.get("fraction", 0.5)))
        extra[case.node] = f"{extra.get(case.node, '')} --max-bytes {int(limit)}".strip()
    from contactflow.graphs import finish_grace_of

    for n in graph.get("nodes", []):
        if n.get("id") in extra:
            n["args"] = f"{n.get('args', '')} {extra[n['id']]}".strip()
        if case.kind == "hang" and "finish_grace_secs" in n:
            # what is judged is how fast dora names a hung node: the online graces (an offline graph's
            # 10 min for the PRIME solve would outlast the run's time limit)
            n["finish_grace_secs"] = min(int(n["finish_grace_secs"]), finish_grace_of(str(n.get("id"))))
    return graph


def run_case(case: FaultCase, out_dir: Path, *, timeout_s: float | None = None, recording: str = "",
             baseline: dict | None = None, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run one case and return its outcome (the keys of :func:`analyse`, plus ``case``, ``log``).

    Args:
        case: the case. out_dir: where its output log and recordings go (a sub-folder per case).
        timeout_s: hard wall-clock limit [s] (default: the graph's ``timeout_s``, + 60 s for a hang); the process group
            of ``dora run`` is killed at the limit.
        recording: a run directory to replay (``CONTACTFLOW_RECORDING``), for replay graphs.
        baseline: the outcome of this graph's baseline run (its recording's size sets ``disk_full``'s limit).
    """
    import yaml

    from contactflow.cli.run import dora_executable
    from contactflow.contracts.wiring import load_dataflow
    from contactflow.paths import scripts_env

    setup = _setup(case.graph)
    if case.kind == "disk_full" and not recorder_has_max_bytes():
        return {"name": case.name, "case": case.to_dict(), "pass": None, "pending": True, "exit_code": None,
                "why": "pending: the recorder has no --max-bytes write limit yet", "errors": []}
    if case.kind != "baseline" and case.kind not in PROCESS_KINDS:
        inject = _inject()
        if inject is None or case.kind not in getattr(inject, "GRAPH_KINDS", ()):
            raise ConfigError(f"{case.name}: unknown fault kind {case.kind!r}")
    if timeout_s is None:
        timeout_s = setup.timeout_s + (60.0 if case.kind == "hang" else 0.0)
    tag = hashlib.sha1(json.dumps(case.to_dict(), sort_keys=True).encode()).hexdigest()[:10]
    out_dir = Path(out_dir).resolve()  # the recordings' folder reaches nodes that run in the dataflow's folder (also
    # called directly, not only from run_campaign)
    case_dir = out_dir / "cases" / f"{Path(case.graph).stem}-{case.kind}-{case.node or 'none'}-{tag}"
    case_dir.mkdir(parents=True, exist_ok=True)
    rec_root = case_dir / "recordings"
    graph = _edit_graph(load_dataflow(DATAFLOWS / case.graph), case, setup, baseline)
    # the edited graph under the shipped file's name in <case>/dataflows/, beside a link <case>/robots ->
    # robots/: the graphs' relative paths (../robots/...) and the recorder's --dataflow name still hold,
    # and nothing is written into the checkout's dataflows/ (which tests and tools scan)
    (case_dir / "dataflows").mkdir(exist_ok=True)
    if not (case_dir / "robots").exists():
        (case_dir / "robots").symlink_to(REPO / "robots", target_is_directory=True)
    flow = case_dir / "dataflows" / case.graph
    flow.write_text(yaml.safe_dump(graph, sort_keys=False))
    env = scripts_env()
    env["CONTACTFLOW_RECORDINGS"] = str(rec_root)
    env.pop("CONTACTFLOW_SCENARIO", None)
    env.pop("CONTACTFLOW_RECORDING", None)
    scenario = case.scenario or setup.scenario
    if scenario:
        env["CONTACTFLOW_SCENARIO"] = str(REPO / scenario)
    if recording:
        env["CONTACTFLOW_RECORDING"] = str(recording)
    env.update({str(k): str(v) for k, v in dict(case.params.get("env", {})).items()})
    logf = case_dir / "dora.log"
    fault: dict[str, Any] = {"sent": False}
    t_start = time.monotonic()
    with open(logf, "wb") as lf:
        proc = subprocess.Popen([dora_executable(), "run", str(flow)], cwd=REPO, env=env, stdout=lf,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            fault = _inject_signal(proc, case, setup, rec_root, t_start + timeout_s, logf)
            timed_out = False
            try:
                proc.wait(timeout=max(1.0, t_start + timeout_s - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(proc)
        except BaseException:
            _kill_group(proc)
            raise
    wall_s = time.monotonic() - t_start
    lines = logf.read_text(errors="replace").splitlines()
    result = analyse(case, setup, rec_root, lines, proc.returncode, timed_out, fault)
    result.update(wall_s=round(wall_s, 1), log=str(logf.relative_to(out_dir)), case=case.to_dict(), name=case.name,
                  signal=fault)
    result["pass"], result["why"] = judge(case, result)
    return result


def recorder_has_max_bytes() -> bool:
    """Whether the recorder node takes ``--max-bytes`` (the disk-full emulation of ``disk_full``)."""
    return "--max-bytes" in (REPO / "nodes" / "recorder.py").read_text()


def reanalyse(result: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    """``result`` measured again from its stored log and recording (:func:`analyse`, :func:`judge`):
    for criteria or analysis changed after the run. Results without the signal's record (older
    campaigns) of signal kinds, pending ones and runner errors come back unchanged."""
    case = FaultCase(**result["case"])
    if result.get("pending") or "log" not in result or (case.kind in SIGNAL_KINDS and "signal" not in result):
        return result
    logf = out_dir / result["log"]
    lines = logf.read_text(errors="replace").splitlines()
    new = analyse(case, _setup(case.graph), logf.parent / "recordings", lines, result["exit_code"],
                  result["timed_out"], result.get("signal") or {"sent": False})
    out = {**result, **new}
    out["pass"], out["why"] = judge(case, out)
    return out


def _kill_group(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGCONT, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
    # nodes that left the group (none in dora 1.1) die with dora run (its orphan guard)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


_STARTED = b"all nodes are ready, starting dataflow"


def _inject_signal(proc: subprocess.Popen, case: FaultCase, setup: GraphSetup, rec_root: Path,
                   deadline: float, logf: Path) -> dict[str, Any]:
    """Wait for the clock to pass ``case.at_s`` (in the recording; real time: on the wall clock from
    dora's start of the dataflow), then signal the target node."""
    if case.kind not in SIGNAL_KINDS:
        return {"sent": False}
    started = None
    while setup.realtime and proc.poll() is None and time.monotonic() < deadline:
        if started is None and _STARTED in logf.read_bytes():
            started = time.monotonic()
        if started is not None and time.monotonic() - started >= case.at_s:
            break
        time.sleep(0.02)
    while not setup.realtime and proc.poll() is None and time.monotonic() < deadline:
        run = _run_dir(rec_root)
        f = run / f"{setup.clock_stream}.arrows" if run is not None else None
        if f is not None and f.exists():
            t, w = _stream_t(f)
            now = _sim_now(t, w, time.time_ns())
            if now is not None and now >= case.at_s:
                break
        time.sleep(0.05)
    if proc.poll() is not None or time.monotonic() >= deadline:
        return {"sent": False, "error": "the run ended or timed out before the fault time"}
    pid = _node_pid(proc.pid, case.node)
    if pid is None:
        return {"sent": False, "error": f"no process of node {case.node!r} found"}
    wall_ns = time.time_ns()
    if case.kind in ("kill", "recorder_kill"):
        os.kill(pid, signal.SIGKILL)
    else:  # hang, stall, dropout: SIGSTOP (a hang is never continued)
        os.kill(pid, signal.SIGSTOP)
        if case.kind in ("stall", "dropout"):
            time.sleep(float(case.params.get("pause_s", 1.0 if case.kind == "stall" else 0.1)))
            os.kill(pid, signal.SIGCONT)
    return {"sent": True, "pid": pid, "wall_ns": wall_ns}


# ---------------------------------------------------------------------------------------------
# outcome


def _sim_now(t: np.ndarray, w: np.ndarray, now_ns: int) -> float | None:
    """The clock's simulated time [s] now, from the rows written so far: the newest row's time advanced
    at the clock's rate over its last 0.5 s (the recorder lags the clock by a log batch and its flush
    period, by seconds in a loaded real-time graph). None before any row."""
    if t.size == 0:
        return None
    i = int(np.argmax(t))
    j = int(np.searchsorted(t, t[i] - 0.5)) if np.all(np.diff(t) >= 0) else 0
    dw = (int(w[i]) - int(w[j])) * 1e-9
    if dw <= 0.05:
        return float(t[i])
    rate = min(max((t[i] - t[j]) / dw, 0.0), 5.0)
    return float(t[i] + max(0.0, (now_ns - int(w[i])) * 1e-9) * rate)


def _interp_fault_t(t: np.ndarray, w: np.ndarray, wall_ns: int) -> float | None:
    """The clock's simulated time [s] at wall time ``wall_ns`` from its rows (t, t_wall_ns)."""
    if t.size == 0:
        return None
    order = np.argsort(w, kind="stable")
    t, w = t[order], w[order].astype(np.int64)
    before = np.flatnonzero(w <= wall_ns)
    if before.size == 0:
        return float(t[0])
    i = before[-1]
    if i + 1 < t.size:  # rows after the fault: the time of the last row before it (lockstep: the
        return float(t[i])  # clock waits; real time: < one period off)
    # nothing after (the clock was killed, or its tail lost): extrapolate at its rate of the last 0.5 s
    j = np.searchsorted(t, t[i] - 0.5)
    dw = (w[i] - w[j]) * 1e-9
    rate = (t[i] - t[j]) / dw if dw > 0 else 0.0
    return float(t[i] + max(0.0, (wall_ns - w[i]) * 1e-9) * min(max(rate, 0.0), 5.0))


def analyse(case: FaultCase, setup: GraphSetup, rec_root: Path, lines: list[str], returncode: int | None,
            timed_out: bool, fault: dict[str, Any]) -> dict[str, Any]:
    """The measured outcome of one run (module docstring). Keys: ``exit_code``, ``timed_out``,
    ``failure_line``, ``failed_nodes``, ``fault_sent``, ``t_fault_s``, ``base_min_m``, ``base_kept``,
    ``sim_after_fault_ms``, ``hold_after_ms``, ``recording``, ``recording_bytes``, ``truncated_streams``,
    ``clock_gaps``, ``unreadable``, ``errors`` and those of :func:`recording_loss`."""
    from contactflow.cli.run import parse_failures
    from contactflow.recording.store import RecordingError, read_recording

    res: dict[str, Any] = {"exit_code": returncode, "timed_out": timed_out, "fault_sent": bool(fault.get("sent")),
                           "errors": [fault["error"]] if fault.get("error") else []}
    failures = parse_failures(lines)
    # the first node that failed; none (a hang: the node that noticed it only "stops"): the first that stopped
    first = [f for f in failures.values() if not f.consequence] or [f for f in failures.values() if f.message]
    res["failed_nodes"] = list(failures)
    res["failure_line"] = (f"node {first[0].node} {first[0].kind or 'failed'}"
                           f"{f' (exit code {first[0].exit_code})' if first[0].exit_code is not None else ''}: "
                           f"{first[0].message or '(no error line)'}") if first else ""
    run = _run_dir(rec_root)
    res["recording"] = str(run) if run else ""
    res["recording_bytes"] = sum(p.stat().st_size for p in run.glob("*.arrows")) if run else 0
    streams: dict[str, Any] = {}
    res["unreadable"] = []
    manifest: dict | None = None
    if run is not None:
        try:
            rec = read_recording(run)
            manifest = rec.manifest
            for name in rec.stream_names:
                try:
                    streams[name] = rec.stream(name)
                except (RecordingError, OSError, ValueError) as exc:
                    res["unreadable"].append(f"{name}: {exc}")
        except RecordingError as exc:
            res["unreadable"].append(str(exc))
    res["truncated_streams"] = [n for n, s in streams.items() if s.truncated]
    clock = streams.get(setup.clock_stream)
    # fault time [s simulated]
    if case.kind == "baseline":
        t_fault = None
    elif case.kind == "disk_full":
        # the limit was hit when the recorder wrote its last batch: the clock's newest written time (the
        # operator runs ahead of the clock, so not the newest of all); the loss itself is measured in wall
        # time from the manifest (recording_loss)
        written = clock if clock is not None and len(clock) else None
        t_fault = (float(written.t.max()) if written is not None
                   else max((float(s.t.max()) for s in streams.values() if len(s)), default=None))
    elif case.kind in SIGNAL_KINDS:
        t_fault = (_interp_fault_t(clock.t, clock.t_wall_ns, fault["wall_ns"])
                   if fault.get("sent") and clock is not None else None)
        # the end of the clock: the driver's "simulation ended at t = X s" (its last rows may not be
        # recorded), else (a replay: the clock replays a recording of duration_s) the replay's end, the
        # later of duration_s and the newest recorded row; the fault time is capped there
        t_end = _sim_end(lines)
        if t_end is None:
            t_end = max(setup.duration_s, float(clock.t.max()) if clock is not None and len(clock) else 0.0)
        if t_fault is not None:
            t_fault = min(t_fault, t_end)
        fin = clock.finished.astype(bool) if clock is not None and len(clock) else np.zeros(0, bool)
        if fault.get("sent") and fin.any() and int(clock.t_wall_ns[fin].min()) <= fault["wall_ns"]:
            res["after_end"] = True  # the clock had sent its last ('finished') tick before the signal
            t_fault = min(t_fault, float(clock.t.max())) if t_fault is not None else None
            if setup.simulated:
                res["errors"].append(f"the fault came after the simulation ended (t = {t_end:g} s)")
    else:
        t_fault = case.at_s
    res["t_fault_s"] = None if t_fault is None else round(t_fault, 4)
    # robot
    res.update(base_min_m=None, base_kept=None, sim_after_fault_ms=None, hold_after_ms=None, clock_gaps=None)
    if clock is not None and len(clock):
        res["clock_gaps"] = int(np.sum(np.diff(np.sort(clock.seq)) > 1))
        after = clock.t >= (t_fault if t_fault is not None else -1.0)
        if t_fault is not None:
            res["sim_after_fault_ms"] = round(max(0.0, float(clock.t.max()) - t_fault) * 1e3, 1)
        if setup.simulated and not (case.kind == "kill" and case.node == setup.clock):
            try:
                z = clock.field("q")[:, 2]
                zs = z[after] if np.any(after) else z[-1:]
                res["base_min_m"] = round(float(np.min(zs)), 4)
                res["base_kept"] = bool(np.all(np.isfinite(zs)) and np.min(zs) > _fall_height(setup.robot))
            except KeyError as exc:
                res["errors"].append(str(exc))
        cmd = streams.get(setup.command_stream) if setup.command_stream else None
        if (cmd is not None and len(cmd) and t_fault is not None and setup.simulated
                and not (case.kind == "kill" and case.node == setup.clock)  # no robot after that
                and case.kind not in ("stall", "dropout", "recorder_kill", "disk_full")):  # commands go on there
            res["hold_after_ms"] = round(max(0.0, float(cmd.t.max()) - t_fault) * 1e3, 1)
    res.update(recording_loss(streams, t_fault, clock_stream=setup.clock_stream, realtime=setup.realtime,
                              manifest=manifest))
    return res


def recording_loss(streams: dict[str, Any], t_fault: float | None, *, clock_stream: str, realtime: bool,
                   manifest: dict | None = None) -> dict[str, Any]:
    """How much of the recording before the fault survived (module docstring, *recording*).

    Args:
        streams: stream name -> :class:`~contactflow.recording.store.Stream` (``t`` [s], ``seq``).
        t_fault: the fault's simulated time [s] (None: a baseline; nothing measured).
        clock_stream: the driver's (clock's) stream, which never skips a tick.
        realtime: a real-time graph (its stages skip ticks): judged on the clock's stream and lost batches.
        manifest: the run's manifest (``recording_lost_batches``, ``lost_streams``; after a failed write,
            ``write_failure.t_wall_ns`` and each stream's ``first_unwritten_rx_ns``: then ``lost_ms`` is how
            long before the failure the recorder received the oldest message it did not write, in wall
            time), None if unreadable.

    Returns:
        ``lost_ms`` [ms] and ``lost_stream`` (judged: <= :data:`LOST_MS_MAX`), ``stale_ms`` and
        ``stale_stream`` (real time: the largest gap of the other streams, reported), ``skipped_ticks``
        (seq numbers missing in the non-clock streams, whole run) and ``skipped_by_stream``,
        ``lost_batches`` (log batches lost on the way; None: unknown).
    """
    manifest = manifest or {}
    gaps: dict[str, float] = {}
    if t_fault is not None:
        for name, s in streams.items():
            if not len(s) or float(s.t.min()) > t_fault:
                continue
            before = np.sort(s.t[s.t <= t_fault])
            # less the stream's usual spacing (95th percentile of its intervals before the fault): 2 ms for
            # a per-tick stream; a real-time stage that skips ticks sends less often by design
            usual = float(np.percentile(np.diff(before), 95)) if before.size > 2 else 0.0
            gaps[name] = max(0.0, t_fault - float(before[-1]) - usual)
        for name, e in (manifest.get("lost_streams") or {}).items():  # received, never written (disk full)
            first = e.get("first_t") if isinstance(e, dict) else None
            if isinstance(first, (int, float)) and first <= t_fault:
                gaps[name] = max(gaps.get(name, 0.0), t_fault - float(first))
    judged = {n: g for n, g in gaps.items() if not realtime or n == clock_stream}
    wf = manifest.get("write_failure") or {}
    if t_fault is not None and isinstance(wf.get("t_wall_ns"), int) and wf["t_wall_ns"] > 0:
        # a failed write (disk full): the manifest says when the recorder received the oldest message of each
        # stream that it did not write; the loss is how long before the failure that was, in wall time (a
        # replay or a batch estimator runs faster than its recorded time, the operator ahead of it: a
        # recorded-time gap would count a fraction of a second of sending as seconds of loss)
        entries = {**(manifest.get("streams") or {}), **(manifest.get("lost_streams") or {})}
        walls = {n: e.get("first_unwritten_rx_ns") for n, e in entries.items() if isinstance(e, dict)}
        if any(isinstance(w, int) for w in walls.values()):
            judged = {n: max(0.0, (wf["t_wall_ns"] - w) * 1e-9) if isinstance(w, int) else 0.0
                      for n, w in walls.items() if not realtime or n == clock_stream}
    other = {n: g for n, g in gaps.items() if realtime and n != clock_stream}
    lost_stream = max(judged, key=judged.get, default="")
    stale_stream = max(other, key=other.get, default="")
    skipped = {}
    for name, s in streams.items():
        if name != clock_stream and len(s) > 1:
            d = np.diff(np.unique(s.seq))
            if np.any(d > 1):
                skipped[name] = int(np.sum(d[d > 1] - 1))
    lost_batches = manifest.get("recording_lost_batches")
    return {
        "lost_ms": None if t_fault is None or not streams else round(judged.get(lost_stream, 0.0) * 1e3, 1),
        "lost_stream": lost_stream if judged.get(lost_stream, 0.0) > 0 else "",
        "stale_ms": round(other[stale_stream] * 1e3, 1) if stale_stream else None,
        "stale_stream": stale_stream,
        "skipped_ticks": int(sum(skipped.values())),
        "skipped_by_stream": skipped,
        "lost_batches": int(lost_batches) if isinstance(lost_batches, int) else None,
    }


_SIM_END = re.compile(r"simulation ended at t = (?P<t>[-+\d.eE]+) s")


def _sim_end(lines: list[str]) -> float | None:
    """The simulated time at which the driver ended (its log line), None if it did not say."""
    for line in reversed(lines):
        m = _SIM_END.search(line)
        if m:
            return float(m["t"])
    return None


_FALL: dict[str, float] = {}


def _fall_height(robot: str) -> float:
    if robot not in _FALL:
        from contactflow.robot import load_robot

        _FALL[robot] = float(load_robot(robot).fall_height_m)
    return _FALL[robot]


def judge(case: FaultCase, r: dict[str, Any]) -> tuple[bool, str]:
    """(pass, why) of one outcome against the issue's criteria (module docstring)."""
    why = []
    if case.kind != "baseline" and case.kind in SIGNAL_KINDS and (not r["fault_sent"] or r["errors"]):
        return False, "fault not injected as planned: " + "; ".join(r["errors"])
    node_failed = case.kind in ("kill", "hang", "recorder_kill", "disk_full")
    if r["timed_out"]:
        why.append("the run did not end by itself (killed at the campaign's limit)")
    elif node_failed or case.kind not in PROCESS_KINDS | {"baseline"}:
        if node_failed and r["exit_code"] == 0:
            why.append("exit 0 although a node failed")
        if (node_failed or r["exit_code"] != 0) and not r["failure_line"]:
            why.append("no line names the failed node")
        elif node_failed and not r["failure_line"].startswith(f"node {case.node} "):
            why.append(f"the failure line names another node than {case.node}")
    elif r["exit_code"] != 0:
        why.append(f"exit {r['exit_code']} although no node failed")
    if r["base_kept"] is False:
        why.append(f"robot fell (base {r['base_min_m']} m)")
    if r["unreadable"]:
        why.append("recording unreadable: " + "; ".join(r["unreadable"])[:200])
    if (case.kind in SIGNAL_KINDS and r["fault_sent"] and r["recording"] and r.get("t_fault_s") is None
            and not r["unreadable"]):
        why.append("nothing of the clock's stream recorded before the fault (no fault time: the recording lost "
                   "everything up to it)")
    if r["lost_ms"] is not None and r["lost_ms"] > LOST_MS_MAX:
        why.append(f"recording lost {r['lost_ms']:.0f} ms before the fault ({r['lost_stream']})")
    if r.get("lost_batches"):
        why.append(f"{r['lost_batches']} log batch(es) lost on the way to the recorder")
    if not r["recording"]:
        why.append("no recording")
    if case.kind in ("stall", "dropout", "baseline") and r["clock_gaps"]:
        why.append(f"{r['clock_gaps']} gap(s) in the clock stream")
    return not why, "; ".join(why)


# ---------------------------------------------------------------------------------------------
# the campaign


def _prepare(setup: GraphSetup, out_dir: Path, made: dict[str, str]) -> str:
    """The recording a replay graph replays, made once per campaign."""
    if not setup.needs or setup.needs in made:
        return made.get(setup.needs, "")
    if setup.needs == "seiko":
        r = run_case(FaultCase("seiko_talos.yml", "baseline", ""), out_dir / "prepare")
        made["seiko"] = r["recording"]
    elif setup.needs == "prime_go2":
        dest = out_dir / "prepare" / "prime_go2_squat"
        if not (dest / "manifest.json").exists():
            subprocess.run([sys.executable, "-m", "contactflow.cli", "prime", "generate", "--robot", "go2",
                            "--motion", "squat", "--duration", str(setup.duration_s), "--payload-kg", "3", "--seed", "0",
                            "--out", str(dest)], check=True, cwd=REPO, capture_output=True)
        made["prime_go2"] = str(dest)
    return made[setup.needs]


def run_campaign(cases: list[FaultCase], out_dir: Path, *, progress: Callable[[str], None] = print,
                 timeout_s: float | None = None) -> list[dict[str, Any]]:
    """Run ``cases`` in order (baselines first per graph), write ``results.json`` and ``table.md``
    in ``out_dir`` after each case, and return the outcomes."""
    out_dir = Path(out_dir).resolve()  # _prepare's recordings too
    out_dir.mkdir(parents=True, exist_ok=True)
    made: dict[str, str] = {}
    baselines: dict[str, dict] = {}
    results: list[dict[str, Any]] = []
    ordered = sorted(cases, key=lambda c: c.kind != "baseline")
    for i, case in enumerate(ordered, 1):
        setup = _setup(case.graph)
        try:
            rec = _prepare(setup, out_dir, made)
            r = run_case(case, out_dir, timeout_s=timeout_s, recording=rec, baseline=baselines.get(case.graph))
        except Exception as exc:  # one broken case must not end the campaign: reported as failed
            r = {"name": case.name, "case": case.to_dict(), "pass": False, "why": f"runner error: {exc}",
                 "exit_code": None, "errors": [repr(exc)]}
        if case.kind == "baseline":
            baselines[case.graph] = r
        results.append(r)
        verdict = "PENDING" if r.get("pending") else "PASS" if r["pass"] else "FAIL"
        progress(f"[{i}/{len(ordered)}] {case.name}: {verdict}"
                 f" (exit {r.get('exit_code')}, {r.get('wall_s', '?')} s){'' if r['pass'] else ': ' + r['why']}")
        write_outputs(results, out_dir)
    return results


def summarise(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts: faults ``injected`` (pending ones aside) and ``passed``, ``pending`` names, baselines."""
    faults = [r for r in results if r["case"]["kind"] != "baseline" and not r.get("pending")]
    return {"injected": len(faults), "passed": sum(1 for r in faults if r["pass"]),
            "pending": [r["name"] for r in results if r.get("pending")],
            "baselines_passed": sum(1 for r in results if r["case"]["kind"] == "baseline" and r["pass"]),
            "baselines": sum(1 for r in results if r["case"]["kind"] == "baseline")}


def write_outputs(results: list[dict[str, Any]], out_dir: Path) -> None:
    """``out_dir/results.json`` (summary and outcomes) and ``out_dir/table.md``."""
    summary = summarise(results)
    (out_dir / "results.json").write_text(json.dumps({"summary": summary, "cases": results}, indent=1, default=str))
    (out_dir / "table.md").write_text(markdown_table(results) + "\n")


def _fmt(v, unit: str = "") -> str:
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return f"{v:g}{unit}"
    return f"{v}{unit}"


def markdown_table(results: list[dict[str, Any]]) -> str:
    """One row per case: graph, fault, target, at, robot outcome, safe hold, exit, failure line,
    recording lost before the fault, pass/fail (and why)."""
    head = ("| graph | fault | target | at [s sim] | robot (base min, kept) | hold after fault [ms sim] "
            "| exit | failure line | recording lost before fault [ms] | result |")
    rows = [head, "|" + "---|" * 10]
    for r in results:
        c = r["case"]
        robot = ("n/a" if r.get("base_kept") is None else f"{r['base_min_m']:.3f} m, {_fmt(r['base_kept'])}")
        line = (r.get("failure_line") or "").replace("|", "\\|")
        if len(line) > 140:
            line = line[:137] + "..."
        at = r.get("t_fault_s") if r.get("t_fault_s") is not None else c["at_s"]
        exit_ = f"{r.get('exit_code')}{' (timeout)' if r.get('timed_out') else ''}"
        result = ("pending" if r.get("pending") else "pass" if r["pass"]
                  else f"**FAIL**: {r.get('why', '')}".replace("|", "\\|"))
        lost = _fmt(r.get("lost_ms"))
        if r.get("stale_stream"):  # real time: the driver's stream judged; the stages' staleness beside it
            lost += f" (driver; stages {_fmt(r.get('stale_ms'))} stale, {r.get('skipped_ticks', 0)} ticks skipped)"
        if r.get("lost_batches"):
            lost += f"; {r['lost_batches']} batches lost"
        rows.append(f"| {Path(c['graph']).stem} | {c['kind']} | {c['target'] or '-'} | {_fmt(at)} | {robot} "
                    f"| {_fmt(r.get('hold_after_ms'))} | {exit_} | {line or '-'} | {lost} | {result} |")
    return "\n".join(rows)
