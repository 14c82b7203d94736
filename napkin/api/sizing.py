"""Training-memory questions: what a layout needs per GPU, and the largest model that fits."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from napkin import units
from napkin.api.inputs import (
    LAYOUT_KEYWORDS,
    SHAPE_FIELDS,
    build_model,
    choice,
    first_error,
    get_hardware,
    keywords,
    named_preset,
    optional,
    parse,
    reserve_of,
    resolve_params,
    resolve_seq,
    same_keywords,
    split_layout,
    usable_capacity,
)
from napkin.domain.choices import Optimizer, Precision
from napkin.errors import UsageError

if TYPE_CHECKING:  # imported where used: a command pays only for the objects it builds (startup time)
    from napkin.domain.layout import Layout
    from napkin.domain.model import Model
    from napkin.systems.profiles import HardwareProfile

from napkin.api.inputs import Number


def _memory_inputs(
    params: Number | None,
    gpus: Number,
    model: str | Model | None,
    model_config: str | Path | None,
    seq: Number | None,
    micro_batch: Number,
    global_batch: Number | None,
    flash_attention: bool,
    lay: Layout,
    shape: dict[str, Any],
) -> tuple[float | None, int, Any]:
    """What memory and max-model share: N, G and the activation inputs (when a model is given)."""
    from napkin.domain.workload import Workload
    from napkin.engines.training_memory import ActivationInputs

    arch, preset_seq = build_model(model, model_config, **shape)
    n = resolve_params(params, arch, active=False, required=False, named=named_preset(model, model_config))
    g = parse(units.parse_int, gpus, "gpus")
    resolved = lay.resolve(g, arch)
    b = parse(units.parse_int, micro_batch, "micro_batch")
    explicit = b != 1 or global_batch is not None or seq is not None or flash_attention
    if arch is None:
        if explicit:
            raise UsageError(
                "activation options need an architecture: model, model_config or layers, hidden, heads",
                field="model",
                also=("model_config", "layers", "hidden", "heads"),
            )
        return n, g, None
    length = resolve_seq(seq, preset_seq)
    if length is None:
        raise UsageError("seq is required for activations (this model has no default sequence length)", field="seq")
    try:
        work = Workload(seq=length, micro_batch=b, global_batch=optional(units.parse_int, global_batch, "global_batch"))
    except ValueError as exc:
        raise UsageError(first_error(exc), field="global_batch") from None
    return n, g, ActivationInputs(model=arch, workload=work, layout=resolved, flash_attention=flash_attention)


@keywords(LAYOUT_KEYWORDS, SHAPE_FIELDS)
def memory(
    *,
    params: Number | None = None,
    gpus: Number = 1,
    optimizer: str | Optimizer = Optimizer.adamw,
    precision: str | Precision = Precision.fp32,
    reserve: Number = 0,
    model: str | Model | None = None,
    model_config: str | Path | None = None,
    seq: Number | None = None,
    micro_batch: Number = 1,
    global_batch: Number | None = None,
    flash_attention: bool = False,
    hardware: str | HardwareProfile | None = None,
    hardware_file: str | Path | None = None,
    **shape: Any,
) -> Any:
    """Per-GPU training memory: model states under the layout, plus activations when a model is given."""
    from napkin.engines.training_memory import memory as engine

    lay = split_layout(shape)
    solve_for_n = params is _NO_PARAMS
    n, g, acts = _memory_inputs(
        None if solve_for_n else params,
        gpus,
        model,
        model_config,
        seq,
        micro_batch,
        global_batch,
        flash_attention,
        lay,
        shape,
    )
    if n is None and not solve_for_n:
        raise UsageError("params (or model) is required", field="params", also=("model",))
    profile = get_hardware(hardware, hardware_file)
    common = {
        "optimizer": choice(Optimizer, optimizer, "optimizer"),
        "layout": lay,
        "activations": acts,
        "precision": choice(Precision, precision, "precision"),
        "reserve_bytes": reserve_of(reserve, usable_capacity(profile)),
    }
    if solve_for_n:  # max_model: the same inputs, solved for N
        from napkin.engines.training_memory import max_model as solve

        return solve(g, profile, **common)
    assert n is not None
    return engine(n, profile, gpus=g, **common)


#: What ``max_model`` passes as ``params``: it takes memory's inputs and solves for N.
_NO_PARAMS: Any = object()


@same_keywords(memory, drop=("params",))
def max_model(**options: Any) -> Any:
    """The largest model whose training state fits: pooled memory / bytes per parameter (memory's inputs,
    solved for N)."""
    return memory(params=_NO_PARAMS, **options)
