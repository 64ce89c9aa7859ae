"""The port table: every contactflow node's inputs and outputs, declared once.

For each node kind (the file stem of ``nodes/<kind>.py``, the ``contactflow-<kind>`` executable) the
table :data:`NODES` gives its inputs and outputs, the contract of each (a key of
:func:`contactflow.contracts.messages.port_specs`, or of :func:`contactflow.prime.ports.prime_port_specs` for
the ``prime_*`` contracts), and which ones are optional. Everything else reads it:

* the nodes build their :class:`~contactflow.nodes._runtime.Lockstep` inputs and
  :class:`~contactflow.nodes._runtime.Sender` outputs from it (:func:`lockstep_inputs`,
  :func:`sender_outputs`; ``nodes/_runtime.py`` ``lockstep_for`` / ``sender_for``), and both refuse a
  port the declaration lacks (:class:`~contactflow.errors.ContractError` naming the node and port);
* the static wiring check (:mod:`contactflow.contracts.wiring`, ``contactflow check``);
* the node catalogue (:mod:`contactflow.contracts.catalogue`, ``docs/nodes.md``);
* the config loader's list of node sections (``nodes/_runtime.py`` ``load_node_config``).

Input kinds: ``message`` (a contactflow message matched by ``seq``, the default) or ``timer`` (a dora
timer such as ``dora/timer/millis/5``: the LAC controllers' keep-alive ``heartbeat``). An optional
input may be left unwired (the node then works without it); an optional output is sent only in some
configurations (``seiko_controller``'s ``flex_rate`` when ``wrench`` is wired, ``mujoco_driver``'s
``timing`` in real-time mode), so a graph need not declare it.

Free-form ports (the only ones not fixed here): the ``recorder`` records any input (its inputs are
named by the graph); the ``replay`` node's outputs are the recorded streams named by its
``--streams`` argument (they take the recorded outputs' contracts), and its ``ack`` input accepts any
contract. The ``fault_injector`` (the reliability campaign's pass-through) takes and sends the
contract of the connection it is inserted on. A port with ``contract=None`` accepts any contract.

This module imports neither dora nor a robot model.
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Iterable, Mapping

from contactflow.errors import ContractError

__all__ = ["Port", "NodePorts", "NODES", "node_ports", "lockstep_inputs", "sender_outputs", "input_specs", "MESSAGE", "DEFAULT_ROBOT",
           "TIMER"]

#: Input kinds.
MESSAGE = "message"
TIMER = "timer"
#: the robot a node runs without ``--robot`` unless its declaration names another (NodePorts.default_robot)
DEFAULT_ROBOT = "talos"


@dataclasses.dataclass(frozen=True)
class Port:
    """One input or output of a node.

    Attributes:
        contract: contract name (``sensors``, ``joint_command``...); None: any contract (free-form).
        optional: an input the node works without / an output it sends only in some configurations.
        kind: ``message`` (contactflow message, matched by ``seq``) or ``timer`` (a dora timer; inputs only).
    """

    contract: str | None
    optional: bool = False
    kind: str = MESSAGE

    def __post_init__(self):
        if self.kind not in (MESSAGE, TIMER):
            raise ContractError(f"port kind must be {MESSAGE!r} or {TIMER!r}, got {self.kind!r}")


@dataclasses.dataclass(frozen=True)
class NodePorts:
    """The declared ports of one node kind (inputs and outputs in the order the node uses them).

    Attributes:
        kind: node kind (``seiko_controller``).
        inputs: input id -> :class:`Port`.
        outputs: output id -> :class:`Port` (the batched ``log`` and ``<output>_rows`` outputs of
            :class:`~contactflow.nodes._runtime.Sender` are implied, see :mod:`contactflow.contracts.wiring`).
        any_inputs: the node accepts inputs of any name and contract (the recorder).
        stream_outputs: the node's outputs are named by its ``--streams`` argument (the replay).
        default_robot: the robot the node runs without ``--robot`` (its parser's default, read
            from here); None: the robot its ``--spec`` names (lac_policy).
    """

    kind: str
    inputs: Mapping[str, Port]
    outputs: Mapping[str, Port]
    any_inputs: bool = False
    stream_outputs: bool = False
    default_robot: str | None = DEFAULT_ROBOT

    def __post_init__(self):
        object.__setattr__(self, "inputs", MappingProxyType(dict(self.inputs)))
        object.__setattr__(self, "outputs", MappingProxyType(dict(self.outputs)))
        bad = [p for p, port in self.outputs.items() if port.kind != MESSAGE]
        if bad:
            raise ContractError(f"{self.kind}: outputs {bad} must be messages")

    @property
    def free_form(self) -> bool:
        """True if some ports are named by the graph or the arguments, not by this table."""
        return self.any_inputs or self.stream_outputs

    def timer_inputs(self) -> list[str]:
        return [p for p, port in self.inputs.items() if port.kind == TIMER]

    def optional_inputs(self) -> list[str]:
        return [p for p, port in self.inputs.items() if port.optional]

    def require_input(self, port: str) -> Port:
        """The declared input ``port``.

        Raises:
            ContractError: the node declares no such input (names the node, the port and the declared ones).
        """
        if port not in self.inputs:
            raise ContractError(f"node {self.kind!r}: input {port!r} is not in its port declaration "
                                f"(contactflow/contracts/ports.py); its inputs: {sorted(self.inputs)}")
        return self.inputs[port]

    def require_output(self, port: str) -> Port:
        """The declared output ``port``.

        Raises:
            ContractError: the node declares no such output.
        """
        if port not in self.outputs:
            raise ContractError(f"node {self.kind!r}: output {port!r} is not in its port declaration "
                                f"(contactflow/contracts/ports.py); its outputs: {sorted(self.outputs)}")
        return self.outputs[port]


def _node(kind: str, inputs: Mapping[str, Port] | None = None, outputs: Mapping[str, Port] | None = None,
          **kw) -> NodePorts:
    return NodePorts(kind, inputs or {}, outputs or {}, **kw)


_P = Port
_TICK = {"tick": _P("sensors")}  # a source clocked by the driver's sensors
_LAC_CONTROLLER = ({"sensors": _P("sensors"), "command": _P("teleop_command"),
                    # keep-alive: the newest command re-sent between ticks (nodes/_runtime.py KeepAlive)
                    "heartbeat": _P(None, optional=True, kind=TIMER)},
                   {"command": _P("joint_command")})

#: node kind -> declared ports: every node of ``nodes/``.
NODES: Mapping[str, NodePorts] = MappingProxyType({n.kind: n for n in (
    _node("operator", _TICK, {"command": _P("operator_command")}),
    _node("admittance", {"sensors": _P("sensors"), "desired": _P("desired")}, {"twist": _P("admittance_command")}),
    # `sensors` (optional): the real-time clock (a tick per newest sensors message; values unused)
    _node("input_filter", {"command": _P("operator_command"), "desired": _P("desired"),
                           "admittance": _P("admittance_command", optional=True),
                           "sensors": _P("sensors", optional=True)},
          {"targets": _P("effector_targets")}),
    _node("seiko_retargeting", {"targets": _P("effector_targets"), "command": _P("operator_command", optional=True)},
          {"desired": _P("desired")}),
    _node("seiko_controller", {"sensors": _P("sensors"), "desired": _P("desired"),
                               "wrench": _P("filtered_wrench", optional=True)},
          {"command": _P("joint_command"), "state": _P("controller_state"),
           "flex_rate": _P("flex_wrench_rate", optional=True)}),  # sent only when `wrench` is wired
    # SEIKO eq. (13) as its own node: sensors of tick k + the Controller's feedback of tick k - 1
    _node("wrench_filter", {"sensors": _P("sensors"), "flex_rate": _P("flex_wrench_rate")},
          {"wrench": _P("filtered_wrench")}),
    # input_filter + seiko_retargeting + seiko_controller in one process (nodes/seiko_stack.py)
    _node("seiko_stack", {"sensors": _P("sensors"), "command": _P("operator_command")},
          {"targets": _P("effector_targets"), "desired": _P("desired"), "command": _P("joint_command"),
           "state": _P("controller_state")}),
    # `timing`: one row per control period, sent in real-time mode (usually to the log only)
    _node("mujoco_driver", {"command": _P("joint_command"), "wrench": _P("external_wrench", optional=True)},
          {"sensors": _P("sensors"), "timing": _P("driver_timing", optional=True)}),
    # the same ports as mujoco_driver (plus an optional e-stop): the graph cannot tell sim from hardware
    _node("unitree_driver", {"command": _P("joint_command"), "wrench": _P("external_wrench", optional=True),
                             "estop": _P("estop", optional=True)},
          {"sensors": _P("sensors")}),
    # software e-stop of the hardware graph (nodes/estop.py), ticked by the driver
    _node("estop", _TICK, {"estop": _P("estop")}),
    # LAC teleop pipeline (Unitree G1)
    _node("teleop", _TICK, {"command": _P("teleop_command")}),
    _node("wrench_injector", _TICK, {"wrench": _P("external_wrench")}),
    _node("lac_policy", *_LAC_CONTROLLER, default_robot=None),
    _node("lac_expert", *_LAC_CONTROLLER, default_robot="g1"),
    # PRIME (offline): contracts of contactflow.prime.ports.prime_port_specs (sizes set by the estimator)
    _node("prime_estimator", {"sensors": _P("sensors")},
          {"ack": _P("prime_ack"), "state": _P("prime_state"), "forces": _P("prime_contact_forces"),
           "torque": _P("prime_torque"), "parameters": _P("prime_parameters")}),
    # observer on small drop_oldest queues (not lockstep); only `sensors` is required
    _node("viewer", {"sensors": _P("sensors"), "desired": _P("desired", optional=True),
                     "controller_state": _P("controller_state", optional=True)}),
    # free-form: records every input the graph gives it
    _node("recorder", any_inputs=True),
    # pass-through on one connection (reliability campaign, contactflow.faults.inject): `in` and `out`
    # carry the wrapped output's contract, whichever it is
    _node("fault_injector", {"in": _P(None)}, {"out": _P(None)}),
    # free-form: outputs = the streams of --streams; `ack` (lockstep mode, any contract; --ack-input renames it)
    _node("replay", {"ack": _P(None, optional=True)}, stream_outputs=True),
)})


def node_ports(kind: str) -> NodePorts:
    """The declaration of node ``kind``.

    Raises:
        ContractError: no such node kind (names the known ones).
    """
    try:
        return NODES[kind]
    except KeyError:
        raise ContractError(f"no port declaration for node kind {kind!r} (contactflow/contracts/ports.py); "
                            f"known: {sorted(NODES)}") from None


def _spec(kind: str, port: str, contract: str | None, specs: Mapping):
    if contract is None:
        raise ContractError(f"node {kind!r}: port {port!r} has no fixed contract (free-form)")
    try:
        return specs[contract]
    except KeyError:
        raise ContractError(f"node {kind!r}: port {port!r} needs contract {contract!r}, which the given specs "
                            f"lack (they hold {sorted(specs)})") from None


def lockstep_inputs(kind: str, specs: Mapping, *, offsets: Mapping[str, int] | None = None,
                    optional: Iterable[str] = (), only: Iterable[str] | None = None) -> dict:
    """The ``inputs`` argument of :class:`~contactflow.nodes._runtime.Lockstep` for node ``kind``.

    Args:
        kind: node kind.
        specs: contract name -> PortSpec (``port_specs(robot)``).
        offsets: input -> tick offset (default 0 for every input).
        optional: the optional inputs to include (those wired in the running graph).
        only: restrict to these inputs (default: every required message input + ``optional``).

    Returns:
        input id -> (PortSpec, offset), in declaration order (the order fixes the clock input and
        the tick time, see Lockstep). Timer inputs are never included (Lockstep's ``heartbeat``).

    Raises:
        ContractError: an input in ``offsets``/``optional``/``only`` that the node does not declare
            (or, in ``optional``, one that is required or a timer), or a contract missing from ``specs``.
    """
    decl = node_ports(kind)
    offsets = dict(offsets or {})
    optional = set(optional)
    for p in list(offsets) + sorted(optional) + list(only or ()):
        decl.require_input(p)
    for p in optional:
        if not decl.inputs[p].optional or decl.inputs[p].kind != MESSAGE:
            raise ContractError(f"node {kind!r}: input {p!r} is not an optional message input")
    if only is not None:
        keep = set(only)
        names = [p for p in decl.inputs if p in keep]
    else:
        names = [p for p, port in decl.inputs.items() if port.kind == MESSAGE and (not port.optional or p in optional)]
    return {p: (_spec(kind, p, decl.inputs[p].contract, specs), int(offsets.get(p, 0))) for p in names}


def sender_outputs(kind: str, specs: Mapping, *, optional: Iterable[str] = ()) -> dict:
    """The ``outputs`` argument of :class:`~contactflow.nodes._runtime.Sender` for node ``kind``.

    Args:
        kind: node kind.
        specs: contract name -> PortSpec.
        optional: the optional outputs this run sends.

    Returns:
        output id -> PortSpec, in declaration order: every required output plus ``optional``.

    Raises:
        ContractError: an undeclared or non-optional output in ``optional``, a node whose outputs
            are free-form, or a contract missing from ``specs``.
    """
    decl = node_ports(kind)
    if decl.stream_outputs:
        raise ContractError(f"node {kind!r}: its outputs are named by its --streams argument, not declared")
    optional = set(optional)
    for p in sorted(optional):
        if not decl.require_output(p).optional:
            raise ContractError(f"node {kind!r}: output {p!r} is not optional")
    return {p: _spec(kind, p, port.contract, specs) for p, port in decl.outputs.items()
            if not port.optional or p in optional}


def input_specs(kind: str, specs: Mapping) -> dict:
    """input id -> PortSpec of every message input of ``kind`` with a fixed contract (for a node that
    reads its events itself rather than through Lockstep: the viewer, the hardware driver).

    Raises:
        ContractError: unknown kind, or a contract missing from ``specs``.
    """
    decl = node_ports(kind)
    return {p: _spec(kind, p, port.contract, specs) for p, port in decl.inputs.items()
            if port.kind == MESSAGE and port.contract is not None}
