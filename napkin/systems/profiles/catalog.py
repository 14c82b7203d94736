"""The one catalog every kind of profile shares (hardware, stacks, clusters): the search path, lookup by name or
alias, the shadowing and conflict rules, broken files, explicit files and copies. Reads files, never prints."""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Final, Generic, Literal, Protocol, Self, TypeVar

import yaml

from napkin.errors import NapkinError, ProfileError, ProfileFileError, UsageError
from napkin.io.files import bundled, config_dir, env_dirs, read_text
from napkin.io.yamlio import normalize, parse

SCHEMA_FILE: Final = "schema.json"
Origin = Literal["file", "env", "user", "built-in"]


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
    name: str, known: list[Loaded[Any]], what: str, kind: Kind[Any], example: str | None = None
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
        f"Add your own with 'napkin {kind.noun} new NAME --from {example or kind.example}'"
    )


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


def file_of(kind: Kind[P], path: str | Path, what: str) -> Loaded[P]:
    """Read one explicit profile file of ``kind`` (``--hardware-file``, ``--stack-file``, ``--cluster-file``).

    A file the user named is an input: one that cannot be read (``UsageError``) or is no valid profile (bad YAML, no
    ``name``, not a mapping, a field out of range: ``ProfileFileError``) is bad input (exit 2) naming ``what``."""
    file = Path(path).expanduser()
    try:
        text = read_text(file)
    except NapkinError as exc:
        raise UsageError(f"{what}: {exc}", field=_input(what)) from None
    try:
        return Loaded(kind.parse(text, str(file)), "file", str(file), text)
    except ProfileError as exc:
        raise ProfileFileError(f"{what}: {exc}", exc.problems, field=_input(what)) from None


def find_in(
    kind: Kind[P],
    name: str,
    search: Iterable[tuple[Origin, Traversable]] | None = None,
    what: str | None = None,
    usable: Callable[[P], bool] | None = None,
    example: str | None = None,
) -> Loaded[P]:
    """The profile that answers to ``name``; only that one is fully validated.

    Every file along the search path is read as far as its ``name`` and ``aliases`` (cheap), so a
    name claimed twice is found and reported, never silently resolved by file order. A special file
    (FIFO, device) or unreadable file is skipped unless its file name is the name asked for. An unknown name
    lists the profiles the command can use (``usable``; every profile when None).
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
        known = [p for p in catalog_of(kind, dirs).visible() if usable is None or usable(p.profile)]
        raise UsageError(unknown_name_message(name, known, what, kind, example), field=_input(what))
    profile = kind.parse(entry.text, entry.label)
    return Loaded(profile.told((note,)) if note else profile, entry.origin, entry.label, entry.text)


def copy_text(source: Loaded[Any], name: str, today: str, kind: Kind[Any]) -> str:
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


def is_builtin_name(name: str, kind: Kind[Any]) -> str | None:
    """The built-in profile of ``kind`` that answers to ``name`` (by name or alias), if any."""
    entries, _ = _scan([("built-in", kind.builtin_dir())])
    key = normalize(name)
    return next((e.name for e in entries if key == e.key or key in e.alias_keys), None)
