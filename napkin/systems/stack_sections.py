"""The sections of a stack profile's ``training:`` values (attention, elementwise, overlap, collectives, fp8,
pipeline, parallelism, recomputation, ring attention, the validated region, memory): each a strict record whose
fields a stack states with a source (``napkin.systems.stack`` assembles them into ``Training``)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, model_validator

from napkin.domain.base import Record
from napkin.domain.choices import FULL_SHARD, Sharding
from napkin.systems.profiles import BytesOrZero

STRICT = ConfigDict(extra="forbid", frozen=True, validate_default=True)


Size = BytesOrZero  # a size a stack may state as none at all (0)
#: A share of a rate a stack reaches: at least 1 % (no stack runs slower than that; calibrate fits from 2 %).
Fraction = Annotated[float, Field(ge=0.01, le=1, allow_inf_nan=False)]
Share = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]


class AttentionKernel(StrEnum):
    materialized = "materialized"  # QKᵀ, softmax, A·V as separate kernels; the s×s scores in HBM
    sdpa = "sdpa"  # torch scaled_dot_product_attention (a flash or memory-efficient backend)
    flash2 = "flash2"  # FlashAttention-2
    flash3 = "flash3"  # FlashAttention-3 (Hopper)
    cudnn = "cudnn"  # cuDNN fused attention (Transformer Engine's default on Hopper)


class Schedule(StrEnum):
    one_f_one_b = "1f1b"
    interleaved = "interleaved"
    zero_bubble = "zero-bubble"
    dualpipe = "dualpipe"


class Attention(Record):
    """The attention core: which kernel, its share of the 16-bit dense peak, and whether it skips the masked
    half of a causal mask."""

    model_config = STRICT
    kernel: AttentionKernel
    forward_efficiency: Fraction = Field(description="forward FLOP/s / 16-bit dense peak (fused kernels only)")
    backward_efficiency: Fraction = Field(description="backward FLOP/s / 16-bit dense peak (2.5× the forward FLOPs)")
    causal: bool = Field(description="causal mask by default, and the kernel skips the masked blocks")
    devices: dict[str, tuple[Fraction, Fraction]] = Field(
        default_factory=dict, description="hardware profile name → (forward, backward) efficiency on that device"
    )

    def efficiency(self, hardware: str) -> tuple[float, float]:
        """(forward, backward) share of the 16-bit peak on ``hardware``."""
        return self.devices.get(hardware, (self.forward_efficiency, self.backward_efficiency))

    @property
    def fused(self) -> bool:
        return self.kernel is not AttentionKernel.materialized


class Elementwise(Record):
    """Non-matmul work (norms, activation functions, rotary embeddings, residual adds, casts)."""

    model_config = STRICT
    fused: bool = Field(description="fused or compiled kernels (True) or eager PyTorch ops (False)")
    traffic: float = Field(
        ge=1,
        le=10,
        allow_inf_nan=False,
        description="HBM bytes moved relative to napkin's one-pass count (eager ops re-read their inputs)",
    )
    hbm_efficiency: Fraction = Field(default=1.0, description="× napkin's HBM efficiency by kernel size")
    loss_bytes_per_logit: float | None = Field(
        default=None,
        ge=2,
        le=128,
        allow_inf_nan=False,
        description="HBM bytes the loss (softmax cross-entropy and its gradient) reads and writes per logit, "
        "forward and backward; absent: 16 (four fp32 passes)",
    )


class Overlap(Record):
    """What the stack hides under compute."""

    model_config = STRICT
    grad_reduce: bool = Field(description="DP gradient reduction overlaps the last backward pass")
    tensor_parallel: Share = Field(description="share of the TP collectives hidden under GEMMs")
    fsdp_prefetch: int = Field(ge=0, le=8, description="FSDP/ZeRO-3 layers gathered ahead (0: none, exposed)")
    all_to_all: Share = Field(description="share of the MoE all-to-all hidden under compute")
    pipeline_p2p: Share = Field(description="share of the pipeline sends hidden under compute")
    compute_slowdown: Share = Field(
        le=0.5, description="compute runs this much slower while a collective shares the SMs and HBM"
    )


class Collectives(Record):
    """The share of napkin's NCCL model of the cluster (``napkin comm``) the stack's collectives reach."""

    model_config = STRICT
    scale_up: Fraction = Field(description="achieved / modelled bandwidth inside a scale-up domain")
    scale_out: Fraction = Field(description="achieved / modelled bandwidth across domains")
    reduce_bytes: float | None = Field(
        default=None,
        ge=1,
        le=4,
        description="bytes per element of the gradient reduction (4: fp32); "
        "absent: the stored gradients' (--precision)",
    )


class Fp8(Record):
    """What an fp8 recipe costs beyond the fp8 GEMMs."""

    model_config = STRICT
    overhead: Share = Field(description="extra time per fp8 GEMM, as a share of its math (casts, amax, scales)")


class Pipeline(Record):
    model_config = STRICT
    schedules: list[Schedule] = Field(min_length=1, description="pipeline schedules the stack offers")


class Parallelism(Record):
    """What the stack can run (the planner searches only these)."""

    model_config = STRICT
    tensor: bool
    sequence: bool = Field(description="sequence parallelism with TP")
    pipeline: bool
    context: bool
    expert: bool
    sharding: list[Sharding] = Field(min_length=1, description="data-parallel sharding it offers, its default first")
    activation_offload: bool = Field(
        default=False, description="activations offloaded to CPU memory layer by layer (Megatron-Core cpu_offloading)"
    )
    pipeline_sharding: list[Sharding] | None = Field(
        default=None,
        min_length=1,
        description="the sharding it offers together with pipeline parallelism (absent: all of sharding)",
    )

    @model_validator(mode="after")
    def _pipeline_sharding_offered(self) -> Parallelism:
        full = {Sharding.zero3, Sharding.fsdp}  # one strategy under two names
        offered = set(self.sharding) | (full if full & set(self.sharding) else set())
        extra = [str(z) for z in self.pipeline_sharding or () if z not in offered]
        if extra:
            raise ValueError(f"pipeline_sharding: {', '.join(extra)} is not in sharding ({', '.join(self.sharding)})")
        return self


class Recomputation(Record):
    """What selective recomputation keeps and re-runs when attention is fused (FlashAttention stores no scores, so
    Korthikanti's selective recomputation has nothing left to do; a stack's own policy may do more)."""

    model_config = STRICT
    selective_keeps: Fraction = Field(description="share of a layer's activations kept (1: all)")
    selective_recomputes: Share = Field(description="share of a layer's forward re-run in the backward (0: none)")


class RingAttention(Record):
    """How the stack runs causal context parallelism (ring attention), as its code does it; absent: napkin's
    generic model (the KV heads all-gathered and their gradients reduce-scattered, hidden under the attention)."""

    model_config = STRICT
    exchanged_heads: Literal["kv", "query"] = Field(
        description="heads of the K and V the ring passes: the model's KV heads, or repeated to the query heads "
        "before the attention call"
    )
    rotate: Literal["all-gather", "ring"] = Field(
        description="all-gather: every rank's K, V gathered once, issued before the first ring step and awaited "
        "at the second (hidden under one step); ring: passed to the next rank each step, under that step"
    )
    accumulate_bytes: float = Field(
        ge=2,
        le=4,
        allow_inf_nan=False,
        description="bytes per element of the ring's running output and of the dK, dV it accumulates and passes "
        "around the ring in the backward (4: fp32)",
    )


class Validated(Record):
    """The region the stack's published validation runs cover (tests/training_runs.py, tests/megatron_runs.py): a
    layout outside it is predicted all the same, and said to be outside."""

    model_config = STRICT
    gpus: int = Field(ge=0, description="the most GPUs of a validation run (0: none)")
    seq: int = Field(ge=0, description="the longest sequence of a validation run")
    sharding_across_nodes: list[Sharding] = Field(description="data-parallel sharding validated across nodes")
    dtypes: list[str] = Field(description="number formats validated (bf16, fp8)")
    experts: Literal["none", "across-nodes", "all"] = Field(
        default="none",
        description="mixture-of-experts layouts where the validation runs agree: none, expert parallelism "
        "spanning nodes only, or all (within one node too)",
    )
    context_parallel: int = Field(
        default=0,
        ge=0,
        le=1 << 20,
        description="the largest context-parallel degree whose validation runs agree (0: not stated); the larger "
        "ones are validation runs too, and miss: README",
    )
    local_experts: int = Field(
        default=0,
        ge=0,
        le=1 << 20,
        description="MoE: the most routed experts one GPU held in a validation run (0: not stated)",
    )
    devices: list[str] = Field(
        default_factory=list,
        description="the hardware profiles the validation runs ran on (empty: not stated)",
    )
    micro_batch: int = Field(
        default=0,
        ge=0,
        le=1 << 20,
        description="the largest micro-batch of a run the stack's values were fitted or checked on, where the "
        "model's rule for larger ones has no run behind it (0: not stated)",
    )

    def outside(
        self,
        gpus: int,
        seq: int,
        sharding: Sharding,
        across_nodes: bool,
        dtype: str,
        experts: Literal["dense", "in-node", "across-nodes"] = "dense",
        context_parallel: int = 1,
        local_experts: int = 0,
        device: str = "",
        micro_batch: int = 1,
    ) -> list[str]:
        """What of a layout its validation does not cover (empty: inside). ``experts``: a dense model, or an MoE
        whose expert-parallel group stays inside one node or spans nodes, ``local_experts`` of them on a GPU;
        ``device``: the hardware profile's name."""
        return self.outside_workload(gpus, seq, dtype, experts != "dense", device) + self.outside_layout(
            sharding, across_nodes, experts, context_parallel, local_experts, micro_batch
        )

    @property
    def empty(self) -> bool:
        """No published run validates the stack (its region is stated as none: gpus 0)."""
        return self.gpus == 0

    def outside_workload(
        self, gpus: int, seq: int, dtype: str, moe: bool, device: str = "", finetune: str = "full"
    ) -> list[str]:
        """What the question itself (model, GPUs, sequence, format, device, full training or adapters) takes
        outside the validation: the same for every layout of one plan. An empty region says so once."""
        if self.empty:
            return ["no published run validates this stack"]
        out = []
        if finetune != "full":
            out.append(f"{finetune} adapters (validated: full training)")
        if moe and self.experts == "none":
            out.append("a mixture-of-experts model (validated: dense)")
        if device and self.devices and device not in self.devices:
            out.append(f"{device} (validated: {', '.join(self.devices)})")
        if gpus > self.gpus:
            out.append(f"{gpus:,} GPUs (validated up to {self.gpus:,})")
        if seq > self.seq:
            out.append(f"sequence {seq:,} (validated up to {self.seq:,})")
        if dtype not in self.dtypes:
            out.append(f"{dtype} (validated: {', '.join(self.dtypes) or 'none'})")
        return out

    def outside_layout(
        self,
        sharding: Sharding,
        across_nodes: bool,
        experts: Literal["dense", "in-node", "across-nodes"] = "dense",
        context_parallel: int = 1,
        local_experts: int = 0,
        micro_batch: int = 1,
    ) -> list[str]:
        """What the layout's own choices take outside the validation: what tells apart the layouts of one plan
        (nothing in an empty region, where the question is outside whole)."""
        if self.empty:
            return []
        out = []
        if experts == "in-node" and self.experts == "across-nodes":
            out.append("experts within one node (validated: expert parallelism across nodes)")
        if experts != "dense" and self.local_experts and local_experts > self.local_experts:
            out.append(f"{local_experts:,} local experts (validated up to {self.local_experts:,})")
        if (
            across_nodes
            and sharding is not Sharding.none
            and not any(_same(sharding, z) for z in self.sharding_across_nodes)
        ):
            out.append(f"{sharding} across nodes")
        if self.context_parallel and context_parallel > self.context_parallel:
            out.append(
                f"CP {context_parallel} (published runs agree up to CP {self.context_parallel}; "
                "beyond it they ran slower than predicted)"
            )
        if self.micro_batch and micro_batch > self.micro_batch:
            out.append(f"micro-batch {micro_batch} (validated up to {self.micro_batch})")
        return out


def _same(a: Sharding, b: Sharding) -> bool:
    """One strategy under either name (``FULL_SHARD``: FSDP's FULL_SHARD is ZeRO-3)."""
    return a == b or {a, b} <= FULL_SHARD


class CachedActivations(Record):
    """An activation policy that caches the inputs of the linear layers in a low-precision format and recomputes
    cheap operators (DeepSeek-V3 §3.2.3, §3.3.3): it replaces Korthikanti's count for every layer."""

    model_config = STRICT
    linear_input_bytes: float = Field(
        ge=0.5, le=4, allow_inf_nan=False, description="bytes per cached linear-layer input element (scales included)"
    )
    attention_output_bytes: float = Field(
        ge=0.5, le=4, allow_inf_nan=False, description="bytes per attention-output element (its projection's input)"
    )
    recompute_norms: bool = Field(description="norm outputs recomputed in the backward (their inputs kept)")
    recompute_up_projections: bool = Field(
        description="MLA up-projections recomputed (the compressed latents kept, not Q, K, V)"
    )
    recompute_swiglu: bool = Field(description="the SwiGLU output recomputed from its cached input")
    dispatch_bytes: float = Field(
        ge=0, le=4, allow_inf_nan=False, description="bytes per element of the MoE dispatch (0: no buffer)"
    )
    combine_bytes: float = Field(ge=0, le=4, allow_inf_nan=False, description="bytes per element of the MoE combine")
    overlapped_microbatches: int = Field(
        ge=1, le=4, description="micro-batches whose all-to-all buffers are live at once (2: DualPipe's overlap)"
    )


class Memory(Record):
    """Memory the stack keeps beyond napkin's formulas."""

    model_config = STRICT
    fragmentation: Share = Field(le=0.5, description="allocator overhead as a share of the allocated bytes")
    fixed: Size = Field(description="per GPU: CUDA context, NCCL buffers, workspaces")
    logit_bytes: float = Field(
        default=4.0, ge=2, le=32, allow_inf_nan=False, description="bytes per logit the loss holds at its peak"
    )
    gradient_bytes: float | None = Field(
        default=None, ge=1, le=4, allow_inf_nan=False, description="bytes per stored gradient (absent: --precision's)"
    )
    moment_bytes: float | None = Field(
        default=None,
        ge=1,
        le=4,
        allow_inf_nan=False,
        description="bytes per optimizer-moment element (absent: --precision's)",
    )
    loss_parallel_logit_bytes: float | None = Field(
        default=None,
        ge=2,
        le=32,
        allow_inf_nan=False,
        description="bytes per logit at the loss's peak when TP shards the vocabulary (loss parallel); absent: "
        "logit_bytes",
    )
    output_input_gathered: bool = Field(
        default=False,
        description="with sequence parallelism the output layer keeps its input gathered (s·b·h, not ÷ t)",
    )
    pipeline_gathered: bool = Field(
        default=False,
        description="FSDP under pipeline parallelism keeps the whole stage's parameters gathered, 16-bit, "
        "across its micro-batches (no reshard after forward)",
    )
    ends_gathered: bool = Field(
        default=False,
        description="FSDP: the embedding and output layer (the root module) stay gathered, 16-bit, through the step",
    )
    pipeline_gradient_bytes: float | None = Field(
        default=None,
        ge=1,
        le=4,
        allow_inf_nan=False,
        description="FSDP under pipeline parallelism: bytes per parameter of the stage's unsharded gradients, "
        "accumulated across its micro-batches and reduce-scattered after the last (absent: none)",
    )
    cached: CachedActivations | None = Field(
        default=None, description="the stack's own activation policy (absent: Korthikanti's count)"
    )
    fp8_linear_input_bytes: float | None = Field(
        default=None,
        ge=0.5,
        le=2,
        allow_inf_nan=False,
        description="under an fp8 recipe, bytes per element of the input each linear layer keeps for its "
        "weight-gradient GEMM (its quantized copy, scales included); absent: the 16-bit activations'",
    )
    fp8_weight_bytes: float | None = Field(
        default=None,
        ge=1,
        le=4,
        allow_inf_nan=False,
        description="under an fp8 recipe, bytes per transformer-layer weight held for the GEMMs in place of the "
        "16-bit parameter (fp8 primary weights, with their transpose where the device's fp8 GEMMs take only the TN "
        "layout); absent: --precision's parameter bytes",
    )
    fp8_weight_bytes_devices: dict[str, Annotated[float, Field(ge=1, le=4, allow_inf_nan=False)]] | None = Field(
        default=None, description="hardware profile name → fp8_weight_bytes on that device (absent: none)"
    )
