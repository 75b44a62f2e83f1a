"""BLOCKED: a task's input channel is blocked only by the alignment its barrier handler is doing.
CANCEL: a task that aligns a checkpoint never waits on a channel whose producer cancelled it without
the cancel marker on its way.

An aligned barrier blocks its channel until the task has the barrier of that checkpoint from every
channel; then, or when the checkpoint is aborted at the task, or when a newer checkpoint's barrier
overtakes it, every channel the alignment blocked is resumed (Flink: ``SingleCheckpointBarrierHandler``'s
states call ``unblockAllChannels`` in each of those transitions; an alignment that switched to
unaligned on timeout keeps the channels it blocked until the checkpoint ends at the task). A channel
left blocked outside an alignment holds its records, and its sender's, until some later checkpoint
happens to resume it, or for ever: the job stalls, while every output check still passes, because
nothing is lost, only late (or never produced, and then only LIVENESS, at the step limit, says so).

The check runs at every event the handler is about to handle (``HandlerDispatched``), on the task as
the handler finds it: what one transition left behind is seen at the task's next event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cutcheck.model.errors import InvariantViolation
from cutcheck.reference.runtime.network import Barrier, CancelMarker

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from cutcheck.reference.runtime.tasks import Task


def check_blocked_channels(task: Task, event: str) -> None:
    """BLOCKED, for one task about to handle ``event``: every blocked channel delivered the barrier of
    the checkpoint its handler is aligning (and the handler is aligning one)."""
    blocked = [ch for ch in task.channels if ch.blocked]
    if not blocked:
        return
    handler = task.handler
    received = handler.may_block()
    collecting = sorted(handler.collecting())
    doing = f"aligning checkpoint {collecting[0]}" if received and collecting else f"in {type(handler).__name__}"
    stray = [ch for ch in blocked if ch.index_in_task not in received]
    if stray:
        raise InvariantViolation("BLOCKED", f"{task.sid}'s input channel {task.channel_key(stray[0])} is blocked while "
                                            f"its barrier handler is {doing} without that channel's barrier (about "
                                            f"to handle {event}): a channel an alignment blocked stays blocked after "
                                            "the alignment ended, and its records wait")


def _marker_of(cp: int, items: Iterable[object]) -> bool:
    return any((isinstance(x, (CancelMarker, Barrier))) and x.cp == cp for x in items)


def check_cancel_markers_on_the_way(task: Task, event: str, channel: int, cancelled: Mapping[int, dict[int, int]]) -> None:
    """CANCEL, for one task about to handle ``event``: while its handler collects checkpoint ``cp``, every
    channel whose barrier has not come, whose producer cancelled ``cp`` (``cancelled``: id of the producer
    task -> checkpoint -> step, from ``CancelSent``), holds that producer's cancel marker (or its barrier,
    sent before it cancelled) on its way: queued at the receiver or still at the sender. The channel the
    event came on (``channel``) is left out: its barrier or marker is in the handler's hand.

    Sound: a producer that cancels ``cp`` queues the marker on every output at once, and a marker of the
    checkpoint the handler collects ends the collection when it is handled; a handler that handled one
    before it started collecting ``cp`` has moved past ``cp`` and never collects it. Without the marker the
    alignment waits for a newer checkpoint's barrier (Flink sends the marker "to avoid downstream
    back-pressure due to checkpoint barrier align"), or for ever where none can come."""
    handler = task.handler
    collecting = handler.collecting()
    if len(collecting) != 1:
        return  # idle, or the at-least-once tracker (it blocks nothing)
    (cp,) = collecting
    received = handler.may_block()
    for ch in task.channels:
        sp = ch.sender
        if ch.index_in_task in received or ch.index_in_task == channel or ch.ended or ch.eop_arrived or sp is None:
            continue
        step = cancelled.get(id(sp.task), {}).get(cp)
        if step is None:
            continue
        if _marker_of(cp, ch.queue) or _marker_of(cp, ch.priority) or _marker_of(cp, sp.queue):
            continue
        raise InvariantViolation("CANCEL", f"{task.sid} collects the barriers of checkpoint {cp} (about to handle {event}) "
                                           f"and waits on channel {task.channel_key(ch)}, whose producer {sp.task.sid} "
                                           f"cancelled the checkpoint at step {step}, but no cancel marker of it is on "
                                           "the way: the alignment waits for a newer checkpoint's barrier, or for ever")
