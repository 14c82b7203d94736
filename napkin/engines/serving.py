"""Serving accounting: weights, KV cache, what fits, prefill and decode by roofline, and what it costs.

The method is the roofline's (Williams et al. 2009): a step takes max(bytes moved / HBM bandwidth,
FLOPs / (peak × efficiency)). Decode at small batch reads every weight once per generated token and is
memory-bound (Pope et al. 2022 §2-3); prefill does 2·N_active FLOPs per prompt token and is compute-bound.

Bytes are per GPU of one tensor-parallel group (a *replica*); ``gpus / tensor_parallel`` replicas serve
independently. Base units throughout (bytes, seconds, FLOP, USD, joules).
"""

from __future__ import annotations

import math

from napkin import sources
from napkin.domain.model import Model
from napkin.engines.inference_result import (
    CHUNK_TOKENS,
    DEFAULT_EFFICIENCY,
    DEFAULT_RESERVE,
    IDEAL,
    InferenceResult,
    Serving,
)
from napkin.engines.kv_cache import (
    VLLM_BLOCK,
    KvCacheResult,
    cached_tokens,
    kv_bytes_per_sequence,
    kv_bytes_per_token,
    kv_cache,
    kv_heads_per_gpu,
    kv_shard,
    kv_steps,
    max_context,
)
from napkin.engines.serving_formats import (
    GROUP_SIZE,
    KV_BYTES,
    SCALE_BYTES,
    KvDtype,
    WeightFormat,
    compute_dtype,
    experts_touched,
    kv_element_bytes,
    weight_bytes_per_param,
    weights_bytes,
    weights_read_bytes,
)
from napkin.engines.serving_terms import (
    MEMORY_RULES,
    cost_and_energy,
    crossover_batch,
    decode_attention_flops,
    host_steps,
    moe_steps,
    prefill_seconds,
    serve_warnings,
    step_cost_text,
    weight_steps,
    window_share,
)
from napkin.results.explain import step
from napkin.systems.cluster import Fabric
from napkin.systems.profiles import HardwareProfile
from napkin.units import (
    format_bandwidth,
    format_bytes,
    format_bytes_si,
    format_count,
    format_duration,
    format_sci,
)

__all__ = [
    "CHUNK_TOKENS",
    "DEFAULT_EFFICIENCY",
    "DEFAULT_RESERVE",
    "GROUP_SIZE",
    "IDEAL",
    "KV_BYTES",
    "SCALE_BYTES",
    "VLLM_BLOCK",
    "InferenceResult",
    "KvCacheResult",
    "KvDtype",
    "Serving",
    "WeightFormat",
    "cached_tokens",
    "compute_dtype",
    "decode_attention_flops",
    "experts_touched",
    "kv_bytes_per_sequence",
    "kv_bytes_per_token",
    "kv_cache",
    "kv_element_bytes",
    "kv_heads_per_gpu",
    "kv_shard",
    "max_context",
    "serve",
    "weight_bytes_per_param",
    "weights_bytes",
    "weights_read_bytes",
]


def serve(
    name: str,
    model: Model,
    hardware: HardwareProfile,
    *,
    gpus: int,
    tensor: int,
    context: int,
    prompt: int,
    output: int,
    batch: int,
    settings: Serving,
    fabric: Fabric | None = None,
) -> InferenceResult:
    """Serve ``model`` on ``gpus`` GPUs in TP groups of ``tensor`` as the settings' engine runs it: memory by the
    engine's rule, the KV capacity it logs, prefill and decode at its achieved rates, throughput, cost.

    With a ``fabric`` (the cluster's links), each layer's two tensor-parallel all-reduces of the
    activations (Shoeybi et al. 2019 §3: after attention and after the MLP) are timed by the α–β model
    of ``napkin.engines.comm`` and added to prefill and decode (not overlapped with compute)."""
    from napkin.engines.memory import capacity
    from napkin.engines.replica import Replica

    s = settings
    fmt, kv = s.weights_format, s.kv_dtype
    stack = s.resolved().at_dtype(compute_dtype(fmt, hardware))  # its fraction of this dtype's peak, where it has one
    replicas = gpus // tensor
    cap, cap_source = capacity(hardware)  # the figure the training commands use too
    datasheet_bw = hardware.memory_bandwidth
    device = hardware if s.bandwidth is None else hardware.model_copy(update={"memory_bandwidth": s.bandwidth})
    bw = device.memory_bandwidth
    dtype = compute_dtype(fmt, hardware)
    peak = hardware.peak(dtype)
    rate = peak * stack.decode.compute
    n, n_active = float(model.params()), float(model.active_params())
    rep = Replica(
        model,
        device,
        stack,
        tensor=tensor,
        weights=fmt.value,
        group=s.group_size,
        kv=kv.value,
        fabric=fabric,
        device_bytes=cap,
    )
    cost = rep.step_cost()
    fixed, eager = step_cost_text(cost, s.tp_prefill_source)

    # --- memory -------------------------------------------------------------------------------
    w_total, w_gpu, steps = weight_steps(model, fmt, s.group_size, tensor)
    cache_steps, k = kv_steps(name, model, context, batch, kv, s.block_size, tensor)
    steps += cache_steps
    per_seq_gpu = k["per_seq"] * k["shard"]
    kv_gpu, work = per_seq_gpu * batch, rep.activations()
    steps.append(
        step(
            "activation workspace per GPU",
            "budget × 2 B × (4·d + (3·F + (a + 2·n_kv)·d_h) / t)"
            + (", or fp32 logits of max_num_seqs" if stack.sampler_logits else ""),
            f"budget {stack.max_num_batched_tokens:,} tokens",
            format_bytes(work),
            sources.VLLM_PROFILE,
        )
    )
    if s.reserve_bytes is not None:
        budget = cap - s.reserve_bytes - w_gpu - work
        rule = f"capacity − reserve {format_bytes_si(s.reserve_bytes)} − weights − workspace"
    else:
        budget = stack.kv_budget(cap, w_gpu, work, tensor)
        rule = MEMORY_RULES[stack.memory_rule].format(f=stack.fraction(tensor))
    reserve = cap - budget - w_gpu - work
    steps.append(
        step(
            f"KV budget per GPU ({s.stack_name})",
            rule,
            f"capacity {format_bytes_si(cap)}, weights {format_bytes_si(w_gpu)}, workspace {format_bytes_si(work)}",
            format_bytes(max(budget, 0.0)),
            s.memory_source or sources.STACK_MEMORY,
        )
    )
    per_token_gpu, room = rep.kv_bytes_per_token_gpu(), max(budget, 0.0)
    kv_tokens = int(room / per_token_gpu // stack.block_size * stack.block_size)
    windowed = per_seq_gpu < per_token_gpu * context * (1 - 1e-9)  # vLLM's max concurrency: windows at their size
    concurrency = room / per_seq_gpu if windowed else kv_tokens / context
    steps.append(
        step(
            "engine KV capacity",
            "⌊KV budget / KV per token per GPU⌋ blocks; max concurrency = tokens / context"
            + (" (a windowed layer's KV at its window: budget / KV per sequence)" if windowed else ""),
            f"{format_bytes_si(room)} / {per_token_gpu:,.0f} B",
            f"{kv_tokens:,} tokens, {concurrency:,.2f}× at {context:,}",
            sources.PAGED,
        )
    )
    max_batch, headroom = max(0, math.floor(room / per_seq_gpu)), budget - kv_gpu
    steps.append(
        step(
            "max batch at this context",
            "⌊KV budget / KV per sequence per GPU⌋",
            f"{format_bytes_si(room)} / {format_bytes_si(per_seq_gpu)}",
            f"{max_batch} sequences",
            sources.PAGED,
        )
    )
    # at the engine's block granularity, as its capacity is counted (vLLM pages of 16 tokens)
    max_ctx = max_context(model, kv, s.block_size or stack.block_size, budget / (batch * k["shard"]))
    if model.context is not None:
        max_ctx = min(max_ctx, model.context)  # memory allows more than the model was built for

    # --- prefill --------------------------------------------------------------------------------
    attn = model.attention_flops_per_token(prompt, causal=True) / 3 * prompt
    prefill = 2 * n_active * prompt + attn
    moe = model.is_moe and stack.expert_compute < 1
    expert_flops = 2.0 * model.routed_active_params() * prompt if moe else 0.0
    ttft = prefill_seconds(cost, [prompt], stack.max_num_batched_tokens)
    steps.append(
        step(
            "prefill FLOPs",
            "2·N_active·P + 2·L·P²·d_attn (causal attention, forward)",
            f"2 × {format_count(n_active)} × {prompt:,} + attention {format_sci(attn)}",
            format_sci(prefill),
            f"{sources.KAPLAN_6ND}; {sources.PALM_ATTENTION}",
        )
    )
    steps.append(
        step(
            "TTFT (prefill of one prompt)",
            "Σ chunks of the token budget: step cost + max(weights / (bw × β), FLOPs / (t × peak × η_prefill))"
            + (" (the experts' FLOPs ÷ expert_compute, below)" if moe else ""),
            f"{format_sci(prefill)} / ({tensor} × {format_sci(peak)} {dtype} × {stack.prefill.compute:g})"
            + (f", of which experts' {format_sci(expert_flops)} ÷ {stack.expert_compute:g}" if expert_flops else "")
            + "; "
            + eager,
            format_duration(ttft),
            f"{sources.ROOFLINE}; {s.rates_source or sources.STACK_RATES}",
        )
    )

    # --- decode ---------------------------------------------------------------------------------
    mean = prompt + output // 2

    def step_time(b: int) -> tuple[float, float, float, float]:  # datasheet roofline: (bytes, FLOPs, mem s, comp s)
        read = weights_read_bytes(model, fmt, b, s.group_size) / tensor + b * k["shard"] * kv_bytes_per_sequence(
            model, mean, kv, s.block_size
        )
        flops = b * (2 * n_active + decode_attention_flops(model, mean)) / tensor
        return read, flops, read / datasheet_bw, flops / rate

    read, flops, t_mem, t_comp = step_time(batch)
    decode_comm = cost.comm(batch) if tensor > 1 and fabric is not None else 0.0
    decode = cost.seconds(batch, 0, batch * mean * window_share(model, mean), 0)
    _, _, floor_mem, floor_comp = step_time(1)
    floor = max(floor_mem, floor_comp)  # the roofline floor at datasheet rates (no engine, no communication)
    crossover = crossover_batch(step_time)
    weights_only = (
        crossover_batch(
            lambda b: (
                0.0,
                0.0,
                weights_read_bytes(model, fmt, b, s.group_size) / tensor / datasheet_bw,
                b * 2 * n_active / tensor / rate,
            )
        )
        or 0
    )
    bound = "host-bound" if cost.host(batch) >= decode else "memory-bound" if t_mem >= t_comp else "compute-bound"
    steps.append(
        step(
            "decode floor (batch 1)",
            "(weights read + KV of one sequence) / HBM bandwidth, per GPU (datasheet)",
            f"{format_bytes_si(step_time(1)[0])} / {format_bandwidth(datasheet_bw)}",
            format_duration(floor),
            sources.POPE_DECODE,
        )
    )
    steps.append(
        step(
            f"decode step at batch {batch} ({s.stack_name})",
            "step cost + max(weights / (bw × β_decode), b·2·N_active / (t × peak × η_decode)) "
            "+ KV read / (bw × β_attention) + TP all-reduces"
            + (", at least b × host seconds per sequence (next line)" if cost.host_seq > 0 else ""),
            f"β_decode {stack.decode.bandwidth:g}, η_decode {stack.decode.compute:g}, "
            f"β_attention {stack.attention_bandwidth:g} of {format_bandwidth(bw)} ({s.bandwidth_source}); " + fixed,
            f"{format_duration(decode)} ({bound})",
            f"{sources.ROOFLINE}; {s.rates_source or sources.STACK_RATES}",
        )
    )
    steps += host_steps(cost, batch, decode, s.host_source or sources.STACK_RATES)
    steps += moe_steps(model, batch, stack, s.expert_source or sources.STACK_RATES)
    steps.append(
        step(
            "roofline crossover batch",
            "smallest b with compute time ≥ memory time",
            f"ridge {peak / datasheet_bw:.0f} FLOP/B ({dtype})",
            ("none (KV reads grow with b as fast as FLOPs)" if crossover is None else f"b = {crossover}")
            + f"; weights alone: b = {weights_only}",
            sources.ROOFLINE,
        )
    )
    if tensor == 1:
        communication = "no TP communication"
    elif fabric is None:
        communication = "TP all-reduce not modelled (no cluster profile for this device)"
    else:
        communication = f"TP all-reduce {format_duration(decode_comm)} per decode step on {fabric.links(tensor)}"
        from napkin.engines.tp_allreduce import SOURCE, kernel

        size = batch * model.hidden * 2.0
        ran = kernel(size, tensor, fabric, custom=stack.tp_allreduce == "custom")
        custom = ran != "NCCL"
        how = f"{ran} peer-to-peer kernel" if custom else ran
        wait = f", each + {format_duration(stack.allreduce_seconds)}" if stack.allreduce_seconds else ""
        kernels = (SOURCE if custom else "napkin.comm ring/NVLS model") + (wait and "; " + s.allreduce_source)
        steps.append(
            step(
                "TP all-reduce per decode step",
                "2·L all-reduces of b·d·2 B over the TP group, as the engine runs them: one-shot α₁ + (t−1)·S/B, "
                "two-shot α₂ + 2(t−1)/t·S/B below 8 MiB, else NCCL (α–β)",
                f"2 × {model.layers} × all-reduce({format_bytes_si(size)}, n = {tensor}) on {fabric.name}, {how}{wait}",
                format_duration(decode_comm),
                f"{sources.MEGATRON_TP}; {kernels}",
            )
        )

    # --- the batch, whole -----------------------------------------------------------------------
    prefill_all = prefill_seconds(cost, [prompt] * batch, stack.max_num_batched_tokens)
    end_ctx = batch * (prompt + (output - 1) / 2) * window_share(model, mean)
    decode_all = (output - 1) * cost.seconds(batch, 0, end_ctx, 0) if output > 1 else 0.0
    whole = prefill_all + decode_all
    steps.append(
        step(
            f"the batch of {batch}, whole",
            "prefill of b prompts in budget-sized chunks, then (output − 1) decode steps at the mean context",
            f"{format_duration(prefill_all)} + {output - 1:,} × step",
            f"{format_duration(whole)}",
            sources.STACK_RATES,
        )
    )

    per_user = 1 / decode
    tps = batch * per_user
    per_gpu = tps / tensor
    prefill_tps_gpu = prompt / ttft / tensor
    request = ttft + (output - 1) * decode
    steps.append(
        step(
            "throughput",
            "b / decode step; per GPU ÷ t",
            f"{batch} / {format_duration(decode)}",
            f"{tps:,.0f} tokens/s per replica, {per_gpu:,.0f} per GPU",
            sources.POPE_DECODE,
        )
    )

    usd_out, usd_in, joules, cost_steps = cost_and_energy(s.price_per_hour, hardware.power, per_gpu, prefill_tps_gpu)
    steps += cost_steps

    warnings = serve_warnings(
        model, hardware.name, context, batch, max_batch, stack, s.stack_name, tensor, fabric, dtype, fmt
    )
    return InferenceResult(
        model=name,
        hardware=hardware.name,
        gpus=gpus,
        tensor_parallel=tensor,
        replicas=replicas,
        weights_format=fmt,
        kv_dtype=kv,
        context=context,
        prompt=prompt,
        output=output,
        batch=batch,
        params=n,
        active_params=n_active,
        weights_bytes=w_total,
        weights_bytes_per_gpu=w_gpu,
        kv_bytes_per_token=k["per_token"],
        kv_bytes_per_sequence=k["per_seq"],
        kv_cache_bytes=k["per_seq"] * batch,
        kv_cache_bytes_per_gpu=kv_gpu,
        workspace_bytes_per_gpu=work,
        reserve_bytes_per_gpu=reserve,
        memory_bytes_per_gpu=cap,
        capacity_source=cap_source,
        model_context=model.context,
        headroom_bytes_per_gpu=headroom,
        fits=headroom >= 0,
        max_batch=max_batch,
        max_context=max_ctx,
        efficiency=stack.prefill.compute,
        stack=s.stack_name,
        kv_capacity_tokens=kv_tokens,
        max_concurrency=concurrency,
        prefill_flops=prefill,
        ttft_seconds=ttft,
        prefill_seconds=prefill_all,
        decode_seconds=decode_all,
        batch_seconds=whole,
        prefill_tokens_per_second=batch * prompt / prefill_all,
        decode_tokens_per_second=batch * (output - 1) / decode_all if decode_all > 0 else 0.0,
        total_tokens_per_second=batch * (prompt + output) / whole,
        decode_bytes_per_step=read,
        decode_flops_per_step=flops,
        decode_seconds_per_token=decode,
        decode_floor_seconds=floor,
        decode_bound=bound,
        crossover_batch=crossover,
        crossover_batch_weights_only=weights_only,
        communication=communication,
        tokens_per_second_per_user=per_user,
        tokens_per_second=tps,
        tokens_per_second_per_gpu=per_gpu,
        prefill_tokens_per_second_per_gpu=prefill_tps_gpu,
        request_seconds=request,
        price_per_hour=s.price_per_hour,
        usd_per_million_tokens=usd_out,
        usd_per_million_input_tokens=usd_in,
        joules_per_output_token=joules,
        steps=steps,
        warnings=warnings,
    )
