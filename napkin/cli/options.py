"""Command-line options, declared once and shared by the commands (sqlite-utils' ``output_options`` idea).

An option's name is the keyword of the ``napkin.api`` function it feeds (``--tensor-parallel`` →
``tensor_parallel``), so a command is: collect the options, call the function, emit the result.
``command(*groups)`` gives a ``**kwargs`` function the parameters of the groups it names; typer reads
them from its signature.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from napkin.domain.choices import (
    BaseFormat,
    Dtype,
    Finetune,
    Fit,
    Mlp,
    Norm,
    Offload,
    Optimizer,
    Precision,
    Recompute,
    Sharding,
    TrainDtype,
)

Group = list[inspect.Parameter]


def _opt(name: str, kind: Any, default: Any, *flags: str, help: str, metavar: str | None = None) -> inspect.Parameter:
    flag = flags or ("--" + name.replace("_", "-"),)
    # Choices ignore case, as profile and preset names do (--dtype BF16 = bf16).
    info = typer.Option(
        *flag, help=help, metavar=metavar, show_default=default not in (None, False), case_sensitive=False
    )
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[kind, info])


def _text(name: str, help: str, metavar: str, *flags: str, default: str | None = None) -> inspect.Parameter:
    return _opt(name, str | None, default, *flags, help=help, metavar=metavar)


#: Spellings kept for one release, each printing a note: hidden option → (its flag, the keyword it sets, the
#: flag to write instead). ``common.run`` applies them.
DEPRECATED: dict[str, tuple[str, str, str]] = {}


def deprecated(flag: str, keyword: str, instead: str) -> inspect.Parameter:
    """A hidden ``flag`` that sets ``keyword`` as ``instead`` does, with a note saying to write ``instead``."""
    name = "deprecated_" + flag.lstrip("-").replace("-", "_")
    DEPRECATED[name] = (flag, keyword, instead)
    info = typer.Option(flag, hidden=True)
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[str | None, info])


def _flag(name: str, help: str) -> inspect.Parameter:
    return _opt(name, bool, False, help=help)


OUTPUT: Group = [
    _opt("json", bool, False, "--json", help="Print the result as JSON, in base units (FLOP, B, s)."),
    _opt("explain", bool, False, "--explain", help="Show the derivation: each formula, the numbers, its source."),
]
HARDWARE: Group = [
    _text(
        "hardware",
        "Hardware profile name or alias (see 'napkin hardware list'); default $NAPKIN_HARDWARE, else h100.",
        "NAME",
        "--hardware",
        "-H",
    ),
    _opt(
        "hardware_file",
        Path | None,
        None,
        help="Use this profile YAML file instead of a named profile.",
        metavar="PATH",
    ),
]
DTYPE: Group = [
    _opt(
        "dtype",
        Dtype,
        Dtype.bf16,
        help="Number format of the matmuls: their dense peak; in memory, fp8 keeps each linear input in the "
        "stack's bytes ('napkin stack show').",
    )
]
PARAMS: Group = [_text("params", "N: parameters, e.g. 70e9 or 70B.", "COUNT", "--params", "-N")]
TOKENS: Group = [_text("tokens", "D: training tokens, e.g. 15e12 or 15T.", "COUNT", "--tokens", "-D")]
GPUS: Group = [_text("gpus", "G: number of GPUs (devices).", "COUNT", "--gpus", "-G")]
DURATION: Group = [
    _text("days", "Wall-clock duration in days.", "NUMBER"),
    _text("hours", "Wall-clock duration in hours.", "NUMBER"),
]
MODEL: Group = [
    _text(
        "model",
        "Model: a preset (see 'napkin models'), a Hugging Face config.json or model folder, or a Hub id "
        "(org/name; needs the hf extra).",
        "NAME",
        "--model",
        "-m",
    ),
    _opt(
        "model_config",
        Path | None,
        None,
        help="A Hugging Face config.json or model folder (read locally).",
        metavar="PATH",
    ),
    _text(
        "seq",
        "s: sequence length in tokens (32k = 32768); a preset's training length by default, never a config's context.",
        "LENGTH",
    ),
    _text("layers", "L: transformer layers.", "INT"),
    _text("hidden", "d: model width.", "INT"),
    _text("heads", "a: attention (query) heads.", "INT"),
    _text("kv_heads", "Key/value heads (GQA; 1 = MQA); default = heads.", "INT"),
    _text("head_dim", "d_h: head dimension (default d/a).", "INT"),
    _text("ffn", "F: FFN inner width (default 4·d).", "INT"),
    _text("vocab", "V: vocabulary size.", "INT"),
    _opt("mlp", Mlp | None, None, help="gelu (2 matrices), swiglu or geglu (3)."),
    _opt("norm", Norm | None, None, help="layernorm, rmsnorm or layernorm_nobias (γ only, Cohere)."),
    _opt("dropout", bool | None, None, "--dropout/--no-dropout", help="Dropout layers (their masks are stored)."),
    _opt(
        "tied_embeddings",
        bool | None,
        None,
        "--tied-embeddings/--untied-embeddings",
        help="Input embedding shared with the output layer.",
    ),
    _text("experts", "MoE: routed experts per layer.", "INT"),
    _text("top_k", "MoE: experts each token is routed to.", "INT"),
]
RECOMPUTE: Group = [
    _opt(
        "recompute",
        Recompute,
        Recompute.none,
        help="Activation recomputation: none, selective (attention scores), full (one extra forward).",
    ),
]
CAUSAL: Group = [_flag("causal", "Count only the unmasked keys: s/2, or W − W²/(2s) in a sliding window.")]
#: step, plan, train-time --mfu predicted, memory, max-model: the software stack, and the switches it sets
STACK: Group = [
    _text(
        "stack", "Software stack profile (see 'napkin stack list'); default $NAPKIN_STACK, else megatron-core.", "NAME"
    ),
    _opt("stack_file", Path | None, None, help="Use this stack YAML file instead of a named stack.", metavar="PATH"),
]
STACK_CAUSAL: Group = [
    _opt(
        "causal",
        bool | None,
        None,
        "--causal/--no-causal",
        help="Causal mask: count (and, with FlashAttention, compute) only the unmasked keys of "
        "attention; default the stack's (train-time without --mfu predicted: every score).",
    )
]
LAYOUT: Group = [
    _text("tensor_parallel", "TP: tensor-parallel degree.", "INT", "--tensor-parallel", "-t", default="1"),
    _text("pipeline_parallel", "PP: pipeline stages.", "INT", default="1"),
    _text("data_parallel", "DP: replicas (default GPUs / (TP·PP·CP)).", "INT"),
    _text("context_parallel", "CP: each sequence split over this many GPUs.", "INT", default="1"),
    _text("expert_parallel", "EP: MoE experts split over this many GPUs.", "INT", default="1"),
    _text("interleave", "v: model chunks per pipeline rank (interleaved schedule).", "INT", default="1"),
    _opt(
        "sequence_parallel",
        bool | None,
        None,
        "--sequence-parallel/--no-sequence-parallel",
        help="SP: shard norm/dropout activations over the TP group; default on with TP > 1 where the stack "
        "offers it (Megatron-Core, torchtitan), as their users run.",
    ),
    _opt(
        "sharding",
        Sharding | None,
        None,
        help="none (DDP) | zero1 | zero2 | zero3 | fsdp (= zero3) | hsdp (FSDP within a scale-up domain, 8 GPUs "
        "of a DGX or the cluster's, replicated across domains); default the stack's (--stack); max-model: zero3 "
        "where the stack offers it.",
    ),
    _opt(
        "recompute",
        Recompute | None,
        None,
        help="Activation recomputation: none (default; full with --finetune qlora, as peft's recipe), selective "
        "(attention scores), full (one extra forward).",
    ),
    _opt("offload", Offload, Offload.none, help="Model states in CPU memory: none, optimizer, params."),
    _text(
        "activation_offload_layers",
        "k: the first k layers' saved activations copied to CPU memory and back (Megatron-Core "
        "cpu_offloading_num_layers; 0 ≤ k < layers, PP 1, no recompute); step pays the copies the compute "
        "cannot hide, over the device's host link.",
        "INT",
        default="0",
    ),
]
WORKLOAD: Group = [
    _text("micro_batch", "b: micro-batch size (sequences per GPU).", "INT", "--micro-batch", "-b", default="1"),
    deprecated("--batch", "micro_batch", "--micro-batch (-b)"),  # --batch is serving's concurrent sequences
    _text("global_batch", "B: global batch in sequences.", "INT"),
    _text("global_batch_tokens", "B in tokens, binary k/M as batch sizes are quoted (4M = 512 × 8192).", "TOKENS"),
    _opt(
        "flash_attention",
        bool | None,
        None,
        "--flash-attention/--no-flash-attention",
        help="FlashAttention: no s×s scores stored; default the stack's (--stack).",
    ),
]


FINETUNE: Group = [
    _opt(
        "finetune",
        Finetune,
        Finetune.full,
        help="full (every parameter) | lora (adapters, frozen 16-bit base) | qlora (adapters, frozen NF4 base).",
    ),
    _text("lora_rank", "r: adapter rank (default 16).", "INT"),
    _text(
        "lora_targets",
        "Linear layers given adapters: all-linear (default), attention, mlp, or names (q_proj,v_proj or q,v).",
        "NAMES",
    ),
    _opt("base_format", BaseFormat | None, None, help="Frozen base weights: bf16, int8, nf4 (default by --finetune)."),
    _opt(
        "double_quant",
        bool | None,
        None,
        "--double-quant/--no-double-quant",
        help="NF4 double quantization (QLoRA §3); default on for an NF4 base.",
    ),
    _flag("paged_optimizer", "bitsandbytes paged optimizer: its states spill to CPU memory under pressure."),
    _opt(
        "adapter_dtype",
        TrainDtype | None,
        None,
        help="Adapters and their gradients: fp32 (default, peft) or bf16 (Dettmers' qlora.py).",
    ),
    _opt(
        "embedding_dtype",
        TrainDtype | None,
        None,
        help="Embeddings, LM head, norms: default fp32 beside a quantized base (peft "
        "prepare_model_for_kbit_training), else bf16; bf16 as qlora.py.",
    ),
]


#: train-time: no --finetune is pretraining (the under-training warning applies); its recomputation defaults by it.
TRAIN_FINETUNE: Group = [
    _opt(
        "finetune",
        Finetune | None,
        None,
        help="full | lora | qlora fine-tuning (default: pretraining). lora/qlora: C = (4N + 6T)·D.",
    ),
    *FINETUNE[1:3],
]
TRAIN_RECOMPUTE: Group = [
    _opt(
        "recompute",
        Recompute | None,
        None,
        help="Activation recomputation: none (default; full with --finetune qlora), selective, full.",
    ),
]


#: Optimizer, precision (mixed by default, as every training stack runs) and reserve.
TRAINING_STATE: Group = [
    _opt(
        "optimizer",
        Optimizer,
        Optimizer.adamw,
        "--optimizer",
        "-o",
        metavar="NAME",
        help="adamw, adam, sgd, adafactor, lion, adam-8bit, muon, … (see 'napkin optimizers').",
    ),
    _opt(
        "precision",
        Precision,
        Precision.mixed,
        "--precision",
        "-p",
        metavar="REGIME",
        help="fp32 | mixed (16 B Adam) | mixed-fp32-grads (18 B) | bf16.",
    ),
    _text("reserve", "Memory kept free per GPU: bytes (4GB) or a fraction (0.1, 10%).", "BYTES|FRACTION", default="0"),
]
FIT: Group = [_opt("fit", Fit, Fit.epoch, help="Loss-law constants: epoch (refit) or hoffmann (as published).")]


def command(*groups: Group) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a ``def f(**kwargs)`` command the parameters of ``groups`` (after its own, if any)."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        own = [p for p in inspect.signature(func, eval_str=True).parameters.values() if p.kind is not p.VAR_KEYWORD]
        params = own + [p for group in groups for p in group]
        func.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        func.__annotations__ = {p.name: p.annotation for p in params}
        return func

    return decorate


__all__ = ["command"]
