"""Partitioners, selectors, pointwise wiring and SubtaskStateMapper against facts §2."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cutcheck.model.errors import RestoreRefused
from cutcheck.model.keygroups import (
    KeyGroupRange,
    assign_to_key_group,
    key_group_range,
    operator_index,
)
from cutcheck.model.partitioning import (
    ARBITRARY,
    FIRST,
    FULL,
    PARTITIONERS,
    RANGE,
    ROUND_ROBIN,
    UNSUPPORTED,
    SubtaskStateMapper,
    ambiguous_old_subtasks,
    assign_channel_state,
    connection_pattern,
    invert_mapping,
    is_broadcast,
    is_pointwise,
    make_selector,
    pointwise_wiring,
    subtask_state_mapper,
    supports_unaligned,
)

ALL = ("forward", "rescale", "rebalance", "shuffle", "broadcast", "global", "hash", "custom")

# ------------------------------------------------------------------------------ static table (§2.2)

# partitioner: (pointwise, broadcast, upstream mapper, downstream mapper, supports unaligned)
TABLE = {
    "forward": (True, False, UNSUPPORTED, UNSUPPORTED, False),
    "rescale": (True, False, UNSUPPORTED, UNSUPPORTED, False),
    "rebalance": (False, False, ARBITRARY, ROUND_ROBIN, True),
    "shuffle": (False, False, ARBITRARY, ROUND_ROBIN, True),
    "broadcast": (False, True, UNSUPPORTED, UNSUPPORTED, False),
    "global": (False, False, ARBITRARY, FIRST, True),
    "hash": (False, False, ARBITRARY, RANGE, True),
    "custom": (False, False, ARBITRARY, FULL, False),
}


@pytest.mark.parametrize("name", ALL)
def test_partitioner_table(name: str) -> None:
    pointwise, broadcast, up, down, unaligned = TABLE[name]
    assert is_pointwise(name) is pointwise
    assert connection_pattern(name) == ("POINTWISE" if pointwise else "ALL_TO_ALL")
    assert is_broadcast(name) is broadcast
    assert subtask_state_mapper(name, "upstream") is up
    assert subtask_state_mapper(name, "downstream") is down
    assert supports_unaligned(name) is unaligned
    assert PARTITIONERS[name].name == name


def test_partitioner_names_match_the_graph_model() -> None:
    from cutcheck.model.graph import PARTITIONERS as GRAPH_PARTITIONERS

    assert tuple(PARTITIONERS) == ALL == GRAPH_PARTITIONERS


def test_unknown_partitioner_and_side() -> None:
    with pytest.raises(ValueError, match="unknown partitioner 'keyBy'"):
        is_pointwise("keyBy")
    with pytest.raises(ValueError, match="side"):
        subtask_state_mapper("hash", "input")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown partitioner"):
        make_selector("HASH", 2, max_parallelism=128)


def test_mapper_names_and_ambiguity() -> None:
    assert [m.name for m in SubtaskStateMapper] == [
        "ARBITRARY",
        "ROUND_ROBIN",
        "FIRST",
        "FULL",
        "RANGE",
        "UNSUPPORTED",
    ]
    assert {m.name for m in SubtaskStateMapper if m.ambiguous} == {"FULL", "RANGE"}


# ------------------------------------------------------------------------------ mapper examples (§2.4)


def test_round_robin_10_to_4() -> None:
    expected = {0: (0, 4, 8), 1: (1, 5, 9), 2: (2, 6), 3: (3, 7)}
    assert ROUND_ROBIN.new_to_old(10, 4) == expected
    assert ARBITRARY.new_to_old(10, 4) == expected  # ARBITRARY is currently ROUND_ROBIN


def test_round_robin_scale_up() -> None:
    assert ROUND_ROBIN.new_to_old(2, 4) == {0: (0,), 1: (1,), 2: (), 3: ()}


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (3, 2, {0: (0, 1), 1: (1, 2)}),
        (2, 3, {0: (0,), 1: (0, 1), 2: (1,)}),
        (4, 2, {0: (0, 1), 1: (2, 3)}),
        (5, 3, {0: (0, 1), 1: (1, 2, 3), 2: (3, 4)}),
    ],
)
def test_range_examples(old: int, new: int, expected: dict[int, tuple[int, ...]]) -> None:
    assert RANGE.new_to_old(old, new) == expected


def test_first_and_full() -> None:
    assert FIRST.new_to_old(3, 2) == {0: (0, 1, 2), 1: ()}
    assert FIRST.new_to_old(1, 3) == {0: (0,), 1: (), 2: ()}
    assert FULL.new_to_old(2, 3) == {0: (0, 1), 1: (0, 1), 2: (0, 1)}


@pytest.mark.parametrize(("old", "new"), [(2, 3), (3, 2), (1, 4), (4, 4)])
def test_unsupported_refuses_the_mapper_call(old: int, new: int) -> None:
    # The mapper itself always refuses (as Flink's does); the 1:1 exemption is assign_channel_state's.
    with pytest.raises(
        RestoreRefused, match=r"Cannot rescale the given pointwise partitioner\. Did you change"
    ):
        UNSUPPORTED.old_subtasks(0, old, new)


@pytest.mark.parametrize(("old", "new"), [(2, 3), (3, 2), (1, 4)])
def test_unsupported_refuses_a_rescale(old: int, new: int) -> None:
    with pytest.raises(RestoreRefused, match="add an explicit shuffle"):
        assign_channel_state(UNSUPPORTED, old, new)


@pytest.mark.parametrize("mapper", list(SubtaskStateMapper))
@pytest.mark.parametrize("p", [1, 2, 5])
def test_unchanged_parallelism_is_one_to_one(mapper: SubtaskStateMapper, p: int) -> None:
    assert assign_channel_state(mapper, p, p) == {i: (i,) for i in range(p)}
    assert ambiguous_old_subtasks(mapper, p, p) == ()


def test_assign_channel_state_consults_the_mapper_on_change() -> None:
    assert assign_channel_state(FIRST, 3, 2) == {0: (0, 1, 2), 1: ()}
    assert assign_channel_state(RANGE, 5, 3) == RANGE.new_to_old(5, 3)


def test_ambiguous_old_subtasks() -> None:
    assert ambiguous_old_subtasks(RANGE, 5, 3) == (1, 3)
    assert ambiguous_old_subtasks(RANGE, 4, 2) == ()  # ambiguous mapper, but no old subtask is split
    assert ambiguous_old_subtasks(FULL, 3, 2) == (0, 1, 2)
    assert ambiguous_old_subtasks(FULL, 3, 1) == ()
    assert ambiguous_old_subtasks(ROUND_ROBIN, 10, 4) == ()
    assert ambiguous_old_subtasks(FIRST, 3, 2) == ()


def test_invert_mapping() -> None:
    assert invert_mapping(RANGE.new_to_old(5, 3), 5) == {0: (0,), 1: (0, 1), 2: (1,), 3: (1, 2), 4: (2,)}
    assert invert_mapping(FIRST.new_to_old(3, 2), 3) == {0: (0,), 1: (0,), 2: (0,)}
    assert invert_mapping(ROUND_ROBIN.new_to_old(2, 4), 2) == {0: (0,), 1: (1,)}


@pytest.mark.parametrize(
    ("index", "old", "new"), [(-1, 2, 3), (3, 2, 3), (0, 0, 3), (0, 2, 0), (0, 32769, 2)]
)
def test_mapper_argument_checks(index: int, old: int, new: int) -> None:
    with pytest.raises(ValueError):
        RANGE.old_subtasks(index, old, new)


# ------------------------------------------------------------------------------ mapper properties

parallelism = st.integers(1, 64)


def _overlapping_old(new_index: int, old: int, new: int, max_p: int) -> tuple[int, ...]:
    """Brute force: old subtasks owning some key group of new subtask ``new_index`` at ``max_p``."""
    mine = key_group_range(max_p, new, new_index)
    return tuple(j for j in range(old) if key_group_range(max_p, old, j).overlaps(mine))


@given(parallelism, parallelism, st.data())
def test_range_is_exactly_the_overlapping_old_ranges_at_32768(
    old: int, new: int, data: st.DataObject
) -> None:
    i = data.draw(st.integers(0, new - 1), label="new_index")
    assert RANGE.old_subtasks(i, old, new) == _overlapping_old(i, old, new, 32768)


@given(st.integers(1, 48), st.data())
def test_range_covers_every_owner_for_small_max_parallelism(max_p: int, data: st.DataObject) -> None:
    # At the job's real (small) max parallelism RANGE is a superset: extra old subtasks are fine,
    # the receiver filters them (ambiguous); a missing one would lose in-flight records.
    old = data.draw(st.integers(1, max_p), label="old")
    new = data.draw(st.integers(1, max_p), label="new")
    for i in range(new):
        owners = {operator_index(kg, max_p, old) for kg in key_group_range(max_p, new, i)}
        assert owners == set(_overlapping_old(i, old, new, max_p))
        assert owners <= set(RANGE.old_subtasks(i, old, new))


@given(st.integers(2, 32768), st.data())
def test_range_covers_every_owner_when_old_times_new_is_small(max_p: int, data: st.DataObject) -> None:
    # Why it holds: the two ranges' overlap, as a fraction of the key space, is at least
    # 1/(old*new) wide, so it holds a multiple of 1/32768 when old*new <= 32768.
    old = data.draw(st.integers(1, min(max_p, 181)), label="old")
    new = data.draw(st.integers(1, min(max_p, 32768 // old)), label="new")
    i = data.draw(st.integers(0, new - 1), label="new_index")
    mine = key_group_range(max_p, new, i)
    first, last = operator_index(mine.start, max_p, old), operator_index(mine.end, max_p, old)
    got = RANGE.old_subtasks(i, old, new)
    assert got[0] <= first and last <= got[-1]


@given(st.sampled_from([1, 2, 4, 8, 128, 1024, 32768]), st.data())
def test_range_covers_every_owner_for_power_of_two_max_parallelism(max_p: int, data: st.DataObject) -> None:
    old = data.draw(st.integers(1, max_p), label="old")
    new = data.draw(st.integers(1, max_p), label="new")
    i = data.draw(st.integers(0, new - 1), label="new_index")
    mine = key_group_range(max_p, new, i)
    first, last = operator_index(mine.start, max_p, old), operator_index(mine.end, max_p, old)
    got = RANGE.old_subtasks(i, old, new)
    assert got[0] <= first and last <= got[-1]


def test_range_misses_an_owner_for_odd_max_parallelism_like_flink() -> None:
    # Flink's RANGE computes with 32768 instead of the job's max parallelism. With maxP=195 and a
    # rescale 187 -> 195, key group 122 moves from old subtask 116 to new subtask 122, but the
    # mapper does not give old 116's input state to new 122. We keep Flink's arithmetic and pin it.
    assert operator_index(122, 195, 187) == 116
    assert key_group_range(195, 195, 122) == KeyGroupRange(122, 122)
    assert 122 in key_group_range(195, 187, 116)
    assert RANGE.old_subtasks(122, 187, 195) == (117,)


@given(parallelism, parallelism)
def test_round_robin_gives_each_old_subtask_to_exactly_one_new(old: int, new: int) -> None:
    mapping = ROUND_ROBIN.new_to_old(old, new)
    flat = [o for olds in mapping.values() for o in olds]
    assert sorted(flat) == list(range(old))
    assert all(o % new == n for n, olds in mapping.items() for o in olds)


@given(parallelism, parallelism)
def test_range_mapping_is_contiguous_and_covers_all(old: int, new: int) -> None:
    mapping = RANGE.new_to_old(old, new)
    assert set().union(*map(set, mapping.values())) == set(range(old))
    for olds in mapping.values():
        assert olds and olds == tuple(range(olds[0], olds[-1] + 1))


@given(st.sampled_from([m for m in SubtaskStateMapper if m is not UNSUPPORTED]), parallelism, parallelism)
def test_every_old_subtask_state_lands_somewhere(mapper: SubtaskStateMapper, old: int, new: int) -> None:
    inverse = invert_mapping(assign_channel_state(mapper, old, new), old)
    assert all(inverse[o] for o in range(old))
    shared = {o for o, news in inverse.items() if len(news) > 1}
    assert ambiguous_old_subtasks(mapper, old, new) == tuple(sorted(shared if mapper.ambiguous else ()))


# ------------------------------------------------------------------------------ pointwise wiring (§2.3)


@pytest.mark.parametrize(
    ("s", "t", "producers", "consumers"),
    [
        (4, 2, ((0, 1), (2, 3)), ((0,), (0,), (1,), (1,))),
        (3, 2, ((0,), (1, 2)), ((0,), (1,), (1,))),
        (2, 4, ((0,), (0,), (1,), (1,)), ((0, 1), (2, 3))),
        (3, 5, ((0,), (0,), (1,), (1,), (2,)), ((0, 1), (2, 3), (4,))),
        (3, 3, ((0,), (1,), (2,)), ((0,), (1,), (2,))),
    ],
)
def test_pointwise_examples(s: int, t: int, producers: tuple, consumers: tuple) -> None:
    w = pointwise_wiring(s, t)
    assert w.producers_of == producers
    assert w.consumers_of == consumers


@given(st.integers(1, 200), st.integers(1, 200))
def test_pointwise_wiring_properties(s: int, t: int) -> None:
    w = pointwise_wiring(s, t)
    assert len(w.consumers_of) == s and len(w.producers_of) == t
    assert all(len(ds) >= 1 for ds in w.consumers_of)
    assert all(len(us) >= 1 for us in w.producers_of)
    forward = {(u, d) for u, ds in enumerate(w.consumers_of) for d in ds}
    backward = {(u, d) for d, us in enumerate(w.producers_of) for u in us}
    assert forward == backward
    # Pointwise means one side of every connection is single: S >= T each upstream feeds one
    # downstream, S < T each downstream reads one upstream; and every list is contiguous.
    single = w.consumers_of if s >= t else w.producers_of
    assert all(len(x) == 1 for x in single)
    for row in (*w.consumers_of, *w.producers_of):
        assert row == tuple(range(row[0], row[-1] + 1))


def test_pointwise_wiring_rejects_bad_parallelism() -> None:
    with pytest.raises(ValueError):
        pointwise_wiring(0, 2)


# ------------------------------------------------------------------------------ selectors


@pytest.mark.parametrize("n", [1, 2, 7])
@pytest.mark.parametrize("seed", [0, 1, 42, -3])
def test_rebalance_starts_after_its_seeded_start(n: int, seed: int) -> None:
    sel = make_selector("rebalance", n, seed=seed)
    assert 0 <= sel.start < n
    assert sel.start == make_selector("rebalance", n, seed=seed).start  # deterministic
    got = [sel.select(k) for k in range(2 * n + 1)]
    assert got == [(sel.start + 1 + i) % n for i in range(2 * n + 1)]


def test_rebalance_start_depends_on_the_seed() -> None:
    assert len({make_selector("rebalance", 7, seed=s).start for s in range(20)}) > 1


def test_rescale_goes_round_from_zero() -> None:
    sel = make_selector("rescale", 3, seed=99)
    assert [sel.select() for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_shuffle_is_seeded_and_in_range() -> None:
    sel1, sel2 = make_selector("shuffle", 5, seed=7), make_selector("shuffle", 5, seed=7)
    s1, s2 = [sel1.select(k) for k in range(200)], [sel2.select(k) for k in range(200)]
    assert s1 == s2
    assert set(s1) == set(range(5))
    rng = random.Random(7)
    assert s1 == [rng.randrange(5) for _ in range(200)]


@given(
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([1, 2, 3, 4, 7, 128]),
    st.sampled_from([128, 256, 1000, 32768]),
)
def test_hash_selector_agrees_with_key_group_ranges(key: int, n: int, max_p: int) -> None:
    sel = make_selector("hash", n, max_parallelism=max_p)
    ch = sel.select(key)
    kg = assign_to_key_group(key, max_p)
    assert ch == operator_index(kg, max_p, n)
    assert kg in key_group_range(max_p, n, ch)


def test_hash_selector_facts_vectors() -> None:
    # facts §1.7: key 42 -> kg 29 -> operator 0 at (128, 4); "hello" -> kg 35 -> operator 1.
    sel = make_selector("hash", 4, max_parallelism=128)
    assert [sel.select(0), sel.select(42), sel.select("hello"), sel.select("user_42")] == [2, 0, 1, 1]


def test_hash_selector_needs_the_consumers_max_parallelism() -> None:
    with pytest.raises(ValueError, match="max_parallelism"):
        make_selector("hash", 4)
    with pytest.raises(ValueError, match="max_parallelism"):
        make_selector("hash", 4, max_parallelism=3)
    with pytest.raises(ValueError, match="max_parallelism"):
        make_selector("hash", 4, max_parallelism=32769)


def test_global_forward_custom_broadcast() -> None:
    g = make_selector("global", 4)
    assert [g.select(k) for k in range(5)] == [0] * 5
    f = make_selector("forward", 1)
    assert f.select(123) == 0
    with pytest.raises(ValueError, match="pointwise subset"):
        make_selector("forward", 3)
    c = make_selector("custom", 4)
    assert [c.select(k) for k in (0, 5, -1, -4, -5, 2**63 - 1)] == [0, 1, 3, 0, 3, 3]
    with pytest.raises(TypeError):
        c.select("5")
    b = make_selector("broadcast", 3)
    assert b.is_broadcast and b.select_all() == (0, 1, 2)
    with pytest.raises(TypeError):
        b.select(1)


@pytest.mark.parametrize("name", [p for p in ALL if p not in ("broadcast", "forward")])
def test_non_broadcast_selectors(name: str) -> None:
    sel = make_selector(name, 3, seed=1, max_parallelism=128)
    assert not sel.is_broadcast
    assert sel.num_channels == 3
    assert all(0 <= sel.select(k) < 3 for k in range(-50, 50))
    with pytest.raises(TypeError):
        sel.select_all()


@pytest.mark.parametrize("n", [0, -1])
def test_selector_needs_channels(n: int) -> None:
    with pytest.raises(ValueError, match="num_channels"):
        make_selector("rebalance", n)
