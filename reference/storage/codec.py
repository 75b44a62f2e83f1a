"""Type-preserving JSON for checkpoint state: operator state, key-group pieces and channel state.

Operator state mixes dicts with int or tuple keys, tuples and lists (facts: the engine's operator
state formats), and a restore must rebuild exactly those types, or a tuple key would come back as
a list and stop matching. JSON has neither, so two tags stand in for them:

    {"$tuple": [...]}          a tuple
    {"$map": [[k, v], ...]}    a dict whose keys are not all strings (pairs sorted when possible)

Dicts with string keys stay plain JSON objects (a key starting with "$" is refused, so a tag is
never ambiguous). Records in channel state are always tuples of ints and are written as plain lists,
one buffer as ``[seq0, origin, [record, ...]]``.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from cutcheck.model.errors import StorageError
from cutcheck.reference.runtime.network import Buf

KEYED_MAPS = ("counts", "order")  # keyed state per key group (reference.runtime.operators.KeyedOperator)
ChannelKey = tuple[int, int, int]


def encode(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, tuple):
        return {"$tuple": [encode(v) for v in value]}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            for k in value:
                if k.startswith("$"):
                    raise ValueError(f"state key {k!r} starts with '$', which the checkpoint format reserves")
            return {k: encode(v) for k, v in value.items()}
        pairs = list(value.items())
        with contextlib.suppress(TypeError):  # mixed key types: insertion order is still faithful
            pairs.sort(key=lambda kv: kv[0])  # canonical bytes, so unchanged state hashes the same
        return {"$map": [[encode(k), encode(v)] for k, v in pairs]}
    raise TypeError(f"cannot store a {type(value).__name__} in checkpoint state")


def decode(value: Any) -> Any:
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict):
        if "$tuple" in value:
            return tuple(decode(v) for v in value["$tuple"])
        if "$map" in value:
            return {_key(decode(k)): decode(v) for k, v in value["$map"]}
        return {k: decode(v) for k, v in value.items()}
    return value


def _key(k: Any) -> Any:
    return tuple(k) if isinstance(k, list) else k  # defensive: a list can never be a dict key


def dumps(value: Any) -> bytes:
    """The canonical bytes of an already encoded value (what is hashed, sized and written)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True).encode()


def loads(data: bytes, where: str) -> Any:
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise StorageError(f"{where}: not a cutcheck state file ({exc}); the file is corrupt or not ours.") from None


# ---------------------------------------------------------------------------- keyed state pieces
def is_keyed(operator: dict[str, Any]) -> bool:
    return all(isinstance(operator.get(name), dict) for name in KEYED_MAPS)


def split_keyed(operator: dict[str, Any]) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    """Operator state -> (the rest, {key group: {map name: that key group's map}}).

    A key group appears in the piece of each map that holds it, so the join below rebuilds the
    same dicts, empty per-key-group maps included.
    """
    rest = {k: v for k, v in operator.items() if k not in KEYED_MAPS}
    pieces: dict[int, dict[str, Any]] = {}
    for name in KEYED_MAPS:
        for kg, m in operator[name].items():
            pieces.setdefault(kg, {})[name] = m
    return rest, pieces


def join_keyed(rest: dict[str, Any], pieces: dict[int, dict[str, Any]]) -> dict[str, Any]:
    operator: dict[str, Any] = {name: {} for name in KEYED_MAPS}
    for kg in sorted(pieces):
        for name, m in pieces[kg].items():
            operator[name][kg] = m
    operator.update(rest)
    return operator


# ---------------------------------------------------------------------------- channel state
def encode_bufs(bufs: list[Buf]) -> list[Any]:
    return [[b.seq0, b.origin, [list(r) for r in b.recs]] for b in bufs]


def decode_bufs(raw: list[Any]) -> list[Buf]:
    return [Buf([tuple(r) for r in recs], seq0, origin) for seq0, origin, recs in raw]


def encode_channels(state: dict[ChannelKey, list[Buf]]) -> list[Any]:
    return [[list(key), encode_bufs(bufs)] for key, bufs in state.items()]


def decode_channels(raw: list[Any]) -> dict[ChannelKey, list[Buf]]:
    return {(k[0], k[1], k[2]): decode_bufs(bufs) for k, bufs in raw}


def encode_counters(counters: dict[ChannelKey, int]) -> list[list[int]]:
    return [[*key, n] for key, n in counters.items()]


def decode_counters(raw: list[list[int]]) -> dict[ChannelKey, int]:
    return {(e, p, c): n for e, p, c, n in raw}
