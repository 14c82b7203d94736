"""Step time: how long one optimizer step takes for a model, a workload, a layout and a cluster, and the
MFU that follows — predicted instead of assumed.

Pure functions; no printing, no files. The hot path (``StepModel.evaluate``) works on plain floats so the
planner (``napkin.engines.planner``) can score thousands of layouts a second; ``step()`` wraps it in a ``StepResult``
with the derivation. One model of the hardware, the same for every model and layout:

* **Matmuls**: time = FLOPs / (R·η_size·q) + bytes / (BW_HBM·η_mem). R is the device's achievable matmul
  rate (a saved ``napkin bench matmul --save`` measurement, else the published Maximum Achievable Matmul
  FLOPS, else 80 % of the datasheet peak), η_size Calculon's efficiency by the size of the call, BW_HBM the
  HBM bandwidth, q the tile-quantization efficiency of the output (m and n padded to whole tiles of 128, or of
  the smallest power of two from 16 that holds a smaller dimension). The math and
  the memory traffic of a kernel are added, not overlapped: Calculon's ``no_overlap`` processing mode, the
  one its A100 and H100 system files use and the one its validation against Megatron-LM's measured
  iteration times (Korthikanti et al. 2022 Table 5) was run with. A pure roofline (the max of the two)
  under-predicts those iteration times by 8-17 %.
* **Memory-bound work** (norms, softmax, dropout, activation functions, residual adds, cross-entropy, the
  optimizer step) moves its bytes at η_mem of the HBM bandwidth.
* **Gradient accumulation**: fused into the weight-gradient GEMMs (Megatron-LM's default since 2022), so it
  costs nothing beyond them; without fusion (PyTorch autograd, Megatron-LM in 2021) every micro-batch after
  the first reads the stored and the new gradients and writes the sum, at η_mem of the HBM bandwidth.
* **Tensor-parallel** all-reduces (or reduce-scatter + all-gather with sequence parallelism): two per layer
  per forward, two per backward, two more per recomputed forward, on the scale-up link, not overlapped.
* **Pipeline**: the 1F1B bubble is (p − 1)/v micro-batches of the stage's own time — its compute, its TP
  collectives and its sends. Activations cross stages with Megatron's scatter/gather: each TP rank sends
  1/t of the tensor, and the receiving stage all-gathers it over the scale-up link; not overlapped.
* **Data parallel**: gradient all-reduce (reduce-scatter + all-gather for ZeRO-1/2) overlapped with the
  backward pass of the last micro-batch (``overlap_grad_reduce``, Megatron-LM's ``--overlap-grad-reduce``;
  without it the whole collective is exposed, as in Megatron-LM before 2023); ZeRO-3 gathers parameters and
  reduces gradients every micro-batch, overlapped with that micro-batch's compute.
* **Expert parallel**: all-to-all dispatch and combine per MoE layer of each TP rank's share of the tokens,
  then an all-gather (reduce-scatter) over TP, not overlapped. **Context parallel**:
  the keys and values gathered over the CP group, overlapped with the attention they feed.

Collective times come from ``napkin.engines.comm`` (α–β with NCCL's algorithms over the cluster's two fabrics).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, Final, NamedTuple

from pydantic import Field, computed_field

if TYPE_CHECKING:
    from napkin.engines.compute import FlopsPerToken

from napkin import sources
from napkin.domain.choices import Optimizer, Precision, Recompute, Sharding
from napkin.domain.layout import MAX_LISTED_STAGES, Layout, stage_layers, stage_size, uneven_note
from napkin.domain.model import Model
from napkin.domain.workload import Workload
from napkin.engines.activations import in_flight
from napkin.engines.comm import collective_seconds
from napkin.engines.finetune import (
    Adapters,
    base_bytes,
    finetune_bytes,
    finetune_memory,
    lora_params,
    quantized_weights,
)
from napkin.engines.training_memory import (
    COMPONENTS,
    SHARDED,
    ActivationInputs,
    ActivationParts,
    activation_element_bytes,
    activation_parts,
    bytes_per_param,
    capacity,
    gather_buffers,
    memory,
    stage_activations,
    stage_indices,
    stage_states,
)
from napkin.errors import UsageError
from napkin.results.explain import Step, step
from napkin.results.result import Result
from napkin.systems.cluster import Cluster, Fabric
from napkin.systems.profiles import HardwareProfile
from napkin.systems.stack import Offers, StackKnobs, Validated
from napkin.units import format_bandwidth, format_bytes, format_duration, format_percent, format_rate

#: Maximum Achievable Matmul FLOPS (bf16, dense), measured by mamf-finder.py (stas00/ml-engineering,
#: compute/accelerator/README.md, "Maximum Achievable Matmul FLOPS comparison table", BF16 v2 table).
MAMF_BF16: Final[dict[str, float]] = {
    "a100-sxm-80gb": 271.2e12,
    "a100-sxm-40gb": 271.2e12,
    "a100-pcie-80gb": 252.9e12,
    "h100-sxm": 794.5e12,
    "mi300x": 668.4e12,
    "mi325x": 784.9e12,
}
#: Devices without a measurement: the H100 SXM's MAMF efficiency (794.5 / 989 ≈ 0.80), same source.
DEFAULT_MATMUL_EFFICIENCY: Final = 0.80
#: Fraction of HBM bandwidth large memory-bound kernels reach: Calculon's A100/H100 system files
#: (calculon-ai/calculon systems/a100_80g.json, mem1 MB_efficiency: 0.90 for ≥ 100 MB, 0.75 for ≥ 10 MB,
#: 0.6 for ≥ 1 MB, 0.3 below), applied per kernel by its size.
MEMORY_EFFICIENCY: Final = ((100e6, 0.90), (10e6, 0.75), (1e6, 0.60), (0.0, 0.30))
#: Small matmuls reach less of R: Calculon's efficiency by the FLOPs of one matmul call (systems/a100_80g.json
#: and h100_80g_nvl8.json matrix gflops_efficiency: 0.95 at ≥ 128 GFLOP, 0.9 at ≥ 16, 0.6 at ≥ 1, 0.1 below),
#: divided by its top entry so that the largest matmuls run at R.
SIZE_EFFICIENCY: Final = ((128e9, 0.95 / 0.95), (16e9, 0.9 / 0.95), (1e9, 0.6 / 0.95), (0.0, 0.1 / 0.95))
#: Output tile of a tensor-core GEMM: cuBLAS pads m and n to whole tiles (NVIDIA Deep Learning Performance
#: Guide, "Matrix Multiplication Background": tile quantization). 128×128 is its largest common tile; a smaller
#: dimension gets the smallest tile that holds it, down to 16 (the m of a tensor-core MMA instruction).
TILE: Final = 128
#: The achievable rate Calculon's size table was measured at: A100 SXM bf16 (MAMF_BF16 above).
SIZE_REFERENCE: Final = 271.2e12
SMALLEST_TILE: Final = 16


def _padded(dim: float) -> float:
    """``dim`` rounded up to whole tiles of the size cuBLAS would pick for it."""
    tile = SMALLEST_TILE
    while tile < dim and tile < TILE:
        tile *= 2
    return math.ceil(dim / tile) * tile


ACT_BYTES: Final = 2.0  # activations, TP/PP/EP payloads: 16-bit
#: FlashAttention's share of the 16-bit dense peak, forward and backward, and the backward's FLOPs over the
#: forward's (sources.FLASH_EFFICIENCY).
FLASH_FORWARD: Final = 0.75
FLASH_BACKWARD: Final = 561 / 989.5
FLASH_BACKWARD_FLOPS: Final = 2.5


def _step_table(table: tuple[tuple[float, float], ...], size: float) -> float:
    for threshold, eff in table:
        if size >= threshold:
            return eff
    return table[-1][1]


def _mem_eff(nbytes: float) -> float:
    return _step_table(MEMORY_EFFICIENCY, nbytes)


@dataclass(frozen=True, slots=True)
class Machine:
    """A device and its fabric as plain floats: what the hot path needs."""

    name: str
    cluster: str
    peak: float  # datasheet dense peak, FLOP/s (MFU's denominator)
    rate: float  # achievable matmul FLOP/s (R)
    rate_source: str
    hbm: float  # bytes/s
    capacity: float  # bytes a fit check may use: ``training_memory.capacity``, the one rule of every command
    fabric: Fabric
    rate16: float  # R of the work kept in 16 bits when ``rate`` is an 8-bit-or-less rate: attention, output layer
    dtype: str  # the number format of ``peak`` and ``rate``
    peak16: float  # 16-bit dense peak (FlashAttention's efficiency is quoted against it)
    profile: HardwareProfile  # where all of this came from: results report its memory (never a lookup by name)


#: Number formats whose matmuls Transformer Engine runs only in the transformer blocks' linear layers
#: (sources.TE_FP8_SCOPE): the attention core and the output layer stay 16-bit.
LOW_PRECISION: Final = frozenset({"fp8", "fp6", "fp4", "int8"})
SHARDED_PARAMS: Final = frozenset({Sharding.zero3, Sharding.fsdp, Sharding.hsdp})
#: One strategy under two names (napkin reads fsdp as ZeRO-3).
FULL_SHARD: Final = frozenset({Sharding.zero3, Sharding.fsdp})


def machine(cluster: Cluster, hardware: HardwareProfile, dtype: str = "bf16") -> Machine:
    """R from a saved ``bench matmul`` measurement, else the published MAMF, else 80 % of the peak; with an
    8-bit-or-less ``dtype``, the attention core and the output layer at the bf16 R."""
    peak = hardware.peak(dtype)
    measured = hardware.measured_for(dtype)
    if measured is not None:
        rate, source = measured.flops_per_second, f"measured {measured.date} on {measured.device} (bench matmul)"
    elif dtype == "bf16" and hardware.name in MAMF_BF16:
        rate, source = MAMF_BF16[hardware.name], sources.MAMF
    else:
        rate, source = DEFAULT_MATMUL_EFFICIENCY * peak, f"{DEFAULT_MATMUL_EFFICIENCY:g} × peak ({sources.MAMF}, H100)"
    rate = min(rate, peak)
    rate16 = rate
    if dtype in LOW_PRECISION and hardware.peak_if_known("bf16"):
        rate16 = min(rate, machine(cluster, hardware, "bf16").rate)
    peak16 = hardware.peak_if_known("bf16") or peak
    return Machine(
        hardware.name,
        cluster.name,
        peak,
        rate,
        source,
        hardware.memory_bandwidth,
        capacity(hardware)[0],
        cluster.fabric(),
        rate16,
        dtype,
        peak16,
        hardware,
    )


# ------------------------------------------------------------------------------------ the hot path


def pipeline_bubble(p: int, v: int, stage: float) -> float:
    """Idle seconds per step of 1F1B (v = 1) or the interleaved schedule (v chunks per rank): (p − 1)/v
    micro-batches of one stage's time (Narayanan et al. 2021 §2.2), ``stage`` being one micro-batch's forward
    and backward on a rank with its communication. The last stage's own extra work (logits, loss) is on the
    critical path every micro-batch, not in the bubble. tests/pipeline_schedule.py replays Megatron-LM's
    schedules, blocking sends included, and agrees within 2 % (the end stages send half as much)."""
    return (p - 1) / v * stage


def _exposed(comm: float, window: float, slowdown: float) -> float:
    """Seconds a collective of ``comm`` seconds adds when it overlaps ``window`` seconds of compute: what the
    compute cannot cover, plus the compute it slows while they share the GPU."""
    return max(0.0, comm - window) + slowdown * min(comm, window)


def _near(group: int, domain: int, stride: int) -> int:
    """Ranks of a group ``stride`` apart that share one scale-up domain (Megatron's tp-cp-dp-pp order): all of
    them when the group's span fits in a domain (a TPU slice is one domain of thousands of chips)."""
    if group * stride <= domain:
        return group
    return math.gcd(group, max(1, domain // stride))


def _passes_collectives(recompute: Recompute) -> int:
    """A layer's collectives of one kind per micro-batch: 2 in the forward, 2 in the backward, 2 more in a
    recomputed forward (Shoeybi et al. 2019 §3: g in the forward, f in the backward, for attention and the MLP)."""
    return 4 + (2 if recompute is Recompute.full else 0)


class Terms(NamedTuple):
    """One step of one layout: seconds by term (``BREAKDOWN``), their sum, and the most loaded GPU's bytes."""

    step_seconds: float
    compute: float
    tensor_parallel: float  # exposed TP collectives
    bubble: float
    data_parallel: float  # exposed DP collectives
    optimizer: float
    other: float  # pipeline sends, EP all-to-all, CP
    per_gpu_bytes: float

    def breakdown(self) -> dict[str, float]:
        """Seconds per term, by name, in ``BREAKDOWN``'s order."""
        return {name: getattr(self, name) for name in BREAKDOWN}


class LayerTimes(NamedTuple):
    """Forward seconds of one layer for one micro-batch on one GPU."""

    dense: float  # a dense layer's matmuls
    moe: float  # an MoE layer's matmuls
    scores: float  # attention scores (QKᵀ, A·V, softmax; or FlashAttention's kernel)
    elementwise: float  # norms, residuals, activation function (dense layer)
    moe_elementwise: float  # the same for an MoE layer


class LayerPasses(NamedTuple):
    """One layer for one micro-batch on one GPU, MoE and dense layers in the model's proportion."""

    forward: float  # seconds of its forward
    recompute: float  # of its recomputation (full: a forward; selective: the attention scores)
    collective: float  # one tensor-parallel collective
    tensor_parallel: float  # all its tensor-parallel collectives (2 forward, 2 backward, 2 per recomputation)
    logits: float  # the last stage's output layer and loss


class Pace(NamedTuple):
    """The pipeline stage the step waits for."""

    heaviest: int  # layers of the heaviest stage
    layers: int  # layers of the pacing stage
    last_stage: bool  # whether it is the last stage, with the logits


@dataclass(frozen=True, slots=True, kw_only=True)
class Knobs:
    """One resolved layout and micro-batch as plain numbers for the hot path: ``Layout``'s field names (DP
    resolved), built by keyword (``Knobs.of(layout, micro_batch)`` from a ``Layout``); only ``data`` is required,
    the rest default as ``Layout``'s do."""

    data_parallel: int
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    context_parallel: int = 1
    expert_parallel: int = 1
    interleave: int = 1
    micro_batch: int = 1
    sequence_parallel: bool = False
    recompute: Recompute = Recompute.none
    sharding: Sharding = Sharding.zero3

    @classmethod
    def of(cls, layout: Layout, micro_batch: int) -> Knobs:
        return cls(
            tensor_parallel=layout.tensor_parallel,
            pipeline_parallel=layout.pipeline_parallel,
            data_parallel=layout.dp,
            context_parallel=layout.context_parallel,
            expert_parallel=layout.expert_parallel,
            interleave=layout.interleave,
            micro_batch=micro_batch,
            sequence_parallel=layout.sequence_parallel,
            recompute=layout.recompute,
            sharding=layout.sharding,
        )

    @property
    def gpus(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel * self.context_parallel * self.data_parallel

    def layout(self) -> Layout:
        return Layout(
            tensor_parallel=self.tensor_parallel,
            pipeline_parallel=self.pipeline_parallel,
            data_parallel=self.data_parallel,
            context_parallel=self.context_parallel,
            expert_parallel=self.expert_parallel,
            interleave=self.interleave,
            sequence_parallel=self.sequence_parallel,
            sharding=self.sharding,
            recompute=self.recompute,
        )


class StepModel:
    """The step-time model for one model, sequence length, global batch and machine; ``evaluate`` scores a
    layout in plain floats (the planner calls it thousands of times, so per-layer times are memoised)."""

    def __init__(
        self,
        model: Model,
        seq: int,
        global_batch: int,
        hw: Machine,
        *,
        optimizer: Optimizer = Optimizer.adamw,
        precision: Precision = Precision.mixed,
        flash_attention: bool | None = None,
        causal: bool | None = None,
        reserve_bytes: float = 0.0,
        overlap_grad_reduce: bool | None = None,
        gradient_accumulation_fusion: bool | None = None,
        adapters: Adapters | None = None,
        stack: StackKnobs | None = None,
        stack_steps: Sequence[Step] = (),
        offers: Offers | None = None,
        validated: Validated | None = None,
    ) -> None:
        """``stack``: the software stack's values (``napkin.stack``); the four switches override its own.
        ``stack_steps``: the stack's values as ``--explain`` lists them; ``offers``: the parallelism it offers
        (None: anything)."""
        st = stack or StackKnobs()
        self.stack = st
        self.stack_steps = list(stack_steps)
        self.offers = offers
        self.validated = validated
        self.model, self.seq, self.batch, self.hw = model, seq, global_batch, hw
        #: LoRA/QLoRA: a frozen base (no weight-gradient GEMMs, nothing to reduce or update) and adapters
        self.adapters = adapters
        self.trainable = float(lora_params(model, adapters.rank, adapters.targets)) if adapters else 0.0
        self.optimizer, self.precision = optimizer, precision
        self.flash = st.flash if flash_attention is None else flash_attention
        self.causal = st.causal if causal is None else causal
        self.reserve = reserve_bytes
        self.overlap_grad_reduce = st.overlap_grad_reduce if overlap_grad_reduce is None else overlap_grad_reduce
        self.gradient_accumulation_fusion = (
            st.fusion if gradient_accumulation_fusion is None else (gradient_accumulation_fusion)
        )
        f = hw.fabric
        self.fabric = replace(
            f,
            up_bandwidth=f.up_bandwidth * st.scale_up,
            nvls_bandwidth=f.nvls_bandwidth * st.scale_up,
            out_bandwidth_per_device=f.out_bandwidth_per_device * st.scale_out,
        )
        self.rate, self.rate16 = hw.rate * st.matmul, hw.rate16 * st.matmul
        self.fp8 = hw.dtype in LOW_PRECISION and hw.rate != hw.rate16
        m = model
        self.params = float(m.params())
        self.expert_params = float(m.expert_params()) if m.is_moe else 0.0
        self.d = float(m.hidden)
        self.heads = float(m.n_heads)
        self.d_attn = float(m.d_attn)
        out_width = float(m.n_heads * (m.v_head_dim or m.d_head))
        self.out_width = out_width
        self.qkv_cols = (m.attention_params() - out_width * m.hidden) / m.hidden
        self.mm = float(m.mlp_matrices)
        self.act_passes = 3.0 if m.mlp_matrices == 3 else 2.0  # SwiGLU reads gate and up, writes one; GeLU r+w
        self.ffn = float(m.d_ffn)
        self.moe_layers = float(m.moe_layers)
        self.dense_layers = float(m.layers - m.moe_layers)
        self.attended = m.attended(seq, causal=self.causal and self.flash)
        # adapters are fp32 with fp32 gradients and states (peft): the fp32 regime's bytes per parameter
        self.bpp = bytes_per_param(optimizer, Precision.fp32 if adapters else precision)
        self.grad_bytes = self.bpp.breakdown["gradients"]
        #: bytes per element the gradient reduction moves (the stack's reduce dtype, else the stored gradients')
        self.reduce_bytes = st.reduce_bytes or self.grad_bytes
        #: an unfused accumulation reads the stored gradient and the new one (the GEMM's output, at the compute
        #: precision) and writes the sum
        self.accumulate_bytes = 2 * self.grad_bytes + activation_element_bytes(precision)
        self.param_bytes = self.bpp.breakdown["params"]
        self._layer: dict[tuple[Any, ...], LayerTimes] = {}
        self._collectives: dict[tuple[str, float, int, int | None], float] = {}
        self._passes: dict[tuple[Any, ...], LayerPasses] = {}
        # memory_bytes' parts, memoised as the layer times are
        self.element_bytes = activation_element_bytes(precision)
        self.framework = st.framework()
        self._parts: dict[tuple[Any, ...], ActivationParts] = {}
        self._states: dict[tuple[Any, ...], tuple[float, float]] = {}
        self._held: dict[tuple[int, int, int, int], float] = {}

    def with_stack(self, stack: StackKnobs) -> StepModel:
        """This model with other stack values (``napkin calibrate`` tries many); the switches stay as resolved."""
        return StepModel(
            self.model,
            self.seq,
            self.batch,
            self.hw,
            optimizer=self.optimizer,
            precision=self.precision,
            flash_attention=self.flash,
            causal=self.causal,
            reserve_bytes=self.reserve,
            overlap_grad_reduce=self.overlap_grad_reduce,
            gradient_accumulation_fusion=self.gradient_accumulation_fusion,
            stack=stack,
            stack_steps=self.stack_steps,
            offers=self.offers,
            validated=self.validated,
        )

    # --- pieces -------------------------------------------------------------------------------
    def gemm(self, m: float, k: float, n: float, count: float = 1.0, *, rate16: bool = False) -> float:
        """Seconds for ``count`` (m×k)·(k×n) GEMMs: math plus memory traffic (not overlapped), with tile
        quantization of the m×n output. ``rate16``: a matmul that stays 16-bit under an fp8 recipe."""
        if m <= 0 or k <= 0 or n <= 0:
            return 0.0
        flops = 2.0 * m * k * n
        q = (m * n) / (_padded(m) * _padded(n))  # padded tiles waste math, not memory traffic
        nbytes = ACT_BYTES * (m * k + k * n + m * n)
        peak_rate = self.rate16 if rate16 else self.rate
        # one (batched) call, padded; Calculon's table is by the FLOPs of an A100 bf16 call: a faster rate reaches
        # the same efficiency only with as many more FLOPs (the same call duration)
        rate = peak_rate * _step_table(SIZE_EFFICIENCY, flops * count / q * SIZE_REFERENCE / peak_rate)
        math_s = flops / (rate * q)
        cast = 0.0
        if self.fp8 and not rate16:
            # the fp8 recipe: its input is cast (16-bit read, 8-bit written) and scaled, and the stack's own cost
            # (amax reductions, scale updates, transposes) as a share of the math
            math_s *= 1.0 + self.stack.fp8_overhead
            cast = self.stream(3.0 * m * k)
        return count * (math_s + cast + nbytes / (self.hw.hbm * self.stack.hbm * _mem_eff(nbytes)))

    def stream(self, nbytes: float, count: float = 1.0) -> float:
        """Seconds to move ``count`` kernels of ``nbytes`` through HBM."""
        return count * nbytes / (self.hw.hbm * self.stack.hbm * _mem_eff(nbytes)) if nbytes > 0 else 0.0

    def elementwise(self, nbytes: float, count: float = 1.0) -> float:
        """Seconds of a layer's non-matmul work of ``nbytes`` in one fused pass, as the stack runs it: eager ops
        move ``elementwise_traffic`` times the bytes (each op re-reads its input)."""
        return self.stream(nbytes, count * self.stack.elementwise_traffic)

    def layer(self, t: int, c: int, b: int, e: int, sp: bool) -> LayerTimes:
        """Forward seconds of one layer for one micro-batch on one GPU:
        (dense-layer matmuls, MoE-layer matmuls, attention scores, elementwise (dense), elementwise (MoE))."""
        key = (t, c, b, e, sp)
        found = self._layer.get(key)
        if found is not None:
            return found
        m = self.model
        tokens = b * self.seq / c
        d, ffn = self.d, self.ffn
        proj = self.gemm(tokens, d, self.qkv_cols / t) + self.gemm(tokens, self.out_width / t, d)
        dense = proj + self.gemm(tokens, d, (self.mm - 1) * ffn / t) + self.gemm(tokens, ffn / t, d)
        moe = 0.0
        moe_stream = 0.0
        if m.is_moe:
            fe = float(m.d_expert)
            routed = tokens * m.top_k * e / m.experts  # tokens each local expert receives (balanced routing)
            moe = proj + self.gemm(tokens, d, m.experts) + self.gemm(routed, d, (self.mm - 1) * fe / t, m.experts / e)
            moe += self.gemm(routed, fe / t, d, m.experts / e)
            if m.shared_experts:
                width = m.shared_experts * fe / t
                moe += self.gemm(tokens, d, (self.mm - 1) * width) + self.gemm(tokens, width, d)
            width = (tokens * m.top_k + tokens * m.shared_experts) * fe / t
            moe_stream = self.elementwise(width * ACT_BYTES * self.act_passes)
        # attention scores: QKᵀ and A·V over (a/t)·b heads of s_q × s_k
        heads = self.heads / t * b
        s_q, s_k, d_h = self.seq / c, self.attended, self.d_attn / self.heads
        if self.flash:
            # FlashAttention: the forward at FLASH_FORWARD of the 16-bit peak; the backward does 2.5× the forward's
            # FLOPs (it recomputes QKᵀ) at FLASH_BACKWARD. The term holds a third of forward + backward, since the
            # step counts each layer's forward three times (forward, and backward as two).
            flops = 2 * 2.0 * heads * s_q * s_k * d_h
            forward = flops / min(self.hw.rate16, self.stack.flash_forward * self.hw.peak16)
            backward = FLASH_BACKWARD_FLOPS * flops / min(self.hw.rate16, self.stack.flash_backward * self.hw.peak16)
            scores = (forward + backward) / 3
            score_stream = 0.0
        else:
            scores = self.gemm(s_q, d_h, s_k, heads, rate16=True) + self.gemm(s_q, s_k, d_h, heads, rate16=True)
            per_elem = 2 * ACT_BYTES + ((2 * ACT_BYTES + 1) if m.dropout else 0.0)  # softmax (+ dropout, mask)
            score_stream = self.elementwise(heads * s_q * s_k * per_elem)
        # elementwise: 2 norms (read + write), 2 residual adds (+dropout) — split over t only with SP
        unsplit = tokens * d * (2 * 2 * ACT_BYTES + 2 * (3 * ACT_BYTES + (1.0 if m.dropout else 0.0)))
        unsplit_s = self.elementwise(unsplit / (t if sp else 1))
        act_fn = self.elementwise(tokens * ffn / t * ACT_BYTES * self.act_passes)
        result = LayerTimes(dense, moe, scores + score_stream, unsplit_s + act_fn, unsplit_s + moe_stream)
        self._layer[key] = result
        return result

    def collective(self, op: str, nbytes: float, n: int, ranks_per_domain: int | None = None) -> float:
        """``comm.collective_seconds`` on this machine's fabric, memoised (layouts repeat collectives)."""
        if n < 2 or nbytes <= 0:
            return 0.0
        key = (op, nbytes, n, ranks_per_domain)
        found = self._collectives.get(key)
        if found is None:
            found = self._collectives[key] = collective_seconds(
                op, nbytes, n, self.fabric, ranks_per_domain=ranks_per_domain
            )
        return found

    def activation_inputs(self, k: Knobs, layout: Layout | None = None) -> ActivationInputs:
        """What the activation formula needs for one layout (``k``'s, as ``layout`` when the caller has it): the
        model, the workload and the stack's attention, selective recomputation and loss."""
        return ActivationInputs(
            model=self.model,
            workload=Workload(seq=self.seq, micro_batch=k.micro_batch, global_batch=self.batch),
            layout=layout or k.layout(),
            flash_attention=self.flash,
            selective_keeps=self.stack.selective_keeps,
            logit_bytes=self.stack.logit_bytes,
        )

    def memory_bytes(self, k: Knobs) -> float:
        """Per-GPU bytes of the most loaded pipeline stage, by ``napkin.engines.training_memory``'s own stage
        functions (so the planner and ``napkin memory`` agree), their parts memoised as the layer times are: the
        activations per shape (t, c, b, SP, recompute), the model states and gather buffers per split (stage, t, p,
        EP, ZeRO, DP·CP) and the micro-batches in flight per schedule (stage, p, v, m). With adapters,
        ``napkin.engines.finetune``'s."""
        if self.adapters is not None:
            parts_ = finetune_bytes(
                self.model,
                self.adapters,
                Workload(seq=self.seq, micro_batch=k.micro_batch),
                recompute=k.recompute,
                flash_attention=self.flash,
                gpus=k.gpus,
                sharding=k.sharding,
            )
            return sum(parts_.values())
        layout: Layout | None = None
        key = (k.tensor_parallel, k.context_parallel, k.micro_batch, k.sequence_parallel, k.recompute)
        parts = self._parts.get(key)
        if parts is None:
            layout = k.layout()
            parts = self._parts[key] = activation_parts(self.activation_inputs(k, layout), layout, self.element_bytes)
        micro = self.batch // (k.micro_batch * k.data_parallel)
        layers, p, fw = self.model.layers, k.pipeline_parallel, self.framework
        worst = 0.0
        for i in stage_indices(layers, p, ends_only=True):
            n = stage_size(layers, p, i)
            skey = (i, k.tensor_parallel, p, k.expert_parallel, k.sharding, k.data_parallel * k.context_parallel)
            states = self._states.get(skey)
            if states is None:
                layout = layout or k.layout()
                own = stage_states(i, n, self.model, self.params, layout, self.bpp)
                buffers = gather_buffers(n, own.dense_params, self.bpp, layout, fw)
                states = self._states[skey] = (sum(own.states.values()), buffers)
            hkey = (i, p, k.interleave, micro)
            held = self._held.get(hkey)
            if held is None:
                held = self._held[hkey] = in_flight(i, layout or k.layout(), micro)
            total = states[0] + sum(stage_activations(i, p, n, held, parts).values())
            worst = max(worst, total + fw.fixed + states[1] + fw.fragmentation * (total + states[1]))
        return worst

    def layer_passes(self, k: Knobs) -> LayerPasses:
        """For one micro-batch on one GPU (MoE and dense layers in the model's proportion): one layer's forward
        seconds, its recomputation (full: a forward; selective: the attention scores), one tensor-parallel
        collective (an all-reduce of T·d activations, which sequence parallelism splits into a reduce-scatter and
        an all-gather of the same bytes), the layer's collectives (2 per forward, 2 per backward, 2 more per
        recomputed forward), and the last stage's logits (output layer and loss). Memoised: the planner asks for
        each shape many times."""
        key = (
            k.tensor_parallel,
            k.context_parallel,
            k.micro_batch,
            k.expert_parallel,
            k.sequence_parallel,
            k.recompute,
        )
        found = self._passes.get(key)
        if found is not None:
            return found
        t, c, b = k.tensor_parallel, k.context_parallel, k.micro_batch
        dense, moe, scores, stream, moe_stream = self.layer(t, c, b, k.expert_parallel, k.sequence_parallel)
        tokens = b * self.seq / c
        total_layers = self.dense_layers + self.moe_layers
        f_dense, f_moe = self.dense_layers / total_layers, self.moe_layers / total_layers
        fwd_layer = f_dense * (dense + scores + stream) + f_moe * (moe + scores + moe_stream)
        if k.recompute is Recompute.full:
            extra_layer = fwd_layer
        elif k.recompute is Recompute.selective and not self.flash:
            extra_layer = scores
        elif k.recompute is Recompute.selective:  # under FlashAttention: what the stack's selective policy re-runs
            extra_layer = self.stack.selective_recomputes * fwd_layer
        else:
            extra_layer = 0.0
        collective = tp_layer = 0.0
        if t > 1:
            # with sequence parallelism a reduce-scatter and an all-gather, timed as the all-reduce they make up
            # (the same bytes; Korthikanti et al. 2022 §4.2.2)
            collective = self.collective(
                "all-reduce", tokens * self.d * ACT_BYTES, t, min(t, self.hw.fabric.domain_size)
            )
            tp_layer = _passes_collectives(k.recompute) * collective
        # logits on the last stage: (T×d)·(d×V/t), cross-entropy in fp32
        vocab = self.model.vocab / t
        logits = 3 * self.gemm(tokens, self.d, vocab, rate16=True) + self.stream(4 * 4.0 * tokens * vocab)
        found = self._passes[key] = LayerPasses(fwd_layer, extra_layer, collective, tp_layer, logits)
        return found

    def pace(self, k: Knobs, per_layer: float, logits: float) -> Pace:
        """The stage the pipeline waits for: (the heaviest stage's layers, the pacing stage's layers, whether it
        is the last stage with the logits) — the heaviest of an uneven split, or the last (the same stage when
        the layers divide evenly). ``per_layer``: one layer's seconds for a micro-batch, comm included."""
        layers, p = self.model.layers, k.pipeline_parallel
        heavy, last = -(-layers // p), stage_size(layers, p, p - 1)
        return Pace(heavy, heavy, False) if heavy * per_layer > last * per_layer + logits else Pace(heavy, last, True)

    def frozen_bytes(self) -> float:
        """Bytes of the frozen base as stored (the quantized linear weights, and the rest)."""
        assert self.adapters is not None
        return finetune_bytes(
            self.model, self.adapters, Workload(seq=self.seq), recompute=Recompute.none, flash_attention=True
        )["frozen base"]

    def layer_matmuls(self, k: Knobs) -> float:
        """Forward seconds of one layer's matmuls for one micro-batch on one GPU, MoE and dense layers in the
        model's proportion."""
        times = self.layer(k.tensor_parallel, k.context_parallel, k.micro_batch, k.expert_parallel, k.sequence_parallel)
        return (self.dense_layers * times.dense + self.moe_layers * times.moe) / (self.dense_layers + self.moe_layers)

    def frozen_layer(self, k: Knobs) -> float:
        """Seconds a frozen base changes in one layer's forward + backward for one micro-batch: no weight-gradient
        GEMMs (−1 forward's matmuls), and a quantized base dequantizes each weight to 16 bits before each of its
        matmuls (forward, input gradient, and the recomputed forward): read the packed weight, write 2 B."""
        if self.adapters is None:
            return 0.0
        matmuls = self.layer_matmuls(k)
        dequantize = 0.0
        if self.adapters.quantized:
            per_weight = base_bytes(self.adapters.format, self.adapters.dq, self.model.hidden) + ACT_BYTES
            weights = quantized_weights(self.model) / self.model.layers / k.tensor_parallel
            passes = 3 if k.recompute is Recompute.full else 2
            dequantize = passes * self.stream(weights * per_weight)
        return dequantize - matmuls

    def evaluate(self, k: Knobs, per_gpu_bytes: float | None = None) -> Terms:
        """(step s, compute s, exposed TP s, bubble s, exposed DP s, optimizer s, other s, per-GPU bytes);
        ``per_gpu_bytes``: ``memory_bytes(k)`` when the caller has it already."""
        t, p, d, c, e, v, b = (
            k.tensor_parallel,
            k.pipeline_parallel,
            k.data_parallel,
            k.context_parallel,
            k.expert_parallel,
            k.interleave,
            k.micro_batch,
        )
        m = self.batch // (b * d)
        dom = self.hw.fabric.domain_size
        tokens = b * self.seq / c
        fwd_layer, extra_layer, _, tp_layer, logits = self.layer_passes(k)
        frozen = self.frozen_layer(k)
        per_layer = 3 * fwd_layer + extra_layer + tp_layer + frozen
        heavy, n_layers, last_stage = self.pace(k, per_layer, logits)
        logits = logits if last_stage else 0.0
        total_layers = self.model.layers
        n_dense, n_moe = n_layers * self.dense_layers / total_layers, n_layers * self.moe_layers / total_layers
        layers_mb = n_layers * (3 * fwd_layer + extra_layer + frozen)
        # data parallel groups: dense weights over the DP group; routed experts, split over EP, over the DP·CP/EP
        # ranks that hold the same experts (Megatron's expert data parallelism); the heaviest stage's share
        share = heavy * p / total_layers
        dense_local = (self.params - self.expert_params) / (t * p) * share
        expert_local = self.expert_params / (t * p * e) * share
        if self.adapters is not None:  # only the adapters have gradients to reduce and states to update
            dense_local, expert_local = self.trainable / (t * p) * share, 0.0
        # the dense weights' gradients reduce over DP × CP (Megatron-LM's dp-cp group; FSDP shards over both)
        groups = [(dense_local, d * c, _near(d * c, dom, t))]
        if expert_local:
            edp = max(1, d * c // e)
            groups.append((expert_local, edp, _near(edp, dom, t * e)))
        # gradient accumulation without fusion: a micro-batch adds its new weight gradients into the stored ones
        # (read both, write one) in a kernel of its own: every micro-batch into Megatron-LM's fp32 main_grad
        # buffer, every one after the first under autograd (the first stores its .grad); sharded gradients
        # (ZeRO-2/3, FSDP) accumulate on the shard each micro-batch's reduce-scatter leaves
        adds = m if self.precision is Precision.mixed_fp32_grads else m - 1
        accumulate_mb = 0.0
        if not self.gradient_accumulation_fusion and adds > 0:
            sharded = "gradients" in SHARDED[k.sharding]
            grads = sum(params / n if sharded else params for params, n, _ in groups)
            accumulate_mb = self.stream(grads * self.accumulate_bytes / heavy, heavy)
        stage_mb = layers_mb + logits
        compute = m * stage_mb + adds * accumulate_mb
        tp_mb = n_layers * tp_layer
        slow = self.stack.slowdown
        # under the GEMMs they feed (Transformer Engine's userbuffers, async TP), which run with sequence parallelism
        # only (Megatron-Bridge turns tp_comm_overlap off without it): what the GEMMs cannot cover stays exposed,
        # and what they cover slows them by the stack's slowdown
        overlapped = self.stack.tp_overlap * m * tp_mb if k.sequence_parallel else 0.0
        gemms = m * n_layers * self.layer_matmuls(k) * (4 if k.recompute is Recompute.full else 3)
        tp = m * tp_mb - overlapped + _exposed(overlapped, gemms, slow)
        # pipeline p2p: per micro-batch each stage receives v activations and v gradients. Megatron's rank order
        # is tp-cp-dp-pp, so the next stage is t·c·d ranks away; scatter/gather: each TP rank sends 1/t of the
        # tensor and the receiving stage all-gathers it over its TP group.
        p2p_mb = 0.0
        if p > 1:
            activation = tokens * self.d * ACT_BYTES
            hop = self.collective("send-recv", activation / t, 2, 1 if t * c * d >= dom else 2)
            if t > 1:
                hop += self.collective("all-gather", activation, t, min(t, dom))
            p2p_mb = 2 * v * hop
        # sends overlap the other chunks' compute only under the interleaved schedule (Megatron-LM's
        # overlap_p2p_comm; 1F1B batches them in line: sources.P2P_OVERLAP)
        other = m * p2p_mb * (1.0 - (self.stack.p2p_overlap if v > 1 else 0.0))
        bubble = pipeline_bubble(p, v, heavy * per_layer + accumulate_mb + p2p_mb)
        # expert parallel: dispatch + combine, forward and backward (+ recompute). Each TP rank dispatches its 1/t
        # of the tokens (sequence parallelism splits them) over EP, then all-gathers what it received over TP for
        # its shard of the experts; the combine reverses both (Megatron-LM MoEAlltoAllTokenDispatcher)
        if e > 1 and self.moe_layers:
            routed = tokens * self.model.top_k * self.d * ACT_BYTES
            per = self.collective("all-to-all", routed / (t if k.sequence_parallel else 1), e, _near(e, dom, t))
            if t > 1 and k.sequence_parallel:
                per += self.collective("all-gather", routed, t, min(t, dom))
            other += m * _passes_collectives(k.recompute) * per * n_moe * (1.0 - self.stack.a2a_overlap)
        # context parallel: all-gather K, V forward, reduce-scatter their gradients backward, hidden under attention
        if c > 1:
            kv = 2 * tokens * c * self.model.n_kv * self.model.d_head * ACT_BYTES / t
            near = _near(c, dom, t)
            cp = self.collective("all-gather", kv, c, near) * (2 if k.recompute is Recompute.full else 1)
            cp += self.collective("reduce-scatter", kv, c, near)
            scores = self.layer(t, c, b, e, k.sequence_parallel).scores
            other += m * (n_dense + n_moe) * max(0.0, cp - 3 * scores)
        dp = 0.0
        # FSDP-QLoRA: the frozen base is sharded too, and gathered per layer, never reduced
        frozen = self.frozen_bytes() * share / (t * p) if self.adapters is not None else 0.0
        if k.sharding is Sharding.hsdp:
            # FSDP within the scale-up domain, each micro-batch; the shards' gradients all-reduced across the
            # domains' replicas once a step, under the last backward
            inside = [(params, near, near) for params, _, near in groups]
            dp = m * self.fsdp_exposed(inside, n_dense + n_moe, fwd_layer, 2 * fwd_layer + extra_layer, frozen)
            sync = sum(
                self.collective("all-reduce", params * self.reduce_bytes / near, n // near, 1)
                for params, n, near in groups
            )
            dp += _exposed(sync, 2 * n_layers * fwd_layer, slow) if self.overlap_grad_reduce else sync
        elif k.sharding in SHARDED_PARAMS:
            dp = m * self.fsdp_exposed(groups, n_dense + n_moe, fwd_layer, 2 * fwd_layer + extra_layer, frozen)
        else:
            sync = 0.0
            for params, n, near in groups:
                if k.sharding is Sharding.none:
                    sync += self.collective("all-reduce", params * self.reduce_bytes, n, near)
                else:
                    sync += self.collective("reduce-scatter", params * self.reduce_bytes, n, near)
                    sync += self.collective("all-gather", params * self.param_bytes, n, near)
            dp = _exposed(sync, 2 * n_layers * fwd_layer, slow) if self.overlap_grad_reduce else sync
        # optimizer: read and write every local state byte once (sharded states over their group)
        optimizer = 0.0
        for params, n, near in groups:
            ranks = near if k.sharding is Sharding.hsdp else n
            states = sum(v / ranks if comp in SHARDED[k.sharding] else v for comp, v in self.bpp.breakdown.items())
            optimizer += self.stream(2 * params * states)
        optimizer += self.stack.step_overhead
        total = compute + tp + bubble + dp + optimizer + other
        memory = self.memory_bytes(k) if per_gpu_bytes is None else per_gpu_bytes
        return Terms(total, compute, tp, bubble, dp, optimizer, other, memory)

    def fsdp_exposed(
        self, groups: list[tuple[float, int, int]], layers: float, forward: float, backward: float, frozen: float = 0.0
    ) -> float:
        """Exposed seconds of FSDP / ZeRO-3 for one micro-batch on one GPU, as it runs: each layer's parameters
        all-gathered before its forward and again before its backward (resharded after the forward), its
        gradients reduce-scattered after its backward. With a prefetch depth of at least one layer the next
        layer's collectives overlap this layer's compute, so a layer exposes only what its compute cannot cover
        (and slows that compute by the stack's slowdown); the first gather and the last reduce-scatter have
        nothing to hide under. Without prefetch every collective is exposed. ``frozen``: bytes of a frozen base
        (FSDP-QLoRA) gathered with the layers."""
        units = max(1.0, layers)
        gather = reduce = 0.0
        for params, n, near in groups:
            gather += self.collective("all-gather", params * self.param_bytes / units, n, near)
            reduce += self.collective("reduce-scatter", params * self.reduce_bytes / units, n, near)
        if frozen:  # a frozen base's bytes: gathered with the layer, never reduced
            _, n, near = groups[0]
            gather += self.collective("all-gather", frozen / units, n, near)
        if self.stack.prefetch == 0:
            return units * (2 * gather + reduce)
        slow = self.stack.slowdown
        ahead = units - 1
        return (
            gather
            + ahead * _exposed(gather, forward, slow)
            + ahead * _exposed(gather + reduce, backward, slow)
            + reduce
        )

    # --- FLOPs --------------------------------------------------------------------------------
    def model_flops_per_token(self) -> float:
        """6N (active) + attention: what MFU counts (napkin.engines.compute.flops_per_token); with adapters
        4N + 6T + attention, the base being frozen."""
        return self._flops(Recompute.none).model

    def hardware_flops_per_token(self, recompute: Recompute) -> float:
        return self._flops(recompute).hardware

    def _flops(self, recompute: Recompute) -> FlopsPerToken:
        from napkin.engines.compute import flops_per_token

        n = float(self.model.active_params())
        return flops_per_token(
            n + self.trainable,
            self.model,
            self.seq,
            causal=self.causal,
            recompute=recompute,
            frozen=n if self.adapters else 0.0,
        )


# ------------------------------------------------------------------------------------------ result

BREAKDOWN: Final = ("compute", "tensor_parallel", "bubble", "data_parallel", "optimizer", "other")


class StepResult(Result):
    """One training step: seconds with the breakdown, throughput, predicted MFU/HFU, memory."""

    title: ClassVar[str] = "Training step"
    headline: ClassVar[tuple[str, ...]] = ("layout_text", "step_seconds", "mfu", "fits")

    model: str
    cluster: str
    hardware: str
    stack: str = Field(default="none", description="the software stack the prediction assumes (napkin stack list)")
    dtype: str = Field(description="number format of the matmuls; MFU is against its dense peak")
    layout: Layout
    micro_batch: int
    global_batch: int
    stage_layers: list[int] = Field(
        description="transformer layers on each pipeline stage, first to last; empty "
        "for a pipeline of more than 64 stages (see the uneven-split note)"
    )
    overlap_grad_reduce: bool = Field(description="the gradient reduction overlaps the last backward")
    gradient_accumulation_fusion: bool = Field(description="weight-gradient GEMMs accumulate into the gradients")
    seq: int
    step_seconds: float
    breakdown: dict[str, float] = Field(description="seconds per step by term; they add up to step_seconds")
    tokens_per_second: float
    mfu: float = Field(description="model FLOPs / (G × dense peak × step time)")
    hfu: float = Field(description="model + recomputation FLOPs / (G × dense peak × step time)")
    flops_per_token: float
    hardware_flops_per_token: float
    achieved_flops_per_gpu: float = Field(description="hardware FLOP/s per GPU (what Narayanan Table 1 reports)")
    peak_flops: float
    matmul_flops: float = Field(description="achievable matmul FLOP/s used (R)")
    matmul_source: str
    per_gpu_bytes: float
    memory_bytes: float
    reserve_bytes: float = Field(default=0.0, description="memory kept free per GPU (--reserve)")
    fits: bool
    validated: bool = Field(default=True, description="inside the region the stack's published runs validate")
    finetune: str = Field(default="full", description="full, lora or qlora")
    lora_rank: int | None = None
    lora_targets: list[str] | None = None
    trainable_params: int | None = Field(default=None, description="adapter parameters (lora/qlora)")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def gpus(self) -> int:
        return self.layout.gpus

    @computed_field  # type: ignore[prop-decorator]
    @property
    def layout_text(self) -> str:
        return self.layout.describe() + f" · b {self.micro_batch}"

    @computed_field  # type: ignore[prop-decorator]
    @property
    def microbatches(self) -> int:
        """Micro-batches per data-parallel replica and step."""
        return self.global_batch // (self.micro_batch * self.layout.dp)

    def heading(self) -> str:
        return (
            f"Training step: {self.model} on {self.gpus:,} × {self.hardware} ({self.cluster}, {self.dtype}, "
            f"{self.stack})"
        )

    def rows(self) -> list[tuple[str, str]]:
        rows = [("layout", self.layout_text)]
        if self.finetune != "full" and self.trainable_params is not None:
            rows.append(
                (
                    "fine-tuning",
                    f"{self.finetune}, rank {self.lora_rank} on {', '.join(self.lora_targets or [])}: "
                    f"{self.trainable_params:,} trainable",
                )
            )
        rows += [
            (
                "batch",
                f"{self.global_batch:,} × {self.seq:,} tokens; micro-batch {self.micro_batch}, "
                f"{self.microbatches} per pipeline",
            ),
            ("step time", format_duration(self.step_seconds)),
        ]
        for name in BREAKDOWN:
            value = self.breakdown[name]
            share = value / self.step_seconds if self.step_seconds else 0.0
            rows.append((f"  {name.replace('_', ' ')}", f"{format_duration(value)} ({format_percent(share)})"))
        rows += [
            ("tokens/s", f"{self.tokens_per_second:,.0f} ({self.tokens_per_second / self.gpus:,.0f} per GPU)"),
            ("MFU", f"{self.mfu:.3f} predicted (HFU {self.hfu:.3f})"),
            (
                "FLOP/s per GPU",
                f"{format_rate(self.achieved_flops_per_gpu)} hardware; matmul rate {format_rate(self.matmul_flops)}",
            ),
            (
                "memory per GPU",
                f"{format_bytes(self.per_gpu_bytes)} of {format_bytes(self.memory_bytes)}"
                + (f" less {format_bytes(self.reserve_bytes)} reserved" if self.reserve_bytes else "")
                + (": fits" if self.fits else ": does NOT fit"),
            ),
        ]
        return rows

    def caption(self) -> str:
        return "step = compute + exposed TP comm + bubble + exposed DP comm + optimizer + other (p2p, EP, CP)"


def _explain(sm: StepModel, k: Knobs, terms: Terms, steps: list[Step]) -> None:
    hw = sm.hw
    m = sm.batch // (k.micro_batch * k.data_parallel)
    passes = sm.layer_passes(k)
    pace = sm.pace(k, 3 * passes.forward + passes.recompute + passes.tensor_parallel, passes.logits)
    paced, last_stage = pace.layers, pace.last_stage
    layers = sm.model.layers
    split_text = (
        "–".join(str(n) for n in stage_layers(layers, k.pipeline_parallel))
        if k.pipeline_parallel <= 8
        else f"{layers // k.pipeline_parallel}–{-(-layers // k.pipeline_parallel)} layers"
    )
    flash = (
        [
            step(
                "attention (FlashAttention)",
                f"forward FLOPs / (η_f × 16-bit peak) + {FLASH_BACKWARD_FLOPS:g} × forward FLOPs / (η_b × 16-bit peak)",
                f"η_f = {FLASH_FORWARD:.2f}, η_b = {FLASH_BACKWARD:.3f}, 16-bit peak {format_rate(hw.peak16)}",
                "each layer's attention time",
                sources.FLASH_EFFICIENCY,
            ),
        ]
        if sm.flash
        else []
    )
    steps += [
        step(
            "achievable matmul rate R",
            "saved bench, else published MAMF, else 0.8 × peak",
            f"{hw.name}: R / dense peak = {format_rate(hw.rate)} / {format_rate(hw.peak)}"
            + (
                f"; attention core and output layer in bf16 at {format_rate(hw.rate16)}" if hw.rate16 != hw.rate else ""
            ),
            f"{format_rate(hw.rate)} ({format_percent(hw.rate / hw.peak)} of peak)",
            hw.rate_source + (f"; {sources.TE_FP8_SCOPE}" if hw.rate16 != hw.rate else ""),
        ),
        step(
            "matmul time",
            "2mkn / (R·η_size·q) + bytes / (BW_HBM·η_mem), q = m·n / (m, n padded to tiles ≤ 128)",
            f"R = {format_rate(hw.rate)}, BW_HBM = {format_bandwidth(hw.hbm)}, η_size = "
            + ", ".join(f"{e:.2f} ≥ {s / 1e9:g} GFLOP" for s, e in SIZE_EFFICIENCY),
            "each GEMM's time",
            f"{sources.NO_OVERLAP}; {sources.TILE_QUANTIZATION}; {sources.MATMUL_SIZE}",
        ),
        step(
            "memory-bound work",
            "bytes / (BW_HBM·η_mem(size)); norms, residuals, softmax, activation fn, CE, optimizer",
            f"η_mem = {', '.join(f'{e:g} ≥ {s / 1e6:g} MB' for s, e in MEMORY_EFFICIENCY)}",
            "each kernel's time",
            f"{sources.HBM_EFFICIENCY}; {sources.ELEMENTWISE}",
        ),
        *flash,
        step(
            "compute",
            "m × (3 × forward + recompute) per stage, + logits on the last stage"
            + (
                ""
                if sm.gradient_accumulation_fusion
                else ", + adds × gradient accumulation (local gradients × (stored + stored + new) B / (BW_HBM·η_mem)), "
                "adds = m into fp32 main grads, else m − 1"
            ),
            f"m = B/(b·DP) = {sm.batch}/({k.micro_batch}·{k.data_parallel}) = {m}; the stage that sets the pace holds "
            f"{paced} layers"
            + (" and the logits" if last_stage else f" (of {k.pipeline_parallel} stages split {split_text})")
            + (
                "; accumulation fused into the weight-gradient GEMMs"
                if sm.gradient_accumulation_fusion
                else f"; unfused accumulation, {sm.accumulate_bytes:g} B per local parameter"
            ),
            format_duration(terms.compute),
            f"{sources.NARAYANAN_RECOMPUTE}; {sources.NO_OVERLAP}; {sources.GRADIENT_ACCUMULATION}",
        ),
        step(
            "tensor-parallel comm (exposed)",
            "m × the stage's layers × (4 + 2 if full recompute) × all-reduce(b·s·d·2 B, t)"
            + (", the overlapped share exposed beyond the layers' GEMMs" if sm.stack.tp_overlap else ""),
            f"t = {k.tensor_parallel}"
            + (", SP: reduce-scatter + all-gather, timed as that all-reduce" if k.sequence_parallel else "")
            + (
                f"; {sm.stack.tp_overlap:g} of it under the GEMMs (with SP only)"
                if sm.stack.tp_overlap and k.tensor_parallel > 1
                else ""
            ),
            format_duration(terms.tensor_parallel),
            f"{sources.TP_COMM}; {sources.THAKUR_ALPHA_BETA}"
            + (f"; {sources.TP_OVERLAP}" if sm.stack.tp_overlap else ""),
        ),
        step(
            "pipeline bubble",
            "(p − 1)/v × one micro-batch's time on the heaviest stage (compute + TP comm + unfused gradient "
            "accumulation + sends)",
            f"p = {k.pipeline_parallel}, v = {k.interleave}, m = {m}: "
            f"(p−1)/(v·m) = {(k.pipeline_parallel - 1) / (k.interleave * m):.3f}",
            format_duration(terms.bubble),
            sources.PIPELINE_BUBBLE,
        ),
        step(
            "data-parallel comm (exposed)",
            "sync − overlap with the last backward (ZeRO-3: per micro-batch)"
            if sm.overlap_grad_reduce
            else "sync, after the last backward (no overlap)",
            f"DP = {k.data_parallel}, {k.sharding}",
            format_duration(terms.data_parallel),
            f"{sources.DP_OVERLAP}; {sources.NCCL_TESTS_BUSBW}",
        ),
        step(
            "optimizer step",
            "2 × local state bytes / (BW_HBM·η_mem)",
            f"{sm.bpp.total:g} B per parameter",
            format_duration(terms.optimizer),
            sources.HBM_EFFICIENCY,
        ),
        step(
            "other (p2p, EP all-to-all, CP)",
            "2v × (send b·s·d·2 B / t + all-gather over t) per micro-batch; all-to-all of b·s·k·d·2 B / t (SP) "
            "+ all-gather over t, 4 per MoE layer (+2 recomputed); CP",
            f"p = {k.pipeline_parallel}, EP = {k.expert_parallel}, CP = {k.context_parallel}",
            format_duration(terms.other),
            f"{sources.SCATTER_GATHER}; {sources.CALCULON_NETWORK}; {sources.MOE_DISPATCH}",
        ),
        step("step time", "sum of the terms", "", format_duration(terms.step_seconds), "napkin step model"),
    ]


def outside_validation(sm: StepModel, k: Knobs) -> list[str]:
    """What of a layout the stack's published validation runs do not cover (empty without a stack profile)."""
    if sm.validated is None:
        return []
    return sm.validated.outside(k.layout().gpus, sm.seq, k.sharding, _spans_nodes(k, sm.hw), sm.hw.dtype)


def _spans_nodes(k: Knobs, hw: Machine) -> bool:
    """Whether the data-parallel group leaves the scale-up domain (Megatron order: TP, CP, then DP)."""
    return k.data_parallel > 1 and k.tensor_parallel * k.context_parallel * k.data_parallel > hw.fabric.domain_size


def build_result(sm: StepModel, k: Knobs, name: str, terms: Terms | None = None) -> StepResult:
    """A ``StepResult`` for one layout; memory from ``napkin.engines.training_memory.memory`` itself."""
    terms = terms or sm.evaluate(k)
    total = terms.step_seconds
    layout = k.layout()
    gpus = layout.gpus
    mem: Any
    if sm.adapters is not None:
        mem = finetune_memory(
            sm.model,
            sm.adapters,
            Workload(seq=sm.seq, micro_batch=k.micro_batch),
            hardware=sm.hw.name,
            capacity=capacity(sm.hw.profile),
            recompute=k.recompute,
            flash_attention=sm.flash,
            gpus=gpus,
            sharding=k.sharding,
            reserve_bytes=sm.reserve,
        )
    else:
        mem = memory(
            sm.params,
            sm.hw.profile,
            optimizer=sm.optimizer,
            precision=sm.precision,
            gpus=gpus,
            layout=layout,
            activations=sm.activation_inputs(k),
            reserve_bytes=sm.reserve,
            framework=sm.stack.framework(),
        )
    tokens = sm.batch * sm.seq
    fpt, hfpt = sm.model_flops_per_token(), sm.hardware_flops_per_token(k.recompute)
    peak_total = gpus * sm.hw.peak * total
    steps: list[Step] = list(sm.stack_steps)
    _explain(sm, k, terms, steps)
    steps.append(
        step(
            "MFU",
            "tokens per step × model FLOPs per token / (G × peak × step time)",
            f"{tokens:,} × {fpt:.4g} / ({gpus:,} × {format_rate(sm.hw.peak)} × {total:.4g} s)",
            f"{tokens * fpt / peak_total:.3f}",
            sources.PALM_MFU,
        )
    )
    steps.extend(mem.steps)
    outside = outside_validation(sm, k)
    return StepResult(
        model=name,
        cluster=sm.hw.cluster,
        hardware=sm.hw.name,
        stack=sm.stack.name,
        layout=layout,
        micro_batch=k.micro_batch,
        global_batch=sm.batch,
        stage_layers=list(stage_layers(sm.model.layers, k.pipeline_parallel))
        if k.pipeline_parallel <= MAX_LISTED_STAGES
        else [],
        overlap_grad_reduce=sm.overlap_grad_reduce,
        gradient_accumulation_fusion=sm.gradient_accumulation_fusion,
        seq=sm.seq,
        step_seconds=total,
        breakdown=terms.breakdown(),
        tokens_per_second=tokens / total,
        mfu=tokens * fpt / peak_total,
        hfu=tokens * hfpt / peak_total,
        flops_per_token=fpt,
        hardware_flops_per_token=hfpt,
        achieved_flops_per_gpu=tokens * hfpt / (gpus * total),
        peak_flops=sm.hw.peak,
        matmul_flops=sm.hw.rate,
        matmul_source=sm.hw.rate_source,
        dtype=sm.hw.dtype,
        per_gpu_bytes=mem.per_gpu_bytes,
        memory_bytes=mem.memory_bytes,
        reserve_bytes=sm.reserve,
        fits=mem.fits,
        steps=steps,
        warnings=list(mem.warnings),
        validated=not outside,
        finetune=str(sm.adapters.finetune) if sm.adapters else "full",
        lora_rank=sm.adapters.rank if sm.adapters else None,
        lora_targets=list(sm.adapters.targets) if sm.adapters else None,
        trainable_params=int(sm.trainable) if sm.adapters else None,
        notes=[
            n
            for n in (
                sources.ZERO3_MEASURED
                if k.sharding in SHARDED_PARAMS and _spans_nodes(k, sm.hw) and sm.stack.scale_out == 1.0
                else None,
                uneven_note(sm.model.layers, k.pipeline_parallel),
                f"outside the {sm.stack.name} stack's validated region: {'; '.join(outside)}" if outside else None,
            )
            if n
        ],
    )


def offered_sharding(offers: Offers, sharding: Sharding) -> bool:
    """Whether a stack offers ``sharding`` (FSDP and ZeRO-3 are one strategy under two names)."""
    names = set(offers.sharding)
    if names & FULL_SHARD:
        names |= FULL_SHARD
    return sharding in names


def _check_offered(offers: Offers, layout: Layout, stack: str) -> None:
    """A layout the stack cannot run is an error naming the field and what the stack offers."""
    for field, degree, offered, what in (
        ("tensor_parallel", layout.tensor_parallel, offers.tensor, "tensor parallelism"),
        ("pipeline_parallel", layout.pipeline_parallel, offers.pipeline, "pipeline parallelism"),
        ("context_parallel", layout.context_parallel, offers.context, "context parallelism"),
        ("expert_parallel", layout.expert_parallel, offers.expert, "expert parallelism"),
    ):
        if degree > 1 and not offered:
            raise UsageError(f"{field}: the stack {stack} has no {what}; use 1, or another --stack", field=field)
    if layout.sequence_parallel and not offers.sequence:
        raise UsageError(f"sequence_parallel: the stack {stack} has no sequence parallelism", field="sequence_parallel")
    if layout.interleave > 1 and "interleaved" not in offers.schedules:
        raise UsageError(f"interleave: the stack {stack} has no interleaved schedule; use 1", field="interleave")
    if not offered_sharding(offers, layout.sharding):
        raise UsageError(
            f"sharding: the stack {stack} offers {', '.join(offers.sharding)}, not {layout.sharding}", field="sharding"
        )


def check_knobs(sm: StepModel, layout: Layout, micro_batch: int, gpus: int, batch_tokens: int | None = None) -> Knobs:
    """The layout resolved on ``gpus`` and checked against the model and the batch (errors name fields);
    ``batch_tokens``: the global batch was given in tokens, so an error about it names that."""
    resolved = layout.resolve(gpus, sm.model)
    if resolved.tensor_parallel > sm.hw.fabric.domain_size:
        raise UsageError(
            f"tensor_parallel ({resolved.tensor_parallel}) exceeds the scale-up domain of {sm.hw.cluster} "
            f"({sm.hw.fabric.domain_size} devices)",
            field="tensor_parallel",
        )
    work = Workload(seq=sm.seq, micro_batch=micro_batch, global_batch=sm.batch)
    try:
        m = work.microbatches(resolved.dp)
    except ValueError as exc:
        if batch_tokens is None:
            raise UsageError(str(exc), field="global_batch", also=("micro_batch",)) from None
        raise UsageError(
            f"global_batch_tokens: {batch_tokens:,} tokens make {sm.batch:,} sequences of {sm.seq:,}, "
            f"which must be {work.batch_rule(resolved.dp)}",
            field="global_batch_tokens",
            also=("micro_batch",),
        ) from None
    if resolved.context_parallel > 1 and sm.seq % (2 * resolved.context_parallel):
        raise UsageError(
            f"context_parallel: seq ({sm.seq:,}) must split into 2 × {resolved.context_parallel} equal chunks "
            "(Megatron-LM's load-balanced causal context parallelism)",
            field="context_parallel",
            also=("seq",),
        )
    tokens = micro_batch * sm.seq // resolved.context_parallel
    if resolved.sequence_parallel and tokens % resolved.tensor_parallel:
        raise UsageError(
            f"sequence_parallel: a micro-batch's {tokens:,} token{'s' if tokens != 1 else ''} must split evenly over "
            f"tensor_parallel ({resolved.tensor_parallel})",
            field="sequence_parallel",
            also=("tensor_parallel", "seq"),
        )
    if sm.offers is not None:
        _check_offered(sm.offers, resolved, sm.stack.name)
    if resolved.dp * resolved.context_parallel == 1 and resolved.sharding is not Sharding.none:
        resolved = resolved.model_copy(update={"sharding": Sharding.none})  # one replica: nothing to shard over
    if resolved.interleave > 1 and m % resolved.pipeline_parallel:
        raise UsageError(
            f"interleave: the interleaved schedule needs a number of micro-batches per replica ({m}) that is a "
            f"multiple of pipeline_parallel ({resolved.pipeline_parallel}), as Megatron-LM requires; change "
            "global_batch or micro_batch",
            field="interleave",
            also=("pipeline_parallel", "global_batch", "micro_batch"),
        )
    return Knobs.of(resolved, micro_batch)


__all__ = [
    "COMPONENTS",
    "Knobs",
    "Machine",
    "StepModel",
    "StepResult",
    "build_result",
    "check_knobs",
    "machine",
    "pipeline_bubble",
]
