"""The shape of a decoder-only transformer, and what follows from it: parameters and attention FLOPs.

Symbols follow the papers: ``L`` layers, ``d`` width (``h`` in Korthikanti), ``a`` heads (``H`` in
PaLM), ``d_h`` head dimension (``Q``), ``n_kv`` key/value heads, ``F`` FFN width, ``V`` vocabulary,
``s`` sequence length (``T``).
"""

from __future__ import annotations

from pydantic import ConfigDict, Field, model_validator

from napkin.base import Record
from napkin.choices import Mlp, Norm


class ModelShape(Record):
    """Everything napkin needs to know about a model's architecture."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    layers: int = Field(gt=0, description="L, transformer blocks")
    hidden: int = Field(gt=0, description="d, model width")
    heads: int | None = Field(
        default=None, gt=0, description="a, attention (query) heads; FLOPs need only d_attn = a·d_h (default d)"
    )
    seq: int = Field(gt=0, description="s, training sequence length")
    kv_heads: int | None = Field(default=None, gt=0, description="n_kv (GQA/MQA); default = heads")
    head_dim: int | None = Field(default=None, gt=0, description="d_h; default = hidden / heads")
    ffn: int | None = Field(default=None, gt=0, description="F, FFN inner width; default 4·d")
    vocab: int = Field(default=50257, gt=0, description="V")
    mlp: Mlp = Mlp.gelu
    norm: Norm = Norm.layernorm
    tied_embeddings: bool = True
    biases: bool = False
    learned_positions: bool = False
    experts: int = Field(default=1, gt=0, description="MoE experts per layer (1 = dense)")
    experts_active: int = Field(default=1, gt=0, description="experts each token is routed to (top-k)")

    @model_validator(mode="after")
    def _consistent(self) -> ModelShape:
        if self.heads is None:
            if self.head_dim is not None or self.kv_heads is not None:
                raise ValueError("head_dim and kv_heads need heads")
            return self
        if self.head_dim is None and self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) is not divisible by heads ({self.heads}); give head_dim")
        if self.kv_heads is not None and self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.experts_active > self.experts:
            raise ValueError("experts_active cannot exceed experts")
        return self

    # --- derived sizes -------------------------------------------------------------------------
    @property
    def d_head(self) -> int:
        if self.head_dim is not None:
            return self.head_dim
        return self.hidden // self.heads if self.heads is not None else self.hidden

    @property
    def n_kv(self) -> int:
        return self.kv_heads if self.kv_heads is not None else (self.heads or 1)

    @property
    def d_attn(self) -> int:
        """a·d_h: the width of the attention (query) projection; = d for classic GPT shapes."""
        return (self.heads or 1) * self.d_head

    @property
    def d_ffn(self) -> int:
        return self.ffn if self.ffn is not None else 4 * self.hidden

    # --- parameters (FORMULAS §4) --------------------------------------------------------------
    def _attention_params(self) -> int:
        d, kv = self.hidden, self.n_kv * self.d_head
        weights = d * self.d_attn + 2 * d * kv + self.d_attn * d  # Q, K, V, O
        biases = (self.d_attn + 2 * kv + d) if self.biases else 0
        return weights + biases

    def _expert_params(self) -> int:
        matrices = 3 if self.mlp is Mlp.swiglu else 2
        biases = (self.d_ffn * (matrices - 1) + self.hidden) if self.biases else 0
        return matrices * self.hidden * self.d_ffn + biases

    def _norm_params(self) -> int:
        return (2 if self.norm is Norm.layernorm else 1) * self.hidden

    def _layer_params(self, experts: int) -> int:
        router = self.hidden * self.experts if self.experts > 1 else 0
        return self._attention_params() + experts * self._expert_params() + router + 2 * self._norm_params()

    def _embedding_params(self) -> int:
        embed = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        return embed + (self.seq * self.hidden if self.learned_positions else 0)

    def params(self) -> int:
        """Total parameters N: L·(attention + experts·mlp + norms) + final norm + embeddings."""
        return self.layers * self._layer_params(self.experts) + self._norm_params() + self._embedding_params()

    def active_params(self) -> int:
        """Parameters used per token (MoE: only the routed experts); = params() for dense models."""
        return self.layers * self._layer_params(self.experts_active) + self._norm_params() + self._embedding_params()

    def block_params(self) -> int:
        """N_blocks: active parameters inside the transformer blocks (no embeddings, no LM head)."""
        return self.layers * self._layer_params(self.experts_active)

    # --- attention FLOPs (FORMULAS §1.2, §1.4) -------------------------------------------------
    def attention_flops_per_token(self, causal: bool = False) -> float:
        """Training FLOPs per token of the attention scores: c·6·L·s·d_attn (PaLM: 12·L·H·Q·T).

        QKᵀ and A·V each cost 2·s·d_attn per token forward; ×3 for forward + backward. ``causal``
        counts only the unmasked half (c = 1 instead of 2).
        """
        c_attn = 1 if causal else 2
        return c_attn * 6 * self.layers * self.seq * self.d_attn
