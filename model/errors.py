"""The project's exceptions, in one hierarchy rooted at :class:`CutcheckException`.

Two branches, because they mean opposite things to whoever catches them:

* :class:`CutcheckError` — bad input or a broken environment: the user's mistake, never a bug in
  cutcheck. Each carries one sentence for the user: what is wrong, where, how to fix. The CLI
  prints ``str(error)`` and exits 2 for every subclass; nothing below ``cli.py`` prints or exits.
* :class:`InvariantViolation` — a run broke one of DESIGN's invariants: a finding about the
  modelled protocol (or a mutant), which a run records as its verdict. It is deliberately *not* a
  ``CutcheckError``: code that turns user mistakes into one sentence (or, in the fuzzer, into a
  "bad generated scenario" verdict) must not swallow it.
"""

from __future__ import annotations


class CutcheckException(Exception):
    """Root of every exception cutcheck raises on purpose; catch it to handle all of them."""


class CutcheckError(CutcheckException):
    """Bad input or a broken environment: a user mistake, never a bug in cutcheck."""


class InvalidArgument(CutcheckError, ValueError):
    """An argument outside a function's domain (Flink's ``IllegalArgumentException``).

    Also a ``ValueError`` so callers of the Flink-mirroring helpers (key groups, partitioners) that
    test for the builtin keep working.
    """


class GraphError(CutcheckError):
    """A job graph breaks a rule; the message names the vertex or edge and the rule."""


class ScenarioError(CutcheckError):
    """A scenario file is malformed or inconsistent with its graph."""


class EnvironmentProblem(CutcheckError):
    """Something the command needs is missing from the machine (Java, an optional extra)."""


class LogDataError(CutcheckError):
    """A recovery-log dataset is unreadable or lacks a required column."""


class RestoreRefused(CutcheckError):
    """A restore that Flink itself would refuse (for example, rescaling a pointwise edge with channel state)."""


class StorageError(CutcheckError):
    """A checkpoint directory is missing, unreadable or not laid out as expected."""


class InvariantViolation(CutcheckException):
    """An invariant of DESIGN was broken during a run.

    ``name`` is the invariant (CUT, ORDER, OWNERSHIP, COMMIT, BOUND, REF, LIVENESS or EXACTLY_ONCE)
    and ``detail`` one sentence of what broke it; ``str()`` is ``"NAME: detail"``.
    """

    def __init__(self, name: str, detail: str):
        super().__init__(f"{name}: {detail}")
        self.name = name
        self.detail = detail
