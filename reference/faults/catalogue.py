"""Named protocol faults (DESIGN "Mutants"). Each is a copy of a real class of bug.

The engine consults ``Mutants`` at the exact place where the correct rule is applied, so a mutant
changes one rule and nothing else. ``verify`` must kill every one of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from cutcheck.model.errors import InvalidArgument

MUTANTS: dict[str, str] = {
    "no-output-state": "the unaligned barrier overtakes output buffers without persisting them",
    "process-after-barrier": "post-barrier records are applied before the unaligned snapshot",
    "partial-input-state": "input state is captured for the first gate's channels only",
    "early-checkpoint-in-recovery": "a checkpoint completes before recovered data is drained, without capturing it",
    "skip-stateless-reassignment": "a stateless vertex gets no channel state on rescale",
    "no-rescale-filter": "ambiguous channel state is delivered unfiltered on rescale",
    "discard-on-abort": "aborting a checkpoint deletes shared files other checkpoints still use",
    "committer-drops-late": "the committer drops committables that arrive after their checkpoint completed",
}

# Faults only used by tests to show that a check can fail; never part of the mutation score.
TEST_ONLY_FAULTS: dict[str, str] = {
    "restart-failed-task-only": "region failover restarts only the failed task, not its region",
}


@dataclass(frozen=True, slots=True)
class Mutants:
    names: frozenset[str] = frozenset()

    def __contains__(self, name: object) -> bool:
        return name in self.names

    @classmethod
    def of(cls, names: tuple[str, ...] | list[str]) -> Mutants:
        unknown = [n for n in names if n not in MUTANTS and n not in TEST_ONLY_FAULTS]
        if unknown:
            raise InvalidArgument(f"unknown mutant(s) {unknown}")
        return cls(frozenset(names))
