"""The pure-Python ``_metadata`` reader against Flink's own loader, file by file, on real runs.

Every checkpoint and savepoint the runs below leave (hashmap with channel state in files, RocksDB
incremental, RocksDB incremental with file merging and the changelog state backend, canonical and
native savepoints of each, plus the unaligned rescale run of test_flink_run) is read twice:
by reference.storage.flink_metadata (no JVM) and by Flink's loader through the gateway. Where the
cutcheck JVM reader (flink_bridge.checkpoints) understands the checkpoint, both must give the same
CheckpointRefs; where it refuses (changelog and file-merging handles), the comparison is against
``jvm_refs`` below, a walk of the same Java objects that also follows those handles.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from cutcheck.flink_bridge import RunOptions, runner
from cutcheck.flink_bridge import env as flink_env
from cutcheck.flink_bridge.checkpoints import load_metadata
from cutcheck.flink_bridge.checkpoints import referenced_files as flink_loader_refs
from cutcheck.model.errors import StorageError
from cutcheck.reference.storage import flink_metadata as pure
from cutcheck.reference.storage.meta import CheckpointRefs
from tests.flink.helpers import EXAMPLES, FLINK_MARKS
from tests.flink.test_flink_run import flink_run  # noqa: F401  (the rescale run, built once per session)

pytestmark = FLINK_MARKS

GRAPH = EXAMPLES / "keyed-pipeline.json"
_STATE = "org.apache.flink.runtime.state."
_CLASSES = {
    "incremental": "IncrementalRemoteKeyedStateHandle", "key_groups": "KeyGroupsStateHandle",
    "operator": "OperatorStreamStateHandle", "channel": "AbstractChannelStateHandle",
    "merged_channel": "AbstractMergedChannelStateHandle", "changelog": "changelog.ChangelogStateBackendHandle",
    "changelog_memory": "changelog.inmemory.InMemoryChangelogStateHandle",
    "changelog_files": "changelog.ChangelogStateHandleStreamImpl",
    "empty_segment": "filemerging.EmptySegmentFileStateHandle", "segment": "filemerging.SegmentFileStateHandle",
    "stream": "StreamStateHandle",
}
# What the runs must exercise between them (names as flink_metadata.HANDLE_NAMES / CHANNEL_NAMES).
EXPECTED_HANDLES = {"byte-stream", "file", "relative-file", "key-groups-v2", "savepoint-key-groups", "incremental-v2",
                    "operator", "merged-input-channel", "merged-result-subpartition", "changelog-v2",
                    "changelog-file-v2", "segment-file", "empty-segment-file", "file-merging-operator"}


# -- Flink's loader, every handle followed ----------------------------------------------------
class _JvmWalk:
    def __init__(self, jvm: Any):
        self.kinds = {k: jvm.java.lang.Class.forName(_STATE + v) for k, v in _CLASSES.items()}
        self.paths: list[str] = []
        self.inlined = 0

    def isa(self, h: Any, kind: str) -> bool:
        return bool(self.kinds[kind].isInstance(h))

    def walk(self, h: Any) -> None:
        if h is None:
            return
        if self.isa(h, "incremental"):
            self.walk(h.getMetaDataStateHandle())
            for part in [*_items(h.getSharedState()), *_items(h.getPrivateState())]:
                self.walk(part.getHandle())
        elif self.isa(h, "key_groups") or self.isa(h, "operator"):
            self.walk(h.getDelegateStateHandle())
        elif self.isa(h, "channel") or self.isa(h, "merged_channel"):
            self.walk(h.getDelegate())
        elif self.isa(h, "changelog"):
            for part in [*_items(h.getMaterializedStateHandles()), *_items(h.getNonMaterializedStateHandles())]:
                self.walk(part)
        elif self.isa(h, "changelog_memory"):
            self.inlined += sum(len(c.getChange()) for c in _items(h.getChanges()))
        elif self.isa(h, "changelog_files"):
            for pair in _items(h.getHandlesAndOffsets()):
                self.walk(pair.getField(0))
        elif self.isa(h, "empty_segment"):
            return
        elif self.isa(h, "segment"):
            self.paths.append(str(h.getFilePath().toUri().getPath()))
        elif self.isa(h, "stream"):
            path = h.maybeGetPath()
            if path.isPresent():
                self.paths.append(str(path.get().toUri().getPath()))
            elif h.asBytesIfInMemory().isPresent():
                self.inlined += int(h.getStateSize())
            else:
                raise AssertionError(f"unexpected stream handle {h.getClass().getName()}")
        else:
            raise AssertionError(f"unexpected handle {h.getClass().getName()}")


def _items(collection: Any) -> list[Any]:
    if collection is None:
        return []
    return list(collection.toArray()) if hasattr(collection, "toArray") else list(collection)


def jvm_refs(directory: str) -> CheckpointRefs:
    """CheckpointRefs from Flink's loader, following every handle type (the cross-check's reference)."""
    chk_dir = os.path.abspath(directory)
    meta = load_metadata(chk_dir)
    walk = _JvmWalk(flink_env.gateway().jvm)
    for op in _items(meta.getOperatorStates()):
        walk.walk(op.getCoordinatorState())
        for sub in _items(op.getSubtaskStates().values()):
            for coll in (sub.getManagedKeyedState(), sub.getRawKeyedState(), sub.getManagedOperatorState(),
                         sub.getRawOperatorState(), sub.getInputChannelState(), sub.getResultSubpartitionState()):
                for h in _items(coll):
                    walk.walk(h)
    props = meta.getCheckpointProperties()
    decoded = pure.FlinkMetadata(0, int(meta.getCheckpointId()), 0,
                                 [pure.StateRef("file", 0, p) for p in walk.paths] + [pure.StateRef("inline", walk.inlined)],
                                 snapshot_type="savepoint" if props is not None and props.isSavepoint() else None)
    return pure.refs_of(decoded, chk_dir, os.path.getsize(os.path.join(chk_dir, pure.METADATA)))


def as_json(refs: CheckpointRefs) -> dict[str, Any]:
    return {"id": refs.id, "kind": refs.kind, "job": refs.job, "path": refs.path, "files": refs.files,
            "inlined_bytes": refs.inlined_bytes, "metadata_bytes": refs.metadata_bytes}


def metadata_dirs(root: Path) -> list[str]:
    return sorted(d for d, _, files in os.walk(root) if pure.METADATA in files)


# -- the runs -----------------------------------------------------------------------------------
@contextlib.contextmanager
def _savepoints_during(job: str, target: Path, log: list[str]) -> Iterator[None]:
    """Trigger a canonical and a native savepoint of ``job`` once its first checkpoint completed."""
    port: dict[str, int] = {}
    original = flink_env.mini_cluster

    @contextlib.contextmanager
    def cluster(slots: int, extra: dict[str, str] | None = None) -> Iterator[flink_env.Cluster]:
        with original(slots, extra) as c:
            port["port"] = c.port
            yield c

    def trigger() -> None:
        deadline = time.monotonic() + 300
        while "port" not in port and time.monotonic() < deadline:
            time.sleep(0.1)
        base = f"http://127.0.0.1:{port.get('port')}/jobs/{job}"
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                if (json.load(urllib.request.urlopen(f"{base}/checkpoints", timeout=10)).get("latest") or {}).get("completed"):
                    break
            time.sleep(0.1)
        for fmt in ("CANONICAL", "NATIVE"):
            with contextlib.suppress(Exception):
                body = json.dumps({"target-directory": str(target), "cancel-job": False, "formatType": fmt}).encode()
                req = urllib.request.Request(f"{base}/savepoints", body, {"Content-Type": "application/json"}, method="POST")
                trigger_id = json.load(urllib.request.urlopen(req, timeout=10))["request-id"]
                while time.monotonic() < deadline:
                    status = json.load(urllib.request.urlopen(f"{base}/savepoints/{trigger_id}", timeout=10))
                    if status["status"]["id"] == "COMPLETED":
                        log.append(f"{fmt} {status.get('operation')}")
                        break
                    time.sleep(0.1)

    thread = threading.Thread(target=trigger, daemon=True)
    with mock.patch.object(flink_env, "mini_cluster", cluster):
        thread.start()
        yield
    thread.join(timeout=120)


def _run(base: Path, name: str, job: str, extra: dict[str, str], **options: Any) -> None:
    """One job that fails after some checkpoints (so they are retained), with savepoints on the way."""
    original = runner.job_config

    def job_config(*args: Any, **kwargs: Any) -> dict[str, str]:
        return {**original(*args, **kwargs), **extra}

    log: list[str] = []
    with mock.patch.dict(flink_env.CLUSTER_DEFAULTS, extra), mock.patch.object(runner, "job_config", job_config), \
            _savepoints_during(job, base / name / "savepoints", log):
        result = runner.run(GRAPH, base / name / "work", RunOptions(
            checkpoint_dir=str(base / name / "checkpoints"), job_id=job, retained=3, restart=False, **options))
    assert [j.stats.state for j in result.jobs if j.stats] == ["FAILED"]
    (base / name / "savepoints.log").write_text("\n".join(log))


@pytest.fixture(scope="module")
def metadata_runs(shared_dir: Any) -> Path:
    def build(base: Path) -> None:
        # hashmap, unaligned, nothing inlined: channel state and keyed state in files
        _run(base, "hashmap", "a1" * 16, {"execution.checkpointing.data-inline-threshold": "0b"},
             records=12000, fail_after=12)
        # RocksDB incremental: shared/ and private files (inline threshold 0 is the runner's default here)
        _run(base, "rocksdb", "b1" * 16, {}, records=8000, fail_after=8, incremental=True)
        # RocksDB incremental under the changelog state backend with its log in files, and file merging
        merging = {"state.changelog.enabled": "true", "state.changelog.storage": "filesystem",
                   "dstl.dfs.base-path": (base / "merging" / "dstl").as_uri(),
                   "state.changelog.periodic-materialize.interval": "1s",
                   "execution.checkpointing.file-merging.enabled": "true"}
        _run(base, "merging", "e1" * 16, merging, records=8000, fail_after=8, incremental=True)

    return shared_dir("flink-metadata-reader", build)


def test_pure_python_reader_matches_flinks_loader(metadata_runs: Path, flink_run: tuple[Path, dict[str, Any]]) -> None:  # noqa: F811
    dirs = metadata_dirs(metadata_runs) + metadata_dirs(flink_run[0] / "flink" / "checkpoints")
    seen: set[str] = set()
    formats: set[str] = set()
    refused: list[str] = []
    timing = {"pure": 0.0, "jvm": 0.0}
    for d in dirs:
        start = time.perf_counter()
        mine = pure.referenced_files(d)
        timing["pure"] += time.perf_counter() - start
        decoded = pure.read_metadata(os.path.join(d, pure.METADATA))
        seen |= set(decoded.handles)
        if decoded.savepoint_format:
            formats.add(decoded.savepoint_format)
        # Every handle followed: the same files, scopes and inline bytes as Flink's own objects.
        assert as_json(mine) == as_json(jvm_refs(d)), d
        start = time.perf_counter()
        try:
            theirs = flink_loader_refs(d)
        except StorageError as exc:  # the gateway reader refuses changelog and file-merging handles
            assert "changelog" in str(exc).lower() or "filemerging" in str(exc).lower(), str(exc)
            refused.append(d)
            continue
        finally:
            timing["jvm"] += time.perf_counter() - start
        assert as_json(mine) == as_json(theirs), d
    kinds = {pure.referenced_files(d).kind for d in dirs}
    print(f"\n{len(dirs)} _metadata files, {len(refused)} refused by the gateway reader; "
          f"pure {1000 * timing['pure'] / len(dirs):.2f} ms each, gateway {1000 * timing['jvm'] / len(dirs):.1f} ms each")
    assert kinds == {"checkpoint", "savepoint"}
    assert formats == {"CANONICAL", "NATIVE"}, "both savepoint formats were taken"
    assert seen >= EXPECTED_HANDLES, f"not exercised: {sorted(EXPECTED_HANDLES - seen)}"
    assert all("merging" in d for d in refused), refused


def test_a_copied_directory_reads_the_same(metadata_runs: Path, tmp_path: Path) -> None:
    """A copy: relative paths (savepoints, a checkpoint's own files) resolve in it, absolute ones name the original."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(metadata_runs / "rocksdb", copy)
    for d in metadata_dirs(copy):
        mine, theirs = pure.referenced_files(d), flink_loader_refs(d)
        assert as_json(mine) == as_json(theirs), d
        # exclusive files are written relative to their directory, shared ones (RocksDB's SSTs) absolute
        assert mine.files["exclusive"] and all(os.path.dirname(f) == d for f in mine.files["exclusive"]), d
        original = str(metadata_runs / "rocksdb") + os.sep
        assert all(f.startswith(original) for f in mine.files["shared"]), d
