"""Memory accounting: bytes per parameter (optimizer × precision), sharding, activations.

Pure functions, no I/O. Formulas (FORMULAS §5-7):

    model states = (params + gradients + master weights + optimizer states) bytes × N     (ZeRO §3.1)
    ZeRO-1: P + G + (M + S)/N_d    ZeRO-2: P + (G + M + S)/N_d    ZeRO-3/FSDP: (P + G + M + S)/N_d  (ZeRO §5)
    activations per layer = s·b·h·(34 + 5·a·s/h) bytes at 16 bits, and the TP/SP/recompute rows
                                                                               (Korthikanti et al. 2022, Table 2)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pydantic import ConfigDict, Field

from napkin import sources
from napkin.base import Record
from napkin.choices import Checkpointing, Optimizer, Precision, Sharding
from napkin.errors import UsageError
from napkin.explain import Step, step
from napkin.profiles import HardwareProfile
from napkin.transformer import ModelShape
from napkin.units import format_bytes, format_bytes_si, format_count, format_sci, parse_bytes, parse_fraction

COMPONENTS = ("params", "gradients", "master_weights", "optimizer_states")

#: bitsandbytes block-wise 8-bit state: 1 byte per element + one fp32 absmax per 2048-element block
#: (Dettmers et al. 2021, arXiv:2110.02861; bitsandbytes Optimizer2State.init_state).
BYTES_8BIT_STATE = 1 + 4 / 2048


@dataclass(frozen=True)
class OptimizerSpec:
    states: tuple[str, ...]  # the state tensors it allocates per parameter (same shape as the parameter)
    source: str
    note: str = ""
    state_bytes: float | None = None  # fixed bytes per state element, whatever the precision regime


OPTIMIZERS: dict[Optimizer, OptimizerSpec] = {
    Optimizer.sgd: OptimizerSpec((), "torch.optim.SGD (momentum=0): no state"),
    Optimizer.sgd_momentum: OptimizerSpec(("momentum_buffer",), "torch.optim.SGD: momentum_buffer"),
    Optimizer.adagrad: OptimizerSpec(("sum",), "torch.optim.Adagrad: state['sum']"),
    Optimizer.rmsprop: OptimizerSpec(
        ("square_avg",), "torch.optim.RMSprop: square_avg", "+1 state with momentum>0, +1 if centered"
    ),
    Optimizer.adam: OptimizerSpec(("exp_avg", "exp_avg_sq"), "Kingma & Ba 2014; torch.optim.Adam"),
    Optimizer.adamw: OptimizerSpec(("exp_avg", "exp_avg_sq"), "Loshchilov & Hutter 2019; torch.optim.AdamW"),
    Optimizer.adafactor: OptimizerSpec(
        (),
        "Shazeer & Stern 2018, arXiv:1804.04235; torch.optim.Adafactor (row_var, col_var)",
        "factored second moment: (n+m)/(n·m) states per parameter of an n×m matrix ≈ 0; no first moment",
    ),
    Optimizer.lion: OptimizerSpec(("exp_avg",), "Chen et al. 2023, arXiv:2302.06675: momentum only"),
    Optimizer.adam_8bit: OptimizerSpec(
        ("state1", "state2"),
        "Dettmers et al. 2021, arXiv:2110.02861; bitsandbytes Optimizer2State",
        "uint8 states + fp32 absmax per 2048-element block; tensors < 4096 elements stay 32-bit",
        state_bytes=BYTES_8BIT_STATE,
    ),
    Optimizer.muon: OptimizerSpec(
        ("momentum_buffer",),
        "KellerJordan/Muon muon.py",
        "for 2-D hidden weights; embeddings, head and gains use AdamW (2 states)",
    ),
}


@dataclass(frozen=True)
class PrecisionSpec:
    params: float
    gradients: float
    master_weights: float
    state: float
    source: str


PRECISIONS: dict[Precision, PrecisionSpec] = {
    Precision.fp32: PrecisionSpec(4, 4, 0, 4, "fp32 training: every tensor 4 B"),
    Precision.mixed: PrecisionSpec(2, 2, 4, 4, sources.ZERO_16),
    Precision.mixed_fp32_grads: PrecisionSpec(2, 4, 4, 4, sources.MEGATRON_18),
    Precision.bf16: PrecisionSpec(2, 2, 0, 2, "pure bf16, no fp32 master copy (small updates can be lost)"),
}


class BytesPerParam(Record):
    """Bytes per parameter of model state, by component; ``total`` is their sum."""

    model_config = ConfigDict(frozen=True)

    optimizer: Optimizer
    precision: Precision
    breakdown: dict[str, float]
    total: float
    states: tuple[str, ...]
    source: str
    note: str


def bytes_per_param(optimizer: Optimizer, precision: Precision) -> BytesPerParam:
    opt, prec = OPTIMIZERS[optimizer], PRECISIONS[precision]
    state_bytes = opt.state_bytes if opt.state_bytes is not None else prec.state
    breakdown = {
        "params": prec.params,
        "gradients": prec.gradients,
        "master_weights": prec.master_weights,
        "optimizer_states": len(opt.states) * state_bytes,
    }
    return BytesPerParam(
        optimizer=optimizer, precision=precision, breakdown=breakdown, total=sum(breakdown.values()),
        states=opt.states, source=f"{prec.source}; {opt.source}", note=opt.note,
    )  # fmt: skip


def state_elements(optimizer: Optimizer, shape: tuple[int, ...]) -> int:
    """Optimizer-state elements torch allocates for one parameter tensor (scalar ``step`` excluded)."""
    numel = math.prod(shape)
    if optimizer is Optimizer.adafactor:
        if len(shape) >= 2:  # row factor (…×n) and column factor (…×m) of the last two dims
            lead = math.prod(shape[:-2])
            return lead * (shape[-2] + shape[-1])
        return numel  # vectors keep a full second moment
    return len(OPTIMIZERS[optimizer].states) * numel


# --------------------------------------------------------------------------------------- sharding

#: Which components each sharding strategy partitions over the data-parallel group (ZeRO §5).
SHARDED: dict[Sharding, frozenset[str]] = {
    Sharding.none: frozenset(),
    Sharding.zero1: frozenset({"master_weights", "optimizer_states"}),
    Sharding.zero2: frozenset({"gradients", "master_weights", "optimizer_states"}),
    Sharding.zero3: frozenset(COMPONENTS),
    Sharding.fsdp: frozenset(COMPONENTS),
}


def per_gpu_bytes_per_param(bpp: BytesPerParam, sharding: Sharding, dp: int) -> dict[str, float]:
    """Bytes each GPU holds per model parameter, by component, after sharding over ``dp`` ranks."""
    return {c: b / dp if c in SHARDED[sharding] else b for c, b in bpp.breakdown.items()}


# ------------------------------------------------------------------------------------ activations


class ActivationInputs(Record):
    """What the activation formula needs; ``shape`` gives L, h, a, F and s."""

    model_config = ConfigDict(frozen=True)

    shape: ModelShape
    batch: int = Field(default=1, gt=0, description="b, micro-batch size in sequences")
    tensor_parallel: int = Field(default=1, gt=0)
    sequence_parallel: bool = False
    checkpointing: Checkpointing = Checkpointing.none
    flash_attention: bool = False
    element_bytes: float = Field(default=2.0, gt=0, description="bytes per stored activation (2 = 16-bit)")


def activation_bytes_per_layer(x: ActivationInputs) -> tuple[float, str]:
    """Bytes one transformer layer keeps for backward, and the formula used (Korthikanti Table 2).

    With e bytes per element (2 in the paper) and F the FFN width (4h in the paper):
        unsplit = s·b·h·(4e + 2)         LayerNorm inputs, QKV and MLP inputs, two 1-byte dropout masks
        split   = s·b·h·(4e + 2e·F/h)    Q, K, V, attention output, the two F-wide MLP tensors
        scores  = a·s²·b·(2e + 1)        softmax output, its dropout mask and dropout output
    At e = 2, F = 4h: unsplit + split = 34·s·b·h and scores = 5·a·s²·b, the paper's s·b·h·(34 + 5as/h).
    Tensor parallelism divides ``split`` and ``scores`` by t; sequence parallelism also ``unsplit``.
    Selective recomputation and FlashAttention drop ``scores`` (FlashAttention keeps fp32 softmax
    statistics, 4·a·s·b bytes); full recomputation keeps only the layer input, s·b·h·e.
    """
    sh, e, t = x.shape, x.element_bytes, x.tensor_parallel
    if sh.heads is None:
        raise UsageError("--heads: activation memory needs the number of attention heads (the a·s²·b term)")
    s, b, h, a = sh.seq, x.batch, sh.hidden, sh.heads
    sbh = s * b * h
    sp = t if x.sequence_parallel else 1
    if x.checkpointing is Checkpointing.full:
        return sbh * e / sp, "s·b·h·e" + (" / t" if sp > 1 else "") + " (layer input only)"
    unsplit = sbh * (4 * e + 2)
    split = sbh * (4 * e + 2 * e * sh.d_ffn / h)
    total = unsplit / sp + split / t
    formula = "s·b·h·(4e+2)" + ("/t" if sp > 1 else "") + " + s·b·h·(4e+2e·F/h)" + ("/t" if t > 1 else "")
    if x.flash_attention:
        total += 4 * a * s * b / t
        formula += " + 4·a·s·b" + ("/t" if t > 1 else "") + " (FlashAttention statistics)"
    elif x.checkpointing is Checkpointing.none:
        total += a * s * s * b * (2 * e + 1) / t
        formula += " + a·s²·b·(2e+1)" + ("/t" if t > 1 else "")
    return total, formula


def activation_source(x: ActivationInputs) -> str:
    return sources.FLASH + "; " + sources.KORTHIKANTI if x.flash_attention else sources.KORTHIKANTI


# ----------------------------------------------------------------------------------------- memory


class MemoryResult(Record):
    hardware: str
    params: float
    optimizer: Optimizer
    precision: Precision
    sharding: Sharding
    gpus: int
    data_parallel: int
    tensor_parallel: int
    bytes_per_param: float = Field(description="unsharded model-state bytes per parameter")
    bytes_per_param_breakdown: dict[str, float]
    breakdown: dict[str, float] = Field(description="bytes per GPU by component, activations included")
    per_gpu_bytes: float
    memory_bytes: float = Field(description="capacity of one device")
    reserve_bytes: float
    fits: bool
    headroom_bytes: float
    activation_bytes_per_layer: float | None = None
    max_micro_batch: int | None = None
    warnings: list[str] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)


def _parallel_degrees(gpus: int, tensor_parallel: int) -> int:
    if gpus % tensor_parallel:
        raise UsageError(f"--gpus ({gpus}) must be a multiple of --tensor-parallel ({tensor_parallel})")
    return gpus // tensor_parallel


def memory(
    params: float,
    hardware: HardwareProfile,
    *,
    optimizer: Optimizer = Optimizer.adamw,
    precision: Precision = Precision.fp32,
    sharding: Sharding = Sharding.zero3,
    gpus: int = 1,
    activations: ActivationInputs | None = None,
    reserve_bytes: float = 0.0,
) -> MemoryResult:
    """Per-GPU memory: sharded model states + activations, against the device's capacity."""
    tp = activations.tensor_parallel if activations is not None else 1
    dp = _parallel_degrees(gpus, tp)
    bpp = bytes_per_param(optimizer, precision)
    per_param = per_gpu_bytes_per_param(bpp, sharding, dp)
    local_params = params / tp
    breakdown = {c: b * local_params for c, b in per_param.items()}
    steps = [
        step("bytes per parameter", "params + gradients + master weights + optimizer states",
             " + ".join(f"{v:g}" for v in bpp.breakdown.values()), f"{bpp.total:g} B", bpp.source),
        step(f"model states per GPU ({sharding})", _sharding_formula(sharding),
             f"{format_sci(local_params)} params × {sum(per_param.values()):.4g} B (N_d = {dp})",
             format_bytes(sum(breakdown.values())), _sharding_source(sharding)),
    ]  # fmt: skip
    per_layer = None
    if activations is not None:
        e = _activation_element_bytes(precision)
        activations = activations.model_copy(update={"element_bytes": e})
        per_layer, formula = activation_bytes_per_layer(activations)
        breakdown["activations"] = per_layer * activations.shape.layers
        steps.append(step(
            "activations per layer", formula,
            f"s={activations.shape.seq}, b={activations.batch}, h={activations.shape.hidden}, "
            f"a={activations.shape.heads}, F={activations.shape.d_ffn}, t={tp}, e={e:g}",
            format_bytes(per_layer), activation_source(activations),
        ))  # fmt: skip
        steps.append(
            step(
                "activations",
                "per layer × L",
                f"{format_bytes_si(per_layer)} × {activations.shape.layers}",
                format_bytes(breakdown["activations"]),
                sources.KORTHIKANTI,
            )
        )
    total = sum(breakdown.values())
    available = hardware.memory - reserve_bytes
    steps.append(
        step(
            "fits?",
            "per-GPU total ≤ capacity − reserve",
            f"{format_bytes_si(total)} vs {format_bytes_si(hardware.memory)} − {format_bytes_si(reserve_bytes)}",
            "yes" if total <= available else "no",
            hardware.sources[0].title,
        )
    )
    max_batch = None
    if activations is not None and per_layer is not None:
        per_sample = per_layer * activations.shape.layers / activations.batch
        max_batch = max(0, math.floor((available - (total - breakdown["activations"])) / per_sample))
    warnings = []
    if precision is Precision.bf16:
        warnings.append("pure bf16 keeps no fp32 master weights: updates smaller than 2^-8 of a weight are lost")
    return MemoryResult(
        hardware=hardware.name, params=params, optimizer=optimizer, precision=precision, sharding=sharding,
        gpus=gpus, data_parallel=dp, tensor_parallel=tp, bytes_per_param=bpp.total,
        bytes_per_param_breakdown=bpp.breakdown, breakdown=breakdown, per_gpu_bytes=total,
        memory_bytes=hardware.memory, reserve_bytes=reserve_bytes, fits=total <= available,
        headroom_bytes=available - total, activation_bytes_per_layer=per_layer, max_micro_batch=max_batch,
        warnings=warnings, steps=steps,
    )  # fmt: skip


def _activation_element_bytes(precision: Precision) -> float:
    """Activations are stored at the compute precision: 4 B in fp32 training, 2 B otherwise."""
    return 4.0 if precision is Precision.fp32 else 2.0


def _sharding_formula(sharding: Sharding) -> str:
    return {
        Sharding.none: "(P + G + M + S)·Ψ",
        Sharding.zero1: "(P + G)·Ψ + (M + S)·Ψ/N_d",
        Sharding.zero2: "P·Ψ + (G + M + S)·Ψ/N_d",
        Sharding.zero3: "(P + G + M + S)·Ψ/N_d",
        Sharding.fsdp: "(P + G + M + S)·Ψ/N_d",
    }[sharding]


def _sharding_source(sharding: Sharding) -> str:
    if sharding is Sharding.none:
        return "data parallelism: each GPU holds every state (ZeRO §3.1 baseline)"
    return sources.FSDP if sharding is Sharding.fsdp else sources.ZERO_STAGES


# -------------------------------------------------------------------------------------- max model


class MaxModelResult(Record):
    hardware: str
    gpus: int
    optimizer: Optimizer
    precision: Precision
    sharding: Sharding
    params: float
    bytes_per_param: float = Field(description="unsharded model-state bytes per parameter")
    breakdown: dict[str, float] = Field(description="component → bytes per parameter")
    memory_bytes: float = Field(description="memory that holds the model: all GPUs if sharded, else one")
    per_gpu_memory_bytes: float
    reserve_bytes: float
    activation_bytes: float
    shape_params: float | None = Field(default=None, description="parameters of the given model shape")
    max_micro_batch: int | None = Field(default=None, description="largest micro-batch for that shape's model")
    excluded: str
    steps: list[Step] = Field(default_factory=list)


EXCLUDED = (
    "not included: CUDA context, allocator fragmentation, temporary and communication buffers"
    " (use --reserve), and activations unless a model shape is given"
)


def max_model(
    gpus: int,
    hardware: HardwareProfile,
    *,
    optimizer: Optimizer = Optimizer.adamw,
    precision: Precision = Precision.fp32,
    sharding: Sharding = Sharding.zero3,
    activations: ActivationInputs | None = None,
    reserve_bytes: float = 0.0,
) -> MaxModelResult:
    """Largest N with per-GPU model states + activations + reserve ≤ capacity (solved exactly: linear in N)."""
    tp = activations.tensor_parallel if activations is not None else 1
    dp = _parallel_degrees(gpus, tp)
    bpp = bytes_per_param(optimizer, precision)
    per_param = sum(per_gpu_bytes_per_param(bpp, sharding, dp).values()) / tp
    act = 0.0
    if activations is not None:
        activations = activations.model_copy(update={"element_bytes": _activation_element_bytes(precision)})
        act = activation_bytes_per_layer(activations)[0] * activations.shape.layers
    available = hardware.memory - reserve_bytes - act
    if available <= 0:
        raise UsageError(
            f"--reserve and activations ({format_bytes(reserve_bytes + act)}) leave no room on "
            f"{hardware.name} ({format_bytes(hardware.memory)} per GPU)"
        )
    params = available / per_param
    pooled = hardware.memory * gpus if sharding in (Sharding.zero3, Sharding.fsdp) else hardware.memory
    steps = [
        step("bytes per parameter", "params + gradients + master weights + optimizer states",
             " + ".join(f"{v:g}" for v in bpp.breakdown.values()), f"{bpp.total:g} B", bpp.source),
        step(f"per-GPU bytes per parameter ({sharding}, N_d = {dp}, t = {tp})", _sharding_formula(sharding) + " / t",
             f"{per_param:.4g} B", f"{per_param:.4g} B", _sharding_source(sharding)),
        step("largest model", "N = (capacity − reserve − activations) / per-GPU bytes per parameter",
             f"({format_bytes_si(hardware.memory)} − {format_bytes_si(reserve_bytes)} − {format_bytes_si(act)})"
             f" / {per_param:.4g} B",
             f"{format_count(params)} params", hardware.sources[0].title),
    ]  # fmt: skip
    shape_params = max_batch = None
    if activations is not None:
        # The shape's own model: the largest micro-batch that fits beside its states (same engine as memory()).
        shape_params = float(activations.shape.params())
        own = memory(shape_params, hardware, optimizer=optimizer, precision=precision, sharding=sharding, gpus=gpus,
                     activations=activations, reserve_bytes=reserve_bytes)  # fmt: skip
        max_batch = own.max_micro_batch
    return MaxModelResult(
        hardware=hardware.name, gpus=gpus, optimizer=optimizer, precision=precision, sharding=sharding,
        params=params, bytes_per_param=bpp.total, breakdown=bpp.breakdown, memory_bytes=pooled,
        per_gpu_memory_bytes=hardware.memory, reserve_bytes=reserve_bytes, activation_bytes=act,
        shape_params=shape_params, max_micro_batch=max_batch, excluded=EXCLUDED, steps=steps,
    )  # fmt: skip


def parse_reserve(text: str, capacity: float) -> float:
    """``--reserve``: bytes (``"4GB"``) or a fraction of capacity (``"0.1"``, ``"10%"``)."""
    raw = text.strip()
    if raw in ("0", "0%", "0.0"):
        return 0.0
    if raw.endswith("%") or (raw.replace(".", "", 1).isdigit() and float(raw) < 1):
        return parse_fraction(raw, "--reserve") * capacity
    return parse_bytes(raw, "--reserve")
