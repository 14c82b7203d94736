"""Memory commands: max-model, memory, optimizers, dtypes, tensor. Each calls one ``napkin.api`` function."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from napkin.cli.common import run
from napkin.cli.options import (
    DTYPE,
    FINETUNE,
    GPUS,
    HARDWARE,
    LAYOUT,
    MODEL,
    OUTPUT,
    PARAMS,
    STACK,
    TRAINING_STATE,
    WORKLOAD,
    _text,
    command,
)

app = typer.Typer()

ONE_GPU = [_text("gpus", "G: number of GPUs (devices).", "COUNT", "--gpus", "-G", default="1")]
assert [p.name for p in ONE_GPU] == [p.name for p in GPUS]


@app.command("max-model")
@command(ONE_GPU, TRAINING_STATE, MODEL, WORKLOAD, LAYOUT, FINETUNE, HARDWARE, STACK, DTYPE, OUTPUT)
def max_model_command(**options: Any) -> None:
    """The largest model whose training state fits: memory / bytes per parameter.

    By default memory is pooled across GPUs (fully sharded, ZeRO-3/FSDP); with --sharding none each
    GPU must hold the whole model.
    """
    from napkin import api

    run(api.max_model, options)


@app.command("memory")
@command(PARAMS, ONE_GPU, TRAINING_STATE, MODEL, WORKLOAD, LAYOUT, FINETUNE, HARDWARE, STACK, DTYPE, OUTPUT)
def memory_command(**options: Any) -> None:
    """Per-GPU training memory: parameters, gradients, master weights, optimizer states, activations."""
    from napkin import api

    run(api.memory, options)


@app.command("optimizers")
@command(OUTPUT[:1])
def optimizers_command(**options: Any) -> None:
    """Bytes per parameter for every optimizer × precision regime, with the breakdown."""
    from napkin import api

    run(api.optimizers, options)


@app.command("dtypes")
@command([_text("value", "Show what each format stores for this number.", "NUMBER")], OUTPUT[:1])
def dtypes_command(**options: Any) -> None:
    """Number formats: bits, range, precision — and what each stores for a value (exact rounding)."""
    from napkin import api

    run(api.dtypes, options)


@app.command("tensor")
@command([_text("dtype", "bf16, fp16, fp32, fp8, int8, fp64, …", "DTYPE", default="bf16")], OUTPUT[:1])
def tensor_command(
    shape: Annotated[str, typer.Argument(help="Tensor shape, e.g. 49152x12288.")], **options: Any
) -> None:
    """Bytes of a dense tensor, in GB and GiB."""
    from napkin import api

    run(api.tensor, {"shape": shape, **options})
