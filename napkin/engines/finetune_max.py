"""The largest model LoRA/QLoRA fine-tuning fits: a given shape's most layers, or the Llama 3 shapes scaled, each
counted whole by ``finetune_memory`` (napkin.engines.finetune)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, computed_field

from napkin.domain.choices import BaseFormat, Finetune
from napkin.domain.model import Model
from napkin.engines.finetune import Adapters, FinetuneMemoryResult, base_bytes
from napkin.results.result import ModelResult
from napkin.units import format_bytes, format_count

#: max-model without a model: the sequence and micro-batch a fine-tuning run defaults to (huggingface/trl
#: SFTConfig max_length = 1024, per_device_train_batch_size = 8 in TrainingArguments but 1 in most QLoRA recipes).
DEFAULT_SEQ = 1024
DEFAULT_SEQ_SOURCE = "default: huggingface/trl SFTConfig max_length 1024"
#: ... and the shapes it scales: the Llama 3 herd (Grattafiori et al. 2024, Table 3), each with as many of its own
#: layers as fit (width, vocabulary and embeddings as published).
REFERENCE_SHAPES = ("llama3.1-8b", "llama3.1-70b", "llama3.1-405b")


def bytes_per_param(adapters: Adapters, hidden: int = 8192) -> float:
    """Frozen-base bytes per parameter when every parameter is a quantized weight (max-model without a shape)."""
    return base_bytes(adapters.format, adapters.dq, hidden)


def layer_scaled(model: Model, layers: int) -> Model:
    """``model`` with ``layers`` blocks (width fixed), its dense and windowed layers scaled alike."""
    dense = round(model.dense_layers * layers / model.layers)
    local = None if model.local_layers is None else round(model.local_layers * layers / model.layers)
    return model.model_copy(update={"layers": layers, "dense_layers": dense, "local_layers": local})


def max_layers(model: Model, fits: Any) -> int | None:
    """The most layers of ``model``'s shape for which ``fits(model)`` holds (None: not even one)."""
    if not fits(layer_scaled(model, 1)):
        return None
    lo, hi = 1, 2
    while fits(layer_scaled(model, hi)) and hi < 1 << 16:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(layer_scaled(model, mid)) else (lo, mid)
    return lo


class FinetuneMaxResult(ModelResult):
    """The largest model LoRA/QLoRA fine-tuning fits: its whole memory (frozen base, embeddings, adapters and their
    states, activations) for a given model's shape, or for the Llama 3 shapes without one."""

    title: ClassVar[str] = "Largest model to fine-tune"
    headline: ClassVar[tuple[str, ...]] = ("params", "gpus", "hardware")

    hardware: str
    gpus: int
    finetune: Finetune
    base_format: BaseFormat
    double_quant: bool
    bytes_per_param: float = Field(description="frozen-base bytes per parameter (all of them in the base format)")
    memory_bytes: float = Field(description="capacity − reserve, summed over the GPUs when sharded")
    capacity_source: str
    reserve_bytes: float
    weights_only_params: float = Field(description="upper bound: the frozen weights alone filling the memory")
    shape: FinetuneMemoryResult | None = Field(default=None, description="the given (or reference) model, fine-tuned")
    reference: str | None = Field(default=None, description="the published shape scaled when no model is given")
    shape_layers: int | None = Field(default=None, description="layers of the reference shape that fit")
    seq: int | None = None
    micro_batch: int = 1
    max_layers: int | None = Field(default=None, description="most layers of the given model's shape that fit")
    max_layers_params: int | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def params(self) -> int:
        """The answer, as full training's max-model gives it: parameters of the largest model that fits with
        everything counted (the reference shape scaled, or the given shape's most layers); 0 when none does."""
        if self.reference is not None and self.shape is not None:
            return self.shape.params
        return self.max_layers_params or 0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def fits_params(self) -> int | None:
        """``params`` under its earlier name (None where nothing fits); kept for one release."""
        return self.params or None

    def rows(self) -> list[tuple[str, str]]:
        base = str(self.base_format) + (" (double quantization)" if self.double_quant else "")
        rows = [
            ("hardware", f"{self.gpus:,} × {self.hardware} ({self.capacity_source})"),
            ("frozen base", f"{base}: {self.bytes_per_param:.4g} B per parameter"),
            ("memory", format_bytes(self.memory_bytes)),
        ]
        if self.seq is not None:
            rows.append(("micro-batch", str(self.micro_batch)))
        if self.reference is not None and self.shape is not None:
            layers = self.shape_layers
            rows.append(
                (
                    "largest that fits",
                    f"{format_count(self.shape.params)} params: {self.reference}'s shape with {layers} layers, "
                    f"{format_bytes(self.shape.per_gpu_bytes)} per GPU",
                )
            )
        elif self.shape is not None:
            verdict = "fits" if self.shape.fits else "does NOT fit"
            rows.append(
                (
                    "the given model",
                    f"{format_count(self.shape.params)} params: {format_bytes(self.shape.per_gpu_bytes)} per GPU, "
                    f"{verdict}",
                )
            )
        elif self.seq is not None:
            rows.append(("largest that fits", "none of the Llama 3 shapes, even with one layer"))
        if self.max_layers is not None and self.max_layers_params is not None:
            rows.append(
                (
                    "largest of this shape",
                    f"{self.max_layers} layers: {format_count(self.max_layers_params)} params (width fixed)",
                )
            )
        rows.append(("upper bound", f"{format_count(self.weights_only_params)} params: the frozen weights alone"))
        return rows

    def caption(self) -> str:
        return (
            "largest that fits: frozen base, embeddings and head, adapters, their gradients and optimizer states, "
            "activations, the dequantization workspace and the runtime (CUDA context, workspaces, allocator reserve: "
            "1.55 GB fitted to Qwen's published LoRA profile)"
        )
