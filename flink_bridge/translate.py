"""A cutcheck job graph as a PyFlink DataStream job, with every operator's uid pinned.

Translation, vertex by vertex (DESIGN "Job graphs"):

* ``source``      NumberSequenceSource(0, records-1) (uid ``<id>/seq``), then a map computing record j of
                  reference.runtime.records.SourceLayout (uid ``<id>``): rids, keys, splits and offsets are the engine's.
* ``map``/``filter``  Python map/filter (uid ``<id>``); ``union`` an identity map, since Flink's union is no operator.
* ``keyed_count`` each (hash) input gets an AddKey map at the producer's parallelism (uid ``<id>/key<edge>``),
                  the inputs are unioned and keyed by that key, and a KeyedProcessFunction counts (uid ``<id>``).
* ``co_map``      ``connect`` of its two inputs (gate 0, gate 1), each partitioned as its edge says, and a
                  CoMapFunction passing both on (uid ``<id>``): Flink's two-input operator.
* ``broadcast_state``  the data input (gate 0; keyed as for keyed_count when hash-partitioned) ``connect``-ed
                  with the broadcast input made a BroadcastStream, and a (Keyed)BroadcastProcessFunction
                  that applies broadcast elements to broadcast state and passes both inputs on (uid ``<id>``).
* ``sink``        a formatting map (uid ``<id>/format``) and Flink's FileSink (uid ``<id>``): row format,
                  rolled on every checkpoint, so each committed part file is one transaction.

Every operator, including the helper maps PyFlink would otherwise add without a uid (key_by,
partition_custom), gets a uid: auto-generated operator ids hash the chaining, which changes with
parallelism, and a restore at other parallelisms would then not find its state.

Several edges between one pair of vertices are several partitioned views of the producer's stream,
unioned (or connected) at the consumer: Flink keeps one StreamEdge per view. Chaining: Flink chains
forward edges between equal parallelisms by default; with ``chaining=False`` every vertex's first
operator starts a chain of its own (its helpers stay chained to it), so every graph edge is a network
exchange. A custom edge ends in PyFlink's unwrapping map at the consumer's parallelism, chained to the
consumer when it has one input; a consumer with several inputs (union, co_map, broadcast_state) is
never chained (Flink chains only single-input operators), so that map is a task of its own and the
consumer reads it over a forward edge, which makes Flink align all of that consumer's inputs, as the
model aligns them for the custom edge itself.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from cutcheck.model.errors import GraphError
from cutcheck.model.graph import JobGraph
from cutcheck.reference.runtime.records import source_layouts

SUPPORTED_KINDS = ("source", "map", "filter", "keyed_count", "union", "co_map", "broadcast_state", "sink")
UNSUPPORTED: dict[str, str] = {}


@dataclass(slots=True)
class ProbeSpec:
    """Per-vertex test hooks handed to the Python functions (see flink_bridge.functions.Probe)."""

    slow: dict[str, float] = field(default_factory=dict)  # vertex -> seconds per record
    fail_vertex: str | None = None
    armed: str | None = None
    fired: str | None = None


def check_supported(graph: JobGraph) -> None:
    """Raise GraphError (one sentence) for what this translation does not cover."""
    for v in graph.vertices:
        if v.kind not in SUPPORTED_KINDS:
            why = UNSUPPORTED.get(v.kind, "it has no Flink translation yet")
            raise GraphError(f"vertex '{v.id}': kind {v.kind} is not supported on real Flink ({why}); "
                             f"supported kinds: {', '.join(SUPPORTED_KINDS)}.")
        if v.kind == "co_map" and len(graph.in_edges(v.id)) != 2:
            raise GraphError(f"vertex '{v.id}': a co_map with {len(graph.in_edges(v.id))} inputs is not supported on real "
                             "Flink (DataStream connect joins exactly two streams and PyFlink has no multiple-input "
                             "operator); give it two inputs.")
        if v.kind == "sink" and v.delivery != "exactly_once":
            raise GraphError(f"vertex '{v.id}': only exactly_once sinks run on real Flink (its FileSink commits on "
                             "checkpoints, it cannot be made at-least-once); set delivery to exactly_once.")
    for e in graph.edges:
        if e.exchange != "pipelined":
            raise GraphError(f"{e.describe()}: blocking exchanges are not supported on real Flink (they need batch "
                             "execution, which takes no checkpoints); use exchange pipelined.")


def sink_dirs(graph: JobGraph, work: str) -> dict[str, str]:
    return {v.id: os.path.join(work, "sink", v.id) for v in graph.vertices if v.kind == "sink"}


def _types() -> tuple[Any, Any]:
    from pyflink.common import Types

    rec = Types.TUPLE([Types.LONG()] * 6)
    return rec, Types.ROW([Types.LONG(), rec])


def _partition(stream: Any, partitioner: str, src: tuple[int, int], dst: tuple[int, int], uid: str,
               chaining: bool = True) -> Any:
    """``stream`` partitioned as the edge says; src/dst are (parallelism, max parallelism) of its two ends."""
    from pyflink.datastream import DataStream
    from pyflink.java_gateway import get_gateway

    from cutcheck.flink_bridge.functions import custom_partition, record_key

    if partitioner == "forward":
        return stream.forward()
    if partitioner in ("rescale", "rebalance", "shuffle", "broadcast"):
        return getattr(stream, partitioner)()
    if partitioner == "global":
        return DataStream(getattr(stream._j_data_stream, "global")())  # 'global' is a Python keyword
    if partitioner == "custom":
        # PyFlink adds two Python maps: (partition, record) before the exchange, record after it.
        out = stream.partition_custom(custom_partition, record_key)
        after = out._j_data_stream.getTransformation()
        before = after.getInputs().get(0).getInputs().get(0)  # through the (virtual) partition transformation
        for t, suffix, (par, maxpar) in ((before, "", src), (after, "/values", dst)):
            # Renamed too: PyFlink's stream-graph pass rewires an operator named _partition_custom_map_operator
            # by reflection, which fails when a two-input operator follows; parallelisms are pinned here instead.
            t.setUid(uid + suffix)
            t.setName(uid + suffix)
            t.setParallelism(par)
            t.setMaxParallelism(maxpar)
        if not chaining:
            after.setChainingStrategy(get_gateway().jvm.org.apache.flink.streaming.api.operators.ChainingStrategy.HEAD)
        return out
    raise GraphError(f"partitioner {partitioner!r} has no Flink translation.")  # hash is handled by keyed_count


def build(env: Any, graph: JobGraph, sinks: dict[str, str], probes: ProbeSpec, chaining: bool = True) -> None:
    """Add the graph's operators to a PyFlink StreamExecutionEnvironment."""
    from pyflink.common import Encoder, Types, WatermarkStrategy
    from pyflink.datastream import DataStream, KeyedStream
    from pyflink.datastream.connectors.file_system import (
        BucketAssigner,
        FileSink,
        OutputFileConfig,
        RollingPolicy,
    )
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource
    from pyflink.java_gateway import get_gateway

    from cutcheck.flink_bridge import functions as fn

    check_supported(graph)
    rec, keyed_row = _types()
    layouts = source_layouts(graph)
    streams: dict[str, Any] = {}

    def probe(vid: str) -> fn.Probe | None:
        delay = probes.slow.get(vid, 0.0)
        failing = probes.fail_vertex == vid
        if not delay and not failing:
            return None
        return fn.Probe(vid, delay, probes.armed if failing else None, probes.fired if failing else None)

    def pin(ds: Any, uid: str, vid: str, head: bool = False) -> Any:
        ds = ds.uid(uid).name(uid).set_parallelism(graph.vertex(vid).parallelism).set_max_parallelism(graph.max_parallelism(vid))
        return ds.start_new_chain() if head and not chaining else ds

    def keyed(vid: str, edges: list[Any]) -> Any:
        """The edges' streams keyed by the record's key (PyFlink's key_by, with every helper pinned)."""
        parts = [pin(streams[e.source].map(fn.AddKey(), output_type=keyed_row), f"{vid}/key{e.key}", e.source) for e in edges]
        union = parts[0].union(*parts[1:]) if len(parts) > 1 else parts[0]
        j_keyed = union._j_data_stream.keyBy(get_gateway().jvm.KeyByKeySelector(), Types.ROW([Types.LONG()]).get_java_type_info())
        return KeyedStream(j_keyed, rec, union)

    def partitioned(vid: str, edges: list[Any]) -> tuple[Any, bool]:
        """The edges' streams partitioned and unioned; True when an edge ends in a custom edge's unwrapping map."""
        v = graph.vertex(vid)
        parts = [_partition(streams[e.source], e.partitioner, (graph.vertex(e.source).parallelism, graph.max_parallelism(e.source)),
                            (v.parallelism, graph.max_parallelism(vid)), f"{vid}/custom{e.key}", chaining) for e in edges]
        merged = parts[0].union(*parts[1:]) if len(parts) > 1 else parts[0]
        if not isinstance(merged, DataStream):
            merged = DataStream(merged._j_data_stream)
        return merged, any(e.partitioner == "custom" for e in edges)

    for vid in graph.topological_order():
        v = graph.vertex(vid)
        if v.kind == "source":
            layout = layouts[vid]
            seq = env.from_source(NumberSequenceSource(0, max(layout.records - 1, 0)), WatermarkStrategy.no_watermarks(), f"{vid}/seq")
            seq = pin(seq, f"{vid}/seq", vid, head=True)
            streams[vid] = pin(seq.map(fn.Generate(layout, probe(vid)), output_type=rec), vid, vid)
            continue
        ins = sorted(graph.in_edges(vid), key=lambda e: e.key)
        if v.kind == "keyed_count":
            counted = keyed(vid, ins).process(fn.Count(probe(vid)), output_type=rec)
            streams[vid] = pin(counted, vid, vid, head=True)
            continue
        if v.kind in ("co_map", "broadcast_state"):
            gates = graph.gates(vid)
            data, other = gates[0][0], gates[1][0]
            if v.kind == "co_map":
                first, _ = partitioned(vid, [data])
                second, _ = partitioned(vid, [other])
                joined = first.connect(second).map(fn.CoIdentity(probe(vid)), output_type=rec)
            else:
                shared = streams[other.source].broadcast(fn.broadcast_descriptor())
                if data.partitioner == "hash":
                    joined = keyed(vid, [data]).connect(shared).process(fn.KeyedBroadcast(probe(vid)), output_type=rec)
                else:
                    first, _ = partitioned(vid, [data])
                    joined = first.connect(shared).process(fn.Broadcast(probe(vid)), output_type=rec)
            streams[vid] = pin(joined, vid, vid, head=True)  # several inputs: never chained to a producer anyway
            continue
        merged, custom = partitioned(vid, ins)
        head = not custom  # the custom edge's unwrapping map already started the chain
        if v.kind == "map":
            streams[vid] = pin(merged.map(fn.Map(probe(vid)), output_type=rec), vid, vid, head)
        elif v.kind == "filter":
            streams[vid] = pin(merged.filter(fn.Filter(v.drop_every, probe(vid))), vid, vid, head)
        elif v.kind == "union":
            streams[vid] = pin(merged.map(fn.Identity(probe(vid)), output_type=rec), vid, vid, head)
        elif v.kind == "sink":
            lines = pin(merged.map(fn.Format(probe(vid)), output_type=Types.STRING()), f"{vid}/format", vid, head)
            sink = (FileSink.for_row_format(sinks[vid], Encoder.simple_string_encoder())
                    .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
                    .with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy())
                    .with_output_file_config(OutputFileConfig.builder().with_part_prefix("part").with_part_suffix(".csv").build())
                    .build())
            lines.sink_to(sink).uid(vid).name(vid).set_parallelism(v.parallelism)
