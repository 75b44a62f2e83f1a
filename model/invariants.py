"""The invariants of DESIGN.md, each one function used by the engine, the proofs and the tests.

CUT comes first and is self-contained; other invariants follow below it.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import chain, zip_longest
from typing import Any

_MISSING = object()


def cut_holds(
    processed_before_snapshot: Iterable[Any],
    input_state: Iterable[Any],
    output_state: Iterable[Any],
    sent_before_snapshot: Iterable[Any],
    ops: Any = None,
) -> Any:
    """CUT for one channel u→d and one checkpoint.

    The records d processed before its snapshot, then d's input state for the channel, then u's
    output state for it, are exactly the records u sent before its snapshot, in order.

    With ``ops`` (an implementation of ``model.protocol.Ops``, e.g. the Z3 one in ``proofs``) the
    same statement is built as a term of that algebra instead of evaluated, so that the proofs
    and the engine check one definition.
    """
    if ops is not None:
        return ops.eq(ops.concat(processed_before_snapshot, input_state, output_state), sent_before_snapshot)
    # Streamed comparison: channel histories can be long, and the engine passes lazy sequences.
    joined = chain(processed_before_snapshot, input_state, output_state)
    return all(a == b for a, b in zip_longest(joined, sent_before_snapshot, fillvalue=_MISSING))
