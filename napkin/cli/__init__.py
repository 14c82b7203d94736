"""The ``napkin`` command: a thin adapter over the library (parse → call the engine → render).

Each command converts napkin's user-facing errors into one line on stderr and an exit code
(``boundary``); click's own usage errors get the same one-line treatment (``NapkinGroup``).
``main`` adds what a command-line tool owes its terminal and its pipes:

* a stream that cannot encode napkin's symbols (``PYTHONIOENCODING=ascii``, an uncoerced C locale)
  gets them spelled in ASCII (``→`` as ``->``, ``≥`` as ``>=``; anything else as ``?``);
* a reader that goes away (``napkin … | head -1``) ends napkin quietly with 141 (128 + SIGPIPE, what the
  shell reports for a process killed by SIGPIPE); a closed stdout is written to nowhere;
* a failed write (a full disk: ``> /dev/full``) is one error line and exit 1;
* Ctrl-C is "napkin: interrupted" and exit 130 (128 + SIGINT), never a traceback.
"""

from __future__ import annotations

import codecs
import errno
import os
import sys
from typing import Annotated, Any, Final

import typer

from napkin import __version__
from napkin.cli import (
    bench_comm_cmds,
    comm_cmds,
    compute_cmds,
    hardware_cmds,
    inference_cmds,
    live_cmds,
    memory_cmds,
    plan_cmds,
    stack_cmds,
)
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
    # plain help: rich's option table truncates long flags (--tensor-parall…) on an 80-column terminal
    "rich_markup_mode": None,
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


for sub in (compute_cmds.app, memory_cmds.app, plan_cmds.app, inference_cmds.app, live_cmds.app):
    app.registered_commands.extend(sub.registered_commands)
app.add_typer(compute_cmds.flops_app, name="flops")
app.add_typer(hardware_cmds.app, name="hardware")
app.add_typer(stack_cmds.app, name="stack")
app.add_typer(live_cmds.bench_app, name="bench")
app.add_typer(comm_cmds.comm_app, name="comm")
app.add_typer(comm_cmds.cluster_app, name="cluster")
bench_comm_cmds.register(live_cmds.bench_app)


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


#: ASCII spellings of the symbols napkin prints, for streams that cannot encode them.
ASCII_FALLBACK: Final = {
    "→": "->",
    "←": "<-",
    "≥": ">=",
    "≤": "<=",
    "≈": "~",
    "×": "x",
    "·": ".",
    "–": "-",
    "—": "-",
    "−": "-",
    "…": "...",
    "±": "+/-",
    "√": "sqrt",
    "²": "^2",
    "³": "^3",
    "µ": "u",
    "Σ": "sum",
    "‘": "'",
    "’": "'",
    "“": '"',
    "”": '"',
    "█": "#",
    "▓": "%",
    "▒": "+",
    "░": ":",
    "━": "-",
    "─": "-",
    "│": "|",
    "┃": "|",
}
EXIT_SIGPIPE: Final = 128 + 13
EXIT_SIGINT: Final = 128 + 2


def _ascii_fallback(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    return "".join(ASCII_FALLBACK.get(ch, "?") for ch in exc.object[exc.start : exc.end]), exc.end


def _prepare_streams() -> None:
    """A closed stdout/stderr writes to nowhere; a stream that cannot encode Unicode falls back to ASCII."""
    codecs.register_error("napkin-ascii", _ascii_fallback)
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115 - lives as long as napkin
            continue
        try:
            "→─≥×·█".encode(stream.encoding or "ascii")
        except (UnicodeEncodeError, LookupError):
            reconfigure = getattr(stream, "reconfigure", None)
            if reconfigure is not None:
                reconfigure(errors="napkin-ascii")


def _discard_stdout() -> None:
    """Point fd 1 at /dev/null, so the interpreter's last flush of buffered output cannot fail again."""
    try:
        fd = sys.stdout.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        if devnull != fd:  # with fd 1 closed, os.open hands back 1 itself: keep it open
            os.dup2(devnull, fd)
            os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def _stderr_line(message: str) -> None:
    try:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def main() -> None:
    # napkin uses no pydantic plugins; skipping their discovery (an entry-point scan) saves startup time.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    code: int | str | None = 0
    try:
        _prepare_streams()
        try:
            _app_for(sys.argv[1:])()
        except SystemExit as exc:
            code = exc.code
        if type(sys.stdout).__name__ == "PacifyFlushWrapper":  # click saw EPIPE, hushed stdout, exited 1
            code = EXIT_SIGPIPE
        sys.stdout.flush()
    except KeyboardInterrupt:
        _stderr_line("napkin: interrupted")
        code = EXIT_SIGINT
    except BrokenPipeError:
        _discard_stdout()
        code = EXIT_SIGPIPE
    except OSError as exc:  # writing the output failed: a full disk, a closed descriptor
        _discard_stdout()
        if exc.errno == errno.EPIPE:
            code = EXIT_SIGPIPE
        else:
            _stderr_line(f"napkin: error: cannot write the output: {exc.strerror or exc}")
            code = 1
    sys.exit(code)


__all__ = ["app", "main"]
