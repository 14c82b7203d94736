"""Commands that do not benchmark never import torch (timing lives in examples/startup_benchmark.py)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from enum import EnumMeta
from typing import Any

import typer
import typer.main
from typer._click import core as click_core

PROBE = """
import sys
from typer.testing import CliRunner
import napkin.cli
assert "torch" not in sys.modules, "import napkin.cli imported torch"
runner = CliRunner()
for args in (["train-time", "-N", "7B", "-D", "1T", "-G", "8", "--json"], ["max-model", "--json"],
             ["memory", "--model", "llama3-8b", "--micro-batch", "2", "--json"], ["hardware", "list"], ["dtypes"],
             ["optimal", "--compute", "1e24"], ["flops", "matmul", "8", "8", "8"]):
    result = runner.invoke(napkin.cli.app, args)
    assert result.exit_code == 0, (args, result.stderr)
    assert "torch" not in sys.modules, args
heavy = sorted(m for m in ("torch", "numpy", "platformdirs", "rich.progress") if m in sys.modules)
print("ok", heavy)
"""


def test_cli_never_imports_torch() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok []"


def test_each_command_is_found_where_it_is_declared() -> None:
    """The table that lets a command import its own module alone names, for every command and group of the full
    app, the module that declares it; the one-command app holds the same command (or group) as the full one."""
    from napkin import cli

    full = cli.full_app()
    commands = {str(c.name): c for c in full.registered_commands}
    groups = {str(g.name): g for g in full.registered_groups}
    assert set(cli.COMMANDS) == set(commands)
    assert list(cli.GROUPS) == list(groups)
    for name, command in commands.items():
        assert command.callback is not None
        assert command.callback.__module__ == f"napkin.cli.{cli.COMMANDS[name]}", name
        (single,) = cli._app_for([name, "--help"]).registered_commands
        assert single is command
    for name, group in groups.items():
        (single_group,) = cli._app_for(["--json", name]).registered_groups
        assert single_group.typer_instance is group.typer_instance
        assert single_group.name == name


def test_a_command_imports_only_its_own_module() -> None:
    probe = (
        "import sys; from napkin.cli import _app_for; _app_for(['plan']); "
        "print(sorted(m for m in sys.modules if m.startswith('napkin.cli.')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert (
        out.stdout.strip() == "['napkin.cli.common', 'napkin.cli.group', 'napkin.cli.options', 'napkin.cli.plan_cmds']"
    )


def _options(command: Any) -> Iterator[tuple[Any, Any]]:
    """(command, option) for every option of ``command`` and of its commands, recursively."""
    for param in command.params:
        if isinstance(param, typer.core.TyperOption):
            yield command, param
    for sub in getattr(command, "commands", {}).values():
        yield from _options(sub)


def test_options_taken_as_given_are_what_typer_makes_of_them() -> None:
    """Every option of every command is a NapkinOption, and for each value it takes as it is (not given, the
    default, a string, each member of its Enum) the result is the one typer's own conversion gives."""
    from napkin import cli
    from napkin.cli.group import NapkinOption

    root = typer.main.get_command(cli.full_app())
    found = list(_options(root))
    assert len(found) > 200
    for command, option in found:
        assert type(option) is NapkinOption, (command.name, option.name)
        kind = option.type_descriptor.annotation
        values = [None, option.default, "8", "llama3-70b", "", *(list(kind) if isinstance(kind, EnumMeta) else [])]
        for value in values:
            ctx = click_core.Context(command)
            if option.callback is not None or option.required:
                continue  # their callbacks act (--version exits); typer's path and napkin's share that step
            ours = _outcome(NapkinOption.process_value, option, ctx, value)
            theirs = _outcome(typer.core.TyperOption.process_value, option, ctx, value)
            assert ours == theirs, (command.name, option.name, value)


def _outcome(convert: Callable[[Any, Any, Any], Any], option: Any, ctx: Any, value: Any) -> tuple[Any, ...]:
    """What a conversion gives: its value and the value's type, or the error it raises and its message."""
    try:
        out = convert(option, ctx, value)
    except Exception as exc:
        return type(exc), str(exc)
    return out, type(out)


def test_the_live_checks_keep_the_garbage_collector() -> None:
    """The command runs without the cyclic collector (napkin/_entry.py), except bench and verify, which run torch
    for seconds; the library leaves the collector as it was."""
    probe = (
        "import atexit, gc, sys; atexit.register(lambda: print(gc.isenabled())); "
        "sys.argv = ['napkin', *sys.argv[1:]]; from napkin._entry import main; main()"
    )
    for args, enabled in ((["dtypes"], "False"), (["bench", "--help"], "True"), (["verify", "--help"], "True")):
        out = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, check=True)
        assert out.stdout.splitlines()[-1] == enabled, args
    library = subprocess.run(
        [
            sys.executable,
            "-c",
            "import gc, napkin; napkin.plan(model='llama3-8b', gpus=8, global_batch=8); print(gc.isenabled())",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert library.stdout.strip() == "True"
