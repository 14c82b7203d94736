"""Compute accounting against published figures, and its invariants."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import napkin
from napkin.domain.choices import Recompute
from napkin.engines.compute import (
    Money,
    Throughput,
    TrainQuery,
    TrainTimeResult,
    flops_per_token,
    matmul,
    mfu,
    train_flops,
    train_time,
)
from napkin.errors import UsageError
from napkin.systems.presets import get_preset
from napkin.systems.profiles import HardwareProfile
from tests.conftest import builtin

H100 = builtin("h100")
A100 = builtin("a100")
TPU_V4 = builtin("tpu-v4")


def _time(
    params: float | None,
    tokens: float | None,
    gpus: int | None,
    seconds: float | None = None,
    mfu_value: float = 0.5,
    hw: HardwareProfile = H100,
) -> TrainTimeResult:
    return train_time(
        TrainQuery(params=params, tokens=tokens, gpus=gpus, seconds=seconds),
        hw,
        "bf16",
        Throughput(peak_flops=hw.peak("bf16"), mfu_low=mfu_value, mfu_high=mfu_value),
    )


def test_the_lecture_example_70b_15t_1024_h100_is_143_9_days() -> None:
    r = train_time(TrainQuery(params=70e9, tokens=15e12, gpus=1024), H100, "bf16", Throughput(peak_flops=989.5e12))
    assert r.flops == pytest.approx(6.3e24, rel=1e-12)
    assert (r.flops_forward, r.flops_backward) == pytest.approx((2.1e24, 4.2e24), rel=1e-12)
    assert r.cluster_flops_per_second == pytest.approx(5.066e17, rel=1e-3)
    assert r.seconds == pytest.approx(1.2435e7, rel=1e-4)
    assert round(r.days, 1) == 143.9  # 6·70e9·15e12 / (1024 × 989.5e12 × 0.5) s (PaLM App. B time formula)
    assert r.gpu_hours == pytest.approx(1024 * r.seconds / 3600)


def test_narayanan_gpt3_175b_on_1024_a100_at_140_tflops_is_34_days() -> None:
    """Narayanan et al. 2021 eq. (4): 8·T·P/(n·X) with X the achieved (hardware) FLOP/s — "34 days"."""
    r = train_time(
        TrainQuery(params=175e9, tokens=300e9, gpus=1024, recompute=Recompute.full),
        A100,
        "bf16",
        Throughput(peak_flops=312e12, achieved=140e12),
    )
    assert r.days == pytest.approx(33.9, abs=0.05)
    assert r.hardware_flops == pytest.approx(8 * 175e9 * 300e9)
    assert r.hfu == pytest.approx(140 / 312)
    plain = train_time(
        TrainQuery(params=175e9, tokens=300e9, gpus=1024), A100, "bf16", Throughput(peak_flops=312e12, achieved=140e12)
    )
    assert plain.days == pytest.approx(25.4, abs=0.05)  # the same run counted as model FLOPs (6TP/nX)


def test_palm_540b_mfu_is_45_7_without_and_46_2_with_attention() -> None:
    """PaLM App. B: 238.3K tokens/s on 6144 TPU v4 at 275 TFLOP/s."""
    assert mfu(540e9, TPU_V4, "bf16", 238.3e3 / 6144, gpus=6144).mfu == pytest.approx(0.457, abs=5e-4)
    palm = get_preset("palm-540b")
    assert mfu(540e9, TPU_V4, "bf16", 238.3e3 / 6144, model=palm.model, seq=palm.seq).mfu == pytest.approx(
        0.462, abs=5e-4
    )
    assert 6 * 540e9 + palm.model.attention_flops_per_token(palm.seq) == pytest.approx(3.28e12, rel=2e-3)  # Table 22


def test_mt_nlg_mfu_from_palm_appendix_b() -> None:
    result = mfu(530e9, A100, "bf16", 65.43e3 / 2240, gpus=2240)
    assert result.mfu == pytest.approx(0.298, abs=5e-4)


def test_llama_65b_mfu_and_duration() -> None:
    """LLaMA-65B: 380 tokens/s/GPU on 2048 A100-80GB, 1.4T tokens → MFU ≈ 47.6 %, ≈ 21 days."""
    r = mfu(65.2e9, A100, "bf16", 380, gpus=2048, tokens=1.4e12)
    assert r.mfu == pytest.approx(0.476, abs=5e-4)
    assert r.days == pytest.approx(20.8, abs=0.05)


def test_mfu_warnings_for_impossible_and_tiny_values() -> None:
    assert "above 100 %, which is impossible" in mfu(70e9, H100, "bf16", 1e5 / 8).warnings[0]
    assert "below 0.05" in mfu(70e9, H100, "bf16", 1e3 / 1024).warnings[0]
    assert mfu(70e9, H100, "bf16", 1e6 / 1024).warnings == []


def test_mfu_needs_exactly_one_throughput_source() -> None:
    with pytest.raises(UsageError, match="exactly one"):
        napkin.mfu(params="70B", gpus=8)
    with pytest.raises(UsageError, match="exactly one"):
        napkin.mfu(params="70B", gpus=8, days=1, tokens_per_second=1, tokens=1)
    with pytest.raises(UsageError, match="gpus is required") as info:
        napkin.mfu(params="70B", days=1, tokens="1T")
    assert info.value.field == "gpus"


def test_llama_2_7b_mfu_from_its_gpu_hours_needs_no_gpu_count() -> None:
    """Llama 2 (Touvron et al. 2023, Table 2): 7B trained on 2.0T tokens in 184,320 A100-80GB GPU-hours."""
    r = napkin.mfu(params=6.74e9, tokens="2T", gpu_hours=184_320, hardware="a100-sxm-80gb")
    assert r.tokens_per_second_per_gpu == pytest.approx(2e12 / (184_320 * 3600))  # 3,014 tokens/s per GPU
    assert r.mfu == pytest.approx(6 * 6.74e9 * 2e12 / (184_320 * 3600 * 312e12))  # 0.391 by 6N
    assert r.mfu == pytest.approx(0.391, abs=5e-4) and r.gpus is None and r.tokens_per_second is None
    assert r.hfu == r.mfu  # no recomputation: the same figure, not one rounded differently
    assert napkin.mfu(params=6.74e9, tokens="2T", gpu_hours=184_320, gpus=1024, hardware="a100").days == (
        pytest.approx(184_320 / 1024 / 24)
    )


def test_solving_for_gpus_rounds_up_and_meets_the_deadline() -> None:
    deadline = 90 * 86400.0
    r = _time(70e9, 15e12, None, deadline)
    assert r.solved_for == "gpus" and r.gpus == 1638  # 1024 × 143.93 / 90 = 1637.6, rounded up
    assert r.seconds <= deadline < r.seconds * r.gpus / (r.gpus - 1)


def test_solving_for_params_and_tokens() -> None:
    r = _time(None, 15e12, 1024, 143.9265938 * 86400)
    assert r.params == pytest.approx(70e9, rel=1e-6)
    r = _time(70e9, None, 1024, 143.9265938 * 86400)
    assert r.tokens == pytest.approx(15e12, rel=1e-6)


def test_bad_combinations() -> None:
    with pytest.raises(UsageError, match="give three of params, tokens, gpus and days/hours; missing: params, gpus"):
        _time(None, 15e12, None, 1e6)
    with pytest.raises(UsageError, match=re.escape("disagree: these inputs give 143.9 days at MFU 0.5, not 10.0 days")):
        _time(70e9, 15e12, 1024, 10 * 86400)
    assert _time(70e9, 15e12, 1024, 143.93 * 86400).solved_for is None


def test_mfu_range_gives_a_time_range_and_goodput_stretches_it() -> None:
    r = train_time(
        TrainQuery(params=70e9, tokens=15e12, gpus=1024),
        H100,
        "bf16",
        Throughput(peak_flops=989.5e12, mfu_low=0.35, mfu_high=0.5),
    )
    assert r.seconds_range[0] == pytest.approx(1.2435e7, rel=1e-4)
    assert r.seconds == r.seconds_range[1] == pytest.approx(1.2435e7 * 0.5 / 0.35, rel=1e-4)
    g = train_time(
        TrainQuery(params=70e9, tokens=15e12, gpus=1024), H100, "bf16", Throughput(peak_flops=989.5e12, goodput=0.9)
    )
    assert g.seconds == pytest.approx(1.2435e7 / 0.9, rel=1e-4)


def test_cost_energy_and_carbon() -> None:
    r = train_time(
        TrainQuery(params=70e9, tokens=15e12, gpus=1024),
        H100,
        "bf16",
        Throughput(peak_flops=989.5e12),
        Money(price_per_hour=2.0, pue=1.2, carbon_g_per_kwh=400),
    )
    # by hand: 6·70e9·15e12 / (989.5e12 × 0.5) s per GPU = 3,537,140 GPU-hours; × $2; × 0.7 kW (H100 SXM board
    # power, datasheet) × PUE 1.2; × 400 g CO2e per kWh
    assert r.gpu_hours == pytest.approx(3_537_140.0, rel=1e-7)
    assert r.cost_usd == pytest.approx(7_074_279.9, rel=1e-7)
    assert r.energy_kwh == pytest.approx(2_971_197.6, rel=1e-7)
    assert r.co2_tonnes == pytest.approx(1_188.479, rel=1e-6)


def test_undertrained_note() -> None:
    assert any("under-trained" in w for w in _time(175e9, 300e9, 1024).warnings)
    assert not any("under-trained" in w for w in _time(70e9, 1.4e12, 1024).warnings)


def test_attention_term_and_recompute() -> None:
    gpt3 = get_preset("gpt3-175b")
    shape, seq = gpt3.model, gpt3.seq
    fpt = flops_per_token(1.7395e11, shape, seq)
    assert fpt.attention / (6 * 1.7395e11) == pytest.approx(0.0278, abs=2e-4)  # PaLM App. B: 12·L·H·Q·T / 6N = +2.78 %
    causal = flops_per_token(1.7395e11, shape, seq, causal=True)
    assert causal.attention == pytest.approx(fpt.attention / 2)
    assert flops_per_token(7e9, recompute=Recompute.full).hardware == pytest.approx(8 * 7e9)
    t = train_flops(7e9, 1e12, recompute=Recompute.full)
    assert (t.flops, t.hardware_flops) == pytest.approx((6 * 7e9 * 1e12, 8 * 7e9 * 1e12))


def test_matmul_roofline() -> None:
    big = matmul(4096, 4096, 4096, H100, "bf16")
    assert big.flops == 2 * 4096**3
    assert big.arithmetic_intensity == pytest.approx(
        1365.3, abs=0.1
    )  # 2·4096³ / (2 B × 3·4096²) (Williams et al. 2009)
    assert big.ridge_point == pytest.approx(295.4, abs=0.1)
    assert big.bound == "compute" and big.seconds == pytest.approx(big.flops / 989.5e12)
    gemv = matmul(1, 8192, 8192, H100, "bf16")
    assert gemv.arithmetic_intensity == pytest.approx(1.0, abs=1e-3) and gemv.bound == "memory"
    assert matmul(512, 8192, 28672, H100, "bf16").arithmetic_intensity == pytest.approx(474, abs=0.5)


mfus = st.floats(min_value=0.05, max_value=1.0)
sizes = st.floats(min_value=1e8, max_value=1e12)


@given(sizes, st.floats(min_value=1e9, max_value=1e14), st.integers(min_value=1, max_value=100_000), mfus, mfus)
def test_time_is_inversely_proportional_to_mfu(n: float, d: float, g: int, m1: float, m2: float) -> None:
    t1 = _time(n, d, g, mfu_value=m1).seconds
    t2 = _time(n, d, g, mfu_value=m2).seconds
    assert t1 * m1 == pytest.approx(t2 * m2, rel=1e-9)


@settings(max_examples=60)
@given(sizes, st.floats(min_value=1e9, max_value=1e14), st.integers(min_value=1, max_value=100_000), mfus)
def test_train_time_then_mfu_then_train_time_round_trips(n: float, d: float, g: int, m: float) -> None:
    first = _time(n, d, g, mfu_value=m)
    back = mfu(n, H100, "bf16", d / (first.seconds * g), gpus=g, tokens=d)
    assert back.mfu == pytest.approx(m, rel=1e-9)
    again = _time(n, d, g, mfu_value=min(back.mfu, 1.0))  # MFU 1.0 can come back as 1 + 2^-52
    assert again.seconds == pytest.approx(first.seconds, rel=1e-9)


@settings(max_examples=60)
@given(sizes, st.floats(min_value=1e9, max_value=1e14), st.floats(min_value=3600, max_value=1e8), mfus)
def test_solved_gpus_meet_the_deadline_and_one_fewer_would_not(n: float, d: float, deadline: float, m: float) -> None:
    r = _time(n, d, None, deadline, mfu_value=m)
    assert r.seconds <= deadline * (1 + 1e-9)
    if r.gpus > 1:
        assert r.seconds * r.gpus / (r.gpus - 1) > deadline * (1 - 1e-9)
    assert math.isfinite(r.days)
