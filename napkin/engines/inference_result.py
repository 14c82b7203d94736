"""A serving estimate's settings (the engine and the user's overrides) and ``napkin inference``'s result."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from napkin.domain.base import Record
from napkin.engines.kv_cache import short_source
from napkin.engines.serving_formats import GROUP_SIZE, KvDtype, WeightFormat
from napkin.results.result import Result
from napkin.systems.serving_stack import Phase, ServingStack
from napkin.units import format_bytes, format_duration

#: Tokens one forward pass processes at once (vLLM ``max_num_batched_tokens``) for the activation workspace.
CHUNK_TOKENS = 8192
#: Default fraction of each GPU's memory left unused (vLLM ``gpu_memory_utilization`` = 0.9).
DEFAULT_RESERVE = 0.1
#: Default fraction of the dense peak that prefill and compute-bound decode reach (an assumption; see --explain).
DEFAULT_EFFICIENCY = 0.5


class Serving(Record):
    """Settings of a serving estimate: the engine (stack), formats, paging, and what the user overrides."""

    stack_name: str = "ideal"
    stack: ServingStack | None = Field(default=None, description="None: the ideal roofline (no engine)")
    weights_format: WeightFormat = WeightFormat.bf16
    group_size: int = Field(default=GROUP_SIZE, gt=0, description="weights per scale (int8/int4 weight-only)")
    kv_dtype: KvDtype = KvDtype.bf16
    block_size: int | None = None
    efficiency: float | None = Field(default=None, gt=0, le=1, description="overrides the stack's compute fractions")
    reserve_bytes: float | None = Field(default=None, ge=0, description="overrides the stack's memory rule")
    chunk_tokens: int | None = Field(default=None, gt=0, description="overrides max_num_batched_tokens")
    bandwidth: float | None = Field(default=None, gt=0, description="a measured HBM bandwidth (bench memory)")
    bandwidth_source: str = "datasheet"
    rates_source: str = Field(default="", description="where the stack's achieved rates come from")
    memory_source: str = Field(default="", description="where the stack's memory rule comes from")
    host_source: str = Field(default="", description="where the stack's host seconds per sequence come from")
    expert_source: str = Field(default="", description="where the stack's MoE expert GEMM share comes from")
    allreduce_source: str = Field(default="", description="where the stack's wait per TP all-reduce comes from")
    tp_prefill_source: str = Field(default="", description="the source of the cost of a TP prompt step")
    price_per_hour: float | None = None

    def resolved(self) -> ServingStack:
        """The stack with the user's overrides applied."""
        base = self.stack if self.stack is not None else IDEAL
        update: dict[str, Any] = {}
        if self.efficiency is not None:
            update["prefill"] = base.prefill.model_copy(update={"compute": self.efficiency})
            update["decode"] = base.decode.model_copy(update={"compute": self.efficiency})
            update["matmul_compute"] = {}  # the user's fraction, whatever the dtype
        if self.chunk_tokens is not None:
            update["max_num_batched_tokens"] = self.chunk_tokens
        return base.model_copy(update=update) if update else base


#: The roofline at datasheet rates with 10 % of memory kept free: napkin's view without an engine.
IDEAL = ServingStack(
    engine="ideal",
    decode=Phase(bandwidth=1.0, compute=DEFAULT_EFFICIENCY),
    prefill=Phase(bandwidth=1.0, compute=DEFAULT_EFFICIENCY),
    attention_bandwidth=1.0,
    iteration_seconds=0.0,
    memory_rule="total-fraction",
    memory_fraction=1 - DEFAULT_RESERVE,
    block_size=1,
    max_num_batched_tokens=CHUNK_TOKENS,
    max_num_seqs=1 << 16,
)


class InferenceResult(Result):
    """``napkin inference``: memory, fit, prefill/decode time, throughput and cost of serving a model."""

    title: ClassVar[str] = "Inference"
    headline: ClassVar[tuple[str, ...]] = ("max_batch", "decode_seconds_per_token", "ttft_seconds")

    model: str
    hardware: str
    gpus: int
    tensor_parallel: int
    replicas: int
    weights_format: WeightFormat
    kv_dtype: KvDtype
    context: int
    context_source: str = Field(
        default="given", description="where context came from: given, prompt + output, or the model's own"
    )
    prompt: int
    output: int
    batch: int
    params: float
    active_params: float
    weights_bytes: float = Field(description="all weights, one replica")
    weights_bytes_per_gpu: float
    kv_bytes_per_token: float
    kv_bytes_per_sequence: float
    kv_cache_bytes: float = Field(description="batch × sequence, one replica (all its GPUs)")
    kv_cache_bytes_per_gpu: float
    workspace_bytes_per_gpu: float
    reserve_bytes_per_gpu: float
    memory_bytes_per_gpu: float
    capacity_source: str = Field(default="datasheet", description="which capacity figure the fit used")
    model_context: int | None = Field(default=None, description="the longest sequence the model was built for")
    headroom_bytes_per_gpu: float = Field(description="capacity − reserve − weights − workspace − KV of the batch")
    fits: bool
    max_batch: int = Field(description="sequences of `context` tokens that fit per replica")
    max_context: int = Field(description="tokens per sequence that fit at `batch`")
    efficiency: float
    stack: str = Field(description="the serving stack whose rates and memory rules were used")
    kv_capacity_tokens: int = Field(description="tokens of KV cache the engine allocates per replica")
    max_concurrency: float = Field(
        description="KV capacity / context (windowed layers at their window: budget / KV per sequence)"
    )
    prefill_flops: float
    ttft_seconds: float = Field(description="prefill of one prompt, alone on the replica")
    prefill_seconds: float = Field(description="prefill of the whole batch, in chunks of the token budget")
    decode_seconds: float = Field(description="all output tokens of the batch, decoded together")
    batch_seconds: float = Field(description="the batch from first prompt token to last output token")
    prefill_tokens_per_second: float = Field(description="prompt tokens / prefill_seconds, one replica")
    decode_tokens_per_second: float = Field(description="output tokens / decode_seconds, one replica")
    total_tokens_per_second: float = Field(description="(prompt + output tokens) / batch_seconds, one replica")
    decode_bytes_per_step: float = Field(description="per GPU: weights read + KV read at the mean length")
    decode_flops_per_step: float = Field(description="per GPU")
    decode_seconds_per_token: float = Field(description="one decode step of the batch")
    decode_floor_seconds: float = Field(description="batch 1: weights + one KV / bandwidth")
    decode_bound: str
    crossover_batch: int | None = Field(description="batch above which decode turns compute-bound")
    crossover_batch_weights_only: int = Field(description="the same, counting weight reads only (no KV)")
    communication: str
    tokens_per_second_per_user: float
    tokens_per_second: float = Field(description="output tokens/s of one replica at `batch`")
    tokens_per_second_per_gpu: float
    prefill_tokens_per_second_per_gpu: float
    request_seconds: float = Field(description="TTFT + output × decode step")
    price_per_hour: float | None
    usd_per_million_tokens: float | None = Field(description="output (decode) tokens")
    usd_per_million_input_tokens: float | None
    joules_per_output_token: float | None

    def heading(self) -> str:
        return f"Inference: {self.model} on {self.gpus} × {self.hardware} (TP {self.tensor_parallel}), {self.stack}"

    def capacity_line(self) -> str:
        """The engine's capacity as it logs it at start-up."""
        return (
            f"KV cache: {self.kv_capacity_tokens:,} tokens, "
            f"max concurrency {self.max_concurrency:,.2f}× at {self.context:,}"
        )

    def rows(self) -> list[tuple[str, str]]:
        rows = [
            ("context", f"{self.context:,} tokens per sequence ({short_source(self.context_source)})"),
            ("formats", f"{self.weights_format} weights, {self.kv_dtype} KV cache"),
            ("weights per GPU", format_bytes(self.weights_bytes_per_gpu)),
            (f"KV cache ({self.batch} × {self.context:,})", format_bytes(self.kv_cache_bytes_per_gpu)),
            ("workspace + reserve", format_bytes(self.workspace_bytes_per_gpu + self.reserve_bytes_per_gpu)),
            ("capacity", f"{format_bytes(self.memory_bytes_per_gpu)} per GPU, {self.capacity_source}"),
            ("headroom" if self.fits else "short by", format_bytes(abs(self.headroom_bytes_per_gpu))),
            ("engine capacity", self.capacity_line()),
            ("max batch at context", f"{self.max_batch} × {self.context:,} tokens"),
            (
                "max context at batch",
                f"{self.max_context:,} tokens × {self.batch}"
                + (" (the model's limit)" if self.max_context == self.model_context else ""),
            ),
        ]
        if not self.fits:
            rows.append(
                (
                    "speed",
                    "not estimated: this batch does not fit (see 'short by'; lower --batch or "
                    "--context, quantise with --weights/--kv-dtype, or add GPUs)",
                )
            )
            return rows
        rows += [
            (
                "TTFT",
                f"{format_duration(self.ttft_seconds)} (one {self.prompt:,}-token prompt alone"
                + (f"; the batch's last at {format_duration(self.prefill_seconds)})" if self.batch > 1 else ")"),
            ),
            ("decode step", f"{format_duration(self.decode_seconds_per_token)}, {self.decode_bound}"),
            ("decode floor", f"{format_duration(self.decode_floor_seconds)} (batch 1)"),
            (
                "crossover batch",
                ("none at this context" if self.crossover_batch is None else str(self.crossover_batch))
                + f" (weights alone: {self.crossover_batch_weights_only})",
            ),
            ("tokens/s per user", f"{self.tokens_per_second_per_user:,.1f}"),
            ("tokens/s", f"{self.tokens_per_second:,.0f} per replica, {self.tokens_per_second_per_gpu:,.0f} per GPU"),
            (
                f"batch of {self.batch}, whole",
                f"prefill {format_duration(self.prefill_seconds)} ({self.prefill_tokens_per_second:,.0f} tok/s), "
                f"decode {format_duration(self.decode_seconds)} ({self.decode_tokens_per_second:,.0f} tok/s), "
                f"{self.total_tokens_per_second:,.0f} tok/s in all",
            ),
            (
                "request latency",
                f"{format_duration(self.request_seconds)} (TTFT + {self.output - 1:,} steps"
                + (f" of the batch of {self.batch})" if self.batch > 1 else ")"),
            ),
        ]
        if self.usd_per_million_tokens is not None and self.usd_per_million_input_tokens is not None:
            rows.append(("$ per 1M input", f"${self.usd_per_million_input_tokens:,.3f}"))
            rows.append(("$ per 1M output", f"${self.usd_per_million_tokens:,.2f}"))
        if self.joules_per_output_token is not None:
            rows.append(("energy", f"{self.joules_per_output_token:.3g} J per output token (board power)"))
        return rows

    def caption(self) -> str:
        return (
            f"per GPU of one TP group; decode at mean length {self.prompt + self.output // 2:,}; "
            f"rates and memory rules of the {self.stack} stack; {self.communication}"
        )

    def extras(self) -> list[Any]:
        from napkin.results import render

        parts = [
            ("weights", self.weights_bytes_per_gpu),
            ("KV cache", self.kv_cache_bytes_per_gpu),
            ("workspace", self.workspace_bytes_per_gpu),
            ("reserve", self.reserve_bytes_per_gpu),
        ]
        return [render.bar(parts, self.memory_bytes_per_gpu)]
