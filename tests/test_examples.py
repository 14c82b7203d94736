"""The files in examples/ run, and print what they say they print."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import needs_torch

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NAPKIN": f"{sys.executable} -m napkin", "COLUMNS": "120"}
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout, check=False)


def test_quickstart_prints_the_two_answers() -> None:
    out = _run(sys.executable, str(EXAMPLES / "quickstart.py"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "train time: 143.9 days, 3,537,140 GPU-hours, 6.30e+24 FLOPs",
        "max model: 42.8 B params at 16 B/param",
        "7B on one H100: 112 GB needed, fits: False",
    ]


def test_cli_walkthrough_runs() -> None:
    out = _run("bash", str(EXAMPLES / "walkthrough.sh"))
    assert out.returncode == 0, out.stderr
    assert "GPUs for 60 days: 2457" in out.stdout  # ⌈1024 × 143.93 / 60⌉
    assert "largest micro-batch   4 sequences" in out.stdout
    assert "my-h100-cloud" in out.stdout and "$8,807,479 at $2.49 per GPU-hour" in out.stdout


def test_user_profile_example_validates() -> None:
    out = _run(sys.executable, "-m", "napkin", "hardware", "validate", str(EXAMPLES / "my-h100.yaml"))
    assert out.returncode == 0, out.stderr


@needs_torch
@pytest.mark.torch
@pytest.mark.slow
def test_gpu_check_script_runs_in_its_quick_cpu_mode() -> None:
    out = _run(sys.executable, str(EXAMPLES / "gpu_check.py"), "--device", "cpu", "--quick", timeout=300)
    assert out.returncode == 0, out.stderr
    assert "verify: 36 passed, 0 failed" in out.stdout
    assert "fp32" in out.stdout
