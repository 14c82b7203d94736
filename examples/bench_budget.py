"""Benchmark: does ``napkin bench matmul --device cpu --budget 10`` keep its budget on a loaded machine?

    python examples/bench_budget.py              # 5 runs, one busy-loop process per core
    python examples/bench_budget.py --runs 3 --budget 5 --no-load

Each run is a fresh Python process that imports torch and napkin (the start-up: seconds on a loaded
machine), then runs the command as ``napkin`` would; the script prints the wall time of the process,
the start-up, the time from the end of the imports to the exit (what the budget governs), the time
inside ``napkin.live.bench.run`` alone, and which dtypes were measured. Exit status 1 if the time after
the imports exceeded the budget by more than ``--slack`` seconds, or fp32 was not measured. Not part
of the test run.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import time

#: Run ``napkin`` with sys.argv[1:], timing the imports, the rest, and bench.run within it (stderr: "TIMES a b c").
PROBE = """
import sys, time
t0 = time.perf_counter()
import torch, napkin.cli, napkin.live.bench
t1 = time.perf_counter()
inner = []
engine = napkin.live.bench.run
def timed(**kwargs):
    start = time.perf_counter()
    try:
        return engine(**kwargs)
    finally:
        inner.append(time.perf_counter() - start)
napkin.live.bench.run = timed
sys.argv = sys.argv[1:]
try:
    napkin.cli.main()
except SystemExit:
    pass
print(f"TIMES {t1 - t0} {time.perf_counter() - t1} {sum(inner)}", file=sys.stderr)
"""


def busy(stop: float) -> None:
    """Burn one core until ``stop`` (a time.time() value)."""
    x = 0
    while time.time() < stop:
        x += 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--budget", type=float, default=10.0)
    parser.add_argument("--slack", type=float, default=1.0, help="seconds allowed past the budget (output, exit)")
    parser.add_argument("--no-load", action="store_true", help="do not start the busy-loop processes")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    workers: list[multiprocessing.Process] = []
    if not args.no_load:
        stop = time.time() + args.runs * (args.budget + 30)
        workers = [multiprocessing.Process(target=busy, args=(stop,), daemon=True) for _ in range(cores)]
        for w in workers:
            w.start()
    print(
        f"{args.runs} runs of 'napkin bench matmul --device cpu --budget {args.budget:g}', "
        f"{'no load' if args.no_load else f'{cores} busy-loop processes on {cores} cores'}"
    )
    print(
        f"{'run':>3} {'wall s':>7} {'start-up s':>10} {'after s':>8} {'run s':>6}  {'measured':<14} {'fp32 best':>14}"
    )
    failures = 0
    try:
        for i in range(1, args.runs + 1):
            argv = ["napkin", "bench", "matmul", "--device", "cpu", "--json", "--budget", f"{args.budget:g}"]
            start = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, check=False)
            wall = time.perf_counter() - start
            startup, budgeted, engine = (float(x) for x in out.stderr.rsplit("TIMES ", 1)[1].split())
            records = json.loads(out.stdout) if out.stdout.strip() else []
            ok = [r for r in records if r["status"] == "ok"]
            measured = sorted({r["dtype"] for r in ok})
            fp32 = max((r["flops_per_second"] for r in ok if r["dtype"] == "fp32"), default=None)
            fp32_text = f"{fp32 / 1e9:.1f} GFLOP/s" if fp32 else "not measured"
            dtypes = ",".join(measured) or "nothing"
            print(
                f"{i:>3} {wall:>7.2f} {startup:>10.2f} {budgeted:>8.2f} {engine:>6.2f}  {dtypes:<14} {fp32_text:>14}",
                flush=True,
            )
            if budgeted > args.budget + args.slack or fp32 is None:
                failures += 1
    finally:
        for w in workers:
            w.terminate()
    print("all runs within budget and measured fp32" if not failures else f"{failures} run(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
