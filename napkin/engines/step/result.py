"""One step as a result (``StepResult``): its breakdown, MFU, memory, and the derivation ``--explain`` shows."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, computed_field

from napkin import sources
from napkin.domain.layout import MAX_LISTED_STAGES, Layout, stage_layers, uneven_note
from napkin.domain.workload import Workload
from napkin.engines.memory import (
    capacity,
    memory,
)
from napkin.engines.step.host import host_explained
from napkin.engines.step.knobs import BREAKDOWN, Knobs, Terms
from napkin.engines.step.machine import (
    FLASH_BACKWARD,
    FLASH_BACKWARD_FLOPS,
    FLASH_FORWARD,
    MEMORY_EFFICIENCY,
    RECIPE_AT_8_BIT,
    SIZE_EFFICIENCY,
)
from napkin.engines.step.model import StepModel
from napkin.engines.step.offload import offload_explained, offload_step_seconds
from napkin.engines.step.region import gathers_across_nodes, outside_validation
from napkin.engines.step.ring import ring_note
from napkin.results.explain import Step, step
from napkin.results.result import Result
from napkin.systems.stack import fp4_memory_note
from napkin.units import format_bandwidth, format_bytes, format_duration, format_percent, format_rate


class StepResult(Result):
    """One training step: seconds with the breakdown, throughput, predicted MFU/HFU, memory."""

    title: ClassVar[str] = "Training step"
    headline: ClassVar[tuple[str, ...]] = ("layout_text", "step_seconds", "mfu", "fits")

    model: str
    cluster: str
    hardware: str
    stack: str = Field(default="none", description="the software stack the prediction assumes (napkin stack list)")
    dtype: str = Field(description="number format of the matmuls; MFU is against its dense peak")
    layout: Layout
    micro_batch: int
    global_batch: int
    stage_layers: list[int] = Field(description="layers per pipeline stage, first to last; [] past 64 stages")
    overlap_grad_reduce: bool = Field(description="the gradient reduction overlaps the last backward")
    gradient_accumulation_fusion: bool = Field(description="weight-gradient GEMMs accumulate into the gradients")
    seq: int
    seq_source: str = Field(default="given", description="where seq came from: given, or a preset's default")
    step_seconds: float
    breakdown: dict[str, float] = Field(description="seconds per step by term; they add up to step_seconds")
    tokens_per_second: float
    mfu: float = Field(description="model FLOPs / (G × dense peak × step time)")
    hfu: float = Field(description="model + recomputation FLOPs / (G × dense peak × step time)")
    flops_per_token: float
    hardware_flops_per_token: float
    achieved_flops_per_gpu: float = Field(description="hardware FLOP/s per GPU (what Narayanan Table 1 reports)")
    peak_flops: float
    matmul_flops: float = Field(description="achievable matmul FLOP/s used (R)")
    matmul_source: str
    per_gpu_bytes: float
    memory_bytes: float
    reserve_bytes: float = Field(default=0.0, description="memory kept free per GPU (--reserve)")
    fits: bool
    validated: bool = Field(default=True, description="inside the region the stack's published runs validate")
    outside_validation: list[str] = Field(default_factory=list, description="what of it they do not cover")
    finetune: str = Field(default="full", description="full, lora or qlora")
    lora_rank: int | None = None
    lora_targets: list[str] | None = None
    trainable_params: int | None = Field(default=None, description="adapter parameters (lora/qlora)")
    activation_offload_seconds: float = Field(default=0.0, description="of other: waits for offloaded activations")
    moe_host_seconds: float = Field(default=0.0, description="of other: MoE layers waiting for the host's launches")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def gpus(self) -> int:
        return self.layout.gpus

    @computed_field  # type: ignore[prop-decorator]
    @property
    def layout_text(self) -> str:
        return self.layout.describe() + f" · b {self.micro_batch}"

    @computed_field  # type: ignore[prop-decorator]
    @property
    def microbatches(self) -> int:
        """Micro-batches per data-parallel replica and step."""
        return self.global_batch // (self.micro_batch * self.layout.dp)

    def heading(self) -> str:
        return (
            f"Training step: {self.model} on {self.gpus:,} × {self.hardware} ({self.cluster}, {self.dtype}, "
            f"{self.stack})"
        )

    def rows(self) -> list[tuple[str, str]]:
        rows = [("layout", self.layout_text)]
        if self.finetune != "full" and self.trainable_params is not None:
            rows.append(
                (
                    "fine-tuning",
                    f"{self.finetune}, rank {self.lora_rank} on {', '.join(self.lora_targets or [])}: "
                    f"{self.trainable_params:,} trainable",
                )
            )
        rows += [
            ("sequence", f"{self.seq:,} tokens ({self.seq_source})"),
            (
                "batch",
                f"{self.global_batch:,} × {self.seq:,} tokens; micro-batch {self.micro_batch}, "
                f"{self.microbatches} per pipeline",
            ),
            ("step time", format_duration(self.step_seconds)),
        ]
        for name in BREAKDOWN:
            value = self.breakdown[name]
            share = value / self.step_seconds if self.step_seconds else 0.0
            rows.append((f"  {name.replace('_', ' ')}", f"{format_duration(value)} ({format_percent(share)})"))
        rows += [
            ("tokens/s", f"{self.tokens_per_second:,.0f} ({self.tokens_per_second / self.gpus:,.0f} per GPU)"),
            ("MFU", f"{self.mfu:.3f} predicted (HFU {self.hfu:.3f})"),
            (
                "FLOP/s per GPU",
                f"{format_rate(self.achieved_flops_per_gpu)} hardware; matmul rate {format_rate(self.matmul_flops)}",
            ),
            (
                "memory per GPU",
                f"{format_bytes(self.per_gpu_bytes)} of {format_bytes(self.memory_bytes)}"
                + (f" less {format_bytes(self.reserve_bytes)} reserved" if self.reserve_bytes else "")
                + (": fits" if self.fits else ": does NOT fit"),
            ),
        ]
        return rows

    def caption(self) -> str:
        other = "p2p, EP, CP" + (", activation offload" if self.activation_offload_seconds else "")
        other += ", MoE host waits" if self.moe_host_seconds else ""
        return f"step = compute + exposed TP comm + bubble + exposed DP comm + optimizer + other ({other})"


def _explain(sm: StepModel, k: Knobs, terms: Terms, steps: list[Step]) -> None:
    hw = sm.hw
    m = sm.batch // (k.micro_batch * k.data_parallel)
    passes = sm.layer_passes(k)
    pace = sm.pace(k, 3 * passes.forward + passes.recompute + passes.tensor_parallel, passes.logits)
    paced, last_stage = pace.layers, pace.last_stage
    layers = sm.model.layers
    split_text = (
        "–".join(str(n) for n in stage_layers(layers, k.pipeline_parallel))
        if k.pipeline_parallel <= 8
        else f"{layers // k.pipeline_parallel}–{-(-layers // k.pipeline_parallel)} layers"
    )
    flash = (
        [
            step(
                "attention (FlashAttention)",
                f"forward FLOPs / (η_f × 16-bit peak) + {FLASH_BACKWARD_FLOPS:g} × forward FLOPs / (η_b × 16-bit peak)",
                f"η_f = {FLASH_FORWARD:.2f}, η_b = {FLASH_BACKWARD:.3f}, 16-bit peak {format_rate(hw.peak16)}",
                "each layer's attention time",
                sources.FLASH_EFFICIENCY,
            ),
        ]
        if sm.flash
        else []
    )
    steps += [
        step(
            "achievable matmul rate R",
            "saved bench, else published MAMF (other formats: its share of the bf16 peak × theirs), else 0.8 × peak",
            f"{hw.name}: R / dense peak = {format_rate(hw.rate)} / {format_rate(hw.peak)}"
            + (
                f"; attention core and output layer in bf16 at {format_rate(hw.rate16)}" if hw.rate16 != hw.rate else ""
            ),
            f"{format_rate(hw.rate)} ({format_percent(hw.rate / hw.peak)} of peak)",
            hw.rate_source + (f"; {sources.TE_FP8_SCOPE}" if hw.rate16 != hw.rate else ""),
        ),
        step(
            "matmul time",
            "2mkn / (R·η_size·q) + bytes / (BW_HBM·η_mem), q = m·n / (m, n padded to tiles ≤ 128)",
            f"R = {format_rate(hw.rate)}, BW_HBM = {format_bandwidth(hw.hbm)}, η_size = "
            + ", ".join(f"{e:.2f} ≥ {s / 1e9:g} GFLOP" for s, e in SIZE_EFFICIENCY),
            "each GEMM's time",
            f"{sources.NO_OVERLAP}; {sources.TILE_QUANTIZATION}; {sources.MATMUL_SIZE}",
        ),
        *([_recipe_step(sm)] if sm.fp8 else []),
        *(
            [
                step(
                    "expert GEMMs",
                    f"the local experts' GEMMs {sm.stack.grouped_streams} at a time: η_size of "
                    f"{sm.stack.grouped_streams} experts' FLOPs, not of one call of them all"
                    if sm.stack.grouped_streams
                    else "the local experts' GEMMs as one batched call: η_size of all their FLOPs",
                    f"{sm.model.experts // k.expert_parallel} local experts, {sm.model.top_k} of "
                    f"{sm.model.experts} per token",
                    "each MoE layer's expert GEMMs",
                    sources.GROUPED_GEMM
                    if sm.stack.grouped_streams
                    else "the stack states no streams: one batched call (torch._grouped_mm, DeepGEMM's grouped GEMM)",
                )
            ]
            if sm.model.is_moe
            else []
        ),
        step(
            "memory-bound work",
            "bytes / (BW_HBM·η_mem(size)); norms, residuals, softmax, activation fn, CE, optimizer",
            f"η_mem = {', '.join(f'{e:g} ≥ {s / 1e6:g} MB' for s, e in MEMORY_EFFICIENCY)}",
            "each kernel's time",
            f"{sources.HBM_EFFICIENCY}; {sources.ELEMENTWISE}",
        ),
        *flash,
        step(
            "output layer and loss (last stage)",
            "3 × GEMM(b·s/c × d × V/t) at the 16-bit rate + the loss's bytes per logit × b·s/c·V/t / (BW_HBM·η_mem)",
            f"V/t = {sm.model.vocab:,}/{k.tensor_parallel}; {sm.stack.loss_bytes:g} B per logit, forward and backward",
            format_duration(passes.logits),
            sm.stack.loss_source or "napkin: a cross-entropy in fp32, four 4-byte passes over the logits",
        ),
        step(
            "compute",
            "m × (3 × forward + recompute) per stage, + logits on the last stage"
            + (
                ""
                if sm.gradient_accumulation_fusion
                else ", + adds × gradient accumulation (local gradients × (stored + stored + new) B / (BW_HBM·η_mem)), "
                "adds = m into fp32 main grads, else m − 1"
            ),
            f"m = B/(b·DP) = {sm.batch}/({k.micro_batch}·{k.data_parallel}) = {m}; the stage that sets the pace holds "
            f"{paced} layers"
            + (" and the logits" if last_stage else f" (of {k.pipeline_parallel} stages split {split_text})")
            + (
                "; accumulation fused into the weight-gradient GEMMs"
                if sm.gradient_accumulation_fusion
                else f"; unfused accumulation, {sm.accumulate_bytes:g} B per local parameter"
            ),
            format_duration(terms.compute),
            f"{sources.NARAYANAN_RECOMPUTE}; {sources.NO_OVERLAP}; {sources.GRADIENT_ACCUMULATION}",
        ),
        step(
            "tensor-parallel comm (exposed)",
            "m × the stage's layers × (4 + 2 if full recompute) × all-reduce(b·s·d·2 B, t)"
            + (", the overlapped share exposed beyond the layers' GEMMs" if sm.stack.tp_overlap else ""),
            f"t = {k.tensor_parallel}"
            + (", SP: reduce-scatter + all-gather, timed as that all-reduce" if k.sequence_parallel else "")
            + (
                f"; {sm.stack.tp_overlap:g} of it under the GEMMs (with SP only)"
                if sm.stack.tp_overlap and k.tensor_parallel > 1
                else ""
            ),
            format_duration(terms.tensor_parallel),
            f"{sources.TP_COMM}; {sources.THAKUR_ALPHA_BETA}"
            + (f"; {sources.TP_OVERLAP}" if sm.stack.tp_overlap else ""),
        ),
        step(
            "pipeline bubble",
            "(p − 1)/v × one micro-batch's time on the heaviest stage (compute + TP comm + unfused gradient "
            "accumulation + sends)",
            f"p = {k.pipeline_parallel}, v = {k.interleave}, m = {m}: "
            f"(p−1)/(v·m) = {(k.pipeline_parallel - 1) / (k.interleave * m):.3f}",
            format_duration(terms.bubble),
            sources.PIPELINE_BUBBLE,
        ),
        step(
            "data-parallel comm (exposed)",
            "sync − overlap with the last backward (ZeRO-3: per micro-batch)"
            if sm.overlap_grad_reduce
            else "sync, after the last backward (no overlap)",
            f"DP = {k.data_parallel}, {k.sharding}",
            format_duration(terms.data_parallel),
            f"{sources.DP_OVERLAP}; {sources.NCCL_TESTS_BUSBW}",
        ),
        step(
            "optimizer step",
            "2 × local state bytes / (BW_HBM·η_mem)",
            f"{sm.bpp.total:g} B per parameter",
            format_duration(terms.optimizer),
            sources.HBM_EFFICIENCY,
        ),
        step(
            "other (p2p, EP all-to-all, CP)",
            "2v × (send b·s·d·2 B / t + all-gather over t) per micro-batch; all-to-all of b·s·k·d·2 B / t (SP) "
            "+ all-gather over t, 4 per MoE layer (+2 recomputed); CP",
            f"p = {k.pipeline_parallel}, EP = {k.expert_parallel}, CP = {k.context_parallel}"
            + (ring_note(sm.stack.ring) if k.context_parallel > 1 and sm.stack.ring is not None and sm.flash else "")
            + (
                f"; {sm.stack.p2p_overlap:g} of the sends under the other chunks' compute"
                if sm.stack.p2p_overlap and k.interleave > 1
                else ""
            )
            + (
                f"; {sm.stack.a2a_overlap:g} of the all-to-all under the other micro-batch's compute, at most"
                " that compute; the rest in line"
                if sm.stack.a2a_overlap and k.expert_parallel > 1
                else ("; the all-to-all in line (exposed)" if k.expert_parallel > 1 else "")
            ),
            format_duration(terms.other),
            f"{sources.SCATTER_GATHER}; {sources.CALCULON_NETWORK}; {sources.MOE_DISPATCH}"
            + (f"; {sources.P2P_OVERLAP}" if sm.stack.p2p_overlap else ""),
        ),
        *offload_explained(sm, k, m),
        *host_explained(sm, k, m, sm.host_wait(k)),
        step("step time", "sum of the terms", "", format_duration(terms.step_seconds), "napkin step model"),
    ]


def build_result(sm: StepModel, k: Knobs, name: str, terms: Terms | None = None) -> StepResult:
    """A ``StepResult`` for one layout; memory from ``napkin.engines.memory.memory`` itself."""
    terms = terms or sm.evaluate(k)
    total = terms.step_seconds
    layout = k.layout()
    gpus = layout.gpus
    mem: Any
    if sm.adapters is not None:
        from napkin.engines.finetune import finetune_memory  # only with adapters (start-up time)

        mem = finetune_memory(
            sm.model,
            sm.adapters,
            Workload(seq=sm.seq, micro_batch=k.micro_batch),
            hardware=sm.hw.name,
            capacity=capacity(sm.hw.profile),
            recompute=k.recompute,
            flash_attention=sm.flash,
            gpus=gpus,
            sharding=k.sharding,
            reserve_bytes=sm.reserve,
        )
    else:
        mem = memory(
            sm.params,
            sm.hw.profile,
            optimizer=sm.optimizer,
            precision=sm.precision,
            gpus=gpus,
            layout=layout,
            activations=sm.activation_inputs(k),
            reserve_bytes=sm.reserve,
            framework=sm.memory.framework,  # the stack's, under fp8 with its fp8 weights
            domain=sm.hw.fabric.domain_size,
        )
    tokens = sm.batch * sm.seq
    fpt, hfpt = sm.model_flops_per_token(), sm.hardware_flops_per_token(k.recompute)
    peak_total = gpus * sm.hw.peak * total
    steps: list[Step] = list(sm.stack_steps)
    _explain(sm, k, terms, steps)
    steps.append(
        step(
            "MFU",
            "tokens per step × model FLOPs per token / (G × peak × step time)",
            f"{tokens:,} × {fpt:.4g} / ({gpus:,} × {format_rate(sm.hw.peak)} × {total:.4g} s)",
            f"{tokens * fpt / peak_total:.3f}",
            sources.PALM_MFU,
        )
    )
    steps.extend(mem.steps)
    outside = outside_validation(sm, k)
    return StepResult(
        model=name,
        cluster=sm.hw.cluster,
        hardware=sm.hw.name,
        stack=sm.stack.name,
        layout=layout,
        micro_batch=k.micro_batch,
        global_batch=sm.batch,
        stage_layers=list(stage_layers(sm.model.layers, k.pipeline_parallel))
        if k.pipeline_parallel <= MAX_LISTED_STAGES
        else [],
        overlap_grad_reduce=sm.overlap_grad_reduce,
        gradient_accumulation_fusion=sm.gradient_accumulation_fusion,
        seq=sm.seq,
        step_seconds=total,
        breakdown=terms.breakdown(),
        tokens_per_second=tokens / total,
        mfu=tokens * fpt / peak_total,
        hfu=tokens * hfpt / peak_total,
        flops_per_token=fpt,
        hardware_flops_per_token=hfpt,
        achieved_flops_per_gpu=tokens * hfpt / (gpus * total),
        peak_flops=sm.hw.peak,
        matmul_flops=sm.hw.rate,
        matmul_source=sm.hw.rate_source,
        dtype=sm.hw.dtype,
        per_gpu_bytes=mem.per_gpu_bytes,
        memory_bytes=mem.memory_bytes,
        reserve_bytes=sm.reserve,
        fits=mem.fits,
        steps=steps,
        warnings=list(mem.warnings),
        validated=not outside,
        outside_validation=outside,
        finetune=str(sm.adapters.finetune) if sm.adapters else "full",
        lora_rank=sm.adapters.rank if sm.adapters else None,
        lora_targets=list(sm.adapters.targets) if sm.adapters else None,
        trainable_params=int(sm.trainable) if sm.adapters else None,
        activation_offload_seconds=offload_step_seconds(sm, k),
        moe_host_seconds=sm.host_wait(k),
        notes=[
            n
            for n in (
                sources.ZERO3_MEASURED if gathers_across_nodes(k, sm.hw) and sm.stack.scale_out == 1.0 else None,
                uneven_note(sm.model.layers, k.pipeline_parallel),
                f"outside the {sm.stack.name} stack's validated region: {'; '.join(outside)}" if outside else None,
                fp4_memory_note(sm.memory.linear_input_bytes, sm.stack.name) if sm.hw.dtype == "fp4" else None,
            )
            if n
        ],
    )


def _recipe_step(sm: StepModel) -> Step:
    """A low-precision GEMM's recipe work: its input's cast and the stack's fp8.overhead at the 8-bit rate."""
    hw = sm.hw
    return step(
        f"{hw.dtype} recipe work",
        "per GEMM: (2 + w)·m·k bytes / (BW_HBM·η_mem) + overhead × (R / R_8bit) × its math",
        f"w = {sm.cast_written:g} B written per element, overhead = {sm.stack.fp8_overhead:g}, R / R_8bit = "
        f"{sm.recipe_scale:.2f}",
        "each linear layer's GEMMs",
        "stack fp8.overhead" + (f"; {RECIPE_AT_8_BIT}" if hw.rate8 else ""),
    )
