"""``napkin memory``: the most loaded GPU's bytes by component, whether they fit the device, and the derivation
(``MemoryResult``); ``capacity`` is the one fit rule of every command.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import ConfigDict, Field

from napkin.domain.base import Record
from napkin.domain.choices import Dtype, Optimizer, Precision, Sharding
from napkin.domain.layout import Layout
from napkin.engines.memory.states import (
    GPUS_PER_NODE,
)
from napkin.results.result import ModelResult
from napkin.systems.profiles import HardwareProfile
from napkin.units import format_bytes, format_bytes_si, format_count, parse_bytes_or_fraction

# ----------------------------------------------------------------------------------------- memory


class StageRow(Record):
    """One pipeline stage in a ``MemoryResult`` (bytes per GPU)."""

    model_config = ConfigDict(frozen=True)

    stage: int = Field(description="0-based pipeline rank")
    layers: int = Field(description="transformer layers on this stage (0 when the model's shape is not given)")
    params: float = Field(description="parameters on this GPU before ZeRO sharding")
    in_flight: float = Field(description="micro-batches' worth of this stage's layers held at once")
    model_state_bytes: float
    activation_bytes: float
    per_gpu_bytes: float


class MemoryResult(ModelResult):
    title: ClassVar[str] = "Memory per GPU"
    headline: ClassVar[tuple[str, ...]] = ("per_gpu_bytes", "fits", "hardware")

    hardware: str
    params: float
    optimizer: Optimizer
    precision: Precision
    sharding: Sharding
    layout: Layout
    gpus: int
    data_parallel: int
    tensor_parallel: int
    bytes_per_param: float = Field(description="unsharded model-state bytes per parameter")
    bytes_per_param_breakdown: dict[str, float]
    breakdown: dict[str, float] = Field(description="bytes per GPU by component on the most loaded stage")
    per_gpu_bytes: float
    stage: int = Field(description="the most loaded pipeline stage (0-based)")
    stage_name: str
    stages: list[StageRow] = Field(default_factory=list)
    host_bytes_per_gpu: float = Field(
        default=0.0, description="offloaded states and activations in CPU memory, per GPU"
    )
    host_bytes_per_node: float = Field(default=0.0, description=f"× {GPUS_PER_NODE} GPUs per node (assumed)")
    memory_bytes: float = Field(description="capacity of one device used for the fit check")
    capacity_source: str = Field(description="which capacity figure the fit check used")
    reserve_bytes: float
    fits: bool
    headroom_bytes: float
    activation_bytes_per_layer: float | None = None
    max_micro_batch: int | None = None
    stack: str | None = Field(default=None, description="the software stack whose own memory is counted")
    dtype: Dtype = Field(default=Dtype.bf16, description="the matmuls' number format (fp8: the stack's fp8 memory)")

    def heading(self) -> str:
        more = (f", {self.dtype}" if self.dtype is not Dtype.bf16 else "") + (f", {self.stack}" if self.stack else "")
        return f"Memory per GPU: {format_count(self.params)} params, {self.optimizer}, {self.precision}{more}"

    def rows(self) -> list[tuple[str, str]]:
        rows = [("layout", self.layout.describe())]
        if self.layout.pipeline_parallel > 1:
            rows.append(("most loaded", self.stage_name))
        rows += [(k.replace("_", " "), format_bytes(v)) for k, v in self.breakdown.items() if v]
        counted = "activations" in self.breakdown
        if not counted:
            rows.append(("activations", "not counted (give --model or a shape)"))
        rows.append(("total per GPU", format_bytes(self.per_gpu_bytes)))
        if self.host_bytes_per_gpu:
            rows.append(
                (
                    "offloaded to CPU",
                    f"{format_bytes_si(self.host_bytes_per_gpu)} per GPU, "
                    f"{format_bytes_si(self.host_bytes_per_node)} per node ({GPUS_PER_NODE} GPUs)",
                )
            )
        rows.append((f"{self.hardware} capacity", f"{format_bytes(self.memory_bytes)}, {self.capacity_source}"))
        if self.reserve_bytes:
            rows.append(("reserved", format_bytes(self.reserve_bytes)))
        scope = "" if counted else " (model states only)"
        short = f"does NOT fit{scope}: short by {format_bytes(-self.headroom_bytes)}"
        rows.append(("verdict", f"fits{scope}: headroom {format_bytes(self.headroom_bytes)}" if self.fits else short))
        if self.max_micro_batch is not None:
            rows.append(
                ("largest micro-batch", f"{self.max_micro_batch} sequence{'' if self.max_micro_batch == 1 else 's'}")
            )
        return rows

    def extras(self) -> list[Any]:
        from napkin.results import render

        parts = [(k.replace("_", " "), v) for k, v in self.breakdown.items() if v > 0]
        out: list[Any] = [render.bar(parts, self.memory_bytes)]
        if len(self.stages) > 1:
            out.append("")  # a blank line between the bar's legend and the table's title
            out.append(
                render.grid(
                    "Per pipeline stage (bytes per GPU)",
                    ["stage", "layers", "in flight", "states", "activations", "total"],
                    [
                        [
                            str(r.stage + 1),
                            f"{r.layers:g}",
                            f"{r.in_flight:.4g}",
                            format_bytes_si(r.model_state_bytes),
                            format_bytes_si(r.activation_bytes),
                            format_bytes_si(r.per_gpu_bytes),
                        ]
                        for r in self.stages
                    ],
                    caption="in flight: micro-batches held (1F1B: p − i; interleaved: chunks / v)",
                )
            )
        return out


#: A profile's reported capacity is used only while it is within 10 % of its datasheet figure, so a user who
#: edits ``memory`` in a copy is not silently overruled by a stale ``memory_usable``.
USABLE_BAND = 0.10


def capacity(hardware: HardwareProfile) -> tuple[float, str]:
    """Bytes a fit check may use: what the device reports to torch when the profile knows it, else the datasheet."""
    usable = hardware.memory_usable
    if usable and abs(usable / hardware.memory - 1) <= USABLE_BAND:
        return float(usable), "as reported to torch"
    return hardware.memory, "datasheet" if not usable else "datasheet (memory_usable is not within 10 %: ignored)"


def stage_name(stage: int, pipeline: int) -> str:
    if pipeline == 1:
        return "the only stage"
    where = " (first)" if stage == 0 else " (last)" if stage == pipeline - 1 else ""
    return f"stage {stage + 1} of {pipeline}{where}"


def parse_reserve(text: str, capacity: float) -> float:
    """``--reserve``: bytes (``"4GB"``) or a fraction of capacity (``"10%"``, or ``"0.1"`` without an exponent)."""
    value, is_fraction = parse_bytes_or_fraction(text, "--reserve")
    return value * capacity if is_fraction else value
