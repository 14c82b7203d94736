"""``napkin bench memory``: the device memory bandwidth torch reaches, by STREAM's copy and triad kernels.

STREAM (McCalpin 1995, "Memory Bandwidth and Machine Balance in Current High Performance Computers", IEEE TCCA
Newsletter) counts the bytes a kernel must move: copy ``b = a`` reads and writes one array (2 × n × element),
triad ``a = b + s·c`` reads two and writes one (3 × n × element). Each kernel runs on arrays far larger than
the caches, a few times after a warm-up, and the best time counts. torch is imported only here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from napkin.domain.base import Record
from napkin.errors import UsageError
from napkin.live.bench import _sync, device_name, import_torch, pick_device
from napkin.results.result import TableResult
from napkin.systems.profiles import HardwareProfile
from napkin.units import format_bandwidth, format_bytes, format_duration, format_percent

#: Bytes moved per element of the array, by kernel (STREAM's counting: reads + writes).
TRAFFIC = {"copy": 2, "triad": 3}


class BandwidthRecord(Record):
    kernel: str
    bytes_per_array: float
    seconds: float = Field(description="best time of one kernel")
    bytes_per_second: float


class MemoryBenchResult(TableResult):
    """Achieved memory bandwidth per kernel, against the profile's datasheet figure."""

    title: ClassVar[str] = "Memory bandwidth"
    headline: ClassVar[tuple[str, ...]] = ("best_bytes_per_second",)

    device: str
    device_name: str
    torch_version: str
    hardware: str | None
    datasheet_bytes_per_second: float | None
    records: list[BandwidthRecord]
    best_bytes_per_second: float
    best_kernel: str

    def heading(self) -> str:
        return f"Memory bandwidth: {self.device_name} ({self.device})"

    def header(self) -> list[str]:
        return ["kernel", "array", "best time", "bandwidth", "of datasheet"]

    def align(self) -> str:
        return "lrrrr"

    def body(self) -> list[list[str]]:
        sheet = self.datasheet_bytes_per_second
        return [
            [
                r.kernel,
                format_bytes(r.bytes_per_array),
                format_duration(r.seconds),
                format_bandwidth(r.bytes_per_second),
                format_percent(r.bytes_per_second / sheet) if sheet else "—",
            ]
            for r in self.records
        ]


def measure(
    device: str = "auto",
    array_bytes: float = 1 << 30,
    repeats: int = 10,
    hardware: HardwareProfile | None = None,
    progress: Callable[[str, float], None] | None = None,
) -> MemoryBenchResult:
    """Time copy and triad on fp32 arrays of ``array_bytes`` each; the best of ``repeats`` runs per kernel."""
    torch = import_torch()
    dev = pick_device(torch, device)
    n = int(array_bytes // 4)
    if n < 1 << 16:
        raise UsageError("size: at least 256 KiB per array (smaller arrays measure the caches)", field="size")
    try:
        a = torch.ones(n, dtype=torch.float32, device=dev)
        b = torch.empty_like(a)
        c = torch.full_like(a, 2.0)
    except RuntimeError as exc:  # out of memory on the device
        raise UsageError(f"size: three arrays of {format_bytes(array_bytes)} do not fit on {dev}: {exc}") from None
    kernels: dict[str, Callable[[], None]] = {
        "copy": lambda: b.copy_(a),
        "triad": lambda: torch.add(b, c, alpha=3.0, out=a),
    }
    records = []
    for i, (name, kernel) in enumerate(kernels.items()):
        kernel()  # warm-up
        _sync(torch, dev)
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            kernel()
            _sync(torch, dev)
            best = min(best, time.perf_counter() - start)
        moved = TRAFFIC[name] * n * 4
        records.append(
            BandwidthRecord(kernel=name, bytes_per_array=n * 4.0, seconds=best, bytes_per_second=moved / best)
        )
        if progress is not None:
            progress(name, (i + 1) / len(kernels))
    top = max(records, key=lambda r: r.bytes_per_second)
    return MemoryBenchResult(
        device=dev,
        device_name=device_name(torch, dev),
        torch_version=str(torch.__version__),
        hardware=hardware.name if hardware is not None else None,
        datasheet_bytes_per_second=hardware.memory_bandwidth if hardware is not None else None,
        records=records,
        best_bytes_per_second=top.bytes_per_second,
        best_kernel=top.kernel,
    )


def save(result: MemoryBenchResult, profile: HardwareProfile, *, force: bool = False) -> Path:
    """Keep the best bandwidth as ``profile``'s measurement (``--bandwidth measured`` reads it)."""
    from napkin.systems.measurements import BandwidthMeasurement, check_device, save_memory

    check_device(profile.name, profile.device_names, result.device_name, force=force)
    return save_memory(
        profile.name,
        BandwidthMeasurement(
            bytes_per_second=result.best_bytes_per_second,
            kernel=result.best_kernel,
            date=date.today().isoformat(),
            device=result.device_name,
            torch_version=result.torch_version,
            size_bytes=result.records[0].bytes_per_array,
        ),
    )
