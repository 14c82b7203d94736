"""Inference commands: inference, kv-cache. Each calls one ``napkin.api`` function."""

from __future__ import annotations

from typing import Any

import typer

from napkin.cli.common import run
from napkin.cli.options import HARDWARE, MODEL, OUTPUT, _flag, _text, command

app = typer.Typer()

#: The model options inference needs: the sequence length is --context here, not --seq.
SERVED = [p for p in MODEL if p.name != "seq"]
KV = [
    _text("context", "Tokens per sequence (prompt + output; 32k = 32768); default the model's.", "LENGTH"),
    _text("batch", "Concurrent sequences.", "INT", "--batch", "-b", default="1"),
    _text("kv_dtype", "KV-cache element type: bf16, fp16, fp8, int8, fp4 (NVFP4), fp32.", "DTYPE", default="bf16"),
    _flag("paged", "Round each sequence's cache up to whole blocks (vLLM: 16 tokens)."),
    _text("block_size", "Paged block size in tokens (implies --paged).", "INT"),
]
#: The engine and its formats, shared by inference, traffic and serve-plan.
STACK = [
    _text(
        "stack", "Serving engine: vllm, sglang, tensorrt-llm, gpt-fast, ideal (the roofline).", "NAME", default="vllm"
    ),
    _text("stack_file", "A serving stack YAML file instead of a named one.", "PATH"),
    _text("efficiency", "Fraction of dense peak the matmuls reach (default: the stack's, per phase).", "FRACTION"),
    _text(
        "bandwidth",
        "HBM bandwidth: datasheet, measured ('napkin bench memory --save') or a figure.",
        "BW",
        default="datasheet",
    ),
    _text(
        "reserve", "Memory kept free per GPU, replacing the stack's rule: bytes (4GB) or a fraction.", "BYTES|FRACTION"
    ),
    _text("chunk", "Token budget of one engine step (default: the stack's max_num_batched_tokens).", "INT"),
]
SERVE = [
    _text("gpus", "G: number of GPUs.", "COUNT", "--gpus", "-G", default="1"),
    _text("tensor_parallel", "TP degree of one replica (default all GPUs).", "INT", "--tensor-parallel", "-t"),
    _text("prompt", "Prompt tokens (default context − output).", "LENGTH"),
    _text("output", "Generated tokens (default 512, or what context leaves).", "LENGTH"),
    _text("weights", "Weight format: bf16, fp16, fp8, int8, int4, nvfp4, mxfp4.", "FORMAT", default="bf16"),
    _text("group_size", "Weights per fp16 scale for int8/int4 (GPTQ/AWQ group).", "INT", default="128"),
    _text("price", "USD per GPU-hour (default: the profile's).", "USD"),
]


@app.command("inference")
@command(SERVED, KV, SERVE, STACK, HARDWARE, OUTPUT)
def inference_command(**options: Any) -> None:
    """Serving a model as an engine runs it: memory, KV capacity, TTFT, decode step, the batch whole, $/1M."""
    from napkin import api

    run(api.inference, options)


@app.command("kv-cache")
@command(
    SERVED,
    KV,
    [
        _text(
            "tensor_parallel",
            "TP degree (KV heads split, then replicated).",
            "INT",
            "--tensor-parallel",
            "-t",
            default="1",
        )
    ],
    OUTPUT,
)
def kv_cache_command(**options: Any) -> None:
    """KV-cache bytes: 2·L·n_kv·d_h per token (MLA: L·(d_c + d_h^R)), × context × batch."""
    from napkin import api

    run(api.kv_cache, options)


__all__ = ["app"]
