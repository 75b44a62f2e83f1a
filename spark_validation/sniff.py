"""What a dataset holds, learnt from its first lines before Spark starts: is it empty, does a CSV
have a header (``--header``/``--no-header`` decide; else it is guessed from the first line, and the
guess is said), do ``--columns`` name its columns, is ``rid`` an integer.

Every refusal here is one sentence and costs no JVM: an empty dataset, header-less CSV without
column names, and a ``rid`` stored as text, a float or a string are found by reading a few lines
(or Parquet footers) of the first files that hold data.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cutcheck.model.errors import LogDataError

from .columns import rename, source_name
from .datasets import Dataset, _open_text, json_head

NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
INTEGER = re.compile(r"^[+-]?\d+$")
# The columns of cutcheck's Flink sink part files (flink_bridge/runlog.py), in file order.
FLINK_SINK_COLUMNS = ("rid", "key", "value", "count", "split", "offset", "subtask")


@dataclass(frozen=True, slots=True)
class Sniff:
    empty: bool | None  # True: no record at all; None: only Spark can tell
    columns: tuple[str, ...] | None = None  # CSV: the column names, from the header or from --columns
    header: bool = True  # CSV: each file starts with a header row
    note: str | None = None  # CSV: what was guessed about the header, in one sentence (never silently)


def parse_columns(text: str | None, option: str, renames: dict[str, str] | None = None) -> tuple[str, ...] | None:
    """``--columns rid,key,count`` as names (renamed by ``renames``, as ``--rid id`` asks); one sentence
    when they cannot name a CSV's columns."""
    if text is None:
        return None
    names = tuple(c.strip() for c in text.split(","))
    if not all(names):
        raise LogDataError(f"{option} {text!r} has an empty name; give names separated by commas, like rid,key,count.")
    if len(set(names)) != len(names):
        raise LogDataError(f"{option} {text!r} names a column twice; give each column of the file once, in order.")
    renamed = rename(names, renames or {})
    if "rid" not in renamed:
        rid = source_name("rid", renames or {})
        what = f"`{rid}` (given by --rid)" if rid != "rid" else "`rid`"
        raise LogDataError(f"{option} {text!r} does not name {what}, which validation needs; name the rid column.")
    return renamed


def _lines(path: Path, n: int) -> list[list[str]]:
    """The first ``n`` non-blank rows of a CSV file."""
    rows: list[list[str]] = []
    try:
        with _open_text(path) as fh:
            for row in csv.reader(fh):
                if row and any(c.strip() for c in row):
                    rows.append([c.strip() for c in row])
                    if len(rows) >= n:
                        break
    except (OSError, UnicodeDecodeError, EOFError, csv.Error) as exc:
        raise LogDataError(f"file {path} cannot be read as CSV text ({exc}); fix or remove it.") from None
    return rows


def _not_integer(ds: Dataset, f: Path, what: str) -> LogDataError:
    return LogDataError(
        f"{ds.name} dataset file {ds.show(f)} stores `rid` as {what}, not as integers; write rid as an integer "
        "column (int64), since validate matches input and output records by integer rid."
    )


def _example(n: int, option: str) -> str:
    if n == len(FLINK_SINK_COLUMNS):
        return f"{option} {','.join(FLINK_SINK_COLUMNS)} (the layout of cutcheck's Flink sink files)"
    return f"{option} {','.join(['rid', *[f'col{i}' for i in range(2, n + 1)]])} (unknown names are ignored)"


def _is_header(top: list[str], columns: tuple[str, ...] | None, rid_name: str) -> tuple[bool, str]:
    """The guess whether ``top`` (a CSV file's first row) is a header, and why, in words.

    A data row holds an integer rid (validate refuses any other), so with ``--columns`` the row is a
    header when its rid cell is not an integer: text columns (keys like ``user-7``) say nothing. Without
    ``--columns`` it is a header when it names the rid column or holds any cell that is not a number."""
    if columns is not None:
        cell = top[columns.index("rid")] if columns.index("rid") < len(top) else ""
        if INTEGER.match(cell):
            return False, f"its rid cell {cell!r} is an integer"
        return True, f"its rid cell {cell!r} is not an integer"
    if rid_name in top:
        return True, f"it names the column `{rid_name}`"
    text = next((c for c in top if not NUMBER.match(c)), None)
    if text is not None:
        return True, f"it holds {text[:40]!r}, which is not a number"
    return False, "every cell of it is a number"


def _csv(ds: Dataset, columns: tuple[str, ...] | None, option: str, renames: dict[str, str],
         header: bool | None, header_option: str) -> Sniff:
    first: tuple[Path, list[list[str]]] | None = None
    for f in ds.files:
        rows = _lines(f, 2)
        if rows:
            first = (f, rows)
            break
    if first is None:
        return Sniff(empty=True, columns=columns, header=columns is None if header is None else header)
    f, rows = first
    top = rows[0]
    rid_name = source_name("rid", renames)
    guessed, why = _is_header(top, columns, rid_name)
    note = None
    if header is None:
        header = guessed
        other = header_option if not guessed else header_option.replace("--", "--no-", 1)
        shown = ",".join(top)[:80]
        note = (f"{ds.name} dataset file {ds.show(f)}: its first line ({shown}) was taken for "
                f"{'a header' if guessed else 'data, not a header'}, since {why}; {other} says otherwise.")
    if header and len(rows) < 2:  # the first file's only line is its header: look for data elsewhere
        rows_after = [r for g in ds.files if g != f for r in _lines(g, 2)[1 if header else 0:]]
        if not rows_after:
            return Sniff(empty=True, columns=columns or rename(top, renames), header=True, note=note)
    if columns is None:
        if not header:
            raise LogDataError(
                f"{ds.name} dataset file {ds.show(f)} has no header row (its first line, {','.join(top)[:80]}, is "
                f"data); pass {option} with its {len(top)} column names in file order, for example "
                f"{_example(len(top), option)}."
            )
        if rid_name in top and len(rows) > 1:
            i = top.index(rid_name)
            rid = rows[1][i] if i < len(rows[1]) else ""
            if rid and not INTEGER.match(rid):
                raise _not_integer(ds, f, f"text ({rid!r} on its first data line)")
        return Sniff(empty=False, columns=rename(top, renames), header=True, note=note)
    if len(top) != len(columns):
        raise LogDataError(
            f"{ds.name} dataset file {ds.show(f)} has {len(top)} columns but {option} names {len(columns)}; "
            "name every column of the file, in order."
        )
    data = (rows[1] if len(rows) > 1 else []) if header else top
    rid = data[columns.index("rid")] if columns.index("rid") < len(data) else ""
    if rid and not INTEGER.match(rid):
        where = "first data line" if header else "first line, read as data"
        if note is None and not header:  # the user said so: name the option that did
            where += f" as {header_option.replace('--', '--no-', 1)} asks"
        raise _not_integer(ds, f, f"text ({rid!r} on its {where})")
    return Sniff(empty=False, columns=columns, header=header, note=note)


def _json_type(value: Any) -> str | None:
    """What a non-integer JSON rid is, or None for an integer (or null)."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return None
    names = {str: "JSON strings", float: "JSON numbers with a fraction or exponent", bool: "true/false",
             list: "JSON arrays", dict: "JSON objects"}
    return f"{names.get(type(value), type(value).__name__)} (first: {json.dumps(value)[:40]})"


def _json(ds: Dataset, rid: str) -> Sniff:
    empty = True
    for f in ds.files:
        for obj in json_head(ds, f):
            empty = False
            if isinstance(obj, dict) and obj.get(rid) is not None:
                what = _json_type(obj[rid])
                if what is not None:
                    raise _not_integer(ds, f, what)
                return Sniff(empty=False)
    return Sniff(empty=empty)


def _parquet(ds: Dataset, rid: str) -> Sniff:
    import pyarrow as pa
    import pyarrow.parquet as pq

    for f in ds.files:
        try:
            meta = pq.read_metadata(f)
            schema = meta.schema.to_arrow_schema()
        except (OSError, pa.ArrowException, ValueError):
            return Sniff(empty=None)  # Spark reads it and names the problem
        if rid in schema.names:
            t = schema.field(rid).type
            if not pa.types.is_integer(t):
                raise _not_integer(ds, f, f"Parquet type {t}")
        if meta.num_rows > 0:
            return Sniff(empty=False)
    return Sniff(empty=True)


def sniff(
    ds: Dataset, columns: tuple[str, ...] | None = None, option: str = "--columns", renames: dict[str, str] | None = None,
    header: bool | None = None, header_option: str = "--header",
) -> Sniff:
    """Look at ``ds`` before Spark does; ``columns`` are the names of a header-less CSV's columns
    (already renamed), ``renames`` the user's columns that are the schema's (``--rid id``); ``header``
    says whether CSV files start with a header row (None: guessed from the first line, and said)."""
    renames = renames or {}
    rid = source_name("rid", renames)
    if columns is not None and ds.format not in (None, "csv"):
        raise LogDataError(
            f"{option} names the columns of header-less CSV, but the {ds.name} dataset {ds.where} is "
            f"{ds.format}, whose columns have names; drop {option}."
        )
    if header is not None and ds.format not in (None, "csv"):
        raise LogDataError(f"{header_option} applies to CSV, but the {ds.name} dataset {ds.where} is {ds.format}; "
                           f"drop it.")
    if ds.format is None:
        return Sniff(empty=True, columns=columns, header=columns is None if header is None else header)
    if ds.format == "csv":
        return _csv(ds, columns, option, renames, header, header_option)
    if ds.format == "json":
        return _json(ds, rid)
    return _parquet(ds, rid)
