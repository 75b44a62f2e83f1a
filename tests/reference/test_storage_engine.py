"""The engine on the on-disk storage: exactly-once with incremental state, failures and 3 retained,
a clean directory afterwards, restores equal to the in-memory backend's, the discard-on-abort
mutant killed by REF, and runs that start from an earlier run's checkpoint (claim, no_claim)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from cutcheck.reference import Scenario, simulate
from cutcheck.reference.engine import Engine
from cutcheck.reference.run_storage import open_storage
from cutcheck.reference.runtime.tasks import TaskSnapshot
from cutcheck.reference.storage.config import StorageConfig
from cutcheck.reference.storage.fs import FsCheckpointStorage
from cutcheck.reference.storage.inspection import inspect
from cutcheck.reference.storage.memory import CompletedCheckpoint, InMemoryStorage
from tests.reference.helpers import EXAMPLES, scenario
from tests.reference.test_storage_support import norm

FAILURES = [{"after_checkpoint": 2, "target": "count[0]"}, {"after_checkpoint": 6, "delay": 5, "target": "worker:0"}]


def keyed_pipeline(records: int = 800) -> dict[str, Any]:
    """examples/keyed-pipeline.json with fewer records (the tests' time goes into files)."""
    graph = json.loads((EXAMPLES / "keyed-pipeline.json").read_text())
    graph["vertices"][0]["records"] = records
    return graph


def on_disk(base: Path, mode: str = "aligned", seed: int = 3, threshold: int = 200, **kw: Any) -> dict[str, Any]:
    s = scenario(keyed_pipeline(), mode=mode, seed=seed, failures=kw.pop("failures", FAILURES), **kw)
    s["checkpoint"].update(retained=3, incremental=True, max_concurrent=3 if mode == "aligned" else 1)
    s["storage"] = {"dir": str(base), "inline_threshold": threshold}
    return s


class Tee:
    """The on-disk storage and the in-memory backend side by side: every restore must agree."""

    def __init__(self, fs: FsCheckpointStorage):
        self.fs, self.mem, self.compared = fs, InMemoryStorage(), 0

    def bind(self, *wiring: Any) -> None:
        self.fs.bind(*wiring)

    def acknowledge(self, snapshot: TaskSnapshot) -> None:
        self.fs.acknowledge(snapshot)
        self.mem.acknowledge(snapshot)

    def complete(self, checkpoint: CompletedCheckpoint, retained: int) -> list[int]:
        subsumed = self.fs.complete(checkpoint, retained)
        assert subsumed == self.mem.complete(checkpoint, retained)
        self.latest()
        return subsumed

    def abort(self, cp: int) -> None:
        self.fs.abort(cp)
        self.mem.abort(cp)

    def latest(self) -> CompletedCheckpoint | None:
        done = self.fs.latest()
        assert norm(done) == norm(self.mem.latest())
        self.compared += 1
        return done

    def retained_ids(self) -> list[int]:
        assert self.fs.retained_ids() == self.mem.retained_ids()
        return self.fs.retained_ids()

    def retained(self) -> list[tuple[int, str]]:
        assert self.fs.retained() == self.mem.retained()
        return self.fs.retained()

    def close(self) -> None:
        self.fs.close()


@pytest.mark.parametrize("mode", ["aligned", "unaligned"])
def test_incremental_with_failures_and_3_retained_is_exactly_once_and_leaves_no_orphans(tmp_path: Path, mode: str) -> None:
    r = simulate(Scenario.from_json(on_disk(tmp_path, mode, slow="count" if mode == "unaligned" else None)))
    assert r.ok, (r.violations, r.exactly_once)
    assert r.restarts == 2
    listing = inspect(tmp_path)
    assert [c.id for c in listing.checkpoints] == sorted(c["id"] for c in r.checkpoints if c["status"] == "completed")[-3:]
    assert listing.shared and all(c.missing == [] for c in listing.checkpoints)
    assert listing.orphans == []


def test_every_restore_from_disk_equals_the_in_memory_backend(tmp_path: Path) -> None:
    s = Scenario.from_json(on_disk(tmp_path, "unaligned", slow="count", threshold=0, interval=120))
    tee = Tee(FsCheckpointStorage(StorageConfig(dir=str(tmp_path), incremental=True, inline_threshold=0)))
    r = simulate(s, storage=tee)
    assert r.ok, r.violations
    assert tee.compared > 10 and r.restarts == 2
    assert r.summary()["input_state_records"] + r.summary()["output_state_records"] > 0  # channel state went through


def test_discard_on_abort_is_killed_by_ref_and_the_same_runs_are_clean(tmp_path: Path) -> None:
    killed = []
    for seed in range(1, 4):
        bad = simulate(Scenario.from_json(on_disk(tmp_path / f"m{seed}", seed=seed, mutants=["discard-on-abort"])))
        killed.append([v["invariant"] for v in bad.violations])
        good = simulate(Scenario.from_json(on_disk(tmp_path / f"c{seed}", seed=seed)))
        assert good.ok, good.violations
        assert inspect(tmp_path / f"c{seed}").orphans == []
    assert ["REF"] in killed and all(k in ([], ["REF"]) for k in killed), killed  # found, and by REF alone


def _crashed_run(base: Path, mode: str, steps: int) -> tuple[dict[str, Any], Path]:
    """A first run that stops dead mid-way (its pending checkpoint files stay behind)."""
    s = on_disk(base, mode, slow="count" if mode == "unaligned" else None, failures=[])
    first = simulate(Scenario.from_json({**s, "max_steps": steps}))
    assert [v["invariant"] for v in first.violations] == ["LIVENESS"]  # stopped, not finished
    latest = max(inspect(base).checkpoints, key=lambda c: c.id)
    return s, Path(latest.path)


@pytest.mark.parametrize("mode", ["aligned", "unaligned"])
@pytest.mark.parametrize("restore_mode", ["claim", "no_claim"])
def test_a_run_restored_from_an_earlier_runs_checkpoint_is_exactly_once(tmp_path: Path, mode: str, restore_mode: str) -> None:
    s, chk = _crashed_run(tmp_path, mode, 600)
    before = inspect(tmp_path)
    r = simulate(Scenario.from_json(s), restore=chk, restore_mode=restore_mode)
    assert r.ok, (r.violations, r.exactly_once)
    restored = int(chk.name.split("-")[1])
    assert r.restores[0]["checkpoint"] == restored and min(c["id"] for c in r.checkpoints) == restored + 1
    after = inspect(tmp_path)
    # the first run's leftovers (its pending checkpoint was "in progress" until a newer one completed); the
    # second left nothing
    assert set(after.orphans) | set(after.in_progress) == set(before.orphans) | set(before.in_progress)
    assert all(c.missing == [] for c in after.checkpoints)
    if restore_mode == "no_claim":  # the restored checkpoint is untouched; a new job directory holds the rest
        assert {c.path for c in before.checkpoints} < {c.path for c in after.checkpoints}
        assert len({c.job for c in after.checkpoints}) == 2
    else:  # claimed: adopted with the older ones, and subsumed like its own, in the same job directory
        assert not (chk / "_metadata").exists()
        assert {c.job for c in after.checkpoints} == {before.checkpoints[0].job}


@pytest.mark.parametrize("restore_mode", ["claim", "no_claim"])
def test_a_savepoint_is_self_contained_and_a_later_run_starts_from_it_after_a_move(tmp_path: Path, restore_mode: str) -> None:
    s = Scenario.from_json(on_disk(tmp_path / "ck", failures=[]))
    storage, _ = open_storage(s)
    engine = Engine(s, storage=storage)
    while engine.step < 500:
        engine.tick()
    sp = engine.trigger_checkpoint("savepoint")
    engine.run()
    storage.close()  # type: ignore[union-attr]
    assert engine.oracle.verdict().ok and sp in engine.coordinator.completed_ids
    (sp_dir,) = (tmp_path / "ck").glob("savepoint-*")
    refs = inspect(sp_dir).checkpoints[0]
    assert refs.id == sp and refs.kind == "savepoint" and refs.files["shared"] == []
    assert all(f.startswith(str(sp_dir) + os.sep) for fs in refs.files.values() for f in fs)  # all inside
    moved = tmp_path / "moved"
    sp_dir.rename(moved)
    r = simulate(s, checkpoint_dir=tmp_path / "ck2", restore=moved, restore_mode=restore_mode)
    assert r.ok, (r.violations, r.exactly_once)
    assert r.restores[0]["checkpoint"] == sp
    assert (moved / "_metadata").exists() == (restore_mode == "no_claim")  # claimed: deleted once subsumed


def test_a_restore_from_an_earlier_run_at_another_parallelism_goes_through_the_rescale(tmp_path: Path) -> None:
    """count 2 -> 3 and map 3 -> 2, with in-flight data in the checkpoint (unaligned)."""
    s, chk = _crashed_run(tmp_path / "first", "unaligned", 600)
    graph = s["graph"]
    for v in graph["vertices"]:
        v["parallelism"] = {"count": 3, "map": 2}.get(v["id"], v["parallelism"])
    for mode in ("no_claim", "claim"):  # (claim last: it takes the checkpoint over and deletes it in the end)
        r = simulate(Scenario.from_json({**s, "graph": graph}), checkpoint_dir=tmp_path / mode, restore=chk, restore_mode=mode)
        assert r.ok, (mode, r.violations, r.exactly_once)
        assert r.restores[0]["rescaled"] and r.summary()["input_state_records"] + r.summary()["output_state_records"] > 0
