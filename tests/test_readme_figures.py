"""The README's example figures against independent references: published measurements, datasheets and the
papers' formulas worked by hand here, never napkin's own output.

``tests/test_readme.py`` proves the README shows what napkin prints; this file proves what it prints is right.
Each check reads the figure out of the README (so a wrong README fails too) and compares it with a value
computed below from literal, cited constants, to the precision the README prints it.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
BLOCK = re.compile(r"```console\n\$ (napkin [^\n]*)\n(.*?)```", re.DOTALL)
OUTPUTS = {m.group(1): m.group(2) for m in BLOCK.finditer(README)}

#: NVIDIA H100 Tensor Core GPU datasheet (SXM): bf16 dense 989.5 TFLOP/s (1,979 with 2:4 sparsity), 700 W, 80 GB;
#: what an H100 80GB HBM3 reports to torch (torch.cuda.get_device_properties().total_memory): 85,520,809,984 B.
H100_BF16, H100_WATTS, H100_GB, H100_TORCH = 989.5e12, 700.0, 80e9, 85_520_809_984
H100_HBM = 3.35e12  # B/s, same datasheet
A100_BF16 = 312e12  # NVIDIA A100 datasheet, bf16 dense
TPU_V4_BF16 = 275e12  # Google Cloud TPU v4 documentation; PaLM §4
DAY = 86_400.0


def output(command_start: str) -> str:
    """The output block of the README example whose command starts with ``command_start``."""
    found = [text for command, text in OUTPUTS.items() if command.startswith(command_start)]
    assert len(found) == 1, (command_start, list(OUTPUTS))
    return found[0]


def figure(text: str, label: str, pattern: str = r"([\d,.]+)") -> float:
    """The first number after ``label`` on its line of ``text``."""
    match = re.search(re.escape(label) + r"\s+[^\n]*?" + pattern, text)
    assert match is not None, (label, text)
    return float(match.group(1).replace(",", ""))


def shown(value: float, printed: float) -> bool:
    """``printed`` is ``value`` rounded to the digits it shows."""
    text = f"{printed}"
    decimals = len(text.split(".")[1]) if "." in text and not text.endswith(".0") else 0
    return abs(value - printed) <= 0.5 * 10**-decimals * (1 + 1e-9) or math.isclose(value, printed, rel_tol=5e-4)


def test_70b_on_1024_h100_is_6nd_over_the_dense_peak() -> None:
    """Kaplan et al. 2020 §2.1: C = 6·N·D; t = C / (G × peak × MFU)."""
    text = output("napkin train-time --params 70e9 --tokens 15e12 --gpus 1024")
    flops = 6 * 70e9 * 15e12
    seconds = flops / (1024 * H100_BF16 * 0.5)
    assert shown(seconds / DAY, figure(text, "time", r"= ([\d.]+) days"))
    assert shown(1024 * seconds / 3600, figure(text, "GPU-hours"))
    unit = re.search(r"energy +[\d.,]+ ([MG])Wh", text)
    assert unit is not None, text
    watt_hours = 1024 * seconds / 3600 * H100_WATTS
    assert shown(watt_hours / (1e6 if unit.group(1) == "M" else 1e9), figure(text, "energy"))
    assert figure(text, "training FLOPs", r"([\d.]+)e24") * 1e24 == pytest.approx(flops, rel=5e-3)


def test_gpus_for_90_days_round_up() -> None:
    text = output("napkin train-time --params 70B --tokens 15T --days 90")
    needed = 6 * 70e9 * 15e12 / (0.35 * H100_BF16 * 90 * DAY)
    assert figure(text, "GPUs") == math.ceil(needed)


def test_largest_model_on_8_h100_is_memory_over_16_bytes() -> None:
    """Adam in fp32: 4 (weights) + 4 (gradients) + 8 (two moments) = 16 B per parameter (ZeRO §3.1)."""
    text = output("napkin max-model --gpus 8 --optimizer adamw")
    assert shown(8 * H100_TORCH / 16 / 1e9, figure(text, "largest model"))
    assert shown(8 * H100_GB / 16 / 1e9, figure(text, "largest model", r"\(([\d.]+) B at the datasheet"))


def test_zero2_example_is_the_zero_papers_figure() -> None:
    """Rajbhandari et al. 2020 Fig. 1: Ψ = 7.5B, N_d = 64, K = 12: ZeRO-2 holds 2Ψ + (2 + K)Ψ/N_d = 16.6 GB."""
    text = output("napkin memory --params 7.5B --gpus 64")
    assert figure(text, "total per GPU") == 16.6


def test_gpt3_first_stage_activations_are_korthikanti_table_2() -> None:
    """Korthikanti et al. 2022 Table 2, SP + selective: 34·s·b·h/t per layer (s 2048, b 1, h 12288, t 8: 102 MiB);
    the first of 8 stages of 12 layers, interleaved v = 2, holds ((p − 1)·2 + (v − 1)·p + 1)/v = 11.5
    micro-batches (Megatron-LM's interleaved schedule)."""
    text = output("napkin memory --model gpt3-175b")
    per_layer = 34 * 2048 * 1 * 12288 / 8
    held = ((8 - 1) * 2 + (2 - 1) * 8 + 1) / 2
    assert figure(text, "activations") == round(12 * held * per_layer / 1e9, 1)


def test_palm_mfu_is_the_published_46_2_percent() -> None:
    """Chowdhery et al. 2022 (PaLM) Table 3 / App. B: 46.2 % MFU for 540B on 6,144 TPU v4 at 238.3K tokens/s."""
    text = output("napkin mfu --model palm-540b")
    assert figure(text, "MFU") == 46.2


def test_llama_2_7b_gpu_hours_give_its_throughput_and_mfu() -> None:
    """Touvron et al. 2023 Table 2: 184,320 A100-80GB GPU-hours for 2T tokens. Llama 2 7B's shape (32 layers,
    width 4096, sequence 4096) and its published 6.74B parameters: 6N + 6·L·s·d (causal) FLOPs per token."""
    text = output("napkin mfu --model llama2-7b")
    per_gpu = 2e12 / (184_320 * 3600)
    assert shown(per_gpu, figure(text, "throughput"))
    flops_per_token = 6 * 6_738_415_616 + 6 * 32 * 4096 * 4096
    assert shown(100 * per_gpu * flops_per_token / A100_BF16, figure(text, "MFU"))


def test_20_tokens_per_parameter() -> None:
    """Hoffmann et al. 2022: D = 20·N with C = 6·N·D, so N = sqrt(C/120)."""
    text = output("napkin optimal --compute 5.76e23")
    n = math.sqrt(5.76e23 / 120)
    assert figure(text, "20 tokens per parameter") == round(n / 1e9, 1)


def test_number_formats_follow_their_bit_layouts() -> None:
    """IEEE 754 binary16/32/64, bfloat16 (8-bit exponent, 7-bit mantissa), OCP FP8 E4M3 (max 448) and E5M2."""
    text = output("napkin dtypes --value 1e-8")
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line.startswith(" fp") or " bf16 " in line}
    assert float(rows["fp16"][3]) == (2 - 2**-10) * 2**15 == 65504
    assert float(rows["fp8-e4m3"][3]) == 448
    assert float(rows["fp8-e5m2"][3]) == (2 - 2**-2) * 2**15 == 57344
    assert float(rows["bf16"][3]) == pytest.approx((2 - 2**-7) * 2**127, rel=2e-3)
    assert float(rows["bf16"][6]) == 2**-7 and float(rows["fp32"][6]) == pytest.approx(2**-23, rel=1e-3)


def test_llama_3_1_70b_kv_cache_is_2_l_nkv_dh_bytes_per_token() -> None:
    """2 (K and V) × 80 layers × 8 KV heads × 128 × 2 B = 320 KiB per token (Llama 3.1 70B's config)."""
    text = output("napkin kv-cache --model llama3.1-70b --context 32k --batch 8")
    per_token = 2 * 80 * 8 * 128 * 2
    assert figure(text, "per token", r"\(([\d.]+) KiB\)") == per_token / 1024
    assert figure(text, "per sequence", r"\(([\d.]+) GiB\)") == per_token * 32768 / 2**30
    assert figure(text, "batch of 8", r"\(([\d.]+) GiB\)") == 8 * per_token * 32768 / 2**30


def test_serving_weights_kv_and_decode_floor_by_hand() -> None:
    """Llama 3.1 70B (70,553,706,496 parameters) on 8 × H100 in bf16: weights 2 B each split over TP 8; decode
    reads the weights and one sequence's cache per step at the HBM bandwidth (Pope et al. 2022)."""
    text = output("napkin inference --model llama3.1-70b --gpus 8")
    weights = 2 * 70_553_706_496 / 8
    assert figure(text, "weights per GPU") == round(weights / 1e9, 1)
    kv = 64 * 2560 * (2 * 80 * 8 * 128 * 2) / 8
    assert figure(text, "KV cache (64 × 2,560)", r"\s([\d.]+) GB") == round(kv / 1e9, 2)
    one = (2048 + 256) * 2 * 80 * 8 * 128 * 2 / 8  # one sequence at the mean decode length
    assert figure(text, "decode floor") == round((weights + one) / H100_HBM * 1e3, 2)


def test_a_4m_token_batch_is_512_sequences_of_8192() -> None:
    text = output("napkin plan --model llama3-70b")
    assert f"{4 * 2**20 // 8192} × 8,192 tokens per step" in " ".join(text.split())


def test_predicted_run_counts_6nd_plus_causal_attention() -> None:
    """PaLM App. B: attention adds 6·L·s·d_attn·c per token, c = 1 under the causal mask today's frameworks apply
    (the default); Llama 3 70B: 80 layers, width 8192, sequence 8192, 70,553,706,496 parameters."""
    text = output("napkin train-time --model llama3-70b")
    d = 15e12
    assert figure(text, "6·N·D", r"([\d.]+)e24") == round(6 * 70_553_706_496 * d / 1e24, 2)
    assert figure(text, "attention", r"([\d.]+)e23") == round(1 * 6 * 80 * 8192 * 8192 * d / 1e23, 2)


def test_gradient_all_reduce_is_bounded_by_the_nics() -> None:
    """140 GB over 128 DGX H100 nodes: each node's 8 × 400 Gbit/s NICs move 2(N−1)/N·S (NCCL's ring/tree
    traffic, nccl-tests PERFORMANCE.md); one rank per node gets one NIC."""
    full = output("napkin comm all-reduce --params 70B --dtype bf16 --gpus 1024")
    assert figure(full, "time") == pytest.approx(2 * 127 / 128 * 140e9 / (8 * 50e9) * 1e3, rel=2e-3)
    one = output("napkin comm all-reduce --params 70B --dtype bf16 --gpus 128")
    assert figure(one, "time") == pytest.approx(2 * 127 / 128 * 140e9 / 50e9, abs=0.01)
