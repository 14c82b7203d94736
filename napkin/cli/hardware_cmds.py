"""``napkin hardware …``: list, show, compare, validate, new, edit, path, schema."""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
from datetime import date
from pathlib import Path
from typing import Annotated, Any

import typer

from napkin.cli.common import (
    DtypeOpt,
    JsonOpt,
    boundary,
    dumps,
    echo_json,
    emit,
    fail,
    note,
    run,
    say,
    warn,
)
from napkin.domain.choices import Dtype
from napkin.errors import NapkinError, ProfileError, UsageError
from napkin.io.yamlio import clean

app = typer.Typer(help="Hardware profiles: list, inspect, compare, validate, copy and edit them.", no_args_is_help=True)

NameArg = Annotated[str, typer.Argument(help="Profile name or alias (see 'napkin hardware list').")]


@app.command("list")
def list_command(as_json: JsonOpt = False) -> None:
    """Every profile napkin can see, where it comes from, and any invalid files."""
    from napkin import api

    run(api.hardware_list, {"json": as_json})


@app.command("show")
def show_command(
    name: Annotated[str | None, typer.Argument(help="Profile name or alias.")] = None,
    hardware_file: Annotated[
        Path | None, typer.Option("--hardware-file", metavar="PATH", help="Show this file instead.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Every field of one profile, with units and sources."""
    from napkin import api

    run(api.hardware_sheet, {"name": name, "hardware_file": hardware_file, "json": as_json})


@app.command("compare")
def compare_command(
    names: Annotated[list[str], typer.Argument(help="Two or more profile names.")],
    dtype: DtypeOpt = Dtype.bf16,
    as_json: JsonOpt = False,
) -> None:
    """Side by side, with the ridge point (dense peak / bandwidth, FLOP per byte)."""
    from napkin import api

    run(api.hardware_compare, {"names": names, "dtype": dtype, "json": as_json})


@app.command("validate")
def validate_command(
    paths: Annotated[list[Path] | None, typer.Argument(help="Files to check (default: every profile found).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Check profile files; each problem is reported as file:line: field: message. Exit 1 if any is invalid."""
    from napkin.systems.profiles import HARDWARE

    validate_profiles(HARDWARE, paths, as_json)


def validate_profiles(kind: Any, paths: list[Path] | None, as_json: bool) -> None:
    """``napkin <kind> validate``: each problem as file:line: field: message; exit 1 if any file is invalid."""
    from napkin.io.files import read_text
    from napkin.systems.profiles import catalog_of

    problems: list[str] = []
    valid: list[str] = []
    checked = 0
    if paths:
        for path in paths:
            checked += 1
            try:
                kind.parse(read_text(path), str(path))
                valid.append(str(path))
            except ProfileError as exc:
                problems += exc.problems
            except NapkinError as exc:
                problems.append(str(exc))
    else:
        catalog = catalog_of(kind)
        for loaded in catalog.profiles:
            checked += 1
            valid.append(loaded.path)
        for broken in catalog.broken:
            checked += 1
            problems += list(broken.problems) or [broken.error]
        problems += catalog.conflicts
    if as_json:
        echo_json({"valid": valid, "problems": problems})
    else:
        for path_text in valid:
            say(f"ok  {clean(path_text)}")
    for line in problems:
        say(clean(line), err=True)
    if problems:
        fail(f"{len(problems)} problem(s) in {checked} file(s)", 1)


def _user_schema(directory: Path, schema: Any = None) -> None:
    """Keep a copy of the JSON Schema beside user profiles, so editors can complete fields (``schema``: the
    kind's schema function; hardware's by default)."""
    from napkin.io.files import write_atomic
    from napkin.systems.profiles import SCHEMA_FILE
    from napkin.systems.profiles import schema as hardware_schema

    schema = schema or hardware_schema

    target = directory / SCHEMA_FILE
    import json

    from napkin.errors import NapkinError
    from napkin.io.files import read_text

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
    from napkin.systems.profiles import HARDWARE, resolve

    new_profile(HARDWARE, name, source, force, as_json, lambda n: resolve(n, what="source"), None)


def new_profile(kind: Any, name: str, source: str | None, force: bool, as_json: bool, find: Any, schema: Any) -> None:
    """``napkin <kind> new NAME --from SOURCE``: copy a profile into the user directory, never overwriting
    without ``force``; ``find`` resolves the source name, ``schema`` gives the kind's JSON Schema."""
    from napkin.io.files import write_atomic
    from napkin.systems.profiles import SLUG_RULE, copy_text, is_builtin_name, is_slug

    with boundary():
        if not is_slug(name):
            raise UsageError(f"NAME: {name!r}: {SLUG_RULE}")
        if source is None:
            raise UsageError(
                f"--from: which profile should {name} start from? e.g. 'napkin {kind.noun} new {name} --from "
                f"{kind.example}' (see 'napkin {kind.noun} list')"
            )
        builtin = is_builtin_name(name, kind)
        if builtin is not None and not force:
            raise UsageError(
                f"NAME: {name!r} is the built-in profile {builtin}'s name; your profile would replace it in every "
                "command. Pick another name, or pass --force to replace it (every command then says so)"
            )
        loaded = find(source)
        text = copy_text(loaded, name, date.today().isoformat(), kind)
        target = kind.user_dir() / f"{name}.yaml"
        kind.parse(text, str(target))
        write_atomic(target, text, overwrite=force)
        _user_schema(target.parent, schema)
    if as_json:
        echo_json({"path": str(target), "from": loaded.profile.name})
    else:
        say(str(target))
    note(f"created {target} from {loaded.profile.name}; edit it with 'napkin {kind.noun} edit {name}'")


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
    from napkin.systems.profiles import HARDWARE, resolve

    edit_profile(HARDWARE, name, discard, as_json, lambda n: resolve(n, what="name"), None)


def edit_profile(kind: Any, name: str, discard: bool, as_json: bool, find: Any, schema: Any) -> None:
    """``napkin <kind> edit NAME``: edit the user's copy (made from the built-in if needed) through a draft that is
    kept only if it validates. The editor is checked first: with none to run, nothing is copied or drafted."""
    from napkin.io.files import locked, read_text, write_atomic
    from napkin.systems.profiles import copy_text, normalize

    with boundary():
        directory = kind.user_dir()
        editor = [] if discard else editor_command(directory)
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
            loaded = find(name)
            if loaded.origin in ("user", "env"):  # the user's own file: edit it where it is
                target = Path(loaded.path)
            else:
                target = directory / f"{loaded.profile.name}.yaml"
                write_atomic(target, copy_text(loaded, loaded.profile.name, date.today().isoformat(), kind))
                note(f"created {target} from the {loaded.origin} {kind.noun}; it replaces it from now on")
        if schema is not False:
            _user_schema(directory, schema)
        with locked(target, wait=False):
            _edit(name, target, read_text, kind.parse, write_atomic, editor, f"napkin {kind.noun} edit")
    if as_json:
        echo_json({"path": str(target)})
    else:
        say(str(target))


def editor_command(directory: Path) -> list[str]:
    """The editor to run: $VISUAL, else $EDITOR, else vi, which needs a terminal: with no editor set and no
    terminal (a script, a pipe, CI) the edit is refused at once, before any file is copied or drafted, saying
    where the files of this kind live (``directory``: hardware, stacks or clusters alike)."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not editor:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise UsageError(
                "$EDITOR: not set, and there is no terminal to run vi in; set EDITOR (e.g. "
                f"EDITOR=nano) or edit the file itself, in {directory}"
            )
        editor = "vi"
    try:
        words = shlex.split(editor)
    except ValueError as exc:
        raise UsageError(f"$EDITOR: {editor!r} cannot be split into a command: {exc}") from None
    if not words:
        raise UsageError("$EDITOR: empty; set it to an editor command such as nano or 'code --wait'")
    return words


def _edit(
    name: str,
    target: Path,
    read_text: Any,
    parse_profile: Any,
    write_atomic: Any,
    editor: list[str],
    command: str = "napkin hardware edit",
) -> None:
    """Edit ``target`` through a draft in ``editor``; keep it only if ``parse_profile`` accepts it (clusters too)."""
    draft = _draft_of(target)
    if draft.exists():
        warn(f"reopening your unsaved draft {draft} (discard it with '{command} {name} --discard')")
    else:
        write_atomic(draft, read_text(target))
    try:
        completed = subprocess.run([*editor, str(draft)], check=False)
    except OSError as exc:
        raise NapkinError(f"cannot run editor {shlex.join(editor)!r}: {exc.strerror or exc}; set $EDITOR") from None
    editor_text = shlex.join(editor)
    discard = f"'{command} {name} --discard' deletes it"
    if completed.returncode != 0:
        raise NapkinError(
            f"editor {editor_text!r} exited with {completed.returncode}; {target} is unchanged "
            f"(your draft is kept at {draft}; {discard})"
        )
    text = read_text(draft)
    try:
        parse_profile(text, str(draft))
    except ProfileError as exc:
        for line in exc.problems:
            say(clean(line), err=True)
        fail(
            f"the edit is invalid, so {target} keeps its previous version; your edit is saved in {draft}: "
            f"'{command} {name}' reopens it, {discard}",
            1,
        )
    write_atomic(target, text, overwrite=True)
    draft.unlink()


@app.command("path")
def path_command(as_json: JsonOpt = False) -> None:
    """The directories searched for profiles, highest priority first."""
    from napkin.systems.measurements import measurements_path
    from napkin.systems.presets import user_model_dirs
    from napkin.systems.profiles import search_path

    entries = [(origin, str(d)) for origin, d in search_path()]
    if as_json:
        echo_json(
            {
                "search_path": [{"origin": o, "path": p} for o, p in entries],
                "measurements": str(measurements_path()),
                "models": [str(d) for d in user_model_dirs()],
            }
        )
        return
    say("# --hardware-file PATH always wins; then, in order:")
    for origin, path in entries:
        say(f"{origin:9} {clean(path)}")
    say(f"# measurements saved by 'napkin bench matmul --save': {measurements_path()}")
    say(f"# your model presets (--model): {os.pathsep.join(str(d) for d in user_model_dirs())}")


@app.command("schema")
def schema_command() -> None:
    """Print the JSON Schema of a profile file (for editors: yaml-language-server)."""
    from napkin.systems.profiles import schema

    echo_json(schema())


__all__ = ["app", "emit"]
