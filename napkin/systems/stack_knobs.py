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
    fp8_source: str = ""
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


def recipe_memory(framework: Framework, fp8: bool) -> tuple[Framework, float | None]:
    """The stack's memory and the bytes each linear layer keeps of its input, for the run's number format: under
    an fp8 recipe its fp8 weights (``under_fp8``) and its kept linear-input bytes; else as it is, and None (the
    16-bit activations'). What memory and step both take."""
    rules = framework.rules
    if not fp8:
        return framework, None
    kept = rules.fp8_linear_input_bytes if rules is not None and rules.fp8_linear_input_bytes else None
    return under_fp8(framework), kept


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
