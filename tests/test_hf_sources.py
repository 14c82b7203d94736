"""Three ways to name a Hugging Face model — a config.json, a model folder, a Hub id — and one answer; and the
sequence length, which a config never supplies. No test touches the network: the Hub cache is built here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import napkin
from napkin.errors import UsageError
from tests.conftest import Run

DATA = Path(__file__).parent / "data" / "hf_configs"
HUB_ID = "google/gemma-2-9b"


@pytest.fixture
def hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Hugging Face cache holding one model's config.json, laid out as huggingface_hub lays it out
    (models--org--name/refs/main → snapshots/<commit>/), offline."""
    pytest.importorskip("huggingface_hub")
    repo = tmp_path / "hf" / "hub" / "models--google--gemma-2-9b"
    snapshot = repo / "snapshots" / "0123456789abcdef0123456789abcdef01234567"
    snapshot.mkdir(parents=True)
    shutil.copy(DATA / "gemma-2-9b.json", snapshot / "config.json")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(snapshot.name, encoding="utf-8")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return repo


def three_ways(tmp_path: Path, napkin: Run, *command: str) -> list[dict[str, object]]:
    """``command``'s JSON answer for gemma-2-9b given as a config.json, a folder and a Hub id, less its name."""
    folder = tmp_path / "gemma-2-9b"
    folder.mkdir(exist_ok=True)
    shutil.copy(DATA / "gemma-2-9b.json", folder / "config.json")
    answers = []
    for how in (["--model-config", str(DATA / "gemma-2-9b.json")], ["--model", str(folder)], ["--model", HUB_ID]):
        result = napkin(*command, *how, "--json")
        assert result.exit_code == 0, result.stderr
        answer = json.loads(result.stdout)
        answers.append({k: v for k, v in answer.items() if k != "model"})
    return answers


def test_a_file_a_folder_and_a_hub_id_give_the_same_answer(tmp_path: Path, hub_cache: Path, napkin: Run) -> None:
    answers = three_ways(tmp_path, napkin, "memory", "--seq", "4096", "--gpus", "8", "--precision", "mixed")
    assert answers[0] == answers[1] == answers[2]
    assert answers[0]["params"] == 9_241_705_984


@pytest.mark.parametrize(
    "command",
    [
        ["kv-cache", "--context", "8k"],
        ["inference", "--hardware", "h100", "--context", "8k"],
        ["train-time", "--tokens", "1T", "--gpus", "64", "--seq", "4k"],
        ["step", "--gpus", "8", "--global-batch", "64", "--seq", "4k"],
        ["memory", "--finetune", "qlora", "--seq", "4k"],
        ["max-model", "--finetune", "lora", "--seq", "2k", "--hardware", "l40s"],
    ],
)
def test_every_command_gives_one_answer_whichever_way_the_model_comes(
    tmp_path: Path, hub_cache: Path, napkin: Run, command: list[str]
) -> None:
    answers = three_ways(tmp_path, napkin, *command)
    assert answers[0] == answers[1] == answers[2]
    hub = napkin("memory", "--model", HUB_ID, "--seq", "4096", "--json")
    assert json.loads(hub.stdout)["model"] == HUB_ID  # named by its id, not the snapshot folder


def test_an_unknown_hub_id_offline_is_one_line_naming_it(hub_cache: Path, napkin: Run) -> None:
    result = napkin("memory", "--model", "nobody/no-such-model", "--seq", "4096")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "napkin: error: --model: 'nobody/no-such-model' is not in the Hugging Face cache and HF_HUB_OFFLINE is set; "
        "fetch it once online, or give its config.json or a folder holding one"
    ]


def test_an_unreachable_hub_is_one_line_not_a_retry_log(
    hub_cache: Path, napkin: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Online but without a network (a closed local port as the Hub): huggingface_hub would log five retries over
    ~25 s; napkin says it once, naming the id, the host and the flag."""
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    result = napkin("memory", "--model", "acme/not-cached", "--seq", "2048")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert "'acme/not-cached'" in result.stderr and "127.0.0.1:9" in result.stderr and "--model" in result.stderr


def test_a_folder_without_a_config_is_one_line_naming_it(tmp_path: Path, napkin: Run) -> None:
    result = napkin("memory", "--model", str(tmp_path), "--seq", "4096")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"napkin: error: --model: folder {str(tmp_path)!r} has no config.json (a Hugging Face checkpoint folder has one)"
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"num_key_value_heads": 3}, "num_attention_heads (16) must be a multiple of num_key_value_heads (3)"),
        ({"num_attention_heads": None}, "num_attention_heads: missing"),
        ({"sliding_window": 4096, "max_position_embeddings": 2048}, "never masks"),
    ],
)
def test_bad_configs_on_the_command_line(tmp_path: Path, napkin: Run, change: dict[str, object], message: str) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**json.loads((DATA / "gemma-2-9b.json").read_text()), **change}), encoding="utf-8")
    result = napkin("kv-cache", "--model-config", str(config), "--context", "1k")
    if message == "never masks":  # a window the context never reaches reads as full attention, and says so
        assert result.exit_code == 0, result.stderr
        assert message in result.stdout + result.stderr
        return
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert message in result.stderr


def test_a_window_longer_than_the_context_is_refused_in_a_shape() -> None:
    """A model written by hand (a Model, a preset file) with a window its context never reaches is a mistake;
    released configs carry such windows switched off or unreachable, and read as full attention (above)."""
    with pytest.raises(ValueError, match=r"sliding_window \(8,192\) is longer than the context \(4,096\)"):
        napkin.Model(layers=2, hidden=64, heads=4, context=4096, sliding_window=8192)


def test_the_sequence_length_is_never_the_configs_context(napkin: Run) -> None:
    """issue 22: train-time with a config once trained at its 131,072-token maximum, silently."""
    config = str(DATA / "llama-3.1-8b.json")
    result = napkin("train-time", "--model-config", config, "--tokens", "15T", "--gpus", "512")
    assert result.exit_code == 2
    assert "seq is required" in result.stderr and "131,072-token context" in result.stderr
    given = napkin("train-time", "--model-config", config, "--tokens", "15T", "--gpus", "512", "--seq", "8192")
    preset = napkin("train-time", "--model", "llama3.1-8b", "--tokens", "15T", "--gpus", "512")
    assert "8,192 tokens (given)" in given.stdout
    assert "8,192 tokens (the llama3.1-8b preset's training length)" in preset.stdout
    # the same architecture and length: the same FLOPs and days
    assert given.stdout.split("hardware", 1)[1] == preset.stdout.split("hardware", 1)[1]
    explained = napkin("train-time", "--model", "llama3.1-8b", "--tokens", "15T", "--gpus", "512", "--explain")
    assert "sequence length" in explained.stdout and "training length" in explained.stdout


def test_library_and_command_line_share_the_rule() -> None:
    config = str(DATA / "llama-3.1-8b.json")
    with pytest.raises(UsageError, match="seq is required") as info:
        napkin.train_time(model_config=config, tokens="15T", gpus=512)
    assert info.value.field == "seq"
    run = napkin.train_time(model=config, tokens="15T", gpus=512, seq=8192)
    assert (run.seq, run.seq_source) == (8192, "given")


@pytest.mark.parametrize("command", [["step", "--global-batch", "64"], ["plan", "--global-batch", "512", "--top", "1"]])
def test_step_and_plan_say_where_the_sequence_length_came_from(napkin: Run, command: list[str]) -> None:
    """issue 22: every command that uses a sequence length prints it, and --explain says where it came from."""
    config = str(DATA / "llama-3.1-8b.json")
    for how, length, origin in (
        (["--model", "llama3.1-8b"], "8,192", "the llama3.1-8b preset's training length"),
        (["--model-config", config, "--seq", "4k"], "4,096", "given"),
    ):
        assert f"× {length} tokens" in napkin(*command, "--gpus", "64", *how).stdout
        explained = napkin(*command, "--gpus", "64", *how, "--explain").stdout
        derivation = explained.split("Derivation", 1)[1].split(" 2. ", 1)[0]
        assert "1. sequence length" in derivation and f"= {length} tokens" in derivation
        assert f"source: {origin}" in " ".join(derivation.split())


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        # was "cannot read 'org/na me': No such file or directory", as if it had to be a file
        ("--model", "org/na me", "is not a file, a folder or a Hugging Face Hub id (org/name"),
        ("--model", "a/b/c", "is not a file, a folder or a Hugging Face Hub id (org/name"),
        # --model-config reads locally, as its help says: a Hub id there was fetched from the Hub
        ("--model-config", "google/gemma-2-9b", "is not a file or a folder"),
    ],
)
def test_a_model_that_is_neither_file_folder_nor_hub_id_is_one_line(
    hub_cache: Path, napkin: Run, flag: str, value: str, message: str
) -> None:
    result = napkin("memory", flag, value, "--seq", "4096")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"napkin: error: {flag}: {value!r} {message}")


def test_without_huggingface_hub_a_hub_id_names_the_extra_to_install(
    napkin: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The distribution is napkin-math: 'napkin[hf]' would install another project's package."""
    import sys

    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # as if the extra were not installed
    r = napkin("kv-cache", "--model", "meta-llama/Llama-3.1-8B", "--context", "8k")
    assert r.exit_code == 2 and "pip install 'napkin-math[hf]'" in r.stderr and len(r.stderr.splitlines()) == 1


def test_a_sequence_beyond_the_models_context_is_warned_as_inference_warns() -> None:
    """memory/train-time take any --seq, but one longer than the model's context is said, as inference says it."""
    long = napkin.memory(model="llama3.1-8b", seq="1M")
    assert "seq 1,048,576 is longer than the model's 131,072-token context" in long.warnings
    assert not napkin.memory(model="llama3.1-8b", seq="8k").warnings
