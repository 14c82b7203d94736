"""The parallel-layout planner: every valid layout of a model on a cluster, scored by the step-time model.

Enumerates TP (within the scale-up domain, dividing the heads), PP (every degree that divides the GPUs left, up
to the layers, split as evenly as they go), CP (long sequences), EP (MoE), DP (the rest), the interleaving, the
micro-batch, recomputation and the ZeRO stage;
keeps the layouts that fit by napkin's memory model and ranks them by predicted step time. The search runs
on plain floats (``StepModel.evaluate``); only the top N become ``StepResult`` objects.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final

from napkin.domain.choices import FULL_SHARD, Recompute, Sharding
from napkin.domain.layout import split_problem
from napkin.engines.divisors import divisors, powers_of_two
from napkin.engines.memory.states import ranks_near
from napkin.engines.plan_result import PlanResult
from napkin.engines.step import (
    BREAKDOWN,
    Knobs,
    StepModel,
    StepResult,
    Terms,
    build_result,
    offered_sharding,
    offered_with_pipeline,
    own_name,
)
from napkin.engines.step.region import outside_layout, outside_question
from napkin.errors import UsageError
from napkin.systems.stack import Offers
from napkin.units import format_bytes_si

MICRO_BATCHES: Final = (1, 2, 4, 8, 16)
RECOMPUTE: Final = (Recompute.none, Recompute.selective, Recompute.full)
SHARDING: Final = (Sharding.none, Sharding.zero1, Sharding.zero2, Sharding.zero3, Sharding.hsdp)
MAX_INTERLEAVE: Final = 8
MIN_CONTEXT_CHUNK: Final = 4096  # CP only splits sequences into chunks of at least this many tokens
TERM_NAMES: Final = {
    "compute": "compute",
    "tensor_parallel": "TP comm",
    "bubble": "pipeline bubble",
    "data_parallel": "DP comm",
    "optimizer": "optimizer",
    "other": "p2p/EP/CP comm, MoE host waits",
}


#: The most layouts one plan enumerates: a bound on its time and memory whatever sizes are typed.
MAX_CANDIDATES: Final = 2_000_000


def candidates(sm: StepModel, gpus: int) -> list[Knobs]:
    """Every valid layout × micro-batch × recompute × ZeRO stage (before the memory check)."""
    model, dom, batch = sm.model, sm.hw.fabric.domain_size, sm.batch
    offers = sm.offers or Offers()  # only what the stack can run
    out: list[Knobs] = []
    tps = [t for t in powers_of_two(dom) if (model.heads is None or model.heads % t == 0) and (t == 1 or offers.tensor)]
    cps = [
        c
        for c in powers_of_two(16)
        if c == 1 or (offers.context and sm.seq % (2 * c) == 0 and sm.seq // c >= MIN_CONTEXT_CHUNK)
    ]
    # each sharding under the stack's own name (torchtitan's ZeRO-3 is FSDP), as step and memory print it
    shardings = list(dict.fromkeys(own_name(offers, z) for z in SHARDING if offered_sharding(offers, z)))
    shardings = shardings or [offers.sharding[0]]
    interleaved = "interleaved" in offers.schedules
    # with FlashAttention there are no scores to keep, so selective recomputation is no recomputation
    recomputes = [r for r in RECOMPUTE if not (sm.flash and r is Recompute.selective)]
    for t in tps:
        for c in cps:
            if gpus % (t * c):
                continue
            room = gpus // (t * c)
            # PP: every divisor of the GPUs left up to the layers, the layers split as evenly as they go
            # (napkin.domain.layout.stage_size) where it does not divide them: BLOOM's 70 layers over 12 stages
            for p in divisors(room, model.layers) if offers.pipeline else [1]:
                d = room // p
                pipe_shardings = [z for z in shardings if offered_with_pipeline(offers, z, p)]
                eps = divisors(math.gcd(model.experts, d * c)) if model.is_moe and offers.expert else [1]
                for b in MICRO_BATCHES:
                    if batch % (b * d):
                        continue
                    m = batch // (b * d)
                    heaviest, n = -(-model.layers // p), model.layers
                    vs = (
                        [1]
                        if p == 1 or not interleaved
                        else [
                            v
                            for v in divisors(heaviest, MAX_INTERLEAVE)
                            if v == 1 or (m % p == 0 and split_problem(n, p, v) is None)
                        ]
                    )
                    for e in eps:
                        for v in vs:
                            for r in recomputes:
                                for z in pipe_shardings if d * c > 1 else (Sharding.none,):
                                    if z is Sharding.hsdp and ranks_near(d * c, dom, t) in (1, d * c):
                                        continue  # its shards all in one domain (FULL_SHARD) or each alone (DDP)
                                    out.append(
                                        Knobs(
                                            tensor_parallel=t,
                                            pipeline_parallel=p,
                                            data_parallel=d,
                                            context_parallel=c,
                                            expert_parallel=e,
                                            interleave=v,
                                            micro_batch=b,
                                            sequence_parallel=t > 1 and offers.sequence,
                                            recompute=r,
                                            sharding=z,
                                        )
                                    )
                if len(out) > MAX_CANDIDATES:
                    raise UsageError(
                        f"gpus: {gpus:,} GPUs and {model.layers:,} layers allow more than {MAX_CANDIDATES:,} layouts; "
                        "napkin plans up to that many: give fewer GPUs, or time one layout with 'napkin step'",
                        field="gpus",
                        also=("global_batch",),
                    )
    return out


def _worst(terms: Terms) -> tuple[str, float]:
    named = terms.breakdown()
    name = max((n for n in named if n != "compute"), key=lambda n: named[n])
    return TERM_NAMES[name], named[name] / terms.step_seconds


def _families(sm: StepModel, gpus: int, everything: list[Knobs]) -> list[tuple[str, list[Knobs]]]:
    """The layouts people try first, among ``everything`` the planner enumerated: ZeRO-3 data parallelism alone,
    TP within the node; and TP across nodes, which it does not enumerate."""
    dom, heads = sm.hw.fabric.domain_size, sm.model.heads or 1
    full = own_name(sm.offers or Offers(), Sharding.zero3)
    out = [
        (
            f"{'FSDP' if full is Sharding.fsdp else 'ZeRO-3'} alone (TP 1, PP 1)",
            [
                k
                for k in everything
                if k.tensor_parallel == k.pipeline_parallel == k.context_parallel == 1 and k.sharding in FULL_SHARD
            ],
        )
    ]
    t = max(k for k in powers_of_two(dom) if heads % k == 0)
    if t > 1:
        out.append(
            (
                f"TP {t} + DP",
                [k for k in everything if k.tensor_parallel == t and k.pipeline_parallel == k.context_parallel == 1],
            )
        )
    t2 = 2 * dom
    if heads % t2 == 0 and gpus % t2 == 0:
        d = gpus // t2
        out.append(
            (
                f"TP {t2} across nodes",
                [
                    Knobs(
                        tensor_parallel=t2,
                        data_parallel=d,
                        micro_batch=b,
                        sequence_parallel=True,
                        recompute=r,
                        sharding=own_name(sm.offers or Offers(), z),
                    )
                    for b in MICRO_BATCHES
                    if sm.batch % (b * d) == 0
                    for r in RECOMPUTE
                    for z in SHARDING
                    if sm.offers is None or (sm.offers.tensor and offered_sharding(sm.offers, z))
                ],
            )
        )
    return [(label, ks) for label, ks in out if ks]


def _versus(best: tuple[Knobs, Terms], other: tuple[Knobs, Terms], outside: list[str]) -> str:
    """How a family's best layout ``other`` compares with the plan's #1; ``outside``: what of ``other``'s own
    choices the stack's validation does not cover."""
    (best_knobs, best_terms), (other_knobs, other_terms) = best, other
    was, now = best_terms.breakdown(), other_terms.breakdown()
    name = max(BREAKDOWN, key=lambda n: now[n] - was[n])
    why = TERM_NAMES[name]
    if name == "compute" and other_knobs.recompute is not best_knobs.recompute:
        why += f": {other_knobs.recompute} recompute, micro-batch {other_knobs.micro_batch}"
    change = other_terms.step_seconds / best_terms.step_seconds - 1
    gain = best_terms.step_seconds / other_terms.step_seconds - 1  # "faster" as the caption says it: time ratio − 1
    if change < -0.005 and outside:  # ranked below the validated layouts
        return f"{gain:,.0%} faster by this model, but outside the validated region"
    if change < -0.005:  # otherwise only a family the ranking leaves out (TP across nodes) can beat the winner
        return f"{gain:,.0%} faster by this model, but napkin keeps TP inside the scale-up domain"
    if change < 0.005:
        return "as fast"
    if change >= 1:  # twice as long or more reads as a ratio: "4.3× slower", not "333% slower"
        ratio = 1 + change
        return f"{ratio:,.{1 if ratio < 10 else 0}f}× slower (+{why})"
    return f"{change:,.0%} slower (+{why})"


def _leanest(k: Knobs) -> list[Knobs]:
    """``k``'s split (TP, PP, DP, CP, EP, interleave) with the choices that take the least memory: micro-batch 1,
    full recomputation, under each ZeRO stage (a stack's gather buffers can make ZeRO-3 take more than ZeRO-1).
    Per-GPU memory does not decrease with a larger micro-batch (activations grow as b·min(p, B/(b·DP))) or a
    lighter recomputation, so when none of these fits, no layout of the split does: the planner's work is bounded
    by the splits that could fit, not by the number of layouts a large GPU count allows."""
    shardings = SHARDING if k.data_parallel * k.context_parallel > 1 else (Sharding.none,)
    return [k.with_choices(1, Recompute.full, z) for z in shardings]


def ranked(
    sm: StepModel, gpus: int, memory: dict[Knobs, float] | None = None, explore: bool = False
) -> tuple[list[Knobs], list[tuple[float, Knobs, Terms]]]:
    """(every layout ``candidates`` enumerates, those that fit by ``memory_bytes`` as (step s, layout, terms)):
    the ranking ``plan`` shows the top of. The layouts whose own choices lie inside the stack's validated region
    (``outside_layout``) come first, fastest first, then the others, fastest first: a layout in a regime no
    published run checks is predicted all the same, but not preferred on that prediction alone. ``explore``: all
    of them fastest first. ``memory``: filled with the per-GPU bytes of the layouts it sized (the leanest of each
    split are candidates too; ``plan``'s explanation reuses them)."""
    capacity = sm.hw.capacity - sm.reserve
    scored: list[tuple[float, Knobs, Terms]] = []
    all_knobs = candidates(sm, gpus)
    hopeless: dict[tuple[int, ...], bool] = {}
    memory = {} if memory is None else memory
    for k in all_knobs:
        split = k.split
        if split not in hopeless:  # the least memory this split can take: none of its layouts fits if that does not
            hopeless[split] = min(_memory(sm, memory, lean) for lean in _leanest(k)) > capacity
        if hopeless[split]:
            continue
        per_gpu = _memory(sm, memory, k)
        if per_gpu > capacity:
            continue
        terms = sm.evaluate(k, per_gpu)
        scored.append((terms.step_seconds, k, terms))
    order = _order(sm, explore)
    scored.sort(key=lambda x: order(x[1], x[0]))
    return all_knobs, scored


def _order(sm: StepModel, explore: bool) -> Callable[[Knobs, float], tuple[bool, float]]:
    """The plan's sort key of a layout and its step time: inside the stack's validated region first (unless
    ``explore``, or the stack has no region), then fastest."""
    if explore or sm.validated is None or sm.validated.empty:
        return lambda k, seconds: (False, seconds)
    return lambda k, seconds: (bool(outside_layout(sm, k)), seconds)


def plan(sm: StepModel, gpus: int, name: str, top: int = 5, explore: bool = False) -> PlanResult:
    """Rank every fitting layout, those inside the stack's validated region first (``ranked``; ``explore``: all by
    predicted step time alone); the top ``top`` as full results."""
    capacity = sm.hw.capacity - sm.reserve
    memory: dict[Knobs, float] = {}  # _explain's families are mostly the candidates again
    all_knobs, scored = ranked(sm, gpus, memory, explore)
    results = []
    for _, k, terms in scored:
        result = build_result(sm, k, name, terms)
        if result.fits:  # napkin's own memory engine has the last word
            results.append(result)
        if len(results) >= top:
            break
    explanation = _explain(sm, gpus, all_knobs, scored, results, memory, explore)
    warnings = []
    if not all_knobs:
        domain = sm.hw.fabric.domain_size
        warnings.append(
            f"no valid layout: {gpus:,} GPUs must split into TP × PP × CP × DP and the global batch of "
            f"{sm.batch:,} sequences into micro-batch × DP × micro-batches, with TP within one "
            f"{domain}-device domain and PP at most {sm.model.layers} layers"
        )
    elif not results:
        warnings.append("no layout fits in memory: add GPUs or use a device with more memory")
    return PlanResult(
        model=name,
        cluster=sm.hw.cluster,
        stack=sm.stack.name,
        gpus=gpus,
        global_batch=sm.batch,
        seq=sm.seq,
        considered=len(all_knobs),
        fitting=len(scored),
        ranking="fastest" if explore or sm.validated is None or sm.validated.empty else "validated first",
        question_outside=outside_question(sm, gpus),
        finetune=str(sm.adapters.finetune) if sm.adapters else "full",
        lora_rank=sm.adapters.rank if sm.adapters else None,
        explanation=explanation,
        layouts=results,
        warnings=warnings,
        notes=results[0].notes if results else [],
        steps=results[0].steps if results else [],
        memory_limit=capacity,
        points=[(terms.per_gpu_bytes, terms.step_seconds) for _, _, terms in scored],
    )


def _memory(sm: StepModel, memory: dict[Knobs, float], k: Knobs) -> float:
    """``k``'s per-GPU bytes, from ``memory`` when the plan has them (added there when not)."""
    found = memory.get(k)
    if found is None:
        found = memory[k] = sm.memory_bytes(k)
    return found


def _explain(
    sm: StepModel,
    gpus: int,
    everything: list[Knobs],
    scored: list[tuple[float, Knobs, Terms]],
    top: list[StepResult],
    memory: dict[Knobs, float],
    explore: bool,
) -> str:
    if not top:
        return "Nothing fits." if everything else "No valid layout."
    best = scored[0][1], scored[0][2]
    worst_name, worst_share = _worst(best[1])
    overhead = (
        f"its largest overhead is {worst_name} ({worst_share:,.0%})"
        if worst_share >= 0.005
        else ("it has no overhead above 0.5 %")
    )
    lines = [f"#1 wins with MFU {top[0].mfu:.3f}; {overhead}."]
    faster = next((x for x in scored if x[0] < scored[0][0] * 0.995), None)  # ranked below #1 for its region
    if faster is not None:
        seconds, k = faster[0], faster[1]
        lines.append(
            f"Layouts inside the stack's validated region rank first; the fastest outside it is predicted "
            f"{scored[0][0] / seconds - 1:,.0%} faster: {k.layout().describe(compact=True)} b{k.micro_batch}, "
            f"outside in {'; '.join(outside_layout(sm, k))}. --explore ranks every layout by its step time."
        )
    question = outside_question(sm, gpus)
    if question and not explore and sm.validated is not None and not sm.validated.empty:
        lines.append(f"Outside the validated region whatever the layout: {'; '.join(question)}.")
    capacity = sm.hw.capacity - sm.reserve
    timed = {k: terms for _, k, terms in scored}  # the layouts the plan scored, as it scored them
    order = _order(sm, explore)
    for label, family in _families(sm, gpus, everything):
        fitting = [k for k in family if _memory(sm, memory, k) <= capacity]
        if not fitting:
            least = min(_memory(sm, memory, k) for k in family)
            lines.append(f"{label}: doesn't fit (at least {format_bytes_si(least)} per GPU).")
            continue
        rival = min(
            ((k, timed.get(k) or sm.evaluate(k, memory[k])) for k in fitting),
            key=lambda x: order(x[0], x[1].step_seconds),
        )
        # a rival the plan did not rank (TP across nodes) is left out for that, whatever the region says
        outside = outside_layout(sm, rival[0]) if not explore and rival[0] in timed else []
        lines.append(f"{label}: {_versus(best, rival, outside)}.")
    return " ".join(lines)


__all__ = ["PlanResult", "candidates", "plan", "ranked"]
