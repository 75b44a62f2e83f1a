"""The cost of watching a run: the same traced run with only the engine's own subscribers, and with
a no-op subscriber on every event type of ``reference.events.stream`` (so every event, the ones
published only when someone listens included, is built and delivered). One JSON line per figure;
the two sides alternate in one process and the fastest run of each is compared.

    python benchmarks/bench_events.py [--records 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import is_dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import cutcheck.reference.events.stream as stream  # noqa: E402
from cutcheck.reference.batch import make_engine  # noqa: E402
from cutcheck.reference.scenario import Scenario  # noqa: E402

EVENT_TYPES = [t for t in vars(stream).values() if isinstance(t, type) and is_dataclass(t) and t.__module__ == stream.__name__
               and t is not stream.EventBus]


def scenario(records: int) -> Scenario:
    graph = {"name": "bench", "max_parallelism": 128,
             "vertices": [{"id": "src", "kind": "source", "parallelism": 2, "records": records, "keys": 1000, "splits": 8},
                          {"id": "map", "kind": "map", "parallelism": 4},
                          {"id": "count", "kind": "keyed_count", "parallelism": 3},
                          {"id": "sink", "kind": "sink", "parallelism": 2}],
             "edges": [{"from": "src", "to": "map", "partitioner": "rebalance"},
                       {"from": "map", "to": "count", "partitioner": "hash"},
                       {"from": "count", "to": "sink", "partitioner": "rebalance"}]}
    return Scenario.from_json({"graph": graph, "seed": 1, "checkpoint": {"mode": "unaligned", "interval": 2_000},
                               "network": {"buffer_bytes": 1024, "record_bytes": 64}, "max_steps": 10**12})


def run(records: int, watch_everything: bool) -> tuple[float, int]:
    """Seconds of one traced run, and how many events the extra subscribers received."""
    engine = make_engine(scenario(records), trace=True)
    received = [0]

    def count(_event: object) -> None:
        received[0] += 1

    if watch_everything:
        for kind in EVENT_TYPES:
            engine.bus.subscribe(kind, count)
    start = time.perf_counter()
    engine.run()
    return time.perf_counter() - start, received[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    own: list[float] = []
    every: list[float] = []
    events = 0
    for _ in range(args.repeat):
        own.append(run(args.records, False)[0])
        seconds, events = run(args.records, True)
        every.append(seconds)
    print(json.dumps({"figure": "traced_run_seconds", "records": args.records, "value": min(own),
                      "runs": [round(x, 3) for x in own]}))
    print(json.dumps({"figure": "traced_run_seconds_every_event_watched", "records": args.records, "value": min(every),
                      "runs": [round(x, 3) for x in every], "events": events, "event_types": len(EVENT_TYPES)}))
    print(json.dumps({"figure": "watching_everything_to_own_subscribers_ratio", "records": args.records,
                      "value": min(every) / min(own), "repeat": args.repeat}))


if __name__ == "__main__":
    main()
