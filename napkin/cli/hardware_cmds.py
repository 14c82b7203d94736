"""``napkin hardware …``: list, show, compare, validate, new, edit, path, schema."""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from napkin.choices import Dtype
from napkin.cli.common import (
    DtypeOpt,
    JsonOpt,
    boundary,
    dumps,
    emit,
    fail,
    load_hardware,
    note,
    print_notes,
    warn,
)
from napkin.errors import NapkinError, ProfileError, UsageError
from napkin.units import format_bandwidth, format_bytes, format_power, format_rate
from napkin.yamlio import clean

if TYPE_CHECKING:
    from napkin.profiles import HardwareProfile

app = typer.Typer(help="Hardware profiles: list, inspect, compare, validate, copy and edit them.",
                  no_args_is_help=True)  # fmt: skip

NameArg = Annotated[str, typer.Argument(help="Profile name or alias (see 'napkin hardware list').")]


def _profile_row(p: HardwareProfile) -> dict[str, Any]:
    return p.model_dump(mode="json", exclude_none=True)


@app.command("list")
def list_command(as_json: JsonOpt = False) -> None:
    """Every profile napkin can see, where it comes from, and any invalid files."""
    from napkin.profiles import load_catalog

    with boundary():
        catalog = load_catalog()
    visible = catalog.visible()
    if as_json:
        data = {
            "profiles": [{"origin": p.origin, "path": p.path, **_profile_row(p.profile)} for p in visible],
            "shadowed": [{"name": p.profile.name, "origin": p.origin, "path": p.path} for p in catalog.replaced],
            "conflicts": catalog.conflicts,
            "invalid": [{"origin": b.origin, "path": b.path, "error": b.error} for b in catalog.broken],
        }
        with boundary():
            typer.echo(dumps(data))
        return
    from napkin import render as r

    rows = []
    for loaded in visible:
        p = loaded.profile
        bf16 = p.peak_flops.get(Dtype.bf16)
        rows.append([p.name, ", ".join(p.aliases), format_rate(bf16) if bf16 else "–",
                     format_bytes(p.memory), format_bandwidth(p.memory_bandwidth),
                     format_power(p.power) if p.power else "–", loaded.origin])  # fmt: skip
    for broken in catalog.broken:
        rows.append([Path(broken.path).stem, "", "", "", "", "", f"{broken.origin} (INVALID)"])
    r.console().print(r.grid("Hardware profiles", ["name", "aliases", "bf16 dense", "memory", "bandwidth", "power",
                                                  "origin"], rows,
                             caption="peaks are dense (no 2:4 sparsity); GB = 1e9 B, GiB = 2^30 B"))  # fmt: skip
    for broken in catalog.broken:
        warn(f"invalid profile (ignored): {broken.error}")
    for conflict in catalog.conflicts:
        warn(conflict)
    for loaded in catalog.replaced:
        note(f"the built-in {loaded.profile.name} ({loaded.path}) is replaced by your profile of the same name")


@app.command("show")
def show_command(
    name: Annotated[str | None, typer.Argument(help="Profile name or alias.")] = None,
    hardware_file: Annotated[
        Path | None, typer.Option("--hardware-file", metavar="PATH", help="Show this file instead.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Every field of one profile, with units and sources."""
    with boundary():
        if name is None and hardware_file is None:
            raise UsageError("give a profile NAME or --hardware-file PATH")
        if name is not None and hardware_file is None:
            from napkin.profiles import resolve

            loaded = resolve(name, what="NAME")
            print_notes()
        else:
            loaded = load_hardware(name, hardware_file)
    p = loaded.profile
    if as_json:
        with boundary():
            typer.echo(dumps({"origin": loaded.origin, "path": loaded.path, **_profile_row(p)}))
        return
    from napkin import render as r

    rows = [("name", p.name), ("display name", p.display_name), ("vendor", p.vendor),
            ("aliases", ", ".join(p.aliases) or "–"), ("form factor", p.form_factor or "–"),
            ("memory", format_bytes(p.memory)), ("memory bandwidth", format_bandwidth(p.memory_bandwidth)),
            ("board power", format_power(p.power) if p.power else "–"),
            ("interconnect", f"{p.interconnect or '–'}"
             + (f", {format_bandwidth(p.interconnect_bandwidth)}" if p.interconnect_bandwidth else ""))]  # fmt: skip
    for dtype, peak in p.peak_flops.items():
        unit = format_rate(peak).replace("FLOP/s", "OP/s") if dtype is Dtype.int8 else format_rate(peak)
        per_byte = "OP/B" if dtype is Dtype.int8 else "FLOP/B"
        rows.append((f"peak {dtype} (dense)", f"{unit}  ridge {peak / p.memory_bandwidth:,.0f} {per_byte}"))
    for dtype, m in p.measured.items():
        rows.append((f"measured {dtype}", f"{format_rate(m.flops_per_second)} ({m.date}, {m.device}, {m.size})"))
    if p.price_per_hour:
        rows.append(("price", f"${p.price_per_hour:g} per hour"))
    for s in p.sources:
        rows.append(("source", f"{s.title} <{s.url}>"))
    if p.notes:
        rows.append(("notes", p.notes))
    rows.append(("file", f"{loaded.path} ({loaded.origin})"))
    r.console().print(r.key_values(p.display_name, rows))


@app.command("compare")
def compare_command(
    names: Annotated[list[str], typer.Argument(help="Two or more profile names.")],
    dtype: DtypeOpt = Dtype.bf16,
    as_json: JsonOpt = False,
) -> None:
    """Side by side, with the ridge point (dense peak / bandwidth, FLOP per byte)."""
    from napkin.profiles import resolve

    with boundary():
        if len(names) < 2:
            raise UsageError("NAMES: give two or more profiles to compare (for one, use 'napkin hardware show')")
        loaded_all = [resolve(n, what="NAMES") for n in names]
    print_notes()
    profiles = [loaded.profile for loaded in loaded_all]

    def ridge(p: HardwareProfile) -> float | None:
        return p.ridge_point(dtype) if dtype in p.peak_flops else None

    if as_json:
        data = [{**_profile_row(p), "ridge_point": ridge(p)} for p in profiles]
        with boundary():
            typer.echo(dumps(data))
        return
    from napkin import render as r

    def peak(p: HardwareProfile, d: Dtype) -> str:
        return format_rate(p.peak_flops[d]) if d in p.peak_flops else "–"

    rows = [["memory", *(format_bytes(p.memory) for p in profiles)],
            ["bandwidth", *(format_bandwidth(p.memory_bandwidth) for p in profiles)],
            ["power", *(format_power(p.power) if p.power else "–" for p in profiles)],
            ["interconnect", *(format_bandwidth(p.interconnect_bandwidth) if p.interconnect_bandwidth else "–"
                               for p in profiles)]]  # fmt: skip
    rows += [[f"{d} dense", *(peak(p, d) for p in profiles)] for d in Dtype if any(d in p.peak_flops for p in profiles)]
    rows.append([f"ridge ({dtype})", *(f"{value:,.0f} FLOP/B" if (value := ridge(p)) is not None else "–"
                                       for p in profiles)])  # fmt: skip
    r.console().print(
        r.grid(
            "Hardware comparison",
            ["", *(p.name for p in profiles)],
            rows,
            caption="ridge point = dense peak / memory bandwidth: kernels below it are memory-bound",
        )
    )


@app.command("validate")
def validate_command(
    paths: Annotated[list[Path] | None, typer.Argument(help="Files to check (default: every profile found).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Check profile files; each problem is reported as file:line: field: message. Exit 1 if any is invalid."""
    from napkin.errors import NapkinError
    from napkin.files import read_text
    from napkin.profiles import load_catalog, parse_profile

    problems: list[str] = []
    valid: list[str] = []
    checked = 0
    if paths:
        for path in paths:
            checked += 1
            try:
                parse_profile(read_text(path), str(path))
                valid.append(str(path))
            except ProfileError as exc:
                problems += exc.problems
            except NapkinError as exc:
                problems.append(str(exc))
    else:
        catalog = load_catalog()
        for loaded in catalog.profiles:
            checked += 1
            valid.append(loaded.path)
        for broken in catalog.broken:
            checked += 1
            problems += list(broken.problems) or [broken.error]
        problems += catalog.conflicts
    if as_json:
        typer.echo(dumps({"valid": valid, "problems": problems}))
    else:
        for path_text in valid:
            typer.echo(f"ok  {clean(path_text)}")
    for line in problems:
        typer.echo(clean(line), err=True)
    if problems:
        fail(f"{len(problems)} problem(s) in {checked} file(s)", 1)


def _user_schema(directory: Path) -> None:
    """Keep a copy of the JSON Schema beside user profiles, so editors can complete fields."""
    from napkin.files import write_atomic
    from napkin.profiles import SCHEMA_FILE, schema

    target = directory / SCHEMA_FILE
    import json

    from napkin.errors import NapkinError
    from napkin.files import read_text

    text = dumps(schema()) + "\n"
    if not target.exists() and not target.is_symlink():
        with contextlib.suppress(NapkinError):  # created a moment ago by another napkin: the same file
            write_atomic(target, text)
        return
    try:
        current = read_text(target)
        ours = json.loads(current).get("title") == schema()["title"]
    except (NapkinError, ValueError, AttributeError):
        current, ours = "", False
    if ours and current != text:
        write_atomic(target, text, overwrite=True)  # napkin's own file, regenerated after an upgrade
    elif not ours:
        warn(f"{target} is not napkin's schema; left as it is (editors may not complete profile fields)")


@app.command("new")
def new_command(
    name: Annotated[str, typer.Argument(help="Name of the new profile (lower-case, e.g. my-h100).")],
    source: Annotated[
        str | None, typer.Option("--from", metavar="NAME", help="Profile to copy (required), e.g. h100.")
    ] = None,
    force: Annotated[
        bool,
        typer.Option("--force", help="Replace your existing profile of that name, or take a built-in's name."),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Copy a profile into your user directory for editing (never overwrites without --force)."""
    from napkin.files import write_atomic
    from napkin.profiles import (
        SLUG_RULE,
        copy_text,
        is_builtin_name,
        is_slug,
        parse_profile,
        resolve,
        user_hardware_dir,
    )

    with boundary():
        if not is_slug(name):
            raise UsageError(f"NAME: {name!r}: {SLUG_RULE}")
        if source is None:
            raise UsageError(
                f"--from: which profile should {name} start from? e.g. 'napkin hardware new {name} --from h100' "
                "(see 'napkin hardware list')"
            )
        builtin = is_builtin_name(name)
        if builtin is not None and not force:
            raise UsageError(
                f"NAME: {name!r} is the built-in profile {builtin}'s name; your profile would replace it in every "
                "command. Pick another name, or pass --force to replace it (every command then says so)"
            )
        loaded = resolve(source, what="--from")
        text = copy_text(loaded, name, date.today().isoformat())
        target = user_hardware_dir() / f"{name}.yaml"
        parse_profile(text, str(target))
        write_atomic(target, text, overwrite=force)
        _user_schema(target.parent)
    typer.echo(dumps({"path": str(target), "from": loaded.profile.name}) if as_json else str(target))
    note(f"created {target} from {loaded.profile.name}; edit it with 'napkin hardware edit {name}'")


def _draft_of(target: Path) -> Path:
    return target.with_name(f".{target.stem}.draft.yaml")


@app.command("edit")
def edit_command(
    name: NameArg,
    discard: Annotated[
        bool, typer.Option("--discard", help="Delete your unsaved draft of this profile instead of editing.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Open your copy of a profile in $EDITOR (creating it if needed); keep it only if it validates."""
    from napkin.files import locked, read_text, write_atomic
    from napkin.profiles import copy_text, normalize, parse_profile, resolve, user_hardware_dir

    with boundary():
        directory = user_hardware_dir()
        try:
            mine = sorted(directory.glob("*.yaml")) if directory.is_dir() else []
        except OSError as exc:
            raise NapkinError(f"cannot list {directory}: {exc.strerror or exc}") from None
        target = next((p for p in mine if normalize(p.stem) == normalize(name)), None)
        if discard:
            draft = _draft_of(target) if target is not None else directory / f".{name}.draft.yaml"
            if not draft.exists():
                raise UsageError(f"NAME: no unsaved draft of {name} to discard")
            draft.unlink()
            note(f"discarded {draft}")
            return
        if target is None:
            loaded = resolve(name, what="NAME")
            if loaded.origin in ("user", "env"):  # the user's own file: edit it where it is
                target = Path(loaded.path)
            else:
                target = directory / f"{loaded.profile.name}.yaml"
                write_atomic(target, copy_text(loaded, loaded.profile.name, date.today().isoformat()))
                note(f"created {target} from the {loaded.origin} profile; it replaces it from now on")
        _user_schema(directory)
        with locked(target, wait=False):
            _edit(name, target, read_text, parse_profile, write_atomic)
    typer.echo(dumps({"path": str(target)}) if as_json else str(target))


def _edit(
    name: str, target: Path, read_text: Any, parse_profile: Any, write_atomic: Any,
    command: str = "napkin hardware edit",
) -> None:  # fmt: skip
    """Edit ``target`` through a draft in $EDITOR; keep it only if ``parse_profile`` accepts it (clusters too)."""
    draft = _draft_of(target)
    if draft.exists():
        warn(f"reopening your unsaved draft {draft} (discard it with '{command} {name} --discard')")
    else:
        write_atomic(draft, read_text(target))
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    try:
        completed = subprocess.run([*shlex.split(editor), str(draft)], check=False)
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        raise NapkinError(f"cannot run editor {editor!r}: {reason}; set $EDITOR") from None
    discard = f"'{command} {name} --discard' deletes it"
    if completed.returncode != 0:
        raise NapkinError(f"editor {editor!r} exited with {completed.returncode}; {target} is unchanged "
                          f"(your draft is kept at {draft}; {discard})")  # fmt: skip
    text = read_text(draft)
    try:
        parse_profile(text, str(draft))
    except ProfileError as exc:
        for line in exc.problems:
            typer.echo(clean(line), err=True)
        fail(f"the edit is invalid, so {target} keeps its previous version; your edit is saved in {draft}: "
             f"'{command} {name}' reopens it, {discard}", 1)  # fmt: skip
    write_atomic(target, text, overwrite=True)
    draft.unlink()


@app.command("path")
def path_command(as_json: JsonOpt = False) -> None:
    """The directories searched for profiles, highest priority first."""
    from napkin.measurements import measurements_path
    from napkin.presets import user_model_dirs
    from napkin.profiles import search_path

    entries = [(origin, str(d)) for origin, d in search_path()]
    if as_json:
        typer.echo(dumps({"search_path": [{"origin": o, "path": p} for o, p in entries],
                          "measurements": str(measurements_path()),
                          "models": [str(d) for d in user_model_dirs()]}))  # fmt: skip
        return
    typer.echo("# --hardware-file PATH always wins; then, in order:")
    for origin, path in entries:
        typer.echo(f"{origin:9} {clean(path)}")
    typer.echo(f"# measurements saved by 'napkin bench matmul --save': {measurements_path()}")
    typer.echo(f"# your model presets (--model): {os.pathsep.join(str(d) for d in user_model_dirs())}")


@app.command("schema")
def schema_command() -> None:
    """Print the JSON Schema of a profile file (for editors: yaml-language-server)."""
    from napkin.profiles import schema

    typer.echo(dumps(schema()))


__all__ = ["app", "emit"]
