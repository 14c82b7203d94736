"""The shared input layer of the API: parsing keywords into domain objects, one rule each."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from napkin import units
from napkin.domain.choices import BaseFormat, Finetune, Offload, Optimizer, Precision, Recompute, Sharding, TrainDtype
from napkin.errors import UsageError

if TYPE_CHECKING:  # imported where used: a command pays only for the objects it builds (startup time)
    from napkin.domain.layout import Layout
    from napkin.domain.model import Model
    from napkin.results.explain import Step
    from napkin.results.result import Result
    from napkin.systems.cluster import Cluster, Fabric
    from napkin.systems.profiles import HardwareProfile, Profile


T = TypeVar("T")
Number = float | int | str
SECONDS = {"days": 86400.0, "hours": 3600.0}

#: The keywords that describe a model's architecture; each overrides the preset's value.
SHAPE_FIELDS = (
    "layers",
    "hidden",
    "heads",
    "kv_heads",
    "head_dim",
    "ffn",
    "vocab",
    "mlp",
    "norm",
    "dropout",
    "tied_embeddings",
    "experts",
    "top_k",
)
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


def flag(value: Any, field: str) -> bool:
    """A yes/no keyword: ``True`` or ``False`` itself (NumPy's bools too); ``"no"`` or ``1`` is refused, not read
    by its truthiness (``bool("no")`` is True)."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    raise UsageError(f"{field}: {value!r} is not True or False", field=field)


def _check_flags(sig: inspect.Signature, arguments: dict[str, Any]) -> None:
    """Every keyword declared ``bool`` and given is a bool (``flag``)."""
    for name, value in arguments.items():
        param = sig.parameters.get(name)
        if param is None:
            continue
        if param.annotation in ("bool", bool) or (param.annotation == "bool | None" and value is not None):
            flag(value, name)  # None means "the default" only where the keyword is declared optional


def textual(value: Any, field: str, what: str, *, path: bool = False) -> None:
    """``value`` is a string (a name; a path may be a ``PathLike`` too), else a UsageError saying ``what`` is
    accepted (not an AttributeError from deep inside)."""
    if not isinstance(value, str | os.PathLike if path else str):
        raise UsageError(f"{field}: {value!r} is not {what}", field=field)


def choice(enum: type[T], value: Any, field: str) -> T:
    """An enum member from itself or its name, ignoring case (``"BF16"`` is ``bf16``)."""
    try:
        return enum(str(value).lower()) if not isinstance(value, enum) else value  # type: ignore[call-arg]
    except ValueError:
        accepted = ", ".join(str(m) for m in enum)  # type: ignore[attr-defined]
        raise UsageError(f"{field}: {value!r} is not one of {accepted}", field=field) from None


R = TypeVar("R", bound="Result")


def said(result: R, *profiles: Profile | None) -> R:
    """``result`` with what its profiles say about where they came from (``Profile.origin_notes``: a replaced
    built-in, ignored measurements, a skipped file) first among its notes, each once: the notes travel with the
    result, never through a module."""
    told = [n for p in profiles if p is not None for n in p.origin_notes if n not in result.notes]
    result.notes[:0] = list(dict.fromkeys(told))
    return result


def get_stack(name: str | Any | None = None, stack_file: str | Path | None = None) -> Any:
    """A stack profile by name or alias (``"torchtitan"``), from a YAML file, or the default (``$NAPKIN_STACK``,
    else megatron-core)."""
    from napkin.systems.stack import Stack, resolve

    if isinstance(name, Stack):
        return name
    if name is not None and stack_file is not None:
        raise UsageError("give stack or stack_file, not both", field="stack", also=("stack_file",))
    if name is not None and not str(name).strip():
        raise UsageError("stack: an empty name; give a stack such as megatron-core", field="stack")
    return resolve(None if name is None else str(name), stack_file, side="training").profile


def get_hardware(name: str | HardwareProfile | None = None, hardware_file: str | Path | None = None) -> HardwareProfile:
    """A hardware profile by name or alias (``"h100"``), from a YAML file, or the default one."""
    from napkin.systems.profiles import HardwareProfile

    if isinstance(name, HardwareProfile):
        return name
    if name is not None:
        textual(name, "hardware", "a profile name (such as 'h100') or a HardwareProfile")
    if hardware_file is not None:
        textual(hardware_file, "hardware_file", "a path to a profile YAML file", path=True)
    return _resolve_hardware(name, hardware_file)


def _resolve_hardware(name: str | None, hardware_file: str | Path | None) -> HardwareProfile:
    from napkin.systems.profiles import resolve

    if name is not None and hardware_file is not None:
        raise UsageError("give hardware or hardware_file, not both", field="hardware", also=("hardware_file",))
    if name is not None and not str(name).strip():
        raise UsageError("hardware: an empty name; give a profile name such as h100", field="hardware")
    return resolve(name, hardware_file).profile


@dataclass(frozen=True)
class Chosen:
    """The model a question was given: its architecture, its name, the sequence length it brings (a preset's
    training length; a config.json brings none) and what reading it assumed."""

    model: Model | None = None
    name: str | None = None
    seq: int | None = None
    seq_source: str | None = None
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


def build_model(model: str | Model | None = None, model_config: str | Path | None = None, **shape: Any) -> Chosen:
    """The architecture from a preset name, a ``Model``, a Hugging Face config (``model_config``: a config.json
    or a model folder; ``model`` may also be one, or a Hub id ``org/name``) and/or shape keywords (which override
    the preset's or the config's values)."""
    from napkin.domain.model import Model

    unknown = set(shape) - set(SHAPE_FIELDS)
    if unknown:
        raise TypeError(f"got an unexpected keyword argument {sorted(unknown)[0]!r}")
    given = {k: (parse(units.parse_length, v, k) if k in _LENGTHS else v) for k, v in shape.items() if v is not None}
    if model is not None and model_config is not None:
        raise UsageError("give model or model_config, not both", field="model_config", also=("model",))
    if model is not None and not isinstance(model, Model | str):
        raise UsageError(f"model: {model!r} is not a preset name (such as 'llama3-8b') or a Model", field="model")
    if model_config is not None:
        textual(model_config, "model_config", "a path to a Hugging Face config.json", path=True)
    base: dict[str, Any] = {}
    chosen = Chosen(name="custom")
    if isinstance(model, Model):
        base = model.model_dump(exclude_unset=True)
    elif model is not None or model_config is not None:
        chosen = _named_model(model, model_config)
        assert chosen.model is not None
        base = chosen.model.model_dump(exclude_unset=True)
    elif not given:
        return Chosen()
    merged = {**base, **given}
    missing = [k for k in ("layers", "hidden") if k not in merged]
    if missing:
        raise UsageError(
            "a shape needs layers and hidden (or model, model_config); missing: " + ", ".join(missing),
            field=missing[0],
            also=("layers", "hidden", "model", "model_config"),
        )
    try:
        arch = Model.model_validate(merged)
    except ValueError as exc:  # the validator names the shape's fields: the CLI writes them as flags
        raise UsageError(first_error(exc), field="model", also=SHAPE_FIELDS) from None
    name = chosen.name if not given or chosen.name == "custom" else f"{chosen.name} (modified)"
    return Chosen(arch, name, chosen.seq, chosen.seq_source, chosen.notes, chosen.warnings)


def _named_model(model: str | None, model_config: str | Path | None) -> Chosen:
    """A preset by name, or a Hugging Face config by path, folder or Hub id."""
    from napkin.systems.hf_source import is_source, load

    if model is not None and not is_source(model) and not Path(model).exists():
        from napkin.systems.presets import get_preset

        preset = get_preset(model)
        return Chosen(
            preset.model, preset.name, preset.seq, f"the {preset.name} preset's training length", preset.origin_notes
        )
    # model_config is read locally (a Hub id goes to model)
    read = load(model, field="model") if model is not None else load(str(model_config), "model_config", hub=False)
    return Chosen(read.model, read.name, notes=tuple(read.notes), warnings=tuple(read.warnings))


def first_error(exc: ValueError) -> str:
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        return f"{where + ': ' if where else ''}{err['msg'].removeprefix('Value error, ')}"
    return str(exc)


def resolve_params(
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


def named_preset(model: object, model_config: object) -> bool:
    return model is not None or model_config is not None


def to_seconds(**durations: Number | None) -> float | None:
    given = {k: v for k, v in durations.items() if v is not None}
    if len(given) > 1:
        raise UsageError(f"give {' or '.join(durations)}, not both", field=next(iter(given)), also=tuple(durations))
    for k, v in given.items():
        return parse(units.parse_number, v, k) * SECONDS[k]
    return None


def resolve_seq(seq: Number | None, chosen: Chosen, *, needed_for: str | None = None) -> tuple[int | None, str | None]:
    """(sequence length, where it came from): ``seq`` as given, else a preset's training length; never a
    config's max_position_embeddings (the longest context it allows, not a length anyone trains at). With a
    model and ``needed_for`` (what depends on it) a missing one is a ``UsageError``."""
    length = optional(units.parse_length, seq, "seq")
    if length is not None:
        return length, "given"
    if chosen.seq is not None:
        return chosen.seq, chosen.seq_source
    if needed_for is not None and chosen.model is not None:
        context = chosen.model.context
        longest = f" (its {context:,}-token context is the longest it allows, not a training length)" if context else ""
        raise UsageError(
            f"seq is required: {needed_for} depends on it, and {chosen.name or 'this model'} brings no default "
            f"sequence length{longest}; presets bring their training length",
            field="seq",
        )
    return None, None


def option_keywords(options: type[Any]) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Give a ``def f(*, ..., **options)`` question the fields of the dataclass ``options`` as keywords, typed and
    with their defaults, in its signature (``help()``, completion, and ``keywords``' check of misspelt names): the
    questions that share an options object declare its fields once, in it."""
    extra = [
        inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.type)
        for f in dataclasses.fields(options)
    ]

    def decorate(func: Callable[..., T]) -> Callable[..., T]:
        sig = inspect.signature(func)
        own = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
        rest = [p for p in sig.parameters.values() if p.kind is p.VAR_KEYWORD]
        func.__signature__ = sig.replace(parameters=[*own, *extra, *rest])  # type: ignore[attr-defined]
        return func

    return decorate


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
            _check_flags(full, kwargs)
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
            _check_flags(sig, kwargs)
            given.apply_defaults()
            return func(**given.arguments)

        # the keywords are ``other``'s, the result is ``func``'s own (step returns a StepResult, not step_setup's tuple)
        own = inspect.signature(func).return_annotation
        bound.__signature__ = sig.replace(return_annotation=own)  # type: ignore[attr-defined]
        return bound

    return decorate


def split_layout(options: dict[str, Any]) -> Layout:
    """Take ``layout`` and the layout keywords out of ``options`` (leaving the shape keywords) as a ``Layout``."""
    given = {k: options.pop(k) for k in LAYOUT_KEYWORDS if k in options}
    return build_layout(given.pop("layout", None), **given)


#: The layout keywords: ``Layout``'s fields, by the same names as flags (``--tensor-parallel``) and JSON keys.
LAYOUT_FIELDS = (
    "tensor_parallel",
    "pipeline_parallel",
    "data_parallel",
    "context_parallel",
    "expert_parallel",
    "interleave",
    "sequence_parallel",
    "sharding",
    "recompute",
    "offload",
    "activation_offload_layers",
)
_LAYOUT_ENUMS: dict[str, Any] = {"sharding": Sharding, "recompute": Recompute, "offload": Offload}
#: The keywords a layout is given by: a ``Layout`` object and/or its parts.
LAYOUT_KEYWORDS = ("layout", *LAYOUT_FIELDS)


def count_or_zero(value: Any, field: str) -> int:
    """A whole count that may be zero: 0 however a number spells it (``0``, ``00``, ``0e0``), a negative one
    refused as below zero, anything else as ``units.parse_int`` reads it."""
    number = units.plain_number(value)
    if number is None and isinstance(value, str):
        try:
            number = float(value.strip().replace("_", ""))
        except ValueError:
            number = None
    if number == 0:
        return 0
    if number is not None and number < 0:
        raise UsageError(f"{field}: {value!r} is below zero; expected 0 or a positive whole number", field=field)
    return parse(units.parse_int, value, field)


def build_layout(layout: Layout | None = None, **given: Any) -> Layout:
    """``layout`` (or the default ``Layout()``) with the keywords the commands take applied on top
    (``tensor_parallel=8``, ``sharding="zero1"``); a keyword left at ``None`` keeps the layout's value."""
    from napkin.domain.layout import Layout

    if layout is not None and not isinstance(layout, Layout):
        raise UsageError(f"layout: {layout!r} is not a Layout (napkin.Layout(tensor_parallel=8, ...))", field="layout")
    unknown = set(given) - set(LAYOUT_FIELDS)
    if unknown:
        raise TypeError(f"got an unexpected keyword argument {sorted(unknown)[0]!r}")
    update: dict[str, Any] = {}
    for key, value in given.items():
        if value is None:
            continue
        if key in _LAYOUT_ENUMS:
            update[key] = choice(_LAYOUT_ENUMS[key], value, key)
        elif key == "sequence_parallel":
            update["sequence_parallel"] = flag(value, key)
        elif key == "activation_offload_layers":
            update[key] = count_or_zero(value, key)  # none offloaded: the one count of a layout that may be zero
        else:
            update[key] = parse(units.parse_int, value, key)
    try:
        return Layout.model_validate({**(layout or Layout()).model_dump(exclude_unset=True), **update})
    except ValueError as exc:
        message = first_error(exc)
        if "activation_offload_layers" in message:
            raise UsageError(message, field="activation_offload_layers") from None
        raise UsageError(message, field="interleave", also=("pipeline_parallel",)) from None


# --------------------------------------------------------------------------------------- questions


def fabric_of(profile: HardwareProfile, tensor: int) -> Fabric | None:
    """The scale-up links of the built-in cluster made of ``profile``'s device, for TP communication (None when
    there is no such cluster, or a TP group larger than its scale-up domain)."""
    if tensor == 1:
        return None
    from napkin.systems.cluster import built_from

    cluster = built_from(profile.name)
    fabric = cluster.fabric() if cluster is not None else None
    return fabric if fabric is not None and tensor <= fabric.domain_size else None


# ------------------------------------------------------------------------------- step and plan


def get_cluster(
    cluster: str | Cluster | None = None,
    hardware: str | HardwareProfile | None = None,
    hardware_file: str | Path | None = None,
    *,
    gpus: int | None = None,
) -> tuple[Cluster, HardwareProfile]:
    """(cluster, its device's profile): by cluster name, or the built-in cluster built from ``hardware``; one
    ``gpus`` of a device no cluster is built from is a cluster of one device (no fabric: nothing to communicate).
    A ``Cluster`` and the ``HardwareProfile`` of its device, both objects, are taken as they are (a custom device on
    a custom cluster, no file needed)."""
    from napkin.systems.cluster import Cluster, ScaleUp, built_from, find
    from napkin.systems.profiles import HardwareProfile

    if isinstance(cluster, Cluster) and isinstance(hardware, HardwareProfile) and hardware_file is None:
        # a library user's own device on their own cluster: the pair, once the cluster names that device
        if cluster.device != hardware.name:
            raise UsageError(
                f"cluster: {cluster.name} is built from {cluster.device!r}, not the hardware given ({hardware.name!r})",
                field="cluster",
                also=("hardware",),
            )
        return cluster, hardware
    if cluster is not None and (hardware is not None or hardware_file is not None):
        raise UsageError(
            "give cluster or hardware, not both (a cluster names its device)",
            field="cluster",
            also=("hardware", "hardware_file"),
        )
    if isinstance(cluster, Cluster):
        return cluster, _device_of(cluster, "the cluster given")
    if cluster is not None:
        textual(cluster, "cluster", "a cluster name (such as 'dgx-h100') or a Cluster")
        if not str(cluster).strip():
            raise UsageError("cluster: an empty name; give a cluster such as dgx-h100", field="cluster")
        loaded = find(str(cluster))
        return loaded.cluster, _device_of(loaded.cluster, loaded.path)
    profile = get_hardware(hardware, hardware_file)
    built = built_from(profile.name)
    if built is None and gpus == 1:
        single = Cluster(
            name="single-" + re.sub(r"[^a-z0-9-]+", "-", profile.name.lower()).strip("-"),
            display_name=f"one {profile.name} (no fabric)",
            device=profile.name,
            devices_per_node=1,
            scale_up=ScaleUp(name="none (one device)", bandwidth=1.0, latency=0.0, domain_size=1),
            sources=[{"title": "one device: no collective communication", "url": "doc:single-device"}],
        )
        return single, profile
    if built is None:
        # no field: the message names the command 'napkin cluster list', which a flag rewrite would garble
        raise UsageError(f"no cluster profile is built from {profile.name}; name a cluster (see 'napkin cluster list')")
    return built, profile


def _device_of(cluster: Any, where: str) -> HardwareProfile:
    """The hardware profile a cluster's ``device`` names; an unknown one is blamed on the cluster file, not on
    a --hardware the user never gave."""
    from napkin.systems.profiles import resolve

    return resolve(cluster.device, what=f"{where}: device").profile


def usable_capacity(profile: HardwareProfile) -> float:
    from napkin.engines.memory import capacity

    return capacity(profile)[0]


def reserve_of(reserve: Number, capacity: float) -> float:
    from napkin.engines.memory import parse_reserve

    try:
        held = parse_reserve(str(reserve), capacity)
    except UsageError as exc:
        raise UsageError(str(exc), field="reserve") from None
    if capacity > 0 and held >= capacity:
        raise UsageError(
            f"reserve: {reserve!r} is {units.format_bytes(held)}, not less than the device's "
            f"{units.format_bytes(capacity)}; give bytes (4GB) or a fraction of it (10%)",
            field="reserve",
        )
    return held


@dataclass(frozen=True)
class AdapterOptions:
    """What memory, max_model, step and plan take for fine-tuning with adapters, declared once: the method, the
    adapters' rank and targets, the frozen base's format, paged optimizer states and the adapters' and
    embeddings' dtypes. Questions list these in their signatures (``option_keywords``) and build ``Adapters``
    from them with ``adapters``."""

    finetune: str | Finetune = Finetune.full
    lora_rank: Number | None = None
    lora_targets: str | list[str] | None = None
    base_format: str | BaseFormat | None = None
    double_quant: bool | None = None
    paged_optimizer: bool = False
    adapter_dtype: str | TrainDtype | None = None
    embedding_dtype: str | TrainDtype | None = None

    @classmethod
    def take(cls, options: dict[str, Any]) -> AdapterOptions:
        """These options, taken out of a question's keywords."""
        return cls(**{f.name: options.pop(f.name) for f in dataclasses.fields(cls) if f.name in options})

    @property
    def method(self) -> Finetune:
        return choice(Finetune, self.finetune, "finetune")

    def adapters(self, optimizer: Any, precision: Any, precision_default: Any) -> Any:
        """LoRA/QLoRA settings (``napkin.engines.finetune.Adapters``), or None for full fine-tuning; a UsageError
        for what adapters do not use (a ``precision`` other than the question's default: adapters keep their own
        dtypes; double quantization without an NF4 base) and for adapter options given without adapters."""
        from napkin.engines.finetune import Adapters
        from napkin.engines.lora import DEFAULT_RANK, targets

        method = self.method
        if method is Finetune.full:
            lora_only = (
                self.lora_rank,
                self.lora_targets,
                self.base_format,
                self.double_quant,
                self.adapter_dtype,
                self.embedding_dtype,
            )
            if any(v is not None for v in lora_only) or self.paged_optimizer:
                raise UsageError(
                    "lora_rank, lora_targets, base_format, double_quant, adapter_dtype, embedding_dtype, "
                    "paged_optimizer: used only with finetune lora or qlora",
                    field="finetune",
                    also=("lora_rank", "lora_targets", "base_format", "paged_optimizer"),
                )
            return None
        rank = DEFAULT_RANK if self.lora_rank is None else parse(units.parse_int, self.lora_rank, "lora_rank")
        if rank <= 0:
            raise UsageError(f"lora_rank: {rank} is not a positive whole number", field="lora_rank")
        fmt = None if self.base_format is None else choice(BaseFormat, self.base_format, "base_format")
        if precision is not None and choice(Precision, precision, "precision") != precision_default:
            raise UsageError(
                f"precision: {method} keeps a frozen base (--base-format) and adapters in their own dtype "
                "(--adapter-dtype, --embedding-dtype); --precision is for full fine-tuning",
                field="precision",
            )
        chosen_format = fmt or (BaseFormat.nf4 if method is Finetune.qlora else BaseFormat.bf16)
        if self.double_quant is not None and chosen_format is not BaseFormat.nf4:
            raise UsageError(
                f"double_quant: double quantization is NF4's (QLoRA §3); the base is {chosen_format}",
                field="double_quant",
            )
        adapter_dtype = TrainDtype.fp32 if self.adapter_dtype is None else self.adapter_dtype
        embedding_dtype = self.embedding_dtype
        return Adapters(
            finetune=method,
            rank=rank,
            targets=targets(self.lora_targets),
            base_format=fmt,
            double_quant=True if self.double_quant is None else bool(self.double_quant),
            optimizer=choice(Optimizer, optimizer, "optimizer"),
            paged=bool(self.paged_optimizer),
            adapter_dtype=TrainDtype.fp32
            if adapter_dtype is None
            else choice(TrainDtype, adapter_dtype, "adapter_dtype"),
            embedding_dtype=None if embedding_dtype is None else choice(TrainDtype, embedding_dtype, "embedding_dtype"),
        )


def data_parallel_only(layout: Layout) -> None:
    """LoRA/QLoRA is modelled with each GPU running the whole model: a UsageError naming any other degree."""
    degrees = {
        "tensor_parallel": layout.tensor_parallel,
        "pipeline_parallel": layout.pipeline_parallel,
        "context_parallel": layout.context_parallel,
        "expert_parallel": layout.expert_parallel,
    }
    for key, value in degrees.items():
        if value != 1:
            raise UsageError(
                f"{key}: fine-tuning with adapters is modelled data parallel only (each GPU runs the whole model)",
                field=key,
            )
    if layout.offload is not Offload.none:
        raise UsageError(
            "offload: fine-tuning with adapters is modelled on the GPU (a frozen base has no optimizer states to "
            "offload; --paged-optimizer pages the adapters')",
            field="offload",
        )
    if layout.activation_offload_layers:
        raise UsageError(
            "activation_offload_layers: fine-tuning with adapters keeps its activations on the GPU here",
            field="activation_offload_layers",
        )


def seq_step(seq: int, seq_source: str | None) -> Step:
    """The --explain step saying the sequence length and where it came from (given, or a preset's training
    length)."""
    from napkin.results.explain import step

    origin = "given" if seq_source in (None, "given") else f"{seq_source} (napkin/data/models.yaml)"
    return step("sequence length", "s", f"{seq:,}", f"{seq:,} tokens", origin)


def described(result: T, chosen: Chosen, seq: int | None = None, seq_source: str | None = None) -> T:
    """``result`` naming its model and sequence length (rows, JSON, and a first --explain step for the length),
    with what reading the model's config assumed among its notes."""
    from napkin.results.result import ModelResult

    if isinstance(result, ModelResult):
        result.model = chosen.name if chosen.model is not None else None
        result.seq, result.seq_source = seq, seq_source
        if seq is not None:
            result.steps.insert(0, seq_step(seq, seq_source))
            context = chosen.model.context if chosen.model is not None else None
            if context and seq > context:  # as inference warns for its context
                result.warnings.append(f"seq {seq:,} is longer than the model's {context:,}-token context")
    for kind in ("notes", "warnings"):
        told = getattr(result, kind, None)
        if isinstance(told, list):
            told[:0] = list(getattr(chosen, kind))
    return result
