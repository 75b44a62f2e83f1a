"""Retention: which completed checkpoints and savepoints a store keeps (Flink's
``DefaultCompletedCheckpointStore.addCheckpointAndSubsumeOldestOne`` with ``CheckpointSubsumeHelper``).

Savepoints sit in the same queue as checkpoints and count against ``retained``. After each addition,
while more than ``retained`` entries are held, the entries are walked oldest first and every one that
may be subsumed goes: the newest entry never; a savepoint always; a checkpoint unless it is the newest
checkpoint that is not a savepoint, which later incremental checkpoints build on (FLINK-21351). So a
store may hold one entry more than ``retained`` (that checkpoint and a newer savepoint).
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from cutcheck.reference.core.seams import seam


class Entry(Protocol):
    cp: int
    kind: str


E = TypeVar("E", bound=Entry)


@seam
def subsumable(kind: str, newest: bool, newest_checkpoint: bool) -> bool:
    """``CheckpointSubsumeHelper.canSubsume`` (facts §5.3): never the newest entry, always a savepoint,
    and a checkpoint unless it is the newest one that is not a savepoint (FLINK-21351)."""
    if newest:
        return False
    return kind == "savepoint" or not newest_checkpoint


def subsume(entries: list[E], retained: int, rules: Any) -> list[E]:
    """Remove what the store no longer keeps from ``entries`` (oldest first), in place; return it."""
    if len(entries) <= retained:
        return []
    newest = entries[-1]
    newest_checkpoint = next((e for e in reversed(entries) if e.kind != "savepoint"), None)
    victims: list[E] = []
    for e in list(entries):
        if len(entries) <= retained:
            break
        if rules[subsumable](e.kind, e is newest, e is newest_checkpoint):
            entries.remove(e)
            victims.append(e)
    return victims


def expected_retention(history: list[tuple[int, str]], retained: int) -> list[int]:
    """What a store that saw ``history`` (ids and kinds, in completion order) holds, stated as a whole
    rather than step by step: the newest ``retained`` entries, and when the newest checkpoint that is
    not a savepoint is not among them, that checkpoint with the newest ``max(retained - 1, 1)``."""
    if not history:
        return []
    newest = [cp for cp, _ in history[-retained:]]
    checkpoints = [cp for cp, kind in history if kind != "savepoint"]
    if not checkpoints or checkpoints[-1] in newest:
        return newest
    return [checkpoints[-1], *(cp for cp, _ in history[-max(retained - 1, 1):])]
