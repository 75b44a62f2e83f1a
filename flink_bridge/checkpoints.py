"""Real Flink checkpoint directories: what each ``_metadata`` references, read with Flink's own loader.

``referenced_files(chk_dir)`` loads ``<dir>/<job-id>/chk-N/_metadata`` with
``org.apache.flink.runtime.checkpoint.Checkpoints.loadCheckpointMetadata`` through PyFlink's Java
gateway and walks every state handle of every operator subtask (keyed, operator, input-channel
and output-buffer state; RocksDB incremental handles with their shared and private files) down to
the files. It returns reference.storage.meta.CheckpointRefs, the per-checkpoint record that
reference.storage.inspection builds listings and orphans from, so ``inspect_flink(root)`` gives the
same CheckpointListing (files by scope, shared file -> referencing checkpoints, orphans) as for
cutcheck's own directories.

Scope is where a file lives (facts §5.1-5.2): ``shared/`` and ``taskowned/`` by their directory,
everything else (``chk-N/`` files, a restored snapshot's files elsewhere) exclusive. State under
the inline threshold lives in ``_metadata`` itself and is counted in ``inlined_bytes``.

Paths are reported as Flink would read them on restore: a checkpoint's ``_metadata`` holds absolute
paths for its exclusive and shared files, a savepoint's relative ones, which Flink's loader resolves
against the directory it is given (so a moved savepoint names its new place). A moved or copied
checkpoint directory therefore names the original location, and is not restorable from the copy
once the original is gone; reference.storage.inspection says so (NOT RESTORABLE), and only uses
re-rooting of such paths onto the copy (reference.storage.scope.reroot) to *keep* the copy's files.
A handle cutcheck does not know (for example the changelog state backend's) makes the
checkpoint unreadable, and then inspection calls nothing an orphan.
"""

from __future__ import annotations

import os
import re
from typing import Any

from cutcheck.model.errors import StorageError
from cutcheck.reference.storage.inspection import CheckpointListing, inspect
from cutcheck.reference.storage.meta import CheckpointRefs

METADATA = "_metadata"
MAGIC = bytes.fromhex("4960672d")  # Checkpoints.HEADER_MAGIC_NUMBER: the first 4 bytes of Flink's _metadata
_PKG = "org.apache.flink.runtime.state."
_JOB_ID = re.compile(r"[0-9a-f]{32}\Z")


def is_flink_metadata(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == MAGIC
    except OSError:
        return False


def is_flink_checkpoint_dir(root: str | os.PathLike[str]) -> bool:
    """True when the first ``_metadata`` under ``root`` is Flink's binary format (not cutcheck's JSON)."""
    root = str(root)
    if os.path.isfile(root):
        return is_flink_metadata(root)
    for directory, dirs, files in os.walk(root):
        dirs.sort()
        if METADATA in files:
            return is_flink_metadata(os.path.join(directory, METADATA))
    return False


class _Walker:
    """Collects the files (and inlined bytes) of Flink state handles through the gateway."""

    def __init__(self, jvm: Any, chk_dir: str):
        self.jvm = jvm
        self.chk_dir = chk_dir
        self.job_dir = os.path.dirname(chk_dir)
        self.files: dict[str, set[str]] = {"exclusive": set(), "shared": set(), "taskowned": set()}
        self.inlined = 0
        cls = jvm.java.lang.Class
        self.kinds = {name: cls.forName(_PKG + name) for name in (
            "IncrementalRemoteKeyedStateHandle", "KeyGroupsStateHandle", "OperatorStreamStateHandle",
            "AbstractChannelStateHandle", "AbstractMergedChannelStateHandle", "PlaceholderStreamStateHandle",
            "StreamStateHandle")}

    def _is(self, handle: Any, kind: str) -> bool:
        return bool(self.kinds[kind].isInstance(handle))

    def handle(self, h: Any) -> None:
        if h is None:
            return
        if self._is(h, "IncrementalRemoteKeyedStateHandle"):
            self.handle(h.getMetaDataStateHandle())
            for part in [*_items(h.getSharedState()), *_items(h.getPrivateState())]:
                self.handle(part.getHandle())
        elif self._is(h, "KeyGroupsStateHandle") or self._is(h, "OperatorStreamStateHandle"):
            self.handle(h.getDelegateStateHandle())
        elif self._is(h, "AbstractChannelStateHandle") or self._is(h, "AbstractMergedChannelStateHandle"):
            self.handle(h.getDelegate())
        elif self._is(h, "PlaceholderStreamStateHandle"):
            raise StorageError(f"{self.chk_dir}/{METADATA}: holds a placeholder for a shared file it does not name; "
                               "cannot tell which files it needs.")
        elif self._is(h, "StreamStateHandle"):
            path = h.maybeGetPath()
            if path.isPresent():
                self.file(str(path.get().toUri().getPath()))
            elif h.asBytesIfInMemory().isPresent():
                self.inlined += int(h.getStateSize())
            else:
                self.unknown(h)
        else:
            self.unknown(h)

    def unknown(self, h: Any) -> None:
        raise StorageError(f"{self.chk_dir}/{METADATA}: state handle {h.getClass().getName()} is not understood by "
                           "cutcheck (changelog or file-merging state?); no file can be called unreferenced.")

    def file(self, path: str) -> None:
        path = os.path.normpath(path)  # as written: what a restore reads
        parent = os.path.basename(os.path.dirname(path))
        scope = parent if parent in ("shared", "taskowned") else "exclusive"
        self.files[scope].add(path)


def _items(collection: Any) -> list[Any]:
    """A java.util.Collection as a list (py4j converts Lists and Sets, not every Collection)."""
    if collection is None:
        return []
    return list(collection.toArray()) if hasattr(collection, "toArray") else list(collection)


def relocate(path: str, job_dir: str) -> str:
    """Where a moved or copied directory's own copy of ``path`` is: ``.../<job-id>/rest`` re-rooted under
    the base being read, if that file exists there (else ``path``).

    Only ever a candidate for *keeping* a file: the reader reports paths as written, since a restore
    reads those (reference.storage.scope.reroot does the same for the storage commands)."""
    base = os.path.dirname(job_dir)
    if path.startswith(base + os.sep):
        return path
    parts = path.split(os.sep)
    for k in range(len(parts) - 1, -1, -1):
        if _JOB_ID.match(parts[k]):
            candidate = os.path.join(base, *parts[k:])
            if os.path.exists(candidate):
                return candidate
    return path


def load_metadata(chk_dir: str) -> Any:
    """CheckpointMetadata (a Java object) of ``chk_dir/_metadata``, by Flink's own loader."""
    from cutcheck.flink_bridge.env import gateway

    meta_path = os.path.join(chk_dir, METADATA)
    if not os.path.isfile(meta_path):
        raise StorageError(f"{chk_dir}: no {METADATA} file; give a chk-N directory of a completed checkpoint.")
    jvm = gateway().jvm
    stream = jvm.java.io.DataInputStream(jvm.java.io.BufferedInputStream(jvm.java.io.FileInputStream(meta_path)))
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        return jvm.org.apache.flink.runtime.checkpoint.Checkpoints.loadCheckpointMetadata(stream, loader, chk_dir)
    except Exception as exc:  # Py4JJavaError: corrupt or foreign file
        first = str(exc).strip().splitlines()
        raise StorageError(f"{meta_path}: Flink could not read it ({first[-1][:200] if first else type(exc).__name__}).") from None
    finally:
        stream.close()


def referenced_files(directory: str) -> CheckpointRefs:
    """What one Flink checkpoint (its chk-N directory) references, by scope, as absolute paths."""
    from cutcheck.flink_bridge.env import gateway

    chk_dir = os.path.abspath(directory)
    meta = load_metadata(chk_dir)
    walker = _Walker(gateway().jvm, chk_dir)
    for op in _items(meta.getOperatorStates()):
        walker.handle(op.getCoordinatorState())
        for sub in _items(op.getSubtaskStates().values()):
            for coll in (sub.getManagedKeyedState(), sub.getRawKeyedState(), sub.getManagedOperatorState(),
                         sub.getRawOperatorState(), sub.getInputChannelState(), sub.getUpstreamOutputBufferState(),
                         sub.getResultSubpartitionState()):
                for h in _items(coll):
                    walker.handle(h)
    name = os.path.basename(chk_dir)
    props = meta.getCheckpointProperties()
    savepoint = name.startswith("savepoint") or (props is not None and bool(props.isSavepoint()))
    job = os.path.basename(walker.job_dir) if name.startswith("chk-") else ""
    size = os.path.getsize(os.path.join(chk_dir, METADATA))
    files = {scope: sorted(paths) for scope, paths in walker.files.items()}
    return CheckpointRefs(int(meta.getCheckpointId()), "savepoint" if savepoint else "checkpoint", job, chk_dir, files,
                          inlined_bytes=walker.inlined, metadata_bytes=size)


def any_referenced_files(directory: str) -> CheckpointRefs:
    """The storage CLI's reader: Flink's binary _metadata through the gateway, cutcheck's JSON otherwise."""
    if is_flink_metadata(os.path.join(directory, METADATA)):
        return referenced_files(directory)
    from cutcheck.reference.storage.meta import referenced_files as cutcheck_referenced_files

    return cutcheck_referenced_files(directory)


def inspect_flink(root: str | os.PathLike[str]) -> CheckpointListing:
    """reference.storage.inspection.inspect over a real Flink checkpoint directory (no entropy marker)."""
    from cutcheck.flink_bridge.env import require_flink

    require_flink()
    return inspect(root, any_referenced_files, entropy=None)


def stop_with_savepoint(base_url: str, job_id: str, directory: str, fmt: str, timeout_s: float) -> str | None:
    """Stop a running job with a savepoint of ``fmt`` (canonical | native) in ``directory``; its location.

    REST ``POST /jobs/<id>/stop`` (no drain: the bounded sources are not ended early, the job
    restored from the savepoint finishes them) with ``formatType``, then polls the trigger until the
    savepoint completed; None when Flink did not take it (the job then runs on: a savepoint fails, for
    one, once a bounded source subtask has finished), so the caller may try again."""
    import json
    import time
    import urllib.request

    body = json.dumps({"targetDirectory": os.path.abspath(directory), "drain": False,
                       "formatType": fmt.upper()}).encode()
    req = urllib.request.Request(f"{base_url}/jobs/{job_id}/stop", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        trigger = json.loads(resp.read())["request-id"]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{base_url}/jobs/{job_id}/savepoints/{trigger}", timeout=30) as resp:
            status = json.loads(resp.read())
        if status.get("status", {}).get("id") == "COMPLETED":
            op = status.get("operation") or {}
            if "location" in op:
                return str(op["location"]).removeprefix("file:")
            return None
        time.sleep(0.1)
    raise StorageError(f"job {job_id}: the {fmt} savepoint did not complete within {timeout_s:.0f} s.")
