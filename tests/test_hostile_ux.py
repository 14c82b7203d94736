"""A demanding new user's mistakes (issues 21, 23, 24): each is one line naming the input, exit 2, no traceback;
the formats and bounds accepted are said in the message."""

from __future__ import annotations

import pytest

import napkin
from napkin.errors import UsageError
from tests.conftest import Run

STEP = ("-m", "llama3-8b", "-G", "8", "--global-batch", "64", "-H", "b200")
TRAINING_TAKES = "training takes fp32, tf32, bf16, fp16, fp8 or fp4"


@pytest.mark.parametrize("dtype", ["fp6", "int8", "fp64"])
@pytest.mark.parametrize(
    "argv",
    [
        ["step", *STEP],
        ["plan", *STEP],
        ["train-time", "-m", "llama3-8b", "-D", "1T", "-G", "8", "-H", "b200", "--mfu", "predicted"],
        ["memory", "-m", "llama3-8b", "-H", "b200"],
        ["memory", "-m", "llama3-8b", "-H", "b200", "--finetune", "lora"],
        ["max-model", "-H", "b200"],
    ],
    ids=["step", "plan", "train-time", "memory", "memory-lora", "max-model"],
)
def test_training_refuses_a_format_no_recipe_trains_in(napkin: Run, argv: list[str], dtype: str) -> None:
    r = napkin(*argv, "--dtype", dtype)
    assert r.exit_code == 2, r.stderr
    assert r.stderr.startswith(f"napkin: error: --dtype: {dtype} is not a format training runs; {TRAINING_TAKES}")
    assert len(r.stderr.splitlines()) == 1


def test_a_given_mfu_still_takes_any_peak(napkin: Run) -> None:
    """Without --mfu predicted, train-time's --dtype only picks the peak the given MFU is a fraction of."""
    assert napkin("train-time", "-m", "llama3-8b", "-D", "1T", "-G", "8", "--dtype", "int8").exit_code == 0


def test_the_library_refuses_it_alike() -> None:
    with pytest.raises(UsageError, match=f"dtype: fp6 is not a format training runs; {TRAINING_TAKES}"):
        napkin.step(model="llama3-8b", gpus=8, global_batch=64, hardware="b200", dtype="fp6")
