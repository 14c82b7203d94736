"""``napkin bench all-reduce`` on gloo with 2 CPU processes: what it records and how --save feeds the model."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from napkin.errors import NapkinError
from tests.conftest import Run, needs_torch

pytestmark = [needs_torch, pytest.mark.slow, pytest.mark.torch]

SIZE = 4 * 2**20  # 4 MiB: large enough to be bandwidth-bound on gloo, small enough to be quick


def test_gloo_bench_records_busbw_and_feeds_the_measured_bandwidth(napkin: Run) -> None:
    result = napkin(
        "bench",
        "all-reduce",
        "--backend",
        "gloo",
        "--world-size",
        "2",
        "--budget",
        "120",  # a ceiling, not a duration: each size stops after 2 s, so this leaves start-up any slack it needs
        "--sizes",
        "1MiB,4MiB",
        "--json",
        "--save",
        "--cluster",
        "dgx-h100",
    )
    assert result.exit_code == 0, result.stderr
    # How long the sweep takes, and how its busbw compares with plain torch.distributed timed beside it, are
    # machine-speed questions: examples/bench_agreement.py and examples/bench_budget.py measure them.
    records = json.loads(result.stdout)
    assert [r["bytes"] for r in records] == [2**20, SIZE]
    for rec in records:
        assert set(rec) == {"backend", "world_size", "op", "bytes", "seconds", "algbw", "busbw"}
        assert rec["backend"] == "gloo" and rec["world_size"] == 2 and rec["op"] == "all-reduce"
        assert rec["algbw"] == pytest.approx(rec["bytes"] / rec["seconds"])
        assert rec["busbw"] == pytest.approx(rec["algbw"] * 2 * (2 - 1) / 2)  # nccl-tests: 2(n−1)/n
        assert 1e6 < rec["busbw"] < 1e12  # between 1 MB/s and 1 TB/s: a CPU copy, not a broken timer
    # --save → --bandwidth measured: t = latency + 2(n−1)/n · S / saved busbw.
    best = max(r["busbw"] for r in records)
    used = napkin(
        "comm",
        "all-reduce",
        "--bytes",
        "1GB",
        "--gpus",
        "8",
        "-c",
        "dgx-h100",
        "--algorithm",
        "ring",
        "--bandwidth",
        "measured",
        "--json",
    )
    assert used.exit_code == 0, used.stderr
    data = json.loads(used.stdout)
    assert data["measured"] and data["bottleneck_bandwidth"] == pytest.approx(best)
    assert data["seconds"] == pytest.approx(8.4e-6 + 14 * 3.4e-6 + 1.75 * 1e9 / best)  # launch + 14 hops + S·bus/B


def _children() -> list[int]:
    me = str(os.getpid())
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc to look for orphans")
def test_a_dying_rank_ends_the_run_with_one_message_and_no_orphans() -> None:
    import torch

    from napkin.live import bench_comm

    with pytest.raises(NapkinError, match=r"rank \d of 2 exited with code 1: ValueError: op 'no-such-op'"):
        bench_comm._launch(torch, "no-such-op", "gloo", 2, 120.0, [65536], None)  # a ceiling: the rank fails at once
    assert _children() == []


def test_bad_inputs(napkin: Run) -> None:
    for args, message in [
        (["--world-size", "1"], "--world-size: 1 must be at least 2"),
        (["--budget", "abc"], "--budget: 'abc' is not understood"),
        (["--save"], "--save: give --cluster NAME"),
    ]:
        result = napkin("bench", "reduce-scatter", *args)
        assert result.exit_code == 2, (args, result.stderr)
        assert result.stderr.startswith("napkin: error: ") and message in result.stderr


def test_nccl_without_a_gpu_is_a_usage_error(napkin: Run) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    result = napkin("bench", "all-reduce", "--backend", "nccl")
    assert result.exit_code == 2
    assert (
        result.stderr
        == "napkin: error: --backend nccl: this torch has no NCCL or sees no CUDA device; use --backend gloo\n"
    )
