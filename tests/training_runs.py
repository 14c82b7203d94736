"""Published training runs of several software stacks, each at its published layout, and what ``napkin step``
predicts for it with its stack profile (``stacks/*.yaml``): the validation of the stack profiles.

The runs are split by source before anything is fitted, and the split is part of the data (``role``):

* **calibration** runs set the few values each stack profile says are fitted (``FITS``), with ``napkin.fit``
  (the engine under ``napkin calibrate``); ``test_stacks.py`` checks that the shipped profiles hold exactly
  those values;
* **validation** runs never set anything: their errors are what the README reports.

Sources (every row names its own):

* torchtitan: ``benchmarks/llama3_h100_202412_torchtitan.md`` (Tables 1 and 3 calibrate; Tables 2 and 4
  validate), on Meta's Grand Teton H100s: 96 GB HBM2e at 2.4 TB/s, a 500 W power limit, 400 Gb/s RDMA per GPU;
  a third party's H200 run (``llama3-8b_h200_202506_trainy-whitefiber.md``, torchtitan of 2025: the
  torchtitan-2025 stack), validation; and the 64-A100 runs of April 2024 (``docs/performance.md`` @ 1ea476e9,
  torch.compile off: the torchtitan-eager stack; their "selective layer" rows, every other block checkpointed,
  are left out, napkin has no such recomputation), validation, on DGX A100 nodes (the interconnect is not
  stated). The async-TP rows of both sources and the 405B rows are left out;
* llm-foundry: every row of ``scripts/train/benchmarking/README.md`` (the A100 80GB table calibrates; the
  H100 and A100 40GB tables validate);
* DeepSpeed: BLOOM's topology sweep on 384 A100 80GB (``chronicles-prequel.md``, calibration) and its
  production step (``tr11-176B-ml/README.md``, validation); Narayanan et al. 2021 Table 2's ZeRO-3 rows
  (``tests.megatron_runs``: the 174.6B rows calibrate, the 529.6B rows validate);
* Megatron-Core: the Megatron-Bridge H100 FP8 rows (``tests.megatron_runs.H100_FP8``) and two of NVIDIA's DGX
  Cloud BF16 benchmarks of NeMo 24.09 (Llama 3.1 8B on 8 GPUs, 405B on 576) calibrate its matmul efficiency and
  FP8 recipe cost, jointly; the other DGX Cloud rows (BF16 and FP8 at the same layouts, 8B to 405B and Nemotron-4
  340B, NeMo 24.09 and 24.11; GPT-3 175B and Nemotron-4 15B, added after the fit), NeMo 24.07's performance summary
  and the Megatron-Bridge GB200 NVFP4 rows validate.
* Megatron-Core MoE: every dropless DGX-H100 MoE pre-training row of the Megatron-Bridge performance summary
  archive (Qwen3-30B-A3B, Qwen3-235B-A22B, GPT-OSS 120B, DeepSeek-V3), validation only, each with the stack of its
  recipe: ``megatron-core-moe`` (the expert all-to-all in line) where the recipe leaves ``moe_a2a_overlap`` off,
  ``megatron-core-moe-a2a-overlap`` where it turns it on. Nothing is fitted to them. One calibration run, which
  no validation run repeats: 25.09's Qwen3-30B-A3B token-drop row (EP 8, micro-batch 2, capacity-padded), to
  which the host's seconds per local expert (``moe_host_per_expert``, every Megatron-Core stack) are fitted.

Print the README table with ``python -m tests.training_runs``.
"""

from __future__ import annotations

import bisect
import functools
from typing import Final, NamedTuple

from napkin.domain.choices import Precision, Recompute, Sharding
from napkin.domain.model import Model
from napkin.engines import fit
from napkin.engines.step import Knobs, StepModel, machine
from napkin.systems.cluster import Cluster, find
from napkin.systems.presets import get_preset
from napkin.systems.profiles import HardwareProfile, resolve
from napkin.systems.stack import StackKnobs
from napkin.systems.stack import resolve as stack

MPT_VOCAB: Final = 50368


def _mpt(layers: int, hidden: int, heads: int) -> Model:
    """MPT as llm-foundry's scripts/train/yamls/pretrain/mpt-*.yaml build it: GeLU × 4, LayerNorm, no biases,
    ALiBi (no position table), tied embeddings, vocabulary 50368."""
    return Model(layers=layers, hidden=hidden, heads=heads, vocab=MPT_VOCAB)


def _gpt(layers: int, hidden: int, heads: int, vocab: int = 50304) -> Model:
    """GPT-3 shapes as NeMo's GPTConfig builds them (biases, LayerNorm, GeLU); the vocabulary GPT-2's, padded."""
    return Model(layers=layers, hidden=hidden, heads=heads, vocab=vocab, biases=True)


def _llama(layers: int, hidden: int, heads: int, kv_heads: int, ffn: int, vocab: int) -> Model:
    return Model(
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        ffn=ffn,
        vocab=vocab,
        mlp="swiglu",
        norm="rmsnorm",
        tied_embeddings=False,
    )


#: The models of the runs, as their sources give them.
SHAPES: Final[dict[str, Model]] = {
    "mpt-125m": _mpt(12, 768, 12),
    "mpt-350m": _mpt(24, 1024, 16),
    "mpt-760m": _mpt(24, 1536, 12),
    "mpt-1b": _mpt(24, 2048, 16),
    "mpt-3b": _mpt(32, 2560, 20),
    "mpt-7b": _mpt(32, 4096, 32),
    "mpt-13b": _mpt(40, 5120, 40),
    "mpt-30b": _mpt(48, 7168, 56),
    "mpt-70b": _mpt(80, 8192, 64),
    "llama3.1-8b": get_preset("llama3.1-8b").model,
    "llama3.1-70b": get_preset("llama3.1-70b").model,
    "llama3-8b": get_preset("llama3-8b").model,
    "llama3-70b": get_preset("llama3-70b").model,
    "llama3.1-405b": get_preset("llama3.1-405b").model,
    # NVIDIA's DGX Cloud 405B benchmark trains on synthetic data "with the GPT2BPETokenizer as a proxy"
    # (dgxc-benchmarking llama3.1/README_405b.md @ 143b90dd): 50,257 tokens padded to a multiple of 128 × TP 8
    # (NVIDIA/NeMo nemo/lightning/base.py get_vocab_size; Megatron-LM vocab_size_with_padding): 51,200
    "llama3.1-405b-gpt2-vocab": get_preset("llama3.1-405b").model.model_copy(update={"vocab": 51200}),
    "llama2-7b": get_preset("llama2-7b").model,
    "llama2-70b": get_preset("llama2-70b").model,
    "llama2-13b": _llama(40, 5120, 40, 40, 13824, 32000),
    "gpt3-5b": _gpt(24, 4096, 32),
    "gpt3-20b": _gpt(44, 6144, 48),
    "gpt3-175b": _gpt(96, 12288, 96),
    # Nemotron's squared-ReLU MLP has a GeLU MLP's two matrices
    "nemotron-8b": Model(layers=32, hidden=4096, heads=32, ffn=16384, vocab=256000, tied_embeddings=False),
    "nemotron-22b": Model(layers=40, hidden=6144, heads=48, ffn=24576, vocab=256000, tied_embeddings=False),
    # Nemotron-4 15B (arXiv:2402.16819 Table 1: 32 layers, width 6,144, 48 heads, 8 KV heads, squared-ReLU FFN 4·d,
    # vocabulary 256,000, untied; the DGX Cloud recipe's model flops use the same)
    "nemotron4-15b": Model(
        layers=32, hidden=6144, heads=48, kv_heads=8, ffn=24576, vocab=256000, tied_embeddings=False
    ),
    "nemotron-340b": Model(
        layers=96, hidden=18432, heads=96, kv_heads=8, ffn=73728, vocab=256000, tied_embeddings=False
    ),
    # BLOOM: Megatron-DeepSpeed GPT with biases, ALiBi, an embedding LayerNorm (not counted), vocabulary 250880
    "bloom-176b": Model(layers=70, hidden=14336, heads=112, vocab=250880, biases=True),
    "bloom-181b-candidate": Model(layers=72, hidden=14336, heads=64, vocab=250880, biases=True),
    # Qwen3 MoE and gpt-oss-120b: the presets, their config.json files (tests/test_presets_hf.py): every layer MoE,
    # 128 experts top 8, 4 KV heads of 128, per-head QK norm; gpt-oss 128 experts top 4 with biases, a router bias,
    # attention sinks, a 128-token window on every other layer
    "qwen3-30b-a3b": get_preset("qwen3-30b-a3b").model,
    "qwen3-235b-a22b": get_preset("qwen3-235b-a22b").model,
    "gpt-oss-120b": get_preset("gpt-oss-120b").model,
    "deepseek-v3": get_preset("deepseek-v3").model,
}


class Run(NamedTuple):
    """One published run at its published layout, with its measured throughput."""

    id: str
    stack: str
    shape: str  # a key of SHAPES
    machine: str  # a key of MACHINES
    gpus: int
    seq: int
    batch: int  # global batch, sequences
    micro_batch: int
    tp: int
    pp: int
    cp: int
    vp: int
    sharding: str
    recompute: str
    dtype: str
    tokens_per_gpu: float  # measured tokens/s per GPU
    role: str  # "calibration" or "validation"
    source: str
    ep: int = 1  # expert parallelism


#: The sources of RUNS, by the index its last column gives.
SOURCES: Final = (
    "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md @ 820504e2, Table 1",
    "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md @ 820504e2, Table 3",
    "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md @ 820504e2, Table 2",
    "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md @ 820504e2, Table 4",
    "pytorch/torchtitan benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md @ 4a61bd87",
    "mosaicml/llm-foundry scripts/train/benchmarking/README.md @ 49521837, H100 80GB BF16 (Large Scale, >= 128 GPUs)",
    "mosaicml/llm-foundry scripts/train/benchmarking/README.md @ 49521837, H100 80GB BF16",
    "mosaicml/llm-foundry scripts/train/benchmarking/README.md @ 49521837, H100 80GB FP8",
    "mosaicml/llm-foundry scripts/train/benchmarking/README.md @ 49521837, A100 80GB with 1600 Gbps node-node interconnect (RoCE)",
    "mosaicml/llm-foundry scripts/train/benchmarking/README.md @ 49521837, A100 40GB with 1600 Gbps node-node interconnect (RoCE)",
    "bigscience-workshop/bigscience train/tr11-176B-ml/README.md @ 39ed811",
    "bigscience-workshop/bigscience train/tr11-176B-ml/chronicles-prequel.md @ 59a90ee",
    "NVIDIA/NeMo docs/source/performance/performance_summary.md @ 8e3d65dc (NeMo 24.07, DGX H100, FP8)",
    "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md @ 4ab94dfa (DGX H100, FP8)",
    "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md @ 067f987d (DGX-H100, MoE); the recipe leaves "
    "moe_a2a_overlap off (scripts/performance/configs/qwen/qwen3_workload_base_configs.py @ v0.4.0-v0.5.0: "
    "Qwen3-30B-A3B EP 16 with HybridEP; configs/gpt_oss/gpt_oss_workload_base_configs.py @ v0.3.0-v0.4.2 and "
    "scripts/performance/utils/utils.py WorkloadBaseConfig.moe_a2a_overlap = False)",
    "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md @ 067f987d (DGX-H100, MoE); the recipe sets "
    "moe_a2a_overlap=True (scripts/performance/configs/qwen/qwen3_workload_base_configs.py @ v0.2.1-v0.5.0: "
    "Qwen3-235B-A22B; @ v0.2.1 and v0.3.0: Qwen3-30B-A3B EP 8 with DeepEP; "
    "configs/deepseek/workload_base_configs.py @ v0.2.0: DeepSeek-V3 with DeepEP; 25.09's table gives no "
    "precision column, its footnote's quantization granularities make it FP8)",
    "pytorch/torchtitan docs/performance.md @ 1ea476e9 (64 A100 80GB, FSDP2, torch.compile off)",
    "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md @ 067f987d (DGX-H100, MoE, 26.02.01), run at its "
    "release's recipe: the table repeats 26.02's layout (PP 2, VP 12, EP 8), but the recipe of the 26.02.01 patch "
    "container is EP 16, PP 1, HybridEP, moe_a2a_overlap off (scripts/performance/configs/qwen/"
    "qwen3_workload_base_configs.py @ v0.3.1, from 'Update Qwen3 30B H100 Base Configs with HybridEP', f29a269f8 on "
    "r0.3.0 after v0.3.0; the 26.02.01 rows were added in cfeddcd94, a day after v0.3.1), and its 9,058 tokens/s "
    "is what the 26.04-26.06 EP 16 rows of the same recipe measure (8,826-8,960)",
    "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md @ 067f987d (DGX-H100, 25.09, "
    "'Qwen3_30B_a3B (tokendrop)'), run at its recipe, which added that table (485f1c015): "
    "scripts/performance/configs/qwen3/qwen3_30b_a3b_llm_pretrain.yaml (H100, 16 GPUs: TP 1, PP 2, VP 12, EP 8, "
    "fp8_cs MBS 2, cuda_graphs false; the table says VP 24) and run_script.py (apply_moe_token_drop: capacity "
    "factor 1.0, padded to capacity, alltoall dispatcher; no DeepEP, no all-to-all overlap). Padded to capacity "
    "each expert computes the tokens balanced routing gives it, as napkin counts; the shapes are static and the "
    "dispatcher does not wait for token counts",
    "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md @ 067f987d (DGX-GB200, NVFP4, releases 26.02 to "
    "26.04.01; the 26.04.01 Llama 3 70B and 26.06 Llama 3.1 405B rows are held out of the repository), at the "
    "recipe LLAMA3_70B_PRETRAIN_CONFIG_GB200_NVFP4_V2 (scripts/performance/configs/llama/"
    "llama3_workload_base_configs.py @ v0.3.0 and v0.4.0: TP 2, PP 4, VP 5, MBS 1, GBS 256, no CUDA graphs) and "
    "bf16_with_nvfp4_mixed (src/megatron/bridge/training/mixed_precision.py @ 067f987d: no layers kept in BF16, "
    "fp4_param_gather), the distributed optimizer",
    "NVIDIA/dgxc-benchmarking llama3.1/README_8b.md, README_70b.md and README_405b.md @ 143b90dd (NeMo 24.09 "
    "container, DGX H100; the same layout in BF16 and FP8; tokens/s per GPU = the table's throughput / GPUs; "
    "405B at its full-model scales, 576 and 2,304 GPUs, not the proxy configs with fewer layers, and with the GPT-2 "
    "vocabulary its synthetic data is tokenized with)",
    "NVIDIA/dgxc-benchmarking nemotron/README_340b.md @ 143b90dd (NeMo 24.11, DGX H100; TP 8, PP 8, VP 12, MBS 1, "
    "the same layout in BF16 and FP8)",
    "NVIDIA/dgxc-benchmarking nemo_megatron/README_175b.md and nemotron/README_15b.md @ 0b71cfda (NeMo Framework "
    "Launcher recipes on DGX H100, the same layouts in BF16 and FP8: GPT-3 175B TP 4, PP 8, VP 12, MBS 1, sequence "
    "2,048; Nemotron-4 15B TP 4, PP 1, MBS 4, sequence 4,096; the smallest and largest scale of each table)",
)

#: One run a line: id, stack, shape, machine, GPUs, sequence, global batch, micro-batch, TP, PP, CP, v, sharding,
#: recompute, dtype, measured tokens/s per GPU, role, source (an index into SOURCES).
RUN_TABLE: Final = """
torchtitan-2412-t1-0 torchtitan-eager llama3.1-8b grand-teton 8 8192 16 2 1 1 1 1 fsdp selective bf16 5762 calibration 0
torchtitan-2412-t1-1 torchtitan llama3.1-8b grand-teton 8 8192 16 2 1 1 1 1 fsdp selective bf16 6667 calibration 0
torchtitan-2412-t1-2 torchtitan llama3.1-8b grand-teton 8 8192 16 2 1 1 1 1 fsdp selective fp8 8532 calibration 0
torchtitan-2412-t3-0 torchtitan-eager llama3.1-8b grand-teton 128 8192 256 2 1 1 1 1 fsdp selective bf16 5605 calibration 1
torchtitan-2412-t3-1 torchtitan llama3.1-8b grand-teton 128 8192 256 2 1 1 1 1 fsdp selective bf16 6514 calibration 1
torchtitan-2412-t3-2 torchtitan llama3.1-8b grand-teton 128 8192 256 2 1 1 1 1 fsdp selective fp8 8380 calibration 1
torchtitan-2404-a100-llama3-8b torchtitan-eager llama3-8b dgx-a100 64 8192 64 1 1 1 1 1 fsdp selective bf16 2973 validation 16
torchtitan-2404-a100-llama3-70b torchtitan-eager llama3-70b dgx-a100 64 8192 64 1 1 1 1 1 fsdp full bf16 331 validation 16
torchtitan-2404-a100-llama2-13b torchtitan-eager llama2-13b dgx-a100 64 4096 128 2 1 1 1 1 fsdp none bf16 2162 validation 16
torchtitan-2404-a100-llama2-13b-sel torchtitan-eager llama2-13b dgx-a100 64 4096 128 2 1 1 1 1 fsdp selective bf16 1904 validation 16
torchtitan-2404-a100-llama2-70b-sel torchtitan-eager llama2-70b dgx-a100 64 4096 64 1 1 1 1 1 fsdp selective bf16 355 validation 16
torchtitan-2404-a100-llama2-70b torchtitan-eager llama2-70b dgx-a100 64 4096 128 2 1 1 1 1 fsdp full bf16 353 validation 16
torchtitan-2412-t2-0 torchtitan llama3.1-8b grand-teton 8 32768 8 1 1 1 1 1 fsdp full fp8 3890 validation 2
torchtitan-2412-t2-1 torchtitan llama3.1-8b grand-teton 8 65536 4 1 1 1 2 1 fsdp full fp8 2540 validation 2
torchtitan-2412-t2-2 torchtitan llama3.1-8b grand-teton 8 131072 2 1 1 1 4 1 fsdp full fp8 1071 validation 2
torchtitan-2412-t2-3 torchtitan llama3.1-8b grand-teton 8 262144 1 1 1 1 8 1 fsdp full fp8 548 validation 2
torchtitan-2412-t4-0 torchtitan llama3.1-70b grand-teton 256 8192 512 16 8 1 1 1 fsdp full fp8 829 validation 3
torchtitan-2506-trainy-h200-8b-4n torchtitan-2025 llama3.1-8b dgx-h200 32 8192 64 2 1 1 1 1 fsdp selective fp8 10938 validation 4
torchtitan-2506-trainy-h200-8b-8n torchtitan-2025 llama3.1-8b dgx-h200 64 8192 128 2 1 1 1 1 fsdp selective fp8 10753 validation 4
foundry-h100_80gb-amp_bf16-mpt70b-s2048-g512 llm-foundry mpt-70b dgx-h100 512 2048 4096 8 1 1 1 1 fsdp full bf16 1007 validation 5
foundry-h100_80gb-amp_bf16-mpt70b-s2048-g256 llm-foundry mpt-70b dgx-h100 256 2048 2048 8 1 1 1 1 fsdp full bf16 1035 validation 5
foundry-h100_80gb-amp_bf16-mpt70b-s2048-g128 llm-foundry mpt-70b dgx-h100 128 2048 1024 8 1 1 1 1 fsdp full bf16 1058 validation 5
foundry-h100_80gb-amp_bf16-mpt30b-s2048-g512 llm-foundry mpt-30b dgx-h100 512 2048 4096 8 1 1 1 1 fsdp full bf16 2115 validation 5
foundry-h100_80gb-amp_bf16-mpt30b-s2048-g256 llm-foundry mpt-30b dgx-h100 256 2048 2048 8 1 1 1 1 fsdp full bf16 2148 validation 5
foundry-h100_80gb-amp_bf16-mpt30b-s2048-g128 llm-foundry mpt-30b dgx-h100 128 2048 1024 8 1 1 1 1 fsdp full bf16 2199 validation 5
foundry-h100_80gb-amp_bf16-mpt13b-s2048-g512 llm-foundry mpt-13b dgx-h100 512 2048 8192 16 1 1 1 1 fsdp full bf16 4952 validation 5
foundry-h100_80gb-amp_bf16-mpt13b-s2048-g256 llm-foundry mpt-13b dgx-h100 256 2048 4096 16 1 1 1 1 fsdp full bf16 4989 validation 5
foundry-h100_80gb-amp_bf16-mpt13b-s2048-g128 llm-foundry mpt-13b dgx-h100 128 2048 2048 16 1 1 1 1 fsdp full bf16 5080 validation 5
foundry-h100_80gb-amp_bf16-mpt7b-s2048-g512 llm-foundry mpt-7b dgx-h100 512 2048 3072 6 1 1 1 1 fsdp none bf16 9670 validation 5
foundry-h100_80gb-amp_bf16-mpt7b-s2048-g256 llm-foundry mpt-7b dgx-h100 256 2048 1536 6 1 1 1 1 fsdp none bf16 10119 validation 5
foundry-h100_80gb-amp_bf16-mpt7b-s2048-g128 llm-foundry mpt-7b dgx-h100 128 2048 768 6 1 1 1 1 fsdp none bf16 10475 validation 5
foundry-h100_80gb-amp_bf16-mpt3b-s2048-g512 llm-foundry mpt-3b dgx-h100 512 2048 4096 8 1 1 1 1 zero2 none bf16 21664 validation 5
foundry-h100_80gb-amp_bf16-mpt3b-s2048-g256 llm-foundry mpt-3b dgx-h100 256 2048 2048 8 1 1 1 1 zero2 none bf16 22772 validation 5
foundry-h100_80gb-amp_bf16-mpt3b-s2048-g128 llm-foundry mpt-3b dgx-h100 128 2048 1024 8 1 1 1 1 zero2 none bf16 23422 validation 5
foundry-h100_80gb-amp_bf16-mpt1b-s2048-g512 llm-foundry mpt-1b dgx-h100 512 2048 6144 12 1 1 1 1 zero2 none bf16 39837 validation 5
foundry-h100_80gb-amp_bf16-mpt1b-s2048-g256 llm-foundry mpt-1b dgx-h100 256 2048 3072 12 1 1 1 1 zero2 none bf16 42555 validation 5
foundry-h100_80gb-amp_bf16-mpt1b-s2048-g128 llm-foundry mpt-1b dgx-h100 128 2048 1536 12 1 1 1 1 zero2 none bf16 44123 validation 5
foundry-h100_80gb-amp_bf16-mpt70b-s2048-g64 llm-foundry mpt-70b dgx-h100 64 2048 2048 8 1 1 1 1 fsdp full bf16 1039 validation 6
foundry-h100_80gb-amp_bf16-mpt70b-s2048-g32 llm-foundry mpt-70b dgx-h100 32 2048 1024 2 1 1 1 1 fsdp full bf16 882 validation 6
foundry-h100_80gb-amp_bf16-mpt30b-s8192-g8 llm-foundry mpt-30b dgx-h100 8 8192 168 1 1 1 1 1 fsdp full bf16 1384 validation 6
foundry-h100_80gb-amp_bf16-mpt30b-s4096-g8 llm-foundry mpt-30b dgx-h100 8 4096 168 1 1 1 1 1 fsdp full bf16 1802 validation 6
foundry-h100_80gb-amp_bf16-mpt30b-s2048-g32 llm-foundry mpt-30b dgx-h100 32 2048 1344 14 1 1 1 1 fsdp full bf16 2308 validation 6
foundry-h100_80gb-amp_bf16-mpt30b-s2048-g16 llm-foundry mpt-30b dgx-h100 16 2048 480 10 1 1 1 1 fsdp full bf16 2263 validation 6
foundry-h100_80gb-amp_bf16-mpt30b-s2048-g8 llm-foundry mpt-30b dgx-h100 8 2048 504 3 1 1 1 1 fsdp full bf16 2002 validation 6
foundry-h100_80gb-amp_bf16-mpt30b-s1024-g8 llm-foundry mpt-30b dgx-h100 8 1024 1008 6 1 1 1 1 fsdp full bf16 2084 validation 6
foundry-h100_80gb-amp_bf16-mpt13b-s32768-g8 llm-foundry mpt-13b dgx-h100 8 32768 24 1 1 1 1 1 fsdp full bf16 1976 validation 6
foundry-h100_80gb-amp_bf16-mpt13b-s16384-g8 llm-foundry mpt-13b dgx-h100 8 16384 72 3 1 1 1 1 fsdp full bf16 2985 validation 6
foundry-h100_80gb-amp_bf16-mpt13b-s4096-g8 llm-foundry mpt-13b dgx-h100 8 4096 240 10 1 1 1 1 fsdp full bf16 4717 validation 6
foundry-h100_80gb-amp_bf16-mpt13b-s2048-g64 llm-foundry mpt-13b dgx-h100 64 2048 128 2 1 1 1 1 fsdp none bf16 4800 validation 6
foundry-h100_80gb-amp_bf16-mpt13b-s2048-g32 llm-foundry mpt-13b dgx-h100 32 2048 64 2 1 1 1 1 fsdp none bf16 4811 validation 6
foundry-h100_80gb-amp_bf16-mpt13b-s2048-g16 llm-foundry mpt-13b dgx-h100 16 2048 32 2 1 1 1 1 fsdp none bf16 4767 validation 6
foundry-h100_80gb-amp_bf16-mpt13b-s2048-g8 llm-foundry mpt-13b dgx-h100 8 2048 16 2 1 1 1 1 fsdp none bf16 4792 validation 6
foundry-h100_80gb-amp_bf16-mpt13b-s1024-g8 llm-foundry mpt-13b dgx-h100 8 1024 960 40 1 1 1 1 fsdp full bf16 5502 validation 6
foundry-h100_80gb-amp_bf16-mpt7b-s65536-g8 llm-foundry mpt-7b dgx-h100 8 65536 16 1 1 1 1 1 fsdp full bf16 1956 validation 6
foundry-h100_80gb-amp_bf16-mpt7b-s32768-g8 llm-foundry mpt-7b dgx-h100 8 32768 32 2 1 1 1 1 fsdp full bf16 3318 validation 6
foundry-h100_80gb-amp_bf16-mpt7b-s8192-g8 llm-foundry mpt-7b dgx-h100 8 8192 128 8 1 1 1 1 fsdp full bf16 6935 validation 6
foundry-h100_80gb-amp_bf16-mpt7b-s4096-g8 llm-foundry mpt-7b dgx-h100 8 4096 256 16 1 1 1 1 fsdp full bf16 8611 validation 6
foundry-h100_80gb-amp_bf16-mpt7b-s2048-g8 llm-foundry mpt-7b dgx-h100 8 2048 48 6 1 1 1 1 fsdp none bf16 10643 validation 6
foundry-h100_80gb-amp_bf16-mpt7b-s1024-g8 llm-foundry mpt-7b dgx-h100 8 1024 1024 64 1 1 1 1 fsdp full bf16 10203 validation 6
foundry-h100_80gb-amp_bf16-mpt3b-s65536-g8 llm-foundry mpt-3b dgx-h100 8 65536 16 1 1 1 1 1 fsdp full bf16 3262 validation 6
foundry-h100_80gb-amp_bf16-mpt3b-s32768-g8 llm-foundry mpt-3b dgx-h100 8 32768 144 3 1 1 1 1 fsdp full bf16 5873 validation 6
foundry-h100_80gb-amp_bf16-mpt3b-s16384-g8 llm-foundry mpt-3b dgx-h100 8 16384 48 1 1 1 1 1 fsdp none bf16 11152 validation 6
foundry-h100_80gb-amp_bf16-mpt3b-s8192-g8 llm-foundry mpt-3b dgx-h100 8 8192 144 3 1 1 1 1 fsdp none bf16 16578 validation 6
foundry-h100_80gb-amp_bf16-mpt3b-s4096-g8 llm-foundry mpt-3b dgx-h100 8 4096 240 5 1 1 1 1 fsdp none bf16 20964 validation 6
foundry-h100_80gb-amp_bf16-mpt3b-s2048-g64 llm-foundry mpt-3b dgx-h100 64 2048 1152 6 1 1 1 1 fsdp none bf16 22525 validation 6
foundry-h100_80gb-amp_bf16-mpt3b-s2048-g32 llm-foundry mpt-3b dgx-h100 32 2048 576 6 1 1 1 1 fsdp none bf16 23021 validation 6
foundry-h100_80gb-amp_bf16-mpt3b-s2048-g16 llm-foundry mpt-3b dgx-h100 16 2048 480 10 1 1 1 1 fsdp none bf16 24142 validation 6
foundry-h100_80gb-amp_bf16-mpt3b-s1024-g8 llm-foundry mpt-3b dgx-h100 8 1024 960 20 1 1 1 1 fsdp none bf16 27046 validation 6
foundry-h100_80gb-amp_bf16-mpt3b-s512-g8 llm-foundry mpt-3b dgx-h100 8 512 1920 40 1 1 1 1 fsdp none bf16 27965 validation 6
foundry-h100_80gb-amp_bf16-mpt1b-s65536-g8 llm-foundry mpt-1b dgx-h100 8 65536 16 1 1 1 1 1 fsdp full bf16 5506 validation 6
foundry-h100_80gb-amp_bf16-mpt1b-s32768-g8 llm-foundry mpt-1b dgx-h100 8 32768 32 1 1 1 1 1 fsdp none bf16 12025 validation 6
foundry-h100_80gb-amp_bf16-mpt1b-s16384-g8 llm-foundry mpt-1b dgx-h100 8 16384 64 2 1 1 1 1 fsdp none bf16 19649 validation 6
foundry-h100_80gb-amp_bf16-mpt1b-s8192-g8 llm-foundry mpt-1b dgx-h100 8 8192 96 3 1 1 1 1 fsdp none bf16 29157 validation 6
foundry-h100_80gb-amp_bf16-mpt1b-s4096-g8 llm-foundry mpt-1b dgx-h100 8 4096 224 7 1 1 1 1 fsdp none bf16 38535 validation 6
foundry-h100_80gb-amp_bf16-mpt1b-s2048-g64 llm-foundry mpt-1b dgx-h100 64 2048 1280 20 1 1 1 1 fsdp none bf16 44402 validation 6
foundry-h100_80gb-amp_bf16-mpt1b-s2048-g32 llm-foundry mpt-1b dgx-h100 32 2048 640 20 1 1 1 1 fsdp none bf16 45130 validation 6
foundry-h100_80gb-amp_bf16-mpt1b-s2048-g16 llm-foundry mpt-1b dgx-h100 16 2048 320 20 1 1 1 1 fsdp none bf16 46037 validation 6
foundry-h100_80gb-amp_bf16-mpt1b-s2048-g8 llm-foundry mpt-1b dgx-h100 8 2048 112 14 1 1 1 1 fsdp none bf16 45455 validation 6
foundry-h100_80gb-amp_bf16-mpt1b-s1024-g8 llm-foundry mpt-1b dgx-h100 8 1024 576 18 1 1 1 1 fsdp none bf16 48910 validation 6
foundry-h100_80gb-amp_bf16-mpt1b-s512-g8 llm-foundry mpt-1b dgx-h100 8 512 1792 56 1 1 1 1 fsdp none bf16 52275 validation 6
foundry-h100_80gb-amp_bf16-mpt760m-s32768-g8 llm-foundry mpt-760m dgx-h100 8 32768 16 1 1 1 1 1 fsdp none bf16 16291 validation 6
foundry-h100_80gb-amp_bf16-mpt760m-s16384-g8 llm-foundry mpt-760m dgx-h100 8 16384 48 3 1 1 1 1 fsdp none bf16 27815 validation 6
foundry-h100_80gb-amp_bf16-mpt760m-s8192-g8 llm-foundry mpt-760m dgx-h100 8 8192 96 6 1 1 1 1 fsdp none bf16 41825 validation 6
foundry-h100_80gb-amp_bf16-mpt760m-s4096-g8 llm-foundry mpt-760m dgx-h100 8 4096 192 12 1 1 1 1 fsdp none bf16 55459 validation 6
foundry-h100_80gb-amp_bf16-mpt760m-s2048-g32 llm-foundry mpt-760m dgx-h100 32 2048 768 24 1 1 1 1 fsdp none bf16 67971 validation 6
foundry-h100_80gb-amp_bf16-mpt760m-s2048-g16 llm-foundry mpt-760m dgx-h100 16 2048 384 24 1 1 1 1 fsdp none bf16 68551 validation 6
foundry-h100_80gb-amp_bf16-mpt760m-s2048-g8 llm-foundry mpt-760m dgx-h100 8 2048 384 24 1 1 1 1 fsdp none bf16 63147 validation 6
foundry-h100_80gb-amp_bf16-mpt760m-s1024-g8 llm-foundry mpt-760m dgx-h100 8 1024 768 48 1 1 1 1 fsdp none bf16 78581 validation 6
foundry-h100_80gb-amp_bf16-mpt760m-s512-g8 llm-foundry mpt-760m dgx-h100 8 512 1536 96 1 1 1 1 fsdp none bf16 83749 validation 6
foundry-h100_80gb-amp_fp8-mpt3b-s32768-g8 llm-foundry mpt-3b dgx-h100 8 32768 144 3 1 1 1 1 fsdp full fp8 5856 validation 7
foundry-h100_80gb-amp_fp8-mpt3b-s8192-g8 llm-foundry mpt-3b dgx-h100 8 8192 144 3 1 1 1 1 fsdp none fp8 19146 validation 7
foundry-h100_80gb-amp_fp8-mpt3b-s2048-g8 llm-foundry mpt-3b dgx-h100 8 2048 480 10 1 1 1 1 fsdp none fp8 30586 validation 7
foundry-h100_80gb-amp_fp8-mpt3b-s512-g8 llm-foundry mpt-3b dgx-h100 8 512 1920 40 1 1 1 1 fsdp none fp8 36527 validation 7
foundry-h100_80gb-amp_fp8-mpt1b-s32768-g8 llm-foundry mpt-1b dgx-h100 8 32768 32 1 1 1 1 1 fsdp none fp8 12580 validation 7
foundry-h100_80gb-amp_fp8-mpt1b-s8192-g8 llm-foundry mpt-1b dgx-h100 8 8192 64 2 1 1 1 1 fsdp none fp8 32010 validation 7
foundry-h100_80gb-amp_fp8-mpt1b-s512-g8 llm-foundry mpt-1b dgx-h100 8 512 1792 56 1 1 1 1 fsdp none fp8 70315 validation 7
foundry-a100_80gb-bf16-mpt70b-s2048-g64 llm-foundry mpt-70b dgx-a100 64 2048 2048 8 1 1 1 1 fsdp full bf16 410 calibration 8
foundry-a100_80gb-bf16-mpt70b-s2048-g32 llm-foundry mpt-70b dgx-a100 32 2048 1024 2 1 1 1 1 fsdp full bf16 373 calibration 8
foundry-a100_80gb-amp_bf16-mpt30b-s8192-g8 llm-foundry mpt-30b dgx-a100 8 8192 168 1 1 1 1 1 fsdp full bf16 574 calibration 8
foundry-a100_80gb-amp_bf16-mpt30b-s4096-g8 llm-foundry mpt-30b dgx-a100 8 4096 168 1 1 1 1 1 fsdp full bf16 814 calibration 8
foundry-a100_80gb-amp_bf16-mpt30b-s2048-g8 llm-foundry mpt-30b dgx-a100 8 2048 504 3 1 1 1 1 fsdp full bf16 916 calibration 8
foundry-a100_80gb-amp_bf16-mpt30b-s1024-g8 llm-foundry mpt-30b dgx-a100 8 1024 1008 6 1 1 1 1 fsdp full bf16 946 calibration 8
foundry-a100_80gb-amp_bf16-mpt30b-s512-g8 llm-foundry mpt-30b dgx-a100 8 512 2016 12 1 1 1 1 fsdp full bf16 967 calibration 8
foundry-a100_80gb-amp_bf16-mpt13b-s32768-g8 llm-foundry mpt-13b dgx-a100 8 32768 24 1 1 1 1 1 fsdp full bf16 1016 calibration 8
foundry-a100_80gb-amp_bf16-mpt13b-s16384-g8 llm-foundry mpt-13b dgx-a100 8 16384 72 3 1 1 1 1 fsdp full bf16 1431 calibration 8
foundry-a100_80gb-amp_bf16-mpt13b-s8192-g8 llm-foundry mpt-13b dgx-a100 8 8192 120 5 1 1 1 1 fsdp full bf16 1795 calibration 8
foundry-a100_80gb-amp_bf16-mpt13b-s4096-g8 llm-foundry mpt-13b dgx-a100 8 4096 240 10 1 1 1 1 fsdp full bf16 2060 calibration 8
foundry-a100_80gb-amp_bf16-mpt13b-s2048-g8 llm-foundry mpt-13b dgx-a100 8 2048 48 2 1 1 1 1 fsdp none bf16 2262 calibration 8
foundry-a100_80gb-amp_bf16-mpt13b-s1024-g8 llm-foundry mpt-13b dgx-a100 8 1024 960 40 1 1 1 1 fsdp full bf16 2330 calibration 8
foundry-a100_80gb-amp_bf16-mpt7b-s65536-g8 llm-foundry mpt-7b dgx-a100 8 65536 16 1 1 1 1 1 fsdp full bf16 1013 calibration 8
foundry-a100_80gb-amp_bf16-mpt7b-s32768-g8 llm-foundry mpt-7b dgx-a100 8 32768 32 2 1 1 1 1 fsdp full bf16 1672 calibration 8
foundry-a100_80gb-amp_bf16-mpt7b-s16384-g8 llm-foundry mpt-7b dgx-a100 8 16384 64 4 1 1 1 1 fsdp full bf16 2453 calibration 8
foundry-a100_80gb-amp_bf16-mpt7b-s8192-g8 llm-foundry mpt-7b dgx-a100 8 8192 128 8 1 1 1 1 fsdp full bf16 3206 calibration 8
foundry-a100_80gb-amp_bf16-mpt7b-s4096-g8 llm-foundry mpt-7b dgx-a100 8 4096 256 16 1 1 1 1 fsdp full bf16 3684 calibration 8
foundry-a100_80gb-amp_bf16-mpt7b-s2048-g8 llm-foundry mpt-7b dgx-a100 8 2048 96 6 1 1 1 1 fsdp none bf16 4641 calibration 8
foundry-a100_80gb-amp_bf16-mpt7b-s1024-g8 llm-foundry mpt-7b dgx-a100 8 1024 1024 64 1 1 1 1 fsdp full bf16 4357 calibration 8
foundry-a100_80gb-amp_bf16-mpt3b-s65536-g8 llm-foundry mpt-3b dgx-a100 8 65536 16 1 1 1 1 1 fsdp full bf16 1767 calibration 8
foundry-a100_80gb-amp_bf16-mpt3b-s32768-g8 llm-foundry mpt-3b dgx-a100 8 32768 144 3 1 1 1 1 fsdp full bf16 3029 calibration 8
foundry-a100_80gb-amp_bf16-mpt3b-s16384-g8 llm-foundry mpt-3b dgx-a100 8 16384 48 1 1 1 1 1 fsdp none bf16 5529 calibration 8
foundry-a100_80gb-amp_bf16-mpt3b-s8192-g8 llm-foundry mpt-3b dgx-a100 8 8192 144 3 1 1 1 1 fsdp none bf16 7695 calibration 8
foundry-a100_80gb-amp_bf16-mpt3b-s4096-g8 llm-foundry mpt-3b dgx-a100 8 4096 240 5 1 1 1 1 fsdp none bf16 9457 calibration 8
foundry-a100_80gb-amp_bf16-mpt3b-s2048-g8 llm-foundry mpt-3b dgx-a100 8 2048 160 10 1 1 1 1 fsdp none bf16 10811 calibration 8
foundry-a100_80gb-amp_bf16-mpt3b-s1024-g8 llm-foundry mpt-3b dgx-a100 8 1024 960 20 1 1 1 1 fsdp none bf16 11580 calibration 8
foundry-a100_80gb-amp_bf16-mpt3b-s512-g8 llm-foundry mpt-3b dgx-a100 8 512 1920 40 1 1 1 1 fsdp none bf16 12127 calibration 8
foundry-a100_80gb-amp_bf16-mpt1b-s65536-g8 llm-foundry mpt-1b dgx-a100 8 65536 16 1 1 1 1 1 fsdp full bf16 3044 calibration 8
foundry-a100_80gb-amp_bf16-mpt1b-s32768-g8 llm-foundry mpt-1b dgx-a100 8 32768 32 1 1 1 1 1 fsdp none bf16 6275 calibration 8
foundry-a100_80gb-amp_bf16-mpt1b-s16384-g8 llm-foundry mpt-1b dgx-a100 8 16384 64 2 1 1 1 1 fsdp none bf16 9956 calibration 8
foundry-a100_80gb-amp_bf16-mpt1b-s8192-g8 llm-foundry mpt-1b dgx-a100 8 8192 96 3 1 1 1 1 fsdp none bf16 13814 calibration 8
foundry-a100_80gb-amp_bf16-mpt1b-s4096-g8 llm-foundry mpt-1b dgx-a100 8 4096 224 7 1 1 1 1 fsdp none bf16 17807 calibration 8
foundry-a100_80gb-amp_bf16-mpt1b-s2048-g8 llm-foundry mpt-1b dgx-a100 8 2048 448 14 1 1 1 1 fsdp none bf16 20513 calibration 8
foundry-a100_80gb-amp_bf16-mpt1b-s1024-g8 llm-foundry mpt-1b dgx-a100 8 1024 576 18 1 1 1 1 fsdp none bf16 22112 calibration 8
foundry-a100_80gb-amp_bf16-mpt1b-s512-g8 llm-foundry mpt-1b dgx-a100 8 512 1792 56 1 1 1 1 fsdp none bf16 23148 calibration 8
foundry-a100_80gb-amp_bf16-mpt760m-s65536-g8 llm-foundry mpt-760m dgx-a100 8 65536 16 1 1 1 1 1 fsdp full bf16 4143 calibration 8
foundry-a100_80gb-amp_bf16-mpt760m-s32768-g8 llm-foundry mpt-760m dgx-a100 8 32768 16 1 1 1 1 1 fsdp none bf16 8802 calibration 8
foundry-a100_80gb-amp_bf16-mpt760m-s16384-g8 llm-foundry mpt-760m dgx-a100 8 16384 48 3 1 1 1 1 fsdp none bf16 14274 calibration 8
foundry-a100_80gb-amp_bf16-mpt760m-s8192-g8 llm-foundry mpt-760m dgx-a100 8 8192 96 6 1 1 1 1 fsdp none bf16 20933 calibration 8
foundry-a100_80gb-amp_bf16-mpt760m-s4096-g8 llm-foundry mpt-760m dgx-a100 8 4096 192 12 1 1 1 1 fsdp none bf16 27351 calibration 8
foundry-a100_80gb-amp_bf16-mpt760m-s2048-g8 llm-foundry mpt-760m dgx-a100 8 2048 384 24 1 1 1 1 fsdp none bf16 32434 calibration 8
foundry-a100_80gb-amp_bf16-mpt760m-s1024-g8 llm-foundry mpt-760m dgx-a100 8 1024 768 48 1 1 1 1 fsdp none bf16 29765 calibration 8
foundry-a100_80gb-amp_bf16-mpt760m-s512-g8 llm-foundry mpt-760m dgx-a100 8 512 1536 96 1 1 1 1 fsdp none bf16 29446 calibration 8
foundry-a100_80gb-amp_bf16-mpt350m-s65536-g8 llm-foundry mpt-350m dgx-a100 8 65536 16 1 1 1 1 1 fsdp none bf16 7524 calibration 8
foundry-a100_80gb-amp_bf16-mpt350m-s32768-g8 llm-foundry mpt-350m dgx-a100 8 32768 32 2 1 1 1 1 fsdp none bf16 13652 calibration 8
foundry-a100_80gb-amp_bf16-mpt350m-s16384-g8 llm-foundry mpt-350m dgx-a100 8 16384 64 4 1 1 1 1 fsdp none bf16 23559 calibration 8
foundry-a100_80gb-amp_bf16-mpt350m-s8192-g8 llm-foundry mpt-350m dgx-a100 8 8192 128 8 1 1 1 1 fsdp none bf16 36569 calibration 8
foundry-a100_80gb-amp_bf16-mpt350m-s4096-g8 llm-foundry mpt-350m dgx-a100 8 4096 256 16 1 1 1 1 fsdp none bf16 49555 calibration 8
foundry-a100_80gb-amp_bf16-mpt350m-s2048-g8 llm-foundry mpt-350m dgx-a100 8 2048 512 32 1 1 1 1 fsdp none bf16 58782 calibration 8
foundry-a100_80gb-amp_bf16-mpt350m-s1024-g8 llm-foundry mpt-350m dgx-a100 8 1024 1024 64 1 1 1 1 fsdp none bf16 64813 calibration 8
foundry-a100_80gb-amp_bf16-mpt350m-s512-g8 llm-foundry mpt-350m dgx-a100 8 512 2048 128 1 1 1 1 fsdp none bf16 69330 calibration 8
foundry-a100_80gb-amp_bf16-mpt125m-s65536-g8 llm-foundry mpt-125m dgx-a100 8 65536 16 1 1 1 1 1 fsdp none bf16 20368 calibration 8
foundry-a100_80gb-amp_bf16-mpt125m-s32768-g8 llm-foundry mpt-125m dgx-a100 8 32768 32 2 1 1 1 1 fsdp none bf16 36407 calibration 8
foundry-a100_80gb-amp_bf16-mpt125m-s16384-g8 llm-foundry mpt-125m dgx-a100 8 16384 64 4 1 1 1 1 fsdp none bf16 60040 calibration 8
foundry-a100_80gb-amp_bf16-mpt125m-s8192-g8 llm-foundry mpt-125m dgx-a100 8 8192 128 8 1 1 1 1 fsdp none bf16 90392 calibration 8
foundry-a100_80gb-amp_bf16-mpt125m-s4096-g8 llm-foundry mpt-125m dgx-a100 8 4096 256 16 1 1 1 1 fsdp none bf16 118396 calibration 8
foundry-a100_80gb-amp_bf16-mpt125m-s2048-g8 llm-foundry mpt-125m dgx-a100 8 2048 640 40 1 1 1 1 fsdp none bf16 142830 calibration 8
foundry-a100_80gb-amp_bf16-mpt125m-s2048-g8 llm-foundry mpt-125m dgx-a100 8 2048 512 32 1 1 1 1 fsdp none bf16 141737 calibration 8
foundry-a100_80gb-amp_bf16-mpt125m-s1024-g8 llm-foundry mpt-125m dgx-a100 8 1024 1024 64 1 1 1 1 fsdp none bf16 156468 calibration 8
foundry-a100_80gb-amp_bf16-mpt125m-s512-g8 llm-foundry mpt-125m dgx-a100 8 512 2048 128 1 1 1 1 fsdp none bf16 165681 calibration 8
foundry-a100_40gb-bf16-mpt70b-s2048-g128 llm-foundry mpt-70b dgx-a100-40gb 128 2048 512 4 1 1 1 1 fsdp full bf16 376 validation 9
foundry-a100_40gb-bf16-mpt70b-s2048-g64 llm-foundry mpt-70b dgx-a100-40gb 64 2048 128 2 1 1 1 1 fsdp full bf16 276 validation 9
foundry-a100_40gb-bf16-mpt30b-s2048-g128 llm-foundry mpt-30b dgx-a100-40gb 128 2048 768 6 1 1 1 1 fsdp full bf16 865 validation 9
foundry-a100_40gb-bf16-mpt30b-s2048-g32 llm-foundry mpt-30b dgx-a100-40gb 32 2048 128 4 1 1 1 1 fsdp full bf16 857 validation 9
foundry-a100_40gb-bf16-mpt13b-s8192-g8 llm-foundry mpt-13b dgx-a100-40gb 8 8192 128 1 1 1 1 1 fsdp full bf16 1407 validation 9
foundry-a100_40gb-bf16-mpt13b-s4096-g8 llm-foundry mpt-13b dgx-a100-40gb 8 4096 256 2 1 1 1 1 fsdp full bf16 1603 validation 9
foundry-a100_40gb-bf16-mpt13b-s2048-g128 llm-foundry mpt-13b dgx-a100-40gb 128 2048 2048 16 1 1 1 1 fsdp full bf16 1972 validation 9
foundry-a100_40gb-bf16-mpt13b-s2048-g64 llm-foundry mpt-13b dgx-a100-40gb 64 2048 1024 16 1 1 1 1 fsdp full bf16 1976 validation 9
foundry-a100_40gb-bf16-mpt13b-s2048-g32 llm-foundry mpt-13b dgx-a100-40gb 32 2048 448 14 1 1 1 1 fsdp full bf16 1998 validation 9
foundry-a100_40gb-bf16-mpt13b-s2048-g16 llm-foundry mpt-13b dgx-a100-40gb 16 2048 160 10 1 1 1 1 fsdp full bf16 1993 validation 9
foundry-a100_40gb-bf16-mpt13b-s2048-g8 llm-foundry mpt-13b dgx-a100-40gb 8 2048 512 4 1 1 1 1 fsdp full bf16 1668 validation 9
foundry-a100_40gb-bf16-mpt13b-s1024-g8 llm-foundry mpt-13b dgx-a100-40gb 8 1024 1024 8 1 1 1 1 fsdp full bf16 1727 validation 9
foundry-a100_40gb-bf16-mpt13b-s512-g8 llm-foundry mpt-13b dgx-a100-40gb 8 512 2048 16 1 1 1 1 fsdp full bf16 1763 validation 9
foundry-a100_40gb-bf16-mpt7b-s16384-g8 llm-foundry mpt-7b dgx-a100-40gb 8 16384 32 1 1 1 1 1 fsdp full bf16 2249 validation 9
foundry-a100_40gb-bf16-mpt7b-s8192-g8 llm-foundry mpt-7b dgx-a100-40gb 8 8192 96 3 1 1 1 1 fsdp full bf16 2887 validation 9
foundry-a100_40gb-bf16-mpt7b-s4096-g8 llm-foundry mpt-7b dgx-a100-40gb 8 4096 192 6 1 1 1 1 fsdp full bf16 3366 validation 9
foundry-a100_40gb-bf16-mpt7b-s2048-g128 llm-foundry mpt-7b dgx-a100-40gb 128 2048 2304 18 1 1 1 1 fsdp full bf16 3623 validation 9
foundry-a100_40gb-bf16-mpt7b-s2048-g64 llm-foundry mpt-7b dgx-a100-40gb 64 2048 1152 18 1 1 1 1 fsdp full bf16 3665 validation 9
foundry-a100_40gb-bf16-mpt7b-s2048-g32 llm-foundry mpt-7b dgx-a100-40gb 32 2048 576 18 1 1 1 1 fsdp full bf16 3725 validation 9
foundry-a100_40gb-bf16-mpt7b-s2048-g16 llm-foundry mpt-7b dgx-a100-40gb 16 2048 256 16 1 1 1 1 fsdp full bf16 3645 validation 9
foundry-a100_40gb-bf16-mpt7b-s2048-g8 llm-foundry mpt-7b dgx-a100-40gb 8 2048 384 12 1 1 1 1 fsdp full bf16 3679 validation 9
foundry-a100_40gb-bf16-mpt7b-s1024-g8 llm-foundry mpt-7b dgx-a100-40gb 8 1024 768 24 1 1 1 1 fsdp full bf16 3854 validation 9
foundry-a100_40gb-bf16-mpt7b-s512-g8 llm-foundry mpt-7b dgx-a100-40gb 8 512 1536 48 1 1 1 1 fsdp full bf16 3895 validation 9
foundry-a100_40gb-bf16-mpt3b-s32768-g8 llm-foundry mpt-3b dgx-a100-40gb 8 32768 32 1 1 1 1 1 fsdp full bf16 2955 validation 9
foundry-a100_40gb-bf16-mpt3b-s16384-g8 llm-foundry mpt-3b dgx-a100-40gb 8 16384 128 2 1 1 1 1 fsdp full bf16 4465 validation 9
foundry-a100_40gb-bf16-mpt3b-s8192-g8 llm-foundry mpt-3b dgx-a100-40gb 8 8192 64 1 1 1 1 1 fsdp none bf16 7149 validation 9
foundry-a100_40gb-bf16-mpt3b-s4096-g8 llm-foundry mpt-3b dgx-a100-40gb 8 4096 128 2 1 1 1 1 fsdp none bf16 8777 validation 9
foundry-a100_40gb-bf16-mpt3b-s2048-g128 llm-foundry mpt-3b dgx-a100-40gb 128 2048 768 6 1 1 1 1 fsdp none bf16 9538 validation 9
foundry-a100_40gb-bf16-mpt3b-s2048-g64 llm-foundry mpt-3b dgx-a100-40gb 64 2048 384 6 1 1 1 1 fsdp none bf16 9736 validation 9
foundry-a100_40gb-bf16-mpt3b-s2048-g32 llm-foundry mpt-3b dgx-a100-40gb 32 2048 192 6 1 1 1 1 fsdp none bf16 9914 validation 9
foundry-a100_40gb-bf16-mpt3b-s2048-g16 llm-foundry mpt-3b dgx-a100-40gb 16 2048 80 5 1 1 1 1 fsdp none bf16 9750 validation 9
foundry-a100_40gb-bf16-mpt3b-s2048-g8 llm-foundry mpt-3b dgx-a100-40gb 8 2048 320 5 1 1 1 1 fsdp none bf16 10065 validation 9
foundry-a100_40gb-bf16-mpt3b-s1024-g8 llm-foundry mpt-3b dgx-a100-40gb 8 1024 640 10 1 1 1 1 fsdp none bf16 10731 validation 9
foundry-a100_40gb-bf16-mpt3b-s512-g8 llm-foundry mpt-3b dgx-a100-40gb 8 512 1280 20 1 1 1 1 fsdp none bf16 11324 validation 9
foundry-a100_40gb-bf16-mpt1b-s32768-g8 llm-foundry mpt-1b dgx-a100-40gb 8 32768 32 1 1 1 1 1 fsdp full bf16 5095 validation 9
foundry-a100_40gb-bf16-mpt1b-s16384-g8 llm-foundry mpt-1b dgx-a100-40gb 8 16384 64 1 1 1 1 1 fsdp none bf16 9715 validation 9
foundry-a100_40gb-bf16-mpt1b-s8192-g8 llm-foundry mpt-1b dgx-a100-40gb 8 8192 128 2 1 1 1 1 fsdp none bf16 13474 validation 9
foundry-a100_40gb-bf16-mpt1b-s4096-g8 llm-foundry mpt-1b dgx-a100-40gb 8 4096 256 4 1 1 1 1 fsdp none bf16 16856 validation 9
foundry-a100_40gb-bf16-mpt1b-s2048-g128 llm-foundry mpt-1b dgx-a100-40gb 128 2048 1280 10 1 1 1 1 fsdp none bf16 18647 validation 9
foundry-a100_40gb-bf16-mpt1b-s2048-g64 llm-foundry mpt-1b dgx-a100-40gb 64 2048 640 10 1 1 1 1 fsdp none bf16 19001 validation 9
foundry-a100_40gb-bf16-mpt1b-s2048-g32 llm-foundry mpt-1b dgx-a100-40gb 32 2048 320 10 1 1 1 1 fsdp none bf16 15555 validation 9
foundry-a100_40gb-bf16-mpt1b-s2048-g16 llm-foundry mpt-1b dgx-a100-40gb 16 2048 128 8 1 1 1 1 fsdp none bf16 19085 validation 9
foundry-a100_40gb-bf16-mpt1b-s2048-g8 llm-foundry mpt-1b dgx-a100-40gb 8 2048 512 8 1 1 1 1 fsdp none bf16 19271 validation 9
foundry-a100_40gb-bf16-mpt1b-s1024-g8 llm-foundry mpt-1b dgx-a100-40gb 8 1024 1024 16 1 1 1 1 fsdp none bf16 20959 validation 9
foundry-a100_40gb-bf16-mpt1b-s512-g8 llm-foundry mpt-1b dgx-a100-40gb 8 512 2048 32 1 1 1 1 fsdp none bf16 21782 validation 9
foundry-a100_40gb-bf16-mpt760m-s32768-g8 llm-foundry mpt-760m dgx-a100-40gb 8 32768 32 1 1 1 1 1 fsdp full bf16 7183 validation 9
foundry-a100_40gb-bf16-mpt760m-s16384-g8 llm-foundry mpt-760m dgx-a100-40gb 8 16384 32 1 1 1 1 1 fsdp none bf16 13914 validation 9
foundry-a100_40gb-bf16-mpt760m-s8192-g8 llm-foundry mpt-760m dgx-a100-40gb 8 8192 96 3 1 1 1 1 fsdp none bf16 20106 validation 9
foundry-a100_40gb-bf16-mpt760m-s4096-g8 llm-foundry mpt-760m dgx-a100-40gb 8 4096 192 6 1 1 1 1 fsdp none bf16 25863 validation 9
foundry-a100_40gb-bf16-mpt760m-s2048-g128 llm-foundry mpt-760m dgx-a100-40gb 128 2048 1536 12 1 1 1 1 fsdp none bf16 28940 validation 9
foundry-a100_40gb-bf16-mpt760m-s2048-g64 llm-foundry mpt-760m dgx-a100-40gb 64 2048 768 12 1 1 1 1 fsdp none bf16 29344 validation 9
foundry-a100_40gb-bf16-mpt760m-s2048-g32 llm-foundry mpt-760m dgx-a100-40gb 32 2048 384 12 1 1 1 1 fsdp none bf16 29648 validation 9
foundry-a100_40gb-bf16-mpt760m-s2048-g16 llm-foundry mpt-760m dgx-a100-40gb 16 2048 192 12 1 1 1 1 fsdp none bf16 29607 validation 9
foundry-a100_40gb-bf16-mpt760m-s2048-g8 llm-foundry mpt-760m dgx-a100-40gb 8 2048 384 12 1 1 1 1 fsdp none bf16 30173 validation 9
foundry-a100_40gb-bf16-mpt760m-s1024-g8 llm-foundry mpt-760m dgx-a100-40gb 8 1024 768 24 1 1 1 1 fsdp none bf16 33422 validation 9
foundry-a100_40gb-bf16-mpt760m-s512-g8 llm-foundry mpt-760m dgx-a100-40gb 8 512 1536 48 1 1 1 1 fsdp none bf16 34938 validation 9
foundry-a100_40gb-bf16-mpt350m-s32768-g8 llm-foundry mpt-350m dgx-a100-40gb 8 32768 32 1 1 1 1 1 fsdp none bf16 13416 validation 9
foundry-a100_40gb-bf16-mpt350m-s16384-g8 llm-foundry mpt-350m dgx-a100-40gb 8 16384 64 2 1 1 1 1 fsdp none bf16 22896 validation 9
foundry-a100_40gb-bf16-mpt350m-s8192-g8 llm-foundry mpt-350m dgx-a100-40gb 8 8192 128 4 1 1 1 1 fsdp none bf16 34933 validation 9
foundry-a100_40gb-bf16-mpt350m-s4096-g8 llm-foundry mpt-350m dgx-a100-40gb 8 4096 256 8 1 1 1 1 fsdp none bf16 46833 validation 9
foundry-a100_40gb-bf16-mpt350m-s2048-g128 llm-foundry mpt-350m dgx-a100-40gb 128 2048 2304 18 1 1 1 1 fsdp none bf16 51934 validation 9
foundry-a100_40gb-bf16-mpt350m-s2048-g64 llm-foundry mpt-350m dgx-a100-40gb 64 2048 1152 18 1 1 1 1 fsdp none bf16 52689 validation 9
foundry-a100_40gb-bf16-mpt350m-s2048-g32 llm-foundry mpt-350m dgx-a100-40gb 32 2048 576 18 1 1 1 1 fsdp none bf16 53811 validation 9
foundry-a100_40gb-bf16-mpt350m-s2048-g16 llm-foundry mpt-350m dgx-a100-40gb 16 2048 288 18 1 1 1 1 fsdp none bf16 55413 validation 9
foundry-a100_40gb-bf16-mpt350m-s2048-g8 llm-foundry mpt-350m dgx-a100-40gb 8 2048 512 16 1 1 1 1 fsdp none bf16 55995 validation 9
foundry-a100_40gb-bf16-mpt350m-s1024-g8 llm-foundry mpt-350m dgx-a100-40gb 8 1024 1024 32 1 1 1 1 fsdp none bf16 62523 validation 9
foundry-a100_40gb-bf16-mpt350m-s512-g8 llm-foundry mpt-350m dgx-a100-40gb 8 512 2048 64 1 1 1 1 fsdp none bf16 66284 validation 9
foundry-a100_40gb-bf16-mpt125m-s32768-g8 llm-foundry mpt-125m dgx-a100-40gb 8 32768 32 1 1 1 1 1 fsdp none bf16 32651 validation 9
foundry-a100_40gb-bf16-mpt125m-s16384-g8 llm-foundry mpt-125m dgx-a100-40gb 8 16384 48 2 1 1 1 1 fsdp none bf16 55484 validation 9
foundry-a100_40gb-bf16-mpt125m-s8192-g8 llm-foundry mpt-125m dgx-a100-40gb 8 8192 120 5 1 1 1 1 fsdp none bf16 86858 validation 9
foundry-a100_40gb-bf16-mpt125m-s4096-g8 llm-foundry mpt-125m dgx-a100-40gb 8 4096 312 13 1 1 1 1 fsdp none bf16 115162 validation 9
foundry-a100_40gb-bf16-mpt125m-s2048-g128 llm-foundry mpt-125m dgx-a100-40gb 128 2048 3328 26 1 1 1 1 fsdp none bf16 123936 validation 9
foundry-a100_40gb-bf16-mpt125m-s2048-g64 llm-foundry mpt-125m dgx-a100-40gb 64 2048 1664 26 1 1 1 1 fsdp none bf16 125234 validation 9
foundry-a100_40gb-bf16-mpt125m-s2048-g32 llm-foundry mpt-125m dgx-a100-40gb 32 2048 832 26 1 1 1 1 fsdp none bf16 127122 validation 9
foundry-a100_40gb-bf16-mpt125m-s2048-g16 llm-foundry mpt-125m dgx-a100-40gb 16 2048 416 26 1 1 1 1 fsdp none bf16 130535 validation 9
foundry-a100_40gb-bf16-mpt125m-s2048-g8 llm-foundry mpt-125m dgx-a100-40gb 8 2048 624 26 1 1 1 1 fsdp none bf16 136334 validation 9
foundry-a100_40gb-bf16-mpt125m-s1024-g8 llm-foundry mpt-125m dgx-a100-40gb 8 1024 1248 52 1 1 1 1 fsdp none bf16 148289 validation 9
foundry-a100_40gb-bf16-mpt125m-s512-g8 llm-foundry mpt-125m dgx-a100-40gb 8 512 2496 104 1 1 1 1 fsdp none bf16 156735 validation 9
bloom-176b-iter85376 deepspeed bloom-176b dgx-a100 384 2048 2048 2 4 12 1 1 zero1 full bf16 104.32 validation 10
bloom-prequel-0225-dp8-tp8-pp6-mbs4-0 deepspeed bloom-181b-candidate dgx-a100 384 2048 2048 4 8 6 1 1 zero1 full bf16 95.72 calibration 11
bloom-prequel-0225-dp8-tp8-pp6-mbs6-1 deepspeed bloom-181b-candidate dgx-a100 384 2048 2016 6 8 6 1 1 zero1 full bf16 87.01 calibration 11
bloom-prequel-0225-dp4-tp8-pp12-mbs4-2 deepspeed bloom-181b-candidate dgx-a100 384 2048 2048 4 8 12 1 1 zero1 full bf16 93.3 calibration 11
bloom-prequel-0225-dp4-tp8-pp12-mbs2-3 deepspeed bloom-181b-candidate dgx-a100 384 2048 2048 2 8 12 1 1 zero1 full bf16 84.79 calibration 11
bloom-prequel-0225-dp6-tp8-pp8-mbs4-4 deepspeed bloom-181b-candidate dgx-a100 384 2048 2016 4 8 8 1 1 zero1 full bf16 95.02 calibration 11
bloom-prequel-0225-dp12-tp8-pp4-mbs2-5 deepspeed bloom-181b-candidate dgx-a100 384 2048 2016 2 8 4 1 1 zero1 full bf16 85.66 calibration 11
bloom-prequel-0225-dp12-tp8-pp4-mbs4-6 deepspeed bloom-181b-candidate dgx-a100 384 2048 2016 4 8 4 1 1 zero1 full bf16 93.65 calibration 11
bloom-prequel-0225-dp24-tp8-pp2-mbs1-7 deepspeed bloom-181b-candidate dgx-a100 384 2048 2016 1 8 2 1 1 zero1 full bf16 73.92 calibration 11
bloom-prequel-0225-dp24-tp8-pp2-mbs2-8 deepspeed bloom-181b-candidate dgx-a100 384 2048 2016 2 8 2 1 1 zero1 full bf16 78.98 calibration 11
bloom-prequel-0225-dp8-tp4-pp12-mbs4-10 deepspeed bloom-181b-candidate dgx-a100 384 2048 2048 4 4 12 1 1 zero1 full bf16 97.62 calibration 11
bloom-prequel-0225-dp8-tp4-pp12-mbs2-11 deepspeed bloom-181b-candidate dgx-a100 384 2048 2048 2 4 12 1 1 zero1 full bf16 98.87 calibration 11
bloom-prequel-0225-dp8-tp4-pp12-mbs2-12 deepspeed bloom-181b-candidate dgx-a100 384 2048 2048 2 4 12 1 1 zero1 full bf16 96.2 calibration 11
bloom-prequel-0225-dp16-tp4-pp6-mbs4-13 deepspeed bloom-181b-candidate dgx-a100 384 2048 2048 4 4 6 1 1 zero1 full bf16 93.27 calibration 11
bloom-prequel-0225-dp16-tp4-pp6-mbs2-14 deepspeed bloom-181b-candidate dgx-a100 384 2048 2048 2 4 6 1 1 zero1 full bf16 97.78 calibration 11
bloom-prequel-0225-dp16-tp2-pp12-mbs2-15 deepspeed bloom-181b-candidate dgx-a100 384 2048 2048 2 2 12 1 1 zero1 full bf16 97.09 calibration 11
bloom-prequel-0225-dp8-tp2-pp24-mbs1-18 deepspeed bloom-181b-candidate dgx-a100 384 2048 2048 1 2 24 1 1 zero1 full bf16 91.38 calibration 11
bloom-prequel-0225-dp8-tp2-pp24-mbs2-19 deepspeed bloom-181b-candidate dgx-a100 384 2048 2048 2 2 24 1 1 zero1 full bf16 88.98 calibration 11
bloom-prequel-0225-dp4-tp4-pp24-mbs1-20 deepspeed bloom-181b-candidate dgx-a100 384 2048 2048 1 4 24 1 1 zero1 full bf16 83.63 calibration 11
nemo-2407-gpt3-5b-g64 megatron-core gpt3-5b dgx-h100 64 2048 2048 4 1 1 1 1 zero1 none fp8 23406 validation 12
nemo-2407-gpt3-20b-g64 megatron-core gpt3-20b dgx-h100 64 2048 256 2 2 1 1 1 zero1 none fp8 5851 validation 12
nemo-2407-gpt3-175b-g128 megatron-core gpt3-175b dgx-h100 128 2048 256 1 4 8 1 6 zero1 none fp8 716 validation 12
nemo-2407-gpt3-175b-g512 megatron-core gpt3-175b dgx-h100 512 2048 2048 2 4 8 1 6 zero1 none fp8 825 validation 12
nemo-2407-llama2-7b-g8 megatron-core llama2-7b dgx-h100 8 4096 128 1 1 1 1 1 zero1 none fp8 16934 validation 12
nemo-2407-llama2-13b-g16 megatron-core llama2-13b dgx-h100 16 4096 128 1 1 4 1 10 zero1 none fp8 8715 validation 12
nemo-2407-llama2-70b-g64 megatron-core llama2-70b dgx-h100 64 4096 128 1 4 4 1 20 zero1 none fp8 1728 validation 12
nemo-2407-nemotron-8b-g64 megatron-core nemotron-8b dgx-h100 64 4096 256 4 2 1 1 1 zero1 none fp8 12507 validation 12
nemo-2407-nemotron-22b-g64 megatron-core nemotron-22b dgx-h100 64 4096 256 2 2 4 1 10 zero1 none fp8 4312 validation 12
nemo-2407-nemotron-340b-g128 megatron-core nemotron-340b dgx-h100 128 4096 32 1 8 8 1 12 zero1 none fp8 326 validation 12
nemo-2407-llama3-8b-g8 megatron-core llama3-8b dgx-h100 8 8192 128 1 1 1 2 1 zero1 none fp8 12273 validation 12
nemo-2407-llama3-70b-g64 megatron-core llama3-70b dgx-h100 64 8192 128 1 4 4 2 5 zero1 none fp8 1524 validation 12
megatron-bridge-25.11-llama3-8b-g8 megatron-core llama3-8b dgx-h100 8 8192 128 1 1 1 1 1 zero3 none fp8 14451 validation 13
dgxc-2409-llama3.1-8b-bf16-g8 megatron-core llama3.1-8b dgx-h100 8 8192 128 1 1 1 2 1 zero1 none bf16 10152.75 calibration 20
dgxc-2409-llama3.1-8b-bf16-g128 megatron-core llama3.1-8b dgx-h100 128 8192 2048 1 1 1 2 1 zero1 none bf16 10005.5 validation 20
dgxc-2409-llama3.1-8b-fp8-g8 megatron-core llama3.1-8b dgx-h100 8 8192 128 1 1 1 2 1 zero1 none fp8 13554.5 validation 20
dgxc-2409-llama3.1-8b-fp8-g128 megatron-core llama3.1-8b dgx-h100 128 8192 2048 1 1 1 2 1 zero1 none fp8 13347.5 validation 20
dgxc-2409-llama3.1-70b-bf16-g64 megatron-core llama3.1-70b dgx-h100 64 8192 128 1 4 4 2 5 zero1 none bf16 1113.05 validation 20
dgxc-2409-llama3.1-70b-bf16-g2048 megatron-core llama3.1-70b dgx-h100 2048 8192 4096 1 4 4 2 5 zero1 none bf16 1098.12 validation 20
dgxc-2409-llama3.1-70b-fp8-g64 megatron-core llama3.1-70b dgx-h100 64 8192 128 1 4 4 2 5 zero1 none fp8 1488.11 validation 20
dgxc-2409-llama3.1-70b-fp8-g2048 megatron-core llama3.1-70b dgx-h100 2048 8192 4096 1 4 4 2 5 zero1 none fp8 1438.45 validation 20
dgxc-2409-llama3.1-405b-bf16-g576 megatron-core llama3.1-405b-gpt2-vocab dgx-h100 576 8192 252 1 8 9 2 7 zero1 none bf16 208.37 calibration 20
dgxc-2409-llama3.1-405b-bf16-g2304 megatron-core llama3.1-405b-gpt2-vocab dgx-h100 2304 8192 1008 1 8 9 2 7 zero1 none bf16 203.41 validation 20
dgxc-2409-llama3.1-405b-fp8-g576 megatron-core llama3.1-405b-gpt2-vocab dgx-h100 576 8192 252 1 8 9 2 7 zero1 none fp8 318.86 validation 20
dgxc-2409-llama3.1-405b-fp8-g2304 megatron-core llama3.1-405b-gpt2-vocab dgx-h100 2304 8192 1008 1 8 9 2 7 zero1 none fp8 290.2 validation 20
dgxc-2411-nemotron-340b-bf16-g128 megatron-core nemotron-340b dgx-h100 128 4096 32 1 8 8 1 12 zero1 none bf16 222.13 validation 21
dgxc-2411-nemotron-340b-bf16-g2048 megatron-core nemotron-340b dgx-h100 2048 4096 512 1 8 8 1 12 zero1 none bf16 211.57 validation 21
dgxc-2411-nemotron-340b-fp8-g128 megatron-core nemotron-340b dgx-h100 128 4096 32 1 8 8 1 12 zero1 none fp8 324.05 validation 21
dgxc-2411-nemotron-340b-fp8-g2048 megatron-core nemotron-340b dgx-h100 2048 4096 512 1 8 8 1 12 zero1 none fp8 293.41 validation 21
dgxc-gpt3-175b-bf16-g128 megatron-core gpt3-175b dgx-h100 128 2048 256 1 4 8 1 12 zero1 none bf16 492.96 validation 22
dgxc-gpt3-175b-bf16-g2048 megatron-core gpt3-175b dgx-h100 2048 2048 4096 1 4 8 1 12 zero1 none bf16 482.45 validation 22
dgxc-gpt3-175b-fp8-g128 megatron-core gpt3-175b dgx-h100 128 2048 256 1 4 8 1 12 zero1 none fp8 728.05 validation 22
dgxc-gpt3-175b-fp8-g2048 megatron-core gpt3-175b dgx-h100 2048 2048 4096 1 4 8 1 12 zero1 none fp8 687.25 validation 22
dgxc-nemotron4-15b-bf16-g16 megatron-core nemotron4-15b dgx-h100 16 4096 64 4 4 1 1 1 zero1 none bf16 5826.44 validation 22
dgxc-nemotron4-15b-bf16-g2048 megatron-core nemotron4-15b dgx-h100 2048 4096 8192 4 4 1 1 1 zero1 none bf16 5675.10 validation 22
dgxc-nemotron4-15b-fp8-g16 megatron-core nemotron4-15b dgx-h100 16 4096 64 4 4 1 1 1 zero1 none fp8 8035.31 validation 22
dgxc-nemotron4-15b-fp8-g2048 megatron-core nemotron4-15b dgx-h100 2048 4096 8192 4 4 1 1 1 zero1 none fp8 7728.30 validation 22
mb-26.04-llama3-70b-gb200-nvfp4-g64 megatron-core llama3-70b gb200-nvl72 64 8192 256 1 2 4 1 5 zero1 none fp4 4898 validation 19
mb-26.02.01-llama3-70b-gb200-nvfp4-g64 megatron-core llama3-70b gb200-nvl72 64 8192 256 1 2 4 1 5 zero1 none fp4 4557 validation 19
mb-26.02-llama3-70b-gb200-nvfp4-g64 megatron-core llama3-70b gb200-nvl72 64 8192 256 1 2 4 1 5 zero1 none fp4 4458 validation 19
mb-26.04.01-llama3.1-405b-gb200-nvfp4-g256 megatron-core llama3.1-405b gb200-nvl72 256 8192 1536 1 4 16 1 8 zero1 none fp4 1184 validation 19
mb-26.04-llama3.1-405b-gb200-nvfp4-g256 megatron-core llama3.1-405b gb200-nvl72 256 8192 1536 1 4 16 1 8 zero1 none fp4 1136 validation 19
mb-26.02.01-llama3.1-405b-gb200-nvfp4-g256 megatron-core llama3.1-405b gb200-nvl72 256 8192 1536 1 4 16 1 4 zero1 none fp4 1083 validation 19
mb-26.02-llama3.1-405b-gb200-nvfp4-g256 megatron-core llama3.1-405b gb200-nvl72 256 8192 1536 1 4 16 1 8 zero1 none fp4 1076 validation 19
"""


#: The MoE runs, one a line as RUN_TABLE with the expert parallelism last. The release (NeMo container) is in the
#: id; recomputation 'none' where the recipe recomputes nothing or only norms, activations and MLA
#: up-projections (GPT-OSS: layernorm, moe_act; DeepSeek-V3: mla_up_proj and the dense layers' mlp). Left out:
#: the 25.11 rows of Qwen3-30B-A3B (table: MBS 2, VP 24; its recipe at v0.2.1: MBS 1, VP 12) and GPT-OSS 120B
#: (table: MBS 4; recipe at v0.2.1: MBS 1), whose published layout contradicts the recipe of their release.
MOE_RUN_TABLE: Final = """
mb-26.06-qwen3-30b-a3b-g16 megatron-core-moe qwen3-30b-a3b dgx-h100 16 4096 1024 1 1 1 1 1 zero1 none fp8 8826 validation 14 16
mb-26.04.01-qwen3-30b-a3b-g16 megatron-core-moe qwen3-30b-a3b dgx-h100 16 4096 1024 1 1 1 1 1 zero1 none fp8 8960 validation 14 16
mb-26.04-qwen3-30b-a3b-g16 megatron-core-moe qwen3-30b-a3b dgx-h100 16 4096 1024 1 1 1 1 1 zero1 none fp8 8901 validation 14 16
mb-26.02.01-qwen3-30b-a3b-g16 megatron-core-moe qwen3-30b-a3b dgx-h100 16 4096 1024 1 1 1 1 1 zero1 none fp8 9058 validation 17 16
mb-26.02-qwen3-30b-a3b-g16 megatron-core-moe-a2a-overlap qwen3-30b-a3b dgx-h100 16 4096 1024 1 1 2 1 12 zero1 none fp8 5113 validation 15 8
mb-26.04.01-qwen3-235b-a22b-g256 megatron-core-moe-a2a-overlap qwen3-235b-a22b dgx-h100 256 4096 8192 1 2 8 1 4 zero1 none fp8 1712 validation 15 32
mb-26.04-qwen3-235b-a22b-g256 megatron-core-moe-a2a-overlap qwen3-235b-a22b dgx-h100 256 4096 8192 1 2 8 1 4 zero1 none fp8 1686 validation 15 32
mb-26.02.01-qwen3-235b-a22b-g256 megatron-core-moe-a2a-overlap qwen3-235b-a22b dgx-h100 256 4096 8192 1 2 8 1 4 zero1 none fp8 1611 validation 15 32
mb-26.02-qwen3-235b-a22b-g256 megatron-core-moe-a2a-overlap qwen3-235b-a22b dgx-h100 256 4096 8192 1 2 8 1 4 zero1 none fp8 1633 validation 15 32
mb-25.11-qwen3-235b-a22b-g256 megatron-core-moe-a2a-overlap qwen3-235b-a22b dgx-h100 256 4096 2048 1 2 8 1 4 zero1 none fp8 1575 validation 15 32
mb-26.04.01-gpt-oss-120b-g64 megatron-core-moe gpt-oss-120b dgx-h100 64 4096 1280 1 1 4 1 1 zero1 none bf16 5824 validation 14 8
mb-26.04-gpt-oss-120b-g64 megatron-core-moe gpt-oss-120b dgx-h100 64 4096 1280 1 1 4 1 1 zero1 none bf16 5810 validation 14 8
mb-26.02.01-gpt-oss-120b-g64 megatron-core-moe gpt-oss-120b dgx-h100 64 4096 1280 1 1 4 1 1 zero1 none bf16 5984 validation 14 8
mb-26.02-gpt-oss-120b-g64 megatron-core-moe gpt-oss-120b dgx-h100 64 4096 1280 1 1 4 1 1 zero1 none bf16 5993 validation 14 8
mb-25.09-qwen3-30b-a3b-tokendrop-g16 megatron-core-moe qwen3-30b-a3b dgx-h100 16 4096 512 2 1 2 1 12 zero1 none fp8 10494 calibration 18 8
mb-25.09-deepseek-v3-g1024 megatron-core-moe-a2a-overlap deepseek-v3 dgx-h100 1024 4096 8192 1 2 8 1 4 zero1 none fp8 1297 validation 15 64
"""


#: Runs whose recipe reduces the gradients after the last backward, not under it: DeepSeek-V3 on H100
#: (scripts/performance/configs/deepseek/deepseek_llm_pretrain.py @ v0.2.0: overlap_grad_reduce = False).
NO_GRAD_REDUCE_OVERLAP: Final = frozenset({"mb-25.09-deepseek-v3-g1024"})

#: HBM bytes per logit of the NeMo 24.07 runs' loss, which ran Megatron-Core 0.8 (NVIDIA/NeMo Dockerfile @ r2.0.0rc1:
#: MCORE_TAG=338af514, on branch core_r0.8.0, its cross-entropy files identical to the core_r0.8.0 tag), not the
#: 2025 release whose Transformer Engine loss megatron-core states (10 B). Counted per full-size pass over the
#: bf16 logits of megatron/core/tensor_parallel/cross_entropy.py and fusions/fused_cross_entropy.py @ core_r0.8.0:
#: unfused (eager): .float() 2 + 4, max 4, -= max 4 + 4, exp 4 + 4, sum 4, div_ 4 + 4; backward mul_ 4 + 4 and the
#: autograd engine's cast of the fp32 gradient to the bf16 input's dtype 4 + 2: 52 B. Fused
#: (cross_entropy_loss_fusion, each of its four functions one torch.compile kernel, megatron/core/jit.py, torch
#: >= 2.2): calculate_logits_max 2 + 4, calculate_predicted_logits 4 + 4 (in place), calculate_cross_entropy_loss
#: 4 + 4 (in place), calculate_gradients 4 + 4 (its in-place softmax) + 2 (.to(torch.bfloat16)): 32 B. The launcher
#: configs set the fusion for Llama 3 and Nemotron 8B and 22B only (NVIDIA/NeMo-Framework-Launcher
#: launcher_scripts/conf/training/{llama/llama3_8b,llama/llama3_70b,nemotron/nemotron_8b,nemotron/nemotron_22b}.yaml
#: @ 24.07: cross_entropy_loss_fusion: true; absent from gpt3/{5b,20b,175b}, llama/llama2_*, nemotron_340b, where
#: Megatron-Core's default, False, holds: model_parallel_config.py @ core_r0.8.0).
NEMO_2407_LOSS_FUSED: Final = 32.0
NEMO_2407_LOSS_UNFUSED: Final = 52.0
NEMO_2407_LOSS_FUSION: Final = frozenset({"llama3-8b", "llama3-70b", "nemotron-8b", "nemotron-22b"})


def _loss_bytes(run: Run, stack_bytes: float) -> float:
    """Bytes per logit of ``run``'s loss: the NeMo 24.07 runs' by their recipe, else the stack's."""
    if not run.id.startswith("nemo-2407-"):
        return stack_bytes
    return NEMO_2407_LOSS_FUSED if run.shape in NEMO_2407_LOSS_FUSION else NEMO_2407_LOSS_UNFUSED


def _runs() -> tuple[Run, ...]:
    out = []
    for line in (RUN_TABLE + MOE_RUN_TABLE).strip().splitlines():
        if not line:
            continue
        f = line.split()
        gpus, seq, batch, micro, tp, pp, cp, vp = (int(x) for x in f[4:12])
        out.append(
            Run(
                f[0],
                f[1],
                f[2],
                f[3],
                gpus,
                seq,
                batch,
                micro,
                tp,
                pp,
                cp,
                vp,
                f[12],
                f[13],
                f[14],
                float(f[15]),
                f[16],
                SOURCES[int(f[17])],
                int(f[18]) if len(f) > 18 else 1,
            )
        )
    return tuple(out)


RUNS: Final = _runs()


#: Grand Teton's H100s run at a 500 W power limit, the H100 SXM's datasheet peak is at 700 W
#: (benchmarks/llama3_h100_202412_torchtitan.md: "the default 500W power limit"; "the actual peak TFLOPs number
#: is between SXM and NVL, and we don't know its exact value"). A GEMM-bound GPU at its power limit runs at the
#: clock that limit allows; dynamic CMOS power is α·C·V²·f with the supply voltage scaled with the clock (DVFS),
#: so P ∝ f³ and the clock, and the peak, scale as (P / P_datasheet)^(1/3) (Weste & Harris, CMOS VLSI Design,
#: 4th ed., ch. 5, "Power": dynamic power and voltage/frequency scaling). Checked on the datasheets: the H100 NVL (same 132 SMs, 400 W)
#: is predicted 989.5 × (400/700)^(1/3) = 821 TFLOP/s against its 835.5 (−1.7 %).
GRAND_TETON_WATTS: Final = 500.0
H100_SXM_WATTS: Final = 700.0
POWER_CLOCK_EXPONENT: Final = 1 / 3


def _grand_teton() -> tuple[Cluster, HardwareProfile]:
    """Meta's Grand Teton H100 as the torchtitan benchmarks state it: 96 GB of HBM2e at 2.4 TB/s, 400 Gb/s of
    RDMA per GPU, NVLink in the host (DGX H100's fabric), and the H100 SXM's peaks at its 500 W power limit
    (``GRAND_TETON_WATTS``): 989.5 × (500/700)^(1/3) = 884.6 TFLOP/s bf16, inside the SXM–NVL range the
    benchmark gives."""
    h100 = resolve("h100-sxm").profile
    scale = (GRAND_TETON_WATTS / H100_SXM_WATTS) ** POWER_CLOCK_EXPONENT
    profile = h100.model_copy(
        update={
            "name": "h100-96gb-hbm2e",
            "memory": 96e9,
            "memory_usable": None,
            "memory_bandwidth": 2.4e12,
            "measured": {},
            "power": GRAND_TETON_WATTS,
            "peak_flops": {dtype: peak * scale for dtype, peak in h100.peak_flops.items()},
        }
    )
    cluster = find("dgx-h100").cluster.model_copy(update={"name": "grand-teton", "device": profile.name})
    return cluster, profile


@functools.cache
def machines() -> dict[str, tuple[Cluster, HardwareProfile]]:
    """The clusters the runs ran on: napkin's built-ins, A100 40GB nodes (DGX A100's fabric, as llm-foundry's
    '1600 Gbps node-node interconnect' table heading says) and the Grand Teton H100s."""
    out = {
        name: (c := find(name).cluster, resolve(c.device).profile)
        for name in ("dgx-h100", "dgx-a100", "dgx-h200", "gb200-nvl72")
    }
    a100 = find("dgx-a100").cluster.model_copy(update={"name": "dgx-a100-40gb", "device": "a100-sxm-40gb"})
    out["dgx-a100-40gb"] = (a100, resolve("a100-sxm-40gb").profile)
    out["grand-teton"] = _grand_teton()
    return out


#: The values each stack profile fits to its calibration runs (napkin.fit.FREE), and the stack whose fit it
#: starts from (torchtitan-eager is torchtitan without torch.compile: it fits only its elementwise traffic).
FITS: Final[dict[str, tuple[tuple[str, ...], str | None]]] = {
    "torchtitan": (("matmul_efficiency", "fp8_overhead"), None),
    "torchtitan-eager": (("elementwise_traffic",), "torchtitan"),
    "megatron-core": (("matmul_efficiency", "fp8_overhead"), None),
    "megatron-core-moe": (("moe_host_per_expert",), None),
    "llm-foundry": (("matmul_efficiency", "attention_efficiency", "compute_slowdown"), None),
    "deepspeed": (("matmul_efficiency", "scale_out", "compute_slowdown"), None),
}


def _setup(run: Run) -> tuple[StepModel, Knobs]:
    cluster, profile = machines()[run.machine]
    loaded = stack(run.stack).profile
    stack_knobs = loaded.knobs(profile.name)
    sm = StepModel(
        SHAPES[run.shape],
        run.seq,
        run.batch,
        machine(cluster, profile, run.dtype),
        precision=Precision.mixed,
        overlap_grad_reduce=False if run.id in NO_GRAD_REDUCE_OVERLAP else None,
        stack=stack_knobs.replace(loss_bytes=_loss_bytes(run, stack_knobs.loss_bytes)),
        offers=loaded.trains().offers(),
        validated=loaded.trains().validated,  # as napkin plan ranks: the validated layouts first
    )
    data = run.gpus // (run.tp * run.pp * run.cp)
    sharding = Sharding(run.sharding) if data * run.cp > 1 else Sharding.none
    sp = run.tp > 1 and loaded.trains().parallelism.sequence  # sequence parallelism where the stack has it
    knobs = Knobs(
        tensor_parallel=run.tp,
        pipeline_parallel=run.pp,
        data_parallel=data,
        context_parallel=run.cp,
        expert_parallel=run.ep,
        interleave=run.vp,
        micro_batch=run.micro_batch,
        sequence_parallel=sp,
        recompute=Recompute(run.recompute),
        sharding=sharding,
    )
    return sm, knobs


def _zero3_runs() -> list[tuple[str, str, StepModel, Knobs, float]]:
    """Narayanan Table 2's ZeRO-3 rows as deepspeed runs: (id, role, model, knobs, measured seconds)."""
    from tests.megatron_runs import TABLE_2_ZERO3, eq3_flops, gpt, selene

    out = []
    deepspeed = stack("deepspeed").profile
    knobs, trains = deepspeed.knobs("a100-sxm-80gb"), deepspeed.trains()
    for row in TABLE_2_ZERO3:
        sm = StepModel(
            gpt(row.layers, row.hidden, row.heads),
            2048,
            row.batch,
            selene(),
            stack=knobs,
            offers=trains.offers(),
            validated=trains.validated,  # as napkin plan --stack deepspeed ranks
        )
        k = Knobs(data_parallel=row.gpus, micro_batch=row.micro_batch, recompute=Recompute.full)
        role = "calibration" if row.billions < 200 else "validation"
        seconds = eq3_flops(row) / (row.gpus * row.teraflops * 1e12)
        out.append((f"narayanan-t2-zero3-{row.billions:g}b-g{row.gpus}", role, sm, k, seconds))
    return out


def _bridge_runs() -> list[tuple[str, str, StepModel, Knobs, float]]:
    """The README's Megatron-Bridge H100 FP8 runs (``tests.megatron_runs.H100_FP8``) as megatron-core
    calibration runs: (id, role, model, knobs, measured seconds)."""
    from napkin import api
    from tests.megatron_runs import H100_FP8, h100_options

    out = []
    for run in H100_FP8:
        sm, k, _, _ = api.step_setup(**h100_options(run))
        seconds = sm.batch * sm.seq / (run.tokens_per_gpu * run.gpus)
        out.append((f"megatron-bridge-{run.release}-{run.model}-g{run.gpus}", "calibration", sm, k, seconds))
    return out


class Case(NamedTuple):
    """A run ready to predict: its id, stack, role, step model, layout and measured seconds per step."""

    id: str
    stack: str
    role: str
    model: StepModel
    knobs: Knobs
    seconds: float
    source: str


@functools.cache
def cases() -> tuple[Case, ...]:
    out = []
    for run in RUNS:
        sm, k = _setup(run)
        out.append(
            Case(run.id, run.stack, run.role, sm, k, run.batch * run.seq / (run.tokens_per_gpu * run.gpus), run.source)
        )
    for rid, role, sm, k, seconds in _zero3_runs():
        out.append(Case(rid, "deepspeed", role, sm, k, seconds, "Narayanan et al. 2021, arXiv:2104.04473 Table 2"))
    for rid, role, sm, k, seconds in _bridge_runs():
        out.append(
            Case(
                rid,
                "megatron-core",
                role,
                sm,
                k,
                seconds,
                "NVIDIA-NeMo/Megatron-Bridge "
                "docs/performance-summary-archive.md @ 067f987d (tests.megatron_runs.H100_FP8)",
            )
        )
    return tuple(out)


def _observation(case: Case) -> fit.Observation:
    return fit.Observation(
        case.id, lambda kn: case.model.with_stack(kn).evaluate(case.knobs).step_seconds, case.seconds
    )


def _base(name: str, device_of: Case) -> StackKnobs:
    return device_of.model.stack


@functools.cache
def fitted(name: str) -> dict[str, float]:
    """The values of ``FITS[name]`` fitted to the stack's calibration runs (and those of the stack it starts
    from)."""
    names, parent = FITS[name]
    runs = [c for c in cases() if c.stack == name and c.role == "calibration"]
    start = runs[0].model.stack
    if parent is not None:
        start = fit.knobs_with(start, fitted(parent))
        runs = [c._replace(model=c.model.with_stack(fit.knobs_with(c.model.stack, fitted(parent)))) for c in runs]
    return fit.fit(start, names, [_observation(c) for c in runs])


def knobs_of(case: Case) -> StackKnobs:
    """The stack values a case is predicted with: its profile's, as shipped (``stacks/*.yaml``)."""
    return case.model.stack


def error(case: Case) -> float:
    """Predicted / measured tokens per second − 1 (measured / predicted seconds − 1)."""
    return case.seconds / case.model.evaluate(case.knobs).step_seconds - 1


def errors() -> dict[tuple[str, str], list[tuple[Case, float]]]:
    """(stack, role) → [(case, error)], in RUNS order."""
    out: dict[tuple[str, str], list[tuple[Case, float]]] = {}
    for case in cases():
        out.setdefault((case.stack, case.role), []).append((case, error(case)))
    return out


def _stats(values: list[float]) -> tuple[float, float]:
    return sum(abs(v) for v in values) / len(values), max(abs(v) for v in values)


STACK_ORDER: Final = (
    "megatron-core",
    "megatron-core-moe",
    "megatron-core-moe-a2a-overlap",
    "torchtitan",
    "torchtitan-eager",
    "torchtitan-2025",
    "llm-foundry",
    "deepspeed",
)


def summary_markdown() -> str:
    """The per-stack error table of the README: calibration and validation apart."""
    lines = [
        "| stack | calibration runs | mean \\|error\\| | max \\|error\\| | validation runs | mean \\|error\\| | "
        "max \\|error\\| | fitted |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    table = errors()
    every: list[float] = []
    for name in STACK_ORDER:
        cal = [e for _, e in table.get((name, "calibration"), [])]
        val = [e for _, e in table.get((name, "validation"), [])]
        every += val
        cal_text = "{} | {:.1%} | {:.1%}".format(len(cal), *_stats(cal)) if cal else "0 | – | –"
        val_text = "{} | {:.1%} | {:.1%}".format(len(val), *_stats(val)) if val else "0 | – | –"
        what = ", ".join(FITS[name][0]) if name in FITS else "nothing"
        lines.append(f"| {name} | {cal_text} | {val_text} | {what} |")
    mean, worst = _stats(every)
    lines.append(f"| all validation | | | | {len(every)} | {mean:.1%} | {worst:.1%} | |")
    return "\n".join(lines) + "\n"


def runs_markdown(name: str) -> str:
    """Every run of one stack with its error."""
    lines = ["| run | role | measured tokens/s/GPU | napkin | error |", "|---|---|---:|---:|---:|"]
    for role in ("calibration", "validation"):
        for case, e in errors().get((name, role), []):
            tps = case.model.batch * case.model.seq / case.seconds / case.knobs.layout().gpus
            lines.append(f"| {case.id} | {role} | {tps:,.0f} | {tps * (1 + e):,.0f} | {e:+.1%} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["fit"]:
        for name in FITS:
            print(name, {k: round(v, 4) for k, v in fitted(name).items()})
    else:
        print(summary_markdown())
        for name in STACK_ORDER:
            print(f"{name}\n\n{runs_markdown(name)}")


#: Validation runs whose published layout ``rank_markdown`` places in napkin's own plan (one per stack and
#: scale where a plan has a choice to make).
RANKED: Final = (
    "bloom-176b-iter85376",
    "torchtitan-2412-t4-0",
    "nemo-2407-llama2-70b-g64",
    "nemo-2407-gpt3-175b-g512",
    "foundry-h100_80gb-amp_bf16-mpt70b-s2048-g512",
    "foundry-h100_80gb-amp_bf16-mpt7b-s2048-g128",
)


class Plan(NamedTuple):
    """napkin's plan for a run's model, GPUs, batch and stack: the sort key of every layout the planner enumerates
    that fits, in the plan's order ((outside the stack's validated region by its own choices, predicted step
    seconds): the validated layouts first, each group fastest first), and its #1 in the plan table's words."""

    keys: list[tuple[bool, float]]
    best: str
    explore: bool = False  # ranked by predicted step time alone (napkin plan --explore)


def plan_of(case: Case, explore: bool = False) -> Plan:
    """The plan ``plan_rank`` places a case's published layout in (``napkin.engines.planner.ranked``)."""
    from napkin.engines.planner import ranked
    from napkin.engines.step.region import outside_layout

    sm = case.model
    scored = ranked(sm, case.knobs.layout().gpus, explore=explore)[1]
    if not scored:
        return Plan([], "none: no layout the planner enumerates fits", explore)
    best = scored[0][1]
    keys = [(not explore and bool(outside_layout(sm, k)), t) for t, k, _ in scored]
    assert keys == sorted(keys), "the planner's order is not this key's"  # plan_rank bisects it
    return Plan(keys, f"{best.layout().describe(compact=True)} b{best.micro_batch}", explore)


def plan_rank(case: Case, plan: Plan | None = None) -> tuple[int, int, float, str]:
    """Where the published layout ranks among every layout napkin's planner enumerates for the run's model,
    GPUs, batch and stack that fits, in the plan's order: (rank, layouts that fit, predicted time of the published
    layout / of the planner's #1, the #1). ``plan``: ``plan_of(case)`` when the caller has it (runs that share a
    plan)."""
    from napkin.engines.step.region import outside_layout

    plan = plan_of(case) if plan is None else plan
    published = case.model.evaluate(case.knobs).step_seconds
    key = (not plan.explore and bool(outside_layout(case.model, case.knobs)), published * (1 - 1e-9))
    rank = 1 + bisect.bisect_left(plan.keys, key)
    if not plan.keys:
        return rank, 0, 1.0, plan.best
    return rank, len(plan.keys), published / plan.keys[0][1], plan.best


def rank_markdown() -> str:
    """The README's table: each ranked run's published layout in napkin's plan."""
    lines = [
        "| run | stack | published layout | rank in napkin's plan | of | step vs #1 | napkin's #1 |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    by_id = {c.id: c for c in cases()}
    for rid in RANKED:
        case = by_id[rid]
        rank, fitting, ratio, best = plan_rank(case)
        layout = f"{case.knobs.layout().describe(compact=True)} b{case.knobs.micro_batch}"
        lines.append(f"| {rid} | {case.stack} | {layout} | {rank:,} | {fitting:,} | {ratio:.2f}× | {best} |")
    return "\n".join(lines) + "\n"


#: Peak memory per GPU the torchtitan runs measured, GiB (the max over GPUs; the same sources as RUNS).
MEASURED_GIB: Final = {
    "torchtitan-2412-t1-0": 82.4,
    "torchtitan-2412-t1-1": 77.0,
    "torchtitan-2412-t1-2": 76.8,
    "torchtitan-2412-t3-0": 67.0,
    "torchtitan-2412-t3-1": 62.0,
    "torchtitan-2412-t3-2": 61.8,
    "torchtitan-2412-t2-0": 83.9,
    "torchtitan-2412-t2-1": 84.2,
    "torchtitan-2412-t2-2": 84.0,
    "torchtitan-2412-t2-3": 84.5,
    "torchtitan-2412-t4-0": 71.9,
    "torchtitan-2506-trainy-h200-8b-4n": 47.96,
    "torchtitan-2506-trainy-h200-8b-8n": 46.97,
}


def memory_cases() -> list[tuple[Case, float, float]]:
    """(case, napkin's bytes per GPU, measured bytes) of every run with a measured peak."""
    out = []
    for case in cases():
        if case.id in MEASURED_GIB:
            out.append((case, case.model.memory_bytes(case.knobs), MEASURED_GIB[case.id] * 2**30))
    return out


def memory_markdown() -> str:
    """Measured peak memory against napkin's, torchtitan's runs."""
    lines = ["| run | role | measured GiB | napkin GiB | error |", "|---|---|---:|---:|---:|"]
    for case, got, measured in memory_cases():
        lines.append(
            f"| {case.id} | {case.role} | {measured / 2**30:.1f} | {got / 2**30:.1f} | {got / measured - 1:+.1%} |"
        )
    return "\n".join(lines) + "\n"


#: The stacks whose allocator overhead (memory.fragmentation) is fitted to the measured peaks of their
#: calibration runs: torchtitan's "Memory (GiB)" is the caching allocator's peak reserved bytes
#: (torchtitan/metrics.py: max_reserved_gib, torch.cuda.memory_stats()["reserved_bytes.all.peak"]), which
#: exceeds the peak allocated bytes napkin counts by the allocator's fragmentation and cached free blocks. It
#: excludes the CUDA context and NCCL's own buffers (outside the allocator), so memory.fixed is not fitted.
FRAGMENTATION_FITS: Final = ("torchtitan", "torchtitan-eager")


def allocated(case: Case) -> float:
    """napkin's peak allocated bytes of a case: its stack's memory without fragmentation and fixed bytes."""
    knobs = case.model.stack.replace(fragmentation=0.0, fixed_bytes=0.0)
    return case.model.with_stack(knobs).memory_bytes(case.knobs)


@functools.cache
def fitted_fragmentation(name: str) -> float:
    """The mean measured reserved / napkin allocated − 1 over the stack's calibration runs with a measured peak."""
    ratios = [
        MEASURED_GIB[c.id] * 2**30 / allocated(c)
        for c in cases()
        if c.stack == name and c.role == "calibration" and c.id in MEASURED_GIB
    ]
    return sum(ratios) / len(ratios) - 1


class FitRun(NamedTuple):
    """A published run with no measured peak: it ran, so its most loaded GPU fits the device at its layout."""

    id: str
    tokens_per_gpu: float  # measured tokens/s per GPU
    options: dict[str, object]  # napkin.memory's keywords for its layout (``hardware`` included)
    source: str


#: Megatron-Bridge's Llama 3 70B FP8 (current scaling) pre-training on 64 GB200 of the performance summary archive
#: (NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md @ 067f987d, DGX-GB200 rows of 25.11 and
#: 26.04.01: MBS 2, GBS 256, sequence 8,192, TP 1, PP 1, CP 1, Megatron-FSDP over the 64 ranks), at its recipe:
#: LLAMA3_70B_GB200_FP8_CS_BASE_CONFIG (scripts/performance/configs/llama3/workload_base_configs.py @ v0.2.0 and
#: v0.2.2) and LLAMA3_70B_PRETRAIN_CONFIG_GB200_FP8_CS_V2 (configs/llama/llama3_workload_base_configs.py @ v0.3.0 to
#: v0.5.0): micro_batch_size=2, use_megatron_fsdp=True, cpu_offloading_num_layers=40, which the scripts apply as
#: cpu_offloading=True, cpu_offloading_weights=False (scripts/performance/utils/helpers.py @ v0.2.0
#: set_recompute_overrides; utils/overrides.py @ v0.4.0): 40 of the 80 layers' activations offloaded, the weights
#: not; no recomputation (Megatron-Core refuses it with CPU offloading).
BRIDGE_GB200_LLAMA3_70B: Final = {
    "model": "llama3-70b",
    "gpus": 64,
    "hardware": "gb200",
    "stack": "megatron-core",
    "dtype": "fp8",
    "sharding": "fsdp",
    "micro_batch": 2,
    "global_batch": 256,
    "seq": 8192,
    "activation_offload_layers": 40,
}
#: The 25.09 DGX-GB200 rows of the same archive (no precision column; the footnote's parenthesised figures are
#: the MXFP8 ones, so the others are FP8 current scaling), at the recipe of v0.1.0rc4 (2025-10-23,
#: scripts/performance/configs/llama3/llama3_70b_llm_pretrain.yaml and llama31/llama31_405b_llm_pretrain.yaml,
#: perf_matrix gb200 fp8_cs): Llama 3 70B at GBS 128, MBS 2, FSDP, cpu_offloading_num_layers 40; Llama 3.1 405B on
#: 128 GPUs at TP 2, GBS 64, MBS 1, FSDP, cpu_offloading_num_layers 95 (92 at v0.2.0,
#: configs/llama31/workload_base_configs.py LLAMA31_405B_GB200_FP8_CS_BASE_CONFIG).
BRIDGE_2509: Final = "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md @ 067f987d (25.09, DGX-GB200)"
FIT_RUNS: Final = (
    FitRun(
        "mb-25.09-llama3-70b-gb200-g64",
        3986,
        {**BRIDGE_GB200_LLAMA3_70B, "global_batch": 128},
        BRIDGE_2509,
    ),
    FitRun(
        "mb-25.09-llama3.1-405b-gb200-g128",
        729,
        {
            "model": "llama3.1-405b",
            "gpus": 128,
            "hardware": "gb200",
            "stack": "megatron-core",
            "dtype": "fp8",
            "tensor_parallel": 2,
            "sharding": "fsdp",
            "micro_batch": 1,
            "global_batch": 64,
            "seq": 8192,
            "activation_offload_layers": 95,
        },
        BRIDGE_2509,
    ),
    FitRun(
        "mb-25.11-llama3-70b-gb200-g64",
        4312,
        BRIDGE_GB200_LLAMA3_70B,
        "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md @ 067f987d (DGX-GB200, 25.11)",
    ),
    FitRun(
        "mb-26.04.01-llama3-70b-gb200-g64",
        4224,
        BRIDGE_GB200_LLAMA3_70B,
        "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md @ 067f987d (DGX-GB200, 26.04.01)",
    ),
)
