"""Memory commands: max-model, memory, optimizers, dtypes, tensor."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from napkin import units
from napkin.choices import Checkpointing, Optimizer, Precision, Sharding
from napkin.cli.common import (
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
    pick_params,
)
from napkin.errors import UsageError
from napkin.units import format_bytes, format_count

if TYPE_CHECKING:
    from napkin.memory import ActivationInputs
    from napkin.transformer import ModelShape

app = typer.Typer()

OptimizerOpt = Annotated[Optimizer, typer.Option("--optimizer", "-o", help="Optimizer (see 'napkin optimizers').")]
PrecisionOpt = Annotated[
    Precision,
    typer.Option("--precision", "-p", help="fp32 | mixed (ZeRO, 16 B Adam) | mixed-fp32-grads (18 B) | bf16."),
]
ShardingOpt = Annotated[
    Sharding, typer.Option("--sharding", help="none (DDP) | zero1 | zero2 | zero3 | fsdp (= zero3).")
]
BatchOpt = Annotated[int, typer.Option("--batch", "-b", min=1, help="b: micro-batch size (sequences per GPU).")]
TpOpt = Annotated[int, typer.Option("--tensor-parallel", "-t", min=1, help="t: tensor-parallel degree.")]
SpOpt = Annotated[bool, typer.Option("--sequence-parallel", help="Shard LayerNorm/dropout activations over t.")]
CkptOpt = Annotated[Checkpointing, typer.Option("--checkpointing", help="Activation recomputation.")]
FlashOpt = Annotated[bool, typer.Option("--flash-attention", help="FlashAttention: no s×s scores stored.")]
ReserveOpt = Annotated[
    str,
    typer.Option(
        "--reserve", metavar="BYTES|FRACTION", help="Memory kept free per GPU: bytes (4GB) or a fraction (0.1, 10%)."
    ),
]
GpusOpt = Annotated[str, typer.Option("--gpus", "-G", metavar="COUNT", help="Number of GPUs.")]


def _activations(
    shape: ModelShape | None, batch: int, tp: int, sp: bool, ckpt: Checkpointing, flash: bool, explicit: bool
) -> ActivationInputs | None:
    from napkin.memory import ActivationInputs

    if shape is None:
        if explicit:
            raise UsageError("activation options need a model shape: --model, or --layers --hidden --heads --seq")
        return None
    return ActivationInputs(shape=shape, batch=batch, tensor_parallel=tp, sequence_parallel=sp,
                            checkpointing=ckpt, flash_attention=flash)  # fmt: skip


@app.command("max-model")
def max_model_command(
    gpus: GpusOpt = "1",
    optimizer: OptimizerOpt = Optimizer.adamw,
    precision: PrecisionOpt = Precision.fp32,
    sharding: ShardingOpt = Sharding.zero3,
    reserve: ReserveOpt = "0",
    model: ModelOpt = None,
    layers: LayersOpt = None,
    hidden: HiddenOpt = None,
    heads: HeadsOpt = None,
    seq: SeqOpt = None,
    ffn: FfnOpt = None,
    head_dim: HeadDimOpt = None,
    batch: BatchOpt = 1,
    tensor_parallel: TpOpt = 1,
    sequence_parallel: SpOpt = False,
    checkpointing: CkptOpt = Checkpointing.none,
    flash_attention: FlashOpt = False,
    hardware: HardwareOpt = None,
    hardware_file: HardwareFileOpt = None,
    as_json: JsonOpt = False,
    explain: ExplainOpt = False,
) -> None:
    """The largest model whose training state fits: memory / bytes per parameter.

    By default memory is pooled across GPUs (fully sharded, ZeRO-3/FSDP); with --sharding none each
    GPU must hold the whole model.
    """
    with boundary():
        g = units.parse_int(gpus, "--gpus")
        shape, _n, _a = build_shape(model, layers=layers, hidden=hidden, heads=heads, seq=seq, ffn=ffn,
                                    head_dim=head_dim)  # fmt: skip
        explicit = batch != 1 or tensor_parallel != 1 or sequence_parallel or flash_attention
        explicit = explicit or checkpointing is not Checkpointing.none
        acts = _activations(shape, batch, tensor_parallel, sequence_parallel, checkpointing, flash_attention, explicit)
        profile = load_hardware(hardware, hardware_file).profile
        from napkin.memory import max_model, parse_reserve

        result = max_model(g, profile, optimizer=optimizer, precision=precision, sharding=sharding,
                           activations=acts, reserve_bytes=parse_reserve(reserve, profile.memory))  # fmt: skip

    def render() -> list[Any]:
        from napkin import render as r

        breakdown = " + ".join(f"{v:g} ({k.replace('_', ' ')})" for k, v in result.breakdown.items() if v)
        pooled = result.sharding in (Sharding.zero3, Sharding.fsdp)
        rows = [
            ("hardware", f"{g:,} × {result.hardware} ({format_bytes(result.per_gpu_memory_bytes)} each)"),
            ("optimizer / precision", f"{optimizer} / {precision}"),
            ("bytes per parameter", f"{result.bytes_per_param:g} B = {breakdown}"),
            ("sharding", f"{sharding}: " + ("memory pooled across GPUs" if pooled
                                            else "replicated states must fit on one GPU" if sharding is Sharding.none
                                            else "partially sharded")),
            ("memory for model", format_bytes(result.memory_bytes)),
        ]  # fmt: skip
        if result.reserve_bytes:
            rows.append(("reserved per GPU", format_bytes(result.reserve_bytes)))
        if result.activation_bytes:
            rows.append(("activations per GPU", format_bytes(result.activation_bytes)))
        rows.append(("largest model", f"{format_count(result.params)} params"))
        if result.max_micro_batch is not None and result.shape_params is not None:
            rows.append(
                (
                    "largest micro-batch",
                    f"{result.max_micro_batch} sequences for the given shape's "
                    f"{format_count(result.shape_params)}-param model",
                )
            )
        return [r.key_values("Largest trainable model", rows, caption=result.excluded)]

    emit(result, as_json, render, explain=explain, steps=result.steps)


@app.command("memory")
def memory_command(
    params: Annotated[
        str | None, typer.Option("--params", "-N", metavar="COUNT", help="N: parameters, e.g. 7B.")
    ] = None,
    gpus: GpusOpt = "1",
    optimizer: OptimizerOpt = Optimizer.adamw,
    precision: PrecisionOpt = Precision.fp32,
    sharding: ShardingOpt = Sharding.zero3,
    reserve: ReserveOpt = "0",
    model: ModelOpt = None,
    layers: LayersOpt = None,
    hidden: HiddenOpt = None,
    heads: HeadsOpt = None,
    seq: SeqOpt = None,
    ffn: FfnOpt = None,
    head_dim: HeadDimOpt = None,
    batch: BatchOpt = 1,
    tensor_parallel: TpOpt = 1,
    sequence_parallel: SpOpt = False,
    checkpointing: CkptOpt = Checkpointing.none,
    flash_attention: FlashOpt = False,
    hardware: HardwareOpt = None,
    hardware_file: HardwareFileOpt = None,
    as_json: JsonOpt = False,
    explain: ExplainOpt = False,
) -> None:
    """Per-GPU training memory: parameters, gradients, master weights, optimizer states, activations."""
    with boundary():
        g = units.parse_int(gpus, "--gpus")
        shape, total, _a = build_shape(model, layers=layers, hidden=hidden, heads=heads, seq=seq, ffn=ffn,
                                       head_dim=head_dim)  # fmt: skip
        n = pick_params(params, total)
        assert n is not None
        explicit = batch != 1 or tensor_parallel != 1 or sequence_parallel or flash_attention
        explicit = explicit or checkpointing is not Checkpointing.none
        acts = _activations(shape, batch, tensor_parallel, sequence_parallel, checkpointing, flash_attention, explicit)
        profile = load_hardware(hardware, hardware_file).profile
        from napkin.memory import memory, parse_reserve

        result = memory(n, profile, optimizer=optimizer, precision=precision, sharding=sharding, gpus=g,
                        activations=acts, reserve_bytes=parse_reserve(reserve, profile.memory))  # fmt: skip

    def render() -> list[Any]:
        from napkin import render as r

        rows = [(k.replace("_", " "), format_bytes(v)) for k, v in result.breakdown.items()]
        rows.append(("total per GPU", format_bytes(result.per_gpu_bytes)))
        rows.append((f"{result.hardware} capacity", format_bytes(result.memory_bytes)))
        if result.reserve_bytes:
            rows.append(("reserved", format_bytes(result.reserve_bytes)))
        verdict = "fits" if result.fits else "does NOT fit"
        rows.append(
            (
                "verdict",
                f"{verdict}: headroom {format_bytes(result.headroom_bytes)}"
                if result.fits
                else f"{verdict}: short by {format_bytes(-result.headroom_bytes)}",
            )
        )
        if result.max_micro_batch is not None:
            rows.append(("largest micro-batch", f"{result.max_micro_batch} sequences"))
        title = f"Memory per GPU: {format_count(result.params)} params, {optimizer}, {precision}"
        layout = f"{result.data_parallel} data-parallel × {result.tensor_parallel} tensor-parallel GPUs"
        rows.insert(0, ("sharding", f"{sharding} over {layout}"))
        parts = [(k.replace("_", " "), v) for k, v in result.breakdown.items() if v > 0]
        return [r.key_values(title, rows), r.bar(parts, result.memory_bytes)]

    emit(result, as_json, render, explain=explain, steps=result.steps, warnings=result.warnings)


@app.command("optimizers")
def optimizers_command(as_json: JsonOpt = False) -> None:
    """Bytes per parameter for every optimizer × precision regime, with the breakdown."""
    from napkin.memory import OPTIMIZERS, PRECISIONS, bytes_per_param

    table = {o.value: {p.value: bytes_per_param(o, p) for p in PRECISIONS} for o in OPTIMIZERS}
    if as_json:
        import json

        data = {o: {p: {"total": b.total, "breakdown": b.breakdown, "states": list(b.states), "source": b.source}
                    for p, b in row.items()} for o, row in table.items()}  # fmt: skip
        typer.echo(json.dumps(data, indent=2))
        return
    from napkin import render as r

    def cell(b: Any) -> str:
        return f"{b.total:.4g}  ({'+'.join(f'{v:.4g}' for v in b.breakdown.values())})"

    rows = [[o, *(cell(b) for b in row.values()), ", ".join(OPTIMIZERS[Optimizer(o)].states) or "–"]
            for o, row in table.items()]  # fmt: skip
    r.console().print(r.grid(
        "Bytes per parameter = params + gradients + master weights + optimizer states",
        ["optimizer", *PRECISIONS, "state tensors"], rows,
        caption="fp32: all 4 B; mixed: ZeRO §3.1 (16 B Adam); mixed-fp32-grads: Megatron/DeepSpeed (18 B); "
                "bf16: no master copy. adafactor ≈ 0 state (factored); adam-8bit: 1 B + absmax/2048 per state.",
    ))  # fmt: skip


@app.command("dtypes")
def dtypes_command(
    value: Annotated[
        str | None, typer.Option("--value", metavar="NUMBER", help="Show what each format stores for this number.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Number formats: bits, range, precision — and what each stores for a value (exact rounding)."""
    from napkin.dtypes import parse_value, table

    with boundary():
        v = parse_value(value) if value is not None else None
        rows = table(v)
    if as_json:
        import json

        typer.echo(json.dumps([row.model_dump(mode="json") for row in rows], indent=2))
        return
    from napkin import render as r

    headers = ["format", "s/e/m", "B", "max", "min normal", "min subnormal", "eps"]
    if v is not None:
        headers += [f"stores {value}", "rel. err"]

    g = r.number

    body = []
    for row in rows:
        cells = [row.name, f"1/{row.exponent_bits}/{row.mantissa_bits}", f"{row.bytes:g}", g(row.max),
                 g(row.smallest_normal), g(row.smallest_subnormal), g(row.eps)]  # fmt: skip
        if v is not None:
            cells += [g(row.stored), "–" if row.relative_error is None else f"{row.relative_error:.1e}"]
        body.append(cells)
    r.console().print(
        r.grid(
            "Number formats",
            headers,
            body,
            caption="round to nearest, ties to even; fp8-e4m3 = float8_e4m3fn (no inf)",
        )
    )


@app.command("tensor")
def tensor_command(
    shape: Annotated[str, typer.Argument(help="Tensor shape, e.g. 49152x12288.")],
    dtype: Annotated[
        str, typer.Option("--dtype", metavar="DTYPE", help="fp32, bf16, fp16, fp8, int8, fp64, …")
    ] = "fp32",
    as_json: JsonOpt = False,
) -> None:
    """Bytes of a dense tensor, in GB and GiB."""
    from napkin.dtypes import parse_shape, tensor_size

    with boundary():
        result = tensor_size(parse_shape(shape), dtype)

    def render() -> list[Any]:
        from napkin import render as r

        return [r.key_values("Tensor size", [
            ("shape", " × ".join(f"{d:,}" for d in result.shape) + f" ({dtype})"),
            ("elements", f"{result.elements:,}"),
            ("bytes", f"{result.bytes:,.0f} B = {format_bytes(result.bytes)}"),
        ])]  # fmt: skip

    emit(result, as_json, render)
