"""Key groups against Flink's own test vectors, the facts table (§1.7) and a JDK 17 cross-check."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cutcheck.model.keygroups import (
    KeyGroupRange,
    assign_key_to_parallel_operator,
    assign_to_key_group,
    compute_key_group_for_key_hash,
    default_max_parallelism,
    java_hash,
    java_int_hash,
    key_group_range,
    murmur_hash,
    operator_index,
    round_up_to_power_of_two,
)

# ------------------------------------------------------------------------------- Java hashCode

# Values printed by JDK 17 (Long.hashCode / String.hashCode) when this module was written.
JDK_LONGS = [
    (0, 0),
    (-1, 0),
    (2**32, 1),
    (-5025562857975149833, -1212213310),
    (-1360544799, 1360544798),
    (5694868678511409995, -1104967768),
    (2**63 - 1, -(2**31)),
    (-(2**63), -(2**31)),
]
JDK_STRINGS = [
    ("", 0),
    ("a", 97),
    ("hello", 99162322),
    ("user_42", -147134606),
    ("\U0001f600", 1772899),  # U+1F600 = surrogates D83D DE00: 0xD83D*31 + 0xDE00
    ("caf\u00e9", 3045921),
    ("\u4e2d\u6587", 646394),
    ("a\U0001d11eb", 57834039),  # a non-BMP char between two ASCII ones
    ("\ud800", 55296),  # a lone surrogate is a legal Java String
    ("Aa", 2112),
    ("BB", 2112),
    ("polygenelubricants", -(2**31)),
    ("\uffff\uffff", 2097120),
]


@pytest.mark.parametrize(("value", "expected"), JDK_LONGS)
def test_long_hash_matches_jdk(value: int, expected: int) -> None:
    assert java_hash(value) == expected


@pytest.mark.parametrize(("value", "expected"), JDK_STRINGS)
def test_string_hash_matches_jdk(value: str, expected: int) -> None:
    assert java_hash(value) == expected


def test_non_bmp_string_hash_by_hand() -> None:
    # U+1F600 is the UTF-16 pair D83D DE00; Java hashes both units: 31*0xD83D + 0xDE00.
    assert java_hash("\U0001f600") == 31 * 0xD83D + 0xDE00
    # It is not the code-point hash, which a naive port would compute.
    assert java_hash("\U0001f600") != 0x1F600


def test_bool_int_tuple_hashes() -> None:
    assert java_hash(True) == 1231
    assert java_hash(False) == 1237
    assert java_int_hash(-1) == -1  # Integer -1 hashes to itself, Long -1 to 0
    assert java_int_hash(-(2**31)) == -(2**31)
    # Flink Tuple2("a", 1L) = 31*97 + 1; Tuple3(7L, "x", true) = 31*(31*7 + 120) + 1231 (JDK-checked).
    assert java_hash(("a", 1)) == 3008
    assert java_hash((7, "x", True)) == 11678
    assert java_hash((None, 5)) == 5  # a null field hashes to 0


@pytest.mark.parametrize("bad", [2**63, -(2**63) - 1, 10**30])
def test_long_out_of_range_is_refused(bad: int) -> None:
    with pytest.raises(ValueError, match="int64"):
        java_hash(bad)


@pytest.mark.parametrize("bad", [2**31, -(2**31) - 1, True])
def test_java_int_hash_refuses_non_ints(bad: int) -> None:
    with pytest.raises(ValueError):
        java_int_hash(bad)


def test_null_and_unsupported_keys() -> None:
    with pytest.raises(ValueError, match="must not be null"):
        assign_to_key_group(None, 128)
    with pytest.raises(TypeError):
        java_hash(1.5)
    with pytest.raises(ValueError):
        java_hash(())


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_long_hash_is_xor_of_halves(value: int) -> None:
    bits = value & (2**64 - 1)
    expected = ((bits >> 32) ^ bits) & 0xFFFFFFFF
    h = java_hash(value)
    assert -(2**31) <= h < 2**31
    assert h & 0xFFFFFFFF == expected


@given(st.text())
def test_string_hash_is_polynomial_over_utf16_units(s: str) -> None:
    data = s.encode("utf-16-le", "surrogatepass")
    units = [int.from_bytes(data[i : i + 2], "little") for i in range(0, len(data), 2)]
    expected = sum(u * pow(31, len(units) - 1 - i, 2**32) for i, u in enumerate(units)) % 2**32
    assert java_hash(s) & 0xFFFFFFFF == expected
    assert -(2**31) <= java_hash(s) < 2**31


# ------------------------------------------------------------------------------------- murmur

# (hashCode, murmurHash, kg at 128, operator at (128, p=4), kg at 32768): facts §1.7 table.
FACTS_TABLE = [
    (0, 593689054, 94, 2, 31198),
    (1, 68075478, 86, 2, 16342),
    (2, 1085422463, 127, 3, 15231),
    (42, 1134849565, 29, 0, 28189),
    (-1, 1982413648, 80, 2, 15184),
    (-(2**31), 1718298732, 108, 3, 10348),
    (97, 1455541201, 81, 2, 19409),
    (99162322, 1715862179, 35, 1, 31395),
    (-147134606, 1193504810, 42, 1, 28714),
]


@pytest.mark.parametrize(("code", "murmur", "kg128", "op4", "kg32768"), FACTS_TABLE)
def test_facts_table(code: int, murmur: int, kg128: int, op4: int, kg32768: int) -> None:
    assert murmur_hash(code) == murmur
    assert compute_key_group_for_key_hash(code, 128) == kg128
    assert operator_index(kg128, 128, 4) == op4
    assert compute_key_group_for_key_hash(code, 32768) == kg32768


@pytest.mark.parametrize(
    ("key", "code"),
    [(0, 0), ("", 0), (1, 1), (2, 2), (42, 42), ("a", 97), ("hello", 99162322), ("user_42", -147134606)],
)
def test_facts_table_through_keys(key: object, code: int) -> None:
    row = next(r for r in FACTS_TABLE if r[0] == code)
    assert java_hash(key) == code
    assert assign_to_key_group(key, 128) == row[2]
    assert assign_key_to_parallel_operator(key, 128, 4) == row[3]
    assert assign_to_key_group(key, 32768) == row[4]


def test_integer_keys_differ_from_long_keys_when_negative() -> None:
    # Integer -1 is in the table (kg 80 at 128); Long -1 hashes to 0 and so lands like key 0 (kg 94).
    assert compute_key_group_for_key_hash(java_int_hash(-1), 128) == 80
    assert assign_to_key_group(-1, 128) == 94


def test_flink_string_vectors_max_parallelism_10() -> None:
    # RocksIncrementalCheckpointRescalingTest / CEPRescalingTest.
    keys = ["8", "5", "25", "13", "4", "7", "1", "6", "9", "3"]
    assert [assign_to_key_group(k, 10) for k in keys] == list(range(10))


def test_flink_integer_vectors_max_parallelism_10() -> None:
    assert compute_key_group_for_key_hash(java_int_hash(7), 10) == 1
    assert assign_key_to_parallel_operator(7, 10, 2) == 0
    assert compute_key_group_for_key_hash(java_int_hash(10), 10) == 9
    assert assign_key_to_parallel_operator(10, 10, 2) == 1


def test_murmur_min_value_maps_to_zero() -> None:
    # -2089875627 is the (inverted-by-hand, JDK-checked) input whose mixed value is Integer.MIN_VALUE.
    assert murmur_hash(-2089875627) == 0
    assert murmur_hash(-2089875627 & 0xFFFFFFFF) == 0  # only the low 32 bits matter


@pytest.mark.parametrize(
    ("code", "murmur"),
    [(-1441980995, 1941594033), (215419139, 1606466105), (1564596203, 476504900), (384, 256524285)],
)
def test_murmur_matches_jdk_port(code: int, murmur: int) -> None:
    assert murmur_hash(code) == murmur


@given(st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_murmur_is_non_negative_int32(code: int) -> None:
    m = murmur_hash(code)
    assert 0 <= m <= 2**31 - 1
    assert murmur_hash(code + 2**32) == m  # masked to 32 bits


@given(
    st.one_of(st.integers(min_value=-(2**63), max_value=2**63 - 1), st.text(), st.booleans()),
    st.integers(min_value=1, max_value=32768),
)
def test_key_group_in_bounds(key: object, max_parallelism: int) -> None:
    kg = assign_to_key_group(key, max_parallelism)
    assert 0 <= kg < max_parallelism
    assert kg == murmur_hash(java_hash(key)) % max_parallelism


@pytest.mark.parametrize("bad", [0, -1, 32769])
def test_assign_refuses_bad_max_parallelism(bad: int) -> None:
    with pytest.raises(ValueError, match="max_parallelism"):
        assign_to_key_group(1, bad)


# ------------------------------------------------------------------------------------- ranges


def test_key_group_range_value_semantics() -> None:
    r = KeyGroupRange(3, 6)
    assert len(r) == 4 and list(r) == [3, 4, 5, 6]
    assert 3 in r and 6 in r and 2 not in r and 7 not in r and "3" not in r
    assert r.intersection(KeyGroupRange(5, 9)) == KeyGroupRange(5, 6)
    assert r.intersection(KeyGroupRange(7, 9)) is KeyGroupRange.EMPTY
    assert r.overlaps(KeyGroupRange(6, 6)) and not r.overlaps(KeyGroupRange(7, 8))
    empty = KeyGroupRange.EMPTY
    assert (empty.start, empty.end) == (0, -1) and len(empty) == 0 and list(empty) == []
    assert not empty and 0 not in empty and not empty.overlaps(r)
    with pytest.raises(ValueError):
        KeyGroupRange(5, 4)
    with pytest.raises(ValueError):
        KeyGroupRange(-1, 3)


def test_key_group_range_example_from_facts() -> None:
    assert [key_group_range(128, 3, i) for i in range(3)] == [
        KeyGroupRange(0, 42),
        KeyGroupRange(43, 85),
        KeyGroupRange(86, 127),
    ]


@pytest.mark.parametrize(
    ("max_p", "p", "i", "message"),
    [
        (128, 0, 0, "parallelism"),
        (128, 32769, 0, "parallelism"),
        (0, 1, 0, "max_parallelism"),
        (32769, 1, 0, "max_parallelism"),
        (4, 5, 0, "must not be smaller"),
        (128, 4, 4, "operator index"),
        (128, 4, -1, "operator index"),
    ],
)
def test_key_group_range_preconditions(max_p: int, p: int, i: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        key_group_range(max_p, p, i)


@st.composite
def max_p_and_p(draw: st.DrawFn) -> tuple[int, int]:
    # Mix small values (dense corner cases) with the whole legal range, incl. powers of two.
    max_p = draw(st.one_of(st.integers(1, 64), st.sampled_from([128, 4096, 32768]), st.integers(1, 32768)))
    p = draw(st.one_of(st.integers(1, min(max_p, 16)), st.integers(1, max_p), st.just(max_p)))
    return max_p, p


@given(max_p_and_p())
def test_ranges_partition_key_groups_contiguously(mp: tuple[int, int]) -> None:
    max_p, p = mp
    ranges = [key_group_range(max_p, p, i) for i in range(p)]
    assert ranges[0].start == 0 and ranges[-1].end == max_p - 1
    for a, b in zip(ranges, ranges[1:], strict=False):
        assert b.start == a.end + 1
    assert all(len(r) >= 1 for r in ranges)  # maxP >= p: nobody is left without key groups
    assert max(len(r) for r in ranges) - min(len(r) for r in ranges) <= 1


@given(max_p_and_p(), st.data())
def test_operator_index_agrees_with_ranges(mp: tuple[int, int], data: st.DataObject) -> None:
    max_p, p = mp
    kg = data.draw(st.integers(0, max_p - 1), label="kg")
    i = data.draw(st.integers(0, p - 1), label="i")
    assert (operator_index(kg, max_p, p) == i) == (kg in key_group_range(max_p, p, i))


@pytest.mark.parametrize(("max_p", "p"), [(1, 1), (7, 3), (10, 4), (128, 3), (128, 127)])
def test_operator_index_agrees_with_ranges_exhaustively(max_p: int, p: int) -> None:
    for kg in range(max_p):
        owner = operator_index(kg, max_p, p)
        assert [i for i in range(p) if kg in key_group_range(max_p, p, i)] == [owner]


# ----------------------------------------------------------------------- default max parallelism

# Every step point of facts §1.5, both sides of each boundary.
STEPS = [
    (1, 128), (85, 128),
    (86, 256), (171, 256),
    (172, 512), (341, 512),
    (342, 1024), (683, 1024),
    (684, 2048), (1365, 2048),
    (1366, 4096), (2731, 4096),
    (2732, 8192), (5461, 8192),
    (5462, 16384), (10923, 16384),
    (10924, 32768), (32768, 32768),
]  # fmt: skip


@pytest.mark.parametrize(("p", "expected"), STEPS)
def test_default_max_parallelism_step_points(p: int, expected: int) -> None:
    assert default_max_parallelism(p) == expected


@pytest.mark.parametrize("bad", [0, -1, 32769])
def test_default_max_parallelism_preconditions(bad: int) -> None:
    with pytest.raises(ValueError, match="parallelism"):
        default_max_parallelism(bad)


@given(st.integers(1, 32768))
def test_default_max_parallelism_is_at_least_parallelism(p: int) -> None:
    m = default_max_parallelism(p)
    assert p <= m and m & (m - 1) == 0 and 128 <= m <= 32768


def test_round_up_to_power_of_two() -> None:
    assert [round_up_to_power_of_two(x) for x in [0, 1, 2, 3, 4, 5, 127, 128, 129, 2**30]] == [
        0, 1, 2, 4, 4, 8, 128, 128, 256, 2**30,
    ]  # fmt: skip
    with pytest.raises(ValueError):
        round_up_to_power_of_two(2**30 + 1)
