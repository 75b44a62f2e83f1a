"""Flink's checkpoint ``_metadata``, read in pure Python: no JVM, no PyFlink.

``referenced_files(chk_dir)`` returns the same reference.storage.meta.CheckpointRefs as
flink_bridge.checkpoints.referenced_files (Flink's own loader through the Java gateway): id, kind,
job, the files by scope as absolute local paths, the bytes inlined in ``_metadata`` and its size.
``any_referenced_files`` is the drop-in reader for ``storage ls/orphans`` (cutcheck's own JSON
``_metadata`` otherwise). ``read_metadata(path)`` gives the decoded StateRef list for other uses.

The binary format and its decoder are in ``flink_bridge.metadata_format`` (re-exported here).

Scope is where a file lives, as in the JVM reader: ``shared/`` and ``taskowned/`` by their
directory (file-merging segments one level deeper, ``shared/job_<id>_op_.../``), everything else
exclusive. Paths are reported as a restore reads them: absolute ones as written (a moved
checkpoint still names the original place), relative ones (savepoints) resolved against the
directory read. An unknown version or handle type is one StorageError sentence.
"""

from __future__ import annotations

import os
import re
from enum import Enum
from itertools import repeat
from operator import itemgetter
from typing import Final

from cutcheck.model.errors import StorageError
from cutcheck.reference.storage.flink_metadata_format import (
    BYTES,
    CHANGELOG,
    CHANGELOG_BYTES,
    CHANGELOG_FILES,
    CHANGELOG_FILES_V2,
    CHANGELOG_V2,
    CHANNEL_NAMES,
    EMPTY_SEGMENT,
    FILE,
    HANDLE_NAMES,
    INCREMENTAL,
    INCREMENTAL_V2,
    INPUT_CHANNEL,
    KEY_GROUPS,
    KEY_GROUPS_V2,
    MAGIC,
    MASTER_STATE_MAGIC,
    MERGED_INPUT_CHANNEL,
    MERGED_RESULT_SUBPARTITION,
    METADATA,
    NULL,
    OPERATOR,
    RELATIVE,
    RESULT_SUBPARTITION,
    SAVEPOINT_KEY_GROUPS,
    SEGMENT,
    SEGMENT_OPERATOR,
    VERSIONS,
    FlinkMetadata,
    StateRef,
    decode,
    read_metadata,
)
from cutcheck.reference.storage.meta import CheckpointRefs
from cutcheck.reference.storage.meta import referenced_files as cutcheck_referenced_files

# The format's names stay importable from here (storage inspection, tests, the Flink agreement tests).
__all__ = [
    "BYTES",
    "CHANGELOG",
    "CHANGELOG_BYTES",
    "CHANGELOG_FILES",
    "CHANGELOG_FILES_V2",
    "CHANGELOG_V2",
    "CHANNEL_NAMES",
    "EMPTY_SEGMENT",
    "FILE",
    "FlinkMetadata",
    "HANDLE_NAMES",
    "INCREMENTAL",
    "INCREMENTAL_V2",
    "INPUT_CHANNEL",
    "KEY_GROUPS",
    "KEY_GROUPS_V2",
    "MAGIC",
    "MASTER_STATE_MAGIC",
    "MERGED_INPUT_CHANNEL",
    "MERGED_RESULT_SUBPARTITION",
    "METADATA",
    "NULL",
    "OPERATOR",
    "RELATIVE",
    "RESULT_SUBPARTITION",
    "SAVEPOINT_KEY_GROUPS",
    "SEGMENT",
    "SEGMENT_OPERATOR",
    "StateRef",
    "VERSIONS",
    "decode",
    "read_metadata",
    "OBJECT_SCHEMES",
    "SCOPES",
    "any_referenced_files",
    "is_flink_metadata",
    "local_path",
    "referenced_files",
    "refs_of",
    "refs_of_bytes",
    "scope_of",
]

SCOPES = ("exclusive", "shared", "taskowned")
class _Unseen(Enum):
    """A directory whose (as read, scope) is not worked out yet (None is a worked-out answer)."""

    DIRECTORY = 0


_UNSEEN: Final = _Unseen.DIRECTORY
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_AUTHORITY = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^/]*)(/.*)?\Z")  # a URI's scheme://authority, then its path
OBJECT_SCHEMES = ("s3", "s3a", "s3n", "s3p", "gs", "gcs", "oss", "abfs", "abfss", "wasb", "wasbs", "cos", "obs")


def local_path(flink_path: str) -> str:
    """The path part of a Flink path string (``file:/x``, ``file:///x``, ``hdfs://nn/x``, ``/x``), as the JVM's URI.getPath;
    on an object store (``s3://bucket/key`` and the like) the whole URI, since the bucket is part of where it is."""
    m = _SCHEME.match(flink_path)
    if m and m.group(0)[:-1].lower() in OBJECT_SCHEMES and flink_path[m.end():].startswith("//"):
        return _norm(flink_path)
    rest = flink_path[m.end():] if m else flink_path
    if rest.startswith("//"):
        slash = rest.find("/", 2)
        rest = rest[slash:] if slash >= 0 else ""
    return rest


def _norm(path: str) -> str:
    """os.path.normpath that keeps ``scheme://authority`` of a URI whole."""
    m = _AUTHORITY.match(path)
    return (m.group(1) + os.path.normpath(m.group(2)) if m.group(2) else path) if m else os.path.normpath(path)


def scope_of(path: str) -> str:
    parent = os.path.dirname(path)
    name = os.path.basename(parent)
    if name in ("shared", "taskowned"):
        return name
    grand = os.path.basename(os.path.dirname(parent))
    if grand in ("shared", "taskowned") and name.startswith("job_"):  # file merging: shared/job_<id>_op_.../
        return grand
    return "exclusive"


class _Collector:
    """What ``refs_of`` makes of the leaves, taken one at a time: the decoder hands each leaf here as it reads
    it (``decode(..., sink=)``), so no list of every leaf of a large checkpoint is ever held."""

    __slots__ = ("chk_dir", "files", "folders", "inlined")

    def __init__(self, chk_dir: str):
        self.chk_dir = chk_dir
        self.files: dict[str, list[str]] = {scope: [] for scope in SCOPES}  # repeats go when sorted (no set: memory)
        self.inlined = 0
        self.folders: dict[str, tuple[str, str] | None] = {}  # a directory as written -> (as read, its files' scope)

    def append(self, ref: StateRef) -> None:
        if ref.path is None:
            self.inlined += ref.size
            return
        head, _, name = ref.path.rpartition("/")
        folder = self.folders.get(head, _UNSEEN) if ref.kind != "relative" and name not in ("", ".", "..") else None
        if folder is _UNSEEN:
            folder = self.folders[head] = _folder(head)
        if folder is not None:  # the same answer as below, with the directory's part worked out once
            self.files[folder[1]].append(folder[0] + "/" + name)
            return
        raw = os.path.join(self.chk_dir, ref.path) if ref.kind == "relative" else local_path(ref.path)
        path = _norm(raw)  # as written: what a restore reads
        self.files[scope_of(path)].append(path)

    def add_files(self, paths: list[str]) -> None:
        """``append(StateRef("file", size, p))`` for each of ``paths`` (the decoder's many-files loop)."""
        if len(paths) > 16 and self._one_folder(paths):
            return
        folders, files = self.folders, self.files
        for p in paths:
            head, _, name = p.rpartition("/")
            folder = folders.get(head, _UNSEEN) if name not in ("", ".", "..") else None
            if folder is _UNSEEN:
                folder = folders[head] = _folder(head)
            if folder is None:
                path = _norm(local_path(p))
                files[scope_of(path)].append(path)
            else:
                files[folder[1]].append(folder[0] + "/" + name)

    def _one_folder(self, paths: list[str]) -> bool:
        """``add_files(paths)`` when every path is a name of three characters or more directly in the first one's
        directory (a RocksDB handle's files in ``shared/``): each path's part from that directory on is cut out in C,
        not split and joined a path at a time. False (nothing added) when they are not."""
        first = paths[0]
        cut = first.rfind("/")
        head, prefix = first[:cut], first[:cut + 1]
        folder = self.folders.get(head, _UNSEEN) if cut > 0 else None
        if folder is _UNSEEN:
            folder = self.folders[head] = _folder(head)
        if folder is None or not all(map(str.startswith, paths, repeat(prefix))) \
                or min(map(len, paths)) < len(prefix) + 3 or max(map(str.find, paths, repeat("/"), repeat(cut + 1))) >= 0:
            return False
        base = folder[0] + "/"
        if prefix.endswith(base):  # the usual case: the directory as read is the tail of the one written
            self.files[folder[1]].extend(map(itemgetter(slice(len(prefix) - len(base), None)), paths))
        else:
            self.files[folder[1]].extend(map(base.__add__, map(itemgetter(slice(cut + 1, None)), paths)))
        return True

    def refs(self, meta: FlinkMetadata, size: int, sort: bool = True) -> CheckpointRefs:
        name = os.path.basename(self.chk_dir)
        savepoint = name.startswith("savepoint") or meta.snapshot_type == "savepoint"
        job = os.path.basename(os.path.dirname(self.chk_dir)) if name.startswith("chk-") else ""
        files = {scope: _sorted_once(self.files.pop(scope)) if sort else self.files.pop(scope) for scope in SCOPES}
        return CheckpointRefs(meta.checkpoint_id, "savepoint" if savepoint else "checkpoint", job, self.chk_dir,
                              files, inlined_bytes=self.inlined, metadata_bytes=size)


def refs_of(meta: FlinkMetadata, chk_dir: str, size: int) -> CheckpointRefs:
    """CheckpointRefs of decoded metadata read from ``chk_dir`` (absolute)."""
    collector = _Collector(chk_dir)
    for ref in meta.refs:
        collector.append(ref)
    return collector.refs(meta, size)


def refs_of_bytes(data: bytes, chk_dir: str, source: str, *, sort: bool = True) -> CheckpointRefs:
    """``refs_of(decode(data, source), chk_dir, len(data))`` without holding every decoded leaf at once; with
    ``sort=False`` each scope's paths stay in the order the file names them, repeats included (for a caller
    that orders them itself more cheaply: the storage inspection sorts positions in its listing, not strings)."""
    collector = _Collector(chk_dir)
    return collector.refs(decode(data, source, sink=collector), len(data), sort)


def _sorted_once(paths: list[str]) -> list[str]:
    """``sorted(set(paths))``, sorting in place and dropping repeats, without a set of every path."""
    paths.sort()
    return [p for i, p in enumerate(paths) if not i or p != paths[i - 1]]


def _folder(head: str) -> tuple[str, str] | None:
    """(``_norm(local_path(head))``, the scope of a file in it) when ``_norm(local_path(head + "/" + name))`` is
    that plus ``"/" + name`` for every plain name; None when it may not be (no absolute directory, ``//``)."""
    if not head:
        return None
    base = _norm(local_path(head))
    if not base.startswith("/") and "://" not in base or base.startswith("//") or base.endswith("/"):
        return None
    return base, scope_of(base + "/x")


def referenced_files(directory: str, *, sort: bool = True) -> CheckpointRefs:
    """What one Flink checkpoint or savepoint directory references, by scope, as absolute paths (no JVM); each scope
    sorted without repeats, or with ``sort=False`` as ``refs_of_bytes`` gives them."""
    chk_dir = os.path.abspath(directory)
    path = os.path.join(chk_dir, METADATA)
    if not os.path.isfile(path):
        raise StorageError(f"{chk_dir}: no {METADATA} file; give a chk-N directory of a completed checkpoint.")
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise StorageError(f"{path}: cannot read it ({exc.strerror or exc}).") from None
    return refs_of_bytes(data, chk_dir, path, sort=sort)


def is_flink_metadata(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == MAGIC.to_bytes(4, "big")
    except OSError:
        return False


def any_referenced_files(directory: str, *, sort: bool = True) -> CheckpointRefs:
    """The storage CLI's reader without Java: Flink's binary _metadata here (``sort``: see ``referenced_files``),
    cutcheck's JSON otherwise."""
    if is_flink_metadata(os.path.join(directory, METADATA)):
        return referenced_files(directory, sort=sort)

    return cutcheck_referenced_files(directory)
