"""Job-graph commands: validate, show (table, PNG, DOT), regions, inflight."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from cutcheck.commands.common import graph_app, out, show, user_errors, write_json
from cutcheck.model.errors import CutcheckError

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
    from cutcheck.model.errors import GraphError
    from cutcheck.model.graph import JobGraph

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


# Above this many rows a table merges rows (consecutive subtasks or regions alike) and a subtask
# listing elides the middle of a vertex's index runs; --json always holds every entry.
_MAX_ROWS = 200
_MAX_RUNS = 16


def _subtask_list(subtasks: list[Any]) -> str:
    """``src[0-1], map[0,2]``: subtasks grouped by vertex, consecutive indexes as ranges.

    A vertex with more than ``_MAX_RUNS`` runs shows its first and last runs around ``…``.
    """
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
        if len(runs) > _MAX_RUNS:
            runs = [*runs[: _MAX_RUNS - 4], "…", *runs[-3:]]
        parts.append(f"{vertex}[{','.join(runs)}]")
    return ", ".join(parts)


def _merged_rows(rows: list[tuple[Any, list[Any]]]) -> list[list[Any]]:
    """Rows ``(subtask, figures)``; above ``_MAX_ROWS``, consecutive subtasks of one vertex with
    equal figures share one row labelled with their range (``src[0-4999]``)."""
    if len(rows) <= _MAX_ROWS:
        return [[str(st), *figures] for st, figures in rows]
    merged: list[tuple[list[Any], list[Any]]] = []
    for st, figures in rows:
        if merged:
            last, last_figures = merged[-1]
            if last_figures == figures and last[-1].vertex == st.vertex and last[-1].index + 1 == st.index:
                last.append(st)
                continue
        merged.append(([st], figures))
    return _capped([[_subtask_list(sts), *figures] for sts, figures in merged])


def _capped(rows: list[list[Any]]) -> list[list[Any]]:
    """At most ``_MAX_ROWS`` rows; the last says how many more there are (``--json`` has them all)."""
    if len(rows) <= _MAX_ROWS:
        return rows
    more = len(rows) - (_MAX_ROWS - 1)
    return [*rows[: _MAX_ROWS - 1], [f"… {more} more rows (--json lists all)", *[""] * (len(rows[0]) - 1)]]


def _region_rows(regions: list[list[Any]]) -> list[list[Any]]:
    """One row per region; above ``_MAX_ROWS``, consecutive regions of the same size over the same
    vertices share one row (``0-4999 | 2 each | src[0-4999], map[0-4999]``)."""
    if len(regions) <= _MAX_ROWS:
        return [[i, len(r), _subtask_list(r)] for i, r in enumerate(regions)]
    groups: list[tuple[int, int, list[Any]]] = []  # first region, last region, their subtasks
    shape = None
    for i, region in enumerate(regions):
        this = (len(region), tuple(dict.fromkeys(st.vertex for st in region)))
        if groups and this == shape:
            first, _, members = groups[-1]
            members.extend(region)
            groups[-1] = (first, i, members)
        else:
            groups.append((i, i, list(region)))
        shape = this
    return _capped([
        [str(first) if first == last else f"{first}-{last}",
         len(members) if first == last else f"{len(members) // (last - first + 1)} each", _subtask_list(members)]
        for first, last, members in groups
    ])


def _edge_rows(job: Any) -> list[list[Any]]:
    from cutcheck.model.execution import edge_channels, edge_supports_unaligned
    from cutcheck.model.partitioning import connection_pattern

    p = {v.id: v.parallelism for v in job.vertices}
    return [
        [
            f"#{e.key} {e.source} -> {e.target}",
            e.partitioner,
            connection_pattern(e.partitioner),
            e.exchange,
            e.gate,
            "yes" if edge_supports_unaligned(job, e.key) else "no",
            edge_channels(e, p[e.source], p[e.target]),  # a formula per job edge: no channel is built
        ]
        for e in job.edges
    ]


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _dot_text(job: Any) -> str:
    from cutcheck.model.partitioning import connection_pattern

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
    from cutcheck.reference.pictures.draw import save_png

    save_png(fig, path)


@graph_app.command("validate")
@user_errors
def graph_validate(file: Path = typer.Argument(..., help="Job graph JSON file.")) -> None:
    """Check a job graph against every rule; print ok or the rule it breaks."""
    job = _load_graph(file)
    out.print(f"ok: {job.name} ({len(job.vertices)} vertices, {len(job.edges)} edges)", markup=False, highlight=False)


@graph_app.command("show")
@user_errors
def graphshow(
    file: Path = typer.Argument(..., help="Job graph JSON file."),
    png: Path | None = typer.Option(None, "--png", help="Also draw the graph into this PNG file."),
    dot: bool = typer.Option(False, "--dot", help="Print the graph in Graphviz DOT instead of tables."),
    parallelism: list[str] | None = typer.Option(None, "--parallelism", "-p", help="VERTEX=P, repeatable."),
) -> None:
    """Summarise a job graph: vertices, edges, wiring, exchanges, gates and unaligned support."""
    from cutcheck.model.execution import MAX_CHANNELS, channel_count

    job = _load_graph(file, parallelism)
    if png is not None:
        _draw_png(job, png)
    if dot:
        out.file.write(_dot_text(job))
        return
    show(
        f"{job.name}: vertices",
        ["vertex", "kind", "parallelism", "max parallelism"],
        [[v.id, v.kind, v.parallelism, job.max_parallelism(v.id)] for v in job.vertices],
    )
    show(
        f"{job.name}: edges",
        ["edge", "partitioner", "pattern", "exchange", "gate", "unaligned", "channels"],
        _edge_rows(job),
    )
    if (total := channel_count(job)) > MAX_CHANNELS:
        out.print(f"{total} channels in all: more than the engine's budget of {MAX_CHANNELS}, so simulate refuses "
                  "this job at these parallelisms.", markup=False, highlight=False, soft_wrap=True)
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
    from cutcheck.model.execution import subtasks_of
    from cutcheck.model.regions import job_pipelined_regions

    job = _load_graph(file, parallelism)
    subtasks = subtasks_of(job)
    order = {st: i for i, st in enumerate(subtasks)}
    regions = [sorted(r, key=order.__getitem__) for r in job_pipelined_regions(job)]  # per job edge
    show(
        f"{job.name}: {len(regions)} pipelined region(s) over {len(subtasks)} subtasks",
        ["region", "size", "subtasks"],
        _region_rows(regions),
    )
    write_json(json_path, {"job": job.name, "regions": [[str(st) for st in r] for r in regions]})


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
    from cutcheck.model.execution import channel_counts
    from cutcheck.model.inflight import NetworkConfig, job_worst_case_inflight_bytes

    network = NetworkConfig(
        buffer_bytes=buffer_bytes, record_bytes=record_bytes, exclusive=exclusive, floating=floating, output_pool=output_pool
    )
    counts = channel_counts(_load_graph(file, parallelism))  # per job edge: no channel is built
    bound = job_worst_case_inflight_bytes(counts, network)
    job = counts.job
    show(
        f"{job.name}: result partitions (upstream)",
        ["producer", "edge", "subpartitions", "buffers", "bytes"],
        _merged_rows([
            (st, [job.edge(e).describe(), counts.partitions[(st, e)], network.output_pool_size(counts.partitions[(st, e)]),
                  nbytes])
            for (st, e), nbytes in bound.partitions.items()
        ]),
    )
    show(
        f"{job.name}: input gates (downstream)",
        ["consumer", "gate", "channels", "buffers", "bytes"],
        _merged_rows([
            (st, [g, counts.gates[(st, g)], network.input_gate_buffers(counts.gates[(st, g)]), nbytes])
            for (st, g), nbytes in bound.gates.items()
        ]),
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
