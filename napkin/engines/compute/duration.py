"""Wall-clock training time: ``t = C / (G · peak · MFU)`` solved for whichever of N, D, G, t is missing,
with cost and energy (``train_time``), and the FLOP budget of G GPUs for t (``compute_budget``)."""

from __future__ import annotations

import math

from napkin import sources
from napkin.engines.compute.flops import (
    CHINCHILLA_TOKENS_PER_PARAM,
    PLAUSIBLE_MFU,
    SECONDS_PER_DAY,
    UNDERTRAINED_TOKENS_PER_PARAM,
    FlopsPerToken,
    flops_per_token,
    implausible_mfu,
)
from napkin.engines.compute.query import Money, Throughput, TrainQuery, TrainTimeResult
from napkin.errors import UsageError
from napkin.results.explain import Step, step
from napkin.systems.profiles import HardwareProfile
from napkin.units import (
    format_duration,
    format_energy,
    format_flops,
    format_rate,
    format_sci,
)


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
    if query.finetune == "qlora" and not throughput.predicted:  # a planned step time already counts it
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
