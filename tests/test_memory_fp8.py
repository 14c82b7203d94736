"""Memory under an fp8 recipe: Transformer Engine's linear layers keep the fp8 copy of their input for the
weight-gradient GEMM (transformer_engine/pytorch/module/linear.py and layernorm_linear.py at v2.5), the rest stays
16-bit; Megatron-Bridge's fp8 recipes hold the layers' weights in fp8 (1 byte, and its transpose on Hopper); a stack
that states nothing about either keeps napkin's 16-bit count."""

from __future__ import annotations

import json

import pytest

from napkin import api
from tests.conftest import Run

#: Llama 3 8B (h 4,096, 32 heads of 128, 8 KV heads, SwiGLU F 14,336) at 8,192 tokens on one GPU.
LLAMA3_8B = {"model": "llama3-8b", "gpus": 1, "seq": 8192, "hardware": "h100", "sharding": "zero1"}
LAYERS, TOKENS = 32, 8192

#: What one layer keeps per token, tensor by tensor, as Transformer Engine 2.5 and Megatron-Core save it (bytes):
#: LayerNormLinear (QKV): the norm's input, bf16, and its fp8 output (the GEMM input); FusedAttnFunc: q, k, v and
#: the output in bf16 (fp8 attention off), the fp32 log-sum-exp; Linear (proj): its fp8 input; LayerNormLinear
#: (FC1): the norm's bf16 input and fp8 output; bias_swiglu: its bf16 input (2F); Linear (FC2): its fp8 input (F).
TE_FP8_PER_TOKEN = (
    2 * 4096
    + 1 * 4096  # QKV: norm input, fp8 norm output
    + 2 * 4096
    + 2 * 2 * 1024
    + 2 * 4096
    + 4 * 32  # q, k and v (8 KV heads), attention output, log-sum-exp
    + 1 * 4096  # proj: fp8 input
    + 2 * 4096
    + 1 * 4096  # FC1: norm input, fp8 norm output
    + 2 * 2 * 14336  # SwiGLU input (gate and up)
    + 1 * 14336  # FC2: fp8 input
)
#: The same tensors in bf16, the projection's input being the attention's output (Korthikanti et al. 2022 Table 2
#: with FlashAttention): 4e·h + e·(2a·d_h + 2n_kv·d_h) + 3e·F + 4a.
BF16_PER_TOKEN = 4 * 2 * 4096 + 2 * (2 * 4096 + 2 * 1024) + 3 * 2 * 14336 + 4 * 32


def _activations(**options: object) -> float:
    """The activations of one layer × 32 layers (PP 1); sharding None: the stack's own default."""
    given = {k: v for k, v in {**LLAMA3_8B, **options}.items() if v is not None}
    return float(api.memory(**given).breakdown["activations"])


def test_megatron_core_under_fp8_keeps_what_transformer_engine_saves() -> None:
    assert TE_FP8_PER_TOKEN == 120_960 and BF16_PER_TOKEN == 139_392
    assert _activations(dtype="fp8") == LAYERS * TOKENS * TE_FP8_PER_TOKEN
    assert _activations(dtype="bf16") == LAYERS * TOKENS * BF16_PER_TOKEN


@pytest.mark.parametrize("name", ["torchtitan", "llm-foundry", "deepspeed", "megatron-2022"])
def test_a_stack_that_states_nothing_for_fp8_keeps_the_16_bit_count(name: str) -> None:
    """torchtitan's float8 is torchao's, not Transformer Engine: nothing is assumed of what it keeps."""
    given = {k: v for k, v in {**LLAMA3_8B, "hardware": "gb200", "stack": name}.items() if k != "sharding"}
    assert api.memory(**given, dtype="fp8").per_gpu_bytes == api.memory(**given).per_gpu_bytes


def test_step_and_memory_agree_on_an_fp8_run() -> None:
    """Megatron-Bridge's Llama 3.1 405B FP8 (current scaling) layout on 256 GB200: TP 4, PP 16, VP 4, MBS 1, GBS
    1,536 (src/megatron/bridge/perf_recipes/llama/gb200/llama31.py @ 067f987d)."""
    layout = {
        "model": "llama3.1-405b",
        "gpus": 256,
        "tensor_parallel": 4,
        "pipeline_parallel": 16,
        "interleave": 4,
        "global_batch": 1536,
        "sharding": "zero1",
        "seq": 8192,
    }
    for dtype in ("bf16", "fp8"):
        step = api.step(**layout, cluster="gb200-nvl72", dtype=dtype, stack="megatron-core")
        memory = api.memory(**layout, hardware="gb200", dtype=dtype, stack="megatron-core")
        assert step.per_gpu_bytes == pytest.approx(memory.per_gpu_bytes, rel=1e-12)
    bf16 = api.memory(**layout, hardware="gb200")
    fp8 = api.memory(**layout, hardware="gb200", dtype="fp8")
    assert fp8.fits and not bf16.fits  # the run ran: it fits under its fp8 recipe
    # the most loaded stage holds only layers: their fp8 weights take 1 byte on Blackwell, half the bf16 ones
    assert fp8.breakdown["params"] == pytest.approx(bf16.breakdown["params"] / 2, rel=1e-12)
    # on Hopper the fp8 weight's transpose is kept as well: 2 bytes, as the bf16 weight
    hopper = {**layout, "hardware": "h100"}
    assert api.memory(**hopper, dtype="fp8").breakdown["params"] == api.memory(**hopper).breakdown["params"]


def test_an_unknown_dtype_is_one_line_exit_2(napkin: Run) -> None:
    got = napkin("memory", "--model", "llama3-8b", "--dtype", "fp9")
    assert got.exit_code == 2 and "--dtype" in got.stderr and "Traceback" not in got.stderr


def test_memory_refuses_fp8_where_step_does() -> None:
    """An A100 has no fp8 peak: step refuses --dtype fp8 there, and so do memory and max-model; an adapter
    fine-tune keeps its own dtypes, so fp8 is refused rather than silently dropped."""
    from napkin import api
    from napkin.errors import UsageError

    for question in (api.memory, api.max_model):
        with pytest.raises(UsageError, match=r"^dtype: a100-sxm-80gb has no fp8 peak"):
            question(model="llama3-8b", gpus=8, hardware="a100", dtype="fp8")
    with pytest.raises(UsageError, match=r"^dtype: a100-sxm-80gb has no fp8 peak"):
        api.step(model="llama3-8b", gpus=8, global_batch=8, hardware="a100", dtype="fp8")
    with pytest.raises(UsageError, match=r"^dtype: fp8 is a full-training recipe here"):
        api.memory(model="llama3-8b", gpus=8, finetune="lora", dtype="fp8")


def test_memory_and_max_model_name_the_number_format_their_verdict_rests_on(napkin: Run) -> None:
    """Megatron-Bridge's GB200 Llama 3 70B recipe fits in fp8 and not in bf16 (README): the heading and the JSON
    say which was assumed."""
    run = ("memory", "--model", "llama3-70b", "--gpus", "64", "--hardware", "gb200", "--sharding", "fsdp")
    args = (*run, "--micro-batch", "2", "--global-batch", "256", "--activation-offload-layers", "40")
    fp8 = napkin(*args, "--dtype", "fp8")
    assert fp8.stdout.startswith("Memory per GPU: 70.6 B params, adamw, mixed, fp8, megatron-core")
    assert json.loads(napkin(*args, "--dtype", "fp8", "--json").stdout)["dtype"] == "fp8"
    bf16 = json.loads(napkin(*args, "--json").stdout)
    assert bf16["dtype"] == "bf16" and not bf16["fits"]
    assert napkin("max-model", "--gpus", "8", "--dtype", "fp8").stdout.startswith("Largest trainable model (fp8, ")


#: The four linear-layer inputs of TE_FP8_PER_TOKEN kept quantized (QKV's and FC1's norm outputs, proj's input,
#: FC2's input), elements per token; under NVFP4 each keeps 4 bits and one 1-byte E4M3 scale per 16 elements
#: (Transformer Engine nvfp4_tensor.py, NVFP4_BLOCK_SCALING_SIZE 16) instead of fp8's one byte.
QUANTIZED_PER_TOKEN = 3 * 4096 + 14336
NVFP4_BYTES = 0.5 + 1 / 16


def test_under_nvfp4_the_kept_linear_inputs_take_four_bits_and_their_block_scales() -> None:
    """Transformer Engine's Linear saves the quantized input it made for the forward GEMM, whatever the recipe
    (linear.py: inputmat.update_usage(rowwise_usage=False, columnwise_usage=True)); a B200 has an fp4 peak."""
    on_b200 = {"hardware": "b200"}
    fp4 = TE_FP8_PER_TOKEN - QUANTIZED_PER_TOKEN * (1 - NVFP4_BYTES)
    assert _activations(**on_b200, dtype="fp4") == pytest.approx(LAYERS * TOKENS * fp4, rel=1e-12)
    assert _activations(**on_b200, dtype="fp8") == LAYERS * TOKENS * TE_FP8_PER_TOKEN
    # a stack that states nothing of what its fp8 recipe keeps keeps the 16-bit count under fp4 as well
    titan = {**LLAMA3_8B, "hardware": "b200", "stack": "torchtitan", "sharding": None}
    given = {k: v for k, v in titan.items() if v is not None}
    assert api.memory(**given, dtype="fp4").per_gpu_bytes == api.memory(**given).per_gpu_bytes


def test_the_nvfp4_llama_405b_run_on_256_gb200_fits_at_its_published_layout() -> None:
    """Megatron-Bridge 26.06, Llama 3.1 405B NVFP4 on 256 GB200 (docs/performance-summary-archive.md @ 067f987d:
    1,166 tokens/s per GPU): TP 4, PP 16, VP 8, MBS 1, GBS 1,536, its 126 layers split with the embedding and the
    loss counted as layers (src/megatron/bridge/recipes/llama/h100/llama3.py: account_for_embedding_in_pipeline_split
    and account_for_loss_in_pipeline_split, which llama31_405b_pretrain_256gpu_gb200_nvfp4_config inherits), so
    the first stage's first chunk holds the embedding alone. The run ran: it must be expressible, and fit."""
    layout = {
        "model": "llama3.1-405b",
        "gpus": 256,
        "tensor_parallel": 4,
        "pipeline_parallel": 16,
        "interleave": 8,
        "micro_batch": 1,
        "global_batch": 1536,
        "sharding": "zero1",
        "seq": 8192,
    }
    step = api.step(**layout, cluster="gb200-nvl72", dtype="fp4", stack="megatron-core")
    memory = api.memory(**layout, hardware="gb200", dtype="fp4", stack="megatron-core")
    assert step.fits and memory.fits
    assert step.per_gpu_bytes == pytest.approx(memory.per_gpu_bytes, rel=1e-12)
    bf16 = api.memory(**layout, hardware="gb200", stack="megatron-core")
    assert bf16.per_gpu_bytes > memory.per_gpu_bytes + 30e9  # bf16 keeps 16-bit inputs: 195 GB of 197.9
    # the weights stay at 16 bits, which the result says (an upper bound where the recipe gathers NVFP4 weights)
    for result in (memory, step):
        assert any(n.startswith("fp4 (NVFP4): the linear layers' kept inputs at 0.5625 B") for n in result.notes)


def test_memory_refuses_fp4_where_the_device_has_no_fp4_peak(napkin: Run) -> None:
    got = napkin("memory", "--model", "llama3-8b", "--hardware", "h100", "--dtype", "fp4")
    assert got.exit_code == 2
    assert got.stderr.startswith("napkin: error: --dtype: h100-sxm has no fp4 peak; it has: ")
    assert got.stderr.count("\n") == 1
