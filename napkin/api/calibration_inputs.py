"""The runs file of ``napkin calibrate``, read and checked: its top level (``read_runs``), each run's measured
step time (``measured``; two figures that disagree are inconsistent, one above the device's dense peak
impossible: ``check_possible``) and its ``layout:`` mapping (``layout_of``). Every error is a ``UsageError`` on
``runs_file`` whose message names the place in the file as the file spells it (``runs[2].step_seconds``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from napkin import units
from napkin.domain.base import Record
from napkin.errors import NapkinError, ProfileError, UsageError
from napkin.io.files import read_text

if TYPE_CHECKING:
    from napkin.domain.layout import Layout

MEASURES = ("step_seconds", "tokens_per_second", "tokens_per_second_per_gpu")
#: two measurements of one run that disagree by more than this are inconsistent
CONSISTENT = 0.01


def bad(message: str) -> UsageError:
    """An error in the runs file: the input at fault is ``runs_file``, and the message names the place in it as
    the file spells it (``runs[2].step_seconds``), which the command line shows as it is."""
    return UsageError(message, field="runs_file")


class Spec(Record):
    """The runs file's top level."""

    model_config = {"extra": "forbid"}  # noqa: RUF012
    stack: str | None = None
    name: str | None = None
    fit: list[str] | None = None
    runs: list[dict[str, Any]]


def read_runs(path: str | Path) -> tuple[Spec, str]:
    """The runs file, parsed (YAML, no anchors) and checked at the top level; errors name the field."""
    from pydantic import ValidationError

    from napkin.io.yamlio import parse

    try:
        text = read_text(Path(path).expanduser())
    except NapkinError as exc:
        raise UsageError(f"runs_file: {exc}", field="runs_file") from None
    try:
        data, _ = parse(text, str(path))
    except ProfileError as exc:
        raise UsageError(f"runs_file: {exc}", field="runs_file") from None
    if not isinstance(data, dict):
        raise UsageError(
            f"runs_file: {path} must be a YAML mapping with 'runs:' (and 'stack', 'name', 'fit')", field="runs_file"
        )
    try:
        return Spec.model_validate(data), str(path)
    except ValidationError as exc:
        error = exc.errors()[0]
        loc = [str(p) for p in error["loc"]]
        where = (loc[0] + "".join(f"[{p}]" for p in loc[1:])) if loc else "(top level)"
        given = _shown(error.get("input"))
        message = {
            "extra_forbidden": "unknown field; use stack, name, fit, runs",
            "missing": f"missing in {path}: a list of measured runs, each napkin step's keywords and step_seconds, "
            "tokens_per_second or tokens_per_second_per_gpu",
            "list_type": f"{given} is not a list; write "
            + ("runs: with one '- ' item per run" if loc[:1] == ["runs"] else "fit: [matmul_efficiency]"),
            "dict_type": f"{given} is not a run: a mapping of napkin step's keywords (model: …, gpus: …)",
            "string_type": f"{given} is not a name"
            + ("; write fit: [matmul_efficiency]" if loc[:1] == ["fit"] else ", such as torchtitan or my-titan"),
        }.get(error["type"], error["msg"])
        raise bad(f"{where}: {message}") from None


def measured(run: dict[str, Any], i: int, tokens: float, gpus: int) -> float:
    """Seconds per step from what the run gives; two that disagree are inconsistent."""
    given = {k: run[k] for k in MEASURES if k in run}
    if not given:
        raise bad(f"runs[{i}]: give step_seconds, tokens_per_second or tokens_per_second_per_gpu")
    seconds = []
    for key, written in given.items():
        field = f"runs[{i}].{key}"
        if isinstance(written, bool) or not isinstance(written, int | float | str):
            raise bad(f"{field}: {written!r} must be a positive finite number")
        try:  # as the command line reads it: YAML 1.1 leaves 6.5e3 (no dot) as text
            value = (units.parse_duration if key == "step_seconds" else units.parse_count)(written, field)
        except UsageError as exc:
            raise bad(str(exc)) from None
        per_step = {
            "step_seconds": value,
            "tokens_per_second": tokens / value,
            "tokens_per_second_per_gpu": tokens / (value * gpus),
        }[key]
        seconds.append((key, per_step))
    first = seconds[0]
    for key, value in seconds[1:]:
        if abs(value / first[1] - 1) > CONSISTENT:
            raise bad(
                f"runs[{i}].{key}: gives {value:.4g} s per step but {first[0]} gives {first[1]:.4g} s "
                f"({tokens:,.0f} tokens per step); they disagree"
            )
    return first[1]


def layout_of(given: dict[str, Any], where: str, notes: list[str]) -> Layout:
    """A run's ``layout:`` mapping (a ``Layout``'s fields, as ``napkin step --json`` writes them) as a ``Layout``;
    a field by its old name is read with a note naming the new one, and refused when the new one is there too."""
    from pydantic import ValidationError

    from napkin.domain.layout import Layout, renamed

    try:
        fields, said = renamed(given)
        layout = Layout.model_validate(fields)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join([where, *(str(p) for p in error["loc"])])
        raise bad(f"{field}: {error['msg'].removeprefix('Value error, ')}") from None
    except ValueError as exc:
        raise bad(f"{where}.{exc}") from None
    notes.extend(f"{where}: {note}" for note in said)
    return layout


def check_possible(run: dict[str, Any], i: int, sm: Any, knobs: Any, seconds: float) -> None:
    """A measurement faster than the run's model FLOPs at the device's dense peak (MFU above 1) is a typo or a
    mismatched layout, not something a fit can explain: name it."""
    gpus = knobs.layout().gpus
    mfu = sm.batch * sm.seq * sm.model_flops_per_token() / (gpus * sm.hw.peak * seconds)
    if mfu > 1:
        key = next(k for k in MEASURES if k in run)
        raise bad(
            f"runs[{i}].{key}: {run[key]} would be MFU {mfu:.3g} on {gpus:,} × {sm.hw.name} (more than the dense "
            "peak); check the figure, its unit and the run's layout"
        )


__all__ = ["CONSISTENT", "MEASURES", "Spec", "bad", "check_possible", "layout_of", "measured", "read_runs"]


def _shown(value: Any) -> str:
    """``value`` as an error quotes it: short, one line."""
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"
