"""Training memory per GPU: model states, activations, pipeline stages, the stack's own bytes, and the largest
model that fits. Pure functions, no I/O; each formula cites napkin.sources.

    states.py    bytes per parameter (optimizer × precision, a stack's gradient and moment bytes), sharding
    stages.py    activation inputs, each pipeline stage's bytes on one GPU, the stack's own (framework) bytes
    cached.py    a stack's own activation policy: FP8-cached linear inputs, recomputed cheap operators
                 (DeepSeek-V3 §3.2.3, §3.3.3)
    result.py    ``memory()`` and ``MemoryResult``: the most loaded GPU, whether it fits (``capacity``)
    largest.py   ``max_model()`` and ``MaxModelResult``: the largest N, and the deepest model of a shape

    model states = (params + gradients + master weights + optimizer states) bytes × N     (ZeRO §3.1)
    ZeRO-1: P + G + (M + S)/N_d    ZeRO-2: P + (G + M + S)/N_d    ZeRO-3/FSDP: (P + G + M + S)/N_d  (ZeRO §5)
    activations per layer: napkin.engines.activations (Korthikanti et al. 2022 Table 2, generalised to GQA, SwiGLU,
    no dropout, MoE, CP), per pipeline stage × micro-batches in flight (1F1B / interleaved / DualPipe), +
    embedding and the logits on the stages holding them; the most loaded stage is the per-GPU figure.
"""

from typing import TYPE_CHECKING, Final

from napkin.engines.memory.cached import all_to_all_bytes, cached_layer_bytes
from napkin.engines.memory.per_gpu import memory
from napkin.engines.memory.result import USABLE_BAND, MemoryResult, StageRow, capacity, parse_reserve
from napkin.engines.memory.stages import (
    MIRRORED,
    OFFLOADED,
    ActivationInputs,
    ActivationParts,
    StageMemory,
    StageStates,
    activation_bytes_per_layer,
    activation_parts,
    activation_source,
    framework_bytes,
    gather_buffers,
    held_stages,
    offloaded_activations,
    per_gpu_bytes,
    rank_layers,
    stage_activations,
    stage_in_flight,
    stage_indices,
    stage_memory,
    stage_states,
)
from napkin.engines.memory.states import (
    BYTES_8BIT_STATE,
    COMPONENTS,
    GATHERED,
    GPUS_PER_NODE,
    OPTIMIZERS,
    PRECISIONS,
    SHARDED,
    BytesPerParam,
    OptimizerSpec,
    OptimizerTable,
    PrecisionSpec,
    activation_element_bytes,
    bytes_per_param,
    optimizers,
    per_gpu_bytes_per_param,
    shard_ranks,
    stack_bytes_per_param,
    state_elements,
)
from napkin.lazy import lazy_attributes

if TYPE_CHECKING:
    from napkin.engines.memory.largest import EXCLUDED, MaxModelResult, max_model

#: Imported when first asked for: a command that checks a layout (step, plan) never solves for the largest model.
_LARGEST: Final = ("EXCLUDED", "MaxModelResult", "max_model")


__getattr__ = lazy_attributes(__name__, dict.fromkeys(_LARGEST, ".largest"))


__all__ = [
    "BYTES_8BIT_STATE",
    "COMPONENTS",
    "EXCLUDED",
    "GATHERED",
    "GPUS_PER_NODE",
    "MIRRORED",
    "OFFLOADED",
    "OPTIMIZERS",
    "PRECISIONS",
    "SHARDED",
    "USABLE_BAND",
    "ActivationInputs",
    "ActivationParts",
    "BytesPerParam",
    "MaxModelResult",
    "MemoryResult",
    "OptimizerSpec",
    "OptimizerTable",
    "PrecisionSpec",
    "StageMemory",
    "StageRow",
    "StageStates",
    "activation_bytes_per_layer",
    "activation_element_bytes",
    "activation_parts",
    "activation_source",
    "all_to_all_bytes",
    "bytes_per_param",
    "cached_layer_bytes",
    "capacity",
    "framework_bytes",
    "gather_buffers",
    "held_stages",
    "max_model",
    "memory",
    "offloaded_activations",
    "optimizers",
    "parse_reserve",
    "per_gpu_bytes",
    "per_gpu_bytes_per_param",
    "rank_layers",
    "shard_ranks",
    "stack_bytes_per_param",
    "stage_activations",
    "stage_in_flight",
    "stage_indices",
    "stage_memory",
    "stage_states",
    "state_elements",
]
