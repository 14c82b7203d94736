"""Narayanan et al. 2021 (arXiv:2104.04473) Table 1: the weak-scaling runs of GPT models on Selene
(DGX A100 80GB: NVLink 3 in the node, 8 × HDR 200 Gbit/s InfiniBand between nodes), and what
``napkin step`` predicts for each with one unchanged model of the hardware.

The paper's runs use full activation recomputation, sequence length 2048 and vocabulary 51,200 (§5.1);
its achieved teraFLOP/s per GPU count the FLOPs of eq. (3), recomputation included. Table 1 does not give
the micro-batch size or the schedule: napkin predicts every row with micro-batch 1 and the plain 1F1B
schedule (no interleaving), Megatron-LM's defaults, and plain data parallelism (no ZeRO; 2021 Megatron).

Print the README table with ``python -m tests.narayanan``.
"""

from __future__ import annotations

from typing import NamedTuple

from napkin.choices import Recompute, Sharding
from napkin.cluster import find
from napkin.model import Model
from napkin.profiles import resolve
from napkin.step_time import Knobs, StepModel, machine

SEQ, VOCAB = 2048, 51200


class Row(NamedTuple):
    billions: float  # parameters, as printed
    heads: int
    hidden: int
    layers: int
    tensor: int
    pipeline: int
    gpus: int
    batch: int
    teraflops: float  # achieved teraFLOP/s per GPU, as printed


#: Table 1 of arXiv:2104.04473, row by row.
TABLE_1 = (
    Row(1.7, 24, 2304, 24, 1, 1, 32, 512, 137),
    Row(3.6, 32, 3072, 30, 2, 1, 64, 512, 138),
    Row(7.5, 32, 4096, 36, 4, 1, 128, 512, 142),
    Row(18.4, 48, 6144, 40, 8, 1, 256, 1024, 135),
    Row(39.1, 64, 8192, 48, 8, 2, 512, 1536, 138),
    Row(76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140),
    Row(145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148),
    Row(310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155),
    Row(529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163),
    Row(1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163),
)


def model(row: Row) -> Model:
    """GPT as Megatron-LM builds it: biases, LayerNorm, GeLU, learned positions, tied embeddings, dropout."""
    return Model(layers=row.layers, hidden=row.hidden, heads=row.heads, vocab=VOCAB, context=SEQ, biases=True,
                 learned_positions=True, dropout=True)  # fmt: skip


def eq3_flops(row: Row) -> float:
    """FLOPs per iteration with full recomputation, Narayanan eq. (3): 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))."""
    b, s, layers, h = row.batch, SEQ, row.layers, row.hidden
    return 96.0 * b * s * layers * h * h * (1 + s / (6 * h) + VOCAB / (16 * layers * h))


def predict(row: Row) -> float:
    """napkin's teraFLOP/s per GPU for the row: eq. (3) FLOPs / (GPUs × predicted step time)."""
    cluster = find("dgx-a100").cluster
    hw = machine(cluster, resolve(cluster.device).profile)
    sm = StepModel(model(row), SEQ, row.batch, hw)
    data = row.gpus // (row.tensor * row.pipeline)
    knobs = Knobs(row.tensor, row.pipeline, data, 1, 1, 1, 1, False, Recompute.full, Sharding.none)
    return eq3_flops(row) / (row.gpus * sm.evaluate(knobs)[0]) / 1e12


def markdown_table() -> str:
    lines = [
        "| params | TP | PP | GPUs | batch | published TFLOP/s/GPU | napkin | error |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    errors = []
    for row in TABLE_1:
        got = predict(row)
        errors.append(got / row.teraflops - 1)
        lines.append(f"| {row.billions:g}B | {row.tensor} | {row.pipeline} | {row.gpus:,} | {row.batch:,} | "
                     f"{row.teraflops:g} | {got:.1f} | {errors[-1]:+.1%} |")  # fmt: skip
    mean = sum(abs(e) for e in errors) / len(errors)
    lines.append(f"| mean \\|error\\| | | | | | | | {mean:.1%} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
