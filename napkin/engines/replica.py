"""One serving replica as an engine runs it: bytes per GPU, KV capacity by the stack's memory rule, and the cost
of one engine step at the stack's achieved rates (``napkin.traffic.StepCost``).

Layouts of a replica of ``tensor × pipeline`` GPUs:

* TP ``t``: every matrix split over t GPUs (Shoeybi et al. 2019 §3), two all-reduces of the step's activations
  per layer; KV heads split while t ≤ n_kv, then replicated; MLA's latent replicated on every rank.
* PP ``p``: L/p layers per stage; p micro-batches in flight (vLLM's virtual engines), so each sees a step of
  p × stage time plus the p − 1 activation hand-offs, and the replica serves p of them at once.
* EP (MoE): routed experts split over the replica's GPUs instead of sliced by TP; dispatch and combine are
  two all-to-alls per MoE layer (Lepikhin et al. 2020, GShard §2.2).
* DP attention (MoE, SGLang ``--enable-dp-attention``): each GPU runs attention for its own sequences with
  the whole attention weights and its own KV cache (no replicated MLA latent), experts split over all GPUs;
  the expert group sees every rank's tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

from napkin.domain.model import Model
from napkin.engines.serving import KvDtype, WeightFormat, compute_dtype, kv_element_bytes, weight_bytes_per_param
from napkin.engines.step_cost import StepCost
from napkin.systems.cluster import Fabric
from napkin.systems.profiles import HardwareProfile
from napkin.systems.serving_stack import ServingStack


def link_fabric(hardware: HardwareProfile, size: int) -> Fabric | None:
    """A device with no cluster profile: its own interconnect figure (both directions) halved, per direction,
    with a 5 µs hop (NCCL tuning.cc's PCIe base latency order); a group of at most the devices it joins
    (``interconnect_devices``: ``napkin.api.system_inputs.tp_span_problem`` refuses a larger one)."""
    if size == 1 or hardware.interconnect_bandwidth is None:
        return None
    bw = hardware.interconnect_bandwidth / 2
    name = hardware.interconnect or "interconnect"
    return Fabric(
        name=name,
        domain_size=size,
        up_name=name,
        up_bandwidth=bw,
        up_latency=5e-6,
        nvls_bandwidth=0.0,
        nvls_latency=0.0,
        out_name="",
        out_bandwidth_per_device=0.0,
        out_latency=0.0,
        direct_links=False,
    )


@dataclass(frozen=True)
class Replica:
    """A model served by one engine on ``tensor × pipeline`` GPUs of one kind."""

    model: Model
    hardware: HardwareProfile
    stack: ServingStack
    tensor: int = 1
    pipeline: int = 1
    expert: bool = False
    dp_attention: bool = False
    weights: str = "bf16"
    group: int = 128
    kv: str = "bf16"  # a KvDtype value
    fabric: Fabric | None = None
    device_bytes: float | None = None

    @property
    def gpus(self) -> int:
        return self.tensor * self.pipeline

    @property
    def ranks(self) -> int:
        """Independent schedulers: DP-attention ranks × pipeline micro-batches."""
        return (self.tensor if self.dp_attention else 1) * self.pipeline

    def device(self) -> float:
        from napkin.engines.memory import capacity

        return self.device_bytes if self.device_bytes is not None else capacity(self.hardware)[0]

    # --- bytes per GPU ---------------------------------------------------------------------------------
    def weight_bytes_gpu(self) -> tuple[float, float]:
        """(dense, routed experts) bytes on one GPU. Embeddings and LM head stay 16-bit."""
        m, bpp = self.model, weight_bytes_per_param(WeightFormat(self.weights), self.group)
        blocks = m.block_params(active=False)
        experts = m.expert_params() * bpp
        dense = blocks * bpp + (m.params() - blocks) * 2.0 - experts
        split = self.tensor * self.pipeline
        dense_split = self.pipeline if self.dp_attention else split
        return dense / dense_split, experts / split

    def kv_bytes_per_token_gpu(self) -> float:
        m = self.model
        width = m.kv_cache_width * kv_element_bytes(KvDtype(self.kv), m.kv_cache_width if m.is_mla else m.d_head)
        share = 1.0 if m.is_mla or self.dp_attention else max(m.n_kv / self.tensor, 1.0) / m.n_kv
        return m.layers / self.pipeline * width * share

    def activations(self) -> float:
        """Peak activations of the engine's profiling pass: max_num_batched_tokens tokens, 16-bit, of the
        residual stream and attention output (4·d), the gate, up and activated MLP (3·F/t) and QKV
        ((a + 2·n_kv)·d_h / t); or fp32 logits for max_num_seqs sequences where the sampler is warmed up too."""
        m, t, s = self.model, 1 if self.dp_attention else self.tensor, self.stack
        ffn = max(
            m.d_ffn if m.dense_layers or not m.is_moe else 0,
            (m.top_k + m.shared_experts) * m.d_expert if m.is_moe else 0,
        )
        qkv = (m.n_heads + 2 * m.n_kv) * m.d_head
        forward = s.max_num_batched_tokens * 2.0 * (4 * m.hidden + (3 * ffn + qkv) / t)
        logits = s.max_num_seqs * m.vocab * 4.0 / t if s.sampler_logits else 0.0
        return max(forward, logits)

    def kv_budget(self, fraction: float | None = None) -> float:
        dense, experts = self.weight_bytes_gpu()
        return self.stack.kv_budget(self.device(), dense + experts, self.activations(), self.tensor, fraction)

    def kv_tokens(self, fraction: float | None = None) -> int:
        """Tokens of KV cache per scheduler (the whole replica, or one DP-attention rank / micro-batch),
        rounded down to whole blocks, as the engine logs it."""
        tokens = max(0.0, self.kv_budget(fraction)) / self.kv_bytes_per_token_gpu()
        if self.pipeline > 1:
            tokens /= self.pipeline  # the micro-batches share each stage's cache
        block = self.stack.block_size
        return int(tokens // block * block)

    # --- time ------------------------------------------------------------------------------------------
    def step_cost(self) -> StepCost:
        """Seconds of one engine step of one scheduler, as StepCost coefficients."""
        m, hw, t, p = self.model, self.hardware, self.tensor, self.pipeline
        dtype = compute_dtype(WeightFormat(self.weights), hw)
        s = self.stack.at_dtype(dtype)
        peak = hw.peak(dtype)
        attn_peak = hw.peak("bf16")
        bw = hw.memory_bandwidth
        dense, experts = self.weight_bytes_gpu()
        gemm_split = t * p if not self.dp_attention else p
        dense_flops = 2.0 * (m.active_params() - m.routed_active_params()) / gemm_split
        expert_flops = 2.0 * m.routed_active_params() / (t * p)
        if self.dp_attention:
            expert_flops *= t  # the expert group runs every rank's tokens
        flops = dense_flops + expert_flops / s.expert_compute  # grouped expert GEMMs at their own share
        split_attn = 1 if self.dp_attention else t
        attn_ctx = 4.0 * m.layers / p * m.d_attn / split_attn  # QKᵀ and A·V per cached token per query
        kv_ctx = self.kv_bytes_per_token_gpu()
        attention = max(kv_ctx / (bw * s.attention_bandwidth), attn_ctx / (attn_peak * self.stack.decode.compute))
        comm0 = comm1 = 0.0
        pieces: tuple[tuple[float, float, float], ...] = ()
        fabric = self.fabric
        if fabric is not None and t > 1:
            from napkin.engines.comm import collective_seconds
            from napkin.engines.tp_allreduce import allreduce_pieces

            layers = m.layers / p
            slow = 1 / s.collective_efficiency

            def all_to_all(tokens: int) -> float:  # MoE dispatch + combine, through NCCL
                if self.dp_attention:  # the MoE layers' only exchange
                    size = tokens * m.top_k * m.hidden * 2.0
                elif self.expert and m.is_moe:
                    size = tokens * m.top_k * m.hidden * 2.0 / t
                else:
                    return 0.0
                return 2 * m.moe_layers / p * collective_seconds("all-to-all", size, t, fabric) * slow

            a2a0 = all_to_all(1)
            a2a1 = (all_to_all(4097) - a2a0) / 4096
            if self.dp_attention:
                comm0, comm1 = a2a0, a2a1
            else:  # two all-reduces of the step's activations per layer, as the engine runs them
                ars = allreduce_pieces(
                    m.hidden * 2.0, t, fabric, custom=s.tp_allreduce == "custom", efficiency=s.collective_efficiency
                )
                sync = s.allreduce_seconds
                pieces = tuple((upper, 2 * layers * (a + sync) + a2a0, 2 * layers * b + a2a1) for upper, a, b in ars)
        stages = float(p)
        handoff = 0.0
        if p > 1 and fabric is not None:
            handoff = (p - 1) * fabric.up_latency
        host = s.iteration_seconds + (s.tp_step_seconds if t > 1 else 0.0)
        return StepCost(
            fixed=(0.0 if s.overlap_schedule else host) + handoff,
            hidden=host if s.overlap_schedule else 0.0,
            prefill_fixed=s.tp_prefill_seconds if t > 1 else 0.0,
            comm_fixed=stages * comm0,
            comm_token=stages * comm1,
            comm_pieces=tuple((upper, stages * a, stages * b) for upper, a, b in pieces),
            dense=stages * dense / (bw * s.decode.bandwidth),
            experts_all=stages * experts / (bw * s.decode.bandwidth),
            experts=m.experts,
            top_k=m.top_k,
            ep_tokens=float(t) if self.dp_attention else 1.0,
            decode_token=stages * flops / (peak * s.decode.compute),
            prefill_token=stages * flops / (peak * s.prefill.compute),
            attention=stages * attention,
            prefill_pair=stages * attn_ctx / (attn_peak * self.stack.prefill.compute),  # bf16 attention
            host_seq=s.host_seconds_per_sequence,
        )
