"""The project's errors. Each carries one sentence for the user: what is wrong, where, how to fix.

The CLI prints ``str(error)`` and exits 2 for every subclass of :class:`CutcheckError`; nothing
below ``cli.py`` prints or exits.
"""

from __future__ import annotations


class CutcheckError(Exception):
    """Bad input or a broken environment: a user mistake, never a bug in cutcheck."""


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
