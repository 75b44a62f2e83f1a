"""Flink's checkpoint ``_metadata`` binary format and its decoder (``decode``, ``read_metadata``).

The format (magic ``0x4960672d``, then a version int) as Flink 1.11 to 2.x write it:

* version 3: checkpoint id, master states (magic, length, skipped), operator states: operator id,
  parallelism, max parallelism, coordinator state, subtask states (a negative count means fully
  finished, a negative index a finished subtask). A subtask holds managed and raw operator state,
  managed and raw keyed state, input-channel and result-subpartition state.
* version 4 adds the checkpoint properties (Java-serialized) after the operators; version 5 the
  operator name and uid before each operator; version 6 typed channel-state handles (merged
  ones too); version 7 an optional regional-checkpoint reference after each subtask.

Handles walked down to files and inline bytes, exactly where the JVM reader looks:
keyed (key-groups v1/v2/savepoint, incremental RocksDB v1/v2 with metadata, shared and private
files, changelog with its materialized and non-materialized parts, in-memory and file changelog
increments), operator (plain and file-merging), channel state (input channel, result
subpartition, merged input, merged output), stream handles (inline bytes, file, relative path of
a relocatable savepoint resolved against the directory read, key-group wrapped, file-merging
segment, empty segment). Master states are not walked (the JVM reader does not either).

An unknown version or handle type is one StorageError sentence. Paths and scopes of the files
found are ``reference.storage.flink_metadata``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cutcheck.model.errors import StorageError
from cutcheck.reference.storage.flink_metadata_stream import _I64, _U16, JavaInput

METADATA = "_metadata"
MAGIC = 0x4960672D
MASTER_STATE_MAGIC = -0x3694E96A  # 0xc96b1696 as a Java int
VERSIONS = (3, 4, 5, 6, 7)

# Handle type bytes (MetadataV2V3SerializerBase); one numbering for keyed, operator and stream handles.
NULL, BYTES, FILE, KEY_GROUPS, OPERATOR, INCREMENTAL, RELATIVE, SAVEPOINT_KEY_GROUPS = 0, 1, 2, 3, 4, 5, 6, 7
CHANGELOG, CHANGELOG_BYTES, CHANGELOG_FILES, INCREMENTAL_V2, KEY_GROUPS_V2 = 8, 9, 10, 11, 12
CHANGELOG_FILES_V2, CHANGELOG_V2, SEGMENT, EMPTY_SEGMENT, SEGMENT_OPERATOR = 13, 14, 15, 16, 17
# Channel-state handle types of format 6 and later (ChannelStateHandleSerializerV2).
INPUT_CHANNEL, RESULT_SUBPARTITION, MERGED_INPUT_CHANNEL, MERGED_RESULT_SUBPARTITION = 1, 2, 3, 4
HANDLE_NAMES = {
    NULL: "null", BYTES: "byte-stream", FILE: "file", KEY_GROUPS: "key-groups", OPERATOR: "operator",
    INCREMENTAL: "incremental", RELATIVE: "relative-file", SAVEPOINT_KEY_GROUPS: "savepoint-key-groups",
    CHANGELOG: "changelog", CHANGELOG_BYTES: "changelog-in-memory", CHANGELOG_FILES: "changelog-file",
    INCREMENTAL_V2: "incremental-v2", KEY_GROUPS_V2: "key-groups-v2", CHANGELOG_FILES_V2: "changelog-file-v2",
    CHANGELOG_V2: "changelog-v2", SEGMENT: "segment-file", EMPTY_SEGMENT: "empty-segment-file",
    SEGMENT_OPERATOR: "file-merging-operator"}
CHANNEL_NAMES = {INPUT_CHANNEL: "input-channel", RESULT_SUBPARTITION: "result-subpartition",
                 MERGED_INPUT_CHANNEL: "merged-input-channel", MERGED_RESULT_SUBPARTITION: "merged-result-subpartition"}


@dataclass(slots=True)
class StateRef:
    """One leaf the metadata names: a file (``path`` is Flink's path string) or inline bytes."""

    kind: str  # file | relative | segment | inline | changelog-inline
    size: int
    path: str | None = None


@dataclass(slots=True)
class FlinkMetadata:
    version: int
    checkpoint_id: int
    operators: int
    refs: list[StateRef] = field(default_factory=list)
    snapshot_type: str | None = None  # "savepoint" | "checkpoint" from the properties (format 4+)
    savepoint_format: str | None = None  # CANONICAL | NATIVE for a savepoint with properties
    handles: dict[str, int] = field(default_factory=dict)  # handle type name -> how many were read


class _Decoder:
    def __init__(self, data: bytes, source: str, sink: Any = None):
        self.src = JavaInput(data, source)
        self.source = source
        self.version = 0
        self.refs: Any = [] if sink is None else sink  # anything with append(StateRef)
        self.seen: dict[str, int] = {}

    def saw(self, code: int, names: dict[int, str] = HANDLE_NAMES) -> None:
        if code:
            name = names.get(code, str(code))
            self.seen[name] = self.seen.get(name, 0) + 1

    def unknown(self, family: str, code: int, at: int) -> StorageError:
        return StorageError(f"{self.source}: {family} handle type {code} at byte {at} (format version {self.version}) "
                            "is not one cutcheck knows, so it cannot tell which files this checkpoint needs.")

    # -- the file -----------------------------------------------------------------------------
    def metadata(self) -> FlinkMetadata:
        src = self.src
        if src.remaining() < 8 or src.i32("the magic number") != MAGIC:
            raise StorageError(f"{self.source}: not Flink checkpoint metadata (it does not start with the magic number 4960672d).")
        self.version = src.i32("the format version")
        if self.version not in VERSIONS:
            raise StorageError(f"{self.source}: checkpoint metadata format version {self.version} is not one cutcheck reads "
                               f"(it reads versions {VERSIONS[0]} to {VERSIONS[-1]}, written by Flink 1.11 to 2.x).")
        cp = src.i64("the checkpoint id")
        if cp < 0:
            raise StorageError(f"{self.source}: negative checkpoint id {cp}; the file is corrupt.")
        for _ in range(src.count("master states", 8)):
            at = src.pos
            if src.i32("a master state's magic number") != MASTER_STATE_MAGIC:
                raise StorageError(f"{self.source}: the master state at byte {at} lacks its magic number; the file is corrupt.")
            src.skip(src.count("master state bytes"), "a master state")
        operators = src.count("operator states", 4)
        for _ in range(operators):
            self.operator()
        meta = FlinkMetadata(self.version, cp, operators, self.refs if isinstance(self.refs, list) else [],
                             handles=self.seen)
        if self.version >= 4:
            at = src.pos
            props = src.raw(src.remaining(), "the checkpoint properties")
            if not props.startswith(b"\xac\xed\x00\x05"):
                raise StorageError(f"{self.source}: no checkpoint properties after the operator states at byte {at} "
                                   f"(format version {self.version} has them); the file is truncated or corrupt.")
            meta.snapshot_type, meta.savepoint_format = _properties(props)
        return meta

    def operator(self) -> None:
        src = self.src
        if self.version >= 5:
            src.utf("an operator name")
            src.utf("an operator uid")
        src.skip(16 + 8, "an operator id and parallelism")
        self.stream("coordinator state")
        subtasks = src.i32("the number of subtask states")
        for _ in range(max(subtasks, 0)):  # negative: the operator finished on every subtask
            if src.i32("a subtask index") >= 0:  # negative: that subtask had finished
                self.subtask()

    def subtask(self) -> None:
        src = self.src
        for what in ("managed operator state", "raw operator state"):
            if src.i32(f"whether there is {what}") != 0:
                self.operator_state()
        self.keyed()
        self.keyed()
        channel: Callable[[bool], None] = self.channel_v2 if self.version >= 6 else self.channel_v1
        for inputs in (True, False):
            for _ in range(src.count("channel state handles", 1)):
                channel(inputs)
        if self.version >= 7:
            at = src.pos
            marker = src.u8("the regional checkpoint marker")
            if marker == 1:
                src.i64("the regional checkpoint id")
            elif marker != 0:
                raise self.unknown("regional checkpoint marker", marker, at)

    # -- keyed and operator state ---------------------------------------------------------------
    def keyed(self) -> None:
        src = self.src
        at = src.pos
        code = src.u8("a keyed state handle type")
        self.saw(code)
        if code == NULL:
            return
        if code in (KEY_GROUPS, KEY_GROUPS_V2, SAVEPOINT_KEY_GROUPS):
            self.key_group_offsets()
            self.stream("key-group state")
            if code == KEY_GROUPS_V2:
                src.utf("a state handle id")
        elif code in (INCREMENTAL, INCREMENTAL_V2):
            src.i64("a checkpoint id")
            src.utf("a backend id")
            src.skip(8, "a key-group range")
            if code == INCREMENTAL_V2:
                src.i64("a checkpointed size")
            self.stream("RocksDB metadata")
            for what in ("shared RocksDB files", "private RocksDB files"):
                n = src.count(what, 3)
                for _ in range(n - self.plain_files(n)):  # what the fast loop left: read field by field
                    src.utf("a local file name")
                    self.stream(what)
            if code == INCREMENTAL_V2:
                src.utf("a state handle id")
        elif code in (CHANGELOG, CHANGELOG_V2):
            src.skip(8 + 8, "a key-group range and checkpointed size")
            for what in ("materialized changelog parts", "non-materialized changelog parts"):
                for _ in range(src.count(what, 1)):
                    self.keyed()
            src.i64("a materialization id")
            if code == CHANGELOG_V2:
                src.i64("a checkpoint id")
            src.utf("a state handle id")
        elif code == CHANGELOG_BYTES:
            src.skip(8 + 16, "a key-group range and sequence numbers")
            total = 0
            for _ in range(src.count("in-memory state changes", 8)):
                src.i32("a key group")
                n = src.count("state change bytes")
                src.skip(n, "a state change")
                total += n
            self.refs.append(StateRef("changelog-inline", total))
            src.utf("a state handle id")
        elif code in (CHANGELOG_FILES, CHANGELOG_FILES_V2):
            src.skip(8, "a key-group range")
            for _ in range(src.count("changelog files", 9)):
                src.i64("an offset")
                self.stream("changelog")
            src.skip(16, "a state size and checkpointed size")
            src.utf("a state handle id")
            if code == CHANGELOG_FILES_V2:
                src.utf("a storage identifier")
        else:
            raise self.unknown("keyed state", code, at)

    def plain_files(self, n: int) -> int:
        """Read up to ``n`` (local name, file handle) entries of an incremental handle in one tight loop,
        while each is the common case (ASCII names, a plain FILE handle, within the buffer); return how many.
        The first entry that is anything else is left, at its start, to the field-by-field reader, which
        reads it (or fails on it) exactly as it always did. A RocksDB handle names up to millions of files."""
        src = self.src
        data, pos = src.data, src.pos
        end = len(data)
        paths: list[str] = []  # then one call for the lot: a sink may take plain paths (files=) without a StateRef each
        append = paths.append
        add_files = getattr(self.refs, "add_files", None)
        sizes: list[int] = []  # only for a sink without add_files: a sink that takes plain paths has no use for them
        keep_size = add_files is None
        u16, i64 = _U16.unpack_from, _I64.unpack_from
        done = 0
        while done < n and pos + 2 <= end:
            name_end = pos + 2 + u16(data, pos)[0]
            if name_end + 11 > end or data[name_end] != FILE or not data[pos + 2:name_end].isascii():
                break
            path_end = name_end + 11 + u16(data, name_end + 9)[0]
            if path_end > end:
                break
            try:  # ASCII or not in one step (the bytes are decoded either way)
                append(data[name_end + 11:path_end].decode("ascii"))
            except UnicodeDecodeError:
                break
            if keep_size:
                sizes.append(i64(data, name_end + 1)[0])
            pos = path_end
            done += 1
        src.pos = pos
        if add_files is not None:
            add_files(paths)
        else:
            self.refs.extend(StateRef("file", size, path) for size, path in zip(sizes, paths, strict=True))
        if done:
            self.seen[HANDLE_NAMES[FILE]] = self.seen.get(HANDLE_NAMES[FILE], 0) + done
        return done

    def key_group_offsets(self) -> None:
        self.src.i32("the first key group")
        self.src.skip(8 * self.src.count("key groups", 8), "key-group offsets")

    def operator_state(self) -> None:
        src = self.src
        at = src.pos
        code = src.u8("an operator state handle type")
        self.saw(code)
        if code == NULL:
            return
        if code not in (OPERATOR, SEGMENT_OPERATOR):
            raise self.unknown("operator state", code, at)
        for _ in range(src.count("operator state names", 7)):
            src.utf("an operator state name")
            src.u8("a distribution mode")
            src.skip(8 * src.count("partition offsets", 8), "partition offsets")
        if code == SEGMENT_OPERATOR:
            src.utf("the task-owned directory")
            src.utf("the shared directory")
            src.boolean("whether the state is empty")
        self.stream("operator state")

    # -- channel state ------------------------------------------------------------------------
    def channel_v1(self, inputs: bool) -> None:
        src = self.src
        if self.version < 6:
            self.saw(INPUT_CHANNEL if inputs else RESULT_SUBPARTITION, CHANNEL_NAMES)
        src.skip(4 + 8, "a subtask index and channel")
        src.skip(8 * src.count("channel offsets", 8), "channel offsets")
        src.i64("a channel state size")
        self.stream("input channel" if inputs else "result subpartition")

    def channel_v2(self, inputs: bool) -> None:
        src = self.src
        at = src.pos
        code = src.u8("a channel state handle type")
        self.saw(code, CHANNEL_NAMES)
        plain, merged = (INPUT_CHANNEL, MERGED_INPUT_CHANNEL) if inputs else (RESULT_SUBPARTITION, MERGED_RESULT_SUBPARTITION)
        if code == plain:
            self.channel_v1(inputs)
        elif code == merged:
            src.skip(4 + 8, "a subtask index and state size")
            self.stream("merged channel")
            src.skip(src.count("merged channel offsets"), "merged channel offsets")
        else:
            raise self.unknown("input channel state" if inputs else "result subpartition state", code, at)

    # -- the leaves ----------------------------------------------------------------------------
    def stream(self, what: str) -> None:
        src = self.src
        at = src.pos
        code = src.u8(f"a {what} handle type")
        self.saw(code)
        if code in (NULL, EMPTY_SEGMENT):
            return
        if code == BYTES:
            src.utf("an inline handle name")
            n = src.count("inline state bytes")
            src.skip(n, "inline state")
            self.refs.append(StateRef("inline", n))
        elif code == FILE:
            size = src.i64("a file size")
            self.refs.append(StateRef("file", size, src.utf("a file path")))
        elif code == RELATIVE:
            rel = src.utf("a relative file path")
            self.refs.append(StateRef("relative", src.i64("a file size"), rel))
        elif code == KEY_GROUPS:
            self.key_group_offsets()
            self.stream(what)
        elif code == SEGMENT:
            src.i64("a segment offset")
            size = src.i64("a segment size")
            src.i32("a segment scope")
            self.refs.append(StateRef("segment", size, src.utf("a segment file path")))
            src.utf("a logical file id")
        else:
            raise self.unknown(f"{what} stream", code, at)


def _properties(raw: bytes) -> tuple[str | None, str | None]:
    """(snapshot type, savepoint format) from the Java-serialized CheckpointProperties, if recognisable."""
    if b"CheckpointProperties" not in raw:
        return None, None
    if b"org.apache.flink.runtime.checkpoint.SavepointType" in raw:
        fmt = next((f for f in ("CANONICAL", "NATIVE") if bytes([len(f) >> 8, len(f) & 0xFF]) + f.encode() in raw), None)
        return "savepoint", fmt
    if b"org.apache.flink.runtime.checkpoint.CheckpointType" in raw:
        return "checkpoint", None
    return None, None


def decode(data: bytes, source: str = METADATA, sink: Any = None) -> FlinkMetadata:
    """Decode Flink ``_metadata`` bytes; ``source`` names them in errors. With ``sink`` (anything with
    ``append``) each StateRef goes there as it is read, and the result's ``refs`` stays empty."""
    return _Decoder(data, source, sink).metadata()


def read_metadata(path: str) -> FlinkMetadata:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise StorageError(f"{path}: cannot read it ({exc.strerror or exc}).") from None
    return decode(data, path)
