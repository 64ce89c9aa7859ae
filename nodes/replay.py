"""replay node: stands in for a node of a recorded run by re-publishing its recorded outputs.

Give the replay node the id of the node it replaces (``id: mujoco_driver``) and declare the same
outputs: the consumers' wiring is unchanged. Values are the recorded float64 values bit for bit,
with the recorded ``seq``/``t``/``finished`` metadata (and ``contract``/``layout``/``config`` on the
first message of each output: as recorded, or with the Sender below the port table's contract and
layout for the robot, the recorded size checked against them); the last message carries ``finished``
so that the run ends.

Args:
  ``--recording RUN``  run directory, run name under ``$CONTACTFLOW_RECORDINGS`` (absolute: a relative one
                       is refused for a name or ``latest``; or ``<repo>/recordings``), or ``latest``
                       (newest complete run holding the streams, and recorded with ``--robot`` when given). The environment variable
                       ``CONTACTFLOW_RECORDING`` overrides it (the ``teleop`` node's
                       ``--scenario-from-recording`` reads the same variable, so one name drives a
                       replay graph).
  ``--streams node.output[=output_id],...``  recorded streams to re-publish and on which output
                       (default output id: the recorded output name).
  ``--require-streams node.output,...``  streams the run must hold as well (those the graph's other
                       replay nodes re-publish): ``latest`` is then the newest run holding all of them,
                       the same run for every replay node of the graph, and a named run missing one is
                       refused (the graph could not reproduce the recorded run's inputs).
  ``--dataflows a.yml,...``  the dataflows whose runs the graph reproduces (a run's manifest ``dataflow``):
                       ``latest`` is the newest run of one of them, and a named run of another is refused
                       (its live stages ran with another configuration: the replay would diverge). Empty: any.
  ``--mode lockstep|paced|fast``
    * ``lockstep`` (default, deterministic): publish tick k only once the input ``ack`` (the
      consumer's output of tick k - ``--window``, e.g. ``ack: seiko_controller/command``) has
      arrived, so no queue ever overflows and the consumer sees exactly the recorded sequence.
    * ``paced``: publish at the recorded times ``t`` (divided by ``--speed``).
    * ``fast``: publish in order as fast as possible (consumers need backpressure queues deep
      enough for the whole run; dora drops beyond them).
  ``--window N`` (lockstep) ticks published ahead of the last acknowledged one (default 1).
  ``--batch N`` (lockstep, with the Sender below) up to N consecutive ticks per message (``Sender.send_rows``, split
                       back per tick by the consumers' Lockstep), each batch published once the ack of its last tick
                       less ``--window`` has arrived: dora's cost is per message (default 1: a message per tick).
  ``--start-seq``, ``--end-seq``: replay a slice. ``--allow-truncated``: replay the complete prefix of a
  stream recovered after a crash (refused by default). ``--ack-timeout-s``: give up when the consumer
  is silent that long.

A missing, foreign or truncated recording is refused before the node connects, with a message naming
the file and the reason; with ``--robot``, so is a run recorded with another robot (its manifest) or a
stream whose size is not the robot's for its contract. STOP ends the replay (queued events are drained).

With ``--robot`` and every replayed stream recorded under a contract of the port table, the node sends
with :class:`~contactflow.nodes._runtime.Sender` (the recorded values and metadata, the recorded
``config`` on the first message): an input that declares itself local (``CONTACTFLOW_LOCAL_INPUTS``,
``nodes/_local.py``) gets its messages over a local socket, and where the graph declares the output
``log`` the recorder reads the replayed streams batched there, as from the node replayed. Without them
each message goes through dora as recorded (a graph declaring ``log`` is then refused).
"""

from __future__ import annotations

import logging
import time

import pyarrow as pa

from contactflow.contracts.wiring import LOG_OUTPUT
from contactflow.nodes._runtime import (LOCAL_POLL_S, NodeArgumentParser, Sender, UpstreamError, connect,
                                       declared_outputs, drain_after_finish, meta_seq, node_main, stream_sender)

log = logging.getLogger("contactflow.recording.replay")


def _parser():
    p = NodeArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--recording", required=True, help="run directory, run name, or latest ($CONTACTFLOW_RECORDING overrides)")
    p.add_argument("--streams", required=True)
    p.add_argument("--require-streams", default="",
                   help="comma-separated streams the run must hold too (the graph's other replayed inputs)")
    p.add_argument("--dataflows", default="",
                   help="comma-separated dataflow files whose runs this graph reproduces (the manifest's dataflow); "
                        "empty: any")
    p.add_argument("--mode", choices=["lockstep", "paced", "fast"], default="lockstep")
    p.add_argument("--window", type=int, default=1)
    p.add_argument("--batch", type=int, default=1, help="lockstep: consecutive ticks per message (needs --robot)")
    p.add_argument("--speed", type=float, default=1.0)
    p.add_argument("--start-seq", type=int, default=0)
    p.add_argument("--end-seq", type=int, default=None)
    p.add_argument("--allow-truncated", action="store_true")
    p.add_argument("--ack-timeout-s", type=float, default=60.0)
    p.add_argument("--ack-input", default="ack")
    p.add_argument("--robot", default=None, help="robot of the recording: a run recorded with another robot is "
                   "refused (also tells `contactflow check` the contracts of the replayed streams)")
    return p


class _Events:
    """Reads the node's events; tracks the highest acknowledged seq and STOP.

    The ack input may be local (``CONTACTFLOW_LOCAL_INPUTS: ack``, nodes/_local.py; lockstep mode): its messages then
    come over a socket, or through dora, as a Lockstep's; :meth:`poll` waits on the socket while the newest ack came
    over it, on dora otherwise, and looks at the dora events (STOP, a closed input) at least every
    :data:`~contactflow.nodes._runtime.LOCAL_POLL_S`."""

    def __init__(self, node, ack_input: str, *, local: bool = False):
        from contactflow.nodes._local import LocalInbox

        self.node = node
        self.ack_input = ack_input
        self.acked = -1
        self.stopped = False
        self.closed = False
        self.ended = False
        self.local = LocalInbox([ack_input] if local else [], env=None if local else {})
        self._polled = time.monotonic()  # when the dora events were last looked at

    def _ack(self, ev) -> None:
        seq = meta_seq(ev["metadata"])
        if seq is not None:
            self.acked = max(self.acked, seq)

    def _take_local(self, ev) -> None:
        self.local.came_over_socket(ev)
        self._ack(ev)

    def poll(self, timeout: float) -> None:
        if self.local.socks:
            if time.monotonic() - self._polled >= LOCAL_POLL_S:  # the dora events, whatever the socket does
                self._try_dora()
            before = self.acked
            self.local.drain(self._take_local)
            if self.acked > before:
                return
            if self.local.via_socket[self.ack_input]:
                if not self.local.wait([self.ack_input], min(timeout, LOCAL_POLL_S), self._take_local):
                    self._try_dora()
                return
            timeout = min(timeout, LOCAL_POLL_S)  # the acks come through dora (now): wait there, then the socket
        self._polled = time.monotonic()
        ev = self.node.next(timeout=max(timeout, 1e-3))
        if ev is None:
            self.ended = True
            return
        self._handle(ev)

    def _try_dora(self) -> None:
        """Take the dora events already received, without waiting (``try_recv``; a node without it: one short wait)."""
        self._polled = time.monotonic()
        try_recv = getattr(self.node, "try_recv", None)
        for _ in range(1000):
            ev = try_recv() if try_recv is not None else self.node.next(timeout=1e-3)
            if ev is None:
                if try_recv is None:
                    self.ended = True
                return
            self._handle(ev)
            if try_recv is None:
                return

    def _handle(self, ev) -> None:
        typ = ev["type"]
        self.local.came_through_dora(ev)
        if typ == "INPUT" and ev["id"] == self.ack_input:
            self._ack(ev)
        elif typ == "INPUT_CLOSED" and ev["id"] == self.ack_input:
            self.closed = True
        elif typ == "STOP":
            self.stopped = True
        elif typ == "ERROR" and "timed out" not in str(ev.get("error", "")).lower():
            log.warning("dora error event: %s", ev.get("error"))


def main() -> int:
    from contactflow.paths import default_recordings_dir
    from contactflow.recording.store import names_a_run_under_root, resolve_run
    from contactflow.recording.replay import (check_replay_inputs, parse_stream_map, plan_replay,
                                              replayed_dataflows, replayed_streams)

    import os

    args = _parser().parse_args()
    recording = os.environ.get("CONTACTFLOW_RECORDING") or args.recording
    mappings = parse_stream_map(args.streams)
    sizes = table = None
    if args.robot:  # the consumers' contracts: a stream of another size is never sent
        from contactflow.contracts.messages import port_specs
        from contactflow.robot import load_robot

        table = port_specs(load_robot(args.robot))
        sizes = {name: spec.size for name, spec in table.items()}
    # latest: the newest complete run of --robot holding the streams at the robot's sizes; a named run
    # of another robot is refused
    from contactflow.recording.store import RecordingError

    required = replayed_streams(mappings, args.require_streams)
    # a run name or `latest` is looked up under the recordings folder (refused there when relative); a path is not
    root = default_recordings_dir(node=True) if names_a_run_under_root(recording) else None
    try:
        run_dir = resolve_run(recording, root, require_streams=required, robot=args.robot, contract_sizes=sizes,
                              dataflows=replayed_dataflows(args.dataflows))
        check_replay_inputs(run_dir, required)
    except RecordingError as exc:  # say how to name the run this node replays
        raise RecordingError(f"{exc} (--recording RUN in the graph, or CONTACTFLOW_RECORDING=RUN)") from None
    plan = plan_replay(run_dir, mappings, start_seq=args.start_seq, end_seq=args.end_seq,
                       allow_truncated=args.allow_truncated, contract_sizes=sizes)
    node = connect()  # from here the node's logging goes through dora's log (`dora run --log-level info` shows it)
    sender = _sender(node, plan, table)
    if args.batch > 1 and (sender is None or args.mode != "lockstep" or args.batch > args.window):
        from contactflow.errors import ConfigError

        raise ConfigError(f"replay: --batch {args.batch} sends several ticks per message with the Sender in lockstep "
                          f"mode: it needs --robot and the replayed streams' contracts, --mode lockstep and a --window "
                          f"of at least the batch (got --window {args.window}: the first batch would wait for acks "
                          f"of ticks it holds)")
    for w in plan.warnings:
        log.warning("%s", w)
    log.info("[replay] %d ticks of %s from %s (%s)", len(plan.ticks),
             ", ".join(m.stream + "->" + m.output for m in mappings), run_dir, args.mode)
    events = _Events(node, args.ack_input, local=args.mode == "lockstep")
    try:
        t0_rec = plan.ticks[0].t
        t0_wall = time.monotonic()
        sent = 0
        for group in batches(plan.ticks, max(1, args.batch)):
            tick = group[-1]
            if args.mode == "lockstep":
                waited = time.monotonic()
                while events.acked < tick.seq - args.window and not events.stopped:
                    if events.ended or events.closed:
                        raise UpstreamError(f"input {args.ack_input!r} closed while waiting for the ack of seq {tick.seq - args.window}")
                    if time.monotonic() - waited > args.ack_timeout_s:
                        raise UpstreamError(f"no ack of seq {tick.seq - args.window} on input {args.ack_input!r} "
                                            f"for {args.ack_timeout_s:.0f} s (is it wired to the consumer's output?)")
                    events.poll(1.0)
            elif args.mode == "paced":
                due = t0_wall + (tick.t - t0_rec) / max(args.speed, 1e-9)
                while not events.stopped and (rem := due - time.monotonic()) > 0:
                    if events.ended:
                        time.sleep(rem)  # no inputs: the event stream is empty
                    else:
                        events.poll(rem)
            if events.stopped:
                log.info("STOP received: replay ended after %d of %d ticks", sent, len(plan.ticks))
                break
            send_ticks(node, sender, group)
            sent += len(group)
        if sender is not None:
            sender.flush()
        # Do not exit right after the last send (dora may lose it): wait for the last ack, or drain.
        last = plan.ticks[sent - 1].seq if sent else -1
        end = time.monotonic() + (args.ack_timeout_s if args.mode == "lockstep" else 1.0)
        while not events.stopped and not events.ended and time.monotonic() < end:
            if args.mode == "lockstep" and (events.acked >= last or events.closed):
                break
            events.poll(0.2)
    finally:
        events.local.close()  # a sender then falls back to dora at once
    drain_after_finish(node)  # the last messages delivered (and re-sent where a queue may drop them)
    log.info("[replay] sent %d ticks", sent)
    return 0


#: metadata a replayed message carries that the Sender sets itself
_SENDER_KEYS = ("seq", "t", "finished", "contract", "layout", "config")


def batches(ticks: list, n: int) -> list[list]:
    """``ticks`` (strictly increasing seqs) in groups of at most ``n`` consecutive seqs (a recorded gap starts a new
    group: :meth:`Sender.send_rows` takes consecutive ticks)."""
    groups: list[list] = []
    for tick in ticks:
        if groups and len(groups[-1]) < n and tick.seq == groups[-1][-1].seq + 1:
            groups[-1].append(tick)
        else:
            groups.append([tick])
    return groups


def send_ticks(node, sender: Sender | None, group: list) -> None:
    """Send the messages of consecutive :class:`~contactflow.recording.replay.ReplayTick` s: one per tick and output
    through dora as recorded without ``sender``; with it (:func:`_sender`; the contract, layout and recorded config
    on each output's first message are the Sender's, every row also logged for the recorder) one message per tick
    and output, or one per output for the whole group (``Sender.send_rows``) when it holds several ticks, each with
    a message of every output."""
    rows: dict[str, list] = {}
    extra: dict[str, dict] = {}
    if sender is not None and len(group) > 1:
        for tick in group:
            for output, values, md in tick.messages:
                rows.setdefault(output, []).append((md["seq"], md["t"], md["finished"], values))
                extra.setdefault(output, _extra(md))
    if not rows or any(len(r) != len(group) for r in rows.values()):
        for tick in group:
            for output, values, md in tick.messages:
                if sender is None:
                    node.send_output(output, pa.array(values, type=pa.float64()), md)
                else:
                    sender.send(output, values, seq=md["seq"], t=md["t"], finished=md["finished"], **_extra(md))
            if sender is not None:
                sender.end_of_tick(tick.seq)
        return
    for output, r in rows.items():
        sender.send_rows(output, r, **extra[output])
    sender.end_of_tick(group[-1].seq)


def _extra(md: dict) -> dict:
    """The metadata of a replayed message the Sender does not set itself (``replayed_from`` on the first)."""
    return {k: v for k, v in md.items() if k not in _SENDER_KEYS}


def _sender(node, plan, table: dict | None) -> Sender | None:
    """The Sender of the replayed outputs (module docstring), or None: without ``--robot`` (``table``, its port
    table: contract name -> PortSpec) or where a stream was recorded without a contract of it (each message then
    goes through dora as recorded).

    Raises:
        ConfigError: the graph declares the output ``log`` and the node cannot send with a Sender.
    """
    from contactflow.errors import ConfigError

    first: dict[str, dict] = {}
    for tick in plan.ticks:
        for output, _, md in tick.messages:
            first.setdefault(output, md)
    specs, why = {}, None
    if table is not None:
        for output, md in first.items():
            if md.get("contract") in table:
                specs[output] = table[md["contract"]]
            else:
                why = f"its stream for output {output!r} has no contract of the port table ({md.get('contract')!r})"
    else:
        why = "no --robot"
    declared = declared_outputs(node)
    if why is None and specs:
        return stream_sender(node, "replay", specs,
                             output_configs={o: md["config"] for o, md in first.items() if "config" in md})
    if declared is not None and LOG_OUTPUT in declared:
        raise ConfigError(f"replay: the graph declares the output {LOG_OUTPUT!r}, which needs the replayed streams' "
                          f"contracts from --robot: {why}")
    return None


if __name__ == "__main__":
    node_main("replay", main)
