"""What every profile file is made of: quantities with their units (``Bytes``, ``FlopsPerSecond``), slugs,
sources, the ``Profile`` base (a record that says where it came from) and ``parse_as``, the one YAML reader."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, Any, Final, Self, TypeVar

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    WithJsonSchema,
)

from napkin import units
from napkin.domain.base import Record
from napkin.errors import NapkinError, ProfileError
from napkin.io.yamlio import parse, validated

_ZERO = re.compile(r"\s*0*\.?0+\s*[A-Za-z/]*\s*")  # 0, 0.0, "0 GB", "0 GiB": none of anything


def _quantity(parser: Any, kind: str, example: str, *, zero: bool = False) -> Any:
    """A pydantic annotation: a positive number in base units, or a string with a unit (or none at all, 0,
    where ``zero``)."""

    def validate(value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ValueError(f"expected a number or a string with a unit, such as {example!r}")
        if zero and (value == 0 if not isinstance(value, str) else _ZERO.fullmatch(value) is not None):
            return 0.0
        try:
            result: float = parser(value, kind)
        except NapkinError as exc:
            raise ValueError(str(exc).removeprefix(f"{kind}: ")) from None
        return result

    schema = {
        "anyOf": [
            {"type": "number", "minimum": 0} if zero else {"type": "number", "exclusiveMinimum": 0},
            {"type": "string", "pattern": r"^\s*[0-9.eE_+-]+\s*[A-Za-z/]*\s*$"},
        ],
        "description": f"{kind}: a number in base units or a string with a unit, e.g. {example!r}",
    }
    return [BeforeValidator(validate), WithJsonSchema(schema)]


Bytes = Annotated[float, *_quantity(units.parse_bytes, "bytes", "80 GB")]
BytesOrZero = Annotated[float, *_quantity(units.parse_bytes, "bytes", "1.5 GiB", zero=True)]
BytesPerSecond = Annotated[float, *_quantity(units.parse_bandwidth, "bandwidth", "3.35 TB/s")]
FlopsPerSecond = Annotated[float, *_quantity(units.parse_rate, "FLOP/s", "989.5 TFLOP/s")]
Watts = Annotated[float, *_quantity(units.parse_power, "power", "700 W")]

STRICT = ConfigDict(extra="forbid", frozen=True, validate_default=True)


SLUG_RULE: Final = "use lower-case letters, digits, '.', '_' and '-', e.g. 'my-h100'"


def is_slug(value: str) -> bool:
    """A valid profile name (it is also the file name)."""
    return re.fullmatch(r"[a-z0-9][a-z0-9._-]*", value) is not None


def _check_slug(value: str) -> str:
    if not is_slug(value):
        raise ValueError(SLUG_RULE)
    return value


Slug = Annotated[str, AfterValidator(_check_slug)]


class Source(Record):
    """Where a set of numbers comes from: a datasheet or whitepaper."""

    model_config = STRICT
    title: str = Field(min_length=3)
    url: str = Field(pattern=r"^(https?://|file:|doc:)")
    covers: str | None = Field(default=None, description="which figures this source gives")


class Profile(Record):
    """A record the catalog serves (hardware, stacks, clusters, model presets), with what a command should say
    about where it came from (``origin_notes``: a built-in it replaces, saved measurements it ignores, a file
    skipped on the way). The notes travel with the profile into the results built from it (``api.inputs.said``),
    never through a module; they are not a field of the file and never in its JSON."""

    _origin_notes: tuple[str, ...] = PrivateAttr(default=())

    @property
    def origin_notes(self) -> tuple[str, ...]:
        return self._origin_notes

    def told(self, notes: Iterable[str]) -> Self:
        """This profile, also saying ``notes`` about its origin (a copy: parsed profiles are shared)."""
        said = tuple(dict.fromkeys((*self._origin_notes, *notes)))
        if said == self._origin_notes:
            return self
        copy = self.model_copy()
        copy._origin_notes = said
        return copy


R = TypeVar("R", bound=Record)


def parse_as(model: type[R], text: str, label: str, noun: str, marker: str) -> R:
    """One profile file's YAML validated as ``model``; a mapping with neither ``name`` nor ``marker`` is not a
    napkin ``noun`` profile at all. Errors name the file, the line and the field (never a value)."""
    data, _ = parse(text, label)
    if isinstance(data, dict) and "name" not in data and marker not in data:
        raise ProfileError(f"{label}: not a napkin {noun} profile (it has no 'name' and no '{marker}' field)")
    return validated(model, text, label, noun)
