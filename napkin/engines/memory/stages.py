"""Each pipeline stage on one GPU: its layers, model states, activations (Korthikanti's count, or a stack's own
caching policy: ``napkin.engines.memory.cached``), micro-batches in flight, and what the stack keeps beyond them
(``framework_bytes``); the most loaded stage is the per-GPU figure (``per_gpu_bytes``, the planner's fast path).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import NamedTuple

from pydantic import ConfigDict, Field

from napkin import sources
from napkin.domain.base import Record
from napkin.domain.choices import Offload, Optimizer, Precision, Recompute
from napkin.domain.layout import Layout, first_heaviest, stage_size
from napkin.domain.model import Model
from napkin.domain.workload import Workload
from napkin.engines import activations as acts
from napkin.engines.memory.cached import all_to_all_bytes, cached_layer_bytes
from napkin.engines.memory.states import (
    COMPONENTS,
    GATHERED,
    GPUS_PER_NODE,
    BytesPerParam,
    activation_element_bytes,
    bytes_per_param,
    expert_shard_ranks,
    per_gpu_bytes_per_param,
    shard_ranks,
    stack_bytes_per_param,
)
from napkin.errors import UsageError
from napkin.systems.stack import CachedActivations, Framework, MemoryRules

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
    linear_input_bytes: float | None = Field(
        default=None,
        ge=0.5,
        le=2,
        description="bytes per element of the input each dense linear layer keeps for its weight gradient when it is "
        "its own quantized copy (the stack's, under an fp8 recipe); None: element_bytes",
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


def activation_bytes_per_layer(x: ActivationInputs, cached: CachedActivations | None = None) -> tuple[float, str]:
    """Bytes one transformer layer keeps for backward on one GPU, and the formula (see napkin.engines.activations;
    a stack's own caching policy: napkin.engines.memory.cached)."""
    if cached is not None:
        return cached_layer_bytes(x.model, x.workload, x.layout, cached)
    got = acts.layer_bytes(
        x.model,
        x.workload,
        x.layout,
        element_bytes=x.element_bytes,
        flash_attention=x.flash_attention,
        capacity_factor=x.capacity_factor,
        linear_bytes=x.linear_input_bytes,
    )
    kept = x.kept()
    return got.total * kept, got.formula if kept == 1.0 else f"({got.formula}) × {kept:g} kept by selective recompute"


def activation_source(x: ActivationInputs, kept_input_source: str = "") -> str:
    """The citations of the per-layer count; under an fp8 recipe, the stack's for its kept linear inputs (f)."""
    base = sources.FLASH + "; " + sources.KORTHIKANTI if x.flash_attention else sources.KORTHIKANTI
    return base + (f"; f: {kept_input_source}" if x.linear_input_bytes and kept_input_source else "")


# ------------------------------------------------------------------------------------ stages

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
    host_bytes: float  # offloaded model states in CPU memory for this GPU
    in_flight: float  # micro-batches' worth of this stage's layers held at once
    activations: dict[str, float]  # layers, embedding, logits
    expert_params: float = 0.0  # of ``params``, the routed experts' (sharded over their own data-parallel group)
    end_params: float = 0.0  # of ``params``, the input embedding's and the output layer's
    host_activations: float = 0.0  # offloaded activations in CPU memory for this GPU

    @property
    def total(self) -> float:
        return sum(self.states.values()) + sum(self.activations.values())

    @property
    def layer_params(self) -> float:
        """Of ``params``, the transformer layers' dense weights (not the experts, embedding or output layer)."""
        return self.params - self.expert_params - self.end_params


class ActivationParts(NamedTuple):
    """One micro-batch's activation bytes on one GPU: a layer's (as the recomputation or the stack's policy keeps
    it), the first stage's embedding, the last stage's output layer and loss, and the all-to-all buffers a stage
    with routed experts holds."""

    per_layer: float
    embedding: float
    output: float
    buffers: float = 0.0


def activation_parts(
    activations: ActivationInputs, layout: Layout, element_bytes: float, rules: MemoryRules | None = None
) -> ActivationParts:
    """What every stage's activations are made of, under ``layout`` (resolved) and the stack's ``rules``."""
    rules = rules or MemoryRules()
    m, work, t = activations.model, activations.workload, layout.tensor_parallel
    inputs = activations.model_copy(update={"layout": layout, "element_bytes": element_bytes})
    if rules.cached:
        per_layer = cached_layer_bytes(m, work, layout, rules.cached)[0]
    else:
        per_layer = activation_bytes_per_layer(inputs)[0]
    # the stack's loss over a vocabulary sharded over TP (loss parallel) may hold more per logit
    logit = rules.loss_parallel_logit_bytes if rules.loss_parallel_logit_bytes and t > 1 else activations.logit_bytes
    out = acts.output_bytes(m, work, layout, element_bytes, logit)
    if rules.output_input_gathered and layout.sequence_parallel and t > 1:  # s·b·h kept, not s·b·h/t
        out += element_bytes * m.hidden * work.seq * work.micro_batch / layout.context_parallel * (1 - 1 / t)
    buffers = all_to_all_bytes(m, work, layout, rules.cached) if rules.cached else 0.0
    return ActivationParts(per_layer, acts.embedding_bytes(m, work, layout), out, buffers)


def held_stages(rank: int, pipeline: int, rules: MemoryRules | None = None) -> tuple[int, ...]:
    """The pipeline stages one rank holds: its own, and under DualPipe (DeepSeek-V3 §3.2.1) the mirror stage of
    the other direction, p − 1 − i."""
    if rules is not None and rules.dualpipe and pipeline > 1:
        return tuple(sorted({rank, pipeline - 1 - rank}))
    return (rank,)


def rank_layers(layers: int, pipeline: int, rank: int, rules: MemoryRules | None = None) -> int:
    """The transformer layers one rank holds (``held_stages``)."""
    return sum(stage_size(layers, pipeline, j) for j in held_stages(rank, pipeline, rules))


def stage_in_flight(rank: int, layout: Layout, microbatches: int | None, rules: MemoryRules | None = None) -> float:
    """Micro-batches' worth of each of the rank's stages held at once: 1F1B or interleaved
    (``activations.in_flight``), or DualPipe's PP + 1 over the rank's two stages (DeepSeek-V3 §3.2.1 Table 2)."""
    p = layout.pipeline_parallel
    if rules is not None and rules.dualpipe and p > 1:
        return float(p + 1 if microbatches is None else min(p + 1, microbatches)) / len(held_stages(rank, p, rules))
    return acts.in_flight(rank, layout, microbatches)


def stage_activations(
    stage: int,
    pipeline: int,
    layers: int,
    held: float,
    parts: ActivationParts,
    rules: MemoryRules | None = None,
    experts: bool = True,
    offloaded: int = 0,
) -> dict[str, float]:
    """A rank's activation bytes: its layers' × the micro-batches in flight, the embedding where it holds the first
    stage, the output layer and logits where it holds the last, the all-to-all buffers where it has experts. With
    ``offloaded`` layers' activations copied to CPU memory, only the other layers' stay (``offloaded_activations``)."""
    stages = held_stages(stage, pipeline, rules)
    out = {
        "activations": parts.per_layer * (layers - offloaded) * held,
        "embedding": parts.embedding * held if 0 in stages else 0.0,
        "logits": parts.output if pipeline - 1 in stages else 0.0,
    }
    if parts.buffers and experts:
        out["all_to_all_buffers"] = parts.buffers
    return out


class StageStates(NamedTuple):
    """One rank's model states on one GPU."""

    dense_params: float  # parameters held, before ZeRO sharding (the routed experts' excluded)
    expert_params: float  # routed experts' (sharded over their own data-parallel group)
    states: dict[str, float]  # bytes on the GPU by component
    host_bytes: float  # offloaded to CPU memory
    end_params: float = 0.0  # of ``dense_params``, the input embedding's and the output layer's


def stage_states(
    stage: int,
    layers: int,
    model: Model,
    params: float,
    layout: Layout,
    bpp: BytesPerParam,
    rules: MemoryRules | None = None,
    domain: int = GPUS_PER_NODE,
) -> StageStates:
    """The model states of one rank holding ``layers`` layers of ``model`` (``params`` of them in all) under
    ``layout`` (resolved): the rank holding the first stage also holds the input embedding and the one holding the
    last the final norm and the output layer (a copy of the tied embedding when p > 1, as Megatron-LM keeps);
    routed-expert weights divide by t·EP and shard over DP·CP/EP, the rest over DP·CP. Under DualPipe each stage's
    master weights and optimizer states shard over both ranks holding it. ``bpp`` with the stack's own gradient
    and moment bytes (``stack_bytes_per_param``); HSDP shards within one scale-up ``domain``."""
    t, p = layout.tensor_parallel, layout.pipeline_parallel
    bpp = stack_bytes_per_param(bpp, rules)
    dense_pp = per_gpu_bytes_per_param(bpp, layout.sharding, shard_ranks(layout, domain))
    expert_pp = per_gpu_bytes_per_param(bpp, layout.sharding, expert_shard_ranks(layout, domain))
    stages = held_stages(stage, p, rules)
    if len(stages) > 1:  # DualPipe: a stage's optimizer states shard over both ranks that hold it
        dense_pp = {c: v / 2 if c in MIRRORED else v for c, v in dense_pp.items()}
        expert_pp = {c: v / 2 if c in MIRRORED else v for c, v in expert_pp.items()}
    total_params, per_layer_dense, per_layer_expert, embed, final_norm = _param_split(model)
    scale = params / total_params
    first, last = 0 in stages, p - 1 in stages
    tied = model.tied_embeddings and (p == 1 or first)  # the output layer shares the embedding on its own rank
    ends = (embed if first else 0) + (model.vocab * model.hidden if last and not tied else 0)
    dense_local = (layers * per_layer_dense + ends + (final_norm if last else 0)) * scale / t
    expert_local = layers * per_layer_expert * scale / (t * layout.expert_parallel)
    states = {c: dense_local * dense_pp[c] + expert_local * expert_pp[c] for c in dense_pp}
    if rules is not None and rules.layer_param_bytes and bpp.breakdown["params"]:
        # the layers' weights held at the stack's bytes (fp8 primary weights, ``under_fp8``); the embedding, the
        # output layer and the routed experts at --precision's (the layers' norms, < 0.1 %, counted with them)
        ratio = rules.layer_param_bytes / bpp.breakdown["params"]
        states["params"] += layers * per_layer_dense * scale / t * dense_pp["params"] * (ratio - 1)
    moved = OFFLOADED[layout.offload]
    host = sum(v for c, v in states.items() if c in moved)
    return StageStates(
        dense_local,
        expert_local,
        {c: 0.0 if c in moved else v for c, v in states.items()},
        host,
        ends * scale / t,
    )


def offloaded_activations(per_layer: float, offloaded: int, held: float) -> float:
    """Bytes of activations a GPU keeps in CPU memory with its first ``offloaded`` layers' copied there
    (sources.ACTIVATION_OFFLOAD): Transformer Engine releases a layer's GPU copy before layer L − k + i runs and
    reloads it in the backward while later layers' are freed, so the GPU peaks at (L − k) layers' (no extra
    in-flight buffer) and the host holds k layers' per micro-batch in flight."""
    return per_layer * offloaded * held


#: What DualPipe's second copy of a stage shares with the first: the optimizer's own state (DeepSeek-V3 §3.2.1).
MIRRORED = frozenset({"master_weights", "optimizer_states"})


def stage_indices(layers: int, pipeline: int, ends_only: bool, rules: MemoryRules | None = None) -> list[int]:
    """Every rank, or only those that can be the most loaded: the first and the last stage and the first of the
    heaviest (``stage_layers``: an uneven split puts its extra layers in the middle). Any other stage holds no more
    layers than one of those, with no more micro-batches in flight (1F1B and interleaved both hold fewer the later
    the stage), and no embedding or output layer. Under DualPipe ranks i and p − 1 − i hold the same: the first
    half."""
    p = pipeline
    if rules is not None and rules.dualpipe and p > 1:
        return list(range((p + 1) // 2))
    return sorted({0, p - 1, first_heaviest(layers, p)}) if ends_only else list(range(p))


def stage_memory(
    params: float,
    bpp: BytesPerParam,
    layout: Layout,
    activations: ActivationInputs | None = None,
    element_bytes: float | None = None,
    ends_only: bool = False,
    rules: MemoryRules | None = None,
    domain: int = GPUS_PER_NODE,
) -> list[StageMemory]:
    """Per-GPU bytes of every pipeline rank (``layout`` resolved), or with ``ends_only`` of those that can be the
    most loaded (``stage_indices``). Plain floats: fast enough for a planner.

    Without a model the parameters split evenly over t·p; with one, by ``stage_states`` and
    ``stage_activations``, under the stack's ``rules``: its gradient and moment bytes, its activation policy
    (``napkin.engines.memory.cached``), DualPipe (DeepSeek-V3 §3.2.1 Table 2: rank i holds stages i and p − 1 − i,
    two copies of the parameters, PP + 1 micro-batches' worth of a stage in flight).
    """
    t, p = layout.tensor_parallel, layout.pipeline_parallel
    if activations is None:
        dense_pp = per_gpu_bytes_per_param(
            stack_bytes_per_param(bpp, rules), layout.sharding, shard_ranks(layout, domain)
        )
        moved = OFFLOADED[layout.offload]
        local = params / (t * p)
        states = {c: b * local for c, b in dense_pp.items()}
        host = sum(v for c, v in states.items() if c in moved)
        states = {c: 0.0 if c in moved else v for c, v in states.items()}
        return [StageMemory(i, 0, local, states, host, 0.0, {}) for i in ((0,) if ends_only else range(p))]
    m, work = activations.model, activations.workload
    e = activations.element_bytes if element_bytes is None else element_bytes
    parts = activation_parts(activations, layout, e, rules)
    try:
        micro = work.microbatches(layout.dp) if work.global_batch is not None else None
    except ValueError as exc:
        raise UsageError(str(exc), field="global_batch", also=("micro_batch",)) from None
    stages = []
    for i in stage_indices(m.layers, p, ends_only, rules):
        layers = rank_layers(m.layers, p, i, rules)
        own = stage_states(i, layers, m, params, layout, bpp, rules, domain)
        held = stage_in_flight(i, layout, micro, rules)
        k = layout.activation_offload_layers
        act = stage_activations(i, p, layers, held, parts, rules, experts=own.expert_params > 0, offloaded=k)
        params_i = own.dense_params + own.expert_params
        host = offloaded_activations(parts.per_layer, k, held)
        stages.append(
            StageMemory(
                i, layers, params_i, own.states, own.host_bytes, held, act, own.expert_params, own.end_params, host
            )
        )
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
    fw = framework or Framework()
    bpp = stack_bytes_per_param(bytes_per_param(optimizer, precision), fw.rules)
    e = activation_element_bytes(precision)
    stages = stage_memory(params, bpp, layout, activations, e, ends_only=True, rules=fw.rules)
    return max(s.total + framework_bytes(s, bpp, layout, fw) for s in stages)


# ---------------------------------------------------------------------------------- framework memory


def gather_buffers(
    layers: int, dense_params: float, bpp: BytesPerParam, layout: Layout, fw: Framework, end_params: float = 0.0
) -> float:
    """The stack's ZeRO-3/FSDP gather buffers on one GPU of a rank of ``layers`` layers holding ``dense_params``
    parameters (before sharding, the routed experts' excluded; ``end_params`` of them the embedding's and output
    layer's): the layers gathered at once (the running one and those prefetched; under PP with the stack's
    ``pipeline_gathered``, the whole stage, and its unsharded gradients at ``pipeline_gradient_bytes``) and one
    layer's unsharded gradients, and with ``ends_gathered`` the embedding and output layer."""
    if not (fw.gathered_layers and layout.sharding in GATHERED and layers):
        return 0.0
    layer = (dense_params - end_params) / layers  # this GPU's (1/t) share of one layer
    rules = fw.rules
    gathered = fw.gathered_layers
    accumulated = 0.0
    if rules is not None and rules.pipeline_gathered and layout.pipeline_parallel > 1:
        gathered = layers  # FSDP under PP keeps every layer of the stage gathered (no reshard after forward)
        # and the stage's unsharded gradients, accumulated over its micro-batches, reduce-scattered after the last
        accumulated = dense_params * rules.pipeline_gradient_bytes
    # the gathered layers at the bytes the layers' weights are held in: under the stack's fp8 weights
    # (``under_fp8``) Megatron-FSDP all-gathers them in a uint8 buffer, one byte each (sources.FSDP_FP8_GATHER)
    weight = rules.layer_param_bytes if rules is not None and rules.layer_param_bytes else bpp.breakdown["params"]
    buffers = layer * (gathered * weight + bpp.breakdown["gradients"]) + accumulated
    if rules is not None and rules.ends_gathered:
        buffers += end_params * bpp.breakdown["params"]
    return buffers


def framework_bytes(stage: StageMemory, bpp: BytesPerParam, layout: Layout, fw: Framework) -> float:
    """The stack's own bytes on one GPU of ``stage`` (``Framework``)."""
    dense = stage.params - stage.expert_params
    buffers = gather_buffers(stage.layers, dense, bpp, layout, fw, stage.end_params)
    return fw.fixed + buffers + fw.fragmentation * (stage.total + buffers)
