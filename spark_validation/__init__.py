"""Exactly-once validation of recovery logs with PySpark.

``validate(run_dir=None, input=None, output=None, master=None, driver_memory=None, sample=20)``
reads a cutcheck run directory (or any input/output datasets following model/logschema.py, as
Parquet, CSV or JSON lines) and returns a :class:`Report`. See :mod:`spark_validation.checks` for
how all the checks run as one Spark job.
"""

from __future__ import annotations

import os
import time

from model.errors import LogDataError

from .report import CHECKS, MEANING, Report

__all__ = ["CHECKS", "MEANING", "Report", "validate", "synthesize", "build_session", "get_session"]


def validate(
    run_dir: str | os.PathLike[str] | None = None,
    input: str | os.PathLike[str] | None = None,
    output: str | os.PathLike[str] | None = None,
    master: str | None = None,
    driver_memory: str | None = None,
    sample: int = 20,
) -> Report:
    """Check that output holds every input record exactly as often as expected, in order.

    Raises LogDataError for unreadable data or a missing required column, EnvironmentProblem
    when Java or Spark is unusable.
    """
    from . import checks, datasets, session

    started = time.perf_counter()
    src = datasets.resolve(run_dir, input, output)  # cheap checks before starting a JVM
    spark = session.get_session(master=master, driver_memory=driver_memory, app_name="cutcheck-validate")
    inp = datasets.read(spark, src.input)
    out = datasets.read(spark, src.output)
    plan = checks.plan(inp, out, sample)
    partitions = session.shuffle_partitions(src.input.bytes + src.output.bytes, session.cores(spark))
    conf = {**session.VALIDATION_CONF, "spark.sql.shuffle.partitions": str(partitions)}
    try:
        with session.sql_conf(spark, conf):
            rows = plan.frame.collect()
    except Exception as exc:
        reason = datasets.read_failure(exc)
        if reason is None:
            raise
        raise LogDataError(f"cannot read the logs: {reason}; fix or remove that file.") from None
    totals, samples = checks.summarise(rows, sample)
    try:
        observed = plan.records.get
    except Exception:
        # Spark drops the observing node when the optimizer proves the input empty (both datasets
        # without files): count directly, which is free on such plans.
        observed = {"records_in": inp.count(), "records_out": out.count()}
    bad_input = totals.get(checks.NULL_RID)
    if bad_input is not None:
        raise LogDataError(
            f"input dataset {src.input.path} has {bad_input.rows} rows without a rid (null or unparseable); "
            "every input record needs one."
        )

    def count(check: str) -> int:
        t = totals.get(check)
        return t.rows if t is not None else 0

    details: dict[str, int] = {}
    for c in checks.RID_CHECKS:
        details[f"{c}_rids"] = totals[c].entries if c in totals else 0
    if "count_gaps" in plan.checks_run:
        t = totals.get("count_gaps", checks.Totals())
        details.update(count_gap_rows=t.d1, count_missing=t.d2, count_extra_rows=t.d3)
    if "double_commits" in plan.checks_run:
        t = totals.get("double_commits", checks.Totals())
        details.update(double_commit_extra_commits=t.d1, double_commit_rows=t.d2)
    counts = {c: count(c) for c in CHECKS}
    return Report(
        ok=not any(counts.values()),
        lost=counts["lost"],
        duplicated=counts["duplicated"],
        phantom=counts["phantom"],
        reordered=counts["reordered"],
        count_gaps=counts["count_gaps"],
        double_commits=counts["double_commits"],
        records_in=int(observed.get("records_in") or 0),
        records_out=int(observed.get("records_out") or 0),
        samples={c: samples.get(c, []) for c in plan.checks_run},
        checks_run=plan.checks_run,
        checks_skipped=plan.checks_skipped,
        details=details,
        input=str(src.input.path),
        output=str(src.output.path),
        input_format=src.input.format,
        output_format=src.output.format,
        run=src.run,
        seconds=round(time.perf_counter() - started, 3),
    )


def __getattr__(name: str):  # lazy: importing the package must not import pyspark
    if name in ("build_session", "get_session"):
        from . import session

        return getattr(session, name)
    if name == "synthesize":
        from .synth import synthesize

        return synthesize
    raise AttributeError(name)
