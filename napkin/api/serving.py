"""Inference questions: KV cache and serving speed."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from napkin import units
from napkin.api.inputs import (
    SHAPE_FIELDS,
    build_model,
    choice,
    fabric_of,
    get_hardware,
    keywords,
    optional,
    parse,
    reserve_of,
    usable_capacity,
)
from napkin.errors import UsageError

if TYPE_CHECKING:  # imported where used: a command pays only for the objects it builds (startup time)
    from napkin.domain.model import Model
    from napkin.systems.profiles import HardwareProfile

from napkin.api.inputs import Number


def _serving_model(
    model: str | Model | None, model_config: str | Path | None, shape: dict[str, Any]
) -> tuple[str, Model, tuple[str, ...]]:
    chosen = build_model(model, model_config, **shape)
    arch = chosen.model
    if arch is None:
        raise UsageError(
            "model is required (a preset, model_config, or layers and hidden)", field="model", also=("model_config",)
        )
    return chosen.name or "model", arch, chosen.notes + chosen.warnings


def _block(block_size: Number | None, paged: bool) -> int | None:
    from napkin.engines.serving import VLLM_BLOCK

    size = optional(units.parse_int, block_size, "block_size")
    if size is not None and size < 1:
        raise UsageError(f"block_size: {block_size!r} must be at least 1 token", field="block_size")
    return size if size is not None else VLLM_BLOCK if paged else None


def _tensor(gpus: Number, tensor_parallel: Number | None, arch: Model) -> tuple[int, int]:
    g = parse(units.parse_int, gpus, "gpus")
    t = g if tensor_parallel is None else parse(units.parse_int, tensor_parallel, "tensor_parallel")
    if g < 1 or t < 1:
        raise UsageError("gpus and tensor_parallel must be at least 1", field="gpus", also=("tensor_parallel",))
    if g % t:
        raise UsageError(
            f"gpus ({g}) is not a multiple of tensor_parallel ({t})", field="gpus", also=("tensor_parallel",)
        )
    if arch.heads is not None and arch.heads % t:
        raise UsageError(f"tensor_parallel ({t}) must divide the model's heads ({arch.heads})", field="tensor_parallel")
    return g, t


@keywords(SHAPE_FIELDS)
def kv_cache(
    *,
    model: str | Model | None = None,
    model_config: str | Path | None = None,
    context: Number | None = None,
    batch: Number = 1,
    kv_dtype: str = "bf16",
    block_size: Number | None = None,
    paged: bool = False,
    tensor_parallel: Number = 1,
    **shape: Any,
) -> Any:
    """KV-cache bytes: 2·L·n_kv·d_h per token (MLA: L·(d_c + d_h^R)) × context × batch, per GPU under TP."""
    from napkin.engines.serving import KvDtype
    from napkin.engines.serving import kv_cache as engine

    name, arch, notes = _serving_model(model, model_config, shape)
    _, t = _tensor(tensor_parallel, tensor_parallel, arch)
    length = _context(context, arch)
    b = _positive(batch, "batch")
    result = engine(name, arch, length, b, choice(KvDtype, kv_dtype, "kv_dtype"), _block(block_size, paged), t)
    result.notes[:0] = list(notes)
    return result


def _positive(value: Number, field: str) -> int:
    n = parse(units.parse_int, value, field)
    if n < 1:
        raise UsageError(f"{field}: {value!r} must be at least 1", field=field)
    return n


def _context(context: Number | None, arch: Model) -> int:
    length = optional(units.parse_length, context, "context") or arch.context
    if length is None:
        raise UsageError("context is required (this model has no default context length)", field="context")
    if length < 1:
        raise UsageError(f"context: {context!r} must be at least 1 token", field="context")
    return length


@keywords(SHAPE_FIELDS)
def inference(
    *,
    model: str | Model | None = None,
    model_config: str | Path | None = None,
    gpus: Number = 1,
    tensor_parallel: Number | None = None,
    hardware: str | HardwareProfile | None = None,
    hardware_file: str | Path | None = None,
    context: Number | None = None,
    batch: Number = 1,
    prompt: Number | None = None,
    output: Number | None = None,
    weights: str = "bf16",
    kv_dtype: str = "bf16",
    block_size: Number | None = None,
    paged: bool = False,
    efficiency: Number | None = None,
    reserve: Number | None = None,
    chunk: Number | None = None,
    price: Number | None = None,
    **shape: Any,
) -> Any:
    """Serving on ``gpus`` GPUs (TP groups of ``tensor_parallel``, default all): weights, KV cache, max batch,
    TTFT, decode step by roofline, tokens/s and $/1M tokens. ``context`` = prompt + output tokens per sequence."""
    from napkin.engines.serving import CHUNK_TOKENS, DEFAULT_EFFICIENCY, DEFAULT_RESERVE, KvDtype, Serving, WeightFormat
    from napkin.engines.serving import serve as engine

    name, arch, notes = _serving_model(model, model_config, shape)
    g, t = _tensor(gpus, tensor_parallel, arch)
    p = optional(units.parse_length, prompt, "prompt")
    o = optional(units.parse_length, output, "output")
    length = optional(units.parse_length, context, "context")
    if length is None and p is not None and o is not None:
        length = p + o
    length = _context(length, arch)
    given = [name for name, v in (("prompt", p), ("output", o)) if v is not None]
    o = o if o is not None else min(512, length // 2) if p is None else length - p
    p = p if p is not None else length - o
    if p < 1 or o < 1 or p + o > length:
        told = " + ".join(f"{name} ({p if name == 'prompt' else o:,})" for name in given)
        raise UsageError(
            f"{told} does not fit in context ({length:,}) with at least 1 token each to read and to generate",
            field=given[0],
            also=("context", *given[1:]),
        )
    profile = get_hardware(hardware, hardware_file)
    fmt = choice(WeightFormat, weights, "weights")
    from napkin.engines.serving import compute_dtype

    if profile.peak_if_known(compute_dtype(fmt)) is None:
        raise UsageError(
            f"weights: {profile.name} has no {compute_dtype(fmt)} peak for {fmt} weights; "
            f"it has {', '.join(profile.peak_flops)}",
            field="weights",
        )
    eff = DEFAULT_EFFICIENCY if efficiency is None else parse(units.parse_fraction, efficiency, "efficiency")
    if eff <= 0:
        raise UsageError(f"efficiency: {efficiency!r} must be above 0", field="efficiency")
    price_value = optional(units.parse_number, price, "price")
    if price_value is not None and price_value <= 0:
        raise UsageError(f"price: {price!r} must be a positive USD per GPU-hour", field="price")
    settings = Serving(
        weights_format=fmt,
        kv_dtype=choice(KvDtype, kv_dtype, "kv_dtype"),
        block_size=_block(block_size, paged),
        efficiency=eff,
        reserve_bytes=reserve_of(reserve if reserve is not None else DEFAULT_RESERVE, usable_capacity(profile)),
        chunk_tokens=_positive(chunk if chunk is not None else CHUNK_TOKENS, "chunk"),
        price_per_hour=price_value if price_value is not None else profile.price_per_hour,
    )
    result = engine(
        name,
        arch,
        profile,
        gpus=g,
        tensor=t,
        context=length,
        prompt=p,
        output=o,
        batch=_positive(batch, "batch"),
        settings=settings,
        fabric=fabric_of(profile, t),
    )
    result.notes[:0] = list(notes)
    return result
