"""The seed thread's question on a real RocksDB incremental checkpoint directory: which files in
shared/ may be deleted. An earlier run of the same job id crashed and was abandoned (its chk-N
directories removed, its shared/ files left behind); the job then ran again from scratch with the
same id, in the same directory, and failed keeping its retained checkpoints. Orphans must be
exactly what no retained checkpoint references: all the abandoned files, never a referenced one.
The proof that nothing needed was deleted is a restore after deleting the orphans."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from cli import app
from flink_bridge import RunOptions, runlog, runner
from flink_bridge.checkpoints import inspect_flink, is_flink_checkpoint_dir, referenced_files
from tests.flink.helpers import EXAMPLES, FLINK_MARKS

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

    # A copied directory still names absolute paths of the original in _metadata: they are re-rooted.
    moved = tmp_path / "moved" / "checkpoints"
    shutil.copytree(ck, moved)
    copy = inspect_flink(moved)
    assert {os.path.relpath(f, moved) for f in copy.orphans} == {os.path.relpath(f, ck) for f in orphans}
    assert all(not c.missing and all(f.startswith(str(moved)) for fs in c.files.values() for f in fs)
               for c in copy.checkpoints)

    # The storage CLI reads the same directory through this reader: same checkpoints, same orphans.
    ls = CliRunner().invoke(app, ["storage", "ls", str(ck), "--json", str(tmp_path / "ls.json")])
    assert ls.exit_code == 0, ls.output
    assert [c["key"] for c in json.loads((tmp_path / "ls.json").read_text())["checkpoints"]] == [c.key for c in listing.checkpoints]
    assert "chk-" in ls.output and "shared/" in ls.output
    dry = CliRunner().invoke(app, ["storage", "orphans", str(ck), "--json", str(tmp_path / "dry.json")])
    assert dry.exit_code == 0, dry.output
    assert set(json.loads((tmp_path / "dry.json").read_text())["orphans"]) == orphans

    # Delete the orphans (the CLI), then restore the latest retained checkpoint into the same sink
    # directory: the second run's committed files plus the continuation must hold every record once.
    gone = CliRunner().invoke(app, ["storage", "orphans", str(ck), "--delete", "--json", str(tmp_path / "rm.json")])
    assert gone.exit_code == 0, gone.output
    assert set(json.loads((tmp_path / "rm.json").read_text())["removed"]) == orphans
    assert not any(os.path.exists(f) for f in orphans) and all(os.path.exists(f) for f in referenced)
    third = runner.run(GRAPH, second.work, _opts(ck, restore=latest))
    assert [j.stats.state for j in third.jobs] == ["FINISHED"]
    assert (third.jobs[0].stats.restored or {}).get("id") == refs.id
    verdict, rows = runlog.verdict(third.graph, third)
    assert verdict.ok, verdict.to_json()
    assert rows == RECORDS
