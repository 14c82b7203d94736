"""Planner speed: the whole layout space of a 1T-parameter GPT (Narayanan et al. 2021's largest model) on
4,096 GPUs of a DGX H100 cluster, 4M-token batches; then DeepSeek-V3 (61 layers, 256 experts) on 1,024 GPUs,
whose pipeline splits are mostly uneven (every power of two) and whose expert parallelism multiplies the space.

    python examples/plan_benchmark.py [--repeat 5]

Prints the layouts enumerated, how many fit, layouts scored per second (the plain-float step model) and
the total time of ``napkin.engines.planner.plan`` (enumerate, check memory, score, rank, build the top 5 results),
best of ``--repeat`` runs. Timing lives here, never in the test suite.
"""

from __future__ import annotations

import argparse
import time

from napkin.domain.model import Model
from napkin.engines.planner import candidates, plan
from napkin.engines.step_time import StepModel, machine
from napkin.systems.cluster import find
from napkin.systems.profiles import resolve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    cluster = find("dgx-h100").cluster
    hw = machine(cluster, resolve(cluster.device).profile)
    model = Model(layers=128, hidden=25600, heads=160, vocab=51200, context=2048, biases=True, learned_positions=True)
    gpus, seq, batch = 4096, 2048, 2048  # 2,048 × 2,048 = 4M tokens
    best_total = best_score = float("inf")
    for _ in range(args.repeat):
        sm = StepModel(model, seq, batch, hw)  # fresh: no memoised layer times carried over
        start = time.perf_counter()
        result = plan(sm, gpus, "gpt-1t", top=5)
        best_total = min(best_total, time.perf_counter() - start)
        sm = StepModel(model, seq, batch, hw)
        knobs = candidates(sm, gpus)
        start = time.perf_counter()
        for k in knobs:
            sm.memory_bytes(k)
            sm.evaluate(k)
        best_score = min(best_score, time.perf_counter() - start)
    print(f"layouts enumerated: {result.considered:,}; fit in memory: {result.fitting:,}")
    print(f"scoring: {len(knobs) / best_score:,.0f} layouts/s (memory + step time, every layout)")
    print(f"napkin.engines.planner total: {best_total:.3f} s (best of {args.repeat})")
    print(f"winner: {result.layouts[0].layout_text}, MFU {result.layouts[0].mfu:.3f}")
    from napkin.systems.presets import get_preset

    moe = get_preset("deepseek-v3").model
    best = float("inf")
    for _ in range(args.repeat):
        sm = StepModel(moe, 4096, 8192, hw, flash_attention=True, causal=True)
        start = time.perf_counter()
        result = plan(sm, 1024, "deepseek-v3", top=5)
        best = min(best, time.perf_counter() - start)
    print(
        f"deepseek-v3 on 1,024 GPUs: {result.considered:,} layouts, {result.fitting:,} fit; "
        f"napkin.engines.planner total: {best:.3f} s (best of {args.repeat})"
    )


if __name__ == "__main__":
    main()
