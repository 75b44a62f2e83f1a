"""The seed thread's question on a real RocksDB incremental checkpoint directory: which files in
shared/ may be deleted. An earlier run of the same job id crashed and was abandoned (its chk-N
directories removed, its shared/ files left behind); the job then ran again from scratch with the
same id, in the same directory, and failed keeping its retained checkpoints. Orphans must be
exactly what no retained checkpoint references: all the abandoned files, never a referenced one.
The proof that nothing needed was deleted is a restore after deleting the orphans: every retained
checkpoint is restored by Flink itself (a job started from it that finishes), on RocksDB incremental
and on hashmap directories. A copy of a RocksDB directory names the original's absolute paths in its
``_metadata``: ``storage ls`` must not call it restorable, and Flink indeed cannot restore it once
the original is gone."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from cutcheck.cli import app
from cutcheck.flink_bridge import RunOptions, runlog, runner
from cutcheck.flink_bridge.checkpoints import inspect_flink, is_flink_checkpoint_dir, referenced_files
from cutcheck.model.errors import CutcheckError
from cutcheck.reference.storage.scope import QUARANTINE_DIR
from tests.flink.helpers import EXAMPLES, FLINK_MARKS, restore_each, tree

pytestmark = FLINK_MARKS

JOB = "c0ffee00" * 4
GRAPH = EXAMPLES / "keyed-pipeline.json"
RECORDS = 2000


def _opts(ck: Path, **kw: Any) -> RunOptions:
    return RunOptions(incremental=True, checkpoint_dir=str(ck), records=RECORDS, retained=2, **kw)


def _abandoned_then_retained(base: Path) -> tuple[Path, list[str], Any]:
    ck = base / "checkpoints"
    # 1. The earlier run: it crashes after checkpoint 2 (no restart) and is abandoned.
    first = runner.run(GRAPH, base / "first", _opts(ck, fail_after=2, restart=False, job_id=JOB))
    assert [j.stats.state for j in first.jobs] == ["FAILED"]
    for chk in (ck / JOB).glob("chk-*"):
        shutil.rmtree(chk)  # "we bring the job up fresh": its checkpoints are gone, shared/ is not
    planted = sorted(str(p) for p in (ck / JOB / "shared").iterdir())
    assert planted, "RocksDB incremental checkpoints wrote shared files"
    # 2. The same job id from scratch, same directory; it fails after checkpoint 3 and keeps 2 checkpoints.
    second = runner.run(GRAPH, base / "second", _opts(ck, fail_after=3, restart=False, job_id=JOB))
    assert [j.stats.state for j in second.jobs] == ["FAILED"]
    return ck, planted, second


# One test, not several: the steps depend on each other (deleting orphans changes the directory),
# and pytest -n 2 could otherwise hand them to different workers.
def test_orphans_on_a_real_rocksdb_incremental_directory(tmp_path: Path) -> None:
    ck, planted, second = _abandoned_then_retained(tmp_path)

    # The listing: retained checkpoints, their files by scope, who references each shared file.
    assert is_flink_checkpoint_dir(ck)
    listing = inspect_flink(ck)
    assert not listing.unreadable
    assert len(listing.checkpoints) == 2 and all(c.job == JOB for c in listing.checkpoints), "num-retained=2"
    orphans, referenced = set(listing.orphans), listing.referenced
    assert set(planted) <= orphans, "every file the abandoned run left in shared/ is an orphan"
    assert not orphans & referenced, "no file a retained checkpoint references is an orphan"
    for c in listing.checkpoints:
        assert c.files["shared"] and not c.missing
        for f in c.files["shared"]:
            assert c.key in listing.shared[f]
    # Who shares what, against each checkpoint's own _metadata read on its own. Whether two retained
    # checkpoints share an SST at all is RocksDB's business (a compaction between them can replace
    # every file, depending on when the failure lands), so the listing must agree with the metadata
    # either way rather than assume reuse.
    per_checkpoint = {c.key: set(referenced_files(c.path).files["shared"]) for c in listing.checkpoints}
    for f, keys in listing.shared.items():
        assert set(keys) == {k for k, files in per_checkpoint.items() if f in files}, f

    # One checkpoint read directly: exclusive files in chk-N, shared ones in shared/, all present.
    latest = runner.latest_retained(str(ck), JOB)
    refs = referenced_files(latest)
    assert refs.id == int(os.path.basename(latest)[4:]) and refs.kind == "checkpoint" and refs.job == JOB
    assert all(os.path.exists(f) for fs in refs.files.values() for f in fs)
    assert all(os.path.basename(os.path.dirname(f)) == "shared" for f in refs.files["shared"])
    assert all(os.path.dirname(f) == latest for f in refs.files["exclusive"])

    # A copied directory still names absolute paths of the original in _metadata: not restorable from
    # the copy (it depends on the original), yet the copy's own files are kept (re-rooted), never orphans.
    moved = tmp_path / "moved" / "checkpoints"
    shutil.copytree(ck, moved)
    copy = inspect_flink(moved)
    assert {os.path.relpath(f, moved) for f in copy.orphans} == {os.path.relpath(f, ck) for f in orphans}
    assert copy.checkpoints and all(not c.restorable and c.outside and not c.missing for c in copy.checkpoints)
    own = {f for f in copy.referenced | set(copy.rerooted) if f.startswith(str(moved) + os.sep)}
    assert copy.rerooted and {os.path.relpath(f, moved) for f in own} == {os.path.relpath(f, ck) for f in referenced}
    ls_copy = CliRunner().invoke(app, ["storage", "ls", str(moved)])
    assert ls_copy.exit_code == 1 and "NOT RESTORABLE" in ls_copy.stdout and "│ ok" not in ls_copy.stdout, ls_copy.output
    copy_before = tree(moved)
    refused = CliRunner().invoke(app, ["storage", "orphans", str(moved), "--delete", "--min-age", "0"])
    assert refused.exit_code == 2 and "can never be restored" in refused.stderr and tree(moved) == copy_before

    # The storage CLI reads the same directory through this reader: same checkpoints, same orphans.
    ls = CliRunner().invoke(app, ["storage", "ls", str(ck), "--json", str(tmp_path / "ls.json")])
    assert ls.exit_code == 0, ls.output
    assert [c["key"] for c in json.loads((tmp_path / "ls.json").read_text())["checkpoints"]] == [c.key for c in listing.checkpoints]
    assert "chk-" in ls.output and "shared/" in ls.output
    dry = CliRunner().invoke(app, ["storage", "orphans", str(ck), "--json", str(tmp_path / "dry.json")])
    assert dry.exit_code == 0, dry.output  # the default --min-age (1h): everything here is too young
    assert json.loads((tmp_path / "dry.json").read_text())["orphans"] == [] and "too young" in dry.stdout
    dry = CliRunner().invoke(app, ["storage", "orphans", str(ck), "--min-age", "0", "--json", str(tmp_path / "dry.json")])
    assert set(json.loads((tmp_path / "dry.json").read_text())["orphans"]) == orphans

    # Which bucket rule is safe on a real incremental job: none on shared/ (RocksDB keeps an SST for as long
    # as it lives), a chk- rule of at least two days (S3 rounds to midnight UTC), never "0 days".
    life = CliRunner().invoke(app, ["storage", "lifecycle", str(ck), "--json", str(tmp_path / "life.json")])
    assert life.exit_code == 0, life.output
    rules = {r["kind"]: r for r in json.loads((tmp_path / "life.json").read_text())["rules"]}
    assert rules["shared"]["days"] is None and "no age-based rule is safe" in life.stdout
    assert rules["chk"]["days"] is not None and rules["chk"]["days"] >= 2 and " 0 day" not in life.stdout

    # Delete the orphans (the CLI), then restore the latest retained checkpoint into the same sink
    # directory: the second run's committed files plus the continuation must hold every record once.
    before = tree(ck)
    gone = CliRunner().invoke(app, ["storage", "orphans", str(ck), "--delete", "--min-age", "0",
                                    "--json", str(tmp_path / "rm.json")])
    assert gone.exit_code == 0, gone.output
    assert set(json.loads((tmp_path / "rm.json").read_text())["removed"]) == orphans
    assert not any(os.path.exists(f) for f in orphans) and all(os.path.exists(f) for f in referenced)
    after = tree(ck)
    assert {p: h for p, h in after.items() if QUARANTINE_DIR not in p} == \
        {p: h for p, h in before.items() if p not in orphans}, "nothing but the orphans moved"
    third = runner.run(GRAPH, second.work, _opts(tmp_path / "after-delete", restore=latest))
    assert [j.stats.state for j in third.jobs] == ["FINISHED"]
    assert (third.jobs[0].stats.restored or {}).get("id") == refs.id
    verdict, rows = runlog.verdict(third.graph, third)
    assert verdict.ok, verdict.to_json()
    assert rows == RECORDS
    # Then every other retained checkpoint. (Last: FileSink resumes the in-progress part files its
    # state names, in the second run's sink directory, so these restores write to that output.)
    older = [c for c in listing.checkpoints if c.path != latest]
    assert restore_each(GRAPH, [c.path for c in older], tmp_path / "restores", _opts) == [c.id for c in older]
    assert tree(ck) == after, "a restore in no_claim mode never changes the checkpoint it starts from"

    # The copy, once the original is gone: ls names the missing files, --delete refuses, and Flink
    # itself cannot restore it (it reads the absolute paths its _metadata names).
    shutil.rmtree(ck)
    ls_gone = CliRunner().invoke(app, ["storage", "ls", str(moved)])
    assert ls_gone.exit_code == 1 and "MISSING" in ls_gone.stdout, ls_gone.output
    forced = CliRunner().invoke(app, ["storage", "orphans", str(moved), "--delete", "--min-age", "0", "--force"])
    assert forced.exit_code == 0 and "warning (--force)" in forced.stdout, forced.output
    kept = {os.path.join(moved, os.path.relpath(f, ck)) for f in referenced}
    assert all(os.path.exists(f) for f in kept), "--force moves orphans only: the copy's own state stays"
    try:
        broken = runner.run(GRAPH, tmp_path / "from-copy", _opts(tmp_path / "from-copy" / "ck", restore=str(
            moved / JOB / os.path.basename(latest)), restart=False, timeout_s=180.0))
        restored, why = [j.stats.state for j in broken.jobs] == ["FINISHED"], "finished"
    except CutcheckError as exc:  # the job failed while restoring its state (or Flink refused it)
        restored, why = False, str(exc)
    assert not restored and ("ended FAILED" in why or "did not accept" in why), \
        f"Flink restored a copy whose _metadata names files that are gone ({why})"


def test_orphans_delete_then_every_retained_checkpoint_restores_on_hashmap(tmp_path: Path) -> None:
    """The heap (hashmap) backend with nothing inlined: exclusive files in chk-N only. Planted leftovers
    go to the quarantine, nothing else changes, and Flink restores each retained checkpoint."""
    ck = tmp_path / "checkpoints"
    opts = RunOptions(incremental=False, inline_threshold="0b", checkpoint_dir=str(ck), records=RECORDS, retained=2,
                      fail_after=3, restart=False, job_id=JOB)
    first = runner.run(GRAPH, tmp_path / "first", opts)
    assert [j.stats.state for j in first.jobs] == ["FAILED"]
    # leftovers of checkpoints older than the newest completed one (a chk-N above it would be in progress)
    planted = [ck / JOB / "shared" / "left-behind", ck / JOB / "chk-1" / "aborted-state",
               ck / JOB / "chk-1" / "_metadata.inprogress", ck / "stray.txt"]
    for p in planted:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("stale")
        os.utime(p, (1, 1))  # written before the newest checkpoint completed
    listing = inspect_flink(ck)
    assert len(listing.checkpoints) == 2 and all(c.restorable and c.files["exclusive"] for c in listing.checkpoints)
    assert {str(p) for p in planted} <= set(listing.orphans) and not set(listing.orphans) & listing.referenced
    before = tree(ck)
    gone = CliRunner().invoke(app, ["storage", "orphans", str(ck), "--delete", "--min-age", "0",
                                    "--json", str(tmp_path / "rm.json")])
    assert gone.exit_code == 0, gone.output
    moved = set(json.loads((tmp_path / "rm.json").read_text())["removed"])
    assert moved == set(listing.orphans)
    after = tree(ck)
    assert {p: h for p, h in after.items() if QUARANTINE_DIR not in p} == {p: h for p, h in before.items() if p not in moved}
    assert CliRunner().invoke(app, ["storage", "ls", str(ck)]).exit_code == 0
    ids = restore_each(GRAPH, [c.path for c in listing.checkpoints], tmp_path / "restores",
                       lambda c, **kw: RunOptions(incremental=False, inline_threshold="0b", checkpoint_dir=str(c),
                                                  records=RECORDS, retained=2, **kw))
    assert ids == [c.id for c in listing.checkpoints]
    assert tree(ck) == after


JOB_B = "b0b0b0b0" * 4


def test_orphans_on_a_random_prefix_layout_beside_prod_and_a_claimed_job_then_flink_restores(
        tmp_path: Path, monkeypatch: Any) -> None:
    """Job A runs in X/ck; "prod" runs the same job id in X/prod/ck (a name an entropy value could have);
    job B is restored from A's newest checkpoint in CLAIM mode into X/ck.
    orphans --delete on the configured X/_entropy_/ck moves only the planted leftover (first setting
    aside, as ls advises, any checkpoint of A the claim broke), and Flink restores B and prod afterwards."""
    x = tmp_path / "X"
    a = runner.run(GRAPH, tmp_path / "a", _opts(x / "ck", fail_after=3, restart=False, job_id=JOB))
    prod = runner.run(GRAPH, tmp_path / "prod", _opts(x / "prod" / "ck", fail_after=3, restart=False, job_id=JOB))
    assert [j.stats.state for j in [*a.jobs, *prod.jobs]] == ["FAILED", "FAILED"]
    claimed = runner.latest_retained(str(x / "ck"), JOB)
    real_config = runner.job_config

    def claiming(*args: Any, **kw: Any) -> dict[str, str]:
        conf = real_config(*args, **kw)
        if "execution.state-recovery.path" in conf:
            conf["execution.state-recovery.claim-mode"] = "CLAIM"
        return conf

    monkeypatch.setattr(runner, "job_config", claiming)
    first_b = int(os.path.basename(claimed)[4:])
    # one checkpoint after the restore: in CLAIM mode it is incremental on the claimed one's SST files
    b = runner.run(GRAPH, tmp_path / "b", _opts(x / "ck", fail_after=first_b + 1, restart=False, job_id=JOB_B,
                                                 restore=claimed))
    monkeypatch.setattr(runner, "job_config", real_config)
    assert [j.stats.state for j in b.jobs] == ["FAILED"]
    b_latest = runner.latest_retained(str(x / "ck"), JOB_B)
    b_refs = referenced_files(b_latest)
    # (Whether B's checkpoint names A's SST files is RocksDB's business: Flink 2.3 here re-uploaded them.
    # Either way orphans must keep whatever it names, wherever under the base that is.)
    leftover = x / "Zq9r" / "ck" / JOB / "shared" / "aborted-upload"
    leftover.parent.mkdir(parents=True)
    leftover.write_text("stale")
    os.utime(leftover, (1, 1))
    where = str(x / "_entropy_" / "ck")
    ls = CliRunner().invoke(app, ["storage", "ls", where, "--json", str(tmp_path / "ls.json")])
    assert "X/prod/ck is named like an entropy prefix" in ls.stdout, ls.output
    for d in json.loads((tmp_path / "ls.json").read_text())["diagnoses"]:  # what a claim restore broke, if any
        assert d["cause"] in ("claim restore", "killed discard"), d
        aside = CliRunner().invoke(app, ["storage", *d["action"].split()[2:]])
        assert aside.exit_code == 0, aside.output
    prod_before, x_before = tree(x / "prod"), tree(x)
    gone = CliRunner().invoke(app, ["storage", "orphans", where, "--delete", "--min-age", "0", "--json",
                                    str(tmp_path / "rm.json")])
    assert gone.exit_code == 0, gone.output
    removed = set(json.loads((tmp_path / "rm.json").read_text())["removed"])
    assert str(leftover) in removed and not any(f.startswith(str(x / "prod") + os.sep) for f in removed)
    assert tree(x / "prod") == prod_before
    assert {p: h for p, h in tree(x).items() if QUARANTINE_DIR not in p} == \
        {p: h for p, h in x_before.items() if p not in removed}
    assert all(os.path.exists(f) for fs in b_refs.files.values() for f in fs)
    prod_latest = runner.latest_retained(str(x / "prod" / "ck"), JOB)
    assert restore_each(GRAPH, [b_latest, prod_latest], tmp_path / "restores", _opts) == [
        b_refs.id, int(os.path.basename(prod_latest)[4:])]
