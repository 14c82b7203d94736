"""The cheapest deployment that meets an SLO: GPUs (with their price), TP/PP/EP layouts, weight and KV formats,
and replica counts, ranked by dollars.

Each candidate replica is first bounded analytically: its service rate when kept full (``load.service_rate``)
gives the fewest replicas any SLO allows, hence a cost floor; its unloaded latency (one request alone) shows
whether any load can meet the SLO. Candidates are then simulated cheapest floor first; the largest rate one
replica sustains within the SLO (``load.max_rate``, bisection on the scheduler simulation) sets the replica
count, and the search stops once no unexplored floor can beat the ``top``-th config found. A config that meets
nothing is still a result: the closest one and what it misses by.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from pydantic import Field, computed_field

from napkin.domain.base import Record
from napkin.domain.layout import ServingLayout
from napkin.domain.model import Model
from napkin.engines.load import (
    Workload,
    held_at_admission,
    max_rate,
    run,
    saturation_rate,
    service_rate,
    serving_layout,
)
from napkin.engines.replica import Replica
from napkin.engines.traffic import Outcome
from napkin.engines.traffic_result import Slo, misses_text, slo_label
from napkin.results.explain import step
from napkin.results.result import Result
from napkin.units import format_duration, format_number, format_whole


@dataclass(frozen=True)
class Candidate:
    """One replica design and the price of one of its GPUs per hour."""

    replica: Replica
    price: float


class Deployment(Record):
    """One ranked configuration."""

    hardware: str
    layout: ServingLayout
    weights: str
    kv_dtype: str
    stack: str
    replicas: int
    gpus: int
    usd_per_hour: float
    usd_per_million_tokens: float = Field(description="output tokens at the target rate")
    max_rate_per_replica: float = Field(description="req/s one replica sustains within the SLO")
    ttft_seconds: float = Field(description="at the SLO's TTFT percentile (P90 if none), at the target rate")
    tpot_seconds: float = Field(description="at the SLO's TPOT percentile (P99 if none), at the target rate")
    bottleneck: str
    slo_ratio: float = Field(description="worst achieved / target at the target rate (≤ 1 meets)")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def layout_text(self) -> str:
        return self.layout.describe()


class ServePlanResult(Result):
    """``napkin serve-plan``: deployments meeting the SLO at the rate, cheapest first."""

    title: ClassVar[str] = "Serve plan"
    headline: ClassVar[tuple[str, ...]] = ("met", "evaluated")

    model: str
    rate: float
    prompt: str
    output: str
    slo: str
    met: bool = Field(description="some configuration meets the SLO")
    deployments: list[Deployment]
    closest: Deployment | None = Field(default=None, description="when nothing meets the SLO: the nearest miss")
    misses_by: dict[str, float] = Field(default_factory=dict, description="closest's achieved / target")
    evaluated: int = Field(description="candidates simulated")
    considered: int = Field(description="candidates that fit in memory")
    points: list[tuple[float, float, str]] = Field(
        default_factory=list, description="(USD per 1M output tokens, TPOT s, label) of every simulated config"
    )

    def heading(self) -> str:
        return f"Serve plan: {self.model} at {format_number(self.rate)} req/s"

    def rows(self) -> list[tuple[str, str]]:
        rows = [
            ("requests", f"{format_number(self.rate)}/s, prompt {self.prompt}, output {self.output}"),
            ("SLO", self.slo),
            ("searched", f"{self.considered:,} fitting configs, {self.evaluated:,} simulated"),
        ]
        for i, d in enumerate(self.deployments, 1):
            rows += [(f"#{i}", _config(d)), ("", _latency(d))]
        if not self.met and self.closest is not None:
            miss = misses_text(self.misses_by)
            rows += [
                ("nothing meets it", f"closest: {_config(self.closest)}"),
                ("", _latency(self.closest)),
                ("", f"misses {miss}"),
            ]
        return rows

    def caption(self) -> str:
        return "cost = replicas × GPUs × price; $/1M = output tokens at the target rate; latencies at that rate"

    def exit_code(self) -> int:
        return 0


def _config(d: Deployment) -> str:
    per = d.gpus // d.replicas  # GPUs of one replica
    return (
        f"{format_whole(d.replicas)} replica{'' if d.replicas == 1 else 's'} × {per} {d.hardware} ({d.layout_text}), "
        f"{d.weights} weights, {d.kv_dtype} KV: ${d.usd_per_hour:,.2f}/h, ${d.usd_per_million_tokens:,.3f}/1M"
    )


def _latency(d: Deployment) -> str:
    return f"TTFT {format_duration(d.ttft_seconds)}, TPOT {format_duration(d.tpot_seconds)}; {d.bottleneck}"


def plan(
    name: str,
    model: Model,
    workload: Workload,
    slo: Slo,
    candidates: list[Candidate],
    *,
    stack_name: str,
    top: int = 5,
) -> ServePlanResult:
    """Rank ``candidates`` by cost at ``workload.rate`` within ``slo``."""
    fitting = [c for c in candidates if c.replica.kv_tokens() >= held_at_admission(c.replica, workload)]
    bounded = []
    for c in fitting:
        capacity = service_rate(c.replica, workload) * c.replica.ranks
        floor = math.ceil(workload.rate / capacity) * c.replica.gpus * c.price
        bounded.append((floor, c))
    bounded.sort(key=lambda item: item[0])
    found: list[Deployment] = []
    points: list[tuple[float, float, str]] = []
    best_miss: tuple[float, Deployment, dict[str, float]] | None = None
    evaluated = 0
    for floor, c in bounded:
        if len(found) >= top and floor > found[top - 1].usd_per_hour:
            break
        evaluated += 1
        sustained = saturation_rate(c.replica, 1, workload)
        per_replica = max_rate(c.replica, 1, workload, slo, iterations=8, sustained=sustained)
        if per_replica <= 0:
            trickle = run(c.replica, 1, workload, service_rate(c.replica, workload) * 1e-3)
            ratios = slo.misses(trickle)
            worst = max(ratios.values())
            d = _deployment(c, 1, workload, slo, stack_name, ratios, trickle, 0.0)
            if best_miss is None or worst < best_miss[0]:
                best_miss = (worst, d, ratios)
            continue
        replicas, outcome, ratios = _settle(c.replica, workload, slo, sustained, per_replica)
        d = _deployment(c, replicas, workload, slo, stack_name, ratios, outcome, per_replica)
        points.append((d.usd_per_million_tokens, d.tpot_seconds, f"{d.hardware} {d.layout_text}"))
        found.append(d)
        found.sort(key=lambda x: (x.usd_per_hour, x.slo_ratio))
    steps = [
        step(
            "candidates",
            "GPU profiles with a price × TP (dividing the heads, within one node) × weight and KV formats",
            f"{len(candidates):,} designed, {len(fitting):,} fit a prompt in KV",
            f"{evaluated:,} simulated, cheapest cost floor first",
            "napkin.engines.serve_plan",
        ),
        step(
            "replicas",
            "⌈rate / largest rate one replica sustains within the SLO⌉ (bisection on the scheduler model)",
            f"rate {format_number(workload.rate)}/s",
            "per config",
            "napkin.engines.load.max_rate",
        ),
    ]
    return ServePlanResult(
        model=name,
        rate=workload.rate,
        prompt=workload.prompt.label,
        output=workload.output.label,
        slo=slo.describe(),
        met=bool(found),
        deployments=found[:top],
        closest=None if found or best_miss is None else best_miss[1],
        misses_by={} if found or best_miss is None else best_miss[2],
        evaluated=evaluated,
        considered=len(fitting),
        points=points,
        steps=steps,
    )


def _deployment(
    c: Candidate,
    replicas: int,
    workload: Workload,
    slo: Slo,
    stack_name: str,
    ratios: dict[str, float],
    outcome: Any,
    per_replica: float,
) -> Deployment:
    from napkin.engines.traffic_result import percentile

    gpus = replicas * c.replica.gpus
    usd = gpus * c.price
    tokens = workload.rate * workload.output.mean() * 3600
    q_ttft = float(next(iter(slo.targets.get("ttft", {"90": 0.0}))))
    q_tpot = float(next(iter(slo.targets.get("tpot", {"99": 0.0}))))
    return Deployment(
        hardware=c.replica.hardware.name,
        layout=serving_layout(c.replica),
        weights=c.replica.weights,
        kv_dtype=c.replica.kv,
        stack=stack_name,
        replicas=replicas,
        gpus=gpus,
        usd_per_hour=usd,
        usd_per_million_tokens=usd / tokens * 1e6,
        max_rate_per_replica=per_replica,
        ttft_seconds=percentile(outcome.ttft, q_ttft),
        tpot_seconds=percentile(outcome.tpot, q_tpot),
        bottleneck=bottleneck(c.replica, workload, ratios),
        slo_ratio=max(ratios.values()) if ratios else 0.0,
    )


def bottleneck(replica: Replica, workload: Workload, ratios: dict[str, float]) -> str:
    """What limits a replica: the SLO entry closest to its target and how close (its value over the target), and
    whether its decode step is bound by reading weights, reading the KV cache or by the matmuls."""
    cost = replica.step_cost()
    b = max(1, min(replica.stack.max_num_seqs, int(replica.kv_tokens() / max(workload.prompt.mean(), 1.0))))
    ctx = b * (workload.prompt.mean() + workload.output.mean() / 2)
    weights, gemm, kv = cost.weights(b), cost.gemms(b, 0), cost.attention * ctx
    regime = "weight reads" if weights >= max(gemm, kv) else "KV reads" if kv >= gemm else "matmuls"
    if not ratios:
        return f"throughput binds; decode bound by {regime} at full batch"
    limit = max(ratios, key=lambda k: ratios[k])
    named = slo_label(limit)
    # the SLO closest to its target, and how close: 98 % binds, 47 % leaves room
    return f"{named} at {ratios[limit]:,.0%} of its target; decode bound by {regime} at full batch"


def with_replica(candidate: Candidate, **changes: Any) -> Candidate:
    return Candidate(replace(candidate.replica, **changes), candidate.price)


def _settle(
    replica: Replica, workload: Workload, slo: Slo, sustained: float, per_replica: float
) -> tuple[int, Outcome, dict[str, float]]:
    """The fewest replicas whose run meets ``slo`` at a rate each sustains (below ``sustained``, one replica's
    ``saturation_rate``), with that run and its SLO ratios: from ⌈rate / per_replica⌉, whose bisected rate is a
    coarse lower bound, up while the run misses and down while one fewer meets it, as ``traffic`` would judge."""

    def trial(n: int) -> tuple[Outcome, dict[str, float], bool]:
        outcome = run(replica, n, workload)
        ratios = slo.misses(outcome)
        return outcome, ratios, workload.rate / n < sustained and max(ratios.values()) <= 1

    replicas = max(1, math.ceil(workload.rate / per_replica))
    outcome, ratios, good = trial(replicas)
    while not good and replicas < 4096:
        replicas += 1
        outcome, ratios, good = trial(replicas)
    while replicas > 1:
        fewer = trial(replicas - 1)
        if not fewer[2]:
            break
        replicas, (outcome, ratios, _) = replicas - 1, fewer
    return replicas, outcome, ratios
