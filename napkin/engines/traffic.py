"""Traffic through a continuous-batching engine: an iteration-level scheduler model, seeded and deterministic.

One replica runs engine *steps*. Each step runs every decoding sequence one token (``tokens_per_step`` with
speculative decoding) plus prompt chunks, first come first served, up to a token budget (vLLM
``max_num_batched_tokens``; Agrawal et al. 2024, Sarathi-Serve, arXiv:2403.02310 §4: chunked prefill); at most
``max_seqs`` sequences run at once (``max_num_seqs``). A waiting request is admitted only when the free KV
cache holds its whole prompt (vLLM V0 ``BlockSpaceManager.can_allocate``; SGLang's scheduler does the same);
when the decoding sequences' growth finds no free KV block, the most recently admitted one is preempted and
recomputed later (vLLM ``PreemptionMode.RECOMPUTE``; Kwon et al. 2023, arXiv:2309.06180 §4.5). A stack that
reserves each request's whole output at admission (TensorRT-LLM's ``GUARANTEED_NO_EVICT`` capacity scheduler)
admits only what its grants leave room for, and never preempts. Iteration-level
scheduling itself is Orca's (Yu et al. 2022, OSDI, §3).

A step costs ``StepCost.seconds`` (napkin.serving: the stack's achieved rates). Between events (an arrival
that can be admitted, a completion, the KV cache filling up) every step is decode only and its cost is affine
in the step index, so a stretch of them is summed in closed form: the loop runs per event, not per token,
and 10⁵ requests take about a second (examples/traffic_benchmark.py).
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from pydantic import Field, computed_field

from napkin.domain.base import Record
from napkin.domain.layout import ServingLayout
from napkin.engines.reserve import Decoding
from napkin.results.result import Result
from napkin.units import format_duration


@dataclass(frozen=True, slots=True)
class StepCost:
    """Seconds of one engine step on one GPU of a replica, as coefficients (all in seconds):

    fixed + comm(T) + max(weights(T), GEMMs) + ctx · attention + pairs · prefill_pair, where

    * T = decode + prefill tokens of the step; comm(T) = comm_fixed + comm_token · T (TP all-reduces), or, where
      ``comm_pieces`` are given, the first (below, fixed, per_token) piece with T < below: the custom all-reduce's
      one-shot and two-shot regimes, then NCCL's (``napkin.engines.tp_allreduce``);
    * weights(T) = dense + experts · (1 − (1 − k/E)^(T · ep_tokens)) (MoE: only the experts some token
      picked are read; ``ep_tokens`` scales T to the tokens the expert group sees under DP attention);
    * GEMMs = decode · decode_token + prefill · prefill_token;
    * ctx: cached tokens the decoding queries read, each max(KV bytes / attention bandwidth, FLOPs / rate);
    * pairs: Σ over prompt tokens of the keys they attend to (compute-bound flash attention);
    * speculative decoding: each sequence verifies ``verify`` = γ + 1 tokens per step, after ``draft_passes``
      forward passes of the draft (a small model, or an MTP head) over the decoding sequences, each
      max(draft weights, seqs · draft FLOPs) (Leviathan et al. 2023, arXiv:2211.17192 §3.4: the step costs
      γ·c + 1 target steps, c the draft's cost ratio);
    * ``host_seq``: host seconds per decoding sequence per step that run while the GPU computes (TensorRT-LLM's
      PyTorch backend, ``py_executor.py`` ``_executor_loop_overlap``: the next step is scheduled and launched and
      the previous step's requests updated while this one runs), so the step takes max(the above, hidden + seqs ·
      host_seq); ``hidden``: the host's fixed work per step where it too runs under the GPU's (SGLang 0.4's
      overlap scheduler, ``scheduler.py`` ``event_loop_overlap``), else 0 and that work is in ``fixed``."""

    fixed: float
    comm_fixed: float
    comm_token: float
    dense: float
    experts_all: float
    experts: int
    top_k: int
    ep_tokens: float
    decode_token: float
    prefill_token: float
    attention: float
    prefill_pair: float
    comm_pieces: tuple[tuple[float, float, float], ...] = ()
    verify: int = 1
    draft_passes: float = 0.0
    draft_weights: float = 0.0
    draft_token: float = 0.0
    host_seq: float = 0.0
    hidden: float = 0.0  # host work per step that overlaps the GPU's (SGLang 0.4's overlap scheduler)

    def draft(self, seqs: float) -> float:
        """Seconds of the draft's passes in a step where ``seqs`` sequences decode (0 without speculation)."""
        if self.draft_passes == 0 or seqs <= 0:
            return 0.0
        return self.draft_passes * max(self.draft_weights, seqs * self.draft_token)

    def weights(self, tokens: float) -> float:
        if self.experts <= 1 or tokens <= 0:
            return self.dense + self.experts_all
        e, k = self.experts, self.top_k
        untouched: float = (1 - k / e) ** (tokens * self.ep_tokens)
        return self.dense + self.experts_all * (1 - untouched)

    def comm(self, tokens: float) -> float:
        for below, fixed, per_token in self.comm_pieces:
            if tokens < below:
                return fixed + per_token * tokens
        return self.comm_fixed + self.comm_token * tokens

    def gemms(self, decode: float, prefill: float) -> float:
        return decode * self.decode_token + prefill * self.prefill_token

    def seconds(self, decode: float, prefill: float, ctx: float, pairs: float) -> float:
        tokens = decode + prefill
        gpu = (
            self.fixed
            + self.comm(tokens)
            + max(self.weights(tokens), self.gemms(decode, prefill))
            + self.attention * ctx
            + self.prefill_pair * pairs
            + self.draft(decode / self.verify)
        )
        return max(gpu, self.host(decode / self.verify))

    def host(self, seqs: float) -> float:
        """Host seconds of a step where ``seqs`` sequences decode (overlapped with the GPU's work)."""
        return self.hidden + self.host_seq * seqs

    def stretch(self, steps: int, first: float, slope: float, seqs: float) -> float:
        """Seconds of ``steps`` decode-only steps whose GPU time is first + slope · i (i = 0, 1, …), each at
        least the host's time for ``seqs`` sequences."""
        gpu = steps * first + slope * steps * (steps - 1) / 2
        floor = self.host(seqs)
        if floor <= first:
            return gpu
        if slope <= 0:
            return steps * floor
        under = min(steps, math.ceil((floor - first) / slope))  # steps whose GPU time is below the host's
        rest = steps - under
        return under * floor + rest * first + slope * (steps * (steps - 1) - under * (under - 1)) / 2


@dataclass(frozen=True, slots=True)
class Scheduler:
    """The engine's scheduling limits on one replica."""

    token_budget: int
    max_seqs: int
    kv_tokens: int
    block: int
    tokens_per_step: float = 1.0
    step_tokens: int = 1
    mixed: bool = True  # prompt chunks share a step with decoding; False: a prefill step pauses decoding (SGLang)
    overhead: float = 0.0  # seconds each request spends outside the engine loop (API server, tokenizer)
    reserve_peak: bool = False  # admission also reserves the running sequences' outputs (SGLang, ``peak_fits``)
    reserve_output: bool = False  # admission reserves KV for prompt + whole output (TRT-LLM GUARANTEED_NO_EVICT)


def peak_fits(states: list[tuple[float, float]], free: float) -> bool:
    """SGLang 0.4's admission of an ``ignore_eos`` request with the radix cache off (``PrefillAdder.
    add_one_req_ignore_eos``): ``states`` are (output tokens left, KV tokens held) of every running sequence and the
    candidate, ``free`` the KV tokens free once the candidate's prompt is in. Sorted by tokens left, the i-th
    state's check is free + Σ_{j<i} held_j − left_{i+1} · (n − i) > 0 (the i + 1-th's tokens left, the last's
    own: the code's own reading), the sequences that finish first giving back what they hold."""
    states.sort()
    n, freed = len(states), 0.0
    for i, (left, held) in enumerate(states):
        steps = states[i + 1][0] if i + 1 < n else left
        if free + freed - steps * (n - i) <= 0:
            return False
        freed += held
    return True


@dataclass(frozen=True, slots=True)
class Outcome:
    """Per-request times (seconds) and totals of one simulated run."""

    ttft: list[float]
    tpot: list[float]
    e2e: list[float]
    duration: float
    prompt_tokens: int
    output_tokens: int
    steps: int
    preemptions: int
    mean_batch: float
    itl: list[tuple[float, float]] = field(default_factory=list)  # (gap seconds, how many gaps): token to token


def arrivals(rate: float, n: int, seed: int) -> list[float]:
    """Poisson arrivals: exponential gaps of mean 1/rate, from a seeded generator."""
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        t += rng.expovariate(rate)
        out.append(t)
    return out


def simulate(
    times: list[float], prompts: list[int], outputs: list[int], cost: StepCost, sched: Scheduler, clients: int = 0
) -> Outcome:
    """Run requests (arrival time, prompt tokens, output tokens ≥ 1) through one replica. ``clients`` > 0: a
    closed loop instead (``times`` ignored): that many clients each send a request at 0 and the next one as soon
    as the last has come back (its last token, plus the per-request overhead), as a benchmark run at a fixed
    concurrency does (genai-perf --concurrency, vllm bench serve --max-concurrency)."""
    n_req = len(times)
    times = [0.0 if r < clients else math.inf for r in range(n_req)] if clients > 0 else list(times)
    sent = min(clients, n_req)  # the next request a closed-loop client sends
    tau, q = sched.tokens_per_step, sched.step_tokens
    budget, max_seqs, cap = sched.token_budget, sched.max_seqs, sched.kv_tokens
    waste = sched.block / 2.0  # a running sequence wastes half a block on average (paging)
    if any(p + waste > cap for p in prompts):
        raise ValueError(f"a prompt of {max(prompts):,} tokens does not fit the KV cache ({cap:,} tokens)")
    if sched.reserve_output and any(p + o + waste > cap for p, o in zip(prompts, outputs, strict=True)):
        longest = max(p + o for p, o in zip(prompts, outputs, strict=True))
        raise ValueError(
            f"a request of {longest:,} tokens (prompt + output) does not fit the KV cache ({cap:,} tokens), which "
            "this stack reserves whole at admission"
        )
    first = [0.0] * n_req
    done = [0.0] * n_req
    prompt = list(prompts)
    left = [o - 1 for o in outputs]  # tokens after the first
    epoch = [0] * n_req
    start = [0] * n_req
    base = [0.0] * n_req
    state = [0] * n_req  # 0 waiting, 1 prefilling, 2 decoding, 3 done
    filled = [0] * n_req
    heap: list[tuple[int, int, int]] = []
    order: list[int] = []
    queue: deque[int] = deque()
    n_dec = running = finished = preempted = nxt = it = steps_run = 0
    mixed, reserve = sched.mixed, sched.reserve_peak
    owe = [0.0] * n_req  # outputs a running request may still add, as admission counted them (``reserve_peak``)
    owed, top = 0.0, float(max(outputs, default=0))
    # GUARANTEED_NO_EVICT: what each running request was granted at admission (prompt, whole output, a block's
    # waste) and their sum; nothing it grants is taken back, so nothing is preempted
    grant = [0.0] * n_req
    granted = 0.0
    # the decoding sequences sorted for SGLang's check (one token per step), the prompts being filled, their keys
    dec = Decoding() if reserve and tau == 1.0 else None
    filling: set[int] = set()
    key: list[tuple[int, int, int]] = [(0, 0, 0)] * n_req
    dec_base = prefill_kv = 0.0
    now = batch_time = 0.0
    # Inter-token gaps, as streaming clients measure them: every decode step gives each decoding sequence one
    # gap; a prefill step that pauses decoding (mixed off) lengthens the next gap of the sequences it paused.
    gaps: list[tuple[float, float]] = []
    pause = paused = 0.0

    def gap(seconds: float, count: float) -> None:
        nonlocal pause, paused
        if count <= 0:
            return
        if paused > 0:
            hit = min(paused, count)
            gaps.append((seconds + pause, hit))
            count -= hit
            pause = paused = 0.0
        if count > 0:
            gaps.append((seconds, count))

    def held(chunks: list[tuple[int, int]]) -> list[tuple[float, float]]:
        """(output tokens left, KV tokens held) of the running sequences and of this step's new prompts."""
        order[:] = [r for r in order if state[r] in (1, 2)]  # finished ones leave (the order is kept)
        out: list[tuple[float, float]] = []
        for r in order:
            if state[r] == 2:
                made = min(left[r], int(tau * (it - 1 - start[r])))
                out.append((float(left[r] - made), float(prompt[r] + 1 + made)))
            elif state[r] == 1:
                out.append((left[r] + 1.0, float(prompt[r])))
        out += [(left[r] + 1.0, float(prompt[r])) for r, _ in chunks if state[r] == 0]
        return [(a, b) for a, b in out if a > 0]

    def reply() -> None:
        """A request came back: its closed-loop client sends the next one once the reply has reached it."""
        nonlocal sent
        if clients > 0 and sent < n_req:
            times[sent] = now + sched.overhead
            sent += 1

    def pop_finished() -> None:
        nonlocal n_dec, dec_base, running, finished, owed, granted
        while heap and heap[0][0] < it:
            _, ep, r = heapq.heappop(heap)
            if ep != epoch[r] or state[r] != 2:
                continue
            state[r] = 3
            done[r] = now
            reply()
            if dec is not None:
                dec.remove(key[r])
            n_dec -= 1
            dec_base -= base[r]
            running -= 1
            owed -= owe[r]
            granted -= grant[r]
            finished += 1

    def preempt_one() -> bool:
        nonlocal n_dec, dec_base, running, preempted, prefill_kv, owed, granted
        while order:
            r = order.pop()
            if state[r] == 2:
                made = min(left[r], int(tau * (it - 1 - start[r])))
                if dec is not None:
                    dec.remove(key[r])
                n_dec -= 1
                dec_base -= base[r]
                prompt[r] += 1 + made  # recompute: the prompt and what was generated
                left[r] = max(left[r] - made - 1, 0)
            elif state[r] == 1:
                prefill_kv -= filled[r]
                queue.remove(r)
                filling.discard(r)
            else:
                continue
            running -= 1
            owed -= owe[r]
            granted -= grant[r]
            epoch[r] += 1
            state[r] = 0
            filled[r] = 0
            queue.appendleft(r)
            preempted += 1
            return True
        return False

    while finished < n_req:
        while nxt < n_req and times[nxt] <= now:
            queue.append(nxt)
            nxt += 1
        if not queue and n_dec == 0:
            if nxt >= n_req:
                break
            now = times[nxt]
            continue
        ctx = dec_base + n_dec * tau * it
        used = ctx + prefill_kv + running * waste
        while n_dec and used + n_dec * tau > cap and preempt_one():
            ctx = dec_base + n_dec * tau * it
            used = ctx + prefill_kv + running * waste
        room = budget - (n_dec * q if mixed else 0)  # a prefill step that pauses decoding has the whole budget
        free = cap - used - n_dec * tau
        chunks: list[tuple[int, int]] = []
        pending = 0.0  # outputs of this step's new prompts
        granting = 0.0  # what this step's new prompts are granted (reserve_output)
        for r in queue:
            if room <= 0:
                break
            rest = prompt[r] - filled[r]
            if state[r] == 0:
                if running + len(chunks) >= max_seqs or free < rest + waste:
                    break
                if sched.reserve_output:
                    if granted + granting + prompt[r] + left[r] + 1 + waste > cap:
                        break
                    granting += prompt[r] + left[r] + 1 + waste
                # SGLang's check, skipped where the free KV holds every output still owed (it then passes)
                new = (left[r] + 1.0, float(prompt[r]))
                if reserve and free - rest <= owed + pending + new[0] + top:
                    fits = None
                    if dec is not None:
                        others = [(left[x] + 1, prompt[x]) for x in filling]
                        others += [(left[x] + 1, prompt[x]) for x, _ in chunks if state[x] == 0]
                        fits = dec.fits(it, [*others, (left[r] + 1, prompt[r])], free - rest)
                    if fits is None:
                        fits = peak_fits([*held(chunks), new], free - rest)
                    if not fits:
                        break
                pending += new[0]
                free -= waste
            c = min(rest, room)
            chunks.append((r, c))
            room -= c
            free -= c
            if c < rest:
                break
        if chunks:
            pre = 0
            pairs = 0.0
            for r, c in chunks:
                pre += c
                pairs += c * filled[r] + c * (c + 1) / 2
            decoding = mixed or n_dec == 0
            dt = cost.seconds(n_dec * q, pre, q * ctx, pairs) if decoding else cost.seconds(0, pre, 0, pairs)
            batch_time += n_dec * dt if decoding else 0.0
            if decoding:
                gap(dt, n_dec)
            elif n_dec:
                pause, paused = pause + dt, max(paused, n_dec)
            joins = it + 1 if decoding else it  # the first decode step a finished prompt takes part in
            now += dt
            for r, c in chunks:
                if state[r] == 0:
                    state[r] = 1
                    running += 1
                    owe[r] = left[r] + 1.0
                    owed += owe[r]
                    if sched.reserve_output:
                        grant[r] = prompt[r] + left[r] + 1.0 + waste
                        granted += grant[r]
                    order.append(r)
                    filling.add(r)
                filled[r] += c
                prefill_kv += c
                if filled[r] >= prompt[r]:
                    queue.popleft()
                    prefill_kv -= filled[r]
                    filling.discard(r)
                    if first[r] == 0.0:
                        first[r] = now
                    steps = math.ceil(left[r] / tau) if left[r] > 0 else 0
                    start[r] = joins - 1
                    if steps:
                        state[r] = 2
                        base[r] = prompt[r] + 1 - tau * joins
                        dec_base += base[r]
                        n_dec += 1
                        heapq.heappush(heap, (joins + steps - 1, epoch[r], r))
                        if dec is not None:
                            key[r] = (left[r] + start[r] + 1, prompt[r] - start[r], r)
                            dec.add(key[r])
                    else:
                        state[r] = 3
                        done[r] = now
                        reply()
                        running -= 1
                        owed -= owe[r]
                        granted -= grant[r]
                        finished += 1
            steps_run += 1
            if decoding:
                it += 1
            pop_finished()
            continue
        if n_dec == 0:  # partial prefills hold the cache and nothing decodes: give one back
            if not preempt_one():
                raise ValueError("the KV cache cannot hold one request")
            continue
        # decode-only stretch: up to the next completion, the KV cache filling, or an admissible arrival
        k = heap[0][0] - it + 1
        grow = n_dec * tau
        k = max(1, min(k, int((cap - used) // grow)))
        tok = n_dec * q
        per_step = (
            cost.fixed
            + cost.comm(tok)
            + max(cost.weights(tok), cost.gemms(tok, 0))
            + cost.attention * q * ctx
            + cost.draft(n_dec)
        )
        slope = cost.attention * q * grow

        def total(steps: int, per_step: float = per_step, slope: float = slope, seqs: int = n_dec) -> float:
            return cost.stretch(steps, per_step, slope, seqs)

        if not queue and nxt < n_req and total(k) > times[nxt] - now:
            # the first step count whose time reaches the next arrival: the root of a quadratic in the count
            target = times[nxt] - now
            linear = max(per_step, cost.host(n_dec)) - slope / 2  # the host's floor: an estimate, refined below
            if slope > 0:
                root = (-linear + math.sqrt(linear * linear + 2 * slope * target)) / slope
            else:
                root = target / max(per_step, cost.host(n_dec))
            hit = min(k, max(1, math.ceil(root)))
            while hit > 1 and total(hit - 1) >= target:  # floating-point rounding of the root, either way
                hit -= 1
            while hit < k and total(hit) < target:
                hit += 1
            k = hit
        dt = total(k)
        batch_time += n_dec * dt
        gap(dt / k, n_dec * k)
        now += dt
        it += k
        steps_run += k
        pop_finished()
    t0 = times[0] if times else 0.0
    duration = now - t0
    tpot = [(done[r] - first[r]) / (outputs[r] - 1) for r in range(n_req) if outputs[r] > 1]
    return Outcome(
        ttft=[first[r] - times[r] + sched.overhead for r in range(n_req)],
        tpot=tpot,
        e2e=[done[r] - times[r] + sched.overhead for r in range(n_req)],
        duration=duration,
        prompt_tokens=sum(prompts),
        output_tokens=sum(outputs),
        steps=steps_run,
        preemptions=preempted,
        mean_batch=batch_time / duration if duration > 0 else 0.0,
        itl=gaps,
    )


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
            return " / ".join(format_duration(v) for v in values.values()) + f" ({' / '.join(values)})"

        rows = [
            (
                ("offered", f"{self.rate:,.4g} req/s (Poisson, seed {self.seed}, {self.requests:,} requests)")
                if self.concurrency is None
                else (
                    "offered",
                    f"{self.concurrency:,} concurrent clients (closed loop, {self.requests:,} requests): "
                    f"{self.rate:,.4g} req/s",
                )
            ),
            ("lengths", f"prompt {self.prompt}, output {self.output}"),
            ("formats", f"{self.weights_format} weights, {self.kv_dtype} KV cache"),
            (
                "engine",
                f"{self.replicas} replica(s); KV {self.kv_capacity_tokens:,} tokens, "
                f"max_num_seqs {self.max_num_seqs}, budget {self.token_budget:,}",
            ),
            (
                "throughput",
                f"{self.requests_per_second:,.3g} req/s, {self.output_tokens_per_second:,.0f} output "
                f"tok/s ({self.output_tokens_per_second_per_gpu:,.0f} per GPU)",
            ),
            ("TTFT", ps(self.ttft_seconds)),
            ("TPOT", ps(self.tpot_seconds)),
            ("end-to-end", ps(self.e2e_seconds)),
            ("batch", f"{self.mean_batch:,.1f} decoding on average; {self.preemptions:,} preemptions"),
        ]
        if self.slo is not None:
            verdict = (
                "met"
                if self.slo_met
                else "missed (" + ", ".join(f"{k} ×{v:.2f}" for k, v in self.slo_ratios.items() if v > 1) + ")"
            )
            rows.append(("SLO", f"{self.slo}: {verdict}"))
        if self.max_rate is not None:
            rows.append(("largest rate meeting SLO", f"{self.max_rate:,.3g} req/s"))
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
