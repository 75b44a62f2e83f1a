"""Failure and recovery: global failover from the latest completed checkpoint (streaming jobs; region
failover is reference.recovery.region_failover).

Restore order follows Flink (facts §3.8): recovered output state is queued in each subpartition
before anything new, followed by EndOfChannelState, which holds the subpartition until the
consumer's whole gate has seen it; recovered input state is consumed before the gate reads any
live data. Committers re-commit what the restored checkpoint holds; writers abort the rest.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from cutcheck.model.execution import SubtaskId
from cutcheck.model.kinds import VertexKind
from cutcheck.reference.events.stream import Recovering
from cutcheck.reference.recovery.fanout import after_restore
from cutcheck.reference.recovery.rescale import rescaled_assignment
from cutcheck.reference.runtime.network import END_OF_CHANNEL_STATE, Buf
from cutcheck.reference.runtime.operators import KeyedOperator
from cutcheck.reference.runtime.records import KEY, SPLIT
from cutcheck.reference.runtime.sinks import SinkOperator
from cutcheck.reference.storage.memory import CompletedCheckpoint

if TYPE_CHECKING:
    from cutcheck.reference.recovery.doors import RecoveryRun


def global_failover(engine: RecoveryRun, target: str, failure_index: int | None) -> None:
    engine.event("failure", target)
    engine.coordinator.abort_all("job failover", "JOB_FAILURE")
    latest = engine.storage.latest()
    new_parallelism = None
    for r in engine.scenario.rescales:
        if r.on_failure == failure_index:
            new_parallelism = dict(r.parallelism)
    keep: set[str] = set()
    if latest is not None:
        for sid, snap in latest.tasks.items():
            if engine.graph.vertex(sid.vertex).kind is VertexKind.SINK:
                keep |= {e[1] for e in snap.operator.get("pending", [])}
    engine.store.abort_all_except(keep)
    engine.start_attempt(None)
    rescaled = new_parallelism is not None and any(engine.parallelism.get(v) != p for v, p in new_parallelism.items())
    engine.bus.publish(Recovering(None if latest is None else latest.cp, None, rescaled, engine.step))
    if latest is None:
        engine.rebuild(None, new_parallelism)
        if rescaled:
            after_restore(engine, None)  # broadcast copies follow the new parallelism from the start
        engine.event("restart", "no completed checkpoint: from the beginning")
    else:
        engine.rebuild(latest, new_parallelism)
        engine.event("restore", f"checkpoint {latest.cp}" + (f", parallelism {new_parallelism}" if rescaled else ""))


def restore_state(engine: RecoveryRun, done: CompletedCheckpoint, only: Collection[SubtaskId] | None = None) -> dict[str, Any]:
    """Give every new subtask its operator state and every new channel its in-flight data; with
    ``only`` (region failover), only those subtasks and the channels into them."""
    if done.parallelism != engine.parallelism:
        operator_states, channel_states, report = rescaled_assignment(engine, done)
    else:
        operator_states = {sid: snap.operator for sid, snap in done.tasks.items()}
        channel_states = {}
        for snap in done.tasks.values():
            if only is not None and snap.sid not in only:
                continue  # a region holds both ends of each of its channels
            for key, bufs in snap.input_state.items():
                channel_states.setdefault(key, ([], []))[0].extend(bufs)
            for key, bufs in snap.output_state.items():
                channel_states.setdefault(key, ([], []))[1].extend(bufs)
        # The checkpoint's parallelism is the new one, yet the failed attempt may have run at another
        # (it was rescaled, then failed again before any checkpoint completed): the broadcast copies the
        # oracle expects follow the checkpoint and the new parallelism, never the failed attempt's.
        after_restore(engine, done)
        report = {"checkpoint": done.cp, "rescaled": False, "edges": {}}
        for (edge, _, _), (inp, out) in channel_states.items():
            e = report["edges"].setdefault(edge, {"input_records": 0, "output_records": 0, "filtered": 0})
            e["input_records"] += sum(len(b.recs) for b in inp)
            e["output_records"] += sum(len(b.recs) for b in out)
    tasks = [t for t in engine.tasks.values() if only is None or t.sid in only]
    for task in tasks:
        state = operator_states.get(task.sid)
        if state is not None:
            task.op.restore(state)
        task.last_cp = done.cp
    install_channel_state(engine, channel_states, only)
    for task in tasks:
        if isinstance(task.op, SinkOperator):
            task.op.recover_and_commit(done.cp)
    return report


def install_channel_state(engine: RecoveryRun, channel_states: dict[tuple[int, int, int], tuple[list[Buf], list[Buf]]],
                          only: Collection[SubtaskId] | None = None) -> None:
    """Recovered input first (sequence numbers from 0), then recovered output, then live data."""
    for sp in engine.subpartitions:
        if only is not None and sp.task.sid not in only:
            continue
        ch = sp.channel
        key = (sp.partition.edge, sp.task.sid.index, sp.consumer)
        inp, out = channel_states.get(key, ([], []))
        seq = 0
        for b in inp:
            ch.recovered.append(Buf(list(b.recs), seq, b.origin))
            seq += len(b.recs)
        sp.transmitted = seq
        for b in out:
            sp.queue.append(Buf(list(b.recs), seq, b.origin))
            sp.partition.in_use += 1
            seq += len(b.recs)
        sp.emitted = sp.recovered_end = seq
        sp.queue.append(END_OF_CHANNEL_STATE)
        ch.recovery_pending = True
        if seq:
            _await_restored(ch, sp.partition.edge, inp, out)


def _await_restored(ch: Any, edge: int, inp: list[Buf], out: list[Buf]) -> None:
    """Count, per key and split, the restored records a keyed consumer must process before any new record
    of them on an edge whose order it checks (``KeyedOperator.awaiting``): the split may now come from
    another producer, over another channel of the same gate."""
    op = ch.task.op
    if not isinstance(op, KeyedOperator) or ch.edge not in op.check_order_edges:
        return
    awaiting = op.awaiting
    for b in (*inp, *out):
        for rec in b.recs:
            lk = (rec[KEY], rec[SPLIT], edge)
            awaiting[lk] = awaiting.get(lk, 0) + 1


def subtask(vertex: str, index: int) -> SubtaskId:
    return SubtaskId(vertex, index)
