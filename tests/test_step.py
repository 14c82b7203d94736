"""The step-time model and the planner: Narayanan et al. 2021 Table 1, Korthikanti et al. 2022 Table 5, the
pipeline schedule, invariants, the memory fast path, the CLI."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from napkin import api, sources
from napkin.domain.choices import Recompute, Sharding
from napkin.domain.layout import stage_layers
from napkin.domain.model import Model
from napkin.domain.workload import Workload
from napkin.engines.memory import ActivationInputs, MemoryResult, memory
from napkin.engines.planner import candidates
from napkin.engines.step import (
    BREAKDOWN,
    Knobs,
    StepModel,
    build_result,
    machine,
    pipeline_bubble,
)
from napkin.systems.cluster import find
from napkin.systems.presets import get_preset
from napkin.systems.profiles import resolve
from napkin.systems.stack import StackKnobs
from napkin.systems.stack import resolve as stack_of
from tests.conftest import Run
from tests.megatron_runs import (
    DP8_530B,
    H100_FP8,
    TABLE_1,
    TABLE_2_ZERO3,
    TABLE_4,
    TABLE_5,
    eq3_flops,
    h100_errors,
    h100_markdown,
    h100_result,
    layer_ms,
    predict,
    predict_seconds,
    table_1_errors,
    table_1_markdown,
    table_1_terms,
    table_2_zero3_markdown,
    table_2_zero3_ratios,
    table_4_markdown,
    table_5_errors,
    table_5_markdown,
)
from tests.pipeline_schedule import makespan

README = Path(__file__).resolve().parent.parent / "README.md"

#: Narayanan Table 1 with the authors' own settings (micro-batch, interleaving, DDP, unfused gradient
#: accumulation): the issue asks for 10 % per row; the mean is what the one model, unchanged, achieves.
ROW_TOLERANCE = 0.10
MEAN_TOLERANCE = 0.06
#: Korthikanti Table 5 (iteration seconds, 2022 software on the same machine).
RUN_TOLERANCE = 0.04
RUN_MEAN_TOLERANCE = 0.02
#: Megatron-Bridge's H100 FP8 runs, every release: napkin within this much of each (see the README).
H100_TOLERANCE = 0.12
#: Korthikanti §6.3's 530B at 8-way data parallelism: the all-reduce napkin under-counts (see the README).
DP8_TOLERANCE = 0.06


@pytest.mark.parametrize("row", TABLE_1, ids=lambda r: f"{r.billions:g}B")
def test_narayanan_table1_teraflops_per_gpu(row: object) -> None:
    got = predict(row)  # type: ignore[arg-type]
    published = row.teraflops  # type: ignore[attr-defined]
    assert abs(got / published - 1) <= ROW_TOLERANCE, (got, published)


def test_korthikanti_table4_layer_times_as_the_readme_says() -> None:
    """One 22B layer: napkin's forward within 1 % of Table 4, its backward slow by the TP collectives Megatron
    hides under the weight-gradient GEMMs (the README's range); the table is generated."""
    times = [layer_ms(run) for run in TABLE_4]
    forward = [f / run.forward_ms - 1 for (f, _), run in zip(times, TABLE_4, strict=True)]
    backward = [b / run.backward_ms - 1 for (_, b), run in zip(times, TABLE_4, strict=True)]
    assert max(map(abs, forward)) < 0.01
    assert min(backward) > 0 and max(backward) < 0.15
    text = " ".join(README.read_text(encoding="utf-8").split())
    assert f"slow by {min(backward):+.1%} to {max(backward):+.1%}".replace("%", " %") in text
    assert table_4_markdown() in README.read_text(encoding="utf-8")


def test_korthikanti_530b_at_8_way_data_parallelism_as_the_readme_says() -> None:
    """§6.3: 37.83 s at one replica, 39.15 s at eight (all-reduce not overlapped). napkin adds about 0.5 s of
    all-reduce where the run lost 1.3 s; the README quotes both."""
    run = TABLE_5[2]
    one, eight = predict_seconds(run, True), predict_seconds(run, True, data=8)
    error = eight / DP8_530B - 1
    assert RUN_TOLERANCE < abs(error) <= DP8_TOLERANCE  # the one Korthikanti point outside 4 %, as the README says
    lost = DP8_530B - run.selective_seconds
    text = " ".join(README.read_text(encoding="utf-8").split())
    assert (
        f"napkin predicts {eight:.2f} s ({error:+.1%}): {eight - one:.2f} s of all-reduce where the run lost "
        f"{lost:.2f} s, so this run misses the 4 % the one-replica runs meet"
    ) in text
    assert f"the run lost {lost / (eight - one):.1f} times that" in text


def test_unfused_gradient_accumulation_adds_one_read_read_write_per_micro_batch(napkin: Run) -> None:
    """Without fusion every micro-batch after the first moves the local gradients twice and the new ones once:
    (m − 1) × L × (2 × 2 B + 2 B) × N/L / (HBM × η_mem), here 8 micro-batches of an 8B model on one GPU each."""
    args = (
        "step",
        "--model",
        "llama3-8b",
        "--gpus",
        "8",
        "--global-batch",
        "64",
        "--cluster",
        "dgx-h100",
        "--sharding",
        "none",
        "--json",
    )
    fused = json.loads(napkin(*args).stdout)
    unfused = json.loads(napkin(*args, "--no-gradient-accumulation-fusion").stdout)
    assert fused["microbatches"] == 8
    cluster = find("dgx-h100").cluster
    hbm = resolve(cluster.device).profile.memory_bandwidth
    per_layer = get_preset("llama3-8b").model.params() * 6.0 / 32  # bytes per layer kernel: 0.24 GB, η_mem 0.9
    expected = 7 * 32 * per_layer / (hbm * 0.90)  # Calculon's η_mem for kernels of ≥ 100 MB (systems/a100_80g.json)
    assert unfused["breakdown"]["compute"] - fused["breakdown"]["compute"] == pytest.approx(expected, rel=1e-9)
    one = ("step", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "8", "--cluster", "dgx-h100", "--json")
    assert (
        json.loads(napkin(*one).stdout)["step_seconds"]
        == json.loads(napkin(*one, "--no-gradient-accumulation-fusion").stdout)["step_seconds"]
    )


@pytest.mark.parametrize("run", TABLE_5, ids=lambda r: r.name)
@pytest.mark.parametrize("selective", [False, True], ids=["full", "sp-selective"])
def test_korthikanti_table5_iteration_seconds(run: object, selective: bool) -> None:
    got = predict_seconds(run, selective)  # type: ignore[arg-type]
    measured = run.selective_seconds if selective else run.full_seconds  # type: ignore[attr-defined]
    assert abs(got / measured - 1) <= RUN_TOLERANCE, (got, measured)


def test_mean_errors_and_readme_tables() -> None:
    errors, errors5 = table_1_errors(), table_5_errors()
    assert sum(map(abs, errors)) / len(errors) <= MEAN_TOLERANCE
    assert sum(map(abs, errors5)) / len(errors5) <= RUN_MEAN_TOLERANCE
    readme = README.read_text(encoding="utf-8")
    for table in (table_1_markdown(), table_5_markdown(), table_2_zero3_markdown()):
        assert table in readme, "regenerate with python -m tests.megatron_runs"
    worst = max(range(len(errors)), key=lambda i: abs(errors[i]))
    text = " ".join(readme.split())
    headline = (
        f"Every Table 1 row lands within 10 % (the worst, {TABLE_1[worst].billions:g}B, {errors[worst]:+.1%}), "
        f"and the Table 5 runs within 4 % (mean {sum(map(abs, errors5)) / len(errors5):.1%})"
    )
    assert headline.replace("%)", " %)").replace("%,", " %,") in text
    assert max(map(abs, errors5)) <= RUN_TOLERANCE


def test_h100_fp8_runs_of_megatron_bridge_as_the_readme_says() -> None:
    """NVIDIA's Megatron-Bridge DGX-H100 FP8 runs with their published layouts (Llama 3 70B: +2 %, Llama 3.1
    405B on 126 layers split over 8 stages: +8 to +12 %). napkin runs the blocks' linear layers at the fp8 rate
    and the attention core and output layer at bf16, as Transformer Engine does, without its casts; the
    README's table is generated by tests.megatron_runs."""
    assert all(h100_result(run).fits for run in H100_FP8)  # "napkin runs none, as each fits without"
    errors = h100_errors()
    assert all(abs(e) <= H100_TOLERANCE for model in errors.values() for e in model), errors
    readme = README.read_text(encoding="utf-8")
    assert h100_markdown() in readme
    text = " ".join(readme.split())
    low, high = errors["llama3-70b"], errors["llama3.1-405b"]
    assert f"On Llama 3 70B napkin is off by {min(low):+.1%} to {max(low):+.1%}".replace("%", " %") in text
    assert f"it is off by {min(high):+.1%} to {max(high):+.1%}, the most against the oldest".replace("%", " %") in text
    assert max(high) == high[0]
    assert f"napkin splits them {'-'.join(map(str, stage_layers(126, 8)))} and runs" in text


def test_zero3_rows_with_the_deepspeed_stack_and_the_note_without_it() -> None:
    """Narayanan Table 2's ZeRO-3 rows with the deepspeed stack (its values fitted to the 174.6B rows): every row
    within 15 % of the published teraFLOP/s, the 529.6B rows (never fitted to) too; the measured steps' fixed
    part (time at b sequences per GPU = a + c·b) is as the README says. A stack whose collectives run at NCCL's
    full bandwidth says that ZeRO-3 across nodes is optimistic there, and what DeepSpeed reached."""
    ratios = table_2_zero3_ratios()
    assert all(0.85 <= r <= 1.15 for r in ratios), ratios
    for rows, fixed in ((TABLE_2_ZERO3[:3], 60), (TABLE_2_ZERO3[3:], 170)):
        seconds = {row.micro_batch: eq3_flops(row) / (row.gpus * row.teraflops * 1e12) for row in rows}
        per_sequence = (seconds[4] - seconds[1]) / 3
        assert seconds[1] - per_sequence == pytest.approx(fixed, rel=0.1)
    layout = {"model": "gpt3-175b", "gpus": 512, "tensor_parallel": 8, "global_batch": 512, "cluster": "dgx-a100"}
    assert sources.ZERO3_MEASURED in api.step(**layout, sharding="zero3").notes
    assert sources.ZERO3_MEASURED not in api.step(**layout, sharding="zero3", stack="deepspeed").notes
    assert api.step(model="llama3-8b", gpus=8, global_batch=16, cluster="dgx-h100", dtype="fp8").notes == []


def test_the_readme_compares_the_same_1t_layout_in_2021_and_2022() -> None:
    row, run = TABLE_1[-1], TABLE_5[-1]
    assert (row.layers, row.hidden, row.tensor, row.pipeline) == (run.layers, run.hidden, run.tensor, run.pipeline)
    assert row.batch // (row.gpus // (row.tensor * row.pipeline)) == run.batch  # 512 micro-batches per replica
    measured_2021 = eq3_flops(row) / (row.gpus * row.teraflops * 1e12)
    unfused, fused = table_1_terms(row), table_1_terms(row, fused=True)
    predicted_2022 = predict_seconds(run, selective=False)
    text = " ".join(README.read_text(encoding="utf-8").split())
    assert f"took {measured_2021:.1f} s per iteration in 2021 and {run.full_seconds:.1f} s in 2022" in text
    errors, if_fp16 = table_1_errors(), table_5_errors(fp16=True)
    assert f"over-predicted, by {min(errors):+.1%} to {max(errors):+.1%}".replace("%", " %") in text
    assert f"would run from {min(if_fp16):.1%} to {max(if_fp16):+.1%} instead".replace("%", " %") in text
    assert (
        f"napkin gives {predicted_2022:.1f} s for the 2022 run and {unfused.step_seconds:.1f} s for the 2021 one: "
        f"{unfused.step_seconds - fused.step_seconds:.1f} s of unfused gradient accumulation and {unfused.data_parallel:.1f} s of "
        "data-parallel all-reduce"
    ) in text


@st.composite
def _schedules(draw: st.DrawFn) -> tuple[int, int, int]:
    p = draw(st.integers(2, 8))
    v = draw(st.integers(1, 3))
    m = p * draw(st.integers(1, 6)) if v > 1 else draw(st.integers(p, 4 * p))
    return p, v, m


@given(
    _schedules(),
    st.floats(0.2, 2.0),
    st.floats(1.0, 3.0),
    st.floats(0.0, 0.1),
    st.floats(0.0, 0.02),
)
def test_pipeline_bubble_matches_a_replay_of_megatrons_schedule(
    shape: tuple[int, int, int], forward: float, ratio: float, logits: float, share: float
) -> None:
    """The closed-form bubble against an event replay of Megatron-LM's 1F1B and interleaved schedules with
    blocking sends: a heavier last stage (logits) and sends of up to 2 % of a forward (Table 1's are < 1 %)."""
    p, v, m = shape
    backward, transfer = ratio * forward, share * forward
    last_f, last_b = logits * forward, 2 * logits * forward
    stage = forward + backward + 2 * v * transfer
    predicted = m * (stage + last_f + last_b) + pipeline_bubble(p, v, stage)
    replayed = makespan(p, v, m, forward, backward, last_f, last_b, transfer)
    assert replayed == pytest.approx(predicted, rel=0.02)


def _llama(batch: int = 512) -> StepModel:
    cluster = find("dgx-h100").cluster
    preset = get_preset("llama3-70b")
    return StepModel(preset.model, preset.seq, batch, machine(cluster, resolve(cluster.device).profile))


def test_expert_gemms_run_as_the_stack_launches_them() -> None:
    """Transformer Engine's grouped GEMM on Hopper is one cuBLAS GEMM per expert on 4 streams (megatron-core's
    grouped_gemm_streams): 16 small experts' GEMMs cost more than one batched call of them all (a stack that states
    no streams, torchtitan's torch._grouped_mm); large ones reach the same rate either way."""
    sm = _llama()
    small = (2048.0, 768.0, 2048.0)  # Qwen3-30B-A3B's fc2 per expert at EP 8 (4,096 tokens, top 8, 16 local experts)
    assert sm.gemm(*small, 16, at_once=4) > 1.2 * sm.gemm(*small, 16)
    large = (16384.0, 8192.0, 8192.0)
    assert sm.gemm(*large, 16, at_once=4) == pytest.approx(sm.gemm(*large, 16))
    te, torch_mm = stack_of("megatron-core").profile.knobs("h100-sxm"), stack_of("torchtitan").profile.knobs("h100-sxm")
    assert (te.grouped_streams, torch_mm.grouped_streams) == (4, None)
    # a small-expert MoE (Qwen3-30B-A3B's widths): the same stack with no streams stated computes faster
    moe = Model(layers=4, hidden=2048, heads=32, kv_heads=4, ffn=6144, vocab=151_936, experts=128, top_k=8, moe_ffn=768)
    cluster = find("dgx-h100").cluster
    hw = machine(cluster, resolve(cluster.device).profile)
    k = Knobs(data_parallel=8, expert_parallel=8, sharding=Sharding.zero1)
    streamed = StepModel(moe, 4096, 64, hw, flash_attention=True, stack=te).evaluate(k)
    batched = StepModel(moe, 4096, 64, hw, flash_attention=True, stack=te.replace(grouped_streams=None)).evaluate(k)
    assert streamed.compute > batched.compute


KNOBS = st.builds(
    Knobs,
    tensor_parallel=st.sampled_from([1, 2, 4, 8]),
    pipeline_parallel=st.sampled_from([1, 2, 4, 5, 8]),
    data_parallel=st.sampled_from([1, 2, 4, 8]),
    context_parallel=st.just(1),
    expert_parallel=st.just(1),
    interleave=st.just(1),
    micro_batch=st.sampled_from([1, 2]),
    sequence_parallel=st.booleans(),
    recompute=st.sampled_from(list(Recompute)),
    sharding=st.sampled_from([Sharding.none, Sharding.zero1, Sharding.zero2, Sharding.zero3]),
    activation_offload_layers=st.just(0),  # named: builds draws a named tuple's defaulted fields too
)


@given(KNOBS)
def test_fast_memory_path_equals_the_memory_engine(k: Knobs) -> None:
    sm = _llama()
    gpus = k.tensor_parallel * k.pipeline_parallel * k.data_parallel
    layout = k.layout()
    work = Workload(seq=sm.seq, micro_batch=k.micro_batch, global_batch=sm.batch)
    engine = memory(
        sm.params,
        resolve("h100").profile,
        optimizer=sm.optimizer,
        precision=sm.precision,
        gpus=gpus,
        layout=layout,
        activations=ActivationInputs(model=sm.model, workload=work, layout=layout),
    )
    assert sm.memory_bytes(k) == pytest.approx(engine.per_gpu_bytes, rel=1e-12)


@given(KNOBS)
def test_utilisation_is_bounded_and_recomputation_is_what_separates_hfu_from_mfu(k: Knobs) -> None:
    """Every term is a time (never negative); MFU and HFU are fractions of the peak; HFU exceeds MFU exactly by
    the recomputed FLOPs (PaLM App. B), so they are equal without recomputation. (That the terms add up to the
    step is how the step is defined, not something to test.)"""
    sm = _llama()
    result = build_result(sm, k, "llama3-70b")
    assert all(v >= 0 for v in result.breakdown.values())
    assert 0 < result.mfu <= result.hfu < 1
    assert (result.hfu == result.mfu) == (k.recompute is Recompute.none)


def test_bubble_is_p_minus_1_over_v_m_of_the_compute() -> None:
    sm = _llama()
    one = sm.evaluate(
        Knobs(
            tensor_parallel=8,
            pipeline_parallel=4,
            data_parallel=16,
            sequence_parallel=True,
            recompute=Recompute.selective,
            sharding=Sharding.zero1,
        )
    )
    two = sm.evaluate(
        Knobs(
            tensor_parallel=8,
            pipeline_parallel=4,
            data_parallel=16,
            interleave=2,
            sequence_parallel=True,
            recompute=Recompute.selective,
            sharding=Sharding.zero1,
        )
    )
    m = 512 // 16
    # (p − 1)/m of a stage's time with its TP collectives and sends; the last stage's logits stay out of it
    busy = one.compute + one.tensor_parallel + one.other
    assert 0.95 * 3 / m * busy <= one.bubble < 3 / m * busy
    assert two.bubble == pytest.approx(one.bubble / 2, rel=0.02)  # v = 2 halves it (its sends double)


def test_zero3_gathers_and_reduces_layer_by_layer() -> None:
    """GPT-3 175B, TP 2 · DP 512 on DGX A100, ZeRO-3, 3 micro-batches: per micro-batch one all-gather per layer
    for the forward, one for the backward and one reduce-scatter per layer. Without prefetch all of it is
    exposed; with it, a layer exposes only what its compute cannot cover, but the first gather and the last
    reduce-scatter always are; a network that delivers less never makes the step faster."""
    cluster = find("dgx-a100").cluster
    hw = machine(cluster, resolve(cluster.device).profile)
    model = get_preset("gpt3-175b").model
    k = Knobs(tensor_parallel=2, data_parallel=512, recompute=Recompute.selective)
    m = 1536 // 512

    def exposed(prefetch: int = 1, scale_out: float = 1.0, slowdown: float = 0.0) -> float:
        knobs = StackKnobs(prefetch=prefetch, scale_out=scale_out, slowdown=slowdown)
        return StepModel(model, 2048, 1536, hw, stack=knobs).evaluate(k).data_parallel

    sm = StepModel(model, 2048, 1536, hw)
    layer_params = sm.params / 2 / 96
    gather = sm.collective("all-gather", layer_params * 2, 512, 4)  # 4 ranks of the group per node
    reduce = sm.collective("reduce-scatter", layer_params * 2, 512, 4)
    # without prefetch the traffic recurs every micro-batch: twice the batch, twice the exposed time
    twice = StepModel(model, 2048, 2 * 1536, hw, stack=StackKnobs(prefetch=0)).evaluate(k).data_parallel
    assert twice == pytest.approx(2 * exposed(prefetch=0), rel=1e-9)
    overlapped = exposed(prefetch=1)
    assert m * (gather + reduce) <= overlapped < exposed(prefetch=0)
    assert exposed(prefetch=1, scale_out=0.1) > overlapped and exposed(prefetch=1, slowdown=0.2) > overlapped
    # 96 collectives cost 18 % more than one of all the parameters: their latency, 511 ring steps each
    assert 96 * gather == pytest.approx(1.18 * sm.collective("all-gather", layer_params * 96 * 2, 512, 4), rel=0.01)


def test_compute_grows_with_the_sequence_even_for_tiny_matmuls() -> None:
    """A 1-token micro-batch costs what a tile of 16 rows costs, never more than a longer one (tile padding
    wastes math, not memory traffic)."""
    cluster = find("dgx-h100").cluster
    hw = machine(cluster, resolve(cluster.device).profile)
    model = get_preset("llama3-70b").model
    k = Knobs(tensor_parallel=4, data_parallel=128, sharding=Sharding.zero1)
    computes = [StepModel(model, seq, 512, hw).evaluate(k).compute for seq in (1, 2, 16, 64, 128, 1024, 8192)]
    assert computes == sorted(computes)
    assert computes[0] == pytest.approx(computes[1], rel=0.01)  # both padded to 16-row tiles


def test_routed_experts_sync_over_their_own_data_parallel_group() -> None:
    """Mixtral 8×7B, TP 1 · DP 64 · EP 8 on DGX H100, DDP without overlap: the dense weights all-reduce over the
    64 DP ranks, each GPU's 1/8 of the experts over the 8 ranks that hold the same experts."""
    cluster = find("dgx-h100").cluster
    preset = get_preset("mixtral-8x7b")
    sm = StepModel(
        preset.model, 4096, 512, machine(cluster, resolve(cluster.device).profile), overlap_grad_reduce=False
    )
    experts = float(preset.model.expert_params())
    assert 0.9 < experts / sm.params < 1  # nearly all of Mixtral is experts
    k = Knobs(data_parallel=64, expert_parallel=8, recompute=Recompute.full, sharding=Sharding.none)
    dense = sm.collective("all-reduce", (sm.params - experts) * sm.grad_bytes, 64, 8)
    routed = sm.collective("all-reduce", experts / 8 * sm.grad_bytes, 8, 1)  # EP ranks fill the node
    assert sm.evaluate(k).data_parallel == pytest.approx(dense + routed, rel=1e-9)


def test_tensor_parallel_comm_is_zero_without_tp_and_grows_across_nodes() -> None:
    sm = _llama()
    assert (
        sm.evaluate(
            Knobs(pipeline_parallel=8, data_parallel=64, recompute=Recompute.full, sharding=Sharding.zero1)
        ).tensor_parallel
        == 0
    )
    inside, across = (
        sm.evaluate(
            Knobs(
                tensor_parallel=t,
                data_parallel=512 // t,
                sequence_parallel=True,
                recompute=Recompute.full,
                sharding=Sharding.zero1,
            )
        ).tensor_parallel
        for t in (8, 16)
    )
    assert across > inside > 0


def test_a_saved_matmul_measurement_replaces_the_published_rate() -> None:
    cluster = find("dgx-h100").cluster
    profile = resolve(cluster.device).profile
    assert machine(cluster, profile).rate == 794.5e12
    saved = {"bf16": {"flops_per_second": "700 TFLOP/s", "date": "2026-01-01", "device": "NVIDIA H100 80GB HBM3"}}
    measured = type(profile).model_validate({**profile.model_dump(mode="json"), "measured": saved})
    hw = machine(cluster, measured)
    assert hw.rate == 700e12 and "measured" in hw.rate_source


def test_blackwell_runs_at_its_published_mamf() -> None:
    """stas00/ml-engineering's MAMF table @ 744d01e1: B200 SXM 1745.0, GB200 SXM 1822.0 TFLOP/s bf16 (4 % apart,
    where the datasheets' 2.25 and 2.5 PFLOP/s are 11 % apart)."""
    rates = {}
    for name in ("hgx-b200", "gb200-nvl72"):
        cluster = find(name).cluster
        hw = machine(cluster, resolve(cluster.device).profile)
        assert "B200 SXM and GB200 SXM rows" in hw.rate_source
        rates[cluster.device] = hw.rate
    assert rates == {"b200": 1745.0e12, "gb200": 1822.0e12}


def test_fp8_runs_at_the_fraction_of_its_peak_the_bf16_mamf_reaches() -> None:
    """The same table's FP8 rows (@ 744d01e1) measure B200 SXM 3432.5 and GB200 SXM 3615.6 TFLOP/s: napkin's fp8
    rate, the bf16 MAMF's fraction of the peak applied to the fp8 peak, is within 2 % of each. The H100's FP8 row
    (1402.6) is timed with split accumulation, the slower mode, which Transformer Engine runs in its backward GEMMs
    only: napkin's H100 fp8 rate lies above it and below the peak."""
    for name, rate in {"hgx-b200": 3432.5e12, "gb200-nvl72": 3615.6e12}.items():
        cluster = find(name).cluster
        hw = machine(cluster, resolve(cluster.device).profile, "fp8")
        assert hw.rate == pytest.approx(rate, rel=0.02), name
        assert "bf16 MAMF fraction" in hw.rate_source
    h100 = find("dgx-h100").cluster
    assert 1402.6e12 < machine(h100, resolve(h100.device).profile, "fp8").rate < 1979e12


def test_a_saved_bf16_measurement_sets_the_other_formats_share_of_their_peak() -> None:
    """A bf16 ``bench matmul --save`` of 700 TFLOP/s on an H100 (989.5 peak): fp8 runs at 700/989.5 of its peak."""
    cluster = find("dgx-h100").cluster
    profile = resolve(cluster.device).profile
    saved = {"bf16": {"flops_per_second": "700 TFLOP/s", "date": "2026-01-01", "device": "NVIDIA H100 80GB HBM3"}}
    measured = type(profile).model_validate({**profile.model_dump(mode="json"), "measured": saved})
    hw = machine(cluster, measured, "fp8")
    assert hw.rate == pytest.approx(700 / 989.5 * 1979e12, rel=1e-9) and "bench matmul" in hw.rate_source


def test_plan_layouts_all_fit_by_the_memory_engine_and_are_ranked() -> None:
    result = api.plan(model="llama3-70b", gpus=512, global_batch_tokens="4M", cluster="dgx-h100", top=5)
    assert result.considered > 1000 and 0 < result.fitting <= result.considered
    times = [r.step_seconds for r in result.layouts]
    assert len(times) == 5 and times == sorted(times)
    for r in result.layouts:
        # the capacity every command checks against: what the H100 reports to torch (85.5 GB), not the datasheet's 80
        assert r.fits and r.per_gpu_bytes <= r.memory_bytes == 85_520_809_984
        assert r.layout.tensor_parallel <= 8  # TP stays inside the NVLink domain
    assert "ZeRO-3 alone (TP 1, PP 1)" in result.explanation and "TP 16 across nodes" in result.explanation


def test_candidates_respect_divisibility() -> None:
    """Every candidate is a valid layout: pipeline stages divide the layers or are a power of two over an uneven
    split whose heaviest stage the interleave divides."""
    sm = _llama()
    layers = sm.model.layers
    pipelines = set()
    for k in candidates(sm, 512):
        assert k.tensor_parallel * k.pipeline_parallel * k.context_parallel * k.data_parallel == 512
        assert layers % k.pipeline_parallel == 0 or k.pipeline_parallel & (k.pipeline_parallel - 1) == 0
        assert (-(-layers // k.pipeline_parallel)) % k.interleave == 0 and k.pipeline_parallel * k.interleave <= layers
        assert sm.batch % (k.micro_batch * k.data_parallel) == 0
        assert sm.model.heads is not None and sm.model.heads % k.tensor_parallel == 0
        pipelines.add(k.pipeline_parallel)
    assert pipelines == {1, 2, 4, 8, 16, 32, 64}  # 512 GPUs: powers of two; 32 and 64 split 80 layers unevenly


def test_step_json_has_the_documented_fields(napkin: Run) -> None:
    r = napkin(
        "step",
        "--model",
        "llama3-70b",
        "--gpus",
        "512",
        "--global-batch-tokens",
        "4M",
        "--cluster",
        "dgx-h100",
        "-t",
        "8",
        "--pipeline-parallel",
        "4",
        "--sequence-parallel",
        "--recompute",
        "selective",
        "--sharding",
        "zero1",
        "--json",
    )
    assert r.exit_code == 0, r.stderr
    data = json.loads(r.stdout)
    for key in ("step_seconds", "mfu", "hfu", "tokens_per_second", "breakdown", "per_gpu_bytes", "fits"):
        assert key in data
    assert data["global_batch"] == 512 and data["microbatches"] == 32
    assert set(data["breakdown"]) == set(BREAKDOWN)


def test_no_overlap_grad_reduce_exposes_the_whole_gradient_all_reduce(napkin: Run) -> None:
    args = (
        "step",
        "--model",
        "llama3-8b",
        "--gpus",
        "64",
        "--global-batch",
        "64",
        "--cluster",
        "dgx-h100",
        "--sharding",
        "none",
        "--json",
    )
    overlapped = json.loads(napkin(*args).stdout)["breakdown"]["data_parallel"]
    exposed = json.loads(napkin(*args, "--no-overlap-grad-reduce").stdout)["breakdown"]["data_parallel"]
    cluster = find("dgx-h100").cluster
    sm = StepModel(get_preset("llama3-8b").model, 8192, 64, machine(cluster, resolve(cluster.device).profile))
    grads = sm.params * sm.grad_bytes  # one replica per GPU: the whole gradient, over 64 ranks on 8 nodes
    assert exposed == pytest.approx(sm.collective("all-reduce", grads, 64, 8), rel=1e-9)
    assert 0 <= overlapped < exposed
    plain = api.plan(model="llama3-8b", gpus=64, global_batch=64, cluster="dgx-h100", top=1)
    late = api.plan(model="llama3-8b", gpus=64, global_batch=64, cluster="dgx-h100", top=1, overlap_grad_reduce=False)
    assert late.layouts[0].step_seconds >= plain.layouts[0].step_seconds


def test_the_1t_row_from_the_command_line(napkin: Run) -> None:
    """Narayanan Table 1's 1T run typed as flags, its 2021 software as its stack (materialised attention,
    unfused gradient accumulation, the all-reduce after the flush): 163 teraFLOP/s per GPU published, napkin
    within 10 %."""
    r = napkin(
        "step",
        "--layers",
        "128",
        "--hidden",
        "25600",
        "--heads",
        "160",
        "--vocab",
        "51200",
        "--seq",
        "2048",
        "--dropout",
        "--gpus",
        "3072",
        "-t",
        "8",
        "--pipeline-parallel",
        "64",
        "--global-batch",
        "3072",
        "--cluster",
        "dgx-a100",
        "--recompute",
        "full",
        "--stack",
        "megatron-2021",
        "--json",
    )
    assert r.exit_code == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["achieved_flops_per_gpu"] / 1e12 == pytest.approx(163, rel=0.10)
    assert data["step_seconds"] == pytest.approx(
        eq3_flops(TABLE_1[-1]) / (3072 * predict(TABLE_1[-1]) * 1e12), rel=0.01
    )


def test_explain_wraps_under_its_own_indent() -> None:
    from napkin.results import render

    result = api.step(model="llama3-8b", gpus=8, global_batch=16, hardware="h100", flash_attention=True)
    lines = render.plain(render.explanation(result.steps, columns=80), width=80).splitlines()
    assert max(len(line) for line in lines) <= 80
    for before, line in itertools.pairwise(lines):
        if before.startswith("    source: ") and line.strip() and not line.lstrip()[0].isdigit():
            assert line.startswith(" " * len("    source: ")), line  # a source's second line sits under its first


def test_step_explain_shows_every_term(napkin: Run) -> None:
    r = napkin("step", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "16", "--hardware", "h100", "--explain")
    assert r.exit_code == 0, r.stderr
    for term in (
        "achievable matmul rate",
        "tensor-parallel comm",
        "pipeline bubble",
        "data-parallel comm",
        "optimizer step",
        "MFU",
        "fits?",
    ):
        assert term in r.stdout


def test_plan_command_prints_a_ranked_table(napkin: Run) -> None:
    r = napkin("plan", "--model", "llama3-70b", "--gpus", "512", "--global-batch-tokens", "4M", "--cluster", "dgx-h100")
    assert r.exit_code == 0, r.stderr
    assert re.search(r"^\s*1\s+TP\d", r.stdout, re.MULTILINE) and "wins with MFU" in r.stdout
    data = json.loads(
        napkin("plan", "--model", "llama3-8b", "--gpus", "64", "--global-batch", "512", "--json", "--top", "2").stdout
    )
    assert len(data["layouts"]) == 2 and data["layouts"][0]["fits"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["step", "--model", "llama3-8b", "--gpus", "16", "-t", "16", "--global-batch", "16"], "scale-up domain"),
        (
            ["step", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "4", "--global-batch-tokens", "1M"],
            "not both",
        ),
        (["plan", "--model", "llama3-8b", "--gpus", "8"], "--global-batch"),
        (
            ["plan", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "8", "--cluster", "nope"],
            "unknown cluster",
        ),
        (["step", "--gpus", "8", "--global-batch", "8"], "model is required"),
        (["plan", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "8", "--top", "0"], "--top"),
        (["step", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "8", "-H", "l4"], "'napkin cluster list'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(napkin: Run, args: list[str], message: str) -> None:
    r = napkin(*args)
    assert r.exit_code == 2
    assert r.stderr.startswith("napkin: error:") and message in r.stderr and r.stderr.count("\n") == 1


def test_train_time_uses_the_predicted_mfu_and_says_which_layout(napkin: Run) -> None:
    r = napkin(
        "train-time",
        "--model",
        "llama3-70b",
        "--tokens",
        "15T",
        "--gpus",
        "1024",
        "--cluster",
        "dgx-h100",
        "--mfu",
        "predicted",
        "--json",
    )
    assert r.exit_code == 0, r.stderr
    data = json.loads(r.stdout)
    best = api.plan(model="llama3-70b", gpus=1024, global_batch_tokens="4M", cluster="dgx-h100", top=1).layouts[0]
    assert data["mfu"] == pytest.approx(best.mfu) and data["layout_text"] == best.layout_text
    # the layout as step and plan write it in JSON: one structured object, every degree named
    assert data["layout"] == best.layout.model_dump(mode="json") and data["micro_batch"] == best.micro_batch
    assert (data["global_batch"], data["cluster"], data["seq"]) == (512, "dgx-h100", 8192)  # 4M tokens of 8k
    assert data["hardware"] == "h100-sxm"
    text = napkin(
        "train-time",
        "--model",
        "llama3-70b",
        "--tokens",
        "15T",
        "--gpus",
        "1024",
        "--cluster",
        "dgx-h100",
        "--mfu",
        "predicted",
    ).stdout
    assert f"{best.mfu:.3g} predicted (megatron-core)" in text  # the MFU row names the stack it assumed
    assert f"layout         {best.layout_text}" in text and "512 × 8,192 tokens on dgx-h100" in text
    bad = napkin("train-time", "--params", "70B", "--tokens", "15T", "--gpus", "1024", "--mfu", "predicted")
    assert bad.exit_code == 2 and "predicted needs" in bad.stderr
    base = ("train-time", "--model", "llama3-70b", "--tokens", "15T", "--gpus", "1024", "--cluster", "dgx-h100")
    for extra, message in (
        (("--achieved", "400e12"), "--achieved: give it or --mfu predicted, not both"),
        (("--recompute", "full"), "--recompute: with --mfu predicted the planner chooses"),
    ):
        bad = napkin(*base, "--mfu", "predicted", *extra)
        assert bad.exit_code == 2 and bad.stderr.startswith("napkin: error: " + message), bad.stderr
    slow = json.loads(napkin(*base, "--mfu", "predicted", "--no-flash-attention", "--no-causal", "--json").stdout)
    materialised = api.plan(
        model="llama3-70b",
        gpus=1024,
        global_batch_tokens="4M",
        cluster="dgx-h100",
        top=1,
        flash_attention=False,
        causal=False,
    ).layouts[0]
    # the default stack (megatron-core) runs FlashAttention with a causal mask: faster than materialised scores
    assert slow["mfu"] == pytest.approx(materialised.mfu) and best.mfu > materialised.mfu
    assert best.stack == "megatron-core" and data["stack"] == "megatron-core"
    extras: tuple[tuple[str, ...], ...] = (("--flash-attention",), ("--stack", "torchtitan"))
    for only in extras:  # meaningful only for a predicted MFU
        assert napkin(*base, *only).exit_code == 2


def test_plan_benchmark_example_imports() -> None:
    """examples/plan_benchmark.py is a benchmark (timing lives there, never in the suite): the suite only checks it
    still imports what it uses (mypy checks its calls); its figures are for a person to read."""
    import importlib.util

    script = Path(__file__).resolve().parent.parent / "examples" / "plan_benchmark.py"
    spec = importlib.util.spec_from_file_location("plan_benchmark", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert callable(module.main)


def test_plan_plot_draws_an_svg_and_keeps_an_existing_file(napkin: Run, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    target = tmp_path / "plan.svg"
    args = ["plan", "--model", "llama3-8b", "--gpus", "64", "--global-batch", "512", "--plot", str(target)]
    r = napkin(*args)
    assert r.exit_code == 0, r.stderr
    text = target.read_text(encoding="utf-8")
    assert text.startswith("<?xml") and "<svg" in text and "memory limit" in text
    again = napkin(*args)
    assert again.exit_code != 0 and "already exists" in again.stderr and target.read_text(encoding="utf-8") == text
    assert napkin(*args, "--force").exit_code == 0


def test_plan_plot_without_matplotlib_says_which_extra(
    napkin: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    r = napkin("plan", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "8", "--plot", str(tmp_path / "p.svg"))
    assert r.exit_code == 2 and "pip install 'napkin-math[plot]'" in r.stderr and not (tmp_path / "p.svg").exists()


def test_the_global_batch_is_required_and_never_silently_rounded(napkin: Run) -> None:
    base = ("step", "--model", "llama3-70b", "--gpus", "64", "-t", "8", "--cluster", "dgx-h100")
    missing = napkin(*base)
    assert missing.exit_code == 2 and "--global-batch (sequences) or --global-batch-tokens (e.g. 4M) is required" in (
        missing.stderr
    )
    short = napkin(*base, "--global-batch-tokens", "3")
    assert short.exit_code == 2 and "3 tokens is less than one sequence of 8,192" in short.stderr
    rounded = napkin(*base, "--global-batch-tokens", "4000000", "--json")
    assert json.loads(rounded.stdout)["global_batch"] == 488
    assert "4,000,000 tokens is 488.3 sequences of 8,192; using 488 (3,997,696 tokens)" in rounded.stderr
    exact = napkin(*base, "--global-batch-tokens", "4M")
    assert exact.exit_code == 0 and "sequences of" not in exact.stderr  # 4·2^20 = 512 × 8,192 exactly
    uneven = napkin(
        "step", "--model", "llama3-70b", "--gpus", "512", "-t", "4", "--cluster", "dgx-h100", "--global-batch", "488"
    )
    assert uneven.exit_code == 2 and "multiple of --micro-batch × data parallel (1 × 128 = 128)" in uneven.stderr


def test_impossible_splits_of_a_sequence_are_refused(napkin: Run) -> None:
    base = ("step", "--model", "llama3-70b", "--gpus", "512", "-t", "4", "--cluster", "dgx-h100")
    cp = napkin(*base, "--global-batch", "512", "--seq", "3", "--context-parallel", "2")
    assert cp.exit_code == 2 and "--context-parallel: --seq (3) must split into 2 × 2 equal chunks" in cp.stderr
    sp = napkin(*base, "--global-batch", "512", "--seq", "1", "--sequence-parallel")
    assert sp.exit_code == 2 and "a micro-batch's 1 token must split evenly over --tensor-parallel (4)" in sp.stderr
    tokens = napkin(*base, "--global-batch-tokens", "4000000")
    assert tokens.exit_code == 2 and tokens.stderr.startswith(
        "napkin: error: --global-batch-tokens: 4,000,000 tokens make 488 sequences of 8,192, which must be a multiple"
    )
    one = api.step(model="gpt3-175b", gpus=64, tensor_parallel=8, pipeline_parallel=8, global_batch=64, hardware="a100")
    assert one.layout.sharding is Sharding.none and "DP 1 · SP · none" in one.layout_text  # one replica shards nothing


@pytest.mark.parametrize(
    ("stack", "extra", "sequence_parallel"),
    [
        ("megatron-core", {}, True),  # Megatron users run SP with every TP > 1 (Korthikanti et al. 2022 §4.2.2)
        ("megatron-core", {"sequence_parallel": False}, False),  # --no-sequence-parallel
        ("megatron-core", {"tensor_parallel": 1}, False),  # nothing to shard over
        ("megatron-2021", {}, False),  # the 2021 software predates sequence parallelism
        ("torchtitan", {}, True),  # torchtitan's TP plan shards norms with SequenceParallel
    ],
)
def test_sequence_parallelism_is_on_with_tp_where_the_stack_offers_it(
    stack: str, extra: dict[str, object], sequence_parallel: bool
) -> None:
    shape: dict[str, object] = {"tensor_parallel": 4, **extra}
    got = api.step(model="llama3-8b", gpus=64, global_batch=64, cluster="dgx-h100", stack=stack, **shape)
    assert got.layout.sequence_parallel is sequence_parallel
    mem = api.memory(model="llama3-8b", gpus=64, micro_batch=1, hardware="h100", stack=stack, **shape)
    assert isinstance(mem, MemoryResult) and mem.layout.sequence_parallel is sequence_parallel
    if sequence_parallel:  # SP shards the norm and dropout activations: less memory than without
        unsharded = api.memory(
            model="llama3-8b", gpus=64, micro_batch=1, hardware="h100", stack=stack, sequence_parallel=False, **shape
        )
        assert isinstance(unsharded, MemoryResult)
        assert mem.breakdown["activations"] < unsharded.breakdown["activations"]


def test_the_reserve_is_shown_where_the_verdict_is(napkin: Run) -> None:
    r = napkin(
        "step", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "16", "--hardware", "h100", "--reserve", "4GB"
    )
    assert r.exit_code == 0 and "less 4 GB (3.73 GiB) reserved: " in r.stdout
    data = json.loads(
        napkin(
            "step",
            "--model",
            "llama3-8b",
            "--gpus",
            "8",
            "--global-batch",
            "16",
            "--hardware",
            "h100",
            "--reserve",
            "4GB",
            "--json",
        ).stdout
    )
    assert data["reserve_bytes"] == 4e9


def test_a_changed_preset_and_a_longer_sequence_are_said() -> None:
    plain = api.step(model="llama3-70b", gpus=64, tensor_parallel=8, global_batch=64, cluster="dgx-h100")
    assert plain.model == "llama3-70b" and not any("context" in n for n in plain.notes)
    changed = api.step(
        model="llama3-70b", gpus=64, tensor_parallel=8, global_batch=64, cluster="dgx-h100", seq="16k", hidden=4096
    )
    assert changed.model == "llama3-70b (modified)"
    assert "seq 16,384 is longer than the model's 8,192-token context" in changed.warnings


def test_interleaving_needs_micro_batches_in_multiples_of_the_stages(napkin: Run) -> None:
    args = (
        "step",
        "--model",
        "gpt3-175b",
        "--gpus",
        "64",
        "-t",
        "8",
        "--pipeline-parallel",
        "8",
        "--interleave",
        "2",
        "--hardware",
        "a100",
    )
    bad = napkin(*args, "--global-batch", "12")
    assert bad.exit_code == 2 and bad.stderr.startswith("napkin: error: --interleave: the interleaved schedule needs")
    assert "(12) that is a multiple of --pipeline-parallel (8)" in bad.stderr
    assert napkin(*args, "--global-batch", "16").exit_code == 0


def test_plan_verdict_never_calls_a_faster_layout_slower() -> None:
    """405B on 16,384 H100s: TP 16 across nodes would be faster by the model, but the ranking keeps TP inside the
    node (the issue's rule), and the verdict says so rather than '-22% slower'."""
    result = api.plan(
        model="llama3.1-405b",
        gpus=16384,
        global_batch_tokens="16M",
        cluster="dgx-h100",
        top=1,
        flash_attention=False,
        causal=False,
    )
    assert "TP 16 across nodes:" in result.explanation and "faster by this model" in result.explanation
    assert re.search(r"-\d", result.explanation) is None


def test_plan_rows_are_distinct_and_show_sequence_parallelism() -> None:
    """With FlashAttention, selective recomputation recomputes nothing: the plan does not list it twice."""
    result = api.plan(
        model="llama3-70b",
        gpus=512,
        global_batch_tokens="4M",
        cluster="dgx-h100",
        top=10,
        flash_attention=True,
        causal=True,
    )
    rows = [tuple(row) for row in result.body()]
    assert len({row[1:] for row in rows}) == len(rows)
    assert all(r.layout.recompute is not Recompute.selective for r in result.layouts)
    assert all(("SP" in row[1]) == r.layout.sequence_parallel for row, r in zip(rows, result.layouts, strict=True))


def test_plan_names_shardings_as_its_stack_does_and_lists_no_hsdp_twin_on_one_node() -> None:
    """torchtitan offers FSDP (its ZeRO-3) and HSDP; on one 8-GPU node HSDP shards over the same 8 GPUs as FSDP, so
    it is the same layout and is not listed beside it; across nodes it is a layout of its own."""
    one = api.plan(model="llama3-8b", gpus=8, global_batch_tokens="1M", stack="torchtitan", top=50)
    assert {r.layout.sharding for r in one.layouts} <= {Sharding.fsdp, Sharding.none}
    many = api.plan(model="llama3-8b", gpus=64, global_batch_tokens="1M", stack="torchtitan", top=200, explore=True)
    assert Sharding.hsdp in {r.layout.sharding for r in many.layouts}
    assert Sharding.zero3 not in {r.layout.sharding for r in many.layouts}


def test_the_readme_gives_the_materialised_attention_mfu_of_its_plan() -> None:
    """The plan's default is its stack's attention (megatron-core: fused, causal); the README quotes the same plan
    with the scores materialised and counted whole, which is slower."""
    same = {"model": "llama3-70b", "gpus": 512, "global_batch_tokens": "4M", "cluster": "dgx-h100", "top": 1}
    default, materialised = api.plan(**same), api.plan(**same, flash_attention=False, causal=False)
    text = " ".join(README.read_text(encoding="utf-8").split())
    assert f"counted whole, as the 2021 validation runs below did: MFU {materialised.layouts[0].mfu:.2f}." in text
    assert default.layouts[0].stack == "megatron-core" and default.layouts[0].mfu > materialised.layouts[0].mfu


def test_a_tpu_slice_is_one_domain_at_any_size_it_holds() -> None:
    """tpu-v5p-slice: 8,960 chips in one ICI domain, no scale-out network; groups of any size fit in it."""
    for gpus in (512, 576, 4096):
        result = api.plan(model="llama3-70b", gpus=gpus, global_batch=4608, cluster="tpu-v5p-slice", top=1)
        assert result.layouts and result.layouts[0].fits, gpus


def test_plan_with_no_layout_that_fits_exits_1_with_the_reason(napkin: Run) -> None:
    # 83 is prime and above Llama 3 70B's 80 layers: no TP, PP or CP degree but 1 divides it, nor does DP 83 the
    # 512 sequences
    r = napkin("plan", "--model", "llama3-70b", "--gpus", "83", "--global-batch-tokens", "4M", "--cluster", "dgx-h100")
    assert r.exit_code == 1
    assert "no valid layout: 83 GPUs must split into TP × PP × CP × DP" in r.stderr
    assert r.stdout.endswith("dgx-h100, 512 × 8,192 tokens per step: no valid layout.\n")
    assert "#   layout" not in r.stdout  # no empty table
    assert (
        json.loads(
            napkin(
                "plan",
                "--model",
                "llama3-70b",
                "--gpus",
                "83",
                "--global-batch-tokens",
                "4M",
                "--cluster",
                "dgx-h100",
                "--json",
            ).stdout
        )["explanation"]
        == "No valid layout."
    )
    tight = napkin("plan", "--model", "llama3.1-405b", "--gpus", "8", "--global-batch", "8", "--cluster", "dgx-h100")
    assert tight.exit_code == 1 and "0 fit. Nothing fits." in " ".join(tight.stdout.split())
    assert "no layout fits in memory" in tight.stderr


@given(st.sampled_from([2, 4, 8, 16]), st.integers(1, 15), st.sampled_from([1, 2]), st.sampled_from(list(Recompute)))
def test_an_uneven_pipeline_runs_between_its_lighter_and_heavier_even_neighbours(
    p: int, spare: int, v: int, recompute: Recompute
) -> None:
    """L = q·p + r layers (0 < r < p) run at the pace of the slowest stage: no faster than q·p layers split
    evenly and no slower than (q + 1)·p, the same layout and batch otherwise."""
    q = 2 * v
    layers = q * p + spare % p if spare % p else q * p + 1
    cluster = find("dgx-h100").cluster
    hw = machine(cluster, resolve(cluster.device).profile)

    def seconds(n: int) -> float:
        model = Model(layers=n, hidden=2048, heads=16, vocab=32000)
        sm = StepModel(model, 2048, 8 * p * 4, hw)
        return sm.evaluate(
            Knobs(
                tensor_parallel=2,
                pipeline_parallel=p,
                data_parallel=4,
                interleave=v,
                sequence_parallel=True,
                recompute=recompute,
                sharding=Sharding.zero1,
            )
        ).step_seconds

    assert seconds(q * p) <= seconds(layers) <= seconds((q + 1) * p)


def test_llama_405b_on_eight_stages_splits_126_layers_and_says_so(napkin: Run) -> None:
    """NVIDIA's Llama 3.1 405B layout (TP 8, PP 8, CP 2, VP 8 on 1,024 H100s) needs 126 layers on 8 stages:
    napkin runs it at the pace of a 16-layer stage and says how it split them."""
    r = napkin(
        "step",
        "--model",
        "llama3.1-405b",
        "--gpus",
        "1024",
        "-t",
        "8",
        "--pipeline-parallel",
        "8",
        "--context-parallel",
        "2",
        "--interleave",
        "8",
        "--global-batch",
        "512",
        "--cluster",
        "dgx-h100",
        "--flash-attention",
        "--causal",
        "--sequence-parallel",
        "--sharding",
        "zero1",
        "--dtype",
        "fp8",
        "--json",
    )
    assert r.exit_code == 0, r.stderr
    assert "126 layers over 8 pipeline stages: stages 2-7 hold 16 layers and stages 1, 8 hold 15" in r.stderr
    even = napkin(
        "step",
        "--model",
        "llama3.1-405b",
        "--layers",
        "128",
        "--gpus",
        "1024",
        "-t",
        "8",
        "--pipeline-parallel",
        "8",
        "--context-parallel",
        "2",
        "--interleave",
        "8",
        "--global-batch",
        "512",
        "--cluster",
        "dgx-h100",
        "--flash-attention",
        "--causal",
        "--sequence-parallel",
        "--sharding",
        "zero1",
        "--dtype",
        "fp8",
        "--json",
    )
    uneven, full = json.loads(r.stdout), json.loads(even.stdout)
    assert uneven["stage_layers"] == [15, 16, 16, 16, 16, 16, 16, 15] and full["stage_layers"] == [16] * 8
    # 16-layer stages pace both; the 128-layer model's last stage adds the output layer and loss to its 16, so
    # its compute is larger by exactly 64 micro-batches' logits
    cluster = find("dgx-h100").cluster
    sm = StepModel(
        get_preset("llama3.1-405b").model,
        8192,
        512,
        machine(cluster, resolve(cluster.device).profile, "fp8"),
        flash_attention=True,
        causal=True,
        stack=stack_of("megatron-core").profile.knobs("h100-sxm"),  # the CLI's default stack: its loss's bytes
    )
    logits = sm.layer_passes(
        Knobs(
            tensor_parallel=8,
            pipeline_parallel=8,
            data_parallel=8,
            context_parallel=2,
            interleave=8,
            sequence_parallel=True,
            sharding=Sharding.zero1,
        )
    ).logits
    assert full["breakdown"]["compute"] - uneven["breakdown"]["compute"] == pytest.approx(64 * logits, rel=1e-6)
    assert uneven["breakdown"]["tensor_parallel"] == pytest.approx(full["breakdown"]["tensor_parallel"], rel=1e-9)


def test_expert_all_to_all_moves_each_tp_ranks_share_then_gathers_over_tp() -> None:
    """Megatron-LM's MoEAlltoAllTokenDispatcher: with TP and sequence parallelism each TP rank dispatches its 1/t
    of the tokens over EP, then all-gathers what it received over TP; 4 of each per MoE layer and micro-batch.
    DeepSeek-V3 on 64 H100s (TP 2, EP 32, one stage): the EP term is that and nothing else."""
    cluster = find("dgx-h100").cluster
    model = get_preset("deepseek-v3").model
    sm = StepModel(model, 4096, 64, machine(cluster, resolve(cluster.device).profile), flash_attention=True)
    knobs = Knobs(
        tensor_parallel=2, data_parallel=32, expert_parallel=32, sequence_parallel=True, sharding=Sharding.zero1
    )
    routed = 4096 * model.top_k * model.hidden * 2.0
    per = sm.collective("all-to-all", routed / 2, 32, 4) + sm.collective("all-gather", routed, 2, 2)
    m = 64 // 32
    assert sm.evaluate(knobs).other == pytest.approx(m * 4 * per * model.moe_layers, rel=1e-9)
    whole = sm.collective("all-to-all", routed, 32, 4)  # without the SP split: twice the bytes on the network
    assert whole > 1.8 * sm.collective("all-to-all", routed / 2, 32, 4)


def test_the_expert_all_to_all_is_exposed_unless_the_stack_overlaps_it_and_hides_at_most_the_compute() -> None:
    """Megatron-Core runs dispatch and combine in line unless --overlap-moe-expert-parallel-comm is on; then they
    hide under the other micro-batch's compute, never more than it. DeepSeek-V3 on 64 H100s (TP 2, EP 8 in a
    node: the all-to-all is shorter than the compute) and on 512 (EP 64 over 8 nodes: longer)."""
    cluster = find("dgx-h100").cluster
    hw = machine(cluster, resolve(cluster.device).profile)
    model = get_preset("deepseek-v3").model

    def terms(stack_name: str, gpus: int, ep: int, microbatches: int = 64) -> Any:
        # the all-to-all alone: with 32 local experts at EP 8 the host's launches would pace the layer, whatever the
        # all-to-all (moe_host_per_expert, tests/test_moe_host.py)
        knobs = stack_of(stack_name).profile.knobs("h100-sxm").replace(moe_host=0.0)
        sm = StepModel(model, 4096, gpus // 2 * microbatches, hw, flash_attention=True, stack=knobs)
        k = Knobs(
            tensor_parallel=2,
            data_parallel=gpus // 2,
            expert_parallel=ep,
            sequence_parallel=True,
            sharding=Sharding.zero1,
        )
        return sm.evaluate(k)

    for gpus, ep in ((64, 8), (512, 64)):
        in_line, overlapped = terms("megatron-core-moe", gpus, ep), terms("megatron-core-moe-a2a-overlap", gpus, ep)
        assert in_line.other > 0 and overlapped.other < in_line.other
        assert overlapped.compute == pytest.approx(in_line.compute, rel=1e-12)
        # what the compute cannot cover stays exposed
        assert overlapped.other >= in_line.other - overlapped.compute - 1e-9
    # 64 micro-batches: the first has no other beside it, so 1/64 of the all-to-all stays in line
    hides = terms("megatron-core-moe-a2a-overlap", 64, 8)
    assert hides.other == pytest.approx(terms("megatron-core-moe", 64, 8).other / 64, rel=1e-9)
    assert terms("megatron-core-moe-a2a-overlap", 512, 64).other > 0.0
    # one micro-batch: no other micro-batch to hide under, the overlap changes nothing
    alone = terms("megatron-core-moe-a2a-overlap", 64, 8, microbatches=1)
    assert alone.other == pytest.approx(terms("megatron-core-moe", 64, 8, microbatches=1).other, rel=1e-12)


def test_a_single_gpu_needs_no_cluster_and_step_names_the_finetune(napkin: Run) -> None:
    """One L40S (no built-in cluster): no fabric is needed; the step says the fine-tuning it models."""
    result = napkin(
        "step",
        "--model",
        "llama3-8b",
        "--finetune",
        "qlora",
        "--lora-rank",
        "8",
        "--hardware",
        "l40s",
        "--gpus",
        "1",
        "--seq",
        "2048",
        "--global-batch",
        "8",
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["finetune"] == "qlora" and data["lora_rank"] == 8 and data["lora_targets"] == ["all-linear"]
    # Llama 3 8B, r = 8 on all seven projections: 32 · 8 · (2·(4096+4096) + 2·(4096+1024) + 3·(4096+14336))
    assert data["trainable_params"] == 32 * 8 * (2 * 8192 + 2 * 5120 + 3 * 18432)
    assert data["breakdown"]["data_parallel"] == 0


def test_a_profile_object_is_used_as_given_never_looked_up_again_by_name() -> None:
    """A profile passed in (here an H100 with 20 GB) is the one the planner filters with and the results report:
    the engine reads no file (it looked the profile up again by name and reported the built-in's 80 GB)."""
    import napkin

    small = napkin.hardware("h100").model_copy(update={"memory": 20e9, "memory_usable": None})
    plan = api.plan(model="llama3-8b", gpus=8, global_batch=16, hardware=small, top=3)
    assert plan.layouts and all(r.memory_bytes == 20e9 and r.per_gpu_bytes <= 20e9 for r in plan.layouts)
    one = api.step(model="llama3-8b", gpus=8, global_batch=16, hardware=small)
    assert one.memory_bytes == 20e9 and not one.fits  # 85 GB per GPU at DP 8, ZeRO-1


def test_plan_and_step_fit_against_the_same_capacity() -> None:
    """The planner filters at the capacity the memory engine checks (what the H100 reports to torch, 85.5 GB, not
    the datasheet's 80 GB): every layout step calls fitting is one the planner counts."""
    plan = api.plan(model="llama3-70b", gpus=512, global_batch_tokens="4M", cluster="dgx-h100", top=10)
    assert plan.memory_limit == 85_520_809_984
    assert any(r.per_gpu_bytes > 80e9 for r in plan.layouts)  # fits in 85.5 GB only


def test_megatron_overlaps_tp_only_with_sequence_parallelism_and_sends_only_interleaved() -> None:
    """Megatron-Bridge's comm_overlap.py (@ 0685ff5d): tp_comm_overlap is turned off without sequence
    parallelism, and overlap_p2p_comm is on only with a virtual pipeline (batch_p2p_comm, in line, with 1F1B).
    Llama 3 70B on 64 DGX H100s: with every TP collective under the GEMMs, a TP 4 layout with SP exposes none of
    them (the GEMMs take longer); without SP it exposes them all, as with no overlap; and the pipeline sends of a
    1F1B layout stay exposed while an interleaved one's are hidden."""
    cluster = find("dgx-h100").cluster
    hw = machine(cluster, resolve(cluster.device).profile)
    model = get_preset("llama3-70b").model

    def terms(overlap: float, **layout: Any) -> Any:
        stack = StackKnobs(tp_overlap=overlap, p2p_overlap=overlap)
        return StepModel(model, 8192, 128, hw, stack=stack).evaluate(
            Knobs(tensor_parallel=4, sharding=Sharding.zero1, **layout)
        )

    sp = {"pipeline_parallel": 4, "data_parallel": 4, "sequence_parallel": True}
    assert terms(0.0, **sp).tensor_parallel > 0 and terms(1.0, **sp).tensor_parallel == 0
    plain = {"pipeline_parallel": 4, "data_parallel": 4}
    assert terms(1.0, **plain).tensor_parallel == terms(0.0, **plain).tensor_parallel > 0
    assert terms(1.0, **sp).other == terms(0.0, **sp).other > 0  # 1F1B: sends in line
    interleaved = {**sp, "interleave": 5}
    assert terms(1.0, **interleaved).other == 0 < terms(0.0, **interleaved).other


def test_step_and_plan_say_where_their_sequence_length_came_from() -> None:
    """Issue 22: every output that depends on the sequence length prints it and where it came from."""
    preset = api.step(model="llama3-8b", gpus=8, global_batch=64)
    assert (preset.seq, preset.seq_source) == (8192, "the llama3-8b preset's training length")
    assert ("sequence", "8,192 tokens (the llama3-8b preset's training length)") in preset.rows()
    given = api.plan(model="llama3-8b", gpus=8, global_batch=64, seq="4k", top=1)
    assert (given.seq, given.seq_source) == (4096, "given") and "(the sequence:" not in (given.caption() or "")
    assert "(the sequence: the llama3-8b preset's training length)" in (
        api.plan(model="llama3-8b", gpus=8, global_batch=64, top=1).caption() or ""
    )
