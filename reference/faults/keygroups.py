"""Faults in key groups: which key group a piece of keyed state is filed under."""

from __future__ import annotations

from collections.abc import Callable

from cutcheck.model.keygroups import KeyGroupRange, key_group_range
from cutcheck.reference.core.seams import AnyFault, Fault, Layer
from cutcheck.reference.runtime.operators import (
    broadcast_element_stored,
    state_change_key_group,
    subtask_key_group_range,
)


def _stale_key_group(correct: Callable[[int, int], int], key_group: int, previous_key_group: int) -> int:
    """A keyed state change is filed under the key group of the previously processed record (a stale key context).

    FLINK-26063: the current key was set only after polling the next priority-queue element, so a
    remove() was recorded with the key group of the previous key; after rescaling, the change went
    to the wrong backend.
    """
    return previous_key_group


def _range_starts_at_floor(correct: Callable[[int, int, int], KeyGroupRange], max_parallelism: int,
                           parallelism: int, index: int) -> KeyGroupRange:
    """A subtask's key-group range starts at floor(i·maxP/p) instead of the ceiling, so it overlaps its neighbour's.

    Not a re-created Flink bug, though in the score: nothing routes records into the overlap, so only the
    check of the ranges themselves (OWNERSHIP when the tasks are built) can see it.
    """
    return KeyGroupRange(index * max_parallelism // parallelism, key_group_range(max_parallelism, parallelism, index).end)


def _subtask_misses_broadcast(correct: Callable[[int, int], bool], subtask: int, rid: int) -> bool:
    """Subtask 1 of a broadcast-state operator stores no broadcast element, though it forwards each one.

    Not a re-created Flink bug, though in the score: the output stays right, so only BROADCAST_STATE (all
    instances hold the same broadcast state) can see it.
    """
    return subtask != 1


FAULTS: tuple[AnyFault, ...] = (
    Fault("state-filed-under-stale-key-group", state_change_key_group, Layer.KEYGROUPS, _stale_key_group,
          key="FLINK-26063"),
    Fault("key-group-range-starts-at-floor", subtask_key_group_range, Layer.KEYGROUPS, _range_starts_at_floor),
    Fault("subtask-misses-broadcast-state", broadcast_element_stored, Layer.KEYGROUPS, _subtask_misses_broadcast),
)
