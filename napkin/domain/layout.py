"""``Layout``: how a run is split over its GPUs — tensor, pipeline, data, context and expert parallel
degrees, the pipeline's interleaving, ZeRO/FSDP sharding, activation recomputation and offload.

The degrees multiply to the GPU count: G = TP × PP × CP × DP (Megatron-LM's ``parallel_state``; Narayanan
et al. 2021 §2). Expert parallelism splits the MoE experts over ranks of the data(×context)-parallel group
(Megatron-LM ``expert_model_parallel_size``), so it does not change G.
"""

from __future__ import annotations

import warnings
from functools import cache
from typing import Any, Final

from pydantic import ConfigDict, Field, model_validator

from napkin.domain.base import Record
from napkin.domain.choices import Offload, Recompute, Sharding
from napkin.domain.model import Model
from napkin.errors import UsageError

#: Layout's field names before one name per parallel degree (flag, keyword, field and JSON key alike). A layout
#: given with an old name (``Layout(tensor=8)``, a layout read from a file) still loads, with a warning that
#: names the new one; one given with both names is refused.
OLD_NAMES: Final = {
    "tensor": "tensor_parallel",
    "pipeline": "pipeline_parallel",
    "data": "data_parallel",
    "context": "context_parallel",
    "expert": "expert_parallel",
}


class Layout(Record):
    """Parallel degrees and memory-saving choices; ``data_parallel`` is derived from the GPU count when left
    out."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tensor_parallel: int = Field(default=1, gt=0, description="TP: each layer's matrices split over t GPUs")
    pipeline_parallel: int = Field(default=1, gt=0, description="PP: layers split into p stages")
    data_parallel: int | None = Field(default=None, gt=0, description="DP: model replicas; default G / (TP·PP·CP)")
    context_parallel: int = Field(default=1, gt=0, description="CP: each sequence split over c GPUs")
    expert_parallel: int = Field(default=1, gt=0, description="EP: MoE experts split over e ranks of the DP·CP group")
    interleave: int = Field(default=1, gt=0, description="v: model chunks per pipeline rank (interleaved 1F1B)")
    sequence_parallel: bool = Field(default=False, description="shard norm/dropout activations over TP")
    sharding: Sharding = Field(default=Sharding.zero3, description="ZeRO stage / FSDP over the DP group")
    recompute: Recompute = Field(default=Recompute.none, description="activation recomputation")
    offload: Offload = Field(default=Offload.none, description="model states kept in CPU memory")
    activation_offload_layers: int = Field(
        default=0,
        ge=0,
        description="the first k layers' saved activations copied to CPU memory in the forward and back for the "
        "backward (Megatron-Core cpu_offloading_num_layers); 0: none",
    )

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, given: Any) -> Any:
        if not isinstance(given, dict):
            return given
        given, notes = renamed(given)
        for note in notes:
            warnings.warn(f"Layout: {note}", FutureWarning, stacklevel=3)  # at the caller
        return given

    @model_validator(mode="after")
    def _consistent(self) -> Layout:
        if self.interleave > 1 and self.pipeline_parallel == 1:
            raise ValueError(f"interleave ({self.interleave}) needs pipeline parallelism (pipeline_parallel > 1)")
        k = self.activation_offload_layers
        # what Megatron-Core refuses (transformer_config.py: no pipeline parallelism, no recomputation)
        if k and self.pipeline_parallel > 1:
            raise ValueError(
                f"activation_offload_layers ({k}) needs pipeline_parallel 1: Megatron-Core offloads "
                "activations without pipeline parallelism only"
            )
        if k and self.recompute is not Recompute.none:
            raise ValueError(
                f"activation_offload_layers ({k}) needs recompute none: Megatron-Core does not offload "
                "activations it recomputes"
            )
        return self

    @property
    def model_parallel(self) -> int:
        """GPUs holding one model replica: TP × PP × CP."""
        return self.tensor_parallel * self.pipeline_parallel * self.context_parallel

    @property
    def dp(self) -> int:
        if self.data_parallel is None:
            raise ValueError("layout.data_parallel is not set: call resolve(gpus) first")
        return self.data_parallel

    @property
    def gpus(self) -> int:
        return self.model_parallel * self.dp

    def resolve(self, gpus: int, model: Model | None = None) -> Layout:
        """This layout on ``gpus`` GPUs with DP filled in, checked against the GPU count and the model."""
        if self.data_parallel is None:
            data, rest = divmod(gpus, self.model_parallel)
            t, p, c = self.tensor_parallel, self.pipeline_parallel, self.context_parallel
            if rest or data == 0:
                raise UsageError(
                    f"gpus ({gpus}) is not a multiple of tensor × pipeline × context "
                    f"({t} × {p} × {c} = {self.model_parallel})",
                    field="gpus",
                )
            resolved = self.model_copy(update={"data_parallel": data})
        else:
            if self.model_parallel * self.data_parallel != gpus:
                t, p, c, d = self.tensor_parallel, self.pipeline_parallel, self.context_parallel, self.data_parallel
                raise UsageError(
                    f"tensor × pipeline × context × data = {t} × {p} × {c} × {d} = {self.model_parallel * d}, "
                    f"not gpus ({gpus})",
                    field="gpus",
                )
            resolved = self
        if (resolved.dp * self.context_parallel) % self.expert_parallel:
            raise UsageError(
                f"expert_parallel ({self.expert_parallel}) must divide data × context "
                f"({resolved.dp} × {self.context_parallel})",
                field="expert_parallel",
            )
        if model is not None:
            resolved.check(model)
        return resolved

    def check(self, model: Model) -> None:
        """The divisibility rules Megatron-LM enforces (arguments.py), with the numbers that disagree."""
        if model.heads is not None and model.heads % self.tensor_parallel:
            raise UsageError(
                f"tensor_parallel ({self.tensor_parallel}) must divide the model's heads ({model.heads})",
                field="tensor_parallel",
            )
        if self.activation_offload_layers >= model.layers:
            raise UsageError(
                f"activation_offload_layers ({self.activation_offload_layers}) must be below the model's layers "
                f"({model.layers}): the last layer's activations stay on the GPU (Megatron-Core, Transformer Engine)",
                field="activation_offload_layers",
            )
        problem = split_problem(model.layers, self.pipeline_parallel, self.interleave)
        if problem is not None:
            field, message = problem
            raise UsageError(message, field=field, also=("pipeline_parallel",) if field == "interleave" else ())
        if self.expert_parallel > 1 and (not model.is_moe or model.experts % self.expert_parallel):
            raise UsageError(
                f"expert_parallel ({self.expert_parallel}) must divide the model's experts ({model.experts})",
                field="expert_parallel",
            )

    def describe(self, *, compact: bool = False) -> str:
        """``TP 8 · PP 4 (v 2) · DP 32 · zero1 · selective recompute`` — the form results show; ``compact``:
        ``TP8 PP4v2 DP32 zero1 selective``, a plan table's column."""
        gap, sep = ("", " ") if compact else (" ", " · ")
        pp = f"PP{gap}{self.pipeline_parallel}"
        if self.interleave > 1:
            pp += f"v{self.interleave}" if compact else f" (v {self.interleave})"
        parts = [f"TP{gap}{self.tensor_parallel}", pp]
        if self.context_parallel > 1:
            parts.append(f"CP{gap}{self.context_parallel}")
        if self.expert_parallel > 1:
            parts.append(f"EP{gap}{self.expert_parallel}")
        if self.data_parallel is not None:
            parts.append(f"DP{gap}{self.data_parallel}")
        if self.sequence_parallel:
            parts.append("SP")
        parts.append(str(self.sharding))
        if self.recompute is not Recompute.none:
            parts.append(str(self.recompute) if compact else f"{self.recompute} recompute")
        if self.offload is not Offload.none:
            parts.append(f"offload {self.offload}")
        if self.activation_offload_layers:
            k = self.activation_offload_layers
            parts.append(f"ao{k}" if compact else f"{k} layers' activations offloaded")
        return sep.join(parts)


class ServingLayout(Record):
    """How one serving replica splits the model, as engines take it: vLLM's ``--tensor-parallel-size``,
    ``--pipeline-parallel-size`` and ``--enable-expert-parallel`` (experts split over the tensor-parallel
    group, so EP = TP), SGLang's ``--enable-dp-attention`` (attention data-parallel over the same GPUs)."""

    model_config = ConfigDict(frozen=True)

    tensor_parallel: int = Field(default=1, ge=1)
    pipeline_parallel: int = Field(default=1, ge=1)
    expert_parallel: int = Field(default=1, ge=1, description="MoE experts split over this many GPUs (= TP)")
    dp_attention: int = Field(default=1, ge=1, description="DP attention ranks (= TP), else 1")

    def describe(self) -> str:
        """``TP 8 · PP 2 · EP 8``: the form serving results show."""
        parts = [f"TP {self.tensor_parallel}"]
        if self.pipeline_parallel > 1:
            parts.append(f"PP {self.pipeline_parallel}")
        if self.dp_attention > 1:
            parts.append(f"DP attention {self.dp_attention}")
        if self.expert_parallel > 1:
            parts.append(f"EP {self.expert_parallel}")
        return " · ".join(parts)


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
    neighbours' chunks are one layer short). Where the only lighter stages are the first and the last, the split
    is Megatron-Core's ``account_for_embedding_in_pipeline_split`` / ``account_for_loss_in_pipeline_split``: the
    embedding and the loss each count as a layer, and the one short chunk may hold the embedding or the loss
    alone (``get_num_layers_to_build`` asserts ``num_layers_to_build >= 0``; Megatron-LM
    megatron/core/transformer/transformer_block.py @ d98e8a64dd), so the interleave may reach the heaviest
    stage's layers: Llama 3.1 405B's 126 layers over PP 16 with v 8 (Megatron-Bridge's GB200 and B200 recipes,
    src/megatron/bridge/recipes/llama/h100/llama3.py @ 067f987d). ``Layout.check`` and the planner both ask
    this."""
    if pipeline > layers:
        return "pipeline_parallel", (
            f"pipeline_parallel ({pipeline}) must not exceed the model's layers ({layers}), "
            "so that every stage holds a layer"
        )
    lightest = layers // pipeline
    heaviest = lightest + (1 if layers % pipeline else 0)
    ends_light = layers % pipeline >= pipeline - 2  # the light stages (if any) are the first and the last only
    if ends_light and layers % pipeline and heaviest % interleave:
        return "interleave", (
            f"interleave ({interleave}) must divide the layers of the heaviest stage ({heaviest} of the model's "
            f"{layers} over pipeline_parallel {pipeline}; the short chunk of the first and the last stage holds "
            "the embedding or the loss)"
        )
    if heaviest % interleave or interleave > (heaviest if ends_light else lightest):
        return "interleave", (
            f"interleave ({interleave}) must divide the layers of the heaviest stage and not "
            f"exceed the lightest's ({heaviest} and {lightest} of the model's {layers} over "
            f"pipeline_parallel {pipeline})"
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

    if layers % pipeline >= pipeline - 2:  # the first and/or the last stage light: the embedding or loss counted
        flags = (
            "--account-for-loss-in-pipeline-split"
            if light == [(pipeline - 1, pipeline - 1)]
            else ("--account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split")
        )
        how = f"{flags} or --pipeline-model-parallel-layout"
    else:
        how = "--pipeline-model-parallel-layout"
    said = (
        f"{layers} layers over {pipeline} pipeline stages: {hold(heavy, high)} layers and {hold(light, high - 1)} "
        f"(a split Megatron-LM sets with {how})"
    )
    return said + ("; the step runs at the pace of the slowest stage" if step else "")


def renamed(given: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``given`` (a layout's fields) with each old name (OLD_NAMES) replaced by its new one, and a one-line note
    for each; a ValueError naming the old key when a degree is given by both names."""
    if not any(old in given for old in OLD_NAMES):
        return given, []
    given, notes = dict(given), []
    for old, new in OLD_NAMES.items():
        if old in given:
            if new in given:
                raise ValueError(f"{old}: give {new}, not both it and its old name {old}")
            notes.append(f"'{old}' is deprecated, it is now '{new}' (the old name is read until the next release)")
            given[new] = given.pop(old)
    return given, notes
