"""Hypothesis strategies over the one scenario generator (``reference.fuzzing.generate``).

These are thin wrappers, not a second generator: a ``Draw`` adapter turns each ``integer(lo, hi)``
of the generator into ``draw(st.integers(lo, hi))``, so Hypothesis shrinks the generator's own
choices (the swarm mask towards "every feature off", graphs towards fewer and narrower vertices).

``job_graph_dicts()`` draws the JSON form of a valid job graph (every vertex kind and partitioner,
multi-edges, blocking exchanges, small and odd max parallelisms, empty sources, at-least-once
sinks), ``job_graphs()`` the loaded ``JobGraph``, ``execution_graphs()`` its expansion, and
``scenario_dicts()`` whole scenarios as the campaigns draw them.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from cutcheck.model.execution import ExecutionGraph
from cutcheck.model.graph import JobGraph
from cutcheck.reference.fuzzing.generate import graph_dict, scenario_dict
from cutcheck.reference.fuzzing.swarm import draw_mask

MAX_PARALLELISM = 8


class HypothesisDraw:
    """The generator's Draw over a Hypothesis ``draw`` (from ``st.composite`` or ``st.data().draw``)."""

    __slots__ = ("_draw",)

    def __init__(self, draw: Any):
        self._draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return self._draw(st.integers(lo, hi))


@st.composite
def job_graph_dicts(draw: Any, max_vertex_parallelism: int = MAX_PARALLELISM, blocking: bool = True,
                    max_middle: int = 4, max_records: int = 60) -> dict[str, Any]:
    """A valid job graph as a JSON-ready dict: parallelism 1..``max_vertex_parallelism``, at most
    ``max_middle`` vertices between sources and sinks; ``blocking=False`` keeps every exchange
    pipelined (a streaming job)."""
    d = HypothesisDraw(draw)
    return graph_dict(d, max_parallelism=max_vertex_parallelism, max_middle=max_middle, max_records=max_records,
                      blocking=blocking, mask=draw_mask(d))


def job_graphs(**kwargs: Any) -> st.SearchStrategy[JobGraph]:
    """Valid ``JobGraph`` objects (see :func:`job_graph_dicts` for the options)."""
    return job_graph_dicts(**kwargs).map(JobGraph.from_json)


def execution_graphs(**kwargs: Any) -> st.SearchStrategy[ExecutionGraph]:
    """Execution graphs of valid job graphs at their own parallelisms."""
    return job_graphs(**kwargs).map(ExecutionGraph)


@st.composite
def scenario_dicts(draw: Any, **gen: Any) -> dict[str, Any]:
    """Whole scenarios, with the keywords of ``scenario_dict`` (modes, storage, batch, on, off, ...)."""
    return scenario_dict(HypothesisDraw(draw), **gen)
