"""Parsing and formatting of human quantities.

Everything inside napkin is a float in a base unit: a count, FLOP, FLOP/s, bytes, bytes/s, watts,
seconds. This module is the only place that converts between those and text.

Conventions (stated in every output that shows them):

* Counts use decimal suffixes: K = 1e3, M = 1e6, B = 1e9 (billion), T = 1e12 — never binary.
* GB = 10⁹ bytes and GiB = 2³⁰ bytes. Vendors quote HBM capacity in GB (decimal); PyTorch and
  ``nvidia-smi`` report MiB/GiB; mixing them is a 7 % error (2³⁰ / 10⁹ = 1.074).
* Unit prefixes are case-insensitive (``80gB`` = ``80 GB``); ``m`` therefore means mega, never milli.
* Bits are not bytes: ``bit``, ``bits``, ``bit/s`` and ``bps`` (``400 Gbps``, ``400 Gbit/s``) are bits and
  are converted to bytes (÷ 8); a lower-case ``b`` after a prefix (``80 Gb``, ``3000 Gb/s``) is refused as
  ambiguous, with a message that says how to write either.
* Only ASCII digits; at most MAX_TEXT characters; every value finite and within [MIN_VALUE, MAX_VALUE].
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping
from typing import Final

from napkin.errors import UsageError

#: Longest text a number may be (after trimming spaces); longer input is refused before any parsing.
MAX_TEXT: Final = 100
#: Every parsed quantity lies in [MIN_VALUE, MAX_VALUE] in its base unit, so products and quotients of a
#: few of them stay finite (a float overflows past 1.8e308) and nothing is subnormal.
MIN_VALUE: Final = 1e-15
MAX_VALUE: Final = 1e36
#: Whole counts (GPUs, layers, sizes) are exact integers in a float: at most 2^53.
MAX_INT: Final = 2**53

# ASCII only (re.ASCII: \d is [0-9], so superscripts and other scripts' digits never match). Underscores
# only between digits, as in Python literals ("1_000", never "1__0" or "1_"). The text is trimmed and
# length-capped first, and the pattern has no overlapping repetition, so a match costs time linear in the
# (short) input.
_NUMBER: Final = re.compile(
    r"(?P<num>[+-]?(?:\d(?:_?\d)*(?:\.(?:\d(?:_?\d)*)?)?|\.\d(?:_?\d)*)(?P<exp>[eE][+-]?\d+)?)\s*(?P<unit>[^\d\s].*)?",
    re.ASCII | re.DOTALL,
)

#: Decimal SI prefixes (1e3 steps). Case-insensitive, so "m" is mega.
_SI: Final = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15, "e": 1e18}
#: Binary (IEC) prefixes for bytes: KiB = 2**10 … PiB = 2**50.
_IEC: Final = {"ki": 2.0**10, "mi": 2.0**20, "gi": 2.0**30, "ti": 2.0**40, "pi": 2.0**50}

GB: Final = 1e9
GIB: Final = 2.0**30


def _with_prefixes(bases: tuple[str, ...], prefixes: Mapping[str, float]) -> dict[str, float]:
    return {p + b: mult for p, mult in prefixes.items() for b in bases}


COUNT_UNITS: Final = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "bn": 1e9, "t": 1e12}
# A bare number is in the base unit (bytes, FLOP/s, FLOP, bytes/s, watts).
BYTE_UNITS: Final = {"": 1.0, **_with_prefixes(("b", "byte", "bytes"), _SI), **_with_prefixes(("b",), _IEC)}
RATE_UNITS: Final = {"": 1.0, **_with_prefixes(("flop/s", "flops", "op/s", "ops"), _SI)}
FLOP_UNITS: Final = {"": 1.0, **_with_prefixes(("flop", "flops"), _SI)}
BANDWIDTH_UNITS: Final = {"": 1.0, **_with_prefixes(("b/s", "bps"), _SI), **_with_prefixes(("b/s",), _IEC)}
POWER_UNITS: Final = {"": 1.0, **_with_prefixes(("w",), {"": 1.0, "k": 1e3, "m": 1e6})}
DURATION_UNITS: Final = {
    "": 1.0,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "msec": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "second": 1.0,
    "seconds": 1.0,
    "min": 60.0,
    "minute": 60.0,
    "minutes": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
    "hour": 3600.0,
    "hours": 3600.0,
    "d": 86400.0,
    "day": 86400.0,
    "days": 86400.0,
    "w": 604800.0,
    "week": 604800.0,
    "weeks": 604800.0,
}

_EXAMPLES: Final = {
    "count": "a positive count such as 70e9, 70B, 1.5T, 7M or 70_000_000_000",
    "whole": "a positive whole number such as 8, 64, 1K or 2e3",
    "bytes": "a positive size such as 80GB, 80 GiB or 8e10 (bytes); GB = 1e9 B, GiB = 2^30 B",
    "rate": "a positive rate such as 989.5 TFLOP/s, 312e12 or 1979 TOPS",
    "flops": "a positive FLOP count such as 6.3e24 or 5.76e23 FLOP",
    "bandwidth": "a positive bandwidth such as 3.35 TB/s or 2039 GB/s",
    "power": "a positive power such as 700 W or 1 kW",
    "duration": "a positive duration such as 90d, 36 hours, 2w or 3600 (seconds)",
    "latency": "a latency such as 2s, 100ms or 50us",
    "number": "a positive number such as 90, 2.49 or 1.2e3",
    "length": "a positive length such as 8192, 32k (= 32,768) or 1M (= 2^20)",
}


def _split(text: str, what: str, expected: str) -> tuple[str, str, str]:
    """(number, exponent, unit) of ``text``, or a UsageError naming ``what``."""
    raw = text.strip()
    if len(raw) > MAX_TEXT:
        raise UsageError(f"{what}: {len(raw)} characters is too long for a number; expected {expected}")
    match = None if any(ch.isnumeric() and not ch.isascii() for ch in raw) else _NUMBER.fullmatch(raw)
    if match is None:
        quoted = repr(raw) if raw.isprintable() else ascii(raw)  # quoted once: '\udcff', not "'\\udcff'"
        why = "" if raw.isascii() else " (napkin reads ASCII digits only)"
        raise UsageError(f"{what}: {quoted} is not understood{why}; expected {expected}")
    return match.group("num"), match.group("exp") or "", (match.group("unit") or "").strip()


def _bits_divisor(unit: str, kind: str, text: str, what: str) -> float:
    """8 when ``unit`` is written in bits (``Gbit``, ``Gbps``); an error when a lower-case b is ambiguous."""
    if kind not in ("bytes", "bandwidth"):
        return 1.0
    compact = unit.replace(" ", "")
    lower = compact.lower()
    if lower.endswith(("bit", "bits", "bit/s", "bits/s")) or compact.endswith("bps"):
        return 8.0
    body = compact.removesuffix("/s")
    if body.endswith("b") and len(body) > 1:
        raise UsageError(
            f"{what}: {text.strip()!r}: {compact!r} would be bits; napkin wants bytes, written with a capital B "
            f"(e.g. 80 GB, 3.35 TB/s), or bits spelled out (e.g. 400 Gbit/s, 400 Gbps), which it divides by 8"
        )
    return 1.0


def _check_range(value: float, text: object, what: str, expected: str) -> float:
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"{what}: {_shown(text)} must be positive and finite; expected {expected}")
    if not MIN_VALUE <= value <= MAX_VALUE:
        raise UsageError(
            f"{what}: {_shown(text)} is outside what napkin computes with ({MIN_VALUE:g} to {MAX_VALUE:g} "
            f"in base units); expected {expected}"
        )
    return value


def plain_number(value: object) -> int | float | None:
    """``value`` as a Python int or float when it is a number that is not a bool (NumPy's integers and floats
    included, through the ``numbers`` ABCs they register with); None for anything else (text, a bool, a list)."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":  # numpy.bool_ is no number either
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return None


def _parse(text: str | float | int, units: Mapping[str, float], kind: str, what: str) -> float:
    """Parse ``text`` as a positive finite number with an optional unit from ``units``."""
    expected = _EXAMPLES[kind]
    plain = plain_number(text)
    if plain is None and not isinstance(text, str):
        raise UsageError(f"{what}: {_shown(text)} is not a number; expected {expected}")
    if plain is not None:
        try:
            value = float(plain)
        except OverflowError:
            raise UsageError(f"{what}: a {len(str(plain))}-digit number is too large; expected {expected}") from None
        return _check_range(value, plain, what, expected)
    assert isinstance(text, str)
    number, _, unit = _split(text, what, expected)
    divisor = _bits_divisor(unit, kind, text, what)
    if divisor != 1.0:
        unit = re.sub(r"(?i)(bits?(/s)?|bps)$", "b/s" if kind == "bandwidth" else "b", unit.replace(" ", ""))
    key = unit.lower().replace(" ", "")
    if key not in units:
        raise UsageError(f"{what}: unknown unit {unit!r} in {text.strip()!r}; expected {expected}")
    value = float(number.replace("_", "")) * units[key] / divisor
    return _check_range(value, text.strip(), what, expected)


def parse_number(text: str | float | int, what: str = "value") -> float:
    """A plain positive number (days, a price, a PUE): ``"90"``, ``"2.49"``, ``"$2.49"``."""
    return _parse(text.lstrip("$") if isinstance(text, str) else text, {"": 1.0}, "number", what)


def parse_count(text: str | float | int, what: str = "value") -> float:
    """``"70B"`` → 7e10. Suffixes K, M, B (billion), T (trillion); e-notation; underscores."""
    return _parse(text, COUNT_UNITS, "count", what)


_INTEGER: Final = re.compile(r"[+-]?\d(?:_?\d)*", re.ASCII)


def _whole(value: float, text: object, what: str, exact: int | None) -> int:
    """``value`` as an int, refused unless whole and at most 2^53 (``exact``: the integer the text spelled)."""
    if exact is None and value != int(value):
        raise UsageError(f"{what}: {_shown(text)} must be a whole number")
    if (exact if exact is not None else value) > MAX_INT:
        raise UsageError(f"{what}: {_shown(text)} is larger than napkin counts exactly (2^53 ≈ 9.0e15)")
    return exact if exact is not None else int(value)


def _exact(text: object) -> int | None:
    """The integer an int (or integer literal such as ``"9007199254740993"``) is, without a float's rounding."""
    number = plain_number(text)
    if isinstance(number, int):
        return number
    if isinstance(text, str) and _INTEGER.fullmatch(text.strip()) and len(text.strip()) <= MAX_TEXT:
        return int(text.strip().replace("_", ""))
    return None


def parse_int(text: str | float | int, what: str = "value") -> int:
    """A positive whole count (GPUs, layers, batch): ``"1024"``, ``"1K"``, ``"2e3"``; at most 2^53, read exactly
    (``"9007199254740993"`` is refused, not rounded to 2^53)."""
    return _whole(_parse(text, COUNT_UNITS, "whole", what), text, what, _exact(text))


def parse_bytes(text: str | float | int, what: str = "value") -> float:
    """``"80 GB"`` → 8e10; ``"80GiB"`` → 85899345920. A bare number is bytes."""
    return _parse(text, BYTE_UNITS, "bytes", what)


def parse_rate(text: str | float | int, what: str = "value") -> float:
    """``"989.5 TFLOP/s"`` → 9.895e14 FLOP/s. ``TOPS`` (integer ops) are accepted the same way."""
    return _parse(text, RATE_UNITS, "rate", what)


def parse_flops(text: str | float | int, what: str = "value") -> float:
    """An amount of work: ``"6.3e24"`` or ``"5.76e23 FLOP"``."""
    return _parse(text, FLOP_UNITS, "flops", what)


def parse_bandwidth(text: str | float | int, what: str = "value") -> float:
    """``"3.35 TB/s"`` → 3.35e12 bytes/s."""
    return _parse(text, BANDWIDTH_UNITS, "bandwidth", what)


def parse_power(text: str | float | int, what: str = "value") -> float:
    """``"700 W"`` → 700.0 watts."""
    return _parse(text, POWER_UNITS, "power", what)


def parse_duration(text: str | float | int, what: str = "value") -> float:
    """``"90d"`` → 7776000.0 seconds. A bare number is seconds."""
    return _parse(text, DURATION_UNITS, "duration", what)


def parse_latency(text: str | float | int, what: str = "value") -> float:
    """A duration with a latency's examples in its errors: ``"100ms"`` → 0.1 seconds."""
    return _parse(text, DURATION_UNITS, "latency", what)


_FRACTION: Final = "a number in (0, 1] such as 0.5 or 50%"


def parse_fraction(text: str | float, what: str = "value") -> float:
    """A fraction in (0, 1]: ``"0.5"`` or ``"50%"`` (ASCII digits, no unit other than %)."""
    if isinstance(text, bool):
        raise UsageError(f"{what}: {text!r} is not a fraction; expected {_FRACTION}")
    raw = str(text).strip()
    percent = raw.endswith("%")
    number, _, unit = _split(raw.removesuffix("%"), what, _FRACTION)
    if unit:
        raise UsageError(f"{what}: {raw!r} is not a fraction; expected {_FRACTION}")
    if number.lstrip("+-").startswith("_") or "._" in number:
        raise UsageError(f"{what}: {raw!r} is not a fraction; expected {_FRACTION}")
    value = float(number.replace("_", "")) / (100 if percent else 1)
    if not math.isfinite(value) or not 0 < value <= 1:
        raise UsageError(f"{what}: {raw!r} is out of range; expected {_FRACTION}")
    if value < MIN_VALUE:
        raise UsageError(f"{what}: {raw!r} is too small to compute with (below {MIN_VALUE:g}); expected {_FRACTION}")
    return value


def parse_bytes_or_fraction(text: str, what: str = "value") -> tuple[float, bool]:
    """(value, is_fraction) for inputs like ``--reserve``: bytes (``4GB``, ``2e9``) or a fraction.

    A fraction is written with ``%`` (``10%``) or as a plain decimal in (0, 1) without an exponent
    (``0.1``). A bare number of 1 or more is bytes. A bare number below 1 with an exponent (``1e-1``) is
    ambiguous and refused. ``0`` (or ``0%``, ``0 GB``) is zero.
    """
    raw = str(text).strip()
    expected = "bytes with a unit (4GB, 2 GiB) or a fraction (10%, 0.1)"
    number, exponent, unit = _split(raw.removesuffix("%"), what, expected)
    try:
        plain = float(number.replace("_", ""))
    except ValueError:
        raise UsageError(f"{what}: {raw!r} is not understood; expected {expected}") from None
    if plain == 0 and (unit == "" or unit.lower().replace(" ", "") in BYTE_UNITS):
        return 0.0, False
    if raw.endswith("%"):
        if unit:
            raise UsageError(f"{what}: {raw!r} is not understood; expected {expected}")
        return parse_fraction(raw, what), True
    if not unit and plain < 1:
        if exponent:
            raise UsageError(
                f"{what}: {raw!r} is ambiguous; write a fraction as {plain * 100:g}% or bytes with a unit (e.g. 4GB)"
            )
        return parse_fraction(raw, what), True
    return parse_bytes(raw, what), False


def parse_fraction_range(text: str, what: str = "value") -> tuple[float, float]:
    """``"0.5"`` → (0.5, 0.5); ``"0.35:0.5"`` → (0.35, 0.5). A range written backwards is an error."""
    if ":" not in str(text):
        value = parse_fraction(text, what)
        return value, value
    low_text, _, high_text = str(text).partition(":")
    low, high = parse_fraction(low_text, what), parse_fraction(high_text, what)
    if low > high:
        raise UsageError(f"{what}: range {text!r} is written backwards; write LOW:HIGH, e.g. {high_text}:{low_text}")
    return low, high


# --------------------------------------------------------------------------------------------- format


def _significant(value: float, digits: int = 3) -> str:
    """``74.506`` → ``"74.5"``; ``80.0`` → ``"80"``; keeps ``digits`` significant figures, with no exponent
    below a million (``4e22`` → ``"4.00e22"``: digits past the 17th would be a float's noise)."""
    if value == 0:
        return "0"
    if abs(value) >= 1e6:
        return format_sci(value, digits)
    return _fixed(value, digits)


def _fixed(value: float, digits: int, grouping: str = "") -> str:
    """``value`` (non-zero) to ``digits`` significant figures without an exponent, trailing zeros dropped;
    ``grouping=","``: thousands separators."""
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    text = f"{value:{grouping}.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _scaled(value: float, steps: list[tuple[float, str]], digits: int) -> str:
    for mult, prefix in steps:
        if abs(value) >= mult * 0.9995:
            return f"{_significant(value / mult, digits)} {prefix}"
    mult, prefix = steps[-1]
    return f"{_significant(value / mult, digits)} {prefix}"


_SI_STEPS: Final = [(1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")]
_IEC_STEPS: Final = [
    (2.0**50, "Pi"),
    (2.0**40, "Ti"),
    (2.0**30, "Gi"),
    (2.0**20, "Mi"),
    (2.0**10, "Ki"),
    (1.0, ""),
]
_COUNT_STEPS: Final = [(1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")]


def format_count(value: float, decimals: int = 1) -> str:
    """``4e10`` → ``"40.0 B"``; ``1.5e12`` → ``"1.5 T"``; below 1000 the plain number."""
    for mult, suffix in _COUNT_STEPS:
        if abs(value) >= mult * (1 - 0.5 * 10.0**-decimals / 1000):
            return f"{value / mult:.{decimals}f} {suffix}"
    return f"{value:,.0f}" if value == int(value) else f"{value:.{decimals}f}"


def format_whole(value: float) -> str:
    """An exact quantity with thousands separators (``2,415,919,104``), in scientific notation from 10^15 on,
    where a float's digits stop being exact (``4.00e40``)."""
    return f"{value:,.0f}" if abs(value) < 1e15 else format_sci(value)


def format_number(value: float, digits: int = 4) -> str:
    """A plain quantity a reader reads (a rate in req/s, a count that need not be whole): ``digits`` significant
    figures, every digit of its whole part kept, with thousands separators, and no exponent for ordinary
    magnitudes (``1e6`` → ``"1,000,000"``, ``21469.0`` → ``"21,469"``, ``12.34`` → ``"12.34"``, ``0.5`` → ``"0.5"``);
    scientific notation only from 10^15 on (``format_whole``) and below 10^-4 (``"1.23e-5"``)."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    if not 1e-4 <= abs(value) < 1e15:
        return format_sci(value, digits)
    return _fixed(value, digits, ",")


def format_sci(value: float, digits: int = 3) -> str:
    """``6.3e24`` → ``"6.30e24"`` (no plus sign, ``digits`` significant figures)."""
    mantissa, _, exponent = f"{value:.{digits - 1}e}".partition("e")
    return f"{mantissa}e{int(exponent)}"


def format_flops(value: float) -> str:
    """An amount of work: ``"6.30e24 FLOPs"``."""
    return f"{format_sci(value)} FLOPs"


def format_rate(value: float, digits: int = 4) -> str:
    """``9.895e14`` → ``"989.5 TFLOP/s"``."""
    return _scaled(value, _SI_STEPS, digits) + "FLOP/s"


def format_bytes(value: float) -> str:
    """Both unit systems, labelled: ``8e10`` → ``"80 GB (74.5 GiB)"``; below 1000 B only ``"640 B"``."""
    if abs(value) < 999.5:
        return format_bytes_si(value)
    return f"{format_bytes_si(value)} ({format_bytes_iec(value)})"


def format_bytes_si(value: float) -> str:
    return _scaled(value, _SI_STEPS, 3) + "B"


def format_bytes_iec(value: float) -> str:
    return _scaled(value, _IEC_STEPS, 3) + "B"


def format_bandwidth(value: float) -> str:
    return _scaled(value, _SI_STEPS, 3) + "B/s"


def format_power(value: float) -> str:
    return _scaled(value, [(1e6, "M"), (1e3, "k"), (1.0, "")], 3) + "W"


def format_energy(kwh: float) -> str:
    """``0.0412`` → ``"41.2 Wh"``, ``12.3`` → ``"12.3 kWh"``, ``4.1e4`` → ``"41 MWh"``: three significant figures."""
    return _scaled(kwh * 1000, [(1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")], 3) + "Wh"


#: The units a long duration is written in, each from two of them up (below two minutes: seconds).
_LONG: Final = ((86400.0, "days"), (3600.0, "hours"), (60.0, "minutes"))


def _in(value: float, name: str) -> str:
    """``value`` of a long unit: one decimal (``143.9 days``), grouped from 10^4 on (``140,362,697 days``), in
    scientific notation from 10^15 (``1.157e25 days``, never 26 digits and a ``.0``)."""
    return f"{value:.1f} {name}" if value < 1e4 else f"{format_number(value)} {name}"


def format_duration(seconds: float) -> str:
    """``1.2435e7`` → ``"143.9 days"``; hours below two days, minutes below two hours."""
    for size, name in _LONG:
        if seconds >= 2 * size:
            return _in(seconds / size, name)
    if 0 < seconds < 0.9995:  # "1.11 ms", not "0.00111 s"
        return _scaled(seconds, [(1e-3, "m"), (1e-6, "µ"), (1e-9, "n")], 3) + "s"
    return f"{_significant(seconds, 3)} s"


def format_durations(values: list[float]) -> list[str]:
    """Durations read side by side (percentiles): each as ``format_duration`` says it, but in one unit of minutes or
    more when the largest needs one ("109 s / 2.1 minutes" would compare two units)."""
    largest = max(values, default=0.0)
    for size, name in _LONG:
        if largest >= 2 * size:
            return [_in(v / size, name) for v in values]
    return [format_duration(v) for v in values]


def format_percent(fraction: float, decimals: int = 1) -> str:
    """``0.123`` → ``"12.3 %"``; an absurd one (a warning's) grouped or scientific (``"6.141e15 %"``, not 16 digits)."""
    percent = fraction * 100
    return f"{percent:.{decimals}f} %" if abs(percent) < 1e4 else f"{format_number(percent)} %"


def parse_length_rounded(text: str | float | int, what: str = "value") -> int:
    """``parse_length`` where a fraction is rounded to the nearest whole one (``"15.7M"`` = 16,462,643): for an amount
    that is rounded again anyway (a batch in tokens, to whole sequences)."""
    return parse_length(text, what, whole=False)


_LENGTH: Final = _EXAMPLES["length"]


def parse_length(text: str | float | int, what: str = "value", *, whole: bool = True) -> int:
    """A sequence length or a width: ``"8192"``, ``"32k"`` = 32,768, ``"1M"`` = 2^20.

    Context lengths are quoted in binary thousands (Llama 3.1's "128k" is 131,072 tokens), so k and M
    mean 2^10 and 2^20 here, unlike counts of parameters or tokens (K = 10^3).
    """
    if isinstance(text, str) and text.strip()[-1:].lower() in ("k", "m"):
        head = text.strip()[:-1]
        scale = 1024 if text.strip()[-1].lower() == "k" else 1024 * 1024
        try:
            value = _parse(head, {"": 1.0}, "number", what) * scale
        except UsageError:  # quote what the user wrote (-8k, not -8) and what a length accepts
            raise UsageError(f"{what}: {_shown(text.strip())} is not a positive length; expected {_LENGTH}") from None
    else:
        value = _parse(text, {"": 1.0}, "length", what)  # 70B is a parameter count, not a length
    if not whole:
        value = float(max(1, round(value)))
    if value != int(value):
        raise UsageError(f"{what}: {_shown(text)} must be a whole number of tokens or elements (32k = 32768)")
    return _whole(value, text, what, _exact(text))


def _shown(value: object) -> str:
    """``value`` as a message quotes it: short, one line (a 5,000-digit int or a long list is not echoed)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"
