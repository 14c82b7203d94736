"""The CLI through typer's CliRunner: output, --json contracts, exit codes, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Run

LECTURE = ["train-time", "--params", "70e9", "--tokens", "15e12", "--gpus", "1024"]


def test_train_time_lecture_example(napkin: Run) -> None:
    r = napkin(*LECTURE)
    assert r.exit_code == 0, r.stderr
    assert "143.9 days" in r.stdout
    assert "6.30e24 FLOPs" in r.stdout and "989.5 TFLOP/s" in r.stdout
    assert r.stderr == ""


def test_suffixes_give_identical_results(napkin: Run) -> None:
    assert (
        napkin(*LECTURE).stdout == napkin("train-time", "--params", "70B", "--tokens", "15T", "--gpus", "1024").stdout
    )
    a = json.loads(napkin(*LECTURE, "--json").stdout)
    b = json.loads(napkin("train-time", "-N", "70b", "-D", "15_000_000_000_000", "-G", "1_024", "--json").stdout)
    assert a == b


def test_train_time_json_contract(napkin: Run) -> None:
    r = napkin(*LECTURE, "--json")
    data = json.loads(r.stdout)
    for key in ("flops", "seconds", "days", "gpu_hours", "gpus", "mfu", "peak_flops", "hardware"):
        assert key in data, key
    assert data["flops"] == 6.3e24 and data["gpus"] == 1024 and data["mfu"] == 0.5
    assert data["peak_flops"] == 989.5e12 and data["hardware"] == "h100-sxm"
    assert round(data["days"], 1) == 143.9 and "steps" not in data


def test_solved_quantity_is_reported_under_the_input_key(napkin: Run) -> None:
    data = json.loads(napkin("train-time", "-N", "70B", "-D", "15T", "--days", "90", "--json").stdout)
    assert data["solved_for"] == "gpus" and data["gpus"] == 1638
    data = json.loads(napkin("train-time", "-D", "15T", "-G", "1024", "--days", "90", "--json").stdout)
    assert data["solved_for"] == "params" and data["params"] == pytest.approx(70e9 * 90 / 143.9266, rel=1e-5)


def test_cost_energy_carbon_keys(napkin: Run) -> None:
    """Worked by hand from the H100 datasheet (989.5 TFLOP/s bf16 dense, 700 W): 6·70e9·15e12 / (1024 × 989.5e12
    × 0.5) s × 1024 GPUs = 3,537,140 GPU-hours; × $2.5; × 0.7 kW × PUE 1.2; × 400 g CO2e per kWh."""
    data = json.loads(napkin(*LECTURE, "--price", "2.5", "--pue", "1.2", "--carbon", "400", "--json").stdout)
    gpu_hours = 6 * 70e9 * 15e12 / (989.5e12 * 0.5) / 3600
    assert round(gpu_hours) == 3_537_140
    assert data["cost_usd"] == pytest.approx(8_842_849.9, rel=1e-7)
    assert data["energy_kwh"] == pytest.approx(2_971_197.6, rel=1e-7)
    assert data["co2_tonnes"] == pytest.approx(1_188.48, rel=1e-5)


def test_explain_shows_formulas_and_sources(napkin: Run) -> None:
    r = napkin(*LECTURE, "--explain")
    assert r.exit_code == 0
    for text in ("Derivation", "C = 6·N·D", "Kaplan et al.", "PaLM", "143.9 days"):
        assert text in r.stdout, text
    steps = json.loads(napkin(*LECTURE, "--json", "--explain").stdout)["steps"]
    assert steps[0]["formula"] == "C = 6·N·D = (2N forward + 4N backward)·D"
    assert steps[0]["source"].startswith("Kaplan et al. 2020, arXiv:2001.08361 §2.1")
    assert "NVIDIA H100 Tensor Core GPU Datasheet" in steps[1]["source"]


@pytest.mark.parametrize(
    "args",
    [
        ("plan", "--model", "llama3-8b", "--gpus", "64", "--global-batch", "512"),
        ("step", "--model", "llama3-8b", "--gpus", "64", "--global-batch", "512", "-t", "2"),
        ("memory", "--model", "llama3-8b", "--gpus", "8"),
        ("kv-cache", "--model", "llama3.1-8b", "--context", "8k"),
        ("inference", "--model", "llama3.1-8b", "--prompt", "1k", "--output", "128"),
        ("traffic", "--model", "llama3.1-8b", "--rate", "2", "--prompt", "500", "--output", "50", "--requests", "50"),
    ],
    ids=lambda a: a[0],
)
def test_json_with_explain_carries_the_derivation_the_text_shows(napkin: Run, args: tuple[str, ...]) -> None:
    """--json --explain holds the derivation at the top level, step for step what --explain prints."""
    text = napkin(*args, "--explain")
    data = napkin(*args, "--json", "--explain")
    assert text.exit_code == data.exit_code == 0, (text.stderr, data.stderr)
    steps = json.loads(data.stdout)["steps"]
    shown = " ".join(text.stdout.split())
    assert steps and all(" ".join(step["quantity"].split()) in shown for step in steps)
    assert "steps" not in json.loads(napkin(*args, "--json").stdout)  # only when asked


def test_narayanan_through_the_cli(napkin: Run) -> None:
    r = napkin(
        "train-time",
        "-N",
        "175B",
        "-D",
        "300B",
        "-G",
        "1024",
        "-H",
        "a100",
        "--achieved",
        "140 TFLOP/s",
        "--recompute",
        "full",
        "--json",
    )
    data = json.loads(r.stdout)
    assert round(data["days"], 1) == 33.9
    assert "under-trained" in r.stderr  # 1.7 tokens per parameter


def test_max_model(napkin: Run) -> None:
    r = napkin("max-model", "--gpus", "8", "--optimizer", "adamw")
    assert r.exit_code == 0 and "42.8 B params" in r.stdout  # 8 × 85,520,809,984 B (reported) / 16 B
    # mixed precision by default (ZeRO §3.1): bf16 params and gradients, fp32 master weights and Adam moments
    assert "16 B = 2 (params) + 2 (gradients) + 4 (fp32 master) + 8 (optimizer states)" in r.stdout
    fp32 = napkin("max-model", "--gpus", "8", "--optimizer", "adamw", "--precision", "fp32")
    assert "16 B = 4 (params) + 4 (gradients) + 8 (optimizer states)" in fp32.stdout and "42.8 B params" in fp32.stdout
    assert "not included: CUDA context" in r.stdout and "pooled across GPUs" in r.stdout
    data = json.loads(napkin("max-model", "--gpus", "8", "--optimizer", "adamw", "--json").stdout)
    assert data["params"] == pytest.approx(8 * 85_520_809_984 / 16) and data["bytes_per_param"] == 16
    assert data["memory_bytes"] == 8 * 85_520_809_984 and data["hardware"] == "h100-sxm"
    assert data["breakdown"] == {"params": 2, "gradients": 2, "master_weights": 4, "optimizer_states": 8}
    assert "5.3 B params" in napkin("max-model", "--gpus", "8", "--optimizer", "adamw", "--sharding", "none").stdout
    # pooled by ZeRO-3, where memory and step take the stack's ZeRO-1: the answer says what memory needs to agree
    assert "give memory --sharding zero3 to check this answer" in r.stderr


def test_memory_json_and_bar(napkin: Run) -> None:
    args = ["memory", "-N", "7.5B", "--gpus", "64", "--precision", "mixed", "--optimizer", "adam"]
    data = json.loads(napkin(*args, "--sharding", "zero2", "--json").stdout)
    assert data["per_gpu_bytes"] == pytest.approx(16.64e9, rel=1e-3) and data["fits"] is True
    assert set(data["breakdown"]) == {"params", "gradients", "master_weights", "optimizer_states"}
    text = napkin(*args, "--sharding", "none").stdout
    assert "does NOT fit" in text and "█" in text


def test_memory_with_a_model_and_activations(napkin: Run) -> None:
    data = json.loads(
        napkin(
            "memory", "--model", "llama3-8b", "--gpus", "8", "--precision", "mixed", "--recompute", "full", "--json"
        ).stdout
    )
    assert data["params"] == 8_030_261_248
    assert data["breakdown"]["activations"] == 8192 * 4096 * 2 * 32
    assert data["max_micro_batch"] >= 1


def test_mfu_command(napkin: Run) -> None:
    data = json.loads(
        napkin(
            "mfu", "--model", "palm-540b", "--gpus", "6144", "-H", "tpu-v4", "--tokens-per-second", "238.3e3", "--json"
        ).stdout
    )
    assert round(data["mfu"], 3) == 0.462
    r = napkin("mfu", "-N", "65.2B", "-D", "1.4T", "-G", "2048", "-H", "a100", "--tokens-per-second-per-gpu", "380")
    assert "47.6 %" in r.stdout and "20.8 days" in r.stdout
    r = napkin("mfu", "-N", "70B", "-D", "15T", "-G", "8", "--days", "1")
    assert "above 100 %, which is impossible" in r.stderr and r.exit_code == 0


def test_flops_and_optimal_and_models(napkin: Run) -> None:
    data = json.loads(napkin("flops", "train", "-N", "7B", "-D", "1T", "--recompute", "full", "--json").stdout)
    assert (data["flops"], data["hardware_flops"]) == (4.2e22, 5.6e22)
    data = json.loads(napkin("flops", "matmul", "4096", "4096", "4096", "--json").stdout)
    assert data["bound"] == "compute" and data["flops"] == 2 * 4096**3
    data = json.loads(napkin("optimal", "--compute", "5.76e23", "--json").stdout)
    assert data["fitted"]["tokens_per_param"] == pytest.approx(18.4, abs=0.05)
    from_gpus = json.loads(napkin("optimal", "--gpus", "1024", "--days", "30", "--json").stdout)
    assert from_gpus["compute"] == pytest.approx(1024 * 989.5e12 * 0.5 * 30 * 86400)
    for ignored in (("--hardware", "zz"), ("--mfu", "0.4")):  # nothing a user wrote is silently dropped
        r = napkin("optimal", "--compute", "5.76e23", *ignored)
        assert r.exit_code == 2 and r.stderr.startswith(f"napkin: error: {ignored[0]}: turns --gpus and ")
    assert "llama3-8b" in napkin("models").stdout
    assert any(m["name"] == "mixtral-8x7b" for m in json.loads(napkin("models", "--json").stdout))


def test_dtypes_tensor_optimizers(napkin: Run) -> None:
    rows = {row["name"]: row for row in json.loads(napkin("dtypes", "--value", "1e-8", "--json").stdout)}
    assert rows["fp16"]["stored"] == 0.0 and rows["bf16"]["stored"] == pytest.approx(1.0011717677e-8)
    assert "65504" in napkin("dtypes").stdout
    assert "2.42 GB (2.25 GiB)" in napkin("tensor", "49152x12288", "--dtype", "fp32").stdout
    table = json.loads(napkin("optimizers", "--json").stdout)
    assert table["adamw"]["mixed"]["total"] == 16 and table["adamw"]["mixed-fp32-grads"]["total"] == 18
    assert "adam-8bit" in napkin("optimizers").stdout


BAD_INPUTS = [
    (
        ["train-time", "--params", "abc", "-D", "1T", "-G", "8"],
        2,
        "napkin: error: --params: 'abc' is not understood; expected a positive count such as 70e9, 70B, 1.5T, 7M or "
        "70_000_000_000",
    ),
    (["train-time", "-N", "-5", "-D", "1T", "-G", "8"], 2, "napkin: error: --params: '-5' must be positive and finite"),
    (["train-time", "-N", "nan", "-D", "1T", "-G", "8"], 2, "napkin: error: --params: 'nan' is not understood"),
    (["train-time", "-N", "inf", "-D", "1T", "-G", "8"], 2, "napkin: error: --params: 'inf' is not understood"),
    (["train-time", "-N", "0", "-D", "1T", "-G", "8"], 2, "napkin: error: --params: '0' must be positive"),
    (["train-time", "-N", "7B", "-D", "1T", "-G", "2.5"], 2, "napkin: error: --gpus: '2.5' must be a whole number"),
    (
        ["train-time", "-N", "7B", "-D", "1T", "-G", "8", "--mfu", "1.5"],
        2,
        "napkin: error: --mfu: '1.5' is out of range; expected a number in (0, 1] such as 0.5 or 50%",
    ),
    (["train-time", "-N", "7B", "-D", "1T", "-G", "8", "--mfu", "0"], 2, "napkin: error: --mfu: '0' is out of range"),
    (
        ["train-time", "-N", "7B", "-D", "1T", "-G", "8", "--mfu", "0.5:0.3"],
        2,
        "napkin: error: --mfu: range '0.5:0.3' is written backwards; write LOW:HIGH, e.g. 0.3:0.5",
    ),
    (
        ["train-time", "-N", "7B"],
        2,
        "napkin: error: give three of --params, --tokens, --gpus and --days/--hours; missing: --tokens, --gpus, "
        "--days/--hours",
    ),
    (
        ["train-time", "-N", "70B", "-D", "15T", "-G", "1024", "--days", "10"],
        2,
        "napkin: error: --params, --tokens, --gpus and --days/--hours disagree",
    ),
    (
        ["train-time", "-N", "7B", "-D", "1T", "-G", "8", "--hardware", "h10"],
        2,
        "napkin: error: --hardware: unknown hardware 'h10'; closest: h100-sxm",
    ),
    (
        ["train-time", "-N", "7B", "-D", "1T", "-G", "8", "-H", "v100"],
        2,
        "napkin: error: --dtype: v100-sxm2-32gb has no bf16 peak; it has: fp64, fp32, fp16",
    ),
    (
        ["train-time", "-N", "7B", "-D", "1T", "-G", "8", "--dtype", "fp7"],
        2,
        "napkin: error: Invalid value for '--dtype'",
    ),
    (
        ["max-model", "--optimizer", "adamx"],
        2,
        "napkin: error: Invalid value for '--optimizer' / '-o': 'adamx' is not one of 'sgd', 'sgd-momentum'",
    ),
    (["max-model", "--precision", "fp8"], 2, "napkin: error: Invalid value for '--precision' / '-p': 'fp8'"),
    (["max-model", "--sharding", "zero4"], 2, "napkin: error: Invalid value for '--sharding': 'zero4' is not one of"),
    (["max-model", "--gpus", "0"], 2, "napkin: error: --gpus: '0' must be positive"),
    (
        ["max-model", "--reserve", "200GB"],
        2,
        "napkin: error: --reserve: '200GB' is 200 GB (186 GiB), not less than the device's",
    ),
    (["memory", "--model", "llama3-8b", "--reserve", "1e30"], 2, "napkin: error: --reserve: '1e30' is 1.00e12 EB"),
    (["memory", "--gpus", "8"], 2, "napkin: error: --params (or --model) is required"),
    (
        ["memory", "-N", "7B", "--micro-batch", "4"],
        2,
        "napkin: error: --micro-batch: activation memory needs an architecture: --model, --model-config or --layers",
    ),
    (["memory", "-N", "7B", "--model", "nope"], 2, "napkin: error: --model: unknown preset 'nope'"),
    (["mfu", "-N", "7B", "-G", "8"], 2, "napkin: error: give exactly one of --days, --hours, --gpu-hours"),
    (["tensor", "12xq"], 2, "napkin: error: SHAPE: '12xq' is not a shape"),
    (["dtypes", "--value", "big"], 2, "napkin: error: --value: 'big' is not a number"),
    (["train-time", "--bogus"], 2, "napkin: error: No such option: --bogus"),
    (["frobnicate"], 2, "napkin: error: No such command 'frobnicate'. (see 'napkin --help')"),
    (
        ["train-time", "-N", "7B", "-D", "1T", "-G", "8", "--hardware-file", "/nonexistent.yaml"],
        2,
        "napkin: error: --hardware-file: cannot read '/nonexistent.yaml': No such file or directory",
    ),
]


@pytest.mark.parametrize(("args", "code", "message"), BAD_INPUTS, ids=[" ".join(a[0][:3]) for a in BAD_INPUTS])
def test_bad_inputs_get_one_line_errors(napkin: Run, args: list[str], code: int, message: str) -> None:
    r = napkin(*args)
    assert r.exit_code == code
    assert r.stdout == ""
    assert r.stderr.startswith(message), r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


COMMANDS = [
    ["train-time"],
    ["max-model"],
    ["memory"],
    ["mfu"],
    ["optimal"],
    ["models"],
    ["optimizers"],
    ["dtypes"],
    ["tensor"],
    ["flops", "matmul"],
    ["flops", "train"],
    ["bench", "matmul"],
    ["verify"],
    ["hardware", "list"],
    ["hardware", "show"],
    ["hardware", "compare"],
    ["hardware", "validate"],
    ["hardware", "new"],
    ["hardware", "edit"],
    ["hardware", "path"],
    ["hardware", "schema"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_has_help_and_json(napkin: Run, command: list[str]) -> None:
    r = napkin(*command, "--help")
    assert r.exit_code == 0 and "Usage: napkin" in r.stdout
    assert "--json" in r.stdout or command[-1] == "schema"


def test_root_help_and_version(napkin: Run) -> None:
    r = napkin("--help")
    assert r.exit_code == 0 and "train-time" in r.stdout and "GiB = 2^30 B" in r.stdout
    assert napkin("-h").stdout == r.stdout
    assert napkin().exit_code == 0
    from napkin import __version__

    assert napkin("--version").stdout == f"napkin {__version__}\n"


@pytest.mark.parametrize("group", [[], ["flops"], ["hardware"], ["stack"], ["comm"], ["cluster"], ["bench"]])
def test_a_bare_command_group_prints_its_help(napkin: Run, group: list[str]) -> None:
    r = napkin(*group)
    assert r.exit_code == 0 and r.stdout.startswith("Usage: napkin") and "Commands:" in r.stdout
    assert r.stderr == ""


def test_max_model_with_a_shape_reports_the_largest_micro_batch(napkin: Run) -> None:
    data = json.loads(
        napkin(
            "max-model", "--gpus", "8", "--model", "llama3-8b", "--precision", "mixed", "--recompute", "full", "--json"
        ).stdout
    )
    states = 16 * 8_030_261_248 / 8
    # full recomputation keeps s·b·h·e per layer; + int64 ids, final-norm/output inputs, fp32 logits (V = 128256)
    per_sample = 8192 * 4096 * 2 * 32 + 8192 * 8 + 8192 * (2 * 2 * 4096 + 4 * 128256)
    assert data["shape_params"] == 8_030_261_248
    usable = 85_520_809_984  # what an H100 80GB HBM3 reports to torch (hardware/h100-sxm.yaml)
    assert data["max_micro_batch"] == int((usable - states) // per_sample) == 10
    # the answer is what memory's own count fits: below (usable − activations) / 2 B by the stack's ZeRO-3 gather
    # buffers, which memory adds as its 'framework' bytes
    assert data["params"] < (usable - per_sample) / 2
    fitted = json.loads(
        napkin(
            "memory",
            "--params",
            str(data["params"]),
            "--layers",
            "32",
            "--hidden",
            "4096",
            "--heads",
            "32",
            "--kv-heads",
            "8",
            "--ffn",
            "14336",
            "--vocab",
            "128256",
            "--seq",
            "8192",
            "--mlp",
            "swiglu",
            "--norm",
            "rmsnorm",
            "--untied-embeddings",
            "--gpus",
            "8",
            "--precision",
            "mixed",
            "--sharding",
            "zero3",  # max-model's pooled answer; memory's own default is the stack's (ZeRO-1)
            "--recompute",
            "full",
            "--json",
        ).stdout
    )
    assert fitted["fits"] and fitted["headroom_bytes"] < 1e6


def test_flops_need_no_heads_but_activations_do(napkin: Run) -> None:
    data = json.loads(
        napkin(
            "flops",
            "train",
            "-N",
            "175B",
            "-D",
            "300B",
            "--layers",
            "96",
            "--hidden",
            "12288",
            "--seq",
            "2048",
            "--json",
        ).stdout
    )
    assert data["flops_attention"] == pytest.approx(12 * 96 * 2048 * 12288 * 300e9)
    r = napkin("memory", "-N", "7B", "--layers", "32", "--hidden", "4096", "--seq", "4096")
    assert r.exit_code == 2
    assert r.stderr == "napkin: error: --heads: activation memory needs the attention head count (the a·s²·b term)\n"
    r = napkin("flops", "train", "-N", "7B", "-D", "1T", "--layers", "32")
    assert r.stderr.startswith(
        "napkin: error: a shape needs --layers and --hidden (or --model, --model-config); missing: --hidden"
    )


def test_hardware_from_the_environment_and_explicit_choices(napkin: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NAPKIN_HARDWARE", "a100")
    assert json.loads(napkin("max-model", "--json").stdout)["hardware"] == "a100-sxm-80gb"
    example = str(Path(__file__).resolve().parent.parent / "examples" / "my-h100.yaml")
    assert json.loads(napkin("max-model", "--hardware-file", example, "--json").stdout)["hardware"] == "my-h100-cloud"
    r = napkin("max-model", "--hardware", "h100", "--hardware-file", example)
    assert r.exit_code == 2 and r.stderr == "napkin: error: give --hardware or --hardware-file, not both\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["train-time", "-N", "7B", "-D", "1T", "-G", "8", "--price", "-3"],
            "napkin: error: --price: '-3' must be positive and finite; expected a positive number such as 90, 2.49",
        ),
        (["train-time", "-N", "7B", "-D", "1T", "-G", "8", "--pue", "0.5"], "napkin: error: --pue: '0.5' must be ≥ 1"),
        (
            ["train-time", "-N", "7B", "-D", "1T", "--days", "1", "--hours", "2"],
            "napkin: error: give --days or --hours, not both",
        ),
        (["hardware", "compare", "h100"], "napkin: error: NAMES: give two or more profiles to compare"),
        (
            ["memory", "--gpus", "3", "--model", "llama3-8b", "--tensor-parallel", "2"],
            "napkin: error: --gpus (3) is not a multiple of tensor × pipeline × context (2 × 1 × 1 = 2)",
        ),
        (
            ["memory", "-N", "7B", "--model", "llama3-8b"],
            "napkin: error: give --params or --model, not both (the preset fixes the parameter count)",
        ),
        (["flops", "train", "-N", "7B"], "napkin: error: --tokens is required"),
    ],
)
def test_more_bad_combinations(napkin: Run, args: list[str], message: str) -> None:
    r = napkin(*args)
    assert r.exit_code == 2 and r.stderr.startswith(message) and r.stderr.count("\n") == 1


def test_prices_may_carry_a_dollar_sign_and_dtypes_handle_infinity(napkin: Run) -> None:
    data = json.loads(napkin("train-time", "-N", "7B", "-D", "1T", "-G", "8", "--price", "$2.50", "--json").stdout)
    assert data["price_per_hour"] == 2.5
    r = napkin("dtypes", "--value", "inf")
    assert r.exit_code == 0 and "inf" in r.stdout


def test_recompute_flags(napkin: Run) -> None:
    base = ["flops", "train", "--model", "gpt3-175b", "-D", "300B", "--json"]
    plain, full, selective = (
        json.loads(napkin(*base, *extra).stdout)
        for extra in ([], ["--recompute", "full"], ["--recompute", "selective"])
    )
    assert plain["hardware_flops"] == plain["flops"]
    assert full["flops"] == plain["flops"] < selective["hardware_flops"] < full["hardware_flops"]
    assert selective["hardware_flops"] - plain["flops"] == pytest.approx(plain["flops_attention"] / 3)
    r = napkin(*base, "--recompute", "some")
    assert r.exit_code == 2 and "'some' is not one of 'none', 'selective', 'full'" in r.stderr


# --------------------------------------------------------------- what a new user trips over (issue 9)


def test_training_flops_headline_matches_its_footer(napkin: Run) -> None:
    plain = napkin("train-time", "-N", "70e9", "-D", "15e12", "-G", "1024").stdout
    assert "training FLOPs   6.30e24 FLOPs" in plain and "C = 6·N·D; t = C" in plain and "attention" not in plain
    shaped = napkin("train-time", "--model", "llama3-70b", "-D", "15T", "-G", "1024").stdout
    assert "training FLOPs   7.32e24 FLOPs" in shaped  # 6·N·D 6.35e24 + attention 9.66e23 (c = 2)
    assert "6·N·D          6.35e24" in shaped and "attention      9.66e23 (c = 2: every s×s score" in shaped
    assert "C = 6·N·D + attention; t = C" in shaped
    causal = napkin("train-time", "--model", "llama3-70b", "-D", "15T", "-G", "1024", "--causal").stdout
    assert "attention      4.83e23 (c = 1: the unmasked half)" in causal


@pytest.mark.parametrize(
    "args",
    [
        ["train-time", "-N", "70B", "-D", "15T", "-G", "1024", "--mfu", "0.8"],
        ["train-time", "-N", "70B", "-D", "15T", "-G", "1024", "--mfu", "0.4:0.79"],
        ["mfu", "-N", "70B", "-G", "1024", "--tokens-per-second", "1.9e6"],
    ],
)
def test_an_mfu_above_075_is_called_implausible(napkin: Run, args: list[str]) -> None:
    r = napkin(*args)
    assert r.exit_code == 0
    assert "is implausibly high for dense training" in r.stderr and "PaLM 46.2 %" in r.stderr


def test_a_plausible_mfu_says_nothing(napkin: Run) -> None:
    assert napkin("train-time", "-N", "70B", "-D", "15T", "-G", "1024", "--mfu", "0.55").stderr == ""
    assert napkin("mfu", "-N", "70B", "-G", "1024", "--tokens-per-second", "1.2e6").stderr == ""  # 49 %


def test_memory_says_when_activations_are_not_counted(napkin: Run) -> None:
    bare = napkin("memory", "--params", "7B", "--gpus", "8").stdout
    assert "activations         not counted (give --model or a shape)" in bare
    # megatron-core's distributed optimizer (ZeRO-1): 2 + 2 B replicated, 4 + 8 B over 8 GPUs = 5.5 B a parameter
    assert "verdict             fits (model states only): headroom 47 GB" in bare  # 85.5 GB - 38.5 GB
    shaped = napkin("memory", "--model", "llama2-7b", "--gpus", "64").stdout
    assert "not counted" not in shaped and "model states only" not in shaped


def test_tensor_and_flops_matmul_accept_the_same_sizes(napkin: Run) -> None:
    tensor = json.loads(napkin("tensor", "32kx8k", "--json").stdout)
    assert tensor["shape"] == [32768, 8192] and tensor["bytes"] == 32768 * 8192 * 2  # bf16, as every command
    matmul = json.loads(napkin("flops", "matmul", "32k", "8k", "1", "--json").stdout)
    assert (matmul["m"], matmul["k"]) == (32768, 8192)
    assert json.loads(napkin("tensor", "48K×12K", "--json").stdout)["shape"] == [49152, 12288]
    bad = napkin("tensor", "1.5x2")
    assert bad.exit_code == 2 and bad.stderr.startswith("napkin: error: SHAPE: '1.5x2' is not a shape")


def test_small_values_read_plainly(napkin: Run) -> None:
    from napkin.units import format_bytes, format_duration

    assert "bytes      640 B\n" in napkin("tensor", "32x5", "--dtype", "fp32").stdout
    assert format_bytes(640) == "640 B" and format_bytes(8e10) == "80 GB (74.5 GiB)"
    assert [format_duration(s) for s in (0.00111, 0.0451, 3.22, 1.2e-7)] == ["1.11 ms", "45.1 ms", "3.22 s", "120 ns"]


def test_huge_values_read_in_scientific_notation(napkin: Run) -> None:
    from napkin.units import format_bytes

    out = napkin(
        "tensor", "9e15x9e15x9e15", "--dtype", "fp32"
    ).stdout  # each size at most 2^53 (≈ 9.007e15), as every count
    assert "elements   7.29e47\n" in out and "bytes      2.92e48 B = 2.92e30 EB (2.59e33 PiB)\n" in out
    assert format_bytes(2.5e23) == "250000 EB (2.22e8 PiB)" and format_bytes(3e24) == "3.00e6 EB (2.66e9 PiB)"
    assert json.loads(napkin("tensor", "9e15x9e15x9e15", "--json").stdout)["elements"] == 9**3 * 10**45  # exact


def test_flags_show_no_type_in_help(napkin: Run) -> None:
    for args in (["train-time", "--help"], ["memory", "--help"], ["bench", "matmul", "--help"]):
        out = napkin(*args).stdout
        assert "<bool>" not in out and "--json" in out


def test_models_show_the_published_count_beside_the_computed_one(napkin: Run) -> None:
    line = next(x for x in napkin("models").stdout.splitlines() if x.startswith(" chinchilla-70b"))
    assert line.split()[1:5] == ["65.0", "B", "70.0", "B"]


def test_no_source_cites_a_file_outside_the_repository() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    marker = "FORMU" + "LAS"  # the team's notes file, which is not in the repository
    files = [*root.glob("napkin/**/*.py"), *root.glob("tests/*.py"), *root.glob("examples/*"), root / "README.md"]
    files = [f for f in files if f.is_file()]  # a second run finds examples/__pycache__ there
    assert [str(f) for f in files if marker in f.read_text(encoding="utf-8")] == []


def test_notes_wrap_to_a_terminal_and_stay_one_line_when_piped(monkeypatch: pytest.MonkeyPatch) -> None:
    """A note on a terminal wraps at its width under the "napkin: " prefix without splitting a word or a
    number; piped, it stays one line per message."""
    from napkin.cli import common

    message = "napkin: " + " ".join(["ZeRO-3 across nodes measured 1.6-5.0× slower than napkin"] * 4)
    lines = common.wrapped(message, 80).split("\n")
    assert len(lines) > 1 and all(len(line) <= 80 for line in lines)
    assert all(line.startswith("        ") for line in lines[1:])
    assert " ".join(line.strip() for line in lines) == message
    assert common.wrapped(message, None) == message
    monkeypatch.setattr("napkin.io.terminal.stderr_columns", lambda: 60)
    seen: list[str] = []
    monkeypatch.setattr("napkin.cli.common.say", lambda text, err=False: seen.append(text))
    common.note(message.removeprefix("napkin: "))
    assert max(len(line) for line in seen[0].split("\n")) <= 60 and seen[0].count("\n") >= 4


@pytest.mark.parametrize(("value", "width"), [("²", None), ("99999", None), ("50", 50), ("5", 20), ("", None)])
def test_columns_from_the_environment_are_plain_numbers(
    monkeypatch: pytest.MonkeyPatch, value: str, width: int | None
) -> None:
    """One rule for COLUMNS, shared by the tables and the wrapped notes: a '²' there crashed a note on a terminal."""
    from napkin.io.terminal import env_columns

    monkeypatch.setenv("COLUMNS", value)
    assert env_columns() == width


@pytest.mark.parametrize(
    ("old", "new", "note"),
    [
        (
            ["comm", "all-reduce", "--bytes", "1GB", "-c", "dgx-h100", "-g", "16"],
            ["comm", "all-reduce", "--bytes", "1GB", "-c", "dgx-h100", "-G", "16"],
            "-g is deprecated",
        ),
        (
            ["memory", "--model", "llama3-8b", "--gpus", "8", "--batch", "2"],
            ["memory", "--model", "llama3-8b", "--gpus", "8", "--micro-batch", "2"],
            "--batch is deprecated",
        ),
        (
            ["kv-cache", "--model", "llama3-8b", "-b", "4"],
            ["kv-cache", "--model", "llama3-8b", "--batch", "4"],
            "-b is deprecated",
        ),
        (
            ["traffic", "-m", "llama3.1-8b", "--rate", "2", "--prompt", "500", "--output", "50", "-G", "2", "-p", "2"],
            [
                "traffic",
                "-m",
                "llama3.1-8b",
                "--rate",
                "2",
                "--prompt",
                "500",
                "--output",
                "50",
                "-G",
                "2",
                "--pipeline-parallel",
                "2",
            ],
            "-p is deprecated",  # -p is --precision in the training commands
        ),
        (
            ["flops", "matmul", "4096", "8192", "1024"],
            ["flops", "matmul", "4096x8192x1024"],
            "'flops matmul M K N' is deprecated",
        ),
    ],
)
def test_renamed_flags_keep_their_old_spelling_for_a_release_with_a_note(
    napkin: Run, old: list[str], new: list[str], note: str
) -> None:
    """One spelling per flag across commands (-G for GPUs, -b for the micro-batch, --batch for sequences served
    together, MxKxN shapes); the old spellings still give the same answer, and say what to write instead."""
    before, after = napkin(*old, "--json"), napkin(*new, "--json")
    assert before.exit_code == after.exit_code == 0, before.stderr
    assert json.loads(before.stdout) == json.loads(after.stdout)
    assert note in before.stderr and "next release" in before.stderr and note not in after.stderr
    both = napkin(*old, *new[len(new) - 2 :]) if old[0] != "flops" else None
    assert both is None or (both.exit_code == 2 and "not both" in both.stderr)


def test_a_rounded_token_batch_says_what_data_parallelism_it_leaves(napkin: Run) -> None:
    """4M tokens of 8,000 are 524 sequences = 4 × 131: data parallelism × micro-batch must divide them, so at
    most 4 of 64 GPUs' worth of replicas; the note says so and what batch uses every GPU (9 × 64 = 576)."""
    r = napkin("plan", "--model", "llama3-8b", "--gpus", "64", "--seq", "8000", "--global-batch-tokens", "4M")
    assert r.exit_code == 0, r.stderr
    assert "using 524 (4,192,000 tokens), which share only 4 with 64 GPUs: data parallelism at most 4" in r.stderr
    assert "--global-batch 576" in r.stderr


def test_a_batch_in_tokens_may_be_a_fraction_of_binary_millions(napkin: Run) -> None:
    """--global-batch-tokens 15.7M is 15.7 × 2^20 = 16,462,643 tokens: rounded to whole sequences and said, not
    refused; 4M is 4 × 2^20 = 512 sequences of 8,192 exactly."""
    r = napkin("plan", "--model", "llama3-8b", "--gpus", "64", "--global-batch-tokens", "15.7M", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["global_batch"] == round(15.7 * 2**20 / 8192) == 2010
    assert "16,462,643 tokens is 2,009.6 sequences of 8,192; using 2,010" in r.stderr
