"""An open-loop deployment meets an SLO only at a rate it sustains: a finite run at a rate its scheduler cannot keep
up with ends before its queue shows it (a new user's report: the README's traffic example was 'met' at 20 req/s
with 2,000 requests and missed with 10,000, and serve-plan's replica count moved with --requests)."""

from __future__ import annotations

import napkin
from napkin.engines.load import Workload, max_rate, run, saturation_rate
from napkin.engines.replica import Replica
from napkin.engines.traffic_result import Lengths, Slo
from napkin.systems.presets import get_preset
from napkin.systems.profiles import resolve
from napkin.systems.serving_stack import get_serving

SLO = Slo(targets={"ttft": {"90": 2.0}, "tpot": {"99": 0.1}})
PROMPT = Lengths(kind="uniform", values=[200, 1800], label="200..1800")
OUTPUT = Lengths(kind="uniform", values=[50, 350], label="50..350")


def _replica() -> Replica:
    model = get_preset("llama3.1-8b").model
    return Replica(model, resolve("h100", None).profile, get_serving("vllm"))


def test_the_saturation_rate_is_what_a_flooded_scheduler_completes() -> None:
    """Every request sent at once: the engine completes them at its full rate, which a longer open-loop run at a
    rate just above it cannot meet, while one just below it holds its latencies as the run grows."""
    replica = _replica()
    workload = Workload(rate=1.0, requests=2000, prompt=PROMPT, output=OUTPUT)
    sustained = saturation_rate(replica, 1, workload)
    assert 10 < sustained < 40  # Llama 3.1 8B on one H100 at ~1,000 + 200 tokens a request
    above = Workload(rate=1.05 * sustained, requests=8000, prompt=PROMPT, output=OUTPUT)
    below = Workload(rate=0.8 * sustained, requests=8000, prompt=PROMPT, output=OUTPUT)
    late = run(replica, 1, above).ttft[-1000:]
    assert sorted(late)[500] > 10 * sorted(run(replica, 1, above).ttft[:1000])[500]  # the queue grew
    assert SLO.met(run(replica, 1, below))


def test_the_largest_rate_meeting_an_slo_is_one_the_deployment_sustains() -> None:
    replica = _replica()
    workload = Workload(rate=1.0, requests=2000, prompt=PROMPT, output=OUTPUT)
    assert max_rate(replica, 1, workload, SLO) < saturation_rate(replica, 1, workload)
    above = napkin.traffic(
        model="llama3.1-8b", hardware="h100", rate="25/s", prompt="200..1800", output="50..350", **_slo()
    )
    assert above.saturated and above.slo_met is False
    assert any("more than the deployment serves" in w and "no SLO is met" in w for w in above.warnings)
    assert above.max_rate is not None and above.max_rate < 25


def _slo() -> dict[str, str]:
    return {"ttft_p90": "2s", "tpot_p99": "100ms"}


def test_serve_plan_s_replicas_meet_the_slo_in_traffic_whatever_the_requests_simulated() -> None:
    """The new user's case: 10 req/s of Llama 3.1 70B, 2,000-token prompts, 300-token outputs: serve-plan's count
    is the fewest replicas whose own run meets the SLO at a sustainable rate, so it does not move with --requests,
    and traffic on that deployment agrees."""
    ask = {"model": "llama3.1-70b", "rate": "10/s", "prompt": "2000", "output": "300", "hardware": "gb200"}
    slo = {"ttft_p90": "1s", "tpot_p99": "50ms"}
    counts = set()
    for requests in (600, 2000):
        plan = napkin.serve_plan(**ask, **slo, requests=requests, top=1)
        best = plan.deployments[0]
        counts.add(best.replicas)
    assert len(counts) == 1
    checked = napkin.traffic(
        model="llama3.1-70b",
        hardware=best.hardware,
        gpus=best.gpus,
        tensor_parallel=best.layout.tensor_parallel,
        weights=best.weights,
        kv_dtype=best.kv_dtype,
        rate="10/s",
        prompt="2000",
        output="300",
        **slo,
    )
    assert checked.slo_met and not checked.saturated
