"""What a runner saw when it ran a case, and the Flink side of it as plain JSON.

``observe_json(payload, version)`` runs one case and returns JSON only: on the Flink of this process
(version None), or on a prepared release through ``flink_bridge.launch.run_in_release`` (the
``--flink VERSION`` path; that release's worker runs the job, this process reads the result). The
retained checkpoints' ``_metadata`` is read in pure Python (reference.storage.flink_metadata), so no
JVM of this process is needed for it.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from cutcheck.model.errors import CutcheckError


@dataclass(slots=True)
class Observation:
    """One run of a case. ``inconclusive`` says why the run tells nothing (then nothing else counts)."""

    exactly_once: dict[str, Any] = field(default_factory=dict)
    restore_failed: str | None = None  # the exception that failed the job after the injected failure
    completed: int = 0
    unaligned_checkpoints: int | None = None  # None: the runner does not report it
    persisted_bytes: int | None = None
    missing_files: list[str] = field(default_factory=list)  # "chk-N: path" a retained checkpoint names
    violations: list[dict[str, str]] = field(default_factory=list)  # the engine's own invariants (engine runner)
    inconclusive: str | None = None
    seconds: dict[str, float] = field(default_factory=dict)  # the run's parts: cluster, jobs, files (Flink)
    version: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__slots__}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Observation:
        return cls(**{k: v for k, v in data.items() if k in cls.__slots__})


def _missing_files(checkpoint_dir: str, only_job: str | None = None) -> list[str]:
    """Every file a retained checkpoint's ``_metadata`` names that is not there (of ``only_job``'s checkpoints,
    when given)."""
    from cutcheck.flink_bridge.checkpoints import METADATA
    from cutcheck.reference.storage.flink_metadata import referenced_files

    missing: list[str] = []
    for job in sorted(os.listdir(checkpoint_dir)) if os.path.isdir(checkpoint_dir) else []:
        if only_job is not None and job != only_job:
            continue
        base = os.path.join(checkpoint_dir, job)
        for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
            chk = os.path.join(base, name)
            if not (name.startswith("chk-") and os.path.exists(os.path.join(chk, METADATA))):
                continue
            refs = referenced_files(chk)
            for paths in refs.files.values():
                missing += [f"{job}/{name}: {p}" for p in paths if not os.path.exists(p)]
    return missing


def failed_restore(error: str) -> bool:
    """Whether a run's error says the job did not come back after the injected failure: it failed restoring
    (a job ended FAILED), or the job resubmitted from the retained checkpoint at the new parallelism was
    refused. Anything else (the failure never fired, a timeout, the first submission refused) makes the
    run inconclusive."""
    resubmitted = re.search(r"did not accept job '.* #([0-9]+)'", error)
    return " ended FAILED" in error or " ended CANCELED" in error or bool(resubmitted and int(resubmitted.group(1)) > 0)


def release_runner(version: str) -> Any:
    """``run(graph, work, options, progress)`` on a prepared release, or EnvironmentProblem saying why not."""
    from cutcheck.model.errors import EnvironmentProblem

    try:
        from cutcheck.flink_bridge import launch, releases  # type: ignore[attr-defined]
    except ImportError:
        raise EnvironmentProblem(f"--flink {version}: this cutcheck runs Flink only in its own environment; "
                                 "use the release the flink extra installs, or a cutcheck with `flink env`.") from None
    releases.require_prepared(version)
    return lambda graph, work, opts, progress: launch.run_in_release(version, graph, opts, work, progress)


def observe_json(payload: dict[str, Any], version: str | None = None) -> dict[str, Any]:
    """Run ``payload`` ({"graph", "options": RunOptions fields}) on this process's Flink, or on prepared release
    ``version``; an Observation as JSON."""
    from dataclasses import fields

    from cutcheck.flink_bridge import runlog, runner
    from cutcheck.flink_bridge.runner import RunOptions

    known = {f.name for f in fields(RunOptions)}
    opts = RunOptions(**{k: v for k, v in payload["options"].items() if k in known})
    obs = Observation(version=version)
    if version is None:
        run_case = lambda graph, work, o, progress: runner.run(graph, work, o, progress)  # noqa: E731
        from pyflink.version import __version__ as installed
        obs.version = str(installed)
    else:
        run_case = release_runner(version)
    t0 = time.monotonic()
    started: list[float] = []  # when the first job was submitted: before it, the lock and the MiniCluster start

    def note(message: str) -> None:
        if message.startswith("job 0 ") and not started:
            started.append(time.monotonic())

    def split(end: float) -> None:
        first = started[0] if started else end
        obs.seconds["cluster"] = first - t0  # waiting for the machine lock, starting the MiniCluster, submitting
        obs.seconds["jobs"] = end - first  # the jobs themselves: run, failure, restore, finish

    with tempfile.TemporaryDirectory(prefix="cutcheck-hunt-") as work:
        try:
            run = run_case(payload["graph"], os.path.join(work, "flink"), opts, note)
        except CutcheckError as exc:
            text = str(exc)
            split(time.monotonic())
            if failed_restore(text):
                obs.restore_failed = text
            else:
                obs.inconclusive = text
            return obs.to_json()
        split(time.monotonic())
        t1 = time.monotonic()
        s = runlog.summary(run)
        obs.exactly_once = s["exactly_once"]
        obs.completed = s["checkpoints_completed"]
        obs.unaligned_checkpoints = s["unaligned_checkpoints"]
        obs.persisted_bytes = s["persisted_bytes"]
        if not s["complete"]:
            obs.inconclusive = "the last job did not finish, so its output is a prefix"
        try:
            # A restore in claim mode hands the restored snapshot to the new job, which deletes it once
            # subsumed; the first job's other retained checkpoints that share its files are forfeit (the
            # model's ownership rule), so only the last job's checkpoints must still find every file.
            claimed = opts.claim_mode == "claim" and len(run.jobs) > 1
            obs.missing_files = _missing_files(run.checkpoint_dir, run.jobs[-1].job_id if claimed else None)
        except CutcheckError as exc:  # a _metadata Flink itself cannot read names no file we can check
            obs.missing_files = [f"unreadable: {exc}"]
        obs.seconds["files"] = time.monotonic() - t1
    return obs.to_json()
