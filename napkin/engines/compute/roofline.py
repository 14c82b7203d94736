"""One matmul on one device: FLOPs, bytes moved and the roofline's time (``matmul``)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from napkin import sources
from napkin.domain.choices import STORAGE_BYTES
from napkin.results.explain import step
from napkin.results.result import Result
from napkin.systems.profiles import HardwareProfile
from napkin.units import (
    format_bandwidth,
    format_bytes_si,
    format_duration,
    format_flops,
    format_number,
    format_rate,
    format_sci,
    format_whole,
)


class MatmulResult(Result):
    title: ClassVar[str] = "Matmul roofline"
    headline: ClassVar[tuple[str, ...]] = ("flops", "arithmetic_intensity", "bound", "seconds")

    m: int
    k: int
    n: int
    dtype: str
    hardware: str
    flops: float
    bytes: float
    arithmetic_intensity: float = Field(description="FLOP per byte moved")
    ridge_point: float = Field(description="peak / bandwidth, FLOP per byte")
    bound: str = Field(description="'compute' or 'memory'")
    peak_flops: float
    memory_bandwidth: float
    seconds: float = Field(description="roofline time: max(FLOPs / peak, bytes / bandwidth)")
    attainable_flops_per_second: float

    def rows(self) -> list[tuple[str, str]]:
        return [
            ("shape", f"({self.m:,} × {self.k:,}) · ({self.k:,} × {self.n:,}), {self.dtype}"),
            ("FLOPs", format_flops(self.flops)),
            ("bytes moved", format_bytes_si(self.bytes)),
            ("arithmetic intensity", f"{_per_byte(self.arithmetic_intensity)} FLOP/B"),
            ("ridge point", f"{self.ridge_point:,.1f} FLOP/B ({self.hardware})"),
            ("bound", f"{self.bound}-bound"),
            ("roofline time", f"{format_duration(self.seconds)} at {format_rate(self.attainable_flops_per_second)}"),
        ]


def _per_byte(value: float) -> str:
    """FLOP per byte: one decimal (``1,365.3``), in scientific notation from 10^7 (``3.000e15``, not 22 digits)."""
    return f"{value:,.1f}" if value < 1e7 else format_number(value)


def matmul(m: int, k: int, n: int, hardware: HardwareProfile, dtype: str) -> MatmulResult:
    """Roofline of one (m×k)·(k×n) matmul: 2mkn FLOPs over bytes·(mk + kn + mn) of traffic."""
    flops = 2.0 * m * k * n
    element = STORAGE_BYTES[dtype]
    traffic = element * (m * k + k * n + m * n)
    intensity = flops / traffic
    peak, bandwidth = hardware.peak(dtype), hardware.memory_bandwidth
    ridge = peak / bandwidth
    seconds = max(flops / peak, traffic / bandwidth)
    steps = [
        step("FLOPs", "2·m·k·n", f"2 × {m:,} × {k:,} × {n:,}", format_flops(flops), sources.MATMUL),
        step(
            "bytes moved",
            "e·(m·k + k·n + m·n)",
            f"{element:g} × ({format_whole(m * k)} + {format_whole(k * n)} + {format_whole(m * n)})",
            f"{format_whole(traffic)} B",
            "each operand and the output cross memory once (ideal tiling)",
        ),
        step(
            "arithmetic intensity",
            "FLOPs / bytes",
            f"{format_sci(flops)} / {format_sci(traffic)}",
            f"{_per_byte(intensity)} FLOP/B",
            sources.ROOFLINE,
        ),
        step(
            "ridge point",
            "peak / bandwidth",
            f"{format_rate(peak)} / {format_bandwidth(bandwidth)}",
            f"{ridge:,.1f} FLOP/B",
            sources.ROOFLINE,
        ),
        step(
            "roofline time",
            "max(FLOPs / peak, bytes / bandwidth)",
            f"max({flops / peak:.3g} s, {traffic / bandwidth:.3g} s)",
            f"{seconds:.4g} s",
            sources.ROOFLINE,
        ),
    ]
    return MatmulResult(
        m=m,
        k=k,
        n=n,
        dtype=dtype,
        hardware=hardware.name,
        flops=flops,
        bytes=traffic,
        arithmetic_intensity=intensity,
        ridge_point=ridge,
        bound="compute" if intensity >= ridge else "memory",
        peak_flops=peak,
        memory_bandwidth=bandwidth,
        seconds=seconds,
        attainable_flops_per_second=min(peak, intensity * bandwidth),
        steps=steps,
    )


# ------------------------------------------------------------------------------------- flops train
