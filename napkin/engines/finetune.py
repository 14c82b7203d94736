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

from pydantic import Field

from napkin import sources
from napkin.domain.choices import BaseFormat, Finetune, Optimizer, Recompute, Sharding
from napkin.domain.layout import Layout
from napkin.domain.model import Model
from napkin.domain.workload import Workload
from napkin.engines import activations as acts
from napkin.errors import UsageError
from napkin.results.explain import step
from napkin.results.result import ModelResult
from napkin.units import format_bytes, format_bytes_si, format_count

#: bitsandbytes 4-bit: blocks of 64 with an fp32 absmax; double quantization: 8-bit absmaxes in blocks of 256
#: with an fp32 absmax each (QLoRA §3; bitsandbytes functional.quantize_4bit, compress_statistics).
NF4_BYTES = 0.5 + 4 / 64
NF4_DQ_BYTES = 0.5 + 1 / 64 + 4 / (64 * 256)
#: Adapter bytes per trainable parameter: an fp32 weight and an fp32 gradient.
ADAPTER_BYTES = 4.0
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

#: The linear layers of a block, by the names peft targets in Llama-style models (modeling_llama.py).
ATTENTION_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_TARGETS = ("gate_proj", "up_proj", "down_proj")
ALL_TARGETS = ATTENTION_TARGETS + MLP_TARGETS
#: Short names and groups --lora-targets accepts besides the module names.
ALIASES = {
    "q": "q_proj",
    "k": "k_proj",
    "v": "v_proj",
    "o": "o_proj",
    "gate": "gate_proj",
    "up": "up_proj",
    "down": "down_proj",
}
GROUPS = {"all-linear": ALL_TARGETS, "attention": ATTENTION_TARGETS, "mlp": MLP_TARGETS}
#: What QLoRA and LoRA default to here: rank 16 on every linear layer of the blocks. The QLoRA paper (§4)
#: finds adapters on all linear layers necessary to match full fine-tuning; peft's "all-linear" is that set.
DEFAULT_RANK = 16


@dataclass(frozen=True)
class Linear:
    """One kind of linear layer in the blocks: its peft name, its shape, and how many the model has."""

    name: str
    d_in: int
    d_out: int
    count: int


def linears(model: Model) -> list[Linear]:
    """The blocks' linear layers: attention, and the dense FFNs (routed experts are not peft Linear modules)."""
    d, layers = model.hidden, model.layers
    kv = model.n_kv * model.d_head
    out = [
        Linear("q_proj", d, model.d_attn, layers),
        Linear("k_proj", d, kv, layers),
        Linear("v_proj", d, kv, layers),
        Linear("o_proj", model.d_attn, d, layers),
    ]
    dense = layers - model.moe_layers
    if dense:
        if model.mlp_matrices == 3:
            out.append(Linear("gate_proj", d, model.d_ffn, dense))
        out += [Linear("up_proj", d, model.d_ffn, dense), Linear("down_proj", model.d_ffn, d, dense)]
    return out


def targets(names: str | list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """peft target module names from a comma-separated list of names, short names or groups (default all)."""
    if names is None:
        return ALL_TARGETS
    items = [n.strip() for n in (names.split(",") if isinstance(names, str) else names) if str(n).strip()]
    found: list[str] = []
    for item in items:
        key = str(item).lower()
        for name in GROUPS.get(key, (ALIASES.get(key, key),)):
            if name not in ALL_TARGETS:
                raise UsageError(
                    f"lora_targets: {item!r} is not a linear layer napkin knows ({', '.join(ALL_TARGETS)}; "
                    f"{', '.join(ALIASES)}; or {', '.join(GROUPS)})",
                    field="lora_targets",
                )
            if name not in found:
                found.append(name)
    if not found:
        raise UsageError("lora_targets: no module given (e.g. all-linear, or q_proj,v_proj)", field="lora_targets")
    return tuple(found)


def lora_params(model: Model, rank: int, chosen: tuple[str, ...]) -> int:
    """Trainable parameters: Σ over the targeted linear layers of r·(d_in + d_out) (peft's count)."""
    return sum(rank * (x.d_in + x.d_out) * x.count for x in linears(model) if x.name in chosen)


def quantized_weights(model: Model) -> int:
    """Weights bitsandbytes stores in the base format: every linear weight of the blocks, experts included."""
    dense = sum(x.d_in * x.d_out * x.count for x in linears(model))
    experts = model.moe_layers * (model.experts + model.shared_experts) * model.mlp_matrices
    return dense + experts * model.hidden * model.d_expert


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
    """How a model is fine-tuned: the method, the adapters' rank and targets, the base format, the optimizer."""

    finetune: Finetune
    rank: int = DEFAULT_RANK
    targets: tuple[str, ...] = ALL_TARGETS
    base_format: BaseFormat | None = None  # default: nf4 for QLoRA, bf16 for LoRA
    double_quant: bool = True  # only for nf4
    optimizer: Optimizer = Optimizer.adamw
    paged: bool = False

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
    params: float = Field(description="parameters of the base model")
    trainable_params: float = Field(description="adapter parameters (what peft's print_trainable_parameters counts)")
    quantized_params: float = Field(description="base weights stored in base_format (the rest 16/32-bit)")
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
            ("micro-batch", f"{self.micro_batch}; {self.recompute} recomputation"),
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
            text += f"; the other {format_count(rest)} in fp32 (peft prepare_model_for_kbit_training)"
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
    other = 4.0 if adapters.quantized else 2.0  # prepare_model_for_kbit_training: the rest to fp32
    shard = gpus if sharding in (Sharding.zero3, Sharding.fsdp) else 1
    e = 2.0
    layout = Layout(recompute=recompute).resolve(1)
    whole = Layout(recompute=Recompute.none).resolve(1)
    full_layer = acts.layer_bytes(model, workload, whole, element_bytes=e, flash_attention=flash_attention).total
    tokens = workload.seq * workload.micro_batch
    adapted = sum(1 for x in linears(model) if x.name in adapters.targets)
    a_outputs = tokens * adapters.rank * e * adapted  # each adapter's r-wide A·x, kept for B's gradient
    if recompute is Recompute.full:
        kept = acts.layer_bytes(model, workload, layout, element_bytes=e, flash_attention=flash_attention).total
        activations = kept * model.layers
        recomputed = full_layer + a_outputs  # the layer being recomputed holds all of its activations
    else:
        per_layer = acts.layer_bytes(model, workload, layout, element_bytes=e, flash_attention=flash_attention).total
        activations = (per_layer + a_outputs) * model.layers
        recomputed = 0.0
    return {
        "frozen base": (q * per_q + (n - q) * other) / shard,
        "adapters": trainable * ADAPTER_BYTES / shard,
        "adapter gradients": trainable * ADAPTER_BYTES / shard,
        "optimizer states": trainable * STATE_BYTES[adapters.optimizer] / shard,
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
    other = 4.0 if adapters.quantized else 2.0
    total = sum(parts.values())
    cap, cap_source = capacity
    available = cap - reserve_bytes
    per_trainable = 2 * ADAPTER_BYTES + STATE_BYTES[adapters.optimizer]
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
            "Q·b + (N − Q)·b_rest",
            f"{format_count(q)} × {per_q:.4g} B + {format_count(n - q)} × {other:g} B",
            format_bytes(parts["frozen base"]),
            sources.QLORA_NF4 if adapters.quantized else sources.LORA,
        ),
        step(
            "adapters, gradients, optimizer states",
            f"T × ({ADAPTER_BYTES:g} + {ADAPTER_BYTES:g} + {STATE_BYTES[adapters.optimizer]:.4g}) B",
            f"{trainable:,} × {per_trainable:.4g} B",
            format_bytes(parts["adapters"] + parts["adapter gradients"] + parts["optimizer states"]),
            sources.PEFT_DTYPES,
        ),
        step(
            "activations",
            f"per layer × L ({recompute} recomputation) + the adapters' r-wide outputs",
            f"s={workload.seq}, b={workload.micro_batch}, L={model.layers}",
            format_bytes(parts["activations"] + parts["recomputed layer"]),
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
            "per-GPU total ≤ capacity − reserve",
            f"{format_bytes_si(total)} vs {format_bytes_si(cap)} − {format_bytes_si(reserve_bytes)}",
            "yes" if total <= available else "no",
            cap_source,
        )
    )
    notes = []
    if model.is_moe and adapters.targets:
        notes.append("routed experts get no adapters (peft targets nn.Linear modules; transformers fuses experts)")
    return FinetuneMemoryResult(
        hardware=hardware,
        finetune=adapters.finetune,
        base_format=adapters.format,
        double_quant=adapters.dq,
        lora_rank=adapters.rank,
        lora_targets=list(adapters.targets),
        params=float(n),
        trainable_params=float(trainable),
        quantized_params=float(q if adapters.quantized else n),
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
    """The largest model LoRA/QLoRA fine-tuning fits: by bytes per parameter, and (with a model) by depth."""

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
    params: float = Field(description="largest base model by bytes per parameter alone")
    shape: FinetuneMemoryResult | None = Field(default=None, description="the given model, fine-tuned")
    max_layers: int | None = Field(default=None, description="most layers of the given model's shape that fit")
    max_layers_params: float | None = None

    def rows(self) -> list[tuple[str, str]]:
        base = str(self.base_format) + (" (double quantization)" if self.double_quant else "")
        rows = [
            ("hardware", f"{self.gpus:,} × {self.hardware} ({self.capacity_source})"),
            ("frozen base", f"{base}: {self.bytes_per_param:.4g} B per parameter"),
            ("memory for the base", format_bytes(self.memory_bytes)),
            ("upper bound", f"{format_count(self.params)} params: the frozen weights alone"),
        ]
        if self.shape is not None:
            verdict = "fits" if self.shape.fits else "does NOT fit"
            rows.append(
                (
                    "the given model",
                    f"{format_count(self.shape.params)} params: {format_bytes(self.shape.per_gpu_bytes)} per GPU, "
                    f"{verdict}",
                )
            )
        if self.max_layers is not None and self.max_layers_params is not None:
            rows.append(
                (
                    "largest of this shape",
                    f"{self.max_layers} layers: {format_count(self.max_layers_params)} params (width fixed)",
                )
            )
        return rows

    def caption(self) -> str:
        return (
            "upper bound: the frozen weights filling the memory; adapters, activations and the dequantization "
            "workspace come on top (give --model for them); not included: CUDA context, fragmentation (--reserve)"
        )
