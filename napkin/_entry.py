"""The ``napkin`` console script: imports the CLI inside an interrupt guard.

Ctrl-C while the CLI's modules load (typer, rich, pydantic) is "napkin: interrupted" and exit 130,
not an ImportError traceback. ``napkin.cli.main`` handles everything after that.
"""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from napkin.cli import main as run
    except KeyboardInterrupt:  # imported as a library, then started (napkin/_startup.py guards the command)
        sys.stderr.write("napkin: interrupted\n")
        sys.exit(130)
    from napkin._startup import release

    release()
    run()
