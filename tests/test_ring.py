"""Context parallelism as torch's ring attention runs it (napkin.engines.step.ring), against what the code at the
benchmarked commits does and against torchtitan's published long-context runs (Table 2 of
benchmarks/llama3_h100_202412_torchtitan.md @ 820504e2)."""

from __future__ import annotations

import json

import pytest

from napkin.domain.choices import Recompute
from napkin.engines.step import Knobs
from napkin.engines.step.ring import ring_seconds
from napkin.systems.stack import RingAttention
from napkin.systems.stack import resolve as stack
from tests.conftest import Run
from tests.training_runs import RUNS, cases, error

TORCH_RING = RingAttention(exchanged_heads="query", rotate="all-gather", accumulate_bytes=4)


def _table2() -> list:  # type: ignore[type-arg]
    return sorted((c for c in cases() if c.id.startswith("torchtitan-2412-t2")), key=lambda c: c.knobs.context_parallel)


def test_torchtitan_s_profiles_state_torch_s_ring_as_its_code_runs() -> None:
    """torchtitan 9dec370 repeats K, V to the query heads before SDPA (models/llama/model.py repeat_kv) and defaults
    to the all-gather rotater (config_manager.py context_parallel_rotate_method 'allgather'); torch's ring merges
    and accumulates in fp32 (_attention.py convert_to_f32 = True). Both stacks of that release say so, with a
    source for each value, and so does the 2025 stack (torchtitan e7c0cae, whose torch 2.8.0a0 lies between 2.7.0
    and 2.8.0, which run the same ring); Megatron-Core keeps napkin's generic model."""
    for name in ("torchtitan", "torchtitan-eager", "torchtitan-2025"):
        training = stack(name).profile.trains()
        assert training.context_parallel == TORCH_RING
        assert all(
            training.source_of(f"context_parallel.{f}") for f in ("exchanged_heads", "rotate", "accumulate_bytes")
        )
    assert stack("megatron-core").profile.knobs("h100-sxm").ring is None


def test_the_published_rows_hold_the_same_tokens_per_gpu() -> None:
    """Table 2: FSDP 8/4/2/1 × CP 1/2/4/8 at 32k-262k tokens, local batch 1, 3,890 / 2,540 / 1,071 / 548 TPS per GPU
    (torchtitan's tps counts each rank's whole sequence over the CP ranks): every GPU holds 32,768 tokens."""
    rows = sorted((r for r in RUNS if r.id.startswith("torchtitan-2412-t2")), key=lambda r: r.cp)
    assert [(r.cp, r.seq, r.tokens_per_gpu) for r in rows] == [
        (1, 32768, 3890),
        (2, 65536, 2540),
        (4, 131072, 1071),
        (8, 262144, 548),
    ]
    assert {r.seq // r.cp for r in rows} == {32768}


def test_the_ring_adds_nothing_without_cp_and_more_with_every_rank() -> None:
    """At the same 32k tokens per GPU, each added rank adds a ring step (a merge, a dK/dV send, an accumulation) and
    a larger all-gather: the ring's seconds grow with c; with c = 1 there is no ring."""
    seconds = []
    for case in _table2():
        seconds.append(ring_seconds(case.model, case.knobs, TORCH_RING))
    assert seconds[0] == 0.0 and seconds[1] < seconds[2] < seconds[3]


def test_passing_every_query_head_moves_four_times_the_bytes_of_llama_s_kv_heads() -> None:
    """Llama 3.1 8B has 32 query and 8 KV heads: on a fabric too slow to hide anything, the query-head ring's
    exchange costs four times the KV-head ring's (the K, V gather and the dK, dV sends scale with the heads
    passed; only the dQ and output merges do not)."""
    case = _table2()[-1]
    slow = case.model.with_stack(case.model.stack.replace(scale_up=1e-4, scale_out=1e-4))
    query = ring_seconds(slow, case.knobs, TORCH_RING)
    kv = ring_seconds(slow, case.knobs, TORCH_RING.model_copy(update={"exchanged_heads": "kv"}))
    assert query / kv == pytest.approx(4, rel=0.01)


def test_full_recomputation_re_runs_the_forward_ring() -> None:
    case = _table2()[-1]
    full = ring_seconds(case.model, case.knobs, TORCH_RING)
    k = case.knobs
    none = Knobs(data_parallel=k.data_parallel, context_parallel=k.context_parallel, sharding=k.sharding)
    assert none.recompute is Recompute.none and full > ring_seconds(case.model, none, TORCH_RING)


def test_table_2_without_long_context_parallelism_is_within_5_percent() -> None:
    """Validation rows: FSDP 8 and FSDP 4 × CP 2 (3,890 and 2,540 TPS per GPU) within 5 %."""
    got = {c.knobs.context_parallel: error(c) for c in _table2()}
    assert abs(got[1]) < 0.05 and abs(got[2]) < 0.05


@pytest.mark.xfail(
    strict=True,
    reason="known miss (README, torchtitan CP paragraph): CP 4 and CP 8 measured about a third slower than "
    "predicted (1,071 and 548 TPS per GPU); the ring as torch runs it explains about 4 points; the rest has no source",
)
@pytest.mark.parametrize("cp", [4, 8])
def test_table_2_with_cp_4_and_8_is_within_issue_23_s_20_percent(cp: int) -> None:
    got = {c.knobs.context_parallel: error(c) for c in _table2()}
    assert abs(got[cp]) <= 0.20


def test_explain_names_the_ring_and_its_sources(napkin: Run) -> None:
    args = (
        "step -m llama3.1-8b --seq 262144 -G 8 --context-parallel 8 --global-batch 1 -b 1 --recompute full "
        "--sharding fsdp --dtype fp8 -H h100-sxm --stack torchtitan --explain --json"
    )
    r = napkin(*args.split())
    assert r.exit_code == 0, r.stderr
    steps = json.loads(r.stdout)["steps"]
    ring = next(s for s in steps if s["quantity"] == "stack torchtitan: context parallel")
    assert "exchanged_heads = query" in ring["substituted"] and "_attention.py" in ring["source"]
    other = next(s for s in steps if s["quantity"].startswith("other"))
    assert "ring attention" in other["substituted"]


def test_a_cp_degree_past_the_one_validation_agrees_on_is_said_to_be_outside(napkin: Run) -> None:
    """torchtitan's Table 2 agrees with napkin up to CP 2 and ran a third slower at CP 4 and 8: a layout past CP 2
    says it is outside the validated region; CP 2 does not."""
    base = ("step", "--model", "llama3.1-8b", "--gpus", "8", "--seq", "65536", "--stack", "torchtitan")
    wide = napkin(*base, "--global-batch", "2", "--context-parallel", "4")
    assert wide.exit_code == 0 and "outside the torchtitan stack's validated region: CP 4" in wide.stderr
    narrow = napkin(*base, "--global-batch", "4", "--context-parallel", "2")
    assert narrow.exit_code == 0 and "validated region" not in narrow.stderr
    data = json.loads(napkin(*base, "--global-batch", "2", "--context-parallel", "4", "--json").stdout)
    assert data["validated"] is False and data["outside_validation"][0].startswith("CP 4 (")
