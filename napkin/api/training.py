"""Training-time questions: time, MFU, FLOPs, matmuls, compute-optimal sizing."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from napkin import units
from napkin.api.adapter_inputs import AdapterOptions
from napkin.api.inputs import SHAPE_FIELDS, choice, keywords, optional, parse, said, to_seconds
from napkin.api.model_inputs import build_model, described, named_preset, resolve_params, resolve_seq
from napkin.api.planning import plan
from napkin.api.system_inputs import get_cluster, get_hardware, get_stack
from napkin.domain.choices import Dtype, Finetune, Fit, Recompute
from napkin.errors import UsageError

if TYPE_CHECKING:  # imported where used: a command pays only for the objects it builds (startup time)
    from napkin.domain.model import Model
    from napkin.engines.compute import MatmulResult, MfuResult, TrainFlopsResult, TrainTimeResult
    from napkin.engines.scaling import OptimalResult
    from napkin.engines.step import StepResult
    from napkin.systems.cluster import Cluster
    from napkin.systems.profiles import HardwareProfile

from napkin.api.inputs import Number, T


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
    **shape: Any,
) -> TrainTimeResult:
    """How long a run takes: C = 6·N·D (+ attention), t = C / (G × dense peak × MFU). Give three of
    params/tokens/gpus/duration and the fourth is solved. ``mfu="predicted"`` takes the MFU of the fastest
    layout ``plan`` finds for the model on ``gpus`` of ``cluster`` with ``stack`` (default megatron-core; global
    batch default 4M tokens), and with it that layout's recomputation and the stack's causal mask (``causal``
    overrides it; without a predicted MFU it defaults to every score counted). ``finetune="lora"``/``"qlora"``: a
    frozen base with adapters (``lora_rank``, ``lora_targets``), C = (4N + 6T)·D: the base runs forward and
    passes input gradients back, only the adapters get weight gradients. ``finetune`` None is pretraining (the
    under-training warning applies); "qlora" recomputes fully unless ``recompute`` says otherwise (peft's
    prepare_model_for_kbit_training turns gradient checkpointing on, as memory and step assume)."""
    from napkin.engines.compute import Money, Throughput, TrainQuery
    from napkin.engines.compute import train_time as engine

    method = None if finetune is None else choice(Finetune, finetune, "finetune")
    chosen = build_model(model, model_config, **shape)
    arch = chosen.model
    n = resolve_params(params, arch, active=False, required=False, named=named_preset(model, model_config))
    length, length_source = resolve_seq(seq, chosen, needed_for="the attention FLOPs")
    best, software = None, None
    if isinstance(mfu, str) and mfu.strip().lower() == "predicted":
        if achieved is not None:
            raise UsageError("achieved: give it or mfu predicted, not both", field="achieved", also=("mfu",))
        if recompute is not None and choice(Recompute, recompute, "recompute") is not Recompute.none:
            raise UsageError(
                "recompute: with mfu predicted the planner chooses the recomputation", field="recompute", also=("mfu",)
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
        if lora_rank is not None or lora_targets is not None:
            raise UsageError("lora_rank, lora_targets: used only with finetune lora or qlora", field="finetune")
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
) -> StepResult:
    """The fastest fitting layout's result (``plan``), for ``train_time(mfu="predicted")``."""
    if gpus is None or (model is None and model_config is None):
        raise UsageError(
            "mfu: predicted needs model (or model_config) and gpus: the planner picks a layout for them",
            field="mfu",
            also=("model", "gpus"),
        )
    if global_batch is None and global_batch_tokens is None:
        global_batch_tokens = "4M"
    found = plan(
        model=model,
        model_config=model_config,
        seq=seq,
        gpus=gpus,
        cluster=cluster,
        hardware=hardware,
        hardware_file=hardware_file,
        dtype=dtype,
        global_batch=global_batch,
        global_batch_tokens=global_batch_tokens,
        flash_attention=flash_attention,
        causal=causal,
        top=1,
        stack=stack,
        stack_file=stack_file,
        **shape,
    )
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


@keywords(SHAPE_FIELDS)
def mfu(
    *,
    params: Number | None = None,
    tokens: Number | None = None,
    gpus: Number | None = None,
    days: Number | None = None,
    hours: Number | None = None,
    gpu_hours: Number | None = None,
    tokens_per_second: Number | None = None,
    tokens_per_second_per_gpu: Number | None = None,
    model: str | Model | None = None,
    model_config: str | Path | None = None,
    seq: Number | None = None,
    hardware: str | HardwareProfile | None = None,
    hardware_file: str | Path | None = None,
    dtype: str | Dtype = Dtype.bf16,
    recompute: str | Recompute = Recompute.none,
    causal: bool = False,
    **shape: Any,
) -> MfuResult:
    """The MFU a run achieved: tokens/s × model FLOPs per token / (G × dense peak) (PaLM §4.1). ``gpus`` is
    needed with a wall-clock duration or a total throughput, not with ``gpu_hours`` or a per-GPU throughput."""
    from napkin.engines.compute import mfu as engine

    chosen = build_model(model, model_config, **shape)
    arch = chosen.model
    n = resolve_params(params, arch, active=True, named=named_preset(model, model_config))
    assert n is not None
    length, length_source = resolve_seq(seq, chosen, needed_for="the attention FLOPs")
    rates = {
        "days": days,
        "hours": hours,
        "gpu_hours": gpu_hours,
        "tokens_per_second": tokens_per_second,
        "tokens_per_second_per_gpu": tokens_per_second_per_gpu,
    }
    if sum(v is not None for v in rates.values()) != 1:
        raise UsageError("give exactly one of " + ", ".join(rates), field="tokens_per_second", also=tuple(rates))
    g = optional(units.parse_int, gpus, "gpus")
    if g is None and gpu_hours is None and tokens_per_second_per_gpu is None:
        raise UsageError(
            "gpus is required, except with gpu_hours or tokens_per_second_per_gpu",
            field="gpus",
            also=("gpu_hours", "tokens_per_second_per_gpu"),
        )
    count = optional(units.parse_count, tokens, "tokens")
    if count is None and (days is not None or hours is not None or gpu_hours is not None):
        raise UsageError("tokens is needed to turn a duration into a throughput", field="tokens")
    if tokens_per_second_per_gpu is not None:
        per_gpu = parse(units.parse_count, tokens_per_second_per_gpu, "tokens_per_second_per_gpu")
    elif tokens_per_second is not None:
        per_gpu = parse(units.parse_count, tokens_per_second, "tokens_per_second") / _need(g)
    elif gpu_hours is not None:
        per_gpu = _need(count) / (parse(units.parse_count, gpu_hours, "gpu_hours") * 3600)
    else:
        per_gpu = _need(count) / (_need(to_seconds(days=days, hours=hours)) * _need(g))
    profile = get_hardware(hardware, hardware_file)
    result = engine(
        n,
        profile,
        choice(Dtype, dtype, "dtype"),
        per_gpu,
        gpus=g,
        tokens=count,
        model=arch,
        seq=length,
        causal=causal,
        recompute=choice(Recompute, recompute, "recompute"),
    )
    return said(described(result, chosen, length, length_source), profile)


def _need(value: T | None) -> T:
    assert value is not None  # checked by the caller
    return value


@keywords(SHAPE_FIELDS)
def flops(
    *,
    params: Number | None = None,
    tokens: Number | None = None,
    model: str | Model | None = None,
    model_config: str | Path | None = None,
    seq: Number | None = None,
    recompute: str | Recompute = Recompute.none,
    causal: bool = False,
    **shape: Any,
) -> TrainFlopsResult:
    """Training FLOPs: 6·N·D (2N forward + 4N backward), plus attention with a model and a sequence length."""
    from napkin.engines.compute import train_flops

    chosen = build_model(model, model_config, **shape)
    arch = chosen.model
    n = resolve_params(params, arch, active=True, named=named_preset(model, model_config))
    assert n is not None
    if tokens is None:
        raise UsageError("tokens is required", field="tokens")
    length, length_source = resolve_seq(seq, chosen, needed_for="the attention FLOPs")
    result = train_flops(
        n,
        parse(units.parse_count, tokens, "tokens"),
        arch,
        length,
        causal=causal,
        recompute=choice(Recompute, recompute, "recompute"),
    )
    return described(result, chosen, length, length_source)


def matmul(
    m: Number,
    k: Number | None = None,
    n: Number | None = None,
    *,
    dtype: str | Dtype = Dtype.bf16,
    hardware: str | HardwareProfile | None = None,
    hardware_file: str | Path | None = None,
) -> MatmulResult:
    """FLOPs, bytes, arithmetic intensity and roofline time of an (m×k)·(k×n) matmul: ``matmul(8192, 8192,
    28672)`` or ``matmul("8192x8192x28672")`` (the shape as ``tensor`` writes one)."""
    from napkin.engines.compute import matmul as engine

    if k is None and n is None and isinstance(m, str) and not m.strip().isdigit():
        from napkin.engines.number_formats import parse_shape

        dims = parse_shape(m)
        if len(dims) != 3:
            raise UsageError(f"shape: {m!r} is not MxKxN; write three sizes, e.g. 8192x8192x28672", field="shape")
        m, k, n = dims
    if k is None or n is None:
        raise UsageError("give the shape MxKxN, or m, k and n", field="shape", also=("k", "n"))
    sizes = [parse(units.parse_length, v, name) for v, name in ((m, "m"), (k, "k"), (n, "n"))]
    profile = get_hardware(hardware, hardware_file)
    return said(engine(sizes[0], sizes[1], sizes[2], profile, choice(Dtype, dtype, "dtype")), profile)


def optimal(
    *,
    compute: Number | None = None,
    gpus: Number | None = None,
    days: Number | None = None,
    hours: Number | None = None,
    mfu: Number = 0.5,
    hardware: str | HardwareProfile | None = None,
    hardware_file: str | Path | None = None,
    dtype: str | Dtype = Dtype.bf16,
    fit: str | Fit = Fit.epoch,
) -> OptimalResult:
    """Compute-optimal N* and D* for a budget (Chinchilla): the 20:1 rule and the fitted loss law."""
    from napkin.engines.compute import compute_budget
    from napkin.engines.scaling import optimal as engine

    seconds = to_seconds(days=days, hours=hours)
    if compute is not None:
        if gpus is not None or seconds is not None:
            raise UsageError(
                "give compute, or gpus with days/hours, not both", field="compute", also=("gpus", "days", "hours")
            )
        return engine(parse(units.parse_flops, compute, "compute"), choice(Fit, fit, "fit"))
    if gpus is None or seconds is None:
        raise UsageError(
            "give compute, or gpus with days/hours (and hardware, mfu)",
            field="compute",
            also=("gpus", "days", "hours", "hardware", "mfu"),
        )
    profile = get_hardware(hardware, hardware_file)
    budget, budget_step = compute_budget(
        parse(units.parse_int, gpus, "gpus"),
        profile.peak(choice(Dtype, dtype, "dtype")),
        parse(units.parse_fraction, mfu, "mfu"),
        seconds,
    )
    return said(engine(budget, choice(Fit, fit, "fit"), [budget_step]), profile)
