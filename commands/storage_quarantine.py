"""Quarantine commands: storage quarantine-checkpoint, storage restore-quarantine, storage purge."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from cutcheck.commands.common import out, table, user_errors, write_json
from cutcheck.commands.storage import (
    _BASE_HELP,
    _CONF,
    _EKEY,
    _ELEN,
    _ENDPOINT_HELP,
    _KEEP_HELP,
    _batch_json,
    _bytes,
    _say,
    _storage_listing,
    storage_app,
)
from cutcheck.commands.storage_output import print_rows


@storage_app.command("quarantine-checkpoint")
@user_errors
def storage_quarantine_checkpoint(
    directory: str = typer.Argument(..., help="A chk-N (or savepoint) directory that can never be restored."),
    force: bool = typer.Option(False, "--force", help="Set it aside even though it is restorable."),
    keep: list[str] = typer.Option(None, "--keep-referenced-by", help=_KEEP_HELP),
    json_path: Path = typer.Option(None, "--json", help="Write what was moved as JSON."),
    entropy_key: str = _EKEY,
    entropy_length: int = _ELEN,
    flink_conf: Path = _CONF,
    endpoint_url: str = typer.Option(None, "--endpoint-url", help=_ENDPOINT_HELP),
) -> None:
    """Set a checkpoint that can never be restored aside, whole and reversibly: its _metadata and the
    files of its directory move into <base>/.cutcheck-quarantine/ like orphans do; files any other
    checkpoint references stay. Shared files only it used become orphans for 'storage orphans'.
    Refuses a restorable checkpoint unless --force. Undo: storage restore-quarantine."""
    from cutcheck.model.errors import StorageError
    from cutcheck.reference.storage.quarantine import quarantine

    listing = _storage_listing(directory, entropy_key, entropy_length, keep, endpoint_url=endpoint_url,
                               flink_conf=flink_conf)
    mine = [c for c in listing.checkpoints if c.path == listing.root]
    if not mine or len(listing.checkpoints) != 1:
        raise StorageError(f"{directory} is not one checkpoint directory; give the chk-N (or savepoint) directory "
                           f"that 'cutcheck storage ls' says is NOT RESTORABLE.")
    c = mine[0]
    if c.restorable and not force:
        raise StorageError(f"{listing.uri(c.path)} is restorable, so it is not set aside; only checkpoints that can "
                           f"never be restored are (pass --force to set this one aside anyway).")
    others = {f for fs in listing.context_files.values() for f in fs} | set(listing.rerooted)
    reasons = {f: f"part of {os.path.basename(c.path)}, which can never be restored" for f in listing.infos
               if f not in others}
    batch = quarantine(listing, reasons, keep=others, metadata=True)
    stayed = sorted(f for f in listing.infos if f in others)
    _say(f"set aside {os.path.basename(c.path)}: moved {len(batch.files)} file(s), {_bytes(batch.size)}, to "
         f"{listing.uri(batch.path)}" + (f"; {len(stayed)} file(s) other checkpoints reference stay" if stayed else "")
         + f". Undo: cutcheck storage restore-quarantine {listing.uri(listing.base)} {batch.name}")
    write_json(json_path, {"checkpoint": listing.uri(c.path), "quarantine": _batch_json(batch, listing.uri),
                           "stayed": [listing.uri(f) for f in stayed]})


@storage_app.command("restore-quarantine")
@user_errors
def storage_restore_quarantine(
    base: str = typer.Argument(..., help=_BASE_HELP),
    batch_name: str = typer.Argument(None, metavar="[BATCH]", help="The batch (a folder name); default: the newest."),
    json_path: Path = typer.Option(None, "--json", help="Write what was put back as JSON."),
    endpoint_url: str = typer.Option(None, "--endpoint-url", help=_ENDPOINT_HELP),
) -> None:
    """Put a quarantined batch back where its files were, and say exactly what was put back. Refuses
    (nothing moved) when another file exists at an original path, or a quarantined file changed since it
    was moved (its inode, size or modification time when it was moved by a hard link; its sha256 when it
    was copied; on an object store its ETag)."""
    from cutcheck.reference.storage.quarantine import restore_batch
    from cutcheck.reference.storage.store import open_store

    store, _ = open_store(base, endpoint_url)
    done = restore_batch(base, batch_name, endpoint_url=endpoint_url)
    batch = done.batch
    print_rows(f"restored from batch {batch.name}", ["file", "size"],  # streamed past 1 000 rows, as orphans are
               ([store.uri(m.original), _bytes(m.size)] for m in done.restored), len(done.restored))
    extra = []
    if done.in_place:
        extra.append(f"{len(done.in_place)} file(s) of its plan were never moved (the run that made it was "
                     f"interrupted, or another run moved them first) and are in place")
    if done.absent:
        extra.append(f"{len(done.absent)} planned file(s) were never moved and are no longer there (deleted since, "
                     f"not by cutcheck)")
    if done.dirs:
        extra.append(f"{len(done.dirs)} empty checkpoint directory(ies) made again")
    _say(f"restored {len(done.restored)} file(s), {_bytes(done.size)}, of batch {batch.name} (quarantined "
         f"{batch.created})" + ("; " + "; ".join(extra) if extra else ""))
    data = _batch_json(batch, store.uri)
    data["restored"] = [store.uri(m.original) for m in done.restored]
    data["in_place"] = [store.uri(m.original) for m in done.in_place]
    data["absent"] = [store.uri(m.original) for m in done.absent]
    data["dirs_made"] = [store.uri(d) for d in done.dirs]
    write_json(json_path, data)


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
