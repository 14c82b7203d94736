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
import importlib
import os
import sys
from functools import cache
from typing import Annotated, Any, Final

import typer

from napkin import __version__
from napkin.cli.common import say
from napkin.cli.group import NapkinGroup

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


def _version(value: bool) -> None:
    if value:
        say(f"napkin {__version__}")
        raise typer.Exit()


def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    """Napkin math for deep-learning training runs."""


#: The modules whose commands are napkin's top-level commands, in the order ``napkin --help`` lists them.
COMMAND_MODULES: Final = ("compute_cmds", "memory_cmds", "plan_cmds", "inference_cmds", "live_cmds")
#: Each command group: its name → (the module that declares it, the module's ``typer.Typer``), in help's order.
GROUPS: Final = {
    "flops": ("compute_cmds", "flops_app"),
    "hardware": ("hardware_cmds", "app"),
    "stack": ("stack_cmds", "app"),
    "bench": ("live_cmds", "bench_app"),
    "comm": ("comm_cmds", "comm_app"),
    "cluster": ("comm_cmds", "cluster_app"),
}
#: Each top-level command → the module that declares it (in COMMAND_MODULES), so that running one command imports
#: that module alone (start-up time); tests/test_cli.py checks it against the modules' own command tables.
COMMANDS: Final = {
    **dict.fromkeys(("train-time", "mfu", "optimal", "models"), "compute_cmds"),
    **dict.fromkeys(("max-model", "memory", "optimizers", "dtypes", "tensor"), "memory_cmds"),
    **dict.fromkeys(("step", "plan", "calibrate"), "plan_cmds"),
    **dict.fromkeys(("inference", "kv-cache", "traffic", "serve-plan"), "inference_cmds"),
    "verify": "live_cmds",
}


def _module(name: str) -> Any:
    return importlib.import_module(f"napkin.cli.{name}")


@cache
def _group(name: str) -> typer.Typer:
    """The ``typer.Typer`` of the command group ``name`` (``napkin bench``'s with its collective benchmarks)."""
    module, attribute = GROUPS[name]
    group: typer.Typer = getattr(_module(module), attribute)
    if name == "bench":
        _module("bench_comm_cmds").register(group)
    return group


def _new_app(commands: list[Any], groups: list[str]) -> typer.Typer:
    built = typer.Typer(**_SETTINGS)
    built.callback()(_root)
    built.registered_commands = commands
    for name in groups:
        built.add_typer(_group(name), name=name)
    return built


@cache
def full_app() -> typer.Typer:
    """napkin's whole command table: every command and group (``napkin --help``, tests, the library's ``app``)."""
    commands = [c for module in COMMAND_MODULES for c in _module(module).app.registered_commands]
    return _new_app(commands, list(GROUPS))


def __getattr__(name: str) -> typer.Typer:
    if name == "app":  # built when first asked for: a command imports only its own module (``_app_for``)
        return full_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _app_for(argv: list[str]) -> typer.Typer:
    """The app with only the command being run, so startup imports and converts one command, not all of them.

    ``napkin --help`` (no command name) and anything unrecognised get the full app, which gives the
    same help and the same error messages; a single command behaves exactly as it does in ``app``.
    """
    if argv == ["--version"]:  # answered while the options are parsed, before any command is looked up
        return _new_app([], [])
    name = next((arg for arg in argv if not arg.startswith("-")), None)
    if name in GROUPS:
        return _new_app([], [name])
    if name in COMMANDS:
        commands = [c for c in _module(COMMANDS[name]).app.registered_commands if c.name == name]
        return _new_app(commands, [])
    return full_app()


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
    "§": "sec. ",
    "÷": "/",
    "⇒": "=>",
    "∝": "~",
    "‖": "||",
    "⌈": "ceil(",
    "⌉": ")",
    "⌊": "floor(",
    "⌋": ")",
    "⅓": "1/3",
    "⅔": "2/3",
    "α": "alpha",
    "β": "beta",
    "γ": "gamma",
    "η": "eta",
    "μ": "u",
    "Δ": "Delta",
    "Ψ": "Psi",
}
#: Superscripts and subscripts, written after one '^' or '_' per run: '10⁻¹⁵' is '10^-15', 'x₁₂' is 'x_12'.
_SCRIPTS: Final = {
    "^": dict(zip("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺ᵀ", "0123456789-+T", strict=True)),
    "_": dict(zip("₀₁₂₃₄₅₆₇₈₉", "0123456789", strict=True)),
}
EXIT_SIGPIPE: Final = 128 + 13
EXIT_SIGINT: Final = 128 + 2


def _ascii_fallback(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    run = exc.object[exc.start : exc.end]
    for mark, digits in _SCRIPTS.items():
        if all(ch in digits for ch in run):
            return mark + "".join(digits[ch] for ch in run), exc.end
    return "".join(ASCII_FALLBACK.get(ch, "?") for ch in run), exc.end


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
