"""Number formats: ranges from the bit layout, exact rounding; cross-checked with torch where present."""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from napkin.engines.number_formats import FORMATS, parse_shape, table, tensor_size
from napkin.errors import UsageError
from tests.conftest import needs_torch

# numpy.finfo (fp64/32/16) and ml_dtypes.finfo (bf16, fp8) values; fp8: Micikevicius et al. 2022, arXiv:2209.05433.
RANGES = {
    "fp64": (1.7976931348623157e308, 2.2250738585072014e-308, 4.9406564584124654e-324, 2.220446049250313e-16),
    "fp32": (3.4028234663852886e38, 1.1754943508222875e-38, 1.401298464324817e-45, 1.1920928955078125e-07),
    "tf32": (3.4011621342146535e38, 1.1754943508222875e-38, 1.1479437019748901e-41, 9.765625e-04),
    "fp16": (65504.0, 6.103515625e-05, 5.960464477539063e-08, 9.765625e-04),
    "bf16": (3.3895313892515355e38, 1.1754943508222875e-38, 9.183549615799121e-41, 7.8125e-03),
    "fp8-e4m3": (448.0, 0.015625, 0.001953125, 0.125),
    "fp8-e5m2": (57344.0, 6.103515625e-05, 1.52587890625e-05, 0.25),
}


@pytest.mark.parametrize("name", sorted(RANGES))
def test_ranges(name: str) -> None:
    f = FORMATS[name]
    assert (f.max, f.smallest_normal, f.smallest_subnormal, f.eps) == RANGES[name]


def test_underflow_and_precision_examples() -> None:
    """1e-8 vanishes in fp16 but not in bf16; 1 + 1e-3 is lost in bf16 but not in fp16 (eps 2⁻⁷ vs 2⁻¹⁰)."""
    assert FORMATS["fp16"].round(1e-8) == 0.0
    assert FORMATS["bf16"].round(1e-8) == 1.0011717677116394e-08
    assert FORMATS["bf16"].round(1 + 1e-3) == 1.0
    assert FORMATS["fp16"].round(1 + 1e-3) == 1.0009765625


def test_overflow_behaviour() -> None:
    assert FORMATS["fp8-e4m3"].round(448) == 448
    assert FORMATS["fp8-e4m3"].round(1e6) == 448  # e4m3fn has no inf: saturates, as torch does
    assert FORMATS["fp8-e5m2"].round(57344) == 57344
    assert FORMATS["fp8-e5m2"].round(61439) == 57344  # below the half-ulp threshold
    assert FORMATS["fp8-e5m2"].round(61440) == math.inf  # tie rounds to even = overflow
    assert FORMATS["fp16"].round(65519) == 65504 and FORMATS["fp16"].round(65520) == math.inf
    assert FORMATS["bf16"].round(-1e39) == -math.inf
    assert math.isnan(FORMATS["fp16"].round(math.nan))


def test_ties_round_to_even() -> None:
    assert FORMATS["fp8-e4m3"].round(1.0625) == 1.0  # halfway between 1.0 and 1.125 → even mantissa
    assert FORMATS["fp8-e4m3"].round(1.1875) == 1.25


def test_table_with_a_value_and_int8() -> None:
    rows = {r.name: r for r in table(1e-8)}
    assert rows["fp16"].stored == 0.0 and rows["fp16"].relative_error == 1.0
    assert rows["int8"].max == 127 and rows["int8"].stored == 0.0
    assert {r.name: r.stored for r in table(300.7)}["int8"] == 127.0
    with pytest.raises(UsageError, match="NaN has no int8"):
        table(math.nan)


def test_tensor_sizes() -> None:
    ffn = tensor_size(parse_shape("49152x12288"), "fp32")
    assert ffn.bytes == 2_415_919_104 and ffn.elements == 603_979_776
    assert tensor_size(parse_shape("4096×4096"), "bf16").bytes == 2 * 4096**2
    for bad in ("", "0x5", "axb", "-1x3"):
        with pytest.raises(UsageError, match="SHAPE"):
            parse_shape(bad)
    with pytest.raises(UsageError, match="accepted: bf16"):
        tensor_size((3,), "fp7")


finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False)


@given(finite32, st.sampled_from(["bf16", "fp16", "fp8-e4m3", "fp8-e5m2", "tf32"]))
def test_rounding_is_idempotent_and_monotone_step(value: float, name: str) -> None:
    f = FORMATS[name]
    once = f.round(value)
    assert f.round(once) == once or math.isinf(once)
    if math.isfinite(once) and value != 0:
        assert abs(once - value) <= max(abs(value) * f.eps, f.smallest_subnormal) or abs(once) == f.max


@given(finite32)
def test_fp32_rounding_matches_struct(value: float) -> None:
    assert FORMATS["fp32"].round(value) == struct.unpack("f", struct.pack("f", value))[0]


@needs_torch
@pytest.mark.torch
def test_against_torch_finfo_and_conversions() -> None:
    import torch

    for f in FORMATS.values():
        if f.torch_name is None:
            continue
        info = torch.finfo(getattr(torch, f.torch_name))
        assert (f.max, f.smallest_normal, f.eps) == (info.max, info.smallest_normal, info.eps)
    values = [1e-8, 3e-8, 448.0, 464.0, 500.0, 57344.0, 61440.0, 65504.0, 65520.0, 1.0625, -2.5, 1e-3]
    values = [struct.unpack("f", struct.pack("f", v))[0] for v in values]
    for name in ("bf16", "fp16", "fp8-e4m3", "fp8-e5m2"):
        dtype = getattr(torch, FORMATS[name].torch_name or "")
        theirs = torch.tensor(values, dtype=torch.float32).to(dtype).to(torch.float64).tolist()
        assert [FORMATS[name].round(v) for v in values] == theirs, name
