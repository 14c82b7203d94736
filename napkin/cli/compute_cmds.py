"""Compute commands: train-time, mfu, flops, optimal, models."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from napkin import units
from napkin.choices import Dtype, Fit, Recompute
from napkin.cli.common import (
    DtypeOpt,
    ExplainOpt,
    FfnOpt,
    HardwareFileOpt,
    HardwareOpt,
    HeadDimOpt,
    HeadsOpt,
    HiddenOpt,
    JsonOpt,
    LayersOpt,
    ModelOpt,
    SeqOpt,
    boundary,
    build_shape,
    emit,
    load_hardware,
    parse_optional,
    pick_params,
)
from napkin.errors import UsageError
from napkin.units import (
    format_bytes_si,
    format_count,
    format_duration,
    format_flops,
    format_percent,
    format_rate,
)

if TYPE_CHECKING:
    pass

app = typer.Typer()
flops_app = typer.Typer(help="FLOP counts: a matmul's roofline, or a training run's 6·N·D.", no_args_is_help=True)


class Peak(StrEnum):
    datasheet = "datasheet"
    measured = "measured"


ParamsOpt = Annotated[
    str | None, typer.Option("--params", "-N", metavar="COUNT", help="N: parameters, e.g. 70e9 or 70B.")
]
TokensOpt = Annotated[
    str | None, typer.Option("--tokens", "-D", metavar="COUNT", help="D: training tokens, e.g. 15e12 or 15T.")
]
GpusOpt = Annotated[str | None, typer.Option("--gpus", "-G", metavar="COUNT", help="G: number of GPUs (devices).")]
DaysOpt = Annotated[str | None, typer.Option("--days", metavar="NUMBER", help="Wall-clock duration in days.")]
HoursOpt = Annotated[str | None, typer.Option("--hours", metavar="NUMBER", help="Wall-clock duration in hours.")]
RecomputeOpt = Annotated[
    bool,
    typer.Option(
        "--recompute",
        help="Full activation recomputation: one extra forward, hardware FLOPs 8·N·D (HFU), model FLOPs unchanged.",
    ),
]
SelectiveOpt = Annotated[
    bool,
    typer.Option("--selective-recompute", help="Recompute only the attention scores (Korthikanti et al. 2022)."),
]


def _recompute(full: bool, selective: bool) -> Recompute:
    if full and selective:
        raise UsageError("give --recompute or --selective-recompute, not both")
    return Recompute.full if full else Recompute.selective if selective else Recompute.none


CausalOpt = Annotated[bool, typer.Option("--causal", help="Count only the unmasked half of attention (c = 1).")]


def _duration(days: str | None, hours: str | None) -> float | None:
    if days is not None and hours is not None:
        raise UsageError("give --days or --hours, not both")
    if days is not None:
        return units.parse_number(days, "--days") * 86400
    if hours is not None:
        return units.parse_number(hours, "--hours") * 3600
    return None


@app.command("train-time")
def train_time(
    params: ParamsOpt = None,
    tokens: TokensOpt = None,
    gpus: GpusOpt = None,
    days: DaysOpt = None,
    hours: HoursOpt = None,
    model: ModelOpt = None,
    layers: LayersOpt = None,
    hidden: HiddenOpt = None,
    heads: HeadsOpt = None,
    seq: SeqOpt = None,
    ffn: FfnOpt = None,
    head_dim: HeadDimOpt = None,
    hardware: HardwareOpt = None,
    hardware_file: HardwareFileOpt = None,
    dtype: DtypeOpt = Dtype.bf16,
    mfu: Annotated[
        str,
        typer.Option(
            "--mfu", metavar="FRACTION[:FRACTION]", help="Model FLOPs utilisation, or a range LOW:HIGH (0.35:0.5)."
        ),
    ] = "0.5",
    achieved: Annotated[
        str | None,
        typer.Option("--achieved", metavar="FLOP/S", help="Sustained hardware FLOP/s per GPU (replaces peak × MFU)."),
    ] = None,
    peak: Annotated[Peak, typer.Option("--peak", help="Datasheet peak or your saved benchmark.")] = Peak.datasheet,
    goodput: Annotated[
        str, typer.Option("--goodput", metavar="FRACTION", help="Fraction of time doing useful steps.")
    ] = "1",
    recompute_full: RecomputeOpt = False,
    recompute_selective: SelectiveOpt = False,
    causal: CausalOpt = False,
    price: Annotated[
        str | None, typer.Option("--price", metavar="USD", help="USD per GPU-hour (default: the profile's).")
    ] = None,
    pue: Annotated[
        str, typer.Option("--pue", metavar="NUMBER", help="Data-centre power usage effectiveness (≥ 1).")
    ] = "1.0",
    carbon: Annotated[
        str | None, typer.Option("--carbon", metavar="G/KWH", help="Grid carbon intensity, gCO₂e per kWh.")
    ] = None,
    as_json: JsonOpt = False,
    explain: ExplainOpt = False,
) -> None:
    """How long a training run takes: C = 6·N·D, t = C / (G × dense peak × MFU).

    Give any three of --params, --tokens, --gpus and --days/--hours; napkin solves for the fourth.
    """
    from napkin.compute import Money, Throughput, TrainQuery
    from napkin.compute import train_time as engine

    with boundary():
        recompute = _recompute(recompute_full, recompute_selective)
        shape, model_params, active = build_shape(
            model, layers=layers, hidden=hidden, heads=heads, seq=seq, ffn=ffn, head_dim=head_dim
        )
        n = pick_params(params, model_params, required=False)
        query = TrainQuery(
            params=n, tokens=parse_optional(units.parse_count, tokens, "--tokens"),
            gpus=None if gpus is None else units.parse_int(gpus, "--gpus"), seconds=_duration(days, hours),
            shape=shape, active_params=active if active != model_params else None, causal=causal,
            recompute=recompute,
        )  # fmt: skip
        profile = load_hardware(hardware, hardware_file).profile
        peak_value, peak_source = profile.peak_with_source(dtype, measured=peak is Peak.measured)
        low, high = units.parse_fraction_range(mfu, "--mfu")
        throughput = Throughput(
            peak_flops=peak_value, peak_source=peak_source, mfu_low=low, mfu_high=high,
            achieved=parse_optional(units.parse_rate, achieved, "--achieved"),
            goodput=units.parse_fraction(goodput, "--goodput"),
        )  # fmt: skip
        money = Money(
            price_per_hour=parse_optional(units.parse_number, price, "--price"),
            pue=_pue(pue), carbon_g_per_kwh=parse_optional(units.parse_number, carbon, "--carbon"),
        )  # fmt: skip
        result = engine(query, profile, dtype, throughput, money)

    def render() -> list[Any]:
        from napkin import render as r

        solved = result.solved_for
        mark = {k: " (solved)" if solved == k else "" for k in ("params", "tokens", "gpus")}
        rows = [
            ("hardware", f"{result.hardware}: {dtype} dense peak {format_rate(result.peak_flops)}"
                         f" ({result.peak_source})"),
            ("parameters", f"{format_count(result.params)} params{mark['params']}"
             + (f" ({format_count(result.active_params)} active)" if result.active_params != result.params else "")),
            ("tokens", f"{format_count(result.tokens)} tokens{mark['tokens']}"
                       f" ({result.tokens_per_param:,.1f} per param)"),
            ("GPUs", f"{result.gpus:,}{mark['gpus']}"),
            ("training FLOPs", f"{format_flops(result.flops)} (forward {units.format_sci(result.flops_forward)}"
             f" + backward {units.format_sci(result.flops_backward)})"),
        ]  # fmt: skip
        if result.hardware_flops != result.flops:
            rows.append(("hardware FLOPs", f"{format_flops(result.hardware_flops)} (with {recompute} recomputation)"))
        mfu_text = (f"{result.mfu_range[0]:g}–{result.mfu_range[1]:g}" if result.mfu_range[0] != result.mfu_range[1]
                    else f"{result.mfu:.3g}")  # fmt: skip
        if result.hfu != result.mfu:
            mfu_text += f" (HFU {result.hfu:.3g})"
        rows += [
            ("MFU", mfu_text + (f", goodput {result.goodput:g}" if result.goodput != 1 else "")),
            ("per-GPU FLOP/s", format_rate(result.per_gpu_flops_per_second) + " effective"),
            ("cluster FLOP/s", format_rate(result.cluster_flops_per_second) + " effective"),
            ("time", f"{units.format_sci(result.seconds)} s = {result.hours:,.0f} hours = {result.days:,.1f} days"),
        ]  # fmt: skip
        if result.seconds_range[0] != result.seconds_range[1]:
            rows.append(
                (
                    "time range",
                    f"{format_duration(result.seconds_range[0])} (MFU {high:g}) – "
                    f"{format_duration(result.seconds_range[1])} (MFU {low:g})",
                )
            )
        rows.append(("GPU-hours", f"{result.gpu_hours:,.0f}"))
        if result.cost_usd is not None:
            rows.append(("cost", f"${result.cost_usd:,.0f} at ${result.price_per_hour:g} per GPU-hour"))
        if result.energy_kwh is not None:
            rows.append(
                (
                    "energy",
                    f"{result.energy_kwh / 1000:,.1f} MWh ({result.power_watts:g} W per GPU × PUE {result.pue:g})",
                )
            )
        if result.co2_tonnes is not None:
            rows.append(("emissions", f"{result.co2_tonnes:,.1f} t CO₂e"))
        return [r.key_values("Training time", rows, caption="C = 6·N·D; t = C / (G × dense peak × MFU)")]

    emit(result, as_json, render, explain=explain, steps=result.steps, warnings=result.warnings)


def _pue(text: str) -> float:
    value = units.parse_number(text, "--pue")
    if value < 1:
        raise UsageError(f"--pue: {text!r} must be ≥ 1 (1.0 = no overhead; typical data centres 1.1–1.5)")
    return value


@app.command("mfu")
def mfu_command(
    params: ParamsOpt = None,
    tokens: TokensOpt = None,
    gpus: GpusOpt = None,
    days: DaysOpt = None,
    hours: HoursOpt = None,
    gpu_hours: Annotated[
        str | None, typer.Option("--gpu-hours", metavar="NUMBER", help="Total GPU-hours of the run.")
    ] = None,
    tokens_per_second: Annotated[
        str | None, typer.Option("--tokens-per-second", metavar="NUMBER", help="Cluster throughput, tokens/s.")
    ] = None,
    tokens_per_second_per_gpu: Annotated[
        str | None, typer.Option("--tokens-per-second-per-gpu", metavar="NUMBER", help="Throughput per GPU, tokens/s.")
    ] = None,
    model: ModelOpt = None,
    layers: LayersOpt = None,
    hidden: HiddenOpt = None,
    heads: HeadsOpt = None,
    seq: SeqOpt = None,
    ffn: FfnOpt = None,
    head_dim: HeadDimOpt = None,
    hardware: HardwareOpt = None,
    hardware_file: HardwareFileOpt = None,
    dtype: DtypeOpt = Dtype.bf16,
    recompute_full: RecomputeOpt = False,
    recompute_selective: SelectiveOpt = False,
    causal: CausalOpt = False,
    as_json: JsonOpt = False,
    explain: ExplainOpt = False,
) -> None:
    """The MFU a run achieved: tokens/s × FLOPs per token / (G × dense peak).

    Give one of --days, --hours, --gpu-hours, --tokens-per-second or --tokens-per-second-per-gpu.
    """
    with boundary():
        recompute = _recompute(recompute_full, recompute_selective)
        shape, _total, active = build_shape(
            model, layers=layers, hidden=hidden, heads=heads, seq=seq, ffn=ffn, head_dim=head_dim
        )
        n = pick_params(params, active)
        assert n is not None
        if gpus is None:
            raise UsageError("--gpus is required")
        g = units.parse_int(gpus, "--gpus")
        d = parse_optional(units.parse_count, tokens, "--tokens")
        given = [x for x in (days, hours, gpu_hours, tokens_per_second, tokens_per_second_per_gpu) if x is not None]
        if len(given) != 1:
            raise UsageError(
                "give exactly one of --days, --hours, --gpu-hours, --tokens-per-second, --tokens-per-second-per-gpu"
            )
        seconds = _duration(days, hours)
        if gpu_hours is not None:
            seconds = units.parse_count(gpu_hours, "--gpu-hours") * 3600 / g
        tps = parse_optional(units.parse_count, tokens_per_second, "--tokens-per-second")
        if tokens_per_second_per_gpu is not None:
            tps = units.parse_count(tokens_per_second_per_gpu, "--tokens-per-second-per-gpu") * g
        profile = load_hardware(hardware, hardware_file).profile
        from napkin.compute import mfu as engine

        result = engine(
            n,
            g,
            profile,
            dtype,
            tokens=d,
            seconds=seconds,
            tokens_per_second=tps,
            shape=shape,
            causal=causal,
            recompute=recompute,
        )

    def render() -> list[Any]:
        from napkin import render as r

        rows = [
            ("hardware", f"{result.hardware}: {dtype} dense peak {format_rate(result.peak_flops)}"),
            ("parameters", f"{format_count(result.params)}"),
            ("throughput", f"{result.tokens_per_second:,.0f} tokens/s"
                           f" ({result.tokens_per_second_per_gpu:,.1f} per GPU)"),
            ("FLOPs per token", f"{units.format_sci(result.flops_per_token)} (model)"),
            ("MFU", format_percent(result.mfu)),
        ]  # fmt: skip
        if result.hfu != result.mfu:
            rows.append(("HFU", format_percent(result.hfu) + f" ({recompute} recomputation)"))
        if result.days is not None:
            rows.append(("duration", f"{result.days:,.1f} days"))
        return [r.key_values("Model FLOPs utilisation", rows, caption="MFU = tokens/s × FLOPs/token / (G × peak)")]

    emit(result, as_json, render, explain=explain, steps=result.steps, warnings=result.warnings)


@flops_app.command("matmul")
def flops_matmul(
    m: Annotated[str, typer.Argument(help="Rows of A (M).")],
    k: Annotated[str, typer.Argument(help="Columns of A = rows of B (K).")],
    n: Annotated[str, typer.Argument(help="Columns of B (N).")],
    dtype: DtypeOpt = Dtype.bf16,
    hardware: HardwareOpt = None,
    hardware_file: HardwareFileOpt = None,
    as_json: JsonOpt = False,
    explain: ExplainOpt = False,
) -> None:
    """FLOPs, bytes, arithmetic intensity and roofline time of an (M×K)·(K×N) matmul."""
    with boundary():
        sizes = [units.parse_int(v, name) for v, name in ((m, "M"), (k, "K"), (n, "N"))]
        profile = load_hardware(hardware, hardware_file).profile
        from napkin.compute import matmul

        result = matmul(sizes[0], sizes[1], sizes[2], profile, dtype)

    def render() -> list[Any]:
        from napkin import render as r

        rows = [
            ("shape", f"({result.m:,} × {result.k:,}) · ({result.k:,} × {result.n:,}), {dtype}"),
            ("FLOPs", format_flops(result.flops)),
            ("bytes moved", format_bytes_si(result.bytes)),
            ("arithmetic intensity", f"{result.arithmetic_intensity:,.1f} FLOP/B"),
            ("ridge point", f"{result.ridge_point:,.1f} FLOP/B ({result.hardware})"),
            ("bound", f"{result.bound}-bound"),
            ("roofline time", f"{result.seconds:.3g} s at {format_rate(result.attainable_flops_per_second)}"),
        ]
        return [r.key_values("Matmul roofline", rows)]

    emit(result, as_json, render, explain=explain, steps=result.steps)


@flops_app.command("train")
def flops_train(
    params: ParamsOpt = None,
    tokens: TokensOpt = None,
    model: ModelOpt = None,
    layers: LayersOpt = None,
    hidden: HiddenOpt = None,
    heads: HeadsOpt = None,
    seq: SeqOpt = None,
    ffn: FfnOpt = None,
    head_dim: HeadDimOpt = None,
    recompute_full: RecomputeOpt = False,
    recompute_selective: SelectiveOpt = False,
    causal: CausalOpt = False,
    as_json: JsonOpt = False,
    explain: ExplainOpt = False,
) -> None:
    """Training FLOPs: 6·N·D (2N forward + 4N backward), plus attention with a shape."""
    with boundary():
        recompute = _recompute(recompute_full, recompute_selective)
        shape, _total, active = build_shape(
            model, layers=layers, hidden=hidden, heads=heads, seq=seq, ffn=ffn, head_dim=head_dim
        )
        n = pick_params(params, active)
        assert n is not None
        if tokens is None:
            raise UsageError("--tokens is required")
        from napkin.compute import train_flops

        result = train_flops(n, units.parse_count(tokens, "--tokens"), shape, causal=causal, recompute=recompute)

    def render() -> list[Any]:
        from napkin import render as r

        rows = [
            (
                "forward (2·N·D" + (" + ⅓ attention)" if result.flops_attention else ")"),
                format_flops(result.flops_forward),
            ),
            (
                "backward (4·N·D" + (" + ⅔ attention)" if result.flops_attention else ")"),
                format_flops(result.flops_backward),
            ),
        ]
        if result.flops_attention:
            rows.append(
                (
                    "attention (incl. above)",
                    format_flops(result.flops_attention) + (" (causal, c = 1)" if causal else " (c = 2, PaLM)"),
                )
            )
        rows.append(("model FLOPs (MFU basis)", format_flops(result.flops)))
        rows.append(
            (
                "hardware FLOPs (HFU basis)",
                format_flops(result.hardware_flops)
                + ("" if recompute is Recompute.none else f" ({recompute} recomputation)"),
            )
        )
        return [r.key_values("Training FLOPs", rows)]

    emit(result, as_json, render, explain=explain, steps=result.steps)


@app.command("optimal")
def optimal_command(
    compute: Annotated[
        str | None, typer.Option("--compute", "-C", metavar="FLOPS", help="Training compute budget in FLOPs.")
    ] = None,
    gpus: GpusOpt = None,
    days: DaysOpt = None,
    hours: HoursOpt = None,
    mfu: Annotated[
        str, typer.Option("--mfu", metavar="FRACTION[:FRACTION]", help="MFU used to turn GPUs × time into FLOPs.")
    ] = "0.5",
    hardware: HardwareOpt = None,
    hardware_file: HardwareFileOpt = None,
    dtype: DtypeOpt = Dtype.bf16,
    fit: Annotated[
        Fit, typer.Option("--fit", help="Loss-law constants: epoch (refit) or hoffmann (as published).")
    ] = Fit.epoch,
    as_json: JsonOpt = False,
    explain: ExplainOpt = False,
) -> None:
    """Compute-optimal model size N* and tokens D* (Chinchilla): the 20:1 rule and the fitted law."""
    from napkin.scaling import optimal

    with boundary():
        seconds = _duration(days, hours)
        derivation = []
        if compute is not None:
            if gpus is not None or seconds is not None:
                raise UsageError("give --compute, or --gpus with --days/--hours, not both")
            budget = units.parse_flops(compute, "--compute")
        else:
            if gpus is None or seconds is None:
                raise UsageError("give --compute, or --gpus with --days/--hours (and --hardware, --mfu)")
            from napkin.compute import compute_budget

            profile = load_hardware(hardware, hardware_file).profile
            g, rate = units.parse_int(gpus, "--gpus"), units.parse_fraction(mfu, "--mfu")
            budget, budget_step = compute_budget(g, profile.peak(dtype), rate, seconds)
            derivation.append(budget_step)
        result = optimal(budget, fit, derivation)

    def render() -> list[Any]:
        from napkin import render as r

        rows = []
        for a in (result.rule_of_20, result.fitted):
            rows.append(
                (
                    a.method,
                    format_count(a.params) + " params",
                    format_count(a.tokens) + " tokens",
                    f"{a.tokens_per_param:.1f}",
                    f"{a.loss:.3f}" if a.loss is not None else "–",
                )
            )
        return [
            r.grid(
                f"Compute-optimal allocation for C = {format_flops(result.compute)}",
                ["method", "N*", "D*", "D*/N*", "loss"],
                rows,
                caption="C = 6·N·D; Hoffmann et al. 2022; constants: " + result.fitted.source.split("; ")[-1],
            )
        ]

    emit(result, as_json, render, explain=explain, steps=result.steps)


@app.command("models")
def models_command(as_json: JsonOpt = False) -> None:
    """List the model presets usable with --model."""
    from napkin.presets import load_presets

    with boundary():
        presets = load_presets()
    if as_json:
        import json

        data = [
            {"name": p.name, "params": p.params, "active_params": p.active_params,
             "published_params": p.published_params, "description": p.description, "source": p.source,
             "shape": p.shape.model_dump(mode="json")}
            for p in presets.values()
        ]  # fmt: skip
        typer.echo(json.dumps(data, indent=2))
        return
    from napkin import render as r

    rows = [
        (p.name, format_count(p.params), format_count(p.active_params), str(p.shape.layers), str(p.shape.hidden),
         str(p.shape.heads or "–"), str(p.shape.seq), p.description)
        for p in presets.values()
    ]  # fmt: skip
    r.console().print(
        r.grid(
            "Model presets",
            ["name", "params", "active", "L", "d", "heads", "seq", "description"],
            rows,
            caption="params computed from the shape; MoE: compute uses active, memory total",
        )
    )


__all__ = ["app", "flops_app"]
