"""Faults in the checkpoint coordinator: completion, subsumption and the store's latest (facts §4.9)."""

from __future__ import annotations

from collections.abc import Callable

from cutcheck.reference.checkpointing.coordinator import completion_subsumes_pending
from cutcheck.reference.core.seams import AnyFault, Fault, Layer


def _older_completes_after_newer(correct: Callable[[str], bool], kind: str) -> bool:
    """A completed checkpoint leaves the older pending ones pending, so an older one completes after it and becomes the store's latest.

    The class of FLINK-6284 (the store's order put an older checkpoint last, and a failover restored
    it): acknowledgements arrive in any order, and only subsuming the older pending checkpoints when a
    newer one completes (``dropSubsumedCheckpoints``) keeps completion in id order. Without it, the
    store's latest, the last added, is the older checkpoint, and a restore rolls back output the newer
    checkpoint's notifications already committed. Needs ``checkpoint.ack_delay`` to show.
    """
    return False


FAULTS: tuple[AnyFault, ...] = (
    Fault("older-checkpoint-completes-after-newer", completion_subsumes_pending, Layer.COORDINATOR,
          _older_completes_after_newer),
)
