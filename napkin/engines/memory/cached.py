"""Activations under a stack's own caching policy (``CachedActivations``): the linear layers' inputs cached in a
low-precision format, cheap operators recomputed, as DeepSeek-V3 trains (DeepSeek-AI 2024, arXiv:2412.19437).

Per token of a micro-batch on one GPU (s·b/c tokens with context parallelism c), e = 2 B (BF16), f the cached
linear-input bytes (FP8 plus one fp32 scale per 128 elements: 1 + 4/128), o the attention-output bytes (E5M6:
1.5), heads and FFN widths ÷ t, the model width ÷ t only with sequence parallelism:

    attention  residual e·h (the norm's input: the norm is recomputed, §3.2.3; else + its output f·h)
               MLA: the compressed latents e·(d_c' + d_c + d_h^R) (inputs of the recomputed latent norms and
               up-projections, §3.2.3); Q, K, V recomputed with the up-projections (else e·a·(2·d_qk + d_v))
               GQA/MHA: Q, K, V e·(a + 2·n_kv)·d_h
               attention output o·a·d_v (E5M6, shared with the output projection's backward, §3.3.3),
               log-sum-exp 4·a (fp32)
    MLP        residual e·h (+ f·h without norm recomputation)
               dense: SwiGLU input f·2F (cached in FP8, its output recomputed, §3.3.3); without: e·2F + f·F
               MoE: router probabilities 4·E (fp32); the dispatched copies f·h·k (quantized before the dispatch,
               §3.3.3: the dispatch buffer is the experts' cached input); SwiGLU inputs f·2F_e per routed copy and
               per shared expert
    full recomputation: the layer input e·h only.

The expert outputs are not kept: the combine's gate weights are taken to scale the SwiGLU output, whose
recomputation serves their gradient (the report does not say; this is napkin's reading).
The all-to-all buffers (``all_to_all_bytes``) are transient: one layer's dispatch (FP8) and combine (BF16, sent
and received) for each micro-batch whose communication overlaps (DualPipe overlaps a forward and a backward
chunk, §3.2.1).
"""

from __future__ import annotations

from napkin.domain.choices import Recompute
from napkin.domain.layout import Layout
from napkin.domain.model import Model
from napkin.domain.workload import Workload
from napkin.systems.stack import CachedActivations

#: 16-bit activations (BF16) where the policy does not cache a lower precision.
E = 2.0
#: fp32 router probabilities and attention log-sum-exp.
FP32 = 4.0


def _tokens(workload: Workload, layout: Layout) -> float:
    return workload.seq * workload.micro_batch / layout.context_parallel


def cached_layer_bytes(
    model: Model, workload: Workload, layout: Layout, policy: CachedActivations, *, moe: bool | None = None
) -> tuple[float, str]:
    """Bytes one layer keeps for backward on one GPU, one micro-batch, and the formula; ``moe`` None: the mean over
    the model's dense and MoE layers."""
    tokens = _tokens(workload, layout)
    h, t = model.hidden, layout.tensor_parallel
    sp = t if layout.sequence_parallel else 1
    if layout.recompute is Recompute.full:
        return tokens * h * E / sp, "s·b·h·e (layer input only)"
    if moe is None and model.is_moe:
        dense, _ = cached_layer_bytes(model, workload, layout, policy, moe=False)
        sparse, formula = cached_layer_bytes(model, workload, layout, policy, moe=True)
        mean = (model.dense_layers * dense + model.moe_layers * sparse) / model.layers
        return mean, f"mean over {model.dense_layers} dense and {model.moe_layers} MoE layers; MoE layer: {formula}"
    f, o = policy.linear_input_bytes, policy.attention_output_bytes
    norm_out = 0.0 if policy.recompute_norms else f * h
    unsplit = 2 * (E * h + norm_out)  # the two residual streams (the norms' inputs) and, kept, the norms' outputs
    a = model.n_heads
    d_v = model.v_head_dim or model.d_head
    if model.is_mla:
        rope = model.rope_head_dim or 0
        latents = (model.q_lora_rank or 0) + (model.kv_lora_rank or 0) + rope
        unsplit += E * latents
        qkv = 0.0 if policy.recompute_up_projections else E * a * (2 * (model.d_head + rope) + d_v)
        attn = "e·(d_c' + d_c + d_h^R)" + ("" if policy.recompute_up_projections else " + e·a·(2d_qk + d_v)")
    else:
        qkv = E * (a + 2 * model.n_kv) * model.d_head
        attn = "e·(a + 2n_kv)·d_h"
    split = qkv + o * a * d_v + FP32 * a

    def swiglu(width: float) -> float:
        return f * 2 * width if policy.recompute_swiglu else E * 2 * width + f * width

    mlp_term = "f·2F" if policy.recompute_swiglu else "(e·2F + f·F)"
    if moe:
        k = model.top_k
        unsplit += FP32 * model.experts + f * h * k
        split += swiglu(model.d_expert) * (k + model.shared_experts)
        mlp = f"4E + f·h·k + {mlp_term.replace('F', 'F_e')}·(k + shared)"
    else:
        split += swiglu(model.d_ffn)
        mlp = mlp_term
    total = tokens * (unsplit / sp + split / t)
    norms = "2e·h" if policy.recompute_norms else "2(e + f)·h"
    formula = f"s·b × [{norms} + {attn} + o·a·d_v + 4a + {mlp}] (e = 2, f = {f:g}, o = {o:g})"
    return total, formula


def all_to_all_bytes(model: Model, workload: Workload, layout: Layout, policy: CachedActivations) -> float:
    """The MoE dispatch and combine buffers live at once on one GPU: each overlapping micro-batch's routed copies
    (k per token) at the dispatch bytes, and sent and received at the combine bytes."""
    if not model.is_moe or layout.expert_parallel == 1:
        return 0.0
    per_copy = model.hidden * (policy.dispatch_bytes + 2 * policy.combine_bytes)
    return _tokens(workload, layout) * model.top_k * per_copy * policy.overlapped_microbatches
