"""The house: which room imports which, who may see the Engine, and how big a module may grow."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
from house_files import package_module_paths

ROOT = Path(__file__).resolve().parents[1]
# The loop's own room (the engines and how a run opens its storage) and the simulate entry point.
MAY_IMPORT_ENGINE = {"cutcheck.reference.batch", "cutcheck.reference.run_storage", "cutcheck.reference.simulate"}


def _modules() -> dict[str, ast.Module]:
    found = {}
    for path in package_module_paths():
        rel = path.relative_to(ROOT)
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(["cutcheck", *parts])] = ast.parse(path.read_text())
    return found


def _imports(tree: ast.Module) -> list[str]:
    """Every import of ours in a module: top level, function-local and TYPE_CHECKING alike."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("cutcheck"):
            out.append(node.module)
            out.extend(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.extend(a.name for a in node.names if a.name.startswith("cutcheck"))
    return out


def _room(module: str, rooms: set[str]) -> str:
    """A module's room: the deepest subpackage of cutcheck.reference, else the top-level subpackage."""
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "reference" and ".".join(parts[:3]) in rooms:
        return ".".join(parts[:3])
    return ".".join(parts[:2])


def test_no_import_cycle_between_rooms() -> None:
    modules = _modules()
    rooms = {m for m in modules if (ROOT / Path(*m.split(".")[1:]) / "__init__.py").is_file() and m.count(".") == 2
             and m.startswith("cutcheck.reference.")}
    graph = nx.DiGraph()
    for name, tree in modules.items():
        for target in _imports(tree):
            a, b = _room(name, rooms), _room(target, rooms)
            if a != b and target.split(".")[0] == "cutcheck" and len(target.split(".")) > 1:
                graph.add_edge(a, b)
    assert "cutcheck.reference.runtime" in graph and "cutcheck.model" in graph  # the graph is not empty
    cycles = sorted(nx.simple_cycles(graph), key=len)
    assert cycles == [], f"import cycles between rooms, e.g. {' -> '.join(cycles[0])}"


def test_only_the_loop_and_simulate_import_the_engine() -> None:
    importers = {name for name, tree in _modules().items()
                 if any(t in ("cutcheck.reference.engine", "cutcheck.reference.engine.Engine") for t in _imports(tree))}
    assert importers - {"cutcheck.reference.engine"} <= MAY_IMPORT_ENGINE, importers


def test_every_module_is_under_about_four_hundred_lines() -> None:
    big = {str(p.relative_to(ROOT)): n for p in package_module_paths() if (n := len(p.read_text().splitlines())) > 400}
    assert big == {}


# Function-local imports of our own modules that stay, and why: an optional dependency (boto3 behind
# the S3 store) or a cycle inside one room that a lazy import breaks (inspection and quarantine use
# each other; inspection reads Flink's format only when a file is not cutcheck's own).
LAZY_IMPORTS_ALLOWED = {"cutcheck.reference.storage.store", "cutcheck.reference.storage.quarantine",
                        "cutcheck.reference.storage.inspection"}


def test_the_engine_imports_its_own_modules_at_the_top() -> None:
    lazy = set()
    for name, tree in _modules().items():
        if not name.startswith("cutcheck.reference"):
            continue
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                lazy |= {name for node in ast.walk(fn)
                         if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cutcheck")}
    assert lazy <= LAZY_IMPORTS_ALLOWED, sorted(lazy - LAZY_IMPORTS_ALLOWED)
