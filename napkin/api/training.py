"""Training questions beside the time (``napkin.api.training_time``): MFU from a run, FLOPs, matmuls, compute-optimal
sizing."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from napkin import units
from napkin.api.inputs import SHAPE_FIELDS, choice, keywords, optional, parse, said, to_seconds
from napkin.api.model_inputs import build_model, described, named_preset, resolve_params, resolve_seq
from napkin.api.system_inputs import get_hardware
from napkin.domain.choices import Dtype, Fit, Recompute
from napkin.errors import UsageError

if TYPE_CHECKING:  # imported where used: a command pays only for the objects it builds (startup time)
    from napkin.domain.model import Model
    from napkin.engines.compute import MatmulResult, MfuResult, TrainFlopsResult
    from napkin.engines.scaling import OptimalResult
    from napkin.systems.profiles import HardwareProfile

from napkin.api.inputs import Number, T


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
    mfu: Number | None = None,
    hardware: str | HardwareProfile | None = None,
    hardware_file: str | Path | None = None,
    dtype: str | Dtype = Dtype.bf16,
    fit: str | Fit = Fit.epoch,
) -> OptimalResult:
    """Compute-optimal N* and D* for a budget (Chinchilla): the 20:1 rule and the fitted loss law. The budget is
    ``compute``, or ``gpus`` of ``hardware`` for ``days``/``hours`` at ``mfu`` (default 0.5)."""
    from napkin.engines.compute import compute_budget
    from napkin.engines.scaling import optimal as engine

    seconds = to_seconds(days=days, hours=hours)
    if compute is not None:
        if gpus is not None or seconds is not None:
            raise UsageError(
                "give compute, or gpus with days/hours, not both", field="compute", also=("gpus", "days", "hours")
            )
        unused = [
            k for k, v in (("mfu", mfu), ("hardware", hardware), ("hardware_file", hardware_file)) if v is not None
        ]
        if unused:
            raise UsageError(
                f"{unused[0]}: turns gpus and days/hours into a budget; with compute given it would be ignored",
                field=unused[0],
                also=("compute", "gpus", "days", "hours"),
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
        parse(units.parse_fraction, 0.5 if mfu is None else mfu, "mfu"),
        seconds,
    )
    return said(engine(budget, choice(Fit, fit, "fit"), [budget_step]), profile)
