"""Finding and reading the input and output datasets of a validation.

A dataset is a file or a directory of part files (recursively; names starting with ``.`` or
``_`` are ignored, as Spark does). Its format comes from the file extensions: Parquet
(``.parquet``, ``.pq``), CSV (``.csv``: with a header, or header-less with the column names given
by ``--columns``/``--input-columns``) or JSON lines (``.json``, ``.jsonl``,
``.ndjson``), each optionally compressed (``.gz`` ...). Paths are local (or on a filesystem
mounted at the same path on every Spark worker): the format is decided by listing them.

Only the columns of :mod:`model.logschema` are kept, cast to its types; other columns are ignored.
"""

from __future__ import annotations

import bz2
import gzip
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegralType, StringType, StructField, StructType

from model import logschema
from model.errors import LogDataError

from .schema import column_types, spark_schema

FORMATS: dict[str, str] = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
}
COMPRESSIONS = (".gz", ".bz2", ".zst", ".lz4", ".snappy", ".deflate")
SNIFF_LINES = 1000  # JSON lines read to learn which columns a JSON dataset has


@dataclass(frozen=True, slots=True)
class Dataset:
    name: str  # "input" or "output"
    path: Path
    format: str | None  # None: no data files at all (an empty dataset)
    files: tuple[Path, ...]
    bytes: int


@dataclass(frozen=True, slots=True)
class Source:
    """What a validation reads: the two datasets and, for a run directory, its run.json."""

    input: Dataset
    output: Dataset
    run_dir: Path | None = None
    run: dict[str, Any] = field(default_factory=dict)


def _format_of(path: Path) -> str | None:
    name = path.name.lower()
    for comp in COMPRESSIONS:
        if name.endswith(comp):
            name = name[: -len(comp)]
            break
    return FORMATS.get(os.path.splitext(name)[1])


def _data_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    files: list[Path] = []
    for root, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        files.extend(Path(root) / n for n in sorted(names) if not n.startswith((".", "_")))
    return files


def discover(name: str, path: str | os.PathLike[str]) -> Dataset:
    """Classify ``path`` as a dataset: which format, which files, how many bytes."""
    p = Path(path)
    if not p.exists():
        raise LogDataError(f"{name} dataset {p} does not exist; pass an existing file or directory.")
    try:
        files = _data_files(p)
        size = sum(f.stat().st_size for f in files)
    except OSError as exc:
        raise LogDataError(
            f"{name} dataset {p} cannot be listed ({exc.strerror}); check its permissions."
        ) from None
    formats: set[str] = set()
    for f in files:
        fmt = _format_of(f)
        if fmt is None:
            raise LogDataError(
                f"{name} dataset file {f} is not Parquet, CSV or JSON lines (by its extension); "
                "move it out of the dataset or rename it."
            )
        formats.add(fmt)
    if len(formats) > 1:
        raise LogDataError(
            f"{name} dataset {p} mixes formats ({', '.join(sorted(formats))}); keep one per dataset."
        )
    return Dataset(name, p, formats.pop() if formats else None, tuple(files), size)


def resolve(
    run_dir: str | os.PathLike[str] | None,
    input: str | os.PathLike[str] | None,
    output: str | os.PathLike[str] | None,
) -> Source:
    """The datasets to validate: a run directory's input/ and output/, overridden by explicit paths."""
    run: dict[str, Any] = {}
    rd: Path | None = None
    if run_dir is not None:
        rd = Path(run_dir)
        if not rd.is_dir():
            raise LogDataError(f"run directory {rd} does not exist; pass a cutcheck run directory.")
        input = input if input is not None else rd / "input"
        output = output if output is not None else rd / "output"
        meta = rd / "run.json"
        if meta.exists():
            try:
                run = json.loads(meta.read_text())
            except (OSError, ValueError) as exc:
                raise LogDataError(f"{meta} is not readable JSON ({exc}); rewrite or remove it.") from None
    if input is None or output is None:
        missing = "input" if input is None else "output"
        raise LogDataError(f"no {missing} dataset given; pass a run directory or both --input and --output.")
    return Source(
        discover("input", input), discover("output", output), rd, run if isinstance(run, dict) else {}
    )


def _open_text(path: Path) -> IO[str]:
    n = path.name.lower()
    if n.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    if n.endswith(".bz2"):
        return bz2.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")  # noqa: SIM115 - closed by the caller's with


def _json_keys(ds: Dataset) -> list[str] | None:
    keys: dict[str, None] = {}
    for f in ds.files:
        try:
            with _open_text(f) as fh:
                for i, line in enumerate(fh):
                    if i >= SNIFF_LINES:
                        break
                    if line.strip():
                        obj = json.loads(line)
                        if not isinstance(obj, dict):
                            raise ValueError("a line is not a JSON object")
                        keys.update(dict.fromkeys(obj))
        except (OSError, UnicodeDecodeError, EOFError, ValueError) as exc:
            raise LogDataError(f"{ds.name} dataset file {f} is not JSON lines ({exc}).") from None
        if keys:
            return list(keys)
    return None


def _chain(exc: BaseException) -> list[str]:
    """The first line of every message down the Java cause chain (PySpark's own text is only
    "An error occurred while calling o64.parquet")."""
    java = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    lines: list[str] = []
    while java is not None and len(lines) < 12:
        try:
            msg = java.getMessage()
            java = java.getCause()
        except Exception:  # a dead gateway: keep what we have
            break
        if msg and msg.strip():
            lines.append(msg.strip().splitlines()[0])
    text = str(exc).strip()
    return lines or ([text.splitlines()[0]] if text else [type(exc).__name__])


def _short(exc: BaseException) -> str:
    """``<file>: <root cause>`` when the chain names a file, else the root cause."""
    lines = _chain(exc)
    root = re.sub(r"\s*SQLSTATE: \w+", "", lines[-1])[:300]
    for line in lines:
        m = re.search(r"(?:reading file|file) (\S+?)\.?(?:\s|$)", line)
        if m and m.group(1) not in root:
            return f"{m.group(1)}: {root}"
    return root


def _load(spark: SparkSession, ds: Dataset, columns: tuple[str, ...] | None, header: bool) -> DataFrame | None:
    """The raw DataFrame of ``ds``, or None when it holds no data at all.

    For CSV, ``columns`` are the names of its columns (its header's, or ``--columns`` when ``header``
    is False: Flink's csv format writes none).
    """
    path = str(ds.path)
    types = column_types(ds.name)
    if ds.format is None:
        return None
    if ds.format == "csv":
        if columns is None:
            return None
        # The schema is taken from the header instead of inferred: inference is a full extra pass.
        schema = StructType([StructField(c, types.get(c, StringType()), True) for c in columns])
        reader = spark.read.schema(schema).option("header", header).option("mode", "FAILFAST")
        return reader.csv(path)
    if ds.format == "json":
        keys = _json_keys(ds)
        if keys is None:
            return None
        known = [k for k in keys if k in types]
        schema = spark_schema(ds.name, known) if known else StructType([StructField(keys[0], StringType())])
        return spark.read.schema(schema).option("mode", "FAILFAST").json(path)
    try:
        return spark.read.parquet(path)
    except Exception as exc:  # AnalysisException / SparkException from the footer read
        raise LogDataError(f"{ds.name} dataset {ds.path} is not readable Parquet ({_short(exc)}).") from None


def read(
    spark: SparkSession, ds: Dataset, columns: tuple[str, ...] | None = None, header: bool = True
) -> DataFrame:
    """The dataset as a DataFrame of its schema columns (cast to the schema's types).

    Raises LogDataError naming the first required column the dataset lacks, or a `rid` column
    that is not of an integer type.
    """
    df = _load(spark, ds, columns, header)
    if df is None:  # no files, or files without a single row or header: a valid, empty dataset
        return spark.createDataFrame([], spark_schema(ds.name))
    present = set(df.columns)
    for col in logschema.REQUIRED[ds.name]:
        if col not in present:
            raise LogDataError(
                f"{ds.name} dataset {ds.path} has no `{col}` column, which validation needs "
                f"(columns found: {', '.join(df.columns) or 'none'})."
            )
    rid_type = df.schema["rid"].dataType
    if not isinstance(rid_type, IntegralType):
        raise LogDataError(
            f"{ds.name} dataset {ds.path} stores `rid` as {rid_type.simpleString()}, not as integers; write rid "
            "as an integer column (int64), since validate matches input and output records by integer rid."
        )
    types = column_types(ds.name)
    cols = [F.col(f"`{c}`").cast(types[c]).alias(c) for c in types if c in present]
    return df.select(*cols)


# Markers of Spark errors that mean "this data cannot be read", as opposed to a bug.
_READ_MARKERS = (
    "FAILED_READ_FILE",
    "CANNOT_READ_FILE_FOOTER",
    "MALFORMED",
    "Malformed",
    "not a Parquet file",
    "FileNotFound",
    "FILE_NOT_EXIST",
    "CAST_INVALID_INPUT",
    "PARSE",
    "corrupt",
    "Corrupt",
    "EOFException",
)


def read_failure(exc: BaseException) -> str | None:
    """A one-line reason when ``exc`` (raised while the job ran) says the data is unreadable."""
    text = " ".join(_chain(exc)) + " " + str(exc)
    if not any(m in text for m in _READ_MARKERS):
        return None
    return _short(exc)
