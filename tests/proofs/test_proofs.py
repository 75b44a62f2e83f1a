"""The registry: every positive proof proves, every negative control gives a readable
counterexample, and every proof fails when its rule is mutated (no proof that cannot fail)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import z3

from cutcheck import proofs
from cutcheck.model.errors import CutcheckError
from cutcheck.model.protocol import ACTIONS, Protocol
from cutcheck.proofs import cut, inflight, keygroups, replay, rescale
from cutcheck.proofs.registry import REGISTRY, ProofResult


@pytest.fixture(scope="module")
def results() -> dict[str, ProofResult]:
    return {r.name: r for r in proofs.run()}


def test_the_registry_names_the_brief_s_proofs() -> None:
    names = proofs.names()
    for n in ("cut-aligned", "cut-unaligned", "cut-timeout", "replay-exactly-once", "keygroup-ownership",
              "range-mapper-complete", "rescale-routing", "inflight-bound", "cut-unaligned[no-output-state]",
              "cut-unaligned[process-after-barrier]", "cut[at_least_once]", "rescale-routing[no-rescale-filter]",
              "cut-unaligned[early-checkpoint-in-recovery]", "cut-aligned-concurrent",
              "cut-aligned-concurrent[complete-records-oldest]"):
        assert n in names
    assert all(("[" in n) == (REGISTRY[n].expected == "counterexample") for n in names)


def test_every_result_is_as_expected(results: dict[str, ProofResult]) -> None:
    for r in results.values():
        assert r.status in ("proved", "counterexample", "unknown")
        assert r.as_expected, (r.name, r.status, r.counterexample)
        assert r.bound and r.seconds >= 0


def test_negative_controls_print_a_short_trace(results: dict[str, ProofResult]) -> None:
    for name in ("cut-unaligned[no-output-state]", "cut-unaligned[process-after-barrier]", "cut[at_least_once]",
                 "cut-unaligned[partial-input-state]", "cut-unaligned[early-checkpoint-in-recovery]",
                 "cut-aligned-concurrent[complete-records-oldest]"):
        text = results[name].counterexample
        assert text and "CUT violated" in text and " 1. " in text and text.count("\n") <= 12, text
        assert "encoding mismatch" not in text
    assert "accepted twice" in results["rescale-routing[no-rescale-filter]"].counterexample


def test_the_recovery_control_goes_through_a_restore(results: dict[str, ProofResult]) -> None:
    """early-checkpoint-in-recovery only shows after a restore: its trace must contain one, and the
    checkpoint that breaks CUT is one taken after it."""
    r = results["cut-unaligned[early-checkpoint-in-recovery]"]
    assert r.status == "counterexample" and r.method == "search"
    lines = r.counterexample.splitlines()
    restore = next(k for k, line in enumerate(lines) if line.endswith(". restore 1"))
    assert any(". complete 2" in line for line in lines[restore:]) and "checkpoint 2" in lines[-1]


def test_labels_say_how_each_result_was_obtained(results: dict[str, ProofResult]) -> None:
    labels = {n: r.label for n, r in results.items()}
    for n in ("cut-aligned", "cut-unaligned", "cut-timeout", "cut-aligned-concurrent", "inflight-bound"):
        assert labels[n] == "proved (unbounded induction)", (n, labels[n])
    for n in ("keygroup-ownership", "range-mapper-complete", "rescale-routing"):
        assert labels[n] == "proved for all values up to 32768", (n, labels[n])
    replay_result = results["replay-exactly-once"]
    assert replay_result.label == "proved under assumptions"
    assert replay_result.assumptions and "deterministic" in replay_result.assumptions[0]
    for n, r in results.items():
        if r.expected == "counterexample":
            assert r.label in ("counterexample (bounded search)", "counterexample (Z3 model)"), (n, r.label)
        if r.label != "proved under assumptions":
            assert not r.assumptions, n
        d = r.to_dict()
        assert d["label"] == r.label and d["assumptions"] == list(r.assumptions) and d["method"] == r.method


def test_a_result_cannot_claim_more_than_its_method() -> None:
    with pytest.raises(ValueError, match="does not prove"):
        ProofResult("x", "proved", "search <= 10", 0.0, method="search")
    with pytest.raises(ValueError, match="assumptions"):
        ProofResult("x", "proved", "unbounded", 0.0, method="assumptions")
    with pytest.raises(ValueError, match="assumptions"):
        ProofResult("x", "proved", "unbounded", 0.0, assumptions=("a hidden one",))
    with pytest.raises(ValueError, match="limit"):
        ProofResult("x", "proved", "small", 0.0, method="values")
    r = ProofResult("x", "unknown", "search depth 10", 0.0, method="search")
    assert r.label == "unknown (bounded search)"


def test_unknown_names_raise_with_the_list() -> None:
    with pytest.raises(CutcheckError, match="known proofs: cut-aligned"):
        proofs.run(["cut-aligned", "no-such-proof"])


def test_run_selected_names() -> None:
    [r] = proofs.run(["inflight-bound"])
    assert r.name == "inflight-bound" and r.status == "proved" and r.expected == "proved"


# -------------------------------------------------------------------------- mutated rules fail
def test_cut_fails_when_a_guard_is_dropped() -> None:
    """Letting u send while its priority barrier is pending breaks CUT (the FIFO overtaking rule)."""
    send = next(a for a in ACTIONS if a.name == "SendBuffer")

    def lax(P, o, s, p):  # noqa: ANN001, ANN202
        return [c for c in send.guard(P, o, s, p) if "priority" not in c[0]]

    actions = tuple(replace(a, guard=lax) if a is send else a for a in ACTIONS)
    protocol = Protocol("unaligned", actions=actions)
    status, why = cut.check_induction(protocol)
    assert status == "counterexample" and "SendBuffer" in why
    trace = cut.find_trace(protocol, 8)
    assert trace is not None and ("transmit", 1) in trace


def test_keygroup_ownership_fails_for_an_off_by_one_range() -> None:
    off_by_one = keygroups.KeyGroupRules(end=lambda a, m, p, i: a.div((i + 1) * m, p))
    r = keygroups.keygroup_ownership(off_by_one)
    assert r.status == "counterexample" and "maxP=" in r.counterexample


def test_keygroup_ownership_cross_checks_the_model() -> None:
    """A consistent partition that is not Flink's passes Z3 but not the grid against model.keygroups."""
    reversed_owner = keygroups.KeyGroupRules(
        start=lambda a, m, p, i: a.div((p - 1 - i) * m + p - 1, p) * 0 + keygroups.FLINK_KG.start(a, m, p, i),
        owner=lambda a, m, p, kg: keygroups.FLINK_KG.owner(a, m, p, kg),
    )
    assert keygroups.keygroup_ownership(reversed_owner).status == "proved"
    r = keygroups._grid_keygroups(keygroups.KeyGroupRules(owner=lambda a, m, p, kg: a.div(kg * p + 1, m)))
    assert r is not None and "operator_index" in r


def test_range_mapper_fails_when_it_drops_an_overlap() -> None:
    def drop_last(a, old_p, new_p, j):  # noqa: ANN001, ANN202
        lo, hi = keygroups.FLINK_MAPPERS.old_interval(a, old_p, new_p, j)
        return lo, hi - 1

    r = keygroups.range_mapper_complete(keygroups.MapperRules(range_old=drop_last))
    assert r.status == "counterexample" and "RANGE" in r.counterexample


def test_round_robin_fails_when_it_double_assigns() -> None:
    twice = keygroups.MapperRules(rr=lambda a, i, n, old_p, new_p: a.and_(i >= n, i < old_p))
    r = keygroups.range_mapper_complete(twice)
    assert r.status == "counterexample" and "at most one" in r.counterexample


def test_replay_fails_when_input_state_comes_after_output_state() -> None:
    def output_first(P, o, s, p):  # noqa: ANN001, ANN202
        lc = s.last
        return replace(s, sent=lc.sent, done=lc.pre, inq=o.concat(lc.ostate, lc.istate), out=o.empty(),
                       slots=tuple(replace(sl) for sl in s.slots))

    r = replay.prove_replay(output_first)
    assert r.status == "counterexample" and "d applied" in r.counterexample


def test_inflight_bound_fails_when_a_sender_may_exceed_its_pool() -> None:
    r = inflight.prove_bound(may_request=lambda held, pool: held <= pool)
    assert r.status == "counterexample" and "SenderRequestsBuffer" in r.counterexample
    r = inflight.prove_bound(exclusive_credit=lambda used, n: used <= n)
    assert r.status == "counterexample"


def test_rescale_routing_fails_without_the_filter_or_with_reordering() -> None:
    assert rescale.prove_routing(rescale.no_filter).status == "counterexample"

    def swap_with_previous(out, n, idx):  # noqa: ANN001, ANN202  # a record overtakes the one before it
        return z3.Store(z3.Store(out, n, out[n - 1]), n - 1, idx), n + 1

    r = rescale.prove_order(swap_with_previous)
    assert r.status == "counterexample" and "out of order" in r.counterexample


def test_the_range_mapper_finding_is_real() -> None:
    """The Z3 counterexample for a job max parallelism that is not a power of two, checked concretely."""
    from cutcheck.model.keygroups import key_group_range
    from cutcheck.model.partitioning import RANGE

    m, old_p, new_p, old, new = 16387, 7, 16386, 2, 4681
    assert key_group_range(m, old_p, old).overlaps(key_group_range(m, new_p, new))
    assert old not in RANGE.old_subtasks(new, old_p, new_p)
