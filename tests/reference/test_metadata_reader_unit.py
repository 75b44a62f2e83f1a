"""reference.storage.flink_metadata without Java: real Flink 2.3 ``_metadata`` files kept in
tests/flink/data/metadata against what Flink's own loader said about them, and hand-built byte
streams for the format versions and handle types those files do not have, for unknown versions
and handle types, and for truncated input."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cutcheck.model.errors import StorageError
from cutcheck.reference.storage import flink_metadata as mr
from cutcheck.reference.storage.flink_metadata_stream import java_utf

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "flink" / "data" / "metadata"
EXPECTED = json.loads((DATA / "expected.json").read_text())["cases"]


# -- real Flink metadata, no JVM ------------------------------------------------------------------
@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_real_flink_metadata_matches_flinks_loader(case: str) -> None:
    want = EXPECTED[case]
    run_dir = DATA / case.split("/", 1)[0]
    refs = mr.referenced_files(str(DATA / case))
    # Relative handles resolve under the copy; absolute ones still name the original run's files.
    origin = f"/work/flink-fixtures/{case.split('/', 1)[0]}/"

    def rel(path: str) -> str:
        for prefix in (str(run_dir) + os.sep, origin):
            if path.startswith(prefix):
                return path[len(prefix):]
        return path

    got = {"id": refs.id, "kind": refs.kind, "job": refs.job, "path": rel(refs.path),
           "files": {scope: sorted(rel(f) for f in files) for scope, files in refs.files.items()},
           "inlined_bytes": refs.inlined_bytes, "metadata_bytes": refs.metadata_bytes}
    want = {**want, "files": {scope: sorted(files) for scope, files in want["files"].items()}}
    assert got == {k: want[k] for k in got}


def test_real_files_cover_the_handle_types_flink_2_writes() -> None:
    seen: set[str] = set()
    formats: set[str | None] = set()
    for case in EXPECTED:
        meta = mr.read_metadata(str(DATA / case / mr.METADATA))
        assert meta.version == 6
        seen |= set(meta.handles)
        formats.add(meta.savepoint_format)
    assert formats == {None, "CANONICAL", "NATIVE"}
    assert seen >= {"byte-stream", "file", "relative-file", "key-groups-v2", "savepoint-key-groups", "incremental-v2",
                    "operator", "merged-input-channel", "merged-result-subpartition", "changelog-v2",
                    "changelog-file-v2", "segment-file", "empty-segment-file", "file-merging-operator"}


def test_a_moved_copy_resolves_relative_paths_in_the_copy(tmp_path: Path) -> None:
    case = "rocksdb/savepoints/savepoint-b0b0b0-ac87f10b4b40"  # native savepoint: relative handles only
    moved = tmp_path / "elsewhere"
    shutil.copytree(DATA / case, moved)
    refs = mr.referenced_files(str(moved))
    assert refs.kind == "savepoint" and refs.files["exclusive"]
    assert all(os.path.dirname(f) == str(moved) for f in refs.files["exclusive"])


def test_imports_and_reads_without_pyflink() -> None:
    """The reader must work where apache-flink is not installed: pyflink imports fail here."""
    case = DATA / "rocksdb/checkpoints/b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0/chk-9"
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'pyflink' or name.startswith('pyflink.') or name == 'py4j' or name.startswith('py4j.'):\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from cutcheck.reference.storage.flink_metadata import any_referenced_files\n"
        f"r = any_referenced_files({str(case)!r})\n"
        "assert r.id == 9 and len(r.files['shared']) == 12, r\n"
        "assert not [m for m in sys.modules if m.startswith(('pyflink', 'py4j'))]\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


# -- hand-built streams ---------------------------------------------------------------------------
class Out:
    """Big-endian fields as Java's DataOutputStream lays them out."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def u8(self, v: int) -> Out:
        self.buf += bytes([v & 0xFF])
        return self

    def i32(self, v: int) -> Out:
        self.buf += struct.pack(">i", v)
        return self

    def i64(self, v: int) -> Out:
        self.buf += struct.pack(">q", v)
        return self

    def utf(self, s: str) -> Out:
        raw = s.encode("utf-8")
        self.buf += struct.pack(">H", len(raw)) + raw
        return self

    def raw(self, b: bytes) -> Out:
        self.buf += b
        return self


def file_handle(o: Out, path: str, size: int = 10) -> None:
    o.u8(mr.FILE).i64(size).utf(path)


def bytes_handle(o: Out, data: bytes) -> None:
    o.u8(mr.BYTES).utf("inline").i32(len(data)).raw(data)


def channel(o: Out, version: int, code: int, delegate: Any) -> None:
    if version >= 6:
        o.u8(code)
    if code in (mr.MERGED_INPUT_CHANNEL, mr.MERGED_RESULT_SUBPARTITION):
        o.i32(0).i64(5)
        delegate(o)
        o.i32(3).raw(b"abc")
        return
    o.i32(0).i32(0).i32(1)  # subtask, gate/partition, channel/subpartition
    o.i32(2).i64(0).i64(7)  # offsets
    o.i64(5)
    delegate(o)


def subtask_state(o: Out, version: int, prefix: str) -> None:
    o.i32(1).u8(mr.OPERATOR).i32(1).utf("state").u8(0).i32(1).i64(0)  # managed operator state
    file_handle(o, f"file:{prefix}/chk-7/op")
    o.i32(1).u8(mr.SEGMENT_OPERATOR).i32(0).utf("/tm").utf("/sh").u8(0)  # raw operator state, file merging
    o.u8(mr.SEGMENT).i64(0).i64(4).i32(1).utf(f"file://{prefix}/shared/job_x_op_y_0_1/seg").utf("logical-1")
    # managed keyed: incremental (v1) with metadata, one shared and one private file
    o.u8(mr.INCREMENTAL).i64(7).utf("backend").i32(0).i32(4)
    file_handle(o, f"{prefix}/chk-7/meta")
    o.i32(1).utf("000001.sst")
    file_handle(o, f"file:{prefix}/shared/sst")
    o.i32(1).utf("MANIFEST")
    o.u8(mr.RELATIVE).utf("private").i64(3)
    # raw keyed: changelog over key groups (bytes) and an in-memory change, then a file increment
    o.u8(mr.CHANGELOG_V2).i32(0).i32(4).i64(0)
    o.i32(1).u8(mr.KEY_GROUPS_V2).i32(0).i32(2).i64(0).i64(4)
    bytes_handle(o, b"kg-state")
    o.utf("id-1")
    o.i32(2).u8(mr.CHANGELOG_BYTES).i32(0).i32(4).i64(0).i64(1).i32(1).i32(0).i32(6).raw(b"change").utf("id-2")
    o.u8(mr.CHANGELOG_FILES_V2).i32(0).i32(4).i32(1).i64(0)
    file_handle(o, f"file:{prefix}/../dstl/log")
    o.i64(1).i64(1).utf("id-3").utf("filesystem")
    o.i64(1).i64(7).utf("id-4")
    merged = version >= 6
    o.i32(1)
    channel(o, version, mr.MERGED_INPUT_CHANNEL if merged else mr.INPUT_CHANNEL,
            lambda x: x.u8(mr.KEY_GROUPS).i32(0).i32(1).i64(0).u8(mr.EMPTY_SEGMENT))
    o.i32(1)
    channel(o, version, mr.RESULT_SUBPARTITION, lambda x: file_handle(x, f"{prefix}/chk-7/out"))
    if version >= 7:
        o.u8(1).i64(5)


PROPERTIES = (b"\xac\xed\x00\x05sr\x008org.apache.flink.runtime.checkpoint.CheckpointProperties"
              b"sr\x001org.apache.flink.runtime.checkpoint.SavepointType t\x00\x06NATIVE")


def metadata(version: int, prefix: str, with_properties: bool = True) -> bytes:
    o = Out().i32(mr.MAGIC).i32(version).i64(7)
    o.i32(1).i32(mr.MASTER_STATE_MAGIC).i32(3).raw(b"xyz")
    o.i32(3)
    # an operator with coordinator state and three subtasks, one of them finished
    if version >= 5:
        o.utf("count").utf("")
    o.i64(1).i64(2).i32(3).i32(128)
    bytes_handle(o, b"coord")
    o.i32(3).i32(0)
    subtask_state(o, version, prefix)
    o.i32(-2)  # subtask 1 finished: no state follows
    o.i32(2).i32(0).i32(0).u8(mr.NULL).u8(mr.NULL).i32(0).i32(0)
    if version >= 7:
        o.u8(0)
    # a fully finished operator, and one with no subtasks
    for count in (-1, 0):
        if version >= 5:
            o.utf("op").utf("uid")
        o.i64(3).i64(4).i32(1).i32(128).u8(mr.NULL).i32(count)
    if version >= 4 and with_properties:
        o.raw(PROPERTIES)
    return bytes(o.buf)


@pytest.mark.parametrize("version", [3, 4, 5, 6, 7])
def test_every_format_version_and_handle_type(tmp_path: Path, version: int) -> None:
    job = tmp_path / ("ab" * 16)
    chk = job / "chk-7"
    chk.mkdir(parents=True)
    (chk / "_metadata").write_bytes(metadata(version, str(job)))
    refs = mr.referenced_files(str(chk))
    assert (refs.id, refs.job) == (7, "ab" * 16)
    assert refs.kind == ("savepoint" if version >= 4 else "checkpoint")
    assert refs.files == {
        "exclusive": sorted([str(chk / "op"), str(chk / "meta"), str(chk / "private"), str(chk / "out"),
                             str(tmp_path / "dstl" / "log")]),
        "shared": sorted([str(job / "shared" / "sst"), str(job / "shared" / "job_x_op_y_0_1" / "seg")]),
        "taskowned": []}
    assert refs.inlined_bytes == len(b"coord") + len(b"kg-state") + len(b"change")
    meta = mr.decode(metadata(version, str(job)))
    assert meta.operators == 3 and meta.version == version
    assert (meta.snapshot_type, meta.savepoint_format) == (("savepoint", "NATIVE") if version >= 4 else (None, None))


def one_sentence(message: str) -> None:
    assert "\n" not in message and message.endswith(".") and ". " not in message, message


def test_unknown_version_is_one_sentence() -> None:
    data = Out().i32(mr.MAGIC).i32(99).i64(1).buf
    with pytest.raises(StorageError, match="format version 99 is not one cutcheck reads") as err:
        mr.decode(bytes(data), "/ck/chk-1/_metadata")
    one_sentence(str(err.value))
    with pytest.raises(StorageError, match="magic number"):
        mr.decode(b"{\"format\": \"cutcheck-checkpoint/1\"}", "x")


def test_unknown_handle_type_is_one_sentence() -> None:
    o = Out().i32(mr.MAGIC).i32(6).i64(1).i32(0).i32(1)
    o.utf("").utf("").i64(1).i64(2).i32(1).i32(128).u8(mr.NULL).i32(1).i32(0)
    o.i32(0).i32(0).u8(42)  # managed keyed state: a handle type Flink 2.3 does not have
    with pytest.raises(StorageError, match="keyed state handle type 42 at byte 69 .format version 6.") as err:
        mr.decode(bytes(o.buf), "/ck/chk-1/_metadata")
    one_sentence(str(err.value))
    o = Out().i32(mr.MAGIC).i32(6).i64(1).i32(0).i32(1)
    o.utf("").utf("").i64(1).i64(2).i32(1).i32(128).u8(mr.NULL).i32(1).i32(0)
    o.i32(0).i32(0).u8(0).u8(0).i32(1).u8(9)  # an input channel handle of an unknown type
    with pytest.raises(StorageError, match="input channel state handle type 9") as err:
        mr.decode(bytes(o.buf), "/ck/chk-1/_metadata")
    one_sentence(str(err.value))


@pytest.mark.parametrize("version", [3, 6, 7])
def test_truncated_input_is_a_storage_error_at_every_length(version: int) -> None:
    whole = metadata(version, "/ck/" + "ab" * 16, with_properties=False)
    for n in range(len(whole)):
        with pytest.raises(StorageError):
            mr.decode(whole[:n], "/ck/chk-7/_metadata")
    if version >= 4:  # the operators are all there, the properties are not
        with pytest.raises(StorageError, match="no checkpoint properties"):
            mr.decode(whole, "/ck/chk-7/_metadata")


def test_truncated_real_file_is_a_storage_error() -> None:
    whole = (DATA / "rocksdb/checkpoints/b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0/chk-9/_metadata").read_bytes()
    end = whole.rfind(b"\xac\xed\x00\x05")
    for n in list(range(0, end, 7)) + [end]:
        with pytest.raises(StorageError) as err:
            mr.decode(whole[:n], "chk-9/_metadata")
        one_sentence(str(err.value).replace("chk-9/_metadata", "m"))


def test_corrupt_counts_do_not_allocate_or_crash() -> None:
    data = Out().i32(mr.MAGIC).i32(6).i64(1).i32(0x7FFFFFFF).buf
    with pytest.raises(StorageError, match="number of master states"):
        mr.decode(bytes(data))


def test_modified_utf8() -> None:
    assert java_utf(b"plain") == "plain"
    assert java_utf(b"\xc0\x80") == "\x00"
    assert java_utf("é€".encode()) == "é€"
    assert java_utf(b"\xed\xa0\xbd\xed\xb8\x80") == "\U0001F600"  # a surrogate pair, three bytes each
    with pytest.raises(ValueError):
        java_utf(b"\xff")


def test_local_path_is_the_uri_path() -> None:
    assert mr.local_path("file:/a/b") == "/a/b"
    assert mr.local_path("file:///a/b") == "/a/b"
    assert mr.local_path("hdfs://nn:8020/a/b") == "/a/b"
    assert mr.local_path("/a/b") == "/a/b"
