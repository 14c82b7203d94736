"""The hot path's plain values: one layout as numbers (``Knobs``), the named results of the step model
(``Terms``, ``LayerTimes``, ``LayerPasses``, ``Pace``, ``ShapeCosts``, ``SplitCosts``) and the small rules they
share."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, NamedTuple

if TYPE_CHECKING:
    pass

from napkin.domain.choices import Recompute, Sharding
from napkin.domain.layout import Layout

BREAKDOWN: Final = ("compute", "tensor_parallel", "bubble", "data_parallel", "optimizer", "other")


def pipeline_bubble(p: int, v: int, stage: float) -> float:
    """Idle seconds per step of 1F1B (v = 1) or the interleaved schedule (v chunks per rank): (p − 1)/v
    micro-batches of one stage's time (Narayanan et al. 2021 §2.2), ``stage`` being one micro-batch's forward
    and backward on a rank with its communication. The last stage's own extra work (logits, loss) is on the
    critical path every micro-batch, not in the bubble. tests/pipeline_schedule.py replays Megatron-LM's
    schedules, blocking sends included, and agrees within 2 % (the end stages send half as much)."""
    return (p - 1) / v * stage


def exposed_seconds(comm: float, window: float, slowdown: float) -> float:
    """Seconds a collective of ``comm`` seconds adds when it overlaps ``window`` seconds of compute: what the
    compute cannot cover, plus the compute it slows while they share the GPU."""
    return max(0.0, comm - window) + slowdown * min(comm, window)


def collectives_per_layer(recompute: Recompute) -> int:
    """A layer's collectives of one kind per micro-batch: 2 in the forward, 2 in the backward, 2 more in a
    recomputed forward (Shoeybi et al. 2019 §3: g in the forward, f in the backward, for attention and the MLP)."""
    return 4 + (2 if recompute is Recompute.full else 0)


class Terms(NamedTuple):
    """One step of one layout: seconds by term (``BREAKDOWN``), their sum, and the most loaded GPU's bytes."""

    step_seconds: float
    compute: float
    tensor_parallel: float  # exposed TP collectives
    bubble: float
    data_parallel: float  # exposed DP collectives
    optimizer: float
    other: float  # pipeline sends, EP all-to-all, CP
    per_gpu_bytes: float

    def breakdown(self) -> dict[str, float]:
        """Seconds per term, by name, in ``BREAKDOWN``'s order."""
        return {name: getattr(self, name) for name in BREAKDOWN}


class LayerTimes(NamedTuple):
    """Forward seconds of one layer for one micro-batch on one GPU."""

    dense: float  # a dense layer's matmuls
    moe: float  # an MoE layer's matmuls
    scores: float  # attention scores (QKᵀ, A·V, softmax; or FlashAttention's kernel)
    elementwise: float  # norms, residuals, activation function (dense layer)
    moe_elementwise: float  # the same for an MoE layer


class LayerPasses(NamedTuple):
    """One layer for one micro-batch on one GPU, MoE and dense layers in the model's proportion."""

    forward: float  # seconds of its forward
    recompute: float  # of its recomputation (full: a forward; selective: the attention scores)
    collective: float  # one tensor-parallel collective
    tensor_parallel: float  # all its tensor-parallel collectives (2 forward, 2 backward, 2 per recomputation)
    logits: float  # the last stage's output layer and loss


class Pace(NamedTuple):
    """The pipeline stage the step waits for."""

    heaviest: int  # layers of the heaviest stage
    layers: int  # layers of the pacing stage
    last_stage: bool  # whether it is the last stage, with the logits


class ShapeCosts(NamedTuple):
    """One layer under a layout's shape (``StepModel.shape_costs``)."""

    passes: LayerPasses
    matmuls: float  # forward seconds of its matmuls
    frozen: float  # what a frozen base changes in its forward + backward (0 without adapters)
    scores: float  # forward seconds of its attention scores


class SplitCosts(NamedTuple):
    """What a step takes from a layout's split and ZeRO stage alone (``StepModel.split_costs``)."""

    share: float  # the heaviest stage's share of the layers × p
    groups: list[tuple[float, int, int]]  # data-parallel groups: (local parameters, ranks, ranks within a domain)
    accumulate: float  # seconds of an unfused gradient accumulation per micro-batch
    sync: float  # seconds of the gradient sync of unsharded parameters (before overlap)
    optimizer: float  # seconds of the optimizer's update, its fixed cost included


class Knobs(NamedTuple):
    """One resolved layout and micro-batch as plain numbers for the hot path: ``Layout``'s field names (DP
    resolved), built by keyword (``Knobs.of(layout, micro_batch)`` from a ``Layout``); only ``data_parallel`` is
    required, the rest default as ``Layout``'s do. A named tuple, not a frozen dataclass: the planner builds one
    per candidate layout (thousands a plan) and keys its memory by them, which a tuple does four times faster."""

    data_parallel: int
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    context_parallel: int = 1
    expert_parallel: int = 1
    interleave: int = 1
    micro_batch: int = 1
    sequence_parallel: bool = False
    recompute: Recompute = Recompute.none
    sharding: Sharding = Sharding.zero3
    activation_offload_layers: int = 0

    @classmethod
    def of(cls, layout: Layout, micro_batch: int) -> Knobs:
        return cls(
            tensor_parallel=layout.tensor_parallel,
            pipeline_parallel=layout.pipeline_parallel,
            data_parallel=layout.dp,
            context_parallel=layout.context_parallel,
            expert_parallel=layout.expert_parallel,
            interleave=layout.interleave,
            micro_batch=micro_batch,
            sequence_parallel=layout.sequence_parallel,
            recompute=layout.recompute,
            sharding=layout.sharding,
            activation_offload_layers=layout.activation_offload_layers,
        )

    def with_choices(self, micro_batch: int, recompute: Recompute, sharding: Sharding) -> Knobs:
        """This split (its degrees, SP and activation offload) with other per-layout choices: what ``_replace``
        does, at the cost of building one tuple."""
        return Knobs(
            *self[:6], micro_batch, self.sequence_parallel, recompute, sharding, self.activation_offload_layers
        )

    @property
    def split(self) -> tuple[int, int, int, int, int, int]:
        """(TP, PP, DP, CP, EP, interleave): how the GPUs and the layers are divided."""
        return (
            self.tensor_parallel,
            self.pipeline_parallel,
            self.data_parallel,
            self.context_parallel,
            self.expert_parallel,
            self.interleave,
        )

    @property
    def shape(self) -> tuple[int, int, int, int, bool, Recompute]:
        """(TP, CP, micro-batch, EP, SP, recompute): what one layer's work and tensors depend on."""
        return (
            self.tensor_parallel,
            self.context_parallel,
            self.micro_batch,
            self.expert_parallel,
            self.sequence_parallel,
            self.recompute,
        )

    @property
    def gpus(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel * self.context_parallel * self.data_parallel

    def layout(self) -> Layout:
        return Layout(
            tensor_parallel=self.tensor_parallel,
            pipeline_parallel=self.pipeline_parallel,
            data_parallel=self.data_parallel,
            context_parallel=self.context_parallel,
            expert_parallel=self.expert_parallel,
            interleave=self.interleave,
            sequence_parallel=self.sequence_parallel,
            sharding=self.sharding,
            recompute=self.recompute,
            activation_offload_layers=self.activation_offload_layers,
        )
