"""``napkin models``: the model presets as a table."""

from __future__ import annotations

from typing import Any, ClassVar

from napkin.errors import ProfileError
from napkin.results.result import TableResult
from napkin.systems.presets import ModelPreset, load_catalog
from napkin.units import format_count


class ModelTable(TableResult):
    """``napkin models``: the presets usable as ``model=``/``--model``."""

    title: ClassVar[str] = "Model presets"

    presets: list[ModelPreset]

    def header(self) -> list[str]:
        return ["name", "params", "published", "active", "L", "d", "heads", "seq", "description"]

    def body(self) -> list[list[str]]:
        return [
            [
                p.name,
                format_count(p.params),
                format_count(p.published_params),
                format_count(p.active_params),
                str(p.model.layers),
                str(p.model.hidden),
                str(p.model.heads or "–"),
                str(p.seq),
                p.description,
            ]
            for p in self.presets
        ]

    def align(self) -> str:
        return "lrrrrrrrl"

    def caption(self) -> str:
        return (
            "params: computed from the architecture (what napkin uses); published: the paper's own figure; "
            "MoE: compute uses active, memory total"
        )

    def secondary(self) -> tuple[int, ...]:
        return (2, 8)  # published, description

    def to_json(self, explain: bool = False) -> Any:
        return [
            {
                "name": p.name,
                "params": p.params,
                "active_params": p.active_params,
                "published_params": p.published_params,
                "description": p.description,
                "source": p.source,
                "seq": p.seq,
                "model": p.model.model_dump(mode="json"),
            }
            for p in self.presets
        ]


def models() -> ModelTable:
    """The model presets, with parameters computed from each architecture; unreadable files are the table's
    warnings, a name given twice an error."""
    found = load_catalog()
    if found.conflicts:  # the list would leave a name out: as for --model NAME, an error naming both files
        raise ProfileError("; ".join(found.conflicts.values()))
    return ModelTable(presets=list(found.presets.values()), warnings=found.problems())
