"""Compute-optimal sizing (Hoffmann et al. 2022, arXiv:2203.15556; Besiroglu et al. 2024, arXiv:2404.10102). Published figures have 3 significant figures; so do the checks."""

from __future__ import annotations

import pytest

from napkin.domain.choices import Fit
from napkin.engines.scaling import CONSTANTS, loss, optimal


def sig3(x: float) -> float:
    return float(f"{x:.3g}")


def test_gopher_budget_with_both_methods() -> None:
    r = optimal(5.76e23)
    assert (sig3(r.rule_of_20.params), sig3(r.rule_of_20.tokens)) == (6.93e10, 1.39e12)
    assert r.fitted.params == pytest.approx(7.23e10, rel=1e-3)  # Epoch refit
    assert sig3(r.fitted.tokens) == 1.33e12
    assert r.fitted.tokens_per_param == pytest.approx(18.4, abs=0.05)


@pytest.mark.parametrize(("fit", "value"), [(Fit.epoch, 1.974), (Fit.hoffmann, 1.937)])
def test_loss_of_chinchilla_70b_on_1_4t_tokens(fit: Fit, value: float) -> None:
    assert loss(70e9, 1.4e12, CONSTANTS[fit]) == pytest.approx(value, abs=5e-4)


def test_hoffmann_constants_as_published_imply_93_tokens_per_param() -> None:
    r = optimal(5.76e23, Fit.hoffmann)
    assert (sig3(r.fitted.params), sig3(r.fitted.tokens)) == (3.22e10, 2.98e12)
    assert r.fitted.tokens_per_param == pytest.approx(92.6, abs=0.1)


@pytest.mark.parametrize(("c", "n", "d"), [(1e24, 9.13e10, 1.83e12), (1e25, 2.89e11, 5.77e12)])
def test_rule_of_20(c: float, n: float, d: float) -> None:
    r = optimal(c)
    assert sig3(r.rule_of_20.params) == n
    assert r.rule_of_20.tokens == pytest.approx(d, rel=5e-3)  # the expected D was computed from the rounded N
    assert 6 * r.fitted.params * r.fitted.tokens == pytest.approx(c)
