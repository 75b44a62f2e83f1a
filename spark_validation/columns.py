"""What the user says about their data, checked before Spark starts: which of their columns are
cutcheck's (``--rid id``, ``--key k``, ...), and an input given as id ranges (``--input-range 0:N``).

Column mapping renames a dataset's own column names to the schema's (:mod:`model.logschema`) as
the dataset is read, on both datasets; a column already bearing the target name is then ignored
(``--rid id`` on a file with both ``id`` and ``rid`` reads ``id`` as the rid). Every refusal is one
sentence (LogDataError).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from cutcheck.model.errors import LogDataError

# schema column -> the option that maps a user's column onto it
OPTIONS: dict[str, str] = {
    "rid": "--rid",
    "key": "--key",
    "count": "--count",
    "split": "--split",
    "offset": "--offset",
    "sink_subtask": "--subtask",
}
SHADOWED = "__cutcheck_shadowed_"  # prefix of a column replaced by a mapped one (unknown: never read)

Range = tuple[int, int]


def mapping(given: Mapping[str, str | None]) -> dict[str, str]:
    """``{schema column: user column}`` from the options given, as ``{user column: schema column}``."""
    result: dict[str, str] = {}
    for target, source in given.items():
        if source is None:
            continue
        option = OPTIONS[target]
        name = source.strip()
        if not name:
            raise LogDataError(f"{option} needs a column name, like {option} id.")
        if name in result:
            raise LogDataError(
                f"column {name!r} is given to both {OPTIONS[result[name]]} and {option}; map each column once."
            )
        result[name] = target
    return result


def rename(names: Iterable[str], renames: Mapping[str, str]) -> tuple[str, ...]:
    """``names`` with mapped columns renamed to the schema's and the columns they replace set aside."""
    targets = set(renames.values())
    out: list[str] = []
    for n in names:
        if n in renames:
            out.append(renames[n])
        elif n in targets:
            out.append(SHADOWED + n)
        else:
            out.append(n)
    return tuple(out)


def source_name(target: str, renames: Mapping[str, str]) -> str:
    """The user's name of schema column ``target`` (itself when not mapped)."""
    for src, tgt in renames.items():
        if tgt == target:
            return src
    return target


def parse_range(text: str) -> Range:
    """``"0:1200000"`` as the half-open range (0, 1200000); one sentence when it is not one."""
    start, sep, end = text.strip().partition(":")
    try:
        if not sep:
            raise ValueError
        lo, hi = int(start), int(end)
    except ValueError:
        raise LogDataError(
            f"--input-range {text!r} is not START:END; give two integers, like --input-range 0:1200000 "
            "(half-open: START up to END-1)."
        ) from None
    if hi <= lo:
        raise LogDataError(f"--input-range {text!r} holds no id (END must exceed START; the range is half-open).")
    if lo < -(2**62) or hi > 2**62:
        raise LogDataError(f"--input-range {text!r} is beyond the ids validate can hold (64-bit integers).")
    return lo, hi


def parse_ranges(texts: Sequence[str] | None) -> tuple[Range, ...]:
    """Every ``--input-range``, sorted; overlapping ranges are refused (each id is expected exactly once)."""
    ranges = sorted(parse_range(t) for t in texts or ())
    for (a, b), (c, d) in zip(ranges, ranges[1:], strict=False):
        if c < b:
            raise LogDataError(
                f"--input-range {a}:{b} and {c}:{d} overlap, which would expect the ids {c}:{min(b, d)} twice; "
                "give ranges that do not overlap (each id is expected exactly once)."
            )
    return tuple(ranges)


def describe_ranges(ranges: Sequence[Range]) -> str:
    return ", ".join(f"{a}:{b}" for a, b in ranges)


def range_size(ranges: Sequence[Range]) -> int:
    return sum(b - a for a, b in ranges)
