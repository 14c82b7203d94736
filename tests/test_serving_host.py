"""TensorRT-LLM's PyTorch backend: host work per sequence overlapped with the GPU's step, per-dtype matmul rates,
and the calibration / validation split of its published runs (issue 24)."""

from __future__ import annotations

import functools
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from napkin.engines.traffic import Scheduler, simulate
from napkin.systems.serving_stack import get_serving, get_stack
from tests.conftest import Run
from tests.test_serving_engines import COST as ENGINES_COST

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

#: the scheduler tests' step cost (tests/test_serving_engines.py), its attention per cached token 100× dearer so that
#: a decode step grows with the cache over a few hundred steps
COST = replace(ENGINES_COST, attention=1e-6)


def test_a_step_takes_the_longer_of_the_gpu_and_the_host() -> None:
    host = replace(COST, host_seq=1e-4)
    gpu = COST.seconds(64, 0, 64 * 500, 0)
    assert host.seconds(64, 0, 64 * 500, 0) == pytest.approx(max(gpu, 64 * 1e-4))
    assert host.seconds(1, 0, 500, 0) == pytest.approx(COST.seconds(1, 0, 500, 0))  # one sequence: the GPU's


@pytest.mark.parametrize("host_seq", [0.0, 1e-3, 1.75e-3, 3e-3])
def test_decode_stretches_sum_the_steps_they_stand_for(host_seq: float) -> None:
    """Requests decoding alone, each step by StepCost.seconds, equal the closed-form stretch the simulator takes,
    where the host's floor covers none, some or all of the steps (the GPU's step grows with the cache)."""
    cost = replace(COST, host_seq=host_seq)
    n, prompt, output = 4, 100, 300
    o = simulate([0.0] * n, [prompt] * n, [output] * n, cost, Scheduler(4096, 8, 100_000, 1))
    prefill = cost.seconds(0, n * prompt, 0, n * prompt * (prompt + 1) / 2)
    steps = sum(cost.seconds(n, 0, n * (prompt + 1 + j), 0) for j in range(output - 1))
    assert o.duration == pytest.approx(prefill + steps, rel=1e-9)


def test_the_pytorch_backend_stack_cites_its_host_term_and_fp4_rate() -> None:
    profile = get_stack("tensorrt-llm-pytorch")
    cited = {c.strip() for s in profile.sources for c in (s.covers or "").split(",")}
    serving = get_serving("tensorrt-llm-pytorch")
    assert serving.host_seconds_per_sequence > 0 and "host_seconds_per_sequence" in cited
    assert set(serving.matmul_compute) == {"fp4", "fp8"} and "matmul_compute" in cited
    assert "py_executor.py" in profile.cited("host_seconds_per_sequence") or any(
        "py_executor.py" in s.title for s in profile.sources
    )
    fp4 = serving.at_dtype("fp4")
    assert fp4.decode.compute == fp4.prefill.compute == serving.matmul_compute["fp4"]
    assert serving.at_dtype("bf16") == serving  # no bf16 entry: the phase fractions
    assert get_serving("tensorrt-llm").host_seconds_per_sequence == 0  # the C++ runtime's fixed step cost only


@functools.cache
def _runs() -> list[dict[str, Any]]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the 15,000-line file in a tenth of the pure-Python time
    data: dict[str, Any] = yaml.load((EXAMPLES / "serving_runs.yaml").read_text(encoding="utf-8"), Loader=loader)
    return [r for r in data["runs"] if r["engine"] == "tensorrt-llm-pytorch"]


@functools.cache
def _validation_cases() -> list[Any]:
    """serving_validation's cases of the PyTorch-backend stack's validation rows, predicted once per process."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        import serving_validation
    finally:
        sys.path.remove(str(EXAMPLES))
    return list(serving_validation.cases({"tensorrt-llm-pytorch": get_serving("tensorrt-llm-pytorch")}, "validation"))


def test_pytorch_backend_rows_are_split_by_release() -> None:
    """Calibration: perf-overview.md at v0.19.0 and at 03e27c7d5ff0 (a release after ~v1.0); validation: the
    ~v1.0 tables (00f37686aa85), never fitted."""
    by_source: dict[str, set[str]] = {}
    for row in _runs():
        by_source.setdefault(row["source"].rsplit("@ ", 1)[1], set()).add(row["split"])
    assert by_source == {"v0.19.0": {"calibration"}, "03e27c7d5ff0": {"calibration"}, "00f37686aa85": {"validation"}}


@pytest.mark.parametrize(
    ("row", "published"),
    [
        ("trtllm-v019-llama3.370b-b200-tp1-128-128", 11253.28),  # v0.19.0 table, Llama 3.3 70B FP4, B200 TP 1
        ("trtllm-v019-llama3.18b-h200-tp1-128-128", 28447.38),  # Llama 3.1 8B FP8, H200 TP 1
        ("trtllm-pyt-qwen3-30b-a3b-b200-tp1-1000-1000", 26971.0),  # 03e27c7d5ff0, Qwen3 30B A3B FP4, B200 TP 1
        ("trtllm-pyt-llama3.370b-h200-tp2-1000-1000", 2 * 2587.0),  # per GPU × 2 GPUs
    ],
)
def test_calibration_rows_hold_the_published_figures(row: str, published: float) -> None:
    found = {r["id"]: r for r in _runs()}
    assert found[row]["measured"]["output_tokens_per_s"] == pytest.approx(published)


def test_validation_llama_70b_fp4_rows_within_twenty_percent() -> None:
    """The ~v1.0 Llama-3.3 70B NVFP4 rows on B200 and GB200 (TP 1, validation) that the 0.17 stack put 19-65 %
    too fast: within 20 % of the published tokens/s on the PyTorch-backend stack."""
    cases = _validation_cases()
    rows = [c for c in cases if c.id.startswith("trtllm-v1-llama3.370b-") and "b200-tp1" in c.id]
    assert len(rows) == 20
    assert all(abs(c.error) < 0.2 for c in rows), [(c.id, round(c.error, 3)) for c in rows]


def test_validation_qwen3_235b_rows_within_thirty_percent_and_unbiased() -> None:
    """Qwen3-235B-A22B, the ~v1.0 table's 27 rows on B200, H200 and H100 at TP 8 with attention data parallelism
    (validation; no calibration row has this model): within 30 % of the published tokens/s each, and on average
    neither fast nor slow by more than 10 %, with expert matmuls at the rate fitted on Qwen3-30B-A3B's rows."""
    cases = _validation_cases()
    rows = [c for c in cases if c.id.startswith("trtllm-v1-qwen3-235b-")]
    assert len(rows) == 27
    assert all(abs(c.error) < 0.3 for c in rows), [(c.id, round(c.error, 3)) for c in rows]
    assert abs(sum(c.error for c in rows) / len(rows)) < 0.1


def test_expert_compute_slows_an_moe_prompt_not_a_dense_one() -> None:
    """expert_compute divides the expert matmuls alone: an MoE model's seconds per prompt token go as a + b / share
    (each halving adds twice what the last one did), a dense model's do not move."""
    from napkin.api import get_hardware
    from napkin.engines.replica import Replica
    from napkin.systems.presets import get_preset

    stack = get_serving("tensorrt-llm-pytorch")
    b200 = get_hardware("b200")

    def per_token(preset: str, share: float) -> float:
        replica = Replica(get_preset(preset).model, b200, stack.model_copy(update={"expert_compute": share}))
        return replica.step_cost().prefill_token

    assert per_token("llama3-8b", 0.5) == per_token("llama3-8b", 1.0)
    full, half, quarter = (per_token("qwen3-30b-a3b", share) for share in (1.0, 0.5, 0.25))
    assert half > full
    assert quarter - half == pytest.approx(2 * (half - full))


@pytest.mark.parametrize(("field", "value"), [("host_seconds_per_sequence", "nan"), ("matmul_compute", {"fp4": "nan"})])
def test_a_nan_host_or_matmul_fraction_is_refused_as_not_finite(
    napkin: Run, tmp_path: Path, field: str, value: Any
) -> None:
    data = yaml.safe_load((EXAMPLES.parent / "stacks" / "tensorrt-llm-pytorch.yaml").read_text(encoding="utf-8"))
    data["name"], data["aliases"] = "nan-host", []
    data["serving"][field] = float(value) if isinstance(value, str) else {k: float(v) for k, v in value.items()}
    bad = tmp_path / "nan-host.yaml"
    bad.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    r = napkin("inference", "--model", "llama3-8b", "--stack-file", str(bad))
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1
    assert field in r.stderr and "finite" in r.stderr


def test_inference_takes_a_stack_file_alone(napkin: Run) -> None:
    """--stack-file without --stack (whose default is vLLM's) is the file's stack (it was refused as 'both')."""
    path = str(EXAMPLES.parent / "stacks" / "tensorrt-llm-pytorch.yaml")
    r = napkin("inference", "--model", "llama3-8b", "--stack-file", path)
    assert r.exit_code == 0 and "tensorrt-llm-pytorch" in r.stdout, r.stderr
    assert "vllm" in napkin("inference", "--model", "llama3-8b").stdout


def test_a_host_bound_decode_step_s_formula_names_the_host(napkin: Run) -> None:
    """The decode step's --explain line must add up: at batch 1,024 its GPU terms come to far less than the 41 ms
    the host's 1,024 × 40 µs takes, so its formula says the step is at least the host's work."""
    args = ("inference", "--model", "llama3-8b", "-H", "b200", "--weights", "nvfp4", "--batch", "1024")
    r = napkin(*args, "--context", "1024", "--stack", "tensorrt-llm-pytorch", "--explain", "--json")
    steps = json.loads(r.stdout)["steps"]
    (decode,) = [s for s in steps if s["quantity"].startswith("decode step at batch")]
    assert "host-bound" in decode["result"] and "host" in decode["formula"]
    r = napkin(*args, "--context", "1024", "--stack", "vllm", "--explain", "--json")
    (decode,) = [s for s in json.loads(r.stdout)["steps"] if s["quantity"].startswith("decode step at batch")]
    assert "host" not in decode["formula"]
