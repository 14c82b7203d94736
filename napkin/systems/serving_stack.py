"""Serving stacks: what an inference engine achieves and what memory it keeps.

A stack profile is a YAML file (``stacks/*.yaml``, shipped as ``napkin/stacks``) with a ``serving:`` section
that this module validates. Its numbers are of two kinds, and ``sources`` says which:

* the engine's own defaults (memory fraction, block size, token budget, ``max_num_seqs``), cited to the
  engine's repository file at a version;
* achieved rates (fractions of the datasheet's HBM bandwidth and dense peak, a fixed cost per engine step)
  fitted on the *calibration* rows of ``examples/serving_runs.yaml``; the README's serving validation
  table reports their error on the *validation* rows the fit never saw.

Engines size the KV cache by one of four rules (``memory_rule``), per GPU:

* ``total-fraction`` (vLLM ``gpu_memory_utilization``): KV = fraction × device memory − weights − the peak
  activations of a profiling pass of ``max_num_batched_tokens`` tokens − memory outside torch (cuBLAS, NCCL);
  CUDA graphs are captured afterwards, out of the remaining (1 − fraction);
* ``static-fraction`` (SGLang ``mem_fraction_static``): KV = fraction × device memory − weights − runtime;
* ``free-fraction`` (TensorRT-LLM ``free_gpu_memory_fraction``): KV = fraction × (device memory − weights −
  activations − runtime − CUDA graphs), a share of what is free once the engine is loaded;
* ``static`` (gpt-fast): the cache the batch asks for; everything but weights and runtime is free.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import ConfigDict, Field

from napkin.domain.base import Record
from napkin.errors import UsageError
from napkin.systems.profiles import Bytes

if TYPE_CHECKING:
    from napkin.systems.stack import Stack

MemoryRule = Literal["total-fraction", "static-fraction", "free-fraction", "static"]
DEFAULT_STACK = "vllm"

_STRICT = ConfigDict(extra="forbid", frozen=True)


class Phase(Record):
    """Achieved fractions of the datasheet in one phase of serving."""

    model_config = _STRICT
    bandwidth: float = Field(gt=0, le=1, description="fraction of HBM bandwidth reached reading weights")
    compute: float = Field(gt=0, le=1, description="fraction of the dense peak the matmuls reach")


class DeviceDefaults(Record):
    """Scheduler defaults an engine picks for smaller (or named) devices."""

    model_config = _STRICT
    below_bytes: float | None = Field(default=None, gt=0, description="devices with less memory than this")
    names: list[str] = Field(default_factory=list, description="or whose profile name contains one of these")
    max_num_batched_tokens: int = Field(gt=0)
    max_num_seqs: int = Field(gt=0)


class ServingStack(Record):
    """One inference engine at one version: achieved rates, memory rules, scheduler defaults."""

    model_config = _STRICT

    engine: str = Field(min_length=1, description="vllm, sglang, tensorrt-llm, gpt-fast, ideal")
    # --- achieved rates ---------------------------------------------------------------------------
    prefill: Phase
    decode: Phase
    attention_bandwidth: float = Field(
        gt=0, le=1, description="fraction of HBM bandwidth the decode attention kernel reaches reading the KV cache"
    )
    tp_allreduce: Literal["custom", "nccl"] = Field(
        default="nccl",
        description="how the engine all-reduces TP activations: 'custom' (a peer-to-peer one-/two-shot kernel "
        "below 8 MiB, NCCL above: vLLM, SGLang, TensorRT-LLM) or 'nccl' (every all-reduce through NCCL)",
    )
    collective_efficiency: float = Field(
        default=1.0,
        gt=0,
        le=1,
        description="share of the cluster model's collective speed the engine's NCCL all-reduces reach "
        "(the custom kernel's time is modelled, napkin.engines.tp_allreduce)",
    )
    request_seconds: float = Field(
        default=0.0,
        ge=0,
        lt=10,
        description="latency a request spends outside the engine loop (API server, "
        "tokenizer): added to TTFT and end-to-end, not to the steps",
    )
    iteration_seconds: float = Field(
        ge=0, lt=1, description="fixed cost of one engine step: scheduling, sampling, launches CUDA graphs leave"
    )
    host_seconds_per_sequence: float = Field(
        default=0.0,
        ge=0,
        lt=0.01,
        allow_inf_nan=False,
        description="host work per decoding sequence per step (Python scheduler, request updates, sampling "
        "bookkeeping) run while the GPU computes the previous step (TensorRT-LLM's overlap scheduler): a step takes "
        "max(GPU time, sequences × this)",
    )
    matmul_compute: dict[
        Literal["fp4", "fp8", "bf16", "fp16"], Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]
    ] = Field(
        default_factory=dict,
        description="compute dtype (fp4, fp8) → fraction of that dtype's dense peak the matmuls reach, replacing "
        "prefill.compute and decode.compute for checkpoints that run it",
    )
    expert_compute: float = Field(
        default=1.0,
        gt=0,
        le=1,
        allow_inf_nan=False,
        description="share of the matmul rate (prefill.compute, decode.compute, matmul_compute) that an MoE "
        "model's expert GEMMs reach: grouped GEMMs over each expert's few tokens and narrow weights, with the "
        "tokens permuted to their experts and back",
    )
    tp_step_seconds: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        description="fixed cost of one engine step of a TP group (> 1 GPU) beyond one GPU's: handing the step's "
        "inputs to every rank and waiting for the slowest",
    )
    tp_prefill_seconds: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        allow_inf_nan=False,
        description="cost of a TP group's (> 1 GPU) step that carries prompt tokens beyond a decode step's: "
        "decode steps replay a CUDA graph, prefill-carrying steps launch every kernel eagerly on every rank and "
        "each all-reduce waits for the slowest rank's launches",
    )
    allreduce_seconds: float = Field(
        default=0.0,
        ge=0,
        lt=0.001,
        description="GPU seconds each TP all-reduce waits beyond its kernel model: its barriers wait for the "
        "slowest rank, so the cost goes with the number of all-reduces (2 per layer), not once per step",
    )
    overlap_schedule: bool = Field(
        default=False,
        description="the host schedules a step while the GPU runs the previous one, so a step costs "
        "max(iteration + TP step cost, GPU time) (SGLang 0.4's overlap scheduler)",
    )
    # --- memory -----------------------------------------------------------------------------------
    memory_rule: MemoryRule
    memory_fraction: float = Field(gt=0, le=1, description="the engine's default fraction (see memory_rule)")
    memory_fraction_by_tp: dict[int, float] = Field(
        default_factory=dict, description="TP size → fraction where the default depends on it (SGLang)"
    )
    runtime_bytes: Bytes | None = Field(default=None, description="CUDA context and memory outside torch, per GPU")
    nccl_bytes: Bytes | None = Field(default=None, description="NCCL and custom all-reduce buffers per GPU, TP > 1")
    cuda_graph_bytes: Bytes | None = Field(default=None, description="the CUDA-graph pool per GPU")
    sampler_logits: bool = Field(
        default=False, description="the profiling pass also holds fp32 logits for max_num_seqs sequences"
    )
    # --- scheduler --------------------------------------------------------------------------------
    block_size: int = Field(gt=0, le=4096, description="tokens per KV block (page)")
    max_num_batched_tokens: int = Field(gt=0, description="token budget of one step (chunked prefill)")
    max_num_seqs: int = Field(gt=0, description="sequences running at once")
    mixed_prefill: bool = Field(
        default=True, description="prompt chunks share a step with decoding (False: a prefill step pauses decode)"
    )
    reserve_output: bool = Field(
        default=False, description="admission reserves KV for prompt + whole output (TRT-LLM GUARANTEED_NO_EVICT)"
    )
    reserve_peak: bool = Field(
        default=False,
        description="admission also reserves the running sequences' outputs, SGLang's check for ignore_eos "
        "requests with the radix cache off (napkin.engines.traffic.peak_fits)",
    )
    device_defaults: DeviceDefaults | None = Field(
        default=None, description="the scheduler defaults on smaller devices (vLLM: below 70 GiB, or A100)"
    )

    def for_device(self, name: str, memory_bytes: float) -> ServingStack:
        """The stack as the engine configures itself on a device (its smaller-device defaults where they apply)."""
        d = self.device_defaults
        if d is None:
            return self
        small = (d.below_bytes is not None and memory_bytes < d.below_bytes) or any(n in name for n in d.names)
        if not small:
            return self
        return self.model_copy(
            update={"max_num_batched_tokens": d.max_num_batched_tokens, "max_num_seqs": d.max_num_seqs}
        )

    def at_dtype(self, dtype: str) -> ServingStack:
        """The stack as it runs matmuls of ``dtype``: its fraction of that dtype's peak where it has one."""
        if dtype not in self.matmul_compute:
            return self
        rate = self.matmul_compute[dtype]
        return self.model_copy(
            update={
                "prefill": self.prefill.model_copy(update={"compute": rate}),
                "decode": self.decode.model_copy(update={"compute": rate}),
            }
        )

    def fraction(self, tensor: int) -> float:
        """The memory fraction at TP ``tensor``: the largest tabled TP not above it, else the default."""
        below = [t for t in self.memory_fraction_by_tp if t <= tensor]
        return self.memory_fraction_by_tp[max(below)] if below else self.memory_fraction

    def kv_budget(
        self, device: float, weights: float, activations: float, tensor: int, fraction: float | None = None
    ) -> float:
        """Bytes per GPU the engine gives the KV cache (the module docstring has each rule)."""
        f = self.fraction(tensor) if fraction is None else fraction
        other = (self.runtime_bytes or 0.0) + ((self.nccl_bytes or 0.0) if tensor > 1 else 0.0)
        if self.memory_rule == "total-fraction":
            return f * device - weights - activations - other
        if self.memory_rule == "static-fraction":
            return f * device - weights - other
        if self.memory_rule == "free-fraction":
            return f * (device - weights - activations - other - (self.cuda_graph_bytes or 0.0))
        return device - weights - other


def get_stack(name: str | None = None, stack_file: str | Path | None = None) -> Stack:
    """A stack with serving values, by name or alias from the one stack catalog (``napkin.systems.stack``), or
    from a file; the default is vLLM. A training-only stack is bad input here."""
    from napkin.systems.stack import resolve

    if name is not None and not str(name).strip():
        raise UsageError("stack: an empty name; give a serving engine such as vllm", field="stack")
    found = resolve(DEFAULT_STACK if name is None and stack_file is None else name, stack_file, side="serving").profile
    serving_of(found)
    return found


def serving_of(stack: Stack) -> ServingStack:
    """A stack's serving values; a training-only stack is bad input for a serving question."""
    if stack.serving is None:
        raise UsageError(
            f"stack: {stack.name!r} has no serving values (it is for training); serving engines: "
            f"{', '.join(stack_names())}",
            field="stack",
        )
    return stack.serving


def get_serving(name: str | None = None, stack_file: str | Path | None = None) -> ServingStack:
    """The serving values of a stack (``get_stack(...).serving``, never None)."""
    return serving_of(get_stack(name, stack_file))


def stack_names() -> list[str]:
    """The names of the stacks that have serving values."""
    from napkin.systems.profiles import catalog_of
    from napkin.systems.stack import STACKS

    return [loaded.profile.name for loaded in catalog_of(STACKS).visible() if loaded.profile.serving is not None]
