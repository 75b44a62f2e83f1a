"""``validate --png``: a picture of where the faults sit.

Top: along the input's ids (the source sequence, in order), how many rows were lost (or are
pending), duplicated or invented per bin of ids: a lost checkpoint shows as a block, a replay as a
band of duplicates. Bottom: the output rows of duplicated and phantom rids at their place in the
output: commit order (``commit_seq``, else ``checkpoint_id``, else the place of the row's file in
modification-time order, since a FileSink part file is closed when its checkpoint commits) against
key; marker area grows with the rows at one place; the witnesses of count gaps, reorderings and
double commits are drawn at their rows.

Every figure is exact (Spark aggregates all faults, not the samples); it costs one more pass over
both datasets, so it runs only when ``--png`` is given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from . import checks
from .witness import FILE

BINS = 120
COLOURS = {"lost": "#d62728", "pending": "#f4a3a3", "duplicated": "#1f77b4", "phantom": "#9467bd",
           "count_gaps": "#2ca02c", "reordered": "#ff7f0e", "double_commits": "#8c564b"}
PLACED = ("duplicated", "phantom")
MAX_POINTS = 4000


@dataclass(slots=True)
class FaultMap:
    lo: int = 0
    hi: int = 1
    width: int = 1  # ids per bin
    bins: dict[str, list[int]] = field(default_factory=dict)  # per class: rows per id bin
    outside: dict[str, int] = field(default_factory=dict)  # rows whose rid is outside the input's ids
    points: list[tuple[str, float, float, int]] = field(default_factory=list)  # (class, x, y, rows)
    x_label: str = "commit order"
    y_label: str = "key"
    files: dict[str, int] = field(default_factory=dict)  # file -> its place in commit order


FILE_ORDER = "part files by modification time (a part file is closed when its checkpoint commits)"


def file_order(ds: Any) -> dict[str, int]:
    """The dataset's files (relative, as witnesses name them) numbered by (modification time, name)."""
    base = ds.path if ds.path.is_dir() else ds.path.parent
    stamped = sorted((f.stat().st_mtime_ns, f.relative_to(base).as_posix()) for f in ds.files)
    return {name: i for i, (_, name) in enumerate(stamped)}


def _commit_order(out: DataFrame, files: dict[str, int]) -> tuple[Any, str]:
    for c, label in (("commit_seq", "commit_seq"), ("checkpoint_id", "checkpoint id")):
        if c in out.columns:
            return F.col(c).cast("double"), label
    pairs = [x for name, i in files.items() for x in (F.lit(name), F.lit(float(i)))]
    return F.create_map(*pairs)[F.col(FILE)] if pairs else F.lit(None).cast("double"), FILE_ORDER


def compute(inp: DataFrame, out: DataFrame, ranges: list[tuple[int, int]], prefix: bool,
            files: dict[str, int]) -> FaultMap:
    """The exact fault counts per id bin and per output place. ``out`` carries the FILE column;
    ``files`` numbers its files in commit order (:func:`file_order`)."""
    fm = FaultMap(files=files)
    if ranges:
        fm.lo, fm.hi = ranges[0][0], ranges[-1][1]
    else:
        row = inp.agg(F.min("rid").alias("lo"), F.max("rid").alias("hi")).first()
        fm.lo, fm.hi = int(row["lo"] or 0), int(row["hi"] or 0) + 1
    width = fm.width = max(1, -(-(fm.hi - fm.lo) // BINS))
    faults = checks.rid_branch(inp, out.drop(FILE), lost=checks.PENDING if prefix else "lost")
    bin_ = F.floor((F.col("rid") - F.lit(fm.lo)) / F.lit(width)).cast("long")
    inside = (F.col("rid") >= fm.lo) & (F.col("rid") < fm.hi)
    per_bin = (faults.where(F.col("check") != checks.NULL_RID)
               .select("check", "rows", F.when(inside, bin_).otherwise(F.lit(-1)).alias("bin"))
               .groupBy("check", "bin").agg(F.sum("rows").alias("rows")).collect())
    nbins = -(-(fm.hi - fm.lo) // width)
    for r in per_bin:
        if r["bin"] < 0:
            fm.outside[r["check"]] = fm.outside.get(r["check"], 0) + int(r["rows"])
        else:
            fm.bins.setdefault(r["check"], [0] * nbins)[int(r["bin"])] += int(r["rows"])
    x, fm.x_label = _commit_order(out, files)
    placed = faults.where(F.col("check").isin(*PLACED)).select("rid", "check")
    y = F.col("key").cast("double") if "key" in out.columns else F.lit(0.0)
    fm.y_label = "key" if "key" in out.columns else "(no key column)"
    rows = (out.join(placed, "rid").select("check", x.alias("x"), y.alias("y"))
            .groupBy("check", "x", "y").agg(F.count(F.lit(1)).alias("n"))
            .orderBy(F.col("n").desc()).limit(MAX_POINTS).collect())
    fm.points = [(r["check"], r["x"], r["y"], int(r["n"])) for r in rows]
    return fm


def draw(fm: FaultMap, report: Any, path: str | Path) -> None:
    """Draw ``fm`` with the report's exact totals and its witnesses; write it with save_png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from cutcheck.reference.pictures.draw import save_png

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(14, 8.5), dpi=110, gridspec_kw={"height_ratios": [1, 1.4]})
    fig.suptitle(f"validate: {report.verdict().split(':')[0]} — {report.records_in} records in, "
                 f"{report.records_out} rows out", fontsize=12, x=0.01, ha="left")
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    width = fm.width
    handles: list[Any] = []
    bottoms: list[float] | None = None
    for check in ("lost", "pending", "duplicated", "phantom"):
        counts = fm.bins.get(check)
        total = report.pending if check == "pending" else report.count(check)
        if not counts and not total:
            continue
        counts = counts or []
        xs = [fm.lo + i * width for i in range(len(counts))]
        base = (bottoms or [0.0] * len(counts))[: len(counts)]
        base += [0.0] * (len(counts) - len(base))
        label = f"{check}: {total} rows" + (f"\n({fm.outside[check]} outside the input's ids)" if fm.outside.get(check) else "")
        top.bar(xs, counts, width=width, bottom=base, align="edge", color=COLOURS[check], linewidth=0)
        bottoms = [b + c for b, c in zip(base, counts, strict=True)]
        handles.append(Patch(color=COLOURS[check], label=label))
    top.set_xlim(fm.lo, fm.hi)
    top.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{int(v):,}"))
    top.set_xlabel(f"input id (rid), bins of {width} ids")
    top.set_ylabel("faulty rows per bin")
    top.set_title("Where in the input: rows lost, pending, duplicated or invented, per range of ids", fontsize=10, loc="left")
    if handles:
        top.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    else:
        top.text(0.5, 0.5, "no lost, duplicated or phantom row", ha="center", va="center", transform=top.transAxes, color="#555555")
    biggest = max((n for *_, n in fm.points), default=1)
    top.yaxis.set_major_locator(MaxNLocator(integer=True))
    for check, marker in zip(PLACED, ("o", "s"), strict=True):
        pts = [(x, y, n) for c, x, y, n in fm.points if c == check and x is not None]
        if pts:
            bottom.scatter([p[0] for p in pts], [p[1] for p in pts], s=[20 + 150 * p[2] / biggest for p in pts],
                           marker=marker, facecolors="none", edgecolors=COLOURS[check], linewidths=1.4,
                           label=f"{check}: {report.count(check)} rows")
    for check in ("count_gaps", "reordered", "double_commits"):
        xs, ys = _witness_places(report, check, fm)
        if xs:
            bottom.scatter(xs, ys, marker="x", s=40, color=COLOURS[check],
                           label=f"{check}: {report.count(check)}\n(witnesses shown)")
    bottom.set_xlabel(f"commit order: {fm.x_label}")
    if fm.x_label == FILE_ORDER:
        bottom.xaxis.set_major_locator(MaxNLocator(integer=True))
        if fm.files:  # every committed file, so that the faults are seen among all commits
            bottom.set_xlim(-0.5, len(fm.files) - 0.5)
    bottom.set_ylabel(fm.y_label)
    bottom.set_title("Where in the output: rows of duplicated and phantom rids by commit and key "
                     "(area: rows at that place)", fontsize=10, loc="left")
    if bottom.get_legend_handles_labels()[0]:
        bottom.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False, markerscale=0.7)
    else:
        bottom.text(0.5, 0.5, "no duplicated or phantom row to place in the output", ha="center", va="center",
                    transform=bottom.transAxes, color="#555555")
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    try:
        save_png(fig, path)
    finally:
        plt.close(fig)


def _witness_places(report: Any, check: str, fm: FaultMap) -> tuple[list[float], list[float]]:
    xs: list[float] = []
    ys: list[float] = []
    for w in report.witnesses.get(check, []):
        for row in w.get("rows", [])[:1]:
            x = row.get("commit_seq", row.get("checkpoint_id", fm.files.get(row.get(FILE, ""))))
            if x is not None and row.get("key") is not None:
                xs.append(float(x))
                ys.append(float(row["key"]))
    return xs, ys
