"""Commands that do not benchmark never import torch (timing lives in examples/startup_benchmark.py)."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
from typer.testing import CliRunner
import napkin.cli
assert "torch" not in sys.modules, "import napkin.cli imported torch"
runner = CliRunner()
for args in (["train-time", "-N", "7B", "-D", "1T", "-G", "8", "--json"], ["max-model", "--json"],
             ["memory", "--model", "llama3-8b", "--micro-batch", "2", "--json"], ["hardware", "list"], ["dtypes"],
             ["optimal", "--compute", "1e24"], ["flops", "matmul", "8", "8", "8"]):
    result = runner.invoke(napkin.cli.app, args)
    assert result.exit_code == 0, (args, result.stderr)
    assert "torch" not in sys.modules, args
heavy = sorted(m for m in ("torch", "numpy", "platformdirs", "rich.progress") if m in sys.modules)
print("ok", heavy)
"""


def test_cli_never_imports_torch() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok []"
