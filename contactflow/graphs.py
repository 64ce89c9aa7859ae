"""The SEIKO dataflow graphs, from one description (``contactflow graphs --check | --write``).

Every SEIKO graph shipped in ``dataflows/`` (``seiko_talos*.yml``, ``prime_seiko_talos_payload.yml``,
``seiko_controller_replay.yml``) is rendered from the builders in :data:`GRAPHS`, which compose the
same node pieces (:func:`driver`, :func:`operator`, :func:`seiko_stages`, :func:`recorder`, ...), so a
change to a stage's wiring (its ``--lag``, a new input) is made once and reaches every graph. The
rendered files are flat dora YAML (no dora modules): ``dora run dataflows/<graph>.yml`` runs them as
they are, and ``contactflow check`` reads them without ``dora expand``. Do not edit them by hand:
change the description here and run ``contactflow graphs --write``; ``contactflow graphs --check``
(and ``tests/test_graph_sources.py``) fails naming every file that differs from its source.

Recording: every node that sends with ``nodes/_runtime.py``'s Sender declares the output ``log``
(its outputs batched every ``$CONTACTFLOW_LOG_EVERY`` ticks) and the recorder reads that one input
per node instead of one per output per tick; outputs that only the recorder reads (the Controller's
``state``) are then not declared and not sent per tick; a replay node does the same with the streams it
replays. Nodes that do not use the Sender (a dynamic operator) are recorded output by output.

Lockstep control edges use backpressure queues (no tick is ever dropped: drop-oldest queues lose
messages in bursts); observers (the viewer) use drop-oldest queues so they never hold back the loop.
The real-time graph (``seiko_talos_realtime``: the pieces with ``realtime=True``) instead gives every
node ``--realtime``, drop-oldest queues of 10 between its stages (:data:`REALTIME`: a stage takes the
newest message and skips the stale ones) and the SCHED_FIFO priorities of :data:`RT_PRIORITY` in each
stage's ``env``; its recorder inputs stay lossless.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Callable, Iterable

__all__ = ["Node", "Graph", "GRAPHS", "render", "check_graphs", "write_graphs", "driver", "replay_node", "operator",
           "seiko_stages", "recorder", "viewer", "DATAFLOWS", "REALTIME", "RT_PRIORITY", "RT_DAEMON"]

#: Where the rendered graphs live.
DATAFLOWS = Path(__file__).resolve().parent.parent / "dataflows"

#: Queue of a lockstep control edge: never drop a tick.
LOCKSTEP = {"queue_size": 100, "queue_policy": "backpressure"}
#: Queue of a recorder input (lossless; deep enough for a burst of log batches).
RECORD = {"queue_size": 1000, "queue_policy": "backpressure"}
#: Queue of an observer (viewer): never hold back the loop.
OBSERVE = {"queue_size": 100, "queue_policy": "drop_oldest"}
#: Queue of a real-time edge between stages: the consumer takes the newest message before each tick;
#: a full queue drops its oldest (dora logs "Discarding event ... due to queue size limit"). dora 1.1's
#: queue_size 1 dropped ~30 % of a 500 Hz stream at an idle receiver; backpressure routes through the
#: daemon, which lagged 300 ms (measured on the 2-core machine, commit fffb470).
REALTIME = {"queue_size": 10, "queue_policy": "drop_oldest"}
#: SCHED_FIFO priority of each real-time stage (env CONTACTFLOW_RT_PRIORITY, nodes/_runtime.py
#: apply_scheduling); the recorder: RT_RECORDER_PRIORITY.
RT_PRIORITY = {"mujoco_driver": 20, "seiko_controller": 10, "seiko_stack": 7, "seiko_retargeting": 7, "operator": 6,
               "input_filter": 5}
#: SCHED_FIFO priority of the recorder of a real-time graph: below the control loop's critical path (the
#: driver, the Controller, the dora daemon), above the planning stages (Retargeting, operator, input filter)
#: and every normal process. Its work is small and bounded (one log batch per node per 25 ticks), and it
#: must keep up: at the normal priority, and at SCHED_FIFO 1 below planning stages that could not keep up on
#: a loaded 2-core machine, it read nothing until the run ended, and a recorder killed in the run lost
#: everything (docs/reliability.md).
RT_RECORDER_PRIORITY = 8
#: SCHED_FIFO priority the real-time driver gives the dora daemon that spawned it (CONTACTFLOW_RT_DAEMON).
RT_DAEMON = 30
#: dora's finish grace (``finish_grace_secs``, per node) [s]. Once the other nodes have ended, dora waits
#: this long for the nodes still running, then stops them and, 15 s later (dora's own bound), kills them
#: and names them ("node was killed by dora because it didn't react to a stop message in time"). dora
#: 1.1's default is 120 s (DORA_FINISH_DRAIN_GRACE_SECS): a hung node was named ~135 s after the others
#: ended. Measured with the installed dora (a SIGSTOPped node feeding a recorder-like node that waits for
#: all its inputs): with 3 s on both, dora stopped both ~4 s after the hung node's inputs closed and
#: killed the hung one 15 s later; with 3 s on the hung node and dora's 120 s on the waiting one, nothing
#: happened for 90 s. So every node needs it, the recorder included, and the longest grace of the nodes
#: still running (the recorder's, as it waits for the hung node's log) sets when dora acts: in the fault
#: campaign's real-time Controller hang, dora stopped the hung Controller 33 s after its inputs closed and
#: named it 15 s later (55 s after the driver's "command lost" line; 120 s + 15 s before). Every shipped
#: graph sets it on every node (tests/test_finish_grace.py), the hand-written ones too.
FINISH_GRACE_S = 10
#: Per-node exceptions (node id): the recorder reads the whole run back for its summary once its inputs
#: have closed; 30 s (+ its summary budget after dora's stop) leaves a long run the time for it.
FINISH_GRACE_S_OF = {"recorder": 30}
#: The grace of a graph with an offline node, one that works after its inputs have closed (the PRIME
#: estimator: it solves once the replay has ended, ~30 s for 3 s of Go2 data on the quiet 2-core machine,
#: minutes for longer runs or under load), on that node and on the recorder that waits for its outputs:
#: with the 10 s / 30 s above dora stopped both after 30 s and the estimate was lost (its outputs sent
#: after the recorder ended; 2026-12-03, `dora run dataflows/prime_replay_go2.yml` on a loaded machine).
#: The price: an estimator that hangs is named 10 min after the replay ended (a stop, Ctrl-C or
#: `--stop-after`, still ends it within one FDDP iteration).
FINISH_GRACE_S_OFFLINE = 600
#: Node kinds (:func:`contactflow.paths.node_kind`) that work after their inputs have closed.
OFFLINE_NODE_KINDS = ("prime_estimator",)


def finish_grace_of(node_id: str, kind: str | None = None, graph_kinds: Iterable[str] = ()) -> int:
    """The ``finish_grace_secs`` a shipped graph gives node ``node_id`` of kind ``kind`` in a graph whose
    nodes are of kinds ``graph_kinds`` (:data:`FINISH_GRACE_S`, :data:`FINISH_GRACE_S_OF`,
    :data:`FINISH_GRACE_S_OFFLINE`); without the kinds, the grace of a graph without an offline node."""
    offline = bool(set(graph_kinds) & set(OFFLINE_NODE_KINDS))
    if offline and (kind in OFFLINE_NODE_KINDS or kind == "recorder"):
        return FINISH_GRACE_S_OFFLINE
    return FINISH_GRACE_S_OF.get(node_id, FINISH_GRACE_S)

from contactflow.errors import ConfigError  # noqa: E402
from contactflow.contracts.wiring import LOG_OUTPUT as LOG, ROWS_SUFFIX  # noqa: E402 - the batched log and multi-tick outputs (one source)
from contactflow.paths import node_script  # noqa: E402 - the nodes' installed executables (one source)
SCENARIOS = "../robots/talos/scenarios"


@dataclasses.dataclass
class Node:
    """One node of a graph.

    Attributes:
        id: dora node id.
        path: the node's installed executable (:func:`contactflow.paths.node_script`, found on ``PATH``:
            the graph runs from any folder), a script path relative to ``dataflows/``, or ``dynamic``.
        args: the node's arguments (None: no ``args`` key).
        inputs: port -> (source ``node/output``, queue settings).
        outputs: declared outputs (``log`` included when the node batches its log).
        record: output -> recorder input id, for outputs the recorder reads one by one (nodes
            without a ``log``).
        comment: comment lines written above the node.
        path_comment / args_comment: end-of-line comments.
        folded_args: write ``args`` as a folded block (long argument lists).
        env: the node's environment variables (``env:``).
    """

    id: str
    path: str
    args: str | None = None
    inputs: dict[str, tuple[str, dict]] = dataclasses.field(default_factory=dict)
    outputs: list[str] = dataclasses.field(default_factory=list)
    record: dict[str, str] = dataclasses.field(default_factory=dict)
    comment: str = ""
    path_comment: str = ""
    args_comment: str = ""
    folded_args: bool = False
    env: dict[str, int | str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Graph:
    """A graph: the header comment (without ``#``) and its nodes."""

    header: str
    nodes: list[Node]


# ---------------------------------------------------------------------------------------------------
# Pieces
# ---------------------------------------------------------------------------------------------------

def _robot(realtime: bool) -> str:
    return "--robot talos --realtime" if realtime else "--robot talos"


def _queue_of(realtime: bool) -> dict:
    return REALTIME if realtime else LOCKSTEP


def _rt_env(node_id: str, realtime: bool) -> dict[str, int]:
    return {"CONTACTFLOW_RT_PRIORITY": RT_PRIORITY[node_id]} if realtime else {}


def driver(command: str, *, args: str | None = None, args_comment: str = "", realtime: bool = False) -> Node:
    """The MuJoCo driver (the graph's clock), commanded by ``command`` (a ``joint_command`` output).

    ``realtime``: paced by the wall clock (``--realtime``), latest-value command queue, SCHED_FIFO for
    itself and the dora daemon (:data:`RT_PRIORITY`, :data:`RT_DAEMON`)."""
    env = {**_rt_env("mujoco_driver", realtime), **({"CONTACTFLOW_RT_DAEMON": RT_DAEMON} if realtime else {})}
    return Node("mujoco_driver", node_script("mujoco_driver"), args or _robot(realtime),
                {"command": (command, _queue_of(realtime))}, ["sensors", LOG], args_comment=args_comment, env=env)


def replay_node(node_id: str, streams: str, output: str, ack: str, *, window: int = 1, batch: int = 1,
                require: tuple[str, ...] = (), dataflows: tuple[str, ...] = ()) -> Node:
    """A replay node standing in for ``node_id`` (re-publishes the newest Talos recording's ``streams``;
    ``--robot talos``: a run of another robot is never picked as ``latest`` and refused when named). It sends
    with the Sender (nodes/replay.py): its output ``log`` carries the replayed streams to the recorder, batched as
    the replayed node's, and its ``output`` may go local (:func:`_with_local_inputs`).

    ``window``: ticks published ahead of the last ``ack`` (``--window``); ``batch``: ticks per message
    (``--batch``). ``require``: the other
    streams the graph replays (``--require-streams``), so that every replay node of the graph picks
    the same run as ``latest`` and a run without one of them is refused. ``dataflows``: the graphs whose runs the
    replay reproduces (``--dataflows``, :func:`replayable_dataflows`): a run of another is refused."""
    args = f"--recording latest --robot talos --streams {streams} --mode lockstep"
    if window != 1:
        args += f" --window {window}"
    if batch != 1:
        args += f" --batch {batch}"
    if require:
        args += f" --require-streams {','.join(require)}"
    if dataflows:
        args += f" --dataflows {','.join(dataflows)}"
    return Node(node_id, node_script("replay"), args, {"ack": (ack, LOCKSTEP)}, [output, LOG])


def operator(mode: str = "scenario", scenario: str = "hand_forward.yaml", *, clock: str = "mujoco_driver/log",
             realtime: bool = False, rt_priority: bool = False) -> Node:
    """The operator: ``scenario`` (plays a file), ``recording`` (the scenario of the replayed run)
    or ``dynamic`` (a live program, examples/live_operator.py).

    ``clock``: the operator's ``tick`` input. The driver's batched ``log`` puts a scenario operator in
    ahead mode (commands sent 50 ticks per message, ahead of the driver: nodes/operator.py); the
    driver's ``sensors`` (a replay driver, a live operator, the real-time graph) give one command per
    tick. ``realtime``: ``--realtime`` (a scenario operator), latest-value clock queue, SCHED_FIFO.
    ``rt_priority``: its SCHED_FIFO priority only (an operator ahead of a real-time graph: under real-time
    stages that fill both cores, a normal-priority process gets ~5 % of a core and could fall behind)."""
    if realtime and mode != "scenario":
        raise ConfigError(f"a real-time operator plays a scenario (mode {mode!r} has no real-time settings)")
    tick = {"tick": (clock if mode != "dynamic" else "mujoco_driver/sensors", _queue_of(realtime))}
    if mode == "dynamic":
        return Node("operator", "dynamic", None, tick, ["command"], record={"command": "operator_command"},
                    path_comment="started by your program: python examples/live_operator.py")
    args = ("--robot talos --scenario-from-recording latest" if mode == "recording"
            else f"{_robot(realtime)} --scenario {SCENARIOS}/{scenario}")
    return Node("operator", node_script("operator"), args, tick, ["command", LOG],
                env=_rt_env("operator", realtime or rt_priority))


def seiko_stages(*, lag: int = 2, environment: bool = False, admittance: str | None = None,
                 controller_config: str | None = None, controller_outputs: tuple[str, ...] = ("command",),
                 desired_rows: bool = False, wrench_filter: int | None = None, realtime: bool = False,
                 sensor_lag: int = 0, planner_rows: bool = False) -> list[Node]:
    """Input filter (8) -> Retargeting QP (9) -> Controller QP (11), each its own node.

    Args:
        lag: ticks between the Retargeting output the Controller / input filter use and the current
            tick (pipelining: the stages run concurrently).
        environment: the Retargeting refuses contacts far from the robot file's surfaces.
        admittance: effectors of an effector-admittance node (eq. 14) feeding the input filter.
        controller_config: the Controller's config file (relative to dataflows/).
        controller_outputs: the Controller's outputs sent over dora (``state`` only for a consumer
            other than the recorder: the recorder reads the log).
        desired_rows: the Controller reads the Retargeting output 10 ticks per message
            (``desired_rows``: one receive per 10 ticks on the driver <-> Controller loop). Only
            where the Retargeting runs ahead of the driver (a scenario operator in ahead mode, or a
            replay of the operator's commands :data:`REPLAY_COMMAND_WINDOW` ticks ahead; no admittance):
            were the Retargeting paced by the driver, the Controller would wait for a batch that waits for
            the driver, which waits for the Controller (deadlock).
        planner_rows: the input filter <-> Retargeting cycle exchanges ``lag`` ticks per message
            (``targets_rows<lag>``, ``desired_rows<lag>``) instead of one: the input filter of tick k
            reads the desired of tick k - lag, so a batch of ``lag`` ticks is complete before it is
            needed (no deadlock), and the two stages compute the same values in the same order (the
            outputs are those of the per-tick graph, bit for bit); half the messages of the cycle
            with lag 2. Needs ``lag`` >= 2; with ``desired_rows`` only (an operator ahead, no admittance).
            The per-tick ``targets`` / ``desired`` are then only logged (declared again for an observer
            that reads them).
        wrench_filter: the complementary wrench filter (13) as its own node (nodes/wrench_filter.py)
            with the Controller's ``--wrench-lag`` = this value (0: exact, on the critical path;
            1: pipelined beside the Controller's QP); None: inside the Controller.
        sensor_lag: the Controller's ``--sensor-lag``: 1 = the command of tick k from the sensors of
            tick k - 1 (applied one period after the state it answers, as on a robot; the Controller
            then computes beside the driver's step instead of after it).
        realtime: every stage ``--realtime`` (nodes/_runtime.py Lockstep, real-time mode), its inputs
            on latest-value queues (:data:`REALTIME`) and its SCHED_FIFO priority (:data:`RT_PRIORITY`)
            in its ``env``. Not with ``admittance``, ``wrench_filter`` or ``desired_rows`` (no
            real-time settings for them).

    Raises:
        ConfigError: ``realtime`` with ``admittance``, ``wrench_filter`` or ``desired_rows``;
            ``planner_rows`` without ``desired_rows`` or with ``lag`` < 2.
    """
    if realtime and (admittance or wrench_filter is not None or desired_rows):
        raise ConfigError("seiko_stages(realtime=True) takes no admittance, wrench_filter or desired_rows")
    if planner_rows and (not desired_rows or lag < 2):
        raise ConfigError(f"seiko_stages(planner_rows=True) needs desired_rows=True and lag >= 2 (lag={lag})")
    q, robot = _queue_of(realtime), _robot(realtime)
    # the input filter <-> Retargeting cycle: a message per tick, or per `lag` ticks (planner_rows)
    cycle = f"{ROWS_SUFFIX}{lag}" if planner_rows else ""
    filt = Node("input_filter", node_script("input_filter"), f"{robot} --lag {lag}",
                {"command": ("operator/command", q), "desired": (f"seiko_retargeting/desired{cycle}", q)},
                [f"targets{cycle}", LOG], env=_rt_env("input_filter", realtime))
    if realtime:  # the driver's sensors are its clock (the operator sends ahead, in batches)
        filt.inputs["sensors"] = ("mujoco_driver/sensors", q)
    nodes = [filt]
    if admittance:
        filt.inputs["admittance"] = ("admittance/twist", LOCKSTEP)
        nodes.append(Node("admittance", node_script("admittance"), f"--robot talos --effectors {admittance}",
                          {"sensors": ("mujoco_driver/sensors", LOCKSTEP), "desired": ("seiko_retargeting/desired", LOCKSTEP)},
                          ["twist", LOG], comment="Effector admittance (eq. 14) on the disabled effectors, from the measured wrenches.",
                          args_comment="right ball hand: see the node doc"))
    nodes.append(Node("seiko_retargeting", node_script("seiko_retargeting"),
                      f"{robot} --environment" if environment else robot,
                      {"targets": (f"input_filter/targets{cycle}", q), "command": ("operator/command", q)},
                      [f"desired{cycle}", *(["desired_rows"] if desired_rows else []), LOG],
                      env=_rt_env("seiko_retargeting", realtime)))
    cargs = (f"{robot} --lag {lag}" + (f" --sensor-lag {sensor_lag}" if sensor_lag else "")
             + (f" --config {controller_config}" if controller_config else ""))
    desired = "seiko_retargeting/desired_rows" if desired_rows else "seiko_retargeting/desired"
    ctrl = Node("seiko_controller", node_script("seiko_controller"), cargs,
                {"sensors": ("mujoco_driver/sensors", q), "desired": (desired, q)},
                [*controller_outputs, LOG], env=_rt_env("seiko_controller", realtime))
    if wrench_filter is not None:
        nodes.append(Node("wrench_filter", node_script("wrench_filter"), "--robot talos",
                          {"sensors": ("mujoco_driver/sensors", LOCKSTEP), "flex_rate": ("seiko_controller/flex_rate", LOCKSTEP)},
                          ["wrench", LOG], comment="Complementary wrench filter (13) as its own stage, fed back the Controller's flexible wrench rates."))
        ctrl.args += f" --wrench-lag {wrench_filter}"
        ctrl.inputs["wrench"] = ("wrench_filter/wrench", LOCKSTEP)
        ctrl.outputs.insert(-1, "flex_rate")
    nodes.append(ctrl)
    return nodes


def recorder(nodes: list[Node], name: str, dataflow: str, *, summary: str | None = "seiko",
             renames: dict[str, str] | None = None, realtime: bool = False) -> Node:
    """The recorder: one input per logging node (``<id>: <id>/log``), one per output of the others;
    ``realtime``: SCHED_FIFO :data:`RT_RECORDER_PRIORITY`."""
    inputs: dict[str, tuple[str, dict]] = {}
    for n in nodes:
        if LOG in n.outputs:
            inputs[n.id] = (f"{n.id}/{LOG}", RECORD)
        for out, rid in n.record.items():
            inputs[rid] = (f"{n.id}/{out}", RECORD)
    args = f"--robot talos --name {name} --dataflow {dataflow}" + (f" --summary {summary}" if summary else "")
    for src, dst in (renames or {}).items():
        args += f" --rename {src}={dst}"
    return Node("recorder", node_script("recorder"), args, inputs, [], folded_args=bool(renames),
                env={"CONTACTFLOW_RT_PRIORITY": RT_RECORDER_PRIORITY} if realtime else {})


def viewer() -> Node:
    """The rerun viewer: an observer on drop-oldest queues."""
    return Node("viewer", node_script("viewer"), "--robot talos --name seiko_talos --every 25",
                {"sensors": ("mujoco_driver/sensors", OBSERVE), "desired": ("seiko_retargeting/desired", OBSERVE),
                 "controller_state": ("seiko_controller/state", OBSERVE)}, [])


# ---------------------------------------------------------------------------------------------------
# The graphs
# ---------------------------------------------------------------------------------------------------

_LOCKSTEP_NOTE = """The MuJoCo driver is the clock: lockstep by default (deterministic). Every lockstep input uses
backpressure queues so that no tick is ever dropped. The run ends by itself at the end of the
scenario; the recorder then writes recordings/<run>/ and prints the summary. Each node batches its
outputs for the recorder (output `log`, every $CONTACTFLOW_LOG_EVERY = 25 ticks and at the end);
the scenario operator, clocked by the driver's log, sends its commands 50 ticks per message, ahead
of the driver (a scenario depends only on time), so the input filter and the Retargeting run ahead
on the free core. Where they do (a scenario operator, no admittance stage: seiko_talos.yml and the
graphs built like it), the Controller reads the Retargeting 10 ticks per message (`desired_rows`),
and the input filter and the Retargeting exchange theirs 2 ticks per message (`targets_rows2`,
`desired_rows2`: the input filter uses the desired of 2 ticks before), so the driver <-> Controller
exchange is the only per-tick round trip; a live operator or an admittance stage paces them by the
driver, and their edges carry a message per tick. The inputs named in a node's CONTACTFLOW_LOCAL_INPUTS
(where the graph has it: the driver <-> Controller, input filter <-> Retargeting and Retargeting ->
Controller edges, and a wrench_filter node's, where every node that reads the output declares it) take their messages over a local socket instead of dora (nodes/_local.py: dora still starts and supervises the
nodes and carries every other edge; CONTACTFLOW_LOCAL_EDGES=0 sends everything through dora, with
the same recording)."""


#: The Controller's ``--sensor-lag`` in the main lockstep graphs (seiko_talos.yml and the graphs built
#: like it): 1 = the command of tick k from the sensors of tick k - 1, as a robot applies it.
MAIN_SENSOR_LAG = 1


#: The nodes of the lockstep graphs built like seiko_talos.yml (:func:`_main_graph`) that share the first CPU
#: (env CONTACTFLOW_CPU_ROLE=control, nodes/_runtime.py apply_scheduling): those of the per-tick round trip, the
#: driver and the Controller (and a wrench_filter node between them when the Controller waits for its output of
#: the same tick, ``--wrench-lag 0``). Every other node (the operator, the input filter, the Retargeting, the
#: recorder, a viewer, a wrench_filter running beside the Controller with ``--wrench-lag 1``) and the dora daemon
#: (CONTACTFLOW_DAEMON_CPU_ROLE, set on the driver; `dora run`'s daemon only) take the other CPUs
#: (``support``); with one CPU nothing is pinned. Measured on the 2-core machine (2026-12-04, docs/benchmarks.md):
#: seiko_talos.yml ran 1.16x faster pinned (median of 4 alternated pairs, 1.03-1.63; less CPU per tick) than with
#: the 7 processes free to migrate, every message then waking a process on the other CPU.
CONTROL_CPU_NODES = ("mujoco_driver", "seiko_controller")


def _with_cpu_roles(nodes: list[Node], wrench_filter: int | None = None) -> list[Node]:
    """Sets the CPU role of every node of ``nodes`` in its ``env`` (in place; :data:`CONTROL_CPU_NODES`, plus
    the wrench_filter node when the Controller uses its output of the same tick, ``wrench_filter`` 0), the
    dora daemon's on the driver, and returns them. A dynamic node (started by the user's program) has no
    ``env`` here."""
    control = set(CONTROL_CPU_NODES) | ({"wrench_filter"} if wrench_filter == 0 else set())
    for n in nodes:
        if n.path != "dynamic":
            n.env["CONTACTFLOW_CPU_ROLE"] = "control" if n.id in control else "support"
        if n.id == "mujoco_driver":
            n.env["CONTACTFLOW_DAEMON_CPU_ROLE"] = "support"
    return nodes


#: The inputs of the lockstep graphs built like seiko_talos.yml (:func:`_main_graph`) that take their messages
#: over a local socket instead of dora (env CONTACTFLOW_LOCAL_INPUTS, nodes/_local.py): the per-tick driver <->
#: Controller exchange and the per-2-tick input filter <-> Retargeting one, and the Retargeting's 10-tick batches
#: to the Controller. An output goes local only when every node that reads it declares it so (an observer such
#: as the viewer keeps it on dora). Measured on the 2-core machine (2026-12-04, docs/benchmarks.md):
#: seiko_talos.yml ran 1.33x faster (median of 5 alternated pairs, 1.26-1.40) than with every message through dora;
#: the wrench_filter graphs' filter edges (and the sensors it shares with the Controller), 2026-12-06: from x0.42 /
#: x0.58 of seiko_talos.yml's speed to x0.70 / x0.77.
#: A replay node standing in for one of them (the replay graphs) takes its ``ack`` the same way.
LOCAL_INPUTS = {"mujoco_driver": ("command", "ack"), "seiko_controller": ("sensors", "desired", "wrench"),
                "input_filter": ("desired",), "seiko_retargeting": ("targets", "ack"),
                "wrench_filter": ("sensors", "flex_rate"), "operator": ("ack",)}


def _with_local_inputs(nodes: list[Node]) -> list[Node]:
    """Declares the :data:`LOCAL_INPUTS` of the nodes of ``nodes`` (in their ``env``, in place) whose source output
    has no reader outside them (a viewer, an operator clocked by the sensors: the output then goes through dora to
    all its readers, and a local declaration would be idle), and returns them."""
    readers: dict[str, list[tuple[str, str]]] = {}
    for n in nodes:
        for i, (src, _) in n.inputs.items():
            readers.setdefault(src, []).append((n.id, i))
    candidates = {(n.id, i) for n in nodes if n.path != "dynamic" for i in LOCAL_INPUTS.get(n.id, ()) if i in n.inputs}
    for n in nodes:
        local = [i for i in LOCAL_INPUTS.get(n.id, ()) if (n.id, i) in candidates
                 and all(r in candidates for r in readers[n.inputs[i][0]])]
        if local:
            n.env["CONTACTFLOW_LOCAL_INPUTS"] = " ".join(local)
    return nodes


def _main_graph(name: str, dataflow: str, *, driver_args: str = "--robot talos", op: str = "scenario",
                controller_config: str | None = None, extra: tuple[Node, ...] = (),
                controller_outputs: tuple[str, ...] = ("command",), driver_comment: str = "",
                wrench_filter: int | None = None) -> list[Node]:
    nodes = [driver("seiko_controller/command", args=driver_args, args_comment=driver_comment), operator(op),
             *seiko_stages(controller_config=controller_config, controller_outputs=controller_outputs,
                           desired_rows=op == "scenario", planner_rows=op == "scenario", wrench_filter=wrench_filter,
                           sensor_lag=MAIN_SENSOR_LAG)]
    read = {src for x in extra for src, _ in x.inputs.values()}
    for n in nodes:  # an observer (the viewer) of a per-tick output that the cycle sends only in batches
        for out in ("targets", "desired"):
            if f"{n.id}/{out}" in read and out not in n.outputs:
                n.outputs.insert(0, out)
    return _with_local_inputs(_with_cpu_roles([*nodes, recorder(nodes, name, dataflow), *extra], wrench_filter))


def seiko_talos() -> Graph:
    return Graph(f"""SEIKO on PAL Talos in MuJoCo (double support): operator -> input filter -> Retargeting QP (9)
-> Controller QP (11) -> robot driver, closed by the measured sole wrenches and joint torques.

  dora run dataflows/seiko_talos.yml
  CONTACTFLOW_SCENARIO=robots/talos/scenarios/smoke_2s.yaml dora run dataflows/seiko_talos.yml

{_LOCKSTEP_NOTE}""", _main_graph("seiko_talos", "seiko_talos.yml"))


def seiko_talos_sim() -> Graph:
    return Graph(f"""SEIKO on Talos in MuJoCo: the simulation half of the sim / replay pair. Same graph as
seiko_talos_replay.yml except the driver and operator nodes (replays there); its recordings
have the same stream names as seiko_talos.yml's.

  dora run dataflows/seiko_talos_sim.yml

A hardware graph replaces the `mujoco_driver` node by the robot's driver node (same id, same
`command` input and `sensors` output, `--realtime` on the SEIKO nodes).

{_LOCKSTEP_NOTE}""", _main_graph("seiko_talos", "seiko_talos_sim.yml"))


#: ticks of recorded operator commands a replay publishes ahead of the Controller (the input filter and
#: the Retargeting run ahead on the free core, as with the live operator's ahead mode), and per message (one dora
#: message per batch instead of per tick). The Controller's batches of the Retargeting (``desired_rows``,
#: $CONTACTFLOW_ROWS_EVERY ticks each) deadlock beyond ROWS_EVERY = window - batch + 3 (78; tests/test_graph_sources.py
#: asserts a margin of two default batches, window - batch >= 20)
REPLAY_COMMAND_WINDOW = 100
REPLAY_COMMAND_BATCH = 25


def replayable_dataflows(stages: list[Node], own: str) -> tuple[str, ...]:
    """The dataflow files whose runs a replay graph with these live ``stages`` reproduces: the graphs of :data:`GRAPHS`
    whose nodes of the stages' ids run with the same arguments and the same input names (a run of
    ``seiko_talos_multicontact.yml``, whose Retargeting checks the environment and whose stages lag 1 tick, would
    diverge), the fused stack (the same stages in one process, bit-identical: tests/test_replay.py) and the replay
    graph ``own`` itself (a replay's recording holds the streams it replayed)."""
    want = {n.id: (n.args, sorted(n.inputs)) for n in stages}
    found = {own, "seiko_talos_stack.yml"}
    for name, build in GRAPHS.items():
        if name in _REPLAY_GRAPHS:
            continue
        nodes = {n.id: n for n in build().nodes}
        if all(i in nodes and (nodes[i].args, sorted(nodes[i].inputs)) == w for i, w in want.items()):
            found.add(f"{name}.yml")
    return tuple(sorted(found))


#: the graphs made of replay nodes (:func:`replayable_dataflows` skips them)
_REPLAY_GRAPHS = ("seiko_talos_replay", "seiko_controller_replay")


def seiko_talos_replay() -> Graph:
    ack = "seiko_controller/command"
    replayed = ("mujoco_driver.sensors", "operator.command")
    # the operator's commands run REPLAY_COMMAND_WINDOW ticks ahead of the Controller, as a scenario operator's: the
    # stages exchange their outputs in batches as in seiko_talos.yml
    stages = seiko_stages(sensor_lag=MAIN_SENSOR_LAG, desired_rows=True, planner_rows=True)
    flows = replayable_dataflows(stages, "seiko_talos_replay.yml")
    drv = replay_node("mujoco_driver", "mujoco_driver.sensors", "sensors", ack, require=replayed, dataflows=flows)
    # the recorded operator commands themselves (contact switches, pushing mode, twists), not a scenario
    # file played again: the replay reproduces the recorded inputs whatever the scenario file or
    # CONTACTFLOW_SCENARIO say now, and a run without them is refused
    op = replay_node("operator", "operator.command", "command", ack, window=REPLAY_COMMAND_WINDOW,
                     batch=REPLAY_COMMAND_BATCH, require=replayed, dataflows=flows)
    nodes = [drv, op, *stages]
    return Graph("""SEIKO on Talos, open loop on a recorded run: the MuJoCo driver and the operator are replaced by
replays of the recorded sensors and operator commands of a seiko_talos run (the replay nodes take
the ids `mujoco_driver` and `operator`, so the wiring is unchanged) and the SEIKO stages (input
filter, Retargeting, Controller) run live on them. Lockstep: the replay publishes the sensors of
tick k once the Controller's command of tick k-1 has arrived (input `ack`), and the operator
commands up to 100 ticks ahead of it, 25 per message, so the run is deterministic and, with the same configs,
reproduces the recorded commands exactly (contact switches and pushing mode included: they are in
the recorded commands).

  dora run dataflows/seiko_talos.yml            # record a run (recordings/<run>/)
  dora run dataflows/seiko_talos_replay.yml     # replay the newest complete Talos run holding both streams

Change `--recording latest` (both nodes) to a run directory or name, or set CONTACTFLOW_RECORDING=RUN,
to replay another run. A run without the recorded sensors or operator commands is refused before
anything runs (one line naming the run and the missing stream, exit 2): such a replay could not
reproduce the recorded inputs (the robot does not react: open loop).""",
                 _with_local_inputs(_with_cpu_roles([*nodes, recorder(nodes, "seiko_talos_replay", "seiko_talos_replay.yml")])))


def seiko_talos_live() -> Graph:
    return Graph(f"""Live-operated variant of seiko_talos.yml: the `operator` node is dynamic (examples/live_operator.py
or any program using contactflow.operator.live.LiveOperator); everything else is identical.
  dora up && dora start dataflows/seiko_talos_live.yml --detach && python examples/live_operator.py

{_LOCKSTEP_NOTE}""", _main_graph("seiko_talos_live", "seiko_talos_live.yml", op="dynamic"))


def seiko_talos_far_reach() -> Graph:
    return Graph("""Far reach with an unmodelled 9 kg load (SEIKO RA-L 2024 Fig. 6), live-operated: seiko_talos_live.yml
plus 9 kg welded at the right (ball) hand in MuJoCo only (the SEIKO model does not know it; from
t = 0, where benchmarks/bench_seiko_reach_load.py ramps it in at 1-1.5 s) and the Controller
settings of robots/talos/seiko_far_reach.yaml (ratio 0.6, 5 Hz tau_read, the lowering extension).
  dora up && dora start dataflows/seiko_talos_far_reach.yml --detach && python examples/live_operator.py
Select the right hand, move it forward (and up), and stop when the Controller logs
"torque limit (12): arm_right_2_joint ... stop moving this way" (dora logs: `dora logs <dataflow> seiko_controller`).""",
                 _main_graph("seiko_talos_far_reach", "seiko_talos_far_reach.yml", op="dynamic",
                             driver_args="--robot talos --payload arm_right_5_link:9:0:0:-0.10",
                             driver_comment="= right_hand_frame (robot.yaml extra_frames)",
                             controller_config="../robots/talos/seiko_far_reach.yaml"))


def prime_seiko_talos_payload() -> Graph:
    return Graph("""SEIKO on Talos in MuJoCo with 6.3 kg the controller's model does not know (like the real Talos:
99.7 kg against the model's 93.4 kg), recorded for PRIME ("beyond the paper", issue 5):

  CONTACTFLOW_SCENARIO=robots/talos/scenarios/stand_7s.yaml dora run dataflows/prime_seiko_talos_payload.yml
  contactflow prime estimate recordings/latest --robot talos --stream mujoco_driver.sensors --dt 0.01

Same graph as seiko_talos.yml; only the driver's --payload and the recorder's name differ.""",
                 _main_graph("prime_talos_payload", "prime_seiko_talos_payload.yml",
                             driver_args="--robot talos --payload base_link:6.3:0:0:0.05"))


def seiko_talos_view() -> Graph:
    return Graph("""SEIKO on PAL Talos in MuJoCo (double support), as seiko_talos.yml, plus a rerun `viewer` node that
draws the robot (URDF meshes driven by the measured joint state), the sole wrenches (arrows,
1 mm/N), the desired vs measured effector positions and the tracking signals (sole fz desired /
measured / filtered, effector position errors) on the simulation-time timeline `t`. The Controller
sends its `state` over dora here (the viewer reads it).

  dora run dataflows/seiko_talos_view.yml      # headless: writes recordings/seiko_talos-<UTC>.rrd
  rerun recordings/seiko_talos-<UTC>.rrd       # look at it afterwards
  CONTACTFLOW_SCENARIO=robots/talos/scenarios/smoke_2s.yaml dora run dataflows/seiko_talos_view.yml

Add `--spawn` to the viewer's args for a live viewer when a display is available (it falls back to
the file otherwise). The viewer is an observer, not a lockstep stage: its inputs use drop_oldest
queues (never backpressure), so it can never hold back the 500 Hz loop; it logs one tick in
`--every` (25: 20 Hz). The queues hold 100 messages (~70 ms of the three inputs) so that the
viewer rides through its periodic send to rerun (tens of ms) without dora discarding messages
and printing a warning for each. The recorder records the run as in seiko_talos.yml;
`contactflow view RUN` turns any recording into an .rrd file offline.""",
                 _main_graph("seiko_talos", "seiko_talos_view.yml", controller_outputs=("command", "state"),
                             extra=(viewer(),)))


def seiko_talos_multicontact() -> Graph:
    nodes = [driver("seiko_controller/command", args="--robot talos --environment"), operator("scenario", "wall_push.yaml"),
             *seiko_stages(lag=1, environment=True, admittance="left_foot right_foot left_hand")]
    return Graph(f"""SEIKO multi-contact on PAL Talos in MuJoCo: the seiko_talos.yml graph in a scene with a wall in
front of the robot and a support on its right (robots/talos/robot.yaml `environment:`), hand
collision spheres, a left wrist FT sensor and the right ball hand's force from its joint
torques. Contact switches and pushing mode come from the scenario (`contacts:`, `push:`).

  dora run dataflows/seiko_talos_multicontact.yml          # wall push (paper Fig. 3)
  CONTACTFLOW_SCENARIO=robots/talos/scenarios/foot_lift.yaml dora run dataflows/seiko_talos_multicontact.yml

{_LOCKSTEP_NOTE}""", [*nodes, recorder(nodes, "seiko_talos_multicontact", "seiko_talos_multicontact.yml")])


#: The recorder's stream names of the fused stack: those of the split graph's nodes (the summary reads them).
STACK_RENAMES = {"seiko_stack/targets": "input_filter/targets", "seiko_stack/desired": "seiko_retargeting/desired",
                 "seiko_stack/command": "seiko_controller/command", "seiko_stack/state": "seiko_controller/state"}


def stack_node() -> Node:
    """The input filter, the Retargeting and the Controller in one process (nodes/seiko_stack.py)."""
    # the lockstep stack gives seiko_talos.yml's outputs bit for bit: the same --sensor-lag
    lag = f" --sensor-lag {MAIN_SENSOR_LAG}" if MAIN_SENSOR_LAG else ""
    return Node("seiko_stack", node_script("seiko_stack"), f"--robot talos --lag 2{lag}",
                {"sensors": ("mujoco_driver/sensors", LOCKSTEP), "command": ("operator/command", LOCKSTEP)},
                ["command", LOG])


def seiko_talos_stack() -> Graph:
    nodes = [driver("seiko_stack/command"), operator(), stack_node()]
    renames = STACK_RENAMES
    return Graph("""seiko_talos.yml with the input filter, the SEIKO Retargeting and the SEIKO Controller fused in one
process (nodes/seiko_stack.py): same stages, same messages, same `--lag 2`, so a run gives the same
outputs bit for bit (the recorder names the streams as in seiko_talos.yml); it saves the dora
messaging between the three stages and loses running the two QPs concurrently. Compared in
docs/benchmarks.md.

  dora run dataflows/seiko_talos_stack.yml
  CONTACTFLOW_SCENARIO=robots/talos/scenarios/smoke_2s.yaml dora run dataflows/seiko_talos_stack.yml""",
                 [*nodes, recorder(nodes, "seiko_talos_stack", "seiko_talos_stack.yml", renames=renames)])


def seiko_controller_replay() -> Graph:
    ack = "seiko_controller/command"
    replayed = ("mujoco_driver.sensors", "seiko_retargeting.desired")  # both nodes pick the same run
    controller = Node("seiko_controller", node_script("seiko_controller"),
                      "--robot talos --lag 2" + (f" --sensor-lag {MAIN_SENSOR_LAG}" if MAIN_SENSOR_LAG else ""),
                      {"sensors": ("mujoco_driver/sensors", LOCKSTEP), "desired": ("seiko_retargeting/desired", LOCKSTEP)},
                      ["command", LOG])
    flows = replayable_dataflows([controller], "seiko_controller_replay.yml")
    nodes = [replay_node("mujoco_driver", "mujoco_driver.sensors", "sensors", ack, require=replayed, dataflows=flows),
             replay_node("seiko_retargeting", "seiko_retargeting.desired", "desired", ack, require=replayed,
                         dataflows=flows),
             controller]
    return Graph("""Record -> replay regression of the SEIKO Controller alone: the recorded robot sensors and the
recorded Retargeting output of a seiko_talos run are re-published, in lockstep, by two replay
nodes that take the ids of the nodes they stand in for; the Controller runs live on them and its
outputs are recorded. They reproduce the recorded ones exactly (tests/test_replay.py).

  dora run dataflows/seiko_talos.yml                       # record a run
  dora run dataflows/seiko_controller_replay.yml           # replay its newest complete run

--recording takes a run directory, a run name under $CONTACTFLOW_RECORDINGS, or `latest`.""",
                 _with_local_inputs(_with_cpu_roles([*nodes, recorder(nodes, "seiko_controller_replay",
                                                                      "seiko_controller_replay.yml", summary=None)])))


def seiko_talos_wrench_filter(lag: int = 0) -> Graph:
    name = "seiko_talos_wrench_filter" + ("_lag1" if lag else "")
    how = ("exact: the Controller of tick k uses the filter's tick k output (one more hop on the driver <->\n"
           "Controller path)" if lag == 0 else
           "pipelined: the Controller of tick k uses the filter's tick k-1 output, so the filter runs beside\n"
           "the Controller's QP (lam_tilde one tick older)")
    return Graph(f"""seiko_talos.yml with the complementary wrench filter (13) as its own node (nodes/wrench_filter.py)
instead of inside the Controller, --wrench-lag {lag}: {how}.
The filter gets the Controller's flexible wrench rates back (output flex_rate); its edges and the driver's
sensors are local. The node logs its loop's CPU time per tick at the end; the graph's speed against
seiko_talos.yml: docs/benchmarks.md ("the complementary wrench filter as its own node").

  dora run dataflows/{name}.yml

{_LOCKSTEP_NOTE}""", _main_graph(name, f"{name}.yml", wrench_filter=lag))


def seiko_talos_realtime() -> Graph:
    name = "seiko_talos_realtime"
    nodes = [driver("seiko_controller/command", realtime=True), operator(rt_priority=True), *seiko_stages(realtime=True)]
    p = RT_PRIORITY
    return Graph(f"""SEIKO on PAL Talos in MuJoCo, REAL TIME: the driver is paced by the wall clock (500 Hz).

  dora run dataflows/{name}.yml
  CONTACTFLOW_SCENARIO=robots/talos/scenarios/smoke_2s.yaml dora run dataflows/{name}.yml

The same stages as seiko_talos.yml, each with --realtime (nodes/_runtime.py Lockstep, real-time mode;
nodes/mujoco_driver.py run_realtime). After a start-up handshake of 10 lockstep ticks the driver
publishes the sensors at each 2 ms deadline, takes the newest command received and never waits for
one: without a new command the last safe command stays in force (a deadline miss). The operator
plays its scenario ahead of the driver in 50-tick batches, clocked by the driver's batched log (a
scenario depends only on time); the input filter ticks on the driver's sensors and samples the
operator's command of its tick, and the Controller reads the per-tick `desired` of the Retargeting.
Queues: every input between stages is a drop-oldest queue of 10 messages. Before each tick a node
takes what has arrived and uses the newest message of each input (the driver:
contactflow.sim.driver.NewestCommand), so a stage that falls behind skips stale messages instead of
accumulating lag, and a full queue drops its oldest message (dora logs "Discarding event ... due to
queue size limit"). The input filter steps once per tick it skipped (holding the operator's newest
twist), so the targets still integrate the whole motion. (dora 1.1's queue_size 1 dropped ~30 % of
a 500 Hz stream at an idle receiver; backpressure routed through the daemon, which lagged 300 ms.)
Every node sends its outputs to the recorder in batches (output `log`, 25 ticks per message, on
lossless backpressure queues); the driver's log also carries one `driver_timing` row per period,
from which the summary computes deadline_misses, command_age_ms_p50/p99 and longest_stall_ms
(contactflow/recording/summary.py). The recorder counts the ticks the stages skipped as `recording_gaps`
(missing seq per stream: expected in real time), while `recording_lost_batches` counts real losses
(log batches that never reached the recorder).
Priorities: run as root (CAP_SYS_NICE), the graph puts its stages under SCHED_FIFO, as on a robot
computer: the driver first ({p["mujoco_driver"]}), then the controller ({p["seiko_controller"]}), the Retargeting ({p["seiko_retargeting"]}), the operator ({p["operator"]}, ahead
of the others) and the input filter ({p["input_filter"]}); the recorder ({RT_RECORDER_PRIORITY}) below the driver and the Controller, above the
planning stages (its work is small, and a recorder starved behind stages that cannot keep up reads nothing
until the run ends). The driver also puts the dora daemon
that spawned the graph under SCHED_FIFO {RT_DAEMON}: the nodes' batched-log sends wait on it, and starved
behind the real-time nodes it stalled them for up to 0.65 s. These are CONTACTFLOW_RT_PRIORITY /
CONTACTFLOW_RT_DAEMON in each node's env (nodes/_runtime.py apply_scheduling): remove them to opt
out. Without the privilege each node prints a warning and runs at normal priority.""",
                 [*nodes, recorder(nodes, name, f"{name}.yml", realtime=True)])


#: the planner's streams recorded under the names of the stages it runs.
PLANNER_RENAMES = {k: v for k, v in STACK_RENAMES.items() if k in ("seiko_stack/targets", "seiko_stack/desired")}


def seiko_talos_realtime_planner() -> Graph:
    name = "seiko_talos_realtime_planner"
    q, p = REALTIME, RT_PRIORITY
    nodes = [driver("seiko_controller/command", realtime=True), operator(rt_priority=True),
             Node("seiko_stack", node_script("seiko_stack"), "--robot talos --realtime --lag 2 --no-controller",
                  {"sensors": ("mujoco_driver/sensors", q), "command": ("operator/command", q)},
                  ["targets", "desired", LOG], env=_rt_env("seiko_stack", True),
                  comment="The planner: the input filter and the SEIKO Retargeting in one process (seiko_stack --no-controller)."),
             Node("seiko_controller", node_script("seiko_controller"), "--robot talos --realtime --lag 2",
                  {"sensors": ("mujoco_driver/sensors", q), "desired": ("seiko_stack/desired", q)},
                  ["command", LOG], env=_rt_env("seiko_controller", True))]
    return Graph(f"""SEIKO on PAL Talos in MuJoCo, REAL TIME, laid out as on a robot computer: the Controller alone on the
critical path, the input filter and the Retargeting in one lower-priority planner process.

  dora run dataflows/{name}.yml
  CONTACTFLOW_SCENARIO=robots/talos/scenarios/smoke_2s.yaml dora run dataflows/{name}.yml

The driver is paced by the wall clock as in seiko_talos_realtime.yml (same driver, queues, summary
keys). Per 2 ms period the critical path is two messages: the driver's sensors to the Controller
(SCHED_FIFO {p["seiko_controller"]}) and its command back (the driver {p["mujoco_driver"]}, the dora daemon {RT_DAEMON}). The planner
(nodes/seiko_stack.py --no-controller, SCHED_FIFO {p["seiko_stack"]}) takes the newest sensors as its clock, steps
the input filter over the ticks it skipped and runs the Retargeting; the Controller uses its newest
`desired` (--lag 2), so a planner that falls behind never delays a command. The operator plays its
scenario ahead of the driver in 50-tick batches, clocked by the driver's batched log (a scenario
depends only on time), instead of a message per tick: against seiko_talos_realtime.yml this takes
four receives and two sends off each period (docs/benchmarks.md compares both). The recorder names
the planner's streams as the input filter's and the Retargeting's.""",
                 [*nodes, recorder(nodes, name, f"{name}.yml", renames=PLANNER_RENAMES, realtime=True)])


#: graph name (file stem in dataflows/) -> builder.
GRAPHS: dict[str, Callable[[], Graph]] = {
    "seiko_talos": seiko_talos,
    "seiko_talos_sim": seiko_talos_sim,
    "seiko_talos_replay": seiko_talos_replay,
    "seiko_talos_live": seiko_talos_live,
    "seiko_talos_far_reach": seiko_talos_far_reach,
    "seiko_talos_view": seiko_talos_view,
    "seiko_talos_multicontact": seiko_talos_multicontact,
    "seiko_talos_stack": seiko_talos_stack,
    "prime_seiko_talos_payload": prime_seiko_talos_payload,
    "seiko_controller_replay": seiko_controller_replay,
    "seiko_talos_wrench_filter": seiko_talos_wrench_filter,
    "seiko_talos_wrench_filter_lag1": lambda: seiko_talos_wrench_filter(1),
    "seiko_talos_realtime": seiko_talos_realtime,
    "seiko_talos_realtime_planner": seiko_talos_realtime_planner,
}


# ---------------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------------

def _queue(spec: dict) -> str:
    return ", ".join(f"{k}: {v}" for k, v in spec.items())


def _node_lines(n: Node) -> list[str]:
    lines = [f"  # {c}" if c else "  #" for c in n.comment.splitlines()] if n.comment else []
    lines.append(f"  - id: {n.id}")
    lines.append(f"    path: {n.path}" + (f"   # {n.path_comment}" if n.path_comment else ""))
    if n.args is not None:
        if n.folded_args:
            lines.append("    args: >-")
            words, line = n.args.split(" --"), ""
            parts = [words[0]] + ["--" + w for w in words[1:]]
            for part in parts:
                if line and len(line) + 1 + len(part) > 100:
                    lines.append(f"      {line}")
                    line = part
                else:
                    line = f"{line} {part}" if line else part
            lines.append(f"      {line}")
        else:
            lines.append(f"    args: {n.args}" + (f"   # {n.args_comment}" if n.args_comment else ""))
    if n.inputs:
        lines.append("    inputs:")
        for port, (src, q) in n.inputs.items():
            lines.append(f"      {port}: {{source: {src}, {_queue(q)}}}")
    if n.outputs:
        lines.append(f"    outputs: [{', '.join(n.outputs)}]")
    if n.env:
        lines.append(f"    env: {{{_queue(n.env)}}}")
    lines.append(f"    finish_grace_secs: {finish_grace_of(n.id)}")  # (no generated graph has an offline node)
    return lines


def render(name: str) -> str:
    """The YAML text of graph ``name``.

    Raises:
        KeyError: no such graph (naming the known ones).
    """
    if name not in GRAPHS:
        raise KeyError(f"no graph {name!r}; graphs: {sorted(GRAPHS)}")
    g = GRAPHS[name]()
    out = [f"# GENERATED from contactflow/graphs.py ({name}) by `contactflow graphs --write`: do not edit by hand.", "#"]
    out += [f"# {line}" if line else "#" for line in g.header.splitlines()]
    out.append("nodes:")
    for i, n in enumerate(g.nodes):
        if i:
            out.append("")
        out += _node_lines(n)
    return "\n".join(out) + "\n"


def check_graphs(directory: Path = DATAFLOWS) -> list[str]:
    """Names of the graphs whose file in ``directory`` is missing or differs from its source."""
    stale = []
    for name in GRAPHS:
        path = Path(directory) / f"{name}.yml"
        if not path.exists() or path.read_text() != render(name):
            stale.append(name)
    return stale


def write_graphs(directory: Path = DATAFLOWS) -> list[str]:
    """Render every graph into ``directory`` (created if missing: with an installed contactflow,
    ``contactflow graphs --write --dir my_folder`` writes the SEIKO graphs anywhere); returns the
    names of the files that changed."""
    Path(directory).mkdir(parents=True, exist_ok=True)
    changed = []
    for name in GRAPHS:
        path = Path(directory) / f"{name}.yml"
        text = render(name)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            changed.append(name)
    return changed


def _run(args: argparse.Namespace) -> int:
    directory = Path(args.dir)
    if args.write:
        changed = write_graphs(directory)
        print(f"wrote {len(changed)} graph(s): {', '.join(changed) or 'none changed'}")
        return 0
    if args.list:
        for name in GRAPHS:
            print(f"{directory / (name + '.yml')}")
        return 0
    stale = check_graphs(directory)
    if stale:
        print(f"{len(stale)} graph(s) differ from contactflow/graphs.py: {', '.join(f'{s}.yml' for s in stale)}; "
              f"run `contactflow graphs --write` (do not edit them by hand)")
        return 1
    print(f"{len(GRAPHS)} graphs match contactflow/graphs.py")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("graphs", help="check or write the SEIKO dataflow graphs from their one description")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="fail if a graph file differs from its source (default)")
    mode.add_argument("--write", action="store_true", help="write the graph files")
    mode.add_argument("--list", action="store_true", help="list the generated files")
    p.add_argument("--dir", default=str(DATAFLOWS), help="dataflows directory (default: the checkout's)")
    p.set_defaults(func=_run)


if __name__ == "__main__":
    import sys

    from contactflow.paths import OnceArgumentParser

    parser = OnceArgumentParser(prog="python -m contactflow.graphs", description=__doc__.splitlines()[0])
    add_parser(parser.add_subparsers(dest="command", required=True))
    sys.exit(_run(parser.parse_args(["graphs", *sys.argv[1:]])))
