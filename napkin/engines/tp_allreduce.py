"""The tensor-parallel all-reduce as serving engines run it: a custom peer-to-peer kernel for small messages, NCCL
for large ones.

A decode step all-reduces b·d activations (16-bit) twice per layer (Shoeybi et al. 2019 §3): a few KB to a few MB,
where time is latency, not bandwidth. vLLM, SGLang and TensorRT-LLM do not send these through NCCL's ring; each
rank maps its peers' buffers (CUDA IPC) and reduces them itself (vLLM ``csrc/custom_all_reduce.cuh``, from which
SGLang's kernel is taken; TensorRT-LLM ``customAllReduceKernels.cu``, its ONESHOT and TWOSHOT strategies):

* one-shot (``cross_device_reduce_1stage``): a start barrier (one peer-to-peer flag write per peer), every rank
  reads the whole tensor from each of its n − 1 peers and sums, an end barrier: t = α₁ + (n − 1)·S / B;
* two-shot (``cross_device_reduce_2stage``): a reduce-scatter (each rank sums 1/n of the tensor from its peers),
  a barrier every block waits on, an all-gather of the n − 1 other parts: t = α₂ + 2(n − 1)/n · S / B;
* above ``CUSTOM_MAX_BYTES`` (8 MiB, the registered buffer), NCCL (``napkin.engines.comm``, ring/tree/NVLS).

vLLM v0.10.1 picks one-shot at 2 GPUs, and below 512 KiB at up to 4 GPUs or 256 KiB at up to 8; two-shot above;
only at 2, 4, 6 or 8 GPUs, and at more than 2 only where every pair of GPUs has a direct link (an NVLink switch,
AMD's Infinity Fabric mesh). Elsewhere (PCIe without peer links beyond a pair, another group size) NCCL.

B is the scale-up bandwidth per GPU per direction at the fabric's achieved efficiency (the cluster profile's,
sourced there). α₁ and α₂ are the kernels' fixed cost: launch inside a CUDA graph, the barriers' peer-to-peer flag
writes and spins. They are read off published microbenchmarks of these kernels (intercepts of time against size),
not fitted on serving rows:

* one-shot: 5.7–5.9 µs at 8 × H100 for 1–8 KB (sgl-project/sglang PR 2904, TensorRT-LLM's kernel); vLLM's
  ``ca_1stage`` at 4 and 6 × H100 extrapolates to 5–6 µs at 0 B (vllm-project/vllm PRs 24532 and 24111,
  ``benchmarks/kernels/benchmark_device_communicators.py``); 7 µs at 16 KiB on B300 (vllm PR 37756); on
  MI355X vLLM's kernel takes 6.3 µs at 24 KiB, 8 GPUs (vllm PR 39080). α₁ = 6 µs.
* two-shot: ``ca_2stage`` at 6 × H100 extrapolates to 12 µs at 0 B (vllm PR 24111: 15 µs at 0.5 MB, 17 µs at
  1 MB). α₂ = 12 µs.
"""

from __future__ import annotations

import math
from typing import Final, Literal

from napkin.systems.cluster import Fabric

KiB: Final = 1024
MiB: Final = 1024 * 1024
#: vLLM v0.10.1 csrc/custom_all_reduce.cuh CustomAllreduce::allreduce: one-shot below these sizes (bytes) at up to
#: this many GPUs (always at 2); two-shot above.
ONE_SHOT_BELOW: Final = ((2, math.inf), (4, 512 * KiB), (8, 256 * KiB))
#: vLLM v0.10.1 vllm/distributed/device_communicators/custom_all_reduce.py: max_size 8192 × 1024 bytes; larger
#: tensors go to NCCL. The group sizes its kernel is compiled for (_SUPPORTED_WORLD_SIZES).
CUSTOM_MAX_BYTES: Final = 8 * MiB
CUSTOM_SIZES: Final = (2, 4, 6, 8)
#: Fixed cost of one one-shot / two-shot custom all-reduce (module docstring: the microbenchmarks they come from).
ONE_SHOT_SECONDS: Final = 6e-6
TWO_SHOT_SECONDS: Final = 12e-6
SOURCE: Final = (
    "vLLM v0.10.1 csrc/custom_all_reduce.cuh (one-shot below 512/256 KiB at ≤ 4/≤ 8 GPUs, two-shot above, NCCL "
    "above 8 MiB); fixed cost 6 µs one-shot, 12 µs two-shot from its microbenchmarks (vllm PRs 24111, 24532, "
    "37756, 39080; sglang PR 2904)"
)


def custom_applies(n: int, fabric: Fabric) -> bool:
    """Whether the engines' custom kernel runs for a TP group of ``n`` on ``fabric`` (else NCCL)."""
    if n not in CUSTOM_SIZES:
        return False
    return n == 2 or (fabric.direct_links and n <= fabric.domain_size)


def one_shot(nbytes: float, n: int) -> bool:
    return any(n <= size and nbytes < below for size, below in ONE_SHOT_BELOW)


def custom_seconds(nbytes: float, n: int, fabric: Fabric) -> float:
    """One custom all-reduce of ``nbytes`` over ``n`` GPUs (below ``CUSTOM_MAX_BYTES``)."""
    if one_shot(nbytes, n):
        return ONE_SHOT_SECONDS + (n - 1) * nbytes / fabric.up_bandwidth
    return TWO_SHOT_SECONDS + 2.0 * (n - 1) / n * nbytes / fabric.up_bandwidth


def kernel(nbytes: float, n: int, fabric: Fabric, *, custom: bool) -> Literal["one-shot", "two-shot", "NCCL"]:
    """Which all-reduce runs: the engine's custom kernel (one- or two-shot) where it applies and the tensor fits
    its buffer, else NCCL."""
    if custom and nbytes <= CUSTOM_MAX_BYTES and custom_applies(n, fabric):
        return "one-shot" if one_shot(nbytes, n) else "two-shot"
    return "NCCL"


def allreduce_seconds(nbytes: float, n: int, fabric: Fabric, *, custom: bool, efficiency: float = 1.0) -> float:
    """One TP all-reduce as the engine runs it (``kernel``): the custom kernel's time, else NCCL's (at
    ``efficiency`` of the collective model's speed)."""
    if n <= 1:
        return 0.0
    if kernel(nbytes, n, fabric, custom=custom) != "NCCL":
        return custom_seconds(nbytes, n, fabric)
    from napkin.engines.comm import collective_seconds

    return collective_seconds("all-reduce", nbytes, n, fabric) / efficiency


def allreduce_pieces(
    token_bytes: float, n: int, fabric: Fabric, *, custom: bool, efficiency: float = 1.0, far: int = 8192
) -> tuple[tuple[float, float, float], ...]:
    """One all-reduce of T tokens × ``token_bytes`` as pieces (tokens below which, seconds at 0, seconds per
    token), the last piece open-ended (below ``inf``): exact for the custom kernel's two regimes, NCCL's curve
    taken as the line through its two ends (the first size past the custom buffer, and ``far`` tokens)."""

    def at(tokens: float) -> float:
        return allreduce_seconds(tokens * token_bytes, n, fabric, custom=custom, efficiency=efficiency)

    pieces: list[tuple[float, float, float]] = []
    start = 1.0
    if custom and custom_applies(n, fabric):
        top = CUSTOM_MAX_BYTES / token_bytes * (1 + 1e-12)  # the buffer holds exactly 8 MiB
        below = next(b for size, b in ONE_SHOT_BELOW if n <= size)
        for upper, alpha, share in (
            (min(below / token_bytes, top), ONE_SHOT_SECONDS, n - 1.0),
            (top, TWO_SHOT_SECONDS, 2.0 * (n - 1) / n),
        ):
            if upper > start:
                pieces.append((upper, alpha, share * token_bytes / fabric.up_bandwidth))
                start = upper
        start = max(start, top)
    end = max(float(far), 2.0 * start)
    slope = (at(end) - at(start)) / (end - start)
    pieces.append((math.inf, at(start) - slope * start, slope))
    return tuple(pieces)
