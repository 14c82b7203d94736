"""Fine-tuning with adapters: LoRA (Hu et al. 2021) and QLoRA (Dettmers et al. 2023).

Pure functions over ``Model``. A LoRA adapter on a d_in → d_out linear layer adds A (r × d_in) and
B (d_out × r): r·(d_in + d_out) trainable parameters (peft ``LoraLayer.update_layer``). The base is frozen:
it keeps its weights and nothing else (no gradient, no master copy, no optimizer state), stored as

    bf16: 2 B;  int8 (LLM.int8, Dettmers et al. 2022): 1 B + an fp32 scale per output row;
    nf4 (QLoRA §3): 4 bits + an fp32 absmax per block of 64 = 4.5 bits; with double quantization the absmaxes
         are 8-bit with an fp32 constant per 256 of them: 4 + 8/64 + 32/(64·256) = 4.127 bits.

bitsandbytes quantizes the blocks' linear weights (transformers leaves the LM head in the compute dtype);
embeddings, head and norms stay 16-bit, and peft's ``prepare_model_for_kbit_training`` (the QLoRA recipe)
casts them to fp32 and turns gradient checkpointing on. Adapters are fp32 (peft ``autocast_adapter_dtype``),
with fp32 gradients and optimizer states. The activations are training's: the backward runs through the
frozen layers to reach the adapters below, and each adapter keeps its input (the frozen matmul no longer
does) and its r-wide A output. A quantized layer dequantizes its weight to 16 bits for each matmul, one at a
time: the largest such matrix is a workspace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import Field, computed_field

from napkin import sources
from napkin.domain.choices import BaseFormat, Finetune, Optimizer, Recompute, Sharding, TrainDtype
from napkin.domain.layout import Layout
from napkin.domain.model import Model
from napkin.domain.workload import Workload
from napkin.engines import activations as acts
from napkin.errors import UsageError
from napkin.results.explain import step
from napkin.results.result import ModelResult
from napkin.units import format_bytes, format_count

#: bitsandbytes 4-bit: blocks of 64 with an fp32 absmax; double quantization: 8-bit absmaxes in blocks of 256
#: with an fp32 absmax each (QLoRA §3; bitsandbytes functional.quantize_4bit, compress_statistics).
NF4_BYTES = 0.5 + 4 / 64
NF4_DQ_BYTES = 0.5 + 1 / 64 + 4 / (64 * 256)
#: Optimizer-state bytes per trainable parameter: fp32 moments, or bitsandbytes' 8-bit blocks of 2048 with an
#: fp32 absmax (Dettmers et al. 2021, arXiv:2110.02861).
STATE_BYTES = {
    Optimizer.adamw: 8.0,
    Optimizer.adam: 8.0,
    Optimizer.adam_8bit: 2 * (1 + 4 / 2048),
    Optimizer.lion: 4.0,
    Optimizer.sgd_momentum: 4.0,
    Optimizer.sgd: 0.0,
}

#: --lora-targets groups: peft's "all-linear" (every nn.Linear / Conv1D but the LM head), and its parts.
ALL_LINEAR = "all-linear"
GROUPS = (ALL_LINEAR, "attention", "mlp", "router")
#: Short names --lora-targets accepts for the Llama-style module names.
ALIASES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "up": "up_proj", "down": "down_proj"}
#: The default: every linear layer. The QLoRA paper (§4) finds adapters on all linear layers necessary to match
#: full fine-tuning; peft's "all-linear" is that set. Rank 16 is peft's examples' and the QLoRA scripts' choice.
ALL_TARGETS: tuple[str, ...] = (ALL_LINEAR,)
DEFAULT_RANK = 16
#: max-model without a model: the sequence and micro-batch a fine-tuning run defaults to (huggingface/trl
#: SFTConfig max_length = 1024, per_device_train_batch_size = 8 in TrainingArguments but 1 in most QLoRA recipes).
DEFAULT_SEQ = 1024
DEFAULT_SEQ_SOURCE = "default: huggingface/trl SFTConfig max_length 1024"
#: ... and the shapes it scales: the Llama 3 herd (Grattafiori et al. 2024, Table 3), each with as many of its own
#: layers as fit (width, vocabulary and embeddings as published).
REFERENCE_SHAPES = ("llama3.1-8b", "llama3.1-70b", "llama3.1-405b")
#: The module layout assumed: transformers 5 (v5.24, what the hf_config reader cites and `pip install transformers`
#: gives), where every mixture-of-experts family keeps its routed experts as fused 3-D parameters
#: (``experts.gate_up_proj``, ``experts.down_proj``) that peft's "all-linear" does not adapt; the shared experts
#: are nn.Linear MLPs that it does; routers are bare parameters except PhiMoE's and Llama 4's ``router`` (nn.Linear
#: subclasses) and Qwen2-MoE's ``shared_expert_gate``. transformers 4.x built each routed expert of Mixtral, Qwen-MoE
#: and DeepSeek from nn.Linear, so the same LoRA there also adapted every expert.
MOE_LAYOUT = "transformers 5 modeling_<family>.py: routed experts are fused 3-D parameters (no adapters)"
#: Routers that are nn.Linear modules (peft's "all-linear" adapts them), by model_type.
LINEAR_ROUTER = {"phimoe": "router", "llama4_text": "router"}


@dataclass(frozen=True)
class Linear:
    """One kind of linear layer (nn.Linear or GPT-2's Conv1D): its module name, its shape, how many the model has,
    and its group (attention, mlp, router)."""

    name: str
    d_in: int
    d_out: int
    count: int
    group: str


def _attention(model: Model) -> list[Linear]:
    d, n, mt = model.hidden, model.layers, model.model_type
    kv = model.n_kv * model.d_head
    if model.is_mla:  # DeepSeek-V2 §2.1.2-2.1.3; modeling_deepseek_v3.py DeepseekV3Attention
        assert model.kv_lora_rank is not None and model.rope_head_dim is not None
        a, nope, rope = model.n_heads, model.d_head, model.rope_head_dim
        v = model.v_head_dim or nope
        q = a * (nope + rope)
        qr = model.q_lora_rank
        qs = (
            [Linear("q_a_proj", d, qr, n, "attention"), Linear("q_b_proj", qr, q, n, "attention")]
            if qr
            else [Linear("q_proj", d, q, n, "attention")]
        )
        return [
            *qs,
            Linear("kv_a_proj_with_mqa", d, model.kv_lora_rank + rope, n, "attention"),
            Linear("kv_b_proj", model.kv_lora_rank, a * (nope + v), n, "attention"),
            Linear("o_proj", a * v, d, n, "attention"),
        ]
    fused = model.d_attn + 2 * kv
    if mt == "phi3":  # modeling_phi3.py: one qkv_proj
        return [Linear("qkv_proj", d, fused, n, "attention"), Linear("o_proj", model.d_attn, d, n, "attention")]
    if mt in ("falcon", "gpt_neox"):  # modeling_falcon.py / modeling_gpt_neox.py: query_key_value, dense
        return [Linear("query_key_value", d, fused, n, "attention"), Linear("dense", model.d_attn, d, n, "attention")]
    if mt == "gpt2":  # modeling_gpt2.py: Conv1D c_attn (d → 3d) and c_proj
        return [Linear("c_attn", d, fused, n, "attention"), Linear("c_proj", model.d_attn, d, n, "attention")]
    out = "out_proj" if mt == "gptj" else "o_proj"
    return [
        Linear("q_proj", d, model.d_attn, n, "attention"),
        Linear("k_proj", d, kv, n, "attention"),
        Linear("v_proj", d, kv, n, "attention"),
        Linear(out, model.d_attn, d, n, "attention"),
    ]


def _mlp(model: Model, width: int, count: int) -> list[Linear]:
    d, mt = model.hidden, model.model_type
    if not count:
        return []
    if mt in ("falcon", "gpt_neox"):
        names = ("", "dense_h_to_4h", "dense_4h_to_h")
    elif mt == "gpt2":
        names = ("", "c_fc", "c_proj")
    elif mt == "gptj":
        names = ("", "fc_in", "fc_out")
    elif mt == "phi3":  # Phi3MLP: gate_up_proj (d → 2F), down_proj
        return [Linear("gate_up_proj", d, 2 * width, count, "mlp"), Linear("down_proj", width, d, count, "mlp")]
    else:
        names = ("gate_proj", "up_proj", "down_proj")
    out = [Linear(names[1], d, width, count, "mlp"), Linear(names[2], width, d, count, "mlp")]
    if model.mlp_matrices == 3:
        out.insert(0, Linear(names[0] or "gate_proj", d, width, count, "mlp"))
    return out


def linears(model: Model) -> list[Linear]:
    """The blocks' nn.Linear (and GPT-2 Conv1D) modules as transformers builds them for ``model.model_type``
    (Llama-style names when unknown), mixture-of-experts layers as ``MOE_LAYOUT`` says."""
    out = _attention(model) + _mlp(model, model.d_ffn, model.layers - model.moe_layers)
    moe, mt = model.moe_layers, model.model_type or ""
    if not moe:
        return out
    if model.shared_experts:  # one MLP shared_experts × the expert width (DeepseekV3MoE, Qwen2MoeSparseMoeBlock)
        out += _mlp(model, model.d_expert * model.shared_experts, moe)
    if mt in LINEAR_ROUTER:
        out.append(Linear(LINEAR_ROUTER[mt], model.hidden, model.experts, moe, "router"))
    if mt == "qwen2_moe" and model.shared_experts:
        out.append(Linear("shared_expert_gate", model.hidden, 1, moe, "router"))
    return out


def expert_weights(model: Model) -> int:
    """Routed-expert weights: fused 3-D parameters (``MOE_LAYOUT``), quantized by bitsandbytes, never adapted."""
    return model.moe_layers * model.experts * model.mlp_matrices * model.hidden * model.d_expert


def targets(names: str | list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """What --lora-targets names: a comma-separated list of module names (each family's own, as peft matches
    them), short names (q, k, v, o, up, down) or groups (all-linear, attention, mlp, router); default all-linear.
    ``adapted`` resolves them against a model."""
    if names is None:
        return ALL_TARGETS
    items = [n.strip() for n in (names.split(",") if isinstance(names, str) else names) if str(n).strip()]
    found: list[str] = []
    for item in items:
        key = str(item).lower()
        name = ALIASES.get(key, key)
        if name not in GROUPS and (not name.replace("_", "").isalnum() or name in ("lm_head", "embed_tokens", "wte")):
            raise UsageError(
                f"lora_targets: {item!r} is not a linear layer of the blocks (a module name such as q_proj, "
                f"qkv_proj, query_key_value, c_attn; short names {', '.join(ALIASES)}; or {', '.join(GROUPS)})",
                field="lora_targets",
            )
        if name not in found:
            found.append(name)
    if not found:
        raise UsageError("lora_targets: no module given (e.g. all-linear, or q_proj,v_proj)", field="lora_targets")
    return tuple(found)


def adapted(model: Model, chosen: tuple[str, ...]) -> list[Linear]:
    """The linear layers ``chosen`` (module names or groups) adapts in ``model``; a UsageError naming
    lora_targets when they match none (as peft refuses target modules not found in the base model)."""
    picked = [x for x in linears(model) if x.name in chosen or x.group in chosen or (ALL_LINEAR in chosen)]
    if not picked:
        names = sorted({x.name for x in linears(model)})
        raise UsageError(
            f"lora_targets: {', '.join(chosen)} matches no linear layer of this model (its modules: "
            f"{', '.join(names)}; or {', '.join(GROUPS)})",
            field="lora_targets",
        )
    return picked


def lora_params(model: Model, rank: int, chosen: tuple[str, ...]) -> int:
    """Trainable parameters: Σ over the targeted linear layers of r·(d_in + d_out) (peft's count); a UsageError
    naming lora_rank when r exceeds every adapted layer's smaller side (a rank no matrix there has)."""
    picked = adapted(model, chosen)
    widest = max(min(x.d_in, x.d_out) for x in picked)
    if rank > widest:
        raise UsageError(
            f"lora_rank: {rank:,} is above the rank of every adapted layer (at most {widest:,} here, "
            "the smaller side of the widest matrix)",
            field="lora_rank",
        )
    return sum(rank * (x.d_in + x.d_out) * x.count for x in picked)


def quantized_weights(model: Model) -> int:
    """Weights bitsandbytes stores in the base format: every linear weight of the blocks, experts included."""
    return sum(x.d_in * x.d_out * x.count for x in linears(model)) + expert_weights(model)


def largest_matrix(model: Model) -> int:
    """Elements of the largest linear weight: the dequantization workspace of a quantized base."""
    sizes = [x.d_in * x.d_out for x in linears(model)]
    if model.is_moe:
        sizes.append(model.hidden * model.d_expert)
    return max(sizes)


def base_bytes(fmt: BaseFormat, double_quant: bool, d_in: int) -> float:
    """Bytes per frozen linear weight: bf16 2; int8 1 + 4/d_in (an fp32 scale per row); nf4 (4.5 or 4.127 bits)."""
    if fmt is BaseFormat.nf4:
        return NF4_DQ_BYTES if double_quant else NF4_BYTES
    if fmt is BaseFormat.int8:
        return 1.0 + 4 / d_in
    return 2.0


@dataclass(frozen=True)
class Adapters:
    """How a model is fine-tuned: the method, the adapters' rank and targets, the base format, the optimizer, and
    the dtypes of the adapters and of the embeddings/LM head (None: peft's, see ``adapter_bytes``)."""

    finetune: Finetune
    rank: int = DEFAULT_RANK
    targets: tuple[str, ...] = ALL_TARGETS
    base_format: BaseFormat | None = None  # default: nf4 for QLoRA, bf16 for LoRA
    double_quant: bool = True  # only for nf4
    optimizer: Optimizer = Optimizer.adamw
    paged: bool = False
    adapter_dtype: TrainDtype = TrainDtype.fp32
    embedding_dtype: TrainDtype | None = None

    @property
    def format(self) -> BaseFormat:
        if self.base_format is not None:
            return self.base_format
        return BaseFormat.nf4 if self.finetune is Finetune.qlora else BaseFormat.bf16

    @property
    def quantized(self) -> bool:
        return self.format is not BaseFormat.bf16

    @property
    def dq(self) -> bool:
        return self.double_quant and self.format is BaseFormat.nf4

    @property
    def adapter_bytes(self) -> float:
        """Bytes of an adapter weight, and of its gradient: fp32 (peft's autocast_adapter_dtype, the default) or
        bf16 (Dettmers' qlora.py casts every LoraLayer to bf16)."""
        return 4.0 if self.adapter_dtype is TrainDtype.fp32 else 2.0

    @property
    def rest_dtype(self) -> TrainDtype:
        """The embeddings', LM head's and norms' dtype: fp32 beside a quantized base (peft's
        prepare_model_for_kbit_training, the default), else bf16 (the base's own)."""
        if self.embedding_dtype is not None:
            return self.embedding_dtype
        return TrainDtype.fp32 if self.quantized else TrainDtype.bf16

    @property
    def rest_bytes(self) -> float:
        return 4.0 if self.rest_dtype is TrainDtype.fp32 else 2.0

    @property
    def state_bytes(self) -> float:
        """Optimizer-state bytes per trainable parameter: torch's optimizers keep states in the parameter's dtype
        (halved for bf16 adapters); bitsandbytes' paged 32-bit and 8-bit optimizers keep their own."""
        full = STATE_BYTES[self.optimizer]
        if self.adapter_dtype is TrainDtype.bf16 and not self.paged and self.optimizer is not Optimizer.adam_8bit:
            return full / 2
        return full


class FinetuneMemoryResult(ModelResult):
    """Per-GPU memory of LoRA / QLoRA fine-tuning, in bytes."""

    title: ClassVar[str] = "Fine-tuning memory per GPU"
    headline: ClassVar[tuple[str, ...]] = ("per_gpu_bytes", "fits", "hardware")

    hardware: str
    finetune: Finetune
    base_format: BaseFormat
    double_quant: bool
    lora_rank: int
    lora_targets: list[str]
    adapter_dtype: TrainDtype = Field(description="adapters and their gradients")
    embedding_dtype: TrainDtype = Field(description="embeddings, LM head and norms beside the frozen base")
    params: int = Field(description="parameters of the base model")
    trainable_params: int = Field(description="adapter parameters (what peft's print_trainable_parameters counts)")
    quantized_params: int = Field(description="base weights stored in base_format (the rest 16/32-bit)")
    optimizer: Optimizer
    paged: bool
    micro_batch: int
    recompute: Recompute
    gpus: int
    sharding: Sharding
    breakdown: dict[str, float] = Field(description="bytes per GPU by component")
    per_gpu_bytes: float
    pageable_bytes: float = Field(description="paged optimizer states: moved to CPU memory under pressure")
    memory_bytes: float
    capacity_source: str
    reserve_bytes: float
    fits: bool
    headroom_bytes: float

    def heading(self) -> str:
        return f"Fine-tuning memory per GPU: {self.finetune}, {format_count(self.params)} params"

    def rows(self) -> list[tuple[str, str]]:
        share = self.trainable_params / self.params
        base = str(self.base_format) + (" (double quantization)" if self.double_quant else "")
        rows = [
            (
                "micro-batch",
                f"{self.micro_batch}; "
                + ("no" if self.recompute is Recompute.none else str(self.recompute))
                + " recomputation",
            ),
            ("base weights", self._base_text(base)),
            (
                "adapters",
                f"rank {self.lora_rank} on {', '.join(self.lora_targets)}: {format_count(self.trainable_params)} "
                f"trainable ({share:.2%})",
            ),
        ]
        rows += [(k, format_bytes(v)) for k, v in self.breakdown.items() if v]
        rows.append(("total per GPU", format_bytes(self.per_gpu_bytes)))
        rows.append((f"{self.hardware} capacity", f"{format_bytes(self.memory_bytes)}, {self.capacity_source}"))
        if self.reserve_bytes:
            rows.append(("reserved", format_bytes(self.reserve_bytes)))
        if self.fits:
            rows.append(("verdict", f"fits: headroom {format_bytes(self.headroom_bytes)}"))
        elif self.pageable_bytes and self.headroom_bytes + self.pageable_bytes >= 0:
            rows.append(("verdict", "fits only by paging optimizer states to CPU memory (slower steps)"))
        else:
            rows.append(("verdict", f"does NOT fit: short by {format_bytes(-self.headroom_bytes)}"))
        return rows

    def _base_text(self, base: str) -> str:
        text = f"{format_count(self.quantized_params)} linear weights in {base}"
        rest = self.params - self.quantized_params
        if rest and self.base_format is not BaseFormat.bf16:
            text += f"; the other {format_count(rest)} in {self.embedding_dtype}"
        return text

    def caption(self) -> str:
        return "not included: CUDA context, allocator fragmentation, communication buffers (use --reserve)"


def finetune_bytes(
    model: Model,
    adapters: Adapters,
    workload: Workload,
    *,
    recompute: Recompute,
    flash_attention: bool,
    gpus: int = 1,
    sharding: Sharding = Sharding.none,
) -> dict[str, float]:
    """Bytes per GPU by component (see the module docstring)."""
    if adapters.optimizer not in STATE_BYTES:
        raise UsageError(
            f"optimizer: {adapters.optimizer} is not modelled for adapters ({', '.join(STATE_BYTES)})",
            field="optimizer",
        )
    n, q = model.params(), quantized_weights(model)
    trainable = lora_params(model, adapters.rank, adapters.targets)
    per_q = base_bytes(adapters.format, adapters.dq, model.hidden)
    other = adapters.rest_bytes  # prepare_model_for_kbit_training: the rest to fp32
    shard = gpus if sharding in (Sharding.zero3, Sharding.fsdp) else 1
    e = 2.0
    layout = Layout(recompute=recompute).resolve(1)
    whole = Layout(recompute=Recompute.none).resolve(1)
    full_layer = acts.layer_bytes(model, workload, whole, element_bytes=e, flash_attention=flash_attention).total
    tokens = workload.seq * workload.micro_batch
    # each adapter's r-wide A·x, kept for B's gradient: per token, summed over the layers
    a_outputs = tokens * adapters.rank * e * sum(x.count for x in adapted(model, adapters.targets))
    if recompute is Recompute.full:
        kept = acts.layer_bytes(model, workload, layout, element_bytes=e, flash_attention=flash_attention).total
        activations = kept * model.layers
        recomputed = full_layer + a_outputs / model.layers  # the layer being recomputed holds all of its own
    else:
        per_layer = acts.layer_bytes(model, workload, layout, element_bytes=e, flash_attention=flash_attention).total
        activations = per_layer * model.layers + a_outputs
        recomputed = 0.0
    return {
        "frozen base": (q * per_q + (n - q) * other) / shard,
        "adapters": trainable * adapters.adapter_bytes / shard,
        "adapter gradients": trainable * adapters.adapter_bytes / shard,
        "optimizer states": trainable * adapters.state_bytes / shard,
        "activations": activations,
        "recomputed layer": recomputed,
        "embedding and logits": acts.embedding_bytes(model, workload, layout)
        + acts.output_bytes(model, workload, layout, e),
        "dequantization workspace": largest_matrix(model) * e if adapters.quantized else 0.0,
    }


def finetune_memory(
    model: Model,
    adapters: Adapters,
    workload: Workload,
    *,
    hardware: str,
    capacity: tuple[float, str],
    recompute: Recompute,
    flash_attention: bool,
    gpus: int = 1,
    sharding: Sharding = Sharding.none,
    reserve_bytes: float = 0.0,
) -> FinetuneMemoryResult:
    """Per-GPU bytes of LoRA/QLoRA fine-tuning and whether they fit in ``capacity`` (bytes, its source)."""
    parts = finetune_bytes(
        model, adapters, workload, recompute=recompute, flash_attention=flash_attention, gpus=gpus, sharding=sharding
    )
    n, q = model.params(), quantized_weights(model)
    trainable = lora_params(model, adapters.rank, adapters.targets)
    per_q = base_bytes(adapters.format, adapters.dq, model.hidden)
    other = adapters.rest_bytes
    total = sum(parts.values())
    cap, cap_source = capacity
    available = cap - reserve_bytes
    shard = gpus if sharding in (Sharding.zero3, Sharding.fsdp) else 1
    per_gpu = f" ÷ {shard} GPUs ({sharding})" if shard > 1 else ""
    per_trainable = 2 * adapters.adapter_bytes + adapters.state_bytes
    rest_source = sources.PEFT_DTYPES if adapters.embedding_dtype is None else sources.QLORA_SCRIPT
    trainable_bytes = parts["adapters"] + parts["adapter gradients"] + parts["optimizer states"]
    steps = [
        step(
            "trainable parameters",
            "Σ over the targeted linear layers of r·(d_in + d_out)",
            f"r = {adapters.rank}; {', '.join(adapters.targets)}",
            f"{trainable:,}",
            sources.LORA,
        ),
        step(
            "frozen base",
            "(Q·b + (N − Q)·b_rest)" + (" ÷ GPUs" if shard > 1 else ""),
            f"({q:,} × {per_q:.6g} B + {n - q:,} × {other:g} B){per_gpu}",
            format_bytes(parts["frozen base"]),
            f"{sources.QLORA_NF4 if adapters.quantized else sources.LORA}; {rest_source}",
        ),
        step(
            "adapters, gradients, optimizer states",
            f"T × ({adapters.adapter_bytes:g} + {adapters.adapter_bytes:g} + {adapters.state_bytes:.6g}) B"
            + (" ÷ GPUs" if shard > 1 else ""),
            f"{trainable:,} × {per_trainable:.6g} B{per_gpu}",
            format_bytes(trainable_bytes),
            sources.PEFT_DTYPES if adapters.adapter_dtype is TrainDtype.fp32 else sources.QLORA_SCRIPT,
        ),
        step(
            "activations",
            f"per layer × L ({recompute} recomputation) + the adapters' r-wide outputs",
            f"s={workload.seq:,}, b={workload.micro_batch}, L={model.layers}",
            format_bytes(parts["activations"] + parts["recomputed layer"]),
            sources.KORTHIKANTI,
        ),
        step(
            "embedding and logits",
            "token ids + the final norm's and head's inputs + the fp32 logits the loss keeps",
            f"s={workload.seq:,}, b={workload.micro_batch}, V={model.vocab:,}",
            format_bytes(parts["embedding and logits"]),
            sources.KORTHIKANTI,
        ),
    ]
    if adapters.quantized:
        steps.append(
            step(
                "dequantization workspace",
                "largest linear weight × 2 B, dequantized for each matmul",
                f"{largest_matrix(model):,} × 2 B",
                format_bytes(parts["dequantization workspace"]),
                sources.QLORA_NF4,
            )
        )
    steps.append(
        step(
            "fits?",
            "per-GPU total (the sum of the above) ≤ capacity − reserve",
            f"{format_bytes(total)} vs {format_bytes(cap)} − {format_bytes(reserve_bytes)}",
            "yes" if total <= available else "no",
            cap_source,
        )
    )
    notes = []
    if model.is_moe:
        notes.append(
            f"module layout: {MOE_LAYOUT}; shared experts and nn.Linear routers are adapted (peft 0.21's "
            "transformers-5 weight conversion may instead put adapters on the fused experts of Mixtral and "
            "DeepSeek: not counted here)"
        )
    return FinetuneMemoryResult(
        hardware=hardware,
        finetune=adapters.finetune,
        base_format=adapters.format,
        double_quant=adapters.dq,
        lora_rank=adapters.rank,
        lora_targets=list(adapters.targets),
        adapter_dtype=adapters.adapter_dtype,
        embedding_dtype=adapters.rest_dtype,
        params=n,
        trainable_params=trainable,
        quantized_params=q if adapters.quantized else n,
        optimizer=adapters.optimizer,
        paged=adapters.paged,
        micro_batch=workload.micro_batch,
        recompute=recompute,
        gpus=gpus,
        sharding=sharding,
        breakdown=parts,
        per_gpu_bytes=total,
        pageable_bytes=parts["optimizer states"] if adapters.paged else 0.0,
        memory_bytes=cap,
        capacity_source=cap_source,
        reserve_bytes=reserve_bytes,
        fits=total <= available,
        headroom_bytes=available - total,
        steps=steps,
        notes=notes,
    )


def bytes_per_param(adapters: Adapters, hidden: int = 8192) -> float:
    """Frozen-base bytes per parameter when every parameter is a quantized weight (max-model without a shape)."""
    return base_bytes(adapters.format, adapters.dq, hidden)


def layer_scaled(model: Model, layers: int) -> Model:
    """``model`` with ``layers`` blocks (width fixed), its dense and windowed layers scaled alike."""
    dense = round(model.dense_layers * layers / model.layers)
    local = None if model.local_layers is None else round(model.local_layers * layers / model.layers)
    return model.model_copy(update={"layers": layers, "dense_layers": dense, "local_layers": local})


def max_layers(model: Model, fits: Any) -> int | None:
    """The most layers of ``model``'s shape for which ``fits(model)`` holds (None: not even one)."""
    if not fits(layer_scaled(model, 1)):
        return None
    lo, hi = 1, 2
    while fits(layer_scaled(model, hi)) and hi < 1 << 16:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(layer_scaled(model, mid)) else (lo, mid)
    return lo


class FinetuneMaxResult(ModelResult):
    """The largest model LoRA/QLoRA fine-tuning fits: its whole memory (frozen base, embeddings, adapters and their
    states, activations) for a given model's shape, or for the Llama 3 shapes without one."""

    title: ClassVar[str] = "Largest model to fine-tune"
    headline: ClassVar[tuple[str, ...]] = ("params", "gpus", "hardware")

    hardware: str
    gpus: int
    finetune: Finetune
    base_format: BaseFormat
    double_quant: bool
    bytes_per_param: float = Field(description="frozen-base bytes per parameter (all of them in the base format)")
    memory_bytes: float = Field(description="capacity − reserve, summed over the GPUs when sharded")
    capacity_source: str
    reserve_bytes: float
    params: float = Field(description="upper bound: the frozen weights alone filling the memory")
    shape: FinetuneMemoryResult | None = Field(default=None, description="the given (or reference) model, fine-tuned")
    reference: str | None = Field(default=None, description="the published shape scaled when no model is given")
    shape_layers: int | None = Field(default=None, description="layers of the reference shape that fit")
    seq: int | None = None
    micro_batch: int = 1
    max_layers: int | None = Field(default=None, description="most layers of the given model's shape that fit")
    max_layers_params: int | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def fits_params(self) -> int | None:
        """Parameters of the largest model that fits with everything counted (None: none does)."""
        if self.reference is not None and self.shape is not None:
            return self.shape.params
        if self.max_layers_params is not None:
            return self.max_layers_params
        return None

    def rows(self) -> list[tuple[str, str]]:
        base = str(self.base_format) + (" (double quantization)" if self.double_quant else "")
        rows = [
            ("hardware", f"{self.gpus:,} × {self.hardware} ({self.capacity_source})"),
            ("frozen base", f"{base}: {self.bytes_per_param:.4g} B per parameter"),
            ("memory", format_bytes(self.memory_bytes)),
        ]
        if self.seq is not None:
            rows.append(("micro-batch", str(self.micro_batch)))
        if self.reference is not None and self.shape is not None:
            layers = self.shape_layers
            rows.append(
                (
                    "largest that fits",
                    f"{format_count(self.shape.params)} params: {self.reference}'s shape with {layers} layers, "
                    f"{format_bytes(self.shape.per_gpu_bytes)} per GPU",
                )
            )
        elif self.shape is not None:
            verdict = "fits" if self.shape.fits else "does NOT fit"
            rows.append(
                (
                    "the given model",
                    f"{format_count(self.shape.params)} params: {format_bytes(self.shape.per_gpu_bytes)} per GPU, "
                    f"{verdict}",
                )
            )
        elif self.seq is not None:
            rows.append(("largest that fits", "none of the Llama 3 shapes, even with one layer"))
        if self.max_layers is not None and self.max_layers_params is not None:
            rows.append(
                (
                    "largest of this shape",
                    f"{self.max_layers} layers: {format_count(self.max_layers_params)} params (width fixed)",
                )
            )
        rows.append(("upper bound", f"{format_count(self.params)} params: the frozen weights alone"))
        return rows

    def caption(self) -> str:
        return (
            "largest that fits: frozen base, embeddings and head, adapters, their gradients and optimizer states, "
            "activations and the dequantization workspace; not included: CUDA context, fragmentation (--reserve)"
        )
