"""``napkin stack …``: list, show, new, edit, validate, path, schema — the hardware commands' code, for the
stack kind of profile (``napkin.stack``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from napkin.cli.common import JsonOpt, echo_json, run, say
from napkin.cli.hardware_cmds import edit_profile, new_profile, validate_profiles
from napkin.io.yamlio import clean

app = typer.Typer(
    help="Stack profiles: what a software stack does and achieves; list, show, copy, edit, check.", no_args_is_help=True
)

NameArg = Annotated[str, typer.Argument(help="Stack name or alias (see 'napkin stack list').")]


@app.command("list")
def list_command(as_json: JsonOpt = False) -> None:
    """Every stack napkin can see, where it comes from, and any invalid files."""
    from napkin import api

    run(api.stack_list, {"json": as_json})


@app.command("show")
def show_command(
    name: Annotated[str | None, typer.Argument(help="Stack name or alias.")] = None,
    stack_file: Annotated[Path | None, typer.Option("--stack-file", metavar="PATH", help="Show this file.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Every value of one stack, with its source."""
    from napkin import api

    run(api.stack_sheet, {"name": name, "stack_file": stack_file, "json": as_json})


@app.command("validate")
def validate_command(
    paths: Annotated[list[Path] | None, typer.Argument(help="Files to check (default: every stack found).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Check stack files; each problem as file:line: field: message. Exit 1 if any is invalid."""
    from napkin.systems.stack import STACKS

    validate_profiles(STACKS, paths, as_json)


@app.command("new")
def new_command(
    name: Annotated[str, typer.Argument(help="Name of the new stack (lower-case, e.g. my-titan).")],
    source: Annotated[
        str | None, typer.Option("--from", metavar="NAME", help="Stack to copy (required), e.g. torchtitan.")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace your existing stack of that name, or take a built-in's name.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Copy a stack into your user directory for editing (never overwrites without --force)."""
    from napkin.systems.stack import STACKS, resolve, schema

    new_profile(STACKS, name, source, force, as_json, lambda n: resolve(n, what="source"), schema)


@app.command("edit")
def edit_command(
    name: NameArg,
    discard: Annotated[bool, typer.Option("--discard", help="Delete your unsaved draft instead of editing.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Open your copy of a stack in $EDITOR (creating it if needed); keep it only if it validates."""
    from napkin.systems.stack import STACKS, resolve, schema

    edit_profile(STACKS, name, discard, as_json, lambda n: resolve(n, what="name"), schema)


@app.command("path")
def path_command(as_json: JsonOpt = False) -> None:
    """The directories searched for stacks, highest priority first."""
    from napkin.systems.stack import STACKS

    entries = [(origin, str(d)) for origin, d in STACKS.search_path()]
    if as_json:
        echo_json({"search_path": [{"origin": o, "path": p} for o, p in entries]})
        return
    say("# --stack-file PATH always wins; then, in order:")
    for origin, path in entries:
        say(f"{origin:9} {clean(path)}")


@app.command("schema")
def schema_command() -> None:
    """Print the JSON Schema of a stack file (for editors: yaml-language-server)."""
    from napkin.systems.stack import schema

    echo_json(schema())


__all__ = ["app"]
