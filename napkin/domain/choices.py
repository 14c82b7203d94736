"""The closed sets of names napkin accepts (dtypes, optimizers, precisions, …), as string enums.

Kept apart from the engines so the CLI can declare its options without importing them; pure Python,
cheap to import.
"""

from enum import StrEnum
from typing import Final


class Dtype(StrEnum):
    """Number formats a peak FLOP/s figure can be given for (dense tensor-core/matrix peaks)."""

    fp64 = "fp64"
    fp64_tensor = "fp64_tensor"
    fp32 = "fp32"
    tf32 = "tf32"
    bf16 = "bf16"
    fp16 = "fp16"
    fp8 = "fp8"
    fp6 = "fp6"
    fp4 = "fp4"
    int8 = "int8"


#: Bytes per stored element, by the dtype names of hardware peaks and of ``napkin dtypes`` (tf32 is an
#: fp32 compute mode, stored as fp32; fp6 and fp4 are packed). The one table napkin has.
STORAGE_BYTES: dict[str, float] = {
    "fp64": 8.0,
    "fp64_tensor": 8.0,
    "fp32": 4.0,
    "tf32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "fp8-e4m3": 1.0,
    "fp8-e5m2": 1.0,
    "int8": 1.0,
    "fp6": 0.75,
    "fp4": 0.5,
}


class Recompute(StrEnum):
    none = "none"
    selective = "selective"  # re-run QKᵀ, softmax and A·V in the backward pass
    full = "full"  # re-run each block's forward (one extra forward pass)


class Optimizer(StrEnum):
    sgd = "sgd"
    sgd_momentum = "sgd-momentum"
    adagrad = "adagrad"
    rmsprop = "rmsprop"
    adam = "adam"
    adamw = "adamw"
    adafactor = "adafactor"
    lion = "lion"
    adam_8bit = "adam-8bit"
    muon = "muon"


class Precision(StrEnum):
    fp32 = "fp32"  # everything 4 B
    mixed = "mixed"  # 16-bit params and grads, fp32 master weights and states (ZeRO)
    mixed_fp32_grads = "mixed-fp32-grads"  # 16-bit params, fp32 grads, master, states (Megatron/DeepSpeed)
    bf16 = "bf16"  # pure 16-bit, no master copy


class Sharding(StrEnum):
    none = "none"  # DDP: every GPU holds everything
    zero1 = "zero1"  # optimizer states (and master weights) partitioned
    zero2 = "zero2"  # + gradients
    zero3 = "zero3"  # + parameters
    fsdp = "fsdp"  # PyTorch FSDP FULL_SHARD ≈ ZeRO-3
    hsdp = "hsdp"  # FSDP within a scale-up domain (HYBRID_SHARD), the shards replicated across domains


#: One strategy under two names: PyTorch FSDP's FULL_SHARD is ZeRO-3 (a stack names it as its framework does).
FULL_SHARD: Final = frozenset({Sharding.zero3, Sharding.fsdp})


class Offload(StrEnum):
    none = "none"
    optimizer = "optimizer"  # gradients, master weights and optimizer states in CPU memory (ZeRO-Offload)
    params = "params"  # + parameters (ZeRO-Infinity, FSDP CPUOffload)


class Fit(StrEnum):
    epoch = "epoch"
    hoffmann = "hoffmann"


class Mlp(StrEnum):
    gelu = "gelu"  # two matrices: d→F, F→d (GPT-2/3, GPT-NeoX, GPT-J, Falcon; ReLU counts the same)
    swiglu = "swiglu"  # three matrices: gate, up (d→F) and down (F→d)
    geglu = "geglu"  # three matrices, GELU on the gate (Shazeer 2020; Gemma 1/2/3)

    @property
    def gated(self) -> bool:
        """Gated linear unit: a gate and an up projection (3 matrices) instead of one (2)."""
        return self is not Mlp.gelu


class QkNorm(StrEnum):
    """Learned normalisation of queries and keys before RoPE (its weights are parameters)."""

    none = "none"
    head = "head"  # one d_h-wide weight each for Q and K, shared by the heads (Qwen3, Gemma 3)
    full = "full"  # over the whole projection: a·d_h for Q, n_kv·d_h for K (OLMo 2)


class Norm(StrEnum):
    layernorm = "layernorm"  # γ and β
    rmsnorm = "rmsnorm"  # γ only
    layernorm_nobias = "layernorm_nobias"  # mean-centred, γ only, computed in fp32 (CohereLayerNorm, Command R/A)


class Finetune(StrEnum):
    """What fine-tuning trains: every parameter, or low-rank adapters on a frozen base."""

    full = "full"  # every parameter: the training memory of napkin memory
    lora = "lora"  # adapters on a frozen 16-bit base (Hu et al. 2021)
    qlora = "qlora"  # adapters on a frozen NF4 base with double quantization (Dettmers et al. 2023)


class TrainDtype(StrEnum):
    """How LoRA adapters, or the embeddings and LM head beside a frozen base, are stored."""

    fp32 = "fp32"
    bf16 = "bf16"


class BaseFormat(StrEnum):
    """How a frozen base model's linear weights are stored."""

    bf16 = "bf16"
    int8 = "int8"  # LLM.int8 (bitsandbytes Int8Params)
    nf4 = "nf4"  # 4-bit NormalFloat (bitsandbytes Params4bit)
