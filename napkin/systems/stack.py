"""Stack profiles: what a training software stack does and achieves on top of the hardware.

napkin has one model of the hardware (``napkin.profiles``, ``napkin.cluster``); how much of it a run gets
depends as much on the software: which attention kernel, what is fused, what overlaps with what, how FSDP
prefetches, whether gradient accumulation is fused, what memory the framework keeps. A stack profile states
those values, each with its source, in one YAML file per stack (``stacks/*.yaml``, shipped in the wheel as
``napkin/stacks``), looked up exactly as hardware profiles are (``napkin.profiles``' catalog: an explicit
file, ``$NAPKIN_STACK_PATH``, ``<config dir>/stacks``, the built-ins; a user file with a built-in's name
replaces it, and every command says so).

The training values sit under ``training:``, the serving ones under ``serving:`` (``napkin.systems.serving_stack``);
a stack has either or both. The training sections are records of their own (``napkin.systems.stack_sections``);
``StackKnobs`` (``napkin.systems.stack_knobs``) is the plain-float form the step model's hot path reads. This
module assembles them into a profile, looks profiles up, and re-exports the names its callers use.

This module never prints and imports neither typer nor rich.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import Field, model_validator

from napkin.domain.base import Record
from napkin.domain.choices import Sharding
from napkin.errors import ProfileError, UsageError
from napkin.io.yamlio import normalize
from napkin.systems.profiles import Kind, Loaded, Profile, Slug, Source, file_of, find_in, parse_as
from napkin.systems.serving_stack import ServingStack
from napkin.systems.stack_knobs import (
    LOSS_BYTES_PER_LOGIT,
    Framework,
    MemoryRules,
    StackKnobs,
    fp4_memory_note,
    recipe_memory,
)
from napkin.systems.stack_sections import (
    STRICT,
    Attention,
    AttentionKernel,
    CachedActivations,
    Collectives,
    Elementwise,
    Fp8,
    Fraction,
    Memory,
    Overlap,
    Parallelism,
    Pipeline,
    Recomputation,
    RingAttention,
    Schedule,
    Validated,
)

ENV_STACK_PATH: Final = "NAPKIN_STACK_PATH"
ENV_STACK: Final = "NAPKIN_STACK"  # the default stack name when none is given
DEFAULT_STACK: Final = "megatron-core"


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

    model_config = STRICT
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
    moe_host_per_expert: float | None = Field(
        default=None,
        ge=0,
        le=0.1,
        allow_inf_nan=False,
        description="MoE: host seconds per local expert in each MoE layer and micro-batch, forward and backward "
        "(the framework's launches, one expert after another); a layer takes the longer of that and its GPU work. "
        "Absent: not counted",
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

    model_config = STRICT

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

    def _covering_all(self, field: str) -> list[str]:
        """The titles of the sources whose ``covers`` names ``field`` (a serving value), in file order."""
        return [s.title for s in self.sources if s.covers and field in [c.strip() for c in s.covers.split(",")]]

    def covering(self, field: str) -> str | None:
        """The title of the first source whose ``covers`` names ``field`` (a serving value), if one does."""
        return next(iter(self._covering_all(field)), None)

    def cited_all(self, field: str) -> str:
        """Every source that covers a serving value, joined (a fitted value and the mechanism it stands for)."""
        return "; ".join(self._covering_all(field)) or self.cited(field)

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
            moe_host=t.moe_host_per_expert or 0.0,
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
                kept_input_source=t.source_of("memory.fp8_linear_input_bytes") or "",
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


__all__ = [
    "DEFAULT_STACK",
    "LOSS_BYTES_PER_LOGIT",
    "STACKS",
    "Attention",
    "AttentionKernel",
    "CachedActivations",
    "Framework",
    "MemoryRules",
    "Offers",
    "RingAttention",
    "Stack",
    "StackKnobs",
    "Training",
    "Validated",
    "fp4_memory_note",
    "parse_stack",
    "recipe_memory",
    "resolve",
    "schema",
    "value_paths",
]
