"""validate(): read the two datasets, run the checks as one Spark job, and judge what came back.

Nothing is judged vacuously: an empty input or output, a `rid` that is not an integer and a
header-less CSV without column names are refused before Spark starts (one sentence each); a check
that examined no row is reported as skipped with the reason; a run whose run.json says it did not
finish is judged as a prefix (undelivered records are pending, duplicates and phantoms are faults).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from model.errors import LogDataError

from .report import CHECKS, Report
from .sniff import Sniff, parse_columns, sniff

PathLike = str | os.PathLike[str]


def run_complete(run: dict[str, Any]) -> bool | None:
    """run.json's ``complete`` (top level, or in ``summary`` as Flink runs write it); None if absent."""
    for holder in (run, run.get("summary")):
        if isinstance(holder, dict) and isinstance(holder.get("complete"), bool):
            return bool(holder["complete"])
    return None


def _columns(value: str | Sequence[str] | None, option: str) -> tuple[str, ...] | None:
    if value is None or isinstance(value, str):
        return parse_columns(value, option)
    return parse_columns(",".join(value), option)


def _nothing_to_check(name: str, path: Any, option: str) -> LogDataError:
    what = "records the job read" if name == "input" else "rows the job committed"
    return LogDataError(
        f"nothing to check: the {name} dataset {path} holds no rows, so exactly-once cannot be judged; "
        f"point {option} (or the run directory's {name}/) at the {what}."
    )


def _observed(obs: Any, fallback: Any) -> dict[str, int]:
    try:
        got = obs.get
    except Exception:  # the optimizer dropped the observing node (a plan it proved empty): count directly
        got = fallback()
    return {k: int(v or 0) for k, v in dict(got).items()}


def _skip_reason(check: str, columns: Sequence[str], counts: dict[str, int]) -> str:
    empty = [c for c in columns if counts.get(c, 0) == 0]
    if empty:
        cols = ", ".join(f"`{c}`" for c in empty)
        return f"no output row has a value in {cols}, so it examined 0 rows"
    cols = ", ".join(f"`{c}`" for c in columns)
    return f"no output row has values in all of {cols}, so it examined 0 rows"


def validate(
    run_dir: PathLike | None = None,
    input: PathLike | None = None,
    output: PathLike | None = None,
    master: str | None = None,
    driver_memory: str | None = None,
    sample: int = 20,
    input_columns: str | Sequence[str] | None = None,
    output_columns: str | Sequence[str] | None = None,
    prefix: bool | None = None,
) -> Report:
    """Check that output holds every input record exactly as often as expected, in order.

    ``input_columns`` / ``output_columns`` name the columns of a header-less CSV dataset, in file
    order. ``prefix``: judge the output as the prefix of an unfinished run (None: when run.json says
    ``"complete": false``). Raises LogDataError for empty, unreadable or ill-typed data or a missing
    required column, EnvironmentProblem when Java or Spark is unusable.
    """
    from . import checks, datasets, session

    started = time.perf_counter()
    src = datasets.resolve(run_dir, input, output)  # cheap checks before starting a JVM
    sniffs: dict[str, Sniff] = {}
    for ds, cols, option, path_option in (
        (src.input, input_columns, "--input-columns", "--input"),
        (src.output, output_columns, "--columns", "--output"),
    ):
        sniffs[ds.name] = sniff(ds, _columns(cols, option), option)
        if sniffs[ds.name].empty:
            raise _nothing_to_check(ds.name, ds.path, path_option)
    complete = run_complete(src.run)
    if prefix is None:
        prefix = complete is False
        reason = "run.json says \"complete\": false"
    else:
        reason = "--prefix was given"
    spark = session.get_session(master=master, driver_memory=driver_memory, app_name="cutcheck-validate")
    inp = datasets.read(spark, src.input, sniffs["input"].columns, sniffs["input"].header)
    out = datasets.read(spark, src.output, sniffs["output"].columns, sniffs["output"].header)
    plan = checks.plan(inp, out, sample, prefix=prefix)
    partitions = session.shuffle_partitions(src.input.bytes + src.output.bytes, session.cores(spark))
    conf = {**session.VALIDATION_CONF, "spark.sql.shuffle.partitions": str(partitions)}
    try:
        with session.sql_conf(spark, conf):
            rows = plan.frame.collect()
    except Exception as exc:
        reason_read = datasets.read_failure(exc)
        if reason_read is None:
            raise
        raise LogDataError(f"cannot read the logs: {reason_read}; fix or remove that file.") from None
    totals, samples = checks.summarise(rows, sample)

    def direct() -> dict[str, int]:
        return {"records_in": inp.count(), "records_out": out.count(),
                "null_in": inp.where(inp.rid.isNull()).count(), "null_out": out.where(out.rid.isNull()).count()}

    observed = _observed(plan.records, direct)
    if observed["records_in"] == 0:
        raise _nothing_to_check("input", src.input.path, "--input")
    if observed["records_out"] == 0:
        raise _nothing_to_check("output", src.output.path, "--output")
    examined = {
        "lost": observed["records_in"] - observed["null_in"],
        "duplicated": observed["records_out"] - observed["null_out"],
        "phantom": observed["records_out"] - observed["null_out"],
        "null_rid": observed["records_in"] + observed["records_out"],
    }
    skipped = dict(plan.checks_skipped)
    for check, obs in plan.examined.items():
        cols = checks.examined_columns(check, out.columns)

        def count_direct(cols: Sequence[str] = cols) -> dict[str, int]:
            from pyspark.sql import functions as F

            every = F.lit(True)
            for c in cols:
                every = every & F.col(c).isNotNull()
            row = out.agg(F.count(F.when(every, 1)).alias(checks.EXAMINED),
                          *[F.count(F.col(c)).alias(c) for c in cols]).first()
            return row.asDict() if row is not None else {}

        counts = _observed(obs, count_direct)
        examined[check] = counts.get(checks.EXAMINED, 0)
        if examined[check] == 0:
            skipped[check] = _skip_reason(check, cols, counts)
    for check in ("lost", "duplicated", "phantom"):
        if examined[check] == 0:
            side = "input" if check == "lost" else "output"
            skipped[check] = f"every {side} row has a null rid, so it examined 0 rows"
    checks_run = tuple(c for c in plan.checks_run if c not in skipped)

    def count(check: str) -> int:
        t = totals.get(check)
        return t.rows if t is not None and check not in skipped else 0

    details: dict[str, int] = {}
    for c in ("lost", "duplicated", "phantom", checks.PENDING):
        details[f"{c}_rids"] = totals[c].entries if c in totals else 0
    nulls = totals.get(checks.NULL_RID, checks.Totals())
    details.update(null_rid_input_rows=nulls.d1, null_rid_output_rows=nulls.d2)
    if "count_gaps" in checks_run:
        t = totals.get("count_gaps", checks.Totals())
        details.update(count_gap_rows=t.d1, count_missing=t.d2, count_extra_rows=t.d3)
    if "double_commits" in checks_run:
        t = totals.get("double_commits", checks.Totals())
        details.update(double_commit_extra_commits=t.d1, double_commit_rows=t.d2)
    counts = {c: count(c) for c in CHECKS}
    pending = totals[checks.PENDING].rows if checks.PENDING in totals else 0
    keep = {c: samples.get(c, []) for c in checks_run}
    if prefix:
        keep[checks.PENDING] = samples.get(checks.PENDING, [])
    return Report(
        ok=not any(counts.values()),
        lost=counts["lost"],
        duplicated=counts["duplicated"],
        phantom=counts["phantom"],
        reordered=counts["reordered"],
        count_gaps=counts["count_gaps"],
        double_commits=counts["double_commits"],
        records_in=observed["records_in"],
        records_out=observed["records_out"],
        samples=keep,
        checks_run=checks_run,
        checks_skipped={c: skipped[c] for c in CHECKS if c in skipped},
        details=details,
        input=str(src.input.path),
        output=str(src.output.path),
        input_format=src.input.format,
        output_format=src.output.format,
        run=src.run,
        seconds=round(time.perf_counter() - started, 3),
        null_rid=counts["null_rid"],
        pending=pending,
        examined={c: examined.get(c, 0) for c in CHECKS},
        prefix=prefix,
        prefix_reason=reason if prefix else "",
    )
