"""Local edges: a lockstep edge between two nodes of one machine over a Unix datagram socket, beside dora.

dora 1.1 carries every message of a Python node through its daemon (a request and a reply on a
loopback TCP socket at the sender, the daemon's routing, another at the receiver): ~150 us of CPU
per round trip between two idle nodes, and on the 2-core machine ~0.3-0.4 ms of CPU per tick in
each node of the per-tick driver <-> Controller exchange of ``seiko_talos.yml`` (docs/benchmarks.md).
A *local* input takes its messages straight from the sending node's process instead: one
``sendto`` and one ``recv`` on a Unix datagram socket, the same values and metadata as the dora
message (``seq``, ``t``, ``finished``, the multi-tick ``rows`` of :meth:`Sender.send_rows`,
``contract`` / ``layout`` / ``config`` on the first). dora still launches and supervises both nodes,
the edge stays declared in the graph (so dora reports the sender's end to the receiver,
``INPUT_CLOSED``) and every other edge, the logs to the recorder included, goes through dora.

Declared by the receiving node of the graph, in its ``env``: ``CONTACTFLOW_LOCAL_INPUTS: sensors desired``
(input ids separated by spaces; ``contactflow.graphs`` sets it on the lockstep SEIKO graphs' per-tick
edges). The sender reads the dataflow descriptor: an output goes local when every node that reads it
declares that input local; otherwise, or when a local send fails (the receiver has not bound its
socket yet, runs on another machine, has ended, or did not read its socket for
:data:`LOCAL_SEND_TIMEOUT_S`; a message over :data:`MAX_LOCAL_BYTES`), the message goes through dora
as before, and the sender counts it. The receiver (:class:`contactflow.nodes._runtime.Lockstep`,
lockstep mode only) takes both and matches messages by ``seq`` as ever, so a run gives the same
recording either way (tests/test_dataflow.py). With several readers, a message that reached some
over their sockets and not the others goes to all through dora too: those get it twice, and the
``seq`` matching keeps one. Each side reports its counts when the node ends (nodes/_runtime.py
node_main). ``CONTACTFLOW_LOCAL_EDGES=0`` in the environment of ``dora run`` turns every local edge off.

The sockets are files in a folder of the user's own (``<tmp>/contactflow-<uid>``, mode 0700: no
other user can send to them), named by a hash of the dataflow id, the node id and the input id, and
removed when the receiver's Lockstep ends (a killed node's file, by the next node that binds, after
an hour). Ordering: a datagram socket keeps the order of one sender's messages; one that went
through dora may arrive after a later local one, which the ``seq`` matching makes harmless. A
receiver's socket queue is short (``net.unix.max_dgram_qlen``, 10 on Linux by default): a sender
whose receiver has not read it waits, up to :data:`LOCAL_SEND_TIMEOUT_S`, then uses dora; a
receiver in its loop reads every queued message into its buffers at each tick.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import select
import socket
import stat
import struct
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np

log = logging.getLogger("contactflow.node")

#: The receiving node's environment variable that lists its local inputs (input ids, space-separated).
LOCAL_INPUTS_ENV = "CONTACTFLOW_LOCAL_INPUTS"
#: ``0`` (or ``off``, ``false``, ``no``) turns every local edge off: every message through dora.
LOCAL_EDGES_ENV = "CONTACTFLOW_LOCAL_EDGES"
#: The largest local message [bytes] (within Linux's default socket buffer); a larger one goes through dora.
MAX_LOCAL_BYTES = 200_000
#: How long [s] a local send waits for room in the receiver's queue before the message goes through dora.
LOCAL_SEND_TIMEOUT_S = 1.0

#: Every LocalInbox and LocalOutbox of this process (the end-of-run report) and the socket paths bound here.
_INBOXES: list["LocalInbox"] = []
_OUTBOXES: list["LocalOutbox"] = []
_BOUND: set[str] = set()

_LEN = struct.Struct("<I")


def local_edges_enabled(env: Mapping[str, str] | None = None) -> bool:
    """False when ``$CONTACTFLOW_LOCAL_EDGES`` turns local edges off."""
    env = os.environ if env is None else env
    return str(env.get(LOCAL_EDGES_ENV, "")).strip().lower() not in ("0", "off", "false", "no")


def parse_local_inputs(value: Any) -> list[str]:
    """The input ids of a ``CONTACTFLOW_LOCAL_INPUTS`` value (separated by spaces or commas)."""
    return [s for s in re.split(r"[\s,]+", str(value or "")) if s]


def node_identity(env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(dataflow id, node id) of this dora node, from the ``DORA_NODE_CONFIG`` dora gives it (that of ``env``: another
    process's environment); ("", "") outside dora."""
    text = str((os.environ if env is None else env).get("DORA_NODE_CONFIG", ""))

    def field(key: str) -> str:
        m = re.search(rf"^{key}: *(\S+)$", text, re.M)
        return m.group(1).strip("'\"") if m else ""

    return field("dataflow_id"), field("node_id")


def socket_dir() -> Path | None:
    """The folder of this user's local-edge sockets (``<tmp>/contactflow-<uid>``, mode 0700), created if need
    be; None (and a warning) when it cannot be made or is not private (another owner, group/other access)."""
    d = Path(tempfile.gettempdir()) / f"contactflow-{os.getuid()}"
    try:
        d.mkdir(mode=0o700, exist_ok=True)
        st = d.lstat()
    except OSError as exc:
        log.warning("local edges off: %s: %s", d, exc)
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        log.warning("local edges off: %s is not a folder of this user's alone (mode %o, owner %d)", d,
                    stat.S_IMODE(st.st_mode), st.st_uid)
        return None
    return d


#: A socket file older than this [s] that no process has bound is removed when a node binds its own.
STALE_SOCKET_S = 3600.0


def prune_stale_sockets(folder: Path, older_than_s: float = STALE_SOCKET_S) -> int:
    """Remove the socket files of ``folder`` older than ``older_than_s`` that no process has bound (a node that
    was killed before its loop ended leaves its file; the names are never reused). Returns how many."""
    import time

    removed = 0
    now = time.time()
    for path in folder.glob("*.sock"):
        try:
            if now - path.lstat().st_mtime < older_than_s:
                continue
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            try:
                probe.connect(str(path))
                continue  # bound by a live process
            except ConnectionRefusedError:
                path.unlink()
                removed += 1
            finally:
                probe.close()
        except OSError:
            continue
    return removed


def address(dataflow_id: str, node_id: str, input_id: str, folder: Path) -> str:
    """The socket path of input ``input_id`` of node ``node_id`` in dataflow ``dataflow_id``."""
    key = hashlib.blake2s(f"{dataflow_id}/{node_id}/{input_id}".encode(), digest_size=12).hexdigest()
    return str(folder / f"{key}.sock")


def encode(vec: np.ndarray, metadata: Mapping[str, Any]) -> bytes:
    """One local message: the metadata's JSON length (uint32), the JSON, the float64 values.

    Raises:
        TypeError, ValueError: metadata that JSON cannot carry (the caller then uses dora)."""
    head = json.dumps(metadata, separators=(",", ":")).encode()
    return _LEN.pack(len(head)) + head + np.ascontiguousarray(vec, dtype=np.float64).tobytes()


def decode(data: bytes) -> tuple[np.ndarray, dict]:
    """(values, metadata) of an :func:`encode`'d message.

    Raises:
        ValueError: a truncated or malformed message."""
    if len(data) < _LEN.size:
        raise ValueError(f"local message of {len(data)} bytes")
    (n,) = _LEN.unpack_from(data)
    end = _LEN.size + n
    if end > len(data) or (len(data) - end) % 8:
        raise ValueError(f"local message of {len(data)} bytes with a {n}-byte header")
    md = json.loads(data[_LEN.size:end])
    if not isinstance(md, dict):
        raise ValueError("local message metadata is not a mapping")
    return np.frombuffer(data, dtype=np.float64, offset=end), md


def descriptor_nodes(node) -> list[dict]:
    """The node entries of the running dataflow's descriptor ([] when unavailable)."""
    try:
        desc = node.dataflow_descriptor()
    except Exception:  # noqa: BLE001 - a test double or an older dora: no local edges
        return []
    nodes = desc.get("nodes", []) if isinstance(desc, dict) else []
    return [n for n in nodes if isinstance(n, dict)]


def _input_edges(nodes: Iterable[dict]) -> Iterable[tuple[str, dict, str, Any]]:
    """(source ``node/output``, reader node entry, input id, the input's spec) per input of a dataflow descriptor's
    node entries that reads a node's output."""
    from contactflow.contracts.wiring import _source

    for n in nodes:
        for iid, spec in (n.get("inputs") or {}).items():
            src = _source(spec)
            if isinstance(src, str) and "/" in src:
                yield src, n, str(iid), spec


def output_readers(nodes: Iterable[dict]) -> dict[str, list[tuple[str, str, bool]]]:
    """Source (``node/output``) -> [(reader node id, input id, whether that node declares the input local)],
    from a dataflow descriptor's node entries (the one reading of the rule for the nodes and ``contactflow check``)."""
    readers: dict[str, list[tuple[str, str, bool]]] = {}
    for src, n, iid, _ in _input_edges(nodes):
        local = parse_local_inputs((n.get("env") or {}).get(LOCAL_INPUTS_ENV))
        readers.setdefault(src, []).append((str(n.get("id")), iid, iid in local))
    return readers


def local_targets(nodes: Iterable[dict], sender_id: str, outputs: Iterable[str]) -> dict[str, list[tuple[str, str]]]:
    """Output -> [(receiver node id, input id)] for each of ``outputs`` of node ``sender_id`` that goes
    local: every input that reads it (``sender_id/output`` in the descriptor) is declared local by its
    node's ``CONTACTFLOW_LOCAL_INPUTS``. Outputs read by nobody or by any non-local input are left out."""
    readers = output_readers(nodes)
    targets = {}
    for out in outputs:
        rs = readers.get(f"{sender_id}/{out}")
        if rs and all(is_local for _, _, is_local in rs):
            targets[out] = [(r, i) for r, i, _ in rs]
    return targets


def lossy_outputs(nodes: Iterable[dict], sender_id: str, outputs: Iterable[str]) -> set[str]:
    """The ``outputs`` of node ``sender_id`` that some input reads through a queue that may drop a message: any
    ``queue_policy`` but ``backpressure`` (dora 1.1's default ``drop_oldest``; its direct path drops silently under
    load, ../shared/reference/dora.md 6.2), from a dataflow descriptor's node entries."""
    wanted, lossy = set(outputs), set()
    for src, _, _, spec in _input_edges(nodes):
        node_id, _, out = src.partition("/")
        policy = spec.get("queue_policy") if isinstance(spec, dict) else None
        if node_id == sender_id and out in wanted and policy != "backpressure":
            lossy.add(out)
    return lossy


def report_lines(name: str) -> list[tuple[int, str]]:
    """(log level, line) per local output and per local input of this process: how their messages went (a
    receiver's dropped datagrams as a warning)."""
    lines = []
    for box in _OUTBOXES:
        for out in box.targets:
            lines.append((logging.INFO, f"node {name}: output {out} -> {', '.join(box.readers[out])}: "
                                        f"{box.sent[out]} message(s) over the local socket, {box.fallbacks[out]} through dora"))
    for box in _INBOXES:
        for i, (r, d, m) in box.counts().items():
            line = f"node {name}: local input {i}: {r} message(s) over the local socket, {d} through dora"
            lines.append((logging.WARNING, f"{line}, {m} malformed datagram(s) dropped") if m else (logging.INFO, line))
    return lines


class LocalInbox:
    """The receiving side: one bound socket per local input of this node.

    Args:
        input_ids: the node's lockstep inputs; those listed in ``$CONTACTFLOW_LOCAL_INPUTS`` get a socket.
        env: the environment (default ``os.environ``).
        realtime: a real-time node (Lockstep ``skip_missing``): no local input (a warning if some are listed).

    Raises:
        ConfigError: a listed input that is not among ``input_ids``, or one already bound in this process (two
            Locksteps reading it at once).

    Attributes:
        via_socket: input -> whether its newest message came over the socket (the node then waits there).
        received / via_dora / malformed: per input, messages taken over the socket, through dora, and
            datagrams that could not be read (their tick then never comes: the node's lockstep timeout
            names the input, and the count is in the error and the end-of-run report).
    """

    def __init__(self, input_ids: Iterable[str], env: Mapping[str, str] | None = None, *, realtime: bool = False):
        from contactflow.errors import ConfigError

        env = os.environ if env is None else env
        self.socks: dict[str, socket.socket] = {}
        self.paths: dict[str, str] = {}
        self.via_socket: dict[str, bool] = {}
        self.received: dict[str, int] = {}
        self.via_dora: dict[str, int] = {}
        self.malformed: dict[str, int] = {}
        self._buf = bytearray(MAX_LOCAL_BYTES + 1)
        wanted = parse_local_inputs(env.get(LOCAL_INPUTS_ENV))
        if not wanted:
            return
        if not local_edges_enabled(env):
            log.info("local edges off (%s=%s): input(s) %s through dora", LOCAL_EDGES_ENV, env.get(LOCAL_EDGES_ENV),
                     " ".join(wanted))
            return
        if realtime:
            log.warning("%s=%s ignored: a real-time node takes every input through dora", LOCAL_INPUTS_ENV,
                        env.get(LOCAL_INPUTS_ENV))
            return
        flow, me = node_identity(env)
        ids = set(input_ids)
        unknown = [i for i in wanted if i not in ids]
        if unknown:
            from contactflow.config import did_you_mean

            raise ConfigError(f"{LOCAL_INPUTS_ENV}={env.get(LOCAL_INPUTS_ENV)!r} of node {me or '?'!r}: "
                              f"{', '.join(map(repr, unknown))} not among its lockstep inputs {sorted(ids)}"
                              f"{did_you_mean(unknown, ids)}")
        folder = socket_dir() if flow and me else None
        if folder is None:
            return
        prune_stale_sockets(folder)
        for i in wanted:
            if i not in ids:
                continue
            path = address(flow, me, i, folder)
            if path in _BOUND:
                self.close()
                raise ConfigError(f"{LOCAL_INPUTS_ENV}: input {i!r} of node {me!r} is already read over its socket "
                                  "in this process (two lockstep loops on one local input at once)")
            try:
                os.unlink(path)  # a stale socket of this node's previous process (a restart)
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.warning("local input %r: %s not removed (%s); its messages come through dora", i, path, exc)
                continue
            s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            try:
                s.bind(path)
            except OSError as exc:
                s.close()
                log.warning("local input %r: socket not bound (%s); its messages come through dora", i, exc)
                continue
            s.setblocking(False)
            _BOUND.add(path)
            self.socks[i], self.paths[i] = s, path
            self.via_socket[i] = False
            self.received[i] = self.via_dora[i] = self.malformed[i] = 0
        if self.socks:
            _INBOXES.append(self)

    def _take(self, i: str, s: socket.socket, handle: Callable[[dict], None]) -> bool:
        try:
            n = s.recv_into(self._buf)
        except (BlockingIOError, InterruptedError):
            return False
        try:
            if n > MAX_LOCAL_BYTES:
                raise ValueError(f"over {MAX_LOCAL_BYTES} bytes")
            vec, md = decode(bytes(memoryview(self._buf)[:n]))
        except ValueError as exc:
            self.malformed[i] += 1
            log.warning("local input %r: malformed message ignored (%s)", i, exc)
            return True
        self.received[i] += 1
        handle({"type": "INPUT", "id": i, "value": vec, "metadata": md})
        return True

    def drain(self, handle: Callable[[dict], None]) -> None:
        """Hand every message already received to ``handle`` (a dora-like INPUT event)."""
        for i, s in self.socks.items():
            while self._take(i, s, handle):
                pass

    def wait(self, inputs: Iterable[str], timeout_s: float, handle: Callable[[dict], None]) -> bool:
        """Wait up to ``timeout_s`` for a message on any of ``inputs`` (local ones), then hand every
        message received to ``handle``. False on a timeout."""
        socks = [self.socks[i] for i in inputs if i in self.socks]
        if not socks:
            return False
        ready, _, _ = select.select(socks, [], [], timeout_s)
        if not ready:
            return False
        self.drain(handle)
        return True

    def came_over_socket(self, ev: Mapping[str, Any]) -> None:
        """Note that input ``ev["id"]``'s newest message came over its socket: its reader waits there."""
        self.via_socket[ev["id"]] = True

    def came_through_dora(self, ev: Mapping[str, Any]) -> None:
        """Note a dora event: a local input's message through dora (not a re-send) means its sender uses dora (now):
        its reader waits on dora for it (counted)."""
        if ev["type"] == "INPUT" and ev["id"] in self.via_socket and not ev["metadata"].get("repeat", False):
            self.via_socket[ev["id"]] = False
            self.via_dora[ev["id"]] += 1

    def counts(self) -> dict[str, tuple[int, int, int]]:
        """Input -> (messages over the socket, through dora, malformed datagrams)."""
        return {i: (self.received[i], self.via_dora[i], self.malformed[i]) for i in self.received}

    def note(self) -> str:
        """`` (local inputs: ...)`` for an error message, or "" without local inputs."""
        if not self.received:
            return ""
        parts = [f"{i}: {r} over the socket, {d} through dora" + (f", {m} MALFORMED (their ticks never came)" if m else "")
                 for i, (r, d, m) in self.counts().items()]
        return f" (local inputs: {'; '.join(parts)})"

    def close(self) -> None:
        """Close and remove the sockets (a sender then falls back to dora at once)."""
        for i, s in self.socks.items():
            s.close()
            path = self.paths.get(i)
            if path is not None:
                _BOUND.discard(path)
                try:
                    os.unlink(path)
                except OSError:
                    pass
        self.socks.clear()


class LocalOutbox:
    """The sending side: the outputs of this node that go local (:func:`local_targets`) and their sockets.

    Args:
        node: the dora Node (its dataflow descriptor says who reads what).
        outputs: the outputs this node sends through dora.
        env: the environment (default ``os.environ``).

    Attributes:
        targets: output -> the socket paths of its readers. readers: output -> ["node/input", ...].
        sent / fallbacks: per output, messages sent over the sockets and through dora.
    """

    def __init__(self, node, outputs: Iterable[str], env: Mapping[str, str] | None = None):
        env = os.environ if env is None else env
        self.targets: dict[str, list[str]] = {}
        self.readers: dict[str, list[str]] = {}
        self.sent: dict[str, int] = {}
        self.fallbacks: dict[str, int] = {}
        self.sock: socket.socket | None = None
        if not local_edges_enabled(env):
            return
        flow, me = node_identity(env)
        if not flow or not me:
            return
        local = local_targets(descriptor_nodes(node), me, outputs)
        folder = socket_dir() if local else None
        if folder is None:
            return
        for out, readers in local.items():
            self.targets[out] = [address(flow, r, i, folder) for r, i in readers]
            self.readers[out] = [f"{r}/{i}" for r, i in readers]
            self.sent[out] = self.fallbacks[out] = 0
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * MAX_LOCAL_BYTES)
        self.sock.settimeout(LOCAL_SEND_TIMEOUT_S)
        _OUTBOXES.append(self)

    def send(self, output: str, vec: np.ndarray, metadata: Mapping[str, Any]) -> bool:
        """Send a message of ``output`` to its local readers; False (nothing sent, or not to all of
        them: the caller sends it through dora, counted in ``fallbacks``) when the output is not local
        or a send failed."""
        dsts = self.targets.get(output)
        if not dsts:
            return False
        try:
            data = encode(vec, metadata)
        except (TypeError, ValueError):
            self.fallbacks[output] += 1
            return False
        if len(data) > MAX_LOCAL_BYTES:
            self.fallbacks[output] += 1
            return False
        try:
            for dst in dsts:
                self.sock.sendto(data, dst)
        except OSError:  # not bound yet (start-up), ended, on another machine, or not read for the timeout
            self.fallbacks[output] += 1
            return False
        self.sent[output] += 1
        return True
