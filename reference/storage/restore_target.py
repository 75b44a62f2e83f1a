"""Where an on-disk storage lives and what it restores from: the root that ``_metadata`` names files
relative to, the job directory's name, and the checkpoint (with its predecessors) a run restores."""

from __future__ import annotations

import os

from cutcheck.model.errors import StorageError
from cutcheck.reference.storage.files import (
    CHK_PREFIX,
    METADATA,
    sha256,
)
from cutcheck.reference.storage.memory import CompletedCheckpoint
from cutcheck.reference.storage.meta import (
    CheckpointRefs,
    load_checkpoint,
    referenced_files,
)


def storage_root(directory: str, entropy: str | None) -> str:
    """The directory every file of the storage lies under: the base, or with entropy injection the
    directory before the marker (``/b/_entropy_/ckpts`` -> ``/b``), where the random prefixes go."""
    directory = os.path.abspath(directory)
    if entropy and entropy in directory:
        return os.path.dirname(directory.split(entropy, 1)[0]) or os.sep
    return os.path.normpath(directory)


def default_job(restored: CheckpointRefs | None, mode: str) -> str:
    """Fresh runs use Flink's fixed application-mode id; a claimed checkpoint's job continues in its
    directory; any other restore is a new job (Flink assigns a new JobID), named from what it restored."""
    if restored is None:
        return "0" * 32
    if mode == "claim":
        return restored.job
    return sha256(f"{restored.job}/restored/{restored.kind}/{restored.id}".encode())[:32]


def load_restore_target(path: str) -> tuple[CompletedCheckpoint, CheckpointRefs]:
    """A chk-N or savepoint directory (or its _metadata file), read whole: a missing file is an error."""
    directory = os.path.dirname(path) if os.path.basename(path.rstrip("/")) == METADATA else path
    directory = os.path.abspath(directory)
    if not os.path.isdir(directory):
        raise StorageError(f"{path}: no such checkpoint directory; give a chk-N or savepoint directory.")
    return load_checkpoint(directory), referenced_files(directory)


def older_checkpoints(refs: CheckpointRefs) -> list[CheckpointRefs]:
    """The other complete checkpoints of a claimed checkpoint's job directory (they share its files)."""
    job_dir = os.path.dirname(refs.path)
    found: list[CheckpointRefs] = []
    for name in sorted(os.listdir(job_dir)):
        if not (name.startswith(CHK_PREFIX) and name[len(CHK_PREFIX):].isdigit()):
            continue
        directory = os.path.join(job_dir, name)
        if directory == refs.path or not os.path.exists(os.path.join(directory, METADATA)):
            continue
        other = referenced_files(directory)
        if other.id > refs.id:
            raise StorageError(f"claim mode takes ownership of {refs.path}, but {directory} is newer and shares its "
                               f"files; restore from the newest checkpoint or use no_claim.")
        found.append(other)
    return sorted(found, key=lambda r: r.id)
