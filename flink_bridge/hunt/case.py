"""One hunt case: a job graph and what happens to it (checkpointing, the failure, the rescaled restore).

A case is the unit the hunt draws, predicts, runs, compares, shrinks and replays; its JSON is what a
finding carries, so ``cutcheck flink hunt --replay CASE.json`` and the standalone script start from it.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cutcheck.flink_bridge.runner import MODES, RunOptions
from cutcheck.model.errors import CutcheckError, InvalidArgument
from cutcheck.model.graph import JobGraph

CASE_VERSION = 1


@dataclass(slots=True)
class HuntCase:
    """A graph (JSON, sources' ``records`` already set) and the run's options."""

    graph: dict[str, Any]
    mode: str = "unaligned"
    fail_after: int = 1
    rescale: dict[str, int] = field(default_factory=dict)
    interval_ms: int = 200
    seed: int = 0  # the campaign draw that made it (provenance; the case itself is complete)
    risk: float = 0.0
    risk_features: dict[str, float] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return str(self.graph.get("name", "case"))

    def job_graph(self) -> JobGraph:
        return JobGraph.from_json(self.graph)

    def options(self) -> RunOptions:
        """The flink_bridge run options (and the engine's, through compare.engine_scenario)."""
        return RunOptions(mode=self.mode, interval_ms=self.interval_ms, fail_after=self.fail_after,
                          rescale=dict(self.rescale), restart=True)

    def size(self) -> tuple[int, int, int]:
        """(vertices, records, summed parallelism): what shrinking makes smaller, in that order."""
        vs = self.graph["vertices"]
        return (len(vs), sum(int(v.get("records", 0)) for v in vs if v["kind"] == "source"),
                sum(int(v["parallelism"]) for v in vs) + sum(self.rescale.values()))

    def summary(self) -> str:
        """``src0(2) count(2) sink(1); hash, forward; unaligned, fail after 1, rescale count=3``."""
        vertices = " ".join(f"{v['id']}({v['parallelism']})" for v in self.graph["vertices"])
        parts = ", ".join(e["partitioner"] for e in self.graph["edges"])
        rescale = " ".join(f"{v}={p}" for v, p in sorted(self.rescale.items()))
        return f"{vertices}; {parts}; {self.mode}, fail after {self.fail_after}" + (f", rescale {rescale}" if rescale else "")

    def to_json(self) -> dict[str, Any]:
        return {"cutcheck_hunt_case": CASE_VERSION, "graph": self.graph, "mode": self.mode,
                "fail_after_checkpoint": self.fail_after, "rescale": dict(sorted(self.rescale.items())),
                "interval_ms": self.interval_ms, "seed": self.seed, "risk": round(self.risk, 3),
                "risk_features": self.risk_features}

    @classmethod
    def from_json(cls, data: Any, where: str = "case") -> HuntCase:
        if not isinstance(data, dict) or data.get("cutcheck_hunt_case") != CASE_VERSION or "graph" not in data:
            raise InvalidArgument(f"{where}: not a hunt case (a JSON object with \"cutcheck_hunt_case\": {CASE_VERSION} "
                                  "and a graph, as a finding's case file holds); pass a file `flink hunt --json` wrote.")
        mode = data.get("mode", "unaligned")
        if mode not in MODES:
            raise InvalidArgument(f"{where}: mode {mode!r} is not one of {', '.join(MODES)}.")
        rescale = data.get("rescale") or {}
        if not isinstance(rescale, dict) or not all(isinstance(p, int) and p >= 1 for p in rescale.values()):
            raise InvalidArgument(f"{where}: rescale must map vertex ids to parallelisms of at least 1.")
        fail_after = data.get("fail_after_checkpoint", 1)
        if not isinstance(fail_after, int) or fail_after < 1:
            raise InvalidArgument(f"{where}: fail_after_checkpoint must be an integer of at least 1.")
        case = cls(data["graph"], mode, fail_after, {str(k): int(v) for k, v in rescale.items()},
                   int(data.get("interval_ms", 200)), int(data.get("seed", 0)), float(data.get("risk", 0.0)),
                   dict(data.get("risk_features") or {}))
        try:
            graph = case.job_graph()
        except CutcheckError as exc:
            raise InvalidArgument(f"{where}: its graph is not valid: {exc}") from None
        unknown = sorted(set(case.rescale) - {v.id for v in graph.vertices})
        if unknown:
            raise InvalidArgument(f"{where}: rescale names no such vertex: {', '.join(unknown)}.")
        return case

    @classmethod
    def load(cls, path: str | Path) -> HuntCase:
        """A case file, or the case itself as inline JSON (a replay command printed without --json)."""
        if isinstance(path, str) and path.lstrip().startswith("{"):
            try:
                return cls.from_json(json.loads(path), "--replay")
            except ValueError as exc:
                raise InvalidArgument(f"--replay: the inline case is not JSON ({exc}).") from None
        try:
            data = json.loads(Path(path).read_text())
        except OSError as exc:
            raise InvalidArgument(f"{path}: cannot read the case file ({exc.strerror}).") from None
        except ValueError as exc:
            raise InvalidArgument(f"{path}: not JSON ({exc}).") from None
        return cls.from_json(data, str(path))


def replay_command(version: str | None, case: str | Path | HuntCase, reruns: int) -> str:
    """The one line that runs a case again on the same Flink and compares it with the model: by its case
    file, or with the case inline when there is no file."""
    args = ["cutcheck", "flink", "hunt"]
    if version:
        args += ["--flink", version]
    where = json.dumps(case.to_json(), separators=(",", ":")) if isinstance(case, HuntCase) else str(case)
    return shlex.join([*args, "--replay", where, "--reruns", str(reruns)])
