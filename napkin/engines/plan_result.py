"""What ``napkin plan`` reports: the layouts that fit, the validated ones first, each a ``StepResult``, with what
the plan considered, how it ranked them and why its #1 wins (the search is napkin.engines.planner)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from napkin.engines.step import StepResult
from napkin.results.result import TableResult
from napkin.units import format_bytes_si, format_duration


class PlanResult(TableResult):
    """``napkin plan``: the fastest layouts that fit, those inside the stack's validated region first (``ranking``),
    with their step time, MFU and memory."""

    title: ClassVar[str] = "Layouts"
    headline: ClassVar[tuple[str, ...]] = ("best", "considered", "fitting")

    model: str
    cluster: str
    stack: str = Field(default="none", description="the software stack whose layouts are searched")
    gpus: int
    global_batch: int
    seq: int
    seq_source: str = Field(default="given", description="where seq came from: given, or a preset's default")
    considered: int = Field(description="valid layouts enumerated")
    fitting: int = Field(description="of those, the ones that fit in memory")
    question_outside: list[str] = Field(
        default_factory=list,
        description="what of the question itself (model, GPUs, sequence, format, device) the stack's published "
        "runs do not cover, for every layout",
    )
    ranking: str = Field(
        default="fastest",
        description="validated first: layouts inside the stack's validated region ahead of the others; fastest: "
        "by predicted step time alone (explore)",
    )
    finetune: str = Field(default="full", description="full training, or lora/qlora adapters on a frozen base")
    lora_rank: int | None = Field(default=None, description="the adapters' rank r (lora/qlora)")

    def renderables(self) -> list[Any]:
        if self.layouts:
            return super().renderables()
        from rich.text import Text  # nothing to rank: the heading and why, no empty table

        from napkin.results.render import Wrapped

        return [Text(self.heading(), style="italic"), Text(""), Wrapped(self.caption())]

    @property
    def best(self) -> str | None:
        """The winner in the plan table's words (``TP4 PP1 DP128 SP zero3 selective b1``), None if nothing fits."""
        return (
            f"{self.layouts[0].layout.describe(compact=True)} b{self.layouts[0].micro_batch}" if self.layouts else None
        )

    def exit_code(self) -> int:
        return 0 if self.fitting else 1  # no layout fits: the answer is "none", and the warning says why

    explanation: str
    layouts: list[StepResult]
    memory_limit: float = Field(default=0.0, description="capacity − reserve per GPU, bytes")
    points: list[tuple[float, float]] = Field(
        default_factory=list, exclude=True, description="(per-GPU bytes, step s) of every fitting layout, for --plot"
    )

    def heading(self) -> str:
        method = {"lora": "LoRA", "qlora": "QLoRA"}.get(self.finetune, self.finetune)
        tuned = f", {method} r {self.lora_rank}" if self.lora_rank is not None else ""
        title = "Layouts, validated first" if self.ranking == "validated first" else "Fastest layouts"
        return f"{title}: {self.model}{tuned} on {self.gpus:,} GPU{'s' if self.gpus != 1 else ''}"

    def header(self) -> list[str]:
        return ["#", "layout", "b", "step", "MFU", "mem/GPU"]

    def align(self) -> str:
        return "rlrrrr"

    def body(self) -> list[list[str]]:
        return [
            [
                str(i),
                r.layout.describe(compact=True) + (" *" if self._starred(r) else ""),
                str(r.micro_batch),
                format_duration(r.step_seconds),
                f"{r.mfu:.3f}",
                format_bytes_si(r.per_gpu_bytes),
            ]
            for i, r in enumerate(self.layouts, 1)
        ]

    def _starred(self, r: StepResult) -> bool:
        """Whether ``r``'s own choices lie outside the validated region (not only the question)."""
        return any(x not in self.question_outside for x in r.outside_validation)

    def caption(self) -> str:
        if not self.considered:
            return f"{self.cluster}, {self.global_batch:,} × {self.seq:,} tokens per step: no valid layout."
        dtype = f" ({self.layouts[0].dtype}, {self.stack})" if self.layouts else f" ({self.stack})"
        outside = (
            " *: its own choices lie outside the region the stack's published runs validate ('napkin step' says what)."
            if any(self._starred(r) for r in self.layouts)
            else ""
        )
        seq = "" if self.seq_source == "given" else f" (the sequence: {self.seq_source})"
        return (
            f"{self.cluster}{dtype}, {self.global_batch:,} × {self.seq:,} tokens per step{seq}. {self.considered:,} "
            f"layouts considered, {self.fitting:,} fit. {self.explanation}{outside}"
        )

    def to_json(self, explain: bool = False) -> Any:
        return {
            "model": self.model,
            "cluster": self.cluster,
            "stack": self.stack,
            "gpus": self.gpus,
            "global_batch": self.global_batch,
            "seq": self.seq,
            "considered": self.considered,
            "fitting": self.fitting,
            "ranking": self.ranking,
            "question_outside": self.question_outside,
            "finetune": self.finetune,
            "lora_rank": self.lora_rank,
            "explanation": self.explanation,
            # each layout's own reasons apart from the question's: what its * in the table marks
            "layouts": [
                {
                    **r.to_json(explain),
                    "outside_layout": [x for x in r.outside_validation if x not in self.question_outside],
                }
                for r in self.layouts
            ],
            "warnings": self.warnings,
            **({"steps": [s.model_dump(mode="json") for s in self.steps]} if explain else {}),
        }


__all__ = ["PlanResult"]
