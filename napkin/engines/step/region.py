"""Where a layout stands against its stack's published runs: what of it they do not cover (``outside_validation``,
the stack's ``validated`` region) and whether its sharded parameters are gathered across nodes, the regime where
NCCL's full bandwidth is optimistic (``gathers_across_nodes``)."""

from __future__ import annotations

from typing import Literal

from napkin.engines.memory.states import shard_ranks
from napkin.engines.step.knobs import Knobs
from napkin.engines.step.machine import SHARDED_PARAMS, Machine
from napkin.engines.step.model import StepModel


def outside_validation(sm: StepModel, k: Knobs) -> list[str]:
    """What of a layout the stack's published validation runs do not cover (empty without a stack profile)."""
    return outside_question(sm, k.layout().gpus) + outside_layout(sm, k)


def outside_question(sm: StepModel, gpus: int) -> list[str]:
    """What of the question itself (model, GPUs, sequence, number format, device) the stack's published runs do
    not cover: the same for every layout of one plan (empty without a stack profile)."""
    if sm.validated is None:
        return []
    finetune = str(sm.adapters.finetune) if sm.adapters else "full"
    return sm.validated.outside_workload(gpus, sm.seq, sm.hw.dtype, sm.model.is_moe, sm.hw.name, finetune)


def outside_layout(sm: StepModel, k: Knobs) -> list[str]:
    """What of a layout's own choices (sharding across nodes, EP, CP, micro-batch) its stack's published runs do
    not cover: what tells apart the layouts of one plan (empty without a stack profile)."""
    if sm.validated is None:
        return []
    experts: Literal["dense", "in-node", "across-nodes"] = "dense"
    if sm.model.is_moe:  # Megatron order: TP innermost, then EP over the data-parallel ranks; EP 1: every expert local
        inside = k.expert_parallel == 1 or k.tensor_parallel * k.expert_parallel <= sm.hw.fabric.domain_size
        experts = "in-node" if inside else "across-nodes"
    local = sm.model.experts // k.expert_parallel if sm.model.is_moe else 0
    return sm.validated.outside_layout(
        k.sharding, _spans_nodes(k, sm.hw), experts, k.context_parallel, local, k.micro_batch
    )


def _spans_nodes(k: Knobs, hw: Machine) -> bool:
    """Whether the data-parallel group leaves the scale-up domain (Megatron order: TP, CP, then DP)."""
    return k.data_parallel > 1 and k.tensor_parallel * k.context_parallel * k.data_parallel > hw.fabric.domain_size


def gathers_across_nodes(k: Knobs, hw: Machine) -> bool:
    """Whether the per-layer gathers of sharded parameters (ZeRO-3, FSDP, HSDP) leave the scale-up domain: their
    shard group, its ranks TP apart, spans more than it. HSDP's shard group is the data-parallel ranks within one
    domain (``shard_ranks``), so its gathers never do."""
    domain = hw.fabric.domain_size
    return k.sharding in SHARDED_PARAMS and k.tensor_parallel * shard_ranks(k.layout(), domain) > domain
