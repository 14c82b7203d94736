"""Compute accounting: training FLOPs, wall-clock time, MFU, cost and energy, matmul rooflines.

Pure functions over pydantic models: no printing, no files. Formulas (each cites napkin.sources):

    C     = 6·N·D                    2N forward + 4N backward per token        (Kaplan §2.1; PaLM App. B)
    C_att = c·6·L·s·d_attn·D         c = 2 (PaLM, full s×s) or 1 (causal)      (PaLM App. B)
    t     = C / (G · peak · MFU)     MFU counts model FLOPs only               (PaLM §4.1)
    t     = C_hw / (G · X)           X = achieved hardware FLOP/s              (Narayanan eq. 4)

One job per module: ``flops`` (FLOPs per token and per run), ``query`` (what ``train_time`` is asked and
answers), ``duration`` (``train_time``, cost, energy, the FLOP budget), ``utilization`` (``mfu``), ``roofline``
(``matmul``); the names are re-exported here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from napkin.lazy import lazy_attributes

if TYPE_CHECKING:
    from napkin.engines.compute.duration import compute_budget, train_time
    from napkin.engines.compute.flops import (
        CHINCHILLA_TOKENS_PER_PARAM,
        PLAUSIBLE_MFU,
        SECONDS_PER_DAY,
        UNDERTRAINED_TOKENS_PER_PARAM,
        FlopsPerToken,
        TrainFlopsResult,
        flops_per_token,
        implausible_mfu,
        train_flops,
    )
    from napkin.engines.compute.query import Money, Throughput, TrainQuery, TrainTimeResult
    from napkin.engines.compute.roofline import MatmulResult, matmul
    from napkin.engines.compute.utilization import MfuResult, mfu

#: Each re-exported name's module, imported on first use: the step model needs ``flops`` alone, and the others
#: build pydantic models (``TrainQuery``, the results) that ``napkin step`` and ``napkin plan`` never use.
_MODULES = {
    **dict.fromkeys(("compute_budget", "train_time"), "duration"),
    **dict.fromkeys(
        (
            "CHINCHILLA_TOKENS_PER_PARAM",
            "PLAUSIBLE_MFU",
            "SECONDS_PER_DAY",
            "UNDERTRAINED_TOKENS_PER_PARAM",
            "FlopsPerToken",
            "TrainFlopsResult",
            "flops_per_token",
            "implausible_mfu",
            "train_flops",
        ),
        "flops",
    ),
    **dict.fromkeys(("Money", "Throughput", "TrainQuery", "TrainTimeResult"), "query"),
    **dict.fromkeys(("MatmulResult", "matmul"), "roofline"),
    **dict.fromkeys(("MfuResult", "mfu"), "utilization"),
}


__getattr__ = lazy_attributes(__name__, {name: f".{module}" for name, module in _MODULES.items()})


__all__ = [
    "CHINCHILLA_TOKENS_PER_PARAM",
    "PLAUSIBLE_MFU",
    "SECONDS_PER_DAY",
    "UNDERTRAINED_TOKENS_PER_PARAM",
    "FlopsPerToken",
    "MatmulResult",
    "MfuResult",
    "Money",
    "Throughput",
    "TrainFlopsResult",
    "TrainQuery",
    "TrainTimeResult",
    "compute_budget",
    "flops_per_token",
    "implausible_mfu",
    "matmul",
    "mfu",
    "train_flops",
    "train_time",
]
