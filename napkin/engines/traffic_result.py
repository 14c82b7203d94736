"""What ``napkin traffic`` reports: request-length distributions, latency SLOs, percentiles, and the result
(the simulator is napkin.engines.traffic)."""

from __future__ import annotations

import random
from typing import ClassVar, Literal

from pydantic import Field, computed_field

from napkin.domain.base import Record
from napkin.domain.layout import ServingLayout
from napkin.engines.traffic import Outcome
from napkin.results.result import Result
from napkin.units import format_duration, format_durations, format_number


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile, linear between closest ranks (numpy's default), q in (0, 100); 0 for no values
    (a run whose outputs are all one token has no time per output token)."""
    if not values:
        return 0.0
    v = sorted(values)
    pos = (len(v) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def weighted_percentile(pairs: list[tuple[float, float]], q: float) -> float:
    """The q-th percentile of values given as (value, weight) pairs: the smallest value whose cumulative weight
    reaches q % of the total; 0 for none."""
    total = sum(w for _, w in pairs)
    if total <= 0:
        return 0.0
    need, seen = total * q / 100, 0.0
    for value, weight in sorted(pairs):
        seen += weight
        if seen >= need:
            return value
    return max(v for v, _ in pairs)


# ------------------------------------------------------------------------------- lengths and results


class Lengths(Record):
    """A distribution of token lengths: ``fixed`` (one value), ``uniform`` (integers low..high) or a
    ``histogram`` (values with weights)."""

    kind: Literal["fixed", "uniform", "histogram"]
    values: list[int] = Field(min_length=1)
    weights: list[float] = Field(default_factory=list)
    label: str

    def sample(self, rng: random.Random, n: int) -> list[int]:
        if self.kind == "fixed":
            return [self.values[0]] * n
        if self.kind == "uniform":
            low, high = self.values
            span = high - low + 1
            draw = rng.random
            return [low + min(int(draw() * span), span - 1) for _ in range(n)]
        return rng.choices(self.values, weights=self.weights, k=n)

    def mean(self) -> float:
        if self.kind == "fixed":
            return float(self.values[0])
        if self.kind == "uniform":
            return (self.values[0] + self.values[1]) / 2
        return sum(v * w for v, w in zip(self.values, self.weights, strict=True)) / sum(self.weights)

    def largest(self) -> int:
        return max(self.values)


def slo_label(key: str) -> str:
    """An SLO entry as the SLO is written: ``ttft_p90`` → ``TTFT P90``."""
    metric, _, q = key.partition("_p")
    return f"{metric.upper()} P{q}" if q else key


def misses_text(ratios: dict[str, float]) -> str:
    """The entries an SLO misses, each with its value over the target, grouped (TTFT P90 ×1.37, ×14,132,330)."""
    return ", ".join(f"{slo_label(k)} ×{format_number(v)}" for k, v in ratios.items() if v > 1)


class Slo(Record):
    """Latency targets: metric (ttft, tpot, e2e) → percentile → seconds."""

    targets: dict[str, dict[str, float]] = Field(default_factory=dict)

    def misses(self, outcome: Outcome) -> dict[str, float]:
        """Each target's achieved / target (> 1 misses)."""
        out = {}
        for metric, by_q in self.targets.items():
            values = {"ttft": outcome.ttft, "tpot": outcome.tpot, "e2e": outcome.e2e}[metric]
            for q, target in by_q.items():
                out[f"{metric}_p{q}"] = percentile(values, float(q)) / target
        return out

    def met(self, outcome: Outcome) -> bool:
        return all(r <= 1 for r in self.misses(outcome).values())

    def describe(self) -> str:
        return ", ".join(
            f"{metric.upper()} P{q} ≤ {format_duration(t)}"
            for metric, qs in self.targets.items()
            for q, t in qs.items()
        )


class TrafficResult(Result):
    """``napkin traffic``: requests at a rate through an iteration-level model of the engine's scheduler."""

    title: ClassVar[str] = "Traffic"
    headline: ClassVar[tuple[str, ...]] = ("output_tokens_per_second", "ttft_seconds", "tpot_seconds")

    model: str
    hardware: str
    stack: str
    gpus: int
    tensor_parallel: int
    pipeline_parallel: int
    replicas: int
    layout: ServingLayout
    weights_format: str = Field(default="bf16", description="the weights' number format")
    kv_dtype: str = Field(default="bf16", description="the KV cache's number format")
    reserve_output: bool = Field(default=False, description="admission reserves each request's whole output")
    rate: float = Field(description="requests per second offered to all replicas (closed loop: those served)")
    concurrency: int | None = Field(
        default=None, description="closed loop: clients (all replicas), each sending its next request on a reply"
    )
    requests: int = Field(description="requests simulated per scheduler")
    seed: int
    prompt: str
    output: str
    mean_prompt: float
    mean_output: float
    kv_capacity_tokens: int = Field(description="per scheduler (replica, DP-attention rank or PP micro-batch)")
    max_num_seqs: int
    token_budget: int
    tokens_per_step: float = Field(description="output tokens per sequence per step (speculative decoding)")
    prefix_hit_rate: float
    requests_per_second: float = Field(description="completed, all replicas")
    output_tokens_per_second: float = Field(description="all replicas")
    total_tokens_per_second: float = Field(description="prompt + output, all replicas")
    output_tokens_per_second_per_gpu: float
    ttft_seconds: dict[str, float] = Field(description="mean, and percentile (p50 …) → seconds")
    tpot_seconds: dict[str, float] = Field(description="time per output token after the first")
    e2e_seconds: dict[str, float] = Field(description="arrival to last token")
    mean_batch: float = Field(description="decoding sequences per step, time-weighted")
    preemptions: int
    saturated: bool = Field(
        description="the queue grew through the run: the last tenth's median TTFT is over 5× the first tenth's and 1 s"
    )
    slo: str | None = None
    slo_met: bool | None = None
    slo_ratios: dict[str, float] = Field(default_factory=dict, description="achieved / target per SLO entry")
    max_rate: float | None = Field(default=None, description="largest rate (req/s, all replicas) meeting the SLO")
    max_concurrency: int | None = Field(
        default=None, description="closed loop: most clients (all replicas) meeting the SLO, to 2 %"
    )
    price_per_hour: float | None = Field(default=None, description="USD per hour, all GPUs")
    usd_per_million_tokens: float | None = Field(default=None, description="output tokens at this rate")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def layout_text(self) -> str:
        return self.layout.describe()

    def heading(self) -> str:
        return f"Traffic: {self.model} on {self.gpus} × {self.hardware} ({self.layout_text}), {self.stack}"

    def rows(self) -> list[tuple[str, str]]:
        def ps(values: dict[str, float]) -> str:
            return " / ".join(format_durations(list(values.values()))) + f" ({'/'.join(values)})"  # one word

        rows = [
            (
                ("offered", f"{format_number(self.rate)} req/s (Poisson, seed {self.seed}, {self.requests:,} requests)")
                if self.concurrency is None
                else (
                    "clients",
                    f"{self.concurrency:,} in a closed loop ({self.requests:,} requests): "
                    f"{format_number(self.rate)} req/s served",
                )
            ),
            ("lengths", f"prompt {self.prompt}, output {self.output}"),
            ("formats", f"{self.weights_format} weights, {self.kv_dtype} KV cache"),
            (
                "engine",
                f"{self.replicas} replica(s); KV {self.kv_capacity_tokens:,} tokens, "
                f"{self.max_num_seqs:,} sequences at most (max_num_seqs), a budget of {self.token_budget:,} tokens",
            ),
            (
                "throughput",
                f"{format_number(self.requests_per_second, 3)} req/s, {self.output_tokens_per_second:,.0f} output "
                f"tok/s ({self.output_tokens_per_second_per_gpu:,.0f} per GPU)",
            ),
            ("TTFT", ps(self.ttft_seconds)),
            ("TPOT", ps(self.tpot_seconds)),
            ("end-to-end", ps(self.e2e_seconds)),
            ("batch", f"{self.mean_batch:,.1f} decoding on average; {self.preemptions:,} preemptions"),
        ]
        if self.slo is not None:
            over = [misses_text(self.slo_ratios)] if any(v > 1 for v in self.slo_ratios.values()) else []
            if self.saturated:
                over.append("the queue grows without end")
            verdict = "met" if self.slo_met else f"missed ({', '.join(over)})"
            rows.append(("SLO", f"{self.slo}: {verdict}"))
        if self.max_rate is not None:
            rows.append(("largest rate meeting SLO", f"{format_number(self.max_rate, 3)} req/s"))
        if self.max_concurrency is not None:
            rows.append(("most clients meeting SLO", f"{self.max_concurrency:,}"))
        if self.usd_per_million_tokens is not None and self.price_per_hour is not None:
            rows.append(
                ("cost", f"${self.price_per_hour:,.2f}/hour, ${self.usd_per_million_tokens:,.3f} per 1M output")
            )
        return rows

    def caption(self) -> str:
        return (
            "iteration-level scheduler model: chunked prefill under the token budget, "
            + (
                "admission when prompt and whole output fit (no preemption)"
                if self.reserve_output
                else "admission by free KV, preemption by recompute"
            )
            + "; step costs at the stack's achieved rates"
        )


def outcome_summary(outcome: Outcome, quantiles: list[float]) -> dict[str, dict[str, float]]:
    """TTFT, TPOT and e2e: the mean (what benchmark tools print first: vllm bench serve, genai-perf), then each
    quantile, keyed ``mean``, ``p50`` …"""

    def key(q: float) -> str:
        return f"p{q:g}"

    return {
        name: {
            "mean": sum(values) / len(values) if values else 0.0,
            **{key(q): percentile(values, q) for q in quantiles},
        }
        for name, values in (("ttft", outcome.ttft), ("tpot", outcome.tpot), ("e2e", outcome.e2e))
    }
