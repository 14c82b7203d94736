"""``Model``: a decoder-only transformer's architecture, and what follows from it (parameters, FLOPs).

Symbols follow the papers: ``L`` layers, ``d`` width (``h`` in Korthikanti), ``a`` heads (``H`` in
PaLM), ``d_h`` head dimension (``Q``), ``n_kv`` key/value heads, ``F`` FFN width, ``V`` vocabulary.
The sequence length is not part of the model: it belongs to the ``Workload`` (``context`` here is only
the longest sequence the model was built for, which learned position embeddings need).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BeforeValidator, ConfigDict, Field, StrictBool, model_validator

from napkin.domain.base import Record
from napkin.domain.choices import Mlp, Norm, QkNorm
from napkin.errors import UsageError


def _whole(value: object) -> object:
    """A size or count of the architecture, read as the command line reads ``--layers``: a whole number of at
    most 2^53 (``units.parse_length``), never a bool (``true`` is no layer count) nor a float's rounding of
    10^150. 0 passes through, for the fields that allow it (``ge=0``); the field's bound refuses it elsewhere."""
    from napkin import units

    if value is None or (units.plain_number(value) == 0 and not isinstance(value, str)):
        return value if value is None else 0
    if units.plain_number(value) is None and not isinstance(value, str):
        raise ValueError(f"expected a whole number, not {type(value).__name__}")
    try:
        return units.parse_length(value, "value")  # type: ignore[arg-type]
    except UsageError as exc:
        raise ValueError(str(exc).removeprefix("value: ")) from None


#: A whole size or count: bounded as on the command line (at most 2^53; bools and non-integers refused).
Whole = Annotated[int, BeforeValidator(_whole)]


class Model(Record):
    """Everything napkin needs to know about a model's architecture. Parameters are computed from it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    layers: Whole = Field(gt=0, description="L, transformer blocks")
    hidden: Whole = Field(gt=0, description="d, model width")
    heads: Whole | None = Field(
        default=None, gt=0, description="a, attention (query) heads; FLOPs need only d_attn = a·d_h (default d)"
    )
    kv_heads: Whole | None = Field(default=None, gt=0, description="n_kv (GQA/MQA); default = heads")
    head_dim: Whole | None = Field(default=None, gt=0, description="d_h; default = hidden / heads")
    ffn: Whole | None = Field(default=None, gt=0, description="F, FFN inner width; default 4·d")
    vocab: Whole = Field(default=50257, gt=0, description="V")
    context: Whole | None = Field(default=None, gt=0, description="longest sequence the model was built for")
    mlp: Mlp = Mlp.gelu
    norm: Norm = Norm.layernorm
    dropout: StrictBool = Field(default=False, description="dropout layers in training (GPT-3 style); masks are stored")
    tied_embeddings: StrictBool = True
    norms_per_layer: Whole = Field(
        default=2,
        ge=0,
        description="norms in each block: 2 (pre-attention, pre-MLP); "
        "4 in Gemma 2/3 (also after each); 1 in GPT-J and Falcon-7B (one shared)",
    )
    qk_norm: QkNorm = Field(default=QkNorm.none, description="learned query/key norm (Qwen3, Gemma 3, OLMo 2)")
    biases: StrictBool = Field(default=False, description="biases on every linear layer (GPT-2/3)")
    qkv_bias: StrictBool = Field(default=False, description="biases on the Q, K, V projections only (Qwen2)")
    attention_bias: StrictBool = Field(
        default=False, description="biases on Q, K, V and the output projection (gpt-oss)"
    )
    mlp_bias: StrictBool = Field(default=False, description="biases on the MLP and expert matrices (GPT-J, gpt-oss)")
    head_bias: StrictBool = Field(default=False, description="a bias on the LM head (GPT-J, Phi-3.5-MoE)")
    sinks: StrictBool = Field(
        default=False, description="one learned attention-sink logit per head and layer (gpt-oss)"
    )
    learned_positions: StrictBool = Field(default=False, description="a learned context × d position table (GPT-2/3)")
    # --- mixture of experts (Shazeer 2017; Mixtral; DeepSeekMoE) ---
    experts: Whole = Field(default=1, gt=0, description="routed experts per MoE layer (1 = dense)")
    top_k: Whole = Field(default=1, gt=0, description="experts each token is routed to")
    shared_experts: Whole = Field(default=0, ge=0, description="experts every token passes through (DeepSeekMoE)")
    moe_ffn: Whole | None = Field(default=None, gt=0, description="FFN width of one expert; default F")
    dense_layers: Whole = Field(
        default=0,
        ge=0,
        description="layers with a dense FFN instead of experts (DeepSeek-V3: "
        "the first 3; Llama 4 Maverick: every other one)",
    )
    router_bias: StrictBool = Field(
        default=False, description="a bias per expert in the router (gpt-oss; DeepSeek-V3's e_score_correction_bias)"
    )
    # --- multi-head latent attention (DeepSeek-V2 §2.1; DeepSeek-V3) ---
    q_lora_rank: Whole | None = Field(default=None, gt=0, description="d_c', query compression (MLA)")
    kv_lora_rank: Whole | None = Field(default=None, gt=0, description="d_c, KV compression: MLA when set")
    rope_head_dim: Whole | None = Field(default=None, gt=0, description="d_h^R, decoupled RoPE key width (MLA)")
    v_head_dim: Whole | None = Field(default=None, gt=0, description="value head width (MLA); default d_h")
    # --- local attention ---
    sliding_window: Whole | None = Field(default=None, gt=0, description="attention window of the local layers")
    local_layers: Whole | None = Field(default=None, ge=0, description="layers using the window; default all")
    chunked: StrictBool = Field(default=False, description="the window is a fixed chunk, not a sliding one (Llama 4)")
    # --- module layout ---
    model_type: str | None = Field(
        default=None,
        max_length=64,
        description="Hugging Face model_type: the names and shapes of the linear layers LoRA adapts "
        "(fused qkv_proj in phi3, query_key_value in falcon/gpt_neox, Conv1D c_attn in gpt2); default Llama-style",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Model:
        if self.heads is None:
            if self.head_dim is not None or self.kv_heads is not None or self.kv_lora_rank is not None:
                raise ValueError("head_dim, kv_heads and kv_lora_rank need heads")
        else:
            if self.head_dim is None and self.hidden % self.heads:
                raise ValueError(f"hidden ({self.hidden}) is not divisible by heads ({self.heads}); give head_dim")
            if self.kv_heads is not None and self.heads % self.kv_heads:
                raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.top_k > self.experts:
            raise ValueError(f"top_k ({self.top_k}) cannot exceed experts ({self.experts})")
        if self.dense_layers > self.layers:
            raise ValueError(f"dense_layers ({self.dense_layers}) cannot exceed layers ({self.layers})")
        if self.kv_lora_rank is not None and self.rope_head_dim is None:
            raise ValueError("kv_lora_rank (MLA) needs rope_head_dim")
        if self.local_layers is not None and self.local_layers > self.layers:
            raise ValueError(f"local_layers ({self.local_layers}) cannot exceed layers ({self.layers})")
        if self.sliding_window is not None and self.context is not None and self.sliding_window > self.context:
            raise ValueError(
                f"sliding_window ({self.sliding_window:,}) is longer than the context "
                f"({self.context:,}); a window that never masks is no window: leave it out"
            )
        if self.learned_positions and self.context is None:
            raise ValueError("learned_positions needs context (the size of the position table)")
        return self

    # --- derived sizes -------------------------------------------------------------------------
    @property
    def d_head(self) -> int:
        if self.head_dim is not None:
            return self.head_dim
        return self.hidden // self.heads if self.heads is not None else self.hidden

    @property
    def n_heads(self) -> int:
        return self.heads or 1

    @property
    def n_kv(self) -> int:
        """Key/value heads (GQA/MQA); MLA caches one latent instead, see ``kv_cache_width``."""
        return self.kv_heads if self.kv_heads is not None else self.n_heads

    @property
    def d_attn(self) -> int:
        """a·d_h: the width of the attention (query) projection; = d for classic GPT shapes."""
        return self.n_heads * self.d_head

    @property
    def d_ffn(self) -> int:
        return self.ffn if self.ffn is not None else 4 * self.hidden

    @property
    def d_expert(self) -> int:
        return self.moe_ffn if self.moe_ffn is not None else self.d_ffn

    @property
    def is_moe(self) -> bool:
        return self.experts > 1

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.is_moe else 0

    @property
    def mlp_matrices(self) -> int:
        return 3 if Mlp(self.mlp).gated else 2

    @property
    def n_local(self) -> int:
        """Layers that attend within the window (0 without one)."""
        if self.sliding_window is None:
            return 0
        return self.layers if self.local_layers is None else self.local_layers

    @property
    def kv_cache_width(self) -> int:
        """Elements cached per token per layer: 2·n_kv·d_h, or d_c + d_h^R for MLA (DeepSeek-V2 §2.1.3)."""
        if self.is_mla:
            assert self.kv_lora_rank is not None and self.rope_head_dim is not None
            return self.kv_lora_rank + self.rope_head_dim
        return 2 * self.n_kv * self.d_head

    # --- parameters (Kaplan Table 1; Narayanan eq. 2; Megatron theoretical_memory_usage.py) ------
    def attention_params(self) -> int:
        d = self.hidden
        if self.is_mla:  # DeepSeek-V2 §2.1.2-2.1.3 (modeling_deepseek.py DeepseekV3Attention)
            assert self.kv_lora_rank is not None and self.rope_head_dim is not None
            a, nope, rope = self.n_heads, self.d_head, self.rope_head_dim
            v = self.v_head_dim or self.d_head
            q_out = a * (nope + rope)
            q = d * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * q_out if self.q_lora_rank else d * q_out
            kv = d * (self.kv_lora_rank + rope) + self.kv_lora_rank + self.kv_lora_rank * a * (nope + v)
            return q + kv + a * v * d
        kv = self.n_kv * self.d_head
        weights = d * self.d_attn + 2 * d * kv + self.d_attn * d  # Q, K, V, O
        if self.biases or self.attention_bias:
            weights += self.d_attn + 2 * kv + d
        elif self.qkv_bias:
            weights += self.d_attn + 2 * kv
        if self.qk_norm == QkNorm.head:
            weights += 2 * self.d_head
        elif self.qk_norm == QkNorm.full:
            weights += self.d_attn + kv
        return weights + (self.n_heads if self.sinks else 0)

    def mlp_params(self, width: int | None = None) -> int:
        """One FFN (or one expert): 2 matrices for GeLU, 3 for SwiGLU/GeGLU (Shazeer 2020)."""
        f = self.d_ffn if width is None else width
        biases = (f * (self.mlp_matrices - 1) + self.hidden) if self.biases or self.mlp_bias else 0
        return self.mlp_matrices * self.hidden * f + biases

    def norm_params(self) -> int:
        return (2 if self.norm is Norm.layernorm else 1) * self.hidden

    def _ffn_params(self, moe: bool, routed: int) -> int:
        if not moe:
            return self.mlp_params()
        router = (self.hidden + (1 if self.router_bias else 0)) * self.experts
        return router + (routed + self.shared_experts) * self.mlp_params(self.d_expert)

    def layer_params(self, *, moe: bool, active: bool = False) -> int:
        routed = self.top_k if active else self.experts
        return self.attention_params() + self._ffn_params(moe, routed) + self.norms_per_layer * self.norm_params()

    def embedding_params(self) -> int:
        embed = self.vocab * self.hidden * (1 if self.tied_embeddings else 2) + (self.vocab if self.head_bias else 0)
        return embed + (self.context * self.hidden if self.learned_positions and self.context else 0)

    def block_params(self, active: bool = True) -> int:
        """Parameters inside the transformer blocks (no embeddings, no LM head); active ones by default."""
        dense = self.layers - self.moe_layers
        return dense * self.layer_params(moe=False) + self.moe_layers * self.layer_params(moe=True, active=active)

    def params(self) -> int:
        """Total parameters N: blocks + final norm + embeddings (and the LM head unless tied)."""
        return self.block_params(active=False) + self.norm_params() + self.embedding_params()

    def active_params(self) -> int:
        """Parameters used per token (MoE: only the routed experts); = params() for dense models."""
        return self.block_params(active=True) + self.norm_params() + self.embedding_params()

    def expert_params(self) -> int:
        """Parameters of the routed experts (what expert parallelism divides)."""
        return self.moe_layers * self.experts * self.mlp_params(self.d_expert)

    def routed_active_params(self) -> int:
        """Parameters of the routed experts one token runs through (top-k of each MoE layer; 0 for dense models)."""
        return self.moe_layers * self.top_k * self.mlp_params(self.d_expert) if self.is_moe else 0

    # --- attention FLOPs -----------------------------------------------------------------------
    def attended(self, seq: int, causal: bool = False) -> float:
        """Mean keys each query attends per layer: s (full), the window W on sliding-window layers; ``causal``:
        the unmasked part, ``causal_keys`` (s/2 full, W − W²/(2s) in a sliding window, W/2 in chunks)."""
        full = causal_keys(seq, seq) if causal else float(seq)
        if self.sliding_window is None:
            return full
        w = min(seq, self.sliding_window)
        if not causal:
            local = float(w)
        elif self.chunked:  # Llama 4: causal within each chunk of W tokens
            local = w / 2
        else:
            local = causal_keys(seq, w)
        return (self.n_local * local + (self.layers - self.n_local) * full) / self.layers

    def attention_flops_per_token(self, seq: int, causal: bool = False) -> float:
        """Training FLOPs per token of the attention scores: 12·L·k·d_attn with k the mean keys per query
        (``attended``): 6·L·s·d_attn for a full causal mask (PaLM: 12·L·H·Q·T non-causal).

        QKᵀ and A·V each cost 2·k·d_attn per token forward; ×3 for forward + backward. ``causal`` counts only
        the unmasked keys.
        """
        return 2 * 6 * self.layers * self.attended(seq, causal) * self.d_attn

    @classmethod
    def from_hf_config(cls, path: str | Path) -> Model:
        """A ``Model`` from a local Hugging Face ``config.json`` or model folder (no network, no transformers);
        ``napkin.domain.hf_config`` reads each family the way its transformers code builds it."""
        from napkin.domain.hf_config import from_data
        from napkin.io.hf_files import read_config_file  # the file layer reads; the domain only parses

        return from_data(read_config_file(path), path).model


def causal_keys(seq: int, window: int) -> float:
    """Mean keys per query under a causal mask limited to the last ``window`` keys (W ≤ s): W − W²/(2s).

    The band's area, the continuous count FLOP conventions use (s/2 for a full causal mask, as in FlashAttention's
    and PaLM's causal FLOPs): query i sees min(i, W) keys, Σ = s·W − W²/2, plus W/2 on the discrete staircase
    (under half a key per query). Beltagy et al. 2020 (Longformer §3.1) for the sliding window.
    """
    w = min(window, seq)
    return w - w * w / (2 * seq)
