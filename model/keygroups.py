"""Key groups, bit-exact with Flink's ``KeyGroupRangeAssignment`` (facts §1).

A key is hashed with its Java ``hashCode()``, scrambled by ``MathUtils.murmurHash`` and taken modulo
the max parallelism (the number of key groups); a key group belongs to the subtask whose contiguous
``KeyGroupRange`` holds it. Everything here is pure integer arithmetic: Java's 32-bit wrap-around is
emulated by masking with ``0xFFFFFFFF`` and converting to signed only where Java would expose a
signed value.

``assign_to_key_group`` sits on the engine's per-record path, so the common case (an int64 key) is
handled first, with no allocation.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

from cutcheck.model.errors import InvalidArgument

__all__ = [
    "DEFAULT_LOWER_BOUND_MAX_PARALLELISM",
    "UPPER_BOUND_MAX_PARALLELISM",
    "KeyGroupRange",
    "assign_key_to_parallel_operator",
    "assign_to_key_group",
    "compute_key_group_for_key_hash",
    "default_max_parallelism",
    "java_hash",
    "java_int_hash",
    "key_group_range",
    "murmur_hash",
    "operator_index",
    "round_up_to_power_of_two",
]

DEFAULT_LOWER_BOUND_MAX_PARALLELISM = 1 << 7  # KeyGroupRangeAssignment.DEFAULT_LOWER_BOUND_MAX_PARALLELISM
UPPER_BOUND_MAX_PARALLELISM = 1 << 15  # Transformation.UPPER_BOUND_MAX_PARALLELISM, inclusive

_MASK32 = 0xFFFFFFFF
_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1


def _to_int32(u: int) -> int:
    """Reinterpret the low 32 bits of ``u`` as a signed Java int."""
    u &= _MASK32
    return u - (1 << 32) if u & 0x80000000 else u


# ----------------------------------------------------------------------------------- Java hashCode
def java_int_hash(value: int) -> int:
    """``Integer.hashCode()``: the int32 value itself (Python ints are Longs for ``java_hash``)."""
    if type(value) is not int or not _INT_MIN <= value <= _INT_MAX:
        raise InvalidArgument(f"java_int_hash: {value!r} is not a Java int (-2**31..2**31-1).")
    return value


def _string_hash_u32(s: str) -> int:
    # Java hashes UTF-16 code units, so a non-BMP character counts as its two surrogates.
    # 'surrogatepass' keeps lone surrogates, which a Java String may hold too.
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for unit in struct.unpack(f">{len(data) // 2}H", data):
        h = (31 * h + unit) & _MASK32
    return h


def _java_hash_u32(key: object) -> int:
    """Java ``hashCode()`` of ``key`` as an unsigned 32-bit pattern (what murmur consumes)."""
    # bool is a subclass of int, so the exact-type test keeps True/False out of the Long branch.
    if type(key) is int:
        if not _LONG_MIN <= key <= _LONG_MAX:
            raise InvalidArgument(f"key {key} is outside the Java long range; cutcheck keys are int64.")
        # Long.hashCode = (int)(v ^ (v >>> 32)). Python's >> is arithmetic, but only the low 32
        # bits survive the mask, and those equal the logical shift's for any int64.
        return (key ^ (key >> 32)) & _MASK32
    if type(key) is str:
        return _string_hash_u32(key)
    if type(key) is bool:
        return 1231 if key else 1237
    if type(key) is tuple:
        # Flink TupleN.hashCode: result = hash(f0); result = 31*result + hash(fi); null fields hash to 0.
        if not key:
            raise InvalidArgument("an empty tuple is not a Flink Tuple key (Tuple0 has no fields).")
        h = 0
        for i, field in enumerate(key):
            fh = 0 if field is None else _java_hash_u32(field)
            h = fh if i == 0 else (31 * h + fh) & _MASK32
        return h
    if key is None:
        raise InvalidArgument("Assigned key must not be null!")
    raise TypeError(
        f"cannot compute a Java hashCode for {type(key).__name__}; use an int (Long), str (String), bool or tuple."
    )


def java_hash(key: object) -> int:
    """Java ``hashCode()`` as a signed int32.

    ``int`` is a Java ``Long`` (must fit int64), ``str`` a ``String`` (UTF-16 code units), ``bool`` a
    ``Boolean`` (1231/1237), ``tuple`` a Flink ``TupleN``. Use :func:`java_int_hash` for ``Integer``.
    """
    return _to_int32(_java_hash_u32(key))


# ------------------------------------------------------------------------------------------ murmur
def murmur_hash(code: int) -> int:
    """``MathUtils.murmurHash(int)``: one Murmur3_32 round + fmix32, made non-negative (facts §1.2)."""
    c = (code * 0xCC9E2D51) & _MASK32
    c = ((c << 15) | (c >> 17)) & _MASK32
    c = (c * 0x1B873593) & _MASK32
    c = ((c << 13) | (c >> 19)) & _MASK32
    c = (c * 5 + 0xE6546B64) & _MASK32
    c ^= 4  # the length in bytes
    c ^= c >> 16  # bitMix (fmix32) from here on
    c = (c * 0x85EBCA6B) & _MASK32
    c ^= c >> 13
    c = (c * 0xC2B2AE35) & _MASK32
    c ^= c >> 16
    if c < 0x80000000:
        return c
    # Negative as int32: Java returns -code, except Integer.MIN_VALUE (whose negation overflows) -> 0.
    return 0 if c == 0x80000000 else (1 << 32) - c


# ------------------------------------------------------------------------------------ assignment
def compute_key_group_for_key_hash(code: int, max_parallelism: int) -> int:
    """``computeKeyGroupForKeyHash``: ``murmurHash(code) % maxParallelism``; no bounds check (hot path)."""
    return murmur_hash(code) % max_parallelism


def assign_to_key_group(key: object, max_parallelism: int) -> int:
    """``assignToKeyGroup``: the key group in ``[0, max_parallelism)`` of a non-null key."""
    if not 0 < max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise InvalidArgument(f"max_parallelism {max_parallelism} is outside 1..{UPPER_BOUND_MAX_PARALLELISM}.")
    return murmur_hash(_java_hash_u32(key)) % max_parallelism


def operator_index(key_group: int, max_parallelism: int, parallelism: int) -> int:
    """``computeOperatorIndexForKeyGroup``: ``kg * p // maxP`` (Java int division, operands non-negative)."""
    return key_group * parallelism // max_parallelism


def assign_key_to_parallel_operator(key: object, max_parallelism: int, parallelism: int) -> int:
    """``assignKeyToParallelOperator``: the subtask index that owns ``key`` (what hash routing returns)."""
    return assign_to_key_group(key, max_parallelism) * parallelism // max_parallelism


# ------------------------------------------------------------------------------------------ ranges
@dataclass(frozen=True, slots=True)
class KeyGroupRange:
    """An inclusive range of key groups; ``KeyGroupRange.EMPTY`` is Flink's ``(0, -1)``."""

    start: int
    end: int

    EMPTY: ClassVar[KeyGroupRange]

    def __post_init__(self) -> None:
        # Flink's constructor admits start <= end, plus the single empty form (0, -1).
        if self.start < 0 or (self.start > self.end and (self.start, self.end) != (0, -1)):
            raise InvalidArgument(
                f"KeyGroupRange({self.start}, {self.end}) is invalid; the empty range is (0, -1)."
            )

    def __contains__(self, key_group: object) -> bool:
        return type(key_group) is int and self.start <= key_group <= self.end

    def __len__(self) -> int:
        return self.end - self.start + 1

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.start, self.end + 1))

    def intersection(self, other: KeyGroupRange) -> KeyGroupRange:
        """``getIntersection``: the common key groups, or ``EMPTY``."""
        start, end = max(self.start, other.start), min(self.end, other.end)
        return KeyGroupRange(start, end) if start <= end else KeyGroupRange.EMPTY

    def overlaps(self, other: KeyGroupRange) -> bool:
        return max(self.start, other.start) <= min(self.end, other.end)


KeyGroupRange.EMPTY = KeyGroupRange(0, -1)


def _check_parallelism(what: str, value: int) -> None:
    if type(value) is not int or not 0 < value <= UPPER_BOUND_MAX_PARALLELISM:
        raise InvalidArgument(f"{what} {value!r} is not within bounds 1..{UPPER_BOUND_MAX_PARALLELISM}.")


def key_group_range(max_parallelism: int, parallelism: int, index: int) -> KeyGroupRange:
    """``computeKeyGroupRangeForOperatorIndex``: the contiguous key groups of subtask ``index``.

    ``start = ceil(i*maxP/p)`` and ``end = floor(((i+1)*maxP - 1)/p)``, which is exactly the set of
    key groups ``kg`` with ``operator_index(kg, maxP, p) == i``.
    """
    _check_parallelism("parallelism", parallelism)
    _check_parallelism("max_parallelism", max_parallelism)
    if max_parallelism < parallelism:
        raise InvalidArgument(
            f"max_parallelism {max_parallelism} must not be smaller than parallelism {parallelism}."
        )
    # Flink does not check the index; an out-of-range index would silently give a bogus range.
    if type(index) is not int or not 0 <= index < parallelism:
        raise InvalidArgument(f"operator index {index!r} is outside 0..{parallelism - 1}.")
    start = (index * max_parallelism + parallelism - 1) // parallelism
    end = ((index + 1) * max_parallelism - 1) // parallelism
    return KeyGroupRange(start, end)


# ----------------------------------------------------------------------------- default max parallelism
def round_up_to_power_of_two(x: int) -> int:
    """``MathUtils.roundUpToPowerOfTwo``: smallest power of two >= x (0 -> 0, as in Java)."""
    # Beyond 2**30 the Java int version overflows; nothing in cutcheck gets near that.
    if type(x) is not int or not 0 <= x <= 1 << 30:
        raise InvalidArgument(f"round_up_to_power_of_two: {x!r} is outside 0..2**30.")
    x -= 1
    x |= x >> 1
    x |= x >> 2
    x |= x >> 4
    x |= x >> 8
    x |= x >> 16
    return x + 1


def default_max_parallelism(parallelism: int) -> int:
    """``computeDefaultMaxParallelism``: ``min(max(roundUpToPowerOfTwo(p + p//2), 128), 32768)``."""
    _check_parallelism("operator parallelism", parallelism)
    return min(
        max(round_up_to_power_of_two(parallelism + parallelism // 2), DEFAULT_LOWER_BOUND_MAX_PARALLELISM),
        UPPER_BOUND_MAX_PARALLELISM,
    )
