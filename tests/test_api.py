"""The notebook API: the README's snippet, keywords shared with the CLI, errors that name the keyword."""

from __future__ import annotations

import contextlib
import inspect
import io
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

import napkin
from napkin import api
from napkin.cli import app
from napkin.cli.options import DEPRECATED
from napkin.engines.memory import MemoryResult
from napkin.errors import UsageError

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_library_snippet_prints_what_the_readme_says() -> None:
    section = README.read_text(encoding="utf-8").split("## As a library", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    expected = re.search(r"```text\n(.*?)```", section, re.S)
    assert code is not None and expected is not None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code.group(1), {})
    assert out.getvalue() == expected.group(1)


def test_the_issue_example_is_143_9_days_and_renders_in_a_notebook() -> None:
    run = napkin.train_time(params="70B", tokens="15T", gpus=1024)
    assert round(run.days, 1) == 143.9
    html = run._repr_html_()
    assert "<pre" in html and "143.9 days" in html and "Training time" in html
    assert repr(run) == "TrainTimeResult(days=143.9, gpus=1024, mfu=0.5, hardware='h100-sxm')"
    plan = napkin.plan(model="llama3-8b", gpus=8, global_batch=16, hardware="h100", top=1)
    assert repr(plan).startswith(f"PlanResult(best='{plan.best}', considered=")
    assert plan.best is not None and plan.best.endswith(f" b{plan.layouts[0].micro_batch}")
    assert repr(plan.layouts[0]).startswith("StepResult(layout_text='TP ")
    assert "C = 6·N·D" in run.explain()


def test_strings_numbers_and_objects_are_interchangeable() -> None:
    h100 = napkin.hardware("h100")
    a = napkin.train_time(params="70B", tokens="15T", gpus="1K", hardware=h100).seconds
    b = napkin.train_time(params=70e9, tokens=15e12, gpus=1000, hardware="H100-SXM").seconds
    assert a == b
    assert napkin.max_model(gpus=8, optimizer="adamw").params == pytest.approx(8 * 85_520_809_984 / 16)
    assert napkin.memory(params="70B", gpus=8, tensor_parallel=8).per_gpu_bytes == pytest.approx(16 * 70e9 / 8)


def test_a_layout_by_its_old_field_names_warns_and_both_names_are_refused() -> None:
    """``Layout(tensor=2)`` (the names before one name per degree) still builds the layout, with a warning naming
    the new keyword; a layout given a degree by both names is an error naming the old key."""
    with pytest.warns(FutureWarning) as caught:
        old = napkin.Layout.model_validate({"tensor": 2, "expert": 4})
    assert (old.tensor_parallel, old.expert_parallel) == (2, 4)
    assert [str(w.message).split(" (")[0] for w in caught] == [
        "Layout: 'tensor' is deprecated, it is now 'tensor_parallel'",
        "Layout: 'expert' is deprecated, it is now 'expert_parallel'",
    ]
    with pytest.raises(ValidationError, match="tensor: give tensor_parallel, not both it and its old name tensor"):
        napkin.Layout.model_validate({"tensor": 2, "tensor_parallel": 2})


def test_a_layout_object_and_keywords_combine() -> None:
    r = napkin.memory(
        model="llama3-8b", gpus=8, precision="mixed", layout=napkin.Layout(tensor_parallel=2), recompute="full"
    )
    assert isinstance(r, MemoryResult)  # a full fine-tune's (adapters give a FinetuneMemoryResult)
    assert (r.layout.tensor_parallel, r.layout.dp, str(r.layout.recompute)) == (2, 4, "full")


@pytest.mark.parametrize("call", [napkin.train_time, napkin.memory, napkin.max_model, napkin.mfu, napkin.flops])
def test_a_misspelt_keyword_raises(call: Any) -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        call(params="7B", gpu=8)


def test_errors_name_the_keyword_not_a_flag() -> None:
    with pytest.raises(UsageError, match=r"^gpus \(12\) is not a multiple") as info:
        napkin.memory(params="7B", gpus=12, tensor_parallel=8)
    assert info.value.field == "gpus"
    with pytest.raises(UsageError, match=r"^params: 'abc'"):
        napkin.train_time(params="abc", tokens="1T", gpus=8)


COMMANDS: dict[str, Any] = {
    "train-time": api.train_time,
    "mfu": api.mfu,
    "memory": api.memory,
    "max-model": api.max_model,
    "optimal": api.optimal,
    "dtypes": api.dtypes,
    "tensor": api.tensor,
    "optimizers": api.optimizers,
    "models": api.models,
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_cli_option_is_a_keyword_of_the_function(name: str) -> None:
    import typer.main

    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    keywords = set(inspect.signature(COMMANDS[name]).parameters)
    accepts_shape = "shape" in keywords and name != "tensor"
    for param in command.params:
        if param.name in ("json", "explain") or param.name in DEPRECATED:
            continue  # output switches; old spellings that set a keyword of the same function
        assert param.name in keywords or (accepts_shape and param.name in api.SHAPE_FIELDS), (name, param.name)


def test_hf_config_is_read_locally(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(
        '{"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,'
        ' "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256, "hidden_act": "silu",'
        ' "rms_norm_eps": 1e-5, "tie_word_embeddings": false, "max_position_embeddings": 8192}'
    )
    model = napkin.Model.from_hf_config(config)
    assert model.params() == 8_030_261_248  # Llama 3 8B
    r = napkin.memory(model_config=str(config), gpus=8, precision="mixed", seq=8192)
    assert r.params == 8_030_261_248
    assert (r.seq, r.seq_source, r.model) == (8192, "given", str(config))
    with pytest.raises(UsageError, match=r"^seq is required: activation memory depends on it, .* brings no default"):
        napkin.memory(model_config=str(config), gpus=8)  # never the config's 8,192-token context
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(UsageError, match=r"model_config: .* is not valid JSON"):
        napkin.Model.from_hf_config(bad)


def test_every_question_in_the_readme_list_is_a_callable_of_the_package() -> None:
    section = README.read_text(encoding="utf-8").split("## As a library", 1)[1].split("```python", 1)[0]
    names = set(re.findall(r"`(?:napkin\.)?([a-z][a-z_]*)`", section)) - {"napkin", "tensor_parallel"}
    assert {"plan", "step", "inference", "collective", "hardware_sheet"} <= names
    for name in names:
        assert callable(getattr(napkin, name)), name
        assert name in dir(napkin)
    assert set(napkin._LAZY) <= set(dir(napkin)) == set(napkin.__all__)  # the API and nothing else


def test_no_question_shares_its_name_with_a_module() -> None:
    """``import napkin.memory`` would replace the function ``napkin.memory`` with the module."""
    package = Path(napkin.__file__).parent
    modules = {p.stem for p in package.glob("*.py")} | {p.name for p in package.iterdir() if p.is_dir()}
    assert not modules & set(napkin._LAZY), sorted(modules & set(napkin._LAZY))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 100_000 + "]" * 100_000, "is not valid JSON (nested too deeply)"),
        ('{"num_hidden_layers": 1e400, "hidden_size": NaN}', "is not valid JSON (1e400 is not a finite number)"),
        ("[1, 2]", "is not a JSON object"),
    ],
)
def test_a_hostile_config_json_is_one_usage_error(tmp_path: Path, text: str, message: str) -> None:
    config = tmp_path / "config.json"
    config.write_text(text)
    with pytest.raises(UsageError, match=re.escape(message)) as info:
        napkin.Model.from_hf_config(config)
    assert info.value.field == "model_config"


def test_every_question_declares_its_concrete_result_type() -> None:
    """What mypy sees (tests/typing_api.py is the static check, run by mypy --strict): no public function of the
    library returns ``Any``, so a misspelt result field is a type error in the caller's code."""
    import importlib
    import typing

    from napkin.results.result import Result
    from napkin.systems.profiles import HardwareProfile

    rooms = [
        "engines.comm",
        "engines.finetune",
        "engines.finetune_max",
        "engines.compute",
        "engines.number_formats",
        "engines.planner",
        "engines.scaling",
        "engines.serving",
        "engines.serve_plan",
        "engines.traffic",
        "engines.traffic_result",
        "engines.step_cost",
        "engines.step",
        "engines.memory",
        "results.cluster_views",
        "results.hardware_views",
        "results.model_views",
        "results.stack_views",
        "systems.profiles",
        "systems.cluster",
    ]
    names: dict[str, Any] = {}
    for room in rooms:  # the result classes, which the api imports only under TYPE_CHECKING (start-up time)
        module = importlib.import_module(f"napkin.{room}")
        names.update(vars(module))
        names.update({n: getattr(module, n) for n in getattr(module, "__all__", ())})  # a lazy package's names
    for name in napkin._LAZY:
        obj = getattr(napkin, name)
        if isinstance(obj, type):
            continue  # Model, Layout, Workload: the domain classes themselves
        func = inspect.unwrap(obj)
        returned = typing.get_type_hints(func, globalns={**vars(inspect.getmodule(func)), **names})["return"]
        kinds = typing.get_args(returned) or (returned,)  # memory: a full fine-tune's result or the adapters'
        assert all(isinstance(k, type) and issubclass(k, (Result, HardwareProfile)) for k in kinds), (name, returned)


def test_a_profiles_origin_is_said_by_the_results_built_from_it(isolated: Path) -> None:
    """A user profile that replaces a built-in says so in the notes of every result computed with it, in the
    library as on the command line; nothing keeps notes between calls (a later question with another profile says
    nothing of it)."""
    (isolated / "hardware").mkdir(parents=True)
    text = (Path(__file__).resolve().parent.parent / "hardware" / "h100-sxm.yaml").read_text(encoding="utf-8")
    (isolated / "hardware" / "h100-sxm.yaml").write_text(text, encoding="utf-8")
    for result in (
        napkin.train_time(params="7B", tokens="1T", gpus=8),
        napkin.memory(params="7B", gpus=8),
        napkin.max_model(gpus=8),
        napkin.matmul("4096x4096x4096"),
        napkin.step(model="llama3-8b", gpus=8, global_batch=16, hardware="h100"),
        napkin.hardware_sheet("h100"),
        napkin.inference(model="llama3-8b", hardware="h100"),
        napkin.traffic(model="llama3-8b", hardware="h100", rate="1/s", prompt=256, output=32, requests=20),
        napkin.serve_plan(
            model="llama3-8b", hardware="h100", rate="1/s", prompt=256, output=32, requests=50, ttft_p90="2s"
        ),
    ):
        assert sum("your profile at" in n for n in result.notes) == 1, (type(result).__name__, result.notes)
    plain = napkin.train_time(params="7B", tokens="1T", gpus=8, hardware="a100")
    assert not any("your profile" in n for n in plain.notes)


def test_a_custom_device_on_a_custom_cluster_runs_from_objects_alone() -> None:
    """A library user's own GPU (a copy of the H100 profile at its 500 W clock-limited peak, as Grand Teton's
    runs) on their own cluster (DGX H100's fabrics, that device): the pair is taken as given, no file needed."""
    from napkin.domain.choices import Dtype
    from napkin.systems.cluster import find

    h100 = api.get_hardware("h100")
    slower = h100.model_copy(
        update={"name": "h100-500w", "aliases": [], "peak_flops": {d: f * 0.894 for d, f in h100.peak_flops.items()}}
    )
    cluster = find("dgx-h100").cluster.model_copy(update={"name": "my-pod", "device": "h100-500w"})
    args = {"model": "llama3-8b", "gpus": 64, "global_batch": 64, "stack": "megatron-core"}
    mine = napkin.step(cluster=cluster, hardware=slower, **args)
    stock = napkin.step(cluster="dgx-h100", **args)
    assert (mine.hardware, mine.cluster) == ("h100-500w", "my-pod")
    assert slower.peak_flops[Dtype.bf16] == pytest.approx(0.894 * 989.5e12)
    assert mine.breakdown["compute"] > stock.breakdown["compute"]  # a lower peak computes slower
    with pytest.raises(UsageError, match=r"^cluster: my-pod is built from 'h100-500w', not the hardware given"):
        napkin.step(cluster=cluster, hardware=h100, **args)


@pytest.mark.parametrize("name", ["step", "plan", "memory", "max_model", "train_time", "traffic", "serve_plan"])
def test_a_question_s_signature_names_the_result_it_returns(name: str) -> None:
    """help() and editors read the signature: step shares step_setup's keywords, not its tuple return."""
    annotation = str(inspect.signature(getattr(napkin, name)).return_annotation)
    assert all(part.strip().endswith("Result") for part in annotation.split("|")), annotation
