"""Traffic inputs: a request rate, length distributions (fixed, uniform, or a histogram file), latency
percentiles and SLO targets, each checked and named when wrong."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from napkin import units
from napkin.api.inputs import LIMITS, Number, bounded, parse
from napkin.errors import UsageError

#: SLO keywords: metric × percentile.
SLO_FIELDS = tuple(f"{m}_p{q}" for m in ("ttft", "tpot", "e2e") for q in (50, 90, 99))


def parse_rate_per_second(value: Number, field: str = "rate") -> float:
    """``20``, ``20/s``, ``1200/min``, ``20 req/s`` → requests per second, above 0."""
    text = str(value).strip().lower().replace("req", "").replace(" ", "")
    scale = 1.0
    for suffix, factor in (("/s", 1.0), ("/min", 1 / 60), ("/h", 1 / 3600)):
        if text.endswith(suffix):
            text, scale = text.removesuffix(suffix), factor
            break
    try:
        if not text.isascii():  # float() reads other scripts' digits ('٨' as 8); napkin reads ASCII digits only
            raise ValueError(text)
        rate = float(text) * scale
    except ValueError:
        raise UsageError(
            f"{field}: {value!r} is not understood; expected requests per second such as 20, 20/s or 1200/min",
            field=field,
        ) from None
    if rate == float("inf"):  # a benchmark's --request-rate inf: every request at once
        raise UsageError(
            f"{field}: {value!r} is not a finite rate; for a burst (every request at once, as --request-rate inf "
            "sends them) give a rate far above what the engine serves, such as 1e6",
            field=field,
        )
    if not rate > 0:
        raise UsageError(f"{field}: {value!r} must be above 0 requests per second", field=field)
    return bounded(rate, field, value)


def parse_lengths(value: Number, field: str) -> Any:
    """Token lengths: ``1024`` (fixed), ``100..2000`` (uniform integers), or a histogram file (``@lengths.txt``
    or any existing path): one ``length weight`` pair per line, ``#`` comments."""
    from napkin.engines.traffic_result import Lengths

    text = str(value).strip()
    if ".." in text and not text.startswith("@"):
        low_text, _, high_text = text.partition("..")
        low, high = parse(units.parse_length, low_text, field), parse(units.parse_length, high_text, field)
        if not 1 <= low <= high:
            raise UsageError(f"{field}: {value!r} must be LOW..HIGH with 1 ≤ LOW ≤ HIGH tokens", field=field)
        return Lengths(kind="uniform", values=[low, high], label=f"uniform {low:,}..{high:,}")
    if re.fullmatch(r"\d[\d_.,kKmM]*\s*(-|–|to)\s*\d[\d_.,kKmM]*", text):  # 200-1800: a range, written LOW..HIGH
        low_text, high_text = re.split(r"\s*(?:-|–|to)\s*", text, maxsplit=1)
        raise UsageError(f"{field}: {value!r}: a uniform range is written {low_text}..{high_text}", field=field)
    path = Path(text.removeprefix("@"))
    if text.startswith("@") or (not text[:1].isdigit() and path.exists()):
        return _histogram(path, field)
    n = parse(units.parse_length, text, field)
    if n < 1:
        raise UsageError(f"{field}: {value!r} must be at least 1 token", field=field)
    return Lengths(kind="fixed", values=[n], label=f"{n:,}")


def _histogram(path: Path, field: str) -> Any:
    from napkin.engines.traffic_result import Lengths
    from napkin.errors import NapkinError
    from napkin.io.files import read_text

    try:
        text = read_text(path)
    except NapkinError as exc:
        raise UsageError(f"{field}: {exc}", field=field) from None
    values: list[int] = []
    weights: list[float] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].replace(",", " ").split()
        if not line:
            continue
        where = f"{field}: {path}:{number}"
        if len(line) != 2:
            raise UsageError(f"{where}: expected 'length weight' (two numbers), got {len(line)} fields", field=field)
        try:  # the length as --prompt reads one (ASCII digits, at most its bound), the weight a plain number
            length = parse(units.parse_length, line[0], field)
            weight = float(line[1]) if line[1].isascii() else math.nan
        except (UsageError, ValueError):
            raise UsageError(
                f"{where}: expected a whole token length (1 to {LIMITS[field][0]:,}) and a weight", field=field
            ) from None
        if not 0 <= weight <= units.MAX_VALUE:  # weights sum to a finite total
            raise UsageError(f"{where}: a weight is a number from 0 to {units.MAX_VALUE:g}", field=field)
        values.append(length)
        weights.append(weight)
    if not values or sum(weights) <= 0:
        raise UsageError(f"{field}: {path} has no lengths with a positive weight", field=field)
    return Lengths(kind="histogram", values=values, weights=weights, label=f"histogram {path.name}")


def parse_percentiles(value: str | None) -> list[float]:
    """``"50,90,99"`` → [50, 90, 99], each strictly between 0 and 100."""
    if value is None:
        return [50.0, 90.0, 99.0]
    out = []
    for part in str(value).split(","):
        try:
            if not part.isascii():  # as for --rate: ASCII digits only
                raise ValueError(part)
            q = float(part.strip().removeprefix("p").removeprefix("P"))
        except ValueError:
            raise UsageError(
                f"percentiles: {part.strip()!r} is not a number; expected a list such as 50,90,99", field="percentiles"
            ) from None
        if not 0 < q < 100:
            raise UsageError(f"percentiles: {part.strip()} is outside (0, 100)", field="percentiles")
        out.append(q)
    return sorted(set(out))


def parse_slo(given: dict[str, Any]) -> Any:
    """``ttft_p90="2s"`` … → an Slo (durations; a value in another unit names its keyword)."""
    from napkin.engines.traffic_result import Slo

    targets: dict[str, dict[str, float]] = {}
    for key in SLO_FIELDS:
        value = given.get(key)
        if value is None:
            continue
        seconds = parse(units.parse_latency, value, key)
        if seconds <= 0:
            raise UsageError(f"{key}: {value!r} must be a positive duration such as 2s or 100ms", field=key)
        metric, q = key.split("_p")
        targets.setdefault(metric, {})[q] = seconds
    return Slo(targets=targets)
