"""What one transformer block keeps for backward when only LoRA adapters train, per token (in bytes).

Counted from what autograd saves in transformers 5.24 (models/llama/modeling_llama.py and the families built like
it, sdpa attention) with peft 0.21.2 adapters (tuners/lora/layer.py ``Linear.forward``), as torch's
saved-tensor hooks see it on a tiny model (tests/test_finetune.py measures it, each storage once):

- a frozen linear layer keeps nothing (its input gradient needs only its weight);
- an adapted one keeps the input of its A (``x`` cast to the adapter's dtype: with fp32 adapters on a bf16 base,
  peft's default, each adapter its own 4-byte copy; with adapters in the compute dtype the input tensor itself,
  once however many adapters read it, and nothing for o_proj, whose input is the attention output the attention
  already keeps) and A's r-wide output for B's gradient;
- an RMSNorm keeps its input in fp32 and the fp32 reciprocal RMS per token (``LlamaRMSNorm.forward`` upcasts:
  ``hidden_states.to(torch.float32)``); a LayerNorm its input in the compute dtype and fp32 mean and rstd;
- attention (q, k, v after RoPE, the output and FlashAttention's fp32 log-sum-exp) and the MLP's intermediates
  (gate output, activation output, up output) as ``napkin.engines.activations`` counts them for training.
"""

from __future__ import annotations

from napkin.domain.choices import Norm, QkNorm
from napkin.domain.layout import Layout
from napkin.domain.model import Model
from napkin.domain.workload import Workload
from napkin.engines import activations as acts
from napkin.engines.lora import Linear

#: Module names whose input is the attention's output (already kept by the attention), by group.
ATTENTION_OUTPUT = {"o_proj", "dense", "c_proj", "out_proj"}
#: Module names whose input is the MLP's intermediate (gated product or activation output), by group "mlp".
MLP_OUTPUT = {"down_proj", "dense_4h_to_h", "c_proj", "fc_out"}
#: fp32 per token of a norm's saved statistics: RMSNorm's reciprocal RMS (4 B), LayerNorm's mean and rstd (8 B).
RMS_STAT_BYTES = 4
LN_STAT_BYTES = 8


def norm_bytes(model: Model, element_bytes: float) -> float:
    """Per token: the block's norms' saved inputs and statistics (fp32 inputs for RMSNorm, as transformers upcasts),
    and the query/key norms' (per head or over the whole projection)."""
    h = model.hidden
    out: float
    if model.norm is Norm.rmsnorm:
        out = model.norms_per_layer * (4 * h + RMS_STAT_BYTES)
    elif model.norm is Norm.layernorm_nobias:  # CohereLayerNorm.forward upcasts too (modeling_cohere.py)
        out = model.norms_per_layer * (4 * h + LN_STAT_BYTES)
    else:
        out = model.norms_per_layer * (element_bytes * h + LN_STAT_BYTES)
    width = (model.n_heads + model.n_kv) * model.d_head
    if model.qk_norm is QkNorm.head:
        out += 4 * width + RMS_STAT_BYTES * (model.n_heads + model.n_kv)
    elif model.qk_norm is QkNorm.full:
        out += 4 * width + 2 * RMS_STAT_BYTES
    return out


def _input_key(x: Linear) -> tuple[str, str, int]:
    """Which tensor a linear layer reads: the block's normed input, the attention output, the MLP intermediate, or
    (MLA's q_b_proj and kv_b_proj) a low-rank latent, told apart by width."""
    if x.group == "attention" and x.name in ATTENTION_OUTPUT:
        return ("attention", "output", x.d_in)
    if x.group == "mlp" and x.name in MLP_OUTPUT:
        return ("mlp", "output", x.d_in)
    return (x.group, "input", x.d_in)


def adapter_bytes(picked: list[Linear], rank: int, adapter_bytes: float, element_bytes: float) -> float:
    """Per token, summed over the block's layers (``count`` of each spread evenly): the inputs the adapters' A keep
    and their r-wide outputs. Parameters peft wraps (fused experts, router weights) add B·A to the weight instead
    and keep neither."""
    modules = [x for x in picked if not x.wrapped]
    outputs = sum(rank * adapter_bytes * x.count for x in modules)
    if adapter_bytes != element_bytes:  # peft casts x to the adapter's dtype: a copy per adapter
        inputs = sum(adapter_bytes * x.d_in * x.count for x in modules)
    else:
        seen: set[tuple[str, str, int, int]] = set()
        for x in modules:
            if _input_key(x)[:2] != ("attention", "output"):
                seen.add((*_input_key(x), x.count))  # the same tensor in the same layers
        inputs = sum(element_bytes * width * count for _, _, width, count in seen)
    return outputs + inputs


def layer_total(
    model: Model,
    workload: Workload,
    picked: list[Linear],
    rank: int,
    adapter_dtype_bytes: float,
    *,
    flash_attention: bool,
    element_bytes: float = 2.0,
) -> float:
    """Bytes all blocks keep for backward without recomputation, for one micro-batch: attention and MLP
    intermediates (training's count less the inputs of the linear layers, which a frozen layer does not keep),
    the norms' fp32 inputs, and the adapters' inputs and outputs."""
    e = element_bytes
    tokens = workload.seq * workload.micro_batch
    whole = Layout().resolve(1)
    training = acts.layer_bytes(model, workload, whole, element_bytes=e, flash_attention=flash_attention).total
    core = training - tokens * 4 * e * model.hidden  # training's linear-layer inputs (4e·h per token) dropped
    per_layer = core + tokens * norm_bytes(model, e)
    return per_layer * model.layers + tokens * adapter_bytes(picked, rank, adapter_dtype_bytes, e)
