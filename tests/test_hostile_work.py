"""Round three (issue 20): work bounded by what a device could hold, not by the number typed; one capacity and one
reserve rule for every command. No timing: the bounds are on the work done and the output written."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import napkin
from napkin.domain.layout import first_heaviest, heavy_stages, stage_size, uneven_note
from napkin.engines.divisors import divisors
from napkin.engines.planner import _leanest, candidates
from napkin.engines.step import build_result
from tests.conftest import Run

PLAN = ["--model", "llama3-8b", "--gpus", "8", "--global-batch", "64"]


@given(st.integers(min_value=1, max_value=5000))
def test_divisors_by_factorisation_are_the_divisors(n: int) -> None:
    assert divisors(n) == [k for k in range(1, n + 1) if n % k == 0]


@given(st.integers(min_value=2**40, max_value=2**53))
def test_divisors_of_large_counts_divide_and_multiply_back(n: int) -> None:
    found = divisors(n)
    assert all(n % d == 0 for d in found) and found[0] == 1 and found[-1] == n
    assert all(n // d in found for d in found)  # closed under the complement: none is missing


@given(st.integers(min_value=1, max_value=400), st.integers(min_value=1, max_value=400))
def test_stage_sizes_split_the_layers_evenly(layers: int, pipeline: int) -> None:
    pipeline = min(pipeline, layers)
    sizes = [stage_size(layers, pipeline, i) for i in range(pipeline)]
    assert sum(sizes) == layers and max(sizes) - min(sizes) <= 1
    assert sizes[first_heaviest(layers, pipeline)] == max(sizes)
    heavy = [i for lo, hi in heavy_stages(layers, pipeline) for i in range(lo, hi + 1)]
    assert heavy == ([i for i, n in enumerate(sizes) if n > min(sizes)] if layers % pipeline else [])
    assert sizes[-1] == min(sizes)  # the last stage (output layer, loss) never holds an extra layer


def test_a_long_pipeline_is_described_without_listing_its_stages() -> None:
    note = uneven_note(10**15 + 1, 10**12)
    assert note is not None and "stage 2 holds 1001 layers and stages 1, 3-1000000000000 hold 1000" in note


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["plan", *PLAN, "--layers", "1e9"], 1),  # nothing fits: the answer, at once
        (["plan", *PLAN, "--experts", "1e9", "--top-k", "1"], 1),
        (["plan", *PLAN, "--layers", "1e36"], 2),  # more than napkin counts exactly
        (["memory", "--model", "llama3-8b", "--layers", "1e6", "--pipeline-parallel", "1e6", "--gpus", "1e6"], 0),
        (
            [
                "step",
                "--model",
                "llama3-8b",
                "--layers",
                "1e7",
                "--pipeline-parallel",
                "1e7",
                "--gpus",
                "1e7",
                "--global-batch",
                "1e7",
            ],
            0,
        ),
    ],
)
def test_output_does_not_grow_with_the_numbers_typed(napkin: Run, argv: list[str], code: int) -> None:
    r = napkin(*argv, "--json") if code != 2 else napkin(*argv)
    assert r.exit_code == code, r.stderr
    assert len(r.stdout) < 20_000  # 223 MB of JSON for --pipeline-parallel 1e6 before
    if code == 0 and argv[0] == "memory":
        assert len(json.loads(r.stdout)["stages"]) <= 3  # first, first of the heaviest, last


def test_plan_enumerates_only_what_the_gpus_allow() -> None:
    """Pipeline degrees must divide the GPUs left after TP and CP: a billion layers on 8 GPUs is a few dozen
    layouts, not a loop to a billion."""
    from napkin.api.planning import StepOptions, step_model

    sm, _, _ = step_model(
        StepOptions(model="llama3-8b", global_batch=64, flash_attention=False, causal=False), {"layers": "1e9"}
    )
    assert len(candidates(sm, 8)) < 5_000


# ---------------------------------------------------------------------------------- one capacity rule

SHAPES = st.fixed_dictionaries(
    {
        "layers": st.sampled_from([8, 16, 30, 32]),
        "hidden": st.sampled_from([1024, 2048, 4096]),
        "heads": st.sampled_from([8, 16, 32]),
        "seq": st.sampled_from([1024, 2048, 4096]),
    }
)


@given(
    shape=SHAPES,
    gpus=st.sampled_from([8, 16, 32]),
    reserve=st.sampled_from(["0", "10%", "4GB"]),
    hardware=st.sampled_from(["h100", "a100", "mi300x"]),
    pick=st.lists(st.integers(min_value=0), min_size=4, max_size=4),
)
def test_plan_and_step_agree_on_fit(
    shape: dict[str, int], gpus: int, reserve: str, hardware: str, pick: list[int]
) -> None:
    """Every layout the planner enumerates is kept or dropped by the same capacity and reserve that step and
    memory report: the planner's filter and the memory engine's 'fits' are one rule."""
    from napkin.api.planning import StepOptions, step_model

    options = StepOptions(
        seq=shape["seq"], global_batch=64, hardware=hardware, reserve=reserve, flash_attention=False, causal=False
    )
    sm, _, _ = step_model(options, {k: v for k, v in shape.items() if k != "seq"})
    every = candidates(sm, gpus)
    for index in pick:
        if not every:
            break
        k = every[index % len(every)]
        result = build_result(sm, k, "custom")
        assert (sm.memory_bytes(k) <= sm.hw.capacity - sm.reserve) == result.fits
        assert result.memory_bytes == sm.hw.capacity and result.reserve_bytes == sm.reserve


@functools.cache
def _enumerated(model: str, gpus: int) -> tuple[Any, list[Any]]:
    """The step model and every layout the planner enumerates, built once per (model, GPUs): the examples below
    draw which layouts to check, not the enumeration."""
    from napkin.api.planning import StepOptions, step_model

    sm, _, _ = step_model(StepOptions(model=model, global_batch=512, flash_attention=False, causal=False), {})
    return sm, list(candidates(sm, gpus))


@given(
    model=st.sampled_from(["llama3-8b", "llama3-70b", "mixtral-8x7b"]),
    gpus=st.sampled_from([8, 64, 256]),
    pick=st.lists(st.integers(min_value=0), min_size=8, max_size=8),
)
def test_the_planners_pruning_drops_no_fitting_layout(model: str, gpus: int, pick: list[int]) -> None:
    """The planner skips a split whose leanest layout (micro-batch 1, full recompute, ZeRO-3) does not fit: exact
    only if no layout of the split takes less memory."""
    sm, every = _enumerated(model, gpus)
    for index in pick:
        k = every[index % len(every)]
        assert min(sm.memory_bytes(lean) for lean in _leanest(k)) <= sm.memory_bytes(k)


def test_reserve_is_a_fraction_of_one_capacity_everywhere() -> None:
    stepped = napkin.step(model="llama3-8b", gpus=8, global_batch=64, reserve="10%")
    sized = napkin.memory(model="llama3-8b", gpus=8, reserve="10%")
    assert stepped.reserve_bytes == sized.reserve_bytes == pytest.approx(0.1 * 85_520_809_984)


@given(
    hardware=st.sampled_from(["h100", "a100", "mi300x", "tpu-v5p", "gaudi3"]),
    gpus=st.sampled_from([1, 3, 8, 64, 1000]),
    precision=st.sampled_from(["fp32", "mixed", "bf16"]),
    sharding=st.sampled_from(["none", "zero1", "zero3"]),
    reserve=st.sampled_from(["0", "1GB", "7%"]),
)
def test_max_models_answer_fits_in_memory(
    hardware: str, gpus: int, precision: str, sharding: str, reserve: str
) -> None:
    common = {"gpus": gpus, "hardware": hardware, "precision": precision, "sharding": sharding, "reserve": reserve}
    answer = napkin.max_model(**common)
    assert answer.params > 0
    checked = napkin.memory(params=answer.params, **common)
    assert checked.fits and checked.headroom_bytes < checked.memory_bytes * 1e-9  # fits, with nothing to spare


@given(shape=SHAPES, pipeline=st.sampled_from([1, 2, 4, 8]), recompute=st.sampled_from(["full", "selective"]))
def test_max_models_answer_fits_with_activations_and_a_pipeline(
    shape: dict[str, int], pipeline: int, recompute: str
) -> None:
    """With a shape and PP > 1 the first stage holds the embedding: the answer is solved by memory's own stage
    computation, so it fits there too (it overshot by 1.4 GB before)."""
    common = {**shape, "gpus": 64, "pipeline_parallel": pipeline, "precision": "mixed", "recompute": recompute}
    common["sharding"] = "zero3"  # max-model's default, given to memory too (memory's own is the stack's)
    if shape["layers"] < pipeline:
        return
    answer = napkin.max_model(**common)
    if answer.params > 0:
        assert napkin.memory(params=answer.params, **common).fits


# ---------------------------------------------------------------------------------- terminals


def test_json_to_a_reader_that_leaves_exits_141() -> None:
    """JSON larger than a pipe holds, read one line at a time by a reader that stops: as the table does, 141.
    The writer blocks until the reader has gone, so the outcome does not depend on timing."""
    argv = ["plan", "--model", "llama3-70b", "--gpus", "512", "--global-batch-tokens", "4M", "--top", "200", "--json"]
    with subprocess.Popen(
        [sys.executable, "-m", "napkin", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        assert proc.stdout is not None
        proc.stdout.readline()
        proc.stdout.close()
        _, err = proc.communicate(timeout=300)
    assert proc.returncode == 141, err
    assert b"Traceback" not in err
