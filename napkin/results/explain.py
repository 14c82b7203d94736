"""Derivation steps: what ``--explain`` prints, carried by every result."""

from __future__ import annotations

from pydantic import ConfigDict

from napkin.domain.base import Record


class Step(Record):
    """One line of a napkin derivation: the formula, the numbers put in, the result and its source."""

    model_config = ConfigDict(frozen=True)

    quantity: str
    formula: str
    substituted: str
    result: str
    source: str


def step(quantity: str, formula: str, substituted: str, result: str, source: str) -> Step:
    return Step(quantity=quantity, formula=formula, substituted=substituted, result=result, source=source)
