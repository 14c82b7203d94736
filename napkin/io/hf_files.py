"""Reading a Hugging Face config.json: the file, or a model folder's, as one JSON object; one ``UsageError``
naming the input (``field``) and the path for anything else. The domain (``napkin.domain.hf_config``) reads
the object."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from napkin.errors import NapkinError, UsageError
from napkin.io.files import read_text
from napkin.io.yamlio import parse_json


def is_source(text: str) -> bool:
    """Whether a ``--model`` value names a config rather than a preset: a path, a folder or a Hub id."""
    return "/" in text or os.sep in text or text.endswith(".json")


def config_path(spec: str | Path, field: str = "model_config") -> Path:
    """``spec``'s config.json: the file itself, or the one in a model folder."""
    path = Path(spec).expanduser()
    if path.is_dir():
        folder, path = path, path / "config.json"
        if not path.is_file():
            raise UsageError(
                f"{field}: folder {str(folder)!r} has no config.json (a Hugging Face checkpoint folder has one)",
                field=field,
            )
    return path


def read_object(path: Path, field: str = "model_config") -> dict[str, Any]:
    """A config.json's object: one ``UsageError`` naming ``field`` and the path for anything else."""
    where = repr(str(path))
    try:
        data = parse_json(read_text(path), python_constants=True)  # a regular file of bounded size (yamlio)
    except NapkinError as exc:
        raise UsageError(f"{field}: {exc}", field=field) from None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, or nesting deeper than the parser's stack
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise UsageError(f"{field}: {where} is not valid JSON ({reason})", field=field) from None
    if not isinstance(data, dict):
        raise UsageError(f"{field}: {where} is not a JSON object (a config.json maps keys to values)", field=field)
    return data


def read_config_file(spec: str | Path, field: str = "model_config") -> dict[str, Any]:
    """The object of a config.json path or of a model folder's config.json."""
    return read_object(config_path(spec, field), field)
