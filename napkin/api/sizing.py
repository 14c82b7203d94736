"""Training-memory questions: what a layout needs per GPU, and the largest model that fits."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from napkin import units
from napkin.api.adapter_inputs import AdapterOptions, data_parallel_only
from napkin.api.inputs import (
    LAYOUT_KEYWORDS,
    SHAPE_FIELDS,
    choice,
    first_error,
    global_batch_of,
    keywords,
    option_keywords,
    parse,
    said,
    same_keywords,
    split_layout,
)
from napkin.api.model_inputs import Chosen, build_model, described, named_preset, resolve_params, resolve_seq
from napkin.api.system_inputs import get_hardware, get_stack, reserve_of, usable_capacity
from napkin.domain.choices import Dtype, Finetune, Optimizer, Precision, Recompute, Sharding
from napkin.errors import UsageError

if TYPE_CHECKING:  # imported where used: a command pays only for the objects it builds (startup time)
    from napkin.domain.layout import Layout
    from napkin.domain.model import Model
    from napkin.engines.finetune import FinetuneMemoryResult
    from napkin.engines.finetune_max import FinetuneMaxResult
    from napkin.engines.memory import MaxModelResult, MemoryResult
    from napkin.systems.profiles import HardwareProfile

from napkin.api.inputs import Number


@dataclass(frozen=True)
class _Inputs:
    """What memory and max-model share: N, G, the activation inputs (with a model), the model and its length."""

    params: float | None
    gpus: int
    activations: Any
    chosen: Chosen
    seq: int | None = None
    seq_source: str | None = None


def _memory_inputs(
    params: Number | None,
    gpus: Number,
    model: str | Model | None,
    model_config: str | Path | None,
    seq: Number | None,
    micro_batch: Number,
    global_batch: Number | None,
    flash_attention: bool | None,
    lay: Layout,
    shape: dict[str, Any],
    global_batch_tokens: Number | None = None,
) -> _Inputs:
    from napkin.domain.workload import Workload
    from napkin.engines.memory import ActivationInputs

    chosen = build_model(model, model_config, **shape)
    arch = chosen.model
    n = resolve_params(params, arch, active=False, required=False, named=named_preset(model, model_config))
    g = parse(units.parse_int, gpus, "gpus")
    resolved = lay.resolve(g, arch)
    b = parse(units.parse_int, micro_batch, "micro_batch")
    activations = (
        ("seq", seq),
        ("micro_batch", b != 1 or None),
        ("global_batch", global_batch),
        ("global_batch_tokens", global_batch_tokens),
    )
    given = [name for name, value in (*activations, ("flash_attention", flash_attention)) if value is not None]
    if arch is None:
        if given:  # the options given, each named: they size the activations, which need the layers
            raise UsageError(
                f"{', '.join(given)}: activation memory needs an architecture: model, model_config or "
                "layers, hidden, heads",
                field=given[0],
                also=(*given[1:], "model", "model_config", "layers", "hidden", "heads"),
            )
        return _Inputs(n, g, None, chosen)
    length, source = resolve_seq(seq, chosen, needed_for="activation memory")
    assert length is not None
    batch, tokens = global_batch_of(global_batch, global_batch_tokens, length)
    try:
        work = Workload(seq=length, micro_batch=b, global_batch=batch)
    except ValueError as exc:
        where = "global_batch" if tokens is None else "global_batch_tokens"
        raise UsageError(first_error(exc), field=where, also=("micro_batch",)) from None
    acts = ActivationInputs(model=arch, workload=work, layout=resolved, flash_attention=bool(flash_attention))
    return _Inputs(n, g, acts, chosen, length, source)


@keywords(LAYOUT_KEYWORDS, SHAPE_FIELDS)
@option_keywords(AdapterOptions)
def _sizing(
    *,
    params: Number | None = None,
    gpus: Number = 1,
    optimizer: str | Optimizer = Optimizer.adamw,
    precision: str | Precision = Precision.mixed,
    reserve: Number = 0,
    model: str | Model | None = None,
    model_config: str | Path | None = None,
    seq: Number | None = None,
    micro_batch: Number = 1,
    global_batch: Number | None = None,
    flash_attention: bool | None = None,
    hardware: str | HardwareProfile | None = None,
    hardware_file: str | Path | None = None,
    stack: str | Any | None = None,
    stack_file: str | Path | None = None,
    dtype: str | Dtype = Dtype.bf16,
    global_batch_tokens: Number | None = None,
    **shape: Any,
) -> MemoryResult | MaxModelResult | FinetuneMemoryResult | FinetuneMaxResult:
    """memory's question, or with ``params=_NO_PARAMS`` max_model's (the same inputs, solved for N).
    ``finetune="lora"``/``"qlora"``: adapters of rank ``lora_rank`` (default 16) on ``lora_targets`` (default
    every linear layer of the blocks) over a frozen base (``base_format``: bf16, int8 or nf4; QLoRA's default
    nf4 with ``double_quant``); ``paged_optimizer``: bitsandbytes paged states, which spill to CPU memory.
    ``stack`` (full training; default megatron-core): FlashAttention by default where it has it, its selective
    recomputation, its loss, and the memory it keeps (FSDP/ZeRO-3 gather buffers, fixed, fragmentation); a
    sharding it does not offer is an error, and left out it is the stack's own (as step and plan take it), but
    for max_model, which pools the states with ZeRO-3 where the stack offers it. ``dtype="fp8"``: an fp8 recipe,
    whose linear layers keep the stack's bytes per saved input (full training only)."""
    from napkin.engines.memory import memory as engine
    from napkin.engines.step import offered_sharding
    from napkin.engines.step.checks import check_offered, offered_with_pipeline
    from napkin.engines.step.machine import check_training_dtype
    from napkin.systems.stack import fp4_memory_note, recipe_memory

    number = choice(Dtype, dtype, "dtype")
    check_training_dtype(number)
    recipe = number in (Dtype.fp8, Dtype.fp4)  # a low-precision training recipe (fp8, NVFP4)
    adapters = AdapterOptions.take(shape).adapters(optimizer, precision, Precision.mixed)
    recompute_given = shape.get("recompute")
    lay = split_layout(shape)
    solve_for_n = params is _NO_PARAMS
    if adapters is not None:
        if global_batch_tokens is not None:
            raise UsageError(
                "global_batch_tokens: not used with finetune lora/qlora (give micro_batch)", field="global_batch_tokens"
            )
        if recipe:
            raise UsageError(
                f"dtype: {number} is a full-training recipe here; adapters keep their own dtypes (base_format, "
                "adapter_dtype)",
                field="dtype",
                also=("finetune", "base_format", "adapter_dtype"),
            )
        return _adapter_memory(
            adapters,
            solve_for_n,
            params,
            gpus,
            model,
            model_config,
            seq,
            micro_batch,
            global_batch,
            flash_attention is None or bool(flash_attention),  # transformers' default SDPA: no s×s kept
            lay,
            recompute_given,
            hardware,
            hardware_file,
            reserve,
            shape,
        )
    software = get_stack(stack, stack_file)
    offers = software.trains().offers()
    if "sharding" not in lay.model_fields_set:
        if not solve_for_n or not offered_sharding(offers, lay.sharding):
            # memory: the stack's own default, as step and plan take it (Megatron-Core's distributed optimizer,
            # ZeRO-1); max-model: ZeRO-3 where the stack offers it, the memory pooled over every GPU
            lay = lay.model_copy(update={"sharding": offers.sharding[0]})
        if not offered_with_pipeline(offers, lay.sharding, lay.pipeline_parallel):
            # DeepSpeed's pipeline engine runs ZeRO-1 or none: its first, as step takes the stack's default
            lay = lay.model_copy(update={"sharding": (offers.pipeline_sharding or offers.sharding)[0]})
    if "sequence_parallel" not in lay.model_fields_set and lay.tensor_parallel > 1:
        lay = lay.model_copy(update={"sequence_parallel": offers.sequence})  # on where the stack offers it
    check_offered(offers, lay, software.name)  # what step refuses, memory refuses
    if flash_attention is None and (model is not None or model_config is not None or shape.get("layers")):
        flash_attention = software.trains().attention.fused
    got = _memory_inputs(
        None if solve_for_n else params,
        gpus,
        model,
        model_config,
        seq,
        micro_batch,
        global_batch,
        flash_attention,
        lay,
        shape,
        global_batch_tokens,
    )
    if got.params is None and not solve_for_n:
        raise UsageError("params (or model) is required", field="params", also=("model",))
    profile = get_hardware(hardware, hardware_file)
    if recipe and profile.peak_if_known(number) is None:  # as step refuses it
        raise UsageError(
            f"dtype: {profile.name} has no {number} peak; it has: {', '.join(profile.peak_flops)}",
            field="dtype",
        )
    knobs = software.knobs(profile.name)
    framework, kept = recipe_memory(knobs.framework(), number)  # under fp8/fp4: its weights and linear inputs
    common = {
        "optimizer": choice(Optimizer, optimizer, "optimizer"),
        "layout": lay,
        "activations": got.activations,
        "precision": choice(Precision, precision, "precision"),
        "reserve_bytes": reserve_of(reserve, usable_capacity(profile)),
        "framework": framework,
    }
    if got.activations is not None:  # the stack's selective recomputation and loss
        common["activations"] = got.activations.model_copy(
            update={
                "selective_keeps": knobs.selective_keeps,
                "logit_bytes": knobs.logit_bytes,
                "linear_input_bytes": kept,  # under fp8, the stack's bytes per kept linear input
            }
        )
    fp4_note = [fp4_memory_note(kept, software.name)] if number is Dtype.fp4 else []
    if solve_for_n:  # max_model: the same inputs, solved for N
        from napkin.engines.memory import max_model as solve

        solved = solve(got.gpus, profile, **common).model_copy(update={"stack": software.name, "dtype": number})
        solved.notes.extend(fp4_note)
        own = offers.sharding[0]
        if "sharding" not in lay.model_fields_set and solved.gpus > 1 and solved.sharding is not own:
            solved.notes.append(  # say what memory needs to agree with this answer
                f"sharding: {solved.sharding}, the states pooled over every GPU; memory and step default to the "
                f"stack's {own} (give memory --sharding {solved.sharding} to check this answer)"
            )
        return said(described(solved, got.chosen, got.seq, got.seq_source), profile, software)
    assert got.params is not None
    result = engine(got.params, profile, gpus=got.gpus, **common).model_copy(
        update={"stack": software.name, "dtype": number}
    )
    result.notes.extend(fp4_note)
    return said(described(result, got.chosen, got.seq, got.seq_source), profile, software)


def _adapter_memory(
    adapters: Any,
    solve_for_n: bool,
    params: Number | None,
    gpus: Number,
    model: str | Model | None,
    model_config: str | Path | None,
    seq: Number | None,
    micro_batch: Number,
    global_batch: Number | None,
    flash_attention: bool,
    lay: Layout,
    recompute_given: Any,
    hardware: str | HardwareProfile | None,
    hardware_file: str | Path | None,
    reserve: Number,
    shape: dict[str, Any],
) -> FinetuneMemoryResult | FinetuneMaxResult:
    """memory / max_model with LoRA or QLoRA adapters (data parallel only: each GPU runs the whole model)."""
    from napkin.domain.workload import Workload
    from napkin.engines import finetune as ft
    from napkin.engines import finetune_max as fm
    from napkin.engines.memory import capacity
    from napkin.systems.presets import get_preset

    data_parallel_only(lay)
    if not solve_for_n and params is not None:
        raise UsageError(
            f"params: {adapters.finetune} needs a model, not a parameter count (adapters follow its shape)",
            field="params",
            also=("model",),
        )
    chosen = build_model(model, model_config, **shape)
    profile = get_hardware(hardware, hardware_file)
    cap = capacity(profile)
    reserve_bytes = reserve_of(reserve, usable_capacity(profile))
    g = parse(units.parse_int, gpus, "gpus")
    sharding = lay.sharding if g > 1 else Sharding.none
    rc = choice(Recompute, recompute_given, "recompute") if recompute_given is not None else None
    recompute = rc or (Recompute.full if adapters.finetune is Finetune.qlora else Recompute.none)
    arch = chosen.model
    shaped = None
    length = source = None
    if arch is None and not solve_for_n:
        raise UsageError(
            f"model: {adapters.finetune} needs a model (a preset, a config.json, a folder or a Hub id): adapters "
            "and activations follow its shape",
            field="model",
            also=("model_config",),
        )
    b = parse(units.parse_int, micro_batch, "micro_batch")
    if global_batch is not None:
        raise UsageError("global_batch: not used with finetune lora/qlora (give micro_batch)", field="global_batch")

    def evaluate(m: Model, work: Workload) -> FinetuneMemoryResult:
        return ft.finetune_memory(
            m,
            adapters,
            work,
            hardware=profile.name,
            capacity=cap,
            recompute=recompute,
            flash_attention=flash_attention,
            gpus=g,
            sharding=sharding,
            reserve_bytes=reserve_bytes,
        )

    reference = None
    if arch is not None:
        length, source = resolve_seq(seq, chosen, needed_for="activation memory")
        assert length is not None
        work = Workload(seq=length, micro_batch=b)
        shaped = evaluate(arch, work)
    else:  # max_model without a model: the published Llama 3 shapes, each with as many of its layers as fit
        length = parse(units.parse_int, seq, "seq") if seq is not None else fm.DEFAULT_SEQ
        source = "given" if seq is not None else fm.DEFAULT_SEQ_SOURCE
        work = Workload(seq=length, micro_batch=b)
        best: tuple[float, str, Model] | None = None
        for name in fm.REFERENCE_SHAPES:
            base = get_preset(name).model
            depth = fm.max_layers(base, lambda m: evaluate(m, work).fits)
            if depth is not None:
                m = fm.layer_scaled(base, min(depth, base.layers))
                if best is None or m.params() > best[0]:
                    best = (m.params(), name, m)
        if best is not None:
            reference, arch = best[1], best[2]
            shaped = evaluate(arch, work)
    if not solve_for_n:
        assert shaped is not None  # a model is required above
        return said(described(shaped, chosen, length, source), profile)
    per_param = fm.bytes_per_param(adapters)
    room = max(0.0, cap[0] - reserve_bytes) * (g if sharding in (Sharding.zero3, Sharding.fsdp) else 1)
    deepest = None
    if shaped is not None and arch is not None and reference is None:
        deepest = fm.max_layers(arch, lambda m: evaluate(m, work).fits)
    result = fm.FinetuneMaxResult(
        hardware=profile.name,
        gpus=g,
        finetune=adapters.finetune,
        base_format=adapters.format,
        double_quant=adapters.dq,
        bytes_per_param=per_param,
        memory_bytes=room,
        capacity_source=cap[1],
        reserve_bytes=reserve_bytes,
        weights_only_params=room / per_param,
        shape=shaped,
        reference=reference,
        shape_layers=arch.layers if reference is not None and arch is not None else None,
        seq=length,
        micro_batch=b,
        steps=_max_steps(shaped, reference, arch, length, source),
        max_layers=deepest,
        max_layers_params=None if deepest is None or arch is None else fm.layer_scaled(arch, deepest).params(),
    )
    return said(described(result, chosen, length, source), profile)


def _max_steps(
    shaped: Any, reference: str | None, arch: Model | None, seq: int | None, source: str | None
) -> list[Any]:
    """max_model --explain with adapters: the search over the reference shapes, then the fitting model's memory."""
    from napkin.engines import finetune_max as fm
    from napkin.results.explain import step

    if shaped is None:
        return []
    if reference is None or arch is None:
        return list(shaped.steps)
    search = step(
        "largest that fits",
        "each of " + ", ".join(fm.REFERENCE_SHAPES) + " with the most of its own layers that fit; the largest",
        f"{reference}, {arch.layers} layers, seq {seq:,} ({source})",
        f"{arch.params():,} params",
        "napkin.engines.finetune.max_layers (bisection on the per-GPU total)",
    )
    return [search, *shaped.steps]


#: What ``max_model`` passes as ``params``: it takes memory's inputs and solves for N.
_NO_PARAMS: Any = object()


@same_keywords(_sizing)
def memory(**options: Any) -> MemoryResult | FinetuneMemoryResult:
    """Per-GPU training memory: model states under the layout, plus activations when a model is given.
    ``finetune="lora"``/``"qlora"``: adapters of rank ``lora_rank`` (default 16) on ``lora_targets`` (default
    every linear layer of the blocks) over a frozen base (``base_format``: bf16, int8 or nf4; QLoRA's default
    nf4 with ``double_quant``); ``paged_optimizer``: bitsandbytes paged states, which spill to CPU memory."""
    from napkin.engines.finetune import FinetuneMemoryResult
    from napkin.engines.memory import MemoryResult

    result = _sizing(**options)
    assert isinstance(result, MemoryResult | FinetuneMemoryResult)  # params or a model given: not solved for N
    return result


@same_keywords(_sizing, drop=("params",))
def max_model(**options: Any) -> MaxModelResult | FinetuneMaxResult:
    """The largest model whose training state fits: pooled memory / bytes per parameter (memory's inputs,
    solved for N)."""
    from napkin.engines.finetune_max import FinetuneMaxResult
    from napkin.engines.memory import MaxModelResult

    result = _sizing(params=_NO_PARAMS, **options)
    assert isinstance(result, MaxModelResult | FinetuneMaxResult)
    return result
