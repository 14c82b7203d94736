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
