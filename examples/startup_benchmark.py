"""Startup cost: ``napkin train-time --json`` against importing its four dependencies.

    python examples/startup_benchmark.py [--runs 15]

Prints the median wall time of each (fresh interpreter every run) and their ratio. The target is a
ratio ≤ 1.3: napkin should cost little more than importing typer, rich, pydantic and yaml.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

BASELINE = [sys.executable, "-c", "import typer, rich, pydantic, yaml"]
# The smallest real program on the same stack: one typer command that validates and prints one pydantic
# model. typer and pydantic load their machinery lazily, so the bare imports above cost less than any
# app that uses them; this floor shows how much of napkin's time is the stack itself.
FLOOR = [
    sys.executable,
    "-c",
    """
import typer, yaml
from pydantic import BaseModel
class M(BaseModel):
    x: float
app = typer.Typer()
@app.command()
def run(x: float = 1.0) -> None:
    print(M(x=x).model_dump_json())
app()
""",
]
NAPKIN = [
    sys.executable,
    "-m",
    "napkin",
    "train-time",
    "--params",
    "70e9",
    "--tokens",
    "15e12",
    "--gpus",
    "1024",
    "--json",
]


def median_seconds(command: list[str], runs: int) -> float:
    subprocess.run(command, capture_output=True, check=True)  # warm the file cache
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    subprocess.run([sys.executable, "-m", "compileall", "-q", "napkin"], check=True)  # as an installed wheel has
    base = median_seconds(BASELINE, runs)
    floor = median_seconds(FLOOR, runs)
    ours = median_seconds(NAPKIN, runs)
    print(f"import typer, rich, pydantic, yaml:        {base * 1000:4.0f} ms (median of {runs})")
    print(f"one typer command + one pydantic model:    {floor * 1000:4.0f} ms  ratio {floor / base:.2f}")
    print(
        f"napkin train-time --json:                  {ours * 1000:4.0f} ms  ratio {ours / base:.2f}"
        f" (vs the floor {ours / floor:.2f})"
    )


if __name__ == "__main__":
    main()
