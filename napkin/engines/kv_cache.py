"""The KV cache: bytes per token and per sequence (GQA, MQA, MLA's latent, sliding windows, paged blocks), the
share one GPU of a tensor-parallel group holds, and ``napkin kv-cache``'s result."""

from __future__ import annotations

import math
from typing import ClassVar

from pydantic import Field

from napkin import sources
from napkin.domain.model import Model
from napkin.engines.serving_formats import KvDtype, kv_element_bytes
from napkin.results.explain import Step, step
from napkin.results.result import Result
from napkin.units import format_bytes, format_bytes_si

#: vLLM's default KV-cache block (tokens per block) when paged rounding is asked for.
VLLM_BLOCK = 16


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


def short_source(source: str) -> str:
    """A context's source as a table cell shows it: the model's own longest context is named, not cited."""
    return "the model's longest" if source.startswith("the model's longest") else source


class KvCacheResult(Result):
    """``napkin kv-cache``: bytes of the KV cache for a batch of sequences."""

    title: ClassVar[str] = "KV cache"
    headline: ClassVar[tuple[str, ...]] = ("kv_cache_bytes", "kv_bytes_per_token")

    model: str
    attention: str
    context: int
    context_source: str = Field(default="given", description="where context came from: given, or the model's own")
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
            ("sequences", f"{self.batch} × {self.context:,} tokens ({short_source(self.context_source)})"),
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
        return f"paged: blocks of {self.block_size:,} tokens" if self.block_size else None


def _attention_kind(model: Model) -> str:
    if model.is_mla:
        return f"MLA (latent {model.kv_lora_rank} + RoPE key {model.rope_head_dim})"
    kind = "MQA" if model.n_kv == 1 else "MHA" if model.n_kv == model.n_heads else "GQA"
    text = f"{kind}: {model.n_kv} KV heads × {model.d_head}"
    if model.sliding_window is not None:
        local = model.n_local
        kind = "chunks of" if model.chunked else "window"
        text += f"; {kind} {model.sliding_window:,} on {local}/{model.layers} layers"
    return text


def kv_steps(
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
        local = sources.LLAMA4_CHUNKED if model.chunked else sources.MISTRAL
        if model.sliding_window is not None:
            kind = "chunked-attention" if model.chunked else "sliding-window"
            why.append(f"{kind} layers keep {min(context, model.sliding_window):,} tokens ({local})")
        if block:
            why.append(f"rounded up to blocks of {block} tokens ({sources.PAGED})")
        steps.append(
            step(
                "tokens cached (Σ over layers)",
                "; ".join(why),
                f"context {context:,}",
                f"{tokens:,.0f} layer-tokens",
                sources.PAGED if block else local,
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
    steps, k = kv_steps(name, model, context, batch, kv, block, tensor)
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
    warnings = context_warning(model, context)
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


def context_warning(model: Model, context: int) -> list[str]:
    if model.context is not None and context > model.context:
        return [f"context {context:,} is longer than the model's {model.context:,} tokens"]
    return []


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
