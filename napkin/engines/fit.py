"""Fitting a stack's free values to measured runs: the engine under ``napkin calibrate``.

Pure functions over callables (no files, no printing). A run is a function from a ``StackKnobs`` to its
predicted step seconds, and its measured seconds; ``fit`` finds the values of the named free parameters that
minimise the sum of squared log-ratios (predicted / measured), each inside its bounds, by cyclic coordinate
descent with a golden-section search per parameter (the step time is monotone or unimodal in each of them).
``leave_one_out`` refits without each run in turn and predicts it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from napkin.systems.stack import StackKnobs

#: The values a calibration may fit: the ``StackKnobs`` field, its bounds, and the profile path it is written to.
FREE: Final[dict[str, tuple[str, float, float, str]]] = {
    "matmul_efficiency": ("matmul", 0.2, 1.0, "matmul_efficiency"),
    "attention_efficiency": ("flash_scale", 0.2, 1.5, "attention"),
    "elementwise_traffic": ("elementwise_traffic", 1.0, 8.0, "elementwise.traffic"),
    "compute_slowdown": ("slowdown", 0.0, 0.5, "overlap.compute_slowdown"),
    "tensor_parallel_overlap": ("tp_overlap", 0.0, 1.0, "overlap.tensor_parallel"),
    "scale_out": ("scale_out", 0.02, 1.0, "collectives.scale_out"),
    "scale_up": ("scale_up", 0.1, 1.0, "collectives.scale_up"),
    "fp8_overhead": ("fp8_overhead", 0.0, 1.0, "fp8.overhead"),
    "step_overhead": ("step_overhead", 0.0, 30.0, "step_overhead"),
    "moe_host_per_expert": ("moe_host", 0.0, 0.01, "moe_host_per_expert"),
}

Predict = Callable[[StackKnobs], float]
_GOLDEN: Final = (math.sqrt(5) - 1) / 2


@dataclass(frozen=True)
class Observation:
    """One measured run: a predictor of its step seconds under a stack, and what was measured."""

    name: str
    predict: Predict
    measured_seconds: float


def _apply(base: StackKnobs, names: Sequence[str], values: Sequence[float]) -> StackKnobs:
    changes = {}
    for name, value in zip(names, values, strict=True):
        attr = FREE[name][0]
        if attr == "flash_scale":  # one factor on the forward and the backward efficiency, capped at the peak
            changes["flash_forward"] = min(1.0, base.flash_forward * value)
            changes["flash_backward"] = min(1.0, base.flash_backward * value)
        else:
            changes[attr] = value
    return base.replace(**changes)


def loss(base: StackKnobs, names: Sequence[str], values: Sequence[float], runs: Sequence[Observation]) -> float:
    """Sum of squared log(predicted / measured) over ``runs``."""
    knobs = _apply(base, names, values)
    return sum(math.log(r.predict(knobs) / r.measured_seconds) ** 2 for r in runs)


def _golden(f: Callable[[float], float], lo: float, hi: float, tol: float) -> float:
    a, b = lo, hi
    c, d = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
    fc, fd = f(c), f(d)
    while b - a > tol:
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - _GOLDEN * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + _GOLDEN * (b - a)
            fd = f(d)
    best = min((fc, c), (fd, d), (f(lo), lo), (f(hi), hi))
    return best[1]


def fit(base: StackKnobs, names: Sequence[str], runs: Sequence[Observation], sweeps: int = 50) -> dict[str, float]:
    """The values of ``names`` that best explain ``runs`` (starting from ``base``'s), within their bounds."""
    values = [current(base, n) for n in names]
    for _ in range(sweeps if len(names) > 1 else 1):
        before = list(values)
        for i, name in enumerate(names):
            _, lo, hi, _ = FREE[name]

            def along(x: float, i: int = i) -> float:
                trial = list(values)
                trial[i] = x
                return loss(base, names, trial, runs)

            values[i] = _golden(along, lo, hi, 1e-4 * (hi - lo))
        if max(abs(a - b) for a, b in zip(values, before, strict=True)) < 1e-4:
            break
    return dict(zip(names, values, strict=True))


def current(base: StackKnobs, name: str) -> float:
    """The value of a free parameter in ``base`` (attention: the factor 1), within its bounds."""
    attr, lo, hi, _ = FREE[name]
    value = 1.0 if attr == "flash_scale" else float(getattr(base, attr))
    return min(hi, max(lo, value))


def predictions(base: StackKnobs, fitted: dict[str, float], runs: Sequence[Observation]) -> list[float]:
    """Each run's predicted seconds under the fitted values."""
    knobs = _apply(base, list(fitted), list(fitted.values()))
    return [r.predict(knobs) for r in runs]


def leave_one_out(base: StackKnobs, names: Sequence[str], runs: Sequence[Observation]) -> list[float]:
    """For each run, its predicted seconds under values fitted to the other runs."""
    out = []
    for i, run in enumerate(runs):
        rest = [r for j, r in enumerate(runs) if j != i]
        fitted = fit(base, names, rest)
        out.append(run.predict(_apply(base, list(fitted), list(fitted.values()))))
    return out


def knobs_with(base: StackKnobs, fitted: dict[str, float]) -> StackKnobs:
    """``base`` with the fitted values."""
    return _apply(base, list(fitted), list(fitted.values()))


__all__ = ["FREE", "Observation", "current", "fit", "knobs_with", "leave_one_out", "loss", "predictions"]
