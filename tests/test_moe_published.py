"""The Megatron-Bridge DGX-H100 MoE rows napkin validates on, against the figures Megatron-Bridge published for them
(docs/performance-summary-archive.md @ 067f987d): the layout and throughput each row carries, and the work per token
those figures imply, which napkin must not undercount (its EP 8 rows are predicted 72-226 % fast: README, 'Software
stacks', the Megatron-Core MoE paragraph)."""

from __future__ import annotations

from typing import Final

import pytest

from tests.training_runs import RUNS, cases

#: id → (GPUs, GBS, MBS, TP, PP, VP, EP, tokens/s/GPU, model TFLOP/s/GPU) as the archive's DGX-H100 rows print them
#: (archive line): the 26.02-26.06 releases of Qwen3-30B-A3B, Qwen3-235B-A22B and GPT-OSS 120B. The 26.02.01
#: Qwen3-30B-A3B row prints 26.02's PP 2 / VP 12 / EP 8; tests/training_runs.py runs it at its release's recipe
#: (EP 16, PP 1: configs/qwen/qwen3_workload_base_configs.py @ v0.3.1), so only its throughput is compared.
PUBLISHED: Final[dict[str, tuple[int, int, int, int, int, int, int, int, int]]] = {
    "mb-26.06-qwen3-30b-a3b-g16": (16, 1024, 1, 1, 1, 1, 16, 8826, 203),  # line 132
    "mb-26.04.01-qwen3-30b-a3b-g16": (16, 1024, 1, 1, 1, 1, 16, 8960, 206),  # line 248
    "mb-26.04-qwen3-30b-a3b-g16": (16, 1024, 1, 1, 1, 1, 16, 8901, 205),  # line 348
    "mb-26.02.01-qwen3-30b-a3b-g16": (16, 1024, 1, 1, 2, 12, 8, 9058, 208),  # line 445
    "mb-26.02-qwen3-30b-a3b-g16": (16, 1024, 1, 1, 2, 12, 8, 5113, 118),  # line 530
    "mb-26.04.01-qwen3-235b-a22b-g256": (256, 8192, 1, 2, 8, 4, 32, 1712, 253),  # line 258
    "mb-26.04-qwen3-235b-a22b-g256": (256, 8192, 1, 2, 8, 4, 32, 1686, 250),  # line 357
    "mb-26.02.01-qwen3-235b-a22b-g256": (256, 8192, 1, 2, 8, 4, 32, 1611, 238),  # line 454
    "mb-26.02-qwen3-235b-a22b-g256": (256, 8192, 1, 2, 8, 4, 32, 1633, 242),  # line 540
    "mb-26.04.01-gpt-oss-120b-g64": (64, 1280, 1, 1, 4, 1, 8, 5824, 158),  # line 238
    "mb-26.04-gpt-oss-120b-g64": (64, 1280, 1, 1, 4, 1, 8, 5810, 158),  # line 338
    "mb-26.02.01-gpt-oss-120b-g64": (64, 1280, 1, 1, 4, 1, 8, 5984, 163),  # line 435
    "mb-26.02-gpt-oss-120b-g64": (64, 1280, 1, 1, 4, 1, 8, 5993, 163),  # line 520
}

_RECIPE_LAYOUT: Final = frozenset({"mb-26.02.01-qwen3-30b-a3b-g16"})


@pytest.mark.parametrize("rid", sorted(PUBLISHED))
def test_each_moe_row_carries_the_layout_and_throughput_megatron_bridge_published(rid: str) -> None:
    gpus, gbs, mbs, tp, pp, vp, ep, tokens, _ = PUBLISHED[rid]
    run = next(r for r in RUNS if r.id == rid)
    assert (run.gpus, run.batch, run.micro_batch, run.seq, run.tokens_per_gpu) == (gpus, gbs, mbs, 4096, tokens)
    if rid not in _RECIPE_LAYOUT:
        assert (run.tp, run.pp, run.vp, run.ep) == (tp, pp, vp, ep)
    else:  # the release's recipe: EP 16 across the two nodes, no pipeline
        assert (run.tp, run.pp, run.vp, run.ep) == (1, 1, 1, 16)
    assert run.role == "validation"


def test_napkin_does_not_undercount_the_work_of_the_moe_rows() -> None:
    """Megatron-Bridge's model TFLOP/s over its tokens/s is the work it counts per token: 23.0 GFLOP for
    Qwen3-30B-A3B, 148 for Qwen3-235B-A22B, 27.2 for GPT-OSS 120B. napkin's 6N + attention is no less (within 1 %
    of rounding the published TFLOP/s): its too-fast EP 8 predictions are not work it leaves out of its count. Its N
    holds the input embedding, which Megatron-Bridge's count leaves out (Qwen3-30B-A3B: 6 x 0.31B = 1.9 GFLOP of its
    25.0; GPT-OSS: 3.5 of 36.2, whose remaining 32.7 Megatron-Bridge counts as 27.2)."""
    by_id = {c.id: c for c in cases()}
    for rid, (*_, tokens, tflops) in PUBLISHED.items():
        published = tflops * 1e12 / tokens
        counted = by_id[rid].model.model_flops_per_token()
        assert counted >= 0.99 * published, rid
        assert counted <= 1.4 * published, rid
