"""Model presets (``--model NAME``), shipped as data in ``napkin/data/models.yaml``."""

from __future__ import annotations

import difflib
from functools import cache
from importlib.resources import files

from pydantic import ConfigDict, Field, ValidationError

from napkin.base import Record
from napkin.errors import ProfileError, UsageError
from napkin.profiles import normalize, read_yaml, validation_messages
from napkin.transformer import ModelShape


class ModelPreset(Record):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str
    source: str
    published_params: float = Field(gt=0)
    shape: ModelShape

    @property
    def params(self) -> int:
        """Total parameters (what memory needs)."""
        return self.shape.params()

    @property
    def active_params(self) -> int:
        """Parameters used per token (what compute needs; differs for MoE)."""
        return self.shape.active_params()


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
    raise UsageError(f"--model: unknown model {name!r}; {hint}known: {', '.join(presets)} (see 'napkin models')")
