"""Measured matmul throughput with torch (the optional ``bench`` extra), against the profile's peak.

Benchmark discipline (after nanoGPT ``bench.py`` and torch.utils.benchmark):

* random normal inputs, never zeros; several input buffers rotated so caches do not flatter a size;
* warm-up first; a ``synchronize`` (CUDA/MPS) around every timed batch, and batches long enough
  (≥ 1 ms on a GPU) that the timer's resolution does not matter; the median over batches;
* the product is checked once against a float64 reference (a 64×64 corner), so a broken kernel
  cannot report a speed;
* a hard deadline, checked before every timed call: a call runs only if twice its predicted time
  (the previous size's measured time scaled by FLOPs) fits in what is left; out-of-memory is caught
  per size and the run goes on.

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

from napkin.domain.base import Record
from napkin.errors import MissingDependencyError, UsageError
from napkin.results.result import TableResult
from napkin.units import format_duration, format_percent, format_rate, parse_int

if TYPE_CHECKING:
    from napkin.systems.profiles import HardwareProfile

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


class BenchResult(TableResult):
    """Every (shape, dtype) timed, the best per dtype, and what was skipped with the reason."""

    device: str
    device_name: str
    torch_version: str
    hardware: str | None
    records: list[MatmulRecord]
    best: dict[str, MatmulRecord]

    def heading(self) -> str:
        return f"Matmul benchmark: {self.device_name} ({self.device}, torch {self.torch_version})"

    def header(self) -> list[str]:
        return ["dtype", "M×K×N", "achieved", "dense peak", "of peak", "median"]

    def align(self) -> str:
        return "llrrrr"

    def body(self) -> list[list[str]]:
        return [
            [
                rec.dtype,
                _shape(rec),
                format_rate(rec.flops_per_second or 0),
                format_rate(rec.peak_flops) if rec.peak_flops else "–",
                format_percent(rec.fraction_of_peak) if rec.fraction_of_peak is not None else "–",
                format_duration(rec.seconds or 0),
            ]
            for rec in self.records
            if rec.status == "ok"
        ]

    def extras(self) -> list[Any]:
        from napkin.results.render import Wrapped, together

        skipped: dict[str, list[MatmulRecord]] = {}
        for rec in self.records:
            if rec.status != "ok":
                skipped.setdefault(rec.dtype, []).append(rec)
        notes = [f"{d} {', '.join(_shape(x) for x in recs)}: {recs[0].reason}" for d, recs in skipped.items()]
        best = ", ".join(
            together(f"{d} {format_rate(b.flops_per_second or 0)}") + f" at {_shape(b)}" for d, b in self.best.items()
        )
        lines = [
            f"best: {best or 'none'}",
            *(["not measured:"] if notes else []),
            *(f"- {n}" for n in notes),
            "median over repeats, inputs rotated, result checked against float64",
        ]
        return [Wrapped("\n".join(lines))]  # wrapped between figures, never inside "101.8 GFLOP/s"

    def to_json(self, explain: bool = False) -> Any:
        return [rec.model_dump(mode="json") for rec in self.records]  # one record per (size, dtype)


def _shape(rec: MatmulRecord) -> str:
    return f"{rec.m}³" if rec.m == rec.k == rec.n else f"{rec.m}×{rec.k}×{rec.n}"


def parse_sizes(sizes: str) -> list[int]:
    """``--sizes 1024,2048``: square sizes."""
    return [parse_int(part, "--sizes") for part in sizes.split(",") if part.strip()]


def parse_shapes(texts: Sequence[str]) -> list[tuple[int, int, int]]:
    """``--shape 4096x4096x14336`` (repeatable): extra M×K×N shapes."""
    shapes = []
    for text in texts:
        parts = [p for p in text.replace("×", "x").lower().split("x") if p.strip()]
        if len(parts) != 3:
            raise UsageError(f"--shape: {text!r} must be MxKxN, e.g. 4096x4096x14336")
        m, k, n = (parse_int(p, "--shape") for p in parts)
        shapes.append((m, k, n))
    return shapes


def save_best(result: BenchResult, profile: HardwareProfile, *, force: bool = False) -> Path | None:
    """Keep the best FLOP/s per dtype of ``result`` as ``profile``'s measurements; the file, if any.

    The device it ran on is recorded, and must be one of the profile's ``device_names`` (unless
    ``force``): a CPU figure saved as an H100's measured peak would make ``--peak measured`` absurd.
    """
    from napkin.systems.measurements import Measurement, check_device, save

    check_device(profile.name, profile.device_names, result.device_name, force=force)
    path = None
    for dtype, rec in result.best.items():
        path = save(
            profile.name,
            dtype,
            Measurement(
                flops_per_second=rec.flops_per_second,
                date=date.today().isoformat(),
                device=rec.device_name,
                torch_version=result.torch_version,
                size=f"{rec.m}x{rec.k}x{rec.n}",
            ),
        )
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
#: Predictions from a smaller size are scaled by FLOPs; a loaded machine or a size that falls out of
#: cache can run slower than that, so a call is attempted only if twice its prediction still fits.
SAFETY = 2.0


class OutOfTime(Exception):
    """The next timed call would pass the deadline."""


class Clock:
    """The hard deadline of a run, checked before every timed call; also drives the progress bar."""

    def __init__(self, budget: float, progress: Callable[[str, float], None] | None = None) -> None:
        self.start = time.perf_counter()
        self.budget = budget
        self.deadline = self.start + budget
        self.progress = progress
        self.label = ""
        self.items = 0  # (shape, dtype) items to measure, and how many are finished
        self.done = 0

    def left(self, until: float | None = None) -> float:
        return min(self.deadline, until or self.deadline) - time.perf_counter()

    def check(self, predicted: float, until: float | None = None) -> None:
        """Raise OutOfTime unless a call predicted to take ``predicted`` seconds ends before the deadline."""
        self.tick()
        if SAFETY * predicted > self.left(until):
            raise OutOfTime

    def tick(self, label: str | None = None) -> None:
        if label is not None:
            self.label = label
        if self.progress is not None:
            elapsed = (time.perf_counter() - self.start) / self.budget if self.budget > 0 else 1.0
            work = self.done / self.items if self.items else 0.0
            self.progress(self.label, min(1.0, max(work, elapsed)))


def buffers_for(m: int, k: int, n: int) -> int:
    """Input buffers to rotate: many for small shapes (which fit in cache), a few for large ones."""
    return 8 if m * k * n <= 512**3 else 3


def measure_cost(seconds_per_matmul: float, m: int, k: int, n: int, buffers: int | None = None) -> float:
    """Least time ``measure`` needs: the checked product, two warm-ups and MIN_REPEATS timed passes."""
    return seconds_per_matmul * (2 + (buffers or buffers_for(m, k, n)) * (1 + MIN_REPEATS))


def measure(
    torch: Any,
    device: str,
    dtype: str,
    m: int,
    k: int,
    n: int,
    target_seconds: float,
    clock: Clock | None = None,
    guess: float = 0.0,
    until: float | None = None,
    buffers: int | None = None,
) -> tuple[float, float, int]:
    """(median seconds per matmul, relative error, timed passes) for one shape and dtype.

    With a ``clock``, every call is checked against its deadline first (``guess``: the predicted
    seconds of one matmul, before one has been timed); OutOfTime if not even one timed pass fits.
    """
    clock = clock or Clock(math.inf)
    buffers = buffers or buffers_for(m, k, n)
    clock.check(guess, until)
    pairs = _operands(torch, device, dtype, m, k, n, buffers)
    fn = _matmul_fn(torch, dtype, device)
    clock.check(guess, until)
    c = fn(*pairs[0])
    error = _relative_error(torch, *pairs[0], c)
    del c
    clock.check(guess, until)
    one = _time_once(torch, device, fn, pairs[:1])  # warm-up (also loads kernels)
    clock.check(one * len(pairs), until)
    one = _time_once(torch, device, fn, pairs)  # second warm-up over every buffer, and a timing estimate
    batch_floor = 1e-3 if device != "cpu" else 0.0
    inner = max(1, math.ceil(batch_floor / max(one, 1e-9) / len(pairs)))
    batch = pairs * inner
    repeats = int(min(50, max(MIN_REPEATS, target_seconds / max(one * len(batch), 1e-9))))
    times: list[float] = []
    for _ in range(repeats):
        try:
            clock.check((times[-1] if times else one) * len(batch), until)
        except OutOfTime:
            if not times:
                raise
            break  # the deadline cuts the repeats short; what was timed stands
        times.append(_time_once(torch, device, fn, batch))
    return statistics.median(times), error, len(times)


def priority(dtypes: Sequence[str], default: str = "bf16") -> list[str]:
    """The dtypes in the order they are measured: the default compute dtype, then fp32, then the rest."""
    first = [d for d in (default, "fp32") if d in dtypes]
    return list(dict.fromkeys([*first, *dtypes]))


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
    default_dtype: str = "bf16",
) -> BenchResult:
    """Benchmark each (shape, dtype) within ``budget`` seconds; returns every record and the best per dtype.

    Never runs past the budget: every timed call is checked against a hard deadline first. The dtypes
    run in ``priority`` order: the default dtype and fp32 split the time between them, the others share
    what those leave (what one leaves unused goes to the next). Within a dtype the sizes run smallest
    first, and each size is attempted only if the measured time of the previous one, scaled by FLOPs,
    says it fits (with one input buffer instead of the usual rotation, if only that fits). The first
    is predicted by timing single matmuls on a ladder of sizes doubling from 128 (each predicted from
    the one before).
    """
    torch = import_torch()
    for dtype in dtypes:
        if dtype not in DTYPES:
            raise UsageError(f"--dtype: {dtype!r} is not one of: {', '.join(DTYPES)}")
    dev = pick_device(torch, device)
    name = device_name(torch, dev)
    all_shapes = sorted({*((s, s, s) for s in sizes), *shapes}, key=math.prod)
    ordered = priority(dtypes, default_dtype)
    unsupported = {d: _unsupported(torch, dev, d) for d in ordered}
    runnable = [d for d in ordered if unsupported[d] is None]
    records: list[MatmulRecord] = []
    clock = Clock(budget, progress)
    clock.items = len(runnable) * len(all_shapes)
    tf32_before = torch.backends.cuda.matmul.allow_tf32
    try:
        for dtype in ordered:
            mine = [
                MatmulRecord(
                    device=dev,
                    device_name=name,
                    dtype=dtype,
                    m=m,
                    k=k,
                    n=n,
                    status="skipped",
                    reason=unsupported[dtype],
                    peak_flops=peak(dtype),
                )
                for m, k, n in all_shapes
            ]
            records.extend(mine)
            if unsupported[dtype] is not None:
                continue
            # The dtypes that matter first (the default, then fp32) split the time between them; the
            # others share what they leave. What a dtype does not use goes to the next.
            group = [d for d in runnable if (d in ordered[:2]) == (dtype in ordered[:2])]
            later = len(group) - group.index(dtype)
            until = time.perf_counter() + max(0.0, clock.left()) / later
            torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
            _measure_dtype(torch, mine, clock, until)
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
    return BenchResult(
        device=dev,
        device_name=name,
        torch_version=str(torch.__version__),
        hardware=hardware,
        records=records,
        best=best,
        warnings=peak_warnings(best),
    )


def peak_warnings(best: dict[str, MatmulRecord]) -> list[str]:
    """A warning per dtype whose best figure is implausible against the profile's dense peak."""
    warnings = []
    for dtype, r in best.items():
        if r.fraction_of_peak is not None and r.fraction_of_peak > 1:
            warnings.append(
                f"{dtype}: measured {r.fraction_of_peak:.0%} of the profile's dense peak: the profile "
                "is wrong or uses a sparse (2:4) figure"
            )
        elif r.fraction_of_peak is not None and r.fraction_of_peak < 0.5:
            warnings.append(
                f"{dtype}: best is {r.fraction_of_peak:.0%} of the dense peak: throttled clocks, a busy "
                "device, or sizes too small to saturate it"
            )
    return warnings


def _measure_dtype(torch: Any, records: Sequence[MatmulRecord], clock: Clock, until: float) -> None:
    """Measure ``records`` (one dtype, smallest shape first) until the dtype's share of the budget ends."""
    seconds: float | None = None  # one matmul at the last size timed (a probe or a record)
    flops = 0.0
    for record in records:
        m, k, n = record.m, record.k, record.n
        clock.tick(f"{record.dtype} {m}×{k}×{n}")
        try:
            if seconds is None:
                seconds, flops = _probe(torch, record.device, record.dtype, min(m, k, n), clock, until)
            guess = seconds * (2.0 * m * k * n) / flops
            buffers, record.reason = plan(record, 2.0 * m * k * n / guess, clock.left(until))
            if buffers is not None:
                share = max(0.05, min(2.0, clock.left(until) / 4))
                measured = _measure_into(record, torch, share, clock, guess, until, buffers)
                if measured is not None:
                    seconds, flops = measured, 2.0 * m * k * n
        except OutOfTime:
            record.reason = "time budget used up"
        clock.done += 1
        clock.tick()


def plan(record: MatmulRecord, rate: float | None, left: float) -> tuple[int | None, str | None]:
    """(input buffers to rotate, None) if ``record``'s shape fits in the ``left`` seconds at ``rate``
    FLOP/s, else (None, why not). When the usual rotation does not fit, a single buffer may."""
    if left <= 0 or rate is None:
        return None, "time budget used up"
    m, k, n = record.m, record.k, record.n
    for buffers in dict.fromkeys((buffers_for(m, k, n), 1)):
        cost = measure_cost(2.0 * m * k * n / rate, m, k, n, buffers)
        if cost <= left:
            return buffers, None
    return None, f"would take ~{cost:.1f} s, more than the {left:.1f} s left of the budget"


def _measure_into(
    record: MatmulRecord, torch: Any, target_seconds: float, clock: Clock, guess: float, until: float, buffers: int
) -> float | None:
    """Measure ``record``'s shape and fill it in; seconds per matmul, or None if it could not run."""
    m, k, n = record.m, record.k, record.n
    try:
        seconds, error, repeats = measure(
            torch, record.device, record.dtype, m, k, n, target_seconds, clock, guess, until, buffers
        )
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
        return seconds
    record.status, record.flops_per_second = "ok", rate
    if record.peak_flops:
        record.fraction_of_peak = rate / record.peak_flops
    return seconds


def _probe(torch: Any, device: str, dtype: str, size: int, clock: Clock, until: float) -> tuple[float, float]:
    """(seconds, FLOPs) of one square matmul just below ``size``, reached by doubling from 128.

    Some CPUs run fp16 or bf16 100× slower than fp32, and a loaded machine anything; each rung is
    attempted only if the one before, scaled by FLOPs, says it fits (OutOfTime otherwise).
    """
    fn = _matmul_fn(torch, dtype, device)
    n = min(128, size)
    seconds = 0.0
    while True:
        clock.check(seconds * 8, until)
        pairs = _operands(torch, device, dtype, n, n, n, 1)
        clock.check(seconds * 8, until)
        _time_once(torch, device, fn, pairs)  # warm-up
        clock.check(seconds * 8, until)
        seconds = _time_once(torch, device, fn, pairs)
        if 2 * n > size // 2:
            return seconds, 2.0 * n**3
        n *= 2
