"""The ``_metadata`` format of the on-disk checkpoint storage, and reading it back.

``_metadata`` is one JSON object (format ``cutcheck-checkpoint/1``)::

    {"format": "cutcheck-checkpoint/1", "job": "<32 hex>", "checkpoint": 7, "kind": "checkpoint",
     "attempt": 0, "parallelism": {"count": 2, ...}, "trigger_step": 280, "end_step": 301,
     "sharing": "shared" | "no_sharing" | "self_contained",
     "files": {"exclusive": [...], "shared": [...], "taskowned": []},
     "tasks": [{"sid": "count[0]", "unaligned": false, "input_done": true, "outputs_pending": 0,
                "acked": true, "processed": [[edge, producer, consumer, n], ...], "emitted": [...],
                "operator": HANDLE, "key_groups": [[kg, HANDLE], ...], "channels": HANDLE}, ...]}

``files`` lists every file the checkpoint references, by scope (facts §5.2), so that a reader can
answer "what does this checkpoint need" without decoding any state. A HANDLE is either
``{"inline": VALUE, "bytes": n}`` (state under the inlining threshold, kept in ``_metadata``) or
``{"file": PATH, "scope": "exclusive"|"shared", "bytes": n, "sha256": HEX}``. PATH (in ``files`` too)
is relative to the checkpoint directory (the one holding ``_metadata``) for every file under the
storage root (``x``, ``../shared/x``; with entropy ``../../../Xy12/ckpts/<job>/shared/x``), so a moved
directory still restores, like Flink's relocatable savepoints; absolute only for a file outside the
root. Older metadata with absolute paths (Flink's rule, facts §5.2) is read as it is.
VALUEs and file contents are reference.storage.codec JSON. ``key_groups`` is present when keyed
state was written per key group (incremental); ``channels`` holds ``{"input": ..., "output": ...}``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from cutcheck.model.errors import StorageError
from cutcheck.model.execution import SubtaskId
from cutcheck.reference.runtime.tasks import TaskSnapshot
from cutcheck.reference.storage.codec import (
    decode,
    decode_channels,
    decode_counters,
    join_keyed,
    loads,
)
from cutcheck.reference.storage.files import METADATA, read_bytes, resolve, sha256
from cutcheck.reference.storage.memory import CompletedCheckpoint

FORMAT = "cutcheck-checkpoint/1"
SCOPES = ("exclusive", "shared", "taskowned")


class MissingStateFile(StorageError):
    """A checkpoint references a file that is gone (or no longer holds what was written)."""

    def __init__(self, message: str, path: str):
        super().__init__(message)
        self.path = path


@dataclass(slots=True)
class CheckpointRefs:
    """What one ``_metadata`` references, read without decoding any state."""

    id: int
    kind: str
    job: str
    path: str  # the checkpoint directory, which holds _metadata
    files: dict[str, list[str]]  # scope -> absolute paths
    inlined_bytes: int = 0
    metadata_bytes: int = 0
    # (vertex, key group) -> (sha256, path) of shared key-group files: what a later checkpoint may reuse
    kg_files: dict[tuple[str, int], tuple[str, str]] = field(default_factory=dict)


def metadata_path(directory: str) -> str:
    return os.path.join(directory, METADATA)


def read_metadata(directory: str) -> tuple[dict[str, Any], int]:
    path = metadata_path(directory)
    data = read_bytes(path)
    if data is None:
        raise StorageError(f"{directory}: no {METADATA} file; give a chk-N or savepoint directory of a completed checkpoint.")
    meta = loads(data, path)
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise StorageError(f"{path}: not a cutcheck checkpoint (format {FORMAT} expected); was it written by another tool?")
    return meta, len(data)


def _malformed(directory: str, exc: Exception) -> StorageError:
    return StorageError(f"{metadata_path(directory)}: malformed checkpoint metadata ({type(exc).__name__}: {exc}).")


def referenced_files(directory: str) -> CheckpointRefs:
    """The per-checkpoint "referenced files" function the inspection is built on."""
    directory = os.path.abspath(directory)
    meta, size = read_metadata(directory)
    return _refs(meta, size, directory)


def refs_from_bytes(data: bytes, directory: str, source: str) -> CheckpointRefs:
    """``referenced_files`` of ``_metadata`` bytes read elsewhere (an object store): ``directory`` is the
    POSIX path its relative paths resolve against, ``source`` names it in errors."""
    meta = loads(data, source)
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise StorageError(f"{source}: not a cutcheck checkpoint (format {FORMAT} expected); was it written by another tool?")
    try:
        return _refs(meta, len(data), directory)
    except StorageError as exc:
        raise StorageError(str(exc).replace(metadata_path(directory), source)) from None


def _refs(meta: dict[str, Any], size: int, directory: str) -> CheckpointRefs:
    try:
        files = {scope: [resolve(p, directory) for p in meta["files"].get(scope, [])] for scope in SCOPES}
        refs = CheckpointRefs(int(meta["checkpoint"]), str(meta["kind"]), str(meta["job"]), directory, files,
                              metadata_bytes=size)
        for task in meta["tasks"]:
            vertex = SubtaskId.parse(task["sid"]).vertex
            handles = [task["operator"], *(h for _, h in task.get("key_groups", [])), task.get("channels")]
            refs.inlined_bytes += sum(h["bytes"] for h in handles if h is not None and "inline" in h)
            for kg, h in task.get("key_groups", []):
                if h.get("scope") == "shared":
                    refs.kg_files[(vertex, int(kg))] = (h["sha256"], resolve(h["file"], directory))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _malformed(directory, exc) from None
    return refs


def read_handle(handle: dict[str, Any], directory: str, cp: int) -> Any:
    if "inline" in handle:
        return handle["inline"]
    path = resolve(handle["file"], directory)
    data = read_bytes(path)
    if data is None:
        raise MissingStateFile(f"checkpoint {cp} ({directory}) references {path}, which does not exist.", path)
    if len(data) != handle["bytes"] or sha256(data) != handle["sha256"]:
        raise MissingStateFile(f"checkpoint {cp} ({directory}): {path} does not hold the state that was written "
                               f"({len(data)} bytes, {handle['bytes']} expected).", path)
    return loads(data, path)


def load_checkpoint(directory: str) -> CompletedCheckpoint:
    """Rebuild the CompletedCheckpoint exactly as the in-memory backend holds it."""
    directory = os.path.abspath(directory)
    meta, _ = read_metadata(directory)
    try:
        cp = int(meta["checkpoint"])
        tasks: dict[SubtaskId, TaskSnapshot] = {}
        for t in meta["tasks"]:
            sid = SubtaskId.parse(t["sid"])
            operator = decode(read_handle(t["operator"], directory, cp))
            if "key_groups" in t:
                pieces = {int(kg): decode(read_handle(h, directory, cp)) for kg, h in t["key_groups"]}
                operator = join_keyed(operator, pieces)
            channels = read_handle(t["channels"], directory, cp) if t.get("channels") is not None else None
            tasks[sid] = TaskSnapshot(
                cp=cp, sid=sid, operator=operator, unaligned=bool(t["unaligned"]),
                processed=decode_counters(t["processed"]),
                input_state=decode_channels(channels["input"]) if channels else {},
                emitted=decode_counters(t["emitted"]),
                output_state=decode_channels(channels["output"]) if channels else {},
                input_done=bool(t["input_done"]), outputs_pending=int(t["outputs_pending"]), acked=bool(t["acked"]))
        return CompletedCheckpoint(cp, str(meta["kind"]), int(meta["attempt"]), dict(meta["parallelism"]), tasks,
                                   int(meta["trigger_step"]), int(meta["end_step"]))
    except StorageError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _malformed(directory, exc) from None


def metadata_bytes(job: str, done: CompletedCheckpoint, sharing: str, tasks: list[dict[str, Any]],
                   files: dict[str, list[str]]) -> bytes:
    meta = {"format": FORMAT, "job": job, "checkpoint": done.cp, "kind": done.kind, "attempt": done.attempt,
            "parallelism": dict(done.parallelism), "trigger_step": done.trigger_step, "end_step": done.end_step,
            "sharing": sharing, "files": {scope: list(files.get(scope, [])) for scope in SCOPES}, "tasks": tasks}
    return (json.dumps(meta, indent=1) + "\n").encode()
