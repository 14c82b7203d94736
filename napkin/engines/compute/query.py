"""What ``train_time`` is asked: the query (N, D, G, t), the rate it runs at and the money, and its result."""

from __future__ import annotations

import math
from typing import ClassVar

from pydantic import ConfigDict, Field, computed_field

from napkin.domain.base import Record
from napkin.domain.choices import Recompute
from napkin.domain.layout import Layout
from napkin.domain.model import Model
from napkin.results.result import ModelResult
from napkin.units import (
    format_count,
    format_duration,
    format_energy,
    format_flops,
    format_rate,
    format_sci,
)


class Throughput(Record):
    """How fast one device works: a peak times an MFU range, or an achieved rate."""

    model_config = ConfigDict(frozen=True)

    peak_flops: float = Field(gt=0)
    peak_source: str = "datasheet"
    mfu_low: float = Field(default=0.5, gt=0, le=1)
    mfu_high: float = Field(default=0.5, gt=0, le=1)
    achieved: float | None = Field(default=None, gt=0, description="sustained hardware FLOP/s per device")
    goodput: float = Field(default=1.0, gt=0, le=1, description="fraction of wall-clock time doing useful steps")
    predicted: bool = Field(
        default=False,
        description="the MFU is a planned layout's (train-time --mfu predicted): its step time counts every term "
        "the step model has, a QLoRA base's dequantization among them",
    )


class Money(Record):
    price_per_hour: float | None = Field(default=None, gt=0)
    pue: float = Field(default=1.0, ge=1.0)
    carbon_g_per_kwh: float | None = Field(default=None, ge=0)


class TrainTimeResult(ModelResult):
    """Everything train-time reports. Base units: FLOP, FLOP/s, seconds."""

    title: ClassVar[str] = "Training time"
    headline: ClassVar[tuple[str, ...]] = ("days", "gpus", "mfu", "hardware")

    hardware: str
    dtype: str
    params: float
    active_params: float
    adapter_params: float = Field(default=0.0, description="LoRA: trainable adapters on the frozen base")
    finetune: str | None = Field(default=None, description="full, lora or qlora; None: pretraining")
    tokens: float
    gpus: int
    solved_for: str | None
    flops: float = Field(description="model FLOPs for the whole run (6·N·D + attention)")
    flops_forward: float
    flops_backward: float
    flops_attention: float = Field(default=0.0, description="attention-score FLOPs, included in flops")
    hardware_flops: float
    flops_per_token: float
    peak_flops: float
    peak_source: str
    mfu: float
    mfu_range: tuple[float, float]
    hfu: float
    goodput: float
    per_gpu_flops_per_second: float = Field(description="effective model FLOP/s per device")
    cluster_flops_per_second: float
    seconds: float = Field(description="at the low end of the MFU range (conservative)")
    seconds_range: tuple[float, float]
    hours: float
    days: float
    days_range: tuple[float, float]
    gpu_hours: float
    tokens_per_param: float
    cost_usd: float | None = None
    price_per_hour: float | None = None
    energy_kwh: float | None = None
    power_watts: float | None = None
    pue: float | None = None
    co2_tonnes: float | None = None
    recompute: Recompute = Recompute.none
    causal: bool = False
    layout: Layout | None = Field(default=None, description="mfu predicted: the layout whose MFU was used")
    micro_batch: int | None = Field(default=None, description="mfu predicted: that layout's micro-batch")
    global_batch: int | None = Field(default=None, description="mfu predicted: sequences per step")
    cluster: str | None = Field(default=None, description="mfu predicted: the cluster the layout runs on")
    stack: str | None = Field(default=None, description="mfu predicted: the software stack it assumes")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def layout_text(self) -> str | None:
        """The layout as step and plan write it: ``TP 2 · PP 1 · DP 256 · SP · zero3 · b 2``."""
        return None if self.layout is None else f"{self.layout.describe()} · b {self.micro_batch}"

    def rows(self) -> list[tuple[str, str]]:
        mark = {k: " (solved)" if self.solved_for == k else "" for k in ("params", "tokens", "gpus")}
        active = f" ({format_count(self.active_params)} active)" if self.active_params != self.params else ""
        rows = [
            (
                "hardware",
                f"{self.hardware}: {self.dtype} dense peak {format_rate(self.peak_flops)} ({self.peak_source})",
            ),
            ("parameters", f"{format_count(self.params)} params{mark['params']}{active}{self._adapters()}"),
            (
                "tokens",
                f"{format_count(self.tokens)} tokens{mark['tokens']}"
                # tokens per parameter is a pretraining budget's measure (Chinchilla's ~20), not a fine-tune's
                + ("" if self.finetune else f" ({_per_param(self.tokens_per_param)} per param)"),
            ),
            ("GPUs", f"{self.gpus:,}{mark['gpus']}"),
            (
                "training FLOPs",
                f"{format_flops(self.flops)} (forward {format_sci(self.flops_forward)}"
                f" + backward {format_sci(self.flops_backward)})",
            ),
        ]
        if self.flops_attention:
            counted = "c = 1: the unmasked half" if self.causal else "c = 2: every s×s score; --causal halves it"
            rows += [
                (
                    "  6·N·D" if not self.adapter_params else "  (4N + 6T)·D",
                    format_sci(self.flops - self.flops_attention),
                ),
                ("  attention", f"{format_sci(self.flops_attention)} ({counted})"),
            ]
        if self.hardware_flops != self.flops:
            rows.append(
                ("hardware FLOPs", f"{format_flops(self.hardware_flops)} (with {self.recompute} recomputation)")
            )
        low, high = self.mfu_range
        mfu_text = f"{low:g}–{high:g}" if low != high else f"{self.mfu:.3g}"
        if not math.isclose(self.hfu, self.mfu):
            mfu_text += f" (HFU {self.hfu:.3g})"
        if self.layout is not None:
            mfu_text += f" predicted ({self.stack})"
        rows.append(("MFU", mfu_text + (f", goodput {self.goodput:g}" if self.goodput != 1 else "")))
        if self.layout_text is not None:
            rows += [
                ("  layout", self.layout_text),
                ("  batch", f"{self.global_batch:,} × {self.seq:,} tokens on {self.cluster}"),
            ]
        rows += [
            ("per-GPU FLOP/s", format_rate(self.per_gpu_flops_per_second) + " effective"),
            ("cluster FLOP/s", format_rate(self.cluster_flops_per_second) + " effective"),
            ("time", f"{format_sci(self.seconds)} s = {_tenths(self.hours)} hours = {_tenths(self.days)} days"),
        ]
        if self.seconds_range[0] != self.seconds_range[1]:
            rows.append(
                (
                    "time range",
                    f"{format_duration(self.seconds_range[0])} (MFU {high:g}) – "
                    f"{format_duration(self.seconds_range[1])} (MFU {low:g})",
                )
            )
        rows.append(("GPU-hours", f"{self.gpu_hours:,.0f}"))
        if self.cost_usd is not None:
            rows.append(("cost", f"${self.cost_usd:,.0f} at ${self.price_per_hour:g} per GPU-hour"))
        if self.energy_kwh is not None:
            rows.append(
                ("energy", f"{format_energy(self.energy_kwh)} ({self.power_watts:g} W per GPU × PUE {self.pue:g})")
            )
        if self.co2_tonnes is not None:
            rows.append(("emissions", f"{self.co2_tonnes:,.1f} t CO₂e"))
        return rows

    def _adapters(self) -> str:
        return f", frozen; {format_count(self.adapter_params)} adapter params trained" if self.adapter_params else ""

    def caption(self) -> str:
        formula = "C = (4N + 6T)·D" if self.adapter_params else "C = 6·N·D"
        formula += " + attention" if self.flops_attention else ""
        return f"{formula}; t = C / (G × dense peak × MFU)"


def _per_param(value: float) -> str:
    """Tokens per parameter: 214.3, 1,867.9; two significant figures below one (a fine-tune's 0.012)."""
    return f"{value:,.1f}" if value >= 1 else f"{value:.2g}"


def _tenths(value: float) -> str:
    """Hours or days as the time row shows them: 2.5, 3,454, 143.9; two figures below one (0.1)."""
    if value >= 1000:
        return f"{value:,.0f}"
    return f"{value:,.1f}" if value >= 1 else f"{value:.2g}"


class TrainQuery(Record):
    """A train-time question: any three of params, tokens, gpus and seconds (the fourth is solved)."""

    params: float | None = Field(default=None, gt=0)
    tokens: float | None = Field(default=None, gt=0)
    gpus: int | None = Field(default=None, gt=0)
    seconds: float | None = Field(default=None, gt=0)
    model: Model | None = None
    seq: int | None = Field(default=None, gt=0, description="sequence length (attention FLOPs need it)")
    active_params: float | None = Field(default=None, gt=0, description="MoE: parameters used per token")
    causal: bool = False
    recompute: Recompute = Recompute.none
    adapter_params: float = Field(default=0.0, ge=0, description="LoRA: trainable adapters on a frozen base")
    finetune: str | None = Field(default=None, description="full, lora or qlora; None: pretraining")
