"""One hunt case: a job graph and what happens to it (checkpointing, the failure, the rescaled restore).

A case is the unit the hunt draws, predicts, runs, compares, shrinks and replays; its JSON is what a
finding carries, so ``cutcheck flink hunt --replay CASE.json`` and the standalone script start from it.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cutcheck.flink_bridge.runner import CLAIM_MODES, MODES, SAVEPOINT_FORMATS, RunOptions
from cutcheck.model.errors import CutcheckError, InvalidArgument
from cutcheck.model.graph import JobGraph

CASE_VERSION = 1
# A case's jobs take 20-60 s here; one that stalls (seen on 2.3.0: a checkpoint stuck at 6 of 21 acks)
# is inconclusive after this, not after the runner's 15 minutes, so that it costs a hunt little.
CASE_TIMEOUT_S = 300.0


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
    # The restore's dimensions. With ``savepoint`` the first job is stopped with a savepoint of that format
    # once checkpoint ``fail_after`` completed, and resubmitted from it (rescaled) in ``claim_mode``; with
    # ``fail_restored`` as well, the restored job then fails once it completed that many checkpoints of its
    # own (so a later checkpoint has subsumed the claimed snapshot) and restarts in place.
    savepoint: str | None = None
    claim_mode: str = "no_claim"
    fail_restored: int | None = None
    incremental: bool = False  # RocksDB incremental checkpoints (files shared between checkpoints)
    chaining: bool = True  # False: every exchange of the graph is a network exchange in Flink too
    max_parallelism_after: dict[str, int] = field(default_factory=dict)  # set on the resubmission (rescaled restore)

    @property
    def name(self) -> str:
        return str(self.graph.get("name", "case"))

    def job_graph(self) -> JobGraph:
        return JobGraph.from_json(self.graph)

    def builds(self) -> bool:
        """The graph loads and, rescaled, still is a valid graph (what shrinking and the runners require)."""
        try:
            graph = self.job_graph()
            if self.rescale:
                graph.with_parallelism(self.rescale)
        except CutcheckError:
            return False
        return True

    def options(self) -> RunOptions:
        """The flink_bridge run options (and the engine's, through compare.engine_scenario)."""
        return dataclasses.replace(self._options(), timeout_s=CASE_TIMEOUT_S)

    def _options(self) -> RunOptions:
        if self.savepoint is not None:
            return RunOptions(mode=self.mode, interval_ms=self.interval_ms, savepoint=self.savepoint,
                              stop_after=self.fail_after, fail_after=self.fail_restored, rescale=dict(self.rescale),
                              restore_max_parallelism=dict(self.max_parallelism_after),
                              restart=True, claim_mode=self.claim_mode, incremental=self.incremental,
                              chaining=self.chaining)
        return RunOptions(mode=self.mode, interval_ms=self.interval_ms, fail_after=self.fail_after,
                          rescale=dict(self.rescale), restore_max_parallelism=dict(self.max_parallelism_after),
                          restart=True, incremental=self.incremental, chaining=self.chaining)

    def dimensions(self) -> list[str]:
        """The restore's and the job's drawn dimensions beyond mode and rescale, as the summary names them."""
        out = []
        if self.savepoint is not None:
            out.append(f"{self.savepoint} savepoint after {self.fail_after}, {self.claim_mode}"
                       + (f", fail after {self.fail_restored} more" if self.fail_restored else ""))
        if self.max_parallelism_after:
            out.append("max parallelism on the restore " + " ".join(f"{v}={m}" for v, m in sorted(self.max_parallelism_after.items())))
        if self.incremental:
            out.append("rocksdb incremental")
        if not self.chaining:
            out.append("chaining off")
        return out

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
        end = "" if self.savepoint else f", fail after {self.fail_after}"
        return (f"{vertices}; {parts}; {self.mode}{end}" + (f", rescale {rescale}" if rescale else "")
                + "".join(f", {d}" for d in self.dimensions()))

    def to_json(self) -> dict[str, Any]:
        return {"cutcheck_hunt_case": CASE_VERSION, "graph": self.graph, "mode": self.mode,
                "fail_after_checkpoint": self.fail_after, "rescale": dict(sorted(self.rescale.items())),
                "interval_ms": self.interval_ms, "seed": self.seed, "risk": round(self.risk, 3),
                "risk_features": self.risk_features, "savepoint": self.savepoint, "claim_mode": self.claim_mode,
                "fail_restored": self.fail_restored, "incremental": self.incremental, "chaining": self.chaining,
                "max_parallelism_after": dict(sorted(self.max_parallelism_after.items()))}

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
        savepoint, claim = data.get("savepoint"), data.get("claim_mode", "no_claim")
        if savepoint is not None and savepoint not in SAVEPOINT_FORMATS:
            raise InvalidArgument(f"{where}: savepoint {savepoint!r} is not one of {', '.join(SAVEPOINT_FORMATS)} (or null).")
        if claim not in CLAIM_MODES:
            raise InvalidArgument(f"{where}: claim_mode {claim!r} is not one of {', '.join(CLAIM_MODES)}.")
        fail_restored = data.get("fail_restored")
        if fail_restored is not None and (savepoint is None or not isinstance(fail_restored, int) or fail_restored < 1):
            raise InvalidArgument(f"{where}: fail_restored must be an integer of at least 1, and only with a savepoint.")
        flags = {k: data.get(k, d) for k, d in (("incremental", False), ("chaining", True))}
        if not all(isinstance(v, bool) for v in flags.values()):
            raise InvalidArgument(f"{where}: incremental and chaining must be true or false.")
        maxp = data.get("max_parallelism_after") or {}
        if not isinstance(maxp, dict) or not all(isinstance(m, int) and m >= 1 for m in maxp.values()):
            raise InvalidArgument(f"{where}: max_parallelism_after must map vertex ids to max parallelisms of at least 1.")
        case = cls(data["graph"], mode, fail_after, {str(k): int(v) for k, v in rescale.items()},
                   int(data.get("interval_ms", 200)), int(data.get("seed", 0)), float(data.get("risk", 0.0)),
                   dict(data.get("risk_features") or {}), savepoint, claim, fail_restored,
                   flags["incremental"], flags["chaining"], {str(k): int(v) for k, v in maxp.items()})
        try:
            graph = case.job_graph()
        except CutcheckError as exc:
            raise InvalidArgument(f"{where}: its graph is not valid: {exc}") from None
        unknown = sorted((set(case.rescale) | set(case.max_parallelism_after)) - {v.id for v in graph.vertices})
        if unknown:
            raise InvalidArgument(f"{where}: rescale or max_parallelism_after names no such vertex: {', '.join(unknown)}.")
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
