"""BLOCKED: a task's input channel is blocked only by the alignment its barrier handler is doing.

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

if TYPE_CHECKING:
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
