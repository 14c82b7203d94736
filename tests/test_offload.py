"""Activation CPU offload (``--activation-offload-layers``): the runs that ran with it fit, what stays on the GPU,
what the host link costs the step, and the inputs refused."""

from __future__ import annotations

import json

import pytest

from napkin import api
from napkin.engines.memory import MemoryResult
from napkin.engines.step.offload import offload_stall
from napkin.systems.profiles import resolve
from tests.conftest import Run
from tests.training_runs import BRIDGE_GB200_LLAMA3_70B, FIT_RUNS

GB = 1e9
#: Llama 3 70B (h = 8,192, 64 heads of 128, 8 KV heads, F = 28,672) under Transformer Engine's fp8 recipe keeps per
#: token and layer (tests/test_memory_fp8.py's list, at 70B's shape): the norms' 16-bit inputs 2h + 2h, the fp8
#: inputs of linear_qkv, linear_proj and linear_fc1 h + h + h, q and the attention output 2h + 2h, k and v
#: 2·2·8·128 = 4,096, the fp32 log-sum-exp 4·64 = 256, the SwiGLU input 2·2F and linear_fc2's fp8 input F:
#: 11·8,192 + 4,096 + 256 + 5·28,672 = 237,824 B.
LLAMA3_70B_FP8_PER_TOKEN = 11 * 8192 + 4096 + 256 + 5 * 28672
TOKENS = 2 * 8192  # micro-batch 2 × 8,192


def test_the_bridge_gb200_llama3_70b_runs_fit_with_their_offload() -> None:
    """Megatron-Bridge's Llama 3 70B FP8 on 64 GB200 (25.11: 4,312 and 26.04.01: 4,224 tokens/s/GPU) ran with 40
    of its 80 layers' activations offloaded, as did 25.09's (GBS 128) and its Llama 3.1 405B on 128 (95 of 126;
    tests.training_runs.FIT_RUNS): each fits the 184.31 GiB torch reports for a GB200 (197.9 GB), and without the
    offload none does (napkin says 341 GB for the first without it)."""
    assert len(FIT_RUNS) == 4
    for run in FIT_RUNS:
        got = api.memory(**run.options)
        assert isinstance(got, MemoryResult) and got.fits, run.id
        assert got.memory_bytes == 184.31 * 2**30
        assert not api.memory(**{**run.options, "activation_offload_layers": 0}).fits, run.id
    without = api.memory(**{**BRIDGE_GB200_LLAMA3_70B, "activation_offload_layers": 0})
    assert not without.fits and without.per_gpu_bytes > 300 * GB


def test_only_the_layers_not_offloaded_keep_their_activations_on_the_gpu() -> None:
    """Transformer Engine's synchronizer peaks at (L − k) layers' activations (cpu_offload.py @ d0067d0d): 40 of
    80 layers' on the GPU, the other 40 in CPU memory, each 16,384 tokens × 237,824 B = 3,896,508,416 B."""
    got = api.memory(**BRIDGE_GB200_LLAMA3_70B)
    assert isinstance(got, MemoryResult)
    layer = TOKENS * LLAMA3_70B_FP8_PER_TOKEN
    assert layer == 3_896_508_416
    assert got.breakdown["activations"] == 40 * layer
    assert got.host_bytes_per_gpu == 40 * layer  # no model states offloaded


def test_step_and_memory_agree_under_offload() -> None:
    """The planner's memory path (StepMemory) keeps the same layers as ``memory``."""
    options = {k: v for k, v in BRIDGE_GB200_LLAMA3_70B.items() if k != "hardware"}
    step = api.step(**options, cluster="gb200-nvl72")
    assert step.per_gpu_bytes == pytest.approx(api.memory(**BRIDGE_GB200_LLAMA3_70B).per_gpu_bytes, rel=1e-12)


def test_the_host_links_are_the_datasheets() -> None:
    """Each way: H100/H200 'PCIe Gen5: 128GB/s' (both ways) → 64 GB/s; A100 'PCIe Gen4: 64GB/s' → 32 GB/s;
    GB200's NVLink-C2C, 900 GB/s both ways for the superchip's two GPUs → 900 / 2 / 2 = 225 GB/s."""
    expected = {"h100-sxm": 64e9, "h200-sxm": 64e9, "a100-sxm-80gb": 32e9, "gb200": 225e9}
    for name, bandwidth in expected.items():
        assert resolve(name).profile.host_link_bandwidth == bandwidth, name


def test_the_copy_stall_formula_by_hand() -> None:
    """One 70B fp8 layer (3,896,508,416 B) over an H100's PCIe Gen5 (64 GB/s each way) is c = 60.883 ms. With
    k = 79 of L = 80 layers offloaded and a forward of f = 30 ms a layer, the copies lag the compute by
    k·c − (L − 2)·f = 79 × 60.883 − 78 × 30 = 4,809.76 − 2,340 = 2,469.76 ms; with k = 40 and f = 40 ms,
    40 × 60.883 = 2,435.3 ms < 78 × 40 = 3,120 ms and 60.883 < 39 × 40: hidden (0). Over GB200's C2C (225 GB/s)
    c = 17.318 ms: 79 × 17.318 = 1,368.1 ms < 78 × 30 = 2,340 ms, but c − (L − k − 1)·f = 17.318 − 0 × 30 ms: the
    last layer's copy has no layer to hide under, 17.318 ms."""
    c = 3_896_508_416 / 64e9
    assert c == pytest.approx(0.060883, rel=1e-4)
    assert offload_stall(79, 80, c, 0.030) == pytest.approx(2.46976, rel=1e-4)
    assert offload_stall(40, 80, c, 0.040) == 0.0
    c2c = 3_896_508_416 / 225e9
    assert offload_stall(79, 80, c2c, 0.030) == pytest.approx(0.017318, rel=1e-3)
    assert offload_stall(0, 80, c, 0.030) == 0.0


def test_the_bridge_runs_copies_hide_under_gb200s_compute_but_not_under_pcie() -> None:
    """At the recipe's k = 40 the C2C copies (40 × 17.3 ms = 0.69 s a pass) hide under the other layers' compute;
    offloading 79 layers over an H100's PCIe (79 × 60.9 ms = 4.8 s) cannot hide: the step grows."""
    options = {k: v for k, v in BRIDGE_GB200_LLAMA3_70B.items() if k != "hardware"}
    gb200 = api.step(**options, cluster="gb200-nvl72")
    none = api.step(**{**options, "activation_offload_layers": 0}, cluster="gb200-nvl72")
    assert gb200.step_seconds == pytest.approx(none.step_seconds, rel=1e-12)
    h100 = {**options, "dtype": "fp8", "cluster": "dgx-h100"}
    slow = api.step(**{**h100, "activation_offload_layers": 79})
    assert slow.step_seconds > api.step(**{**h100, "activation_offload_layers": 0}).step_seconds + 2 * 2.0


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--activation-offload-layers", "80"], "below the model's layers (80)"),
        (["--activation-offload-layers", "-1"], "--activation-offload-layers"),
        (["--activation-offload-layers", "x"], "--activation-offload-layers"),
        (["--activation-offload-layers", "4", "--pipeline-parallel", "2"], "pipeline_parallel 1"),
        (["--activation-offload-layers", "4", "--recompute", "full"], "recompute none"),
    ],
)
def test_bad_offload_is_one_line_exit_2(napkin: Run, extra: list[str], says: str) -> None:
    for command in (["memory", "--hardware", "gb200"], ["step", "--cluster", "gb200-nvl72", "--global-batch", "256"]):
        got = napkin(*command, "--model", "llama3-70b", "-G", "64", *extra)
        assert got.exit_code == 2, (command, extra)
        assert says in got.stderr and "Traceback" not in got.stderr
        assert len(got.stderr.strip().splitlines()) == 1


def test_step_on_a_device_without_a_host_link_is_one_line_exit_2(napkin: Run) -> None:
    got = napkin(
        "step",
        "--model",
        "llama3-8b",
        "-G",
        "8",
        "--cluster",
        "hgx-b200",
        "--global-batch",
        "8",
        "--activation-offload-layers",
        "4",
    )
    assert got.exit_code == 2 and "host_link_bandwidth" in got.stderr and "Traceback" not in got.stderr
    assert len(got.stderr.strip().splitlines()) == 1


def test_the_step_reports_its_copy_waits_in_json_and_explain(napkin: Run) -> None:
    """With PP 1, no EP and no CP the 'other' term holds only the offload waits; --json names them, --explain
    cites Megatron-Core and Transformer Engine."""
    flags = ["step", "--model", "llama3-70b", "-G", "64", "--cluster", "dgx-h100", "--sharding", "fsdp"]
    flags += ["--micro-batch", "2", "--global-batch", "256", "--dtype", "fp8", "--activation-offload-layers", "79"]
    data = json.loads(napkin(*flags, "--json").stdout)
    assert data["layout"]["activation_offload_layers"] == 79
    assert data["activation_offload_seconds"] > 0 and data["activation_offload_seconds"] == data["breakdown"]["other"]
    explained = napkin(*flags, "--explain").stdout
    assert "activation offload (exposed, in other)" in explained and "cpu_offload.py" in explained


def test_max_model_scales_the_depth_only_over_layers_that_keep_k_below_l() -> None:
    """Megatron-Core needs k < L: with 31 of Llama 3 8B's layers offloaded, a depth-scaled shape of 31 layers or
    fewer is no layout at all (its GPU activations would count L − k ≤ 0 layers). On one H100 the 32 layers do
    not fit (the model states alone are 16 B × 8 B params), so no depth of this shape does; on eight (ZeRO-3
    pools the states) the deepest that fits keeps more layers than it offloads."""
    one = api.max_model(model="llama3-8b", gpus=1, hardware="h100", activation_offload_layers=31)
    assert not api.memory(model="llama3-8b", gpus=1, hardware="h100", activation_offload_layers=31).fits
    assert one.max_layers is None
    eight = api.max_model(model="llama3-8b", gpus=8, hardware="h100", activation_offload_layers=31)
    assert eight.max_layers is not None and eight.max_layers > 31


@pytest.mark.parametrize("zero", ["0", "00", "0.0", "0e0", " 0 "])
def test_no_offload_is_zero_however_written(napkin: Run, zero: str) -> None:
    """0 ≤ k, as the flag's help says: zero is no offload in every spelling a count takes."""
    got = napkin("memory", "--model", "llama3-8b", "--activation-offload-layers", zero, "--json")
    assert got.exit_code == 0, got.stderr
    assert json.loads(got.stdout)["layout"]["activation_offload_layers"] == 0


def test_a_negative_offload_says_zero_is_allowed(napkin: Run) -> None:
    got = napkin("memory", "--model", "llama3-8b", "--activation-offload-layers", "-1")
    assert got.exit_code == 2 and len(got.stderr.strip().splitlines()) == 1
    assert "--activation-offload-layers" in got.stderr and "0 or a positive whole number" in got.stderr


def test_a_stack_without_activation_offload_refuses_it(napkin: Run) -> None:
    """Megatron-Core's cpu_offloading is the offload napkin models; torchtitan and DeepSpeed state none, so memory and
    step refuse it there with one line, as they refuse a parallelism a stack does not run."""
    for command, extra in (("memory", ()), ("step", ("--global-batch", "64"))):
        for name in ("torchtitan", "deepspeed"):
            offload = ("--stack", name, "--activation-offload-layers", "40")
            r = napkin(command, "--model", "llama3-70b", "--gpus", "64", *extra, *offload)
            assert r.exit_code == 2 and r.stderr.startswith(
                f"napkin: error: --activation-offload-layers: the stack {name} does not offload"
            ), r.stderr
