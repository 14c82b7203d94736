"""The ``napkin`` console script: imports the CLI inside an interrupt guard.

Ctrl-C while the CLI's modules load (typer, rich, pydantic) is "napkin: interrupted" and exit 130,
not an ImportError traceback. ``napkin.cli.main`` handles everything after that.

The command runs without the cyclic garbage collector. A command is one short computation: nearly every
object it makes (the modules and classes it imports, pydantic's validators, the profiles it reads, the
layouts it ranks) lives until it prints, so the collector's passes over them free nothing, and they were
about 8 % of ``napkin plan``'s CPU time; the reference cycles a command drops are few (peak memory of plan,
traffic and serve-plan is the same with and without it). Reference counting still frees everything else at
once. The live checks (``bench``, ``verify``), which run torch for seconds, keep the collector. The library
(``import napkin``) leaves it alone.
"""

from __future__ import annotations

import gc
import sys
from typing import Final

#: The commands that keep the cyclic garbage collector: they run torch, for seconds.
COLLECTED: Final = ("bench", "verify")


def main() -> None:
    command = next((arg for arg in sys.argv[1:] if not arg.startswith("-")), None)
    if command not in COLLECTED:
        gc.disable()
    try:
        from napkin.cli import main as run
    except KeyboardInterrupt:  # imported as a library, then started (napkin/_startup.py guards the command)
        sys.stderr.write("napkin: interrupted\n")
        sys.exit(130)
    from napkin._startup import release

    release()
    run()
