"""validate() against a plain-Python oracle of the same rules, on seeded random logs with nulls and ties."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from typing import Any

import pytest

from cutcheck.spark_validation import validate

pytestmark = pytest.mark.spark


def oracle(inp: list[dict[str, Any]], out: list[dict[str, Any]]) -> dict[str, int]:
    """The checks of the brief, one rule at a time, in the most direct Python."""
    expected: Counter[int] = Counter()
    for r in inp:
        c = r.get("copies")
        if r["rid"] is not None:  # rows without a rid are null_rid, never lost or phantom
            expected[r["rid"]] += 1 if c is None else max(c, 0)
    found = Counter(r["rid"] for r in out if r["rid"] is not None)
    null_rid = sum(1 for r in inp + out if r["rid"] is None)
    lost = sum(max(expected[rid] - found[rid], 0) for rid in expected)
    duplicated = sum(max(found[rid] - expected[rid], 0) for rid in expected)
    phantom = sum(n for rid, n in found.items() if rid not in expected)

    groups: dict[tuple[Any, ...], list[Any]] = defaultdict(list)
    for r in out:
        if r["key"] is not None and r["counter"] is not None:
            groups[r["counter"], r["key"]].append(r["count"])
    count_gaps = sum(
        1 for counts in groups.values() if None in counts or sorted(counts) != list(range(1, len(counts) + 1))
    )

    lanes: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in out:
        if all(r[c] is not None for c in ("lane", "key", "split", "offset", "commit_seq")):
            lanes[r["lane"], r["key"], r["split"]].append(r)
    reordered = 0
    for rows in lanes.values():
        for r in rows:
            earlier = [q["offset"] for q in rows if q["commit_seq"] < r["commit_seq"]]
            reordered += bool(earlier) and r["offset"] < max(earlier)

    seqs: dict[tuple[Any, ...], set[int]] = defaultdict(set)
    for r in out:
        if r["txn"] is not None and r["commit_seq"] is not None:
            seqs[r["sink_subtask"], r["txn"]].add(r["commit_seq"])
    double_commits = sum(1 for s in seqs.values() if len(s) > 1)
    return {
        "lost": lost,
        "duplicated": duplicated,
        "phantom": phantom,
        "null_rid": null_rid,
        "count_gaps": count_gaps,
        "reordered": reordered,
        "double_commits": double_commits,
    }


def _maybe(rng: random.Random, value: Any, p_null: float = 0.05) -> Any:
    return None if rng.random() < p_null else value


@pytest.mark.parametrize("seed", [1])
def test_matches_python_oracle(seed: int, write_logs: Any) -> None:
    rng = random.Random(seed)
    inp = [{"rid": _maybe(rng, rid, 0.03), "copies": _maybe(rng, rng.choice([0, 1, 1, 1, 2, 3]), 0.2)}
           for rid in range(150)]
    out = []
    for _ in range(400):
        rid = rng.randrange(170)  # some rids beyond the input: phantoms
        out.append(
            {
                "rid": _maybe(rng, rid, 0.03),
                "key": _maybe(rng, rng.randrange(4)),
                "split": _maybe(rng, rng.randrange(2)),
                "offset": _maybe(rng, rng.randrange(30)),
                "commit_seq": _maybe(rng, rng.randrange(12)),  # many ties: rows of one commit
                "count": _maybe(rng, rng.randrange(0, 9)),
                "counter": _maybe(rng, rng.choice(["a", "b"])),
                "lane": _maybe(rng, rng.choice(["x", "y"])),
                "txn": _maybe(rng, f"t{rng.randrange(15)}"),
                "sink_subtask": _maybe(rng, rng.choice(["0", "1"])),
            }
        )
    # a few groups with perfect counts, so that both outcomes of the count check occur
    rid = 0
    for key in range(10, 14):
        for c in rng.sample(range(1, 6), 5):
            out.append(dict(out[0], rid=rid, key=key, counter="a", count=c))
            rid += 1
    report = validate(write_logs(inp, out))
    want = oracle(inp, out)
    assert report.faults() == want
    assert want["count_gaps"] > 0 and want["reordered"] > 0 and want["double_commits"] > 0
    assert want["null_rid"] > 0 and report.details["null_rid_input_rows"] == sum(r["rid"] is None for r in inp)
    assert report.records_in == len(inp) and report.records_out == len(out)
