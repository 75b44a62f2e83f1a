"""Faults in restoring state at other parallelisms."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cutcheck.model.errors import RestoreRefused
from cutcheck.reference.core.seams import AnyFault, Fault, Layer
from cutcheck.reference.recovery.rescale import (
    ChannelState,
    channel_state_edge,
    channel_state_to_assign,
    committables_to_redistribute,
    filters_ambiguous_channel_state,
    record_filter_channels,
)
from cutcheck.reference.recovery.rescale_refusal import refuse_if_flink_would

if TYPE_CHECKING:
    from cutcheck.model.graph import JobGraph
    from cutcheck.reference.storage.memory import CompletedCheckpoint

Assignment = dict[Any, ChannelState]  # virtual channel -> its recovered (input, output) buffers


def _skip_stateless_reassignment(correct: Callable[[Any, Assignment, set[str]], Assignment], edge: Any,
                                 vchannels: Assignment, stateless: set[str]) -> Assignment:
    """A stateless vertex gets no channel state on rescale (state assignment skips vertices without operator state)."""
    return {k: ([] if edge.target in stateless else inp, [] if edge.source in stateless else outp)
            for k, (inp, outp) in vchannels.items()}


def _no_rescale_filter(correct: Callable[[frozenset[int]], bool], ambiguous: frozenset[int]) -> bool:
    """Ambiguous channel state is delivered unfiltered on rescale (no virtual-channel record filter)."""
    return False


def _channel_state_by_vertex_pair(correct: Callable[[int, Any], int], edge: int, graph: Any) -> int:
    """In-flight buffers are filed under the first edge joining the same two vertices, not under their own edge.

    FLINK-40269: TaskStateAssignment looked connected assignments up by upstream and downstream vertex,
    so with two edges between one pair of vertices the second edge's channel state was redistributed
    with the first edge's gate and partition mapping.
    """
    mine = graph.edge(edge)
    return int(next(e.key for e in graph.edges if (e.source, e.target) == (mine.source, mine.target)))


def _filter_wrong_channel_count(correct: Callable[[int, int], int], old_consumers: int, new_consumers: int) -> int:
    """The record filter of ambiguous channel state re-creates the partitioner over the old number of channels.

    FLINK-35351: the RecordFilter's partitioner copy was not set up for the new number of channels
    (the fix adds ``partitionerCopy.setup(numberOfChannels)``), so it kept or dropped the wrong records.
    """
    return old_consumers


def _committables_lost_on_rescale(correct: Callable[[list[list[Any]], int], list[list[list[Any]]]],
                                  per_old_subtask: list[list[Any]], new_p: int) -> list[list[list[Any]]]:
    """On rescale, new committer subtask i restores only old subtask i's committables; removed subtasks' are lost.

    FLINK-29509: restored committables carried the wrong subtask id and subtask count, so the
    committer never saw them complete and never committed them.
    """
    return [[list(e) for e in per_old_subtask[i]] if i < len(per_old_subtask) else [] for i in range(new_p)]


Refusal = Callable[["JobGraph", "CompletedCheckpoint", dict[str, int]], None]


def _restore_never_refused(correct: Refusal, graph: JobGraph, done: CompletedCheckpoint, new: dict[str, int]) -> None:
    """The engine restores every rescaled checkpoint, also those Flink refuses ("Cannot rescale the given pointwise partitioner").

    Not a re-created Flink bug, though in the score: it shows that RESTORE_JUDGED catches the engine
    accepting a restore Flink refuses.
    """


def _every_rescale_refused(correct: Refusal, graph: JobGraph, done: CompletedCheckpoint, new: dict[str, int]) -> None:
    """The engine refuses every restore at another parallelism, also those Flink accepts.

    Not a re-created Flink bug, though in the score: it shows that RESTORE_JUDGED catches the engine
    refusing a restore Flink accepts.
    """
    raise RestoreRefused("restore refused (the bug: every rescale)")


FAULTS: tuple[AnyFault, ...] = (
    Fault("skip-stateless-reassignment", channel_state_to_assign, Layer.RESCALE, _skip_stateless_reassignment,
          key="FLINK-31963"),
    Fault("no-rescale-filter", filters_ambiguous_channel_state, Layer.RESCALE, _no_rescale_filter,
          key="FLINK-19801"),
    Fault("channel-state-by-vertex-pair", channel_state_edge, Layer.RESCALE, _channel_state_by_vertex_pair,
          key="FLINK-40269"),
    Fault("rescale-filter-wrong-channel-count", record_filter_channels, Layer.RESCALE, _filter_wrong_channel_count,
          key="FLINK-35351"),
    Fault("sink-committables-lost-on-rescale", committables_to_redistribute, Layer.RESCALE,
          _committables_lost_on_rescale, key="FLINK-29509"),
    Fault("restore-never-refused", refuse_if_flink_would, Layer.RESCALE, _restore_never_refused),
    Fault("every-rescale-refused", refuse_if_flink_would, Layer.RESCALE, _every_rescale_refused),
)
