"""Compute commands: train-time, mfu, flops, optimal, models. Each calls one ``napkin.api`` function."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from napkin.cli.common import note, run
from napkin.cli.options import (
    CAUSAL,
    DTYPE,
    DURATION,
    FIT,
    GPUS,
    HARDWARE,
    MODEL,
    OUTPUT,
    PARAMS,
    RECOMPUTE,
    STACK,
    STACK_CAUSAL,
    TOKENS,
    TRAIN_FINETUNE,
    TRAIN_RECOMPUTE,
    _opt,
    _text,
    command,
)
from napkin.domain.choices import Sharding

app = typer.Typer()
flops_app = typer.Typer(help="FLOP counts: a matmul's roofline, or a training run's 6·N·D.", no_args_is_help=True)

TRAIN = [
    _text(
        "mfu",
        "Model FLOPs utilisation, a range LOW:HIGH (0.35:0.5), or 'predicted': that of the #1 of 'napkin plan'.",
        "FRACTION[:FRACTION]|predicted",
        default="0.5",
    ),
    _text(
        "cluster", "Cluster for --mfu predicted (and its device); see 'napkin cluster list'.", "NAME", "--cluster", "-c"
    ),
    _text("global_batch", "Global batch for --mfu predicted, sequences (or --global-batch-tokens).", "INT"),
    _text("global_batch_tokens", "Global batch for --mfu predicted, tokens (default 4M = 4·2^20).", "TOKENS"),
    _opt(
        "flash_attention",
        bool | None,
        None,
        "--flash-attention/--no-flash-attention",
        help="With --mfu predicted: FlashAttention or not (default: the stack's).",
    ),
    *(
        _text(
            name,
            f"With --mfu predicted: {what}, timed as 'napkin step' times it (default: step's; with no layout flag "
            "the plan's #1 is timed).",
            "INT",
            *f,
        )
        for name, what, f in (
            ("tensor_parallel", "TP of the layout", ("--tensor-parallel", "-t")),
            ("pipeline_parallel", "PP of the layout", ()),
            ("context_parallel", "CP of the layout", ()),
            ("expert_parallel", "EP of the layout", ()),
            ("interleave", "v, model chunks per pipeline rank", ()),
            ("micro_batch", "b, the micro-batch", ("--micro-batch", "-b")),
        )
    ),
    _opt(
        "sharding",
        Sharding | None,
        None,
        help="With --mfu predicted: the layout's sharding (none, zero1, zero2, zero3, fsdp, hsdp; default: step's).",
    ),
    _text("achieved", "Sustained hardware FLOP/s per GPU (replaces peak × MFU).", "FLOP/S"),
    _text(
        "peak", "datasheet, or measured (your saved 'napkin bench matmul').", "datasheet|measured", default="datasheet"
    ),
    _text("goodput", "Fraction of time doing useful steps.", "FRACTION", default="1"),
    _text("price", "USD per GPU-hour (default: the profile's).", "USD"),
    _text("pue", "Data-centre power usage effectiveness (≥ 1).", "NUMBER", default="1.0"),
    _text("carbon", "Grid carbon intensity, gCO₂e per kWh.", "G/KWH"),
]
THROUGHPUT = [
    _text("gpu_hours", "Total GPU-hours of the run.", "NUMBER"),
    _text("tokens_per_second", "Cluster throughput, tokens/s.", "NUMBER"),
    _text("tokens_per_second_per_gpu", "Throughput per GPU, tokens/s.", "NUMBER"),
]


@app.command("train-time")
@command(
    PARAMS,
    TOKENS,
    GPUS,
    DURATION,
    MODEL,
    TRAIN_FINETUNE,
    HARDWARE,
    STACK,
    DTYPE,
    TRAIN,
    TRAIN_RECOMPUTE,
    STACK_CAUSAL,
    OUTPUT,
)
def train_time(**options: Any) -> None:
    """How long a training run takes: C = 6·N·D, t = C / (G × dense peak × MFU).

    Give any three of --params, --tokens, --gpus and --days/--hours; napkin solves for the fourth.
    """
    from napkin import api

    run(api.train_time, options)


@app.command("mfu")
@command(PARAMS, TOKENS, GPUS, DURATION, THROUGHPUT, MODEL, HARDWARE, DTYPE, RECOMPUTE, CAUSAL, OUTPUT)
def mfu_command(**options: Any) -> None:
    """The MFU a run achieved: tokens/s × FLOPs per token / (G × dense peak).

    \b
    Give one of --days, --hours, --gpu-hours,
    --tokens-per-second or --tokens-per-second-per-gpu.
    """
    from napkin import api

    run(api.mfu, options)


@flops_app.command("matmul")
@command(DTYPE, HARDWARE, OUTPUT)
def flops_matmul(
    shape: Annotated[str, typer.Argument(metavar="MxKxN", help="The (M×K)·(K×N) matmul, e.g. 8192x8192x28672.")],
    k: Annotated[str | None, typer.Argument(hidden=True)] = None,
    n: Annotated[str | None, typer.Argument(hidden=True)] = None,
    **options: Any,
) -> None:
    """FLOPs, bytes, arithmetic intensity and roofline time of an (M×K)·(K×N) matmul.

    The shape is written as 'napkin tensor' and 'bench matmul --shape' write theirs (MxKxN); the older
    'M K N' still works for one release, with a note.
    """
    from napkin import api

    if k is not None or n is not None:
        note("'flops matmul M K N' is deprecated and goes in the next release; write MxKxN")
        run(api.matmul, {"m": shape, "k": k, "n": n, **options})
        return
    run(api.matmul, {"m": shape, **options})


@flops_app.command("train")
@command(PARAMS, TOKENS, MODEL, RECOMPUTE, CAUSAL, OUTPUT)
def flops_train(**options: Any) -> None:
    """Training FLOPs: 6·N·D (2N forward + 4N backward), plus attention with a model."""
    from napkin import api

    run(api.flops, options)


@app.command("optimal")
@command(
    [_text("compute", "Training compute budget in FLOPs.", "FLOPS", "--compute", "-C")],
    GPUS,
    DURATION,
    [_text("mfu", "MFU used to turn GPUs × time into FLOPs (default 0.5).", "FRACTION")],
    HARDWARE,
    DTYPE,
    FIT,
    OUTPUT,
)
def optimal_command(**options: Any) -> None:
    """Compute-optimal model size N* and tokens D* (Chinchilla): the 20:1 rule and the fitted law."""
    from napkin import api

    run(api.optimal, options)


@app.command("models")
@command(OUTPUT[:1])
def models_command(**options: Any) -> None:
    """List the model presets usable with --model."""
    from napkin import api

    run(api.models, options)


__all__ = ["app", "flops_app"]
