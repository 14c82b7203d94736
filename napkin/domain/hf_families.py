"""What each Hugging Face ``model_type`` implies beyond the keys its config.json spells out (``FAMILIES``, from the
transformers code that builds it), and the language model inside a multimodal config (``text_config``; the vision
tower counted apart). ``napkin.domain.hf_config`` reads a config with them."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from napkin.domain.choices import Mlp, Norm, QkNorm
from napkin.domain.hf_rules import Layout, MoeLayout, deepseek_moe, ernie_moe, falcon_layout, llama4_moe, qwen_moe
from napkin.errors import UsageError

#: transformers v5.24 (huggingface/transformers, src/transformers/models/<family>/modeling_<family>.py and
#: configuration_<family>.py): what each family's blocks contain beyond the keys its config.json spells out.
TRANSFORMERS = "huggingface/transformers v5.24 models/<model_type>/configuration_*.py, modeling_*.py"


#: Which layers a window applies to (``napkin.domain.hf_config._layer_kinds``): all; alternate (Gemma 2); pattern,
#: all but every sliding_window_pattern-th (Gemma 3, EXAONE 4); qwen, from max_window_layers on; nope, the NoPE
#: layers (SmolLM3); types, as layer_types lists (all when absent); irope, attention_chunk_size chunks on the RoPE
#: layers (Llama 4).
Sliding = Literal["all", "alternate", "pattern", "qwen", "nope", "types", "irope"]

#: The keys naming the activation, first found first (Gemma's hidden_activation overrides its hidden_act).
ACT_KEYS = ("hidden_activation", "hidden_act", "activation_function")


@dataclass(frozen=True)
class Key:
    """A Model field set to a config key's own value, ``default`` when the key is absent."""

    name: str
    default: bool


@dataclass(frozen=True)
class Truth:
    """A Model field set by a config key's truth: ``then`` when it is set and true, ``otherwise`` when not (the
    modeling file's ``if config.<name>``)."""

    name: str
    then: Any = True
    otherwise: Any = False


@dataclass(frozen=True)
class Note:
    """A note reading a family adds: always when ``keys`` is empty, else when the first of ``keys`` set has
    ``value`` (None: when none is set)."""

    text: str
    keys: tuple[str, ...] = ()
    value: Any = None

    def applies(self, c: dict[str, Any]) -> bool:
        return not self.keys or next((c[k] for k in self.keys if c.get(k) is not None), None) == self.value


def setting(value: Any, c: dict[str, Any]) -> Any:
    """The Model field value a family's ``sets`` entry gives for config ``c``."""
    if isinstance(value, Key):
        return c.get(value.name, value.default)
    if isinstance(value, Truth):
        return value.then if c.get(value.name) else value.otherwise
    return value


@dataclass(frozen=True)
class Family:
    """What a ``model_type`` implies. ``tied``: ``tie_word_embeddings`` when the config omits it. ``sets``: Model
    fields the family fixes or reads from its own keys (a value, ``Key`` or ``Truth``), over what the generic keys
    (attention_bias, mlp_bias) gave; ``layout``/``moe``: the computations of ``napkin.domain.hf_rules`` it needs."""

    label: str
    mlp: Mlp = Mlp.swiglu
    norm: Norm = Norm.rmsnorm
    norms_per_layer: int = 2
    qk_norm: QkNorm = QkNorm.none
    tied: bool = False
    qkv_bias: bool = False  # Q, K, V biases whatever the config says (Qwen2)
    sliding: Sliding = "all"  # which layers sliding_window (or Llama 4's attention_chunk_size) applies to
    context: int | None = None  # max_position_embeddings when the config omits it (its config class's default)
    pattern: int = 6  # sliding_window_pattern when the config omits it (sliding "pattern": Gemma 3's 6)
    sets: dict[str, Any] = field(default_factory=dict)
    notes: tuple[Note, ...] = ()
    layout: Layout | None = None  # fields derived from several keys together (Falcon)
    moe: MoeLayout | None = None  # which layers hold experts; None: every layer, no shared expert
    router_bias: bool = False  # a router bias whatever the config says (gpt-oss; e_score_correction_bias)


GEMMA_GELU = "hidden_act 'gelu' in a Gemma config means the tanh approximation (modeling_gemma.py)"
KIMI_REMOTE = (
    "kimi_k2 loads as remote code (trust_remote_code, modeling_deepseek.py), whose experts are nn.Linear "
    "modules that peft's all-linear would adapt; napkin's LoRA layout is transformers 5's fused experts"
)
ROTARY_DIM = "rotary_dim not given (RoPE has no parameters; no effect on the counts)"


FAMILIES: dict[str, Family] = {
    "llama": Family("Llama 1-3"),
    "mistral": Family("Mistral"),
    "mixtral": Family("Mixtral"),
    "qwen2": Family("Qwen2/2.5", qkv_bias=True, sliding="qwen"),
    "qwen2_moe": Family("Qwen2-MoE", qkv_bias=True, sliding="qwen", moe=qwen_moe),
    # modeling_qwen2_5_vl.py: the text decoder is Qwen2's (Q, K, V biased); its config.json keeps the decoder's keys
    # at the top level (transformers 5 writes them under text_config, model_type qwen2_5_vl_text)
    "qwen2_5_vl": Family("Qwen2.5-VL", qkv_bias=True, sliding="qwen"),
    "qwen2_5_vl_text": Family("Qwen2.5-VL", qkv_bias=True, sliding="qwen"),
    "qwen3": Family("Qwen3", qk_norm=QkNorm.head, sliding="qwen"),
    "qwen3_moe": Family("Qwen3-MoE", qk_norm=QkNorm.head, sliding="qwen", moe=qwen_moe),
    # modeling_qwen3_vl.py / modeling_qwen3_vl_moe.py: the text decoders are Qwen3's and Qwen3-MoE's (q_norm/k_norm
    # head_dim wide, no biases); the model_type their text_config names
    "qwen3_vl_text": Family("Qwen3-VL", qk_norm=QkNorm.head),
    "qwen3_vl_moe_text": Family("Qwen3-VL-MoE", qk_norm=QkNorm.head, moe=qwen_moe),
    # modeling_gemma.py: hidden_act "gelu" runs as gelu_pytorch_tanh
    "gemma": Family("Gemma", mlp=Mlp.geglu, tied=True, notes=(Note(GEMMA_GELU, ACT_KEYS, "gelu"),)),
    "gemma2": Family("Gemma 2", mlp=Mlp.geglu, tied=True, norms_per_layer=4, sliding="alternate"),
    "gemma3_text": Family(
        "Gemma 3", mlp=Mlp.geglu, tied=True, norms_per_layer=4, qk_norm=QkNorm.head, sliding="pattern"
    ),
    "phi3": Family("Phi-3/3.5/4"),
    # modeling_phimoe.py: a bias on the LM head when lm_head_bias
    "phimoe": Family("Phi-3.5-MoE", norm=Norm.layernorm, sets={"head_bias": Key("lm_head_bias", False)}),
    "olmo2": Family("OLMo 2", qk_norm=QkNorm.full),
    # modeling_exaone4.py: q_norm/k_norm head_dim wide, two norms per layer (after attention and after the MLP);
    # configuration_exaone4.py: sliding window on all but every sliding_window_pattern-th layer (default 4)
    "exaone4": Family("EXAONE 4.0", qk_norm=QkNorm.head, sliding="pattern", pattern=4),
    # modeling_olmoe.py: q_norm over hidden_size, k_norm over n_kv·d_h (OLMo 2's), fused experts, a bias-free router
    "olmoe": Family("OLMoE", qk_norm=QkNorm.full),
    # modeling_granite.py: Llama's blocks; embedding/residual/attention/logits multipliers scale, they hold no weights
    "granite": Family("Granite 3"),
    # modeling_granitemoe.py: Granite's attention; num_local_experts fused SwiGLU experts intermediate_size wide, a
    # bias-free router (a bare weight), no shared expert
    "granitemoe": Family("Granite 3 MoE"),
    # modeling_smollm3.py: Llama's blocks, RoPE left out on every no_rope_layer_interval-th layer (no weights);
    # configuration_smollm3.py: tied by default, a sliding window (use_sliding_window) only on those NoPE layers
    "smollm3": Family("SmolLM3", tied=True, sliding="nope"),
    # modeling_starcoder2.py: LayerNorm (γ, β), a two-matrix c_fc/c_proj GELU MLP, use_bias on every projection,
    # sliding_window on every layer; Starcoder2Config ties the embeddings and biases every projection (use_bias=True)
    # by default
    "starcoder2": Family(
        "StarCoder2", mlp=Mlp.gelu, norm=Norm.layernorm, tied=True, sets={"biases": Key("use_bias", True)}
    ),
    "deepseek_v2": Family("DeepSeek-V2", moe=deepseek_moe),
    "deepseek_v3": Family("DeepSeek-V3/R1", moe=deepseek_moe),
    # moonshotai/Kimi-K2-Instruct configuration_deepseek.py (remote code): DeepseekV3Config named kimi_k2, the same
    # MLA and DeepSeekMoE blocks (modeling_deepseek.py), 384 routed experts; not a transformers model type
    "kimi_k2": Family("Kimi K2", moe=deepseek_moe, notes=(Note(KIMI_REMOTE),)),
    # modeling_gpt_oss.py: biases on Q, K, V, O, the experts and the router; an attention sink per head
    "gpt_oss": Family(
        "gpt-oss",
        sliding="types",
        sets={"attention_bias": True, "mlp_bias": True, "sinks": True},
        router_bias=True,
    ),
    # modeling_minimax_m2.py: full attention on every layer (not MiniMax-01's lightning attention), q_norm/k_norm over
    # the whole projection, num_local_experts fused experts intermediate_size wide on every layer, a sigmoid router
    # with e_score_correction_bias; the MTP modules (use_mtp) are not built
    "minimax_m2": Family("MiniMax-M2", qk_norm=QkNorm.full, router_bias=True),
    # modeling_ernie4_5_moe.py: moe_num_experts fused experts (moe_k per token) on layers moe_layer_start_index to
    # moe_layer_end_index every moe_layer_interval, a shared MLP moe_num_shared_experts experts wide, a bias-free
    # router with e_score_correction_bias, use_bias on every projection and the LM head; tied by default
    "ernie4_5_moe": Family(
        "ERNIE 4.5 MoE",
        tied=True,
        sets={"biases": Truth("use_bias"), "head_bias": Truth("use_bias")},
        moe=ernie_moe,
        router_bias=True,
    ),
    # modeling_llama4.py: iRoPE, chunked attention on the RoPE layers (no_rope_layers) when attention_chunk_size
    "llama4_text": Family("Llama 4", sliding="irope", moe=llama4_moe),
    # modeling_glm4_moe.py @ 000c33fd: Q, K, V biased by attention_bias, O never; q_norm/k_norm (head_dim wide)
    # when use_qk_norm; the first first_k_dense_replace layers dense, then n_routed_experts + a shared expert
    # moe_intermediate_size · n_shared_experts wide, a sigmoid router with e_score_correction_bias
    "glm4_moe": Family(
        "GLM-4.5/4.6",
        sets={
            "qkv_bias": Truth("attention_bias"),
            "attention_bias": False,
            "qk_norm": Truth("use_qk_norm", QkNorm.head, QkNorm.none),
        },
        moe=deepseek_moe,
        router_bias=True,
    ),
    # modeling_nemotron.py: a two-matrix up_proj/down_proj MLP with squared ReLU (relu2, not gated), LayerNorm1P
    # (γ and β), biases where attention_bias/mlp_bias say; partial_rotary_factor rotates part of each head (no weights)
    "nemotron": Family("Nemotron-4/Minitron", mlp=Mlp.gelu, norm=Norm.layernorm),
    # modeling_cohere.py: one CohereLayerNorm (γ only) feeding attention and MLP in parallel, tied embeddings
    # (CohereConfig default), q_norm/k_norm per head over the whole projection when use_qk_norm (Command R+)
    "cohere": Family(
        "Command R",
        norm=Norm.layernorm_nobias,
        norms_per_layer=1,
        tied=True,
        sets={"qk_norm": Truth("use_qk_norm", QkNorm.full, QkNorm.none)},
    ),
    # FalconConfig(max_position_embeddings=2048): Falcon-7B's config.json leaves it out; biases where bias says
    "falcon": Family(
        "Falcon",
        mlp=Mlp.gelu,
        norm=Norm.layernorm,
        tied=True,
        context=2048,
        sets={"biases": Key("bias", False)},
        layout=falcon_layout,
    ),
    # modeling_gpt2.py: biases on every Conv1D, a learned position table (wpe), dropout where resid_pdrop says
    "gpt2": Family(
        "GPT-2",
        mlp=Mlp.gelu,
        norm=Norm.layernorm,
        tied=True,
        sets={"biases": True, "learned_positions": True, "dropout": Truth("resid_pdrop")},
    ),
    # modeling_gpt_neox.py: biases on every linear layer, two LayerNorms per layer
    "gpt_neox": Family("GPT-NeoX", mlp=Mlp.gelu, norm=Norm.layernorm, sets={"biases": True}),
    # modeling_gptj.py: Q, K, V, O without biases; the MLP and the LM head biased
    "gptj": Family(
        "GPT-J",
        mlp=Mlp.gelu,
        norm=Norm.layernorm,
        norms_per_layer=1,
        sets={"mlp_bias": True, "head_bias": True},
        notes=(Note(ROTARY_DIM, ("rotary_dim",)),),
    ),
}


#: Multimodal wrappers: the language model's config is ``text_config``.
WRAPPERS = {
    "gemma3": "gemma3_text",
    "llama4": "llama4_text",
    "mistral3": "mistral",
    "llava": "llama",
    "qwen2_5_vl": "qwen2_5_vl_text",
    "qwen3_vl": "qwen3_vl_text",
    "qwen3_vl_moe": "qwen3_vl_moe_text",
}


#: Vision towers that are plain ViTs (``vit_params``); others (Pixtral's gated, RoPE encoder) are named, not sized.
VIT_TOWERS = {"siglip_vision_model", "siglip", "clip_vision_model"}


#: Activations the MLP formulas cover (hidden_act / activation_function / hidden_activation).
ACTIVATIONS = {
    "silu",
    "swish",
    "gelu",
    "gelu_new",
    "gelu_fast",
    "gelu_pytorch_tanh",
    "gelu_python",
    "gelu_accurate",
    "quick_gelu",
    "relu",
    "relu2",
    "tanh",
}


#: Families whose layers are not all attention (transformers v5.24 models/<model_type>/configuration_*.py): Mamba /
#: linear-attention layers keep a fixed-size state, not a KV cache growing with the context. napkin's Model has one
#: kind of layer, attention; counting these as attention would overstate the KV cache (by 4-8× for a 1-in-4 or
#: 1-in-8 hybrid) and misstate FLOPs, so they are refused, naming why.
HYBRID: dict[str, str] = {
    "qwen3_next": "Gated DeltaNet linear attention on 3 layers in 4 (layer_types linear_attention)",
    "qwen3_5": "Gated DeltaNet linear attention on 3 layers in 4 (layer_types linear_attention)",
    "qwen3_5_moe": "Gated DeltaNet linear attention on 3 layers in 4 (layer_types linear_attention)",
    "qwen3_5_text": "Gated DeltaNet linear attention on 3 layers in 4 (layer_types linear_attention)",
    "qwen3_5_moe_text": "Gated DeltaNet linear attention on 3 layers in 4 (layer_types linear_attention)",
    "nemotron_h": "Mamba-2 layers among attention and MLP layers (hybrid_override_pattern M, *, -)",
    "falcon_h1": "Mamba-2 heads in parallel with attention in every layer (mamba_d_ssm, mamba_n_heads)",
    "jamba": "Mamba layers with attention on one layer in attn_layer_period",
    "bamba": "Mamba-2 layers with attention on attn_layer_indices",
    "granitemoehybrid": "Mamba-2 layers with attention on the layers layer_types names",
    "zamba": "Mamba layers with a shared attention block",
    "zamba2": "Mamba-2 layers with shared attention blocks",
    "lfm2": "short convolution layers with attention on full_attn_idxs",
    "lfm2_moe": "short convolution layers with attention on full_attn_idxs",
    "minimax": "lightning (linear) attention on 7 layers in 8 (layer_types)",
    "kimi_linear": "Kimi Delta Attention (linear) on 3 layers in 4",
    "recurrent_gemma": "RG-LRU recurrent layers with local attention on 1 layer in 3",
    "mamba": "Mamba (state-space) layers only, no attention",
    "mamba2": "Mamba-2 (state-space) layers only, no attention",
    "falcon_mamba": "Mamba (state-space) layers only, no attention",
    "rwkv": "RWKV recurrent layers only, no attention",
}
#: Keys that only a hybrid or state-space config has: an unknown model_type carrying one is refused too.
HYBRID_KEYS = ("hybrid_override_pattern", "attn_layer_period", "attn_layer_indices", "mamba_d_state", "ssm_state_size")


#: A Llama-style decoder: what an unknown ``model_type`` is read as.
DEFAULT = Family("unknown")
#: An unknown ``model_type`` beginning with one of these: DEFAULT with that family's expert layout (a DeepSeek not
#: listed yet, e.g. deepseek_v32, keeps its dense first layers and shared experts).
PREFIXES = {"deepseek": replace(DEFAULT, moe=deepseek_moe)}


def unknown(model_type: str) -> Family:
    """The family an unknown ``model_type`` is read as."""
    return next((fam for prefix, fam in PREFIXES.items() if model_type.startswith(prefix)), DEFAULT)


def text_part(c: dict[str, Any], field: str) -> tuple[dict[str, Any], list[str]]:
    """The language model's keys of a (possibly multimodal) config, and a note on what is left out."""
    for part, keys in (("", c), ("text_config.", c.get("text_config"))):
        kind = keys.get("model_type") if isinstance(keys, dict) else None
        if kind is not None and not isinstance(kind, str):  # a list or a number names no family (nor hashes)
            raise UsageError(
                f"{field}: {part}model_type: {str(kind)[:40]!r} is not a model type such as 'llama'", field=field
            )
    text = c.get("text_config")
    if text is not None and not isinstance(text, dict):
        raise UsageError(
            f"{field}: text_config: must be a mapping of the language model's keys, not {type(text).__name__}",
            field=field,
        )
    if not isinstance(text, dict):
        if c.get("model_type") in WRAPPERS and "num_hidden_layers" not in c:
            raise UsageError(
                f"{field}: text_config: a {c['model_type']} config keeps its language model there, and it is missing",
                field=field,
            )
        return c, apart(c)  # Qwen2.5-VL's config.json: the language model's keys at the top, beside vision_config
    merged = {k: v for k, v in c.items() if k in ("tie_word_embeddings", "_name_or_path")}
    merged.update(text)
    merged.setdefault("model_type", WRAPPERS.get(str(c.get("model_type")), text.get("model_type")))
    return merged, apart(c)


def apart(c: dict[str, Any]) -> list[str]:
    """What a multimodal config holds beyond its language model: the vision tower (sized when a plain ViT), audio."""
    notes = []
    vision = c.get("vision_config")
    if isinstance(vision, dict):
        kind = vision.get("model_type", "vision")
        layers = vision.get("num_hidden_layers", vision.get("depth", "?"))
        size = vit_params(vision) if kind in VIT_TOWERS else None
        about = f", ≈ {size / 1e6:,.0f} M parameters as a ViT" if size else ""
        notes.append(
            f"the vision tower ({kind}, {layers} layers, width {vision.get('hidden_size', '?')}{about}) and its "
            "projector are not counted: parameters, FLOPs and memory are the language model's"
        )
    for other in ("audio_config", "speech_config"):
        if isinstance(c.get(other), dict):
            notes.append(f"{other} is not counted")
    return notes


def vit_params(vision: dict[str, Any]) -> int | None:
    """Parameters of a vision_config's encoder read as a ViT (Dosovitskiy et al. 2021 §3.1): per layer Q, K, V, O
    and a two-matrix MLP with biases and two LayerNorms, a patch embedding, a position table of
    (image/patch)² entries and a final LayerNorm; None when the config lacks a size. SigLIP, the Gemma 3 encoder,
    is exactly this; other encoders add a class token or an adapter."""
    keys = ("hidden_size", "intermediate_size", "num_hidden_layers", "patch_size", "image_size")
    values = [vision.get(k) for k in keys]
    sizes = [v for v in values if isinstance(v, int) and not isinstance(v, bool) and v > 0]
    if len(sizes) != len(keys):
        return None
    d, f, layers, patch, image = sizes
    channels = vision.get("num_channels", 3)
    channels = channels if isinstance(channels, int) and channels > 0 else 3
    layer = 4 * d * d + 4 * d + 2 * d * f + f + d + 2 * 2 * d
    return layers * layer + channels * patch * patch * d + d + (image // patch) ** 2 * d + 2 * d
