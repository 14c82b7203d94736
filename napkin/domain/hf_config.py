"""Hugging Face ``config.json`` → ``Model``: each family read the way its ``transformers`` code builds it.

A config lists only what its family's config class does not default, so reading one exactly needs the
family: Gemma ties its embeddings unless told otherwise and gates its GELU MLP; Qwen2 always biases Q, K
and V; Gemma 2 alternates sliding and global attention; Llama 4 puts chunked attention on three layers in
four. ``FAMILIES`` (``napkin.domain.hf_families``) holds what each ``model_type`` implies, with the
transformers file it comes from (its computations, such as which layers hold experts, in
``napkin.domain.hf_rules``); this reader names no family. An unknown ``model_type`` is read as a
Llama-style decoder and every assumption is listed in ``notes``; a key whose value napkin cannot
represent is refused, naming the key.

Pure: ``read_config`` (and ``from_data``) take the parsed JSON; the file layer reads it
(``napkin.io.hf_files``: a config.json or a model folder) and ``napkin.systems.hf_source`` resolves paths,
folders and Hub ids.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from napkin.domain.choices import Mlp, Norm
from napkin.domain.hf_families import (
    ACT_KEYS,
    ACTIVATIONS,
    FAMILIES,
    HYBRID,
    HYBRID_KEYS,
    Family,
    setting,
    text_part,
    unknown,
)
from napkin.domain.model import Model
from napkin.errors import UsageError


@dataclass
class HfModel:
    """A model read from a config.json: the architecture, its name, and what reading it assumed."""

    model: Model
    name: str
    model_type: str
    family: str
    notes: list[str] = field(default_factory=list)
    #: what reading it had to assume (an unknown model_type)
    warnings: list[str] = field(default_factory=list)
    #: config keys each Model field was read from (for error messages and --explain)
    keys: dict[str, str] = field(default_factory=dict)


class _Reader:
    def __init__(self, c: dict[str, Any], where: str, field: str, prefix: str = "") -> None:
        self.c, self.where, self.field = c, where, field
        self.prefix = prefix  # "text_config." when the language model's keys are nested there
        self.keys: dict[str, str] = {}
        self.notes: list[str] = []
        self.warnings: list[str] = []

    def get(self, target: str, *names: str) -> Any:
        for n in names:
            if self.c.get(n) is not None:
                self.keys[target] = n
                return self.c[n]
        return None

    def fail(self, key: str, message: str) -> UsageError:
        shown = key if key == "config" else self.prefix + key
        return UsageError(f"{self.field}: {self.where}: {shown}: {message}", field=self.field)

    def flags(self, key: str) -> list[int]:
        """A list of whole numbers (layer indices or 0/1 flags), or [] when the key is absent."""
        value = self.c.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int) for v in value):
            raise self.fail(key, "must be a list of whole numbers")
        return value

    def whole(self, key: str, default: int) -> int:
        """A whole-number key the family's layer rule reads (a pattern, a step), or ``default``."""
        value = self.c.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(key, f"{value!r} is not a whole number")
        return value

    def integer(self, target: str, *names: str) -> int | None:
        value = self.get(target, *names)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise self.fail(self.keys[target], f"{value!r} is not a positive whole number")
        return value


def _layer_kinds(r: _Reader, fam: Family, layers: int, context: int | None) -> dict[str, Any]:
    """sliding_window, local_layers and chunked, from layer_types or the family's rule."""
    c = r.c
    types = c.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers:
            raise r.fail("layer_types", f"must list one attention type per layer ({layers})")
        unknown = sorted({str(t) for t in types} - {"full_attention", "sliding_attention", "chunked_attention"})
        if unknown:
            raise r.fail(
                "layer_types",
                f"{unknown[0]!r} is not an attention napkin models (full_attention, "
                "sliding_attention, chunked_attention)",
            )
        local = sum(t != "full_attention" for t in types)
        chunked = "chunked_attention" in types
        window = c.get("attention_chunk_size") if chunked else c.get("sliding_window")
        key = "attention_chunk_size" if chunked else "sliding_window"
        if local and window is None:
            raise r.fail(key, f"layer_types has {local} windowed layers but {key} is not set")
        return _window(r, key, window if local else None, local, chunked, context, "layer_types")
    if fam.sliding == "irope" and c.get("attention_chunk_size"):
        rope = r.flags("no_rope_layers") or [
            int((i + 1) % max(1, r.whole("no_rope_layer_interval", 4)) != 0) for i in range(layers)
        ]
        if len(rope) != layers:
            raise r.fail("no_rope_layers", f"must list one flag per layer ({layers})")
        # iRoPE: RoPE layers attend within chunks; every NoPE layer is global (modeling_llama4.py)
        return _window(
            r, "attention_chunk_size", c["attention_chunk_size"], sum(map(bool, rope)), True, context, "no_rope_layers"
        )
    window = c.get("sliding_window")
    if window is None or c.get("use_sliding_window") is False:
        return {}
    if fam.sliding == "qwen":
        first = c.get("max_window_layers", layers)
        return _window(r, "sliding_window", window, max(0, layers - int(first)), False, context, "max_window_layers")
    if fam.sliding == "nope":  # SmolLM3: the window on the NoPE layers (configuration_smollm3.py layer_types)
        rope = r.flags("no_rope_layers") or [
            int((i + 1) % max(1, r.whole("no_rope_layer_interval", 4)) != 0) for i in range(layers)
        ]
        return _window(r, "sliding_window", window, rope.count(0), False, context, "the no_rope_layers")
    if fam.sliding == "alternate":  # Gemma 2: even layers local (configuration_gemma2.py: (i + 1) % 2)
        return _window(r, "sliding_window", window, (layers + 1) // 2, False, context, "Gemma 2's alternation")
    if fam.sliding == "pattern":  # Gemma 3, EXAONE 4: every sliding_window_pattern-th layer global
        spec = c.get("sliding_window_pattern")
        if isinstance(spec, str) and spec and set(spec) <= {"L", "G"}:  # EXAONE's "LLLG": local, local, local, global
            local = sum(spec[i % len(spec)] == "L" for i in range(layers))
            return _window(r, "sliding_window", window, local, False, context, f"sliding_window_pattern {spec}")
        every = max(1, r.whole("sliding_window_pattern", fam.pattern))
        local = sum(bool((i + 1) % every) for i in range(layers))
        return _window(r, "sliding_window", window, local, False, context, f"sliding_window_pattern {every}")
    return _window(r, "sliding_window", window, layers, False, context, "every layer")


def _window(
    r: _Reader, key: str, window: Any, local: int, chunked: bool, context: int | None, rule: str
) -> dict[str, Any]:
    if window is None or local == 0:
        return {}
    if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
        raise r.fail(key, f"{window!r} is not a positive whole number of tokens")
    if context is not None and window >= context:
        r.notes.append(
            f"{key} {window:,} ≥ max_position_embeddings {context:,}: the window never masks, read as "
            "full attention on every layer"
        )
        return {}
    r.keys["sliding_window"] = key
    r.notes.append(
        f"{'chunked' if chunked else 'sliding-window'} attention ({window:,} tokens) on {local} layers ({rule})"
    )
    return {"sliding_window": window, "local_layers": local, "chunked": chunked}


def _moe(r: _Reader, fam: Family, layers: int, ffn: int | None) -> dict[str, Any]:
    experts = r.integer("experts", "num_local_experts", "n_routed_experts", "num_experts", "moe_num_experts")
    if not experts or experts == 1:
        return {}
    out: dict[str, Any] = {"experts": experts}
    out["top_k"] = r.integer("top_k", "num_experts_per_tok", "experts_per_token", "moe_topk", "moe_k") or 1
    moe_ffn = r.integer("moe_ffn", "moe_intermediate_size")
    out["moe_ffn"] = moe_ffn
    if fam.moe is not None:
        out.update(fam.moe(r, layers, ffn, moe_ffn))
    if fam.router_bias:
        out["router_bias"] = True
    return out


def _non_finite(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


class _NonFinite(float):
    """A config value Python's json spelled NaN or Infinity (``io.yamlio.parse_json``): a float where napkin reads
    a number (refused there as any bad number is), and one line naming its key where napkin reads a flag's truth,
    rather than true (``bool(nan)`` is True: Falcon's ``new_decoder_architecture: NaN`` had changed the count)."""

    named: str
    field: str

    def __new__(cls, value: float, named: str, field: str) -> _NonFinite:
        made = super().__new__(cls, value)
        made.named, made.field = named, field
        return made

    def __bool__(self) -> bool:
        raise UsageError(f"{self.named}: {float(self)!r} is neither true nor false", field=self.field)


def read_config(
    data: dict[str, Any], *, where: str = "config.json", name: str | None = None, field: str = "model_config"
) -> HfModel:
    """The ``Model`` a parsed config.json describes (``where`` names it in errors, ``field`` the input)."""
    c, notes = text_part(data, field)
    prefix = "text_config." if isinstance(data.get("text_config"), dict) else ""
    c = {k: _NonFinite(v, f"{field}: {where}: {prefix}{k}", field) if _non_finite(v) else v for k, v in c.items()}
    r = _Reader(c, where, field, prefix)
    r.notes += notes
    mt = str(c.get("model_type") or "")
    hybrid = HYBRID.get(mt) or next((f"{k} is set" for k in HYBRID_KEYS if c.get(k) is not None), None)
    if hybrid is not None and mt not in FAMILIES:
        raise r.fail(
            "model_type",
            f"{mt or '(none)'!r} is a hybrid ({hybrid}); napkin's Model counts every layer as attention with a KV "
            "cache growing with the context, which these layers do not have: not supported",
        )
    known = mt in FAMILIES
    fam = FAMILIES[mt] if known else unknown(mt)
    if not known:
        r.warnings.append(
            f"model_type {mt or '(none)'!r} is not a family napkin knows ({', '.join(FAMILIES)}); "
            "read as a Llama-style decoder: gated MLP if hidden_act is silu, RMSNorm if rms_norm_eps is "
            "set, 2 norms per layer, no biases unless attention_bias/mlp_bias, untied embeddings unless "
            "tie_word_embeddings",
        )
    act = str(r.get("act", *ACT_KEYS) or "")
    if act and act not in ACTIVATIONS:
        raise r.fail(r.keys["act"], f"{act!r} is not an activation napkin knows ({', '.join(sorted(ACTIVATIONS))})")
    mlp, norm = fam.mlp, fam.norm
    if not known:
        mlp = Mlp.swiglu if act in ("silu", "swish") else Mlp.gelu
        norm = Norm.rmsnorm if "rms_norm_eps" in c else Norm.layernorm
    layers = r.integer("layers", "num_hidden_layers", "n_layer", "num_layers")
    hidden = r.integer("hidden", "hidden_size", "n_embd", "d_model")
    if layers is None or hidden is None:
        missing = "num_hidden_layers" if layers is None else "hidden_size"
        raise r.fail(missing, "missing (a decoder config names its layer count and width)")
    heads = r.integer("heads", "num_attention_heads", "n_head")
    if heads is None:  # read as one head as wide as the model, the KV cache would be 8-64 times too large
        raise r.fail("num_attention_heads", "missing (a decoder config names its attention head count)")
    context = r.integer("context", "max_position_embeddings", "n_positions", "seq_length")
    if context is None and fam.context is not None:
        context = fam.context
        r.notes.append(f"context {context:,}: max_position_embeddings as {fam.label}'s config class defaults it")
    ffn = r.integer("ffn", "intermediate_size", "n_inner", "ffn_hidden_size", "ffn_dim")
    if ffn is None and mlp is not Mlp.gelu:  # GPT-2, GPT-J, Falcon: n_inner/ffn_hidden_size None means 4·d
        raise r.fail("intermediate_size", "missing (a gated MLP's width; napkin would have guessed 4 × hidden_size)")
    if c.get("vocab_size") is None:
        raise r.fail("vocab_size", "missing (the embedding's rows; napkin would have guessed GPT-2's 50,257)")
    out: dict[str, Any] = {
        "layers": layers,
        "hidden": hidden,
        "heads": heads,
        "ffn": ffn,
        "context": context,
        "vocab": r.integer("vocab", "vocab_size"),
        "mlp": mlp,
        "norm": norm,
        "norms_per_layer": fam.norms_per_layer,
        "qk_norm": fam.qk_norm,
        "qkv_bias": fam.qkv_bias,
        "kv_heads": r.integer("kv_heads", "num_key_value_heads"),
        "head_dim": r.integer("head_dim", "head_dim"),
        "model_type": mt if known else None,
    }
    tied = c.get("tie_word_embeddings")
    out["tied_embeddings"] = fam.tied if tied is None else tied  # the file's own bool: "false" is refused
    r.keys.update(tied_embeddings="tie_word_embeddings", biases="bias", head_bias="lm_head_bias")
    if tied is None:
        r.notes.append(f"tie_word_embeddings not given: {fam.label} default, {'tied' if fam.tied else 'untied'}")
    if not fam.qkv_bias:  # Qwen2's Q, K, V biases are the family's, whatever attention_bias says
        out["attention_bias"] = c.get("attention_bias", False)
    out["mlp_bias"] = c.get("mlp_bias", False)
    out.update({target: setting(value, c) for target, value in fam.sets.items()})
    if fam.layout is not None:
        out.update(fam.layout(r, out))
    r.notes += [note.text for note in fam.notes if note.applies(c)]
    if c.get("kv_lora_rank"):  # MLA: DeepSeek-V2 §2.1 (modeling_deepseek_v3.py)
        out.update(
            kv_lora_rank=r.integer("kv_lora_rank", "kv_lora_rank"),
            q_lora_rank=r.integer("q_lora_rank", "q_lora_rank"),
            rope_head_dim=r.integer("rope_head_dim", "qk_rope_head_dim"),
            head_dim=r.integer("head_dim", "qk_nope_head_dim"),
            v_head_dim=r.integer("v_head_dim", "v_head_dim"),
            kv_heads=None,
            attention_bias=False,
        )
    if c.get("use_mtp") and c.get("num_mtp_modules"):
        r.notes.append(
            f"num_mtp_modules {c['num_mtp_modules']}: the multi-token-prediction modules are not counted, "
            "as transformers does not build them"
        )
    mtp = c.get("num_nextn_predict_layers")
    if isinstance(mtp, int) and not isinstance(mtp, bool) and mtp > 0:
        r.notes.append(
            f"num_nextn_predict_layers {mtp}: the multi-token-prediction module (DeepSeek-V3 §2.2; the checkpoint's "
            "extra layer) is not counted, as transformers does not load it (DeepSeek-V3: 671 B as published, not the "
            "Hub's 685 B)"
        )
    if layers > 1 << 16:
        raise r.fail(r.keys["layers"], f"{layers:,} layers: napkin models up to 65,536 (no model is near it)")
    out.update(_moe(r, fam, layers, out["ffn"]))
    out.update(_layer_kinds(r, fam, layers, context))
    fields = {k: v for k, v in out.items() if v is not None}
    try:
        model = Model.model_validate(fields)
    except ValidationError as exc:
        err = exc.errors()[0]
        target = str(err["loc"][0]) if err["loc"] else ""
        message = err["msg"].removeprefix("Value error, ")
        for napkin_name, key in r.keys.items():
            message = re.sub(rf"\b{napkin_name}\b", r.prefix + key, message)  # the config's own key names
        raise r.fail(r.keys.get(target, target or "config"), message) from None
    label = name or hub_name(data) or where
    return HfModel(
        model=model, name=label, model_type=mt, family=fam.label, notes=r.notes, warnings=r.warnings, keys=r.keys
    )


def hub_name(data: dict[str, Any]) -> str | None:
    """``_name_or_path`` when it is a Hub id or a bare name, not a path on someone's disk."""
    value = data.get("_name_or_path")
    if not isinstance(value, str) or not value or value.startswith(("/", ".", "~")) or value.count("/") > 1:
        return None
    return value


def from_data(
    data: dict[str, Any], spec: str | Path, *, field: str = "model_config", name: str | None = None
) -> HfModel:
    """The model of a config.json's parsed object read from ``spec`` (a path or a Hub id), named ``name``, else
    by its ``_name_or_path``, else by ``spec``."""
    return read_config(data, where=repr(str(spec)), name=name or hub_name(data) or str(spec), field=field)
