"""``train_time``: days to train on a cluster at a given MFU, a range of them, or the MFU napkin's step model
predicts for the best layout it plans (``mfu="predicted"``); full training or adapters."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from napkin import units
from napkin.api.adapter_inputs import AdapterOptions, refuse_without_adapters
from napkin.api.inputs import SHAPE_FIELDS, choice, keywords, optional, parse, said, to_seconds
from napkin.api.model_inputs import build_model, described, named_preset, resolve_params, resolve_seq
from napkin.api.planning import plan, step
from napkin.api.system_inputs import get_cluster, get_hardware, get_stack
from napkin.domain.choices import Dtype, Finetune, Recompute, Sharding
from napkin.errors import UsageError

if TYPE_CHECKING:  # imported where used: a command pays only for the objects it builds (startup time)
    from napkin.domain.model import Model
    from napkin.engines.compute import TrainTimeResult
    from napkin.engines.step import StepResult
    from napkin.systems.cluster import Cluster
    from napkin.systems.profiles import HardwareProfile

from napkin.api.inputs import Number


@keywords(SHAPE_FIELDS)
def train_time(
    *,
    params: Number | None = None,
    tokens: Number | None = None,
    gpus: Number | None = None,
    days: Number | None = None,
    hours: Number | None = None,
    model: str | Model | None = None,
    model_config: str | Path | None = None,
    seq: Number | None = None,
    hardware: str | HardwareProfile | None = None,
    hardware_file: str | Path | None = None,
    dtype: str | Dtype = Dtype.bf16,
    mfu: Number | tuple[Number, Number] = 0.5,
    achieved: Number | None = None,
    peak: str = "datasheet",
    goodput: Number = 1.0,
    recompute: str | Recompute | None = None,
    causal: bool | None = None,
    price: Number | None = None,
    pue: Number = 1.0,
    carbon: Number | None = None,
    cluster: str | Cluster | None = None,
    global_batch: Number | None = None,
    global_batch_tokens: Number | None = None,
    flash_attention: bool | None = None,
    stack: str | Any | None = None,
    stack_file: str | Path | None = None,
    finetune: str | Finetune | None = None,
    lora_rank: Number | None = None,
    lora_targets: str | list[str] | None = None,
    tensor_parallel: Number | None = None,
    pipeline_parallel: Number | None = None,
    context_parallel: Number | None = None,
    expert_parallel: Number | None = None,
    interleave: Number | None = None,
    micro_batch: Number | None = None,
    sharding: str | Sharding | None = None,
    **shape: Any,
) -> TrainTimeResult:
    """How long a run takes: C = 6·N·D (+ attention), t = C / (G × dense peak × MFU). Give three of
    params/tokens/gpus/duration and the fourth is solved. ``mfu="predicted"`` takes the MFU of the #1 layout
    ``plan`` finds (the fastest inside the stack's validated region, where one fits) for the model on ``gpus`` of
    ``cluster`` with ``stack`` (default megatron-core; global batch default 4M tokens), and with it that layout's
    recomputation and the stack's causal mask (``causal`` overrides it; without a predicted MFU it defaults to every
    score counted); with any of ``tensor_parallel`` … ``sharding`` (and ``recompute``), the MFU ``step`` predicts for
    that layout instead, as a published run's layout is checked. ``finetune="lora"``/``"qlora"``: a frozen base
    with adapters (``lora_rank``, ``lora_targets``), C = (4N + 6T)·D: the base runs forward and passes input
    gradients back, only the adapters get weight gradients.
    ``finetune`` None is pretraining (the under-training warning applies); "qlora" recomputes fully unless
    ``recompute`` says otherwise (peft's prepare_model_for_kbit_training turns gradient checkpointing on, as memory
    and step assume).
    """
    from napkin.engines.compute import Money, Throughput, TrainQuery
    from napkin.engines.compute import train_time as engine

    method = None if finetune is None else choice(Finetune, finetune, "finetune")
    chosen = build_model(model, model_config, **shape)
    arch = chosen.model
    n = resolve_params(params, arch, active=False, required=False, named=named_preset(model, model_config))
    length, length_source = resolve_seq(seq, chosen, needed_for="the attention FLOPs")
    best, software = None, None
    layout = {
        name: value
        for name, value in (
            ("tensor_parallel", tensor_parallel),
            ("pipeline_parallel", pipeline_parallel),
            ("context_parallel", context_parallel),
            ("expert_parallel", expert_parallel),
            ("interleave", interleave),
            ("micro_batch", micro_batch),
            ("sharding", sharding),
        )
        if value is not None
    }
    if isinstance(mfu, str) and mfu.strip().lower() == "predicted":
        if achieved is not None:
            raise UsageError("achieved: give it or mfu predicted, not both", field="achieved", also=("mfu",))
        if layout and recompute is not None:  # the layout is the caller's, its recomputation too
            layout["recompute"] = recompute
        elif recompute is not None:  # "none" too: the plan's #1 may recompute (qlora's does), which it would hide
            choice(Recompute, recompute, "recompute")  # a value napkin does not know is refused as such first
            raise UsageError(
                "recompute: with mfu predicted the planner chooses the recomputation; give a layout (tensor_parallel"
                " … sharding) to time it with this one",
                field="recompute",
                also=("mfu", "tensor_parallel", "sharding"),
            )
        if peak != "datasheet":  # the plan's MFU is of the datasheet peak; its step time used the measured rate
            raise UsageError(
                "peak: with mfu predicted the time is the plan's step time and its MFU is of the datasheet's dense "
                "rate (the plan's matmuls already run at your measured rate when one is saved); leave it at "
                "datasheet",
                field="peak",
                also=("mfu",),
            )
        best = _predicted(
            model,
            model_config,
            seq,
            gpus,
            cluster,
            hardware,
            hardware_file,
            dtype,
            global_batch,
            global_batch_tokens,
            flash_attention,
            causal,
            shape,
            stack,
            stack_file,
            {"finetune": str(method or Finetune.full), "lora_rank": lora_rank, "lora_targets": lora_targets},
            layout,
        )
        mfu, recompute = best.mfu, best.layout.recompute
        software = get_stack(stack, stack_file)
        if causal is None:
            causal = bool(software.trains().attention.causal)
    else:
        only_predicted = {
            "global_batch": global_batch,
            "global_batch_tokens": global_batch_tokens,
            "flash_attention": flash_attention,
            "stack": stack,
            "stack_file": stack_file,
            **layout,
        }
        given = [name for name, value in only_predicted.items() if value is not None]
        if given:  # name what was given, each as the caller wrote it
            raise UsageError(
                f"{', '.join(given)}: used only with mfu predicted", field=given[0], also=(*given[1:], "mfu")
            )
    found, profile = (
        get_cluster(cluster, hardware, hardware_file)
        if cluster is not None
        else (None, get_hardware(hardware, hardware_file))
    )
    kind = choice(Dtype, dtype, "dtype")
    if peak not in ("datasheet", "measured"):
        raise UsageError(f"peak: {peak!r} is not one of datasheet, measured", field="peak")
    peak_value, peak_source = profile.peak_with_source(kind, measured=peak == "measured")
    low, high = _mfu_range(mfu)
    query = TrainQuery(
        params=n,
        tokens=optional(units.parse_count, tokens, "tokens"),
        gpus=optional(units.parse_int, gpus, "gpus"),
        seconds=to_seconds(days=days, hours=hours),
        model=arch,
        seq=length,
        active_params=float(arch.active_params()) if arch is not None and arch.is_moe else None,
        adapter_params=_adapter_params(method or Finetune.full, lora_rank, lora_targets, arch),
        causal=bool(causal),
        recompute=_recompute(recompute, method),
        finetune=None if method is None else str(method),
    )
    throughput = Throughput(
        peak_flops=peak_value,
        peak_source=peak_source,
        mfu_low=low,
        mfu_high=high,
        achieved=optional(units.parse_rate, achieved, "achieved"),
        goodput=parse(units.parse_fraction, goodput, "goodput"),
        predicted=best is not None,
    )
    pue_value = parse(units.parse_number, pue, "pue")
    if pue_value < 1:
        raise UsageError(f"pue: {pue!r} must be ≥ 1 (1.0 = no overhead; typical data centres 1.1–1.5)", field="pue")
    money = Money(
        price_per_hour=optional(units.parse_number, price, "price"),
        pue=pue_value,
        carbon_g_per_kwh=optional(units.parse_number, carbon, "carbon"),
    )
    result = said(
        described(engine(query, profile, kind, throughput, money), chosen, length, length_source),
        found,
        profile,
        software,
    )
    if best is not None:
        result.layout, result.micro_batch, result.global_batch = best.layout, best.micro_batch, best.global_batch
        result.cluster, result.stack = best.cluster, best.stack
        if best.outside_validation:  # as step and plan say of the same layout
            result.notes.append(
                f"outside the {best.stack} stack's validated region: {'; '.join(best.outside_validation)}"
            )
    return result


def _recompute(recompute: str | Recompute | None, method: Finetune | None) -> Recompute:
    """The recomputation: as given, else full for QLoRA (memory's and step's default), else none."""
    if recompute is not None:
        return choice(Recompute, recompute, "recompute")
    return Recompute.full if method is Finetune.qlora else Recompute.none


def _adapter_params(
    finetune: str | Finetune, lora_rank: Number | None, lora_targets: str | list[str] | None, arch: Model | None
) -> float:
    """T, the trainable adapter parameters of a LoRA/QLoRA run (0 for full fine-tuning)."""
    method = choice(Finetune, finetune, "finetune")
    if method is Finetune.full:
        refuse_without_adapters({"lora_rank": lora_rank, "lora_targets": lora_targets})
        return 0.0
    if arch is None:
        raise UsageError(
            f"model: {method} needs a model (a preset, a config.json, a folder or a Hub id): adapters follow its shape",
            field="model",
        )
    from napkin.engines.lora import lora_params

    adapters = AdapterOptions(method, lora_rank, lora_targets).adapters("adamw", None, None)
    return float(lora_params(arch, adapters.rank, adapters.targets))


def _predicted(
    model: str | Model | None,
    model_config: str | Path | None,
    seq: Number | None,
    gpus: Number | None,
    cluster: str | Cluster | None,
    hardware: str | HardwareProfile | None,
    hardware_file: str | Path | None,
    dtype: str | Dtype,
    global_batch: Number | None,
    global_batch_tokens: Number | None,
    flash_attention: bool | None,
    causal: bool | None,
    shape: dict[str, Any],
    stack: str | Any | None,
    stack_file: str | Path | None,
    adapters: dict[str, Any],
    layout: dict[str, Any],
) -> StepResult:
    """The result of ``plan``'s #1 (the fastest fitting layout, inside the stack's validated region where one
    fits), for ``train_time(mfu="predicted")``; ``adapters``: the fine-tuning method and the LoRA options, so that
    a LoRA run's MFU is that of the layouts ``plan --finetune`` searches, not of full training's. With ``layout``
    (the caller's TP, PP, …), ``step``'s result for that layout, which must fit."""
    if gpus is None or (model is None and model_config is None):
        raise UsageError(
            "mfu: predicted needs model (or model_config) and gpus: the planner picks a layout for them",
            field="mfu",
            also=("model", "model_config", "gpus"),
        )
    if global_batch is None and global_batch_tokens is None:
        global_batch_tokens = "4M"
    question = {
        "model": model,
        "model_config": model_config,
        "seq": seq,
        "gpus": gpus,
        "cluster": cluster,
        "hardware": hardware,
        "hardware_file": hardware_file,
        "dtype": dtype,
        "global_batch": global_batch,
        "global_batch_tokens": global_batch_tokens,
        "flash_attention": flash_attention,
        "causal": causal,
        "stack": stack,
        "stack_file": stack_file,
        **adapters,
        **shape,
    }
    if layout:
        timed = step(**question, **layout)
        if not timed.fits:
            raise UsageError(
                f"mfu: predicted at the layout given ({timed.layout.describe(compact=True)} b{timed.micro_batch}; "
                "what was not given is step's default), which does not fit: "
                f"{units.format_bytes_si(timed.per_gpu_bytes)} per GPU of {units.format_bytes_si(timed.memory_bytes)} "
                "(see 'napkin step' with the same options)",
                field="mfu",
                also=tuple(layout),
            )
        return timed
    found = plan(**question, top=1)
    if not found.layouts:
        raise UsageError(
            f"mfu: predicted, but no layout of this model fits on {gpus} GPUs of {found.cluster}",
            field="mfu",
            also=("gpus",),
        )
    return found.layouts[0]


def _mfu_range(mfu: Number | tuple[Number, Number]) -> tuple[float, float]:
    if isinstance(mfu, tuple):
        low, high = (parse(units.parse_fraction, v, "mfu") for v in mfu)
        if low > high:
            raise UsageError(f"mfu: range {mfu!r} is written backwards; give (low, high)", field="mfu")
        return low, high
    return parse(units.parse_fraction_range, str(mfu), "mfu")
