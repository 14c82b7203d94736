"""Measured peaks from ``napkin bench matmul --save``.

They live in one napkin-owned file, ``<config dir>/measurements.yaml``, keyed by profile name and
dtype, and are attached to a profile's ``measured`` section when it is resolved. napkin never writes
them into a built-in profile or into a profile file the user wrote, so hand-written files keep every
byte (comments and layout included). Saving is a locked read-modify-write (``files.locked``), so
concurrent ``bench --save`` runs never lose a measurement.

This module depends on no other napkin data module (``profiles`` imports it, not the reverse).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BeforeValidator, ConfigDict, Field, ValidationError

from napkin import units
from napkin.domain.base import Record
from napkin.domain.choices import Dtype
from napkin.errors import NapkinError, ProfileError, UsageError
from napkin.io.files import config_dir, locked, write_atomic
from napkin.io.yamlio import load_file, normalize

HEADER = "# Written by 'napkin bench matmul --save'. Best measured dense matmul FLOP/s per profile and dtype.\n"


def _rate(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError("expected a number or a string with a unit, such as '989.5 TFLOP/s'")
    try:
        return units.parse_rate(value, "flops_per_second")
    except NapkinError as exc:
        raise ValueError(str(exc).removeprefix("flops_per_second: ")) from None


class Measurement(Record):
    """A measured matmul throughput (written by ``napkin bench matmul --save``, never by hand)."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)
    flops_per_second: Annotated[float, BeforeValidator(_rate)]
    date: str
    device: str = Field(description="the device torch reported when it was measured")
    torch_version: str | None = None
    size: str | None = Field(default=None, description="matmul shape M x K x N of the best result")


def measurements_path() -> Path:
    return config_dir() / "measurements.yaml"


def load_all() -> dict[str, Any]:
    """The whole file as a mapping; a file that is missing is empty, one that is broken a ProfileError."""
    path = measurements_path()
    if not path.exists() and not path.is_symlink():
        return {}
    data, _, _ = load_file(path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ProfileError(f"{path}:1: expected a mapping of profile name → dtype → measurement")
    return data


def for_profile(name: str) -> tuple[dict[Dtype, Measurement], list[str]]:
    """(measurements of profile ``name``, problems). A broken file is a problem, never an exception:
    it must not break commands that do not use measured peaks."""
    try:
        entry = load_all().get(name)
    except ProfileError as exc:
        return {}, [f"saved measurements ignored: {exc}"]
    if not entry:
        return {}, []
    if not isinstance(entry, dict):
        return {}, [
            f"saved measurements for {name} ignored: {measurements_path()}: {name}: expected dtype → measurement"
        ]
    measured: dict[Dtype, Measurement] = {}
    problems = []
    for key, value in entry.items():
        try:
            measured[Dtype(str(key))] = Measurement.model_validate(value)
        except (ValueError, ValidationError):
            problems.append(f"saved measurement {name}.{str(key)[:20]} in {measurements_path()} is invalid; ignored")
    return measured, problems


def device_matches(device: str, device_names: Iterable[str]) -> bool:
    """Whether torch's ``device`` name is one of a profile's ``device_names`` (case/punctuation-insensitive)."""
    return normalize(device) in {normalize(n) for n in device_names}


def check_device(profile_name: str, device_names: list[str], device: str, *, force: bool = False) -> None:
    """Refuse to record ``device``'s figure as ``profile_name``'s unless the profile lists that device."""
    if force or device_matches(device, device_names):
        return
    listed = ", ".join(repr(n) for n in device_names) or "no device_names"
    raise UsageError(
        f"--save: this ran on {device!r}, but profile {profile_name} lists {listed}; a measurement is kept only "
        f"for the device it was measured on (add the name to the profile's device_names, pick the matching "
        f"--hardware, or pass --force)"
    )


def _store(keys: tuple[str, ...], value: dict[str, Any]) -> Path:
    """Set the entry at ``keys`` (creating the tables on the way, replacing what is there) under the file lock,
    written atomically; returns the file."""
    path = measurements_path()
    with locked(path):
        data = load_all()
        table = data
        for key in keys[:-1]:
            inner = table.get(key)
            if not isinstance(inner, dict):
                inner = table[key] = {}
            table = inner
        table[keys[-1]] = value
        write_atomic(path, HEADER + yaml.safe_dump(data, sort_keys=True, allow_unicode=True), overwrite=True)
    return path


def save(profile_name: str, dtype: str, measurement: Measurement) -> Path:
    """Record ``measurement`` for (profile, dtype), replacing the previous one; returns the file."""
    return _store((profile_name, dtype), measurement.model_dump(mode="json", exclude_none=True))


#: Collective bus bandwidths (``napkin bench all-reduce --save``), by cluster and operation. The key
#: cannot be a profile name (names start with a letter or digit), so ``for_profile`` never reads it.
COMM_KEY = "_comm"


def save_comm(cluster: str, op: str, entry: dict[str, Any]) -> Path:
    """Record the best bus bandwidth measured for (cluster, op), replacing the previous one; returns the file."""
    return _store((COMM_KEY, cluster, op), entry)


def comm_measurement(cluster: str, op: str) -> dict[str, Any] | None:
    """The saved collective measurement for (cluster, op), if any."""
    clusters = load_all().get(COMM_KEY)
    ops = clusters.get(cluster) if isinstance(clusters, dict) else None
    entry = ops.get(op) if isinstance(ops, dict) else None
    return entry if isinstance(entry, dict) else None


#: Device memory bandwidths (``napkin bench memory --save``), by profile: the best of copy and triad.
MEMORY_KEY = "_memory"


class BandwidthMeasurement(Record):
    """A measured memory bandwidth (written by ``napkin bench memory --save``, never by hand)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    bytes_per_second: float = Field(gt=0)
    kernel: str = Field(description="copy or triad (STREAM, McCalpin 1995): the one that reached it")
    date: str
    device: str
    torch_version: str | None = None
    size_bytes: float | None = None


def save_memory(profile_name: str, measurement: BandwidthMeasurement) -> Path:
    """Record the memory bandwidth measured for ``profile_name``, replacing the previous one."""
    return _store((MEMORY_KEY, profile_name), measurement.model_dump(mode="json", exclude_none=True))


def memory_measurement(profile_name: str) -> BandwidthMeasurement | None:
    """The saved memory bandwidth for ``profile_name``, if any (a broken entry is a ProfileError naming it)."""
    table = load_all().get(MEMORY_KEY)
    entry = table.get(profile_name) if isinstance(table, dict) else None
    if not isinstance(entry, dict):
        return None
    try:
        return BandwidthMeasurement.model_validate(entry)
    except ValidationError:
        raise ProfileError(f"{measurements_path()}: {MEMORY_KEY}.{profile_name}: invalid measurement") from None
