"""A Flink job that reached its deadline: did it stall, or was it still progressing? The evidence and the rule.

While a judged run's job runs (RunOptions.judge_deadline, set by ``cutcheck flink run``), the driver samples once a
second (Timeline.poll): per sink, the records that reached the sink's task in the current attempt (REST
``read-records`` of the Flink vertex that holds the sink's ``<id>/format`` map; a restart or a resubmission counts
from 0 again), the rows committed in the sink's part files, and the checkpoints completed and failed and the
restarts so far.

The rule (``judge``). Progress is any of

* a checkpoint completed: it commits output, and a restart restores from it;
* rows newly committed at a sink;
* a sink's task receiving more records, counted from the last completed checkpoint, than any attempt had
  received since that checkpoint. Records re-read after a restart repeat what an earlier attempt already
  delivered (the restart restores that checkpoint, and our sources are deterministic), so a job that fails over
  and stops again at the same place is not progressing.

The run **stalled** when nothing was progress for the last ``W = max(30 s, deadline / 3)`` of it; otherwise it
was still progressing, or it was too short to tell (its deadline was under W). Why W: cutcheck's sources emit
without pause until they end, and a job that is moving completes a checkpoint or delivers a record every few
seconds (the interval is 200 ms by default), so a quiet spell of 30 s is no pause of a healthy job: not a
restart with its 200 ms delay, a slow checkpoint, or the metrics' 1 s refresh. A third of the deadline scales
the bar with the patience the user gave: a run of 15 minutes is not called stalled on a 30 s lull. The stall
must also be the *end* of the run, so a job that stops and starts again before the deadline is progressing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

MIN_WINDOW_S = 30.0
SAMPLE_EVERY_S = 1.0


def window_s(deadline_s: float) -> float:
    """How long a run must have made no progress at its deadline to have stalled."""
    return max(MIN_WINDOW_S, deadline_s / 3)


@dataclass(frozen=True, slots=True)
class Sample:
    """What the driver saw at one moment (``at_s``: seconds since the cluster was up, where the deadline counts from)."""

    at_s: float
    job: int  # which submission (0, then 1 after a resubmission)
    restarts: int  # restarts of the whole run so far
    state: str
    received: dict[str, int]  # per sink: records its task received in the current attempt
    committed: dict[str, int]  # per sink: rows in committed part files
    completed: int  # checkpoints completed, whole run
    failed: int  # checkpoints failed, whole run

    def attempt(self) -> tuple[int, int]:
        return self.job, self.restarts


@dataclass(slots=True)
class Liveness:
    """The verdict on a run that reached its deadline, with what it rests on."""

    stalled: bool
    deadline_s: float
    window_s: float
    seconds: float  # from the cluster's start to the deadline
    quiet_s: float  # since the last progress (or since the first sample, when there was none)
    last_progress_s: float | None
    state: str  # the job's state at the deadline
    received: dict[str, int]
    committed: dict[str, int]
    grew_s: dict[str, float | None]  # per sink: when its output last counted as progress
    completed: int
    failed: int
    restarts: int
    timeline: list[Sample] = field(default_factory=list)  # the samples at which a figure changed, and the last

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Liveness:
        return cls(**{**data, "timeline": [Sample(**s) for s in data.get("timeline", [])]})

    def evidence(self) -> str:
        """One clause: per sink, what reached it and when it last grew; checkpoints; restarts."""
        sinks = "; ".join(f"sink {s}: {self.received.get(s, 0)} records received, {self.committed.get(s, 0)} committed, "
                          + (f"last grew at {t:.0f} s" if t is not None else "never grew")
                          for s, t in sorted(self.grew_s.items()))
        return (f"{sinks}; checkpoints {self.completed} completed, {self.failed} failed; "
                f"{self.restarts} restart{'' if self.restarts == 1 else 's'}")

    def sentence(self, flink: str) -> str:
        since = f"since {self.last_progress_s:.0f} s" if self.last_progress_s is not None else "since it was submitted"
        if self.stalled:
            return (f"the job stalled: no records reached its sinks beyond what they had, no rows were committed and no "
                    f"checkpoint completed for the last {self.quiet_s:.0f} s of its {self.deadline_s:.0f} s ({since}; "
                    f"state {self.state}; {self.evidence()}); a LIVENESS finding about this job on Flink {flink}.")
        if self.last_progress_s is None:  # no progress at all, yet for less than the window
            return (f"the job did not finish within {self.deadline_s:.0f} s and ran too briefly to judge (a stall needs "
                    f"{self.window_s:.0f} s without progress; {self.evidence()}); raise --deadline-s.")
        return (f"the job did not finish within {self.deadline_s:.0f} s while still making progress (last at "
                f"{self.last_progress_s or 0:.0f} s; {self.evidence()}); raise --deadline-s.")


def judge(samples: list[Sample], deadline_s: float) -> Liveness:
    """Apply the module's rule to a run's samples (in time order; the last one taken at the deadline)."""
    if not samples:
        raise ValueError("judge needs at least the sample taken at the deadline")
    base: dict[str, int] = {}  # per sink: its count when the last checkpoint completed (0 in a later attempt)
    mark: dict[str, int] = {}  # per sink: the most it received since that checkpoint, counted from it
    grew: dict[str, float | None] = {s: None for s in samples[-1].received | samples[-1].committed}
    last: float | None = None
    kept: list[Sample] = []
    prev: Sample | None = None
    for s in samples:
        progress = False
        new_attempt = prev is not None and (s.attempt() != prev.attempt()
                                            or any(n < prev.received.get(k, 0) for k, n in s.received.items()))
        if new_attempt:
            base = {}  # the restarted attempt counts from the checkpoint it restored: its own 0
        if prev is not None and s.completed > prev.completed:
            progress = True
            base, mark = dict(s.received), {}
        for sink, n in s.received.items():
            if n - base.get(sink, 0) > mark.get(sink, 0):
                mark[sink] = n - base.get(sink, 0)
                progress, grew[sink] = True, s.at_s
        for sink, n in s.committed.items():
            if prev is not None and n > prev.committed.get(sink, 0):
                progress, grew[sink] = True, s.at_s
        if progress:
            last = s.at_s
        if prev is None or _differs(s, prev) or s is samples[-1]:
            kept.append(s)
        prev = s
    end = samples[-1]
    quiet = end.at_s - (last if last is not None else samples[0].at_s)
    window = window_s(deadline_s)
    return Liveness(stalled=quiet >= window, deadline_s=deadline_s, window_s=window, seconds=end.at_s, quiet_s=quiet,
                    last_progress_s=last, state=end.state, received=dict(end.received), committed=dict(end.committed),
                    grew_s=grew, completed=end.completed, failed=end.failed, restarts=end.restarts, timeline=kept)


def _differs(a: Sample, b: Sample) -> bool:
    return (a.attempt(), a.state, a.received, a.committed, a.completed, a.failed) != \
        (b.attempt(), b.state, b.received, b.committed, b.completed, b.failed)


def sink_counts(vertices: list[dict[str, Any]], sinks: list[str]) -> dict[str, int | None]:
    """Records received per sink, from ``/jobs/<id>``'s vertices: the one whose operator chain holds ``<sink>/format``.
    None where Flink says the count is incomplete (a subtask's metrics not fetched yet, as after a restart)."""
    out: dict[str, int | None] = {s: 0 for s in sinks}
    for v in vertices:
        chain = [part.strip() for part in str(v.get("name", "")).split("->")]
        metrics = v.get("metrics") or {}
        for s in sinks:
            if f"{s}/format" not in chain:
                continue
            seen = out[s]
            if metrics.get("read-records-complete") is False or seen is None:
                out[s] = None
            else:
                out[s] = seen + int(metrics.get("read-records", 0) or 0)
    return out


class Timeline:
    """Samples a judged run's jobs once a second (``poll``); ``judge`` at the deadline."""

    def __init__(self, sinks: dict[str, str], started: float, clock: Callable[[], float]) -> None:
        self.sinks = sinks  # sink id -> its part-file directory
        self.started = started  # the clock's reading when the run's deadline started counting
        self.clock = clock
        self.samples: list[Sample] = []
        self._before = (0, 0, 0)  # checkpoints completed, failed and restarts of the jobs before the current one
        self._current = (0, 0, 0, 0)  # the current job's index and its own counts at its last sample
        self._rows: dict[str, int] = {}  # committed part file -> rows (a committed file never changes)
        self._polled = float("-inf")

    def poll(self, rest: Any, job: int, job_id: str, force: bool = False) -> None:
        now = self.clock()
        if not force and now - self._polled < SAMPLE_EVERY_S:
            return
        self._polled = now
        info = rest.get(f"/jobs/{job_id}")
        counts = (rest.get(f"/jobs/{job_id}/checkpoints") or {}).get("counts") or {}
        own = (job, int(counts.get("completed", 0)), int(counts.get("failed", 0)), _restarts(rest, job_id))
        if job != self._current[0]:  # a resubmission: the new job counts from 0, the run goes on
            self._before = tuple(b + c for b, c in zip(self._before, self._current[1:], strict=True))  # type: ignore[assignment]
        self._current = own
        done, failed, restarts = (b + c for b, c in zip(self._before, own[1:], strict=True))
        received = sink_counts(info.get("vertices", []), sorted(self.sinks))
        prev = self.samples[-1] if self.samples and self.samples[-1].attempt() == (job, restarts) else None
        # An incomplete count is not a drop to 0 (which would read as a restart): the attempt's last count stands.
        counts = {s: n if n is not None else (prev.received.get(s, 0) if prev else 0) for s, n in received.items()}
        self.samples.append(Sample(round(now - self.started, 3), job, restarts, str(info.get("state", "?")), counts,
                                   {s: self._committed(d) for s, d in sorted(self.sinks.items())}, done, failed))

    def _committed(self, directory: str) -> int:
        # runlog imports the runner, which imports this module: so runlog only once a run is going
        from cutcheck.flink_bridge.runlog import committed_files

        total = 0
        for path in committed_files(directory):
            if path not in self._rows:
                with open(path) as fh:
                    self._rows[path] = sum(1 for line in fh if line.strip())
            total += self._rows[path]
        return total

    def judge(self, deadline_s: float) -> Liveness:
        return judge(self.samples, deadline_s)


def _restarts(rest: Any, job_id: str) -> int:
    """The job's restarts: its ``numRestarts`` metric (fresh once a second in a judged run)."""
    found = rest.get(f"/jobs/{job_id}/metrics?get=numRestarts") or []
    for metric in found if isinstance(found, list) else []:
        if metric.get("id") == "numRestarts":
            try:
                return int(float(metric.get("value", 0)))
            except (TypeError, ValueError):
                return 0
    return 0

