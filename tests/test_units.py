"""Parsing and formatting of quantities: accepted forms, rejected forms, round trips."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from napkin import units
from napkin.errors import UsageError


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("70e9", 70e9),
        ("70B", 70e9),
        ("70b", 70e9),
        ("1.5T", 1.5e12),
        ("15e12", 15e12),
        ("70_000_000_000", 70e9),
        ("7M", 7e6),
        ("7m", 7e6),
        ("12K", 12e3),
        (" 3 ", 3.0),
        ("2.5 B", 2.5e9),
        ("1e3", 1000.0),
        (".5T", 0.5e12),
    ],
)
def test_parse_count(text: str, value: float) -> None:
    assert units.parse_count(text, "--params") == pytest.approx(value, rel=1e-15)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("80GB", 80e9),
        ("80 GB", 80e9),
        ("80 GiB", 80 * 2**30),
        ("80gIB", 80 * 2**30),
        ("512 MiB", 512 * 2**20),
        ("1.5 TB", 1.5e12),
        ("8e10", 8e10),
        ("1024 B", 1024.0),
        ("3 bytes", 3.0),
    ],
)
def test_parse_bytes(text: str, value: float) -> None:
    assert units.parse_bytes(text) == pytest.approx(value, rel=1e-15)


def test_parse_rates_bandwidth_power_duration() -> None:
    assert units.parse_rate("989.5 TFLOP/s") == pytest.approx(989.5e12)
    assert units.parse_rate("1979 TOPS") == pytest.approx(1979e12)
    assert units.parse_rate("2.25 PFLOP/s") == pytest.approx(2.25e15)
    assert units.parse_rate("312e12") == pytest.approx(312e12)
    assert units.parse_bandwidth("3.35 TB/s") == pytest.approx(3.35e12)
    assert units.parse_bandwidth("800 GiB/s") == pytest.approx(800 * 2**30)
    assert units.parse_power("700 W") == 700.0
    assert units.parse_power("1 kW") == 1000.0
    assert units.parse_duration("90d") == 90 * 86400
    assert units.parse_duration("36 hours") == 36 * 3600
    assert units.parse_duration("2w") == 14 * 86400
    assert units.parse_duration("30") == 30.0
    assert units.parse_flops("5.76e23 FLOP") == pytest.approx(5.76e23)


BAD_COUNTS = ["0", "-5", "-70B", "nan", "inf", "-inf", "NaN", "abc", "", "70X", "1e400", "70 GB", "B70", "1..2"]


@pytest.mark.parametrize("text", BAD_COUNTS)
def test_bad_counts_are_rejected_with_the_accepted_forms(text: str) -> None:
    with pytest.raises(UsageError) as info:
        units.parse_count(text, "--params")
    message = str(info.value)
    assert message.startswith("--params: ")
    assert "70e9, 70B, 1.5T" in message
    assert "\n" not in message


@pytest.mark.parametrize("text", ["0", "-5", "abc", "nan", "70X", "-8k", "70B", "1.5T"])
def test_a_bad_length_names_the_forms_a_length_takes_not_a_parameter_count(text: str) -> None:
    with pytest.raises(UsageError) as info:
        units.parse_length(text, "--seq")
    message = str(info.value)
    assert message.startswith("--seq: ") and "8192, 32k (= 32,768)" in message and "70e9, 70B" not in message


@pytest.mark.parametrize("text", ["0 GB", "80 GX", "-1GB", "GB", "80 gigs"])
def test_bad_bytes(text: str) -> None:
    with pytest.raises(UsageError, match=r"GB = 1e9 B, GiB = 2\^30 B"):
        units.parse_bytes(text, "memory")


@pytest.mark.parametrize(("text", "value"), [("0.5", 0.5), ("50%", 0.5), ("1", 1.0), ("1e-2", 0.01)])
def test_parse_fraction(text: str, value: float) -> None:
    assert units.parse_fraction(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["0", "1.5", "-0.1", "nan", "x", "150%", "inf"])
def test_bad_fraction(text: str) -> None:
    with pytest.raises(UsageError, match=r"\(0, 1\]"):
        units.parse_fraction(text, "--mfu")


def test_fraction_ranges() -> None:
    assert units.parse_fraction_range("0.35:0.5") == (0.35, 0.5)
    assert units.parse_fraction_range("0.4") == (0.4, 0.4)
    with pytest.raises(UsageError, match=re.escape("backwards; write LOW:HIGH, e.g. 0.35:0.5")):
        units.parse_fraction_range("0.5:0.35", "--mfu")


def test_parse_int_rejects_fractions() -> None:
    assert units.parse_int("1K") == 1000
    with pytest.raises(UsageError, match="whole number"):
        units.parse_int("2.5", "--gpus")


def test_formatting_examples() -> None:
    assert units.format_flops(6.3e24) == "6.30e24 FLOPs"
    assert units.format_duration(1.2435e7) == "143.9 days"
    assert units.format_duration(7200) == "2.0 hours"
    assert units.format_duration(90) == "90 s"
    assert units.format_count(4e10) == "40.0 B"
    assert units.format_count(1.5e12) == "1.5 T"
    assert units.format_count(999) == "999"
    assert units.format_bytes(80e9) == "80 GB (74.5 GiB)"
    assert units.format_bytes(2_415_919_104) == "2.42 GB (2.25 GiB)"
    assert units.format_rate(989.5e12) == "989.5 TFLOP/s"
    assert units.format_bandwidth(3.35e12) == "3.35 TB/s"
    assert units.format_power(700) == "700 W"


positive = st.floats(min_value=1e-3, max_value=1e15, allow_nan=False, allow_infinity=False)


@given(positive)
def test_count_round_trip(value: float) -> None:
    """parse ∘ format returns the value within half of the last printed digit."""
    text = units.format_count(value, decimals=3)
    back = units.parse_count(text.replace(",", ""))
    suffix_scale = {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}.get(text.split()[-1], 1.0)
    assert abs(back - value) <= 0.5e-3 * suffix_scale + 1e-9 * value


@given(st.floats(min_value=1.0, max_value=1e16, allow_nan=False))
def test_bytes_round_trip_si_and_iec(value: float) -> None:
    """format_bytes prints 3 significant figures in each unit system (one, below 1000 B, where both read
    "640 B"); each parses back to the value."""
    si, _, iec = units.format_bytes(value).partition(" (")
    assert (iec == "") == (value < 999.5)
    for text in filter(None, (si, iec.rstrip(")"))):
        assert math.isclose(units.parse_bytes(text), value, rel_tol=5e-3)


@given(st.floats(min_value=1e9, max_value=1e17, allow_nan=False))
def test_rate_round_trip(value: float) -> None:
    assert math.isclose(units.parse_rate(units.format_rate(value)), value, rel_tol=5e-4)


@given(st.floats(min_value=1e-300, max_value=1e300, allow_nan=False), st.integers(min_value=2, max_value=6))
def test_sci_round_trip(value: float, digits: int) -> None:
    assert math.isclose(float(units.format_sci(value, digits)), value, rel_tol=0.5 * 10 ** (1 - digits))


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1e6, "1,000,000"),  # '{:,.4g}' wrote 1e+06
        (21469.0, "21,469"),  # and 2.147e+04
        (9999.7, "10,000"),
        (12.34, "12.34"),
        (20.0, "20"),
        (0.5, "0.5"),
        (0.1 + 0.2, "0.3"),
        (-2.5, "-2.5"),
        (0.0, "0"),
        (3e15, "3.000e15"),
        (1e-5, "1.000e-5"),
    ],
)
def test_format_number_writes_ordinary_magnitudes_whole_with_separators(value: float, text: str) -> None:
    assert units.format_number(value) == text


@given(st.floats(min_value=1e-4, max_value=1e15 * 0.999))
def test_format_number_never_writes_an_exponent_for_ordinary_magnitudes(value: float) -> None:
    text = units.format_number(value)
    assert "e" not in text
    assert float(text.replace(",", "")) == pytest.approx(value, rel=1e-3)
