"""Hostile numbers, round three (issue 20): values in YAML and JSON files are read with the command line's bounds,
and the library refuses what the command line refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import napkin
from napkin import units
from napkin.errors import UsageError
from tests.conftest import Run

CONFIG = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 100}


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.json"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (json.dumps({**CONFIG, "num_hidden_layers": True}), "num_hidden_layers: True is not a positive whole number"),
        (json.dumps({**CONFIG, "hidden_size": 1e150}), "hidden_size: 1e+150 is not a positive whole number"),
        (json.dumps({**CONFIG, "hidden_size": 10**60}), "is outside what napkin computes with"),
        (json.dumps({**CONFIG, "hidden_size": 2**53 + 2}), "larger than napkin counts exactly"),
        ('{"num_hidden_layers": 2, "num_hidden_layers": 3, "hidden_size": 64}', "the key 'num_hidden_layers' is given"),
        ('{"num_hidden_layers": 2, "hidden_size": NaN}', "hidden_size: nan is not a positive whole number"),
        ('{"num_hidden_layers": 2, "hidden_size": ' + "9" * 5000 + "}", "a number of 5000 digits is longer than"),
        (
            json.dumps({**CONFIG, "tie_word_embeddings": "false"}),
            "tie_word_embeddings: Input should be a valid boolean",
        ),
        (
            json.dumps({**CONFIG, "num_local_experts": 8, "num_experts_per_tok": 0}),
            "num_experts_per_tok: 0 is not a positive whole number",
        ),
        (json.dumps({**CONFIG, "model_type": []}), "model_type: '[]' is not a model type such as 'llama'"),
    ],
    ids=[
        "bool-layers",
        "1e150",
        "10^60",
        "2^53+2",
        "duplicate-key",
        "nan",
        "5000-digits",
        "string-bool",
        "top-k-0",
        "list-model-type",
    ],
)
def test_a_config_value_is_read_with_the_command_lines_bounds(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(UsageError, match="model_config: ") as info:
        napkin.Model.from_hf_config(_config(tmp_path, text))
    assert message in str(info.value)


def test_python_json_constants_are_read_where_napkin_takes_no_number(tmp_path: Path) -> None:
    """transformers writes config.json with Python's json, which spells a non-finite float Infinity or NaN:
    nvidia/NVIDIA-Nemotron-Nano-9B-v2's config.json has ``"time_step_limit": [0.0, Infinity]``. Such a key napkin
    does not read is no reason to refuse the file (the hybrid is then refused for what it is); a key it reads
    still must be a number it can count with (the NaN case above)."""
    extra = {"time_step_limit": [0.0, float("inf")], "initializer_range": float("nan")}
    model = napkin.Model.from_hf_config(_config(tmp_path, json.dumps({**CONFIG, **extra})))
    assert (model.layers, model.hidden) == (2, 64)
    hybrid = {**CONFIG, **extra, "model_type": "nemotron_h", "hybrid_override_pattern": "M-M*"}
    with pytest.raises(UsageError, match="'nemotron_h' is a hybrid"):
        napkin.Model.from_hf_config(_config(tmp_path, json.dumps(hybrid)))


def test_a_nan_where_napkin_reads_a_flag_is_one_line_naming_the_key(tmp_path: Path) -> None:
    """bool(nan) is True: Falcon's new_decoder_architecture: NaN had read as the new architecture, another count
    (a reviewer's find). A flag napkin reads must be true or false."""
    falcon = {**CONFIG, "model_type": "falcon", "num_kv_heads": 2, "new_decoder_architecture": float("nan")}
    with pytest.raises(UsageError, match="new_decoder_architecture: nan is neither true nor false") as info:
        napkin.Model.from_hf_config(_config(tmp_path, json.dumps(falcon)))
    assert info.value.field == "model_config"


def test_a_byte_order_mark_is_skipped(tmp_path: Path) -> None:
    model = napkin.Model.from_hf_config(_config(tmp_path, "\ufeff" + json.dumps(CONFIG)))
    assert (model.layers, model.hidden) == (2, 64)


def test_a_bare_config_json_is_named(napkin: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "Tiny-Model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**CONFIG, "max_position_embeddings": 64}))
    monkeypatch.chdir(folder)
    r = napkin("kv-cache", "--model-config", "config.json", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["model"] == "config.json"  # named by the path given, never ""


@pytest.mark.parametrize("value", [".nan", ".inf", "true", "'fast'"])
def test_a_measured_busbw_is_a_bandwidth(napkin: Run, isolated: Path, value: str) -> None:
    isolated.mkdir(parents=True, exist_ok=True)
    (isolated / "measurements.yaml").write_text(f"_comm:\n  dgx-h100:\n    all-reduce:\n      busbw: {value}\n")
    r = napkin("comm", "all-reduce", "--bytes", "1GB", "--cluster", "dgx-h100", "--bandwidth", "measured")
    assert r.exit_code == 2 and "_comm.dgx-h100.all-reduce.busbw:" in r.stderr and "Traceback" not in r.stderr


def test_a_very_long_yaml_number_is_its_line_not_a_crash(napkin: Run, isolated: Path) -> None:
    (isolated / "hardware").mkdir(parents=True)
    (isolated / "hardware" / "p.yaml").write_text("name: p\nmemory: " + "9" * 5000 + "\n")
    r = napkin("hardware", "list")
    assert r.exit_code == 0 and "p.yaml:2: a number of 5000 characters is longer than napkin reads" in r.stderr


@pytest.mark.parametrize("name", ["null", "true", "1"])
def test_a_preset_must_be_named_by_a_string(napkin: Run, isolated: Path, name: str) -> None:
    (isolated / "models").mkdir(parents=True)
    (isolated / "models" / "m.yaml").write_text(f"{name}:\n  description: x\n")
    r = napkin("models", "--json")
    assert r.exit_code == 0 and "is not a preset name" in r.stderr
    assert all(isinstance(p["name"], str) and p["name"] not in ("None", "True") for p in json.loads(r.stdout))


def test_integers_are_read_exactly() -> None:
    assert units.parse_int("9007199254740992", "gpus") == 2**53
    for text in ("9007199254740993", 2**53 + 1, "1e36"):
        with pytest.raises(UsageError, match="larger than napkin counts exactly"):
            units.parse_int(text, "gpus")


@pytest.mark.parametrize("text", ["1__0", "1_", "_1", "1_.5", "1._5"])
def test_underscores_only_between_digits(text: str) -> None:
    with pytest.raises(UsageError):
        units.parse_count(text, "params")


@given(st.integers(min_value=1, max_value=2**53))
def test_numpy_integers_read_as_python_ones(value: int) -> None:
    np = pytest.importorskip("numpy")
    assert units.parse_int(np.int64(value), "gpus") == value == units.parse_int(value, "gpus")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: napkin.memory(params="7B", sequence_parallel="no"), "sequence_parallel: 'no' is not True or False"),
        (lambda: napkin.memory(params="7B", flash_attention=1), "flash_attention: 1 is not True or False"),
        (lambda: napkin.step(model="llama3-8b", gpus=8, global_batch=64, causal="yes"), "causal: 'yes' is not True"),
        (lambda: napkin.memory(params="7B", layout="tp8"), "layout: 'tp8' is not a Layout"),
        (lambda: napkin.tensor((2, -3)), "shape: -3 must be positive"),
        (lambda: napkin.tensor(()), "is not a shape"),
        (lambda: napkin.memory(params="7B", hardware=5), "hardware: 5 is not a profile name"),
        (lambda: napkin.memory(model=5), "model: 5 is not a preset name"),
        (lambda: napkin.memory(model_config=5), "model_config: 5 is not a path"),
        (lambda: napkin.collective(bytes="1GB", cluster=5), "cluster: 5 is not a cluster name"),  # type: ignore[arg-type]
        (lambda: napkin.train_time(params="7B", tokens="1T", gpus=[8]), "gpus: [8] is not a number"),
        (lambda: napkin.train_time(params="7B", tokens="1T", gpus=10**400), "a 401-digit number is too large"),
        (lambda: napkin.dtypes(value=10**400), "beyond every format's range"),
    ],
)
def test_the_library_refuses_what_the_command_line_refuses(call: object, message: str) -> None:
    with pytest.raises(UsageError) as info:
        call()  # type: ignore[operator]
    assert message in str(info.value)


def test_numpy_numbers_are_accepted_alike() -> None:
    np = pytest.importorskip("numpy")
    as_int = napkin.train_time(params="7B", tokens="1T", gpus=np.int64(8)).days
    assert as_int == napkin.train_time(params="7B", tokens="1T", gpus=np.float64(8)).days
    assert as_int == napkin.train_time(params="7B", tokens="1T", gpus=8).days


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["step", "--model", "llama3-8b", "--global-batch", "64"], "--gpus is required (see 'napkin step --help')"),
        (["plan", "--model", "llama3-8b"], "--gpus is required (see 'napkin plan --help')"),
        (["memory", "--model", "llama3-8b", "--global-batch", "7", "-G", "2"], "a multiple of --micro-batch × data"),
        (["inference", "--model", "llama3-8b", "--context", "1"], "--context: 1 token leaves none to generate"),
        (["kv-cache", "--model", "llama3-8b", "--tensor-parallel", "0"], "--tensor-parallel: '0' must be positive"),
        (["kv-cache", "--model", "llama3-8b", "--tensor-parallel", "3"], "--tensor-parallel (3) must divide"),
        (["train-time", "-G", "9007199254740993", "-N", "7B", "-D", "1T"], "--gpus: '9007199254740993' is larger"),
        (
            ["train-time", "--model", "llama3-8b", "-D", "1T", "-G", "8", "--mfu", "predicted", "--peak", "measured"],
            "--peak: with --mfu predicted the time is the plan's step time",
        ),
        # the input at fault is written as its flag where the message names it, never the same word in prose
        (
            ["kv-cache", "--layers", "32", "--hidden", "4096", "--heads", "32"],
            "napkin: error: --context is required (this model has no default context length)\n",
        ),
        (["hardware", "new", "mine", "--from", "h10"], "napkin: error: --from: unknown hardware 'h10'; closest"),
        (["stack", "show", "megatrn"], "napkin: error: NAME: unknown stack 'megatrn'; closest: megatron-core"),
        (["memory", "--model", "llama3-8b", "--gpus", "3", "--tensor-parallel", "2"], "not a multiple of tensor ×"),
        # an input that only --mfu predicted reads is named alone, as its flag
        (
            ["train-time", "--model", "llama3-8b", "-D", "1T", "-G", "8", "--stack", "megatron-core"],
            "napkin: error: --stack: used only with --mfu predicted\n",
        ),
        # TP defaults to every GPU: a GPU count that cannot split the heads names --gpus, the flag typed
        (
            ["traffic", "--model", "llama3-8b", "--gpus", "3", "--rate", "1", "--prompt", "9", "--output", "9"],
            "napkin: error: --gpus (3) must divide the model's heads (32): --tensor-parallel defaults to every GPU",
        ),
        (
            [
                "traffic",
                "-m",
                "llama3-8b",
                "-G",
                "6",
                "--pipeline-parallel",
                "2",
                "--rate",
                "1",
                "--prompt",
                "9",
                "--output",
                "9",
            ],
            "napkin: error: --gpus per pipeline stage (6 / 2 = 3) must divide the model's heads (32)",
        ),
        (
            [
                "traffic",
                "-m",
                "llama3-8b",
                "-G",
                "8",
                "--pipeline-parallel",
                "2",
                "-t",
                "3",
                "--rate",
                "1",
                "--prompt",
                "9",
                "--output",
                "9",
            ],
            "napkin: error: --gpus (8) is not a multiple of tensor × pipeline (3 × 2)",
        ),
        # both lengths missing: both named as flags (the first was once left as its keyword)
        (
            ["traffic", "--model", "llama3-8b", "--rate", "1"],
            "napkin: error: --prompt and --output: lengths are required (1024, 100..2000 or @histogram.txt)\n",
        ),
        (
            ["traffic", "--model", "llama3-8b", "--rate", "1", "--prompt", "9"],
            "napkin: error: --output: a length is required (1024, 100..2000 or @histogram.txt)\n",
        ),
        # a GPU count is a whole number: its examples are whole numbers, not parameter counts
        (
            ["memory", "--model", "llama3-8b", "--gpus", "0"],
            "--gpus: '0' must be positive and finite; expected a positive whole number such as 8, 64, 1K or 2e3",
        ),
        # a length with its k/M suffix is quoted whole, with what a length accepts
        (["kv-cache", "--model", "llama3-8b", "--context", "-8k"], "--context: '-8k' is not a positive length"),
        (["plan", "--model", "llama3-8b", "-G", "8", "--global-batch-tokens", "-4M"], "'-4M' is not a positive length"),
    ],
)
def test_common_mistakes_are_one_line_naming_the_flag(napkin: Run, argv: list[str], message: str) -> None:
    r = napkin(*argv)
    assert r.exit_code == 2, r.stderr
    assert r.stderr.startswith("napkin: error: ") and message in r.stderr and len(r.stderr.splitlines()) == 1


SERVE = ("--model", "llama3-8b", "--prompt", "100", "--output", "10")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["train-time", "-N", "70e9", "-D", "15e12", "--gpus", "1e12"], "--gpus: '1e12' is above the 16,777,216 GPUs"),
        (["step", "-m", "llama3-8b", "-G", "8", "--global-batch", "1e12"], "--global-batch: '1e12' is above the 16,"),
        (["step", "-m", "llama3-8b", "-G", "8", "--global-batch", "8", "-b", "1e9"], "--micro-batch: '1e9' is above"),
        (["plan", "-m", "llama3-8b", "-G", "1e9"], "--gpus: '1e9' is above the 16,777,216 GPUs napkin accepts"),
        (["plan", "-m", "llama3-8b", "-G", "8", "--global-batch-tokens", "1e13"], "--global-batch-tokens: '1e13'"),
        (["memory", "-m", "llama3-8b", "--seq", "1e12"], "--seq: '1e12' is above the 134,217,728 tokens"),
        (["memory", "-m", "llama3-8b", "-t", "1e8"], "--tensor-parallel: '1e8' is above the 16,777,216 GPUs"),
        (["serve-plan", *SERVE, "--rate", "1e12", "--ttft-p99", "1s"], "--rate: '1e12' is above the 10,000,000 req"),
        (["traffic", *SERVE, "--rate", "1e12/min"], "--rate: '1e12/min' is above the 10,000,000 requests/s"),
        (["inference", "-m", "llama3-8b", "--batch", "1e9", "--context", "1k"], "--batch: '1e9' is above the 16,"),
        (["kv-cache", "-m", "llama3-8b", "--context", "1e9"], "--context: '1e9' is above the 134,217,728 tokens"),
        (
            ["mfu", "-m", "llama3-8b", "-G", "8", "--tokens-per-second", "1e30"],
            "--tokens-per-second: '1e30' is above the 1,000,000,000,000 tokens/s",
        ),
    ],
)
def test_a_count_no_cluster_or_workload_reaches_is_refused(napkin: Run, argv: list[str], message: str) -> None:
    r = napkin(*argv)
    assert r.exit_code == 2, r.stderr
    assert r.stderr.startswith("napkin: error: ") and message in r.stderr and len(r.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    "argv",
    [
        ["train-time", "-N", "70e9", "-D", "15e12", "--gpus", str(2**24)],
        ["kv-cache", "-m", "llama3-8b", "--context", "128M"],
        ["traffic", *SERVE, "--rate", "1e7"],
    ],
)
def test_the_bounds_themselves_are_accepted(napkin: Run, argv: list[str]) -> None:
    assert napkin(*argv).exit_code == 0


def test_the_library_refuses_the_bounds_too() -> None:
    with pytest.raises(UsageError, match="gpus: 16777217 is above the 16,777,216 GPUs"):
        napkin.train_time(params="70B", tokens="15T", gpus=2**24 + 1)
