"""The cost of one engine step of a serving replica, as coefficients in seconds (napkin.engines.replica builds it
from the stack's achieved rates; napkin.engines.traffic runs the scheduler on it)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StepCost:
    """Seconds of one engine step on one GPU of a replica, as coefficients (all in seconds):

    fixed (+ prefill_fixed where the step carries prompt tokens) + comm(T) + max(weights(T), GEMMs) + ctx · attention
    + pairs · prefill_pair, where

    * T = decode + prefill tokens of the step; comm(T) = comm_fixed + comm_token · T (TP all-reduces), or, where
      ``comm_pieces`` are given, the first (below, fixed, per_token) piece with T < below: the custom all-reduce's
      one-shot and two-shot regimes, then NCCL's (``napkin.engines.tp_allreduce``);
    * weights(T) = dense + experts · (1 − (1 − k/E)^(T · ep_tokens)) (MoE: only the experts some token
      picked are read; ``ep_tokens`` scales T to the tokens the expert group sees under DP attention);
    * GEMMs = decode · decode_token + prefill · prefill_token;
    * ctx: cached tokens the decoding queries read, each max(KV bytes / attention bandwidth, FLOPs / rate);
    * pairs: Σ over prompt tokens of the keys they attend to (compute-bound flash attention);
    * speculative decoding: each sequence verifies ``verify`` = γ + 1 tokens per step, after ``draft_passes``
      forward passes of the draft (a small model, or an MTP head) over the decoding sequences, each
      max(draft weights, seqs · draft FLOPs) (Leviathan et al. 2023, arXiv:2211.17192 §3.4: the step costs
      γ·c + 1 target steps, c the draft's cost ratio);
    * ``prefill_fixed``: a TP group's step that carries prompt tokens runs without its CUDA graph, launched kernel by
      kernel on every rank (TensorRT-LLM, vLLM), and costs this much more than a decode step;
    * ``host_seq``: host seconds per decoding sequence per step that run while the GPU computes (TensorRT-LLM's
      PyTorch backend, ``py_executor.py`` ``_executor_loop_overlap``: the next step is scheduled and launched and
      the previous step's requests updated while this one runs), so the step takes max(the above, hidden + seqs ·
      host_seq); ``hidden``: the host's fixed work per step where it too runs under the GPU's (SGLang 0.4's
      overlap scheduler, ``scheduler.py`` ``event_loop_overlap``), else 0 and that work is in ``fixed``."""

    fixed: float
    comm_fixed: float
    comm_token: float
    dense: float
    experts_all: float
    experts: int
    top_k: int
    ep_tokens: float
    decode_token: float
    prefill_token: float
    attention: float
    prefill_pair: float
    comm_pieces: tuple[tuple[float, float, float], ...] = ()
    verify: int = 1
    draft_passes: float = 0.0
    draft_weights: float = 0.0
    draft_token: float = 0.0
    host_seq: float = 0.0
    hidden: float = 0.0  # host work per step that overlaps the GPU's (SGLang 0.4's overlap scheduler)
    prefill_fixed: float = 0.0  # more per step that carries prompt tokens (a TP group's eager steps)

    def draft(self, seqs: float) -> float:
        """Seconds of the draft's passes in a step where ``seqs`` sequences decode (0 without speculation)."""
        if self.draft_passes == 0 or seqs <= 0:
            return 0.0
        return self.draft_passes * max(self.draft_weights, seqs * self.draft_token)

    def weights(self, tokens: float) -> float:
        if self.experts <= 1 or tokens <= 0:
            return self.dense + self.experts_all
        e, k = self.experts, self.top_k
        untouched: float = (1 - k / e) ** (tokens * self.ep_tokens)
        return self.dense + self.experts_all * (1 - untouched)

    def comm(self, tokens: float) -> float:
        for below, fixed, per_token in self.comm_pieces:
            if tokens < below:
                return fixed + per_token * tokens
        return self.comm_fixed + self.comm_token * tokens

    def gemms(self, decode: float, prefill: float) -> float:
        return decode * self.decode_token + prefill * self.prefill_token

    def seconds(self, decode: float, prefill: float, ctx: float, pairs: float) -> float:
        tokens = decode + prefill
        gpu = (
            self.fixed
            + (self.prefill_fixed if prefill > 0 else 0.0)
            + self.comm(tokens)
            + max(self.weights(tokens), self.gemms(decode, prefill))
            + self.attention * ctx
            + self.prefill_pair * pairs
            + self.draft(decode / self.verify)
        )
        return max(gpu, self.host(decode / self.verify))

    def host(self, seqs: float) -> float:
        """Host seconds of a step where ``seqs`` sequences decode (overlapped with the GPU's work)."""
        return self.hidden + self.host_seq * seqs

    def stretch(self, steps: int, first: float, slope: float, seqs: float) -> float:
        """Seconds of ``steps`` decode-only steps whose GPU time is first + slope · i (i = 0, 1, …), each at
        least the host's time for ``seqs`` sequences."""
        gpu = steps * first + slope * steps * (steps - 1) / 2
        floor = self.host(seqs)
        if floor <= first:
            return gpu
        if slope <= 0:
            return steps * floor
        under = min(steps, math.ceil((floor - first) / slope))  # steps whose GPU time is below the host's
        rest = steps - under
        return under * floor + rest * first + slope * (steps * (steps - 1) - under * (under - 1)) / 2
