"""Families added after the first 21 (issue 23/24, "every model as its config says"): each read from its released
config.json (tests/data/hf_configs, SOURCES.md) the way its transformers modeling file builds it, against the
published totals, and its KV cache against the config's own attention shape. Hybrid (linear-attention / Mamba)
families are refused, not counted as attention layers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import napkin
from napkin.domain.hf_config import read_config
from napkin.domain.hf_families import FAMILIES
from napkin.domain.model import Model
from napkin.errors import UsageError
from tests.conftest import Run

DATA = Path(__file__).parent / "data" / "hf_configs"


def config(name: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
    return data


def kv_bytes_per_token(name: str) -> int:
    return int(napkin.kv_cache(model=read_config(config(name)).model, context="4k").kv_bytes_per_token)


@pytest.mark.parametrize(
    ("name", "total", "active"),
    [
        # arXiv:2508.06471 Table 1 and the model cards: GLM-4.5-Air 106B / 12B, GLM-4.5 (= 4.6's shape) 355B / 32B.
        # Zhipu's activated counts leave out the embedding table and the LM head (2 · 151,552 · d): napkin counts
        # them as Mixtral's and Qwen's published active counts do, so they are added back here
        ("glm-4.5-air", 106e9, 12e9),
        ("glm-4.6", 355e9, 32e9),
    ],
)
def test_glm_4_5_totals_and_activated_parameters(name: str, total: float, active: float) -> None:
    m = read_config(config(name)).model
    embeddings = 2 * m.vocab * m.hidden
    assert active <= m.active_params() - embeddings < active + 0.5e9  # 12.18 B, 32.08 B
    if name == "glm-4.5-air":
        assert total <= m.params() < total + 1e9  # 106.85 B: "106B"
    else:  # 352.80 B as transformers loads it; the report's 355B is 0.6 % above (the MTP layer is not loaded)
        assert m.params() == pytest.approx(total, rel=0.01)


def test_glm_4_5_layers_as_modeling_glm4_moe_builds_them() -> None:
    """modeling_glm4_moe.py @ 000c33fd: layers < first_k_dense_replace dense; q/k/v biased, o not; q_norm/k_norm
    head_dim wide when use_qk_norm (GLM-4.6 yes, Air no); one shared expert; e_score_correction_bias."""
    air, big = read_config(config("glm-4.5-air")).model, read_config(config("glm-4.6")).model
    assert (air.dense_layers, big.dense_layers) == (1, 3)
    assert (air.experts, air.top_k, air.shared_experts, air.moe_ffn, air.ffn) == (128, 8, 1, 1408, 10944)
    assert (air.qk_norm, big.qk_norm) == ("none", "head")
    assert air.qkv_bias and not air.attention_bias and air.router_bias
    # one attention block: Q 4096→96·128, K and V 4096→8·128 with biases, O 96·128→4096 without
    assert air.attention_params() == 4096 * 12288 * 2 + 2 * 4096 * 1024 + 12288 + 2 * 1024


@pytest.mark.parametrize(
    ("name", "per_token"),
    [
        # GQA: K and V, 8 heads of 128, 2 bytes, every layer (no sliding window): 46 and 92 layers
        ("glm-4.5-air", 46 * 2 * 8 * 128 * 2),
        ("glm-4.6", 92 * 2 * 8 * 128 * 2),
        ("mistral-small-3.2-24b", 40 * 2 * 8 * 128 * 2),
        ("qwen2.5-vl-7b", 28 * 2 * 4 * 128 * 2),
        ("qwen3-vl-8b", 36 * 2 * 8 * 128 * 2),
        ("qwen3-vl-30b-a3b", 48 * 2 * 4 * 128 * 2),
        # MLA (DeepSeek-V2 §2.1.3): one kv_lora_rank 512 latent + the 64-wide RoPE key per layer, 61 layers
        ("kimi-k2", 61 * (512 + 64) * 2),
        ("olmoe-1b-7b", 16 * 2 * 16 * 128 * 2),  # MHA: 16 KV heads
        ("granite-3.3-8b", 40 * 2 * 8 * 128 * 2),
        ("granite-3.1-3b-a800m", 32 * 2 * 8 * 64 * 2),  # head_dim 1,536 / 24 = 64
        ("minitron-4b", 32 * 2 * 8 * 128 * 2),
        ("aya-23-8b", 32 * 2 * 8 * 128 * 2),
        ("minimax-m2.5", 62 * 2 * 8 * 128 * 2),
        ("ernie-4.5-21b-a3b", 28 * 2 * 4 * 128 * 2),
        ("smollm3-3b", 36 * 2 * 4 * 128 * 2),  # use_sliding_window false: every layer keeps the whole context
        ("starcoder2-7b", 32 * 2 * 4 * 128 * 2),  # per token until the 4,096-token window fills (below)
    ],
)
def test_kv_cache_per_token_follows_the_config(name: str, per_token: int) -> None:
    assert kv_bytes_per_token(name) == per_token


def test_mistral_small_3_reads_its_language_model_and_names_the_pixtral_tower() -> None:
    """Mistral3Config keeps the decoder in text_config (model_type mistral: untied, 40 layers); the Pixtral tower is
    a gated, RoPE encoder, not a ViT with a position table, so it is named but not sized."""
    read = read_config(config("mistral-small-3.2-24b"))
    m = read.model
    assert (m.layers, m.hidden, m.heads, m.kv_heads, m.d_head, m.vocab, m.tied_embeddings) == (
        40,
        5120,
        32,
        8,
        128,
        131072,
        False,
    )
    assert any(
        "vision tower (pixtral, 24 layers, width 1024) and its projector are not counted" in n for n in read.notes
    )


HYBRIDS: dict[str, dict[str, object]] = {
    # the architecture keys of released configs (Qwen/Qwen3-Next-80B-A3B-Instruct, nvidia/NVIDIA-Nemotron-Nano-9B-v2,
    # tiiuae/Falcon-H1-7B-Instruct, ai21labs/AI21-Jamba-Mini-1.5): what marks each as a hybrid
    "qwen3_next": {"layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"]},
    "nemotron_h": {"hybrid_override_pattern": "M-M-M-MM-M-M-M*-"},
    "falcon_h1": {"mamba_d_ssm": 3072, "mamba_n_heads": 24},
    "jamba": {"attn_layer_period": 8, "attn_layer_offset": 4},
}


@pytest.mark.parametrize("model_type", sorted(HYBRIDS))
def test_a_hybrid_is_refused_not_counted_as_attention(model_type: str, tmp_path: Path, napkin: Run) -> None:
    """Before: nemotron_h, falcon_h1 and jamba were read as Llama-style decoders (one warning), every Mamba layer
    counted as attention with a KV cache; qwen3_next was refused for its layer_types, not for what it is."""
    data = {**config("llama-3.1-8b"), "model_type": model_type, **HYBRIDS[model_type]}
    with pytest.raises(UsageError, match=f"model_type: '{model_type}' is a hybrid") as info:
        read_config(data)
    assert info.value.field == "model_config"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    result = napkin("kv-cache", "--model-config", str(path), "--context", "8k")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"'{model_type}' is a hybrid" in lines[0] and "not supported" in lines[0]


def test_an_unknown_model_type_with_a_mamba_key_is_refused_too() -> None:
    with pytest.raises(UsageError, match="'my_hybrid' is a hybrid \\(hybrid_override_pattern is set\\)"):
        read_config({**config("llama-3.1-8b"), "model_type": "my_hybrid", "hybrid_override_pattern": "M*M*"})


@pytest.mark.parametrize(("vl", "text"), [("qwen3-vl-8b", "qwen3-8b"), ("qwen3-vl-30b-a3b", "qwen3-30b-a3b")])
def test_qwen3_vl_reads_its_text_decoder_as_qwen3(vl: str, text: str) -> None:
    """Qwen3VLConfig / Qwen3VLMoeConfig keep the decoder in text_config (model_type qwen3_vl_text / _moe_text),
    Qwen3's blocks with a head_dim-wide QK norm; the vision tower (27 layers, width 1152) is named, not counted."""
    read = read_config(config(vl))
    ours, theirs = read.model, read_config(config(text)).model
    assert ours.model_dump(exclude={"model_type", "context"}) == theirs.model_dump(exclude={"model_type", "context"})
    assert not read.warnings
    assert any("vision tower (qwen3_vl" in n and "27 layers, width 1152" in n for n in read.notes)


def test_kimi_k2_is_deepseek_v3_with_384_experts() -> None:
    """Kimi-K2-Instruct's config.json names model_type kimi_k2 (remote code: configuration_deepseek.py,
    DeepseekV3Config): MLA, 1 dense layer then 384 routed + 1 shared expert, 8 per token, a noaux_tc router."""
    read = read_config(config("kimi-k2"))
    m = read.model
    assert not read.warnings and read.family == "Kimi K2"
    assert (m.kv_lora_rank, m.q_lora_rank, m.experts, m.shared_experts, m.top_k, m.dense_layers) == (
        512,
        1536,
        384,
        1,
        8,
        1,
    )
    assert m.router_bias
    assert any("kimi_k2 loads as remote code" in n for n in read.notes)


def test_a_released_hybrid_config_is_refused() -> None:
    """nvidia/Nemotron-H-56B-Base-8K: 118 layers of which 10 attention (*), the rest Mamba-2 (M) and MLP (-)."""
    with pytest.raises(UsageError, match="'nemotron_h' is a hybrid"):
        read_config(config("nemotron-h-56b"))


def test_starcoder2_is_biased_layernorm_gelu_with_a_window_on_every_layer() -> None:
    """modeling_starcoder2.py: q/k/v/o and c_fc/c_proj biased (use_bias), LayerNorm γ and β, a two-matrix GELU MLP,
    tied embeddings (Starcoder2Config default; the config omits the key), sliding_window 4,096 on all 32 layers: the
    KV cache stops growing at 4,096 tokens."""
    m = read_config(config("starcoder2-7b")).model
    assert (m.mlp, m.norm, m.biases, m.tied_embeddings, m.sliding_window, m.n_local) == (
        "gelu",
        "layernorm",
        True,
        True,
        4096,
        32,
    )
    d, kv, f = 4608, 4 * 128, 18432
    assert m.attention_params() == 2 * d * d + 2 * d * kv + 2 * d + 2 * kv
    assert m.mlp_params() == 2 * d * f + f + d
    at_4k = napkin.kv_cache(model=m, context="4k").kv_bytes_per_sequence
    assert napkin.kv_cache(model=m, context="16k").kv_bytes_per_sequence == at_4k == 4096 * 32 * 2 * 4 * 128 * 2


def test_olmoe_norms_queries_and_keys_over_the_whole_projection() -> None:
    """modeling_olmoe.py: q_norm RMSNorm(hidden_size), k_norm RMSNorm(n_kv · d_h); 64 experts, 8 per token, no
    shared expert, every layer sparse."""
    m = read_config(config("olmoe-1b-7b")).model
    assert (m.qk_norm, m.experts, m.top_k, m.shared_experts, m.dense_layers, m.d_expert) == ("full", 64, 8, 0, 0, 1024)
    assert m.attention_params() == 4 * 2048 * 2048 + 2048 + 2048


def test_smollm3_windows_only_its_nope_layers_when_asked() -> None:
    """configuration_smollm3.py: no_rope_layers from no_rope_layer_interval 4 (every 4th layer NoPE: 9 of 36), and
    with use_sliding_window the window goes on those layers only; the released config switches it off."""
    data = config("smollm3-3b")
    assert read_config(data).model.sliding_window is None
    m = read_config({**data, "use_sliding_window": True, "sliding_window": 4096}).model
    assert (m.sliding_window, m.n_local) == (4096, 9)
    explicit = read_config({**data, "use_sliding_window": True, "sliding_window": 4096, "no_rope_layers": [1, 0] * 18})
    assert explicit.model.n_local == 18


def test_granite_moe_is_40_experts_8_active_with_800m_active_in_the_blocks() -> None:
    """modeling_granitemoe.py: every layer 40 experts (intermediate_size 512), 8 per token, no shared expert; IBM's
    "a800m" counts the blocks' active parameters (0.807 B), napkin's active count adds the 49,155 × 1,536 table."""
    m = read_config(config("granite-3.1-3b-a800m")).model
    assert (m.experts, m.top_k, m.shared_experts, m.d_expert, m.dense_layers, m.tied_embeddings) == (
        40,
        8,
        0,
        512,
        0,
        True,
    )
    assert 0.80e9 <= m.active_params() - m.vocab * m.hidden < 0.81e9


def test_nemotron_is_a_two_matrix_squared_relu_mlp_with_layernorm() -> None:
    """modeling_nemotron.py: up_proj and down_proj only (relu2), NemotronLayerNorm1P with γ and β, untied; 2.6 B
    outside the 256,000 × 3,072 tables (Minitron's "2.6B non-embedding")."""
    m = read_config(config("minitron-4b")).model
    assert (m.mlp, m.mlp_matrices, m.norm, m.tied_embeddings) == ("gelu", 2, "layernorm", False)
    assert m.mlp_params() == 2 * 3072 * 9216
    assert 2.6e9 <= m.params() - 2 * 256_000 * 3072 < 2.65e9


def test_cohere_is_one_bias_free_layernorm_per_parallel_block_and_tied() -> None:
    """modeling_cohere.py: input_layernorm only (attention and MLP read the same normed input), CohereLayerNorm holds
    γ alone (d, not LayerNorm's 2d), tied by default; use_qk_norm adds a γ per head for Q and K (Command R+)."""
    data = config("aya-23-8b")
    m = read_config(data).model
    assert (m.norm, m.norms_per_layer, m.tied_embeddings, m.norm_params()) == ("layernorm_nobias", 1, True, 4096)
    with_qk = read_config({**data, "use_qk_norm": True}).model
    assert with_qk.params() - m.params() == 32 * (32 + 8) * 128


def test_minimax_m2_is_full_attention_with_256_experts_and_10b_active_outside_the_tables() -> None:
    """modeling_minimax_m2.py: attention on all 62 layers (model_type minimax_m2, not MiniMax-01's lightning
    attention, which is refused), q_norm/k_norm over the whole projection, 256 experts 8 per token on every layer,
    a router bias; the card's "10 billion active" leaves out the 200,064 × 3,072 tables (9.80 B)."""
    read = read_config(config("minimax-m2.5"))
    m = read.model
    assert (m.qk_norm, m.experts, m.top_k, m.dense_layers, m.d_expert, m.router_bias) == ("full", 256, 8, 0, 1536, True)
    assert 9.75e9 <= m.active_params() - 2 * m.vocab * m.hidden < 10.5e9
    assert any("num_mtp_modules 3" in n for n in read.notes)


def test_qwen2_5_vl_is_qwen2_5_with_its_biases_and_says_the_vision_tower_is_apart() -> None:
    """Qwen2.5-VL-7B's config.json keeps the decoder's keys at the top level: read as Qwen2.5-7B (Q, K, V biased,
    modeling_qwen2_5_vl.py), not as an unknown Llama-style decoder without them (28 · 4,608 parameters fewer, and
    a warning, before)."""
    read = read_config(config("qwen2.5-vl-7b"))
    theirs = read_config(config("qwen2.5-7b")).model
    assert read.model.model_dump(exclude={"model_type", "context"}) == theirs.model_dump(
        exclude={"model_type", "context"}
    )
    assert read.model.qkv_bias and not read.warnings
    assert any("vision tower" in n and "32 layers, width 1280" in n for n in read.notes)


def test_ernie_4_5_moe_layers_as_its_config_class_places_them() -> None:
    """configuration_ernie4_5_moe.py / modeling_ernie4_5_moe.py: experts on layers moe_layer_start_index 1 to
    moe_layer_end_index 27, every moe_layer_interval 1 (layer 0 dense), 64 experts 6 per token, a shared MLP two
    experts wide, e_score_correction_bias; the card's "3B activated" is the blocks' 3.09 B, the tied table apart."""
    m = read_config(config("ernie-4.5-21b-a3b")).model
    assert (m.experts, m.top_k, m.shared_experts, m.dense_layers, m.router_bias, m.biases) == (64, 6, 2, 1, True, False)
    assert 3.0e9 <= m.active_params() - m.vocab * m.hidden < 3.1e9
    every_other = read_config({**config("ernie-4.5-21b-a3b"), "moe_layer_interval": 2, "moe_layer_end_index": -1})
    assert every_other.model.dense_layers == 28 - 14  # layers 1, 3, ..., 27


def test_exaone_4_windows_three_layers_in_four() -> None:
    """configuration_exaone4.py: layer i global when (i + 1) % sliding_window_pattern == 0 (4: 16 of 64), the
    others a 4,096-token window; "LLLG" spells the same. At 32k tokens the 16 global layers cache 32,768 tokens and
    the 48 local ones 4,096, 8 KV heads of 128 in bf16."""
    data = config("exaone-4.0-32b")
    m = read_config(data).model
    assert (m.sliding_window, m.n_local, m.qk_norm, m.norms_per_layer) == (4096, 48, "head", 2)
    assert read_config({**data, "sliding_window_pattern": "LLLG"}).model.n_local == 48
    kv = napkin.kv_cache(model=m, context="32k").kv_bytes_per_sequence
    assert kv == (16 * 32768 + 48 * 4096) * 2 * 8 * 128 * 2


def test_every_field_a_family_sets_is_a_model_field() -> None:
    """FAMILIES' per-family settings name Model fields; a misspelt one would only fail on that family's configs."""
    unknown = {mt: sorted(set(fam.sets) - set(Model.model_fields)) for mt, fam in FAMILIES.items()}
    assert not {mt: names for mt, names in unknown.items() if names}


def test_an_unlisted_deepseek_keeps_its_dense_layers_and_shared_expert() -> None:
    """A DeepSeek model_type napkin does not list (DeepSeek-V3.2-Exp's config.json: deepseek_v32, V3's shape) is
    read Llama-style with a warning, but its experts as DeepSeek places them: first_k_dense_replace 3 dense layers,
    n_shared_experts 1, a noaux_tc router's bias, 671 B as DeepSeek-V3 (arXiv:2412.19437 §1)."""
    read = read_config({**config("deepseek-v3"), "model_type": "deepseek_v32"})
    m = read.model
    assert read.warnings and read.family == "unknown"
    assert (m.experts, m.shared_experts, m.dense_layers, m.router_bias) == (256, 1, 3, True)
    assert m.params() == pytest.approx(671e9, rel=0.005)
