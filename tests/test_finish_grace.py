"""Every shipped graph bounds dora's finish grace on every node (``finish_grace_secs``,
contactflow.graphs.FINISH_GRACE_S): with dora 1.1's default (120 s) a hung node was stopped and
named ~135 s after the rest of the run had ended; the grace counts only once the other nodes have
ended, and dora waits for the longest grace among the nodes still running, so the recorder needs one
too (contactflow/graphs.py, the measurement)."""

from pathlib import Path

import pytest
import yaml

from contactflow.graphs import (FINISH_GRACE_S, FINISH_GRACE_S_OF, FINISH_GRACE_S_OFFLINE, GRAPHS, OFFLINE_NODE_KINDS,
                                finish_grace_of)
from contactflow.paths import node_kind

ROOT = Path(__file__).resolve().parent.parent
# (files starting with "_" are temporary copies written by running tests, not shipped graphs)
SHIPPED = sorted(p for p in (ROOT / "dataflows").glob("*.yml") if not p.name.startswith("_"))


def test_the_shipped_graphs_include_the_generated_and_the_hand_written_ones():
    names = {p.stem for p in SHIPPED}
    assert set(GRAPHS) <= names
    assert {"lac_g1_teleop", "lac_g1_hw", "prime_replay_go2", "g1_walk_holosoma"} <= names


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_every_node_of_every_shipped_graph_sets_a_bounded_finish_grace(path):
    nodes = yaml.safe_load(path.read_text())["nodes"]
    kinds = {n["id"]: node_kind(n.get("path", "")) for n in nodes}
    offline = bool(set(kinds.values()) & set(OFFLINE_NODE_KINDS))
    for n in nodes:
        grace = n.get("finish_grace_secs")
        assert grace == finish_grace_of(n["id"], kinds[n["id"]], set(kinds.values())), (path.name, n["id"], grace)
        if not offline:
            assert grace == FINISH_GRACE_S_OF.get(n["id"], FINISH_GRACE_S), (path.name, n["id"], grace)
    # dora's default is 120 s; a graph with an offline node (the PRIME estimator) waits for its solve
    assert max(n["finish_grace_secs"] for n in nodes) <= (FINISH_GRACE_S_OFFLINE if offline else 30)
    if offline:  # the estimator and the recorder that waits for its outputs
        assert sorted(n["id"] for n in nodes if n["finish_grace_secs"] == FINISH_GRACE_S_OFFLINE) == \
            sorted(i for i, k in kinds.items() if k in OFFLINE_NODE_KINDS or k == "recorder")


class _EndedStream:
    """A node whose event stream is over (all its inputs closed): ``next`` returns None at once."""

    def next(self, timeout=None):
        return None


class _StoppedStream:
    """A node that gets STOP(ALL_INPUTS_CLOSED) and then the end of its stream."""

    def __init__(self):
        self.events = [{"type": "STOP", "id": "ALL_INPUTS_CLOSED"}]

    def next(self, timeout=None):
        return self.events.pop(0) if self.events else None


@pytest.mark.parametrize("node", [_EndedStream(), _StoppedStream()], ids=["stream-over", "stop-then-over"])
def test_a_finished_node_stays_alive_for_its_whole_grace_even_when_its_event_stream_is_over(node):
    # dora 1.1 can drop the last outputs of a process that exits right after sending them: the PRIME
    # estimator, whose inputs closed before its solve, exited at once and lost its `forces` stream on CI
    import time

    from contactflow.nodes import _runtime

    t0 = time.monotonic()
    _runtime.drain_after_finish(node, grace_s=0.3)
    assert time.monotonic() - t0 >= 0.29
