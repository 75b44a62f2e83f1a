"""cutcheck's command line: the only place that parses arguments, prints, or exits.

Exit codes (DESIGN): 0 when everything checked holds, 1 when a violation or counterexample is
found, 2 on bad input or a broken environment, with one sentence saying what, where and how to fix.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from model.errors import CutcheckError

app = typer.Typer(
    name="cutcheck",
    help="An executable, proved model of Flink-style checkpointing.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
graph_app = typer.Typer(help="Inspect and validate job graphs.", no_args_is_help=True)
app.add_typer(graph_app, name="graph")

out = Console()
err = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])


def user_errors(fn: F) -> F:
    """Turn the project's errors into one sentence on stderr and exit 2, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except CutcheckError as exc:
            err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)  # one line, never folded
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


def write_json(path: Path | None, payload: Any) -> None:
    """Write a machine-readable report atomically (write, then rename)."""
    if path is None:
        return
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        raise CutcheckError(f"{path}: cannot write the JSON report ({exc.strerror}); choose a writable path.") from None


def table(title: str, columns: list[str], rows: list[list[Any]]) -> Table:
    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(c)
    for r in rows:
        t.add_row(*[str(x) for x in r])
    return t


# ---------------------------------------------------------------------------- commands
# Each command group lives below in its own section; keep parsing and printing here and the
# work in the packages.


# ---- graph: validate, show, regions, inflight ----
_KIND_COLOURS = {
    "source": "#cfe8cf",
    "map": "#dde7f5",
    "filter": "#dde7f5",
    "keyed_count": "#f7dcc4",
    "union": "#e6dcf2",
    "co_map": "#e6dcf2",
    "broadcast_state": "#f7dcc4",
    "sink": "#f2d0d0",
}


def _load_graph(file: Path, parallelism: list[str] | None = None) -> Any:
    """Load a job graph, optionally at other parallelisms given as VERTEX=P."""
    from model.errors import GraphError
    from model.graph import JobGraph

    try:
        job = JobGraph.from_json(file)
    except GraphError as exc:
        message = str(exc)
        raise GraphError(message if str(file) in message else f"{file}: {message}") from None
    overrides: dict[str, int] = {}
    for item in parallelism or []:
        vertex, sep, value = item.partition("=")
        try:
            overrides[vertex.strip()] = int(value)
        except ValueError:
            sep = ""
        if not sep or not vertex.strip():
            raise CutcheckError(f"--parallelism {item!r}: write VERTEX=P with an integer P, e.g. --parallelism count=3.")
    return job.with_parallelism(overrides) if overrides else job


def _show(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    """Print a title line and a table; when stdout is not a terminal, nothing is clipped or folded."""
    from rich.measure import Measurement

    t = table("", columns, rows)
    t.title = None
    out.print(title, markup=False, highlight=False, soft_wrap=True)
    console = out
    if not out.is_terminal:
        needed = Measurement.get(out, out.options.update_width(10_000), t).maximum
        if needed > out.width:
            console = Console(file=out.file, width=needed, no_color=out.no_color)
    console.print(t)


def _subtask_list(subtasks: list[Any]) -> str:
    """``src[0-1], map[0,2]``: subtasks grouped by vertex, consecutive indexes as ranges."""
    groups: dict[str, list[int]] = {}
    for st in subtasks:
        groups.setdefault(st.vertex, []).append(st.index)
    parts = []
    for vertex, indexes in groups.items():
        indexes.sort()
        runs: list[str] = []
        start = prev = indexes[0]
        for i in [*indexes[1:], None]:
            if i is not None and i == prev + 1:
                prev = i
                continue
            runs.append(str(start) if start == prev else f"{start}-{prev}")
            if i is not None:
                start = prev = i
        parts.append(f"{vertex}[{','.join(runs)}]")
    return ", ".join(parts)


def _edge_rows(job: Any) -> list[list[Any]]:
    from model.execution import ExecutionGraph
    from model.partitioning import connection_pattern

    eg = ExecutionGraph(job)
    return [
        [
            f"#{e.key} {e.source} -> {e.target}",
            e.partitioner,
            connection_pattern(e.partitioner),
            e.exchange,
            e.gate,
            "yes" if eg.edge_supports_unaligned(e.key) else "no",
            len(eg.channels_of_edge(e.key)),
        ]
        for e in job.edges
    ]


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _dot_text(job: Any) -> str:
    from model.partitioning import connection_pattern

    lines = [f"digraph {_dot_quote(job.name)} {{", "  rankdir=LR;", '  node [shape=box, style="rounded,filled"];']
    for v in job.vertices:
        label = f"{v.id}\n{v.kind} p={v.parallelism} maxP={job.max_parallelism(v.id)}"
        lines.append(f"  {_dot_quote(v.id)} [label={_dot_quote(label)}, fillcolor={_dot_quote(_KIND_COLOURS[v.kind])}];")
    for e in job.edges:
        label = f"#{e.key} {e.partitioner}\n{connection_pattern(e.partitioner)} gate {e.gate}"
        style = ", style=dashed" if e.exchange == "blocking" else ""
        lines.append(
            f"  {_dot_quote(e.source)} -> {_dot_quote(e.target)} [id={_dot_quote(f'e{e.key}')}, "
            f"label={_dot_quote(label + (' blocking' if e.exchange == 'blocking' else ''))}{style}];"
        )
    lines.append("}")
    return "\n".join(lines) + "\n"


def _layout(job: Any) -> dict[str, tuple[float, float]]:
    """Layers by topological generation, left to right; within a layer, ordered by the mean height
    of each vertex's producers (barycenter), so that edges cross less."""
    import networkx as nx

    order = {v.id: i for i, v in enumerate(job.vertices)}
    pos: dict[str, tuple[float, float]] = {}
    for x, layer in enumerate(nx.topological_generations(job.graph)):
        def height(vid: str) -> tuple[float, int]:
            ys = [pos[e.source][1] for e in job.in_edges(vid)]
            return (-sum(ys) / len(ys) if ys else 0.0, order[vid])

        ranked = sorted(layer, key=height)
        for y, vid in enumerate(ranked):
            pos[vid] = (x * 3.0, ((len(ranked) - 1) / 2.0 - y) * 1.6)
    return pos


def _edge_rads(job: Any, pos: dict[str, tuple[float, float]]) -> dict[int, float]:
    """Curvature per edge: the least bend whose arc passes no other vertex; parallel edges fan out."""
    half = 0.62  # a node's half side in data units (equal aspect), plus a margin

    def overlap(u: str, v: str, rad: float) -> float:
        """How deep the arc u -> v cuts into other vertices (0 when it passes them all)."""
        (x1, y1), (x2, y2) = pos[u], pos[v]
        cx, cy = (x1 + x2) / 2 + rad * (y2 - y1), (y1 + y2) / 2 - rad * (x2 - x1)  # matplotlib's arc3
        points = []
        for i in range(1, 40):
            t = i / 40
            points.append(((1 - t) ** 2 * x1 + 2 * t * (1 - t) * cx + t * t * x2,
                           (1 - t) ** 2 * y1 + 2 * t * (1 - t) * cy + t * t * y2))
        return sum(
            max(max(0.0, half - max(abs(px - wx), abs(py - wy))) for px, py in points)
            for w, (wx, wy) in pos.items()
            if w not in (u, v)
        )

    by_pair: dict[tuple[str, str], list[int]] = {}
    for e in job.edges:
        by_pair.setdefault((e.source, e.target), []).append(e.key)
    rads: dict[int, float] = {}
    for (u, v), keys in by_pair.items():
        spread = [0.0] if len(keys) == 1 else [-0.35 + 0.7 * i / (len(keys) - 1) for i in range(len(keys))]
        candidates = [0.0, 0.2, -0.2, 0.35, -0.35, 0.5, -0.5, 0.7, -0.7, 0.9, -0.9]
        base = min(candidates, key=lambda r: (round(sum(overlap(u, v, r + d) for d in spread), 3), candidates.index(r)))
        for key, d in zip(keys, spread, strict=True):
            rads[key] = base + d
    return rads


def _draw_png(job: Any, path: Path) -> None:
    """Draw the job graph left to right by topological generation and write it atomically."""
    import networkx as nx
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    pos = _layout(job)
    layers = list(nx.topological_generations(job.graph))
    height = max(len(layer) for layer in layers)
    fig = Figure(figsize=(max(6.0, 3.2 * len(layers)), max(3.5, 1.9 * height + 1.5)), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_title(f"{job.name}: {len(job.vertices)} vertices, {len(job.edges)} edges", fontsize=12)

    simple = nx.DiGraph()
    simple.add_nodes_from(job.graph.nodes)
    node_size = 5200
    rads = _edge_rads(job, pos)
    # Edges: one draw per edge so that parallel edges get their own curvature and label.
    by_pair: dict[tuple[str, str], list[Any]] = {}
    for e in job.edges:
        by_pair.setdefault((e.source, e.target), []).append(e)
    for (u, v), edges in by_pair.items():
        for e in edges:
            rad = rads[e.key]
            style = f"arc3,rad={rad:.2f}"
            blocking = e.exchange == "blocking"
            nx.draw_networkx_edges(
                simple, pos, edgelist=[(u, v)], ax=ax, node_size=node_size, arrows=True, arrowsize=18,
                width=1.6, style="dashed" if blocking else "solid", edge_color="#8a4b08" if blocking else "#333333",
                connectionstyle=style, node_shape="s",
            )
            label = f"#{e.key} {e.partitioner}" + (f" g{e.gate}" if len(job.gates(v)) > 1 else "")
            nx.draw_networkx_edge_labels(
                simple, pos, edge_labels={(u, v): label}, ax=ax, font_size=9, connectionstyle=style,
                node_size=node_size, rotate=False,
                bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "#bbbbbb", "alpha": 0.95},
            )
    labels = {v.id: f"{v.id}\n{v.kind}\np={v.parallelism} maxP={job.max_parallelism(v.id)}" for v in job.vertices}
    nx.draw_networkx_nodes(
        simple, pos, ax=ax, node_size=node_size, node_shape="s",
        node_color=[_KIND_COLOURS[job.vertex(n).kind] for n in simple.nodes], edgecolors="#555555",
    )
    nx.draw_networkx_labels(simple, pos, labels=labels, ax=ax, font_size=8.5)
    ax.legend(
        handles=[
            Line2D([], [], color="#333333", lw=1.6, label="pipelined"),
            Line2D([], [], color="#8a4b08", lw=1.6, ls="dashed", label="blocking"),
        ],
        loc="lower right", fontsize=8, frameon=False,
    )
    ax.margins(0.15)
    ax.set_axis_off()
    fig.tight_layout()
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        if path.parent and not path.parent.is_dir():
            raise CutcheckError(f"{path}: the folder {path.parent} does not exist; create it or choose another path.")
        fig.savefig(tmp, format="png")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise CutcheckError(f"{path}: cannot write the picture ({exc.strerror or exc}); choose a writable path.") from None


@graph_app.command("validate")
@user_errors
def graph_validate(file: Path = typer.Argument(..., help="Job graph JSON file.")) -> None:
    """Check a job graph against every rule; print ok or the rule it breaks."""
    job = _load_graph(file)
    out.print(f"ok: {job.name} ({len(job.vertices)} vertices, {len(job.edges)} edges)", markup=False, highlight=False)


@graph_app.command("show")
@user_errors
def graph_show(
    file: Path = typer.Argument(..., help="Job graph JSON file."),
    png: Path | None = typer.Option(None, "--png", help="Also draw the graph into this PNG file."),
    dot: bool = typer.Option(False, "--dot", help="Print the graph in Graphviz DOT instead of tables."),
    parallelism: list[str] | None = typer.Option(None, "--parallelism", "-p", help="VERTEX=P, repeatable."),
) -> None:
    """Summarise a job graph: vertices, edges, wiring, exchanges, gates and unaligned support."""
    job = _load_graph(file, parallelism)
    if png is not None:
        _draw_png(job, png)
    if dot:
        out.file.write(_dot_text(job))
        return
    _show(
        f"{job.name}: vertices",
        ["vertex", "kind", "parallelism", "max parallelism"],
        [[v.id, v.kind, v.parallelism, job.max_parallelism(v.id)] for v in job.vertices],
    )
    _show(
        f"{job.name}: edges",
        ["edge", "partitioner", "pattern", "exchange", "gate", "unaligned", "channels"],
        _edge_rows(job),
    )
    if png is not None:
        out.print(f"wrote {png}", markup=False, highlight=False)


@graph_app.command("regions")
@user_errors
def graph_regions(
    file: Path = typer.Argument(..., help="Job graph JSON file."),
    parallelism: list[str] | None = typer.Option(None, "--parallelism", "-p", help="VERTEX=P, repeatable."),
    json_path: Path | None = typer.Option(None, "--json", help="Also write the regions as JSON here."),
) -> None:
    """List the pipelined regions (the units of region failover)."""
    from model.execution import ExecutionGraph
    from model.regions import pipelined_regions

    eg = ExecutionGraph(_load_graph(file, parallelism))
    order = {st: i for i, st in enumerate(eg.subtasks)}
    regions = [sorted(r, key=order.__getitem__) for r in pipelined_regions(eg)]
    _show(
        f"{eg.job.name}: {len(regions)} pipelined region(s) over {len(eg.subtasks)} subtasks",
        ["region", "size", "subtasks"],
        [[i, len(r), _subtask_list(r)] for i, r in enumerate(regions)],
    )
    write_json(json_path, {"job": eg.job.name, "regions": [[str(st) for st in r] for r in regions]})


@graph_app.command("inflight")
@user_errors
def graph_inflight(
    file: Path = typer.Argument(..., help="Job graph JSON file."),
    buffer_bytes: int = typer.Option(4096, "--buffer-bytes", help="Bytes per network buffer."),
    exclusive: int = typer.Option(2, "--exclusive", help="Exclusive buffers per input channel and output subpartition."),
    floating: int = typer.Option(8, "--floating", help="Floating buffers per input gate and result partition."),
    output_pool: int | None = typer.Option(None, "--output-pool", help="Buffers per result partition (default: subpartitions*exclusive+floating)."),
    record_bytes: int = typer.Option(64, "--record-bytes", help="Bytes per record."),
    parallelism: list[str] | None = typer.Option(None, "--parallelism", "-p", help="VERTEX=P, repeatable."),
    json_path: Path | None = typer.Option(None, "--json", help="Also write the bound as JSON here."),
) -> None:
    """Worst-case in-flight bytes (FLIP-183) per result partition, per input gate, and in total."""
    from model.execution import ExecutionGraph
    from model.inflight import NetworkConfig, worst_case_inflight_bytes

    network = NetworkConfig(
        buffer_bytes=buffer_bytes, record_bytes=record_bytes, exclusive=exclusive, floating=floating, output_pool=output_pool
    )
    eg = ExecutionGraph(_load_graph(file, parallelism))
    bound = worst_case_inflight_bytes(eg, network)
    job = eg.job
    _show(
        f"{job.name}: result partitions (upstream)",
        ["producer", "edge", "subpartitions", "buffers", "bytes"],
        [
            [str(st), job.edge(e).describe(), len(eg.partitions[(st, e)]),
             network.output_pool_size(len(eg.partitions[(st, e)])), nbytes]
            for (st, e), nbytes in bound.partitions.items()
        ],
    )
    _show(
        f"{job.name}: input gates (downstream)",
        ["consumer", "gate", "channels", "buffers", "bytes"],
        [
            [str(st), g, len(eg.gates[(st, g)]), network.input_gate_buffers(len(eg.gates[(st, g)])), nbytes]
            for (st, g), nbytes in bound.gates.items()
        ],
    )
    out.print(
        f"worst-case in-flight bytes: upstream {bound.upstream}, downstream {bound.downstream}, total {bound.total}",
        markup=False, highlight=False,
    )
    write_json(json_path, {
        "job": job.name,
        "network": network.to_json(),
        "partitions": [{"producer": str(st), "edge": e, "bytes": b} for (st, e), b in bound.partitions.items()],
        "gates": [{"consumer": str(st), "gate": g, "bytes": b} for (st, g), b in bound.gates.items()],
        "upstream": bound.upstream,
        "downstream": bound.downstream,
        "total": bound.total,
    })


# ---- end graph ----

# ---- reference: simulate ----


def _parse_assignments(items: list[str] | None, option: str) -> dict[str, int]:
    result: dict[str, int] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name or not value.isdigit() or int(value) < 1:
            raise CutcheckError(f"{option} {item!r}: expected VERTEX=P with P a positive integer, e.g. {option} count=3.")
        result[name] = int(value)
    return result


def _print_restore(r: dict[str, Any]) -> None:
    """Per edge: in-flight records restored, where they moved (old producer→consumer ⇒ new), and
    how many the rescaling filter dropped."""
    rows = []
    for key, d in sorted(r.get("edges", {}).items(), key=lambda kv: int(kv[0])):
        moves = d.get("moves") or []
        moved = "\n".join(moves) if moves else ("in place" if d["input_records"] + d["output_records"] else "")
        rows.append([d.get("edge", f"#{key}"), d.get("mapper", "1:1"), d["input_records"], d["output_records"],
                     d.get("filtered", 0), moved])
    if not rows:
        return
    title = f"restore from checkpoint {r['checkpoint']}"
    if r.get("rescaled"):
        changes = ", ".join(f"{v} {old}→{new}" for v, (old, new) in sorted(r.get("parallelism", {}).items()))
        title += f" (rescaled: {changes})"
    _show(title, ["edge", "mapper (input / output)", "input-state records", "output-state records",
                  "dropped by filter", "moved (old producer→consumer ⇒ new): records"], rows)
    if r.get("order_unchecked_edges"):
        out.print("ORDER is no longer checked on edge(s) " + ", ".join(f"#{k}" for k in r["order_unchecked_edges"])
                  + ": the rescale merged several old subtasks' in-flight slices of a split into one new subtask.",
                  markup=False, highlight=False, soft_wrap=True)


def _print_run(result: Any) -> None:
    s = result.summary()
    eo = s["exactly_once"]
    rows = [
        ["mode", s["mode"]],
        ["steps", s["steps"]],
        ["checkpoints completed", s["checkpoints_completed"]],
        ["checkpoints aborted", s["checkpoints_aborted"]],
        ["alignment steps", s["alignment_steps"]],
        ["channel-state records (input / output)", f"{s['input_state_records']} / {s['output_state_records']}"],
        ["restarts", s["restarts"]],
        ["EXACTLY_ONCE", "holds" if eo["ok"] else
         f"VIOLATED: lost {eo['lost']}, duplicated {eo['duplicated']}, phantom {eo['phantom']}, count gaps {eo['count_gaps']}"],
    ]
    if "batch" in s:  # a batch job: regions instead of checkpoints (reference.batch)
        b = s["batch"]
        rows[0] = ["execution", f"batch: {b['regions']} regions on {b['workers']} workers, no checkpoints"]
        rows[2:6] = [["failover strategy", b["failover_strategy"]], ["regions restarted", b["regions_restarted"]],
                     ["records recomputed", b["records_recomputed"]],
                     ["blocking partitions (persisted / bytes)", f"{b['partitions_persisted']} / {b['bytes_persisted']}"]]
    if "debloat" in s:
        d = s["debloat"]
        rows.insert(-1, ["buffer debloating", f"{d['announcements']} announcements, buffer {d['buffer_size_now']} B now "
                                              f"(min {d['min_buffer_size']}), estimated time to consume "
                                              f"{d['estimated_time_to_consume_mean']} steps (max {d['estimated_time_to_consume_max']})"])
    out.print(table(f"simulate (seed {s['seed']})", ["", "value"], rows))
    for f in s.get("batch", {}).get("failovers", []):
        out.print(f"failover at step {f['step']} ({f['target']}): restarted "
                  + "; ".join("{" + ", ".join(r) + "}" for r in f["regions_restarted"])
                  + f"; {f['records_recomputed']} records recomputed", highlight=False, markup=False)
    for r in s["restores"]:
        _print_restore(r)
    for v in s["violations"]:
        out.print(f"[bold red]{v['invariant']} violated[/] at step {v['step']}: {v['detail']}", highlight=False)
    if result.run_dir:
        out.print(f"recovery logs: {result.run_dir}")
    if not result.ok:
        out.print(f"replay: {result.replay}", highlight=False, markup=False)


@app.command()
@user_errors
def simulate(
    scenario: Path = typer.Argument(..., help="Scenario JSON file (DESIGN 'Scenarios')."),
    out_dir: Path = typer.Option(None, "--out", help="Write the recovery logs (Parquet) to this run directory."),
    seed: int = typer.Option(None, "--seed", help="Override the scenario's seed."),
    mode: str = typer.Option(None, "--mode", help="Override the checkpoint mode: aligned, unaligned, aligned_timeout, at_least_once."),
    mutant: list[str] = typer.Option(None, "--mutant", help="Switch on a named protocol fault (repeatable)."),
    json_path: Path = typer.Option(None, "--json", help="Write the summary as JSON."),
    rescale: list[str] = typer.Option(None, "--rescale", help="VERTEX=P: restore at this parallelism after the first failure (repeatable)."),
    checkpoint_dir: Path = typer.Option(None, "--checkpoint-dir", help="Write checkpoints to this directory (the scenario's storage.dir)."),
    restore: Path = typer.Option(None, "--restore", help="Start from this chk-N or savepoint directory of an earlier run."),
    restore_mode: str = typer.Option(None, "--restore-mode", help="claim or no_claim (default: the scenario's, else no_claim)."),
    trace: bool = typer.Option(False, "--trace", help="Record every channel's protocol events (trace.jsonl in the run "
                               "directory, for `cutcheck trace`) and validate them against the proved protocol."),
) -> None:
    """Run a scenario on the reference engine, write its recovery logs, and check every invariant.

    A restore Flink would refuse (rescaling in-flight data of a pointwise, broadcast or custom edge)
    ends the run with exit 2 and the reason."""
    from reference import Scenario
    from reference import simulate as run

    scen = Scenario.from_json(scenario).with_overrides(seed=seed, mode=mode, mutants=tuple(mutant) if mutant else None)
    if rescale:
        parallelism = _parse_assignments(rescale, "--rescale")
        if not scen.failures:
            raise CutcheckError(f"{scenario}: --rescale applies to the restore after the first failure, but the scenario "
                                "has no failures; add one under 'failures'.")
        scen = scen.with_rescale(parallelism, on_failure=0, label="--rescale")
    result = run(scen, out_dir=out_dir, checkpoint_dir=checkpoint_dir, restore=restore, restore_mode=restore_mode,
                 trace=trace)
    if result.run_dir is None:
        # Without --out the replay names the scenario file as given, with every override.
        flags = [f"--seed {scen.seed}"] + ([f"--mode {mode}"] if mode else []) + [f"--mutant {m}" for m in mutant or []]
        flags += [f"--rescale {r}" for r in rescale or []] + (["--trace"] if trace else [])
        result.replay = f"cutcheck simulate {scenario} " + " ".join(flags)
    _print_run(result)
    rejected = []
    if trace:
        from reference.tracing import validate_run

        rejected = validate_run(result.traces)
        if scen.checkpoint.mode == "at_least_once":
            rejected = [f for f in rejected if f.kind != "cut"]  # at-least-once promises no consistent cut
        channels = sum(len(book) for book in result.traces)
        out.print(f"trace validation: {channels} channel traces, "
                  + ("all accepted by the protocol" if not rejected else f"{len(rejected)} rejected"))
        for f in rejected[:5]:
            out.print(f"  channel {f.key} event #{f.index} {f.event}: {f.reason}", markup=False, highlight=False)
    write_json(json_path, result.summary())
    raise typer.Exit(0 if result.ok and not rejected else 1)


# ---- end reference ----


# ---- spark_validation: validate, logs ----
logs_app = typer.Typer(help="Make recovery logs (synthetic, with planted faults).", no_args_is_help=True)
app.add_typer(logs_app, name="logs")


def _validation_table(report: Any) -> Table:
    from spark_validation import CHECKS

    rows = []
    for check in CHECKS:
        if check in report.checks_skipped:
            rows.append([check, f"skipped: {report.checks_skipped[check]}", ""])
            continue
        n = report.count(check)
        sample = ", ".join(str(r) for r in report.samples.get(check, [])[:5])
        rows.append([check, "ok" if n == 0 else f"FAULT: {n}", sample])
    verdict = "exactly-once holds" if report.ok else "exactly-once VIOLATED"
    title = f"validate: {verdict}\n{report.records_in} records in, {report.records_out} out, {report.seconds:.1f} s"
    return table(title, ["check", "result", "sample rids"], rows)


@app.command("validate")
@user_errors
def validate_cmd(
    run_dir: Path = typer.Argument(None, help="A run directory holding input/ and output/ (and run.json)."),
    input_path: Path = typer.Option(None, "--input", help="Input dataset: Parquet, CSV (with header) or JSON lines."),
    output_path: Path = typer.Option(None, "--output", help="Output dataset: Parquet, CSV (with header) or JSON lines."),
    master: str = typer.Option(None, "--master", help="Spark master URL (default local[*])."),
    driver_memory: str = typer.Option(None, "--driver-memory", help="Spark driver memory, e.g. 4g."),
    sample: int = typer.Option(20, "--sample", min=0, help="Offending rids kept per check."),
    json_path: Path = typer.Option(None, "--json", help="Write the report as JSON."),
) -> None:
    """Check recovery logs for exactly-once with Spark: nothing lost, duplicated or invented, order kept.

    Exit 0 when every check that ran holds, 1 when a check finds a fault, 2 on bad input.
    """
    from spark_validation import validate as run_validate

    if run_dir is None and (input_path is None or output_path is None):
        raise CutcheckError("give a run directory, or both --input and --output.")
    with err.status("Spark is checking the logs (lost, duplicated, phantom, counts, order, commits)..."):
        report = run_validate(run_dir, input=input_path, output=output_path, master=master,
                              driver_memory=driver_memory, sample=sample)
    out.print(_validation_table(report))
    write_json(json_path, report.to_dict())
    raise typer.Exit(0 if report.ok else 1)


@logs_app.command("synth")
@user_errors
def logs_synth(
    out_dir: Path = typer.Argument(..., help="Run directory to create (input/, output/, run.json, planted.json)."),
    records: int = typer.Option(..., "--records", min=0, help="Input records."),
    keys: int = typer.Option(1000, "--keys", min=1),
    splits: int = typer.Option(8, "--splits", min=1),
    dup_rate: float = typer.Option(0.0, "--dup-rate", min=0.0, max=1.0, help="About this share of records duplicated."),
    loss_rate: float = typer.Option(0.0, "--loss-rate", min=0.0, max=1.0, help="About this share of records lost."),
    reorder_rate: float = typer.Option(0.0, "--reorder-rate", min=0.0, max=1.0, help="About this share reordered."),
    phantoms: int = typer.Option(0, "--phantoms", min=0, help="Output rows with rids not in the input."),
    count_gaps: int = typer.Option(0, "--count-gaps", min=0, help="Keys whose counts get a gap."),
    double_commits: int = typer.Option(0, "--double-commits", min=0, help="Transactions committed twice."),
    seed: int = typer.Option(0, "--seed"),
    fmt: str = typer.Option("parquet", "--format", help="parquet, csv or json (JSON lines)."),
    master: str = typer.Option(None, "--master", help="Spark master URL (default local[*])."),
    driver_memory: str = typer.Option(None, "--driver-memory", help="Spark driver memory, e.g. 4g."),
    force: bool = typer.Option(False, "--force", help="Replace OUT if it exists."),
) -> None:
    """Generate input/output logs with Spark, with exactly known planted faults (OUT/planted.json)."""
    from spark_validation import synthesize

    with err.status(f"Spark is writing {records} records to {out_dir}..."):
        planted = synthesize(out_dir, records, keys=keys, splits=splits, dup_rate=dup_rate, loss_rate=loss_rate,
                             reorder_rate=reorder_rate, phantoms=phantoms, count_gaps=count_gaps,
                             double_commits=double_commits, seed=seed, format=fmt, master=master,
                             driver_memory=driver_memory, force=force)
    rows = [[k, v] for k, v in planted.faults().items()]
    title = f"planted in {planted.path}\n{planted.records} records in, {planted.output_rows} rows out ({planted.format})"
    out.print(table(title, ["fault", "planted"], rows))


# ---- end spark_validation ----

# ---- fuzz and verify ----

FUZZ_PROFILES: dict[str, dict[str, Any]] = {
    # examples: Hypothesis fuzz scenarios; kill_seconds: budget per mutant; spark: validate the example logs
    "quick": {"examples": 20, "kill_seconds": 60.0, "max_seeds": 300},
    "ci": {"examples": 80, "kill_seconds": 60.0, "max_seeds": 400},
    "deep": {"examples": 2000, "kill_seconds": 300.0, "max_seeds": 5000},
}


def _write_counterexample(verdict: Any, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"counterexample-{verdict.scenario.get('seed', 0)}.json"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(verdict.scenario, indent=2) + "\n")
    os.replace(tmp, path)
    return path


def _spark_verdicts(seeds: list[int], mutants: tuple[str, ...], master: str) -> list[dict[str, Any]]:
    """Each seed is one Spark task running the engine (executors need this project installed)."""
    import functools as ft

    from reference.fuzz import verdict_of_seed
    from spark_validation.session import get_session

    spark = get_session(master)  # its Python workers run this interpreter (spark_validation.session)
    rdd = spark.sparkContext.parallelize(seeds, max(1, min(len(seeds), 64)))
    verdicts = rdd.map(ft.partial(verdict_of_seed, mutants=mutants)).collect()
    return sorted(verdicts, key=lambda v: v["seed"])


def _progress(description: str, total: int) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=err, transient=True)
    return progress, progress.add_task(description, total=total)


@app.command()
@user_errors
def fuzz(
    seconds: float = typer.Option(None, "--seconds", help="Stop after this many seconds."),
    examples: int = typer.Option(100, "--examples", help="Scenarios to try (Hypothesis examples or seeds)."),
    mutant: list[str] = typer.Option(None, "--mutant", help="Switch on a named fault; the campaign should find it."),
    workers: int = typer.Option(1, "--workers", help="Run seed campaigns in this many local processes."),
    spark: str = typer.Option(None, "--spark", help="Run the seeds as Spark tasks on this master (e.g. local[*])."),
    seed: int = typer.Option(0, "--seed", help="Campaign seed (the first scenario seed for seed campaigns)."),
    seeds: bool = typer.Option(False, "--seeds", help="A seed campaign in this process (what --workers and --spark run)."),
    out_dir: Path = typer.Option(Path("."), "--out", help="Where a counterexample scenario is written."),
    json_path: Path = typer.Option(None, "--json", help="Write the campaign report as JSON."),
) -> None:
    """Fuzz the engine: random graphs, modes, failures, rescales and schedules; shrink any violation."""
    from reference import fuzz as fz

    mutants = tuple(mutant or ())
    if spark or workers > 1 or seeds:
        seed_list = list(range(seed, seed + examples))
        if spark:
            with err.status(f"running {len(seed_list)} scenarios as Spark tasks on {spark} …"):
                verdicts = _spark_verdicts(seed_list, mutants, spark)
        elif workers > 1:
            from multiprocessing import get_context

            with get_context("spawn").Pool(workers) as pool:
                verdicts = pool.starmap(fz.verdict_of_seed, [(s, mutants) for s in seed_list])
        else:
            verdicts = fz.seed_campaign(seed_list, mutants=mutants).verdicts
        result = fz.CampaignResult(examples=len(verdicts), refused=sum(v["refused"] for v in verdicts), verdicts=verdicts)
        bad = [v for v in verdicts if not v["ok"]]
        out.print(table("fuzz (seed campaign)", ["scenarios", "refused restores", "violations"],
                        [[result.examples, result.refused, len(bad)]]))
        for v in bad[:5]:
            path = _write_counterexample(fz.Verdict(False, False, v["violations"], fz.scenario_from_seed(v["seed"], mutants=mutants)), out_dir)
            out.print(f"seed {v['seed']}: {v['violations'][0]['invariant']}: {v['violations'][0]['detail']}", markup=False)
            out.print(f"replay: cutcheck simulate {path}", markup=False, highlight=False)
        write_json(json_path, {"examples": result.examples, "refused": result.refused, "verdicts": verdicts})
        raise typer.Exit(1 if bad else 0)
    progress, task = _progress("fuzzing", examples)
    with progress:
        result = fz.hypothesis_campaign(examples=examples, seconds=seconds, mutants=mutants, seed=seed,
                                        progress=lambda n: progress.advance(task, n))
    rows = [[result.examples, result.refused, f"{result.seconds:.1f}", "none" if result.ok else "FOUND"]]
    out.print(table("fuzz", ["scenarios", "refused restores", "seconds", "violation"], rows))
    report: dict[str, Any] = {"examples": result.examples, "refused": result.refused, "seconds": result.seconds}
    if result.failure is not None:
        path = _write_counterexample(result.failure, out_dir)
        v = result.failure.violations[0]
        g = result.failure.scenario["graph"]
        out.print(f"{v['invariant']}: {v['detail']}", markup=False, highlight=False)
        out.print(f"shrunk to {len(g['vertices'])} vertices, {len(g['edges'])} edges, "
                  f"{len(result.failure.scenario['schedule'].get('choices', []))} scripted choices")
        out.print(f"replay: cutcheck simulate {path}", markup=False, highlight=False)
        report["counterexample"] = str(path)
        report["violation"] = v
    write_json(json_path, report)
    raise typer.Exit(0 if result.ok else 1)


def _example_scenarios(directory: Path | None) -> list[Path]:
    """The scenarios verify runs: --examples DIR, else examples/scenarios of the working directory
    (the repository, where the README runs it), else the one beside cli.py (an editable install)."""
    candidates = [directory] if directory else [Path.cwd() / "examples" / "scenarios",
                                                 Path(__file__).resolve().parent / "examples" / "scenarios"]
    for d in candidates:
        found = sorted(d.glob("*.json")) if d and d.is_dir() else []
        if found:
            return found
    where = directory or candidates[0]
    raise CutcheckError(f"{where}: no example scenarios (*.json) to run; run verify from the repository root or "
                        "give --examples DIR.")


@app.command()
@user_errors
def verify(
    profile: str = typer.Option("quick", "--profile", help="quick (minutes), ci, or deep (long campaigns)."),
    json_path: Path = typer.Option(None, "--json", help="Write the whole report as JSON."),
    master: str = typer.Option(None, "--master", help="Spark master for validating the example logs (default local[*])."),
    work_dir: Path = typer.Option(None, "--work-dir", help="Keep the example runs' recovery logs here."),
    mutant: list[str] = typer.Option(None, "--mutant", help="Switch a fault on everywhere (verify must then fail)."),
    examples_dir: Path = typer.Option(None, "--examples", help="Directory of scenarios to run (default examples/scenarios)."),
) -> None:
    """The whole chain: proofs, a fuzz campaign, the mutation check, the example scenarios, and Spark
    validation of their logs. Exit 0 when everything holds, 1 on any violation or counterexample."""
    import tempfile

    import proofs
    from reference import Scenario
    from reference import fuzz as fz
    from reference import simulate as run
    from reference.mutations import MUTANTS

    if profile not in FUZZ_PROFILES:
        raise CutcheckError(f"--profile {profile!r}: use one of {', '.join(FUZZ_PROFILES)}.")
    _example_scenarios(examples_dir)  # bad input is found before minutes of work
    mutants = tuple(mutant or ())
    for m in mutants:
        if m not in MUTANTS:
            raise CutcheckError(f"--mutant {m!r}: unknown; known mutants are {', '.join(MUTANTS)}.")
    budget = FUZZ_PROFILES[profile]
    rows: list[list[Any]] = []
    report: dict[str, Any] = {"profile": profile}
    failed = False

    with err.status("proving …"):
        results = proofs.run()
    unexpected = [r for r in results if r.status != ("counterexample" if "[" in r.name else "proved")]
    rows.append(["proofs", f"{len(results) - len(unexpected)}/{len(results)} as expected "
                 f"({sum(r.seconds for r in results):.1f} s)", "ok" if not unexpected else "FAIL"])
    report["proofs"] = [{"name": r.name, "status": r.status, "bound": r.bound, "seconds": r.seconds} for r in results]
    failed |= bool(unexpected)

    progress, task = _progress("fuzzing", budget["examples"])
    with progress:
        campaign = fz.hypothesis_campaign(examples=budget["examples"], mutants=mutants,
                                          gen=fz.KILL_GEN.get(mutants[0], {}) if mutants else None,
                                          progress=lambda n: progress.advance(task, n))
    detail = f"{campaign.examples} scenarios, {campaign.refused} refused restores ({campaign.seconds:.1f} s)"
    if campaign.failure is not None:
        path = _write_counterexample(campaign.failure, work_dir or Path("."))
        detail += f"; replay: cutcheck simulate {path}"
    rows.append(["fuzz", detail, "ok" if campaign.ok else "FAIL"])
    report["fuzz"] = {"examples": campaign.examples, "ok": campaign.ok, "seconds": campaign.seconds}
    failed |= not campaign.ok

    kills = []
    progress, task = _progress("mutation check", len(MUTANTS))
    with progress:
        for m in MUTANTS:
            kills.append(fz.kill(m, seconds=budget["kill_seconds"], max_seeds=budget["max_seeds"]))
            progress.advance(task, 1)
    score = sum(k.killed for k in kills)
    survivors = [k.mutant for k in kills if not k.killed]
    rows.append(["mutation score", f"{score}/{len(kills)} killed ({100 * score // max(1, len(kills))}%)"
                 + (f"; survivors: {', '.join(survivors)}" if survivors else ""), "ok" if not survivors else "FAIL"])
    report["mutants"] = [{"mutant": k.mutant, "killed": k.killed, "seconds": k.seconds, "examples": k.examples,
                          "violation": k.violation, "seed": k.seed} for k in kills]
    failed |= bool(survivors)

    root = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="cutcheck-verify-"))
    examples_ok, run_dirs = True, []
    for path in _example_scenarios(examples_dir):
        result = run(Scenario.from_json(path).with_overrides(mutants=mutants or None), out_dir=root / path.stem)
        run_dirs.append((path.stem, result))
        examples_ok &= result.ok
    rows.append(["example scenarios", ", ".join(f"{n}: {'ok' if r.ok else 'VIOLATION'}" for n, r in run_dirs),
                 "ok" if examples_ok else "FAIL"])
    report["examples"] = {n: r.summary() for n, r in run_dirs}
    failed |= not examples_ok

    import spark_validation

    agree = True
    with err.status("validating the example logs with Spark …"):
        for name, result in run_dirs:
            rep = spark_validation.validate(run_dir=result.run_dir, master=master)
            eo = result.exactly_once
            # The same verdict and the same figures (one definition of each, DESIGN "EXACTLY_ONCE").
            agree &= rep.ok == eo.ok and (rep.lost, rep.duplicated, rep.phantom, rep.count_gaps) == (
                eo.lost, eo.duplicated, eo.phantom, eo.count_gaps)
            report.setdefault("spark", {})[name] = rep.to_json()
    rows.append(["spark validation", f"{len(run_dirs)} run(s); verdicts and figures {'agree' if agree else 'DISAGREE'} with the engine",
                 "ok" if agree else "FAIL"])
    failed |= not agree

    out.print(table(f"cutcheck verify --profile {profile}", ["stage", "result", "verdict"], rows))
    report["ok"] = not failed
    write_json(json_path, report)
    raise typer.Exit(1 if failed else 0)


# ---- end fuzz and verify ----


# ---- flink: run, compare ----
flink_app = typer.Typer(help="Run job graphs on a real Flink MiniCluster (needs the flink extra).", no_args_is_help=True)
app.add_typer(flink_app, name="flink")


def _flink_options(mode: str, fail_after: int | None, rescale: list[str] | None, records: int | None, interval: int,
                   slow: str | None, delay: float, no_restart: bool, incremental: bool, retained: int,
                   checkpoint_dir: Path | None, job_id: str | None) -> Any:
    import flink_bridge

    flink_bridge.require_flink()  # one sentence and exit 2 without the extra, before any other work
    return flink_bridge.RunOptions(
        mode=mode, interval_ms=interval, fail_after=fail_after, restart=not no_restart,
        rescale=_parse_assignments(rescale, "--rescale"), records=records, slow=slow, delay_ms=delay,
        retained=retained, incremental=incremental, checkpoint_dir=str(checkpoint_dir) if checkpoint_dir else None,
        job_id=job_id)


def _flink_progress(message: str) -> None:
    err.print(f"[dim]flink:[/] {message}", highlight=False)


def _flink_run_table(outcome: Any) -> Table:
    s = outcome.summary
    eo = s["exactly_once"]
    rows: list[list[Any]] = []
    for j in outcome.run.jobs:
        par = ", ".join(f"{v.id}={v.parallelism}" for v in j.graph.vertices)
        rows.append([f"job {j.index}", f"{j.job_id} ({j.stats.state if j.stats else '?'}; {par})"])
    rows += [
        ["checkpoints completed / aborted", f"{s['checkpoints_completed']} / {s['checkpoints_aborted']}"],
        ["unaligned checkpoints", s["unaligned_checkpoints"]],
        ["in-flight bytes met / persisted", f"{s['inflight_bytes']} / {s['persisted_bytes']}"],
        ["alignment (ms, slowest subtask, summed)", s["alignment_ms"]],
        ["failure", f"{s['failure']['vertex_subtask']} after checkpoint {s['failure']['after_checkpoint']}" if s["failure"] else "none"],
        ["restores", "; ".join(f"checkpoint {r['checkpoint']}" + (" (rescaled)" if r["rescaled"] else "") for r in s["restores"]) or "none"],
        ["committed output rows", s["output_rows"]],
        ["EXACTLY_ONCE (engine oracle)", "not judged: the job was left failed (--no-restart), its output is a prefix"
         if not s["complete"] else "holds" if eo["ok"] else
         f"VIOLATED: lost {eo['lost']}, duplicated {eo['duplicated']}, phantom {eo['phantom']}, count gaps {eo['count_gaps']}"],
    ]
    return table(f"flink run: {outcome.run.graph.name} ({s['mode']}), {s['seconds']:.1f} s", ["", "value"], rows)


@flink_app.command("run")
@user_errors
def flink_run(
    graph: Path = typer.Argument(..., help="Job graph JSON file."),
    out_dir: Path = typer.Option(..., "--out", help="Run directory to write (recovery logs and Flink's state)."),
    mode: str = typer.Option("unaligned", "--mode", help="unaligned, aligned or aligned_timeout."),
    fail_after: int = typer.Option(None, "--fail-after-checkpoint", help="Inject one failure once checkpoint N completed."),
    rescale: list[str] = typer.Option(None, "--rescale", help="VERTEX=P: restore after the failure at this parallelism (repeatable)."),
    records: int = typer.Option(None, "--records", min=1, help="Records per source (overrides the graph)."),
    interval: int = typer.Option(200, "--interval-ms", min=10, help="Checkpoint interval in milliseconds."),
    slow: str = typer.Option(None, "--slow", help="Vertex slowed down to build backpressure (default: last keyed_count, else the sink)."),
    delay: float = typer.Option(2.0, "--delay-ms", min=0.0, help="Delay per record at the slow vertex."),
    no_restart: bool = typer.Option(False, "--no-restart", help="Let the failed job stay failed (its checkpoints retained)."),
    incremental: bool = typer.Option(False, "--incremental", help="RocksDB incremental checkpoints (files in shared/)."),
    retained: int = typer.Option(3, "--retained", min=1, help="Checkpoints Flink retains."),
    checkpoint_dir: Path = typer.Option(None, "--checkpoint-dir", help="Flink checkpoint directory (default: RUN_DIR/flink/checkpoints)."),
    job_id: str = typer.Option(None, "--job-id", help="Pin the job id (32 hex digits), hence <checkpoint-dir>/<job-id>/."),
    json_path: Path = typer.Option(None, "--json", help="Write the summary as JSON."),
) -> None:
    """Run a job graph on a local Flink MiniCluster and write its recovery logs; `cutcheck validate` checks them.

    Exit 0 when the committed output is exactly-once, 1 when it is not, 2 on bad input or without the flink extra.
    """
    import flink_bridge

    opts = _flink_options(mode, fail_after, rescale, records, interval, slow, delay, no_restart, incremental, retained,
                          checkpoint_dir, job_id)
    outcome = flink_bridge.run_to_dir(graph, out_dir, opts, progress=_flink_progress)
    out.print(_flink_run_table(outcome))
    if outcome.complete:
        out.print(f"recovery logs: {outcome.run_dir}  (check them with: cutcheck validate {outcome.run_dir})")
    else:
        out.print(f"retained checkpoints: {outcome.run.checkpoint_dir}  (cutcheck storage ls / orphans)")
    write_json(json_path, outcome.summary)
    raise typer.Exit(0 if outcome.exactly_once or not outcome.complete else 1)


def _side_by_side(cmp: Any) -> list[Table]:
    e, f = cmp.engine, cmp.flink

    def verdict(eo: dict[str, Any]) -> str:
        return "holds" if eo["ok"] else f"VIOLATED (lost {eo['lost']}, duplicated {eo['duplicated']}, phantom {eo['phantom']})"

    rows = [
        ["checkpoints completed", e.completed, f.completed],
        ["checkpoints aborted", e.aborted, f.aborted],
        ["unaligned checkpoints", "-", f.unaligned],
        ["in-flight bytes (all completed checkpoints)", sum(b for _, b in e.inflight), sum(b for _, b in f.inflight)],
        ["channel state persisted (bytes)", sum(b for _, b in e.persisted), sum(b for _, b in f.persisted)],
        [f"alignment ({e.time_unit} / {f.time_unit})", sum(a for _, a in e.alignment), sum(a for _, a in f.alignment)],
        ["restarts", e.restarts, f.restarts],
        ["exactly-once", verdict(e.exactly_once), verdict(f.exactly_once)],
    ]
    title = f"flink compare: {cmp.graph} ({cmp.mode}); engine interval {cmp.engine_interval} steps"
    summary = table(title, ["", "engine", "Flink"], rows)
    def cells(side: Any, i: int) -> list[Any]:
        if i >= len(side.inflight):
            return ["", "", "", ""]
        return [side.inflight[i][0], side.inflight[i][1], side.persisted[i][1], side.alignment[i][1]]

    per = [[i + 1, *cells(e, i), *cells(f, i)] for i in range(max(len(e.inflight), len(f.inflight)))]
    detail = table("per completed checkpoint (bytes; engine alignment in steps, Flink's in ms)",
                   ["#", "engine id", "in-flight", "persisted", "alignment", "Flink id", "in-flight", "persisted",
                    "alignment"], per)
    return [summary, detail]


@flink_app.command("compare")
@user_errors
def flink_compare(
    graph: Path = typer.Argument(..., help="Job graph JSON file."),
    mode: str = typer.Option("unaligned", "--mode", help="unaligned, aligned or aligned_timeout."),
    fail_after: int = typer.Option(None, "--fail-after-checkpoint", help="Inject one failure once checkpoint N completed."),
    rescale: list[str] = typer.Option(None, "--rescale", help="VERTEX=P: restore after the failure at this parallelism (repeatable)."),
    records: int = typer.Option(None, "--records", min=1, help="Records per source (overrides the graph)."),
    interval: int = typer.Option(200, "--interval-ms", min=10, help="Flink's checkpoint interval in milliseconds."),
    out_dir: Path = typer.Option(None, "--out", help="Keep Flink's run directory here."),
    json_path: Path = typer.Option(None, "--json", help="Write the comparison as JSON."),
) -> None:
    """Run a job graph on the reference engine and on real Flink; print checkpoints, in-flight bytes, alignment, verdicts.

    Exit 0 when both are exactly-once, 1 when either is not, 2 on bad input or without the flink extra.
    """
    from flink_bridge.compare import compare

    opts = _flink_options(mode, fail_after, rescale, records, interval, None, 2.0, False, False, 3, None, None)
    cmp = compare(graph, opts, out_dir, progress=_flink_progress)
    for t in _side_by_side(cmp):
        out.print(t)
    write_json(json_path, cmp.to_json())
    raise typer.Exit(0 if cmp.engine.exactly_once["ok"] and cmp.flink.exactly_once["ok"] else 1)


# ---- end flink ----


# ---- storage: ls, orphans ----
storage_app = typer.Typer(help="Inspect checkpoint directories: checkpoints, shared files, orphans.", no_args_is_help=True)
app.add_typer(storage_app, name="storage")

_DIR_HELP = ("A checkpoint directory: the base (state.checkpoints.dir), a job directory or a chk-N directory. "
             "With entropy injection give the configured path, marker included.")


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _storage_listing(directory: Path, entropy_key: str, entropy_length: int) -> Any:
    """cutcheck's own _metadata is JSON; anything else is read as Flink's, through flink_bridge."""
    from reference.storage_inspect import inspect
    from reference.storage_meta import referenced_files

    reader: Any = referenced_files
    for d, _, files in os.walk(directory):
        if "_metadata" in files:
            with open(os.path.join(d, "_metadata"), "rb") as fh:
                if fh.read(1) != b"{":
                    from flink_bridge.checkpoints import any_referenced_files

                    reader = any_referenced_files
                    break
    return inspect(directory, reader, entropy=entropy_key or None, entropy_length=entropy_length)


def _namer(listing: Any) -> tuple[list[str], Callable[[str], str]]:
    """The jobs of a listing, and how to show its paths (relative to the job when there is one)."""
    jobs = sorted({c.job for c in listing.checkpoints if c.kind == "checkpoint"})
    return jobs, functools.partial(_label, root=listing.root, job=jobs[0] if len(jobs) == 1 else None)


def _label(path: str, root: str, job: str | None = None) -> str:
    """A path as people read it: relative to the root, and to the job directory when there is one job."""
    rel = os.path.relpath(path, root) if path.startswith(root + os.sep) else path
    return rel[len(job) + 1:] if job and rel.startswith(job + os.sep) else rel


@storage_app.command("ls")
@user_errors
def storage_ls(
    directory: Path = typer.Argument(..., help=_DIR_HELP),
    json_path: Path = typer.Option(None, "--json", help="Write the listing as JSON."),
    entropy_key: str = typer.Option("_entropy_", "--entropy-key", help="Entropy marker (s3.entropy.key) in DIR, if any."),
    entropy_length: int = typer.Option(4, "--entropy-length", help="s3.entropy.length."),
) -> None:
    """Checkpoints with their sizes, and for each shared file the checkpoints that reference it.

    Exit 1 when a checkpoint references a file that is missing (it cannot be restored)."""
    listing = _storage_listing(directory, entropy_key, entropy_length)
    jobs, name = _namer(listing)
    rows = [[name(c.path), _bytes(c.size), _bytes(c.new_size), f"{len(c.files['exclusive'])} / {len(c.files['shared'])}",
             _bytes(c.inlined_bytes), "ok" if not c.missing else f"{len(c.missing)} MISSING"]
            for c in listing.checkpoints]
    rows += [[name(os.path.dirname(u)), "", "", "", "", "unreadable"] for u in listing.unreadable]
    out.print(f"checkpoints in {listing.root}" + (f", job {jobs[0]}" if len(jobs) == 1 else ""), soft_wrap=True,
              highlight=False, markup=False)
    out.print(table("", ["checkpoint", "size", "new", "files excl. / shared", "inlined", "status"], rows))
    if listing.shared:
        by_path = {c.key: name(c.path) for c in listing.checkpoints}
        out.print(table("shared files", ["file", "size", "referenced by"],
                        [[name(f), _bytes(os.path.getsize(f)) if os.path.exists(f) else "missing",
                          ", ".join(by_path[k] for k in keys)] for f, keys in listing.shared.items()]))
    out.print(f"{len(listing.checkpoints)} checkpoint(s), {len(listing.shared)} shared file(s), "
              f"{len(listing.orphans)} orphan(s)" + (f" (cutcheck storage orphans {directory})" if listing.orphans else "")
              + (f", {len(listing.unreadable)} unreadable _metadata (so no orphans are named)" if listing.unreadable else ""),
              highlight=False, markup=False)
    write_json(json_path, listing.to_json())
    raise typer.Exit(1 if any(c.missing for c in listing.checkpoints) else 0)


@storage_app.command("orphans")
@user_errors
def storage_orphans(
    directory: Path = typer.Argument(..., help=_DIR_HELP),
    delete: bool = typer.Option(False, "--delete", help="Remove the orphans (default: only list them)."),
    json_path: Path = typer.Option(None, "--json", help="Write the orphans (and what was removed) as JSON."),
    entropy_key: str = typer.Option("_entropy_", "--entropy-key", help="Entropy marker (s3.entropy.key) in DIR, if any."),
    entropy_length: int = typer.Option(4, "--entropy-length", help="s3.entropy.length."),
) -> None:
    """Files no checkpoint in DIR references: leftovers of crashed or abandoned runs and of aborted
    checkpoints. Never a referenced file. A dry run unless --delete."""
    from model.errors import StorageError
    from reference.storage_inspect import delete_orphans, orphan_reason

    listing = _storage_listing(directory, entropy_key, entropy_length)
    if listing.unreadable:
        raise StorageError(f"{listing.unreadable[0]}: unreadable checkpoint metadata; it may reference any file, so "
                           f"no file can be called an orphan. Fix or remove it first.")
    sizes = {f: os.path.getsize(f) for f in listing.orphans if os.path.exists(f)}
    jobs, name = _namer(listing)
    reasons = {f: orphan_reason(listing, f) for f in listing.orphans}
    removed = delete_orphans(listing) if delete else []
    out.print(("removed" if delete else "orphans") + f" in {listing.root}" + (f", job {jobs[0]}" if len(jobs) == 1 else ""),
              soft_wrap=True, highlight=False, markup=False)
    out.print(table("", ["file", "size", "why"],
                    [[name(f), _bytes(sizes.get(f, 0)), reasons[f]]
                     for f in (removed if delete else listing.orphans)]))
    total = sum(sizes.get(f, 0) for f in (removed if delete else listing.orphans))
    if delete:
        out.print(f"removed {len(removed)} file(s), {_bytes(total)}; {len(listing.checkpoints)} checkpoint(s) untouched",
                  highlight=False, markup=False)
    else:
        out.print(f"{len(listing.orphans)} orphan(s), {_bytes(total)}; {len(listing.checkpoints)} checkpoint(s) "
                  f"reference every other file" + (" (--delete removes them)" if listing.orphans else ""),
                  highlight=False, markup=False)
    write_json(json_path, {"root": listing.root, "orphans": listing.orphans, "removed": removed,
                           "checkpoints": [c.key for c in listing.checkpoints]})


# ---- end storage ----


# ---- proofs: prove ----


@app.command()
@user_errors
def prove(
    names: list[str] | None = typer.Argument(None, help="Proof names (default: all); see the list printed."),
    json_path: Path | None = typer.Option(None, "--json", help="Also write the results as JSON to this file."),
) -> None:
    """Run the Z3 proofs: positives must be proved, negative controls must give their counterexample."""
    from rich.markup import escape  # proof names have brackets, which rich would read as markup

    import proofs

    with err.status("proving …"):
        results = proofs.run(names or None)
    rows = [[escape(r.name), r.expected, r.status if r.as_expected else f"{r.status} (!)", r.bound, f"{r.seconds:.2f}"]
            for r in results]
    out.print(table("proofs", ["name", "expected", "status", "bound", "seconds"], rows))
    for r in results:
        if r.counterexample and (r.expected == "counterexample" or not r.as_expected):
            out.print(f"\n[bold]{escape(r.name)}[/bold] counterexample:", highlight=False)
            out.print(r.counterexample, markup=False, highlight=False)
    bad = [r.name for r in results if not r.as_expected]
    write_json(json_path, {"ok": not bad, "results": [r.to_dict() for r in results]})
    if bad:
        err.print(f"not as expected: {', '.join(bad)}", markup=False, highlight=False)
        raise typer.Exit(1)


# ---- end proofs ----


# ---- trace: picture ----


@app.command("trace")
@user_errors
def trace_cmd(
    run_dir: Path = typer.Argument(..., help="Run directory of `cutcheck simulate --out DIR --trace`."),
    png: Path = typer.Option(..., "--png", help="Write the space-time diagram to this PNG file."),
    start: int | None = typer.Option(None, "--from", min=0, help="First scheduler step to draw."),
    end: int | None = typer.Option(None, "--to", min=0, help="Last scheduler step to draw."),
    checkpoint: int | None = typer.Option(None, "--checkpoint", help="Highlight this checkpoint's barriers and "
                                          "channel state (others faint); without --from/--to, zoom on it."),
    max_channels: int = typer.Option(48, "--max-channels", min=1, help="Refuse runs with more channels than this."),
) -> None:
    """Draw a traced run as a space-time diagram: a lane per subtask, buffers and barriers as arrows."""
    from reference.picture import build_picture, draw_picture

    picture = build_picture(run_dir, start=start, end=end, checkpoint=checkpoint, max_channels=max_channels)
    draw_picture(picture, png)
    for note in picture.notes:
        out.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    out.print(f"wrote {png}: {len(picture.lanes)} lanes, steps {picture.start}-{picture.end}, "
              f"{len(picture.data)} buffers, {len(picture.barriers)} barriers", markup=False, highlight=False)


# ---- end trace ----


def main() -> None:
    app(prog_name="cutcheck")  # the same usage lines for `cutcheck ...` and `python cli.py ...`


if __name__ == "__main__":
    sys.exit(main())
