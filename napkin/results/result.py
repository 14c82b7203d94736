"""The base of every answer napkin gives: a pydantic model that renders itself.

A result holds its numbers in base units (FLOP, bytes, seconds) and knows how to show them: ``rows()``
(the table), ``title``/``caption``, ``warnings``, the derivation ``steps`` (``explain()``), and the three
displays — ``__rich__`` (the terminal table the CLI prints), ``_repr_html_`` (the same table in a notebook)
and a one-line ``__repr__``. ``to_json()`` is what ``--json`` prints. rich is imported only when a result is
displayed, never at import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from napkin.domain.base import Record
from napkin.results.explain import Step

if TYPE_CHECKING:
    from napkin.systems.profiles import BrokenProfile, Catalog

#: For results that hold the catalog's own objects (loaded profiles and clusters) as they are.
ARBITRARY_TYPES = ConfigDict(arbitrary_types_allowed=True)


def fields(item: BaseModel, **extra: Any) -> dict[str, Any]:
    """A profile or cluster as ``--json`` prints it: ``extra`` first (origin, path), then its own fields in base
    units, unset ones left out."""
    return {**extra, **item.model_dump(mode="json", exclude_none=True)}


def broken(file: BrokenProfile) -> dict[str, str]:
    """An invalid profile or cluster file (``napkin.systems.profiles.BrokenProfile``) as ``--json`` lists it."""
    return {"origin": file.origin, "path": file.path, "error": file.error}


def catalog_messages(catalog: Catalog[Any], what: str = "profile") -> dict[str, list[str]]:
    """What a list of a catalog says besides its table: invalid files and names claimed twice as warnings (never
    silent), replaced built-ins as notes."""
    return {
        "warnings": [f"invalid {what} (ignored): {b.error}" for b in catalog.broken] + list(catalog.conflicts),
        "notes": [
            f"the built-in {p.profile.name} ({p.path}) is replaced by your profile of the same name"
            for p in catalog.replaced
        ],
    }


def catalog_json(catalog: Catalog[Any], key: str) -> dict[str, Any]:
    """A catalog as ``--json`` lists it: the visible profiles under ``key``, the shadowed, the conflicts, the
    invalid files."""
    return {
        key: [fields(p.profile, origin=p.origin, path=p.path) for p in catalog.visible()],
        "shadowed": [{"name": p.profile.name, "origin": p.origin, "path": p.path} for p in catalog.replaced],
        "conflicts": catalog.conflicts,
        "invalid": [broken(b) for b in catalog.broken],
    }


class Result(Record):
    """Numbers in base units, plus how to show them."""

    title: ClassVar[str] = "Result"
    #: fields whose value is the one-line summary (``__repr__``)
    headline: ClassVar[tuple[str, ...]] = ()

    warnings: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list, description="information that is neither result nor warning")
    steps: list[Step] = Field(default_factory=list, description="the derivation: formula, numbers, source")

    # --- what a table shows --------------------------------------------------------------------
    def heading(self) -> str:
        return self.title

    def rows(self) -> list[tuple[str, str]]:
        """(quantity, value) pairs, values formatted with their units."""
        return []

    def caption(self) -> str | None:
        return None

    def extras(self) -> list[Any]:
        """Renderables shown under the table (a memory bar, a second table)."""
        return []

    def renderables(self) -> list[Any]:
        from napkin.results import render

        return [render.key_values(self.heading(), self.rows(), caption=self.caption()), *self.extras()]

    def exit_code(self) -> int:
        """What the command exits with after showing the result: 0, or 1 for an answer of "none" (nothing
        fits, nothing measured, a check failed); bad input never gets this far (exit 2)."""
        return 0

    # --- displays ------------------------------------------------------------------------------
    def __rich__(self) -> Any:
        from rich.console import Group

        return Group(*self.renderables())

    def explain(self) -> str:
        """The derivation as plain text: each formula, the numbers put in, the result and its source."""
        from napkin.results import render

        return render.plain(render.explanation(self.steps, columns=100))

    def _repr_html_(self) -> str:
        from napkin.results import render

        return render.html(self.renderables())

    def __repr__(self) -> str:
        parts = [f"{name}={_short(getattr(self, name))}" for name in self.headline]
        return f"{type(self).__name__}({', '.join(parts)})"

    __str__ = __repr__

    def to_json(self, explain: bool = False) -> Any:
        """Base units; ``steps`` only with ``explain``."""
        data = self.model_dump(mode="json", exclude=None if explain else {"steps"})
        return {
            **{k: v for k, v in data.items() if k not in ("warnings", "notes", "steps")},
            **{k: data[k] for k in ("warnings", "steps") if k in data},
        }


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return repr(value)


class TableResult(Result):
    """A result shown as one grid with a header row (models, optimizers, dtypes, comparisons)."""

    def header(self) -> list[str]:
        return []

    def body(self) -> list[list[str]]:
        return []

    def align(self) -> str:
        return ""

    def secondary(self) -> tuple[int, ...]:
        """Columns that give way first on a narrow terminal, and are dropped (last first) if nothing else fits."""
        return ()

    def renderables(self) -> list[Any]:
        from napkin.results import render

        grid = render.grid(
            self.heading(),
            self.header(),
            self.body(),
            caption=self.caption(),
            align=self.align(),
            secondary=self.secondary(),
        )
        return [grid, *self.extras()]


class ModelResult(Result):
    """A result whose numbers depend on a model and a sequence length: it names both, and where the length
    came from (given, or a preset's training length; a config.json never supplies one)."""

    model: str | None = Field(default=None, description="the preset, Hub id or config the model came from")
    seq: int | None = Field(default=None, description="sequence length in tokens, when the numbers depend on it")
    seq_source: str | None = Field(default=None, description="where seq came from: given, or a preset's default")

    def input_rows(self) -> list[tuple[str, str]]:
        """The model and sequence rows, shown above the result's own."""
        rows = [("model", self.model)] if self.model else []
        if self.seq is not None:
            rows.append(("sequence", f"{self.seq:,} tokens ({self.seq_source or 'given'})"))
        return rows

    def renderables(self) -> list[Any]:
        from napkin.results import render

        table = render.key_values(self.heading(), [*self.input_rows(), *self.rows()], caption=self.caption())
        return [table, *self.extras()]
