"""Inference commands: inference, kv-cache. Each calls one ``napkin.api`` function."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from napkin.cli.common import run, run_with_plot
from napkin.cli.options import HARDWARE, MODEL, OUTPUT, _flag, _opt, _text, command, deprecated

app = typer.Typer()

#: The model options inference needs: the sequence length is --context here, not --seq.
SERVED = [p for p in MODEL if p.name != "seq"]
KV = [
    _text("context", "Tokens per sequence (prompt + output; 32k = 32768); default the model's.", "LENGTH"),
    _text("batch", "Concurrent sequences.", "INT", "--batch", default="1"),
    deprecated("-b", "batch", "--batch"),  # -b is the training commands' --micro-batch
    _text("kv_dtype", "KV-cache element type: bf16, fp16, fp8, int8, fp4 (NVFP4), fp32.", "DTYPE", default="bf16"),
    _flag("paged", "Round each sequence's cache up to whole blocks (vLLM: 16 tokens)."),
    _text("block_size", "Paged block size in tokens (implies --paged).", "INT"),
]
#: Weight format, its scale group and the price: the same flags on inference and traffic.
WEIGHTS = [
    _text("weights", "Weight format: bf16, fp16, fp8, int8, int4, nvfp4, mxfp4.", "FORMAT", default="bf16"),
    _text("group_size", "Weights per fp16 scale for int8/int4 (GPTQ/AWQ group).", "INT", default="128"),
    _text("price", "USD per GPU-hour (default: the profile's).", "USD"),
]
STACK_NAME = [
    _text(
        "stack",
        "Serving engine: vllm (default), sglang, tensorrt-llm (0.17, TensorRT engines), tensorrt-llm-pytorch, "
        "gpt-fast, ideal (the roofline).",
        "NAME",
    ),
    _text("stack_file", "A serving stack YAML file instead of a named one.", "PATH"),
]
#: The engine and its formats, shared by inference, traffic and serve-plan.
STACK = [
    *STACK_NAME,
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
    _text("gpus", "G: number of GPUs (default one TP group: --tensor-parallel, else 1).", "COUNT", "--gpus", "-G"),
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


#: The requests: rate, lengths and how the run is sampled.
LOAD = [
    _text("rate", "Requests per second offered (Poisson): 20, 20/s, 1200/min.", "RATE"),
    _text(
        "concurrency", "Instead of --rate: N clients, each sending its next request on a reply (closed loop).", "INT"
    ),
    _text(
        "prompt", "Prompt tokens: 1024 (fixed), 100..2000 (uniform) or @FILE (histogram: 'length weight').", "LENGTHS"
    ),
    _text("output", "Output tokens: fixed, LOW..HIGH or @FILE, as --prompt.", "LENGTHS"),
    _text("requests", "Requests simulated (per scheduler).", "INT", default="2000"),
    _text("seed", "Seed of arrivals and lengths (the run is deterministic).", "INT", default="0"),
    _text("percentiles", "Latency percentiles to print, each in (0, 100).", "LIST", default="50,90,99"),
]
LAYOUT = [
    _text("gpus", "G: GPUs, replicas = G / (TP × PP) (default one replica: TP × PP).", "COUNT", "--gpus", "-G"),
    _text("tensor_parallel", "TP degree of one replica (default: G / PP).", "INT", "--tensor-parallel", "-t"),
    _text("pipeline_parallel", "PP stages of one replica (micro-batches in flight).", "INT", default="1"),
    deprecated("-p", "pipeline_parallel", "--pipeline-parallel"),  # -p is the training commands' --precision
    _text("expert_parallel", "EP: MoE experts split over this many GPUs, 1 or the replica's TP (all-to-all).", "INT"),
    _flag("dp_attention", "MoE: data-parallel attention (each GPU its own sequences and KV), EP experts."),
]
FORMATS = [
    *WEIGHTS,
    next(p for p in KV if p.name == "kv_dtype"),
    _text("max_num_seqs", "Sequences running at once (default: the stack's).", "INT"),
    _text("prefix_hit_rate", "Share of prompt tokens found in the prefix cache.", "FRACTION"),
    _text("speculative_tokens", "Draft tokens per step (speculative decoding / MTP).", "INT", default="0"),
    _text("acceptance", "Per-token acceptance rate of the draft (with --speculative-tokens).", "FRACTION"),
    _text("draft_params", "Parameters of the draft model or MTP head: its passes are costed (7B, 77M).", "COUNT"),
]
SLO = [
    _text(f"{m}_p{q}", f"SLO: {label} at P{q} (a duration: 2s, 100ms).", "TIME")
    for m, label in (("ttft", "time to first token"), ("tpot", "time per output token"), ("e2e", "request latency"))
    for q in (50, 90, 99)
]


@app.command("traffic")
@command(SERVED, LOAD, LAYOUT, FORMATS, STACK, SLO, HARDWARE, OUTPUT)
def traffic_command(**options: Any) -> None:
    """Requests at a rate through the engine's scheduler: throughput, TTFT/TPOT/e2e percentiles, SLO and max rate."""
    from napkin import api

    run(api.traffic, options)


PLAN = [
    _text("rate", "Requests per second to serve (Poisson): 20, 20/s, 1200/min.", "RATE"),
    _text("prompt", "Prompt tokens: 1024, LOW..HIGH or @FILE (histogram).", "LENGTHS"),
    _text("output", "Output tokens: 1024, LOW..HIGH or @FILE (histogram).", "LENGTHS"),
    _text(
        "hardware",
        "GPU profiles to consider, comma-separated (default: every profile with a price).",
        "NAMES",
        "--hardware",
        "-H",
    ),
    *STACK_NAME,
    _text("weights", "Only this weight format (default: every format the GPU runs fast).", "FORMAT"),
    _text("kv_dtype", "Only this KV-cache type (default: bf16 and fp8).", "DTYPE"),
    _text(
        "price", "USD per GPU-hour by profile: h100=3.5,b200=6 (adds or replaces the profiles' prices).", "NAME=USD,…"
    ),
    _text("max_gpus", "Largest replica (TP × PP GPUs).", "INT", default="8"),
    _text("requests", "Requests simulated per evaluation.", "INT", default="600"),
    _text("seed", "Seed of arrivals and lengths.", "INT", default="0"),
    _text("top", "Configurations to show.", "INT", default="5"),
    _opt("plot", Path | None, None, help="Also draw the cost–latency frontier to this .svg (needs the 'plot' extra)."),
    _flag("force", "Replace an existing --plot file."),
]


@app.command("serve-plan")
@command(SERVED, PLAN, SLO, OUTPUT)
def serve_plan_command(**options: Any) -> None:
    """The cheapest deployments meeting an SLO at a request rate: GPUs, TP/PP/EP, formats, replicas, $/h, $/1M."""
    from napkin import api
    from napkin.results.plot import write_serve_plan_svg

    run_with_plot(api.serve_plan, options, write_serve_plan_svg)
