"""Writing user files safely: atomically (temp file + rename), and never over a file unasked."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from napkin.errors import NapkinError


def write_atomic(path: Path, text: str, *, overwrite: bool = False) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same directory and ``os.replace``.

    Readers see either the old file or the new one, never half of either. With ``overwrite=False``
    an existing file is an error and is left untouched.
    """
    if path.exists() and not overwrite:
        raise NapkinError(f"{path} already exists; napkin does not overwrite it (use --force to replace it)")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
