"""Faults in restoring state at other parallelisms."""

from __future__ import annotations

from typing import Any

from cutcheck.reference.core.seams import Fault, Layer


class SkipStatelessReassignment(Fault):
    """A stateless vertex gets no channel state on rescale (state assignment skips vertices without operator state)."""

    name, seam, layer, key = ("skip-stateless-reassignment", "channel_state_to_assign", Layer.RESCALE, "FLINK-31963")

    def rule(self, correct: Any, edge: Any, vchannels: dict[Any, Any], stateless: set[str]) -> dict[Any, Any]:
        return {k: ([] if edge.target in stateless else inp, [] if edge.source in stateless else outp)
                for k, (inp, outp) in vchannels.items()}


class NoRescaleFilter(Fault):
    """Ambiguous channel state is delivered unfiltered on rescale (no virtual-channel record filter)."""

    name, seam, layer, key = "no-rescale-filter", "filters_ambiguous_channel_state", Layer.RESCALE, "FLINK-19801"

    def rule(self, correct: Any) -> bool:
        return False


class ChannelStateByVertexPair(Fault):
    """In-flight buffers are filed under the first edge joining the same two vertices, not under their own edge.

    FLINK-40269: TaskStateAssignment looked connected assignments up by upstream and downstream vertex,
    so with two edges between one pair of vertices the second edge's channel state was redistributed
    with the first edge's gate and partition mapping.
    """

    name, seam, layer, key = "channel-state-by-vertex-pair", "channel_state_edge", Layer.RESCALE, "FLINK-40269"

    def rule(self, correct: Any, edge: int, graph: Any) -> int:
        mine = graph.edge(edge)
        return next(e.key for e in graph.edges if (e.source, e.target) == (mine.source, mine.target))


class RescaleFilterWrongChannelCount(Fault):
    """The record filter of ambiguous channel state re-creates the partitioner over the old number of channels.

    FLINK-35351: the RecordFilter's partitioner copy was not set up for the new number of channels
    (the fix adds ``partitionerCopy.setup(numberOfChannels)``), so it kept or dropped the wrong records.
    """

    name, seam, layer, key = ("rescale-filter-wrong-channel-count", "record_filter_channels", Layer.RESCALE,
                              "FLINK-35351")

    def rule(self, correct: Any, old_consumers: int, new_consumers: int) -> int:
        return old_consumers


class SinkCommittablesLostOnRescale(Fault):
    """On rescale, new committer subtask i restores only old subtask i's committables; removed subtasks' are lost.

    FLINK-29509: restored committables carried the wrong subtask id and subtask count, so the
    committer never saw them complete and never committed them.
    """

    name, seam, layer, key = ("sink-committables-lost-on-rescale", "committables_to_redistribute", Layer.RESCALE,
                              "FLINK-29509")

    def rule(self, correct: Any, per_old_subtask: list[list[Any]], new_p: int) -> list[list[list[Any]]]:
        return [[list(e) for e in per_old_subtask[i]] if i < len(per_old_subtask) else [] for i in range(new_p)]
