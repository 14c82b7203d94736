"""Published Megatron-LM training runs on Selene (DGX A100 80GB: NVLink 3 in the node, 8 × HDR 200 Gbit/s
InfiniBand between nodes) and what ``napkin step`` predicts for each, with one unchanged model of the hardware.

* **Narayanan et al. 2021** (arXiv:2104.04473) Table 1: weak scaling from 1.7B to 1T parameters, in
  teraFLOP/s per GPU counted by the paper's eq. (3), recomputation included. The table does not give the
  micro-batch, the schedule or the data-parallel implementation; the authors' own scripts do
  (NVIDIA/Megatron-LM examples/sc21/run_table_1.sh and CONFIG.sh, commit de7dc40f, 2021-08-10): fp16, full
  recomputation (``--checkpoint-activations``), sequence 2048, and per row the micro-batch, the interleaved
  schedule (``--num-layers-per-virtual-pipeline-stage``) and ``--DDP-impl``. PyTorch DDP overlaps the
  gradient all-reduce with the last backward; Megatron's ``local`` DDP all-reduces after the pipeline
  flush (megatron/training.py ``allreduce_gradients``), so those rows run with ``overlap_grad_reduce=False``.
  That code accumulates fp16 gradients across micro-batches through autograd (no contiguous buffers without
  ``--accumulate-allreduce-grads-in-fp32``; megatron/model/distributed.py), one add kernel per micro-batch
  after the first: every row runs with ``gradient_accumulation_fusion=False``. Megatron-LM fused the add into
  the weight-gradient GEMM for fp32 gradient accumulation on 2022-02-13 (83b1e42f, before the Korthikanti
  runs below) and for fp16 on 2022-09-27 (07916bf2).
* **Korthikanti et al. 2022** (arXiv:2205.05198) Table 5: seconds per iteration with full recomputation and
  with sequence parallelism + selective recomputation, one data-parallel replica. Layouts as Calculon's
  validation runs them (calculon-ai/calculon validation/seqsel/tab5/*.json); the times as listed in
  calculon/llm/validation.py. The paper says "mixed precision"; napkin takes Megatron-LM's defaults of the
  time with bf16: fp32 gradients (``mixed-fp32-grads``), their accumulation fused into the weight-gradient
  GEMMs (Megatron-LM fuses it only when it accumulates in fp32, which bf16 forces). §6.3 also
  scales the 530B run to 8-way data parallelism (2,240 GPUs, batch 2,240): 37.83 s becomes 39.15 s, the
  gradient all-reduce not overlapped (``DP8_530B``).

* **Megatron-Bridge on DGX H100** (``H100_FP8``): NVIDIA's published FP8 pre-training runs of Llama 3 70B
  and Llama 3.1 405B with their full layouts.

Print the README tables with ``python -m tests.megatron_runs``.
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from napkin.domain.choices import Precision, Recompute, Sharding
from napkin.domain.model import Model
from napkin.engines.step import Knobs, Machine, StepModel, Terms, machine
from napkin.systems.cluster import find
from napkin.systems.profiles import resolve
from napkin.systems.stack import StackKnobs
from napkin.systems.stack import resolve as stack

SEQ, VOCAB = 2048, 51200


class Row(NamedTuple):
    """One row of Narayanan Table 1 with the run's settings from run_table_1.sh."""

    billions: float  # parameters, as printed
    heads: int
    hidden: int
    layers: int
    tensor: int
    pipeline: int
    gpus: int
    batch: int
    teraflops: float  # achieved teraFLOP/s per GPU, as printed
    micro_batch: int  # MBS
    interleave: int  # layers per stage / --num-layers-per-virtual-pipeline-stage (1: plain 1F1B)
    torch_ddp: bool  # DDP=torch (overlapped all-reduce) or local (after the flush)


#: Table 1 of arXiv:2104.04473, row by row, with MBS, interleave and DDP from examples/sc21/run_table_1.sh.
TABLE_1 = (
    Row(1.7, 24, 2304, 24, 1, 1, 32, 512, 137, 16, 1, True),
    Row(3.6, 32, 3072, 30, 2, 1, 64, 512, 138, 16, 1, True),
    Row(7.5, 32, 4096, 36, 4, 1, 128, 512, 142, 16, 1, True),
    Row(18.4, 48, 6144, 40, 8, 1, 256, 1024, 135, 8, 1, True),
    Row(39.1, 64, 8192, 48, 8, 2, 512, 1536, 138, 4, 1, False),
    Row(76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140, 2, 3, False),  # 15 layers per stage, 5 per chunk
    Row(145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148, 2, 2, False),  # 10, 5
    Row(310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155, 1, 2, False),  # 6, 3
    Row(529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163, 1, 3, False),  # 3, 1
    Row(1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163, 1, 1, False),
)


class ZeroRow(NamedTuple):
    """A ZeRO-3 row of Narayanan Table 2: DeepSpeed ZeRO-3 without model parallelism."""

    billions: float
    layers: int
    hidden: int
    heads: int
    gpus: int
    batch: int
    micro_batch: int
    teraflops: float


#: Table 2 of arXiv:2104.04473, the ZeRO-3 rows (its "training time for 300B tokens" column agrees with
#: these to a day: 300e9 × eq. (3) FLOPs per token / (GPUs × teraFLOP/s)). One micro-batch per GPU per step.
TABLE_2_ZERO3 = (
    ZeroRow(174.6, 96, 12288, 96, 384, 1536, 4, 144),
    ZeroRow(174.6, 96, 12288, 96, 768, 1536, 2, 88),
    ZeroRow(174.6, 96, 12288, 96, 1536, 1536, 1, 44),
    ZeroRow(529.6, 105, 20480, 128, 640, 2560, 4, 138),
    ZeroRow(529.6, 105, 20480, 128, 1120, 2240, 2, 98),
    ZeroRow(529.6, 105, 20480, 128, 2240, 2240, 1, 48),
)


class Run(NamedTuple):
    """One model of Korthikanti Table 5, with the layout of its runs."""

    name: str
    layers: int
    hidden: int
    heads: int
    tensor: int
    pipeline: int
    gpus: int
    batch: int
    micro_batch: int
    interleave: int
    full_seconds: float  # full recomputation
    selective_seconds: float  # sequence parallelism + selective recomputation


#: Table 5 of arXiv:2205.05198 (seconds per iteration).
TABLE_5 = (
    Run("22B", 48, 6144, 64, 8, 1, 8, 4, 4, 1, 1.42, 1.10),
    Run("175B", 96, 12288, 96, 8, 8, 64, 64, 1, 3, 18.13, 13.75),
    Run("530B", 105, 20480, 128, 8, 35, 280, 280, 1, 3, 49.05, 37.83),
    Run("1T", 128, 25600, 160, 8, 64, 512, 512, 1, 1, 94.42, 71.49),
)


class H100Run(NamedTuple):
    """A dense pre-training run of NVIDIA's Megatron-Bridge performance summary on DGX H100, FP8 (current
    scaling), sequence 8192, MBS 1, distributed optimizer: its layout and measured tokens/s per GPU."""

    model: str
    release: str
    gpus: int
    batch: int
    tensor: int
    pipeline: int
    context: int
    interleave: int
    tokens_per_gpu: float


#: Every DGX-H100 pre-training row of Llama 3 70B and Llama 3.1 405B in NVIDIA-NeMo/Megatron-Bridge
#: docs/performance-summary-archive.md at 067f987d (2026-08-22) whose table states the precision: releases
#: 25.11 to 26.06, all FP8 (25.09's table has no precision column; Llama 3 8B's recipe recomputes an unlisted
#: part). Recomputation is not listed; napkin runs none (each fits without). Llama 3.1 405B has 126 layers:
#: 8 stages of 15 and 16 (napkin.domain.layout.stage_layers).
H100_FP8 = (
    H100Run("llama3-70b", "25.11", 64, 128, 4, 8, 1, 5, 1602),
    H100Run("llama3-70b", "26.02", 64, 256, 4, 8, 1, 5, 1621),
    H100Run("llama3-70b", "26.02.01", 64, 256, 4, 8, 1, 5, 1639),
    H100Run("llama3-70b", "26.04", 64, 256, 4, 8, 1, 5, 1633),
    H100Run("llama3-70b", "26.04.01", 64, 256, 4, 8, 1, 5, 1664),
    H100Run("llama3.1-405b", "25.11", 1024, 512, 8, 8, 2, 8, 292),
    H100Run("llama3.1-405b", "26.02", 1024, 1536, 8, 8, 2, 8, 311),
    H100Run("llama3.1-405b", "26.04.01", 1024, 1536, 8, 8, 2, 8, 328),
    H100Run("llama3.1-405b", "26.06", 1024, 1536, 8, 8, 2, 8, 326),
)


def h100_options(run: H100Run) -> dict[str, Any]:
    """``napkin step``'s keywords for a Megatron-Bridge H100 run with the megatron-core stack (FlashAttention,
    causal mask, its fp8 recipe's cost): SP, ZeRO-1, fp8, no recomputation."""
    return {
        "stack": "megatron-core",
        "model": run.model,
        "gpus": run.gpus,
        "tensor_parallel": run.tensor,
        "pipeline_parallel": run.pipeline,
        "context_parallel": run.context,
        "interleave": run.interleave,
        "global_batch": run.batch,
        "seq": 8192,
        "cluster": "dgx-h100",
        "sequence_parallel": True,
        "sharding": "zero1",
        "recompute": "none",
        "dtype": "fp8",
    }


def h100_result(run: H100Run) -> Any:
    """napkin's step for a Megatron-Bridge H100 run (``h100_options``)."""
    from napkin import api

    return api.step(**h100_options(run))


def predict_h100(run: H100Run) -> float:
    """napkin's tokens/s per GPU for a Megatron-Bridge H100 run."""
    return float(h100_result(run).tokens_per_second) / run.gpus


def h100_errors() -> dict[str, list[float]]:
    """napkin / measured − 1 per model, in release order."""
    out: dict[str, list[float]] = {}
    for run in H100_FP8:
        out.setdefault(run.model, []).append(predict_h100(run) / run.tokens_per_gpu - 1)
    return out


def h100_markdown() -> str:
    lines = [
        "| model | release | GPUs | batch | TP | PP | CP | VP | measured tokens/s/GPU | napkin | error |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run in H100_FP8:
        got = predict_h100(run)
        lines.append(
            f"| {run.model} | {run.release} | {run.gpus:,} | {run.batch:,} | {run.tensor} | {run.pipeline} | "
            f"{run.context} | {run.interleave} | {run.tokens_per_gpu:,.0f} | {got:,.0f} | "
            f"{got / run.tokens_per_gpu - 1:+.1%} |"
        )
    return "\n".join(lines) + "\n"


class LayerRun(NamedTuple):
    """A row of Korthikanti Table 4: one transformer layer of the 22B model (TP 8, micro-batch 4, sequence
    2048), forward and backward milliseconds."""

    name: str
    sequence_parallel: bool
    recompute: Recompute
    forward_ms: float
    backward_ms: float


#: Table 4 of arXiv:2205.05198. Backward includes the recomputed forward where there is one.
TABLE_4 = (
    LayerRun("baseline, no recompute", False, Recompute.none, 7.7, 11.9),
    LayerRun("sequence parallelism", True, Recompute.none, 7.2, 11.8),
    LayerRun("baseline with recompute", False, Recompute.full, 7.7, 19.5),
    LayerRun("selective recompute", False, Recompute.selective, 7.7, 13.2),
    LayerRun("selective + sequence", True, Recompute.selective, 7.2, 13.1),
)


def layer_ms(run: LayerRun) -> tuple[float, float]:
    """napkin's forward and backward milliseconds for one 22B layer from ``StepModel.layer_passes``, split the
    way ``evaluate`` counts a layer's collectives: two in the forward, two in the backward and two in a
    recomputed forward — none hidden under a weight-gradient GEMM."""
    sm = StepModel(gpt(48, 6144, 64), SEQ, 4, selene(), stack=software("megatron-2022"))
    knobs = Knobs(
        tensor_parallel=8,
        data_parallel=1,
        micro_batch=4,
        sequence_parallel=run.sequence_parallel,
        recompute=run.recompute,
        sharding=Sharding.none,
    )
    forward, extra, collective, _, _ = sm.layer_passes(knobs)
    backward = 2 * forward + 2 * collective + (extra + 2 * collective if run.recompute is Recompute.full else extra)
    return (forward + 2 * collective) * 1e3, backward * 1e3


def table_4_markdown() -> str:
    lines = [
        "| 22B layer | forward: measured | napkin | error | backward: measured | napkin | error |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for run in TABLE_4:
        f, b = layer_ms(run)
        lines.append(
            f"| {run.name} | {run.forward_ms:g} ms | {f:.2f} ms | {f / run.forward_ms - 1:+.1%} | "
            f"{run.backward_ms:g} ms | {b:.2f} ms | {b / run.backward_ms - 1:+.1%} |"
        )
    return "\n".join(lines) + "\n"


def gpt(layers: int, hidden: int, heads: int) -> Model:
    """GPT as Megatron-LM builds it: biases, LayerNorm, GeLU, learned positions, tied embeddings, dropout."""
    return Model(
        layers=layers,
        hidden=hidden,
        heads=heads,
        vocab=VOCAB,
        context=SEQ,
        biases=True,
        learned_positions=True,
        dropout=True,
    )


def selene() -> Machine:
    cluster = find("dgx-a100").cluster
    return machine(cluster, resolve(cluster.device).profile)


def eq3_flops(row: Row | ZeroRow) -> float:
    """FLOPs per iteration with full recomputation, Narayanan eq. (3): 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))."""
    b, s, layers, h = row.batch, SEQ, row.layers, row.hidden
    return 96.0 * b * s * layers * h * h * (1 + s / (6 * h) + VOCAB / (16 * layers * h))


def software(name: str) -> StackKnobs:
    """A stack profile's values on Selene's A100s."""
    return stack(name).profile.knobs("a100-sxm-80gb")


def table_1_terms(row: Row, fused: bool | None = None) -> Terms:
    """napkin's step terms for a Table 1 row with the megatron-2021 stack (gradient accumulation unfused, the
    all-reduce after the flush), the torch-DDP rows' all-reduce overlapped; ``fused``: the accumulation fused
    instead."""
    sm = StepModel(
        gpt(row.layers, row.hidden, row.heads),
        SEQ,
        row.batch,
        selene(),
        overlap_grad_reduce=row.torch_ddp or None,
        gradient_accumulation_fusion=fused,
        stack=software("megatron-2021"),
    )
    data = row.gpus // (row.tensor * row.pipeline)
    knobs = Knobs(
        tensor_parallel=row.tensor,
        pipeline_parallel=row.pipeline,
        data_parallel=data,
        interleave=row.interleave,
        micro_batch=row.micro_batch,
        recompute=Recompute.full,
        sharding=Sharding.none,
    )
    return sm.evaluate(knobs)


def predict(row: Row) -> float:
    """napkin's teraFLOP/s per GPU for a Table 1 row: eq. (3) FLOPs / (GPUs × predicted step time)."""
    return eq3_flops(row) / (row.gpus * table_1_terms(row).step_seconds) / 1e12


def predict_zero3(row: ZeroRow) -> float:
    """napkin's teraFLOP/s per GPU for a ZeRO-3 row of Table 2 (full recomputation, plain data parallelism)."""
    sm = StepModel(gpt(row.layers, row.hidden, row.heads), SEQ, row.batch, selene(), stack=software("deepspeed"))
    knobs = Knobs(data_parallel=row.gpus, micro_batch=row.micro_batch, recompute=Recompute.full)
    return eq3_flops(row) / (row.gpus * sm.evaluate(knobs).step_seconds) / 1e12


#: Korthikanti §6.3: the 530B run with SP + selective recomputation at 8-way data parallelism, seconds per
#: iteration (one replica: 37.83 s).
DP8_530B: Final = 39.15


def predict_seconds(run: Run, selective: bool, data: int = 1, fp16: bool = False) -> float:
    """napkin's seconds per iteration for a Table 5 run (selective: with sequence parallelism) at ``data``-way
    data parallelism with the batch per replica kept, the all-reduce after the flush as in §6.3. ``fp16``: the
    run as fp16 instead, its gradients in fp16 and accumulated unfused."""
    sm = StepModel(
        gpt(run.layers, run.hidden, run.heads),
        SEQ,
        run.batch * data,
        selene(),
        precision=Precision.mixed if fp16 else Precision.mixed_fp32_grads,
        gradient_accumulation_fusion=False if fp16 else None,
        stack=software("megatron-2022"),
    )
    recompute = Recompute.selective if selective else Recompute.full
    knobs = Knobs(
        tensor_parallel=run.tensor,
        pipeline_parallel=run.pipeline,
        data_parallel=data,
        interleave=run.interleave,
        micro_batch=run.micro_batch,
        sequence_parallel=selective,
        recompute=recompute,
        sharding=Sharding.none,
    )
    return sm.evaluate(knobs).step_seconds


def table_1_errors() -> list[float]:
    return [predict(row) / row.teraflops - 1 for row in TABLE_1]


def table_5_errors(fp16: bool = False) -> list[float]:
    """Predicted / measured − 1 per run: full recomputation, then selective, for each model."""
    return [
        predict_seconds(run, sel, fp16=fp16) / (run.selective_seconds if sel else run.full_seconds) - 1
        for run in TABLE_5
        for sel in (False, True)
    ]


def table_2_zero3_ratios() -> list[float]:
    """napkin / measured per ZeRO-3 row."""
    return [predict_zero3(row) / row.teraflops for row in TABLE_2_ZERO3]


def _mean(errors: list[float]) -> float:
    return sum(abs(e) for e in errors) / len(errors)


def table_1_markdown() -> str:
    lines = [
        "| params | TP | PP | GPUs | batch | micro-batch | v | published TFLOP/s/GPU | napkin | error |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    errors = table_1_errors()
    for row, error in zip(TABLE_1, errors, strict=True):
        got = row.teraflops * (1 + error)
        lines.append(
            f"| {row.billions:g}B | {row.tensor} | {row.pipeline} | {row.gpus:,} | {row.batch:,} | "
            f"{row.micro_batch} | {row.interleave} | {row.teraflops:g} | {got:.1f} | {error:+.1%} |"
        )
    lines.append(f"| mean \\|error\\| | | | | | | | | | {_mean(errors):.1%} |")
    return "\n".join(lines) + "\n"


def table_5_markdown() -> str:
    lines = [
        "| model | TP | PP | GPUs | batch | v | full recompute: measured | napkin | error | SP + selective: "
        "measured | napkin | error |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    errors = table_5_errors()
    for i, run in enumerate(TABLE_5):
        full, sel = errors[2 * i], errors[2 * i + 1]
        lines.append(
            f"| {run.name} | {run.tensor} | {run.pipeline} | {run.gpus} | {run.batch} | {run.interleave} | "
            f"{run.full_seconds:g} s | {run.full_seconds * (1 + full):.2f} s | {full:+.1%} | "
            f"{run.selective_seconds:g} s | {run.selective_seconds * (1 + sel):.2f} s | {sel:+.1%} |"
        )
    lines.append(f"| mean \\|error\\| | | | | | | | | | | | {_mean(errors):.1%} |")
    return "\n".join(lines) + "\n"


def table_2_zero3_markdown() -> str:
    lines = [
        "| params | GPUs | batch | micro-batch | measured TFLOP/s/GPU | napkin | napkin / measured |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row, ratio in zip(TABLE_2_ZERO3, table_2_zero3_ratios(), strict=True):
        lines.append(
            f"| {row.billions:g}B | {row.gpus:,} | {row.batch:,} | {row.micro_batch} | {row.teraflops:g} | "
            f"{row.teraflops * ratio:.0f} | {ratio:.1f}× |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(table_1_markdown())
    print(table_5_markdown())
    print(table_4_markdown())
    print(table_2_zero3_markdown())
    print(h100_markdown(), end="")
