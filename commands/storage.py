"""Checkpoint directories: storage ls, storage orphans, storage restore-quarantine, storage purge."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from cutcheck.commands.common import app, out, table, user_errors, write_json
from cutcheck.commands.storage_output import labeller, print_rows, progress_lines, relative, sizer
from cutcheck.model.errors import CutcheckError

storage_app = typer.Typer(help="Inspect checkpoint directories: checkpoints, shared files, orphans.", no_args_is_help=True)
app.add_typer(storage_app, name="storage")

_DIR_HELP = ("A checkpoint directory: the base (state.checkpoints.dir), a job directory or a chk-N directory; a local "
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
    return any_referenced_files


def _storage_listing(directory: str, entropy_key: str, entropy_length: int, keep: list[str] | None = None,
                     min_age: float = 0.0, reader: str = "python", endpoint_url: str | None = None) -> Any:
    from cutcheck.model.errors import StorageError
    from cutcheck.reference.storage.inspection import inspect
    from cutcheck.reference.storage.store import open_store

    store, path = open_store(directory, endpoint_url)
    if reader == "flink" and not store.is_local:
        raise StorageError(f"--reader flink reads local directories only, not {directory}; use the default "
                           f"--reader python on an object store, or copy the checkpoint to a local disk first.")
    return inspect(path, _reader(reader), entropy=entropy_key or None, entropy_length=entropy_length,
                   keep=[str(k) for k in keep or []], min_age=min_age, store=store, progress=progress_lines(directory))


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


def _why_not(c: Any, name: Callable[[str], str], listing: Any) -> str:
    """One line per checkpoint that cannot be restored: its first broken references and what that means."""
    if c.missing:
        first = ", ".join(c.missing[:3]) + (f" and {len(c.missing) - 3} more" if len(c.missing) > 3 else "")
        return (f"{name(c.path)} is NOT RESTORABLE: {len(c.missing)} file(s) it references are missing, first {first} "
                f"(a moved or copied directory whose _metadata names the old location, or deleted files)")
    first = ", ".join(c.outside[:3]) + (f" and {len(c.outside) - 3} more" if len(c.outside) > 3 else "")
    return (f"{name(c.path)} is NOT RESTORABLE from {listing.uri(listing.base)}: it references {first}, outside it (a moved or copied "
            f"directory names the original's absolute paths; it restores only while those exist). Restore from the "
            f"original, or name that directory with --keep-referenced-by if both are meant to stay")


def _context_note(listing: Any) -> str:
    parts = []
    if listing.context:
        parts.append(f"also read {len(listing.context)} _metadata of other jobs and --keep-referenced-by directories "
                     f"(their files are kept)")
    if listing.rerooted:
        parts.append(f"{len(listing.rerooted)} file(s) kept because a moved or copied _metadata names their old location")
    return "; ".join(parts)


@storage_app.command("ls")
@user_errors
def storage_ls(
    directory: str = typer.Argument(..., help=_DIR_HELP),
    json_path: Path = typer.Option(None, "--json", help="Write the listing as JSON."),
    keep: list[str] = typer.Option(None, "--keep-referenced-by", help=_KEEP_HELP),
    entropy_key: str = typer.Option("_entropy_", "--entropy-key", help="Entropy marker (s3.entropy.key) in DIR, if any."),
    entropy_length: int = typer.Option(4, "--entropy-length", help="s3.entropy.length."),
    reader: str = typer.Option("python", "--reader", help=_READER_HELP),
    endpoint_url: str = typer.Option(None, "--endpoint-url", help=_ENDPOINT_HELP),
) -> None:
    """Checkpoints with their sizes, and for each shared file the checkpoints that reference it.

    A checkpoint is restorable when every file its _metadata names exists, at the path a restore
    reads (absolute as written, or relative to the _metadata), inside the checkpoint base or a
    --keep-referenced-by directory. Exit 1 when one is not (the first missing files are named)."""
    listing = _storage_listing(directory, entropy_key, entropy_length, keep, reader=reader, endpoint_url=endpoint_url)
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
                    for f, keys in listing.shared.items()), len(listing.shared))
    for c in listing.not_restorable:
        _say(_why_not(c, name, listing) + ".")
    for u in listing.unreadable:  # the reader's sentence: which version or handle type it does not know
        _say(f"UNREADABLE, so not known to be restorable: {listing.why_unreadable.get(u, u)}")
    note = _context_note(listing)
    _say(f"{len(listing.checkpoints)} checkpoint(s), {len(listing.shared)} shared file(s), "
         f"{len(listing.orphans)} orphan(s)" + (f" (cutcheck storage orphans {directory})" if listing.orphans else "")
         + (f", {len(listing.unreadable)} unreadable _metadata (so no orphans are named)" if listing.unreadable else "")
         + (f", {len(listing.not_restorable)} NOT RESTORABLE" if listing.not_restorable else "")
         + (f"; {note}" if note else ""))
    if json_path is not None:  # the JSON form of millions of files is built only when asked for
        write_json(json_path, listing.to_json())
    raise typer.Exit(1 if listing.not_restorable or listing.unreadable else 0)


@storage_app.command("orphans")
@user_errors
def storage_orphans(
    directory: str = typer.Argument(..., help=_DIR_HELP),
    delete: bool = typer.Option(False, "--delete", help="Move the orphans into the quarantine (default: only list them)."),
    min_age: str = typer.Option("1h", "--min-age", help="Files modified more recently are never touched "
                                "(a running job may be writing a checkpoint): 3600s, 60m, 1h, 0."),
    keep: list[str] = typer.Option(None, "--keep-referenced-by", help=_KEEP_HELP),
    force: bool = typer.Option(False, "--force", help="Delete even while a checkpoint here is not restorable."),
    json_path: Path = typer.Option(None, "--json", help="Write the orphans (and what was moved) as JSON."),
    entropy_key: str = typer.Option("_entropy_", "--entropy-key", help="Entropy marker (s3.entropy.key) in DIR, if any."),
    entropy_length: int = typer.Option(4, "--entropy-length", help="s3.entropy.length."),
    reader: str = typer.Option("python", "--reader", help=_READER_HELP),
    endpoint_url: str = typer.Option(None, "--endpoint-url", help=_ENDPOINT_HELP),
) -> None:
    """Files under DIR that nothing references: leftovers of crashed or abandoned runs and of aborted
    checkpoints. Kept: every file named by any _metadata under DIR, under the other jobs of its
    checkpoint base and under --keep-referenced-by directories, task-owned files, and files younger
    than --min-age. A dry run unless --delete, which moves the orphans into
    <base>/.cutcheck-quarantine/<time>-<pid>/ with a manifest (storage restore-quarantine undoes it,
    storage purge empties it). --delete refuses while a checkpoint here is not restorable, unless --force."""
    from cutcheck.model.errors import StorageError
    from cutcheck.reference.storage.inspection import orphan_reason
    from cutcheck.reference.storage.quarantine import parse_age, quarantine

    age = parse_age(min_age)
    listing = _storage_listing(directory, entropy_key, entropy_length, keep, age, reader=reader,
                               endpoint_url=endpoint_url)
    if listing.unreadable:
        first = listing.unreadable[0]
        why = listing.why_unreadable.get(first, f"{listing.uri(first)}: unreadable checkpoint metadata").rstrip(".")
        raise StorageError(f"{why}; that _metadata may reference any file, so no file is called an orphan and "
                           "nothing is deleted: fix or remove it first.")
    jobs, name = _namer(listing)
    broken = listing.not_restorable
    if delete and broken and not force:
        c = broken[0]
        raise StorageError(f"{listing.uri(c.path)} is not restorable (it references "
                           f"{listing.uri((c.missing or c.outside)[0])}, which "
                           f"{'does not exist' if c.missing else 'lies outside ' + listing.uri(listing.base)}), so nothing is "
                           f"deleted; run 'cutcheck storage ls {directory}', fix it or name its other directory with "
                           f"--keep-referenced-by, or pass --force.")
    size = sizer(listing, _file_size)
    sizes = {f: sz for f in listing.orphans if (sz := size(f)) is not None}
    reasons = {f: orphan_reason(listing, f) for f in listing.orphans}
    batch = quarantine(listing, reasons, min_age=age) if delete else None
    shown = [m.original for m in batch.files] if batch else listing.orphans
    _say(("moved to the quarantine" if delete else "orphans") + f" in {listing.uri(listing.root)}"
         + (f", job {jobs[0]}" if len(jobs) == 1 else ""))
    print_rows("", ["file", "size", "why"], ([name(f), _bytes(sizes.get(f, 0)), reasons[f]] for f in shown), len(shown))
    if listing.too_young:
        now = time.time()
        print_rows(f"too young (modified less than {min_age} ago; never deleted)", ["file", "size", "age"],
                   ([name(f), _bytes(i.size) if (i := listing.store.stat(f)) else "gone",
                     f"{max(0, now - i.mtime):.0f} s" if i else ""] for f in listing.too_young), len(listing.too_young))
    for c in broken:
        _say(("warning (--force): " if delete else "") + _why_not(c, name, listing) + ".")
    note = _context_note(listing)
    total = sum(sizes.get(f, 0) for f in shown)
    young = f"; {len(listing.too_young)} too young" if listing.too_young else ""
    if batch is not None:
        _say(f"moved {len(shown)} file(s), {_bytes(total)}, to {listing.uri(batch.path)}{young}; "
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
                           "removed": [u(f) for f in shown] if delete else [],
                           "quarantine": _batch_json(batch, u) if batch else None,
                           "checkpoints": [c.key for c in listing.checkpoints],
                           "not_restorable": [c.key for c in broken], "kept_rerooted": [u(f) for f in listing.rerooted]})


def _batch_json(batch: Any, uri: Callable[[str], str]) -> dict[str, Any]:
    data = batch.to_json()
    data["path"], data["base"] = uri(data["path"]), uri(data["base"])
    for m in data["files"]:
        m["original"] = uri(m["original"])
    return data


@storage_app.command("restore-quarantine")
@user_errors
def storage_restore_quarantine(
    base: str = typer.Argument(..., help=_BASE_HELP),
    batch_name: str = typer.Argument(None, metavar="[BATCH]", help="The batch (a folder name); default: the newest."),
    json_path: Path = typer.Option(None, "--json", help="Write what was put back as JSON."),
    endpoint_url: str = typer.Option(None, "--endpoint-url", help=_ENDPOINT_HELP),
) -> None:
    """Put a quarantined batch back where its files were. Refuses (nothing moved) when a file exists
    again at an original path, or a quarantined file no longer has the sha256 (on an object store: the
    ETag) it was moved with."""
    from cutcheck.reference.storage.quarantine import restore_batch
    from cutcheck.reference.storage.store import open_store

    store, _ = open_store(base, endpoint_url)
    batch = restore_batch(base, batch_name, endpoint_url=endpoint_url)
    out.print(table(f"restored batch {batch.name}", ["file", "size"],
                    [[store.uri(m.original), _bytes(m.size)] for m in batch.files]))
    _say(f"restored {len(batch.files)} file(s), {_bytes(batch.size)}, quarantined {batch.created}")
    write_json(json_path, _batch_json(batch, store.uri))


@storage_app.command("purge")
@user_errors
def storage_purge(
    base: str = typer.Argument(..., help=_BASE_HELP),
    older_than: float = typer.Option(..., "--older-than", help="Days: batches quarantined longer ago than this."),
    yes: bool = typer.Option(False, "--yes", help="Remove them for good (default: only list them)."),
    json_path: Path = typer.Option(None, "--json", help="Write the batches (and whether they were removed) as JSON."),
    endpoint_url: str = typer.Option(None, "--endpoint-url", help=_ENDPOINT_HELP),
) -> None:
    """Empty the quarantine of batches older than --older-than days. A dry run unless --yes: this is
    the only cutcheck command that removes checkpoint files for good."""
    from cutcheck.reference.storage.quarantine import batches, purge
    from cutcheck.reference.storage.store import open_store

    store, _ = open_store(base, endpoint_url)
    every = batches(base, endpoint_url=endpoint_url)
    old = purge(base, older_than, yes=yes, endpoint_url=endpoint_url)
    out.print(table("removed for good" if yes else f"batches older than {older_than:g} day(s)",
                    ["batch", "quarantined", "files", "size"],
                    [[b.name, b.created, len(b.files), _bytes(b.size)] for b in old]))
    _say(f"{'removed' if yes else 'would remove'} {len(old)} of {len(every)} batch(es), "
         f"{_bytes(sum(b.size for b in old))}" + ("" if yes or not old else " (--yes removes them for good)"))
    write_json(json_path, {"base": str(base), "removed": yes, "batches": [_batch_json(b, store.uri) for b in old]})


@storage_app.command("lifecycle")
@user_errors
def storage_lifecycle(
    directory: str = typer.Argument(..., help=_DIR_HELP),
    expire_days: int = typer.Option(None, "--expire-days",
                                    help="A proposed lifecycle expiration rule on shared/, in days: which referenced "
                                    "files it would delete today and which checkpoints that breaks."),
    json_path: Path = typer.Option(None, "--json", help="Write the report as JSON."),
    keep: list[str] = typer.Option(None, "--keep-referenced-by", help=_KEEP_HELP),
    entropy_key: str = typer.Option("_entropy_", "--entropy-key", help="Entropy marker (s3.entropy.key) in DIR, if any."),
    entropy_length: int = typer.Option(4, "--entropy-length", help="s3.entropy.length."),
    reader: str = typer.Option("python", "--reader", help=_READER_HELP),
    endpoint_url: str = typer.Option(None, "--endpoint-url", help=_ENDPOINT_HELP),
) -> None:
    """Can a lifecycle rule expire old files under shared/? Per retained checkpoint the age of the oldest
    file it references; the smallest expiration (days) a rule on shared/ could use today without deleting a
    referenced file; with --expire-days N, the referenced files such a rule deletes (S3: creation plus N days,
    rounded up to midnight UTC) and the checkpoints it breaks (exit 1 then); and objects per prefix, as stored
    and without entropy injection (S3 scales about 3,500 writes and 5,500 reads per second per prefix)."""
    from cutcheck.model.errors import StorageError
    from cutcheck.reference.storage.lifecycle import READS_PER_PREFIX, WRITES_PER_PREFIX, lifecycle

    if expire_days is not None and expire_days < 0:
        raise StorageError(f"--expire-days {expire_days} is not a number of days; give 0 or more (a lifecycle "
                           f"rule's Expiration Days).")
    listing = _storage_listing(directory, entropy_key, entropy_length, keep, reader=reader, endpoint_url=endpoint_url)
    report = lifecycle(listing, expire_days)
    jobs, name = _namer(listing)
    label = {c.key: name(c.path) for c in listing.checkpoints}
    _say(f"lifecycle of {report.root}" + (f", job {jobs[0]}" if len(jobs) == 1 else ""))
    out.print(table("", ["checkpoint", "kind", "files", "shared", "oldest file (days)", "oldest shared (days)"]
                    + (["deleted by the rule"] if expire_days is not None else []),
                    [[label.get(c.key, c.key), c.kind, c.files, c.shared_files, _days(c.oldest_age_days), _days(c.oldest_shared_age_days)]
                     + ([len(c.broken_by_rule) or ""] if expire_days is not None else []) for c in report.checkpoints]))
    for title, part in (("as stored", report.stored), ("without entropy injection", report.without_entropy)):
        _say(f"objects per prefix, {title}: {part.prefixes} prefix(es), at most {part.max_objects} object(s) in one")
        out.print(table("", ["prefix", "objects"], [[_prefix(p.prefix, name), p.objects] for p in part.top[:10]]))
    busiest = report.stored.max_objects
    _say(f"request rate: S3 serves about {WRITES_PER_PREFIX} writes and {READS_PER_PREFIX} reads per second per "
         f"prefix; the busiest prefix here holds {busiest} object(s), so reading all of it takes at least "
         f"{busiest / READS_PER_PREFIX:.2g} s" + (
             f"; with entropy injection the objects spread over {report.stored.prefixes} prefixes instead of "
             f"{report.without_entropy.prefixes}" if report.entropy else
             "; no entropy injection here: every shared file of a job shares one prefix (s3.entropy.key spreads them)"))
    if report.safe_days is None:
        _say("no retained checkpoint references a file under shared/, so a rule on shared/ deletes nothing needed "
             "today" + (f" (a rule on every file needs more than {report.safe_days_all - 1} day(s))"
                        if report.safe_days_all else ""))
    else:
        _say(f"a lifecycle rule on shared/ needs at least {report.safe_days} day(s) as of now: with fewer, the oldest "
             f"shared file a retained checkpoint references, {_prefix(report.oldest_shared, name).rstrip('/')}, would already have expired. That file keeps "
             f"aging while checkpoints use it (an N-day rule is safe only while no retained checkpoint references a "
             f"file older than N days), so re-run this before relying on a rule; deleting exactly what 'cutcheck "
             f"storage orphans' names is always safe")
    if report.entropy:
        _say("with entropy injection a lifecycle rule's prefix filter cannot single out shared/ (every data file starts "
             f"with its own random prefix): such a rule covers the whole bucket or selects by tag, so it needs at least "
             f"{report.safe_days_all} day(s), the age of the oldest file any retained checkpoint references")
    if expire_days is not None:
        if report.deleted_referenced:
            show = [[_prefix(e.path, name).rstrip("/"), f"{e.age_days:.1f}", ", ".join(label.get(k, k) for k in e.checkpoints)]
                    for e in report.expired[:50]]
            out.print(table(f"referenced files a {expire_days}-day rule deletes", ["file", "age (days)", "needed by"], show))
            _say(f"a {expire_days}-day rule on shared/ would delete {len(report.deleted_referenced)} referenced file(s)"
                 + (" (the first 50 above; --json has all)" if len(report.expired) > 50 else "")
                 + f" and break {len(report.broken)} checkpoint(s): {', '.join(label.get(k, k) for k in report.broken)}; "
                 f"it would also delete {report.deleted_unreferenced} unreferenced shared file(s)")
        else:
            _say(f"a {expire_days}-day rule on shared/ deletes no referenced file today "
                 f"({report.deleted_unreferenced} unreferenced shared file(s) would go)")
    write_json(json_path, report.to_json())
    raise typer.Exit(1 if report.broken else 0)


def _prefix(prefix: str, name: Callable[[str], str]) -> str:
    return prefix if "://" in prefix else name(prefix.rstrip("/")) + "/"


def _days(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}"
