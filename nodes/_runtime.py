"""Shared plumbing of the contactflow dora nodes (this module imports dora; the library never does).

* :func:`node_main` wraps a node's body: logging, argument parsing, and the exit status and
  message when something goes wrong (naming the node and the reason).
* :class:`Lockstep` delivers the inputs of tick ``k`` together, in order, matching messages by
  their ``seq`` metadata: input ``i`` with offset ``o`` contributes its message of seq ``k - o``
  (``None`` for ``k - o < 0``: the node uses its reset state). Because every node's output of tick
  ``k`` depends only on these messages, a lockstep run is deterministic whatever the timing.
  An offset of 1 on an input pipelines a stage (it uses the previous tick's output of its
  upstream), so stages can run concurrently on several cores.
* :func:`send` packs and sends a message with its metadata (``seq``, ``t``, ``finished``; the
  node's resolved config and the port layout on the first message of each output).
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import json
import logging
import math
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np
import pyarrow as pa

from contactflow.errors import ContactflowError, ContractError, UpstreamError
from contactflow.contracts.messages import PortSpec
from contactflow.paths import OnceArgumentParser

log = logging.getLogger("contactflow.node")


#: Most ticks one multi-tick message may carry (``rows`` metadata; a larger count is not believed).
MAX_ROWS = 100_000

#: Start-up ticks of a real-time graph before the wall clock starts: the driver waits for each of
#: their commands (``mujoco_driver --warmup-ticks``), so the control loop runs when the clock starts.
REALTIME_WARMUP_TICKS = 10


#: How long [s] a lockstep node waits on its local inputs' sockets before it looks at its dora events.
LOCAL_POLL_S = 0.005


#: How long [s] a node waits without its clock input before it stops with one line (an upstream node that
#: hangs): the Lockstep's ``timeout_s`` and the loops of the nodes that read their events themselves.
SILENCE_S = 30.0


def watched_events(node, inputs: str | tuple[str, ...], silence_s: float, silent: Callable[[], str]):
    """The events of a node that reads them itself (``node.next(timeout=1.0)``, the ERROR events of
    its timeouts included), until the stream ends; raises :class:`UpstreamError` with ``silent()``'s
    line when none of ``inputs`` came for ``silence_s`` [s] of wall time (an upstream node that
    hangs, alive but silent). The Lockstep's ``timeout_s`` does the same for the lockstep nodes."""
    inputs = (inputs,) if isinstance(inputs, str) else tuple(inputs)
    last = time.monotonic()
    while True:
        ev = node.next(timeout=1.0)
        if ev is None:
            return
        typ = ev["type"]
        if typ == "ERROR" and time.monotonic() - last > silence_s:  # next()'s timeouts
            raise UpstreamError(silent())
        if typ == "INPUT" and ev["id"] in inputs:
            last = time.monotonic()
        yield ev


@dataclasses.dataclass
class Tick:
    """The inputs of one tick.

    Attributes:
        k: tick index (the ``seq`` of the outputs to send).
        t: time of the tick [s] (from the metadata of the inputs, else ``k * dt``).
        inputs: input id -> unpacked fields (dict of arrays), or ``None`` when the input is before
            its first message (k < offset) or its message was malformed (see ``errors``).
        raw: input id -> flat vector as received (or None).
        finished: True if any input of this tick carries ``finished``.
        errors: input id -> reason, for malformed messages of this tick.
        seqs: input id -> ``seq`` of the message used (None: none). In lockstep always ``k - offset``;
            in real-time mode the newest one available (see :class:`Lockstep`).
        ticks: clock ticks this tick stands for: 1, or in real-time mode 1 + the clock ticks skipped
            just before it (a stage that integrates per tick steps over them: see ``skipped``).
        skipped: real-time mode, the Lockstep's ``per_tick`` inputs: one dict per skipped tick (the newest
            ``max_per_tick`` of them), oldest first, input id -> unpacked fields of the newest message at
            or before that tick (``None``: none yet, malformed, or a ``values_unused`` input); the other
            inputs hold this tick's.
    """

    k: int
    t: float
    inputs: dict[str, dict[str, np.ndarray] | None]
    raw: dict[str, np.ndarray | None]
    finished: bool
    errors: dict[str, str]
    seqs: dict[str, int | None] = dataclasses.field(default_factory=dict)
    ticks: int = 1
    skipped: list[dict[str, dict[str, np.ndarray] | None]] = dataclasses.field(default_factory=list)


#: Real-time mode: how long [s] from the first tick an input may go without its first message when the
#: Lockstep has a ``stale_s`` limit (the upstream stages start their loops after the clock's first ticks).
STALE_FIRST_S = 10.0
#: Real-time mode: a gap [s] between two of a node's ticks above which the clock is taken as paused (the
#: driver stopped, or the node itself), and the gap is not counted in its inputs' staleness.
STALE_PAUSE_S = 0.5


class Lockstep:
    """Iterate ticks of a dora node whose inputs are matched by ``seq``.

    Lockstep (default): tick ``k`` waits for the message of seq ``k - offset`` of every input; a
    run is deterministic whatever the timing.

    Real-time mode (``skip_missing=True``, the nodes' ``--realtime``): the node never waits for a
    particular seq. One input is the *clock* (``clock``, default the first input with offset 0):
    each of its messages that the node receives is a tick, with ``k`` = its seq; every other input
    is sampled and held: the newest message received with seq <= k - offset (None before the first
    one; a message is reused until a newer one comes). Before a tick the node takes every event
    already received (``try_recv``), and the tick takes the newest clock message, skipping older
    unprocessed ones (counted in ``skipped``; ``latest_clock=False``: every one, in order).
    ``Tick.ticks`` says how many clock ticks a tick stands for (a stage that integrates per tick,
    such as the input filter, steps over the skipped ones, each with its own message of the
    ``per_tick`` inputs: ``Tick.skipped``). So the latest-value semantics lives in the
    node: the dataflow can give the edge a lossless queue (backpressure), and a stage that falls
    behind still takes the newest message without accumulating lag (dora 1.1's ``queue_size: 1``
    also drops messages that arrive while the receiver waits: measured ~30 % at 500 Hz on a loaded
    2-core machine).
    A tick never waits for the other inputs, not even for their first message (the node then uses
    its reset state, as in lockstep before an offset input's first message): waiting could deadlock
    a cycle such as input filter <-> Retargeting when a latest-value queue dropped the messages that
    would have broken it. The driver's start-up ticks (:data:`REALTIME_WARMUP_TICKS`) wait for their
    commands, so the wall clock starts once the control loop runs. Determinism is lost; the latency
    is the smallest possible.

    Args:
        node: the dora ``Node``.
        inputs: input id -> (PortSpec, offset). Every listed input is required for each tick.
        dt: tick period [s] used when no message gives the time.
        timeout_s: how long to wait for the inputs of a tick before raising UpstreamError.
        skip_missing: real-time mode (above).
        clock: real-time mode: the input whose messages are the ticks.
        latest_clock: real-time mode: a tick takes the newest clock message received (default);
            False: every clock message received is a tick, in order.
        heartbeat: (input id, callback): an input that is not part of the ticks (a dora timer,
            ``dora/timer/millis/5``); ``callback(lockstep)`` runs on each of its events received while the
            node waits for a tick (so it stops when the node hangs or dies). A node uses it to re-send
            its newest command (:meth:`Sender.repeat`) between ticks.
        node_kind: the node's kind in the port table (:mod:`contactflow.contracts.ports`); when given, every
            input must be one of its declared message inputs and ``heartbeat`` one of its timer inputs.
            Nodes build a Lockstep with :func:`lockstep_for`, which passes it.
        stale_s: real-time mode: the longest wall time [s] an input other than the clock may go without
            a new message while the clock ticks (None: no limit). Past it the tick raises UpstreamError
            naming the input and its source: in real time a node holds an input's newest message, so an
            upstream stage that hangs (alive, not sending) would otherwise go unnoticed, its consumer
            running on a stale value for ever. An input that said ``finished`` or closed is exempt; one
            that never sent a message gets :data:`STALE_FIRST_S` from the first tick (start-up). Only
            time while the node ticks counts (:data:`STALE_PAUSE_S`).
        per_tick: real-time mode: inputs whose message of each skipped tick a tick also gives
            (``Tick.skipped``, the newest ``max_per_tick`` skipped ticks): a stage that steps once per
            skipped tick (the input filter) integrates each tick's own operator command, not the newest
            one held over the gap.
        max_per_tick: the most skipped ticks ``Tick.skipped`` gives.
        values_unused: inputs whose values the node does not read (a clock it only ticks on): not
            decoded; their ``inputs`` / ``raw`` entries are None, their ``finished`` and ``t`` still count.

    Raises:
        ValueError: ``clock``, ``per_tick`` or ``values_unused`` naming an input not listed.
        ContractError: with ``node_kind``, an input id its declaration lacks (naming node and port).
        UpstreamError: while iterating: an input closed before the run ended, the event stream ended,
            no input for ``timeout_s`` (lockstep), an input stale for ``stale_s`` (real time).

    Messages with the metadata ``repeat`` (:meth:`Sender.repeat`) are ignored: they re-send a seq
    already delivered. ``configs`` holds each input's ``config`` metadata (its sender's resolved
    configuration, a JSON string) from its first message.
    """

    def __init__(self, node, inputs: Mapping[str, tuple[PortSpec, int]], *, dt: float = 0.002, timeout_s: float = SILENCE_S,
                 skip_missing: bool = False, clock: str | None = None, latest_clock: bool = True,
                 heartbeat: tuple[str, Callable[["Lockstep"], None]] | None = None, node_kind: str | None = None,
                 stale_s: float | None = None, per_tick: Iterable[str] = (), max_per_tick: int = 50,
                 values_unused: Iterable[str] = ()):
        if node_kind is not None:
            from contactflow.contracts.ports import MESSAGE, TIMER, node_ports

            decl = node_ports(node_kind)
            for iid in inputs:
                if decl.require_input(iid).kind != MESSAGE:
                    raise ContractError(f"node {node_kind!r}: input {iid!r} is a {decl.inputs[iid].kind} input, "
                                        "not a lockstep message")
            if heartbeat is not None and decl.require_input(heartbeat[0]).kind != TIMER:
                raise ContractError(f"node {node_kind!r}: heartbeat input {heartbeat[0]!r} is not a timer input")
        self.node_kind = node_kind
        self.node = node
        self.heartbeat = heartbeat
        self.configs: dict[str, str] = {}
        self.specs = {k: v[0] for k, v in inputs.items()}
        self.offsets = {k: int(v[1]) for k, v in inputs.items()}
        self.dt = dt
        self.timeout_s = timeout_s
        self.buffers: dict[str, dict[int, tuple[Any, dict]]] = {k: {} for k in inputs}
        self.closed: set[str] = set()
        self.k = 0
        self.finished_seen = False
        self.stopped = False
        self.skip_missing = skip_missing
        if clock is None:
            clock = next((i for i, o in self.offsets.items() if o == 0), next(iter(self.offsets), None))
        if clock not in self.offsets:
            raise ValueError(f"clock input {clock!r} is not among the inputs {sorted(self.offsets)}")
        self.clock = clock
        self.latest_clock = bool(latest_clock)
        self.per_tick = frozenset(per_tick)
        self.max_per_tick = int(max_per_tick)
        self.values_unused = frozenset(values_unused)
        for name, ids in (("per_tick", self.per_tick), ("values_unused", self.values_unused)):
            if not ids <= set(self.offsets):
                raise ValueError(f"{name} input(s) {sorted(ids - set(self.offsets))} are not among the inputs "
                                 f"{sorted(self.offsets)}")
        self.newest: dict[str, int] = {k: -1 for k in inputs}  # newest seq received per input
        self.finished_inputs: set[str] = set()  # inputs that sent a message with `finished`
        self.skipped = 0
        self.stale_s = None if stale_s is None else float(stale_s)
        self.last_rx: dict[str, float] = {}  # input -> time.monotonic() of its newest message
        self._first_tick_s: float | None = None
        self._last_check_s: float | None = None
        # local inputs (nodes/_local.py): lockstep only; a real-time node takes every input through dora
        from contactflow.nodes._local import LocalInbox

        self.local = LocalInbox(self.offsets, realtime=skip_missing)

    def _ready(self) -> bool:
        for i, off in self.offsets.items():
            need = self.k - off
            if need >= 0 and need not in self.buffers[i]:
                return False
        return True

    def _missing(self) -> list[str]:
        return [f"{i} (seq {self.k - o})" for i, o in self.offsets.items() if self.k - o >= 0 and self.k - o not in self.buffers[i]]

    def _unpack(self, i: str, value, meta: dict, inputs: dict, raw: dict, errors: dict) -> bool:
        if i in self.values_unused:  # a clock whose values the node does not read: not decoded
            inputs[i] = raw[i] = None
            return bool(meta.get("finished", False))
        try:
            vec = self.specs[i].vector(value)
            inputs[i] = self.specs[i].unpack(vec)
            raw[i] = vec
        except ContractError as exc:
            inputs[i] = raw[i] = None
            errors[i] = str(exc)
            log.warning("input %r tick %d: malformed message ignored, keeping the last safe values: %s", i, self.k, exc)
        return bool(meta.get("finished", False))

    def _pop_tick(self) -> Tick:
        inputs, raw, errors, seqs = {}, {}, {}, {}
        finished = False
        t = None
        for i, off in self.offsets.items():
            need = self.k - off
            buf = self.buffers[i]
            for s in [s for s in buf if s < need]:
                del buf[s]
            if need < 0:
                inputs[i] = raw[i] = seqs[i] = None
                continue
            value, meta = buf.pop(need)
            seqs[i] = need
            if off == 0:
                t = meta_time(meta, t)
            finished = self._unpack(i, value, meta, inputs, raw, errors) or finished
        tick = Tick(self.k, t if t is not None else self.k * self.dt, inputs, raw, finished, errors, seqs)
        self.finished_seen = self.finished_seen or finished
        self.k += 1
        return tick

    # ---------------------------------------------------------------- real-time mode
    def _next_clock(self) -> int | None:
        """The clock seq of the next real-time tick, or None if it cannot run yet."""
        pending = [s for s in self.buffers[self.clock] if s >= self.k]
        if not pending:
            return None
        return max(pending) if self.latest_clock else min(pending)

    def _pop_realtime(self, c: int) -> Tick:
        inputs, raw, errors, seqs = {}, {}, {}, {}
        finished = False
        t = None
        self.skipped += c - self.k
        skipped_from = self.k
        self.k = c
        held = [{} for _ in range(max(0, min(c - skipped_from, self.max_per_tick)))] if self.per_tick else []
        for i, off in self.offsets.items():
            need = c - off
            buf = self.buffers[i]
            if i in self.per_tick and held:
                self._held_per_tick(i, c - len(held) - off, held)
            if i == self.clock:
                for s in [s for s in buf if s <= c]:
                    value, meta = buf.pop(s)
            else:
                older = [s for s in buf if s <= need]
                if need < 0 or not older:
                    inputs[i] = raw[i] = seqs[i] = None
                    continue
                use = max(older)
                for s in older:
                    if s < use:
                        del buf[s]
                value, meta = buf[use]  # kept: held until a newer message comes
                need = use
            seqs[i] = need
            if i == self.clock:
                t = meta_time(meta, t)
            finished = self._unpack(i, value, meta, inputs, raw, errors) or finished
        tick = Tick(c, t if t is not None else c * self.dt, inputs, raw, finished, errors, seqs,
                    ticks=c - skipped_from + 1, skipped=held)
        self.finished_seen = self.finished_seen or finished
        self.k = c + 1
        return tick

    def _held_per_tick(self, i: str, first: int, held: list[dict]) -> None:
        """Fill ``held[j][i]`` with input ``i``'s message for seq ``first + j`` (the newest at or before it;
        None: none yet), each message decoded once."""
        keys = sorted(self.buffers[i])
        j0 = bisect.bisect_right(keys, first) - 1
        decoded: dict[int, dict | None] = {}
        for j, slot in enumerate(held):
            while j0 + 1 < len(keys) and keys[j0 + 1] <= first + j:
                j0 += 1
            if j0 < 0:
                slot[i] = None
                continue
            s = keys[j0]
            if s not in decoded:
                out: dict = {}
                value, meta = self.buffers[i][s]
                self._unpack(i, value, meta, out, {}, {})
                decoded[s] = out[i]
            slot[i] = decoded[s]

    def _check_stale(self) -> None:
        """Real-time mode: raise UpstreamError if an input went stale (``stale_s``, class docstring).

        Only time while this node ticks counts: a gap of more than :data:`STALE_PAUSE_S` between two
        ticks (the clock paused: the driver stopped or stalled, or this node was) is not added to any
        input's age, as the robot driver does not count its own absence (``CommandLossClock``)."""
        now = time.monotonic()
        if self._first_tick_s is None:
            self._first_tick_s = now
        elif self._last_check_s is not None and now - self._last_check_s > STALE_PAUSE_S:
            shift = now - self._last_check_s
            self._first_tick_s = min(self._first_tick_s + shift, now)
            for i in self.last_rx:
                self.last_rx[i] = min(self.last_rx[i] + shift, now)
        self._last_check_s = now
        for i in self.offsets:
            if i == self.clock or i in self.finished_inputs or i in self.closed:
                continue
            since = self.last_rx.get(i)
            limit = self.stale_s if since is not None else max(self.stale_s, STALE_FIRST_S)
            age = now - (since if since is not None else self._first_tick_s)
            if age > limit:
                source = ""
                if self.node_kind is not None:
                    try:
                        source = declared_inputs(self.node, self.node_kind).get(i, "")
                    except Exception:  # noqa: BLE001 - the name is a courtesy; the error stands
                        source = ""
                what = "no new message" if since is not None else "no message yet"
                raise UpstreamError(
                    f"input {i!r}{f' from {source}' if source else ''}: {what} for {age:.2f} s while the clock "
                    f"({self.clock!r}) ticked (real time, limit {limit:.2f} s, tick {self.k}): the upstream node "
                    "hangs or fell behind")

    def _drain(self, waited_since: float) -> None:
        # events already received: taken before a real-time tick so that it uses the newest of each input
        try_recv = getattr(self.node, "try_recv", None)
        if try_recv is None:
            return
        for _ in range(1000):
            ev = try_recv()
            if ev is None:
                return
            self._handle_dora(ev, waited_since)

    def _iter_realtime(self):
        waited_since = time.monotonic()
        while True:
            c = self._next_clock()
            if c is not None:
                self._drain(waited_since)
                c = self._next_clock()
            if c is not None:
                waited_since = time.monotonic()
                if self.stale_s is not None:
                    self._check_stale()
                yield self._pop_realtime(c)
                continue
            waiting_for = [self.clock] if not any(s >= self.k for s in self.buffers[self.clock]) else [
                i for i, o in self.offsets.items() if i != self.clock and self.newest[i] < self.k - o]
            dead = sorted(i for i in self.closed if i not in self.finished_inputs)
            if dead and not self.finished_seen and not self.stopped:
                raise UpstreamError(f"input(s) {', '.join(dead)} closed before the run ended (real-time tick {self.k}): "
                                    "the upstream node stopped")
            if self.stopped or any(i in self.closed for i in waiting_for):
                return
            ev = self.node.next(timeout=1.0)
            if ev is None:
                if self.finished_seen:
                    return
                raise UpstreamError(f"event stream ended before the run ended (real-time, waiting for {', '.join(waiting_for)})")
            self._handle(ev, waited_since, waiting_for)

    # ---------------------------------------------------------------- events
    def _handle(self, ev, waited_since: float, waiting_for: list[str] | None = None) -> None:
        typ = ev["type"]
        if typ == "INPUT":
            iid = ev["id"]
            if self.heartbeat is not None and iid == self.heartbeat[0]:
                self.heartbeat[1](self)
                return
            if iid not in self.buffers:
                return
            if ev["metadata"].get("repeat", False):
                # a keep-alive (Sender.repeat) is ignored; a re-sent end of run (Sender.repeat_finished) stands in
                # for its original when that never arrived (a dropping queue lost it)
                if is_skipped_repeat(ev["metadata"], self.newest[iid]):
                    return
                ev = {**ev, "metadata": {k: v for k, v in ev["metadata"].items() if k != "repeat"}}
            if iid not in self.configs and "config" in ev["metadata"]:
                self.configs[iid] = ev["metadata"]["config"]
            seq = meta_seq(ev["metadata"])
            if seq is None:
                log.warning("input %r: message without %s ignored", iid, SEQ_RULE)
                return
            if isinstance(ev["metadata"].get("rows"), int):  # several ticks in one message (Sender.send_rows)
                try:
                    parts = split_rows(ev["value"], ev["metadata"])
                except (ContractError, KeyError, TypeError, ValueError, OverflowError, pa.ArrowException) as exc:
                    n = int(ev["metadata"]["rows"])
                    if not 0 < n <= MAX_ROWS:
                        log.warning("input %r: malformed multi-tick message ignored: %s", iid, exc)
                        return
                    # its ticks still come, as malformed messages (no values): the node keeps its last safe
                    # values for them instead of waiting for seqs that never come (a lockstep stall)
                    log.warning("input %r: malformed multi-tick message (seq %d..%d) ignored, its ticks are "
                                "malformed: %s", iid, seq, seq + n - 1, exc)
                    fin = bool(ev["metadata"].get("finished", False))
                    parts = [(seq + j, pa.array([], type=pa.float64()), {"seq": seq + j, "t": t, "finished": fin and j == n - 1})
                             for j, t in enumerate(self._row_times(ev["metadata"], seq, n))]
                for s, value, meta in parts:
                    self._handle({"type": "INPUT", "id": iid, "value": value, "metadata": meta}, waited_since, waiting_for)
                return
            self.buffers[iid][seq] = (ev["value"], ev["metadata"])
            if self.stale_s is not None:
                self.last_rx[iid] = time.monotonic()
            if seq > self.newest[iid]:
                self.newest[iid] = seq
            if ev["metadata"].get("finished", False):
                self.finished_inputs.add(iid)
        elif typ == "INPUT_CLOSED":
            if ev["id"] in self.buffers:
                self.closed.add(ev["id"])
        elif typ == "STOP":
            self.stopped = True
        elif typ == "NODE_FAILED":
            raise UpstreamError(upstream_failure(ev.get("value")))
        elif typ == "ERROR":
            err = str(ev.get("error", ""))
            if "timed out" not in err.lower():
                log.warning("dora error event: %s", err)
            if time.monotonic() - waited_since > self.timeout_s:
                what = ", ".join(waiting_for) if waiting_for is not None else ", ".join(self._missing())
                raise UpstreamError(f"no input for {self.timeout_s:.0f} s while waiting for {what}")

    def _handle_local(self, ev) -> None:
        self.local.came_over_socket(ev)
        self._handle(ev, self._waited_since)

    def _handle_dora(self, ev, waited_since: float) -> None:
        self.local.came_through_dora(ev)
        self._handle(ev, waited_since)

    def _row_times(self, meta: Mapping[str, Any], seq: int, n: int) -> list[float]:
        """The times [s] of the ``n`` ticks of a multi-tick message whose values could not be read: its
        ``row_t`` when that is n finite numbers, else its ``t`` (or ``seq * dt``) plus ``j * dt``."""
        row_t = meta.get("row_t")
        if isinstance(row_t, (list, tuple)) and len(row_t) == n:
            try:
                ts = [float(x) for x in row_t]
            except (TypeError, ValueError, OverflowError):
                ts = []
            if len(ts) == n and all(math.isfinite(x) for x in ts):
                return ts
        t0 = meta_time(meta, seq * self.dt)
        return [t0 + j * self.dt for j in range(n)]

    def __iter__(self):
        if _FROZE:  # a node (connect() froze the start-up): what it built since (its sender, this Lockstep) too
            freeze_heap()
        if self.skip_missing:
            yield from self._iter_realtime()
            return
        try:
            yield from self._iter_lockstep()
        finally:  # a sender then falls back to dora at once instead of queueing into a socket nobody reads
            self.local.close()

    def _iter_lockstep(self):
        """Lockstep mode. With local inputs (nodes/_local.py) the messages of an input come over its socket or
        through dora: the node waits on the sockets while the newest message of every missing input came over
        its socket, else on dora (for :data:`LOCAL_POLL_S` at a time, draining the sockets between), and looks
        at its dora events at least every :data:`LOCAL_POLL_S` (STOP, a closed input, a dora input) even while
        the sockets keep it busy."""
        local = self.local.socks
        self._waited_since = polled = time.monotonic()
        while True:
            if local:
                self.local.drain(self._handle_local)
                if time.monotonic() - polled >= LOCAL_POLL_S:
                    self._drain(self._waited_since)
                    polled = time.monotonic()
            if self._ready():
                if self.heartbeat is not None:
                    # take the timer events already received: a node busy tick after tick (a lockstep
                    # graph running faster than real time) would otherwise let dora's queue overflow
                    self._drain(self._waited_since)
                self._waited_since = time.monotonic()
                yield self._pop_tick()
                continue
            needed_closed = [i for i in self.closed if self.k - self.offsets[i] >= 0 and self.k - self.offsets[i] not in self.buffers[i]]
            if needed_closed or self.stopped:
                if self.finished_seen or self.stopped:
                    return
                raise UpstreamError(
                    f"input(s) {', '.join(needed_closed)} closed before the run ended "
                    f"(waiting for tick {self.k}): the upstream node stopped{self.local.note()}"
                )
            if local:
                missing = [i for i, o in self.offsets.items() if self.k - o >= 0 and self.k - o not in self.buffers[i]]
                if all(self.local.via_socket.get(i) for i in missing):
                    if not self.local.wait(missing, LOCAL_POLL_S, self._handle_local):
                        self._drain(self._waited_since)
                        polled = time.monotonic()
                        if polled - self._waited_since > self.timeout_s:
                            raise UpstreamError(f"no input for {self.timeout_s:.0f} s while waiting for "
                                                f"{', '.join(self._missing())}{self.local.note()}")
                    continue
            ev = self.node.next(timeout=LOCAL_POLL_S if local else 1.0)
            polled = time.monotonic()  # the wait looked at the dora events
            if ev is None:
                if self.finished_seen:
                    return
                raise UpstreamError(f"event stream ended before the run ended (waiting for {', '.join(self._missing())})")
            self._handle_dora(ev, self._waited_since)


#: the largest ``seq`` a message may carry (a float64 holds every integer below it: JSON readers of a recording)
MAX_SEQ = 2**53
#: what :func:`meta_seq` takes, in the words of the warnings that drop a message without it
SEQ_RULE = "integer 'seq' metadata (0 <= seq < 2**53)"


def meta_seq(meta: Mapping[str, Any]) -> int | None:
    """The ``seq`` metadata of a message as an int in ``[0, MAX_SEQ)``, else None (missing, a bool, a float, negative,
    too large): the one rule every reader of ``seq`` applies (:class:`Lockstep`, the MuJoCo driver's command, the
    replay's ack, the viewer, :func:`is_received_repeat`)."""
    seq = meta.get("seq")
    return seq if isinstance(seq, int) and not isinstance(seq, bool) and 0 <= seq < MAX_SEQ else None


def is_received_repeat(meta: Mapping[str, Any], newest: int | None) -> bool:
    """True for a re-send (metadata ``repeat``: :meth:`Sender.repeat`'s keep-alive, :meth:`Sender.repeat_finished`'s
    end of run) of an integer ``seq`` at or below ``newest``, the highest seq its input has received (-1 or None:
    none yet): its original arrived, so it carries nothing new. The one rule the readers of a re-send share
    (:class:`Lockstep`, the MuJoCo driver's command, the viewer, the recorder)."""
    seq = meta_seq(meta)
    return bool(meta.get("repeat", False)) and seq is not None and newest is not None and seq <= newest


def is_skipped_repeat(meta: Mapping[str, Any], newest: int | None) -> bool:
    """True for a re-send a lockstep reader or the recorder skips: a keep-alive (:meth:`Sender.repeat`), or a re-sent
    end of run whose original arrived (:func:`is_received_repeat`); a re-sent end of run whose original never arrived
    stands in for it (False)."""
    return bool(meta.get("repeat", False)) and (not meta.get("finished", False) or is_received_repeat(meta, newest))


def meta_time(meta: Mapping[str, Any], default: float | None) -> float | None:
    """The ``t`` metadata of a message as a finite float, else ``default`` (missing or malformed ``t``:
    the tick keeps ``k * dt``; a peer's garbage never becomes the tick's time)."""
    t = meta.get("t")
    if isinstance(t, (int, float)) and not isinstance(t, bool) and abs(t) < 1e300:  # abs: no float() overflow
        return float(t)
    if t is not None:
        log.warning("message with malformed 't' metadata %r: the tick's time is k * dt", t)
    return default


class KeepAlive:
    """A controller's keep-alive: its newest command re-sent on each ``heartbeat`` event between ticks.

    The LAC controllers (``lac_expert``, ``lac_policy``) run at the control rate (50 Hz), so a
    driver's command watchdog would otherwise hear from them every 20 ms at best. Wired with
    ``heartbeat: dora/timer/millis/5`` (the node's timer input in :mod:`contactflow.contracts.ports`), the node re-sends
    its newest command (:meth:`Sender.repeat`, same seq, ``repeat: true``) every 5 ms while it waits
    for its next tick, so the driver's last command is never more than ~5 ms old while the controller
    lives, and a dead or hung controller shows within a few milliseconds of its last message. It
    re-sends only when the ``sensors`` input comes from a driver paced by the wall clock (its config
    says ``realtime: true``: the hardware driver, ``mujoco_driver --realtime``): a lockstep graph
    sends nothing more. Used as ``lockstep_for(..., heartbeat=KeepAlive.if_wired(node, sender, kind))``.
    """

    #: Least time between two messages on the output [s]: timer events received in a burst (after a
    #: long step) re-send once, not once each.
    MIN_INTERVAL_S = 0.004

    def __init__(self, sender: "Sender", output: str = "command", driver_input: str = "sensors"):
        self.sender, self.output, self.driver_input = sender, output, driver_input
        self.active: bool | None = None  # None until the driver's config is seen

    @classmethod
    def if_wired(cls, node, sender: "Sender", kind: str) -> "tuple[str, KeepAlive] | None":
        """The ``heartbeat`` argument of :class:`Lockstep` for a node of ``kind`` whose dataflow entry
        wires the timer input of its port declaration (:mod:`contactflow.contracts.ports`), else None."""
        from contactflow.contracts.ports import node_ports

        timers = node_ports(kind).timer_inputs()
        wired = declared_inputs(node, kind) if timers else {}
        timer = next((t for t in timers if t in wired), None)
        if timer is None:
            return None
        sender.keep_last = True
        return timer, cls(sender)

    def __call__(self, lock: "Lockstep") -> None:
        if self.active is None:
            cfg = lock.configs.get(self.driver_input)
            if cfg is None:
                return
            try:
                self.active = bool(json.loads(cfg).get("realtime", False))
            except (TypeError, ValueError, AttributeError):
                self.active = False
            log.info("keep-alive: %s", f"the newest {self.output!r} is re-sent between ticks (wall-clock driver)"
                     if self.active else "off (lockstep driver)")
        if self.active and time.monotonic() - self.sender.last_send_s.get(self.output, -1e9) >= self.MIN_INTERVAL_S:
            self.sender.repeat(self.output)


from contactflow.contracts.wiring import LOG_OUTPUT, rows_output  # noqa: E402 - the log and multi-tick output names (one source)
#: Default ticks per log batch (``CONTACTFLOW_LOG_EVERY`` overrides; 1 = a batch per tick). 25 ticks = 50 ms
#: at 500 Hz: a node killed loses at most that much of its recording, within the fault campaign's 100 ms
#: criterion with a margin (50 ticks gave 107 ms once); it doubles the log messages (docs/reliability.md).
LOG_EVERY_DEFAULT = 25
#: Default ticks per ``<output>_rows`` message (``CONTACTFLOW_ROWS_EVERY`` overrides).
ROWS_EVERY_DEFAULT = 10
_SENDERS: list["Sender"] = []


class Sender:
    """Sends a node's outputs with contactflow metadata, and their batched log for the recorder.

    Each :meth:`send` sends one message on ``output`` with the metadata ``seq``, ``t``,
    ``finished`` (and ``contract``, ``layout``, ``config`` on the first message of each output).

    Batched log: when the node's dataflow entry declares the output ``log`` (:data:`LOG_OUTPUT`), every
    message of every output is also kept and sent to the recorder in one ``log`` message per
    ``log_every`` ticks (``$CONTACTFLOW_LOG_EVERY``, default 25), at a message with ``finished``, at
    the end of the run (:func:`drain_after_finish`) and when the node ends on an error (:func:`node_main` calls
    :func:`flush_senders`). dora's cost is per message, not per byte, so the recorder then receives one
    message per node per ``log_every`` ticks instead of one per output per tick. Outputs that the
    entry does NOT declare are then only logged, never sent over dora (an output read only by the
    recorder costs nothing per tick). Batch layout: :func:`contactflow.recording.store.pack_log`.

    Multi-tick edge: when the entry declares ``<output>_rows`` (``contactflow.contracts.wiring.rows_output``),
    the messages of ``output`` are also sent there ``rows_every`` ticks per message
    (``$CONTACTFLOW_ROWS_EVERY``, default 10); ``<output>_rows<N>``: N ticks per message (several
    such outputs may coexist, each with its own batches). :meth:`send_rows` format, split back per seq
    by :class:`Lockstep`; a batch also goes at a message with ``finished`` and at the end of the run.
    For a consumer that lags the producer by at least the batch's ticks (the Controller reading a
    Retargeting that runs ahead: 10; the input filter <-> Retargeting cycle, lag 2: 2): wired where
    the producer would wait on the consumer for a tick inside the batch, it deadlocks (the graph
    source, ``contactflow/graphs.py``, decides where it is safe).

    Args:
        node: the dora Node.
        outputs: output id -> PortSpec.
        config: the node's resolved configuration (attached to the first message of each output).
        log_every: ticks per log batch (None: the environment / default).
        node_kind: the node's kind in the port table (:mod:`contactflow.contracts.ports`); when given, every
            output must be declared there. Nodes build a Sender with :func:`sender_for`, which passes it.
        output_configs: output id -> the configuration JSON its first message carries instead of ``config``'s
            (a replay node: each stream's recorded ``config``, as recorded).

    Raises:
        ContractError: with ``node_kind``, an output its declaration lacks; on :meth:`send`,
            :meth:`send_rows` or :meth:`repeat`, an output this Sender was not built with (naming
            the node and the port).
    """

    def __init__(self, node, outputs: Mapping[str, PortSpec], config: Any = None, *, log_every: int | None = None,
                 node_kind: str | None = None, output_configs: Mapping[str, str] | None = None):
        import os

        if node_kind is not None:
            from contactflow.contracts.ports import node_ports

            decl = node_ports(node_kind)
            for out in outputs:
                decl.require_output(out)
        self.node_kind = node_kind
        self.node = node
        self.specs = dict(outputs)
        self.first = {k: True for k in outputs}
        self.config_json = json.dumps(_plain(config)) if config is not None else None
        self.output_configs = dict(output_configs or {})
        declared = declared_outputs(node)
        self.logging = declared is not None and LOG_OUTPUT in declared
        # with a log, undeclared outputs go to the log only (dora would drop them with a warning)
        self.wire = {k for k in outputs if not self.logging or k in declared}
        if log_every is None:
            env = os.environ.get("CONTACTFLOW_LOG_EVERY", "")
            log_every = int(env) if env.strip().isdigit() and int(env) > 0 else LOG_EVERY_DEFAULT
        self.log_every = max(1, int(log_every))
        self._rows: dict[str, list[tuple]] = {k: [] for k in outputs}
        env = os.environ.get("CONTACTFLOW_ROWS_EVERY", "")
        self.rows_every = int(env) if env.strip().isdigit() and int(env) > 0 else ROWS_EVERY_DEFAULT
        # output -> [(multi-tick output declared in the entry, ticks per message; None: rows_every)]
        self.row_outputs: dict[str, list[tuple[str, int | None]]] = {}
        for wire in declared or ():
            parsed = rows_output(wire)
            if parsed is not None and parsed[0] in outputs:
                self.row_outputs.setdefault(parsed[0], []).append((wire, parsed[1]))
        self._edge_rows: dict[str, list[tuple]] = {w: [] for ws in self.row_outputs.values() for w, _ in ws}
        self._log_first = {k: True for k in outputs}
        self._batch_seq0: int | None = None
        self.batches_sent = 0
        # the newest message and send time per output, kept only for a keep-alive (KeepAlive sets keep_last)
        self.keep_last = False
        self._last: dict[str, tuple[np.ndarray, dict]] = {}
        self.last_send_s: dict[str, float] = {}  # output -> time.monotonic() of its newest message
        self._finished_msgs: dict[str, tuple[np.ndarray, dict]] = {}  # output -> its message that said finished
        # outputs whose every reader declares the input local (nodes/_local.py): sent there, not through dora
        from contactflow.nodes._local import LocalOutbox

        self.local = LocalOutbox(node, self.wire | set(self._edge_rows))
        _SENDERS.append(self)

    def _spec_of(self, output: str) -> PortSpec:
        try:
            return self.specs[output]
        except KeyError:
            raise ContractError(f"node {self.node_kind or '?'!r}: output {output!r} is not among its outputs "
                                f"{sorted(self.specs)} (contactflow/contracts/ports.py)") from None

    def send(self, output: str, values: Mapping[str, Any] | np.ndarray, *, seq: int, t: float, finished: bool = False, **meta):
        spec = self._spec_of(output)
        vec = values if isinstance(values, np.ndarray) else spec.pack(values)
        if not self.logging or output in self.wire:
            # on the wire first: a log batch that this message completes is sent after it, so a
            # command does not wait behind the recorder's batch (real time)
            md = {"seq": int(seq), "t": float(t), "finished": bool(finished), **meta}
            self._send(output, vec, md)
            if self.keep_last:
                self._last[output] = (vec, md)
        if self.logging:
            self._log_row(output, int(seq), t, finished, vec)
        if output in self.row_outputs:
            row = (int(seq), float(t), bool(finished), np.array(vec, dtype=np.float64))
            for wire, every in self.row_outputs[output]:
                rows = self._edge_rows[wire]
                rows.append(row)
                if len(rows) >= (every or self.rows_every) or finished:
                    self._send_edge_rows(wire, output)

    def repeat(self, output: str) -> bool:
        """Re-send the newest message of ``output`` (same values, ``seq`` and ``t``) with the metadata
        ``repeat: true``: a keep-alive for a consumer with a command watchdog (the hardware driver),
        so that it hears from its controller every few milliseconds although the controller runs at
        the control rate. Not logged, not sent on ``<output>_rows``; :class:`Lockstep` and the
        recorder ignore such messages. Returns False (nothing sent) before the first message or
        after the one that said ``finished``."""
        self._spec_of(output)
        last = self._last.get(output)
        if last is None or last[1].get("finished", False):
            return False
        vec, md = last
        self.node.send_output(output, pa.array(vec, type=pa.float64()),
                              {"seq": md["seq"], "t": md["t"], "finished": False, "repeat": True})
        self.last_send_s[output] = time.monotonic()
        return True

    def repeat_finished(self) -> list[str]:
        """Re-send, once and through dora, the message that said ``finished`` on each output that an input reads
        through a queue that may drop messages (:func:`contactflow.nodes._local.lossy_outputs`: dora's default
        ``drop_oldest``, the real-time graphs' edges): the end of the run travels as one message per edge, and a reader
        that lost it would stop with "closed before the run ended". The copy carries ``repeat: true``; a reader that
        has the original ignores it (:class:`Lockstep`, the MuJoCo driver's command, the viewer), one that lost it
        takes the copy instead (the recorder too: :func:`is_received_repeat`). Called by
        :func:`drain_after_finish` and at the Unitree driver's end. Returns the outputs re-sent."""
        if not self._finished_msgs:
            return []
        from contactflow.nodes._local import descriptor_nodes, lossy_outputs, node_identity

        me = node_identity()[1]
        lossy = lossy_outputs(descriptor_nodes(self.node), me, self._finished_msgs) if me else set()
        for output in sorted(lossy):
            vec, md = self._finished_msgs[output]
            self.node.send_output(output, pa.array(vec, type=pa.float64()), {**md, "repeat": True})
        self._finished_msgs.clear()
        return sorted(lossy)

    def _send_edge_rows(self, wire: str, output: str) -> None:
        rows = self._edge_rows[wire]
        if not rows:
            return
        md = {"seq": rows[0][0], "t": rows[0][1], "finished": any(r[2] for r in rows), "rows": len(rows),
              "row_t": [r[1] for r in rows], "row_finished": [int(r[2]) for r in rows]}
        values = np.concatenate([r[3] for r in rows])
        rows.clear()
        self._send(wire, values, md, contract_of=output)

    def send_rows(self, output: str, rows: list[tuple[int, float, bool, Mapping[str, Any] | np.ndarray]], **meta):
        """Send the messages of several consecutive ticks of ``output`` as ONE dora message.

        ``rows``: (seq, t, finished, values) per tick, seqs consecutive. The message carries the
        metadata ``seq`` (the first row's), ``rows`` (n), ``row_t`` and ``row_finished`` (per row);
        :class:`Lockstep` splits it back into one message per seq (:func:`split_rows`), so a consumer
        sees what :meth:`send` per row would give, for the cost of one message (dora's cost is per
        message). For a producer that runs ahead of the graph's clock (the scenario operator). Each
        row also goes to the log as a message of its own.

        Raises:
            ValueError: no rows, or seqs that are not consecutive.
        """
        if not rows:
            raise ValueError("send_rows: no rows")
        spec = self._spec_of(output)
        seqs = [int(r[0]) for r in rows]
        if seqs != list(range(seqs[0], seqs[0] + len(seqs))):
            raise ValueError(f"send_rows: seqs {seqs[0]}..{seqs[-1]} are not consecutive")
        vecs = []
        for seq, t, fin, values in rows:
            vec = values if isinstance(values, np.ndarray) else spec.pack(values)
            if self.logging:
                self._log_row(output, int(seq), t, fin, vec)
            vecs.append(np.asarray(vec, dtype=np.float64).reshape(-1))
        if self.logging and output not in self.wire:
            return
        md = {"seq": seqs[0], "t": float(rows[0][1]), "finished": any(bool(r[2]) for r in rows), "rows": len(rows),
              "row_t": [float(r[1]) for r in rows], "row_finished": [int(bool(r[2])) for r in rows], **meta}
        self._send(output, np.concatenate(vecs), md)

    def _send(self, output: str, vec: np.ndarray, md: dict, contract_of: str | None = None) -> None:
        spec = self.specs[contract_of or output]
        if self.first.get(output, True):
            md["contract"] = spec.name
            md["layout"] = json.dumps([[f.name, f.size] for f in spec.fields])
            config = self.output_configs.get(contract_of or output, self.config_json)
            if config is not None:
                md["config"] = config
            self.first[output] = False
        if not (self.local.targets and self.local.send(output, vec, md)):
            self.node.send_output(output, pa.array(vec, type=pa.float64()), md)
        if md.get("finished", False):  # the end of the run: re-sent once where a queue may drop it (repeat_finished)
            self._finished_msgs[output] = (np.array(vec, dtype=np.float64, copy=True),  # the caller may reuse its buffer
                                           {k: v for k, v in md.items() if k not in ("contract", "layout", "config")})
        if self.keep_last:
            self.last_send_s[output] = time.monotonic()

    def _log_row(self, output: str, seq: int, t: float, finished: bool, vec) -> None:
        if self._batch_seq0 is None:
            self._batch_seq0 = seq
        elif seq - self._batch_seq0 >= self.log_every:  # a new tick past the batch: send the batch first
            self._flush_log()
            self._batch_seq0 = seq
        self._rows[output].append((seq, float(t), bool(finished), time.time_ns(), np.array(vec, dtype=np.float64)))
        if finished:  # the end of the run: the recorder, and a node clocked by this log, see it now
            self._flush_log()

    def end_of_tick(self, seq: int) -> bool:
        """Say that tick ``seq`` is complete (all its outputs sent): the log batch is sent now if it
        holds its ``log_every`` ticks, instead of with the first message of the next tick (which a
        real-time node must send at once). True if a batch was sent."""
        if self._batch_seq0 is not None and seq - self._batch_seq0 + 1 >= self.log_every:
            return self._flush_log()
        return False

    @property
    def pending(self) -> int:
        """Messages kept for the log or a ``_rows`` output and not sent yet."""
        return sum(len(r) for r in self._rows.values()) + sum(len(r) for r in self._edge_rows.values())

    def flush(self) -> bool:
        """Send the kept messages now (one ``log`` message, the ``_rows`` outputs); True if any was sent."""
        edge = any(self._edge_rows.values())
        for out, wires in self.row_outputs.items():
            for wire, _ in wires:
                self._send_edge_rows(wire, out)
        return self._flush_log() or edge

    def _flush_log(self) -> bool:
        if not self.logging or not any(self._rows.values()):
            return False
        from contactflow.recording.store import pack_log

        blocks = {}
        for out, rows in self._rows.items():
            if not rows:
                continue
            spec = self.specs[out]
            head = {"contract": spec.name, "layout": [[f.name, f.size] for f in spec.fields]}
            config = self.output_configs.get(out, self.config_json)
            if self._log_first[out] and config is not None:
                head["config"] = config
            self._log_first[out] = False
            blocks[out] = (head, rows)
        values, md = pack_log(blocks, self.batches_sent)
        for rows in self._rows.values():
            rows.clear()
        self._batch_seq0 = None
        self.node.send_output(LOG_OUTPUT, pa.array(values, type=pa.float64()), md)
        self.batches_sent += 1
        return True


def split_rows(value, metadata: Mapping[str, Any]) -> list[tuple[int, np.ndarray, dict]]:
    """The per-seq messages of a :meth:`Sender.send_rows` message: [(seq, values, metadata)].

    Raises:
        ContractError: ``rows`` / ``row_t`` / ``row_finished`` inconsistent with the values.
    """
    n = int(metadata["rows"])
    vec = value.to_numpy(zero_copy_only=False) if hasattr(value, "to_numpy") else np.asarray(value)
    row_t, row_fin = list(metadata.get("row_t") or []), list(metadata.get("row_finished") or [])
    if n <= 0 or vec.size % n or len(row_t) != n or len(row_fin) != n:
        raise ContractError(f"message of {vec.size} values with rows={n}, {len(row_t)} row_t, {len(row_fin)} row_finished")
    size = vec.size // n
    seq0 = int(metadata["seq"])
    extra = {k: v for k, v in metadata.items() if k not in ("seq", "t", "finished", "rows", "row_t", "row_finished")}
    return [(seq0 + j, vec[j * size:(j + 1) * size], {**extra, "seq": seq0 + j, "t": float(row_t[j]),
                                                      "finished": bool(row_fin[j])}) for j in range(n)]


def flush_senders() -> bool:
    """Flush the log of every :class:`Sender` of this process; True if anything was sent."""
    sent = False
    for s in _SENDERS:
        try:
            sent = s.flush() or sent
        except Exception as exc:  # noqa: BLE001 - at the end of a run: report, keep flushing the others
            log.warning("log of %s not sent: %s", sorted(s.specs), exc)
    return sent


def declared_outputs(node) -> set[str] | None:
    """Output ids declared by this node's dataflow entry (``node.node_config()``), None if unknown."""
    try:
        cfg = node.node_config()
    except Exception:  # noqa: BLE001 - older dora or a test double
        return None
    outs = cfg.get("outputs") if isinstance(cfg, dict) else None
    return {str(o) for o in outs} if isinstance(outs, (list, tuple, set)) else None


def _plain(obj):
    if dataclasses.is_dataclass(obj):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (np.floating, np.integer)):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    return obj


#: How long [s] after the last outputs :func:`drain_after_finish` re-sends the messages that said ``finished``
#: (:meth:`Sender.repeat_finished`): apart from the burst of the run's last messages, which a dropping queue loses
#: together (a 10-deep queue at 500 Hz empties in 20 ms), and well inside the drivers' 0.1 s command watchdog.
REPEAT_FINISHED_AFTER_S = 0.03


def drain_after_finish(node, grace_s: float = 0.5) -> None:
    """Send the pending logs (:func:`flush_senders`), then stay alive for ``grace_s`` (reading events
    while the event stream lasts) so that the last outputs are delivered before exit; after
    :data:`REPEAT_FINISHED_AFTER_S` (at most half the grace) the messages that said ``finished`` go once more where
    a queue may have dropped them (:meth:`Sender.repeat_finished`).

    The whole grace is always waited: dora 1.1 can drop the last outputs of a process that exits right
    after sending them, and a node whose inputs have all closed (a batch node such as the PRIME
    estimator, after its replay ended) has an event stream that is already over, so reading it returns
    at once (the estimator lost its ``forces`` stream that way on a loaded CI machine).
    """
    flush_senders()
    start = time.monotonic()
    if _linger(node, start + min(REPEAT_FINISHED_AFTER_S, 0.5 * grace_s)):
        _repeat_finished()
        _linger(node, start + grace_s)
    else:  # the event stream is over: nothing more to read, the outputs may still be in flight
        _repeat_finished()
        time.sleep(max(0.0, start + grace_s - time.monotonic()))


def _linger(node, until: float) -> bool:
    """Read (and drop) the node's events until ``until`` (time.monotonic()); False when its event stream ended
    first (then it sleeps until ``until``)."""
    while (left := until - time.monotonic()) > 0:
        if node.next(timeout=max(0.01, left)) is None:
            time.sleep(max(0.0, until - time.monotonic()))
            return False
    return True


def _repeat_finished() -> None:
    for s in _SENDERS:
        try:
            s.repeat_finished()
        except Exception as exc:  # noqa: BLE001 - at the end of a run: report, keep the others
            log.warning("end of run of %s not re-sent: %s", sorted(s.specs), exc)


def declared_inputs(node, default_id: str) -> dict[str, str]:
    """Input id -> source (``node/output``) of this node in the running dataflow.

    Read from the node's own run configuration (``node.node_config()``; dora 1.1 does not set
    ``DORA_NODE_ID``), else from the dataflow descriptor's entry with id ``default_id``. Used by
    nodes with optional inputs and by the recorder. Returns an empty mapping when neither is
    available (the node then assumes its minimal wiring).
    """
    inputs = None
    try:
        cfg = node.node_config()
        inputs = cfg.get("inputs") if isinstance(cfg, dict) else None
    except Exception:  # noqa: BLE001 - older dora: fall back to the descriptor
        inputs = None
    if inputs is None:
        try:
            desc = node.dataflow_descriptor()
        except Exception:  # noqa: BLE001 - no descriptor: assume the minimal graph
            return {}
        for n in desc.get("nodes", []) if isinstance(desc, dict) else []:
            if n.get("id") == default_id:
                inputs = n.get("inputs")
                break
    return {k: (v if isinstance(v, str) else (v or {}).get("source", "")) for k, v in (inputs or {}).items()}


def lockstep_for(node, kind: str, specs: Mapping[str, PortSpec], *, offsets: Mapping[str, int] | None = None,
                 optional=None, only=None, **kw) -> Lockstep:
    """A :class:`Lockstep` over the inputs that node ``kind`` declares (:func:`contactflow.contracts.ports.lockstep_inputs`).

    Args:
        node: the dora Node.
        kind: node kind in :data:`contactflow.contracts.ports.NODES`.
        specs: contract name -> PortSpec (``port_specs(robot)``).
        offsets: input -> tick offset (default 0).
        optional: the optional inputs to read; None: those wired in this node's dataflow entry
            (:func:`declared_inputs`).
        only: restrict to these inputs.
        **kw: the other :class:`Lockstep` arguments (``skip_missing``, ``dt``, ``heartbeat``...).

    Raises:
        ContractError: a port the node's declaration lacks.
    """
    from contactflow.contracts.ports import MESSAGE, lockstep_inputs, node_ports

    if optional is None:
        decl = node_ports(kind)
        opt = [p for p in decl.optional_inputs() if decl.inputs[p].kind == MESSAGE]
        wired = declared_inputs(node, kind) if opt else {}
        optional = [p for p in opt if p in wired]
    return Lockstep(node, lockstep_inputs(kind, specs, offsets=offsets, optional=optional, only=only),
                    node_kind=kind, **kw)


def sender_for(node, kind: str, specs: Mapping[str, PortSpec], config: Any = None, *, optional=(), **kw) -> Sender:
    """A :class:`Sender` of the outputs that node ``kind`` declares (:func:`contactflow.contracts.ports.sender_outputs`):
    the required ones plus the optional ones named in ``optional``.

    Raises:
        ContractError: a port the node's declaration lacks.
    """
    from contactflow.contracts.ports import sender_outputs

    return Sender(node, sender_outputs(kind, specs, optional=optional), config, node_kind=kind, **kw)


def stream_sender(node, kind: str, outputs: Mapping[str, PortSpec], **kw) -> Sender:
    """A :class:`Sender` of a node whose outputs are named by its arguments, not by the port table
    (``stream_outputs``: the replay), each output with the PortSpec of the stream it sends.

    Raises:
        ContractError: node ``kind`` declares its outputs (build its Sender with :func:`sender_for`).
    """
    from contactflow.contracts.ports import node_ports

    if not node_ports(kind).stream_outputs:
        raise ContractError(f"node {kind!r}: declares its outputs in the port table: sender_for, not stream_sender")
    return Sender(node, outputs, **kw)


def freeze_heap() -> bool:
    """Move every object alive now into the cyclic garbage collector's permanent generation
    (``gc.freeze()``, after a collection): a node calls it once its models and stages are built
    (:func:`connect`, and the first tick of a :class:`Lockstep`), so the collector's passes during
    the loop scan only the objects the loop makes, not the tens of thousands of the imports, the
    models and the stages. Without it, each full collection (Python starts one when the objects
    that survived the younger generations since the last one exceed a quarter of the long-lived
    ones) traverses all of them inside some tick: 38-67 ms for the ~36,000 objects of a SEIKO
    stage's process (measured 2026-12-02 on the 2-core machine under load; 0.002 ms after the
    freeze), i.e. 20-30 periods of a 500 Hz loop (docs/benchmarks.md). Objects are still freed by
    reference counting; only their traversal by the cycle collector is skipped.
    ``CONTACTFLOW_GC_FREEZE=0`` turns it off (a benchmark's before / after). Returns whether it froze."""
    import gc
    import os

    global _FROZE
    if os.environ.get("CONTACTFLOW_GC_FREEZE", "1").strip() == "0":
        return False
    gc.collect()
    gc.freeze()
    _FROZE = True
    return True


_FROZE = False  # freeze_heap ran in this process (a dora node: connect())


def connect():
    """Create the dora ``Node``; a dataflow aborted during start-up becomes an UpstreamError.
    The objects built so far are frozen out of the garbage collector's passes (:func:`freeze_heap`)."""
    from dora import Node

    try:
        node = Node()
    except RuntimeError as exc:
        msg = str(exc)
        if "exited before initializing dora" in msg:
            line = next((ln.strip() for ln in msg.splitlines() if "exited before initializing" in ln), msg)
            raise UpstreamError(f"dataflow start aborted: {line}") from None
        raise
    log_through_dora(node)
    _apply_daemon_cpu_role()
    freeze_heap()
    return node


class _EarlyRecords(logging.Handler):
    """Keeps the records of level INFO and above logged before :func:`connect` (the node builds its
    stages first: a SEIKO node building the compiled kernel, a missing kernel's warning), at most
    ``limit``, so that :func:`log_through_dora` can send them through dora's log as well: ``dora run
    --log-level info`` hides the raw stderr they went to."""

    def __init__(self, limit: int = 100):
        super().__init__(level=logging.INFO)
        self.limit, self.records, self.dropped = limit, [], 0

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.records) < self.limit:
            self.records.append(record)
        else:
            self.dropped += 1


class _DoraLogHandler(logging.Handler):
    """Python logging records of one thread -> dora's log at their level (``node.log_warn``...)."""

    def __init__(self, node, thread: int):
        super().__init__()
        self.node, self.thread = node, thread
        self.addFilter(lambda record: record.thread == self.thread)
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            n, lv = self.node, record.levelno
            send = (n.log_error if lv >= logging.ERROR else n.log_warn if lv >= logging.WARNING
                    else n.log_info if lv >= logging.INFO else n.log_debug)
            send(self.format(record))
        except Exception:  # noqa: BLE001 - logging must not break the node: report on stderr
            self.handleError(record)


def log_through_dora(node) -> None:
    """Send the node's Python ``logging`` records (from the thread that made ``node``) through dora's log.

    ``node_main`` logs to stderr, the node's raw output, which dora shows at its lowest level
    (``stdout``): ``dora run --log-level info`` hid every warning of the nodes (a refused request, a
    failed QP, the recorder's missing messages). After this, the records of the thread that created
    ``node`` go to ``node.log_<level>`` (shown at their level) instead of stderr; records of other
    threads (the dora node object is used from one thread) stay on stderr. Those of level INFO and
    above logged before (kept by :func:`node_main`'s :class:`_EarlyRecords`) are sent through dora's
    log as well, marked ``(before connecting)``.
    Without dora node logging (an older dora) nothing changes.
    """
    import threading

    if not all(hasattr(node, f) for f in ("log_error", "log_warn", "log_info", "log_debug")):
        return
    root = logging.getLogger()
    if any(isinstance(h, _DoraLogHandler) for h in root.handlers):
        return
    thread = threading.get_ident()
    early = [h for h in root.handlers if isinstance(h, _EarlyRecords)]
    for h in early:
        root.removeHandler(h)
    for h in root.handlers:
        h.addFilter(lambda record: record.thread != thread)
    dora_handler = _DoraLogHandler(node, thread)
    root.addHandler(dora_handler)
    for h in early:  # the records of the start-up, once more at their level (they went to stderr first)
        for record in h.records:
            record.msg, record.args = f"(before connecting) {record.getMessage()}", None
            record.thread = thread
            dora_handler.handle(record)
        if h.dropped:
            dora_handler.handle(logging.LogRecord("contactflow.node", logging.WARNING, __file__, 0,
                                                  f"{h.dropped} more start-up log records only on stderr", None, None))


def log_info(node, line: str) -> None:
    """Print ``line`` through dora's log at level INFO (``node.log_info``).

    A node's ``print`` is its raw stdout, dora's lowest log level: ``dora run --log-level info`` hides
    it. Lines a user should see in such a run (the scenario being played, the run summary) go
    through here; without dora node logging (an older dora) they fall back to stdout.
    """
    try:
        node.log_info(line)
    except Exception:  # noqa: BLE001 - an older dora without node logging: plain stdout
        print(line, flush=True)


#: Default of the real-time nodes' ``--input-stale-s`` [s] (:func:`add_input_stale_argument`).
INPUT_STALE_S_DEFAULT = 5.0


def input_stale_help(inputs: str) -> str:
    """The help text of ``--input-stale-s`` for a node watching ``inputs`` (also docs/nodes.md's)."""
    return (f"with --realtime: stop (exit 3, naming the input and its source) when {inputs} brings no new "
            "message for this long [s] of wall time while the clock ticks: an upstream node that hangs; "
            "the robot driver then holds its last safe command (0: no limit; on a loaded 2-core machine "
            "the real-time planning stages were measured to pause for up to 2.2 s without hanging)")


def add_input_stale_argument(p: argparse.ArgumentParser, inputs: str) -> None:
    """Add ``--input-stale-s`` (the Lockstep's ``stale_s`` in real time) to a node's parser; ``inputs``
    names the inputs it watches, for the help text. Read it back with :func:`input_stale_s`."""
    p.add_argument("--input-stale-s", type=float, default=INPUT_STALE_S_DEFAULT, help=input_stale_help(inputs))


def input_stale_s(args: argparse.Namespace) -> float | None:
    """The Lockstep ``stale_s`` of a node's arguments: ``--input-stale-s`` in real time, else None."""
    return float(args.input_stale_s) if args.realtime and args.input_stale_s > 0 else None


class ArgsParsed(BaseException):
    """Raised by :meth:`NodeArgumentParser.parse_args` in check mode (:func:`check_node_args`): the node's
    arguments parsed, and the node goes no further (a BaseException: no ``except Exception`` of the node stops it)."""


def upstream_failure(value) -> str:
    """One line for dora's ``NODE_FAILED`` event value (``{'source_node_id': ..., 'error': "exited with code 2 with
    stderr output: ..."}``, as a dict, a one-row Arrow array or text): the failed node, how it ended, and its own
    one-line reason when it is a contactflow node (``[contactflow] node 'X' failed: ...``); the whole stderr is
    that node's own output, printed once by dora."""
    try:
        value = value.to_pylist()
    except AttributeError:
        pass
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if not isinstance(value, dict):
        return f"upstream node failed: {' '.join(str(value).split())[:300]}"
    source, error = value.get("source_node_id", "?"), str(value.get("error", ""))
    how = error.split(" with stderr output", 1)[0].strip().splitlines()[0] if error.strip() else "failed"
    reason = next((line.split("failed: ", 1)[1].strip() for line in error.splitlines()
                   if line.startswith("[contactflow] node ") and "failed: " in line), None)
    return f"upstream node {source!r} {how}" + (f": {reason}" if reason else "")


class NodeArgumentParser(OnceArgumentParser):
    """A node's argument parser (:func:`base_parser`): argparse's, with a check mode for
    :func:`check_node_args`, in which ``parse_args`` raises :class:`ArgsParsed` once the arguments parsed
    (the node is not started) and a bad argument raises ``ConfigError`` with argparse's message instead of
    printing the usage and exiting (``-h`` / ``--help`` too: a run's arguments that would print the help).

    An option is given in full (no abbreviation, ``allow_abbrev=False``): a graph's ``--scenario-from`` would read
    as ``--scenario-from-recording`` until a node gains a second option of that prefix, and ``contactflow check``
    reads a node's options by their full names; an abbreviation is refused with the full option suggested."""

    #: set only by :func:`check_node_args`, for the duration of one check (one thread)
    check_mode = False

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_args(self, args=None, namespace=None):
        ns = super().parse_args(args, namespace)
        if NodeArgumentParser.check_mode:
            raise ArgsParsed()
        return ns

    def error(self, message):
        if NodeArgumentParser.check_mode:
            from contactflow.errors import ConfigError

            raise ConfigError(self.suggested(message))
        super().error(message)

    def exit(self, status=0, message=None):
        if NodeArgumentParser.check_mode:  # --help (or --version): the node would print and exit, not run
            from contactflow.errors import ConfigError

            raise ConfigError("-h / --help: the node would print its help and exit instead of running")
        super().exit(status, message)

    def _print_message(self, message, file=None):
        if not NodeArgumentParser.check_mode:
            super()._print_message(message, file)


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type=`` for a whole number of ticks ``>= minimum`` (``--lag``): anything else is refused at
    parsing, by the node at its start and by ``contactflow check`` (:func:`check_node_args`), with the value."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value

    parse.__name__ = f"int >= {minimum}"
    return parse


def is_node_kind(kind: str) -> bool:
    """Whether ``kind`` is a node of this package (a module ``contactflow.nodes.<kind>``, run as ``contactflow-<kind>``)."""
    return bool(kind) and not kind.startswith("_") and (Path(__file__).parent / f"{kind}.py").is_file()


def check_node_args(kind: str, argv: list[str], cwd: str | Path | None = None) -> str | None:
    """Parse ``argv`` with node ``kind``'s own argument parser, as ``contactflow-<kind> ARGV`` would at its start,
    without starting the node (``contactflow check``: a dataflow's ``args:`` checked before ``dora run``).

    The node's ``main`` runs up to its ``parse_args`` (its imports and parser only: every node builds its parser
    first), in this process, in ``cwd`` (the dataflow's folder, where dora starts it); ``sys.argv``, the working
    folder and the robot search path (``--robot-path``) are restored afterwards. What argparse checks is checked
    (flags, ``type=`` conversions, ``choices``, required arguments); values the node interprets after parsing
    (a payload, a file's content) are not.

    Args:
        kind: the node kind (the module ``contactflow.nodes.<kind>``).
        argv: the node's arguments, split as a shell would (``shlex.split`` of the ``args:`` string).
        cwd: the folder to parse them in (None: the current one).

    Returns:
        None when they parse, else argparse's message (``argument --lag: invalid int value: 'x'``,
        ``unrecognized arguments: --lags 2``, ``the following arguments are required: --spec``).

    Raises:
        ImportError: the node needs a package that is not installed (``ModuleNotFoundError``: an extra) or
            that does not load.
        ValueError: ``kind`` is not a node of this package (:func:`is_node_kind`), or its ``main`` returned
            without parsing.
    """
    import contextlib
    import importlib
    import os

    from contactflow.errors import ConfigError
    from contactflow.paths import robot_path_scope

    if not is_node_kind(kind):
        raise ValueError(f"no contactflow node {kind!r}")
    saved_argv = sys.argv
    sys.argv = [f"contactflow-{kind.replace('_', '-')}", *argv]
    NodeArgumentParser.check_mode = True
    try:
        with robot_path_scope(), contextlib.chdir(cwd if cwd is not None else os.getcwd()):
            importlib.import_module(f"contactflow.nodes.{kind}").main()
    except ArgsParsed:
        return None
    except ConfigError as exc:
        return str(exc)
    finally:
        NodeArgumentParser.check_mode = False
        sys.argv = saved_argv
    raise ValueError(f"node {kind!r}: its main returned without parsing its arguments")


def base_parser(description: str, kind: str | None = None) -> argparse.ArgumentParser:
    """The arguments every node takes (``--robot``, ``--robot-path``, ``--config``); ``kind``: the node
    kind whose declared default robot ``--robot`` takes (``contracts/ports.py``; None: ``DEFAULT_ROBOT``).
    A :class:`NodeArgumentParser` (:func:`check_node_args` parses a node's arguments without starting it)."""
    p = NodeArgumentParser(description=description)
    from contactflow.contracts.ports import DEFAULT_ROBOT, NODES
    from contactflow.paths import ROBOT_PATH_HELP, OneFileAction, RobotPathAction

    robot = NODES[kind].default_robot if kind is not None else DEFAULT_ROBOT
    p.add_argument("--robot", default=robot, help="robot name (robot search path), robot folder or robot YAML file "
                   f"(default: {robot if robot is not None else 'the robot the --spec file names'})")
    p.add_argument("--robot-path", action=RobotPathAction, metavar="DIR", default=None, help=ROBOT_PATH_HELP)
    p.add_argument("--config", default=None, action=OneFileAction, help="YAML file with this node's configuration overrides")
    return p


def load_node_config(cls, path: str | None, section: str | None = None, *, required: bool = True, node: str | None = None):
    """Load a node config dataclass from an optional YAML file.

    The file is a mapping of node sections (``seiko_controller: {...}``, ``input_filter: {...}``),
    so that one file can configure a whole graph. The node's own section is required (unless
    ``required`` is False: then a missing section means the defaults), and top-level keys that
    name no known node are refused (a misspelled section would otherwise silently leave the
    defaults in place): the message names the sections ``node`` reads (default: the running node,
    from its script or executable name; ``contactflow config show`` lists them).

    Raises:
        ConfigError: unreadable file, missing section, unknown section or a bad key inside the
            section (naming the file, the section and the key).
    """
    from contactflow.config import did_you_mean, load_config, read_yaml
    from contactflow.errors import ConfigError
    from contactflow.paths import resolve_data_path
    from contactflow.contracts.ports import NODES

    if not path:
        return load_config(cls, None, source=cls.__name__)
    data = read_yaml(resolve_data_path(path))  # robots/<robot>/... names the shipped data from any folder
    if section is None:
        return load_config(cls, data, source=str(path))
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of node sections (e.g. '{section}: {{...}}')")
    known = set(NODES) | {section}
    unknown = sorted(map(str, set(data) - known))  # str: a YAML key may be a number
    if unknown:
        from contactflow.cli.config import NODE_CONFIGS, config_sections
        from contactflow.paths import node_kind

        named, sections = ", ".join(map(repr, unknown)), sorted(set(config_sections()) | {section})
        reads = [s.section for s in NODE_CONFIGS.get(node or node_kind(sys.argv[0] if sys.argv else ""), ()) if s.section]
        reads = reads if section in reads else [section]  # another caller (a script, a test): the section asked for
        raise ConfigError(f"{path}: unknown section(s) {named}{did_you_mean(unknown, sections)}; this node reads "
                          f"{', '.join(map(repr, reads))}, and one file may hold the sections of other nodes: "
                          f"{', '.join(sections)}")
    if section not in data and not required:
        return load_config(cls, None, source=f"{path}:{section}")
    if section not in data:
        raise ConfigError(f"{path}: no '{section}' section for this node (sections found: {sorted(map(str, data))})")
    return load_config(cls, data[section], source=f"{path}:{section}")


def apply_scheduling(name: str, env: Mapping[str, str] | None = None) -> str:
    """Apply the CPU scheduling that the node's environment asks for (set per node in a dataflow's ``env:``).

    ``CONTACTFLOW_RT_PRIORITY=N`` (1-99): the POSIX real-time policy SCHED_FIFO at priority N, for the
    nodes of a real-time control loop (the robot driver and the controller of
    ``dataflows/seiko_talos_realtime.yml``), as on a robot computer: they run whenever they are ready,
    before every normal process. Needs CAP_SYS_NICE (root); otherwise a warning and the normal policy.
    ``CONTACTFLOW_NICE=N``: ``os.nice(N)`` (N > 0 lowers the node's priority: the stages a real-time
    loop may sample at a lower rate). ``CONTACTFLOW_RT_DAEMON=N``: SCHED_FIFO N for every thread of
    the node's parent process, the dora daemon that spawned it (``dora run``): a send of 4 KB or more
    (shared memory, e.g. a batched log) waits on the daemon's control channel, so a daemon starved
    behind the real-time nodes stalled them for up to 0.65 s (priority inversion; ``dora run --rt``
    promotes the daemon's main thread only). ``CONTACTFLOW_CPU_ROLE=control|support``: the node's CPU
    affinity (:func:`cpus_for_role`: ``control`` the first CPU the process may use, ``support`` the
    others; with one CPU nothing is pinned), for every thread of the process, now and later; the lockstep
    SEIKO graphs put the nodes of the per-tick driver <-> Controller round trip on one CPU and the others
    on the rest (``contactflow.graphs.CONTROL_CPU_NODES``). ``CONTACTFLOW_DAEMON_CPU_ROLE=control|support``:
    the same for every thread of the dora daemon that spawned the node, applied once the node has connected
    (:func:`connect`: every node of the graph has started by then, and took its CPUs from the daemon's
    affinity before it changed), and only to ``dora run``'s daemon (a ``dora up`` daemon, which serves later
    dataflows, is left as it is). A malformed value is refused with a warning naming the variable.

    Returns:
        what was applied (``""``: nothing), for the log.
    """
    import os

    env = os.environ if env is None else env
    done = []
    global _DAEMON_CPU_ROLE
    allowed = None  # the CPUs allowed to the process before this node's own role changes them
    for var in ("CONTACTFLOW_CPU_ROLE", "CONTACTFLOW_DAEMON_CPU_ROLE"):
        role = str(env.get(var, "")).strip()
        if not role:
            continue
        try:
            allowed = os.sched_getaffinity(0) if allowed is None else allowed
            cpus = cpus_for_role(role, allowed)
            if cpus is None:
                log.info("node %s: %s=%s: one CPU allowed to this process, nothing to pin", name, var, role)
            elif var == "CONTACTFLOW_CPU_ROLE":
                n = _set_affinity(os.getpid(), cpus)
                done.append(f"CPU role {role}: CPUs {sorted(cpus)} ({n} threads)")
            else:
                _DAEMON_CPU_ROLE = (name, role, cpus)
        except (OSError, ValueError, AttributeError) as exc:
            log.warning("node %s: %s=%s not applied (%s); the CPUs are the scheduler's", name, var, role, exc)
    for var in ("CONTACTFLOW_NICE", "CONTACTFLOW_RT_PRIORITY", "CONTACTFLOW_RT_DAEMON"):
        raw = str(env.get(var, "")).strip()
        if not raw:
            continue
        try:
            val = int(raw)
        except ValueError:
            log.warning("%s=%r: expected an integer; ignored", var, raw)
            continue
        try:
            if var == "CONTACTFLOW_NICE":
                os.nice(val)
                done.append(f"nice {val:+d}")
            else:
                if not 1 <= val <= 99:
                    raise ValueError(f"expected a priority in 1..99, got {val}")
                if var == "CONTACTFLOW_RT_PRIORITY":
                    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(val))
                    done.append(f"SCHED_FIFO {val}")
                else:
                    done.append(_promote_daemon(val))
        except (OSError, ValueError, AttributeError) as exc:
            log.warning("node %s: %s=%s not applied (%s); normal scheduling", name, var, raw, exc)
    if done:
        log.info("node %s: %s", name, ", ".join(done))
    return ", ".join(done)


#: CPU roles of CONTACTFLOW_CPU_ROLE / CONTACTFLOW_DAEMON_CPU_ROLE (:func:`apply_scheduling`).
CPU_ROLES = ("control", "support")
_DAEMON_CPU_ROLE: tuple | None = None  # (node name, role, CPUs) to apply to the daemon once connected


def cpus_for_role(role: str, allowed) -> set[int] | None:
    """The CPUs of a node of CPU role ``role`` (:data:`CPU_ROLES`) among the CPUs ``allowed`` to the
    process: ``control`` the first (lowest id), ``support`` all the others; None when fewer than 2
    CPUs are allowed (nothing to separate: the node is not pinned).

    Raises:
        ValueError: an unknown role.
    """
    if role not in CPU_ROLES:
        raise ValueError(f"expected one of {CPU_ROLES}, got {role!r}")
    cpus = sorted(allowed)
    if len(cpus) < 2:
        return None
    return {cpus[0]} if role == "control" else set(cpus[1:])


def _each_thread(pid: int, fn) -> int:
    """``fn(tid)`` for every thread of process ``pid``, listed again until no new one appears (a thread
    started meanwhile by one not yet done); a thread that ended meanwhile is skipped. Returns the
    number of threads done."""
    import os

    done: set[int] = set()
    while True:
        tids = {int(t) for t in os.listdir(f"/proc/{pid}/task")} - done
        if not tids:
            return len(done)
        for tid in tids:
            try:
                fn(tid)
            except ProcessLookupError:
                pass
            done.add(tid)


def _set_affinity(pid: int, cpus: set[int]) -> int:
    """The affinity ``cpus`` for every thread of process ``pid`` (threads they start later inherit
    it); the number of threads set."""
    import os

    return _each_thread(pid, lambda tid: os.sched_setaffinity(tid, cpus))


def _daemon_pid(run_only: bool = False) -> int:
    """The parent process if it is the dora daemon (of ``dora run``, or with ``run_only`` False also
    ``dora up``'s daemon).

    Raises:
        ValueError: the parent is something else.
    """
    import os

    ppid = os.getppid()
    comm = Path(f"/proc/{ppid}/comm").read_text().strip()
    if comm != "dora":
        raise ValueError(f"the parent process {ppid} is {comm!r}, not the dora daemon")
    if run_only:
        if not _is_dora_run(Path(f"/proc/{ppid}/cmdline").read_bytes().split(b"\0")):
            raise ValueError(f"the dora daemon {ppid} is not `dora run`'s (a `dora up` daemon serves later "
                             "dataflows too: its CPUs are left as they are)")
    return ppid


def _is_dora_run(argv: list[bytes]) -> bool:
    """Whether a command line is ``dora run ...`` (or ``python .../dora run ...``, the dora-rs-cli wheel's
    script), not ``dora daemon ...`` (``dora up``) or another subcommand."""
    return next((argv[i + 1] for i, a in enumerate(argv[:-1]) if Path(a.decode(errors="replace")).name == "dora"),
                b"") == b"run"


def _apply_daemon_cpu_role() -> None:
    """CONTACTFLOW_DAEMON_CPU_ROLE, once the node has connected (:func:`apply_scheduling`); only for
    the daemon of ``dora run``, which ends with the dataflow."""
    global _DAEMON_CPU_ROLE
    if _DAEMON_CPU_ROLE is None:
        return
    name, role, cpus = _DAEMON_CPU_ROLE
    _DAEMON_CPU_ROLE = None
    try:
        pid = _daemon_pid(run_only=True)
        n = _set_affinity(pid, cpus)
        log.info("node %s: dora daemon %d (%d threads) CPU role %s: CPUs %s", name, pid, n, role, sorted(cpus))
    except (OSError, ValueError) as exc:
        log.info("node %s: CONTACTFLOW_DAEMON_CPU_ROLE=%s not applied: %s", name, role, exc)


def _promote_daemon(priority: int) -> str:
    """SCHED_FIFO ``priority`` for every thread of the parent process if it is the dora daemon."""
    import os

    ppid = _daemon_pid()
    n = _each_thread(ppid, lambda tid: os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(priority)))
    return f"dora daemon {ppid} ({n} threads) SCHED_FIFO {priority}"


def node_main(name: str, body: Callable[[], int | None]) -> None:
    """Run a node body; log and exit non-zero with a message naming the node on failure."""
    logging.basicConfig(level=logging.INFO, format=f"%(levelname)s {name}: %(message)s", stream=sys.stderr)
    logging.getLogger().addHandler(_EarlyRecords())
    import os
    import signal

    # a node stops when dora (or a terminal) sends SIGTERM, even if whoever started the dataflow had SIGTERM
    # ignored (an ignored disposition survives exec); nodes that handle it install their handler in the body
    if signal.getsignal(signal.SIGTERM) == signal.SIG_IGN:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    apply_scheduling(name)
    prof_dir = os.environ.get("CONTACTFLOW_PROFILE_DIR")
    if prof_dir:  # profile the node body with cProfile: <dir>/<node kind>-<pid>.prof (docs/benchmarks.md)
        import cProfile

        profiler = cProfile.Profile()
        inner = body

        def body():  # noqa: F811 - the profiled body
            profiler.enable()
            try:
                return inner()
            finally:
                profiler.disable()
                Path(prof_dir).mkdir(parents=True, exist_ok=True)
                # dora 1.1 sets no DORA_NODE_ID; the pid keeps two nodes of one kind apart
                profiler.dump_stats(str(Path(prof_dir) / f"{name}-{os.getpid()}.prof"))
    try:
        rc = body() or 0
    except UpstreamError as exc:
        print(f"[contactflow] node {name!r} stopping: {exc}", file=sys.stderr, flush=True)
        rc = 3
    except ContactflowError as exc:
        print(f"[contactflow] node {name!r} failed: {exc}", file=sys.stderr, flush=True)
        rc = 2
    except KeyboardInterrupt:
        rc = 130
    except ModuleNotFoundError as exc:
        from contactflow.cli import missing_extra_message

        hint = missing_extra_message(exc)
        if hint is None:
            print(f"[contactflow] node {name!r} crashed:\n{traceback.format_exc()}", file=sys.stderr, flush=True)
            rc = 1
        else:
            print(f"[contactflow] node {name!r} failed: {hint}", file=sys.stderr, flush=True)
            rc = 2
    except Exception:  # noqa: BLE001 - report any crash with the node's name, then fail
        print(f"[contactflow] node {name!r} crashed:\n{traceback.format_exc()}", file=sys.stderr, flush=True)
        rc = 1
    _flush_at_exit(name)
    _report_local_edges(name)
    sys.stdout.flush()
    sys.exit(rc)


def _report_local_edges(name: str) -> None:
    # how the messages of the local outputs and inputs went (nodes/_local.py), so a graph that meant to use a
    # local edge and did not (the receiver never bound its socket) says so
    from contactflow.nodes._local import report_lines

    for level, line in report_lines(name):
        log.log(level, "%s", line)


def _flush_at_exit(name: str) -> None:
    # the last partial log batch of a run that ended without drain_after_finish (an error, a node
    # without it): send it, then give dora a moment to deliver it (a send right before exit is lost)
    if not any(s.pending for s in _SENDERS):
        return
    try:
        if flush_senders():
            for s in _SENDERS:
                node = s.node
                break
            end = time.monotonic() + 0.5
            while time.monotonic() < end:
                ev = node.next(timeout=max(0.01, end - time.monotonic()))
                if ev is None or ev["type"] == "STOP":
                    break
    except Exception as exc:  # noqa: BLE001 - the node is ending anyway
        print(f"[contactflow] node {name!r}: last log batch not delivered: {exc}", file=sys.stderr, flush=True)
