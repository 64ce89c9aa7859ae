"""Shared pieces of the Hypothesis fuzz tests (``tests/test_fuzz_*.py``).

* :func:`fuzz_settings` -- bounded, derandomised examples in CI; ``CONTACTFLOW_FUZZ_EXAMPLES=N`` runs
  N random examples per test instead (the figures of docs/reliability.md:
  ``CONTACTFLOW_FUZZ_EXAMPLES=2000 python -m pytest tests/test_fuzz_*.py --hypothesis-show-statistics``).
* :func:`no_hang` -- a wall-clock bound on one call (SIGALRM): a loader that loops fails the test
  as a hang instead of stalling CI.
* :func:`expect_refusal` -- the outcome every loader must have on bad input: the project's own
  exception (:class:`contactflow.errors.ContactflowError`) whose one-line message names the file /
  port; any other exception type fails the test with its traceback.
* :data:`yaml_values` and :func:`mutate` -- YAML-shaped garbage, and a document with a few keys
  removed, retyped, set out of range, non-finite or added.
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import signal
import threading

from hypothesis import HealthCheck, event, settings
from hypothesis.control import currently_in_test_context
from hypothesis import strategies as st

from contactflow.errors import ContactflowError

#: examples per test from the environment (0: each test's CI default).
EXAMPLES = int(os.environ.get("CONTACTFLOW_FUZZ_EXAMPLES", "0") or 0)


def fuzz_settings(ci_examples: int) -> settings:
    """Hypothesis settings: ``ci_examples`` derandomised examples (reproducible CI), or
    ``$CONTACTFLOW_FUZZ_EXAMPLES`` random ones; no deadline (a loaded CI machine), no database."""
    return settings(max_examples=EXAMPLES or ci_examples, deadline=None, derandomize=not EXAMPLES, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture],
                    print_blob=True)


class Hang(AssertionError):
    """A call did not return within its bound."""


@contextlib.contextmanager
def no_hang(seconds: float = 20.0, what: str = "call"):
    """Fail with :class:`Hang` if the body runs longer than ``seconds`` (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _alarm(signum, frame):
        raise Hang(f"{what} still running after {seconds:g} s (a hang)")

    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def outcome(call, *needles: str, seconds: float = 20.0, what: str = "call"):
    """Run ``call()``: return its result, or the :class:`ContactflowError` it raised after checking
    that the message is one line naming each of ``needles`` (a file, a port). Any other exception
    propagates (the test fails with its traceback); so does a hang. Records the outcome as a
    Hypothesis event (``--hypothesis-show-statistics``)."""
    try:
        with no_hang(seconds, what):
            result = call()
    except ContactflowError as exc:
        expect_refusal(exc, *needles)
        _event(f"refused: {type(exc).__name__}")
        return exc
    _event("accepted")
    return result


def _event(text: str) -> None:
    if currently_in_test_context():  # outside @given (a parametrized test): nothing to count
        event(text)


def expect_refusal(exc: BaseException, *needles: str) -> None:
    """``exc`` is a ContactflowError with a one-line message that names every one of ``needles``."""
    assert isinstance(exc, ContactflowError), f"{type(exc).__name__} is not a ContactflowError: {exc}"
    msg = str(exc)
    assert msg.strip(), f"{type(exc).__name__} without a message"
    assert "\n" not in msg.strip(), f"the message is not one line: {msg!r}"
    for n in needles:
        assert n in msg, f"the message does not name {n!r}: {msg}"


# ---------------------------------------------------------------------------------- YAML garbage
_keys = st.one_of(st.text(min_size=1, max_size=12), st.integers(-3, 3), st.booleans())
_scalars = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1, 1e-300, -1e308, 1e308, math.nan, math.inf, -math.inf, "", "nan", "1.0", "robot"]),
    st.text(max_size=20),
)
#: a YAML-representable value: scalars, lists and mappings nested a few levels.
yaml_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(_keys, inner, max_size=5)),
    max_leaves=12,
)

_OUT_OF_RANGE = [0, -1, -1e9, 1e9, 1e308, -1e-9, math.nan, math.inf, -math.inf, 0.5, 2, True, False, None, "1", [], {}]


def _slots(doc, out=None):
    """Every (container, key) of a nested dict/list document."""
    out = [] if out is None else out
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        out.append((doc, k))
        _slots(v, out)
    return out


def mutate(data, doc, max_changes: int = 3):
    """A deep copy of the dict/list document ``doc`` with 1..``max_changes`` random changes drawn
    from ``data`` (``st.data()``): a key removed, a value replaced by garbage, a number set out of
    range or non-finite, a value retyped (string, list, mapping), a list cut or grown, an unknown
    key added."""
    doc = copy.deepcopy(doc)
    for _ in range(data.draw(st.integers(1, max_changes), label="changes")):
        slots = _slots(doc)
        op = data.draw(st.sampled_from(["remove", "garbage", "range", "retype", "list", "add"]), label="op")
        if op == "add" or not slots:
            target = data.draw(st.sampled_from([doc] + [c[k] for c, k in slots if isinstance(c[k], dict)]), label="where")
            if isinstance(target, dict):
                target[data.draw(_keys, label="key")] = data.draw(yaml_values, label="value")
            continue
        c, k = data.draw(st.sampled_from(slots), label="slot")
        v = c[k]
        if op == "remove":
            del c[k]
        elif op == "garbage":
            c[k] = data.draw(yaml_values, label="value")
        elif op == "range":
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                c[k] = data.draw(st.sampled_from(_OUT_OF_RANGE + [-v, 10 * v, v / 1e6]), label="value")
            else:
                c[k] = data.draw(st.sampled_from(_OUT_OF_RANGE), label="value")
        elif op == "retype":
            c[k] = data.draw(st.sampled_from([str(v), [v], {"value": v}, None, 7, 0.5, True]), label="value")
        elif op == "list":
            if isinstance(v, list):
                c[k] = data.draw(st.sampled_from([v[:-1], v[1:], v + v[-1:], [], v[::-1]]), label="value")
            else:
                c[k] = [v, v]
    return doc
