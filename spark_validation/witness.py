"""Witnesses: per fault class, up to ``--sample`` offending rids with their context.

The checks' single job brings back, per class, the smallest offending rids and their figures
(missing copies, extra rows, a count group's size...). One more small Spark job, run only when
something is wrong, fetches the rows behind them: the output rows of those rids (and up to
``--sample`` output rows without a rid) with every context column the output has (key, split,
offset, count, sink subtask, txn, commit_seq, checkpoint_id, attempt) and the file that holds the
row; and, when the input is a dataset, the input rows of the lost rids. A part file's name tells
the writer and its part counter (Flink's FileSink names committed files
``<prefix>-<writer>-<counter><suffix>``: the counter grows by one per rolled file, which is one per
checkpoint under the roll-on-checkpoint policy every exactly-once FileSink uses). The counter orders
the files of one writer only: every writer counts on its own, so nothing here compares counters of
different writers (the fault map orders files by modification time instead).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

FILE = "file"  # the witness column naming a row's file, relative to its dataset
ROWS_PER_RID = 8  # output rows shown per witness (a rid duplicated 1000 times shows 8)
PART = re.compile(r"^(?P<prefix>[^-/]+)-(?P<writer>.+)-(?P<part>\d+)(?:\.[^/]*)?$")
OUTPUT_CONTEXT = ("key", "count", "split", "offset", "sink_subtask", "txn", "commit_seq", "checkpoint_id",
                  "attempt", "counter", "lane")
INPUT_CONTEXT = ("source", "key", "split", "offset", "copies")
# The figures each class's fault row carries (checks._faults: rows, d1, d2, d3), named for people.
FIGURES: dict[str, tuple[str, ...]] = {
    "lost": ("missing",),
    "pending": ("undelivered",),
    "duplicated": ("extra_rows",),
    "phantom": ("rows",),
    "count_gaps": ("", "group_rows", "counts_missing", "rows_repeating_or_invalid"),
    "reordered": (),
    "double_commits": ("", "extra_commits", "group_rows"),
}


def part_of(file: str | None) -> dict[str, Any]:
    """``{"writer", "part"}`` parsed from a part file's name, or nothing when it is not one."""
    if not file:
        return {}
    m = PART.match(file.rsplit("/", 1)[-1])
    if m is None:
        return {}
    return {"writer": m.group("writer"), "part": int(m.group("part"))}


def _context(row: dict[str, Any], columns: Sequence[str]) -> dict[str, Any]:
    ctx = {c: row[c] for c in columns if row.get(c) is not None}
    if row.get(FILE):
        ctx[FILE] = row[FILE]
        ctx.update(part_of(row[FILE]))
    return ctx


def _rows_by_rid(df: DataFrame, rids: Sequence[int], nulls: int, columns: Sequence[str]) -> dict[int | None, list[dict]]:
    """Up to ROWS_PER_RID rows per rid in ``rids`` (and ``nulls`` rows without a rid), in commit order."""
    cond = F.col("rid").isin(list(rids)) if rids else F.lit(False)
    if nulls:
        cond = cond | F.col("rid").isNull()
    order = [F.col(c).asc_nulls_last() for c in ("commit_seq", "checkpoint_id", FILE, "offset") if c in df.columns]
    w = Window.partitionBy("rid").orderBy(*order) if order else Window.partitionBy("rid").orderBy("rid")
    keep = ["rid", *[c for c in (*columns, FILE) if c in df.columns]]
    picked = df.where(cond).select(*keep, F.row_number().over(w).alias("_n"))
    limit = F.when(F.col("rid").isNull(), F.lit(max(nulls, 1))).otherwise(F.lit(ROWS_PER_RID))
    result: dict[int | None, list[dict]] = {}
    for r in picked.where(F.col("_n") <= limit).orderBy("rid", "_n").collect():
        d = r.asDict()
        result.setdefault(d["rid"], []).append(_context(d, columns))
    return result


def collect(
    out: DataFrame,
    inp: DataFrame | None,
    faults: dict[str, list[tuple[int, ...]]],
    null_rows: int,
    sample: int,
    ranges: str = "",
) -> dict[str, list[dict[str, Any]]]:
    """Per fault class, its witnesses: the rid, its figures and the rows behind it.

    ``out`` carries the output's file column (:data:`FILE`); ``inp`` is None when the input is
    given as id ranges (``ranges`` describes them)."""
    rids = sorted({f[0] for rows in faults.values() for f in rows})
    if not rids and not null_rows:
        return {}
    nulls = min(null_rows, sample)
    out_rows = _rows_by_rid(out, rids, nulls, OUTPUT_CONTEXT)
    lost = sorted({f[0] for c in ("lost", "pending") for f in faults.get(c, [])})
    in_rows = _rows_by_rid(inp, lost, 0, INPUT_CONTEXT) if inp is not None and lost else {}
    result: dict[str, list[dict[str, Any]]] = {}
    for check, rows in faults.items():
        entries = []
        for rid, *figures in rows:
            w: dict[str, Any] = {"rid": rid}
            for name, value in zip(FIGURES.get(check, ()), figures, strict=False):
                if name:
                    w[name] = value
            if check in ("lost", "pending"):
                if inp is None:
                    w["input_range"] = ranges
                elif in_rows.get(rid):
                    w["input"] = in_rows[rid][0]
            if check in ("count_gaps", "double_commits") and out_rows.get(rid):
                first = out_rows[rid][0]
                for c in ("key", "counter", "sink_subtask", "txn"):
                    if c in first:
                        w[c] = first[c]
            w["rows"] = out_rows.get(rid, [])
            entries.append(w)
        if entries:
            result[check] = entries
    if nulls:
        result["null_rid"] = [{"rid": None, "rows": out_rows.get(None, [])}]
    return result


def _row_text(row: dict[str, Any]) -> str:
    where = row.get(FILE, "")
    if "part" in row:
        where += f" (part {row['part']})"
    fields = [f"{c} {row[c]}" for c in ("key", "split", "offset", "count", "sink_subtask", "commit_seq",
                                         "checkpoint_id", "txn") if c in row and not (c == "txn" and c in where)]
    return ", ".join(fields) + (f" @ {where}" if where else "")


def describe(check: str, witness: dict[str, Any]) -> str:
    """One line per witness, for the table."""
    head = [f"{k.replace('_', ' ')} {v}" for k, v in witness.items() if k not in ("rid", "rows", "input", "input_range")
            and k in (*FIGURES.get(check, ()), "key", "counter")]
    if "input" in witness:
        head.append("input: " + ", ".join(f"{k} {v}" for k, v in witness["input"].items() if k != FILE))
    if "input_range" in witness:
        head.append(f"in input range {witness['input_range']}")
    rows = witness.get("rows", [])
    if rows:
        head.append("at " + "; ".join(_row_text(r) for r in rows[:3]) + (f"; +{len(rows) - 3} more" if len(rows) > 3 else ""))
    elif check in ("lost", "pending"):
        head.append("no output row")
    return "; ".join(head)
