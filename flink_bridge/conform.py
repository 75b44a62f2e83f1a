"""``cutcheck flink conform``: generated job graphs, each on the engine and on real Flink; do they agree?

Graphs come from the scenario generator (reference.fuzzing.generate.graph_dict), seed by seed from
``--seed``, kept when they are within what Flink runs (flink_bridge.translate.check_supported, and
flink_bridge.runner.prepare for the options drawn): co_map and broadcast_state vertices are
translated (a co_map with three inputs is skipped), a custom partitioner runs under any checkpoint
mode (the job sets unaligned.forced). Each kept graph gets a drawn checkpoint mode, one failure
after checkpoint 1 or 2, and, where the graph has a vertex whose parallelism may change at all
(``rescalable``: no forward edge or broadcast input), a rescale of that vertex on the restore,
whether or not Flink is expected to accept it: the engine predicts refusals. Each then runs
through ``flink_bridge.compare.compare``: Flink first, then the engine calibrated to as many
completed checkpoints. A graph agrees when both sides give the same verdict: exactly-once holds on
both, is violated on both, or both refuse the restore (as Flink refuses it). A graph that cannot be
compared (Flink or the engine stopped with an error) counts as a disagreement, with its reason, except
a run that ended before its failure or savepoint (inconclusive: neither side judged).
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cutcheck.flink_bridge.compare import Comparison, compare
from cutcheck.flink_bridge.runner import MODES, RunOptions, prepare, slow_vertex
from cutcheck.flink_bridge.translate import check_supported
from cutcheck.model.errors import CutcheckError
from cutcheck.model.graph import JobGraph
from cutcheck.reference.fuzzing.generate import SeedDraw, choice, graph_dict

MAX_PARALLELISM = 3  # small: every graph starts its own MiniCluster on a shared machine
SLOW_RECORDS = 2000  # records per subtask of the slow vertex (2 ms each on Flink: about 4 s of work)
RECORDS_RANGE = (500, 4000)  # records per source, whatever SLOW_RECORDS asks for
SEEDS_PER_GRAPH = 200  # give up after this many unsupported seeds per graph asked for


@dataclass(slots=True)
class Case:
    """One generated graph and the Flink options drawn for it."""

    seed: int
    graph: dict[str, Any]
    opts: RunOptions

    @property
    def name(self) -> str:
        return str(self.graph["name"])

    def summary(self) -> str:
        """Vertices with their parallelism, then the partitioners, e.g. ``src0(2) map0(3) sink(1); rebalance, hash``."""
        vertices = " ".join(f"{v['id']}({v['parallelism']})" for v in self.graph["vertices"])
        return f"{vertices}; {', '.join(e['partitioner'] for e in self.graph['edges'])}"

    def options(self) -> str:
        rescale = " ".join(f"{v}={p}" for v, p in sorted(self.opts.rescale.items()))
        return f"{self.opts.mode}, fail after {self.opts.fail_after}" + (f", rescale {rescale}" if rescale else "")

    def replay(self, graph_path: Path) -> str:
        """The ``cutcheck flink compare`` command that runs this case again."""
        args = ["cutcheck", "flink", "compare", str(graph_path), "--mode", self.opts.mode,
                "--fail-after-checkpoint", str(self.opts.fail_after)]
        for v, p in sorted(self.opts.rescale.items()):
            args += ["--rescale", f"{v}={p}"]
        if self.opts.records is not None:
            args += ["--records", str(self.opts.records)]
        args += ["--interval-ms", str(self.opts.interval_ms)]
        if self.opts.release is not None:
            args += ["--flink", self.opts.release]
        return shlex.join(args)


def records_for(graph: JobGraph, slow: str, per_subtask: int = SLOW_RECORDS) -> int:
    """Records per source such that the busiest subtask of the slow vertex gets about ``per_subtask``
    records (through unions, filters, broadcast copies and global edges), within RECORDS_RANGE, rounded
    up to hundreds. A job must outlast its first checkpoints and the failure after them, and the slow
    vertex's busiest subtask sets its pace."""
    reach: dict[str, float] = {}  # records through each vertex, per source record
    busiest = 0.0
    for vid in graph.topological_order():
        v = graph.vertex(vid)
        if v.kind == "source":
            reach[vid] = 1.0
            continue
        keep = (1 - 1 / v.drop_every) if v.kind == "filter" and v.drop_every else 1.0
        edges = graph.in_edges(vid)
        reach[vid] = keep * sum(reach[e.source] * (v.parallelism if e.partitioner == "broadcast" else 1) for e in edges)
        if vid == slow:  # a global edge sends everything to subtask 0, a broadcast edge a copy to each
            busiest = keep * sum(reach[e.source] * (1 if e.partitioner in ("global", "broadcast") else 1 / v.parallelism)
                                 for e in edges)
    lo, hi = RECORDS_RANGE
    return min(hi, max(lo, -(-int(per_subtask / max(busiest, 1e-9)) // 100) * 100))


def rescalable(graph: JobGraph) -> list[str]:
    """Vertices a restore may rescale alone: every vertex whose edges allow another parallelism (no forward
    edge, no broadcast input whose copies the output check counts), whether or not Flink is expected to
    accept the restore: pointwise edges with channel state, mixed exchanges and custom edges are exactly
    where a release may refuse or mis-assign, and the engine predicts which."""
    fixed = {x for e in graph.edges if e.partitioner == "forward" for x in (e.source, e.target)}
    fixed |= {e.target for e in graph.edges if e.partitioner == "broadcast"}
    return [v.id for v in graph.vertices if v.id not in fixed]


def draw_case(seed: int, records: int | None = None, interval_ms: int = 200) -> Case | None:
    """The case a seed names, or None when its graph (or the options drawn for it) is beyond what Flink runs.

    ``records`` per source; by default what gives the slow vertex about SLOW_RECORDS per subtask."""
    d = SeedDraw(seed)
    data = graph_dict(d, max_parallelism=MAX_PARALLELISM)
    data["name"] = f"conform-{seed}"
    graph = JobGraph.from_json(data)
    try:
        check_supported(graph)
    except CutcheckError:
        return None
    mode = choice(d, MODES)  # a custom edge too: the job sets unaligned.forced, the release decides the rest
    fail_after = d.integer(1, 2)
    if mode != "unaligned":
        fail_after = 1  # aligned checkpoints under backpressure are slow: few complete in a job this short
    rescale: dict[str, int] = {}
    movable = rescalable(graph)
    if movable:
        vid = choice(d, movable)
        now = graph.vertex(vid).parallelism
        rescale[vid] = choice(d, [p for p in range(1, MAX_PARALLELISM + 1) if p != now])
    opts = RunOptions(mode=mode, interval_ms=interval_ms, fail_after=fail_after, rescale=rescale)
    opts.records = records if records is not None else records_for(graph, slow_vertex(graph, opts))
    for v in data["vertices"]:
        if v["kind"] == "source":
            v["records"] = opts.records  # the file replays what ran
    try:
        prepare(graph, opts)
    except CutcheckError:
        return None
    return Case(seed, data, opts)


def cases(seed: int, graphs: int, records: int | None = None, interval_ms: int = 200) -> Iterator[Case]:
    """``graphs`` cases from seed, seed + 1, ...; seeds whose graph Flink cannot run are skipped."""
    found = 0
    for s in range(seed, seed + SEEDS_PER_GRAPH * graphs):
        case = draw_case(s, records, interval_ms)
        if case is not None:
            yield case
            found += 1
            if found == graphs:
                return
    raise CutcheckError(f"only {found} of {graphs} generated graphs from seed {seed} are within what Flink runs; "
                        "ask for fewer graphs or another --seed.")


@dataclass(slots=True)
class Row:
    case: Case
    graph_path: Path
    comparison: Comparison | None = None
    error: str | None = None
    seconds: float = 0.0

    @property
    def agree(self) -> bool:
        return self.comparison is not None and self.comparison.agree

    @property
    def inconclusive(self) -> bool:
        """The run could not exercise the case (the job ended before its failure or savepoint): neither side
        was judged, so it is no disagreement; more records or an earlier failure make it conclusive."""
        return self.comparison is None and self.error is not None and "the job finished before" in self.error

    def verdicts(self) -> tuple[str, str]:
        if self.comparison is None:
            return "error", "error"
        return self.comparison.engine.verdict, self.comparison.flink.verdict

    def to_json(self) -> dict[str, Any]:
        engine, flink = self.verdicts()
        cmp = self.comparison
        return {"seed": self.case.seed, "graph": self.case.name, "summary": self.case.summary(),
                "options": self.case.options(), "graph_file": str(self.graph_path),
                "engine_verdict": engine, "flink_verdict": flink,
                "engine_refused": cmp.engine.refused if cmp else None, "flink_refused": cmp.flink.refused if cmp else None,
                "checkpoints": [cmp.engine.completed, cmp.flink.completed] if cmp else None,
                "checkpoint_ratio": cmp.ratio if cmp else None, "agree": self.agree,
                "inconclusive": self.inconclusive, "error": self.error,
                "seconds": round(self.seconds, 1), "replay": None if self.agree else self.case.replay(self.graph_path)}


@dataclass(slots=True)
class Report:
    seed: int
    rows: list[Row] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def agreed(self) -> int:
        return sum(r.agree for r in self.rows)

    @property
    def disagreed(self) -> int:
        return sum(not r.agree and not r.inconclusive for r in self.rows)

    @property
    def graphs_per_minute(self) -> float:
        return round(60.0 * len(self.rows) / self.seconds, 2) if self.seconds else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"seed": self.seed, "graphs": len(self.rows), "agreed": self.agreed, "disagreed": self.disagreed,
                "inconclusive": len(self.rows) - self.agreed - self.disagreed, "all_agree": self.disagreed == 0, "seconds": round(self.seconds, 1),
                "graphs_per_minute": self.graphs_per_minute, "rows": [r.to_json() for r in self.rows]}


def conform(graphs: int, seed: int, graph_dir: Path, final_dir: Path | None = None, *, records: int | None = None,
            interval_ms: int = 200, progress: Callable[[str], None] | None = None, release: str | None = None) -> Report:
    """Run ``graphs`` generated graphs on the engine and on Flink; write each graph's JSON into ``graph_dir``
    (named in the report and replay commands as under ``final_dir``, where the caller moves it)."""
    say = progress or (lambda _msg: None)
    report = Report(seed)
    start = time.monotonic()
    graph_dir.mkdir(parents=True, exist_ok=True)
    for i, case in enumerate(cases(seed, graphs, records, interval_ms)):
        case.opts.release = release  # None: the installed PyFlink, in-process; else that prepared release
        (graph_dir / f"{case.name}.json").write_text(json.dumps(case.graph, indent=1) + "\n")
        row = Row(case, (final_dir or graph_dir) / f"{case.name}.json")
        say(f"graph {i + 1}/{graphs} (seed {case.seed}): {case.summary()}; {case.options()}")
        t0 = time.monotonic()
        try:
            row.comparison = compare(JobGraph.from_json(case.graph), case.opts, None, progress)
        except CutcheckError as exc:
            row.error = str(exc)
        row.seconds = time.monotonic() - t0
        report.rows.append(row)
    report.seconds = time.monotonic() - start
    return report
