"""SGLang 0.4's scheduler as napkin models it: admission that reserves the running requests' outputs
(schedule_policy.py PrefillAdder.add_one_req_ignore_eos), a prefill step that has the whole chunk budget (mixed
chunks off), and the overlap scheduler's host work under the GPU's step (scheduler.py event_loop_overlap)."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from napkin.api import get_hardware
from napkin.api.serving import serving_fabric
from napkin.engines.replica import Replica
from napkin.engines.reserve import Decoding
from napkin.engines.traffic import Scheduler, peak_fits, simulate
from napkin.systems.presets import get_preset
from napkin.systems.serving_stack import get_serving
from tests.test_serving_engines import COST  # a step cost with round figures, shared with the scheduler tests there


def test_the_admission_check_counts_what_finishing_requests_give_back() -> None:
    """Two running requests holding 100 tokens each, 10 and 20 output tokens left: 40 tokens of growth in the
    worst case (the code counts 2 × 20 first); with 30 free it refuses, with 50 free the first one's 100 tokens
    come back before the second needs its last 20."""
    assert not peak_fits([(10.0, 100.0), (20.0, 100.0)], 30.0)
    assert peak_fits([(10.0, 100.0), (20.0, 100.0)], 50.0)
    assert peak_fits([], 1.0) and not peak_fits([(5.0, 0.0)], 5.0)


def test_reserving_outputs_admits_no_request_it_must_preempt() -> None:
    """A burst whose prompts fit the KV cache but whose outputs do not: admitted by prompt alone (vLLM) the engine
    preempts and recomputes; with SGLang's check every admitted request runs to its end."""
    rng = random.Random(3)
    n = 300
    prompts = [rng.randint(50, 400) for _ in range(n)]
    outputs = [rng.randint(50, 600) for _ in range(n)]
    base = Scheduler(token_budget=4096, max_seqs=512, kv_tokens=40_000, block=1, mixed=False)
    by_prompt = simulate([0.0] * n, prompts, outputs, COST, base)
    reserved = simulate([0.0] * n, prompts, outputs, COST, replace(base, reserve_peak=True))
    assert by_prompt.preemptions > 0
    assert reserved.preemptions == 0
    assert reserved.output_tokens == sum(outputs) and len(reserved.e2e) == n


def test_the_sorted_decoding_list_answers_as_the_check_on_every_state() -> None:
    """The decoding sequences kept sorted by fixed keys (reserve.Decoding) give peak_fits's answer: random states
    with ties, free KV on either side of each state's threshold (whole and half tokens), and the list after
    removals."""
    rng = random.Random(5)
    for case in range(300):
        it = rng.randint(0, 50)
        dec = Decoding()
        keys = [(it + rng.randint(1, 30), rng.randint(-it, 60), r) for r in range(rng.randint(0, 60))]
        for key in keys:
            dec.add(key)
        for key in rng.sample(keys, len(keys) // 4):
            dec.remove(key)
            keys.remove(key)
        others = [(rng.randint(1, 30), rng.randint(0, 60)) for _ in range(rng.randint(1, 5))]
        states = sorted(
            [(float(k - it), float(p + it)) for k, p, _ in keys] + [(float(a), float(b)) for a, b in others]
        )
        n, held, worst = len(states), 0.0, -math.inf  # the least free KV that passes every check, less one
        for i, (left, h) in enumerate(states):
            worst = max(worst, (states[i + 1][0] if i + 1 < n else left) * (n - i) - held)
            held += h
        for free in (worst + d for d in (-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 2.5, 3.0, 50.0)):
            assert dec.fits(it, others, free) == peak_fits(list(states), free), (case, free)


def test_the_simulation_is_the_same_with_the_sorted_list_or_without(monkeypatch: pytest.MonkeyPatch) -> None:
    """Poisson arrivals into a cache that SGLang's check keeps full: the outcome is the same whether the check runs
    on the sorted decoding list or on every running sequence listed (the list's ``fits`` declining)."""
    rng = random.Random(7)
    n = 400
    times, t = [], 0.0
    for _ in range(n):
        t += rng.expovariate(40.0)
        times.append(t)
    prompts = [rng.randint(50, 1500) for _ in range(n)]
    outputs = [rng.randint(1, 600) for _ in range(n)]
    sched = Scheduler(token_budget=2048, max_seqs=256, kv_tokens=30_000, block=1, mixed=False, reserve_peak=True)
    fast = simulate(times, prompts, outputs, COST, sched)
    monkeypatch.setattr(Decoding, "fits", lambda *args: None)
    slow = simulate(times, prompts, outputs, COST, sched)
    assert fast == slow
    assert fast.mean_batch > 20  # the check was busy: many sequences running


def test_a_prefill_step_that_pauses_decoding_has_the_whole_budget() -> None:
    """Mixed chunks off: 500 sequences decoding do not take 500 tokens of the next prompt's chunk, so a prompt
    of the whole budget (4,096 tokens) is prefilled in one step; mixed, it takes two."""
    times = [0.0] * 500 + [1.0]  # the last arrives while the 500 decode
    prompts = [10] * 500 + [4096]
    outputs = [400] * 500 + [2]
    sched = Scheduler(token_budget=4096, max_seqs=1024, kv_tokens=10**6, block=1, mixed=False)
    paused = simulate(times, prompts, outputs, COST, sched)
    mixed = simulate(times, prompts, outputs, COST, replace(sched, mixed=True))
    prefill = COST.seconds(0, 4096, 0, 4096 * 4097 / 2)
    decode = COST.seconds(500, 0, 500 * 400, 0)  # at most one decode step in flight when it arrives
    assert prefill <= paused.ttft[-1] <= prefill + decode
    without = simulate(times[:-1], prompts[:-1], outputs[:-1], COST, sched)
    assert paused.steps - without.steps == 1  # one prefill step; its second token rides a decode step
    # mixed: 3,596 tokens alongside the 500 decoding, then the last 500 in a second step
    assert mixed.ttft[-1] > COST.seconds(500, 3596, 0, 0) + COST.seconds(500, 500, 0, 0)


def _replica(stack_update: dict[str, object]) -> Replica:
    hw = get_hardware("h200-sxm")
    return Replica(
        get_preset("llama3.1-70b").model,
        hw,
        get_serving("sglang").model_copy(update=stack_update),
        tensor=4,
        weights="bf16",
        kv="bf16",
        fabric=serving_fabric(hw, 4),
    )


def test_the_overlap_scheduler_runs_the_host_s_step_cost_under_the_gpu_s() -> None:
    """SGLang 0.4 schedules step n + 1 while the GPU runs step n: a step costs max(host, GPU), where SGLang 0.3.0
    (no overlap scheduler) paid host + GPU. Llama-3.1 70B at TP 4 on H200 reads 35 GB of weights per GPU a step,
    about 10 ms, more than the 2 ms of host work, which disappears."""
    overlap, serial = _replica({}).step_cost(), _replica({"overlap_schedule": False}).step_cost()
    host = get_serving("sglang").iteration_seconds + get_serving("sglang").tp_step_seconds
    gpu = serial.seconds(1, 0, 500, 0) - host
    assert gpu > host
    assert overlap.seconds(1, 0, 500, 0) == pytest.approx(gpu)
    assert serial.seconds(1, 0, 500, 0) == pytest.approx(gpu + host)
    # a step shorter than the host's work costs the host's work
    tiny = replace(overlap, dense=1e-4, comm_fixed=0.0, comm_pieces=())
    assert tiny.seconds(1, 0, 0, 0) == pytest.approx(host)
