"""Inspecting a checkpoint directory: its checkpoints, what each references, and the orphans.

The data model is independent of who wrote the directory, so that a reader of real Flink
checkpoints (``_metadata`` read through PyFlink's Java gateway) can produce the same listing:

    CheckpointListing(root, checkpoints, shared, orphans, taskowned, unreadable)
      checkpoints: [CheckpointInfo(key, id, kind, job, path, size, new_size, files, inlined_bytes, missing)]
        key        the checkpoint directory relative to root ("chk-7", "<job>/chk-7", "savepoint-…")
        files      {"exclusive" | "shared" | "taskowned": [absolute paths]}   (facts §5.2)
        size       bytes needed to restore it: _metadata plus every referenced file that exists
        new_size   of those, the files no older checkpoint of the same job references
        missing    referenced files that do not exist (REF is broken)
      shared:     {shared file: [keys of the checkpoints that reference it]}
      orphans:    files under root (and the entropy roots) that no checkpoint references
      taskowned:  files in taskowned/ (owned by tasks, never called orphans)
      unreadable: _metadata files no reader understood (then nothing is called an orphan)

All of it is built by ``inspect(root, reader)`` from one per-checkpoint function,
``reader(directory) -> CheckpointRefs`` (reference.storage_meta: id, kind, job, path,
files by scope as absolute paths, inlined_bytes, metadata_bytes), which raises StorageError for a
``_metadata`` it cannot read. The orphan rule needs nothing else: a file is an orphan when it is
not a readable ``_metadata``, no checkpoint found references it, and it is not task-owned. So
``orphans`` never lists a referenced file, whoever wrote the checkpoint.

Entropy (facts §5.6): give the configured path with its marker (``/b/_entropy_/ckpts``);
metadata are found under the path without it, and data files also under every existing directory
the marker may have become (``/b/<4 alphanumerics>/ckpts``). A path that exists as written is
read as it is (the marker is never a real directory: nothing is written under it).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from model.errors import StorageError
from reference.storage_files import (
    CHK_PREFIX,
    METADATA,
    METADATA_TMP,
    SAVEPOINT_PREFIX,
    SHARED_DIR,
    TASKOWNED_DIR,
    remove_marker,
)
from reference.storage_meta import SCOPES, CheckpointRefs, referenced_files

Reader = Callable[[str], CheckpointRefs]


@dataclass(slots=True)
class CheckpointInfo:
    key: str
    id: int
    kind: str
    job: str
    path: str
    size: int
    new_size: int
    files: dict[str, list[str]]
    inlined_bytes: int = 0
    missing: list[str] = field(default_factory=list)


@dataclass(slots=True)
class CheckpointListing:
    root: str
    checkpoints: list[CheckpointInfo]
    shared: dict[str, list[str]]
    orphans: list[str]
    taskowned: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)

    @property
    def referenced(self) -> set[str]:
        return {f for c in self.checkpoints for fs in c.files.values() for f in fs}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def entropy_roots(root: str, key: str | None, length: int = 4) -> tuple[str, list[str]]:
    """(the metadata root, the existing directories data files may live under), symlinks resolved."""
    if not key or key not in root or os.path.isdir(root):  # a directory that exists is taken as it is
        return os.path.realpath(root), [os.path.realpath(root)]
    meta_root = os.path.realpath(remove_marker(root, key))
    before, after = os.path.abspath(root).split(key, 1)
    parent, prefix = os.path.split(before)
    suffix, _, rest = after.partition(os.sep)
    pattern = re.compile(re.escape(prefix) + f"[A-Za-z0-9]{{{length}}}" + re.escape(suffix) + r"\Z")
    found = [meta_root]
    for name in sorted(os.listdir(parent)) if os.path.isdir(parent) else []:
        candidate = os.path.realpath(os.path.join(parent, name, rest))
        if pattern.match(name) and os.path.isdir(candidate) and candidate != meta_root:
            found.append(candidate)
    return meta_root, found


def _walk(root: str) -> list[str]:
    # Every path is compared in its canonical form: a file reached through a symlinked directory
    # must never look unreferenced because its checkpoint names it by another path.
    if os.path.isfile(root):
        return [os.path.realpath(root)]
    return sorted(os.path.realpath(os.path.join(d, f)) for d, _, files in os.walk(root) for f in files)


def _size(path: str) -> int | None:
    try:
        return os.path.getsize(path)
    except OSError:
        return None


def inspect(root: str | os.PathLike[str], reader: Reader = referenced_files, *, entropy: str | None = "_entropy_",
            entropy_length: int = 4) -> CheckpointListing:
    meta_root, data_roots = entropy_roots(str(root), entropy, entropy_length)
    if not os.path.isdir(meta_root):
        raise StorageError(f"{root}: no such checkpoint directory; give the checkpoint base directory, a job directory or a chk-N directory.")
    files = sorted({f for r in data_roots for f in _walk(r)})
    checkpoints: list[CheckpointInfo] = []
    unreadable: list[str] = []
    for meta in (f for f in files if os.path.basename(f) == METADATA):
        directory = os.path.dirname(meta)
        try:
            refs = reader(directory)
        except StorageError:
            unreadable.append(meta)
            continue
        key = os.path.relpath(directory, meta_root)
        by_scope = {scope: sorted({os.path.realpath(p) for p in refs.files.get(scope, [])}) for scope in SCOPES}
        sizes = {p: _size(p) for paths in by_scope.values() for p in paths}
        info = CheckpointInfo(key if key != "." else os.path.basename(directory), refs.id, refs.kind, refs.job, directory,
                              refs.metadata_bytes + sum(s for s in sizes.values() if s is not None), 0, by_scope,
                              refs.inlined_bytes, sorted(p for p, s in sizes.items() if s is None))
        checkpoints.append(info)
    checkpoints.sort(key=lambda c: (c.job, c.kind != "checkpoint", c.id, c.key))
    _new_sizes(checkpoints)
    shared: dict[str, list[str]] = {}
    for c in checkpoints:
        for path in c.files["shared"]:
            shared.setdefault(path, []).append(c.key)
    referenced = {f for c in checkpoints for fs in c.files.values() for f in fs} | {os.path.join(c.path, METADATA) for c in checkpoints}
    taskowned = [f for f in files if TASKOWNED_DIR in f.split(os.sep)[:-1]]
    orphans: list[str] = []
    if not unreadable:  # an unreadable _metadata may reference anything: then nothing is an orphan
        skip = referenced | set(taskowned)
        orphans = [f for f in files if f not in skip]
    return CheckpointListing(meta_root, checkpoints, dict(sorted(shared.items())), orphans, taskowned, unreadable)


def _new_sizes(checkpoints: list[CheckpointInfo]) -> None:
    seen: dict[str, set[str]] = {}
    for c in sorted(checkpoints, key=lambda c: (c.job, c.id)):
        known = seen.setdefault(c.job, set())
        mine = {f for fs in c.files.values() for f in fs}
        c.new_size = (_size(os.path.join(c.path, METADATA)) or 0) + sum(_size(f) or 0 for f in mine - known)
        known |= mine


def orphan_reason(listing: CheckpointListing, path: str) -> str:
    """Why a file is an orphan, in a few words (for people deciding whether to delete it)."""
    parent = os.path.dirname(path)
    name, folder = os.path.basename(path), os.path.basename(parent)
    if name == METADATA_TMP:
        return "metadata of a checkpoint that never completed"
    if folder.startswith((CHK_PREFIX, SAVEPOINT_PREFIX)):
        if any(c.path == parent for c in listing.checkpoints):
            return f"in {folder}, whose _metadata does not reference it"
        return f"in {folder}, which has no _metadata (never completed, or discarded)"
    if folder == SHARED_DIR:
        return "shared file no checkpoint references"
    return "not part of any checkpoint"


def delete_orphans(listing: CheckpointListing) -> list[str]:
    """Delete the listing's orphans (never a referenced file); return what was removed."""
    if listing.unreadable:
        raise StorageError(f"{listing.unreadable[0]}: unreadable checkpoint metadata; it may reference any file, "
                           f"so no file is deleted. Remove or fix it first.")
    referenced = listing.referenced
    removed: list[str] = []
    for path in listing.orphans:
        if path in referenced:  # the listing is the caller's: check again rather than trust it
            continue
        try:
            os.remove(path)
            removed.append(path)
        except FileNotFoundError:
            continue
        parent = os.path.dirname(path)
        if os.path.basename(parent).startswith((CHK_PREFIX, SAVEPOINT_PREFIX)) and not os.listdir(parent):
            os.rmdir(parent)
    return removed


def listing_json(listing: CheckpointListing) -> str:
    return json.dumps(listing.to_json(), indent=2, sort_keys=True)
