"""``Layout``: how a run is split over its GPUs — tensor, pipeline, data, context and expert parallel
degrees, the pipeline's interleaving, ZeRO/FSDP sharding, activation recomputation and offload.

The degrees multiply to the GPU count: G = TP × PP × CP × DP (Megatron-LM's ``parallel_state``; Narayanan
et al. 2021 §2). Expert parallelism splits the MoE experts over ranks of the data(×context)-parallel group
(Megatron-LM ``expert_model_parallel_size``), so it does not change G.
"""

from __future__ import annotations

from functools import cache

from pydantic import ConfigDict, Field, model_validator

from napkin.domain.base import Record
from napkin.domain.choices import Offload, Recompute, Sharding
from napkin.domain.model import Model
from napkin.errors import UsageError


class Layout(Record):
    """Parallel degrees and memory-saving choices; ``data`` is derived from the GPU count when left out."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tensor: int = Field(default=1, gt=0, description="TP: each layer's matrices split over t GPUs")
    pipeline: int = Field(default=1, gt=0, description="PP: layers split into p stages")
    data: int | None = Field(default=None, gt=0, description="DP: model replicas; default G / (TP·PP·CP)")
    context: int = Field(default=1, gt=0, description="CP: each sequence split over c GPUs")
    expert: int = Field(default=1, gt=0, description="EP: MoE experts split over e ranks of the DP·CP group")
    interleave: int = Field(default=1, gt=0, description="v: model chunks per pipeline rank (interleaved 1F1B)")
    sequence_parallel: bool = Field(default=False, description="shard norm/dropout activations over TP")
    sharding: Sharding = Field(default=Sharding.zero3, description="ZeRO stage / FSDP over the DP group")
    recompute: Recompute = Field(default=Recompute.none, description="activation recomputation")
    offload: Offload = Field(default=Offload.none, description="model states kept in CPU memory")

    @model_validator(mode="after")
    def _consistent(self) -> Layout:
        if self.interleave > 1 and self.pipeline == 1:
            raise ValueError(f"interleave ({self.interleave}) needs pipeline parallelism (pipeline > 1)")
        return self

    @property
    def model_parallel(self) -> int:
        """GPUs holding one model replica: TP × PP × CP."""
        return self.tensor * self.pipeline * self.context

    @property
    def dp(self) -> int:
        if self.data is None:
            raise ValueError("layout.data is not set: call resolve(gpus) first")
        return self.data

    @property
    def gpus(self) -> int:
        return self.model_parallel * self.dp

    def resolve(self, gpus: int, model: Model | None = None) -> Layout:
        """This layout on ``gpus`` GPUs with DP filled in, checked against the GPU count and the model."""
        if self.data is None:
            data, rest = divmod(gpus, self.model_parallel)
            if rest or data == 0:
                raise UsageError(
                    f"gpus ({gpus}) is not a multiple of tensor × pipeline × context "
                    f"({self.tensor} × {self.pipeline} × {self.context} = {self.model_parallel})",
                    field="gpus",
                )
            resolved = self.model_copy(update={"data": data})
        else:
            if self.model_parallel * self.data != gpus:
                raise UsageError(
                    f"tensor × pipeline × context × data = {self.tensor} × {self.pipeline} × {self.context} × "
                    f"{self.data} = {self.model_parallel * self.data}, not gpus ({gpus})",
                    field="gpus",
                )
            resolved = self
        if (resolved.dp * self.context) % self.expert:
            raise UsageError(
                f"expert ({self.expert}) must divide data × context ({resolved.dp} × {self.context})", field="expert"
            )
        if model is not None:
            resolved.check(model)
        return resolved

    def check(self, model: Model) -> None:
        """The divisibility rules Megatron-LM enforces (arguments.py), with the numbers that disagree."""
        if model.heads is not None and model.heads % self.tensor:
            raise UsageError(f"tensor ({self.tensor}) must divide the model's heads ({model.heads})", field="tensor")
        problem = split_problem(model.layers, self.pipeline, self.interleave)
        if problem is not None:
            field, message = problem
            raise UsageError(message, field=field, also=("pipeline",) if field == "interleave" else ())
        if self.expert > 1 and (not model.is_moe or model.experts % self.expert):
            raise UsageError(
                f"expert ({self.expert}) must divide the model's experts ({model.experts})", field="expert"
            )

    def describe(self, *, compact: bool = False) -> str:
        """``TP 8 · PP 4 (v 2) · DP 32 · zero1 · selective recompute`` — the form results show; ``compact``:
        ``TP8 PP4v2 DP32 zero1 selective``, a plan table's column."""
        gap, sep = ("", " ") if compact else (" ", " · ")
        pp = f"PP{gap}{self.pipeline}"
        if self.interleave > 1:
            pp += f"v{self.interleave}" if compact else f" (v {self.interleave})"
        parts = [f"TP{gap}{self.tensor}", pp]
        if self.context > 1:
            parts.append(f"CP{gap}{self.context}")
        if self.expert > 1:
            parts.append(f"EP{gap}{self.expert}")
        if self.data is not None:
            parts.append(f"DP{gap}{self.data}")
        if self.sequence_parallel:
            parts.append("SP")
        parts.append(str(self.sharding))
        if self.recompute is not Recompute.none:
            parts.append(str(self.recompute) if compact else f"{self.recompute} recompute")
        if self.offload is not Offload.none:
            parts.append(f"offload {self.offload}")
        return sep.join(parts)


#: Pipelines longer than this are described by their extremes (first, heaviest, lightest, last stage), never
#: stage by stage: work and output stay bounded whatever pipeline degree is typed.
MAX_LISTED_STAGES = 64


def stage_size(layers: int, pipeline: int, stage: int) -> int:
    """Layers on ``stage`` (0-based) when ``layers`` split over ``pipeline`` stages, as even as they go: when
    ``pipeline`` does not divide ``layers`` the extra layers go to the middle stages first (1, 2, …, then the
    first stage; the last stage never gets one), so the first stage (embedding, the most micro-batches in
    flight) and the last (output layer, loss) hold fewer while they can. Megatron-LM sets such a split with
    --pipeline-model-parallel-layout (DeepSeek-V3's 61 layers, Llama 3.1 405B's 126); an interleaved stage's
    chunks are then one layer short where the stage is (``Layout.check``: the interleave divides the heaviest
    stage's layers). O(1) in ``pipeline``."""
    base, extra = divmod(layers, pipeline)
    if pipeline <= 2:
        heavy = stage < extra
    else:
        heavy = 1 <= stage <= min(extra, pipeline - 2) or (stage == 0 and extra >= pipeline - 1)
    return base + (1 if heavy else 0)


def heavy_stages(layers: int, pipeline: int) -> list[tuple[int, int]]:
    """The stages that hold one layer more than the rest, as 0-based inclusive ranges (none when even)."""
    extra = layers % pipeline
    if extra == 0:
        return []
    if pipeline <= 2:
        return [(0, extra - 1)]
    if extra >= pipeline - 1:
        return [(0, pipeline - 2)]
    return [(1, extra)]


def first_heaviest(layers: int, pipeline: int) -> int:
    """The first stage holding the most layers."""
    ranges = heavy_stages(layers, pipeline)
    return ranges[0][0] if ranges else 0


def stage_layers(layers: int, pipeline: int) -> tuple[int, ...]:
    """Layers per pipeline stage, first to last (``stage_size`` of each): for a pipeline of at most
    MAX_LISTED_STAGES stages; a longer one is described by ``stage_size`` and ``heavy_stages``."""
    assert pipeline <= MAX_LISTED_STAGES, "describe a long pipeline by stage_size and heavy_stages"
    return tuple(stage_size(layers, pipeline, i) for i in range(pipeline))


@cache
def split_problem(layers: int, pipeline: int, interleave: int) -> tuple[str, str] | None:
    """(the field at fault, why) ``layers`` cannot run on ``pipeline`` stages of ``interleave`` chunks each, or
    None: every stage needs a layer, and every chunk one, the interleave dividing the heaviest stage (its lighter
    neighbours' chunks are one layer short). ``Layout.check`` and the planner both ask this."""
    if pipeline > layers:
        return "pipeline", (
            f"pipeline ({pipeline}) must not exceed the model's layers ({layers}), so that every stage holds a layer"
        )
    lightest = layers // pipeline
    heaviest = lightest + (1 if layers % pipeline else 0)
    if heaviest % interleave or interleave > lightest:
        return "interleave", (
            f"interleave ({interleave}) must divide the layers of the heaviest stage and not "
            f"exceed the lightest's ({heaviest} and {lightest} of the model's {layers} over "
            f"pipeline {pipeline})"
        )
    return None


def _ranges(runs: list[tuple[int, int]]) -> str:
    """0-based inclusive stage ranges as 1-based text: [(0, 2), (4, 4)] → "1-3, 5"."""
    return ", ".join(f"{lo + 1}" if lo == hi else f"{lo + 1}-{hi + 1}" for lo, hi in runs)


def _complement(runs: list[tuple[int, int]], pipeline: int) -> list[tuple[int, int]]:
    out, at = [], 0
    for lo, hi in runs:
        if lo > at:
            out.append((at, lo - 1))
        at = hi + 1
    if at < pipeline:
        out.append((at, pipeline - 1))
    return out


def uneven_note(layers: int, pipeline: int, *, step: bool = True) -> str | None:
    """What an uneven split does, in words; None when ``pipeline`` divides ``layers``. ``step``: say that the
    step runs at the pace of the slowest stage (a step result), else only the split (a memory result)."""
    if layers % pipeline == 0:
        return None
    high = layers // pipeline + 1
    heavy = heavy_stages(layers, pipeline)
    light = _complement(heavy, pipeline)

    def hold(runs: list[tuple[int, int]], n: int) -> str:
        one = len(runs) == 1 and runs[0][0] == runs[0][1]
        return f"{'stage' if one else 'stages'} {_ranges(runs)} {'holds' if one else 'hold'} {n}"

    said = (
        f"{layers} layers over {pipeline} pipeline stages: {hold(heavy, high)} layers and {hold(light, high - 1)} "
        "(a split Megatron-LM sets with --pipeline-model-parallel-layout)"
    )
    return said + ("; the step runs at the pace of the slowest stage" if step else "")
