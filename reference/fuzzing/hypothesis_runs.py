"""How a campaign runs Hypothesis: in a private home, with Ctrl-C that cannot be lost, and with its
scan of the source for constants done at the start of the budget, not inside one of its examples."""

from __future__ import annotations

import contextlib
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def private_hypothesis_home() -> Iterator[None]:
    """Hypothesis caches what it reads from source files (and keeps its example database, when one is
    configured) under ``.hypothesis/`` in the working directory; a campaign must leave nothing in the
    user's directory, so Hypothesis gets a new temporary home, removed at the end however the campaign
    ends (Ctrl-C included), and the home it had before is put back."""
    from hypothesis import configuration

    previous = vars(configuration).get("__hypothesis_home_directory")
    home = tempfile.mkdtemp(prefix="cutcheck-hypothesis-")
    configuration.set_hypothesis_home_dir(home)
    try:
        yield
    finally:
        configuration.set_hypothesis_home_dir(previous)
        shutil.rmtree(home, ignore_errors=True)


_INTERRUPTED = threading.Event()


@contextlib.contextmanager
def sticky_interrupts() -> Iterator[None]:
    """Ctrl-C that cannot be lost: Hypothesis runs a garbage-collector callback, and a KeyboardInterrupt
    raised inside one is printed and dropped by Python (the campaign then ran on for its whole budget).
    The handler also sets a flag that every example looks at first, so the next example ends the run;
    the dropped one is not printed (the run says "interrupted" once)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigint(signum: int, frame: Any) -> None:
        _INTERRUPTED.set()
        raise KeyboardInterrupt

    def unraisable(info: Any) -> None:
        if not isinstance(info.exc_value, KeyboardInterrupt):  # the flag carries a dropped Ctrl-C
            previous_hook(info)

    _INTERRUPTED.clear()
    previous, previous_hook = signal.signal(signal.SIGINT, on_sigint), sys.unraisablehook
    sys.unraisablehook = unraisable
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        sys.unraisablehook = previous_hook
        _INTERRUPTED.clear()


def stop_if_interrupted() -> None:
    if _INTERRUPTED.is_set():
        raise KeyboardInterrupt


def scan_constants_now() -> None:
    """Hypothesis reads the source of every loaded module outside site-packages for constants to draw
    (cutcheck's own, in an editable checkout), lazily, in the first example that draws one: about
    1.5 s, once per process, which once landed past the wall. Done here it is paid at the start of the
    budget, before any scenario runs. A Hypothesis without this scan has nothing to do here."""
    try:
        from hypothesis.internal.conjecture.providers import _get_local_constants
    except ImportError:
        return
    _get_local_constants()
