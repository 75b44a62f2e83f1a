"""The repository's own Python modules, as the house tests read them.

The README's commands create `.venv` inside the checkout, so a plain ``rglob("*.py")`` of the repository
walks a whole site-packages (pyspark, pyarrow, ...): tens of thousands of files, walked again for every
module a docs test looks at. The walk here prunes what is not ours before descending: hidden directories,
any virtualenv (a directory holding ``pyvenv.cfg``, whatever its name), caches, build output and the
folders that are not part of the package.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOT_PACKAGE = frozenset({"tests", "benchmarks", "build", "dist", "docs", "examples"})


def _ours(parent: str, name: str) -> bool:
    return not (name.startswith(".") or name == "__pycache__" or name.endswith(".egg-info")
                or name in NOT_PACKAGE or os.path.exists(os.path.join(parent, name, "pyvenv.cfg")))


@lru_cache(maxsize=1)
def package_module_paths() -> tuple[Path, ...]:
    """Every module of the package (absolute paths, sorted)."""
    found = []
    for parent, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if _ours(parent, d))
        found += [Path(parent, f) for f in files if f.endswith(".py")]
    return tuple(sorted(found))
