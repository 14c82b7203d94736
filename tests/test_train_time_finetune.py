"""train-time --mfu predicted with --finetune: the MFU is that of the layouts plan --finetune searches (DDP or
FSDP/ZeRO-3 over data parallelism), not of full training's, and the QLoRA dequantization, which the plan's step
time counts, is not listed as left out."""

from __future__ import annotations

import json

import pytest

from napkin import api
from tests.conftest import Run

TRAIN = ("train-time", "--model", "llama3-8b", "--tokens", "1T", "--gpus", "8", "--mfu", "predicted")


@pytest.mark.parametrize("method", ["lora", "qlora"])
def test_a_predicted_mfu_for_adapters_is_the_adapter_plans(napkin: Run, method: str) -> None:
    r = napkin(*TRAIN, "--finetune", method, "--json")
    assert r.exit_code == 0, r.stderr
    data = json.loads(r.stdout)
    best = api.plan(model="llama3-8b", gpus=8, global_batch_tokens="4M", finetune=method, top=1).layouts[0]
    full = api.plan(model="llama3-8b", gpus=8, global_batch_tokens="4M", top=1).layouts[0]
    assert data["mfu"] == pytest.approx(best.mfu) and data["layout_text"] == best.layout_text
    # adapters run data-parallel only, replicated or ZeRO-3-sharded: never full training's zero2 #1
    assert data["layout"]["sharding"] in ("none", "zero3") and full.layout.sharding == "zero2"
    assert f"{method} adapters (validated: full training)" in r.stderr


def test_qlora_dequantization_is_left_out_only_of_a_given_mfu(napkin: Run) -> None:
    predicted = napkin(*TRAIN, "--finetune", "qlora")
    given = napkin(*TRAIN[:-2], "--finetune", "qlora")
    assert predicted.exit_code == given.exit_code == 0
    assert "dequantization before each matmul" not in predicted.stderr
    assert "dequantization before each matmul" in given.stderr


#: NVIDIA/dgxc-benchmarking llama3.1/README_70b.md @ 143b90dd: Llama 3.1 70B, NeMo 24.09 BF16, TP 4, PP 4, CP 2,
#: VP 5, MBS 1, GBS 128 on 64 H100s (sequence 8,192): "Time to train 1T tokens in days: 162.48".
DGXC_70B = {
    "model": "llama3.1-70b",
    "tokens": "1T",
    "gpus": 64,
    "cluster": "dgx-h100",
    "tensor_parallel": 4,
    "pipeline_parallel": 4,
    "context_parallel": 2,
    "interleave": 5,
    "micro_batch": 1,
    "global_batch": 128,
}


def test_train_time_at_a_published_layout_is_that_layout_s_step() -> None:
    """With a layout, --mfu predicted times that layout as step does, not the plan's #1: NVIDIA's own time to
    train 1T tokens at its benchmark's layout, 162.48 days, within 10 % (a validation row: +5 % in tokens/s)."""
    at = api.train_time(mfu="predicted", **DGXC_70B)
    assert at.days == pytest.approx(162.48, rel=0.10)
    assert at.layout is not None and at.layout.describe(compact=True) == "TP4 PP4v5 CP2 DP2 SP zero1"
    planned = api.train_time(
        mfu="predicted",
        **{k: v for k, v in DGXC_70B.items() if k == "model" or k in ("tokens", "gpus", "cluster", "global_batch")},
    )
    assert planned.layout is not None and planned.days < at.days  # the plan's #1 is faster than NVIDIA's layout


def test_train_time_takes_the_global_batch_in_sequences_as_step_and_plan_do(napkin: Run) -> None:
    """A new user copied --global-batch from step into train-time: 'No such option'. The API took it already."""
    args = ("train-time", "--model", "llama3-8b", "--tokens", "1T", "--gpus", "8", "--cluster", "dgx-h100")
    by_sequences = napkin(*args, "--mfu", "predicted", "--global-batch", "128", "--json")
    by_tokens = napkin(*args, "--mfu", "predicted", "--global-batch-tokens", "1M", "--json")
    assert by_sequences.exit_code == 0 and by_tokens.exit_code == 0, by_sequences.stderr
    assert json.loads(by_sequences.stdout)["seconds"] == json.loads(by_tokens.stdout)["seconds"]  # 128 × 8,192 = 1M
    alone = napkin(*args, "--global-batch", "128")
    assert alone.exit_code == 2 and "--global-batch: used only with --mfu predicted" in alone.stderr


def test_a_layout_is_refused_without_a_predicted_mfu_and_where_it_does_not_fit(napkin: Run) -> None:
    no_mfu = napkin("train-time", "--model", "llama3-8b", "--tokens", "1T", "--gpus", "8", "-t", "2")
    base = ("train-time", "--model", "llama3-8b", "--tokens", "1T", "--gpus", "8", "--mfu", "predicted")
    recompute = napkin(*base, "--recompute", "full")
    assert recompute.exit_code == 2 and "give a layout (--tensor-parallel … --sharding)" in recompute.stderr
    none = napkin(*base, "--finetune", "qlora", "--recompute", "none")  # the plan's #1 recomputes fully: not hidden
    assert none.exit_code == 2 and "--recompute: with --mfu predicted the planner chooses" in none.stderr
    assert no_mfu.exit_code == 2 and "--tensor-parallel: used only with --mfu predicted" in no_mfu.stderr
    args = ("train-time", "--model", "llama3-70b", "--tokens", "1T", "--gpus", "8", "--mfu", "predicted", "-t", "1")
    too_big = napkin(*args)
    assert too_big.exit_code == 2 and too_big.stderr.count("\n") == 1
    assert "--mfu: predicted at the layout given (TP1 PP1 DP8 zero1 b1; what was not given is step's default)" in (
        too_big.stderr
    )
    assert "which does not fit:" in too_big.stderr and "per GPU of 85.5 GB" in too_big.stderr


def test_a_fine_tune_gives_no_tokens_per_parameter(napkin: Run) -> None:
    """Tokens per parameter measures a pretraining budget (Chinchilla's ~20); a new user read '0.012 per param' on
    a LoRA run as a warning."""
    lora = napkin("train-time", "--model", "llama3-8b", "--tokens", "100M", "--gpus", "8", "--finetune", "lora")
    pretrain = napkin("train-time", "--model", "llama3-8b", "--tokens", "1T", "--gpus", "8")
    assert lora.exit_code == 0 and "per param" not in lora.stdout
    assert pretrain.exit_code == 0 and "per param)" in pretrain.stdout
