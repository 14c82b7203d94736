"""The README's table of where every validation run's published layout ranks in napkin's own plan is what
``examples/plan_ranks.py`` produces: a documentation check, not a claim that napkin's ranking is right
(``python examples/plan_ranks.py --update-readme`` regenerates it). The suite recomputes the whole block, both
rankings (about 3 s of CPU), and checks invariants of two stacks' rows."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from napkin.engines.step.region import outside_layout

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
README = EXAMPLES.parent / "README.md"
REGENERATE = "regenerate: python examples/plan_ranks.py --update-readme"


def _script() -> Any:
    sys.path.insert(0, str(EXAMPLES))
    try:
        import plan_ranks
    finally:
        sys.path.remove(str(EXAMPLES))
    return plan_ranks


def _block() -> list[str]:
    """The README's lines between the plan-ranks markers."""
    script = _script()
    text = README.read_text(encoding="utf-8")
    assert text.count(script.BEGIN) == 1 and text.count(script.END) == 1
    start, end = text.index(script.BEGIN) + len(script.BEGIN), text.index(script.END)
    return [line for line in text[start:end].splitlines() if line]


def test_the_readme_block_is_what_the_script_computes() -> None:
    script = _script()
    rows, plans = script.rank_runs()
    fastest, _ = script.rank_runs(explore=True)
    block = _block()
    assert [line for line in script.block_markdown(rows, plans, fastest=fastest).splitlines() if line] == block, (
        REGENERATE
    )
    assert len(rows) == len(fastest)
    for r, f in zip(rows, fastest, strict=True):  # validated first: the #1 is no faster; a validated layout no lower
        assert r.case.id == f.case.id and r.ratio <= f.ratio * (1 + 1e-12)
        if not outside_layout(r.case.model, r.case.knobs):
            assert r.rank <= f.rank


def test_the_readme_counts_every_validation_run_once() -> None:
    """The block's run counts, per stack and in all, without planning: what ``unique_runs`` keeps."""
    from tests.training_runs import cases

    script = _script()
    unique = script.unique_runs()
    validation = [c for c in cases() if c.role == "validation"]
    assert sum(1 + len(repeats) for _, repeats in unique) == len(validation)
    block = _block()
    plans = len({script.plan_key(case) for case, _ in unique})
    assert block[0].startswith(
        f"{len(validation)} validation runs, {len(unique)} once repeats count once, in {plans} plans, "
    ), REGENERATE
    assert "\n".join(block[1:3]) + "\n" == script.HEADER
    table = block[3 : block.index(next(line for line in block if line.startswith("The ")))]
    shown = {cells[1].strip(): int(cells[2]) for cells in (line.split("|") for line in table)}
    counted = {c.stack: 0 for c, _ in unique}
    for case, _ in unique:
        counted[case.stack] += 1
    assert shown == {**counted, "all validation runs": len(unique)}, REGENERATE


def test_only_runs_of_one_model_machine_batch_stack_and_layout_count_once() -> None:
    """Megatron-Bridge's 26.02.01 to 26.06 Qwen3-30B-A3B rows ran one recipe (EP 16 on 16 H100s): one entry; its
    26.02 row (PP 2, EP 8, another stack) and the torchtitan runs of one model at two GPU counts stay apart."""
    script = _script()
    repeats = {case.id: ids for case, ids in script.unique_runs(("megatron-core-moe", "torchtitan-2025"))}
    assert repeats["mb-26.06-qwen3-30b-a3b-g16"] == [
        "mb-26.04.01-qwen3-30b-a3b-g16",
        "mb-26.04-qwen3-30b-a3b-g16",
        "mb-26.02.01-qwen3-30b-a3b-g16",
    ]
    assert "mb-26.02-qwen3-30b-a3b-g16" not in repeats  # megatron-core-moe-a2a-overlap, not asked for
    assert repeats["torchtitan-2506-trainy-h200-8b-4n"] == repeats["torchtitan-2506-trainy-h200-8b-8n"] == []


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--stack", "nope"], "--stack: no validation runs of 'nope'"), (["--update-readme", "--stack", "deepspeed"], "")],
)
def test_bad_arguments_are_one_line_exit_2(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _script().main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(message or "--update-readme:")
