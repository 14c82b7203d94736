"""Ctrl-C while the command starts: one line and exit 130, from napkin's first line of code on.

Before napkin's package runs, a SIGINT is Python's own business (a KeyboardInterrupt from the
interpreter's start-up, which no program can intercept). From the first line of ``napkin/__init__.py``
to the moment the CLI has loaded, the handler below ends the process quietly: nothing has been
written or opened yet, so there is nothing to clean up. Then ``release`` restores Python's handler and
the CLI's own ``except KeyboardInterrupt`` (which lets ``finally`` blocks and atomic writes finish) takes
over.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType

EXIT_SIGINT = 130  # 128 + SIGINT, what a shell reports for a process ended by Ctrl-C


def _interrupted(signum: int, frame: FrameType | None) -> None:
    os.write(2, b"napkin: interrupted\n")
    os._exit(EXIT_SIGINT)


def guard_the_command() -> None:
    """When napkin runs as the command, Ctrl-C from now on ends it with one line on stderr and exit 130.

    ``python -m napkin`` imports the package while ``argv[0]`` is still ``-m``; the console script is
    named ``napkin``. Anything else is a program using the library, whose SIGINT handler stays its own.
    """
    program = sys.argv[0].replace("\\", "/").rsplit("/", 1)[-1] if sys.argv else ""
    if program in ("-m", "napkin", "napkin.exe"):
        signal.signal(signal.SIGINT, _interrupted)


def release() -> None:
    """Hand SIGINT back to Python (a KeyboardInterrupt), if napkin had guarded it."""
    if signal.getsignal(signal.SIGINT) is _interrupted:
        signal.signal(signal.SIGINT, signal.default_int_handler)
