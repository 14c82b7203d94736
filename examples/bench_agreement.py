"""Benchmark: does ``napkin bench matmul`` agree with torch.utils.benchmark on the same shapes?

    python examples/bench_agreement.py                    # CPU, fp32, 256³ and 512³, three rounds
    python examples/bench_agreement.py --sizes 1024,2048 --rounds 5 --tolerance 0.1

Both time the same square fp32 matmuls in this one process, alternating, and each keeps its best
round, so a neighbour stealing a core hurts both alike. Prints both figures and the ratio; exit
status 1 if they differ by more than ``--tolerance``. A timing comparison: never part of the tests.
"""

from __future__ import annotations

import argparse
import sys

from napkin.live import bench


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="256,512")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tolerance", type=float, default=0.15, help="relative difference allowed")
    args = parser.parse_args()
    torch = bench.import_torch()
    from torch.utils import benchmark

    sizes = [int(s) for s in args.sizes.split(",")]
    ours: dict[int, float] = {}
    theirs: dict[int, float] = {}
    for _ in range(args.rounds):
        result = bench.run(device="cpu", dtypes=["fp32"], sizes=sizes, budget=30)
        for record in result.records:
            if record.flops_per_second:
                ours[record.m] = max(ours.get(record.m, 0.0), record.flops_per_second)
        for n in sizes:
            a, b = torch.randn(n, n), torch.randn(n, n)
            timer = benchmark.Timer("a @ b", globals={"a": a, "b": b}, num_threads=torch.get_num_threads())
            theirs[n] = max(theirs.get(n, 0.0), 2 * n**3 / timer.blocked_autorange(min_run_time=0.3).median)
    print(f"{'size':>6} {'napkin GFLOP/s':>15} {'torch.utils.benchmark':>22} {'ratio':>7}")
    worst = 0.0
    for n in sizes:
        mine = ours.get(n)
        ratio = mine / theirs[n] if mine else float("nan")
        worst = max(worst, abs(ratio - 1) if mine else float("inf"))
        print(f"{n:>6} {(mine or 0) / 1e9:>15.1f} {theirs[n] / 1e9:>22.1f} {ratio:>7.3f}")
    ok = worst <= args.tolerance
    print(f"{'agree' if ok else 'DISAGREE'} within {args.tolerance:.0%} (worst {worst:.1%})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
