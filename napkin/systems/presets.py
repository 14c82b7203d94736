"""Model presets (``--model NAME``): built-in ones in ``napkin/data/models.yaml``, and your own.

Your presets are YAML files in the same format (a mapping of preset name → fields), found like user
hardware profiles, highest priority first:

1. the directories in ``$NAPKIN_MODELS_PATH`` (``os.pathsep``-separated);
2. ``<user config dir>/napkin/models`` (``$NAPKIN_CONFIG_DIR/models`` when that is set).

Nothing shadows silently: a preset name (compared case- and punctuation-insensitively) given by two
files, or by one of your files and a built-in, is an error naming both when that name is asked for. A file
that cannot be read (a FIFO, a folder named ``*.yaml``, invalid YAML) is skipped and reported, so one stray
file never breaks the other presets.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any, Final

from pydantic import ConfigDict, Field, ValidationError

from napkin.domain.model import Model
from napkin.errors import ProfileError, UsageError
from napkin.io.files import config_dir, env_dirs
from napkin.io.yamlio import clean, line_of, load_file, normalize, parse, validation_messages
from napkin.systems.profiles import Profile

ENV_MODELS_PATH: Final = "NAPKIN_MODELS_PATH"
BUILTIN_LABEL: Final = "<built-in>/models.yaml"


class ModelPreset(Profile):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str
    source: str
    published_params: float = Field(gt=0)
    seq: int = Field(gt=0, description="training sequence length: the default workload's seq")
    model: Model

    @property
    def params(self) -> int:
        """Total parameters (what memory needs)."""
        return self.model.params()

    @property
    def active_params(self) -> int:
        """Parameters used per token (what compute needs; differs for MoE)."""
        return self.model.active_params()


def _validate(data: Any, node: Any, label: str) -> dict[str, ModelPreset]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ProfileError(f"{label}:1: a model preset file must be a YAML mapping of preset name → fields")
    presets = {}
    for name, body in data.items():
        if not isinstance(name, str) or not normalize(name):  # ``null:``, ``true:`` or ``1:`` name nothing
            shown = clean(str(name))[:40]
            raise ProfileError(
                f"{label}:{line_of(node, ())}: {shown!r} is not a preset name; write a name such "
                "as my-model (quote it if YAML reads it as null, a bool or a number)"
            )
        if not isinstance(body, dict):
            raise ProfileError(
                f"{label}:{line_of(node, (name,))}: {clean(name)[:40]}: a preset must be a mapping of fields"
            )
        try:
            presets[name] = ModelPreset.model_validate({**body, "name": name})
        except ValidationError as exc:
            problems = validation_messages(exc, node, label, "see napkin/data/models.yaml for the fields")
            raise ProfileError("; ".join(problems), problems) from None
    return presets


@cache
def _builtin() -> dict[str, ModelPreset]:
    data, node = parse((files("napkin") / "data" / "models.yaml").read_text(encoding="utf-8"), BUILTIN_LABEL)
    return _validate(data, node, BUILTIN_LABEL)


def user_model_dirs() -> list[Path]:
    """Where your model presets are looked for, highest priority first."""
    return [*env_dirs(ENV_MODELS_PATH), config_dir() / "models"]


@dataclass
class PresetCatalog:
    """Every preset found, the files skipped (each with why) and the names given twice (each an error when that
    name is asked for, as in the hardware catalog: one stray file never breaks the other presets)."""

    presets: dict[str, ModelPreset] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    conflicts: dict[str, str] = field(default_factory=dict)  # name key → the message naming both files

    def problems(self) -> list[str]:
        return [f"model presets: skipped {problem}" for problem in self.skipped]


def _user_files(catalog: PresetCatalog) -> list[Path]:
    found = []
    for directory in user_model_dirs():
        try:
            if not directory.is_dir():
                continue
            names = sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml") and p.name[0] != ".")
        except OSError as exc:
            catalog.skipped.append(f"{directory}: cannot list: {exc.strerror or exc}")
            continue
        found += names
    return found


def load_catalog() -> PresetCatalog:
    """Every preset, built-in ones first. A file that cannot be read or is invalid is skipped (and listed); a
    name given by two files, or by one of yours and a built-in, is a conflict naming both."""
    catalog = PresetCatalog(presets=dict(_builtin()))
    where = {normalize(name): BUILTIN_LABEL for name in catalog.presets}
    for path in _user_files(catalog):
        try:
            data, node, _ = load_file(path)
            found = _validate(data, node, str(path))
        except ProfileError as exc:
            catalog.skipped.append(str(exc))
            continue
        for name, preset in found.items():
            key = normalize(name)
            other = where.get(key)
            if other is not None:
                catalog.conflicts[key] = (
                    f"model preset {name!r} is given by both {other} and {path}; rename or "
                    "remove one (your presets never replace one silently)"
                )
                continue
            where[key] = str(path)
            catalog.presets[name] = preset
    return catalog


def load_presets() -> dict[str, ModelPreset]:
    """Every usable preset by name (skipped files and conflicting names left out: see ``load_catalog``)."""
    return load_catalog().presets


def get_preset(name: str) -> ModelPreset:
    """The preset ``name`` answers to; a name two files give is an error naming both, and any file skipped
    on the way is said (``Profile.origin_notes``, carried into results), so a stray file is reported, never
    silently ignored."""
    catalog = load_catalog()
    presets = catalog.presets
    conflict = catalog.conflicts.get(normalize(name))
    if conflict is not None:
        raise ProfileError(conflict)
    by_key = {normalize(key): preset for key, preset in presets.items()}
    found = by_key.get(normalize(name))
    if found is not None:
        return found.told(catalog.problems())
    close = difflib.get_close_matches(name, list(presets), n=3, cutoff=0.3)
    hint = f"closest: {', '.join(close)}; " if close else ""
    raise UsageError(
        f"model: unknown preset {name!r}; {hint}known: {', '.join(presets)} (see 'napkin models')", field="model"
    )
