"""The terms of one serving estimate that are not bytes: decode attention FLOPs, chunked prefill time, the roofline
crossover batch, the memory rules as the explanation prints them, cost and energy per token, and the warnings an
estimate carries."""

from __future__ import annotations

from typing import Any

from napkin import sources
from napkin.domain.model import Model
from napkin.engines.kv_cache import context_warning
from napkin.engines.serving_formats import WeightFormat, experts_touched, weight_bytes_per_param, weights_bytes
from napkin.results.explain import Step, step
from napkin.systems.cluster import Fabric
from napkin.systems.serving_stack import ServingStack
from napkin.units import format_bytes, format_bytes_si, format_count, format_duration


def decode_attention_flops(model: Model, length: int) -> float:
    """Per generated token: QKᵀ and A·V, 2·length·d_attn each, on every layer (windows cap the length)."""
    return 4.0 * model.layers * model.attended(length) * model.d_attn


def weight_steps(model: Model, fmt: WeightFormat, group: int, tensor: int) -> tuple[float, float, list[Step]]:
    """Weight bytes, whole and per GPU of a TP group, with the steps that explain them."""
    w_total = weights_bytes(model, fmt, group=group)
    w_gpu = w_total / tensor
    bpp = weight_bytes_per_param(fmt, group)
    quantised = fmt in (WeightFormat.int4, WeightFormat.int8, WeightFormat.nvfp4, WeightFormat.mxfp4)
    blocks = model.block_params(active=False)
    steps = [
        step(
            "weights",
            "block params × bytes/weight + embeddings & LM head × 2 B",
            f"{format_count(blocks)} × {bpp:.4g} B + {format_count(float(model.params()) - blocks)} × 2 B",
            format_bytes(w_total),
            sources.QUANT_GROUPS if quantised else sources.PARAMS,
        ),
        step(
            "weights per GPU",
            "weights / t (every matrix split over the TP group)",
            f"{format_bytes_si(w_total)} / {tensor}",
            format_bytes(w_gpu),
            sources.MEGATRON_TP,
        ),
    ]
    return w_total, w_gpu, steps


def cost_and_energy(
    price_per_hour: float | None, power: float | None, per_gpu: float, prefill_per_gpu: float
) -> tuple[float | None, float | None, float | None, list[Step]]:
    """USD per 1M output and input tokens at a price per GPU-hour, joules per output token at a board power."""
    usd_out = usd_in = joules = None
    steps: list[Step] = []
    if price_per_hour is not None:
        usd_out = price_per_hour / 3600 / per_gpu * 1e6
        usd_in = price_per_hour / 3600 / prefill_per_gpu * 1e6
        steps.append(
            step(
                "$ per 1M output tokens",
                "price per GPU-hour / 3600 / (tokens/s per GPU) × 1e6",
                f"{price_per_hour:g} / 3600 / {per_gpu:,.1f} × 1e6",
                f"${usd_out:,.2f}",
                "price from --price or the profile",
            )
        )
    if power is not None:
        joules = power / per_gpu
        steps.append(
            step(
                "energy per output token",
                "board power / (tokens/s per GPU)",
                f"{power:g} W / {per_gpu:,.1f}",
                f"{joules:.3g} J",
                sources.ENERGY,
            )
        )
    return usd_out, usd_in, joules, steps


def serve_warnings(
    model: Model,
    hardware: str,
    context: int,
    batch: int,
    max_batch: int,
    stack: ServingStack,
    stack_name: str,
    tensor: int,
    fabric: Fabric | None,
    dtype: str,
    fmt: WeightFormat,
) -> list[str]:
    """What an estimate should say about itself: a batch that does not fit, limits it breaks, what is not modelled."""
    warnings = context_warning(model, context)
    if max_batch == 0:
        warnings.append("the weights (and workspace) leave no room for one sequence's KV cache")
    elif batch > max_batch:
        warnings.append(f"batch {batch} does not fit: at most {max_batch} sequences of {context:,} tokens")
    if batch > stack.max_num_seqs:
        warnings.append(f"batch {batch} is above {stack_name}'s max_num_seqs ({stack.max_num_seqs})")
    if tensor > 1 and fabric is None:
        warnings.append("TP all-reduce per layer is not modelled: decode times are lower bounds")
    if not model.is_mla and tensor > model.n_kv:
        warnings.append(f"TP {tensor} > {model.n_kv} KV heads: each KV head is replicated {tensor / model.n_kv:g}×")
    if model.is_mla and tensor > 1:
        warnings.append("MLA's latent KV cache is replicated on every TP rank, not split")
    if dtype == "bf16" and fmt in (WeightFormat.nvfp4, WeightFormat.mxfp4):
        warnings.append(f"{hardware} has no fp4 peak: {fmt} weights are dequantised to bf16 matmuls")
    return warnings


MEMORY_RULES = {
    "total-fraction": "{f:g} × capacity − weights − workspace − runtime (vLLM gpu_memory_utilization)",
    "static-fraction": "{f:g} × capacity − weights − runtime (SGLang mem_fraction_static)",
    "free-fraction": "{f:g} × (capacity − weights − workspace − runtime) (TensorRT-LLM free_gpu_memory_fraction)",
    "static": "capacity − weights − runtime (a static cache)",
}


def window_share(model: Model, length: int) -> float:
    """Keys a query reads on average over the layers, as a share of ``length`` (sliding windows read less)."""
    return model.attended(length) / length if length > 0 else 1.0


def prefill_seconds(cost: Any, prompts: list[int], budget: int) -> float:
    """Prompts prefilled first come first served in chunks of at most ``budget`` tokens per engine step."""
    seconds, queue = 0.0, [[p, 0] for p in prompts]
    head = 0
    while head < len(queue):
        room, tokens, pairs = budget, 0, 0.0
        while room > 0 and head < len(queue):
            total, done = queue[head]
            c = min(total - done, room)
            pairs += c * done + c * (c + 1) / 2
            tokens += c
            room -= c
            queue[head][1] += c
            if queue[head][1] >= total:
                head += 1
        seconds += cost.seconds(0, tokens, 0, pairs)
    return float(seconds)


def crossover_batch(step_time: Any, limit: int = 1 << 20) -> int | None:
    """Smallest batch whose compute time reaches its memory time (bisection; None if never by ``limit``)."""

    def compute_bound(b: int) -> bool:
        _, _, t_mem, t_comp = step_time(b)
        return bool(t_comp >= t_mem)

    if not compute_bound(limit):
        return None
    low, high = 0, limit
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if compute_bound(mid) else (mid, high)
    return high


def step_cost_text(cost: Any, source: str) -> tuple[str, str]:
    """The step cost as the explanation prints it: a decode step's, and a prompt-carrying step's, which in a TP group
    costs ``cost.prefill_fixed`` more (launched eagerly on every rank, not replayed from a CUDA graph; ``source``)."""
    fixed = f"step cost {format_duration(cost.fixed + cost.hidden)}" + " under the GPU's (overlap)" * (cost.hidden > 0)
    if not cost.prefill_fixed:
        return fixed, fixed
    eager = f" + {format_duration(cost.prefill_fixed)} a step carrying prompt tokens (TP, eager launches; {source})"
    return fixed, fixed + eager


def host_steps(cost: Any, batch: int, decode: float, source: str) -> list[Step]:
    """The host's work per decode step, where the stack has it (TensorRT-LLM's PyTorch backend)."""
    if cost.host_seq <= 0:
        return []
    host = cost.host(batch)
    return [
        step(
            f"host work per decode step at batch {batch}",
            "b × host seconds per sequence, overlapped with the GPU's step: the step takes the longer",
            f"{batch} × {format_duration(cost.host_seq)}",
            format_duration(host) + (" (host-bound)" if host >= decode else ""),
            source,
        )
    ]


def moe_steps(model: Model, batch: int, stack: ServingStack, source: str) -> list[Step]:
    """An MoE model's experts: how many a decode step reads, and the rate of their grouped GEMMs (``source``)."""
    if not model.is_moe:
        return []
    return [
        step(
            "MoE experts read per step",
            "E·(1 − (1 − k/E)^b) (uniform routing)",
            f"E={model.experts}, k={model.top_k}, b={batch}",
            f"{experts_touched(model, batch):.1f} of {model.experts} per layer",
            sources.MOE_ROUTING,
        ),
        step(
            "MoE expert GEMMs",
            "expert FLOPs at the stack's expert share of its matmul rate (η × expert_compute)",
            f"η_prefill {stack.prefill.compute:g} × {stack.expert_compute:g}, η_decode {stack.decode.compute:g} × "
            f"{stack.expert_compute:g}",
            f"{stack.prefill.compute * stack.expert_compute:.3g} / {stack.decode.compute * stack.expert_compute:.3g} "
            "of the peak",
            source,
        ),
    ]
