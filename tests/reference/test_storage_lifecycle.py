"""`cutcheck storage lifecycle`: per retained checkpoint the age of the oldest file it references, the
smallest expiration a lifecycle rule on shared/ could use today, exactly which referenced files a
proposed rule deletes and which checkpoints that breaks, and objects per prefix with and without
entropy injection. On local directories (file times set by hand); S3 is in test_storage_s3."""

from __future__ import annotations

import calendar
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cutcheck.cli import app
from cutcheck.reference.storage.inspection import inspect
from cutcheck.reference.storage.lifecycle import days_for, earliest_deletion, expires_at, safe_days
from tests.reference.helpers import scenario, small_graph
from tests.reference.test_storage_cli import JOB, assert_user_error, simulated

runner = CliRunner()
DAY = 86400


def test_expiry_is_creation_plus_days_rounded_up_to_midnight_utc() -> None:
    created = calendar.timegm((2026, 1, 1, 10, 0, 0))
    assert expires_at(created, 1) == calendar.timegm((2026, 1, 3, 0, 0, 0))
    assert expires_at(created, 0) == calendar.timegm((2026, 1, 2, 0, 0, 0))
    midnight = calendar.timegm((2026, 1, 1, 0, 0, 0))
    assert expires_at(midnight, 1) == calendar.timegm((2026, 1, 2, 0, 0, 0))
    for now_offset in (0, 1, 3600 * 13, DAY * 3 + 5, DAY * 40 + 77):
        now = created + now_offset
        n = safe_days(created, now)
        assert expires_at(created, n) > now and (n == 0 or expires_at(created, n - 1) <= now)


def _aged(ck: Path, now: float) -> tuple[str, list[str]]:
    """Every file a day old, and the shared file the most checkpoints reference 30 days old; returns it
    and the checkpoints that reference it."""
    for d, _, names in os.walk(ck):
        for n in names:
            os.utime(os.path.join(d, n), (now - DAY, now - DAY))
    listing = inspect(ck)
    old = max(listing.shared, key=lambda f: (len(listing.shared[f]), f))
    os.utime(old, (now - 30 * DAY, now - 30 * DAY))
    return old, listing.shared[old]


def test_lifecycle_names_the_safe_rule_per_prefix_and_what_a_shorter_rule_breaks(tmp_path: Path) -> None:
    _, ck = simulated(tmp_path / "run")
    now = time.time()
    old, users = _aged(ck, now)
    every = runner.invoke(app, ["storage", "lifecycle", str(ck), "--json", str(tmp_path / "l.json")])
    assert every.exit_code == 0, every.stdout + every.stderr
    report = json.loads((tmp_path / "l.json").read_text())
    assert report["oldest_shared"] == old and report["entropy"] is False
    assert report["oldest_shared_days"] == pytest.approx(30, abs=0.01)
    rules = {r["kind"]: r for r in report["rules"]}
    assert rules["shared"]["days"] is None and rules["shared"]["prefix"] == f"{ck / JOB}/shared/"
    assert "no age-based rule is safe" in every.stdout and "cutcheck storage orphans --delete" in every.stdout
    # chk-: every file a day old and all checkpoints written at once (no interval seen): needed 1 day -> 3 days
    assert rules["chk"]["days"] == days_for(DAY) == 3 and rules["chk"]["prefix"] == f"{ck / JOB}/chk-"
    assert "at least 0 day" not in every.stdout
    listing = inspect(ck)
    assert [c["key"] for c in report["checkpoints"]] == [c.key for c in listing.checkpoints]
    for c in report["checkpoints"]:
        assert c["oldest_shared_age_days"] == pytest.approx(30 if c["key"] in users else 1, abs=0.01)

    # a 32-day rule deletes nothing referenced by tomorrow; 31 may (S3 rounds to midnight UTC), 30 has
    ok = runner.invoke(app, ["storage", "lifecycle", str(ck), "--expire-days", "32", "--json", str(tmp_path / "ok.json")])
    assert ok.exit_code == 0 and json.loads((tmp_path / "ok.json").read_text())["deleted_referenced"] == []
    short = runner.invoke(app, ["storage", "lifecycle", str(ck), "--expire-days", "30", "--json",
                                str(tmp_path / "short.json")])
    assert short.exit_code == 1, short.stdout
    broken = json.loads((tmp_path / "short.json").read_text())
    assert broken["deleted_referenced"] == [old] and broken["broken"] == users
    (expired,) = broken["expired"]
    assert expired["path"] == old and expired["checkpoints"] == users and expired["age_days"] == pytest.approx(30, abs=0.01)
    assert "referenced files a" in short.stdout and "needed by" in short.stdout
    assert f"break {len(users)} checkpoint(s)" in short.stdout
    all_gone = runner.invoke(app, ["storage", "lifecycle", str(ck), "--expire-days", "0", "--json",
                                   str(tmp_path / "zero.json")])
    zero = json.loads((tmp_path / "zero.json").read_text())
    assert all_gone.exit_code == 1 and sorted(zero["deleted_referenced"]) == sorted(listing.shared)
    assert zero["broken"] == [c.key for c in listing.checkpoints if c.files["shared"]]


def test_fresh_checkpoints_never_get_a_rule_under_two_days(tmp_path: Path) -> None:
    _, ck = simulated(tmp_path / "run")
    result = runner.invoke(app, ["storage", "lifecycle", str(ck), "--json", str(tmp_path / "l.json")])
    assert result.exit_code == 0, result.stdout + result.stderr
    report = json.loads((tmp_path / "l.json").read_text())
    assert all(r["days"] is None or r["days"] >= 2 for r in report["rules"]) and report["rules"]
    i = result.stdout.find(" 0 days")
    assert i < 0 and "at least 0 day" not in result.stdout, result.stdout[i - 300:i + 30]


def test_lifecycle_keeps_what_a_job_restored_in_claim_mode_references(tmp_path: Path) -> None:
    """Job B, restored in claim mode from A, names a 12-day-old file in A's shared/: a rule that deletes it
    breaks B, and lifecycle A says so (orphans A keeps it too)."""
    scenario_path, ck = simulated(tmp_path / "run")
    chks = sorted((ck / JOB).glob("chk-*"), key=lambda p: int(p.name[4:]))
    s2 = json.loads(scenario_path.read_text())
    s2["storage"]["job"], s2["checkpoint"]["retained"], s2["failures"] = "otherjob", 1, []
    (tmp_path / "s2.json").write_text(json.dumps(s2))
    claim = runner.invoke(app, ["simulate", str(tmp_path / "s2.json"), "--checkpoint-dir", str(ck), "--restore",
                                str(chks[-1]), "--restore-mode", "claim"])
    assert claim.exit_code == 0, claim.stderr
    again = runner.invoke(app, ["simulate", str(scenario_path), "--checkpoint-dir", str(ck)])  # A's id, from scratch
    assert again.exit_code == 0, again.stderr
    own = {f for c in inspect(ck / JOB).checkpoints for fs in c.files.values() for f in fs}
    needed = sorted(f for f in inspect(ck / "otherjob").referenced if f.startswith(str(ck / JOB) + os.sep) and f not in own)
    assert needed, "B names shared files of A's first run that A's new run does not"
    now = time.time()
    for f in needed:
        os.utime(f, (now - 12 * DAY, now - 12 * DAY))
    listing = inspect(ck / JOB)  # A alone: B is read for what it keeps
    assert set(needed) <= listing.kept and not set(needed) & set(listing.orphans)
    life = runner.invoke(app, ["storage", "lifecycle", str(ck / JOB), "--expire-days", "2", "--json",
                               str(tmp_path / "l.json")])
    assert life.exit_code == 1, life.stdout + life.stderr
    report = json.loads((tmp_path / "l.json").read_text())
    assert set(needed) <= set(report["deleted_referenced"]) and "otherjob/chk-" in " ".join(report["broken"])
    assert report["oldest_shared_days"] == pytest.approx(12, abs=0.01)
    assert {r["kind"]: r["days"] for r in report["rules"]}["shared"] is None


def test_objects_per_prefix_without_entropy(tmp_path: Path) -> None:
    _, ck = simulated(tmp_path / "run")
    runner.invoke(app, ["storage", "lifecycle", str(ck), "--json", str(tmp_path / "l.json")])
    report = json.loads((tmp_path / "l.json").read_text())
    listing = inspect(ck)
    shared_dir = os.path.dirname(next(iter(listing.shared))) + "/"
    assert report["stored"] == report["without_entropy"]
    top = {p["prefix"]: p["objects"] for p in report["stored"]["top"]}
    assert top[shared_dir] == len(os.listdir(shared_dir))


def test_random_prefixes_spread_objects_over_many_prefixes(tmp_path: Path) -> None:
    s = scenario(small_graph(300), mode="aligned", seed=5, interval=30)
    s["checkpoint"].update(retained=2, incremental=True)
    s["storage"] = {"inline_threshold": 0, "entropy": "_entropy_", "entropy_length": 4}
    (tmp_path / "s.json").write_text(json.dumps(s))
    configured = tmp_path / "bucket" / "_entropy_" / "ck"
    run = runner.invoke(app, ["simulate", str(tmp_path / "s.json"), "--checkpoint-dir", str(configured)])
    assert run.exit_code == 0, run.stdout + run.stderr
    result = runner.invoke(app, ["storage", "lifecycle", str(configured), "--json", str(tmp_path / "l.json")])
    assert result.exit_code == 0, result.stdout + result.stderr
    report = json.loads((tmp_path / "l.json").read_text())
    assert report["entropy"] is True
    files = [os.path.join(d, n) for d, _, names in os.walk(tmp_path / "bucket") for n in names]
    data = [f for f in files if os.path.basename(f) != "_metadata"]
    assert report["stored"]["max_objects"] < report["without_entropy"]["max_objects"]
    assert report["stored"]["prefixes"] > report["without_entropy"]["prefixes"]
    assert report["without_entropy"]["top"][0]["prefix"].startswith(str(tmp_path / "bucket" / "ck") + "/")
    assert sum(p["objects"] for p in report["stored"]["top"]) <= len(files) and len(data) > 2
    assert "spread over" in result.stdout


def test_lifecycle_refuses_what_ls_refuses(tmp_path: Path) -> None:
    assert_user_error(runner.invoke(app, ["storage", "lifecycle", str(tmp_path / "nope")]), "no such checkpoint directory")
    _, ck = simulated(tmp_path / "run")
    assert_user_error(runner.invoke(app, ["storage", "lifecycle", str(ck), "--expire-days", "-1"]), "--expire-days")


# ---------------------------------------------------------------------------- the recommended rule, replayed
INTERVAL = 5 * 3600.0  # a checkpoint every 5 hours, 2 retained: each lives 10 to 15 hours


def _replay(rule: str | None, days: int | None, *, warm_days: int = 3, run_days: int = 20) -> tuple[Any, str | None]:
    """A running incremental job (engine storage, simulated clock: every file stamped with the moment
    it was written), first ``warm_days`` then ``run_days`` more while an S3-style rule on ``rule``
    (``"chk"``: <job>/chk-, ``"shared"``: <job>/shared/) expires files at their earliest deletion.
    Returns (lifecycle's report after the warm-up, the first referenced file the rule deleted)."""
    import random
    import tempfile

    from cutcheck.model.errors import InvariantViolation
    from cutcheck.reference.storage.config import StorageConfig
    from cutcheck.reference.storage.fs import FsCheckpointStorage
    from cutcheck.reference.storage.lifecycle import lifecycle
    from cutcheck.reference.storage.memory import CompletedCheckpoint
    from tests.reference.test_storage_support import (
        PARALLELISM,
        SIDS,
        advance,
        files_under,
        initial_state,
        make_snapshot,
    )

    base = tempfile.mkdtemp(prefix="cutcheck-lifecycle-replay-")
    try:
        fs = FsCheckpointStorage(StorageConfig(dir=base, incremental=True, inline_threshold=0, seed=3))
        rng, state, stamped = random.Random(5), initial_state(), set()
        now, cp, report = calendar.timegm((2026, 3, 1, 7, 13, 0)), 0, None
        end_warm = now + warm_days * DAY
        while now < end_warm + run_days * DAY:
            cp += 1
            fs.begin(cp, "checkpoint")
            advance(state, rng, groups=1)  # most key groups never change: their shared files stay referenced
            acks = {sid: make_snapshot(cp, sid, state, rng) for sid in SIDS}
            try:
                for snap in acks.values():
                    fs.acknowledge(snap)
                fs.complete(CompletedCheckpoint(cp, "checkpoint", 0, dict(PARALLELISM), acks, cp, cp + 1), 2)
            except (InvariantViolation, FileNotFoundError) as exc:
                return report, f"the job failed: {exc}"
            for f in files_under(base) - stamped:
                os.utime(f, (now, now))
                stamped.add(f)
            if report is None and now >= end_warm:
                report = lifecycle(inspect(base, now=now), now=now)
            if report is not None and rule is not None and days is not None:
                prefix = os.path.join(fs.job_dir, "chk-" if rule == "chk" else "shared/")
                needed = {p for h in fs.held for p in [os.path.join(h.path, "_metadata"), *h.files["exclusive"],
                                                       *h.files["shared"]]}
                for f in sorted(files_under(base)):
                    if f.startswith(prefix) and earliest_deletion(os.stat(f).st_mtime, days) <= now:
                        os.remove(f)
                        if f in needed:
                            return report, f
            now += INTERVAL
        return report, None
    finally:
        import shutil

        shutil.rmtree(base, ignore_errors=True)


def test_the_recommended_rule_replayed_over_simulated_days_deletes_nothing_referenced() -> None:
    report, _ = _replay(None, None)
    rules = {r.kind: r for r in report.rules}
    assert rules["shared"].days is None  # incremental: no age-based rule on shared/ is safe
    days = rules["chk"].days
    assert days is not None and days >= 2
    assert _replay("chk", days)[1] is None  # 20 more days under the rule: nothing referenced deleted
    # the controls: a rule one day shorter on chk-, or the same rule on shared/, deletes a referenced file
    assert _replay("chk", days - 1)[1] is not None
    assert _replay("shared", days)[1] is not None
    assert _replay("shared", 10)[1] is not None


def test_a_savepoint_never_gets_a_rule(tmp_path: Path) -> None:
    import random

    from cutcheck.reference.storage.config import StorageConfig
    from cutcheck.reference.storage.fs import FsCheckpointStorage
    from cutcheck.reference.storage.lifecycle import lifecycle
    from cutcheck.reference.storage.memory import CompletedCheckpoint
    from tests.reference.test_storage_support import PARALLELISM, SIDS, initial_state, make_snapshot

    fs = FsCheckpointStorage(StorageConfig(dir=str(tmp_path / "ck"), incremental=True, inline_threshold=0))
    state, rng = initial_state(), random.Random(1)
    for cp, kind in ((1, "checkpoint"), (2, "savepoint")):
        fs.begin(cp, kind)
        acks = {sid: make_snapshot(cp, sid, state, rng) for sid in SIDS}
        for snap in acks.values():
            fs.acknowledge(snap)
        fs.complete(CompletedCheckpoint(cp, kind, 0, dict(PARALLELISM), acks, cp, cp + 1), 3)
    rules = {r.kind: r for r in lifecycle(inspect(tmp_path / "ck")).rules}
    assert rules["savepoint"].days is None and "the user's" in rules["savepoint"].why
