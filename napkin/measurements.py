"""Measured peaks from ``napkin bench matmul --save``.

They live in one napkin-owned file, ``<config dir>/measurements.yaml``, keyed by profile name and
dtype, and are attached to a profile's ``measured`` section when it is loaded. napkin never writes
them into a built-in profile or into a profile file the user wrote, so hand-written files keep every
byte (comments and layout included).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from napkin.choices import Dtype
from napkin.errors import ProfileError
from napkin.files import write_atomic
from napkin.profiles import LoadedProfile, Measurement, config_dir, read_yaml

HEADER = "# Written by 'napkin bench matmul --save'. Best measured dense matmul FLOP/s per profile and dtype.\n"


def measurements_path() -> Path:
    return config_dir() / "measurements.yaml"


def load_all() -> dict[str, dict[str, Any]]:
    path = measurements_path()
    if not path.is_file():
        return {}
    data, _ = read_yaml(path.read_text(encoding="utf-8"), str(path))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ProfileError(f"{path}:1: expected a mapping of profile name → dtype → measurement")
    return data


def attach(loaded: LoadedProfile) -> LoadedProfile:
    """The profile with its saved measurements (if any) in ``measured``."""
    entry = load_all().get(loaded.profile.name)
    if not entry:
        return loaded
    try:
        measured = {Dtype(k): Measurement.model_validate(v) for k, v in entry.items()}
    except (ValueError, TypeError) as exc:
        raise ProfileError(f"{measurements_path()}: {loaded.profile.name}: invalid measurement: {exc}") from None
    profile = loaded.profile.model_copy(update={"measured": {**loaded.profile.measured, **measured}})
    return LoadedProfile(profile, loaded.origin, loaded.path, loaded.text)


def save(profile_name: str, dtype: str, measurement: Measurement) -> Path:
    """Record ``measurement`` for (profile, dtype), replacing the previous one; returns the file."""
    data = load_all()
    data.setdefault(profile_name, {})[dtype] = measurement.model_dump(mode="json", exclude_none=True)
    path = measurements_path()
    write_atomic(path, HEADER + yaml.safe_dump(data, sort_keys=True), overwrite=True)
    return path
