"""The engine's per-step action scan is written out for speed; here it is held equal, step by step,
to the same scan built from the definitions it inlines (``Task.readable``, ``Task.has_unflushed``,
``Engine._can_transmit``) over generated scenarios with failures, rescales and every mode."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from cutcheck.model.errors import InvariantViolation, RestoreRefused
from cutcheck.reference import Scenario
from cutcheck.reference.batch import make_engine
from cutcheck.reference.fuzzing.generate import scenario_dict
from cutcheck.reference.runtime.network import Buf
from cutcheck.reference.storage.memory import InMemoryStorage
from tests.strategies import HypothesisDraw


def plain_scan(e: Any) -> list[tuple[int, str, Any]]:
    """The enabled actions as DESIGN states them, one predicate per action kind."""
    sched = e.scenario.schedule
    fast = sched.slowdown
    slow = 1 if sched.policy == "backpressure" else fast
    acts: list[tuple[int, str, Any]] = []
    for t in e.tasks.values():
        w = slow if t.sid.vertex == sched.slow else fast
        if t.pending_priority:
            acts.append((fast, "_do_priority", t))
            continue
        if t.direct_triggers and (t.vertex.kind == "source" or t.finished
                                  or e.checkpoints.snapshots_unaligned(t, t.direct_triggers[0])):
            acts.append((fast, "_do_direct_checkpoint", t))
        if t.vertex.kind == "source":
            if not t.finished and t.output_available():
                acts.append((w, "_do_produce", t))
        else:
            for ch in t.channels:
                if not t.readable(ch):
                    continue
                head = ch.recovered[0] if ch.recovered else ch.queue[0]
                if isinstance(head, Buf) and not t.output_available():
                    continue
                acts.append((w if isinstance(head, Buf) else fast, "_do_process", ch))
        if t.has_unflushed():
            acts.append((sched.flush_weight, "_do_flush", t))
    for sp in e.subpartitions:
        if sp.queue and e._can_transmit(sp):
            acts.append((fast, "_transmit" if sched.records_per_action else "_do_transmit", sp))
    for note in e.notifications:
        acts.append((fast, "_do_notify", note))
    return acts


def _named(acts: list[tuple[int, Any, Any]]) -> list[tuple[int, str, Any]]:
    return [(w, fn.__name__, id(arg)) for w, fn, arg in acts]


@given(st.data())
def test_inlined_scan_equals_the_definitions(data: Any) -> None:
    sdict = scenario_dict(HypothesisDraw(data.draw), max_records=120)
    if data.draw(st.booleans()):
        sdict["schedule"]["records_per_action"] = data.draw(st.integers(1, 64))
    scenario = Scenario.from_json(sdict)
    engine = make_engine(scenario, chooser=None, storage=InMemoryStorage(), trace=False, log_sink=None,
                         max_steps=20_000, restore=None)
    compared = 0
    try:
        while not engine.finished and engine.step < 20_000:
            fast = _named(engine.enabled_actions())
            plain = [(w, name, id(arg)) for w, name, arg in plain_scan(engine)]
            # The batch engine adds its own actions after the streaming ones.
            assert fast[:len(plain)] == plain, f"step {engine.step}"
            compared += 1
            engine.tick()
    except (InvariantViolation, RestoreRefused):
        pass  # a scenario may legitimately fail a check or a restore; every step before it was compared
    assert compared > 0
