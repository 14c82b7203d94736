"""Inputs every serving question shares, each checked and named when wrong: the engine and formats
(``ServingOptions``, one declaration for every signature), the model, the TP group and its links, the replica."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

from napkin import units
from napkin.api.inputs import choice, option_keywords, optional, parse
from napkin.api.model_inputs import build_model
from napkin.api.system_inputs import fabric_of, reserve_of, tp_span_problem, usable_capacity
from napkin.errors import UsageError

if TYPE_CHECKING:  # imported where used: a command pays only for the objects it builds (startup time)
    from napkin.domain.model import Model
    from napkin.engines.inference_result import InferenceResult
    from napkin.engines.kv_cache import KvCacheResult
    from napkin.systems.profiles import HardwareProfile
    from napkin.systems.stack import Stack

from napkin.api.inputs import Number

T = TypeVar("T")


@dataclass(frozen=True)
class ServingOptions:
    """The engine and formats every serving question takes, declared once: ``inference`` and ``traffic`` list
    them in their signatures (``serving_keywords``) and hand them to ``serving_settings`` whole."""

    stack: str | None = None
    stack_file: str | Path | None = None
    weights: str = "bf16"
    group_size: Number | None = None
    kv_dtype: str = "bf16"
    efficiency: Number | None = None
    bandwidth: str | None = None
    reserve: Number | None = None
    chunk: Number | None = None
    price: Number | None = None

    @classmethod
    def given(cls, options: dict[str, Any]) -> ServingOptions:
        """The options among a question's keywords (None: the default)."""
        return cls(**{k: options[k] for k in SERVING_FIELDS if options.get(k) is not None})


SERVING_FIELDS = tuple(f.name for f in fields(ServingOptions))


def serving_keywords(func: Callable[..., T]) -> Callable[..., T]:
    """Put ServingOptions' keywords in a serving question's signature (``option_keywords``)."""
    return option_keywords(ServingOptions)(func)


def serving_model(
    model: str | Model | None, model_config: str | Path | None, shape: dict[str, Any]
) -> tuple[str, Model, tuple[str, ...]]:
    chosen = build_model(model, model_config, **shape)
    arch = chosen.model
    if arch is None:
        raise UsageError(
            "model is required (a preset, model_config, or layers and hidden)", field="model", also=("model_config",)
        )
    return chosen.name or "model", arch, chosen.notes + chosen.warnings


def block_of(block_size: Number | None, paged: bool) -> int | None:
    from napkin.engines.serving import VLLM_BLOCK

    size = optional(units.parse_int, block_size, "block_size")
    if size is not None and size < 1:
        raise UsageError(f"block_size: {block_size!r} must be at least 1 token", field="block_size")
    return size if size is not None else VLLM_BLOCK if paged else None


def tensor_of(gpus: Number | None, tensor_parallel: Number | None, arch: Model, pipeline: int = 1) -> tuple[int, int]:
    """GPUs and TP degree of ``pipeline``-stage replicas: TP defaults to every GPU of a stage, and GPUs to one
    replica (as vLLM's ``--tensor-parallel-size 4`` runs on 4 GPUs), else ``pipeline``. Errors quote the GPU
    count as the user gave it."""
    t_given = optional(units.parse_int, tensor_parallel, "tensor_parallel")
    g = optional(units.parse_int, gpus, "gpus")
    g = g if g is not None else (t_given if t_given is not None else 1) * pipeline
    if g < 1 or (t_given is not None and t_given < 1):
        raise UsageError("gpus and tensor_parallel must be at least 1", field="gpus", also=("tensor_parallel",))
    if g % pipeline:
        raise UsageError(
            f"gpus ({g}) is not a multiple of pipeline_parallel ({pipeline})", field="gpus", also=("pipeline_parallel",)
        )
    t = g // pipeline if t_given is None else t_given
    if g % (t * pipeline):
        split = f"tensor_parallel ({t})" if pipeline == 1 else f"tensor × pipeline ({t} × {pipeline})"
        raise UsageError(f"gpus ({g}) is not a multiple of {split}", field="gpus", also=("tensor_parallel",))
    if arch.heads is not None and arch.heads % t and t_given is None:
        which = f"gpus ({g})" if pipeline == 1 else f"gpus per pipeline stage ({g} / {pipeline} = {t})"
        stage = "every GPU" if pipeline == 1 else "every GPU of a stage"
        raise UsageError(
            f"{which} must divide the model's heads ({arch.heads}): tensor_parallel defaults to {stage}; "
            "give one that divides them",
            field="gpus",
            also=("tensor_parallel",),
        )
    tp_split(arch, t)
    return g, t


def _kv_splits(arch: Model, tensor: int) -> bool:
    """Whether TP splits the KV heads as engines split them: each GPU a whole number of them, or one head
    replicated on ``tensor / n_kv`` GPUs (vLLM's QKVParallelLinear: tp % n_kv == 0 when tp ≥ n_kv, else
    n_kv % tp == 0; vllm/model_executor/layers/linear.py). MLA's one latent is replicated on every GPU."""
    if arch.is_mla or tensor == 1:
        return True
    n_kv = arch.n_kv
    return not ((tensor >= n_kv and tensor % n_kv) or (tensor < n_kv and n_kv % tensor))


def tp_splits(arch: Model, tensor: int) -> bool:
    """Whether a serving TP degree splits the model as engines do: the query heads evenly, the KV heads whole."""
    return (arch.heads is None or arch.heads % tensor == 0) and _kv_splits(arch, tensor)


def tp_split(arch: Model, tensor: int) -> None:
    """``tp_splits``, or a UsageError naming tensor_parallel and the heads it cannot split."""
    if arch.heads is not None and arch.heads % tensor:
        raise UsageError(
            f"tensor_parallel ({tensor}) must divide the model's heads ({arch.heads})", field="tensor_parallel"
        )
    if not _kv_splits(arch, tensor):
        raise UsageError(
            f"tensor_parallel ({tensor}) must divide the model's KV heads ({arch.n_kv}) or be a multiple of them: "
            f"engines give each GPU whole KV heads",
            field="tensor_parallel",
        )


def positive(value: Number, field: str) -> int:
    n = parse(units.parse_int, value, field)
    if n < 1:
        raise UsageError(f"{field}: {value!r} must be at least 1", field=field)
    return n


def experts_split(value: bool | Number | None, tensor: int) -> bool:
    """Whether a replica splits its routed experts over its TP group (EP = TP), from ``expert_parallel`` as the
    training commands take it (a degree: 1, or here the replica's TP) or as a yes/no; "tp" is the flag alone."""
    if value is None or value is False:
        return False
    if value is True or (isinstance(value, str) and value.strip().lower() == "tp"):
        return True
    n = positive(value, "expert_parallel")
    if n not in (1, tensor):
        raise UsageError(
            f"expert_parallel: {value!r} must be 1 or the replica's tensor-parallel degree ({tensor}): a serving "
            "replica splits its experts over its TP group",
            field="expert_parallel",
            also=("tensor_parallel",),
        )
    return n > 1


#: Where a serving context comes from when none is given: the model's own longest, as engines default to it.
MODEL_CONTEXT: Final = (
    "the model's longest context (a config's max_position_embeddings, a preset's published context), as vLLM's "
    "max_model_len defaults to it (vllm/config ModelConfig, v0.10.1)"
)


def context_of(context: Number | None, arch: Model) -> tuple[int, str]:
    """(tokens per sequence, where they came from): given, else the model's longest context."""
    given = optional(units.parse_length, context, "context")
    length = given or arch.context
    if length is None:
        raise UsageError("context is required (this model has no default context length)", field="context")
    if length < 1:
        raise UsageError(f"context: {context!r} must be at least 1 token", field="context")
    return length, "given" if given else MODEL_CONTEXT


def check_clients(clients: int, schedulers: int, requests: int) -> None:
    """A closed loop's clients split evenly over the deployment's schedulers (replicas × their DP-attention ranks or
    pipeline micro-batches), as a load balancer sends them, and each scheduler's clients have requests to send."""
    if not clients:
        return
    if clients % schedulers:
        raise UsageError(
            f"concurrency: {clients:,} clients do not split evenly over the deployment's {schedulers:,} schedulers; "
            f"give a multiple of {schedulers:,}",
            field="concurrency",
        )
    if requests < clients // schedulers:
        raise UsageError(
            f"requests: {requests:,} per scheduler is fewer than its {clients // schedulers:,} clients, who would "
            "never all be busy; give requests well above them (10× for steady state)",
            field="requests",
            also=("concurrency",),
        )


R = TypeVar("R", "KvCacheResult", "InferenceResult")


def with_context_source(result: R, source: str) -> R:
    """``result`` saying where its context came from, in its rows, its JSON and first in ``--explain``."""
    from napkin.engines.kv_cache import short_source
    from napkin.results.explain import step

    result.context_source = source
    shown = short_source(source)
    result.steps.insert(
        0, step("context", "tokens per sequence (prompt + output)", shown, f"{result.context:,} tokens", source)
    )
    return result


def implied_tp(gpus: int, tensor_parallel: Number | None, pipeline: int = 1) -> str | None:
    """Where a TP degree the caller did not give came from (``tensor_of``'s default), for an error refusing it."""
    if tensor_parallel is not None:
        return None
    which = f"gpus ({gpus})" if pipeline == 1 else f"gpus per pipeline stage ({gpus} / {pipeline})"
    return f"{which}: tensor_parallel defaults to every GPU{'' if pipeline == 1 else ' of a stage'}"


def serving_fabric(profile: HardwareProfile, tensor: int, *, implied: str | None = None) -> Any:
    """The TP links: the device's built-in cluster, else its own interconnect figure (PCIe cards). ``implied``
    (``implied_tp``): the TP was not given, so a refusal names the GPUs it came from."""
    from napkin.engines.replica import link_fabric

    problem = tp_span_problem(profile, tensor)
    if problem is not None and implied is None:
        raise UsageError(f"tensor_parallel: {problem}", field="tensor_parallel")
    if problem is not None:
        raise UsageError(f"{implied}; {problem}", field="gpus", also=("tensor_parallel",))
    found = fabric_of(profile, tensor)
    return found if found is not None or tensor == 1 else link_fabric(profile, tensor)


def serving_stack(options: ServingOptions) -> Stack:
    """The serving stack the options name (vLLM by default), resolved once per question: its values feed
    ``serving_settings`` and what it says about where it came from goes into the result (``said``)."""
    from napkin.systems.serving_stack import get_stack

    return get_stack(options.stack, options.stack_file)


def serving_settings(
    profile: HardwareProfile, options: ServingOptions, *, block: int | None = None, chosen: Stack | None = None
) -> Any:
    """The serving settings every serving question shares, each input checked and named when wrong; ``block``:
    round the KV cache to pages of that many tokens (``inference``); ``chosen``: the stack already resolved
    (``serving_stack``), else the options' own."""
    from napkin.engines.serving import GROUP_SIZE, KvDtype, Serving, WeightFormat, compute_dtype
    from napkin.systems.serving_stack import serving_of

    o = options
    chosen = chosen if chosen is not None else serving_stack(o)
    fmt = choice(WeightFormat, o.weights, "weights")
    dtype = compute_dtype(fmt, profile)
    if profile.peak_if_known(dtype) is None:
        raise UsageError(
            f"weights: {profile.name} has no {dtype} peak for {fmt} weights; it has {', '.join(profile.peak_flops)}",
            field="weights",
        )
    eff = optional(units.parse_fraction, o.efficiency, "efficiency")
    group = positive(o.group_size, "group_size") if o.group_size is not None else GROUP_SIZE
    price_value = optional(units.parse_number, o.price, "price")
    if price_value is not None and price_value <= 0:
        raise UsageError(f"price: {o.price!r} must be a positive USD per GPU-hour", field="price")
    measured, source = bandwidth_of(profile, o.bandwidth)
    from napkin.engines.memory import capacity

    return Serving(
        stack_name=chosen.name,
        stack=serving_of(chosen).for_device(profile.name, capacity(profile)[0]),
        weights_format=fmt,
        group_size=group,
        kv_dtype=choice(KvDtype, o.kv_dtype, "kv_dtype"),
        block_size=block,
        efficiency=eff,
        reserve_bytes=None if o.reserve is None else reserve_of(o.reserve, usable_capacity(profile)),
        chunk_tokens=None if o.chunk is None else positive(o.chunk, "chunk"),
        bandwidth=measured,
        bandwidth_source=source,
        rates_source=f"{chosen.name}: {chosen.cited('decode')}",
        memory_source=f"{chosen.name}: {chosen.cited('memory_rule')}",
        host_source=f"{chosen.name}: {chosen.cited('host_seconds_per_sequence')}",
        expert_source=f"{chosen.name}: {chosen.cited('expert_compute')}",
        allreduce_source=f"{chosen.name}: {chosen.cited('allreduce_seconds')}",
        tp_prefill_source=f"{chosen.name}: {chosen.cited_all('tp_prefill_seconds')}",
        price_per_hour=price_value if price_value is not None else profile.price_per_hour,
    )


def bandwidth_of(profile: HardwareProfile, bandwidth: str | None) -> tuple[float | None, str]:
    """``datasheet`` (None), ``measured`` (the saved ``napkin bench memory --save``) or a bandwidth (3.2TB/s)."""
    if bandwidth is None or str(bandwidth).strip().lower() == "datasheet":
        return None, "datasheet"
    if str(bandwidth).strip().lower() == "measured":
        from napkin.systems.measurements import memory_measurement

        found = memory_measurement(profile.name)
        if found is None:
            raise UsageError(
                f"bandwidth: no saved memory-bandwidth measurement for {profile.name}; run "
                f"'napkin bench memory --hardware {profile.name} --save' first",
                field="bandwidth",
            )
        return found.bytes_per_second, f"measured {found.date} on {found.device}"
    value = parse(units.parse_bandwidth, bandwidth, "bandwidth")
    return value, "given"


def fraction_or_zero(value: Number | None, field: str) -> float:
    if value is None or str(value).strip() in ("0", "0%", "0.0"):
        return 0.0
    f = parse(units.parse_fraction, value, field)
    if f >= 1:
        raise UsageError(f"{field}: {value!r} must be below 1", field=field)
    return f


def build_replica(
    arch: Model,
    profile: HardwareProfile,
    settings: Any,
    *,
    tensor: int,
    pipeline: int = 1,
    expert_parallel: bool = False,
    dp_attention: bool = False,
    implied: str | None = None,
) -> Any:
    """The replica a serving question runs on (stack overrides applied, measured bandwidth if asked); ``implied``:
    where a TP the caller did not give came from (``implied_tp``)."""
    from napkin.engines.memory import capacity
    from napkin.engines.replica import Replica

    device = (
        profile if settings.bandwidth is None else profile.model_copy(update={"memory_bandwidth": settings.bandwidth})
    )
    stack = settings.resolved()
    if settings.reserve_bytes is not None:  # the user's reserve replaces the stack's rule
        cap = capacity(profile)[0]
        stack = stack.model_copy(
            update={"memory_rule": "total-fraction", "memory_fraction": 1 - settings.reserve_bytes / cap}
        )
    return Replica(
        arch,
        device,
        stack,
        tensor=tensor,
        pipeline=pipeline,
        expert=expert_parallel,
        dp_attention=dp_attention,
        weights=settings.weights_format.value,
        group=settings.group_size,
        kv=settings.kv_dtype.value,
        fabric=serving_fabric(profile, tensor, implied=implied),
    )


def seed_of(value: Number) -> int:
    try:
        seed = int(str(value).strip())
    except ValueError:
        raise UsageError(f"seed: {value!r} is not a whole number", field="seed") from None
    if seed < 0:
        raise UsageError(f"seed: {value!r} must be 0 or more", field="seed")
    return seed


def with_stack(replica: Any, **update: Any) -> Any:
    from dataclasses import replace

    return replace(replica, stack=replica.stack.model_copy(update=update))
