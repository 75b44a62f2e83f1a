"""Where an inspection stands: the directory given, the checkpoint base above it, the other
``_metadata`` whose references must be kept, and re-rooting of moved or copied directories.

A storage command is given a checkpoint base (``execution.checkpointing.dir``; ``state.checkpoints.dir`` in Flink 1.x), a job directory or a
chk-N (savepoint-…) directory. Orphans are only ever files under the directory given, but the
files to keep are those referenced by every ``_metadata`` under the base: a job restored in claim
(or Flink's legacy) mode references the ``shared/`` files of the job it was restored from. So
``locate`` finds the base (the parent of a job directory; a job directory is one named like a
Flink JobID, 32 hex digits, or holding ``chk-N``/``shared``/``taskowned`` next to a sibling that
does), and ``context_metadata`` lists every other ``_metadata`` under the base, at any depth (other
jobs, savepoints). Which of the files found may be moved is reference.storage.guard's to say.

Re-rooting (``reroot``): a directory that was moved or copied keeps ``_metadata`` whose absolute
paths name the old location. Its own copies of those files are what the user sees under the
new location; re-rooting maps the old paths onto the new location to *keep* those copies. It never
decides that a checkpoint is restorable: a restore reads the paths as written.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from cutcheck.model.errors import StorageError
from cutcheck.reference.storage.files import (
    CHK_PREFIX,
    METADATA,
    SAVEPOINT_PREFIX,
    SHARED_DIR,
    TASKOWNED_DIR,
)
from cutcheck.reference.storage.store import LOCAL, QUARANTINE_DIR, Store

__all__ = ["QUARANTINE_DIR", "Target", "context_metadata", "inside", "keep_metadata", "locate", "reroot",
           "require_metadata", "walk"]
_JOB_ID = re.compile(r"[0-9a-fA-F]{32}\Z")
_LAYOUT = (SHARED_DIR, TASKOWNED_DIR)


@dataclass(slots=True)
class Target:
    path: str  # the directory given, canonical, entropy marker removed
    base: str  # the checkpoint base: sibling jobs, and where the quarantine goes
    kind: str  # "base" | "job" | "checkpoint"


def is_checkpoint_dir_name(name: str) -> bool:
    return (name.startswith(CHK_PREFIX) and name[len(CHK_PREFIX):].isdigit()) or name.startswith(SAVEPOINT_PREFIX)


def _holds_layout(path: str, fs: Store = LOCAL) -> bool:
    names = fs.listdir(path)
    return any(n in _LAYOUT or (n.startswith(CHK_PREFIX) and n[len(CHK_PREFIX):].isdigit()) for n in names)


def _is_job_dir(path: str, fs: Store = LOCAL) -> bool:
    if not _holds_layout(path, fs):
        return False
    if _JOB_ID.match(os.path.basename(path)):
        return True
    parent = os.path.dirname(path)
    siblings = [os.path.join(parent, n) for n in fs.listdir(parent) if os.path.join(parent, n) != path]
    return any(fs.isdir(s) and (_JOB_ID.match(os.path.basename(s)) or _holds_layout(s, fs)) for s in siblings)


def inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def locate(path: str, fs: Store = LOCAL) -> Target:
    """The kind of directory given and its checkpoint base; refuses what is no checkpoint directory."""
    if QUARANTINE_DIR in path.split(os.sep):
        raise StorageError(f"{fs.uri(path)} is inside cutcheck's quarantine; use 'cutcheck storage restore-quarantine' or "
                           f"'cutcheck storage purge' on the checkpoint base instead.")
    name = os.path.basename(path)
    has_meta = fs.isfile(os.path.join(path, METADATA))
    if is_checkpoint_dir_name(name) or has_meta:
        if not has_meta:
            raise StorageError(f"{fs.uri(path)} is a checkpoint directory without {METADATA} (a checkpoint still being "
                               f"written, or one that never completed), so nothing in it can be judged; give its "
                               f"job directory or the checkpoint base instead.")
        parent = os.path.dirname(path)
        base = os.path.dirname(parent) if name.startswith(CHK_PREFIX) and _is_job_dir(parent, fs) else parent
        return Target(path, _enclosing(base, fs), "checkpoint")
    if _is_job_dir(path, fs):
        return Target(path, _enclosing(os.path.dirname(path), fs), "job")
    return Target(path, _enclosing(path, fs), "base")


def _enclosing(base: str, fs: Store) -> str:
    """The outermost checkpoint base holding ``base``: a directory given may lie inside another's layout (savepoints
    kept below the checkpoint base, a base configured inside a chk-N), and that layout's _metadata may name files
    here (a job restored in claim mode from a savepoint), so the base grows to take them in. An ancestor counts when
    it is a checkpoint directory with _metadata (then its job directory's parent), or holds a job directory."""
    found, d = base, base
    while True:
        up = os.path.dirname(d)
        if up == d or (not fs.is_local and up == "/"):  # the root; on an object store, the list of buckets
            return found
        name = os.path.basename(up)
        if is_checkpoint_dir_name(name) and fs.isfile(os.path.join(up, METADATA)):
            job = os.path.dirname(up)
            found = os.path.dirname(job) if name.startswith(CHK_PREFIX) and _is_job_dir(job, fs) else job
        elif any(_JOB_ID.match(n) and _holds_layout(os.path.join(up, n), fs) for n in fs.listdir(up)):
            found = up
        d = up


def require_metadata(target: Target, metas: list[str], fs: Store = LOCAL) -> None:
    """A directory with no completed checkpoint or savepoint (or only far below it) is refused."""
    if not metas:
        raise StorageError(f"{fs.uri(target.path)}: no {METADATA} of a completed checkpoint or savepoint under it, so it is "
                           f"not a checkpoint directory and no file in it can be called an orphan; give the "
                           f"checkpoint base (execution.checkpointing.dir; state.checkpoints.dir in Flink 1.x), a job directory or a chk-N directory.")
    nearest = min(metas, key=lambda m: (os.path.relpath(m, target.path).count(os.sep), m))
    if os.path.relpath(nearest, target.path).count(os.sep) > 2:  # <base>/<job>/chk-N/_metadata at most
        holder = os.path.dirname(os.path.dirname(nearest))
        raise StorageError(f"{fs.uri(target.path)} is not a checkpoint directory: its nearest {METADATA} is "
                           f"{fs.uri(nearest)}; give the checkpoint base or job directory that holds it ({fs.uri(holder)}).")


def context_metadata(target: Target, fs: Store = LOCAL) -> list[str]:
    """Every ``_metadata`` under the base whose real path lies outside the directory given, at any depth:
    another job's checkpoint (restored in claim mode from this one) or a savepoint may reference files here,
    wherever under the base it lies. On a local disk directories reached through a symbolic link count too (a
    job directory linked into the base is under it as the operator sees it; the listing follows no link, so its
    _metadata is read here), each real directory once. cutcheck's quarantine is never read."""
    if fs.is_local:
        found: set[str] = set()
        seen: set[str] = set()
        for d, dirs, names in os.walk(target.base, followlinks=True):
            real = os.path.realpath(d)
            if real in seen:  # a link back up, or a second link to one directory
                dirs[:] = []
                continue
            seen.add(real)
            # Inside the directory given (listed already) only links are looked for: shared/ and taskowned/ there
            # hold data only, and are the largest directories of a base.
            mine = inside(real, target.path)
            dirs[:] = sorted(n for n in dirs if n != QUARANTINE_DIR and not (mine and n in _LAYOUT))
            if METADATA in names and os.path.isfile(os.path.join(d, METADATA)):
                found.add(fs.realpath(os.path.join(d, METADATA)))
        return sorted(m for m in found if not inside(m, target.path))
    if target.base == target.path:
        return []
    quarantine = os.path.join(target.base, QUARANTINE_DIR)
    return sorted(fs.realpath(f.path) for f in fs.files(target.base) if os.path.basename(f.path) == METADATA
                  and not inside(f.path, target.path) and not inside(f.path, quarantine))


def keep_metadata(directory: str, fs: Store = LOCAL) -> list[str]:
    """Every ``_metadata`` under a --keep-referenced-by directory (refused when there is none)."""
    root = fs.realpath(directory)
    if not fs.isdir(root):
        raise StorageError(f"--keep-referenced-by {fs.uri(directory)}: no such directory; give a checkpoint directory "
                           f"whose checkpoints reference files here.")
    if fs.is_local:
        found = sorted(os.path.join(d, METADATA) for d, dirs, files in walk(root) if METADATA in files)
    else:
        found = sorted(f.path for f in fs.files(root) if os.path.basename(f.path) == METADATA)
    if not found:
        raise StorageError(f"--keep-referenced-by {fs.uri(directory)}: no {METADATA} under it, so it keeps nothing; give a "
                           f"checkpoint directory.")
    return found


def walk(root: str) -> list[tuple[str, list[str], list[str]]]:
    """os.walk without cutcheck's quarantine (never scanned as checkpoints, never orphans)."""
    out = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(n for n in dirs if n != QUARANTINE_DIR)
        out.append((d, dirs, files))
    return out


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def reroot(refs: list[str], chk_dir: str, anchors: list[str], present: set[str] | None = None) -> set[str]:
    """Where the files ``refs`` name would be if the directory had been moved here (candidates, unchecked).

    Two mappings, both only ever used to keep files: (1) the old location of the checkpoint
    directory, read from its own exclusive files (``/old/ck/<job>/chk-7/<uuid>`` against
    ``/new/ck/<job>/chk-7``), maps every old prefix onto the new one; (2) a path whose component
    names an entry of an anchor (the base, a job directory) is re-rooted at that entry.
    """
    maps: set[tuple[str, str]] = set()
    here = chk_dir.split(os.sep)
    for ref in refs:
        old = os.path.dirname(ref)
        if old == chk_dir or os.path.basename(old) != os.path.basename(chk_dir):
            continue
        there = old.split(os.sep)
        n = 0
        while n < min(len(here), len(there)) and here[-1 - n] == there[-1 - n]:
            n += 1
        for j in range(1, n + 1):
            maps.add((os.sep.join(there[:-j]) or os.sep, os.sep.join(here[:-j]) or os.sep))
    found: set[str] = set()
    for ref in refs:
        for old, new in maps:
            if inside(ref, old) and old != new:
                found.add(os.path.normpath(new + ref[len(old):]))
    if present is not None:  # the same answer, restricted to existing files, without listing any anchor
        return (found & present) | _anchored(refs, set(anchors), present)
    names = {a: set(_listdir(a)) for a in anchors}
    for ref in refs:
        parts = ref.split(os.sep)
        for anchor, entries in names.items():
            for k in range(1, len(parts)):
                if parts[k] in entries:
                    found.add(os.path.join(anchor, *parts[k:]))
    return found


def _anchored(refs: list[str], anchors: set[str], present: set[str]) -> set[str]:
    """The existing files ``anchor/<tail of a ref>`` (a tail starts after the ref's first component): what
    the anchor rule of ``reroot`` finds among ``present``, in time linear in the files and refs."""
    tails = {os.sep.join(parts[k:]) for ref in refs for parts in [ref.split(os.sep)] for k in range(1, len(parts))}
    heads = [a.rstrip(os.sep) + os.sep for a in anchors]
    return {f for f in present if any(f.startswith(h) and f[len(h):] in tails for h in heads)}
