"""Inference questions: KV cache and serving speed."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

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
    from napkin.engines.serve_plan import ServePlanResult
    from napkin.engines.serving import InferenceResult, KvCacheResult
    from napkin.engines.traffic import TrafficResult
    from napkin.systems.profiles import HardwareProfile

from napkin.api.inputs import Number

T = TypeVar("T")


@dataclass(frozen=True)
class ServingOptions:
    """The engine and formats every serving question takes, declared once: ``inference`` and ``traffic`` list
    them in their signatures (``serving_keywords``) and hand them to ``serving_settings`` whole."""

    stack: str | None = None
    stack_file: str | Path | None = None
    weights: str = "bf16"
    group_size: Number | None = None
    kv_dtype: str = "bf16"
    efficiency: Number | None = None
    bandwidth: str | None = None
    reserve: Number | None = None
    chunk: Number | None = None
    price: Number | None = None

    @classmethod
    def given(cls, options: dict[str, Any]) -> ServingOptions:
        """The options among a question's keywords (None: the default)."""
        return cls(**{k: options[k] for k in SERVING_FIELDS if options.get(k) is not None})


SERVING_FIELDS = tuple(f.name for f in fields(ServingOptions))


def serving_keywords(func: Callable[..., T]) -> Callable[..., T]:
    """Give a ``def f(..., **options)`` question ServingOptions' keywords, typed and with their defaults, in its
    signature (``help()``, completion, and ``keywords``' check of misspelt names)."""
    sig = inspect.signature(func)
    own = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
    rest = [p for p in sig.parameters.values() if p.kind is p.VAR_KEYWORD]
    extra = [
        inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.type)
        for f in fields(ServingOptions)
    ]
    func.__signature__ = sig.replace(parameters=[*own, *extra, *rest])  # type: ignore[attr-defined]
    return func


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
) -> KvCacheResult:
    """KV-cache bytes: 2·L·n_kv·d_h per token (MLA: L·(d_c + d_h^R)) × context × batch, per GPU under TP."""
    from napkin.engines.serving import KvDtype
    from napkin.engines.serving import kv_cache as engine

    name, arch, notes = _serving_model(model, model_config, shape)
    t = _positive(tensor_parallel, "tensor_parallel")
    if arch.heads is not None and arch.heads % t:
        raise UsageError(f"tensor_parallel ({t}) must divide the model's heads ({arch.heads})", field="tensor_parallel")
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
@serving_keywords
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
    if not given and length < 2:
        raise UsageError(
            f"context: {length:,} token{'s' if length != 1 else ''} leaves none to generate; a sequence needs at "
            "least 2 (1 to read, 1 to generate)",
            field="context",
        )
    if p < 1 or o < 1 or p + o > length:
        told = " + ".join(f"{name} ({p if name == 'prompt' else o:,})" for name in given)
        raise UsageError(
            f"{told} does not fit in context ({length:,}) with at least 1 token each to read and to generate",
            field=given[0],
            also=("context", *given[1:]),
        )
    profile = get_hardware(hardware, hardware_file)
    settings = serving_settings(profile, ServingOptions.given(options), block=_block(block_size, paged))
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


def serving_settings(profile: HardwareProfile, options: ServingOptions, *, block: int | None = None) -> Any:
    """The serving settings every serving question shares, each input checked and named when wrong; ``block``:
    round the KV cache to pages of that many tokens (``inference``)."""
    from napkin.engines.serving import GROUP_SIZE, KvDtype, Serving, WeightFormat, compute_dtype
    from napkin.systems.serving_stack import get_stack, serving_of

    o = options
    chosen = get_stack(o.stack, o.stack_file)
    fmt = choice(WeightFormat, o.weights, "weights")
    dtype = compute_dtype(fmt, profile)
    if profile.peak_if_known(dtype) is None:
        raise UsageError(
            f"weights: {profile.name} has no {dtype} peak for {fmt} weights; it has {', '.join(profile.peak_flops)}",
            field="weights",
        )
    eff = optional(units.parse_fraction, o.efficiency, "efficiency")
    group = _positive(o.group_size, "group_size") if o.group_size is not None else GROUP_SIZE
    price_value = optional(units.parse_number, o.price, "price")
    if price_value is not None and price_value <= 0:
        raise UsageError(f"price: {o.price!r} must be a positive USD per GPU-hour", field="price")
    measured, source = _bandwidth(profile, o.bandwidth)
    from napkin.engines.training_memory import capacity

    return Serving(
        stack_name=chosen.name,
        stack=serving_of(chosen).for_device(profile.name, capacity(profile)[0]),
        weights_format=fmt,
        group_size=group,
        kv_dtype=choice(KvDtype, o.kv_dtype, "kv_dtype"),
        block_size=block,
        efficiency=eff,
        reserve_bytes=None if o.reserve is None else reserve_of(o.reserve, usable_capacity(profile)),
        chunk_tokens=None if o.chunk is None else _positive(o.chunk, "chunk"),
        bandwidth=measured,
        bandwidth_source=source,
        rates_source=f"{chosen.name}: {chosen.cited('decode')}",
        memory_source=f"{chosen.name}: {chosen.cited('memory_rule')}",
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


# ------------------------------------------------------------------------------------------- traffic

#: SLO keywords: metric × percentile.
SLO_FIELDS = tuple(f"{m}_p{q}" for m in ("ttft", "tpot", "e2e") for q in (50, 90, 99))


def parse_rate_per_second(value: Number, field: str = "rate") -> float:
    """``20``, ``20/s``, ``1200/min``, ``20 req/s`` → requests per second, above 0."""
    text = str(value).strip().lower().replace("req", "").replace(" ", "")
    scale = 1.0
    for suffix, factor in (("/s", 1.0), ("/min", 1 / 60), ("/h", 1 / 3600)):
        if text.endswith(suffix):
            text, scale = text.removesuffix(suffix), factor
            break
    try:
        rate = float(text) * scale
    except ValueError:
        raise UsageError(
            f"{field}: {value!r} is not understood; expected requests per second such as 20, 20/s or 1200/min",
            field=field,
        ) from None
    if not rate > 0 or rate == float("inf"):
        raise UsageError(f"{field}: {value!r} must be above 0 requests per second", field=field)
    return rate


def parse_lengths(value: Number, field: str) -> Any:
    """Token lengths: ``1024`` (fixed), ``100..2000`` (uniform integers), or a histogram file (``@lengths.txt``
    or any existing path): one ``length weight`` pair per line, ``#`` comments."""
    from napkin.engines.traffic import Lengths

    text = str(value).strip()
    if ".." in text and not text.startswith("@"):
        low_text, _, high_text = text.partition("..")
        low, high = parse(units.parse_length, low_text, field), parse(units.parse_length, high_text, field)
        if not 1 <= low <= high:
            raise UsageError(f"{field}: {value!r} must be LOW..HIGH with 1 ≤ LOW ≤ HIGH tokens", field=field)
        return Lengths(kind="uniform", values=[low, high], label=f"uniform {low:,}..{high:,}")
    path = Path(text.removeprefix("@"))
    if text.startswith("@") or (not text[:1].isdigit() and path.exists()):
        return _histogram(path, field)
    n = parse(units.parse_length, text, field)
    if n < 1:
        raise UsageError(f"{field}: {value!r} must be at least 1 token", field=field)
    return Lengths(kind="fixed", values=[n], label=f"{n:,}")


def _histogram(path: Path, field: str) -> Any:
    from napkin.engines.traffic import Lengths
    from napkin.errors import NapkinError
    from napkin.io.files import read_text

    try:
        text = read_text(path)
    except NapkinError as exc:
        raise UsageError(f"{field}: {exc}", field=field) from None
    values: list[int] = []
    weights: list[float] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].replace(",", " ").split()
        if not line:
            continue
        where = f"{field}: {path}:{number}"
        if len(line) != 2:
            raise UsageError(f"{where}: expected 'length weight' (two numbers), got {len(line)} fields", field=field)
        try:
            length, weight = int(line[0]), float(line[1])
        except ValueError:
            raise UsageError(f"{where}: expected a whole token length and a weight", field=field) from None
        if length < 1 or not 0 <= weight < float("inf"):
            raise UsageError(f"{where}: length must be ≥ 1 and weight finite and ≥ 0", field=field)
        values.append(length)
        weights.append(weight)
    if not values or sum(weights) <= 0:
        raise UsageError(f"{field}: {path} has no lengths with a positive weight", field=field)
    return Lengths(kind="histogram", values=values, weights=weights, label=f"histogram {path.name}")


def parse_percentiles(value: str | None) -> list[float]:
    """``"50,90,99"`` → [50, 90, 99], each strictly between 0 and 100."""
    if value is None:
        return [50.0, 90.0, 99.0]
    out = []
    for part in str(value).split(","):
        try:
            q = float(part.strip().removeprefix("p").removeprefix("P"))
        except ValueError:
            raise UsageError(
                f"percentiles: {part.strip()!r} is not a number; expected a list such as 50,90,99", field="percentiles"
            ) from None
        if not 0 < q < 100:
            raise UsageError(f"percentiles: {part.strip()} is outside (0, 100)", field="percentiles")
        out.append(q)
    return sorted(set(out))


def parse_slo(given: dict[str, Any]) -> Any:
    """``ttft_p90="2s"`` … → an Slo (durations; a value in another unit names its keyword)."""
    from napkin.engines.traffic import Slo

    targets: dict[str, dict[str, float]] = {}
    for key in SLO_FIELDS:
        value = given.get(key)
        if value is None:
            continue
        seconds = parse(units.parse_duration, value, key)
        if seconds <= 0:
            raise UsageError(f"{key}: {value!r} must be a positive duration such as 2s or 100ms", field=key)
        metric, q = key.split("_p")
        targets.setdefault(metric, {})[q] = seconds
    return Slo(targets=targets)


def _fraction_or_zero(value: Number | None, field: str) -> float:
    if value is None or str(value).strip() in ("0", "0%", "0.0"):
        return 0.0
    f = parse(units.parse_fraction, value, field)
    if f >= 1:
        raise UsageError(f"{field}: {value!r} must be below 1", field=field)
    return f


def build_replica(
    arch: Model,
    profile: HardwareProfile,
    settings: Any,
    *,
    tensor: int,
    pipeline: int = 1,
    expert_parallel: bool = False,
    dp_attention: bool = False,
) -> Any:
    """The replica a serving question runs on (stack overrides applied, measured bandwidth if asked)."""
    from napkin.engines.replica import Replica
    from napkin.engines.training_memory import capacity

    device = (
        profile if settings.bandwidth is None else profile.model_copy(update={"memory_bandwidth": settings.bandwidth})
    )
    stack = settings.resolved()
    if settings.reserve_bytes is not None:  # the user's reserve replaces the stack's rule
        cap = capacity(profile)[0]
        stack = stack.model_copy(
            update={"memory_rule": "total-fraction", "memory_fraction": 1 - settings.reserve_bytes / cap}
        )
    return Replica(
        arch,
        device,
        stack,
        tensor=tensor,
        pipeline=pipeline,
        expert=expert_parallel,
        dp_attention=dp_attention,
        weights=settings.weights_format.value,
        group=settings.group_size,
        kv=settings.kv_dtype.value,
        fabric=serving_fabric(profile, tensor),
    )


@keywords(SHAPE_FIELDS, SLO_FIELDS)
@serving_keywords
def traffic(
    *,
    model: str | Model | None = None,
    model_config: str | Path | None = None,
    rate: Number | None = None,
    prompt: Number | None = None,
    output: Number | None = None,
    gpus: Number = 1,
    tensor_parallel: Number | None = None,
    pipeline_parallel: Number = 1,
    expert_parallel: bool = False,
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
    percentiles, and with an SLO (``ttft_p90="2s"`` …) whether it is met and the largest rate that meets it."""
    from napkin.engines.load import Workload, traffic_result

    shape = {k: v for k, v in options.items() if k in SHAPE_FIELDS}
    slo = parse_slo({k: v for k, v in options.items() if k in SLO_FIELDS})
    name, arch, notes = _serving_model(model, model_config, shape)
    if rate is None:
        raise UsageError("rate is required (requests per second, e.g. 20/s)", field="rate")
    if prompt is None or output is None:
        raise UsageError(
            "prompt and output lengths are required (1024, 100..2000 or @histogram.txt)",
            field="prompt" if prompt is None else "output",
        )
    workload = Workload(
        rate=parse_rate_per_second(rate),
        prompt=parse_lengths(prompt, "prompt"),
        output=parse_lengths(output, "output"),
        requests=_positive(requests, "requests"),
        seed=_seed(seed),
        prefix_hit_rate=_fraction_or_zero(prefix_hit_rate, "prefix_hit_rate"),
        speculative_tokens=0
        if str(speculative_tokens).strip() == "0"
        else _positive(speculative_tokens, "speculative_tokens"),
        acceptance=_fraction_or_zero(acceptance, "acceptance") if acceptance is not None else 0.0,
        draft_params=optional(units.parse_count, draft_params, "draft_params") or 0.0,
    )
    if workload.speculative_tokens and acceptance is None:
        raise UsageError("acceptance is required with speculative_tokens (a fraction, e.g. 0.7)", field="acceptance")
    if workload.draft_params and not workload.speculative_tokens:
        raise UsageError("draft_params needs speculative_tokens (draft tokens per step, e.g. 4)", field="draft_params")
    quantiles = parse_percentiles(percentiles)
    g = parse(units.parse_int, gpus, "gpus")
    p = _positive(pipeline_parallel, "pipeline_parallel")
    if g % p:
        raise UsageError(
            f"gpus ({g}) is not a multiple of pipeline_parallel ({p})", field="gpus", also=("pipeline_parallel",)
        )
    per_stage = g // p if tensor_parallel is None else None
    _, t = _tensor(g // p if per_stage else g, tensor_parallel if per_stage is None else per_stage, arch)
    if (dp_attention or expert_parallel) and not arch.is_moe:
        raise UsageError(
            "dp_attention and expert_parallel need a mixture-of-experts model",
            field="dp_attention" if dp_attention else "expert_parallel",
        )
    if g % (t * p):
        raise UsageError(f"gpus ({g}) is not a multiple of tensor × pipeline ({t * p})", field="gpus")
    profile = get_hardware(hardware, hardware_file)
    settings = serving_settings(profile, ServingOptions.given(options))
    replica = build_replica(
        arch, profile, settings, tensor=t, pipeline=p, expert_parallel=expert_parallel, dp_attention=dp_attention
    )
    if max_num_seqs is not None:
        replica = _with_stack(replica, max_num_seqs=_positive(max_num_seqs, "max_num_seqs"))
    kv = replica.kv_tokens()
    if kv == 0:
        dense, experts = replica.weight_bytes_gpu()
        raise UsageError(
            f"weights: {units.format_bytes(dense + experts)} per GPU leave no room for a KV cache on "
            f"{profile.name}; use more GPUs, --tensor-parallel, or smaller --weights (fp8, int4)",
            field="weights",
        )
    longest = workload.prompt.largest()
    if kv < longest + replica.stack.block_size:
        raise UsageError(
            f"prompt: the longest prompt ({longest:,} tokens) does not fit the engine's KV cache "
            f"({kv:,} tokens per scheduler); use more GPUs, --kv-dtype fp8 or smaller weights",
            field="prompt",
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
    return result


def _seed(value: Number) -> int:
    try:
        seed = int(str(value).strip())
    except ValueError:
        raise UsageError(f"seed: {value!r} is not a whole number", field="seed") from None
    if seed < 0:
        raise UsageError(f"seed: {value!r} must be 0 or more", field="seed")
    return seed


def _with_stack(replica: Any, **update: Any) -> Any:
    from dataclasses import replace

    return replace(replica, stack=replica.stack.model_copy(update=update))


# ---------------------------------------------------------------------------------------- serve plan


def _prices(value: str | None) -> dict[str, float]:
    """``"h100=3.5,b200=6"`` → {profile name: USD per GPU-hour}."""
    if not value:
        return {}
    out: dict[str, float] = {}
    for part in str(value).split(","):
        name, sep, usd = part.partition("=")
        if not sep:
            raise UsageError(f"price: {part.strip()!r} is not NAME=USD (e.g. h100=3.5,b200=6)", field="price")
        profile = get_hardware(name.strip())
        amount = parse(units.parse_number, usd.strip(), "price")
        if amount <= 0:
            raise UsageError(f"price: {part.strip()!r} must be a positive USD per GPU-hour", field="price")
        out[profile.name] = amount
    return out


@keywords(SHAPE_FIELDS, SLO_FIELDS)
def serve_plan(
    *,
    model: str | Model | None = None,
    model_config: str | Path | None = None,
    rate: Number | None = None,
    prompt: Number | None = None,
    output: Number | None = None,
    hardware: str | None = None,
    stack: str | None = None,
    stack_file: str | Path | None = None,
    weights: str | None = None,
    kv_dtype: str | None = None,
    price: str | None = None,
    max_gpus: Number = 8,
    requests: Number = 600,
    seed: Number = 0,
    top: Number = 5,
    **options: Any,
) -> ServePlanResult:
    """The cheapest deployments that serve ``rate`` requests/s of ``prompt``/``output`` tokens within the SLO
    (``ttft_p90="2s"``, ``tpot_p99="100ms"`` …): GPU profiles with a price (``price="h100=3.5,…"`` adds or
    replaces), TP/PP (and EP, DP attention for MoE), weight and KV formats, replica counts; ranked by $/hour."""
    from napkin.engines.load import Workload
    from napkin.engines.serve_plan import Candidate
    from napkin.engines.serve_plan import plan as engine
    from napkin.engines.serving import KvDtype, WeightFormat, compute_dtype
    from napkin.systems.profiles import load_catalog

    shape = {k: v for k, v in options.items() if k in SHAPE_FIELDS}
    slo = parse_slo({k: v for k, v in options.items() if k in SLO_FIELDS})
    if not slo.targets:
        raise UsageError(
            "an SLO is required: a latency target such as ttft_p90 2s or tpot_p99 100ms",
            field="ttft_p90",
            also=("tpot_p99",),
        )
    name, arch, notes = _serving_model(model, model_config, shape)
    if rate is None or prompt is None or output is None:
        missing = "rate" if rate is None else "prompt" if prompt is None else "output"
        raise UsageError(f"{missing} is required (rate 20/s; lengths 1024, 100..2000 or @histogram.txt)", field=missing)
    workload = Workload(
        rate=parse_rate_per_second(rate),
        prompt=parse_lengths(prompt, "prompt"),
        output=parse_lengths(output, "output"),
        requests=_positive(requests, "requests"),
        seed=_seed(seed),
    )
    prices = _prices(price)
    if hardware:
        profiles = [get_hardware(h.strip()) for h in str(hardware).split(",")]
    else:
        profiles = [loaded.profile for loaded in load_catalog().visible()]
    profiles = [p for p in profiles if p.name in prices or p.price_per_hour is not None]
    if not profiles:
        raise UsageError(
            "price: none of the GPU profiles considered has one; give USD per GPU-hour such as h100=3.5,b200=6",
            field="price",
        )
    limit = _positive(max_gpus, "max_gpus")
    formats = [choice(WeightFormat, weights, "weights")] if weights else list(WeightFormat)
    kvs = [choice(KvDtype, kv_dtype, "kv_dtype")] if kv_dtype else [KvDtype.bf16, KvDtype.fp8]
    candidates: list[Any] = []
    for profile in profiles:
        usd = prices.get(profile.name, profile.price_per_hour or 0.0)
        for fmt in formats:
            if fmt in (WeightFormat.fp16, WeightFormat.int8):
                continue  # bf16 and int4 cover them (same bytes as fp8 without its speed)
            dtype = compute_dtype(fmt, profile)
            if profile.peak_if_known(dtype) is None or (
                fmt in (WeightFormat.nvfp4, WeightFormat.mxfp4) and dtype != "fp4"
            ):
                continue
            for kv in kvs:
                settings = serving_settings(
                    profile, ServingOptions(stack=stack, stack_file=stack_file, weights=fmt.value, kv_dtype=kv.value)
                )
                for t, p, moe in _layouts(arch, profile, limit):
                    replica = build_replica(
                        arch,
                        profile,
                        settings,
                        tensor=t,
                        pipeline=p,
                        expert_parallel=moe == "ep",
                        dp_attention=moe == "dp",
                    )
                    candidates.append(Candidate(replica, usd))
    stack_name = serving_settings(profiles[0], ServingOptions(stack=stack, stack_file=stack_file)).stack_name
    result = engine(name, arch, workload, slo, candidates, stack_name=stack_name, top=_positive(top, "top"))
    result.notes[:0] = list(notes)
    return result


def _layouts(arch: Model, profile: HardwareProfile, limit: int) -> list[tuple[int, int, str]]:
    """(TP, PP, MoE mode) of one replica within ``limit`` GPUs and one scale-up domain."""
    fabric = fabric_of(profile, 2)
    domain = fabric.domain_size if fabric is not None else 8
    out = []
    for t in (1, 2, 4, 8):
        if t > domain or t > limit or (arch.heads is not None and arch.heads % t):
            continue
        for p in (1, 2):
            if t * p > limit or (p > 1 and t < min(8, domain)):
                continue
            out.append((t, p, "tp"))
            if arch.is_moe and t > 1 and p == 1:
                out += [(t, 1, "ep"), (t, 1, "dp")]
    return out
