"""The per-layer costs of the step-time model (``LayerModel``): each GEMM's math and memory traffic, the layer's
memory-bound work, attention, the tensor-parallel collectives, all memoised by shape; ``StepModel``
(``napkin.engines.step.model``) adds them up into a step."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from napkin.engines.compute import FlopsPerToken
    from napkin.engines.finetune import Adapters

from napkin.domain.choices import Optimizer, Precision, Recompute
from napkin.domain.layout import Layout
from napkin.domain.model import Model
from napkin.engines.comm import collective_seconds
from napkin.engines.memory import (
    ActivationInputs,
    activation_element_bytes,
    bytes_per_param,
)
from napkin.engines.step.knobs import (
    Knobs,
    LayerPasses,
    LayerTimes,
    ShapeCosts,
    SplitCosts,
    collectives_per_layer,
)
from napkin.engines.step.machine import (
    ACT_BYTES,
    CAST_WRITTEN,
    FLASH_BACKWARD_FLOPS,
    LOW_PRECISION,
    SIZE_EFFICIENCY,
    SIZE_REFERENCE,
    Machine,
    by_size,
    memory_efficiency,
    padded,
)
from napkin.engines.step.memory import StepMemory
from napkin.results.explain import Step
from napkin.systems.stack import Offers, StackKnobs, Validated


class LayerModel:
    """One model, sequence length, global batch and machine as plain floats, and what one layer costs on one GPU
    for one micro-batch under a layout (``StepModel`` builds the step from it)."""

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
        self.trainable = 0.0
        if adapters:  # adapters' modules are imported only when there are adapters (start-up time)
            from napkin.engines.lora import lora_params

            self.trainable = float(lora_params(model, adapters.rank, adapters.targets))
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
        #: the recipe's share of the math scaled to the 8-bit rate (RECIPE_AT_8_BIT), and the bytes per element its
        #: cast writes: one 8-bit copy, or NVFP4's row- and column-wise copies (CAST_WRITTEN)
        self.recipe_scale = hw.rate / hw.rate8 if hw.rate8 else 1.0
        self.cast_written = CAST_WRITTEN.get(hw.dtype, 1.0)
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
        #: StepModel's: stage sizes per pipeline degree, a layer's costs per shape, a step's per split and ZeRO stage
        self._stage_sizes: dict[int, tuple[int, int]] = {}
        self._shapes: dict[tuple[Any, ...], ShapeCosts] = {}
        self._splits: dict[tuple[Any, ...], SplitCosts] = {}
        self.memory = StepMemory(
            model,
            seq,
            global_batch,
            optimizer=optimizer,
            precision=precision,
            flash_attention=self.flash,
            stack=st,
            adapters=adapters,
            dtype=hw.dtype if self.fp8 else "bf16",
            domain=hw.fabric.domain_size,
        )

    def gemm(
        self, m: float, k: float, n: float, count: float = 1.0, *, rate16: bool = False, at_once: float | None = None
    ) -> float:
        """Seconds for ``count`` (m×k)·(k×n) GEMMs: math plus memory traffic (not overlapped), with tile
        quantization of the m×n output. ``rate16``: a matmul that stays 16-bit under an fp8 recipe. ``at_once``: how
        many of the ``count`` run together (None: all, one batched call), which sets the size efficiency."""
        if m <= 0 or k <= 0 or n <= 0:
            return 0.0
        flops = 2.0 * m * k * n
        q = (m * n) / (padded(m) * padded(n))  # padded tiles waste math, not memory traffic
        nbytes = ACT_BYTES * (m * k + k * n + m * n)
        peak_rate = self.rate16 if rate16 else self.rate
        # one (batched) call, padded; Calculon's table is by the FLOPs of an A100 bf16 call: a faster rate reaches
        # the same efficiency only with as many more FLOPs (the same call duration)
        together = count if at_once is None else min(count, at_once)
        rate = peak_rate * by_size(SIZE_EFFICIENCY, flops * together / q * SIZE_REFERENCE / peak_rate)
        math_s = flops / (rate * q)
        cast = 0.0
        if self.fp8 and not rate16:
            # the fp8 recipe: its input is cast (16-bit read, low-precision copies written) and scaled, and the
            # stack's own cost (amax reductions, scale updates, transposes) as a share of the math at the 8-bit rate
            # (RECIPE_AT_8_BIT: a narrower format's GEMM is faster, its recipe's HBM passes are not)
            math_s *= 1.0 + self.stack.fp8_overhead * self.recipe_scale
            cast = self.stream((ACT_BYTES + self.cast_written) * m * k)
        return count * (math_s + cast + nbytes / (self.hw.hbm * self.stack.hbm * memory_efficiency(nbytes)))

    def stream(self, nbytes: float, count: float = 1.0) -> float:
        """Seconds to move ``count`` kernels of ``nbytes`` through HBM."""
        return count * nbytes / (self.hw.hbm * self.stack.hbm * memory_efficiency(nbytes)) if nbytes > 0 else 0.0

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
            # the local experts' GEMMs as the stack runs them: so many at once (Transformer Engine's grouped GEMM on
            # Hopper: 4 streams), else one batched call of them all
            local = m.experts / e
            streams = self.stack.grouped_streams or local
            moe = (
                proj
                + self.gemm(tokens, d, m.experts)
                + self.gemm(routed, d, (self.mm - 1) * fe / t, local, at_once=streams)
            )
            moe += self.gemm(routed, fe / t, d, local, at_once=streams)
            if m.shared_experts:
                width = m.shared_experts * fe / t
                moe += self.gemm(tokens, d, (self.mm - 1) * width) + self.gemm(tokens, width, d)
            width = (tokens * m.top_k + tokens * m.shared_experts) * fe / t
            moe_stream = self.elementwise(width * ACT_BYTES * self.act_passes)
        # attention scores: QKᵀ and A·V over (a/t)·b heads of s_q × s_k
        heads = self.heads / t * b
        s_q, s_k, d_h = self.seq / c, self.attended, self.d_attn / self.heads
        if self.flash:
            # the term holds a third of forward + backward, since the step counts each layer's forward three times
            # (forward, and backward as two)
            forward, backward = self.flash_passes(t, c, b)
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

    def flash_passes(self, t: int, c: int, b: int) -> tuple[float, float]:
        """(forward, backward) seconds of one layer's fused attention for one micro-batch on one GPU: QKᵀ and A·V
        over (a/t)·b heads of s/c queries × the keys each attends; the forward at FLASH_FORWARD of the 16-bit peak,
        the backward 2.5× the forward's FLOPs (it recomputes QKᵀ) at FLASH_BACKWARD."""
        heads = self.heads / t * b
        flops = 2 * 2.0 * heads * (self.seq / c) * self.attended * (self.d_attn / self.heads)
        forward = flops / min(self.hw.rate16, self.stack.flash_forward * self.hw.peak16)
        backward = FLASH_BACKWARD_FLOPS * flops / min(self.hw.rate16, self.stack.flash_backward * self.hw.peak16)
        return forward, backward

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
        """What the activation formula needs for one layout (``StepMemory.inputs``)."""
        return self.memory.inputs(k, layout)

    def memory_bytes(self, k: Knobs) -> float:
        """Per-GPU bytes of the most loaded pipeline stage (``StepMemory.per_gpu``)."""
        return self.memory.per_gpu(k)

    def layer_passes(self, k: Knobs) -> LayerPasses:
        """For one micro-batch on one GPU (MoE and dense layers in the model's proportion): one layer's forward
        seconds, its recomputation (full: a forward; selective: the attention scores), one tensor-parallel
        collective (an all-reduce of T·d activations, which sequence parallelism splits into a reduce-scatter and
        an all-gather of the same bytes), the layer's collectives (2 per forward, 2 per backward, 2 more per
        recomputed forward), and the last stage's logits (output layer and loss). Memoised: the planner asks for
        each shape many times."""
        key = k.shape
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
            tp_layer = collectives_per_layer(k.recompute) * collective
        # logits on the last stage: (T×d)·(d×V/t) forward and backward, and the loss's HBM traffic over them
        vocab = self.model.vocab / t
        logits = 3 * self.gemm(tokens, self.d, vocab, rate16=True) + self.stream(self.stack.loss_bytes * tokens * vocab)
        found = self._passes[key] = LayerPasses(fwd_layer, extra_layer, collective, tp_layer, logits)
        return found

    def frozen_bytes(self) -> float:
        """Bytes of the frozen base as stored (``StepMemory.frozen``)."""
        return self.memory.frozen()

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
            from napkin.engines.finetune import base_bytes
            from napkin.engines.lora import quantized_weights

            per_weight = base_bytes(self.adapters.format, self.adapters.dq, self.model.hidden) + ACT_BYTES
            weights = quantized_weights(self.model) / self.model.layers / k.tensor_parallel
            passes = 3 if k.recompute is Recompute.full else 2
            dequantize = passes * self.stream(weights * per_weight)
        return dequantize - matmuls

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
