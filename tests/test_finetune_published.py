"""LoRA fine-tuning memory against published measurements (validation: nothing in napkin was fitted to them).

Source: QwenLM/Qwen README, "Profiling of Memory and Speed" (the Qwen-1.8B/7B/14B LoRA rows): one
A100-SXM4-80G, CUDA 11.8, PyTorch 2.0, FlashAttention 2, batch size 1, gradient accumulation 8, sequence
lengths 256 to 8192. The run is Qwen's finetune.py with --use_lora: rank 64 on every linear layer of the blocks
(c_attn, c_proj, w1, w2), bf16 base, gradient checkpointing, AdamW. The "LoRA" rows train no embedding or head.
The shapes are Qwen's config.json files (Qwen-7B: 32 layers, d 4096, 32 heads, F 11008 = intermediate_size / 2,
vocabulary 151,936, untied; biases on c_attn); napkin's parameter counts equal the published 1.84 B, 7.72 B and
14.17 B.

Tolerance: 10 % of the published figure. napkin reproduces the Qwen-7B and Qwen-14B rows (−7 % to +2 %) with
peft's fp32 adapters and the loss's backward counted (``LOSS_GRADIENT_BYTES``); Qwen-1.8B is 19-23 % low at
256-4096 tokens and is marked as a known miss: its shortfall (1.5-3.1 GB) is not a per-token term (it does not
grow with the sequence as activations would, and it is absent at 8192 tokens), and napkin leaves out what the
caption names (CUDA context, cuBLAS workspace, allocator caching), which weighs most on the smallest model. The
published figures do not say whether they are torch's allocated or reserved memory or nvidia-smi's.
"""

from __future__ import annotations

import pytest

import napkin

SEQS = (256, 512, 1024, 2048, 4096, 8192)
QWEN = {
    "qwen-1.8b": ({"layers": 24, "hidden": 2048, "heads": 16, "ffn": 5504, "vocab": 151936}, 1_836_828_672),
    "qwen-7b": ({"layers": 32, "hidden": 4096, "heads": 32, "ffn": 11008, "vocab": 151936}, 7_721_324_544),
    "qwen-14b": ({"layers": 40, "hidden": 5120, "heads": 40, "ffn": 13696, "vocab": 152064}, 14_167_290_880),
}
#: GB (1e9 B, as the README's "G") per sequence length in SEQS.
PUBLISHED = {
    "qwen-1.8b": (6.7, 7.4, 8.4, 11.0, 16.2, 21.8),
    "qwen-7b": (20.1, 20.4, 21.5, 23.8, 29.7, 36.6),
    "qwen-14b": (34.6, 35.1, 35.3, 37.4, 42.5, 55.2),
}
MISS = pytest.mark.xfail(
    strict=True, reason="Qwen-1.8B: napkin 19-23 % low, a 1.5-3.1 GB shortfall that is not per token (module doc)"
)
ROWS = [
    pytest.param(name, seq, gb, marks=MISS if name == "qwen-1.8b" and seq < 8192 else ())
    for name in QWEN
    for seq, gb in zip(SEQS, PUBLISHED[name], strict=True)
]


def qwen(name: str) -> napkin.Model:
    shape, _ = QWEN[name]
    return napkin.Model(**shape, mlp="swiglu", norm="rmsnorm", tied_embeddings=False, qkv_bias=True)


@pytest.mark.parametrize("name", sorted(QWEN))
def test_qwen_shapes_have_their_published_parameter_counts(name: str) -> None:
    assert qwen(name).params() == QWEN[name][1]


@pytest.mark.parametrize(("name", "seq", "published_gb"), ROWS)
def test_lora_memory_matches_qwens_published_profile(name: str, seq: int, published_gb: float) -> None:
    result = napkin.memory(
        model=qwen(name), finetune="lora", lora_rank=64, seq=seq, hardware="a100-80gb", recompute="full"
    )
    assert result.per_gpu_bytes == pytest.approx(published_gb * 1e9, rel=0.10)
