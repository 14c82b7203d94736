"""Activation CPU offload in the step (Megatron-Core ``cpu_offloading_num_layers`` on Transformer Engine's
synchronizer, sources.ACTIVATION_OFFLOAD): what the copies over the host link add where the compute cannot hide
them (sources.OFFLOAD_OVERLAP)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from napkin import sources
from napkin.errors import UsageError
from napkin.results.explain import Step, step
from napkin.units import format_bandwidth, format_bytes_si, format_duration

if TYPE_CHECKING:
    from napkin.engines.step.knobs import Knobs
    from napkin.engines.step.layers import LayerModel


def offload_stall(offloaded: int, layers: int, copy: float, compute: float) -> float:
    """Seconds one pass (forward or backward) of one micro-batch waits for ``offloaded`` layers' copies of
    ``copy`` seconds each, run back to back on one stream beside the compute, ``compute`` seconds a layer: layer
    i's copy starts when its forward ends and must end before layer L − k + i's forward starts (the backward's
    reloads mirror it), so the compute waits for the latest copy's lag past its deadline:
    max(0, k·c − (L−2)·f, c − (L−k−1)·f)."""
    if offloaded <= 0:
        return 0.0
    k, n = offloaded, layers
    return max(0.0, k * copy - (n - 2) * compute, copy - (n - k - 1) * compute)


def host_link(sm: LayerModel) -> float:
    """The device's CPU–GPU bandwidth each way; an error naming the hardware when its profile has none."""
    bandwidth = sm.hw.profile.host_link_bandwidth
    if bandwidth is None:
        raise UsageError(
            f"activation_offload_layers: {sm.hw.name} has no host_link_bandwidth (its CPU–GPU link) in its profile; "
            "give it in a hardware profile of your own",
            field="activation_offload_layers",
        )
    return bandwidth


def offload_seconds(sm: LayerModel, k: Knobs, forward: float, backward: float) -> float:
    """One micro-batch's waits for its offloaded layers' copies: out in the forward, back in the backward."""
    if not k.activation_offload_layers:
        return 0.0
    copy = sm.memory.layer_bytes(k) / host_link(sm)
    layers = sm.model.layers
    return offload_stall(k.activation_offload_layers, layers, copy, forward) + offload_stall(
        k.activation_offload_layers, layers, copy, backward
    )


def offload_step_seconds(sm: LayerModel, k: Knobs) -> float:
    """A step's waits for the copies: its micro-batches' (``StepModel.evaluate`` counts them in ``other``)."""
    if not k.activation_offload_layers:
        return 0.0
    passes = sm.layer_passes(k)
    microbatches = sm.batch // (k.micro_batch * k.data_parallel)
    return microbatches * offload_seconds(sm, k, passes.forward, 2 * passes.forward + passes.recompute)


def offload_explained(sm: LayerModel, k: Knobs, microbatches: int) -> list[Step]:
    """The step's activation-offload line for --explain (none without offload)."""
    if not k.activation_offload_layers:
        return []
    passes = sm.layer_passes(k)
    forward, backward = passes.forward, 2 * passes.forward + passes.recompute
    per_layer, bandwidth = sm.memory.layer_bytes(k), host_link(sm)
    return [
        step(
            "activation offload (exposed, in other)",
            "m × [stall(f) + stall(b)], stall(x) = max(0, k·c − (L−2)·x, c − (L−k−1)·x), c = a layer's activations "
            "/ host link",
            f"k = {k.activation_offload_layers}, L = {sm.model.layers}, c = {format_bytes_si(per_layer)} / "
            f"{format_bandwidth(bandwidth)} = {format_duration(per_layer / bandwidth)}, f = "
            f"{format_duration(forward)}, b = {format_duration(backward)}, m = {microbatches}",
            format_duration(offload_step_seconds(sm, k)),
            f"{sources.ACTIVATION_OFFLOAD}; {sources.OFFLOAD_OVERLAP}; host link: {sm.hw.name}'s profile",
        )
    ]
