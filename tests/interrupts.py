"""Starting a cutcheck process that a test will interrupt with Ctrl-C (SIGINT).

A process inherits ignored signals, and a non-interactive shell starts its background jobs with SIGINT
ignored (bash, without job control): a test run started that way (`pytest ... &` in a script, some CI
runners) would start every child deaf to SIGINT, and a Ctrl-C test would wait for a process that never
hears it. The child gets SIGINT's default back before it starts, so Python installs its own handler
(KeyboardInterrupt) as it does under a terminal.
"""

from __future__ import annotations

import signal
import subprocess
from typing import Any


def _hear_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interruptible(args: list[str], **kwargs: Any) -> subprocess.Popen[str]:
    """``subprocess.Popen(args, text=True, **kwargs)`` with SIGINT at its default in the child."""
    return subprocess.Popen(args, text=True, preexec_fn=_hear_sigint, **kwargs)  # noqa: PLW1509 - single-threaded test process
