"""Live checks with torch (CPU in CI): the matmul benchmark, --save, napkin verify, and no-torch behaviour."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import Run, needs_torch

pytestmark = [needs_torch, pytest.mark.torch]


def test_bench_matmul_cpu_json_records_are_consistent(napkin: Run) -> None:
    """Load-immune: the figures agree with each other, not with a second timing (that comparison is
    examples/bench_agreement.py, a benchmark)."""
    r = napkin("bench", "matmul", "--device", "cpu", "--dtype", "fp32", "--sizes", "256,512", "--json")
    assert r.exit_code == 0, r.stderr
    records = json.loads(r.stdout)
    assert [(x["m"], x["k"], x["n"], x["dtype"], x["device"], x["status"]) for x in records] == [
        (256, 256, 256, "fp32", "cpu", "ok"),
        (512, 512, 512, "fp32", "cpu", "ok"),
    ]
    for record in records:
        assert {"flops_per_second", "peak_flops", "fraction_of_peak"} <= set(record)
        assert record["relative_error"] < 1e-5
        assert record["flops_per_second"] == pytest.approx(2 * record["m"] ** 3 / record["seconds"])
        assert record["repeats"] >= 1


def test_bench_skips_what_cannot_run_and_what_would_overrun(napkin: Run) -> None:
    r = napkin("bench", "matmul", "--device", "cpu", "--dtype", "tf32,fp8", "--sizes", "64", "--json")
    reasons = {x["dtype"]: x["reason"] for x in json.loads(r.stdout)}
    assert reasons == {
        "tf32": "tf32 is a CUDA tensor-core mode",
        "fp8": "fp8 matmul (torch._scaled_mm) needs a CUDA device",
    }
    r = napkin(
        "bench", "matmul", "--device", "cpu", "--dtype", "fp32", "--sizes", "64,16384", "--budget", "1", "--json"
    )
    big = json.loads(r.stdout)[1]  # 16384³ is 8.8 TFLOP: predicted to overrun, or the budget is gone already
    assert big["status"] == "skipped"
    assert big["reason"].startswith("would take ~") or big["reason"] == "time budget used up"


def test_save_calibrates_train_time_and_never_touches_user_files(napkin: Run, isolated: Path) -> None:
    assert napkin("hardware", "new", "my-cpu", "--from", "h100").exit_code == 0
    user_file = isolated / "hardware" / "my-cpu.yaml"
    user_file.write_text(user_file.read_text() + "# hand-written comment, keep me\n")
    before = user_file.read_bytes()
    args = ["bench", "matmul", "--device", "cpu", "--dtype", "fp32", "--sizes", "256", "--hardware", "my-cpu", "--save"]
    refused = napkin(*args)  # the copy lists the H100's device names, not this CPU's (issue 10)
    assert refused.exit_code == 2 and "--save: this ran on" in refused.stderr and "--force" in refused.stderr
    assert not (isolated / "measurements.yaml").exists()
    r = napkin(*args, "--force", "--json")
    assert r.exit_code == 0, r.stderr
    measured = json.loads(r.stdout)[0]["flops_per_second"]
    assert "saved fp32" in r.stderr
    assert user_file.read_bytes() == before  # byte for byte
    shown = json.loads(napkin("hardware", "show", "my-cpu", "--json").stdout)
    assert shown["measured"]["fp32"]["flops_per_second"] == measured
    args = ["train-time", "-N", "1B", "-D", "1B", "-G", "1", "--hardware", "my-cpu", "--dtype", "fp32", "--json"]
    datasheet = json.loads(napkin(*args).stdout)
    calibrated = json.loads(napkin(*args, "--peak", "measured").stdout)
    assert calibrated["peak_flops"] == measured and calibrated["peak_source"].startswith("measured")
    assert calibrated["seconds"] == pytest.approx(datasheet["seconds"] * 67e12 / measured)
    missing = napkin("train-time", "-N", "1B", "-D", "1B", "-G", "1", "--peak", "measured")
    assert missing.exit_code == 2 and "no saved bf16 measurement for h100-sxm" in missing.stderr


def test_save_without_a_profile_on_cpu_is_an_error(napkin: Run) -> None:
    r = napkin("bench", "matmul", "--device", "cpu", "--dtype", "fp32", "--sizes", "64", "--save")
    assert r.exit_code == 2 and "--save: no hardware profile" in r.stderr


def test_verify_passes_on_cpu(napkin: Run) -> None:
    r = napkin("verify", "--device", "cpu", "--json")
    assert r.exit_code == 0, r.stdout
    data = json.loads(r.stdout)
    assert data["failed"] == 0 and data["passed"] >= 30
    names = {c["name"] for c in data["checks"]}
    assert {
        "MLP total = 6·N·B",
        "adafactor fp32 bytes",
        "fp8-e4m3 rounding = torch conversion",
        "GQA K/V bytes = 2·L·n_kv·d_h·s·b·2",
        "Llama block + loss saved bytes vs napkin",
    } <= names
    assert "36 passed, 0 failed" in napkin("verify").stdout


def test_without_torch_bench_and_verify_say_how_to_install(napkin: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # makes "import torch" raise ImportError
    for args in (["bench", "matmul"], ["verify"]):
        r = napkin(*args)
        assert r.exit_code == 1
        assert (
            r.stderr == "napkin: error: napkin bench and napkin verify need torch: pip install 'napkin-math[bench]'\n"
        )
    assert napkin("train-time", "-N", "7B", "-D", "1T", "-G", "8").exit_code == 0


def test_device_names_map_to_profiles() -> None:
    from napkin.systems.profiles import find_by_device

    def matched(device_name: str) -> str | None:
        found = find_by_device(device_name)
        return found.profile.name if found is not None else None

    assert matched("NVIDIA H100 80GB HBM3") == "h100-sxm"
    assert matched("NVIDIA H200") == "h200-sxm"
    assert matched("NVIDIA A100-SXM4-40GB") == "a100-sxm-40gb"
    assert matched("NVIDIA H100 PCIe") == "h100-pcie"
    assert matched("Some Future GPU") is None


@pytest.mark.parametrize(("fraction", "phrase"), [(1.4, "the profile is wrong or uses a sparse"), (0.2, "throttled")])
def test_bench_warns_when_the_peak_is_implausible(fraction: float, phrase: str) -> None:
    from napkin.live.bench import MatmulRecord, peak_warnings

    record = MatmulRecord(
        device="cpu",
        device_name="cpu",
        dtype="fp32",
        m=128,
        k=128,
        n=128,
        status="ok",
        flops_per_second=fraction * 1e12,
        peak_flops=1e12,
        fraction_of_peak=fraction,
    )
    (warning,) = peak_warnings({"fp32": record})
    assert warning.startswith("fp32: ") and phrase in warning
    assert peak_warnings({"fp32": record.model_copy(update={"fraction_of_peak": 0.8})}) == []


def test_bench_measures_the_default_dtype_then_fp32_first() -> None:
    from napkin.live.bench import priority

    assert priority(["fp8", "fp16", "fp32", "tf32", "bf16"]) == ["bf16", "fp32", "fp8", "fp16", "tf32"]
    assert priority(["fp16", "fp32"], default="fp16") == ["fp16", "fp32"]
    assert priority(["tf32", "fp8"]) == ["tf32", "fp8"]


def test_the_deadline_refuses_a_call_that_would_pass_it() -> None:
    from napkin.live.bench import SAFETY, Clock, OutOfTime

    seen: list[tuple[str, float]] = []
    clock = Clock(100.0, progress=lambda label, done: seen.append((label, done)))
    clock.check(1.0)  # fits easily
    with pytest.raises(OutOfTime):
        clock.check(100.0 / SAFETY + 1)
    with pytest.raises(OutOfTime):
        clock.check(0.0, until=clock.start - 1)  # a dtype's share that has ended
    assert seen and all(0 <= done <= 1 for _, done in seen)


def test_a_budget_too_small_for_anything_says_so_and_fails(napkin: Run) -> None:
    args = ["bench", "matmul", "--device", "cpu", "--dtype", "fp32,bf16", "--sizes", "4096", "--budget", "0.001"]
    r = napkin(*args)  # one 4096³ matmul is 137 GFLOP: no CPU does it, let alone 14 of them, in 1 ms
    assert r.exit_code == 1
    assert "napkin: error: nothing measured within the 1 ms budget" in r.stderr
    assert "- bf16 4096³: " in r.stdout and "- fp32 4096³: " in r.stdout
    data = napkin(*args, "--json")
    assert data.exit_code == 1
    for record in json.loads(data.stdout):
        assert record["status"] == "skipped"
        assert record["reason"] == "time budget used up" or record["reason"].startswith("would take ~")


def test_budget_decisions_use_the_whole_cost_of_a_measurement() -> None:
    from napkin.live.bench import MatmulRecord, measure_cost, plan

    record = MatmulRecord(device="cpu", device_name="cpu", dtype="fp16", m=1024, k=1024, n=1024, status="skipped")
    one = 2 * 1024**3 / 1e9  # seconds per matmul at 1 GFLOP/s
    assert measure_cost(one, 1024, 1024, 1024) == pytest.approx(one * (2 + 3 * 4))  # check + 2 warm-ups + 3 passes
    assert measure_cost(1.0, 256, 256, 256) == 2 + 8 * 4  # small shapes rotate 8 buffers
    assert plan(record, 1e9, left=60.0) == (3, None)
    assert plan(record, 1e9, left=20.0) == (1, None)  # one buffer instead of three: 6 matmuls, 12.9 s
    assert plan(record, 1e9, left=5.0) == (None, "would take ~12.9 s, more than the 5.0 s left of the budget")
    assert plan(record, 1e9, left=0.0) == (None, "time budget used up")
