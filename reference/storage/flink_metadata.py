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
    "scope_of",
]

SCOPES = ("exclusive", "shared", "taskowned")
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


def refs_of(meta: FlinkMetadata, chk_dir: str, size: int) -> CheckpointRefs:
    """CheckpointRefs of decoded metadata read from ``chk_dir`` (absolute)."""
    job_dir = os.path.dirname(chk_dir)
    files: dict[str, set[str]] = {scope: set() for scope in SCOPES}
    inlined = 0
    for ref in meta.refs:
        if ref.path is None:
            inlined += ref.size
            continue
        raw = os.path.join(chk_dir, ref.path) if ref.kind == "relative" else local_path(ref.path)
        path = _norm(raw)  # as written: what a restore reads
        files[scope_of(path)].add(path)
    name = os.path.basename(chk_dir)
    savepoint = name.startswith("savepoint") or meta.snapshot_type == "savepoint"
    job = os.path.basename(job_dir) if name.startswith("chk-") else ""
    return CheckpointRefs(meta.checkpoint_id, "savepoint" if savepoint else "checkpoint", job, chk_dir,
                          {scope: sorted(paths) for scope, paths in files.items()},
                          inlined_bytes=inlined, metadata_bytes=size)


def referenced_files(directory: str) -> CheckpointRefs:
    """What one Flink checkpoint or savepoint directory references, by scope, as absolute paths (no JVM)."""
    chk_dir = os.path.abspath(directory)
    path = os.path.join(chk_dir, METADATA)
    if not os.path.isfile(path):
        raise StorageError(f"{chk_dir}: no {METADATA} file; give a chk-N directory of a completed checkpoint.")
    meta = read_metadata(path)
    return refs_of(meta, chk_dir, os.path.getsize(path))


def is_flink_metadata(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == MAGIC.to_bytes(4, "big")
    except OSError:
        return False


def any_referenced_files(directory: str) -> CheckpointRefs:
    """The storage CLI's reader without Java: Flink's binary _metadata here, cutcheck's JSON otherwise."""
    if is_flink_metadata(os.path.join(directory, METADATA)):
        return referenced_files(directory)

    return cutcheck_referenced_files(directory)
