"""Reading JSON a user gave: every way it can be unreadable is one sentence naming the file.

``json.loads`` fails in more ways than ``JSONDecodeError``: nesting deeper than the interpreter's
recursion limit raises ``RecursionError`` (a traceback, before this module), an integer of more
than 4300 digits a plain ``ValueError``, and bytes that are not UTF-8 a ``UnicodeDecodeError``.
Every file cutcheck reads as JSON (graphs, scenarios, run.json, trace lines) goes through here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cutcheck.model.errors import CutcheckError

# What json.loads can raise on bad text (RecursionError: nesting; ValueError: also huge integers).
JSON_FAILURES = (ValueError, RecursionError)


def parse_json(text: str | bytes, where: str, error: type[CutcheckError], fix: str = "fix the file") -> Any:
    """``text`` parsed, or ``error`` with one sentence: what is wrong, ``where``, and ``fix``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{where}: not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}; {fix}.") from None
    except UnicodeDecodeError:
        raise error(f"{where}: not UTF-8 text, so not JSON; {fix}.") from None
    except RecursionError:
        raise error(f"{where}: JSON nested deeper than cutcheck reads (no input of cutcheck's nests more than a "
                    f"few levels); {fix}.") from None
    except ValueError as exc:  # for instance an integer of more digits than Python converts
        raise error(f"{where}: not JSON cutcheck can read ({exc}); {fix}.") from None


def read_json(path: str | Path, error: type[CutcheckError], what: str, fix: str = "fix the file") -> Any:
    """The JSON value in the file ``path`` (a ``what``: "job-graph file", "scenario"), or one sentence."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise error(f"{path}: no such {what}; check the path.") from None
    except IsADirectoryError:
        raise error(f"{path}: is a directory, not a {what}; give the path of a JSON file.") from None
    except OSError as exc:
        raise error(f"{path}: cannot read the {what} ({exc.strerror or exc}); check the path and its "
                    "permissions.") from None
    try:
        text = data.decode("utf-8")  # JSON files are UTF-8 (RFC 8259); json.loads would guess UTF-16 from a BOM
    except UnicodeDecodeError:
        raise error(f"{path}: not UTF-8 text, so not JSON; {fix}.") from None
    return parse_json(text, str(path), error, fix)
