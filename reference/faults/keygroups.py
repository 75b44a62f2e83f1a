"""Faults in key groups: which key group a piece of keyed state is filed under."""

from __future__ import annotations

from typing import Any

from cutcheck.reference.core.seams import Fault, Layer


class StateFiledUnderStaleKeyGroup(Fault):
    """A keyed state change is filed under the key group of the previously processed record (a stale key context).

    FLINK-26063: the current key was set only after polling the next priority-queue element, so a
    remove() was recorded with the key group of the previous key; after rescaling, the change went
    to the wrong backend.
    """

    name, seam, layer, key = ("state-filed-under-stale-key-group", "state_change_key_group", Layer.KEYGROUPS,
                              "FLINK-26063")

    def rule(self, correct: Any, key_group: int, previous_key_group: int) -> int:
        return previous_key_group
