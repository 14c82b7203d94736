"""Training FLOPs: 6·N per token plus attention (``flops_per_token``), per run (``train_flops``), and the
plausibility bounds every compute question shares."""

from __future__ import annotations

from typing import ClassVar, Final

from pydantic import ConfigDict, Field

from napkin import sources
from napkin.domain.base import Record
from napkin.domain.choices import Recompute
from napkin.domain.model import Model
from napkin.results.explain import step
from napkin.results.result import ModelResult
from napkin.units import (
    format_flops,
    format_percent,
    format_sci,
)

SECONDS_PER_DAY = 86400.0
CHINCHILLA_TOKENS_PER_PARAM = 20.0  # Hoffmann et al. 2022 Table 3 (≈20 tokens per parameter)
UNDERTRAINED_TOKENS_PER_PARAM = 10.0  # napkin's "far below 20" threshold for the under-training note


class FlopsPerToken(Record):
    """Training FLOPs per token, split the way the papers split them."""

    model_config = ConfigDict(frozen=True)

    params: float = Field(description="N: parameters doing matmul work per token (active, for MoE)")
    forward: float
    backward: float
    attention: float = Field(description="attention-score FLOPs (forward + backward), 0 without a shape")
    model: float = Field(description="model FLOPs per token: 6N + attention (what MFU counts)")
    hardware: float = Field(description="model FLOPs + recomputation (what HFU counts)")
    recompute: Recompute
    causal: bool


#: Above this, an MFU for dense training is implausible: the best published large runs reach 0.38-0.55
#: (sources.MFU_PUBLISHED); more usually means a wrong peak (sparse figure), units or token count.
PLAUSIBLE_MFU: Final = 0.75


def implausible_mfu(value: float) -> str:
    return (
        f"MFU {format_percent(value)} is implausibly high for dense training (published large runs reach 38-55 %: "
        "PaLM 46.2 %, Llama 3 38-43 %, MegaScale 55.2 %); check the peak, the units and the token count"
    )


def flops_per_token(
    params: float,
    model: Model | None = None,
    seq: int | None = None,
    *,
    causal: bool = False,
    recompute: Recompute = Recompute.none,
    frozen: float = 0.0,
) -> FlopsPerToken:
    """6N (+ attention, given a model and a sequence length) model FLOPs per token, and the hardware
    FLOPs a recomputation scheme adds. ``frozen`` of the ``params`` get no weight gradient (a LoRA base): their
    backward is the input gradient alone, 2 FLOPs per parameter instead of 4."""
    attention = model.attention_flops_per_token(seq, causal) if model is not None and seq else 0.0
    forward = 2 * params + attention / 3
    backward = 4 * params - 2 * frozen + 2 * attention / 3
    if recompute is Recompute.full:
        # One extra forward of the blocks (Narayanan eq. 3: 4 forwards instead of 3); without a shape
        # the whole model is re-run, which gives the familiar 8·N·D.
        blocks = model.block_params() if model is not None else params
        extra = 2 * blocks + attention / 3
    elif recompute is Recompute.selective:
        extra = attention / 3  # only the attention scores are recomputed (Korthikanti §4.3)
    else:
        extra = 0.0
    return FlopsPerToken(
        params=params,
        forward=forward,
        backward=backward,
        attention=attention,
        model=forward + backward,
        hardware=forward + backward + extra,
        recompute=recompute,
        causal=causal,
    )


class TrainFlopsResult(ModelResult):
    title: ClassVar[str] = "Training FLOPs"
    headline: ClassVar[tuple[str, ...]] = ("flops", "hardware_flops")

    params: float
    tokens: float
    flops: float = Field(description="model FLOPs: 6·N·D + attention")
    flops_forward: float
    flops_backward: float
    flops_attention: float
    hardware_flops: float = Field(description="model FLOPs + recomputation (HFU basis)")
    flops_per_token: float
    recompute: Recompute
    causal: bool

    def rows(self) -> list[tuple[str, str]]:
        att = bool(self.flops_attention)
        rows = [
            ("forward (2·N·D" + (" + ⅓ attention)" if att else ")"), format_flops(self.flops_forward)),
            ("backward (4·N·D" + (" + ⅔ attention)" if att else ")"), format_flops(self.flops_backward)),
        ]
        if att:
            conv = " (causal, c = 1)" if self.causal else " (c = 2, PaLM)"
            rows.append(("attention (incl. above)", format_flops(self.flops_attention) + conv))
        rows.append(("model FLOPs (MFU basis)", format_flops(self.flops)))
        extra = "" if self.recompute is Recompute.none else f" ({self.recompute} recomputation)"
        rows.append(("hardware FLOPs (HFU basis)", format_flops(self.hardware_flops) + extra))
        return rows


def train_flops(
    params: float,
    tokens: float,
    model: Model | None = None,
    seq: int | None = None,
    *,
    causal: bool = False,
    recompute: Recompute = Recompute.none,
) -> TrainFlopsResult:
    per_token = flops_per_token(params, model, seq, causal=causal, recompute=recompute)
    steps = [
        step(
            "forward",
            "2·N·D",
            f"2 × {format_sci(params)} × {format_sci(tokens)}",
            format_flops(2 * params * tokens),
            sources.PALM_6N,
        ),
        step(
            "backward",
            "4·N·D (input and weight gradients)",
            f"4 × {format_sci(params)} × {format_sci(tokens)}",
            format_flops(4 * params * tokens),
            sources.PALM_6N,
        ),
    ]
    if per_token.attention:
        steps.append(
            step(
                "attention",
                "c·6·L·s·d_attn·D",
                f"{format_sci(per_token.attention)} × {format_sci(tokens)}",
                format_flops(per_token.attention * tokens),
                sources.CAUSAL_ATTENTION if causal else sources.PALM_ATTENTION,
            )
        )
    steps.append(
        step(
            "model FLOPs",
            "C = 6·N·D (+ attention)",
            "sum of the above",
            format_flops(per_token.model * tokens),
            sources.KAPLAN_6ND,
        )
    )
    if recompute is not Recompute.none:
        steps.append(
            step(
                f"hardware FLOPs ({recompute} recomputation)",
                "model FLOPs + recomputed forward",
                f"{per_token.hardware / per_token.model:.4f} × model FLOPs",
                format_flops(per_token.hardware * tokens),
                sources.NARAYANAN_RECOMPUTE,
            )
        )
    return TrainFlopsResult(
        params=params,
        tokens=tokens,
        flops=per_token.model * tokens,
        flops_forward=per_token.forward * tokens,
        flops_backward=per_token.backward * tokens,
        flops_attention=per_token.attention * tokens,
        hardware_flops=per_token.hardware * tokens,
        flops_per_token=per_token.model,
        recompute=recompute,
        causal=causal,
        steps=steps,
    )
