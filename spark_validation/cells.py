"""Where a text dataset holds a value its integer column cannot: the file, line and column, in
cutcheck's own sentence.

Spark reads CSV and JSON lines with the recovery-log schema (``model.logschema``) in FAILFAST mode,
so a ``NaN``, a number beyond int64 or a word in an integer column stops the job with Spark's own
message ("For input string: ..."), which names neither the line nor the column. When a read fails,
the text files are scanned here, line by line, for the first such value; only then, so a good
dataset is never read twice.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from cutcheck.model import logschema

from .columns import rename, source_name
from .datasets import Dataset, _open_text

INT_RANGE = {"int64": (-(2**63), 2**63 - 1), "int32": (-(2**31), 2**31 - 1)}


def _integer_columns(dataset: str) -> dict[str, str]:
    return {name: t for name, t, _ in logschema.DATASETS[dataset] if t in INT_RANGE}


def _what(value: Any, type_name: str) -> str | None:
    """Why ``value`` (a CSV cell or a JSON value) does not fit an integer column, or None if it does."""
    lo, hi = INT_RANGE[type_name]
    if value is None or value == "":
        return None  # a null: nullable columns allow it, and a missing rid is its own check (null_rid)
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, float):
        if math.isnan(value):
            return "not a number (NaN)"
        return "infinite" if math.isinf(value) else "a number with a fraction or exponent"
    if isinstance(value, str):
        text = value.strip()
        if text.lower().lstrip("+-") in ("nan", "inf", "infinity"):
            return "not a number (NaN)" if "nan" in text.lower() else "infinite"
        try:
            number = int(text)
        except ValueError:
            try:
                float(text)
            except ValueError:
                return "text"
            return "a number with a fraction or exponent"
        value = number
    if isinstance(value, int):
        return None if lo <= value <= hi else f"beyond the {type_name} range ({lo}..{hi})"
    return "not a number"


def _csv_rows(path: Path, columns: Sequence[str] | None, header: bool,
              renames: dict[str, str]) -> Iterator[tuple[int, str, str, Any]]:
    """(line number, schema column, the file's own column name, value) for every cell of ``path``."""
    names = list(columns) if columns is not None else None
    with _open_text(path) as fh:
        reader = csv.reader(fh)
        first = True
        for row in reader:
            if not row or not any(c.strip() for c in row):
                continue
            if first and header:
                first = False
                if names is None:
                    names = list(rename(row, renames))
                continue
            first = False
            for i, cell in enumerate(row):
                if names is not None and i < len(names):
                    yield reader.line_num, names[i], source_name(names[i], renames), cell


def _json_rows(path: Path, renames: dict[str, str]) -> Iterator[tuple[int, str, str, Any]]:
    with _open_text(path) as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except (ValueError, RecursionError):
                return  # not this module's question: Spark's message stands
            if isinstance(obj, dict):
                for key, name in zip(obj, rename(list(obj), renames), strict=True):
                    yield number, name, key, obj[key]


def first_bad_value(ds: Dataset, columns: Sequence[str] | None, header: bool, renames: dict[str, str],
                    spark_said: str = "") -> tuple[str, bool] | None:
    """One sentence naming a value of ``ds`` its integer column cannot hold, and whether Spark's message
    ``spark_said`` quotes that value; None when there is none. The first quoted one wins (Spark parses
    only the columns a check reads, so a bad value elsewhere may not be what stopped it), else the first."""
    if ds.format not in ("csv", "json"):
        return None
    wanted = _integer_columns(ds.name)
    first: tuple[str, bool] | None = None
    for f in ds.files:
        try:
            cells = (_csv_rows(f, columns, header, renames) if ds.format == "csv" else _json_rows(f, renames))
            for line, name, own, value in cells:
                if name not in wanted:
                    continue
                what = _what(value, wanted[name])
                if what is None:
                    continue
                shown = str(value if isinstance(value, str) else json.dumps(value))
                given = f"`{own}` (read as `{name}`)" if own != name else f"`{name}`"
                fix = ("fix that value (records are matched by their integer rid)" if name == "rid" else
                       "fix that value, or give the column a name cutcheck does not know (it is then ignored)")
                said = (f"{ds.name} dataset file {ds.show(f)}, line {line}, column {given}: {shown[:40]!r} is {what}, "
                        f"but `{name}` holds integers ({wanted[name]}); {fix}.")
                if f'"{shown.strip()}"' in spark_said or f"'{shown.strip()}'" in spark_said:
                    return said, True
                first = first or (said, False)
        except (OSError, UnicodeDecodeError, EOFError, csv.Error):
            break  # unreadable text: what was found so far, or Spark's message
    return first
