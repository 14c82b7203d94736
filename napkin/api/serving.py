"""Inference questions: KV cache, serving speed as an engine runs it, and traffic through its scheduler
(``serve_plan`` lives in ``napkin.api.deployment``; the shared inputs in ``serving_inputs`` and
``traffic_inputs``, re-exported here)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from napkin import units
from napkin.api.deployment import serve_plan
from napkin.api.inputs import SHAPE_FIELDS, choice, keywords, optional, said
from napkin.api.serving_inputs import (
    SERVING_FIELDS,
    ServingOptions,
    block_of,
    build_replica,
    check_clients,
    context_of,
    experts_split,
    fraction_or_zero,
    implied_tp,
    positive,
    seed_of,
    serving_fabric,
    serving_keywords,
    serving_model,
    serving_settings,
    serving_stack,
    tensor_of,
    tp_split,
    with_context_source,
    with_stack,
)
from napkin.api.system_inputs import get_hardware
from napkin.api.traffic_inputs import (
    SLO_FIELDS,
    parse_lengths,
    parse_percentiles,
    parse_rate_per_second,
    parse_slo,
)
from napkin.errors import UsageError

if TYPE_CHECKING:  # imported where used: a command pays only for the objects it builds (startup time)
    from napkin.domain.model import Model
    from napkin.engines.serving import InferenceResult, KvCacheResult
    from napkin.engines.traffic_result import TrafficResult
    from napkin.systems.profiles import HardwareProfile

from napkin.api.inputs import Number

__all__ = [
    "SERVING_FIELDS",
    "SLO_FIELDS",
    "ServingOptions",
    "build_replica",
    "inference",
    "kv_cache",
    "parse_lengths",
    "parse_percentiles",
    "parse_rate_per_second",
    "parse_slo",
    "serve_plan",
    "serving_fabric",
    "serving_keywords",
    "serving_settings",
    "traffic",
]


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
) -> KvCacheResult:
    """KV-cache bytes: 2·L·n_kv·d_h per token (MLA: L·(d_c + d_h^R)) × context × batch, per GPU under TP."""
    from napkin.engines.serving import KvDtype
    from napkin.engines.serving import kv_cache as engine

    name, arch, notes = serving_model(model, model_config, shape)
    t = positive(tensor_parallel, "tensor_parallel")
    tp_split(arch, t)
    length, source = context_of(context, arch)
    b = positive(batch, "batch")
    result = engine(name, arch, length, b, choice(KvDtype, kv_dtype, "kv_dtype"), block_of(block_size, paged), t)
    result.notes[:0] = list(notes)
    return with_context_source(result, source)


@keywords(SHAPE_FIELDS)
@serving_keywords
def inference(
    *,
    model: str | Model | None = None,
    model_config: str | Path | None = None,
    gpus: Number | None = None,
    tensor_parallel: Number | None = None,
    hardware: str | HardwareProfile | None = None,
    hardware_file: str | Path | None = None,
    context: Number | None = None,
    batch: Number = 1,
    prompt: Number | None = None,
    output: Number | None = None,
    block_size: Number | None = None,
    paged: bool = False,
    **options: Any,
) -> InferenceResult:
    """Serving on ``gpus`` GPUs (TP groups of ``tensor_parallel``, default all) as an engine runs it (``stack``,
    default vLLM): weights, KV cache and the capacity the engine logs, max batch, TTFT, decode step at the
    stack's achieved rates, the batch whole (prefill, decode, total tokens/s), $/1M tokens. ``context`` =
    prompt + output tokens per sequence; ``stack="ideal"`` is the roofline at datasheet rates."""
    from napkin.engines.serving import serve as engine

    shape = {k: v for k, v in options.items() if k in SHAPE_FIELDS}
    name, arch, notes = serving_model(model, model_config, shape)
    g, t = tensor_of(gpus, tensor_parallel, arch)
    p = optional(units.parse_length, prompt, "prompt")
    o = optional(units.parse_length, output, "output")
    length = optional(units.parse_length, context, "context")
    if length is None and p is not None and o is not None:
        length = p + o
    length, source = context_of(length, arch)
    if context is None and source == "given":
        source = "prompt + output"
    given = [name for name, v in (("prompt", p), ("output", o)) if v is not None]
    o = o if o is not None else min(512, length // 2) if p is None else length - p
    p = p if p is not None else length - o
    if not given and length < 2:
        raise UsageError(
            f"context: {length:,} token{'s' if length != 1 else ''} leaves none to generate; a sequence needs at "
            "least 2 (1 to read, 1 to generate)",
            field="context",
        )
    if context is not None and len(given) == 2 and 1 <= p + o < length:
        notes = (
            *notes,
            f"context {length:,} sizes each sequence's KV cache; the speed is of prompt + output = {p + o:,} tokens",
        )
    if p < 1 or o < 1 or p + o > length:
        told = " + ".join(f"{name} ({p if name == 'prompt' else o:,})" for name in given)
        raise UsageError(
            f"{told} does not fit in context ({length:,}) with at least 1 token each to read and to generate",
            field=given[0],
            also=("context", *given[1:]),
        )
    profile = get_hardware(hardware, hardware_file)
    asked = ServingOptions.given(options)
    chosen = serving_stack(asked)
    settings = serving_settings(profile, asked, block=block_of(block_size, paged), chosen=chosen)
    fabric = serving_fabric(profile, t, implied=implied_tp(g, tensor_parallel))
    result = engine(
        name,
        arch,
        profile,
        gpus=g,
        tensor=t,
        context=length,
        prompt=p,
        output=o,
        batch=positive(batch, "batch"),
        settings=settings,
        fabric=fabric,
    )
    result.notes[:0] = list(notes)
    return said(with_context_source(result, source), profile, chosen)


@keywords(SHAPE_FIELDS, SLO_FIELDS)
@serving_keywords
def traffic(
    *,
    model: str | Model | None = None,
    model_config: str | Path | None = None,
    rate: Number | None = None,
    concurrency: Number | None = None,
    prompt: Number | None = None,
    output: Number | None = None,
    gpus: Number | None = None,
    tensor_parallel: Number | None = None,
    pipeline_parallel: Number = 1,
    expert_parallel: bool | Number | None = False,
    dp_attention: bool = False,
    hardware: str | HardwareProfile | None = None,
    hardware_file: str | Path | None = None,
    max_num_seqs: Number | None = None,
    requests: Number = 2000,
    seed: Number = 0,
    percentiles: str | None = None,
    prefix_hit_rate: Number | None = None,
    speculative_tokens: Number = 0,
    acceptance: Number | None = None,
    draft_params: Number | None = None,
    **options: Any,
) -> TrafficResult:
    """Requests at ``rate`` per second (Poisson, seeded) with ``prompt``/``output`` length distributions through
    an iteration-level model of the engine's scheduler on ``gpus`` GPUs: throughput, TTFT / TPOT / end-to-end
    percentiles, and with an SLO (``ttft_p90="2s"`` …) whether it is met and the largest rate that meets it.
    ``concurrency`` instead of ``rate``: a closed loop of that many clients, each sending its next request when its
    last comes back, as benchmarks run at a fixed concurrency do (the rate is then what is served)."""
    from napkin.engines.load import Workload, held_at_admission, traffic_result

    shape = {k: v for k, v in options.items() if k in SHAPE_FIELDS}
    slo = parse_slo({k: v for k, v in options.items() if k in SLO_FIELDS})
    name, arch, notes = serving_model(model, model_config, shape)
    if (rate is None) == (concurrency is None):
        raise UsageError(
            "rate (requests per second, e.g. 20/s) or concurrency (clients in a closed loop, e.g. 64) is required, "
            "not both",
            field="rate",
            also=("concurrency",),
        )
    clients = positive(concurrency, "concurrency") if concurrency is not None else 0
    if prompt is None or output is None:
        missing = [name for name, value in (("prompt", prompt), ("output", output)) if value is None]
        raise UsageError(
            f"{' and '.join(missing)}: {'lengths are' if len(missing) > 1 else 'a length is'} required "
            "(1024, 100..2000 or @histogram.txt)",
            field=missing[0],
            also=tuple(missing[1:]),
        )
    workload = Workload(
        rate=parse_rate_per_second(rate) if rate is not None else 0.0,
        concurrency=clients,
        prompt=parse_lengths(prompt, "prompt"),
        output=parse_lengths(output, "output"),
        requests=positive(requests, "requests"),
        seed=seed_of(seed),
        prefix_hit_rate=fraction_or_zero(prefix_hit_rate, "prefix_hit_rate"),
        speculative_tokens=0
        if str(speculative_tokens).strip() == "0"
        else positive(speculative_tokens, "speculative_tokens"),
        acceptance=fraction_or_zero(acceptance, "acceptance") if acceptance is not None else 0.0,
        draft_params=optional(units.parse_count, draft_params, "draft_params") or 0.0,
    )
    if workload.speculative_tokens and acceptance is None:
        raise UsageError("acceptance is required with speculative_tokens (a fraction, e.g. 0.7)", field="acceptance")
    if workload.draft_params and not workload.speculative_tokens:
        raise UsageError("draft_params needs speculative_tokens (draft tokens per step, e.g. 4)", field="draft_params")
    quantiles = parse_percentiles(percentiles)
    p = positive(pipeline_parallel, "pipeline_parallel")
    g, t = tensor_of(gpus, tensor_parallel, arch, pipeline=p)  # default: one replica, TP = a stage's GPUs
    expert_parallel = experts_split(expert_parallel, t)
    if (dp_attention or expert_parallel) and not arch.is_moe:
        field = "dp_attention" if dp_attention else "expert_parallel"
        raise UsageError(f"{field}: needs a mixture-of-experts model ({name} is dense)", field=field)
    profile = get_hardware(hardware, hardware_file)
    asked = ServingOptions.given(options)
    chosen = serving_stack(asked)
    settings = serving_settings(profile, asked, chosen=chosen)
    replica = build_replica(
        arch,
        profile,
        settings,
        tensor=t,
        pipeline=p,
        expert_parallel=expert_parallel,
        dp_attention=dp_attention,
        implied=implied_tp(g, tensor_parallel, p),
    )
    if max_num_seqs is not None:
        replica = with_stack(replica, max_num_seqs=positive(max_num_seqs, "max_num_seqs"))
    check_clients(clients, (g // (t * p)) * replica.ranks, workload.requests)
    kv = replica.kv_tokens()
    if kv == 0:
        dense, experts = replica.weight_bytes_gpu()
        from napkin.engines.serving_formats import WeightFormat, weight_bytes_per_param

        now = weight_bytes_per_param(settings.weights_format)  # suggest only formats smaller than the one given
        smaller = [f.value for f in (WeightFormat.fp8, WeightFormat.int4) if weight_bytes_per_param(f) < now]
        given = settings.weights_format.value
        raise UsageError(
            f"weights: {units.format_bytes(dense + experts)} of {given} weights per GPU leave no room for a KV cache "
            f"on {profile.name}; use more GPUs or --tensor-parallel"
            + (f", or smaller --weights ({', '.join(smaller)})" if smaller else ""),
            field="weights",
        )
    longest = workload.prompt.largest()
    if kv < longest + replica.stack.block_size:
        raise UsageError(
            f"prompt: the longest prompt ({longest:,} tokens) does not fit the engine's KV cache "
            f"({kv:,} tokens per scheduler); use more GPUs, --kv-dtype fp8 or smaller weights",
            field="prompt",
        )
    if replica.stack.reserve_output and kv < held_at_admission(replica, workload):
        whole = longest + workload.output.largest()
        raise UsageError(
            f"output: the longest request ({whole:,} tokens in and out) does not fit the engine's KV cache "
            f"({kv:,} tokens per scheduler), which {settings.stack_name} reserves whole at admission; use more "
            "GPUs, --kv-dtype fp8 or smaller weights",
            field="output",
            also=("prompt",),
        )
    result = traffic_result(
        name,
        replica,
        g // (t * p),
        workload,
        quantiles=quantiles,
        slo=slo if slo.targets else None,
        stack_name=settings.stack_name,
        price_per_gpu_hour=settings.price_per_hour,
    )
    result.notes[:0] = list(notes)
    return said(result, profile, chosen)
