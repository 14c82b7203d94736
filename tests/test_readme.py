"""Every ``console`` block in the README is real output: this test runs each command and compares.

A documentation check: it proves the README shows what napkin prints, not that napkin is right (a wrong figure
would be copied in by ``--update``). ``tests/test_readme_figures.py`` checks the figures themselves against
published measurements, datasheets and hand-worked formulas.

Regenerate the blocks after a change with ``python -m tests.test_readme --update``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from napkin.cli import _app_for

README = Path(__file__).resolve().parent.parent / "README.md"
CI = README.parent / ".ci" / "run"
BLOCK = re.compile(r"```console\n\$ (napkin [^\n]*)\n(.*?)```", re.DOTALL)
WIDTH = "100"


def run(command: str) -> str:
    """The command's stdout as a 100-column terminal without colour shows it."""
    env = {"COLUMNS": WIDTH, "NO_COLOR": "1", "TERM": "dumb"}
    result = CliRunner().invoke(_app_for(shlex.split(command)[1:]), shlex.split(command)[1:], env=env)
    assert result.exit_code == 0, (command, result.stderr)
    return "\n".join(line.rstrip() for line in result.stdout.splitlines()).strip("\n") + "\n"


def blocks() -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(README.read_text(encoding="utf-8"))]


def test_readme_has_examples() -> None:
    commands = [command for command, _ in blocks()]
    assert "napkin train-time --params 70e9 --tokens 15e12 --gpus 1024" in commands
    assert "napkin max-model --gpus 8 --optimizer adamw" in commands
    assert len(commands) >= 6


@pytest.mark.parametrize(("command", "output"), blocks(), ids=[c for c, _ in blocks()])
def test_readme_example_is_true(command: str, output: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", WIDTH)
    assert run(command) == output


def test_readme_opens_with_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    first_block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    lines = [line for line in first_block.splitlines() if line and not line.startswith("#")]
    assert lines[0].endswith("napkin train-time --params 70e9 --tokens 15e12 --gpus 1024")
    assert lines[1].endswith("python -m pytest")
    finder = re.search(r"readme_test_command=\$\((.*)\)\n", CI.read_text(encoding="utf-8"))
    assert finder is not None
    ci = subprocess.run(  # .ci/run finds the README's test command itself rather than keeping a copy
        ["bash", "-c", finder.group(1)],
        cwd=README.parent,
        capture_output=True,
        text=True,
        check=True,
    )
    assert ci.stdout.strip() == lines[1]
    assert 'eval "$readme_test_command"' in CI.read_text(encoding="utf-8")
    assert "download.pytorch.org" not in lines[1]  # only the public package index


def update() -> None:
    text = README.read_text(encoding="utf-8")

    def fill(match: re.Match[str]) -> str:
        return f"```console\n$ {match.group(1)}\n{run(match.group(1))}```"

    with tempfile.TemporaryDirectory() as config:  # as the tests run them: never the user's own config dir
        os.environ.update({"COLUMNS": WIDTH, "NO_COLOR": "1", "NAPKIN_CONFIG_DIR": config})
        README.write_text(BLOCK.sub(fill, text), encoding="utf-8")


if __name__ == "__main__" and "--update" in sys.argv:
    update()
