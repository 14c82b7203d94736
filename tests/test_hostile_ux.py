"""A demanding new user's mistakes (issues 21, 23, 24): each is one line naming the input, exit 2, no traceback;
the formats and bounds accepted are said in the message."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest

import napkin
from napkin.errors import UsageError
from tests.conftest import Run

STEP = ("-m", "llama3-8b", "-G", "8", "--global-batch", "64", "-H", "b200")
TRAINING_TAKES = "training takes fp32, tf32, bf16, fp16, fp8 or fp4"


@pytest.mark.parametrize("dtype", ["fp6", "int8", "fp64"])
@pytest.mark.parametrize(
    "argv",
    [
        ["step", *STEP],
        ["plan", *STEP],
        ["train-time", "-m", "llama3-8b", "-D", "1T", "-G", "8", "-H", "b200", "--mfu", "predicted"],
        ["memory", "-m", "llama3-8b", "-H", "b200"],
        ["memory", "-m", "llama3-8b", "-H", "b200", "--finetune", "lora"],
        ["max-model", "-H", "b200"],
    ],
    ids=["step", "plan", "train-time", "memory", "memory-lora", "max-model"],
)
def test_training_refuses_a_format_no_recipe_trains_in(napkin: Run, argv: list[str], dtype: str) -> None:
    r = napkin(*argv, "--dtype", dtype)
    assert r.exit_code == 2, r.stderr
    assert r.stderr.startswith(f"napkin: error: --dtype: {dtype} is not a format training runs; {TRAINING_TAKES}")
    assert len(r.stderr.splitlines()) == 1


def test_a_given_mfu_still_takes_any_peak(napkin: Run) -> None:
    """Without --mfu predicted, train-time's --dtype only picks the peak the given MFU is a fraction of."""
    assert napkin("train-time", "-m", "llama3-8b", "-D", "1T", "-G", "8", "--dtype", "int8").exit_code == 0


def test_the_library_refuses_it_alike() -> None:
    with pytest.raises(UsageError, match=f"dtype: fp6 is not a format training runs; {TRAINING_TAKES}"):
        napkin.step(model="llama3-8b", gpus=8, global_batch=64, hardware="b200", dtype="fp6")


SIGNS = ("−", "+", "×", "=", "≤", "≥")


def _split_from_its_sign(text: str) -> list[str]:
    """Each pair of lines where one ends with a sign and the next begins with the number after it."""
    lines = [line.rstrip() for line in text.splitlines()]
    return [f"{a!r} / {b!r}" for a, b in itertools.pairwise(lines) if a.endswith(SIGNS) and b.lstrip()[:1].isdigit()]


@pytest.mark.parametrize(
    "argv",
    [
        ["calibrate", "examples/calibrate_runs.yaml"],
        ["max-model", "--gpus", "8", "--optimizer", "adamw"],
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
    ],
    ids=["calibrate-caption", "max-model-row", "mfu-explain-source"],
)
def test_no_number_is_split_from_its_sign_at_80_columns(
    napkin: Run, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    r = napkin(*argv)
    assert r.exit_code == 0, r.stderr
    assert _split_from_its_sign(r.stdout) == []


@pytest.mark.parametrize("columns", range(40, 100, 3))
def test_a_caption_wraps_before_a_sign_never_after_it(columns: int) -> None:
    from napkin.results import render

    caption = "error = predicted / measured tokens per second − 1; costs ≤ 2 s and + 4 more"
    shown = render.plain(render.key_values("title − 1", [("a", "b")], caption=caption), width=columns)
    assert _split_from_its_sign(shown) == []
    assert " ".join(shown.split()).endswith(caption)  # every word kept, the glue printed as spaces


@pytest.mark.parametrize("columns", range(60, 100, 3))
def test_bench_matmuls_best_line_keeps_each_rate_with_its_unit(monkeypatch: pytest.MonkeyPatch, columns: int) -> None:
    from napkin.live.bench import BenchResult, MatmulRecord
    from napkin.results import render

    def record(dtype: str, rate: float) -> MatmulRecord:
        return MatmulRecord(
            device="cpu", device_name="x", dtype=dtype, m=2048, k=2048, n=2048, status="ok", flops_per_second=rate
        )

    best = {d: record(d, r) for d, r in (("bf16", 1.384e12), ("fp32", 102.7e9), ("fp16", 101.8e9), ("tf32", 99.1e9))}
    result = BenchResult(
        device="cpu", device_name="x", torch_version="2", hardware=None, records=list(best.values()), best=best
    )
    monkeypatch.setenv("COLUMNS", str(columns))
    shown = "".join(render.plain(part, width=columns) for part in result.renderables())  # as emit prints them
    assert "\ue000" not in shown  # the glue that holds words together never reaches the terminal
    best_line = shown.split("best:")[1].split("median")[0]
    assert not re.search(r"\d$", best_line, re.M), best_line  # "fp16 101.8" / "GFLOP/s at 2048³" before


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_an_error_line_is_written_in_what_the_terminal_encodes(encoding: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Error lines went through click, which re-wraps an ASCII stream as UTF-8: '×' reached it as bytes."""
    from tests.test_hostile import _main_on

    code, out, err = _main_on(["memory", "-m", "llama3-8b", "-G", "3", "-t", "2"], encoding, monkeypatch)
    assert code == 2 and out == b""
    expected = "napkin: error: --gpus (3) is not a multiple of tensor × pipeline × context (2 × 1 × 1 = 2)\n"
    assert err.decode(encoding) == (expected.replace("×", "x") if encoding == "ascii" else expected)


@pytest.mark.parametrize(
    "argv",
    [["hardware", "schema"], ["stack", "schema"], ["cluster", "schema"], ["step", *STEP[:-2], "--json"]],
    ids=["hardware-schema", "stack-schema", "cluster-schema", "step"],
)
def test_json_on_an_ascii_terminal_is_the_same_json_escaped(
    napkin: Run, argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.test_hostile import _main_on

    code, out, err = _main_on(argv, "ascii", monkeypatch)
    assert code == 0, err
    assert json.loads(out.decode("ascii")) == json.loads(napkin(*argv).stdout)  # '–' as \u2013, not 'CPU?GPU'


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("100 1e308\n200 1e308\n", "h.txt:1: a weight is a number from 0 to 1e+36"),  # a sum of inf: a traceback
        ("100 1\n200 nan\n", "h.txt:2: a weight is a number from 0 to 1e+36"),
        ("100 １\n", "h.txt:1: a weight is a number from 0 to 1e+36"),
        ("１００ 1\n", "h.txt:1: expected a whole token length (1 to 134,217,728) and a weight"),  # read as 100
        ("99999999999999999999999 1\n", "h.txt:1: expected a whole token length (1 to 134,217,728)"),
    ],
    ids=["weights-sum-to-inf", "nan-weight", "fullwidth-weight", "fullwidth-length", "huge-length"],
)
def test_a_histogram_line_is_read_as_the_flag_reads_a_length(
    napkin: Run, tmp_path: Path, content: str, message: str
) -> None:
    hist = tmp_path / "h.txt"
    hist.write_text(content, encoding="utf-8")
    r = napkin("traffic", "--model", "llama3-8b", "--rate", "1", "--prompt", f"@{hist}", "--output", "10")
    assert r.exit_code == 2, r.stderr
    assert r.stderr.startswith("napkin: error: --prompt: ") and message in r.stderr and len(r.stderr.splitlines()) == 1


def test_a_long_duration_is_grouped_then_scientific() -> None:
    from napkin.units import format_duration

    assert format_duration(86400 * 400) == "400.0 days"
    assert format_duration(86400 * 12_345.6) == "12,346 days"
    assert format_duration(1e30) == "1.157e25 days"  # '11574074074074074864156672.0 days' before


SERVE_PLAN = ("serve-plan", "-m", "llama3-8b", "--rate", "10", "--prompt", "1000", "--output", "100")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("2ns", "--ttft-p90: unknown unit 'ns' in '2ns'; expected a latency such as 2s, 100ms or 50us"),
        ("-1s", "--ttft-p90: '-1s' must be positive and finite; expected a latency such as 2s, 100ms or 50us"),
        ("2days", "--ttft-p90: '2days' is above the 86,400 s napkin accepts (1 day"),
        ("1e30s", "--ttft-p90: '1e30s' is above the 86,400 s napkin accepts"),
    ],
)
def test_an_slo_is_a_latency(napkin: Run, value: str, message: str) -> None:
    r = napkin(*SERVE_PLAN, "--ttft-p90", value)
    assert r.exit_code == 2, r.stderr
    assert r.stderr.startswith("napkin: error: " + message) and len(r.stderr.splitlines()) == 1
    assert "90d" not in r.stderr  # a training run's examples were offered for a latency


def test_a_missed_slo_is_named_as_the_slo_row_names_it(napkin: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    r = napkin(*SERVE_PLAN, "--ttft-p90", "1us", "--hardware", "h100")
    assert r.exit_code == 0, r.stderr
    [miss] = [line for line in r.stdout.splitlines() if "misses" in line]
    assert re.search(r"misses TTFT P90 ×\d{1,3}(,\d{3})*$", miss.strip()), miss  # was 'ttft_p90 ×14132330.32'


RUN = "  - {model: llama3.1-8b, gpus: 8, global_batch: 16, tokens_per_second_per_gpu: 6667}\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f"name: x\nfit: matmul_efficiency\nruns:\n{RUN}{RUN}", "fit: 'matmul_efficiency' is not a list; write fit: ["),
        ("name: x\nruns: 5\n", "runs: 5 is not a list; write runs: with one '- ' item per run"),
        ("name: x\nruns: [5]\n", "runs[0]: 5 is not a run: a mapping of napkin step's keywords"),
        (f"name: x\nfit: [1]\nruns:\n{RUN}{RUN}", "fit[0]: 1 is not a name; write fit: [matmul_efficiency]"),
        (f"stack: [a]\nname: x\nruns:\n{RUN}{RUN}", "stack: ['a'] is not a name, such as torchtitan"),
    ],
    ids=["fit-not-a-list", "runs-not-a-list", "run-not-a-mapping", "fit-not-a-name", "stack-not-a-name"],
)
def test_a_runs_file_of_the_wrong_shape_says_what_to_write(
    napkin: Run, tmp_path: Path, text: str, message: str
) -> None:
    """pydantic's 'Input should be a valid list' named the field but not what to write."""
    runs = tmp_path / "runs.yaml"
    runs.write_text(text, encoding="utf-8")
    r = napkin("calibrate", str(runs))
    assert r.exit_code == 2, r.stderr
    assert r.stderr == f"napkin: error: {message}" + r.stderr.split(message, 1)[1] and len(r.stderr.splitlines()) == 1
    assert "Input should" not in r.stderr


@pytest.mark.parametrize("kind", ["hardware", "stacks", "clusters"])
def test_edit_without_an_editor_points_at_the_files_of_its_own_kind(
    napkin: Run, isolated: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """'napkin stack edit' told the user to look at 'napkin hardware path', which lists hardware folders."""
    monkeypatch.delenv("EDITOR", raising=False)
    monkeypatch.delenv("VISUAL", raising=False)
    command = {"hardware": "hardware", "stacks": "stack", "clusters": "cluster"}[kind]
    name = {"hardware": "h100", "stacks": "vllm", "clusters": "dgx-h100"}[kind]
    r = napkin(command, "edit", name)
    assert r.exit_code == 2 and len(r.stderr.splitlines()) == 1
    assert r.stderr.rstrip().endswith(f"edit the file itself, in {isolated / kind}"), r.stderr


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["memory", "-m", "llama3-8b", "--lora-rank", "8"], "--lora-rank: used only with --finetune lora or qlora"),
        (["memory", "-m", "llama3-8b", "--paged-optimizer"], "--paged-optimizer: used only with --finetune lora or"),
        (["train-time", "-m", "llama3-8b", "-D", "1T", "-G", "8", "--lora-targets", "q"], "--lora-targets: used only"),
        (["memory", "-N", "7B", "--seq", "4k"], "--seq: activation memory needs an architecture: --model, --model-"),
        (["max-model", "--flash-attention"], "--flash-attention: activation memory needs an architecture"),
    ],
)
def test_an_option_the_question_cannot_use_is_named_alone(napkin: Run, argv: list[str], line: str) -> None:
    """Was every adapter option napkin has ('lora_rank, …, double_quant, adapter_dtype, …') in keyword spelling, or
    'activation options' without saying which."""
    r = napkin(*argv)
    assert r.exit_code == 2, r.stderr
    assert r.stderr.startswith("napkin: error: " + line) and len(r.stderr.splitlines()) == 1
    assert "_" not in r.stderr.split(":")[1]  # flags, never library keywords


def test_an_absurd_percentage_is_readable(napkin: Run) -> None:
    from napkin.units import format_percent

    assert (format_percent(0.123), format_percent(61.4), format_percent(6.14e13)) == (
        "12.3 %",
        "6140.0 %",
        "6.140e15 %",
    )
    r = napkin("mfu", "-N", "7B", "-G", "8", "--days", "1e-9", "--tokens", "1e15")
    assert "napkin: warning: MFU 6.141e15 % is above 100 %" in r.stderr  # was 'MFU 6140868002919545.0 %'


@pytest.mark.parametrize(
    "argv",
    [
        ["memory", "--help"],
        ["--help"],
        ["stack", "show", "megatron-core"],
        ["stack", "show", "vllm"],
        ["memory", "-m", "llama3-8b", "--explain"],
        ["step", *STEP[:-2], "--explain"],
        ["dtypes"],
    ],
)
def test_an_ascii_terminal_gets_every_symbol_spelled(
    napkin: Run, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    """--help went through click's echo as UTF-8 bytes; '§', 'α', '÷', '⌈' and superscript runs came out as '?'."""
    from tests.test_hostile import _main_on

    code, out, err = _main_on(argv, "ascii", monkeypatch)
    assert code == 0, err
    text = out.decode("ascii")
    assert text.count("?") == napkin(*argv).stdout.count("?")  # nothing fell back to '?'


TRAFFIC = ("traffic", "-m", "llama3-8b", "--prompt", "100", "--output", "10", "--requests", "50")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rate", "1", "--requests", "1e9"], "--requests: '1e9' is above the 1,048,576 requests napkin accepts"),
        (["--rate", "٨"], "--rate: '٨' is not understood; expected requests per second"),  # was read as 8
        (["--rate", "1", "--percentiles", "٩٩"], "--percentiles: '٩٩' is not a number"),  # was read as 99
    ],
    ids=["a-billion-requests", "arabic-indic-rate", "arabic-indic-percentile"],
)
def test_traffic_reads_what_it_can_simulate_in_ascii_digits(napkin: Run, args: list[str], message: str) -> None:
    """A billion requests was killed for its memory; other scripts' digits were read by float()."""
    r = napkin(*TRAFFIC, *args)
    assert r.exit_code == 2, r.stderr
    assert r.stderr.startswith("napkin: error: " + message) and len(r.stderr.splitlines()) == 1


def test_a_collective_of_more_bytes_than_any_gpu_holds_is_refused(napkin: Run) -> None:
    """1e36 bytes took 4.2e19 days, without a word."""
    r = napkin("comm", "all-reduce", "--cluster", "dgx-h100", "--gpus", "8", "--bytes", "1e36")
    assert r.exit_code == 2 and len(r.stderr.splitlines()) == 1
    assert r.stderr.startswith("napkin: error: --bytes: '1e36' is above the 1,000,000,000,000,000 bytes (1 PB)")
    assert napkin("comm", "all-reduce", "--cluster", "dgx-h100", "--gpus", "8", "--bytes", "1PB").exit_code == 0


@pytest.mark.parametrize("columns", [40, 60, 80])
def test_a_comparison_wider_than_the_terminal_is_split_never_folded(
    napkin: Run, monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    """Five profiles at 80 columns folded names and units: 'a100-sxm-80' / 'gb', '81.7 TFLOP/' / 's'."""
    monkeypatch.setenv("COLUMNS", str(columns))
    names = ["h100-sxm", "b200", "mi300x", "a100-sxm-80gb", "tpu-v5p"]
    r = napkin("hardware", "compare", *names)
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert max(len(line) for line in lines) <= columns
    assert all(any(name in line.split() for line in lines) for name in names)
    assert not any(line.rstrip().endswith(("/", "FLOP", "TFLOP/", "-80")) for line in lines)
    assert sum("Hardware comparison" in line for line in lines) > 1


@pytest.mark.parametrize(
    "argv",
    [
        ["step", "-m", "llama3-70b", "-G", "64", "--global-batch", "512", "-t", "8", "--explain"],
        ["inference", "-m", "llama3.1-70b", "-G", "4", "--context", "8k", "--explain"],
        ["comm", "all-reduce", "--cluster", "dgx-h100", "--bytes", "1GB", "--gpus", "64", "--explain"],
    ],
    ids=["step", "inference", "comm"],
)
def test_a_line_breaks_before_an_operator_never_after_it(
    napkin: Run, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    """'optimizer +' / 'other', 'algbw =' / 'S/t', 'max_batch ×' / 'max_seq' at 80 columns before."""
    monkeypatch.setenv("COLUMNS", "80")
    r = napkin(*argv)
    assert r.exit_code == 0, r.stderr
    lines = [line.rstrip() for line in r.stdout.splitlines()]
    split = [
        (a, b) for a, b in itertools.pairwise(lines) if a.endswith((*SIGNS, "÷", "/")) and b.lstrip()[:1].isalnum()
    ]
    assert split == []


@pytest.mark.parametrize(
    "argv",
    [
        ["inference", "-m", "llama3-8b", "--context", "1k", "--price", "1e30"],
        ["train-time", "-N", "70B", "-D", "15T", "-G", "1024", "--price", "1e30"],
        [*SERVE_PLAN, "--ttft-p90", "1s", "--price", "h100=1e30"],
    ],
    ids=["inference", "train-time", "serve-plan"],
)
def test_a_price_no_gpu_hour_costs_is_refused(napkin: Run, argv: list[str]) -> None:
    """'$3,537,139,969,681,658,211,079,997,513,789,341,696' was printed as a cost."""
    r = napkin(*argv)
    assert r.exit_code == 2 and len(r.stderr.splitlines()) == 1
    assert r.stderr.startswith("napkin: error: --price: '1e30' is above the 10,000 USD per GPU-hour napkin accepts")


def test_a_number_that_is_not_utf8_is_quoted_once(napkin: Run) -> None:
    """A byte that is not UTF-8 (read as '\\udcff') was quoted twice: "'\\\\udcff'"."""
    r = napkin("memory", "-m", "llama3-8b", "--seq", "\udcff")
    assert r.exit_code == 2, r.stderr
    assert r.stderr.startswith("napkin: error: --seq: '\\udcff' is not understood (napkin reads ASCII digits only)")


def test_bad_input_is_exit_2_even_where_stderr_cannot_be_written() -> None:
    """The error line failing to write (2>/dev/full) turned exit 2 into 1, as if the output had failed; with a
    buffered stderr (PYTHONUNBUFFERED unset, as CI runs) Python's flush of the unwritten line at exit made it 120."""
    import os
    import subprocess
    import sys

    for unbuffered in ("1", None):
        env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
        if unbuffered:
            env["PYTHONUNBUFFERED"] = unbuffered
        with open("/dev/full", "w") as full:
            r = subprocess.run(
                [sys.executable, "-m", "napkin", "memory", "--model", "nope"],
                stdout=subprocess.PIPE,
                stderr=full,
                timeout=120,
                check=False,
                env=env,
            )
        assert (r.returncode, r.stdout) == (2, b""), unbuffered


def test_an_absurd_matmul_is_written_in_scientific_notation(napkin: Run) -> None:
    r = napkin("flops", "matmul", "9e15x9e15x9e15", "--explain")
    assert r.exit_code == 0, r.stderr
    assert "arithmetic intensity   3.000e15 FLOP/B" in r.stdout  # was 3,000,000,000,000,000.0
    assert "= 4.86e32 B" in r.stdout and "81,000,000,000,000,000,000" not in r.stdout
    assert "arithmetic intensity   1,365.3 FLOP/B" in napkin("flops", "matmul", "4096x4096x4096").stdout


def test_a_kv_block_longer_than_any_context_is_refused(napkin: Run) -> None:
    """A 1,024-token sequence in blocks of a billion tokens was 131 TB of KV cache."""
    r = napkin("kv-cache", "-m", "llama3-8b", "--context", "1k", "--block-size", "1e9")
    assert r.exit_code == 2 and len(r.stderr.splitlines()) == 1
    assert r.stderr.startswith("napkin: error: --block-size: '1e9' is above the 65,536 tokens napkin accepts")
    shown = napkin("kv-cache", "-m", "llama3-8b", "--context", "1k", "--block-size", "2048").stdout
    assert "paged: blocks of 2,048 tokens" in shown
