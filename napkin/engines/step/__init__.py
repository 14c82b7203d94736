"""Step time: how long one optimizer step takes for a model, a workload, a layout and a cluster, and the
MFU that follows — predicted instead of assumed.

Pure functions; no printing, no files. The hot path (``StepModel.evaluate``) works on plain floats so the
planner (``napkin.engines.planner``) can score thousands of layouts a second; ``step()`` wraps it in a ``StepResult``
with the derivation. One model of the hardware, the same for every model and layout:

* **Matmuls**: time = FLOPs / (R·η_size·q) + bytes / (BW_HBM·η_mem). R is the device's achievable matmul
  rate (a saved ``napkin bench matmul --save`` measurement, else the published Maximum Achievable Matmul
  FLOPS, in bf16 or, for another format, the same fraction of its peak, else 80 % of the datasheet peak),
  η_size Calculon's efficiency by the size of the call, BW_HBM the HBM bandwidth, q the tile-quantization
  efficiency of the output (m and n padded to whole tiles of 128, or of the smallest power of two from 16 that
  holds a smaller dimension). The math and
  the memory traffic of a kernel are added, not overlapped: Calculon's ``no_overlap`` processing mode, the
  one its A100 and H100 system files use and the one its validation against Megatron-LM's measured
  iteration times (Korthikanti et al. 2022 Table 5) was run with. A pure roofline (the max of the two)
  under-predicts those iteration times by 8-17 %.
* **Memory-bound work** (norms, softmax, dropout, activation functions, residual adds, cross-entropy, the
  optimizer step) moves its bytes at η_mem of the HBM bandwidth.
* **Gradient accumulation**: fused into the weight-gradient GEMMs (Megatron-LM's default since 2022), so it
  costs nothing beyond them; without fusion (PyTorch autograd, Megatron-LM in 2021) every micro-batch after
  the first reads the stored and the new gradients and writes the sum, at η_mem of the HBM bandwidth.
* **Tensor-parallel** all-reduces (or reduce-scatter + all-gather with sequence parallelism): two per layer
  per forward, two per backward, two more per recomputed forward, on the scale-up link, not overlapped.
* **Pipeline**: the 1F1B bubble is (p − 1)/v micro-batches of the stage's own time — its compute, its TP
  collectives and its sends. Activations cross stages with Megatron's scatter/gather: each TP rank sends
  1/t of the tensor, and the receiving stage all-gathers it over the scale-up link; not overlapped.
* **Data parallel**: gradient all-reduce (reduce-scatter + all-gather for ZeRO-1/2) overlapped with the
  backward pass of the last micro-batch (``overlap_grad_reduce``, Megatron-LM's ``--overlap-grad-reduce``;
  without it the whole collective is exposed, as in Megatron-LM before 2023); ZeRO-3 gathers parameters and
  reduces gradients every micro-batch, overlapped with that micro-batch's compute.
* **Expert parallel**: all-to-all dispatch and combine per MoE layer of each TP rank's share of the tokens,
  then an all-gather (reduce-scatter) over TP, not overlapped. **Context parallel**:
  the keys and values gathered over the CP group, overlapped with the attention they feed.

Collective times come from ``napkin.engines.comm`` (α–β with NCCL's algorithms over the cluster's two fabrics).

The package: ``machine`` (the device as plain floats, its efficiency tables), ``knobs`` (one layout as numbers
and the named results of the hot path), ``memory`` (memory per GPU, memoised), ``model`` (``StepModel``, the hot
path), ``result`` (``StepResult`` and its derivation), ``checks`` (a layout checked against the model, the batch
and the stack). The names below are re-exported here.
"""

from napkin.engines.memory import COMPONENTS
from napkin.engines.step.checks import check_knobs, offered_sharding, offered_with_pipeline, own_name
from napkin.engines.step.knobs import BREAKDOWN, Knobs, LayerPasses, LayerTimes, Pace, Terms, pipeline_bubble
from napkin.engines.step.machine import Machine, machine
from napkin.engines.step.model import StepModel
from napkin.engines.step.region import outside_validation
from napkin.engines.step.result import StepResult, build_result

__all__ = [
    "BREAKDOWN",
    "COMPONENTS",
    "Knobs",
    "LayerPasses",
    "LayerTimes",
    "Machine",
    "Pace",
    "StepModel",
    "StepResult",
    "Terms",
    "build_result",
    "check_knobs",
    "machine",
    "offered_sharding",
    "offered_with_pipeline",
    "outside_validation",
    "own_name",
    "pipeline_bubble",
]
