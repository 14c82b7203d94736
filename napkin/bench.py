"""Measured matmul throughput with torch (the optional ``bench`` extra), against the profile's peak.

Benchmark discipline (after nanoGPT ``bench.py`` and torch.utils.benchmark):

* random normal inputs, never zeros; several input buffers rotated so caches do not flatter a size;
* warm-up first; a ``synchronize`` (CUDA/MPS) around every timed batch, and batches long enough
  (≥ 1 ms on a GPU) that the timer's resolution does not matter; the median over batches;
* the product is checked once against a float64 reference (a 64×64 corner), so a broken kernel
  cannot report a speed;
* a probe at the smallest size first, then each (size, dtype) is skipped when its predicted time
  would overrun the remaining budget; out-of-memory is caught per size and the run goes on.

torch is imported inside the functions: ``import napkin`` never imports it.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from napkin.base import Record
from napkin.errors import MissingDependencyError, UsageError

if TYPE_CHECKING:
    from napkin.profiles import HardwareProfile

INSTALL_HINT = "napkin bench and napkin verify need torch: pip install 'napkin-math[bench]'"
DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8")
#: Relative Frobenius error tolerated against the float64 reference, by dtype (K ≤ 16384).
TOLERANCE = {"fp32": 1e-4, "tf32": 5e-3, "bf16": 2e-2, "fp16": 5e-3, "fp8": 0.15}


def import_torch() -> Any:
    try:
        import torch
    except ImportError:
        raise MissingDependencyError(INSTALL_HINT) from None
    return torch


class MatmulRecord(Record):
    device: str
    device_name: str
    dtype: str
    m: int
    k: int
    n: int
    status: str = Field(description="'ok' or 'skipped'")
    reason: str | None = None
    seconds: float | None = Field(default=None, description="median time of one matmul")
    flops_per_second: float | None = None
    peak_flops: float | None = None
    fraction_of_peak: float | None = None
    relative_error: float | None = None
    repeats: int = 0


class BenchResult(Record):
    device: str
    device_name: str
    torch_version: str
    hardware: str | None
    records: list[MatmulRecord]
    best: dict[str, MatmulRecord]
    warnings: list[str] = Field(default_factory=list)


def save_best(result: BenchResult, profile: HardwareProfile, *, force: bool = False) -> Path | None:
    """Keep the best FLOP/s per dtype of ``result`` as ``profile``'s measurements; the file, if any.

    The device it ran on is recorded, and must be one of the profile's ``device_names`` (unless
    ``force``): a CPU figure saved as an H100's measured peak would make ``--peak measured`` absurd.
    """
    from napkin.measurements import Measurement, check_device, save

    check_device(profile.name, profile.device_names, result.device_name, force=force)
    path = None
    for dtype, rec in result.best.items():
        path = save(profile.name, dtype, Measurement(
            flops_per_second=rec.flops_per_second, date=date.today().isoformat(), device=rec.device_name,
            torch_version=result.torch_version, size=f"{rec.m}x{rec.k}x{rec.n}",
        ))  # fmt: skip
    return path


def pick_device(torch: Any, device: str) -> str:
    if device == "auto":
        if torch.cuda.is_available():
            return "cuda"
        mps = getattr(torch.backends, "mps", None)
        return "mps" if mps is not None and mps.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: torch sees no CUDA device; use --device cpu or auto")
    if device == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise UsageError("--device mps: torch sees no Apple MPS device; use --device cpu or auto")
    return device


def device_name(torch: Any, device: str) -> str:
    if device == "cuda":
        return str(torch.cuda.get_device_name())
    if device == "mps":
        return "Apple MPS"
    import platform

    return platform.processor() or platform.machine() or "cpu"


def _sync(torch: Any, device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()
    elif device == "mps":
        torch.mps.synchronize()


def _unsupported(torch: Any, device: str, dtype: str) -> str | None:
    """Why ``dtype`` cannot be benchmarked on ``device`` (None if it can)."""
    if dtype == "tf32" and device != "cuda":
        return "tf32 is a CUDA tensor-core mode"
    if dtype == "fp8":
        if device != "cuda":
            return "fp8 matmul (torch._scaled_mm) needs a CUDA device"
        if torch.cuda.get_device_capability() < (8, 9):
            return "fp8 matmul needs compute capability ≥ 8.9 (Ada, Hopper or newer)"
        if not hasattr(torch, "_scaled_mm"):
            return "this torch has no _scaled_mm"
    if dtype == "bf16" and device == "mps" and not hasattr(torch, "bfloat16"):
        return "no bf16 on this device"
    return None


def _operands(torch: Any, device: str, dtype: str, m: int, k: int, n: int, buffers: int) -> list[tuple[Any, Any]]:
    storage = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    gen = torch.Generator(device="cpu").manual_seed(0)
    pairs = []
    for _ in range(buffers):
        a = torch.randn(m, k, generator=gen)
        b = torch.randn(k, n, generator=gen)
        if dtype == "fp8":
            # _scaled_mm wants A row-major and B column-major, both e4m3, with fp32 scales.
            a8 = a.to(device=device, dtype=torch.float8_e4m3fn)
            b8 = b.t().contiguous().to(device=device, dtype=torch.float8_e4m3fn).t()
            pairs.append((a8, b8))
        else:
            pairs.append((a.to(device=device, dtype=storage[dtype]), b.to(device=device, dtype=storage[dtype])))
    return pairs


def _matmul_fn(torch: Any, dtype: str, device: str) -> Callable[[Any, Any], Any]:
    if dtype == "fp8":
        one = torch.ones((), device=device, dtype=torch.float32)

        def fp8(a: Any, b: Any) -> Any:
            return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

        return fp8
    matmul: Callable[[Any, Any], Any] = torch.matmul
    return matmul


def _relative_error(torch: Any, a: Any, b: Any, c: Any) -> float:
    r = min(64, a.shape[0], b.shape[1])
    ref = a[:r].to("cpu", torch.float64) @ b[:, :r].to("cpu", torch.float64)
    got = c[:r, :r].to("cpu", torch.float64)
    return float(torch.linalg.norm(got - ref) / torch.linalg.norm(ref))


def _time_once(torch: Any, device: str, fn: Callable[[Any, Any], Any], pairs: Sequence[tuple[Any, Any]]) -> float:
    _sync(torch, device)
    start = time.perf_counter()
    for a, b in pairs:
        fn(a, b)
    _sync(torch, device)
    return (time.perf_counter() - start) / len(pairs)


MIN_REPEATS = 3


def buffers_for(m: int, k: int, n: int) -> int:
    """Input buffers to rotate: many for small shapes (which fit in cache), a few for large ones."""
    return 8 if m * k * n <= 512**3 else 3


def measure_cost(seconds_per_matmul: float, m: int, k: int, n: int) -> float:
    """Least time ``measure`` needs: the checked product, two warm-ups and MIN_REPEATS timed passes."""
    return seconds_per_matmul * (2 + buffers_for(m, k, n) * (1 + MIN_REPEATS))


def measure(
    torch: Any, device: str, dtype: str, m: int, k: int, n: int, target_seconds: float
) -> tuple[float, float, int]:
    """(median seconds per matmul, relative error, repeats) for one shape and dtype."""
    buffers = buffers_for(m, k, n)
    pairs = _operands(torch, device, dtype, m, k, n, buffers)
    fn = _matmul_fn(torch, dtype, device)
    c = fn(*pairs[0])
    error = _relative_error(torch, *pairs[0], c)
    del c
    one = _time_once(torch, device, fn, pairs[:1])  # warm-up (also loads kernels)
    one = _time_once(torch, device, fn, pairs)  # second warm-up over every buffer, and a timing estimate
    batch_floor = 1e-3 if device != "cpu" else 0.0
    inner = max(1, math.ceil(batch_floor / max(one, 1e-9) / len(pairs)))
    batch = pairs * inner
    repeats = int(min(50, max(MIN_REPEATS, target_seconds / max(one * len(batch), 1e-9))))
    times = [_time_once(torch, device, fn, batch) for _ in range(repeats)]
    return statistics.median(times), error, repeats


def run(
    *,
    device: str = "auto",
    dtypes: Sequence[str] = ("bf16",),
    sizes: Sequence[int] = (1024, 2048, 4096, 8192),
    shapes: Sequence[tuple[int, int, int]] = (),
    budget: float = 30.0,
    peak: Callable[[str], float | None] = lambda _dtype: None,
    hardware: str | None = None,
    progress: Callable[[str, float], None] | None = None,
) -> BenchResult:
    """Benchmark each (shape, dtype) within ``budget`` seconds; returns every record and the best per dtype."""
    torch = import_torch()
    for dtype in dtypes:
        if dtype not in DTYPES:
            raise UsageError(f"--dtype: {dtype!r} is not one of: {', '.join(DTYPES)}")
    dev = pick_device(torch, device)
    name = device_name(torch, dev)
    all_shapes = sorted({*((s, s, s) for s in sizes), *shapes}, key=math.prod)
    records: list[MatmulRecord] = []
    deadline = time.perf_counter() + budget
    tf32_before = torch.backends.cuda.matmul.allow_tf32
    total = len(all_shapes) * len(dtypes)
    done = 0
    try:
        for dtype in dtypes:
            unsupported = _unsupported(torch, dev, dtype)
            rate: float | None = None  # FLOP/s seen so far for this dtype, to predict the next size
            for m, k, n in all_shapes:
                done += 1
                record = MatmulRecord(device=dev, device_name=name, dtype=dtype, m=m, k=k, n=n, status="skipped",
                                      peak_flops=peak(dtype))  # fmt: skip
                if progress is not None:
                    progress(f"{dtype} {m}×{k}×{n}", done / total)
                left = deadline - time.perf_counter()
                if unsupported is None and left > 0 and rate is None:
                    rate = _probe_rate(torch, dev, dtype)  # first size of this dtype: how fast does it run here?
                record.reason = unsupported or _over_budget(record, rate, left)
                if record.reason is None:
                    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
                    share = max(0.05, min(2.0, left / max(1, total - done + 1)))
                    rate = _measure_into(record, torch, share) or rate
                records.append(record)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32_before
    best: dict[str, MatmulRecord] = {}
    for r in records:
        if (
            r.status == "ok"
            and r.flops_per_second
            and (r.dtype not in best or r.flops_per_second > (best[r.dtype].flops_per_second or 0))
        ):
            best[r.dtype] = r
    warnings = []
    for dtype, r in best.items():
        if r.fraction_of_peak is not None and r.fraction_of_peak > 1:
            warnings.append(f"{dtype}: measured {r.fraction_of_peak:.0%} of the profile's dense peak: the profile "
                            "is wrong or uses a sparse (2:4) figure")  # fmt: skip
        elif r.fraction_of_peak is not None and r.fraction_of_peak < 0.5:
            warnings.append(f"{dtype}: best is {r.fraction_of_peak:.0%} of the dense peak: throttled clocks, a busy "
                            "device, or sizes too small to saturate it")  # fmt: skip
    return BenchResult(device=dev, device_name=name, torch_version=str(torch.__version__), hardware=hardware,
                       records=records, best=best, warnings=warnings)  # fmt: skip


def _over_budget(record: MatmulRecord, rate: float | None, left: float) -> str | None:
    """Why ``record``'s shape cannot run in the ``left`` seconds of the budget (None if it can)."""
    if left <= 0 or rate is None:
        return "time budget used up"
    cost = measure_cost(2.0 * record.m * record.k * record.n / rate, record.m, record.k, record.n)
    return f"would take ~{cost:.1f} s, more than the {left:.1f} s left of the budget" if cost > left else None


def _measure_into(record: MatmulRecord, torch: Any, target_seconds: float) -> float | None:
    """Measure ``record``'s shape and fill it in; the achieved FLOP/s, or None if it could not run."""
    m, k, n = record.m, record.k, record.n
    try:
        seconds, error, repeats = measure(torch, record.device, record.dtype, m, k, n, target_seconds)
    except (RuntimeError, MemoryError) as exc:
        if "out of memory" not in str(exc).lower() and not isinstance(exc, MemoryError):
            raise
        record.reason = "out of memory"
        if record.device == "cuda":
            torch.cuda.empty_cache()
        return None
    rate = 2.0 * m * k * n / seconds
    record.seconds, record.relative_error, record.repeats = seconds, error, repeats
    if error > TOLERANCE[record.dtype]:
        record.reason = f"wrong result: relative error {error:.2e} > {TOLERANCE[record.dtype]:g}"
        return rate
    record.status, record.flops_per_second = "ok", rate
    if record.peak_flops:
        record.fraction_of_peak = rate / record.peak_flops
    return rate


def _probe_rate(torch: Any, device: str, dtype: str) -> float:
    """FLOP/s of one 128³ matmul, to predict larger ones (some CPUs run fp16 or bf16 100× slower than fp32).

    Small matmuls run below peak, so the prediction errs on the slow side: sizes are skipped early
    rather than overrunning the budget.
    """
    size = 128
    pairs = _operands(torch, device, dtype, size, size, size, 1)
    fn = _matmul_fn(torch, dtype, device)
    _time_once(torch, device, fn, pairs)
    seconds = _time_once(torch, device, fn, pairs)
    return 2.0 * size**3 / max(seconds, 1e-9)
