"""The model a question is given, and its sequence length: a preset, a ``Model``, a Hugging Face config (a
path, a folder or a Hub id) with shape keywords over it; the length given or a preset's, never guessed; and
results that say both."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from napkin import units
from napkin.api.inputs import LENGTH_FIELDS, SHAPE_FIELDS, Number, T, first_error, optional, parse, textual
from napkin.errors import UsageError

if TYPE_CHECKING:  # imported where used (start-up time)
    from napkin.domain.model import Model
    from napkin.results.explain import Step


@dataclass(frozen=True)
class Chosen:
    """The model a question was given: its architecture, its name, the sequence length it brings (a preset's
    training length; a config.json brings none) and what reading it assumed."""

    model: Model | None = None
    name: str | None = None
    seq: int | None = None
    seq_source: str | None = None
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


def build_model(model: str | Model | None = None, model_config: str | Path | None = None, **shape: Any) -> Chosen:
    """The architecture from a preset name, a ``Model``, a Hugging Face config (``model_config``: a config.json
    or a model folder; ``model`` may also be one, or a Hub id ``org/name``) and/or shape keywords (which override
    the preset's or the config's values)."""
    from napkin.domain.model import Model

    unknown = set(shape) - set(SHAPE_FIELDS)
    if unknown:
        raise TypeError(f"got an unexpected keyword argument {sorted(unknown)[0]!r}")
    given = {
        k: (parse(units.parse_length, v, k) if k in LENGTH_FIELDS else v) for k, v in shape.items() if v is not None
    }
    if model is not None and model_config is not None:
        raise UsageError("give model or model_config, not both", field="model_config", also=("model",))
    if model is not None and not isinstance(model, Model | str):
        raise UsageError(f"model: {model!r} is not a preset name (such as 'llama3-8b') or a Model", field="model")
    if model_config is not None:
        textual(model_config, "model_config", "a path to a Hugging Face config.json", path=True)
    base: dict[str, Any] = {}
    chosen = Chosen(name="custom")
    if isinstance(model, Model):
        base = model.model_dump(exclude_unset=True)
    elif model is not None or model_config is not None:
        chosen = _named_model(model, model_config)
        assert chosen.model is not None
        base = chosen.model.model_dump(exclude_unset=True)
    elif not given:
        return Chosen()
    merged = {**base, **given}
    missing = [k for k in ("layers", "hidden") if k not in merged]
    if missing:
        raise UsageError(
            "a shape needs layers and hidden (or model, model_config); missing: " + ", ".join(missing),
            field=missing[0],
            also=("layers", "hidden", "model", "model_config"),
        )
    try:
        arch = Model.model_validate(merged)
    except ValueError as exc:  # the validator names the shape's fields: the CLI writes them as flags
        raise UsageError(first_error(exc), field="model", also=SHAPE_FIELDS) from None
    name = chosen.name if not given or chosen.name == "custom" else f"{chosen.name} (modified)"
    return Chosen(arch, name, chosen.seq, chosen.seq_source, chosen.notes, chosen.warnings)


def _named_model(model: str | None, model_config: str | Path | None) -> Chosen:
    """A preset by name, or a Hugging Face config by path, folder or Hub id."""
    from napkin.io.hf_files import is_source  # a preset's name needs no Hugging Face reader (start-up time)

    if model is not None and not is_source(model) and not Path(model).exists():
        from napkin.systems.presets import get_preset

        preset = get_preset(model)
        return Chosen(
            preset.model, preset.name, preset.seq, f"the {preset.name} preset's training length", preset.origin_notes
        )
    from napkin.systems.hf_source import load

    # model_config is read locally (a Hub id goes to model)
    read = load(model, field="model") if model is not None else load(str(model_config), "model_config", hub=False)
    return Chosen(read.model, read.name, notes=tuple(read.notes), warnings=tuple(read.warnings))


def resolve_params(
    params: Number | None, arch: Model | None, *, active: bool, required: bool = True, named: bool = True
) -> float | None:
    """N from ``params`` or from the model (active parameters for compute); both at once is an error when
    the model is ``named`` (a preset, a config or a ``Model``): shape keywords alone leave N to ``params``."""
    n = optional(units.parse_count, params, "params")
    if arch is not None and (named or n is None):
        if n is not None:
            raise UsageError(
                "give params or model, not both (the preset fixes the parameter count)", field="params", also=("model",)
            )
        return float(arch.active_params() if active else arch.params())
    if n is None and required:
        raise UsageError("params (or model) is required", field="params", also=("model",))
    return n


def named_preset(model: object, model_config: object) -> bool:
    return model is not None or model_config is not None


def resolve_seq(seq: Number | None, chosen: Chosen, *, needed_for: str | None = None) -> tuple[int | None, str | None]:
    """(sequence length, where it came from): ``seq`` as given, else a preset's training length; never a
    config's max_position_embeddings (the longest context it allows, not a length anyone trains at). With a
    model and ``needed_for`` (what depends on it) a missing one is a ``UsageError``."""
    length = optional(units.parse_length, seq, "seq")
    if length is not None:
        return length, "given"
    if chosen.seq is not None:
        return chosen.seq, chosen.seq_source
    if needed_for is not None and chosen.model is not None:
        context = chosen.model.context
        longest = f" (its {context:,}-token context is the longest it allows, not a training length)" if context else ""
        raise UsageError(
            f"seq is required: {needed_for} depends on it, and {chosen.name or 'this model'} brings no default "
            f"sequence length{longest}; presets bring their training length",
            field="seq",
        )
    return None, None


def seq_step(seq: int, seq_source: str | None) -> Step:
    """The --explain step saying the sequence length and where it came from (given, or a preset's training
    length)."""
    from napkin.results.explain import step

    origin = "given" if seq_source in (None, "given") else f"{seq_source} (napkin/data/models.yaml)"
    return step("sequence length", "s", f"{seq:,}", f"{seq:,} tokens", origin)


def described(result: T, chosen: Chosen, seq: int | None = None, seq_source: str | None = None) -> T:
    """``result`` naming its model and sequence length (rows, JSON, and a first --explain step for the length),
    with what reading the model's config assumed among its notes."""
    from napkin.results.result import ModelResult

    if isinstance(result, ModelResult):
        result.model = chosen.name if chosen.model is not None else None
        result.seq, result.seq_source = seq, seq_source
        if seq is not None:
            result.steps.insert(0, seq_step(seq, seq_source))
            result.warnings += beyond_context(seq, chosen.model.context if chosen.model is not None else None)
    for kind in ("notes", "warnings"):
        told = getattr(result, kind, None)
        if isinstance(told, list):
            told[:0] = list(getattr(chosen, kind))
    return result


def beyond_context(seq: int, context: int | None) -> list[str]:
    """The warning for a sequence longer than the model's context (as inference warns for its own), or none."""
    return [f"seq {seq:,} is longer than the model's {context:,}-token context"] if context and seq > context else []
