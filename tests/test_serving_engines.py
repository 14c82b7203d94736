"""Serving as engines run it: stacks, engine KV capacity against start-up logs, formats, the scheduler model,
traffic, serve-plan, and bad input."""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import napkin
from napkin.api import get_hardware
from napkin.cli import app
from napkin.domain.model import Model
from napkin.engines.load import Workload, run, service_rate, step_cost
from napkin.engines.replica import Replica
from napkin.engines.serving import KvDtype, WeightFormat, kv_bytes_per_token, weight_bytes_per_param
from napkin.engines.step_cost import StepCost
from napkin.engines.traffic import Scheduler, simulate
from napkin.engines.traffic_result import Lengths, percentile, weighted_percentile
from napkin.systems.presets import get_preset
from napkin.systems.serving_stack import get_serving, get_stack, stack_names

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
GiB = 2**30
QWEN2_7B = Model(
    layers=28,
    hidden=3584,
    heads=28,
    kv_heads=4,
    ffn=18944,
    vocab=152064,
    mlp="swiglu",
    norm="rmsnorm",
    tied_embeddings=False,
    qkv_bias=True,
)


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "100"})
    return result.exit_code, result.stdout, result.stderr


# ------------------------------------------------------------------------------------------- stacks


def test_built_in_stacks_cite_every_value_they_set() -> None:
    assert {"vllm", "sglang", "tensorrt-llm", "gpt-fast", "ideal"} <= set(stack_names())
    for name in ("vllm", "sglang", "tensorrt-llm", "gpt-fast"):
        profile = get_stack(name)
        covered = {c.strip() for s in profile.sources for c in (s.covers or "").split(",")}
        for value in ("decode", "prefill", "attention_bandwidth", "iteration_seconds", "memory_rule"):
            assert value in covered, (name, value)


def test_engine_defaults_are_the_engines_own() -> None:
    vllm, sglang, trt = (get_serving(n) for n in ("vllm", "sglang", "tensorrt-llm"))
    # vllm/config CacheConfig: gpu_memory_utilization 0.9, block_size 16; arg_utils: 8192 tokens, 1024 seqs (H100)
    assert (vllm.memory_fraction, vllm.block_size, vllm.max_num_batched_tokens, vllm.max_num_seqs) == (
        0.9,
        16,
        8192,
        1024,
    )
    a100 = vllm.for_device("a100-sxm-80gb", 79.25 * GiB)  # "a100" in the name: 2048 tokens, 256 sequences
    assert (a100.max_num_batched_tokens, a100.max_num_seqs) == (2048, 256)
    assert vllm.for_device("l4", 22 * GiB).max_num_seqs == 256  # below 70 GiB
    # sglang server_args: mem_fraction_static 0.88 / 0.87 / 0.85 / 0.81 / 0.79 at TP 1 / 2 / 4 / 8 / 16
    assert [sglang.fraction(t) for t in (1, 2, 4, 8, 16)] == [0.88, 0.87, 0.85, 0.81, 0.79]
    # TensorRT-LLM KvCacheConfig: free_gpu_memory_fraction 0.9, tokens_per_block 32
    assert (trt.memory_fraction, trt.block_size, trt.memory_rule) == (0.9, 32, "free-fraction")


@pytest.mark.parametrize(
    ("fraction", "logged_tokens"),
    [(0.25, 93_872), (0.5, 464_848)],  # dennislee22/vLLM-benchmarking@b474d1e, vLLM 0.10.1.1, A100 80GB, Qwen2-7B
)
def test_vllm_kv_capacity_matches_its_start_up_log(fraction: float, logged_tokens: int) -> None:
    replica = Replica(QWEN2_7B, get_hardware("a100-sxm-80gb"), get_serving("vllm").for_device("a100", 1.0))
    assert replica.kv_tokens(fraction) == pytest.approx(logged_tokens, rel=0.05)


def test_kv_capacity_is_blocks_of_the_engines_size() -> None:
    for name in ("vllm", "tensorrt-llm"):
        stack = get_serving(name)
        tokens = Replica(get_preset("llama3.1-8b").model, get_hardware("h100"), stack).kv_tokens()
        assert tokens > 0 and tokens % stack.block_size == 0


# ------------------------------------------------------------------------------------------- formats


def test_fp4_and_grouped_int4_bytes_per_weight() -> None:
    assert weight_bytes_per_param(WeightFormat.nvfp4) == 0.5 + 1 / 16  # E2M1 + fp8 scale per 16
    assert weight_bytes_per_param(WeightFormat.mxfp4) == 0.5 + 1 / 32  # E2M1 + E8M0 per 32 (OCP MX v1.0)
    assert weight_bytes_per_param(WeightFormat.int4, 32) == 0.5 + 2 / 32  # gpt-fast int4 g32
    assert weight_bytes_per_param(WeightFormat.int4) == 0.5 + 2 / 128


def test_kv_int8_and_fp4_carry_their_scales() -> None:
    model = get_preset("llama2-70b").model  # 80 layers × 8 KV heads × 128
    assert kv_bytes_per_token(model, KvDtype.int8) == 2 * 80 * 8 * 128 * (1 + 2 / 128)
    assert kv_bytes_per_token(model, KvDtype.fp4) == 2 * 80 * 8 * 128 * (0.5 + 1 / 16)


def test_fp4_weights_run_fp4_matmuls_only_where_the_device_has_them() -> None:
    blackwell = napkin.inference(model="llama3.1-70b", hardware="b200", weights="nvfp4", context="4k")
    hopper = napkin.inference(model="llama3.1-70b", hardware="h100", weights="nvfp4", context="4k")
    assert not blackwell.warnings or "fp4" not in " ".join(blackwell.warnings)
    assert any("dequantised to bf16" in w for w in hopper.warnings)


# ------------------------------------------------------------------------------ inference, whole batch


def test_inference_prints_capacity_as_an_engine_logs_it() -> None:
    r = napkin.inference(model="llama3.1-8b", hardware="h100", prompt=1000, output=200, batch=32)
    assert r.stack == "vllm"
    assert (
        r.capacity_line()
        == f"KV cache: {r.kv_capacity_tokens:,} tokens, max concurrency {r.max_concurrency:,.2f}× at 1,200"
    )
    assert r.max_concurrency == pytest.approx(r.kv_capacity_tokens / 1200)
    # the whole batch: prefill then decode, total tokens over total time
    assert r.batch_seconds == pytest.approx(r.prefill_seconds + r.decode_seconds)
    assert r.total_tokens_per_second == pytest.approx(32 * 1200 / r.batch_seconds)
    assert r.prefill_tokens_per_second > r.decode_tokens_per_second  # prefill is compute-bound, decode is not


def test_an_engine_decodes_slower_than_the_bandwidth_roofline() -> None:
    ideal = napkin.inference(model="llama3.1-8b", hardware="h100", prompt=2048, output=128, stack="ideal")
    engine = napkin.inference(model="llama3.1-8b", hardware="h100", prompt=2048, output=128)
    assert engine.decode_seconds_per_token > ideal.decode_seconds_per_token >= ideal.decode_floor_seconds


def test_gpt_fast_batch_1_llama2_7b_against_its_readme() -> None:
    """pytorch-labs/gpt-fast@32971d3 README: Llama-2-7B bf16, A100 80GB (330 W), batch 1: 104.9 tokens/s
    (a calibration row of the gpt-fast stack's fit: napkin is 15 % slow on it; the fit's mean error is 12 %)."""
    r = napkin.inference(model="llama2-7b", hardware="a100-sxm-80gb", prompt=5, output=200, stack="gpt-fast")
    assert r.tokens_per_second_per_user == pytest.approx(104.9, rel=0.2)


# ------------------------------------------------------------------------------------- the scheduler

COST = StepCost(
    fixed=1e-3,
    comm_fixed=0.0,
    comm_token=0.0,
    dense=5e-3,
    experts_all=0.0,
    experts=1,
    top_k=1,
    ep_tokens=1.0,
    decode_token=2e-6,
    prefill_token=2e-5,
    attention=1e-8,
    prefill_pair=1e-10,
)


def _run(rate: float, n: int = 400, seed: int = 0, kv: int = 200_000, seqs: int = 256) -> list[float]:
    rng = random.Random(seed)
    t, times = 0.0, []
    for _ in range(n):
        t += rng.expovariate(rate)
        times.append(t)
    prompts = [rng.randint(100, 1000) for _ in range(n)]
    outputs = [rng.randint(1, 200) for _ in range(n)]
    o = simulate(times, prompts, outputs, COST, Scheduler(token_budget=2048, max_seqs=seqs, kv_tokens=kv, block=16))
    return [percentile(o.ttft, 50), percentile(o.tpot, 50), percentile(o.e2e, 99), o.duration]


def test_the_scheduler_is_deterministic() -> None:
    assert _run(20.0) == _run(20.0)
    assert _run(20.0, seed=1) != _run(20.0)


def test_one_request_alone_takes_prefill_then_its_decode_steps() -> None:
    o = simulate([0.0], [500], [11], COST, Scheduler(token_budget=2048, max_seqs=8, kv_tokens=10_000, block=16))
    prefill = COST.seconds(0, 500, 0, 500 * 501 / 2)
    assert o.ttft[0] == pytest.approx(prefill)
    decode = sum(COST.seconds(1, 0, 501 + j, 0) for j in range(10))  # 10 more tokens, the cache growing by one
    assert o.e2e[0] == pytest.approx(prefill + decode)


def test_a_paused_decode_lengthens_one_gap_not_the_median_inter_token_latency() -> None:
    """Mixed prefill off (SGLang): a second prompt's prefill step pauses the first request's decoding once. Its
    TPOT (mean gap) grows by the pause / (output − 1); its median gap stays one decode step, as a streaming client
    measures ITL (bench_serving's median ITL is over every gap)."""
    sched = Scheduler(token_budget=4096, max_seqs=8, kv_tokens=20_000, block=16, mixed=False)
    o = simulate([0.0, 0.05], [200, 4000], [41, 1], COST, sched)
    step = COST.seconds(1, 0, 220, 0)
    pause = COST.seconds(0, 4000, 0, 4000 * 4001 / 2)
    assert weighted_percentile(o.itl, 50) == pytest.approx(step, rel=0.05)
    assert max(g for g, _ in o.itl) == pytest.approx(pause + step, rel=0.05)
    assert o.tpot[0] == pytest.approx(step + pause / 40, rel=0.05)
    assert sum(n for _, n in o.itl) == 40  # one gap per token after the first


@settings(max_examples=15, deadline=None)
@given(st.floats(0.5, 400.0), st.integers(0, 50))
def test_every_request_finishes_after_its_first_token(rate: float, seed: int) -> None:
    rng = random.Random(seed)
    n = 200
    t, times = 0.0, []
    for _ in range(n):
        t += rng.expovariate(rate)
        times.append(t)
    prompts = [rng.randint(1, 1500) for _ in range(n)]
    outputs = [rng.randint(1, 300) for _ in range(n)]
    o = simulate(times, prompts, outputs, COST, Scheduler(token_budget=1024, max_seqs=64, kv_tokens=30_000, block=16))
    assert len(o.e2e) == n and o.output_tokens == sum(outputs)
    assert all(0 < f <= e for f, e in zip(o.ttft, o.e2e, strict=True))


def test_queueing_shows_past_capacity() -> None:
    light, heavy = _run(2.0), _run(400.0)
    assert heavy[0] > 10 * light[0]  # median TTFT: the queue
    assert heavy[2] > 3 * light[2]  # P99 end-to-end


def test_a_small_cache_preempts_and_still_finishes_every_request() -> None:
    rng = random.Random(3)
    n = 300
    prompts = [rng.randint(200, 400) for _ in range(n)]
    outputs = [rng.randint(100, 400) for _ in range(n)]
    o = simulate(
        [0.0] * n, prompts, outputs, COST, Scheduler(token_budget=2048, max_seqs=256, kv_tokens=8_000, block=16)
    )
    assert o.preemptions > 0
    assert len(o.e2e) == n and all(e > 0 for e in o.e2e)
    assert o.output_tokens == sum(outputs)


def test_a_stack_that_reserves_whole_outputs_never_preempts() -> None:
    """TensorRT-LLM's GUARANTEED_NO_EVICT: the same burst that preempts above runs with none, every request granted
    its prompt, its whole output and half a block at admission; the grants never exceed the cache, so no more
    than 8,000 / (200 + 100 + 8) of the shortest requests run at once. A request larger than the cache is refused."""
    rng = random.Random(3)
    n = 300
    prompts = [rng.randint(200, 400) for _ in range(n)]
    outputs = [rng.randint(100, 400) for _ in range(n)]
    sched = Scheduler(token_budget=2048, max_seqs=256, kv_tokens=8_000, block=16, reserve_output=True)
    o = simulate([0.0] * n, prompts, outputs, COST, sched)
    assert o.preemptions == 0 and len(o.e2e) == n and o.output_tokens == sum(outputs)
    assert o.mean_batch <= 8_000 / (200 + 100 + 8)
    with pytest.raises(ValueError, match="reserves whole at admission"):
        simulate([0.0], [5_000], [3_500], COST, sched)


def test_percentiles_interpolate_like_numpy() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([10.0, 20.0], 90) == pytest.approx(19.0)


def test_speculative_decoding_tokens_per_step() -> None:
    """Leviathan et al. 2023 eq. (1): E[tokens] = (1 − α^(γ+1)) / (1 − α); α = 0.8, γ = 4 → 3.36."""
    work = Workload(
        rate=1,
        prompt=Lengths(kind="fixed", values=[10], label="10"),
        output=Lengths(kind="fixed", values=[10], label="10"),
        speculative_tokens=4,
        acceptance=0.8,
    )
    assert work.tokens_per_step() == pytest.approx((1 - 0.8**5) / 0.2)


@pytest.mark.parametrize(
    ("gamma", "alpha", "published"),
    [(7, 0.75, 3.4), (7, 0.62, 2.6), (5, 0.65, 3.1), (5, 0.53, 2.3)],
    ids=["ende-argmax", "ende-sample", "cnndm-argmax", "cnndm-sample"],
)
def test_speculative_speedup_counts_the_draft_as_leviathan_measured(gamma: int, alpha: float, published: float) -> None:
    """Leviathan et al. 2023 Table 2: T5-XXL (11B) with a T5-small (77M) draft, batch 1, walltime speedups
        3.4× / 2.6× (WMT EnDe, γ = 7) and 3.1× / 2.3× (CNN/DM, γ = 5) at the α they measured. Batch-1 decode reads
        every weight per pass, so the draft costs c ≈ 77M / 11B of a target step per pass (§3.4: speedup
        (1 − α^(γ+1)) / ((1 − α)(γc + 1))). A 7B decoder stands in for T5-XXL with a draft of the same 77/11,000 of
    its parameters; napkin's step cost must land within 20 % of each measured speedup."""
    target = Replica(get_preset("llama2-7b").model, get_hardware("h100"), get_serving("ideal"))
    n = float(target.model.params())
    lengths = Lengths(kind="fixed", values=[64], label="64")
    plain = Workload(rate=1, prompt=lengths, output=lengths)
    spec = Workload(
        rate=1, prompt=lengths, output=lengths, speculative_tokens=gamma, acceptance=alpha, draft_params=n * 77 / 11e3
    )
    base = step_cost(target, plain).seconds(1, 0, 96, 0)
    sped = step_cost(target, spec).seconds(gamma + 1, 0, (gamma + 1) * 96, 0) / spec.tokens_per_step()
    assert base / sped == pytest.approx(published, rel=0.2)
    free = Workload(rate=1, prompt=lengths, output=lengths, speculative_tokens=gamma, acceptance=alpha)
    assert step_cost(target, free).seconds(gamma + 1, 0, (gamma + 1) * 96, 0) < sped * spec.tokens_per_step()


def test_moe_decode_touches_experts_as_the_coupon_collector_says() -> None:
    mixtral = Replica(get_preset("mixtral-8x7b").model, get_hardware("h100"), get_serving("ideal"), tensor=2)
    cost = mixtral.step_cost()
    one, many = cost.weights(1), cost.weights(64)
    assert one < many  # 2 of 8 experts for one token; all 8 for 64
    assert many == pytest.approx(cost.dense + cost.experts_all, rel=1e-6)


def test_dp_attention_keeps_one_mla_latent_per_rank() -> None:
    ds = get_preset("deepseek-v3").model
    tp = Replica(ds, get_hardware("h200"), get_serving("sglang"), tensor=8)
    dp = Replica(ds, get_hardware("h200"), get_serving("sglang"), tensor=8, dp_attention=True)
    assert tp.kv_bytes_per_token_gpu() == dp.kv_bytes_per_token_gpu()  # the latent is whole on every rank …
    assert dp.ranks == 8 and tp.ranks == 1  # … but under DP attention each rank holds its own sequences


# ------------------------------------------------------------------------------------ traffic, plans


def test_traffic_cli_json_is_strict_and_meets_a_loose_slo() -> None:
    code, out, err = cli(
        "traffic",
        "--model",
        "llama3.1-8b",
        "--hardware",
        "h100",
        "--rate",
        "5/s",
        "--prompt",
        "500..1500",
        "--output",
        "100",
        "--requests",
        "300",
        "--ttft-p90",
        "5s",
        "--json",
    )
    assert code == 0, err
    data = json.loads(out, parse_constant=lambda c: pytest.fail(f"non-strict JSON {c}"))
    assert set(data["ttft_seconds"]) == {"mean", "p50", "p90", "p99"}
    assert data["slo_met"] is True and data["max_rate"] > 5


def test_serving_layouts_are_structured_by_the_flags_names() -> None:
    """The degrees a user typed come back under the flags' names in traffic's and serve-plan's JSON, as step's."""
    args = ("--model", "mixtral-8x7b", "--hardware", "h100", "--rate", "2", "--prompt", "500", "--output", "50")
    code, out, err = cli("traffic", *args, "--gpus", "4", "--expert-parallel", "4", "--requests", "50", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert (data["weights_format"], data["kv_dtype"]) == ("bf16", "bf16")  # the formats it assumed, named
    assert data["layout"] == {"tensor_parallel": 4, "pipeline_parallel": 1, "expert_parallel": 4, "dp_attention": 1}
    # the old bare spelling means the same, with a note; a degree other than 1 or TP is one line naming the flag
    code, old, err = cli("traffic", *args, "--gpus", "4", "--expert-parallel", "--requests", "50", "--json")
    assert code == 0 and json.loads(old)["layout"] == data["layout"]
    assert "--expert-parallel alone is deprecated" in err
    code, out, err = cli("traffic", *args, "--gpus", "4", "--expert-parallel", "2", "--requests", "50")
    assert code == 2 and err.startswith("napkin: error: --expert-parallel: '2' must be 1 or the replica's")
    assert len(err.strip().splitlines()) == 1
    code, out, err = cli("traffic", *args, "--gpus", "4", "--expert-parallel", "-1", "--requests", "50")
    assert code == 2 and err.startswith("napkin: error: --expert-parallel: '-1'") and len(err.splitlines()) == 1
    dense = ("--model", "llama3.1-8b", *args[2:], "--gpus", "4", "--expert-parallel", "4")
    code, out, err = cli("traffic", *dense)
    assert (
        code == 2
        and err == "napkin: error: --expert-parallel: needs a mixture-of-experts model (llama3.1-8b is dense)\n"
    )
    assert data["tensor_parallel"] == 4 and data["layout_text"] == "TP 4 · EP 4"
    code, out, err = cli("serve-plan", *args, "--ttft-p90", "2s", "--requests", "50", "--top", "1", "--json")
    assert code == 0, err
    best = json.loads(out)["deployments"][0]
    assert set(best["layout"]) == {"tensor_parallel", "pipeline_parallel", "expert_parallel", "dp_attention"}
    assert best["gpus"] == best["replicas"] * best["layout"]["tensor_parallel"] * best["layout"]["pipeline_parallel"]


def test_histogram_lengths_from_a_file(tmp_path: Path) -> None:
    hist = tmp_path / "lengths.txt"
    hist.write_text("# length weight\n100 3\n1000 1\n", encoding="utf-8")
    r = napkin.traffic(model="llama3.1-8b", hardware="h100", rate=2, prompt=f"@{hist}", output=50, requests=200)
    assert r.mean_prompt == pytest.approx((100 * 3 + 1000) / 4)
    assert r.prompt == "histogram lengths.txt"


def test_serve_plan_ranks_by_cost_and_names_the_closest_miss() -> None:
    plan = napkin.serve_plan(
        model="llama3.1-8b",
        rate=10,
        prompt=1000,
        output=200,
        ttft_p90="2s",
        tpot_p99="100ms",
        hardware="h100,a100",
        top=3,
    )
    assert plan.met and plan.deployments
    costs = [d.usd_per_hour for d in plan.deployments]
    assert costs == sorted(costs)
    assert all(d.slo_ratio <= 1 for d in plan.deployments)
    # each names the SLO closest to its target and how close, not 'binds' at a third of it
    assert all(f"at {d.slo_ratio:.0%} of its target" in d.bottleneck for d in plan.deployments)
    impossible = napkin.serve_plan(
        model="llama3.1-70b", rate=1, prompt=1000, output=100, tpot_p99="1ms", hardware="h100"
    )
    assert not impossible.met and impossible.closest is not None
    assert impossible.misses_by["tpot_p99"] > 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rate", "0"], "--rate: '0' must be above 0 requests per second"),
        (["--rate", "-3/s"], "--rate: '-3/s' must be above 0"),
        (["--rate", "fast"], "--rate: 'fast' is not understood; expected requests per second"),
        (["--rate", "inf"], "--rate: 'inf' is not a finite rate; for a burst"),
        (["--percentiles", "50,100"], "--percentiles: 100 is outside (0, 100)"),
        (["--percentiles", "0"], "--percentiles: 0 is outside (0, 100)"),
        (["--ttft-p90", "2GB"], "--ttft-p90:"),
        (["--prompt", "@/nonexistent/lengths.txt"], "--prompt:"),
        (["--prompt", "900..100"], "--prompt: '900..100' must be LOW..HIGH"),
        (["--prompt", "200-1800"], "--prompt: '200-1800': a uniform range is written 200..1800"),
    ],
)
def test_traffic_bad_input_is_one_line_exit_2(args: list[str], message: str) -> None:
    base = {"--rate": "5", "--prompt": "100", "--output": "10"}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    code, _, err = cli(
        "traffic",
        "--model",
        "llama3.1-8b",
        *[x for kv in base.items() for x in kv],
        *[a for a in args if a not in base and a not in base.values()],
    )
    assert code == 2, err
    assert err.startswith("napkin: error: ") and message in err and err.count("\n") == 1, err


def test_a_closed_loop_holds_littles_law_and_one_client_never_waits() -> None:
    """``concurrency``: N clients, each sending its next request when its last comes back. In steady state a
    closed loop with no think time keeps N requests in the system, so N = served rate × mean latency (Little's law,
    Little 1961); one client's requests never queue, so each waits only for its own prefill."""
    common = {"model": "llama3.1-8b", "hardware": "h100", "prompt": "200..1800", "output": "50..350"}
    loop = napkin.traffic(**common, concurrency=32, requests=3200)
    assert loop.concurrency == 32 and loop.rate == loop.requests_per_second and not loop.warnings
    assert loop.requests_per_second * loop.e2e_seconds["mean"] == pytest.approx(32, rel=0.03)
    alone = napkin.traffic(model="llama3.1-8b", hardware="h100", prompt=1000, output=100, concurrency=1, requests=20)
    assert alone.ttft_seconds["p99"] == pytest.approx(alone.ttft_seconds["p50"], rel=1e-9)
    split = napkin.traffic(**common, concurrency=32, requests=1600, gpus=4, tensor_parallel=1)  # 8 per replica
    assert split.requests_per_second * split.e2e_seconds["mean"] == pytest.approx(32, rel=0.03)
    more = napkin.traffic(**common, concurrency=128, requests=3200)
    assert more.output_tokens_per_second > loop.output_tokens_per_second
    assert more.ttft_seconds["mean"] >= loop.ttft_seconds["mean"]


def test_the_most_clients_meeting_an_slo_meet_it_and_a_tenth_more_do_not() -> None:
    common = {"model": "llama3.1-8b", "hardware": "h100", "prompt": "200..1800", "output": "50..350"}
    slo = {"ttft_p90": "1s", "tpot_p99": "50ms", "requests": 600}
    found = napkin.traffic(**common, **slo, concurrency=64).max_concurrency
    assert found is not None and found > 1
    assert napkin.traffic(**common, **slo, concurrency=found).slo_met
    assert not napkin.traffic(**common, **slo, concurrency=int(found * 1.1) + 1).slo_met
    assert napkin.traffic(**common, **slo, rate=5).max_concurrency is None  # a rate's search is for a rate


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rate", "5", "--concurrency", "8"], "--rate (requests per second, e.g. 20/s) or --concurrency (clients"),
        ([], "--rate (requests per second, e.g. 20/s) or --concurrency (clients"),
        (["--concurrency", "0"], "--concurrency: '0'"),
        (
            ["--concurrency", "3", "--gpus", "4", "--tensor-parallel", "1"],
            "do not split evenly over the deployment's 4",
        ),
        (["--concurrency", "100", "--requests", "20"], "--requests: 20 per scheduler is fewer than its 100 clients"),
    ],
)
def test_traffic_takes_a_rate_or_a_concurrency_not_both(args: list[str], message: str) -> None:
    code, _, err = cli("traffic", "--model", "llama3.1-8b", "--prompt", "100", "--output", "10", *args)
    assert code == 2 and err.startswith("napkin: error: ") and message in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "has no lengths with a positive weight"),
        ("100 1 2\n", ":1: expected 'length weight'"),
        ("abc 1\n", ":1: expected a whole token length"),
        ("100 0\n", "no lengths with a positive weight"),
    ],
)
def test_malformed_or_empty_histogram_is_one_line_exit_2(tmp_path: Path, content: str, message: str) -> None:
    hist = tmp_path / "h.txt"
    hist.write_text(content, encoding="utf-8")
    code, _, err = cli("traffic", "--model", "llama3.1-8b", "--rate", "1", "--prompt", f"@{hist}", "--output", "10")
    assert code == 2 and message in err and err.count("\n") == 1, err


# ------------------------------------------------------------------------------------- validation


def test_readme_serving_validation_table_is_the_scripts_output() -> None:
    sys.path.insert(0, str(EXAMPLES))
    try:
        import serving_validation
    finally:
        sys.path.remove(str(EXAMPLES))
    table = serving_validation.table()
    readme = (EXAMPLES.parent / "README.md").read_text(encoding="utf-8")
    assert table in readme, "regenerate: python examples/serving_validation.py"


def test_validation_latency_rows_run_at_the_engine_args_their_run_set() -> None:
    """A latency row is one batch generated to the end; ``max_num_seqs`` on the row (the run's own flag) caps the
    batch: four equal requests one at a time take about four times as long as four together."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        import serving_validation
    finally:
        sys.path.remove(str(EXAMPLES))
    row = {
        "model": "llama3.1-8b",
        "hardware": "h100",
        "tp": 1,
        "weights": "bf16",
        "kv_dtype": "bf16",
        "kind": "latency",
        "prompt": 128,
        "output": 512,
        "requests": 4,
    }
    together = serving_validation.predict(row, get_serving("vllm"), {})["latency_s"]
    alone = serving_validation.predict(row | {"max_num_seqs": 1}, get_serving("vllm"), {})["latency_s"]
    assert 3.5 < alone / together <= 4.0


def test_service_rate_is_what_a_full_engine_completes() -> None:
    replica = Replica(get_preset("llama3.1-8b").model, get_hardware("h100"), get_serving("vllm"))
    work = Workload(
        rate=1,
        prompt=Lengths(kind="fixed", values=[1000], label="1000"),
        output=Lengths(kind="fixed", values=[200], label="200"),
        requests=2000,
    )
    full = service_rate(replica, work)
    served = run(replica, 1, Workload(rate=full * 3, prompt=work.prompt, output=work.output, requests=2000))
    completed = len(served.e2e) / served.duration
    assert completed == pytest.approx(full, rel=0.2) and math.isfinite(completed)


# ------------------------------------------------------------------------------------- bench memory


def test_bench_memory_saves_what_bandwidth_measured_uses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    monkeypatch.setenv("NAPKIN_CONFIG_DIR", str(tmp_path))
    code, _, err = cli("inference", "--model", "llama3.1-8b", "--hardware", "h100", "--bandwidth", "measured")
    assert code == 2 and "run 'napkin bench memory --hardware h100-sxm --save' first" in err
    code, out, err = cli(
        "bench",
        "memory",
        "--device",
        "cpu",
        "--size",
        "8MiB",
        "--repeats",
        "2",
        "--hardware",
        "h100",
        "--save",
        "--force",
        "--json",
    )
    assert code == 0, err
    data = json.loads(out)
    assert [r["kernel"] for r in data["records"]] == ["copy", "triad"]
    r = napkin.inference(model="llama3.1-8b", hardware="h100", bandwidth="measured", context="2k")
    assert any(data["device_name"] in s.substituted for s in r.steps)
    slow = napkin.inference(model="llama3.1-8b", hardware="h100", bandwidth="1TB/s", context="2k")
    fast = napkin.inference(model="llama3.1-8b", hardware="h100", bandwidth="3TB/s", context="2k")
    assert slow.decode_seconds_per_token > fast.decode_seconds_per_token


def test_bench_memory_bad_input_is_one_line_exit_2() -> None:
    code, _, err = cli("bench", "memory", "--size", "1KiB")
    assert code == 2 and "at least 256 KiB" in err, err
    code, _, err = cli("inference", "--model", "llama3.1-8b", "--bandwidth", "fast")
    assert code == 2 and err.startswith("napkin: error: --bandwidth:"), err


def test_a_prefill_step_pauses_decoding_when_the_engine_does_not_mix_them() -> None:
    """SGLang (enable_mixed_chunk off) runs a new prompt's prefill as its own step and the decoding sequence
    advances no token in it; vLLM's chunked prefill decodes in that same step. Both wait for the prefill's
    time, so the difference is the one decode step the mixed engine folded into it."""
    times, prompts, outputs = [0.0, 0.05], [200, 4000], [40, 2]
    mixed = simulate(times, prompts, outputs, COST, Scheduler(8192, 8, 50_000, 16))
    alone = simulate(times, prompts, outputs, COST, Scheduler(8192, 8, 50_000, 16, mixed=False))
    assert alone.e2e[0] > mixed.e2e[0]  # the first request's decoding paused for the second's prefill
    assert alone.e2e[0] - mixed.e2e[0] == pytest.approx(COST.seconds(1, 0, 220, 0), rel=0.1)
    assert get_serving("sglang").mixed_prefill is False and get_serving("vllm").mixed_prefill


def test_serve_plan_plot_draws_the_frontier(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    svg = tmp_path / "frontier.svg"
    args = [
        "serve-plan",
        "--model",
        "llama3.1-8b",
        "--rate",
        "5",
        "--prompt",
        "500",
        "--output",
        "100",
        "--ttft-p90",
        "2s",
        "--hardware",
        "h100,a100",
        "--requests",
        "200",
        "--plot",
        str(svg),
    ]
    code, _, err = cli(*args)
    assert code == 0, err
    assert svg.read_text(encoding="utf-8").lstrip().startswith("<?xml") and "frontier" in svg.read_text()
    code, _, err = cli(*args)  # an existing file is kept
    assert code == 1 and "already exists" in err
    code, _, err = cli(*args[:-1], str(tmp_path / "frontier.png"))
    assert code == 2 and "must end in .svg" in err


def test_one_stack_catalog_serves_both_sides() -> None:
    """Serving engines and training stacks share stacks/ and 'napkin stack': each kind of command refuses the
    other kind's stack in one line."""
    code, out, _ = cli("stack", "show", "vllm")
    assert code == 0 and "serving.memory_fraction" in out and "0.9" in out
    code, _, err = cli("step", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "64", "--stack", "vllm")
    assert code == 2 and "'vllm' has serving values only" in err and err.count("\n") == 1, err


def test_serve_plan_ranks_only_layouts_inference_accepts() -> None:
    """Phi-3-medium's shape (40 heads, 10 KV heads): TP 4 and 8 would give a GPU 2.5 or 1.25 KV heads, which
    inference refuses (as vLLM does); serve-plan must not rank them either."""
    shape = {"layers": 40, "hidden": 5120, "heads": 40, "kv_heads": 10, "ffn": 17920, "vocab": 32064, "mlp": "swiglu"}
    plan = napkin.serve_plan(
        **shape, rate=2, prompt=500, output=100, ttft_p90="2s", hardware="h100", requests=100, top=20
    )
    assert plan.deployments and {d.layout.tensor_parallel for d in plan.deployments} <= {1, 2}
    with pytest.raises(napkin.UsageError, match=r"must divide the model's KV heads \(10\)"):
        napkin.inference(**shape, gpus=4, prompt=500, output=100, hardware="h100")
