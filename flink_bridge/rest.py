"""Flink's REST API, the little of it cutcheck reads: job state, checkpoint statistics, exceptions.

The statistics are read from the JobManager of our own MiniCluster, which keeps a finished job's
statistics, so they are collected once per job after it ends (``collect``) rather than sampled
while it runs; only the driver's decisions (arm the failure, notice the end) poll while it runs.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from cutcheck.model.errors import EnvironmentProblem

TERMINAL = ("FINISHED", "FAILED", "CANCELED", "SUSPENDED")


@dataclass(slots=True)
class FlinkCheckpoint:
    """One checkpoint as Flink's statistics describe it (times in epoch milliseconds)."""

    job: str
    id: int
    status: str  # COMPLETED | FAILED | IN_PROGRESS
    checkpoint_type: str  # CHECKPOINT | UNALIGNED_CHECKPOINT | SAVEPOINT ...
    is_savepoint: bool
    trigger_ms: int
    ack_ms: int | None
    duration_ms: int
    state_bytes: int
    checkpointed_bytes: int
    persisted_bytes: int  # in-flight data written as channel state
    processed_bytes: int
    alignment_ms: int | None = None  # the slowest subtask's alignment (from the per-task details)
    unaligned_subtasks: int | None = None
    subtasks: int = 0
    external_path: str | None = None
    failure: str | None = None

    @property
    def inflight_bytes(self) -> int:
        """In-flight data the checkpoint met: processed during alignment, or persisted (Flink's UI adds them too)."""
        return self.processed_bytes + self.persisted_bytes

    @property
    def unaligned(self) -> bool:
        return self.checkpoint_type.startswith("UNALIGNED")


@dataclass(slots=True)
class JobStats:
    job: str
    state: str
    start_ms: int
    end_ms: int | None
    checkpoints: list[FlinkCheckpoint] = field(default_factory=list)
    exceptions: list[dict[str, Any]] = field(default_factory=list)  # {timestamp, exceptionName, taskName, ...}
    restored: dict[str, Any] | None = None
    vertices: dict[str, str] = field(default_factory=dict)  # vertex id -> name


class Rest:
    def __init__(self, base_url: str, timeout_s: float = 10.0):
        self.base = base_url.rstrip("/")
        self.timeout = timeout_s

    def get(self, path: str) -> Any:
        try:
            with urllib.request.urlopen(self.base + path, timeout=self.timeout) as resp:
                return json.loads(resp.read())
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise EnvironmentProblem(f"Flink's REST API at {self.base}{path} did not answer ({exc}); is the MiniCluster up?") from None

    def state(self, job: str) -> str:
        return str(self.get(f"/jobs/{job}")["state"])

    def latest_completed(self, job: str) -> tuple[int, str | None]:
        """(id, external path) of the newest completed checkpoint, (0, None) before the first."""
        latest = (self.get(f"/jobs/{job}/checkpoints").get("latest") or {}).get("completed")
        if not latest:
            return 0, None
        return int(latest["id"]), latest.get("external_path")

    def collect(self, job: str) -> JobStats:
        info = self.get(f"/jobs/{job}")
        stats = JobStats(job, str(info["state"]), int(info.get("start-time", 0)),
                         int(info["end-time"]) if int(info.get("end-time", -1)) > 0 else None)
        stats.vertices = {v["id"]: v["name"] for v in info.get("vertices", [])}
        ck = self.get(f"/jobs/{job}/checkpoints")
        stats.restored = (ck.get("latest") or {}).get("restored")
        for h in sorted(ck.get("history", []), key=lambda h: h["id"]):
            cp = FlinkCheckpoint(
                job, int(h["id"]), str(h["status"]), str(h.get("checkpoint_type", "CHECKPOINT")), bool(h.get("is_savepoint")),
                int(h["trigger_timestamp"]), int(h["latest_ack_timestamp"]) if h.get("latest_ack_timestamp", -1) > 0 else None,
                int(h.get("end_to_end_duration", 0)), int(h.get("state_size", 0)), int(h.get("checkpointed_size", 0)),
                int(h.get("persisted_data", 0)), int(h.get("processed_data", 0)), subtasks=int(h.get("num_subtasks", 0)),
                external_path=h.get("external_path"), failure=h.get("failure_message"))
            if cp.status == "COMPLETED":
                self._alignment(cp)
            stats.checkpoints.append(cp)
        exc = self.get(f"/jobs/{job}/exceptions")
        stats.exceptions = sorted(exc.get("exceptionHistory", {}).get("entries", []), key=lambda e: e.get("timestamp", 0))
        return stats

    def _alignment(self, cp: FlinkCheckpoint) -> None:
        """The slowest subtask's alignment and how many subtasks took the checkpoint unaligned."""
        detail = self.get(f"/jobs/{cp.job}/checkpoints/details/{cp.id}")
        longest, unaligned = 0, 0
        for vertex in detail.get("tasks", {}):
            sub = self.get(f"/jobs/{cp.job}/checkpoints/details/{cp.id}/subtasks/{vertex}")
            for s in sub.get("subtasks", []):
                longest = max(longest, int((s.get("alignment") or {}).get("duration", 0) or 0))
                unaligned += 1 if s.get("unaligned_checkpoint") else 0
        cp.alignment_ms, cp.unaligned_subtasks = longest, unaligned
