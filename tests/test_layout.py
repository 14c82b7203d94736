"""At 80 columns no table splits a name or a number, and nothing carries trailing spaces.

The check is generic: every word of the 80-column output must also be a word of the same command's
output at 400 columns (where nothing wraps), so a split identifier ("chinchilla-7" / "0b") or number
("1.798e3" / "08") shows up as a fragment that the wide output does not contain.
"""

from __future__ import annotations

import itertools
import json
import re

import pytest
from typer.testing import CliRunner

from napkin.cli import _app_for
from tests.conftest import needs_torch

NARROW, WIDE = "80", "400"
DROPPED = "not shown at this width: "


def run(args: list[str], width: str) -> str:
    result = CliRunner().invoke(_app_for(args), args, env={"COLUMNS": width, "NO_COLOR": "1", "TERM": "dumb"})
    assert result.exit_code == 0, (args, result.stderr)
    return result.stdout


def words(text: str) -> set[str]:
    """The words of ``text``, without rules (─) and without the note naming dropped columns."""
    text = re.sub(DROPPED + r".*?\(widen the terminal, or --json\)", "", " ".join(text.split()))
    return {w.strip(",;:()") for w in text.split() if w.strip("─")} - {""}


COMMANDS = [
    ["hardware", "list"],
    ["models"],
    ["optimizers"],
    ["dtypes", "--value", "1e-8"],
    ["dtypes"],
    ["hardware", "compare", "h100", "a100", "mi300x", "tpu-v5e"],
    ["optimal", "--compute", "5.76e23"],
    ["optimal", "--compute", "5.76e23", "--explain"],
    ["train-time", "--params", "70e9", "--tokens", "15e12", "--gpus", "1024", "--explain"],
    ["train-time", "--model", "chinchilla-70b", "--tokens", "1.4T", "--gpus", "1024"],
    [
        "memory",
        "--params",
        "7.5B",
        "--gpus",
        "64",
        "--optimizer",
        "adam",
        "--precision",
        "mixed",
        "--sharding",
        "zero2",
    ],
    ["memory", "--model", "llama2-70b", "--gpus", "8", "--micro-batch", "1", "--explain"],
    ["max-model", "--gpus", "8", "--optimizer", "adamw", "--explain"],
    [
        "mfu",
        "--model",
        "palm-540b",
        "--gpus",
        "6144",
        "--hardware",
        "tpu-v4",
        "--tokens-per-second",
        "238.3e3",
        "--explain",
    ],
    ["flops", "train", "--model", "llama3-70b", "--tokens", "15T", "--explain"],
    ["flops", "matmul", "4k", "4k", "4k"],
    ["tensor", "49152x12288"],
    [
        "comm",
        "all-reduce",
        "--params",
        "70B",
        "--dtype",
        "bf16",
        "--gpus",
        "1024",
        "--cluster",
        "dgx-h100",
        "--explain",
    ],
    ["cluster", "list"],
    ["plan", "--model", "llama3-8b", "--gpus", "64", "--global-batch", "512"],
    ["step", "--model", "llama3-8b", "--gpus", "64", "--global-batch", "512"],
    ["kv-cache", "--model", "llama3.1-70b", "--context", "32k", "--batch", "8", "--explain"],
    [
        "traffic",
        "--model",
        "llama3.1-8b",
        "--rate",
        "10",
        "--prompt",
        "100..900",
        "--output",
        "200",
        "--requests",
        "200",
        "--tpot-p99",
        "100ms",
        "--explain",
    ],
    [
        "serve-plan",
        "--model",
        "llama3.1-8b",
        "--rate",
        "5",
        "--prompt",
        "500",
        "--output",
        "100",
        "--ttft-p90",
        "2s",
        "--hardware",
        "h100",
        "--requests",
        "200",
        "--top",
        "2",
    ],
    [
        "inference",
        "--model",
        "llama3.1-70b",
        "--gpus",
        "8",
        "--hardware",
        "h100",
        "--prompt",
        "2k",
        "--output",
        "512",
        "--batch",
        "64",
        "--price",
        "2",
        "--explain",
    ],
]


@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(a) for a in COMMANDS])
def test_at_80_columns_no_word_is_split_and_no_line_overflows(args: list[str]) -> None:
    narrow = run(args, NARROW)
    for line in narrow.splitlines():
        assert len(line) <= 80, line
        assert line == line.rstrip(), f"trailing space: {line!r}"
    fragments = words(narrow) - words(run(args, WIDE))
    assert not fragments, f"split at 80 columns: {sorted(fragments)}"


#: Units a number is printed with, and the labels a degree or a batch is printed after (``TP 8``, ``b 2``).
UNITS = r"(?:[kMGTP]?FLOP/s|[kMGTP]?B(?:/s)?|GiB|TiB|W|s|ms|µs|tokens|params|days|hours|%)"
LABELS = r"(?:TP|PP|DP|CP|EP|b|v|\(v)"
#: Commands whose long rows wrapped inside such a pair before the cell learnt to keep them together.
PAIRED = [
    ["stack", "show", "megatron-core"],
    ["train-time", "--model", "llama3-8b", "--tokens", "15T", "--gpus", "512", "--mfu", "predicted"],
    [
        "step",
        "--model",
        "deepseek-v3",
        "--gpus",
        "1024",
        "--global-batch",
        "4096",
        "--tensor-parallel",
        "2",
        "--pipeline-parallel",
        "16",
        "--interleave",
        "2",
        "--expert-parallel",
        "32",
        "--recompute",
        "selective",
    ],
]


@pytest.mark.parametrize("args", PAIRED + COMMANDS, ids=[" ".join(a) for a in PAIRED + COMMANDS])
def test_at_80_columns_a_number_stays_with_its_unit_and_a_label_with_its_number(args: list[str]) -> None:
    lines = [line.rstrip() for line in run(args, NARROW).splitlines()]
    for above, below in itertools.pairwise(lines):
        number_then_unit = re.search(r"(?<![\w.])[\d.,]+$", above) and re.match(rf"\s{{6,}}{UNITS}\b", below)
        label_then_number = re.search(rf"(?<![\w]){LABELS}$", above) and re.match(r"\s{6,}\d", below)
        assert not (number_then_unit or label_then_number), f"split between lines:\n{above}\n{below}"


@needs_torch
@pytest.mark.torch
def test_verify_fits_80_columns() -> None:
    test_at_80_columns_no_word_is_split_and_no_line_overflows(["verify"])


@pytest.mark.parametrize(
    ("listing", "keys"),
    [(["hardware", "list"], ("name", "aliases")), (["models"], ("name",)), (["optimizers"], ())],
)
def test_every_name_a_user_types_appears_whole_at_80_columns(listing: list[str], keys: tuple[str, ...]) -> None:
    data = json.loads(run([*listing, "--json"], NARROW))
    data = data["profiles"] if isinstance(data, dict) and "profiles" in data else data
    if keys:
        names = {n for item in data for k in keys for n in ([item[k]] if isinstance(item[k], str) else item[k])}
    else:  # optimizers: {optimizer: {precision: …}}
        names = set(data) | {p for row in data.values() for p in row}
    shown = words(run(listing, NARROW))
    assert names and names <= shown, sorted(names - shown)


@needs_torch
@pytest.mark.torch
def test_bench_rows_fit_80_columns_on_one_line() -> None:
    args = ["bench", "matmul", "--device", "cpu", "--dtype", "fp32,tf32", "--sizes", "64,128", "--shape", "64x4096x128"]
    out = run(args, NARROW)
    row = re.compile(r"^ fp32 +(64³|128³|64×4096×128) +[\d.]+ [kMGT]?FLOP/s +– +– +[\d.]+ [mµn]?s$")
    assert len([line for line in out.splitlines() if row.match(line)]) == 3, out
    assert "- tf32 64³, 128³, 64×4096×128: tf32 is a CUDA tensor-core mode" in out
    for line in out.splitlines():
        assert len(line) <= 80 and line == line.rstrip(), line


@pytest.mark.parametrize(
    "command",
    [
        "train-time",
        "mfu",
        "memory",
        "max-model",
        "step",
        "plan",
        "inference",
        "traffic",
        "serve-plan",
        "kv-cache",
        "optimal",
        "tensor",
        "flops train",
        "comm all-reduce",
        "bench matmul",
        "bench memory",
        "bench all-reduce",
        "hardware new",
        "cluster show",
    ],
)
def test_help_fits_80_columns_with_every_flag_whole(command: str) -> None:
    out = run([*command.split(), "--help"], NARROW)  # in this process: click wraps help to $COLUMNS as a terminal
    assert all(len(line) <= 80 for line in out.splitlines()), command
    assert not re.search(r"--[a-z0-9-]+…", out)  # rich's option table truncated long flags
    flags = re.findall(r"--[a-z][a-z0-9-]*", out)
    assert flags and all(not f.endswith("-") for f in flags), [f for f in flags if f.endswith("-")]


@pytest.mark.parametrize(
    ("args", "url"),
    [
        (
            ["hardware", "show", "h100"],
            "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet",
        ),
        (
            ["cluster", "show", "dgx-h100"],
            "https://docs.nvidia.com/dgx/dgxh100-user-guide/introduction-to-dgxh100.html",
        ),
        (["stack", "show", "megatron-core"], "https://github.com/"),
    ],
)
def test_a_sheet_prints_its_links_whole_at_80_columns(args: list[str], url: str) -> None:
    """A URL wider than the table's cell was folded into pieces that neither copy nor open; the links follow the
    table, one whole line each (a terminal wraps a long one itself)."""
    out = run(args, NARROW)
    links = out.split("\nlinks\n", 1)[1].splitlines()
    assert any(url in line for line in links)
    assert all(re.fullmatch(r"  \[\d+\] \S+", line) for line in links if line)


def test_an_interleave_up_to_the_heaviest_stage_where_only_the_ends_are_short() -> None:
    """Megatron-Core counts the embedding and the loss as layers (account_for_embedding_in_pipeline_split,
    account_for_loss_in_pipeline_split): Llama 3.1 405B's 126 layers over PP 16 with v 8 build chunks of one layer,
    the first stage's first chunk and the last stage's last holding none (get_num_layers_to_build asserts only
    >= 0; Megatron-LM megatron/core/transformer/transformer_block.py). Where a middle stage is short (DeepSeek-V3's
    61 over 16), every chunk still needs a layer."""
    from napkin.domain.layout import split_problem

    assert split_problem(126, 16, 8) is None
    assert split_problem(127, 16, 8) is None  # only the last stage short: the loss counted
    assert split_problem(126, 16, 3) == (
        "interleave",
        "interleave (3) must divide the layers of the heaviest stage (8 of the model's 126 over pipeline_parallel "
        "16; the short chunk of the first and the last stage holds the embedding or the loss)",
    )
    assert split_problem(61, 16, 4) is not None and split_problem(61, 16, 2) is None
    assert split_problem(128, 16, 8) is None and split_problem(128, 16, 16) is not None  # even: chunks of a layer
