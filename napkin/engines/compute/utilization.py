"""Model FLOPs utilisation from a measured throughput (``mfu``; PaLM §4.1, Narayanan eq. 4 for HFU)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from napkin import sources
from napkin.domain.choices import Recompute
from napkin.domain.model import Model
from napkin.engines.compute.flops import PLAUSIBLE_MFU, SECONDS_PER_DAY, flops_per_token, implausible_mfu
from napkin.results.explain import step
from napkin.results.result import ModelResult
from napkin.systems.profiles import HardwareProfile
from napkin.units import (
    format_count,
    format_percent,
    format_rate,
    format_sci,
)


class MfuResult(ModelResult):
    title: ClassVar[str] = "Model FLOPs utilisation"
    headline: ClassVar[tuple[str, ...]] = ("mfu", "hfu", "hardware")

    hardware: str
    dtype: str
    params: float
    gpus: int | None = Field(description="None when the inputs were per GPU (GPU-hours, tokens/s per GPU)")
    tokens_per_second: float | None
    tokens_per_second_per_gpu: float
    flops_per_token: float
    hardware_flops_per_token: float
    peak_flops: float
    mfu: float
    hfu: float
    seconds: float | None = None
    days: float | None = None
    recompute: Recompute = Recompute.none

    def rows(self) -> list[tuple[str, str]]:
        if self.tokens_per_second is None:
            throughput = f"{self.tokens_per_second_per_gpu:,.1f} tokens/s per GPU"
        else:
            throughput = f"{self.tokens_per_second:,.0f} tokens/s ({self.tokens_per_second_per_gpu:,.1f} per GPU)"
        rows = [
            ("hardware", f"{self.hardware}: {self.dtype} dense peak {format_rate(self.peak_flops)}"),
            ("parameters", f"{format_count(self.params)}"),
            ("throughput", throughput),
            ("FLOPs per token", f"{format_sci(self.flops_per_token)} (model)"),
            ("MFU", format_percent(self.mfu)),
        ]
        if self.hfu != self.mfu:
            rows.append(("HFU", format_percent(self.hfu) + f" ({self.recompute} recomputation)"))
        if self.days is not None:
            rows.append(("duration", f"{self.days:,.1f} days"))
        return rows

    def caption(self) -> str:
        if self.gpus is None:
            return "MFU = tokens/s per GPU × FLOPs/token / peak"
        return "MFU = tokens/s × FLOPs/token / (G × peak)"


def mfu(
    params: float,
    hardware: HardwareProfile,
    dtype: str,
    per_gpu_tokens_per_second: float,
    *,
    gpus: int | None = None,
    tokens: float | None = None,
    model: Model | None = None,
    seq: int | None = None,
    causal: bool = False,
    recompute: Recompute = Recompute.none,
) -> MfuResult:
    """MFU = tokens/s × model FLOPs per token / (G × peak)   (PaLM §4.1, App. B), from the throughput of one GPU
    (tokens / GPU-seconds). ``gpus`` (optional) adds the run's total throughput and, with ``tokens``, its length."""
    per_token = flops_per_token(params, model, seq, causal=causal, recompute=recompute)
    peak = hardware.peak(dtype)
    value = per_gpu_tokens_per_second * per_token.model / peak
    steps = [
        step(
            "model FLOPs per token",
            "6N + c·6·L·s·d_attn" if per_token.attention else "6N",
            f"6 × {format_sci(params)}" + (f" + {format_sci(per_token.attention)}" if per_token.attention else ""),
            f"{format_sci(per_token.model)} FLOPs",
            f"{sources.PALM_6N}; {sources.PALM_ATTENTION}" if per_token.attention else sources.PALM_6N,
        ),
        step(
            "MFU",
            "tokens/s × FLOPs per token / (G × peak)",
            f"{per_gpu_tokens_per_second * gpus:,.0f} × {format_sci(per_token.model)} / ({gpus:,} × "
            f"{format_rate(peak)})",
            format_percent(value),
            sources.PALM_MFU,
        )
        if gpus is not None
        else step(
            "MFU",
            "tokens/s per GPU × FLOPs per token / peak (tokens / GPU-seconds)",
            f"{per_gpu_tokens_per_second:,.1f} × {format_sci(per_token.model)} / {format_rate(peak)}",
            format_percent(value),
            sources.PALM_MFU,
        ),
    ]
    warnings = []
    if value > 1:
        warnings.append(
            f"MFU {format_percent(value)} is above 100 %, which is impossible: check the peak ({dtype} on "
            f"{hardware.name}), whether a sparse figure is in use, and the units of the inputs"
        )
    elif value > PLAUSIBLE_MFU:
        warnings.append(implausible_mfu(value))
    measured = hardware.measured_for(dtype)
    if measured is not None and value * peak > measured.flops_per_second:
        ceiling = measured.flops_per_second / peak
        warnings.append(f"MFU {value:.3f} is above the measured matmul ceiling {ceiling:.3f} of {hardware.name}")
    if value < 0.05:
        warnings.append(f"MFU {value:.3f} is below 0.05: check the inputs (GPUs, duration, tokens) and their units")
    total = per_gpu_tokens_per_second * gpus if gpus is not None else None
    duration = tokens / total if tokens is not None and total is not None else None
    return MfuResult(
        hardware=hardware.name,
        dtype=dtype,
        params=params,
        gpus=gpus,
        tokens_per_second=total,
        tokens_per_second_per_gpu=per_gpu_tokens_per_second,
        flops_per_token=per_token.model,
        hardware_flops_per_token=per_token.hardware,
        peak_flops=peak,
        mfu=value,
        hfu=per_gpu_tokens_per_second * per_token.hardware / peak,
        seconds=duration,
        days=duration / SECONDS_PER_DAY if duration is not None else None,
        warnings=warnings,
        steps=steps,
        recompute=recompute,
    )


# ---------------------------------------------------------------------------------------- matmul
