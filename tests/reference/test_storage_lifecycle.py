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

import pytest
from typer.testing import CliRunner

from cutcheck.cli import app
from cutcheck.reference.storage.inspection import inspect
from cutcheck.reference.storage.lifecycle import expires_at, safe_days
from tests.reference.helpers import scenario, small_graph
from tests.reference.test_storage_cli import assert_user_error, simulated

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


def test_lifecycle_names_the_safe_age_and_what_a_shorter_rule_breaks(tmp_path: Path) -> None:
    _, ck = simulated(tmp_path / "run")
    now = time.time()
    old, users = _aged(ck, now)
    every = runner.invoke(app, ["storage", "lifecycle", str(ck), "--json", str(tmp_path / "l.json")])
    assert every.exit_code == 0, every.stdout + every.stderr
    report = json.loads((tmp_path / "l.json").read_text())
    want = safe_days(now - 30 * DAY, now)
    assert report["safe_days"] in (want, want + 1)  # the report's "now" is a moment later
    assert report["oldest_shared"] == old and report["entropy"] is False
    listing = inspect(ck)
    assert [c["key"] for c in report["checkpoints"]] == [c.key for c in listing.checkpoints]
    for c in report["checkpoints"]:
        assert c["oldest_shared_age_days"] == pytest.approx(30 if c["key"] in users else 1, abs=0.01)
    assert f"needs at least {report['safe_days']} day(s)" in every.stdout

    safe = report["safe_days"]
    ok = runner.invoke(app, ["storage", "lifecycle", str(ck), "--expire-days", str(safe), "--json",
                             str(tmp_path / "ok.json")])
    assert ok.exit_code == 0 and json.loads((tmp_path / "ok.json").read_text())["deleted_referenced"] == []
    short = runner.invoke(app, ["storage", "lifecycle", str(ck), "--expire-days", str(safe - 1), "--json",
                                str(tmp_path / "short.json")])
    assert short.exit_code == 1, short.stdout
    broken = json.loads((tmp_path / "short.json").read_text())
    assert broken["deleted_referenced"] == [old] and broken["broken"] == users
    (expired,) = broken["expired"]
    assert expired["path"] == old and expired["checkpoints"] == users and expired["age_days"] == pytest.approx(30, abs=0.01)
    assert "referenced files a" in short.stdout and "needed by" in short.stdout
    assert f"break {len(users)} checkpoint(s)" in short.stdout
    # a 1-day rule takes every shared file, referenced or not
    all_gone = runner.invoke(app, ["storage", "lifecycle", str(ck), "--expire-days", "0", "--json",
                                   str(tmp_path / "zero.json")])
    zero = json.loads((tmp_path / "zero.json").read_text())
    assert all_gone.exit_code == 1 and sorted(zero["deleted_referenced"]) == sorted(listing.shared)
    assert zero["broken"] == [c.key for c in listing.checkpoints if c.files["shared"]]


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
