"""A scenario's ``resubmit`` section: the job runs, then is resubmitted from its own checkpoint.

When the first job ends clean, a second job of the same scenario (without the section) restores
the first job's latest retained checkpoint, or its latest completed savepoint, in the section's
mode, from the same checkpoint base. As Flink gives a resubmitted job a new JobID, the second job's
directory is named by ``storage.restore_target.default_job`` (a claimed checkpoint continues in its
job's directory, which holds the older checkpoints claim takes over). The returned result is the
second job's, judged as any restored run (``run_storage.start_from`` credits the output the first
job committed up to the restored checkpoint), with the first job's summary under ``resubmit``.
A resubmit that cannot happen (the first job broke an invariant, or left nothing to restore) is
reported as ``skipped`` with its reason, and the result is the first job's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cutcheck.model.kinds import RestoreMode
from cutcheck.reference.logs import RunLogWriter
from cutcheck.reference.run_storage import open_storage, resubmit_target
from cutcheck.reference.storage.config import Resubmit, ResubmitFrom
from cutcheck.reference.storage.meta import referenced_files
from cutcheck.reference.storage.restore_target import default_job

if TYPE_CHECKING:
    from cutcheck.reference.scenario import Scenario
    from cutcheck.reference.simulate import RunResult
    from cutcheck.reference.storage.fs import FsCheckpointStorage

SECTION = "resubmit"  # the key of RunResult.sections (and of run.json's summary) that reports it


@dataclass(slots=True)
class ResubmitPlan:
    """Decides, once the first job ended, whether and from where the second job restores."""

    resubmit: Resubmit
    storage: FsCheckpointStorage
    target: str | None = None

    def report(self) -> dict[str, Any]:
        return {"from": self.resubmit.source.value, "mode": self.resubmit.mode.value}

    def decide(self, first: RunResult) -> bool:
        """Called before the first job's logs are written: True keeps them (no second job follows)."""
        reason: str | None
        if not first.ok:
            reason = "the first job did not end clean"
        else:
            savepoints = [c["id"] for c in first.checkpoints if c["kind"] == "savepoint" and c["status"] == "completed"]
            self.target = resubmit_target(self.storage, self.resubmit.source, savepoints)
            what = "retained checkpoint" if self.resubmit.source is ResubmitFrom.CHECKPOINT else "completed savepoint"
            reason = None if self.target is not None else f"the first job has no {what}"
        if reason is not None:
            first.sections[SECTION] = {**self.report(), "jobs": 1, "skipped": reason}
        return self.target is None

    def second_job(self, scenario: Scenario, first: RunResult, run: Any, *, checkpoint_dir: str | Path | None,
                   out_dir: str | Path | None, force: bool) -> RunResult:
        """Run the resubmitted job; its result carries the first job's summary."""
        assert self.target is not None
        extra = {k: v for k, v in scenario.extra.items() if k != SECTION}
        # The resubmitted job's id comes from what it restores (default_job), never the first job's.
        extra["storage"] = {k: v for k, v in (extra.get("storage") or {}).items() if k != "job"}
        if self.resubmit.source is ResubmitFrom.SAVEPOINT:
            # A savepoint is self-contained, outside any job directory: even claimed, the new job
            # starts a directory of its own (the first job's holds checkpoints newer than it).
            extra["storage"]["job"] = default_job(referenced_files(self.target), RestoreMode.NO_CLAIM)
        second = dataclasses.replace(scenario, extra=extra)
        storage, restored = open_storage(second, checkpoint_dir=checkpoint_dir, restore=self.target,
                                         restore_mode=self.resubmit.mode.value)
        sections = {SECTION: {**self.report(), "jobs": 2, "restored": self.target, "first_job": first.summary()}}
        logs = RunLogWriter(out_dir, force=force) if out_dir is not None else None
        try:
            result: RunResult = run(second, logs, storage, restored, sections=sections, as_written=scenario)
        except BaseException:
            if logs is not None:
                logs.discard()
            raise
        result.scenario = scenario  # the scenario as written (the second job is its resubmit)
        return result
