"""The exactly-once checks over recovery logs, as one Spark job.

How the single pass works
-------------------------
Every check becomes a *branch* that turns the logs into "fault rows" of one shape
``(check, rid, rows, d1, d2, d3)``; the branches are unioned and ranked, and
a single ``collect()`` of at most ``7 × sample`` rows brings back every count and every sample.
Nothing is cached and nothing is computed twice: each branch reads only the columns it needs
(Parquet column pruning) and shuffles once.

* **rid branch** (lost, duplicated, phantom): input and output are *tagged and unioned* into
  ``(rid, x)`` where an input row carries ``x = copies << 32`` and an output row ``x = 1``; one
  aggregation by rid gives ``s = sum(x)`` and ``n = count(*)``, from which the expected copies
  ``E = s >> 32``, the output rows ``A = s & 0xFFFFFFFF`` and the input rows ``I = n - A`` follow
  exactly (for fewer than 2^31 copies and 2^32 output rows per rid). Packing the tag into one long
  keeps the shuffled rows two columns wide. ``I = 0`` is a phantom (``A`` rows), ``A < E`` a loss
  (``E - A`` rows), ``A > E`` a duplicate (``A - E`` rows).
* **count branch**: output rows are hash-partitioned once by ``(key, counter)``; a first
  aggregation by ``(key, counter, count)`` gives each count's multiplicity and a second by
  ``(key, counter)`` — on the same partitioning, so without another shuffle — gives the rows
  ``n``, the distinct counts ``>= 1`` ``d`` and the highest count ``mx``. A group is exactly
  ``{1..n}`` iff ``n = d = mx``; otherwise ``mx - d`` counts are missing and ``n - d`` rows repeat
  a count or hold an invalid one.
* **order branch**: one window per ``(key, split, lane)`` ordered by ``commit_seq`` with the frame
  ``RANGE BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING``: the highest offset of the strictly
  earlier commits. Rows of one commit share ``commit_seq``, so they never see each other and
  may be in any order; a row whose offset is lower than that maximum is reordered.
* **txn branch**: ``(sink_subtask, txn, commit_seq)`` collapses map-side to one row per commit,
  then ``(sink_subtask, txn)`` pairs with more than one distinct ``commit_seq`` are double commits.

Healthy rids are dropped right after the rid aggregation; the input and output row counts are
*observed* on the way (``DataFrame.observe``: metrics accumulated by the same tasks, no extra
pass). The fault rows of all branches are unioned; a window per check, ordered by rid, numbers
them and sums their counts over the whole check, and rows numbered beyond the sample size are
dropped before ``collect()``. (Fault rows are few in healthy logs; when nearly everything is
faulty, that window sorts them in one task per check.)

Rows lacking a column a check groups or orders by (a null key, split, offset, commit_seq, lane
or counter) are left out of that check; a null ``count`` is a bad count. How many rows each output
check examined is observed in its branch (``Plan.examined``), so that a check that examined none
is reported as skipped, never as holding. Rows without a rid are the ``null_rid`` fault.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, Observation, Window
from pyspark.sql import functions as F

from cutcheck.model import logschema

from .report import CHECKS

RID_CHECKS = ("lost", "duplicated", "phantom", "null_rid")
NULL_RID = "null_rid"  # rows (input or output) without a rid: a fault class of their own
PENDING = "pending"  # the rid branch's "lost" when the output is the prefix of an unfinished run
EXAMINED = "examined"
_LOW32 = 0xFFFFFFFF


@dataclass(frozen=True, slots=True)
class Plan:
    checks_run: tuple[str, ...]
    checks_skipped: dict[str, str]
    frame: DataFrame  # the fault rows, ranked and capped; collect() it once
    records: Observation  # records_in / records_out / null_in / null_out, filled in by that same collect()
    # per output check: rows it examined (EXAMINED) and, per column it needs, rows with a value
    examined: dict[str, Observation] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Totals:
    """What one check's rows of the collected frame add up to."""

    rows: int = 0
    entries: int = 0
    d1: int = 0
    d2: int = 0
    d3: int = 0


def _lit(v: int) -> Column:
    return F.lit(v).cast("long")


def _faults(check: Column | str, rid: Column, rows: Column, *details: Column) -> list[Column]:
    d = list(details) + [_lit(0)] * (3 - len(details))
    return [
        (F.lit(check) if isinstance(check, str) else check).alias("check"),
        rid.cast("long").alias("rid"),
        rows.cast("long").alias("rows"),
        d[0].cast("long").alias("d1"),
        d[1].cast("long").alias("d2"),
        d[2].cast("long").alias("d3"),
    ]


def rid_branch(
    inp: DataFrame, out: DataFrame, records: Observation | None = None, lost: str = "lost"
) -> DataFrame:
    """lost / duplicated / phantom / null_rid, by one aggregation of the tagged union of input and output.

    ``records``, when given, observes the input and output row counts (and those without a rid) on
    the way (same pass). ``lost`` names what an undelivered copy is: "lost", or "pending" when the
    output is the prefix of a run that has not finished.

    Rows without a rid all fall into the group of the null rid: its input rows are ``I`` and its
    output rows ``A`` exactly as for any rid, and they are reported together as ``null_rid``
    (``d1`` input rows, ``d2`` output rows), never as lost or phantom.
    """
    copies = (
        F.greatest(F.coalesce(F.col("copies"), F.lit(1)), F.lit(0)) if "copies" in inp.columns else F.lit(1)
    )
    tagged = inp.select("rid", F.shiftleft(copies.cast("long"), 32).alias("x")).unionByName(
        out.select("rid", _lit(1).alias("x"))
    )
    if records is not None:  # an output row is the only one tagged 1 (copies << 32 never is)
        is_out, no_rid = F.col("x") == 1, F.col("rid").isNull()
        tagged = tagged.observe(
            records,
            F.count(F.when(~is_out, 1)).alias("records_in"),
            F.count(F.when(is_out, 1)).alias("records_out"),
            F.count(F.when(~is_out & no_rid, 1)).alias("null_in"),
            F.count(F.when(is_out & no_rid, 1)).alias("null_out"),
        )
    per_rid = tagged.groupBy("rid").agg(F.sum("x").alias("s"), F.count(F.lit(1)).alias("n"))
    expected = F.shiftright(F.col("s"), 32)
    found = F.col("s").bitwiseAND(F.lit(_LOW32))
    in_rows = F.col("n") - found
    null = F.col("rid").isNull()
    check = (
        F.when(null, F.lit(NULL_RID))
        .when(in_rows == 0, F.lit("phantom"))
        .when(found < expected, F.lit(lost))
        .when(found > expected, F.lit("duplicated"))
    )
    rows = F.when(null, F.col("n")).when(in_rows == 0, found).otherwise(F.abs(found - expected))
    details = (F.when(null, in_rows).otherwise(0), F.when(null, found).otherwise(0))
    return per_rid.select(*_faults(check, F.col("rid"), rows, *details)).where(F.col("check").isNotNull())


def _examined(out: DataFrame, check: str, columns: Sequence[str]) -> tuple[DataFrame, Observation]:
    """``out`` observed: how many rows have each of ``columns``, and all of them (the rows ``check``
    examines), counted by the same tasks that read them for the check."""
    obs = Observation(f"examined_{check}")
    every = F.lit(True)
    for c in columns:
        every = every & F.col(c).isNotNull()
    metrics = [F.count(F.col(c)).alias(c) for c in columns]
    return out.observe(obs, F.count(F.when(every, 1)).alias(EXAMINED), *metrics), obs


def count_branch(out: DataFrame) -> DataFrame:
    """(counter, key) groups whose counts are not exactly 1..n."""
    has_counter = "counter" in out.columns
    group = ["key", "counter"] if has_counter else ["key"]
    rows = out.where(F.col("key").isNotNull())
    if has_counter:
        rows = rows.where(F.col("counter").isNotNull())
    # One shuffle by the group: both aggregations below find their input already clustered.
    per_count = (
        rows.select(*group, "count", "rid")
        .repartition(*group)
        .groupBy(*group, "count")
        .agg(F.count(F.lit(1)).alias("m"), F.max("rid").alias("r"))
    )
    # Sample a rid where the run breaks: a repeated or invalid count first, else the highest count.
    invalid = (F.col("m") > 1) | F.col("count").isNull() | (F.col("count") < 1)
    rank = F.when(invalid, F.lit(2**62)).otherwise(F.col("count"))
    per_group = per_count.groupBy(*group).agg(
        F.sum("m").alias("n"),
        F.count(F.when(F.col("count") >= 1, 1)).alias("d"),
        F.max("count").alias("mx"),
        F.max_by("r", rank).alias("sample"),
    )
    missing = F.greatest(F.coalesce(F.col("mx"), _lit(0)) - F.col("d"), _lit(0))
    extra = F.col("n") - F.col("d")
    bad = per_group.where((missing > 0) | (extra > 0))
    return bad.select(*_faults("count_gaps", F.col("sample"), _lit(1), F.col("n"), missing, extra))


def order_branch(out: DataFrame) -> DataFrame:
    """Rows whose offset is below the highest offset of an earlier commit of their (key, split, lane)."""
    has_lane = "lane" in out.columns
    # key first: the sort behind the window compares a long prefix before any string.
    group = ["key", "split", "lane"] if has_lane else ["key", "split"]
    rows = out
    for c in ["key", "split", "offset", "commit_seq"] + (["lane"] if has_lane else []):
        rows = rows.where(F.col(c).isNotNull())
    earlier = Window.partitionBy(*group).orderBy("commit_seq").rangeBetween(Window.unboundedPreceding, -1)
    ranked = rows.select("rid", "offset", F.max("offset").over(earlier).alias("prev"))
    return ranked.where(F.col("offset") < F.col("prev")).select(*_faults("reordered", F.col("rid"), _lit(1)))


def txn_branch(out: DataFrame) -> DataFrame:
    """(sink_subtask, txn) pairs that appear under more than one distinct commit_seq."""
    rows = out.where(F.col("txn").isNotNull() & F.col("commit_seq").isNotNull())
    per_commit = rows.groupBy("sink_subtask", "txn", "commit_seq").agg(
        F.count(F.lit(1)).alias("m"), F.max("rid").alias("r")
    )
    per_txn = per_commit.groupBy("sink_subtask", "txn").agg(
        F.count(F.lit(1)).alias("commits"),
        F.sum("m").alias("n"),
        F.max_by("r", "commit_seq").alias("sample"),  # a rid of the latest commit: the repeat
    )
    bad = per_txn.where(F.col("commits") > 1)
    return bad.select(*_faults("double_commits", F.col("sample"), _lit(1), F.col("commits") - 1, F.col("n")))


def _missing(columns: Sequence[str], needed: Sequence[str]) -> list[str]:
    return [c for c in needed if c not in columns]


def examined_columns(check: str, columns: Sequence[str]) -> tuple[str, ...]:
    """The output columns a row needs a value in for ``check`` to examine it."""
    needed = {
        "count_gaps": ("key", "counter") if "counter" in columns else ("key",),
        "reordered": ("key", "split", "offset", "commit_seq") + (("lane",) if "lane" in columns else ()),
        "double_commits": ("txn", "commit_seq"),
    }
    return needed[check]


def plan(inp: DataFrame, out: DataFrame, sample: int, prefix: bool = False) -> Plan:
    """Build (without running) the one job that computes every check that the columns allow.

    ``prefix``: the output is the prefix of an unfinished run; undelivered copies are "pending".
    """
    needs = {name: logschema.CHECK_COLUMNS[name] for name in ("count_gaps", "reordered", "double_commits")}
    builders = {"count_gaps": count_branch, "reordered": order_branch, "double_commits": txn_branch}
    records = Observation("records")
    branches = [rid_branch(inp, out, records, lost=PENDING if prefix else "lost")]
    run: list[str] = list(RID_CHECKS)
    skipped: dict[str, str] = {}
    examined: dict[str, Observation] = {}
    for check in CHECKS:
        if check in RID_CHECKS:
            continue
        missing = _missing(out.columns, needs[check])
        if missing:
            cols = ", ".join(f"`{c}`" for c in missing)
            skipped[check] = f"output has no {cols} column" + ("s" if len(missing) > 1 else "")
            continue
        run.append(check)
        observed, examined[check] = _examined(out, check, examined_columns(check, out.columns))
        branches.append(builders[check](observed))
    # One row of check NULL keeps the final stage non-empty: AQE replaces an empty stage's plan by
    # an empty relation, and the observed record counts would go with it.
    spark = inp.sparkSession
    union = spark.range(1).select(*_faults(F.lit(None).cast("string"), _lit(None), _lit(0)))
    for b in branches:
        union = union.unionByName(b)
    per_check = Window.partitionBy("check")
    ordered = per_check.orderBy(F.col("rid").asc_nulls_last())
    whole = ordered.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    ranked = union.select(
        "check",
        "rid",
        *[F.col(c).alias(f"r_{c}") for c in ("rows", "d1", "d2", "d3")],  # this fault row's own figures
        F.row_number().over(ordered).alias("rn"),
        F.count(F.lit(1)).over(whole).alias("entries"),
        *[F.sum(c).over(whole).alias(f"t_{c}") for c in ("rows", "d1", "d2", "d3")],
    )
    return Plan(tuple(run), skipped, ranked.where(F.col("rn") <= max(1, sample)), records, examined)


def summarise(rows: Sequence, sample: int) -> tuple[dict[str, Totals], dict[str, list[int]]]:
    """Fold the collected rows into totals and (distinct, smallest-first) samples per check."""
    totals: dict[str, Totals] = {}
    samples: dict[str, set[int]] = {}
    for r in rows:
        check = r["check"]
        if check is None:  # the sentinel row
            continue
        if check not in totals:
            totals[check] = Totals(*(int(r[c] or 0) for c in ("t_rows", "entries", "t_d1", "t_d2", "t_d3")))
        if r["rid"] is not None:
            samples.setdefault(check, set()).add(int(r["rid"]))
    return totals, {k: sorted(v)[:sample] for k, v in samples.items()}


def fault_rows(rows: Sequence, sample: int) -> dict[str, list[tuple[int, int, int, int, int]]]:
    """Per check, the collected fault rows ``(rid, rows, d1, d2, d3)``, smallest rid first, at most ``sample``."""
    result: dict[str, dict[int, tuple[int, int, int, int, int]]] = {}
    for r in rows:
        if r["check"] is None or r["rid"] is None:
            continue
        figures = tuple(int(r[f"r_{c}"] or 0) for c in ("rows", "d1", "d2", "d3"))
        result.setdefault(r["check"], {}).setdefault(int(r["rid"]), (int(r["rid"]), *figures))  # type: ignore[arg-type]
    return {k: [v[rid] for rid in sorted(v)[:sample]] for k, v in result.items()}
