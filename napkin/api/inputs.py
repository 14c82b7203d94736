"""The shared input layer of the API: parsing keywords into domain objects, one rule each."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from napkin import units
from napkin.domain.choices import Offload, Recompute, Sharding
from napkin.errors import UsageError

if TYPE_CHECKING:  # imported where used: a command pays only for the objects it builds (startup time)
    from napkin.domain.layout import Layout
    from napkin.results.result import Result
    from napkin.systems.profiles import Profile


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
LENGTH_FIELDS = {"layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab", "experts", "top_k"}


# ------------------------------------------------------------------------------------------ inputs


#: The most each count may be: far above what any cluster or workload reaches, so a slip (``--gpus 1e12``) is
#: refused, not computed. Each is (bound, what it counts, why it is enough); README's conventions list them.
LIMITS: dict[str, tuple[int | float, str, str]] = {
    # xAI's Colossus, the largest training cluster announced, is 200,000 GPUs (xAI, 2025): 2^24 is 80 times it.
    "gpus": (2**24, "GPUs", "2^24, 80× the largest cluster built, xAI Colossus's 200,000"),
    # DeepSeek-V3 ramps its batch to 15,360 sequences (arXiv 2412.19437 §4.2); 2^24 is 1,000 times it.
    "global_batch": (2**24, "sequences", "2^24, 1,000× DeepSeek-V3's 15,360"),
    "micro_batch": (2**24, "sequences", "2^24, the most a global batch holds"),
    "global_batch_tokens": (2**40, "tokens", "2^40, 17,000× DeepSeek-V3's 15,360 × 4,096"),
    # vLLM schedules at most max_num_seqs = 1,024 sequences at once on an H100 (vllm/engine/arg_utils.py).
    "batch": (2**24, "sequences", "2^24, 16,000× vLLM's max_num_seqs of 1,024"),
    "concurrency": (2**24, "clients", "2^24, 16,000× vLLM's max_num_seqs of 1,024"),
    # Llama 4 Scout's 10M-token context is the longest a released model offers (Meta, April 2025).
    **dict.fromkeys(
        ("seq", "context", "prompt", "output"), (2**27, "tokens", "2^27 = 128M, 13× Llama 4 Scout's 10M-token context")
    ),
    **dict.fromkeys(
        ("tensor_parallel", "pipeline_parallel", "data_parallel", "context_parallel", "expert_parallel"),
        (2**24, "GPUs", "2^24; a parallel degree counts GPUs"),
    ),
    # Llama 3.1 405B on 16,384 H100s at 400 TFLOP/s each (arXiv 2407.21783 Table 4) is about 2.7M tokens/s.
    **dict.fromkeys(
        ("tokens_per_second", "tokens_per_second_per_gpu"),
        (1e12, "tokens/s", "a trillion a second, 370,000× Llama 3.1 405B's 2.7M on 16,384 H100s"),
    ),
    # ChatGPT answers 2.5 billion prompts a day, 29,000 a second (OpenAI to Axios, July 2025).
    "rate": (1e7, "requests/s", "350× ChatGPT's 2.5 billion prompts a day, 29,000/s"),
    # vLLM's benchmarks/benchmark_serving.py sends 1,000 prompts by default (--num-prompts); a simulation holds every
    # request in memory (a billion was killed for its memory).
    "requests": (2**20, "requests", "2^20, 1,000× the 1,000 prompts of vLLM's benchmark_serving.py"),
    # A collective's payload: NCCL sends buffers of GPU memory, at most a B200's 192 GB each; 1 PB is 5,000 times it.
    "bytes": (1e15, "bytes (1 PB)", "5,000× the 192 GB of a B200, the most one GPU's buffer holds"),
    # vLLM pages KV in blocks of 16 tokens by default (vllm/config/__init__.py CacheConfig, v0.10.1): 2^16 is 4,096
    # times it, a block as long as a long context.
    "block_size": (2**16, "tokens", "2^16, 4,096× vLLM's 16-token block"),
    # A GPU-hour's price: Modal lists an H100 at $3.9492 (hardware/h100-sxm.yaml); $10,000 is 2,500 times it.
    "price": (1e4, "USD per GPU-hour", "2,500× an H100's $3.95 on demand"),
    # OpenAI's Batch API completes within a 24-hour window (platform.openai.com/docs/guides/batch): the loosest
    # latency a served request is promised.
    **dict.fromkeys(
        (f"{metric}_p{q}" for metric in ("ttft", "tpot", "e2e") for q in (50, 90, 99)),
        (86400, "s", "1 day, the 24-hour window of OpenAI's Batch API"),
    ),
}


def bounded(value: T, field: str, given: Any) -> T:
    """``value`` (read from ``given``) if it is at most ``field``'s bound in ``LIMITS``, else a UsageError saying the
    bound and why it is enough."""
    limit = LIMITS.get(field)
    if limit is not None and isinstance(value, int | float) and value > limit[0]:
        bound, noun, why = limit
        shown = repr(given) if len(repr(given)) <= 40 else repr(given)[:39] + "…"
        raise UsageError(
            f"{field}: {shown} is above the {bound:,.0f} {noun} napkin accepts ({why})",
            field=field,
        )
    return value


def parse(parser: Callable[[Any, str], T], value: Any, field: str) -> T:
    """``value`` through a units parser, with any error naming ``field``; at most its bound in ``LIMITS``."""
    try:
        parsed = parser(value, field)
    except UsageError as exc:
        raise UsageError(str(exc), field=field) from None
    return bounded(parsed, field, value)


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


def first_error(exc: ValueError) -> str:
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        return f"{where + ': ' if where else ''}{err['msg'].removeprefix('Value error, ')}"
    return str(exc)


def to_seconds(**durations: Number | None) -> float | None:
    given = {k: v for k, v in durations.items() if v is not None}
    if len(given) > 1:
        raise UsageError(f"give {' or '.join(durations)}, not both", field=next(iter(given)), also=tuple(durations))
    for k, v in given.items():
        return parse(units.parse_number, v, k) * SECONDS[k]
    return None


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


# ------------------------------------------------------------------------------- step and plan


def global_batch_of(
    global_batch: Number | None, global_batch_tokens: Number | None, seq: int
) -> tuple[int | None, int | None]:
    """(global batch in sequences, the tokens it was given as, if it was): ``global_batch_tokens`` in binary k/M,
    rounded to whole sequences of ``seq``; one of the two at most."""
    if global_batch is not None and global_batch_tokens is not None:
        raise UsageError(
            "give global_batch or global_batch_tokens, not both", field="global_batch", also=("global_batch_tokens",)
        )
    if global_batch_tokens is not None:
        # binary k/M as batch sizes are quoted: Llama 3's "4M tokens" is 512 sequences of 8,192 (4·2^20); a fraction
        # (15.7M) is rounded to whole tokens here and to whole sequences below, with a note, never refused
        tokens = parse(units.parse_length_rounded, global_batch_tokens, "global_batch_tokens")
        if tokens < seq:
            raise UsageError(
                f"global_batch_tokens: {tokens:,} tokens is less than one sequence of {seq:,}",
                field="global_batch_tokens",
                also=("seq",),
            )
        return round(tokens / seq), tokens
    return optional(units.parse_int, global_batch, "global_batch"), None
