"""A layout checked against the model, the batch and what the stack offers (errors name fields)."""

from __future__ import annotations

from napkin.domain.choices import FULL_SHARD, Sharding
from napkin.domain.layout import Layout
from napkin.domain.workload import Workload
from napkin.engines.step.knobs import Knobs
from napkin.engines.step.model import StepModel
from napkin.errors import UsageError
from napkin.systems.stack import Offers


def _among(sharding: Sharding, offered: tuple[Sharding, ...]) -> bool:
    """Whether ``sharding`` is one of ``offered`` (FSDP and ZeRO-3 are one strategy under two names)."""
    names = set(offered)
    if names & FULL_SHARD:
        names |= FULL_SHARD
    return sharding in names


def offered_sharding(offers: Offers, sharding: Sharding) -> bool:
    """Whether a stack offers ``sharding``."""
    return _among(sharding, offers.sharding)


def own_name(offers: Offers, sharding: Sharding) -> Sharding:
    """``sharding`` as the stack names it: ZeRO-3 is FSDP on a stack that offers FSDP and not ZeRO-3."""
    if sharding in FULL_SHARD and sharding not in offers.sharding:
        return next((z for z in offers.sharding if z in FULL_SHARD), sharding)
    return sharding


def offered_with_pipeline(offers: Offers, sharding: Sharding, pipeline_parallel: int) -> bool:
    """Whether a stack runs ``sharding`` at this pipeline degree (DeepSpeed's pipeline engine refuses ZeRO-2/3)."""
    if pipeline_parallel == 1 or offers.pipeline_sharding is None:
        return True
    return _among(sharding, offers.pipeline_sharding)


def check_offered(offers: Offers, layout: Layout, stack: str) -> None:
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
    if not offered_with_pipeline(offers, layout.sharding, layout.pipeline_parallel):
        allowed = ", ".join(offers.pipeline_sharding or ())
        raise UsageError(
            f"sharding: the stack {stack} runs {allowed} with pipeline parallelism, not {layout.sharding}; "
            "use one of those, or pipeline_parallel 1",
            field="sharding",
            also=("pipeline_parallel",),
        )
    if layout.activation_offload_layers and not offers.activation_offload:
        raise UsageError(
            f"activation_offload_layers: the stack {stack} does not offload activations to CPU memory (the "
            "megatron-core stacks' cpu_offloading does); use 0",
            field="activation_offload_layers",
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
        check_offered(sm.offers, resolved, sm.stack.name)
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
