"""A profile file the user names on the command line is an input like any other: anything wrong with it is one
line on stderr led by the option it came from, exit 2, never a traceback (--hardware-file, --stack-file,
--cluster-file alike). And an input is blamed on the option the user typed (--price's names, not --hardware)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from napkin.systems import profiles
from tests.conftest import Run

#: Every command that takes --hardware-file, with inputs that would otherwise succeed.
HARDWARE_FILE_COMMANDS = [
    ["memory", "--model", "llama-3-8b"],
    ["train-time", "-N", "70B", "-D", "15T", "-G", "8"],
    ["step", "--model", "llama3-8b", "--gpus", "64", "--global-batch", "512", "-t", "2"],
    ["inference", "--model", "llama3.1-8b", "--prompt", "1000", "--output", "200", "--batch", "32"],
    ["mfu", "--model", "llama3-8b", "--gpus", "8", "--tokens-per-second", "50e3"],
    ["optimal", "--gpus", "8", "--days", "30"],
    ["max-model", "--gpus", "8", "--optimizer", "adamw"],
    ["plan", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "64", "--top", "1"],
    ["traffic", "--model", "llama3.1-8b", "--rate", "2/s", "--prompt", "200", "--output", "50"],
    ["hardware", "show"],
]


def _files(tmp_path: Path) -> dict[str, Path]:
    """The files of the review: malformed YAML, no ``name``, empty, a YAML list, and the H100 profile with a
    negative bf16 peak."""
    h100 = profiles.builtin_dir().joinpath("h100-sxm.yaml").read_text(encoding="utf-8")
    assert "\n  bf16: " in h100
    texts = {
        "bad": "name: x\n  bad: [\n",
        "noname": "foo: 1\n",
        "empty": "",
        "list": "- a\n- b\n",
        "negative": "\n".join("  bf16: -1.0e15" if line.startswith("  bf16: ") else line for line in h100.splitlines()),
    }
    out = {}
    for name, text in texts.items():
        out[name] = tmp_path / f"{name}.yaml"
        out[name].write_text(text, encoding="utf-8")
    return out


def _line_of(path: Path, start: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if line.startswith(start))


def _assert_bad_input(r: object, expected: str) -> None:
    from typer.testing import Result

    assert isinstance(r, Result)
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "Traceback" not in r.stderr
    assert r.exit_code == 2, r.stderr
    assert r.stderr.splitlines() == [expected]


@pytest.mark.parametrize("argv", HARDWARE_FILE_COMMANDS, ids=lambda argv: argv[0] if argv[0] != "hardware" else "show")
def test_a_bad_hardware_file_is_bad_input_naming_the_option(napkin: Run, tmp_path: Path, argv: list[str]) -> None:
    files = _files(tmp_path)
    bf16 = _line_of(files["negative"], "  bf16: ")
    expected = {
        "bad": f"{files['bad']}:2: not valid YAML (safe subset): mapping values are not allowed in this context",
        "noname": f"{files['noname']}: not a napkin hardware profile (it has no 'name' and no 'peak_flops' field)",
        "empty": f"{files['empty']}:1: a hardware profile must be a YAML mapping of fields",
        "list": f"{files['list']}:1: a hardware profile must be a YAML mapping of fields",
        "negative": f"{files['negative']}:{bf16}: peak_flops.bf16: '-1.0e15' must be positive and finite; expected a "
        "positive rate such as 989.5 TFLOP/s, 312e12 or 1979 TOPS",
    }
    for name, message in expected.items():
        r = napkin(*argv, "--hardware-file", str(files[name]))
        _assert_bad_input(r, f"napkin: error: --hardware-file: {message}")


@pytest.mark.parametrize("argv", [["memory", "--model", "llama-3-8b"], ["stack", "show"]], ids=lambda argv: argv[0])
def test_a_bad_stack_file_is_bad_input_naming_the_option(napkin: Run, tmp_path: Path, argv: list[str]) -> None:
    files = _files(tmp_path)
    expected = {
        "bad": f"{files['bad']}:2: not valid YAML (safe subset): mapping values are not allowed in this context",
        "noname": f"{files['noname']}: not a napkin stack profile (it has no 'name' and no 'training' field)",
        "empty": f"{files['empty']}:1: a stack profile must be a YAML mapping of fields",
        "list": f"{files['list']}:1: a stack profile must be a YAML mapping of fields",
    }
    for name, message in expected.items():
        _assert_bad_input(napkin(*argv, "--stack-file", str(files[name])), f"napkin: error: --stack-file: {message}")


def test_a_bad_cluster_file_is_bad_input_naming_the_option(napkin: Run, tmp_path: Path) -> None:
    files = _files(tmp_path)
    dgx = tmp_path / "dgx.yaml"
    source = Path(__file__).parent.parent / "clusters" / "dgx-h100.yaml"
    lines = source.read_text(encoding="utf-8").splitlines()
    at = next(n for n, line in enumerate(lines) if line.startswith("  bandwidth: "))
    lines[at] = "  bandwidth: -5"
    dgx.write_text("\n".join(lines), encoding="utf-8")
    expected = {
        "bad": f"{files['bad']}:2: not valid YAML (safe subset): mapping values are not allowed in this context",
        "empty": f"{files['empty']}:1: a cluster profile must be a YAML mapping of fields",
        "list": f"{files['list']}:1: a cluster profile must be a YAML mapping of fields",
    }
    argv = ["comm", "all-reduce", "--bytes", "1GB"]
    for name, message in expected.items():
        r = napkin(*argv, "--cluster-file", str(files[name]))
        _assert_bad_input(r, f"napkin: error: --cluster-file: {message}")
    _assert_bad_input(
        napkin(*argv, "--cluster-file", str(dgx)),
        f"napkin: error: --cluster-file: {dgx}:{at + 1}: scale_up.bandwidth: -5 must be positive and finite; "
        "expected a positive bandwidth such as 3.35 TB/s or 2039 GB/s",
    )


def test_validate_still_lists_each_problem_of_a_file(napkin: Run, tmp_path: Path) -> None:
    """``napkin hardware validate FILE`` checks files: it keeps its own report (each problem, exit 1)."""
    files = _files(tmp_path)
    r = napkin("hardware", "validate", str(files["bad"]), str(files["list"]))
    assert r.exit_code == 1
    assert r.stderr.splitlines() == [
        f"{files['bad']}:2: not valid YAML (safe subset): mapping values are not allowed in this context",
        f"{files['list']}:1: a hardware profile must be a YAML mapping of fields",
        "napkin: error: 2 problem(s) in 2 file(s)",
    ]
    r = napkin("cluster", "validate", str(files["list"]))
    assert r.exit_code == 1
    assert r.stderr.splitlines() == [
        f"{files['list']}:1: a cluster profile must be a YAML mapping of fields",
        "napkin: error: 1 problem(s)",
    ]


SERVE_PLAN = [
    "serve-plan",
    *("--model", "llama3.1-8b", "--rate", "2/s", "--prompt", "1000", "--output", "100", "--ttft-p90", "2s"),
]


def test_an_unknown_name_in_price_is_blamed_on_price(napkin: Run) -> None:
    r = napkin(*SERVE_PLAN, "--price", "zz=6")
    assert r.exit_code == 2, r.stderr
    [line] = r.stderr.splitlines()
    assert line.startswith("napkin: error: --price: unknown hardware 'zz'; known: "), line
    r = napkin(*SERVE_PLAN, "--price", "=6")
    assert r.stderr.splitlines() == [
        "napkin: error: --price: '' is not a profile name; give one such as h100 (see 'napkin hardware list')"
    ]
    assert r.exit_code == 2


def test_serve_plan_writes_rates_and_replicas_with_separators(napkin: Run) -> None:
    """A million requests/s was '1e+06 req/s' and its replicas '21469 replicas'."""
    r = napkin(
        "serve-plan",
        *("--model", "llama3.1-8b", "--rate", "1e6/s", "--prompt", "1000", "--output", "100", "--ttft-p90", "2s"),
        *("--hardware", "h100", "--top", "1"),
    )
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "Serve plan: llama3.1-8b at 1,000,000 req/s"
    assert any(line.split() == ["requests", "1,000,000/s,", "prompt", "1,000,", "output", "100"] for line in lines)
    [config] = [line for line in lines if line.lstrip().startswith("#1 ")]
    assert re.search(r"#1 +\d{1,3}(,\d{3})+ replicas × \d+ h100-sxm ", config), config


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["hardware", "show", "zz"], "NAME: unknown hardware 'zz'; "),
        (["cluster", "show", "zz"], "NAME: unknown cluster 'zz'; "),  # was 'cluster:', no input of 'cluster show'
        (["stack", "show", "zz"], "NAME: unknown stack 'zz'; "),
        (["cluster", "new", "mine", "--from", "zz"], "--from: unknown cluster 'zz'; "),  # was 'cluster:' too
        (["hardware", "new", "mine", "--from", "zz"], "--from: unknown hardware 'zz'; "),
        (["comm", "all-reduce", "--bytes", "1GB", "--cluster", "zz"], "--cluster: unknown cluster 'zz'; "),
    ],
)
def test_an_unknown_profile_name_is_blamed_on_the_argument_the_user_typed(
    napkin: Run, argv: list[str], expected: str
) -> None:
    r = napkin(*argv)
    assert r.exit_code == 2, r.stderr
    [line] = r.stderr.splitlines()
    assert line.startswith(f"napkin: error: {expected}"), line


def test_an_empty_cluster_name_is_blamed_on_the_argument(napkin: Run) -> None:
    r = napkin("cluster", "show", "")
    assert r.exit_code == 2
    assert r.stderr.splitlines() == [
        "napkin: error: NAME: '' is not a profile name; give one such as dgx-h100 (see 'napkin cluster list')"
    ]
