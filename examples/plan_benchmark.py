"""Planner speed. First issue 21's yardstick, ``napkin plan --model llama3-70b --gpus 512 --global-batch-tokens 4M``
end to end: in this process through ``napkin.plan`` (inputs parsed, every layout scored, the top rows built) and as
a fresh ``python -m napkin`` process (start-up included), beside ``napkin --version`` (the interpreter, typer and
napkin's command table: the floor any command pays), wall and CPU time (CPU time is what a loaded machine does not
inflate). With ``--baseline DIR`` (a source tree of another commit, e.g. ``git archive 69cd07f | tar -x -C
DIR``) the same measurements of that tree, in fresh processes, and the ratios. Then the whole layout space of a
1T-parameter GPT (Narayanan et al. 2021's largest model) on 4,096 GPUs of a DGX H100 cluster, 4M-token batches;
then DeepSeek-V3 (61 layers, 256 experts) on 1,024 GPUs, whose pipeline splits are mostly uneven (every power of
two) and whose expert parallelism multiplies the space.

    python examples/plan_benchmark.py [--repeat 5] [--baseline DIR]

Prints the layouts enumerated, how many fit, layouts scored per second (the plain-float step model) and the total
time of ``napkin.engines.planner.plan`` (enumerate, check memory, score, rank, build the top 5 results), best of
``--repeat`` runs. Python's bytecode cache is allowed in the child processes (a first run writes it), as an
installed napkin has it. Timing lives here, never in the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

QUESTION = {"model": "llama3-70b", "gpus": 512, "global_batch_tokens": "4M"}
ARGV = ["plan", "--model", "llama3-70b", "--gpus", "512", "--global-batch-tokens", "4M"]

#: Run in a fresh interpreter on a source tree: ``napkin.plan`` in process, best of N, as JSON (wall, CPU).
IN_PROCESS = """
import json, sys, time
import napkin
question, repeat = json.loads(sys.argv[1]), int(sys.argv[2])
napkin.plan(**question)  # imports and pydantic schemas built once, as a command's start-up does
wall = cpu = float("inf")
for _ in range(repeat):
    w, c = time.perf_counter(), time.process_time()
    napkin.plan(**question)
    wall, cpu = min(wall, time.perf_counter() - w), min(cpu, time.process_time() - c)
print(json.dumps([wall, cpu]))
"""


def _env(tree: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(tree)
    return env


def _command(tree: Path, args: list[str], repeat: int) -> tuple[float, float]:
    """(wall, CPU) of ``python -m napkin ARGS`` in a fresh process on ``tree``, best of ``repeat``."""
    env = _env(tree)
    argv = [sys.executable, "-m", "napkin", *args]
    subprocess.run(argv, env=env, cwd=tree, capture_output=True, check=True)  # writes the bytecode cache
    wall = cpu = float("inf")
    for _ in range(repeat):
        before, w = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        subprocess.run(argv, env=env, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = min(wall, time.perf_counter() - w)
        cpu = min(cpu, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return wall, cpu


def measure(tree: Path, repeat: int) -> tuple[tuple[float, float], tuple[float, float], tuple[float, float]]:
    """((wall, CPU) of ``napkin.plan`` in process, of the whole command, of ``napkin --version``: the start-up
    floor) on the source tree ``tree``."""
    out = subprocess.run(
        [sys.executable, "-c", IN_PROCESS, json.dumps(QUESTION), str(repeat)],
        env=_env(tree),
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    in_process = tuple(json.loads(out.stdout.strip().splitlines()[-1]))
    return (in_process[0], in_process[1]), _command(tree, ARGV, repeat), _command(tree, ["--version"], repeat)


def readme_question(repeat: int, baseline: Path | None) -> None:
    here = Path(__file__).resolve().parent.parent
    rows = [("this tree", here)] + ([("baseline", baseline)] if baseline else [])
    got = {label: measure(tree, repeat) for label, tree in rows}
    print(f"napkin {' '.join(ARGV)} (best of {repeat}):")
    for label, ((w1, c1), (w2, c2), (w3, c3)) in got.items():
        print(
            f"  {label:9} in process {w1:.3f} s wall, {c1:.3f} s CPU; whole command {w2:.3f} s wall, {c2:.3f} s CPU; "
            f"napkin --version {w3:.3f} s wall, {c3:.3f} s CPU"
        )
    if baseline:
        (_, c1), (_, c2), _ = got["this tree"]
        (_, b1), (_, b2), _ = got["baseline"]
        print(f"  speed-up (CPU): in process {b1 / c1:.1f}×, whole command {b2 / c2:.1f}×")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--baseline", type=Path, help="a source tree to compare with (e.g. main at 69cd07f)")
    args = parser.parse_args()
    readme_question(args.repeat, args.baseline)

    from napkin.domain.model import Model
    from napkin.engines.planner import candidates, plan
    from napkin.engines.step import StepModel, machine
    from napkin.systems.cluster import find
    from napkin.systems.presets import get_preset
    from napkin.systems.profiles import resolve

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
    print(f"gpt-1t on 4,096 GPUs: {result.considered:,} layouts enumerated; fit in memory: {result.fitting:,}")
    print(f"  scoring: {len(knobs) / best_score:,.0f} layouts/s (memory + step time, every layout)")
    print(f"  napkin.engines.planner total: {best_total:.3f} s (best of {args.repeat})")
    print(f"  winner: {result.layouts[0].layout_text}, MFU {result.layouts[0].mfu:.3f}")
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
