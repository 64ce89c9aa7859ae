"""Replay plan: which recorded messages a ``replay`` node re-publishes, in which order, on which port.

The replay node stands in for a node of a recorded run: it takes that node's id in the dataflow (so
the consumers' wiring is unchanged) and re-publishes the recorded outputs of a chosen subset of
streams. This module does the part that needs no dora: parse the stream mapping, load and check
the streams, and build the ordered list of ticks. The node (``nodes/replay.py``) sends them.

A tick ``k`` groups the messages of sequence number ``k`` of every replayed stream. The values are
the recorded float64 values bit for bit; the metadata is the recorded ``seq``, ``t`` and
``finished``, plus on the first message of each output the recorded ``contract``, ``layout`` and
``config``. The last tick of the plan always carries ``finished`` so that the consumers end the run.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

from contactflow.recording.store import Recording, RecordingError, Stream, read_recording

__all__ = ["StreamMapping", "ReplayTick", "ReplayPlan", "parse_stream_map", "plan_replay", "replayed_streams", "check_replay_inputs"]


@dataclasses.dataclass(frozen=True)
class StreamMapping:
    """One replayed stream.

    Attributes:
        stream: recorded stream name ``<node>.<output>``.
        output: the replay node's output id that re-publishes it.
    """

    stream: str
    output: str


@dataclasses.dataclass(frozen=True)
class ReplayTick:
    """The messages of one sequence number.

    Attributes:
        seq: sequence number (tick index).
        t: recorded time of the tick [s] (first stream that has it).
        messages: (output id, values (size,), metadata) in mapping order.
    """

    seq: int
    t: float
    messages: tuple[tuple[str, np.ndarray, dict], ...]


@dataclasses.dataclass
class ReplayPlan:
    """What a replay sends.

    Attributes:
        run_dir: the recording.
        mappings: the replayed streams.
        ticks: ordered ticks (strictly increasing ``seq``).
        warnings: things the user should know (gaps, recovered truncated streams).
    """

    run_dir: Path
    mappings: list[StreamMapping]
    ticks: list[ReplayTick]
    warnings: list[str]

    @property
    def outputs(self) -> list[str]:
        return [m.output for m in self.mappings]


def parse_stream_map(spec: str | Iterable[str]) -> list[StreamMapping]:
    """Parse ``node.output[=output_id],...``.

    Without ``=output_id`` the output id is the recorded output name (``mujoco_driver.sensors`` is
    re-published on ``sensors``), which is what keeps a consumer's wiring unchanged when the
    replay node takes the recorded node's id.

    Raises:
        RecordingError: an empty or malformed entry, or two streams on one output.
    """
    items = [s for part in ([spec] if isinstance(spec, str) else list(spec)) for s in part.split(",")]
    out: list[StreamMapping] = []
    for raw in items:
        item = raw.strip()
        if not item:
            continue
        name, _, output = item.partition("=")
        name, output = name.strip(), output.strip()
        if "." not in name or name.startswith(".") or name.endswith("."):
            raise RecordingError(f"--streams entry {item!r}: expected <node>.<output>[=<output id>]")
        output = output or name.rsplit(".", 1)[1]
        if any(m.output == output for m in out):
            raise RecordingError(f"--streams: two streams re-published on output {output!r}")
        out.append(StreamMapping(name, output))
    if not out:
        raise RecordingError("--streams: no stream given (expected <node>.<output>[=<output id>],...)")
    return out


def _first_metadata(st: Stream) -> dict:
    md = {}
    for key in ("contract", "layout", "config"):
        if key in st.metadata:
            md[key] = st.metadata[key]
    if "layout" not in md and st.layout:
        md["layout"] = json.dumps([list(x) for x in st.layout])
    md["replayed_from"] = st.metadata.get("source", st.name.replace(".", "/", 1))
    return md


def replayed_streams(streams: str | Sequence[StreamMapping], require_streams: str = "") -> list[str]:
    """The streams a replay node needs in its run: those of its ``--streams`` map (the text, or the mappings
    :func:`parse_stream_map` made of it) and its comma-separated ``--require-streams`` (the graph's other
    replayed inputs).

    Raises:
        RecordingError: a malformed ``--streams`` entry (:func:`parse_stream_map`; the text form only).
    """
    mappings = parse_stream_map(streams) if isinstance(streams, str) else streams
    return [m.stream for m in mappings] + [x for x in require_streams.split(",") if x.strip()]


def replayed_dataflows(dataflows: str) -> list[str] | None:
    """The dataflow files a replay node reproduces the runs of, from its comma-separated ``--dataflows``
    (:func:`~contactflow.recording.store.resolve_run`'s ``dataflows``); None (any run) when empty."""
    return [f.strip() for f in dataflows.split(",") if f.strip()] or None


def plan_replay(recording: str | Path | Recording, mappings: list[StreamMapping], *, start_seq: int = 0,
                end_seq: int | None = None, allow_truncated: bool = False,
                contract_sizes: Mapping[str, int] | None = None) -> ReplayPlan:
    """Load the streams and build the ordered ticks.

    Args:
        recording: run directory or an opened :class:`Recording`.
        mappings: from :func:`parse_stream_map`.
        start_seq: first sequence number replayed.
        end_seq: last sequence number replayed (inclusive; default: the end of the recording).
        allow_truncated: replay the complete prefix of a stream cut short by a crash instead of
            refusing it.
        contract_sizes: contract name -> values per message for the consumers' robot
            (``port_specs(robot)``); a stream recorded under one of these contracts with another
            size (a run of another robot) is refused.

    Returns:
        The plan; its last tick carries ``finished``.

    Raises:
        RecordingError: not a recording, a missing, foreign or (without ``allow_truncated``)
            truncated stream, duplicated sequence numbers, a stream of the wrong size for its
            contract (``contract_sizes``), or nothing to replay.
    """
    rec = recording if isinstance(recording, Recording) else read_recording(recording)
    warnings: list[str] = []
    streams: list[Stream] = []
    for m in mappings:
        st = rec.stream(m.stream)
        contract = st.metadata.get("contract")
        want = (contract_sizes or {}).get(contract) if contract else None
        if want is not None and st.values.shape[-1] != want:
            raise RecordingError(f"{rec.path}: stream {m.stream!r} has {st.values.shape[-1]} values per message, "
                                 f"but contract {contract!r} has {want} for this graph's robot (a run of another robot?)")
        if st.truncated:
            msg = (f"{rec.path / rec.manifest['streams'][m.stream]['file']}: truncated (the recorder was killed); "
                   f"{len(st)} complete messages recovered")
            if not allow_truncated:
                raise RecordingError(msg + "; pass --allow-truncated to replay them")
            warnings.append(msg)
        if len(st) and np.any(np.diff(st.seq) <= 0):
            raise RecordingError(f"{rec.path}: stream {m.stream!r} has sequence numbers out of order or repeated")
        streams.append(st)
    by_seq: dict[int, list] = {}
    for m, st in zip(mappings, streams):
        sel = st.seq >= start_seq
        if end_seq is not None:
            sel &= st.seq <= end_seq
        idx = np.flatnonzero(sel)
        if len(idx) and len(idx) != int(st.seq[idx[-1]] - st.seq[idx[0]]) + 1:
            warnings.append(f"stream {m.stream!r}: {int(st.seq[idx[-1]] - st.seq[idx[0]]) + 1 - len(idx)} sequence numbers missing")
        for i in idx:
            by_seq.setdefault(int(st.seq[i]), []).append((m.output, st, int(i)))
    if not by_seq:
        raise RecordingError(f"{rec.path}: nothing to replay in seq [{start_seq}, {end_seq if end_seq is not None else 'end'}] "
                             f"of {[m.stream for m in mappings]}")
    first_sent: set[str] = set()
    ticks: list[ReplayTick] = []
    seqs = sorted(by_seq)
    for seq in seqs:
        msgs = []
        t = None
        for output, st, i in by_seq[seq]:
            md = {"seq": int(seq), "t": float(st.t[i]), "finished": bool(st.finished[i]) or seq == seqs[-1]}
            if output not in first_sent:
                md.update(_first_metadata(st))
                first_sent.add(output)
            if t is None:
                t = float(st.t[i])
            msgs.append((output, st.values[i], md))
        ticks.append(ReplayTick(seq, t, tuple(msgs)))
    return ReplayPlan(rec.path, list(mappings), ticks, warnings)


def check_replay_inputs(recording: str | Path | Recording, required: Iterable[str]) -> None:
    """Refuse a recording that lacks a stream a replay graph re-publishes.

    A replay graph reproduces a recorded run only if it feeds the live nodes every recorded input
    they consume (the SEIKO replay: the robot's sensors and the operator's commands, which carry the
    contact switches); one missing would be replaced by nothing or by something else, and the replay
    would end normally with different results. So it is refused before anything runs.

    Args:
        recording: run directory or an opened :class:`Recording`.
        required: stream names ``<node>.<output>`` the graph replays.

    Raises:
        RecordingError: one line naming the run, the missing streams and the ones it holds.
    """
    rec = recording if isinstance(recording, Recording) else read_recording(recording)
    names = set(rec.stream_names)
    missing = [s for s in dict.fromkeys(required) if s not in names]
    if missing:
        raise RecordingError(
            f"{rec.path}: cannot reproduce this run's inputs: the replay graph re-publishes "
            f"{', '.join(repr(s) for s in missing)}, which the recording does not hold "
            f"(it holds {', '.join(sorted(names)) or 'no stream'}); name a run recorded with them")
