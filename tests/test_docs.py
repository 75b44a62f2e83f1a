"""The documents that describe generated facts say what the code says."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from house_files import package_module_paths

from cutcheck.reference.faults.catalogue import catalogue_table

ROOT = Path(__file__).resolve().parents[1]


def test_the_design_lists_the_mutant_catalogue_as_it_is() -> None:
    design = (ROOT / "docs" / "design.md").read_text()
    missing = [row for row in catalogue_table() if row not in design]
    assert missing == [], "docs/design.md section 7 is stale; paste catalogue_table():\n" + "\n".join(missing)


def test_the_readme_says_where_the_examples_are_installed() -> None:
    """They are package data (pyproject's package-data), not files under <prefix>/share."""
    from importlib import resources

    readme = (ROOT / "README.md").read_text()
    assert "share/cutcheck" not in readme
    assert "package data" in readme
    installed = resources.files("cutcheck") / "examples" / "scenarios"
    assert any(p.name.endswith(".json") for p in installed.iterdir())


def test_the_docs_never_take_the_part_counter_for_commit_order_across_writers() -> None:
    """FileSink's part counter is per writer (FileWriterBucket: a UUID and a counter per bucket instance)."""
    text = (ROOT / "docs" / "validate-a-real-job.md").read_text()
    assert "so the counter is the commit order" not in text
    assert "within one writer" in text and "says nothing across writers" in text
    assert "else the FileSink part counter" not in text


def test_messages_and_docs_name_the_flink_2_checkpoint_directory_key() -> None:
    """Flink 2.x calls the option execution.checkpointing.dir; state.checkpoints.dir is its deprecated 1.x key.
    What a user reads (docs, and the messages and help of the commands) names the 2.x key wherever it names the
    1.x one."""
    sources = [*sorted((ROOT / "commands").glob("*.py")), *sorted((ROOT / "reference" / "storage").glob("*.py"))]
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sources]:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if "state.checkpoints.dir" in line:
                assert "execution.checkpointing.dir" in line, f"{path.name}:{number}: {line}"


# ----------------------------------------------------------------------------- the map of the house
# The README's tree, its import arrows and docs/design.md's tables (sections 2 and 3) are the map a
# newcomer reads; these tests hold them to the code so that they cannot go stale. Formats they rely on:
# - the tree: one entry a line, ``PATH[, PATH ...]  description`` (two spaces end the paths); an
#   indented line is inside the nearest less indented directory; ``DIR/*.py`` stands for every module
#   directly in DIR.
# - an arrow block: ``NAME --> NAME, NAME ...`` or ``NAME --> (nothing of ours)``, one line per name.
# - a table row names its folder in its first cell (`` `dir/` ``) and its modules as `` `name.py` ``.

PATH = re.compile(r"^(\*\.py|[\w.\-]+(/[\w.\-]+)*(/|/\*\.py)?)$")
NOTHING = "(nothing of ours)"


def package_modules() -> set[str]:
    """Every module of the package, as a path relative to the repository root."""
    return {str(p.relative_to(ROOT)) for p in package_module_paths()}


def code_blocks(text: str, heading: str) -> list[list[str]]:
    """The fenced blocks of the section that starts at ``heading`` (up to the next heading of its level)."""
    level = heading.split(" ")[0]
    start = text.index(heading + "\n")
    end = text.find("\n" + level + " ", start + len(heading))
    section = text[start:end if end >= 0 else len(text)]
    return [block.strip("\n").splitlines() for block in re.findall(r"\n```\n(.*?)\n```", section, re.S)]


def tree_paths(lines: list[str]) -> list[str]:
    """The paths a tree block names, each relative to the repository root."""
    parents: list[tuple[int, str]] = []  # (indent, directory) of the enclosing entries
    out = []
    for number, line in enumerate(lines, 1):
        indent = len(line) - len(line.lstrip(" "))
        names = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
        while parents and parents[-1][0] >= indent:
            parents.pop()
        if indent and not parents:
            raise AssertionError(f"README tree line {number} is indented under no directory: {line!r}")
        base = parents[-1][1] if parents else ""
        for name in names.split(", "):
            assert PATH.match(name), f"README tree line {number}: {name!r} is not a path (two spaces end the paths)"
            out.append(base + name)
        if names.endswith("/") and ", " not in names:
            parents.append((indent, base + names))
    return out


def arrows(lines: list[str]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for line in lines:
        source, _, targets = (part.strip() for part in line.partition("-->"))
        assert source and targets, f"not an arrow line: {line!r}"
        assert source not in out, f"{source} has two arrow lines"
        out[source] = set() if targets == NOTHING else set(targets.split(", "))
    return out


def stale_arrows(stated: dict[str, set[str]], actual: dict[str, set[str]]) -> str:
    """The arrow lines to write where the stated ones differ from the code's (sorted, so a fix is a paste)."""
    lines = [f"{name} --> {', '.join(sorted(actual[name])) or NOTHING}" if name in actual else f"{name}: no such module"
             for name in sorted(set(stated) | set(actual)) if stated.get(name) != actual.get(name)]
    return "\n".join(lines)


def module_of(path: str) -> str:
    parts = list(Path(path).with_suffix("").parts)
    return ".".join(["cutcheck", *(parts[:-1] if parts[-1] == "__init__" else parts)])


def imports_of(path: str) -> set[str]:
    """The modules of ours a module imports: top level, function-local and TYPE_CHECKING alike; a name
    imported from a package counts as that submodule when it is one."""
    known = {module_of(p) for p in package_modules()}
    here = module_of(path)
    package = here if path.endswith("__init__.py") else here.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse((ROOT / path).read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "cutcheck"}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], *filter(None, [base])])
            if base.split(".")[0] != "cutcheck":
                continue
            subs = {f"{base}.{a.name}" for a in node.names} & known
            out |= subs or {base}
    return out


def subpackage(module: str) -> str:
    """cutcheck.reference.runtime.tasks -> reference; cutcheck.cli -> cli; cutcheck -> cutcheck."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "cutcheck"


def room(module: str) -> str:
    """A module of cutcheck.reference's room: its folder (reference/runtime/), or reference/ for the
    top room (the files directly in reference/); a module outside reference/ is its subpackage."""
    parts = module.split(".")
    if parts[1:2] != ["reference"]:
        return subpackage(module) + "/"
    if len(parts) > 2 and (ROOT / "reference" / parts[2] / "__init__.py").is_file():
        return f"reference/{parts[2]}/"
    return "reference/"


def test_the_readme_tree_names_what_exists_and_every_module() -> None:
    readme = (ROOT / "README.md").read_text()
    paths = tree_paths(code_blocks(readme, "## The house")[0])
    missing = [p for p in paths if not (ROOT / p.replace("*.py", "")).exists() or ("*" in p and not list(ROOT.glob(p)))]
    assert missing == [], f"the README's tree names what does not exist: {missing}"
    covered = {str(p.relative_to(ROOT)) for pattern in paths if "*" in pattern for p in ROOT.glob(pattern)}
    unlisted = sorted(package_modules() - covered - set(paths))
    assert unlisted == [], f"the README's tree leaves out {unlisted}: name them or their folder as DIR/*.py"


def test_the_readme_arrows_between_subpackages_are_the_imports() -> None:
    block = code_blocks((ROOT / "README.md").read_text(), "## The house")[1]
    actual: dict[str, set[str]] = {}
    for path in package_modules():
        source = subpackage(module_of(path))
        targets = {subpackage(t) for t in imports_of(path)} - {source, "cutcheck"}
        actual.setdefault(source, set()).update(targets)
    stated, actual = arrows(block), {k: v for k, v in actual.items() if k != "cutcheck"}
    assert stated == actual, "README's arrows between subpackages are stale; the code says:\n" + stale_arrows(stated, actual)


def actual_rooms() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for path in package_modules():
        if path.startswith("reference/"):
            source = room(module_of(path))
            out.setdefault(source, set()).update({room(t) for t in imports_of(path)} - {source})
    return out


def short(name: str) -> str:
    """reference/runtime/ -> runtime/ (the rooms' names in the docs); model/ and reference/ stay."""
    return name.removeprefix("reference/") or "reference/"


def test_the_readme_says_what_each_room_may_import_and_the_code_agrees() -> None:
    block = code_blocks((ROOT / "README.md").read_text(), "### Rooms")[0]
    stated = arrows(block)
    actual = {short(k): {short(t) for t in v} for k, v in actual_rooms().items()}
    assert stated == actual, "README's arrows between rooms are stale; the code says:\n" + stale_arrows(stated, actual)


def design_rows(heading: str) -> list[list[str]]:
    text = (ROOT / "docs" / "design.md").read_text()
    start = text.index(heading + "\n")
    end = text.find("\n## ", start + 1)
    rows = [line.strip("|").split(" | ") for line in text[start:end].splitlines() if line.startswith("| `")]
    assert rows, f"docs/design.md {heading!r} has no table rows naming a folder"
    return rows


def ticked(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_the_design_room_map_names_every_module_and_each_room_s_imports() -> None:
    actual = actual_rooms()
    named: set[str] = set()
    stated: dict[str, set[str]] = {}
    for cells in design_rows("## 3. The reference engine by concern"):
        assert len(cells) == 3, f"docs/design.md section 3 row is not | room | modules | may import |: {cells}"
        folder = "reference/" + ticked(cells[0])[0].removeprefix("reference/")
        modules = [folder + m for m in ticked(cells[1]) if m.endswith(".py")]
        absent = [m for m in modules if not (ROOT / m).is_file()]
        assert absent == [], f"docs/design.md section 3 names modules that do not exist: {absent}"
        named |= set(modules)
        stated[folder] = {t if t == "model/" else "reference/" + t.removeprefix("reference/")
                          for t in ticked(cells[2]) if t.endswith("/")}
    reference = {p for p in package_modules() if p.startswith("reference/") and not p.endswith("__init__.py")}
    assert not reference - named, f"docs/design.md section 3 leaves out {sorted(reference - named)}"
    assert stated == actual, "docs/design.md section 3's 'may import' column is stale; the code says:\n" + stale_arrows(
        {short(k): {short(t) for t in v} for k, v in stated.items()}, {short(k): {short(t) for t in v} for k, v in actual.items()})


def test_the_design_house_table_names_every_module_outside_the_engine() -> None:
    named: set[str] = set()
    for cells in design_rows("## 2. The house"):
        folder = ticked(cells[0])[0] if ticked(cells[0])[0].endswith("/") else ""
        for m in (folder + t for t in ticked(" | ".join(cells[1:])) if t.endswith(".py") and "/" not in t):
            assert (ROOT / m).is_file(), f"docs/design.md section 2 names {m}, which does not exist"
            named.add(m)
        named |= {t for t in ticked(cells[0]) if t.endswith(".py")}
    outside = {p for p in package_modules() if not p.startswith("reference/") and not p.endswith("/__init__.py")}
    assert not outside - named, f"docs/design.md section 2 leaves out {sorted(outside - named)}"


def test_the_readme_names_the_modules_that_import_the_engine() -> None:
    text = code_blocks_free((ROOT / "README.md").read_text(), "### Rooms")
    sentence = text[text.index("The `Engine` object itself"):].split(":")[0]
    stated = {"reference/" + m for m in ticked(sentence) if m.endswith(".py")}
    actual = {p for p in package_modules() if "cutcheck.reference.engine" in imports_of(p)} - {"reference/engine.py"}
    assert stated == actual, f"README's Rooms paragraph names {sorted(stated)} as importing the Engine; the code: {sorted(actual)}"


def code_blocks_free(text: str, heading: str) -> str:
    """The prose of a section, up to its first fenced block."""
    start = text.index(heading + "\n")
    return text[start:text.index("\n```\n", start)]


def test_every_module_path_the_docs_name_exists() -> None:
    """A path such as reference/checks/oracle.py (or core/doors.py, inside reference/) in the README or
    docs/ names a module that exists: moving a module means updating the text that points to it."""
    pattern = re.compile(r"(?<![\w/.\-])((?:[\w\-]+/)+[\w\-]+\.py)\b")
    stale = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            stale += [f"{doc.name}:{number}: {p}" for p in pattern.findall(line)
                      if not (ROOT / p).is_file() and not (ROOT / "reference" / p).is_file()]
    assert stale == [], "the docs name modules that do not exist:\n" + "\n".join(stale)


def defined_names(path: Path) -> set[str]:
    """What a module defines (functions, classes, methods, assigned names) and the strings it holds
    (the protocol's actions are named by string)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            out.add(node.value)
    return out


def test_every_name_the_docs_place_in_a_module_is_defined_there() -> None:
    """`path.py`: `name` (or `Class.method`) in the README or docs/ points at something that module defines."""
    pattern = re.compile(r"`((?:[\w\-]+/)+[\w\-]+\.py)`: `([A-Za-z_][\w.]*)")
    stale = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            for path, name in pattern.findall(line):
                module = ROOT / path if (ROOT / path).is_file() else ROOT / "reference" / path
                if module.is_file() and not set(name.split(".")[:2]) <= defined_names(module):
                    stale.append(f"{doc.name}:{number}: {path}: {name}")
    assert stale == [], "the docs place names in modules that do not define them:\n" + "\n".join(stale)
