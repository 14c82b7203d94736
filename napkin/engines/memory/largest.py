"""``napkin max-model``: the largest model whose training state fits, solved exactly (every stage's bytes are
linear in N), and the deepest model of a given shape that fits.
"""

from __future__ import annotations

import math
from typing import ClassVar

from pydantic import Field

from napkin import sources
from napkin.domain.choices import Dtype, Optimizer, Precision, Sharding
from napkin.domain.layout import Layout
from napkin.domain.model import Model
from napkin.engines.memory.per_gpu import memory
from napkin.engines.memory.result import capacity
from napkin.engines.memory.stages import ActivationInputs, framework_bytes, stage_memory
from napkin.engines.memory.states import (
    GATHERED,
    BytesPerParam,
    activation_element_bytes,
    bytes_per_param,
    bytes_per_param_step,
    per_gpu_bytes_per_param,
    shard_ranks,
    sharding_formula,
    sharding_source,
    stack_bytes_per_param,
)
from napkin.errors import UsageError
from napkin.results.explain import step
from napkin.results.result import ModelResult
from napkin.systems.profiles import HardwareProfile
from napkin.systems.stack import Framework, MemoryRules
from napkin.units import format_bytes, format_bytes_si, format_count

# -------------------------------------------------------------------------------------- max model


class MaxModelResult(ModelResult):
    title: ClassVar[str] = "Largest trainable model"
    headline: ClassVar[tuple[str, ...]] = ("params", "gpus", "hardware")

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
    capacity_source: str = Field(description="which capacity figure was used")
    reserve_bytes: float
    activation_bytes: float
    shape_params: float | None = Field(default=None, description="parameters of the given model shape")
    max_micro_batch: int | None = Field(default=None, description="largest micro-batch for that shape's model")
    max_layers: int | None = Field(default=None, description="most layers of the given shape that fit (depth scaled)")
    max_layers_params: float | None = Field(default=None, description="parameters of that deepest model")
    params_at_datasheet: float | None = Field(
        default=None, description="the answer with the datasheet capacity, when a reported one was used"
    )
    excluded: str
    stack: str | None = Field(default=None, description="the software stack whose own memory is counted")
    dtype: Dtype = Field(default=Dtype.bf16, description="the matmuls' number format (fp8: the stack's fp8 memory)")

    def heading(self) -> str:
        named = ", ".join(x for x in (self.dtype if self.dtype is not Dtype.bf16 else None, self.stack) if x)
        return self.title + (f" ({named})" if named else "")

    def rows(self) -> list[tuple[str, str]]:
        shown = {"master_weights": "fp32 master"}  # the mixed regimes' fp32 copy of each weight
        breakdown = " + ".join(f"{v:g} ({shown.get(k, k.replace('_', ' '))})" for k, v in self.breakdown.items() if v)
        how = {
            Sharding.none: "replicated states must fit on one GPU",
            Sharding.zero3: "memory pooled across GPUs",
            Sharding.fsdp: "memory pooled across GPUs",
            Sharding.hsdp: "memory pooled across a node's GPUs",
        }.get(self.sharding, "partially sharded")
        rows = [
            (
                "hardware",
                f"{self.gpus:,} × {self.hardware} ({format_bytes_si(self.per_gpu_memory_bytes)} each, "
                f"{self.capacity_source})",
            ),
            ("optimizer / precision", f"{self.optimizer} / {self.precision}"),
            ("bytes per parameter", f"{self.bytes_per_param:g} B = {breakdown}"),
            ("sharding", f"{self.sharding}: {how}"),
            ("memory for model", format_bytes(self.memory_bytes)),
        ]
        if self.reserve_bytes:
            rows.append(("reserved per GPU", format_bytes(self.reserve_bytes)))
        if self.activation_bytes:
            rows.append(("activations per GPU", format_bytes(self.activation_bytes)))
        datasheet = ""
        if self.params_at_datasheet is not None:
            datasheet = f" ({format_count(self.params_at_datasheet)} at the datasheet capacity)"
        if self.activation_bytes and self.shape_params is not None:  # the states beside one model's activations
            beside = (
                f" beside the {format_count(self.shape_params)}-param shape's activations (a deeper model keeps more)"
            )
            rows.append(("largest model states", f"{format_count(self.params)} params{datasheet}{beside}"))
        else:
            rows.append(("largest model", f"{format_count(self.params)} params{datasheet}"))
        if self.max_micro_batch is not None and self.shape_params is not None:
            rows.append(
                (
                    "largest micro-batch",
                    f"{self.max_micro_batch} sequence{'' if self.max_micro_batch == 1 else 's'} for the given shape's "
                    f"{format_count(self.shape_params)}-param model",
                )
            )
        if self.max_layers is not None and self.max_layers_params is not None:
            rows.append(
                (
                    "largest of this shape",
                    f"{self.max_layers} layers: {format_count(self.max_layers_params)} "
                    "params (width fixed, depth scaled)",
                )
            )
        return rows

    def caption(self) -> str:
        return self.excluded


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
    layout: Layout | None = None,
    activations: ActivationInputs | None = None,
    reserve_bytes: float = 0.0,
    framework: Framework | None = None,
) -> MaxModelResult:
    """Largest N with per-GPU model states + activations + reserve ≤ capacity (solved exactly: linear in N); a
    stack's own memory (``framework``: fixed bytes, fragmentation) comes off the capacity first."""
    layout = (layout or (activations.layout if activations is not None else Layout())).resolve(gpus)
    sharding, tp, dp = layout.sharding, layout.tensor_parallel, layout.dp
    fw = framework or Framework()
    bpp = stack_bytes_per_param(bytes_per_param(optimizer, precision), fw.rules)
    per_param = sum(per_gpu_bytes_per_param(bpp, sharding, shard_ranks(layout)).values()) / (
        tp * layout.pipeline_parallel
    )
    act = 0.0
    if activations is not None:
        activations = activations.model_copy(
            update={"element_bytes": activation_element_bytes(precision), "layout": layout}
        )
        stages = stage_memory(
            float(activations.model.params()), bpp, layout, activations, ends_only=True, rules=fw.rules
        )
        act = max(sum(s.activations.values()) for s in stages)
    cap, cap_source = capacity(hardware)
    if reserve_bytes >= cap:
        raise UsageError(
            f"reserve ({format_bytes(reserve_bytes)}) leaves no room on {hardware.name} ({format_bytes(cap)} per GPU)",
            field="reserve",
        )
    available = (cap - reserve_bytes - fw.fixed) / (1 + fw.fragmentation) - act
    warnings = []
    if available <= 0:  # "does not fit" is an answer (0 parameters), with what to change
        what = "activations" + (" and the reserve" if reserve_bytes else "")
        warnings.append(
            f"{what} ({format_bytes(reserve_bytes + act)}) leave no room on {hardware.name} ({format_bytes(cap)} per "
            "GPU): try --flash-attention, --recompute selective|full, a smaller --micro-batch or --seq, or more "
            "--tensor-parallel/--pipeline-parallel"
        )
    params = _largest_fitting(bpp, layout, activations, cap - reserve_bytes, fw)
    at_datasheet = max(0.0, hardware.memory - reserve_bytes - act) / per_param if cap != hardware.memory else None
    # memory that holds model states: what capacity leaves after the reserve and activations, pooled by ZeRO-3
    pooled = max(0.0, available) * (
        gpus if sharding in (Sharding.zero3, Sharding.fsdp) else shard_ranks(layout) if sharding in GATHERED else 1
    )
    steps = [
        bytes_per_param_step(bpp),
        step(
            f"per-GPU bytes per parameter ({sharding}, N_d = {dp}, t = {tp})",
            sharding_formula(sharding) + " / t",
            f"{per_param:.4g} B",
            f"{per_param:.4g} B",
            sharding_source(sharding),
        ),
        step(
            "largest model",
            "N = (capacity − reserve − activations) / per-GPU bytes per parameter",
            f"({format_bytes_si(cap)} − {format_bytes_si(reserve_bytes)} − {format_bytes_si(act)}) / {per_param:.4g} B",
            f"{format_count(params)} params",
            hardware.sources[0].title,
        ),
    ]
    shape_params = max_batch = max_layers = None
    deeper: Model | None = None
    if activations is not None:
        # The shape's own model: the largest micro-batch that fits beside its states (same engine as memory()).
        shape_params = float(activations.model.params())
        own = memory(
            shape_params,
            hardware,
            optimizer=optimizer,
            precision=precision,
            gpus=gpus,
            layout=layout,
            activations=activations,
            reserve_bytes=reserve_bytes,
            framework=framework,
        )
        max_batch = own.max_micro_batch
        max_layers = _max_layers(activations, bpp, layout, cap - reserve_bytes, fw.rules)
        if max_layers:
            deeper = activations.model.model_copy(
                update={"layers": max_layers, "dense_layers": min(activations.model.dense_layers, max_layers)}
            )
            steps.append(
                step(
                    "largest model of this shape",
                    "most layers L (a multiple of p·v) whose most loaded GPU fits",
                    f"d={deeper.hidden}, a={deeper.heads}, F={deeper.d_ffn}, s={activations.workload.seq}, "
                    f"b={activations.workload.micro_batch}",
                    f"L = {max_layers}: {format_count(deeper.params())} params",
                    sources.PIPELINE_MEMORY,
                )
            )
    return MaxModelResult(
        hardware=hardware.name,
        gpus=gpus,
        optimizer=optimizer,
        precision=precision,
        sharding=sharding,
        params=params,
        bytes_per_param=bpp.total,
        breakdown=bpp.breakdown,
        memory_bytes=pooled,
        per_gpu_memory_bytes=cap,
        capacity_source=cap_source,
        reserve_bytes=reserve_bytes,
        activation_bytes=act,
        shape_params=shape_params,
        max_micro_batch=max_batch,
        max_layers=max_layers,
        max_layers_params=None if deeper is None else float(deeper.params()),
        params_at_datasheet=at_datasheet,
        excluded=EXCLUDED,
        steps=steps,
        warnings=warnings,
    )


def _largest_fitting(
    bpp: BytesPerParam, layout: Layout, activations: ActivationInputs | None, available: float, fw: Framework
) -> float:
    """The largest whole N whose most loaded GPU fits in ``available`` bytes, by the very computation
    ``memory()`` checks (``stage_memory`` and the stack's ``framework_bytes``), so that ``memory --params N`` of
    the answer fits: every stage's bytes are a + b·N (its states scale with N), solved per stage, then stepped
    down past any float rounding."""

    def totals(n: float) -> list[float]:
        return [
            s.total + framework_bytes(s, bpp, layout, fw)
            for s in stage_memory(n, bpp, layout, activations, ends_only=True, rules=fw.rules)
        ]

    probe = 1e12
    bounds = [(available - a) * probe / (b - a) for a, b in zip(totals(0.0), totals(probe), strict=True) if b > a]
    n = float(max(0, math.floor(min(bounds)))) if bounds and available > 0 else 0.0
    while n > 0 and max(totals(n)) > available:  # a few bytes over from rounding: at most a few steps of ~1e-12·N
        n = float(math.floor(n - max(1.0, n * 1e-12)))
    return max(n, 0.0)


def _max_layers(
    x: ActivationInputs, bpp: BytesPerParam, layout: Layout, available: float, rules: MemoryRules | None = None
) -> int | None:
    """Most layers (a multiple of p·v) for which the most loaded GPU fits: the shape scaled in depth.

    Memory grows with L, so a doubling then bisection over multiples of p·v finds it (None: not even the fewest
    fits, p·v layers or, with k layers' activations offloaded, the first multiple above k: k < L).
    """
    step_layers = layout.pipeline_parallel * layout.interleave
    fewest = layout.activation_offload_layers // step_layers + 1
    e = activation_element_bytes(bpp.precision)

    def fits(units: int) -> bool:
        layers = units * step_layers
        m = x.model.model_copy(update={"layers": layers, "dense_layers": min(x.model.dense_layers, layers)})
        inputs = x.model_copy(update={"model": m})
        worst = max(
            s.total for s in stage_memory(float(m.params()), bpp, layout, inputs, e, ends_only=True, rules=rules)
        )
        return worst <= available

    if not fits(fewest):
        return None
    lo, hi = fewest, 2 * fewest
    while fits(hi) and hi < 1 << 20:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo * step_layers
