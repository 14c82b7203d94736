"""Hardware profiles: ``HardwareProfile`` and its reader, its kind of the catalog (``HARDWARE``) and its
lookups (``resolve``: an explicit file, a name, ``$NAPKIN_HARDWARE``, else the default; saved measurements
attached)."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Final

from pydantic import (
    Field,
    model_validator,
)

from napkin.domain.choices import Dtype
from napkin.errors import UsageError
from napkin.io.yamlio import normalize
from napkin.systems.measurements import Measurement, for_profile
from napkin.systems.profiles.catalog import Catalog, Kind, Loaded, Origin, catalog_of, file_of, find_in
from napkin.systems.profiles.records import (
    STRICT,
    Bytes,
    BytesPerSecond,
    FlopsPerSecond,
    Profile,
    Slug,
    Source,
    Watts,
    parse_as,
)

ENV_HARDWARE_PATH: Final = "NAPKIN_HARDWARE_PATH"
ENV_HARDWARE: Final = "NAPKIN_HARDWARE"  # the default profile name when none is given
DEFAULT_HARDWARE: Final = "h100"


class HardwareProfile(Profile):
    """One accelerator. Peaks are dense (no 2:4 sparsity), per device, in FLOP/s."""

    model_config = STRICT

    name: Slug = Field(description="identifier used with --hardware")
    display_name: str = Field(min_length=1)
    vendor: str = Field(min_length=1)
    aliases: list[str] = Field(default_factory=list)
    device_names: list[str] = Field(
        default_factory=list, description="names torch reports for this device (napkin bench matches them)"
    )
    form_factor: str | None = None
    memory: Bytes = Field(description="memory capacity as the datasheet states it (GB = 1e9 B, GiB = 2^30 B)")
    memory_usable: Bytes | None = Field(
        default=None, description="capacity the device reports (torch.cuda.get_device_properties().total_memory)"
    )
    memory_bandwidth: BytesPerSecond
    power: Watts | None = Field(default=None, description="board power (TDP / max) in watts")
    interconnect: str | None = Field(default=None, description="scale-up link, e.g. 'NVLink 4'")
    interconnect_bandwidth: BytesPerSecond | None = Field(
        default=None, description="scale-up bandwidth per device, total of both directions"
    )
    interconnect_devices: int | None = Field(
        default=None,
        ge=1,
        le=1 << 20,
        description="devices the interconnect joins in one domain (2 for an NVLink-bridged pair, 8 for an HGX or OAM "
        "board): a TP group of a device no cluster is built from stays within it",
    )
    host_link_bandwidth: BytesPerSecond | None = Field(
        default=None, description="CPU–GPU link per device, each direction (PCIe, NVLink-C2C): activation offload"
    )
    peak_flops: dict[Dtype, FlopsPerSecond] = Field(description="DENSE peak FLOP/s (or OP/s for int8) per dtype")
    price_per_hour: float | None = Field(
        default=None, gt=0, lt=1e6, allow_inf_nan=False, description="USD per device-hour, for cost estimates"
    )
    sources: list[Source] = Field(min_length=1)
    notes: str | None = None
    measured: dict[Dtype, Measurement] = Field(
        default_factory=dict, description="reserved for napkin bench matmul --save"
    )

    @model_validator(mode="after")
    def _physical_bounds(self) -> HardwareProfile:
        peaks = self.peak_flops
        if not peaks:
            raise ValueError("peak_flops: give at least one dtype, e.g. bf16: 989.5 TFLOP/s")
        for dtype, value in peaks.items():
            if value > 1e17:
                raise ValueError(f"peak_flops.{dtype}: {value:.3g} FLOP/s is above 100 PFLOP/s for one device")
        # Lower precision never has a lower dense peak than higher precision on the same tensor cores.
        for low, high in (
            ("bf16", "fp32"),
            ("fp16", "fp32"),
            ("tf32", "fp32"),
            ("fp8", "bf16"),
            ("fp4", "fp8"),
        ):
            if low in peaks and high in peaks and peaks[Dtype(low)] < peaks[Dtype(high)]:
                raise ValueError(f"peak_flops.{low} must be ≥ peak_flops.{high}")
        if not 1e8 <= self.memory <= 1e13:
            raise ValueError("memory must be between 0.1 GB and 10 TB")
        if not 1e9 <= self.memory_bandwidth <= 1e14:
            raise ValueError("memory_bandwidth must be between 1 GB/s and 100 TB/s")
        if self.power is not None and not 1 <= self.power <= 5000:
            raise ValueError("power must be between 1 W and 5000 W")
        return self

    def peak(self, dtype: str) -> float:
        """Dense peak FLOP/s for ``dtype``; a clear error if the profile has none."""
        try:
            return self.peak_flops[Dtype(dtype)]
        except (ValueError, KeyError):
            have = ", ".join(self.peak_flops)
            raise UsageError(f"dtype: {self.name} has no {dtype} peak; it has: {have}", field="dtype") from None

    def peak_if_known(self, dtype: str) -> float | None:
        """Dense peak FLOP/s for ``dtype``, or None when the profile gives none."""
        return self.peak_flops.get(Dtype(dtype)) if dtype in Dtype.__members__ else None

    def measured_for(self, dtype: str) -> Measurement | None:
        """The saved benchmark for ``dtype`` (``napkin bench matmul --save``), if any."""
        return self.measured.get(Dtype(dtype)) if dtype in Dtype.__members__ else None

    def peak_with_source(self, dtype: str, measured: bool = False) -> tuple[float, str]:
        """The datasheet's dense peak, or the saved benchmark (``napkin bench matmul --save``), and which."""
        if not measured:
            return self.peak(dtype), "datasheet"
        found = self.measured_for(dtype)
        if found is None:
            raise UsageError(
                f"peak measured: no saved {dtype} measurement for {self.name}; "
                f"run 'napkin bench matmul --hardware {self.name} --dtype {dtype} --save' first",
                field="peak",
            )
        return found.flops_per_second, f"measured {found.date} on {found.device}"

    def ridge_point(self, dtype: str) -> float:
        """Arithmetic intensity (FLOP/byte) above which a kernel is compute-bound (roofline)."""
        return self.peak(dtype) / self.memory_bandwidth

    def lookup_keys(self) -> set[str]:
        return {normalize(self.name), *(normalize(a) for a in self.aliases)}


@functools.lru_cache(maxsize=256)
def parse_profile(text: str, label: str) -> HardwareProfile:
    """Validate one profile's YAML text; errors name the file, the line and the field (never a value)."""
    return parse_as(HardwareProfile, text, label, "hardware", "peak_flops")


# ------------------------------------------------------------------------------------------ lookup

HARDWARE: Final[Kind[HardwareProfile]] = Kind(
    "hardware", ENV_HARDWARE_PATH, "hardware", "hardware", "h100", parse_profile
)


def builtin_dir() -> Traversable:
    """The bundled profiles: ``napkin/hardware`` in a wheel, the checkout's ``hardware/`` otherwise."""
    return HARDWARE.builtin_dir()


def user_hardware_dir() -> Path:
    return HARDWARE.user_dir()


def search_path() -> list[tuple[Origin, Traversable]]:
    """The directories searched for hardware profiles, highest priority first."""
    return HARDWARE.search_path()


LoadedProfile = Loaded[HardwareProfile]


def load_catalog(search: Iterable[tuple[Origin, Traversable]] | None = None) -> Catalog[HardwareProfile]:
    """Read and validate every hardware profile along the search path; invalid files are collected, not raised."""
    return catalog_of(HARDWARE, search)


def load_file(path: str | Path, what: str = "hardware_file") -> LoadedProfile:
    """Read one explicit hardware profile file (``hardware_file``)."""
    return file_of(HARDWARE, path, what)


def find(
    name: str, search: Iterable[tuple[Origin, Traversable]] | None = None, what: str = "hardware"
) -> LoadedProfile:
    """The hardware profile that answers to ``name`` (``find_in``)."""
    return find_in(HARDWARE, name, search, what)


def find_by_device(device_name: str) -> LoadedProfile | None:
    """The visible profile whose ``device_names`` lists what torch reports (case/punctuation-insensitive)."""
    key = normalize(device_name)
    for loaded in load_catalog().visible():
        if key in {normalize(n) for n in loaded.profile.device_names}:
            return loaded
    return None


def resolve(name: str | None = None, hardware_file: str | Path | None = None, what: str = "hardware") -> LoadedProfile:
    """The profile a command should use, with any saved measurements attached, saying what a command should say
    about it (``Profile.origin_notes``: a replaced built-in, ignored measurements).

    ``what`` names the input the name came from in error messages (``--hardware``, ``--from``, a
    positional); a name taken from ``$NAPKIN_HARDWARE`` is blamed on it.
    """
    if hardware_file is not None:
        loaded = load_file(hardware_file)
    elif name is not None:
        loaded = find(name, what=what)
    elif os.environ.get(ENV_HARDWARE):
        loaded = find(os.environ[ENV_HARDWARE], what=f"${ENV_HARDWARE}")
    else:
        loaded = find(DEFAULT_HARDWARE, what=what)
    measured, problems = for_profile(loaded.profile.name)
    if not measured and not problems:
        return loaded
    profile = loaded.profile.model_copy(update={"measured": {**loaded.profile.measured, **measured}})
    return LoadedProfile(profile.told(problems), loaded.origin, loaded.path, loaded.text)


def schema() -> dict[str, Any]:
    """The JSON Schema of a hardware profile file (for editors: yaml-language-server)."""
    result = HardwareProfile.model_json_schema()
    result["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    result["title"] = "napkin hardware profile"
    return result
