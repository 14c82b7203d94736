"""The step-time model (``StepModel``): one layout scored in plain floats from the per-layer costs
(``napkin.engines.step.layers``), so the planner can score thousands of layouts a second."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass

from napkin.domain.choices import Precision, Recompute, Sharding
from napkin.domain.layout import stage_size
from napkin.engines.memory import (
    SHARDED,
)
from napkin.engines.memory.states import ranks_near
from napkin.engines.step.host import all_to_all, moe_host_excess
from napkin.engines.step.knobs import (
    Knobs,
    LayerPasses,
    Pace,
    ShapeCosts,
    SplitCosts,
    Terms,
    exposed_seconds,
    pipeline_bubble,
)
from napkin.engines.step.layers import LayerModel
from napkin.engines.step.machine import (
    ACT_BYTES,
    SHARDED_PARAMS,
)
from napkin.engines.step.offload import offload_seconds
from napkin.engines.step.ring import ring_seconds
from napkin.systems.stack import StackKnobs


class StepModel(LayerModel):
    """The step-time model for one model, sequence length, global batch and machine; ``evaluate`` scores a
    layout in plain floats (the planner calls it thousands of times, so per-layer times are memoised, and what
    depends on the layout's shape or its split alone)."""

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
    def pace(self, k: Knobs, per_layer: float, logits: float) -> Pace:
        """The stage the pipeline waits for: (the heaviest stage's layers, the pacing stage's layers, whether it
        is the last stage with the logits) — the heaviest of an uneven split, or the last (the same stage when
        the layers divide evenly). ``per_layer``: one layer's seconds for a micro-batch, comm included."""
        heavy, last = self.stage_sizes(k.pipeline_parallel)
        return Pace(heavy, heavy, False) if heavy * per_layer > last * per_layer + logits else Pace(heavy, last, True)

    def stage_sizes(self, p: int) -> tuple[int, int]:
        """(layers of the heaviest stage, layers of the last) over ``p`` stages, memoised per ``p``."""
        found = self._stage_sizes.get(p)
        if found is None:
            layers = self.model.layers
            found = self._stage_sizes[p] = (-(-layers // p), stage_size(layers, p, p - 1))
        return found

    def shape_costs(self, k: Knobs) -> ShapeCosts:
        """What one layer costs under ``k``'s shape (t, c, b, EP, SP, recompute), memoised: its passes
        (``layer_passes``), its matmuls (``layer_matmuls``), a frozen base's change (``frozen_layer``) and its
        attention scores."""
        key = k.shape
        found = self._shapes.get(key)
        if found is None:
            scores = self.layer(*key[:5]).scores
            found = self._shapes[key] = ShapeCosts(
                self.layer_passes(k), self.layer_matmuls(k), self.frozen_layer(k), scores
            )
        return found

    def split_costs(self, k: Knobs) -> SplitCosts:
        """What a step takes from ``k``'s split and ZeRO stage alone (t, p, DP, CP, EP, sharding), memoised: the
        heaviest stage's share of the layers, the data-parallel groups (the heaviest stage's weights, their
        ranks, those within one domain), an unfused gradient accumulation's kernel per micro-batch, the gradient
        sync of unsharded parameters and the optimizer's update."""
        t, p, d, c, e = k.tensor_parallel, k.pipeline_parallel, k.data_parallel, k.context_parallel, k.expert_parallel
        key = (t, p, d, c, e, k.sharding)
        found = self._splits.get(key)
        if found is not None:
            return found
        dom = self.hw.fabric.domain_size
        heavy = self.stage_sizes(p)[0]
        total_layers = self.model.layers
        # data parallel groups: dense weights over the DP group; routed experts, split over EP, over the DP·CP/EP
        # ranks that hold the same experts (Megatron's expert data parallelism); the heaviest stage's share
        share = heavy * p / total_layers
        dense_local = (self.params - self.expert_params) / (t * p) * share
        expert_local = self.expert_params / (t * p * e) * share
        if self.adapters is not None:  # only the adapters have gradients to reduce and states to update
            dense_local, expert_local = self.trainable / (t * p) * share, 0.0
        # the dense weights' gradients reduce over DP × CP (Megatron-LM's dp-cp group; FSDP shards over both)
        groups = [(dense_local, d * c, ranks_near(d * c, dom, t))]
        if expert_local:
            edp = max(1, d * c // e)
            groups.append((expert_local, edp, ranks_near(edp, dom, t * e)))
        # gradient accumulation without fusion: a micro-batch adds its new weight gradients into the stored ones
        # (read both, write one) in a kernel of its own: every micro-batch into Megatron-LM's fp32 main_grad
        # buffer, every one after the first under autograd (the first stores its .grad); sharded gradients
        # (ZeRO-2/3, FSDP) accumulate on the shard each micro-batch's reduce-scatter leaves
        accumulate = 0.0
        if not self.gradient_accumulation_fusion:
            sharded = "gradients" in SHARDED[k.sharding]
            grads = sum(params / n if sharded else params for params, n, _ in groups)
            accumulate = self.stream(grads * self.accumulate_bytes / heavy, heavy)
        sync = 0.0  # unsharded parameters' gradients: all-reduced, or reduce-scattered and the weights all-gathered
        for params, n, near in groups if k.sharding not in SHARDED_PARAMS else ():  # HSDP's: in evaluate
            if k.sharding is Sharding.none:
                sync += self.collective("all-reduce", params * self.reduce_bytes, n, near)
            else:
                sync += self.collective("reduce-scatter", params * self.reduce_bytes, n, near)
                sync += self.collective("all-gather", params * self.param_bytes, n, near)
        # optimizer: read and write every local state byte once (sharded states over their group)
        optimizer = 0.0
        for params, n, near in groups:
            ranks = near if k.sharding is Sharding.hsdp else n
            states = sum(v / ranks if comp in SHARDED[k.sharding] else v for comp, v in self.bpp.breakdown.items())
            optimizer += self.stream(2 * params * states)
        optimizer += self.stack.step_overhead
        found = self._splits[key] = SplitCosts(share, groups, accumulate, sync, optimizer)
        return found

    def evaluate(self, k: Knobs, per_gpu_bytes: float | None = None) -> Terms:
        """(step s, compute s, exposed TP s, bubble s, exposed DP s, optimizer s, other s, per-GPU bytes);
        ``per_gpu_bytes``: ``memory_bytes(k)`` when the caller has it already."""
        (t, p, d, c, e, v), b = k.split, k.micro_batch
        m = self.batch // (b * d)
        dom = self.hw.fabric.domain_size
        tokens = b * self.seq / c
        passes, matmuls, frozen, scores = self.shape_costs(k)
        fwd_layer, extra_layer, _, tp_layer, logits = passes
        total_layers = self.model.layers
        host, per_layer, (heavy, n_layers, last_stage) = self._paced(k, m, passes, frozen)
        logits = logits if last_stage else 0.0
        n_dense, n_moe = n_layers * self.dense_layers / total_layers, n_layers * self.moe_layers / total_layers
        layers_mb = n_layers * (3 * fwd_layer + extra_layer + frozen)
        split = self.split_costs(k)
        share, groups = split.share, split.groups
        adds = m if self.precision is Precision.mixed_fp32_grads else m - 1
        accumulate_mb = split.accumulate if not self.gradient_accumulation_fusion and adds > 0 else 0.0
        stage_mb = layers_mb + logits
        compute = m * stage_mb + adds * accumulate_mb
        tp_mb = n_layers * tp_layer
        slow = self.stack.slowdown
        # under the GEMMs they feed (Transformer Engine's userbuffers, async TP), which run with sequence parallelism
        # only (Megatron-Bridge turns tp_comm_overlap off without it): what the GEMMs cannot cover stays exposed,
        # and what they cover slows them by the stack's slowdown
        overlapped = self.stack.tp_overlap * m * tp_mb if k.sequence_parallel else 0.0
        gemms = m * n_layers * matmuls * (4 if k.recompute is Recompute.full else 3)
        tp = m * tp_mb - overlapped + exposed_seconds(overlapped, gemms, slow)
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
        other = m * p2p_mb * (1.0 - (self.stack.p2p_overlap if v > 1 else 0.0)) + m * n_layers * host
        bubble = pipeline_bubble(p, v, heavy * per_layer + accumulate_mb + p2p_mb)
        # expert parallel: dispatch + combine, forward and backward (+ recompute). Each TP rank dispatches its 1/t
        # of the tokens (sequence parallelism splits them) over EP, then all-gathers what it received over TP for
        # its shard of the experts; the combine reverses both (Megatron-LM MoEAlltoAllTokenDispatcher). In line
        # (exposed) unless the stack overlaps it; the share it overlaps hides under the other micro-batch's
        # compute (Megatron-Core --overlap-moe-expert-parallel-comm, DualPipe), at most the stage's layers' compute
        if e > 1 and self.moe_layers:
            a2a = all_to_all(self, k) * n_moe
            # only under another micro-batch: with m of them the first has none beside it, with one, none hides
            hidden = self.stack.a2a_overlap * a2a * (m - 1) / m
            other += m * (a2a - hidden + exposed_seconds(hidden, layers_mb, slow))
        # context parallel: as the stack's ring attention runs it (napkin.engines.step.ring); else all-gather K, V
        # forward, reduce-scatter their gradients backward, hidden under attention
        if c > 1 and self.stack.ring is not None and self.flash:
            other += m * (n_dense + n_moe) * ring_seconds(self, k, self.stack.ring)
        elif c > 1:
            kv = 2 * tokens * c * self.model.n_kv * self.model.d_head * ACT_BYTES / t
            near = ranks_near(c, dom, t)
            cp = self.collective("all-gather", kv, c, near) * (2 if k.recompute is Recompute.full else 1)
            cp += self.collective("reduce-scatter", kv, c, near)
            other += m * (n_dense + n_moe) * max(0.0, cp - 3 * scores)
        # activation offload: the copies to and from CPU memory the compute cannot hide (napkin.engines.step.offload)
        if k.activation_offload_layers:
            other += m * offload_seconds(self, k, fwd_layer, 2 * fwd_layer + extra_layer)
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
            dp += exposed_seconds(sync, 2 * n_layers * fwd_layer, slow) if self.overlap_grad_reduce else sync
        elif k.sharding in SHARDED_PARAMS:
            dp = m * self.fsdp_exposed(groups, n_dense + n_moe, fwd_layer, 2 * fwd_layer + extra_layer, frozen)
        else:
            sync = split.sync
            dp = exposed_seconds(sync, 2 * n_layers * fwd_layer, slow) if self.overlap_grad_reduce else sync
        optimizer = split.optimizer
        total = compute + tp + bubble + dp + optimizer + other
        memory = self.memory_bytes(k) if per_gpu_bytes is None else per_gpu_bytes
        return Terms(total, compute, tp, bubble, dp, optimizer, other, memory)

    def _paced(self, k: Knobs, m: int, passes: LayerPasses, frozen: float) -> tuple[float, float, Pace]:
        """(a layer's wait for the host, averaged over the layers; a layer and micro-batch's time with it; the
        stage that paces the pipeline) under ``k`` with ``m`` micro-batches and its ``shape_costs``. Host-bound MoE
        layers (napkin.engines.step.host) each wait max(0, H − G) for the host's launches."""
        host = moe_host_excess(self, k, m) * self.moe_layers / self.model.layers
        per_layer = 3 * passes.forward + passes.recompute + passes.tensor_parallel + frozen + host
        return host, per_layer, self.pace(k, per_layer, passes.logits)

    def host_wait(self, k: Knobs) -> float:
        """Seconds of a step its MoE layers wait for the host beyond their GPU work, in its micro-batches (what
        ``evaluate`` adds to ``other``; the bubble grows with it)."""
        m = self.batch // (k.micro_batch * k.data_parallel)
        passes, _, frozen, _ = self.shape_costs(k)
        host, _, pace = self._paced(k, m, passes, frozen)
        return m * pace.layers * host

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
            + ahead * exposed_seconds(gather, forward, slow)
            + ahead * exposed_seconds(gather + reduce, backward, slow)
            + reduce
        )

    # --- FLOPs --------------------------------------------------------------------------------
