"""The user-facing exception hierarchy.

Every error a user can cause is one of these; the CLI converts them into a single line on stderr
(``napkin: error: …``) and an exit code, once, at its boundary. Messages are written for people:
they name the input that was wrong and say what is accepted.
"""


class NapkinError(Exception):
    """Base class: a problem the user can fix. Exit code 1 unless a subclass says otherwise.

    ``fields`` are the inputs the message names, as the library calls them (``gpus``, ``hardware_file``); the
    CLI writes each as its flag (``--gpus``), in one place (``napkin.cli.common``). Messages are written in the
    library's words; a command line quoted in them ('napkin hardware list') is left as it is.
    """

    exit_code = 1
    fields: tuple[str, ...] = ()


class UsageError(NapkinError):
    """A bad value or combination of inputs (exit code 2, like a usage error).

    ``field`` names the input at fault as the library calls it (``gpus``, ``params``) and ``also`` any
    other inputs the message names; the CLI writes each as its flag (``--gpus``): ``field`` where the message
    first names it (the same word later is prose: "context is required (no default context length)"), every
    mention of an ``also`` input.
    """

    exit_code = 2

    def __init__(self, message: str, field: str | None = None, also: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.field = field
        self.fields = tuple(f for f in (field, *also) if f)


class ProfileError(NapkinError):
    """A hardware profile or model preset file that cannot be read or is invalid.

    ``problems`` lists each problem on its own (``file:line: field: message``); the message joins them.
    """

    def __init__(self, message: str, problems: list[str] | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.problems = problems or [message]
        self.fields = (field,) if field else ()


class ProfileFileError(ProfileError):
    """A profile file the user named (``--hardware-file``, ``--stack-file``, ``--cluster-file``) that is invalid: bad
    input like any other (exit code 2), the message led by the input it came from; ``problems`` as the file's."""

    exit_code = 2


class MissingDependencyError(NapkinError):
    """An optional dependency (torch, for ``napkin bench`` and ``napkin verify``) is not installed."""
