"""Compute-optimal model size and tokens (Chinchilla), two ways, both labelled.

    20:1 rule      C = 6·N·D with D = 20·N   ⇒  N* = √(C/120),  D* = 20·N*        (Hoffmann et al. 2022 Table 3)
    fitted law     L(N, D) = E + A/N^α + B/D^β minimised subject to C = 6·N·D  (Hoffmann eq. 2, 4):
                   N* = G·(C/6)^a,  D* = G⁻¹·(C/6)^b,  G = (αA/(βB))^(1/(α+β)),  a = β/(α+β),  b = α/(α+β)

The default constants are the Epoch AI refit (Besiroglu et al. 2024), the only set consistent with
≈20 tokens per parameter; Hoffmann's printed eq. (10) constants are offered "as published" (they imply
~93 tokens per parameter at the Gopher budget, as Besiroglu et al. 2024 §3 point out).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

from pydantic import ConfigDict

from napkin import sources
from napkin.domain.base import Record
from napkin.domain.choices import Fit
from napkin.results.explain import Step, step
from napkin.results.result import TableResult
from napkin.units import format_count, format_flops, format_sci


class LawConstants(Record):
    model_config = ConfigDict(frozen=True)

    label: str
    E: float
    A: float
    B: float
    alpha: float
    beta: float
    source: str


CONSTANTS = {
    Fit.epoch: LawConstants(
        label="Epoch AI refit (Besiroglu et al. 2024)",
        E=1.8172,
        A=482.01,
        B=2085.43,
        alpha=0.3478,
        beta=0.3658,
        source=sources.EPOCH_REFIT,
    ),
    Fit.hoffmann: LawConstants(
        label="Hoffmann et al. 2022 eq. (10), as published",
        E=1.69,
        A=406.4,
        B=410.7,
        alpha=0.34,
        beta=0.28,
        source=sources.HOFFMANN_CONSTANTS,
    ),
}


def loss(n: float, d: float, c: LawConstants) -> float:
    """L̂(N, D) = E + A/N^α + B/D^β (Hoffmann eq. 2)."""
    return float(c.E + c.A / n**c.alpha + c.B / d**c.beta)


class Allocation(Record):
    method: str
    params: float
    tokens: float
    tokens_per_param: float
    loss: float | None = None
    source: str


class OptimalResult(TableResult):
    headline: ClassVar[tuple[str, ...]] = ("compute",)

    compute: float
    rule_of_20: Allocation
    fitted: Allocation

    def heading(self) -> str:
        return f"Compute-optimal allocation for C = {format_flops(self.compute)}"

    def header(self) -> list[str]:
        return ["method", "N*", "D*", "D*/N*", "loss"]

    def body(self) -> list[list[str]]:
        return [
            [
                a.method,
                format_count(a.params) + " params",
                format_count(a.tokens) + " tokens",
                f"{a.tokens_per_param:.1f}",
                f"{a.loss:.3f}" if a.loss is not None else "–",
            ]
            for a in (self.rule_of_20, self.fitted)
        ]

    def caption(self) -> str:
        return "C = 6·N·D; Hoffmann et al. 2022; constants: " + self.fitted.source.split("; ")[-1]


def optimal(compute: float, fit: Fit = Fit.epoch, derivation: Sequence[Step] = ()) -> OptimalResult:
    """N* and D* for ``compute`` FLOPs; ``derivation`` holds the steps that produced ``compute``, if any."""
    c = CONSTANTS[fit]
    n20 = math.sqrt(compute / (6 * 20))
    a, b = c.beta / (c.alpha + c.beta), c.alpha / (c.alpha + c.beta)
    g = (c.alpha * c.A / (c.beta * c.B)) ** (1 / (c.alpha + c.beta))
    n_fit = g * (compute / 6) ** a
    d_fit = (compute / 6) ** b / g
    rule = Allocation(
        method="20 tokens per parameter",
        params=n20,
        tokens=20 * n20,
        tokens_per_param=20.0,
        loss=loss(n20, 20 * n20, c),
        source=sources.CHINCHILLA_20,
    )
    fitted = Allocation(
        method=f"fitted loss law: {c.label}",
        params=n_fit,
        tokens=d_fit,
        tokens_per_param=d_fit / n_fit,
        loss=loss(n_fit, d_fit, c),
        source=f"{sources.CHINCHILLA_LAW}; {c.source}",
    )
    steps = [
        step(
            "20:1 rule",
            "N* = √(C / 120), D* = 20·N*",
            f"√({format_sci(compute)} / 120)",
            f"N* = {format_count(n20)}, D* = {format_count(20 * n20)}",
            sources.CHINCHILLA_20,
        ),
        step(
            "exponents",
            "a = β/(α+β), b = α/(α+β)",
            f"a = {c.beta}/{c.alpha + c.beta:.4g}",
            f"a = {a:.3f}, b = {b:.3f}",
            c.source,
        ),
        step(
            "fitted optimum",
            "N* = G·(C/6)^a, D* = (C/6)^b / G, G = (αA/(βB))^(1/(α+β))",
            f"G = {g:.4g}, C/6 = {format_sci(compute / 6)}",
            f"N* = {format_count(n_fit)}, D* = {format_count(d_fit)} ({d_fit / n_fit:.1f} tokens/param)",
            sources.CHINCHILLA_LAW,
        ),
        step(
            "loss at the optimum",
            "L = E + A/N^α + B/D^β",
            f"E = {c.E}, A = {c.A}, B = {c.B}",
            f"{fitted.loss:.3f}",
            sources.CHINCHILLA_LAW,
        ),
    ]
    steps = [*derivation, *steps] if derivation else [step("compute", "C", "", format_flops(compute), "input"), *steps]
    return OptimalResult(compute=compute, rule_of_20=rule, fitted=fitted, steps=steps)
