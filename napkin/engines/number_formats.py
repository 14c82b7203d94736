"""Number formats: their ranges, and exactly what each stores for a given value.

Pure Python, no torch: ranges are derived from the bit layout, and rounding is IEEE round-to-nearest,
ties-to-even, done with exact rationals (IEEE 754-2019 §4.3.1; Micikevicius et al. 2022, arXiv:2209.05433 for
fp8). ``fp8-e4m3`` is the "fn" variant used by PyTorch (``float8_e4m3fn``): no infinities, only
S.1111.111 is NaN, which buys a max of 448 instead of 240. Out-of-range values become ±inf in formats
that have it; e4m3fn has no inf, and PyTorch's conversion saturates to ±448 (checked by ``napkin verify``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import ConfigDict

from napkin.domain.base import Record
from napkin.domain.choices import STORAGE_BYTES
from napkin.errors import UsageError
from napkin.results.result import Result, TableResult
from napkin.units import format_bytes, format_whole


@dataclass(frozen=True)
class FloatFormat:
    name: str
    exponent_bits: int
    mantissa_bits: int
    has_inf: bool = True
    nan_only_all_ones: bool = False  # e4m3fn: the all-ones exponent is a normal binade except S.1111.111
    torch_name: str | None = None
    note: str = ""

    @property
    def storage_bytes(self) -> float:
        return STORAGE_BYTES[self.name]

    @property
    def bias(self) -> int:
        return int(2 ** (self.exponent_bits - 1) - 1)

    @property
    def emax(self) -> int:
        top = int(2**self.exponent_bits - 1)
        return top - self.bias if self.nan_only_all_ones else top - 1 - self.bias

    @property
    def emin(self) -> int:
        return 1 - self.bias

    @property
    def max(self) -> float:
        top = 2 ** (self.mantissa_bits + 1) - 1  # 1.111…1 in units of the last mantissa bit
        if self.nan_only_all_ones:
            top -= 1  # 1.11…10: the all-ones mantissa is NaN
        return math.ldexp(top, self.emax - self.mantissa_bits)

    @property
    def smallest_normal(self) -> float:
        return 2.0**self.emin

    @property
    def smallest_subnormal(self) -> float:
        return 2.0 ** (self.emin - self.mantissa_bits)

    @property
    def eps(self) -> float:
        """Gap between 1.0 and the next representable number: 2^-m."""
        return 2.0**-self.mantissa_bits

    @property
    def bits(self) -> int:
        return 1 + self.exponent_bits + self.mantissa_bits

    def round(self, value: float) -> float:
        """What this format stores for ``value`` (round to nearest, ties to even)."""
        if math.isnan(value):
            return math.nan
        if math.isinf(value):
            return value if self.has_inf else math.copysign(self.max, value)
        if value == 0:
            return value
        from fractions import Fraction  # exact arithmetic only when rounding (keeps startup light)

        sign = -1.0 if value < 0 else 1.0
        x = Fraction(abs(value))
        exponent = max(math.frexp(abs(value))[1] - 1, self.emin)
        quantum = Fraction(2) ** (exponent - self.mantissa_bits)
        q, r = divmod(x, quantum)
        n = int(q)
        if r * 2 > quantum or (r * 2 == quantum and n % 2 == 1):
            n += 1
        result = n * quantum
        if result > Fraction(self.max):
            # Beyond max: IEEE formats overflow to inf once the value reaches max + half an ulp.
            return sign * (math.inf if self.has_inf else self.max)
        return sign * float(result)


FORMATS: dict[str, FloatFormat] = {
    f.name: f
    for f in (
        FloatFormat("fp64", 11, 52, torch_name="float64"),
        FloatFormat("fp32", 8, 23, torch_name="float32"),
        FloatFormat("tf32", 8, 10, note="compute mode of fp32 matmuls; stored as fp32"),
        FloatFormat("bf16", 8, 7, torch_name="bfloat16"),
        FloatFormat("fp16", 5, 10, torch_name="float16"),
        FloatFormat(
            "fp8-e4m3",
            4,
            3,
            has_inf=False,
            nan_only_all_ones=True,
            torch_name="float8_e4m3fn",
            note="no inf (saturates at ±448); S.1111.111 is NaN",
        ),
        FloatFormat("fp8-e5m2", 5, 2, torch_name="float8_e5m2"),
    )
}

INT8_MIN, INT8_MAX = -128, 127


class DtypeRow(Record):
    model_config = ConfigDict(frozen=True)

    name: str
    bits: int
    sign_bits: int
    exponent_bits: int
    mantissa_bits: int
    bytes: float
    max: float
    smallest_normal: float | None
    smallest_subnormal: float | None
    eps: float
    torch_name: str | None
    note: str
    stored: float | None = None
    relative_error: float | None = None


def table(value: float | None = None) -> list[DtypeRow]:
    """One row per format (and int8), optionally with what each stores for ``value``."""
    rows = []
    for f in FORMATS.values():
        stored = f.round(value) if value is not None else None
        rows.append(
            DtypeRow(
                name=f.name,
                bits=f.bits,
                sign_bits=1,
                exponent_bits=f.exponent_bits,
                mantissa_bits=f.mantissa_bits,
                bytes=f.storage_bytes,
                max=f.max,
                smallest_normal=f.smallest_normal,
                smallest_subnormal=f.smallest_subnormal,
                eps=f.eps,
                torch_name=f.torch_name,
                note=f.note,
                stored=stored,
                relative_error=_relative_error(value, stored),
            )
        )
    stored_int = None
    if value is not None:
        if math.isnan(value):
            raise UsageError("value: NaN has no int8 representation; give a finite number or ±inf", field="value")
        stored_int = float(min(INT8_MAX, max(INT8_MIN, round(value)))) if math.isfinite(value) else None
    rows.append(
        DtypeRow(
            name="int8",
            bits=8,
            sign_bits=1,
            exponent_bits=0,
            mantissa_bits=7,
            bytes=1,
            max=INT8_MAX,
            smallest_normal=None,
            smallest_subnormal=None,
            eps=1.0,
            torch_name="int8",
            note="integer: round to nearest even, saturating, no scale",
            stored=stored_int,
            relative_error=_relative_error(value, stored_int),
        )
    )
    return rows


def _relative_error(value: float | None, stored: float | None) -> float | None:
    if value is None or stored is None or not math.isfinite(value) or value == 0 or not math.isfinite(stored):
        return None
    return abs(stored - value) / abs(value)


def parse_value(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"value: {text!r} is not a number; give e.g. 1e-8, 448 or 65504", field="value") from None


class TensorSize(Result):
    title: ClassVar[str] = "Tensor size"
    headline: ClassVar[tuple[str, ...]] = ("shape", "dtype", "bytes")

    shape: list[int]
    dtype: str
    elements: int
    bytes: float

    def rows(self) -> list[tuple[str, str]]:
        return [
            ("shape", " × ".join(f"{d:,}" for d in self.shape) + f" ({self.dtype})"),
            ("elements", format_whole(self.elements)),
            (
                "bytes",
                f"{format_whole(self.bytes)} B" + (f" = {format_bytes(self.bytes)}" if self.bytes >= 1000 else ""),
            ),
        ]


class DtypeTable(TableResult):
    """``napkin dtypes``: one row per number format, optionally with what each stores for a value."""

    title: ClassVar[str] = "Number formats"
    #: ``--value inf`` is stored as inf: a fact about the format, written as "inf" in JSON (cli.common.dumps).
    non_finite_ok: ClassVar[bool] = True

    value: float | None = None
    value_text: str | None = None
    formats: list[DtypeRow]

    def header(self) -> list[str]:
        head = ["format", "s/e/m", "B", "max", "min normal", "min subnormal", "eps"]
        return head + ([f"stores {self.value_text}", "rel. err"] if self.value is not None else [])

    def body(self) -> list[list[str]]:
        from napkin.results.render import number as g

        body = []
        for row in self.formats:
            cells = [
                row.name,
                f"1/{row.exponent_bits}/{row.mantissa_bits}",
                f"{row.bytes:g}",
                g(row.max),
                g(row.smallest_normal),
                g(row.smallest_subnormal),
                g(row.eps),
            ]
            if self.value is not None:
                cells += [g(row.stored), "–" if row.relative_error is None else f"{row.relative_error:.1e}"]
            body.append(cells)
        return body

    def caption(self) -> str:
        return "round to nearest, ties to even; fp8-e4m3 = float8_e4m3fn (no inf)"

    def secondary(self) -> tuple[int, ...]:
        return (1, 5)  # s/e/m, min subnormal

    def to_json(self, explain: bool = False) -> Any:
        return [row.model_dump(mode="json") for row in self.formats]


def dtypes(value: float | str | None = None) -> DtypeTable:
    """Every number format's range and precision; with ``value``, what each stores for it (exact RNE)."""
    from napkin.units import plain_number

    text = None if value is None else str(value)[:40]
    number = plain_number(value)
    if value is not None and number is None and not isinstance(value, str):
        raise UsageError(f"--value: {value!r} is not a number; give e.g. 1e-8, 448 or 65504")
    v = None if value is None else (number if number is not None else parse_value(str(value)))
    try:
        stored = None if v is None else float(v)
    except OverflowError:
        raise UsageError(
            f"--value: a {len(str(v))}-digit number is beyond every format's range (and a float's); "
            "write it with an exponent, e.g. 1e400 (stored as inf)"
        ) from None
    return DtypeTable(value=stored, value_text=text, formats=table(stored))


def tensor_size(shape: tuple[int, ...], dtype: str) -> TensorSize:
    """A dense tensor's size: elements × bytes per element (GPT-3's FFN matrix 49152×12288 fp32 = 2.42 GB)."""
    return TensorSize(shape=list(shape), dtype=dtype, elements=math.prod(shape), bytes=tensor_bytes(shape, dtype))


def tensor_bytes(shape: tuple[int, ...], dtype: str) -> float:
    """Bytes of a dense tensor: elements × bytes per element."""
    per = STORAGE_BYTES.get(dtype)
    if per is None:
        known = ", ".join(sorted(set(STORAGE_BYTES) - {"fp64_tensor"}))
        raise UsageError(f"dtype: unknown dtype {dtype!r}; accepted: {known}", field="dtype")
    return math.prod(shape) * per


def parse_shape(text: str) -> tuple[int, ...]:
    """``"49152x12288"`` (or with ``,``, ``×`` or ``*``) → (49152, 12288); sizes as ``flops matmul`` takes
    them, so ``"48kx12k"`` → (49152, 12288) (widths: k = 2¹⁰, as ``units.parse_length`` reads them)."""
    from napkin.units import parse_length

    parts = [p.strip() for p in text.replace("×", "x").replace(",", "x").replace("*", "x").split("x")]
    if len(parts) > 1 and parts[-1] == "":  # a trailing separator, as in "4096,"
        parts.pop()
    try:
        dims = tuple(parse_length(p.replace("_", ""), "SHAPE") for p in parts) if all(parts) else ()
    except UsageError:
        dims = ()
    if not dims or any(d <= 0 for d in dims):
        raise UsageError(
            f"SHAPE: {text!r} is not a shape; write positive sizes joined by x, e.g. 49152x12288 or 48kx12k"
        )
    return dims
