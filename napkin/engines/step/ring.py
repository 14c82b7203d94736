"""Context parallelism as a stack's ring attention runs it (``StackKnobs.ring``): the seconds one layer's ring adds
to one micro-batch on one GPU beyond its attention FLOPs, which ``LayerModel.layer`` already splits evenly over
the CP ranks (the load-balanced causal split gives every rank and every ring step the same share).

With c ranks each holds T = b·s/c tokens in two chunks (round robin, chunks i and 2c−1−i); the ring runs c attention
calls per pass, each 1/c of the layer's attention: the first over the local chunks under the causal mask, the others
over half the queries or half the keys of another rank's chunks, unmasked. Around them:

* **K, V exchange**: ``all-gather``: the c ranks' K and V gathered once, issued before the first call and awaited
  before the second, so only that first call hides it; the backward gathers them again. ``ring``: passed to the next
  rank each step, under that step's call;
* **dK, dV**: the backward passes the accumulated dK, dV to the next rank after each call (c sends at the
  accumulation dtype), each awaited after the next call, the last after the loop (exposed);
* **merges**: every call after the first folds its output into the running output by its log-sum-exp (read the
  running output and the call's, write the running one), and the backward adds each call's dQ, dK, dV into the
  running gradients and copies dK, dV into the send buffer: memory-bound passes at the accumulation dtype.

Full recomputation re-runs the forward ring (its gather and merges) in the backward.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from napkin.domain.choices import Recompute
from napkin.engines.memory.states import ranks_near
from napkin.engines.step.knobs import Knobs
from napkin.engines.step.machine import ACT_BYTES

if TYPE_CHECKING:
    from napkin.engines.step.layers import LayerModel
    from napkin.systems.stack import RingAttention


def ring_seconds(sm: LayerModel, k: Knobs, ring: RingAttention) -> float:
    """Seconds one layer's ring attention adds to one micro-batch on one GPU (exposed exchange and merges)."""
    c, t, b = k.context_parallel, k.tensor_parallel, k.micro_batch
    if c < 2:
        return 0.0
    m = sm.model
    tokens = b * sm.seq / c
    d_h = m.d_head
    q_heads = m.n_heads / t
    kv_heads = (m.n_heads if ring.exchanged_heads == "query" else m.n_kv) / t
    kv = 2 * tokens * kv_heads * d_h * ACT_BYTES  # the local K and V, 16-bit
    forward, backward = sm.flash_passes(t, c, b)
    f_call, b_call = forward / c, backward / c
    near = ranks_near(c, sm.hw.fabric.domain_size, t)
    neighbour = 2 if near == c else 1  # the ring's slowest hop leaves the domain when the group spans domains
    passes = 2 if k.recompute is Recompute.full else 1  # forwards of the ring per micro-batch
    if ring.rotate == "all-gather":
        gather = sm.collective("all-gather", c * kv, c, near)
        exchange = passes * max(0.0, gather - f_call) + max(0.0, gather - b_call)
    else:
        hop = sm.collective("send-recv", kv, 2, neighbour)
        exchange = (c - 1) * (passes * max(0.0, hop - f_call) + max(0.0, hop - b_call))
    acc = ring.accumulate_bytes
    grads = kv / ACT_BYTES * acc  # dK, dV at the accumulation dtype
    send = sm.collective("send-recv", grads, 2, neighbour)
    exchange += (c - 1) * max(0.0, send - b_call) + send
    out = tokens * q_heads * d_h  # elements of the output (and of dQ)
    # forward: c − 1 merges (read the running output and the call's 16-bit one, write the running one) and the casts
    # in and out of the accumulation dtype; backward: c additions into dQ, dK, dV and dK, dV copied to the send buffer
    merge = (c - 1) * sm.elementwise(out * (2 * acc + ACT_BYTES)) + 2 * sm.elementwise(out * (acc + ACT_BYTES))
    accumulate = c * (sm.elementwise(out * (2 * acc + ACT_BYTES)) + sm.elementwise(grads / acc * (4 * acc + ACT_BYTES)))
    return exchange + passes * merge + accumulate


def ring_note(ring: RingAttention) -> str:
    """What ``ring_seconds`` counts, for ``--explain`` (the stack's context_parallel values cite their sources)."""
    heads = "every query head (repeated before the call)" if ring.exchanged_heads == "query" else "the KV heads"
    exchange = (
        "all-gathered once, hidden under the first of the c calls only, gathered again in the backward"
        if ring.rotate == "all-gather"
        else "passed to the next rank each call, under that call"
    )
    return (
        f"; CP: the stack's ring attention, K, V of {heads} {exchange}; dK, dV at {ring.accumulate_bytes:g} B passed "
        f"on after each backward call (the last exposed); c − 1 merges per forward and c gradient additions at "
        f"{ring.accumulate_bytes:g} B per element"
    )
