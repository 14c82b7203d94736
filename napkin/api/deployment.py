"""``napkin serve-plan``: the cheapest deployments that meet an SLO, searched over priced GPU profiles, layouts,
weight and KV formats."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from napkin import units
from napkin.api.inputs import SHAPE_FIELDS, choice, keywords, parse, said
from napkin.api.serving_inputs import (
    ServingOptions,
    build_replica,
    positive,
    seed_of,
    serving_model,
    serving_settings,
    serving_stack,
    tp_splits,
)
from napkin.api.system_inputs import fabric_of, get_hardware
from napkin.api.traffic_inputs import SLO_FIELDS, parse_lengths, parse_rate_per_second, parse_slo
from napkin.errors import UsageError

if TYPE_CHECKING:  # imported where used: a command pays only for the objects it builds (startup time)
    from napkin.domain.model import Model
    from napkin.engines.serve_plan import ServePlanResult
    from napkin.systems.profiles import HardwareProfile

from napkin.api.inputs import Number


def _prices(value: str | None) -> dict[str, float]:
    """``"h100=3.5,b200=6"`` → {profile name: USD per GPU-hour}."""
    from napkin.systems.profiles import resolve

    if not value:
        return {}
    out: dict[str, float] = {}
    for part in str(value).split(","):
        name, sep, usd = part.partition("=")
        if not sep:
            raise UsageError(f"price: {part.strip()!r} is not NAME=USD (e.g. h100=3.5,b200=6)", field="price")
        profile = resolve(name.strip(), what="price").profile  # an unknown name is --price's, not --hardware's
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
    name, arch, notes = serving_model(model, model_config, shape)
    if rate is None or prompt is None or output is None:
        missing = "rate" if rate is None else "prompt" if prompt is None else "output"
        raise UsageError(f"{missing} is required (rate 20/s; lengths 1024, 100..2000 or @histogram.txt)", field=missing)
    workload = Workload(
        rate=parse_rate_per_second(rate),
        prompt=parse_lengths(prompt, "prompt"),
        output=parse_lengths(output, "output"),
        requests=positive(requests, "requests"),
        seed=seed_of(seed),
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
    chosen = serving_stack(ServingOptions(stack=stack, stack_file=stack_file))  # once, for every candidate
    limit = positive(max_gpus, "max_gpus")
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
                    profile,
                    ServingOptions(stack=stack, stack_file=stack_file, weights=fmt.value, kv_dtype=kv.value),
                    chosen=chosen,
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
    result = engine(name, arch, workload, slo, candidates, stack_name=chosen.name, top=positive(top, "top"))
    result.notes[:0] = list(notes)
    return said(result, *profiles, chosen)


def _layouts(arch: Model, profile: HardwareProfile, limit: int) -> list[tuple[int, int, str]]:
    """(TP, PP, MoE mode) of one replica within ``limit`` GPUs and one scale-up domain."""
    fabric = fabric_of(profile, 2)
    domain = fabric.domain_size if fabric is not None else (profile.interconnect_devices or 8)
    out = []
    for t in (1, 2, 4, 8):
        if t > domain or t > limit or not tp_splits(arch, t):
            continue  # as inference and traffic refuse it: TP must split the heads and the KV heads whole
        for p in (1, 2):
            if t * p > limit or (p > 1 and t < min(8, domain)):
                continue
            out.append((t, p, "tp"))
            if arch.is_moe and t > 1 and p == 1:
                out += [(t, 1, "ep"), (t, 1, "dp")]
    return out
