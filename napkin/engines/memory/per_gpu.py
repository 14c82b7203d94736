"""The most loaded GPU's bytes (``memory``): model states under the layout, activations and what the software
stack keeps, with the derivation ``--explain`` prints; ``MemoryResult`` (``result``) renders them.
"""

from __future__ import annotations

import math

from napkin import sources
from napkin.domain.choices import Optimizer, Precision, Sharding
from napkin.domain.layout import MAX_LISTED_STAGES, Layout, uneven_note
from napkin.engines.memory.result import MemoryResult, StageRow, capacity, stage_name
from napkin.engines.memory.stages import (
    OFFLOADED,
    ActivationInputs,
    StageMemory,
    activation_bytes_per_layer,
    activation_source,
    framework_bytes,
    stage_memory,
)
from napkin.engines.memory.states import (
    GATHERED,
    GPUS_PER_NODE,
    BytesPerParam,
    activation_element_bytes,
    bytes_per_param,
    bytes_per_param_step,
    expert_shard_ranks,
    per_gpu_bytes_per_param,
    shard_ranks,
    sharding_formula,
    sharding_source,
    stack_bytes_per_param,
)
from napkin.results.explain import step
from napkin.systems.profiles import HardwareProfile
from napkin.systems.stack import Framework
from napkin.units import format_bytes, format_bytes_si, format_sci


def memory(
    params: float,
    hardware: HardwareProfile,
    *,
    optimizer: Optimizer = Optimizer.adamw,
    precision: Precision = Precision.fp32,
    gpus: int = 1,
    layout: Layout | None = None,
    activations: ActivationInputs | None = None,
    reserve_bytes: float = 0.0,
    framework: Framework | None = None,
    domain: int = GPUS_PER_NODE,
) -> MemoryResult:
    """Per-GPU memory of the most loaded pipeline stage: model states under the layout + activations + what the
    software stack keeps (``framework``); HSDP shards within one scale-up ``domain`` (a cluster's, else a node
    of GPUS_PER_NODE)."""
    layout = (layout or (activations.layout if activations is not None else Layout())).resolve(gpus)
    sharding, tp, dp = layout.sharding, layout.tensor_parallel, layout.dp
    split = layout.tensor_parallel * layout.pipeline_parallel
    fw = framework or Framework()
    dualpipe = bool(fw.rules and fw.rules.dualpipe and layout.pipeline_parallel > 1)
    bpp = stack_bytes_per_param(bytes_per_param(optimizer, precision), fw.rules)
    if activations is not None:
        e = activation_element_bytes(precision)
        activations = activations.model_copy(update={"element_bytes": e, "layout": layout})
    # a long pipeline: its extreme stages only (the most loaded GPU is one of them), so work and output stay
    # bounded whatever --pipeline-parallel is typed
    stages = stage_memory(
        params,
        bpp,
        layout,
        activations,
        ends_only=layout.pipeline_parallel > MAX_LISTED_STAGES,
        rules=fw.rules,
        domain=domain,
    )
    own = [framework_bytes(s, bpp, layout, fw) for s in stages]
    worst_i = max(range(len(stages)), key=lambda i: stages[i].total + own[i])
    worst, extra = stages[worst_i], own[worst_i]
    breakdown = {**worst.states, **worst.activations, **({"framework": extra} if extra else {})}
    steps = [
        bytes_per_param_step(bpp),
        step(
            f"model states per GPU ({sharding})",
            sharding_formula(sharding) + (" / (t·p)" if split > 1 else ""),
            _states_numbers(worst, bpp, layout, 2 if dualpipe else 1, domain)
            + _fp8_weights_numbers(worst, bpp, layout, fw, domain),
            format_bytes(sum(worst.states.values()) + worst.host_bytes),
            sharding_source(sharding)
            + (
                "; DualPipe: two copies of the parameters, each stage's optimizer states over both "
                f"({fw.rules.dualpipe_source})"
                if dualpipe and fw.rules
                else ""
            ),
        ),
    ]
    if fw.rules and fw.rules.layer_param_bytes:
        steps.append(
            step(
                "fp8 weights (within the model states)",
                "the layers' weights at the stack's bytes under fp8; the embedding, output layer and experts at "
                "--precision's",
                f"{format_sci(worst.layer_params)} layer params on this GPU × {fw.rules.layer_param_bytes:g} B, not "
                f"{bpp.breakdown['params']:g} B",
                f"params {format_bytes(worst.states.get('params', 0.0))}",
                fw.rules.fp8_weights_source,
            )
        )
    if worst.host_bytes:
        moved = ", ".join(sorted(OFFLOADED[layout.offload]))
        steps.append(
            step(
                "offloaded to CPU",
                f"{layout.offload} offload: {moved}",
                f"{format_bytes_si(worst.host_bytes)} × {GPUS_PER_NODE} GPUs per node",
                format_bytes(worst.host_bytes * GPUS_PER_NODE),
                sources.ZERO_OFFLOAD,
            )
        )
    per_layer, k = None, layout.activation_offload_layers
    if activations is not None:
        per_layer, formula = activation_bytes_per_layer(activations, fw.rules.cached if fw.rules else None)
        m = activations.model
        steps.append(
            step(
                "activations per layer",
                formula,
                f"s={activations.workload.seq}, b={activations.workload.micro_batch}, h={m.hidden}, a={m.heads}, "
                f"n_kv={m.n_kv}, F={m.d_ffn}, t={tp}, e={e:g}"
                + (f", f={activations.linear_input_bytes:g}" if activations.linear_input_bytes else ""),
                format_bytes(per_layer),
                fw.rules.cached_source
                if fw.rules and fw.rules.cached
                else activation_source(activations, fw.rules.kept_input_source if fw.rules else ""),
            )
        )
        steps.append(
            step(
                f"activations on {stage_name(worst.stage, layout.pipeline_parallel)}",
                (
                    "per layer × the rank's two stages' layers × (PP + 1)/2 micro-batches in flight (DualPipe)"
                    if dualpipe
                    else "per layer × the stage's layers (L/p, or an uneven split's) × micro-batches in flight"
                )
                + (" (the layers not offloaded: L − k)" if k else "")
                + (" + embedding" if worst.activations.get("embedding") else "")
                + (" + logits (for the loss)" if worst.activations.get("logits") else "")
                + (" + all-to-all buffers" if worst.activations.get("all_to_all_buffers") else ""),
                f"{format_bytes_si(per_layer)} × {worst.layers - k:g} × {worst.in_flight:.4g}"
                + "".join(
                    f" + {format_bytes_si(worst.activations[part])} ({part.replace('_', ' ')})"
                    for part in ("embedding", "logits", "all_to_all_buffers")
                    if worst.activations.get(part)
                ),
                format_bytes(sum(worst.activations.values())),
                fw.rules.dualpipe_source if dualpipe and fw.rules else sources.PIPELINE_MEMORY,
            )
        )
        if k:
            text = f"{format_bytes_si(per_layer)} × k = {k} × {worst.in_flight:.4g}"
            steps.append(
                step(
                    "activations in CPU memory",
                    "per layer × k offloaded layers × in flight",
                    text,
                    format_bytes(worst.host_activations),
                    sources.ACTIVATION_OFFLOAD,
                )
            )
    if framework is not None:
        ends = bool(fw.rules and fw.rules.ends_gathered and layout.sharding in GATHERED and worst.end_params)
        gathered = fw.gathered_layers if sharding in GATHERED else 0
        accumulated = 0.0
        fp8_gather = fw.rules.layer_param_bytes if gathered and fw.rules else 0.0
        if gathered and fw.rules and fw.rules.pipeline_gathered and layout.pipeline_parallel > 1:
            gathered = worst.layers  # FSDP under PP: the whole stage, not resharded after forward
            accumulated = fw.rules.pipeline_gradient_bytes
        steps.append(
            step(
                "the stack's own memory",
                "fixed + gathered layers (FSDP/ZeRO-3)"
                + (f" + the stage's unsharded gradients ({accumulated:g} B/param, PP)" if accumulated else "")
                + (" + embedding and output layer gathered" if ends else "")
                + " + fragmentation × allocated",
                f"{format_bytes_si(fw.fixed)} + {gathered} layer(s) gathered"
                + (f" at {fp8_gather:g} B (fp8 weights)" if fp8_gather else "")
                + (
                    f" + {format_sci(worst.params - worst.expert_params)} params × {accumulated:g} B"
                    if accumulated
                    else ""
                )
                + (f" + {format_sci(worst.end_params)} params" if ends else "")
                + f" + {fw.fragmentation:g} × allocated",
                format_bytes(extra),
                (fw.source or "stack profile")
                + (f"; {fw.rules.ends_source}" if fw.rules and (ends or gathered != fw.gathered_layers) else "")
                + (f"; {sources.FSDP_FP8_GATHER}" if fp8_gather else ""),
            )
        )
    total = worst.total + extra
    cap, cap_source = capacity(hardware)
    available = cap - reserve_bytes
    steps.append(
        step(
            "fits?",
            "per-GPU total ≤ capacity − reserve",
            f"{format_bytes_si(total)} vs {format_bytes_si(cap)} − {format_bytes_si(reserve_bytes)}",
            "yes" if total <= available else "no",
            "profile memory_usable: torch total_memory" if cap != hardware.memory else hardware.sources[0].title,
        )
    )
    max_batch = None
    act_total = sum(worst.activations.values())
    if activations is not None and act_total > 0:
        per_sample = act_total / activations.workload.micro_batch
        max_batch = max(0, math.floor((available - (total - act_total)) / per_sample))
    warnings = []
    if precision is Precision.bf16:
        warnings.append("pure bf16 keeps no fp32 master weights: updates smaller than 2^-8 of a weight are lost")
    rows = [
        StageRow(
            stage=s.stage,
            layers=s.layers,
            params=s.params,
            in_flight=s.in_flight,
            model_state_bytes=sum(s.states.values()),
            activation_bytes=sum(s.activations.values()),
            per_gpu_bytes=s.total + o,
        )
        for s, o in zip(stages, own, strict=True)
    ]
    return MemoryResult(
        hardware=hardware.name,
        params=params,
        optimizer=optimizer,
        precision=precision,
        sharding=sharding,
        layout=layout,
        gpus=gpus,
        data_parallel=dp,
        tensor_parallel=tp,
        bytes_per_param=bpp.total,
        bytes_per_param_breakdown=bpp.breakdown,
        breakdown=breakdown,
        per_gpu_bytes=total,
        stage=worst.stage,
        stage_name=stage_name(worst.stage, layout.pipeline_parallel),
        stages=rows,
        host_bytes_per_gpu=worst.host_bytes + worst.host_activations,
        host_bytes_per_node=(worst.host_bytes + worst.host_activations) * GPUS_PER_NODE,
        memory_bytes=cap,
        capacity_source=cap_source,
        reserve_bytes=reserve_bytes,
        fits=total <= available,
        headroom_bytes=available - total,
        activation_bytes_per_layer=per_layer,
        max_micro_batch=max_batch,
        warnings=warnings,
        steps=steps,
        notes=(
            [note]
            if activations is not None
            and (note := uneven_note(activations.model.layers, layout.pipeline_parallel, step=False))
            else []
        )
        + (
            [
                f"{layout.pipeline_parallel:,} pipeline stages: the table lists the first, the first of the heaviest "
                "and the last; no other stage holds more"
            ]
            if layout.pipeline_parallel > MAX_LISTED_STAGES
            else []
        )
        + (
            [
                f"hsdp: the model states shard over the {shard_ranks(layout, domain):,} data-parallel ranks within "
                f"a scale-up domain of {domain:,} GPUs"
                + (
                    " (a DGX node; napkin step and plan take the cluster's, 72 on an NVL72)"
                    if domain == GPUS_PER_NODE
                    else ""
                )
                + ", replicated across domains"
            ]
            if sharding is Sharding.hsdp
            else []
        ),
    )


def _fp8_weights_numbers(worst: StageMemory, bpp: BytesPerParam, layout: Layout, fw: Framework, domain: int) -> str:
    """What the stack's fp8 weights take off the model states (``stage_states``), for its step's numbers."""
    w = fw.rules.layer_param_bytes if fw.rules else 0.0
    if not w:
        return ""
    held = per_gpu_bytes_per_param(bpp, layout.sharding, shard_ranks(layout, domain))["params"]
    return f" − {format_bytes_si(worst.layer_params * held * (1 - w / bpp.breakdown['params']))} (fp8 weights, below)"


def _states_numbers(worst: StageMemory, bpp: BytesPerParam, layout: Layout, copies: int, domain: int) -> str:
    """The numbers of the model-states step: parameters × bytes per parameter over each data-parallel group
    (routed experts shard over DP·CP/EP ranks, the rest over DP·CP; ``copies`` ranks hold each stage)."""
    dp = shard_ranks(layout, domain) * copies
    dense = worst.params - worst.expert_params
    per = sum(per_gpu_bytes_per_param(bpp, layout.sharding, dp).values())
    text = f"{format_sci(dense)} params on this GPU × {per:.4g} B (N_d = {dp})"
    if worst.expert_params:
        edp = expert_shard_ranks(layout, domain) * copies
        per_e = sum(per_gpu_bytes_per_param(bpp, layout.sharding, edp).values())
        text += f" + {format_sci(worst.expert_params)} expert params × {per_e:.4g} B (N_d = {edp})"
    return text
