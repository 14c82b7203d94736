"""Weights that leave no room for a KV cache: one line naming --weights, exit 2, and only formats smaller than
the one given suggested (DeepSeek-V3, 671 B parameters on TP 4 of H100 80GB: about 336 / 168 / 87 GB per GPU)."""

from __future__ import annotations

import pytest

from tests.conftest import Run

ARGS = ("traffic", "--model", "deepseek-v3", "--tensor-parallel", "4", "--rate", "2", "--prompt", "1000")


@pytest.mark.parametrize(
    ("weights", "suggested"),
    [("bf16", ", or smaller --weights (fp8, int4)"), ("fp8", ", or smaller --weights (int4)"), ("int4", "")],
)
def test_no_room_for_a_kv_cache_suggests_only_smaller_weights(napkin: Run, weights: str, suggested: str) -> None:
    r = napkin(*ARGS, "--output", "200", "--weights", weights)
    assert r.exit_code == 2
    assert r.stderr.startswith("napkin: error: --weights:") and r.stderr.count("\n") == 1
    assert f"of {weights} weights per GPU leave no room for a KV cache on h100-sxm" in r.stderr
    assert r.stderr.rstrip().endswith("use more GPUs or --tensor-parallel" + suggested)
