"""Claim restores break the checkpoints that share the claimed one's files, as in Flink.

The sequence the storage state machine found under Hypothesis's default profile: a no_claim restore
into a new job (run2), a claim restore of run2's newest checkpoint into run3, which builds on it and
stops, then a claim restore of run3's newest checkpoint into run4. run4 owns every file run3/chk-7
names, run2's shared files among them, and deletes them once it subsumes chk-7: run2/chk-5 can no
longer be restored. Flink does the same (CheckpointCoordinator.restoreSavepoint with CLAIM registers
the claimed checkpoint's files as the job's own shared state; docs/flink-facts.md §8.4), so the
state machine treats such checkpoints as forfeited, and ``storage ls`` names the cause."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

from typer.testing import CliRunner

from cutcheck.cli import app
from cutcheck.reference.storage.config import StorageConfig
from cutcheck.reference.storage.fs import FsCheckpointStorage
from cutcheck.reference.storage.inspection import inspect
from cutcheck.reference.storage.memory import CompletedCheckpoint
from tests.reference.test_storage_support import PARALLELISM, SIDS, advance, initial_state, make_snapshot

runner = CliRunner()


def _checkpoints(fs: FsCheckpointStorage, first: int, last: int, state: dict, rng: random.Random,
                 retained: int = 2) -> None:
    for cp in range(first, last + 1):
        fs.begin(cp, "checkpoint")
        advance(state, rng, groups=1)
        acks = {sid: make_snapshot(cp, sid, state, rng) for sid in SIDS}
        for snap in acks.values():
            fs.acknowledge(snap)
        fs.complete(CompletedCheckpoint(cp, "checkpoint", 0, dict(PARALLELISM), acks, cp * 10, cp * 10 + 3), retained)


def claim_chain(base: Path) -> tuple[str, str]:
    """(run2/chk-5, the shared file of it that run4 deletes); the runs as in the module docstring."""
    rng, state = random.Random(7), initial_state()
    config = StorageConfig(dir=str(base), incremental=True, inline_threshold=0, seed=1)
    run1 = FsCheckpointStorage(config)
    _checkpoints(run1, 1, 3, state, rng)
    run2 = FsCheckpointStorage(replace(config, job="run2"), restore=run1.held[-1].path, restore_mode="no_claim")
    _checkpoints(run2, 4, 5, state, rng, retained=3)
    chk5 = run2.held[-1].path
    run3 = FsCheckpointStorage(replace(config, job="run3"), restore=chk5, restore_mode="claim")
    _checkpoints(run3, 6, 7, state, rng, retained=3)  # builds on run2's shared files, then stops (no clean-up)
    run4 = FsCheckpointStorage(replace(config, job="run4"), restore=run3.held[-1].path, restore_mode="claim")
    before = {c.path: c for c in inspect(base).checkpoints}[chk5]
    _checkpoints(run4, 8, 12, state, rng, retained=1)  # every older state changes: run3/chk-7 is subsumed
    after = {c.path: c for c in inspect(base).checkpoints}[chk5]
    assert before.restorable and after.missing, "run4 should delete a file run2/chk-5 shares with run3/chk-7"
    return chk5, after.missing[0]


def test_a_claim_restore_breaks_the_checkpoints_that_share_the_claimed_files(tmp_path: Path) -> None:
    chk5, lost = claim_chain(tmp_path / "ck")
    assert "/run2/shared/" in lost
    ls = runner.invoke(app, ["storage", "ls", str(tmp_path / "ck")])
    assert ls.exit_code == 1, ls.stdout + ls.stderr
    assert "run2/chk-5 is NOT RESTORABLE" in ls.stdout
    assert "claim restore" in ls.stdout and "quarantine-checkpoint" in ls.stdout
