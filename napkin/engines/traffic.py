"""Traffic through a continuous-batching engine: an iteration-level scheduler model, seeded and deterministic.

One replica runs engine *steps*. Each step runs every decoding sequence one token (``tokens_per_step`` with
speculative decoding) plus prompt chunks, first come first served, up to a token budget (vLLM
``max_num_batched_tokens``; Agrawal et al. 2024, Sarathi-Serve, arXiv:2403.02310 §4: chunked prefill); at most
``max_seqs`` sequences run at once (``max_num_seqs``). A waiting request is admitted only when the free KV
cache holds its whole prompt (vLLM V0 ``BlockSpaceManager.can_allocate``; SGLang's scheduler does the same);
when the decoding sequences' growth finds no free KV block, the most recently admitted one is preempted and
recomputed later (vLLM ``PreemptionMode.RECOMPUTE``; Kwon et al. 2023, arXiv:2309.06180 §4.5). Iteration-level
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
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StepCost:
    """Seconds of one engine step on one GPU of a replica, as coefficients (all in seconds):

    fixed + comm(T) + max(weights(T), GEMMs) + ctx · attention + pairs · prefill_pair, where

    * T = decode + prefill tokens of the step; comm(T) = comm_fixed + comm_token · T (TP all-reduces);
    * weights(T) = dense + experts · (1 − (1 − k/E)^(T · ep_tokens)) (MoE: only the experts some token
      picked are read; ``ep_tokens`` scales T to the tokens the expert group sees under DP attention);
    * GEMMs = decode · decode_token + prefill · prefill_token;
    * ctx: cached tokens the decoding queries read, each max(KV bytes / attention bandwidth, FLOPs / rate);
    * pairs: Σ over prompt tokens of the keys they attend to (compute-bound flash attention)."""

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

    def weights(self, tokens: float) -> float:
        if self.experts <= 1 or tokens <= 0:
            return self.dense + self.experts_all
        e, k = self.experts, self.top_k
        untouched: float = (1 - k / e) ** (tokens * self.ep_tokens)
        return self.dense + self.experts_all * (1 - untouched)

    def gemms(self, decode: float, prefill: float) -> float:
        return decode * self.decode_token + prefill * self.prefill_token

    def seconds(self, decode: float, prefill: float, ctx: float, pairs: float) -> float:
        tokens = decode + prefill
        return (self.fixed + self.comm_fixed + self.comm_token * tokens
                + max(self.weights(tokens), self.gemms(decode, prefill))
                + self.attention * ctx + self.prefill_pair * pairs)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Scheduler:
    """The engine's scheduling limits on one replica."""

    token_budget: int
    max_seqs: int
    kv_tokens: int
    block: int
    tokens_per_step: float = 1.0
    step_tokens: int = 1


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


def arrivals(rate: float, n: int, seed: int) -> list[float]:
    """Poisson arrivals: exponential gaps of mean 1/rate, from a seeded generator."""
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        t += rng.expovariate(rate)
        out.append(t)
    return out


def simulate(times: list[float], prompts: list[int], outputs: list[int], cost: StepCost,
             sched: Scheduler) -> Outcome:  # fmt: skip
    """Run requests (arrival time, prompt tokens, output tokens ≥ 1) through one replica."""
    n_req = len(times)
    tau, q = sched.tokens_per_step, sched.step_tokens
    budget, max_seqs, cap = sched.token_budget, sched.max_seqs, sched.kv_tokens
    waste = sched.block / 2.0  # a running sequence wastes half a block on average (paging)
    if any(p + waste > cap for p in prompts):
        raise ValueError(f"a prompt of {max(prompts):,} tokens does not fit the KV cache ({cap:,} tokens)")
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
    n_dec = running = finished = preempted = nxt = it = 0
    dec_base = prefill_kv = 0.0
    now = batch_time = 0.0

    def pop_finished() -> None:
        nonlocal n_dec, dec_base, running, finished
        while heap and heap[0][0] < it:
            _, ep, r = heapq.heappop(heap)
            if ep != epoch[r] or state[r] != 2:
                continue
            state[r] = 3
            done[r] = now
            n_dec -= 1
            dec_base -= base[r]
            running -= 1
            finished += 1

    def preempt_one() -> bool:
        nonlocal n_dec, dec_base, running, preempted, prefill_kv
        while order:
            r = order.pop()
            if state[r] == 2:
                made = min(left[r], int(tau * (it - 1 - start[r])))
                n_dec -= 1
                dec_base -= base[r]
                prompt[r] += 1 + made  # recompute: the prompt and what was generated
                left[r] = max(left[r] - made - 1, 0)
            elif state[r] == 1:
                prefill_kv -= filled[r]
                queue.remove(r)
            else:
                continue
            running -= 1
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
        room = budget - n_dec * q
        free = cap - used - n_dec * tau
        chunks: list[tuple[int, int]] = []
        for r in queue:
            if room <= 0:
                break
            rest = prompt[r] - filled[r]
            if state[r] == 0:
                if running + len(chunks) >= max_seqs or free < rest + waste:
                    break
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
            dt = cost.seconds(n_dec * q, pre, q * ctx, pairs)
            batch_time += n_dec * dt
            now += dt
            for r, c in chunks:
                if state[r] == 0:
                    state[r] = 1
                    running += 1
                    order.append(r)
                filled[r] += c
                prefill_kv += c
                if filled[r] >= prompt[r]:
                    queue.popleft()
                    prefill_kv -= filled[r]
                    if first[r] == 0.0:
                        first[r] = now
                    steps = math.ceil(left[r] / tau) if left[r] > 0 else 0
                    start[r] = it
                    if steps:
                        state[r] = 2
                        base[r] = prompt[r] + 1 - tau * (it + 1)
                        dec_base += base[r]
                        n_dec += 1
                        heapq.heappush(heap, (it + steps, epoch[r], r))
                    else:
                        state[r] = 3
                        done[r] = now
                        running -= 1
                        finished += 1
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
        per_step = (cost.fixed + cost.comm_fixed + cost.comm_token * tok
                    + max(cost.weights(tok), cost.gemms(tok, 0)) + cost.attention * q * ctx)  # fmt: skip
        slope = cost.attention * q * grow

        def total(steps: int, per_step: float = per_step, slope: float = slope) -> float:
            return steps * per_step + slope * steps * (steps - 1) / 2

        if not queue and nxt < n_req and total(k) > times[nxt] - now:
            target, lo, hi = times[nxt] - now, 0, k
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if total(mid) >= target else (mid, hi)
            k = hi
        dt = total(k)
        batch_time += n_dec * dt
        now += dt
        it += k
        pop_finished()
    t0 = times[0] if times else 0.0
    duration = now - t0
    tpot = [(done[r] - first[r]) / (outputs[r] - 1) for r in range(n_req) if outputs[r] > 1]
    return Outcome(
        ttft=[first[r] - times[r] for r in range(n_req)], tpot=tpot, e2e=[done[r] - times[r] for r in range(n_req)],
        duration=duration, prompt_tokens=sum(prompts), output_tokens=sum(outputs), steps=it, preemptions=preempted,
        mean_batch=batch_time / duration if duration > 0 else 0.0,
    )  # fmt: skip


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile, linear between closest ranks (numpy's default), q in (0, 100)."""
    if not values:
        return math.nan
    v = sorted(values)
    pos = (len(v) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)
