"""The recovery-log schema: the contract between the engine (and any other system) and spark_validation.

A run directory holds ``run.json`` and four Parquet datasets. Types are named in Arrow/Spark terms
("int64", "int32", "string") so that both PyArrow and Spark schemas are built from these tables;
this module itself imports neither (model/ does no I/O).

Only ``rid`` is required in ``input`` and ``output`` for validation; the optional columns enable
further checks (see ``CHECK_COLUMNS``).

Extension columns beyond the original list, all optional and nullable:

* ``input.copies``: how many committed output rows the record must produce (default 1). A filter
  makes it 0 for some records, a broadcast edge multiplies it; the engine writes it from the graph.
* ``output.counter``: a group label within which ``count`` must run 1..n per key (the engine writes
  ``"<keyed vertex>/<sink vertex>"`` where the route makes that true, and null elsewhere).
* ``output.lane``: a group label within which, per (key, split), offsets increase in commit order;
  null where the route does not promise order (for example after a rebalance).
"""

from __future__ import annotations

from typing import Final

Column = tuple[str, str, bool]  # (name, type, nullable)

INPUT: Final[tuple[Column, ...]] = (
    ("rid", "int64", False),
    ("source", "string", True),
    ("split", "int32", True),
    ("offset", "int64", True),
    ("key", "int64", True),
    ("value", "int64", True),
    ("copies", "int32", True),
)

OUTPUT: Final[tuple[Column, ...]] = (
    ("rid", "int64", False),
    ("key", "int64", True),
    ("value", "int64", True),
    ("count", "int64", True),
    ("split", "int32", True),
    ("offset", "int64", True),
    ("sink_subtask", "string", True),
    ("txn", "string", True),
    ("checkpoint_id", "int64", True),
    ("attempt", "int32", True),
    ("commit_seq", "int64", True),
    ("counter", "string", True),
    ("lane", "string", True),
)

CHECKPOINTS: Final[tuple[Column, ...]] = (
    ("id", "int64", False),
    ("attempt", "int32", False),
    ("kind", "string", False),
    ("status", "string", False),
    ("trigger_step", "int64", True),
    ("end_step", "int64", True),
    ("alignment_steps", "int64", True),
    ("input_state_records", "int64", True),
    ("output_state_records", "int64", True),
    ("state_bytes", "int64", True),
    ("inflight_bytes", "int64", True),
    ("buffer_size", "int64", True),
)

EVENTS: Final[tuple[Column, ...]] = (
    ("step", "int64", False),
    ("attempt", "int32", False),
    ("kind", "string", False),
    ("detail", "string", True),
)

DATASETS: Final[dict[str, tuple[Column, ...]]] = {
    "input": INPUT,
    "output": OUTPUT,
    "checkpoints": CHECKPOINTS,
    "events": EVENTS,
}

REQUIRED: Final[dict[str, tuple[str, ...]]] = {"input": ("rid",), "output": ("rid",)}

# Which optional output columns each validation check needs (input needs only rid, plus copies if present).
CHECK_COLUMNS: Final[dict[str, tuple[str, ...]]] = {
    "lost": (),
    "duplicated": (),
    "phantom": (),
    "count_gaps": ("key", "count"),
    "reordered": ("key", "split", "offset", "commit_seq"),
    "double_commits": ("txn", "sink_subtask", "commit_seq"),
}


def column_names(dataset: str) -> list[str]:
    return [name for name, _, _ in DATASETS[dataset]]
