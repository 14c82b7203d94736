"""napkin's command group and options on typer: click's usage errors as one line, an option's once-bare spelling
given its value, and option values that need no conversion taken as they are (start-up time)."""

from __future__ import annotations

import sys
from enum import Enum
from typing import Any, Final

import typer
from typer._click import exceptions as click_exceptions  # typer vendors click (pyproject: typer>=0.29)

from napkin.cli.common import error, note, say

#: Options that once were flags and now take a value: (command, option) → what the option alone means. The old
#: bare spelling works for one release, with a note (README, conventions).
BARE_OPTIONS: Final = {("traffic", "--expert-parallel"): ("tp", "the replica's TP degree")}


def _an_option(arg: str) -> bool:
    """Whether ``arg`` is an option (``--json``, ``-t``), not a value such as ``-1``."""
    return arg.startswith("-") and not arg[1:2].isdigit() and arg[1:2] != "."


def bare_options(args: list[str]) -> list[str]:
    """``args`` with each once-bare option given the value it meant (``traffic --expert-parallel`` → ``… tp``)."""
    command = next((arg for arg in args if not arg.startswith("-")), None)
    out = list(args)
    for (name, option), (value, meaning) in BARE_OPTIONS.items():
        if command != name:
            continue
        for i in range(len(out) - 1, -1, -1):
            if out[i] == option and (i + 1 == len(out) or _an_option(out[i + 1])):
                out.insert(i + 1, value)
                note(f"{option} alone is deprecated and goes in the next release; write {option} N ({meaning})")
    return out


class NapkinOption(typer.core.TyperOption):
    """A typer option that takes a value needing no conversion as it is: not given (None), a string for a ``str``
    option, a member of the option's Enum (its default). typer converts every option's value, given or not, through
    a pydantic TypeAdapter it builds for that option (``TyperOption.process_value``), 43 for ``napkin plan``, about
    20 ms of its CPU time with the garbage collector on. For these values its conversion is the value itself
    (``str()`` of a string; an Enum member is found among the choices by identity), so the result is the same;
    anything else (a string for an Enum, a path, a list) is typer's to convert, as before. tests/test_startup.py
    checks that both agree on every option of every command."""

    def process_value(self, ctx: Any, value: Any) -> Any:
        kind = getattr(getattr(self, "type_descriptor", None), "annotation", None)  # None: a typer without it
        if self.multiple or self.nargs != 1 or kind is None or not _as_is(kind, value):
            return super().process_value(ctx, value)
        if self.required and self.value_is_missing(value):  # what typer does after converting
            raise click_exceptions.MissingParameter(ctx=ctx, param=self)
        if self.callback is not None:
            value = self.callback(ctx, self, value)
        return value


def _as_is(kind: Any, value: Any) -> bool:
    """Whether typer's conversion of ``value`` for an option of type ``kind`` is ``value`` itself."""
    if value is None:
        return True
    if kind is str:
        return type(value) is str
    return isinstance(kind, type) and issubclass(kind, Enum) and type(value) is kind


def _show_help(ctx: Any, param: Any, value: bool) -> None:
    """--help's page, written as napkin writes (``say``): on an ASCII terminal in ASCII spellings, where click's echo
    re-wrapped the stream as UTF-8 and sent '×' and '·' as bytes it cannot show."""
    if value and not ctx.resilient_parsing:
        say(ctx.get_help())
        ctx.exit()


def _help_said(command: Any) -> None:
    """``command``'s --help option, once click makes it, printing through ``_show_help``."""
    made = command.get_help_option

    def get_help_option(ctx: Any) -> Any:
        option = made(ctx)
        if option is not None:
            option.callback = _show_help
        return option

    command.get_help_option = get_help_option


def plain_options(command: Any) -> None:
    """Make every typer option of ``command`` (and of its commands, if a group) a NapkinOption, and its --help
    write as napkin writes (``_help_said``)."""
    for param in command.params:
        if type(param) is typer.core.TyperOption:
            param.__class__ = NapkinOption
    _help_said(command)
    for sub in getattr(command, "commands", {}).values():
        plain_options(sub)


class NapkinGroup(typer.core.TyperGroup):
    """Click's usage errors as one line (``napkin: error: …``), exit code 2, no box, no traceback."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        plain_options(self)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return list(super().parse_args(ctx, bare_options(args)))

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            rv = super().main(*args, **kwargs)
        except click_exceptions.NoArgsIsHelpError as exc:
            # a bare group (``napkin``, ``napkin flops``) asks for its help: print it, as --help does
            say(exc.format_message())
            sys.exit(0)
        except click_exceptions.UsageError as exc:
            command = exc.ctx.command_path if exc.ctx else "napkin"
            message = exc.format_message().replace("Value error, ", "")
            error(f"{message} (see '{command} --help')")
            sys.exit(2)
        except click_exceptions.ClickException as exc:
            error(exc.format_message())
            sys.exit(exc.exit_code)
        except typer.Abort as exc:
            if isinstance(exc.__cause__, KeyboardInterrupt):
                raise KeyboardInterrupt from None  # main() reports it: exit 130
            say("napkin: aborted", err=True)
            sys.exit(1)
        if rv == 130:  # typer's answer to Ctrl-C in a command: say it, as main() does for the rest
            raise KeyboardInterrupt
        sys.exit(rv if isinstance(rv, int) else 0)


__all__ = ["BARE_OPTIONS", "NapkinGroup", "NapkinOption", "bare_options", "plain_options"]
