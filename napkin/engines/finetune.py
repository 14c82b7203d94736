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
from typing import ClassVar

from pydantic import Field

from napkin import sources
from napkin.domain.choices import BaseFormat, Finetune, Optimizer, Recompute, Sharding, TrainDtype
from napkin.domain.layout import Layout
from napkin.domain.model import Model
from napkin.domain.workload import Workload
from napkin.engines import activations as acts
from napkin.engines import finetune_activations as fa
from napkin.engines.lora import (
    ALL_TARGETS,
    CONVERSION,
    CONVERTED,
    DEFAULT_RANK,
    MOE_LAYOUT,
    adapted,
    largest_matrix,
    lora_params,
    quantized_weights,
)
from napkin.errors import UsageError
from napkin.results.explain import step
from napkin.results.result import ModelResult
from napkin.units import format_bytes, format_count

#: Bytes per logit the loss's backward adds to the log-probabilities it kept: nll_loss's fp32 gradient and
#: log_softmax's fp32 gradient of the logits, both live at once (transformers 5.24 loss/loss_utils.py
#: ForCausalLMLoss upcasts the logits to fp32 before torch's cross_entropy = log_softmax + nll_loss).
LOSS_GRADIENT_BYTES = 8
#: Memory a fine-tuning process holds beyond the tensors counted here, as the device reports it: the CUDA context,
#: cuBLAS and FlashAttention workspaces, what the caching allocator keeps reserved. Not published as such; fitted
#: on the calibration rows of Qwen's LoRA profile (QwenLM/Qwen README @ 2df8e8a, "Profiling of Memory and Speed":
#: Qwen-7B and Qwen-14B at 256 tokens, where the activations are smallest), where the published total exceeds
#: the counted tensors by 1.49 and 1.61 GB: their mean. Its other 16 rows (Qwen-1.8B at every length, 7B and 14B
#: at 512-8,192 tokens) are the validation set (tests/test_finetune_published.py).
RUNTIME_BYTES = 1.55e9
RUNTIME = "runtime"
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
        return (
            f"{RUNTIME}: CUDA context, workspaces and allocator reserve, fitted to Qwen's published LoRA profile; "
            "not included: communication buffers of multi-GPU runs (use --reserve)"
        )


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
    picked = adapted(model, adapters.targets)
    every = fa.layer_total(
        model, workload, picked, adapters.rank, adapters.adapter_bytes, flash_attention=flash_attention, element_bytes=e
    )
    if recompute is Recompute.full:  # gradient checkpointing: each block's input, and one block recomputed whole
        kept = acts.layer_bytes(model, workload, layout, element_bytes=e, flash_attention=flash_attention).total
        activations = kept * model.layers
        recomputed = every / model.layers
    else:
        activations = every
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
        "loss backward": workload.seq * workload.micro_batch * model.vocab * LOSS_GRADIENT_BYTES,
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
    parts[RUNTIME] = RUNTIME_BYTES
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
            "attention and MLP intermediates + fp32 norm inputs + adapters' inputs and r-wide outputs"
            + (" (checkpointing: block inputs + one block recomputed)" if recompute is Recompute.full else ""),
            f"s={workload.seq:,}, b={workload.micro_batch}, L={model.layers}, {adapters.adapter_dtype} adapters",
            format_bytes(parts["activations"] + parts["recomputed layer"]),
            f"{sources.LORA_ACTIVATIONS}; {sources.KORTHIKANTI}",
        ),
        step(
            "embedding and logits",
            "token ids + the final norm's and head's inputs + the fp32 logits the loss keeps",
            f"s={workload.seq:,}, b={workload.micro_batch}, V={model.vocab:,}",
            format_bytes(parts["embedding and logits"]),
            sources.KORTHIKANTI,
        ),
        step(
            "loss backward",
            f"s·b·V × {LOSS_GRADIENT_BYTES} B: the fp32 gradients of the log-probabilities and of the logits, "
            "beside the log-probabilities",
            f"{workload.seq:,} × {workload.micro_batch} × {model.vocab:,} × {LOSS_GRADIENT_BYTES} B",
            format_bytes(parts["loss backward"]),
            sources.LOSS_BACKWARD,
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
            RUNTIME,
            "CUDA context, cuBLAS and attention workspaces, caching-allocator reserve (as the device reports them)",
            "one fitted constant per GPU",
            format_bytes(parts[RUNTIME]),
            sources.FINETUNE_RUNTIME,
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
            f"module layout: {MOE_LAYOUT}; "
            + (CONVERSION if model.model_type in CONVERTED else "routed experts get no adapter (peft all-linear)")
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
