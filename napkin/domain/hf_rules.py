"""The parts of a family's reading that are computations, not values: which layers hold experts (each MoE family
numbers them its own way) and Falcon's layout switches. ``FAMILIES`` (``napkin.domain.hf_families``) names one of
these per entry; ``napkin.domain.hf_config`` calls it with its reader (``Reading``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from napkin.errors import UsageError


class Reading(Protocol):
    """What a rule reads through: the config's keys, checked reads of them, and the notes it adds."""

    c: dict[str, Any]
    notes: list[str]

    def fail(self, key: str, message: str) -> UsageError: ...

    def flags(self, key: str) -> list[int]: ...

    def whole(self, key: str, default: int) -> int: ...

    def integer(self, target: str, *names: str) -> int | None: ...


#: Which layers hold experts and what they share: (reader, layers, ffn, moe_ffn) → Model fields.
MoeLayout = Callable[[Reading, int, "int | None", "int | None"], dict[str, Any]]
#: Fields a family derives from several keys together: (reader, the fields read so far) → Model fields.
Layout = Callable[[Reading, dict[str, Any]], dict[str, Any]]


def llama4_moe(r: Reading, layers: int, ffn: int | None, moe_ffn: int | None) -> dict[str, Any]:
    """modeling_llama4.py: experts and the shared expert intermediate_size wide, dense layers intermediate_size_mlp;
    experts on moe_layers, else every interleave_moe_layer_step-th layer."""
    out: dict[str, Any] = {"ffn": r.integer("ffn", "intermediate_size_mlp") or ffn, "moe_ffn": ffn, "shared_experts": 1}
    step = max(1, r.whole("interleave_moe_layer_step", 1))
    out["dense_layers"] = layers - len(r.flags("moe_layers") or range(step - 1, layers, step))
    return out


def deepseek_moe(r: Reading, layers: int, ffn: int | None, moe_ffn: int | None) -> dict[str, Any]:
    """modeling_deepseek_v3.py (and GLM-4.5's, Kimi K2's): the first first_k_dense_replace layers dense, then every
    moe_layer_freq-th; n_shared_experts; e_score_correction_bias with DeepSeek's noaux_tc router."""
    shared = r.whole("n_shared_experts", 0)
    first, freq = r.whole("first_k_dense_replace", 0), max(1, r.whole("moe_layer_freq", 1))
    return {
        "shared_experts": shared,
        "dense_layers": layers - sum(1 for i in range(first, layers) if i % freq == 0),
        "router_bias": r.c.get("topk_method") == "noaux_tc",
    }


def qwen_moe(r: Reading, layers: int, ffn: int | None, moe_ffn: int | None) -> dict[str, Any]:
    """modeling_qwen2_moe.py / modeling_qwen3_moe.py: dense on mlp_only_layers and off every decoder_sparse_step-th
    layer; a shared expert shared_expert_intermediate_size wide, counted as that many experts."""
    only, step = r.flags("mlp_only_layers"), max(1, r.whole("decoder_sparse_step", 1))
    out: dict[str, Any] = {"dense_layers": sum(1 for i in range(layers) if i in only or (i + 1) % step)}
    shared = r.c.get("shared_expert_intermediate_size")
    if shared:
        if moe_ffn is None or shared % moe_ffn:
            raise r.fail("shared_expert_intermediate_size", "must be a whole number of experts wide")
        out["shared_experts"] = shared // moe_ffn
        r.notes.append("the shared expert's sigmoid gate (hidden × 1 per layer) is not counted")
    return out


def ernie_moe(r: Reading, layers: int, ffn: int | None, moe_ffn: int | None) -> dict[str, Any]:
    """configuration_ernie4_5_moe.py: experts on every moe_layer_interval-th layer from moe_layer_start_index to
    moe_layer_end_index (-1 or none: the last layer), moe_num_shared_experts shared."""
    shared = r.whole("moe_num_shared_experts", 0)
    start, step = r.whole("moe_layer_start_index", 0), max(1, r.whole("moe_layer_interval", 1))
    end = r.c.get("moe_layer_end_index")
    last = layers - 1 if end is None or end == -1 else r.whole("moe_layer_end_index", layers - 1)
    return {
        "shared_experts": shared,
        "dense_layers": layers - sum(1 for i in range(layers) if (i + 1) % step == 0 and start <= i <= last),
    }


def falcon_layout(r: Reading, out: dict[str, Any]) -> dict[str, Any]:
    """modeling_falcon.py / configuration_falcon.py: new_decoder_architecture (Falcon-40B/180B) has two norms per
    layer and num_kv_heads KV heads; the old one one shared norm when parallel_attn and one KV head when
    multi_query (both default true); ffn_hidden_size None means 4 × hidden_size."""
    c = r.c
    new = bool(c.get("new_decoder_architecture"))
    got: dict[str, Any] = {"norms_per_layer": 2 if new or not c.get("parallel_attn", True) else 1}
    if new:
        got["kv_heads"] = r.integer("kv_heads", "num_kv_heads")
    elif c.get("multi_query", True):
        got["kv_heads"] = 1
    if out["ffn"] is None:
        got["ffn"] = 4 * out["hidden"]
    return got
