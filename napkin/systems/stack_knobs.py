"""A stack's training values as plain numbers, for the hot paths: ``StackKnobs`` (the step model) and
``Framework`` / ``MemoryRules`` (the memory engine), built by ``napkin.systems.stack.Stack.knobs``."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Final

from napkin.systems.stack_sections import CachedActivations, RingAttention

#: HBM bytes per logit of the loss where a stack states none: napkin's count of a cross-entropy in fp32, four
#: fp32 passes over the logits (upcast, softmax, its gradient, the gradient read by the output layer)
LOSS_BYTES_PER_LOGIT: Final = 16.0


@dataclass(frozen=True)
class Framework:
    """Memory a software stack keeps beyond the formulas (``napkin.stack`` Memory): a fixed part per GPU (CUDA
    context, NCCL and workspace buffers), allocator fragmentation as a share of what is allocated, and, under
    FSDP / ZeRO-3, the unsharded parameters of the layers gathered at once (the running one and the prefetched)
    and one layer's unsharded gradients before their reduce-scatter."""

    fixed: float = 0.0
    fragmentation: float = 0.0
    gathered_layers: int = 0
    source: str = ""
    rules: MemoryRules | None = None  # what else the stack's memory section states (None: napkin's formulas)


@dataclass(frozen=True, slots=True)
class MemoryRules:
    """A stack's memory rules beyond fixed bytes and fragmentation, as plain values (``Memory``): the element
    bytes of gradients and optimizer moments, whether FSDP's root stays gathered, whether the pipeline schedule
    is DualPipe (two copies of the parameters, PP + 1 micro-batches in flight), and its activation policy."""

    gradient_bytes: float = 0.0  # 0: the precision's
    moment_bytes: float = 0.0  # 0: the precision's
    ends_gathered: bool = False
    pipeline_gathered: bool = False
    pipeline_gradient_bytes: float = 0.0  # 0: no unsharded gradients held across micro-batches
    dualpipe: bool = False
    cached: CachedActivations | None = None
    loss_parallel_logit_bytes: float = 0.0  # 0: logit_bytes
    output_input_gathered: bool = False
    fp8_linear_input_bytes: float = 0.0  # 0: linear inputs kept at the activations' 16-bit bytes under fp8
    kept_input_source: str = ""  # the citation of the kept linear-input bytes (fp8's, or NVFP4's: recipe_memory)
    fp8_weight_bytes: float = 0.0  # under fp8, bytes per transformer-layer weight on this device (0: --precision's)
    fp8_weights_source: str = ""
    layer_param_bytes: float = 0.0  # bytes per transformer-layer parameter held (0: --precision's): ``under_fp8``
    states_source: str = ""  # the citations of the values above, for --explain
    ends_source: str = ""
    dualpipe_source: str = ""
    cached_source: str = ""


def under_fp8(framework: Framework) -> Framework:
    """The stack's memory under an fp8 recipe: its transformer layers' weights at its fp8 weight bytes."""
    rules = framework.rules
    if rules is None or not rules.fp8_weight_bytes:
        return framework
    return replace(framework, rules=replace(rules, layer_param_bytes=rules.fp8_weight_bytes))


#: Bytes per element of an NVFP4 tensor as Transformer Engine stores it: a 4-bit E2M1 value and one 1-byte E4M3
#: scale per block of 16 (NVFP4_BLOCK_SCALING_SIZE; the scale tensor is round_up(M / 16) per row of K,
#: transformer_engine/pytorch/tensor/nvfp4_tensor.py @ d0067d0da), the per-tensor fp32 amax aside: 0.5 + 1/16.
NVFP4_ELEMENT_BYTES = 0.5 + 1 / 16


def fp4_memory_note(kept: float | None, stack: str) -> str:
    """What memory under fp4 counts, for a result's notes (``kept``: ``recipe_memory``'s linear-input bytes)."""
    if kept:
        return (
            "fp4 (NVFP4): the linear layers' kept inputs at 0.5625 B (4 bits and an E4M3 scale per 16); the weights "
            "at --precision's bytes, an upper bound where the stack gathers NVFP4 parameters (Megatron-Bridge's "
            "fp4_param_gather)"
        )
    return (
        f"fp4: the {stack} stack states nothing of what its fp4 recipe keeps; activations and weights counted at 16 "
        "bits"
    )


def recipe_memory(framework: Framework, dtype: str) -> tuple[Framework, float | None]:
    """The stack's memory and the bytes each linear layer keeps of its input, for the run's number format
    (``dtype``: a hardware peak's name): under an fp8 recipe its fp8 weights (``under_fp8``) and its kept
    linear-input bytes; under fp4 (NVFP4), where the stack keeps the quantized copy under fp8, the same copy in
    NVFP4 (Transformer Engine's Linear saves whatever quantized input it made for the forward GEMM, column-wise
    only, for any recipe: ``inputmat.update_usage(rowwise_usage=False, columnwise_usage=True)``,
    transformer_engine/pytorch/module/linear.py @ d0067d0da), its weights as --precision holds them (an upper
    bound: Megatron-Bridge's NVFP4 recipe gathers NVFP4 parameters, ``fp4_param_gather``, whose bytes napkin does
    not count; src/megatron/bridge/training/mixed_precision.py @ 067f987d); else as it is, and None (the 16-bit
    activations'). What memory and step both take."""
    rules = framework.rules
    keeps = rules is not None and bool(rules.fp8_linear_input_bytes)
    if dtype == "fp8":
        return under_fp8(framework), rules.fp8_linear_input_bytes if keeps and rules is not None else None
    if dtype == "fp4" and keeps and rules is not None:
        from napkin import sources

        nvfp4 = replace(rules, kept_input_source=sources.NVFP4_LINEAR_INPUT)
        return replace(framework, rules=nvfp4), NVFP4_ELEMENT_BYTES
    return framework, None


@dataclass(frozen=True, slots=True)
class StackKnobs:
    """A stack's training values as plain numbers, for the step model's hot path. The defaults are napkin's
    model without a stack: every kernel at the device's rates, nothing hidden but what ``Overlap`` says."""

    name: str = "none"
    flash: bool = False
    causal: bool = False
    flash_forward: float = 0.75
    flash_backward: float = 561 / 989.5
    matmul: float = 1.0
    elementwise_traffic: float = 1.0
    hbm: float = 1.0
    loss_bytes: float = LOSS_BYTES_PER_LOGIT
    loss_source: str = ""  # the stack's citation of loss_bytes ("": napkin's default)
    fusion: bool = True
    overlap_grad_reduce: bool = True
    tp_overlap: float = 0.0
    prefetch: int = 1
    a2a_overlap: float = 0.0
    p2p_overlap: float = 0.0
    slowdown: float = 0.0
    scale_up: float = 1.0
    scale_out: float = 1.0
    reduce_bytes: float = 0.0  # 0: the precision's gradient bytes
    fp8_overhead: float = 0.0
    fragmentation: float = 0.0
    fixed_bytes: float = 0.0
    step_overhead: float = 0.0
    grouped_streams: int | None = None  # MoE expert GEMMs at once; None: one batched call of the local experts
    moe_host: float = 0.0  # host seconds per local expert per MoE layer and micro-batch (fwd + bwd); 0: not counted
    memory_source: str = ""
    own_memory: bool = False  # a stack profile's: FSDP/ZeRO-3 gather buffers counted
    selective_keeps: float = 1.0
    selective_recomputes: float = 0.0
    logit_bytes: float = 4.0
    rules: MemoryRules | None = None
    ring: RingAttention | None = None  # the stack's ring attention (None: napkin's generic CP model)

    def framework(self) -> Framework:
        """The stack's own memory for ``napkin.engines.memory``: fixed, fragmentation, the layers FSDP holds
        gathered (the running one and those prefetched)."""
        return Framework(
            self.fixed_bytes,
            self.fragmentation,
            1 + self.prefetch if self.own_memory else 0,
            self.memory_source,
            self.rules,
        )

    def replace(self, **changes: Any) -> StackKnobs:
        return replace(self, **changes)
