"""The one door the storage commands use to reach a checkpoint directory: a local directory or an
object store (S3, and any filesystem PyArrow or fsspec provides).

Paths inside cutcheck are *internal* paths: POSIX, absolute. On the local file system they are
the paths themselves (``file:/x`` and ``file:///x``, the form Flink reports, are ``/x``); on an
object store ``s3://bucket/key`` is ``/bucket/key``, so that the directory logic (dirname,
relpath, the entropy marker) is the same everywhere. ``store.uri(path)`` shows a path as the user
wrote it (``s3://bucket/key``); ``store.internal(ref)`` maps a path a ``_metadata`` names (an
``s3a://`` or ``s3://`` URI, a relative path already resolved) back to an internal path.

A store lists recursively with sizes and modification times (an object's LastModified), reads,
writes small objects (the quarantine manifest), copies, and deletes in batches the way the store
allows (S3 DeleteObjects: 1000 keys a request). ``open_store`` picks the store for a path:
``s3://``, ``s3a://``, ``s3n://`` and ``s3p://`` go to reference.storage.s3 (boto3: the usual
AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_REGION / AWS_ENDPOINT_URL settings, or
``--endpoint-url``), other schemes to PyArrow's ``FileSystem.from_uri`` and then to fsspec.
"""

from __future__ import annotations

import os
import posixpath
import re
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from cutcheck.model.errors import StorageError

if TYPE_CHECKING:
    from cutcheck.reference.storage.filetable import DirFiles

QUARANTINE_DIR = ".cutcheck-quarantine"
S3_SCHEMES = ("s3", "s3a", "s3n", "s3p")
Progress = Callable[[int], None]  # called with the number of files listed so far, as a listing goes
_URI = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://([^/]*)(/.*)?\Z")


@dataclass(slots=True, frozen=True)
class FileInfo:
    path: str  # internal
    size: int
    mtime: float  # seconds since the epoch (an object's LastModified)
    etag: str = ""  # an object store's ETag (what the quarantine checks a stored object by)


class Store(Protocol):
    """What the storage commands need of a file system. Paths are internal (see the module docstring)."""

    is_local: bool
    scheme: str

    def uri(self, path: str) -> str: ...
    def internal(self, ref: str) -> str: ...
    def realpath(self, path: str) -> str: ...
    def isdir(self, path: str) -> bool: ...
    def isfile(self, path: str) -> bool: ...
    def listdir(self, path: str, fresh: bool = False) -> list[str]: ...  # fresh: asked again, never a cached listing
    def files(self, root: str) -> list[FileInfo]: ...
    def stat(self, path: str, fresh: bool = False) -> FileInfo | None: ...
    def read(self, path: str) -> bytes | None: ...
    def write(self, path: str, data: bytes) -> None: ...
    def copy(self, src: str, dst: str, size: int | None = None) -> FileInfo: ...
    def delete(self, paths: list[str]) -> list[str]: ...


def split_uri(text: str) -> tuple[str, str, str] | None:
    """(scheme, authority, path) of ``scheme://authority/path``; None for anything else."""
    m = _URI.match(text)
    return (m.group(1).lower(), m.group(2), m.group(3) or "") if m else None


def local_form(text: str) -> str | None:
    """``file:/x``, ``file:///x``, ``file://localhost/x`` and plain paths as a local path; None for other schemes."""
    low = text.lower()
    if low.startswith("file:"):
        rest = text[5:]
        if rest.startswith("//"):
            slash = rest.find("/", 2)
            rest = rest[slash:] if slash >= 0 else "/"
        return rest
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", text) and not re.match(r"[A-Za-z]:[\\/]", text):
        return None
    return text


class LocalStore:
    """The local file system, exactly as the storage commands have always read it."""

    is_local = True
    scheme = "file"

    def uri(self, path: str) -> str:
        return path

    def internal(self, ref: str) -> str:
        return os.path.normpath(local_form(ref) or ref)

    def realpath(self, path: str) -> str:
        return os.path.realpath(path)

    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def isfile(self, path: str) -> bool:
        return os.path.isfile(path)

    def listdir(self, path: str, fresh: bool = False) -> list[str]:
        try:
            return os.listdir(path)
        except OSError:
            return []

    def files(self, root: str) -> list[FileInfo]:
        found = [FileInfo(path, f.sizes[i], f.mtimes[i]) for _, f in self.scan(root) for i, path in enumerate(f.paths)]
        return sorted(found, key=lambda i: i.path)

    def scan(self, root: str, progress: Progress | None = None) -> Iterator[tuple[str, DirFiles]]:
        """Every regular file under ``root`` (or ``root`` itself when it is one), a directory at a time.

        Canonical paths: the root is resolved once and nothing below it is followed, so a file reached
        through a symlinked directory never looks unreferenced because its checkpoint names it by another
        path. Symbolic links themselves are no checkpoint files (Flink writes none): never orphans, never
        followed. The quarantine is never scanned. One ``os.scandir`` per directory and one ``lstat`` per
        file; unreadable directories are skipped as ``os.walk`` skips them."""
        from cutcheck.reference.storage.filetable import dir_files

        top = os.path.realpath(root)
        if os.path.isfile(top):
            st = os.stat(top)
            yield os.path.dirname(top), dir_files(os.path.dirname(top), [top], [st.st_size], [st.st_mtime], full=True)
            return
        stack, seen = [top], 0
        while stack:
            directory = stack.pop()
            paths: list[str] = []
            sizes, mtimes = array("q"), array("d")
            try:
                entries = os.scandir(directory)
            except OSError:
                continue
            add_path, add_size, add_mtime = paths.append, sizes.append, mtimes.append  # once a file: no lookups
            with entries:
                for entry in entries:
                    try:
                        if entry.is_file(follow_symlinks=False):
                            st = entry.stat(follow_symlinks=False)
                            add_path(entry.path)
                            add_size(st.st_size)
                            add_mtime(st.st_mtime)
                        elif entry.is_dir(follow_symlinks=False) and entry.name != QUARANTINE_DIR:
                            stack.append(entry.path)
                    except OSError:  # vanished while listed
                        continue
            if paths:
                seen += len(paths)
                if progress is not None:
                    progress(seen)
                yield directory, dir_files(directory, paths, sizes, mtimes, full=True)

    def stat(self, path: str, fresh: bool = False) -> FileInfo | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return FileInfo(path, st.st_size, st.st_mtime) if os.path.isfile(path) else None

    def read(self, path: str) -> bytes | None:
        try:
            with open(path, "rb") as fh:
                return fh.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def write(self, path: str, data: bytes) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(data)

    def copy(self, src: str, dst: str, size: int | None = None) -> FileInfo:
        import shutil

        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(src, "rb") as fin, open(dst, "xb") as fout:
            shutil.copyfileobj(fin, fout)
        shutil.copystat(src, dst)
        info = self.stat(dst)
        assert info is not None
        return info

    def delete(self, paths: list[str]) -> list[str]:
        gone = []
        for p in paths:
            try:
                os.remove(p)
                gone.append(p)
            except FileNotFoundError:
                continue
        return gone


LOCAL = LocalStore()


class ArrowStore:
    """Any file system PyArrow opens from a URI (gs://, hdfs://, abfs://, …) or fsspec provides."""

    is_local = False

    def __init__(self, fs: Any, scheme: str, prefix: str, bucketed: bool):
        self.fs, self.scheme, self.prefix, self.bucketed = fs, scheme, prefix, bucketed
        self._info: dict[str, FileInfo] = {}

    def uri(self, path: str) -> str:
        return self.prefix + (path[1:] if self.bucketed else path)

    def internal(self, ref: str) -> str:
        parts = split_uri(ref)
        if parts is None:
            return posixpath.normpath(ref) if ref.startswith("/") else "//" + ref
        scheme, authority, path = parts
        if scheme != self.scheme:
            return "//" + ref  # another store: never found here
        return posixpath.normpath("/" + authority + path if self.bucketed else path or "/")

    def _native(self, path: str) -> str:
        return path[1:] if self.bucketed else path

    def realpath(self, path: str) -> str:
        return posixpath.normpath(path)

    def _get(self, selector_or_path: Any) -> Any:
        try:
            return self.fs.get_file_info(selector_or_path)
        except (OSError, ValueError) as exc:
            raise StorageError(f"{self.prefix}: {_first_line(exc)}; check the address and the credentials.") from None

    def isdir(self, path: str) -> bool:
        import pyarrow.fs as pafs

        return bool(self._get(self._native(path)).type == pafs.FileType.Directory)

    def isfile(self, path: str) -> bool:
        return self.stat(path) is not None

    def listdir(self, path: str, fresh: bool = False) -> list[str]:
        import pyarrow.fs as pafs

        if not self.isdir(path):
            return []
        return sorted(posixpath.basename(i.path.rstrip("/"))
                      for i in self._get(pafs.FileSelector(self._native(path), allow_not_found=True)))

    def files(self, root: str) -> list[FileInfo]:
        import pyarrow.fs as pafs

        if not self.isdir(root):
            info = self.stat(root)
            return [info] if info else []
        out = []
        for i in self._get(pafs.FileSelector(self._native(root), recursive=True, allow_not_found=True)):
            path = "/" + i.path.lstrip("/") if self.bucketed else i.path
            if i.type != pafs.FileType.File or QUARANTINE_DIR in path.split("/"):
                continue
            info = FileInfo(path, int(i.size or 0), i.mtime.timestamp() if i.mtime else 0.0)
            self._info[path] = info
            out.append(info)
        return sorted(out, key=lambda f: f.path)

    def stat(self, path: str, fresh: bool = False) -> FileInfo | None:
        import pyarrow.fs as pafs

        if not fresh and path in self._info:
            return self._info[path]
        i = self._get(self._native(path))
        if i.type != pafs.FileType.File:
            return None
        info = FileInfo(path, int(i.size or 0), i.mtime.timestamp() if i.mtime else 0.0)
        self._info[path] = info
        return info

    def read(self, path: str) -> bytes | None:
        if self.stat(path, fresh=True) is None:
            return None
        with self.fs.open_input_stream(self._native(path)) as fh:
            return bytes(fh.read())

    def write(self, path: str, data: bytes) -> None:
        with self.fs.open_output_stream(self._native(path)) as fh:
            fh.write(data)

    def copy(self, src: str, dst: str, size: int | None = None) -> FileInfo:
        self.fs.copy_file(self._native(src), self._native(dst))
        info = self.stat(dst, fresh=True)
        if info is None or (size is not None and info.size != size):
            raise StorageError(f"{self.uri(src)}: the copy to {self.uri(dst)} came out short; nothing was removed.")
        return info

    def delete(self, paths: list[str]) -> list[str]:
        gone = []
        for p in paths:  # PyArrow deletes one file per call
            try:
                self.fs.delete_file(self._native(p))
                gone.append(p)
            except FileNotFoundError:
                continue
            self._info.pop(p, None)
        return gone


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0].rstrip(".")


def _arrow_store(text: str, scheme: str) -> ArrowStore:
    try:
        import pyarrow.fs as pafs

        fs, _ = pafs.FileSystem.from_uri(text)
        bucketed = scheme in ("gs", "gcs", "abfs", "abfss", "az")  # else the authority is a host: hdfs://nn:8020/x
        authority = "" if bucketed else (split_uri(text) or ("", "", ""))[1]
        return ArrowStore(fs, scheme, f"{scheme}://{authority}", bucketed)
    except (OSError, ValueError, ImportError) as arrow_error:
        try:
            import fsspec  # type: ignore[import-not-found]
            from pyarrow.fs import FSSpecHandler, PyFileSystem

            fs = PyFileSystem(FSSpecHandler(fsspec.filesystem(scheme)))
            return ArrowStore(fs, scheme, f"{scheme}://", True)
        except (ImportError, ValueError, OSError):
            raise StorageError(f"{text}: neither PyArrow nor fsspec opens {scheme}:// here ({_first_line(arrow_error)}); "
                               f"install the file system's package or give an s3:// or local path.") from None


def open_store(text: str, endpoint_url: str | None = None) -> tuple[Store, str]:
    """The store a path the user gave lives on, and its internal path."""
    local = local_form(text)
    if local is not None:
        return LOCAL, local
    parts = split_uri(text)
    if parts is None:
        raise StorageError(f"{text}: not a path or URI cutcheck can open; give a local path, file:/…, or scheme://bucket/prefix.")
    scheme, authority, _ = parts
    if scheme in S3_SCHEMES:
        from cutcheck.reference.storage.s3 import S3Store

        store: Store = S3Store(endpoint_url)
        if not authority:
            raise StorageError(f"{text}: no bucket named; give s3://bucket/prefix.")
    else:
        store = _arrow_store(text, scheme)
    return store, store.internal(text)


def within(path: str, roots: Iterable[str] | set[str]) -> bool:
    """Whether ``path`` is one of ``roots`` or under one (ancestors looked up: fast for many roots)."""
    table = roots if isinstance(roots, set) else set(roots)
    p = path
    while True:
        if p in table:
            return True
        parent = posixpath.dirname(p) if "/" in p else ""
        if parent == p or not parent:
            return False
        p = parent
