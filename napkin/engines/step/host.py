"""Host-bound MoE layers in the step (sources.MOE_HOST): a framework that launches its local experts' kernels
from the host, one expert after another, spends host time per local expert in every MoE layer and micro-batch,
whatever the tokens. Where that time exceeds the layer's GPU work the GPU waits for the launches: the layer
takes the host's time, not its own (max(G, H)); the excess is counted in ``other`` and in the pipeline bubble."""

from __future__ import annotations

from typing import TYPE_CHECKING

from napkin import sources
from napkin.domain.choices import Recompute
from napkin.engines.memory.states import ranks_near
from napkin.engines.step.knobs import collectives_per_layer, exposed_seconds
from napkin.engines.step.machine import ACT_BYTES
from napkin.results.explain import Step, step
from napkin.units import format_duration

if TYPE_CHECKING:
    from napkin.engines.step.knobs import Knobs
    from napkin.engines.step.layers import LayerModel


def all_to_all(sm: LayerModel, k: Knobs) -> float:
    """One MoE layer's all-to-alls for one micro-batch, forward and backward (+ a recomputed forward): each TP
    rank dispatches its 1/t of the tokens (SP splits them) over EP, then all-gathers what it received over TP;
    the combine reverses both (Megatron-LM MoEAlltoAllTokenDispatcher). 0 without expert parallelism."""
    t, e = k.tensor_parallel, k.expert_parallel
    if e <= 1 or not sm.moe_layers:
        return 0.0
    dom = sm.hw.fabric.domain_size
    routed = k.micro_batch * sm.seq / k.context_parallel * sm.model.top_k * sm.d * ACT_BYTES
    per = sm.collective("all-to-all", routed / (t if k.sequence_parallel else 1), e, ranks_near(e, dom, t))
    if t > 1 and k.sequence_parallel:
        per += sm.collective("all-gather", routed, t, min(t, dom))
    return collectives_per_layer(k.recompute) * per


def moe_layer_gpu(sm: LayerModel, k: Knobs, microbatches: int) -> float:
    """G: one MoE layer's GPU time for one micro-batch, forward and backward: its matmuls, attention and
    elementwise passes (3 forwards' worth, + what recomputation re-runs), its TP collectives and the share of its
    all-to-all the stack leaves exposed (``StepModel.evaluate``'s rule, for one layer)."""
    t, c, b, e = k.tensor_parallel, k.context_parallel, k.micro_batch, k.expert_parallel
    times = sm.layer(t, c, b, e, k.sequence_parallel)
    forward = times.moe + times.scores + times.moe_elementwise
    passes = sm.layer_passes(k)
    recompute = forward if k.recompute is Recompute.full else passes.recompute
    compute = 3 * forward + recompute
    a2a = all_to_all(sm, k)
    hidden = sm.stack.a2a_overlap * a2a * (microbatches - 1) / microbatches
    return compute + passes.tensor_parallel + a2a - hidden + exposed_seconds(hidden, compute, sm.stack.slowdown)


def moe_host(sm: LayerModel, k: Knobs) -> float:
    """H: the host's time for one MoE layer and micro-batch, forward and backward: the stack's seconds per local
    expert × the local experts (0 where the stack states none); under full recomputation the forward's launches
    run twice, 4/3 of them, as G counts four forwards' worth where three were (Narayanan et al. 2021 eq. 3; the
    GEMMs a local expert launches: 2 forward, 4 backward)."""
    if not sm.moe_layers or not sm.stack.moe_host:
        return 0.0
    again = 4 / 3 if k.recompute is Recompute.full else 1.0
    return sm.stack.moe_host * sm.model.experts / k.expert_parallel * again


def moe_host_excess(sm: LayerModel, k: Knobs, microbatches: int) -> float:
    """max(0, H − G): what one MoE layer and micro-batch waits for the host beyond its GPU work."""
    host = moe_host(sm, k)
    return max(0.0, host - moe_layer_gpu(sm, k, microbatches)) if host else 0.0


def host_explained(sm: LayerModel, k: Knobs, microbatches: int, seconds: float) -> list[Step]:
    """The step's host-bound MoE line for --explain (none for a dense model)."""
    if not sm.moe_layers:
        return []
    if not sm.stack.moe_host:
        return [
            step(
                "host-bound MoE layers (in other)",
                "not counted: the stack states no host time per local expert",
                f"local experts {sm.model.experts / k.expert_parallel:g}",
                format_duration(0.0),
                sources.MOE_HOST,
            )
        ]
    host, gpu = moe_host(sm, k), moe_layer_gpu(sm, k, microbatches)
    return [
        step(
            "host-bound MoE layers (in other; the bubble grows too)",
            "per MoE layer and micro-batch max(0, H − G), H = h × local experts (× 4/3 under full recomputation), "
            "G = the layer's GPU work (3 forwards + recompute, TP, exposed all-to-all)",
            f"h = {format_duration(sm.stack.moe_host)}, local experts {sm.model.experts / k.expert_parallel:g}: "
            f"H = {format_duration(host)}, G = {format_duration(gpu)}, m = {microbatches}",
            format_duration(seconds),
            f"{sources.MOE_HOST}; h: the stack's (stacks/{sm.stack.name}.yaml)",
        )
    ]
