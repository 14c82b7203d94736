"""Model states: bytes per parameter (optimizer × precision, a stack's own gradient and moment bytes) and how
ZeRO / FSDP / HSDP shard them over the data-parallel group.

    model states = (params + gradients + master weights + optimizer states) bytes × N     (ZeRO §3.1)
    ZeRO-1: P + G + (M + S)/N_d    ZeRO-2: P + (G + M + S)/N_d    ZeRO-3/FSDP: (P + G + M + S)/N_d  (ZeRO §5)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar

from pydantic import ConfigDict

from napkin import sources
from napkin.domain.base import Record
from napkin.domain.choices import Optimizer, Precision, Sharding
from napkin.domain.layout import Layout
from napkin.results.explain import Step, step
from napkin.results.result import TableResult
from napkin.systems.stack import MemoryRules

COMPONENTS = ("params", "gradients", "master_weights", "optimizer_states")

#: bitsandbytes block-wise 8-bit state: 1 byte per element + one fp32 absmax per 2048-element block
#: (Dettmers et al. 2021, arXiv:2110.02861; bitsandbytes Optimizer2State.init_state).
BYTES_8BIT_STATE = 1 + 4 / 2048


@dataclass(frozen=True)
class OptimizerSpec:
    states: tuple[str, ...]  # the state tensors it allocates per parameter (same shape as the parameter)
    source: str
    note: str = ""
    state_bytes: float | None = None  # fixed bytes per state element, whatever the precision regime


OPTIMIZERS: dict[Optimizer, OptimizerSpec] = {
    Optimizer.sgd: OptimizerSpec((), "torch.optim.SGD (momentum=0): no state"),
    Optimizer.sgd_momentum: OptimizerSpec(("momentum_buffer",), "torch.optim.SGD: momentum_buffer"),
    Optimizer.adagrad: OptimizerSpec(("sum",), "torch.optim.Adagrad: state['sum']"),
    Optimizer.rmsprop: OptimizerSpec(
        ("square_avg",), "torch.optim.RMSprop: square_avg", "+1 state with momentum>0, +1 if centered"
    ),
    Optimizer.adam: OptimizerSpec(("exp_avg", "exp_avg_sq"), "Kingma & Ba 2014; torch.optim.Adam"),
    Optimizer.adamw: OptimizerSpec(("exp_avg", "exp_avg_sq"), "Loshchilov & Hutter 2019; torch.optim.AdamW"),
    Optimizer.adafactor: OptimizerSpec(
        (),
        "Shazeer & Stern 2018, arXiv:1804.04235; torch.optim.Adafactor (row_var, col_var)",
        "factored second moment: (n+m)/(n·m) states per parameter of an n×m matrix ≈ 0; no first moment",
    ),
    Optimizer.lion: OptimizerSpec(("exp_avg",), "Chen et al. 2023, arXiv:2302.06675: momentum only"),
    Optimizer.adam_8bit: OptimizerSpec(
        ("state1", "state2"),
        "Dettmers et al. 2021, arXiv:2110.02861; bitsandbytes Optimizer2State",
        "uint8 states + fp32 absmax per 2048-element block; tensors < 4096 elements stay 32-bit",
        state_bytes=BYTES_8BIT_STATE,
    ),
    Optimizer.muon: OptimizerSpec(
        ("momentum_buffer",),
        "KellerJordan/Muon muon.py",
        "for 2-D hidden weights; embeddings, head and gains use AdamW (2 states)",
    ),
}


@dataclass(frozen=True)
class PrecisionSpec:
    params: float
    gradients: float
    master_weights: float
    state: float
    source: str


PRECISIONS: dict[Precision, PrecisionSpec] = {
    Precision.fp32: PrecisionSpec(4, 4, 0, 4, "fp32 training: every tensor 4 B"),
    Precision.mixed: PrecisionSpec(2, 2, 4, 4, sources.ZERO_16),
    Precision.mixed_fp32_grads: PrecisionSpec(2, 4, 4, 4, sources.MEGATRON_18),
    Precision.bf16: PrecisionSpec(2, 2, 0, 2, "pure bf16, no fp32 master copy (small updates can be lost)"),
}


class BytesPerParam(Record):
    """Bytes per parameter of model state, by component; ``total`` is their sum."""

    model_config = ConfigDict(frozen=True)

    optimizer: Optimizer
    precision: Precision
    breakdown: dict[str, float]
    total: float
    states: tuple[str, ...]
    source: str
    note: str


@cache
def bytes_per_param(optimizer: Optimizer, precision: Precision) -> BytesPerParam:
    opt, prec = OPTIMIZERS[optimizer], PRECISIONS[precision]
    state_bytes = opt.state_bytes if opt.state_bytes is not None else prec.state
    breakdown = {
        "params": prec.params,
        "gradients": prec.gradients,
        "master_weights": prec.master_weights,
        "optimizer_states": len(opt.states) * state_bytes,
    }
    return BytesPerParam(
        optimizer=optimizer,
        precision=precision,
        breakdown=breakdown,
        total=sum(breakdown.values()),
        states=opt.states,
        source=f"{prec.source}; {opt.source}",
        note=opt.note,
    )


def bytes_per_param_step(bpp: BytesPerParam) -> Step:
    """The derivation's step for bytes per parameter, its components and source."""
    return step(
        "bytes per parameter",
        "params + gradients + master weights + optimizer states",
        " + ".join(f"{v:g}" for v in bpp.breakdown.values()),
        f"{bpp.total:g} B",
        bpp.source,
    )


def stack_bytes_per_param(bpp: BytesPerParam, rules: MemoryRules | None) -> BytesPerParam:
    """``bpp`` with the element bytes a stack states for gradients and optimizer moments (DeepSeek-V3 §3.3.3: FP32
    gradients, BF16 moments); 8-bit optimizers keep their own state bytes."""
    if rules is None or not (rules.gradient_bytes or rules.moment_bytes):
        return bpp
    breakdown = dict(bpp.breakdown)
    if rules.gradient_bytes:
        breakdown["gradients"] = rules.gradient_bytes
    if rules.moment_bytes and OPTIMIZERS[bpp.optimizer].state_bytes is None:
        breakdown["optimizer_states"] = len(bpp.states) * rules.moment_bytes
    return bpp.model_copy(
        update={
            "breakdown": breakdown,
            "total": sum(breakdown.values()),
            "source": f"{bpp.source}; the stack's gradient and moment bytes: {rules.states_source}",
        }
    )


class OptimizerTable(TableResult):
    """``napkin optimizers``: bytes per parameter for every optimizer × precision regime."""

    title: ClassVar[str] = "Bytes per parameter = params + gradients + master weights + optimizer states"

    table: dict[Optimizer, dict[Precision, BytesPerParam]]

    def header(self) -> list[str]:
        return ["optimizer", *PRECISIONS, "state tensors"]

    def body(self) -> list[list[str]]:
        def cell(b: BytesPerParam) -> str:
            return f"{b.total:.3g} = {'+'.join(f'{v:.3g}' for v in b.breakdown.values())}"  # 8-bit states: 2.004 → 2

        return [
            [o, *(cell(b) for b in row.values()), ", ".join(OPTIMIZERS[o].states) or "–"]
            for o, row in self.table.items()
        ]

    def caption(self) -> str:
        return (
            "fp32: all 4 B; mixed: ZeRO §3.1 (16 B Adam); mixed-fp32-grads: Megatron/DeepSpeed (18 B); "
            "bf16: no master copy. adafactor ≈ 0 state (factored); adam-8bit: 1 B + absmax/2048 per state."
        )

    def secondary(self) -> tuple[int, ...]:
        return (len(PRECISIONS) + 1,)  # state tensors

    def to_json(self, explain: bool = False) -> Any:
        return {
            o.value: {
                p.value: {"total": b.total, "breakdown": b.breakdown, "states": list(b.states), "source": b.source}
                for p, b in row.items()
            }
            for o, row in self.table.items()
        }


def optimizers() -> OptimizerTable:
    """Bytes per parameter for all optimizers × precision regimes, with the breakdown."""
    return OptimizerTable(table={o: {p: bytes_per_param(o, p) for p in PRECISIONS} for o in OPTIMIZERS})


def state_elements(optimizer: Optimizer, shape: tuple[int, ...]) -> int:
    """Optimizer-state elements torch allocates for one parameter tensor (scalar ``step`` excluded)."""
    numel = math.prod(shape)
    if optimizer is Optimizer.adafactor:
        if len(shape) >= 2:  # row factor (…×n) and column factor (…×m) of the last two dims
            lead = math.prod(shape[:-2])
            return lead * (shape[-2] + shape[-1])
        return numel  # vectors keep a full second moment
    return len(OPTIMIZERS[optimizer].states) * numel


# --------------------------------------------------------------------------------------- sharding

#: GPUs per node assumed where no cluster says otherwise (HSDP's shard group in ``napkin memory``, host memory of
#: offloaded states): a DGX/HGX node has 8. ``step`` and ``plan`` take their cluster's scale-up domain.
GPUS_PER_NODE = 8

#: Which components each sharding strategy partitions over the data-parallel group (ZeRO §5).
SHARDED: dict[Sharding, frozenset[str]] = {
    Sharding.none: frozenset(),
    Sharding.zero1: frozenset({"master_weights", "optimizer_states"}),
    Sharding.zero2: frozenset({"gradients", "master_weights", "optimizer_states"}),
    Sharding.zero3: frozenset(COMPONENTS),
    Sharding.fsdp: frozenset(COMPONENTS),
    Sharding.hsdp: frozenset(COMPONENTS),
}

#: Sharding that gathers parameters layer by layer (ZeRO-3, FSDP, HSDP).
GATHERED: frozenset[Sharding] = frozenset({Sharding.zero3, Sharding.fsdp, Sharding.hsdp})


def ranks_near(group: int, domain: int, stride: int) -> int:
    """Ranks of a group ``stride`` apart that share one scale-up domain (Megatron's tp-cp-dp-pp order): all of
    them when the group's span fits in a domain (a TPU slice is one domain of thousands of chips)."""
    if group * stride <= domain:
        return group
    return math.gcd(group, max(1, domain // stride))


def shard_ranks(layout: Layout, domain: int = GPUS_PER_NODE) -> int:
    """The ranks a GPU's dense model states are sharded over: the whole data-parallel group (DP × CP), or for HSDP
    the group's ranks within one scale-up ``domain`` (its TP ranks apart: Megatron's tp-cp-dp order), the shards
    replicated across domains (PyTorch HYBRID_SHARD, torchtitan data_parallel_replicate_degree)."""
    group = layout.dp * layout.context_parallel
    if layout.sharding is Sharding.hsdp:
        return ranks_near(group, domain, layout.tensor_parallel)
    return group


def expert_shard_ranks(layout: Layout, domain: int = GPUS_PER_NODE) -> int:
    """The ranks a GPU's routed-expert states are sharded over: the DP × CP / EP ranks that hold the same experts
    (Megatron's expert data parallelism), or for HSDP those of them within one scale-up ``domain`` (t·EP apart)."""
    group = max(1, layout.dp * layout.context_parallel // layout.expert_parallel)
    if layout.sharding is Sharding.hsdp:
        return ranks_near(group, domain, layout.tensor_parallel * layout.expert_parallel)
    return group


def per_gpu_bytes_per_param(bpp: BytesPerParam, sharding: Sharding, dp: int) -> dict[str, float]:
    """Bytes each GPU holds per model parameter, by component, after sharding over ``dp`` ranks."""
    return {c: b / dp if c in SHARDED[sharding] else b for c, b in bpp.breakdown.items()}


def activation_element_bytes(precision: Precision) -> float:
    """Activations are stored at the compute precision: 4 B in fp32 training, 2 B otherwise."""
    return 4.0 if precision is Precision.fp32 else 2.0


def sharding_formula(sharding: Sharding) -> str:
    return {
        Sharding.none: "(P + G + M + S)·Ψ",
        Sharding.zero1: "(P + G)·Ψ + (M + S)·Ψ/N_d",
        Sharding.zero2: "P·Ψ + (G + M + S)·Ψ/N_d",
        Sharding.zero3: "(P + G + M + S)·Ψ/N_d",
        Sharding.fsdp: "(P + G + M + S)·Ψ/N_d",
        Sharding.hsdp: "(P + G + M + S)·Ψ/N_d, N_d = the group's ranks in one scale-up domain",
    }[sharding]


def sharding_source(sharding: Sharding) -> str:
    if sharding is Sharding.none:
        return "data parallelism: each GPU holds every state (ZeRO §3.1 baseline)"
    if sharding is Sharding.hsdp:
        return sources.HSDP
    return sources.FSDP if sharding is Sharding.fsdp else sources.ZERO_STAGES
