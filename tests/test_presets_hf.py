"""The MoE presets napkin's validation runs use (Qwen3-30B-A3B, Qwen3-235B-A22B, gpt-oss-120b, gpt-oss-20b) are their
released config.json files: each preset builds exactly the Model napkin reads from the config (tests/data/hf_configs,
sources in SOURCES.md), and its totals are the published ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from napkin.domain.hf_config import read_config
from napkin.systems.presets import get_preset

DATA = Path(__file__).parent / "data" / "hf_configs"

#: preset → (published total, published active, where published). Each within the last digit the authors wrote: ±half
#: of it where they round; Qwen writes 3.353B active as "3.3B" (cut, not rounded), so the active count may be a whole
#: last digit above its figure (and 30.53B total as "30.5B", 235.09B as "235B", 22.19B as "22B")
PUBLISHED: dict[str, tuple[float, float, str]] = {
    "qwen3-30b-a3b": (30.5e9, 3.3e9, "Qwen/Qwen3-30B-A3B model card: 30.5B in total, 3.3B activated"),
    "qwen3-235b-a22b": (235e9, 22e9, "Qwen/Qwen3-235B-A22B model card: 235B in total, 22B activated"),
    "gpt-oss-120b": (116.83e9, 5.13e9, "OpenAI 2025, gpt-oss model card arXiv:2508.10925 Table 1"),
    "gpt-oss-20b": (20.91e9, 3.61e9, "gpt-oss model card Table 1"),
}
#: the last digit each source writes: 0.1B and 1B (Qwen's cards), 0.01B (OpenAI's Table 1)
DIGIT: dict[str, float] = {
    "qwen3-30b-a3b": 0.1e9,
    "qwen3-235b-a22b": 1e9,
    "gpt-oss-120b": 0.01e9,
    "gpt-oss-20b": 0.01e9,
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_the_preset_is_its_config_json(name: str) -> None:
    data = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
    preset, read = get_preset(name).model, read_config(data).model
    assert preset.model_dump() == read.model_dump()  # every field, named: a difference shows which
    assert (preset.params(), preset.active_params()) == (read.params(), read.active_params())


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_the_preset_has_the_published_totals(name: str) -> None:
    total, active, _ = PUBLISHED[name]
    digit, preset = DIGIT[name], get_preset(name)
    cut = name.startswith("qwen3")  # Qwen cuts its last digit; OpenAI rounds its
    above = digit if cut else digit / 2
    assert total - digit / 2 <= preset.params < total + above
    assert preset.published_params == total
    if name.startswith("gpt-oss"):
        # OpenAI counts the unembedding as active but not the embedding table (a lookup): its 5.13B / 3.61B are
        # napkin's active count less vocab × d (201,088 × 2,880 = 0.58B); napkin counts the table, as Mixtral's and
        # Qwen's published active counts do
        active += preset.model.vocab * preset.model.hidden
    assert active - digit / 2 <= preset.active_params < active + above
