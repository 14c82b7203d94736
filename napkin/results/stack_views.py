"""What ``napkin stack list|show`` answer, as results that render themselves (the stacks and their lookup
live in ``napkin.stack``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Final

from napkin.results.explain import Step, step
from napkin.results.result import ARBITRARY_TYPES, Result, TableResult, catalog_json, catalog_messages, fields
from napkin.systems.profiles import Catalog, Loaded
from napkin.systems.stack import Stack, value_paths


class StackList(TableResult):
    """Every stack profile napkin can see, where it comes from, and any invalid files."""

    model_config = ARBITRARY_TYPES
    title: ClassVar[str] = "Stack profiles"

    catalog: Catalog[Stack]

    def header(self) -> list[str]:
        return ["name", "attention", "DP sharding", "origin"]

    def body(self) -> list[list[str]]:
        rows = []
        shown = self.catalog.visible()  # by name within each origin (file order put '-moe.yaml' before '.yaml')
        first = {origin: i for i, origin in reversed(list(enumerate(loaded.origin for loaded in shown)))}
        for loaded in sorted(shown, key=lambda loaded: (first[loaded.origin], loaded.profile.name)):
            s = loaded.profile
            t = s.training
            if t is None:  # a serving stack
                rows.append([s.name, "(serving)", "", loaded.origin])
                continue
            rows.append([s.name, str(t.attention.kernel), ", ".join(t.parallelism.sharding), loaded.origin])
        rows += [[Path(b.path).stem, "", "", f"{b.origin} (INVALID)"] for b in self.catalog.broken]
        return rows

    def caption(self) -> str:
        return "what each software stack does and achieves; 'napkin stack show NAME' gives every value and its source"

    def secondary(self) -> tuple[int, ...]:
        return (3,)  # origin

    @classmethod
    def of(cls, catalog: Catalog[Stack]) -> StackList:
        return cls(catalog=catalog, **catalog_messages(catalog, "stack"))

    def to_json(self, explain: bool = False) -> Any:
        return catalog_json(self.catalog, "stacks")


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ", ".join(_text(v) for v in value) or "–"
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_text(v)}" for k, v in value.items()) or "–"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


#: The source shown for a serving value the profile leaves unset.
DEFAULT: Final = "napkin's default"


def _bytes(value: float) -> str:
    from napkin.units import format_bytes

    return format_bytes(value)


def stack_values(stack: Stack) -> list[tuple[str, str, str]]:
    """(path, value, source) of every training value of ``stack``, then every serving value."""
    out = []
    if stack.serving is not None:
        for path in value_paths(stack.serving):
            value: Any = stack.serving
            for part in path.split("."):
                value = getattr(value, part)
            shown = _bytes(value) if path.endswith("bytes") and isinstance(value, int | float) else _text(value)
            top = path.split(".")[0]
            given = top in stack.serving.model_fields_set or top == "engine"  # the engine is what the file is
            out.append((f"serving.{path}", shown, stack.covering(top) or ("" if given else DEFAULT)))
    t = stack.training
    if t is None:
        return out
    for path in value_paths(t):
        item: Any = t
        for part in path.split("."):
            item = getattr(item, part)
        out.append((path, _text(item), t.source_of(path) or ""))
    return out


class StackSheet(Result):
    """Every value of one stack with its source."""

    model_config = ARBITRARY_TYPES

    loaded: Loaded[Stack]

    def heading(self) -> str:
        return self.loaded.profile.display_name

    def _notes(self) -> dict[str, int]:
        """Each value's source text, numbered once in order of first use (a section shares one)."""
        notes: dict[str, int] = {}
        titles = {src.title for src in self.loaded.profile.sources}
        for _, _, source in stack_values(self.loaded.profile):
            if source and source not in titles and source != DEFAULT:
                notes.setdefault(source, len(notes) + 1)
        return notes

    def rows(self) -> list[tuple[str, str]]:
        s = self.loaded.profile
        rows = [("name", s.name), ("aliases", ", ".join(s.aliases) or "–"), ("version", s.version)]
        notes, titles = self._notes(), [src.title for src in s.sources]
        for path, value, source in stack_values(s):  # the source under the table, by its number
            mark = ""
            if source in titles:
                mark = f"  [{titles.index(source) + 1}]"
            elif source:
                mark = f"  ({DEFAULT})" if source == DEFAULT else f"  (note {notes[source]})"
            rows.append((path, value + mark))
        if s.notes:
            rows.append(("notes", s.notes))
        return rows

    def extras(self) -> list[Any]:
        from napkin.results import render

        sources, notes = self.loaded.profile.sources, self._notes()
        where = render.Links(f"file: {self.loaded.path} ({self.loaded.origin})\n")  # whole, never folded
        return [
            where,
            *([render.numbered("notes (where each value comes from)", list(notes), "{}.")] if notes else []),
            render.numbered("sources", [src.title for src in sources], "[{}]"),
            render.links([src.url for src in sources]),
        ]

    def to_json(self, explain: bool = False) -> Any:
        return fields(self.loaded.profile, origin=self.loaded.origin, path=self.loaded.path)


#: The training sections a step prediction reads, in the order ``--explain`` lists them.
STEP_SECTIONS: Final = (
    "attention",
    "matmul_efficiency",
    "elementwise",
    "recompute",
    "gradient_accumulation_fusion",
    "overlap",
    "collectives",
    "fp8",
    "memory",
    "step_overhead",
    "moe_host_per_expert",
    "context_parallel",
)


def explain_steps(
    stack: Stack, hardware: str, overridden: dict[str, bool] | None = None, sections: tuple[str, ...] = STEP_SECTIONS
) -> list[Step]:
    """One ``--explain`` step per section of the stack a prediction used: each value and its source (the
    attention efficiency that of ``hardware``); ``overridden``: switches given on the command line instead."""
    t = stack.trains()
    out = []
    for section in sections:
        paths = [p for p in value_paths(t) if p == section or p.startswith(section + ".")]
        if not paths:  # a section the stack leaves absent (napkin's generic model)
            continue
        values = []
        for path in paths:
            value: Any = t
            for part in path.split("."):
                value = getattr(value, part)
            if path == "attention.devices":
                if hardware in value:
                    values.append(f"on {hardware}: forward {value[hardware][0]:g}, backward {value[hardware][1]:g}")
                continue
            values.append(f"{path.removeprefix(section + '.')} = {_show(value)}")
        cited = list(dict.fromkeys(src for p in paths if (src := t.source_of(p))))
        for flag, value in (overridden or {}).items():
            if flag.split(".")[0] == section:
                values.append(f"{flag} = {_show(value)} given instead")
        out.append(
            step(
                f"stack {stack.name}: {section.replace('_', ' ')}",
                "the stack's value",
                "; ".join(values),
                "used",
                "; ".join(cited),
            )
        )
    return out


def _show(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


__all__ = ["StackList", "StackSheet", "explain_steps", "stack_values"]
