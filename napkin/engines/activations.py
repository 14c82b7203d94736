"""Activation memory: the bytes a training step keeps for backward, per layer and per pipeline stage.

Pure functions over ``Model`` / ``Workload`` / ``Layout``, plain floats out (fast enough for a planner
that calls them ~10^5 times). Per token of a micro-batch (s·b/c tokens on a GPU with context parallelism
c), with e bytes per stored element and 1-byte dropout masks (Korthikanti et al. 2022 §4.1, generalised):

    unsplit (÷ t only with sequence parallelism)
        attention: LayerNorm/RMSNorm input e·h, QKV input e·h, residual-dropout mask h (with dropout)
        MLP:       norm input e·h, FC1 input e·h, residual-dropout mask h (with dropout)
        MoE:       + router probabilities 4·E (fp32), + the dispatched copy of each routed token e·h·k·cf
    split (÷ t)
        Q e·a·d_h, K and V e·n_kv·d_h each (GQA/MQA store only n_kv heads), output-projection input e·a·d_h
        MLP: GeLU 2·e·F (FC1 output, FC2 input); SwiGLU 3·e·F (gate and up outputs, FC2 input; Megatron-LM's
             fused bias_swiglu saves the 2F-wide FC1 output and recomputes the product)
        MoE: that per routed token (k·cf of them, width F_e) and per shared expert
    scores (÷ t), keys k_s per query (s, or the sliding window)
        no FlashAttention, no recomputation: softmax output e·a·k_s, + dropout mask and output (1+e)·a·k_s
        FlashAttention: only the fp32 log-sum-exp, 4·a (Dao et al. 2022 §3.1); selective recompute: 0
    full recomputation: the layer input only, e·h (÷ t with SP)

At e = 2, F = 4h, MHA, dropout, no MoE this is Korthikanti's Table 2: s·b·h·(10 + 24/t + 5as/(h·t)).
The norm statistics (mean/rstd: 8 B per token for LayerNorm, 4 B for RMSNorm) are under 0.1 % of a
layer and left out, as in the paper.

Outside the blocks (Megatron-LM theoretical_memory_usage.py; Korthikanti §4.3):
    first stage: token ids 8 B per token (int64), embedding-dropout mask h per token (with dropout)
    last stage:  final-norm input e·h, output-layer input e·h (÷ t with SP), and the logits kept for the
                 cross-entropy backward in fp32: 4·V/t per token — Megatron-LM upcasts the logits before
                 vocab_parallel_cross_entropy unless fp16_lm_cross_entropy is set (the default is off)
Pipeline (Narayanan et al. 2021 §2.2; Megatron-LM core/pipeline_parallel/schedules.py): with 1F1B
stage i (0-based) holds min(p − i, m) micro-batches in flight; interleaved with v chunks it holds
(p − i − 1)·2 + (v − 1)·p + 1 chunks of L/(p·v) layers, which for i = 0 is Korthikanti §4.2.3's
p·(1 + (p − 1)/(p·v)) micro-batches' worth of L/p layers. The loss is held for one micro-batch.
"""

from __future__ import annotations

from dataclasses import dataclass

from napkin.domain.choices import Recompute
from napkin.domain.layout import Layout
from napkin.domain.model import Model
from napkin.domain.workload import Workload
from napkin.errors import UsageError

#: Token ids are int64 in Megatron-LM and torch embeddings (theoretical_memory_usage.py: 8·s·b·p).
TOKEN_ID_BYTES = 8
#: Cross-entropy keeps fp32 logits (Megatron-LM gpt_model: logits.float() unless fp16_lm_cross_entropy).
LOSS_LOGIT_BYTES = 4
#: Router probabilities in fp32 (Megatron-LM moe router: moe_router_dtype / softmax in fp32).
ROUTER_BYTES = 4


@dataclass(frozen=True)
class LayerBytes:
    """Bytes one layer keeps for backward on one GPU for one micro-batch, and how they were counted."""

    total: float
    formula: str


def _tokens(workload: Workload, layout: Layout) -> float:
    return workload.seq * workload.micro_batch / layout.context_parallel


def layer_bytes(
    model: Model,
    workload: Workload,
    layout: Layout,
    *,
    element_bytes: float = 2.0,
    flash_attention: bool = False,
    moe: bool | None = None,
    capacity_factor: float | None = None,
    linear_bytes: float | None = None,
) -> LayerBytes:
    """One block's saved activations; ``moe`` picks an MoE layer (default: an average over the model's layers).
    ``linear_bytes``: the bytes per element of the input each dense linear layer keeps for its weight gradient when
    that is its own quantized copy (an fp8 recipe, ``fp8_linear_inputs``); None: the activations' e."""
    if model.heads is None:
        raise UsageError("heads: activation memory needs the attention head count (the a·s²·b term)", field="heads")
    e, t = element_bytes, layout.tensor_parallel
    sp = t if layout.sequence_parallel else 1
    tokens = _tokens(workload, layout)
    h = model.hidden
    if layout.recompute is Recompute.full:
        return LayerBytes(tokens * h * e / sp, "s·b·h·e" + ("/t" if sp > 1 else "") + " (layer input only)")
    if moe is None and model.is_moe:
        dense = layer_bytes(
            model,
            workload,
            layout,
            element_bytes=e,
            flash_attention=flash_attention,
            moe=False,
            capacity_factor=capacity_factor,
            linear_bytes=linear_bytes,
        )
        sparse = layer_bytes(
            model,
            workload,
            layout,
            element_bytes=e,
            flash_attention=flash_attention,
            moe=True,
            capacity_factor=capacity_factor,
            linear_bytes=linear_bytes,
        )
        mean = (model.dense_layers * dense.total + model.moe_layers * sparse.total) / model.layers
        return LayerBytes(
            mean, f"mean over {model.dense_layers} dense and {model.moe_layers} MoE layers; MoE layer: {sparse.formula}"
        )
    mask = 1.0 if model.dropout else 0.0
    a, dh, kv = model.n_heads, model.d_head, model.n_kv
    unsplit = h * (4 * e + 2 * mask)
    split = e * (2 * a * dh + 2 * kv * dh)
    terms_u = "h·(4e+2)" if mask else "4e·h"
    terms_s = "e·(2a·d_h + 2n_kv·d_h)"
    tensors = model.mlp_matrices
    if moe:
        routed = model.top_k * (capacity_factor if capacity_factor is not None else 1.0)
        unsplit += ROUTER_BYTES * model.experts + e * h * routed
        split += tensors * e * model.d_expert * (routed + model.shared_experts)
        terms_u += " + 4E + e·h·k·cf"
        terms_s += f" + {tensors}e·F_e·(k·cf + shared)"
    else:
        split += tensors * e * model.d_ffn
        terms_s += f" + {tensors}e·F"
    if linear_bytes is not None:
        fp8 = fp8_linear_inputs(model, e, linear_bytes, flash_attention, moe=bool(moe))
        unsplit, split = unsplit + fp8.unsplit, split + fp8.split
        terms_u, terms_s = f"({terms_u}{fp8.terms_unsplit})", terms_s + fp8.terms_split
    keys = model.attended(workload.seq)
    if flash_attention:
        scores, terms_a = 4.0 * a, "4a (FlashAttention statistics: fp32 log-sum-exp)"
    elif layout.recompute is Recompute.none:
        scores = a * keys * (e + mask * (1 + e))
        terms_a = "a·s·(3e+1)" if mask else "a·s·e"
    else:
        scores, terms_a = 0.0, ""
    total = tokens * (unsplit / sp + (split + scores) / t)
    per = ("s·b/c" if layout.context_parallel > 1 else "s·b") + " × "
    formula = per + "[" + terms_u + ("/t" if sp > 1 else "") + " + (" + terms_s + (f" + {terms_a}" if terms_a else "")
    formula += ")" + ("/t" if t > 1 else "") + "]"
    return LayerBytes(total, formula)


@dataclass(frozen=True)
class LinearInputs:
    """What an fp8 recipe changes in ``layer_bytes`` per token, as corrections to its 16-bit count."""

    unsplit: float
    split: float
    terms_unsplit: str
    terms_split: str


def fp8_linear_inputs(model: Model, e: float, f: float, flash_attention: bool, *, moe: bool) -> LinearInputs:
    """Transformer Engine under an fp8 recipe: each Linear / LayerNormLinear keeps for its weight-gradient GEMM the
    fp8 copy of its input it quantized for the forward GEMM (f bytes per element, ``prepare_for_saving(inputmat…)``
    / ``(…ln_out…)`` in transformer_engine/pytorch/module/linear.py and layernorm_linear.py), not the 16-bit one:
        QKV input and FC1 input (the norms' outputs; the norms' inputs stay e): (f − e)·h each, unsplit (an MoE
            layer's pre-MLP norm output, which the router and the dispatch take, stays e)
        output-projection input: its own f copy; under FlashAttention the attention keeps the 16-bit output as
            well (FusedAttnFunc saves q, k, v, out in 16 bits without fp8 attention), so + f·a·d_h, else (f − e)·a·d_h
        FC2 input (the activation function's output; the function keeps its 16-bit input): (f − e)·F
    The MoE path (routed experts, their dispatch) is left at e: napkin has not read the grouped GEMMs' saving."""
    a, dh, h = model.n_heads, model.d_head, model.hidden
    linears = 1 if moe else 2  # QKV (and FC1: an MoE layer's norm output goes to the router and the dispatch)
    split = (f if flash_attention else f - e) * a * dh
    terms_s = " + " + ("f" if flash_attention else "(f−e)") + "·a·d_h"
    if not moe:
        split += (f - e) * model.d_ffn
        terms_s += " + (f−e)·F"
    return LinearInputs(linears * (f - e) * h, split, f" + {'2' if linears == 2 else ''}(f−e)·h", terms_s)


def embedding_bytes(model: Model, workload: Workload, layout: Layout) -> float:
    """First stage, one micro-batch: int64 token ids and the embedding-dropout mask."""
    sp = layout.tensor_parallel if layout.sequence_parallel else 1
    tokens = _tokens(workload, layout)
    return tokens * (TOKEN_ID_BYTES + (model.hidden / sp if model.dropout else 0.0))


def output_bytes(
    model: Model, workload: Workload, layout: Layout, element_bytes: float = 2.0, logit_bytes: float = LOSS_LOGIT_BYTES
) -> float:
    """Last stage, one micro-batch: final-norm and output-layer inputs, and the logits the loss holds at its peak
    (``logit_bytes`` per logit: one fp32 copy by default, a stack's own loss may hold more)."""
    sp = layout.tensor_parallel if layout.sequence_parallel else 1
    tokens = _tokens(workload, layout)
    return tokens * (2 * element_bytes * model.hidden / sp + logit_bytes * model.vocab / layout.tensor_parallel)


def in_flight(stage: int, layout: Layout, microbatches: int | None) -> float:
    """Micro-batches' worth of this stage's layers held at once (1F1B, or interleaved with v chunks)."""
    p, v = layout.pipeline_parallel, layout.interleave
    if v == 1:
        held = float(p - stage)
        return held if microbatches is None else float(min(held, microbatches))
    chunks = (p - stage - 1) * 2 + (v - 1) * p + 1
    if microbatches is not None:
        chunks = min(chunks, microbatches * v)
    return chunks / v


def interleave_factor(layout: Layout) -> float:
    """Korthikanti §4.2.3: the first stage's activation memory × (1 + (p − 1)/(p·v)) when interleaved."""
    p, v = layout.pipeline_parallel, layout.interleave
    return 1 + (p - 1) / (p * v) if v > 1 else 1.0
