"""The local listing under a storage inspection, with as little Python a file as the answer allows.

What it lists is exactly what ``LocalStore.scan`` lists (regular files only, symbolic links neither
listed nor followed, the quarantine never entered, unreadable directories skipped, a file that
vanishes while listed left out), a directory at a time as a sorted DirFiles. How differs, because on
a base of a million files the per-file steps are the cost:

* a directory's names are read (``scandir``'s file types need no system call), sorted as plain
  strings (no sort of full paths through a key function), and only then looked at with ``lstat``;
* ``lstat`` runs relative to the open directory (``fstatat``: no walk of the whole path a file), its
  size and time going straight into typed arrays;
* full paths are made from the sorted names by one mapped concatenation.

Measured on one directory of 900 000 files: ``lstat`` of the full path costs a fifth more system time
than ``fstatat``, and sorting the paths afterwards with their sizes and times (an argsort, then three
gathers) costs twice the user time of sorting the names first (benchmarks/bench_storage_scale.py).

Sorting names sorts the paths: every path of a directory is that directory's path, "/", the name.
Where the platform has no ``fstatat`` (``os.stat`` without dir_fd support), the file's path is used.

A directory of ``SPLIT`` names or more (a large job's ``shared/``) is looked at by two processes: a forked
child takes the second half of the sorted names and sends back its sizes, times and vanished indices as
raw arrays through a pipe, while this process takes the first half; the halves are joined in order, so
the answer is the one a single loop gives. The ``lstat`` system time is the floor of the listing, and the
second core takes half of it. Only from a process with no other thread (a fork copies just the calling
one), and never on a platform without ``fork``. The child writes nothing anywhere but the pipe and ends
with ``os._exit`` (nothing of this process's buffers or exit handlers runs twice); Ctrl-C ends it quietly,
and this process kills and reaps it on any way out. A child that fails is a StorageError sentence.

With ``defer`` (``storage orphans`` without --delete, which prints no size of a referenced file) such a
directory is not looked at with ``lstat`` at all while listing: its sorted names are kept with sizes and times
0 (``DirFiles.pending``), and once the ``_metadata`` have marked what they reference, ``FileTable.settle`` looks
at the unmarked files only (90 % of the calls saved on the benchmark's base). A directory holding a
``_metadata`` is never deferred: its time decides which checkpoints may be in progress.
"""

from __future__ import annotations

import os
import signal
import struct
import threading
from array import array
from collections.abc import Iterator

from cutcheck.model.errors import StorageError
from cutcheck.reference.storage.files import METADATA
from cutcheck.reference.storage.filetable import DirFiles, dir_files
from cutcheck.reference.storage.store import QUARANTINE_DIR, Progress

_AT = os.stat in os.supports_dir_fd and os.scandir in os.supports_fd
SPLIT = 100_000  # names in one directory from which a child process takes half of the lstat calls
_COUNTS = struct.Struct("<qq")  # the child's answer: how many stats, how many vanished; then the three arrays


def scan_local(root: str, progress: Progress | None = None, defer: bool = False) -> Iterator[tuple[str, DirFiles]]:
    """Every regular file under ``root`` (or ``root`` itself when it is one), a directory at a time: what
    ``LocalStore.scan`` yields (see the module docstring), directory by directory in the same order. With
    ``defer``, a directory of ``SPLIT`` names or more without a ``_metadata`` is listed without its files' sizes
    and times (``DirFiles.pending``: ``FileTable.settle`` reads those of the unreferenced ones later)."""
    top = os.path.realpath(root)
    if os.path.isfile(top):
        st = os.stat(top)
        yield os.path.dirname(top), dir_files(os.path.dirname(top), [top], [st.st_size], [st.st_mtime], full=True)
        return
    stack, seen = [top], 0
    while stack:
        directory = stack.pop()
        files = _directory(directory, stack, defer)
        if files is not None:
            seen += len(files.paths)
            if progress is not None:
                progress(seen)
            yield directory, files


def _directory(directory: str, stack: list[str], defer: bool = False) -> DirFiles | None:
    """The files of one directory (None when it has none or cannot be read); its subdirectories go on ``stack``
    in the order the directory lists them, as LocalStore.scan pushes them."""
    prefix = directory + "/" if directory != "/" else "/"
    fd = -1
    try:
        if _AT:
            fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        entries = os.scandir(fd if fd >= 0 else directory)
    except OSError:
        if fd >= 0:
            os.close(fd)
        return None
    try:
        names: list[str] = []
        with entries:
            for entry in entries:
                try:
                    if entry.is_file(follow_symlinks=False):
                        names.append(entry.name)
                    elif entry.is_dir(follow_symlinks=False) and entry.name != QUARANTINE_DIR:
                        stack.append(prefix + entry.name)
                except OSError:  # vanished while listed
                    continue
        if not names:
            return None
        names.sort()
        if defer and len(names) >= SPLIT and METADATA not in names:
            return DirFiles(list(map(prefix.__add__, names)), array("q", bytes(8 * len(names))),
                            array("d", bytes(8 * len(names))), pending=True)
        sizes, mtimes, gone = _stat_split(names, fd, prefix) if _may_fork(len(names)) else _stat_all(names, fd, prefix)
        if gone:  # vanished before their stat (rare)
            names = [n for i, n in enumerate(names) if i not in gone]
            if not names:
                return None
        return DirFiles(list(map(prefix.__add__, names)), sizes, mtimes)
    finally:
        if fd >= 0:
            os.close(fd)


def _stat_all(names: list[str], fd: int, prefix: str) -> tuple[array[int], array[float], set[int]]:
    """(sizes, modification times) of ``names`` in the directory (open as ``fd``, or -1), as ``lstat`` gives
    them, and the indices of the names that no longer exist. One plain loop: a mapped ``partial`` costs more
    a call, and a ``try`` a file costs nothing until one fails (then the loop goes on after it)."""
    sizes, mtimes = array("q"), array("d")
    add_size, add_mtime = sizes.append, mtimes.append
    gone: set[int] = set()
    stat = os.stat
    at = fd >= 0
    rest: Iterator[str] = iter(names)
    while True:
        try:
            if at:
                for name in rest:
                    st = stat(name, dir_fd=fd, follow_symlinks=False)
                    add_size(st.st_size)
                    add_mtime(st.st_mtime)
            else:
                for name in rest:
                    st = stat(prefix + name, follow_symlinks=False)
                    add_size(st.st_size)
                    add_mtime(st.st_mtime)
            return sizes, mtimes, gone
        except OSError:
            gone.add(len(sizes) + len(gone))  # the name whose stat failed; ``rest`` resumes after it


def _may_fork(count: int) -> bool:
    return count >= SPLIT and hasattr(os, "fork") and not _other_threads()


def _stat_split(names: list[str], fd: int, prefix: str) -> tuple[array[int], array[float], set[int]]:
    """``_stat_all(names, fd, prefix)``, its second half taken by a forked child (see the module docstring)."""
    half = len(names) // 2
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return _stat_all(names, fd, prefix)
    if pid == 0:  # the child: whatever happens, it leaves by os._exit
        code = 1
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C: the parent says it once
            os.close(read_end)
            sizes, mtimes, gone = _stat_all(names[half:], fd, prefix)
            payload = b"".join([_COUNTS.pack(len(sizes), len(gone)), sizes.tobytes(), mtimes.tobytes(),
                                array("q", sorted(gone)).tobytes()])
            view = memoryview(payload)
            while view:
                view = view[os.write(write_end, view):]
            code = 0
        finally:
            os._exit(code)
    reaped = False
    try:
        os.close(write_end)
        sizes, mtimes, gone = _stat_all(names[:half], fd, prefix)
        with os.fdopen(read_end, "rb") as pipe:
            read_end = -1
            answer = pipe.read()
        _, status = os.waitpid(pid, 0)
        reaped = True
        rest = _answer(answer, len(names) - half) if os.waitstatus_to_exitcode(status) == 0 else None
        if rest is None:
            raise StorageError(f"{prefix.rstrip('/') or '/'}: the helper process that looked at half of its "
                               f"{len(names)} files failed ({_status(status)}); run the command again.")
        sizes += rest[0]
        mtimes += rest[1]
        gone.update(half + i for i in rest[2])
        return sizes, mtimes, gone
    finally:
        if read_end >= 0:
            os.close(read_end)
        if not reaped:  # this process is leaving early (Ctrl-C, an error): the child goes with it
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def _answer(data: bytes, count: int) -> tuple[array[int], array[float], list[int]] | None:
    """The child's (sizes, times, vanished indices) of ``count`` names, or None when ``data`` is not whole."""
    if len(data) < _COUNTS.size:
        return None
    stats, vanished = _COUNTS.unpack_from(data)
    if stats + vanished != count or len(data) != _COUNTS.size + 16 * stats + 8 * vanished:
        return None
    at = _COUNTS.size
    sizes, mtimes, gone = array("q"), array("d"), array("q")
    sizes.frombytes(data[at:at + 8 * stats])
    mtimes.frombytes(data[at + 8 * stats:at + 16 * stats])
    gone.frombytes(data[at + 16 * stats:])
    return sizes, mtimes, gone.tolist()


def _status(status: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    return f"killed by signal {-code}" if code < 0 else f"exit status {code}" if code else "an incomplete answer"


def _other_threads() -> bool:
    """Whether another thread runs in this process (a fork copies only the calling thread)."""
    return threading.active_count() > 1
