"""What every command shares: the error boundary, the output switch, and the common options."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from pydantic import ValidationError

from napkin.choices import Dtype
from napkin.errors import NapkinError, UsageError

if TYPE_CHECKING:  # the engines are imported by the commands that use them, not at startup
    from pydantic import BaseModel

    from napkin.explain import Step
    from napkin.profiles import LoadedProfile

from typer._click import exceptions as click_exceptions  # typer vendors click (pyproject: typer>=0.29)


def error(message: str) -> None:
    """The one format of napkin's error lines (stderr)."""
    typer.echo(f"napkin: error: {message}", err=True)


def fail(message: str, code: int) -> NoReturn:
    error(message)
    raise typer.Exit(code)


def warn(message: str) -> None:
    typer.echo(f"napkin: warning: {message}", err=True)


#: Library keywords whose command-line flag is not simply ``--`` + the keyword with dashes.
FLAGS = {"seconds": "--days/--hours", "m": "M", "k": "K", "n": "N", "shape": "SHAPE"}


def flag(field: str) -> str:
    return FLAGS.get(field, "--" + field.replace("_", "-"))


def _for_cli(exc: NapkinError) -> str:
    """The engine's message with the keywords it names written as the flags a user typed."""
    import re

    message = str(exc)
    for field in getattr(exc, "fields", ()):
        message = re.sub(rf"(?<![\w-]){re.escape(field)}(?![\w-])", flag(field), message)
    return message


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


class NapkinGroup(typer.core.TyperGroup):
    """Click's usage errors as one line (``napkin: error: …``), exit code 2, no box, no traceback."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            rv = super().main(*args, **kwargs)
        except click_exceptions.NoArgsIsHelpError as exc:
            typer.echo(exc.ctx.get_help() if exc.ctx else "")
            sys.exit(0)
        except click_exceptions.UsageError as exc:
            command = exc.ctx.command_path if exc.ctx else "napkin"
            message = exc.format_message().replace("Value error, ", "")
            error(f"{message} (see '{command} --help')")
            sys.exit(2)
        except click_exceptions.ClickException as exc:
            error(exc.format_message())
            sys.exit(exc.exit_code)
        except typer.Abort:
            typer.echo("napkin: aborted", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


def emit(
    result: BaseModel,
    as_json: bool,
    render: Callable[[], Sequence[Any]] | None = None,
    *,
    explain: bool = False,
    steps: Sequence[Step] = (),
    warnings: Sequence[str] = (),
    json_data: Any = None,
) -> None:
    """The one output path: ``result`` as JSON (base units) or as its table, warnings on stderr.

    A ``napkin.result.Result`` renders itself (``renderables()``, ``to_json()``, ``steps``,
    ``warnings``); ``render``/``steps``/``json_data`` serve results that are not one yet.
    """
    from napkin.result import Result

    own = isinstance(result, Result)
    for message in [*(result.warnings if own else ()), *warnings]:  # type: ignore[attr-defined]
        warn(message)
    if as_json:
        if json_data is not None:
            data = json_data
        elif own:
            data = result.to_json(explain)  # type: ignore[attr-defined]
        else:
            data = result.model_dump(mode="json", exclude=None if explain else {"steps"})
        typer.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    from napkin import render as r

    out = r.console()
    for renderable in render() if render is not None else result.renderables():  # type: ignore[attr-defined]
        out.print(renderable)
    derivation = steps or (result.steps if own else ())  # type: ignore[attr-defined]
    if explain and derivation:
        out.print(r.explanation(derivation))


def run(question: Callable[..., Any], options: dict[str, Any]) -> None:
    """What every computing command does: call the library with its options, then emit the result."""
    as_json, explain = options.pop("json", False), options.pop("explain", False)
    with boundary():
        result = question(**{k: v for k, v in options.items() if v is not None})
    emit(result, as_json, explain=explain)


# ------------------------------------------------------------------------------------- options

JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON, in base units (FLOP, B, s).")]
ExplainOpt = Annotated[
    bool,
    typer.Option("--explain", help="Show the derivation: each formula, the numbers put in, and its source."),
]
HardwareOpt = Annotated[
    str | None,
    typer.Option(
        "--hardware", "-H", metavar="NAME", show_default="$NAPKIN_HARDWARE, else h100",
        help="Hardware profile name or alias (see 'napkin hardware list').",
    ),
]  # fmt: skip
HardwareFileOpt = Annotated[
    Path | None,
    typer.Option("--hardware-file", metavar="PATH", help="Use this profile YAML file instead of a named profile."),
]
DtypeOpt = Annotated[Dtype, typer.Option("--dtype", help="Number format whose dense peak is used.")]


def load_hardware(name: str | None, hardware_file: Path | None) -> LoadedProfile:
    from napkin.profiles import resolve

    if name is not None and hardware_file is not None:
        raise UsageError("give --hardware or --hardware-file, not both")
    return resolve(name, hardware_file)


__all__ = ["boundary", "emit", "fail", "flag", "load_hardware", "run", "warn"]
