"""Serving accounting: weights, KV cache, what fits, prefill and decode by roofline, and what it costs.

The method is the roofline's (Williams et al. 2009): a step takes max(bytes moved / HBM bandwidth,
FLOPs / (peak × efficiency)). Decode at small batch reads every weight once per generated token and is
memory-bound (Pope et al. 2022 §2-3); prefill does 2·N_active FLOPs per prompt token and is compute-bound.

Bytes are per GPU of one tensor-parallel group (a *replica*); ``gpus / tensor_parallel`` replicas serve
independently. Base units throughout (bytes, seconds, FLOP, USD, joules).
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import Field

from napkin import sources
from napkin.domain.base import Record
from napkin.domain.model import Model
from napkin.results.explain import Step, step
from napkin.results.result import Result
from napkin.systems.cluster import Fabric
from napkin.systems.profiles import HardwareProfile
from napkin.systems.serving_stack import Phase, ServingStack
from napkin.units import (
    format_bandwidth,
    format_bytes,
    format_bytes_si,
    format_count,
    format_duration,
    format_sci,
)

#: Weight-only int8/int4 checkpoints (GPTQ, AWQ) store one fp16 scale per group of 128 weights.
GROUP_SIZE = 128
SCALE_BYTES = 2.0
#: vLLM's default KV-cache block (tokens per block) when paged rounding is asked for.
VLLM_BLOCK = 16
#: Tokens one forward pass processes at once (vLLM ``max_num_batched_tokens``) for the activation workspace.
CHUNK_TOKENS = 8192
#: Default fraction of each GPU's memory left unused (vLLM ``gpu_memory_utilization`` = 0.9).
DEFAULT_RESERVE = 0.1
#: Default fraction of the dense peak that prefill and compute-bound decode reach (an assumption; see --explain).
DEFAULT_EFFICIENCY = 0.5


class WeightFormat(StrEnum):
    bf16 = "bf16"
    fp16 = "fp16"
    fp8 = "fp8"  # W8A8 (fp8 matmuls)
    int8 = "int8"  # weight-only, dequantised to bf16 for the matmul (W8A16)
    int4 = "int4"  # weight-only (W4A16: GPTQ, AWQ)
    nvfp4 = "nvfp4"  # E2M1 + one fp8 (E4M3) scale per 16; fp4 matmuls where the device has them
    mxfp4 = "mxfp4"  # E2M1 + one 8-bit power-of-two scale per 32 (OCP MX v1.0)


class KvDtype(StrEnum):
    bf16 = "bf16"
    fp16 = "fp16"
    fp8 = "fp8"
    int8 = "int8"  # + one fp16 scale per cached head vector
    fp4 = "fp4"  # NVFP4: + one fp8 scale per 16 elements
    fp32 = "fp32"


#: Bytes of one cached element, before scales.
KV_BYTES = {
    KvDtype.bf16: 2.0,
    KvDtype.fp16: 2.0,
    KvDtype.fp8: 1.0,
    KvDtype.int8: 1.0,
    KvDtype.fp4: 0.5,
    KvDtype.fp32: 4.0,
}
_ELEMENT = {
    WeightFormat.bf16: 2.0,
    WeightFormat.fp16: 2.0,
    WeightFormat.fp8: 1.0,
    WeightFormat.int8: 1.0,
    WeightFormat.int4: 0.5,
    WeightFormat.nvfp4: 0.5,
    WeightFormat.mxfp4: 0.5,
}
#: Elements per shared scale and the scale's bytes: NVFP4 (NVIDIA, Blackwell: fp8 E4M3 per 16) and MXFP4
#: (OCP Microscaling Formats spec v1.0 §5.2: E8M0 per 32).
_BLOCK_SCALES = {WeightFormat.nvfp4: (16, 1.0), WeightFormat.mxfp4: (32, 1.0)}


def weight_bytes_per_param(fmt: WeightFormat, group: int = GROUP_SIZE) -> float:
    """Bytes per quantised weight: the element plus its share of a scale (int8/int4 weight-only: one fp16 scale
    per ``group``; NVFP4: one fp8 per 16; MXFP4: one 8-bit exponent per 32)."""
    if fmt in (WeightFormat.int8, WeightFormat.int4):
        return _ELEMENT[fmt] + SCALE_BYTES / group
    if fmt in _BLOCK_SCALES:
        size, scale = _BLOCK_SCALES[fmt]
        return _ELEMENT[fmt] + scale / size
    return _ELEMENT[fmt]


def kv_element_bytes(kv: KvDtype, vector: int) -> float:
    """Bytes per cached element: int8 adds one fp16 scale per head vector of ``vector`` elements; fp4 (NVFP4)
    one fp8 scale per 16 elements."""
    if kv is KvDtype.int8:
        return KV_BYTES[kv] + SCALE_BYTES / vector
    if kv is KvDtype.fp4:
        return KV_BYTES[kv] + 1.0 / 16
    return KV_BYTES[kv]


def compute_dtype(fmt: WeightFormat, hardware: HardwareProfile | None = None) -> str:
    """The matmul dtype: fp8 checkpoints run fp8 matmuls; fp4 ones fp4 where ``hardware`` has an fp4 peak
    (Blackwell), else they are dequantised to bf16 like weight-only int8/int4 (W8A16, W4A16)."""
    want = {
        WeightFormat.fp16: "fp16",
        WeightFormat.fp8: "fp8",
        WeightFormat.nvfp4: "fp4",
        WeightFormat.mxfp4: "fp4",
    }.get(fmt, "bf16")
    if want == "fp4" and (hardware is None or hardware.peak_if_known("fp4") is None):
        return "bf16"
    return want


def weights_bytes(model: Model, fmt: WeightFormat, active: bool = False, group: int = GROUP_SIZE) -> float:
    """Transformer-block weights at ``fmt``; embeddings, LM head and final norm stay 16-bit (as GPTQ/AWQ/fp8
    checkpoints keep them). ``active``: only the parameters one token uses (MoE top-k)."""
    blocks = model.block_params(active=active)
    rest = model.params() - model.block_params(active=False)
    return blocks * weight_bytes_per_param(fmt, group) + rest * 2.0


def experts_touched(model: Model, batch: int) -> float:
    """Distinct routed experts a decode step of ``batch`` tokens reads, under uniform routing:
    E·(1 − (1 − k/E)^b) (the expectation of a coupon-collector draw; 1 token → k experts)."""
    if not model.is_moe:
        return 0.0
    e, k = model.experts, model.top_k
    return e * (1 - (1 - k / e) ** batch)


def weights_read_bytes(model: Model, fmt: WeightFormat, batch: int, group: int = GROUP_SIZE) -> float:
    """Weight bytes one decode step of ``batch`` sequences reads: everything but the untouched experts."""
    total = weights_bytes(model, fmt, group=group)
    if not model.is_moe:
        return total
    untouched = model.experts - experts_touched(model, batch)
    return total - model.moe_layers * untouched * model.mlp_params(model.d_expert) * weight_bytes_per_param(fmt, group)


# -------------------------------------------------------------------------------------------- KV cache


def kv_heads_per_gpu(model: Model, tensor: int) -> float:
    """KV heads one GPU holds under TP: n_kv / t while t ≤ n_kv; beyond, each GPU keeps one (replicated)."""
    if model.is_mla:
        return 1.0  # the latent is not split by heads: every TP rank keeps all of it
    return max(model.n_kv / tensor, 1.0)


def kv_shard(model: Model, tensor: int) -> float:
    """Fraction of the full KV cache one GPU of a TP group holds."""
    if model.is_mla:
        return 1.0
    return kv_heads_per_gpu(model, tensor) / model.n_kv


def cached_tokens(model: Model, context: int, block: int | None) -> float:
    """Σ over layers of tokens cached (sliding-window layers keep the window), rounded up to whole blocks."""

    def rounded(n: int) -> int:
        return n if not block else math.ceil(n / block) * block

    local = model.n_local
    window = min(context, model.sliding_window) if model.sliding_window is not None else context
    return local * rounded(window) + (model.layers - local) * rounded(context)


def _vector(model: Model) -> int:
    """Elements of one cached vector (a head's key or value; MLA's latent and RoPE key)."""
    return model.kv_cache_width if model.is_mla else model.d_head


def kv_bytes_per_sequence(model: Model, context: int, kv: KvDtype, block: int | None = None) -> float:
    """Bytes of the whole (unsharded) KV cache of one sequence of ``context`` tokens."""
    return model.kv_cache_width * kv_element_bytes(kv, _vector(model)) * cached_tokens(model, context, block)


def kv_bytes_per_token(model: Model, kv: KvDtype) -> float:
    """Bytes per token, all layers, at full attention (L × width × bytes)."""
    return float(model.layers * model.kv_cache_width * kv_element_bytes(kv, _vector(model)))


def _kv_formula(model: Model) -> tuple[str, str, str]:
    if model.is_mla:
        return (
            "L × (d_c + d_h^R) × bytes",
            f"{model.layers} × ({model.kv_lora_rank} + {model.rope_head_dim})",
            "DeepSeek-AI 2024, DeepSeek-V2 arXiv:2405.04434 §2.1.3 and Table 1 (MLA caches the latent)",
        )
    kind = "MQA" if model.n_kv == 1 else "MHA" if model.n_kv == model.n_heads else "GQA"
    return (
        "2 (K and V) × L × n_kv × d_h × bytes",
        f"2 × {model.layers} × {model.n_kv} × {model.d_head}",
        f"{sources.KV_CACHE} ({kind})",
    )


class KvCacheResult(Result):
    """``napkin kv-cache``: bytes of the KV cache for a batch of sequences."""

    title: ClassVar[str] = "KV cache"
    headline: ClassVar[tuple[str, ...]] = ("kv_cache_bytes", "kv_bytes_per_token")

    model: str
    attention: str
    context: int
    batch: int
    kv_dtype: KvDtype
    block_size: int | None
    tensor_parallel: int
    kv_bytes_per_token: float = Field(description="all layers, full attention")
    kv_bytes_per_sequence: float
    kv_cache_bytes: float = Field(description="whole batch, all GPUs of the replica together")
    kv_cache_bytes_per_gpu: float
    kv_heads_per_gpu: float

    def heading(self) -> str:
        return f"KV cache: {self.model}"

    def rows(self) -> list[tuple[str, str]]:
        rows = [
            ("sequences", f"{self.batch} × {self.context:,} tokens"),
            ("attention", self.attention),
            ("KV dtype", str(self.kv_dtype)),
            ("per token", format_bytes(self.kv_bytes_per_token)),
            ("per sequence", format_bytes(self.kv_bytes_per_sequence)),
            (f"batch of {self.batch}", format_bytes(self.kv_cache_bytes)),
        ]
        if self.tensor_parallel > 1:
            rows.append((f"per GPU (TP {self.tensor_parallel})", format_bytes(self.kv_cache_bytes_per_gpu)))
        return rows

    def caption(self) -> str | None:
        return f"paged: blocks of {self.block_size} tokens" if self.block_size else None


def _attention_kind(model: Model) -> str:
    if model.is_mla:
        return f"MLA (latent {model.kv_lora_rank} + RoPE key {model.rope_head_dim})"
    kind = "MQA" if model.n_kv == 1 else "MHA" if model.n_kv == model.n_heads else "GQA"
    text = f"{kind}: {model.n_kv} KV heads × {model.d_head}"
    if model.sliding_window is not None:
        local = model.n_local
        text += f"; window {model.sliding_window:,} on {local}/{model.layers} layers"
    return text


def _kv_steps(
    name: str, model: Model, context: int, batch: int, kv: KvDtype, block: int | None, tensor: int
) -> tuple[list[Step], dict[str, float]]:
    formula, numbers, source = _kv_formula(model)
    per_token = kv_bytes_per_token(model, kv)
    per_seq = kv_bytes_per_sequence(model, context, kv, block)
    shard = kv_shard(model, tensor)
    steps = [
        step(
            f"KV cache per token ({name})",
            formula,
            f"{numbers} × {kv_element_bytes(kv, _vector(model)):.4g} B ({kv})",
            f"{per_token:,.0f} B = {format_bytes(per_token)}",
            source,
        ),
    ]
    tokens = cached_tokens(model, context, block)
    if tokens != model.layers * context:
        why = []
        if model.sliding_window is not None:
            why.append(f"sliding-window layers keep {min(context, model.sliding_window):,} tokens ({sources.MISTRAL})")
        if block:
            why.append(f"rounded up to blocks of {block} tokens ({sources.PAGED})")
        steps.append(
            step(
                "tokens cached (Σ over layers)",
                "; ".join(why),
                f"context {context:,}",
                f"{tokens:,.0f} layer-tokens",
                sources.PAGED if block else sources.MISTRAL,
            )
        )
    steps.append(
        step(
            "KV cache per sequence",
            "width × bytes × Σ_layers tokens cached",
            f"{model.kv_cache_width} × {kv_element_bytes(kv, _vector(model)):.4g} × {tokens:,.0f}",
            format_bytes(per_seq),
            source,
        )
    )
    if tensor > 1:
        if model.is_mla:
            how = "MLA's latent is shared by all heads, so every TP rank keeps all of it (replicated)"
        elif tensor <= model.n_kv:
            how = f"n_kv / t = {model.n_kv} / {tensor} heads per GPU"
        else:
            how = f"t > n_kv: one KV head per GPU, each replicated {tensor / model.n_kv:g}× (Megatron/vLLM)"
        steps.append(
            step(
                "KV cache per GPU under TP", how, f"× {shard:g}", format_bytes(per_seq * shard * batch), sources.GQA_TP
            )
        )
    return steps, {"per_token": per_token, "per_seq": per_seq, "shard": shard}


def kv_cache(
    name: str,
    model: Model,
    context: int,
    batch: int = 1,
    kv: KvDtype = KvDtype.bf16,
    block: int | None = None,
    tensor: int = 1,
) -> KvCacheResult:
    """KV-cache bytes of ``batch`` sequences of ``context`` tokens, whole and per GPU of a TP group."""
    steps, k = _kv_steps(name, model, context, batch, kv, block, tensor)
    total = k["per_seq"] * batch
    steps.append(
        step(
            "KV cache of the batch",
            "per sequence × b",
            f"{format_bytes_si(k['per_seq'])} × {batch}",
            format_bytes(total),
            sources.KV_CACHE,
        )
    )
    warnings = _context_warning(model, context)
    return KvCacheResult(
        model=name,
        attention=_attention_kind(model),
        context=context,
        batch=batch,
        kv_dtype=kv,
        block_size=block,
        tensor_parallel=tensor,
        kv_bytes_per_token=k["per_token"],
        kv_bytes_per_sequence=k["per_seq"],
        kv_cache_bytes=total,
        kv_cache_bytes_per_gpu=total * k["shard"],
        kv_heads_per_gpu=kv_heads_per_gpu(model, tensor),
        steps=steps,
        warnings=warnings,
    )


def _context_warning(model: Model, context: int) -> list[str]:
    if model.context is not None and context > model.context:
        return [f"context {context:,} is longer than the model's {model.context:,} tokens"]
    return []


# ------------------------------------------------------------------------------------------- serving


class Serving(Record):
    """Settings of a serving estimate: the engine (stack), formats, paging, and what the user overrides."""

    stack_name: str = "ideal"
    stack: ServingStack | None = Field(default=None, description="None: the ideal roofline (no engine)")
    weights_format: WeightFormat = WeightFormat.bf16
    group_size: int = Field(default=GROUP_SIZE, gt=0, description="weights per scale (int8/int4 weight-only)")
    kv_dtype: KvDtype = KvDtype.bf16
    block_size: int | None = None
    efficiency: float | None = Field(default=None, gt=0, le=1, description="overrides the stack's compute fractions")
    reserve_bytes: float | None = Field(default=None, ge=0, description="overrides the stack's memory rule")
    chunk_tokens: int | None = Field(default=None, gt=0, description="overrides max_num_batched_tokens")
    bandwidth: float | None = Field(default=None, gt=0, description="a measured HBM bandwidth (bench memory)")
    bandwidth_source: str = "datasheet"
    rates_source: str = Field(default="", description="where the stack's achieved rates come from")
    memory_source: str = Field(default="", description="where the stack's memory rule comes from")
    price_per_hour: float | None = None

    def resolved(self) -> ServingStack:
        """The stack with the user's overrides applied."""
        base = self.stack if self.stack is not None else IDEAL
        update: dict[str, Any] = {}
        if self.efficiency is not None:
            update["prefill"] = base.prefill.model_copy(update={"compute": self.efficiency})
            update["decode"] = base.decode.model_copy(update={"compute": self.efficiency})
        if self.chunk_tokens is not None:
            update["max_num_batched_tokens"] = self.chunk_tokens
        return base.model_copy(update=update) if update else base


#: The roofline at datasheet rates with 10 % of memory kept free: napkin's view without an engine.
IDEAL = ServingStack(
    engine="ideal",
    decode=Phase(bandwidth=1.0, compute=DEFAULT_EFFICIENCY),
    prefill=Phase(bandwidth=1.0, compute=DEFAULT_EFFICIENCY),
    attention_bandwidth=1.0,
    iteration_seconds=0.0,
    memory_rule="total-fraction",
    memory_fraction=1 - DEFAULT_RESERVE,
    block_size=1,
    max_num_batched_tokens=CHUNK_TOKENS,
    max_num_seqs=1 << 16,
)


class InferenceResult(Result):
    """``napkin inference``: memory, fit, prefill/decode time, throughput and cost of serving a model."""

    title: ClassVar[str] = "Inference"
    headline: ClassVar[tuple[str, ...]] = ("max_batch", "decode_seconds_per_token", "ttft_seconds")

    model: str
    hardware: str
    gpus: int
    tensor_parallel: int
    replicas: int
    weights_format: WeightFormat
    kv_dtype: KvDtype
    context: int
    prompt: int
    output: int
    batch: int
    params: float
    active_params: float
    weights_bytes: float = Field(description="all weights, one replica")
    weights_bytes_per_gpu: float
    kv_bytes_per_token: float
    kv_bytes_per_sequence: float
    kv_cache_bytes: float = Field(description="batch × sequence, one replica (all its GPUs)")
    kv_cache_bytes_per_gpu: float
    workspace_bytes_per_gpu: float
    reserve_bytes_per_gpu: float
    memory_bytes_per_gpu: float
    capacity_source: str = Field(default="datasheet", description="which capacity figure the fit used")
    model_context: int | None = Field(default=None, description="the longest sequence the model was built for")
    headroom_bytes_per_gpu: float = Field(description="capacity − reserve − weights − workspace − KV of the batch")
    fits: bool
    max_batch: int = Field(description="sequences of `context` tokens that fit per replica")
    max_context: int = Field(description="tokens per sequence that fit at `batch`")
    efficiency: float
    stack: str = Field(description="the serving stack whose rates and memory rules were used")
    kv_capacity_tokens: int = Field(description="tokens of KV cache the engine allocates per replica")
    max_concurrency: float = Field(description="KV capacity / context: sequences of `context` tokens at once")
    prefill_flops: float
    ttft_seconds: float = Field(description="prefill of one prompt, alone on the replica")
    prefill_seconds: float = Field(description="prefill of the whole batch, in chunks of the token budget")
    decode_seconds: float = Field(description="all output tokens of the batch, decoded together")
    batch_seconds: float = Field(description="the batch from first prompt token to last output token")
    prefill_tokens_per_second: float = Field(description="prompt tokens / prefill_seconds, one replica")
    decode_tokens_per_second: float = Field(description="output tokens / decode_seconds, one replica")
    total_tokens_per_second: float = Field(description="(prompt + output tokens) / batch_seconds, one replica")
    decode_bytes_per_step: float = Field(description="per GPU: weights read + KV read at the mean length")
    decode_flops_per_step: float = Field(description="per GPU")
    decode_seconds_per_token: float = Field(description="one decode step of the batch")
    decode_floor_seconds: float = Field(description="batch 1: weights + one KV / bandwidth")
    decode_bound: str
    crossover_batch: int | None = Field(description="batch above which decode turns compute-bound")
    crossover_batch_weights_only: int = Field(description="the same, counting weight reads only (no KV)")
    communication: str
    tokens_per_second_per_user: float
    tokens_per_second: float = Field(description="output tokens/s of one replica at `batch`")
    tokens_per_second_per_gpu: float
    prefill_tokens_per_second_per_gpu: float
    request_seconds: float = Field(description="TTFT + output × decode step")
    price_per_hour: float | None
    usd_per_million_tokens: float | None = Field(description="output (decode) tokens")
    usd_per_million_input_tokens: float | None
    joules_per_output_token: float | None

    def heading(self) -> str:
        return f"Inference: {self.model} on {self.gpus} × {self.hardware} (TP {self.tensor_parallel}), {self.stack}"

    def capacity_line(self) -> str:
        """The engine's capacity as it logs it at start-up."""
        return (
            f"KV cache: {self.kv_capacity_tokens:,} tokens, "
            f"max concurrency {self.max_concurrency:,.2f}× at {self.context:,}"
        )

    def rows(self) -> list[tuple[str, str]]:
        rows = [
            ("formats", f"{self.weights_format} weights, {self.kv_dtype} KV cache"),
            ("weights per GPU", format_bytes(self.weights_bytes_per_gpu)),
            (f"KV cache ({self.batch} × {self.context:,})", format_bytes(self.kv_cache_bytes_per_gpu)),
            ("workspace + reserve", format_bytes(self.workspace_bytes_per_gpu + self.reserve_bytes_per_gpu)),
            ("capacity", f"{format_bytes(self.memory_bytes_per_gpu)} per GPU, {self.capacity_source}"),
            ("headroom" if self.fits else "short by", format_bytes(abs(self.headroom_bytes_per_gpu))),
            ("engine capacity", self.capacity_line()),
            ("max batch at context", f"{self.max_batch} × {self.context:,} tokens"),
            (
                "max context at batch",
                f"{self.max_context:,} tokens × {self.batch}"
                + (" (the model's limit)" if self.max_context == self.model_context else ""),
            ),
        ]
        if not self.fits:
            rows.append(
                (
                    "speed",
                    "not estimated: this batch does not fit (see 'short by'; lower --batch or "
                    "--context, quantise with --weights/--kv-dtype, or add GPUs)",
                )
            )
            return rows
        rows += [
            ("TTFT", f"{format_duration(self.ttft_seconds)} ({self.prompt:,}-token prompt)"),
            ("decode step", f"{format_duration(self.decode_seconds_per_token)}, {self.decode_bound}"),
            ("decode floor", f"{format_duration(self.decode_floor_seconds)} (batch 1)"),
            (
                "crossover batch",
                ("none at this context" if self.crossover_batch is None else str(self.crossover_batch))
                + f" (weights alone: {self.crossover_batch_weights_only})",
            ),
            ("tokens/s per user", f"{self.tokens_per_second_per_user:,.1f}"),
            ("tokens/s", f"{self.tokens_per_second:,.0f} per replica, {self.tokens_per_second_per_gpu:,.0f} per GPU"),
            (
                f"batch of {self.batch}, whole",
                f"prefill {format_duration(self.prefill_seconds)} ({self.prefill_tokens_per_second:,.0f} tok/s), "
                f"decode {format_duration(self.decode_seconds)} ({self.decode_tokens_per_second:,.0f} tok/s), "
                f"{self.total_tokens_per_second:,.0f} tok/s in all",
            ),
            ("request latency", f"{format_duration(self.request_seconds)} (TTFT + {self.output - 1:,} steps)"),
        ]
        if self.usd_per_million_tokens is not None and self.usd_per_million_input_tokens is not None:
            rows.append(("$ per 1M input", f"${self.usd_per_million_input_tokens:,.3f}"))
            rows.append(("$ per 1M output", f"${self.usd_per_million_tokens:,.2f}"))
        if self.joules_per_output_token is not None:
            rows.append(("energy", f"{self.joules_per_output_token:.3g} J per output token (board power)"))
        return rows

    def caption(self) -> str:
        return (
            f"per GPU of one TP group; decode at mean length {self.prompt + self.output // 2:,}; "
            f"rates and memory rules of the {self.stack} stack; {self.communication}"
        )

    def extras(self) -> list[Any]:
        from napkin.results import render

        parts = [
            ("weights", self.weights_bytes_per_gpu),
            ("KV cache", self.kv_cache_bytes_per_gpu),
            ("workspace", self.workspace_bytes_per_gpu),
            ("reserve", self.reserve_bytes_per_gpu),
        ]
        return [render.bar(parts, self.memory_bytes_per_gpu)]


def workspace_bytes(model: Model, tensor: int, chunk: int) -> float:
    """Transient activations of one forward pass over ``chunk`` tokens, per GPU, 16-bit: the residual
    stream and attention outputs (≈ 4·d), the MLP's gate and up projections (2·F/t, the widest of dense
    and top-k experts) and the QKV projection ((a + 2·n_kv)·d_h / t)."""
    ffn = max(
        model.d_ffn if model.dense_layers or not model.is_moe else 0,
        (model.top_k + model.shared_experts) * model.d_expert if model.is_moe else 0,
    )
    qkv = (model.n_heads + 2 * model.n_kv) * model.d_head
    return chunk * 2.0 * (4 * model.hidden + (2 * ffn + qkv) / tensor)


def decode_attention_flops(model: Model, length: int) -> float:
    """Per generated token: QKᵀ and A·V, 2·length·d_attn each, on every layer (windows cap the length)."""
    return 4.0 * model.layers * model.attended(length) * model.d_attn


def serve(
    name: str,
    model: Model,
    hardware: HardwareProfile,
    *,
    gpus: int,
    tensor: int,
    context: int,
    prompt: int,
    output: int,
    batch: int,
    settings: Serving,
    fabric: Fabric | None = None,
) -> InferenceResult:
    """Serve ``model`` on ``gpus`` GPUs in TP groups of ``tensor`` as the settings' engine runs it: memory by the
    engine's rule, the KV capacity it logs, prefill and decode at its achieved rates, throughput, cost.

    With a ``fabric`` (the cluster's links), each layer's two tensor-parallel all-reduces of the
    activations (Shoeybi et al. 2019 §3: after attention and after the MLP) are timed by the α–β model
    of ``napkin.engines.comm`` and added to prefill and decode (not overlapped with compute)."""
    from napkin.engines.replica import Replica
    from napkin.engines.training_memory import capacity

    s = settings
    stack = s.resolved()
    fmt, kv = s.weights_format, s.kv_dtype
    replicas = gpus // tensor
    cap, cap_source = capacity(hardware)  # the figure the training commands use too
    datasheet_bw = hardware.memory_bandwidth
    device = hardware if s.bandwidth is None else hardware.model_copy(update={"memory_bandwidth": s.bandwidth})
    bw = device.memory_bandwidth
    dtype = compute_dtype(fmt, hardware)
    peak = hardware.peak(dtype)
    rate = peak * stack.decode.compute
    n, n_active = float(model.params()), float(model.active_params())
    rep = Replica(
        model,
        device,
        stack,
        tensor=tensor,
        weights=fmt.value,
        group=s.group_size,
        kv=kv.value,
        fabric=fabric,
        device_bytes=cap,
    )
    cost = rep.step_cost()

    # --- memory -------------------------------------------------------------------------------
    w_total = weights_bytes(model, fmt, group=s.group_size)
    w_gpu = w_total / tensor
    bpp = weight_bytes_per_param(fmt, s.group_size)
    quantised = fmt in (WeightFormat.int4, WeightFormat.int8, WeightFormat.nvfp4, WeightFormat.mxfp4)
    steps = [
        step(
            "weights",
            "block params × bytes/weight + embeddings & LM head × 2 B",
            f"{format_count(model.block_params(active=False))} × {bpp:.4g} B + "
            f"{format_count(n - model.block_params(active=False))} × 2 B",
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
    kv_steps, k = _kv_steps(name, model, context, batch, kv, s.block_size, tensor)
    steps += kv_steps
    per_seq_gpu = k["per_seq"] * k["shard"]
    kv_gpu = per_seq_gpu * batch
    work = rep.activations()
    steps.append(
        step(
            "activation workspace per GPU",
            "budget × 2 B × (4·d + (3·F + (a + 2·n_kv)·d_h) / t)"
            + (", or fp32 logits of max_num_seqs" if stack.sampler_logits else ""),
            f"budget {stack.max_num_batched_tokens:,} tokens",
            format_bytes(work),
            sources.VLLM_PROFILE,
        )
    )
    if s.reserve_bytes is not None:
        budget = cap - s.reserve_bytes - w_gpu - work
        rule = f"capacity − reserve {format_bytes_si(s.reserve_bytes)} − weights − workspace"
    else:
        budget = stack.kv_budget(cap, w_gpu, work, tensor)
        rule = _RULES[stack.memory_rule].format(f=stack.fraction(tensor))
    reserve = cap - budget - w_gpu - work
    steps.append(
        step(
            f"KV budget per GPU ({s.stack_name})",
            rule,
            f"capacity {format_bytes_si(cap)}, weights {format_bytes_si(w_gpu)}, workspace {format_bytes_si(work)}",
            format_bytes(max(budget, 0.0)),
            s.memory_source or sources.STACK_MEMORY,
        )
    )
    per_token_gpu = rep.kv_bytes_per_token_gpu()
    kv_tokens = int(max(budget, 0.0) / per_token_gpu // stack.block_size * stack.block_size)
    concurrency = kv_tokens / context
    steps.append(
        step(
            "engine KV capacity",
            "⌊KV budget / KV per token per GPU⌋ blocks; max concurrency = tokens / context",
            f"{format_bytes_si(max(budget, 0.0))} / {per_token_gpu:,.0f} B",
            f"{kv_tokens:,} tokens, {concurrency:,.2f}× at {context:,}",
            sources.PAGED,
        )
    )
    max_batch = max(0, math.floor(budget / per_seq_gpu)) if budget > 0 else 0
    headroom = budget - kv_gpu
    steps.append(
        step(
            "max batch at this context",
            "⌊KV budget / KV per sequence per GPU⌋",
            f"{format_bytes_si(max(budget, 0.0))} / {format_bytes_si(per_seq_gpu)}",
            f"{max_batch} sequences",
            sources.PAGED,
        )
    )
    max_ctx = max_context(model, kv, s.block_size, budget / (batch * k["shard"]))
    if model.context is not None:
        max_ctx = min(max_ctx, model.context)  # memory allows more than the model was built for

    # --- prefill --------------------------------------------------------------------------------
    attn = model.attention_flops_per_token(prompt, causal=True) / 3 * prompt
    prefill = 2 * n_active * prompt + attn
    ttft = _prefill_seconds(cost, [prompt], stack.max_num_batched_tokens)
    steps.append(
        step(
            "prefill FLOPs",
            "2·N_active·P + 2·L·P²·d_attn (causal attention, forward)",
            f"2 × {format_count(n_active)} × {prompt:,} + attention {format_sci(attn)}",
            format_sci(prefill),
            f"{sources.KAPLAN_6ND}; {sources.PALM_ATTENTION}",
        )
    )
    steps.append(
        step(
            "TTFT (prefill of one prompt)",
            "Σ chunks of the token budget: step cost + max(weights / (bw × β), FLOPs / (t × peak × η_prefill))",
            f"{format_sci(prefill)} / ({tensor} × {format_sci(peak)} {dtype} × {stack.prefill.compute:g}); "
            f"step cost {format_duration(stack.iteration_seconds)}",
            format_duration(ttft),
            f"{sources.ROOFLINE}; {s.rates_source or sources.STACK_RATES}",
        )
    )

    # --- decode ---------------------------------------------------------------------------------
    mean = prompt + output // 2

    def step_time(b: int) -> tuple[float, float, float, float]:  # datasheet roofline: (bytes, FLOPs, mem s, comp s)
        read = weights_read_bytes(model, fmt, b, s.group_size) / tensor + b * k["shard"] * kv_bytes_per_sequence(
            model, mean, kv, s.block_size
        )
        flops = b * (2 * n_active + decode_attention_flops(model, mean)) / tensor
        return read, flops, read / datasheet_bw, flops / rate

    read, flops, t_mem, t_comp = step_time(batch)
    decode_comm = _tp_comm(model, tensor, batch, fabric)
    decode = cost.seconds(batch, 0, batch * mean * _window_share(model, mean), 0)
    _, _, floor_mem, floor_comp = step_time(1)
    floor = max(floor_mem, floor_comp)  # the roofline floor at datasheet rates (no engine, no communication)
    crossover = _crossover(step_time)
    weights_only = (
        _crossover(
            lambda b: (
                0.0,
                0.0,
                weights_read_bytes(model, fmt, b, s.group_size) / tensor / datasheet_bw,
                b * 2 * n_active / tensor / rate,
            )
        )
        or 0
    )
    bound = "memory-bound" if t_mem >= t_comp else "compute-bound"
    steps.append(
        step(
            "decode floor (batch 1)",
            "(weights read + KV of one sequence) / HBM bandwidth, per GPU (datasheet)",
            f"{format_bytes_si(step_time(1)[0])} / {format_bandwidth(datasheet_bw)}",
            format_duration(floor),
            sources.POPE_DECODE,
        )
    )
    steps.append(
        step(
            f"decode step at batch {batch} ({s.stack_name})",
            "step cost + max(weights / (bw × β_decode), b·2·N_active / (t × peak × η_decode)) "
            "+ KV read / (bw × β_attention) + TP all-reduces",
            f"β_decode {stack.decode.bandwidth:g}, η_decode {stack.decode.compute:g}, "
            f"β_attention {stack.attention_bandwidth:g} of {format_bandwidth(bw)} ({s.bandwidth_source}); "
            f"step cost {format_duration(stack.iteration_seconds)}",
            f"{format_duration(decode)} ({bound})",
            f"{sources.ROOFLINE}; {s.rates_source or sources.STACK_RATES}",
        )
    )
    if model.is_moe:
        steps.append(
            step(
                "MoE experts read per step",
                "E·(1 − (1 − k/E)^b) (uniform routing)",
                f"E={model.experts}, k={model.top_k}, b={batch}",
                f"{experts_touched(model, batch):.1f} of {model.experts} per layer",
                sources.MOE_ROUTING,
            )
        )
    steps.append(
        step(
            "roofline crossover batch",
            "smallest b with compute time ≥ memory time",
            f"ridge {peak / datasheet_bw:.0f} FLOP/B ({dtype})",
            ("none (KV reads grow with b as fast as FLOPs)" if crossover is None else f"b = {crossover}")
            + f"; weights alone: b = {weights_only}",
            sources.ROOFLINE,
        )
    )
    if tensor == 1:
        communication = "no TP communication"
    elif fabric is None:
        communication = "TP all-reduce not modelled (no cluster profile for this device)"
    else:
        communication = f"TP all-reduce {format_duration(decode_comm)} per decode step on {fabric.up_name}"
        steps.append(
            step(
                "TP all-reduce per decode step",
                "2·L all-reduces of b·d·2 B over the TP group (α–β)",
                f"2 × {model.layers} × all-reduce({format_bytes_si(batch * model.hidden * 2)}, "
                f"n = {tensor}) on {fabric.name}",
                format_duration(decode_comm),
                f"{sources.MEGATRON_TP}; napkin.comm ring/NVLS model",
            )
        )

    # --- the batch, whole -----------------------------------------------------------------------
    prefill_all = _prefill_seconds(cost, [prompt] * batch, stack.max_num_batched_tokens)
    end_ctx = batch * (prompt + (output - 1) / 2) * _window_share(model, mean)
    decode_all = (output - 1) * cost.seconds(batch, 0, end_ctx, 0) if output > 1 else 0.0
    whole = prefill_all + decode_all
    steps.append(
        step(
            f"the batch of {batch}, whole",
            "prefill of b prompts in budget-sized chunks, then (output − 1) decode steps at the mean context",
            f"{format_duration(prefill_all)} + {output - 1:,} × step",
            f"{format_duration(whole)}",
            sources.STACK_RATES,
        )
    )

    per_user = 1 / decode
    tps = batch * per_user
    per_gpu = tps / tensor
    prefill_tps_gpu = prompt / ttft / tensor
    request = ttft + (output - 1) * decode
    steps.append(
        step(
            "throughput",
            "b / decode step; per GPU ÷ t",
            f"{batch} / {format_duration(decode)}",
            f"{tps:,.0f} tokens/s per replica, {per_gpu:,.0f} per GPU",
            sources.POPE_DECODE,
        )
    )

    usd_out = usd_in = joules = None
    if s.price_per_hour is not None:
        usd_out = s.price_per_hour / 3600 / per_gpu * 1e6
        usd_in = s.price_per_hour / 3600 / prefill_tps_gpu * 1e6
        steps.append(
            step(
                "$ per 1M output tokens",
                "price per GPU-hour / 3600 / (tokens/s per GPU) × 1e6",
                f"{s.price_per_hour:g} / 3600 / {per_gpu:,.1f} × 1e6",
                f"${usd_out:,.2f}",
                "price from --price or the profile",
            )
        )
    if hardware.power is not None:
        joules = hardware.power / per_gpu
        steps.append(
            step(
                "energy per output token",
                "board power / (tokens/s per GPU)",
                f"{hardware.power:g} W / {per_gpu:,.1f}",
                f"{joules:.3g} J",
                sources.ENERGY,
            )
        )

    warnings = _context_warning(model, context)
    if max_batch == 0:
        warnings.append("the weights (and workspace) leave no room for one sequence's KV cache")
    elif batch > max_batch:
        warnings.append(f"batch {batch} does not fit: at most {max_batch} sequences of {context:,} tokens")
    if batch > stack.max_num_seqs:
        warnings.append(f"batch {batch} is above {s.stack_name}'s max_num_seqs ({stack.max_num_seqs})")
    if tensor > 1 and fabric is None:
        warnings.append("TP all-reduce per layer is not modelled: decode times are lower bounds")
    if not model.is_mla and tensor > model.n_kv:
        warnings.append(f"TP {tensor} > {model.n_kv} KV heads: each KV head is replicated {tensor / model.n_kv:g}×")
    if model.is_mla and tensor > 1:
        warnings.append("MLA's latent KV cache is replicated on every TP rank, not split")
    if dtype == "bf16" and fmt in (WeightFormat.nvfp4, WeightFormat.mxfp4):
        warnings.append(f"{hardware.name} has no fp4 peak: {fmt} weights are dequantised to bf16 matmuls")
    return InferenceResult(
        model=name,
        hardware=hardware.name,
        gpus=gpus,
        tensor_parallel=tensor,
        replicas=replicas,
        weights_format=fmt,
        kv_dtype=kv,
        context=context,
        prompt=prompt,
        output=output,
        batch=batch,
        params=n,
        active_params=n_active,
        weights_bytes=w_total,
        weights_bytes_per_gpu=w_gpu,
        kv_bytes_per_token=k["per_token"],
        kv_bytes_per_sequence=k["per_seq"],
        kv_cache_bytes=k["per_seq"] * batch,
        kv_cache_bytes_per_gpu=kv_gpu,
        workspace_bytes_per_gpu=work,
        reserve_bytes_per_gpu=reserve,
        memory_bytes_per_gpu=cap,
        capacity_source=cap_source,
        model_context=model.context,
        headroom_bytes_per_gpu=headroom,
        fits=headroom >= 0,
        max_batch=max_batch,
        max_context=max_ctx,
        efficiency=stack.prefill.compute,
        stack=s.stack_name,
        kv_capacity_tokens=kv_tokens,
        max_concurrency=concurrency,
        prefill_flops=prefill,
        ttft_seconds=ttft,
        prefill_seconds=prefill_all,
        decode_seconds=decode_all,
        batch_seconds=whole,
        prefill_tokens_per_second=batch * prompt / prefill_all,
        decode_tokens_per_second=batch * (output - 1) / decode_all if decode_all > 0 else 0.0,
        total_tokens_per_second=batch * (prompt + output) / whole,
        decode_bytes_per_step=read,
        decode_flops_per_step=flops,
        decode_seconds_per_token=decode,
        decode_floor_seconds=floor,
        decode_bound=bound,
        crossover_batch=crossover,
        crossover_batch_weights_only=weights_only,
        communication=communication,
        tokens_per_second_per_user=per_user,
        tokens_per_second=tps,
        tokens_per_second_per_gpu=per_gpu,
        prefill_tokens_per_second_per_gpu=prefill_tps_gpu,
        request_seconds=request,
        price_per_hour=s.price_per_hour,
        usd_per_million_tokens=usd_out,
        usd_per_million_input_tokens=usd_in,
        joules_per_output_token=joules,
        steps=steps,
        warnings=warnings,
    )


_RULES = {
    "total-fraction": "{f:g} × capacity − weights − workspace − runtime (vLLM gpu_memory_utilization)",
    "static-fraction": "{f:g} × capacity − weights − runtime (SGLang mem_fraction_static)",
    "free-fraction": "{f:g} × (capacity − weights − workspace − runtime) (TensorRT-LLM free_gpu_memory_fraction)",
    "static": "capacity − weights − runtime (a static cache)",
}


def _window_share(model: Model, length: int) -> float:
    """Keys a query reads on average over the layers, as a share of ``length`` (sliding windows read less)."""
    return model.attended(length) / length if length > 0 else 1.0


def _prefill_seconds(cost: Any, prompts: list[int], budget: int) -> float:
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


def max_context(model: Model, kv: KvDtype, block: int | None, budget: float) -> int:
    """The longest context whose (unsharded) KV cache fits ``budget`` bytes (monotone: bisection)."""
    if budget <= 0 or kv_bytes_per_sequence(model, 1, kv, block) > budget:
        return 0
    low, high = 1, 1
    while kv_bytes_per_sequence(model, high, kv, block) <= budget:
        if high >= 1 << 30:  # sliding windows on every layer: the cache stops growing
            return high
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if kv_bytes_per_sequence(model, mid, kv, block) <= budget else (low, mid)
    return low


def _tp_comm(model: Model, tensor: int, tokens: int, fabric: Fabric | None) -> float:
    """Seconds of the 2·L tensor-parallel all-reduces of ``tokens`` × d activations in 16 bits."""
    if tensor == 1 or fabric is None:
        return 0.0
    from napkin.engines.comm import collective_seconds

    return 2 * model.layers * collective_seconds("all-reduce", tokens * model.hidden * 2.0, tensor, fabric)


def _crossover(step_time: Any, limit: int = 1 << 20) -> int | None:
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
