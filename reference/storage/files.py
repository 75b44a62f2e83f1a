"""File operations of the on-disk checkpoint storage: layout names, entropy, never-overwrite
creates, atomic metadata, deletes, and the crash hook the crash test uses.

Every operation that changes the directory counts as one *file operation*; writing a file counts
twice (first half, second half) so that a crash can leave a torn file behind, as a killed process
would. With ``CUTCHECK_STORAGE_CRASH_AFTER=K`` in the environment (or ``crash_after=K``), the
process calls ``os._exit(1)`` instead of performing operation K+1: no cleanup, no atexit, exactly
a kill. Writes are not fsynced; the model is a crashed process, not a lost machine.
"""

from __future__ import annotations

import hashlib
import os
import random
import string
import uuid
from pathlib import Path

METADATA = "_metadata"
METADATA_TMP = "_metadata.inprogress"
CHK_PREFIX = "chk-"
SHARED_DIR = "shared"
TASKOWNED_DIR = "taskowned"
SAVEPOINT_PREFIX = "savepoint-"
CRASH_ENV = "CUTCHECK_STORAGE_CRASH_AFTER"
ALPHANUMERIC = string.ascii_letters + string.digits  # s3.entropy: 62 characters (facts §5.6)


def remove_marker(path: str, key: str | None) -> str:
    """removeEntropyMarkerIfPresent: the key is dropped (metadata, directories, pointers)."""
    if key and key in path:
        path = path.replace(key, "", 1)
    return os.path.normpath(path)


def inject_entropy(path: str, key: str | None, length: int, rng: random.Random) -> str:
    """addEntropy: the first occurrence of the key becomes fresh random characters (data files)."""
    if key and key in path:
        path = path.replace(key, "".join(rng.choice(ALPHANUMERIC) for _ in range(length)), 1)
    return os.path.normpath(path)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def crash_after_from_env() -> int | None:
    raw = os.environ.get(CRASH_ENV)
    return int(raw) if raw and raw.strip().isdigit() else None


class FileOps:
    def __init__(self, rng: random.Random, crash_after: int | None = None, log: list[tuple[str, str]] | None = None):
        self.rng = rng
        self.crash_after = crash_after if crash_after is not None else crash_after_from_env()
        self.ops = 0
        self.log = log  # (operation, path) of every file operation, when a test asks for it
        self.created: set[str] = set()  # data files this run wrote and has not deleted or handed to the user

    def _op(self, kind: str, path: str) -> None:
        if self.crash_after is not None and self.ops >= self.crash_after:
            os._exit(1)  # the crash test: die mid-checkpoint like a killed process
        self.ops += 1
        if self.log is not None:
            self.log.append((kind, path))

    def new_name(self) -> str:
        """A UUID like Flink's data-file names, drawn from the seeded generator (deterministic runs)."""
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def mkdirs(self, path: str) -> None:
        if not os.path.isdir(path):
            self._op("mkdir", path)
            os.makedirs(path, exist_ok=True)

    def create(self, directory_template: str, data: bytes, entropy: str | None, entropy_length: int) -> str:
        """Write ``data`` to a new file named by a fresh UUID; return its absolute path.

        The file is opened with O_EXCL and a name drawn again if taken, so no run ever overwrites
        a file another checkpoint (of this run or an earlier one) may reference.
        """
        while True:
            path = inject_entropy(os.path.join(directory_template, self.new_name()), entropy, entropy_length, self.rng)
            self.mkdirs(os.path.dirname(path))
            self._op("create", path)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                continue
            self._write(fd, path, data)
            self.created.add(path)
            return path

    def _write(self, fd: int, path: str, data: bytes) -> None:
        try:
            half = len(data) // 2
            self._op("write", path)
            os.write(fd, data[:half])
            self._op("write", path)
            os.write(fd, data[half:])
        finally:
            os.close(fd)

    def write_metadata(self, directory: str, data: bytes) -> str:
        """Write ``_metadata`` last and atomically: a temporary file, then a rename over the name."""
        self.mkdirs(directory)
        tmp, final = os.path.join(directory, METADATA_TMP), os.path.join(directory, METADATA)
        self._op("create", tmp)
        self._write(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), tmp, data)
        self._op("commit", final)
        os.replace(tmp, final)
        return final

    def delete(self, path: str) -> bool:
        self._op("delete", path)
        self.created.discard(path)
        try:
            os.remove(path)
            return True
        except FileNotFoundError:
            return False

    def rmdir_if_empty(self, path: str) -> None:
        if os.path.isdir(path) and not os.listdir(path):
            self._op("rmdir", path)
            os.rmdir(path)


def resolve(path: str, base: str) -> str:
    """A handle's path: absolute as written (older metadata, files outside the storage root), or
    relative to the checkpoint directory that holds the ``_metadata`` (``x``, ``../shared/x``)."""
    return path if os.path.isabs(path) else os.path.normpath(os.path.join(base, path))


def read_bytes(path: str) -> bytes | None:
    try:
        return Path(path).read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
