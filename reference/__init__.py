"""The reference engine: deterministic runs of job graphs with checkpoints, failures and restores.

``simulate(scenario, out_dir=None, seed=None)`` runs a scenario and returns a ``RunResult``.
"""

from __future__ import annotations

import sys
from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cutcheck.reference.scenario import Scenario
    from cutcheck.reference.simulate import RunResult, replay_command, simulate

__all__ = ["RunResult", "Scenario", "replay_command", "simulate"]

# The public names load on first use (PEP 562), not with the package: `cutcheck storage ...` imports
# cutcheck.reference.storage and must not pay for the engine, networkx and pyarrow (about 0.5 s a command).
_HOME = {"RunResult": "simulate", "Scenario": "scenario", "replay_command": "simulate", "simulate": "simulate"}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"cutcheck.reference.{home}"), name)  # cutcheck's, also when loaded as `reference`
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _Package(ModuleType):
    """The package's ``simulate`` is the function, as when it was imported eagerly: loading the submodule of
    that name (whoever imports it first) binds the submodule here, and this puts the function back."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "simulate" and isinstance(value, ModuleType):
            value = value.simulate
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
