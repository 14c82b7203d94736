"""Hardware profiles: the validated model, the YAML reader, and the lookup order.

A profile is one YAML file per device. Built-in profiles ship inside the wheel (``napkin/hardware``,
mapped from the repository's ``hardware/`` folder) and are read through ``importlib.resources``;
users add or override profiles in their own directories. Lookup order, highest priority first:

1. an explicit file (``--hardware-file PATH``);
2. the directories in ``$NAPKIN_HARDWARE_PATH`` (``os.pathsep``-separated), in order;
3. the user directory (``<user config dir>/napkin/hardware``; ``$NAPKIN_CONFIG_DIR`` overrides it);
4. the built-in profiles.

A profile is found by its ``name`` or any alias, compared case- and punctuation-insensitively
(``H100-SXM`` = ``h100_sxm``). A profile earlier in the order shadows a later one that answers to the
same name, as a whole file (no merging). Peaks are DENSE: 2:4-sparsity headline figures are halved
in the files, and the file says so.

This module reads files but never prints; it imports neither typer nor rich.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Annotated, Any, Final, Literal

import yaml
from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
    model_validator,
)

from napkin import units
from napkin.base import Record
from napkin.choices import Dtype
from napkin.errors import NapkinError, ProfileError, UsageError

ENV_HARDWARE_PATH: Final = "NAPKIN_HARDWARE_PATH"
ENV_CONFIG_DIR: Final = "NAPKIN_CONFIG_DIR"
ENV_HARDWARE: Final = "NAPKIN_HARDWARE"  # the default profile name when none is given
SCHEMA_FILE: Final = "schema.json"
DEFAULT_HARDWARE: Final = "h100"

Origin = Literal["file", "env", "user", "built-in"]

_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _quantity(parser: Any, kind: str, example: str) -> Any:
    """A pydantic annotation: a positive number in base units, or a string with a unit."""

    def validate(value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ValueError(f"expected a number or a string with a unit, such as {example!r}")
        try:
            result: float = parser(value, kind)
        except NapkinError as exc:
            raise ValueError(str(exc).removeprefix(f"{kind}: ")) from None
        return result

    schema = {
        "anyOf": [
            {"type": "number", "exclusiveMinimum": 0},
            {"type": "string", "pattern": r"^\s*[0-9.eE_+-]+\s*[A-Za-z/]*\s*$"},
        ],
        "description": f"{kind}: a number in base units or a string with a unit, e.g. {example!r}",
    }
    return [BeforeValidator(validate), WithJsonSchema(schema)]


Bytes = Annotated[float, *_quantity(units.parse_bytes, "bytes", "80 GB")]
BytesPerSecond = Annotated[float, *_quantity(units.parse_bandwidth, "bandwidth", "3.35 TB/s")]
FlopsPerSecond = Annotated[float, *_quantity(units.parse_rate, "FLOP/s", "989.5 TFLOP/s")]
Watts = Annotated[float, *_quantity(units.parse_power, "power", "700 W")]

_STRICT = ConfigDict(extra="forbid", frozen=True, validate_default=True)


SLUG_RULE: Final = "use lower-case letters, digits, '.', '_' and '-', e.g. 'my-h100'"


def is_slug(value: str) -> bool:
    """A valid profile name (it is also the file name)."""
    return re.fullmatch(r"[a-z0-9][a-z0-9._-]*", value) is not None


def _check_slug(value: str) -> str:
    if not is_slug(value):
        raise ValueError(SLUG_RULE)
    return value


Slug = Annotated[str, AfterValidator(_check_slug)]


class Source(Record):
    """Where a set of numbers comes from: a datasheet or whitepaper."""

    model_config = _STRICT
    title: str = Field(min_length=3)
    url: str = Field(pattern=r"^(https?://|file:|doc:)")
    covers: str | None = Field(default=None, description="which figures this source gives")


class Measurement(Record):
    """A measured matmul throughput (written by ``napkin bench matmul --save``, never by hand)."""

    model_config = _STRICT
    flops_per_second: FlopsPerSecond
    date: str
    device: str
    torch_version: str | None = None
    size: str | None = Field(default=None, description="matmul shape M x K x N of the best result")


class HardwareProfile(Record):
    """One accelerator. Peaks are dense (no 2:4 sparsity), per device, in FLOP/s."""

    model_config = _STRICT

    name: Slug = Field(description="identifier used with --hardware")
    display_name: str = Field(min_length=1)
    vendor: str = Field(min_length=1)
    aliases: list[str] = Field(default_factory=list)
    device_names: list[str] = Field(
        default_factory=list, description="names torch reports for this device (napkin bench matches them)"
    )
    form_factor: str | None = None
    memory: Bytes = Field(description="memory capacity as the datasheet states it (GB = 1e9 B, GiB = 2^30 B)")
    memory_bandwidth: BytesPerSecond
    power: Watts | None = Field(default=None, description="board power (TDP / max) in watts")
    interconnect: str | None = Field(default=None, description="scale-up link, e.g. 'NVLink 4'")
    interconnect_bandwidth: BytesPerSecond | None = Field(
        default=None, description="scale-up bandwidth per device, total of both directions"
    )
    peak_flops: dict[Dtype, FlopsPerSecond] = Field(description="DENSE peak FLOP/s (or OP/s for int8) per dtype")
    price_per_hour: float | None = Field(default=None, gt=0, description="USD per device-hour, for cost estimates")
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
            raise UsageError(f"--dtype: {self.name} has no {dtype} peak; it has: {have}") from None

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
                f"--peak measured: no saved {dtype} measurement for {self.name}; "
                f"run 'napkin bench matmul --hardware {self.name} --dtype {dtype} --save' first"
            )
        return found.flops_per_second, f"measured {found.date} on {found.device}"

    def ridge_point(self, dtype: str) -> float:
        """Arithmetic intensity (FLOP/byte) above which a kernel is compute-bound (roofline)."""
        return self.peak(dtype) / self.memory_bandwidth

    def lookup_keys(self) -> set[str]:
        return {normalize(self.name), *(normalize(a) for a in self.aliases)}


def normalize(name: str) -> str:
    """Case- and punctuation-insensitive key: ``H100-SXM`` and ``h100_sxm`` → ``h100sxm``."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


# ------------------------------------------------------------------------------------------ reading


def _line_of(node: yaml.Node | None, loc: tuple[int | str, ...]) -> int:
    """The 1-based line of the YAML node at ``loc`` (or of its closest existing parent)."""
    line = node.start_mark.line + 1 if node is not None else 1
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if key_node.value == str(key):
                    node, line = value_node, key_node.start_mark.line + 1
                    break
            else:
                return line
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def read_yaml(text: str, label: str) -> tuple[Any, yaml.Node | None]:
    """Parse YAML with the safe loader only (tags such as ``!!python/object`` are rejected)."""
    try:
        loader = _SafeLoader(text)
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        problem = exc.problem or "invalid YAML"
        raise ProfileError(f"{label}:{line}: not valid YAML (safe subset): {problem}") from None
    except yaml.YAMLError as exc:
        raise ProfileError(f"{label}: not valid YAML: {exc}") from None
    return data, node


def validation_messages(exc: ValidationError, node: yaml.Node | None, label: str) -> list[str]:
    """``h100.yaml:7: peak_flops.bf16: must be positive``, one per pydantic error."""
    messages = []
    for error in exc.errors():
        loc = tuple(error["loc"])
        where = ".".join(str(part) for part in loc) or "(top level)"
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown field (check the spelling; napkin hardware schema lists the fields)"
        messages.append(f"{label}:{_line_of(node, loc)}: {where}: {message}")
    return messages


def parse_profile(text: str, label: str) -> HardwareProfile:
    """Validate one profile's YAML text; errors name the file, the line and the field."""
    data, node = read_yaml(text, label)
    if not isinstance(data, dict):
        raise ProfileError(f"{label}:1: a hardware profile must be a YAML mapping of fields")
    try:
        return HardwareProfile.model_validate(data)
    except ValidationError as exc:
        problems = validation_messages(exc, node, label)
        raise ProfileError("; ".join(problems), problems) from None


# ------------------------------------------------------------------------------------------ lookup


def builtin_dir() -> Traversable:
    """The bundled profiles: ``napkin/hardware`` in a wheel, the checkout's ``hardware/`` otherwise."""
    packaged = files("napkin") / "hardware"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent / "hardware"


def config_dir() -> Path:
    """napkin's user configuration directory (``$NAPKIN_CONFIG_DIR`` overrides the platform's)."""
    override = os.environ.get(ENV_CONFIG_DIR)
    if override:
        return Path(override).expanduser()
    import platformdirs  # imported here: only commands that touch user files need it

    return platformdirs.user_config_path("napkin", appauthor=False)


def user_hardware_dir() -> Path:
    return config_dir() / "hardware"


def search_path() -> list[tuple[Origin, Traversable]]:
    """The directories searched for profiles, highest priority first."""
    dirs: list[tuple[Origin, Traversable]] = []
    for entry in os.environ.get(ENV_HARDWARE_PATH, "").split(os.pathsep):
        if entry.strip():
            dirs.append(("env", Path(entry.strip()).expanduser()))
    dirs.append(("user", user_hardware_dir()))
    dirs.append(("built-in", builtin_dir()))
    return dirs


@dataclass(frozen=True)
class LoadedProfile:
    """A profile together with where it came from."""

    profile: HardwareProfile
    origin: Origin
    path: str
    text: str = field(default="", repr=False)


@dataclass(frozen=True)
class BrokenProfile:
    """A file that failed validation; reported, never used."""

    origin: Origin
    path: str
    error: str
    problems: tuple[str, ...] = ()


@dataclass
class Catalog:
    """Every profile found along the search path, in priority order."""

    profiles: list[LoadedProfile] = field(default_factory=list)
    broken: list[BrokenProfile] = field(default_factory=list)

    def visible(self) -> list[LoadedProfile]:
        """Profiles not shadowed by an earlier one with the same name or alias."""
        seen: set[str] = set()
        result = []
        for loaded in self.profiles:
            name_key = normalize(loaded.profile.name)
            if name_key in seen:
                continue
            seen |= loaded.profile.lookup_keys()
            result.append(loaded)
        return result


def unknown_name_message(name: str, known: list[LoadedProfile]) -> str:
    by_key: dict[str, str] = {}
    for loaded in known:
        for key in sorted(loaded.profile.lookup_keys()):
            by_key.setdefault(key, loaded.profile.name)
    close = difflib.get_close_matches(normalize(name), list(by_key), n=10, cutoff=0.3)
    ranked = list(dict.fromkeys(by_key[key] for key in close))
    rest = sorted({p.profile.name for p in known} - set(ranked))
    listing = ", ".join(ranked + rest)
    hint = f"closest: {', '.join(ranked[:3])}; " if ranked else ""
    return (
        f"--hardware: unknown hardware {name!r}; {hint}known: {listing}. "
        "Add your own with 'napkin hardware new NAME --from h100'"
    )


def _yaml_files(directory: Traversable) -> Iterator[Traversable]:
    if not directory.is_dir():
        return
    for entry in sorted(directory.iterdir(), key=lambda e: e.name):
        if entry.name.endswith((".yaml", ".yml")) and not entry.name.startswith("."):
            yield entry


def _label(entry: Traversable) -> str:
    return str(entry) if isinstance(entry, Path) else f"<built-in>/{entry.name}"


def _read(entry: Traversable, label: str) -> str:
    try:
        return entry.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{label}: cannot read: {exc}") from None


def load_catalog(search: Iterable[tuple[Origin, Traversable]] | None = None) -> Catalog:
    """Read every profile along the search path; invalid files are collected, not raised."""
    catalog = Catalog()
    for origin, directory in search if search is not None else search_path():
        for entry in _yaml_files(directory):
            label = _label(entry)
            try:
                text = _read(entry, label)
                profile = parse_profile(text, label)
            except ProfileError as exc:
                catalog.broken.append(BrokenProfile(origin, label, str(exc), tuple(exc.problems)))
                continue
            catalog.profiles.append(LoadedProfile(profile, origin, label, text))
    return catalog


def load_file(path: str | Path) -> LoadedProfile:
    """Read one explicit profile file (``--hardware-file``)."""
    file = Path(path).expanduser()
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--hardware-file: cannot read {str(file)!r}: {exc.strerror or exc}") from None
    return LoadedProfile(parse_profile(text, str(file)), "file", str(file), text)


def find(name: str, search: Iterable[tuple[Origin, Traversable]] | None = None) -> LoadedProfile:
    """The first profile along the search path that answers to ``name``; only that one is validated.

    Files are scanned in priority order by their raw ``name`` and ``aliases`` (cheap), so a command
    pays for validating one profile, not the whole catalog. A matching file that is invalid is an
    error naming that file; it never falls through to a lower-priority profile.
    """
    key = normalize(name)
    dirs = list(search) if search is not None else search_path()
    for origin, directory in dirs:
        for entry in _yaml_files(directory):
            label = _label(entry)
            stem_matches = normalize(entry.name.rsplit(".", 1)[0]) == key
            try:
                text = _read(entry, label)
                data, _ = read_yaml(text, label)
            except ProfileError:
                if stem_matches:
                    raise
                continue
            raw = data if isinstance(data, dict) else {}
            names = [raw.get("name"), *(raw.get("aliases") or [] if isinstance(raw.get("aliases"), list) else [])]
            if key in {normalize(str(n)) for n in names if n is not None} or (stem_matches and not raw.get("name")):
                return LoadedProfile(parse_profile(text, label), origin, label, text)
    raise UsageError(unknown_name_message(name, load_catalog(dirs).visible()))


def find_by_device(device_name: str) -> LoadedProfile | None:
    """The visible profile whose ``device_names`` lists what torch reports (case/punctuation-insensitive)."""
    key = normalize(device_name)
    for loaded in load_catalog().visible():
        if key in {normalize(n) for n in loaded.profile.device_names}:
            return loaded
    return None


def copy_text(source: LoadedProfile, name: str, today: str) -> str:
    """``source``'s YAML renamed to ``name`` (aliases dropped unless the name is kept); comments and layout kept."""
    header = (f"# Copied from the {source.origin} profile '{source.profile.name}' by 'napkin hardware new' "
              f"on {today}. Edit freely; 'napkin hardware validate' checks it.\n")  # fmt: skip
    text = re.sub(r"^name:.*$", f"name: {name}", source.text, count=1, flags=re.MULTILINE)
    if name != source.profile.name:
        text = re.sub(r"^aliases:.*$", "aliases: []", text, count=1, flags=re.MULTILINE)
    lines = text.splitlines(keepends=True)
    if lines and lines[0].startswith("# yaml-language-server"):
        return lines[0] + header + "".join(lines[1:])
    return f"# yaml-language-server: $schema={SCHEMA_FILE}\n" + header + text


def resolve(name: str | None = None, hardware_file: str | Path | None = None) -> LoadedProfile:
    """The profile a command should use, with any saved measurements attached."""
    if hardware_file is not None:
        loaded = load_file(hardware_file)
    else:
        loaded = find(name or os.environ.get(ENV_HARDWARE) or DEFAULT_HARDWARE)
    from napkin.measurements import attach  # local: keeps this module free of the writer

    return attach(loaded)


def schema() -> dict[str, Any]:
    """The JSON Schema of a hardware profile file (for editors: yaml-language-server)."""
    result = HardwareProfile.model_json_schema()
    result["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    result["title"] = "napkin hardware profile"
    return result
