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
import dataclasses
import json
import logging
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import pyarrow as pa

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # running from a source checkout without `pip install -e`
    sys.path.insert(0, str(REPO_ROOT))

from contactflow.errors import ContactflowError, ContractError  # noqa: E402
from contactflow.messages import PortSpec  # noqa: E402

log = logging.getLogger("contactflow.node")


class UpstreamError(ContactflowError):
    """An upstream node stopped, failed or went silent before the run ended."""


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
    """

    k: int
    t: float
    inputs: dict[str, dict[str, np.ndarray] | None]
    raw: dict[str, np.ndarray | None]
    finished: bool
    errors: dict[str, str]


class Lockstep:
    """Iterate ticks of a dora node whose inputs are matched by ``seq``.

    Args:
        node: the dora ``Node``.
        inputs: input id -> (PortSpec, offset). Every listed input is required for each tick.
        dt: tick period [s] used when no message gives the time.
        timeout_s: how long to wait for the inputs of a tick before raising UpstreamError.
        skip_missing: realtime mode: when messages were dropped, skip to the newest complete tick
            instead of waiting (loses determinism, keeps up with the robot's clock).
    """

    def __init__(self, node, inputs: Mapping[str, tuple[PortSpec, int]], *, dt: float = 0.002, timeout_s: float = 30.0,
                 skip_missing: bool = False):
        self.node = node
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

    def _ready(self) -> bool:
        for i, off in self.offsets.items():
            need = self.k - off
            if need >= 0 and need not in self.buffers[i]:
                return False
        return True

    def _missing(self) -> list[str]:
        return [f"{i} (seq {self.k - o})" for i, o in self.offsets.items() if self.k - o >= 0 and self.k - o not in self.buffers[i]]

    def _pop_tick(self) -> Tick:
        inputs, raw, errors = {}, {}, {}
        finished = False
        t = None
        for i, off in self.offsets.items():
            need = self.k - off
            buf = self.buffers[i]
            for s in [s for s in buf if s < need]:
                del buf[s]
            if need < 0:
                inputs[i] = raw[i] = None
                continue
            value, meta = buf.pop(need)
            finished = finished or bool(meta.get("finished", False))
            if off == 0 and "t" in meta:
                t = float(meta["t"])
            try:
                vec = value.to_numpy(zero_copy_only=False) if hasattr(value, "to_numpy") else np.asarray(value)
                inputs[i] = self.specs[i].unpack(vec)
                raw[i] = vec
            except (ContractError, pa.ArrowException, ValueError, TypeError) as exc:
                inputs[i] = raw[i] = None
                errors[i] = str(exc)
                log.warning("input %r tick %d: malformed message ignored, keeping the last safe values: %s", i, self.k, exc)
        tick = Tick(self.k, t if t is not None else self.k * self.dt, inputs, raw, finished, errors)
        self.finished_seen = self.finished_seen or finished
        self.k += 1
        return tick

    def _skip_ahead(self) -> None:
        # realtime mode: if every input already has a message newer than the one the current
        # tick needs, the needed ones were dropped: jump to the newest tick that is complete.
        newest = []
        for i, off in self.offsets.items():
            if not self.buffers[i]:
                return
            newest.append(max(self.buffers[i]) + off)
        k = min(newest)
        if k > self.k:
            log.warning("realtime: skipping ticks %d..%d (inputs missing)", self.k, k - 1)
            self.k = k

    def __iter__(self):
        waited_since = time.monotonic()
        while True:
            if self.skip_missing and not self._ready():
                self._skip_ahead()
            if self._ready():
                waited_since = time.monotonic()
                yield self._pop_tick()
                continue
            needed_closed = [i for i in self.closed if self.k - self.offsets[i] >= 0 and self.k - self.offsets[i] not in self.buffers[i]]
            if needed_closed or self.stopped:
                if self.finished_seen or self.stopped:
                    return
                raise UpstreamError(
                    f"input(s) {', '.join(needed_closed)} closed before the run ended "
                    f"(waiting for tick {self.k}): the upstream node stopped"
                )
            ev = self.node.next(timeout=1.0)
            if ev is None:
                if self.finished_seen:
                    return
                raise UpstreamError(f"event stream ended before the run ended (waiting for {', '.join(self._missing())})")
            typ = ev["type"]
            if typ == "INPUT":
                iid = ev["id"]
                if iid not in self.buffers:
                    continue
                seq = ev["metadata"].get("seq")
                if not isinstance(seq, int):
                    log.warning("input %r: message without integer 'seq' metadata ignored", iid)
                    continue
                self.buffers[iid][seq] = (ev["value"], ev["metadata"])
            elif typ == "INPUT_CLOSED":
                self.closed.add(ev["id"])
            elif typ == "STOP":
                self.stopped = True
            elif typ == "NODE_FAILED":
                val = ev.get("value")
                try:
                    val = val.to_pylist()
                except AttributeError:
                    pass
                raise UpstreamError(f"upstream node failed: {val}")
            elif typ == "ERROR":
                err = str(ev.get("error", ""))
                if "timed out" not in err.lower():
                    log.warning("dora error event: %s", err)
                if time.monotonic() - waited_since > self.timeout_s:
                    raise UpstreamError(
                        f"no input for {self.timeout_s:.0f} s while waiting for {', '.join(self._missing())}"
                    )


class Sender:
    """Sends a node's outputs with contactflow metadata.

    Args:
        node: the dora Node.
        outputs: output id -> PortSpec.
        config: the node's resolved configuration (attached to the first message of each output).
    """

    def __init__(self, node, outputs: Mapping[str, PortSpec], config: Any = None):
        self.node = node
        self.specs = dict(outputs)
        self.first = {k: True for k in outputs}
        self.config_json = json.dumps(_plain(config)) if config is not None else None

    def send(self, output: str, values: Mapping[str, Any] | np.ndarray, *, seq: int, t: float, finished: bool = False, **meta):
        spec = self.specs[output]
        vec = values if isinstance(values, np.ndarray) else spec.pack(values)
        md = {"seq": int(seq), "t": float(t), "finished": bool(finished), **meta}
        if self.first[output]:
            md["contract"] = spec.name
            md["layout"] = json.dumps([[f.name, f.size] for f in spec.fields])
            if self.config_json is not None:
                md["config"] = self.config_json
            self.first[output] = False
        self.node.send_output(output, pa.array(vec, type=pa.float64()), md)


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


def drain_after_finish(node, grace_s: float = 0.5) -> None:
    """Keep reading events for up to ``grace_s`` so that the last outputs are delivered before exit."""
    end = time.monotonic() + grace_s
    while time.monotonic() < end:
        ev = node.next(timeout=max(0.01, end - time.monotonic()))
        if ev is None or ev["type"] == "STOP":
            return


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


def connect():
    """Create the dora ``Node``; a dataflow aborted during start-up becomes an UpstreamError."""
    from dora import Node

    try:
        return Node()
    except RuntimeError as exc:
        msg = str(exc)
        if "exited before initializing dora" in msg:
            line = next((ln.strip() for ln in msg.splitlines() if "exited before initializing" in ln), msg)
            raise UpstreamError(f"dataflow start aborted: {line}") from None
        raise


def base_parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--robot", default="talos", help="robot name under robots/ or path to robot.yaml")
    p.add_argument("--config", default=None, help="YAML file with this node's configuration overrides")
    return p


def load_node_config(cls, path: str | None, section: str | None = None, *, required: bool = True):
    """Load a node config dataclass from an optional YAML file.

    The file is a mapping of node sections (``seiko_controller: {...}``, ``input_filter: {...}``),
    so that one file can configure a whole graph. The node's own section is required (unless
    ``required`` is False: then a missing section means the defaults), and top-level keys that
    name no known node are refused (a misspelled section would otherwise silently leave the
    defaults in place).

    Raises:
        ConfigError: unreadable file, missing section, unknown section or a bad key inside the
            section (naming the file, the section and the key).
    """
    from contactflow.config import load_config, read_yaml
    from contactflow.errors import ConfigError
    from contactflow.messages import NODE_PORTS

    if not path:
        return load_config(cls, None, source=cls.__name__)
    data = read_yaml(path)
    if section is None:
        return load_config(cls, data, source=str(path))
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of node sections (e.g. '{section}: {{...}}')")
    known = set(NODE_PORTS) | {section}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"{path}: unknown section(s) {unknown}; node sections are {sorted(known)}")
    if section not in data and not required:
        return load_config(cls, None, source=f"{path}:{section}")
    if section not in data:
        raise ConfigError(f"{path}: no '{section}' section for this node (sections found: {sorted(data)})")
    return load_config(cls, data[section], source=f"{path}:{section}")


def node_main(name: str, body: Callable[[], int | None]) -> None:
    """Run a node body; log and exit non-zero with a message naming the node on failure."""
    logging.basicConfig(level=logging.INFO, format=f"%(levelname)s {name}: %(message)s", stream=sys.stderr)
    import os

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
    sys.stdout.flush()
    sys.exit(rc)
