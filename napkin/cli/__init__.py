"""The ``napkin`` command: a thin adapter over the library (parse → call the engine → render).

Each command converts napkin's user-facing errors into one line on stderr and an exit code
(``boundary``); click's own usage errors get the same one-line treatment (``NapkinGroup``).
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

import typer

from napkin import __version__
from napkin.cli import compute_cmds, hardware_cmds, inference_cmds, live_cmds, memory_cmds
from napkin.cli.common import NapkinGroup

_SETTINGS: dict[str, Any] = {
    "name": "napkin",
    "cls": NapkinGroup,
    "help": "Napkin math for deep-learning training runs: FLOPs, time, memory, cost — with sources.",
    "epilog": "Units: GB = 1e9 B, GiB = 2^30 B; counts use K/M/B/T = 1e3/1e6/1e9/1e12; peaks are dense.",
    "no_args_is_help": True,
    "pretty_exceptions_enable": False,
    "context_settings": {"help_option_names": ["-h", "--help"]},
    "add_completion": False,
}
app = typer.Typer(**_SETTINGS)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"napkin {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    """Napkin math for deep-learning training runs."""


for sub in (compute_cmds.app, memory_cmds.app, inference_cmds.app, live_cmds.app):
    app.registered_commands.extend(sub.registered_commands)
app.add_typer(compute_cmds.flops_app, name="flops")
app.add_typer(hardware_cmds.app, name="hardware")
app.add_typer(live_cmds.bench_app, name="bench")


def _app_for(argv: list[str]) -> typer.Typer:
    """The app with only the command being run, so startup converts one command, not all of them.

    ``napkin --help`` (no command name) and anything unrecognised get the full app, which gives the
    same help and the same error messages; a single command behaves exactly as it does in ``app``.
    """
    name = next((arg for arg in argv if not arg.startswith("-")), None)
    commands = [c for c in app.registered_commands if c.name == name]
    groups = [g for g in app.registered_groups if g.name == name]
    if not commands and not groups:
        return app
    single = typer.Typer(**_SETTINGS)
    single.registered_callback = app.registered_callback
    single.registered_commands = commands
    single.registered_groups = groups
    return single


def main() -> None:
    # napkin uses no pydantic plugins; skipping their discovery (an entry-point scan) saves startup time.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    _app_for(sys.argv[1:])()


__all__ = ["app", "main"]
