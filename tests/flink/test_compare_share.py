"""flink compare's share of in-flight data persisted is a share (issue 26, item 9): on the engine's side
it divided the channel state by the bytes buffered at the trigger, which leaves out data sent after
the trigger and caught as channel state, and came out above 100 %. Both sides now count what the
checkpoint's barriers met: processed during alignment plus persisted. The engine alone, no Flink."""

from __future__ import annotations

from pathlib import Path

import pytest

from cutcheck.flink_bridge.compare import run_engine
from cutcheck.flink_bridge.runner import RunOptions, prepare, slow_vertex

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(("mode", "interval"), [("aligned_timeout", 50), ("aligned_timeout", 20), ("unaligned", 20),
                                                ("aligned", 20)])
def test_the_engine_share_is_persisted_over_what_the_barriers_met(mode: str, interval: int) -> None:
    opts = RunOptions(mode=mode)
    graph, _ = prepare(EXAMPLES / "keyed-pipeline.json", opts)
    slow = slow_vertex(graph, opts)
    side = run_engine(graph, opts, interval, slow, slow)
    assert side.completed > 0
    for (cp, met), (cp2, persisted) in zip(side.inflight, side.persisted, strict=True):
        assert cp == cp2 and 0 <= persisted <= met, (cp, met, persisted)
    share = side.persisted_share
    assert share is not None and 0.0 <= share <= 1.0
    if mode == "unaligned":  # every barrier overtakes what it meets: all of it is persisted
        assert share == 1.0
    if mode == "aligned":  # nothing is persisted; what the barriers met was processed while aligning
        assert share == 0.0 and sum(b for _, b in side.inflight) > 0
