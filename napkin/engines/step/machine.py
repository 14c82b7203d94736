"""The device and its fabric as plain floats (``Machine``), and the efficiency tables the step model reads."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    pass

from napkin import sources
from napkin.domain.choices import Sharding
from napkin.engines.memory import (
    capacity,
)
from napkin.errors import UsageError
from napkin.systems.cluster import Cluster, Fabric
from napkin.systems.profiles import HardwareProfile
from napkin.systems.stack_knobs import NVFP4_ELEMENT_BYTES

#: Maximum Achievable Matmul FLOPS (bf16, dense), measured by mamf-finder.py (stas00/ml-engineering,
#: compute/accelerator/README.md, "Maximum Achievable Matmul FLOPS comparison table", BF16 v2 table; mean of
#: 100 iterations after 50 warm-ups at the best shape found). The Blackwell rows, as the table has them @ 744d01e1:
#: "NVIDIA B200 SXM" 1745.0 (1792x16128x3072, torch 2.7.1+cu128; added in 176443c3, 2025-07-07) and
#: "NVIDIA GB200 SXM" 1822.0 (4096x9728x2048, torch 2.10.0.dev20250916+cu130; added in 68cd2e59, 2025-09-17),
#: neither row stating a power limit. The GB200 measures 4 % over the B200, not the datasheets' 11 %. The H100
#: SXM row's note: "H200 is the same"; MI355X 1565.0 (12288x8192x8192, torch 2.8.0+rocm7.0.2); Gaudi 3 1243.0
#: (16384x4096x768, PT_HPU_LAZY_MODE=1).
MAMF_BF16: Final[dict[str, float]] = {
    "a100-sxm-80gb": 271.2e12,
    "a100-sxm-40gb": 271.2e12,
    "a100-pcie-80gb": 252.9e12,
    "h100-sxm": 794.5e12,
    "h200-sxm": 794.5e12,
    "mi300x": 668.4e12,
    "mi325x": 784.9e12,
    "mi355x": 1565.0e12,
    "gaudi3": 1243.0e12,
    "b200": 1745.0e12,
    "gb200": 1822.0e12,
}
#: Devices without a measurement: the H100 SXM's MAMF efficiency (794.5 / 989 ≈ 0.80), same source.
DEFAULT_MATMUL_EFFICIENCY: Final = 0.80
#: Other number formats reach the fraction of their own peak that the device's bf16 matmuls reach of theirs: the
#: same table's FP8 rows (@ 744d01e1) measure B200 SXM 3432.5 of 4500 (76.3 %) and GB200 SXM 3615.6 of 5000
#: (72.3 %) against 77.6 % and 72.9 % in BF16. Its H100 SXM FP8 row (1402.6, 70.9 % against 80.3 %) is timed with
#: torch._scaled_mm's default split accumulation (mamf-finder.py @ 744d01e1 passes no use_fast_accum), which
#: Hopper pays and Transformer Engine uses only in its backward GEMMs (_2X_ACC_FPROP = False, _2X_ACC_DGRAD =
#: _2X_ACC_WGRAD = True, transformer_engine/pytorch/module/base.py @ d0067d0da); megatron-core's fitted fp8 cost
#: carries that on the H100 runs it is fitted to.
SAME_FRACTION: Final = (
    "the device's bf16 MAMF fraction of its bf16 peak, applied to this format's peak (stas00/ml-engineering "
    "compute/accelerator/README.md @ 744d01e1, FP8 table: B200 76.3 %, GB200 72.3 % of the FP8 peak against "
    "77.6 %, 72.9 % in BF16)"
)
#: Fraction of HBM bandwidth large memory-bound kernels reach: Calculon's A100/H100 system files
#: (calculon-ai/calculon systems/a100_80g.json, mem1 MB_efficiency: 0.90 for ≥ 100 MB, 0.75 for ≥ 10 MB,
#: 0.6 for ≥ 1 MB, 0.3 below), applied per kernel by its size.
MEMORY_EFFICIENCY: Final = ((100e6, 0.90), (10e6, 0.75), (1e6, 0.60), (0.0, 0.30))
#: Small matmuls reach less of R: Calculon's efficiency by the FLOPs of one matmul call (systems/a100_80g.json
#: and h100_80g_nvl8.json matrix gflops_efficiency: 0.95 at ≥ 128 GFLOP, 0.9 at ≥ 16, 0.6 at ≥ 1, 0.1 below),
#: divided by its top entry so that the largest matmuls run at R.
SIZE_EFFICIENCY: Final = ((128e9, 0.95 / 0.95), (16e9, 0.9 / 0.95), (1e9, 0.6 / 0.95), (0.0, 0.1 / 0.95))
#: Output tile of a tensor-core GEMM: cuBLAS pads m and n to whole tiles (NVIDIA Deep Learning Performance
#: Guide, "Matrix Multiplication Background": tile quantization). 128×128 is its largest common tile; a smaller
#: dimension gets the smallest tile that holds it, down to 16 (the m of a tensor-core MMA instruction).
TILE: Final = 128
#: The achievable rate Calculon's size table was measured at: A100 SXM bf16 (MAMF_BF16 above).
SIZE_REFERENCE: Final = 271.2e12
SMALLEST_TILE: Final = 16


def padded(dim: float) -> float:
    """``dim`` rounded up to whole tiles of the size cuBLAS would pick for it."""
    tile = SMALLEST_TILE
    while tile < dim and tile < TILE:
        tile *= 2
    return math.ceil(dim / tile) * tile


ACT_BYTES: Final = 2.0  # activations, TP/PP/EP payloads: 16-bit
#: FlashAttention's share of the 16-bit dense peak, forward and backward, and the backward's FLOPs over the
#: forward's (sources.FLASH_EFFICIENCY).
FLASH_FORWARD: Final = 0.75
FLASH_BACKWARD: Final = 561 / 989.5
FLASH_BACKWARD_FLOPS: Final = 2.5


def by_size(table: tuple[tuple[float, float], ...], size: float) -> float:
    for threshold, eff in table:
        if size >= threshold:
            return eff
    return table[-1][1]


def memory_efficiency(nbytes: float) -> float:
    return by_size(MEMORY_EFFICIENCY, nbytes)


@dataclass(frozen=True, slots=True)
class Machine:
    """A device and its fabric as plain floats: what the hot path needs."""

    name: str
    cluster: str
    peak: float  # datasheet dense peak, FLOP/s (MFU's denominator)
    rate: float  # achievable matmul FLOP/s (R)
    rate_source: str
    hbm: float  # bytes/s
    capacity: float  # bytes a fit check may use: ``memory.capacity``, the one rule of every command
    fabric: Fabric
    rate16: float  # R of the work kept in 16 bits when ``rate`` is an 8-bit-or-less rate: attention, output layer
    dtype: str  # the number format of ``peak`` and ``rate``
    peak16: float  # 16-bit dense peak (FlashAttention's efficiency is quoted against it)
    profile: HardwareProfile  # where all of this came from: results report its memory (never a lookup by name)
    rate8: float = 0.0  # R of the device's 8-bit format under a narrower one (0: ``rate``): ``RECIPE_AT_8_BIT``


#: Number formats whose matmuls Transformer Engine runs only in the transformer blocks' linear layers
#: (sources.TE_FP8_SCOPE): the attention core and the output layer stay 16-bit. (fp6 and int8 train nowhere:
#: ``check_training_dtype`` refuses them before a machine is built.)
LOW_PRECISION: Final = frozenset({"fp8", "fp4"})
#: Formats narrower than 8 bits: their recipe's own work (``RECIPE_AT_8_BIT``) is timed at the 8-bit rate.
NARROWER_THAN_8_BIT: Final = frozenset({"fp4"})
#: A low-precision recipe's work beyond its GEMMs (stack ``fp8.overhead``: amax passes, casts, scale updates) is
#: per-element HBM work, not tensor-core math: under NVFP4 Transformer Engine computes the input's amax in one pass
#: (nvte_compute_amax_with_config, or nvte_hadamard_transform_amax for the column-wise copy's post-RHT amax), then
#: quantizes row- and column-wise from the 16-bit input (NVFP4Quantizer::quantize_impl,
#: transformer_engine/pytorch/csrc/quantizer.cpp @ d0067d0da), the same passes as FP8 current scaling's, whose
#: cost does not halve when the GEMM's rate doubles. So the fitted share is a share of the GEMM's math at the
#: device's 8-bit rate: (R_format / R_8bit) × ``fp8.overhead`` of the math at R_format.
RECIPE_AT_8_BIT: Final = (
    "under a format narrower than 8 bits, the recipe's work beyond the GEMMs (fp8.overhead) is a share of the "
    "GEMM's math at the device's 8-bit rate: its amax and quantize passes are HBM passes over the 16-bit input "
    "(NVFP4Quantizer::quantize_impl, NVIDIA/TransformerEngine transformer_engine/pytorch/csrc/quantizer.cpp @ "
    "d0067d0da), not tensor-core math; NVFP4's cast writes the row- and column-wise copies, each 0.5625 B an "
    "element, both quantized from the 16-bit input (NVFP4BlockScaling, transformer_engine/common/recipe/__init__.py "
    "@ d0067d0da)"
)
#: Bytes per element a low-precision GEMM input's cast writes (8-bit formats: one copy, 1 B; Blackwell's fp8
#: GEMMs take it in either layout, memory.fp8_weight_bytes_devices): under NVFP4 the row-wise copy (fprop, dgrad)
#: and the column-wise one (wgrad, after the random Hadamard transform) are both quantized from the 16-bit input
#: (NVFP4BlockScaling, transformer_engine/common/recipe/__init__.py @ d0067d0da: "both versions are computed from
#: the high precision input"), each 4 bits and one E4M3 scale per 16 elements (NVFP4_ELEMENT_BYTES).
CAST_WRITTEN: Final = {"fp4": 2 * NVFP4_ELEMENT_BYTES}
SHARDED_PARAMS: Final = frozenset({Sharding.zero3, Sharding.fsdp, Sharding.hsdp})


#: The number formats training runs its matmuls in: fp32 (tf32 on tensor cores, PyTorch's allow_tf32), bf16 and
#: fp16 (Megatron-Core's --bf16, --fp16), fp8 and fp4 (Transformer Engine's recipes, Float8 … NVFP4BlockScaling,
#: transformer_engine/common/recipe/__init__.py, whose memory napkin models). No stack trains in fp6, int8 or fp64:
#: their peaks serve inference and HPC, and training at them would be predicted at a peak no recipe reaches.
TRAINING_DTYPES: Final = ("fp32", "tf32", "bf16", "fp16", "fp8", "fp4")


def check_training_dtype(dtype: str) -> None:
    """A UsageError naming ``dtype`` unless training runs in it (``TRAINING_DTYPES``)."""
    if str(dtype) not in TRAINING_DTYPES:
        raise UsageError(
            f"dtype: {dtype} is not a format training runs; training takes {', '.join(TRAINING_DTYPES[:-1])} or "
            f"{TRAINING_DTYPES[-1]} (Megatron-Core's and Transformer Engine's recipes)",
            field="dtype",
        )


def _bf16_rate(hardware: HardwareProfile) -> tuple[float, str] | None:
    """The device's bf16 rate and whence, for another format's share of its peak: a saved ``bench matmul`` bf16
    measurement, else the published bf16 MAMF (None: neither, or no bf16 peak)."""
    if not hardware.peak_if_known("bf16"):
        return None
    measured = hardware.measured_for("bf16")
    if measured is not None:
        return measured.flops_per_second, f"bf16 measured {measured.date} (bench matmul)"
    if hardware.name in MAMF_BF16:
        return MAMF_BF16[hardware.name], "bf16 MAMF"
    return None


def machine(cluster: Cluster, hardware: HardwareProfile, dtype: str = "bf16") -> Machine:
    """R from a saved ``bench matmul`` measurement, else the published bf16 MAMF (another format: the fraction of
    the bf16 peak it reaches, times that format's peak, ``SAME_FRACTION``), else 80 % of the peak; with an
    8-bit-or-less ``dtype``, the attention core and the output layer at the bf16 R. Training formats only
    (``check_training_dtype``)."""
    check_training_dtype(dtype)
    peak = hardware.peak(dtype)
    measured = hardware.measured_for(dtype)
    if measured is not None:
        rate, source = measured.flops_per_second, f"measured {measured.date} on {measured.device} (bench matmul)"
    elif dtype == "bf16" and hardware.name in MAMF_BF16:
        rate, source = MAMF_BF16[hardware.name], sources.MAMF
    elif (bf16 := _bf16_rate(hardware)) is not None:
        fraction = bf16[0] / hardware.peak("bf16")
        rate, source = fraction * peak, f"{fraction:.3f} × peak ({bf16[1]}): {SAME_FRACTION}"
    else:
        rate, source = DEFAULT_MATMUL_EFFICIENCY * peak, f"{DEFAULT_MATMUL_EFFICIENCY:g} × peak ({sources.MAMF}, H100)"
    rate = min(rate, peak)
    rate16 = rate
    if dtype in LOW_PRECISION and hardware.peak_if_known("bf16"):
        rate16 = min(rate, machine(cluster, hardware, "bf16").rate)
    peak16 = hardware.peak_if_known("bf16") or peak
    rate8 = 0.0
    if dtype in NARROWER_THAN_8_BIT and hardware.peak_if_known("fp8"):
        rate8 = min(rate, machine(cluster, hardware, "fp8").rate)
    return Machine(
        hardware.name,
        cluster.name,
        peak,
        rate,
        source,
        hardware.memory_bandwidth,
        capacity(hardware)[0],
        cluster.fabric(),
        rate16,
        dtype,
        peak16,
        hardware,
        rate8,
    )
