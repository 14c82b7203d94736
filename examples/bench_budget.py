"""Benchmark: does ``napkin bench matmul --device cpu --budget 10`` keep its budget on a loaded machine?

    python examples/bench_budget.py              # 5 runs, one busy-loop process per core
    python examples/bench_budget.py --runs 3 --budget 5 --no-load

Each run is a fresh ``napkin`` process (start-up included in the wall time); the script prints the
wall time, the time after start-up, and which dtypes were measured. Exit status 1 if a run exceeded
its budget plus ``--startup-allowance`` seconds or did not measure fp32. Not part of the test run.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import time


def busy(stop: float) -> None:
    """Burn one core until ``stop`` (a time.time() value)."""
    x = 0
    while time.time() < stop:
        x += 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--budget", type=float, default=10.0)
    parser.add_argument("--startup-allowance", type=float, default=5.0, help="seconds allowed for start-up")
    parser.add_argument("--no-load", action="store_true", help="do not start the busy-loop processes")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    workers: list[multiprocessing.Process] = []
    if not args.no_load:
        stop = time.time() + args.runs * (args.budget + 30)
        workers = [multiprocessing.Process(target=busy, args=(stop,), daemon=True) for _ in range(cores)]
        for w in workers:
            w.start()
    print(f"{args.runs} runs of 'napkin bench matmul --device cpu --budget {args.budget:g}', "
          f"{'no load' if args.no_load else f'{cores} busy-loop processes on {cores} cores'}")  # fmt: skip
    print(f"{'run':>3} {'wall s':>7} {'measured':<24} {'fp32 best':>16}")
    failures = 0
    try:
        for i in range(1, args.runs + 1):
            command = [sys.executable, "-m", "napkin", "bench", "matmul", "--device", "cpu", "--budget",
                       f"{args.budget:g}", "--json"]  # fmt: skip
            start = time.perf_counter()
            out = subprocess.run(command, capture_output=True, text=True, check=False)
            wall = time.perf_counter() - start
            records = json.loads(out.stdout) if out.stdout.strip() else []
            ok = [r for r in records if r["status"] == "ok"]
            measured = sorted({r["dtype"] for r in ok})
            fp32 = max((r["flops_per_second"] for r in ok if r["dtype"] == "fp32"), default=None)
            fp32_text = f"{fp32 / 1e9:.1f} GFLOP/s" if fp32 else "not measured"
            print(f"{i:>3} {wall:>7.2f} {','.join(measured) or 'nothing':<24} {fp32_text:>16}", flush=True)
            if wall > args.budget + args.startup_allowance or fp32 is None:
                failures += 1
    finally:
        for w in workers:
            w.terminate()
    print("all runs within budget and measured fp32" if not failures else f"{failures} run(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
