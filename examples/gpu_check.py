"""GPU check: napkin's live checks on a CUDA machine in well under 5 minutes, as one short table.

    python examples/gpu_check.py                 # CUDA: bf16/fp16/tf32/fp32/fp8 up to 8192³, then verify
    python examples/gpu_check.py --device cpu --quick    # the same code path on a CPU, in seconds

It prints one line per dtype (best size, TFLOP/s, % of the profile's dense peak, agreement with
torch.utils.benchmark on the same shape) and the verify summary; --json-out FILE keeps everything.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from napkin.live import bench, verify
from napkin.systems.profiles import find_by_device


def independent_tflops(device: str, dtype: str, n: int) -> float | None:
    """torch.utils.benchmark on the same square shape (bf16/fp16/fp32/tf32), for cross-checking."""
    import torch
    from torch.utils import benchmark

    if dtype == "fp8":
        return None
    kinds = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "tf32": torch.float32}
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    a = torch.randn(n, n, device=device, dtype=kinds[dtype])
    b = torch.randn(n, n, device=device, dtype=kinds[dtype])
    timer = benchmark.Timer("a @ b", globals={"a": a, "b": b}, num_threads=torch.get_num_threads())
    seconds = timer.blocked_autorange(min_run_time=1.0).median
    torch.backends.cuda.matmul.allow_tf32 = False
    return 2 * n**3 / seconds / 1e12


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true", help="small sizes and budget (for CPUs and smoke tests)")
    parser.add_argument("--json-out", help="write every record to this file")
    args = parser.parse_args()
    start = time.perf_counter()
    dtypes = ["fp32"] if args.quick else ["bf16", "fp16", "tf32", "fp32", "fp8"]
    sizes = [256, 512] if args.quick else [2048, 4096, 8192]
    torch = bench.import_torch()
    name = bench.device_name(torch, args.device) if args.device != "cpu" else "cpu"
    matched = find_by_device(name)
    profile = matched.profile if matched is not None else None
    result = bench.run(
        device=args.device,
        dtypes=dtypes,
        sizes=sizes,
        budget=20 if args.quick else 150,
        peak=lambda d: profile.peak_if_known(d) if profile else None,
        hardware=profile.name if profile else None,
    )
    print(
        f"device: {result.device_name} ({result.device}), torch {result.torch_version}, "
        f"profile: {profile.name if profile else 'none matched'}"
    )
    print(f"{'dtype':6} {'best size':>10} {'TFLOP/s':>9} {'% of dense peak':>16} {'torch.utils.benchmark':>22}")
    rows = []
    for dtype in dtypes:
        best = result.best.get(dtype)
        if best is None:
            reason = next((r.reason for r in result.records if r.dtype == dtype and r.reason), "no result")
            print(f"{dtype:6} {'–':>10} {'–':>9} {'–':>16}   skipped: {reason}")
            continue
        ours = (best.flops_per_second or 0) / 1e12
        theirs = independent_tflops(result.device, dtype, best.m)
        pct = f"{best.fraction_of_peak:.1%}" if best.fraction_of_peak is not None else "–"
        agree = f"{theirs:.1f} ({ours / theirs - 1:+.1%})" if theirs else "–"
        print(f"{dtype:6} {best.m:>10} {ours:>9.1f} {pct:>16} {agree:>22}")
        rows.append(
            {
                "dtype": dtype,
                "size": best.m,
                "tflops": ours,
                "fraction_of_peak": best.fraction_of_peak,
                "torch_benchmark_tflops": theirs,
            }
        )
    checks = verify.run(args.device)
    print(f"verify: {checks.passed} passed, {checks.failed} failed")
    for c in checks.checks:
        if not c.ok or c.category == "activations":
            print(f"  {c.name}: napkin {c.expected:.6g}, torch {c.measured:.6g} {'' if c.ok else 'FAIL'} {c.detail}")
    print(f"total time: {time.perf_counter() - start:.0f} s")
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as handle:
            json.dump(
                {"bench": result.model_dump(mode="json"), "summary": rows, "verify": checks.model_dump(mode="json")},
                handle,
                indent=2,
            )
    return 0 if checks.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
