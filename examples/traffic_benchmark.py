"""Time the scheduler model: 10⁵ requests through one replica (the issue's budget: ≤ 2 s on a 2-core machine).

    python examples/traffic_benchmark.py            # Llama 3.1 8B on an H100 with vLLM, four load levels

Timing belongs here, not in the tests. The run is seeded, so the printed latencies are the same every time;
only the seconds depend on the machine (the CPU seconds less so, on a shared one).
"""

from __future__ import annotations

import time

from napkin.api import get_hardware
from napkin.engines.load import Workload, run
from napkin.engines.replica import Replica
from napkin.engines.traffic_result import Lengths, percentile
from napkin.systems.presets import get_preset
from napkin.systems.serving_stack import get_serving

REQUESTS = 100_000


def main() -> None:
    replica = Replica(get_preset("llama3.1-8b").model, get_hardware("h100"), get_serving("vllm"))
    prompt = Lengths(kind="uniform", values=[200, 1800], label="200..1800")
    output = Lengths(kind="uniform", values=[50, 350], label="50..350")
    for rate in (1.0, 10.0, 20.0, 40.0):
        work = Workload(rate=rate, prompt=prompt, output=output, requests=REQUESTS, seed=0)
        start, cpu = time.perf_counter(), time.process_time()
        outcome = run(replica, 1, work)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        print(
            f"{rate:5.0f} req/s: {REQUESTS:,} requests in {seconds:.2f} s ({cpu:.2f} s of CPU; "
            f"{outcome.steps:,} engine steps); "
            f"TTFT P99 {percentile(outcome.ttft, 99):.3g} s, TPOT P50 {percentile(outcome.tpot, 50) * 1e3:.3g} ms"
        )


if __name__ == "__main__":
    main()
