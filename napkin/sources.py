"""Citations for every formula and constant napkin uses.

Each is shown by ``--explain`` next to the step it justifies: a paper (arXiv id and section), a
datasheet, or a repository file, always a primary source.
"""

from typing import Final

KAPLAN_6ND: Final = "Kaplan et al. 2020, arXiv:2001.08361 §2.1 (C ≈ 6N per token)"
PALM_6N: Final = "PaLM, Chowdhery et al. 2022, arXiv:2204.02311 App. B (2N forward + 4N backward)"
PALM_ATTENTION: Final = "PaLM App. B: attention adds 6·L·H·(2·Q·T) = 12·L·H·Q·T FLOPs per token"
CAUSAL_ATTENTION: Final = "causal halving as in Megatron-LM num_floating_point_operations (2025-03, commit 8873b55d6a)"
NARAYANAN_RECOMPUTE: Final = (
    "Narayanan et al. 2021, arXiv:2104.04473 §5.1 eq. (3)-(4): full recomputation = one extra forward (8·N·D)"
)
MFU_PUBLISHED: Final = (
    "published dense-training MFU: PaLM 540B 46.2 % (Chowdhery et al. 2022 Table 3), Llama 3 405B 38-43 % "
    "(Dubey et al. 2024, arXiv:2407.21783 Table 4), MegaScale 55.2 % (Jiang et al. 2024, arXiv:2402.15627 Table 2)"
)
PALM_MFU: Final = "PaLM §4.1 and App. B: MFU = achieved tokens/s × model FLOPs per token / peak FLOP/s"
TIME: Final = "t = C / (n_gpu × peak × MFU) (PaLM App. B; Narayanan eq. 4 with X = peak × MFU)"
MATMUL: Final = "Narayanan et al. 2021 App.: an (m×k)·(k×n) matmul needs 2·m·k·n FLOPs"
ROOFLINE: Final = "Williams, Waterman & Patterson 2009, Roofline (CACM 52(4)): ridge = peak / bandwidth"
ZERO_16: Final = "ZeRO, Rajbhandari et al. 2019, arXiv:1910.02054 §3.1 (mixed-precision Adam: 2+2+12 = 16 B)"
ZERO_STAGES: Final = "ZeRO §5.1-5.3 and Fig. 1: 4Ψ+KΨ/N_d, 2Ψ+(2+K)Ψ/N_d, (4+K)Ψ/N_d"
HSDP: Final = (
    "PyTorch FSDP ShardingStrategy.HYBRID_SHARD (torch/distributed/fsdp/api.py): FULL_SHARD within a node, "
    "replicated across nodes; FSDP2 fully_shard on a 2-D (replicate, shard) mesh"
)
FSDP: Final = "PyTorch FSDP ShardingStrategy.FULL_SHARD ≈ ZeRO-3 (torch/distributed/fsdp/api.py)"
MEGATRON_18: Final = "Megatron-LM dist_optimizer.md / theoretical_memory_usage.py: bf16 params + fp32 grads = 18 B"
KORTHIKANTI: Final = "Korthikanti et al. 2022, arXiv:2205.05198 §4, Table 2 (activations per layer)"
ZERO_OFFLOAD: Final = (
    "ZeRO-Offload, Ren et al. 2021, arXiv:2101.06840 §4 (fp32 master + optimizer states on CPU); "
    "ZeRO-Infinity, Rajbhandari et al. 2021, arXiv:2104.07857 (parameters too)"
)
PIPELINE_MEMORY: Final = (
    "Narayanan et al. 2021, arXiv:2104.04473 §2.2 (1F1B: stage i holds p − i micro-batches); Korthikanti 2022 "
    "§4.2.3 (interleaved: × (1 + (p−1)/(p·v))); Megatron-LM schedules.py, theoretical_memory_usage.py (logits)"
)
FLASH: Final = "FlashAttention, Dao et al. 2022, arXiv:2205.14135 §3.1: the s×s scores are never stored"
CHINCHILLA_20: Final = "Hoffmann et al. 2022, arXiv:2203.15556 Table 3 (≈20 tokens per parameter)"
CHINCHILLA_LAW: Final = "Hoffmann et al. 2022 eq. (2), (4): L = E + A/N^α + B/D^β"
EPOCH_REFIT: Final = (
    "Besiroglu et al. 2024 (Epoch AI), arXiv:2404.10102: refit E=1.8172 A=482.01 B=2085.43 α=0.3478 β=0.3658"
)
HOFFMANN_CONSTANTS: Final = "Hoffmann et al. 2022 App. D.2 eq. (10), as published: E=1.69 A=406.4 B=410.7 α=0.34 β=0.28"
PARAMS: Final = "decoder-only parameter count (Kaplan Table 1; Narayanan eq. 2; Megatron theoretical_memory_usage.py)"
ENERGY: Final = "energy = GPU-hours × board power × PUE (board power from the profile's datasheet)"
KV_CACHE: Final = (
    "Pope et al. 2022, arXiv:2211.05102 §2 (KV cache = 2·L·n_kv·d_h per token); meta-llama/llama3 model.py "
    "(cache_k, cache_v: max_batch × max_seq × n_local_kv_heads × head_dim)"
)
LLAMA4_CHUNKED: Final = (
    "huggingface/transformers v5.24 models/llama4 (configuration_llama4.py layer_types, modeling_llama4.py): "
    "chunked attention on three layers in four, each query attending within its chunk of attention_chunk_size "
    "tokens, so those layers keep at most one chunk"
)
MISTRAL: Final = "Jiang et al. 2023, Mistral 7B, arXiv:2310.06825 §2 (sliding window: a rolling cache of W tokens)"
PAGED: Final = "Kwon et al. 2023, PagedAttention, arXiv:2309.06180 §4 (KV blocks; vLLM block_size 16)"
GQA_TP: Final = (
    "vLLM QKVParallelLinear (vllm/model_executor/layers/linear.py): KV heads split over TP, replicated when tp > n_kv"
)
QUANT_GROUPS: Final = (
    "GPTQ, Frantar et al. 2022, arXiv:2210.17323; AWQ, Lin et al. 2023, arXiv:2306.00978: weight-only int4/int8, "
    "one fp16 scale per group of 128"
)
MEGATRON_TP: Final = "Shoeybi et al. 2019, Megatron-LM, arXiv:1909.08053 §3 (column/row-parallel matrices)"
VLLM_PROFILE: Final = (
    "vLLM sizes its activation workspace by a dummy forward of max_num_batched_tokens (default 8192); "
    "napkin's estimate of that peak"
)
STACK_MEMORY: Final = (
    "the serving stack's memory rule (stacks/*.yaml: vLLM vllm/v1/worker/gpu_worker.py determine_available_memory; "
    "SGLang model_runner.py profile_max_num_token; TensorRT-LLM KvCacheConfig.free_gpu_memory_fraction)"
)
STACK_RATES: Final = (
    "the serving stack's achieved fractions of HBM bandwidth and dense peak and its step cost (stacks/*.yaml), "
    "fitted on calibration rows of examples/serving_runs.yaml (README, serving validation)"
)
ORCA: Final = "Yu et al. 2022, Orca, OSDI '22 §3: iteration-level scheduling of a batch of requests"
SARATHI: Final = "Agrawal et al. 2024, Sarathi-Serve, arXiv:2403.02310 §4: chunked prefill under a token budget"
SPECULATIVE: Final = (
    "Leviathan, Kalman & Matias 2023, arXiv:2211.17192 §3.1 eq. (1): expected tokens per step (1 − α^(γ+1)) / (1 − α)"
)
POPE_DECODE: Final = "Pope et al. 2022, arXiv:2211.05102 §2-3: small-batch decode is bound by loading weights and KV"
MOE_DISPATCH: Final = (
    "Megatron-LM megatron/core/transformer/moe/token_dispatcher.py, MoEAlltoAllTokenDispatcher: permute, A2A(EP), "
    "AG(TP), experts, RS(TP), A2A(EP), unpermute"
)
MOE_HOST: Final = (
    "host launches per local expert: Transformer Engine GroupedLinear loops over its experts in Python and C++ "
    "(pytorch/module/grouped_linear.py @ 5671fd36: a weight workspace, a main_grad hook and a wgrad per expert; "
    "one cuBLAS GEMM per expert, common/gemm/cublaslt_gemm.cu), one Parameter and DDP backward hook per expert "
    "weight (Megatron-LM megatron/core/distributed/distributed_data_parallel.py @ b0cc2706); Megatron-LM's MoE "
    "guide: 'CPU Overhead Bottleneck' (megatron/core/transformer/moe/README.md @ d98e8a64)"
)
MOE_ROUTING: Final = "expected distinct experts hit by b tokens each routed to k of E, uniform routing (assumption)"
NCCL_TESTS_BUSBW: Final = (
    "NVIDIA/nccl-tests doc/PERFORMANCE.md: algbw = S/t; busbw = algbw × 2(n−1)/n (all-reduce), "
    "× (n−1)/n (all-gather, reduce-scatter, all-to-all), × 1 (broadcast, send/recv)"
)
THAKUR_ALPHA_BETA: Final = (
    "Thakur, Rabenseifner & Gropp 2005, IJHPCA 19(1): t = steps·α + traffic·β (ring all-reduce 2(p−1)α + 2(p−1)/p·nβ)"
)
NCCL_LATENCY: Final = (
    "NVIDIA/nccl src/graph/tuning.cc: baseLat 8.4 µs (Simple), 14 (LL128), 6.8 (LL) per collective; hwLat per "
    "ring hop: NVLink 3.4 / 1.9 / 0.6 µs, network 14 / 4.0 / 2.7 µs; LL carries 4 B of data per 8 B, LL128 "
    "120 B per 128 B"
)
NCCL_EFFICIENCY: Final = (
    "NVIDIA/nccl-tests issue #212 (S. Jeaugey, NVIDIA, 2024): NVLink 4 line rate 450 GB/s, ~370 GB/s effective "
    "for a ring (~20 % protocol overhead); NVLS all-reduce algbw ~275 GB/s on 8 H100"
)
CALCULON_NETWORK: Final = (
    "Calculon (Isaev et al. 2023, SC'23; calculon/network.py): per-network bandwidth × efficiency, latency, "
    "and per-collective traffic factors; a node's NICs shared by its devices"
)
MAMF: Final = (
    "stas00/ml-engineering compute/accelerator/README.md, Maximum Achievable Matmul FLOPS table (BF16, mamf-finder.py; "
    "B200 SXM and GB200 SXM rows @ 744d01e1)"
)
TILE_QUANTIZATION: Final = "NVIDIA Deep Learning Performance Guide, Matrix Multiplication Background: tile quantization"
MATMUL_SIZE: Final = (
    "Calculon (Isaev et al. 2023, SC'23) systems/a100_80g.json matrix gflops_efficiency, normalised to its top entry"
)
GROUPED_GEMM: Final = (
    "NVIDIA/TransformerEngine v2.12 transformer_engine/common/gemm/cublaslt_gemm.cu multi_stream_cublas_gemm "
    "(one cuBLAS GEMM per expert) and common/util/multi_stream.cpp (num_compute_streams = 4)"
)
HBM_EFFICIENCY: Final = "Calculon (Isaev et al. 2023, SC'23) systems/a100_80g.json mem1 MB_efficiency"
ELEMENTWISE: Final = (
    "Korthikanti et al. 2022, arXiv:2205.05198 §4.1 (the tensors each layer's non-matmul ops read and write)"
)
TP_COMM: Final = (
    "Narayanan et al. 2021, arXiv:2104.04473 §3.2 (2 all-reduces per layer forward, 2 backward); Korthikanti et al. "
    "2022 §4.2.2 (sequence parallelism: reduce-scatter + all-gather, same bytes)"
)
TP_OVERLAP: Final = (
    "NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/training/comm_overlap.py @ 0685ff5d (H100 presets such as "
    "userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192 overlap every TP collective of a layer, forward, dgrad and "
    "wgrad, with a GEMM: ring exchange, pipelined or bulk; tp_comm_overlap is turned off for TP < 2 or without "
    "sequence parallelism); NVIDIA/TransformerEngine transformer_engine/common/userbuffers/comm_gemm_overlap.h "
    "@ 939f9b6f (the overlap algorithms)"
)
P2P_OVERLAP: Final = (
    "NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/training/comm_overlap.py @ 0685ff5d: overlap_p2p_comm with the "
    "interleaved schedule (virtual pipeline > 1), batch_p2p_comm (in line) otherwise"
)
PIPELINE_BUBBLE: Final = "Narayanan et al. 2021 §2.2.1-2.2.2: bubble (p−1)/m for 1F1B, (p−1)/(v·m) interleaved"
SCATTER_GATHER: Final = (
    "Narayanan et al. 2021 §4.1 (scatter/gather: each TP rank sends 1/t of the activation across nodes, the "
    "receiving stage all-gathers it over NVLink)"
)
ZERO3_MEASURED: Final = (
    "ZeRO-3 (FSDP) across nodes at this stack's NCCL bandwidth, overlapped layer by layer; DeepSpeed's ZeRO-3 runs of "
    "Narayanan et al. 2021 Table 2 reach 9 % of it (--stack deepspeed); fit yours with 'napkin calibrate'"
)
FLASH_EFFICIENCY: Final = (
    "FlashAttention-3 (Shah et al. 2024, arXiv:2407.08608), BF16 on H100: up to 740 TFLOP/s forward (75 % of the "
    "peak) and 561 TFLOP/s backward (head dim 128, 16k), the backward counted as 2.5× the forward's FLOPs (QKᵀ "
    "recomputed), as the FlashAttention benchmarks count it; FlashAttention-2 (Dao 2023, arXiv:2307.08691) reaches "
    "50-73 % of the A100's peak forward"
)
TE_FP8_SCOPE: Final = (
    "NVIDIA TransformerEngine transformer_engine/common/recipe/__init__.py (fp8_dpa = False: attention stays "
    "16-bit); Megatron-LM megatron/core/models/gpt/gpt_model.py (the output layer is a 16-bit "
    "ColumnParallelLinear unless fp8_output_proj with MXFP8)"
)
NO_OVERLAP: Final = (
    "Calculon (Isaev et al. 2023, SC'23): processing_mode no_overlap in systems/a100_80g.json and "
    "h100_80g_nvl8.json, calculon/system.py get_processing_time (flops time + memory time)"
)
GRADIENT_ACCUMULATION: Final = (
    "PyTorch autograd AccumulateGrad adds each new .grad into the stored one in place (read both, write one); "
    "Megatron-LM de7dc40f (2021) accumulated fp16 gradients that way; 83b1e42f (2022-02-13, on unless "
    "--no-gradient-accumulation-fusion, for fp32 gradient accumulation) fuses the add into the weight-gradient "
    "GEMM (fused_dense_cuda.wgrad_gemm_accum_fp32), 07916bf2 (2022-09-27) for fp16 gradients too"
)
DP_OVERLAP: Final = (
    "ZeRO §5 (Rajbhandari et al. 2019): stages 1-2 move what an all-reduce does, stage 3 adds parameter all-gathers; "
    "overlap with the last micro-batch's backward as Megatron-LM --overlap-grad-reduce"
)
LORA: Final = "Hu et al. 2021, LoRA, arXiv:2106.09685 §4.1: ΔW = B·A, r·(d_in + d_out) parameters per adapted matrix"
QLORA_NF4: Final = (
    "Dettmers et al. 2023, QLoRA, arXiv:2305.14314 §3: NF4 blocks of 64 with an fp32 absmax (0.5 bit/param); "
    "double quantization 8/64 + 32/(64·256) = 0.127 bit/param"
)
PEFT_DTYPES: Final = (
    "huggingface/peft get_peft_model(autocast_adapter_dtype=True): adapters in fp32; "
    "prepare_model_for_kbit_training casts non-quantized parameters to fp32 and enables gradient checkpointing"
)
QLORA_SCRIPT: Final = (
    "artidoro/qlora qlora.py get_accelerate_model (Dettmers et al. 2023's training script): with --bf16 every "
    "LoraLayer and embed_tokens/lm_head cast to bf16, norms kept fp32; optim paged_adamw_32bit (fp32 states), "
    "gradient_checkpointing True"
)
HF_CONFIG: Final = (
    "huggingface/transformers v5.24 models/<model_type>/configuration_*.py and modeling_*.py: what each family's "
    "config.json leaves to its defaults (tied embeddings, gated MLPs, per-layer attention types, norms)"
)
LORA_ACTIVATIONS: Final = (
    "huggingface/transformers v5.24 models/llama/modeling_llama.py (LlamaRMSNorm upcasts its input to fp32; sdpa "
    "attention) with huggingface/peft v0.21.2 tuners/lora/layer.py Linear.forward (x cast to the adapter dtype): "
    "saved tensors counted with torch.autograd.graph.saved_tensors_hooks (tests/test_finetune.py)"
)
FINETUNE_RUNTIME: Final = (
    "napkin fit: the mean excess of QwenLM/Qwen README @ 2df8e8a 'Profiling of Memory and Speed' (one A100, "
    "PyTorch 2.0, LoRA r 64) over the counted tensors on its calibration rows (Qwen-7B and 14B at 256 tokens: "
    "1.49, 1.61 GB); validated on its 16 other rows (tests/test_finetune_published.py)"
)
NVFP4_LINEAR_INPUT: Final = (
    "0.5625 B: under an fp4 (NVFP4) recipe Transformer Engine's Linear keeps the quantized copy of its input it made "
    "for the forward GEMM, column-wise only, as under fp8 (inputmat.update_usage(rowwise_usage=False, "
    "columnwise_usage=True), transformer_engine/pytorch/module/linear.py @ d0067d0da); NVFP4 stores a 4-bit E2M1 "
    "value and one 1-byte E4M3 scale per 16 elements (NVFP4_BLOCK_SCALING_SIZE, tensor/nvfp4_tensor.py): 0.5 + 1/16"
)
LOSS_BACKWARD: Final = (
    "huggingface/transformers v5.24 loss/loss_utils.py ForCausalLMLoss (logits.float(), then "
    "torch.nn.functional.cross_entropy = log_softmax + nll_loss): the backward of the loss allocates a fp32 "
    "gradient of the log-probabilities and one of the logits while the fp32 log-probabilities are still held"
)
LORA_BACKWARD: Final = (
    "frozen weights need no weight gradient: backward = input gradients only, 2N per token instead of 4N "
    "(Narayanan et al. 2021 App. A split; Hu et al. 2021 §4.2); adapters cost 6 FLOPs per parameter per token"
)
FSDP_FP8_GATHER: Final = (
    "NVIDIA/Megatron-LM @ d98e8a64 megatron/core/distributed/fsdp/src/megatron_fsdp/param_and_grad_buffer.py: "
    "Float8Tensor parameters all-gathered in a uint8 buffer (param_dtype = torch.uint8), one byte each"
)
ACTIVATION_OFFLOAD: Final = (
    "Megatron-Core cpu_offloading_num_layers (NVIDIA/Megatron-LM @ d98e8a64 megatron/core/transformer/"
    "transformer_block.py, transformer_config.py: 0 ≤ k < layers, no pipeline parallelism, no recomputation) on "
    "Transformer Engine's DefaultOffloadSynchronizer (NVIDIA/TransformerEngine @ d0067d0d "
    "transformer_engine/pytorch/cpu_offload.py): layers 0…k−1 offloaded, layer i's copy started after its forward "
    "and waited for before layer L−k+i's, reloaded from before layer L−1−k+i's backward: the saved activations "
    "peak at (L − k) layers'"
)
OFFLOAD_OVERLAP: Final = (
    "the k copies run back to back on one stream beside the compute (TransformerEngine cpu_offload.py offload_stream):"
    " with c = one layer's bytes / host link and f one layer's forward (or backward), the compute waits "
    "max(0, k·c − (L−2)·f, c − (L−k−1)·f) per pass (the last copy's lag past its deadline)"
)
