"""Hardware profiles: the validated model, the YAML reader, and the lookup order.

A profile is one YAML file per device. Built-in profiles ship inside the wheel (``napkin/hardware``,
mapped from the repository's ``hardware/`` folder) and are read through ``importlib.resources``;
users add or override profiles in their own directories. Lookup order, highest priority first:

1. an explicit file (``--hardware-file PATH``);
2. the directories in ``$NAPKIN_HARDWARE_PATH`` (``os.pathsep``-separated), in order;
3. the user directory (``<user config dir>/napkin/hardware``; ``$NAPKIN_CONFIG_DIR`` overrides it);
4. the built-in profiles.

A profile is found by its ``name`` or any alias, compared case- and punctuation-insensitively
(``H100-SXM`` = ``h100_sxm``). Nothing is shadowed silently:

* a name or alias claimed by two files is an error that names both files (two user files with the
  same ``name``, a user alias that takes a built-in's name or alias, …);
* the one exception is a user profile (user directory or ``$NAPKIN_HARDWARE_PATH``) whose ``name`` is a
  built-in's ``name``: it replaces that built-in as a whole file (no merging), and the resolved profile
  carries a note ("h100-sxm → your profile at …") that every command prints.

Files are read only if they are regular files under a size cap (``napkin.io.files.read_text``); YAML
anchors and aliases are refused (``napkin.io.yamlio``). Peaks are DENSE: 2:4-sparsity headline figures
are halved in the files, and the file says so.

This module reads files but never prints; it imports neither typer nor rich.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Annotated, Any, Final, Generic, Literal, Protocol, Self, TypeVar

import yaml
from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    WithJsonSchema,
    model_validator,
)

from napkin import units
from napkin.domain.base import Record
from napkin.domain.choices import Dtype
from napkin.errors import NapkinError, ProfileError, UsageError
from napkin.io.files import ENV_CONFIG_DIR, bundled, config_dir, env_dirs, read_text
from napkin.io.yamlio import normalize, parse, validated
from napkin.systems.measurements import Measurement, for_profile

ENV_HARDWARE_PATH: Final = "NAPKIN_HARDWARE_PATH"
ENV_HARDWARE: Final = "NAPKIN_HARDWARE"  # the default profile name when none is given
SCHEMA_FILE: Final = "schema.json"
DEFAULT_HARDWARE: Final = "h100"

Origin = Literal["file", "env", "user", "built-in"]


_ZERO = re.compile(r"\s*0*\.?0+\s*[A-Za-z/]*\s*")  # 0, 0.0, "0 GB", "0 GiB": none of anything


def _quantity(parser: Any, kind: str, example: str, *, zero: bool = False) -> Any:
    """A pydantic annotation: a positive number in base units, or a string with a unit (or none at all, 0,
    where ``zero``)."""

    def validate(value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ValueError(f"expected a number or a string with a unit, such as {example!r}")
        if zero and (value == 0 if not isinstance(value, str) else _ZERO.fullmatch(value) is not None):
            return 0.0
        try:
            result: float = parser(value, kind)
        except NapkinError as exc:
            raise ValueError(str(exc).removeprefix(f"{kind}: ")) from None
        return result

    schema = {
        "anyOf": [
            {"type": "number", "minimum": 0} if zero else {"type": "number", "exclusiveMinimum": 0},
            {"type": "string", "pattern": r"^\s*[0-9.eE_+-]+\s*[A-Za-z/]*\s*$"},
        ],
        "description": f"{kind}: a number in base units or a string with a unit, e.g. {example!r}",
    }
    return [BeforeValidator(validate), WithJsonSchema(schema)]


Bytes = Annotated[float, *_quantity(units.parse_bytes, "bytes", "80 GB")]
BytesOrZero = Annotated[float, *_quantity(units.parse_bytes, "bytes", "1.5 GiB", zero=True)]
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


class Profile(Record):
    """A record the catalog serves (hardware, stacks, clusters, model presets), with what a command should say
    about where it came from (``origin_notes``: a built-in it replaces, saved measurements it ignores, a file
    skipped on the way). The notes travel with the profile into the results built from it (``api.inputs.said``),
    never through a module; they are not a field of the file and never in its JSON."""

    _origin_notes: tuple[str, ...] = PrivateAttr(default=())

    @property
    def origin_notes(self) -> tuple[str, ...]:
        return self._origin_notes

    def told(self, notes: Iterable[str]) -> Self:
        """This profile, also saying ``notes`` about its origin (a copy: parsed profiles are shared)."""
        said = tuple(dict.fromkeys((*self._origin_notes, *notes)))
        if said == self._origin_notes:
            return self
        copy = self.model_copy()
        copy._origin_notes = said
        return copy


class HardwareProfile(Profile):
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
    memory_usable: Bytes | None = Field(
        default=None, description="capacity the device reports (torch.cuda.get_device_properties().total_memory)"
    )
    memory_bandwidth: BytesPerSecond
    power: Watts | None = Field(default=None, description="board power (TDP / max) in watts")
    interconnect: str | None = Field(default=None, description="scale-up link, e.g. 'NVLink 4'")
    interconnect_bandwidth: BytesPerSecond | None = Field(
        default=None, description="scale-up bandwidth per device, total of both directions"
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


R = TypeVar("R", bound=Record)


def parse_as(model: type[R], text: str, label: str, noun: str, marker: str) -> R:
    """One profile file's YAML validated as ``model``; a mapping with neither ``name`` nor ``marker`` is not a
    napkin ``noun`` profile at all. Errors name the file, the line and the field (never a value)."""
    data, _ = parse(text, label)
    if isinstance(data, dict) and "name" not in data and marker not in data:
        raise ProfileError(f"{label}: not a napkin {noun} profile (it has no 'name' and no '{marker}' field)")
    return validated(model, text, label, noun)


@functools.lru_cache(maxsize=256)
def parse_profile(text: str, label: str) -> HardwareProfile:
    """Validate one profile's YAML text; errors name the file, the line and the field (never a value)."""
    return parse_as(HardwareProfile, text, label, "hardware", "peak_flops")


# ------------------------------------------------------------------------------------------ lookup


class Named(Protocol):
    """What the catalog needs of a profile: its name and the keys it answers to."""

    @property
    def name(self) -> str: ...

    @property
    def origin_notes(self) -> tuple[str, ...]: ...

    def lookup_keys(self) -> set[str]: ...

    def told(self, notes: Iterable[str]) -> Self: ...


P = TypeVar("P", bound=Named)


@dataclass(frozen=True)
class Kind(Generic[P]):
    """One kind of profile the catalog serves (hardware, stacks): its folder, its path variable, its reader, and
    the words its messages use. Every kind has the same lookup order and shadowing rules."""

    folder: str  # the built-in folder (``hardware/``, ``stacks/``) and the user sub-directory
    env: str  # ``$NAPKIN_HARDWARE_PATH``-style variable of extra directories
    field: str  # the keyword a name comes from, in messages (``hardware``; the CLI writes ``--hardware``)
    noun: str  # ``hardware``, ``stack``
    example: str  # a built-in to copy from, in the hint (``h100``)
    parse: Callable[[str, str], P]

    def builtin_dir(self) -> Traversable:
        """The bundled profiles: ``napkin/<folder>`` in a wheel, the checkout's ``<folder>/`` otherwise."""
        return bundled(self.folder)

    def user_dir(self) -> Path:
        return config_dir() / self.folder

    def search_path(self) -> list[tuple[Origin, Traversable]]:
        """The directories searched, highest priority first."""
        dirs: list[tuple[Origin, Traversable]] = [("env", d) for d in env_dirs(self.env)]
        dirs.append(("user", self.user_dir()))
        dirs.append(("built-in", self.builtin_dir()))
        return dirs


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


@dataclass(frozen=True)
class Loaded(Generic[P]):
    """A profile together with where it came from, and what a command should say about it."""

    profile: P
    origin: Origin
    path: str
    text: str = field(default="", repr=False)

    @property
    def notes(self) -> tuple[str, ...]:
        """What every result built from the profile says (stderr): a replaced built-in, ignored measurements."""
        return self.profile.origin_notes


LoadedProfile = Loaded[HardwareProfile]


@dataclass(frozen=True)
class BrokenProfile:
    """A file that failed validation; reported, never used."""

    origin: Origin
    path: str
    error: str
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Entry:
    """One file along the search path, parsed only as far as the names it answers to."""

    origin: Origin
    label: str
    text: str = field(repr=False)
    name: str
    key: str
    alias_keys: frozenset[str]

    @property
    def user(self) -> bool:
        return self.origin != "built-in"

    def describe(self) -> str:
        return f"{'your' if self.user else 'the built-in'} profile {self.name!r} ({self.label})"


def _yaml_files(directory: Traversable) -> list[Traversable]:
    if not directory.is_dir():
        return []
    entries = [e for e in directory.iterdir() if e.name.endswith((".yaml", ".yml")) and not e.name.startswith(".")]
    return sorted(entries, key=lambda e: e.name)


def _label(entry: Traversable) -> str:
    return str(entry) if isinstance(entry, Path) else f"<built-in>/{entry.name}"


def _read(entry: Traversable, label: str) -> str:
    if isinstance(entry, Path):
        try:
            return read_text(entry)
        except NapkinError as exc:
            raise ProfileError(str(exc)) from None
    try:
        return entry.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{label}: cannot read: {exc}") from None


def _scan(dirs: Iterable[tuple[Origin, Traversable]]) -> tuple[list[_Entry], list[BrokenProfile]]:
    """Every readable YAML file along ``dirs`` with its names; unreadable ones (and folders that cannot be
    listed) as BrokenProfile."""
    entries: list[_Entry] = []
    broken: list[BrokenProfile] = []
    for origin, directory in dirs:
        try:
            listing = _yaml_files(directory)
        except OSError as exc:
            broken.append(BrokenProfile(origin, str(directory), f"{directory}: cannot list: {exc.strerror or exc}"))
            continue
        for item in listing:
            label = _label(item)
            try:
                text = _read(item, label)
                raw_name, alias_keys = _names(text, label)
            except ProfileError as exc:
                broken.append(BrokenProfile(origin, label, str(exc), tuple(exc.problems)))
                continue
            name = raw_name if raw_name is not None else item.name.rsplit(".", 1)[0]
            entries.append(_Entry(origin, label, text, name[:80], normalize(name), alias_keys))
    return entries, broken


@functools.lru_cache(maxsize=1024)
def _names(text: str, label: str) -> tuple[str | None, frozenset[str]]:
    """The raw ``name`` and alias keys of a file's text, parsed once per distinct text (every command scans
    the whole search path for conflicts; the notebook API calls this in loops)."""
    data, _ = parse(text, label)
    raw: dict[Any, Any] = data if isinstance(data, dict) else {}
    raw_name, raw_aliases = raw.get("name"), raw.get("aliases")
    aliases = raw_aliases if isinstance(raw_aliases, list) else []
    alias_keys = frozenset(normalize(a) for a in aliases if isinstance(a, str)) - {""}
    return (raw_name if isinstance(raw_name, str) else None), alias_keys


@dataclass
class _Index:
    """Who answers to each name key, after the one documented replacement rule."""

    active: list[_Entry]
    replaced: dict[str, list[_Entry]]  # user name key → built-ins it replaces by name
    claims: dict[str, list[_Entry]]

    @classmethod
    def build(cls, entries: list[_Entry]) -> _Index:
        user_keys = {e.key for e in entries if e.user}
        replaced: dict[str, list[_Entry]] = {}
        active = []
        for e in entries:
            if not e.user and e.key in user_keys:
                replaced.setdefault(e.key, []).append(e)
            else:
                active.append(e)
        claims: dict[str, list[_Entry]] = {}
        for e in active:
            for key in {e.key, *e.alias_keys}:
                claims.setdefault(key, []).append(e)
        return cls(active, replaced, claims)

    def winner(self, key: str) -> tuple[_Entry | None, str | None, str | None]:
        """(entry, conflict message, replacement note) for a name key."""
        found = self.claims.get(key, [])
        users = [e for e in found if e.user]
        builtins = [e for e in found if not e.user]
        if len(users) > 1 or (not users and len(builtins) > 1):
            both = users if len(users) > 1 else builtins
            return None, self._conflict(key, both[0], both[1]), None
        if not users:
            return (builtins[0] if builtins else None), None, None
        user = users[0]
        if builtins and user.key != key:  # a user *alias* never takes over a built-in's name or alias
            return None, self._conflict(key, user, builtins[0]), None
        taken = builtins[0] if builtins else None
        gone = self.replaced.get(user.key, [])
        note = None
        if taken is not None or gone:
            what = (taken or gone[0]).name
            note = f"{user.name} → your profile at {user.label}, instead of the built-in {what}"
        return user, None, note

    @staticmethod
    def _conflict(key: str, first: _Entry, second: _Entry) -> str:
        return (
            f"the name {key!r} is claimed by {first.describe()} and by {second.describe()}; "
            "rename or remove one (a user profile replaces a built-in only under the same 'name')"
        )

    def conflicts(self) -> list[str]:
        return sorted({msg for key in self.claims if (msg := self.winner(key)[1]) is not None})


@dataclass
class Catalog(Generic[P]):
    """Every profile found along the search path, in priority order, with what replaces what."""

    profiles: list[Loaded[P]] = field(default_factory=list)
    broken: list[BrokenProfile] = field(default_factory=list)
    #: Built-in profiles replaced by a user profile of the same name.
    replaced: list[Loaded[P]] = field(default_factory=list)
    #: Names claimed by two files (each an error when that name is looked up).
    conflicts: list[str] = field(default_factory=list)

    def visible(self) -> list[Loaded[P]]:
        """The profiles a name can reach (replaced built-ins excluded)."""
        return list(self.profiles)


def _input(what: str) -> str | None:
    """``what`` as the field of an error: an input's name (``hardware``, ``from``), not ``$NAPKIN_HARDWARE``, a
    flag (``--stack``) or a metavar (``NAME``)."""
    return what if what.isidentifier() and what.islower() else None


def unknown_name_message(
    name: str, known: list[Loaded[Any]], what: str = "hardware", kind: Kind[Any] = HARDWARE
) -> str:
    key = normalize(name)
    by_key: dict[str, str] = {}
    for loaded in known:
        for k in sorted(loaded.profile.lookup_keys()):
            by_key.setdefault(k, loaded.profile.name)
    # A known name inside what was typed ("nvidia-h100" holds "h100") ranks before a merely similar one.
    contained = sorted((k for k in by_key if len(k) >= 3 and k in key and k != key), key=lambda k: (-len(k), k))
    close = difflib.get_close_matches(key, list(by_key), n=10, cutoff=0.3)
    ranked = list(dict.fromkeys(by_key[k] for k in [*contained, *close]))
    rest = sorted({p.profile.name for p in known} - set(ranked))
    listing = ", ".join(ranked + rest)
    hint = f"closest: {', '.join(ranked[:3])}; " if ranked else ""
    return (
        f"{what}: unknown {kind.noun} {name!r}; {hint}known: {listing}. "
        f"Add your own with 'napkin {kind.noun} new NAME --from {kind.example}'"
    )


def load_catalog(search: Iterable[tuple[Origin, Traversable]] | None = None) -> Catalog[HardwareProfile]:
    """Read and validate every hardware profile along the search path; invalid files are collected, not raised."""
    return catalog_of(HARDWARE, search)


def catalog_of(kind: Kind[P], search: Iterable[tuple[Origin, Traversable]] | None = None) -> Catalog[P]:
    """Read and validate every profile of ``kind`` along its search path; invalid files are collected, not
    raised."""
    entries, broken = _scan(search if search is not None else kind.search_path())
    index = _Index.build(entries)
    catalog: Catalog[P] = Catalog(broken=broken, conflicts=index.conflicts())
    replaced_ids = {id(e) for group in index.replaced.values() for e in group}
    for entry in entries:
        try:
            profile = kind.parse(entry.text, entry.label)
        except ProfileError as exc:
            catalog.broken.append(BrokenProfile(entry.origin, entry.label, str(exc), tuple(exc.problems)))
            continue
        loaded = Loaded(profile, entry.origin, entry.label, entry.text)
        (catalog.replaced if id(entry) in replaced_ids else catalog.profiles).append(loaded)
    return catalog


def load_file(path: str | Path, what: str = "hardware_file") -> LoadedProfile:
    """Read one explicit hardware profile file (``hardware_file``)."""
    return file_of(HARDWARE, path, what)


def file_of(kind: Kind[P], path: str | Path, what: str) -> Loaded[P]:
    """Read one explicit profile file of ``kind`` (``--hardware-file``, ``--stack-file``)."""
    file = Path(path).expanduser()
    try:
        text = read_text(file)
    except NapkinError as exc:
        raise UsageError(f"{what}: {exc}", field=_input(what)) from None
    return Loaded(kind.parse(text, str(file)), "file", str(file), text)


def find(
    name: str, search: Iterable[tuple[Origin, Traversable]] | None = None, what: str = "hardware"
) -> LoadedProfile:
    """The hardware profile that answers to ``name`` (``find_in``)."""
    return find_in(HARDWARE, name, search, what)


def find_in(
    kind: Kind[P], name: str, search: Iterable[tuple[Origin, Traversable]] | None = None, what: str | None = None
) -> Loaded[P]:
    """The profile that answers to ``name``; only that one is fully validated.

    Every file along the search path is read as far as its ``name`` and ``aliases`` (cheap), so a
    name claimed twice is found and reported, never silently resolved by file order. A special file
    (FIFO, device) or unreadable file is skipped unless its file name is the name asked for.
    """
    what = what or kind.field
    key = normalize(name)
    if not key:
        raise UsageError(
            f"{what}: {name!r} is not a profile name; give one such as {kind.example} (see 'napkin {kind.noun} list')",
            field=_input(what),
        )
    dirs = list(search) if search is not None else kind.search_path()
    entries, broken = _scan(dirs)
    index = _Index.build(entries)
    entry, conflict, note = index.winner(key)
    if conflict is not None:
        raise ProfileError(f"{what}: {conflict}", field=_input(what))
    if entry is None:
        for bad in broken:
            if normalize(Path(bad.path).name.rsplit(".", 1)[0]) == key:
                raise ProfileError(bad.error, list(bad.problems))
        raise UsageError(unknown_name_message(name, catalog_of(kind, dirs).visible(), what, kind), field=_input(what))
    profile = kind.parse(entry.text, entry.label)
    return Loaded(profile.told((note,)) if note else profile, entry.origin, entry.label, entry.text)


def find_by_device(device_name: str) -> LoadedProfile | None:
    """The visible profile whose ``device_names`` lists what torch reports (case/punctuation-insensitive)."""
    key = normalize(device_name)
    for loaded in load_catalog().visible():
        if key in {normalize(n) for n in loaded.profile.device_names}:
            return loaded
    return None


def copy_text(source: Loaded[Any], name: str, today: str, kind: Kind[Any] = HARDWARE) -> str:
    """``source``'s YAML renamed to ``name`` (aliases emptied unless the name is kept).

    The YAML is parsed and only the ``name`` and ``aliases`` values are replaced, at the positions the
    parser reports (a block list of aliases too), so comments and layout survive. The result is parsed back
    and compared with the source's data; if anything else differs, the copy is the dumped data instead (comments lost).
    """
    header = (
        f"# Copied from the {source.origin} profile '{source.profile.name}' by 'napkin {kind.noun} new' "
        f"on {today}. Edit freely; 'napkin {kind.noun} validate' checks it.\n"
    )
    text = source.text
    data, _ = parse(text, source.path)
    expected = dict(data) if isinstance(data, dict) else source.profile.model_dump(mode="json", exclude_none=True)
    expected["name"] = name
    if name != source.profile.name:
        expected["aliases"] = []
    renamed = None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        edits = []
        if isinstance(root, yaml.MappingNode):
            for key_node, value_node in root.value:
                if key_node.value in ("name", "aliases") and key_node.value in expected:
                    start, end = value_node.start_mark.index, value_node.end_mark.index
                    value = yaml.safe_dump(expected[key_node.value], default_flow_style=True).removesuffix("\n")
                    value = value.removesuffix("\n...")
                    tail = text[start:end][len(text[start:end].rstrip()) :]
                    if isinstance(value_node, yaml.SequenceNode) and value_node.flow_style is False:
                        start = key_node.end_mark.index + 1  # a block list: replace from after the colon
                        value, tail = " " + value, "\n"
                    edits.append((start, end, value + tail))
        for start, end, value in sorted(edits, reverse=True):
            text = text[:start] + value + text[end:]
        if parse(text, source.path)[0] == expected:
            renamed = text
    except (yaml.YAMLError, ProfileError):
        renamed = None
    if renamed is None:
        renamed = yaml.safe_dump(expected, sort_keys=False, allow_unicode=True)
    lines = renamed.splitlines(keepends=True)
    if lines and lines[0].startswith("# yaml-language-server"):
        return lines[0] + header + "".join(lines[1:])
    return f"# yaml-language-server: $schema={SCHEMA_FILE}\n" + header + renamed


def is_builtin_name(name: str, kind: Kind[Any] = HARDWARE) -> str | None:
    """The built-in profile of ``kind`` that answers to ``name`` (by name or alias), if any."""
    entries, _ = _scan([("built-in", kind.builtin_dir())])
    key = normalize(name)
    return next((e.name for e in entries if key == e.key or key in e.alias_keys), None)


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


__all__ = [
    "ENV_CONFIG_DIR",
    "HARDWARE",
    "Catalog",
    "HardwareProfile",
    "Kind",
    "Loaded",
    "LoadedProfile",
    "Measurement",
    "Profile",
    "config_dir",
    "copy_text",
    "find",
    "load_catalog",
    "normalize",
    "parse_profile",
    "resolve",
]
