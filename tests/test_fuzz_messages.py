"""Fuzzing (Hypothesis) of message decoding against every port contract, Talos and G1.

What a peer node sends is decoded by :meth:`PortSpec.decode` (every contract of
:func:`contactflow.contracts.messages.port_specs`) and, in a running node, by the runtime's
:class:`Lockstep` (values and metadata). Generated: messages of the right size (accepted, values
kept), wrong sizes, NaN / inf in a field, wrong numpy dtypes and shapes, other Arrow types (int,
float32, string, struct, list, union, dictionary, null), nulls, chunked arrays, non-arrays; and
event streams with garbage metadata (``seq``, ``t``, ``finished``, ``rows``). Outcome: the fields,
or a :class:`ContractError` naming the port; a Lockstep run ends or raises a ContactflowError.
Never another exception type, never a hang. More examples: ``CONTACTFLOW_FUZZ_EXAMPLES=2000``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from contactflow.contracts.messages import port_specs
from contactflow.errors import ContactflowError, ContractError
from contactflow.nodes._runtime import Lockstep
from contactflow.robot import load_robot
from fuzz_support import fuzz_settings, outcome, yaml_values

ROBOTS = ("talos", "g1")


@pytest.fixture(scope="module")
def specs():
    return {r: port_specs(load_robot(r)) for r in ROBOTS}


PORTS = [(r, p) for r in ROBOTS for p in ("sensors", "operator_command", "admittance_command", "effector_targets",
                                            "desired", "joint_command", "teleop_command", "external_wrench", "estop",
                                            "controller_state", "filtered_wrench", "flex_wrench_rate", "driver_timing")]


def test_the_fuzzed_ports_are_every_port_of_the_contracts(specs):
    for r in ROBOTS:
        assert sorted(p for rr, p in PORTS if rr == r) == sorted(specs[r])


_BAD_ARROW = [
    lambda n: pa.array(np.arange(n, dtype=np.int64)),
    lambda n: pa.array(np.ones(n, np.float32)),
    lambda n: pa.array(["1.0"] * n),
    lambda n: pa.array([{"x": 1.0}] * n),
    lambda n: pa.array([[1.0]] * n),
    lambda n: pa.array([None] * n),
    lambda n: pa.array([True] * n),
    lambda n: pa.array(["a"] * n).dictionary_encode(),
    lambda n: pa.UnionArray.from_sparse(pa.array([0] * n, pa.int8()), [pa.array(np.ones(n)), pa.array([1] * n)]),
    lambda n: pa.array([1.0] * (n - 1) + [None], pa.float64()) if n else pa.array([None], pa.float64()),
    lambda n: pa.array([1] * (n - 1) + [None], pa.int64()) if n else pa.array([None], pa.int64()),
]


@st.composite
def messages(draw, size: int):
    """(value, expected): ``expected`` is the flat vector a valid message decodes to, else None."""
    kind = draw(st.sampled_from(["valid", "chunked", "size", "nonfinite", "dtype", "shape", "arrow_type", "object"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="seed"))  # cheap to draw and to shrink
    vec = rng.uniform(-1e3, 1e3, size) * 10.0 ** rng.integers(-6, 6, size)
    if kind == "valid":
        return draw(st.sampled_from([pa.array(vec), vec])), vec
    if kind == "chunked":
        cut = draw(st.integers(0, size))
        return pa.chunked_array([pa.array(vec[:cut], pa.float64()), pa.array(vec[cut:], pa.float64())]), vec
    if kind == "size":
        n = draw(st.integers(0, size + 8).filter(lambda m: m != size))
        return draw(st.sampled_from([pa.array(np.zeros(n)), np.zeros(n)])), None
    if kind == "nonfinite" and size:
        vec[draw(st.integers(0, size - 1))] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
        return draw(st.sampled_from([pa.array(vec), vec])), None
    if kind == "dtype":
        dt = draw(st.sampled_from([np.float32, np.int64, np.int8, np.bool_, np.complex128, ">f8", "U3", object]))
        return vec.astype(dt), None
    if kind == "shape":
        return draw(st.sampled_from([vec.reshape(1, -1), vec.reshape(-1, 1) if size else np.zeros((0, 2)),
                                     np.float64(1.0), np.zeros((2, size))])), None
    if kind == "arrow_type":
        return draw(st.sampled_from(_BAD_ARROW))(size), None
    return draw(st.one_of(yaml_values, st.just([[1.0], [2.0, 3.0]]), st.binary(max_size=16))), None


@fuzz_settings(100)
@given(data=st.data())
def test_decode_returns_the_fields_or_refuses_naming_the_port(specs, data):
    robot, port = data.draw(st.sampled_from(PORTS), label="port")
    spec = specs[robot][port]
    value, expected = data.draw(messages(spec.size), label="message")
    got = outcome(lambda: spec.decode(value), f"port {port!r}", seconds=5.0, what=f"decode {port}")
    if expected is None:
        # a 0-size contract (external_wrench of a robot without wrench_links) takes an empty message
        # whatever its dtype; everything else must be refused
        if not isinstance(got, ContractError):
            assert spec.size == 0, f"{port}: accepted a malformed message {value!r}"
        return
    assert not isinstance(got, ContactflowError), f"{port}: a valid message refused: {got}"
    assert list(got) == [f.name for f in spec.fields]
    np.testing.assert_array_equal(np.concatenate([got[f.name] for f in spec.fields] or [np.zeros(0)]), expected)


# ------------------------------------------------------------------------- the runtime's decoder
class _Node:
    def __init__(self, events):
        self.events = list(events)

    def next(self, timeout=None):
        return self.events.pop(0) if self.events else None


_META = st.one_of(st.integers(-2, 4), st.sampled_from([2**70, -(10**400), 10**400]), st.floats(allow_nan=True, allow_infinity=True), st.none(), st.text(max_size=4),
                  st.booleans(), st.lists(st.integers(0, 3), max_size=3))


@st.composite
def events(draw, spec, inputs):
    """A stream of dora-like events: well-formed messages mixed with garbage values, metadata and
    event types, ending (or not) with the inputs closed."""
    out = []
    for _ in range(draw(st.integers(0, 12))):
        iid = draw(st.sampled_from(inputs + ["unknown"]))
        typ = draw(st.sampled_from(["INPUT"] * 6 + ["INPUT_CLOSED", "ERROR", "STOP", "garbage"]))
        if typ == "INPUT":
            value, _ = draw(messages(spec.size))
            md = {"seq": draw(st.integers(0, 4) | _META), "t": draw(_META), "finished": draw(_META)}
            for key in ("seq", "t", "finished"):
                if draw(st.booleans()) and draw(st.booleans()):
                    del md[key]
            if draw(st.integers(0, 5)) == 0:
                md.update(rows=draw(_META), row_t=draw(_META), row_finished=draw(_META))
            out.append({"type": "INPUT", "id": iid, "value": value, "metadata": md})
        elif typ == "ERROR":
            out.append({"type": "ERROR", "error": draw(st.text(max_size=10))})
        elif typ == "garbage":
            out.append({"type": draw(st.text(max_size=6)), "id": iid})
        else:
            out.append({"type": typ, "id": iid})
    if draw(st.booleans()):
        out += [{"type": "INPUT_CLOSED", "id": i} for i in inputs]
    return out


@pytest.mark.parametrize("realtime", [False, True], ids=["lockstep", "realtime"])
@fuzz_settings(30)
@given(data=st.data())
def test_lockstep_survives_any_event_stream(specs, realtime, data):
    spec = specs["talos"]["filtered_wrench"]
    evs = data.draw(events(spec, ["a", "b"]), label="events")

    def run():
        ticks = []
        for tick in Lockstep(_Node(evs), {"a": (spec, 0), "b": (spec, 1)}, timeout_s=0.0, skip_missing=realtime):
            ticks.append(tick)
            assert len(ticks) < 1000, "more ticks than messages"
        return ticks

    got = outcome(run, seconds=10.0, what="Lockstep")
    if isinstance(got, ContactflowError):
        return
    for tick in got:
        assert isinstance(tick.t, float) and np.isfinite(tick.t), f"tick {tick.k}: time {tick.t!r}"
        for i, fields in tick.inputs.items():
            if fields is not None:
                assert all(np.isfinite(v).all() for v in fields.values())
            elif i in tick.errors:
                assert "port 'filtered_wrench'" in tick.errors[i]
