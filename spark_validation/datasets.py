"""Finding and reading the input and output datasets of a validation.

A dataset is a file or a directory of part files (recursively; names starting with ``.`` or
``_`` are ignored, as Spark does). Its format comes from the file extensions: Parquet
(``.parquet``, ``.pq``), CSV (``.csv``: with a header, or header-less with the column names given
by ``--columns``/``--input-columns``) or JSON lines (``.json``, ``.jsonl``,
``.ndjson``), each optionally compressed (``.gz`` ...). Files without one of these extensions
(Flink FileSink's part files, ``part-<uuid>-<n>``) are read as header-less CSV when the dataset's
columns are named (``--columns``). FileSink's in-progress and pending files
(``.part-*.inprogress.*``) are hidden, so only committed part files are read. Paths are local (or
on a filesystem mounted at the same path on every Spark worker), ``file:`` URIs, or remote URIs
(``s3://`` ...) copied to a local directory first (:mod:`spark_validation.location`).

Only the columns of :mod:`model.logschema` are kept, cast to its types; other columns are ignored.
Columns may be renamed onto the schema's as they are read (``--rid id``: :mod:`.columns`).
"""

from __future__ import annotations

import bz2
import gzip
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegralType, StringType, StructField, StructType

from cutcheck.model import logschema
from cutcheck.model.errors import LogDataError

from .columns import SHADOWED, rename, source_name
from .location import committed, is_remote, local_path, stage
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
SNIFF_LINES = 1000  # JSON lines read before Spark: which columns a dataset has, what type its rids are


@dataclass(frozen=True, slots=True)
class Dataset:
    name: str  # "input" or "output"
    path: Path
    format: str | None  # None: no data files at all (an empty dataset)
    files: tuple[Path, ...]
    bytes: int
    origin: str = ""  # where the user said it is (a remote URI when ``path`` is its local copy)

    @property
    def where(self) -> str:
        return self.origin or str(self.path)

    def show(self, f: Path) -> str:
        """A file of the dataset as the user knows it (under the remote URI for a copied dataset)."""
        if not self.origin or self.path == f:
            return self.origin or str(f)
        try:
            return self.origin.rstrip("/") + "/" + f.relative_to(self.path).as_posix()
        except ValueError:
            return str(f)


@dataclass(frozen=True, slots=True)
class Source:
    """What a validation reads: the two datasets and, for a run directory, its run.json."""

    input: Dataset | None  # None: the input is given as id ranges
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
        files.extend(Path(root) / n for n in sorted(names) if committed(n))
    return files


def discover(name: str, path: str | os.PathLike[str], hint: str | None = None, origin: str = "") -> Dataset:
    """Classify ``path`` as a dataset: which format, which files, how many bytes.

    ``hint``: the format of files without a known extension (``csv`` when the columns are named)."""
    p = local_path(path)
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
        fmt = _format_of(f) or (hint if "." not in f.name.rsplit("-", 1)[-1] else None)
        if fmt is None:
            option = "--input-columns" if name == "input" else "--columns"
            raise LogDataError(
                f"{name} dataset file {f} is not Parquet, CSV or JSON lines (by its extension); "
                f"move it out of the dataset or rename it (header-less CSV part files such as Flink's "
                f"part-<uuid>-<n>: name their columns with {option})."
            )
        formats.add(fmt)
    if len(formats) > 1:
        raise LogDataError(
            f"{name} dataset {p} mixes formats ({', '.join(sorted(formats))}); keep one per dataset."
        )
    return Dataset(name, p, formats.pop() if formats else None, tuple(files), size, origin)


def locate(
    name: str, where: str | os.PathLike[str], hint: str | None, scratch: Path | None, endpoint: str | None = None
) -> Dataset:
    """The dataset at a local path, a file: URI, or a remote URI (copied under ``scratch`` first)."""
    text = os.fspath(where)
    if not is_remote(text):
        return discover(name, text, hint)
    if scratch is None:
        raise LogDataError(f"{name} dataset {text} is remote, and no local directory was given to copy it to.")
    staged = stage(name, text, scratch / name, endpoint)
    return discover(name, staged.path, hint, origin=text)


def resolve(
    run_dir: str | os.PathLike[str] | None,
    input: str | os.PathLike[str] | None,
    output: str | os.PathLike[str] | None,
    hints: tuple[str | None, str | None] = (None, None),
    scratch: Path | None = None,
    endpoint: str | None = None,
    ranges: bool = False,
) -> Source:
    """The datasets to validate: a run directory's input/ and output/, overridden by explicit paths.

    ``hints``: the format of extension-less files of input and output; ``scratch``: where remote
    datasets are copied; ``ranges``: the input is given as id ranges (no input dataset is read)."""
    run: dict[str, Any] = {}
    rd: Path | None = None
    if run_dir is not None:
        if is_remote(os.fspath(run_dir)):
            raise LogDataError(f"run directory {os.fspath(run_dir)} is remote; pass its datasets as --input and "
                               "--output (or --input-range), which may be remote.")
        rd = local_path(run_dir)
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
            except RecursionError:
                raise LogDataError(f"{meta} is JSON nested deeper than cutcheck reads; rewrite or remove it.") from None
    if ranges:
        input = None
    if (input is None and not ranges) or output is None:
        missing = "input" if input is None else "output"
        raise LogDataError(f"no {missing} dataset given; pass a run directory or both --input and --output.")
    inp = None if input is None else locate("input", input, hints[0], scratch, endpoint)
    return Source(inp, locate("output", output, hints[1], scratch, endpoint), rd, run if isinstance(run, dict) else {})


def _open_text(path: Path) -> IO[str]:
    n = path.name.lower()
    if n.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    if n.endswith(".bz2"):
        return bz2.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")  # noqa: SIM115 - closed by the caller's with


def json_head(ds: Dataset, path: Path) -> Iterator[Any]:
    """The JSON values on the first SNIFF_LINES non-blank lines of one file of ``ds`` (what the checks
    before Spark look at); a file that is not JSON lines is one sentence naming it."""
    try:
        with _open_text(path) as fh:
            for i, line in enumerate(fh):
                if i >= SNIFF_LINES:
                    break
                if line.strip():
                    yield json.loads(line)
    except RecursionError:
        raise LogDataError(f"{ds.name} dataset file {ds.show(path)} is not JSON lines cutcheck reads (a line nests "
                           "deeper than the interpreter parses); a log record is a flat JSON object.") from None
    except (OSError, UnicodeDecodeError, EOFError, ValueError) as exc:
        raise LogDataError(f"{ds.name} dataset file {ds.show(path)} is not JSON lines ({exc}).") from None


def _json_keys(ds: Dataset) -> list[str] | None:
    keys: dict[str, None] = {}
    for f in ds.files:
        for obj in json_head(ds, f):
            if not isinstance(obj, dict):
                raise LogDataError(f"{ds.name} dataset file {ds.show(f)} is not JSON lines (a line is not a JSON object).")
            keys.update(dict.fromkeys(obj))
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


def _with_file(df: DataFrame, file_column: str | None) -> DataFrame:
    if file_column is None:
        return df
    return df.select("*", F.col("_metadata.file_path").alias(file_column))


def _load(
    spark: SparkSession,
    ds: Dataset,
    columns: tuple[str, ...] | None,
    header: bool,
    renames: dict[str, str],
    file_column: str | None = None,
) -> DataFrame | None:
    """The raw DataFrame of ``ds`` (columns renamed by ``renames``), or None when it holds no data at all.

    For CSV, ``columns`` are the names of its columns (its header's, or ``--columns`` when ``header``
    is False: Flink's csv format writes none), already renamed.
    """
    types = column_types(ds.name)
    # Text formats are read file by file: exactly the committed files discover() kept.
    paths = [str(f) for f in ds.files]
    if ds.format is None:
        return None
    if ds.format == "csv":
        if columns is None:
            return None
        # The schema is taken from the header instead of inferred: inference is a full extra pass.
        schema = StructType([StructField(c, types.get(c, StringType()), True) for c in columns])
        reader = spark.read.schema(schema).option("header", header).option("mode", "FAILFAST")
        return _with_file(reader.csv(paths), file_column)
    if ds.format == "json":
        keys = _json_keys(ds)
        if keys is None:
            return None
        known = [(k, n) for k, n in zip(keys, rename(keys, renames), strict=True) if n in types]
        fields = [StructField(k, types[n], True) for k, n in known] or [StructField(keys[0], StringType())]
        df = _with_file(spark.read.schema(StructType(fields)).option("mode", "FAILFAST").json(paths), file_column)
        extra = [file_column] if file_column else []
        return df.select(*[F.col(f"`{k}`").alias(n) for k, n in known], *extra) if known else df
    try:
        df = _with_file(spark.read.parquet(str(ds.path)), file_column)
    except Exception as exc:  # AnalysisException / SparkException from the footer read
        raise LogDataError(f"{ds.name} dataset {ds.where} is not readable Parquet ({_short(exc)}).") from None
    if not renames:
        return df
    names = rename(df.columns, renames)
    return df.select(*[F.col(f"`{c}`").alias(n) for c, n in zip(df.columns, names, strict=True)])


def read(
    spark: SparkSession,
    ds: Dataset,
    columns: tuple[str, ...] | None = None,
    header: bool = True,
    renames: dict[str, str] | None = None,
    file_column: str | None = None,
) -> DataFrame:
    """The dataset as a DataFrame of its schema columns (cast to the schema's types).

    ``renames``: user column -> schema column (``--rid id``); ``file_column``: also a column of that
    name holding each row's file, relative to the dataset. Raises LogDataError naming the first
    required column the dataset lacks, or a `rid` column that is not of an integer type.
    """
    renames = renames or {}
    df = _load(spark, ds, columns, header, renames, file_column)
    if df is None:  # no files, or files without a single row or header: a valid, empty dataset
        return spark.createDataFrame([], spark_schema(ds.name))
    present = set(df.columns)
    for col in logschema.REQUIRED[ds.name]:
        if col not in present:
            src = source_name(col, renames)
            named = f"`{src}` column (given as `{col}`)" if src != col else f"`{col}` column"
            found = ", ".join(c.removeprefix(SHADOWED) for c in df.columns) or "none"
            raise LogDataError(
                f"{ds.name} dataset {ds.where} has no {named}, which validation needs (columns found: {found})."
            )
    rid_type = df.schema["rid"].dataType
    if not isinstance(rid_type, IntegralType):
        raise LogDataError(
            f"{ds.name} dataset {ds.path} stores `rid` as {rid_type.simpleString()}, not as integers; write rid "
            "as an integer column (int64), since validate matches input and output records by integer rid."
        )
    types = column_types(ds.name)
    cols = [F.col(f"`{c}`").cast(types[c]).alias(c) for c in types if c in present]
    if file_column is not None:  # Spark names files as URIs (file:/a/b or file:///a/b)
        base = ds.path.resolve() if ds.path.is_dir() else ds.path.resolve().parent
        root = re.escape(str(base).rstrip("/") + "/")
        path = F.regexp_replace(F.col(f"`{file_column}`"), "%20", " ")
        cols.append(F.regexp_replace(path, f"^file:(//)?{root}", "").alias(file_column))
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
