"""Serving accounting against worked numbers, a peer (llm-analysis) and its invariants."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner, Result

import napkin
from napkin.cli import _app_for
from napkin.engines.serving import (
    KvDtype,
    WeightFormat,
    experts_touched,
    kv_bytes_per_sequence,
    kv_bytes_per_token,
    weights_bytes,
)
from napkin.systems import profiles
from napkin.systems.presets import get_preset

H100 = profiles.resolve("h100").profile
LLAMA3_70B = get_preset("llama3-70b").model


def _invoke(args: list[str], env: dict[str, str] | None = None) -> Result:
    """napkin ARGS in-process, the app built for them as ``napkin`` builds it."""
    return CliRunner().invoke(_app_for(args), args, env=env)


def test_llama2_70b_gqa_kv_cache_is_320_kib_per_token() -> None:
    model = get_preset("llama2-70b").model
    assert kv_bytes_per_token(model, KvDtype.bf16) == 2 * 80 * 8 * 128 * 2 == 327_680
    assert kv_bytes_per_token(model, KvDtype.fp8) == 163_840
    # the same shape with multi-head attention (n_kv = 64) caches 8× more
    mha = model.model_copy(update={"kv_heads": None})
    assert kv_bytes_per_token(mha, KvDtype.bf16) == 2_560 * 1024


def test_deepseek_v3_mla_caches_the_latent_and_the_rope_key() -> None:
    model = get_preset("deepseek-v3").model
    assert kv_bytes_per_token(model, KvDtype.bf16) == (512 + 64) * 61 * 2 == 70_272
    # TP does not split the latent: every rank keeps all of it
    result = napkin.kv_cache(model="deepseek-v3", context="4k", batch=2, tensor_parallel=8)
    assert result.kv_cache_bytes_per_gpu == result.kv_cache_bytes == 2 * 4096 * 70_272


def test_new_presets_match_published_parameter_counts() -> None:
    assert get_preset("llama3.1-8b").params == 8_030_261_248
    assert get_preset("llama3.1-70b").params == 70_553_706_496
    assert get_preset("mistral-7b").params == 7_241_732_096
    assert get_preset("qwen2.5-72b").params == pytest.approx(72.7e9, rel=1e-3)  # 72,706,203,648
    ds = get_preset("deepseek-v3")
    # 671B total, 37B active (arXiv:2412.19437 §1); napkin omits the 58 × 256 gate biases (1.5e-5 %)
    assert ds.params == pytest.approx(671e9, rel=1e-3)
    assert ds.active_params == pytest.approx(37e9, rel=0.02)


def test_llama3_70b_weights_in_bf16_and_int4() -> None:
    assert weights_bytes(LLAMA3_70B, WeightFormat.bf16) == 2 * 70_553_706_496 == 141_107_412_992
    embeddings = 2 * 128_256 * 8192 + 8192  # input table, LM head, final norm: kept 16-bit
    blocks = 70_553_706_496 - embeddings
    int4 = blocks * (0.5 + 2 / 128) + 2 * embeddings
    assert weights_bytes(LLAMA3_70B, WeightFormat.int4) == pytest.approx(int4, rel=1e-12)
    assert int4 == pytest.approx(39.50e9, rel=1e-3)  # ≈ 39.5 GB: fits one 80 GB H100, bf16 (141 GB) does not
    assert napkin.inference(model="llama3-70b", weights="int4", context="8k").max_batch > 0
    assert napkin.inference(model="llama3-70b", weights="bf16", context="8k").max_batch == 0


def test_decode_floor_is_bytes_over_bandwidth() -> None:
    r = napkin.inference(model="llama3-70b", gpus=8, hardware="h100", prompt=2048, output=512, stack="ideal")
    kv_one = kv_bytes_per_sequence(LLAMA3_70B, 2048 + 256, KvDtype.bf16) / 8
    assert r.decode_floor_seconds == pytest.approx((141_107_412_992 / 8 + kv_one) / 3.35e12, rel=1e-12)
    assert r.decode_floor_seconds == pytest.approx(5.29e-3, rel=2e-3)  # ≥ 5.27 ms of weights alone
    assert r.decode_bound == "memory-bound"
    # weights-only crossover: b* = ridge × bytes per weight / 2 × efficiency = 295 × 2 / 2 × 0.5 ≈ 148
    assert r.crossover_batch_weights_only == math.ceil(989.5e12 * 0.5 / 3.35e12)


@pytest.mark.parametrize(
    ("tp", "shape", "prefill_ms", "decode_ms", "kv_mb"),
    [
        (2, {"layers": 80, "hidden": 8192, "heads": 64, "ffn": 22016}, 113.33, 33.85, 713.03),
        (1, {"layers": 32, "hidden": 4096, "heads": 32, "ffn": 11008}, 22.41, 6.73, 285.21),
    ],
)
def test_llama_1_matches_llm_analysis_ideal_inference(
    tp: int, shape: dict[str, Any], prefill_ms: float, decode_ms: float, kv_mb: float
) -> None:
    """cli99/llm-analysis examples/llama/outputs_infer_ideal (A100-SXM-80GB, fe = hbme = 1, prompt 512,
    32 generated, batch 1): napkin's times within 3.5 %, the KV cache to the byte. TP 2 includes the
    all-reduces on both sides: llm-analysis's ideal run moves them at the full 300 GB/s of NVLink 3
    (gpu_configs/a100-sxm-80gb.json, intra-node efficiency 1), napkin at the dgx-a100 cluster's measured
    ~200 GB/s; prefill +3.1 %, decode −0.5 %. TP 1: −0.3 %, +0.2 %."""
    r = napkin.inference(
        **shape,
        vocab=32000,
        mlp="swiglu",
        norm="rmsnorm",
        tied_embeddings=False,
        gpus=tp,
        hardware="a100-sxm-80gb",
        prompt=512,
        output=32,
        efficiency=1,
        stack="ideal",
    )
    assert r.ttft_seconds * 1e3 == pytest.approx(prefill_ms, rel=0.035)
    assert r.decode_seconds_per_token * 1e3 == pytest.approx(decode_ms, rel=0.035)
    assert round(r.kv_cache_bytes_per_gpu / 1e6, 2) == kv_mb


def test_sliding_window_and_paged_rounding() -> None:
    mistral = get_preset("mistral-7b").model
    per_token = kv_bytes_per_token(mistral, KvDtype.bf16)
    assert kv_bytes_per_sequence(mistral, 32768, KvDtype.bf16) == 4096 * per_token  # the rolling buffer
    assert kv_bytes_per_sequence(mistral, 1000, KvDtype.bf16) == 1000 * per_token
    assert kv_bytes_per_sequence(mistral, 1000, KvDtype.bf16, block=16) == 1008 * per_token
    assert napkin.kv_cache(model="llama3-8b", context=1000, paged=True).block_size == 16


def test_moe_decode_reads_the_experts_the_batch_touches() -> None:
    mixtral = get_preset("mixtral-8x7b").model
    assert experts_touched(mixtral, 1) == pytest.approx(2)
    assert experts_touched(mixtral, 64) == pytest.approx(8, rel=1e-6)
    one = napkin.inference(model="mixtral-8x7b", context="4k", batch=1)
    many = napkin.inference(model="mixtral-8x7b", context="4k", batch=64)
    assert one.decode_bytes_per_step < many.decode_bytes_per_step


@given(st.integers(1, 64), st.integers(1, 64))
def test_tp_divides_kv_heads_until_kv_heads_then_replicates(a: int, b: int) -> None:
    for t in (1, 2, 4, 8, 16, 32, 64):
        r = napkin.kv_cache(model="llama3-70b", context=a * 64, batch=b, tensor_parallel=t)
        assert r.kv_cache_bytes_per_gpu == pytest.approx(r.kv_cache_bytes * max(8 / t, 1) / 8, rel=1e-12)
        assert r.kv_heads_per_gpu == max(8 / t, 1)


@given(st.integers(256, 64_000), st.integers(256, 64_000))
def test_more_context_fits_fewer_sequences(c1: int, c2: int) -> None:
    short, long = sorted((c1, c2))
    a = napkin.inference(model="llama3-8b", context=short, output=128)
    b = napkin.inference(model="llama3-8b", context=long, output=128)
    assert a.max_batch >= b.max_batch
    assert a.max_context == b.max_context  # at batch 1, the longest context does not depend on the asked one


def test_fp8_kv_doubles_the_sequences_that_fit() -> None:
    bf16 = napkin.inference(model="llama3.1-70b", gpus=2, context="8k", weights="fp8")
    fp8 = napkin.inference(model="llama3.1-70b", gpus=2, context="8k", weights="fp8", kv_dtype="fp8")
    assert fp8.max_batch in (2 * bf16.max_batch, 2 * bf16.max_batch + 1)


def test_cost_and_energy_follow_price_and_throughput() -> None:
    """$ per 1M tokens is proportional to the price and inversely to the throughput; energy per token likewise to
    the board power (H100: 700 W); a bigger batch (more tokens/s per GPU) costs less per token."""
    args = {"model": "llama3.1-70b", "gpus": 8, "prompt": "2k", "output": 512}
    r = napkin.inference(**args, batch=64, price=2)
    small = napkin.inference(**args, batch=8, price=2)
    assert r.usd_per_million_tokens is not None and r.joules_per_output_token is not None
    assert napkin.inference(**args, batch=64, price=4).usd_per_million_tokens == pytest.approx(
        2 * r.usd_per_million_tokens
    )
    ratio = r.tokens_per_second_per_gpu / small.tokens_per_second_per_gpu
    assert ratio > 1
    assert small.usd_per_million_tokens == pytest.approx(ratio * r.usd_per_million_tokens)
    assert small.joules_per_output_token == pytest.approx(ratio * r.joules_per_output_token)
    assert napkin.inference(model="llama3-8b", hardware="h800").usd_per_million_tokens is None  # no price known


def test_cli_json_has_the_promised_keys_and_is_strict() -> None:
    result = _invoke(
        ["inference", "--model", "llama3-70b", "--gpus", "2", "--context", "32k", "--batch", "8", "--json"]
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout, parse_constant=lambda c: pytest.fail(f"non-strict JSON {c}"))
    for key in (
        "kv_cache_bytes",
        "kv_bytes_per_token",
        "weights_bytes",
        "max_batch",
        "ttft_seconds",
        "decode_seconds_per_token",
        "tokens_per_second",
        "usd_per_million_tokens",
    ):
        assert key in data
    assert data["kv_cache_bytes"] == 8 * 32768 * 327_680
    assert "no room for one sequence" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--weights", "int3"], "--weights: 'int3' is not one of bf16, fp16, fp8, int8, int4"),
        (["--kv-dtype", "fp2"], "--kv-dtype: 'fp2' is not one of bf16, fp16, fp8, int8, fp4, fp32"),
        (["--stack", "tgi"], "--stack: unknown stack 'tgi'"),
        (["--stack", "megatron-core"], "--stack: 'megatron-core' has no serving values (it is for training)"),
        (["--group-size", "0"], "--group-size: '0' must be positive"),
        (["--gpus", "3"], "--gpus (3) must divide the model's heads (64): --tensor-parallel defaults to every GPU"),
        (["--gpus", "6", "--tensor-parallel", "3"], "--tensor-parallel (3) must divide the model's heads (64)"),
        (["--prompt", "8k", "--output", "1k", "--context", "4k"], "does not fit in --context"),
        (["--batch", "0"], "--batch: '0' must be positive"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(args: list[str], message: str) -> None:
    result = _invoke(["inference", "--model", "llama3-70b", *args])
    assert result.exit_code == 2
    assert result.stderr.startswith("napkin: error: ") and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_kv_cache_cli_and_explain() -> None:
    result = _invoke(["kv-cache", "--model", "llama3-70b", "--context", "32k", "--batch", "8", "-t", "16", "--explain"])
    assert result.exit_code == 0
    assert "85.9 GB (80 GiB)" in result.stdout
    assert "replicated 2×" in result.stdout
    assert "2 × 80 × 8 × 128" in result.stdout


def test_a_tensor_parallel_degree_alone_is_one_replica_on_that_many_gpus() -> None:
    # vLLM's --tensor-parallel-size 4 runs on 4 GPUs; napkin's --tensor-parallel 4 without --gpus does too
    for command in (
        ["inference"],
        ["traffic", "--rate", "1/s", "--prompt", "512", "--output", "64", "--requests", "50"],
    ):
        result = _invoke([*command, "--model", "llama3-70b", "--tensor-parallel", "4", "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["gpus"] == 4
    assert napkin.inference(model="llama3-8b").gpus == 1
    refused = _invoke(["inference", "--model", "llama3-70b", "--gpus", "6", "--tensor-parallel", "4"])
    assert refused.exit_code == 2


def test_the_ttft_row_says_it_is_one_prompt_alone_and_when_the_batch_s_last_comes() -> None:
    """A batch's TTFT is not one number: the row gives the first prompt's alone and the whole batch's prefill."""
    from napkin.units import format_duration

    r = napkin.inference(model="llama3.1-8b", prompt="2k", output=256, batch=32)
    rows = dict(r.rows())
    assert rows["TTFT"].startswith(f"{format_duration(r.ttft_seconds)} (one 2,048-token prompt alone")
    assert f"the batch's last at {format_duration(r.prefill_seconds)}" in rows["TTFT"]
    assert r.prefill_seconds > 20 * r.ttft_seconds  # 32 prompts take about 32 times one


@pytest.mark.parametrize(("tensor", "ok"), [(7, True), (14, True), (4, False), (2, False)])
def test_kv_heads_split_whole_over_tp_as_engines_split_them(tensor: int, ok: bool) -> None:
    """7 KV heads (28 query heads): TP 7 or 14 gives each GPU whole (or replicated) heads; TP 2 or 4 would give
    1.75 or 3.5 heads a GPU, which no engine runs (vLLM's QKVParallelLinear refuses it)."""
    shape = {"layers": 28, "hidden": 3584, "heads": 28, "kv_heads": 7, "head_dim": 128, "vocab": 150_000}
    if ok:
        assert napkin.kv_cache(**shape, context="8k", tensor_parallel=tensor).kv_heads_per_gpu == 1.0  # 7/7, 7/14 → 1
    else:
        with pytest.raises(napkin.UsageError, match=r"^tensor_parallel \(\d\) must divide the model's KV heads \(7\)"):
            napkin.kv_cache(**shape, context="8k", tensor_parallel=tensor)


def test_a_context_longer_than_prompt_and_output_says_which_sets_what() -> None:
    """--context sizes the KV cache, --prompt and --output the speed: given all three, the result says so."""
    r = napkin.inference(model="llama3.1-8b", context="8k", prompt="2k", output=100)
    assert "context 8,192 sizes each sequence's KV cache; the speed is of prompt + output = 2,148 tokens" in r.notes
    assert r.kv_bytes_per_sequence == 131_072 * 8192  # the KV cache is the context's: 128 KiB a token, bf16


def test_the_longest_context_at_batch_1_is_what_the_engine_s_capacity_holds() -> None:
    """One sequence can take the whole KV cache the engine logs, no more: both are counted in its 16-token pages
    (they differed by 3 tokens on an L4: 37,347 against 37,344)."""
    r = napkin.inference(model="llama3.1-8b", hardware="l4", context="8k")
    assert r.max_context == r.kv_capacity_tokens and r.kv_capacity_tokens % 16 == 0


def test_a_serving_context_says_where_it_came_from() -> None:
    """Issue 22: a length is never taken silently. Without --context, kv-cache and inference size each sequence
    at the model's longest context (Llama 3.1's 131,072 tokens, as vLLM's max_model_len defaults) and say so in
    the table, the JSON and first in --explain; a prompt and an output make the context their sum."""
    shown = _invoke(["kv-cache", "--model", "llama3.1-8b"], env={"COLUMNS": "80"})
    assert shown.exit_code == 0 and "1 × 131,072 tokens (the model's longest)" in shown.stdout
    data = json.loads(_invoke(["inference", "--model", "llama3.1-8b", "--json", "--explain"]).stdout)
    assert data["context"] == 131_072 and data["context_source"].startswith("the model's longest context")
    assert data["steps"][0]["quantity"] == "context" and "max_model_len" in data["steps"][0]["source"]
    summed = napkin.inference(model="llama3.1-8b", prompt=1000, output=200)
    assert (summed.context, summed.context_source) == (1200, "prompt + output")
    assert napkin.kv_cache(model="llama3.1-8b", context="8k").context_source == "given"


def test_max_concurrency_counts_a_windowed_layer_at_its_window_as_max_batch_does() -> None:
    """vLLM's 'Maximum concurrency for N tokens per request' divides the KV cache by a request's largest use, a
    sliding-window layer's at its window (vllm/v1/core/kv_cache_utils.py get_max_concurrency_for_kv_cache_config):
    gpt-oss-120b (a 128-token window on every other layer) had been given 79× beside a max batch of 149."""
    oss = napkin.inference(model="gpt-oss-120b", hardware="h100", weights="mxfp4", prompt="1k", output="1k", batch=64)
    assert math.floor(oss.max_concurrency) == oss.max_batch == 149
    dense = napkin.inference(model="llama3-70b", hardware="h100", tensor_parallel=8)
    assert dense.max_concurrency == pytest.approx(dense.kv_capacity_tokens / dense.context)
    assert math.floor(dense.max_concurrency + 1e-9) >= dense.max_batch
