"""Benchmark: spark_validation.validate against the same checks in DuckDB, on the same Parquet files.

For each size (1M, 10M, 20M records; 100M with --deep) it makes synthetic logs with planted faults
once (cached under --dir, reused when the parameters match), warms the Spark session on the smallest
size (start-up excluded), then times ``validate`` and the DuckDB queries in the same run. It prints
ONE JSON LINE PER FIGURE:

  validate_seconds (engine spark|duckdb), spark_over_duckdb, records_per_second (engine),
  scaling_10x (engine; time(10N)/time(N)), driver_peak_rss_gb (the Spark JVM, sampled),
  counts_agree (both engines found exactly the planted faults), load_average (1-minute, at start).

Targets (measured and reported, not asserted): spark within 2x DuckDB at 20M, scaling_10x <= 12,
100M within 15 minutes with the driver under 8 GB.

    python benchmarks/bench_spark.py [--deep] [--sizes 1000000,10000000] [--dir /tmp/cutcheck-bench]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PARAMS = dict(keys=1000, splits=8, loss_rate=0.001, dup_rate=0.001, reorder_rate=0.001, phantoms=100,
              count_gaps=10, double_commits=5, seed=1)  # fmt: skip
CHECKS = ("lost", "duplicated", "phantom", "count_gaps", "reordered", "double_commits")


def emit(figure: str, **fields: Any) -> None:
    print(json.dumps({"figure": figure, **fields}), flush=True)


def ensure_logs(root: Path, records: int) -> dict[str, Any]:
    from cutcheck.spark_validation import synthesize

    path = root / f"r{records}"
    planted_file = path / "planted.json"
    if planted_file.exists():
        run = json.loads((path / "run.json").read_text())
        want = dict(PARAMS, records=records, format="parquet")
        if all(run["params"].get(k) == v for k, v in want.items()):
            return json.loads(planted_file.read_text())
    synthesize(path, records, force=True, **PARAMS)
    return json.loads(planted_file.read_text())


def duckdb_checks(inp: Path, out: Path, sample: int = 20, memory_limit: str = "6GB") -> dict[str, int]:
    """The same six checks, with the same semantics, as DuckDB SQL over the same Parquet files."""
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET threads = {os.cpu_count() or 1}")
    # Same budget as the Spark driver, spilling to disk beyond it: DuckDB's default (80% of RAM)
    # next to a 6 GB JVM got the whole process killed by the OOM killer at 100M records.
    con.execute(f"SET memory_limit = '{memory_limit}'")
    con.execute(f"SET temp_directory = '{inp.parent / '.duckdb-tmp'}'")
    con.execute("SET preserve_insertion_order = false")
    src_in = f"read_parquet('{inp}/**/*.parquet')"
    src_out = f"read_parquet('{out}/**/*.parquet')"
    in_cols = {r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {src_in}").fetchall()}
    copies = "greatest(coalesce(copies, 1), 0)" if "copies" in in_cols else "1"
    result: dict[str, int] = {}
    rows = con.execute(f"""
        WITH u AS (SELECT rid, {copies} AS e, 1 AS i, 0 AS a FROM {src_in}
                   UNION ALL SELECT rid, 0, 0, 1 FROM {src_out}),
        per AS (SELECT rid, sum(e) AS e, sum(i) AS i, sum(a) AS a FROM u GROUP BY rid),
        cls AS (SELECT rid, i, a,
                       CASE WHEN i = 0 THEN 'phantom' WHEN a < e THEN 'lost' WHEN a > e THEN 'duplicated' END AS chk,
                       CASE WHEN i = 0 THEN a ELSE abs(a - e) END AS n FROM per)
        SELECT chk, sum(n), sum(i), sum(a), min(rid, {sample}) FROM cls GROUP BY chk""").fetchall()
    for chk, n, _i, _a, _s in rows:
        if chk is not None:
            result[chk] = int(n)
    result["count_gaps"] = con.execute(f"""
        WITH o AS (SELECT key, counter, count, rid FROM {src_out} WHERE key IS NOT NULL AND counter IS NOT NULL),
        c1 AS (SELECT key, counter, count, count(*) AS m, max(rid) AS r FROM o GROUP BY ALL),
        c2 AS (SELECT key, counter, sum(m) AS n, count(*) FILTER (WHERE count >= 1) AS d, max(count) AS mx,
                      arg_max(r, CASE WHEN m > 1 OR count IS NULL OR count < 1 THEN 4611686018427387904
                                      ELSE count END) AS s
               FROM c1 GROUP BY ALL),
        bad AS (SELECT * FROM c2 WHERE greatest(coalesce(mx, 0) - d, 0) > 0 OR n - d > 0)
        SELECT count(*), sum(n), min(s, {sample}) FROM bad""").fetchone()[0]
    result["reordered"] = con.execute(f"""
        WITH o AS (SELECT rid, key, split, lane, "offset", commit_seq FROM {src_out}
                   WHERE key IS NOT NULL AND split IS NOT NULL AND "offset" IS NOT NULL
                     AND commit_seq IS NOT NULL AND lane IS NOT NULL),
        w AS (SELECT rid, "offset", max("offset") OVER (PARTITION BY key, split, lane ORDER BY commit_seq
                     RANGE BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev FROM o)
        SELECT count(*), min(rid, {sample}) FROM w WHERE "offset" < prev""").fetchone()[0]
    result["double_commits"] = con.execute(f"""
        WITH t AS (SELECT sink_subtask, txn, commit_seq, count(*) AS m, max(rid) AS r FROM {src_out}
                   WHERE txn IS NOT NULL AND commit_seq IS NOT NULL GROUP BY ALL),
        p AS (SELECT sink_subtask, txn, count(*) AS commits, sum(m) AS n, arg_max(r, commit_seq) AS s
              FROM t GROUP BY ALL HAVING count(*) > 1)
        SELECT count(*), sum(commits - 1), min(s, {sample}) FROM p""").fetchone()[0]
    con.close()
    return {c: int(result.get(c) or 0) for c in CHECKS}


class RssSampler:
    """Peak resident memory of the Spark driver JVM (a child of this process), sampled every 0.5 s."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psutil

        me = psutil.Process()
        while not self._stop.wait(0.5):
            for child in me.children(recursive=True):
                try:
                    if "java" in child.name():
                        self.peak = max(self.peak, child.memory_info().rss)
                except psutil.Error:
                    pass

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--deep", action="store_true", help="also 100M records")
    ap.add_argument("--sizes", default="1000000,10000000,20000000")
    ap.add_argument("--dir", default="/tmp/cutcheck-bench", help="where the synthetic logs are kept")
    ap.add_argument("--master", default=None)
    ap.add_argument("--driver-memory", default="6g")
    ap.add_argument("--skip-duckdb", action="store_true")
    args = ap.parse_args()

    from cutcheck.spark_validation import validate
    from cutcheck.spark_validation.session import build_session

    sizes = sorted({int(s) for s in args.sizes.split(",") if s} | ({100_000_000} if args.deep else set()))
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    emit("load_average", value=os.getloadavg()[0], cores=os.cpu_count())
    build_session(master=args.master, driver_memory=args.driver_memory, app_name="cutcheck-bench")
    planted = {n: ensure_logs(root, n) for n in sizes}
    validate(root / f"r{sizes[0]}")  # warm-up: JVM start, class loading, code generation

    seconds: dict[tuple[str, int], float] = {}
    for n in sizes:
        run = root / f"r{n}"
        with RssSampler() as rss:
            t0 = time.perf_counter()
            report = validate(run)
            seconds["spark", n] = time.perf_counter() - t0
        emit("validate_seconds", records=n, engine="spark", value=round(seconds["spark", n], 3))
        emit("driver_peak_rss_gb", records=n, engine="spark", value=round(rss.peak / 2**30, 3))
        agree = all(report.count(c) == planted[n][c] for c in CHECKS)
        if not args.skip_duckdb:
            t0 = time.perf_counter()
            duck = duckdb_checks(run / "input", run / "output", memory_limit=args.driver_memory.upper() + "B")
            seconds["duckdb", n] = time.perf_counter() - t0
            emit("validate_seconds", records=n, engine="duckdb", value=round(seconds["duckdb", n], 3))
            agree = agree and all(duck[c] == planted[n][c] for c in CHECKS)
            emit("spark_over_duckdb", records=n, value=round(seconds["spark", n] / seconds["duckdb", n], 3))
        emit("counts_agree", records=n, value=agree)
        for engine in ("spark", "duckdb"):
            if (engine, n) in seconds:
                emit("records_per_second", records=n, engine=engine, value=round(n / seconds[engine, n]))
    for engine in ("spark", "duckdb"):
        for n in sizes:
            if (engine, n) in seconds and (engine, 10 * n) in seconds:
                ratio = seconds[engine, 10 * n] / seconds[engine, n]
                emit("scaling_10x", engine=engine, records=n, to_records=10 * n, value=round(ratio, 3))
    return 0


if __name__ == "__main__":
    sys.exit(main())
