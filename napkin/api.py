"""The notebook API: one function per question, taking what the command line takes.

    import napkin
    run = napkin.train_time(params="70B", tokens="15T", gpus=1024, hardware="h100", mfu=(0.35, 0.5))
    run.days          # 143.9…
    run               # a table in a notebook, one line in a REPL; run.explain() for the derivation

Every keyword of a command is a keyword here, under the same name (``--tensor-parallel`` is
``tensor_parallel``); strings with units are accepted wherever the command accepts them, numbers too;
hardware by name or as a profile object, a model by preset name or as a ``Model``. Unknown keywords
raise ``TypeError``. Errors are ``UsageError`` naming the keyword (``field``). The CLI calls these very
functions, so the two cannot drift apart.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from napkin import units
from napkin.choices import Dtype, Fit, Offload, Optimizer, Precision, Recompute, Sharding
from napkin.errors import UsageError

if TYPE_CHECKING:  # imported where used: a command pays only for the objects it builds (startup time)
    from napkin.comm import CollectiveResult
    from napkin.layout import Layout
    from napkin.model import Model
    from napkin.profiles import HardwareProfile

T = TypeVar("T")
Number = float | int | str
SECONDS = {"days": 86400.0, "hours": 3600.0}

#: The keywords that describe a model's architecture; each overrides the preset's value.
SHAPE_FIELDS = (
    "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab", "mlp", "norm", "dropout",
    "tied_embeddings", "experts", "top_k",
)  # fmt: skip
_LENGTHS = {"layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab", "experts", "top_k"}


# ------------------------------------------------------------------------------------------ inputs


def parse(parser: Callable[[Any, str], T], value: Any, field: str) -> T:
    """``value`` through a units parser, with any error naming ``field``."""
    try:
        return parser(value, field)
    except UsageError as exc:
        raise UsageError(str(exc), field=field) from None


def optional(parser: Callable[[Any, str], T], value: Any, field: str) -> T | None:
    return None if value is None else parse(parser, value, field)


def choice(enum: type[T], value: Any, field: str) -> T:
    """An enum member from itself or its name, ignoring case (``"BF16"`` is ``bf16``)."""
    try:
        return enum(str(value).lower()) if not isinstance(value, enum) else value  # type: ignore[call-arg]
    except ValueError:
        accepted = ", ".join(str(m) for m in enum)  # type: ignore[attr-defined]
        raise UsageError(f"{field}: {value!r} is not one of {accepted}", field=field) from None


def get_hardware(name: str | HardwareProfile | None = None, hardware_file: str | Path | None = None) -> HardwareProfile:
    """A hardware profile by name or alias (``"h100"``), from a YAML file, or the default one."""
    from napkin.profiles import HardwareProfile

    if isinstance(name, HardwareProfile):
        return name
    try:
        return _resolve_hardware(name, hardware_file)
    except UsageError as exc:  # profiles word their errors for the command line: name the keyword here
        text = str(exc)
        if text.startswith("--hardware:"):
            raise UsageError("hardware:" + text.removeprefix("--hardware:"), cli_message=text) from None
        raise


def _resolve_hardware(name: str | None, hardware_file: str | Path | None) -> HardwareProfile:
    from napkin.profiles import resolve

    if name is not None and hardware_file is not None:
        raise UsageError("give hardware or hardware_file, not both", field="hardware", also=("hardware_file",))
    if name is not None and not str(name).strip():
        raise UsageError("hardware: an empty name; give a profile name such as h100", field="hardware")
    return resolve(name, hardware_file).profile


def hardware_list() -> Any:
    """Every hardware profile napkin can see (built-in, yours, ``$NAPKIN_HARDWARE_PATH``) and any invalid file."""
    from napkin.hardware_views import HardwareList
    from napkin.profiles import load_catalog

    return HardwareList.of(load_catalog())


def hardware_sheet(name: str | None = None, hardware_file: str | Path | None = None) -> Any:
    """One profile with every field, unit and source (``napkin hardware show``)."""
    from napkin.hardware_views import HardwareSheet
    from napkin.profiles import resolve

    if name is None and hardware_file is None:
        raise UsageError("give a profile name or hardware_file", field="name", also=("hardware_file",))
    if hardware_file is not None:
        return HardwareSheet(loaded=resolve(name, hardware_file))
    return HardwareSheet(loaded=resolve(name, what="NAME"))


def hardware_compare(names: list[str], *, dtype: str | Dtype = Dtype.bf16) -> Any:
    """Profiles side by side with the ridge point at ``dtype`` (``napkin hardware compare``)."""
    from napkin.hardware_views import HardwareComparison
    from napkin.profiles import resolve

    if len(names) < 2:
        raise UsageError("NAMES: give two or more profiles to compare (for one, use 'napkin hardware show')")
    profiles = [resolve(n, what="NAMES").profile for n in names]
    return HardwareComparison(profiles=profiles, dtype=choice(Dtype, dtype, "dtype"))


def cluster_list() -> Any:
    """Every cluster profile napkin can see (built-in, yours, ``$NAPKIN_CLUSTER_PATH``)."""
    from napkin.cluster import load_catalog
    from napkin.cluster_views import ClusterList

    return ClusterList.of(load_catalog())


def cluster_sheet(name: str) -> Any:
    """One cluster profile with every field, unit and source (``napkin cluster show``)."""
    from napkin.cluster import find
    from napkin.cluster_views import ClusterSheet

    return ClusterSheet(loaded=find(name))


def build_model(
    model: str | Model | None = None, model_config: str | Path | None = None, **shape: Any
) -> tuple[Model | None, int | None]:
    """(architecture, its preset's training sequence length) from a preset name, a ``Model``, a Hugging Face
    ``config.json`` and/or shape keywords (which override the preset's values)."""
    from napkin.model import Model

    unknown = set(shape) - set(SHAPE_FIELDS)
    if unknown:
        raise TypeError(f"got an unexpected keyword argument {sorted(unknown)[0]!r}")
    given = {k: (parse(units.parse_length, v, k) if k in _LENGTHS else v) for k, v in shape.items() if v is not None}
    if model is not None and model_config is not None:
        raise UsageError("give model or model_config, not both", field="model_config", also=("model",))
    base: dict[str, Any] = {}
    seq = None
    if isinstance(model, Model):
        base = model.model_dump(exclude_unset=True)
    elif model is not None:
        from napkin.presets import get_preset

        preset = get_preset(model)
        base, seq = preset.model.model_dump(exclude_unset=True), preset.seq
    elif model_config is not None:
        found = Model.from_hf_config(model_config)
        base, seq = found.model_dump(exclude_unset=True), found.context
    elif not given:
        return None, None
    merged = {**base, **given}
    missing = [k for k in ("layers", "hidden") if k not in merged]
    if missing:
        raise UsageError(
            "a shape needs layers and hidden (or model, model_config); missing: " + ", ".join(missing),
            field=missing[0],
            also=("layers", "hidden", "model", "model_config"),
        )
    try:
        return Model.model_validate(merged), seq
    except ValueError as exc:  # the validator names the shape's fields: the CLI writes them as flags
        raise UsageError(_first_error(exc), field="model", also=SHAPE_FIELDS) from None


def _first_error(exc: ValueError) -> str:
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        return f"{where + ': ' if where else ''}{err['msg'].removeprefix('Value error, ')}"
    return str(exc)


def _params(
    params: Number | None, arch: Model | None, *, active: bool, required: bool = True, named: bool = True
) -> float | None:
    """N from ``params`` or from the model (active parameters for compute); both at once is an error when
    the model is ``named`` (a preset, a config or a ``Model``): shape keywords alone leave N to ``params``."""
    n = optional(units.parse_count, params, "params")
    if arch is not None and (named or n is None):
        if n is not None:
            raise UsageError(
                "give params or model, not both (the preset fixes the parameter count)", field="params", also=("model",)
            )
        return float(arch.active_params() if active else arch.params())
    if n is None and required:
        raise UsageError("params (or model) is required", field="params", also=("model",))
    return n


def _named(model: object, model_config: object) -> bool:
    return model is not None or model_config is not None


def _seconds(**durations: Number | None) -> float | None:
    given = {k: v for k, v in durations.items() if v is not None}
    if len(given) > 1:
        raise UsageError(f"give {' or '.join(durations)}, not both", field=next(iter(given)), also=tuple(durations))
    for k, v in given.items():
        return parse(units.parse_number, v, k) * SECONDS[k]
    return None


def _seq(seq: Number | None, default: int | None) -> int | None:
    return optional(units.parse_length, seq, "seq") or default


def keywords(*groups: tuple[str, ...]) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Give a ``def f(..., **options)`` question the named keywords of ``groups`` (each defaulting to
    ``None``, meaning "not given"): ``help()``, ``inspect.signature`` and a notebook's completion list
    them, and a misspelt one raises ``TypeError`` as for any Python function. Declared once here, used by
    every question that takes a model shape or a layout."""

    def decorate(func: Callable[..., T]) -> Callable[..., T]:
        sig = inspect.signature(func)
        own = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
        extra = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None) for g in groups for name in g]
        full = sig.replace(parameters=[*own, *extra])

        @functools.wraps(func)
        def checked(*args: Any, **kwargs: Any) -> T:
            full.bind(*args, **kwargs)  # TypeError: got an unexpected keyword argument 'gpu'
            return func(*args, **kwargs)

        checked.__signature__ = full  # type: ignore[attr-defined]
        return checked

    return decorate


def same_keywords(
    other: Callable[..., Any], *, drop: tuple[str, ...] = ()
) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Give a ``def f(**options)`` question ``other``'s keywords (less ``drop``), defaults applied: two
    questions that take the same inputs declare them once."""
    full = inspect.signature(other)
    sig = full.replace(parameters=[p for p in full.parameters.values() if p.name not in drop])

    def decorate(func: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(func)
        def bound(*args: Any, **kwargs: Any) -> T:
            given = sig.bind(*args, **kwargs)  # TypeError on a misspelt keyword
            given.apply_defaults()
            return func(**given.arguments)

        bound.__signature__ = sig  # type: ignore[attr-defined]
        return bound

    return decorate


def split_layout(options: dict[str, Any]) -> Layout:
    """Take ``layout`` and the layout keywords out of ``options`` (leaving the shape keywords) as a ``Layout``."""
    given = {k: options.pop(k) for k in LAYOUT_KEYWORDS if k in options}
    return build_layout(given.pop("layout", None), **given)


#: Layout keywords as the commands name them → ``Layout`` fields.
LAYOUT_FIELDS = {
    "tensor_parallel": "tensor", "pipeline_parallel": "pipeline", "data_parallel": "data",
    "context_parallel": "context", "expert_parallel": "expert", "interleave": "interleave",
    "sequence_parallel": "sequence_parallel", "sharding": "sharding", "recompute": "recompute", "offload": "offload",
}  # fmt: skip
_LAYOUT_ENUMS: dict[str, Any] = {"sharding": Sharding, "recompute": Recompute, "offload": Offload}
#: The keywords a layout is given by: a ``Layout`` object and/or its parts.
LAYOUT_KEYWORDS = ("layout", *LAYOUT_FIELDS)


def build_layout(layout: Layout | None = None, **given: Any) -> Layout:
    """``layout`` (or the default ``Layout()``) with the keywords the commands take applied on top
    (``tensor_parallel=8``, ``sharding="zero1"``); a keyword left at ``None`` keeps the layout's value."""
    from napkin.layout import Layout

    unknown = set(given) - set(LAYOUT_FIELDS)
    if unknown:
        raise TypeError(f"got an unexpected keyword argument {sorted(unknown)[0]!r}")
    update: dict[str, Any] = {}
    for key, value in given.items():
        if value is None:
            continue
        if key in _LAYOUT_ENUMS:
            update[LAYOUT_FIELDS[key]] = choice(_LAYOUT_ENUMS[key], value, key)
        elif key == "sequence_parallel":
            update["sequence_parallel"] = bool(value)
        else:
            update[LAYOUT_FIELDS[key]] = parse(units.parse_int, value, key)
    try:
        return Layout.model_validate({**(layout or Layout()).model_dump(exclude_unset=True), **update})
    except ValueError as exc:
        raise UsageError(_first_error(exc), field="interleave") from None


# --------------------------------------------------------------------------------------- questions


@keywords(SHAPE_FIELDS)
def train_time(
    *,
    params: Number | None = None,
    tokens: Number | None = None,
    gpus: Number | None = None,
    days: Number | None = None,
    hours: Number | None = None,
    model: str | Model | None = None,
    model_config: str | Path | None = None,
    seq: Number | None = None,
    hardware: str | HardwareProfile | None = None,
    hardware_file: str | Path | None = None,
    dtype: str | Dtype = Dtype.bf16,
    mfu: Number | tuple[Number, Number] = 0.5,
    achieved: Number | None = None,
    peak: str = "datasheet",
    goodput: Number = 1.0,
    recompute: str | Recompute = Recompute.none,
    causal: bool = False,
    price: Number | None = None,
    pue: Number = 1.0,
    carbon: Number | None = None,
    cluster: str | Any | None = None,
    global_batch: Number | None = None,
    global_batch_tokens: Number | None = None,
    flash_attention: bool = False,
    **shape: Any,
) -> Any:
    """How long a run takes: C = 6·N·D (+ attention), t = C / (G × dense peak × MFU). Give three of
    params/tokens/gpus/duration and the fourth is solved. ``mfu="predicted"`` takes the MFU of the fastest
    layout ``plan`` finds for the model on ``gpus`` of ``cluster`` (global batch default 4M tokens), and with
    it that layout's recomputation."""
    from napkin.compute import Money, Throughput, TrainQuery
    from napkin.compute import train_time as engine

    arch, preset_seq = build_model(model, model_config, **shape)
    n = _params(params, arch, active=False, required=False, named=_named(model, model_config))
    best = None
    if isinstance(mfu, str) and mfu.strip().lower() == "predicted":
        if achieved is not None:
            raise UsageError("achieved: give it or mfu predicted, not both", field="achieved", also=("mfu",))
        if choice(Recompute, recompute, "recompute") is not Recompute.none:
            raise UsageError("recompute: with mfu predicted the planner chooses the recomputation", field="recompute",
                             also=("mfu",))  # fmt: skip
        best = _predicted(model, model_config, seq, gpus, cluster, hardware, hardware_file, dtype, global_batch,
                          global_batch_tokens, flash_attention, causal, shape)  # fmt: skip
        mfu, recompute = best.mfu, best.layout.recompute
    elif global_batch is not None or global_batch_tokens is not None or flash_attention:
        raise UsageError("global_batch, global_batch_tokens, flash_attention: used only with mfu predicted",
                         field="global_batch", also=("global_batch_tokens", "flash_attention", "mfu"))  # fmt: skip
    profile = get_cluster(cluster, hardware, hardware_file)[1] if cluster is not None else (
        get_hardware(hardware, hardware_file))  # fmt: skip
    kind = choice(Dtype, dtype, "dtype")
    if peak not in ("datasheet", "measured"):
        raise UsageError(f"peak: {peak!r} is not one of datasheet, measured", field="peak")
    peak_value, peak_source = profile.peak_with_source(kind, measured=peak == "measured")
    low, high = _mfu_range(mfu)
    query = TrainQuery(
        params=n, tokens=optional(units.parse_count, tokens, "tokens"), gpus=optional(units.parse_int, gpus, "gpus"),
        seconds=_seconds(days=days, hours=hours), model=arch, seq=_seq(seq, preset_seq),
        active_params=float(arch.active_params()) if arch is not None and arch.is_moe else None, causal=causal,
        recompute=choice(Recompute, recompute, "recompute"),
    )  # fmt: skip
    throughput = Throughput(
        peak_flops=peak_value, peak_source=peak_source, mfu_low=low, mfu_high=high,
        achieved=optional(units.parse_rate, achieved, "achieved"),
        goodput=parse(units.parse_fraction, goodput, "goodput"),
    )  # fmt: skip
    pue_value = parse(units.parse_number, pue, "pue")
    if pue_value < 1:
        raise UsageError(f"pue: {pue!r} must be ≥ 1 (1.0 = no overhead; typical data centres 1.1–1.5)", field="pue")
    money = Money(
        price_per_hour=optional(units.parse_number, price, "price"), pue=pue_value,
        carbon_g_per_kwh=optional(units.parse_number, carbon, "carbon"),
    )  # fmt: skip
    result = engine(query, profile, kind, throughput, money)
    if best is not None:
        result.layout = f"{best.layout_text} on {best.cluster} ({best.global_batch:,} × {best.seq:,} tokens)"
    return result


def _predicted(
    model: str | Model | None,
    model_config: str | Path | None,
    seq: Number | None,
    gpus: Number | None,
    cluster: str | Any | None,
    hardware: str | HardwareProfile | None,
    hardware_file: str | Path | None,
    dtype: str | Dtype,
    global_batch: Number | None,
    global_batch_tokens: Number | None,
    flash_attention: bool,
    causal: bool,
    shape: dict[str, Any],
) -> Any:
    """The fastest fitting layout's result (``plan``), for ``train_time(mfu="predicted")``."""
    if gpus is None or (model is None and model_config is None):
        raise UsageError("mfu: predicted needs model (or model_config) and gpus: the planner picks a layout for them",
                         field="mfu", also=("model", "gpus"))  # fmt: skip
    if global_batch is None and global_batch_tokens is None:
        global_batch_tokens = "4M"
    found = plan(model=model, model_config=model_config, seq=seq, gpus=gpus, cluster=cluster, hardware=hardware,
                 hardware_file=hardware_file, dtype=dtype, global_batch=global_batch,
                 global_batch_tokens=global_batch_tokens, flash_attention=flash_attention, causal=causal, top=1,
                 **shape)  # fmt: skip
    if not found.layouts:
        raise UsageError(f"mfu: predicted, but no layout of this model fits on {gpus} GPUs of {found.cluster}",
                         field="mfu", also=("gpus",))  # fmt: skip
    return found.layouts[0]


def _mfu_range(mfu: Number | tuple[Number, Number]) -> tuple[float, float]:
    if isinstance(mfu, tuple):
        low, high = (parse(units.parse_fraction, v, "mfu") for v in mfu)
        if low > high:
            raise UsageError(f"mfu: range {mfu!r} is written backwards; give (low, high)", field="mfu")
        return low, high
    return parse(units.parse_fraction_range, str(mfu), "mfu")


@keywords(SHAPE_FIELDS)
def mfu(
    *,
    params: Number | None = None,
    tokens: Number | None = None,
    gpus: Number | None = None,
    days: Number | None = None,
    hours: Number | None = None,
    gpu_hours: Number | None = None,
    tokens_per_second: Number | None = None,
    tokens_per_second_per_gpu: Number | None = None,
    model: str | Model | None = None,
    model_config: str | Path | None = None,
    seq: Number | None = None,
    hardware: str | HardwareProfile | None = None,
    hardware_file: str | Path | None = None,
    dtype: str | Dtype = Dtype.bf16,
    recompute: str | Recompute = Recompute.none,
    causal: bool = False,
    **shape: Any,
) -> Any:
    """The MFU a run achieved: tokens/s × model FLOPs per token / (G × dense peak) (PaLM §4.1). ``gpus`` is
    needed with a wall-clock duration or a total throughput, not with ``gpu_hours`` or a per-GPU throughput."""
    from napkin.compute import mfu as engine

    arch, preset_seq = build_model(model, model_config, **shape)
    n = _params(params, arch, active=True, named=_named(model, model_config))
    assert n is not None
    rates = {"days": days, "hours": hours, "gpu_hours": gpu_hours, "tokens_per_second": tokens_per_second,
             "tokens_per_second_per_gpu": tokens_per_second_per_gpu}  # fmt: skip
    if sum(v is not None for v in rates.values()) != 1:
        raise UsageError("give exactly one of " + ", ".join(rates), field="tokens_per_second", also=tuple(rates))
    g = optional(units.parse_int, gpus, "gpus")
    if g is None and gpu_hours is None and tokens_per_second_per_gpu is None:
        raise UsageError("gpus is required, except with gpu_hours or tokens_per_second_per_gpu", field="gpus",
                         also=("gpu_hours", "tokens_per_second_per_gpu"))  # fmt: skip
    count = optional(units.parse_count, tokens, "tokens")
    if count is None and (days is not None or hours is not None or gpu_hours is not None):
        raise UsageError("tokens is needed to turn a duration into a throughput", field="tokens")
    if tokens_per_second_per_gpu is not None:
        per_gpu = parse(units.parse_count, tokens_per_second_per_gpu, "tokens_per_second_per_gpu")
    elif tokens_per_second is not None:
        per_gpu = parse(units.parse_count, tokens_per_second, "tokens_per_second") / _need(g)
    elif gpu_hours is not None:
        per_gpu = _need(count) / (parse(units.parse_count, gpu_hours, "gpu_hours") * 3600)
    else:
        per_gpu = _need(count) / (_need(_seconds(days=days, hours=hours)) * _need(g))
    return engine(
        n, get_hardware(hardware, hardware_file), choice(Dtype, dtype, "dtype"), per_gpu, gpus=g, tokens=count,
        model=arch, seq=_seq(seq, preset_seq), causal=causal, recompute=choice(Recompute, recompute, "recompute"),
    )  # fmt: skip


def _need(value: T | None) -> T:
    assert value is not None  # checked by the caller
    return value


@keywords(SHAPE_FIELDS)
def flops(
    *,
    params: Number | None = None,
    tokens: Number | None = None,
    model: str | Model | None = None,
    model_config: str | Path | None = None,
    seq: Number | None = None,
    recompute: str | Recompute = Recompute.none,
    causal: bool = False,
    **shape: Any,
) -> Any:
    """Training FLOPs: 6·N·D (2N forward + 4N backward), plus attention with a model and a sequence length."""
    from napkin.compute import train_flops

    arch, preset_seq = build_model(model, model_config, **shape)
    n = _params(params, arch, active=True, named=_named(model, model_config))
    assert n is not None
    if tokens is None:
        raise UsageError("tokens is required", field="tokens")
    return train_flops(
        n, parse(units.parse_count, tokens, "tokens"), arch, _seq(seq, preset_seq), causal=causal,
        recompute=choice(Recompute, recompute, "recompute"),
    )  # fmt: skip


def matmul(
    m: Number,
    k: Number,
    n: Number,
    *,
    dtype: str | Dtype = Dtype.bf16,
    hardware: str | HardwareProfile | None = None,
    hardware_file: str | Path | None = None,
) -> Any:
    """FLOPs, bytes, arithmetic intensity and roofline time of an (m×k)·(k×n) matmul."""
    from napkin.compute import matmul as engine

    sizes = [parse(units.parse_length, v, name) for v, name in ((m, "m"), (k, "k"), (n, "n"))]
    return engine(sizes[0], sizes[1], sizes[2], get_hardware(hardware, hardware_file), choice(Dtype, dtype, "dtype"))


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
    from napkin.training_memory import ActivationInputs
    from napkin.workload import Workload

    arch, preset_seq = build_model(model, model_config, **shape)
    n = _params(params, arch, active=False, required=False, named=_named(model, model_config))
    g = parse(units.parse_int, gpus, "gpus")
    resolved = lay.resolve(g, arch)
    b = parse(units.parse_int, micro_batch, "micro_batch")
    explicit = b != 1 or global_batch is not None or seq is not None or flash_attention
    if arch is None:
        if explicit:
            raise UsageError("activation options need an architecture: model, model_config or layers, hidden, heads",
                             field="model", also=("model_config", "layers", "hidden", "heads"))  # fmt: skip
        return n, g, None
    length = _seq(seq, preset_seq)
    if length is None:
        raise UsageError("seq is required for activations (this model has no default sequence length)", field="seq")
    try:
        work = Workload(seq=length, micro_batch=b, global_batch=optional(units.parse_int, global_batch, "global_batch"))
    except ValueError as exc:
        raise UsageError(_first_error(exc), field="global_batch") from None
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
    from napkin.training_memory import memory as engine

    lay = split_layout(shape)
    solve_for_n = params is _NO_PARAMS
    n, g, acts = _memory_inputs(None if solve_for_n else params, gpus, model, model_config, seq, micro_batch,
                                global_batch, flash_attention, lay, shape)  # fmt: skip
    if n is None and not solve_for_n:
        raise UsageError("params (or model) is required", field="params", also=("model",))
    profile = get_hardware(hardware, hardware_file)
    common = {"optimizer": choice(Optimizer, optimizer, "optimizer"), "layout": lay, "activations": acts,
              "precision": choice(Precision, precision, "precision"),
              "reserve_bytes": _reserve(reserve, _capacity(profile))}  # fmt: skip
    if solve_for_n:  # max_model: the same inputs, solved for N
        from napkin.training_memory import max_model as solve

        return solve(g, profile, **common)
    assert n is not None
    return engine(n, profile, gpus=g, **common)


#: What ``max_model`` passes as ``params``: it takes memory's inputs and solves for N.
_NO_PARAMS: Any = object()


def _capacity(profile: HardwareProfile) -> float:
    from napkin.training_memory import capacity

    return capacity(profile)[0]


def _reserve(reserve: Number, capacity: float) -> float:
    from napkin.training_memory import parse_reserve

    try:
        return parse_reserve(str(reserve), capacity)
    except UsageError as exc:
        raise UsageError(str(exc), field="reserve") from None


@same_keywords(memory, drop=("params",))
def max_model(**options: Any) -> Any:
    """The largest model whose training state fits: pooled memory / bytes per parameter (memory's inputs,
    solved for N)."""
    return memory(params=_NO_PARAMS, **options)


def optimal(
    *,
    compute: Number | None = None,
    gpus: Number | None = None,
    days: Number | None = None,
    hours: Number | None = None,
    mfu: Number = 0.5,
    hardware: str | HardwareProfile | None = None,
    hardware_file: str | Path | None = None,
    dtype: str | Dtype = Dtype.bf16,
    fit: str | Fit = Fit.epoch,
) -> Any:
    """Compute-optimal N* and D* for a budget (Chinchilla): the 20:1 rule and the fitted loss law."""
    from napkin.compute import compute_budget
    from napkin.scaling import optimal as engine

    seconds = _seconds(days=days, hours=hours)
    if compute is not None:
        if gpus is not None or seconds is not None:
            raise UsageError("give compute, or gpus with days/hours, not both", field="compute",
                             also=("gpus", "days", "hours"))  # fmt: skip
        return engine(parse(units.parse_flops, compute, "compute"), choice(Fit, fit, "fit"))
    if gpus is None or seconds is None:
        raise UsageError("give compute, or gpus with days/hours (and hardware, mfu)", field="compute",
                         also=("gpus", "days", "hours", "hardware", "mfu"))  # fmt: skip
    profile = get_hardware(hardware, hardware_file)
    budget, budget_step = compute_budget(
        parse(units.parse_int, gpus, "gpus"), profile.peak(choice(Dtype, dtype, "dtype")),
        parse(units.parse_fraction, mfu, "mfu"), seconds,
    )  # fmt: skip
    return engine(budget, choice(Fit, fit, "fit"), [budget_step])


def tensor(shape: str | tuple[int, ...], *, dtype: str = "fp32") -> Any:
    """Bytes of a dense tensor (``"49152x12288"`` or a tuple), in GB and GiB."""
    from napkin.number_formats import parse_shape, tensor_size

    dims = parse_shape(shape) if isinstance(shape, str) else tuple(shape)
    return tensor_size(dims, str(dtype).lower())


def dtypes(*, value: Number | None = None) -> Any:
    """Every number format's range and precision; with ``value``, what each stores for it."""
    from napkin.number_formats import dtypes as engine

    return engine(value)


def optimizers() -> Any:
    """Bytes per parameter for every optimizer × precision regime."""
    from napkin.training_memory import optimizers as engine

    return engine()


def models() -> Any:
    """The model presets usable as ``model=``."""
    from napkin.presets import models as engine

    return engine()


# --------------------------------------------------------------------------------------- inference


def _serving_model(model: str | Model | None, model_config: str | Path | None, shape: dict[str, Any]) -> tuple[
    str, Model]:  # fmt: skip
    arch, _ = build_model(model, model_config, **shape)
    if arch is None:
        raise UsageError("model is required (a preset, model_config, or layers and hidden)", field="model",
                         also=("model_config",))  # fmt: skip
    name = model if isinstance(model, str) else Path(model_config).parent.name if model_config else "model"
    return name, arch


def _block(block_size: Number | None, paged: bool) -> int | None:
    from napkin.serving import VLLM_BLOCK

    size = optional(units.parse_int, block_size, "block_size")
    if size is not None and size < 1:
        raise UsageError(f"block_size: {block_size!r} must be at least 1 token", field="block_size")
    return size if size is not None else VLLM_BLOCK if paged else None


def _tensor(gpus: Number, tensor_parallel: Number | None, arch: Model) -> tuple[int, int]:
    g = parse(units.parse_int, gpus, "gpus")
    t = g if tensor_parallel is None else parse(units.parse_int, tensor_parallel, "tensor_parallel")
    if g < 1 or t < 1:
        raise UsageError("gpus and tensor_parallel must be at least 1", field="gpus", also=("tensor_parallel",))
    if g % t:
        raise UsageError(f"gpus ({g}) is not a multiple of tensor_parallel ({t})", field="gpus",
                         also=("tensor_parallel",))  # fmt: skip
    if arch.heads is not None and arch.heads % t:
        raise UsageError(f"tensor_parallel ({t}) must divide the model's heads ({arch.heads})", field="tensor_parallel")
    return g, t


@keywords(SHAPE_FIELDS)
def kv_cache(
    *,
    model: str | Model | None = None,
    model_config: str | Path | None = None,
    context: Number | None = None,
    batch: Number = 1,
    kv_dtype: str = "bf16",
    block_size: Number | None = None,
    paged: bool = False,
    tensor_parallel: Number = 1,
    **shape: Any,
) -> Any:
    """KV-cache bytes: 2·L·n_kv·d_h per token (MLA: L·(d_c + d_h^R)) × context × batch, per GPU under TP."""
    from napkin.serving import KvDtype
    from napkin.serving import kv_cache as engine

    name, arch = _serving_model(model, model_config, shape)
    _, t = _tensor(tensor_parallel, tensor_parallel, arch)
    length = _context(context, arch)
    b = _positive(batch, "batch")
    return engine(name, arch, length, b, choice(KvDtype, kv_dtype, "kv_dtype"), _block(block_size, paged), t)


def _positive(value: Number, field: str) -> int:
    n = parse(units.parse_int, value, field)
    if n < 1:
        raise UsageError(f"{field}: {value!r} must be at least 1", field=field)
    return n


def _context(context: Number | None, arch: Model) -> int:
    length = optional(units.parse_length, context, "context") or arch.context
    if length is None:
        raise UsageError("context is required (this model has no default context length)", field="context")
    if length < 1:
        raise UsageError(f"context: {context!r} must be at least 1 token", field="context")
    return length


@keywords(SHAPE_FIELDS)
def inference(
    *,
    model: str | Model | None = None,
    model_config: str | Path | None = None,
    gpus: Number = 1,
    tensor_parallel: Number | None = None,
    hardware: str | HardwareProfile | None = None,
    hardware_file: str | Path | None = None,
    context: Number | None = None,
    batch: Number = 1,
    prompt: Number | None = None,
    output: Number | None = None,
    weights: str = "bf16",
    kv_dtype: str = "bf16",
    block_size: Number | None = None,
    paged: bool = False,
    efficiency: Number | None = None,
    reserve: Number | None = None,
    chunk: Number | None = None,
    price: Number | None = None,
    **shape: Any,
) -> Any:
    """Serving on ``gpus`` GPUs (TP groups of ``tensor_parallel``, default all): weights, KV cache, max batch,
    TTFT, decode step by roofline, tokens/s and $/1M tokens. ``context`` = prompt + output tokens per sequence."""
    from napkin.serving import CHUNK_TOKENS, DEFAULT_EFFICIENCY, DEFAULT_RESERVE, KvDtype, Serving, WeightFormat
    from napkin.serving import serve as engine

    name, arch = _serving_model(model, model_config, shape)
    g, t = _tensor(gpus, tensor_parallel, arch)
    p = optional(units.parse_length, prompt, "prompt")
    o = optional(units.parse_length, output, "output")
    length = optional(units.parse_length, context, "context")
    if length is None and p is not None and o is not None:
        length = p + o
    length = _context(length, arch)
    given = [name for name, v in (("prompt", p), ("output", o)) if v is not None]
    o = o if o is not None else min(512, length // 2) if p is None else length - p
    p = p if p is not None else length - o
    if p < 1 or o < 1 or p + o > length:
        told = " + ".join(f"{name} ({p if name == 'prompt' else o:,})" for name in given)
        raise UsageError(f"{told} does not fit in context ({length:,}) with at least 1 token each to read and to "
                         "generate",
                         field=given[0], also=("context", *given[1:]))  # fmt: skip
    profile = get_hardware(hardware, hardware_file)
    fmt = choice(WeightFormat, weights, "weights")
    from napkin.serving import compute_dtype

    if profile.peak_if_known(compute_dtype(fmt)) is None:
        raise UsageError(f"weights: {profile.name} has no {compute_dtype(fmt)} peak for {fmt} weights; "
                         f"it has {', '.join(profile.peak_flops)}", field="weights")  # fmt: skip
    eff = DEFAULT_EFFICIENCY if efficiency is None else parse(units.parse_fraction, efficiency, "efficiency")
    if eff <= 0:
        raise UsageError(f"efficiency: {efficiency!r} must be above 0", field="efficiency")
    price_value = optional(units.parse_number, price, "price")
    if price_value is not None and price_value <= 0:
        raise UsageError(f"price: {price!r} must be a positive USD per GPU-hour", field="price")
    settings = Serving(
        weights_format=fmt, kv_dtype=choice(KvDtype, kv_dtype, "kv_dtype"), block_size=_block(block_size, paged),
        efficiency=eff,
        reserve_bytes=_reserve(reserve if reserve is not None else DEFAULT_RESERVE, _capacity(profile)),
        chunk_tokens=_positive(chunk if chunk is not None else CHUNK_TOKENS, "chunk"),
        price_per_hour=price_value if price_value is not None else profile.price_per_hour,
    )  # fmt: skip
    return engine(name, arch, profile, gpus=g, tensor=t, context=length, prompt=p, output=o,
                  batch=_positive(batch, "batch"), settings=settings, fabric=_fabric_of(profile, t))  # fmt: skip


def _fabric_of(profile: HardwareProfile, tensor: int) -> Any:
    """The scale-up links of the built-in cluster made of ``profile``'s device, for TP communication (None when
    there is no such cluster, or a TP group larger than its scale-up domain)."""
    if tensor == 1:
        return None
    from napkin.cluster import built_from

    cluster = built_from(profile.name)
    fabric = cluster.fabric() if cluster is not None else None
    return fabric if fabric is not None and tensor <= fabric.domain_size else None


# ------------------------------------------------------------------------------- step and plan


def get_cluster(
    cluster: str | Any | None = None,
    hardware: str | HardwareProfile | None = None,
    hardware_file: str | Path | None = None,
) -> tuple[Any, HardwareProfile]:
    """(cluster, its device's profile): by cluster name, or the built-in cluster built from ``hardware``."""
    from napkin.cluster import Cluster, built_from, find

    if cluster is not None and (hardware is not None or hardware_file is not None):
        raise UsageError("give cluster or hardware, not both (a cluster names its device)", field="cluster",
                         also=("hardware", "hardware_file"))  # fmt: skip
    if isinstance(cluster, Cluster):
        return cluster, get_hardware(cluster.device)
    if cluster is not None:
        if not str(cluster).strip():
            raise UsageError("cluster: an empty name; give a cluster such as dgx-h100", field="cluster")
        found = find(str(cluster)).cluster
        return found, get_hardware(found.device)
    profile = get_hardware(hardware, hardware_file)
    built = built_from(profile.name)
    if built is None:
        # no field: the message names the command 'napkin cluster list', which a flag rewrite would garble
        raise UsageError(f"no cluster profile is built from {profile.name}; name a cluster (see 'napkin cluster list')")
    return built, profile


def _global_batch(
    global_batch: Number | None, global_batch_tokens: Number | None, seq: int
) -> tuple[int | None, int | None]:
    """(sequences, the tokens they were given as, if they were)."""
    if global_batch is not None and global_batch_tokens is not None:
        raise UsageError("give global_batch or global_batch_tokens, not both", field="global_batch",
                         also=("global_batch_tokens",))  # fmt: skip
    if global_batch_tokens is not None:
        # binary k/M as batch sizes are quoted: Llama 3's "4M tokens" is 512 sequences of 8,192 (4·2^20)
        tokens = parse(units.parse_length, global_batch_tokens, "global_batch_tokens")
        if tokens < seq:
            raise UsageError(f"global_batch_tokens: {tokens:,} tokens is less than one sequence of {seq:,}",
                             field="global_batch_tokens", also=("seq",))  # fmt: skip
        return round(tokens / seq), tokens
    return optional(units.parse_int, global_batch, "global_batch"), None


def _notes(sm: Any, batch_tokens: int | None) -> list[str]:
    """What a step or plan result should say about its inputs: a token batch that is not whole sequences, a
    sequence longer than the model's context."""
    notes = []
    if batch_tokens is not None and batch_tokens != sm.batch * sm.seq:
        notes.append(f"global batch: {batch_tokens:,} tokens is {batch_tokens / sm.seq:,.1f} sequences of "
                     f"{sm.seq:,}; using {sm.batch:,} ({sm.batch * sm.seq:,} tokens)")  # fmt: skip
    if sm.model.context is not None and sm.seq > sm.model.context:
        notes.append(f"seq {sm.seq:,} is longer than the model's context of {sm.model.context:,} tokens")
    return notes


def _step_model(
    model: str | Model | None,
    model_config: str | Path | None,
    seq: Number | None,
    global_batch: Number | None,
    global_batch_tokens: Number | None,
    cluster: Any,
    hardware: str | HardwareProfile | None,
    hardware_file: str | Path | None,
    dtype: str | Dtype,
    optimizer: str | Optimizer,
    precision: str | Precision,
    reserve: Number,
    flash_attention: bool,
    causal: bool,
    shape: dict[str, Any],
    overlap_grad_reduce: bool = True,
    gradient_accumulation_fusion: bool = True,
) -> tuple[Any, str, int | None]:
    from napkin.step_time import StepModel, machine

    arch, preset_seq = build_model(model, model_config, **shape)
    if arch is None:
        raise UsageError("model is required: a preset, model_config or layers, hidden, heads", field="model",
                         also=("model_config", "layers", "hidden", "heads"))  # fmt: skip
    length = _seq(seq, preset_seq)
    if length is None:
        raise UsageError("seq is required (this model has no default sequence length)", field="seq")
    batch, batch_tokens = _global_batch(global_batch, global_batch_tokens, length)
    if batch is None:
        raise UsageError("global_batch (sequences) or global_batch_tokens (e.g. 4M) is required",
                         field="global_batch", also=("global_batch_tokens",))  # fmt: skip
    found, profile = get_cluster(cluster, hardware, hardware_file)
    hw = machine(found, profile, str(choice(Dtype, dtype, "dtype")))
    name = model if isinstance(model, str) else ("custom" if model_config is None else str(model_config))
    if isinstance(model, str) and any(v is not None for v in shape.values()):
        name += " (modified)"  # a preset with shape keywords on top is not that preset any more
    sm = StepModel(
        arch, length, batch, hw, optimizer=choice(Optimizer, optimizer, "optimizer"),
        precision=choice(Precision, precision, "precision"), flash_attention=flash_attention, causal=causal,
        reserve_bytes=_reserve(reserve, profile.memory), overlap_grad_reduce=overlap_grad_reduce,
        gradient_accumulation_fusion=gradient_accumulation_fusion,
    )  # fmt: skip
    return sm, name, batch_tokens


@keywords(LAYOUT_KEYWORDS, SHAPE_FIELDS)
def step(
    *,
    gpus: Number,
    model: str | Model | None = None,
    model_config: str | Path | None = None,
    seq: Number | None = None,
    micro_batch: Number = 1,
    global_batch: Number | None = None,
    global_batch_tokens: Number | None = None,
    flash_attention: bool = False,
    cluster: str | Any | None = None,
    hardware: str | HardwareProfile | None = None,
    hardware_file: str | Path | None = None,
    dtype: str | Dtype = Dtype.bf16,
    optimizer: str | Optimizer = Optimizer.adamw,
    precision: str | Precision = Precision.mixed,
    reserve: Number = 0,
    causal: bool = False,
    overlap_grad_reduce: bool = True,
    gradient_accumulation_fusion: bool = True,
    **shape: Any,
) -> Any:
    """One training step's time, breakdown, predicted MFU/HFU and memory for a model, layout and cluster.
    ``overlap_grad_reduce=False``: the gradient all-reduce runs after the last backward (Megatron-LM without
    --overlap-grad-reduce), all of it exposed. ``gradient_accumulation_fusion=False``: each micro-batch adds its
    weight gradients into the stored ones in a kernel of its own (PyTorch autograd after the first micro-batch,
    Megatron-LM's fp32 gradient buffer every one; Megatron-LM before 2022 or with
    --no-gradient-accumulation-fusion)."""
    from napkin.step_time import build_result, check_knobs

    lay = split_layout(shape)
    if lay.offload is not Offload.none:
        raise UsageError("offload: the step model does not model CPU offload; leave it at none", field="offload")
    g = parse(units.parse_int, gpus, "gpus")
    b = parse(units.parse_int, micro_batch, "micro_batch")
    sm, name, batch_tokens = _step_model(model, model_config, seq, global_batch, global_batch_tokens, cluster, hardware,
                           hardware_file, dtype, optimizer, precision, reserve, flash_attention, causal, shape,
                           overlap_grad_reduce=overlap_grad_reduce,
                           gradient_accumulation_fusion=gradient_accumulation_fusion)  # fmt: skip
    result = build_result(sm, check_knobs(sm, lay, b, g, batch_tokens), name)
    result.notes += _notes(sm, batch_tokens)
    return result


@keywords(SHAPE_FIELDS)
def plan(
    *,
    gpus: Number,
    model: str | Model | None = None,
    model_config: str | Path | None = None,
    seq: Number | None = None,
    global_batch: Number | None = None,
    global_batch_tokens: Number | None = None,
    flash_attention: bool = False,
    cluster: str | Any | None = None,
    hardware: str | HardwareProfile | None = None,
    hardware_file: str | Path | None = None,
    dtype: str | Dtype = Dtype.bf16,
    optimizer: str | Optimizer = Optimizer.adamw,
    precision: str | Precision = Precision.mixed,
    reserve: Number = 0,
    causal: bool = False,
    top: Number = 5,
    overlap_grad_reduce: bool = True,
    gradient_accumulation_fusion: bool = True,
    **shape: Any,
) -> Any:
    """Every valid layout that fits, ranked by predicted step time; the top ``top`` with memory and MFU."""
    from napkin.planner import plan as engine

    g = parse(units.parse_int, gpus, "gpus")
    n = parse(units.parse_int, top, "top")
    sm, name, batch_tokens = _step_model(
        model, model_config, seq, global_batch, global_batch_tokens, cluster, hardware, hardware_file, dtype,
        optimizer, precision, reserve, flash_attention, causal, shape, overlap_grad_reduce=overlap_grad_reduce,
        gradient_accumulation_fusion=gradient_accumulation_fusion,
    )  # fmt: skip
    result = engine(sm, g, name, n)
    result.notes += _notes(sm, batch_tokens)
    return result


def collective(
    op: str = "all-reduce",
    *,
    bytes: Number | None = None,
    params: Number | None = None,
    dtype: str = "bf16",
    gpus: Number | None = None,
    cluster: str | None = None,
    cluster_file: str | Path | None = None,
    algorithm: str | None = None,
    ranks_per_node: Number | None = None,
    bandwidth: str = "model",
) -> CollectiveResult:
    """Time of one collective (``op``: all-reduce, reduce-scatter, all-gather, all-to-all, broadcast,
    send-recv) of ``bytes`` (or ``params`` elements of ``dtype``) over ``gpus`` ranks (default 8; 2 for
    send-recv) of ``cluster``;
    ``bandwidth="measured"`` uses the busbw saved by ``napkin bench <op> --save``."""
    from napkin import comm
    from napkin.cluster import resolve

    operation = choice(comm.Op, op, "op")
    if (bytes is None) == (params is None):
        raise UsageError("give bytes or params (with dtype), one of them", field="bytes", also=("params", "dtype"))
    size = parse(units.parse_bytes, bytes, "bytes") if bytes is not None else None
    if size is None:
        size = comm.payload_bytes(parse(units.parse_count, params, "params"), str(dtype).lower())
    n = parse(units.parse_int, gpus, "gpus") if gpus is not None else 2 if operation is comm.Op.send_recv else 8
    ranks = optional(units.parse_int, ranks_per_node, "ranks_per_node")
    algo = None if algorithm in (None, "auto") else choice(comm.Algorithm, algorithm, "algorithm")
    source = choice(comm.BandwidthSource, bandwidth, "bandwidth")
    loaded = resolve(cluster, cluster_file)
    busbw, label = None, "measured"
    if source is comm.BandwidthSource.measured:
        busbw, label = comm.measured_busbw(loaded.cluster.name, operation)
    return comm.collective_time(operation, size, n, loaded.cluster, ranks_per_domain=ranks, algorithm=algo,
                                bus_bandwidth=busbw, bus_bandwidth_source=label)  # fmt: skip
