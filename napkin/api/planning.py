"""Step-time questions: one layout's step (``step``) and the search over layouts (``plan``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

from napkin import units
from napkin.api.adapter_inputs import AdapterOptions, data_parallel_only
from napkin.api.inputs import (
    LAYOUT_KEYWORDS,
    SHAPE_FIELDS,
    choice,
    global_batch_of,
    keywords,
    option_keywords,
    parse,
    same_keywords,
    split_layout,
)
from napkin.api.model_inputs import Chosen, beyond_context, build_model, resolve_seq, seq_step
from napkin.api.system_inputs import get_cluster, get_stack, reserve_of, usable_capacity
from napkin.domain.choices import Dtype, Finetune, Offload, Optimizer, Precision
from napkin.errors import UsageError

if TYPE_CHECKING:  # imported where used: a command pays only for the objects it builds (startup time)
    from napkin.domain.model import Model
    from napkin.engines.finetune import Adapters
    from napkin.engines.planner import PlanResult
    from napkin.engines.step import Knobs, StepModel, StepResult
    from napkin.systems.cluster import Cluster
    from napkin.systems.profiles import HardwareProfile

from napkin.api.inputs import Number

T = TypeVar("T")


def _notes(sm: StepModel, batch_tokens: int | None, gpus: int | None = None) -> list[str]:
    """What a step or plan result should say about its inputs: a token batch that is not whole sequences (and,
    for a plan on ``gpus``, the data parallelism its rounded count leaves), a sequence longer than the model's
    context."""
    notes = []
    if batch_tokens is not None and batch_tokens != sm.batch * sm.seq:
        note = (
            f"global batch: {batch_tokens:,} tokens is {batch_tokens / sm.seq:,.1f} sequences of "
            f"{sm.seq:,}; using {sm.batch:,} ({sm.batch * sm.seq:,} tokens)"
        )
        shared = math.gcd(sm.batch, gpus) if gpus else None
        if gpus and shared is not None and shared < gpus:  # DP × micro-batch must divide the sequences
            whole = -(-sm.batch // gpus) * gpus
            note += (
                f", which share only {shared} with {gpus:,} GPUs: data parallelism at most {shared}; "
                f"--global-batch {whole:,} (or a --seq that divides the tokens) lets it use every GPU"
            )
        notes.append(note)
    return notes


@dataclass(frozen=True)
class StepOptions:
    """What every step-time question takes besides the layout and the model's shape: the model, the batch, the
    cluster, the number formats and the software stack, declared once. ``step_setup`` and ``plan`` list these in
    their signatures (``step_keywords``) and hand them to ``step_model`` whole."""

    model: str | Model | None = None
    model_config: str | Path | None = None
    seq: Number | None = None
    global_batch: Number | None = None
    global_batch_tokens: Number | None = None
    cluster: str | Cluster | None = None
    hardware: str | HardwareProfile | None = None
    hardware_file: str | Path | None = None
    dtype: str | Dtype = Dtype.bf16
    optimizer: str | Optimizer = Optimizer.adamw
    precision: str | Precision = Precision.mixed
    reserve: Number = 0
    flash_attention: bool | None = None
    causal: bool | None = None
    overlap_grad_reduce: bool | None = None
    gradient_accumulation_fusion: bool | None = None
    stack: str | Any | None = None
    stack_file: str | Path | None = None

    @classmethod
    def take(cls, options: dict[str, Any]) -> StepOptions:
        """These options, taken out of a question's keywords (the shape and layout keywords stay)."""
        return cls(**{name: options.pop(name) for name in STEP_FIELDS if name in options})


STEP_FIELDS: Final = tuple(f.name for f in fields(StepOptions))


def step_keywords(func: Callable[..., T]) -> Callable[..., T]:
    """Put StepOptions' keywords in a step-time question's signature (``option_keywords``)."""
    return option_keywords(StepOptions)(func)


def step_model(
    o: StepOptions, shape: dict[str, Any], *, adapters: Adapters | None = None, gpus: int | None = None
) -> tuple[StepModel, Chosen, int | None]:
    """The step model of ``o`` and the model's ``shape`` keywords, the model chosen, and the batch in tokens if
    it was given so; ``gpus``: the GPUs a cluster must hold."""
    from napkin.engines.step import StepModel, machine
    from napkin.results.stack_views import explain_steps

    chosen = build_model(o.model, o.model_config, **shape)
    arch = chosen.model
    if arch is None:
        raise UsageError(
            "model is required: a preset, model_config or layers, hidden, heads",
            field="model",
            also=("model_config", "layers", "hidden", "heads"),
        )
    length, source = resolve_seq(o.seq, chosen, needed_for="the step time")
    assert length is not None
    batch, batch_tokens = global_batch_of(o.global_batch, o.global_batch_tokens, length)
    if batch is None:
        raise UsageError(
            "global_batch (sequences) or global_batch_tokens (e.g. 4M) is required",
            field="global_batch",
            also=("global_batch_tokens",),
        )
    found, profile = get_cluster(o.cluster, o.hardware, o.hardware_file, gpus=gpus)
    hw = machine(found, profile, str(choice(Dtype, o.dtype, "dtype")))
    software = get_stack(o.stack, o.stack_file)
    switches = {
        "attention.kernel": o.flash_attention,
        "attention.causal": o.causal,
        "overlap.grad_reduce": o.overlap_grad_reduce,
        "gradient_accumulation_fusion": o.gradient_accumulation_fusion,
    }
    sm = StepModel(
        arch,
        length,
        batch,
        hw,
        optimizer=choice(Optimizer, o.optimizer, "optimizer"),
        precision=choice(Precision, o.precision, "precision"),
        flash_attention=o.flash_attention,
        causal=o.causal,
        reserve_bytes=reserve_of(o.reserve, usable_capacity(profile)),
        overlap_grad_reduce=o.overlap_grad_reduce,
        gradient_accumulation_fusion=o.gradient_accumulation_fusion,
        adapters=adapters,
        stack=software.knobs(profile.name),
        stack_steps=explain_steps(software, profile.name, {k: v for k, v in switches.items() if v is not None}),
        # adapters are modelled data parallel only (each GPU runs the whole model): the planner searches that
        offers=software.trains().offers().data_parallel_only() if adapters else software.trains().offers(),
        validated=software.trains().validated,
    )
    told = tuple(n for p in (found, profile, software) for n in p.origin_notes)  # where they came from, said
    notes = tuple(dict.fromkeys((*told, *chosen.notes)))
    return sm, replace(chosen, seq=length, seq_source=source, notes=notes), batch_tokens


@keywords(LAYOUT_KEYWORDS, SHAPE_FIELDS)
@step_keywords
@option_keywords(AdapterOptions)
def step_setup(
    *,
    gpus: Number,
    micro_batch: Number = 1,
    **options: Any,
) -> tuple[StepModel, Knobs, Chosen, int | None]:
    """(step model, layout knobs, the model chosen, batch tokens) of one ``step`` question, checked: what ``step``
    and ``calibrate`` share. The layout's sharding, when not given, is the stack's default."""
    from napkin.engines.step import check_knobs

    o = StepOptions.take(options)
    shape = options  # what is left: the model's shape and the layout
    adapters = AdapterOptions.take(shape).adapters(o.optimizer, o.precision, Precision.mixed)
    if adapters is not None and shape.get("recompute") is None and adapters.finetune is Finetune.qlora:
        shape["recompute"] = "full"  # peft's prepare_model_for_kbit_training turns checkpointing on
    lay = split_layout(shape)
    if lay.offload is not Offload.none:
        raise UsageError("offload: the step model does not model CPU offload; leave it at none", field="offload")
    if adapters is not None:
        data_parallel_only(lay)
    g = parse(units.parse_int, gpus, "gpus")
    b = parse(units.parse_int, micro_batch, "micro_batch")
    sm, chosen, batch_tokens = step_model(o, shape, adapters=adapters, gpus=g)
    if "sharding" not in lay.model_fields_set and sm.offers is not None and adapters is None:
        lay = lay.model_copy(update={"sharding": sm.offers.sharding[0]})  # the stack's own default
    if "sequence_parallel" not in lay.model_fields_set and sm.offers is not None and lay.tensor_parallel > 1:
        lay = lay.model_copy(update={"sequence_parallel": sm.offers.sequence})  # on where the stack offers it
    return sm, check_knobs(sm, lay, b, g, batch_tokens), chosen, batch_tokens


@same_keywords(step_setup)
def step(**options: Any) -> StepResult:
    """One training step's time, breakdown, predicted MFU/HFU and memory for a model, layout, cluster and
    software stack. ``stack``: a stack profile (``stack_list``; default megatron-core) that sets FlashAttention,
    the causal mask, the overlaps and the gradient-accumulation fusion, and the sharding when it is not given;
    ``flash_attention``, ``causal``, ``overlap_grad_reduce`` and ``gradient_accumulation_fusion`` override it.
    ``finetune="lora"``/``"qlora"``: adapters on a frozen base (as ``memory`` takes them): no weight-gradient
    GEMMs for the base, only the adapters reduced and updated, a quantized base dequantized per matmul; data
    parallel only.
    ``overlap_grad_reduce=False``: the gradient all-reduce runs after the last backward (Megatron-LM without
    --overlap-grad-reduce), all of it exposed. ``gradient_accumulation_fusion=False``: each micro-batch adds its
    weight gradients into the stored ones in a kernel of its own (PyTorch autograd after the first micro-batch,
    Megatron-LM's fp32 gradient buffer every one; Megatron-LM before 2022 or with
    --no-gradient-accumulation-fusion)."""
    from napkin.engines.step import build_result

    sm, knobs, chosen, batch_tokens = step_setup(**options)
    result = build_result(sm, knobs, chosen.name or "custom")
    result.seq_source = chosen.seq_source or "given"
    result.steps.insert(0, seq_step(sm.seq, chosen.seq_source))
    result.notes += [*chosen.notes, *_notes(sm, batch_tokens)]
    result.warnings[:0] = list(chosen.warnings)
    result.warnings += beyond_context(sm.seq, sm.model.context)
    return result


@keywords(SHAPE_FIELDS)
@step_keywords
@option_keywords(AdapterOptions)
def plan(*, gpus: Number, top: Number = 5, explore: bool = False, **options: Any) -> PlanResult:
    """Every valid layout that fits, ranked by predicted step time, those whose own choices (sharding across
    nodes, EP, CP, micro-batch) lie inside the region ``stack``'s published runs validate first (``explore``: all
    by predicted step time alone); the top ``top`` with memory and MFU. Only what
    ``stack`` offers is searched (its sharding, pipeline schedules, TP/PP/CP/EP). ``finetune="lora"``/``"qlora"``
    (with the adapter options ``memory`` and ``step`` take): adapters on a frozen base, searched over data
    parallelism, micro-batch and recomputation, the layouts napkin models for them."""
    from napkin.engines.planner import plan as engine

    g = parse(units.parse_int, gpus, "gpus")
    n = parse(units.parse_int, top, "top")
    o = StepOptions.take(options)
    adapters = AdapterOptions.take(options).adapters(o.optimizer, o.precision, Precision.mixed)
    sm, chosen, batch_tokens = step_model(o, options, adapters=adapters, gpus=g)
    result = engine(sm, g, chosen.name or "custom", n, explore)
    result.seq_source = chosen.seq_source or "given"
    result.steps.insert(0, seq_step(sm.seq, chosen.seq_source))
    result.notes += [*chosen.notes, *_notes(sm, batch_tokens, g)]
    result.warnings[:0] = list(chosen.warnings)
    result.warnings += beyond_context(sm.seq, sm.model.context)
    return result
