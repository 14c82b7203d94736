"""Compute accounting: training FLOPs, wall-clock time, MFU, cost and energy, matmul rooflines.

Pure functions over pydantic models: no printing, no files. Formulas (each cites napkin.sources):

    C     = 6·N·D                    2N forward + 4N backward per token        (Kaplan §2.1; PaLM App. B)
    C_att = c·6·L·s·d_attn·D         c = 2 (PaLM, full s×s) or 1 (causal)      (PaLM App. B)
    t     = C / (G · peak · MFU)     MFU counts model FLOPs only               (PaLM §4.1)
    t     = C_hw / (G · X)           X = achieved hardware FLOP/s              (Narayanan eq. 4)
"""

from __future__ import annotations

import math
from typing import ClassVar, Final

from pydantic import ConfigDict, Field

from napkin import sources
from napkin.domain.base import Record
from napkin.domain.choices import STORAGE_BYTES, Recompute
from napkin.domain.model import Model
from napkin.errors import UsageError
from napkin.results.explain import Step, step
from napkin.results.result import ModelResult, Result
from napkin.systems.profiles import HardwareProfile
from napkin.units import (
    format_bandwidth,
    format_bytes_si,
    format_count,
    format_duration,
    format_energy,
    format_flops,
    format_percent,
    format_rate,
    format_sci,
)

SECONDS_PER_DAY = 86400.0
CHINCHILLA_TOKENS_PER_PARAM = 20.0  # Hoffmann et al. 2022 Table 3 (≈20 tokens per parameter)
UNDERTRAINED_TOKENS_PER_PARAM = 10.0  # napkin's "far below 20" threshold for the under-training note


class FlopsPerToken(Record):
    """Training FLOPs per token, split the way the papers split them."""

    model_config = ConfigDict(frozen=True)

    params: float = Field(description="N: parameters doing matmul work per token (active, for MoE)")
    forward: float
    backward: float
    attention: float = Field(description="attention-score FLOPs (forward + backward), 0 without a shape")
    model: float = Field(description="model FLOPs per token: 6N + attention (what MFU counts)")
    hardware: float = Field(description="model FLOPs + recomputation (what HFU counts)")
    recompute: Recompute
    causal: bool


#: Above this, an MFU for dense training is implausible: the best published large runs reach 0.38-0.55
#: (sources.MFU_PUBLISHED); more usually means a wrong peak (sparse figure), units or token count.
PLAUSIBLE_MFU: Final = 0.75


def implausible_mfu(value: float) -> str:
    return (
        f"MFU {format_percent(value)} is implausibly high for dense training (published large runs reach 38-55 %: "
        "PaLM 46.2 %, Llama 3 38-43 %, MegaScale 55.2 %); check the peak, the units and the token count"
    )


def flops_per_token(
    params: float,
    model: Model | None = None,
    seq: int | None = None,
    *,
    causal: bool = False,
    recompute: Recompute = Recompute.none,
    frozen: float = 0.0,
) -> FlopsPerToken:
    """6N (+ attention, given a model and a sequence length) model FLOPs per token, and the hardware
    FLOPs a recomputation scheme adds. ``frozen`` of the ``params`` get no weight gradient (a LoRA base): their
    backward is the input gradient alone, 2 FLOPs per parameter instead of 4."""
    attention = model.attention_flops_per_token(seq, causal) if model is not None and seq else 0.0
    forward = 2 * params + attention / 3
    backward = 4 * params - 2 * frozen + 2 * attention / 3
    if recompute is Recompute.full:
        # One extra forward of the blocks (Narayanan eq. 3: 4 forwards instead of 3); without a shape
        # the whole model is re-run, which gives the familiar 8·N·D.
        blocks = model.block_params() if model is not None else params
        extra = 2 * blocks + attention / 3
    elif recompute is Recompute.selective:
        extra = attention / 3  # only the attention scores are recomputed (Korthikanti §4.3)
    else:
        extra = 0.0
    return FlopsPerToken(
        params=params,
        forward=forward,
        backward=backward,
        attention=attention,
        model=forward + backward,
        hardware=forward + backward + extra,
        recompute=recompute,
        causal=causal,
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
    layout: str | None = Field(default=None, description="the layout whose predicted MFU was used")

    def rows(self) -> list[tuple[str, str]]:
        mark = {k: " (solved)" if self.solved_for == k else "" for k in ("params", "tokens", "gpus")}
        active = f" ({format_count(self.active_params)} active)" if self.active_params != self.params else ""
        rows = [
            (
                "hardware",
                f"{self.hardware}: {self.dtype} dense peak {format_rate(self.peak_flops)} ({self.peak_source})",
            ),
            ("parameters", f"{format_count(self.params)} params{mark['params']}{active}{self._adapters()}"),
            ("tokens", f"{format_count(self.tokens)} tokens{mark['tokens']} ({self.tokens_per_param:,.1f} per param)"),
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
            mfu_text += f", predicted for {self.layout}"
        rows += [
            ("MFU", mfu_text + (f", goodput {self.goodput:g}" if self.goodput != 1 else "")),
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


def _rate_per_gpu(t: Throughput, mfu: float, fpt: FlopsPerToken) -> float:
    """Effective model FLOP/s per device at ``mfu`` (or from the achieved hardware rate)."""
    if t.achieved is not None:
        return t.achieved * fpt.model / fpt.hardware
    return t.peak_flops * mfu


def train_time(
    query: TrainQuery,
    hardware: HardwareProfile,
    dtype: str,
    throughput: Throughput,
    money: Money | None = None,
) -> TrainTimeResult:
    """Solve ``t = C / (G · peak · MFU · goodput)`` for whichever of N, D, G, t is missing."""
    given = {k: getattr(query, k) for k in ("params", "tokens", "gpus", "seconds")}
    missing = [k for k, v in given.items() if v is None]
    if len(missing) > 1:
        raise UsageError(
            "give three of params, tokens, gpus and days/hours; missing: "
            + ", ".join("days/hours" if m == "seconds" else m for m in missing),
            field=missing[0] if missing[0] != "seconds" else "days",
            also=("params", "tokens", "gpus", "days", "hours"),
        )
    t, steps, warnings = throughput, [], []
    mfu = t.mfu_low  # conservative end: the slowest plausible run
    solved = missing[0] if missing else None
    if solved == "params" and query.model is not None:
        raise UsageError("params cannot be solved when a model fixes the parameter count", field="params")

    # Per-token cost is linear in N: fpt(N) = k·N + a (the attention term does not depend on N).
    def fpt(n: float) -> FlopsPerToken:
        t = query.adapter_params
        return flops_per_token(
            n + t, query.model, query.seq, causal=query.causal, recompute=query.recompute, frozen=n if t else 0.0
        )

    if solved == "params":
        probe0, probe1 = fpt(0.0), fpt(1.0)
        budget = given["seconds"] * given["gpus"] * t.goodput * _rate_per_gpu(t, mfu, probe1) / given["tokens"]
        params = (budget - probe0.model) / (probe1.model - probe0.model)
        if params <= 0:
            raise UsageError("no model fits: the attention term alone exceeds the budget; give more time or GPUs")
        given["params"] = params
    n_total = float(given["params"])
    n_active = float(query.active_params or n_total)
    per_token = fpt(n_active)
    rate = _rate_per_gpu(t, mfu, per_token)
    if solved == "tokens":
        given["tokens"] = given["seconds"] * given["gpus"] * t.goodput * rate / per_token.model
    tokens = float(given["tokens"])
    flops = per_token.model * tokens
    if solved == "gpus":
        exact = flops / (given["seconds"] * rate * t.goodput)
        given["gpus"] = max(1, math.ceil(exact - 1e-9))
        steps.append(
            step(
                "GPUs needed",
                "G = ⌈C / (t · peak · MFU · goodput)⌉",
                f"⌈{format_sci(flops)} / ({format_duration(given['seconds'])} × {format_rate(rate)} × {t.goodput:g})⌉",
                f"{given['gpus']:,} (exact {exact:,.2f})",
                sources.TIME,
            )
        )
    gpus = int(given["gpus"])
    seconds = flops / (gpus * rate * t.goodput)
    rate_high = _rate_per_gpu(t, t.mfu_high, per_token)
    seconds_fast = flops / (gpus * rate_high * t.goodput)
    consistent = seconds_fast * 0.99 <= given["seconds"] <= seconds * 1.01 if solved is None else True
    if not consistent:
        raise UsageError(
            f"params, tokens, gpus and days/hours disagree: these inputs give {format_duration(seconds)} "
            f"at MFU {mfu:g}, not {format_duration(given['seconds'])}; leave one of them out to solve for it",
            field="params",
            also=("tokens", "gpus", "days", "hours"),
        )
    effective_mfu = rate / t.peak_flops
    hfu = effective_mfu * per_token.hardware / per_token.model
    if effective_mfu > 1:
        warnings.append(
            f"implied MFU {effective_mfu:.2f} is above 1: the achieved rate exceeds {hardware.name}'s {dtype} peak"
        )
    elif (top := effective_mfu if t.achieved is not None else max(effective_mfu, t.mfu_high)) > PLAUSIBLE_MFU:
        warnings.append(implausible_mfu(top))  # the top of an --mfu range counts too

    adapters = query.adapter_params
    steps.insert(
        0,
        step(
            "training FLOPs",
            "C = 6·N·D = (2N forward + 4N backward)·D",
            f"6 × {format_sci(n_active)} × {format_sci(tokens)}",
            format_flops(6 * n_active * tokens),
            f"{sources.KAPLAN_6ND}; {sources.PALM_6N}",
        )
        if not adapters
        else step(
            "training FLOPs (frozen base + adapters)",
            "C = (2N forward + 2N input gradients + 6T adapters)·D",
            f"(4 × {format_sci(n_active)} + 6 × {format_sci(adapters)}) × {format_sci(tokens)}",
            format_flops((4 * n_active + 6 * adapters) * tokens),
            sources.LORA_BACKWARD,
        ),
    )
    if per_token.attention:
        conv = "c = 1 (causal)" if query.causal else "c = 2 (full s×s)"
        steps.insert(
            1,
            step(
                "attention FLOPs",
                f"C_att = c·6·L·s·d_attn·D, {conv}",
                f"{format_sci(per_token.attention)} FLOPs/token × {format_sci(tokens)}",
                format_flops(per_token.attention * tokens),
                sources.CAUSAL_ATTENTION if query.causal else sources.PALM_ATTENTION,
            ),
        )
    if t.achieved is not None:
        steps.append(
            step(
                "effective FLOP/s per GPU",
                "model FLOP/s = X × model FLOPs / hardware FLOPs",
                f"{format_rate(t.achieved)} × {per_token.model / per_token.hardware:.4f}",
                format_rate(rate),
                sources.NARAYANAN_RECOMPUTE,
            )
        )
    else:
        steps.append(
            step(
                "effective FLOP/s per GPU",
                "peak(dtype) × MFU",
                f"{format_rate(t.peak_flops)} ({dtype}, dense, {t.peak_source}) × {mfu:g}",
                format_rate(rate),
                f"{hardware.sources[0].title}; {sources.PALM_MFU}",
            )
        )
    steps.append(
        step(
            "cluster FLOP/s",
            "G × per-GPU FLOP/s",
            f"{gpus:,} × {format_rate(rate)}",
            format_rate(gpus * rate),
            sources.TIME,
        )
    )
    goodput_text = f" × {t.goodput:g} goodput" if t.goodput != 1 else ""
    steps.append(
        step(
            "wall-clock time",
            "t = C / (G · peak · MFU" + (" · goodput)" if t.goodput != 1 else ")"),
            f"{format_sci(flops)} / ({format_sci(gpus * rate)}{goodput_text})",
            f"{format_sci(seconds, 4)} s = {seconds / SECONDS_PER_DAY:.1f} days",
            sources.TIME,
        )
    )
    gpu_hours = gpus * seconds / 3600
    steps.append(
        step(
            "GPU-hours",
            "G × t / 3600",
            f"{gpus:,} × {format_sci(seconds, 4)} s / 3600",
            f"{gpu_hours:,.0f}",
            "definition",
        )
    )

    result = TrainTimeResult(
        hardware=hardware.name,
        dtype=dtype,
        params=n_total,
        active_params=n_active,
        adapter_params=query.adapter_params,
        finetune=query.finetune,
        tokens=tokens,
        gpus=gpus,
        solved_for=solved,
        flops=flops,
        flops_forward=per_token.forward * tokens,
        flops_backward=per_token.backward * tokens,
        hardware_flops=per_token.hardware * tokens,
        flops_attention=per_token.attention * tokens,
        flops_per_token=per_token.model,
        peak_flops=t.peak_flops,
        peak_source=t.peak_source,
        mfu=effective_mfu,
        mfu_range=(t.mfu_low, t.mfu_high) if t.achieved is None else (effective_mfu, effective_mfu),
        hfu=hfu,
        goodput=t.goodput,
        per_gpu_flops_per_second=rate,
        cluster_flops_per_second=gpus * rate,
        seconds=seconds,
        seconds_range=(seconds_fast, seconds),
        hours=seconds / 3600,
        days=seconds / SECONDS_PER_DAY,
        days_range=(seconds_fast / SECONDS_PER_DAY, seconds / SECONDS_PER_DAY),
        gpu_hours=gpu_hours,
        tokens_per_param=tokens / n_total,
        warnings=warnings,
        steps=steps,
        recompute=query.recompute,
        causal=query.causal,
    )
    _add_money(result, hardware, money)
    if query.finetune == "qlora":
        result.notes.append(
            "not included: the NF4 base's dequantization before each matmul (memory-bound work, not FLOPs; "
            "'napkin step --finetune qlora' counts it)"
        )
    if result.tokens_per_param < UNDERTRAINED_TOKENS_PER_PARAM and query.finetune is None:
        result.warnings.append(
            f"{result.tokens_per_param:.1f} tokens per parameter is far below the ≈{CHINCHILLA_TOKENS_PER_PARAM:g} "
            "that is compute-optimal (Hoffmann et al. 2022): this model is under-trained for its compute; "
            "see 'napkin optimal'"
        )
    return result


def compute_budget(gpus: int, peak: float, mfu: float, seconds: float) -> tuple[float, Step]:
    """Training compute a cluster delivers: C = G × peak × MFU × t (the time formula solved for C)."""
    budget = gpus * peak * mfu * seconds
    numbers = f"{gpus:,} × {format_rate(peak)} × {mfu:g} × {format_sci(seconds)} s"
    return budget, step("compute budget", "C = G × peak × MFU × t", numbers, format_flops(budget), sources.TIME)


def _add_money(result: TrainTimeResult, hardware: HardwareProfile, money: Money | None) -> None:
    """Cost, energy and CO₂ when the inputs allow (energy = GPU-hours × power × PUE: sources.ENERGY)."""
    money = money or Money()
    price = money.price_per_hour or hardware.price_per_hour
    if price is not None:
        result.price_per_hour = price
        result.cost_usd = result.gpu_hours * price
        result.steps.append(
            step(
                "cost",
                "GPU-hours × price per GPU-hour",
                f"{result.gpu_hours:,.0f} × ${price:g}",
                f"${result.cost_usd:,.0f}",
                "definition",
            )
        )
    if hardware.power is None:
        if money.carbon_g_per_kwh is not None or money.pue != 1.0:
            result.warnings.append(f"{hardware.name} has no board power in its profile: energy is not estimated")
        return
    result.power_watts = hardware.power
    result.pue = money.pue
    result.energy_kwh = result.gpu_hours * hardware.power / 1000 * money.pue
    result.steps.append(
        step(
            "energy",
            "GPU-hours × board power × PUE",
            f"{result.gpu_hours:,.0f} h × {hardware.power:g} W × {money.pue:g}",
            format_energy(result.energy_kwh),
            sources.ENERGY,
        )
    )
    if money.carbon_g_per_kwh is not None:
        result.co2_tonnes = result.energy_kwh * money.carbon_g_per_kwh / 1e6
        result.steps.append(
            step(
                "emissions",
                "kWh × gCO₂e/kWh / 10⁶",
                f"{result.energy_kwh:,.0f} × {money.carbon_g_per_kwh:g} / 10⁶",
                f"{result.co2_tonnes:,.4g} t CO₂e",
                "definition (grid carbon intensity given by --carbon)",
            )
        )


# ------------------------------------------------------------------------------------------- MFU


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


class MatmulResult(Result):
    title: ClassVar[str] = "Matmul roofline"
    headline: ClassVar[tuple[str, ...]] = ("flops", "arithmetic_intensity", "bound", "seconds")

    m: int
    k: int
    n: int
    dtype: str
    hardware: str
    flops: float
    bytes: float
    arithmetic_intensity: float = Field(description="FLOP per byte moved")
    ridge_point: float = Field(description="peak / bandwidth, FLOP per byte")
    bound: str = Field(description="'compute' or 'memory'")
    peak_flops: float
    memory_bandwidth: float
    seconds: float = Field(description="roofline time: max(FLOPs / peak, bytes / bandwidth)")
    attainable_flops_per_second: float

    def rows(self) -> list[tuple[str, str]]:
        return [
            ("shape", f"({self.m:,} × {self.k:,}) · ({self.k:,} × {self.n:,}), {self.dtype}"),
            ("FLOPs", format_flops(self.flops)),
            ("bytes moved", format_bytes_si(self.bytes)),
            ("arithmetic intensity", f"{self.arithmetic_intensity:,.1f} FLOP/B"),
            ("ridge point", f"{self.ridge_point:,.1f} FLOP/B ({self.hardware})"),
            ("bound", f"{self.bound}-bound"),
            ("roofline time", f"{format_duration(self.seconds)} at {format_rate(self.attainable_flops_per_second)}"),
        ]


def matmul(m: int, k: int, n: int, hardware: HardwareProfile, dtype: str) -> MatmulResult:
    """Roofline of one (m×k)·(k×n) matmul: 2mkn FLOPs over bytes·(mk + kn + mn) of traffic."""
    flops = 2.0 * m * k * n
    element = STORAGE_BYTES[dtype]
    traffic = element * (m * k + k * n + m * n)
    intensity = flops / traffic
    peak, bandwidth = hardware.peak(dtype), hardware.memory_bandwidth
    ridge = peak / bandwidth
    seconds = max(flops / peak, traffic / bandwidth)
    steps = [
        step("FLOPs", "2·m·k·n", f"2 × {m:,} × {k:,} × {n:,}", format_flops(flops), sources.MATMUL),
        step(
            "bytes moved",
            "e·(m·k + k·n + m·n)",
            f"{element:g} × ({m * k:,} + {k * n:,} + {m * n:,})",
            f"{traffic:,.0f} B",
            "each operand and the output cross memory once (ideal tiling)",
        ),
        step(
            "arithmetic intensity",
            "FLOPs / bytes",
            f"{format_sci(flops)} / {format_sci(traffic)}",
            f"{intensity:,.1f} FLOP/B",
            sources.ROOFLINE,
        ),
        step(
            "ridge point",
            "peak / bandwidth",
            f"{format_rate(peak)} / {format_bandwidth(bandwidth)}",
            f"{ridge:,.1f} FLOP/B",
            sources.ROOFLINE,
        ),
        step(
            "roofline time",
            "max(FLOPs / peak, bytes / bandwidth)",
            f"max({flops / peak:.3g} s, {traffic / bandwidth:.3g} s)",
            f"{seconds:.4g} s",
            sources.ROOFLINE,
        ),
    ]
    return MatmulResult(
        m=m,
        k=k,
        n=n,
        dtype=dtype,
        hardware=hardware.name,
        flops=flops,
        bytes=traffic,
        arithmetic_intensity=intensity,
        ridge_point=ridge,
        bound="compute" if intensity >= ridge else "memory",
        peak_flops=peak,
        memory_bandwidth=bandwidth,
        seconds=seconds,
        attainable_flops_per_second=min(peak, intensity * bandwidth),
        steps=steps,
    )


# ------------------------------------------------------------------------------------- flops train


class TrainFlopsResult(ModelResult):
    title: ClassVar[str] = "Training FLOPs"
    headline: ClassVar[tuple[str, ...]] = ("flops", "hardware_flops")

    params: float
    tokens: float
    flops: float = Field(description="model FLOPs: 6·N·D + attention")
    flops_forward: float
    flops_backward: float
    flops_attention: float
    hardware_flops: float = Field(description="model FLOPs + recomputation (HFU basis)")
    flops_per_token: float
    recompute: Recompute
    causal: bool

    def rows(self) -> list[tuple[str, str]]:
        att = bool(self.flops_attention)
        rows = [
            ("forward (2·N·D" + (" + ⅓ attention)" if att else ")"), format_flops(self.flops_forward)),
            ("backward (4·N·D" + (" + ⅔ attention)" if att else ")"), format_flops(self.flops_backward)),
        ]
        if att:
            conv = " (causal, c = 1)" if self.causal else " (c = 2, PaLM)"
            rows.append(("attention (incl. above)", format_flops(self.flops_attention) + conv))
        rows.append(("model FLOPs (MFU basis)", format_flops(self.flops)))
        extra = "" if self.recompute is Recompute.none else f" ({self.recompute} recomputation)"
        rows.append(("hardware FLOPs (HFU basis)", format_flops(self.hardware_flops) + extra))
        return rows


def train_flops(
    params: float,
    tokens: float,
    model: Model | None = None,
    seq: int | None = None,
    *,
    causal: bool = False,
    recompute: Recompute = Recompute.none,
) -> TrainFlopsResult:
    per_token = flops_per_token(params, model, seq, causal=causal, recompute=recompute)
    steps = [
        step(
            "forward",
            "2·N·D",
            f"2 × {format_sci(params)} × {format_sci(tokens)}",
            format_flops(2 * params * tokens),
            sources.PALM_6N,
        ),
        step(
            "backward",
            "4·N·D (input and weight gradients)",
            f"4 × {format_sci(params)} × {format_sci(tokens)}",
            format_flops(4 * params * tokens),
            sources.PALM_6N,
        ),
    ]
    if per_token.attention:
        steps.append(
            step(
                "attention",
                "c·6·L·s·d_attn·D",
                f"{format_sci(per_token.attention)} × {format_sci(tokens)}",
                format_flops(per_token.attention * tokens),
                sources.CAUSAL_ATTENTION if causal else sources.PALM_ATTENTION,
            )
        )
    steps.append(
        step(
            "model FLOPs",
            "C = 6·N·D (+ attention)",
            "sum of the above",
            format_flops(per_token.model * tokens),
            sources.KAPLAN_6ND,
        )
    )
    if recompute is not Recompute.none:
        steps.append(
            step(
                f"hardware FLOPs ({recompute} recomputation)",
                "model FLOPs + recomputed forward",
                f"{per_token.hardware / per_token.model:.4f} × model FLOPs",
                format_flops(per_token.hardware * tokens),
                sources.NARAYANAN_RECOMPUTE,
            )
        )
    return TrainFlopsResult(
        params=params,
        tokens=tokens,
        flops=per_token.model * tokens,
        flops_forward=per_token.forward * tokens,
        flops_backward=per_token.backward * tokens,
        flops_attention=per_token.attention * tokens,
        hardware_flops=per_token.hardware * tokens,
        flops_per_token=per_token.model,
        recompute=recompute,
        causal=causal,
        steps=steps,
    )
