"""Model presets (``--model NAME``), shipped as data in ``napkin/data/models.yaml``."""

from __future__ import annotations

import difflib
from functools import cache
from importlib.resources import files
from typing import Any, ClassVar

from pydantic import ConfigDict, Field, ValidationError

from napkin.base import Record
from napkin.errors import ProfileError, UsageError
from napkin.model import Model
from napkin.profiles import normalize, read_yaml, validation_messages
from napkin.result import TableResult
from napkin.units import format_count


class ModelPreset(Record):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str
    source: str
    published_params: float = Field(gt=0)
    seq: int = Field(gt=0, description="training sequence length: the default workload's seq")
    model: Model

    @property
    def params(self) -> int:
        """Total parameters (what memory needs)."""
        return self.model.params()

    @property
    def active_params(self) -> int:
        """Parameters used per token (what compute needs; differs for MoE)."""
        return self.model.active_params()


class ModelTable(TableResult):
    """``napkin models``: the presets usable as ``model=``/``--model``."""

    title: ClassVar[str] = "Model presets"

    presets: list[ModelPreset]

    def header(self) -> list[str]:
        return ["name", "params", "active", "L", "d", "heads", "seq", "description"]

    def body(self) -> list[list[str]]:
        return [
            [p.name, format_count(p.params), format_count(p.active_params), str(p.model.layers),
             str(p.model.hidden), str(p.model.heads or "–"), str(p.seq), p.description]
            for p in self.presets
        ]  # fmt: skip

    def caption(self) -> str:
        return "params computed from the architecture; MoE: compute uses active, memory total"

    def to_json(self, explain: bool = False) -> Any:
        return [
            {"name": p.name, "params": p.params, "active_params": p.active_params,
             "published_params": p.published_params, "description": p.description, "source": p.source,
             "seq": p.seq, "model": p.model.model_dump(mode="json")}
            for p in self.presets
        ]  # fmt: skip


def models() -> ModelTable:
    """The model presets, with parameters computed from each architecture."""
    return ModelTable(presets=list(load_presets().values()))


@cache
def load_presets() -> dict[str, ModelPreset]:
    label = "<built-in>/models.yaml"
    data, node = read_yaml((files("napkin") / "data" / "models.yaml").read_text(encoding="utf-8"), label)
    presets = {}
    for name, body in data.items():
        try:
            presets[name] = ModelPreset.model_validate({"name": name, **body})
        except ValidationError as exc:
            raise ProfileError("; ".join(validation_messages(exc, node, label))) from None
    return presets


def get_preset(name: str) -> ModelPreset:
    presets = load_presets()
    by_key = {normalize(key): preset for key, preset in presets.items()}
    found = by_key.get(normalize(name))
    if found is not None:
        return found
    close = difflib.get_close_matches(name, list(presets), n=3, cutoff=0.3)
    hint = f"closest: {', '.join(close)}; " if close else ""
    raise UsageError(
        f"model: unknown preset {name!r}; {hint}known: {', '.join(presets)} (see 'napkin models')", field="model"
    )
