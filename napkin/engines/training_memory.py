"""Memory accounting: bytes per parameter (optimizer × precision), sharding, activations.

Pure functions, no I/O. Formulas (each cites napkin.sources):

    model states = (params + gradients + master weights + optimizer states) bytes × N     (ZeRO §3.1)
    ZeRO-1: P + G + (M + S)/N_d    ZeRO-2: P + (G + M + S)/N_d    ZeRO-3/FSDP: (P + G + M + S)/N_d  (ZeRO §5)
    activations per layer: napkin.engines.activations (Korthikanti et al. 2022 Table 2, generalised to GQA, SwiGLU,
    no dropout, MoE, CP), per pipeline stage × micro-batches in flight (1F1B / interleaved), + embedding
    and fp32 logits on the first and last stages; the most loaded stage is the per-GPU figure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar, NamedTuple

from pydantic import ConfigDict, Field

from napkin import sources
from napkin.domain.base import Record
from napkin.domain.choices import Offload, Optimizer, Precision, Recompute, Sharding
from napkin.domain.layout import MAX_LISTED_STAGES, Layout, first_heaviest, stage_size, uneven_note
from napkin.domain.model import Model
from napkin.domain.workload import Workload
from napkin.engines import activations as acts
from napkin.errors import UsageError
from napkin.results.explain import step
from napkin.results.result import ModelResult, TableResult
from napkin.systems.profiles import HardwareProfile
from napkin.systems.stack import Framework
from napkin.units import format_bytes, format_bytes_si, format_count, format_sci, parse_bytes_or_fraction

COMPONENTS = ("params", "gradients", "master_weights", "optimizer_states")

#: bitsandbytes block-wise 8-bit state: 1 byte per element + one fp32 absmax per 2048-element block
#: (Dettmers et al. 2021, arXiv:2110.02861; bitsandbytes Optimizer2State.init_state).
BYTES_8BIT_STATE = 1 + 4 / 2048


@dataclass(frozen=True)
class OptimizerSpec:
    states: tuple[str, ...]  # the state tensors it allocates per parameter (same shape as the parameter)
    source: str
    note: str = ""
    state_bytes: float | None = None  # fixed bytes per state element, whatever the precision regime


OPTIMIZERS: dict[Optimizer, OptimizerSpec] = {
    Optimizer.sgd: OptimizerSpec((), "torch.optim.SGD (momentum=0): no state"),
    Optimizer.sgd_momentum: OptimizerSpec(("momentum_buffer",), "torch.optim.SGD: momentum_buffer"),
    Optimizer.adagrad: OptimizerSpec(("sum",), "torch.optim.Adagrad: state['sum']"),
    Optimizer.rmsprop: OptimizerSpec(
        ("square_avg",), "torch.optim.RMSprop: square_avg", "+1 state with momentum>0, +1 if centered"
    ),
    Optimizer.adam: OptimizerSpec(("exp_avg", "exp_avg_sq"), "Kingma & Ba 2014; torch.optim.Adam"),
    Optimizer.adamw: OptimizerSpec(("exp_avg", "exp_avg_sq"), "Loshchilov & Hutter 2019; torch.optim.AdamW"),
    Optimizer.adafactor: OptimizerSpec(
        (),
        "Shazeer & Stern 2018, arXiv:1804.04235; torch.optim.Adafactor (row_var, col_var)",
        "factored second moment: (n+m)/(n·m) states per parameter of an n×m matrix ≈ 0; no first moment",
    ),
    Optimizer.lion: OptimizerSpec(("exp_avg",), "Chen et al. 2023, arXiv:2302.06675: momentum only"),
    Optimizer.adam_8bit: OptimizerSpec(
        ("state1", "state2"),
        "Dettmers et al. 2021, arXiv:2110.02861; bitsandbytes Optimizer2State",
        "uint8 states + fp32 absmax per 2048-element block; tensors < 4096 elements stay 32-bit",
        state_bytes=BYTES_8BIT_STATE,
    ),
    Optimizer.muon: OptimizerSpec(
        ("momentum_buffer",),
        "KellerJordan/Muon muon.py",
        "for 2-D hidden weights; embeddings, head and gains use AdamW (2 states)",
    ),
}


@dataclass(frozen=True)
class PrecisionSpec:
    params: float
    gradients: float
    master_weights: float
    state: float
    source: str


PRECISIONS: dict[Precision, PrecisionSpec] = {
    Precision.fp32: PrecisionSpec(4, 4, 0, 4, "fp32 training: every tensor 4 B"),
    Precision.mixed: PrecisionSpec(2, 2, 4, 4, sources.ZERO_16),
    Precision.mixed_fp32_grads: PrecisionSpec(2, 4, 4, 4, sources.MEGATRON_18),
    Precision.bf16: PrecisionSpec(2, 2, 0, 2, "pure bf16, no fp32 master copy (small updates can be lost)"),
}


class BytesPerParam(Record):
    """Bytes per parameter of model state, by component; ``total`` is their sum."""

    model_config = ConfigDict(frozen=True)

    optimizer: Optimizer
    precision: Precision
    breakdown: dict[str, float]
    total: float
    states: tuple[str, ...]
    source: str
    note: str


@cache
def bytes_per_param(optimizer: Optimizer, precision: Precision) -> BytesPerParam:
    opt, prec = OPTIMIZERS[optimizer], PRECISIONS[precision]
    state_bytes = opt.state_bytes if opt.state_bytes is not None else prec.state
    breakdown = {
        "params": prec.params,
        "gradients": prec.gradients,
        "master_weights": prec.master_weights,
        "optimizer_states": len(opt.states) * state_bytes,
    }
    return BytesPerParam(
        optimizer=optimizer,
        precision=precision,
        breakdown=breakdown,
        total=sum(breakdown.values()),
        states=opt.states,
        source=f"{prec.source}; {opt.source}",
        note=opt.note,
    )


class OptimizerTable(TableResult):
    """``napkin optimizers``: bytes per parameter for every optimizer × precision regime."""

    title: ClassVar[str] = "Bytes per parameter = params + gradients + master weights + optimizer states"

    table: dict[Optimizer, dict[Precision, BytesPerParam]]

    def header(self) -> list[str]:
        return ["optimizer", *PRECISIONS, "state tensors"]

    def body(self) -> list[list[str]]:
        def cell(b: BytesPerParam) -> str:
            return f"{b.total:.3g} = {'+'.join(f'{v:.3g}' for v in b.breakdown.values())}"  # 8-bit states: 2.004 → 2

        return [
            [o, *(cell(b) for b in row.values()), ", ".join(OPTIMIZERS[o].states) or "–"]
            for o, row in self.table.items()
        ]

    def caption(self) -> str:
        return (
            "fp32: all 4 B; mixed: ZeRO §3.1 (16 B Adam); mixed-fp32-grads: Megatron/DeepSpeed (18 B); "
            "bf16: no master copy. adafactor ≈ 0 state (factored); adam-8bit: 1 B + absmax/2048 per state."
        )

    def secondary(self) -> tuple[int, ...]:
        return (len(PRECISIONS) + 1,)  # state tensors

    def to_json(self, explain: bool = False) -> Any:
        return {
            o.value: {
                p.value: {"total": b.total, "breakdown": b.breakdown, "states": list(b.states), "source": b.source}
                for p, b in row.items()
            }
            for o, row in self.table.items()
        }


def optimizers() -> OptimizerTable:
    """Bytes per parameter for all optimizers × precision regimes, with the breakdown."""
    return OptimizerTable(table={o: {p: bytes_per_param(o, p) for p in PRECISIONS} for o in OPTIMIZERS})


def state_elements(optimizer: Optimizer, shape: tuple[int, ...]) -> int:
    """Optimizer-state elements torch allocates for one parameter tensor (scalar ``step`` excluded)."""
    numel = math.prod(shape)
    if optimizer is Optimizer.adafactor:
        if len(shape) >= 2:  # row factor (…×n) and column factor (…×m) of the last two dims
            lead = math.prod(shape[:-2])
            return lead * (shape[-2] + shape[-1])
        return numel  # vectors keep a full second moment
    return len(OPTIMIZERS[optimizer].states) * numel


# --------------------------------------------------------------------------------------- sharding

#: Which components each sharding strategy partitions over the data-parallel group (ZeRO §5).
SHARDED: dict[Sharding, frozenset[str]] = {
    Sharding.none: frozenset(),
    Sharding.zero1: frozenset({"master_weights", "optimizer_states"}),
    Sharding.zero2: frozenset({"gradients", "master_weights", "optimizer_states"}),
    Sharding.zero3: frozenset(COMPONENTS),
    Sharding.fsdp: frozenset(COMPONENTS),
    Sharding.hsdp: frozenset(COMPONENTS),
}

#: Sharding that gathers parameters layer by layer (ZeRO-3, FSDP, HSDP).
GATHERED: frozenset[Sharding] = frozenset({Sharding.zero3, Sharding.fsdp, Sharding.hsdp})


def shard_ranks(layout: Layout) -> int:
    """The ranks a GPU's model states are sharded over: the whole data-parallel group (DP × CP), or for HSDP the
    group's ranks within one node (GPUS_PER_NODE, its TP ranks apart: Megatron's tp-cp-dp order), the shards
    replicated across nodes (PyTorch HYBRID_SHARD, torchtitan data_parallel_replicate_degree)."""
    group = layout.dp * layout.context_parallel
    if layout.sharding is Sharding.hsdp:
        return math.gcd(group, max(1, GPUS_PER_NODE // layout.tensor_parallel))
    return group


def per_gpu_bytes_per_param(bpp: BytesPerParam, sharding: Sharding, dp: int) -> dict[str, float]:
    """Bytes each GPU holds per model parameter, by component, after sharding over ``dp`` ranks."""
    return {c: b / dp if c in SHARDED[sharding] else b for c, b in bpp.breakdown.items()}


# ------------------------------------------------------------------------------------ activations


class ActivationInputs(Record):
    """What the activation formula needs: the model, the workload (s, b) and the layout (t, SP, recompute)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: Model
    workload: Workload
    layout: Layout = Field(default_factory=Layout)
    flash_attention: bool = False
    element_bytes: float = Field(default=2.0, gt=0, description="bytes per stored activation (2 = 16-bit)")
    capacity_factor: float | None = Field(
        default=None, gt=0, description="MoE expert capacity factor; None = dropless (each token to k experts)"
    )
    logit_bytes: float = Field(
        default=acts.LOSS_LOGIT_BYTES, gt=0, description="bytes per logit the loss holds at its peak (the stack's)"
    )
    selective_keeps: float = Field(
        default=1.0,
        gt=0,
        le=1,
        description="share of a layer's activations selective recomputation keeps under FlashAttention (the stack's)",
    )

    def kept(self) -> float:
        """The share of the per-layer formula kept: the stack's selective recomputation under FlashAttention (there
        are no scores left to drop, so what it recomputes is the stack's choice), else all of it."""
        selective = self.layout.recompute is Recompute.selective and self.flash_attention
        return self.selective_keeps if selective else 1.0


def activation_bytes_per_layer(x: ActivationInputs) -> tuple[float, str]:
    """Bytes one transformer layer keeps for backward on one GPU, and the formula (see napkin.engines.activations)."""
    got = acts.layer_bytes(
        x.model,
        x.workload,
        x.layout,
        element_bytes=x.element_bytes,
        flash_attention=x.flash_attention,
        capacity_factor=x.capacity_factor,
    )
    kept = x.kept()
    return got.total * kept, got.formula if kept == 1.0 else f"({got.formula}) × {kept:g} kept by selective recompute"


def activation_source(x: ActivationInputs) -> str:
    return sources.FLASH + "; " + sources.KORTHIKANTI if x.flash_attention else sources.KORTHIKANTI


# ------------------------------------------------------------------------------------ stages

#: GPUs per node assumed for host (CPU) memory of offloaded states: a DGX/HGX node has 8.
GPUS_PER_NODE = 8
#: What offload moves to CPU memory. ZeRO-Offload (Ren et al. 2021 §4.1): gradients, fp32 master weights and
#: optimizer states (and the optimizer step) live on the CPU, the 16-bit parameters stay on the GPU — as in
#: DeepSpeed's estimate_zero3_model_states_mem_needs (offload_optimizer: GPU 2Ψ/G, CPU 16Ψ per node);
#: ZeRO-Infinity / FSDP CPUOffload: the parameters as well.
OFFLOADED: dict[Offload, frozenset[str]] = {
    Offload.none: frozenset(),
    Offload.optimizer: frozenset({"gradients", "master_weights", "optimizer_states"}),
    Offload.params: frozenset(COMPONENTS),
}


@dataclass(frozen=True)
class StageMemory:
    """One pipeline stage on one GPU: its layers, model states, activations, and host bytes."""

    stage: int
    layers: int  # 0 when the model's shape is not known
    params: float  # parameters this GPU holds (before ZeRO sharding)
    states: dict[str, float]  # bytes on the GPU by component
    host_bytes: float  # offloaded bytes in CPU memory for this GPU
    in_flight: float  # micro-batches' worth of this stage's layers held at once
    activations: dict[str, float]  # layers, embedding, logits
    expert_params: float = 0.0  # of ``params``, the routed experts' (sharded over their own data-parallel group)

    @property
    def total(self) -> float:
        return sum(self.states.values()) + sum(self.activations.values())


class ActivationParts(NamedTuple):
    """One micro-batch's activation bytes on one GPU: a layer's (as the recomputation keeps it), the first stage's
    embedding, the last stage's output layer and loss."""

    per_layer: float
    embedding: float
    output: float


def activation_parts(activations: ActivationInputs, layout: Layout, element_bytes: float) -> ActivationParts:
    """What every stage's activations are made of, under ``layout`` (resolved)."""
    m, work = activations.model, activations.workload
    per_layer = acts.layer_bytes(
        m,
        work,
        layout,
        element_bytes=element_bytes,
        flash_attention=activations.flash_attention,
        capacity_factor=activations.capacity_factor,
    ).total
    kept = activations.model_copy(update={"layout": layout}).kept()
    emb = acts.embedding_bytes(m, work, layout)
    out = acts.output_bytes(m, work, layout, element_bytes, activations.logit_bytes)
    return ActivationParts(per_layer * kept, emb, out)


def stage_activations(stage: int, pipeline: int, layers: int, held: float, parts: ActivationParts) -> dict[str, float]:
    """A stage's activation bytes: its layers' × the micro-batches in flight, the embedding on the first stage,
    the output layer and fp32 logits on the last."""
    return {
        "activations": parts.per_layer * layers * held,
        "embedding": parts.embedding * held if stage == 0 else 0.0,
        "logits": parts.output if stage == pipeline - 1 else 0.0,
    }


class StageStates(NamedTuple):
    """One stage's model states on one GPU."""

    dense_params: float  # parameters held, before ZeRO sharding (the routed experts' excluded)
    expert_params: float  # routed experts' (sharded over their own data-parallel group)
    states: dict[str, float]  # bytes on the GPU by component
    host_bytes: float  # offloaded to CPU memory


def stage_states(
    stage: int, layers: int, model: Model, params: float, layout: Layout, bpp: BytesPerParam
) -> StageStates:
    """The model states of one stage of ``model`` (``params`` of them in all) under ``layout`` (resolved): stage 0
    also holds the input embedding and the last stage the final norm and the output layer (a copy of the tied
    embedding when p > 1, as Megatron-LM keeps); routed-expert weights divide by t·EP and shard over DP·CP/EP,
    the rest over DP·CP."""
    t, p = layout.tensor_parallel, layout.pipeline_parallel
    dp = shard_ranks(layout)
    dense_pp = per_gpu_bytes_per_param(bpp, layout.sharding, dp)
    expert_pp = per_gpu_bytes_per_param(bpp, layout.sharding, max(1, dp // layout.expert_parallel))
    total_params, per_layer_dense, per_layer_expert, embed, final_norm = _param_split(model)
    scale = params / total_params
    dense = layers * per_layer_dense + (embed if stage == 0 else 0)
    if stage == p - 1:
        dense += final_norm + (model.vocab * model.hidden if (not model.tied_embeddings or p > 1) else 0)
    dense_local = dense * scale / t
    expert_local = layers * per_layer_expert * scale / (t * layout.expert_parallel)
    states = {c: dense_local * dense_pp[c] + expert_local * expert_pp[c] for c in dense_pp}
    moved = OFFLOADED[layout.offload]
    host = sum(v for c, v in states.items() if c in moved)
    return StageStates(dense_local, expert_local, {c: 0.0 if c in moved else v for c, v in states.items()}, host)


def stage_indices(layers: int, pipeline: int, ends_only: bool) -> list[int]:
    """Every stage, or only those that can be the most loaded: the first and the last stage and the first of the
    heaviest (``stage_layers``: an uneven split puts its extra layers in the middle). Any other stage holds no more
    layers than one of those, with no more micro-batches in flight (1F1B and interleaved both hold fewer the later
    the stage), and no embedding or output layer."""
    p = pipeline
    return sorted({0, p - 1, first_heaviest(layers, p)}) if ends_only else list(range(p))


def stage_memory(
    params: float,
    bpp: BytesPerParam,
    layout: Layout,
    activations: ActivationInputs | None = None,
    element_bytes: float | None = None,
    ends_only: bool = False,
) -> list[StageMemory]:
    """Per-GPU bytes of every pipeline stage (``layout`` resolved), or with ``ends_only`` of those that can be the
    most loaded (``stage_indices``). Plain floats: fast enough for a planner.

    Without a model the parameters split evenly over t·p; with one, by ``stage_states`` and
    ``stage_activations``.
    """
    t, p = layout.tensor_parallel, layout.pipeline_parallel
    if activations is None:
        dense_pp = per_gpu_bytes_per_param(bpp, layout.sharding, shard_ranks(layout))
        moved = OFFLOADED[layout.offload]
        local = params / (t * p)
        states = {c: b * local for c, b in dense_pp.items()}
        host = sum(v for c, v in states.items() if c in moved)
        states = {c: 0.0 if c in moved else v for c, v in states.items()}
        return [StageMemory(i, 0, local, states, host, 0.0, {}) for i in ((0,) if ends_only else range(p))]
    m, work = activations.model, activations.workload
    e = activations.element_bytes if element_bytes is None else element_bytes
    parts = activation_parts(activations, layout, e)
    try:
        micro = work.microbatches(layout.dp) if work.global_batch is not None else None
    except ValueError as exc:
        raise UsageError(str(exc), field="global_batch", also=("micro_batch",)) from None
    stages = []
    for i in stage_indices(m.layers, p, ends_only):
        layers = stage_size(m.layers, p, i)
        own = stage_states(i, layers, m, params, layout, bpp)
        held = acts.in_flight(i, layout, micro)
        act = stage_activations(i, p, layers, held, parts)
        params_i = own.dense_params + own.expert_params
        stages.append(StageMemory(i, layers, params_i, own.states, own.host_bytes, held, act, own.expert_params))
    return stages


@cache
def _param_split(m: Model) -> tuple[float, float, float, float, float]:
    """N, dense and routed-expert parameters per layer, input embedding, final norm (cached per model)."""
    experts = m.expert_params()
    embed = m.vocab * m.hidden + (m.context * m.hidden if m.learned_positions and m.context else 0)
    return (
        float(m.params()),
        (m.block_params(active=False) - experts) / m.layers,
        experts / m.layers,
        float(embed),
        float(m.norm_params()),
    )


def per_gpu_bytes(
    params: float,
    *,
    optimizer: Optimizer = Optimizer.adamw,
    precision: Precision = Precision.fp32,
    gpus: int = 1,
    layout: Layout | None = None,
    activations: ActivationInputs | None = None,
    framework: Framework | None = None,
) -> float:
    """The most loaded GPU's bytes (model states + activations + the stack's own): the fast path under
    ``memory()``."""
    layout = (layout or (activations.layout if activations is not None else Layout())).resolve(gpus)
    bpp = bytes_per_param(optimizer, precision)
    e = activation_element_bytes(precision)
    stages = stage_memory(params, bpp, layout, activations, e, ends_only=True)
    fw = framework or Framework()
    return max(s.total + framework_bytes(s, bpp, layout, fw) for s in stages)


def _stage_name(stage: int, pipeline: int) -> str:
    if pipeline == 1:
        return "the only stage"
    where = " (first)" if stage == 0 else " (last)" if stage == pipeline - 1 else ""
    return f"stage {stage + 1} of {pipeline}{where}"


# ---------------------------------------------------------------------------------- framework memory


def gather_buffers(layers: int, dense_params: float, bpp: BytesPerParam, layout: Layout, fw: Framework) -> float:
    """The stack's ZeRO-3/FSDP gather buffers on one GPU of a stage of ``layers`` layers holding ``dense_params``
    parameters (before sharding, the routed experts' excluded)."""
    if fw.gathered_layers and layout.sharding in GATHERED and layers:
        layer = dense_params / layers  # this GPU's (1/t) share of one layer
        return layer * (fw.gathered_layers * bpp.breakdown["params"] + bpp.breakdown["gradients"])
    return 0.0


def framework_bytes(stage: StageMemory, bpp: BytesPerParam, layout: Layout, fw: Framework) -> float:
    """The stack's own bytes on one GPU of ``stage`` (``Framework``)."""
    buffers = gather_buffers(stage.layers, stage.params - stage.expert_params, bpp, layout, fw)
    return fw.fixed + buffers + fw.fragmentation * (stage.total + buffers)


# ----------------------------------------------------------------------------------------- memory


class StageRow(Record):
    """One pipeline stage in a ``MemoryResult`` (bytes per GPU)."""

    model_config = ConfigDict(frozen=True)

    stage: int = Field(description="0-based pipeline rank")
    layers: int = Field(description="transformer layers on this stage (0 when the model's shape is not given)")
    params: float = Field(description="parameters on this GPU before ZeRO sharding")
    in_flight: float = Field(description="micro-batches' worth of this stage's layers held at once")
    model_state_bytes: float
    activation_bytes: float
    per_gpu_bytes: float


class MemoryResult(ModelResult):
    title: ClassVar[str] = "Memory per GPU"
    headline: ClassVar[tuple[str, ...]] = ("per_gpu_bytes", "fits", "hardware")

    hardware: str
    params: float
    optimizer: Optimizer
    precision: Precision
    sharding: Sharding
    layout: Layout
    gpus: int
    data_parallel: int
    tensor_parallel: int
    bytes_per_param: float = Field(description="unsharded model-state bytes per parameter")
    bytes_per_param_breakdown: dict[str, float]
    breakdown: dict[str, float] = Field(description="bytes per GPU by component on the most loaded stage")
    per_gpu_bytes: float
    stage: int = Field(description="the most loaded pipeline stage (0-based)")
    stage_name: str
    stages: list[StageRow] = Field(default_factory=list)
    host_bytes_per_gpu: float = Field(default=0.0, description="offloaded model states in CPU memory, per GPU")
    host_bytes_per_node: float = Field(default=0.0, description=f"× {GPUS_PER_NODE} GPUs per node (assumed)")
    memory_bytes: float = Field(description="capacity of one device used for the fit check")
    capacity_source: str = Field(description="which capacity figure the fit check used")
    reserve_bytes: float
    fits: bool
    headroom_bytes: float
    activation_bytes_per_layer: float | None = None
    max_micro_batch: int | None = None
    stack: str | None = Field(default=None, description="the software stack whose own memory is counted")

    def heading(self) -> str:
        stack = f", {self.stack}" if self.stack else ""
        return f"Memory per GPU: {format_count(self.params)} params, {self.optimizer}, {self.precision}{stack}"

    def rows(self) -> list[tuple[str, str]]:
        rows = [("layout", self.layout.describe())]
        if self.layout.pipeline_parallel > 1:
            rows.append(("most loaded", self.stage_name))
        rows += [(k.replace("_", " "), format_bytes(v)) for k, v in self.breakdown.items() if v]
        counted = "activations" in self.breakdown
        if not counted:
            rows.append(("activations", "not counted (give --model or a shape)"))
        rows.append(("total per GPU", format_bytes(self.per_gpu_bytes)))
        if self.host_bytes_per_gpu:
            rows.append(
                (
                    "offloaded to CPU",
                    f"{format_bytes_si(self.host_bytes_per_gpu)} per GPU, "
                    f"{format_bytes_si(self.host_bytes_per_node)} per node ({GPUS_PER_NODE} GPUs)",
                )
            )
        rows.append((f"{self.hardware} capacity", f"{format_bytes(self.memory_bytes)}, {self.capacity_source}"))
        if self.reserve_bytes:
            rows.append(("reserved", format_bytes(self.reserve_bytes)))
        scope = "" if counted else " (model states only)"
        if self.fits:
            rows.append(("verdict", f"fits{scope}: headroom {format_bytes(self.headroom_bytes)}"))
        else:
            rows.append(("verdict", f"does NOT fit{scope}: short by {format_bytes(-self.headroom_bytes)}"))
        if self.max_micro_batch is not None:
            rows.append(("largest micro-batch", f"{self.max_micro_batch} sequences"))
        return rows

    def extras(self) -> list[Any]:
        from napkin.results import render

        parts = [(k.replace("_", " "), v) for k, v in self.breakdown.items() if v > 0]
        out: list[Any] = [render.bar(parts, self.memory_bytes)]
        if len(self.stages) > 1:
            out.append(
                render.grid(
                    "Per pipeline stage (bytes per GPU)",
                    ["stage", "layers", "in flight", "states", "activations", "total"],
                    [
                        [
                            str(r.stage + 1),
                            f"{r.layers:g}",
                            f"{r.in_flight:.4g}",
                            format_bytes_si(r.model_state_bytes),
                            format_bytes_si(r.activation_bytes),
                            format_bytes_si(r.per_gpu_bytes),
                        ]
                        for r in self.stages
                    ],
                    caption="in flight: micro-batches held (1F1B: p − i; interleaved: chunks / v)",
                )
            )
        return out


#: A profile's reported capacity is used only while it is within 10 % of its datasheet figure, so a user who
#: edits ``memory`` in a copy is not silently overruled by a stale ``memory_usable``.
USABLE_BAND = 0.10


def capacity(hardware: HardwareProfile) -> tuple[float, str]:
    """Bytes a fit check may use: what the device reports to torch when the profile knows it, else the datasheet."""
    usable = hardware.memory_usable
    if usable and abs(usable / hardware.memory - 1) <= USABLE_BAND:
        return float(usable), "as reported to torch"
    return hardware.memory, "datasheet" if not usable else "datasheet (memory_usable is not within 10 %: ignored)"


def memory(
    params: float,
    hardware: HardwareProfile,
    *,
    optimizer: Optimizer = Optimizer.adamw,
    precision: Precision = Precision.fp32,
    gpus: int = 1,
    layout: Layout | None = None,
    activations: ActivationInputs | None = None,
    reserve_bytes: float = 0.0,
    framework: Framework | None = None,
) -> MemoryResult:
    """Per-GPU memory of the most loaded pipeline stage: model states under the layout + activations + what the
    software stack keeps (``framework``)."""
    layout = (layout or (activations.layout if activations is not None else Layout())).resolve(gpus)
    sharding, tp, dp = layout.sharding, layout.tensor_parallel, layout.dp
    split = layout.tensor_parallel * layout.pipeline_parallel
    bpp = bytes_per_param(optimizer, precision)
    if activations is not None:
        e = activation_element_bytes(precision)
        activations = activations.model_copy(update={"element_bytes": e, "layout": layout})
    # a long pipeline: its extreme stages only (the most loaded GPU is one of them), so work and output stay
    # bounded whatever --pipeline-parallel is typed
    stages = stage_memory(params, bpp, layout, activations, ends_only=layout.pipeline_parallel > MAX_LISTED_STAGES)
    fw = framework or Framework()
    own = [framework_bytes(s, bpp, layout, fw) for s in stages]
    worst_i = max(range(len(stages)), key=lambda i: stages[i].total + own[i])
    worst, extra = stages[worst_i], own[worst_i]
    breakdown = {**worst.states, **worst.activations, **({"framework": extra} if extra else {})}
    steps = [
        step(
            "bytes per parameter",
            "params + gradients + master weights + optimizer states",
            " + ".join(f"{v:g}" for v in bpp.breakdown.values()),
            f"{bpp.total:g} B",
            bpp.source,
        ),
        step(
            f"model states per GPU ({sharding})",
            _sharding_formula(sharding) + (" / (t·p)" if split > 1 else ""),
            _states_numbers(worst, bpp, layout),
            format_bytes(sum(worst.states.values()) + worst.host_bytes),
            _sharding_source(sharding),
        ),
    ]
    if worst.host_bytes:
        moved = ", ".join(sorted(OFFLOADED[layout.offload]))
        steps.append(
            step(
                "offloaded to CPU",
                f"{layout.offload} offload: {moved}",
                f"{format_bytes_si(worst.host_bytes)} × {GPUS_PER_NODE} GPUs per node",
                format_bytes(worst.host_bytes * GPUS_PER_NODE),
                sources.ZERO_OFFLOAD,
            )
        )
    per_layer = None
    if activations is not None:
        per_layer, formula = activation_bytes_per_layer(activations)
        m = activations.model
        steps.append(
            step(
                "activations per layer",
                formula,
                f"s={activations.workload.seq}, b={activations.workload.micro_batch}, h={m.hidden}, a={m.heads}, "
                f"n_kv={m.n_kv}, F={m.d_ffn}, t={tp}, e={e:g}",
                format_bytes(per_layer),
                activation_source(activations),
            )
        )
        steps.append(
            step(
                f"activations on {_stage_name(worst.stage, layout.pipeline_parallel)}",
                "per layer × the stage's layers (L/p, or an uneven split's) × micro-batches in flight"
                + (" + embedding" if worst.stage == 0 else "")
                + (" + logits (fp32 for the loss)" if worst.stage == layout.pipeline_parallel - 1 else ""),
                f"{format_bytes_si(per_layer)} × {worst.layers:g} × {worst.in_flight:.4g}",
                format_bytes(sum(worst.activations.values())),
                sources.PIPELINE_MEMORY,
            )
        )
    if framework is not None:
        steps.append(
            step(
                "the stack's own memory",
                "fixed + gathered layers (FSDP/ZeRO-3) + fragmentation × allocated",
                f"{format_bytes_si(fw.fixed)} + {fw.gathered_layers} layer(s) gathered + {fw.fragmentation:g} × "
                "allocated",
                format_bytes(extra),
                fw.source or "stack profile",
            )
        )
    total = worst.total + extra
    cap, cap_source = capacity(hardware)
    available = cap - reserve_bytes
    steps.append(
        step(
            "fits?",
            "per-GPU total ≤ capacity − reserve",
            f"{format_bytes_si(total)} vs {format_bytes_si(cap)} − {format_bytes_si(reserve_bytes)}",
            "yes" if total <= available else "no",
            "profile memory_usable: torch total_memory" if cap != hardware.memory else hardware.sources[0].title,
        )
    )
    max_batch = None
    act_total = sum(worst.activations.values())
    if activations is not None and act_total > 0:
        per_sample = act_total / activations.workload.micro_batch
        max_batch = max(0, math.floor((available - (total - act_total)) / per_sample))
    warnings = []
    if precision is Precision.bf16:
        warnings.append("pure bf16 keeps no fp32 master weights: updates smaller than 2^-8 of a weight are lost")
    rows = [
        StageRow(
            stage=s.stage,
            layers=s.layers,
            params=s.params,
            in_flight=s.in_flight,
            model_state_bytes=sum(s.states.values()),
            activation_bytes=sum(s.activations.values()),
            per_gpu_bytes=s.total + o,
        )
        for s, o in zip(stages, own, strict=True)
    ]
    return MemoryResult(
        hardware=hardware.name,
        params=params,
        optimizer=optimizer,
        precision=precision,
        sharding=sharding,
        layout=layout,
        gpus=gpus,
        data_parallel=dp,
        tensor_parallel=tp,
        bytes_per_param=bpp.total,
        bytes_per_param_breakdown=bpp.breakdown,
        breakdown=breakdown,
        per_gpu_bytes=total,
        stage=worst.stage,
        stage_name=_stage_name(worst.stage, layout.pipeline_parallel),
        stages=rows,
        host_bytes_per_gpu=worst.host_bytes,
        host_bytes_per_node=worst.host_bytes * GPUS_PER_NODE,
        memory_bytes=cap,
        capacity_source=cap_source,
        reserve_bytes=reserve_bytes,
        fits=total <= available,
        headroom_bytes=available - total,
        activation_bytes_per_layer=per_layer,
        max_micro_batch=max_batch,
        warnings=warnings,
        steps=steps,
        notes=(
            [note]
            if activations is not None
            and (note := uneven_note(activations.model.layers, layout.pipeline_parallel, step=False))
            else []
        )
        + (
            [
                f"{layout.pipeline_parallel:,} pipeline stages: the table lists the first, the first of the heaviest "
                "and the last; no other stage holds more"
            ]
            if layout.pipeline_parallel > MAX_LISTED_STAGES
            else []
        ),
    )


def _states_numbers(worst: StageMemory, bpp: BytesPerParam, layout: Layout) -> str:
    """The numbers of the model-states step: parameters × bytes per parameter over each data-parallel group
    (routed experts shard over DP·CP/EP ranks, the rest over DP·CP)."""
    dp = shard_ranks(layout)
    dense = worst.params - worst.expert_params
    per = sum(per_gpu_bytes_per_param(bpp, layout.sharding, dp).values())
    text = f"{format_sci(dense)} params on this GPU × {per:.4g} B (N_d = {dp})"
    if worst.expert_params:
        edp = max(1, dp // layout.expert_parallel)
        per_e = sum(per_gpu_bytes_per_param(bpp, layout.sharding, edp).values())
        text += f" + {format_sci(worst.expert_params)} expert params × {per_e:.4g} B (N_d = {edp})"
    return text


def activation_element_bytes(precision: Precision) -> float:
    """Activations are stored at the compute precision: 4 B in fp32 training, 2 B otherwise."""
    return 4.0 if precision is Precision.fp32 else 2.0


def _sharding_formula(sharding: Sharding) -> str:
    return {
        Sharding.none: "(P + G + M + S)·Ψ",
        Sharding.zero1: "(P + G)·Ψ + (M + S)·Ψ/N_d",
        Sharding.zero2: "P·Ψ + (G + M + S)·Ψ/N_d",
        Sharding.zero3: "(P + G + M + S)·Ψ/N_d",
        Sharding.fsdp: "(P + G + M + S)·Ψ/N_d",
        Sharding.hsdp: "(P + G + M + S)·Ψ/N_d, N_d = the group's ranks in a node",
    }[sharding]


def _sharding_source(sharding: Sharding) -> str:
    if sharding is Sharding.none:
        return "data parallelism: each GPU holds every state (ZeRO §3.1 baseline)"
    if sharding is Sharding.hsdp:
        return sources.HSDP
    return sources.FSDP if sharding is Sharding.fsdp else sources.ZERO_STAGES


# -------------------------------------------------------------------------------------- max model


class MaxModelResult(ModelResult):
    title: ClassVar[str] = "Largest trainable model"
    headline: ClassVar[tuple[str, ...]] = ("params", "gpus", "hardware")

    hardware: str
    gpus: int
    optimizer: Optimizer
    precision: Precision
    sharding: Sharding
    params: float
    bytes_per_param: float = Field(description="unsharded model-state bytes per parameter")
    breakdown: dict[str, float] = Field(description="component → bytes per parameter")
    memory_bytes: float = Field(description="memory that holds the model: all GPUs if sharded, else one")
    per_gpu_memory_bytes: float
    capacity_source: str = Field(description="which capacity figure was used")
    reserve_bytes: float
    activation_bytes: float
    shape_params: float | None = Field(default=None, description="parameters of the given model shape")
    max_micro_batch: int | None = Field(default=None, description="largest micro-batch for that shape's model")
    max_layers: int | None = Field(default=None, description="most layers of the given shape that fit (depth scaled)")
    max_layers_params: float | None = Field(default=None, description="parameters of that deepest model")
    params_at_datasheet: float | None = Field(
        default=None, description="the answer with the datasheet capacity, when a reported one was used"
    )
    excluded: str
    stack: str | None = Field(default=None, description="the software stack whose own memory is counted")

    def heading(self) -> str:
        return self.title + (f" ({self.stack})" if self.stack else "")

    def rows(self) -> list[tuple[str, str]]:
        breakdown = " + ".join(f"{v:g} ({k.replace('_', ' ')})" for k, v in self.breakdown.items() if v)
        how = {
            Sharding.none: "replicated states must fit on one GPU",
            Sharding.zero3: "memory pooled across GPUs",
            Sharding.fsdp: "memory pooled across GPUs",
            Sharding.hsdp: "memory pooled across a node's GPUs",
        }.get(self.sharding, "partially sharded")
        rows = [
            (
                "hardware",
                f"{self.gpus:,} × {self.hardware} ({format_bytes_si(self.per_gpu_memory_bytes)} each, "
                f"{self.capacity_source})",
            ),
            ("optimizer / precision", f"{self.optimizer} / {self.precision}"),
            ("bytes per parameter", f"{self.bytes_per_param:g} B = {breakdown}"),
            ("sharding", f"{self.sharding}: {how}"),
            ("memory for model", format_bytes(self.memory_bytes)),
        ]
        if self.reserve_bytes:
            rows.append(("reserved per GPU", format_bytes(self.reserve_bytes)))
        if self.activation_bytes:
            rows.append(("activations per GPU", format_bytes(self.activation_bytes)))
        datasheet = ""
        if self.params_at_datasheet is not None:
            datasheet = f" ({format_count(self.params_at_datasheet)} at the datasheet capacity)"
        rows.append(("largest model", f"{format_count(self.params)} params{datasheet}"))
        if self.max_micro_batch is not None and self.shape_params is not None:
            rows.append(
                (
                    "largest micro-batch",
                    f"{self.max_micro_batch} sequences for the given shape's "
                    f"{format_count(self.shape_params)}-param model",
                )
            )
        if self.max_layers is not None and self.max_layers_params is not None:
            rows.append(
                (
                    "largest of this shape",
                    f"{self.max_layers} layers: {format_count(self.max_layers_params)} "
                    "params (width fixed, depth scaled)",
                )
            )
        return rows

    def caption(self) -> str:
        return self.excluded


EXCLUDED = (
    "not included: CUDA context, allocator fragmentation, temporary and communication buffers"
    " (use --reserve), and activations unless a model shape is given"
)


def max_model(
    gpus: int,
    hardware: HardwareProfile,
    *,
    optimizer: Optimizer = Optimizer.adamw,
    precision: Precision = Precision.fp32,
    layout: Layout | None = None,
    activations: ActivationInputs | None = None,
    reserve_bytes: float = 0.0,
    framework: Framework | None = None,
) -> MaxModelResult:
    """Largest N with per-GPU model states + activations + reserve ≤ capacity (solved exactly: linear in N); a
    stack's own memory (``framework``: fixed bytes, fragmentation) comes off the capacity first."""
    layout = (layout or (activations.layout if activations is not None else Layout())).resolve(gpus)
    sharding, tp, dp = layout.sharding, layout.tensor_parallel, layout.dp
    bpp = bytes_per_param(optimizer, precision)
    per_param = sum(per_gpu_bytes_per_param(bpp, sharding, shard_ranks(layout)).values()) / (
        tp * layout.pipeline_parallel
    )
    act = 0.0
    if activations is not None:
        activations = activations.model_copy(
            update={"element_bytes": activation_element_bytes(precision), "layout": layout}
        )
        stages = stage_memory(float(activations.model.params()), bpp, layout, activations, ends_only=True)
        act = max(sum(s.activations.values()) for s in stages)
    cap, cap_source = capacity(hardware)
    if reserve_bytes >= cap:
        raise UsageError(
            f"reserve ({format_bytes(reserve_bytes)}) leaves no room on {hardware.name} ({format_bytes(cap)} per GPU)",
            field="reserve",
        )
    fw = framework or Framework()
    available = (cap - reserve_bytes - fw.fixed) / (1 + fw.fragmentation) - act
    warnings = []
    if available <= 0:  # "does not fit" is an answer (0 parameters), with what to change
        what = "activations" + (" and the reserve" if reserve_bytes else "")
        warnings.append(
            f"{what} ({format_bytes(reserve_bytes + act)}) leave no room on {hardware.name} ({format_bytes(cap)} per "
            "GPU): try --flash-attention, --recompute selective|full, a smaller --micro-batch or --seq, or more "
            "--tensor-parallel/--pipeline-parallel"
        )
    params = _largest_fitting(bpp, layout, activations, cap - reserve_bytes, fw)
    at_datasheet = max(0.0, hardware.memory - reserve_bytes - act) / per_param if cap != hardware.memory else None
    # memory that holds model states: what capacity leaves after the reserve and activations, pooled by ZeRO-3
    pooled = max(0.0, available) * (
        gpus if sharding in (Sharding.zero3, Sharding.fsdp) else shard_ranks(layout) if sharding in GATHERED else 1
    )
    steps = [
        step(
            "bytes per parameter",
            "params + gradients + master weights + optimizer states",
            " + ".join(f"{v:g}" for v in bpp.breakdown.values()),
            f"{bpp.total:g} B",
            bpp.source,
        ),
        step(
            f"per-GPU bytes per parameter ({sharding}, N_d = {dp}, t = {tp})",
            _sharding_formula(sharding) + " / t",
            f"{per_param:.4g} B",
            f"{per_param:.4g} B",
            _sharding_source(sharding),
        ),
        step(
            "largest model",
            "N = (capacity − reserve − activations) / per-GPU bytes per parameter",
            f"({format_bytes_si(cap)} − {format_bytes_si(reserve_bytes)} − {format_bytes_si(act)}) / {per_param:.4g} B",
            f"{format_count(params)} params",
            hardware.sources[0].title,
        ),
    ]
    shape_params = max_batch = max_layers = None
    deeper: Model | None = None
    if activations is not None:
        # The shape's own model: the largest micro-batch that fits beside its states (same engine as memory()).
        shape_params = float(activations.model.params())
        own = memory(
            shape_params,
            hardware,
            optimizer=optimizer,
            precision=precision,
            gpus=gpus,
            layout=layout,
            activations=activations,
            reserve_bytes=reserve_bytes,
            framework=framework,
        )
        max_batch = own.max_micro_batch
        max_layers = _max_layers(activations, bpp, layout, cap - reserve_bytes)
        if max_layers:
            deeper = activations.model.model_copy(
                update={"layers": max_layers, "dense_layers": min(activations.model.dense_layers, max_layers)}
            )
            steps.append(
                step(
                    "largest model of this shape",
                    "most layers L (a multiple of p·v) whose most loaded GPU fits",
                    f"d={deeper.hidden}, a={deeper.heads}, F={deeper.d_ffn}, s={activations.workload.seq}, "
                    f"b={activations.workload.micro_batch}",
                    f"L = {max_layers}: {format_count(deeper.params())} params",
                    sources.PIPELINE_MEMORY,
                )
            )
    return MaxModelResult(
        hardware=hardware.name,
        gpus=gpus,
        optimizer=optimizer,
        precision=precision,
        sharding=sharding,
        params=params,
        bytes_per_param=bpp.total,
        breakdown=bpp.breakdown,
        memory_bytes=pooled,
        per_gpu_memory_bytes=cap,
        capacity_source=cap_source,
        reserve_bytes=reserve_bytes,
        activation_bytes=act,
        shape_params=shape_params,
        max_micro_batch=max_batch,
        max_layers=max_layers,
        max_layers_params=None if deeper is None else float(deeper.params()),
        params_at_datasheet=at_datasheet,
        excluded=EXCLUDED,
        steps=steps,
        warnings=warnings,
    )


def _largest_fitting(
    bpp: BytesPerParam, layout: Layout, activations: ActivationInputs | None, available: float, fw: Framework
) -> float:
    """The largest whole N whose most loaded GPU fits in ``available`` bytes, by the very computation
    ``memory()`` checks (``stage_memory`` and the stack's ``framework_bytes``), so that ``memory --params N`` of
    the answer fits: every stage's bytes are a + b·N (its states scale with N), solved per stage, then stepped
    down past any float rounding."""

    def totals(n: float) -> list[float]:
        return [
            s.total + framework_bytes(s, bpp, layout, fw)
            for s in stage_memory(n, bpp, layout, activations, ends_only=True)
        ]

    probe = 1e12
    bounds = [(available - a) * probe / (b - a) for a, b in zip(totals(0.0), totals(probe), strict=True) if b > a]
    n = float(max(0, math.floor(min(bounds)))) if bounds and available > 0 else 0.0
    while n > 0 and max(totals(n)) > available:  # a few bytes over from rounding: at most a few steps of ~1e-12·N
        n = float(math.floor(n - max(1.0, n * 1e-12)))
    return max(n, 0.0)


def _max_layers(x: ActivationInputs, bpp: BytesPerParam, layout: Layout, available: float) -> int | None:
    """Most layers (a multiple of p·v) for which the most loaded GPU fits: the shape scaled in depth.

    Memory grows with L, so a doubling then bisection over multiples of p·v finds it (None: not even p·v fits).
    """
    step_layers = layout.pipeline_parallel * layout.interleave
    e = activation_element_bytes(bpp.precision)

    def fits(units: int) -> bool:
        layers = units * step_layers
        m = x.model.model_copy(update={"layers": layers, "dense_layers": min(x.model.dense_layers, layers)})
        inputs = x.model_copy(update={"model": m})
        worst = max(s.total for s in stage_memory(float(m.params()), bpp, layout, inputs, e, ends_only=True))
        return worst <= available

    if not fits(1):
        return None
    lo, hi = 1, 2
    while fits(hi) and hi < 1 << 20:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo * step_layers


def parse_reserve(text: str, capacity: float) -> float:
    """``--reserve``: bytes (``"4GB"``) or a fraction of capacity (``"10%"``, or ``"0.1"`` without an exponent)."""
    value, is_fraction = parse_bytes_or_fraction(text, "--reserve")
    return value * capacity if is_fraction else value
