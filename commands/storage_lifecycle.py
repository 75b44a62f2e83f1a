"""storage lifecycle: which age-based lifecycle rule, on which prefix, stays safe while the job runs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import typer

from cutcheck.commands.common import out, table, user_errors, write_json
from cutcheck.commands.storage import (
    _CONF,
    _DIR_HELP,
    _EKEY,
    _ELEN,
    _ENDPOINT_HELP,
    _KEEP_HELP,
    _READER_HELP,
    _namer,
    _say,
    _storage_listing,
    storage_app,
)


@storage_app.command("lifecycle")
@user_errors
def storage_lifecycle(
    directory: str = typer.Argument(..., help=_DIR_HELP),
    expire_days: int = typer.Option(None, "--expire-days",
                                    help="A proposed lifecycle expiration rule on shared/, in days: which referenced "
                                    "files it deletes by tomorrow and which checkpoints that breaks."),
    json_path: Path = typer.Option(None, "--json", help="Write the report as JSON."),
    keep: list[str] = typer.Option(None, "--keep-referenced-by", help=_KEEP_HELP),
    entropy_key: str = _EKEY,
    entropy_length: int = _ELEN,
    flink_conf: Path = _CONF,
    reader: str = typer.Option("python", "--reader", help=_READER_HELP),
    endpoint_url: str = typer.Option(None, "--endpoint-url", help=_ENDPOINT_HELP),
) -> None:
    """Which age-based lifecycle rule, on which prefix, stays safe while the job keeps running. Every file
    any _metadata under the base (or a --keep-referenced-by directory) references counts, and S3's rounding
    to midnight UTC (an N-day rule may delete after N-1 days and a few hours). shared/ of an incremental job
    has no safe rule (a file stays referenced as long as RocksDB keeps it): the report says so and what to
    do instead. With --expire-days N, the referenced files such a rule on shared/ deletes by tomorrow and the
    checkpoints it breaks (exit 1 then). Also objects per prefix, as stored and without entropy injection."""
    from cutcheck.model.errors import StorageError
    from cutcheck.reference.storage.lifecycle import READS_PER_PREFIX, WRITES_PER_PREFIX, lifecycle

    if expire_days is not None and expire_days < 0:
        raise StorageError(f"--expire-days {expire_days} is not a number of days; give 0 or more (a lifecycle "
                           f"rule's Expiration Days).")
    listing = _storage_listing(directory, entropy_key, entropy_length, keep, reader=reader, endpoint_url=endpoint_url,
                               flink_conf=flink_conf)
    report = lifecycle(listing, expire_days)
    jobs, name = _namer(listing)
    label = {c.key: name(c.path) for c in listing.checkpoints}
    _say(f"lifecycle of {report.root}" + (f", job {jobs[0]}" if len(jobs) == 1 else ""))
    out.print(table("", ["checkpoint", "kind", "files", "shared", "oldest file (days)", "oldest shared (days)"]
                    + (["deleted by the rule"] if expire_days is not None else []),
                    [[label.get(c.key, c.key), c.kind, c.files, c.shared_files, _days(c.oldest_age_days),
                      _days(c.oldest_shared_age_days)] + ([len(c.broken_by_rule) or ""] if expire_days is not None else [])
                     for c in report.checkpoints]))
    out.print(table("age-based rules", ["prefix", "rule", "referenced files", "oldest (days)", "why"],
                    [[r.prefix, f"{r.days} days" if r.days is not None else "NONE SAFE", r.referenced,
                      _days(r.oldest_days), r.why] for r in report.rules]))
    for r in report.rules:
        if r.days is not None:
            _say(f"{r.prefix}: an expiration rule of {r.days} days or more stays safe while the job runs; {r.instead}.")
        else:
            _say(f"{r.prefix}: no age-based rule is safe ({r.why}); instead {r.instead}.")
    if not report.rules:
        _say("no retained checkpoint of a job directory here: nothing to base a rule on; leave it without one.")
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
    if expire_days is not None:
        if report.deleted_referenced:
            show = [[_prefix(e.path, name).rstrip("/"), f"{e.age_days:.1f}", ", ".join(label.get(k, k) for k in e.checkpoints)]
                    for e in report.expired[:50]]
            out.print(table(f"referenced files a {expire_days}-day rule deletes by tomorrow", ["file", "age (days)",
                                                                                          "needed by"], show))
            _say(f"a {expire_days}-day rule on shared/ would delete {len(report.deleted_referenced)} referenced file(s)"
                 + (" (the first 50 above; --json has all)" if len(report.expired) > 50 else "")
                 + f" and break {len(report.broken)} checkpoint(s): {', '.join(label.get(k, k) for k in report.broken)}; "
                 f"it would also delete {report.deleted_unreferenced} unreferenced shared file(s)")
        else:
            _say(f"a {expire_days}-day rule on shared/ deletes no referenced file by tomorrow "
                 f"({report.deleted_unreferenced} unreferenced shared file(s) would go); referenced files keep aging, "
                 f"so it is not safe for long" if report.oldest_shared else
                 f"a {expire_days}-day rule on shared/ deletes no referenced file: no checkpoint references one")
    write_json(json_path, report.to_json())
    raise typer.Exit(1 if report.broken else 0)


def _prefix(prefix: str, name: Callable[[str], str]) -> str:
    return prefix if "://" in prefix else name(prefix.rstrip("/")) + "/"


def _days(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}"
