"""Number formats of served weights and KV caches: bytes per weight (with the shared scales of quantised
checkpoints), bytes per cached element, the matmul dtype a format runs, and the weight bytes a decode step reads
(MoE: only the experts some token picked)."""

from __future__ import annotations

from enum import StrEnum

from napkin.domain.model import Model
from napkin.systems.profiles import HardwareProfile

#: Weight-only int8/int4 checkpoints (GPTQ, AWQ) store one fp16 scale per group of 128 weights.
GROUP_SIZE = 128
SCALE_BYTES = 2.0
DEFAULT_EFFICIENCY = 0.5


class WeightFormat(StrEnum):
    bf16 = "bf16"
    fp16 = "fp16"
    fp8 = "fp8"  # W8A8 (fp8 matmuls)
    int8 = "int8"  # weight-only, dequantised to bf16 for the matmul (W8A16)
    int4 = "int4"  # weight-only (W4A16: GPTQ, AWQ)
    nvfp4 = "nvfp4"  # E2M1 + one fp8 (E4M3) scale per 16; fp4 matmuls where the device has them
    mxfp4 = "mxfp4"  # E2M1 + one 8-bit power-of-two scale per 32 (OCP MX v1.0)


class KvDtype(StrEnum):
    bf16 = "bf16"
    fp16 = "fp16"
    fp8 = "fp8"
    int8 = "int8"  # + one fp16 scale per cached head vector
    fp4 = "fp4"  # NVFP4: + one fp8 scale per 16 elements
    fp32 = "fp32"


#: Bytes of one cached element, before scales.
KV_BYTES = {
    KvDtype.bf16: 2.0,
    KvDtype.fp16: 2.0,
    KvDtype.fp8: 1.0,
    KvDtype.int8: 1.0,
    KvDtype.fp4: 0.5,
    KvDtype.fp32: 4.0,
}
_ELEMENT = {
    WeightFormat.bf16: 2.0,
    WeightFormat.fp16: 2.0,
    WeightFormat.fp8: 1.0,
    WeightFormat.int8: 1.0,
    WeightFormat.int4: 0.5,
    WeightFormat.nvfp4: 0.5,
    WeightFormat.mxfp4: 0.5,
}
#: Elements per shared scale and the scale's bytes: NVFP4 (NVIDIA, Blackwell: fp8 E4M3 per 16) and MXFP4
#: (OCP Microscaling Formats spec v1.0 §5.2: E8M0 per 32).
_BLOCK_SCALES = {WeightFormat.nvfp4: (16, 1.0), WeightFormat.mxfp4: (32, 1.0)}


def weight_bytes_per_param(fmt: WeightFormat, group: int = GROUP_SIZE) -> float:
    """Bytes per quantised weight: the element plus its share of a scale (int8/int4 weight-only: one fp16 scale
    per ``group``; NVFP4: one fp8 per 16; MXFP4: one 8-bit exponent per 32)."""
    if fmt in (WeightFormat.int8, WeightFormat.int4):
        return _ELEMENT[fmt] + SCALE_BYTES / group
    if fmt in _BLOCK_SCALES:
        size, scale = _BLOCK_SCALES[fmt]
        return _ELEMENT[fmt] + scale / size
    return _ELEMENT[fmt]


def kv_element_bytes(kv: KvDtype, vector: int) -> float:
    """Bytes per cached element: int8 adds one fp16 scale per head vector of ``vector`` elements; fp4 (NVFP4)
    one fp8 scale per 16 elements."""
    if kv is KvDtype.int8:
        return KV_BYTES[kv] + SCALE_BYTES / vector
    if kv is KvDtype.fp4:
        return KV_BYTES[kv] + 1.0 / 16
    return KV_BYTES[kv]


def compute_dtype(fmt: WeightFormat, hardware: HardwareProfile | None = None) -> str:
    """The matmul dtype: fp8 checkpoints run fp8 matmuls; fp4 ones fp4 where ``hardware`` has an fp4 peak
    (Blackwell), else they are dequantised to bf16 like weight-only int8/int4 (W8A16, W4A16)."""
    want = {
        WeightFormat.fp16: "fp16",
        WeightFormat.fp8: "fp8",
        WeightFormat.nvfp4: "fp4",
        WeightFormat.mxfp4: "fp4",
    }.get(fmt, "bf16")
    if want == "fp4" and (hardware is None or hardware.peak_if_known("fp4") is None):
        return "bf16"
    return want


def weights_bytes(model: Model, fmt: WeightFormat, active: bool = False, group: int = GROUP_SIZE) -> float:
    """Transformer-block weights at ``fmt``; embeddings, LM head and final norm stay 16-bit (as GPTQ/AWQ/fp8
    checkpoints keep them). ``active``: only the parameters one token uses (MoE top-k)."""
    blocks = model.block_params(active=active)
    rest = model.params() - model.block_params(active=False)
    return blocks * weight_bytes_per_param(fmt, group) + rest * 2.0


def experts_touched(model: Model, batch: int) -> float:
    """Distinct routed experts a decode step of ``batch`` tokens reads, under uniform routing:
    E·(1 − (1 − k/E)^b) (the expectation of a coupon-collector draw; 1 token → k experts)."""
    if not model.is_moe:
        return 0.0
    e, k = model.experts, model.top_k
    return e * (1 - (1 - k / e) ** batch)


def weights_read_bytes(model: Model, fmt: WeightFormat, batch: int, group: int = GROUP_SIZE) -> float:
    """Weight bytes one decode step of ``batch`` sequences reads: everything but the untouched experts."""
    total = weights_bytes(model, fmt, group=group)
    if not model.is_moe:
        return total
    untouched = model.experts - experts_touched(model, batch)
    return total - model.moe_layers * untouched * model.mlp_params(model.d_expert) * weight_bytes_per_param(fmt, group)
