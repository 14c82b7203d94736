"""Fine-tuning with adapters as questions take it: the LoRA/QLoRA options, declared once, and the layouts napkin
models for them (data parallel only)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from napkin import units
from napkin.api.inputs import Number, choice, parse
from napkin.domain.choices import BaseFormat, Finetune, Offload, Optimizer, Precision, TrainDtype
from napkin.errors import UsageError

if TYPE_CHECKING:  # imported where used (start-up time)
    from napkin.domain.layout import Layout


def refuse_without_adapters(options: dict[str, Any]) -> None:
    """A UsageError naming the adapter options given (not None) to a question without adapters: each named, as
    its flag, not every adapter option napkin has."""
    given = [name for name, value in options.items() if value is not None]
    if given:
        raise UsageError(
            f"{', '.join(given)}: used only with finetune lora or qlora", field=given[0], also=(*given[1:], "finetune")
        )


@dataclass(frozen=True)
class AdapterOptions:
    """What memory, max_model, step and plan take for fine-tuning with adapters, declared once: the method, the
    adapters' rank and targets, the frozen base's format, paged optimizer states and the adapters' and
    embeddings' dtypes. Questions list these in their signatures (``option_keywords``) and build ``Adapters``
    from them with ``adapters``."""

    finetune: str | Finetune = Finetune.full
    lora_rank: Number | None = None
    lora_targets: str | list[str] | None = None
    base_format: str | BaseFormat | None = None
    double_quant: bool | None = None
    paged_optimizer: bool = False
    adapter_dtype: str | TrainDtype | None = None
    embedding_dtype: str | TrainDtype | None = None

    @classmethod
    def take(cls, options: dict[str, Any]) -> AdapterOptions:
        """These options, taken out of a question's keywords."""
        return cls(**{f.name: options.pop(f.name) for f in dataclasses.fields(cls) if f.name in options})

    @property
    def method(self) -> Finetune:
        return choice(Finetune, self.finetune, "finetune")

    def adapters(self, optimizer: Any, precision: Any, precision_default: Any) -> Any:
        """LoRA/QLoRA settings (``napkin.engines.finetune.Adapters``), or None for full fine-tuning; a UsageError
        for what adapters do not use (a ``precision`` other than the question's default: adapters keep their own
        dtypes; double quantization without an NF4 base) and for adapter options given without adapters."""
        method = self.method
        if method is Finetune.full:
            lora_only = {
                "lora_rank": self.lora_rank,
                "lora_targets": self.lora_targets,
                "base_format": self.base_format,
                "double_quant": self.double_quant,
                "adapter_dtype": self.adapter_dtype,
                "embedding_dtype": self.embedding_dtype,
                "paged_optimizer": self.paged_optimizer or None,
            }
            refuse_without_adapters(lora_only)
            return None
        from napkin.engines.finetune import Adapters  # only with adapters (start-up time)
        from napkin.engines.lora import DEFAULT_RANK, targets

        rank = DEFAULT_RANK if self.lora_rank is None else parse(units.parse_int, self.lora_rank, "lora_rank")
        if rank <= 0:
            raise UsageError(f"lora_rank: {rank} is not a positive whole number", field="lora_rank")
        fmt = None if self.base_format is None else choice(BaseFormat, self.base_format, "base_format")
        if precision is not None and choice(Precision, precision, "precision") != precision_default:
            raise UsageError(
                f"precision: {method} keeps a frozen base (--base-format) and adapters in their own dtype "
                "(--adapter-dtype, --embedding-dtype); --precision is for full fine-tuning",
                field="precision",
            )
        chosen_format = fmt or (BaseFormat.nf4 if method is Finetune.qlora else BaseFormat.bf16)
        if self.double_quant is not None and chosen_format is not BaseFormat.nf4:
            raise UsageError(
                f"double_quant: double quantization is NF4's (QLoRA §3); the base is {chosen_format}",
                field="double_quant",
            )
        adapter_dtype = TrainDtype.fp32 if self.adapter_dtype is None else self.adapter_dtype
        embedding_dtype = self.embedding_dtype
        return Adapters(
            finetune=method,
            rank=rank,
            targets=targets(self.lora_targets),
            base_format=fmt,
            double_quant=True if self.double_quant is None else bool(self.double_quant),
            optimizer=choice(Optimizer, optimizer, "optimizer"),
            paged=bool(self.paged_optimizer),
            adapter_dtype=TrainDtype.fp32
            if adapter_dtype is None
            else choice(TrainDtype, adapter_dtype, "adapter_dtype"),
            embedding_dtype=None if embedding_dtype is None else choice(TrainDtype, embedding_dtype, "embedding_dtype"),
        )


def data_parallel_only(layout: Layout) -> None:
    """LoRA/QLoRA is modelled with each GPU running the whole model: a UsageError naming any other degree."""
    degrees = {
        "tensor_parallel": layout.tensor_parallel,
        "pipeline_parallel": layout.pipeline_parallel,
        "context_parallel": layout.context_parallel,
        "expert_parallel": layout.expert_parallel,
    }
    for key, value in degrees.items():
        if value != 1:
            raise UsageError(
                f"{key}: fine-tuning with adapters is modelled data parallel only (each GPU runs the whole model)",
                field=key,
            )
    if layout.offload is not Offload.none:
        raise UsageError(
            "offload: fine-tuning with adapters is modelled on the GPU (a frozen base has no optimizer states to "
            "offload; --paged-optimizer pages the adapters')",
            field="offload",
        )
    if layout.activation_offload_layers:
        raise UsageError(
            "activation_offload_layers: fine-tuning with adapters keeps its activations on the GPU here",
            field="activation_offload_layers",
        )
