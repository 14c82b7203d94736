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
    from napkin.transformer import ModelShape

from typer._click import exceptions as click_exceptions  # typer vendors click (pyproject: typer>=0.29)


def error(message: str) -> None:
    """The one format of napkin's error lines (stderr)."""
    typer.echo(f"napkin: error: {message}", err=True)


def fail(message: str, code: int) -> NoReturn:
    error(message)
    raise typer.Exit(code)


def warn(message: str) -> None:
    typer.echo(f"napkin: warning: {message}", err=True)


@contextmanager
def boundary() -> Iterator[None]:
    """Turn a user-facing error into one line on stderr and its exit code; never a traceback."""
    try:
        yield
    except NapkinError as exc:
        fail(str(exc), exc.exit_code)
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
    render: Callable[[], Sequence[Any]],
    *,
    explain: bool = False,
    steps: Sequence[Step] = (),
    warnings: Sequence[str] = (),
    json_data: Any = None,
) -> None:
    """Print ``result``: JSON (base units; ``json_data`` instead when given) or rich renderables.

    Warnings go to stderr either way.
    """
    for message in warnings:
        warn(message)
    if as_json:
        exclude = None if explain else {"steps"}
        data = json_data if json_data is not None else result.model_dump(mode="json", exclude=exclude)
        typer.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    from napkin import render as r

    out = r.console()
    for renderable in render():
        out.print(renderable)
    if explain and steps:
        out.print(r.explanation(steps))


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
ModelOpt = Annotated[
    str | None, typer.Option("--model", "-m", metavar="NAME", help="Model preset (see 'napkin models').")
]
LayersOpt = Annotated[int | None, typer.Option("--layers", min=1, metavar="INT", help="L: transformer layers.")]
HiddenOpt = Annotated[int | None, typer.Option("--hidden", min=1, metavar="INT", help="d: model width.")]
HeadsOpt = Annotated[int | None, typer.Option("--heads", min=1, metavar="INT", help="a: attention heads.")]
SeqOpt = Annotated[int | None, typer.Option("--seq", min=1, metavar="INT", help="s: sequence length (tokens).")]
FfnOpt = Annotated[int | None, typer.Option("--ffn", min=1, metavar="INT", help="F: FFN inner width (default 4·d).")]
HeadDimOpt = Annotated[
    int | None, typer.Option("--head-dim", min=1, metavar="INT", help="d_h: head dimension (default d/a).")
]


def load_hardware(name: str | None, hardware_file: Path | None) -> LoadedProfile:
    from napkin.profiles import resolve

    if name is not None and hardware_file is not None:
        raise UsageError("give --hardware or --hardware-file, not both")
    return resolve(name, hardware_file)


def build_shape(
    model: str | None,
    *,
    layers: int | None = None,
    hidden: int | None = None,
    heads: int | None = None,
    seq: int | None = None,
    ffn: int | None = None,
    head_dim: int | None = None,
) -> tuple[ModelShape | None, float | None, float | None]:
    """(shape, total params, active params) from ``--model`` and/or explicit shape options."""
    from napkin.transformer import ModelShape

    explicit = {
        "layers": layers,
        "hidden": hidden,
        "heads": heads,
        "seq": seq,
        "ffn": ffn,
        "head_dim": head_dim,
    }
    given = {k: v for k, v in explicit.items() if v is not None}
    if model is not None:
        from napkin.presets import get_preset

        shape = ModelShape.model_validate({**get_preset(model).shape.model_dump(), **given})
        return shape, float(shape.params()), float(shape.active_params())
    if not given:
        return None, None, None
    needed = [k for k in ("layers", "hidden", "seq") if k not in given]
    if needed:
        raise UsageError(
            "a model shape needs --layers, --hidden and --seq (and --heads for activations); missing: "
            + ", ".join("--" + k for k in needed)
        )
    return ModelShape.model_validate(given), None, None


def pick_params(params: str | None, from_model: float | None, *, required: bool = True) -> float | None:
    """N from ``--params`` or from the ``--model`` preset; both at once is an error (the preset fixes N)."""
    from napkin import units

    n = parse_optional(units.parse_count, params, "--params")
    if from_model is not None:
        if n is not None:
            raise UsageError("give --params or --model, not both (the preset fixes the parameter count)")
        return from_model
    if n is None and required:
        raise UsageError("--params (or --model) is required")
    return n


def parse_optional(parser: Callable[[str, str], float], text: str | None, flag: str) -> float | None:
    return None if text is None else parser(text, flag)


__all__ = ["boundary", "build_shape", "emit", "fail", "load_hardware", "parse_optional", "pick_params", "warn"]
