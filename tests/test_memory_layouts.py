"""Per-GPU memory under parallel layouts: Korthikanti et al. 2022's four models, Megatron-LM's formulas,
pipeline stages, variants of the block, expert parallelism and offload."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from napkin.domain.choices import Offload, Optimizer, Precision, Recompute, Sharding
from napkin.domain.layout import Layout
from napkin.domain.model import Model
from napkin.domain.workload import Workload
from napkin.engines.activations import in_flight, interleave_factor, layer_bytes
from napkin.engines.memory import (
    ActivationInputs,
    MemoryResult,
    bytes_per_param,
    memory,
    per_gpu_bytes,
    stage_memory,
)
from napkin.systems import profiles
from tests.conftest import Run

A100 = profiles.resolve("a100-80gb").profile
S, V = 2048, 51200  # Korthikanti Table 3: sequence 2048; Megatron's padded GPT-2 vocabulary


def gpt(layers: int, hidden: int, heads: int) -> Model:
    return Model(layers=layers, hidden=hidden, heads=heads, vocab=V, biases=True, dropout=True)


#: Korthikanti et al. 2022 Table 3: (model, TP, PP, micro-batch). Interleaving v is not in the table: we take
#: 2 layers per chunk for 175B (v = 6) and 1 for 530B (v = 3); the factor 1 + (p−1)/(p·v) is §4.2.3's.
TABLE_3 = {
    "22B": (gpt(48, 6144, 64), 8, 1, 1, 4),
    "175B": (gpt(96, 12288, 96), 8, 8, 6, 1),
    "530B": (gpt(105, 20480, 128), 8, 35, 3, 1),
    "1T": (gpt(128, 25600, 160), 8, 64, 1, 1),
}


def run_memory(
    name: str, sp: bool, recompute: Recompute, precision: Precision = Precision.mixed_fp32_grads
) -> tuple[MemoryResult, Model, int, int, int, int]:
    model, t, p, v, b = TABLE_3[name]
    lay = Layout(
        tensor_parallel=t,
        pipeline_parallel=p,
        interleave=v,
        sequence_parallel=sp,
        recompute=recompute,
        sharding=Sharding.none,
    )
    acts = ActivationInputs(model=model, workload=Workload(seq=S, micro_batch=b), layout=lay)
    r = memory(
        float(model.params()),
        A100,
        optimizer=Optimizer.adam,
        precision=precision,
        gpus=t * p,
        layout=lay,
        activations=acts,
    )
    return r, model, t, p, v, b


def megatron_activations(model: Model, t: int, p: int, v: int, b: int) -> float:
    """Megatron-LM theoretical_memory_usage.py compute_activation_memory (SP + selective), written out."""
    s, h, f = S, model.hidden, model.d_ffn
    act = s * b * h * (18 + 4 * f / h) * model.layers
    act += 8 * s * b * p + s * b * h * p  # token ids, embedding dropout (p micro-batches in flight)
    if v > 1:
        act *= 1 + (p - 1) / (p * v)
    if p == 1:
        act += s * b * h * 4 * (1 + V / h)  # output layer and cross-entropy
    return act / t


@pytest.mark.parametrize("name", list(TABLE_3))
def test_sp_selective_activations_match_megatron_theoretical_memory(name: str) -> None:
    """First stage, SP + selective: within 0.01 % of Megatron's formula. The only difference: Megatron divides
    the int64 token ids by t, napkin does not (each TP rank holds all ids), 8·s·b·p·(1 − 1/t) bytes."""
    r, model, t, p, v, b = run_memory(name, sp=True, recompute=Recompute.selective)
    first = r.stages[0].activation_bytes
    assert first == pytest.approx(megatron_activations(model, t, p, v, b), rel=1e-4)
    assert (r.stage == 0 and r.stage_name.startswith("stage 1")) or p == 1


@pytest.mark.parametrize("name", list(TABLE_3))
def test_no_recompute_layers_match_korthikanti_table_2_times_the_pipeline_factor(name: str) -> None:
    """TP only, no recompute: L/p layers × p in flight × (1 + (p−1)/(p·v)) × s·b·h·(10 + 24/t + 5as/(ht))."""
    r, model, t, p, v, b = run_memory(name, sp=False, recompute=Recompute.none)
    h, a = model.hidden, model.heads
    assert a is not None
    per_layer = S * b * h * (10 + 24 / t + 5 * a * S / (h * t))
    expected = per_layer * model.layers * (1 + (p - 1) / (p * v) if v > 1 else 1)
    assert r.stages[0].activation_bytes - r.breakdown.get("embedding", 0) - (
        r.breakdown["logits"] if p == 1 else 0
    ) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("name", list(TABLE_3))
def test_sequence_parallel_and_selective_recompute_cut_activations_5x(name: str) -> None:
    """Korthikanti abstract and §6: the two techniques reduce activation memory by about 5× (4.9–6.2× here:
    the ratio (10 + 24/t + 5as/(ht)) / (34/t) of Table 2 at each model's shape)."""
    base = run_memory(name, sp=False, recompute=Recompute.none)[0].stages[0].activation_bytes
    both = run_memory(name, sp=True, recompute=Recompute.selective)[0].stages[0].activation_bytes
    assert 4.8 <= base / both <= 6.3


@pytest.mark.parametrize("name", list(TABLE_3))
def test_model_states_with_megatron_18_bytes_per_param(name: str) -> None:
    """Megatron theoretical_memory_usage.py: (L·layer/p + V·h)/t params on the most loaded shard × 18 B
    (bf16 weights + fp32 gradients + fp32 Adam, no distributed optimizer); per layer 12h² + 13h (biases)."""
    r, model, t, p, _v, _b = run_memory(name, sp=True, recompute=Recompute.selective)
    h = model.hidden
    megatron = (model.layers * (12 * h * h + 13 * h) / p + V * h) / t * 18
    first = r.stages[0].model_state_bytes
    final_norm = 2 * h / t * 18 if p == 1 else 0  # Megatron's formula leaves out the final LayerNorm
    assert first == pytest.approx(megatron + final_norm, rel=1e-12)
    # the last stage holds the tied output copy and the final norm (2h more parameters than stage 0)
    if p > 1:
        assert r.stages[-1].model_state_bytes - first == pytest.approx(2 * h / t * 18)


def test_distributed_optimizer_is_6_plus_12_over_dp() -> None:
    """Megatron: 6 + 12/DP bytes per parameter with the distributed optimizer = napkin's zero1 over DP."""
    r = memory(
        7e9,
        A100,
        optimizer=Optimizer.adam,
        precision=Precision.mixed_fp32_grads,
        gpus=64,
        layout=Layout(sharding=Sharding.zero1),
    )
    assert r.per_gpu_bytes == pytest.approx(7e9 * (6 + 12 / 64))


@pytest.mark.parametrize(("p", "v", "expected"), [(4, 1, [4, 3, 2, 1]), (4, 2, [5.5, 4.5, 3.5, 2.5])])
def test_micro_batches_in_flight_per_stage(p: int, v: int, expected: list[float]) -> None:
    """1F1B: stage i holds p − i; interleaved: ((p−i−1)·2 + (v−1)·p + 1) chunks of 1/v stage each."""
    lay = Layout(pipeline_parallel=p, interleave=v)
    assert [in_flight(i, lay, None) for i in range(p)] == expected
    assert in_flight(0, lay, None) == pytest.approx(p * interleave_factor(lay))
    assert in_flight(0, lay, 2) == min(expected[0], 2)


LLAMA = Model(
    layers=32,
    hidden=4096,
    heads=32,
    kv_heads=8,
    ffn=14336,
    vocab=128256,
    mlp="swiglu",
    norm="rmsnorm",
    tied_embeddings=False,
)


def test_llama_block_counts_gqa_swiglu_and_no_dropout_masks() -> None:
    """Per token: norms + QKV + FC1 inputs 4e·h, Q and out 2e·a·d_h, K/V 2e·n_kv·d_h, SwiGLU 3e·F; FlashAttention 4a."""
    work = Workload(seq=8192)
    got = layer_bytes(LLAMA, work, Layout(), element_bytes=2, flash_attention=True).total
    per_token = 2 * (4 * 4096 + 2 * 4096 + 2 * 8 * 128 + 3 * 14336) + 4 * 32
    assert got == 8192 * per_token
    gpt = LLAMA.model_copy(update={"kv_heads": None, "mlp": "gelu", "ffn": 4 * 4096, "dropout": True})
    assert layer_bytes(gpt, work, Layout(), element_bytes=2, flash_attention=True).total == 8192 * (
        34 * 4096 + 4 * 32
    )  # Korthikanti's 34·s·b·h once the block has MHA, GeLU and dropout


def test_moe_layer_adds_router_and_k_routed_tokens() -> None:
    moe = Model(layers=2, hidden=1024, heads=8, ffn=4096, experts=8, top_k=2, mlp="swiglu", vocab=1000)
    dense = moe.model_copy(update={"experts": 1, "top_k": 1})
    work = Workload(seq=1024)
    a = layer_bytes(moe, work, Layout(), flash_attention=True).total
    d = layer_bytes(dense, work, Layout(), flash_attention=True).total
    assert a - d == 1024 * (4 * 8 + 2 * 1024 * 2 + 3 * 2 * 4096 * (2 - 1))
    cf = layer_bytes(moe, work, Layout(), flash_attention=True, capacity_factor=1.25).total
    assert cf - d == pytest.approx(1024 * (4 * 8 + 2 * 1024 * 2.5 + 3 * 2 * 4096 * 1.5))


def test_context_parallel_divides_the_sequence() -> None:
    work = Workload(seq=8192)
    one = layer_bytes(LLAMA, work, Layout(), flash_attention=True).total
    assert layer_bytes(LLAMA, work, Layout(context_parallel=4), flash_attention=True).total == one / 4


def test_expert_parallel_divides_expert_weights_and_offload_moves_states_to_host() -> None:
    moe = Model(layers=4, hidden=1024, heads=8, ffn=4096, experts=8, top_k=2, mlp="swiglu", vocab=1000)
    acts = ActivationInputs(model=moe, workload=Workload(seq=128))
    n = float(moe.params())
    base = memory(n, A100, precision=Precision.mixed, gpus=8, layout=Layout(sharding=Sharding.none), activations=acts)
    ep = memory(
        n,
        A100,
        precision=Precision.mixed,
        gpus=8,
        layout=Layout(sharding=Sharding.none, expert_parallel=8),
        activations=acts,
    )
    saved = sum(base.breakdown[c] for c in ("params", "gradients", "master_weights", "optimizer_states")) - sum(
        ep.breakdown[c] for c in ("params", "gradients", "master_weights", "optimizer_states")
    )
    assert saved == pytest.approx(moe.expert_params() * 16 * 7 / 8)
    off = memory(7e9, A100, precision=Precision.mixed, gpus=8, layout=Layout(offload=Offload.optimizer))
    # ZeRO-Offload: gradients, master weights and Adam states on the CPU, 16-bit parameters on the GPU
    assert off.breakdown.get("gradients", 0) == off.breakdown.get("optimizer_states", 0) == 0
    assert off.host_bytes_per_gpu == pytest.approx(7e9 * 14 / 8)
    assert off.host_bytes_per_node == pytest.approx(8 * 7e9 * 14 / 8)
    assert off.per_gpu_bytes == pytest.approx(7e9 * 2 / 8)


def test_offload_matches_deepspeed_zero3_estimator_before_its_buffer_factor() -> None:
    """DeepSpeed estimate_zero3_model_states_mem_needs, 8 nodes × 8 GPUs, 18 B/param: offload_param → CPU
    18Ψ per node; offload_optimizer only → GPU 2Ψ/64 (+ 4 × largest layer), CPU 16Ψ per node (× 1.5 buffer)."""
    n = 70e9
    both = memory(n, A100, precision=Precision.mixed_fp32_grads, gpus=64, layout=Layout(offload=Offload.params))
    assert both.host_bytes_per_node == pytest.approx(18 * n / 8) and both.per_gpu_bytes == 0
    opt = memory(n, A100, precision=Precision.mixed_fp32_grads, gpus=64, layout=Layout(offload=Offload.optimizer))
    assert opt.host_bytes_per_node == pytest.approx(16 * n / 8) and opt.per_gpu_bytes == pytest.approx(2 * n / 64)


def test_fast_path_equals_the_result() -> None:
    r, model, t, p, v, b = run_memory("175B", sp=True, recompute=Recompute.selective)
    lay = Layout(
        tensor_parallel=t,
        pipeline_parallel=p,
        interleave=v,
        sequence_parallel=True,
        recompute=Recompute.selective,
        sharding=Sharding.none,
    )
    acts = ActivationInputs(model=model, workload=Workload(seq=S, micro_batch=b), layout=lay)
    fast = per_gpu_bytes(
        float(model.params()),
        optimizer=Optimizer.adam,
        precision=Precision.mixed_fp32_grads,
        gpus=t * p,
        layout=lay,
        activations=acts,
    )
    assert fast == r.per_gpu_bytes


@given(
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from([1, 2, 3, 4, 6, 12]),
    st.sampled_from([1, 2]),
    st.integers(1, 4),
    st.sampled_from(list(Recompute)),
    st.booleans(),
    st.sampled_from([None, 64, 256]),
)
def test_the_most_loaded_stage_is_the_first_or_the_last(
    t: int, p: int, v: int, b: int, recompute: Recompute, tied: bool, batch: int | None
) -> None:
    """per_gpu_bytes computes only the end stages; every stage computed agrees on the maximum."""
    model = Model(layers=24 * v, hidden=1024, heads=16, vocab=32000, tied_embeddings=tied)
    lay = Layout(tensor_parallel=t, pipeline_parallel=p, interleave=v if p > 1 else 1, recompute=recompute).resolve(
        t * p * 4
    )
    work = Workload(seq=1024, micro_batch=b, global_batch=None if batch is None else batch * b * 4)
    acts = ActivationInputs(model=model, workload=work, layout=lay)
    every = stage_memory(float(model.params()), bytes_per_param(Optimizer.adam, Precision.mixed), lay, acts, 2.0)
    fast = per_gpu_bytes(
        float(model.params()),
        optimizer=Optimizer.adam,
        precision=Precision.mixed,
        gpus=t * p * 4,
        layout=lay,
        activations=acts,
    )
    assert fast == max(s.total for s in every)


def test_cli_memory_70b_tp8_without_a_shape_and_pipeline_json(napkin: Run) -> None:
    out = napkin("memory", "-N", "70B", "-G", "8", "--tensor-parallel", "8", "--json")
    data = json.loads(out.stdout)
    assert data["per_gpu_bytes"] == pytest.approx(70e9 * 16 / 8)
    out = napkin(
        "memory", "--model", "llama3-8b", "-G", "8", "--pipeline-parallel", "4", "--precision", "mixed", "--json"
    )
    data = json.loads(out.stdout)
    assert set(data) >= {"per_gpu_bytes", "breakdown", "stage", "fits", "stages"}
    assert data["stage"] == 0 and len(data["stages"]) == 4
    assert data["breakdown"]["logits"] == 0 and data["stages"][3]["activation_bytes"] > 0
    table = napkin("memory", "--model", "llama3-8b", "-G", "8", "--pipeline-parallel", "4", "--precision", "mixed")
    assert "Per pipeline stage" in table.stdout and "stage 1 of 4 (first)" in table.stdout


def test_max_model_scales_the_shape_in_depth_to_the_last_layer_that_fits(napkin: Run) -> None:
    """max-model with a shape: the most layers (multiples of p) whose most loaded GPU fits; one more does not."""
    from napkin.systems.presets import get_preset

    data = json.loads(
        napkin(
            "max-model",
            "--gpus",
            "8",
            "--model",
            "llama3-8b",
            "--precision",
            "mixed",
            "--recompute",
            "full",
            "--pipeline-parallel",
            "2",
            "--json",
        ).stdout
    )
    layers = data["max_layers"]
    assert layers % 2 == 0 and data["max_layers_params"] > data["shape_params"]
    h100 = profiles.resolve("h100").profile
    base = get_preset("llama3-8b").model
    lay = Layout(pipeline_parallel=2, recompute=Recompute.full)

    def fits(n_layers: int) -> bool:
        m = base.model_copy(update={"layers": n_layers})
        acts = ActivationInputs(model=m, workload=Workload(seq=8192), layout=lay)
        return memory(float(m.params()), h100, precision=Precision.mixed, gpus=8, layout=lay, activations=acts).fits

    assert fits(layers) and not fits(layers + 2)


@given(st.integers(1, 200), st.integers(1, 64))
def test_stage_layers_split_as_evenly_as_they_go_with_the_ends_lighter(layers: int, pipeline: int) -> None:
    """Every layer lands on one stage, stages differ by one layer at most, and the first and last stages hold
    the extra layers only after every middle stage does."""
    from napkin.domain.layout import stage_layers, uneven_note

    assume(pipeline <= layers)
    split = stage_layers(layers, pipeline)
    assert sum(split) == layers and len(split) == pipeline and max(split) - min(split) <= 1
    if pipeline > 2 and min(split[1:-1]) < max(split):
        assert split[0] == split[-1] == min(split)
    assert (uneven_note(layers, pipeline) is None) == (layers % pipeline == 0)


@given(
    st.sampled_from([2, 3, 4, 8, 16]),
    st.integers(0, 15),
    st.sampled_from([1, 2]),
    st.integers(1, 3),
    st.sampled_from(list(Recompute)),
)
def test_uneven_stages_keep_the_fast_path_on_the_most_loaded_gpu(
    p: int, spare: int, v: int, b: int, recompute: Recompute
) -> None:
    """With layers that p·v does not divide, per_gpu_bytes (first, last and heaviest stage) is still the maximum
    over every stage, and the stage table adds up to the model's layers."""
    layers = 3 * p * v + spare
    model = Model(layers=layers, hidden=1024, heads=16, vocab=32000)
    lay = Layout(tensor_parallel=2, pipeline_parallel=p, interleave=v, recompute=recompute).resolve(2 * p * 4)
    acts = ActivationInputs(model=model, workload=Workload(seq=1024, micro_batch=b), layout=lay)
    every = stage_memory(float(model.params()), bytes_per_param(Optimizer.adam, Precision.mixed), lay, acts, 2.0)
    fast = per_gpu_bytes(
        float(model.params()),
        optimizer=Optimizer.adam,
        precision=Precision.mixed,
        gpus=2 * p * 4,
        layout=lay,
        activations=acts,
    )
    assert fast == max(s.total for s in every)
    assert sum(s.layers for s in every) == layers


def test_deepseek_v3_on_16_stages_names_its_uneven_split(napkin: Run) -> None:
    """61 layers on PP 16: 13 stages of 4 and 3 of 3 (first, second-to-last and last), said on stderr."""
    out = napkin(
        "memory",
        "--model",
        "deepseek-v3",
        "--gpus",
        "1024",
        "--pipeline-parallel",
        "16",
        "--expert-parallel",
        "64",
        "--seq",
        "4096",
        "--global-batch",
        "8192",
        "--json",
    )
    assert out.exit_code == 0, out.stderr
    layers = [row["layers"] for row in json.loads(out.stdout)["stages"]]
    assert layers == [3] + [4] * 13 + [3, 3]
    assert (
        "61 layers over 16 pipeline stages: stages 2-14 hold 4 layers and stages 1, 15-16 hold 3 (a split "
        "Megatron-LM sets with --pipeline-model-parallel-layout)\n"
    ) in out.stderr.replace("\n        ", " ")
    args = ("memory", "--model", "deepseek-v3", "--expert-parallel", "64", "--seq", "4096", "--global-batch", "8192")
    for v in ("3", "4"):  # 3 does not divide the 4-layer stages; 4 chunks would leave a 3-layer stage one empty
        bad = napkin(*args, "--gpus", "1024", "--pipeline-parallel", "16", "--interleave", v)
        assert bad.exit_code == 2
        assert (
            f"--interleave ({v}) must divide the layers of the heaviest stage and not exceed the lightest's (4 "
            "and 3 of the model's 61 over --pipeline-parallel 16)"
        ) in bad.stderr
    assert napkin(*args, "--gpus", "1024", "--pipeline-parallel", "16", "--interleave", "2").exit_code == 0
    over = napkin(*args, "--gpus", "4096", "--pipeline-parallel", "64")
    assert over.exit_code == 2
    assert "--pipeline-parallel (64) must not exceed the model's layers (61), so that every stage holds a layer" in (
        over.stderr
    )


def test_model_states_explain_adds_up_with_experts_sharded_over_their_own_group() -> None:
    """With EP the routed experts shard over DP/EP ranks and the rest over DP: --explain shows both products,
    and they add up to the model states it reports (it showed the dense factor alone: 2.73e10 × 0.01562 B)."""
    from napkin import api

    r = api.memory(model="deepseek-v3", gpus=1024, expert_parallel=64, seq=4096, global_batch=8192)
    states = r.breakdown["params"] + r.breakdown["gradients"] + r.breakdown["master_weights"]
    states += r.breakdown["optimizer_states"]
    step = next(s for s in r.steps if s.quantity.startswith("model states per GPU"))
    products = re.findall(r"([\d.e+]+) (?:expert )?params[^×]*× ([\d.]+) B \(N_d = (\d+)\)", step.substituted)
    assert [n for _, _, n in products] == ["1024", "16"]
    assert sum(float(count) * float(per) for count, per, _ in products) == pytest.approx(states, rel=0.01)
