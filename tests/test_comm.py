"""The collective-time model: hand-worked cases, nccl-tests definitions, published figures, invariants, CLI."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from napkin.engines import comm
from napkin.errors import UsageError
from napkin.systems import cluster
from tests.conftest import Run

H100 = cluster.find("dgx-h100").cluster.fabric()
US = 1e-6
BASE = 8.4 * US  # NCCL's launch latency per collective, Simple protocol (tuning.cc baseLat)


def test_bus_factors_are_nccl_tests_definitions() -> None:
    # nccl-tests doc/PERFORMANCE.md: all-reduce 2(n-1)/n; all-gather, reduce-scatter (n-1)/n; broadcast 1.
    assert comm.bus_factor("all-reduce", 8) == pytest.approx(1.75)
    assert comm.bus_factor("all-gather", 8) == pytest.approx(0.875)
    assert comm.bus_factor("reduce-scatter", 4) == pytest.approx(0.75)
    assert comm.bus_factor("all-to-all", 2) == pytest.approx(0.5)
    assert comm.bus_factor("broadcast", 8) == comm.bus_factor("send-recv", 2) == 1.0


def test_fabric_numbers_are_per_direction_and_bytes() -> None:
    # 900 GB/s NVLink 4 is both directions: 450 GB/s each way, × 0.82 NCCL efficiency.
    assert H100.up_bandwidth == pytest.approx(450e9 * 0.82)
    # 8 × 400 Gbit/s NICs shared by 8 GPUs: 50 GB/s (bytes) per GPU.
    assert H100.out_bandwidth_per_device == pytest.approx(50e9)
    assert H100.nvls_bandwidth == pytest.approx(450e9 * 0.61)
    assert H100.out_latency == pytest.approx(14 * US) and H100.up_latency == pytest.approx(3.4 * US)


def test_done_when_70b_bf16_on_1024_h100(napkin: Run) -> None:
    """The issue's acceptance case, worked by hand.

    S = 70e9 × 2 B = 140 GB; 1024 GPUs = 8 per node × 128 nodes. NVLS inside the node (S / 274.5 GB/s =
    0.510 s) is faster than the network stage: each node's 8 × 50 GB/s NICs carry 2(N−1)/N · S =
    2 × 127/128 × 140 GB = 277.8 GB → 0.6945 s. Latency: NCCL's 8.4 µs launch (baseLat, Simple) + 2 NVLS
    (25 µs) + 2·log2(128) = 14 network hops (14 µs).
    """
    result = napkin(
        "comm", "all-reduce", "--params", "70B", "--dtype", "bf16", "--gpus", "1024", "--cluster", "dgx-h100", "--json"
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    by_hand = 2 * 127 / 128 * 140e9 / (8 * 50e9) + BASE + 2 * 25 * US + 14 * 14 * US
    assert data["seconds"] == pytest.approx(by_hand, rel=1e-12)
    assert data["bottleneck"] == "InfiniBand NDR (ConnectX-7)"
    assert data["algorithm"] == "nvls"
    assert data["algbw"] == pytest.approx(140e9 / by_hand)
    assert data["busbw"] == pytest.approx(140e9 / by_hand * 2 * 1023 / 1024)
    assert set(data) >= {"seconds", "algbw", "busbw", "algorithm", "bottleneck"}


def test_ring_across_nodes_is_limited_by_nvlink_after_efficiency() -> None:
    # Ring: each rank sends 2(n−1)/n·S over NVLink (369 GB/s) and each node the same over 8 NICs
    # (400 GB/s): NVLink is the bottleneck; 2·1023 steps of a 14 µs network hop (Simple protocol: at 140 GB
    # LL128's and LL's shorter hops cost more bandwidth than they save).
    r = comm.collective_time("all-reduce", 140e9, 1024, H100, algorithm="ring")
    assert r.bottleneck == "NVLink 4 + NVSwitch"
    assert r.seconds == pytest.approx(BASE + 2 * 1023 * 14 * US + 2 * 1023 / 1024 * 140e9 / 369e9)
    assert r.protocol == "Simple"


def test_data_parallel_group_with_one_rank_per_node_gets_one_nic() -> None:
    # TP = 8 fills each node, so the DP group has 1 rank per node and one GPU's share of the NICs.
    r = comm.collective_time("all-reduce", 140e9, 128, H100, ranks_per_domain=1)
    assert r.algorithm == "tree" and r.bottleneck.startswith("InfiniBand")
    assert r.seconds == pytest.approx(2 * 127 / 128 * 140e9 / 50e9 + BASE + 2 * 7 * 14 * US)
    assert r.busbw == pytest.approx(50e9, rel=1e-3)


def test_intra_node_collectives() -> None:
    # Tensor-parallel reduce-scatter of 1 GB on 8 GPUs: 7 steps × 3.4 µs + 7/8 · 1 GB / 369 GB/s.
    rs = comm.collective_time("reduce-scatter", 1e9, 8, H100)
    assert rs.seconds == pytest.approx(BASE + 7 * 3.4 * US + 0.875e9 / 369e9)
    assert rs.busbw < H100.up_bandwidth
    # Pipeline send/recv across nodes: one hop + S / 50 GB/s.
    p2p = comm.collective_time("send-recv", 100e6, 2, H100, ranks_per_domain=1)
    assert p2p.seconds == pytest.approx(14 * US + 100e6 / 50e9)
    # MoE all-to-all over 64 GPUs on 8 nodes: 7/64 of S over NVLink, 56/64 over the GPU's NIC share.
    a2a = comm.collective_time("all-to-all", 1e9, 64, H100)
    assert a2a.seconds == pytest.approx(BASE + 63 * 14 * US + 56 / 64 * 1e9 / 50e9)
    assert a2a.bottleneck.startswith("InfiniBand")


@pytest.mark.parametrize(("algorithm", "published"), [("ring", 370e9), ("nvls", 480e9)])
def test_the_h100_nvlink_efficiencies_reproduce_the_figures_they_were_fitted_to(
    algorithm: str, published: float
) -> None:
    """Calibration, not validation: nccl-tests issue #212 (S. Jeaugey, NVIDIA) gives ring busbw ~370 GB/s and
    NVLS busbw ~480 GB/s on 8 × H100, and dgx-h100's NVLink efficiencies (0.82, 0.61) were taken from exactly
    these two figures. This checks the profile and the α-β model reproduce them; it is no evidence of accuracy."""
    fabric = cluster.find("dgx-h100").cluster.fabric()
    r = comm.collective_time("all-reduce", 8 * 2**30, 8, fabric, algorithm=algorithm)
    assert r.busbw == pytest.approx(published, rel=0.02)


def test_h800_nvls_all_reduce_is_the_published_measurement() -> None:
    """Validation, on a figure the model never saw: NVIDIA/nccl issue #1374 measured NVLS all-reduce busbw 215 GB/s
    on 8 × H800 (NVLink 400 GB/s); napkin applies the efficiencies fitted on H100 to the H800's own links. The
    only independent collective-bandwidth point in the suite (the A100 NVLink efficiency is itself fitted to
    nccl-tests issue #149)."""
    fabric = cluster.find("hgx-h800").cluster.fabric()
    r = comm.collective_time("all-reduce", 8 * 2**30, 8, fabric, algorithm="nvls")
    assert r.busbw == pytest.approx(215e9, rel=0.02)


def test_measured_bus_bandwidth_replaces_the_links() -> None:
    r = comm.collective_time("all-reduce", 1e9, 8, H100, algorithm="ring", bus_bandwidth=100e9)
    assert r.seconds == pytest.approx(BASE + 14 * 3.4 * US + 1.75 * 1e9 / 100e9)
    assert r.measured and r.bottleneck == "measured"


def test_small_messages_take_the_low_latency_protocols() -> None:
    # 1 MB all-reduce on 8 H100s (tensor-parallel decode): LL's 0.6 µs hops beat Simple's 3.4 µs at half the
    # bandwidth: 6.8 µs launch + 14 × 0.6 µs + 1.75 MB / (369 GB/s / 2) = 24.7 µs (Simple: 61 µs).
    r = comm.collective_time("all-reduce", 1e6, 8, H100)
    assert r.protocol == "LL" and r.algorithm == "ring"
    assert r.seconds == pytest.approx(6.8 * US + 14 * 0.6 * US + 1.75e6 / (369e9 / 2))
    simple = BASE + 14 * 3.4 * US + 1.75e6 / 369e9
    assert r.seconds < simple


def test_fast_path_equals_result() -> None:
    for op in comm.Op:
        n = 2 if op is comm.Op.send_recv else 256
        fast = comm.collective_seconds(op, 3e8, n, H100)
        assert fast == comm.collective_time(op, 3e8, n, H100).seconds


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"group_size": 0}, "at least 2 ranks"),
        ({"group_size": 12}, "12 is not a multiple of 8"),
        ({"group_size": 16, "ranks_per_domain": 9}, "between 1 and the 8"),
        ({"algorithm": "tree", "op": "all-gather"}, "all-gather has no tree model"),
    ],
)
def test_engine_errors_name_the_input(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"op": "all-reduce", "nbytes": 1e9, "group_size": 16, "cluster": H100} | kwargs
    with pytest.raises(UsageError, match=message):
        comm.collective_time(**args)  # type: ignore[arg-type]


def test_one_domain_cluster_cannot_span() -> None:
    tpu = cluster.find("tpu-v5p-slice").cluster.fabric()
    with pytest.raises(UsageError, match="no scale-out network"):
        comm.collective_time("all-reduce", 1e9, 16, tpu, ranks_per_domain=8)


# ------------------------------------------------------------------------------------------ invariants

OPS = st.sampled_from([op for op in comm.Op if op is not comm.Op.send_recv])
SIZES = st.floats(min_value=1.0, max_value=1e12)
GROUPS = st.sampled_from([2, 4, 8, 16, 64, 1024])


@given(op=OPS, size=SIZES, n=GROUPS, more=st.floats(min_value=1.001, max_value=100))
def test_time_grows_with_bytes(op: comm.Op, size: float, n: int, more: float) -> None:
    assert comm.collective_seconds(op, size * more, n, H100) > comm.collective_seconds(op, size, n, H100)


@given(op=OPS, size=SIZES, n=GROUPS, slower=st.floats(min_value=1.01, max_value=100))
def test_time_grows_with_latency(op: comm.Op, size: float, n: int, slower: float) -> None:
    fabric = replace(
        H100,
        up_latency=H100.up_latency * slower,
        out_latency=H100.out_latency * slower,
        nvls_latency=H100.nvls_latency * slower,
    )
    assert comm.collective_seconds(op, size, n, fabric) > comm.collective_seconds(op, size, n, H100)


@given(
    op=st.sampled_from([comm.Op.all_reduce, comm.Op.all_gather, comm.Op.reduce_scatter]),
    size=SIZES,
    n=GROUPS,
    r=st.sampled_from([1, 2, 4, 8]),
)
def test_ring_busbw_never_exceeds_the_links(op: comm.Op, size: float, n: int, r: int) -> None:
    if n % r:
        return
    result = comm.collective_time(op, size, n, H100, ranks_per_domain=min(r, n), algorithm="ring")
    links = []
    if result.ranks_per_domain > 1:
        links.append(H100.up_bandwidth)
    if result.domains > 1:
        links.append(result.ranks_per_domain * H100.out_bandwidth_per_device)
    assert result.busbw <= min(links) * (1 + 1e-9)
    assert math.isfinite(result.seconds)


# ------------------------------------------------------------------------------------------ CLI


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bytes", "1GB", "--gpus", "0"], "--gpus: '0' must be positive"),
        (["--bytes", "abc", "--gpus", "8"], "--bytes: 'abc' is not understood"),
        (["--bytes", "1GB", "--gpus", "12"], "--gpus: 12 is not a multiple of 8 ranks per node on dgx-h100"),
        (["--gpus", "8"], "give --bytes or --params (with --dtype), one of them"),
        (["--bytes", "1GB", "--gpus", "16", "--algorithm", "pairwise"], "all-reduce has no pairwise model"),
        (["--bytes", "1GB", "--bandwidth", "measured"], "no saved all-reduce measurement for dgx-h100"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(napkin: Run, args: list[str], message: str) -> None:
    result = napkin("comm", "all-reduce", "--cluster", "dgx-h100", *args)
    assert result.exit_code == 2
    assert result.stderr.startswith("napkin: error: ") and message in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_cli_unknown_cluster(napkin: Run) -> None:
    result = napkin("comm", "all-reduce", "--bytes", "1GB", "--cluster", "dgx-z900")
    assert result.exit_code == 2 and "unknown cluster 'dgx-z900'" in result.stderr and "dgx-h100" in result.stderr


def test_cli_explain_names_sources(napkin: Run) -> None:
    result = napkin("comm", "all-gather", "--bytes", "1GiB", "--gpus", "16", "-c", "dgx-a100", "--explain")
    assert result.exit_code == 0, result.stderr
    assert "nccl-tests" in result.stdout and "tuning.cc" in result.stdout and "bottleneck" in result.stdout


def test_cli_json_is_strict(napkin: Run) -> None:
    for op in ("all-reduce", "reduce-scatter", "all-gather", "all-to-all", "broadcast"):
        result = napkin("comm", op, "--bytes", "256MiB", "--gpus", "64", "-c", "gb200-nvl72", "--json", "--explain")
        assert result.exit_code == 0, result.stderr
        data = json.loads(result.stdout, parse_constant=lambda c: pytest.fail(f"non-strict JSON {c}"))
        assert data["domains"] == 1 and data["steps"]


def test_comm_defaults_to_the_cluster_step_would_take(napkin: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new user found that comm required --cluster where step and inference default it: it now takes the cluster
    built from the default device ($NAPKIN_HARDWARE, else h100), as step does."""
    args = ("comm", "all-reduce", "--bytes", "1GB", "--json")
    plain, named = napkin(*args), napkin(*args, "--cluster", "dgx-h100")
    assert plain.exit_code == 0 and json.loads(plain.stdout) == json.loads(named.stdout)
    monkeypatch.setenv("NAPKIN_HARDWARE", "b200")
    assert napkin(*args).stdout.count("hgx-b200") >= 1
