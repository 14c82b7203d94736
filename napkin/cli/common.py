"""What every command shares: the error boundary, the output switch, and the common options."""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from pydantic import ValidationError

from napkin.domain.choices import Dtype
from napkin.errors import NapkinError, UsageError

if TYPE_CHECKING:  # the engines are imported by the commands that use them, not at startup
    from napkin.results.result import Result
    from napkin.systems.profiles import LoadedProfile


def _line(message: str) -> str:
    """One line, safe for a terminal: file-sourced text may hold escape sequences or newlines."""
    from napkin.io.yamlio import clean

    return clean(message).replace("\n", " ").replace("\t", " ")


def say(text: str, *, err: bool = False) -> None:
    """``text`` and a newline on stdout (stderr), through the stream as ``napkin.cli`` set it up: one that cannot
    encode Unicode (LANG=C, PYTHONIOENCODING=ascii) gets ASCII spellings ('x' for '×'). Not ``typer.echo``: click
    re-wraps an ASCII stream as UTF-8, which sent such a terminal bytes it cannot show."""
    stream = sys.stderr if err else sys.stdout
    try:
        stream.write(text + "\n")
        stream.flush()
    except OSError:  # stderr that cannot be written (2>/dev/full) leaves the exit status as it is: 2 for bad input
        if not err:
            raise
        # the unwritten line stays in the stream's buffer, and Python's flush of it at exit would turn the status
        # into 120 (a buffered stderr: PYTHONUNBUFFERED unset); later lines go nowhere instead
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 (the process's stderr from here on)


def unicode_stdout() -> bool:
    """Whether stdout encodes napkin's symbols (→, ×, box lines); JSON is written with ``\\u`` escapes where not."""
    try:
        "→─≥×·█".encode(getattr(sys.stdout, "encoding", None) or "ascii")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def error(message: str) -> None:
    """The one format of napkin's error lines (stderr)."""
    say(f"napkin: error: {_line(message)}", err=True)


def fail(message: str, code: int) -> NoReturn:
    error(message)
    raise typer.Exit(code)


def wrapped(text: str, columns: int | None) -> str:
    """``text`` wrapped to ``columns`` under the "napkin: " prefix, words and numbers kept whole; unchanged when
    ``columns`` is None (piped stderr keeps one line per message, for grep)."""
    import textwrap

    if columns is None or len(text) <= columns:
        return text
    return textwrap.fill(
        text, max(columns, 40), subsequent_indent=" " * len("napkin: "), break_long_words=False, break_on_hyphens=False
    )


def warn(message: str) -> None:
    from napkin.io.terminal import stderr_columns

    say(wrapped(f"napkin: warning: {_line(message)}", stderr_columns()), err=True)


def note(message: str) -> None:
    """Information that belongs with the result but is neither a result nor a warning (stderr); wrapped to the
    terminal when stderr is one."""
    from napkin.io.terminal import stderr_columns

    say(wrapped(f"napkin: {_line(message)}", stderr_columns()), err=True)


def _given_inputs() -> str:
    """The options and arguments given on the command line, for messages about extreme inputs."""
    from typer._click import core, globals

    ctx = globals.get_current_context(silent=True)
    if ctx is None:
        return "the inputs"
    given = [
        param.opts[0] if param.opts else (param.name or "")
        for param in ctx.command.params
        if param.name and ctx.get_parameter_source(param.name) is core.ParameterSource.COMMANDLINE
    ]
    return ", ".join(name for name in given if name) or "the inputs"


def _non_finite(data: Any, where: str = "") -> str | None:
    """The path of the first NaN or infinity in ``data`` (JSON-like), if any."""
    if isinstance(data, float):
        return None if math.isfinite(data) else (where or "value")
    if isinstance(data, dict):
        items: Iterable[tuple[Any, Any]] = data.items()
    elif isinstance(data, list | tuple):
        items = enumerate(data)
    else:
        return None
    for key, value in items:
        found = _non_finite(value, f"{where}.{key}" if where else str(key))
        if found is not None:
            return found
    return None


def _not_finite_message(where: str) -> str:
    return (
        f"the result is not a finite number ({where}); an input is too large or too small for "
        f"floating point: check {_given_inputs()}"
    )


def _spelled(data: Any) -> Any:
    """``data`` with every non-finite float written as the string "inf", "-inf" or "nan"."""
    if isinstance(data, float) and not math.isfinite(data):
        return str(data)
    if isinstance(data, dict):
        return {key: _spelled(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [_spelled(value) for value in data]
    return data


def dumps(data: Any, *, non_finite_ok: bool = False, ascii_only: bool = False) -> str:
    """Strict JSON (never NaN or Infinity): the one way napkin writes JSON.

    A non-finite number is an error naming the inputs given, unless the result is *about* such
    values (``non_finite_ok``: ``napkin dtypes --value inf``), where it is written as a string. ``ascii_only``:
    every other character as a ``\\u`` escape (the same JSON, for a stream that cannot encode it).
    """
    if non_finite_ok:
        data = _spelled(data)
    where = _non_finite(data)
    if where is not None:
        raise UsageError(_not_finite_message(where))
    return json.dumps(data, indent=2, ensure_ascii=ascii_only, allow_nan=False)


#: Library keywords that no single parameter of a command takes, and how the command line gives them.
FLAGS = {"seconds": "--days/--hours"}


def _command_inputs() -> dict[str, str] | None:
    """The running command's inputs by their library names (``tensor_parallel``) and as its command line writes
    them (``--tensor-parallel``, an argument's ``SHAPE``); None outside a command."""
    from typer._click import globals

    ctx = globals.get_current_context(silent=True)
    if ctx is None:
        return None
    inputs = {}
    for param in ctx.command.params:
        if param.name is None:
            continue
        if isinstance(param, typer.core.TyperOption):
            longs = [o for o in param.opts if o.startswith("--")]
            inputs[param.name] = longs[0] if longs else param.opts[0]
            for o in longs:  # a keyword the command's parameter names otherwise (``bytes``: ``nbytes``)
                inputs.setdefault(o[2:].replace("-", "_"), o)
        elif isinstance(param, typer.core.TyperArgument):
            inputs[param.name] = param.metavar or param.name.upper()
    return inputs


def flag(field: str) -> str:
    """``field`` (a library keyword) as the command line gives it: the running command's own flag or argument,
    else ``--`` and the keyword with dashes."""
    inputs = _command_inputs() or {}
    return inputs.get(field) or FLAGS.get(field, "--" + field.replace("_", "-"))


def _for_cli(exc: NapkinError) -> str:
    """The library's message with the inputs it names written as the flags a user typed: the one place where
    keywords become flags. The input at fault (``exc.field``, the first of ``exc.fields``) is written as its flag
    where the message first names it (the leading ``field:``), never the same word later in prose ("no default
    context length"); every mention of the other inputs the error names (``also``) is. Quoted text ('napkin
    cluster list', a value the user gave), a word naming a kind of thing ("unknown hardware 'h10'") and a field
    that is no input of the running command (a key of a file it read) are left alone."""
    import re

    inputs = _command_inputs()
    parts = re.split(r"('[^']*')", str(exc))  # odd indices: quoted spans
    for n, field in enumerate(dict.fromkeys(exc.fields)):
        written = flag(field) if inputs is None else inputs.get(field) or FLAGS.get(field)
        if written is None:
            continue
        pattern = re.compile(rf"(?<![\w\[$.-])(?<!unknown ){re.escape(field)}(?![\w\]-])")
        once = n == 0 and field not in exc.fields[1:]
        for i in range(0, len(parts), 2):
            parts[i], found = pattern.subn(written.replace("\\", "\\\\"), parts[i], count=1 if once else 0)
            if found and once:
                break
    return "".join(parts)


@contextmanager
def boundary() -> Iterator[None]:
    """Turn a user-facing error into one line on stderr and its exit code; never a traceback."""
    try:
        yield
    except NapkinError as exc:
        fail(_for_cli(exc), exc.exit_code)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "input"
        fail(f"{where}: {first['msg'].removeprefix('Value error, ')}", 2)
    except (OverflowError, ZeroDivisionError) as exc:
        fail(f"a value left floating-point range ({exc}); check the magnitudes of {_given_inputs()}", 2)


def _command_path() -> str:
    from typer._click import globals

    ctx = globals.get_current_context(silent=True)
    return ctx.command_path if ctx is not None else "napkin"


def emit(result: Result, as_json: bool, *, explain: bool = False) -> None:
    """The one output path: ``result`` as JSON (base units, strict) or as its own table; its warnings and
    notes (its profiles' among them) on stderr; with ``explain`` the derivation after the table."""
    for message in result.warnings:
        warn(message)
    for message in result.notes:
        note(message)
    with boundary():
        non_finite_ok = getattr(result, "non_finite_ok", False)
        text = dumps(result.to_json(explain), non_finite_ok=non_finite_ok, ascii_only=not unicode_stdout())
    if as_json:  # (a table never shows a non-finite number either: dumps checked it)
        echo(text)
        return
    from napkin.results import render as r

    out = r.console()
    for renderable in result.renderables():
        out.print(renderable, soft_wrap=isinstance(renderable, r.Links))  # a link is never broken
    if explain and result.steps:
        out.print(r.explanation(result.steps))


#: Output is written in pieces of this size, each flushed, as the table path writes line by line: a reader that
#: went away (``| head -1``) is seen on the next piece (exit 141), whatever the size of the output.
CHUNK_CHARS = 4096


def echo(text: str) -> None:
    """``text`` and a newline on stdout, in flushed pieces (CHUNK_CHARS), as ``say`` writes."""
    for start in range(0, len(text), CHUNK_CHARS):
        sys.stdout.write(text[start : start + CHUNK_CHARS])
        sys.stdout.flush()
    say("")


def echo_json(data: Any) -> None:
    """``data`` as strict JSON on stdout (``dumps``), escaped to ASCII where stdout cannot encode it."""
    echo(dumps(data, ascii_only=not unicode_stdout()))


@contextmanager
def progress(label: str) -> Iterator[Callable[[str, float], None]]:
    """A transient progress bar on stderr for a measurement; yields ``update(description, fraction_done)``."""
    from rich.progress import Progress

    from napkin.results import render as r

    with Progress(transient=True, console=r.console(stderr=True)) as bar:
        task = bar.add_task(label, total=1.0)

        def update(description: str, done: float) -> None:
            bar.update(task, completed=done, description=description)

        yield update


def deprecated_spellings(options: dict[str, Any]) -> None:
    """Apply the deprecated spellings given (``options.DEPRECATED``) to the keyword they set, with a note each."""
    from typer._click import core, globals

    from napkin.cli.options import DEPRECATED

    ctx = globals.get_current_context(silent=True)
    for name, (flag, keyword, instead) in DEPRECATED.items():
        value = options.pop(name, None)
        if value is None:
            continue
        if ctx is not None and ctx.get_parameter_source(keyword) is core.ParameterSource.COMMANDLINE:
            raise UsageError(f"give {instead} or {flag}, not both ({flag} is its old spelling)")
        note(f"{flag} is deprecated and goes in the next release; write {instead}")
        options[keyword] = value


def run(question: Callable[..., Any], options: dict[str, Any]) -> None:
    """What every computing command does: call the library with its options, then emit the result. A keyword
    the question requires and the command line left out is one line naming its flag (exit 2)."""
    import inspect

    as_json, explain = options.pop("json", False), options.pop("explain", False)
    required = [
        p.name
        for p in inspect.signature(question).parameters.values()
        if p.default is p.empty and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and options.get(p.name) is None
    ]
    if required:
        fail(f"{flag(required[0])} is required (see '{_command_path()} --help')", 2)
    with boundary():
        deprecated_spellings(options)
        result = question(**{k: v for k, v in options.items() if v is not None})
    emit(result, as_json, explain=explain)
    if result.exit_code():
        raise typer.Exit(result.exit_code())


def run_with_plot(question: Callable[..., Any], options: dict[str, Any], draw: Callable[..., None]) -> None:
    """``run``, and with ``--plot PATH`` also ``draw(result, PATH, overwrite=--force)`` before the result is shown."""
    plot, force = options.pop("plot", None), options.pop("force", False)
    if plot is None:
        run(question, options)
        return
    as_json, explain = options.pop("json", False), options.pop("explain", False)
    with boundary():
        deprecated_spellings(options)
        result = question(**{k: v for k, v in options.items() if v is not None})
        draw(result, plot, overwrite=force)
    emit(result, as_json, explain=explain)
    if result.exit_code():
        raise typer.Exit(result.exit_code())


# ------------------------------------------------------------------------------------- options

JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON, in base units (FLOP, B, s).")]
ExplainOpt = Annotated[
    bool,
    typer.Option("--explain", help="Show the derivation: each formula, the numbers put in, and its source."),
]
HardwareOpt = Annotated[
    str | None,
    typer.Option(
        "--hardware",
        "-H",
        metavar="NAME",
        show_default="$NAPKIN_HARDWARE, else h100",
        help="Hardware profile name or alias (see 'napkin hardware list').",
    ),
]
HardwareFileOpt = Annotated[
    Path | None,
    typer.Option("--hardware-file", metavar="PATH", help="Use this profile YAML file instead of a named profile."),
]
DtypeOpt = Annotated[
    Dtype, typer.Option("--dtype", case_sensitive=False, help="Number format whose dense peak is used.")
]


def load_hardware(name: str | None, hardware_file: Path | None) -> LoadedProfile:
    from napkin.systems.profiles import resolve

    if name is not None and hardware_file is not None:
        raise UsageError("give hardware or hardware_file, not both", field="hardware", also=("hardware_file",))
    loaded = resolve(name, hardware_file)
    for message in loaded.notes:  # a live command's output is its own, not a result's: say them here
        note(message)
    return loaded


__all__ = [
    "boundary",
    "dumps",
    "echo",
    "emit",
    "fail",
    "flag",
    "load_hardware",
    "note",
    "progress",
    "run",
    "warn",
]
