"""Operators of DESIGN's vertex kinds. Each turns one input record into zero or more output records.

State is kept so that a snapshot is a cheap copy and a restore (with or without rescaling) can
split it: keyed state is stored per key group; operator (list) state is a list of entries.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from cutcheck.model.errors import InvariantViolation
from cutcheck.model.keygroups import KeyGroupRange, assign_to_key_group, key_group_range
from cutcheck.model.kinds import CheckpointMode
from cutcheck.reference.core.seams import seam
from cutcheck.reference.runtime.records import (
    COUNT,
    COUNTER,
    KEY,
    OFFSET,
    RID,
    SPLIT,
    VALUE,
    filter_keeps,
    map_value,
)

if TYPE_CHECKING:
    from cutcheck.reference.runtime.network import InputChannel
    from cutcheck.reference.runtime.records import Record
    from cutcheck.reference.runtime.tasks import Task


class Operator:
    """Stateless pass-through; subclasses override ``apply``, ``snapshot`` and ``restore``."""

    keyed = False

    def __init__(self, task: Task):
        self.task = task

    def apply(self, rec: Record, ch: InputChannel) -> None:
        self.task.emit(rec)

    def apply_many(self, recs: list[Record], i: int, stop: int, ch: InputChannel) -> int:
        """Apply ``recs[i:stop]`` in order until the task's output is full; returns the index of the
        first record not applied. Operators on the per-record hot path define their transformation
        here, inside the loop, and ``apply`` in terms of it (one Python call per buffer, not per record)."""
        task, apply = self.task, self.apply
        while i < stop and not task.out_blocked:
            apply(recs[i], ch)
            i += 1
        return i

    def snapshot(self) -> dict[str, Any]:
        return {}

    def restore(self, state: dict[str, Any]) -> None:
        pass

    def end_of_input(self) -> None:
        pass


class MapOperator(Operator):
    def apply(self, rec: Record, ch: InputChannel) -> None:
        self.apply_many([rec], 0, 1, ch)

    def apply_many(self, recs: list[Record], i: int, stop: int, ch: InputChannel) -> int:
        task = self.task
        emit = task.emit
        while i < stop and not task.out_blocked:
            rec = recs[i]
            emit((rec[RID], rec[KEY], map_value(rec[VALUE]), rec[SPLIT], rec[OFFSET], rec[COUNT], rec[COUNTER]))
            i += 1
        return i


class FilterOperator(Operator):
    def __init__(self, task: Task):
        super().__init__(task)
        self.drop_every = task.vertex.drop_every

    def apply(self, rec: Record, ch: InputChannel) -> None:
        if filter_keeps(rec[RID], self.drop_every):
            self.task.emit(rec)


@seam
def state_change_key_group(key_group: int, previous_key_group: int) -> int:
    """A keyed state change is filed under the key group of the key it changes (the current key
    context is set before the change is recorded), so it moves with that key group on rescale (facts §1)."""
    return key_group


@seam
def subtask_key_group_range(max_parallelism: int, parallelism: int, index: int) -> KeyGroupRange:
    """Subtask ``index`` of ``parallelism`` owns the key groups Flink's ``KeyGroupRangeAssignment``
    gives it: ranges that meet without overlap and cover all ``max_parallelism`` of them (facts §1)."""
    return key_group_range(max_parallelism, parallelism, index)


@seam
def broadcast_element_stored(subtask: int, rid: int) -> bool:
    """Every parallel instance of a broadcast-state operator stores every broadcast element it
    receives, so all of them hold the same broadcast state (a restore copies one instance's whole, facts §3)."""
    return True


class KeyedOperator(Operator):
    """Keyed state by key group, with the OWNERSHIP and ORDER checks every keyed record passes."""

    keyed = True

    def __init__(self, task: Task):
        super().__init__(task)
        self.max_parallelism = task.max_parallelism
        self.range = task.engine.rules[subtask_key_group_range](self.max_parallelism, task.parallelism, task.sid.index)
        self.kg_cache: dict[int, int] = {}
        # key group -> {key: count}
        self.counts: dict[int, dict[int, int]] = {}
        # key group -> {(key, split, edge, producer): last offset}: ORDER per key, split and channel lineage
        self.order: dict[int, dict[tuple[int, int, int, int], int]] = {}
        # At-least-once promises neither CUT nor ORDER across a restore (replayed records were
        # already applied), only that nothing is lost; its control is the EXACTLY_ONCE verdict.
        at_least_once = task.engine.scenario.checkpoint.mode == CheckpointMode.AT_LEAST_ONCE
        self.check_order_edges: frozenset[int] = (
            frozenset() if at_least_once else task.engine.order_edges.get(task.sid.vertex, frozenset())
        )
        # (key, split, edge) -> records of it restored as channel state and not yet processed (filled by
        # reference.recovery.recovery.install_channel_state): a live record of one of them is ORDER broken,
        # wherever its producer now is (a rescale hands a split to another producer, facts §5).
        self.awaiting: dict[tuple[int, int, int], int] = {}

    def key_group(self, key: int) -> int:
        kg = self.kg_cache.get(key)
        if kg is None:
            kg = self.kg_cache[key] = assign_to_key_group(key, self.max_parallelism)
        return kg

    def check(self, rec: Record, ch: InputChannel) -> int:
        """OWNERSHIP and ORDER of one record; returns its key group."""
        for _, kg in self.checked([rec], 0, 1, ch):
            return kg
        raise AssertionError("unreachable: checked() yields every record or raises")

    def checked(self, recs: list[Record], i: int, stop: int, ch: InputChannel) -> Iterator[tuple[Record, int]]:
        """Yield ``(record, key group)`` for ``recs[i:stop]``, each after its OWNERSHIP and ORDER
        checks. Lazily: a caller that stops early (its output is full) leaves the rest unchecked.
        Every keyed record passes here, so what is fixed for the buffer (its channel's edge and
        lineage) is looked up once."""
        kg_cache, lo, hi, mp = self.kg_cache, self.range.start, self.range.end, self.max_parallelism
        ordered = ch.edge in self.check_order_edges
        edge, producer, order_state = ch.edge, self.task.lineage, self.order
        awaiting = self.awaiting if ordered else None
        # Records recs[i:restored] are restored channel state (sequence numbers below recovered_end).
        restored = i + ch.sender.recovered_end - ch.processed if awaiting and ch.sender is not None else i
        for j in range(i, stop):
            rec = recs[j]
            key = rec[KEY]
            kg = kg_cache.get(key)
            if kg is None:
                kg = kg_cache[key] = assign_to_key_group(key, mp)
            if not lo <= kg <= hi:
                raise InvariantViolation(
                    "OWNERSHIP",
                    f"{self.task.sid} received key {key} (key group {kg}) outside its range [{lo}, {hi}] (rid {rec[RID]})",
                )
            if ordered:
                lineage = (key, rec[SPLIT], edge, producer)
                order = order_state.get(kg)
                if order is None:
                    order = order_state[kg] = {}
                last = order.get(lineage, -1)
                if rec[OFFSET] <= last:
                    raise InvariantViolation(
                        "ORDER",
                        f"{self.task.sid} got offset {rec[OFFSET]} of key {key}, split {rec[SPLIT]} "
                        f"after offset {last} (rid {rec[RID]}, edge {edge}, producer {producer})",
                    )
                order[lineage] = rec[OFFSET]
                if awaiting:
                    self._restored_first(awaiting, rec, edge, j < restored, producer)
            yield rec, kg

    def _restored_first(self, awaiting: dict[tuple[int, int, int], int], rec: Record, edge: int, restored: bool,
                        producer: int) -> None:
        """ORDER across a restore: every restored record of a key and split on an edge is processed before
        any new one, whichever channels of the gate hold them (Flink converts a gate's recovered channels
        and resumes its producers only after the whole gate's channel state is consumed, facts §5)."""
        lk = (rec[KEY], rec[SPLIT], edge)
        left = awaiting.get(lk)
        if left is None:
            return
        if not restored:
            raise InvariantViolation(
                "ORDER",
                f"{self.task.sid} got new offset {rec[OFFSET]} of key {rec[KEY]}, split {rec[SPLIT]} (edge {edge}, "
                f"producer {producer}) while {left} restored record(s) of that key and split were still unprocessed "
                f"(rid {rec[RID]})",
            )
        if left > 1:
            awaiting[lk] = left - 1
        else:
            del awaiting[lk]

    def snapshot(self) -> dict[str, Any]:
        return {
            "counts": {kg: dict(m) for kg, m in self.counts.items()},
            "order": {kg: dict(m) for kg, m in self.order.items()},
        }

    def restore(self, state: dict[str, Any]) -> None:
        self.counts = {kg: dict(m) for kg, m in state.get("counts", {}).items()}
        self.order = {kg: dict(m) for kg, m in state.get("order", {}).items()}
        for kg in list(self.counts) + list(self.order):
            if kg not in self.range:
                raise InvariantViolation("OWNERSHIP", f"{self.task.sid} restored state of key group {kg} outside its range")


class KeyedCountOperator(KeyedOperator):
    def __init__(self, task: Task):
        super().__init__(task)
        self.counter_index = task.engine.vertex_index[task.sid.vertex]
        self.file_under = task.engine.rules[state_change_key_group]
        self.previous_kg = -1  # the key group of the record processed before (the stale key context)
        self.misfiled: dict[int, tuple[int, int]] = {}  # key -> (its key group, the one its change was filed under)

    def snapshot(self) -> dict[str, Any]:
        state = super().snapshot()
        for key, (kg, filed) in self.misfiled.items():  # durable state goes where the change was filed
            c = state["counts"].get(kg, {}).pop(key, None)
            if c is not None and filed >= 0:
                state["counts"].setdefault(filed, {})[key] = c
        return state

    def apply(self, rec: Record, ch: InputChannel) -> None:
        self.apply_many([rec], 0, 1, ch)

    def apply_many(self, recs: list[Record], i: int, stop: int, ch: InputChannel) -> int:
        task, counts, counter = self.task, self.counts, self.counter_index
        emit = task.emit
        if task.out_blocked:
            return i
        file_under, previous, misfiled = self.file_under, self.previous_kg, self.misfiled
        for rec, kg in self.checked(recs, i, stop, ch):
            key = rec[KEY]
            m = counts.get(kg)
            if m is None:
                m = counts[kg] = {}
            c = m.get(key, 0) + 1
            m[key] = c
            filed = file_under(kg, previous)
            if filed != kg:
                misfiled[key] = (kg, filed)
            elif misfiled:
                misfiled.pop(key, None)
            previous = kg
            emit((rec[RID], key, rec[VALUE], rec[SPLIT], rec[OFFSET], c, counter))
            i += 1
            if task.out_blocked:
                break  # the generator checked no record beyond this one
        self.previous_kg = previous
        return i


class BroadcastStateOperator(KeyedOperator):
    """Data on gate 0 (checked for ownership when hash-partitioned); broadcast elements on gate 1.

    Broadcast elements are applied to broadcast state (a multiset of their rids: a broadcast edge
    from a parallel producer legitimately delivers one rid once per producer subtask) and emitted,
    so the oracle sees each application at the sinks. Flink snapshots broadcast state on every
    subtask; on restore each new subtask gets one old subtask's copy (see reference.recovery.rescale).
    """

    def __init__(self, task: Task):
        super().__init__(task)
        self.broadcast: dict[int, int] = {}
        self.hashed = any(e.partitioner == "hash" and e.gate == 0 for e in task.engine.graph.in_edges(task.sid.vertex))

    def apply(self, rec: Record, ch: InputChannel) -> None:
        if ch.gate.index == 1:
            if self.task.engine.rules[broadcast_element_stored](self.task.sid.index, rec[RID]):
                self.broadcast[rec[RID]] = self.broadcast.get(rec[RID], 0) + 1
        elif self.hashed:
            self.check(rec, ch)
        self.task.emit(rec)

    def snapshot(self) -> dict[str, Any]:
        snap = super().snapshot()
        snap["broadcast"] = [rid for rid, n in sorted(self.broadcast.items()) for _ in range(n)]
        return snap

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        self.broadcast = {}
        for rid in state.get("broadcast", ()):
            self.broadcast[rid] = self.broadcast.get(rid, 0) + 1
