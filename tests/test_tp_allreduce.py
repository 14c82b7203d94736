"""The serving engines' TP all-reduce: the kernel latencies napkin reads off the published microbenchmarks of
their kernels (8 × H100 and 6 × H100 on NVLink 4; a calibration, not a validation: these are the points the
α values come from), and the dispatch vLLM's source fixes."""

from __future__ import annotations

import pytest

from napkin.api.system_inputs import get_cluster
from napkin.engines.tp_allreduce import CUSTOM_MAX_BYTES, allreduce_pieces, allreduce_seconds, one_shot

H100 = get_cluster("dgx-h100")[0].fabric()


@pytest.mark.parametrize(
    ("nbytes", "n", "published"),
    [
        (8192, 8, 5.7e-6),  # sgl-project/sglang PR 2904: custom all-reduce, 8 x H100, 4,096 bf16 values
        (524288, 6, 15e-6),  # vllm-project/vllm PR 24111: ca_2stage, 6 x H100, (32, 8192) bf16, 0.50 MB
        (1048576, 6, 17e-6),  # same table, (64, 8192), 1 MB
    ],
)
def test_custom_all_reduce_times_reproduce_the_microbenchmarks_they_are_read_off(
    nbytes: int, n: int, published: float
) -> None:
    assert allreduce_seconds(nbytes, n, H100, custom=True) == pytest.approx(published, rel=0.15)


def test_vllm_dispatch_one_shot_two_shot_then_nccl() -> None:
    # csrc/custom_all_reduce.cuh: one-shot at 2 GPUs, below 512 KiB at <= 4, below 256 KiB at <= 8
    assert one_shot(10 * 2**20, 2) and one_shot(511 * 1024, 4) and not one_shot(300 * 1024, 8)
    assert not one_shot(512 * 1024, 4) and one_shot(255 * 1024, 8)
    nccl = allreduce_seconds(CUSTOM_MAX_BYTES + 2, 8, H100, custom=True)
    assert nccl == allreduce_seconds(CUSTOM_MAX_BYTES + 2, 8, H100, custom=False)


def test_pieces_are_the_all_reduce_at_every_token_count() -> None:
    token = 8192 * 2.0  # Llama-3.1 70B's hidden size, 16-bit
    pieces = allreduce_pieces(token, 8, H100, custom=True)
    for tokens in (1, 8, 15, 16, 17, 100, 256, 511, 512):  # one-shot below 16 tokens, two-shot to 512
        fixed, per = next((a, b) for below, a, b in pieces if tokens < below)
        assert fixed + per * tokens == pytest.approx(allreduce_seconds(tokens * token, 8, H100, custom=True))


def test_a_tp_group_beyond_one_node_crosses_the_scale_out_network() -> None:
    """TP 16 on DGX H100s spans two nodes: each decode all-reduce crosses InfiniBand, whose per-hop latency alone
    bounds it from below, where it had been timed as one 16-GPU NVLink domain."""
    from napkin import api

    fabric = H100
    one = api.inference(model="llama3-70b", hardware="h100", tensor_parallel=16, context=2048)
    assert "InfiniBand" in one.communication and "across 2 domains of 8" in one.communication
    crossing = allreduce_seconds(8192 * 2.0, 16, fabric, custom=True)
    assert crossing >= fabric.out_latency  # NCCL, not the 6 µs peer-to-peer kernel within NVLink
    assert crossing > 2 * allreduce_seconds(8192 * 2.0, 8, fabric, custom=True)


def test_a_tp_group_that_cannot_span_whole_nodes_is_refused_naming_the_flag() -> None:
    from typer.testing import CliRunner

    from napkin.cli import app

    out = CliRunner().invoke(app, ["inference", "--model", "gpt3-175b", "--tensor-parallel", "12"])
    assert out.exit_code == 2
    assert "--tensor-parallel: TP 12 spans more than one scale-up domain of dgx-h100 (8 devices" in out.stderr
    assert "a multiple of 8" in out.stderr
    implied = CliRunner().invoke(app, ["inference", "--model", "gpt3-175b", "--hardware", "h100", "--gpus", "12"])
    assert implied.exit_code == 2 and implied.stderr.count("\n") == 1  # TP not given: the GPUs it came from
    assert (
        "--gpus (12): --tensor-parallel defaults to every GPU; TP 12 spans more than one scale-up domain of dgx-h100 (8 devices"
        in implied.stderr
    )
    traffic = ["traffic", "--model", "gpt3-175b", "--hardware", "h100", "--rate", "1", "--prompt", "9", "--output", "9"]
    staged = CliRunner().invoke(app, [*traffic, "--gpus", "24", "--pipeline-parallel", "2"])
    assert staged.exit_code == 2 and "--gpus per pipeline stage (24 / 2): --tensor-parallel defaults" in staged.stderr


def test_a_device_no_cluster_is_built_from_keeps_its_tp_group_within_what_its_interconnect_joins() -> None:
    """An H100 PCIe's NVLink bridge joins 2 GPUs and an HGX A100 40GB's NVSwitch 8: TP 4 and TP 64 had been timed as
    one domain of that size at the bridge's or the switch's bandwidth (a reviewer's find). serve-plan searches
    within it too."""
    from typer.testing import CliRunner

    from napkin.cli import app

    for hardware, tp, joined in (("h100-pcie", "4", 2), ("a100-sxm-40gb", "64", 8)):
        out = CliRunner().invoke(app, ["inference", "--model", "llama3-70b", "--hardware", hardware, "-t", tp])
        assert out.exit_code == 2, out.stdout
        assert f"--tensor-parallel: TP {tp} spans more than the {joined} {hardware} devices" in out.stderr
    pair = CliRunner().invoke(app, ["inference", "--model", "llama3-8b", "--hardware", "h100-pcie", "-t", "2"])
    assert pair.exit_code == 0 and "NVLink bridge (2 GPUs)" in pair.stdout
