"""A case (job graph and run options) as a self-contained PyFlink script: what a Flink committer runs
without cutcheck (``cutcheck flink script GRAPH --out FILE``; the hunt attaches one to each finding).

The script is flink_bridge/reproducer_script.py with the case filled in: the graph, the same
translation (operators, uids, partitioners, chaining), the job and cluster configuration that
flink_bridge.runner would use for the release (flink_bridge.features), the failure or savepoint,
the rescaled restore, and what the output must hold. The expectations are the engine's
(reference.runtime.records.Expectations and the oracle's copies per record id) written out as
data, so the script checks Flink's committed output the way cutcheck does, with nothing of
cutcheck imported: it prints PASS or FAIL and exits 0, 1 (a disagreement) or 2 (could not run).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cutcheck.flink_bridge.features import Features, Key, features, installed
from cutcheck.flink_bridge.runner import RunOptions, prepare, slow_vertex
from cutcheck.model.errors import CutcheckError
from cutcheck.model.graph import JobGraph

TEMPLATE = Path(__file__).with_name("reproducer_script.py")
PLACEHOLDER = "CASE: dict = {}  # the case: filled in when the script is rendered\n"
# Per-job settings the script sets itself (they name this machine: ports, interpreter, directories).
_LOCAL = ("rest.port", "python.executable", "python.pythonpath")


def case(graph: JobGraph | dict[str, Any] | str | Path, options: RunOptions, *, release: str | None = None,
         expected_refusal: str | None = None) -> dict[str, Any]:
    """The data the script runs: everything about the case, as JSON."""
    from cutcheck.flink_bridge.env import CLUSTER_DEFAULTS, Cluster
    from cutcheck.flink_bridge.runner import job_config
    from cutcheck.reference.checks.oracle import Oracle
    from cutcheck.reference.runtime.records import Expectations, source_layouts

    start, target = prepare(graph if not isinstance(graph, dict) else JobGraph.from_json(graph), options)
    feat: Features = features(release) if release else installed()
    if options.kill_after is not None:
        raise CutcheckError("a standalone script runs Flink in its own process and cannot kill a TaskManager JVM; "
                            "reproduce a killed JVM with cutcheck (RunOptions.kill_after) or give a failure instead.")
    if options.checkpoint_dir is not None or options.job_id is not None:
        raise CutcheckError("a standalone script chooses its own directories and job ids; leave out --checkpoint-dir and --job-id.")
    expect = Expectations.of(start)
    oracle = Oracle(expect, start, None)
    in_place = options.restart and not options.rescale and options.savepoint is None
    conf = job_config(Cluster(None, 0), options, "/", in_place, None, None, start, feat)
    for key in (*_LOCAL, feat.key(Key.CHECKPOINT_DIR), feat.key(Key.SAVEPOINT_DIR), "restart-strategy.type"):
        conf.pop(key, None)
    slow = slow_vertex(start, options)
    rescaled = {vid: target.vertex(vid).parallelism for vid in options.rescale}
    return {
        "graph": start.to_json(),
        "order": start.topological_order(),
        "max_parallelism": {v.id: start.max_parallelism(v.id) for v in start.vertices},
        "layouts": {vid: {"rid_base": lay.rid_base, "split_base": lay.split_base, "records": lay.records,
                          "splits": lay.splits, "keys": lay.keys, "seed": lay.seed}
                    for vid, lay in source_layouts(start).items()},
        "expect": {src: {"copies": list(oracle.expected_copies(src)[1])} for src in expect.layouts},
        "sinks": sorted(v.id for v in start.vertices if v.kind == "sink"),
        "count_sinks": sorted(expect.count_groups),
        "options": {"mode": options.mode, "fail_after": options.fail_after, "restart": options.restart,
                    "rescale": rescaled, "savepoint": options.savepoint, "stop_after": options.stop_after,
                    "claim_mode": options.claim_mode, "chaining": options.chaining,
                    "restore": options.restore},
        "probe": {"slow": slow, "delay_ms": options.delay_ms,
                  "fail_vertex": (options.fail_vertex or slow) if options.fail_after else None},
        "config": conf,
        "cluster": {**CLUSTER_DEFAULTS, feat.key(Key.RETAINED): str(options.retained)},
        "keys": {name: feat.key(Key(name)) for name in ("checkpoint_dir", "savepoint_dir", "restore_path", "claim_mode")},
        "release": feat.name,
        "summary": summary(start, options, rescaled),
        "expected_refusal": expected_refusal,
    }


def summary(graph: JobGraph, o: RunOptions, rescaled: dict[str, int]) -> str:
    vertices = " ".join(f"{v.id}:{v.kind}({v.parallelism})" for v in graph.vertices)
    edges = ", ".join(f"{e.source}-{e.partitioner}->{e.target}" for e in graph.edges)
    step = (f"fail after checkpoint {o.fail_after}" if o.fail_after else
            f"{o.savepoint} savepoint after checkpoint {o.stop_after}" if o.savepoint else "no failure")
    moves = (", rescale " + " ".join(f"{k}={v}" for k, v in sorted(rescaled.items()))) if rescaled else ""
    return (f"{vertices}; {edges}; {o.mode} checkpoints every {o.interval_ms} ms, {step}{moves}, "
            f"{'rocksdb incremental' if o.incremental else 'hashmap'}, {o.claim_mode}, chaining {'on' if o.chaining else 'off'}")


def render(graph: JobGraph | dict[str, Any] | str | Path, options: RunOptions, *, release: str | None = None,
           expected_refusal: str | None = None) -> str:
    """The standalone script's text for this case (see the module docstring)."""
    data = case(graph, options, release=release, expected_refusal=expected_refusal)
    text = TEMPLATE.read_text()
    if PLACEHOLDER not in text:  # pragma: no cover - the template and this module ship together
        raise CutcheckError(f"{TEMPLATE}: the case placeholder is missing; reinstall cutcheck.")
    body = json.dumps(data, indent=1, sort_keys=True)
    header = (f"# Generated by cutcheck for Flink {data['release']}: {data['summary']}\n"
              "# Needs only apache-flink (and Java); run: python THIS_FILE [--work DIR] [--keep]\n")
    return header + text.replace(PLACEHOLDER, f"CASE: dict = json.loads(r'''\n{body}\n''')\n")
