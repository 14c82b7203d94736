"""The terminal's width, as napkin reads it: COLUMNS when it is a plain number (rich fails on '²'), else the
terminal's own size. No rich here: the CLI asks for a width before anything is rendered."""

from __future__ import annotations

import os
import sys


def env_columns() -> int | None:
    """COLUMNS when it is 1-4 ASCII digits (at least 20), else None."""
    raw = os.environ.get("COLUMNS", "").strip()
    if raw.isascii() and raw.isdigit() and len(raw) <= 4:
        return max(20, int(raw))
    return None


def stderr_columns() -> int | None:
    """The width of stderr's terminal (COLUMNS first); None when stderr is not a terminal."""
    try:
        if not sys.stderr.isatty():
            return None
        fd = sys.stderr.fileno()
    except (AttributeError, ValueError, OSError):  # replaced or closed stream
        return None
    columns = env_columns()
    if columns is not None:
        return columns
    try:
        return os.get_terminal_size(fd).columns or None  # 0: a terminal that does not say
    except OSError:
        return None
