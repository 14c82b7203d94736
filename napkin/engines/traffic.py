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

from napkin.engines.reserve import Decoding
from napkin.engines.step_cost import StepCost


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
