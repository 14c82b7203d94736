"""The ``napkin`` command: a thin adapter over the library (parse → call the engine → render).

Each command converts napkin's user-facing errors into one line on stderr and an exit code
(``boundary``); click's own usage errors get the same one-line treatment (``NapkinGroup``).
"""

from __future__ import annotations

from typing import Annotated

import typer

from napkin import __version__
from napkin.cli import compute_cmds, hardware_cmds, live_cmds, memory_cmds
from napkin.cli.common import NapkinGroup

app = typer.Typer(
    name="napkin",
    cls=NapkinGroup,
    help="Napkin math for deep-learning training runs: FLOPs, time, memory, cost — with sources.",
    epilog="Units: GB = 1e9 B, GiB = 2^30 B; counts use K/M/B/T = 1e3/1e6/1e9/1e12; peaks are dense.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    add_completion=False,
)


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


for sub in (compute_cmds.app, memory_cmds.app, live_cmds.app):
    app.registered_commands.extend(sub.registered_commands)
app.add_typer(compute_cmds.flops_app, name="flops")
app.add_typer(hardware_cmds.app, name="hardware")
app.add_typer(live_cmds.bench_app, name="bench")


def main() -> None:
    app()


__all__ = ["app", "main"]
