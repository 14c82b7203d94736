"""napkin's serving model against published measurements: the error table in the README, and the fit.

    python examples/serving_validation.py            # the per-engine error table (README, "Serving validation")
    python examples/serving_validation.py --rows     # every row: measured, predicted, error
    python examples/serving_validation.py --fit vllm # refit a stack's achieved rates on its calibration rows
    python examples/serving_validation.py --fit vllm --keys tp_step_seconds,tp_prefill_seconds --joint
                                                     # every pair of two terms that trade off, not one at a time

The rows (examples/serving_runs.yaml) are published measurements: engine performance tables at a commit, engine
start-up logs, benchmark outputs. Each is ``calibration`` or ``validation``, split by source before any fit
(whole sources on one side, so nothing leaks); ``excluded`` rows ran under conditions napkin does not model (their
``why`` says which) and enter neither. The stacks' achieved rates (stacks/*.yaml) are fitted on the
calibration rows only; the README reports the validation rows' errors. Kinds of row:

* ``steady``: offline tables with every request queued (trtllm-bench): output tokens/s of an engine kept full;
* ``burst``: N requests sent at once (bench_serving ``--request-rate inf``), simulated;
* ``poisson``: requests at a rate, simulated with the same seed every time;
* ``batch1``: one sequence decoding (gpt-fast);
* ``latency``: one batch of N equal requests generated to the end (vLLM's ``benchmark_latency.py``): the seconds
  until the last request finishes, simulated as a burst of N;
* ``capacity``: the KV cache an engine logs at start-up.
"""

from __future__ import annotations

import argparse
import functools
import math
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from napkin.api import get_hardware
from napkin.api.serving import serving_fabric
from napkin.domain.model import Model
from napkin.engines.load import Workload, service_rate
from napkin.engines.replica import Replica
from napkin.engines.traffic import Scheduler, simulate
from napkin.engines.traffic_result import Lengths, percentile, weighted_percentile
from napkin.systems.presets import get_preset
from napkin.systems.serving_stack import ServingStack, get_serving

RUNS = Path(__file__).with_name("serving_runs.yaml")
ENGINES = ("vllm", "sglang", "tensorrt-llm", "tensorrt-llm-pytorch", "gpt-fast")
# Every row simulates the number of requests its benchmark sent (1 to 6,000): a burst of 3,000 queues three
# times as long as one of 1,000, so capping it understated TTFT by the same factor (SGLang offline rows).


@dataclass(frozen=True)
class Case:
    id: str
    split: str
    engine: str
    metric: str
    measured: float
    predicted: float
    terms: str = ""

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1


@functools.cache
def load() -> dict[str, Any]:
    """The rows file, parsed once per process (with libyaml's safe loader where PyYAML has it: the pure-Python one
    takes about a second on this 15,000-line file); callers read it, never change it."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    data: dict[str, Any] = yaml.load(RUNS.read_text(encoding="utf-8"), Loader=loader)
    return data


def _model(name: str, shapes: dict[str, Any]) -> Model:
    if name in shapes:
        return Model(**{k: v for k, v in shapes[name].items() if k != "source"})
    return get_preset(name).model


def _lengths(value: int | list[int]) -> Lengths:
    if isinstance(value, list):
        return Lengths(kind="uniform", values=value, label=f"{value[0]}..{value[1]}")
    return Lengths(kind="fixed", values=[value], label=str(value))


# Engine arguments a row's run set on its command line (``--max-num-seqs``, ``--max-num-batched-tokens``), or that
# its engine version fixed (``overlap_schedule: false``: SGLang before 0.4 had no overlap scheduler): they replace
# the stack's defaults for that row only; they are the run's settings, not fitted values.
ENGINE_ARGS = ("max_num_seqs", "max_num_batched_tokens", "overlap_schedule")


def replica_of(row: dict[str, Any], stack: ServingStack, shapes: dict[str, Any]) -> Replica:
    from napkin.engines.memory import capacity

    hardware = get_hardware(row["hardware"])
    return Replica(
        _model(row["model"], shapes),
        hardware,
        stack.for_device(hardware.name, capacity(hardware)[0]).model_copy(
            update={k: row[k] for k in ENGINE_ARGS if k in row}
        ),
        tensor=row["tp"],
        dp_attention=bool(row.get("dp_attention", False)),  # the run's layout, where its source states it
        weights=row["weights"],
        group=row.get("group_size", 128),
        kv=row["kv_dtype"],
        fabric=serving_fabric(hardware, row["tp"]),
    )


def kv_tokens(row: dict[str, Any], rep: Replica) -> int:
    """The KV capacity the run had: logged tokens, else logged bytes per GPU, else the stack's rule at the run's
    memory fraction (or its default)."""
    if row.get("kv_tokens"):
        return int(row["kv_tokens"])
    if row.get("kv_bytes_per_gpu"):
        return int(row["kv_bytes_per_gpu"] / rep.kv_bytes_per_token_gpu())
    return rep.kv_tokens(row.get("memory_fraction"))


def predict(row: dict[str, Any], stack: ServingStack, shapes: dict[str, Any]) -> dict[str, float]:
    """napkin's figures for the metrics a row publishes (and, under ``_``-prefixed keys, the model's terms)."""
    rep = replica_of(row, stack, shapes)
    kind = row["kind"]
    if kind == "capacity":
        return {"kv_tokens": float(rep.kv_tokens(row.get("memory_fraction")))}
    cost = rep.step_cost()
    if kind == "batch1":
        step = cost.seconds(1, 0, row["prompt"] + row["output"] / 2, 0)
        return {"decode_tokens_per_s_per_user": 1 / step}
    prompt, output = _lengths(row["prompt"]), _lengths(row["output"])
    kv = kv_tokens(row, rep)
    parts = rep.ranks  # independent schedulers (DP-attention ranks, PP micro-batches), each its share of requests
    if kind == "steady":
        rate = service_rate(rep, Workload(rate=1.0, prompt=prompt, output=output), kv)
        return {"output_tokens_per_s": rate * output.mean() * parts}
    n = max(1, int(row.get("requests", 500)) // parts)
    rng = random.Random(1)
    prompts, outputs = prompt.sample(rng, n), output.sample(rng, n)
    if kind in ("burst", "latency"):
        times = [0.0] * n
    else:
        rng = random.Random(0)
        t, times = 0.0, []
        for _ in range(n):
            t += rng.expovariate(row["rate"] / parts)
            times.append(t)
    sched = Scheduler(
        token_budget=rep.stack.max_num_batched_tokens,
        max_seqs=rep.stack.max_num_seqs,
        kv_tokens=kv,
        block=rep.stack.block_size,
        mixed=rep.stack.mixed_prefill,
        reserve_peak=rep.stack.reserve_peak,
        overhead=rep.stack.request_seconds,
    )
    o = simulate(times, prompts, outputs, cost, sched)
    prefill = sum(cost.seconds(0, p, 0, p * (p + 1) / 2) for p in prompts)
    terms = {
        "_weights_gb": sum(rep.weight_bytes_gpu()) / 1e9,
        "_kv_kb_per_token": rep.kv_bytes_per_token_gpu() / 1e3,
        "_bandwidth_tbs": rep.hardware.memory_bandwidth * rep.stack.decode.bandwidth / 1e12,
        "_fixed_ms": (cost.fixed + cost.hidden + cost.comm(1)) * 1e3,
        "_step1_ms": cost.seconds(1, 0, sum(prompts) / n, 0) * 1e3,
        "_kv_tokens": float(kv),
        "_batch": o.mean_batch,
        "_prefill_share": min(prefill / o.duration, 1.0) if o.duration > 0 else 0.0,
    }
    tpot_mean = sum(o.tpot) / len(o.tpot) if o.tpot else math.nan
    return {
        "latency_s": o.duration,
        "output_tokens_per_s": o.output_tokens / o.duration * parts,
        "mean_ttft_ms": sum(o.ttft) / len(o.ttft) * 1e3,
        "median_ttft_ms": percentile(o.ttft, 50) * 1e3,
        "mean_tpot_ms": tpot_mean * 1e3,
        "median_tpot_ms": percentile(o.tpot, 50) * 1e3,
        # inter-token latency is over every gap a client sees, not per request: a prefill step that pauses
        # decoding (SGLang) lengthens a few gaps, so the median gap stays one decode step while TPOT grows
        "mean_itl_ms": sum(g * n for g, n in o.itl) / max(sum(n for _, n in o.itl), 1) * 1e3,
        "median_itl_ms": weighted_percentile(o.itl, 50) * 1e3,
    } | terms


def cases(stacks: dict[str, ServingStack] | None = None, split: str | None = None) -> list[Case]:
    data = load()
    stacks = stacks or {e: get_serving(e) for e in ENGINES}
    out = []
    for row in data["runs"]:
        if split is not None and row["split"] != split:
            continue
        if row["engine"] not in stacks:
            continue
        predicted = predict(row, stacks[row["engine"]], data["shapes"])
        terms = " ".join(f"{k[1:]}={v:.3g}" for k, v in predicted.items() if k.startswith("_"))
        for metric, measured in row["measured"].items():
            if metric in predicted and measured and predicted[metric] > 0:
                out.append(
                    Case(row["id"], row["split"], row["engine"], metric, float(measured), predicted[metric], terms)
                )
    return out


FAMILY = {
    "output_tokens_per_s": "throughput",
    "decode_tokens_per_s_per_user": "throughput",
    "mean_ttft_ms": "TTFT",
    "median_ttft_ms": "TTFT",
    "mean_tpot_ms": "TPOT",
    "median_tpot_ms": "TPOT",
    "mean_itl_ms": "TPOT",
    "median_itl_ms": "TPOT",
    "latency_s": "latency",
    "kv_tokens": "KV capacity",
}


def table(all_cases: list[Case] | None = None) -> str:
    """The README's markdown table: per engine and metric family, calibration and validation errors."""
    found = cases() if all_cases is None else all_cases
    groups: dict[tuple[str, str, str], list[float]] = {}
    for c in found:
        groups.setdefault((c.engine, FAMILY[c.metric], c.split), []).append(c.error)
    lines = [
        "| engine | metric | calibration: n, mean \\|err\\|, max | validation: n, mean \\|err\\|, max, bias |",
        "|---|---|---|---|",
    ]
    for engine in ENGINES:
        for family in ("throughput", "latency", "TTFT", "TPOT", "KV capacity"):
            cal = groups.get((engine, family, "calibration"), [])
            val = groups.get((engine, family, "validation"), [])
            if not cal and not val:
                continue
            lines.append(f"| {engine} | {family} | {_stats(cal, bias=False)} | {_stats(val, bias=True)} |")
    return "\n".join(lines)


def _stats(errors: list[float], *, bias: bool) -> str:
    if not errors:
        return "—"
    mean = sum(abs(e) for e in errors) / len(errors)
    worst = max(abs(e) for e in errors)
    text = f"{len(errors)}, {mean:.0%}, {worst:.0%}"
    if bias:
        text += f", {sum(errors) / len(errors):+.0%}"
    return text


# ------------------------------------------------------------------------------------------------ fit

GRID = {
    "decode.bandwidth": [0.45, 0.55, 0.65, 0.72, 0.8, 0.88, 0.95],
    "attention_bandwidth": [0.3, 0.45, 0.6, 0.75, 0.9],
    "prefill.compute": [0.25, 0.35, 0.45, 0.55, 0.65, 0.75, 0.85],
    "decode.compute": [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.85],
    "iteration_seconds": [0.0, 0.0005, 0.001, 0.0015, 0.002, 0.003, 0.005, 0.008],
    "tp_step_seconds": [0.0, 0.0005, 0.001, 0.002, 0.003, 0.004, 0.005, 0.006, 0.008],
    "tp_prefill_seconds": [ms * 1e-3 for ms in (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 15)],
    "request_seconds": [0.0, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05],
    "allreduce_seconds": [0.0, 5e-6, 1e-5, 1.5e-5, 2e-5, 2.5e-5, 3e-5, 3.5e-5, 4e-5, 5e-5],
    "collective_efficiency": [1.0, 0.7, 0.6, 0.5, 0.4, 0.35, 0.3, 0.25, 0.2, 0.15],
    "host_seconds_per_sequence": [us * 1e-6 for us in (0, 2, 4, 6, 8, 10, 12, 15, 20, 25, 30, 35, 40, 45, 50, 60, 80)],
    "expert_compute": [1.0, 0.85, 0.7, 0.6, 0.5, 0.45, 0.4, 0.35, 0.3, 0.27, 0.25, 0.23, 0.2, 0.17, 0.15],
    "matmul_compute.fp4": [0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.65, 0.75],
    "matmul_compute.fp8": [0.3, 0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.85],
}


def _set(stack: ServingStack, key: str, value: float) -> ServingStack:
    if key == "decode.bandwidth":  # prefill reads the same weights with the same kernels
        return stack.model_copy(
            update={
                "decode": stack.decode.model_copy(update={"bandwidth": value}),
                "prefill": stack.prefill.model_copy(update={"bandwidth": value}),
            }
        )
    if key.startswith("matmul_compute."):  # one compute dtype's fraction of its peak
        return stack.model_copy(update={"matmul_compute": stack.matmul_compute | {key.split(".")[1]: value}})
    if "." in key:
        phase, field = key.split(".")
        return stack.model_copy(update={phase: getattr(stack, phase).model_copy(update={field: value})})
    return stack.model_copy(update={key: value})


def loss(engine: str, stack: ServingStack) -> float:
    """Mean over metric families of mean |ln(predicted / measured)|, calibration rows of ``engine`` only."""
    families: dict[str, list[float]] = {}
    for c in cases({engine: stack}, split="calibration"):
        families.setdefault(FAMILY[c.metric], []).append(abs(math.log(c.predicted / c.measured)))
    return sum(sum(v) / len(v) for v in families.values()) / len(families) if families else math.inf


def fit(engine: str, keys: list[str], rounds: int = 2) -> ServingStack:
    """Coordinate descent over GRID on the calibration rows; prints the path."""
    stack = get_serving(engine)
    best = loss(engine, stack)
    for _ in range(rounds):
        for key in keys:
            for value in GRID[key]:
                trial = _set(stack, key, value)
                score = loss(engine, trial)
                if score < best - 1e-9:
                    best, stack = score, trial
            print(f"{key}: loss {best:.4f}", file=sys.stderr)
    return stack


def fit_joint(engine: str, keys: list[str]) -> ServingStack:
    """Every combination of the keys' GRID values (terms that trade off, such as a cost on every step and one on
    prompt-carrying steps, where coordinate descent stops in the valley between them); prints the best."""
    import itertools

    base = get_serving(engine)
    best, stack = loss(engine, base), base
    for values in itertools.product(*(GRID[k] for k in keys)):
        trial = base
        for key, value in zip(keys, values, strict=True):
            trial = _set(trial, key, value)
        score = loss(engine, trial)
        if score < best - 1e-9:
            best, stack = score, trial
    print(f"{'+'.join(keys)} jointly: loss {best:.4f}", file=sys.stderr)
    return stack


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", action="store_true", help="print every row")
    parser.add_argument("--terms", action="store_true", help="with --rows: the model's terms of each row")
    parser.add_argument("--fit", metavar="ENGINE", help="refit ENGINE's achieved rates on its calibration rows")
    parser.add_argument("--keys", default=",".join(GRID), help="which rates to fit")
    parser.add_argument("--rounds", type=int, default=2, help="coordinate-descent rounds over the keys")
    parser.add_argument("--joint", action="store_true", help="search the keys' grid jointly, not one at a time")
    args = parser.parse_args()
    if args.fit:
        keys = args.keys.split(",")
        stack = fit_joint(args.fit, keys) if args.joint else fit(args.fit, keys, args.rounds)
        print(
            yaml.safe_dump(
                stack.model_dump(
                    include={
                        "decode",
                        "prefill",
                        "attention_bandwidth",
                        "iteration_seconds",
                        "tp_step_seconds",
                        "tp_prefill_seconds",
                        "request_seconds",
                        "collective_efficiency",
                        "host_seconds_per_sequence",
                        "matmul_compute",
                        "expert_compute",
                        "allreduce_seconds",
                    }
                ),
                sort_keys=False,
            )
        )
        return
    found = cases()
    if args.rows:
        for c in sorted(found, key=lambda c: (c.engine, c.split, c.error)):
            print(
                f"{c.engine:13} {c.split:11} {c.metric:30} {c.measured:12.4g} {c.predicted:12.4g} "
                f"{c.error:+8.1%}  {c.id}" + (f"\n    {c.terms}" if args.terms and c.terms else "")
            )
        return
    print(table(found))


if __name__ == "__main__":
    main()
