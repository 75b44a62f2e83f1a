"""The driver's loop while one job of a run is running (flink_bridge.runner.run): poll its state, arm the failure
once checkpoint N completed, note when it fired, stop with a savepoint, kill the TaskManager, and end the job at
the run's deadline.

At the deadline the job is cancelled (its checkpoints are retained: RETAIN_ON_CANCELLATION). A run that judges
its deadline (RunOptions.judge_deadline, ``cutcheck flink run``) samples the job as it goes
(flink_bridge.liveness.Timeline) and returns ``DEADLINE`` with the verdict in ``FlinkRun.liveness``: a job that
stalls is a finding about the job, not the user's mistake. Any other run (compare, conform, the hunt) raises a
CutcheckError there, as it always did, which the hunt counts as an inconclusive case.
"""

from __future__ import annotations

import os
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cutcheck.flink_bridge.checkpoints import stop_with_savepoint
from cutcheck.flink_bridge.liveness import Timeline
from cutcheck.flink_bridge.process_cluster import kill_mid_checkpoint
from cutcheck.flink_bridge.rest import TERMINAL, Rest
from cutcheck.model.errors import CutcheckError

if TYPE_CHECKING:
    from cutcheck.flink_bridge.runner import FlinkRun, RunOptions
    from cutcheck.flink_bridge.translate import ProbeSpec

POLL_S = 0.1
DEADLINE = "DEADLINE"  # what watch returns for a judged run cancelled at its deadline
CANCEL_WAIT_S = 60.0  # how long a cancelled job may take to end before the run goes on without it


def watch(rest: Rest, job_id: str, opts: RunOptions, probes: ProbeSpec, result: FlinkRun, deadline: float,
          say: Callable[[str], None], cluster: Any = None, timeline: Timeline | None = None) -> str:
    """Poll until the job ends; arm the failure once checkpoint N completed; note when it fired."""
    index = len(result.jobs) - 1
    while True:
        state = rest.state(job_id)
        if state in TERMINAL:
            note_fired(probes, result)
            return state
        if timeline is not None:
            timeline.poll(rest, index, job_id)
        if opts.fail_after is not None and result.armed_ms is None and (opts.savepoint is None or result.jobs[-1].index):
            # After a savepoint: the restored job's own completed checkpoints (their ids continue the savepoint's).
            latest = (rest.get(f"/jobs/{job_id}/checkpoints").get("counts") or {}).get("completed", 0) \
                if opts.savepoint is not None else rest.latest_completed(job_id)[0]
            if latest >= opts.fail_after:
                result.armed_ms = now_ms()  # before the probe file appears: the failure may fire at once
                Path(probes.armed).touch()  # type: ignore[arg-type]
                result.events.append((result.armed_ms, "arm", f"failure armed in {probes.fail_vertex} after checkpoint {latest}"))
                say(f"checkpoint {latest} completed: failure armed in {probes.fail_vertex}")
        note_fired(probes, result)
        if opts.savepoint is not None and result.savepoint is None and not result.jobs[-1].index:
            latest, _ = rest.latest_completed(job_id)
            if latest >= (opts.stop_after or 1):
                say(f"checkpoint {latest} completed: stopping with a {opts.savepoint} savepoint")
                result.savepoint = stop_with_savepoint(rest.base, job_id, os.path.join(result.work, "savepoints"),
                                                       opts.savepoint, max(deadline - time.monotonic(), 1.0))
                result.events.append((now_ms(), "savepoint", f"{opts.savepoint} savepoint " + (result.savepoint or "failed")))
        if opts.kill_after is not None and result.fired is None:
            result.fired = kill_mid_checkpoint(rest, job_id, opts.kill_after, cluster)
            if result.fired:
                result.fired_ms = now_ms()
                result.events.append((result.fired_ms, "failure", f"{result.fired}, SIGKILL; another one started"))
                say(f"{result.fired}: killed; another TaskManager started")
        if time.monotonic() > deadline:
            if timeline is None:
                rest_cancel(rest, job_id)
                raise CutcheckError(f"Flink job {job_id} did not end within {opts.timeout_s:.0f} s; it was cancelled.")
            timeline.poll(rest, index, job_id, force=True)  # the last sample: what the job had at the deadline
            rest_cancel(rest, job_id)
            result.liveness = timeline.judge(opts.timeout_s)
            verdict = "stalled" if result.liveness.stalled else "still progressing"
            result.events.append((now_ms(), "deadline", f"job {job_id} {verdict} at the {opts.timeout_s:.0f} s deadline; cancelled"))
            say(f"deadline of {opts.timeout_s:.0f} s reached: the job {verdict}; cancelling it")
            await_end(rest, job_id, CANCEL_WAIT_S)
            return DEADLINE
        time.sleep(POLL_S)


def await_end(rest: Rest, job_id: str, within_s: float) -> str:
    """Wait until the job is in a terminal state (at most ``within_s``); its last state seen."""
    until = time.monotonic() + within_s
    state = rest.state(job_id)
    while state not in TERMINAL and time.monotonic() < until:
        time.sleep(POLL_S)
        state = rest.state(job_id)
    return state


def note_fired(probes: ProbeSpec, result: FlinkRun) -> None:
    if result.fired is None and probes.fired and os.path.exists(probes.fired):
        text = Path(probes.fired).read_text().strip()
        if not text:
            return  # created, not written yet
        where, _, when = text.partition(" ")
        result.fired, result.fired_ms = where, int(float(when) * 1000)
        result.events.append((result.fired_ms, "failure", f"{where}: injected exception"))


def rest_cancel(rest: Rest, job_id: str) -> None:
    try:
        req = urllib.request.Request(f"{rest.base}/jobs/{job_id}?mode=cancel", method="PATCH")
        urllib.request.urlopen(req, timeout=10).close()
    except OSError:
        pass


def now_ms() -> int:
    return int(time.time() * 1000)
