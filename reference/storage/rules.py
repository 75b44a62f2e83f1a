"""The rules of checkpoint storage that a fault may replace (reference.core.seams), stated once.

``FsCheckpointStorage`` (reference.storage.fs) applies each through ``self.rules[<seam>]``; the registry's own
ownership rule lives with the registry (reference.storage.shared_registry.registry_may_discard).
"""

from __future__ import annotations

from cutcheck.reference.core.seams import seam


@seam
def registry_key(vertex: str, kg: int, digest: str) -> str:
    """What a key-group file is (SharedStateRegistryKey): its key group and the digest of its bytes, so
    new content is never mistaken for a registered file of the same key group (facts §8.3)."""
    return f"{vertex}/{kg}/{digest}"


@seam
def builds_on_restored(claimed: bool) -> bool:
    """Checkpoints build on the restored checkpoint's shared files only when the job claimed it; after
    a no_claim restore the first checkpoint is full (NO_SHARING) and nothing restored is reused
    (facts §8.4, FLINK-25192)."""
    return claimed


@seam
def exclusive_files_discarded_on_abort(exclusive: list[str]) -> list[str]:
    """An aborted checkpoint's exclusive files (chk-N) are discarded at once: no other checkpoint can
    reference them, so nothing else would ever delete them (facts §8.2)."""
    return exclusive


@seam
def shared_files_discarded_on_abort(shared: list[str]) -> list[str]:
    """An aborted checkpoint discards none of its shared files at once: they stay registered and go
    at a later subsumption unless a later checkpoint reuses them (facts §5.4)."""
    return []


@seam
def first_checkpoint_id_after_restore(restored: int) -> int:
    """A job restored from checkpoint N numbers its checkpoints from N + 1 (the checkpoint ID counter
    restarts from the restored id), so no id of the earlier run is taken again (facts §8.4)."""
    return restored + 1


@seam
def job_owns_completed(savepoint: bool) -> bool:
    """A checkpoint the job completes is the job's to discard when subsumed; a savepoint is the user's
    and is never discarded by the job (facts §8.2)."""
    return not savepoint


@seam
def files_discarded_when_subsumed(exclusive: list[str]) -> list[str]:
    """Subsuming a checkpoint the job owns deletes every exclusive file of it, after its metadata (facts §8.2)."""
    return exclusive
