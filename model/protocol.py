"""The checkpoint protocol of one channel u→d as an explicit transition system.

One table of rules (``Protocol.actions``) serves both concrete execution (``model.trace``, Python
values: run-length sequences of record numbers) and the Z3 encoding (``proofs``, Z3 sequences of
Int). Every guard and effect is written once, against the tiny :class:`Ops` algebra, so the
executable model and the proved one cannot disagree. Static configuration (mode, mutant, gate)
is plain Python and may be branched on; state may only be touched through ``ops``.

State of a channel: u's output queue ``out`` and d's input queue ``inq`` (data records only),
the ghost histories ``sent`` (what u emitted, in order, as its state reflects it) and ``done``
(what d applied), the number of recovered records still at the head of each queue, one
:class:`Slot` per checkpoint in progress on the channel, and the latest completed checkpoint.

Barriers are not queue elements: a slot records where its barrier is (``loc``) and how many data
records precede it in channel order (``bout`` in the output queue, ``bpos`` in the input queue).
A priority barrier is modelled as sitting at the front of u's output (``PRIO``): Flink polls the
priority section first and the network is FIFO, so no buffer is transmitted while it is pending.

Names follow the rules they implement (TLA+ style); invariants live in ``proofs.cut`` and
``model.invariants``, apart from the actions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cutcheck.model.channel_state import (
    AT_D,
    INQ,
    LOC_NAMES,
    NONE,
    OUT,
    PRIO,
    Action,
    ChannelState,
    Clause,
    Effect,
    Guard,
    Last,
    Ops,
    Params,
    Slot,
    fresh_slot,
    initial_state,
)
from cutcheck.model.errors import CutcheckError
from cutcheck.model.kinds import CheckpointMode, values
from cutcheck.model.protocol_rules import (
    ACTIONS,
    BY_EVENT,
    SLOT_EVENTS,
    ModelMutant,
    can_send_buffer,
    can_task_snapshot,
    do_complete,
    do_process,
)

# The state and the rules live in model.channel_state and model.protocol_rules; their names are
# re-exported here, where the model's users (model.trace, proofs) import the protocol from.
__all__ = [
    "ACTIONS", "AT_D", "BY_EVENT", "INQ", "LOC_NAMES", "MODES", "NONE", "OUT", "PRIO",
    "PROTOCOL_MUTANTS", "SLOT_EVENTS", "Action", "ChannelState", "Clause", "Effect", "Guard", "Last", "ModelMutant",
    "Ops", "Params", "Protocol", "Slot", "can_send_buffer", "can_task_snapshot", "do_complete", "do_process", "fresh_slot",
    "initial_state", "normalize_mode",
]

MODES = values(CheckpointMode)
# The catalogue's faults that the model runs too (the other faults live outside one channel's protocol).
PROTOCOL_MUTANTS = values(ModelMutant)


def normalize_mode(mode: str) -> CheckpointMode:
    base = mode.split(":", 1)[0]  # "aligned_timeout:T" names the timeout too
    if base not in MODES:
        raise CutcheckError(f"unknown checkpoint mode {mode!r}; use one of {', '.join(MODES)}.")
    return CheckpointMode(base)


@dataclass(frozen=True, slots=True)
class Protocol:
    """The protocol of one channel in a mode, with at most one mutant; ``gate`` is the channel's input gate at d."""

    mode: CheckpointMode  # a mode's string ("aligned_timeout:T" too) is normalized to its member
    mutant: str | None = None
    gate: int = 0
    actions: tuple[Action, ...] = field(default=ACTIONS, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", normalize_mode(self.mode))
        if self.mutant is not None:
            object.__setattr__(self, "mutant", str(self.mutant))  # ModelMutant.X and its spelling are one mutant
        if self.mutant is not None and self.mutant not in PROTOCOL_MUTANTS:
            raise CutcheckError(f"unknown mutant {self.mutant!r} for the channel model; it runs only the "
                                f"channel protocol's mutants: {', '.join(PROTOCOL_MUTANTS)}.")

    def overtaken(self, o: Ops, s: ChannelState, k: Any) -> Any:
        """The output state of a barrier that overtakes the ``k`` oldest queued records."""
        if self.mutant == ModelMutant.NO_OUTPUT_STATE:
            return o.empty()
        ahead = o.take(s.out, k)
        return o.drop(ahead, s.rec_out) if self.mutant == ModelMutant.EARLY_CHECKPOINT_IN_RECOVERY else ahead

    def action(self, word: str) -> Action:
        """The rule for a word of the trace vocabulary (in this protocol's table)."""
        for a in self.actions:
            if a.event == word:
                return a
        raise KeyError(word)

    def guard(self, action: Action, o: Ops, s: ChannelState, p: Params) -> list[Clause]:
        return action.guard(self, o, s, p)

    def effect(self, action: Action, o: Ops, s: ChannelState, p: Params) -> ChannelState:
        return action.effect(self, o, s, p)
