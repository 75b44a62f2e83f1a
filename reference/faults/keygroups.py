"""Faults in key groups: which key group a piece of keyed state is filed under."""

from __future__ import annotations

from collections.abc import Callable

from cutcheck.reference.core.seams import AnyFault, Fault, Layer
from cutcheck.reference.runtime.operators import state_change_key_group


def _stale_key_group(correct: Callable[[int, int], int], key_group: int, previous_key_group: int) -> int:
    """A keyed state change is filed under the key group of the previously processed record (a stale key context).

    FLINK-26063: the current key was set only after polling the next priority-queue element, so a
    remove() was recorded with the key group of the previous key; after rescaling, the change went
    to the wrong backend.
    """
    return previous_key_group


FAULTS: tuple[AnyFault, ...] = (
    Fault("state-filed-under-stale-key-group", state_change_key_group, Layer.KEYGROUPS, _stale_key_group,
          key="FLINK-26063"),
)
