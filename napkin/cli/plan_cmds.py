"""Step-time commands: step (one layout) and plan (every layout that fits, ranked). Each calls one
``napkin.api`` function."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from napkin.cli.common import ExplainOpt, JsonOpt, run, run_with_plot
from napkin.cli.options import (
    DTYPE,
    FINETUNE,
    GPUS,
    HARDWARE,
    LAYOUT,
    MODEL,
    OUTPUT,
    STACK,
    STACK_CAUSAL,
    TRAINING_STATE,
    _flag,
    _opt,
    _text,
    command,
)

app = typer.Typer()

CLUSTER = [
    _text(
        "cluster",
        "Cluster profile: device, node and fabrics (see 'napkin cluster list'); "
        "default: the built-in cluster of --hardware.",
        "NAME",
        "--cluster",
        "-c",
    )
]
BATCH = [
    _text("global_batch", "B: global batch in sequences.", "INT"),
    _text("global_batch_tokens", "B in tokens, binary k/M as batch sizes are quoted (4M = 512 × 8192).", "TOKENS"),
    _opt(
        "flash_attention",
        bool | None,
        None,
        "--flash-attention/--no-flash-attention",
        help="FlashAttention: no s×s scores in memory or HBM traffic; default the stack's (--stack).",
    ),
]
MICRO_BATCH = [
    _text("micro_batch", "b: micro-batch size (sequences per GPU).", "INT", "--micro-batch", "-b", default="1")
]
#: The layout flags but --offload: the step model has no CPU offload (napkin memory does)
STEP_LAYOUT = [option for option in LAYOUT if option.name != "offload"]
OVERLAP = [
    _opt(
        "overlap_grad_reduce",
        bool | None,
        None,
        "--overlap-grad-reduce/--no-overlap-grad-reduce",
        help="Overlap the data-parallel gradient reduction with the last backward pass (Megatron-LM's "
        "--overlap-grad-reduce); without it the whole collective is exposed. DDP and ZeRO-1/2 only: "
        "ZeRO-3 moves its traffic every micro-batch, under that micro-batch's compute. Default: the stack's.",
    ),
    _opt(
        "gradient_accumulation_fusion",
        bool | None,
        None,
        "--gradient-accumulation-fusion/--no-gradient-accumulation-fusion",
        help="Weight-gradient GEMMs accumulate into the stored gradients (Megatron-LM's default since 2022); "
        "without it each micro-batch adds its gradients in a kernel of its own (PyTorch autograd, "
        "Megatron-LM before 2022). Default: the stack's.",
    ),
]
TOP = [
    _text("top", "How many layouts to show.", "INT", default="5"),
    _flag(
        "explore",
        "Rank every layout by its predicted step time alone; by default the layouts inside the region the "
        "stack's published runs validate (sharding across nodes, EP, CP, micro-batch) rank first.",
    ),
]
PLOT = [
    _opt(
        "plot",
        Path | None,
        None,
        help="Also draw every fitting layout (step time vs memory) to this .svg (needs the 'plot' extra).",
        metavar="PATH",
    ),
    _flag("force", "Replace an existing --plot file."),
]


@app.command("step")
@command(
    MODEL,
    GPUS,
    STEP_LAYOUT,
    MICRO_BATCH,
    BATCH,
    CLUSTER,
    HARDWARE,
    STACK,
    DTYPE,
    TRAINING_STATE,
    STACK_CAUSAL,
    OVERLAP,
    FINETUNE,
    OUTPUT,
)
def step_command(**options: Any) -> None:
    """One training step: time with its breakdown, tokens/s, predicted MFU and HFU, memory per GPU.

    Matmuls at an achievable rate plus their memory traffic, TP/PP/DP/EP comm on the cluster's fabrics,
    the pipeline bubble.
    """
    from napkin import api

    run(api.step, options)


@app.command("plan")
@command(
    MODEL,
    GPUS,
    BATCH,
    CLUSTER,
    HARDWARE,
    STACK,
    DTYPE,
    TRAINING_STATE,
    STACK_CAUSAL,
    OVERLAP,
    FINETUNE,
    TOP,
    PLOT,
    OUTPUT,
)
def plan_command(**options: Any) -> None:
    """The fastest parallel layouts that fit: TP/PP/CP/EP/DP, interleave, micro-batch, recompute, ZeRO.

    Every valid layout is scored by the same model as 'napkin step'; those inside the region the stack's
    published runs validate rank first (--explore: all by step time), and the top ones are shown.
    """
    from napkin import api
    from napkin.results.plot import write_plan_svg

    run_with_plot(api.plan, options, write_plan_svg)


@app.command("calibrate")
def calibrate_command(
    runs_file: Annotated[
        Path, typer.Argument(metavar="RUNS", help="YAML file of measured runs (see the README's example).")
    ],
    stack: Annotated[str | None, typer.Option("--stack", metavar="NAME", help="Stack to start from.")] = None,
    name: Annotated[str | None, typer.Option("--name", metavar="NAME", help="Stack to write.")] = None,
    fit: Annotated[
        str | None,
        typer.Option("--fit", metavar="NAMES", help="Values to fit, comma-separated (default matmul_efficiency)."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace your stack of that name.")] = False,
    as_json: JsonOpt = False,
    explain: ExplainOpt = False,
) -> None:
    """Fit a few of a stack's values to your measured runs; write them as a stack of your own.

    Prints each run's error before and after, and with 3 runs or more the leave-one-out error.
    """
    from napkin import api

    run(
        api.calibrate,
        {
            "runs_file": runs_file,
            "stack": stack,
            "name": name,
            "fit": fit,
            "force": force,
            "json": as_json,
            "explain": explain,
        },
    )


__all__ = ["app"]
