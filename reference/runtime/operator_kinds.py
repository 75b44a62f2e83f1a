"""Which operator runs a vertex of each kind (the sources and sinks are operators of their own modules,
which import the base ``Operator``; this factory imports them all, so none has to import it back)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cutcheck.model.kinds import VertexKind
from cutcheck.reference.runtime.operators import (
    BroadcastStateOperator,
    FilterOperator,
    KeyedCountOperator,
    MapOperator,
    Operator,
)
from cutcheck.reference.runtime.sinks import SinkOperator
from cutcheck.reference.runtime.sources import SourceOperator

if TYPE_CHECKING:
    from cutcheck.reference.runtime.tasks import Task


def make_operator(task: Task) -> Operator:
    """The operator of ``task``'s vertex kind."""
    kind = task.vertex.kind
    if kind is VertexKind.SOURCE:
        return SourceOperator(task)
    if kind is VertexKind.SINK:
        return SinkOperator(task)
    return {
        "map": MapOperator,
        "filter": FilterOperator,
        "keyed_count": KeyedCountOperator,
        "broadcast_state": BroadcastStateOperator,
        "union": Operator,
        "co_map": Operator,
    }[kind](task)
