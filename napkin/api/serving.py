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
    stack: str | None = None,
    stack_file: str | Path | None = None,
    context: Number | None = None,
    batch: Number = 1,
    prompt: Number | None = None,
    output: Number | None = None,
    weights: str = "bf16",
    group_size: Number | None = None,
    kv_dtype: str = "bf16",
    block_size: Number | None = None,
    paged: bool = False,
    efficiency: Number | None = None,
    bandwidth: str | None = None,
    reserve: Number | None = None,
    chunk: Number | None = None,
    price: Number | None = None,
    **shape: Any,
) -> Any:
    """Serving on ``gpus`` GPUs (TP groups of ``tensor_parallel``, default all) as an engine runs it (``stack``,
    default vLLM): weights, KV cache and the capacity the engine logs, max batch, TTFT, decode step at the
    stack's achieved rates, the batch whole (prefill, decode, total tokens/s), $/1M tokens. ``context`` =
    prompt + output tokens per sequence; ``stack="ideal"`` is the roofline at datasheet rates."""
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
    settings = serving_settings(
        profile,
        stack=stack,
        stack_file=stack_file,
        weights=weights,
        group_size=group_size,
        kv_dtype=kv_dtype,
        block_size=block_size,
        paged=paged,
        efficiency=efficiency,
        bandwidth=bandwidth,
        reserve=reserve,
        chunk=chunk,
        price=price,
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
        fabric=serving_fabric(profile, t),
    )
    result.notes[:0] = list(notes)
    return result


def serving_fabric(profile: HardwareProfile, tensor: int) -> Any:
    """The TP links: the device's built-in cluster, else its own interconnect figure (PCIe cards)."""
    from napkin.engines.replica import link_fabric

    found = fabric_of(profile, tensor)
    return found if found is not None or tensor == 1 else link_fabric(profile, tensor)


def serving_settings(
    profile: HardwareProfile,
    *,
    stack: str | None = None,
    stack_file: str | Path | None = None,
    weights: str = "bf16",
    group_size: Number | None = None,
    kv_dtype: str = "bf16",
    block_size: Number | None = None,
    paged: bool = False,
    efficiency: Number | None = None,
    bandwidth: str | None = None,
    reserve: Number | None = None,
    chunk: Number | None = None,
    price: Number | None = None,
) -> Any:
    """The serving settings every serving question shares, each input checked and named when wrong."""
    from napkin.engines.serving import GROUP_SIZE, KvDtype, Serving, WeightFormat, compute_dtype
    from napkin.systems.serving_stack import get_stack

    chosen = get_stack(stack, stack_file)
    fmt = choice(WeightFormat, weights, "weights")
    dtype = compute_dtype(fmt, profile)
    if profile.peak_if_known(dtype) is None:
        raise UsageError(
            f"weights: {profile.name} has no {dtype} peak for {fmt} weights; it has {', '.join(profile.peak_flops)}",
            field="weights",
        )
    eff = optional(units.parse_fraction, efficiency, "efficiency")
    group = _positive(group_size, "group_size") if group_size is not None else GROUP_SIZE
    price_value = optional(units.parse_number, price, "price")
    if price_value is not None and price_value <= 0:
        raise UsageError(f"price: {price!r} must be a positive USD per GPU-hour", field="price")
    measured, source = _bandwidth(profile, bandwidth)
    return Serving(
        stack_name=chosen.name,
        stack=chosen.serving,
        weights_format=fmt,
        group_size=group,
        kv_dtype=choice(KvDtype, kv_dtype, "kv_dtype"),
        block_size=_block(block_size, paged),
        efficiency=eff,
        reserve_bytes=None if reserve is None else reserve_of(reserve, usable_capacity(profile)),
        chunk_tokens=None if chunk is None else _positive(chunk, "chunk"),
        bandwidth=measured,
        bandwidth_source=source,
        price_per_hour=price_value if price_value is not None else profile.price_per_hour,
    )


def _bandwidth(profile: HardwareProfile, bandwidth: str | None) -> tuple[float | None, str]:
    """``datasheet`` (None), ``measured`` (the saved ``napkin bench memory --save``) or a bandwidth (3.2TB/s)."""
    if bandwidth is None or str(bandwidth).strip().lower() == "datasheet":
        return None, "datasheet"
    if str(bandwidth).strip().lower() == "measured":
        from napkin.systems.measurements import memory_measurement

        found = memory_measurement(profile.name)
        if found is None:
            raise UsageError(
                f"bandwidth: no saved memory-bandwidth measurement for {profile.name}; run "
                f"'napkin bench memory --hardware {profile.name} --save' first",
                field="bandwidth",
            )
        return found.bytes_per_second, f"measured {found.date} on {found.device}"
    value = parse(units.parse_bandwidth, bandwidth, "bandwidth")
    return value, "given"
