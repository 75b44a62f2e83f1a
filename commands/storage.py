"""Checkpoint directories: storage ls, orphans, quarantine-checkpoint, restore-quarantine, purge (lifecycle:
commands.storage_lifecycle)."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from cutcheck.commands.common import app, out, table, user_errors, write_json
from cutcheck.commands.storage_output import (
    labeller,
    listed_sizes,
    print_rows,
    progress_lines,
    relative,
    shared_lines,
    sizer,
)
from cutcheck.model.errors import CutcheckError

storage_app = typer.Typer(help="Inspect checkpoint directories: checkpoints, shared files, orphans.", no_args_is_help=True)
app.add_typer(storage_app, name="storage")

_DIR_HELP = ("A checkpoint directory: the base (execution.checkpointing.dir; state.checkpoints.dir in Flink 1.x), a job directory or a chk-N directory; a local "
             "path, file:/… (as Flink reports it), s3://bucket/prefix or any URI PyArrow or fsspec opens. With entropy "
             "injection give the configured path, marker included.")
_ENDPOINT_HELP = ("The S3 endpoint (MinIO, Ceph, a local test server): overrides AWS_ENDPOINT_URL. Credentials and region "
                  "come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION (or a profile).")
_KEEP_HELP = ("Another checkpoint directory whose _metadata may reference files here (a job restored from this one "
              "in claim or legacy mode, a copy); its references are kept. Repeatable.")
_BASE_HELP = ("The checkpoint base that 'storage orphans --delete' moved files from (it holds .cutcheck-quarantine); "
              "a local path or a URI (s3://bucket/prefix).")


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{int(n)} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _say(text: str) -> None:
    out.print(text, soft_wrap=True, highlight=False, markup=False)


READERS = ("python", "flink")
_READER_HELP = ("How Flink's binary _metadata is read: 'python' (default; no Java, no PyFlink) or 'flink' (Flink's own "
                "loader through PyFlink's Java gateway, a cross-check; needs the flink extra). cutcheck's JSON _metadata "
                "is read the same either way.")


def _reader(name: str) -> Callable[[str], Any]:
    """The per-checkpoint reader: both answer cutcheck's JSON _metadata themselves and differ only on Flink's."""
    if name not in READERS:
        raise CutcheckError(f"--reader {name!r} is not one of {', '.join(READERS)}.")
    if name == "flink":
        from cutcheck.flink_bridge.checkpoints import any_referenced_files
    else:
        from cutcheck.reference.storage.flink_metadata import any_referenced_files

        # Unsorted: the inspection orders what it resolves by position in its listing (integers), cheaper than
        # sorting hundreds of thousands of path strings here.
        return functools.partial(any_referenced_files, sort=False)
    return any_referenced_files


_CONF_HELP = ("A Flink configuration file (config.yaml or flink-conf.yaml) whose s3.entropy.key and s3.entropy.length "
              "apply to DIR (instead of --entropy-key / --entropy-length).")


def _storage_listing(directory: str, entropy_key: str, entropy_length: int, keep: list[str] | None = None,
                     min_age: float = 0.0, reader: str = "python", endpoint_url: str | None = None,
                     flink_conf: Path | None = None, referenced_sizes: bool = True) -> Any:
    from cutcheck.model.errors import StorageError
    from cutcheck.reference.storage.config import flink_entropy
    from cutcheck.reference.storage.inspection import inspect
    from cutcheck.reference.storage.store import open_store

    if flink_conf is not None:
        entropy_key, entropy_length = flink_entropy(flink_conf, entropy_key, entropy_length)
    store, path = open_store(directory, endpoint_url)
    if reader == "flink" and not store.is_local:
        raise StorageError(f"--reader flink reads local directories only, not {directory}; use the default "
                           f"--reader python on an object store, or copy the checkpoint to a local disk first.")
    return inspect(path, _reader(reader), entropy=entropy_key or None, entropy_length=entropy_length,
                   keep=[str(k) for k in keep or []], min_age=min_age, store=store, progress=progress_lines(directory),
                   referenced_sizes=referenced_sizes)


def _namer(listing: Any) -> tuple[list[str], Callable[[str], str]]:
    """The jobs of a listing, and how to show its paths (relative to the job when there is one)."""
    jobs = sorted({c.job for c in listing.checkpoints if c.kind == "checkpoint"})
    return jobs, functools.partial(_label, root=listing.root, job=jobs[0] if len(jobs) == 1 else None,
                                   uri=listing.uri)


def _label(path: str, root: str, job: str | None = None, uri: Callable[[str], str] = str) -> str:
    """A path as people read it: relative to the root, and to the job directory when there is one job."""
    if path == root:
        return os.path.basename(path)
    rel = relative(path, root, uri)
    return rel[len(job) + 1:] if job and rel.startswith(job + os.sep) else rel


def _file_size(listing: Any, path: str) -> int | None:
    info = listing.infos.get(path) or listing.store.stat(path)
    return None if info is None else info.size


def _status(c: Any) -> str:
    if c.restorable:
        return "ok"
    parts = ([f"{len(c.missing)} MISSING"] if c.missing else []) + ([f"{len(c.outside)} OUTSIDE"] if c.outside else [])
    return "NOT RESTORABLE (" + ", ".join(parts) + ")"


def _why_not(c: Any, name: Callable[[str], str], listing: Any, endpoint_url: str | None = None) -> str:
    """One paragraph per checkpoint that cannot be restored: the missing files, the likely cause, the safe action."""
    from cutcheck.reference.storage.diagnosis import describe, diagnose

    return describe(diagnose(listing, c, endpoint_url=endpoint_url), name(c.path), listing.uri)


def _held_back(listing: Any, name: Callable[[str], str], force: bool = False) -> list[str]:
    """The lines on what is kept back besides referenced files: in progress, empty directories, foreign roots."""
    lines = []
    if listing.in_progress:
        lines.append(f"{len(listing.in_progress)} unreferenced file(s) belong to a checkpoint that may be in progress "
                     f"(a chk-N newer than its job's newest completed checkpoint, or written after it): "
                     + ("moved, as --force asks" if force else "never moved without --force, whatever --min-age says")
                     + f"; first {name(listing.in_progress[0])}")
    if listing.empty_dirs:
        lines.append(f"{len(listing.empty_dirs)} empty checkpoint directory(ies) older than their job's newest "
                     f"checkpoint (left by a discard that was cut short), first {name(listing.empty_dirs[0])}: "
                     f"'storage orphans --delete' removes them, 'storage restore-quarantine' makes them again")
    for root, meta in sorted(listing.foreign.items()):
        lines.append(f"{listing.uri(root)} is named like an entropy prefix but holds checkpoints of its own "
                     f"({listing.uri(meta)}): another job's or environment's directory, never read for orphans")
    return lines


def _context_note(listing: Any) -> str:
    parts = []
    if listing.context:
        parts.append(f"also read {len(listing.context)} _metadata of other jobs and --keep-referenced-by directories "
                     f"(their files are kept)")
    if listing.rerooted:
        parts.append(f"{len(listing.rerooted)} file(s) kept because a moved or copied _metadata names their old location")
    return "; ".join(parts)


_CONF = typer.Option(None, "--flink-conf", help=_CONF_HELP, exists=True, dir_okay=False)
_EKEY = typer.Option("_entropy_", "--entropy-key", help="Entropy marker (s3.entropy.key) in DIR, if any.")
_ELEN = typer.Option(4, "--entropy-length", help="s3.entropy.length.")


@storage_app.command("ls")
@user_errors
def storage_ls(
    directory: str = typer.Argument(..., help=_DIR_HELP),
    json_path: Path = typer.Option(None, "--json", help="Write the listing as JSON."),
    keep: list[str] = typer.Option(None, "--keep-referenced-by", help=_KEEP_HELP),
    entropy_key: str = _EKEY,
    entropy_length: int = _ELEN,
    flink_conf: Path = _CONF,
    reader: str = typer.Option("python", "--reader", help=_READER_HELP),
    endpoint_url: str = typer.Option(None, "--endpoint-url", help=_ENDPOINT_HELP),
) -> None:
    """Checkpoints with their sizes, and for each shared file the checkpoints that reference it.

    A checkpoint is restorable when every file its _metadata names exists, at the path a restore
    reads (absolute as written, or relative to the _metadata), inside the checkpoint base or a
    --keep-referenced-by directory. Exit 1 when one is not: its missing files, the likely cause and
    the command that sets it aside are named."""
    listing = _storage_listing(directory, entropy_key, entropy_length, keep, reader=reader, endpoint_url=endpoint_url,
                               flink_conf=flink_conf)
    jobs, name = _namer(listing)
    rows = [[name(c.path), _bytes(c.size), _bytes(c.new_size), f"{len(c.files['exclusive'])} / {len(c.files['shared'])}",
             _bytes(c.inlined_bytes), _status(c)] for c in listing.checkpoints]
    rows += [[name(os.path.dirname(u)), "", "", "", "", "unreadable"] for u in listing.unreadable]
    _say(f"checkpoints in {listing.uri(listing.root)}" + (f", job {jobs[0]}" if len(jobs) == 1 else ""))
    out.print(table("", ["checkpoint", "size", "new", "files excl. / shared", "inlined", "status"], rows))
    if listing.shared:
        by_path = {c.key: name(c.path) for c in listing.checkpoints}
        users = functools.lru_cache(maxsize=None)(lambda keys: ", ".join(by_path[k] for k in keys))
        size, label, shown = sizer(listing, _file_size), labeller(listing, name), functools.lru_cache(4096)(_bytes)
        print_rows("shared files", ["file", "size", "referenced by"],
                   ([label(f), shown(sz) if (sz := size(f)) is not None else "missing", users(tuple(keys))]
                    for f, keys in listing.shared.items()), len(listing.shared),
                   lambda: shared_lines(listing, label, size, shown, users))
    for c in listing.not_restorable:
        _say(_why_not(c, name, listing, endpoint_url) + ".")
    for u in listing.unreadable:  # the reader's sentence: which version or handle type it does not know
        _say(f"UNREADABLE, so not known to be restorable: {listing.why_unreadable.get(u, u)}")
    for line in _held_back(listing, name):
        _say(line + ".")
    note = _context_note(listing)
    _say(f"{len(listing.checkpoints)} checkpoint(s), {len(listing.shared)} shared file(s), "
         f"{len(listing.orphans)} orphan(s)" + (f" (cutcheck storage orphans {directory})" if listing.orphans else "")
         + (f", {len(listing.in_progress)} in progress" if listing.in_progress else "")
         + (f", {len(listing.unreadable)} unreadable _metadata (so no orphans are named)" if listing.unreadable else "")
         + (f", {len(listing.not_restorable)} NOT RESTORABLE" if listing.not_restorable else "")
         + (f"; {note}" if note else ""))
    if json_path is not None:  # the JSON form of millions of files is built only when asked for
        write_json(json_path, listing.to_json() | {"diagnoses": _diagnoses(listing, endpoint_url)})
    raise typer.Exit(1 if listing.not_restorable or listing.unreadable else 0)


def _diagnoses(listing: Any, endpoint_url: str | None) -> list[dict[str, Any]]:
    from cutcheck.reference.storage.diagnosis import diagnose

    return [diagnose(listing, c, endpoint_url=endpoint_url).to_json(listing.uri) for c in listing.not_restorable]


@storage_app.command("orphans")
@user_errors
def storage_orphans(
    directory: str = typer.Argument(..., help=_DIR_HELP),
    delete: bool = typer.Option(False, "--delete", help="Move the orphans into the quarantine (default: only list them)."),
    min_age: str = typer.Option("1h", "--min-age", help="Files modified more recently are never touched "
                                "(a running job may be writing a checkpoint): 3600s, 60m, 1h, 0."),
    keep: list[str] = typer.Option(None, "--keep-referenced-by", help=_KEEP_HELP),
    force: bool = typer.Option(False, "--force", help="Delete even while a checkpoint here is not restorable, and "
                               "move files of checkpoints that look in progress too (the job is known to be stopped)."),
    json_path: Path = typer.Option(None, "--json", help="Write the orphans (and what was moved) as JSON."),
    entropy_key: str = _EKEY,
    entropy_length: int = _ELEN,
    flink_conf: Path = _CONF,
    reader: str = typer.Option("python", "--reader", help=_READER_HELP),
    endpoint_url: str = typer.Option(None, "--endpoint-url", help=_ENDPOINT_HELP),
) -> None:
    """Files under DIR that nothing references: leftovers of crashed or abandoned runs and of aborted
    checkpoints. Kept: every file named by any _metadata under DIR, under the rest of its checkpoint
    base and under --keep-referenced-by directories, task-owned files, files younger than --min-age,
    and files of a checkpoint that may be in progress (a chk-N newer than its job's newest completed
    one, or anything written after that; only --force moves these). A dry run unless --delete, which
    moves the orphans (and empty chk-N directories of discards cut short) into
    <base>/.cutcheck-quarantine/<time>-<pid>/ with a manifest (storage restore-quarantine undoes it,
    storage purge empties it). --delete refuses while a checkpoint here can never be restored, and
    names the command that sets it aside (storage quarantine-checkpoint), unless --force."""
    from cutcheck.model.errors import StorageError
    from cutcheck.reference.storage.diagnosis import diagnose
    from cutcheck.reference.storage.guard import orphan_reasons
    from cutcheck.reference.storage.quarantine import parse_age, quarantine

    age = parse_age(min_age)
    # A dry run prints no size of a referenced file: a large directory's referenced files are never stat'ed.
    listing = _storage_listing(directory, entropy_key, entropy_length, keep, age, reader=reader,
                               endpoint_url=endpoint_url, flink_conf=flink_conf, referenced_sizes=delete)
    if listing.unreadable:
        first = listing.unreadable[0]
        why = listing.why_unreadable.get(first, f"{listing.uri(first)}: unreadable checkpoint metadata").rstrip(".")
        raise StorageError(f"{why}; that _metadata may reference any file, so no file is called an orphan and "
                           "nothing is deleted: fix or remove it first.")
    jobs, name = _namer(listing)
    broken = listing.not_restorable
    if delete and broken and not force:
        actions = "; ".join(diagnose(listing, c, endpoint_url=endpoint_url).action for c in broken[:3])
        c = broken[0]
        d = diagnose(listing, c, endpoint_url=endpoint_url)
        raise StorageError(f"{len(broken)} checkpoint(s) here can never be restored (first {listing.uri(c.path)}: "
                           f"{listing.uri((c.missing or c.outside)[0])} "
                           f"{'is missing' if c.missing else 'lies outside ' + listing.uri(listing.base)}; likely "
                           f"{d.cause.value}), so nothing is deleted; run 'cutcheck storage ls {directory}' for the "
                           f"details, set each aside reversibly ({actions}"
                           f"{'; …' if len(broken) > 3 else ''}) and run this again, or pass --force.")
    candidates = [*listing.orphans, *(listing.in_progress if force else [])]
    size = sizer(listing, _file_size)
    sizes = listed_sizes(listing, listing.orphans, size) | listed_sizes(listing, candidates[len(listing.orphans):], size)
    reasons = orphan_reasons(listing, listing.orphans)
    reasons |= {f: "of a checkpoint that looked in progress (--force)" for f in listing.in_progress if force}
    batch = quarantine(listing, reasons, min_age=age, dirs=listing.empty_dirs) if delete else None
    shown = [m.original for m in batch.files] if batch else listing.orphans
    _say(("moved to the quarantine" if delete else "orphans") + f" in {listing.uri(listing.root)}"
         + (f", job {jobs[0]}" if len(jobs) == 1 else ""))
    label, shown_bytes = labeller(listing, name), functools.lru_cache(4096)(_bytes)
    print_rows("", ["file", "size", "why"], ([label(f), shown_bytes(sizes.get(f, 0)), reasons[f]] for f in shown),
               len(shown))
    if listing.too_young:
        now = time.time()
        print_rows(f"too young (modified less than {min_age} ago; never deleted)", ["file", "size", "age"],
                   ([name(f), _bytes(i.size) if (i := listing.store.stat(f)) else "gone",
                     f"{max(0, now - i.mtime):.0f} s" if i else ""] for f in listing.too_young), len(listing.too_young))
    for line in _held_back(listing, name, force=force and delete):
        _say(line + ".")
    for c in broken:
        _say(("warning (--force): " if delete else "") + _why_not(c, name, listing, endpoint_url) + ".")
    note = _context_note(listing)
    total = sum(sizes.get(f, 0) for f in shown)
    young = f"; {len(listing.too_young)} too young" if listing.too_young else ""
    if batch is not None:
        dirs = f" and {len(batch.removed_dirs)} empty directory(ies)" if batch.removed_dirs else ""
        _say(f"moved {len(shown)} file(s), {_bytes(total)},{dirs} to {listing.uri(batch.path)}{young}; "
             f"{len(listing.checkpoints)} checkpoint(s) untouched. Undo: cutcheck storage restore-quarantine "
             f"{listing.uri(listing.base)} {batch.name}"
             + (f" ({note})" if note else ""))
    else:
        _say(f"{len(listing.orphans)} orphan(s), {_bytes(total)}{young}; {len(listing.checkpoints)} checkpoint(s) "
             f"reference every other file" + (" (--delete moves the orphans into a quarantine)" if listing.orphans else "")
             + (f"; {note}" if note else ""))
    u = listing.uri
    write_json(json_path, {"root": u(listing.root), "base": u(listing.base), "orphans": [u(f) for f in listing.orphans],
                           "too_young": [u(f) for f in listing.too_young],
                           "in_progress": [u(f) for f in listing.in_progress],
                           "empty_dirs": [u(f) for f in listing.empty_dirs],
                           "foreign": {u(r): u(m) for r, m in listing.foreign.items()},
                           "removed": [u(f) for f in shown] if delete else [],
                           "quarantine": _batch_json(batch, u) if batch else None,
                           "checkpoints": [c.key for c in listing.checkpoints],
                           "not_restorable": [c.key for c in broken], "diagnoses": _diagnoses(listing, endpoint_url),
                           "kept_rerooted": [u(f) for f in listing.rerooted]})


def _batch_json(batch: Any, uri: Callable[[str], str]) -> dict[str, Any]:
    data = batch.to_json()
    data["path"], data["base"] = uri(data["path"]), uri(data["base"])
    data["removed_dirs"] = [uri(d) for d in data["removed_dirs"]]
    for m in data["files"]:
        m["original"] = uri(m["original"])
    return data


from cutcheck.commands import storage_lifecycle, storage_quarantine  # noqa: E402,F401 (register their commands)
