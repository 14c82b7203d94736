"""Stack profiles: what a training software stack does and achieves on top of the hardware.

napkin has one model of the hardware (``napkin.profiles``, ``napkin.cluster``); how much of it a run gets
depends as much on the software: which attention kernel, what is fused, what overlaps with what, how FSDP
prefetches, whether gradient accumulation is fused, what memory the framework keeps. A stack profile states
those values, each with its source, in one YAML file per stack (``stacks/*.yaml``, shipped in the wheel as
``napkin/stacks``), looked up exactly as hardware profiles are (``napkin.profiles``' catalog: an explicit
file, ``$NAPKIN_STACK_PATH``, ``<config dir>/stacks``, the built-ins; a user file with a built-in's name
replaces it, and every command says so).

The training values sit under ``training:``, the serving ones under ``serving:`` (``napkin.systems.serving_stack``);
a stack has either or both.
``StackKnobs`` is the plain-float form the step model's hot path reads.

This module never prints and imports neither typer nor rich.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import ConfigDict, Field, model_validator

from napkin.domain.base import Record
from napkin.domain.choices import Sharding
from napkin.errors import ProfileError, UsageError
from napkin.io.yamlio import normalize
from napkin.systems.profiles import BytesOrZero, Kind, Loaded, Profile, Slug, Source, file_of, find_in, parse_as
from napkin.systems.serving_stack import ServingStack

ENV_STACK_PATH: Final = "NAPKIN_STACK_PATH"
ENV_STACK: Final = "NAPKIN_STACK"  # the default stack name when none is given
DEFAULT_STACK: Final = "megatron-core"
#: HBM bytes per logit of the loss where a stack states none: napkin's count of a cross-entropy in fp32, four
#: fp32 passes over the logits (upcast, softmax, its gradient, the gradient read by the output layer)
LOSS_BYTES_PER_LOGIT: Final = 16.0

_STRICT = ConfigDict(extra="forbid", frozen=True, validate_default=True)


Size = BytesOrZero  # a size a stack may state as none at all (0)
Fraction = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]
Share = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]


class AttentionKernel(StrEnum):
    materialized = "materialized"  # QKᵀ, softmax, A·V as separate kernels; the s×s scores in HBM
    sdpa = "sdpa"  # torch scaled_dot_product_attention (a flash or memory-efficient backend)
    flash2 = "flash2"  # FlashAttention-2
    flash3 = "flash3"  # FlashAttention-3 (Hopper)
    cudnn = "cudnn"  # cuDNN fused attention (Transformer Engine's default on Hopper)


class Schedule(StrEnum):
    one_f_one_b = "1f1b"
    interleaved = "interleaved"
    zero_bubble = "zero-bubble"
    dualpipe = "dualpipe"


class Attention(Record):
    """The attention core: which kernel, its share of the 16-bit dense peak, and whether it skips the masked
    half of a causal mask."""

    model_config = _STRICT
    kernel: AttentionKernel
    forward_efficiency: Fraction = Field(description="forward FLOP/s / 16-bit dense peak (fused kernels only)")
    backward_efficiency: Fraction = Field(description="backward FLOP/s / 16-bit dense peak (2.5× the forward FLOPs)")
    causal: bool = Field(description="causal mask by default, and the kernel skips the masked blocks")
    devices: dict[str, tuple[Fraction, Fraction]] = Field(
        default_factory=dict, description="hardware profile name → (forward, backward) efficiency on that device"
    )

    def efficiency(self, hardware: str) -> tuple[float, float]:
        """(forward, backward) share of the 16-bit peak on ``hardware``."""
        return self.devices.get(hardware, (self.forward_efficiency, self.backward_efficiency))

    @property
    def fused(self) -> bool:
        return self.kernel is not AttentionKernel.materialized


class Elementwise(Record):
    """Non-matmul work (norms, activation functions, rotary embeddings, residual adds, casts)."""

    model_config = _STRICT
    fused: bool = Field(description="fused or compiled kernels (True) or eager PyTorch ops (False)")
    traffic: float = Field(
        ge=1,
        le=10,
        allow_inf_nan=False,
        description="HBM bytes moved relative to napkin's one-pass count (eager ops re-read their inputs)",
    )
    hbm_efficiency: Fraction = Field(default=1.0, description="× napkin's HBM efficiency by kernel size")
    loss_bytes_per_logit: float | None = Field(
        default=None,
        ge=2,
        le=128,
        allow_inf_nan=False,
        description="HBM bytes the loss (softmax cross-entropy and its gradient) reads and writes per logit, "
        "forward and backward; absent: 16 (four fp32 passes)",
    )


class Overlap(Record):
    """What the stack hides under compute."""

    model_config = _STRICT
    grad_reduce: bool = Field(description="DP gradient reduction overlaps the last backward pass")
    tensor_parallel: Share = Field(description="share of the TP collectives hidden under GEMMs")
    fsdp_prefetch: int = Field(ge=0, le=8, description="FSDP/ZeRO-3 layers gathered ahead (0: none, exposed)")
    all_to_all: Share = Field(description="share of the MoE all-to-all hidden under compute")
    pipeline_p2p: Share = Field(description="share of the pipeline sends hidden under compute")
    compute_slowdown: Share = Field(
        le=0.5, description="compute runs this much slower while a collective shares the SMs and HBM"
    )


class Collectives(Record):
    """The share of napkin's NCCL model of the cluster (``napkin comm``) the stack's collectives reach."""

    model_config = _STRICT
    scale_up: Fraction = Field(description="achieved / modelled bandwidth inside a scale-up domain")
    scale_out: Fraction = Field(description="achieved / modelled bandwidth across domains")
    reduce_bytes: float | None = Field(
        default=None,
        ge=1,
        le=4,
        description="bytes per element of the gradient reduction (4: fp32); "
        "absent: the stored gradients' (--precision)",
    )


class Fp8(Record):
    """What an fp8 recipe costs beyond the fp8 GEMMs."""

    model_config = _STRICT
    overhead: Share = Field(description="extra time per fp8 GEMM, as a share of its math (casts, amax, scales)")


class Pipeline(Record):
    model_config = _STRICT
    schedules: list[Schedule] = Field(min_length=1, description="pipeline schedules the stack offers")


class Parallelism(Record):
    """What the stack can run (the planner searches only these)."""

    model_config = _STRICT
    tensor: bool
    sequence: bool = Field(description="sequence parallelism with TP")
    pipeline: bool
    context: bool
    expert: bool
    sharding: list[Sharding] = Field(min_length=1, description="data-parallel sharding it offers, its default first")
    activation_offload: bool = Field(
        default=False, description="activations offloaded to CPU memory layer by layer (Megatron-Core cpu_offloading)"
    )
    pipeline_sharding: list[Sharding] | None = Field(
        default=None,
        min_length=1,
        description="the sharding it offers together with pipeline parallelism (absent: all of sharding)",
    )

    @model_validator(mode="after")
    def _pipeline_sharding_offered(self) -> Parallelism:
        full = {Sharding.zero3, Sharding.fsdp}  # one strategy under two names
        offered = set(self.sharding) | (full if full & set(self.sharding) else set())
        extra = [str(z) for z in self.pipeline_sharding or () if z not in offered]
        if extra:
            raise ValueError(f"pipeline_sharding: {', '.join(extra)} is not in sharding ({', '.join(self.sharding)})")
        return self


class Recomputation(Record):
    """What selective recomputation keeps and re-runs when attention is fused (FlashAttention stores no scores, so
    Korthikanti's selective recomputation has nothing left to do; a stack's own policy may do more)."""

    model_config = _STRICT
    selective_keeps: Fraction = Field(description="share of a layer's activations kept (1: all)")
    selective_recomputes: Share = Field(description="share of a layer's forward re-run in the backward (0: none)")


class RingAttention(Record):
    """How the stack runs causal context parallelism (ring attention), as its code does it; absent: napkin's
    generic model (the KV heads all-gathered and their gradients reduce-scattered, hidden under the attention)."""

    model_config = _STRICT
    exchanged_heads: Literal["kv", "query"] = Field(
        description="heads of the K and V the ring passes: the model's KV heads, or repeated to the query heads "
        "before the attention call"
    )
    rotate: Literal["all-gather", "ring"] = Field(
        description="all-gather: every rank's K, V gathered once, issued before the first ring step and awaited "
        "at the second (hidden under one step); ring: passed to the next rank each step, under that step"
    )
    accumulate_bytes: float = Field(
        ge=2,
        le=4,
        allow_inf_nan=False,
        description="bytes per element of the ring's running output and of the dK, dV it accumulates and passes "
        "around the ring in the backward (4: fp32)",
    )


class Validated(Record):
    """The region the stack's published validation runs cover (tests/training_runs.py, tests/megatron_runs.py): a
    layout outside it is predicted all the same, and said to be outside."""

    model_config = _STRICT
    gpus: int = Field(ge=0, description="the most GPUs of a validation run (0: none)")
    seq: int = Field(ge=0, description="the longest sequence of a validation run")
    sharding_across_nodes: list[Sharding] = Field(description="data-parallel sharding validated across nodes")
    dtypes: list[str] = Field(description="number formats validated (bf16, fp8)")
    experts: Literal["none", "across-nodes"] = Field(
        default="none",
        description="mixture-of-experts layouts where the validation runs agree: none, or expert parallelism "
        "spanning nodes (the in-node runs are validation runs too, and miss: README)",
    )
    context_parallel: int = Field(
        default=0,
        ge=0,
        le=1 << 20,
        description="the largest context-parallel degree whose validation runs agree (0: not stated); the larger "
        "ones are validation runs too, and miss: README",
    )

    def outside(
        self,
        gpus: int,
        seq: int,
        sharding: Sharding,
        across_nodes: bool,
        dtype: str,
        experts: Literal["dense", "in-node", "across-nodes"] = "dense",
        context_parallel: int = 1,
    ) -> list[str]:
        """What of a layout its validation does not cover (empty: inside). ``experts``: a dense model, or an MoE
        whose expert-parallel group stays inside one node or spans nodes."""
        out = []
        if experts != "dense" and self.experts == "none":
            out.append("a mixture-of-experts model (validated: dense)")
        elif experts == "in-node" and self.experts == "across-nodes":
            out.append("experts within one node (published runs laid out so ran 1.7-3.2x slower than predicted)")
        if gpus > self.gpus:
            out.append(f"{gpus:,} GPUs (validated up to {self.gpus:,})")
        if seq > self.seq:
            out.append(f"sequence {seq:,} (validated up to {self.seq:,})")
        if across_nodes and sharding not in self.sharding_across_nodes and sharding is not Sharding.none:
            out.append(f"{sharding} across nodes")
        if dtype not in self.dtypes:
            out.append(f"{dtype} (validated: {', '.join(self.dtypes) or 'none'})")
        if self.context_parallel and context_parallel > self.context_parallel:
            out.append(
                f"CP {context_parallel} (published runs agree up to CP {self.context_parallel}; "
                "beyond it they ran slower than predicted)"
            )
        return out


class CachedActivations(Record):
    """An activation policy that caches the inputs of the linear layers in a low-precision format and recomputes
    cheap operators (DeepSeek-V3 §3.2.3, §3.3.3): it replaces Korthikanti's count for every layer."""

    model_config = _STRICT
    linear_input_bytes: float = Field(
        ge=0.5, le=4, allow_inf_nan=False, description="bytes per cached linear-layer input element (scales included)"
    )
    attention_output_bytes: float = Field(
        ge=0.5, le=4, allow_inf_nan=False, description="bytes per attention-output element (its projection's input)"
    )
    recompute_norms: bool = Field(description="norm outputs recomputed in the backward (their inputs kept)")
    recompute_up_projections: bool = Field(
        description="MLA up-projections recomputed (the compressed latents kept, not Q, K, V)"
    )
    recompute_swiglu: bool = Field(description="the SwiGLU output recomputed from its cached input")
    dispatch_bytes: float = Field(
        ge=0, le=4, allow_inf_nan=False, description="bytes per element of the MoE dispatch (0: no buffer)"
    )
    combine_bytes: float = Field(ge=0, le=4, allow_inf_nan=False, description="bytes per element of the MoE combine")
    overlapped_microbatches: int = Field(
        ge=1, le=4, description="micro-batches whose all-to-all buffers are live at once (2: DualPipe's overlap)"
    )


class Memory(Record):
    """Memory the stack keeps beyond napkin's formulas."""

    model_config = _STRICT
    fragmentation: Share = Field(le=0.5, description="allocator overhead as a share of the allocated bytes")
    fixed: Size = Field(description="per GPU: CUDA context, NCCL buffers, workspaces")
    logit_bytes: float = Field(
        default=4.0, ge=2, le=32, allow_inf_nan=False, description="bytes per logit the loss holds at its peak"
    )
    gradient_bytes: float | None = Field(
        default=None, ge=1, le=4, allow_inf_nan=False, description="bytes per stored gradient (absent: --precision's)"
    )
    moment_bytes: float | None = Field(
        default=None,
        ge=1,
        le=4,
        allow_inf_nan=False,
        description="bytes per optimizer-moment element (absent: --precision's)",
    )
    loss_parallel_logit_bytes: float | None = Field(
        default=None,
        ge=2,
        le=32,
        allow_inf_nan=False,
        description="bytes per logit at the loss's peak when TP shards the vocabulary (loss parallel); absent: "
        "logit_bytes",
    )
    output_input_gathered: bool = Field(
        default=False,
        description="with sequence parallelism the output layer keeps its input gathered (s·b·h, not ÷ t)",
    )
    pipeline_gathered: bool = Field(
        default=False,
        description="FSDP under pipeline parallelism keeps the whole stage's parameters gathered, 16-bit, "
        "across its micro-batches (no reshard after forward)",
    )
    ends_gathered: bool = Field(
        default=False,
        description="FSDP: the embedding and output layer (the root module) stay gathered, 16-bit, through the step",
    )
    pipeline_gradient_bytes: float | None = Field(
        default=None,
        ge=1,
        le=4,
        allow_inf_nan=False,
        description="FSDP under pipeline parallelism: bytes per parameter of the stage's unsharded gradients, "
        "accumulated across its micro-batches and reduce-scattered after the last (absent: none)",
    )
    cached: CachedActivations | None = Field(
        default=None, description="the stack's own activation policy (absent: Korthikanti's count)"
    )
    fp8_linear_input_bytes: float | None = Field(
        default=None,
        ge=0.5,
        le=2,
        allow_inf_nan=False,
        description="under an fp8 recipe, bytes per element of the input each linear layer keeps for its "
        "weight-gradient GEMM (its quantized copy, scales included); absent: the 16-bit activations'",
    )
    fp8_weight_bytes: float | None = Field(
        default=None,
        ge=1,
        le=4,
        allow_inf_nan=False,
        description="under an fp8 recipe, bytes per transformer-layer weight held for the GEMMs in place of the "
        "16-bit parameter (fp8 primary weights, with their transpose where the device's fp8 GEMMs take only the TN "
        "layout); absent: --precision's parameter bytes",
    )
    fp8_weight_bytes_devices: dict[str, Annotated[float, Field(ge=1, le=4, allow_inf_nan=False)]] | None = Field(
        default=None, description="hardware profile name → fp8_weight_bytes on that device (absent: none)"
    )


@dataclass(frozen=True, slots=True)
class Offers:
    """What a stack can run: the planner searches only these, and ``step`` refuses the rest."""

    tensor: bool = True
    sequence: bool = True
    pipeline: bool = True
    context: bool = True
    expert: bool = True
    sharding: tuple[Sharding, ...] = tuple(Sharding)
    schedules: tuple[Schedule, ...] = tuple(Schedule)
    #: the sharding it runs with PP > 1 (None: all of ``sharding``)
    pipeline_sharding: tuple[Sharding, ...] | None = None
    activation_offload: bool = True

    def data_parallel_only(self) -> Offers:
        """These offers with data parallelism alone, what napkin models for LoRA/QLoRA: replicated (DDP) or with
        the frozen base sharded (FSDP/ZeRO-3, as QLoRA with FSDP runs); ZeRO-1/2 would shard only the adapters'
        states, which change nothing of note, so they are not searched."""
        partial = (Sharding.zero1, Sharding.zero2)
        kept = tuple(z for z in self.sharding if z not in partial) or (Sharding.none,)
        return replace(self, tensor=False, sequence=False, pipeline=False, context=False, expert=False, sharding=kept)


#: The training values a ``sources`` entry may cover: a section or one of its fields (dotted).
SOURCE_HELP: Final = "give each value a source under training.sources, by field ('overlap.grad_reduce') or section"


class Training(Record):
    """What the stack does and achieves when it trains, each value with its source."""

    model_config = _STRICT
    attention: Attention
    matmul_efficiency: Fraction = Field(description="share of the device's achievable matmul rate R its GEMMs reach")
    elementwise: Elementwise
    gradient_accumulation_fusion: bool = Field(description="weight-gradient GEMMs accumulate into the gradients")
    overlap: Overlap
    collectives: Collectives
    fp8: Fp8
    pipeline: Pipeline
    parallelism: Parallelism
    recompute: Recomputation
    memory: Memory
    validated: Validated
    context_parallel: RingAttention | None = Field(
        default=None, description="how its context parallelism runs (absent: napkin's generic model)"
    )
    step_overhead: float = Field(ge=0, le=60, allow_inf_nan=False, description="seconds per step outside the model")
    grouped_gemm_streams: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="MoE: the local experts' GEMMs run this many at a time (one GEMM per expert on that many "
        "streams); absent: one batched call of them all",
    )
    sources: dict[str, str] = Field(description="a source for every value: field path (or section) → citation")

    def offers(self) -> Offers:
        """What the stack can run, its pipeline schedules included."""
        p = self.parallelism
        return Offers(
            p.tensor,
            p.sequence,
            p.pipeline,
            p.context,
            p.expert,
            tuple(p.sharding),
            tuple(self.pipeline.schedules),
            None if p.pipeline_sharding is None else tuple(p.pipeline_sharding),
            p.activation_offload,
        )

    @model_validator(mode="after")
    def _every_value_sourced(self) -> Training:
        paths = value_paths(self)
        for key, text in self.sources.items():
            if key not in paths and not any(p.startswith(key + ".") for p in paths):
                raise ValueError(f"sources.{key}: no such value; {SOURCE_HELP}")
            if len(text.strip()) < 3:
                raise ValueError(f"sources.{key}: give a citation (paper section, repository file at a commit)")
        missing = [p for p in paths if self.source_of(p) is None]
        if missing:
            raise ValueError(f"no source for {', '.join(missing)}; {SOURCE_HELP}")
        return self

    def source_of(self, path: str) -> str | None:
        """The citation of one value: its own entry, else its section's."""
        parts = path.split(".")
        for n in range(len(parts), 0, -1):
            found = self.sources.get(".".join(parts[:n]))
            if found is not None:
                return found
        return None


def value_paths(section: Record, prefix: str = "") -> list[str]:
    """Dotted paths of every leaf value of a section (``overlap.grad_reduce``), ``sources`` and values left absent
    (None: the stack states nothing there) excluded."""
    out = []
    for name in type(section).model_fields:
        if name == "sources":
            continue
        value = getattr(section, name)
        if value is None:
            continue
        path = f"{prefix}{name}"
        out += value_paths(value, path + ".") if isinstance(value, Record) else [path]
    return out


class Stack(Profile):
    """One software stack: its name, version and sources, and what it does when it trains."""

    model_config = _STRICT

    name: Slug = Field(description="identifier used with --stack")
    display_name: str = Field(min_length=1)
    aliases: list[str] = Field(default_factory=list)
    version: str = Field(min_length=1, description="the release or commit the values describe")
    sources: list[Source] = Field(min_length=1)
    notes: str | None = None
    training: Training | None = None
    serving: ServingStack | None = Field(default=None, description="what the stack achieves serving (issue 24)")

    @model_validator(mode="after")
    def _one_side(self) -> Stack:
        if self.training is None and self.serving is None:
            raise ValueError("a stack needs a training or a serving section")
        return self

    def lookup_keys(self) -> set[str]:
        return {normalize(self.name), *(normalize(a) for a in self.aliases)}

    def trains(self) -> Training:
        """The training values; a serving-only stack is bad input for a training command."""
        if self.training is None:
            raise UsageError(
                f"stack: {self.name!r} has serving values only (an inference engine); it answers inference, traffic "
                "and serve-plan; pick one with a training section for this command",
                field="stack",
            )
        return self.training

    def covering(self, field: str) -> str | None:
        """The title of the source whose ``covers`` names ``field`` (a serving value), if one does."""
        for source in self.sources:
            if source.covers and field in [c.strip() for c in source.covers.split(",")]:
                return source.title
        return None

    def cited(self, field: str) -> str:
        """The source of a serving value: the one that covers it, else that the profile leaves napkin's default."""
        return self.covering(field) or f"the {self.name} profile leaves {field} at napkin's default"

    def knobs(self, hardware: str = "") -> StackKnobs:
        """The training values as plain numbers, the attention efficiency that of ``hardware``."""
        t = self.trains()
        forward, backward = t.attention.efficiency(hardware)
        return StackKnobs(
            name=self.name,
            flash=t.attention.fused,
            causal=t.attention.causal,
            flash_forward=forward,
            flash_backward=backward,
            matmul=t.matmul_efficiency,
            elementwise_traffic=t.elementwise.traffic,
            hbm=t.elementwise.hbm_efficiency,
            loss_bytes=t.elementwise.loss_bytes_per_logit or LOSS_BYTES_PER_LOGIT,
            loss_source=(t.source_of("elementwise.loss_bytes_per_logit") or "")
            if t.elementwise.loss_bytes_per_logit is not None
            else "",
            fusion=t.gradient_accumulation_fusion,
            overlap_grad_reduce=t.overlap.grad_reduce,
            tp_overlap=t.overlap.tensor_parallel,
            prefetch=t.overlap.fsdp_prefetch,
            a2a_overlap=t.overlap.all_to_all,
            p2p_overlap=t.overlap.pipeline_p2p,
            slowdown=t.overlap.compute_slowdown,
            scale_up=t.collectives.scale_up,
            scale_out=t.collectives.scale_out,
            reduce_bytes=t.collectives.reduce_bytes or 0.0,
            fp8_overhead=t.fp8.overhead,
            fragmentation=t.memory.fragmentation,
            fixed_bytes=t.memory.fixed,
            step_overhead=t.step_overhead,
            grouped_streams=t.grouped_gemm_streams,
            memory_source="; ".join(
                dict.fromkeys(t.source_of(f"memory.{k}") or "" for k in ("fixed", "fragmentation"))
            ),
            selective_keeps=t.recompute.selective_keeps,
            logit_bytes=t.memory.logit_bytes,
            selective_recomputes=t.recompute.selective_recomputes,
            ring=t.context_parallel,
            own_memory=True,
            rules=MemoryRules(
                gradient_bytes=t.memory.gradient_bytes or 0.0,
                moment_bytes=t.memory.moment_bytes or 0.0,
                ends_gathered=t.memory.ends_gathered,
                pipeline_gathered=t.memory.pipeline_gathered,
                pipeline_gradient_bytes=t.memory.pipeline_gradient_bytes or 0.0,
                dualpipe=t.pipeline.schedules[0] is Schedule.dualpipe,
                cached=t.memory.cached,
                fp8_linear_input_bytes=t.memory.fp8_linear_input_bytes or 0.0,
                fp8_source=t.source_of("memory.fp8_linear_input_bytes") or "",
                fp8_weight_bytes=(t.memory.fp8_weight_bytes_devices or {}).get(
                    hardware, t.memory.fp8_weight_bytes or 0.0
                ),
                fp8_weights_source="; ".join(
                    dict.fromkeys(
                        t.source_of(f"memory.{k}") or "" for k in ("fp8_weight_bytes", "fp8_weight_bytes_devices")
                    )
                ),
                loss_parallel_logit_bytes=t.memory.loss_parallel_logit_bytes or 0.0,
                output_input_gathered=t.memory.output_input_gathered,
                states_source="; ".join(
                    dict.fromkeys(
                        t.source_of(f"memory.{k}") or ""
                        for k in ("gradient_bytes", "moment_bytes")
                        if getattr(t.memory, k) is not None
                    )
                ),
                ends_source="; ".join(
                    dict.fromkeys(
                        t.source_of(f"memory.{k}") or ""
                        for k in ("ends_gathered", "pipeline_gathered", "pipeline_gradient_bytes")
                    )
                ),
                dualpipe_source=t.source_of("pipeline.schedules") or "",
                cached_source="; ".join(
                    dict.fromkeys(t.source_of(p) or "" for p in value_paths(t) if p.startswith("memory.cached."))
                ),
            ),
        )


@dataclass(frozen=True)
class Framework:
    """Memory a software stack keeps beyond the formulas (``napkin.stack`` Memory): a fixed part per GPU (CUDA
    context, NCCL and workspace buffers), allocator fragmentation as a share of what is allocated, and, under
    FSDP / ZeRO-3, the unsharded parameters of the layers gathered at once (the running one and the prefetched)
    and one layer's unsharded gradients before their reduce-scatter."""

    fixed: float = 0.0
    fragmentation: float = 0.0
    gathered_layers: int = 0
    source: str = ""
    rules: MemoryRules | None = None  # what else the stack's memory section states (None: napkin's formulas)


@dataclass(frozen=True, slots=True)
class MemoryRules:
    """A stack's memory rules beyond fixed bytes and fragmentation, as plain values (``Memory``): the element
    bytes of gradients and optimizer moments, whether FSDP's root stays gathered, whether the pipeline schedule
    is DualPipe (two copies of the parameters, PP + 1 micro-batches in flight), and its activation policy."""

    gradient_bytes: float = 0.0  # 0: the precision's
    moment_bytes: float = 0.0  # 0: the precision's
    ends_gathered: bool = False
    pipeline_gathered: bool = False
    pipeline_gradient_bytes: float = 0.0  # 0: no unsharded gradients held across micro-batches
    dualpipe: bool = False
    cached: CachedActivations | None = None
    loss_parallel_logit_bytes: float = 0.0  # 0: logit_bytes
    output_input_gathered: bool = False
    fp8_linear_input_bytes: float = 0.0  # 0: linear inputs kept at the activations' 16-bit bytes under fp8
    fp8_source: str = ""
    fp8_weight_bytes: float = 0.0  # under fp8, bytes per transformer-layer weight on this device (0: --precision's)
    fp8_weights_source: str = ""
    layer_param_bytes: float = 0.0  # bytes per transformer-layer parameter held (0: --precision's): ``under_fp8``
    states_source: str = ""  # the citations of the values above, for --explain
    ends_source: str = ""
    dualpipe_source: str = ""
    cached_source: str = ""


def under_fp8(framework: Framework) -> Framework:
    """The stack's memory under an fp8 recipe: its transformer layers' weights at its fp8 weight bytes."""
    rules = framework.rules
    if rules is None or not rules.fp8_weight_bytes:
        return framework
    return replace(framework, rules=replace(rules, layer_param_bytes=rules.fp8_weight_bytes))


def recipe_memory(framework: Framework, fp8: bool) -> tuple[Framework, float | None]:
    """The stack's memory and the bytes each linear layer keeps of its input, for the run's number format: under
    an fp8 recipe its fp8 weights (``under_fp8``) and its kept linear-input bytes; else as it is, and None (the
    16-bit activations'). What memory and step both take."""
    rules = framework.rules
    if not fp8:
        return framework, None
    kept = rules.fp8_linear_input_bytes if rules is not None and rules.fp8_linear_input_bytes else None
    return under_fp8(framework), kept


@dataclass(frozen=True, slots=True)
class StackKnobs:
    """A stack's training values as plain numbers, for the step model's hot path. The defaults are napkin's
    model without a stack: every kernel at the device's rates, nothing hidden but what ``Overlap`` says."""

    name: str = "none"
    flash: bool = False
    causal: bool = False
    flash_forward: float = 0.75
    flash_backward: float = 561 / 989.5
    matmul: float = 1.0
    elementwise_traffic: float = 1.0
    hbm: float = 1.0
    loss_bytes: float = LOSS_BYTES_PER_LOGIT
    loss_source: str = ""  # the stack's citation of loss_bytes ("": napkin's default)
    fusion: bool = True
    overlap_grad_reduce: bool = True
    tp_overlap: float = 0.0
    prefetch: int = 1
    a2a_overlap: float = 0.0
    p2p_overlap: float = 0.0
    slowdown: float = 0.0
    scale_up: float = 1.0
    scale_out: float = 1.0
    reduce_bytes: float = 0.0  # 0: the precision's gradient bytes
    fp8_overhead: float = 0.0
    fragmentation: float = 0.0
    fixed_bytes: float = 0.0
    step_overhead: float = 0.0
    grouped_streams: int | None = None  # MoE expert GEMMs at once; None: one batched call of the local experts
    memory_source: str = ""
    own_memory: bool = False  # a stack profile's: FSDP/ZeRO-3 gather buffers counted
    selective_keeps: float = 1.0
    selective_recomputes: float = 0.0
    logit_bytes: float = 4.0
    rules: MemoryRules | None = None
    ring: RingAttention | None = None  # the stack's ring attention (None: napkin's generic CP model)

    def framework(self) -> Framework:
        """The stack's own memory for ``napkin.engines.memory``: fixed, fragmentation, the layers FSDP holds
        gathered (the running one and those prefetched)."""
        return Framework(
            self.fixed_bytes,
            self.fragmentation,
            1 + self.prefetch if self.own_memory else 0,
            self.memory_source,
            self.rules,
        )

    def replace(self, **changes: Any) -> StackKnobs:
        return replace(self, **changes)


# ------------------------------------------------------------------------------------------ lookup


@functools.lru_cache(maxsize=256)
def parse_stack(text: str, label: str) -> Stack:
    """Validate one stack file's YAML; errors name the file, the line and the field (never a value)."""
    return parse_as(Stack, text, label, "stack", "training")


#: Stack profiles in the one catalog (``napkin.profiles``): ``$NAPKIN_STACK_PATH``, ``<config dir>/stacks``,
#: the built-ins (``stacks/``, ``napkin/stacks`` in the wheel).
STACKS: Final[Kind[Stack]] = Kind("stacks", ENV_STACK_PATH, "stack", "stack", DEFAULT_STACK, parse_stack)


def resolve(
    name: str | None = None,
    stack_file: str | Path | None = None,
    what: str = "stack",
    side: Literal["training", "serving"] | None = None,
) -> Loaded[Stack]:
    """The stack a command should use: an explicit file, else a name, else ``$NAPKIN_STACK``, else
    megatron-core. A user file that replaces a built-in says so (``Stack.origin_notes``, carried into results).
    ``side``: the section the command reads; an unknown name lists only the stacks that have it."""
    if name is not None and stack_file is not None:
        raise UsageError("give stack or stack_file, not both", field="stack", also=("stack_file",))

    def usable(stack: Stack) -> bool:
        return side is None or getattr(stack, side) is not None

    example = "vllm" if side == "serving" else None  # what a new stack is best copied from

    try:  # a stack the command cannot use is bad input (exit 2), its line and field named
        if stack_file is not None:
            loaded = file_of(STACKS, stack_file, "stack_file")
        elif name is not None:
            loaded = find_in(STACKS, name, what=what, usable=usable, example=example)
        elif os.environ.get(ENV_STACK):
            loaded = find_in(STACKS, os.environ[ENV_STACK], what=f"${ENV_STACK}", usable=usable, example=example)
        else:
            loaded = find_in(STACKS, DEFAULT_STACK, what=what, usable=usable, example=example)
    except ProfileError as exc:
        raise UsageError(str(exc), field=next(iter(exc.fields), None)) from None
    return loaded


def schema() -> dict[str, Any]:
    """The JSON Schema of a stack file (for editors: yaml-language-server)."""
    result = Stack.model_json_schema()
    result["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    result["title"] = "napkin stack profile"
    return result


__all__ = ["DEFAULT_STACK", "STACKS", "Stack", "StackKnobs", "Training", "parse_stack", "resolve", "schema"]
