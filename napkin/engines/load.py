"""Traffic on a deployment: Poisson arrivals split over replicas, each replica's scheduler simulated
(``napkin.engines.traffic``) at its stack's step costs (``napkin.engines.replica``), percentiles, the SLO,
and the largest rate that meets it.

A replica of ``tensor × pipeline`` GPUs runs ``replica.ranks`` schedulers (PP micro-batches, DP-attention
ranks); splitting a Poisson stream at random keeps each part Poisson (rate / parts), so one scheduler is
simulated and stands for all of them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from napkin.domain.layout import ServingLayout
from napkin.engines.replica import Replica
from napkin.engines.step_cost import StepCost
from napkin.engines.traffic import Outcome, Scheduler, arrivals, simulate
from napkin.engines.traffic_result import Lengths, Slo, TrafficResult, outcome_summary, percentile
from napkin.results.explain import step
from napkin.units import format_count, format_number


@dataclass(frozen=True)
class Workload:
    """Requests: arrival rate (all replicas), length distributions, how many to simulate, the seed."""

    rate: float
    prompt: Lengths
    output: Lengths
    requests: int = 2000
    concurrency: int = 0  # > 0: a closed loop of that many clients (all replicas) instead of Poisson at ``rate``
    seed: int = 0
    prefix_hit_rate: float = 0.0
    speculative_tokens: int = 0
    acceptance: float = 0.0
    draft_params: float = 0.0  # parameters of the draft model or MTP head (0: its cost is not counted)

    def clients(self, schedulers: int) -> int:
        """Closed-loop clients each scheduler serves (the API checks they split evenly); 0 under Poisson arrivals."""
        return max(1, self.concurrency // schedulers) if self.concurrency else 0

    def tokens_per_step(self) -> float:
        """Expected tokens a sequence gains per verification step: (1 − α^(γ+1)) / (1 − α) (Leviathan et al.
        2023 eq. 1); 1 without speculation."""
        g, a = self.speculative_tokens, self.acceptance
        if g == 0:
            return 1.0
        if a >= 1:
            return float(g + 1)
        return (1 - a ** (g + 1)) / (1 - a)


def step_cost(replica: Replica, workload: Workload) -> StepCost:
    """The replica's step cost with speculative decoding's draft: γ passes of a ``draft_params`` model in the
    replica's weight format, split over its tensor-parallel group, at the stack's decode rates; the target
    verifies γ + 1 tokens per sequence (``verify``)."""
    cost = replica.step_cost()
    g = workload.speculative_tokens
    if g == 0:
        return cost
    from napkin.engines.serving import WeightFormat, compute_dtype, weight_bytes_per_param

    hw, s, t = replica.hardware, replica.stack, replica.tensor
    fmt = WeightFormat(replica.weights)
    read = workload.draft_params * weight_bytes_per_param(fmt, replica.group) / t
    flops = 2.0 * workload.draft_params / t
    return replace(
        cost,
        verify=g + 1,
        draft_passes=float(g) if workload.draft_params > 0 else 0.0,
        draft_weights=read / (hw.memory_bandwidth * s.decode.bandwidth),
        draft_token=flops / (hw.peak(compute_dtype(fmt, hw)) * s.decode.compute),
    )


def held_at_admission(replica: Replica, workload: Workload) -> int:
    """KV tokens the longest request needs to be admitted: its prompt, or with a stack that reserves outputs
    (TensorRT-LLM's GUARANTEED_NO_EVICT) its prompt and whole output; a block's waste on top."""
    whole = workload.prompt.largest() + (workload.output.largest() if replica.stack.reserve_output else 0)
    return whole + replica.stack.block_size


def scheduler(replica: Replica, workload: Workload, kv_tokens: int | None = None) -> Scheduler:
    s = replica.stack
    return Scheduler(
        token_budget=s.max_num_batched_tokens,
        max_seqs=s.max_num_seqs,
        kv_tokens=replica.kv_tokens() if kv_tokens is None else kv_tokens,
        block=s.block_size,
        tokens_per_step=workload.tokens_per_step(),
        step_tokens=workload.speculative_tokens + 1,
        mixed=s.mixed_prefill,
        reserve_peak=s.reserve_peak,
        reserve_output=s.reserve_output,
        overhead=s.request_seconds,
    )


def run(
    replica: Replica, replicas: int, workload: Workload, rate: float | None = None, kv_tokens: int | None = None
) -> Outcome:
    """Simulate one scheduler's share of ``rate`` (default the workload's) requests per second."""
    parts = replicas * replica.ranks
    share = (workload.rate if rate is None else rate) / parts
    prompts, outputs = _lengths(workload)
    if workload.concurrency and rate is None:
        cost, sched = step_cost(replica, workload), scheduler(replica, workload, kv_tokens)
        return simulate([0.0] * workload.requests, prompts, outputs, cost, sched, clients=workload.clients(parts))
    times = arrivals(share, workload.requests, workload.seed)
    return simulate(times, prompts, outputs, step_cost(replica, workload), scheduler(replica, workload, kv_tokens))


def _lengths(workload: Workload, n: int | None = None) -> tuple[list[int], list[int]]:
    """``n`` (default the workload's) requests' prompt and output lengths, seeded; a prefix-cache hit leaves the
    rest of a prompt."""
    n = workload.requests if n is None else n
    rng = random.Random(workload.seed + 1)
    prompts = workload.prompt.sample(rng, n)
    outputs = workload.output.sample(rng, n)
    if workload.prefix_hit_rate > 0:
        prompts = [max(1, round(p * (1 - workload.prefix_hit_rate))) for p in prompts]
    return prompts, outputs


#: Requests a saturation run sends at once: four times what the engine runs at most (its max_num_seqs), at least
#: 4,096 and at most 32,768, so its middle half is past the first admissions and before the drain whatever
#: ``requests`` the run it judges simulates, at a bounded cost.
FLOOD_PER_SEQUENCE, FLOOD_LEAST, FLOOD_MOST = 4, 4096, 32768


def flood_requests(replica: Replica) -> int:
    """How many requests ``saturation_rate`` sends at once to one scheduler of ``replica``."""
    return min(FLOOD_MOST, max(FLOOD_LEAST, FLOOD_PER_SEQUENCE * replica.stack.max_num_seqs))


def saturation_rate(replica: Replica, replicas: int, workload: Workload) -> float:
    """The rate (req/s, all replicas) the simulated schedulers complete requests at when their queues never
    empty: every request arrives at once, and completions are counted over the run's middle half (past the
    first admissions, before the drain). An offered rate at or above it is unstable, a queue that grows for as
    long as the traffic lasts (utilisation ρ ≥ 1; Kleinrock 1975, Queueing Systems I §2.1), whatever a finite
    run's percentiles say."""
    n = flood_requests(replica)
    prompts, outputs = _lengths(workload, n)
    flood = simulate([0.0] * n, prompts, outputs, step_cost(replica, workload), scheduler(replica, workload))
    done = sorted(flood.e2e)
    first, last = n // 4, (3 * n) // 4
    span = done[last] - done[first]
    return (last - first) / span * replicas * replica.ranks if span > 0 else float("inf")


def max_rate(
    replica: Replica, replicas: int, workload: Workload, slo: Slo, iterations: int = 14, sustained: float | None = None
) -> float:
    """The largest rate (req/s, all replicas) whose simulated percentiles meet ``slo`` and that the deployment
    can sustain (below ``saturation_rate``: a finite run at a rate the engine cannot keep up with ends before its
    queue shows it); 0 when even a trickle misses it. Bisection in log-rate between a trickle and twice the
    engine's capacity. ``sustained``: ``saturation_rate`` where the caller has it."""
    capacity = service_rate(replica, workload) * replicas * replica.ranks
    if sustained is None:
        sustained = saturation_rate(replica, replicas, workload)

    def met(rate: float) -> bool:
        return rate < sustained and slo.met(run(replica, replicas, workload, rate))

    low, high = capacity * 1e-4, capacity * 2.0
    if not met(low):
        return 0.0
    if met(high):
        return high
    for _ in range(iterations):
        mid = (low * high) ** 0.5
        low, high = (mid, high) if met(mid) else (low, mid)
    return low


def max_concurrency(replica: Replica, replicas: int, workload: Workload, slo: Slo) -> int:
    """The most closed-loop clients (all replicas) whose simulated percentiles meet ``slo``; 0 when one client
    misses it. Bisection over whole clients up to four times what the schedulers run at once."""
    parts = replicas * replica.ranks

    def met(clients: int) -> bool:
        return slo.met(run(replica, replicas, replace(workload, concurrency=clients)))

    if not met(parts):
        return 0
    low, high = parts, 4 * replica.stack.max_num_seqs * parts
    if met(high):
        return high
    while high - low > max(1, low // 50):  # to 2 %: the latencies it bisects are themselves a model's
        mid = (low + high) // 2
        low, high = (mid, high) if met(mid) else (low, mid)
    return low


def service_rate(replica: Replica, workload: Workload, kv_tokens: int | None = None) -> float:
    """Requests per second one scheduler completes when kept full: B sequences in flight, each step B decode
    tokens and the prompt tokens of the B / output requests that replace the finished ones. A TP group's cost of
    a prompt-carrying step (``StepCost.prefill_fixed``) is paid by the share of steps the prompts fill at least,
    packed into the token budget left beside the decodes, not by every step: the rate stays the most a full
    engine completes, the bound serve-plan's cost floor takes it for."""
    cost = step_cost(replica, workload)
    prompt, output = workload.prompt.mean() * (1 - workload.prefix_hit_rate), workload.output.mean()
    tau = workload.tokens_per_step()
    per_seq = prompt + (output if replica.stack.reserve_output else output / 2)
    kv = replica.kv_tokens() if kv_tokens is None else kv_tokens
    b = max(1, min(replica.stack.max_num_seqs, int(kv / max(per_seq, 1.0))))
    steps = max(output / tau, 1.0)
    pre = b * prompt / steps
    q = workload.speculative_tokens + 1
    args = (b * q, pre, q * b * (prompt + output / 2), pre * prompt / 2)
    seconds = cost.seconds(*args)
    if pre > 0 and cost.prefill_fixed > 0:
        carrying = min(1.0, pre / max(1.0, replica.stack.max_num_batched_tokens - b * q))
        seconds = carrying * seconds + (1 - carrying) * replace(cost, prefill_fixed=0.0).seconds(*args)
    return b / steps / seconds


def traffic_result(
    name: str,
    replica: Replica,
    replicas: int,
    workload: Workload,
    *,
    quantiles: list[float],
    slo: Slo | None,
    stack_name: str,
    price_per_gpu_hour: float | None,
) -> TrafficResult:
    """Simulate the workload on ``replicas`` copies of ``replica`` and report it."""
    outcome = run(replica, replicas, workload)
    parts = replicas * replica.ranks
    summary = outcome_summary(outcome, quantiles)
    duration = outcome.duration if outcome.duration > 0 else float("nan")
    out_tps = outcome.output_tokens / duration * parts
    total_tps = (outcome.output_tokens + outcome.prompt_tokens) / duration * parts
    gpus = replicas * replica.gpus
    served = len(outcome.e2e) / duration * parts
    tenth = max(1, len(outcome.ttft) // 10)
    early, late = percentile(outcome.ttft[:tenth], 50), percentile(outcome.ttft[-tenth:], 50)
    # the queue grew through the run, or would in a longer one (a closed loop's queue is bounded by its clients)
    sustained = float("inf") if workload.concurrency else saturation_rate(replica, replicas, workload)
    saturated = not workload.concurrency and (workload.rate >= sustained or (late > 5 * early and late > 1.0))
    kv = replica.kv_tokens()
    steps = [
        step(
            "engine KV capacity per scheduler",
            "the stack's memory rule ÷ KV bytes per token per GPU, whole blocks",
            f"{replica.stack.memory_rule}, block {replica.stack.block_size}",
            f"{kv:,} tokens",
            "napkin.engines.replica (stacks/*.yaml)",
        ),
        step(
            "scheduler model",
            "iteration-level: decode every running sequence, prompt chunks FCFS up to the token budget; "
            + (
                "admit when the prompt's and the whole output's KV fit beside what running requests were granted "
                "(GUARANTEED_NO_EVICT: no preemption)"
                if replica.stack.reserve_output
                else "admit when the prompt's KV fits; preempt the newest sequence when decode growth finds no block"
            ),
            f"budget {replica.stack.max_num_batched_tokens:,}, max_num_seqs {replica.stack.max_num_seqs}",
            f"{outcome.steps:,} steps, {outcome.preemptions:,} preemptions",
            "Orca (Yu et al. 2022 §3); Sarathi-Serve (arXiv:2403.02310 §4); vLLM (arXiv:2309.06180 §4.5)",
        ),
    ]
    if not workload.concurrency:
        steps.append(
            step(
                "sustained rate",
                "requests completed per second with every request sent at once, over the middle half of the "
                "completions; an offered rate at or above it is saturated and meets no SLO",
                f"{flood_requests(replica):,} requests at once per scheduler, × {parts:,} scheduler(s)",
                f"{format_number(sustained, 3)} req/s",
                "stability needs utilisation ρ < 1 (Kleinrock 1975, Queueing Systems I §2.1)",
            )
        )
    if workload.concurrency:
        steps.append(
            step(
                "closed loop",
                "N clients split evenly over the schedulers; all send at once, then each sends its next request "
                "when its last reply has come back (its last token + the stack's per-request overhead)",
                f"N = {workload.concurrency:,} over {parts:,} scheduler(s), {workload.requests:,} requests each",
                f"{format_number(served)} req/s served",
                "genai-perf --concurrency; vllm bench serve --max-concurrency",
            )
        )
    if workload.speculative_tokens:
        steps.append(
            step(
                "speculative decoding",
                "tokens per step = (1 − α^(γ+1)) / (1 − α); γ + 1 tokens verified per sequence per step",
                f"γ = {workload.speculative_tokens}, α = {workload.acceptance:g}",
                f"{workload.tokens_per_step():.3g} tokens per step",
                "Leviathan, Kalman & Matias 2023, arXiv:2211.17192 §3.1 eq. (1)",
            )
        )
        cost = step_cost(replica, workload)
        steps.append(
            step(
                "draft cost per step",
                "γ passes × max(draft weights / (bw × β_decode), seqs × 2·N_draft / (t × peak × η_decode))",
                f"γ = {workload.speculative_tokens}, N_draft = {format_count(workload.draft_params)}",
                f"{cost.draft(1) * 1e3:.3g} ms at one sequence"
                + ("" if workload.draft_params else " (no --draft-params: the draft is free)"),
                "Leviathan, Kalman & Matias 2023, arXiv:2211.17192 §3.4 (cost coefficient c)",
            )
        )
    slo_met = ratios = None
    found = most = None
    if slo is not None and slo.targets:
        ratios = slo.misses(outcome)
        slo_met = all(r <= 1 for r in ratios.values()) and not saturated
        if workload.concurrency:
            most = max_concurrency(replica, replicas, workload, slo)
        else:
            found = max_rate(replica, replicas, workload, slo, sustained=sustained)
    price = price_per_gpu_hour * gpus if price_per_gpu_hour is not None else None
    usd = price / 3600 / out_tps * 1e6 if price is not None and out_tps > 0 else None
    warnings = []
    clients = workload.clients(parts)
    if clients and workload.requests < 10 * clients:
        warnings.append(
            f"{workload.requests:,} requests for {clients:,} clients per scheduler: the run is mostly its start (all "
            "at once) and its drain; give --requests of 10× the clients or more for steady-state figures"
        )
    if saturated:
        limit = f"{format_number(sustained, 3)} req/s with its queue never empty"
        warnings.append(
            (
                f"the offered {format_number(workload.rate, 3)} req/s is more than the deployment serves ({limit})"
                if workload.rate >= sustained
                else f"the queue grew through the run: {format_number(workload.rate, 3)} req/s is at the deployment's "
                f"limit ({limit})"
            )
            + ": the queue grows for as long as the traffic lasts, so the latencies shown depend on how many "
            "requests are simulated, and no SLO is met"
        )
    return TrafficResult(
        model=name,
        hardware=replica.hardware.name,
        stack=stack_name,
        gpus=gpus,
        tensor_parallel=replica.tensor,
        pipeline_parallel=replica.pipeline,
        replicas=replicas,
        layout=serving_layout(replica),
        weights_format=replica.weights,
        kv_dtype=replica.kv,
        reserve_output=replica.stack.reserve_output,
        rate=served if workload.concurrency else workload.rate,
        concurrency=workload.concurrency or None,
        requests=workload.requests,
        seed=workload.seed,
        prompt=workload.prompt.label,
        output=workload.output.label,
        mean_prompt=workload.prompt.mean(),
        mean_output=workload.output.mean(),
        kv_capacity_tokens=kv,
        max_num_seqs=replica.stack.max_num_seqs,
        token_budget=replica.stack.max_num_batched_tokens,
        tokens_per_step=workload.tokens_per_step(),
        prefix_hit_rate=workload.prefix_hit_rate,
        requests_per_second=served,
        output_tokens_per_second=out_tps,
        total_tokens_per_second=total_tps,
        output_tokens_per_second_per_gpu=out_tps / gpus,
        ttft_seconds=summary["ttft"],
        tpot_seconds=summary["tpot"],
        e2e_seconds=summary["e2e"],
        mean_batch=outcome.mean_batch,
        preemptions=outcome.preemptions,
        saturated=saturated,
        slo=slo.describe() if slo is not None and slo.targets else None,
        slo_met=slo_met,
        slo_ratios=ratios or {},
        max_rate=found,
        max_concurrency=most,
        price_per_hour=price,
        usd_per_million_tokens=usd,
        steps=steps,
        warnings=warnings,
    )


def serving_layout(replica: Replica) -> ServingLayout:
    """The replica's degrees by their one name (``tensor_parallel`` …), as results report them."""
    return ServingLayout(
        tensor_parallel=replica.tensor,
        pipeline_parallel=replica.pipeline,
        expert_parallel=replica.tensor if replica.expert else 1,
        dp_attention=replica.tensor if replica.dp_attention else 1,
    )
